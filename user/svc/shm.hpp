// The shared area of one client of mrc-serviced (Documentation/service.md,
// "Data: shared rings"): a sealed memfd the service creates at HELLO and
// both sides map. It holds a header and rings: per QP a send and a receive
// ring (client produces, service consumes), per CQ a completion ring
// (service produces, client consumes), one ready ring (QP handles with new
// posts) and one async event ring.
//
// Every ring is Vyukov's bounded queue with a sequence number per slot:
// slot i is free for the producer at index p when seq == p, published when
// seq == p + 1, and freed by the consumer with seq = p + size. The side in
// the service keeps its own index, size and mask (ServiceRing) and reads a
// slot only when its seq equals exactly what it expects, so a client that
// writes garbage into a ring (seq, index or entry) can stall or break only
// its own queue: the service copies an entry once and validates the copy.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "mrc/mrc.hpp"

namespace mrc::svc {

constexpr uint32_t kAreaMagic = 0x41435253;  // "SRCA"
constexpr uint32_t kAreaVersion = 1;
constexpr size_t kLine = 64;

enum class SvcState : uint32_t { kRunning = 1, kDraining = 2, kFailed = 3 };

// A posted send as the client writes it (application addresses: iovas).
struct Sqe {
  uint64_t wr_id, remote_addr;
  uint32_t rkey, imm_data, send_flags;
  uint8_t opcode, num_sge, rsvd[2];
  Sge sg[kMaxSge];
};
static_assert(sizeof(Sqe) == 288);

struct Rqe {
  uint64_t wr_id;
};

// Every value of the rings is plain data: a copy is all the service reads.
static_assert(std::is_trivially_copyable_v<Sqe> && std::is_trivially_copyable_v<Wc> &&
              std::is_trivially_copyable_v<AsyncEvent>);
static_assert(std::atomic<uint64_t>::is_always_lock_free &&
              std::atomic<uint32_t>::is_always_lock_free);

template <class T>
struct Slot {
  std::atomic<uint64_t> seq;
  T v;
};

// The client's shared index of a ring: the producer claim index of a ring
// the client produces, the consumer index of one it consumes.
struct alignas(kLine) RingIdx {
  std::atomic<uint64_t> idx;
};

// Bytes of a ring of n slots of T (with its index line), a multiple of 64.
template <class T>
constexpr uint64_t ring_bytes(uint64_t n) {
  return (sizeof(RingIdx) + n * sizeof(Slot<T>) + kLine - 1) / kLine * kLine;
}

struct alignas(kLine) AreaHdr {
  uint32_t magic, version, client_id, rsvd;
  uint64_t area_size;
  std::atomic<uint32_t> svc_state;        // SvcState, written by the service
  std::atomic<uint32_t> engine_sleeping;  // set by the service before it sleeps
  // Fixed rings (offsets from the start of the area, sizes in slots).
  uint64_t ready_off, ready_n, async_off, async_n;
};
static_assert(sizeof(AreaHdr) == kLine);

// A QP's control words: the client sets queued 0 -> 1 when it pushes the QP
// handle onto the ready ring, the service clears it before draining.
// sq_retired / rq_retired (service.md section 5): how many of the QP's send
// and receive work requests the service has completed (their completion is
// in a CQ ring, or was for an unsignaled send); written by the service after
// the completions, read by the client only when the service is gone, to
// flush the rest.
struct alignas(kLine) QpCtl {
  std::atomic<uint32_t> queued;
  uint32_t rsvd;
  std::atomic<uint64_t> sq_retired, rq_retired;
};
static_assert(sizeof(QpCtl) == kLine);
// A CQ's control words: armed by req_notify (client), cleared by the
// service when it fires the channel, which counts fired up for the client
// (get_event counts it down);
// overflow: the service found the ring full.
struct alignas(kLine) CqCtl {
  std::atomic<uint32_t> armed, fired, overflow;
  std::atomic<uint32_t> kick;  // 1 while a kCqKick entry of this CQ is in the ready ring
};
// A ready-ring entry with this bit names a CQ, not a QP: req_notify found a
// completion that raced with arming and asks the service to make the
// channel's descriptor readable (only the service can write it).
constexpr uint32_t kCqKick = 1u << 31;

// Where a QP's or a CQ's pieces live in the area (replies of CREATE_QP and
// CREATE_CQ; the service keeps its own copy).
struct QpLayout {
  uint64_t ctl_off, sq_off, sq_n, rq_off, rq_n;
};
struct CqLayout {
  uint64_t ctl_off, ring_off, ring_n;
};

inline uint64_t pow2_at_least(uint64_t n) {
  uint64_t p = 2;
  while (p < n) p <<= 1;
  return p;
}

// The service's end of a ring: its own position, size and base pointer.
// consume() and produce() only ever touch base[pos & mask].
template <class T>
class ServiceRing {
 public:
  ServiceRing() = default;
  // area + off must hold ring_bytes<T>(n) (checked by the caller, which
  // chose off and n).
  ServiceRing(uint8_t* area, uint64_t off, uint64_t n)
      : idx_(reinterpret_cast<RingIdx*>(area + off)),
        slots_(reinterpret_cast<Slot<T>*>(area + off + sizeof(RingIdx))),
        n_(n),
        mask_(n - 1) {}
  // Fresh ring: every slot free for its index (the service does this before
  // the client sees the ring).
  void init() {
    idx_->idx.store(0, std::memory_order_relaxed);
    for (uint64_t i = 0; i < n_; i++) slots_[i].seq.store(i, std::memory_order_relaxed);
  }
  // The next published entry, copied; false when the slot is not published
  // (empty, a client still writing it, or garbage).
  bool consume(T& out) {
    Slot<T>& s = slots_[pos_ & mask_];
    if (s.seq.load(std::memory_order_acquire) != pos_ + 1) return false;
    std::memcpy(static_cast<void*>(&out), const_cast<const T*>(&s.v), sizeof(T));
    s.seq.store(pos_ + n_, std::memory_order_release);
    pos_++;
    return true;
  }
  bool ready() const {
    return slots_[pos_ & mask_].seq.load(std::memory_order_acquire) == pos_ + 1;
  }
  // Publishes v; false when the slot is not free (full, or garbage).
  bool produce(const T& v) {
    Slot<T>& s = slots_[pos_ & mask_];
    if (s.seq.load(std::memory_order_acquire) != pos_) return false;
    std::memcpy(static_cast<void*>(&s.v), &v, sizeof(T));
    s.seq.store(pos_ + 1, std::memory_order_release);
    pos_++;
    return true;
  }
  uint64_t pos() const { return pos_; }
  uint64_t size() const { return n_; }

