#include "mrcd/policy.hpp"

#include <algorithm>
#include <cstring>

#include "mrcd/log.hpp"

namespace mrc::mrcd {

using namespace mrc::ctl;

namespace {

std::string pct(double v) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.1f%%", v * 100);
  return b;
}

}  // namespace

Policy::Policy(const PolicyCfg& cfg, const ProbeCfg& probe, Controller& c)
    : cfg_(cfg), probe_(probe), c_(c) {}

bool Policy::plane_denied(uint8_t port) const {
  auto it = planes_.find(port);
  return it != planes_.end() && it->second.denied;
}

void Policy::decide(Decision d) {
  if (d.action == "deny_ev") ctr_.deny_ev++;
  if (d.action == "allow_ev") ctr_.allow_ev++;
  if (d.action == "deny_plane") ctr_.deny_plane++;
  if (d.action == "allow_plane") ctr_.allow_plane++;
  if (d.action == "suppressed") ctr_.suppressed++;
  MRCD_INFO("policy %s profile %llu ev %s port %u: %s", d.action.c_str(),
            (unsigned long long)d.profile, ev_hex(d.ev.val).c_str(), d.port, d.reason.c_str());
  log_.push_back(d);
  while (log_.size() > 256) log_.pop_front();
  if (on_decision) on_decision(d);
}

Ev Policy::ev_of(const Key& k) const {
  for (const auto& e : c_.ev_entries(k.profile))
    if (e.populated && e.wire == k.wire && e.port == k.port) {
      Ev v;
      std::memcpy(v.val.data(), e.val, codec::kEvMaxBytes);
      v.port = e.port;
      return v;
    }
  Ev v;
  v.val = codec::ev_from_u32(k.wire, codec::EvFmtMode::kStev);
  v.port = k.port;
  return v;
}

bool Policy::denied_now(const Key& k) const {
  for (const auto& e : c_.ev_entries(k.profile))
    if (e.populated && e.wire == k.wire && e.port == k.port && e.state == kEvDenied) return true;
  return false;
}

void Policy::deny_ev(const Key& k, EvTrack& t, const std::string& why, ctl::Time now) {
  if (t.denied_by_us || denied_now(k)) return;
  Decision d{now, "deny_ev", k.profile, ev_of(k), k.wire, k.port, why};
  std::string sup;
  if (set_state(k, kEvDenied, d.reason, now, &sup)) {
    t.denied_by_us = true;
    t.good_probes = 0;
    t.probe_bits = 0, t.probe_n = 0;
    t.allow_after = now + ctl::Time(cfg_.restore_backoff_ms) * 1'000'000ull *
                              (1ull << std::min<uint32_t>(t.denials, 10));
    t.denials++;
    decide(d);
  } else {
    d.action = "suppressed";
    d.reason = "deny (" + d.reason + ") suppressed: " + sup;
    if (!t.suppress_logged) decide(d);
    t.suppress_logged = true;
  }
}

bool Policy::set_state(const Key& k, uint32_t state, const std::string& why, ctl::Time now,
                       std::string* suppressed) {
  (void)why;
  (void)now;
  const mrc_ctl_evp* p = c_.ev_record(k.profile);
  if (!p) {
    *suppressed = "the profile no longer exists";
    return false;
  }
  if (p->mode == kEvModeAuto) {
    *suppressed = "AUTO profiles have no EV array to deny EVs in";
    return false;
  }
  auto arr = c_.ev_entries(k.profile);
  uint32_t usable = 0, matching = 0;
  bool found = false;
  for (const auto& e : arr) {
    if (!e.populated) continue;
    const bool mine = e.wire == k.wire && e.port == k.port;
    found |= mine;
    if (e.state != kEvDenied) {
      usable++;
      matching += mine;
    }
  }
  if (!found) {
    *suppressed = "the EV is no longer in the profile";
    return false;
  }
  if (state == kEvDenied) {
    if (matching == 0) return true;  // denied already
    if (usable - matching < p->min_active) {
      *suppressed = "ev_min_active floor: " + std::to_string(usable - matching) +
                    " usable EVs would remain, min_active " + std::to_string(p->min_active);
      return false;
    }
    const double after =
        double(p->n_denied + matching) / double(std::max<uint32_t>(p->ev_count, 1));
    if (after > cfg_.max_denied_fraction) {
      *suppressed = "max_denied_fraction: " + pct(after) +
                    " of the profile would be denied (limit " + pct(cfg_.max_denied_fraction) + ")";
      return false;
    }
  }
  std::vector<EvOpEntry> e = {{ev_of(k), {}, state, 0}};
  EvProfileAttr a;
  a.ev_op.op = kEvOpModifyEvState;
  a.ev_op.entries = e;
  a.ev_op.entry_count = 1;
  Status s = c_.modify_ev_profile(k.profile, a, kEvpAttrEvOp);
  if (!s) {
    *suppressed = s.error().message();
    return false;
  }
  return true;
}

