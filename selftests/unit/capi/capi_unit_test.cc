// The C API header and the calls that need no device: the header compiles as
// C11 (capi_c11.c) and as C++ (this file) with the same layouts, its
// constants match the engine's (libibverbs and OCP mrc.h numbering), every
// call refuses bad arguments with a clear errno, and the out-of-band
// exchange round-trips endpoints in mrc_perf's line format.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <string>
#include <thread>

#include "core/types.hpp"
#include "lib/exchange.hpp"
#include "mrc/mrc.h"
#include "mrc/mrc.hpp"
#include "unit/capi/capi_c11.h"

namespace {

namespace core = mrc::core;

// The C values are the engine's values: no translation table can drift.
#define SAME(c, cxx) static_assert(uint32_t(c) == uint32_t(cxx), #c)
SAME(MRC_WC_SUCCESS, core::kWcSuccess);
SAME(MRC_WC_LOC_LEN_ERR, core::kWcLocLenErr);
SAME(MRC_WC_LOC_QP_OP_ERR, core::kWcLocQpOpErr);
SAME(MRC_WC_LOC_PROT_ERR, core::kWcLocProtErr);
SAME(MRC_WC_WR_FLUSH_ERR, core::kWcWrFlushErr);
SAME(MRC_WC_LOC_ACCESS_ERR, core::kWcLocAccessErr);
SAME(MRC_WC_REM_INV_REQ_ERR, core::kWcRemInvReqErr);
SAME(MRC_WC_REM_ACCESS_ERR, core::kWcRemAccessErr);
SAME(MRC_WC_REM_OP_ERR, core::kWcRemOpErr);
SAME(MRC_WC_RETRY_EXC_ERR, core::kWcRetryExcErr);
SAME(MRC_WC_FATAL_ERR, core::kWcFatalErr);
SAME(MRC_WC_GENERAL_ERR, core::kWcGeneralErr);
SAME(MRC_WC_RDMA_WRITE, core::WcOpcode::kRdmaWrite);
SAME(MRC_WC_RECV_RDMA_WITH_IMM, core::WcOpcode::kRecvRdmaWithImm);
SAME(MRC_WC_WITH_IMM, core::kWcWithImm);
SAME(MRC_QPS_RESET, core::QpState::kReset);
SAME(MRC_QPS_INIT, core::QpState::kInit);
SAME(MRC_QPS_RTR, core::QpState::kRtr);
SAME(MRC_QPS_RTS, core::QpState::kRts);
SAME(MRC_QPS_ERR, core::QpState::kErr);
SAME(MRC_WR_RDMA_WRITE, core::WrOpcode::kRdmaWrite);
SAME(MRC_WR_RDMA_WRITE_WITH_IMM, core::WrOpcode::kRdmaWriteWithImm);
SAME(MRC_SEND_SIGNALED, core::kSendSignaled);
SAME(MRC_ACCESS_LOCAL_WRITE, core::kAccessLocalWrite);
SAME(MRC_ACCESS_REMOTE_WRITE, core::kAccessRemoteWrite);
SAME(MRC_ACCESS_REMOTE_READ, core::kAccessRemoteRead);
SAME(MRC_IBV_QP_STATE, core::kQpState);
SAME(MRC_IBV_QP_CUR_STATE, core::kQpCurState);
SAME(MRC_IBV_QP_ACCESS_FLAGS, core::kQpAccessFlags);
SAME(MRC_IBV_QP_PKEY_INDEX, core::kQpPkeyIndex);
SAME(MRC_IBV_QP_PORT, core::kQpPort);
SAME(MRC_IBV_QP_AV, core::kQpAv);
SAME(MRC_IBV_QP_PATH_MTU, core::kQpPathMtu);
SAME(MRC_IBV_QP_TIMEOUT, core::kQpTimeoutIbv);
SAME(MRC_IBV_QP_RETRY_CNT, core::kQpRetryCntIbv);
SAME(MRC_IBV_QP_RNR_RETRY, core::kQpRnrRetry);
SAME(MRC_IBV_QP_RQ_PSN, core::kQpRqPsn);
SAME(MRC_IBV_QP_MAX_QP_RD_ATOMIC, core::kQpMaxQpRdAtomic);
SAME(MRC_IBV_QP_ALT_PATH, core::kQpAltPath);
SAME(MRC_IBV_QP_MIN_RNR_TIMER, core::kQpMinRnrTimer);
SAME(MRC_IBV_QP_SQ_PSN, core::kQpSqPsn);
SAME(MRC_IBV_QP_MAX_DEST_RD_ATOMIC, core::kQpMaxDestRdAtomic);
SAME(MRC_IBV_QP_PATH_MIG_STATE, core::kQpPathMigState);
SAME(MRC_IBV_QP_CAP, core::kQpCap);
SAME(MRC_IBV_QP_DEST_QPN, core::kQpDestQpn);
SAME(MRC_QP_MAX_WIMM, core::kMrcMaxWimm);
SAME(MRC_QP_MAX_WIMM_DEST, core::kMrcMaxWimmDest);
SAME(MRC_QP_MPR, core::kMrcMpr);
SAME(MRC_QP_MPR_DEST, core::kMrcMprDest);
SAME(MRC_QP_TIMEOUT, core::kMrcTimeout);
SAME(MRC_QP_EV_PROFILE_ID, core::kMrcEvProfileId);
SAME(MRC_QP_CC_PROFILE_ID, core::kMrcCcProfileId);
SAME(MRC_QP_HINT, core::kMrcHint);
SAME(MRC_QP_RETRY_CNT, core::kMrcRetryCnt);
SAME(MRC_QP_CAP, core::kMrcCap);
SAME(MRC_QP_VENDOR_CFG, core::kMrcVendorCfg);
SAME(MRC_QP_CAP_TRIM_NACK_DEST_UNSUPPORTED, core::kQpCapTrimNackDestUnsupported);
SAME(MRC_QP_CAP_DYNAMIC_MPR, core::kQpCapDynamicMpr);
SAME(MRC_QP_CAP_SVC_TIME_DEST_UNSUPPORTED, core::kQpCapSvcTimeDestUnsupported);
SAME(MRC_DEVICE_CAP_TRIM_NACK, core::kDevCapTrimNack);
SAME(MRC_DEVICE_CAP_SVC_TIME, core::kDevCapSvcTime);
SAME(MRC_DEVICE_CAP_DYNAMIC_MPR, core::kDevCapDynamicMpr);
SAME(MRC_QP_HINT_NUM_QPS_PER_PEER, mrc::kHintNumQpsPerPeer);
SAME(MRC_QP_HINT_NUM_SEND_PEERS, mrc::kHintNumSendPeers);
SAME(MRC_QP_HINT_NUM_REMOTE_RECV_PEERS, mrc::kHintNumRemoteRecvPeers);
SAME(MRC_QP_HINT_VENDOR_CFG, mrc::kHintVendorCfg);
SAME(MRC_MAX_PORTS, core::kMaxPorts);
SAME(MRC_MAX_SGE, core::kMaxSge);
SAME(MRC_API_CURRENT_VERSION, mrc::kApiVersion);
SAME(MRC_VENDOR_API_CURRENT_VERSION, mrc::kVendorApiVersion);
#undef SAME

#define CXX_LAYOUT(type)                   \
  {                                        \
#type, { sizeof(type), alignof(type) } \
  }
#define CXX_FIELD(type, field, member)                          \
  {                                                             \
#type "." #field, { offsetof(type, field), sizeof(member) } \
  }

TEST(CApi, LayoutsAreTheSameInCAndCxx) {
  const std::map<std::string, std::pair<size_t, size_t>> cxx = {
      CXX_LAYOUT(struct mrc_device_opts),
      CXX_LAYOUT(struct mrc_device_attr),
      CXX_LAYOUT(union mrc_gid),
      CXX_LAYOUT(struct mrc_port_attr),
      CXX_LAYOUT(struct mrc_context_attr),
      CXX_LAYOUT(struct mrc_mr),
      CXX_LAYOUT(struct mrc_wc),
      CXX_LAYOUT(struct mrc_qp_hint_attr),
      CXX_LAYOUT(struct mrc_qp_hint_init_attr),
      CXX_LAYOUT(struct mrc_ibv_qp_cap),
      CXX_LAYOUT(struct mrc_qp_init_attr),
      CXX_LAYOUT(struct mrc_ah_attr),
      CXX_LAYOUT(struct mrc_ibv_qp_attr),
      CXX_LAYOUT(struct mrc_qp_attr),
      CXX_LAYOUT(struct mrc_sge),
      CXX_LAYOUT(struct mrc_send_wr),
      CXX_LAYOUT(struct mrc_recv_wr),
      CXX_LAYOUT(struct mrc_async_event),
      CXX_LAYOUT(struct mrc_endpoint),
  };
  size_t n = 0;
  const capi_layout* c = capi_c_layouts(&n);
  ASSERT_EQ(n, cxx.size());
  for (size_t i = 0; i < n; i++) {
    auto it = cxx.find(c[i].name);
    ASSERT_NE(it, cxx.end()) << c[i].name;
    EXPECT_EQ(c[i].a, it->second.first) << "sizeof " << c[i].name;
    EXPECT_EQ(c[i].b, it->second.second) << "alignof " << c[i].name;
  }
}

TEST(CApi, FieldOffsetsAreTheSameInCAndCxx) {
  mrc_device_attr da;
  mrc_wc wc;
  mrc_qp_init_attr qi;
  mrc_ibv_qp_attr va;
  mrc_qp_attr ma;
  mrc_send_wr sw;
  mrc_recv_wr rw;
  mrc_async_event ev;
  mrc_endpoint ep;
  mrc_mr mr;
  const std::map<std::string, std::pair<size_t, size_t>> cxx = {
      CXX_FIELD(struct mrc_device_attr, wimm_attr.max_wimm_dest, da.wimm_attr.max_wimm_dest),
      CXX_FIELD(struct mrc_device_attr, qp_attr.max_qp_hint, da.qp_attr.max_qp_hint),
      CXX_FIELD(struct mrc_device_attr, cap, da.cap),
      CXX_FIELD(struct mrc_wc, status, wc.status),
      CXX_FIELD(struct mrc_wc, byte_len, wc.byte_len),
      CXX_FIELD(struct mrc_wc, imm_data, wc.imm_data),
      CXX_FIELD(struct mrc_wc, wc_flags, wc.wc_flags),
      CXX_FIELD(struct mrc_qp_init_attr, cap, qi.cap),
      CXX_FIELD(struct mrc_qp_init_attr, pd, qi.pd),
      CXX_FIELD(struct mrc_qp_init_attr, send_ops_flags, qi.send_ops_flags),
      CXX_FIELD(struct mrc_qp_init_attr, protocol_version, qi.protocol_version),
      CXX_FIELD(struct mrc_ibv_qp_attr, path_mtu, va.path_mtu),
      CXX_FIELD(struct mrc_ibv_qp_attr, dest_qp_num, va.dest_qp_num),
      CXX_FIELD(struct mrc_ibv_qp_attr, ah_attr, va.ah_attr),
      CXX_FIELD(struct mrc_ibv_qp_attr, ah_attr.peer_max_wimm_dest, va.ah_attr.peer_max_wimm_dest),
      CXX_FIELD(struct mrc_qp_attr, wimm.max_wimm_dest, ma.wimm.max_wimm_dest),
      CXX_FIELD(struct mrc_qp_attr, profile.cc_profile_id, ma.profile.cc_profile_id),
      CXX_FIELD(struct mrc_qp_attr, retry.exp_cnt, ma.retry.exp_cnt),
      CXX_FIELD(struct mrc_qp_attr, qp_hint, ma.qp_hint),
      CXX_FIELD(struct mrc_qp_attr, vendor_cfg, ma.vendor_cfg),
      CXX_FIELD(struct mrc_send_wr, num_sge, sw.num_sge),
      CXX_FIELD(struct mrc_send_wr, imm_data, sw.imm_data),
      CXX_FIELD(struct mrc_send_wr, wr.rdma.remote_addr, sw.wr.rdma.remote_addr),
      CXX_FIELD(struct mrc_send_wr, wr.rdma.rkey, sw.wr.rdma.rkey),
      CXX_FIELD(struct mrc_recv_wr, num_sge, rw.num_sge),
      CXX_FIELD(struct mrc_async_event, event_type, ev.event_type),
      CXX_FIELD(struct mrc_endpoint, gid, ep.gid),
      CXX_FIELD(struct mrc_mr, lkey, mr.lkey),
      CXX_FIELD(struct mrc_mr, rkey, mr.rkey),
  };
  size_t n = 0;
  const capi_layout* c = capi_c_fields(&n);
  ASSERT_EQ(n, cxx.size());
  for (size_t i = 0; i < n; i++) {
    auto it = cxx.find(c[i].name);
    ASSERT_NE(it, cxx.end()) << c[i].name;
    EXPECT_EQ(c[i].a, it->second.first) << "offsetof " << c[i].name;
    EXPECT_EQ(c[i].b, it->second.second) << "sizeof " << c[i].name;
  }
  // The SGE is ibv_sge and the engine's Sge, field for field.
  static_assert(sizeof(mrc_sge) == sizeof(core::Sge) &&
                offsetof(mrc_sge, lkey) == offsetof(core::Sge, lkey));
}

TEST(CApi, QueryVersionMatchesTheCxxApiAndTheMacros) {
  uint32_t cur = 0, last = 0, vendor = 0, last_vendor = 0;
  mrc_query_version(&cur, &last, &vendor, &last_vendor);
  const auto v = mrc::Context::query_version();
  EXPECT_EQ(cur, v[0]);
  EXPECT_EQ(last, v[1]);
  EXPECT_EQ(vendor, v[2]);
  EXPECT_EQ(last_vendor, v[3]);
  EXPECT_EQ(cur, MRC_API_CURRENT_VERSION);
  EXPECT_EQ(last, MRC_API_LAST_SUPPORTED_VERSION);
  EXPECT_EQ(vendor, MRC_VENDOR_API_CURRENT_VERSION);
  EXPECT_EQ(last_vendor, MRC_VENDOR_API_LAST_SUPPORTED_VERSION);
  EXPECT_EQ(capi_c_api_version(), MRC_API_CURRENT_VERSION);
}

TEST(CApi, EveryCallRefusesNullObjectsFromC) {
  char msg[512] = "";
  EXPECT_EQ(capi_c_null_arguments(msg, sizeof msg), 0) << msg;
}

// errno and a message that names the problem.
void expect_errno(int rc, int want, const char* needle) {
  const int e = errno;
  EXPECT_EQ(rc, -1);
  EXPECT_EQ(e, want) << strerror(e) << " / " << mrc_last_error();
  EXPECT_NE(std::string(mrc_last_error()).find(needle), std::string::npos) << mrc_last_error();
}

TEST(CApi, OpenDeviceRefusesBadListsAndOptionsBeforeTouchingAnything) {
  auto open = [](std::vector<const char*> names, const mrc_device_opts* o = nullptr) {
    errno = 0;
    mrc_device* d = mrc_open_device(names.data(), int(names.size()), o);
    EXPECT_EQ(d, nullptr);
    return d ? 0 : -1;
  };
  expect_errno(open({}), EINVAL, "no plane interfaces");
  std::vector<const char*> many(MRC_MAX_PORTS + 1, "lo");
  expect_errno(open(many), EINVAL, "at most 16");
  expect_errno(open({"lo", nullptr}), EINVAL, "has no name");
  expect_errno(open({""}), EINVAL, "has no name");
  expect_errno(open({"an-interface-name-too-long"}), EINVAL, "too long");
  expect_errno(open({"lo", "lo"}), EINVAL, "listed twice");
  expect_errno(open({"lo", "mrcnosuchif0"}), ENODEV, "mrcnosuchif0");
  mrc_device_opts o{};
  o.flags = 1u << 30;
  expect_errno(open({"lo"}, &o), EINVAL, "unknown flags");
  o = {};
  o.frame_size = 1000;
  expect_errno(open({"lo"}, &o), EINVAL, "frame_size");
  o.flags = MRC_DEVICE_QA_FABRIC;  // a known flag: the next check refuses it
  expect_errno(open({"lo"}, &o), EINVAL, "frame_size");
  o = {};
  o.frame_chunks = 18;
  expect_errno(open({"lo"}, &o), EINVAL, "frame_chunks");
  o = {};
  o.flags = MRC_DEVICE_TX_LIVE | MRC_DEVICE_TX_AUTO;
  expect_errno(open({"lo"}, &o), EINVAL, "exclude each other");
  o = {};
  o.flags = MRC_DEVICE_PIN_CPU;
  o.engine_cpu = -1;
  expect_errno(open({"lo"}, &o), EINVAL, "engine_cpu");
  errno = 0;
  EXPECT_EQ(mrc_open_device(nullptr, 1, nullptr), nullptr);
  EXPECT_EQ(errno, EINVAL);
}

TEST(CApi, WcStatusStrings) {
  EXPECT_STREQ(mrc_wc_status_str(MRC_WC_SUCCESS), "success");
  EXPECT_STREQ(mrc_wc_status_str(MRC_WC_RETRY_EXC_ERR), "transport retry counter exceeded");
  EXPECT_STREQ(mrc_wc_status_str(MRC_WC_REM_ACCESS_ERR), "remote access error");
  EXPECT_STREQ(mrc_wc_status_str(mrc_wc_status(20)), "unknown status");  // IBV_WC_RESP_TIMEOUT_ERR
}

mrc_gid v4gid(const char* s) {
  mrc_gid g{};
  g.raw[10] = g.raw[11] = 0xff;
  EXPECT_EQ(inet_pton(AF_INET, s, g.raw + 12), 1);
  return g;
}
mrc_gid v6gid(const char* s) {
  mrc_gid g{};
  EXPECT_EQ(inet_pton(AF_INET6, s, g.raw), 1);
  return g;
}

mrc_endpoint endpoint(uint32_t qpn, bool v6) {
  mrc_endpoint e{};
  e.qpn = qpn;
  e.psn = 0xabcdef;
  e.addr = 0x7f0012345678ull;
  e.len = 1 << 20;
  e.rkey = 0x5a000101;
  e.max_wimm_dest = 64;
  e.mpr_dest = 8;
  e.mtu = 3392;
  e.num_gids = 3;
  e.gid[0] = v6 ? v6gid("fd00:0:0:0::2") : v4gid("198.18.0.2");
  // gid[1] stays zero: no address on plane 2
  e.gid[2] = v6 ? v6gid("fd00:0:0:2::2") : v4gid("198.18.2.2");
  return e;
}

TEST(CApi, ExchangeRoundTripsEndpointsBetweenTwoSides) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  const mrc_endpoint a[2] = {endpoint(0x101, false), endpoint(0x102, true)};
  const mrc_endpoint b[1] = {endpoint(0x201, true)};
  mrc_endpoint got_a[4], got_b[4];
  int na = -1, nb = -1;
  std::thread t([&] { nb = mrc_exchange_endpoints(sv[1], b, 1, got_b, 4, 5000); });
  na = mrc_exchange_endpoints(sv[0], a, 2, got_a, 4, 5000);
  t.join();
  ASSERT_EQ(na, 1) << mrc_last_error();
  ASSERT_EQ(nb, 2) << mrc_last_error();
  EXPECT_EQ(0, std::memcmp(&got_a[0], &b[0], sizeof b[0]));
  EXPECT_EQ(0, std::memcmp(&got_b[0], &a[0], sizeof a[0]));
  EXPECT_EQ(0, std::memcmp(&got_b[1], &a[1], sizeof a[1]));

