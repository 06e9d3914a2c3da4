// Tests of the mrc_loader library: pinned maps read back by bpftool and by
// XdpMaps::open_pinned, maps reused across loads, and attaching mrc_xdp to a
// veth pair inside the test's private network namespace (native and generic),
// with the reported mode and a clean detach.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <gtest/gtest.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "bpf_test_env.hpp"
#include "loader/attach.hpp"
#include "loader/log.hpp"
#include "loader/mrc_xdp.hpp"
#include "xdp_rows.hpp"

namespace mrc::testing {
namespace {

using codec::Packet;
using loader::MrcXdp;
using loader::MrcXdpAttachment;
using loader::XdpMode;

// A bpffs instance mounted on a fresh directory (private mount namespace).
class PrivateBpffs {
 public:
  PrivateBpffs() {
    char tmpl[] = "/tmp/mrc-bpffs-XXXXXX";
    if (!mkdtemp(tmpl)) return;
    dir_ = tmpl;
    if (mount("bpf", dir_.c_str(), "bpf", 0, nullptr)) {
      error_ = std::string("mounting bpffs: ") + std::strerror(errno);
      return;
    }
    mounted_ = true;
  }
  ~PrivateBpffs() {
    if (mounted_) umount(dir_.c_str());
    if (!dir_.empty()) rmdir(dir_.c_str());
  }
  const std::string& dir() const { return dir_; }
  const std::string& error() const { return error_; }
  bool ok() const { return mounted_; }

 private:
  std::string dir_, error_;
  bool mounted_ = false;
};

std::string capture(const std::string& cmd, int* status) {
  std::string out;
  FILE* f = popen((cmd + " 2>&1").c_str(), "r");
  if (!f) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  *status = pclose(f);
  return out;
}

// Runs `count` frames with a bad opcode through the program (ifindex 0 ->
// counters of port 0).
void send_bad_opcode(const MrcXdp& prog, int count) {
  Packet p = make_packet(MRC_OP_WRITE_ONLY, codec::IpVersion::kV4, 64);
  Frame f = build_frame(p);
  f[bth_of(p)] = 0x04;
  for (int i = 0; i < count; i++) {
    auto r = xdp_test_run(prog.prog_fd(), f, 0, 0);
    ASSERT_TRUE(r) << r.error().message();
    ASSERT_EQ(r->action, uint32_t(XDP_DROP));
  }
}

TEST(XdpPin, BpftoolPrintsCounterNames) {
  PrivateBpffs fs;
  ASSERT_TRUE(fs.ok()) << fs.error();
  const std::string pin = fs.dir() + "/mrc";
  loader::LoadOptions lo;
  lo.pin_dir = pin;
  auto prog = MrcXdp::open_and_load(lo);
  ASSERT_TRUE(prog) << prog.error().message();
  send_bad_opcode(*prog, 7);

  int st = -1;
  std::string out = capture("bpftool -j map dump pinned " + pin + "/mrc_stats", &st);
  if (st != 0 && out.find("not found") != std::string::npos) GTEST_SKIP() << "bpftool missing";
  ASSERT_EQ(st, 0) << out;
  EXPECT_NE(out.find("\"drop_bad_opcode\""), std::string::npos) << out;
  auto j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  uint64_t bad_opcode = 0, rx = 0;
  bool seen_key0 = false;
  for (const auto& raw : j) {
    // with BTF, bpftool adds the decoded entry under "formatted"
    ASSERT_TRUE(raw.contains("formatted")) << out;
    const auto& e = raw.at("formatted");
    if (e.at("key").get<uint64_t>() != 0) continue;
    seen_key0 = true;
    for (const auto& c : e.at("values")) {
      bad_opcode += c.at("value").at("drop_bad_opcode").get<uint64_t>();
      rx += c.at("value").at("rx_packets").get<uint64_t>();
    }
  }
  EXPECT_TRUE(seen_key0) << out;
  EXPECT_EQ(bad_opcode, 7u);
  EXPECT_EQ(rx, 7u);

  // the config map shows its field names too
  out = capture("bpftool -j map dump pinned " + pin + "/mrc_cfg", &st);
  ASSERT_EQ(st, 0) << out;
  EXPECT_NE(out.find("\"dscp_trimmed_lasthop\""), std::string::npos) << out;
}

TEST(XdpPin, ReopenAndReuseAcrossLoads) {
  PrivateBpffs fs;
  ASSERT_TRUE(fs.ok()) << fs.error();
  const std::string pin = fs.dir() + "/mrc";
  loader::LoadOptions lo;
  lo.pin_dir = pin;
  {
    auto prog = MrcXdp::open_and_load(lo);
    ASSERT_TRUE(prog) << prog.error().message();
    ASSERT_TRUE(prog->maps().set_qp(0x42, {0x4242, 0}));
    send_bad_opcode(*prog, 3);
  }  // program gone, pins stay

  auto maps = loader::XdpMaps::open_pinned(pin);
  ASSERT_TRUE(maps) << maps.error().message();
  auto s = maps->stats(0);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->drop_bad_opcode, 3u);
  auto qp = maps->qp(0x42);
  ASSERT_TRUE(qp);
  EXPECT_EQ(qp->remote_qpn, 0x4242u);

