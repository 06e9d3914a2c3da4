// How the engine shares the wire between QPs with data to send: round
// robin, each QP sending up to `tx_quantum` payload bytes per turn (fewer
// switches between QPs' state), or one packet per turn with tx_quantum 0.
// Either way every QP progresses at the same pace: no QP's write completes
// while the others are still far behind. And each QP's timers fire on time
// however many QPs have deadlines.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <vector>

#include "engine/harness.hpp"

namespace mrc::testing {
namespace {

using namespace core;

constexpr int kQps = 8;
constexpr size_t kBytes = 64 << 10;  // per QP: 64 packets of 1 KiB

struct Schedule {
  std::vector<uint32_t> order;  // destination QP of each first transmission, in order
  // QP (requester side) -> data packets sent when its write completed
  std::map<uint32_t, size_t> done_at;
  std::vector<uint64_t> tx_data_bytes;  // per QP
  bool ok = false;
};

// Posts one write of `len` bytes on each QP: QP i's slice of src to its
// slice of dst (wr_id i). False if any post fails.
bool post_writes(Pair& p, const std::vector<std::pair<uint32_t, uint32_t>>& qps, Buffer& src,
                 Buffer& dst, size_t len) {
  for (size_t i = 0; i < qps.size(); i++)
    if (!post_write(p.e(0), qps[i].first, src, dst, i * len, len, i).ok()) return false;
  return true;
}

Schedule run(uint32_t quantum, uint64_t seed) {
  PairOptions o;
  o.seed = seed;
  o.cfg.tx_quantum = quantum;
  o.cfg.default_cc.enabled = false;  // nothing but the turns limits a QP
  Schedule s;
  Pair p(o);
  std::vector<std::pair<uint32_t, uint32_t>> qps;
  for (int i = 0; i < kQps; i++) qps.push_back(p.connect());
  Buffer src(p.e(0), p.h(0).pd, kQps * kBytes, 1, kAccessLocalWrite);
  Buffer dst(p.e(1), p.h(1).pd, kQps * kBytes, 2, kAccessLocalWrite | kAccessRemoteWrite);
  p.hook = [&](int from, uint8_t, std::vector<uint8_t>& fr, Time) {
    auto k = parse_or_die(fr);
    if (from == 0 && codec::is_data_opcode(k.bth.opcode) && !k.bth.rtx)
      s.order.push_back(k.bth.dqpn);
    return Hook{};
  };
  EXPECT_TRUE(post_writes(p, qps, src, dst, kBytes));
  std::vector<Wc> wc;
  const bool finished = p.run([&] {
    const size_t before = wc.size();
    p.poll(0, p.h(0).scq, wc);
    for (size_t i = before; i < wc.size(); i++)
      if (wc[i].status == kWcSuccess) s.done_at[qps[wc[i].wr_id].first] = s.order.size();
    return wc.size() >= size_t(kQps);
  });
  for (auto& [q0, q1] : qps) s.tx_data_bytes.push_back(p.e(0).qp_stats(q0)->tx_data_bytes);
  s.ok = finished && s.done_at.size() == size_t(kQps) &&
         !std::memcmp(src.bytes.data(), dst.bytes.data(), kQps * kBytes);
  return s;
}

// Lengths of the runs of consecutive packets to one QP among the first `n`.
std::vector<size_t> runs(const std::vector<uint32_t>& order, size_t n) {
  std::vector<size_t> r;
  for (size_t i = 0; i < std::min(n, order.size()); i++) {
    if (i && order[i] == order[i - 1])
      r.back()++;
    else
      r.push_back(1);
  }
  return r;
}

TEST(QpScheduling, EachTurnSendsAQuantum) {
  for (uint64_t seed : {1, 2}) {
    Schedule s = run(16384, seed);
    ASSERT_TRUE(s.ok) << "seed " << seed;
    // While every QP has data (the first half of the packets), each turn is
    // 16 packets of 1 KiB and the QPs take turns.
    auto r = runs(s.order, kQps * kBytes / 1024 / 2);
    ASSERT_GE(r.size(), size_t(kQps));
    for (size_t i = 0; i < r.size(); i++) EXPECT_EQ(r[i], 16u) << "turn " << i << ", seed " << seed;
  }
}

TEST(QpScheduling, QuantumZeroSendsOnePacketPerTurn) {
  Schedule s = run(0, 1);
  ASSERT_TRUE(s.ok);
  auto r = runs(s.order, kQps * kBytes / 1024 / 2);
  EXPECT_EQ(*std::max_element(r.begin(), r.end()), 1u);
}

TEST(QpScheduling, EveryQpProgressesAtTheSamePace) {
  for (uint32_t quantum : {0u, 16384u, 32768u}) {
    Schedule s = run(quantum, 3);
    ASSERT_TRUE(s.ok) << "quantum " << quantum;
    const size_t total = kQps * kBytes / 1024;
    // First-in-first-out would finish the first write after 1/8 of the
    // packets; round robin finishes none before the last round.
    size_t first = total;
    for (auto& [q, at] : s.done_at) first = std::min(first, at);
    const size_t round = kQps * std::max<size_t>(1, quantum / 1024);
    EXPECT_GE(first + round, total) << "quantum " << quantum;
    for (uint64_t b : s.tx_data_bytes) EXPECT_EQ(b, kBytes) << "quantum " << quantum;
  }
}

// A QP whose congestion window is full leaves the transmit list and comes
// back with the acknowledgement that opens it: with windows of 4 packets,
// 32 QPs each write 64 KiB, every write completes without a tail-loss
// probe or an ACK timeout (a QP left out would need one of those to send
// again), and the data arrives intact.
TEST(QpScheduling, AQpBlockedByItsWindowSendsAgainOnItsAck) {
  constexpr int kMany = 32;
  PairOptions o;
  o.seed = 9;
  o.cfg.default_cc.nscc.max_cwnd = 4 << 10;
  Pair p(o);
  std::vector<std::pair<uint32_t, uint32_t>> qps;
  for (int i = 0; i < kMany; i++) qps.push_back(p.connect());
  Buffer src(p.e(0), p.h(0).pd, kMany * kBytes, 1, kAccessLocalWrite);
  Buffer dst(p.e(1), p.h(1).pd, kMany * kBytes, 2, kAccessLocalWrite | kAccessRemoteWrite);
  ASSERT_TRUE(post_writes(p, qps, src, dst, kBytes));
  std::vector<Wc> wc;
  ASSERT_TRUE(p.run([&] {
    p.poll(0, p.h(0).scq, wc);
    return wc.size() >= size_t(kMany);
  }));
  for (const Wc& w : wc) EXPECT_EQ(w.status, kWcSuccess);
  EXPECT_EQ(std::memcmp(src.bytes.data(), dst.bytes.data(), kMany * kBytes), 0);
  for (auto& [q0, q1] : qps) {
    auto st = p.e(0).qp_stats(q0);
    EXPECT_LE(st->cwnd_bytes, uint64_t(4 << 10));
    EXPECT_EQ(st->tlp_probes, 0u);
    EXPECT_EQ(st->timeouts, 0u);
  }
}

// Timers of many QPs (a heap of deadlines): the last packet of every QP's
// write is lost once, a tail loss that nothing but the QP's own tail-loss
// probe or ACK timeout repairs. Every write completes, soon after its
// timer is due, whatever the other QPs' deadlines.
TEST(QpTimers, TailLossOfEveryQpIsRepairedByItsOwnTimer) {
  constexpr int kMany = 64;
  constexpr size_t kLen = 8 << 10;
  PairOptions o;
  o.seed = 7;
  Pair p(o);
  std::vector<std::pair<uint32_t, uint32_t>> qps;
  for (int i = 0; i < kMany; i++) qps.push_back(p.connect());
  Buffer src(p.e(0), p.h(0).pd, kMany * kLen, 1, kAccessLocalWrite);
  Buffer dst(p.e(1), p.h(1).pd, kMany * kLen, 2, kAccessLocalWrite | kAccessRemoteWrite);
  std::map<uint32_t, int> dropped;  // destination QP -> tail packets dropped
  p.hook = [&](int from, uint8_t, std::vector<uint8_t>& fr, Time) {
    Hook h;
    auto k = parse_or_die(fr);
    if (from == 0 && k.bth.opcode == MRC_OP_WRITE_LAST && !k.bth.rtx && !dropped[k.bth.dqpn]) {
      dropped[k.bth.dqpn]++;
      h.drop = true;
    }
    return h;
  };
  ASSERT_TRUE(post_writes(p, qps, src, dst, kLen));
  const Time start = p.now;
  std::vector<Wc> wc;
  ASSERT_TRUE(p.run([&] {
    p.poll(0, p.h(0).scq, wc);
    return wc.size() >= size_t(kMany);
  }));
  for (const Wc& w : wc) EXPECT_EQ(w.status, kWcSuccess);
  EXPECT_EQ(dropped.size(), size_t(kMany));
  EXPECT_EQ(std::memcmp(src.bytes.data(), dst.bytes.data(), kMany * kLen), 0);
  // A tail-loss probe (or, failing that, the RACK timer) is due within a few
  // RTTs plus min_rto; the 16.8 ms ACK timeout (timeout 10 here: 4 ms) only
  // if a timer were lost.
  uint64_t tlps = 0, timeouts = 0;
  for (auto& [q0, q1] : qps) {
    auto st = p.e(0).qp_stats(q0);
    tlps += st->tlp_probes;
    timeouts += st->timeouts;
  }
  EXPECT_EQ(timeouts, 0u);
  EXPECT_GE(tlps, uint64_t(kMany));
  EXPECT_LT(p.now - start, Time(2'000'000));
}

}  // namespace
}  // namespace mrc::testing
