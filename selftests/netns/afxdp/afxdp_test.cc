// AF_XDP driver layer over real veth pairs in private network namespaces.
// Every frame is self-verifying (test_frames.hpp) and checked byte for byte;
// waits are bounded loops on counters and poll(), never sleeps.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <sys/socket.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "support/netns_fixture.hpp"
#include "support/test_frames.hpp"
#include "support/test_prog.hpp"
#include "xdp/device.hpp"
#include "xdp/iface.hpp"
#include "xdp/netns.hpp"

namespace mrc::xsktest {
namespace {

using namespace mrc::xdp;
using Clock = std::chrono::steady_clock;

// Bounds on waits for traffic, widened 5x inside the VM layer (MRC_IN_VM=1,
// Documentation/testing.md), which runs these tests under TCG 10 to 30 times
// slower. They bound failures only: a passing test never waits them out.
std::chrono::milliseconds scaled(std::chrono::milliseconds d) {
  const char* vm = std::getenv("MRC_IN_VM");
  return vm && std::strcmp(vm, "1") == 0 ? d * 5 : d;
}
const std::chrono::milliseconds kDeadline = scaled(std::chrono::seconds(20));
constexpr int kA = 0, kB = 1;

#define ASSERT_OK(expr)                                                  \
  do {                                                                   \
    auto&& ok_r_ = (expr);                                               \
    ASSERT_TRUE(ok_r_.ok()) << #expr << ": " << ok_r_.error().message(); \
  } while (0)

// AF_XDP sockets this process holds open.
int own_xdp_fds() {
  int n = 0;
  for (int fd = 0; fd < 4096; ++fd) {
    int domain = 0;
    socklen_t len = sizeof(domain);
    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0 && domain == AF_XDP) ++n;
  }
  return n;
}

uint64_t mono_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

Result<Device> open_in(const Topology& t, int side, const DeviceConfig& cfg) {
  auto ns = side == kA ? t.enter_a() : t.enter_b();
  if (!ns) return std::move(ns).error();
  return Device::open(cfg);
}

DeviceConfig dev_cfg(const Topology& t, int side, uint32_t frames = 4096) {
  DeviceConfig c;
  for (const auto& v : t.pairs()) c.ports.push_back({side == kA ? v.a_if : v.b_if});
  c.umem.frame_count = frames;
  return c;
}

uint32_t xsk_key(uint16_t port, uint32_t queue) { return port * 16u + queue; }

// Loads the test program in `side`, attaches xsk_redirect to every pair's
// interface there and puts the device's sockets into its XSKMAP.
Result<std::unique_ptr<TestProg>> attach_prog(const Topology& t, int side, Device& dev,
                                              TestCfg cfg = {}) {
  auto ns = side == kA ? t.enter_a() : t.enter_b();
  if (!ns) return std::move(ns).error();
  auto p = TestProg::load();
  if (!p) return std::move(p).error();
  for (size_t i = 0; i < t.pairs().size(); ++i) {
    const auto& v = t.pairs()[i];
    MRC_TRY((*p)->attach(side == kA ? v.a_if : v.b_if, xsk_key(static_cast<uint16_t>(i), 0)));
  }
  MRC_TRY((*p)->set_cfg(cfg));
  MRC_TRY(dev.insert_into_xskmap((*p)->xsks_fd(), xsk_key));
  return std::move(*p);
}

// Writes and submits frames on one socket.
struct Sender {
  XskSocket* s;
  std::array<uint8_t, 6> dst, src;
  uint16_t plane = 0;
  uint32_t stream = 1;
  uint64_t next_seq = 0;
  uint64_t bytes = 0;

  template <class LenFn>
  uint32_t send(uint32_t n, LenFn len_of) {
    TxFrame f[64];
    uint32_t sent = 0;
    while (sent < n) {
      const uint32_t k = s->tx_reserve({f, std::min<uint32_t>(64, n - sent)});
      if (k == 0) break;
      for (uint32_t i = 0; i < k; ++i) {
        const uint32_t len = len_of(next_seq);
        write_frame(f[i].data, len, dst, src, next_seq, plane, static_cast<uint16_t>(s->queue()),
                    stream);
        f[i].len = len;
        bytes += len;
        ++next_seq;
      }
      s->tx_submit({f, k});
      sent += k;
    }
    return sent;
  }
};

// Drains a device, verifying every frame. frames counts test frames only;
// anything else (IPv6 ND with a match-all program) counts as foreign.
// While it waits it flushes the sending device's TX rings, as an engine loop
// does: a tx_submit() kick need not move a whole burst. Copy mode before
// Linux 6.17 sends 32 frames per sendto() and publishes the TX consumer index
// late, so kick_tx() stops after the first 32 and the rest waits for a flush.
struct Receiver {
  Device* dev;
  const Topology* topo;
  Device* tx = nullptr;  // the sender's device, flushed while waiting
  bool release = true;
  uint64_t frames = 0, bytes = 0, foreign = 0;
  std::map<std::pair<uint16_t, uint16_t>, uint64_t> next_seq;  // (plane, queue) -> expected
  std::map<uint16_t, uint64_t> per_port;
  std::string error;
  std::vector<RxFrame> held;

  // One rx burst, no waiting; returns frames received (test or not).
  uint32_t poll_once() {
    RxFrame buf[64];
    const uint32_t n = dev->rx(buf);
    for (uint32_t i = 0; i < n; ++i) check(buf[i]);
    if (release)
      dev->release({buf, n});
    else
      held.insert(held.end(), buf, buf + n);
    return n;
  }

