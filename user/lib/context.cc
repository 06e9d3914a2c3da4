// libmrc's Context: one engine thread per device runs the sans-I/O engine
// over the AF_XDP sockets of every plane interface. It sends through their
// TX rings or, with TxBackend::kLive, as XDP live frames (xdp::LiveTx,
// Documentation/xdp-tx.md); it always receives from the sockets.
//
//   application threads --post rings (lock-free)--> engine thread --> engine
//   engine thread --CQ rings (lock-free)--> application threads (poll_cq)
//   control calls (create/modify/destroy/reg_mr) take the engine lock, which
//   the engine thread holds for one batch at a time.
//
// With Progress::kApplication the polling application thread runs the same
// passes (step_locked) itself, and the engine thread only stands in when no
// application thread has done so for progress_idle_us (app_until).
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "loader/attach.hpp"
#include "loader/mrc_xdp.hpp"
#include "core/engine.hpp"
#include "ctl/client.hpp"
#include "lib/mpmc.hpp"
#include "lib/neigh.hpp"
#include "mrc/mrc.hpp"
#include "codec/packet.hpp"
#include "xdp/device.hpp"
#include "util/clock.hpp"
#include "xdp/live_tx.hpp"

namespace mrc {
namespace {

constexpr size_t kBurst = 64;
// Live-frames slots reserved per port at a time (what an iteration does not
// use goes back at its end).
constexpr uint32_t kLiveReserve = 16;

struct PostedSend {
  core::SendWr wr;
  std::array<Sge, core::kMaxSge> sg;
};

struct QpRings {
  explicit QpRings(uint32_t qpn, size_t sq, size_t rq) : qpn(qpn), sq(sq), rq(rq) {}
  uint32_t qpn;
  lib::MpmcQueue<PostedSend> sq;
  lib::MpmcQueue<uint64_t> rq;
  std::atomic<bool> queued{false};
  std::atomic<bool> alive{true};
  uint32_t send_cq = 0, recv_cq = 0;
};

struct CqRing {
  explicit CqRing(uint32_t h, size_t n) : handle(h), ring(n) {}
  uint32_t handle;
  lib::MpmcQueue<Wc> ring;
  std::atomic<bool> armed{false};
  std::atomic<bool> overflow{false};
  CompChannel* channel = nullptr;
  Cq* cq = nullptr;
};

void wake(int fd) {
  uint64_t one = 1;
  (void)!write(fd, &one, sizeof one);
}

// Bytes of a data packet besides its payload, at most: Ethernet, IPv6, UDP,
// BTH, the largest extension headers of a WRITE (RETH, TSETH, ImmDt) and the
// ICRC. A live frame of path_mtu + this must fit LiveTx::max_frame(port).
uint32_t max_frame_overhead() {
  uint32_t ext = 0;
  for (unsigned op = MRC_OP_WRITE_FIRST; op <= MRC_OP_WRITE_ONLY_IMM; op++)
    ext = std::max(ext, codec::ext_header_len(uint8_t(op), true));
  return 14u + 40u + 8u + uint32_t(sizeof(mrc_bth)) + ext + MRC_ICRC_LEN;
}

}  // namespace

uint32_t random_psn() { return core::random_psn(); }

const char* to_string(Progress p) {
  switch (p) {
    case Progress::kThread: return "thread";
    case Progress::kApplication: return "application";
  }
  return "?";
}

const char* to_string(TxBackend b) {
  switch (b) {
    case TxBackend::kXsk: return "xsk";
    case TxBackend::kLive: return "live";
    case TxBackend::kAuto: return "auto";
  }
  return "?";
}

struct ChannelState {
  lib::MpmcQueue<Cq*> fired{4096};
};

struct Context::Impl {
  DeviceOptions opts;
  xdp::Device dev;
  std::optional<loader::MrcXdp> prog;  // our own copy of mrc_xdp (no mrcd)
  std::vector<loader::MrcXdpAttachment> attachments;
  loader::XdpMaps pinned;              // mrcd's maps
  loader::XdpMaps* maps = nullptr;
  std::unique_ptr<core::Engine> eng;
  std::vector<PortInfo> ports;      // index = port - 1
  std::vector<uint16_t> tx_socket;  // per port index: the socket that sends
  xdp::LiveTx live;                 // the live-frames TX backend, if in use
  std::string tx_note;              // why kAuto fell back to AF_XDP
  uint32_t max_path_mtu = 0;        // QPs' path_mtu is clamped to it (0: no clamp)
  // Plane port numbers: ours (1-based, in interface order) unless mrcd owns
  // the device, then mrcd's. idx[port] = index in `ports`, -1 if absent.
  std::array<int, core::kMaxPorts + 1> idx;
  std::unique_ptr<ctl::Client> ctl;       // mrcd's state (profiles, EV policy, ports)
  std::unique_ptr<ctl::EngineSync> sync;  // keeps the engine in step with it
  lib::MpmcQueue<core::EvEvent> app_events{16384};
  mutable std::mutex mu;
  std::thread thr;
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
  int idle_tfd = -1;
  std::atomic<core::Time> idle_armed{0};
  std::atomic<uint64_t> stand_aside_checks{0};
  std::atomic<core::Time> next_links{0};
  int wake_fd = -1, async_fd = -1;
  lib::MpmcQueue<QpRings*> ready{65536};
  std::vector<std::unique_ptr<QpRings>> qps;
  std::vector<std::unique_ptr<CqRing>> cqs;
  lib::MpmcQueue<AsyncEvent> async{4096};
  std::vector<std::unique_ptr<ChannelState>> channels;
  std::vector<core::EvEvent> ev_buf;
  std::map<uint64_t, QpHintAttr> hints;  // QP hints by id (under mu)
  uint64_t next_hint = 1;

