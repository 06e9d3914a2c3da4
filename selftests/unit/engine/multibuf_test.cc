// Multi-buffer frames: packets larger than one receive buffer reach the
// engine as a first buffer plus further ones (RxFrame::more), as multi-buffer
// AF_XDP delivers them. Headers come from the first buffer, the ICRC runs
// over all of them (its 4 bytes may straddle two), the payload is placed
// from each in turn. The harness gives every buffer its own allocation, so
// ASan catches a read past one.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "engine/harness.hpp"

namespace mrc::testing {
namespace {

using namespace core;

uint64_t parse_errors(Engine& e) {
  uint64_t n = 0;
  for (uint64_t v : e.stats().rx_parse_errors) n += v;
  return n;
}

struct Outcome {
  uint64_t completed = 0;
  bool ok = true;
};

// `msgs` WRITEs of `len` bytes over a pair with path_mtu `mtu`, frames cut
// into buffers of `seg` bytes; the hook sees every frame first.
Outcome transfer(Pair& p, uint32_t msgs, size_t len) {
  auto [q0, q1] = p.connect();
  (void)q1;
  Buffer src(p.e(0), p.h(0).pd, msgs * len, 3, kAccessLocalWrite);
  Buffer dst(p.e(1), p.h(1).pd, msgs * len, 4, kAccessLocalWrite | kAccessRemoteWrite);
  Outcome r;
  for (uint32_t i = 0; i < msgs; i++)
    r.ok &= post_write(p.e(0), q0, src, dst, i * len, len, i).ok();
  std::vector<Wc> wcs;
  r.ok &= p.run([&] { return p.poll(0, p.h(0).scq, wcs), wcs.size() >= msgs; }, 20'000'000'000);
  for (const Wc& w : wcs) r.ok &= w.status == kWcSuccess;
  r.completed = wcs.size();
  r.ok &= std::memcmp(src.bytes.data(), dst.bytes.data(), src.bytes.size()) == 0;
  return r;
}

class Segments : public ::testing::TestWithParam<uint32_t> {};

// Buffers of 3840 bytes are what a 4 KiB UMEM frame holds after the kernel's
// XDP headroom; 1000 and 257 cut headers' neighbours, payload and ICRC at
// many other places (257: the smallest first buffer the codec accepts + 1).
TEST_P(Segments, JumboWritesArePlacedByteForByte) {
  PairOptions o;
  o.mtu = 16000;
  Pair p(o);
  p.rx_segment = GetParam();
  const Outcome r = transfer(p, 8, 100'000);
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.completed, 8u);
  EXPECT_GT(p.frames_segmented, 50u);
  EXPECT_EQ(parse_errors(p.e(0)), 0u);
  EXPECT_EQ(parse_errors(p.e(1)), 0u);
}

INSTANTIATE_TEST_SUITE_P(MultiBuffer, Segments, ::testing::Values(3840, 1000, 257));

// Every ICRC trailer position relative to a buffer boundary: frames of one
// size, the boundary moved byte by byte across their last 8 bytes.
TEST(MultiBuffer, IcrcStraddlingTwoBuffersIsReadWhole) {
  for (uint32_t cut = 1; cut <= 8; cut++) {
    PairOptions o;
    o.mtu = 4096;
    o.planes = 1;
    Pair p(o);
    // Full data frames all have one size: the first buffer ends `cut` bytes
    // before a frame's end (cut < 4: inside the ICRC).
    p.hook = [&](int, uint8_t, std::vector<uint8_t>& f, Time) {
      if (f.size() > 4096 && !p.rx_segment) p.rx_segment = uint32_t(f.size()) - cut;
      return Hook{};
    };
    const Outcome r = transfer(p, 2, 4 * 4096);
    EXPECT_TRUE(r.ok) << "cut " << cut;
    EXPECT_GT(p.frames_segmented, 3u) << "cut " << cut;
    EXPECT_EQ(parse_errors(p.e(1)), 0u) << "cut " << cut;
  }
}

// Loss and corruption in later buffers: a flipped payload byte in the third
// buffer fails the ICRC (counted, dropped, retransmitted); dropped frames are
// repaired; the data arrives whole.
TEST(MultiBuffer, CorruptionInALaterBufferIsCaughtByTheIcrc) {
  PairOptions o;
  o.mtu = 16000;
  Pair p(o);
  p.rx_segment = 3840;
  std::mt19937 rng(7);
  uint64_t flipped = 0, dropped = 0;
  p.hook = [&](int from, uint8_t, std::vector<uint8_t>& f, Time) {
    Hook h;
    if (from != 0 || f.size() < 3 * 3840) return h;
    const uint32_t x = rng() % 100;
    if (x < 3) {
      f[2 * 3840 + 100 + rng() % 1000] ^= 0x40;
      flipped++;
    } else if (x < 6) {
      h.drop = true;
      dropped++;
    }
    return h;
  };
  const Outcome r = transfer(p, 16, 64 * 1024);
  EXPECT_TRUE(r.ok);
  EXPECT_GT(flipped, 0u);
  EXPECT_GT(dropped, 0u);
  EXPECT_EQ(p.e(1).stats().rx_parse_errors[size_t(codec::ParseError::kBadIcrc)], flipped);
}

}  // namespace
}  // namespace mrc::testing
