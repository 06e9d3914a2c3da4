// libmrc with the live-frames TX backend (DeviceOptions::tx = kLive,
// xdp::LiveTx, Documentation/xdp-tx.md): two hosts in their own network
// namespaces joined by 4 veth planes; the engine threads send XDP live
// frames and receive over AF_XDP. Every transfer is verified byte for byte;
// the tests wait on completions and counters, never on sleeps.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <thread>

#include "lib/exchange.hpp"
#include "mrc/mrc.hpp"
#include "netns/datapath/datapath_fixture.hpp"

namespace mrc {
namespace {

using dptest::Clock;
using dptest::kMtu;  // asked for; clamped to PortInfo::max_path_mtu
using dptest::kPlanes;

class LiveTxDatapath : public dptest::DatapathFixture {
 protected:
  LiveTxDatapath() {
    backend_ = TxBackend::kLive;
    live_min_ = 0;  // every frame live (DeviceOptions::live_tx_min)
  }
};

TEST_F(LiveTxDatapath, BackendAndClampedPathMtu) {
  for (int s = 0; s < 2; s++) {
    EXPECT_EQ(h_[s].ctx->tx_backend(), TxBackend::kLive);
    EXPECT_EQ(h_[s].ctx->tx_note(), "");
    for (const PortInfo& p : h_[s].ctx->ports()) {
      EXPECT_EQ(p.tx, "live") << p.ifname;
      // 3264 on 6.18 (3408-byte live frames), 3200 on 6.1.
      EXPECT_GE(p.max_path_mtu, 3200u) << p.ifname;
      EXPECT_LT(p.max_path_mtu, kMtu) << p.ifname;
      EXPECT_EQ(p.max_path_mtu % 64, 0u) << p.ifname;
    }
  }
  Pair p = connect();
  const uint32_t want = h_[0].ctx->ports()[0].max_path_mtu;
  for (int s = 0; s < 2; s++) {
    auto a = p.q[s]->query();
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(a->path_mtu, want) << "path_mtu " << kMtu << " not clamped on host " << s;
  }
}

// Messages of 1 byte to 64 MiB, with and without immediate: every byte placed,
// nothing past the message written, and every frame accounted for by LiveTx
// (none refused by the program, dropped by a driver or lost in a submit).
TEST_F(LiveTxDatapath, WritesArePlacedByteForByte) {
  Pair p = connect();
  writes_placed_byte_for_byte(p, {1, 4096, 3264, 3265, 1 << 20, 64 << 20});
  ASSERT_FALSE(HasFatalFailure());
  const uint64_t data_bytes = (1 + 4096 + 3264 + 3265 + (1 << 20) + (64 << 20)) * 2ull;
  for (int s = 0; s < 2; s++) {
    // Read between engine iterations: every committed frame was submitted.
    const uint64_t built_before = h_[s].ctx->engine_stats().tx_frames;
    const auto l = h_[s].ctx->live_tx_stats();
    const uint64_t built_after = h_[s].ctx->engine_stats().tx_frames;
    SCOPED_TRACE("host " + std::to_string(s));
    // Every frame the engine built went through LiveTx and was redirected.
    EXPECT_LE(built_before, l.frames);
    EXPECT_LE(l.frames, built_after);
    EXPECT_EQ(l.redirected, l.frames);
    EXPECT_EQ(l.prog_errors, 0u);
    EXPECT_EQ(l.submit_errors, 0u);
    EXPECT_EQ(l.lost, 0u);
    EXPECT_EQ(l.redirect_err, 0u);
    EXPECT_GT(l.submits, 0u);
    // The AF_XDP sockets sent nothing.
    EXPECT_EQ(h_[s].ctx->xsk_stats().tx_frames, 0u);
  }
  EXPECT_GE(h_[0].ctx->live_tx_stats().bytes, data_bytes);
  // Data frames were batched: far fewer submits than frames.
  const auto l0 = h_[0].ctx->live_tx_stats();
  EXPECT_LT(l0.submits * 4, l0.frames) << l0.submits << " submits for " << l0.frames << " frames";
}

// Loss: the receiving end of plane 2 goes down mid-transfer, so A's frames
// on it are dropped by the veth (counted by LiveTx's driver feedback); the
// engine moves to the other planes, retransmits, and every byte arrives.
// Back up, plane 2 carries traffic again.
TEST_F(LiveTxDatapath, PlaneLossMidTransferThenBack) {
  Pair p = connect();
  const size_t kMsg = 4 << 20, kCount = 48;
  std::vector<uint8_t> src(kMsg * kCount), dst(kMsg * kCount, 0);
  fill(src, 3);
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
  const auto l = h_[0].ctx->live_tx_stats();
  EXPECT_EQ(l.prog_errors, 0u);
  EXPECT_EQ(l.lost, 0u);
  // Whatever was sent towards the dead plane was dropped and counted, not lost silently.
  EXPECT_EQ(l.redirected, l.xmit_sent + l.xmit_drops + l.redirect_err);
  std::printf("  host A live tx: %llu frames, driver drops %llu, redirect errors %llu, rtx %llu\n",
              (unsigned long long)l.frames, (unsigned long long)l.xmit_drops,
              (unsigned long long)l.redirect_err, (unsigned long long)p.q[0]->stats()->tx_rtx_pkts);
  // Back up: the plane carries traffic again.
  ASSERT_TRUE(topo_.ip(1, {"link", "set", plane2, "up"}).ok());
  expect_plane_used_again(p, 2, ms, md, src, dst, kMsg);
}

// kAuto picks live frames where they work (here) and says nothing. With the
// default live_tx_min, iterations that end with a few frames (ACKs, the tail
// of a window) send them through AF_XDP: both carry frames, and together
// every frame the engine built.
class LiveTxAuto : public LiveTxDatapath {
 protected:
  LiveTxAuto() {
    backend_ = TxBackend::kAuto;
    live_min_ = DeviceOptions().live_tx_min;
  }
};

TEST_F(LiveTxAuto, PicksLiveFramesAndTransfers) {
  for (int s = 0; s < 2; s++) {
    EXPECT_EQ(h_[s].ctx->tx_backend(), TxBackend::kLive);
    EXPECT_EQ(h_[s].ctx->tx_note(), "");
  }
  Pair p = connect();
  const size_t len = 8 << 20;
  std::vector<uint8_t> src(len), dst(len, 0);
  fill(src, 11);
  auto ms = reg(0, src, false), md = reg(1, dst, true);
  ASSERT_TRUE(write(*p.q[0], ms, 0, len, md, 0, 1).ok());
  std::vector<Wc> s;
  ASSERT_TRUE(wait(
      0, s, [&] { return !s.empty(); }, std::chrono::seconds(60)));
  EXPECT_EQ(s[0].status, core::kWcSuccess) << core::to_string(s[0].status);
  EXPECT_EQ(0, std::memcmp(src.data(), dst.data(), len));
  EXPECT_GE(h_[0].ctx->live_tx_stats().bytes, len / 2);
  for (int s = 0; s < 2; s++) {
    const uint64_t built_before = h_[s].ctx->engine_stats().tx_frames;
    const uint64_t live = h_[s].ctx->live_tx_stats().frames, xsk = h_[s].ctx->xsk_stats().tx_frames;
    const uint64_t built_after = h_[s].ctx->engine_stats().tx_frames;
    EXPECT_LE(built_before, live + xsk) << "host " << s;
    EXPECT_LE(live + xsk, built_after) << "host " << s;
  }
  // The receiver's ACKs come a few per iteration: AF_XDP sends most of them.
  EXPECT_GT(h_[1].ctx->xsk_stats().tx_frames, 0u);
}

}  // namespace
}  // namespace mrc