  // Receives until `want` test frames (total) arrived or the time is up.
  bool until(uint64_t want, std::chrono::milliseconds limit = kDeadline) {
    const auto end = Clock::now() + limit;
    while (frames < want) {
      if (tx) tx->flush_tx();
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
      if (h.queue != f.queue && error.empty())
        error = "frame of queue " + std::to_string(h.queue) + " arrived on queue " +
                std::to_string(f.queue);
      uint64_t& exp = next_seq[{h.plane, h.queue}];
      if (h.seq != exp && error.empty())
        error = "sequence " + std::to_string(h.seq) + " where " + std::to_string(exp) +
                " was expected (loss or reordering)";
      exp = h.seq + 1;
    }
    ++frames;
    bytes += f.len;
    ++per_port[f.port];
  }
};

// Frames the device's sockets could hand out, are holding or gave the kernel.
uint64_t frames_accounted(const Device& d) {
  uint64_t n = d.umem().pool().available();
  for (const XskSocket& s : d.sockets()) {
    const XskCounters& c = s.counters();
    n += s.cached_frames();
    n += c.fill_frames - c.rx_frames;  // held by the kernel for RX
    n += s.tx_outstanding();
  }
  return n;
}

bool drain_tx(Device& d) {
  const auto end = Clock::now() + kDeadline;
  for (;;) {
    bool done = d.flush_tx();
    for (XskSocket& s : d.sockets()) done &= s.tx_outstanding() == 0;
    if (done) return true;
    if (Clock::now() > end) return false;
    (void)d.wait(1);
  }
}

class AfXdp : public ::testing::Test {
 protected:
  void make(uint32_t pairs, uint32_t queues = 1, uint32_t mtu = 1500) {
    auto t = Topology::create(pairs, queues, mtu);
    ASSERT_TRUE(t.ok()) << t.error().message();
    topo_ = std::move(*t);
  }
  Topology topo_;
};

// Frames of every length from the minimum to the MTU cross in both
// directions, each one intact.
TEST_F(AfXdp, FramesArriveIntactBothWays) {
  make(1);
  auto a = open_in(topo_, kA, dev_cfg(topo_, kA));
  ASSERT_OK(a);
  auto b = open_in(topo_, kB, dev_cfg(topo_, kB));
  ASSERT_OK(b);
  auto pa = attach_prog(topo_, kA, *a);
  ASSERT_OK(pa);
  auto pb = attach_prog(topo_, kB, *b);
  ASSERT_OK(pb);
  const auto& v = topo_.pairs()[0];
  const uint32_t kFrames = 1514 - 60 + 1;
  auto len_of = [](uint64_t seq) { return static_cast<uint32_t>(60 + seq % (1514 - 60 + 1)); };

  Sender sa{&a->sockets()[0], v.b_mac, v.a_mac};
  Receiver rb{&*b, &topo_, &*a};
  uint32_t sent = 0;
  while (sent < kFrames) {
    sent += sa.send(std::min<uint32_t>(32, kFrames - sent), len_of);
    ASSERT_TRUE(rb.until(sent)) << "B got " << rb.frames << " of " << sent;
  }
  EXPECT_EQ(rb.error, "");
  EXPECT_EQ(rb.frames, kFrames);
  EXPECT_EQ(rb.bytes, sa.bytes);
  EXPECT_EQ((*pb)->counter(kRedirect), kFrames);

  // B -> A: A receives with A's MACs swapped; a Receiver on A checks with
  // (dst, src) = (a_mac, b_mac), so build a mirrored view of the topology.
  Sender sb{&b->sockets()[0], v.a_mac, v.b_mac};
  sent = sb.send(512, len_of);
  EXPECT_EQ(sent, 512u);
  uint64_t got = 0;
  std::string err;
  const auto end = Clock::now() + kDeadline;
  RxFrame buf[64];
  while (got < 512 && Clock::now() < end) {
    b->flush_tx();  // see Receiver
    const uint32_t n = a->rx(buf);
    if (n == 0) {
      (void)a->wait(5);
      continue;
    }
    for (uint32_t i = 0; i < n; ++i) {
      FrameHdr h{};
      const std::string e = verify_frame(buf[i].data, buf[i].len, v.a_mac, v.b_mac, &h);
      if (!e.empty() && err.empty()) err = e;
      if (e.empty() && h.seq != got && err.empty()) err = "out of order";
      ++got;
    }
    a->release({buf, n});
  }
  EXPECT_EQ(got, 512u);
  EXPECT_EQ(err, "");
}

// Multi-buffer sockets (SocketConfig::multi_buffer, UmemConfig::tx_chunks):
// frames up to 8500 bytes leave A as 3 descriptors at most (one per 4 KiB
// UMEM frame of a TX frame) and reach B as up to 3 (3840 bytes per frame
// after the XDP headroom), each packet's pieces in one burst and in order.
// Reserved TX frames that are cancelled and sent frames that complete go
// back to the TX pool whole: every frame of both pools is accounted for.
TEST_F(AfXdp, MultiBufferFramesArriveIntact) {
  if (const std::string why = multi_buffer_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  make(1, 1, 9000);
  auto cfg = [&](int side) {
    DeviceConfig c = dev_cfg(topo_, side);
    c.umem.tx_chunks = 3;
    c.umem.tx_frames = 256;
    c.socket.multi_buffer = true;
    return c;
  };
  auto a = open_in(topo_, kA, cfg(kA));
  ASSERT_OK(a);
  auto b = open_in(topo_, kB, cfg(kB));
  ASSERT_OK(b);
  auto pa = attach_prog(topo_, kA, *a);
  ASSERT_OK(pa);
  auto pb = attach_prog(topo_, kB, *b);
  ASSERT_OK(pb);
  const auto& v = topo_.pairs()[0];
  XskSocket& s = a->sockets()[0];
  EXPECT_EQ(a->umem().tx_span_capacity(), 3u * 4096 - a->umem().config().headroom);
  const uint32_t pool0 = a->umem().tx_pool().available();
  EXPECT_EQ(pool0, 256u);

  // Cancelled reservations come back as whole TX frames (starts of spans).
  TxFrame f[64];
  for (int round = 0; round < 8; round++) {
    const uint32_t k = s.tx_reserve({f, 64});
    ASSERT_EQ(k, 64u);
    for (uint32_t i = 0; i < k; i++) EXPECT_EQ(f[i].room, 3u * 4096 - a->umem().config().headroom);
    s.tx_cancel({f, k});
  }
  s.flush_cache();
  EXPECT_EQ(a->umem().tx_pool().available(), pool0);
  // ... each a distinct TX frame at the start of its span.
  {
    const uint64_t span = 3 * 4096,
                   base = uint64_t(a->umem().config().frame_count - 256 * 3) * 4096;
    std::set<uint64_t> starts;
    std::vector<TxFrame> kept;
    for (int round = 0; round < 4; round++) {
      const uint32_t k = s.tx_reserve({f, 64});
      ASSERT_EQ(k, 64u);
      for (uint32_t i = 0; i < k; i++) {
        const uint64_t at = f[i].addr - a->umem().config().headroom;
        EXPECT_TRUE(at >= base && (at - base) % span == 0) << "TX frame at " << at;
        starts.insert(at);
      }
      if (round % 2)
        s.tx_cancel({f, k});  // the next round gets these back (LIFO)
      else
        kept.insert(kept.end(), f, f + k);
    }
    EXPECT_EQ(starts.size(), 3u * 64) << "a cancelled TX frame came back elsewhere";
    s.tx_cancel(kept);
    s.flush_cache();
    EXPECT_EQ(a->umem().tx_pool().available(), pool0);
  }

  auto len_of = [](uint64_t seq) {
    return static_cast<uint32_t>(60 + (seq * 977) % (8500 - 60 + 1));
  };
  Sender sa{&s, v.b_mac, v.a_mac};
  const uint32_t kFrames = 3000;
  uint64_t got = 0, bytes = 0, pieces = 0;
  std::string err;
  std::vector<uint8_t> pkt;
  RxFrame buf[64];
  uint32_t sent = 0;
  const auto end = Clock::now() + kDeadline;
  while (got < kFrames && Clock::now() < end) {
    if (sent < kFrames && sent - got < 128)
      sent += sa.send(std::min<uint32_t>(32, kFrames - sent), len_of);
    a->flush_tx();
    const uint32_t n = b->rx(buf);
    if (n == 0) {
      (void)b->wait(1);
      continue;
    }
    for (uint32_t i = 0; i < n; ++i) {
      pkt.insert(pkt.end(), buf[i].data, buf[i].data + buf[i].len);
      ++pieces;
      if (buf[i].more) continue;
      FrameHdr h{};
      const std::string e =
          verify_frame(pkt.data(), static_cast<uint32_t>(pkt.size()), v.b_mac, v.a_mac, &h);
      if (!e.empty() && err.empty()) err = e;
      if (e.empty() && h.seq != got && err.empty()) err = "out of order at " + std::to_string(got);
      bytes += pkt.size();
      pkt.clear();
      ++got;
    }
    EXPECT_FALSE(buf[n - 1].more) << "a burst ended inside a packet";
    b->release({buf, n});
  }
  EXPECT_EQ(got, kFrames);
  EXPECT_EQ(err, "");
  EXPECT_EQ(bytes, sa.bytes);
  EXPECT_GT(pieces, got + kFrames / 2) << "frames were not split";
  EXPECT_EQ((*pb)->counter(kRedirect), kFrames);
  // Every TX frame back in the pool, every single frame accounted for.
  ASSERT_TRUE(drain_tx(*a));
  s.flush_cache();
  EXPECT_EQ(a->umem().tx_pool().available(), pool0);
  EXPECT_EQ(a->umem().tx_pool().overflow(), 0u);
  EXPECT_EQ(frames_accounted(*a), a->umem().pool().capacity());
  EXPECT_EQ(frames_accounted(*b), b->umem().pool().capacity());
  EXPECT_EQ(a->sockets()[0].counters().tx_frames, kFrames);
}

// 200k frames in bursts of 64 with a receiver that keeps up: nothing lost,
// every counter (ours, the kernel's, the XDP program's) agrees, and every
// UMEM frame is accounted for afterwards.
TEST_F(AfXdp, BurstsWithoutLossAndConsistentCounters) {
  make(1);
  DeviceConfig ca = dev_cfg(topo_, kA);
  DeviceConfig cb = dev_cfg(topo_, kB);
  auto a = open_in(topo_, kA, ca);
  ASSERT_OK(a);
  auto b = open_in(topo_, kB, cb);
  ASSERT_OK(b);
  auto pb = attach_prog(topo_, kB, *b);
  ASSERT_OK(pb);
  const auto& v = topo_.pairs()[0];
  XskSocket& rxs = b->sockets()[0];
  const uint64_t kFrames = 200000;
  // Keep at most half the receiver's fill ring in flight: "keeps up".
  const uint64_t window = rxs.fill_target() / 2;
  ASSERT_GE(window, 64u);
  auto len_of = [](uint64_t seq) { return static_cast<uint32_t>(64 + (seq * 37) % 1400); };

  Sender s{&a->sockets()[0], v.b_mac, v.a_mac};
  Receiver r{&*b, &topo_};
  const auto end = Clock::now() + scaled(std::chrono::seconds(120));
  while (r.frames < kFrames && Clock::now() < end) {
    if (s.next_seq < kFrames && s.next_seq - r.frames + 64 <= window)
      s.send(static_cast<uint32_t>(std::min<uint64_t>(64, kFrames - s.next_seq)), len_of);
    else
      a->flush_tx();
    if (r.poll_once() == 0 && (s.next_seq == kFrames || s.next_seq - r.frames + 64 > window))
      (void)b->wait(5);
  }
  ASSERT_TRUE(drain_tx(*a));
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.frames, kFrames);
  EXPECT_EQ(r.bytes, s.bytes);

  const XskCounters ct = a->counters();
  const XskCounters cr = b->counters();
  EXPECT_EQ(ct.tx_frames, kFrames);
  EXPECT_EQ(ct.tx_completed, kFrames);
  EXPECT_EQ(ct.tx_bytes, s.bytes);
  EXPECT_EQ(cr.rx_frames, kFrames);
  EXPECT_EQ(cr.rx_bytes, s.bytes);
  EXPECT_EQ(ct.tx_kick_errors + ct.tx_kick_nobufs, 0u);
  EXPECT_LE(ct.tx_kicks, ct.tx_frames / 16) << "kicks are not batched";
  EXPECT_EQ((*pb)->counter(kRedirect), kFrames);

  auto kt = a->kernel_stats();
  auto kr = b->kernel_stats();
  ASSERT_OK(kt);
  ASSERT_OK(kr);
  EXPECT_EQ(kt->tx_invalid_descs, 0u);
  EXPECT_EQ(kr->rx_dropped, 0u);
  EXPECT_EQ(kr->rx_invalid_descs, 0u);
  EXPECT_EQ(kr->rx_ring_full, 0u);
  EXPECT_EQ(kr->rx_fill_ring_empty_descs, 0u);

  EXPECT_EQ(frames_accounted(*a), ca.umem.frame_count);
  EXPECT_EQ(frames_accounted(*b), cb.umem.frame_count);
  EXPECT_EQ(a->umem().pool().overflow(), 0u);
  EXPECT_EQ(b->umem().pool().overflow(), 0u);
}

// Four planes: four veth pairs, one UMEM per side shared by four sockets
// (each with its own fill/completion ring), every plane carrying traffic.
TEST_F(AfXdp, FourPlanesShareOneUmem) {
  make(4);
  auto a = open_in(topo_, kA, dev_cfg(topo_, kA));
  ASSERT_OK(a);
  auto b = open_in(topo_, kB, dev_cfg(topo_, kB));
  ASSERT_OK(b);
  auto pb = attach_prog(topo_, kB, *b);
  ASSERT_OK(pb);
  ASSERT_EQ(a->sockets().size(), 4u);
  ASSERT_EQ(b->sockets().size(), 4u);
  EXPECT_EQ(a->umem().socket_count(), 4u);
  EXPECT_EQ(b->umem().socket_count(), 4u);
  std::vector<int> fds;
  for (const XskSocket& s : b->sockets()) fds.push_back(s.fd());
  std::sort(fds.begin(), fds.end());
  EXPECT_EQ(std::unique(fds.begin(), fds.end()), fds.end()) << "sockets must be distinct";

  std::vector<Sender> tx;
  for (uint16_t p = 0; p < 4; ++p)
    tx.push_back(Sender{&a->sockets()[p], topo_.pairs()[p].b_mac, topo_.pairs()[p].a_mac, p});
  Receiver r{&*b, &topo_, &*a};
  const uint32_t kPerPlane = 5000;
  auto len_of = [](uint64_t seq) { return static_cast<uint32_t>(60 + (seq * 97) % 1440); };
  uint64_t sent = 0;
  for (uint32_t round = 0; round < kPerPlane / 50; ++round) {
    for (auto& s : tx) sent += s.send(50, len_of);
    ASSERT_TRUE(r.until(sent)) << "got " << r.frames << " of " << sent;
  }
  EXPECT_EQ(r.error, "");
  for (uint16_t p = 0; p < 4; ++p) {
    EXPECT_EQ(r.per_port[p], kPerPlane) << "plane " << p;
    EXPECT_EQ(b->sockets()[p].counters().rx_frames, kPerPlane) << "plane " << p;
    EXPECT_EQ(a->sockets()[p].counters().tx_frames, kPerPlane) << "plane " << p;
  }
  // Every frame address lies in the one shared UMEM.
  RxFrame buf[8];
  Sender one = tx[3];
  one.send(8, len_of);
  uint32_t got = 0;
  const auto end = Clock::now() + kDeadline;
  while (got < 8 && Clock::now() < end) {
    const uint32_t n = b->rx({buf + got, 8 - got});
    if (n == 0) (void)b->wait(5);
    got += n;
  }
  ASSERT_EQ(got, 8u);
  for (uint32_t i = 0; i < got; ++i) {
    EXPECT_LT(buf[i].addr + buf[i].len, b->umem().size());
    EXPECT_EQ(buf[i].data, b->umem().data(buf[i].addr));
    EXPECT_EQ(buf[i].port, 3);
  }
  b->release({buf, got});
  ASSERT_TRUE(drain_tx(*a));
}

// The XDP program writes struct mrc_xdp_meta in front of each frame; RX
// finds and validates it. With metadata off, no stale magic is mistaken for
// metadata (fill clears it).
TEST_F(AfXdp, MetadataWrittenByXdpIsReadable) {
  make(1);
  auto a = open_in(topo_, kA, dev_cfg(topo_, kA));
  ASSERT_OK(a);
  auto b = open_in(topo_, kB, dev_cfg(topo_, kB, 256));
  ASSERT_OK(b);
  TestCfg meta_on{1, 0};
  auto pb = attach_prog(topo_, kB, *b, meta_on);
  ASSERT_OK(pb);
  const auto& v = topo_.pairs()[0];
  int b_ifindex = b->ports()[0].info.ifindex;
  const uint32_t headroom = b->umem().config().headroom;

  Sender s{&a->sockets()[0], v.b_mac, v.a_mac};
  auto len_of = [](uint64_t seq) { return static_cast<uint32_t>(100 + seq % 500); };
  // More frames than the receiver's UMEM has, so every frame gets reused.
  const uint32_t kFrames = 1024;
  uint32_t got = 0, with_meta = 0;
  std::string err;
  RxFrame buf[32];
  const uint64_t t0 = mono_ns();
  const auto end = Clock::now() + kDeadline;
  while (got < kFrames && Clock::now() < end) {
    if (s.next_seq == got) s.send(32, len_of);
    const uint32_t n = b->rx(buf);
    if (n == 0) {
      (void)b->wait(5);
      continue;
    }
    const uint64_t t1 = mono_ns();
    for (uint32_t i = 0; i < n; ++i) {
      const RxFrame& f = buf[i];
      if (f.meta_room != kXdpPacketHeadroom && err.empty())
        err = "meta_room " + std::to_string(f.meta_room) + " (headroom " +
              std::to_string(headroom) + ")";
      const mrc_xdp_meta* m = f.meta();
      if (!m) {
        if (err.empty()) err = "frame without metadata";
        continue;
      }
      ++with_meta;
      if (m->rx_ts_ns < t0 || m->rx_ts_ns > t1) err = "rx timestamp outside the test window";
      if (m->rx_queue != 0 || m->l3_off != 14 || m->port != 1 ||
          m->resv != static_cast<uint32_t>(b_ifindex))
        err = "metadata fields wrong";
      if (!verify_frame(f.data, f.len, v.b_mac, v.a_mac).empty()) err = "frame corrupted";
    }
    got += n;
    b->release({buf, n});
  }
  EXPECT_EQ(got, kFrames);
  EXPECT_EQ(with_meta, kFrames);
  EXPECT_EQ(err, "");
  EXPECT_EQ((*pb)->counter(kMetaErr), 0u);

  // Metadata off: the same frames (all reused by now) carry no valid magic.
  ASSERT_OK((*pb)->set_cfg(TestCfg{0, 0}));
  uint32_t stale = 0, got2 = 0;
  const auto end2 = Clock::now() + kDeadline;
  while (got2 < kFrames && Clock::now() < end2) {
    if (s.next_seq == got + got2) s.send(32, len_of);
    const uint32_t n = b->rx(buf);
    if (n == 0) {
      (void)b->wait(5);
      continue;
    }
    for (uint32_t i = 0; i < n; ++i) stale += buf[i].meta() != nullptr;
    got2 += n;
    b->release({buf, n});
  }
  EXPECT_EQ(got2, kFrames);
  EXPECT_EQ(stale, 0u) << "stale metadata magic survived a refill";
}

// A small UMEM runs dry on TX and on RX; both recover once frames return.
TEST_F(AfXdp, PoolExhaustionAndRecovery) {
  make(1);
  DeviceConfig ca = dev_cfg(topo_, kA, 64);
  ca.socket.fill_target = 16;
  auto a = open_in(topo_, kA, ca);
  ASSERT_OK(a);
  DeviceConfig cb = dev_cfg(topo_, kB, 64);
  cb.socket.fill_target = 32;
  auto b = open_in(topo_, kB, cb);
  ASSERT_OK(b);
  auto pb = attach_prog(topo_, kB, *b);
  ASSERT_OK(pb);
  const auto& v = topo_.pairs()[0];
  XskSocket& txs = a->sockets()[0];

  // TX: 64 frames - 16 in A's fill ring = 48 to send.
  TxFrame f[64];
  EXPECT_EQ(txs.tx_reserve(f), 48u);
  EXPECT_EQ(txs.counters().pool_empty, 1u);
  TxFrame more[4];
  EXPECT_EQ(txs.tx_reserve(more), 0u);
  EXPECT_EQ(txs.counters().pool_empty, 2u);
  for (uint32_t i = 0; i < 48; ++i) {
    write_frame(f[i].data, 200, v.b_mac, v.a_mac, i, 0, 0, 1);
    f[i].len = 200;
  }
  // RX holds what arrives and never releases: B's 64 frames run out.
  Receiver r{&*b, &topo_};
  r.release = false;
  txs.tx_submit({f, 32});
  ASSERT_TRUE(r.until(32));
  // B still has 32 free frames; its fill ring takes them as frames arrive.
  txs.tx_submit({f + 32, 16});
  ASSERT_TRUE(drain_tx(*a));
  ASSERT_TRUE(r.until(48));
  EXPECT_EQ(r.error, "");
  // Reaped completions make A's frames reservable again.
  EXPECT_EQ(txs.tx_reserve(f), 48u);
  // B has only 16 frames left in its fill ring and none in its pool.
  for (uint32_t i = 0; i < 48; ++i) {
    write_frame(f[i].data, 200, v.b_mac, v.a_mac, 48 + i, 0, 0, 1);
    f[i].len = 200;
  }
  txs.tx_submit({f, 48});
  ASSERT_TRUE(drain_tx(*a));
  // B can take only the 16 frames left; the rest is dropped by the kernel
  // for want of fill-ring entries.
  // Wait until B's XDP program has seen all 96 frames, then take what the
  // socket got.
  const auto end = Clock::now() + kDeadline;
  while ((*pb)->counter(kRedirect) < 96 && Clock::now() < end) (void)b->wait(5);
  EXPECT_EQ((*pb)->counter(kRedirect), 96u);
  ASSERT_TRUE(r.until(64));
  EXPECT_EQ(r.poll_once(), 0u);
  EXPECT_EQ(r.frames, 64u);
  EXPECT_EQ(r.held.size(), 64u);
  auto k = b->kernel_stats();
  ASSERT_OK(k);
  EXPECT_EQ(k->rx_dropped, 32u);
  EXPECT_GT(k->rx_fill_ring_empty_descs, 0u);

  // Recovery: B releases everything, A sends again, all of it arrives.
  b->release(r.held);
  r.held.clear();
  r.release = true;
  r.next_seq.clear();
  EXPECT_EQ(txs.tx_reserve(f), 48u);
  for (uint32_t i = 0; i < 32; ++i) {
    write_frame(f[i].data, 300, v.b_mac, v.a_mac, i, 0, 0, 2);
    f[i].len = 300;
  }
  txs.tx_cancel({f + 32, 16});
  txs.tx_submit({f, 32});
  ASSERT_TRUE(r.until(96));
  EXPECT_EQ(r.error, "");
  ASSERT_TRUE(drain_tx(*a));
  EXPECT_EQ(frames_accounted(*a), 64u);
  EXPECT_EQ(frames_accounted(*b), 64u);
}

// veth has no AF_XDP zero-copy: auto binds in copy mode and says so; forcing
// zero-copy fails with a clear error and the UMEM stays usable.
TEST_F(AfXdp, BindModeReported) {
  make(1);
  auto ns = topo_.enter_b();
  ASSERT_OK(ns);
  const std::string ifname = topo_.pairs()[0].b_if;
  {
    auto umem = Umem::create(UmemConfig{.frame_count = 256});
    ASSERT_OK(umem);
    SocketConfig zc;
    zc.bind_mode = BindMode::kZeroCopy;
    auto s = XskSocket::create(*umem, ifname, 0, zc);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().code, EOPNOTSUPP) << s.error().message();
    EXPECT_NE(s.error().message().find("zero-copy"), std::string::npos) << s.error().message();
    // The failed bind leaves the UMEM usable.
    SocketConfig cp;
    cp.bind_mode = BindMode::kCopy;
    auto s2 = XskSocket::create(*umem, ifname, 0, cp);
    ASSERT_OK(s2);
    EXPECT_EQ(s2->mode(), BindMode::kCopy);
  }
  auto d = Device::open(dev_cfg(topo_, kB));
  ASSERT_OK(d);
  EXPECT_EQ(d->mode(), BindMode::kCopy);
  for (const XskSocket& x : d->sockets()) EXPECT_EQ(x.mode(), BindMode::kCopy);
}

