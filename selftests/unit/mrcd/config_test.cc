// mrcd's configuration: a bad file fails naming the file, line and reason;
// flags override the file; the shipped sample is valid.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "mrcd/config.hpp"

namespace mrc::testing {
namespace {

using mrc::mrcd::load_config;
using mrc::mrcd::parse_args;

class ConfigTest : public ::testing::Test {
 protected:
  std::string write(const std::string& text) {
    path = "/tmp/mrcd-config-test." + std::to_string(getpid()) + ".toml";
    std::ofstream(path) << text;
    return path;
  }
  void TearDown() override { unlink(path.c_str()); }
  std::string path;
};

TEST_F(ConfigTest, BadFilesNameFileLineAndReason) {
  struct Case {
    const char* text;
    const char* want;
  } cases[] = {
      {"[daemon]\nsocket = \"/run/x\"\nbogus = 1\n", ":3: unknown key daemon.bogus"},
      {"[[plane]]\nifname = \"eth1\"\nport = 16\n", ":3: plane.port = 16 is outside 1..15"},
      {"[[plane]]\nifname = \"eth1\"\n", ":1: [[plane]] eth1 needs port"},
      {"[policy]\nloss_threshold = 1.5\n",
       ":2: policy.loss_threshold = 1.500000 is outside 0.000000..1.000000"},
      {"[xdp]\nmode = \"turbo\"\n", ":2: xdp mode \"turbo\" is not auto, native or generic"},
      {"[daemon]\nlog_level = 4\n", ":2: daemon.log_level must be a string"},
      {"[[plane]]\nifname = \"a\"\nport = 1\n[[plane]]\nifname = \"b\"\nport = 1\n",
       ":4: port 1 is used by a already"},
      {"[[plane]]\nifname = \"a\"\nport = 1\npeers = [\"not-an-ip\"]\n",
       ":4: plane.peers: \"not-an-ip\" is not"},
      {"[dscp]\ncontrol = 64\n", ":2: dscp.control = 64 is outside 0..63"},
      {"x = [\n", ":1:"},
      {"[probe]\nwhat = 1\n", ":2: unknown key probe.what"},
      {"whatever = 1\n", ":1: unknown section or key whatever"},
      {"[policy]\nprobe_loss_window = 65\n", ":2: policy.probe_loss_window = 65 is outside 1..64"},
      {"[policy]\nprobe_loss_threshold = -0.1\n", ":2: policy.probe_loss_threshold"},
  };
  for (const Case& c : cases) {
    auto r = load_config(write(c.text));
    ASSERT_FALSE(r.ok()) << c.text;
    const std::string msg = r.error().message();
    EXPECT_EQ(msg.rfind(path + ":", 0), 0u) << msg;
    EXPECT_NE(msg.find(c.want), std::string::npos) << "want \"" << c.want << "\" in: " << msg;
  }
  auto missing = load_config("/nonexistent/mrcd.toml");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message().find("/nonexistent/mrcd.toml"), std::string::npos);
}

TEST_F(ConfigTest, ProbeLossKeys) {
  auto r = load_config(write("[policy]\nprobe_loss_threshold = 0.3\nprobe_loss_window = 12\n"));
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_DOUBLE_EQ(r->policy.probe_loss_threshold, 0.3);
  EXPECT_EQ(r->policy.probe_loss_window, 12u);
  auto d = load_config(write("[policy]\n"));
  ASSERT_TRUE(d.ok());
  EXPECT_DOUBLE_EQ(d->policy.probe_loss_threshold, 0.2);
  EXPECT_EQ(d->policy.probe_loss_window, 20u);
}

TEST_F(ConfigTest, MetricsPerEvIsOptIn) {
  auto d = load_config(write("[daemon]\n"));
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->metrics_per_ev);
  auto r = load_config(write("[daemon]\nmetrics_per_ev = true\n"));
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_TRUE(r->metrics_per_ev);
  auto bad = load_config(write("[daemon]\nmetrics_per_ev = 1\n"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("metrics_per_ev"), std::string::npos)
      << bad.error().message();
  const char* off[] = {"mrcd", "--plane", "veth9:3"};
  auto o = parse_args(3, const_cast<char**>(off));
  ASSERT_TRUE(o) << o.error().message();
  EXPECT_FALSE(o->cfg.metrics_per_ev);
  const char* on[] = {"mrcd", "--plane", "veth9:3", "--metrics-per-ev"};
  o = parse_args(4, const_cast<char**>(on));
  ASSERT_TRUE(o) << o.error().message();
  EXPECT_TRUE(o->cfg.metrics_per_ev);
}

TEST_F(ConfigTest, FileAndFlags) {
  write(
      "[daemon]\npin_dir = \"/sys/fs/bpf/t\"\nmetrics = \"\"\n[xdp]\nudp_port = "
      "4792\n[dscp]\ncontrol = 40\n"
      "[policy]\nbad_intervals = 5\n[[plane]]\nifname = \"eth1\"\nport = 1\nqueues = 8\npeers = "
      "[\"198.18.1.2\", \"fd00::2\"]\n"
      "[[plane]]\nifname = \"eth2\"\nport = 2\n");
  auto r = load_config(path);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->pin_dir, "/sys/fs/bpf/t");
  EXPECT_EQ(r->metrics, "");
  EXPECT_EQ(r->udp_port, 4792);
  EXPECT_EQ(r->dscp.control, 40);
  EXPECT_EQ(r->policy.bad_intervals, 5u);
  ASSERT_EQ(r->planes.size(), 2u);
  EXPECT_EQ(r->planes[0].queues, 8u);
  ASSERT_EQ(r->planes[0].peers.size(), 2u);
  EXPECT_EQ(r->planes[0].peers[1].ver, codec::IpVersion::kV6);
  EXPECT_TRUE(mrc::mrcd::validate(*r));

