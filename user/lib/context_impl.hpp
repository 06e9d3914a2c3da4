// libmrc's Context::Impl: the state of one open device, shared by the API
// methods (context.cc), the engine loop (engine_loop.cc) and, through the
// TX sink (tx_sink.hpp), the transmit path.
//
//   application threads --post rings (lock-free)--> engine thread --> engine
//   engine thread --CQ rings (lock-free)--> application threads (poll_cq)
//   control calls (create/modify/destroy/reg_mr) take the engine lock, which
//   the engine thread holds for one batch at a time.
//
// With Progress::kApplication the polling application thread runs the same
// passes (step_locked) itself, and the engine thread only stands in when no
// application thread has done so for progress_idle_us (app_until).
#pragma once

#include <time.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "codec/packet.hpp"
#include "core/engine.hpp"
#include "ctl/client.hpp"
#include "lib/mpmc.hpp"
#include "lib/plane_xdp.hpp"
#include "lib/tx_sink.hpp"
#include "loader/attach.hpp"
#include "loader/mrc_xdp.hpp"
#include "mrc/mrc.hpp"
#include "util/clock.hpp"
#include "util/unique_fd.hpp"
#include "xdp/device.hpp"
#include "xdp/live_tx.hpp"

#include <poll.h>

#include <span>

