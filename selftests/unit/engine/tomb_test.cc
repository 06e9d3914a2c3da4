// Tombstones (Engine::entomb_qp; service.md section 5, "The peers"): the QP
// of an owner that is gone answers its peer's requests with an AETH NAK
// (remote operation error) so the peer fails after one confirming resend,
// places nothing, holds none of the owner's objects, keeps its QPN while it
// lingers and is freed afterwards; their number is bounded.
#include <algorithm>
#include <cstring>

#include "engine/fixture.hpp"

namespace mrc::testing {
namespace {

constexpr Time kLinger = 5'000'000'000;

// A message delivered and verified first: the pair works before the end.
void warm_up(Fixture& f) {
  ASSERT_TRUE(f.write(100, 0, 4096).ok());
  ASSERT_TRUE(f.wait_sends(1));
  ASSERT_EQ(f.swc[0].status, kWcSuccess);
  ASSERT_TRUE(f.same(0, 4096));
  f.swc.clear();
}

TEST(Tomb, AnswersWithNakPlacesNothingAndIsFreedAfterTheLinger) {
  Fixture f(64 * 1024);
  warm_up(f);
  Engine& e1 = f.p.e(1);
  const Time t0 = f.p.now;
  auto r = e1.entomb_qp(f.q1, t0 + kLinger);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_TRUE(*r);
  EXPECT_EQ(e1.tombstone_count(), 1u);
  EXPECT_EQ(e1.stats().tombstones, 1u);
  // Holds none of its owner's objects: the CQs and the PD's region go now
  // (the region stays registered here, to show that nothing is placed
  // even where a region would take it).
  auto ql = e1.qp_list();
  EXPECT_EQ(std::count(ql.begin(), ql.end(), f.q1), 0);
  EXPECT_TRUE(e1.destroy_cq(f.p.h(1).scq).ok());
  EXPECT_TRUE(e1.destroy_cq(f.p.h(1).rcq).ok());
  EXPECT_FALSE(e1.post_send(f.q1, SendWr{}).ok());
  EXPECT_FALSE(e1.post_recv(f.q1, RecvWr{}).ok());
  EXPECT_FALSE(e1.modify_qp(f.q1, QpAttr{}, 0, 0).ok());

  // The peer writes on: its QP fails with REM_OP_ERR within a few round
  // trips, not by retry exhaustion, and nothing lands.
  std::vector<uint8_t> before(f.dst->bytes);
  std::memset(f.src->bytes.data() + 8192, 0x5a, 8192);
  const Time sent_at = f.p.now;
  ASSERT_TRUE(f.write(1, 8192, 8192).ok());
  ASSERT_TRUE(f.write(2, 16384, 1024).ok());
  ASSERT_TRUE(f.wait_sends(2, 1'000'000'000));
  const Time took = f.p.now - sent_at;
  EXPECT_EQ(f.swc[0].status, kWcRemOpErr);
  EXPECT_EQ(f.swc[1].status, kWcWrFlushErr);
  EXPECT_LT(took, Time(1'000'000)) << "the peer took " << took << " ns";
  const QpStats s0 = *f.p.e(0).qp_stats(f.q0);
  EXPECT_EQ(s0.timeouts, 0u);
  EXPECT_GE(s0.refusals_retried, 1u);
  EXPECT_EQ(f.dst->bytes, before) << "a tombstone placed data";
  const uint64_t naks = e1.stats().tomb_naks;
  EXPECT_GE(naks, 2u);  // the request and its confirming resend

  // The QPN is not reused while it lingers: new QPs get other numbers, and
  // a request for the old one still reaches the tombstone.
  QpInitAttr ia;
  ia.pd = f.p.h(1).pd;
  ia.send_cq = *e1.create_cq(64);
  ia.recv_cq = ia.send_cq;
  ia.cap.max_send_wr = 16;
  std::vector<uint32_t> fresh;
  for (int i = 0; i < 64; i++) {
    auto q = e1.create_qp(ia);
    ASSERT_TRUE(q.ok()) << q.error().message();
    EXPECT_NE(*q, f.q1);
    fresh.push_back(*q);
  }
  EXPECT_EQ(e1.tombstone_count(), 1u);
  EXPECT_TRUE(e1.qp_stats(f.q1).ok());
  // A second QP on host 0, connected to the tombstone's QPN, is refused too.
  {
    QpInitAttr ib;
    ib.pd = f.p.h(0).pd;
    ib.send_cq = f.p.h(0).scq;
    ib.recv_cq = f.p.h(0).rcq;
    ib.cap.max_send_wr = 16;
    auto q = f.p.e(0).create_qp(ib);
    ASSERT_TRUE(q.ok());
    ASSERT_TRUE(f.p.to_init(0, *q).ok());
    ASSERT_TRUE(f.p.to_rtr(0, *q, f.q1, 0).ok());
    ASSERT_TRUE(f.p.to_rts(0, *q, 0).ok());
    Sge sg{f.src->addr(0), 1024, f.src->mr.lkey};
    SendWr wr;
    wr.wr_id = 7;
    wr.opcode = WrOpcode::kRdmaWrite;
    wr.sg_list = &sg;
    wr.num_sge = 1;
    wr.remote_addr = f.dst->addr(0);
    wr.rkey = f.dst->mr.rkey;
    ASSERT_TRUE(f.p.e(0).post_send(*q, wr).ok());
    // The tombstone answers it (to its own peer, f.q0, gone to ERR: this
    // QP is not the one it knew) and places nothing.
    EXPECT_TRUE(f.p.run([&] { return e1.stats().tomb_naks > naks; }, 100'000'000));
    EXPECT_EQ(f.dst->bytes, before);
    EXPECT_TRUE(f.p.e(0).destroy_qp(*q).ok());
  }

  // Freed after the linger, not before.
  uint32_t freed[4];
  EXPECT_EQ(e1.poll_freed_tombstones(freed), 0u);
  f.p.run([&] { return e1.tombstone_count() == 0; }, kLinger);
  EXPECT_EQ(e1.tombstone_count(), 0u);
  EXPECT_GE(f.p.now, t0 + kLinger);
  EXPECT_LT(f.p.now, t0 + kLinger + 100'000'000);
  ASSERT_EQ(e1.poll_freed_tombstones(freed), 1u);
  EXPECT_EQ(freed[0], f.q1);
  EXPECT_FALSE(e1.qp_stats(f.q1).ok());
  EXPECT_EQ(e1.stats().tombstones_early, 0u);
  for (uint32_t q : fresh) EXPECT_TRUE(e1.destroy_qp(q).ok());
}

// Without the tombstone (the QP destroyed at once) the same peer learns it
// only by retry exhaustion: what the test above guards against.
TEST(Tomb, WithoutTombstoneThePeerWaitsForRetryExhaustion) {
  Fixture f(64 * 1024);
  warm_up(f);
  ASSERT_TRUE(f.p.e(1).destroy_qp(f.q1).ok());
  const Time sent_at = f.p.now;
  ASSERT_TRUE(f.write(1, 8192, 8192).ok());
  ASSERT_TRUE(f.wait_sends(1, 60'000'000'000));
  EXPECT_EQ(f.swc[0].status, kWcRetryExcErr);
  EXPECT_GT(f.p.now - sent_at, Time(1'000'000));
  EXPECT_GT(f.p.e(1).stats().rx_unknown_qp, 0u);
}

// At most max_tombstones: the oldest goes early; and a create_qp that
// would fail for want of a slot frees the oldest tombstone instead.
TEST(Tomb, TheirNumberIsBounded) {
  PairOptions o;
  o.cfg.max_tombstones = 2;
  o.cfg.max_qps = 3;
  Pair p(o);
  std::vector<uint32_t> q1;
  for (int i = 0; i < 3; i++) q1.push_back(p.connect().second);
  Engine& e1 = p.e(1);
  for (int i = 0; i < 3; i++) {
    auto r = e1.entomb_qp(q1[size_t(i)], p.now + kLinger + Time(i));
    ASSERT_TRUE(r.ok());
    EXPECT_TRUE(*r);
  }
  EXPECT_EQ(e1.tombstone_count(), 2u);
  EXPECT_EQ(e1.stats().tombstones, 3u);
  EXPECT_EQ(e1.stats().tombstones_early, 1u);
  uint32_t freed[4];
  ASSERT_EQ(e1.poll_freed_tombstones(freed), 1u);
  EXPECT_EQ(freed[0], q1[0]);  // the oldest
  // max_qps 3: one free slot, then two tombstones. New QPs take the free
  // slot, then the oldest tombstone's, then the other's; then ENOMEM.
  QpInitAttr ia;
  ia.pd = p.h(1).pd;
  ia.send_cq = p.h(1).scq;
  ia.recv_cq = p.h(1).rcq;
  ia.cap.max_send_wr = 16;
  auto a = e1.create_qp(ia);
  ASSERT_TRUE(a.ok()) << a.error().message();
  EXPECT_EQ(e1.tombstone_count(), 2u);
  auto b = e1.create_qp(ia);
  ASSERT_TRUE(b.ok()) << b.error().message();
  EXPECT_EQ(e1.tombstone_count(), 1u);
  for (uint32_t q : q1) EXPECT_NE(*b, q);
  ASSERT_EQ(e1.poll_freed_tombstones(freed), 1u);
  EXPECT_EQ(freed[0], q1[1]);
  auto c = e1.create_qp(ia);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(e1.tombstone_count(), 0u);
  EXPECT_EQ(e1.stats().tombstones_early, 3u);
  EXPECT_FALSE(e1.create_qp(ia).ok());
}

// A QP its peer cannot know yet (RESET, INIT) is destroyed at once, and so
// is every QP with max_tombstones 0.
TEST(Tomb, QpsNoPeerCanReachAreDestroyed) {
  PairOptions o;
  Pair p(o);
  QpInitAttr ia;
  ia.pd = p.h(1).pd;
  ia.send_cq = p.h(1).scq;
  ia.recv_cq = p.h(1).rcq;
  ia.cap.max_send_wr = 16;
  auto q = p.e(1).create_qp(ia);
  ASSERT_TRUE(q.ok());
  auto r = p.e(1).entomb_qp(*q, p.now + kLinger);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(*r);
  EXPECT_FALSE(p.e(1).qp_stats(*q).ok());
  EXPECT_EQ(p.e(1).tombstone_count(), 0u);

  PairOptions none;
  none.cfg.max_tombstones = 0;
  Pair p2(none);
  const uint32_t q1 = p2.connect().second;
  auto r2 = p2.e(1).entomb_qp(q1, p2.now + kLinger);
  ASSERT_TRUE(r2.ok());
  EXPECT_FALSE(*r2);
  EXPECT_FALSE(p2.e(1).qp_stats(q1).ok());
}

}  // namespace
}  // namespace mrc::testing
