// LiveTx (user/xdp/live_tx, bpf/mrc_tx.bpf.c) over real veth pairs: frames
// written into the slot ring leave namespace A as XDP live frames and arrive
// in an AF_XDP socket in namespace B (user/xdp Device + xsk_test.bpf.c),
// where every byte is checked. The LiveTx is made from the test's own
// namespace while its interfaces live in A. Waits are bounded loops on
// counters and poll(), never sleeps.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "support/netns_fixture.hpp"
#include "support/test_frames.hpp"
#include "support/test_prog.hpp"
#include "xdp/device.hpp"
#include "xdp/live_tx.hpp"
#include "xdp/netns.hpp"

namespace mrc::xsktest {
namespace {

using namespace mrc::xdp;
using Clock = std::chrono::steady_clock;
constexpr auto kDeadline = std::chrono::seconds(20);

#define ASSERT_OK(expr)                                                  \
  do {                                                                   \
    auto&& ok_r_ = (expr);                                               \
    ASSERT_TRUE(ok_r_.ok()) << #expr << ": " << ok_r_.error().message(); \
  } while (0)

// Receiver in B: the AF_XDP layer plus the test program on every B end.
struct Side {
  Device dev;
  std::unique_ptr<TestProg> prog;
};

Result<Side> open_receiver(const Topology& t) {
  auto ns = t.enter_b();
  if (!ns) return std::move(ns).error();
  DeviceConfig c;
  for (const auto& v : t.pairs()) c.ports.push_back({v.b_if});
  c.umem.frame_count = 8192;
  c.umem.frame_size = 4096;
  c.watch_links = false;
  Side s;
  auto d = Device::open(c);
  if (!d) return std::move(d).error();
  s.dev = std::move(*d);
  auto p = TestProg::load();
  if (!p) return std::move(p).error();
  s.prog = std::move(*p);
  for (size_t i = 0; i < t.pairs().size(); ++i)
    MRC_TRY(s.prog->attach(t.pairs()[i].b_if, static_cast<uint32_t>(i) * 16u));
  MRC_TRY(s.prog->set_cfg({}));
  MRC_TRY(s.dev.insert_into_xskmap(s.prog->xsks_fd(),
                                   [](uint16_t p, uint32_t q) { return p * 16u + q; }));
  return s;
}

LiveTxConfig tx_cfg(const Topology& t, uint32_t slots = 512) {
  LiveTxConfig c;
  for (const auto& v : t.pairs()) c.ports.push_back({v.a_if, t.ns_a()});
  c.slots = slots;
  return c;
}

// Verifies every received frame (order per (plane, queue), bytes, port).
struct Receiver {
  Device* dev;
  const Topology* topo;
  uint64_t frames = 0, bytes = 0, foreign = 0;
  std::map<uint16_t, uint64_t> next_seq;  // plane -> next expected sequence
  std::map<uint16_t, uint64_t> per_port;
  std::map<uint32_t, uint64_t> per_queue;
  std::string error;

  uint32_t poll_once() {
    RxFrame buf[64];
    const uint32_t n = dev->rx(buf);
    for (uint32_t i = 0; i < n; ++i) check(buf[i]);
    dev->release({buf, n});
    return n;
  }
  bool until(uint64_t want) {
    const auto end = Clock::now() + kDeadline;
    while (frames < want) {
      if (poll_once() > 0) continue;
      if (Clock::now() >= end) break;
      (void)dev->wait(5);
    }
    return frames >= want;
  }
  void check(const RxFrame& f) {
    if (f.len < 14 || f.data[12] != 0x88 || f.data[13] != 0xb5) {
      ++foreign;
      return;
    }
    const auto& v = topo->pairs()[f.port];
    FrameHdr h{};
    const std::string e = verify_frame(f.data, f.len, v.b_mac, v.a_mac, &h);
    if (!e.empty() && error.empty()) error = e;
    if (e.empty()) {
      if (h.plane != f.port && error.empty())
        error = "frame of plane " + std::to_string(h.plane) + " arrived on port " +
                std::to_string(f.port);
      uint64_t& exp = next_seq[h.plane];
      if (h.seq != exp && error.empty())
        error =
            "sequence " + std::to_string(h.seq) + " where " + std::to_string(exp) + " was expected";
      exp = h.seq + 1;
    }
    ++frames;
    bytes += f.len;
    ++per_port[f.port];
    ++per_queue[f.queue];
  }
};

// Writes test frames into LiveTx slots and commits them.
struct Sender {
  LiveTx* tx;
  const Topology* topo;
  std::map<uint16_t, uint64_t> next_seq;
  uint64_t frames = 0, bytes = 0;