namespace mrc {
namespace svc {
class Client;  // the client backend of service mode (user/svc/client.hpp)
}
namespace lib {

// The host service's part of the engine loop (user/svc/server.cc): its
// clients' posts in, their completions and events out, their doorbells in
// the sleep. Called by the thread that runs a pass, with the engine lock
// held.
class LoopHook {
 public:
  virtual ~LoopHook() = default;
  // Clients' posts into the engine; true if there were any.
  virtual bool drain(core::Engine& eng) = 0;
  // The engine's completions of clients' CQs into their rings; true if any.
  virtual bool deliver(core::Engine& eng, std::span<Wc> scratch) = 0;
  // A QP failed on its own: true if a client owns it (it got the event).
  virtual bool qp_error(uint32_t qpn) = 0;
  // A port event, for every client.
  virtual void port_event(const AsyncEvent& ev) = 0;
  // Before the engine thread sleeps: marks every client's area "sleeping"
  // and appends the doorbells to fds; false when a client posted meanwhile
  // (no sleep).
  virtual bool sleep_prepare(std::vector<pollfd>& fds) = 0;
  // After the sleep: clears the marks, reads the doorbells.
  virtual void woke() = 0;
};

using mrc::mono_ns;  // util/clock.hpp

// Wakes the thread asleep on the eventfd fd.
inline void wake(int fd) {
  uint64_t one = 1;
  (void)!write(fd, &one, sizeof one);
}

// A posted send: the work request with its scatter list copied.
struct PostedSend {
  core::SendWr wr;
  std::array<Sge, core::kMaxSge> sg;
};

// A QP's post rings, application threads to the engine thread.
struct QpRings {
  explicit QpRings(uint32_t qpn, size_t sq, size_t rq) : qpn(qpn), sq(sq), rq(rq) {}
  uint32_t qpn;
  MpmcQueue<PostedSend> sq;
  MpmcQueue<uint64_t> rq;
  std::atomic<bool> queued{false};
  std::atomic<bool> alive{true};
  uint32_t send_cq = 0, recv_cq = 0;
};

// A CQ's completion ring, the engine thread to application threads.
struct CqRing {
  explicit CqRing(uint32_t h, size_t n) : handle(h), ring(n) {}
  uint32_t handle;
  MpmcQueue<Wc> ring;
  std::atomic<bool> armed{false};
  std::atomic<bool> overflow{false};
  CompChannel* channel = nullptr;
  Cq* cq = nullptr;
};

// A completion channel's fired CQs.
struct ChannelState {
  MpmcQueue<Cq*> fired{4096};
};

// The engine loop's scratch space, made once: an iteration allocates and
// clears nothing.
struct LoopScratch {
  std::array<xdp::RxFrame, kBurst> rx;
  std::array<core::RxFrame, kBurst> in;
  std::array<Wc, kBurst> wc;
  std::array<core::EvEvent, 64> evs;
  std::array<uint32_t, 16> errs;
  std::array<codec::FrameSeg, kBurst> segs;  // multi-buffer packets' further buffers
};

}  // namespace lib

struct Context::Impl {
  DeviceOptions opts;
  xdp::Device dev;
  std::optional<loader::MrcXdp> prog;  // our own copy of mrc_xdp (no mrcd)
  // mrc_xdp on each plane, BPF links owned by this process (lib/plane_xdp.hpp)
  std::vector<lib::PlaneXdp> attachments;
  loader::XdpMaps pinned;  // mrcd's maps
  loader::XdpMaps* maps = nullptr;
  std::unique_ptr<core::Engine> eng;
  std::vector<PortInfo> ports;      // index = port - 1
  std::vector<uint16_t> tx_socket;  // per port index: the socket that sends
  xdp::LiveTx live;                 // the live-frames TX backend, if in use
  std::string tx_note;              // why kAuto fell back to AF_XDP
  uint32_t max_path_mtu = 0;        // QPs' path_mtu is clamped to it (0: no clamp)
  // Plane port numbers: ours (1-based, in interface order) unless mrcd owns
  // the device, then mrcd's. idx[port] = index in `ports`, -1 if absent.
  lib::PortIndex idx;
  std::unique_ptr<ctl::Client> ctl;       // mrcd's state (profiles, EV policy, ports)
  std::unique_ptr<ctl::EngineSync> sync;  // keeps the engine in step with it
  lib::MpmcQueue<core::EvEvent> app_events{16384};
  // Which mode this device runs in and why (Context::mode()).
  DeviceMode mode = DeviceMode::kExclusive;
  std::string mode_why;
  // Service mode: the client backend; nothing of the in-process device
  // (sockets, engine, thread) exists then, except ports, idx and
  // max_path_mtu, filled from the service's HELLO reply.
  std::unique_ptr<svc::Client> svc;
  uint32_t rx_frame_cap = 0;  // the UMEM's receive capacity of one frame
  // The host service (set under mu): its clients' rings in the loop.
  lib::LoopHook* hook = nullptr;
  mutable std::mutex mu;
  std::thread thr;
  // The engine thread's scheduling (engine_sched.cc): the mode asked for
  // (resolved at open), what the thread got and why (set by the thread
  // before sched_ready), and kFifo's state.
  EngineSched sched_want = EngineSched::kNice;
  EngineSched sched_got = EngineSched::kDefault;
  std::string sched_why;
  std::promise<void> sched_ready;
  bool rt_on = false;                     // kFifo: SCHED_FIFO right now (engine thread)
  std::atomic<uint64_t> rt_demotions{0};  // kFifo: long bursts moved to SCHED_OTHER
  core::Time coalesce_ns = 0;             // engine_coalesce_us, resolved at open
  std::atomic<bool> stop{false};
  std::atomic<int> sleepers{0};  // threads asleep on the sockets (post wakes them)
  // kApplication: an application thread drives progress until this time
  // (its last pass or the end of its sleep, plus progress_idle_us).
  std::atomic<core::Time> app_until{0};
  // kApplication: the engine thread sleeps on this timer while it stands
  // aside. Application threads push it out (at most every half
  // progress_idle_us, one timerfd_settime), so a thread that keeps polling
  // never wakes the engine thread; it fires progress_idle_us after the last
  // pass (or sleep) that armed it. idle_armed: its current expiry.
  UniqueFd idle_tfd;
  std::atomic<core::Time> idle_armed{0};
  std::atomic<uint64_t> stand_aside_checks{0};
  std::atomic<core::Time> next_links{0};
  UniqueFd wake_fd, async_fd;
  lib::MpmcQueue<lib::QpRings*> ready{65536};
  std::vector<std::unique_ptr<lib::QpRings>> qps;
  std::vector<std::unique_ptr<lib::CqRing>> cqs;
  lib::MpmcQueue<AsyncEvent> async{4096};
  std::vector<std::unique_ptr<lib::ChannelState>> channels;
  std::map<uint64_t, QpHintAttr> hints;  // QP hints by id (under mu)
  uint64_t next_hint = 1;