  // Lines after the exchange, and a line too long for the buffer.
  ASSERT_EQ(mrc_exchange_send_line(sv[0], "done"), 0);
  char buf[8];
  EXPECT_EQ(mrc_exchange_recv_line(sv[1], buf, sizeof buf, 1000), 4);
  EXPECT_STREQ(buf, "done");
  ASSERT_EQ(mrc_exchange_send_line(sv[0], "a longer line"), 0);
  expect_errno(mrc_exchange_recv_line(sv[1], buf, sizeof buf, 1000), EMSGSIZE, "13 bytes");
  expect_errno(mrc_exchange_send_line(sv[0], "two\nlines"), EINVAL, "newline");
  expect_errno(mrc_exchange_recv_line(sv[1], buf, sizeof buf, 50), ETIMEDOUT,
               "nothing from the peer");

  // More endpoints than room: EOVERFLOW.
  std::thread t2([&] { (void)mrc_exchange_endpoints(sv[1], b, 1, got_b, 4, 5000); });
  expect_errno(mrc_exchange_endpoints(sv[0], a, 2, got_a, 0, 5000), EOVERFLOW, "room for 0");
  t2.join();
  mrc_endpoint bad = endpoint(1, false);
  bad.num_gids = MRC_MAX_PORTS + 1;
  expect_errno(mrc_exchange_endpoints(sv[0], &bad, 1, got_a, 4, 100), EINVAL, "num_gids");
  close(sv[0]);
  close(sv[1]);
}

