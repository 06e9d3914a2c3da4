// libmrc over multi-buffer AF_XDP (DeviceOptions::frame_chunks, XDP_USE_SG):
// two hosts in their own network namespaces joined by 4 veth planes of MTU
// 16200; QPs use 16000-byte packets, each sent as 4 UMEM frames (TX: one
// descriptor per 4 KiB frame, XDP_PKT_CONTD between them) and received as 5
// (3840 bytes per frame after the kernel's XDP headroom), read in place by
// the engine. Every transfer is verified byte for byte; the tests wait on
// completions and counters, never on sleeps.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>

#include "core/types.hpp"
#include "lib/exchange.hpp"
#include "mrc/mrc.hpp"
#include "netns/datapath/datapath_fixture.hpp"

namespace mrc {
namespace {

using dptest::Clock;

constexpr uint32_t kJumbo = 16000;

class MultiBufDatapath : public dptest::DatapathFixture {
 protected:
  MultiBufDatapath() {
    topo_mtu_ = 16200;
    frame_chunks_ = 5;
    path_mtu_ = kJumbo;
  }
};

TEST_F(MultiBufDatapath, PortsOfferJumboPathMtu) {
  for (int s = 0; s < 2; s++)
    for (const PortInfo& p : h_[s].ctx->ports()) {
      // 5 frames: 5 x 3840 bytes on receive bound a packet at 19200 bytes,
      // less up to 92 bytes of headers, in multiples of 64.
      EXPECT_EQ(p.max_path_mtu, 19072u) << p.ifname;
      EXPECT_EQ(p.tx, "xsk") << p.ifname;
    }
  Pair p = connect();
  for (int s = 0; s < 2; s++) EXPECT_EQ(p.q[s]->query()->path_mtu, kJumbo);
}

// Messages of 1 byte to 32 MiB, with and without immediate: every byte placed,
// nothing past the message written; the sockets moved several descriptors per
// data packet both ways and dropped nothing.
TEST_F(MultiBufDatapath, WritesArePlacedByteForByte) {
  Pair p = connect();
  writes_placed_byte_for_byte(p, {1, 3840, kJumbo, kJumbo + 1, 1 << 20, 32 << 20});
  ASSERT_FALSE(HasFatalFailure());
  const auto e1 = h_[1].ctx->engine_stats();
  const auto x0 = h_[0].ctx->xsk_stats(), x1 = h_[1].ctx->xsk_stats();
  const auto q = p.q[1]->stats();
  ASSERT_TRUE(q.ok());
  // B received about 2 x 33 MB in 16000-byte packets, 5 descriptors each.
  EXPECT_GT(q->rx_data_bytes, 2ull * (33 << 20));
  EXPECT_GT(x1.rx_frames, e1.rx_frames + 4 * (2ull * (33 << 20) / kJumbo))
      << x1.rx_frames << " descriptors for " << e1.rx_frames << " packets";
  // A sent them as 4 descriptors each (tx_completed counts descriptors).
  EXPECT_GT(x0.tx_completed, x0.tx_frames + 3 * (2ull * (33 << 20) / kJumbo));
  for (const auto& x : {x0, x1}) {
    EXPECT_EQ(x.rx_dropped, 0u);
    EXPECT_EQ(x.rx_invalid, 0u);
    EXPECT_EQ(x.tx_invalid, 0u);
  }
  for (int s = 0; s < 2; s++) {
    const auto e = h_[s].ctx->engine_stats();
    for (size_t k = 0; k < std::size(e.rx_parse_errors); k++)
      EXPECT_EQ(e.rx_parse_errors[k], 0u)
          << "host " << s << ": " << codec::to_string(codec::ParseError(k));
  }
}

// Loss: the receiving end of plane 2 goes down mid-transfer; the engine moves
// to the other planes and retransmits (multi-buffer frames again), every byte
// arrives, and the plane carries traffic once it is back.
TEST_F(MultiBufDatapath, PlaneLossMidTransferThenBack) {
  Pair p = connect();
  const size_t kMsg = 4 << 20, kCount = 32;
  std::vector<uint8_t> src(kMsg * kCount), dst(kMsg * kCount, 0);
  fill(src, 5);
  auto ms = reg(0, src, false), md = reg(1, dst, true);
  for (size_t i = 0; i < kCount; i++)
    ASSERT_TRUE(write(*p.q[0], ms, i * kMsg, kMsg, md, i * kMsg, i).ok());
  std::vector<Wc> s;
  ASSERT_TRUE(wait(
      0, s, [&] { return s.size() >= 4; }, std::chrono::seconds(30)));
  const std::string plane2 = topo_.pairs()[1].b_if;
  ASSERT_TRUE(topo_.ip(1, {"link", "set", plane2, "down"}).ok());
  ASSERT_TRUE(wait(
      0, s, [&] { return s.size() == kCount; }, std::chrono::seconds(120)));
  for (const auto& w : s) ASSERT_EQ(w.status, core::kWcSuccess) << core::to_string(w.status);
  EXPECT_EQ(0, std::memcmp(src.data(), dst.data(), src.size()));
  EXPECT_EQ(p.q[0]->query()->qp_state, QpState::kRts);
  std::printf("  host A: rtx %llu packets\n", (unsigned long long)p.q[0]->stats()->tx_rtx_pkts);
  ASSERT_TRUE(topo_.ip(1, {"link", "set", plane2, "up"}).ok());
  expect_plane_used_again(p, 2, ms, md, src, dst, kMsg);
}

}  // namespace
}  // namespace mrc