  // a new load reuses the pinned maps: counters and QP table survive
  auto prog2 = MrcXdp::open_and_load(lo);
  ASSERT_TRUE(prog2) << prog2.error().message();
  send_bad_opcode(*prog2, 2);
  s = maps->stats(0);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->drop_bad_opcode, 5u);
  EXPECT_TRUE(prog2->maps().qp(0x42));

  ASSERT_TRUE(prog2->unpin_maps(pin));
  EXPECT_FALSE(loader::XdpMaps::open_pinned(pin));
}

TEST(XdpPin, ErrorsCarryContext) {
  auto m = loader::XdpMaps::open_pinned("/nonexistent-mrc-pin-dir");
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().code, ENOENT);
  EXPECT_NE(m.error().message().find("/nonexistent-mrc-pin-dir/mrc_xsks"), std::string::npos);

  PrivateBpffs fs;
  ASSERT_TRUE(fs.ok()) << fs.error();
  auto prog = MrcXdp::open_and_load();
  ASSERT_TRUE(prog);
  auto st = prog->maps().set_port(7, {0, 0});
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, EINVAL);
  EXPECT_FALSE(prog->maps().stats(MRC_MAX_PORTS));
  auto del = prog->maps().del_qp(0x99);
  ASSERT_FALSE(del);
  EXPECT_NE(del.error().message().find("mrc_qps"), std::string::npos);
}

// ---------------------------------------------------------------------------
// Attaching

struct Veth {
  std::string a, b;
  explicit Veth(const std::string& tag) {
    a = "mrcl" + std::to_string(getpid() % 100000) + tag + "a";
    b = "mrcl" + std::to_string(getpid() % 100000) + tag + "b";
    status = make_veth(a, b);
  }
  Status status;
};

// The XDP program an interface runs in a given mode (0 = none).
uint32_t attached_id(const std::string& ifname, XdpMode mode) {
  LIBBPF_OPTS(bpf_xdp_query_opts, q);
  if (bpf_xdp_query(int(if_nametoindex(ifname.c_str())), 0, &q)) return 0;
  return mode == XdpMode::kNative ? q.drv_prog_id : q.skb_prog_id;
}

uint32_t prog_id(int fd) {
  bpf_prog_info info{};
  uint32_t len = sizeof(info);
  if (bpf_obj_get_info_by_fd(fd, &info, &len)) return 0;
  return info.id;
}

TEST(XdpAttach, NativeOnVethThenDetach) {
  Veth v("n");
  ASSERT_TRUE(v.status) << v.status.error().message();
  auto prog = MrcXdp::open_and_load();
  ASSERT_TRUE(prog);
  loader::AttachOptions o;
  o.allow_generic = false;
  {
    auto a = MrcXdpAttachment::attach(*prog, v.a, o);
    ASSERT_TRUE(a) << a.error().message();
    EXPECT_EQ(a->info().mode, XdpMode::kNative) << a->info().describe();
    EXPECT_EQ(a->info().ifname, v.a);
    EXPECT_EQ(a->info().ifindex, int(if_nametoindex(v.a.c_str())));
    uint32_t id = attached_id(v.a, XdpMode::kNative);
    EXPECT_NE(id, 0u);
    EXPECT_EQ(a->info().prog_id, id);
    if (!a->info().dispatcher) {
      EXPECT_EQ(id, prog_id(prog->prog_fd())) << a->info().describe();
    }
    EXPECT_EQ(attached_id(v.a, XdpMode::kGeneric), 0u);
    EXPECT_EQ(attached_id(v.b, XdpMode::kNative), 0u);
    std::printf("reported: %s\n", a->info().describe().c_str());
    // explicit detach, then the destructor has nothing left to do
    ASSERT_TRUE(a->detach());
    EXPECT_FALSE(a->attached());
    auto any = loader::xdp_attached(v.a);
    ASSERT_TRUE(any);
    EXPECT_FALSE(*any);
  }
  // the destructor detaches
  {
    auto a = MrcXdpAttachment::attach(*prog, v.a, o);
    ASSERT_TRUE(a) << a.error().message();
    EXPECT_TRUE(*loader::xdp_attached(v.a));
  }
  EXPECT_FALSE(*loader::xdp_attached(v.a));
  EXPECT_EQ(attached_id(v.a, XdpMode::kNative), 0u);
}

