// The reroute policy: denies EVs (or whole planes) that stay degraded and
// allows them again once probes through them succeed, with hysteresis and
// the ev_min_active floor. Inputs:
//
//   on_event()     profile-level EV state changes (an EV held ASSUMED_BAD by
//                  a QP for bad_hold_ms is denied)
//   on_counters()  the per-EV counters applications publish: an EV degraded
//                  (loss or trim ratio above threshold, or an RTT outlier on
//                  its plane) for bad_intervals consecutive intervals is denied
//   on_probe()     results of mrcd's EV probes: an EV this policy denied is
//                  allowed after restore_probes consecutive successes (and its
//                  back-off); an EV whose probes are lost (probe_loss_threshold
//                  of the last probe_loss_window, counted in rounds where its
//                  plane answered) is denied; a plane whose probes all fail for
//                  plane_fail_rounds rounds has all its EVs denied, and is
//                  allowed again after plane_restore_rounds good rounds
//
// Only EVs the policy denied are ever allowed by it (an operator's DENY
// stays). A deny that would leave fewer than ev_min_active usable EVs in a
// profile (or deny more than max_denied_fraction of it) is suppressed. Every
// decision is logged with its reason and handed to `on_decision` (mrcctl
// monitor, metrics).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ctl/controller.hpp"
#include "ctl/ep.hpp"
#include "mrcd/config.hpp"
#include "mrcd/ctl_names.hpp"

namespace mrc::mrcd {

struct Decision {
  uint64_t time_ns = 0;
  std::string action;  // deny_ev, allow_ev, deny_plane, allow_plane, suppressed
  uint64_t profile = 0;
  ctl::Ev ev;
  uint32_t wire = 0;
  uint8_t port = 0;
  std::string reason;
};

// One EV probe the policy wants sent.
struct PolicyProbe {
  uint64_t profile = 0;  // 0: a plane health probe not tied to a profile
  uint32_t wire = 0;
  uint8_t port = 0;
  uint32_t fmt_mode = ctl::kFmtStev;
  codec::IpAddr dst;
};

class Policy {
 public:
  Policy(const PolicyCfg& cfg, const ProbeCfg& probe, ctl::Controller& c);

  std::function<void(const Decision&)> on_decision;

  void on_event(const ctl::EvEvent& e, ctl::Time now);
  void on_counters(const ctl::EvStatList& stats, ctl::Time now);
  // The outcome of one probe of `plan()` (ok = answered).
  void on_probe(const PolicyProbe& p, bool ok, uint32_t rtt_ns, ctl::Time now);
  // A probe round of a plane ended: `any_ok` = some probe of it was answered.
  void on_plane_round(uint8_t port, bool any_ok, ctl::Time now);
  // Applies what is due (denies of EVs held bad too long, restores).
  void evaluate(ctl::Time now);
  // Probes of the next round: policy-denied EVs (to restore them) and a few
  // usable EVs per plane toward each of its peers (plane health).
  std::vector<PolicyProbe> plan(
      const std::vector<std::pair<uint8_t, std::vector<codec::IpAddr>>>& planes);

  const std::deque<Decision>& decisions() const { return log_; }
  struct Counters {
    uint64_t deny_ev = 0, allow_ev = 0, deny_plane = 0, allow_plane = 0, suppressed = 0;
  };
  const Counters& counters() const { return ctr_; }
  bool plane_denied(uint8_t port) const;

 private:
  struct Key {
    uint64_t profile = 0;
    uint32_t wire = 0;
    uint8_t port = 0;
    auto operator<=>(const Key&) const = default;
  };
  struct EvTrack {
    ctl::Time bad_since = 0;  // held ASSUMED_BAD since (0 = not)
    uint32_t degraded = 0;    // consecutive degraded intervals
    bool denied_by_us = false;
    uint32_t good_probes = 0;
    uint32_t denials = 0;       // how often we denied it (back-off exponent)
    ctl::Time allow_after = 0;  // back-off
    // Counter snapshot (summed over processes) the next verdict is measured
    // from: it advances only when a verdict was possible (min_packets sent),
    // so an EV that carries a few packets per interval (a backup the engine
    // promotes now and then) is judged once its packets add up.
    uint64_t tx = 0, lost = 0, trims = 0;
    uint64_t rtt_sum = 0, rtt_samples = 0;  // advance every interval
    bool have_snapshot = false;
    bool suppress_logged = false;  // one "suppressed" decision per episode
    // Outcomes of the EV's latest probes (bit i: probe i back lost), counted
    // only in rounds where its plane answered; at most probe_loss_window.
    uint64_t probe_bits = 0;
    uint32_t probe_n = 0;
  };
  struct PlaneTrack {
    uint32_t failed_rounds = 0, good_rounds = 0;
    bool denied = false;
    bool suppress_logged = false;
    std::vector<Key> denied_evs;  // what the plane deny changed
  };

  void decide(Decision d);
  // Denies EV k on the policy's own account (back-off, counters, decision),
  // or logs the suppression once per episode. An EV someone else denied is
  // left alone (the policy never takes ownership of an operator's DENY).
  void deny_ev(const Key& k, EvTrack& t, const std::string& why, ctl::Time now);
  bool denied_now(const Key& k) const;
  // Sets the state of the EV(s) (profile, wire, port); returns false with
  // a suppression reason when the floor forbids a deny.
  bool set_state(const Key& k, uint32_t state, const std::string& why, ctl::Time now,
                 std::string* suppressed);
  ctl::Ev ev_of(const Key& k) const;

  PolicyCfg cfg_;
  ProbeCfg probe_;
  ctl::Controller& c_;
  std::map<Key, EvTrack> ev_;
  std::map<uint8_t, PlaneTrack> planes_;
  std::map<uint8_t, std::vector<std::pair<Key, bool>>> round_;  // probes of the open round
  std::deque<Decision> log_;
  Counters ctr_;
  uint32_t rr_ = 0;  // rotates the plane-health EV sample
};

}  // namespace mrc::mrcd
