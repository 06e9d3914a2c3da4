// FramePool and FrameCache on their own: no kernel needed.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "xdp/frame_pool.hpp"

namespace mrc::xdp {
namespace {

TEST(FramePool, HandsOutEveryFrameOnceThenRunsDry) {
  FramePool pool(128, 4096);
  std::vector<uint64_t> got(200);
  EXPECT_EQ(pool.alloc(got.data(), 100), 100u);
  EXPECT_EQ(pool.alloc(got.data() + 100, 100), 28u);
  EXPECT_EQ(pool.empty_events(), 1u);
  EXPECT_EQ(pool.available(), 0u);
  std::set<uint64_t> unique(got.begin(), got.begin() + 128);
  EXPECT_EQ(unique.size(), 128u);
  for (uint64_t a : unique) {
    EXPECT_EQ(a % 4096, 0u);
    EXPECT_LT(a, 128u * 4096);
  }
  EXPECT_EQ(pool.alloc(got.data(), 1), 0u);
  EXPECT_EQ(pool.empty_events(), 2u);
  pool.free(got.data(), 128);
  EXPECT_EQ(pool.available(), 128u);
}

TEST(FramePool, DoubleFreeIsCountedNotWrittenOutOfBounds) {
  FramePool pool(64, 2048);
  std::vector<uint64_t> f(8);
  ASSERT_EQ(pool.alloc(f.data(), 8), 8u);
  pool.free(f.data(), 8);
  pool.free(f.data(), 8);  // again: no room, surplus counted
  EXPECT_EQ(pool.available(), 64u);
  EXPECT_EQ(pool.overflow(), 8u);
}

TEST(FrameCache, BatchesThroughThePool) {
  FramePool pool(1024, 2048);
  FrameCache cache(&pool);
  uint64_t buf[300];
  EXPECT_EQ(cache.get(buf, 10), 10u);
  // One batch of 64 left the pool; 54 wait in the cache.
  EXPECT_EQ(pool.available(), 1024u - 64);
  EXPECT_EQ(cache.size(), 54u);
  EXPECT_EQ(cache.available(), 1014u);
  cache.put(buf, 10);
  EXPECT_EQ(cache.size(), 64u);
  // Large requests are served too.
  EXPECT_EQ(cache.get(buf, 300), 300u);
  std::set<uint64_t> unique(buf, buf + 300);
  EXPECT_EQ(unique.size(), 300u);
  // Filling the cache past capacity spills to the pool.
  cache.put(buf, 300);
  EXPECT_LE(cache.size(), FrameCache::kCapacity);
  EXPECT_EQ(cache.available(), 1024u);
  cache.flush();
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(pool.available(), 1024u);
  EXPECT_EQ(pool.overflow(), 0u);
}

TEST(FrameCache, DrainsThePoolAndRecovers) {
  FramePool pool(100, 2048);
  FrameCache a(&pool), b(&pool);
  std::vector<uint64_t> fa(100), fb(100);
  const uint32_t na = a.get(fa.data(), 70);
  EXPECT_EQ(na, 70u);
  const uint32_t nb = b.get(fb.data(), 70);
  EXPECT_LT(nb, 70u);
  EXPECT_EQ(na + nb + a.size() + b.size(), 100u);
  EXPECT_EQ(b.get(fb.data() + nb, 1), 0u);
  a.put(fa.data(), na);
  a.flush();
  EXPECT_EQ(b.get(fb.data() + nb, 30), 30u);
  std::set<uint64_t> unique(fb.begin(), fb.begin() + nb + 30);
  EXPECT_EQ(unique.size(), nb + 30);
}

}  // namespace
}  // namespace mrc::xdp