  // ---- the engine thread -------------------------------------------------
  struct Sink : core::TxSink {
    Impl& im;
    struct PortTx {
      std::array<xdp::TxFrame, kBurst> frames;
      uint32_t reserved = 0, used = 0;
      std::array<xdp::TxFrame, kBurst> out;
      uint32_t committed = 0;
    };
    std::vector<PortTx> ports;
    // Live frames: slots reserved per port in small bursts; committed frames
    // are staged (in send order) and go out every live_submit frames as one
    // BPF_PROG_TEST_RUN. At the end of an iteration fewer than live_min
    // staged frames are copied to the AF_XDP TX rings instead: a live submit
    // has a fixed cost (the kernel builds a page pool per call, ~10-15 us)
    // that a handful of ACKs should not pay.
    struct LivePort {
      std::array<xdp::LiveTxFrame, kLiveReserve> frames;
      uint32_t reserved = 0, used = 0;
    };
    std::vector<LivePort> lports;
    std::vector<xdp::LiveTxFrame> staged;  // capacity live_submit, made once
    uint32_t nstaged = 0;
    xdp::LiveTx* live = nullptr;
    uint32_t live_submit = kBurst, live_min = 0;
    explicit Sink(Impl& i)
        : im(i), ports(i.ports.size()), lports(i.live ? i.ports.size() : 0),
          live(i.live ? &i.live : nullptr),
          live_submit(std::max<uint32_t>(1, std::min(i.opts.live_tx_submit, i.opts.live_tx_slots / 2))),
          live_min(std::min(i.opts.live_tx_min, live_submit)) {
      if (live) staged.resize(live_submit);
    }
    uint8_t* alloc(uint8_t port, uint32_t* cap) override {
      const int i = port <= core::kMaxPorts ? im.idx[port] : -1;
      if (i < 0) return nullptr;
      if (live) return live_alloc(uint16_t(i), cap);
      xdp::TxFrame* f = xsk_alloc(size_t(i));
      if (!f) return nullptr;
      *cap = f->room;
      return f->data;
    }
    void commit(uint8_t port, uint32_t len) override {
      const size_t i = size_t(im.idx[port]);
      if (live) return live_commit(i, len);
      PortTx& p = ports[i];
      xdp::TxFrame f = p.frames[p.used++];
      if (!len) {
        im.dev.sockets()[im.tx_socket[i]].tx_cancel({&f, 1});
        return;
      }
      f.len = len;
      p.out[p.committed++] = f;
    }
    // The next reserved AF_XDP frame of port i (nullptr: TX ring full).
    xdp::TxFrame* xsk_alloc(size_t i) {
      PortTx& p = ports[i];
      if (p.used == p.reserved) {
        if (p.committed == kBurst) flush_port(i);
        xdp::XskSocket& s = im.dev.sockets()[im.tx_socket[i]];
        p.reserved = s.tx_reserve({p.frames.data(), kBurst - p.committed});
        p.used = 0;
        if (!p.reserved) return nullptr;
      }
      return &p.frames[p.used];
    }
    void flush_port(size_t i) {
      PortTx& p = ports[i];
      xdp::XskSocket& s = im.dev.sockets()[im.tx_socket[i]];
      if (p.committed) s.tx_submit({p.out.data(), p.committed}, true);
      p.committed = 0;
    }
    uint8_t* live_alloc(uint16_t i, uint32_t* cap) {
      LivePort& p = lports[i];
      if (p.used == p.reserved) {
        p.used = 0;
        p.reserved = live->reserve(i, p.frames);
        if (!p.reserved && nstaged) {  // every slot staged or reserved
          live_send();
          p.reserved = live->reserve(i, p.frames);
        }
        if (!p.reserved) return nullptr;
      }
      xdp::LiveTxFrame& f = p.frames[p.used];
      *cap = f.room;
      return f.data;
    }
    void live_commit(size_t i, uint32_t len) {
      LivePort& p = lports[i];
      xdp::LiveTxFrame& f = p.frames[p.used++];
      if (!len) {
        live->cancel({&f, 1});
        return;
      }
      f.len = len;
      staged[nstaged++] = f;
      if (nstaged == live_submit) live_send();
    }
    // Errors are counted by LiveTx (submit_errors, lost) and the frames not
    // sent are losses the engine recovers from.
    void live_send() {
      live->commit({staged.data(), nstaged});
      nstaged = 0;
      (void)live->submit();
    }
    // A few staged frames: copied into AF_XDP frames of their ports (in
    // order), their slots returned; what does not fit goes out live.
    void live_to_xsk() {
      uint32_t k = 0;
      for (; k < nstaged; k++) {
        const xdp::LiveTxFrame& lf = staged[k];
        xdp::TxFrame* f = xsk_alloc(lf.port);
        if (!f || f->room < lf.len) break;
        std::memcpy(f->data, lf.data, lf.len);
        PortTx& p = ports[lf.port];
        xdp::TxFrame out = p.frames[p.used++];
        out.len = lf.len;
        p.out[p.committed++] = out;
      }
      live->cancel({staged.data(), k});
      if (k < nstaged) {
        std::memmove(staged.data(), staged.data() + k, (nstaged - k) * sizeof(staged[0]));
        nstaged -= k;
        live_send();
      }
      nstaged = 0;
    }
    void finish() {
      if (live) {
        for (LivePort& p : lports) {
          if (p.used < p.reserved) live->cancel({p.frames.data() + p.used, p.reserved - p.used});
          p.used = p.reserved = 0;
        }
        if (nstaged >= live_min)
          live_send();
        else if (nstaged)
          live_to_xsk();
      }
      for (size_t i = 0; i < ports.size(); i++) {
        PortTx& p = ports[i];
        xdp::XskSocket& s = im.dev.sockets()[im.tx_socket[i]];
        if (p.used < p.reserved) s.tx_cancel({p.frames.data() + p.used, p.reserved - p.used});
        p.used = p.reserved = 0;
        flush_port(i);
      }
    }
  };

  void drain_posts() {
    QpRings* q;
    while (ready.pop(q)) {
      q->queued.store(false, std::memory_order_release);
      if (!q->alive.load(std::memory_order_acquire)) continue;
      uint64_t rid;
      while (q->rq.pop(rid)) {
        core::RecvWr r;
        r.wr_id = rid;
        if (!eng->post_recv(q->qpn, r).ok()) error_completion(q->recv_cq, q->qpn, rid, WcOpcode::kRecvRdmaWithImm);
      }
      PostedSend ps;
      while (q->sq.pop(ps)) {
        ps.wr.sg_list = ps.sg.data();
        if (!eng->post_send(q->qpn, ps.wr).ok())
          error_completion(q->send_cq, q->qpn, ps.wr.wr_id, WcOpcode::kRdmaWrite);
      }
    }
  }

  void error_completion(uint32_t cq, uint32_t qpn, uint64_t wr_id, WcOpcode op) {
    Wc wc;
    wc.wr_id = wr_id;
    wc.status = core::kWcLocQpOpErr;
    wc.opcode = op;
    wc.qp_num = qpn;
    for (auto& c : cqs)
      if (c && c->handle == cq) deliver(*c, &wc, 1);
  }

  void deliver(CqRing& c, const Wc* wc, size_t n) {
    for (size_t i = 0; i < n; i++)
      if (!c.ring.push(wc[i])) c.overflow.store(true, std::memory_order_release);
    if (n && c.channel && c.armed.exchange(false)) {
      static_cast<ChannelState*>(c.channel->state_)->fired.push(c.cq);
      wake(c.channel->fd());
    }
  }

  // The engine thread's scratch space, made once: an iteration allocates
  // and clears nothing.
  struct Scratch {
    std::array<xdp::RxFrame, kBurst> rx;
    std::array<core::RxFrame, kBurst> in;
    std::array<Wc, kBurst> wc;
    std::array<core::EvEvent, 64> evs;
    std::array<uint32_t, 16> errs;
    std::array<codec::FrameSeg, kBurst> segs;  // multi-buffer packets' further buffers
  };
  std::unique_ptr<Scratch> scratch;
  std::unique_ptr<Sink> sink_;
  bool tx_deferred = false;  // the last pass left its transmit to the next
  Context::ProgressStats pstats{};  // (under mu)

  bool app_mode() const { return opts.progress == Progress::kApplication; }

  // One pass of the engine (the caller holds mu): link events when a
  // millisecond has passed, then iteration().
  bool step_locked(bool may_defer_tx = false) {
    const core::Time now = mono_ns();
    if (now >= next_links.load(std::memory_order_relaxed)) {
      link_events_locked();
      next_links.store(now + 1'000'000, std::memory_order_relaxed);
    }
    return iteration(may_defer_tx);
  }