// libxdp's own XSK program (no INHIBIT_PROG_LOAD) carries traffic; when the
// device goes, no socket and no program is left behind - for that path and
// for ours.
TEST_F(AfXdp, DefaultProgramAndCleanTeardown) {
  make(1);
  const auto& v = topo_.pairs()[0];
  auto a = open_in(topo_, kA, dev_cfg(topo_, kA));
  ASSERT_OK(a);
  {
    DeviceConfig cb = dev_cfg(topo_, kB);
    cb.socket.load_default_prog = true;
    auto b = open_in(topo_, kB, cb);
    ASSERT_OK(b);
    const XdpAttachInfo& x = b->ports()[0].info.xdp;
    EXPECT_NE(x.prog_id, 0u) << "libxdp attached no program";
    EXPECT_NE(x.mode, XdpMode::kNone);
    Sender s{&a->sockets()[0], v.b_mac, v.a_mac};
    Receiver r{&*b, &topo_, &*a};
    s.send(500, [](uint64_t) { return 800u; });
    ASSERT_TRUE(r.until(500));
    EXPECT_EQ(r.frames, 500u);
    EXPECT_EQ(r.error, "");
    auto n = topo_.xdp_socket_count(kB);
    ASSERT_OK(n);
    EXPECT_EQ(*n, 1);
  }
  {
    auto ns = topo_.enter_b();
    ASSERT_OK(ns);
    auto x = query_xdp(static_cast<int>(if_nametoindex(v.b_if.c_str())));
    ASSERT_OK(x);
    EXPECT_EQ(x->prog_id, 0u) << "libxdp's program outlived its sockets";
    EXPECT_EQ(x->mode, XdpMode::kNone);
  }
  auto n = topo_.xdp_socket_count(kB);
  ASSERT_OK(n);
  EXPECT_EQ(*n, 0);

  // Our own program and device: same, after both go away.
  {
    auto b = open_in(topo_, kB, dev_cfg(topo_, kB));
    ASSERT_OK(b);
    auto pb = attach_prog(topo_, kB, *b);
    ASSERT_OK(pb);
    EXPECT_EQ(*topo_.xdp_socket_count(kB), 1);
    Sender s{&a->sockets()[0], v.b_mac, v.a_mac};
    Receiver r{&*b, &topo_, &*a};
    s.send(100, [](uint64_t) { return 64u; });
    ASSERT_TRUE(r.until(100));
  }
  a = Device();
  EXPECT_EQ(own_xdp_fds(), 0);
  EXPECT_EQ(*topo_.xdp_socket_count(kA), 0);
  EXPECT_EQ(*topo_.xdp_socket_count(kB), 0);
  for (int side : {kA, kB}) {
    auto ns = side == kA ? topo_.enter_a() : topo_.enter_b();
    ASSERT_OK(ns);
    const std::string& ifn = side == kA ? v.a_if : v.b_if;
    auto x = query_xdp(static_cast<int>(if_nametoindex(ifn.c_str())));
    ASSERT_OK(x);
    EXPECT_EQ(x->prog_id, 0u) << ifn;
  }
}

