// Grey failure (our addition to MRC's per-EV state machine, design.md "Grey
// failure: a lossy plane"): a plane that keeps losing packets while the
// QP's other planes deliver is lossy. Its losses no longer retire its EVs
// (each would be probed and readmitted only to lose again), an EV that
// loses far more often than its plane still is, and, when configured, the
// plane carries a smaller share of the spray until its loss rate falls.
// Loss every plane sees makes no plane lossy.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <functional>
#include <random>
#include <utility>

#include "codec/ev.hpp"
#include "engine/harness.hpp"

namespace mrc::testing {
namespace {

using namespace core;

constexpr int kPlanes = 4;

struct Phase {
  std::array<uint64_t, kPlanes> data{};  // data packets the requester sent, per plane
  double share(int port) const {
    uint64_t all = 0;
    for (uint64_t n : data) all += n;
    return all ? double(data[size_t(port)]) / double(all) : 0;
  }
};

struct Outcome {
  Phase warm, grey, healing, healed;
  QpStats st;
  bool ok = false;
};

// Whether the wire drops a frame `k` that host `from` sent on `plane` (0-3)
// while the fault lasts.
using LossModel =
    std::function<bool(int from, int plane, const codec::Packet& k, std::mt19937_64& rng)>;

LossModel random_loss(uint32_t planes, double p) {
  return [planes, p](int, int plane, const codec::Packet&, std::mt19937_64& rng) {
    return (planes >> plane & 1) && std::uniform_real_distribution<double>(0, 1)(rng) < p;
  };
}

// Writes `n` bytes from one QP over 4 planes (0-3 here): twice while `drop`
// decides each frame's fate in both directions (a warm-up, then the
// measured phase), then three times with the fault gone (the plane's
// smoothed rate falling for two, then measured). Every write is checked
// byte for byte.
Outcome run(const EngineConfig& cfg, const LossModel& drop, size_t n, uint64_t seed) {
  PairOptions o;
  o.cfg = cfg;
  o.seed = seed;
  // The window, not the planes, limits the QP (as the CPU does on a host):
  // no plane is ever full, so the spray alone decides each plane's share.
  o.gbps = 40;
  o.cfg.default_cc.nscc.max_cwnd = 128 << 10;
  o.mtu = 4096;
  constexpr int kWrites = 5;
  Outcome out;
  Pair p(o);
  auto [q0, q1] = p.connect();
  Buffer src(p.e(0), p.h(0).pd, kWrites * n, 1, kAccessLocalWrite);
  Buffer dst(p.e(1), p.h(1).pd, kWrites * n, 2, kAccessLocalWrite | kAccessRemoteWrite);
  std::mt19937_64 rng(seed);
  bool faulty = true;
  Phase* ph = &out.warm;
  p.hook = [&](int from, uint8_t port, std::vector<uint8_t>& fr, Time) {
    Hook h;
    auto k = parse_or_die(fr);
    const int plane = port - 1;  // the harness numbers its ports from 1
    if (from == 0 && codec::is_data_opcode(k.bth.opcode) && plane >= 0 && plane < kPlanes)
      ph->data[size_t(plane)]++;
    h.drop = faulty && drop(from, plane, k, rng);
    return h;
  };
  Phase* phases[kWrites] = {&out.warm, &out.grey, &out.healing, &out.healing, &out.healed};
  std::vector<Wc> wc;
  for (int i = 0; i < kWrites; i++) {
    ph = phases[i];
    faulty = i < 2;
    if (!post_write(p.e(0), q0, src, dst, i * n, n, uint64_t(i)).ok()) return out;
    if (!p.run(
            [&] {
              p.poll(0, p.h(0).scq, wc);
              return wc.size() >= size_t(i + 1);
            },
            60'000'000'000))
      return out;
    if (wc.back().status != kWcSuccess) return out;
  }
  out.st = *p.e(0).qp_stats(q0);
  out.ok = !std::memcmp(src.bytes.data(), dst.bytes.data(), kWrites * n);
  return out;
}

// The same configuration with the lossy-plane rule off.
EngineConfig without_rule(EngineConfig cfg) {
  cfg.paths.plane_lossy_ppm = 0;
  return cfg;
}

// Plane 1 losing 5% (both directions), 64 MiB per write: with `on`, then
// with the lossy-plane rule off.
std::pair<Outcome, Outcome> plane1_loss5_with_and_without_rule(const EngineConfig& on) {
  const size_t n = 64 << 20;
  return {run(on, random_loss(1u << 1, 0.05), n, 3),
          run(without_rule(on), random_loss(1u << 1, 0.05), n, 3)};
}

TEST(GreyFailure, LossyPlaneIsDownWeightedAndReturnsWhenHealed) {
  // Plane 1 loses 5% of its frames (both directions). Down-weighted to 1/8
  // (plane_lossy_div = 8) it carries a small share of the data, and far
  // fewer packets need resending; without the lossy-plane rule
  // (plane_lossy_ppm = 0) every plane keeps its quarter. Once the loss ends
  // the plane gets its share back.
  EngineConfig on;
  ASSERT_GT(on.paths.plane_lossy_ppm, 0u);
  on.paths.plane_lossy_div = 8;
  auto [a, b] = plane1_loss5_with_and_without_rule(on);
  ASSERT_TRUE(a.ok);
  ASSERT_TRUE(b.ok);
  EXPECT_GE(a.st.plane_lossy, 1u);
  EXPECT_EQ(b.st.plane_lossy, 0u);
  // 1/8 of plane 1's active EVs: about 1/25 of the spray.
  EXPECT_LT(a.grey.share(1), 0.08) << "plane 1 kept its share while losing 5%";
  EXPECT_GT(a.grey.share(1), 0.0)
      << "a down-weighted plane still carries some data (it is measured)";
  EXPECT_GT(b.grey.share(1), 0.15);  // (plane suspicion retires it now and then)
  for (int port : {0, 2, 3}) EXPECT_GT(a.grey.share(port), 0.28);
  EXPECT_LT(a.st.tx_rtx_pkts * 2, b.st.tx_rtx_pkts)
      << "with " << a.st.tx_rtx_pkts << " and without " << b.st.tx_rtx_pkts << " retransmissions";
  // Healed: its share returns (two writes after the loss ended let its
  // smoothed rate fall; the next is measured).
  EXPECT_GT(a.healed.share(1), 0.22);
}

TEST(GreyFailure, LossEveryPlaneSeesMovesNoShare) {
  // A receiver that drops (or a fabric losing everywhere) is no reason to
  // prefer a plane: every plane keeps its quarter.
  EngineConfig cfg;
  Outcome a = run(cfg, random_loss(0xf, 0.02), 32 << 20, 5);
  ASSERT_TRUE(a.ok);
  EXPECT_EQ(a.st.plane_lossy, 0u);
  for (int port = 0; port < kPlanes; port++) {
    EXPECT_GT(a.grey.share(port), 0.20) << "plane " << port;
    EXPECT_LT(a.grey.share(port), 0.30) << "plane " << port;
  }
}

TEST(GreyFailure, TwoLossyPlanesOfFourAreBothDownWeighted) {
  EngineConfig cfg;
  cfg.paths.plane_lossy_div = 8;
  Outcome a = run(cfg, random_loss(0b0110, 0.05), 64 << 20, 7);
  ASSERT_TRUE(a.ok);
  EXPECT_GE(a.st.plane_lossy, 2u);
  EXPECT_LT(a.grey.share(1), 0.1);
  EXPECT_LT(a.grey.share(2), 0.1);
  EXPECT_GT(a.grey.share(0), 0.4);
  EXPECT_GT(a.grey.share(3), 0.4);
}

TEST(GreyFailure, CongestionBurstsMoveNoShare) {
  // A queue overflowing drops a run of frames on one plane, then on
  // another: silent losses (no trimming here) in bursts, the way a tbf or a
  // switch buffer drops. Over time every plane sees as many, and no plane
  // may lose its share for a burst (on a network-bound fabric that share is
  // capacity).
  uint64_t frames = 0;
  int burst_plane = -1;
  uint32_t burst_left = 0;
  LossModel bursts = [&](int, int plane, const codec::Packet&, std::mt19937_64& rng) {
    if (++frames % 1500 == 0) {  // about 40 packets on each plane in a window of 256
      burst_plane = int(rng() % kPlanes);
      burst_left = 24;
    }
    if (plane != burst_plane || !burst_left) return false;
    burst_left--;
    return true;
  };
  EngineConfig cfg;
  Outcome a = run(cfg, bursts, 32 << 20, 9);
  ASSERT_TRUE(a.ok);
  EXPECT_GT(a.st.tx_rtx_pkts, 100u);
  EXPECT_EQ(a.st.plane_lossy, 0u);
  for (int port = 0; port < kPlanes; port++)
    EXPECT_GT(a.grey.share(port), 0.20) << "plane " << port;
}

TEST(GreyFailure, ByDefaultALossyPlaneKeepsItsShareAndItsEvs) {
  // The defaults keep the plane's share (its capacity) and stop retiring
  // its EVs: the same losses are repaired, with far fewer EV retirements
  // (and K probes each) than without the rule.
  EngineConfig on;
  ASSERT_EQ(on.paths.plane_lossy_div, 1u);
  ASSERT_TRUE(on.paths.plane_lossy_keep_evs);
  auto [a, b] = plane1_loss5_with_and_without_rule(on);
  ASSERT_TRUE(a.ok);
  ASSERT_TRUE(b.ok);
  EXPECT_GE(a.st.plane_lossy, 1u);
  EXPECT_GT(a.grey.share(1), 0.22);
  // (Most of those left come before the plane is judged lossy: 4 windows
  // and more of its packets.)
  EXPECT_LT(a.st.ev_assumed_bad * 2, b.st.ev_assumed_bad)
      << "with " << a.st.ev_assumed_bad << " and without " << b.st.ev_assumed_bad << " EVs retired";
  EXPECT_LT(a.st.tx_probe_pkts * 2, b.st.tx_probe_pkts);
}

TEST(GreyFailure, AnEvThatAlwaysLosesIsRetiredOnALossyPlane) {
  // Plane 1 loses 5% everywhere, and every frame of 1 EV in 16 on it (a
  // broken path inside the lossy plane). Those EVs are still retired after
  // a loss or two each time they return, so they carry no more data than
  // when every loss retires its EV.
  uint64_t black = 0;  // data packets sent on the broken EVs while the fault lasts
  uint64_t frames = 0;
  auto lossy = random_loss(1u << 1, 0.05);
  LossModel model = [&](int from, int plane, const codec::Packet& k, std::mt19937_64& rng) {
    // The paths break once the plane has been lossy for a while (a broken
    // EV found earlier is retired by its first loss and its probes fail).
    const bool late = from == 0 ? ++frames > 12'000 : frames > 12'000;
    const bool broken =
        late && plane == 1 && (codec::ev_from_wire(k.ip, k.udp, codec::EvFmtMode::kStev) & 15) == 0;
    if (broken && from == 0 && codec::is_data_opcode(k.bth.opcode)) black++;
    return broken || lossy(from, plane, k, rng);
  };
  Outcome a = run(EngineConfig{}, model, 64 << 20, 11);
  const uint64_t black_on = black;
  black = frames = 0;
  Outcome b = run(without_rule(EngineConfig{}), model, 64 << 20, 11);
  const uint64_t black_off = black;
  ASSERT_TRUE(a.ok);
  ASSERT_TRUE(b.ok);
  EXPECT_GE(a.st.plane_lossy, 1u);
  EXPECT_GT(black_on, 0u) << "no data went to a broken EV: the fault was not exercised";
  EXPECT_LE(black_on, 2 * black_off + 16) << "broken EVs kept in use on the lossy plane";
}

}  // namespace
}  // namespace mrc::testing
