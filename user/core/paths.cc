#include "core/paths.hpp"

#include <algorithm>

namespace mrc::core {

namespace {
// PathSet::Ev::backoff is 32 bits of ns.
constexpr Time kMaxBackoff = 0xffffffffu;
}  // namespace

namespace {
uint32_t mix(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352d;
  x ^= x >> 15;
  x *= 0x846ca68b;
  x ^= x >> 16;
  return x;
}
}  // namespace

void PathSet::init(const std::vector<EvEntry>& evs, uint32_t active_per_plane,
                   uint32_t carried_mask, const PathParams& p, uint64_t seed, Listener listener) {
  p_ = p;
  rng_.reseed(seed);
  listener_ = std::move(listener);
  mask_ = carried_mask;
  evs_.clear();
  evs_.reserve(evs.size());
  uint32_t per_port[kMaxPorts + 1] = {};
  for (const EvEntry& e : evs) {
    Ev v;
    v.ev = e.ev;
    v.port = e.port;
    v.state = e.denied ? EvState::kDenied : EvState::kGood;
    evs_.push_back(v);
    if (e.port <= kMaxPorts) per_port[e.port]++;
  }
  // Active set: `active_per_plane` per port (default half of the port's EVs),
  // the rest are backups of the same plane.
  uint32_t taken[kMaxPorts + 1] = {};
  for (uint8_t port = 0; port <= kMaxPorts; port++) {
    target_active_[port] = active_per_plane ? std::min(active_per_plane, per_port[port])
                                            : std::max<uint32_t>(1, (per_port[port] + 1) / 2);
    if (!per_port[port]) target_active_[port] = 0;
    base_active_[port] = target_active_[port];
    plane_[port] = PlaneLoss{};
  }
  lossy_events_ = 0;
  plane_relapses_ = plane_hold_ns_ = 0;
  usable_ = 0;
  for (uint32_t i = 0; i < evs_.size(); i++) {
    Ev& v = evs_[i];
    if (v.state == EvState::kGood) usable_++;
    if (v.state == EvState::kGood && v.port <= kMaxPorts) plane_[v.port].usable++;
    if (v.port > kMaxPorts || v.state == EvState::kDenied) continue;
    if (taken[v.port] < target_active_[v.port]) {
      v.active = true;
      taken[v.port]++;
    }
  }
  size_t hs = 16;
  while (hs < evs_.size() * 2) hs <<= 1;
  hash_.assign(hs, 0);
  for (uint32_t i = 0; i < evs_.size(); i++) {
    uint32_t k = evs_[i].ev & mask_;
    for (size_t h = mix(k) & (hs - 1);; h = (h + 1) & (hs - 1)) {
      if (!hash_[h]) {
        hash_[h] = i + 1;
        break;
      }
      if ((evs_[hash_[h] - 1].ev & mask_) == k) break;  // duplicate value: keep the first
    }
  }
  order_.clear();
  skipped_.clear();
  bad_.clear();
  cursor_ = 0;
  ports_down_ = 0;
  refill_order();
}

int PathSet::find(uint32_t ev) const {
  if (hash_.empty()) return -1;
  const uint32_t k = ev & mask_;
  const size_t m = hash_.size() - 1;
  for (size_t h = mix(k) & m;; h = (h + 1) & m) {
    uint32_t v = hash_[h];
    if (!v) return -1;
    if ((evs_[v - 1].ev & mask_) == k) return int(v - 1);
  }
}

void PathSet::refill_order() {
  order_.clear();
  for (uint32_t i = 0; i < evs_.size(); i++)
    if (evs_[i].active) order_.push_back(i);
  // Fisher-Yates with the QP's own generator: QPs sharing a profile do not
  // march through their EVs in lockstep.
  for (size_t i = order_.size(); i > 1; i--)
    std::swap(order_[i - 1], order_[rng_.below(uint32_t(i))]);
  cursor_ = 0;
  rotation_++;
  // A skipped EV sits out its next turn (next()), in this rotation or, when
  // the signal came after its turn, in the next one. One that got no turn in
  // a whole rotation (it left the active set) is GOOD again.
  size_t k = 0;
  for (uint32_t i : skipped_) {
    if (evs_[i].state != EvState::kSkip) continue;
    if (uint32_t(rotation_) - evs_[i].skip_rot >= 2)
      set_state(i, EvState::kGood, EvEventReason::kRotation);
    else
      skipped_[k++] = i;
  }
  skipped_.resize(k);
}

int PathSet::next(uint32_t port_ok, int avoid) {
  for (int pass = 0; pass < 2; pass++) {
    while (cursor_ < order_.size()) {
      uint32_t i = order_[cursor_++];
      const Ev& e = evs_[i];
      if (e.state == EvState::kSkip) {
        // Its turn, passed over: it has been skipped once.
        set_state(i, EvState::kGood, EvEventReason::kRotation);
        continue;
      }
      if (!e.active || e.state != EvState::kGood || int(i) == avoid) continue;
      if (!(port_ok >> e.port & 1) || !port_up(e.port)) continue;
      if (p_.plane_lossy_ppm && e.port <= kMaxPorts &&
          ++plane_[e.port].sent >= plane_window(e.port))
        plane_window_end(e.port);
      return int(i);
    }
    refill_order();
  }
  return -1;
}

void PathSet::plane_window_end(uint8_t port) {
  PlaneLoss& pl = plane_[port];
  const uint32_t rate =
      uint32_t(std::min<uint64_t>(uint64_t(pl.lost) * 1'000'000 / pl.sent, 1'000'000));
  // A long memory (1/16 per window): a burst of drops in one window (a
  // queue overflowing: congestion, which every plane sees in turn) moves the
  // rate by 1/16 of the burst; a plane losing steadily crosses 1% within a
  // few windows all the same.
  pl.ppm = pl.ppm - pl.ppm / 16 + rate / 16;
  if (pl.windows < kPlaneWarmWindows) pl.windows++;
  // Per packet, the yardstick of its EVs' own rates (loss_outlier): the
  // mean of its first 16 windows, then smoothed as ppm is.
  const uint32_t pkt_rate =
      uint32_t(std::min<uint64_t>(uint64_t(pl.lost_pkts) * 1'000'000 / pl.sent, 1'000'000));
  if (pl.pkt_windows < 16) {
    pl.pkt_windows++;
    pl.pkt_ppm =
        uint32_t((uint64_t(pl.pkt_ppm) * (pl.pkt_windows - 1) + pkt_rate) / pl.pkt_windows);
  } else {
    pl.pkt_ppm = pl.pkt_ppm - pl.pkt_ppm / 16 + pkt_rate / 16;
  }
  pl.sent = pl.lost = pl.lost_pkts = 0;
  if (pl.windows < kPlaneWarmWindows) return;  // a rate of one or two windows is noise
  // The best plane the QP measures (the others are the yardstick: loss that
  // every plane sees, a receiver dropping, is no reason to prefer one).
  uint32_t best = UINT32_MAX;
  for (uint8_t q = 0; q <= kMaxPorts; q++)
    if (q != port && plane_[q].windows >= kPlaneWarmWindows && base_active_[q] && port_up(q))
      best = std::min(best, plane_[q].ppm);
  if (best == UINT32_MAX) best = pl.ppm;  // nothing to compare with
  const uint64_t ratio = std::max<uint32_t>(p_.plane_lossy_ratio, 1);
  if (!pl.lossy) {
    if (pl.ppm >= p_.plane_lossy_ppm && pl.ppm >= ratio * best && best < pl.ppm) {
      pl.lossy = true;
      lossy_events_++;
      set_plane_target(port, std::max<uint32_t>(1, base_active_[port] /
                                                       std::max<uint32_t>(p_.plane_lossy_div, 1)));
    }
  } else if (pl.ppm < p_.plane_lossy_ppm / 2 || pl.ppm < 2 * uint64_t(best)) {
    pl.lossy = false;
    set_plane_target(port, base_active_[port]);
  }
}

void PathSet::set_plane_target(uint8_t port, uint32_t target) {
  const uint32_t before = target_active_[port];
  target_active_[port] = target;
  if (target < before) {
    // Keep `target` of the plane's usable active EVs; the rest become
    // backups (still GOOD: probes and the controller see no change).
    uint32_t kept = 0;
    for (uint32_t i = 0; i < evs_.size(); i++) {
      Ev& e = evs_[i];
      if (e.port != port || !e.active || e.state == EvState::kAssumedBad ||
          e.state == EvState::kDenied)
        continue;
      if (kept < target) {
        kept++;
        continue;
      }
      e.active = false;
      if (listener_) listener_(i, e.state, e.state, EvEventReason::kPlaneLossy);
    }
  } else {
    for (uint32_t k = before; k < target; k++) promote_backup(port);
  }
}

int PathSet::random_good(uint32_t port_ok) {
  uint32_t n = 0;
  int pick = -1;
  for (uint32_t i : order_) {
    const Ev& e = evs_[i];
    if (!e.active || e.state != EvState::kGood || !(port_ok >> e.port & 1) || !port_up(e.port))
      continue;
    if (rng_.below(++n) == 0) pick = int(i);
  }
  return pick;
}

void PathSet::set_state(uint32_t i, EvState to, EvEventReason why) {
  Ev& e = evs_[i];
  EvState from = e.state;
  if (from == to) return;
  bool was = from == EvState::kGood || from == EvState::kSkip;
  bool is = to == EvState::kGood || to == EvState::kSkip;
  if (was && !is) usable_--;
  if (!was && is) usable_++;
  if (e.port <= kMaxPorts) plane_[e.port].usable += int(is) - int(was);
  e.state = to;
  if (listener_) listener_(i, from, to, why);
}

void PathSet::skip(uint32_t i, EvEventReason why) {
  Ev& e = evs_[i];
  if (e.state != EvState::kGood) return;
  set_state(i, EvState::kSkip, why);
  e.skip_rot = uint32_t(rotation_);
  skipped_.push_back(i);
}

bool PathSet::loss_outlier(uint32_t i) {
  Ev& e = evs_[i];
  const uint32_t tx = uint32_t(e.stats.tx_pkts);
  // Packets it sent since its previous loss (as both were detected: losses
  // found together count 0).
  if (e.loss_tx) {
    const uint32_t gap =
        uint32_t(std::min<uint64_t>(uint64_t(uint32_t(tx - e.loss_tx)) * 16, 0xffff));
    e.loss_gap = e.loss_n ? uint16_t(e.loss_gap - e.loss_gap / 4 + gap / 4) : uint16_t(gap);
    if (e.loss_n < 255) e.loss_n++;
  }
  e.loss_tx = tx;
  if (!p_.ev_outlier_ratio || !p_.plane_lossy_ppm || e.port > kMaxPorts) return false;
  const PlaneLoss& pl = plane_[e.port];
  if (e.loss_n < std::max<uint32_t>(p_.ev_outlier_min, 1) || pl.pkt_windows < kPlaneWarmWindows)
    return false;
  // Its rate (ppm) from the smoothed gap; a gap of 0 (two losses at once) is
  // a rate of one.
  const uint64_t ev_ppm =
      std::min<uint64_t>(16'000'000 / std::max<uint16_t>(e.loss_gap, 16), 1'000'000);
  return ev_ppm >= p_.plane_lossy_ppm && ev_ppm >= uint64_t(p_.ev_outlier_ratio) * pl.pkt_ppm;
}

void PathSet::assume_bad(uint32_t i, EvEventReason why, Time now, bool outlier) {
  Ev& e = evs_[i];
  if (e.state == EvState::kAssumedBad || e.state == EvState::kDenied) return;
  if (usable_ <= p_.min_active || usable_ == 1) {
    // The floor: keep using the least-bad EVs rather than stall the QP.
    if (listener_) listener_(i, e.state, e.state, EvEventReason::kSuppressed);
    return;
  }
  // Back for a few RTTs and lost again with nothing delivered: its probes
  // pass where data does not. Each relapse in a row doubles how long it
  // waits before the next probe, so such a path costs a packet per back-off,
  // not one per probe round (issue 21). So does one that loses far more than
  // its plane (an outlier: a path inside the plane losing part of what it
  // carries, whose probes pass now and then).
  const bool relapse = e.readmitted && (outlier || uint16_t(e.stats.acked) == e.acked_at_readmit);
  e.readmitted = false;
  e.relapses = relapse ? uint8_t(std::min(e.relapses + 1, 30)) : 0;
  // The last usable EV of its plane: the plane goes dark, and may have
  // relapsed (plane_dark; its event says so, one per plane relapse).
  const Time plane_hold =
      e.port <= kMaxPorts && plane_[e.port].usable == 1 ? plane_dark(e.port, now) : 0;
  set_state(i, EvState::kAssumedBad,
            plane_hold ? EvEventReason::kPlaneRelapse
            : relapse  ? EvEventReason::kRelapse
                       : why);
  e.probe_ok = 0;
  e.probing = false;
  e.backoff = uint32_t(relapse_wait(p_.probe_initial, e.relapses, p_.probe_relapse_max));
  e.next_probe = now + e.backoff;
  bad_.push_back(i);
  if (plane_hold) hold_plane(e.port, now, plane_hold);
  if (e.active) {
    e.active = false;
    promote_backup(e.port);
  }
}

Time PathSet::relapse_wait(Time base, uint32_t n, Time cap) {
  const Time w = n ? std::min<Time>(base << std::min<uint32_t>(n, 40), std::max(cap, base)) : base;
  return std::min<Time>(w, kMaxBackoff);
}

void PathSet::promote_backup(uint8_t port) {
  uint32_t active = 0;
  for (const Ev& e : evs_)
    if (e.port == port && e.active && e.state != EvState::kAssumedBad &&
        e.state != EvState::kDenied)
      active++;
  if (active >= target_active_[port]) return;
  // A random GOOD backup of the same plane keeps the plane's load equal.
  uint32_t n = 0, pick = 0;
  for (uint32_t i = 0; i < evs_.size(); i++) {
    const Ev& e = evs_[i];
    if (e.port == port && !e.active && e.state == EvState::kGood && rng_.below(++n) == 0) pick = i;
  }
  if (!n) return;
  evs_[pick].active = true;
  order_.push_back(pick);  // usable in the current rotation already
  if (listener_) listener_(pick, EvState::kGood, EvState::kGood, EvEventReason::kPromoted);
}

void PathSet::probe_result(uint32_t i, bool ok, Time now) {
  Ev& e = evs_[i];
  if (e.state != EvState::kAssumedBad) return;
  e.probing = false;
  const Time hold = plane_hold_until(e.port);
  if (ok) {
    e.stats.probes_ok++;
    if (hold > now) {
      // Sent before its plane relapsed: it readmits nothing while the plane
      // is held.
      e.probe_ok = 0;
      e.next_probe = hold;
      return;
    }
    if (++e.probe_ok >= p_.probe_successes) {
      set_state(i, EvState::kGood, EvEventReason::kProbeOk);
      plane_back(e.port, now);
      e.readmitted = true;
      e.acked_at_readmit = uint16_t(e.stats.acked);
      bad_.erase(std::find(bad_.begin(), bad_.end(), i));
      e.next_probe = kNever;
      promote_backup(e.port);  // rejoins the active set if its plane is short
      return;
    }
    e.next_probe = now;  // keep probing until K in a row
  } else {
    e.stats.probes_failed++;
    e.probe_ok = 0;
    e.backoff = uint32_t(
        std::min<Time>({Time(e.backoff) * 2, std::max(p_.probe_max, probe_wait()), kMaxBackoff}));
    e.next_probe = std::max(now + e.backoff, hold);
    if (listener_) listener_(i, e.state, e.state, EvEventReason::kProbeFail);
  }
}

void PathSet::undo_bad(uint32_t i, Time now) {
  Ev& e = evs_[i];
  if (e.state != EvState::kAssumedBad) return;
  set_state(i, EvState::kGood, EvEventReason::kSpurious);
  plane_back(e.port, now);
  bad_.erase(std::find(bad_.begin(), bad_.end(), i));
  e.next_probe = kNever;
  e.probing = false;
  promote_backup(e.port);
}

void PathSet::deny(uint32_t i, bool denied) {
  Ev& e = evs_[i];
  if (denied) {
    if (e.state == EvState::kDenied) return;
    if (e.state == EvState::kAssumedBad) bad_.erase(std::find(bad_.begin(), bad_.end(), i));
    set_state(i, EvState::kDenied, EvEventReason::kController);
    e.next_probe = kNever;
    e.probing = false;
    if (e.active) {
      e.active = false;
      promote_backup(e.port);
    }
  } else if (e.state == EvState::kDenied) {
    set_state(i, EvState::kGood, EvEventReason::kController);
    promote_backup(e.port);
  }
}

void PathSet::plane_back(uint8_t port, Time now) {
  if (port > kMaxPorts || !plane_[port].retired) return;
  plane_[port].retired = false;
  plane_[port].readmitted = now;
}

void PathSet::assume_plane_bad(uint8_t port, EvEventReason why, Time now) {
  for (uint32_t i = 0; i < evs_.size(); i++) {
    const Ev& e = evs_[i];
    if (e.port == port && (e.state == EvState::kGood || e.state == EvState::kSkip))
      assume_bad(i, why, now);
  }
}

Time PathSet::plane_dark(uint8_t port, Time now) {
  // Its last usable EV is being retired (plane suspicion retires them all;
  // a flap that relapses each readmitted EV retires them one by one). Dark
  // again soon after it came back: a relapse. Each in a row holds its EVs
  // off their probes twice as long (relapse_wait, as an EV's own
  // relapses), so a plane that flaps faster than a probe round, or passes
  // probes and loses data, is not readmitted in every up phase to lose what
  // it carries in the next down phase (issue 21). Dark again after a stable
  // plane_relapse_window (or back by the controller): afresh.
  if (!p_.plane_relapse_window || port > kMaxPorts) return 0;
  PlaneLoss& pl = plane_[port];
  const bool relapse =
      !pl.retired && pl.readmitted && now - pl.readmitted <= p_.plane_relapse_window;
  pl.relapses = relapse ? uint8_t(std::min(pl.relapses + 1, 40)) : 0;
  pl.retired = true;
  if (!relapse) return 0;
  const Time hold = relapse_wait(p_.plane_relapse_initial, pl.relapses - 1u, p_.plane_relapse_max);
  pl.hold_until = now + hold;
  plane_relapses_++;
  plane_hold_ns_ += hold;
  return hold;
}

void PathSet::hold_plane(uint8_t port, Time now, Time hold) {
  for (uint32_t i : bad_) {
    Ev& e = evs_[i];
    if (e.port != port || e.state != EvState::kAssumedBad) continue;
    // A probe already out readmits nothing before the hold ends (probe_result).
    e.probe_ok = 0;
    e.backoff = uint32_t(std::max<Time>(e.backoff, hold));
    e.next_probe = std::max(e.next_probe, now + hold);
  }
}

void PathSet::port_state(uint8_t port, bool up) {
  if (port >= 32) return;
  if (up)
    ports_down_ &= ~(1u << port);
  else
    ports_down_ |= 1u << port;
}

uint32_t PathSet::active_usable(uint8_t port) const {
  uint32_t n = 0;
  for (const Ev& e : evs_)
    if (e.port == port && e.active && (e.state == EvState::kGood || e.state == EvState::kSkip)) n++;
  return n;
}

uint32_t PathSet::count(EvState s) const {
  uint32_t n = 0;
  for (const Ev& e : evs_) n += e.state == s;
  return n;
}

Time PathSet::next_probe_deadline() const {
  Time t = kNever, answer = kNever;
  uint32_t busy = 0;
  for (uint32_t i : bad_) {
    const Ev& e = evs_[i];
    if (e.state != EvState::kAssumedBad) continue;
    busy += e.probing || e.queued;
    if (e.queued) continue;  // due already: the probe queue has it
    if (e.probing)
      answer = std::min(answer, e.probe_sent + probe_wait());
    else
      t = std::min(t, e.next_probe);
  }
  // At the probe_inflight_max limit nothing more is queued before a probe is
  // answered (probe_result: the QP looks again) or times out.
  if (p_.probe_inflight_max && busy >= p_.probe_inflight_max) return answer;
  return std::min(t, answer);
}

}  // namespace mrc::core
