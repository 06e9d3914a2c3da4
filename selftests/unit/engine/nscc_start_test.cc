// NSCC's start-up and its answer to delay without ECN (EngineConfig::
// cc_init_window, cc_delay_md): a window that starts small and doubles per
// round trip, and a standing queue (the smallest RTT of a period above the
// base RTT by more than the target) that decreases the window when no switch
// marks ECN. Documentation/design.md, "Congestion control"; performance.md,
// "Start-up".
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/nscc.hpp"
#include "engine/harness.hpp"

namespace mrc::testing {
namespace {

using namespace core;

constexpr uint32_t kMtu = 4096;
constexpr uint64_t kMax = 2u << 20;

// Quick adapt off: it answers a single late sample on its own (and would
// hide what these tests look at); the transfer test below keeps it on.
Nscc make(const NsccStart& s) {
  CcProfile prof;
  prof.nscc.disable_qa = true;
  Nscc cc;
  cc.configure(prof, kMtu, kMax, kNsccMinTarget, s);
  return cc;
}

constexpr NsccStart kDelay{64 * 1024, true, 0};  // cc_delay_md on (off by default)

TEST(NsccStart, WindowStartsSmallAndDoublesPerRoundTrip) {
  Nscc cc = make(NsccStart{});
  EXPECT_EQ(cc.cwnd(), 64u * 1024);
  EXPECT_TRUE(cc.slow_start());
  // One window acknowledged at the base RTT (no queue): at least doubled.
  Time now = 1'000'000;
  const uint64_t w0 = cc.cwnd();
  for (uint64_t acked = 0; acked < w0; acked += kMtu) {
    now += 1'000;
    cc.on_ack(kMtu, 20'000, false, w0, now);
  }
  EXPECT_GE(cc.cwnd(), 2 * w0);
}

TEST(NsccStart, OldStartIsTheMaximum) {
  Nscc cc = make(NsccStart{0, false, 0});
  EXPECT_EQ(cc.cwnd(), kMax);
  EXPECT_FALSE(cc.slow_start());
}

// Every RTT sample 500 us above the base (a queue that stands): with
// delay_md the window falls and slow start ends; without it (the old
// behaviour) high delay without ECN is fair increase and the window stays.
uint64_t under_standing_queue(bool delay_md, uint64_t* standing = nullptr) {
  Nscc cc = make(NsccStart{delay_md ? 64u * 1024 : 0, delay_md, 0});
  Time now = 1'000'000;
  for (int i = 0; i < 1000; i++) {  // no queue: slow start to the maximum
    now += 1'000;
    cc.on_ack(kMtu, 20'000, false, cc.cwnd(), now);
  }
  const uint64_t start = cc.cwnd();
  for (int i = 0; i < 2000; i++) {
    now += 5'000;
    cc.on_ack(kMtu, 520'000, false, cc.cwnd(), now);
  }
  if (standing) *standing = cc.standing();
  return cc.cwnd() * 100 / start;  // percent of the first window
}

TEST(NsccStart, StandingQueueWithoutEcnDecreasesTheWindow) {
  uint64_t standing = 0;
  // down to the floor, a quarter of the maximum
  EXPECT_EQ(under_standing_queue(true, &standing), 25u);
  EXPECT_EQ(standing, 500'000u);
  EXPECT_GE(under_standing_queue(false), 100u);
}

// Wake-up delays are not a queue: most samples are late, but every period
// has one at the base RTT, so its minimum shows no standing queue and the
// window is not decreased.
TEST(NsccStart, DelayThatDoesNotStandIsNoQueue) {
  Nscc cc = make(kDelay);
  Time now = 1'000'000;
  cc.on_ack(kMtu, 20'000, false, 0, now);
  uint64_t lowest = cc.cwnd();
  for (int i = 0; i < 4000; i++) {
    now += 5'000;
    const Time rtt = i % 4 == 0 ? 21'000 : 200'000;
    cc.on_ack(kMtu, rtt, false, cc.cwnd(), now);
    lowest = std::min(lowest, cc.cwnd());
  }
  EXPECT_EQ(cc.standing(), 1'000u);
  EXPECT_GE(lowest, 64u * 1024);
  EXPECT_EQ(cc.cwnd(), kMax);
}

// The target derived from the base RTT has a ceiling (EngineConfig::
// cc_max_target, 32 us): below it the target is the base RTT, above it the
// ceiling.
TEST(NsccStart, DerivedTargetHasACeiling) {
  Nscc cc = make(NsccStart{});
  cc.on_ack(kMtu, 300'000, false, 0, 1'000'000);
  EXPECT_EQ(cc.base_rtt(), 300'000u);
  EXPECT_EQ(cc.target(), kNsccMaxTarget);
  cc.on_ack(kMtu, 20'000, false, 0, 1'001'000);
  EXPECT_EQ(cc.target(), 20'000u);
  cc.on_ack(kMtu, 1'000, false, 0, 1'002'000);
  EXPECT_EQ(cc.target(), kNsccMinTarget);
  NsccStart none;
  none.max_target = 0;
  Nscc old = make(none);
  old.on_ack(kMtu, 300'000, false, 0, 1'000'000);
  EXPECT_EQ(old.target(), 300'000u);
}

// A cold start whose first round trips already met a queue: the QP learns a
// base RTT of 300 us where the path's is 10 us, and the queue then stands
// (RTTs of 1.3 ms, 300 KB/ms delivered). Quick adapt must answer it: with
// the ceiling its threshold is 4 x 32 us, and the window falls to what a
// window of the QP achieved. Without the ceiling the threshold is 4 x 300 us
// and the window stays at the maximum (the cold starts of performance.md,
// "Start-up", that took 60-580 ms to reach 90% of capacity).
uint64_t window_after_hidden_queue(uint64_t max_target) {
  CcProfile prof;  // quick adapt on
  NsccStart s;
  s.init_window = 0;  // the default start: the maximum window
  s.max_target = max_target;
  Nscc cc;
  cc.configure(prof, kMtu, kMax, kNsccMinTarget, s);
  Time now = 1'000'000;
  cc.on_ack(kMtu, 300'000, false, kMax / 4, now);  // the first sample
  for (int i = 0; i < 400; i++) {
    now += 13'000;  // 4 KB every 13 us: about 300 KB per ms
    cc.on_ack(kMtu, 1'300'000, false, kMax / 4, now);
  }
  EXPECT_EQ(cc.base_rtt(), 300'000u);
  return cc.cwnd();
}

TEST(NsccStart, QuickAdaptAnswersAQueueHiddenInTheBaseRtt) {
  EXPECT_LT(window_after_hidden_queue(kNsccMaxTarget), kMax / 4);
  EXPECT_EQ(window_after_hidden_queue(0), kMax);
}

// One QP over 4 planes of 1 Gbit/s (the harness queues what a link cannot
// carry yet, without limit and without ECN): with the defaults the queue the
// transfer leaves standing is under half of what the old start-up (the
// whole maximum window at once, delay ignored) leaves, and the data arrive.
struct Queue {
  bool ok = false;
  Time queue = 0, min_rtt = 0, elapsed = 0;
};

Queue transfer(bool new_start) {
  PairOptions o;
  o.mtu = 4096;
  o.latency = 10'000;
  // A maximum of 256 KiB: the decrease's floor is then the initial window
  // (max(cc_init_window, max_cwnd / 4)).
  o.cfg.default_cc.nscc.max_cwnd = 256 * 1024;
  o.cfg.cc_delay_md = new_start;
  o.cfg.cc_init_window = new_start ? 64 * 1024 : 0;
  Pair p(o);
  // Not a structured binding: clang 14 refuses to capture one in a lambda.
  const auto q0 = p.connect().first;
  constexpr size_t kLen = 16u << 20;
  Buffer src(p.e(0), p.h(0).pd, kLen, 1, kAccessLocalWrite);
  Buffer dst(p.e(1), p.h(1).pd, kLen, 2, kAccessLocalWrite | kAccessRemoteWrite);
  Queue out;
  // The sender's smoothed RTT above its smallest, at every frame it sends
  // after the first 2 MiB: the median is the queue that stands.
  std::vector<Time> q;
  // A shaper of 1 Gbit/s per plane in the data direction, as tbf in the
  // fabric: its queue has no limit (the harness's own links take a frame
  // only when they can send it at once, so they never queue).
  Time shaper[17] = {};
  p.hook = [&](int from, uint8_t port, std::vector<uint8_t>& fr, Time now) {
    Hook h;
    if (from != 0) return h;
    const Time arrive = now + o.latency;
    shaper[port] = std::max(shaper[port], arrive) + Time(fr.size() * 8);  // 1 bit per ns
    h.extra_delay = shaper[port] - arrive;
    auto st = p.e(0).qp_stats(q0);
    if (st && st->min_rtt_ns && st->tx_data_pkts * 4096 > (2u << 20))
      q.push_back(st->srtt_ns - std::min(st->srtt_ns, st->min_rtt_ns));
    return h;
  };
  for (size_t i = 0; i < kLen / (1 << 20); i++)
    if (!post_write(p.e(0), q0, src, dst, i << 20, 1 << 20, i).ok()) return out;
  std::vector<Wc> wc;
  const Time start = p.now;
  const bool done = p.run([&] {
    p.poll(0, p.h(0).scq, wc);
    return wc.size() >= kLen / (1 << 20);
  });
  out.elapsed = p.now - start;
  out.min_rtt = p.e(0).qp_stats(q0)->min_rtt_ns;
  if (!q.empty()) {
    std::nth_element(q.begin(), q.begin() + long(q.size() / 2), q.end());
    out.queue = q[q.size() / 2];
  }
  out.ok = done && !std::memcmp(src.bytes.data(), dst.bytes.data(), kLen);
  return out;
}

TEST(NsccStart, ShapedPlanesWithoutEcnKeepTheQueueShort) {
  const Queue now = transfer(true), old = transfer(false);
  ASSERT_TRUE(now.ok);
  ASSERT_TRUE(old.ok);
  ASSERT_GT(now.min_rtt, 0u);
  std::printf("queue %llu ns against %llu ns (base RTT %llu ns)\n", (unsigned long long)now.queue,
              (unsigned long long)old.queue, (unsigned long long)now.min_rtt);
  EXPECT_LT(now.queue * 2, old.queue) << "queue " << now.queue << " ns against " << old.queue
                                      << " ns (base RTT " << now.min_rtt << " ns)";
  EXPECT_LE(now.queue, 3 * now.min_rtt);
  // The short queue costs no goodput: within 10% of the old start-up.
  EXPECT_LE(now.elapsed, old.elapsed + old.elapsed / 10)
      << now.elapsed << " ns against " << old.elapsed << " ns";
}

}  // namespace
}  // namespace mrc::testing
