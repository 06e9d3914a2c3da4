// Simulated network: timing arithmetic, queues, trimming, ECN, random faults,
// ECMP, traffic classes, routing, pools and determinism.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "codec/bytes.hpp"
#include "codec/packet.hpp"
#include "sim/network.hpp"
#include "support/packet_factory.hpp"

namespace mrc::sim {
namespace {

using codec::IpVersion;
using codec::Packet;
using codec::ParseError;
using codec::TrimKind;
using mrc::testing::build_frame;
using mrc::testing::make_packet;

codec::CodecConfig codec_cfg;

struct Rx {
  uint32_t host;
  int port;
  std::vector<uint8_t> frame;
  Time t;
};

// A network with every host attached to one shared receive log.
struct Fixture {
  explicit Fixture(const NetConfig& cfg) : net(cfg) {
    for (uint32_t h = 0; h < cfg.hosts; h++)
      net.attach(h, [this, h](int port, std::span<const uint8_t> f, Time now) {
        rx.push_back({h, port, std::vector<uint8_t>(f.begin(), f.end()), now});
      });
  }
  Network net;
  std::vector<Rx> rx;
};

struct FrameSpec {
  uint32_t src = 0, dst = 1, plane = 0;
  uint8_t opcode = MRC_OP_WRITE_MIDDLE;
  uint32_t payload = 1024;
  uint16_t sport = 0xc000;
  uint32_t psn = 0;
  IpVersion ver = IpVersion::kV4;
  int dscp = -1;  // -1: make_packet's choice
  int ecn = -1;
  uint32_t flow_label = 0;
};

std::vector<uint8_t> frame(const Network& net, const FrameSpec& s) {
  Packet p = make_packet(s.opcode, s.ver, codec::is_data_opcode(s.opcode) ? s.payload : 0);
  p.eth.src = net.mac_of(s.src, s.plane);
  p.eth.dst = net.mac_of(s.dst, s.plane);
  p.ip.src = net.ip_of(s.src, s.plane, s.ver);
  p.ip.dst = net.ip_of(s.dst, s.plane, s.ver);
  p.udp.sport = s.sport;
  p.bth.psn = s.psn;
  if (s.ver == IpVersion::kV6) p.ip.flow_label = s.flow_label;
  if (s.dscp >= 0) p.ip.dscp = uint8_t(s.dscp);
  if (s.ecn >= 0) p.ip.ecn = uint8_t(s.ecn);
  auto f = build_frame(p);
  EXPECT_FALSE(f.empty());
  return f;
}

Packet parsed(const std::vector<uint8_t>& f, ParseError want = ParseError::kOk) {
  Packet p;
  ParseError e = codec::parse(f, codec_cfg, p);
  EXPECT_EQ(e, want) << codec::to_string(e);
  return p;
}

// Serialization time as the simulator documents it: ceil(bits / rate).
Time ser(size_t bytes, uint64_t bps) { return (bytes * 8 * 1'000'000'000ull + bps - 1) / bps; }

NetConfig base_cfg(uint32_t hosts = 2, uint32_t planes = 1, uint32_t paths = 1) {
  NetConfig c;
  c.hosts = hosts;
  c.planes = planes;
  c.paths_per_plane = paths;
  return c;
}

// ---------------------------------------------------------------------------
// Timing

TEST(SimTiming, FrameArrivesAtExactLatencyPlusSerialization) {
  NetConfig c = base_cfg();
  c.uplink.rate_bps = 10'000'000'000;
  c.uplink.latency = 1000;
  c.spine.rate_bps = 40'000'000'000;
  c.spine.latency = 2000;
  c.downlink.rate_bps = 25'000'000'000;
  c.downlink.latency = 500;
  Fixture fx(c);
  auto f = frame(fx.net, {.payload = 1024});
  const size_t B = f.size();
  ASSERT_TRUE(fx.net.send(0, 0, f));
  ASSERT_TRUE(fx.net.send(0, 0, f));  // back to back behind the first
  fx.net.run_until_idle();
  ASSERT_EQ(fx.rx.size(), 2u);
  const Time first =
      ser(B, 10'000'000'000) + 1000 + ser(B, 40'000'000'000) + 2000 + ser(B, 25'000'000'000) + 500;
  EXPECT_EQ(fx.rx[0].t, first);
  // The 10G uplink is the bottleneck: the second trails by one serialization.
  EXPECT_EQ(fx.rx[1].t, first + ser(B, 10'000'000'000));
  EXPECT_EQ(fx.rx[0].host, 1u);
  EXPECT_EQ(fx.rx[0].port, 0);
  EXPECT_EQ(fx.rx[0].frame, f);
}

TEST(SimTiming, ExactArithmeticForManySizesAndRates) {
  for (uint64_t rate :
       {1'000'000'000ull, 3'000'000'000ull, 100'000'000'000ull, 400'000'000'000ull}) {
    for (uint32_t payload : {0u, 4u, 100u, 1024u, 4096u, 8000u}) {
      NetConfig c = base_cfg();
      c.uplink.rate_bps = c.spine.rate_bps = c.downlink.rate_bps = rate;
      c.uplink.latency = 700;
      c.spine.latency = 1300;
      c.downlink.latency = 11;
      Fixture fx(c);
      auto f = frame(fx.net, {.opcode = MRC_OP_WRITE_ONLY, .payload = payload});
      fx.net.run_until(12345);
      ASSERT_TRUE(fx.net.send(0, 0, f));
      fx.net.run_until_idle();
      ASSERT_EQ(fx.rx.size(), 1u);
      EXPECT_EQ(fx.rx[0].t, 12345 + 3 * ser(f.size(), rate) + 700 + 1300 + 11)
          << "rate " << rate << " bytes " << f.size();
    }
  }
}

TEST(SimTiming, InfiniteRateIsPureLatency) {
  NetConfig c = base_cfg();
  c.uplink.rate_bps = c.spine.rate_bps = c.downlink.rate_bps = 0;
  c.uplink.latency = 1;
  c.spine.latency = 20;
  c.downlink.latency = 300;
  Fixture fx(c);
  auto f = frame(fx.net, {});
  for (int i = 0; i < 5; i++) ASSERT_TRUE(fx.net.send(0, 0, f));
  fx.net.run_until_idle();
  ASSERT_EQ(fx.rx.size(), 5u);
  for (auto& r : fx.rx) EXPECT_EQ(r.t, 321u);
}

TEST(SimTiming, JitterStaysInRangeAndKeepsLinkOrder) {
  NetConfig c = base_cfg();
  c.spine.jitter = 5000;
  Fixture fx(c);
  const Time base = 3 * ser(frame(fx.net, {}).size(), c.spine.rate_bps) + 3000;
  std::set<Time> extra;
  // Sparse: each frame's extra delay is in [0, jitter].
  for (uint32_t i = 0; i < 500; i++) {
    fx.net.run_until(i * 20'000);
    ASSERT_TRUE(fx.net.send(0, 0, frame(fx.net, {.psn = i})));
  }
  fx.net.run_until_idle();
  ASSERT_EQ(fx.rx.size(), 500u);
  for (uint32_t i = 0; i < 500; i++) {
    EXPECT_EQ(parsed(fx.rx[i].frame).bth.psn, i);
    const Time sent = i * 20'000;
    ASSERT_GE(fx.rx[i].t, sent + base);
    ASSERT_LE(fx.rx[i].t, sent + base + 5000);
    extra.insert(fx.rx[i].t - sent - base);
  }
  EXPECT_GT(extra.size(), 100u);  // the jitter really varies
  // Dense (frames 200ns apart, jitter 5us): still first in, first out.
  fx.rx.clear();
  const Time t0 = fx.net.now();
  for (uint32_t i = 0; i < 500; i++) {
    fx.net.run_until(t0 + i * 200);
    ASSERT_TRUE(fx.net.send(0, 0, frame(fx.net, {.psn = i})));
  }
  fx.net.run_until_idle();
  ASSERT_EQ(fx.rx.size(), 500u);
  for (uint32_t i = 0; i < 500; i++) {
    EXPECT_EQ(parsed(fx.rx[i].frame).bth.psn, i);
    EXPECT_GE(fx.rx[i].t, t0 + i * 200 + base);
  }
}

// ---------------------------------------------------------------------------
// Queues

TEST(SimQueue, OverflowDropsWhatDoesNotFit) {
  NetConfig c = base_cfg();
  c.uplink.rate_bps = 1'000'000'000;
  Fixture fx(c);
  auto f = frame(fx.net, {.payload = 1000});
  const uint32_t B = uint32_t(f.size());
  fx.net.update(LinkSel::uplink(0, 0), [&](LinkParams& p, Tier) { p.queue_bytes = 10 * B; });
  int accepted = 0;
  for (int i = 0; i < 20; i++) accepted += fx.net.send(0, 0, f);
  // One on the wire, ten waiting, nine dropped.
  EXPECT_EQ(accepted, 11);
  const LinkCounters& up = fx.net.counters(fx.net.uplink(0, 0));
  EXPECT_EQ(up.drop(Drop::kQueueFull), 9u);
  EXPECT_EQ(up.max_queue_bytes, 10 * B);
  EXPECT_EQ(fx.net.queue_depth(fx.net.uplink(0, 0)), 10 * B);
  fx.net.run_until_idle();
  EXPECT_EQ(fx.rx.size(), 11u);
  EXPECT_EQ(fx.net.queue_depth(fx.net.uplink(0, 0)), 0u);
  EXPECT_EQ(fx.net.net_counters().drops[size_t(Drop::kQueueFull)], 9u);
  EXPECT_EQ(fx.net.net_counters().delivered, 11u);
  EXPECT_EQ(fx.net.net_counters().sent, 20u);
}

TEST(SimQueue, ControlClassBypassesFullDataQueue) {
  NetConfig c = base_cfg();
  c.downlink.rate_bps = 1'000'000'000;  // slow last hop: the data queue builds there
  c.uplink.rate_bps = c.spine.rate_bps = 0;
  Fixture fx(c);
  auto data = frame(fx.net, {.payload = 4096});
  auto sack = frame(fx.net, {.opcode = MRC_OP_SACK});
  ASSERT_EQ(parsed(sack).ip.dscp, MRC_DSCP_CONTROL_DEFAULT);
  for (uint32_t i = 0; i < 20; i++) ASSERT_TRUE(fx.net.send(0, 0, data));
  fx.net.run_until(2500);  // the data is queued at the downlink
  ASSERT_GT(fx.net.queue_depth(fx.net.downlink(1, 0)), 10 * data.size());
  ASSERT_TRUE(fx.net.send(0, 0, sack));
  fx.net.run_until_idle();
  ASSERT_EQ(fx.rx.size(), 21u);
  // Behind the frame being serialized, ahead of the 19 waiting.
  EXPECT_EQ(fx.rx[1].frame, sack);
  const Time lat = c.uplink.latency + c.spine.latency + c.downlink.latency;
  EXPECT_EQ(fx.rx[1].t, lat + ser(data.size(), 1'000'000'000) + ser(sack.size(), 1'000'000'000));
  EXPECT_EQ(fx.net.counters(fx.net.downlink(1, 0)).max_ctrl_queue_bytes, sack.size());
}

// ---------------------------------------------------------------------------
// Trimming and ECN

class SimTrim : public ::testing::TestWithParam<IpVersion> {};

// Six data frames meet a 10G link whose trim threshold holds two: the first
// goes out at once, two wait, three are trimmed and overtake the waiting two.
void check_trim(IpVersion v, bool last_hop) {
  NetConfig c = base_cfg();
  c.uplink.rate_bps = 0;
  (last_hop ? c.spine : c.downlink).rate_bps = 0;
  LinkParams& slow = last_hop ? c.downlink : c.spine;
  slow.rate_bps = 10'000'000'000;
  Fixture fx(c);
  std::vector<std::vector<uint8_t>> sent;
  for (uint32_t i = 0; i < 6; i++) sent.push_back(frame(fx.net, {.psn = i, .ver = v}));
  const uint32_t B = uint32_t(sent[0].size());
  const LinkId l = last_hop ? fx.net.downlink(1, 0) : fx.net.spine(0, 0);
  fx.net.update(LinkSel::all(), [&](LinkParams& p, Tier) { p.trim_threshold = 2 * B; });
  for (auto& f : sent) ASSERT_TRUE(fx.net.send(0, 0, f));
  fx.net.run_until_idle();
  ASSERT_EQ(fx.rx.size(), 6u);
  EXPECT_EQ(fx.net.counters(l).trims, 3u);
  const std::vector<uint32_t> order = {0, 3, 4, 5, 1, 2};
  for (size_t k = 0; k < 6; k++) {
    Packet p = parsed(fx.rx[k].frame);
    EXPECT_EQ(p.bth.psn, order[k]);
    if (order[k] >= 3) {
      EXPECT_EQ(p.trim, last_hop ? TrimKind::kTrimmedLastHop : TrimKind::kTrimmed);
      EXPECT_EQ(p.ip.dscp, last_hop ? MRC_DSCP_TRIMMED_LASTHOP_DEFAULT : MRC_DSCP_TRIMMED_DEFAULT);
      EXPECT_EQ(p.payload_len, 0u);
      const uint32_t hdr = uint32_t(p.bth_off + 12 + codec::ext_header_len(p.bth.opcode, p.bth.ts));
      EXPECT_EQ(fx.rx[k].frame.size(), hdr);  // cut to the headers, no ICRC
      EXPECT_EQ(p.frame_len, hdr);
      EXPECT_EQ(p.ip.ecn, MRC_ECN_ECT0);
      EXPECT_EQ(p.reth.va, make_packet(MRC_OP_WRITE_MIDDLE, v).reth.va);
    } else {
      EXPECT_EQ(p.trim, TrimKind::kNone);
      EXPECT_EQ(fx.rx[k].frame, sent[order[k]]);
    }
  }
}

TEST_P(SimTrim, MidFabricTrimsToTrimmedCodepoint) { check_trim(GetParam(), false); }
TEST_P(SimTrim, LastHopTrimsToLastHopCodepoint) { check_trim(GetParam(), true); }

TEST_P(SimTrim, FullQueueTrimsInsteadOfDropping) {
  NetConfig c = base_cfg();
  c.uplink.rate_bps = 0;
  c.spine.rate_bps = 1'000'000'000;
  Fixture fx(c);
  auto f = frame(fx.net, {.ver = GetParam()});
  const uint32_t B = uint32_t(f.size());
  fx.net.update(LinkSel::path(0, 0), [&](LinkParams& p, Tier) {
    p.queue_bytes = 3 * B;
    p.trim_threshold = 100 * B;  // above the capacity: only "full" triggers
  });
  for (int i = 0; i < 10; i++) ASSERT_TRUE(fx.net.send(0, 0, f));
  fx.net.run_until_idle();
  const LinkCounters& s = fx.net.counters(fx.net.spine(0, 0));
  EXPECT_EQ(s.trims, 6u);
  EXPECT_EQ(s.dropped(), 0u);
  EXPECT_EQ(fx.rx.size(), 10u);
}

TEST_P(SimTrim, NoTrimClassAndControlAreNeverTrimmed) {
  NetConfig c = base_cfg();
  c.uplink.rate_bps = 0;
  c.spine.rate_bps = 1'000'000'000;
  Fixture fx(c);
  auto nt = frame(fx.net, {.ver = GetParam(), .dscp = MRC_DSCP_NO_TRIM_DEFAULT});
  auto sack = frame(fx.net, {.opcode = MRC_OP_SACK, .ver = GetParam()});
  const uint32_t B = uint32_t(nt.size());
  fx.net.update(LinkSel::path(0, 0), [&](LinkParams& p, Tier) {
    p.queue_bytes = 3 * B;
    p.trim_threshold = 0;  // trim every trimmable frame
  });
  for (int i = 0; i < 10; i++) fx.net.send(0, 0, nt);
  for (int i = 0; i < 3; i++) fx.net.send(0, 0, sack);
  fx.net.run_until_idle();
  const LinkCounters& s = fx.net.counters(fx.net.spine(0, 0));
  EXPECT_EQ(s.trims, 0u);
  EXPECT_EQ(s.drop(Drop::kQueueFull), 6u);  // 1 on the wire + 3 queued of 10
  EXPECT_EQ(fx.rx.size(), 7u);
  for (auto& r : fx.rx) EXPECT_EQ(parsed(r.frame).trim, TrimKind::kNone);
}

TEST_P(SimTrim, RetransmitClassIsTrimmable) {
  NetConfig c = base_cfg();
  Fixture fx(c);
  fx.net.update(LinkSel::path(0, 0), [&](LinkParams& p, Tier) { p.trim_threshold = 0; });
  fx.net.send(0, 0, frame(fx.net, {.ver = GetParam(), .dscp = MRC_DSCP_TRIMMABLE_RETX_DEFAULT}));
  fx.net.run_until_idle();
  ASSERT_EQ(fx.rx.size(), 1u);
  EXPECT_EQ(parsed(fx.rx[0].frame).trim, TrimKind::kTrimmed);
}

INSTANTIATE_TEST_SUITE_P(Ip, SimTrim, ::testing::Values(IpVersion::kV4, IpVersion::kV6),
                         [](const auto& i) { return i.param == IpVersion::kV4 ? "v4" : "v6"; });

class SimEcn : public ::testing::TestWithParam<IpVersion> {};

TEST_P(SimEcn, MarksAboveThresholdMidFabric) {
  NetConfig c = base_cfg();
  c.uplink.rate_bps = 0;
  c.spine.rate_bps = 10'000'000'000;
  Fixture fx(c);
  std::vector<std::vector<uint8_t>> sent;
  for (uint32_t i = 0; i < 6; i++) sent.push_back(frame(fx.net, {.psn = i, .ver = GetParam()}));
  const uint32_t B = uint32_t(sent[0].size());
  fx.net.update(LinkSel::all(), [&](LinkParams& p, Tier) { p.ecn_threshold = 2 * B; });
  for (auto& f : sent) ASSERT_TRUE(fx.net.send(0, 0, f));
  fx.net.run_until_idle();
  ASSERT_EQ(fx.rx.size(), 6u);
  EXPECT_EQ(fx.net.counters(fx.net.spine(0, 0)).ecn_marks, 3u);
  for (size_t k = 0; k < 6; k++) {
    // CE leaves the ICRC valid (the TOS/traffic class is masked) and the
    // IPv4 checksum correct (parse checks both).
    Packet p = parsed(fx.rx[k].frame);
    EXPECT_EQ(p.bth.psn, k);
    EXPECT_EQ(p.ip.ecn, k >= 3 ? MRC_ECN_CE : MRC_ECN_ECT0) << k;
    EXPECT_EQ(p.ip.dscp, MRC_DSCP_TRIMMABLE_DEFAULT);
  }
}

TEST_P(SimEcn, NeverMarksOnLastHop) {
  NetConfig c = base_cfg();
  c.uplink.rate_bps = c.spine.rate_bps = 0;
  c.downlink.rate_bps = 1'000'000'000;
  c.downlink.ecn_threshold = 0;
  Fixture fx(c);
  auto f = frame(fx.net, {.ver = GetParam()});
  for (int i = 0; i < 20; i++) ASSERT_TRUE(fx.net.send(0, 0, f));
  fx.net.run_until_idle();
  ASSERT_EQ(fx.rx.size(), 20u);
  const LinkCounters& d = fx.net.counters(fx.net.downlink(1, 0));
  EXPECT_GT(d.max_queue_bytes, 10 * f.size());
  EXPECT_EQ(d.ecn_marks, 0u);
  for (auto& r : fx.rx) EXPECT_EQ(parsed(r.frame).ip.ecn, MRC_ECN_ECT0);
}

TEST_P(SimEcn, NotEctIsNeverMarked) {
  NetConfig c = base_cfg();
  c.spine.ecn_threshold = 0;
  Fixture fx(c);
  fx.net.send(0, 0, frame(fx.net, {.ver = GetParam(), .ecn = MRC_ECN_NOT_ECT}));
  fx.net.send(0, 0, frame(fx.net, {.ver = GetParam(), .ecn = MRC_ECN_ECT1}));
  fx.net.run_until_idle();
  ASSERT_EQ(fx.rx.size(), 2u);
  EXPECT_EQ(parsed(fx.rx[0].frame).ip.ecn, MRC_ECN_NOT_ECT);
  EXPECT_EQ(parsed(fx.rx[1].frame).ip.ecn, MRC_ECN_CE);
  EXPECT_EQ(fx.net.counters(fx.net.spine(0, 0)).ecn_marks, 1u);
}

INSTANTIATE_TEST_SUITE_P(Ip, SimEcn, ::testing::Values(IpVersion::kV4, IpVersion::kV6),
                         [](const auto& i) { return i.param == IpVersion::kV4 ? "v4" : "v6"; });

// ---------------------------------------------------------------------------
// Random faults

// Sends n frames 1us apart (no queueing) and runs the network dry.
void pump(Fixture& fx, uint32_t n, const FrameSpec& s = {}) {
  auto f = frame(fx.net, s);
  const Time t0 = fx.net.now();
  for (uint32_t i = 0; i < n; i++) {
    fx.net.run_until(t0 + i * kUs);
    fx.net.send(s.src, s.plane, f);
  }
  fx.net.run_until_idle();
}

TEST(SimFaults, LossRateStatisticallyWithinBounds) {
  for (double p : {0.01, 0.1, 0.5}) {
    NetConfig c = base_cfg();
    c.spine.loss = p;
    c.seed = 42;
    Fixture fx(c);
    const uint32_t n = 20000;
    pump(fx, n);
    const double mean = n * (1 - p), sigma = std::sqrt(n * p * (1 - p));
    EXPECT_NEAR(double(fx.rx.size()), mean, 5 * sigma) << "p=" << p;
    EXPECT_EQ(fx.net.counters(fx.net.spine(0, 0)).drop(Drop::kLoss), n - fx.rx.size());
  }
}

TEST(SimFaults, BlackholeDropsSilently) {
  Fixture fx(base_cfg());
  int changes = 0;
  fx.net.on_port_change(0, [&](int, bool, Time) { changes++; });
  fx.net.update(LinkSel::path(0, 0), [](LinkParams& p, Tier) { p.blackhole = true; });
  pump(fx, 100);
  EXPECT_TRUE(fx.rx.empty());
  EXPECT_EQ(fx.net.counters(fx.net.spine(0, 0)).drop(Drop::kBlackhole), 100u);
  EXPECT_TRUE(fx.net.port_up(0, 0));  // a blackhole is not visible to the host
  EXPECT_EQ(changes, 0);
  fx.net.update(LinkSel::path(0, 0), [](LinkParams& p, Tier) { p.blackhole = false; });
  pump(fx, 100);
  EXPECT_EQ(fx.rx.size(), 100u);
}

TEST(SimFaults, LinkDownDropsAndReportsThePort) {
  Fixture fx(base_cfg(2, 2));
  std::vector<std::pair<int, bool>> events;
  fx.net.on_port_change(0, [&](int port, bool up, Time) { events.push_back({port, up}); });
  fx.net.update(LinkSel::uplink(0, 1), [](LinkParams& p, Tier) { p.up = false; });
  EXPECT_FALSE(fx.net.port_up(0, 1));
  EXPECT_TRUE(fx.net.port_up(0, 0));
  EXPECT_FALSE(fx.net.send(0, 1, frame(fx.net, {.plane = 1})));
  EXPECT_TRUE(fx.net.send(0, 0, frame(fx.net, {.plane = 0})));
  fx.net.run_until_idle();
  EXPECT_EQ(fx.rx.size(), 1u);
  EXPECT_EQ(fx.net.counters(fx.net.uplink(0, 1)).drop(Drop::kDown), 1u);
  fx.net.update(LinkSel::uplink(0, 1), [](LinkParams& p, Tier) { p.up = true; });
  EXPECT_TRUE(fx.net.port_up(0, 1));
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0], std::make_pair(1, false));
  EXPECT_EQ(events[1], std::make_pair(1, true));
  // The receiver's downlink going down is its port going down too.
  fx.net.update(LinkSel::downlink(1, 0), [](LinkParams& p, Tier) { p.up = false; });
  EXPECT_FALSE(fx.net.port_up(1, 0));
  EXPECT_TRUE(fx.net.send(0, 0, frame(fx.net, {})));
  fx.net.run_until_idle();
  EXPECT_EQ(fx.rx.size(), 1u);
  EXPECT_EQ(fx.net.counters(fx.net.downlink(1, 0)).drop(Drop::kDown), 1u);
}

TEST(SimFaults, FrameOnTheWireIsLostWhenItsLinkGoesDown) {
  NetConfig c = base_cfg();
  c.spine.latency = 10 * kUs;
  Fixture fx(c);
  ASSERT_TRUE(fx.net.send(0, 0, frame(fx.net, {})));
  fx.net.at(5 * kUs,
            [&] { fx.net.update(LinkSel::path(0, 0), [](LinkParams& p, Tier) { p.up = false; }); });
  fx.net.run_until_idle();
  EXPECT_TRUE(fx.rx.empty());
  EXPECT_EQ(fx.net.counters(fx.net.spine(0, 0)).drop(Drop::kDown), 1u);
  EXPECT_EQ(fx.net.counters(fx.net.spine(0, 0)).tx_frames, 0u);
}

TEST(SimFaults, DuplicationDeliversIdenticalCopies) {
  NetConfig c = base_cfg();
  c.spine.dup = 1;
  Fixture fx(c);
  pump(fx, 50);
  ASSERT_EQ(fx.rx.size(), 100u);
  EXPECT_EQ(fx.net.counters(fx.net.spine(0, 0)).dups, 50u);
  for (size_t i = 0; i < 100; i += 2) {
    EXPECT_EQ(fx.rx[i].frame, fx.rx[i + 1].frame);
    // The copy follows its original through the downlink queue.
    EXPECT_EQ(fx.rx[i + 1].t, fx.rx[i].t + ser(fx.rx[i].frame.size(), c.downlink.rate_bps));
    parsed(fx.rx[i].frame);
  }
  // And statistically at a fraction.
  NetConfig c2 = base_cfg();
  c2.spine.dup = 0.25;
  Fixture fx2(c2);
  pump(fx2, 10000);
  const double extra = double(fx2.rx.size()) - 10000;
  EXPECT_NEAR(extra, 2500, 5 * std::sqrt(10000 * 0.25 * 0.75));
  EXPECT_EQ(fx2.net.counters(fx2.net.spine(0, 0)).dups, fx2.rx.size() - 10000);
}

TEST(SimFaults, CorruptionFlipsOneBitAndFailsTheIcrc) {
  for (IpVersion v : {IpVersion::kV4, IpVersion::kV6}) {
    for (uint8_t op : mrc::testing::kAllOpcodes) {
      NetConfig c = base_cfg();
      c.downlink.corrupt = 1;
      Fixture fx(c);
      FrameSpec s{.opcode = op, .payload = 256, .ver = v};
      auto f = frame(fx.net, s);
      Packet orig = parsed(f);
      for (int i = 0; i < 20; i++) ASSERT_TRUE(fx.net.send(0, 0, f));
      fx.net.run_until_idle();
      ASSERT_EQ(fx.rx.size(), 20u);
      EXPECT_EQ(fx.net.counters(fx.net.downlink(1, 0)).corruptions, 20u);
      for (auto& r : fx.rx) {
        ASSERT_EQ(r.frame.size(), f.size());
        int bits = 0;
        size_t at = 0;
        for (size_t k = 0; k < f.size(); k++) {
          bits += __builtin_popcount(r.frame[k] ^ f[k]);
          if (r.frame[k] != f[k]) at = k;
        }
        EXPECT_EQ(bits, 1);
        EXPECT_GE(at, orig.payload_off ? orig.payload_off : orig.frame_len - MRC_ICRC_LEN);
        parsed(r.frame, ParseError::kBadIcrc);
      }
    }
  }
}

TEST(SimFaults, ReorderingHoldsBackAFraction) {
  NetConfig c = base_cfg();
  c.spine.reorder = 0.2;
  c.spine.reorder_delay = 5 * kUs;
  c.seed = 3;
  Fixture fx(c);
  auto f = frame(fx.net, {});
  for (uint32_t i = 0; i < 2000; i++) {
    fx.net.run_until(i * kUs);
    fx.net.send(0, 0, frame(fx.net, {.psn = i}));
  }
  fx.net.run_until_idle();
  ASSERT_EQ(fx.rx.size(), 2000u);
  const uint64_t held = fx.net.counters(fx.net.spine(0, 0)).reorders;
  EXPECT_NEAR(double(held), 400, 5 * std::sqrt(2000 * 0.2 * 0.8));
  // Every held frame is overtaken: count frames with a later PSN ahead of them.
  uint32_t late = 0, max_psn = 0;
  std::set<uint32_t> psns;
  for (auto& r : fx.rx) {
    uint32_t psn = parsed(r.frame).bth.psn;
    psns.insert(psn);
    if (psn < max_psn) late++;
    max_psn = std::max(max_psn, psn);
  }
  EXPECT_EQ(psns.size(), 2000u);
  EXPECT_GT(late, held / 2);
  EXPECT_LE(late, held);
}

// ---------------------------------------------------------------------------
// ECMP

TEST(SimEcmp, SourcePortsSpreadAndATupleSticksToItsPath) {
  NetConfig c = base_cfg(2, 1, 8);
  c.uplink.rate_bps = c.spine.rate_bps = c.downlink.rate_bps = 0;
  Fixture fx(c);
  const uint32_t n = 8192;
  for (uint32_t i = 0; i < n; i++) {
    auto f = frame(fx.net, {.sport = uint16_t(0xc000 + i)});
    ASSERT_GE(fx.net.ecmp_path(f), 0);
    ASSERT_TRUE(fx.net.send(0, 0, f));
  }
  fx.net.run_until_idle();
  ASSERT_EQ(fx.rx.size(), n);
  for (uint32_t m = 0; m < 8; m++) {
    const double got = double(fx.net.counters(fx.net.spine(0, m)).rx_frames);
    EXPECT_NEAR(got, n / 8.0, 5 * std::sqrt(n / 8.0 * 7 / 8)) << "path " << m;
  }
  // The same 5-tuple always takes the same path.
  for (uint16_t sport : {0xc001, 0xd00d, 0xffff}) {
    auto f = frame(fx.net, {.sport = sport});
    const uint32_t path = uint32_t(fx.net.ecmp_path(f));
    fx.net.reset_counters();
    for (int i = 0; i < 100; i++) fx.net.send(0, 0, f);
    fx.net.run_until_idle();
    EXPECT_EQ(fx.net.counters(fx.net.spine(0, path)).tx_frames, 100u);
  }
}

TEST(SimEcmp, Ipv6FlowLabelIsPartOfTheHash) {
  NetConfig c = base_cfg(2, 1, 16);
  Network net(c);
  std::set<int> paths;
  for (uint32_t fl = 0; fl < 64; fl++)
    paths.insert(net.ecmp_path(frame(net, {.ver = IpVersion::kV6, .flow_label = fl})));
  EXPECT_GT(paths.size(), 8u);
  // And the ECMP seed changes the mapping.
  NetConfig c2 = c;
  c2.ecmp_seed = 99;
  Network net2(c2);
  int same = 0;
  for (uint16_t s = 0; s < 256; s++)
    same += net.ecmp_path(frame(net, {.sport = s})) == net2.ecmp_path(frame(net2, {.sport = s}));
  EXPECT_LT(same, 64);
}

// ---------------------------------------------------------------------------
// Routing and addressing

TEST(SimRouting, AddressesFollowTheScheme) {
  Network net(base_cfg(4, 3));
  EXPECT_EQ(net.mac_of(3, 2), (codec::Mac{0x02, 0, 0, 0, 0x02, 0x03}));
  EXPECT_EQ(net.ip_of(3, 2), codec::IpAddr::v4(198, 18, 2, 3));
  codec::IpAddr v6 = net.ip_of(3, 2, IpVersion::kV6);
  EXPECT_EQ(v6.b[0], 0xfd);
  EXPECT_EQ(v6.b[13], 2);
  EXPECT_EQ(v6.b[15], 3);
  EXPECT_EQ(v6.ver, IpVersion::kV6);
  NetConfig c6 = base_cfg(4, 3);
  c6.ip_version = IpVersion::kV6;
  EXPECT_EQ(Network(c6).ip_of(3, 2), v6);
}

TEST(SimRouting, DeliversByDestinationAndCountsWhatItCannot) {
  Fixture fx(base_cfg(3, 2));
  // Across hosts and planes, both IP versions.
  for (uint32_t plane = 0; plane < 2; plane++)
    for (uint32_t dst = 0; dst < 3; dst++)
      for (IpVersion v : {IpVersion::kV4, IpVersion::kV6})
        ASSERT_TRUE(
            fx.net.send(1, plane, frame(fx.net, {.src = 1, .dst = dst, .plane = plane, .ver = v})));
  fx.net.run_until_idle();
  ASSERT_EQ(fx.rx.size(), 12u);
  for (auto& r : fx.rx) {
    Packet p = parsed(r.frame);
    EXPECT_EQ(p.ip.dst, fx.net.ip_of(r.host, uint32_t(r.port), p.ip.dst.ver));
  }
  fx.rx.clear();
  // Unknown host, another plane's address, bad port, oversize, runt.
  auto unknown = frame(fx.net, {.dst = 7});
  EXPECT_FALSE(fx.net.send(0, 0, unknown));
  EXPECT_FALSE(fx.net.send(0, 1, frame(fx.net, {.plane = 0})));
  EXPECT_FALSE(fx.net.send(5, 0, frame(fx.net, {})));
  EXPECT_FALSE(fx.net.send(0, 2, frame(fx.net, {})));
  EXPECT_FALSE(fx.net.send(0, 0, std::vector<uint8_t>(20000, 0)));
  EXPECT_FALSE(fx.net.send(0, 0, std::vector<uint8_t>(10, 0)));
  const NetCounters& n = fx.net.net_counters();
  EXPECT_EQ(n.drops[size_t(Drop::kNoRoute)], 3u);
  EXPECT_EQ(n.drops[size_t(Drop::kBadPort)], 2u);
  EXPECT_EQ(n.drops[size_t(Drop::kOversize)], 1u);
  // A non-MRC UDP datagram and a non-IP frame still arrive.
  auto udp = frame(fx.net, {.dst = 2});
  codec::store_be16(udp.data() + 14 + 20 + 2, 9999);  // another UDP port
  EXPECT_TRUE(fx.net.send(0, 0, udp));
  std::vector<uint8_t> arp(60, 0);
  auto mac = fx.net.mac_of(2, 1);
  std::memcpy(arp.data(), mac.data(), 6);
  arp[12] = 0x08, arp[13] = 0x06;
  EXPECT_TRUE(fx.net.send(0, 1, arp));
  std::vector<uint8_t> arp_far = arp;
  arp_far[0] = 0x04;  // not one of ours
  EXPECT_FALSE(fx.net.send(0, 1, arp_far));
  fx.net.run_until_idle();
  ASSERT_EQ(fx.rx.size(), 2u);
  // The short ARP frame overtakes the UDP datagram on the other plane.
  std::sort(fx.rx.begin(), fx.rx.end(), [](const Rx& a, const Rx& b) { return a.port < b.port; });
  EXPECT_EQ(fx.rx[0].frame, udp);
  EXPECT_EQ(fx.rx[0].host, 2u);
  EXPECT_EQ(fx.rx[0].port, 0);
  EXPECT_EQ(fx.rx[1].frame, arp);
  EXPECT_EQ(fx.rx[1].host, 2u);
  EXPECT_EQ(fx.rx[1].port, 1);
  EXPECT_EQ(fx.net.net_counters().drops[size_t(Drop::kNoRoute)], 4u);
}

TEST(SimRouting, HostWithoutReceiverCountsDrop) {
  Network net(base_cfg(2));
  FrameSpec s;
  ASSERT_TRUE(net.send(0, 0, frame(net, s)));
  net.run_until_idle();
  EXPECT_EQ(net.net_counters().drops[size_t(Drop::kNoReceiver)], 1u);
  EXPECT_EQ(net.net_counters().delivered, 0u);
}

TEST(SimRouting, ReceiverMaySendFromItsCallback) {
  NetConfig c = base_cfg(2);
  Network net(c);
  int pongs = 0;
  auto ping = frame(net, {.src = 0, .dst = 1});
  auto pong = frame(net, {.src = 1, .dst = 0, .opcode = MRC_OP_ACK});
  net.attach(1, [&](int port, std::span<const uint8_t>, Time) {
    for (int i = 0; i < 50; i++)
      net.send(1, uint32_t(port), pong);  // grows the pools in the callback
  });
  net.attach(0, [&](int, std::span<const uint8_t> f, Time) {
    pongs++;
    EXPECT_EQ(std::vector<uint8_t>(f.begin(), f.end()), pong);
  });
  for (int i = 0; i < 100; i++) net.send(0, 0, ping);
  net.run_until_idle();
  EXPECT_EQ(pongs, 5000);
}

// ---------------------------------------------------------------------------
// Configuration, selectors, time

TEST(SimConfig, ValidateNamesTheBadField) {
  NetConfig c;
  c.hosts = 300;
  auto r = Network::create(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().context.find("hosts"), std::string::npos);
  c = NetConfig{};
  c.spine.loss = 1.5;
  r = Network::create(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().context.find("spine.loss"), std::string::npos);
  c = NetConfig{};
  c.paths_per_plane = 0;
  EXPECT_FALSE(Network::create(c).ok());
  EXPECT_TRUE(Network::create(NetConfig{}).ok());
}

TEST(SimConfig, SelectorsPickTheRightLinks) {
  Network net(base_cfg(3, 2, 4));
  EXPECT_EQ(net.link_count(), 3u * 2 + 2 * 4 + 3 * 2);
  EXPECT_EQ(net.select(LinkSel::all()).size(), net.link_count());
  EXPECT_EQ(net.select(LinkSel::plane(1)).size(), 3u + 4 + 3);
  EXPECT_EQ(net.select(LinkSel::path(1, 2)), std::vector<LinkId>{net.spine(1, 2)});
  EXPECT_EQ(net.select(LinkSel::path(LinkSel::kAny, 3)),
            (std::vector<LinkId>{net.spine(0, 3), net.spine(1, 3)}));
  EXPECT_EQ(net.select(LinkSel::uplink(2, 1)), std::vector<LinkId>{net.uplink(2, 1)});
  EXPECT_EQ(net.select(LinkSel::port(2, 1)),
            (std::vector<LinkId>{net.uplink(2, 1), net.downlink(2, 1)}));
  EXPECT_EQ(net.select(LinkSel::host(0)).size(), 4u);
  EXPECT_TRUE(net.select(LinkSel::path(2, 0)).empty());
  EXPECT_FALSE(net.check(LinkSel::path(2, 0)).ok());
  EXPECT_FALSE(net.check(LinkSel::path(0, 4)).ok());
  EXPECT_FALSE(net.check(LinkSel::uplink(3, 0)).ok());
  EXPECT_TRUE(net.check(LinkSel::uplink(LinkSel::kAny, 1)).ok());
  for (LinkId id = 0; id < net.link_count(); id++) {
    LinkInfo i = net.info(id);
    LinkSel s = i.tier == Tier::kSpine    ? LinkSel::path(int32_t(i.plane), int32_t(i.index))
                : i.tier == Tier::kUplink ? LinkSel::uplink(int32_t(i.index), int32_t(i.plane))
                                          : LinkSel::downlink(int32_t(i.index), int32_t(i.plane));
    EXPECT_EQ(net.select(s), std::vector<LinkId>{id});
    EXPECT_EQ(net.link_name(id), s.to_string());
  }
}

TEST(SimConfig, PerPlaneAndPerTierCounters) {
  NetConfig c = base_cfg(2, 3, 2);
  Fixture fx(c);
  for (uint32_t p = 0; p < 3; p++)
    for (uint32_t i = 0; i <= p; i++) fx.net.send(0, p, frame(fx.net, {.plane = p}));
  fx.net.run_until_idle();
  for (uint32_t p = 0; p < 3; p++) EXPECT_EQ(fx.net.plane_counters(p).rx_frames, 3 * (p + 1));
  EXPECT_EQ(fx.net.tier_counters(Tier::kSpine).tx_frames, 6u);
  EXPECT_NE(fx.net.dump_counters().find("path"), std::string::npos);
}

TEST(SimTime, TimersRunInTimeThenSchedulingOrder) {
  Network net(base_cfg());
  std::vector<int> order;
  net.at(100, [&] { order.push_back(2); });
  net.at(50, [&] { order.push_back(1); });
  net.at(100, [&] { order.push_back(3); });
  auto cancelled = net.at(70, [&] { order.push_back(99); });
  net.at(100, [&] {
    order.push_back(4);
    net.after(0, [&] { order.push_back(5); });  // same time, after everything queued
  });
  EXPECT_TRUE(net.cancel(cancelled));
  EXPECT_FALSE(net.cancel(cancelled));
  EXPECT_EQ(net.next_event_time(), 50u);
  net.run_until(60);
  EXPECT_EQ(net.now(), 60u);
  EXPECT_EQ(net.next_event_time(), 100u);  // the cancelled 70 is skipped
  EXPECT_TRUE(net.run_until_idle());
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3, 4, 5}));
  EXPECT_EQ(net.now(), 100u);
  net.at(10, [&] { order.push_back(6); });  // in the past: runs now
  EXPECT_TRUE(net.step());
  EXPECT_EQ(net.now(), 100u);
  EXPECT_FALSE(net.step());
  EXPECT_EQ(net.next_event_time(), kNever);
}

TEST(SimTime, RunUntilDoneStopsOnTheCondition) {
  Fixture fx(base_cfg());
  auto f = frame(fx.net, {});
  for (uint32_t i = 0; i < 10; i++) fx.net.at(i * kUs, [&] { fx.net.send(0, 0, f); });
  EXPECT_TRUE(fx.net.run_until_done([&] { return fx.rx.size() >= 3; }, kSec));
  EXPECT_EQ(fx.rx.size(), 3u);
  EXPECT_FALSE(fx.net.run_until_done([&] { return fx.rx.size() >= 100; }, kSec));
  EXPECT_EQ(fx.rx.size(), 10u);
}

// ---------------------------------------------------------------------------
// Pools and determinism

TEST(SimPool, SteadyStateAllocatesNoBuffers) {
  NetConfig c = base_cfg(4, 2, 4);
  c.spine.dup = 0.1;
  c.spine.loss = 0.05;
  Fixture fx(c);
  auto run = [&](uint32_t rounds) {
    for (uint32_t r = 0; r < rounds; r++) {
      for (uint32_t i = 0; i < 64; i++)
        fx.net.send(i % 4, i % 2,
                    frame(fx.net, {.src = i % 4,
                                   .dst = (i + 1) % 4,
                                   .plane = i % 2,
                                   .opcode = uint8_t(i % 3 ? MRC_OP_WRITE_MIDDLE : MRC_OP_ACK),
                                   .sport = uint16_t(i * 7)}));
      fx.net.run_for(20 * kUs);
      fx.rx.clear();
    }
  };
  run(50);
  const size_t warm = fx.net.pool_buffers();
  run(500);
  EXPECT_EQ(fx.net.pool_buffers(), warm);
}

struct Outcome {
  std::vector<std::tuple<Time, int, uint32_t, uint64_t>> trace;  // time, kind, link, frame id
  std::vector<std::vector<uint8_t>> delivered;
  std::vector<LinkCounters> links;
  NetCounters net;
  bool operator==(const Outcome&) const = default;
};

Outcome run_scenario(uint64_t seed) {
  NetConfig c = base_cfg(4, 2, 4);
  c.seed = seed;
  c.spine.loss = 0.02;
  c.spine.jitter = 300;
  c.spine.dup = 0.02;
  c.spine.reorder = 0.05;
  c.spine.reorder_delay = 2 * kUs;
  c.spine.corrupt = 0.01;
  c.spine.rate_bps = 20'000'000'000;
  c.spine.trim_threshold = 16 * 1024;
  c.spine.ecn_threshold = 8 * 1024;
  c.downlink.rate_bps = 50'000'000'000;
  c.downlink.trim_threshold = 32 * 1024;
  Outcome o;
  Network net(c);
  net.set_trace([&](const TraceEvent& e, std::span<const uint8_t>) {
    o.trace.emplace_back(e.time, int(e.kind), e.link, e.frame_id);
  });
  for (uint32_t h = 0; h < 4; h++)
    net.attach(h, [&](int, std::span<const uint8_t> f, Time) {
      o.delivered.emplace_back(f.begin(), f.end());
    });
  for (uint32_t i = 0; i < 4000; i++) {
    net.run_until(i * 100);
    const uint32_t src = i % 4, plane = (i / 4) % 2;
    net.send(src, plane,
             frame(net, {.src = src,
                         .dst = (src + 1 + i % 3) % 4,
                         .plane = plane,
                         .payload = 2048,
                         .sport = uint16_t(i * 2654435761u >> 16),
                         .psn = i}));
  }
  net.run_until_idle();
  for (LinkId id = 0; id < net.link_count(); id++) o.links.push_back(net.counters(id));
  o.net = net.net_counters();
  return o;
}

TEST(SimDeterminism, SameSeedSameEverythingDifferentSeedDiffers) {
  const Outcome a = run_scenario(7), b = run_scenario(7), c = run_scenario(8);
  // The scenario exercises every fault.
  LinkCounters sum;
  for (auto& l : a.links) sum += l;
  EXPECT_GT(sum.drop(Drop::kLoss), 0u);
  EXPECT_GT(sum.trims, 0u);
  EXPECT_GT(sum.ecn_marks, 0u);
  EXPECT_GT(sum.dups, 0u);
  EXPECT_GT(sum.reorders, 0u);
  EXPECT_GT(sum.corruptions, 0u);
  EXPECT_EQ(a.trace.size(), b.trace.size());
  EXPECT_TRUE(a == b);
  EXPECT_FALSE(a.trace == c.trace);
  EXPECT_FALSE(a.links == c.links);
}

}  // namespace
}  // namespace mrc::sim
