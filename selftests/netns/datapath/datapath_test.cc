// MRC over real AF_XDP sockets: two hosts in their own network namespaces
// joined by 4 veth planes, each running libmrc (its own engine thread and XDP
// program). Every transfer is verified byte for byte.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "lib/exchange.hpp"
#include "mrc/mrc.hpp"
#include "netns/datapath/datapath_fixture.hpp"

namespace mrc {
namespace {

using dptest::Clock;
using dptest::kMtu;
using dptest::kPlanes;

class Datapath : public dptest::DatapathFixture {};

struct SizeCase {
  size_t len;
  bool imm;
};

class Sizes : public Datapath, public ::testing::WithParamInterface<SizeCase> {};

TEST_P(Sizes, WriteIsPlacedByteForByte) {
  const auto [len, imm] = GetParam();
  Pair p = connect();
  write_placed_byte_for_byte(p, len, imm, 1);
}

INSTANTIATE_TEST_SUITE_P(Netns, Sizes,
                         ::testing::Values(SizeCase{1, false}, SizeCase{1, true},
                                           SizeCase{4096, false}, SizeCase{4096, true},
                                           SizeCase{1 << 20, false}, SizeCase{1 << 20, true},
                                           SizeCase{64 << 20, false}, SizeCase{64 << 20, true}),
                         [](const auto& i) {
                           return std::to_string(i.param.len) + (i.param.imm ? "_imm" : "_write");
                         });

// MRC_ENGINE (api.md, "Device options"): the operator's engine tunables,
// applied over the program's DeviceOptions::engine at open; both hosts here
// run without quick adapt and with 32 KiB SACKs, and carry 1 MiB byte for
// byte. A list with a bad item fails the open with EINVAL naming it.
class EngineFromEnv : public Datapath {
 protected:
  void SetUp() override {
    setenv("MRC_ENGINE", "cc_qa=0, sack_bytes=32768", 1);
    Datapath::SetUp();
    unsetenv("MRC_ENGINE");
  }
  void TearDown() override {
    unsetenv("MRC_ENGINE");
    Datapath::TearDown();
  }
};

TEST_F(EngineFromEnv, SettingsApplyAtOpenAndABadListFailsIt) {
  for (int s = 0; s < 2; s++) {
    EXPECT_TRUE(h_[s].ctx->options().engine.default_cc.nscc.disable_qa) << s;
    EXPECT_EQ(h_[s].ctx->options().engine.sack_bytes, 32768u) << s;
  }
  Pair p = connect();
  write_placed_byte_for_byte(p, 1 << 20, true, 1);
  auto ns = topo_.enter_a();
  ASSERT_TRUE(ns.ok()) << ns.error().message();
  DeviceOptions d;
  for (const auto& pr : topo_.pairs()) d.interfaces.push_back(pr.a_if);
  d.use_mrcd = false;
  setenv("MRC_ENGINE", "cc_qa=0,sack_bytes=lots", 1);
  auto c = Context::open(d);
  unsetenv("MRC_ENGINE");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code, EINVAL);
  EXPECT_NE(c.error().message().find("MRC_ENGINE: bad value for sack_bytes: 'lots'"),
            std::string::npos)
      << c.error().message();
  // Without it the defaults hold (quick adapt on).
  EXPECT_FALSE(DeviceOptions{}.engine.default_cc.nscc.disable_qa);
}

TEST_F(Datapath, MixOnFourQpsWithImmediatesInOrder) {
  constexpr int kQps = 4, kMsgs = 40;
  std::vector<Pair> pairs;
  for (int i = 0; i < kQps; i++) pairs.push_back(connect());
  std::mt19937 rng(7);
  struct Msg {
    size_t off, len;
    bool imm;
  };
  std::vector<std::vector<Msg>> plan(kQps);
  std::vector<std::vector<uint8_t>> src(kQps), dst(kQps);
  std::vector<MemoryRegion> ms(kQps), md(kQps);
  for (int q = 0; q < kQps; q++) {
    size_t off = 0;
    for (int m = 0; m < kMsgs; m++) {
      size_t len = (rng() % 4 == 0) ? rng() % (2 << 20) : rng() % 20000;
      plan[q].push_back({off, len, bool(rng() % 2)});
      off += len + 64;
    }
    src[q].resize(off);
    dst[q].assign(off, 0);
    fill(src[q], 100 + q);
    ms[q] = reg(0, src[q], false);
    md[q] = reg(1, dst[q], true);
    for (int m = 0; m < kMsgs; m++)
      if (plan[q][m].imm) {
        ASSERT_TRUE(pairs[q].q[1]->post_recv(RecvWr{uint64_t(q) << 32 | m, nullptr, 0}).ok());
      }
  }
  for (int m = 0; m < kMsgs; m++)
    for (int q = 0; q < kQps; q++) {
      const Msg& g = plan[q][m];
      ASSERT_TRUE(write(*pairs[q].q[0], ms[q], g.off, g.len, md[q], g.off, uint64_t(q) << 32 | m,
                        g.imm, uint32_t(q * 1000 + m))
                      .ok());
    }
  size_t imms = 0;
  for (auto& pl : plan)
    for (auto& g : pl) imms += g.imm;
  std::vector<Wc> s, r;
  ASSERT_TRUE(wait(
      0, s, [&] { return s.size() == size_t(kQps * kMsgs); }, std::chrono::seconds(120)));
  ASSERT_TRUE(wait(
      1, r, [&] { return r.size() == imms; }, std::chrono::seconds(10)));
  std::vector<int> next_send(kQps, 0), next_imm(kQps, 0);
  for (const auto& w : s) {
    ASSERT_EQ(w.status, core::kWcSuccess);
    int q = int(w.wr_id >> 32), m = int(uint32_t(w.wr_id));
    EXPECT_EQ(m, next_send[q]++) << "send completions out of post order on QP " << q;
  }
  for (const auto& w : r) {
    ASSERT_EQ(w.status, core::kWcSuccess);
    int q = int(w.wr_id >> 32);
    // Immediates arrive in send order: the next IMM message of that QP.
    while (next_imm[q] < kMsgs && !plan[q][next_imm[q]].imm) next_imm[q]++;
    ASSERT_LT(next_imm[q], kMsgs);
    EXPECT_EQ(w.imm_data, uint32_t(q * 1000 + next_imm[q]));
    EXPECT_EQ(w.byte_len, plan[q][next_imm[q]].len);
    next_imm[q]++;
  }
  for (int q = 0; q < kQps; q++)
    for (const auto& g : plan[q])
      ASSERT_EQ(0, std::memcmp(src[q].data() + g.off, dst[q].data() + g.off, g.len));
}

TEST_F(Datapath, PlaneDownMidTransferThenBack) {
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
  const std::string plane2 = topo_.pairs()[1].a_if;
  ASSERT_TRUE(topo_.ip(0, {"link", "set", plane2, "down"}).ok());
  const uint64_t at_down = plane_tx(*p.q[0], 2);
  ASSERT_TRUE(wait(
      0, s, [&] { return s.size() == kCount; }, std::chrono::seconds(120)));
  for (const auto& w : s) ASSERT_EQ(w.status, core::kWcSuccess) << core::to_string(w.status);
  EXPECT_EQ(0, std::memcmp(src.data(), dst.data(), src.size()));
  EXPECT_EQ(p.q[0]->query()->qp_state, QpState::kRts);
  // While it was down, almost nothing went out on plane 2 (what was in flight).
  EXPECT_LT(plane_tx(*p.q[0], 2) - at_down, 4u * kMsg);
  // Back up: the plane carries traffic again.
  ASSERT_TRUE(topo_.ip(0, {"link", "set", plane2, "up"}).ok());
  expect_plane_used_again(p, 2, ms, md, src, dst, kMsg);
}

TEST_F(Datapath, AllPlanesDownErrorsWithinRetryBudget) {
  ConnectOptions o;
  o.timeout = 10;  // 1.05 ms
  o.retry_linear = 2;
  o.retry_exp = 2;
  Pair p = connect(o);
  const size_t kMsg = 1 << 20;
  std::vector<uint8_t> src(kMsg * 8), dst(kMsg * 8, 0);
  fill(src, 4);
  auto ms = reg(0, src, false), md = reg(1, dst, true);
  for (const auto& pr : topo_.pairs())
    ASSERT_TRUE(topo_.ip(1, {"link", "set", pr.b_if, "down"}).ok());
  const auto t0 = Clock::now();
  for (size_t i = 0; i < 8; i++)
    ASSERT_TRUE(write(*p.q[0], ms, i * kMsg, kMsg, md, i * kMsg, i).ok());
  std::vector<Wc> s;
  // Budget: (1 + 2) x T + 2T + 4T = 9T ~ 9.4 ms, plus scheduling slack.
  ASSERT_TRUE(wait(
      0, s, [&] { return s.size() == 8; }, std::chrono::seconds(10)));
  const double ms_taken = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  EXPECT_EQ(s[0].status, core::kWcRetryExcErr) << core::to_string(s[0].status);
  for (size_t i = 1; i < s.size(); i++) EXPECT_EQ(s[i].status, core::kWcWrFlushErr);
  EXPECT_EQ(p.q[0]->query()->qp_state, QpState::kErr);
  EXPECT_LT(ms_taken, 500.0) << "took " << ms_taken << " ms";
  // The QP-fatal async event.
  AsyncEvent ev{};
  bool fatal = false;
  for (int i = 0; i < 100 && !fatal; i++) {
    while (h_[0].ctx->get_async_event(ev))
      if (ev.type == AsyncEventType::kQpFatal && ev.qpn == p.q[0]->qpn()) fatal = true;
    if (!fatal) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(fatal);
}

TEST_F(Datapath, BadRkeyAndOutOfBoundsWriteNothing) {
  for (int kind = 0; kind < 2; kind++) {
    Pair p = connect();
    std::vector<uint8_t> src(64 * 1024), dst(3 * 64 * 1024, 0x5a);
    fill(src, 5);
    auto ms = reg(0, src, false);
    auto mr = h_[1].ctx->reg_mr(h_[1].pd, dst.data() + 64 * 1024, 64 * 1024,
                                core::kAccessLocalWrite | core::kAccessRemoteWrite);
    ASSERT_TRUE(mr.ok());
    MemoryRegion md = *mr;
    uint32_t rkey = kind == 0 ? md.rkey ^ 0x100 : md.rkey;
    size_t doff = kind == 1 ? 48 * 1024 : 0;  // runs 32 KiB past the region's end
    ASSERT_TRUE(write(*p.q[0], ms, 0, 48 * 1024, md, doff, 9, false, 0, rkey).ok());
    std::vector<Wc> s;
    ASSERT_TRUE(wait(
        0, s, [&] { return !s.empty(); }, std::chrono::seconds(30)));
    EXPECT_EQ(s[0].status, core::kWcRemAccessErr) << core::to_string(s[0].status);
    EXPECT_GE(p.q[1]->stats()->rem_access_errors, 1u);
    for (uint8_t b : dst)
      ASSERT_EQ(b, 0x5a) << (kind ? "out-of-bounds" : "bad rkey") << " write changed memory";
  }
}

TEST_F(Datapath, NonMrcTrafficKeepsWorking) {
  Pair p = connect();
  const size_t kMsg = 4 << 20, kCount = 24;
  std::vector<uint8_t> src(kMsg * kCount), dst(kMsg * kCount, 0);
  fill(src, 6);
  auto ms = reg(0, src, false), md = reg(1, dst, true);
  for (size_t i = 0; i < kCount; i++)
    ASSERT_TRUE(write(*p.q[0], ms, i * kMsg, kMsg, md, i * kMsg, i).ok());
  // ping on every plane, and a TCP transfer, while MRC runs.
  for (const auto& pr : topo_.pairs()) {
    std::string peer = pr.b_ip4.substr(0, pr.b_ip4.find('/'));
    auto r = topo_.exec(0, {"ping", "-c", "3", "-i", "0.05", "-W", "2", peer});
    EXPECT_TRUE(r.ok()) << "ping " << peer << ": " << (r.ok() ? "" : r.error().message());
  }
  std::string b1 = topo_.pairs()[0].b_ip4.substr(0, topo_.pairs()[0].b_ip4.find('/'));
  UniqueFd lfd;
  {
    auto ns = topo_.enter_b();
    auto l = tcp_listen(b1, 18777);
    ASSERT_TRUE(l.ok()) << l.error().message();
    lfd = std::move(*l);
  }
  std::string got;
  std::thread server([&] {
    auto c = tcp_accept(lfd.get(), 10000);
    if (!c.ok()) return;
    char buf[65536];
    ssize_t n;
    while ((n = recv(c->get(), buf, sizeof buf, 0)) > 0) got.append(buf, size_t(n));
  });
  std::string payload(1 << 20, 'x');
  for (size_t i = 0; i < payload.size(); i++) payload[i] = char('a' + i % 26);
  {
    auto ns = topo_.enter_a();
    auto c = tcp_connect(b1, 18777, 10000);
    ASSERT_TRUE(c.ok()) << c.error().message();
    ASSERT_TRUE(send_line(c->get(), payload).ok());
  }
  server.join();
  lfd.reset();
  EXPECT_EQ(got, payload + "\n");
  std::vector<Wc> s;
  ASSERT_TRUE(wait(
      0, s, [&] { return s.size() == kCount; }, std::chrono::seconds(120)));
  for (const auto& w : s) ASSERT_EQ(w.status, core::kWcSuccess);
  EXPECT_EQ(0, std::memcmp(src.data(), dst.data(), src.size()));
}

}  // namespace
}  // namespace mrc