TEST(CApi, ExchangeSpeaksTheCxxLineFormat) {
  // What mrc_perf (C++) sends is what the C side decodes, GIDs included.
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  mrc::QpEndpoint e;
  e.qpn = 0x1234;
  e.psn = 77;
  e.addr = 4096;
  e.len = 8192;
  e.rkey = 9;
  e.max_wimm_dest = 32;
  e.mpr_dest = 4;
  e.mtu = 2048;
  e.gids = {mrc::codec::IpAddr::v4(198, 18, 1, 2), mrc::codec::IpAddr{}};
  const std::string text = mrc::encode({e});
  EXPECT_EQ(text.rfind("qp qpn=4660 psn=77 ", 0), 0u) << text;
  std::thread t([&] { (void)mrc::send_line(sv[1], text); });
  const mrc_endpoint none{};
  mrc_endpoint got[1];
  ASSERT_EQ(mrc_exchange_endpoints(sv[0], &none, 0, got, 1, 2000), 1) << mrc_last_error();
  t.join();
  EXPECT_EQ(got[0].qpn, 0x1234u);
  EXPECT_EQ(got[0].mtu, 2048u);
  EXPECT_EQ(got[0].num_gids, 2u);
  const mrc_gid want = v4gid("198.18.1.2"), zero{};
  EXPECT_EQ(0, std::memcmp(&got[0].gid[0], &want, 16));
  EXPECT_EQ(0, std::memcmp(&got[0].gid[1], &zero, 16));
  close(sv[0]);
  close(sv[1]);
}

