// The EV set of one QP: active and backup EVs per plane, the pseudo-random
// rotation (a fresh EV per packet, reshuffled every pass), the per-QP EV state
// machine (GOOD / SKIP / ASSUMED_BAD / DENIED), probing of ASSUMED_BAD EVs
// with back-off, readmission after K successes, and the ev_min_active floor.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "core/rng.hpp"
#include "core/types.hpp"

namespace mrc::core {

class PathSet {
 public:
  struct Ev {
    uint32_t ev = 0;
    uint8_t port = 0;
    EvState state = EvState::kGood;
    bool active = false;
    bool probing = false;  // a probe is outstanding
    bool queued = false;   // waiting in the QP's probe queue (for a port or a probe token)
    uint8_t probe_ok = 0;  // consecutive successes
    uint16_t probe_id = 0;
    // Low 32 bits of stats.tx_pkts at its last silent loss (Engine::mark_lost;
    // 0: none). Here it fills the padding before next_probe: an idle QP's
    // EVs are most of its memory.
    uint32_t loss_tx = 0;
    Time next_probe = kNever;  // when to send the next probe (ASSUMED_BAD only)
    // Probe back-off, ns (at most ~4.29 s: PathSet caps it there). Kept in 32
    // bits, with the two fields below, so an EV (most of an idle QP's
    // memory) is no larger than before relapses were tracked.
    uint32_t backoff = 0;
    // Low 16 bits of stats.acked when probes last readmitted it; retired
    // again with them unchanged: a relapse (PathParams::probe_relapse_max).
    // (A false match needs exactly k x 65536 deliveries in between, and
    // costs one doubled back-off.)
    uint16_t acked_at_readmit = 0;
    uint8_t relapses = 0;     // in a row, each with nothing delivered between
    bool readmitted = false;  // GOOD again by probes, no retirement since
    Time probe_sent = 0;
    uint32_t skip_rot = 0;  // rotation in which it was skipped (low 32 bits)
    // Its silent-loss rate, as the packets it sends between two losses:
    // smoothed by 1/4 per loss, in 1/16 packets (saturating at 4095), over
    // loss_n losses (saturating). Kept across retirements and readmissions:
    // a path inside a plane that loses far more than the plane
    // (PathParams::ev_outlier_ratio) is known as such when it comes back.
    uint16_t loss_gap = 0;
    uint8_t loss_n = 0;
    EvStats stats;
  };

  // Reports a state change: (index, from, to, reason).
  using Listener = std::function<void(uint32_t, EvState, EvState, EvEventReason)>;

  // `carried_mask`: the EV bits that survive on the wire (see ev_carried_mask);
  // echoed entropies are matched on those bits.
  void init(const std::vector<EvEntry>& evs, uint32_t active_per_plane, uint32_t carried_mask,
            const PathParams& p, uint64_t seed, Listener listener);
  void set_params(const PathParams& p) { p_ = p; }

  size_t size() const { return evs_.size(); }
  const Ev& at(uint32_t i) const { return evs_[i]; }
  Ev& at(uint32_t i) { return evs_[i]; }
  // Index of an echoed entropy value, or -1.
  int find(uint32_t ev) const;

  // Next EV for a packet: GOOD, active, on a port set in `port_ok`, not
  // `avoid` (an index, or -1). Returns -1 when none is usable right now.
  int next(uint32_t port_ok, int avoid);

  // A uniformly random usable EV (GOOD, active, port in `port_ok`) that does
  // not advance the rotation: for tail-loss probes. -1 when none.
  int random_good(uint32_t port_ok);