  // Queues n frames on port, lengths from len_of(seq); returns how many.
  template <class LenFn>
  uint32_t queue(uint16_t port, uint32_t n, LenFn len_of) {
    const auto& v = topo->pairs()[port];
    LiveTxFrame f[64];
    uint32_t done = 0;
    while (done < n) {
      const uint32_t k = tx->reserve(port, {f, std::min<uint32_t>(64, n - done)});
      if (k == 0) break;
      for (uint32_t i = 0; i < k; ++i) {
        uint64_t& seq = next_seq[port];
        const uint32_t len = std::min(len_of(seq), f[i].room);
        write_frame(f[i].data, len, v.b_mac, v.a_mac, seq, port, 0, 7);
        f[i].len = len;
        bytes += len;
        ++seq;
      }
      tx->commit({f, k});
      done += k;
      frames += k;
    }
    return done;
  }
};

class LiveTxNetns : public ::testing::Test {
 protected:
  void make(uint32_t pairs, uint32_t queues = 1, uint32_t mtu = 3500) {
    auto t = Topology::create(pairs, queues, mtu);
    ASSERT_TRUE(t.ok()) << t.error().message();
    topo_ = std::move(*t);
  }
  Topology topo_;
};

// A few thousand frames of varied sizes, up to the largest live frame, in
// submits of varied sizes, arrive intact and in order; every counter agrees.
TEST_F(LiveTxNetns, FramesOfVariedSizesArriveIntact) {
  make(1);
  auto rx = open_receiver(topo_);
  ASSERT_OK(rx);
  auto tx = LiveTx::create(tx_cfg(topo_));
  ASSERT_OK(tx);
  for (const auto& n : tx->notes()) std::printf("note: %s\n", n.c_str());
  const uint32_t max = tx->max_frame(0);
  ASSERT_GE(max, 3000u) << "live frames limit " << tx->max_frame();
  EXPECT_EQ(tx->port(0).ifindex > 0, true);

  const uint32_t sizes[] = {kMinFrame, 60,   64,   65,   127,  128,     511,
                            1024,      1500, 1514, 2048, 3000, max - 1, max};
  auto len_of = [&](uint64_t seq) {
    if (seq % 3 == 0) return sizes[(seq / 3) % std::size(sizes)];
    return static_cast<uint32_t>(kMinFrame + (seq * 7919) % (max - kMinFrame + 1));
  };
  Sender s{&*tx, &topo_};
  Receiver r{&rx->dev, &topo_};
  const uint32_t bursts[] = {1, 3, 64, 100, 256, 511, 17, 200};
  constexpr uint64_t kFrames = 4000;
  size_t b = 0;
  while (s.frames < kFrames) {
    const uint32_t n = std::min<uint32_t>(bursts[b++ % std::size(bursts)],
                                          static_cast<uint32_t>(kFrames - s.frames));
    ASSERT_EQ(s.queue(0, n, len_of), n);
    ASSERT_EQ(tx->pending(), n);
    auto sent = tx->submit();
    ASSERT_OK(sent);
    ASSERT_EQ(*sent, n);
    ASSERT_EQ(tx->pending(), 0u);
    ASSERT_TRUE(r.until(s.frames)) << "B got " << r.frames << " of " << s.frames;
    ASSERT_EQ(r.error, "");
  }
  EXPECT_EQ(r.frames, kFrames);
  EXPECT_EQ(r.bytes, s.bytes);
  EXPECT_EQ(r.foreign, 0u);
  EXPECT_EQ(tx->free_slots(), tx->slots());

  const LiveTxCounters& c = tx->counters();
  EXPECT_EQ(c.committed, kFrames);
  EXPECT_EQ(c.submit_frames, kFrames);
  EXPECT_EQ(c.redirected, kFrames);
  EXPECT_EQ(c.prog_errors, 0u);
  EXPECT_EQ(c.lost, 0u);
  EXPECT_LE(c.submits, 2 * (kFrames / 100 + 8));  // about one BPF_PROG_TEST_RUN per submit()
  if (tx->xmit_counted()) {
    EXPECT_EQ(c.xmit_sent, kFrames);
    EXPECT_EQ(c.xmit_drops, 0u);
    EXPECT_EQ(c.redirect_err, 0u);
  }
  auto st = tx->stats(0);
  ASSERT_OK(st);
  EXPECT_EQ(st->tx_frames, kFrames);
  EXPECT_EQ(st->tx_bytes, s.bytes);
  EXPECT_EQ(rx->prog->counter(kRedirect), kFrames);
  auto ks = rx->dev.kernel_stats();
  ASSERT_OK(ks);
  EXPECT_EQ(ks->rx_dropped, 0u);
}

// Two ports: each frame leaves on its own interface and arrives on the
// matching one in B; per-port counters agree.
TEST_F(LiveTxNetns, EachFrameLeavesOnItsPort) {
  make(2);
  auto rx = open_receiver(topo_);
  ASSERT_OK(rx);
  auto tx = LiveTx::create(tx_cfg(topo_));
  ASSERT_OK(tx);
  Sender s{&*tx, &topo_};
  Receiver r{&rx->dev, &topo_};
  auto len_of = [](uint64_t seq) { return static_cast<uint32_t>(60 + seq % 1400); };
  for (int round = 0; round < 20; ++round) {
    // Interleaved in one submit: 37 frames on port 0, 50 on port 1, 13 on 0.
    ASSERT_EQ(s.queue(0, 37, len_of), 37u);
    ASSERT_EQ(s.queue(1, 50, len_of), 50u);
    ASSERT_EQ(s.queue(0, 13, len_of), 13u);
    auto sent = tx->submit();
    ASSERT_OK(sent);
    ASSERT_EQ(*sent, 100u);
    ASSERT_TRUE(r.until(s.frames)) << "B got " << r.frames << " of " << s.frames;
  }
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.per_port[0], 1000u);
  EXPECT_EQ(r.per_port[1], 1000u);
  if (tx->xmit_counted()) {
    EXPECT_EQ(tx->feedback(0).xmit_sent, 1000u);
    EXPECT_EQ(tx->feedback(1).xmit_sent, 1000u);
  }
  auto s0 = tx->stats(0), s1 = tx->stats(1);
  ASSERT_OK(s0);
  ASSERT_OK(s1);
  EXPECT_EQ(s0->tx_frames, 1000u);
  EXPECT_EQ(s1->tx_frames, 1000u);
}

// The peer's RX queue is the submitting CPU modulo its queue count (veth):
// submits pinned to CPU 0 and CPU 1 land on queues 0 and 1 of a 2-queue peer.
TEST_F(LiveTxNetns, PeerQueueFollowsTheSubmittingCpu) {
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) GTEST_SKIP() << "needs 2 CPUs";
  make(1, 2);
  auto rx = open_receiver(topo_);
  ASSERT_OK(rx);
  ASSERT_EQ(rx->dev.sockets().size(), 2u);
  auto tx = LiveTx::create(tx_cfg(topo_));
  ASSERT_OK(tx);
  Sender s{&*tx, &topo_};
  Receiver r{&rx->dev, &topo_};
  cpu_set_t old;
  ASSERT_EQ(pthread_getaffinity_np(pthread_self(), sizeof(old), &old), 0);
  for (int cpu = 0; cpu < 2; ++cpu) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof(one), &one), 0);
    ASSERT_EQ(s.queue(0, 200, [](uint64_t) { return 200u; }), 200u);
    auto sent = tx->submit();
    ASSERT_OK(sent);
    ASSERT_TRUE(r.until(s.frames));
    EXPECT_EQ(r.per_queue[static_cast<uint32_t>(cpu)], 200u) << "cpu " << cpu;
  }
  pthread_setaffinity_np(pthread_self(), sizeof(old), &old);
  EXPECT_EQ(r.error, "");
}

