// The application side: Client resolution of profiles and policy, and
// EngineSync driving real engines over the two-host harness. Conformance
// behaviour 22 (an administratively disabled port is reported down and no
// EV on it is used) and the DENIED path end to end.
#include <gtest/gtest.h>

#include <cstring>

#include "ctl/client.hpp"
#include "engine/harness.hpp"
#include "support/ctl_fixture.hpp"

namespace mrc::testing {
namespace {

constexpr uint64_t kFmt = 13, kEvp = 5, kCc = 9;

// EVs: port p (1-based), index i -> wire 0x00A0_0000 | (p << 8) | i (low 16
// bits unique, so the UDP source port identifies the EV on IPv4).
Ev wire_ev(uint8_t p, uint8_t i) { return ev({0x00, 0xa0, p, i}, p); }
uint32_t wire_of(uint8_t p, uint8_t i) { return 0x00a00000u | uint32_t(p) << 8 | i; }

class ClientTest : public CtlTest {
 protected:
  void SetUp() override {
    CtlTest::SetUp();
    // Two planes for the harness (ports 1 and 2).
    std::vector<PortInfo> ports = {{1, "p1", 11, true, MRC_CTL_XDP_NATIVE},
                                   {2, "p2", 12, true, MRC_CTL_XDP_NATIVE}};
    ASSERT_TRUE(ctl.configure_ports(ports));
    ASSERT_TRUE(fmt(kFmt, {16, 16}));
    ASSERT_TRUE(evp_offline(kEvp, kEvModeExp, kFmt, 8,
                            {{16, 0, 0, 0xffff, 0xffff}, {16, 0, 0, 0xffff, 0xffff}}, 2));
    std::vector<Ev> evs;
    for (uint8_t p = 1; p <= 2; p++)
      for (uint8_t i = 0; i < 4; i++) evs.push_back(wire_ev(p, i));
    ASSERT_TRUE(populate(kEvp, evs));
    CcProfileAttr c;
    c.profile_state = kProfileOffline;
    c.algorithm = kAlgNscc;
    c.cc_config = NsccCfg{};
    c.cc_config->target_delay = 12000;
    ASSERT_TRUE(ctl.modify_cc_profile(kCc, c, kCcAttrState | kCcAttrAlgorithm | kCcAttrConfig));
  }
  void online() {
    ASSERT_TRUE(set_state(kEvp, kProfileOnline));
    CcProfileAttr c;
    c.profile_state = kProfileOnline;
    ASSERT_TRUE(ctl.modify_cc_profile(kCc, c, kCcAttrState));
  }
  Status deny(const Ev& e, bool d) {
    std::vector<EvOpEntry> m = {{e, {}, d ? uint32_t(kEvDenied) : uint32_t(kEvGood), 0}};
    return ev_op(kEvp, kEvOpModifyEvState, m);
  }
};

TEST_F(ClientTest, ResolvesOnlyOnlineProfiles) {
  Client c(store);
  EXPECT_EQ(c.ev_profile(kEvp).error().code, EINVAL);  // OFFLINE
  EXPECT_EQ(c.cc_profile(kCc).error().code, EINVAL);
  EXPECT_EQ(c.ev_profile(77).error().code, EINVAL);
  online();
  auto r = c.ev_profile(kEvp);
  ASSERT_TRUE(r) << r.error().message();
  const core::EvProfile& p = r->profile;
  EXPECT_EQ(p.mode, core::EvMode::kExplicit);
  EXPECT_EQ(p.fmt, codec::EvFmtMode::kStev);
  EXPECT_EQ(p.ev_min_active, 2u);
  ASSERT_EQ(p.evs.size(), 8u);
  EXPECT_EQ(p.evs[0].ev, wire_of(1, 0));
  EXPECT_EQ(p.evs[0].port, 1);
  EXPECT_EQ(p.evs[7].ev, wire_of(2, 3));
  EXPECT_EQ(p.evs[7].port, 2);
  auto cc = c.cc_profile(kCc);
  ASSERT_TRUE(cc);
  EXPECT_TRUE(cc->enabled);
  EXPECT_EQ(cc->nscc.target_delay, 12000u);
  // Changes are visible through the generation and the profile's counter.
  const uint64_t g = c.generation(), ch = c.ev_profile_changes(kEvp);
  ASSERT_TRUE(deny(wire_ev(1, 2), true));
  EXPECT_GT(c.generation(), g);
  EXPECT_GT(c.ev_profile_changes(kEvp), ch);
  r = c.ev_profile(kEvp);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->profile.evs[2].denied);
  EXPECT_FALSE(r->profile.evs[3].denied);
}

TEST_F(ClientTest, Conf22_AdminDownPortIsReportedDown) {
  Client c(store);
  EXPECT_TRUE(c.port_usable(1));
  EXPECT_TRUE(c.port_usable(2));
  EXPECT_FALSE(c.port_usable(3));  // not configured
  PortAttr a;
  a.port_admin_state = kPortAdminDisabled;
  ASSERT_TRUE(ctl.modify_port(2, a, kPortAttrAdminState));
  EXPECT_FALSE(c.port_usable(2));
  EXPECT_EQ(c.port_down_mask(), 1u << 2);
  auto ports = c.ports();
  ASSERT_EQ(ports.size(), 2u);
  EXPECT_FALSE(ports[1].admin_up);
  EXPECT_FALSE(ports[1].usable());
  EXPECT_EQ(ports[1].ifname, "p2");
}

// Two engines over two planes, kept in step with the controller by EngineSync.
struct Synced {
  Pair pair;
  Client client;
  std::unique_ptr<EngineSync> sync[2];
  uint64_t data_frames[2][3] = {};  // from host, port
  std::set<uint32_t> sports_seen;
  Synced(Store& s, PairOptions o) : pair(o), client(s) {
    for (int i = 0; i < 2; i++)
      sync[i] = std::make_unique<EngineSync>(client, pair.e(i),
                                             EngineSync::Options{uint32_t(i), 1'000'000});
    pair.hook = [this](int from, uint8_t port, std::vector<uint8_t>& f, Time) {
      codec::Packet p;
      codec::CodecConfig cfg;
      if (codec::parse(f, cfg, p) == codec::ParseError::kOk &&
          codec::is_data_opcode(p.bth.opcode) && from == 0) {
        data_frames[from][port]++;
        sports_seen.insert(p.udp.sport);
      }

      return Hook{};
    };
  }
  void poll() {
    for (int i = 0; i < 2; i++) sync[i]->poll(pair.now);
  }
  // Writes `n` bytes from host 0 to host 1, polling the syncs, and checks the data.
  void transfer(size_t n, uint8_t seed) {
    auto [q0, q1] = qps;
    Buffer src(pair.e(0), pair.h(0).pd, n, seed, core::kAccessLocalWrite);
    Buffer dst(pair.e(1), pair.h(1).pd, n, uint8_t(seed + 1),
               core::kAccessLocalWrite | core::kAccessRemoteWrite);
    core::Sge sg{src.addr(), uint32_t(n), src.mr.lkey};
    core::SendWr wr;
    wr.wr_id = seed;
    wr.sg_list = &sg;
    wr.num_sge = 1;
    wr.remote_addr = dst.addr();
    wr.rkey = dst.mr.rkey;
    ASSERT_TRUE(pair.e(0).post_send(q0, wr));
    std::vector<core::Wc> wcs;
    ASSERT_TRUE(pair.run(
        [&] {
          poll();
          return pair.poll(0, pair.h(0).scq, wcs), !wcs.empty();
        },
        5'000'000'000));
    ASSERT_EQ(wcs[0].status, core::kWcSuccess);
    EXPECT_EQ(0, std::memcmp(src.bytes.data(), dst.bytes.data(), n));
    (void)q1;
  }
  std::pair<uint32_t, uint32_t> qps;
};

PairOptions two_planes() {
  PairOptions o;
  o.planes = 2;
  o.ev_profile = kEvp;
  o.cc_profile = kCc;
  return o;
}

TEST_F(ClientTest, Conf22_AdminDownPortCarriesNoData) {
  online();
  Synced s(store, two_planes());
  for (int i = 0; i < 2; i++) {
    ASSERT_TRUE(s.sync[i]->use_ev_profile(kEvp));
    ASSERT_TRUE(s.sync[i]->use_cc_profile(kCc));
  }
  s.qps = s.pair.connect();
  s.transfer(256 * 1024, 1);
  EXPECT_GT(s.data_frames[0][1], 0u);
  EXPECT_GT(s.data_frames[0][2], 0u);

  PortAttr a;
  a.port_admin_state = kPortAdminDisabled;
  ASSERT_TRUE(ctl.modify_port(2, a, kPortAttrAdminState));
  s.poll();
  EXPECT_FALSE(s.pair.e(0).port_up(2));
  EXPECT_FALSE(s.pair.e(1).port_up(2));
  EXPECT_TRUE(s.pair.e(0).port_up(1));
  const uint64_t on2 = s.data_frames[0][2], on1 = s.data_frames[0][1];
  s.transfer(256 * 1024, 2);
  EXPECT_EQ(s.data_frames[0][2], on2);
  EXPECT_GT(s.data_frames[0][1], on1 + 100);

  a.port_admin_state = kPortAdminEnabled;
  ASSERT_TRUE(ctl.modify_port(2, a, kPortAttrAdminState));
  s.poll();
  EXPECT_TRUE(s.pair.e(0).port_up(2));
  // The engine resumes a plane once the peer learned it is up again; allow
  // a few transfers for that (each checked byte for byte).
  for (uint8_t k = 3; k < 8 && s.data_frames[0][2] == on2; k++) s.transfer(256 * 1024, k);
  EXPECT_GT(s.data_frames[0][2], on2);
  EXPECT_GE(s.sync[0]->counters().port_changes, 2u);
}

TEST_F(ClientTest, DeniedEvsAreLeftAndAllowedEvsReturn) {
  online();
  Synced s(store, two_planes());
  for (int i = 0; i < 2; i++) {
    ASSERT_TRUE(s.sync[i]->use_ev_profile(kEvp));
    ASSERT_TRUE(s.sync[i]->use_cc_profile(kCc));
  }
  s.qps = s.pair.connect();
  s.transfer(128 * 1024, 1);
  // Deny every EV of port 1 but one, and one of port 2.
  for (uint8_t i = 0; i < 3; i++) ASSERT_TRUE(deny(wire_ev(1, i), true));
  ASSERT_TRUE(deny(wire_ev(2, 0), true));
  s.poll();
  EXPECT_EQ(s.sync[0]->counters().denied_changes, 4u);
  s.sports_seen.clear();
  s.transfer(512 * 1024, 2);
  for (uint8_t i = 0; i < 3; i++)
    EXPECT_FALSE(s.sports_seen.count(wire_of(1, i) & 0xffff)) << int(i);
  EXPECT_FALSE(s.sports_seen.count(wire_of(2, 0) & 0xffff));
  EXPECT_TRUE(s.sports_seen.count(wire_of(1, 3) & 0xffff));
  // Allowed again: the engine may use them (they are GOOD, not ASSUMED_BAD).
  for (uint8_t i = 0; i < 3; i++) ASSERT_TRUE(deny(wire_ev(1, i), false));
  s.poll();
  auto evs = s.pair.e(0).qp_evs(s.qps.first);
  ASSERT_TRUE(evs);
  for (const auto& e : *evs) {
    if (e.port == 1) {
      EXPECT_NE(e.state, core::EvState::kDenied);
    }
  }
}

// A controller change the engine applied is published at once (the counters
// as they stood when the change took effect), not a stats_interval later;
// changes closer together than change_publish_gap share one publication.
TEST_F(ClientTest, ChangesArePublishedWhenApplied) {
  online();
  Synced s(store, two_planes());
  s.sync[0] = std::make_unique<EngineSync>(s.client, s.pair.e(0),
                                           EngineSync::Options{0, 60'000'000'000ull, 20'000'000});
  for (int i = 0; i < 2; i++) {
    ASSERT_TRUE(s.sync[i]->use_ev_profile(kEvp));
    ASSERT_TRUE(s.sync[i]->use_cc_profile(kCc));
  }
  s.qps = s.pair.connect();
  s.transfer(256 * 1024, 1);
  const uint64_t pubs = s.sync[0]->counters().publications;
  ASSERT_GE(pubs, 1u);  // the first poll publishes
  auto ev_tx = [&](uint32_t wire, uint8_t port, uint64_t* update_ns) -> uint64_t {
    auto l = store.list_evstats();
    for (const auto& [k, v] : *l)
      if (k.dev == 0 && k.profile_id == kEvp && k.wire == wire && k.port == port) {
        if (update_ns) *update_ns = v.update_ns;
        return v.tx_pkts;
      }
    ADD_FAILURE() << "no report of EV " << wire;
    return 0;
  };
  auto qp_denied = [&]() -> uint32_t {
    auto l = store.list_qps();
    for (const auto& [k, v] : *l)
      if (k.dev == 0) return v.ev_denied;
    return 99;
  };
  // Nothing changed: no publication for a minute of stats_interval.
  s.pair.now += 1'000'000;
  s.poll();
  EXPECT_EQ(s.sync[0]->counters().publications, pubs);
  const uint64_t tx_before = s.pair.e(0).qp_evs(s.qps.first)->at(0).stats.tx_pkts;

  ASSERT_TRUE(deny(wire_ev(1, 0), true));
  s.pair.now += 1'000'000;
  s.poll();
  EXPECT_EQ(s.sync[0]->counters().publications, pubs + 1);
  uint64_t upd = 0;
  EXPECT_EQ(ev_tx(wire_of(1, 0), 1, &upd), tx_before);
  EXPECT_EQ(upd, s.pair.now);
  EXPECT_EQ(qp_denied(), 1u);

  // A second change 1 ms later waits for the gap, then is published.
  ASSERT_TRUE(deny(wire_ev(2, 0), true));
  s.pair.now += 1'000'000;
  s.poll();
  EXPECT_EQ(s.sync[0]->counters().publications, pubs + 1);
  EXPECT_EQ(qp_denied(), 1u);
  s.pair.now += 19'000'000;
  s.poll();
  EXPECT_EQ(s.sync[0]->counters().publications, pubs + 2);
  EXPECT_EQ(qp_denied(), 2u);
  // Traffic after the deny does not touch the denied EVs' counters.
  s.transfer(256 * 1024, 2);
  ASSERT_TRUE(deny(wire_ev(2, 0), false));
  s.pair.now += 20'000'000;
  s.poll();
  EXPECT_EQ(s.sync[0]->counters().publications, pubs + 3);
  EXPECT_EQ(ev_tx(wire_of(1, 0), 1, nullptr), tx_before);
  EXPECT_EQ(qp_denied(), 1u);
}

TEST_F(ClientTest, EngineReportsReachTheController) {
  online();
  Synced s(store, two_planes());
  for (int i = 0; i < 2; i++) {
    ASSERT_TRUE(s.sync[i]->use_ev_profile(kEvp));
    ASSERT_TRUE(s.sync[i]->use_cc_profile(kCc));
  }
  s.qps = s.pair.connect();
  alive.insert(uint32_t(getpid()));
  s.transfer(64 * 1024, 1);
  ASSERT_TRUE(s.sync[0]->publish(s.pair.now));
  ASSERT_TRUE(s.sync[1]->publish(s.pair.now));
  // Both QPs are reported: the profiles are busy now.
  auto qps = store.list_qps();
  ASSERT_TRUE(qps);
  EXPECT_EQ(qps->size(), 2u);
  EXPECT_EQ(ctl.ev_profile_users(kEvp), 2u);
  EXPECT_EQ(set_state(kEvp, kProfileOffline).error().code, EBUSY);
  const auto& [k, r] = (*qps)[0];
  EXPECT_EQ(k.pid, uint32_t(getpid()));
  EXPECT_EQ(r.ev_profile_id, kEvp);
  EXPECT_EQ(r.state, uint32_t(core::QpState::kRts));
  uint64_t tx = 0;
  for (const auto& [kk, rr] : *qps) tx += rr.tx_bytes;
  EXPECT_GE(tx, 64u * 1024);
  auto evs = store.list_evstats();
  ASSERT_TRUE(evs);
  EXPECT_FALSE(evs->empty());

  // An engine EV event goes through the queue to a controller CQ.
  auto cq = *ctl.create_ev_event_cq(8);
  core::EvEvent e;
  e.profile_id = kEvp;
  e.qpn = s.qps.first;
  e.ev = wire_of(2, 1);
  e.port = 2;
  e.from = core::EvState::kGood;
  e.to = core::EvState::kAssumedBad;
  e.reason = core::EvEventReason::kTimeout;
  s.sync[0]->forward({&e, 1});
  ASSERT_TRUE(ctl.ingest_reports());
  std::vector<EvEvent> out(4);
  ASSERT_EQ(cq->poll(out), 1u);
  EXPECT_EQ(out[0].ev, wire_ev(2, 1));
  EXPECT_EQ(out[0].state, kEvAssumedBad);
  EXPECT_EQ(out[0].reason, "timeout");
  EXPECT_EQ(state_of(kEvp, wire_ev(2, 1)), kEvAssumedBad);
  // Counted by reason (mrc_ctl_ev_reports_by_reason_total), a relapse too.
  EXPECT_EQ(ctl.counters().reports_by_reason[size_t(core::EvEventReason::kTimeout)], 1u);
  core::EvEvent rel = e;
  rel.ev = wire_of(2, 2);
  rel.reason = core::EvEventReason::kRelapse;
  s.sync[0]->forward({&rel, 1});
  ASSERT_TRUE(ctl.ingest_reports());
  ASSERT_EQ(cq->poll(out), 1u);
  EXPECT_EQ(out[0].reason, "relapse");
  EXPECT_EQ(ctl.counters().reports_by_reason[size_t(core::EvEventReason::kRelapse)], 1u);

  // Withdrawing removes the reports; the profile is free again.
  s.sync[0]->withdraw();
  s.sync[1]->withdraw();
  EXPECT_EQ(ctl.ev_profile_users(kEvp), 0u);
  EXPECT_TRUE(store.list_evstats()->empty());
}

}  // namespace
}  // namespace mrc::testing