  // Signals.
  void skip(uint32_t i, EvEventReason why);  // ECN echo / trim NACK
  // Silent loss, timeout, ALWAYS_SKIP. `outlier`: the EV loses far more
  // than its plane (loss_outlier); retired so again after probes readmitted
  // it, it has relapsed (its next probe waits longer).
  void assume_bad(uint32_t i, EvEventReason why, Time now, bool outlier = false);
  void probe_result(uint32_t i, bool ok, Time now);
  // The loss that made i ASSUMED_BAD turned out to be reordering: GOOD again.
  void undo_bad(uint32_t i, Time now);
  void deny(uint32_t i, bool denied);
  void port_state(uint8_t port, bool up);
  // Every usable EV on `port` becomes ASSUMED_BAD (within the ev_min_active floor).
  void assume_plane_bad(uint8_t port, EvEventReason why, Time now);
  // A packet sent on `port` was lost silently (no trim, no NACK), or such a
  // loss turned out to be reordering (undo). Feeds the plane's loss rate,
  // which counts loss episodes: losses on the plane within one smoothed RTT
  // of the episode's first are one (a queue overflowing drops a run of
  // packets at once; a lossy link drops them one by one, in every RTT).
  void plane_loss(uint8_t port, Time now) {
    if (port > kMaxPorts) return;
    PlaneLoss& pl = plane_[port];
    pl.lost_pkts++;
    if (pl.episode && now - pl.episode < srtt_) return;
    pl.episode = now;
    pl.lost++;
  }
  void plane_loss_undo(uint8_t port) {
    if (port > kMaxPorts) return;
    if (plane_[port].lost) plane_[port].lost--;
    if (plane_[port].lost_pkts) plane_[port].lost_pkts--;
  }
  // EV i lost a packet silently (and is not retired yet): updates its loss
  // rate (loss_gap, loss_n) and returns whether it is an outlier: at least
  // ev_outlier_min losses measured, a rate of at least plane_lossy_ppm
  // (1% when that rule is off), and at least ev_outlier_ratio times its
  // plane's per-packet loss rate (a path inside the plane that loses far
  // more than the plane: on a lossy plane it is retired all the same).
  bool loss_outlier(uint32_t i);
  // The plane's smoothed per-packet silent-loss rate (ppm; plane_loss_ppm
  // counts episodes).
  uint32_t plane_pkt_loss_ppm(uint8_t port) const {
    return port <= kMaxPorts ? plane_[port].pkt_ppm : 0;
  }
  // Whether `port` is down-weighted for loss, and its smoothed silent-loss
  // rate (parts per million).
  bool plane_lossy(uint8_t port) const { return port <= kMaxPorts && plane_[port].lossy; }
  uint32_t plane_loss_ppm(uint8_t port) const { return port <= kMaxPorts ? plane_[port].ppm : 0; }
  uint64_t plane_lossy_events() const { return lossy_events_; }
  // Plane relapses (PathParams::plane_relapse_window) and the hold they
  // imposed (ns, summed).
  uint64_t plane_relapses() const { return plane_relapses_; }
  uint64_t plane_hold_ns() const { return plane_hold_ns_; }
  // Until when `port`'s EVs are held off their probes (0: not held).
  Time plane_hold_until(uint8_t port) const {
    return port <= kMaxPorts ? plane_[port].hold_until : 0;
  }
  uint8_t plane_relapse_count(uint8_t port) const {
    return port <= kMaxPorts ? plane_[port].relapses : 0;
  }
  // The relapse back-off, of an EV and of a plane alike: `base` << n, at
  // most max(cap, base) (and what an Ev's 32-bit backoff holds).
  static Time relapse_wait(Time base, uint32_t n, Time cap);

  // ASSUMED_BAD EVs due for a probe at `now` (calls fn(index)); marks them probing.
  // At most probe_inflight_max probes outstanding or queued.
  template <class Fn>
  void due_probes(Time now, Fn&& fn) {
    const Time wait = probe_wait();
    uint32_t busy = 0;
    for (uint32_t i : bad_) {
      Ev& e = evs_[i];
      if (e.state != EvState::kAssumedBad) continue;
      if (e.probing && now - e.probe_sent >= wait) probe_result(i, false, now);
      busy += e.probing || e.queued;
    }
    // bad_ changes only through probe_result's readmissions, which the
    // first loop did not make (a timeout is a failure).
    for (uint32_t i : bad_) {
      if (p_.probe_inflight_max && busy >= p_.probe_inflight_max) break;
      Ev& e = evs_[i];
      if (e.state != EvState::kAssumedBad) continue;
      if (!e.probing && !e.queued && e.next_probe <= now && port_up(e.port)) {
        e.queued = true;
        busy++;
        fn(i);
      }
    }
  }
  // The QP's RTT (smoothed, and its variation): a probe is judged
  // unanswered probe_timeout after its RTO (srtt + 4 x rttvar), and backed
  // off no less. On a host (or a path) whose RTT exceeds probe_timeout
  // every probe would otherwise be judged failed before its answer came, and
  // no retired EV ever be readmitted; on a fabric of microseconds this
  // changes nothing.
  void set_rtt(Time srtt, Time rttvar) {
    srtt_ = srtt;
    rto_ = srtt + 4 * rttvar;
  }
  Time probe_wait() const { return p_.probe_timeout + rto_; }
  // The QP took it off its probe queue (sent, or no longer to be probed).
  void unqueue(uint32_t i) { evs_[i].queued = false; }
  void probe_sent(uint32_t i, uint16_t id, Time now) {
    Ev& e = evs_[i];
    e.probing = true;
    e.probe_id = id;
    e.probe_sent = now;
    e.stats.probes_sent++;
  }
  Time next_probe_deadline() const;

