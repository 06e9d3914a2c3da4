// Conformance behaviour 20: controller calls without CAP_NET_ADMIN fail with
// EPERM. mrcd's control server on a real unix socket; the client is a child
// process that drops CAP_NET_ADMIN before it connects (SO_PEERCRED names it).
// Also the request dispatcher's error objects.
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <set>
#include <thread>

#include "ctl/ep.hpp"
#include "mrcd/ops.hpp"
#include "mrcd/server.hpp"
#include "support/ctl_fixture.hpp"

namespace mrc::testing {
namespace {

using mrc::mrcd::PeerCred;
using mrc::mrcd::Server;
using json = nlohmann::json;

bool drop_net_admin() {
  __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct d[2] = {};
  if (syscall(SYS_capget, &h, d)) return false;
  d[0].effective &= ~(1u << 12);
  d[0].permitted &= ~(1u << 12);
  d[0].inheritable &= ~(1u << 12);
  return syscall(SYS_capset, &h, d) == 0;
}

bool have_net_admin() {
  __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct d[2] = {};
  if (syscall(SYS_capget, &h, d)) return false;
  return d[0].effective & (1u << 12);
}

// One request over a fresh connection; the response line parsed.
json request(const std::string& path, const json& req) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strcpy(a.sun_path, path.c_str());
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a))) {
    close(fd);
    return json{{"connect_failed", errno}};
  }
  std::string s = req.dump() + "\n";
  if (send(fd, s.data(), s.size(), MSG_NOSIGNAL) != ssize_t(s.size())) {
    close(fd);
    return json{{"send_failed", errno}};
  }
  std::string in;
  char buf[4096];
  while (in.find('\n') == std::string::npos) {
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    in.append(buf, size_t(n));
  }
  close(fd);
  return json::parse(in.substr(0, in.find('\n')), nullptr, false);
}