  // A pass from an application thread (kApplication); false without one
  // when another thread holds the engine.
  bool app_step() {
    const core::Time now = mono_ns(), idle = core::Time(opts.progress_idle_us) * 1000;
    app_until.store(now + idle, std::memory_order_relaxed);
    arm_idle(now, now + idle);
    std::unique_lock<std::mutex> lk(mu, std::try_to_lock);
    if (!lk.owns_lock()) return false;
    pstats.app_passes++;
    return step_locked(true);
  }

  // Completions of every CQ to the application; true if there were any.
  bool deliver_all() {
    auto& wc = scratch->wc;
    bool any = false;
    for (auto& c : cqs) {
      if (!c) continue;
      while (true) {
        auto r = eng->poll_cq(c->handle, wc);
        if (!r.ok()) {
          c->overflow.store(true);
          break;
        }
        if (!*r) break;
        deliver(*c, wc.data(), *r);
        any = true;
      }
    }
    return any;
  }

  // Sleeps until a socket has input, a post or a stop wakes it, the engine's
  // next timer, or max_wait (ns), whichever comes first.
  void sleep_on_io(core::Time max_wait, bool app) {
    core::Time deadline;
    {
      std::lock_guard<std::mutex> lk(mu);
      deadline = eng->next_deadline();
    }
    const core::Time now = mono_ns();
    if (deadline <= now) return;
    sleepers.fetch_add(1, std::memory_order_seq_cst);
    if (!ready.empty()) {
      sleepers.fetch_sub(1);
      return;
    }
    const core::Time wait = deadline == core::kNever ? max_wait : std::min<core::Time>(deadline - now, max_wait);
    if (app) {
      const core::Time until = now + wait + core::Time(opts.progress_idle_us) * 1000;
      app_until.store(until, std::memory_order_relaxed);
      arm_idle(now, until);
    }
    thread_local std::vector<pollfd> pfds;
    auto fds = dev.poll_fds();
    pfds.assign(fds.begin(), fds.end());
    pfds.push_back({wake_fd, POLLIN, 0});
    timespec ts{time_t(wait / 1'000'000'000ull), long(wait % 1'000'000'000ull)};
    int r = ppoll(pfds.data(), pfds.size(), &ts, nullptr);
    sleepers.fetch_sub(1, std::memory_order_release);
    if (r > 0 && (pfds.back().revents & POLLIN)) {
      uint64_t v;
      (void)!read(wake_fd, &v, sizeof v);
    }
    // The link monitor's fd (if any) is the last of the device's fds.
    if (r > 0 && fds.size() > dev.sockets().size() && pfds[fds.size() - 1].revents)
      next_links.store(0, std::memory_order_relaxed);
  }

  // Moves the engine thread's stand-aside timer to `until` unless it is
  // already within half of progress_idle_us of it (so a thread that keeps
  // polling re-arms it every half progress_idle_us); one of racing threads
  // does it. force: always (the engine thread, after the timer fired).
  // Application progress only (the timer exists in that mode alone).
  void arm_idle(core::Time now, core::Time until, bool force = false) {
    core::Time armed = idle_armed.load(std::memory_order_relaxed);
    const core::Time half = core::Time(opts.progress_idle_us) * 500;
    if (force) {
      idle_armed.store(until, std::memory_order_relaxed);
    } else {
      if (armed > now && armed + half >= until && armed <= until + half) return;
      if (!idle_armed.compare_exchange_strong(armed, until, std::memory_order_relaxed)) return;
    }
    itimerspec its{};
    its.it_value = {time_t(until / 1'000'000'000ull), long(until % 1'000'000'000ull)};
    (void)timerfd_settime(idle_tfd, TFD_TIMER_ABSTIME, &its, nullptr);
  }

  // One pass: posts, receive, completions, transmit. may_defer_tx (an
  // application thread's pass): when the receive produced completions, the
  // transmit (ACKs, mostly) waits for the caller's next pass, so it leaves
  // in one batch with what the application posts in reply to them; never
  // twice in a row, and the engine thread sends it if no pass follows
  // within progress_idle_us.
  bool iteration(bool may_defer_tx = false) {
    const core::Time now = mono_ns();
    bool work = false;
    if (!ready.empty()) {
      drain_posts();
      work = true;
    }
    if (!scratch) scratch = std::make_unique<Scratch>();
    if (!sink_) sink_ = std::make_unique<Sink>(*this);
    // Receive: one burst from every socket.
    auto& rx = scratch->rx;
    auto& in = scratch->in;
    uint32_t n = dev.rx(rx);
    if (n) {
      work = true;
      uint32_t k = 0, nseg = 0;
      auto& segs = scratch->segs;
      for (uint32_t i = 0; i < n; i++) {
        const mrc_xdp_meta* m = rx[i].meta();
        in[k] = {rx[i].data, rx[i].len, ports[rx[i].port].port, m ? m->rx_ts_ns : now};
        if (rx[i].more) {
          // A multi-buffer packet: its further descriptors as segments, read
          // in place by the engine (no gathering copy).
          const uint32_t first = nseg;
          while (rx[i].more && i + 1 < n) {
            i++;
            segs[nseg++] = {rx[i].data, rx[i].len};
          }
          in[k].more = {segs.data() + first, nseg - first};
        }
        k++;
      }
      eng->rx({in.data(), k}, now);
      dev.release({rx.data(), n});
    }
    // Completions to the application, before the transmit's syscalls.
    if (deliver_all()) {
      work = true;
      if (may_defer_tx && !tx_deferred) {
        tx_deferred = true;
        pstats.tx_deferred++;
        return true;
      }
    }
    tx_deferred = false;
    // Transmit: control first, then retransmissions, then new data.
    Sink& sink = *sink_;
    size_t sent = 0;
    for (int round = 0; round < 4; round++) {
      size_t k = eng->tx(sink, now, kBurst);
      sent += k;
      if (k < kBurst) break;
    }
    sink.finish();
    if (sent) work = true;
    dev.flush_tx();
    // Completions the transmit made (timeouts, retry exceeded).
    if (deliver_all()) work = true;
    // EV state changes: to mrcd (when it runs) and to the application.
    auto& evs = scratch->evs;
    size_t nev;
    while ((nev = eng->poll_ev_events(evs)) > 0) {
      if (sync) sync->forward({evs.data(), nev});
      for (size_t i = 0; i < nev; i++) app_events.push(evs[i]);  // full: the oldest stay
    }
    // Controller changes (denied EVs, admin-down ports, profiles): one load
    // when nothing changed; reports are published every second.
    if (sync) sync->poll(now);
    // QPs that failed on their own: QP-fatal async events.
    auto& errs = scratch->errs;
    size_t ne;
    while ((ne = eng->poll_qp_errors(errs)) > 0)
      for (size_t i = 0; i < ne; i++) push_async({AsyncEventType::kQpFatal, errs[i], 0, 0});
    return work;
  }

  void push_async(const AsyncEvent& ev) {
    async.push(ev);
    wake(async_fd);
  }

