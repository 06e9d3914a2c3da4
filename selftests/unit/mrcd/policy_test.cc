// The reroute policy over the controller model: deny after sustained
// degradation (not before: hysteresis), restore after consecutive probe
// successes with back-off, whole planes, the ev_min_active floor, and an
// operator's DENY left alone.
#include <gtest/gtest.h>

#include "mrcd/policy.hpp"
#include "support/ctl_fixture.hpp"

namespace mrc::testing {
namespace {

using mrc::mrcd::Decision;
using mrc::mrcd::Policy;
using mrc::mrcd::PolicyCfg;
using mrc::mrcd::PolicyProbe;
using mrc::mrcd::ProbeCfg;

constexpr Time kMs = 1'000'000;

class PolicyTest : public CtlTest {
 protected:
  void SetUp() override {
    CtlTest::SetUp();
    ASSERT_TRUE(fmt(13, {16, 16}));
    // 8 EVs, two per port 1..4; min_active 5.
    ASSERT_TRUE(evp_offline(5, kEvModeExp, 13, 8,
                            {{16, 0, 0, 0xffff, 0xffff}, {16, 0, 0, 0xffff, 0xffff}}, 5));
    std::vector<Ev> evs;
    for (uint8_t p = 1; p <= 4; p++)
      for (uint8_t i = 1; i <= 2; i++) evs.push_back(ev({0, p, 0, i}, p));
    ASSERT_TRUE(populate(5, evs));
    ASSERT_TRUE(set_state(5, kProfileOnline));
    cfg.bad_intervals = 3;
    cfg.min_packets = 100;
    cfg.loss_threshold = 0.05;
    cfg.restore_probes = 3;
    cfg.restore_backoff_ms = 100;
    cfg.bad_hold_ms = 500;
    cfg.plane_fail_rounds = 2;
    cfg.plane_restore_rounds = 2;
    cfg.max_denied_fraction = 0.5;
    policy = std::make_unique<Policy>(cfg, ProbeCfg{}, ctl);
    policy->on_decision = [this](const Decision& d) { decisions.push_back(d); };
    ctl.set_hooks({nullptr, nullptr, [this](const EvEvent& e) { policy->on_event(e, now); }});
  }
  uint32_t wire(uint8_t p, uint8_t i) { return uint32_t(p) << 16 | i; }
  // Cumulative counters of one process for every EV: 1000 packets sent per
  // round, `lost` = cumulative losses of some EVs.
  void counters(uint64_t round, std::map<uint32_t, uint64_t> lost) {
    EvStatList l;
    for (uint8_t p = 1; p <= 4; p++)
      for (uint8_t i = 1; i <= 2; i++) {
        mrc_ctl_evstat_key k{};
        k.profile_id = 5;
        k.pid = 100;
        k.wire = wire(p, i);
        k.port = p;
        mrc_ctl_evstat v{};
        v.tx_pkts = 1000 * round;
        v.lost = lost.count(k.wire) ? lost[k.wire] : 0;
        l.push_back({k, v});
      }
    policy->on_counters(l, now);
  }
  uint32_t state(uint8_t p, uint8_t i) { return state_of(5, ev({0, p, 0, i}, p)); }
  PolicyProbe probe_of(uint8_t p, uint8_t i) {
    PolicyProbe pp;
    pp.profile = 5;
    pp.wire = wire(p, i);
    pp.port = p;
    return pp;
  }

