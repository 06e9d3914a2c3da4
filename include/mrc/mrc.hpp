// libmrc: the application API of mrc (C++). Modeled on the OCP MRC 1.0
// application API (mrc.h) and libibverbs: a device opened on a set of plane
// interfaces, protection domains, memory regions, completion queues with
// completion channels, QPs with the RST -> INIT -> RTR -> RTS -> ERR state
// machine and the MRC attributes, RDMA WRITE and WRITE-with-immediate.
// Documentation/api.md lists every call next to its mrc.h / verbs name; the
// C API is include/mrc/mrc.h.
//
// Threads: one engine thread per Context runs the protocol over AF_XDP.
// Posting and polling are lock-free and may be called from any thread;
// control calls (create/modify/destroy, reg_mr) are serialized with the
// engine thread and may block briefly.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mrc/config.hpp"
#include "mrc/result.hpp"
#include "mrc/types.hpp"
#include "mrc/uapi/maps.h"

namespace mrc {

// API versions (MAJOR << 24 | MINOR << 16 | SUB), as mrc_api_ver.h encodes them.
constexpr uint32_t api_version(uint32_t major, uint32_t minor, uint32_t sub) {
  return major << 24 | minor << 16 | sub;
}
constexpr uint32_t kApiVersion = api_version(1, 0, 1);
constexpr uint32_t kVendorApiVersion = api_version(0, 1, 0);

// How the engine thread sends frames (Documentation/xdp-tx.md).
enum class TxBackend : uint8_t {
  kXsk,   // AF_XDP TX rings (copy mode on veth: every frame becomes an skb)
  kLive,  // XDP live frames (xdp::LiveTx): open() fails if the kernel or the
          // privileges do not allow it
  kAuto,  // live frames where they work, else AF_XDP (the reason: tx_note())
};
const char* to_string(TxBackend b);

// Who runs the engine (receive, timers, transmit, completions).
enum class Progress : uint8_t {
  kThread,       // the device's engine thread, always (the default)
  kApplication,  // the threads that poll: Cq::poll() with nothing to return and
                 // Context::progress() run the engine in the caller's thread,
                 // so a post and its packets, or an arrival and its
                 // completion, cost no thread wakeup. The engine thread stays
                 // as a fallback: it runs only when no application thread
                 // has driven progress for progress_idle_us.
};
const char* to_string(Progress p);

// A random first PSN (24 bits, from the kernel's CSPRNG) for a QP: an
// attacker who cannot see the traffic cannot guess where its window is
// (Documentation/security.md). Pass it as sq_psn here and rq_psn there.
uint32_t random_psn();

// Who runs the device (Documentation/service.md, "How libmrc finds the
// service"): kAuto uses the host service mrc-serviced when its socket
// accepts the connection and runs the device in this process otherwise;
// the environment variable MRC_MODE (auto, service, exclusive) overrides
// kAuto. Context::mode() says which mode a device got and why.
enum class DeviceMode : uint8_t {
  kAuto,       // the service when it runs, else exclusive
  kService,    // the service, or open() fails
  kExclusive,  // this process owns the planes (the in-process device)
};
const char* to_string(DeviceMode m);

// How the engine thread is scheduled (Documentation/api.md, "Engine thread
// scheduling"; service.md section 6). The thread competes with the
// application's threads for the CPUs; TCP's work runs in softirq, which a
// busy task does not starve, so mrc raises its engine thread by default.
enum class EngineSched : uint8_t {
  kDefault,    // $MRC_ENGINE_SCHED when set, else kNice
  kNormal,     // SCHED_OTHER at the process's nice value (mrc before 2026-12-02)
  kNice,       // SCHED_OTHER at nice engine_nice (-10): a raised CFS weight; needs
               // CAP_SYS_NICE or RLIMIT_NICE, else kNormal (engine_sched_reason says why)
  kFifo,       // SCHED_FIFO at engine_rt_priority while it serves bursts; after
               // engine_rt_burst_us of work without a sleep it drops to kNice
               // until it next sleeps, and it never spins idle at real-time
               // priority, so it cannot starve the host. Needs CAP_SYS_NICE
               // (or RLIMIT_RTPRIO), else kNice, else kNormal
  kDedicated,  // pinned to engine_cpu (required), never sleeps (polls its
               // sockets and rings), at kNice's weight: for a spare core
};
inline const char* to_string(EngineSched s) {
  switch (s) {
    case EngineSched::kDefault:
      return "default";
    case EngineSched::kNormal:
      return "normal";
    case EngineSched::kNice:
      return "nice";
    case EngineSched::kFifo:
      return "fifo";
    case EngineSched::kDedicated:
      return "dedicated";
  }
  return "?";
}
// "default", "normal", "nice", "fifo", "dedicated"; EINVAL with a sentence
// naming the modes otherwise.
Result<EngineSched> parse_engine_sched(std::string_view name);

// Memory for registration that the host service places into with no copy
// and no remapping of the application's pages (service.md, "Memory"): `length`
// bytes rounded up to whole pages, zeroed, read-write (a sealed memfd mapped
// shared; in exclusive mode the engine uses it like any memory). Register it
// with reg_mr in either mode. EINVAL for a zero length or more than 1 TiB.
Result<void*> alloc_buf(size_t length);
// Frees what alloc_buf returned, with the same length. EINVAL for any other
// address or length (nothing is unmapped), EBUSY while a memory region of
// this process still covers part of it (deregister first).
Status free_buf(void* buf, size_t length);

struct DeviceOptions {
  DeviceMode mode = DeviceMode::kAuto;
  // The service's socket; empty: $MRC_SERVICE_SOCKET, else /run/mrc/service.sock.
  std::string service_socket;
  // Plane interfaces, in port order: the first is port 1.
  std::vector<std::string> interfaces;
  uint16_t udp_port = MRC_UDP_PORT_DEFAULT;
  // Pinned objects of mrcd. When the directory holds mrcd's maps the device
  // uses them (mrcd owns the XDP program); otherwise it loads and attaches
  // its own copy of bpf/mrc_xdp.bpf.c and removes it on close.
  std::string pin_dir = MRC_PIN_DIR_DEFAULT;
  bool use_mrcd = true;
  uint32_t queues = 0;         // rx queues per interface with a socket; 0 = all
  uint32_t frame_size = 4096;  // UMEM frame size (2048 or 4096)
  uint32_t umem_frames = 16384;
  // UMEM frames one packet may fill (1..17). 1: single-buffer AF_XDP, a
  // packet fits one frame. More: multi-buffer AF_XDP (XDP_USE_SG, Linux
  // 6.6+): packets up to about frame_chunks x frame_size bytes, sent and
  // received as several descriptors; QPs' path_mtu is clamped to
  // PortInfo::max_path_mtu. The interfaces' MTU must carry such packets
  // (native XDP on them then needs the multi-buffer-aware mrc_xdp).
  uint32_t frame_chunks = 1;
  bool busy_poll = false;  // SO_PREFER_BUSY_POLL sockets, spinning engine thread
  // The engine thread's idle passes before it sleeps: 0 = 64 passes (a few
  // microseconds); N = keep polling (yielding the CPU between passes) for N
  // microseconds, so a burst that arrives within them needs no wakeup.
  uint32_t idle_spin_us = 0;
  // Wake-up coalescing (0: off; at most 1000). While the engine thread
  // moves at least 32 KiB per millisecond (a transfer, not a ping-pong),
  // it does not sleep on its sockets after its work: it waits this many
  // microseconds on posts and its timer alone, then polls again. A socket
  // then wakes it once per wait, not once per packet batch, and each pass
  // moves more packets (Documentation/api.md, "Wake-up coalescing").
  // 0 here: $MRC_ENGINE_COALESCE_US, when set.
  uint32_t engine_coalesce_us = 0;
  int engine_cpu = -1;  // pin the engine thread to this CPU (-1: no pinning)
  // The engine thread's scheduling (EngineSched); Context::engine_sched()
  // says what it got. In service mode the service's --sched decides.
  EngineSched engine_sched = EngineSched::kDefault;
  int engine_nice = -10;               // kNice, kDedicated, and kFifo after a long burst (-20..19)
  int engine_rt_priority = 1;          // kFifo: SCHED_FIFO priority (1..99; 1 is the lowest)
  uint32_t engine_rt_burst_us = 1000;  // kFifo: real-time for at most this long without a sleep
  Progress progress = Progress::kThread;
  uint32_t progress_idle_us = 1000;  // kApplication: the engine thread's fallback delay
  bool force_generic = false;        // attach XDP in generic (SKB) mode
  DscpClasses dscp;
  EngineConfig engine;  // protocol tunables (ports/addresses are filled in)
  // TX backend. Live frames are limited to the kernel's largest test-run
  // frame (Documentation/xdp-tx.md, "Limits"): QPs' path_mtu is then clamped
  // to PortInfo::max_path_mtu. The receive side is AF_XDP either way.
  TxBackend tx = TxBackend::kXsk;
  uint32_t live_tx_slots = 1024;  // LiveTx frame slots (4 KiB each), power of two
  uint32_t live_tx_submit = 64;   // frames per BPF_PROG_TEST_RUN (at most; the end
                                  // of an engine iteration submits the rest)
  // An engine iteration that ends with fewer frames than this sends them
  // through AF_XDP instead (copied): a live submit has a fixed cost (the
  // kernel builds a page pool per call; xdp-tx.md measures it). 0 = always live.
  uint32_t live_tx_min = 16;
};

// What the device found and chose, per plane port.
struct PortInfo {
  uint8_t port = 0;  // 1-based
  std::string ifname;
  int ifindex = 0;
  Mac mac{};
  std::vector<IpAddr> addrs;
  uint32_t mtu = 0;
  uint32_t queues = 0;
  bool link_up = false;
  std::string xdp_mode;  // "native", "generic" ...
  std::string xsk_mode;  // "copy" or "zero-copy"
  std::string tx;        // TX backend: "xsk" or "live"
  // Largest path_mtu whose frames this port can send (live frames: the
  // kernel's frame limit); 0 = no limit beyond the interface MTU. QPs'
  // path_mtu is clamped to the smallest over the ports.
  uint32_t max_path_mtu = 0;
};

// An endpoint's address on one plane (the RoCEv2 GID of that port).
using Gid = IpAddr;

// QP hints (mrc_qp_hint): the traffic pattern a set of QPs expects. A QP
// names one with QpAttr::hint (kMrcHint); 0 is no hint. The software engine
// stores and reports them; with one engine thread serving every QP there is
// no per-QP resource for them to steer.
struct QpHintAttr {
  int num_qps_per_peer = 0;
  int num_send_peers = 0;
  int num_remote_recv_peers = 0;
};
enum QpHintMask : uint32_t {
  kHintNumQpsPerPeer = 1 << 0,
  kHintNumSendPeers = 1 << 1,
  kHintNumRemoteRecvPeers = 1 << 2,
  kHintVendorCfg = 1u << 31,  // no vendor configuration is defined: EINVAL
};

// One EV of a QP as the engine sees it (Qp::evs()).
struct EvInfo {
  uint32_t ev = 0;   // 32-bit wire entropy (types.hpp, EvEntry)
  uint8_t port = 0;  // 1-based plane port
  EvState state = EvState::kGood;
  bool active = false;   // in the set packets are sprayed over
  bool probing = false;  // a probe is outstanding
  uint8_t probe_ok = 0;  // consecutive probe successes (readmitted at PathParams::probe_successes)
  uint8_t relapses = 0;  // retired again right after probes readmitted it, in a row
  Time backoff = 0;      // current probe back-off (ASSUMED_BAD), ns
  Time next_probe = kNever;  // when its next probe is due (engine clock), kNever: none
  EvStats stats;
};

class Context;
class CompChannel;

class Cq {
 public:
  // Completions polled (0..out.size()), or an error (EOVERFLOW after an overrun).
  Result<size_t> poll(std::span<Wc> out);
  // Arms the completion channel for the next completion (ibv_req_notify_cq).
  Status req_notify();
  uint32_t handle() const { return handle_; }

