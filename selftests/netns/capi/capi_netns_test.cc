// The C API (include/mrc/mrc.h) over real AF_XDP: two hosts in their own
// network namespaces joined by veth planes. A client and a server set up
// through the C API alone (TCP exchange included) transfer WRITEs and
// WRITE_WITH_IMMs with scatter lists, verified byte for byte; every bad
// argument gives its errno and changes nothing; async events (port down/up,
// QP fatal) reach the right contexts; destroy waits for acknowledged events.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "mrc/mrc.h"
#include "support/netns_fixture.hpp"

namespace mrc {
namespace {

using Clock = std::chrono::steady_clock;
constexpr uint32_t kPlanes = 4;
constexpr uint32_t kMtu = 3392;
constexpr uint16_t kMaxWimm = 64;
constexpr uint8_t kMpr = 8;

std::string err(const std::string& what) {
  return what + ": " + std::strerror(errno) + " (" + mrc_last_error() + ")";
}

// Stores an int no enumerator has, as a C caller may.
template <class E>
void set_raw(E& e, int v) {
  static_assert(sizeof(E) == sizeof(int));
  std::memcpy(&e, &v, sizeof v);
}

bool is_v4(const mrc_gid& g) {
  static const uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(g.raw, kMapped, 12) == 0;
}

// Our half of the exchange: QPN, PSN and a GID of the family on every port.
mrc_endpoint describe(mrc_device* d, mrc_qp* qp, uint32_t psn, bool v6) {
  mrc_endpoint e{};
  EXPECT_EQ(mrc_get_qpn(qp, &e.qpn), 0);
  e.psn = psn;
  e.max_wimm_dest = kMaxWimm;
  e.mpr_dest = kMpr;
  e.mtu = kMtu;
  const int n = mrc_num_ports(d);
  e.num_gids = uint32_t(n);
  for (int p = 1; p <= n; p++) {
    mrc_port_attr pa;
    EXPECT_EQ(mrc_query_port(d, uint8_t(p), &pa), 0);
    for (int i = 0; i < pa.gid_tbl_len; i++) {
      mrc_gid g;
      EXPECT_EQ(mrc_query_gid(d, uint8_t(p), i, &g), 0);
      if (is_v4(g) != v6) {
        e.gid[p - 1] = g;
        break;
      }
    }
  }
  return e;
}

int to_init(mrc_qp* qp, mrc_qp_hint* hint = nullptr) {
  mrc_ibv_qp_attr v{};
  v.qp_state = MRC_QPS_INIT;
  v.qp_access_flags = MRC_ACCESS_LOCAL_WRITE | MRC_ACCESS_REMOTE_WRITE;
  mrc_qp_attr m{};
  m.qp_hint = hint;
  return mrc_modify_qp(qp, &v, MRC_IBV_QP_STATE | MRC_IBV_QP_PKEY_INDEX | MRC_IBV_QP_ACCESS_FLAGS,
                       &m, MRC_QP_HINT | MRC_QP_EV_PROFILE_ID | MRC_QP_CC_PROFILE_ID);
}

int to_rtr(mrc_qp* qp, const mrc_endpoint& peer) {
  mrc_ibv_qp_attr v{};
  v.qp_state = MRC_QPS_RTR;
  v.path_mtu = std::min(kMtu, peer.mtu);
  v.dest_qp_num = peer.qpn;
  v.rq_psn = peer.psn;
  for (uint32_t i = 0; i < peer.num_gids && i < MRC_MAX_PORTS; i++) v.ah_attr.dgid[i] = peer.gid[i];
  v.ah_attr.peer_max_wimm_dest = peer.max_wimm_dest;
  mrc_qp_attr m{};
  m.wimm.max_wimm_dest = kMaxWimm;
  m.mpr.mpr_dest = kMpr;
  return mrc_modify_qp(qp, &v,
                       MRC_IBV_QP_STATE | MRC_IBV_QP_AV | MRC_IBV_QP_PATH_MTU |
                           MRC_IBV_QP_DEST_QPN | MRC_IBV_QP_RQ_PSN,
                       &m, MRC_QP_MAX_WIMM_DEST | MRC_QP_MPR_DEST);
}

int to_rts(mrc_qp* qp, uint32_t psn, uint8_t timeout = 14, uint8_t lin = 7, uint8_t exp = 7) {
  mrc_ibv_qp_attr v{};
  v.qp_state = MRC_QPS_RTS;
  v.sq_psn = psn;
  mrc_qp_attr m{};
  m.wimm.max_wimm = kMaxWimm;
  m.mpr.mpr = kMpr;
  m.timeout = timeout;
  m.retry.linear_cnt = lin;
  m.retry.exp_cnt = exp;
  return mrc_modify_qp(qp, &v, MRC_IBV_QP_STATE | MRC_IBV_QP_SQ_PSN, &m,
                       MRC_QP_MAX_WIMM | MRC_QP_MPR | MRC_QP_TIMEOUT | MRC_QP_RETRY_CNT);
}

mrc_qp_state qp_state(mrc_qp* qp) {
  mrc_ibv_qp_attr v{};
  EXPECT_EQ(mrc_query_qp(qp, &v, MRC_IBV_QP_STATE, nullptr, 0, nullptr), 0) << mrc_last_error();
  return v.qp_state;
}

// Polls until n completions or the limit; returns what it got.
std::vector<mrc_wc> poll_n(mrc_cq* cq, size_t n, std::chrono::milliseconds limit) {
  std::vector<mrc_wc> out;
  const auto end = Clock::now() + limit;
  mrc_wc wc[32];
  while (out.size() < n && Clock::now() < end) {
    int k = mrc_poll_cq(cq, 32, wc);
    if (k < 0) {
      ADD_FAILURE() << err("mrc_poll_cq");
      break;
    }
    out.insert(out.end(), wc, wc + k);
    if (!k) std::this_thread::yield();
  }
  return out;
}

// Waits (bounded) for the next async event of a context.
bool next_event(mrc_context* c, mrc_async_event& ev, int timeout_ms) {
  int fd = -1;
  EXPECT_EQ(mrc_get_async_fd(c, &fd), 0);
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, timeout_ms) <= 0) return false;
  return mrc_get_async_event(c, &ev) == 0;
}

// One side's objects.
struct Host {
  mrc_context* ctx = nullptr;
  mrc_pd* pd = nullptr;
  mrc_cq* cq = nullptr;
  mrc_qp* qp = nullptr;
};

class CApiNetns : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why = xsktest::skip_reason();
    if (!why.empty()) GTEST_SKIP() << why;
    auto t = xsktest::Topology::create(kPlanes, 1, 9000);
    ASSERT_TRUE(t.ok()) << t.error().message();
    topo_ = std::move(*t);
    for (int side = 0; side < 2; side++) {
      auto ns = enter(side);
      std::vector<const char*> names;
      for (const auto& p : topo_.pairs()) names.push_back(side ? p.b_if.c_str() : p.a_if.c_str());
      mrc_device_opts o{};
      o.flags = MRC_DEVICE_NO_MRCD | extra_flags();
      dev_[side] = mrc_open_device(names.data(), int(names.size()), &o);
      ASSERT_NE(dev_[side], nullptr) << err("mrc_open_device");
    }
  }
  // Device flags a test class adds to both devices.
  virtual uint32_t extra_flags() const { return 0; }

  void TearDown() override {
    for (int side = 0; side < 2; side++)
      if (dev_[side]) {
        auto ns = enter(side);  // the device detaches its XDP program there
        EXPECT_EQ(mrc_close_device(dev_[side]), 0) << err("mrc_close_device");
      }
  }

  xdp::ScopedNetns enter(int side) {
    auto ns = side ? topo_.enter_b() : topo_.enter_a();
    EXPECT_TRUE(ns.ok()) << ns.error().message();
    return ns.ok() ? std::move(*ns) : xdp::ScopedNetns();
  }

  // Context, PD, CQ and an INIT QP on one side.
  Host host(int side, uint32_t max_send_sge = 1, uint64_t send_ops = 0) {
    Host h;
    h.ctx = mrc_create_context(dev_[side], nullptr);
    EXPECT_NE(h.ctx, nullptr) << err("mrc_create_context");
    h.pd = mrc_alloc_pd(dev_[side]);
    EXPECT_NE(h.pd, nullptr) << err("mrc_alloc_pd");
    h.cq = mrc_create_cq(h.ctx, 4096, nullptr, nullptr, 0);
    EXPECT_NE(h.cq, nullptr) << err("mrc_create_cq");
    mrc_qp_init_attr ia{};
    ia.send_cq = ia.recv_cq = h.cq;
    ia.pd = h.pd;
    ia.cap.max_send_wr = 256;
    ia.cap.max_recv_wr = 256;
    ia.cap.max_send_sge = max_send_sge;
    ia.send_ops_flags = send_ops;
    h.qp = mrc_create_qp(h.ctx, &ia);
    EXPECT_NE(h.qp, nullptr) << err("mrc_create_qp");
    EXPECT_EQ(to_init(h.qp), 0) << err("INIT");
    return h;
  }

  // Connects two INIT QPs (in-process exchange), each side in its namespace.
  void connect(Host& a, Host& b, bool v6 = false, uint8_t timeout = 14, uint8_t lin = 7,
               uint8_t exp = 7) {
    const mrc_endpoint ea = describe(dev_[0], a.qp, 0x100, v6),
                       eb = describe(dev_[1], b.qp, 0x200, v6);
    {
      auto ns = enter(0);
      ASSERT_EQ(to_rtr(a.qp, eb), 0) << err("RTR A");
      ASSERT_EQ(to_rts(a.qp, 0x100, timeout, lin, exp), 0) << err("RTS A");
    }
    auto ns = enter(1);
    ASSERT_EQ(to_rtr(b.qp, ea), 0) << err("RTR B");
    ASSERT_EQ(to_rts(b.qp, 0x200, timeout, lin, exp), 0) << err("RTS B");
  }

  void destroy(Host& h) {
    if (h.qp) {
      EXPECT_EQ(mrc_destroy_qp(h.qp), 0) << err("mrc_destroy_qp");
    }
    if (h.cq) {
      EXPECT_EQ(mrc_destroy_cq(h.cq), 0) << err("mrc_destroy_cq");
    }
    if (h.pd) {
      EXPECT_EQ(mrc_dealloc_pd(h.pd), 0) << err("mrc_dealloc_pd");
    }
    if (h.ctx) {
      EXPECT_EQ(mrc_destroy_context(h.ctx), 0) << err("mrc_destroy_context");
    }
    h = Host{};
  }

  xsktest::Topology topo_;
  mrc_device* dev_[2] = {nullptr, nullptr};
};

