// libmrc's engine loop: the engine thread of a Context and the passes it
// and (Progress::kApplication) polling application threads run over the
// sans-I/O engine: posts in, one receive burst from every AF_XDP socket,
// completions out, transmit through the DeviceTxSink (tx_sink.hpp), EV
// state and QP errors out; then spinning, sleeping on the sockets, the
// wake eventfd and the engine's next timer, or standing aside while an
// application thread drives progress. The state is Context::Impl
// (context_impl.hpp).
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/timerfd.h>

#include <algorithm>

#include "lib/context_impl.hpp"

namespace mrc {

using lib::ChannelState;
using lib::CqRing;
using lib::kBurst;
using lib::mono_ns;
using lib::PostedSend;
using lib::QpRings;
using lib::wake;

void Context::Impl::drain_posts() {
  QpRings* q;
  while (ready.pop(q)) {
    q->queued.store(false, std::memory_order_release);
    if (!q->alive.load(std::memory_order_acquire)) continue;
    uint64_t rid;
    while (q->rq.pop(rid)) {
      core::RecvWr r;
      r.wr_id = rid;
      if (!eng->post_recv(q->qpn, r).ok())
        error_completion(q->recv_cq, q->qpn, rid, WcOpcode::kRecvRdmaWithImm);
    }
    PostedSend ps;
    while (q->sq.pop(ps)) {
      ps.wr.sg_list = ps.sg.data();
      if (!eng->post_send(q->qpn, ps.wr).ok())
        error_completion(q->send_cq, q->qpn, ps.wr.wr_id, WcOpcode::kRdmaWrite);
    }
  }
}

void Context::Impl::error_completion(uint32_t cq, uint32_t qpn, uint64_t wr_id, WcOpcode op) {
  Wc wc;
  wc.wr_id = wr_id;
  wc.status = core::kWcLocQpOpErr;
  wc.opcode = op;
  wc.qp_num = qpn;
  for (auto& c : cqs)
    if (c && c->handle == cq) deliver(*c, &wc, 1);
}

void Context::Impl::deliver(CqRing& c, const Wc* wc, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!c.ring.push(wc[i])) c.overflow.store(true, std::memory_order_release);
  if (n && c.channel && c.armed.exchange(false)) {
    static_cast<ChannelState*>(c.channel->state_)->fired.push(c.cq);
    wake(c.channel->fd());
  }
}

// One pass of the engine (the caller holds mu): link events when a
// millisecond has passed, then iteration().
bool Context::Impl::step_locked(bool may_defer_tx) {
  const core::Time now = mono_ns();
  if (now >= next_links.load(std::memory_order_relaxed)) {
    link_events_locked();
    next_links.store(now + 1'000'000, std::memory_order_relaxed);
  }
  return iteration(may_defer_tx);
}

// A pass from an application thread (kApplication); false without one
// when another thread holds the engine.
bool Context::Impl::app_step() {
  const core::Time now = mono_ns(), idle = core::Time(opts.progress_idle_us) * 1000;
  app_until.store(now + idle, std::memory_order_relaxed);
  arm_idle(now, now + idle);
  std::unique_lock<std::mutex> lk(mu, std::try_to_lock);
  if (!lk.owns_lock()) return false;
  pstats.app_passes++;
  return step_locked(true);
}

// Completions of every CQ to the application; true if there were any.
bool Context::Impl::deliver_all(bool* recv) {
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
      if (recv)
        for (size_t i = 0; i < *r && !*recv; i++)
          *recv = wc[i].opcode == WcOpcode::kRecvRdmaWithImm;
    }
  }
  if (hook && hook->deliver(*eng, wc)) any = true;
  return any;
}

