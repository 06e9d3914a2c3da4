// Requester: segmentation, spraying, SACK/NACK processing, RACK-style loss
// inference, the ACK timeout with linear then exponential retries, tail-loss
// and EV probes, the MPR and WIMM windows, NSCC, send completions.
#include <algorithm>
#include <cstring>

#include "codec/ev.hpp"
#include "core/engine_impl.hpp"
#include "core/srv6.hpp"

namespace mrc::core {

// The configured timeout is a floor (IB's Local ACK Timeout is the least
// a requester waits): on a path, or a host, whose RTT is longer every
// packet would time out, be resent and retire its EV, and the retry
// budget run out while everything is delivered. Wait at least the QP's
// RTO (srtt + 4 x rttvar, as TCP's).
Time Engine::ack_timeout_base(const Qp& q) {
  return std::max(Time(1024) << q.attr.timeout, q.srtt + 4 * q.rttvar);
}

Time Engine::ack_timeout(const Qp& q) const {
  if (q.attr.timeout == 0) return kNever;  // as in IB: 0 = no ACK timeout
  // The first transmission and linear_cnt retries wait T = 1.024 us x
  // 2^timeout; each of the exp_cnt retries after them waits twice as long as
  // the one before (capped at 2^24 x 1.024 us).
  const Time base = ack_timeout_base(q);
  const Time cap = std::max(Time(1024) << 24, base);
  if (q.retries <= q.attr.retry_linear) return base;
  uint32_t k = std::min<uint32_t>(q.retries - q.attr.retry_linear, 24);
  return std::min(base << k, cap);
}

namespace {
Time pto(Time srtt, Time reo, Time floor) { return std::max(2 * srtt + reo, floor); }

// Where the PSN an acknowledgement names stands (nothing authenticates it,
// Documentation/security.md): in flight [una, next_psn); acknowledged
// already, at most a window below una (a late or duplicated answer);
// anything else was never sent by this QP (forged, or for another QP).
// Counts the acknowledgement in `stale` or `ghost` unless it names a PSN in
// flight (true).
bool in_flight(uint32_t psn, uint32_t una, uint32_t next_psn, uint32_t window, uint64_t& stale,
               uint64_t& ghost) {
  if (codec::psn_lt(psn, next_psn) && !codec::psn_lt(psn, una)) return true;
  const int32_t behind = codec::psn_diff(una, psn);
  if (behind > 0 && uint32_t(behind) <= window)
    stale++;
  else
    ghost++;
  return false;
}
// Tail-loss probes sent in a row without an answer (each on an EV chosen
// afresh, so one that went to a dead plane is followed by one that does not)
// before only the ACK timeout is left.
constexpr uint8_t kMaxTlpUnanswered = 3;
}  // namespace

Time Engine::tlp_due(const Qp& q) const {
  if (q.tlp_pending) return kNever;
  const Time p = pto(q.srtt, q.reo_wnd, cfg_.min_rto);
  if (!q.tlp_outstanding) return std::max(q.last_ack, q.last_send) + p;
  if (q.tlp_unanswered >= kMaxTlpUnanswered) return kNever;
  return q.tlp_recent[q.tlp_head].sent + p;  // the probe itself went unanswered
}

// One token per EV probe; the bucket refills at probe_rate per second up to
// probe_burst.
bool Engine::probe_token(Time now) {
  if (!cfg_.probe_rate) return true;
  const uint64_t unit = 1'000'000'000ull,
                 cap = uint64_t(std::max<uint32_t>(cfg_.probe_burst, 1)) * unit;
  if (!probe_tokens_at_) probe_tokens_ = cap;
  if (now > probe_tokens_at_) {
    probe_tokens_ =
        std::min<uint64_t>(cap, probe_tokens_ + (now - probe_tokens_at_) * cfg_.probe_rate);
    probe_tokens_at_ = now;
  }
  if (probe_tokens_ < unit) return false;
  probe_tokens_ -= unit;
  return true;
}

// When the next probe token is there (1: now).
Time Engine::probe_token_due() const {
  const uint64_t unit = 1'000'000'000ull;
  if (!cfg_.probe_rate || probe_tokens_ >= unit || !probe_tokens_at_) return 1;
  return probe_tokens_at_ + (unit - probe_tokens_ + cfg_.probe_rate - 1) / cfg_.probe_rate;
}

Time Engine::qp_deadline(const Qp& q) const {
  Time t = q.sack_deadline;
  if (q.state != QpState::kRts || !q.win_ready()) return t;
  if (q.una != q.next_psn) {
    Time to = ack_timeout(q);
    if (to != kNever) t = std::min(t, q.last_progress + to);
    t = std::min(t, tlp_due(q));
    t = std::min(t, q.rack_due);
  }
  if (q.paths.bad_count()) t = std::min(t, std::max(q.probe_check, Time(1)));
  if (q.tlp_pending) t = std::min<Time>(t, 1);
  if (!q.probe_queue.empty()) t = std::min<Time>(t, probe_token_due());
  return t;
}

void Engine::remote_ports(Qp& q, uint32_t down, Time now) {
  uint32_t newly = down & ~q.remote_down;
  q.remote_down = down;
  if (!newly || !q.win_ready()) return;
  for (uint32_t psn = q.una; psn != q.next_psn; psn = codec::psn_add(psn, 1)) {
    TxPkt& t = q.pkt(psn);
    if ((newly >> t.port & 1) && !(t.flags & (kTxSacked | kTxLost))) {
      t.flags |= kTxNacked;
      mark_lost(q, psn, false, EvEventReason::kPortDown, now);
    }
  }
}

void Engine::note_silent(Qp& q, const TxPkt& t, Time now) {
  if (!cfg_.paths.silent_plane_pace || t.port > kMaxPorts || q.latest_port[t.port] >= t.sent)
    return;
  const bool was = q.plane_is_silent(t.port);
  q.plane_silent[t.port] = std::max(q.plane_silent[t.port], t.sent);
  if (!was) {
    q.stats.plane_silences++;
    q.silent_since[t.port] = now;
    q.silent_mask |= 1u << t.port;
  }
}

void Engine::note_quiet(Qp& q, const TxPkt& t, Time now) {
  if (!(q.quiet_mask >> t.port & 1) || q.latest_port[t.port] >= q.plane_quiet[t.port]) {
    q.stats.plane_quiets++;
    q.quiet_since[t.port] = now;
    q.quiet_mask |= 1u << t.port;
    q.plane_quiet[t.port] = 0;
  }
  q.plane_quiet[t.port] = std::max(q.plane_quiet[t.port], t.sent);
}

void Engine::mark_lost(Qp& q, uint32_t psn, bool silent, EvEventReason why, Time now, bool blame) {
  TxPkt& t = q.pkt(psn);
  if (t.flags & (kTxSacked | kTxLost)) return;
  t.flags |= kTxLost;
  q.leave_flight(t);
  q.lost++;
  want_tx(q);
  if (codec::psn_lt(psn, q.rtx_hint) || q.lost == 1) q.rtx_hint = psn;
  if (t.ev < q.paths.size()) q.paths.at(t.ev).stats.lost++;
  // A packet lost without a trim or NACK: the path failed (MRC retires it at once).
  if (silent && !(t.flags & kTxNacked)) q.paths.plane_loss(t.port, now);
  // Its plane delivered nothing sent after it, another plane did: the
  // plane is silent (data_ports paces it until it delivers again).
  if (silent && !(t.flags & kTxNacked) && q.latest_delivered > t.sent) note_silent(q, t, now);
  if (silent && !(t.flags & kTxNacked) && t.ev < q.paths.size() &&
      q.paths.at(t.ev).state != EvState::kAssumedBad) {
    // Judged by time alone (its whole plane late: nothing sent after it on
    // the plane delivered): no evidence against this path more than against
    // its siblings. A host that stalls the plane's softirq or receiver for
    // milliseconds makes a healthy plane look exactly so, and retiring its
    // EVs one by one retired hundreds of healthy EVs a second on a loaded
    // host (issue 25). Resent all the same; a plane that stays silent is
    // retired as a whole below.
    // The exception: an EV readmitted by its probes that loses data before
    // any of its data was acknowledged since. Its probes pass where its data
    // does not (a lower MTU inside the path): that is evidence against the
    // path, and the relapse back-off (PathSet::assume_bad) needs it, or the
    // plane is retired and readmitted over and over (resilience 12).
    const PathSet::Ev& pe = q.paths.at(t.ev);
    const bool relapse = pe.readmitted && uint16_t(pe.stats.acked) == pe.acked_at_readmit;
    if (!blame && !relapse && cfg_.paths.loss_needs_plane_evidence) {
      q.stats.losses_by_time++;
      plane_suspect(q, t.port, now);
      return;
    }
    // On a plane that loses everywhere (PathSet::plane_lossy) one EV is no
    // worse than its siblings: retiring it, probing it and readmitting it
    // buys nothing and costs K probes per loss. The loss still counts
    // towards the plane failing as a whole (below).
    // An EV that loses again well before its plane's rate says it should (a
    // broken path inside the lossy plane) is retired all the same.
    PathSet::Ev& e = q.paths.at(t.ev);
    const uint32_t ppm = std::max<uint32_t>(q.paths.plane_loss_ppm(t.port), 1);
    const uint64_t gap = std::max<uint64_t>(2, 1'000'000 / ppm / 8);
    const bool repeat = e.loss_tx && uint32_t(uint32_t(e.stats.tx_pkts) - e.loss_tx) < gap;
    // So is one whose own loss rate, over its last few losses, is far above
    // its plane's per-packet rate (a subset of the plane's paths losing,
    // the rest not: the plane is lossy on average, the subset far more).
    const bool outlier = q.paths.loss_outlier(t.ev);
    const bool lossy = cfg_.paths.plane_lossy_keep_evs && q.paths.plane_lossy(t.port);
    const bool keep = lossy && !repeat && !outlier;
    if (lossy && !repeat && outlier) q.stats.ev_outliers++;
    if (!keep) q.paths.assume_bad(t.ev, why, now, outlier);
    if (keep || q.paths.at(t.ev).state == EvState::kAssumedBad) {
      if (!keep) t.flags |= kTxDemoted;
      plane_suspect(q, t.port, now);
    }
  }
}

// A silent loss on `port`. Many of them (plane_suspect_losses) with
// nothing delivered on the plane: the plane (a NIC port's far side, a T0)
// is down. Retire all of it. ... but only once it has been silent for
// longer than an RTT (a burst of inferred losses inside one SACK is not a
// dead plane) and than the QP's delivery-delay tail (plane_quiet_max): a
// plane whose softirq or receiver this host stalled for milliseconds is as
// silent for that long, and every delivery it then reports took as long.
void Engine::plane_suspect(Qp& q, uint8_t port, Time now) {
  const uint32_t k = cfg_.paths.plane_suspect_losses;
  if (!k || port > kMaxPorts || ++q.plane_losses[port] < k) return;
  // A silent plane is paced already (data_ports): retired only if it stays
  // silent for silent_suspect_wait (a link that flaps is back in the spray
  // at its first paced packet after it heals, with no probe round).
  if (cfg_.paths.silent_suspect_wait && q.plane_is_silent(port) &&
      now - q.silent_since[port] < cfg_.paths.silent_suspect_wait)
    return;
  Time quiet = std::max(2 * q.srtt, cfg_.min_rto);
  if (cfg_.paths.plane_quiet_max)
    quiet = std::max(quiet, std::min(q.delivery_tail(), cfg_.paths.plane_quiet_max));
  if (now - q.plane_heard[port] <= quiet) return;
  // ... and other planes delivered what was sent that long after this
  // plane's latest delivery: a host or a receiver that stalled silences
  // every plane at once, and then no plane is worse than another.
  if (q.latest_delivered <= q.latest_port[port] + quiet) return;
  q.plane_losses[port] = 0;
  q.stats.plane_suspects++;
  q.paths.assume_plane_bad(port, EvEventReason::kPlaneLoss, now);
  // Whatever went out on it after its last delivery is gone too: resend it
  // now instead of waiting to infer each loss.
  for (uint32_t p = q.una; p != q.next_psn; p = codec::psn_add(p, 1)) {
    TxPkt& o = q.pkt(p);
    if (o.port == port && !(o.flags & (kTxSacked | kTxLost)) && o.sent >= q.latest_port[port]) {
      o.flags |= kTxNacked;  // its EV is already retired
      mark_lost(q, p, false, EvEventReason::kPlaneLoss, now);
    }
  }
}

// What spurious retransmissions taught the reordering windows (reo_extra),
// at most the smoothed RTT now (EngineConfig::reo_extra_cap): it doubles up
// to the smoothed RTT of its moment and changes only at the next spurious
// retransmission, so learned while the RTT spiked (a start-up queue, a host
// stall) it held every later loss judgement back by the spike (design.md,
// "What reordering taught is capped at the RTT").
Time Engine::learned_reo(const Qp& q) const {
  if (!cfg_.reo_extra_cap) return q.reo_extra;
  return std::min(q.reo_extra, std::max(q.srtt, cfg_.min_reorder));
}

// How long after its transmission a packet must have been acknowledged: the
// RTT of the slowest plane (each plane's own queues) and four times its
// variation, plus half of it or the reordering window if larger (the
// smoothed variation understates the tail a shaper's queue gives single
// packets), plus what spurious retransmissions taught us. The same for every
// plane, so losses are judged in transmission order. With nothing sent
// later delivered it proves nothing. A plane without an RTT sample yet has
// no such deadline: the others' RTTs say nothing about its queues. Computed
// once per pass over the packets, not per packet (kNever: no samples yet).
Time Engine::rack_wait(const Qp& q) const {
  Time w = 0, slowest = 0;
  for (uint32_t p = 0; p <= kMaxPorts; p++) {
    if (!q.port_srtt[p]) continue;
    w = std::max(w, q.port_srtt[p] + 4 * q.port_rttvar[p]);
    slowest = std::max(slowest, q.port_srtt[p]);
  }
  if (!slowest) return kNever;
  return w + std::max(slowest / 2, q.reo_wnd) + learned_reo(q);
}

// Whether the silent loss of `psn` is evidence against its path rather
// than against its whole plane being late: its siblings on the same plane
// (packets over other EVs) sent right around it were delivered, one of the
// next kSiblings sent after it and one of the last kBefore sent before it
// (or everything before it: the cumulative ACK passed them). A path that
// fails loses its own packets while its siblings, sent between them,
// arrive. A host that holds a batch of a plane's packets (its softirq or
// receiver stalled on one CPU while later packets pass through the other:
// 1-4.4 ms on a loaded 2-CPU host) loses none, but delays the whole batch:
// the siblings sent right before and after a "lost" packet are missing as
// well, and only much later ones arrive; at the batch's edge one side is.
bool Engine::path_blamed(const Qp& q, uint32_t psn) const {
  constexpr uint32_t kSiblings = 4, kBefore = 2, kScan = 256;
  const TxPkt& t = q.pkt(psn);
  if (q.latest_port[t.port] <= t.sent) return false;  // nothing later on its plane arrived
  bool after = false;
  uint32_t seen = 0, n = 0;
  for (uint32_t p = codec::psn_add(psn, 1); p != q.next_psn && n < kScan;
       p = codec::psn_add(p, 1), n++) {
    const TxPkt& o = q.pkt(p);
    if (o.port != t.port || o.ev == t.ev || o.sent <= t.sent) continue;
    if (o.flags & kTxSacked) {
      after = true;
      break;
    }
    if (++seen >= kSiblings) break;
  }
  if (!after) return false;
  seen = n = 0;
  for (uint32_t p = psn; p != q.una && n < kScan; n++) {
    p = codec::psn_add(p, -1);
    const TxPkt& o = q.pkt(p);
    if (o.port != t.port || o.ev == t.ev) continue;
    if (o.flags & kTxSacked) return true;
    if (++seen >= kBefore) return false;
  }
  return true;  // the cumulative ACK covers what went before it
}

// The RACK timer: packets that SACKs reported missing, with something sent
// after them delivered, were not yet overdue by their plane's RTT. When the
// SACKs stop (every message in flight, the sender has nothing new to send,
// e.g. the losses of a plane that just failed) nothing else would judge
// them before a tail-loss probe. Judges every such packet now overdue and
// re-arms for the next one.
void Engine::rack_timer(Qp& q, Time now) {
  q.rack_due = kNever;
  if (!q.latest_delivered) return;
  // Only once the SACKs have stopped: while they come, packets sent later
  // are delivered and the rules above judge (and a backlog of SACKs being
  // worked through after this host stalled would make everything look
  // overdue). And not after a silence longer than the wait itself: that may
  // be this host's own stall, not the network; a tail-loss probe asks.
  const Time quiet = std::max(q.reo_wnd, q.srtt / 4);
  if (now < q.last_ack + quiet) {
    q.rack_due = q.last_ack + quiet;
    return;
  }
  const Time wait = rack_wait(q);
  if (wait == kNever || now - q.last_ack > wait) return;
  for (uint32_t psn = q.una; psn != q.next_psn; psn = codec::psn_add(psn, 1)) {
    TxPkt& t = q.pkt(psn);
    if ((t.flags & (kTxSacked | kTxLost)) || t.sent >= q.latest_delivered || t.port > kMaxPorts ||
        !q.port_srtt[t.port])
      continue;
    const Time due = t.sent + wait;
    if (now >= due) {
      q.stats.rtx_sack++;
      mark_lost(q, psn, true, EvEventReason::kSilentLoss, now, path_blamed(q, psn));
    } else {
      q.rack_due = std::min(q.rack_due, due);
    }
  }
}

void Engine::rack(Qp& q, uint32_t from, uint32_t upto, Time now) {
  // Each EV is one FIFO path and each plane one set of queues, so a packet is
  // lost when a packet sent on its plane more than reo_wnd later was already
  // delivered (paths of a plane differ only by fabric queueing), or when one
  // sent a whole RTT later on any plane was (planes may run with different
  // queue depths, e.g. their TX rings or shapers).
  //
  // Deliveries are facts for good, absences only for the SACK that reports
  // them: a PSN is judged only while the bitmap being processed says it is
  // missing (kTxHole, set for [from, upto)). A PSN missing from an older
  // bitmap may have arrived since without any later bitmap covering it.
  if (codec::psn_lt(from, q.una)) from = q.una;
  if (codec::psn_lt(q.next_psn, upto)) upto = q.next_psn;
  // Spurious retransmissions widen both windows (reo_extra).
  const Time cross = std::max(q.reo_wnd, q.srtt + 4 * q.rttvar + learned_reo(q));
  const Time wait = rack_wait(q);
  Time fastest = kNever;  // the smallest plane RTT (quiet_plane_pace)
  if (cfg_.paths.quiet_plane_pace)
    for (uint32_t p = 0; p <= kMaxPorts; p++)
      if (q.port_srtt[p]) fastest = std::min(fastest, q.port_srtt[p]);
  for (uint32_t psn = from; codec::psn_lt(psn, upto); psn = codec::psn_add(psn, 1)) {
    TxPkt& t = q.pkt(psn);
    if (!(t.flags & kTxHole)) continue;
    t.flags &= uint8_t(~kTxHole);
    if ((t.flags & (kTxSacked | kTxLost)) || !q.latest_delivered) continue;
    if (q.latest_port[t.port] > t.sent + q.reo_wnd || q.latest_delivered > t.sent + cross) {
      q.stats.rtx_sack++;
      mark_lost(q, psn, true, EvEventReason::kSilentLoss, now, path_blamed(q, psn));
      continue;
    }
    // On a silent plane sooner: one sent reo_wnd later on another plane was
    // delivered. Resent; only a packet sent after the plane fell silent (a
    // paced one) counts against the plane (its silence was counted once:
    // judged early, a burst of drops ending would look like a dead plane).
    if (q.plane_is_silent(t.port) && q.latest_delivered > t.sent + q.reo_wnd) {
      q.stats.rtx_sack++;
      q.stats.silent_plane_losses++;
      const bool paced = t.sent >= q.silent_since[t.port];
      mark_lost(q, psn, paced, EvEventReason::kSilentLoss, now, paced && path_blamed(q, psn));
      continue;
    }
    // Nothing sent after it on its plane delivered, one sent reo_wnd after
    // it (and the plane's lag behind the fastest plane) on another plane
    // delivered: its plane is quiet, paced until it delivers again. Nothing
    // is judged sooner: a plane that merely runs behind loses nothing by it.
    if (fastest != kNever && t.port <= kMaxPorts && q.latest_port[t.port] < t.sent &&
        q.port_srtt[t.port] &&
        q.latest_delivered > t.sent + q.reo_wnd + q.port_srtt[t.port] - fastest)
      note_quiet(q, t, now);
    // Something sent after it arrived: overdue once its plane's RTT passed.
    // The RACK timer judges it then, together with every other overdue
    // packet, oldest first.
    if (q.latest_delivered > t.sent && wait != kNever && t.port <= kMaxPorts && q.port_srtt[t.port])
      q.rack_due = std::min(q.rack_due, t.sent + wait);
  }
}

void Engine::advance_cack(Qp& q, uint32_t cack, Time now, uint64_t& newly) {
  const uint32_t upto = codec::psn_add(cack, 1);
  if (codec::psn_diff(upto, q.una) <= 0) return;
  if (codec::psn_diff(upto, q.next_psn) > 0) {
    stats_.rx_unexpected++;  // acknowledges PSNs never sent
    return;
  }
  for (uint32_t psn = q.una; psn != upto; psn = codec::psn_add(psn, 1)) {
    TxPkt& t = q.pkt(psn);
    if (!(t.flags & kTxSacked)) {
      if (t.flags & kTxLost) {
        q.lost--;
      } else {
        q.leave_flight(t);
      }
      newly += t.len;
      q.delivered(t, now);
    }
    // Only the demotion stays: a late original may still arrive and prove
    // the retransmission spurious, which returns the EV (on_sack).
    t.flags &= kTxDemoted;
  }
  q.una = upto;
  if (codec::psn_lt(q.rtx_hint, q.una)) q.rtx_hint = q.una;
  q.retries = 0;
  q.last_progress = now;
}

void Engine::complete_sends(Qp& q) {
  while (q.sq_count) {
    SendWqe& w = q.sq[q.sq_head];
    if (!w.started || w.sent < w.npkts) break;
    const uint32_t last = codec::psn_add(w.first_psn, w.npkts - 1);
    if (!codec::psn_lt(last, q.una)) break;
    if (w.imm_op && q.wimm_out) q.wimm_out--;
    if (w.signaled) {
      Wc wc;
      wc.wr_id = w.wr_id;
      wc.status = kWcSuccess;
      wc.opcode = WcOpcode::kRdmaWrite;
      wc.byte_len = w.len;
      wc.qp_num = q.qpn;
      push_cqe(q.send_cq, wc);
    }
    q.stats.send_completions++;
    q.sq_head = uint32_t((q.sq_head + 1) % q.sq.size());
    q.sq_count--;
  }
}

// A SACK's bitmap of the 64 PSNs from base: those it names arrived
// (SACKed, their bytes added to newly); only PSNs the bitmap covers are
// known: one it does not cover may well have arrived (the bitmap follows
// the trigger). rack() judges the holes.
inline void Engine::Qp::sack_bitmap(uint32_t base, uint64_t bitmap, Time now, uint64_t& newly) {
  Qp& q = *this;
  for (int i = 0; i < 64; i++) {
    const uint32_t psn = codec::psn_add(base, i);
    if (codec::psn_lt(psn, q.una) || !codec::psn_lt(psn, q.next_psn)) continue;
    TxPkt& t = q.pkt(psn);
    if (!(bitmap >> (63 - i) & 1)) {
      if (!(t.flags & kTxSacked)) t.flags |= kTxHole;
      continue;
    }
    if (t.flags & kTxSacked) continue;
    if (t.flags & kTxLost) {
      q.lost--;
      t.flags &= uint8_t(~kTxLost);
    } else {
      q.leave_flight(t);
    }
    t.flags |= kTxSacked;
    newly += t.len;
    q.delivered(t, now);
  }
}

// The RTT a SACK measures from t, the transmission that triggered it, whose
// timestamp it echoes (0: no sample). An echo of the original transmission
// of a packet since retransmitted proves the retransmission spurious: the
// reordering window grows and the path it blamed gets its EV back.
inline Time Engine::Qp::rtt_sample(TxPkt& t, uint16_t echo, const EngineConfig& cfg, Time now) {
  Qp& q = *this;
  if (cfg.tseth && t.tx_count > 1 && t.ts == t.ts_first) {
    // The 16-bit timestamp wraps every 16.8 ms, and an ACK timeout of
    // 1.024 us x 2^14 or more is a whole number of wraps: a retransmission
    // it sent carries the original's timestamp, and the echo cannot say
    // which one arrived. No sample, no undo (Karn's rule).
    return 0;
  }
  if (cfg.tseth && echo == t.ts && t.sent) return now - t.sent;
  if (cfg.tseth && t.tx_count > 1 && echo == t.ts_first) {
    // The original transmission arrived after all: the retransmission was
    // spurious, so the reordering window was too small, and the path it
    // blamed was not broken (undo the demotion, like Eifel/F-RTO undo).
    q.stats.spurious_rtx++;
    q.reo_extra = std::min<Time>(std::max<Time>(q.reo_extra * 2, cfg.min_reorder),
                                 std::max<Time>(q.srtt, cfg.min_reorder));
    if (t.ev_first < q.paths.size()) q.paths.plane_loss_undo(q.paths.at(t.ev_first).port);
    if ((t.flags & kTxDemoted) && t.ev_first < q.paths.size()) q.paths.undo_bad(t.ev_first, now);
    t.flags &= uint8_t(~kTxDemoted);
    return 0;
  }
  if (!cfg.tseth && t.tx_count == 1 && t.sent)
    return now - t.sent;  // Karn: only unambiguous samples
  return 0;
}

// An RTT sample (rtt > 0) of transmission t into the QP's smoothed RTT, its
// port's and its EV's, and the reordering window.
inline void Engine::Qp::rtt_update(const TxPkt& t, Time rtt, Time min_reorder) {
  Qp& q = *this;
  if (!q.srtt) {
    q.srtt = rtt;
    q.rttvar = rtt / 2;
  } else {
    Time dev = rtt > q.srtt ? rtt - q.srtt : q.srtt - rtt;
    q.rttvar = (3 * q.rttvar + dev) / 4;
    q.srtt = (7 * q.srtt + rtt) / 8;
  }
  q.min_rtt = q.min_rtt ? std::min(q.min_rtt, rtt) : rtt;
  q.paths.set_rtt(q.srtt, q.rttvar);
  if (t.port <= kMaxPorts) {
    Time& ps = q.port_srtt[t.port];
    Time& pv = q.port_rttvar[t.port];
    if (!ps) {
      ps = rtt;
      pv = rtt / 2;
    } else {
      Time dev = rtt > ps ? rtt - ps : ps - rtt;
      pv = (3 * pv + dev) / 4;
      ps = (7 * ps + rtt) / 8;
    }
  }
  // Paths differ in delay: the window covers the RTT spread the sprayed
  // packets see, plus what spurious retransmissions taught us.
  Time w = std::max({min_reorder, q.min_rtt / 4, 2 * q.rttvar, q.reo_extra});
  q.reo_wnd = std::min(w, std::max(q.srtt, min_reorder));
  if (t.ev < q.paths.size()) {
    EvStats& es = q.paths.at(t.ev).stats;
    es.rtt_last_ns = uint32_t(std::min<Time>(rtt, 0xffffffffu));
    es.rtt_min_ns = es.rtt_min_ns ? std::min(es.rtt_min_ns, es.rtt_last_ns) : es.rtt_last_ns;
    es.rtt_sum_ns += rtt;
    es.rtt_samples++;
  }
}

namespace {

// The fabric's part of an RTT sample: the RTT less the hosts' own time, as
// far as they know it: the time the SACK waited here (its arrival at XDP to
// now, `local`), the time the responder held the trigger (its service time,
// when the SACK carries one) and the time the packet spent in this host's
// transmit (`hold`, TxPkt). Quick adapt acts on it (Nscc::on_ack). A
// service time that leaves nothing of the RTT cannot be true: counted,
// unused. When the hosts' parts cover the whole RTT (the hold ends when the
// packet's submission returns, and the SACK can arrive before that on a
// software fabric) nothing is left to judge: 0, counted (fabric_unknown).
// Until 2026-12-04 such a sample counted as a fabric RTT of 1 ns, which
// then stood as the smallest seen and made every later ack look queued.
Time fabric_rtt(QpStats& st, const codec::CcState& cc, Time rtt, Time local, Time hold) {
  Time f = rtt > local ? rtt - local : 0;
  if (cc.has_svc) {
    st.rx_sack_svc++;
    if (f && cc.svc_time_ns >= f)
      st.bad_svc_time++;
    else if (f)
      f -= cc.svc_time_ns;
  }
  if (f > hold) return f - hold;
  st.fabric_unknown++;
  return 0;
}

}  // namespace

void Engine::on_sack(Qp& q, const codec::Packet& p, uint8_t port, Time rx_ts, Time now) {
  const codec::Seth& s = p.seth;
  q.stats.rx_sacks++;
  if (!q.win_ready()) return;
  // The cumulative point may lag behind una (SACKs overtake each other on
  // sprayed paths; a late one still carries news in its bitmap); past
  // next_psn it acknowledges PSNs never sent, and more than a window below
  // una it is a replay: then nothing in it is believed.
  {
    const uint32_t upto = codec::psn_add(s.cack_psn, 1);
    if (codec::psn_diff(upto, q.next_psn) > 0) {
      q.stats.ghost_sacks++;
      return;
    }
    if (codec::psn_diff(q.una, upto) > int32_t(q.win_max)) {
      q.stats.stale_sacks++;
      return;
    }
  }
  // Nothing else in a SACK is believed unless it echoes the timestamp of a
  // transmission it answers: the first or last one of its trigger PSN, or a
  // probe of ours. A blind forgery with a plausible cumulative PSN would
  // otherwise acknowledge data that never arrived; now it must also guess
  // 16 bits of this host's clock (security.md).
  const int idx = q.paths.find(s.entropy);
  // A tail-loss probe's answer: to the last probe or to one of the two
  // before it, whose answer came after the probe timeout. Until 2026-12-06
  // only the last probe's counted: a responder slower than the timeout for
  // three probes in a row left the QP its ACK timeout (16.8 ms), and 4-25
  // answers per resilience 23 run were dropped as ghosts.
  Qp::TlpSent* tlp = s.probe_resp && idx >= 0 ? q.tlp_answered(p.cc.tx_ts_echo, idx) : nullptr;
  const bool tlp_answer = tlp != nullptr;
  const Time tlp_sent = tlp ? tlp->sent : 0;
  const uint8_t tlp_port = tlp ? tlp->port : 0;
  const bool tlp_latest = tlp == &q.tlp_recent[q.tlp_head];
  if (tlp) *tlp = Qp::TlpSent{};  // answered once
  const bool ev_answer = s.probe_resp && idx >= 0 && q.paths.at(uint32_t(idx)).probing &&
                         q.paths.at(uint32_t(idx)).state == EvState::kAssumedBad &&
                         p.cc.tx_ts_echo == ts16(q.paths.at(uint32_t(idx)).probe_sent);
  const uint32_t trig = codec::psn_add(s.cack_psn, s.ack_psn_offset);
  const bool trig_known = codec::psn_lt(trig, q.next_psn) &&
                          uint32_t(codec::psn_diff(q.next_psn, trig)) <= q.win.size();
  if (s.probe_resp && !tlp_answer && !ev_answer) {
    q.stats.ghost_probe_resps++;  // answers no probe of ours (or one given up on)
    if (cfg_.tseth) return;
  } else if (cfg_.tseth && !s.probe_resp) {
    const TxPkt* t = trig_known ? &q.pkt(trig) : nullptr;
    if (!t || !t->sent || (p.cc.tx_ts_echo != t->ts && p.cc.tx_ts_echo != t->ts_first)) {
      q.stats.unverified_sacks++;
      return;
    }
  }
  q.last_ack = now;
  // The responder's port states (bit N-1 = its port N down). It sent this
  // through the plane it arrived on, so a report that names that plane down
  // contradicts itself (forged): ignored, as a report of every port down is.
  if (port >= 1 && port <= 8 && (s.port_down_mask >> (port - 1) & 1)) {
    q.stats.bad_port_status++;
  } else {
    uint32_t down = q.remote_down & ~0x1feu;
    for (uint32_t n = 1; n <= 8; n++)
      if (s.port_down_mask >> (n - 1) & 1) down |= 1u << n;
    if (down != q.remote_down) remote_ports(q, down, now);
  }

  const uint32_t una_before = q.una;
  uint64_t newly = 0;
  advance_cack(q, s.cack_psn, now, newly);
  const uint32_t base = codec::psn_add(s.cack_psn, s.sack_offset);
  q.sack_bitmap(base, s.sack_bitmap, now, newly);
  // RTT from the transmission that triggered this SACK, and its fabric part.
  Time rtt = 0, fabric = 0;
  // The SACK right behind another with the same trigger and echo (the
  // responder's second bitmap) carries no second sample.
  const bool sampled = trig == q.sampled_psn && p.cc.tx_ts_echo == q.sampled_ts;
  q.sampled_psn = trig;
  q.sampled_ts = p.cc.tx_ts_echo;
  if (!s.probe_resp && !sampled && trig_known) {
    TxPkt& t = q.pkt(trig);
    rtt = q.rtt_sample(t, p.cc.tx_ts_echo, cfg_, now);
    if (rtt) q.rtt_update(t, rtt, cfg_.min_reorder);
    if (rtt) fabric = fabric_rtt(q.stats, p.cc, rtt, now > rx_ts ? now - rx_ts : 0, t.hold);
  }
  // Verdict on the reflected EV.
  const bool ecn = (s.cc_flags & MRC_CC_F_ECN_CE) || s.verdict == MRC_MP_SKIP_ONCE;
  // When the EV probe this answers was sent, read before probe_result below
  // settles the probe: the answer counts as a delivery of that time (below).
  const Time ev_probe_sent = ev_answer ? q.paths.at(uint32_t(idx)).probe_sent : 0;
  if (idx >= 0) {
    auto& e = q.paths.at(uint32_t(idx));
    if (ev_answer) {
      q.paths.probe_result(uint32_t(idx), s.verdict == MRC_MP_NONE, now);
      // One probe fewer outstanding: a probe held back by probe_inflight_max may go.
      q.probe_check = std::min(q.probe_check, now);
      arm(q);
    } else if (s.verdict == MRC_MP_ALWAYS_SKIP) {
      q.paths.assume_bad(uint32_t(idx), EvEventReason::kAlwaysSkip, now);
    } else if (ecn) {
      e.stats.ecn++;
      q.paths.skip(uint32_t(idx), EvEventReason::kEcn);
    }
  }
  q.tlp_unanswered = 0;
  if (tlp_answer) {
    // The answer to our tail-loss probe (not to an EV probe): it went out on
    // its plane after everything sent there before it, so what its bitmap
    // misses from that plane is lost, and from the others what was sent a
    // whole RTT before it (the usual rules, with the probe as the delivery).
    if (tlp_latest) q.tlp_outstanding = false;
    q.latest_delivered = std::max(q.latest_delivered, tlp_sent);
    if (tlp_port <= kMaxPorts)
      q.latest_port[tlp_port] = std::max(q.latest_port[tlp_port], tlp_sent);
  }
  if (cfg_.probe_delivery && (tlp_answer || ev_answer)) {
    // So does the answer to an EV's probe, for the rule across planes only
    // (what was sent a whole RTT before it): a probe is small, and its plane
    // may pass probes but not data (an MTU blackhole), so it does not stand
    // for a delivery on its plane. Without it a QP whose window was full of
    // packets lost on a flapping plane sent nothing, heard only these
    // answers (which kept its tail-loss probe from coming due) and waited
    // for its ACK timeout (resilience 19: 8-11 timeouts in 3 s).
    if (ev_answer) q.latest_delivered = std::max(q.latest_delivered, ev_probe_sent);
    // When no data went out since either probe, nothing sent later will
    // ever be delivered to judge what is still out: the RACK timer looks at
    // it now (everything sent before the probe, its plane's RTT after it was
    // sent). Only then: while data still goes out, later deliveries judge,
    // and the timer run at every probe answer within a host's backlog of
    // SACKs made held packets look lost (NsccFair.EightQpsOfOneEngineShareEqually).
    if (q.last_send <= (tlp_answer ? tlp_sent : ev_probe_sent))
      q.rack_due = std::min(q.rack_due, now);
  }
  rack(q, base, codec::psn_add(base, 64), now);
  if ((q.attr.cap_flags & kQpCapDynamicMpr) && s.mpr)
    q.mpr_eff = uint32_t(std::min(q.attr.mpr, s.mpr)) * 128;
  q.cc.on_ack(newly, rtt, ecn, q.inflight, now, fabric);
  q.cc.on_penalty(p.cc.rcv_cwnd_pen, p.cc.restore_cwnd, newly, q.inflight);
  if (q.una != una_before) complete_sends(q);
}

// A refusal (AETH NAK, NACK UNEXP_EVENT) of `psn`, in flight. Nothing
// authenticates it, and a forged one must not end the QP: the first refusal
// of a PSN only resends it; a refusal that arrives after the resend went out
// is the responder refusing it again and fails the QP (true). The cost of a
// genuine refusal is one round trip; of a forged one, one retransmission.
//
// A NACK UNEXP_EVENT may name a PSN already SACKed (the WriteIMM's last
// packet, reported before the packets ahead of it arrived and completed the
// message): nothing is resent then, and a second refusal that comes after
// this QP sent anything more (a failed responder answers every request with
// it) confirms.
bool Engine::on_refusal(Qp& q, uint32_t psn, Time now) {
  TxPkt& t = q.pkt(psn);
  const uint64_t sent = q.stats.tx_data_pkts + q.stats.tx_probe_pkts;
  if (!(t.flags & kTxRefused)) {
    t.flags |= kTxRefused;
    q.stats.refusals_retried++;
    q.refusal_sent = sent;
    if (!(t.flags & (kTxLost | kTxSacked))) {
      t.flags |= kTxNacked;  // no path penalty
      q.stats.rtx_nack++;
      mark_lost(q, psn, false, EvEventReason::kTrimNack, now);
    } else if (t.flags & kTxSacked) {
      q.tlp_pending = true;  // ask again now: a probe gets the same answer
      want_tx(q);
    }
    return false;
  }
  if (t.flags & kTxSacked) return sent > q.refusal_sent;
  return !(t.flags & kTxLost) && t.tx_count > 1;  // refused again after the resend
}

void Engine::on_nack(Qp& q, const codec::Packet& p, Time now) {
  const codec::Neth& k = p.neth;
  q.stats.rx_nacks++;
  if (!q.win_ready()) return;
  const uint32_t psn = k.nack_psn;
  if (!in_flight(psn, q.una, q.next_psn, q.win_max, q.stats.stale_nacks, q.stats.ghost_nacks))
    return;
  if (k.reason == MRC_NACK_UNEXP_EVENT) {
    q.last_ack = now;
    if (!on_refusal(q, psn, now)) return;
    // The responder failed the QP on the message holding nack_psn; every
    // message before that one completed there (as an IB NAK acknowledges
    // what precedes it), so they complete here, and that one fails.
    const uint32_t first = q.sq[q.pkt(psn).wqe].first_psn;
    if (codec::psn_lt(q.una, first)) q.una = first;  // the QP fails below
    complete_sends(q);
    to_error(q, kWcRemOpErr);
    return;
  }
  TxPkt& t = q.pkt(psn);
  if ((t.flags & (kTxSacked | kTxLost)) || (cfg_.tseth && k.tx_ts_echo != t.ts)) {
    q.stats.stale_nacks++;  // delivered, queued again, or about an older transmission
    return;
  }
  q.last_ack = now;
  const int idx = q.paths.find(k.entropy);
  switch (k.reason) {
    case MRC_NACK_TRIMMED:
      if (idx >= 0) {
        q.paths.at(uint32_t(idx)).stats.trims++;
        q.paths.skip(uint32_t(idx), EvEventReason::kTrimNack);
      }
      q.cc.on_nack(t.len, q.inflight, now);
      break;
    case MRC_NACK_TRIMMED_LASTHOP:
      if (idx >= 0) q.paths.at(uint32_t(idx)).stats.trims++;
      q.cc.on_nack(t.len, q.inflight, now);
      break;
    default:  // resource NACKs and PSN_OOR_WINDOW: resend, no path penalty
      break;
  }
  t.flags |= kTxNacked;
  q.stats.rtx_nack++;
  mark_lost(q, psn, false, EvEventReason::kTrimNack, now);
}

void Engine::on_aeth(Qp& q, const codec::Packet& p, Time now) {
  const uint8_t syn = p.aeth.syndrome;
  if ((syn & 0xe0) != 0x60) return;  // positive ACKs carry nothing SACKs do not
  if (!q.win_ready()) return;
  if (!in_flight(p.bth.psn, q.una, q.next_psn, q.win_max, q.stats.stale_naks, q.stats.ghost_naks))
    return;
  if (q.pkt(p.bth.psn).flags & kTxSacked) {
    q.stats.stale_naks++;  // delivered: this NAK is not about it
    return;
  }
  q.last_ack = now;
  if (!on_refusal(q, p.bth.psn, now)) return;
  WcStatus st = kWcRemOpErr;
  if (syn == 0x61) st = kWcRemInvReqErr;
  if (syn == 0x62) st = kWcRemAccessErr;
  complete_sends(q);
  to_error(q, st);
}

void Engine::requester_timers(Qp& q, Time now) {
  if (!q.win_ready()) return;
  if (q.una != q.next_psn) {
    const Time to = ack_timeout(q);
    if (to != kNever && now >= q.last_progress + to) {
      q.stats.timeouts++;
      q.retries++;
      if (q.attr.retry_exp < 25 && q.retries > uint32_t(q.attr.retry_linear) + q.attr.retry_exp) {
        to_error(q, kWcRetryExcErr);
        return;
      }
      const Time base = ack_timeout_base(q);
      uint64_t bytes = 0;
      for (uint32_t psn = q.una; psn != q.next_psn; psn = codec::psn_add(psn, 1)) {
        TxPkt& t = q.pkt(psn);
        if (t.flags & (kTxSacked | kTxLost)) continue;
        if (now - t.sent + 1 >= base || psn == q.una) {
          bytes += t.len;
          q.stats.rtx_timeout++;
          // Nothing acknowledged for a whole ACK timeout: no evidence
          // against one path unless its siblings delivered (path_blamed).
          // A host that stalls its receiver or its own engine that long
          // silences every plane; retiring everything in flight then
          // retired every healthy EV at once.
          mark_lost(q, psn, true, EvEventReason::kTimeout, now, path_blamed(q, psn));
        }
      }
      if (bytes) q.cc.on_timeout(q.attr.path_mtu);
      q.last_progress = now;
    }
    if (now >= q.rack_due) rack_timer(q, now);
    if (now >= tlp_due(q)) {
      if (q.tlp_outstanding) {
        q.tlp_outstanding = false;
        q.tlp_unanswered++;
      }
      q.tlp_pending = true;
      q.stats.tlp_probes++;
      want_tx(q);
    }
  }
  if (q.paths.bad_count() && now >= q.probe_check) {
    q.paths.due_probes(now, [&](uint32_t i) { q.probe_queue.push_back(i); });
    q.probe_check = q.paths.next_probe_deadline();
    if (!q.probe_queue.empty()) want_tx(q);
  }
}

bool Engine::emit_probe(Qp& q, TxSink& sink, Time now, int ev_idx, uint32_t& port_full) {
  const auto& e = q.paths.at(uint32_t(ev_idx));
  uint32_t cap = 0;
  uint8_t* buf = sink.alloc(e.port, &cap);
  if (!buf) {
    port_full |= 1u << e.port;
    return false;
  }
  codec::Packet pk;
  fill_l2l3(pk, q, e.port, e.ev);
  pk.ip.dscp = cfg_.codec.dscp.trimmable;
  pk.ip.ecn = MRC_ECN_ECT0;
  pk.bth.opcode = MRC_OP_PROBE;
  pk.bth.dqpn = q.attr.dest_qp_num;
  pk.bth.psn = q.next_psn;  // informational: probes consume no PSN
  pk.peth.probe_id = next_probe_id_++;
  pk.peth.spdcid = uint16_t(q.qpn);
  pk.peth.dpdcid = uint16_t(q.attr.dest_qp_num);
  pk.peth.tx_ts = ts16(now);
  size_t n = codec::build(pk, {buf, cap});
  if (n && !q.srv6_sid.empty()) srv6_set_dst({buf, n}, 14, q.srv6_sid[size_t(ev_idx)]);
  sink.commit(e.port, uint32_t(n));
  if (!n) return false;
  q.stats.tx_probe_pkts++;
  stats_.tx_frames++;
  stats_.tx_bytes += n;
  if (e.state == EvState::kAssumedBad) q.paths.probe_sent(uint32_t(ev_idx), pk.peth.probe_id, now);
  return true;
}

bool Engine::send_data_pkt(Qp& q, TxSink& sink, uint32_t psn, bool rtx, int ev_idx, Time now,
                           uint32_t& port_full) {
  TxPkt& t = q.pkt(psn);
  const SendWqe& w = q.sq[t.wqe];
  const auto& e = q.paths.at(uint32_t(ev_idx));
  uint32_t cap = 0;
  uint8_t* buf = sink.alloc(e.port, &cap);
  if (!buf) {
    port_full |= 1u << e.port;
    return false;
  }
  const uint32_t mtu = q.attr.path_mtu;
  const uint32_t k = t.offset / mtu;
  const bool first = k == 0, last = k + 1 >= w.npkts;
  codec::Packet pk;
  fill_l2l3(pk, q, e.port, e.ev);
  pk.ip.dscp = rtx ? cfg_.codec.dscp.trimmable_retx : cfg_.codec.dscp.trimmable;
  pk.ip.ecn = MRC_ECN_ECT0;
  if (first && last)
    pk.bth.opcode = w.imm_op ? MRC_OP_WRITE_ONLY_IMM : MRC_OP_WRITE_ONLY;
  else if (first)
    pk.bth.opcode = MRC_OP_WRITE_FIRST;
  else if (last)
    pk.bth.opcode = w.imm_op ? MRC_OP_WRITE_LAST_IMM : MRC_OP_WRITE_LAST;
  else
    pk.bth.opcode = MRC_OP_WRITE_MIDDLE;
  pk.bth.dqpn = q.attr.dest_qp_num;
  pk.bth.psn = psn;
  pk.bth.rtx = rtx;
  pk.bth.ts = cfg_.tseth;
  // Ask for an immediate SACK at the end of a message, when the window fills
  // and on retransmissions, so completions and recovery do not wait.
  pk.bth.ack_req = last || rtx || q.inflight + 2ull * t.len > q.cc.cwnd() ||
                   uint32_t(codec::psn_diff(psn, q.una)) + 1 >= q.mpr_eff;
  pk.meth.rqmsn = w.rqmsn;
  pk.meth.msn = w.msn;
  pk.tseth.tx_ts = ts16(now);
  pk.reth.va = w.remote_addr + t.offset;
  pk.reth.rkey = w.rkey;
  pk.reth.dma_len = w.len - t.offset;  // bytes from this VA to the end of the message
  pk.imm = w.imm;
  pk.payload_len = t.len;
  uint32_t poff = 0;
  size_t n = codec::build_headers(pk, {buf, cap}, &poff);
  if (!n) {
    sink.commit(e.port, 0);
    return false;
  }
  // Gather the payload from the scatter list straight into the frame: the
  // one copy on the send side.
  const Sge* sg = &q.sq_sge[size_t(t.wqe) * q.cap.max_send_sge];
  uint32_t skip = t.offset, left = t.len;
  uint8_t* dst = buf + poff;
  for (uint32_t i = 0; i < w.nsge && left; i++) {
    if (skip >= sg[i].length) {
      skip -= sg[i].length;
      continue;
    }
    uint32_t take = std::min(sg[i].length - skip, left);
    std::memcpy(dst, reinterpret_cast<const uint8_t*>(uintptr_t(sg[i].addr)) + skip, take);
    dst += take;
    left -= take;
    skip = 0;
  }
  codec::seal({buf, n}, 14);
  if (!q.srv6_sid.empty()) srv6_set_dst({buf, n}, 14, q.srv6_sid[size_t(ev_idx)]);
  // Transmission times are unique and in transmission order (a driver hands
  // a whole batch the same `now`): "sent after it" must mean what it says.
  const Time stamp = q.last_send >= now ? q.last_send + 1 : now;
  t.sent = stamp;
  t.hold = 0;
  // The hold only matters to quick adapt on the fabric's delay. Logged
  // before the commit: a commit that fills the sink's batch sends it at
  // once (live frames), and that submission ends this packet's hold too.
  if (q.cc.qa_on_fabric() && tx_log_.size() < tx_log_.capacity())
    tx_log_.push_back({q.qpn, psn, stamp});
  sink.commit(e.port, uint32_t(n));
  stats_.tx_frames++;
  stats_.tx_bytes += n;
  if (q.una == q.next_psn || q.inflight == 0) q.last_progress = std::max(q.last_progress, now);
  t.ts = pk.tseth.tx_ts;
  if (!rtx) {
    t.ts_first = t.ts;
    t.ev_first = uint16_t(ev_idx);
  }
  t.ev = uint16_t(ev_idx);
  t.port = e.port;
  if (t.tx_count < 255) t.tx_count++;
  q.enter_flight(t);
  q.last_send = stamp;
  if ((q.silent_mask | q.quiet_mask) >> t.port & 1) {
    q.plane_paced[t.port] = stamp;
    q.stats.silent_paced_pkts++;
  }
  auto& es = q.paths.at(uint32_t(ev_idx)).stats;
  es.tx_pkts++;
  es.tx_bytes += t.len;
  q.stats.tx_data_pkts++;
  q.stats.tx_data_bytes += t.len;
  q.stats.plane_tx_bytes[e.port] += t.len;
  if (rtx) {
    es.rtx_pkts++;
    q.stats.tx_rtx_pkts++;
  }
  return true;
}

uint32_t Engine::lit_ports(const Qp& q, uint32_t ports) const {
  const uint32_t dark = q.dark_planes(ports);
  return (ports & ~dark) ? ports & ~dark : ports;
}

uint32_t Engine::data_ports(Qp& q, uint32_t ports, Time now) {
  if (!(q.silent_mask | q.quiet_mask)) return ports;
  const Time gap = std::max<Time>(q.srtt, cfg_.min_reorder);
  const uint32_t dark = q.dark_planes(q.silent_mask | q.quiet_mask);
  // A plane that delivered that packet or a later one is back (a bit left
  // for a plane still dark by the other rule is harmless: each rule's test
  // looks at its own time).
  q.silent_mask &= dark;
  q.quiet_mask &= dark;
  uint32_t held = 0;
  for (uint32_t m = dark; m; m &= m - 1) {
    const unsigned p = unsigned(__builtin_ctz(m));
    if (now < q.plane_paced[p] + gap) held |= 1u << p;
  }
  return (ports & ~held) ? ports & ~held : ports;
}

bool Engine::emit_data(Qp& q, TxSink& sink, Time now, uint32_t& port_full) {
  if (!q.win_ready()) return false;
  const uint32_t ports = port_mask_for(q) & ~port_full;
  if (!ports) return false;
  // 1. Probes of ASSUMED_BAD EVs.
  while (!q.probe_queue.empty()) {
    uint32_t i = q.probe_queue.back();
    if (i >= q.paths.size()) {  // the EV set was rebuilt since
      q.probe_queue.pop_back();
      continue;
    }
    const auto& e = q.paths.at(i);
    const bool stale = e.state != EvState::kAssumedBad || e.probing;  // no longer to be probed
    if (!stale) {
      if (!(ports >> e.port & 1)) break;
      if (!probe_token(now)) break;  // over the engine's probe budget: later
      if (!emit_probe(q, sink, now, int(i), port_full)) return false;
    }
    q.probe_queue.pop_back();
    q.paths.unqueue(i);
    // One probe fewer queued: its answer (or its timeout) is due, or the
    // probe that probe_inflight_max held back may go. The timers look again.
    q.probe_check = std::min(q.probe_check, q.paths.next_probe_deadline());
    arm(q);
    if (!stale) return true;
  }
  // 2. Tail-loss probe: refreshes the ACK state when SACKs stopped coming.
  if (q.tlp_pending) {
    int idx = q.paths.random_good(lit_ports(q, ports));
    if (idx < 0) return false;
    if (!emit_probe(q, sink, now, idx, port_full)) return false;
    q.tlp_pending = false;
    q.tlp_outstanding = true;
    q.tlp_head = uint8_t((q.tlp_head + 1) % Qp::kTlpRemembered);
    q.tlp_recent[q.tlp_head] = {now, ts16(now), idx, q.paths.at(uint32_t(idx)).port};
    return true;
  }
  const uint64_t cwnd = q.cc.cwnd();
  const uint32_t dports = data_ports(q, ports, now);
  // What holds the window: the bytes in flight, less those on a plane that
  // is silent, or quiet for an RTT (PathParams::dark_plane_credit; a plane
  // that merely runs behind the others is quiet for less).
  // data_ports left only the dark planes' bits in the masks.
  uint64_t used = q.inflight;
  if (cfg_.paths.dark_plane_credit && (q.silent_mask | q.quiet_mask)) {
    const Time rtt = std::max<Time>(q.srtt, cfg_.min_reorder);
    for (uint32_t m = q.silent_mask | q.quiet_mask; m; m &= m - 1) {
      const uint8_t p = uint8_t(__builtin_ctz(m));
      if (q.plane_is_silent(p) || now >= q.quiet_since[p] + rtt)
        used -= std::min(used, q.port_inflight[p]);
    }
  }
  // 3. Retransmissions, oldest gap first.
  if (q.lost) {
    uint32_t psn = codec::psn_lt(q.rtx_hint, q.una) ? q.una : q.rtx_hint;
    for (; psn != q.next_psn; psn = codec::psn_add(psn, 1))
      if (q.pkt(psn).flags & kTxLost) break;
    if (psn == q.next_psn) {
      q.lost = 0;  // accounting drift guard: nothing is actually queued
    } else {
      q.rtx_hint = psn;
      TxPkt& t = q.pkt(psn);
      if (used && used + t.len > cwnd) return false;
      // A fresh EV, never the one the packet was last sent (or NACKed) on;
      // after a silent loss, on another plane if one can take it (the loss
      // may be its plane failing: a second loss there costs another RTT).
      int idx = -1;
      if (!(t.flags & kTxNacked) && (dports & ~(1u << t.port)))
        idx = q.paths.next(dports & ~(1u << t.port), t.ev);
      if (idx < 0) idx = q.paths.next(dports, t.ev);
      if (idx < 0) return false;
      if (t.tx_count >= 64 && q.attr.retry_exp < 25) {
        to_error(q, kWcRetryExcErr);
        return false;
      }
      t.flags &= uint8_t(~(kTxLost | kTxNacked | kTxHole));
      q.lost--;
      if (!send_data_pkt(q, sink, psn, true, idx, now, port_full)) {
        t.flags |= kTxLost;
        q.lost++;
        return false;
      }
      return true;
    }
  }
  // 4. New data.
  if (q.sq_next == q.sq_tail) return false;
  SendWqe& w = q.sq[q.sq_next];
  if (!w.started) {
    if (w.imm_op) {
      uint32_t limit = q.attr.max_wimm;
      if (q.attr.peer_max_wimm_dest) limit = std::min<uint32_t>(limit, q.attr.peer_max_wimm_dest);
      if (q.wimm_out >= std::max<uint32_t>(limit, 1)) return false;
    }
  }
  if (uint32_t(codec::psn_diff(q.next_psn, q.una)) >= q.mpr_eff) return false;  // MPR window
  if (q.outstanding() + 1 > q.win.size() && q.win.size() < q.win_max) q.grow_win();
  const uint32_t mtu = q.attr.path_mtu;
  const uint32_t off = w.sent * mtu;
  const uint32_t len = std::min(mtu, w.len - std::min(w.len, off));
  if (used && used + len > cwnd) return false;
  int idx = q.paths.next(dports, -1);
  if (idx < 0) return false;
  if (!w.started) {
    w.started = true;
    w.first_psn = q.next_psn;
    w.msn = q.msn++;
    w.rqmsn = q.rqmsn;
    if (w.imm_op) {
      q.rqmsn++;
      q.wimm_out++;
    }
  }
  const uint32_t psn = q.next_psn;
  TxPkt& t = q.pkt(psn);
  t = TxPkt{};
  t.wqe = q.sq_next;
  t.offset = off;
  t.len = len;
  if (q.una == q.next_psn) q.last_progress = now;
  q.next_psn = codec::psn_add(q.next_psn, 1);
  if (!send_data_pkt(q, sink, psn, false, idx, now, port_full)) {
    q.next_psn = psn;  // nothing went out: the PSN is reused
    return false;
  }
  if (++w.sent == w.npkts) q.sq_next = uint32_t((q.sq_next + 1) % q.sq.size());
  return true;
}

}  // namespace mrc::core