 private:
  RingIdx* idx_ = nullptr;
  Slot<T>* slots_ = nullptr;
  uint64_t n_ = 0, mask_ = 0, pos_ = 0;
};

// The client's end: many threads push (a ring the service consumes) or pop
// (a ring the service produces), claiming indexes with a CAS on the shared
// index.
template <class T>
class ClientRing {
 public:
  ClientRing() = default;
  ClientRing(uint8_t* area, uint64_t off, uint64_t n)
      : idx_(reinterpret_cast<RingIdx*>(area + off)),
        slots_(reinterpret_cast<Slot<T>*>(area + off + sizeof(RingIdx))),
        mask_(n - 1) {}
  bool push(const T& v) {
    return push(v, [](uint64_t) {});
  }
  // push() that calls at(pos) with the claimed index before publishing.
  template <class F>
  bool push(const T& v, F&& at) {
    uint64_t pos = idx_->idx.load(std::memory_order_relaxed);
    for (;;) {
      Slot<T>& s = slots_[pos & mask_];
      const uint64_t seq = s.seq.load(std::memory_order_acquire);
      const int64_t d = int64_t(seq - pos);
      if (d == 0) {
        if (idx_->idx.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          s.v = v;
          at(pos);
          s.seq.store(pos + 1, std::memory_order_release);
          return true;
        }
      } else if (d < 0) {
        return false;  // full
      } else {
        pos = idx_->idx.load(std::memory_order_relaxed);
      }
    }
  }
  bool pop(T& out) {
    uint64_t pos = idx_->idx.load(std::memory_order_relaxed);
    for (;;) {
      Slot<T>& s = slots_[pos & mask_];
      const uint64_t seq = s.seq.load(std::memory_order_acquire);
      const int64_t d = int64_t(seq - (pos + 1));
      if (d == 0) {
        if (idx_->idx.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          out = s.v;
          s.seq.store(pos + mask_ + 1, std::memory_order_release);
          return true;
        }
      } else if (d < 0) {
        return false;  // empty
      } else {
        pos = idx_->idx.load(std::memory_order_relaxed);
      }
    }
  }
  // The shared index (producer claims or consumer position).
  uint64_t index() const { return idx_->idx.load(std::memory_order_acquire); }
  uint64_t size() const { return mask_ + 1; }
  // For a ring the service produced, once the service is gone: the first
  // free slot after the published entries (an unpublished, half-written
  // entry is overwritten), or false when the ring is full. The caller is
  // then the only producer and keeps the position for produce_at().
  bool producer_pos(uint64_t& out) const {
    uint64_t pos = index();
    for (uint64_t k = 0; k <= mask_; k++, pos++) {
      const uint64_t seq = slots_[pos & mask_].seq.load(std::memory_order_acquire);
      if (seq == pos) {
        out = pos;
        return true;
      }
      if (seq != pos + 1) return false;  // a consumed slot not yet freed: full
    }
    return false;
  }
  // Publishes v at pos when that slot is free (the caller's own producer
  // position, advanced on success).
  bool produce_at(uint64_t& pos, const T& v) {
    Slot<T>& s = slots_[pos & mask_];
    if (s.seq.load(std::memory_order_acquire) != pos) return false;
    s.v = v;
    s.seq.store(pos + 1, std::memory_order_release);
    pos++;
    return true;
  }
  bool empty() const {
    const uint64_t pos = idx_->idx.load(std::memory_order_acquire);
    return slots_[pos & mask_].seq.load(std::memory_order_acquire) != pos + 1;
  }

 private:
  RingIdx* idx_ = nullptr;
  Slot<T>* slots_ = nullptr;
  uint64_t mask_ = 0;
};

// Space in the area, first fit (the service's own bookkeeping; nothing of
// it is in shared memory).
class AreaAlloc {
 public:
  explicit AreaAlloc(uint64_t size = 0);
  // Offset of len bytes (rounded to 64), or 0 when none is left (offset 0
  // is the header, never handed out).
  uint64_t alloc(uint64_t len);
  void free(uint64_t off, uint64_t len);
  uint64_t free_bytes() const;

 private:
  struct Hole {
    uint64_t off, len;
  };
  std::vector<Hole> holes_;  // sorted by off, coalesced
};

}  // namespace mrc::svc