TEST(CApi, ExchangeCarriesMaxMtu) {
  // max_mtu (the largest path MTU every plane of the sender carries) goes
  // both ways; a peer that does not send it (older) reads as 0, unknown.
  mrc::QpEndpoint e;
  e.qpn = 5;
  e.mtu = 1408;
  e.max_mtu = 1408;
  auto back = mrc::decode(mrc::encode({e}));
  ASSERT_TRUE(back.ok()) << back.error().message();
  ASSERT_EQ(back->size(), 1u);
  EXPECT_EQ((*back)[0].mtu, 1408u);
  EXPECT_EQ((*back)[0].max_mtu, 1408u);
  auto old = mrc::decode("qp qpn=5 psn=1 mtu=3392 gids=198.18.0.1\nend\n");
  ASSERT_TRUE(old.ok()) << old.error().message();
  ASSERT_EQ(old->size(), 1u);
  EXPECT_EQ((*old)[0].mtu, 3392u);
  EXPECT_EQ((*old)[0].max_mtu, 0u);
}

// The exchange comes from another process: a value that does not fit its
// field is refused with the line and key named, not truncated.
TEST(CApi, ExchangeRefusesNumbersThatDoNotFit) {
  for (const char* bad :
       {"max_mtu=abc", "max_mtu=-5", "max_mtu=4294967296", "mtu=12x", "mpr_dest=300",
        "wimm_dest=65536", "qpn=16777216", "psn=-1", "rkey=", "len=+4"}) {
    auto r = mrc::decode(std::string("qp qpn=5 psn=1 ") + bad + " gids=198.18.0.1\nend\n");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code, EPROTO) << bad;
    const std::string key = std::string(bad).substr(0, std::string(bad).find('='));
    EXPECT_NE(r.error().message().find("bad value for " + key), std::string::npos)
        << bad << ": " << r.error().message();
  }
  auto ok =
      mrc::decode("qp qpn=16777215 psn=16777215 mpr_dest=255 max_mtu=8896 gids=198.18.0.1\nend\n");
  ASSERT_TRUE(ok.ok()) << ok.error().message();
  EXPECT_EQ((*ok)[0].mpr_dest, 255u);
  EXPECT_EQ((*ok)[0].max_mtu, 8896u);
}

TEST(CApi, LastErrorIsPerThread) {
  errno = 0;
  EXPECT_EQ(mrc_destroy_qp(nullptr), -1);
  const std::string mine = mrc_last_error();
  std::string other;
  std::thread t([&] { other = mrc_last_error(); });
  t.join();
  EXPECT_NE(mine.find("mrc_destroy_qp"), std::string::npos);
  EXPECT_EQ(other, "");
}

}  // namespace