// Nothing is lost silently: frames the driver refuses (veth: longer than the
// peer's MTU, peer without XDP) and redirects that fail (interface down,
// frame over the MTU) are counted, and committed = redirected + errors,
// redirected = sent + drops + redirect errors.
TEST_F(LiveTxNetns, DriverDropsAndRedirectErrorsAreCounted) {
  make(1, 1, 1500);
  auto tx = LiveTx::create(tx_cfg(topo_));
  ASSERT_OK(tx);
  if (!tx->xmit_counted()) GTEST_SKIP() << "tracing programs unavailable";
  const auto& v = topo_.pairs()[0];
  Sender s{&*tx, &topo_};
  auto fixed = [](uint32_t len) { return [len](uint64_t) { return len; }; };

  // B drops everything in XDP and has a smaller MTU than A: A's devmap
  // takes 1200-byte frames, veth_xdp_xmit refuses them (peer MTU + 18).
  std::unique_ptr<TestProg> drop;
  {
    auto ns = topo_.enter_b();
    ASSERT_OK(ns);
    auto p = TestProg::load();
    ASSERT_OK(p);
    drop = std::move(*p);
    ASSERT_OK(drop->attach(v.b_if, 0, drop->drop_fd()));
  }
  ASSERT_OK(topo_.ip(1, {"link", "set", v.b_if, "mtu", "1000"}));
  ASSERT_EQ(s.queue(0, 300, fixed(1200)), 300u);
  ASSERT_OK(tx->submit());
  LiveTxCounters c = tx->counters();
  EXPECT_EQ(c.redirected, 300u);
  EXPECT_EQ(c.xmit_drops, 300u);
  EXPECT_EQ(c.xmit_sent, 0u);
  ASSERT_EQ(s.queue(0, 100, fixed(900)), 100u);
  ASSERT_OK(tx->submit());
  c = tx->counters();
  EXPECT_EQ(c.xmit_sent, 100u);
  EXPECT_GE(drop->counter(kDrop), 100u);  // plus whatever A's stack sends (IPv6 ND)

  // B without XDP (and GRO off, so without NAPI): Linux 6.3+ refuses at the
  // devmap enqueue (veth stops advertising ndo_xdp_xmit: redirect_err),
  // older kernels in veth_xdp_xmit (ENXIO: xmit_drops). Counted either way.
  drop->detach_all();
  ASSERT_OK(topo_.exec(1, {"ethtool", "-K", v.b_if, "gro", "off"}));
  ASSERT_EQ(s.queue(0, 100, fixed(900)), 100u);
  ASSERT_OK(tx->submit());
  c = tx->counters();
  EXPECT_EQ(c.redirected, 500u);
  EXPECT_EQ(c.xmit_drops + c.redirect_err, 400u);
  const uint64_t refused = c.redirect_err;

  // Interface down: the devmap enqueue fails (ENETDOWN).
  ASSERT_OK(topo_.ip(0, {"link", "set", v.a_if, "down"}));
  ASSERT_EQ(s.queue(0, 100, fixed(1000)), 100u);
  ASSERT_OK(tx->submit());
  c = tx->counters();
  EXPECT_EQ(c.redirect_err, refused + 100u);
  ASSERT_OK(topo_.ip(0, {"link", "set", v.a_if, "up"}));

  // A's MTU lowered behind LiveTx's back: frames over it fail at the
  // enqueue (EMSGSIZE); after refresh() the room shrinks and longer commits
  // are refused in user space.
  ASSERT_OK(topo_.ip(0, {"link", "set", v.a_if, "mtu", "1000"}));
  ASSERT_EQ(s.queue(0, 50, fixed(1200)), 50u);
  ASSERT_OK(tx->submit());
  c = tx->counters();
  EXPECT_EQ(c.redirect_err, refused + 150u);
  ASSERT_OK(tx->refresh());
  EXPECT_EQ(tx->max_frame(0), 1018u);
  LiveTxFrame f[1];
  ASSERT_EQ(tx->reserve(0, f), 1u);
  EXPECT_EQ(f[0].room, 1018u);
  f[0].len = 1200;
  tx->commit({f, 1});
  c = tx->counters();
  EXPECT_EQ(c.commit_oversize, 1u);
  EXPECT_EQ(tx->pending(), 0u);

  auto st = tx->stats(0);
  ASSERT_OK(st);
  EXPECT_EQ(st->tx_frames, c.redirected);
  EXPECT_EQ(st->xmit_sent, c.xmit_sent);
  EXPECT_EQ(st->xmit_drops, c.xmit_drops);
  EXPECT_EQ(st->redirect_err, c.redirect_err);
  EXPECT_EQ(c.committed, c.redirected + c.prog_errors + c.lost);
  EXPECT_EQ(c.redirected, c.xmit_sent + c.xmit_drops + c.redirect_err);
  EXPECT_EQ(tx->free_slots(), tx->slots());
}

}  // namespace
}  // namespace mrc::xsktest

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (!::testing::GTEST_FLAG(list_tests)) {
    const std::string why = mrc::xsktest::skip_reason();
    if (!why.empty()) {
      std::printf("SKIP: %s\n", why.c_str());
      return 77;
    }
  }
  return RUN_ALL_TESTS();
}