// Two queues per veth: one socket per queue, frames sent on queue q arrive
// on the peer's queue q.
TEST_F(AfXdp, SocketPerQueue) {
  make(1, 2);
  auto a = open_in(topo_, kA, dev_cfg(topo_, kA));
  ASSERT_OK(a);
  auto b = open_in(topo_, kB, dev_cfg(topo_, kB));
  ASSERT_OK(b);
  ASSERT_EQ(a->ports()[0].info.queues.usable, 2u);
  ASSERT_EQ(b->sockets().size(), 2u);
  auto pb = attach_prog(topo_, kB, *b);
  ASSERT_OK(pb);
  const auto& v = topo_.pairs()[0];
  Sender s0{a->socket(0, 0), v.b_mac, v.a_mac};
  Sender s1{a->socket(0, 1), v.b_mac, v.a_mac};
  ASSERT_NE(s0.s, nullptr);
  ASSERT_NE(s1.s, nullptr);
  Receiver r{&*b, &topo_, &*a};
  auto len_of = [](uint64_t seq) { return static_cast<uint32_t>(64 + seq % 900); };
  for (int i = 0; i < 20; ++i) {
    s0.send(40, len_of);
    s1.send(60, len_of);
    ASSERT_TRUE(r.until(s0.next_seq + s1.next_seq));
  }
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(b->socket(0, 0)->counters().rx_frames, 800u);
  EXPECT_EQ(b->socket(0, 1)->counters().rx_frames, 1200u);
}