class ServerTest : public CtlTest {
 protected:
  void SetUp() override {
    CtlTest::SetUp();
    dir = "/tmp/mrcd-server-test." + std::to_string(getpid());
    path = dir + "/s.sock";
    Server::Deps d;
    d.ctl = &ctl;
    auto s = Server::listen(path, "", d);
    ASSERT_TRUE(s) << s.error().message();
    srv = std::move(*s);
    chmod(dir.c_str(), 0755);
    chmod(path.c_str(), 0666);  // let a child of any uid connect
    loop = std::thread([this] {
      std::vector<pollfd> fds;
      while (!stop) {
        fds.clear();
        srv->fill_pollfds(&fds);
        if (poll(fds.data(), fds.size(), 20) > 0)
          for (const pollfd& p : fds)
            if (p.revents) srv->handle(p);
      }
    });
  }
  void TearDown() override {
    stop = true;
    if (loop.joinable()) loop.join();
    srv.reset();
    rmdir(dir.c_str());
  }
  // Runs `fn` in a child that dropped CAP_NET_ADMIN; the child's exit code.
  int as_child_without_net_admin(const std::function<int()>& fn) {
    pid_t pid = fork();
    if (pid == 0) {
      if (!drop_net_admin()) _exit(90);
      if (have_net_admin()) _exit(91);
      _exit(fn());
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 99;
  }
  std::string dir, path;
  std::unique_ptr<Server> srv;
  std::thread loop;
  std::atomic<bool> stop{false};
};

json modify_fmt(uint64_t id) {
  return json{{"id", 1},
              {"op", "ev_fmt.modify"},
              {"args", {{"id", id}, {"state", "offline"}, {"mode", "stev"}, {"widths", {16, 16}}}}};
}

TEST_F(ServerTest, Conf20_ModifyingCallsWithoutNetAdminAreEperm) {
  int rc = as_child_without_net_admin([this] {
    json r = request(path, modify_fmt(13));
    if (r.value("ok", true) || r["error"].value("errno", 0) != EPERM) return 1;
    if (r["error"].value("name", "") != "EPERM") return 2;
    r = request(path, {{"id", 2}, {"op", "port.set"}, {"args", {{"port", 1}, {"admin", "down"}}}});
    if (r.value("ok", true) || r["error"].value("errno", 0) != EPERM) return 3;
    r = request(path, {{"id", 3}, {"op", "probe"}, {"args", {{"dst", "198.18.1.2"}}}});
    if (r.value("ok", true) || r["error"].value("errno", 0) != EPERM) return 4;
    // Reading is allowed.
    r = request(path, {{"id", 4}, {"op", "dev.show"}});
    if (!r.value("ok", false)) return 5;
    r = request(path, {{"id", 5}, {"op", "ev_fmt.show"}});
    if (!r.value("ok", false) || !r["result"].is_array()) return 6;
    return 0;
  });
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(ctl.fmt_record(13), nullptr);  // nothing was created
  PortAttr p;
  ASSERT_TRUE(ctl.query_port(1, &p, kPortAttrAdminState));
  EXPECT_EQ(p.port_admin_state, kPortAdminEnabled);
  EXPECT_EQ(srv->counters().eperm, 3u);
  // With CAP_NET_ADMIN (root running the tests) the same call succeeds.
  if (!have_net_admin()) GTEST_SKIP() << "the test process has no CAP_NET_ADMIN to compare with";
  json r = request(path, modify_fmt(13));
  EXPECT_TRUE(r.value("ok", false)) << r.dump();
  ASSERT_NE(ctl.fmt_record(13), nullptr);
}

TEST_F(ServerTest, Conf20_NonRootUidIsEperm) {
  if (getuid() != 0) GTEST_SKIP() << "needs root to switch to uid 65534";
  pid_t pid = fork();
  if (pid == 0) {
    if (setgid(65534) || setuid(65534)) _exit(90);
    json r = request(path, modify_fmt(14));
    if (r.value("ok", true) || r["error"].value("errno", 0) != EPERM) _exit(1);
    r = request(path, {{"id", 2}, {"op", "dev.show"}});
    _exit(r.value("ok", false) ? 0 : 2);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0);
  EXPECT_EQ(ctl.fmt_record(14), nullptr);
}

TEST_F(ServerTest, PeerCredentialsAreThoseOfTheConnectingProcess) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  auto c = mrc::mrcd::peer_cred(sv[0]);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->pid, getpid());
  EXPECT_EQ(c->uid, getuid());
  EXPECT_EQ(c->net_admin, have_net_admin());
  close(sv[0]);
  close(sv[1]);
  EXPECT_TRUE(mrc::mrcd::op_modifies("ev_profile.modify"));
  EXPECT_TRUE(mrc::mrcd::op_modifies("probe"));
  EXPECT_FALSE(mrc::mrcd::op_modifies("ev_profile.show"));
  EXPECT_FALSE(mrc::mrcd::op_modifies("monitor"));
}

// The handler table: every operation of ctl/ops.hpp has a handler, and the
// ones controller.md lists as modifying state (port.set, *.modify, *.delete,
// ev.set, ev.populate, ev.replace, probe) are exactly those that need
// CAP_NET_ADMIN; an unknown name is refused.
TEST(ServerOps, EveryOperationHasAHandlerAndItsPermission) {
  namespace op = mrc::ctl::proto::op;
  const std::set<std::string> modifying = {"port.set", "ev.set", "ev.populate", "ev.replace",
                                           "probe"};
  std::set<std::string> seen;
  for (const char* name : op::kAll) {
    const std::string n = name;
    EXPECT_TRUE(seen.insert(n).second) << n << " twice";
    const mrc::mrcd::OpSpec* s = mrc::mrcd::find_op(n);
    ASSERT_NE(s, nullptr) << n;
    EXPECT_NE(s->run, nullptr) << n;
    const bool mod = modifying.count(n) || n.ends_with(".modify") || n.ends_with(".delete");
    EXPECT_EQ(s->modifies, mod) << n;
    EXPECT_EQ(mrc::mrcd::op_modifies(n), mod) << n;
  }
  EXPECT_EQ(seen.size(), 22u);
  EXPECT_EQ(mrc::mrcd::find_op("ev_profile.bogus"), nullptr);
  EXPECT_FALSE(mrc::mrcd::op_modifies("ev_profile.bogus"));
}