// ---------------------------------------------------------------------------
// Client/server transfer, everything through the C API

struct Msg {
  std::vector<std::pair<size_t, uint32_t>> pieces;  // source offset, length
  size_t dst_off = 0;
  uint32_t len = 0;
  bool imm = false, signaled = false;
  uint32_t immv = 0;
};

struct Plan {
  std::vector<Msg> msgs;
  std::vector<uint8_t> src;       // client's source buffer
  std::vector<uint8_t> expected;  // server's buffer once every message landed
  size_t imms = 0, signaled = 0;
};

constexpr uint8_t kUntouched = 0xee;

Plan make_plan() {
  Plan p;
  const uint32_t lens[] = {1,      3, 4096,    kMtu, kMtu + 1, 65536, 1 << 20,
                           777777, 0, 2 << 20, 17,   100000,   5000};
  std::mt19937_64 rng(42);
  size_t src_len = 0, dst_len = 0;
  for (size_t i = 0; i < std::size(lens); i++) {
    Msg m;
    m.len = lens[i];
    m.imm = i % 2 == 1 || lens[i] == 0 || i + 1 == std::size(lens);
    m.signaled = i % 3 == 2 || i + 1 == std::size(lens);
    m.immv = 0xc0de0000u | uint32_t(i);
    // Up to three pieces gathered from scattered places of the source.
    const uint32_t k = m.len < 3 ? (m.len ? 1 : 0) : 1 + uint32_t(i % 3);
    uint32_t left = m.len;
    for (uint32_t j = 0; j < k; j++) {
      const uint32_t l = j + 1 == k ? left : left / (k - j);
      src_len += 64 + 8 * j;  // a gap before each piece
      m.pieces.push_back({src_len, l});
      src_len += l;
      left -= l;
    }
    m.dst_off = dst_len;
    dst_len += m.len + 128;
    p.imms += m.imm;
    p.signaled += m.signaled;
    p.msgs.push_back(m);
  }
  p.src.resize(src_len + 64);
  for (auto& b : p.src) b = uint8_t(rng());
  p.expected.assign(dst_len, kUntouched);
  for (const Msg& m : p.msgs) {
    size_t at = m.dst_off;
    for (auto [off, l] : m.pieces) {
      std::memcpy(&p.expected[at], &p.src[off], l);
      at += l;
    }
  }
  return p;
}

struct TransferCase {
  bool v6;
  bool app_progress;     // MRC_DEVICE_APP_PROGRESS on both devices
  bool live_tx = false;  // MRC_DEVICE_TX_LIVE on both devices
};

class CApiTransfer : public CApiNetns, public ::testing::WithParamInterface<TransferCase> {
 protected:
  uint32_t extra_flags() const override {
    return (GetParam().app_progress ? MRC_DEVICE_APP_PROGRESS : 0) |
           (GetParam().live_tx ? MRC_DEVICE_TX_LIVE : 0);
  }
};

// Server: registers a buffer, posts receives, swaps endpoints over TCP, waits
// on its completion channel for every immediate, verifies the buffer.
std::string run_server(mrc_device* dev, const Plan& plan, bool v6, int lfd) {
  mrc_context_attr ca{MRC_API_CURRENT_VERSION, 0};
  mrc_context* ctx = mrc_create_context(dev, &ca);
  if (!ctx) return err("server: mrc_create_context");
  mrc_device_attr da;
  int supported = 0;
  if (mrc_query_device_ex(dev, ctx, &da, &supported) || !supported ||
      !(da.mrc_protocol_version & MRC_PROTOCOL_VERSION_1))
    return err("server: mrc_query_device_ex");
  mrc_pd* pd = mrc_alloc_pd(dev);
  std::vector<uint8_t> buf(plan.expected.size(), kUntouched);
  mrc_mr* mr =
      mrc_reg_mr(pd, buf.data(), buf.size(), MRC_ACCESS_LOCAL_WRITE | MRC_ACCESS_REMOTE_WRITE);
  if (!pd || !mr) return err("server: PD/MR");
  mrc_comp_channel* ch = nullptr;
  if (mrc_create_comp_channel(ctx, &ch)) return err("server: mrc_create_comp_channel");
  int marker = 0;
  mrc_cq* cq = mrc_create_cq(ctx, 256, &marker, ch, 0);
  mrc_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = cq;
  ia.pd = pd;
  ia.cap = {16, 64, 1, 0, 0};
  ia.send_ops_flags = MRC_QP_EX_WITH_RDMA_WRITE;
  mrc_qp* qp = mrc_create_qp(ctx, &ia);
  if (!cq || !qp) return err("server: CQ/QP");
  if (to_init(qp)) return err("server: INIT");
  // Receives for every WRITE_WITH_IMM, posted as one list.
  std::vector<mrc_recv_wr> rw(plan.imms);
  for (size_t i = 0; i < rw.size(); i++) {
    rw[i] = {};
    rw[i].wr_id = 1000 + i;
    rw[i].next = i + 1 < rw.size() ? &rw[i + 1] : nullptr;
  }
  mrc_recv_wr* bad = nullptr;
  if (mrc_post_recv(qp, rw.data(), &bad)) return err("server: mrc_post_recv");
  int fd = mrc_exchange_accept(lfd, 20000);
  if (fd < 0) return err("server: accept");
  mrc_endpoint me = describe(dev, qp, 0x5000, v6), peer;
  me.addr = uint64_t(uintptr_t(buf.data()));
  me.len = buf.size();
  me.rkey = mr->rkey;
  if (mrc_exchange_endpoints(fd, &me, 1, &peer, 1, 20000) != 1) return err("server: exchange");
  if (to_rtr(qp, peer)) return err("server: RTR");
  // Completions through the channel: arm, poll, wait for the event, ack.
  int cfd = -1;
  if (mrc_get_comp_channel_fd(ch, &cfd) || mrc_req_notify_cq(cq, 0)) return err("server: notify");
  std::vector<mrc_wc> got;
  size_t events = 0;
  const auto end = Clock::now() + std::chrono::seconds(60);
  while (got.size() < plan.imms && Clock::now() < end) {
    mrc_wc wc[8];
    int n = mrc_poll_cq(cq, 8, wc);
    if (n < 0) return err("server: poll");
    if (n > 0) {
      got.insert(got.end(), wc, wc + n);
      continue;
    }
    pollfd p{cfd, POLLIN, 0};
    if (poll(&p, 1, 1000) <= 0) continue;
    mrc_cq* ev_cq = nullptr;
    void* ev_ctx = nullptr;
    if (mrc_get_cq_event(ch, &ev_cq, &ev_ctx)) return err("server: mrc_get_cq_event");
    if (ev_cq != cq || ev_ctx != &marker) return "server: the event names another CQ or context";
    mrc_ack_cq_events(ev_cq, 1);
    events++;
    if (mrc_req_notify_cq(cq, 0)) return err("server: re-arm");
  }
  if (got.size() != plan.imms)
    return "server: " + std::to_string(got.size()) + " of " + std::to_string(plan.imms) +
           " immediates";
  if (!events) return "server: no completion event came through the channel";
  // In send order, each with its immediate and length.
  size_t k = 0;
  for (const Msg& m : plan.msgs) {
    if (!m.imm) continue;
    const mrc_wc& w = got[k];
    if (w.status != MRC_WC_SUCCESS)
      return std::string("server: status ") + mrc_wc_status_str(w.status);
    if (w.opcode != MRC_WC_RECV_RDMA_WITH_IMM || !(w.wc_flags & MRC_WC_WITH_IMM))
      return "server: opcode/flags";
    if (w.wr_id != 1000 + k) return "server: receive WQEs consumed out of order";
    if (ntohl(w.imm_data) != m.immv)
      return "server: immediate " + std::to_string(ntohl(w.imm_data)) + " out of order";
    if (w.byte_len != m.len)
      return "server: byte_len " + std::to_string(w.byte_len) + " != " + std::to_string(m.len);
    if (w.qp_num != me.qpn) return "server: qp_num";
    k++;
  }
  // The client says "done" once every WRITE completed: all data is placed.
  char line[64];
  if (mrc_exchange_recv_line(fd, line, sizeof line, 60000) < 0 || std::strcmp(line, "done"))
    return err("server: done");
  for (size_t i = 0; i < buf.size(); i++)
    if (buf[i] != plan.expected[i]) return "server: byte " + std::to_string(i) + " differs";
  if (mrc_exchange_send_line(fd, "verified")) return err("server: send");
  close(fd);
  // Objects of the server go with the context (it tracks and cleans up).
  if (mrc_dereg_mr(mr) || mrc_destroy_context(ctx) || mrc_dealloc_pd(pd))
    return err("server: teardown");
  return "";
}

