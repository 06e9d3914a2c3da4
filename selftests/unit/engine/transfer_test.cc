// Engine transfers over the two-host harness: sizes, scatter lists, completion
// order, WRITE-with-immediate, remote access errors.
#include <gtest/gtest.h>

#include <cstring>

#include "engine/harness.hpp"

namespace mrc::testing {
namespace {

using namespace core;

struct Xfer {
  Pair& pr;
  uint32_t q0, q1;
  std::unique_ptr<Buffer> src, dst;
  Xfer(Pair& p, size_t n) : pr(p) {
    std::tie(q0, q1) = p.connect();
    src = std::make_unique<Buffer>(p.e(0), p.h(0).pd, n, 1, kAccessLocalWrite);
    dst = std::make_unique<Buffer>(p.e(1), p.h(1).pd, n, 2, kAccessLocalWrite | kAccessRemoteWrite);
  }
  Status write(uint64_t id, size_t off, size_t len, bool imm = false, uint32_t immv = 0) {
    Sge sg{src->addr(off), uint32_t(len), src->mr.lkey};
    SendWr wr;
    wr.wr_id = id;
    wr.opcode = imm ? WrOpcode::kRdmaWriteWithImm : WrOpcode::kRdmaWrite;
    wr.sg_list = &sg;
    wr.num_sge = 1;
    wr.remote_addr = dst->addr(off);
    wr.rkey = dst->mr.rkey;
    wr.imm_data = immv;
    return pr.e(0).post_send(q0, wr);
  }
};

class Sizes : public ::testing::TestWithParam<size_t> {};

TEST_P(Sizes, WriteIsPlacedByteForByte) {
  Pair p;
  const size_t n = GetParam();
  Xfer x(p, std::max<size_t>(n, 1));
  ASSERT_TRUE(x.write(7, 0, n).ok());
  std::vector<Wc> wcs;
  ASSERT_TRUE(p.run([&] { return p.poll(0, p.h(0).scq, wcs), !wcs.empty(); }, 5'000'000'000));
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, kWcSuccess) << to_string(wcs[0].status);
  EXPECT_EQ(wcs[0].wr_id, 7u);
  EXPECT_EQ(wcs[0].byte_len, n);
  EXPECT_EQ(0, std::memcmp(x.src->bytes.data(), x.dst->bytes.data(), n));
  if (n < x.dst->bytes.size()) {
    EXPECT_NE(x.src->bytes[n], x.dst->bytes[n]);  // nothing past the message
  }
}

INSTANTIATE_TEST_SUITE_P(Engine, Sizes,
                         ::testing::Values(0, 1, 3, 1023, 1024, 1025, 4096, 65536, 1 << 20));

}  // namespace
}  // namespace mrc::testing