  std::unique_ptr<lib::LoopScratch> scratch;
  std::unique_ptr<lib::DeviceTxSink> sink;
  bool tx_deferred = false;         // the last pass left its transmit to the next
  Context::ProgressStats pstats{};  // (under mu)

  bool app_mode() const { return opts.progress == Progress::kApplication; }

  // ---- opening the device (context.cc, Context::open's stages) ----------
  // 1. The XDP program: mrcd's pinned copy (true), else our own (false).
  Result<bool> open_program();
  // 2. AF_XDP sockets on every queue of every plane interface, one UMEM.
  Status open_sockets();
  // 3. Ports: the engine's (into ec.ports) and the XDP maps' entries.
  Status open_ports(bool have_mrcd, core::EngineConfig& ec);
  // 4. The TX backend: live frames or the sockets' TX rings; max_path_mtu.
  Status open_tx_backend();
  // 5. The engine, mrcd's sync, the wake-up descriptors and the thread.
  Status start(const core::EngineConfig& ec);

  // ---- control calls shared with the host service (the caller holds mu) --
  // Qp::modify's work after its checks: the engine, then the XDP maps.
  Status modify_qp_locked(uint32_t qpn, const QpAttr& attr, uint32_t ibv_mask, uint32_t mrc_mask);
  // destroy_qp's: the engine, then the XDP maps.
  Status destroy_qp_locked(uint32_t qpn);
  // The host service's end of a QP whose client is gone: a tombstone until
  // `until` (core::Engine::entomb_qp; its XDP map entry stays until the
  // engine frees it, see engine_loop.cc), or destroyed now.
  Status entomb_qp_locked(uint32_t qpn, core::Time until);

  // ---- the engine thread's scheduling (engine_sched.cc) ----------------
  // sched_want from the options and $MRC_ENGINE_SCHED (EINVAL: a bad name
  // or an option out of range).
  Status resolve_sched();
  // In the engine thread: applies sched_want, sets sched_got and sched_why.
  void apply_sched();
  // kFifo: SCHED_FIFO (on) or SCHED_OTHER at engine_nice (off).
  void set_rt(bool on);

  // ---- the engine loop (engine_loop.cc) ---------------------------------
  // The engine thread's body, until stop.
  void run();
  // kApplication: the engine thread stands aside while an application
  // thread drives progress (until app_until, now < until).
  void stand_aside(core::Time now, core::Time until);
  // One pass of the engine (the caller holds mu): link events when a
  // millisecond has passed, then iteration().
  bool step_locked(bool may_defer_tx = false);
  // A pass from an application thread (kApplication); false without one
  // when another thread holds the engine.
  bool app_step();
  // One pass: posts, receive, completions, transmit.
  bool iteration(bool may_defer_tx = false);
  // Sleeps until a socket has input, a post or a stop wakes it, the
  // engine's next timer, or max_wait (ns), whichever comes first. sockets:
  // false (engine_coalesce_us's wait): not on the sockets.
  void sleep_on_io(core::Time max_wait, bool app, bool sockets = true);
  void arm_idle(core::Time now, core::Time until, bool force = false);
  void drain_posts();
  void error_completion(uint32_t cq, uint32_t qpn, uint64_t wr_id, WcOpcode op);
  void deliver(lib::CqRing& c, const Wc* wc, size_t n);
  // recv: set when a receive completion (WRITE-with-immediate) was among
  // them (may be null).
  bool deliver_all(bool* recv = nullptr);
  void push_async(const AsyncEvent& ev);
  void link_events_locked();

  // Wakes a thread asleep on the sockets after a post.
  void kick_engine() {
    if (sleepers.load(std::memory_order_seq_cst)) lib::wake(wake_fd.get());
  }
};

}  // namespace mrc