// The dispatcher without a socket: error objects name the object and errno.
TEST_F(ServerTest, ErrorsNameTheObjectAndTheReason) {
  PeerCred admin{getpid(), 0, 0, true};
  auto r = srv->dispatch(-1, admin, modify_fmt(13));
  ASSERT_TRUE(r);
  EXPECT_TRUE((*r)["ok"].get<bool>()) << r->dump();
  r = srv->dispatch(-1, admin,
                    {{"id", 7},
                     {"op", "ev_profile.modify"},
                     {"args",
                      {{"id", 5},
                       {"state", "offline"},
                       {"mode", "generated"},
                       {"fmt", 13},
                       {"count", 8},
                       {"min_active", 9},
                       {"fields", json::array({{{"width", 8}, {"max_val", 7}, {"mask", 7}}})}}}});
  ASSERT_TRUE(r);
  EXPECT_EQ((*r)["id"], 7);
  EXPECT_FALSE((*r)["ok"].get<bool>());
  EXPECT_EQ((*r)["error"]["object"], "ev-profile 5");
  EXPECT_EQ((*r)["error"]["errno"], EINVAL);
  EXPECT_NE((*r)["error"]["message"].get<std::string>().find(
                "ev_min_active 9 is greater than ev_count 8"),
            std::string::npos);
  // E2BIG reports the required count.
  r = srv->dispatch(-1, admin,
                    {{"id", 8},
                     {"op", "ev_profile.modify"},
                     {"args",
                      {{"id", 5},
                       {"state", "offline"},
                       {"mode", "generated"},
                       {"fmt", 13},
                       {"count", 8},
                       {"min_active", 2},
                       {"fields", json::array({{{"width", 8}, {"max_val", 7}, {"mask", 7}}})}}}});
  ASSERT_TRUE((*r)["ok"].get<bool>()) << r->dump();
  r = srv->dispatch(
      -1, admin,
      {{"id", 9},
       {"op", "ev_profile.modify"},
       {"args", {{"id", 5}, {"ev_op", {{"op", "query_array"}, {"entry_count", 3}}}}}});
  EXPECT_EQ((*r)["error"]["name"], "E2BIG");
  EXPECT_EQ((*r)["result"]["required"], 8);
  r = srv->dispatch(-1, admin, {{"id", 10}, {"op", "no.such"}});
  EXPECT_EQ((*r)["error"]["errno"], EINVAL);
  r = srv->dispatch(-1, admin, {{"id", 11}});
  EXPECT_EQ((*r)["error"]["errno"], EINVAL);
  r = srv->dispatch(-1, admin,
                    {{"id", 12},
                     {"op", "ev.set"},
                     {"args", {{"profile", 5}, {"evs", {"zz@1"}}, {"state", "denied"}}}});
  EXPECT_EQ((*r)["error"]["errno"], EINVAL);
  EXPECT_NE((*r)["error"]["message"].get<std::string>().find("HEXBYTES@PORT"), std::string::npos);
}

