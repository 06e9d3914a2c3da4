#include "core/nscc.hpp"

#include <algorithm>
#include <cmath>

namespace mrc::core {
namespace {
constexpr double kDelayAlpha = 0.0125;  // EWMA gain of the average queueing delay
constexpr double kRefBdp = 150000.0;    // 100 Gbit/s x 12 us, htsim's scaling reference
constexpr double kRefRtt = 12000.0;     // ns
constexpr uint64_t kFastDelay = 1000;   // ns: "no queue" for fast increase
constexpr uint32_t kPeriodSamples = 8;  // RTT samples a standing-delay period needs at least
}  // namespace

void Nscc::configure(const CcProfile& prof, uint32_t mtu, uint64_t mpr_window_bytes,
                     uint64_t min_target, const Start& start) {
  const NsccConfig& c = prof.nscc;
  p_ = Params{};
  p_.enabled = prof.enabled;
  p_.qa = !c.disable_qa;
  p_.mtu = mtu;
  p_.max_cwnd = c.max_cwnd ? c.max_cwnd : std::min<uint64_t>(mpr_window_bytes, 2u << 20);
  p_.max_cwnd = std::max<uint64_t>(p_.max_cwnd, mtu);
  p_.base_rtt = c.base_rtt;
  p_.target_delay = c.target_delay;
  p_.min_target = min_target;
  p_.max_target = start.max_target;
  p_.qa_threshold = c.qa_threshold;
  p_.qa_gate = c.qa_gate ? c.qa_gate : 3;
  p_.adjust_bytes = c.adjust_bytes_threshold ? c.adjust_bytes_threshold : 8ull * mtu;
  p_.adjust_period = c.adjust_period_threshold;
  const double a = double(p_.max_cwnd) / kRefBdp;
  p_.eta = c.eta > 0 ? c.eta : 0.15 * mtu * a;
  p_.fi = c.fi > 0 ? c.fi : 5.0 * mtu * a;
  p_.fi_scale = c.fi_scale > 0 ? c.fi_scale : 0.25 * a;
  p_.gamma = c.gamma > 0 ? c.gamma : 0.8;
  p_.max_md_jump = c.max_md_jump > 0 ? c.max_md_jump : 0.5;
  p_.init_window = start.init_window;
  p_.delay_md = start.delay_md;
  p_.queue_target = start.queue_target;
  p_.qa_floor = start.qa_floor;
  p_.qa_standing = start.qa_standing;
  p_.qa_fabric = start.qa_fabric;
  p_.qa_fabric_on_ecn = start.qa_fabric_on_ecn;
  p_.qa_rate_gate = start.qa_rate_gate;
  p_.qa_cut_full = start.qa_cut_full;
  slow_start_ = p_.init_window && p_.init_window < p_.max_cwnd;
  cwnd_ = slow_start_ ? std::max<uint64_t>(p_.init_window, mtu) : p_.max_cwnd;
  queue_high_ = false;
  srtt_ = standing_ = 0;
  win_min_ = ~uint64_t(0);
  win_samples_ = 0;
  win_start_ = 0;
  base_rtt_ = p_.base_rtt;
  fabric_base_ = ~uint64_t(0);
  marked_ = false;
  shared_base_ = nullptr;
  target_ = p_.target_delay ? p_.target_delay : derived_target(base_rtt_);
  inc_ = 0;
  received_ = achieved_ = ignore_bytes_ = low_delay_bytes_ = 0;
  qa_min_delay_ = ~uint64_t(0);
  last_adjust_ = last_dec_ = qa_window_end_ = qa_window_start_ = 0;
  qa_spanned_ignore_ = false;
  avg_delay_ = 0;
  pen_active_ = false;
  qa_cuts_ = qa_loss_cuts_ = qa_gated_ = ecn_decs_ = 0;
}

uint64_t Nscc::derived_target(uint64_t base) const {
  // A ceiling: a base RTT learned from round trips that already met a queue
  // (the QP's own first window, a waking host) holds that queue, and 4 x a
  // target derived from it let the queue stand (EngineConfig::cc_max_target).
  const uint64_t hi = p_.max_target ? std::max(p_.max_target, p_.min_target) : ~uint64_t(0);
  return std::clamp<uint64_t>(base, p_.min_target, hi);
}

void Nscc::update_base(uint64_t rtt) {
  if (p_.base_rtt || !rtt) return;
  if (shared_base_) {
    if (!*shared_base_ || rtt < *shared_base_) *shared_base_ = rtt;
    rtt = *shared_base_;
  }
  if (!base_rtt_ || rtt < base_rtt_) {
    base_rtt_ = rtt;
    if (!p_.target_delay) target_ = derived_target(base_rtt_);
  }
}

void Nscc::update_avg(double d) { avg_delay_ += kDelayAlpha * (d - avg_delay_); }

void Nscc::clamp() { cwnd_ = std::clamp<uint64_t>(cwnd_, p_.mtu, p_.max_cwnd); }

uint64_t Nscc::md_floor() const {
  // A quarter of max_cwnd, at least the initial window: on a software host
  // the RTT also holds the hosts' own backlog, which a smaller window does
  // not shorten (with the initial window as the floor a CPU-bound transfer
  // under 5% loss on one plane kept 0.14-0.50 of its goodput, resilience
  // 06, against 0.78-1.63 with the old start-up).
  return std::max<uint64_t>(p_.init_window ? p_.init_window : 64 * 1024, p_.max_cwnd / 4);
}

double Nscc::grow_scale(uint64_t inflight, uint64_t bytes) const {
  if (!p_.delay_md) return 1.0;
  // A window the QP does not use (less than half of it in flight) does not
  // grow. (Scaling the increases by the window instead of max_cwnd was
  // tried: after quick adapt's cuts to a packet the window then came back
  // so slowly that a CPU-bound transfer under 5% loss kept 0.2-0.5 of its
  // goodput, resilience 06, against 1.1-1.6 before.)
  return inflight + bytes < cwnd_ / 2 ? 0.0 : 1.0;
}

bool Nscc::standing_sample(uint64_t rtt, Time now) {
  srtt_ = srtt_ ? (7 * srtt_ + rtt) / 8 : rtt;
  win_min_ = std::min(win_min_, rtt);
  win_samples_++;
  if (!win_start_) win_start_ = now;
  // A period is at least half a smoothed RTT and holds at least 8 samples:
  // its smallest RTT is then one that met no wake-up delay and no burst,
  // only the queue that stood through the whole period (Copa's standing RTT).
  const uint64_t period = std::max<uint64_t>(srtt_ / 2, window_len());
  if (now - win_start_ < period || win_samples_ < kPeriodSamples) return false;
  standing_ = win_min_ > base_rtt_ ? win_min_ - base_rtt_ : 0;
  win_min_ = ~uint64_t(0);
  win_samples_ = 0;
  win_start_ = now;
  const uint64_t qt = p_.queue_target ? p_.queue_target : target_;
  queue_high_ = standing_ > qt;
  if (!queue_high_) return false;
  slow_start_ = false;
  if (now - last_dec_ <= std::max<uint64_t>(base_rtt_, period)) return false;
  double f = 1.0 - p_.gamma * double(standing_ - qt) / double(standing_);
  f = std::max(f, p_.max_md_jump);
  // Never below the initial window: on a software host the RTT also holds
  // the hosts' own backlog, which a smaller window does not shorten (the
  // window of a CPU-bound transfer fell to a packet without this floor).
  const uint64_t floor = md_floor();
  if (cwnd_ <= floor) return false;
  cwnd_ = std::max<uint64_t>(uint64_t(double(cwnd_) * f), floor);
  last_dec_ = now;
  inc_ = 0;
  clamp();
  return true;
}

bool Nscc::quick_adapt(bool loss, uint64_t delay, uint64_t inflight, Time now) {
  if (!p_.qa) return false;
  const uint64_t qa_thr =
      p_.qa_threshold ? p_.qa_threshold : std::max<uint64_t>(4 * target_, p_.qa_floor);
  if (p_.qa_standing && !loss) qa_min_delay_ = std::min(qa_min_delay_, delay);
  if (now < qa_window_end_) return false;
  // By default the ack that ends the window triggers on its own delay.
  // With qa_standing (off by default) every ack of the window must have been
  // delayed: a queue that stands, as an incast builds, not one late ack (a
  // wake-up of a host's thread, which froze the window of whichever QP met
  // it: NsccFair, issue 23). NsccQuickAdapt.* tests both.
  const bool trigger =
      loss ||
      (p_.qa_standing ? qa_min_delay_ != ~uint64_t(0) && qa_min_delay_ > qa_thr : delay > qa_thr);
  // The gate: no cut after a window that carried max_cwnd >> qa_gate or
  // more. A window ends at its first ack after its end, so after a host's
  // stall it ends with the stall's acks, all at once, and its bytes close
  // the gate though the path carried far less per window (design.md,
  // "Quick adapt's gate after a host's stall"). With qa_rate_gate (on by
  // default), while the whole RTT judges (no ECN mark yet), the gate judges
  // the bytes per window length instead: what the window carried over the
  // time it took. The cut is still to what the window carried. A window
  // that acked ignored bytes (the flight of the last cut) keeps the bytes
  // gate: per length it "cut" a window held small by a queue up to that
  // whole flight (NsccStart.QuickAdaptAnswersAQueueHiddenInTheBaseRtt), and
  // restarting the window where they end let every wake-up after a cut cut
  // again (NsccFair.EightQpsOfOneEngineShareEqually: 4.2 of 9.5 Gbit/s).
  const uint64_t len = window_len();
  const uint64_t gate = p_.max_cwnd >> p_.qa_gate;
  const uint64_t took = now > qa_window_start_ ? now - qa_window_start_ : 0;
  const bool per_length = rate_gate() && !qa_spanned_ignore_ && qa_window_start_ && took > len;
  const bool open =
      per_length ? double(achieved_) * double(len) < double(gate) * double(took) : achieved_ < gate;
  bool fired = false;
  // A "cut" to what the window achieved that leaves the window as it was is
  // no cut: it left a window of one packet at one packet and skipped the
  // ack's increase, and on a host whose threads sleep between the packets of
  // so small a window every ack then "cut" it again, for good (NsccQuickAdapt.
  // WindowOfOnePacketIsNotHeldThere). The ack goes on to NSCC's increases
  // (qa_cut_full: the old "cut"). A cut that raises the window (a stall's
  // acks carried more than it) still does: that is how it comes back.
  const uint64_t to = std::max<uint64_t>(achieved_, p_.mtu);
  if (trigger && open && (to != cwnd_ || p_.qa_cut_full)) {
    slow_start_ = false;
    cwnd_ = to;
    ignore_bytes_ = inflight;  // ignore the signals of what is already in flight
    fired = true;
    qa_cuts_++;
    if (loss) qa_loss_cuts_++;
  } else if (trigger) {
    qa_gated_++;
  }
  qa_window_start_ = now;
  qa_window_end_ = now + len;
  qa_spanned_ignore_ = false;
  achieved_ = 0;
  qa_min_delay_ = ~uint64_t(0);
  return fired;
}

void Nscc::on_ack(uint64_t bytes, uint64_t rtt, bool ecn, uint64_t inflight, Time now,
                  uint64_t fabric_rtt) {
  last_q_ = kNone;
  last_qa_ = false;
  if (!p_.enabled) return;
  update_base(rtt);
  achieved_ += bytes;
  const uint64_t delay = rtt > base_rtt_ ? rtt - base_rtt_ : 0;
  // Quick adapt answers a queue in the fabric (an incast). On a software
  // host most of an RTT is the hosts' own time: the responder's burst that
  // a SACK waits behind, the sender's batch that keeps it unread. That
  // delay fired quick adapt on an idle fabric and held the window at a few
  // packets (performance.md, "Quick adapt on a software host"); measured
  // without it, against the smallest such RTT (or the profile's base RTT),
  // it sees the fabric's queue.
  uint64_t qa_delay = delay;
  // A fabric that marks ECN keeps its own queues short (the decrease
  // below): from its first mark on (cc_qa_fabric_on_ecn) quick adapt
  // answers only a queue in it, not the hosts' delay.
  if (ecn) marked_ = true;
  if (rtt && qa_on_fabric()) {
    // No fabric part (the hosts' own time covered the whole RTT): no sign
    // of a queue in the fabric. Nothing left in flight after this ack (the
    // end of a burst, or a lone message): no cut either. Cutting the window
    // to what the last window achieved would only slow the next burst
    // (over ofi_rxm it cut every 1 MiB transfer after a rendezvous message
    // to one packet: performance.md, "Quick adapt on a software host");
    // the next burst's own acks judge the fabric.
    qa_delay = 0;
    if (fabric_rtt && inflight) {
      const uint64_t f = std::min(fabric_rtt, rtt);
      fabric_base_ = p_.base_rtt ? p_.base_rtt : std::min(fabric_base_, f);
      qa_delay = f > fabric_base_ ? f - fabric_base_ : 0;
    }
  }
  if (rtt) update_avg(!ecn && delay > target_ ? 0.25 * double(base_rtt_) : double(delay));
  if (ignore_bytes_) {
    ignore_bytes_ = bytes >= ignore_bytes_ ? 0 : ignore_bytes_ - bytes;
    qa_spanned_ignore_ = true;
    return;
  }
  if (rtt && p_.delay_md && standing_sample(rtt, now)) {
    last_q_ = kDecrease;
    received_ = 0;
    return;
  }
  if (ecn) slow_start_ = false;
  if (rtt && quick_adapt(false, qa_delay, inflight, now)) {
    last_qa_ = true;
    return;
  }
  if (pen_active_) {
    // The receiver asked for less: no increase while its penalty lasts.
    last_q_ = kHold;
    return;
  }
  if (!rtt) {
    // No delay sample (e.g. the triggering packet was a retransmission): the
    // bytes still clock the batched adjustment below.
  } else if (!ecn && delay >= target_) {
    low_delay_bytes_ = 0;
    if (p_.delay_md && queue_high_) {
      // The delay is a queue that stands (delay_md), not a wake-up: no increase.
      last_q_ = kHold;
    } else {
      inc_ += p_.fi * double(bytes);
      last_q_ = kFair;
    }
  } else if (!ecn) {
    if (delay < kFastDelay) {
      low_delay_bytes_ += bytes;
    } else {
      low_delay_bytes_ = 0;
    }
    if (low_delay_bytes_ >= cwnd_) {
      cwnd_ += uint64_t(double(bytes) * p_.fi_scale * grow_scale(inflight, bytes));
      last_q_ = kFast;
    } else {
      const double alpha = 4.0 * p_.mtu * (double(p_.max_cwnd) / kRefBdp) *
                           (double(target_) / kRefRtt) / double(target_);
      inc_ += alpha * double(bytes) * double(target_ - delay);
      last_q_ = kProportional;
    }
  } else if (delay >= target_) {
    low_delay_bytes_ = 0;
    last_q_ = kHold;
    if (avg_delay_ > double(target_) && now - last_dec_ > base_rtt_) {
      double f = 1.0 - p_.gamma * (avg_delay_ - double(target_)) / avg_delay_;
      f = std::max(f, p_.max_md_jump);
      // delay_md: ECN's decrease stops at the initial window as the delay
      // decrease does (rate-based marks answer the hosts' send bursts too).
      const uint64_t floor = p_.delay_md ? std::min(cwnd_, md_floor()) : 0;
      cwnd_ = std::max<uint64_t>(uint64_t(double(cwnd_) * f), floor);
      last_dec_ = now;
      last_q_ = kDecrease;
      ecn_decs_++;
    }
  } else {
    // ECN with low delay: congestion elsewhere on that path; EV SKIP moves
    // traffic off it, the window stays.
    low_delay_bytes_ = 0;
    last_q_ = kHold;
  }
  // Slow start: the window doubles per round trip until the paths show a
  // queue (delay_md), a mark, a loss or the maximum.
  if (slow_start_ && rtt && !ecn && !queue_high_ && inflight + bytes >= cwnd_ / 2) cwnd_ += bytes;
  if (cwnd_ >= p_.max_cwnd) slow_start_ = false;
  clamp();
  received_ += bytes;
  const uint64_t period = p_.adjust_period ? p_.adjust_period : window_len();
  if (received_ >= p_.adjust_bytes || now - last_adjust_ >= period) {
    const double g = grow_scale(inflight, bytes);
    if (inc_ != 0) cwnd_ = uint64_t(std::max(0.0, double(cwnd_) + inc_ * g / double(cwnd_)));
    if (now - last_adjust_ >= period) {
      if (!(p_.delay_md && queue_high_)) cwnd_ += uint64_t(p_.eta * g);
      last_adjust_ = now;
    }
    inc_ = 0;
    received_ = 0;
    clamp();
  }
}

void Nscc::on_nack(uint64_t bytes, uint64_t inflight, Time now) {
  last_q_ = kNone;
  last_qa_ = false;
  if (!p_.enabled) return;
  update_avg(double(base_rtt_));
  slow_start_ = false;
  if (quick_adapt(true, 0, inflight, now)) {
    last_qa_ = true;
    return;
  }
  cwnd_ = cwnd_ > bytes ? cwnd_ - bytes : 0;
  clamp();
}

void Nscc::on_timeout(uint64_t bytes) {
  if (!p_.enabled) return;
  slow_start_ = false;
  cwnd_ = cwnd_ > bytes ? cwnd_ - bytes : 0;
  clamp();
}

void Nscc::on_penalty(uint8_t pen, bool restore, uint64_t newly_acked, uint64_t inflight) {
  if (!p_.enabled) return;
  if (pen) {
    if (!pen_active_) {
      if (restore) saved_cwnd_ = cwnd_;
      // The penalty scales what is really in flight, not an unused window.
      cwnd_ = std::min(cwnd_, std::max<uint64_t>(inflight + newly_acked, p_.mtu));
    }
    pen_active_ = true;
    uint64_t cut = (newly_acked * pen) >> 7;
    cwnd_ = cwnd_ > cut ? cwnd_ - cut : 0;
    clamp();
  } else if (pen_active_) {
    if (restore && saved_cwnd_) cwnd_ = saved_cwnd_;
    pen_active_ = false;
    saved_cwnd_ = 0;
    clamp();
  }
}

}  // namespace mrc::core