// Sleeps until a socket has input (sockets: false, not on them), a post or a
// stop wakes it, the engine's next timer, or max_wait (ns), whichever comes
// first.
void Context::Impl::sleep_on_io(core::Time max_wait, bool app, bool sockets) {
  thread_local std::vector<pollfd> pfds;
  core::Time deadline;
  std::unique_lock<std::mutex> lk(mu);
  deadline = eng->next_deadline();
  const core::Time now = mono_ns();
  if (deadline <= now) return;
  sleepers.fetch_add(1, std::memory_order_seq_cst);
  if (!ready.empty()) {
    sleepers.fetch_sub(1);
    return;
  }
  const std::span<pollfd> fds = sockets ? dev.poll_fds() : std::span<pollfd>{};
  pfds.assign(fds.begin(), fds.end());
  pfds.push_back({wake_fd.get(), POLLIN, 0});
  lib::LoopHook* const h = hook;
  if (h && !h->sleep_prepare(pfds)) {
    h->woke();
    sleepers.fetch_sub(1);
    return;
  }
  lk.unlock();
  const core::Time wait =
      deadline == core::kNever ? max_wait : std::min<core::Time>(deadline - now, max_wait);
  if (app) {
    const core::Time until = now + wait + core::Time(opts.progress_idle_us) * 1000;
    app_until.store(until, std::memory_order_relaxed);
    arm_idle(now, until);
  }
  timespec ts{time_t(wait / 1'000'000'000ull), long(wait % 1'000'000'000ull)};
  int r = ppoll(pfds.data(), pfds.size(), &ts, nullptr);
  sleepers.fetch_sub(1, std::memory_order_release);
  if (h) {
    lk.lock();
    if (hook == h) h->woke();
    lk.unlock();
  }
  if (r > 0 && (pfds[fds.size()].revents & POLLIN)) {
    uint64_t v;
    (void)!read(wake_fd.get(), &v, sizeof v);
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
void Context::Impl::arm_idle(core::Time now, core::Time until, bool force) {
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
  (void)timerfd_settime(idle_tfd.get(), TFD_TIMER_ABSTIME, &its, nullptr);
}

// One pass: posts, receive, completions, transmit. may_defer_tx (an
// application thread's pass): when the receive produced receive completions, the
// transmit (ACKs, mostly) waits for the caller's next pass, so it leaves
// in one batch with what the application posts in reply to them; never
// twice in a row, and the engine thread sends it if no pass follows
// within progress_idle_us.
bool Context::Impl::iteration(bool may_defer_tx) {
  const core::Time now = mono_ns();
  bool work = false;
  if (!ready.empty()) {
    drain_posts();
    work = true;
  }
  if (hook && hook->drain(*eng)) work = true;
  if (!scratch) scratch = std::make_unique<lib::LoopScratch>();
  if (!sink) {
    sink = std::make_unique<lib::DeviceTxSink>(dev, idx, tx_socket, ports.size(),
                                               live ? &live : nullptr, opts);
    if (eng->tracks_holds()) sink->track_holds(eng.get());
  }
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
  // Frames the last transmit sent to this host itself (tx_sink.hpp): they
  // arrive now, on the port they left by.
  if (!sink->looped().empty()) {
    work = true;
    eng->rx(sink->looped(), now);
    sink->loop_clear();
  }
  // Completions to the application, before the transmit's syscalls. Only
  // a receive is answered (a send completion frees a buffer; the posts it
  // leads to go out at the next pass anyway): deferring for send
  // completions alone spent the one deferral in a row on a peer's ACK
  // that arrived a pass ahead of its message, so the ACK of that message
  // then left alone, ahead of the answer.
  bool recv = false;
  if (deliver_all(&recv)) {
    work = true;
    if (may_defer_tx && recv && !tx_deferred) {
      tx_deferred = true;
      pstats.tx_deferred++;
      return true;
    }
  }
  tx_deferred = false;
  // Transmit: control first, then retransmissions, then new data.
  lib::DeviceTxSink& tx = *sink;
  size_t sent = 0;
  // Control frames (the SACKs rx() queued) leave ahead of a data burst,
  // with at most kCtrlLead data frames (an answer: one system call for
  // both): behind the burst they would wait for its build and its system
  // calls (100-400 us on veth), and the peer would take that wait, which no
  // service time reports, for a queue in the fabric (quick adapt).
  if (eng->data_queued() && (sent = eng->tx_control(tx, now, kBurst)) > 0) {
    const size_t lead = eng->tx(tx, now, lib::kCtrlLead);
    sent += lead;
    if (lead == lib::kCtrlLead) {
      tx.finish();
      dev.flush_tx();
      eng->tx_done(mono_ns());
    }
  }
  for (int round = 0; round < 4; round++) {
    size_t k = eng->tx(tx, now, kBurst);
    sent += k;
    if (k < kBurst) break;
  }
  tx.finish();
  if (sent) work = true;
  dev.flush_tx();
  if (sent) eng->tx_done(mono_ns());
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
    for (size_t i = 0; i < ne; i++)
      if (!hook || !hook->qp_error(errs[i])) push_async({AsyncEventType::kQpFatal, errs[i], 0, 0});
  // Tombstones the engine freed (the host service's): their steering goes.
  while ((ne = eng->poll_freed_tombstones(errs)) > 0)
    for (size_t i = 0; i < ne; i++)
      if (maps) (void)maps->del_qp(errs[i]);
  return work;
}

void Context::Impl::push_async(const AsyncEvent& ev) {
  async.push(ev);
  wake(async_fd.get());
}

void Context::Impl::link_events_locked() {
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
    const AsyncEvent ev{up ? AsyncEventType::kPortActive : AsyncEventType::kPortError, 0, port, 0};
    push_async(ev);
    if (hook) hook->port_event(ev);
  }
}

// Sleeps until the stand-aside timer fires (no application pass pushed it
// out), a stop, or a 100 ms backstop. Woken with app_until still ahead (the
// timer was armed before the last passes, or racing threads armed it out of
// order): set it to app_until.
void Context::Impl::stand_aside(core::Time now, core::Time until) {
  arm_idle(now, until, true);
  pollfd p[2] = {{wake_fd.get(), POLLIN, 0}, {idle_tfd.get(), POLLIN, 0}};
  const core::Time wait = std::max<core::Time>(until - now, 100'000'000);
  timespec ts{time_t(wait / 1'000'000'000ull), long(wait % 1'000'000'000ull)};
  if (ppoll(p, 2, &ts, nullptr) > 0) {
    uint64_t v;
    if (p[0].revents & POLLIN) (void)!read(wake_fd.get(), &v, sizeof v);
    if (p[1].revents & POLLIN) (void)!read(idle_tfd.get(), &v, sizeof v);
  }
  // Woken to find the application still driving: a wasted wake-up.
  if (mono_ns() < app_until.load(std::memory_order_relaxed))
    stand_aside_checks.fetch_add(1, std::memory_order_relaxed);
}

void Context::Impl::run() {
  if (opts.engine_cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(opts.engine_cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  }
  apply_sched();
  sched_ready.set_value();
  // kFifo: never spin idle at real-time priority (the idle passes before a
  // sleep stay at 64, no idle_spin_us, no busy-poll spinning), and a burst
  // of work longer than engine_rt_burst_us continues under SCHED_OTHER.
  const bool fifo = sched_got == EngineSched::kFifo;
  const bool dedicated = sched_got == EngineSched::kDedicated;
  const core::Time rt_burst_ns = core::Time(opts.engine_rt_burst_us) * 1000;
  core::Time awake_since = mono_ns();
  uint32_t idle_spins = 0;
  core::Time idle_since = 0;
  const core::Time spin_ns = fifo ? 0 : core::Time(opts.idle_spin_us) * 1000;
  // A raised thread (kNice, kFifo) that polls idle keeps the CPU from the
  // application thread its completions just woke on the same CPU (it would
  // preempt a nice-0 poller, but not a raised one): it sleeps after two
  // empty passes instead of 64 (busy_poll keeps kNice spinning).
  const bool raised = fifo || sched_got == EngineSched::kNice;
  const uint32_t idle_passes = opts.busy_poll && !fifo ? 4096u : raised ? 2u : 64u;
  // engine_coalesce_us: the bytes the engine moved (received and sent) at
  // the start of the current measuring period, its start, and whether the
  // last full period (1-2 ms) moved 32 KiB per millisecond; whether a pass
  // found work since the last sleep or wait.
  constexpr uint64_t kCoalesceBytesPerMs = 32 * 1024;
  uint64_t period_bytes = 0;
  core::Time period_start = 0;
  bool dense = false, worked = false;
  while (!stop.load(std::memory_order_acquire)) {
    // kApplication: stand aside while an application thread drives the
    // engine; wake when it stops doing so (or on stop).
    if (app_mode()) {
      const core::Time now = mono_ns(), until = app_until.load(std::memory_order_relaxed);
      if (now < until) {
        stand_aside(now, until);
        idle_spins = 0;
        awake_since = mono_ns();
        if (fifo && !rt_on) set_rt(true);
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
      if (coalesce_ns && !work) {
        const auto& st = eng->stats();
        const uint64_t moved = st.rx_bytes + st.tx_bytes;
        const core::Time t = mono_ns();
        if (t - period_start >= 1'000'000) {
          // A period that spans an idle sleep (over 2 ms) is not a transfer:
          // a ping-pong after a transfer is measured afresh.
          dense = t - period_start <= 2'000'000 &&
                  (moved - period_bytes) * 1'000'000 >= kCoalesceBytesPerMs * (t - period_start);
          period_bytes = moved;
          period_start = t;
        }
      }
    }
    if (work) {
      idle_spins = 0;
      worked = true;
      if (rt_on && mono_ns() - awake_since > rt_burst_ns) set_rt(false);
      continue;
    }
    // kDedicated: the core is the engine's; poll again.
    if (dedicated) continue;
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
    } else if (++idle_spins < idle_passes) {
      continue;
    }
    // engine_coalesce_us: in a transfer (dense), wait out the next packets
    // instead of waking for each batch of them. A wait that brought no work
    // ends it: the thread sleeps on its sockets after the next empty passes.
    if (coalesce_ns && dense && worked) {
      worked = false;
      idle_spins = 0;
      {
        std::lock_guard<std::mutex> lk(mu);
        pstats.coalesced_waits++;
      }
      sleep_on_io(coalesce_ns, false, false);
      continue;
    }
    worked = false;
    {
      std::lock_guard<std::mutex> lk(mu);
      pstats.thread_sleeps++;
    }
    sleep_on_io(100'000'000, false);
    idle_spins = 0;
    awake_since = mono_ns();
    if (fifo && !rt_on) set_rt(true);
  }
}

}  // namespace mrc