TEST(XdpAttach, GenericOnVethThenDetach) {
  Veth v("g");
  ASSERT_TRUE(v.status) << v.status.error().message();
  auto prog = MrcXdp::open_and_load();
  ASSERT_TRUE(prog);
  loader::AttachOptions o;
  o.generic_only = true;
  {
    auto a = MrcXdpAttachment::attach(*prog, v.a, o);
    ASSERT_TRUE(a) << a.error().message();
    EXPECT_EQ(a->info().mode, XdpMode::kGeneric) << a->info().describe();
    EXPECT_NE(attached_id(v.a, XdpMode::kGeneric), 0u);
    EXPECT_EQ(attached_id(v.a, XdpMode::kNative), 0u);
    std::printf("reported: %s\n", a->info().describe().c_str());
  }
  EXPECT_FALSE(*loader::xdp_attached(v.a));
}

TEST(XdpAttach, AllInterfacesKeepAndErrors) {
  Veth v("k");
  ASSERT_TRUE(v.status) << v.status.error().message();
  auto prog = MrcXdp::open_and_load();
  ASSERT_TRUE(prog);
  {
    auto all = loader::attach_all(*prog, {v.a, v.b});
    ASSERT_TRUE(all) << all.error().message();
    ASSERT_EQ(all->size(), 2u);
    for (const auto& a : *all) EXPECT_TRUE(*loader::xdp_attached(a.info().ifname));
    (*all)[1].keep();  // stays after the vector goes
  }
  EXPECT_FALSE(*loader::xdp_attached(v.a));
  EXPECT_TRUE(*loader::xdp_attached(v.b));
  ASSERT_EQ(bpf_xdp_detach(int(if_nametoindex(v.b.c_str())), 0, nullptr), 0);
  EXPECT_FALSE(*loader::xdp_attached(v.b));

  // a missing interface fails with context, and attach_all undoes the others
  auto bad = loader::attach_all(*prog, {v.a, "nosuchmrc0"});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("attaching mrc_xdp to nosuchmrc0"), std::string::npos)
      << bad.error().message();
  EXPECT_FALSE(*loader::xdp_attached(v.a));

  // another program already on the interface in native mode: reported, not replaced
  loader::AttachOptions native;
  native.allow_generic = false;
  auto first = MrcXdpAttachment::attach(*prog, v.a, native);
  ASSERT_TRUE(first) << first.error().message();
  auto prog2 = MrcXdp::open_and_load();
  ASSERT_TRUE(prog2);
  auto second = MrcXdpAttachment::attach(*prog2, v.a, native);
  if (first->info().dispatcher) {
    // with a working dispatcher, libxdp chains both programs
    EXPECT_TRUE(second) << second.error().message();
  } else {
    ASSERT_FALSE(second);
    EXPECT_NE(second.error().message().find("attaching mrc_xdp to " + v.a), std::string::npos);
    EXPECT_EQ(attached_id(v.a, XdpMode::kNative), prog_id(prog->prog_fd()));
  }
}

// The log hook receives libbpf/libxdp output.
TEST(XdpLog, HookReceivesLibraryMessages) {
  std::vector<std::string> got;
  loader::set_log_hook(
      [&got](loader::LogLevel, std::string_view src, std::string_view msg) {
        got.push_back(std::string(src) + ": " + std::string(msg));
      },
      loader::LogLevel::kDebug);
  auto prog = MrcXdp::open_and_load();
  loader::set_log_hook(nullptr, loader::LogLevel::kWarn);
  ASSERT_TRUE(prog);
  bool libbpf_seen = false;
  for (const auto& s : got) libbpf_seen |= s.rfind("libbpf: ", 0) == 0;
  EXPECT_TRUE(libbpf_seen) << got.size() << " messages";
  for (const auto& s : got) EXPECT_FALSE(!s.empty() && s.back() == '\n') << s;
}

}  // namespace
}  // namespace mrc::testing