  void link_events_locked() {
    auto r = dev.process_link_events();
    if (!r.ok() || !*r) return;
    // Live frames: the ports' MTU may have changed (max_frame(port)).
    if (live) (void)live.refresh();
    for (size_t i = 0; i < ports.size(); i++) {
      const auto& info = dev.ports()[i].info;
      bool up = info.admin_up && info.link_up;
      if (up == ports[i].link_up) continue;
      ports[i].link_up = up;
      const uint8_t port = ports[i].port;
      // An administratively disabled port (mrcd) stays unused whatever the link says.
      eng->set_port_state(port, up && (!ctl || ctl->port_usable(port)), mono_ns());
      push_async({up ? AsyncEventType::kPortActive : AsyncEventType::kPortError, 0, port, 0});
    }
  }

  void run() {
    if (opts.engine_cpu >= 0) {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(opts.engine_cpu, &set);
      pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    }
    uint32_t idle_spins = 0;
    core::Time idle_since = 0;
    const core::Time spin_ns = core::Time(opts.idle_spin_us) * 1000;
    while (!stop.load(std::memory_order_acquire)) {
      // kApplication: stand aside while an application thread drives the
      // engine; wake when it stops doing so (or on stop).
      if (app_mode()) {
        const core::Time now = mono_ns(), until = app_until.load(std::memory_order_relaxed);
        if (now < until) {
          // Sleep until the timer fires (no application pass pushed it out),
          // a stop, or a 100 ms backstop. Woken with app_until still ahead
          // (the timer was armed before the last passes, or racing threads
          // armed it out of order): set it to app_until.
          arm_idle(now, until, true);
          pollfd p[2] = {{wake_fd, POLLIN, 0}, {idle_tfd, POLLIN, 0}};
          const core::Time wait = std::max<core::Time>(until - now, 100'000'000);
          timespec ts{time_t(wait / 1'000'000'000ull), long(wait % 1'000'000'000ull)};
          if (ppoll(p, 2, &ts, nullptr) > 0) {
            uint64_t v;
            if (p[0].revents & POLLIN) (void)!read(wake_fd, &v, sizeof v);
            if (p[1].revents & POLLIN) (void)!read(idle_tfd, &v, sizeof v);
          }
          // Woken to find the application still driving: a wasted wake-up.
          if (mono_ns() < app_until.load(std::memory_order_relaxed))
            stand_aside_checks.fetch_add(1, std::memory_order_relaxed);
          idle_spins = 0;
          continue;
        }
      }
      // Link events (carrier, admin state) are read every millisecond even
      // while traffic keeps the thread busy (step_locked).
      bool work;
      {
        std::lock_guard<std::mutex> lk(mu);
        pstats.thread_passes++;
        work = step_locked();
      }
      if (work) {
        idle_spins = 0;
        continue;
      }
      // Nothing to do right now: spin a little (busy polling keeps latency
      // low), then sleep on the sockets, the wake fd and the engine's timer.
      if (spin_ns) {
        // idle_spin_us: poll for that long, giving the CPU to whoever else
        // wants it between passes (on a small host: the softirq that brings
        // the next packets).
        const core::Time t = mono_ns();
        if (!idle_spins++) idle_since = t;
        if (t - idle_since < spin_ns) {
          sched_yield();
          continue;
        }
      } else if (++idle_spins < (opts.busy_poll ? 4096u : 64u)) {
        continue;
      }
      {
        std::lock_guard<std::mutex> lk(mu);
        pstats.thread_sleeps++;
      }
      sleep_on_io(100'000'000, false);
      idle_spins = 0;
    }
  }