 private:
  friend class Context;
  Context* ctx_ = nullptr;
  uint32_t handle_ = 0;
  void* ring_ = nullptr;
};

// Completion channel: an fd that becomes readable when an armed CQ gets a
// completion (works with poll/epoll).
class CompChannel {
 public:
  ~CompChannel();
  int fd() const { return fd_; }
  // Blocks until an event (or returns EAGAIN if the fd is non-blocking and
  // none is pending); returns the CQ that fired.
  Result<Cq*> get_event();
  void ack_events(Cq* cq, unsigned n);

 private:
  friend class Context;
  friend class Cq;
  int fd_ = -1;
  Context* ctx_ = nullptr;
  void* state_ = nullptr;
};

class Qp {
 public:
  uint32_t qpn() const { return qpn_; }
  // Like mrc_modify_qp: verbs attributes + mask, MRC attributes + mask.
  Status modify(const QpAttr& attr, uint32_t ibv_mask, uint32_t mrc_mask);
  Result<QpAttr> query() const;
  Result<QpStats> stats() const;
  // Lock-free; ENOMEM when the posting ring is full, other errors as verbs.
  Status post_send(const SendWr& wr);
  Status post_recv(const RecvWr& wr);
  // The engine's view of this QP's EVs (for tools and tests).
  Result<std::vector<EvInfo>> evs() const;

