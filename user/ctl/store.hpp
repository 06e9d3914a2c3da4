// Where the controller state lives. The persistent records are the structs
// of include/mrc/uapi/ctl.h, reached through views (Regions): the mmapped
// BPF arrays pinned under /sys/fs/bpf/mrc (PinnedStore, pinned_store.hpp) or
// plain heap memory (MemStore, for unit tests). The EV report queue and the
// QP / per-EV report tables are behind virtual calls (BPF QUEUE and HASH maps
// or std containers). The controller model (controller.hpp) and the client
// (client.hpp) work on either backend with the same code.
//
// Concurrency: one writer (mrcd) for the records. Every record starts with a
// sequence counter that is odd while a write is in progress; readers copy
// with read_record() and retry on a change. mrc_ctl_dev.gen is bumped after
// every committed change (bump_gen()).
#pragma once

#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <span>
#include <vector>

#include "mrc/result.hpp"
#include "mrc/uapi/ctl.h"

namespace mrc::ctl {

struct Regions {
  mrc_ctl_dev* dev = nullptr;
  std::span<mrc_ctl_port> ports;  // index = port number
  std::span<mrc_ctl_fmt> fmts;
  std::span<mrc_ctl_evp> evps;
  std::span<mrc_ctl_ev_entry> evs;
  std::span<mrc_ctl_cc> ccs;
};

struct QpKeyLess {
  bool operator()(const mrc_ctl_qp_key& a, const mrc_ctl_qp_key& b) const {
    if (a.pid != b.pid) return a.pid < b.pid;
    if (a.dev != b.dev) return a.dev < b.dev;
    return a.qpn < b.qpn;
  }
};
struct EvStatKeyLess {
  bool operator()(const mrc_ctl_evstat_key& a, const mrc_ctl_evstat_key& b) const {
    if (a.profile_id != b.profile_id) return a.profile_id < b.profile_id;
    if (a.pid != b.pid) return a.pid < b.pid;
    if (a.dev != b.dev) return a.dev < b.dev;
    if (a.wire != b.wire) return a.wire < b.wire;
    return a.port < b.port;
  }
};

using QpList = std::vector<std::pair<mrc_ctl_qp_key, mrc_ctl_qp_report>>;
using EvStatList = std::vector<std::pair<mrc_ctl_evstat_key, mrc_ctl_evstat>>;

class Store {
 public:
  virtual ~Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  const Regions& regions() const { return r_; }
  Regions& regions() { return r_; }
  mrc_ctl_dev& dev() { return *r_.dev; }
  const mrc_ctl_dev& dev() const { return *r_.dev; }

  // True once the state has been initialised (magic written).
  bool initialised() const;
  // Writes magic/version into a fresh device record (keeps existing state).
  void initialise();

  // EV reports (mrc_ctl_evq). push: E2BIG when the queue is full; the caller
  // counts the drop in dev().evq_dropped (record_push() does both).
  virtual Status push_report(const mrc_ctl_ev_report& r) = 0;
  // Pops up to out.size() reports in FIFO order.
  virtual Result<size_t> pop_reports(std::span<mrc_ctl_ev_report> out) = 0;

  // QP reports (mrc_ctl_qps).
  virtual Status put_qp(const mrc_ctl_qp_key& k, const mrc_ctl_qp_report& v) = 0;
  virtual Status del_qp(const mrc_ctl_qp_key& k) = 0;
  virtual Result<QpList> list_qps() const = 0;

  // Per-EV counters (mrc_ctl_evstat).
  virtual Status put_evstat(const mrc_ctl_evstat_key& k, const mrc_ctl_evstat& v) = 0;
  virtual Status del_evstat(const mrc_ctl_evstat_key& k) = 0;
  virtual Result<EvStatList> list_evstats() const = 0;

  // Pushes a report and accounts it: evq_pushed on success, evq_dropped
  // (and the returned E2BIG) when the queue is full. Sets r.dropped_seen.
  Status record_push(mrc_ctl_ev_report r);

 protected:
  Store() = default;
  Regions r_;
};

// In-memory backend with the capacities of the BPF maps.
class MemStore final : public Store {
 public:
  MemStore();
  Status push_report(const mrc_ctl_ev_report& r) override;
  Result<size_t> pop_reports(std::span<mrc_ctl_ev_report> out) override;
  Status put_qp(const mrc_ctl_qp_key& k, const mrc_ctl_qp_report& v) override;
  Status del_qp(const mrc_ctl_qp_key& k) override;
  Result<QpList> list_qps() const override;
  Status put_evstat(const mrc_ctl_evstat_key& k, const mrc_ctl_evstat& v) override;
  Status del_evstat(const mrc_ctl_evstat_key& k) override;
  Result<EvStatList> list_evstats() const override;

  // Test knob: a smaller report queue.
  void set_queue_capacity(size_t n) { evq_cap_ = n; }

 private:
  mrc_ctl_dev dev_{};
  std::vector<mrc_ctl_port> ports_;
  std::vector<mrc_ctl_fmt> fmts_;
  std::vector<mrc_ctl_evp> evps_;
  std::vector<mrc_ctl_ev_entry> evs_;
  std::vector<mrc_ctl_cc> ccs_;
  std::deque<mrc_ctl_ev_report> evq_;
  size_t evq_cap_ = MRC_CTL_EVQ_DEPTH;
  std::map<mrc_ctl_qp_key, mrc_ctl_qp_report, QpKeyLess> qps_;
  std::map<mrc_ctl_evstat_key, mrc_ctl_evstat, EvStatKeyLess> evstats_;
};

// ---------------------------------------------------------------------------
// Seqlock helpers.

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}
inline uint64_t load_acquire(const uint64_t& v) { return __atomic_load_n(&v, __ATOMIC_ACQUIRE); }
inline uint32_t load_acquire32(const uint32_t& v) { return __atomic_load_n(&v, __ATOMIC_ACQUIRE); }

// Writer side: the record's seq is odd for the lifetime of the guard.
template <class Rec>
class RecordWrite {
 public:
  explicit RecordWrite(Rec& r) : r_(r) {
    __atomic_store_n(&r_.seq, r_.seq | 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
  }
  ~RecordWrite() {
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&r_.seq, (r_.seq | 1) + 1, __ATOMIC_RELAXED);
  }
  RecordWrite(const RecordWrite&) = delete;
  RecordWrite& operator=(const RecordWrite&) = delete;

 private:
  Rec& r_;
};

// Reader side: copies `src` into `out` (and whatever `extra` copies, e.g. the
// EV entries of a profile) consistently. False after `tries` torn reads
// (a writer died mid-write: the record stays odd until mrcd repairs it).
template <class Rec, class Extra>
bool read_record(const Rec& src, Rec* out, Extra&& extra, int tries = 1000) {
  for (int i = 0; i < tries; i++) {
    uint64_t s1 = load_acquire(src.seq);
    if (s1 & 1) {
      cpu_relax();
      continue;
    }
    std::memcpy(static_cast<void*>(out), &src, sizeof(Rec));
    extra();
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&src.seq, __ATOMIC_RELAXED) == s1) return true;
  }
  return false;
}
template <class Rec>
bool read_record(const Rec& src, Rec* out, int tries = 1000) {
  return read_record(
      src, out, [] {}, tries);
}

// After a committed change: readers polling dev.gen notice it.
inline void bump_gen(mrc_ctl_dev& d) { __atomic_add_fetch(&d.gen, 1, __ATOMIC_RELEASE); }
inline uint64_t read_gen(const mrc_ctl_dev& d) { return load_acquire(d.gen); }

}  // namespace mrc::ctl