std::string run_client(mrc_device* dev, const Plan& plan, bool v6, const std::string& server) {
  mrc_context* ctx = mrc_create_context(dev, nullptr);
  mrc_pd* pd = mrc_alloc_pd(dev);
  if (!ctx || !pd) return err("client: context/PD");
  mrc_mr* mr = mrc_reg_mr(pd, const_cast<uint8_t*>(plan.src.data()), plan.src.size(),
                          MRC_ACCESS_LOCAL_WRITE);
  mrc_cq* cq = mrc_create_cq(ctx, 64, nullptr, nullptr, 0);
  mrc_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = cq;
  ia.pd = pd;
  ia.cap = {64, 0, 3, 0, 0};
  mrc_qp* qp = mrc_create_qp(ctx, &ia);
  if (!mr || !cq || !qp) return err("client: MR/CQ/QP");
  if (to_init(qp)) return err("client: INIT");
  int fd = mrc_exchange_connect(server.c_str(), 18515, 20000);
  if (fd < 0) return err("client: connect");
  mrc_endpoint me = describe(dev, qp, 0x7000, v6), peer;
  if (mrc_exchange_endpoints(fd, &me, 1, &peer, 1, 20000) != 1) return err("client: exchange");
  if (peer.len < plan.expected.size() || !peer.rkey)
    return "client: the server's buffer is too small";
  if (to_rtr(qp, peer) || to_rts(qp, me.psn)) return err("client: RTR/RTS");
  // Every message in one list; signaled ones complete in post order.
  std::vector<mrc_send_wr> wr(plan.msgs.size());
  std::vector<std::vector<mrc_sge>> sg(plan.msgs.size());
  for (size_t i = 0; i < wr.size(); i++) {
    const Msg& m = plan.msgs[i];
    for (auto [off, l] : m.pieces)
      sg[i].push_back({uint64_t(uintptr_t(plan.src.data() + off)), l, mr->lkey});
    wr[i] = {};
    wr[i].wr_id = i;
    wr[i].next = i + 1 < wr.size() ? &wr[i + 1] : nullptr;
    wr[i].sg_list = sg[i].empty() ? nullptr : sg[i].data();
    wr[i].num_sge = int(sg[i].size());
    wr[i].opcode = m.imm ? MRC_WR_RDMA_WRITE_WITH_IMM : MRC_WR_RDMA_WRITE;
    wr[i].send_flags = m.signaled ? MRC_SEND_SIGNALED : 0;
    wr[i].imm_data = htonl(m.immv);
    wr[i].wr.rdma.remote_addr = peer.addr + m.dst_off;
    wr[i].wr.rdma.rkey = peer.rkey;
  }
  mrc_send_wr* bad = nullptr;
  if (mrc_post_send(qp, wr.data(), &bad)) return err("client: mrc_post_send");
  const auto s = poll_n(cq, plan.signaled, std::chrono::seconds(60));
  if (s.size() != plan.signaled)
    return "client: " + std::to_string(s.size()) + " of " + std::to_string(plan.signaled) +
           " completions";
  size_t k = 0;
  for (size_t i = 0; i < plan.msgs.size(); i++) {
    if (!plan.msgs[i].signaled) continue;
    const mrc_wc& w = s[k++];
    if (w.status != MRC_WC_SUCCESS) return std::string("client: ") + mrc_wc_status_str(w.status);
    if (w.wr_id != i)
      return "client: completion " + std::to_string(w.wr_id) + " where " + std::to_string(i) +
             " was due";
    if (w.opcode != MRC_WC_RDMA_WRITE || w.byte_len != plan.msgs[i].len || w.qp_num != me.qpn)
      return "client: wc fields";
  }
  mrc_wc extra;
  if (mrc_poll_cq(cq, 1, &extra) != 0) return "client: a completion for an unsignaled WRITE";
  char line[64];
  if (mrc_exchange_send_line(fd, "done") ||
      mrc_exchange_recv_line(fd, line, sizeof line, 60000) < 0)
    return err("client: done");
  close(fd);
  if (std::strcmp(line, "verified")) return std::string("client: server said ") + line;
  if (mrc_destroy_qp(qp) || mrc_destroy_cq(cq) || mrc_dereg_mr(mr) || mrc_dealloc_pd(pd) ||
      mrc_destroy_context(ctx))
    return err("client: teardown");
  return "";
}

TEST_P(CApiTransfer, ClientServerThroughTheCApiVerifiedByteForByte) {
  const bool v6 = GetParam().v6;
  const Plan plan = make_plan();
  const std::string server_ip = topo_.pairs()[0].b_ip4;
  // The backend each device reports: live frames only when asked for (the
  // open fails rather than falling back with MRC_DEVICE_TX_LIVE), and then
  // a path MTU live frames carry (below the planes' 9000 and AF_XDP's 3392).
  for (int side = 0; side < 2; side++) {
    char note[128] = "x";
    const int kind = mrc_device_tx(dev_[side], note, sizeof note);
    EXPECT_EQ(kind, GetParam().live_tx ? MRC_DEVICE_TX_KIND_LIVE : MRC_DEVICE_TX_KIND_XSK);
    EXPECT_STREQ(note, "");
    uint32_t mtu = 0;
    ASSERT_EQ(mrc_query_path_mtu(dev_[side], 4, &mtu), 0) << err("mrc_query_path_mtu");
    if (GetParam().live_tx)
      EXPECT_TRUE(mtu >= 1024 && mtu < 3392) << mtu;
    else
      EXPECT_EQ(mtu, 3392u);
  }
  int lfd;
  {
    auto ns = enter(1);
    lfd = mrc_exchange_listen(server_ip.c_str(), 18515);
    ASSERT_GE(lfd, 0) << err("listen");
  }
  std::string server_result;
  std::thread server([&] {
    auto ns = enter(1);
    server_result = run_server(dev_[1], plan, v6, lfd);
  });
  std::string client_result;
  {
    auto ns = enter(0);
    client_result = run_client(dev_[0], plan, v6, server_ip);
  }
  server.join();
  close(lfd);
  EXPECT_EQ(client_result, "");
  EXPECT_EQ(server_result, "");
}

// With application progress the client's mrc_poll_cq runs its engine and
// the server, which sleeps on its completion channel, relies on its engine
// thread standing in. LiveTx: both devices send XDP live frames
// (MRC_DEVICE_TX_LIVE), the client's from its mrc_poll_cq.
INSTANTIATE_TEST_SUITE_P(Netns, CApiTransfer,
                         ::testing::Values(TransferCase{false, false}, TransferCase{true, false},
                                           TransferCase{false, true},
                                           TransferCase{false, true, true}),
                         [](const auto& i) {
                           return std::string(i.param.v6 ? "IPv6" : "IPv4") +
                                  (i.param.app_progress ? "_AppProgress" : "") +
                                  (i.param.live_tx ? "_LiveTx" : "");
                         });

// ---------------------------------------------------------------------------
// Argument errors: errno, a message, and nothing changed

#define EXPECT_ERRNO(call, want)                                                                  \
  do {                                                                                            \
    errno = 0;                                                                                    \
    const bool failed_ = (call) == -1;                                                            \
    const int e_ = errno;                                                                         \
    EXPECT_TRUE(failed_) << #call;                                                                \
    EXPECT_EQ(e_, want) << #call << ": " << std::strerror(e_) << " (" << mrc_last_error() << ")"; \
    EXPECT_STRNE(mrc_last_error(), "") << #call;                                                  \
  } while (0)
#define EXPECT_NULL_ERRNO(call, want)                                                             \
  do {                                                                                            \
    errno = 0;                                                                                    \
    const bool failed_ = (call) == nullptr;                                                       \
    const int e_ = errno;                                                                         \
    EXPECT_TRUE(failed_) << #call;                                                                \
    EXPECT_EQ(e_, want) << #call << ": " << std::strerror(e_) << " (" << mrc_last_error() << ")"; \
  } while (0)