void Policy::on_event(const EvEvent& e, ctl::Time now) {
  uint32_t wire = 0;
  bool found = false;
  for (const auto& x : c_.ev_entries(e.profile_id))
    if (x.populated && x.port == e.ev.port &&
        std::memcmp(x.val, e.ev.val.data(), codec::kEvMaxBytes) == 0) {
      wire = x.wire;
      found = true;
      break;
    }
  if (!found) wire = codec::ev_to_u32(e.ev.val, codec::EvFmtMode::kStev);
  EvTrack& t = ev_[Key{e.profile_id, wire, e.ev.port}];
  if (e.state == kEvAssumedBad) {
    if (!t.bad_since) t.bad_since = now;
  } else if (e.state == kEvGood) {
    t.bad_since = 0;
    t.suppress_logged = false;
  }
}

void Policy::on_counters(const EvStatList& stats, ctl::Time now) {
  if (!cfg_.enabled) return;
  struct Sum {
    uint64_t tx = 0, lost = 0, trims = 0, rtt_sum = 0, rtt_samples = 0;
  };
  std::map<Key, Sum> sum;
  for (const auto& [k, v] : stats) {
    Sum& s = sum[Key{k.profile_id, k.wire, k.port}];
    s.tx += v.tx_pkts;
    s.lost += v.lost;
    s.trims += v.trims;
    s.rtt_sum += v.rtt_sum_ns;
    s.rtt_samples += v.rtt_samples;
  }
  // RTT of each EV over this interval: only EVs with new samples. A last
  // sample that is not renewed (an EV that no longer carries traffic) is no
  // evidence about the path now.
  std::map<Key, uint64_t> rtt;
  for (const auto& [k, s] : sum) {
    auto it = ev_.find(k);
    if (it == ev_.end() || !it->second.have_snapshot) continue;
    const EvTrack& t = it->second;
    if (s.rtt_samples > t.rtt_samples && s.rtt_sum >= t.rtt_sum)
      rtt[k] = (s.rtt_sum - t.rtt_sum) / (s.rtt_samples - t.rtt_samples);
  }
  std::map<uint8_t, std::vector<uint64_t>> rtts;
  for (const auto& [k, r] : rtt) rtts[k.port].push_back(r);
  std::map<uint8_t, uint64_t> median;
  for (auto& [port, v] : rtts) {
    if (v.size() < 3) continue;
    std::nth_element(v.begin(), v.begin() + long(v.size() / 2), v.end());
    median[port] = v[v.size() / 2];
  }
  for (const auto& [k, s] : sum) {
    EvTrack& t = ev_[k];
    if (!t.have_snapshot || s.tx < t.tx || s.lost < t.lost || s.trims < t.trims ||
        s.rtt_samples < t.rtt_samples) {
      t.tx = s.tx, t.lost = s.lost, t.trims = s.trims;
      t.rtt_sum = s.rtt_sum, t.rtt_samples = s.rtt_samples;
      t.have_snapshot = true;
      continue;
    }
    t.rtt_sum = s.rtt_sum, t.rtt_samples = s.rtt_samples;
    const uint64_t dtx = s.tx - t.tx, dl = s.lost - t.lost, dt = s.trims - t.trims;
    std::string why;
    bool verdict = false;
    if (dtx >= cfg_.min_packets) {
      verdict = true;
      t.tx = s.tx, t.lost = s.lost, t.trims = s.trims;
      double lr = double(dl) / double(dtx), tr = double(dt) / double(dtx);
      MRCD_DEBUG("policy: profile %llu ev 0x%08x port %u: %llu sent, %llu lost, %llu trimmed",
                 (unsigned long long)k.profile, k.wire, k.port, (unsigned long long)dtx,
                 (unsigned long long)dl, (unsigned long long)dt);
      if (lr >= cfg_.loss_threshold)
        why = "loss " + pct(lr) + " (" + std::to_string(dl) + " of " + std::to_string(dtx) +
              " packets)";
      else if (tr >= cfg_.trim_threshold)
        why = "trims " + pct(tr) + " (" + std::to_string(dt) + " of " + std::to_string(dtx) +
              " packets)";
    }
    auto m = median.find(k.port);
    auto r = rtt.find(k);
    if (why.empty() && m != median.end() && r != rtt.end()) {
      verdict = true;
      if (double(r->second) > cfg_.rtt_factor * double(m->second))
        why = "RTT " + std::to_string(r->second) + " ns > " + std::to_string(cfg_.rtt_factor) +
              " x plane median " + std::to_string(m->second) + " ns";
    }
    if (!verdict) continue;  // no evidence this interval: keep the count
    if (why.empty()) {
      t.degraded = 0;
      t.suppress_logged = false;
      continue;
    }
    t.degraded++;
    if (t.denied_by_us || t.degraded < cfg_.bad_intervals) continue;
    deny_ev(k, t, why + ", degraded " + std::to_string(t.degraded) + " intervals in a row", now);
    if (!t.denied_by_us) t.degraded = 0;
  }
}