// Interface facts come from the interface's own namespace, and link events
// update them.
TEST_F(AfXdp, InterfaceFactsAndLinkEvents) {
  make(1, 1, 2000);
  auto b = open_in(topo_, kB, dev_cfg(topo_, kB));
  ASSERT_OK(b);
  auto pb = attach_prog(topo_, kB, *b);
  ASSERT_OK(pb);
  ASSERT_OK(b->refresh());
  const auto& v = topo_.pairs()[0];
  const InterfaceInfo& info = b->ports()[0].info;
  EXPECT_EQ(info.name, v.b_if);
  EXPECT_EQ(info.mac, v.b_mac);
  EXPECT_EQ(info.mtu, 2000u);
  EXPECT_TRUE(info.admin_up);
  EXPECT_TRUE(info.link_up);
  EXPECT_EQ(info.xdp.mode, XdpMode::kNative);
  EXPECT_NE(info.xdp.prog_id, 0u);
  in_addr want4{};
  in6_addr want6{};
  ASSERT_EQ(inet_pton(AF_INET, v.b_ip4.c_str(), &want4), 1);
  ASSERT_EQ(inet_pton(AF_INET6, v.b_ip6.c_str(), &want6), 1);
  ASSERT_EQ(info.ipv4.size(), 1u);
  EXPECT_EQ(info.ipv4[0].s_addr, want4.s_addr);
  ASSERT_EQ(info.ipv6.size(), 1u);
  EXPECT_EQ(std::memcmp(&info.ipv6[0], &want6, sizeof(want6)), 0);
  {
    auto ns = topo_.enter_b();
    ASSERT_OK(ns);
    EXPECT_EQ(info.ifindex, static_cast<int>(if_nametoindex(v.b_if.c_str())));
  }

  // Peer down: B loses carrier; the event arrives through wait().
  ASSERT_OK(topo_.ip(kA, {"link", "set", "dev", v.a_if, "down"}));
  auto end = Clock::now() + kDeadline;
  while (b->ports()[0].info.link_up && Clock::now() < end) ASSERT_OK(b->wait(100));
  EXPECT_FALSE(b->ports()[0].info.link_up);
  EXPECT_TRUE(b->ports()[0].info.admin_up);
  ASSERT_OK(topo_.ip(kA, {"link", "set", "dev", v.a_if, "up"}));
  end = Clock::now() + kDeadline;
  while (!b->ports()[0].info.link_up && Clock::now() < end) ASSERT_OK(b->wait(100));
  EXPECT_TRUE(b->ports()[0].info.link_up);
}

