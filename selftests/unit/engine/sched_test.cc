// How the engine shares the wire between QPs with data to send: round
// robin, each QP sending up to `tx_quantum` payload bytes per turn (fewer
// switches between QPs' state), or one packet per turn with tx_quantum 0.
// Either way every QP progresses at the same pace: no QP's write completes
// while the others are still far behind.
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
  for (int i = 0; i < kQps; i++) {
    Sge sg{src.addr(size_t(i) * kBytes), uint32_t(kBytes), src.mr.lkey};
    SendWr wr;
    wr.wr_id = uint64_t(i);
    wr.opcode = WrOpcode::kRdmaWrite;
    wr.sg_list = &sg;
    wr.num_sge = 1;
    wr.remote_addr = dst.addr(size_t(i) * kBytes);
    wr.rkey = dst.mr.rkey;
    EXPECT_TRUE(p.e(0).post_send(qps[size_t(i)].first, wr).ok());
  }
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

}  // namespace
}  // namespace mrc::testing