void Policy::on_probe(const PolicyProbe& p, bool ok, uint32_t rtt_ns, ctl::Time now) {
  (void)rtt_ns;
  (void)now;
  if (!p.profile) return;
  const Key k{p.profile, p.wire, p.port};
  EvTrack& t = ev_[k];
  if (t.denied_by_us) t.good_probes = ok ? t.good_probes + 1 : 0;
  // Judged when the plane's round is complete (on_plane_round).
  round_[p.port].push_back({k, ok});
}

void Policy::on_plane_round(uint8_t port, bool any_ok, ctl::Time now) {
  std::vector<std::pair<Key, bool>> probes;
  if (auto it = round_.find(port); it != round_.end()) {
    probes = std::move(it->second);
    round_.erase(it);
  }
  if (!cfg_.enabled) return;
  PlaneTrack& pt = planes_[port];
  // Path loss of single EVs: a probe lost while other probes of the same
  // plane were answered in the same round says the EV's path drops packets
  // (a round with nothing answered is the plane's business, below).
  const uint32_t win = std::min<uint32_t>(cfg_.probe_loss_window, 64);
  if (cfg_.probe_loss_threshold > 0 && win && !pt.denied) {
    for (const auto& [k, ok] : probes) {
      if (!ok && !any_ok) continue;
      EvTrack& t = ev_[k];
      if (t.denied_by_us) continue;  // its probes count toward the restore
      t.probe_bits = (t.probe_bits << 1) | (ok ? 0u : 1u);
      if (win < 64) t.probe_bits &= (1ull << win) - 1;
      t.probe_n = std::min(t.probe_n + 1, win);
      if (t.probe_n < win) continue;
      const uint32_t lost = uint32_t(__builtin_popcountll(t.probe_bits));
      if (double(lost) < cfg_.probe_loss_threshold * double(win)) {
        t.suppress_logged = false;
        continue;
      }
      deny_ev(k, t,
              "probe loss " + pct(double(lost) / double(win)) + " (" + std::to_string(lost) +
                  " of the last " + std::to_string(win) +
                  " EV probes unanswered while the plane answered)",
              now);
      if (!t.denied_by_us) t.probe_bits = 0, t.probe_n = 0;  // suppressed: a new window
    }
  }
  if (!pt.denied) {
    pt.failed_rounds = any_ok ? 0 : pt.failed_rounds + 1;
    if (any_ok) pt.suppress_logged = false;
    if (pt.failed_rounds < cfg_.plane_fail_rounds) return;
    uint32_t n = 0;
    std::string sup;
    for (uint64_t id : c_.ev_profile_ids()) {
      std::vector<uint32_t> wires;
      for (const auto& e : c_.ev_entries(id))
        if (e.populated && e.port == port && e.state != kEvDenied &&
            std::find(wires.begin(), wires.end(), e.wire) == wires.end())
          wires.push_back(e.wire);
      for (uint32_t w : wires) {
        Key k{id, w, port};
        std::string why;
        if (set_state(k, kEvDenied, "plane", now, &why)) {
          pt.denied_evs.push_back(k);
          n++;
        } else if (sup.empty()) {
          sup = why;
        }
      }
    }
    const std::string why =
        "every probe on the plane failed for " + std::to_string(pt.failed_rounds) + " rounds";
    if (n == 0) {
      // Nothing could be denied (the floor): say so once, keep watching.
      pt.failed_rounds = 0;
      if (!pt.suppress_logged && !sup.empty()) {
        Decision d{
            now, "suppressed", 0, {}, 0, port, "plane deny (" + why + ") suppressed: " + sup};
        d.ev.port = port;
        decide(d);
        pt.suppress_logged = true;
      }
      return;
    }
    pt.denied = true;
    pt.good_rounds = 0;
    Decision d{now,
               "deny_plane",
               0,
               {},
               0,
               port,
               why + "; " + std::to_string(n) + " EVs denied" +
                   (sup.empty() ? "" : " (some kept: " + sup + ")")};
    d.ev.port = port;
    decide(d);
    return;
  }
  pt.good_rounds = any_ok ? pt.good_rounds + 1 : 0;
  if (pt.good_rounds < cfg_.plane_restore_rounds) return;
  uint32_t n = 0;
  for (const Key& k : pt.denied_evs) {
    std::string why;
    auto it = ev_.find(k);
    if (it != ev_.end() && it->second.denied_by_us) continue;  // denied on its own account too
    if (set_state(k, kEvGood, "plane", now, &why)) n++;
  }
  pt = PlaneTrack{};
  Decision d{now,
             "allow_plane",
             0,
             {},
             0,
             port,
             std::to_string(cfg_.plane_restore_rounds) + " probe rounds answered; " +
                 std::to_string(n) + " EVs allowed"};
  d.ev.port = port;
  decide(d);
}