  void kick_engine() {
    if (sleepers.load(std::memory_order_seq_cst)) wake(wake_fd);
  }
};

// ---------------------------------------------------------------------------

Context::Context() : impl_(std::make_unique<Impl>()) {}

Context::~Context() {
  if (!impl_) return;
  impl_->stop.store(true);
  if (impl_->wake_fd >= 0) wake(impl_->wake_fd);
  if (impl_->thr.joinable()) impl_->thr.join();
  if (impl_->sync) impl_->sync->withdraw();
  // Remove what we registered in the (possibly shared) maps.
  if (impl_->maps) {
    for (const auto& q : impl_->qps)
      if (q) (void)impl_->maps->del_qp(q->qpn);
    for (size_t i = 0; i < impl_->ports.size(); i++)
      for (const auto& s : impl_->dev.sockets())
        if (s.port() == i) (void)impl_->maps->del_xsk(impl_->ports[i].port, s.queue());
  }
  if (impl_->wake_fd >= 0) close(impl_->wake_fd);
  if (impl_->async_fd >= 0) close(impl_->async_fd);
  if (impl_->idle_tfd >= 0) close(impl_->idle_tfd);
}

std::array<uint32_t, 4> Context::query_version() {
  return {kApiVersion, api_version(1, 0, 0), kVendorApiVersion, kVendorApiVersion};
}

Result<std::unique_ptr<Context>> Context::open(const DeviceOptions& o) {
  if (o.interfaces.empty()) return make_error(EINVAL, "open: no plane interfaces given");
  if (o.interfaces.size() > core::kMaxPorts)
    return make_error(EINVAL, "open: at most " + std::to_string(core::kMaxPorts) + " plane interfaces");
  std::unique_ptr<Context> ctx(new Context());
  Impl& im = *ctx->impl_;
  im.opts = o;

  // 1. The XDP program: mrcd's pinned copy, else our own.
  bool have_mrcd = false;
  if (o.use_mrcd) {
    auto m = loader::XdpMaps::open_pinned(o.pin_dir);
    if (m.ok()) {
      im.pinned = std::move(*m);
      im.maps = &im.pinned;
      have_mrcd = true;
      // The controller's state next to the XDP maps (absent with an old mrcd).
      auto c = ctl::Client::open(o.pin_dir);
      if (c.ok()) im.ctl = std::move(*c);
    }
  }
  if (!have_mrcd) {
    loader::LoadOptions lo;
    lo.cfg.udp_port = o.udp_port;
    lo.cfg.dscp_trimmed = o.dscp.trimmed;
    lo.cfg.dscp_trimmed_lasthop = o.dscp.trimmed_lasthop;
    lo.cfg.dscp_control = o.dscp.control;
    auto p = loader::MrcXdp::open_and_load(lo);
    if (!p) return std::move(p).error().wrap("loading the XDP program");
    im.prog.emplace(std::move(*p));
    im.maps = &im.prog->maps();
    loader::AttachOptions ao;
    ao.generic_only = o.force_generic;
    auto at = loader::attach_all(*im.prog, o.interfaces, ao);
    if (!at) return std::move(at).error();
    im.attachments = std::move(*at);
  }

  // 2. AF_XDP sockets on every queue of every plane interface, one UMEM.
  xdp::DeviceConfig dc;
  for (const auto& name : o.interfaces) dc.ports.push_back({name, o.queues, 0});
  dc.umem.frame_size = o.frame_size;
  dc.umem.frame_count = o.umem_frames;
  dc.umem.headroom = 0;
  dc.socket.busy_poll = o.busy_poll;
  if (o.frame_chunks > 1) {
    dc.umem.tx_chunks = o.frame_chunks;
    dc.umem.tx_frames = std::min<uint32_t>(4096, o.umem_frames / (2 * o.frame_chunks));
    dc.socket.multi_buffer = true;
  }
  dc.socket.load_default_prog = false;
  auto dev = xdp::Device::open(dc);
  if (!dev) return std::move(dev).error().wrap("opening AF_XDP sockets");
  im.dev = std::move(*dev);

  // 3. Ports: what the engine and the XDP maps need to know.
  core::EngineConfig ec = o.engine;
  ec.ports.clear();
  ec.codec.udp_port = o.udp_port;
  ec.codec.dscp = o.dscp;
  if (!ec.seed || ec.seed == 1) ec.seed = mono_ns() ^ uint64_t(getpid()) << 32;
  im.tx_socket.assign(o.interfaces.size(), 0);
  im.idx.fill(-1);
  for (size_t i = 0; i < im.dev.ports().size(); i++) {
    const xdp::Port& xp = im.dev.ports()[i];
    PortInfo pi;
    pi.port = uint8_t(i + 1);
    if (have_mrcd) {
      // mrcd numbered its plane ports; use its numbers so the XDP program,
      // the controller's port states and our engine agree.
      auto mp = im.maps->port(uint32_t(xp.info.ifindex));
      if (!mp.ok())
        return make_error(EINVAL, "interface " + xp.info.name + " is not a plane port of mrcd (" + o.pin_dir +
                                      "); add it to mrcd's configuration or open the device without mrcd");
      if (mp->port == 0 || mp->port > core::kMaxPorts || im.idx[mp->port] >= 0)
        return make_error(EINVAL, "interface " + xp.info.name + ": mrcd's port number " + std::to_string(mp->port) +
                                      " is out of range or used twice");
      pi.port = uint8_t(mp->port);
    }
    im.idx[pi.port] = int(i);
    pi.ifname = xp.info.name;
    pi.ifindex = xp.info.ifindex;
    std::memcpy(pi.mac.data(), xp.info.mac.data(), 6);
    pi.mtu = xp.info.mtu;
    pi.queues = xp.socket_count;
    pi.link_up = xp.info.admin_up && xp.info.link_up;
    pi.xdp_mode = have_mrcd ? xdp::to_string(xp.info.xdp.mode)
                            : std::string(loader::to_string(im.attachments[i].info().mode));
    pi.xsk_mode = xdp::to_string(im.dev.mode());
    for (const in_addr& a : xp.info.ipv4) {
      codec::IpAddr ip;
      ip.ver = codec::IpVersion::kV4;
      std::memcpy(ip.b.data(), &a, 4);
      pi.addrs.push_back(ip);
    }
    for (const in6_addr& a : xp.info.ipv6) {
      codec::IpAddr ip;
      ip.ver = codec::IpVersion::kV6;
      std::memcpy(ip.b.data(), &a, 16);
      if (ip.b[0] == 0xfe && (ip.b[1] & 0xc0) == 0x80) continue;  // link-local: not a GID
      pi.addrs.push_back(ip);
    }
    if (pi.addrs.empty()) return make_error(EADDRNOTAVAIL, "plane interface " + pi.ifname + " has no IP address");
    // The engine gets one entry per address family (the first address of each).
    bool v4 = false, v6 = false;
    for (const auto& a : pi.addrs) {
      bool is4 = a.ver == codec::IpVersion::kV4;
      if ((is4 && v4) || (!is4 && v6)) continue;
      (is4 ? v4 : v6) = true;
      ec.ports.push_back({pi.port, pi.mac, a, pi.link_up});
    }
    im.tx_socket[i] = uint16_t(xp.first_socket);
    if (!have_mrcd)
      if (auto s = im.maps->set_port(uint32_t(pi.ifindex), {pi.port, 0}); !s.ok()) return std::move(s).error();
    for (uint32_t k = 0; k < xp.socket_count; k++) {
      const xdp::XskSocket& sk = im.dev.sockets()[xp.first_socket + k];
      if (auto s = im.maps->set_xsk(pi.port, sk.queue(), sk.fd()); !s.ok()) return std::move(s).error();
    }
    im.ports.push_back(pi);
  }

  // 4. The TX backend: live frames (one LiveTx for the engine thread) or
  // the sockets' TX rings.
  if (o.tx != TxBackend::kXsk) {
    xdp::LiveTxConfig lc;
    for (const auto& name : o.interfaces) lc.ports.push_back({name, ""});
    lc.slots = o.live_tx_slots;
    lc.batch = std::clamp<uint32_t>(o.live_tx_submit, 1, 64);
    auto lt = xdp::LiveTx::create(lc);
    uint32_t clamp = 0;
    if (lt) {
      clamp = 9000;
      for (uint16_t i = 0; i < lt->port_count(); i++) {
        const uint32_t mf = lt->max_frame(i);
        clamp = std::min(clamp, mf > max_frame_overhead() ? (mf - max_frame_overhead()) / 64 * 64 : 0);
      }
      if (clamp < 256) {
        lt = make_error(EMSGSIZE, "live frames of at most " + std::to_string(lt->max_frame()) +
                                      " bytes leave no room for a path MTU of 256");
      }
    }
    if (lt) {
      im.live = std::move(*lt);
      im.max_path_mtu = clamp;
    } else if (o.tx == TxBackend::kLive) {
      return std::move(lt).error().wrap("live-frames TX (DeviceOptions::tx = live)");
    } else {
      im.tx_note = "live-frames TX unavailable, using AF_XDP TX: " + lt.error().message();
    }
  }
  if (o.frame_chunks > 1 && !im.live) {
    // Multi-buffer: a packet fills at most frame_chunks UMEM frames, on the
    // way out (from the start of the first) and on the way in (each after
    // the kernel's XDP headroom).
    const uint32_t out = im.dev.umem().tx_span_capacity();
    const uint32_t in = o.frame_chunks * im.dev.umem().rx_frame_capacity();
    const uint32_t frame = std::min(out, in);
    im.max_path_mtu =
        frame > max_frame_overhead() + 256 ? (frame - max_frame_overhead()) / 64 * 64 : 256;
  }
  for (auto& pi : im.ports) {
    pi.tx = im.live ? "live" : "xsk";
    pi.max_path_mtu = im.max_path_mtu;
  }
  im.eng = std::make_unique<core::Engine>(ec);
  if (im.ctl) {
    ctl::EngineSync::Options so;
    so.dev = uint32_t(getpid());
    im.sync = std::make_unique<ctl::EngineSync>(*im.ctl, *im.eng, so);
    im.sync->poll(mono_ns());  // ports and policy before the first QP
  }
  im.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  // One count per queued event: readable exactly while an event is queued.
  im.async_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK | EFD_SEMAPHORE);
  if (im.wake_fd < 0 || im.async_fd < 0) return errno_error(errno, "eventfd");
  if (im.app_mode()) {
    im.idle_tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (im.idle_tfd < 0) return errno_error(errno, "timerfd_create");
  }
  im.thr = std::thread([&im] { im.run(); });
  return ctx;
}

TxBackend Context::tx_backend() const { return impl_->live ? TxBackend::kLive : TxBackend::kXsk; }
std::string Context::tx_note() const { return impl_->tx_note; }

