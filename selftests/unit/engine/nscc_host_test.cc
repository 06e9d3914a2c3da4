// NSCC on a software host: the engine threads of both ends sleep and wake,
// so most round trips carry tens to hundreds of microseconds of scheduling
// delay that no queue causes, while the smallest RTT seen (both threads
// awake) is a few microseconds. A target delay derived from that minimum
// reads every wake-up as congestion; EngineConfig::cc_min_target is the
// floor that keeps NSCC's window open there (off by default: it also lets
// a shaped bottleneck queue more). Performance.md, "NSCC on software
// hosts", has the measurements on veth.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/nscc.hpp"
#include "engine/harness.hpp"

namespace mrc::testing {
namespace {

using namespace core;

constexpr size_t kMsg = 1 << 20;
constexpr int kMsgs = 16;

struct Outcome {
  bool ok = false;
  Time elapsed = 0;
  uint64_t rtx = 0;
};

// One QP writes kMsgs x 1 MiB over 4 planes of 2.5 Gbit/s. Every frame reaches
// its host after a scheduling delay: none for half of the frames (the
// receiving thread was awake), 50-250 us for the rest, in order per host (a
// frame that waits holds back the ones behind it, as a sleeping thread
// does). With the default floor (4 us) quick adapt reads those delays as
// congestion: seeds 2 and 5 below fall to 1.8 and 2.3 of 9.3 Gbit/s.
Outcome transfer(bool cc, Time min_target, uint64_t seed) {
  PairOptions o;
  o.seed = seed;
  o.mtu = 4096;
  o.gbps = 2.5;  // per plane: 10 Gbit/s over the 4, about what one mrc QP moves on veth
  o.cfg.default_cc.enabled = cc;
  o.cfg.cc_min_target = min_target;
  // The same cap as without CC (the MPR window: 8 x 128 packets of 4 KiB),
  // so that only NSCC's own decisions can make a difference.
  o.cfg.default_cc.nscc.max_cwnd = 8 * 128 * 4096;
  Pair p(o);
  auto [q0, q1] = p.connect();
  (void)q1;
  Buffer src(p.e(0), p.h(0).pd, kMsgs * kMsg, 1, kAccessLocalWrite);
  Buffer dst(p.e(1), p.h(1).pd, kMsgs * kMsg, 2, kAccessLocalWrite | kAccessRemoteWrite);
  p.hook = host_wakeups(seed);
  Outcome out;
  for (int i = 0; i < kMsgs; i++)
    if (!post_write(p.e(0), q0, src, dst, size_t(i) * kMsg, kMsg, uint64_t(i)).ok()) return out;
  std::vector<Wc> wc;
  const Time start = p.now;
  const bool done = p.run([&] {
    p.poll(0, p.h(0).scq, wc);
    return wc.size() >= size_t(kMsgs);
  });
  out.elapsed = p.now - start;
  out.rtx = p.e(0).qp_stats(q0)->tx_rtx_pkts;
  bool all_ok = done && wc.size() == size_t(kMsgs);
  for (const Wc& w : wc) all_ok = all_ok && w.status == kWcSuccess;
  out.ok = all_ok && !std::memcmp(src.bytes.data(), dst.bytes.data(), kMsgs * kMsg);
  return out;
}

double gbps(const Outcome& o) { return double(kMsgs * kMsg) * 8 / double(o.elapsed); }

constexpr Time kHostFloor = 300'000;  // above the 50-250 us wake-ups of transfer()

// Without a queue anywhere and with a target floor above the hosts'
// scheduling delay, NSCC moves about what no congestion control moves
// (here: all of it, seed for seed).
TEST(NsccHost, FloorAboveSchedulingDelayKeepsTheWindowOpen) {
  for (uint64_t seed = 1; seed <= 6; seed++) {
    const Outcome none = transfer(false, kHostFloor, seed);
    const Outcome nscc = transfer(true, kHostFloor, seed);
    ASSERT_TRUE(none.ok) << "seed " << seed;
    ASSERT_TRUE(nscc.ok) << "seed " << seed;
    EXPECT_GE(gbps(nscc), 0.8 * gbps(none))
        << "seed " << seed << ": NSCC " << gbps(nscc) << " Gbit/s, no CC " << gbps(none)
        << " Gbit/s (" << nscc.rtx << " retransmissions)";
  }
}

// The floor applies to derived targets only: a profile's own target_delay
// is used as given (it may be below the floor).
TEST(NsccHost, ProfileTargetOverridesTheFloor) {
  CcProfile prof;
  prof.nscc.target_delay = 8'000;
  Nscc cc;
  cc.configure(prof, 4096, 1 << 20, 100'000);
  EXPECT_EQ(cc.target(), 8'000u);
  prof.nscc.target_delay = 0;
  cc.configure(prof, 4096, 1 << 20, 100'000);
  EXPECT_EQ(cc.target(), 100'000u);
  cc.on_ack(4096, 250'000, false, 0, 1'000'000);  // base RTT 250 us > floor
  // above the ceiling (32 us) too: the floor wins, the ceiling is never below it
  EXPECT_EQ(cc.target(), 100'000u);
  NsccStart no_ceiling;
  no_ceiling.max_target = 0;
  cc.configure(prof, 4096, 1 << 20, 100'000, no_ceiling);
  cc.on_ack(4096, 250'000, false, 0, 1'000'000);
  EXPECT_EQ(cc.target(), 250'000u);
}

// QpStats::cc_ecn_decreases counts the window's decreases on ECN marks (the
// marked-and-delayed quadrant) and nothing else: not the unmarked acks, not
// the marked acks within a base RTT of the last decrease.
TEST(NsccHost, EcnDecreasesAreCounted) {
  Nscc cc;
  cc.configure(CcProfile{}, 4096, 1 << 20, kNsccMinTarget);
  Time now = 1'000'000;
  cc.on_ack(4096, 10'000, false, 64 << 10, now);  // base RTT 10 us
  for (int i = 0; i < 200; i++) cc.on_ack(4096, 200'000, false, 64 << 10, now += 5'000);
  EXPECT_EQ(cc.ecn_decreases(), 0u);
  uint64_t decreases = 0;
  for (int i = 0; i < 400; i++) {
    // marked acks 4 us apart: several per base RTT
    cc.on_ack(4096, 200'000, true, 64 << 10, now += 4'000);
    if (cc.last_quadrant() == Nscc::kDecrease) decreases++;
  }
  EXPECT_GT(decreases, 10u);
  EXPECT_LT(decreases, 400u);  // at most one per base RTT
  EXPECT_EQ(cc.ecn_decreases(), decreases);
  cc.configure(CcProfile{}, 4096, 1 << 20, kNsccMinTarget);
  EXPECT_EQ(cc.ecn_decreases(), 0u);  // per configuration, as the other counters
}

}  // namespace
}  // namespace mrc::testing