void Policy::evaluate(ctl::Time now) {
  if (!cfg_.enabled) return;
  for (auto& [k, t] : ev_) {
    // Events are stamped when they are ingested, which may be after the
    // `now` of this evaluation: a hold that has not started yet is 0.
    const ctl::Time held = t.bad_since && now > t.bad_since ? now - t.bad_since : 0;
    if (!t.denied_by_us && t.bad_since && cfg_.bad_hold_ms &&
        held >= ctl::Time(cfg_.bad_hold_ms) * 1'000'000ull) {
      deny_ev(k, t, "held ASSUMED_BAD by a QP for " + std::to_string(held / 1'000'000) + " ms",
              now);
      // Denied: no data-path state any more; suppressed (or denied by
      // someone else): try again after another hold period.
      t.bad_since = t.denied_by_us ? 0 : now;
      continue;
    }
    if (t.denied_by_us && t.good_probes >= cfg_.restore_probes && now >= t.allow_after) {
      Decision d{now,
                 "allow_ev",
                 k.profile,
                 ev_of(k),
                 k.wire,
                 k.port,
                 std::to_string(t.good_probes) + " consecutive probes answered"};
      std::string sup;
      const mrc_ctl_evp* p = c_.ev_record(k.profile);
      bool still_denied = false;
      for (const auto& e : c_.ev_entries(k.profile))
        still_denied |= e.populated && e.wire == k.wire && e.port == k.port && e.state == kEvDenied;
      t.denied_by_us = false;
      t.good_probes = 0;
      t.degraded = 0;
      t.probe_bits = 0, t.probe_n = 0;    // judged afresh once back in use
      if (!p || !still_denied) continue;  // someone else allowed (or removed) it
      if (set_state(k, kEvGood, d.reason, now, &sup)) decide(d);
    }
  }
}

std::vector<PolicyProbe> Policy::plan(
    const std::vector<std::pair<uint8_t, std::vector<codec::IpAddr>>>& planes) {
  std::vector<PolicyProbe> out;
  for (const auto& [port, peers] : planes) {
    if (peers.empty()) continue;
    // EVs this policy denied: probe them so they can come back.
    for (const auto& [k, t] : ev_) {
      if (!t.denied_by_us || k.port != port) continue;
      const mrc_ctl_evp* p = c_.ev_record(k.profile);
      out.push_back(
          {k.profile, k.wire, port, p && p->fmt_mode ? p->fmt_mode : uint32_t(kFmtStev), peers[0]});
    }
    // Plane health: a few EVs of the plane toward every peer.
    std::vector<std::pair<uint64_t, const mrc_ctl_ev_entry*>> cand;
    for (uint64_t id : c_.ev_profile_ids())
      for (const auto& e : c_.ev_entries(id))
        if (e.populated && e.port == port) cand.push_back({id, &e});
    // (No EV twice in a round: at most every EV of the plane once.)
    const uint32_t n = cand.empty()
                           ? probe_.evs_per_plane
                           : std::min<uint32_t>(probe_.evs_per_plane, uint32_t(cand.size()));
    for (const codec::IpAddr& dst : peers) {
      for (uint32_t i = 0; i < n; i++) {
        PolicyProbe pp;
        pp.port = port;
        pp.dst = dst;
        if (!cand.empty()) {
          const auto& [id, e] = cand[(rr_ + i) % cand.size()];
          const mrc_ctl_evp* p = c_.ev_record(id);
          pp.profile = id;  // its outcome is evidence about this EV
          pp.wire = e->wire;
          pp.fmt_mode = p && p->fmt_mode ? p->fmt_mode : uint32_t(kFmtStev);
        } else {
          pp.wire = 0xc000u | ((rr_ + i) * 0x9e37u & 0x3fffu);
        }
        out.push_back(pp);
      }
    }
  }
  rr_ += probe_.evs_per_plane;
  return out;
}

}  // namespace mrc::mrcd