  std::string cfg = path;
  const char* argv[] = {"mrcd",
                        "--config",
                        cfg.c_str(),
                        "--udp-port",
                        "4800",
                        "--plane",
                        "veth9:3:2",
                        "--peer",
                        "veth9=198.18.3.2",
                        "--no-policy",
                        "--metrics=127.0.0.1:9000"};
  auto o = parse_args(11, const_cast<char**>(argv));
  ASSERT_TRUE(o) << o.error().message();
  EXPECT_EQ(o->cfg.udp_port, 4800);
  EXPECT_FALSE(o->cfg.policy.enabled);
  EXPECT_EQ(o->cfg.metrics, "127.0.0.1:9000");
  ASSERT_EQ(o->cfg.planes.size(), 1u);  // --plane replaces the file's planes
  EXPECT_EQ(o->cfg.planes[0].ifname, "veth9");
  EXPECT_EQ(o->cfg.planes[0].port, 3);
  EXPECT_EQ(o->cfg.planes[0].queues, 2u);
  EXPECT_EQ(o->cfg.planes[0].peers.size(), 1u);
  EXPECT_EQ(o->cfg.pin_dir, "/sys/fs/bpf/t");  // from the file

  const char* bad[] = {"mrcd", "--plane", "eth1"};
  EXPECT_FALSE(parse_args(3, const_cast<char**>(bad)));
  const char* bad2[] = {"mrcd", "--frobnicate"};
  auto b2 = parse_args(2, const_cast<char**>(bad2));
  ASSERT_FALSE(b2);
  EXPECT_NE(b2.error().message().find("unknown option --frobnicate"), std::string::npos);
  const char* nop[] = {"mrcd"};
  auto empty = parse_args(1, const_cast<char**>(nop));
  ASSERT_TRUE(empty);
  EXPECT_FALSE(mrc::mrcd::validate(empty->cfg));  // no planes
}

TEST_F(ConfigTest, TheSampleIsValid) {
  auto r = load_config(MRC_SOURCE_DIR "/user/mrcd/mrcd.toml.sample");
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_TRUE(mrc::mrcd::validate(*r));
  EXPECT_EQ(r->planes.size(), 2u);
  EXPECT_FALSE(r->metrics_per_ev);  // documented there, off by default
}

// The default /etc/mrc/mrcd.toml of the packages: valid (the unit's
// ExecStartPre --check passes), the documented defaults, one placeholder plane.
TEST_F(ConfigTest, TheInstalledDefaultIsValid) {
  auto r = load_config(MRC_SOURCE_DIR "/user/mrcd/mrcd.toml");
  ASSERT_TRUE(r) << r.error().message();
  auto ok = mrc::mrcd::validate(*r);
  EXPECT_TRUE(ok) << (ok ? "" : ok.error().message());
  mrc::mrcd::Config defaults;
  EXPECT_EQ(r->pin_dir, defaults.pin_dir);
  EXPECT_EQ(r->socket, defaults.socket);
  EXPECT_EQ(r->metrics, defaults.metrics);
  EXPECT_EQ(r->xdp_mode, defaults.xdp_mode);
  ASSERT_EQ(r->planes.size(), 1u);
  EXPECT_EQ(r->planes[0].ifname, "eth1");
  EXPECT_EQ(int(r->planes[0].port), 1);
  EXPECT_TRUE(r->planes[0].peers.empty());
}

}  // namespace
}  // namespace mrc::testing
