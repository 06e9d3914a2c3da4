// A region's iova is separate from the pointer the engine copies through
// (Documentation/service.md section 3 step 5): local SGE and peer RETH
// addresses are checked against [iova, iova + len), the bytes move at
// host + (va - iova). In exclusive mode iova == host and nothing changes.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "engine/fixture.hpp"
#include "engine/harness.hpp"

namespace mrc::testing {
namespace {

using namespace core;

// Addresses no buffer of this process has: far from the heap, page-aligned.
constexpr uint64_t kSrcIova = 0x10000000000ull;
constexpr uint64_t kDstIova = 0x20000000000ull;

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; i++) v[i] = uint8_t(i * 29 + seed + (i >> 11));
  return v;
}

SendWr write_wr(uint64_t id, Sge* sg, uint64_t raddr, uint32_t rkey, bool imm = false,
                uint32_t immv = 0) {
  SendWr wr;
  wr.wr_id = id;
  wr.opcode = imm ? WrOpcode::kRdmaWriteWithImm : WrOpcode::kRdmaWrite;
  wr.sg_list = sg;
  wr.num_sge = 1;
  wr.remote_addr = raddr;
  wr.rkey = rkey;
  wr.imm_data = immv;
  return wr;
}

// A peer WRITEs and WRITE-with-imms to iova addresses of a region whose host
// bytes are elsewhere: every byte lands at host + (va - iova), nothing
// outside the written ranges changes.
TEST(Iova, PeerWritesLandAtHost) {
  Fixture f(256 * 1024);
  const size_t n = 256 * 1024;
  std::vector<uint8_t> host = pattern(n, 9), before = host;
  auto mr = f.p.e(1).reg_mr(f.p.h(1).pd, kDstIova, host.data(), n,
                            kAccessLocalWrite | kAccessRemoteWrite);
  ASSERT_TRUE(mr.ok()) << mr.error().message();
  ASSERT_NE(kDstIova, uint64_t(uintptr_t(host.data())));
  // A multi-packet WRITE at offset 4096, then a WRITE-with-imm at the end.
  f.recv(77);
  Sge a{f.src->addr(0), 100000, f.src->mr.lkey};
  SendWr w1 = write_wr(1, &a, kDstIova + 4096, mr->rkey);
  w1.send_flags = kSendSignaled;
  ASSERT_TRUE(f.p.e(0).post_send(f.q0, w1).ok());
  Sge b{f.src->addr(150000), 9000, f.src->mr.lkey};
  SendWr w2 = write_wr(2, &b, kDstIova + n - 9000, mr->rkey, true, 0xabcd1234);
  w2.send_flags = kSendSignaled;
  ASSERT_TRUE(f.p.e(0).post_send(f.q0, w2).ok());
  ASSERT_TRUE(f.wait_sends(2));
  ASSERT_TRUE(f.wait_recvs(1));
  for (const Wc& wc : f.swc) EXPECT_EQ(wc.status, kWcSuccess);
  ASSERT_EQ(f.rwc.size(), 1u);
  EXPECT_EQ(f.rwc[0].status, kWcSuccess);
  EXPECT_EQ(f.rwc[0].imm_data, 0xabcd1234u);
  std::vector<uint8_t> want = before;
  std::memcpy(want.data() + 4096, f.src->bytes.data(), 100000);
  std::memcpy(want.data() + n - 9000, f.src->bytes.data() + 150000, 9000);
  EXPECT_EQ(host, want) << "bytes placed at host + (va - iova), nothing else touched";
}

// The local side: SGE addresses are iova addresses, the payload is gathered
// from host.
TEST(Iova, SgeGathersFromHost) {
  Fixture f(128 * 1024);
  const size_t n = 128 * 1024;
  std::vector<uint8_t> host = pattern(n, 3);
  auto mr = f.p.e(0).reg_mr(f.p.h(0).pd, kSrcIova, host.data(), n, kAccessLocalWrite);
  ASSERT_TRUE(mr.ok()) << mr.error().message();
  Sge g{kSrcIova + 1000, 70000, mr->lkey};
  SendWr w = write_wr(5, &g, f.dst->addr(2000), f.dst->mr.rkey);
  w.send_flags = kSendSignaled;
  ASSERT_TRUE(f.p.e(0).post_send(f.q0, w).ok());
  ASSERT_TRUE(f.wait_sends(1));
  EXPECT_EQ(f.swc[0].status, kWcSuccess);
  EXPECT_EQ(0, std::memcmp(f.dst->bytes.data() + 2000, host.data() + 1000, 70000));
}