TEST_F(CApiNetns, DeviceContextAndObjectErrors) {
  mrc_device* d = dev_[0];
  // Contexts: versions.
  mrc_context_attr bad_ver{MRC_API_VER(2, 0, 0), 0};
  EXPECT_NULL_ERRNO(mrc_create_context(d, &bad_ver), ENOTSUP);
  bad_ver = {MRC_API_VER(0, 9, 0), 0};
  EXPECT_NULL_ERRNO(mrc_create_context(d, &bad_ver), ENOTSUP);
  bad_ver = {0, MRC_API_VER(9, 0, 0)};
  EXPECT_NULL_ERRNO(mrc_create_context(d, &bad_ver), ENOTSUP);
  mrc_context_attr v100{MRC_API_VER(1, 0, 0), MRC_API_VER_LATEST};
  mrc_context* c = mrc_create_context(d, &v100);
  ASSERT_NE(c, nullptr) << err("create_context 1.0.0");
  mrc_context* other = mrc_create_context(dev_[1], nullptr);
  ASSERT_NE(other, nullptr);
  mrc_device_attr da;
  int sup = 0;
  EXPECT_ERRNO(mrc_query_device_ex(d, other, &da, &sup), EINVAL);
  ASSERT_EQ(mrc_query_device(d, &da, &sup), 0);
  EXPECT_EQ(sup, 1);
  EXPECT_EQ(da.qp_attr.max_qp_hint, 64u);
  EXPECT_EQ(da.mrc_protocol_version, uint32_t(MRC_PROTOCOL_VERSION_1));
  EXPECT_TRUE(da.cap & MRC_DEVICE_CAP_TRIM_NACK);
  EXPECT_ERRNO(mrc_query_device(d, nullptr, &sup), EINVAL);
  // Progress is the engine thread's here (no MRC_DEVICE_APP_PROGRESS).
  EXPECT_ERRNO(mrc_progress(d, 0), EINVAL);
  EXPECT_ERRNO(mrc_progress(nullptr, 0), EINVAL);
  // TX backend: AF_XDP unless asked (MRC_DEVICE_TX_LIVE / _AUTO).
  char note[8] = "x";
  EXPECT_EQ(mrc_device_tx(d, note, sizeof note), MRC_DEVICE_TX_KIND_XSK);
  EXPECT_STREQ(note, "");
  EXPECT_EQ(mrc_device_tx(d, nullptr, 0), MRC_DEVICE_TX_KIND_XSK);
  EXPECT_ERRNO(mrc_device_tx(nullptr, note, sizeof note), EINVAL);

  // Ports and GIDs.
  EXPECT_EQ(mrc_num_ports(d), int(kPlanes));
  mrc_port_attr pa;
  EXPECT_ERRNO(mrc_query_port(d, 0, &pa), EINVAL);
  EXPECT_ERRNO(mrc_query_port(d, kPlanes + 1, &pa), EINVAL);
  ASSERT_EQ(mrc_query_port(d, 2, &pa), 0);
  EXPECT_STREQ(pa.ifname, topo_.pairs()[1].a_if.c_str());
  EXPECT_EQ(pa.state, MRC_PORT_ACTIVE);
  EXPECT_EQ(pa.mtu, 9000u);
  EXPECT_EQ(pa.gid_tbl_len, 2);  // one IPv4, one IPv6 (link-local excluded)
  EXPECT_EQ(0, std::memcmp(pa.mac, topo_.pairs()[1].a_mac.data(), 6));
  mrc_gid g;
  ASSERT_EQ(mrc_query_gid(d, 2, 0, &g), 0);
  char s[INET6_ADDRSTRLEN];
  ASSERT_TRUE(is_v4(g));
  EXPECT_STREQ(inet_ntop(AF_INET, g.raw + 12, s, sizeof s), topo_.pairs()[1].a_ip4.c_str());
  ASSERT_EQ(mrc_query_gid(d, 2, 1, &g), 0);
  EXPECT_FALSE(is_v4(g));
  EXPECT_STREQ(inet_ntop(AF_INET6, g.raw, s, sizeof s), topo_.pairs()[1].a_ip6.c_str());
  EXPECT_ERRNO(mrc_query_gid(d, 2, 2, &g), ENOENT);
  EXPECT_ERRNO(mrc_query_gid(d, 2, -1, &g), EINVAL);
  // The path MTU: on MTU 9000 planes the planes carry 8896 (IPv4) but a
  // single-buffer device receives at most 3392 in one frame (the provider
  // used 4096 there and lost every full-size packet).
  uint32_t pm = 0;
  ASSERT_EQ(mrc_query_path_mtu(d, 4, &pm), 0);
  EXPECT_EQ(pm, kMtu);
  ASSERT_EQ(mrc_query_path_mtu(d, 6, &pm), 0);
  EXPECT_EQ(pm, kMtu);
  EXPECT_ERRNO(mrc_query_path_mtu(d, 5, &pm), EINVAL);
  EXPECT_ERRNO(mrc_query_path_mtu(d, 4, nullptr), EINVAL);
  EXPECT_ERRNO(mrc_query_path_mtu(nullptr, 4, &pm), EINVAL);

  // PDs and MRs.
  mrc_pd* pd = mrc_alloc_pd(d);
  ASSERT_NE(pd, nullptr);
  std::vector<uint8_t> buf(1 << 16);
  EXPECT_NULL_ERRNO(mrc_reg_mr(pd, buf.data(), buf.size(), MRC_ACCESS_REMOTE_WRITE), EINVAL);
  EXPECT_NULL_ERRNO(mrc_reg_mr(pd, buf.data(), buf.size(), 1 << 5), EINVAL);
  EXPECT_NULL_ERRNO(mrc_reg_mr(pd, buf.data(), buf.size(), -1), EINVAL);
  EXPECT_NULL_ERRNO(mrc_reg_mr(pd, nullptr, 64, MRC_ACCESS_LOCAL_WRITE), EINVAL);
  mrc_mr* mr =
      mrc_reg_mr(pd, buf.data(), buf.size(), MRC_ACCESS_LOCAL_WRITE | MRC_ACCESS_REMOTE_WRITE);
  ASSERT_NE(mr, nullptr);
  EXPECT_ERRNO(mrc_dealloc_pd(pd), EBUSY);
  EXPECT_ERRNO(mrc_close_device(d), EBUSY);  // contexts and PDs remain

  // Channels and CQs.
  mrc_comp_channel* ch = nullptr;
  mrc_comp_channel* och = nullptr;
  ASSERT_EQ(mrc_create_comp_channel(c, &ch), 0);
  ASSERT_EQ(mrc_create_comp_channel(other, &och), 0);
  EXPECT_ERRNO(mrc_create_comp_channel(c, nullptr), EINVAL);
  EXPECT_NULL_ERRNO(mrc_create_cq(c, 0, nullptr, nullptr, 0), EINVAL);
  EXPECT_NULL_ERRNO(mrc_create_cq(c, (1 << 22) + 1, nullptr, nullptr, 0), EINVAL);
  EXPECT_NULL_ERRNO(mrc_create_cq(c, 16, nullptr, nullptr, 1), EINVAL);
  EXPECT_NULL_ERRNO(mrc_create_cq(c, 16, nullptr, och, 0), EINVAL);
  mrc_cq* cq = mrc_create_cq(c, 16, nullptr, ch, 0);
  mrc_cq* plain = mrc_create_cq(c, 16, nullptr, nullptr, 0);
  mrc_cq* ocq = mrc_create_cq(other, 16, nullptr, nullptr, 0);
  ASSERT_TRUE(cq && plain && ocq);
  EXPECT_ERRNO(mrc_destroy_comp_channel(ch), EBUSY);
  EXPECT_ERRNO(mrc_req_notify_cq(plain, 0), EINVAL);
  EXPECT_ERRNO(mrc_req_notify_cq(cq, 1), EOPNOTSUPP);
  mrc_wc wc[2];
  EXPECT_ERRNO(mrc_poll_cq(cq, -1, wc), EINVAL);
  EXPECT_ERRNO(mrc_poll_cq(cq, 2, nullptr), EINVAL);
  EXPECT_EQ(mrc_poll_cq(cq, 0, nullptr), 0);
  // A non-blocking channel fd: no event yet is EAGAIN.
  int cfd = -1;
  ASSERT_EQ(mrc_get_comp_channel_fd(ch, &cfd), 0);
  ASSERT_EQ(fcntl(cfd, F_SETFL, fcntl(cfd, F_GETFL) | O_NONBLOCK), 0);
  mrc_cq* evcq = nullptr;
  EXPECT_ERRNO(mrc_get_cq_event(ch, &evcq, nullptr), EAGAIN);

  // QPs: creation.
  mrc_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = cq;
  ia.pd = pd;
  ia.cap = {16, 16, 2, 1, 0};
  auto create_bad = [&](auto tweak, int want) {
    mrc_qp_init_attr a = ia;
    tweak(a);
    EXPECT_NULL_ERRNO(mrc_create_qp(c, &a), want);
  };
  create_bad([](mrc_qp_init_attr& a) { a.send_cq = nullptr; }, EINVAL);
  create_bad([&](mrc_qp_init_attr& a) { a.recv_cq = ocq; }, EINVAL);
  create_bad([](mrc_qp_init_attr& a) { a.pd = nullptr; }, EINVAL);
  mrc_pd* opd = mrc_alloc_pd(dev_[1]);
  create_bad([&](mrc_qp_init_attr& a) { a.pd = opd; }, EINVAL);
  create_bad([](mrc_qp_init_attr& a) { a.cap.max_send_wr = 0; }, EINVAL);
  create_bad([](mrc_qp_init_attr& a) { a.cap.max_send_wr = 65537; }, EINVAL);
  create_bad([](mrc_qp_init_attr& a) { a.cap.max_send_sge = MRC_MAX_SGE + 1; }, EINVAL);
  create_bad([](mrc_qp_init_attr& a) { a.cap.max_recv_sge = MRC_MAX_SGE + 1; }, EINVAL);
  create_bad([](mrc_qp_init_attr& a) { a.cap.max_inline_data = 64; }, EINVAL);
  create_bad([](mrc_qp_init_attr& a) { set_raw(a.protocol_version, 2); }, EINVAL);
  create_bad([](mrc_qp_init_attr& a) { a.send_ops_flags = 1 << 2; }, EINVAL);  // SEND
  int qctx = 0;
  ia.qp_context = &qctx;
  ia.sq_sig_all = 1;
  mrc_qp* qp = mrc_create_qp(c, &ia);
  ASSERT_NE(qp, nullptr) << err("create_qp");
  EXPECT_ERRNO(mrc_destroy_cq(cq), EBUSY);
  mrc_qp_init_attr qi{};
  ASSERT_EQ(mrc_query_qp(qp, nullptr, 0, nullptr, 0, &qi), 0);
  EXPECT_EQ(qi.qp_context, &qctx);
  EXPECT_EQ(qi.send_cq, cq);
  EXPECT_EQ(qi.pd, pd);
  EXPECT_EQ(qi.cap.max_send_sge, 2u);
  EXPECT_EQ(qi.sq_sig_all, 1);

  // Posting in RESET.
  mrc_recv_wr rw{};
  mrc_recv_wr* bad_r = nullptr;
  EXPECT_ERRNO(mrc_post_recv(qp, &rw, &bad_r), EINVAL);
  EXPECT_EQ(bad_r, &rw);
  mrc_send_wr sw{};
  mrc_send_wr* bad_s = nullptr;
  EXPECT_ERRNO(mrc_post_send(qp, &sw, &bad_s), EINVAL);
  EXPECT_EQ(bad_s, &sw);

  // QP hints.
  mrc_qp_hint_init_attr hi{};
  hi.attr.num_qps_per_peer = 2;
  hi.attr.num_send_peers = 8;
  hi.attr.num_remote_recv_peers = 4;
  mrc_qp_hint_init_attr neg = hi;
  neg.attr.num_send_peers = -1;
  EXPECT_NULL_ERRNO(mrc_create_qp_hint(c, &neg), EINVAL);
  mrc_qp_hint_init_attr vend = hi;
  vend.attr.vendor_cfg[3] = 1;
  EXPECT_NULL_ERRNO(mrc_create_qp_hint(c, &vend), EINVAL);
  EXPECT_NULL_ERRNO(mrc_create_qp_hint(c, nullptr), EINVAL);
  mrc_qp_hint* hint = mrc_create_qp_hint(c, &hi);
  mrc_qp_hint* ohint = mrc_create_qp_hint(other, &hi);
  ASSERT_TRUE(hint && ohint);
  mrc_qp_hint_attr ha{};
  ha.num_send_peers = 99;
  EXPECT_ERRNO(mrc_modify_qp_hint(hint, &ha, MRC_QP_HINT_VENDOR_CFG | MRC_QP_HINT_NUM_SEND_PEERS),
               EINVAL);
  EXPECT_ERRNO(mrc_modify_qp_hint(hint, &ha, 1 << 10), EINVAL);
  ha.num_send_peers = -3;
  EXPECT_ERRNO(mrc_modify_qp_hint(hint, &ha, MRC_QP_HINT_NUM_SEND_PEERS), EINVAL);
  ha = {};
  ASSERT_EQ(mrc_query_qp_hint(hint, &ha,
                              MRC_QP_HINT_NUM_QPS_PER_PEER | MRC_QP_HINT_NUM_SEND_PEERS |
                                  MRC_QP_HINT_NUM_REMOTE_RECV_PEERS),
            0);
  EXPECT_EQ(ha.num_qps_per_peer, 2);
  EXPECT_EQ(ha.num_send_peers, 8) << "a refused modify changed the hint";
  EXPECT_EQ(ha.num_remote_recv_peers, 4);
  ha.num_send_peers = 16;
  ASSERT_EQ(mrc_modify_qp_hint(hint, &ha, MRC_QP_HINT_NUM_SEND_PEERS), 0);
  ha = {};
  ASSERT_EQ(mrc_query_qp_hint(hint, &ha, MRC_QP_HINT_NUM_SEND_PEERS), 0);
  EXPECT_EQ(ha.num_send_peers, 16);
  EXPECT_EQ(ha.num_qps_per_peer, 0) << "query filled a field outside its mask";
  EXPECT_ERRNO(mrc_query_qp_hint(hint, &ha, 1 << 12), EINVAL);
  // The device allows max_qp_hint hints (two exist: this context's and the other device's).
  std::vector<mrc_qp_hint*> many;
  for (uint32_t i = 1; i < da.qp_attr.max_qp_hint; i++) {
    many.push_back(mrc_create_qp_hint(c, &hi));
    ASSERT_NE(many.back(), nullptr) << i << ": " << err("create_qp_hint");
  }
  EXPECT_NULL_ERRNO(mrc_create_qp_hint(c, &hi), ENOMEM);
  for (mrc_qp_hint* h : many) ASSERT_EQ(mrc_destroy_qp_hint(h), 0);

  // modify_qp: every refusal leaves the QP as it was.
  mrc_ibv_qp_attr v{};
  mrc_qp_attr m{};
  const int kInitIbv = MRC_IBV_QP_STATE | MRC_IBV_QP_PKEY_INDEX | MRC_IBV_QP_ACCESS_FLAGS;
  const int kInitMrc = MRC_QP_HINT | MRC_QP_EV_PROFILE_ID | MRC_QP_CC_PROFILE_ID;
  v.qp_state = MRC_QPS_RTR;
  EXPECT_ERRNO(mrc_modify_qp(qp, &v, MRC_IBV_QP_STATE, &m, 0), EINVAL);  // RESET -> RTR
  v.qp_state = MRC_QPS_INIT;
  v.qp_access_flags = MRC_ACCESS_LOCAL_WRITE | MRC_ACCESS_REMOTE_WRITE;
  EXPECT_ERRNO(mrc_modify_qp(qp, &v, MRC_IBV_QP_STATE, &m, kInitMrc), EINVAL);  // no PKEY/ACCESS
  EXPECT_ERRNO(mrc_modify_qp(qp, &v, kInitIbv, &m, 0), EINVAL);                 // no MRC attributes
  EXPECT_ERRNO(mrc_modify_qp(qp, &v, kInitIbv | MRC_IBV_QP_PORT, &m, kInitMrc), EINVAL);
  EXPECT_ERRNO(mrc_modify_qp(qp, &v, kInitIbv | MRC_IBV_QP_TIMEOUT, &m, kInitMrc), EINVAL);
  EXPECT_ERRNO(mrc_modify_qp(qp, &v, kInitIbv | (1 << 2), &m, kInitMrc), EINVAL);  // unknown bit
  EXPECT_ERRNO(mrc_modify_qp(qp, &v, kInitIbv, &m, kInitMrc | MRC_QP_VENDOR_CFG), EINVAL);
  EXPECT_ERRNO(mrc_modify_qp(qp, &v, kInitIbv, nullptr, kInitMrc), EINVAL);
  EXPECT_ERRNO(mrc_modify_qp(qp, nullptr, kInitIbv, &m, kInitMrc), EINVAL);
  m.qp_hint = ohint;
  EXPECT_ERRNO(mrc_modify_qp(qp, &v, kInitIbv, &m, kInitMrc), EINVAL);
  m.qp_hint = hint;
  m.profile.ev_profile_id = 99;  // not installed
  EXPECT_ERRNO(mrc_modify_qp(qp, &v, kInitIbv, &m, kInitMrc), EINVAL);
  m.profile.ev_profile_id = 0;
  v.pkey_index = 1;
  EXPECT_ERRNO(mrc_modify_qp(qp, &v, kInitIbv, &m, kInitMrc), EINVAL);
  v.pkey_index = 0;
  v.qp_state = mrc_qp_state(4);  // SQD
  EXPECT_ERRNO(mrc_modify_qp(qp, &v, kInitIbv, &m, kInitMrc), EINVAL);
  v.qp_state = MRC_QPS_INIT;
  v.qp_access_flags = 1 << 6;
  EXPECT_ERRNO(mrc_modify_qp(qp, &v, kInitIbv, &m, kInitMrc), EINVAL);
  v.qp_access_flags = MRC_ACCESS_LOCAL_WRITE | MRC_ACCESS_REMOTE_WRITE;
  EXPECT_EQ(qp_state(qp), MRC_QPS_RESET);
  ASSERT_EQ(mrc_modify_qp(qp, &v, kInitIbv, &m, kInitMrc), 0) << err("INIT with hint");
  EXPECT_EQ(qp_state(qp), MRC_QPS_INIT);
  EXPECT_ERRNO(mrc_destroy_qp_hint(hint), EBUSY);
  mrc_qp_attr mq{};
  ASSERT_EQ(mrc_query_qp(qp, nullptr, 0, &mq, MRC_QP_HINT, nullptr), 0);
  EXPECT_EQ(mq.qp_hint, hint);
  EXPECT_ERRNO(mrc_query_qp(qp, nullptr, 0, &mq, 1 << 20, nullptr), EINVAL);
  EXPECT_ERRNO(mrc_query_qp(qp, nullptr, MRC_IBV_QP_STATE, nullptr, 0, nullptr), EINVAL);

  // INIT -> RTR refusals (the AV is checked and resolved before anything changes).
  mrc_endpoint bpeer{};  // B's IPv4 GIDs
  for (int p = 1; p <= int(kPlanes); p++)
    ASSERT_EQ(mrc_query_gid(dev_[1], uint8_t(p), 0, &bpeer.gid[p - 1]), 0);
  auto ns = enter(0);
  mrc_ibv_qp_attr rv{};
  rv.qp_state = MRC_QPS_RTR;
  rv.path_mtu = kMtu;
  rv.dest_qp_num = 0x123;
  rv.rq_psn = 5;
  mrc_qp_attr rm{};
  rm.wimm.max_wimm_dest = kMaxWimm;
  rm.mpr.mpr_dest = kMpr;
  const int kRtrIbv = MRC_IBV_QP_STATE | MRC_IBV_QP_AV | MRC_IBV_QP_PATH_MTU | MRC_IBV_QP_DEST_QPN |
                      MRC_IBV_QP_RQ_PSN;
  const int kRtrMrc = MRC_QP_MAX_WIMM_DEST | MRC_QP_MPR_DEST;
  auto rtr_bad = [&](auto tweak, int want, int ibv = 0, int mrcm = 0) {
    mrc_ibv_qp_attr a = rv;
    mrc_qp_attr b = rm;
    for (int p = 0; p < int(kPlanes); p++) a.ah_attr.dgid[p] = bpeer.gid[p];
    tweak(a, b);
    EXPECT_ERRNO(mrc_modify_qp(qp, &a, ibv ? ibv : kRtrIbv, &b, mrcm ? mrcm : kRtrMrc), want);
    EXPECT_EQ(qp_state(qp), MRC_QPS_INIT);
  };
  rtr_bad([](mrc_ibv_qp_attr& a,
             mrc_qp_attr&) { std::memset(&a.ah_attr.dgid, 0, sizeof a.ah_attr.dgid); },
          EINVAL);
  rtr_bad([&](mrc_ibv_qp_attr& a, mrc_qp_attr&) { a.ah_attr.dgid[kPlanes] = bpeer.gid[0]; },
          EINVAL);
  rtr_bad([](mrc_ibv_qp_attr& a,
             mrc_qp_attr&) { inet_pton(AF_INET6, "fd00:1::2", a.ah_attr.dgid[1].raw); },
          EINVAL);
  rtr_bad([](mrc_ibv_qp_attr& a, mrc_qp_attr&) { a.path_mtu = 9000; },
          EINVAL);  // + headers > MTU 9000
  rtr_bad([](mrc_ibv_qp_attr& a, mrc_qp_attr&) { a.path_mtu = kMtu + 64; },
          EINVAL);  // fits the planes, not one single-buffer frame
  rtr_bad([](mrc_ibv_qp_attr& a, mrc_qp_attr&) { a.path_mtu = 100; }, EINVAL);
  rtr_bad([](mrc_ibv_qp_attr& a, mrc_qp_attr&) { a.path_mtu = 1000; },
          EINVAL);  // not a multiple of 64
  rtr_bad([](mrc_ibv_qp_attr& a, mrc_qp_attr&) { a.rq_psn = 1 << 24; }, EINVAL);
  rtr_bad([](mrc_ibv_qp_attr& a, mrc_qp_attr&) { a.dest_qp_num = 1 << 24; }, EINVAL);
  rtr_bad([](mrc_ibv_qp_attr&, mrc_qp_attr& b) { b.mpr.mpr_dest = 0; }, EINVAL);
  rtr_bad([](mrc_ibv_qp_attr&, mrc_qp_attr& b) { b.wimm.max_wimm_dest = 60000; }, EINVAL);
  rtr_bad([](mrc_ibv_qp_attr&, mrc_qp_attr&) {}, EINVAL, kRtrIbv & ~MRC_IBV_QP_RQ_PSN);
  rtr_bad([](mrc_ibv_qp_attr&, mrc_qp_attr&) {}, EINVAL, 0, MRC_QP_MAX_WIMM_DEST);
  rtr_bad([](mrc_ibv_qp_attr&, mrc_qp_attr&) {}, EINVAL, 0,
          kRtrMrc | MRC_QP_MPR);  // an RTS attribute
  // A destination nobody answers for (ARP unanswered for 2 s): resolution
  // fails, nothing changes.
  rtr_bad([](mrc_ibv_qp_attr& a,
             mrc_qp_attr&) { inet_pton(AF_INET, "198.18.0.77", a.ah_attr.dgid[0].raw + 12); },
          EHOSTUNREACH);
  mrc_ibv_qp_attr after{};
  ASSERT_EQ(mrc_query_qp(qp, &after, MRC_IBV_QP_AV | MRC_IBV_QP_DEST_QPN, nullptr, 0, nullptr), 0);
  EXPECT_EQ(after.dest_qp_num, 0u);
  for (const auto& gd : after.ah_attr.dgid) {
    mrc_gid zero{};
    EXPECT_EQ(0, std::memcmp(&gd, &zero, sizeof zero)) << "a refused RTR left an AV behind";
  }
  // Posting: receives are fine in INIT, sends are not.
  EXPECT_EQ(mrc_post_recv(qp, &rw, &bad_r), 0) << err("post_recv in INIT");
  sw.opcode = MRC_WR_RDMA_WRITE;
  EXPECT_ERRNO(mrc_post_send(qp, &sw, &bad_s), EINVAL);
  EXPECT_NE(std::string(mrc_last_error()).find("INIT"), std::string::npos) << mrc_last_error();

  // Back to RESET clears the hint; then it can go.
  mrc_ibv_qp_attr rst{};
  rst.qp_state = MRC_QPS_RESET;
  ASSERT_EQ(mrc_modify_qp(qp, &rst, MRC_IBV_QP_STATE, nullptr, 0), 0) << err("RESET");
  auto flushed = poll_n(cq, 1, std::chrono::seconds(5));
  ASSERT_EQ(flushed.size(), 1u) << "the posted receive is flushed on RESET";
  EXPECT_EQ(flushed[0].status, MRC_WC_WR_FLUSH_ERR);
  EXPECT_EQ(flushed[0].opcode, MRC_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(mrc_destroy_qp_hint(hint), 0) << err("destroy hint after RESET");

  // Destroying the objects; the device closes only when nothing remains.
  EXPECT_EQ(mrc_destroy_qp(qp), 0);
  EXPECT_EQ(mrc_destroy_cq(cq), 0);
  EXPECT_EQ(mrc_destroy_comp_channel(ch), 0);
  EXPECT_EQ(mrc_dereg_mr(mr), 0);
  EXPECT_EQ(mrc_dealloc_pd(pd), 0);
  EXPECT_EQ(mrc_dealloc_pd(opd), 0);
  EXPECT_ERRNO(mrc_close_device(d), EBUSY);
  EXPECT_EQ(mrc_destroy_context(c), 0);
  // `other` still holds a channel, a CQ and a hint: destroy_context takes them.
  EXPECT_EQ(mrc_destroy_context(other), 0);
}

TEST_F(CApiNetns, PostSendChecksTheWholeListBeforePostingAny) {
  Host a = host(0, 2), b = host(1);
  Host imm_only = host(0, 1, MRC_QP_EX_WITH_RDMA_WRITE);  // WRITE only
  Host imm_peer = host(1);
  connect(a, b);
  connect(imm_only, imm_peer);
  std::vector<uint8_t> src(1 << 16), dst(1 << 16, 0);
  for (size_t i = 0; i < src.size(); i++) src[i] = uint8_t(i * 7 + 1);
  mrc_mr* ms = mrc_reg_mr(a.pd, src.data(), src.size(), MRC_ACCESS_LOCAL_WRITE);
  mrc_mr* md =
      mrc_reg_mr(b.pd, dst.data(), dst.size(), MRC_ACCESS_LOCAL_WRITE | MRC_ACCESS_REMOTE_WRITE);
  ASSERT_TRUE(ms && md);
  mrc_sge sg[3] = {{uint64_t(uintptr_t(src.data())), 100, ms->lkey},
                   {uint64_t(uintptr_t(src.data() + 1000)), 200, ms->lkey},
                   {uint64_t(uintptr_t(src.data() + 2000)), 300, ms->lkey}};
  mrc_send_wr w[3];
  auto reset = [&] {
    for (int i = 0; i < 3; i++) {
      w[i] = {};
      w[i].wr_id = uint64_t(i + 1);
      w[i].next = i < 2 ? &w[i + 1] : nullptr;
      w[i].sg_list = sg;
      w[i].num_sge = 1;
      w[i].opcode = MRC_WR_RDMA_WRITE;
      w[i].send_flags = MRC_SEND_SIGNALED;
      w[i].wr.rdma.remote_addr = uint64_t(uintptr_t(dst.data())) + 4096 * uint64_t(i);
      w[i].wr.rdma.rkey = md->rkey;
    }
  };
  auto refused = [&](auto tweak) {
    reset();
    tweak();
    mrc_send_wr* bad = nullptr;
    EXPECT_ERRNO(mrc_post_send(a.qp, w, &bad), EINVAL);
    EXPECT_EQ(bad, &w[2]) << "bad_wr must name the offending request";
  };
  refused([&] { set_raw(w[2].opcode, 2); });    // SEND
  refused([&] { set_raw(w[2].opcode, 4); });    // RDMA READ
  refused([&] { w[2].send_flags |= 1 << 3; });  // INLINE
  refused([&] { w[2].send_flags |= 1 << 2; });  // SOLICITED
  refused([&] { w[2].num_sge = 3; });           // max_send_sge is 2
  refused([&] { w[2].num_sge = -1; });
  refused([&] { w[2].sg_list = nullptr; });
  refused([&] {
    static mrc_sge huge[2];
    huge[0] = {uint64_t(uintptr_t(src.data())), 0x80000000u, ms->lkey};
    huge[1] = {uint64_t(uintptr_t(src.data())), 1, ms->lkey};
    w[2].sg_list = huge;
    w[2].num_sge = 2;
  });
  // Nothing of those lists went out: the first completion is the next post's.
  reset();
  w[0].next = nullptr;
  w[0].wr_id = 77;
  w[0].sg_list = &sg[1];
  w[0].num_sge = 2;  // 200 + 300 bytes gathered
  mrc_send_wr* bad = nullptr;
  ASSERT_EQ(mrc_post_send(a.qp, w, &bad), 0) << err("post_send");
  auto s = poll_n(a.cq, 1, std::chrono::seconds(30));
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].wr_id, 77u) << "a refused list posted something";
  EXPECT_EQ(s[0].status, MRC_WC_SUCCESS);
  EXPECT_EQ(s[0].byte_len, 500u);
  EXPECT_EQ(0, std::memcmp(dst.data(), src.data() + 1000, 200));
  EXPECT_EQ(0, std::memcmp(dst.data() + 200, src.data() + 2000, 300));
  EXPECT_EQ(dst[500], 0) << "bytes past the message were written";
  mrc_wc extra[4];
  EXPECT_EQ(mrc_poll_cq(a.cq, 4, extra), 0);

  // A bad lkey is found by the engine: a completion, not a post error.
  reset();
  w[0].next = nullptr;
  w[0].wr_id = 88;
  mrc_sge badkey = sg[0];
  badkey.lkey ^= 0x100;
  w[0].sg_list = &badkey;
  ASSERT_EQ(mrc_post_send(a.qp, w, &bad), 0);
  s = poll_n(a.cq, 1, std::chrono::seconds(30));
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].wr_id, 88u);
  EXPECT_EQ(s[0].status, MRC_WC_LOC_QP_OP_ERR);

  // send_ops_flags = WRITE only: WRITE_WITH_IMM is refused at post.
  mrc_mr* ms2 = mrc_reg_mr(imm_only.pd, src.data(), src.size(), MRC_ACCESS_LOCAL_WRITE);
  reset();
  w[0].next = nullptr;
  w[0].opcode = MRC_WR_RDMA_WRITE_WITH_IMM;
  sg[0].lkey = ms2->lkey;
  EXPECT_ERRNO(mrc_post_send(imm_only.qp, w, &bad), EINVAL);
  EXPECT_NE(std::string(mrc_last_error()).find("send_ops_flags"), std::string::npos);

  // RTS -> RTS may change the timeout; RTS -> INIT is refused.
  mrc_ibv_qp_attr v{};
  mrc_qp_attr m{};
  m.timeout = 12;
  ASSERT_EQ(mrc_modify_qp(a.qp, &v, 0, &m, MRC_QP_TIMEOUT), 0) << err("RTS timeout");
  m = {};
  ASSERT_EQ(mrc_query_qp(a.qp, nullptr, 0, &m, MRC_QP_TIMEOUT | MRC_QP_MPR, nullptr), 0);
  EXPECT_EQ(m.timeout, 12);
  EXPECT_EQ(m.mpr.mpr, kMpr);
  v.qp_state = MRC_QPS_INIT;
  EXPECT_ERRNO(mrc_modify_qp(a.qp, &v, MRC_IBV_QP_STATE, nullptr, 0), EINVAL);
  m.mpr.mpr = 4;
  EXPECT_ERRNO(mrc_modify_qp(a.qp, &v, 0, &m, MRC_QP_MPR), EINVAL);  // MPR only on the way to RTS
  v.cur_qp_state = MRC_QPS_RTR;
  m.timeout = 9;
  EXPECT_ERRNO(mrc_modify_qp(a.qp, &v, MRC_IBV_QP_CUR_STATE, &m, MRC_QP_TIMEOUT),
               EINVAL);  // not RTR
  m = {};
  ASSERT_EQ(mrc_query_qp(a.qp, nullptr, 0, &m, MRC_QP_TIMEOUT, nullptr), 0);
  EXPECT_EQ(m.timeout, 12);
  mrc_ibv_qp_attr q{};
  ASSERT_EQ(mrc_query_qp(a.qp, &q, MRC_IBV_QP_STATE | MRC_IBV_QP_AV | MRC_IBV_QP_PATH_MTU, nullptr,
                         0, nullptr),
            0);
  EXPECT_EQ(q.qp_state, MRC_QPS_RTS);
  EXPECT_EQ(q.path_mtu, kMtu);
  mrc_gid g;
  ASSERT_EQ(mrc_query_gid(dev_[1], 3, 0, &g), 0);
  EXPECT_EQ(0, std::memcmp(&q.ah_attr.dgid[2], &g, sizeof g))
      << "query returns the AV's GID per plane";
  EXPECT_EQ(q.ah_attr.peer_max_wimm_dest, kMaxWimm);

  ASSERT_EQ(mrc_dereg_mr(ms), 0);
  ASSERT_EQ(mrc_dereg_mr(ms2), 0);
  ASSERT_EQ(mrc_dereg_mr(md), 0);
  destroy(a);
  destroy(b);
  destroy(imm_only);
  destroy(imm_peer);
}

