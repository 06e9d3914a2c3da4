// The shared area's rings (user/svc/shm.hpp): entries cross between the
// client's end (many threads, CAS on the shared index) and the service's end
// (its own position, size and mask) in order and exactly once; full and empty
// are seen on both ends; a client that corrupts a slot's sequence number or
// the shared index cannot make the service read any slot but the one its own
// position names, nor accept an entry that is not published for that
// position. And the area's space bookkeeping stays within bounds.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "svc/shm.hpp"

namespace mrc::testing {
namespace {

using svc::ClientRing;
using svc::ServiceRing;

// An area of `bytes`, zeroed, page-backed like the memfd's.
struct Area {
  explicit Area(size_t n) : bytes(n) {
    p = static_cast<uint8_t*>(
        mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  }
  ~Area() { munmap(p, bytes); }
  size_t bytes;
  uint8_t* p;
};

TEST(SvcRings, LayoutIsLineAlignedAndBounded) {
  EXPECT_EQ(sizeof(svc::AreaHdr), 64u);
  EXPECT_EQ(sizeof(svc::QpCtl), 64u);
  EXPECT_EQ(sizeof(svc::CqCtl), 64u);
  for (uint64_t n : {2u, 64u, 4096u}) {
    EXPECT_EQ(svc::ring_bytes<svc::Sqe>(n) % 64, 0u);
    EXPECT_GE(svc::ring_bytes<svc::Sqe>(n), 64 + n * sizeof(svc::Slot<svc::Sqe>));
    EXPECT_GE(svc::ring_bytes<Wc>(n), 64 + n * sizeof(svc::Slot<Wc>));
  }
  EXPECT_EQ(svc::pow2_at_least(0), 2u);
  EXPECT_EQ(svc::pow2_at_least(3), 4u);
  EXPECT_EQ(svc::pow2_at_least(4096), 4096u);
}

TEST(SvcRings, ClientToServiceInOrderFullAndWrap) {
  const uint64_t n = 8;
  Area a(svc::ring_bytes<svc::Rqe>(n));
  ServiceRing<svc::Rqe> s(a.p, 0, n);
  s.init();
  ClientRing<svc::Rqe> c(a.p, 0, n);
  uint64_t next = 0, want = 0;
  for (int lap = 0; lap < 50; lap++) {
    while (c.push(svc::Rqe{next})) next++;
    EXPECT_EQ(next - want, n);  // full at exactly n
    svc::Rqe r;
    EXPECT_TRUE(s.ready());
    while (s.consume(r)) EXPECT_EQ(r.wr_id, want++);
    EXPECT_EQ(want, next);
    EXPECT_FALSE(s.ready());
  }
}

TEST(SvcRings, ServiceToClientInOrderAndOverrunSeen) {
  const uint64_t n = 16;
  Area a(svc::ring_bytes<Wc>(n));
  ServiceRing<Wc> s(a.p, 0, n);
  s.init();
  ClientRing<Wc> c(a.p, 0, n);
  EXPECT_TRUE(c.empty());
  Wc w;
  for (uint64_t i = 0; i < n; i++) {
    w.wr_id = i;
    ASSERT_TRUE(s.produce(w));
  }
  w.wr_id = 99;
  EXPECT_FALSE(s.produce(w));  // full: the client did not poll
  for (uint64_t i = 0; i < n; i++) {
    ASSERT_TRUE(c.pop(w));
    EXPECT_EQ(w.wr_id, i);
  }
  EXPECT_FALSE(c.pop(w));
  w.wr_id = 100;
  EXPECT_TRUE(s.produce(w));  // room again
}

// Service death (service.md section 5): the client takes over as producer of
// a CQ ring after the entries the service published, overwrites a slot the
// service had written but not published, keeps order with what the
// consumer already took, and stops at full.
TEST(SvcRings, ClientTakesOverProducingAfterTheService) {
  constexpr uint64_t n = 8;
  Area a(svc::ring_bytes<Wc>(n));
  ServiceRing<Wc> s(a.p, 0, n);
  s.init();
  ClientRing<Wc> c(a.p, 0, n);
  Wc w;
  for (uint64_t i = 0; i < 3; i++) {
    w.wr_id = i;
    ASSERT_TRUE(s.produce(w));
  }
  ASSERT_TRUE(c.pop(w));  // 0 taken by the application
  EXPECT_EQ(w.wr_id, 0u);
  // A half-written entry at 3: written, never published.
  auto* slots = reinterpret_cast<svc::Slot<Wc>*>(a.p + sizeof(svc::RingIdx));
  slots[3].v.wr_id = 999;
  uint64_t pos = 0;
  ASSERT_TRUE(c.producer_pos(pos));
  EXPECT_EQ(pos, 3u);
  for (uint64_t i = 3;; i++) {
    w.wr_id = 100 + i;
    if (!c.produce_at(pos, w)) break;
  }
  EXPECT_EQ(pos, 1u + n);  // 1 consumed, n in the ring: full
  std::vector<uint64_t> got;
  while (c.pop(w)) got.push_back(w.wr_id);
  const std::vector<uint64_t> want{1, 2, 103, 104, 105, 106, 107, 108};
  EXPECT_EQ(got, want);
  // Empty again: producing resumes where it stopped.
  ASSERT_TRUE(c.producer_pos(pos));
  EXPECT_EQ(pos, 1u + n);
}

TEST(SvcRings, ManyClientThreadsEveryEntryOnce) {
  const uint64_t n = 64;
  Area a(svc::ring_bytes<svc::Rqe>(n));
  ServiceRing<svc::Rqe> s(a.p, 0, n);
  s.init();
  ClientRing<svc::Rqe> c(a.p, 0, n);
  constexpr int kThreads = 4, kPer = 20000;
  std::vector<std::thread> th;
  for (int t = 0; t < kThreads; t++)
    th.emplace_back([&, t] {
      for (uint64_t i = 0; i < kPer; i++)
        while (!c.push(svc::Rqe{uint64_t(t) << 32 | i})) std::this_thread::yield();
    });
  std::vector<uint64_t> last(kThreads, ~0ull);
  size_t got = 0;
  svc::Rqe r;
  while (got < size_t(kThreads) * kPer) {
    if (!s.consume(r)) continue;
    const uint64_t t = r.wr_id >> 32, i = r.wr_id & 0xffffffff;
    ASSERT_LT(t, uint64_t(kThreads));
    EXPECT_EQ(i, last[t] + 1);  // in order per producer, none twice, none lost
    last[t] = i;
    got++;
  }
  for (auto& x : th) x.join();
}

TEST(SvcRings, CorruptedSequenceIsNotFollowed) {
  const uint64_t n = 8;
  Area a(svc::ring_bytes<svc::Rqe>(n));
  ServiceRing<svc::Rqe> s(a.p, 0, n);
  s.init();
  ClientRing<svc::Rqe> c(a.p, 0, n);
  ASSERT_TRUE(c.push(svc::Rqe{1}));
  svc::Rqe r;
  ASSERT_TRUE(s.consume(r));
  auto* slots = reinterpret_cast<svc::Slot<svc::Rqe>*>(a.p + sizeof(svc::RingIdx));
  // Slot 1 claims "published" for a later lap, or garbage: not consumed.
  for (uint64_t bad : {uint64_t(1 + 1 + n), uint64_t(0), uint64_t(~0ull), uint64_t(1)}) {
    slots[1].seq.store(bad);
    EXPECT_FALSE(s.consume(r)) << bad;
    EXPECT_EQ(s.pos(), 1u);
  }
  // Published correctly for the service's position: taken.
  slots[1].v.wr_id = 7;
  slots[1].seq.store(2);
  ASSERT_TRUE(s.consume(r));
  EXPECT_EQ(r.wr_id, 7u);
  EXPECT_EQ(s.pos(), 2u);
}

TEST(SvcRings, CorruptedSharedIndexIsNotReadByTheService) {
  const uint64_t n = 8;
  Area a(svc::ring_bytes<svc::Rqe>(n));
  ServiceRing<svc::Rqe> s(a.p, 0, n);
  s.init();
  ClientRing<svc::Rqe> c(a.p, 0, n);
  for (uint64_t i = 0; i < 3; i++) ASSERT_TRUE(c.push(svc::Rqe{i}));
  auto* idx = reinterpret_cast<svc::RingIdx*>(a.p);
  idx->idx.store(0xdeadbeefcafe);  // what a client may write
  svc::Rqe r;
  for (uint64_t i = 0; i < 3; i++) {
    ASSERT_TRUE(s.consume(r));
    EXPECT_EQ(r.wr_id, i);
  }
  EXPECT_FALSE(s.consume(r));
  EXPECT_EQ(s.pos(), 3u);  // the service's own position, mask and size only
  // The client's own pushes now fail (its index points nowhere valid): only
  // its queue stalls.
  EXPECT_FALSE(c.push(svc::Rqe{9}));
}

TEST(SvcRings, EntriesAreCopiedOnce) {
  const uint64_t n = 2;
  Area a(svc::ring_bytes<svc::Sqe>(n));
  ServiceRing<svc::Sqe> s(a.p, 0, n);
  s.init();
  ClientRing<svc::Sqe> c(a.p, 0, n);
  svc::Sqe e{};
  e.num_sge = 3;
  ASSERT_TRUE(c.push(e));
  svc::Sqe got;
  ASSERT_TRUE(s.consume(got));
  auto* slots = reinterpret_cast<svc::Slot<svc::Sqe>*>(a.p + sizeof(svc::RingIdx));
  slots[0].v.num_sge = 200;  // rewritten after the service took it
  EXPECT_EQ(got.num_sge, 3);
}

TEST(SvcRings, AreaAllocStaysInBoundsAndCoalesces) {
  const uint64_t size = 1 << 16;
  svc::AreaAlloc al(size);
  EXPECT_EQ(al.free_bytes(), size - 64);
  std::vector<std::pair<uint64_t, uint64_t>> got;
  for (uint64_t len : {1u, 64u, 100u, 4096u, 7u, 30000u}) {
    const uint64_t off = al.alloc(len);
    ASSERT_NE(off, 0u);
    EXPECT_EQ(off % 64, 0u);
    EXPECT_LE(off + len, size);
    for (auto& [o, l] : got) EXPECT_TRUE(off + len <= o || o + l <= off);  // no overlap
    got.push_back({off, (len + 63) / 64 * 64});
  }
  EXPECT_EQ(al.alloc(size), 0u);  // does not fit
  EXPECT_EQ(al.alloc(0), 0u);
  for (auto& [o, l] : got) al.free(o, l);
  EXPECT_EQ(al.free_bytes(), size - 64);
  EXPECT_EQ(al.alloc(size - 64), 64u);  // coalesced into one hole again
}

}  // namespace
}  // namespace mrc::testing