// ev_profile.delete / cc_profile.delete take an ONLINE profile down through
// OFFLINE and INIT (the only way the state machine allows) and erase it; an
// OFFLINE one skips the first step; a missing one is EINVAL, nothing changed.
TEST_F(ServerTest, ProfileDeleteWalksDownTheStatesAndErases) {
  PeerCred admin{getpid(), 0, 0, true};
  ASSERT_TRUE(fmt(13, {16, 16}));
  ASSERT_TRUE(evp_offline(5, kEvModeGen, 13, 8, {{8, 0, 0, 7, 0x7}}));
  ASSERT_TRUE(set_state(5, kProfileOnline));
  ASSERT_TRUE(evp_offline(6, kEvModeGen, 13, 8, {{8, 0, 0, 7, 0x7}}));  // stays OFFLINE
  for (uint64_t id : {5, 6}) {
    auto r =
        srv->dispatch(-1, admin, {{"id", 1}, {"op", "ev_profile.delete"}, {"args", {{"id", id}}}});
    ASSERT_TRUE(r && (*r)["ok"].get<bool>()) << r->dump();
    EXPECT_EQ((*r)["result"]["deleted"], true);
    EXPECT_EQ(ctl.ev_record(id), nullptr) << id;
  }
  auto r =
      srv->dispatch(-1, admin, {{"id", 2}, {"op", "ev_profile.delete"}, {"args", {{"id", 5}}}});
  EXPECT_FALSE((*r)["ok"].get<bool>());
  EXPECT_EQ((*r)["error"]["errno"], EINVAL);
  EXPECT_EQ((*r)["error"]["object"], "ev-profile 5");

  CcProfileAttr c;
  c.profile_state = kProfileOffline;
  c.algorithm = kAlgNscc;
  ASSERT_TRUE(ctl.modify_cc_profile(7, c, kCcAttrState | kCcAttrAlgorithm));
  c.profile_state = kProfileOnline;
  c.cc_config = NsccCfg{};
  ASSERT_TRUE(ctl.modify_cc_profile(7, c, kCcAttrState | kCcAttrConfig));
  ASSERT_NE(ctl.cc_record(7), nullptr);
  r = srv->dispatch(-1, admin, {{"id", 3}, {"op", "cc_profile.delete"}, {"args", {{"id", 7}}}});
  ASSERT_TRUE((*r)["ok"].get<bool>()) << r->dump();
  EXPECT_EQ(ctl.cc_record(7), nullptr);
  r = srv->dispatch(-1, admin, {{"id", 4}, {"op", "cc_profile.delete"}, {"args", {{"id", 7}}}});
  EXPECT_EQ((*r)["error"]["errno"], EINVAL);
  EXPECT_EQ((*r)["error"]["object"], "cc-profile 7");
}