// mrc_alloc_buf / mrc_free_buf (Documentation/api.md, "Memory"): page-rounded
// zeroed memory that registers and carries a WRITE like any other; a free
// is refused while a region covers it, for any address or length that
// mrc_alloc_buf did not hand out, and twice.
TEST_F(CApiNetns, AllocBufCarriesWritesAndIsFreedOnlyOnceDeregistered) {
  EXPECT_NULL_ERRNO(mrc_alloc_buf(0), EINVAL);
  EXPECT_NULL_ERRNO(mrc_alloc_buf(size_t(1) << 41), EINVAL);
  EXPECT_ERRNO(mrc_free_buf(nullptr, 4096), EINVAL);
  Host a = host(0), b = host(1);
  connect(a, b);
  const size_t len = (1 << 20) + 123;  // not a whole number of pages
  auto* src = static_cast<uint8_t*>(mrc_alloc_buf(len));
  auto* dst = static_cast<uint8_t*>(mrc_alloc_buf(len));
  ASSERT_TRUE(src && dst) << err("mrc_alloc_buf");
  EXPECT_EQ(uintptr_t(src) % 4096, 0u);
  for (size_t i = 0; i < len + 4096 - 123; i++) ASSERT_EQ(dst[i], 0) << "not zeroed at " << i;
  for (size_t i = 0; i < len; i++) src[i] = uint8_t(i * 13 + 5 + (i >> 12));
  mrc_mr* ms = mrc_reg_mr(a.pd, src, len, MRC_ACCESS_LOCAL_WRITE);
  mrc_mr* md = mrc_reg_mr(b.pd, dst, len, MRC_ACCESS_LOCAL_WRITE | MRC_ACCESS_REMOTE_WRITE);
  ASSERT_TRUE(ms && md) << err("mrc_reg_mr");
  mrc_sge sg{uint64_t(uintptr_t(src)), uint32_t(len), ms->lkey};
  mrc_send_wr w{};
  w.wr_id = 5;
  w.sg_list = &sg;
  w.num_sge = 1;
  w.opcode = MRC_WR_RDMA_WRITE;
  w.send_flags = MRC_SEND_SIGNALED;
  w.wr.rdma.remote_addr = uint64_t(uintptr_t(dst));
  w.wr.rdma.rkey = md->rkey;
  mrc_send_wr* bad = nullptr;
  ASSERT_EQ(mrc_post_send(a.qp, &w, &bad), 0) << err("post_send");
  auto c = poll_n(a.cq, 1, std::chrono::seconds(30));
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, MRC_WC_SUCCESS);
  EXPECT_EQ(0, std::memcmp(dst, src, len)) << "the WRITE into mrc_alloc_buf memory differs";

  // Freeing what a region covers, another address or length, a malloc'd page.
  EXPECT_ERRNO(mrc_free_buf(src, len), EBUSY);
  EXPECT_NE(std::string(mrc_last_error()).find("deregister it first"), std::string::npos)
      << mrc_last_error();
  EXPECT_ERRNO(mrc_free_buf(src + 4096, len - 4096), EINVAL);
  EXPECT_ERRNO(mrc_free_buf(src, len + 1), EINVAL);
  void* heap = std::aligned_alloc(4096, 8192);
  ASSERT_NE(heap, nullptr);
  std::memset(heap, 0x5a, 8192);
  EXPECT_ERRNO(mrc_free_buf(heap, 8192), EINVAL);
  EXPECT_EQ(static_cast<uint8_t*>(heap)[8191], 0x5a) << "a refused free touched the memory";
  std::free(heap);
  EXPECT_EQ(src[len - 1], uint8_t((len - 1) * 13 + 5 + ((len - 1) >> 12)));  // still mapped

  ASSERT_EQ(mrc_dereg_mr(ms), 0);
  ASSERT_EQ(mrc_dereg_mr(md), 0);
  EXPECT_EQ(mrc_free_buf(src, len), 0) << err("mrc_free_buf");
  EXPECT_EQ(mrc_free_buf(dst, len), 0) << err("mrc_free_buf");
  EXPECT_ERRNO(mrc_free_buf(src, len), EINVAL);  // twice
  destroy(a);
  destroy(b);
}

