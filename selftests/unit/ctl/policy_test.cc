// The reroute policy over the controller model: deny after sustained
// degradation (not before: hysteresis), restore after consecutive probe
// successes with back-off, whole planes, the ev_min_active floor, and an
// operator's DENY left alone.
#include <gtest/gtest.h>

#include "ctl_fixture.hpp"
#include "mrcd/policy.hpp"

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

}  // namespace
}  // namespace mrc::testing
