// The controller state in real pinned BPF maps (bpf/mrc_ctl.bpf.c): created
// and re-opened across a "restart", read by the application-side Client
// through mmap, the EV report queue with exact drop counting, the report
// hash maps, and a pinned map of another layout refused.
#include <bpf/bpf.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "bpf_test_env.hpp"
#include "ctl/client.hpp"
#include "ctl/controller.hpp"
#include "ctl/pinned_store.hpp"

namespace mrc::testing {
namespace {

using namespace mrc::ctl;
// Names the ctl model shares with libmrc's vocabulary (mrc/types.hpp): here
// they mean the ctl model's.
using ctl::DeviceAttr, ctl::EvEvent, ctl::EvState, ctl::kEvGood, ctl::kEvAssumedBad, ctl::kEvDenied,
    ctl::kEvUnknown;

class CtlMaps : public ::testing::Test {
 protected:
  void SetUp() override {
    root = "/tmp/mrc-ctl-maps." + std::to_string(getpid()) + "." +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    mkdir(root.c_str(), 0700);
    ASSERT_EQ(mount("bpf", root.c_str(), "bpf", 0, nullptr), 0) << strerror(errno);
    dir = root + "/mrc";
  }
  void TearDown() override {
    umount(root.c_str());
    rmdir(root.c_str());
  }
  // A controller with ports 1..2, format 13, explicit profile 5 (ONLINE), CC 9.
  void populate(Controller& c) {
    c.open();
    std::vector<PortInfo> ports = {{1, "p1", 11, true, MRC_CTL_XDP_NATIVE, 1},
                                   {2, "p2", 12, true, MRC_CTL_XDP_NATIVE, 1}};
    ASSERT_TRUE(c.configure_ports(ports));
    std::vector<codec::EvFmtField> w = {{16}, {16}};
    EvFmtProfileAttr f;
    f.profile_state = kProfileOffline;
    f.ev_fmt_mode = kFmtStev;
    f.ev_fmt_op.fmt_fields = w;
    f.ev_fmt_op.fmt_field_count = 2;
    ASSERT_TRUE(c.modify_ev_fmt_profile(13, f, kFmtAttrState | kFmtAttrMode | kFmtAttrOp));
    f.profile_state = kProfileOnline;
    ASSERT_TRUE(c.modify_ev_fmt_profile(13, f, kFmtAttrState));
    std::vector<codec::EvField> fields = {{16, 0, 0, 0xffff, 0xffff}, {16, 0, 0, 0xffff, 0xffff}};
    std::vector<EvOpEntry> e;
    for (uint8_t i = 0; i < 4; i++) {
      Ev v;
      v.val[1] = uint8_t(i + 1);
      v.val[3] = 7;
      v.port = uint8_t(1 + i % 2);
      e.push_back({Ev::unpopulated_ev(), v, kEvGood, 0});
    }
    EvProfileAttr a;
    a.profile_state = kProfileOffline;
    a.ev_mode = kEvModeExp;
    a.ev_fmt_profile_id = 13;
    a.ev_count = 4;
    a.ev_min_active = 1;
    a.ev_event_mask = kEvGood | kEvAssumedBad;
    a.ev_fields_op.fields = fields;
    a.ev_fields_op.field_count = 2;
    ASSERT_TRUE(c.modify_ev_profile(5, a,
                                    kEvpAttrState | kEvpAttrMode | kEvpAttrFmtId | kEvpAttrCount |
                                        kEvpAttrMinActive | kEvpAttrEventMask |
                                        kEvpAttrEvFieldsOp));
    EvProfileAttr b;
    b.profile_state = kProfileOnline;
    b.ev_op.op = kEvOpReplaceEv;
    b.ev_op.entries = e;
    b.ev_op.entry_count = 4;
    ASSERT_TRUE(c.modify_ev_profile(5, b, kEvpAttrState | kEvpAttrEvOp));
    CcProfileAttr cc;
    cc.profile_state = kProfileOffline;
    cc.algorithm = kAlgNscc;
    cc.cc_config = NsccCfg{};
    cc.cc_config->target_delay = 9000;
    cc.cc_config->eta = 0.25f;
    ASSERT_TRUE(c.modify_cc_profile(9, cc, kCcAttrState | kCcAttrAlgorithm | kCcAttrConfig));
    cc.profile_state = kProfileOnline;
    ASSERT_TRUE(c.modify_cc_profile(9, cc, kCcAttrState));
  }
  std::string root, dir;
};

TEST_F(CtlMaps, StateSurvivesAReopen) {
  {
    bool found = true;
    auto st = PinnedStore::create_or_open(dir, &found);
    ASSERT_TRUE(st) << st.error().message();
    EXPECT_FALSE(found);
    Controller c(**st);
    populate(c);
    PortAttr p;
    p.port_admin_state = kPortAdminDisabled;
    ASSERT_TRUE(c.modify_port(2, p, kPortAttrAdminState));
  }  // the process "exits": only the pins hold the maps
  bool found = false;
  auto st = PinnedStore::create_or_open(dir, &found);
  ASSERT_TRUE(st) << st.error().message();
  EXPECT_TRUE(found);
  Controller c(**st);
  EXPECT_TRUE(c.open());
  EXPECT_EQ((*st)->dev().restarts, 1u);
  ASSERT_NE(c.ev_record(5), nullptr);
  EXPECT_EQ(c.ev_record(5)->cur_state, uint32_t(kProfileOnline));
  ASSERT_EQ(c.ev_entries(5).size(), 4u);
  EXPECT_EQ(c.ev_entries(5)[1].wire, 0x00020007u);
  EXPECT_EQ(c.cc_record(9)->nscc.target_delay, 9000u);
  EXPECT_EQ(c.cc_record(9)->nscc.eta, 0.25f);
  PortAttr p;
  ASSERT_TRUE(c.query_port(2, &p, kPortAttrAdminState));
  EXPECT_EQ(p.port_admin_state, kPortAdminDisabled);
}

TEST_F(CtlMaps, ClientReadsPolicyFromMappedMemory) {
  auto st = PinnedStore::create_or_open(dir);
  ASSERT_TRUE(st);
  Controller c(**st);
  populate(c);
  auto cl = Client::open(dir);
  ASSERT_TRUE(cl) << cl.error().message();
  Client& client = **cl;
  auto r = client.ev_profile(5);
  ASSERT_TRUE(r) << r.error().message();
  ASSERT_EQ(r->profile.evs.size(), 4u);
  EXPECT_EQ(r->profile.evs[0].ev, 0x00010007u);
  EXPECT_EQ(r->profile.evs[0].port, 1);
  EXPECT_FALSE(r->profile.evs[2].denied);
  auto cc = client.cc_profile(9);
  ASSERT_TRUE(cc);
  EXPECT_EQ(cc->nscc.target_delay, 9000u);
  // A change through the controller is visible through the mapping at once.
  const uint64_t g = client.generation();
  std::vector<EvOpEntry> m(1);
  m[0].ev.val[1] = 3;
  m[0].ev.val[3] = 7;
  m[0].ev.port = 1;
  m[0].state = kEvDenied;
  EvProfileAttr a;
  a.ev_op.op = kEvOpModifyEvState;
  a.ev_op.entries = m;
  a.ev_op.entry_count = 1;
  ASSERT_TRUE(c.modify_ev_profile(5, a, kEvpAttrEvOp));
  EXPECT_GT(client.generation(), g);
  r = client.ev_profile(5);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->profile.evs[2].denied);
  PortAttr p;
  p.port_admin_state = kPortAdminDisabled;
  ASSERT_TRUE(c.modify_port(1, p, kPortAttrAdminState));
  EXPECT_FALSE(client.port_usable(1));
  EXPECT_TRUE(client.port_usable(2));
  // The client's mapping of the records is read-only.
  const mrc_ctl_dev* d = &client.store().dev();
  EXPECT_EQ(d->magic, MRC_CTL_MAGIC);
}

TEST_F(CtlMaps, ReportQueueCountsDropsExactly) {
  auto st = PinnedStore::create_or_open(dir);
  ASSERT_TRUE(st);
  Controller c(**st);
  populate(c);
  auto cl = Client::open(dir);
  ASSERT_TRUE(cl);
  auto cq = c.create_ev_event_cq(MRC_CTL_EVQ_DEPTH + 16);
  ASSERT_TRUE(cq);
  // One QP flips EV 0x00010007@1 between ASSUMED_BAD and GOOD: every report a transition.
  core::EvEvent e;
  e.profile_id = 5;
  e.qpn = 3;
  e.ev = 0x00010007;
  e.port = 1;
  int ok = 0, full = 0;
  for (int i = 0; i < MRC_CTL_EVQ_DEPTH + 5; i++) {
    e.to = i % 2 ? core::EvState::kGood : core::EvState::kAssumedBad;
    Status s = (*cl)->push_ev_event(e);
    if (s) {
      ok++;
    } else {
      EXPECT_EQ(s.error().code, E2BIG);
      full++;
    }
  }
  EXPECT_EQ(ok, MRC_CTL_EVQ_DEPTH);
  EXPECT_EQ(full, 5);
  EXPECT_EQ((*st)->dev().evq_dropped, 5u);
  EXPECT_EQ((*st)->dev().evq_pushed, uint64_t(MRC_CTL_EVQ_DEPTH));
  auto n = c.ingest_reports();
  ASSERT_TRUE(n);
  EXPECT_EQ(*n, size_t(MRC_CTL_EVQ_DEPTH));
  std::vector<EvEvent> out(MRC_CTL_EVQ_DEPTH + 16);
  size_t got = (*cq)->poll(out);
  EXPECT_EQ(got, size_t(MRC_CTL_EVQ_DEPTH));
  uint64_t drops = 0;
  for (size_t i = 0; i < got; i++) drops += out[i].drop_count;
  EXPECT_EQ(drops, 0u);
  // The five lost reports reach the CQ with the next event.
  e.to = core::EvState::kAssumedBad;
  ASSERT_TRUE((*cl)->push_ev_event(e));
  ASSERT_TRUE(c.ingest_reports());
  got = (*cq)->poll(out);
  ASSERT_EQ(got, 1u);
  EXPECT_EQ(out[0].drop_count, 5u);
  // An engine-side drop count travels in the report.
  e.to = core::EvState::kGood;
  e.drop_count = 3;
  ASSERT_TRUE((*cl)->push_ev_event(e));
  ASSERT_TRUE(c.ingest_reports());
  ASSERT_EQ((*cq)->poll(out), 1u);
  EXPECT_EQ(out[0].drop_count, 3u);
}

TEST_F(CtlMaps, QpAndEvReportsRoundTrip) {
  auto st = PinnedStore::create_or_open(dir);
  ASSERT_TRUE(st);
  Controller c(**st);
  populate(c);
  c.set_pid_alive(pid_alive);
  auto cl = Client::open(dir);
  ASSERT_TRUE(cl);
  mrc_ctl_qp_report r{};
  r.ev_profile_id = 5;
  r.cc_profile_id = 9;
  r.state = uint32_t(core::QpState::kRts);
  r.tx_bytes = 12345;
  ASSERT_TRUE((*cl)->publish_qp(0, 77, r));
  auto qps = (*st)->list_qps();
  ASSERT_TRUE(qps);
  ASSERT_EQ(qps->size(), 1u);
  EXPECT_EQ((*qps)[0].first.pid, uint32_t(getpid()));
  EXPECT_EQ((*qps)[0].first.qpn, 77u);
  EXPECT_EQ((*qps)[0].second.tx_bytes, 12345u);
  EXPECT_EQ(c.ev_profile_users(5), 1u);
  EvProfileAttr a;
  a.profile_state = kProfileOffline;
  EXPECT_EQ(c.modify_ev_profile(5, a, kEvpAttrState).error().code, EBUSY);
  mrc_ctl_evstat_key k{};
  k.profile_id = 5;
  k.wire = 0x00010007;
  k.port = 1;
  mrc_ctl_evstat v{};
  v.tx_pkts = 10;
  ASSERT_TRUE((*cl)->publish_ev_stat(k, v));
  ASSERT_EQ((*st)->list_evstats()->size(), 1u);
  ASSERT_TRUE((*cl)->remove_qp(0, 77));
  EXPECT_EQ(c.ev_profile_users(5), 0u);
  EXPECT_TRUE(c.modify_ev_profile(5, a, kEvpAttrState));
}

TEST_F(CtlMaps, PinnedMapOfAnotherLayoutIsRefused) {
  mkdir(dir.c_str(), 0755);
  LIBBPF_OPTS(bpf_map_create_opts, o, .map_flags = BPF_F_MMAPABLE);
  int fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, MRC_CTL_MAP_DEV, 4, 64, 1, &o);
  ASSERT_GE(fd, 0) << strerror(errno);
  ASSERT_EQ(bpf_obj_pin(fd, (dir + "/" + MRC_CTL_MAP_DEV).c_str()), 0);
  close(fd);
  auto st = PinnedStore::create_or_open(dir);
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message().find("remove the pins"), std::string::npos)
      << st.error().message();
  auto op = PinnedStore::open(dir, ctl::Access::kReadMostly);
  ASSERT_FALSE(op);
  auto none = PinnedStore::open(root + "/nothing", ctl::Access::kReadMostly);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, ENOENT);
  EXPECT_NE(none.error().message().find("is mrcd running"), std::string::npos);
}

}  // namespace
}  // namespace mrc::testing