  // Counts.
  uint32_t usable() const { return usable_; }  // GOOD or SKIP, any port
  uint32_t active_usable(uint8_t port) const;
  uint32_t count(EvState s) const;
  uint32_t bad_count() const { return uint32_t(bad_.size()); }
  bool port_up(uint8_t port) const { return port < 32 && (ports_down_ >> port & 1) == 0; }

 private:
  void set_state(uint32_t i, EvState to, EvEventReason why);
  void promote_backup(uint8_t port);
  void refill_order();
  void plane_window_end(uint8_t port);
  // A down-weighted plane carries 1/plane_lossy_div of its share: its
  // windows are as much shorter, so it is judged as often when it heals.
  uint32_t plane_window(uint8_t port) const {
    return plane_[port].lossy
               ? std::max<uint32_t>(p_.plane_window / std::max<uint32_t>(p_.plane_lossy_div, 1), 16)
               : p_.plane_window;
  }
  void set_plane_target(uint8_t port, uint32_t target);

  std::vector<Ev> evs_;
  std::vector<uint32_t> order_;  // rotation order of active EVs
  size_t cursor_ = 0;
  std::vector<uint32_t> skipped_;  // SKIP until their next turn has passed them over
  uint64_t rotation_ = 0;
  std::vector<uint32_t> bad_;   // ASSUMED_BAD (probed)
  std::vector<uint32_t> hash_;  // open addressing: ev value -> index + 1
  uint32_t target_active_[kMaxPorts + 1] = {};
  uint32_t base_active_[kMaxPorts + 1] = {};       // target_active_ of a plane not down-weighted
  static constexpr uint8_t kPlaneWarmWindows = 4;  // judged (or a yardstick) after this many
  struct PlaneLoss {
    uint32_t sent = 0, lost = 0;  // in the current window (lost: loss episodes)
    uint32_t lost_pkts = 0;       // in the current window: packets lost silently
    Time episode = 0;             // when the current loss episode began
    uint32_t ppm = 0;             // smoothed silent-loss rate
    uint32_t pkt_ppm = 0;         // smoothed per-packet loss rate (lost_pkts)
    uint8_t windows = 0;          // windows in ppm (up to kPlaneWarmWindows)
    uint8_t pkt_windows = 0;      // windows in pkt_ppm (up to 16: a mean until then)
    bool lossy = false;           // down-weighted
    // Plane relapse back-off (PathParams::plane_relapse_window).
    uint32_t usable = 0;   // its EVs GOOD or SKIP
    bool retired = false;  // dark (no usable EV), not readmitted since
    uint8_t relapses = 0;  // in a row, each within the window of its readmission
    Time readmitted = 0;   // when its first EV came back after its last retirement
    Time hold_until = 0;   // its EVs' probes wait until then
  };
  PlaneLoss plane_[kMaxPorts + 1];
  uint64_t lossy_events_ = 0;
  uint64_t plane_relapses_ = 0, plane_hold_ns_ = 0;
  // An EV of `port` came back (probes, undo): the plane is readmitted.
  void plane_back(uint8_t port, Time now);
  // `port`'s last usable EV is being retired: returns the hold of a plane
  // relapse (0: none); hold_plane holds its retired EVs off their probes.
  Time plane_dark(uint8_t port, Time now);
  void hold_plane(uint8_t port, Time now, Time hold);
  uint32_t ports_down_ = 0;
  uint32_t mask_ = ~0u;
  uint32_t usable_ = 0;
  Time rto_ = 0, srtt_ = 0;  // set_rtt
  PathParams p_;
  Rng rng_;
  Listener listener_;
};

// An EV is most of an idle QP's memory: its fields fill the padding around
// its statistics, and a new one must find room there.
static_assert(sizeof(PathSet::Ev) <= 48 + sizeof(EvStats), "PathSet::Ev grew");

}  // namespace mrc::core