 private:
  friend class Context;
  Context* ctx_ = nullptr;
  uint32_t qpn_ = 0;
  void* post_ = nullptr;
};

struct MemoryRegion {
  void* addr = nullptr;
  size_t length = 0;
  uint32_t lkey = 0, rkey = 0;
};

// kDeviceFatal: the device is gone (service mode: mrc-serviced exited);
// every later call fails with EIO. Close and reopen.
enum class AsyncEventType : uint8_t { kQpFatal, kPortActive, kPortError, kCqError, kDeviceFatal };
struct AsyncEvent {
  AsyncEventType type;
  uint32_t qpn = 0;  // kQpFatal
  uint8_t port = 0;  // kPort*
  uint32_t cq = 0;   // kCqError
};

class Context {
 public:
  // Opens a device on the plane interfaces and starts its engine thread.
  static Result<std::unique_ptr<Context>> open(const DeviceOptions& opts);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // mrc_query_version: current, last supported, vendor, last supported vendor.
  static std::array<uint32_t, 4> query_version();
  DeviceAttr query_device() const;
  std::vector<PortInfo> ports() const;
  // The GID of a plane port for the given IP version (nullopt-like: ENOENT).
  Result<Gid> gid(uint8_t port, IpVersion v) const;
  // Path MTU (payload bytes per packet, a multiple of 64) for packets of IP
  // version v. want = 0: the largest every plane port carries (its interface
  // MTU less the IP, UDP and MRC headers of a data packet) and this device
  // sends and receives in one packet (PortInfo::max_path_mtu; single-buffer
  // AF_XDP: one 4 KiB page, 3392). want > 0: want (clamped to
  // max_path_mtu as Qp::modify does), or EMSGSIZE naming the interface (or
  // the single-buffer limit) it does not fit. EMSGSIZE also when a plane's
  // MTU leaves less than 256 (Documentation/api.md, "Path MTU").
  Result<uint32_t> path_mtu_limit(IpVersion v, uint32_t want = 0) const;
  // The largest path MTU every plane interface carries (interface MTUs
  // only, not the device's limit): what the exchange advertises as max_mtu.
  Result<uint32_t> plane_mtu_limit(IpVersion v) const;