Context::LiveTxStats Context::live_tx_stats() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  LiveTxStats x{};
  if (!impl_->live) return x;
  const xdp::LiveTxCounters& c = impl_->live.counters();
  x.submits = c.submits;
  x.frames = c.committed;
  x.bytes = c.committed_bytes;
  x.redirected = c.redirected;
  x.prog_errors = c.prog_errors;
  x.submit_errors = c.submit_errors;
  x.lost = c.lost;
  x.ring_full = c.ring_full;
  x.xmit_sent = c.xmit_sent;
  x.xmit_drops = c.xmit_drops;
  x.redirect_err = c.redirect_err;
  x.submit_ns = c.submit_ns;
  return x;
}

DeviceAttr Context::query_device() const { return impl_->eng->device_attr(); }
std::vector<PortInfo> Context::ports() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->ports;
}

// The largest path MTU every plane interface carries (its MTU less the IP,
// UDP and MRC headers of a data packet), or why none does; with want > 0,
// an error naming the interface that cannot carry want.
static Result<uint32_t> planes_fit(const std::vector<PortInfo>& ports, codec::IpVersion v,
                                   uint32_t want) {
  // IP packet bytes around the payload: IP, UDP, BTH, the largest data header
  // stack (with TSETH) and the ICRC (the C API's packet_overhead()).
  uint32_t ext = 0;
  for (unsigned op = MRC_OP_WRITE_FIRST; op <= MRC_OP_WRITE_ONLY_IMM; op++)
    ext = std::max(ext, codec::ext_header_len(uint8_t(op), true));
  const uint32_t over = (v == codec::IpVersion::kV6 ? 40u : 20u) + 8u + uint32_t(sizeof(mrc_bth)) +
                        ext + MRC_ICRC_LEN;
  uint32_t limit = core::kMaxPathMtu / 64 * 64;
  for (const PortInfo& pi : ports) {
    if (!pi.mtu) continue;
    if (pi.mtu < over + 256)
      return make_error(EMSGSIZE, "the MTU " + std::to_string(pi.mtu) + " of " + pi.ifname +
                                      " leaves no room for a path MTU of 256 (" +
                                      std::to_string(over) + " header bytes)");
    const uint32_t fit = (pi.mtu - over) / 64 * 64;
    if (want > fit)
      return make_error(EMSGSIZE, "path MTU " + std::to_string(want) + " + " +
                                      std::to_string(over) + " header bytes exceeds the MTU " +
                                      std::to_string(pi.mtu) + " of " + pi.ifname +
                                      " (it carries at most " + std::to_string(fit) + ")");
    limit = std::min(limit, fit);
  }
  return limit;
}

Result<uint32_t> Context::plane_mtu_limit(codec::IpVersion v) const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return planes_fit(impl_->ports, v, 0);
}

Result<uint32_t> Context::path_mtu_limit(codec::IpVersion v, uint32_t want) const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  const Impl& im = *impl_;
  auto planes = planes_fit(im.ports, v, want);
  if (!planes) return planes;
  // What one packet of this device may be: live frames and multi-buffer set
  // max_path_mtu; single-buffer AF_XDP receives a frame in one page, less
  // XDP's headroom and skb_shared_info (veth and page-per-packet drivers).
  uint32_t dev = im.max_path_mtu;
  if (!dev) {
    constexpr uint32_t kSingleBufferFrame = 4096 - 256 - 320;
    const uint32_t frame = std::min(kSingleBufferFrame, im.dev.umem().rx_frame_capacity());
    dev = frame > max_frame_overhead() + 256 ? (frame - max_frame_overhead()) / 64 * 64 : 256;
  }
  if (want > dev) {
    // Live frames and multi-buffer clamp a QP's path_mtu to max_path_mtu
    // (Qp::modify): the same here. Single-buffer would lose every frame.
    if (im.max_path_mtu) return im.max_path_mtu;
    return make_error(EMSGSIZE, "path MTU " + std::to_string(want) + " exceeds the " +
                                    std::to_string(dev) +
                                    " of single-buffer AF_XDP (DeviceOptions::frame_chunks 1; "
                                    "more chunks carry more)");
  }
  return want ? want : std::min(*planes, dev);
}

Result<Gid> Context::gid(uint8_t port, codec::IpVersion v) const {
  if (port == 0 || port > core::kMaxPorts || impl_->idx[port] < 0)
    return make_error(EINVAL, "gid: no port " + std::to_string(port));
  for (const auto& a : impl_->ports[size_t(impl_->idx[port])].addrs)
    if (a.ver == v) return a;
  return make_error(ENOENT, "gid: port " + std::to_string(port) + " has no address of that IP version");
}

Result<uint32_t> Context::alloc_pd() {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->eng->create_pd();
}

Status Context::dealloc_pd(uint32_t pd) {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->eng->destroy_pd(pd);
}

Result<MemoryRegion> Context::reg_mr(uint32_t pd, void* addr, size_t length, uint32_t access) {
  std::lock_guard<std::mutex> lk(impl_->mu);
  auto r = impl_->eng->reg_mr(pd, addr, length, access);
  if (!r) return std::move(r).error();
  return MemoryRegion{addr, length, r->lkey, r->rkey};
}

Status Context::dereg_mr(const MemoryRegion& mr) {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->eng->dereg_mr(mr.lkey);
}

Result<std::unique_ptr<CompChannel>> Context::create_comp_channel() {
  auto ch = std::make_unique<CompChannel>();
  ch->fd_ = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
  if (ch->fd_ < 0) return errno_error(errno, "create_comp_channel: eventfd");
  ch->ctx_ = this;
  std::lock_guard<std::mutex> lk(impl_->mu);
  impl_->channels.push_back(std::make_unique<ChannelState>());
  ch->state_ = impl_->channels.back().get();
  return ch;
}

Result<std::unique_ptr<Cq>> Context::create_cq(uint32_t cqe, CompChannel* channel) {
  std::lock_guard<std::mutex> lk(impl_->mu);
  auto h = impl_->eng->create_cq(std::max<uint32_t>(cqe, kBurst));
  if (!h) return std::move(h).error();
  auto ring = std::make_unique<CqRing>(*h, std::max<uint32_t>(cqe, kBurst));
  auto cq = std::make_unique<Cq>();
  cq->ctx_ = this;
  cq->handle_ = *h;
  cq->ring_ = ring.get();
  ring->channel = channel;
  ring->cq = cq.get();
  impl_->cqs.push_back(std::move(ring));
  return cq;
}

Status Context::destroy_cq(std::unique_ptr<Cq>&& cq) {
  if (!cq) return make_error(EINVAL, "destroy_cq: null CQ");
  std::lock_guard<std::mutex> lk(impl_->mu);
  MRC_TRY(impl_->eng->destroy_cq(cq->handle_));
  auto& v = impl_->cqs;
  v.erase(std::remove_if(v.begin(), v.end(), [&](const auto& r) { return r.get() == cq->ring_; }), v.end());
  cq.reset();
  return {};
}