// `ev show` carries what applications published per EV (summed over the
// reporting processes); `ev deny|allow` says when the change was committed.
TEST_F(ServerTest, EvShowCarriesPublishedCountersAndEvSetItsCommitTime) {
  PeerCred admin{getpid(), 0, 0, true};
  ASSERT_TRUE(fmt(13, {16, 16}));
  ASSERT_TRUE(evp_offline(5, kEvModeExp, 13, 4,
                          {{16, 0, 0, 0xffff, 0xffff}, {16, 0, 0, 0xffff, 0xffff}}, 1));
  ASSERT_TRUE(populate(5, {ev({0, 0, 0xc0, 1}, 1), ev({0, 0, 0xc0, 2}, 1), ev({0, 0, 0xc0, 3}, 2),
                           ev({0, 0, 0xc0, 4}, 2)}));
  ASSERT_TRUE(set_state(5, kProfileOnline));
  // Two processes report EV 0x0000c001 on port 1; nobody reports the others.
  const uint64_t now = mono_ns();
  mrc_ctl_evstat a{};
  a.update_ns = now - 5'000'000;
  a.tx_pkts = 100, a.acked = 90, a.lost = 2, a.trims = 1, a.ecn = 3, a.probes_ok = 4;
  a.rtt_sum_ns = 3000, a.rtt_samples = 3, a.rtt_min_ns = 800, a.rtt_last_ns = 1000;
  a.qps = 1, a.qps_bad = 1;
  mrc_ctl_evstat b = a;
  b.update_ns = now - 1'000'000;
  b.tx_pkts = 50, b.lost = 0, b.rtt_min_ns = 600, b.rtt_last_ns = 2000, b.rtt_sum_ns = 1000,
  b.rtt_samples = 1, b.qps = 2, b.qps_bad = 0;
  ASSERT_TRUE(store.put_evstat({5, 101, 0, 0xc001, 1, {}}, a));
  ASSERT_TRUE(store.put_evstat({5, 102, 0, 0xc001, 1, {}}, b));
  ASSERT_TRUE(store.put_evstat({6, 101, 0, 0xc002, 1, {}}, a));  // another profile
  auto r = srv->dispatch(-1, admin, {{"id", 1}, {"op", "ev.show"}, {"args", {{"profile", 5}}}});
  ASSERT_TRUE(r && (*r)["ok"].get<bool>()) << r->dump();
  const json& evs = (*r)["result"]["evs"];
  ASSERT_EQ(evs.size(), 4u);
  const json& c = evs[0]["counters"];
  ASSERT_TRUE(c.is_object()) << evs.dump();
  EXPECT_EQ(c["tx_pkts"], 150);
  EXPECT_EQ(c["acked"], 180);
  EXPECT_EQ(c["lost"], 2);
  EXPECT_EQ(c["trims"], 2);
  EXPECT_EQ(c["ecn"], 6);
  EXPECT_EQ(c["probes_ok"], 8);
  EXPECT_EQ(c["rtt_min_ns"], 600);
  EXPECT_EQ(c["rtt_last_ns"], 2000);
  EXPECT_EQ(c["rtt_avg_ns"], 1000);
  EXPECT_EQ(c["qps"], 3);
  EXPECT_EQ(c["qps_bad"], 1);
  EXPECT_EQ(c["reports"], 2);
  EXPECT_EQ(c["update_ns"], b.update_ns);
  EXPECT_GE(c["age_ms"].get<uint64_t>(), 1u);
  EXPECT_TRUE(evs[1]["counters"].is_null());  // 0xc002 is reported for profile 6 only
  EXPECT_TRUE(evs[2]["counters"].is_null());
  // The filters still apply.
  r = srv->dispatch(-1, admin,
                    {{"id", 2}, {"op", "ev.show"}, {"args", {{"profile", 5}, {"port", 2}}}});
  ASSERT_EQ((*r)["result"]["evs"].size(), 2u);
  EXPECT_TRUE((*r)["result"]["evs"][0]["counters"].is_null());

  const uint64_t gen = read_gen(store.dev());
  const uint64_t before = mono_ns();
  r = srv->dispatch(-1, admin,
                    {{"id", 3},
                     {"op", "ev.set"},
                     {"args", {{"profile", 5}, {"evs", {"0000c001@1"}}, {"state", "denied"}}}});
  const uint64_t after = mono_ns();
  ASSERT_TRUE(r && (*r)["ok"].get<bool>()) << r->dump();
  EXPECT_EQ((*r)["result"]["gen"], read_gen(store.dev()));
  EXPECT_GT((*r)["result"]["gen"].get<uint64_t>(), gen);
  EXPECT_GE((*r)["result"]["time_ns"].get<uint64_t>(), before);
  EXPECT_LE((*r)["result"]["time_ns"].get<uint64_t>(), (*r)["result"]["done_ns"].get<uint64_t>());
  EXPECT_LE((*r)["result"]["done_ns"].get<uint64_t>(), after);
  EXPECT_EQ((*r)["result"]["profile"]["denied"], 1);
  r = srv->dispatch(-1, admin, {{"id", 4}, {"op", "ev.show"}, {"args", {{"profile", 5}}}});
  EXPECT_EQ((*r)["result"]["evs"][0]["state"], "denied");
  EXPECT_EQ((*r)["result"]["evs"][0]["counters"]["tx_pkts"], 150);

  // `qp show` objects carry the publication time next to its age.
  mrc_ctl_qp_report q{};
  q.update_ns = now - 2'000'000;
  q.state = 3;
  const json qj = proto::qp_json({101, 0, 7}, q, now);
  EXPECT_EQ(qj["update_ns"], q.update_ns);
  EXPECT_EQ(qj["age_ms"], 2);
}

}  // namespace
}  // namespace mrc::testing