  Result<uint32_t> alloc_pd();
  Status dealloc_pd(uint32_t pd);
  Result<MemoryRegion> reg_mr(uint32_t pd, void* addr, size_t length, uint32_t access);
  Status dereg_mr(const MemoryRegion& mr);

  Result<std::unique_ptr<CompChannel>> create_comp_channel();
  Result<std::unique_ptr<Cq>> create_cq(uint32_t cqe, CompChannel* channel = nullptr);
  // On success the object is freed and `cq` reset; on failure (EBUSY while
  // QPs use it) the caller keeps it.
  Status destroy_cq(std::unique_ptr<Cq>&& cq);

  Result<std::unique_ptr<Qp>> create_qp(const QpInitAttr& init, const Cq& send_cq,
                                        const Cq& recv_cq);
  Status destroy_qp(std::unique_ptr<Qp>&& qp);

  // QP hints: ids from 1; ENOMEM beyond DeviceAttr::max_qp_hint, EINVAL for
  // negative counts or kHintVendorCfg, EBUSY on destroy while a QP uses it.
  Result<uint64_t> create_qp_hint(const QpHintAttr& attr);
  Status destroy_qp_hint(uint64_t id);
  Result<QpHintAttr> query_qp_hint(uint64_t id) const;
  Status modify_qp_hint(uint64_t id, const QpHintAttr& attr, uint32_t mask);

  // Profiles of this process's engine, for use without mrcd (mrcd's pinned
  // profiles are the normal source; see Documentation/controller.md).
  Status install_ev_profile(uint64_t id, const EvProfile& p);
  Status install_cc_profile(uint64_t id, const CcProfile& p);