// ---------------------------------------------------------------------------
// Async events and the waits of destroy

TEST_F(CApiNetns, PortAndQpFatalEventsReachTheirContexts) {
  Host a = host(0), b = host(1);
  mrc_context* watcher = mrc_create_context(dev_[0], nullptr);  // no QPs: port events only
  ASSERT_NE(watcher, nullptr);
  connect(a, b, false, 10, 2, 2);  // ACK timeout 1 ms, few retries
  std::vector<uint8_t> src(1 << 20, 0x11), dst(1 << 20, 0);
  mrc_mr* ms = mrc_reg_mr(a.pd, src.data(), src.size(), MRC_ACCESS_LOCAL_WRITE);
  mrc_mr* md =
      mrc_reg_mr(b.pd, dst.data(), dst.size(), MRC_ACCESS_LOCAL_WRITE | MRC_ACCESS_REMOTE_WRITE);
  ASSERT_TRUE(ms && md);
  const uint32_t rkey = md->rkey;

  // B goes away (its XDP program with it): A's WRITE is never acknowledged,
  // the retries run out and the QP goes to ERR, while A's ports stay up.
  {
    auto ns = enter(1);
    ASSERT_EQ(mrc_dereg_mr(md), 0);
    destroy(b);
    ASSERT_EQ(mrc_close_device(dev_[1]), 0) << err("close B");
    dev_[1] = nullptr;
  }
  mrc_sge sg{uint64_t(uintptr_t(src.data())), uint32_t(src.size()), ms->lkey};
  mrc_send_wr w{};
  w.wr_id = 5;
  w.sg_list = &sg;
  w.num_sge = 1;
  w.opcode = MRC_WR_RDMA_WRITE;
  w.send_flags = MRC_SEND_SIGNALED;
  w.wr.rdma.remote_addr = uint64_t(uintptr_t(dst.data()));
  w.wr.rdma.rkey = rkey;
  mrc_send_wr* bad = nullptr;
  ASSERT_EQ(mrc_post_send(a.qp, &w, &bad), 0);
  auto s = poll_n(a.cq, 1, std::chrono::seconds(10));
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, MRC_WC_RETRY_EXC_ERR) << mrc_wc_status_str(s[0].status);
  mrc_async_event fatal;
  ASSERT_TRUE(next_event(a.ctx, fatal, 10000)) << "no QP fatal event";
  EXPECT_EQ(fatal.event_type, MRC_EVENT_QP_FATAL);
  EXPECT_EQ(fatal.element.qp, a.qp);
  EXPECT_EQ(qp_state(a.qp), MRC_QPS_ERR);
  // Posting on an ERR QP is accepted and flushed, as in verbs.
  w.wr_id = 6;
  ASSERT_EQ(mrc_post_send(a.qp, &w, &bad), 0) << err("post_send in ERR");
  s = poll_n(a.cq, 1, std::chrono::seconds(10));
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].wr_id, 6u);
  EXPECT_EQ(s[0].status, MRC_WC_WR_FLUSH_ERR);

  // The watcher saw no QP event; with O_NONBLOCK its fd says EAGAIN.
  int wfd = -1;
  ASSERT_EQ(mrc_get_async_fd(watcher, &wfd), 0);
  ASSERT_EQ(fcntl(wfd, F_SETFL, fcntl(wfd, F_GETFL) | O_NONBLOCK), 0);
  mrc_async_event ev;
  EXPECT_ERRNO(mrc_get_async_event(watcher, &ev), EAGAIN);
  ASSERT_EQ(fcntl(wfd, F_SETFL, fcntl(wfd, F_GETFL) & ~O_NONBLOCK), 0);

  // destroy_qp waits for the fatal event's acknowledgement.
  std::atomic<bool> destroyed{false};
  std::atomic<int> rc{-2};
  mrc_qp* qp = a.qp;
  a.qp = nullptr;
  std::thread t([&] {
    rc = mrc_destroy_qp(qp);
    destroyed = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(destroyed.load()) << "mrc_destroy_qp returned with an unacknowledged event";
  mrc_ack_async_event(&fatal);
  t.join();
  EXPECT_EQ(rc.load(), 0);

  // B's ends of every plane go down (A's ports lose carrier), then up:
  // PORT_ERR then PORT_ACTIVE for every port, in both contexts.
  for (const auto& [what, type] :
       {std::pair{"down", MRC_EVENT_PORT_ERR}, std::pair{"up", MRC_EVENT_PORT_ACTIVE}}) {
    for (const auto& p : topo_.pairs())
      ASSERT_TRUE(topo_.ip(1, {"link", "set", p.b_if, what}).ok());
    for (mrc_context* c : {a.ctx, watcher}) {
      std::vector<int> ports;
      while (ports.size() < kPlanes && next_event(c, ev, 10000)) {
        EXPECT_EQ(ev.event_type, type) << what;
        ports.push_back(ev.element.port_num);
        mrc_ack_async_event(&ev);
      }
      std::sort(ports.begin(), ports.end());
      EXPECT_EQ(ports, (std::vector<int>{1, 2, 3, 4})) << what;
    }
    mrc_port_attr pa;
    ASSERT_EQ(mrc_query_port(dev_[0], 1, &pa), 0);
    EXPECT_EQ(pa.state, type == MRC_EVENT_PORT_ERR ? MRC_PORT_DOWN : MRC_PORT_ACTIVE);
  }
  ASSERT_EQ(mrc_dereg_mr(ms), 0);
  destroy(a);
  EXPECT_EQ(mrc_destroy_context(watcher), 0);
}

TEST_F(CApiNetns, DestroyCqWaitsForAcknowledgedCompletionEvents) {
  Host a = host(0), b = host(1);
  connect(a, b);
  mrc_comp_channel* ch = nullptr;
  ASSERT_EQ(mrc_create_comp_channel(b.ctx, &ch), 0);
  mrc_cq* rcq = mrc_create_cq(b.ctx, 16, nullptr, ch, 0);
  ASSERT_NE(rcq, nullptr);
  // A second QP pair whose receive side completes on rcq.
  mrc_qp_init_attr ia{};
  ia.send_cq = b.cq;
  ia.recv_cq = rcq;
  ia.pd = b.pd;
  ia.cap = {4, 4, 1, 0, 0};
  mrc_qp* rqp = mrc_create_qp(b.ctx, &ia);
  ASSERT_NE(rqp, nullptr) << err("create_qp");
  ASSERT_EQ(to_init(rqp), 0);
  Host a2 = host(0);
  Host b2;
  b2.qp = rqp;
  connect(a2, b2);
  mrc_recv_wr rw{};
  rw.wr_id = 9;
  mrc_recv_wr* bad_r = nullptr;
  ASSERT_EQ(mrc_post_recv(rqp, &rw, &bad_r), 0);
  ASSERT_EQ(mrc_req_notify_cq(rcq, 0), 0);
  mrc_send_wr w{};
  w.wr_id = 1;
  w.opcode = MRC_WR_RDMA_WRITE_WITH_IMM;  // zero-length: the immediate only
  w.send_flags = MRC_SEND_SIGNALED;
  w.imm_data = htonl(0xfeed);
  mrc_send_wr* bad = nullptr;
  ASSERT_EQ(mrc_post_send(a2.qp, &w, &bad), 0) << err("post_send");
  int cfd = -1;
  ASSERT_EQ(mrc_get_comp_channel_fd(ch, &cfd), 0);
  pollfd p{cfd, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 30000), 1) << "no completion event";
  mrc_cq* evcq = nullptr;
  ASSERT_EQ(mrc_get_cq_event(ch, &evcq, nullptr), 0);
  EXPECT_EQ(evcq, rcq);
  mrc_wc wc;
  ASSERT_EQ(mrc_poll_cq(rcq, 1, &wc), 1);
  EXPECT_EQ(wc.wr_id, 9u);
  EXPECT_EQ(ntohl(wc.imm_data), 0xfeedu);
  EXPECT_EQ(wc.byte_len, 0u);
  EXPECT_EQ(mrc_destroy_qp(rqp), 0);
  std::atomic<bool> destroyed{false};
  std::thread t([&] {
    EXPECT_EQ(mrc_destroy_cq(rcq), 0);
    destroyed = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(destroyed.load()) << "mrc_destroy_cq returned with an unacknowledged event";
  mrc_ack_cq_events(rcq, 1);
  t.join();
  EXPECT_EQ(mrc_destroy_comp_channel(ch), 0);
  destroy(a2);
  destroy(a);
  destroy(b);
}

// Without mrcd the device holds its planes through BPF links: a second device
// on the same interfaces fails with EBUSY and mrc_last_error() names the
// holder (this process); once the first is closed the planes are free.
TEST_F(CApiNetns, SecondDeviceOnHeldPlanesIsBusyAndNamesTheHolder) {
  auto ns = enter(0);
  std::vector<const char*> names;
  for (const auto& p : topo_.pairs()) names.push_back(p.a_if.c_str());
  mrc_device_opts o{};
  o.flags = MRC_DEVICE_NO_MRCD;
  errno = 0;
  mrc_device* second = mrc_open_device(names.data(), int(names.size()), &o);
  const int e = errno;
  EXPECT_EQ(second, nullptr);
  EXPECT_EQ(e, EBUSY) << std::strerror(e);
  const std::string msg = mrc_last_error();
  EXPECT_NE(msg.find("attaching mrc_xdp to " + topo_.pairs()[0].a_if + ": held by mrc_xdp"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find(" of pid " + std::to_string(getpid()) + " "), std::string::npos) << msg;
  EXPECT_NE(msg.find("attached through a BPF link"), std::string::npos) << msg;
  if (second) mrc_close_device(second);

  ASSERT_EQ(mrc_close_device(dev_[0]), 0) << err("mrc_close_device");
  dev_[0] = mrc_open_device(names.data(), int(names.size()), &o);
  ASSERT_NE(dev_[0], nullptr) << err("mrc_open_device after the first closed");
}

}  // namespace
}  // namespace mrc