Result<std::unique_ptr<Qp>> Context::create_qp(const QpInitAttr& init_in, const Cq& send_cq, const Cq& recv_cq) {
  QpInitAttr init = init_in;
  init.send_cq = send_cq.handle_;
  init.recv_cq = recv_cq.handle_;
  std::lock_guard<std::mutex> lk(impl_->mu);
  auto qpn = impl_->eng->create_qp(init);
  if (!qpn) return std::move(qpn).error();
  auto rings = std::make_unique<QpRings>(*qpn, init.cap.max_send_wr, std::max<uint32_t>(init.cap.max_recv_wr, 1));
  rings->send_cq = init.send_cq;
  rings->recv_cq = init.recv_cq;
  auto qp = std::make_unique<Qp>();
  qp->ctx_ = this;
  qp->qpn_ = *qpn;
  qp->post_ = rings.get();
  impl_->qps.push_back(std::move(rings));
  return qp;
}

Status Context::destroy_qp(std::unique_ptr<Qp>&& qp) {
  if (!qp) return make_error(EINVAL, "destroy_qp: null QP");
  std::lock_guard<std::mutex> lk(impl_->mu);
  MRC_TRY(impl_->eng->destroy_qp(qp->qpn_));
  (void)impl_->maps->del_qp(qp->qpn_);
  auto* r = static_cast<QpRings*>(qp->post_);
  r->alive.store(false);
  // The ring object stays until the context goes: a stale entry in the ready
  // queue may still point at it.
  qp.reset();
  return {};
}

// ---------------------------------------------------------------------------
// QP hints

namespace {
Status check_hint(const QpHintAttr& a, uint32_t mask) {
  if (mask &
      ~uint32_t(kHintNumQpsPerPeer | kHintNumSendPeers | kHintNumRemoteRecvPeers | kHintVendorCfg))
    return make_error(EINVAL, "QP hint: unknown attribute mask bits");
  if (mask & kHintVendorCfg)
    return make_error(EINVAL, "QP hint: no vendor configuration is defined");
  if (((mask & kHintNumQpsPerPeer) && a.num_qps_per_peer < 0) ||
      ((mask & kHintNumSendPeers) && a.num_send_peers < 0) ||
      ((mask & kHintNumRemoteRecvPeers) && a.num_remote_recv_peers < 0))
    return make_error(EINVAL, "QP hint: counts must not be negative");
  return {};
}
constexpr uint32_t kHintAll = kHintNumQpsPerPeer | kHintNumSendPeers | kHintNumRemoteRecvPeers;
}  // namespace

Result<uint64_t> Context::create_qp_hint(const QpHintAttr& a) {
  MRC_TRY(check_hint(a, kHintAll));
  std::lock_guard<std::mutex> lk(impl_->mu);
  if (impl_->hints.size() >= impl_->eng->device_attr().max_qp_hint)
    return make_error(ENOMEM, "create_qp_hint: the device has max_qp_hint (" +
                                  std::to_string(impl_->eng->device_attr().max_qp_hint) +
                                  ") hints");
  const uint64_t id = impl_->next_hint++;
  impl_->hints[id] = a;
  return id;
}

Status Context::destroy_qp_hint(uint64_t id) {
  std::lock_guard<std::mutex> lk(impl_->mu);
  auto it = impl_->hints.find(id);
  if (it == impl_->hints.end())
    return make_error(EINVAL, "destroy_qp_hint: unknown hint " + std::to_string(id));
  for (uint32_t qpn : impl_->eng->qp_list()) {
    auto a = impl_->eng->query_qp(qpn);
    if (a && a->hint == id)
      return make_error(
          EBUSY, "destroy_qp_hint: QP " + std::to_string(qpn) + " uses hint " + std::to_string(id));
  }
  impl_->hints.erase(it);
  return {};
}

Result<QpHintAttr> Context::query_qp_hint(uint64_t id) const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  auto it = impl_->hints.find(id);
  if (it == impl_->hints.end())
    return make_error(EINVAL, "query_qp_hint: unknown hint " + std::to_string(id));
  return it->second;
}

Status Context::modify_qp_hint(uint64_t id, const QpHintAttr& a, uint32_t mask) {
  MRC_TRY(check_hint(a, mask));
  std::lock_guard<std::mutex> lk(impl_->mu);
  auto it = impl_->hints.find(id);
  if (it == impl_->hints.end())
    return make_error(EINVAL, "modify_qp_hint: unknown hint " + std::to_string(id));
  if (mask & kHintNumQpsPerPeer) it->second.num_qps_per_peer = a.num_qps_per_peer;
  if (mask & kHintNumSendPeers) it->second.num_send_peers = a.num_send_peers;
  if (mask & kHintNumRemoteRecvPeers) it->second.num_remote_recv_peers = a.num_remote_recv_peers;
  return {};
}

Status Context::install_ev_profile(uint64_t id, const core::EvProfile& p) {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->eng->install_ev_profile(id, p);
}

Status Context::install_cc_profile(uint64_t id, const core::CcProfile& p) {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->eng->install_cc_profile(id, p);
}

Result<core::PlaneAddr> Context::resolve(uint8_t port, const Gid& peer) {
  if (port == 0 || port > core::kMaxPorts || impl_->idx[port] < 0)
    return make_error(EINVAL, "resolve: no port " + std::to_string(port));
  const PortInfo& pi = impl_->ports[size_t(impl_->idx[port])];
  auto mac = lib::resolve_next_hop(pi.ifindex, peer);
  if (!mac) return std::move(mac).error().wrap("resolving " + lib::to_string(peer) + " on " + pi.ifname);
  return core::PlaneAddr{peer, *mac, true};
}

int Context::async_fd() const { return impl_->async_fd; }

bool Context::get_async_event(AsyncEvent& ev) {
  if (!impl_->async.pop(ev)) return false;
  uint64_t v;
  (void)!read(impl_->async_fd, &v, sizeof v);
  return true;
}

core::EngineStats Context::engine_stats() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->eng->stats();
}

Result<std::vector<mrc_xdp_stats>> Context::xdp_stats() const {
  std::vector<mrc_xdp_stats> v;
  for (const auto& p : impl_->ports) {
    auto s = impl_->maps->stats(p.port);
    if (!s) return std::move(s).error();
    v.push_back(*s);
  }
  return v;
}

std::vector<std::string> Context::xdp_stats_names() {
  return {loader::kStatsFieldNames.begin(), loader::kStatsFieldNames.end()};
}

Context::XskStats Context::xsk_stats() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  XskStats x{};
  auto c = impl_->dev.counters();
  x.rx_frames = c.rx_frames;
  x.tx_frames = c.tx_frames;
  x.tx_kicks = c.tx_kicks;
  x.tx_completed = c.tx_completed;
  x.tx_kick_again = c.tx_kick_again;
  x.tx_kick_busy = c.tx_kick_busy;
  x.tx_kick_errors = c.tx_kick_errors + c.tx_kick_nobufs;
  x.pool_empty = c.pool_empty;
  if (auto k = impl_->dev.kernel_stats(); k.ok()) {
    x.rx_dropped = k->rx_dropped;
    x.rx_invalid = k->rx_invalid_descs;
    x.tx_invalid = k->tx_invalid_descs;
    x.rx_ring_full = k->rx_ring_full;
    x.fill_empty = k->rx_fill_ring_empty_descs;
    x.tx_ring_empty = k->tx_ring_empty_descs;
  }
  return x;
}