// Idle: wait() times out with nothing ready. Traffic: it wakes with POLLIN.
TEST_F(AfXdp, WaitWakesOnTraffic) {
  make(1);
  DeviceConfig cb = dev_cfg(topo_, kB);
  cb.watch_links = false;
  auto a = open_in(topo_, kA, dev_cfg(topo_, kA));
  ASSERT_OK(a);
  auto b = open_in(topo_, kB, cb);
  ASSERT_OK(b);
  auto pb = attach_prog(topo_, kB, *b);
  ASSERT_OK(pb);
  auto idle = b->wait(20);
  ASSERT_OK(idle);
  EXPECT_EQ(*idle, 0);
  const auto& v = topo_.pairs()[0];
  Sender s{&a->sockets()[0], v.b_mac, v.a_mac};
  s.send(1, [](uint64_t) { return 64u; });
  auto ready = b->wait(static_cast<int>(scaled(std::chrono::seconds(5)).count()));
  ASSERT_OK(ready);
  EXPECT_EQ(*ready, 1);
  EXPECT_TRUE(b->poll_fds()[0].revents & POLLIN);
  RxFrame f[4];
  EXPECT_EQ(b->rx(f), 1u);
  b->release({f, 1});
}

// Busy polling options are applied and traffic still flows; empty polls go
// through recvfrom() to drive the busy-poll loop.
TEST_F(AfXdp, BusyPolling) {
  make(1);
  DeviceConfig cb = dev_cfg(topo_, kB);
  cb.socket.busy_poll = true;
  cb.socket.busy_poll_usec = 20;
  cb.socket.busy_poll_budget = 64;
  auto a = open_in(topo_, kA, dev_cfg(topo_, kA));
  ASSERT_OK(a);
  auto b = open_in(topo_, kB, cb);
  ASSERT_OK(b);
  auto pb = attach_prog(topo_, kB, *b);
  ASSERT_OK(pb);
  int val = 0;
  socklen_t len = sizeof(val);
  ASSERT_EQ(getsockopt(b->sockets()[0].fd(), SOL_SOCKET, SO_BUSY_POLL, &val, &len), 0);
  EXPECT_EQ(val, 20);
  const auto& v = topo_.pairs()[0];
  Sender s{&a->sockets()[0], v.b_mac, v.a_mac};
  Receiver r{&*b, &topo_, &*a};
  for (int i = 0; i < 50; ++i) {
    s.send(64, [](uint64_t seq) { return static_cast<uint32_t>(64 + seq % 1000); });
    ASSERT_TRUE(r.until(s.next_seq));
  }
  EXPECT_EQ(r.error, "");
  // An empty ring: rx() drives the busy-poll loop with recvfrom().
  const uint64_t before = b->counters().rx_wakeups;
  RxFrame f[8];
  EXPECT_EQ(b->rx(f), 0u);
  EXPECT_EQ(b->counters().rx_wakeups, before + 1);
}

