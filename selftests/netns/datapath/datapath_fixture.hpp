// The fixture of the libmrc netns tests: two hosts in their own network
// namespaces joined by 4 veth planes, each with its own Context (engine
// thread, AF_XDP sockets, XDP program), QPs connected in process, and helpers
// to register, fill, write and wait on completions. Used by datapath_test.cc
// (AF_XDP TX), live_tx_datapath_test.cc (live-frames TX) and
// multibuf_datapath_test.cc (multi-buffer AF_XDP).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <thread>
#include <vector>

#include "core/types.hpp"
#include "lib/exchange.hpp"
#include "mrc/mrc.hpp"
#include "support/netns_fixture.hpp"

namespace mrc::dptest {

using Clock = std::chrono::steady_clock;
constexpr uint32_t kPlanes = 4;
constexpr uint32_t kMtu = 3392;

struct Host {
  std::unique_ptr<Context> ctx;
  std::unique_ptr<Cq> cq;
  uint32_t pd = 0;
};

class DatapathFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why =
        frame_chunks_ > 1 ? xsktest::multi_buffer_skip_reason() : xsktest::skip_reason();
    if (!why.empty()) GTEST_SKIP() << why;
    auto t = xsktest::Topology::create(kPlanes, 1, topo_mtu_);
    ASSERT_TRUE(t.ok()) << t.error().message();
    topo_ = std::move(*t);
    for (int side = 0; side < 2; side++) {
      auto ns = side ? topo_.enter_b() : topo_.enter_a();
      ASSERT_TRUE(ns.ok()) << ns.error().message();
      DeviceOptions d;
      for (const auto& p : topo_.pairs()) d.interfaces.push_back(side ? p.b_if : p.a_if);
      d.use_mrcd = false;
      d.tx = backend_;
      d.live_tx_min = live_min_;
      d.progress = progress_;
      d.frame_chunks = frame_chunks_;
      d.idle_spin_us = idle_spin_us_;
      d.engine_coalesce_us = engine_coalesce_us_;
      d.engine_sched = engine_sched_;
      auto c = Context::open(d);
      ASSERT_TRUE(c.ok()) << c.error().message();
      h_[side].ctx = std::move(*c);
      h_[side].pd = *h_[side].ctx->alloc_pd();
      h_[side].cq = *h_[side].ctx->create_cq(16384);
    }
  }

  struct Pair {
    std::unique_ptr<Qp> q[2];
  };

  // A QP on each host, connected to each other (in-process "exchange").
  Pair connect(ConnectOptions o = ConnectOptions()) {
    o.mtu = path_mtu_;
    Pair p;
    for (int s = 0; s < 2; s++) {
      QpInitAttr ia;
      ia.pd = h_[s].pd;
      ia.cap.max_send_wr = 1024;
      ia.cap.max_recv_wr = 1024;
      auto q = h_[s].ctx->create_qp(ia, *h_[s].cq, *h_[s].cq);
      EXPECT_TRUE(q.ok()) << q.error().message();
      p.q[s] = std::move(*q);
    }
    QpEndpoint ep[2];
    for (int s = 0; s < 2; s++)
      ep[s] = describe(*h_[s].ctx, *p.q[s], 0x100 * (s + 1), o, o.max_wimm, o.mpr);
    for (int s = 0; s < 2; s++) {
      auto ns = s ? topo_.enter_b() : topo_.enter_a();  // neighbour lookups happen there
      auto st = connect_qp(*h_[s].ctx, *p.q[s], ep[s].psn, ep[1 - s], o);
      EXPECT_TRUE(st.ok()) << st.error().message();
    }
    return p;
  }

  // Bounds on waits, 5 times longer inside the VM layer (MRC_IN_VM=1,
  // Documentation/testing.md), which may run under TCG 10 to 30 times
  // slower. They bound failures only: a passing test never waits them out.
  static std::chrono::milliseconds scaled(std::chrono::milliseconds d) {
    const char* vm = std::getenv("MRC_IN_VM");
    return vm && std::strcmp(vm, "1") == 0 ? d * 5 : d;
  }

  // Polls host `s` until `pred` holds or `limit` (scaled) passes.
  bool wait(int s, std::vector<Wc>& out, const std::function<bool()>& pred,
            std::chrono::milliseconds limit) {
    const auto end = Clock::now() + scaled(limit);
    Wc wc[64];
    while (Clock::now() < end) {
      auto n = h_[s].cq->poll(wc);
      if (!n.ok()) return false;
      out.insert(out.end(), wc, wc + *n);
      if (pred()) return true;
      if (!*n) std::this_thread::yield();
    }
    return pred();
  }

  MemoryRegion reg(int s, std::vector<uint8_t>& buf, bool remote) {
    auto mr = h_[s].ctx->reg_mr(h_[s].pd, buf.data(), buf.size(),
                                core::kAccessLocalWrite | (remote ? core::kAccessRemoteWrite : 0u));
    EXPECT_TRUE(mr.ok());
    return *mr;
  }

  static void fill(std::vector<uint8_t>& b, uint64_t seed) {
    std::mt19937_64 r(seed);
    for (size_t i = 0; i + 8 <= b.size(); i += 8) {
      uint64_t v = r();
      std::memcpy(&b[i], &v, 8);
    }
  }

  Status write(Qp& q, const MemoryRegion& src, size_t off, size_t len, const MemoryRegion& dst,
               size_t doff, uint64_t id, bool imm = false, uint32_t immv = 0, uint32_t rkey = 0) {
    Sge sg{uint64_t(uintptr_t(src.addr)) + off, uint32_t(len), src.lkey};
    SendWr wr;
    wr.wr_id = id;
    wr.opcode = imm ? WrOpcode::kRdmaWriteWithImm : WrOpcode::kRdmaWrite;
    wr.sg_list = len ? &sg : nullptr;
    wr.num_sge = len ? 1 : 0;
    wr.remote_addr = uint64_t(uintptr_t(dst.addr)) + doff;
    wr.rkey = rkey ? rkey : dst.rkey;
    wr.imm_data = immv;
    return q.post_send(wr);
  }

  uint64_t plane_tx(Qp& q, uint8_t port) { return q.stats()->plane_tx_bytes[port]; }

  // A WRITE of `len` bytes from host 0 to host 1 (with immediate: and its
  // receive completion): placed byte for byte, nothing past it written.
  void write_placed_byte_for_byte(Pair& p, size_t len, bool imm, uint64_t id) {
    SCOPED_TRACE(std::to_string(len) + (imm ? " imm" : " write"));
    std::vector<uint8_t> src(len + 4096), dst(len + 4096, 0xee);
    fill(src, len + imm);
    auto ms = reg(0, src, false), md = reg(1, dst, true);
    if (imm) {
      ASSERT_TRUE(p.q[1]->post_recv(RecvWr{77, nullptr, 0}).ok());
    }
    ASSERT_TRUE(write(*p.q[0], ms, 0, len, md, 0, id, imm, 0xfeed).ok());
    std::vector<Wc> s, r;
    ASSERT_TRUE(wait(
        0, s, [&] { return !s.empty(); }, std::chrono::seconds(60)));
    EXPECT_EQ(s[0].status, core::kWcSuccess) << core::to_string(s[0].status);
    EXPECT_EQ(s[0].byte_len, len);
    if (imm) {
      ASSERT_TRUE(wait(
          1, r, [&] { return !r.empty(); }, std::chrono::seconds(10)));
      EXPECT_EQ(r[0].wr_id, 77u);
      EXPECT_EQ(r[0].imm_data, 0xfeedu);
      EXPECT_EQ(r[0].byte_len, len);
    }
    EXPECT_EQ(0, std::memcmp(src.data(), dst.data(), len));
    EXPECT_EQ(dst[len], 0xee) << "bytes past the message were written";
    ASSERT_TRUE(h_[0].ctx->dereg_mr(ms).ok());
    ASSERT_TRUE(h_[1].ctx->dereg_mr(md).ok());
  }
  // The same for every size in `sizes`, without and with immediate.
  void writes_placed_byte_for_byte(Pair& p, std::initializer_list<size_t> sizes) {
    uint64_t id = 0;
    for (size_t len : sizes)
      for (bool imm : {false, true}) {
        write_placed_byte_for_byte(p, len, imm, ++id);
        if (HasFatalFailure()) return;
      }
  }

  // `rounds` round trips: each side in turn writes 8 bytes (with immediate,
  // the round's number) into the other's buffer, and the other's receive
  // completion carries it; both hosts' CQs are polled (with
  // Progress::kApplication those polls run the engines).
  void ping_pong(Pair& p, int rounds) {
    std::vector<uint8_t> buf[2] = {std::vector<uint8_t>(4096), std::vector<uint8_t>(4096)};
    MemoryRegion mr[2] = {reg(0, buf[0], true), reg(1, buf[1], true)};
    for (int s = 0; s < 2; s++)
      for (int i = 0; i < 8; i++)
        ASSERT_TRUE(p.q[s]->post_recv(RecvWr{uint64_t(i), nullptr, 0}).ok());
    Wc wc[16];
    for (int r = 0; r < rounds; r++) {
      for (int s = 0; s < 2; s++) {
        const int d = 1 - s;
        uint64_t v = uint64_t(r) * 2 + uint64_t(s);
        std::memcpy(buf[s].data(), &v, 8);
        ASSERT_TRUE(write(*p.q[s], mr[s], 0, 8, mr[d], 8, v, true, uint32_t(v)).ok());
        bool got = false;
        const auto end = Clock::now() + scaled(std::chrono::seconds(10));
        while (!got && Clock::now() < end) {
          for (int k = 0; k < 2 && !got; k++) {
            auto n = h_[k].cq->poll(wc);
            ASSERT_TRUE(n.ok());
            for (size_t i = 0; i < *n; i++) {
              ASSERT_EQ(wc[i].status, core::kWcSuccess);
              if (k == d && wc[i].opcode == WcOpcode::kRecvRdmaWithImm) {
                EXPECT_EQ(wc[i].imm_data, uint32_t(v));
                ASSERT_TRUE(p.q[d]->post_recv(RecvWr{wc[i].wr_id, nullptr, 0}).ok());
                got = true;
              }
            }
          }
        }
        ASSERT_TRUE(got) << "round " << r << " side " << s << ": no arrival";
        uint64_t seen;
        std::memcpy(&seen, buf[d].data() + 8, 8);
        ASSERT_EQ(seen, v) << "round " << r;
      }
    }
  }

  // Once plane `port` is back up: rounds of 8 WRITEs of `msg` bytes (the
  // first 8 x msg of src/dst) until host 0's QP sent a quarter of a round on
  // the plane (60 s, scaled); each completes, every byte arrives.
  void expect_plane_used_again(Pair& p, uint8_t port, const MemoryRegion& ms,
                               const MemoryRegion& md, const std::vector<uint8_t>& src,
                               const std::vector<uint8_t>& dst, size_t msg) {
    const uint64_t before = plane_tx(*p.q[0], port);
    std::vector<Wc> s;
    const auto deadline = Clock::now() + scaled(std::chrono::seconds(60));
    size_t round = 0;
    while (plane_tx(*p.q[0], port) - before < 8 * msg / 4 && Clock::now() < deadline) {
      for (size_t i = 0; i < 8; i++)
        ASSERT_TRUE(write(*p.q[0], ms, i * msg, msg, md, i * msg, 1000 + i).ok());
      ASSERT_TRUE(wait(
          0, s, [&] { return s.size() == 8 * (round + 1); }, std::chrono::seconds(60)));
      round++;
    }
    EXPECT_GE(plane_tx(*p.q[0], port) - before, 8 * msg / 4 / 2)
        << "plane " << int(port) << " not used again after it came back";
    for (const auto& w : s) ASSERT_EQ(w.status, core::kWcSuccess);
    EXPECT_EQ(0, std::memcmp(src.data(), dst.data(), 8 * msg));
  }

  // TX backend of both hosts (DeviceOptions::tx, live_tx_min); a test
  // class sets them in its constructor.
  TxBackend backend_ = DeviceOptions().tx;
  uint32_t live_min_ = DeviceOptions().live_tx_min;
  Progress progress_ = DeviceOptions().progress;  // of both hosts
  uint32_t topo_mtu_ = 9000;                      // of every veth
  uint32_t frame_chunks_ = DeviceOptions().frame_chunks;
  uint32_t idle_spin_us_ = DeviceOptions().idle_spin_us;
  uint32_t engine_coalesce_us_ = DeviceOptions().engine_coalesce_us;
  EngineSched engine_sched_ = DeviceOptions().engine_sched;
  uint32_t path_mtu_ = kMtu;  // connect()'s ConnectOptions::mtu
  xsktest::Topology topo_;
  Host h_[2];
};

}  // namespace mrc::dptest