  // Resolves the next-hop MAC for a peer GID on a plane (route + neighbour
  // table, triggering resolution when needed) and fills a QP's AV entry.
  Result<PlaneAddr> resolve(uint8_t port, const Gid& peer);

  // Async events (QP fatal, port state). async_fd() is readable while one is
  // queued (an eventfd semaphore: one count per event, taken by get).
  int async_fd() const;
  bool get_async_event(AsyncEvent& ev);

  // Engine and data path counters (for tools); EV events for monitoring.
  EngineStats engine_stats() const;
  // The XDP program's counters of each plane port (index = port - 1).
  Result<std::vector<mrc_xdp_stats>> xdp_stats() const;
  // Field names of struct mrc_xdp_stats, in order (as bpftool prints them).
  static std::vector<std::string> xdp_stats_names();
  // AF_XDP health, summed over the device's sockets.
  struct XskStats {
    uint64_t rx_frames, tx_frames, tx_completed, tx_kicks, tx_kick_again, tx_kick_busy,
        tx_kick_errors, pool_empty;
    uint64_t rx_dropped, rx_invalid, tx_invalid, rx_ring_full, fill_empty, tx_ring_empty;
  };
  XskStats xsk_stats() const;
  // The TX backend in use, and why it is not the one asked for (kAuto that
  // fell back to AF_XDP; empty otherwise).
  TxBackend tx_backend() const;
  std::string tx_note() const;
  // The options the device was opened with, MRC_ENGINE's settings applied
  // to `engine` (api.md, "Device options"). Through the service the
  // service's engine runs, as its own options say.
  const DeviceOptions& options() const;
  // Live-frames TX counters (xdp::LiveTxCounters; zeros with AF_XDP TX).
  struct LiveTxStats {
    uint64_t submits, frames, bytes, redirected, prog_errors, submit_errors, lost, ring_full;
    uint64_t xmit_sent, xmit_drops, redirect_err, submit_ns;
  };
  LiveTxStats live_tx_stats() const;
  size_t poll_ev_events(std::span<EvEvent> out);

  // Progress::kApplication: runs the engine in the calling thread. One pass
  // (receive, timers, transmit, completions); when it found nothing to do
  // and timeout_ms > 0, sleeps on the plane sockets, posts from other
  // threads and the engine's next timer for at most timeout_ms, then runs
  // another pass. True when a pass did something. Another thread already
  // running the engine makes the pass a no-op (false). EINVAL with
  // Progress::kThread (the engine thread drives everything) or a negative
  // timeout.
  Result<bool> progress(int timeout_ms = 0);
  Progress progress_mode() const;
  // Who ran the engine's passes: application threads (Cq::poll, progress())
  // and the engine thread; passes that left their transmit to the next one.
  struct ProgressStats {
    uint64_t app_passes, thread_passes, tx_deferred;
    uint64_t thread_sleeps;  // times the engine thread slept on its sockets and timer
    // kApplication: times the engine thread, standing aside, woke only to
    // find an application thread still driving progress (wasted wake-ups)
    uint64_t stand_aside_checks;
    // EngineSched::kFifo: bursts longer than engine_rt_burst_us that the
    // engine thread finished under SCHED_OTHER
    uint64_t rt_demotions;
    // engine_coalesce_us: waits the engine thread made instead of sleeping
    // on its sockets
    uint64_t coalesced_waits;
  };
  ProgressStats progress_stats() const;

  // The mode this device got (kService or kExclusive) and why, as a
  // sentence ("service mode: mrc-serviced pid 311 at /run/mrc/service.sock").
  DeviceMode mode() const;
  const std::string& mode_reason() const;

  // How the engine thread is scheduled (what it got, not what was asked:
  // kNormal when raising it was not permitted) and a sentence ("nice: SCHED_OTHER
  // at nice -10", "normal: nice -10 refused (EPERM) ..."). Service mode:
  // kDefault and a sentence naming the service (its --sched decides).
  EngineSched engine_sched() const;
  const std::string& engine_sched_reason() const;

  struct Impl;
  // libmrc's own code (the host service runs its device through it).
  Impl* internal() { return impl_.get(); }

 private:
  Context();
  static Status open_exclusive(Impl& im);
  std::unique_ptr<Impl> impl_;
  friend class Cq;
  friend class Qp;
  friend class CompChannel;
};

}  // namespace mrc