// SGEs outside [iova, iova + len) are refused at post time, including the
// region's host address itself.
TEST(Iova, SgeOutsideIovaRangeRefused) {
  Fixture f(64 * 1024);
  const size_t n = 64 * 1024;
  std::vector<uint8_t> host = pattern(n, 4);
  auto mr = f.p.e(0).reg_mr(f.p.h(0).pd, kSrcIova, host.data(), n, kAccessLocalWrite);
  ASSERT_TRUE(mr.ok());
  const uint64_t bad[][2] = {
      {uint64_t(uintptr_t(host.data())), 100},  // the host pointer is not an iova
      {kSrcIova - 1, 100},                      // starts before
      {kSrcIova + n - 10, 20},                  // runs past the end
      {~uint64_t(0) - 5, 100},                  // wraps around
  };
  for (const auto& b : bad) {
    Sge g{b[0], uint32_t(b[1]), mr->lkey};
    SendWr w = write_wr(9, &g, f.dst->addr(0), f.dst->mr.rkey);
    auto s = f.p.e(0).post_send(f.q0, w);
    ASSERT_FALSE(s.ok()) << std::hex << b[0];
    EXPECT_EQ(s.error().code, EINVAL);
    EXPECT_NE(s.error().context.find("outside its memory region"), std::string::npos);
  }
  // The edges themselves are inside.
  Sge g{kSrcIova + n - 100, 100, mr->lkey};
  SendWr w = write_wr(10, &g, f.dst->addr(0), f.dst->mr.rkey);
  w.send_flags = kSendSignaled;
  ASSERT_TRUE(f.p.e(0).post_send(f.q0, w).ok());
  ASSERT_TRUE(f.wait_sends(1));
  EXPECT_EQ(f.swc[0].status, kWcSuccess);
  EXPECT_EQ(0, std::memcmp(f.dst->bytes.data(), host.data() + n - 100, 100));
}

// A RETH outside [iova, iova + len) (the host address, or running past the
// end) is refused by the responder: remote access error, nothing written.
TEST(Iova, RethOutsideIovaRangeRefused) {
  const size_t n = 64 * 1024;
  const uint64_t raddrs[] = {0, kDstIova + n - 2048, kDstIova - 4096};
  for (size_t k = 0; k < 3; k++) {
    Fixture f(n);
    std::vector<uint8_t> host = pattern(n, 5), before = host;
    auto mr = f.p.e(1).reg_mr(f.p.h(1).pd, kDstIova, host.data(), n,
                              kAccessLocalWrite | kAccessRemoteWrite);
    ASSERT_TRUE(mr.ok());
    const uint64_t raddr = k == 0 ? uint64_t(uintptr_t(host.data())) : raddrs[k];
    Sge g{f.src->addr(0), 4096, f.src->mr.lkey};
    SendWr w = write_wr(1, &g, raddr, mr->rkey);
    w.send_flags = kSendSignaled;
    ASSERT_TRUE(f.p.e(0).post_send(f.q0, w).ok());
    ASSERT_TRUE(f.wait_sends(1));
    EXPECT_EQ(f.swc[0].status, kWcRemAccessErr) << "case " << k;
    EXPECT_EQ(host, before) << "case " << k;
    EXPECT_GE(f.p.e(1).qp_stats(f.q1)->rem_access_errors, 1u);
  }
}

// iova == host through the new call behaves as the old one: the regions of
// every other engine test are registered that way.
TEST(Iova, IovaEqualHostUnchanged) {
  Fixture f(64 * 1024);
  const size_t n = 64 * 1024;
  std::vector<uint8_t> host = pattern(n, 6);
  auto mr = f.p.e(1).reg_mr(f.p.h(1).pd, uint64_t(uintptr_t(host.data())), host.data(), n,
                            kAccessLocalWrite | kAccessRemoteWrite);
  ASSERT_TRUE(mr.ok());
  Sge g{f.src->addr(100), 30000, f.src->mr.lkey};
  SendWr w = write_wr(1, &g, uint64_t(uintptr_t(host.data())) + 100, mr->rkey);
  w.send_flags = kSendSignaled;
  ASSERT_TRUE(f.p.e(0).post_send(f.q0, w).ok());
  ASSERT_TRUE(f.wait_sends(1));
  EXPECT_EQ(f.swc[0].status, kWcSuccess);
  EXPECT_EQ(0, std::memcmp(host.data() + 100, f.src->bytes.data() + 100, 30000));
}

TEST(Iova, RegistrationChecks) {
  Fixture f(4096);
  std::vector<uint8_t> host(8192);
  auto wrap =
      f.p.e(1).reg_mr(f.p.h(1).pd, ~uint64_t(0) - 4095, host.data(), 8192, kAccessLocalWrite);
  ASSERT_FALSE(wrap.ok());
  EXPECT_EQ(wrap.error().code, EINVAL);
  auto null_host = f.p.e(1).reg_mr(f.p.h(1).pd, kDstIova, nullptr, 8192, kAccessLocalWrite);
  ASSERT_FALSE(null_host.ok());
  // iova 0 is a valid name for a region (only host must be a real pointer).
  EXPECT_TRUE(f.p.e(1).reg_mr(f.p.h(1).pd, 0, host.data(), 8192, kAccessLocalWrite).ok());
}

}  // namespace
}  // namespace mrc::testing