Progress Context::progress_mode() const { return impl_->opts.progress; }

Context::ProgressStats Context::progress_stats() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  ProgressStats st = impl_->pstats;
  st.stand_aside_checks = impl_->stand_aside_checks.load(std::memory_order_relaxed);
  return st;
}

Result<bool> Context::progress(int timeout_ms) {
  Impl& im = *impl_;
  if (!im.app_mode())
    return make_error(EINVAL, "progress: the engine thread drives this device (DeviceOptions::progress = thread)");
  if (timeout_ms < 0) return make_error(EINVAL, "progress: negative timeout");
  const bool work = im.app_step();
  if (work || timeout_ms == 0) return work;
  im.sleep_on_io(core::Time(timeout_ms) * 1'000'000, true);
  return im.app_step();
}

size_t Context::poll_ev_events(std::span<EvEvent> out) {
  size_t n = 0;
  while (n < out.size() && impl_->app_events.pop(out[n])) n++;
  return n;
}

// ---------------------------------------------------------------------------
// Qp, Cq, CompChannel

Status Qp::modify(const QpAttr& attr, uint32_t ibv_mask, uint32_t mrc_mask) {
  Context::Impl& im = *ctx_->impl_;
  std::lock_guard<std::mutex> lk(im.mu);
  if ((mrc_mask & core::kMrcHint) && attr.hint && !im.hints.count(attr.hint))
    return make_error(EINVAL, "modify_qp " + std::to_string(qpn_) + ": unknown QP hint " +
                                  std::to_string(attr.hint));
  // Work posted before this call reaches the engine before the transition
  // (as verbs orders post and modify), not after it.
  im.drain_posts();
  // Profiles come from mrcd (pinned, ONLINE) when it runs: install the ones
  // this QP names in the engine first. Without mrcd, install_*_profile did.
  if (im.sync) {
    if ((mrc_mask & core::kMrcEvProfileId) && attr.ev_profile_id)
      MRC_TRY(im.sync->use_ev_profile(attr.ev_profile_id));
    if ((mrc_mask & core::kMrcCcProfileId) && attr.cc_profile_id)
      MRC_TRY(im.sync->use_cc_profile(attr.cc_profile_id));
  }
  // Live-frames TX: frames must fit the kernel's live-frame limit, so the
  // path MTU is at most max_path_mtu (the receiver accepts any size).
  if ((ibv_mask & core::kQpPathMtu) && im.max_path_mtu && attr.path_mtu > im.max_path_mtu) {
    QpAttr a = attr;
    a.path_mtu = im.max_path_mtu;
    MRC_TRY(im.eng->modify_qp(qpn_, a, ibv_mask, mrc_mask));
  } else {
    MRC_TRY(im.eng->modify_qp(qpn_, attr, ibv_mask, mrc_mask));
  }
  auto a = im.eng->query_qp(qpn_);
  if (!a) return std::move(a).error();
  // What the XDP program needs to NACK trimmed packets for this QP.
  if (a->qp_state == QpState::kRtr || a->qp_state == QpState::kRts) {
    uint32_t flags = (a->cap_flags & core::kQpCapTrimNackDestUnsupported) ? MRC_QP_F_NO_TRIM_NACK : 0;
    MRC_TRY(im.maps->set_qp(qpn_, {a->dest_qp_num, flags}));
  } else if (a->qp_state == QpState::kReset) {
    (void)im.maps->del_qp(qpn_);
  }
  return {};
}

Result<QpAttr> Qp::query() const {
  std::lock_guard<std::mutex> lk(ctx_->impl_->mu);
  return ctx_->impl_->eng->query_qp(qpn_);
}

Result<QpStats> Qp::stats() const {
  std::lock_guard<std::mutex> lk(ctx_->impl_->mu);
  return ctx_->impl_->eng->qp_stats(qpn_);
}

Result<std::vector<core::PathSet::Ev>> Qp::evs() const {
  std::lock_guard<std::mutex> lk(ctx_->impl_->mu);
  return ctx_->impl_->eng->qp_evs(qpn_);
}

Status Qp::post_send(const SendWr& wr) {
  auto* r = static_cast<QpRings*>(post_);
  if (wr.num_sge > core::kMaxSge) return make_error(EINVAL, "post_send: too many SGEs");
  if (wr.num_sge && !wr.sg_list) return make_error(EINVAL, "post_send: null sg_list");
  if (wr.opcode != WrOpcode::kRdmaWrite && wr.opcode != WrOpcode::kRdmaWriteWithImm)
    return make_error(EINVAL, "post_send: only RDMA WRITE and WRITE_WITH_IMM are supported");
  PostedSend ps;
  ps.wr = wr;
  std::copy(wr.sg_list, wr.sg_list + wr.num_sge, ps.sg.begin());
  if (!r->sq.push(ps)) return make_error(ENOMEM, "post_send: send queue full");
  if (!r->queued.exchange(true)) ctx_->impl_->ready.push(r);
  ctx_->impl_->kick_engine();
  return {};
}

Status Qp::post_recv(const RecvWr& wr) {
  auto* r = static_cast<QpRings*>(post_);
  if (!r->rq.push(wr.wr_id)) return make_error(ENOMEM, "post_recv: receive queue full");
  if (!r->queued.exchange(true)) ctx_->impl_->ready.push(r);
  ctx_->impl_->kick_engine();
  return {};
}

Result<size_t> Cq::poll(std::span<Wc> out) {
  auto* r = static_cast<CqRing*>(ring_);
  size_t n = 0;
  while (n < out.size() && r->ring.pop(out[n])) n++;
  // kApplication: nothing to return, so run the engine here and look again.
  if (!n && ctx_->impl_->app_mode() && ctx_->impl_->app_step())
    while (n < out.size() && r->ring.pop(out[n])) n++;
  if (!n && r->overflow.load(std::memory_order_acquire)) return make_error(EOVERFLOW, "poll_cq: completion queue overrun");
  return n;
}

Status Cq::req_notify() {
  auto* r = static_cast<CqRing*>(ring_);
  if (!r->channel) return make_error(EINVAL, "req_notify: the CQ has no completion channel");
  r->armed.store(true, std::memory_order_seq_cst);
  // A completion that raced with arming must not be lost.
  if (!r->ring.empty() && r->armed.exchange(false)) {
    static_cast<ChannelState*>(r->channel->state_)->fired.push(this);
    wake(r->channel->fd());
  }
  return {};
}

Result<Cq*> CompChannel::get_event() {
  uint64_t v;
  if (read(fd_, &v, sizeof v) < 0) return errno_error(errno, "get_cq_event");
  Cq* cq = nullptr;
  if (!static_cast<ChannelState*>(state_)->fired.pop(cq)) return make_error(EAGAIN, "get_cq_event: no event");
  return cq;
}

void CompChannel::ack_events(Cq* cq, unsigned n) {
  (void)cq;
  (void)n;  // events carry no resources to release here
}

CompChannel::~CompChannel() {
  if (fd_ >= 0) close(fd_);
}

}  // namespace mrc