  PolicyCfg cfg;
  std::unique_ptr<Policy> policy;
  std::vector<Decision> decisions;
  Time now = 1'000'000'000;
};

TEST_F(PolicyTest, DeniesOnlyAfterSustainedLossAndRestoresAfterProbes) {
  const uint32_t bad = wire(2, 1);
  counters(1, {});  // first snapshot
  for (uint64_t r = 2; r <= 3; r++) {
    now += 1000 * kMs;
    counters(r, {{bad, 80 * (r - 1)}});  // 8% loss per interval
  }
  EXPECT_EQ(state(2, 1), kEvGood) << "two degraded intervals are below bad_intervals";
  // A clean interval resets the count (hysteresis).
  now += 1000 * kMs;
  counters(4, {{bad, 160}});
  for (uint64_t r = 5; r <= 6; r++) {
    now += 1000 * kMs;
    counters(r, {{bad, 160 + 80 * (r - 4)}});
  }
  EXPECT_EQ(state(2, 1), kEvGood);
  now += 1000 * kMs;
  counters(7, {{bad, 160 + 80 * 3}});
  EXPECT_EQ(state(2, 1), kEvDenied);
  ASSERT_EQ(decisions.size(), 1u);
  EXPECT_EQ(decisions[0].action, "deny_ev");
  EXPECT_NE(decisions[0].reason.find("loss 8.0%"), std::string::npos) << decisions[0].reason;
  EXPECT_NE(decisions[0].reason.find("3 intervals"), std::string::npos);
  // The round plans a probe of it.
  auto plan = policy->plan({{2, {codec::IpAddr::v4(198, 18, 2, 2)}}});
  bool planned = false;
  for (const auto& p : plan) planned |= p.profile == 5 && p.wire == bad;
  EXPECT_TRUE(planned);
  // Two successes, a failure, three successes: allowed after the last, not before.
  policy->on_probe(probe_of(2, 1), true, 1000, now);
  policy->on_probe(probe_of(2, 1), true, 1000, now);
  policy->on_probe(probe_of(2, 1), false, 0, now);
  policy->on_probe(probe_of(2, 1), true, 1000, now);
  policy->on_probe(probe_of(2, 1), true, 1000, now);
  now += 1000 * kMs;
  policy->evaluate(now);
  EXPECT_EQ(state(2, 1), kEvDenied);
  policy->on_probe(probe_of(2, 1), true, 1000, now);
  policy->evaluate(now);
  EXPECT_EQ(state(2, 1), kEvGood);
  ASSERT_EQ(decisions.size(), 2u);
  EXPECT_EQ(decisions[1].action, "allow_ev");
}

TEST_F(PolicyTest, EvHeldAssumedBadIsDeniedAfterTheHoldTime) {
  alive.insert(100);
  mrc_ctl_ev_report r{};
  r.profile_id = 5;
  r.pid = 100;
  r.qpn = 1;
  r.wire = wire(3, 2);
  r.port = 3;
  r.to = MRC_CTL_ENGINE_ASSUMED_BAD;
  ASSERT_TRUE(store.record_push(r));
  ASSERT_TRUE(ctl.ingest_reports());
  policy->evaluate(now + 400 * kMs);
  EXPECT_EQ(state(3, 2), kEvAssumedBad);
  policy->evaluate(now + 600 * kMs);
  EXPECT_EQ(state(3, 2), kEvDenied);
  ASSERT_EQ(decisions.size(), 1u);
  EXPECT_NE(decisions[0].reason.find("held ASSUMED_BAD"), std::string::npos);
}

TEST_F(PolicyTest, TheMinActiveFloorSuppressesDenies) {
  // min_active 5 of 8: three denies are possible, the fourth is suppressed.
  counters(1, {});
  for (uint64_t r = 2; r <= 4; r++) {
    const uint64_t l = 200 * (r - 1);  // 20% per interval
    now += 1000 * kMs;
    counters(r, {{wire(1, 1), l}, {wire(1, 2), l}, {wire(2, 1), l}, {wire(2, 2), l}});
  }
  int denied = 0;
  for (uint8_t p = 1; p <= 2; p++)
    for (uint8_t i = 1; i <= 2; i++) denied += state(p, i) == kEvDenied;
  EXPECT_EQ(denied, 3);
  int suppressed = 0;
  for (const auto& d : decisions) suppressed += d.action == "suppressed";
  EXPECT_EQ(suppressed, 1);
  EXPECT_NE(decisions.back().reason.find("ev_min_active floor"), std::string::npos)
      << decisions.back().reason;
}

TEST_F(PolicyTest, OperatorDenialsAreNotUndone) {
  std::vector<EvOpEntry> m = {{ev({0, 4, 0, 1}, 4), {}, kEvDenied, 0}};
  ASSERT_TRUE(ev_op(5, kEvOpModifyEvState, m));
  for (int k = 0; k < 10; k++) policy->on_probe(probe_of(4, 1), true, 100, now);
  policy->evaluate(now + 10'000 * kMs);
  EXPECT_EQ(state(4, 1), kEvDenied);
  EXPECT_TRUE(decisions.empty());
}

TEST_F(PolicyTest, AFailingPlaneIsDeniedAndComesBack) {
  cfg.max_denied_fraction = 1.0;
  ASSERT_TRUE(set_state(5, kProfileOffline));
  EvProfileAttr a;
  a.ev_min_active = 2;
  ASSERT_TRUE(ctl.modify_ev_profile(5, a, kEvpAttrMinActive));
  ASSERT_TRUE(set_state(5, kProfileOnline));
  policy = std::make_unique<Policy>(cfg, ProbeCfg{}, ctl);
  policy->on_decision = [this](const Decision& d) { decisions.push_back(d); };
  policy->on_plane_round(4, false, now);
  EXPECT_FALSE(policy->plane_denied(4));
  policy->on_plane_round(4, true, now);  // an answered round resets
  policy->on_plane_round(4, false, now);
  policy->on_plane_round(4, false, now);
  EXPECT_TRUE(policy->plane_denied(4));
  EXPECT_EQ(state(4, 1), kEvDenied);
  EXPECT_EQ(state(4, 2), kEvDenied);
  EXPECT_EQ(state(3, 1), kEvGood);
  ASSERT_FALSE(decisions.empty());
  EXPECT_EQ(decisions.back().action, "deny_plane");
  EXPECT_NE(decisions.back().reason.find("2 EVs denied"), std::string::npos)
      << decisions.back().reason;
  policy->on_plane_round(4, true, now);
  EXPECT_EQ(state(4, 1), kEvDenied);
  policy->on_plane_round(4, true, now);
  EXPECT_EQ(state(4, 1), kEvGood);
  EXPECT_EQ(state(4, 2), kEvGood);
  EXPECT_EQ(decisions.back().action, "allow_plane");
  EXPECT_FALSE(policy->plane_denied(4));
}

TEST_F(PolicyTest, ARedeniedEvWaitsLonger) {
  const uint32_t bad = wire(1, 2);
  uint64_t round = 1;
  counters(round++, {});
  auto degrade = [&] {
    for (int k = 0; k < 3; k++) {
      now += 1000 * kMs;
      counters(round, {{bad, 100 * round}});  // 10% of 1000 per interval
      round++;
    }
  };
  degrade();
  ASSERT_EQ(state(1, 2), kEvDenied);
  for (int k = 0; k < 3; k++) policy->on_probe(probe_of(1, 2), true, 1, now);
  policy->evaluate(now + 150 * kMs);  // back-off 100 ms
  ASSERT_EQ(state(1, 2), kEvGood);
  degrade();
  ASSERT_EQ(state(1, 2), kEvDenied);
  for (int k = 0; k < 3; k++) policy->on_probe(probe_of(1, 2), true, 1, now);
  policy->evaluate(now + 150 * kMs);
  EXPECT_EQ(state(1, 2), kEvDenied) << "second back-off is 200 ms";
  policy->evaluate(now + 250 * kMs);
  EXPECT_EQ(state(1, 2), kEvGood);
}

// Regression: events are stamped when mrcd ingests them, after the `now` its
// tick evaluates with; the hold must not wrap around (it used to read
// "held ASSUMED_BAD by a QP for 18446744073709 ms" and deny at once).
TEST_F(PolicyTest, AnEventStampedAfterTheEvaluationIsNotHeldYet) {
  alive.insert(100);
  mrc_ctl_ev_report r{};
  r.profile_id = 5;
  r.pid = 100;
  r.qpn = 1;
  r.wire = wire(3, 2);
  r.port = 3;
  r.to = MRC_CTL_ENGINE_ASSUMED_BAD;
  ASSERT_TRUE(store.record_push(r));
  ASSERT_TRUE(ctl.ingest_reports());  // on_event(now)
  policy->evaluate(now - 1);          // the tick's earlier clock
  policy->evaluate(now);
  policy->evaluate(now + 499 * kMs);
  EXPECT_EQ(state(3, 2), kEvAssumedBad);
  EXPECT_TRUE(decisions.empty());
  policy->evaluate(now + 500 * kMs);
  EXPECT_EQ(state(3, 2), kEvDenied);
}

// An EV's RTT counts only when it has new samples: a last RTT that is never
// renewed (the EV stopped carrying traffic after one slow sample) does not
// make it an outlier interval after interval.
TEST_F(PolicyTest, StaleRttIsNoEvidence) {
  auto rtt_counters = [&](uint64_t round, uint64_t slow_samples) {
    EvStatList l;
    for (uint8_t p = 1; p <= 4; p++)
      for (uint8_t i = 1; i <= 2; i++) {
        mrc_ctl_evstat_key k{};
        k.profile_id = 5;
        k.pid = 100;
        k.wire = wire(p, i);
        k.port = p;
        mrc_ctl_evstat v{};
        const bool slow = p == 1 && i == 1;
        // Fast EVs: 100 samples of 100 us per round. The slow one: 30 ms
        // samples, `slow_samples` in total (no longer growing = stale).
        v.rtt_samples = slow ? slow_samples : 100 * round;
        v.rtt_sum_ns = slow ? slow_samples * 30'000'000 : 100 * round * 100'000;
        v.rtt_last_ns = slow ? 30'000'000 : 100'000;
        l.push_back({k, v});
      }
    // The plane needs three EVs with fresh samples for a median: port 1 has
    // two, so give it a third reporter of the fast EV under another pid.
    mrc_ctl_evstat_key k{};
    k.profile_id = 5;
    k.pid = 101;
    k.wire = wire(1, 3);
    k.port = 1;
    mrc_ctl_evstat v{};
    v.rtt_samples = 100 * round;
    v.rtt_sum_ns = 100 * round * 100'000;
    l.push_back({k, v});
    policy->on_counters(l, now);
  };
  rtt_counters(1, 1);
  for (uint64_t r = 2; r <= 8; r++) {
    now += 1000 * kMs;
    rtt_counters(r, 1);  // the slow sample is never renewed
  }
  EXPECT_EQ(state(1, 1), kEvGood);
  EXPECT_TRUE(decisions.empty());
  // Fresh slow samples, interval after interval: an outlier.
  for (uint64_t r = 9; r <= 11; r++) {
    now += 1000 * kMs;
    rtt_counters(r, r);
  }
  EXPECT_EQ(state(1, 1), kEvDenied);
  ASSERT_EQ(decisions.size(), 1u);
  EXPECT_NE(decisions[0].reason.find("RTT 30000000 ns"), std::string::npos) << decisions[0].reason;
}

// An EV carrying fewer than min_packets per interval (a backup the engine
// promotes for a moment, retired at its first loss) is judged once its
// packets add up: the snapshot only advances with a verdict.
TEST_F(PolicyTest, FewPacketsPerIntervalAddUpToAVerdict) {
  const uint32_t bad = wire(2, 2);
  auto few = [&](uint64_t round) {
    EvStatList l;
    mrc_ctl_evstat_key k{};
    k.profile_id = 5;
    k.pid = 100;
    k.wire = bad;
    k.port = 2;
    mrc_ctl_evstat v{};
    v.tx_pkts = 30 * round;  // 30 packets per interval, 6 of them lost (20%)
    v.lost = 6 * round;
    l.push_back({k, v});
    policy->on_counters(l, now);
  };
  few(0);
  for (uint64_t r = 1; r <= 11; r++) {
    now += 1000 * kMs;
    few(r);
    // min_packets 100: a verdict every 4th interval (120 packets, 24 lost).
    EXPECT_EQ(state(2, 2), kEvGood) << r;
  }
  now += 1000 * kMs;
  few(12);  // the third verdict
  EXPECT_EQ(state(2, 2), kEvDenied);
  ASSERT_EQ(decisions.size(), 1u);
  EXPECT_NE(decisions[0].reason.find("loss 20.0% (24 of 120 packets)"), std::string::npos)
      << decisions[0].reason;
}

// mrcd's own probes find a lossy path that carries no traffic (the data path
// retired its EVs at the first loss): probes of one EV lost while the other
// EVs of its plane answer, probe_loss_threshold of probe_loss_window.
TEST_F(PolicyTest, EvProbesLostWhileThePlaneAnswersDenyTheEv) {
  cfg.probe_loss_threshold = 0.2;
  cfg.probe_loss_window = 10;
  cfg.restore_backoff_ms = 1000;
  cfg.plane_fail_rounds = 1000;  // keep the plane logic out of this
  policy = std::make_unique<Policy>(cfg, ProbeCfg{}, ctl);
  policy->on_decision = [this](const Decision& d) { decisions.push_back(d); };
  // An operator denied EV (4,1): its lost probes never make it the policy's.
  std::vector<EvOpEntry> m = {{ev({0, 4, 0, 1}, 4), {}, kEvDenied, 0}};
  ASSERT_TRUE(ev_op(5, kEvOpModifyEvState, m));
  auto round = [&](uint8_t port, bool first_ok, bool second_ok) {
    policy->on_probe(probe_of(port, 1), first_ok, 100, now);
    policy->on_probe(probe_of(port, 2), second_ok, 100, now);
    policy->on_plane_round(port, first_ok || second_ok, now);
    now += 100 * kMs;
  };
  // Rounds where nothing of plane 2 answered are no evidence about one EV.
  for (int r = 0; r < 20; r++) round(2, false, false);
  EXPECT_EQ(state(2, 1), kEvGood);
  EXPECT_TRUE(decisions.empty());
  // One lost probe in ten: below 20%.
  for (int r = 0; r < 10; r++) round(2, r != 3, true);
  EXPECT_EQ(state(2, 1), kEvGood);
  // Another one: two of the last ten (r = 3's and this one), denied.
  round(2, false, true);
  ASSERT_EQ(decisions.size(), 1u);
  EXPECT_EQ(state(2, 1), kEvDenied);
  EXPECT_EQ(decisions[0].action, "deny_ev");
  EXPECT_NE(decisions[0].reason.find("probe loss 20.0% (2 of the last 10 EV probes"),
            std::string::npos)
      << decisions[0].reason;
  EXPECT_EQ(state(2, 2), kEvGood);
  // Its probes now count toward the restore: back-off first, then 3 in a row.
  for (int r = 0; r < 3; r++) round(2, true, true);
  policy->evaluate(now);
  EXPECT_EQ(state(2, 1), kEvDenied) << "back-off 1 s";
  now += 1000 * kMs;
  policy->evaluate(now);
  EXPECT_EQ(state(2, 1), kEvGood);
  EXPECT_EQ(decisions.back().action, "allow_ev");
  // The operator's EV: every probe lost while its plane answers, still the operator's.
  for (int r = 0; r < 30; r++) round(4, false, true);
  EXPECT_EQ(state(4, 1), kEvDenied);
  policy->evaluate(now + 60'000 * kMs);
  EXPECT_EQ(state(4, 1), kEvDenied);
  for (const auto& d : decisions) EXPECT_NE(d.port, 4) << d.action << " " << d.reason;
}

// The rotating plane-health sample names the EV it probes (its outcome is
// evidence about that EV) and never probes an EV twice in a round.
TEST_F(PolicyTest, PlanProbesEachEvOfAPlaneAtMostOncePerRound) {
  ProbeCfg pc;
  pc.evs_per_plane = 8;  // more than the two EVs of the plane
  policy = std::make_unique<Policy>(cfg, pc, ctl);
  auto plan = policy->plan({{3, {codec::IpAddr::v4(198, 18, 3, 2)}}});
  ASSERT_EQ(plan.size(), 2u);
  std::set<uint32_t> wires;
  for (const auto& p : plan) {
    EXPECT_EQ(p.profile, 5u);
    EXPECT_EQ(p.port, 3);
    wires.insert(p.wire);
  }
  EXPECT_EQ(wires, (std::set<uint32_t>{wire(3, 1), wire(3, 2)}));
}

}  // namespace
}  // namespace mrc::testing