// Copy mode: with XDP_MAX_TX_SKB_BUDGET one sendto() moves a whole burst;
// with the kernel default of 32 a 64-frame burst needs two. Kicks handle
// EAGAIN without losing frames either way.
TEST_F(AfXdp, TxKicksPerBurst) {
  make(1);
  auto b = open_in(topo_, kB, dev_cfg(topo_, kB));
  ASSERT_OK(b);
  auto pb = attach_prog(topo_, kB, *b);
  ASSERT_OK(pb);
  const auto& v = topo_.pairs()[0];
  for (uint32_t budget : {0u, 32u}) {
    DeviceConfig ca = dev_cfg(topo_, kA);
    ca.socket.tx_budget = budget;
    auto a = open_in(topo_, kA, ca);
    ASSERT_OK(a);
    XskSocket& s = a->sockets()[0];
    const bool has_budget_opt = s.tx_budget() > 32;
    if (budget == 0 && !has_budget_opt)
      std::fprintf(stderr, "kernel without XDP_MAX_TX_SKB_BUDGET: 32 frames per sendto\n");
    Sender tx{&s, v.b_mac, v.a_mac};
    Receiver r{&*b, &topo_, &*a};
    const int kBursts = 100;
    for (int i = 0; i < kBursts; ++i) {
      tx.send(64, [](uint64_t) { return 128u; });
      ASSERT_TRUE(r.until(tx.next_seq)) << "budget " << budget;
    }
    EXPECT_EQ(r.error, "");
    const XskCounters& c = s.counters();
    if (budget == 0 && has_budget_opt)
      EXPECT_EQ(c.tx_kicks, static_cast<uint64_t>(kBursts)) << "one sendto per burst";
    else
      EXPECT_GE(c.tx_kicks, 2u * kBursts) << "32 frames per sendto";
    EXPECT_EQ(c.tx_frames, 64u * kBursts);
    ASSERT_TRUE(drain_tx(*a));
    // Each budget run gets a fresh device: forget the previous stream.
    (void)pb;
  }
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
