// mrc-serviced's configuration (user/svc/config.cc): a bad file fails
// naming the file, line and reason, one case per kind of error; options
// override the file and name themselves in the limits' sentences; the
// shipped files are valid.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>

#include "svc/config.hpp"

namespace mrc::testing {
namespace {

using mrc::svc::load_config;
using mrc::svc::parse_args;
using mrc::svc::ServerOptions;

class SvcConfigTest : public ::testing::Test {
 protected:
  std::string write(const std::string& text) {
    path = "/tmp/svc-config-test." + std::to_string(getpid()) + ".toml";
    std::ofstream(path) << text;
    return path;
  }
  void TearDown() override {
    if (!path.empty()) unlink(path.c_str());
  }
  std::string path;
};

TEST_F(SvcConfigTest, GoodFileSetsEveryKey) {
  ServerOptions o;
  ASSERT_TRUE(load_config(write("[service]\n"
                                "interfaces = [\"p1\", \"p2\"]\n"
                                "socket = \"/run/x.sock\"\n"
                                "socket_mode = 0o600\n"
                                "metrics = \"127.0.0.1:0\"\n"
                                "[device]\n"
                                "use_mrcd = false\n"
                                "pin_dir = \"/sys/fs/bpf/y\"\n"
                                "generic = true\n"
                                "queues = 2\n"
                                "tx = \"live\"\n"
                                "udp_port = 4792\n"
                                "[engine]\n"
                                "cpu = 1\n"
                                "sched = \"fifo\"\n"
                                "nice = -5\n"
                                "idle_spin_us = 20\n"
                                "coalesce_us = 30\n"
                                "[limits]\n"
                                "clients = 8\n"
                                "clients_per_uid = 2\n"
                                "area_mib = 16\n"
                                "qps = 3\n"
                                "cqs = 4\n"
                                "mrs = 5\n"
                                "mr_mib = 6\n"
                                "wr = 512\n"
                                "cqe = 4096\n"),
                          &o)
                  .ok());
  EXPECT_EQ(o.dev.interfaces, (std::vector<std::string>{"p1", "p2"}));
  EXPECT_EQ(o.socket_path, "/run/x.sock");
  EXPECT_EQ(o.socket_mode, 0600u);
  EXPECT_EQ(o.metrics, "127.0.0.1:0");
  EXPECT_FALSE(o.dev.use_mrcd);
  EXPECT_EQ(o.dev.pin_dir, "/sys/fs/bpf/y");
  EXPECT_TRUE(o.dev.force_generic);
  EXPECT_EQ(o.dev.queues, 2u);
  EXPECT_EQ(o.dev.tx, TxBackend::kLive);
  EXPECT_EQ(o.dev.udp_port, 4792);
  EXPECT_EQ(o.dev.engine_cpu, 1);
  EXPECT_EQ(o.dev.engine_sched, EngineSched::kFifo);
  EXPECT_EQ(o.dev.engine_nice, -5);
  EXPECT_EQ(o.dev.idle_spin_us, 20u);
  EXPECT_EQ(o.dev.engine_coalesce_us, 30u);
  EXPECT_EQ(o.max_clients, 8u);
  EXPECT_EQ(o.max_clients_per_uid, 2u);
  EXPECT_EQ(o.area_bytes, 16ull << 20);
  EXPECT_EQ(o.max_qps, 3u);
  EXPECT_EQ(o.max_cqs, 4u);
  EXPECT_EQ(o.max_mrs, 5u);
  EXPECT_EQ(o.max_mr_bytes, 6ull << 20);
  EXPECT_EQ(o.max_wr, 512u);
  EXPECT_EQ(o.max_cqe, 4096u);
  EXPECT_EQ(o.limit_names.wr, path + " [limits] wr");
  EXPECT_EQ(o.limit_names.qps, path + " [limits] qps");
  EXPECT_EQ(o.limit_names.mr_bytes, path + " [limits] mr_mib");
  EXPECT_EQ(o.limit_names.clients_per_uid, path + " [limits] clients_per_uid");
}

TEST_F(SvcConfigTest, BadFilesNameFileLineAndReason) {
  struct Case {
    const char* text;
    const char* want;
  } cases[] = {
      // syntax
      {"[limits]\nqps = \n", ":2:"},
      {"x = [\n", ":1:"},
      // unknown section, unknown key
      {"[limit]\nqps = 1\n", ":1: unknown section or key limit"},
      {"[limits]\nqps = 1\nqp = 2\n", ":3: unknown key limits.qp"},
      {"[engine]\nspin = 1\n", ":2: unknown key engine.spin"},
      // a section that is not a table
      {"limits = 3\n", ":1: [limits] must be a table"},
      // wrong type
      {"[limits]\nqps = \"many\"\n", ":2: limits.qps must be an integer in 0..1048576"},
      {"[device]\ngeneric = 1\n", ":2: device.generic must be true or false"},
      {"[service]\nsocket = 5\n", ":2: service.socket must be a string"},
      {"[service]\ninterfaces = \"eth1\"\n", ":2: service.interfaces must be an array"},
      {"[service]\ninterfaces = [\"\"]\n", ":2: service.interfaces: each must be"},
      // out of range
      {"[limits]\nqps = -1\n", ":2: limits.qps = -1 is outside 0..1048576"},
      {"[limits]\n\narea_mib = 0\n", ":3: limits.area_mib = 0 is outside 1..4096"},
      {"[engine]\nnice = 20\n", ":2: engine.nice = 20 is outside -20..19"},
      {"[engine]\ncoalesce_us = 1001\n", ":2: engine.coalesce_us = 1001 is outside 0..1000"},
      {"[limits]\nwr = 0\n", ":2: limits.wr = 0 is outside 1..65536"},
      {"[device]\nudp_port = 0\n", ":2: device.udp_port = 0 is outside 1..65535"},
      // a value that is not one of the words
      {"[device]\ntx = \"fast\"\n", ":2: device.tx \"fast\" is not xsk, live or auto"},
      {"[engine]\nsched = \"rt\"\n", ":2: engine.sched:"},
      {"[service]\ngroup = \"no-such-group-mrc\"\n", ":2: no group no-such-group-mrc"},
      {"[service]\nsocket = \"run/x\"\n", ":2: service.socket must be an absolute path"},
  };
  for (const Case& c : cases) {
    ServerOptions o;
    auto r = load_config(write(c.text), &o);
    ASSERT_FALSE(r.ok()) << c.text;
    const std::string msg = r.error().message();
    EXPECT_EQ(msg.rfind(path + ":", 0), 0u) << msg;
    EXPECT_NE(msg.find(c.want), std::string::npos) << "want \"" << c.want << "\" in: " << msg;
  }
  ServerOptions o;
  auto missing = load_config("/nonexistent/mrc-serviced.toml", &o);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message().find("/nonexistent/mrc-serviced.toml"), std::string::npos);
}

TEST_F(SvcConfigTest, OptionsOverrideTheFile) {
  write("[service]\ninterfaces = [\"f1\"]\n[limits]\nqps = 3\ncqs = 4\n");
  auto r = parse_args({"--config", path, "--max-qps", "7", "p1,p2"}, "");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->config, path);
  EXPECT_EQ(r->opts.max_qps, 7u);
  EXPECT_EQ(r->opts.limit_names.qps, "--max-qps");
  EXPECT_EQ(r->opts.max_cqs, 4u);
  EXPECT_EQ(r->opts.limit_names.cqs, path + " [limits] cqs");
  EXPECT_EQ(r->opts.dev.interfaces, (std::vector<std::string>{"p1", "p2"}));
  // The file's interfaces when the command line has none; the option before
  // --config still overrides it.
  r = parse_args({"--max-cqs", "9", "--config", path}, "");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->opts.dev.interfaces, (std::vector<std::string>{"f1"}));
  EXPECT_EQ(r->opts.max_cqs, 9u);
  EXPECT_EQ(r->opts.max_qps, 3u);
}

TEST_F(SvcConfigTest, DefaultFileOnlyWhenPresent) {
  write("[limits]\nmrs = 11\n");
  auto r = parse_args({"eth1"}, path);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->config, path);
  EXPECT_EQ(r->opts.max_mrs, 11u);
  r = parse_args({"--no-config", "eth1"}, path);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->config, "");
  EXPECT_EQ(r->opts.max_mrs, 4096u);
  r = parse_args({"eth1"}, "/nonexistent/mrc-serviced.toml");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->config, "");
  // An explicit file that is missing is an error.
  EXPECT_FALSE(parse_args({"--config", "/nonexistent/x.toml", "eth1"}, "").ok());
}

// --engine KEY=VALUE: the tools' engine tunables (core/engine_keys.hpp), each
// checked against its key's range; unknown keys and malformed pairs refused.
TEST_F(SvcConfigTest, EngineTunables) {
  auto r = parse_args({"--engine", "cc_qa=0", "--engine", "probe_max_us=2500", "p1"}, "");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_TRUE(r->opts.dev.engine.default_cc.nscc.disable_qa);
  EXPECT_EQ(r->opts.dev.engine.paths.probe_max, 2'500'000u);
  auto d = parse_args({"p1"}, "");
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->opts.dev.engine.default_cc.nscc.disable_qa);
  // The service shares NSCC's base RTT per peer (fair shares between its
  // clients), the in-process engine does not; the option turns it off.
  EXPECT_TRUE(d->opts.dev.engine.cc_share_base_rtt);
  EXPECT_FALSE(EngineConfig{}.cc_share_base_rtt);
  auto off = parse_args({"--engine", "cc_share_base_rtt=0", "p1"}, "");
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->opts.dev.engine.cc_share_base_rtt);
  for (const char* bad :
       {"cc_qa=2", "cc_qa", "=1", "bogus=1", "cc_qa=-1", "cc_qa= 1", "cc_qa=1x",
        "cc_share_base_rtt=2", "cc_share_base_rtt=-1", "cc_qa_standing=2", "cc_qa_floor_us=-5",
        "cc_qa_floor_us=99999999999999999999", "cc_qa_floor_us=3600000001"}) {
    auto b = parse_args({"--engine", bad, "p1"}, "");
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_NE(b.error().message().find("--engine"), std::string::npos) << b.error().message();
  }
  EXPECT_FALSE(parse_args({"p1", "--engine"}, "").ok());
}

TEST_F(SvcConfigTest, BadOptions) {
  EXPECT_FALSE(parse_args({"--max-qps", "-1", "eth1"}, "").ok());
  EXPECT_FALSE(parse_args({"--bogus", "eth1"}, "").ok());
  EXPECT_FALSE(parse_args({"--tx", "fast", "eth1"}, "").ok());
  EXPECT_FALSE(parse_args({"--coalesce-us", "1001", "eth1"}, "").ok());
  auto co = parse_args({"--coalesce-us", "25", "eth1"}, "");
  ASSERT_TRUE(co.ok()) << co.error().message();
  EXPECT_EQ(co->opts.dev.engine_coalesce_us, 25u);
  EXPECT_FALSE(parse_args({"--max-qps"}, "").ok());
  auto r = parse_args({"--max-qps", "2"}, "");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("no plane interfaces"), std::string::npos);
  EXPECT_FALSE(parse_args({"a,,b"}, "").ok());
}

// A reload (SIGHUP) takes the limits and tomb_linger_ms; every other key of
// the file changed is named as waiting for a restart, each by its own name.
// Every key of the shipped sample, as "section.key" with the line it is on
// (commented-out ones too, e.g. "# interfaces = ...").
std::vector<std::pair<std::string, size_t>> sample_keys(const std::vector<std::string>& lines) {
  static const std::regex section(R"(^\[([a-z_]+)\])");
  static const std::regex key(R"(^#?\s*([a-z_][a-z0-9_]*)\s*=)");
  std::vector<std::pair<std::string, size_t>> out;
  std::string sec;
  for (size_t i = 0; i < lines.size(); i++) {
    std::smatch m;
    if (std::regex_search(lines[i], m, section))
      sec = m[1];
    else if (!sec.empty() && std::regex_search(lines[i], m, key))
      out.emplace_back(sec + "." + std::string(m[1]), i);
  }
  return out;
}

// The table of settings (config.hpp) against the shipped sample: for each of
// its keys changed alone, some rule of the table sees the change, and either
// restart_only_changes names exactly that key, or apply_reloadable takes it
// (no rule sees a difference afterwards). Both lists must be complete: a key
// of the sample without a value here, or a value for no key, fails.
TEST_F(SvcConfigTest, ReloadTableCoversEveryKeyOfTheSample) {
  // A value other than the sample's (the defaults) for every key.
  const std::map<std::string, std::string> changed = {{"service.interfaces", R"(["p1", "p2"])"},
                                                      {"service.socket", R"("/run/other.sock")"},
                                                      {"service.socket_mode", "0o600"},
                                                      {"service.group", R"("root")"},
                                                      {"service.metrics", R"("127.0.0.1:9")"},
                                                      {"service.tomb_linger_ms", "9"},
                                                      {"service.max_tombstones", "7"},
                                                      {"device.use_mrcd", "false"},
                                                      {"device.pin_dir", R"("/sys/fs/bpf/z")"},
                                                      {"device.generic", "true"},
                                                      {"device.queues", "2"},
                                                      {"device.tx", R"("live")"},
                                                      {"device.udp_port", "4792"},
                                                      {"engine.cpu", "1"},
                                                      {"engine.sched", R"("fifo")"},
                                                      {"engine.nice", "-3"},
                                                      {"engine.idle_spin_us", "9"},
                                                      {"engine.coalesce_us", "40"},
                                                      {"limits.clients", "2"},
                                                      {"limits.clients_per_uid", "3"},
                                                      {"limits.area_mib", "8"},
                                                      {"limits.qps", "5"},
                                                      {"limits.cqs", "6"},
                                                      {"limits.mrs", "7"},
                                                      {"limits.mr_mib", "9"},
                                                      {"limits.wr", "64"},
                                                      {"limits.cqe", "128"}};
  std::vector<std::string> lines;
  {
    std::ifstream in(MRC_SOURCE_DIR "/user/svc/mrc-serviced.toml.sample");
    ASSERT_TRUE(in.good());
    for (std::string l; std::getline(in, l);) lines.push_back(l);
  }
  const auto keys = sample_keys(lines);
  std::set<std::string> in_sample;
  for (const auto& [k, line] : keys) in_sample.insert(k);
  ASSERT_GE(keys.size(), 26u);  // the sample's 26 keys at least
  for (const auto& [k, v] : changed)
    EXPECT_TRUE(in_sample.count(k)) << "a value for " << k << ", which is in no line of the sample";
  std::set<std::string> in_table;
  for (const mrc::svc::Setting& s : mrc::svc::settings()) {
    in_table.insert(s.key);
    EXPECT_TRUE(in_sample.count(s.key)) << "the table's " << s.key << " is not in the sample";
    EXPECT_EQ(s.take != nullptr, s.reloadable) << s.key;
  }
  // The text of the sample with line i replaced (or uncommented) by k = v;
  // the base has its interfaces, which the service needs.
  size_t if_line = lines.size();
  for (const auto& [k, line] : keys)
    if (k == "service.interfaces") if_line = line;
  ASSERT_LT(if_line, lines.size());
  auto text = [&](size_t at, const std::string& k, const std::string& v) {
    std::string t;
    for (size_t i = 0; i < lines.size(); i++) {
      if (i == at)
        t += k.substr(k.find('.') + 1) + " = " + v + "\n";
      else if (i == if_line)
        t += "interfaces = [\"p1\"]\n";
      else
        t += lines[i] + "\n";
    }
    return t;
  };
  auto base = parse_args({"--config", write(text(lines.size(), "", ""))}, "");
  ASSERT_TRUE(base.ok()) << base.error().message();
  size_t restart_only = 0;
  for (const auto& [k, line] : keys) {
    auto v = changed.find(k);
    if (v == changed.end()) {
      ADD_FAILURE() << "no changed value in this test for the sample's " << k;
      continue;
    }
    const std::string t = text(line, k, v->second);
    auto now = parse_args({"--config", write(t)}, "");
    ASSERT_TRUE(now.ok()) << t << now.error().message();
    auto seen = [&](const ServerOptions& a) {
      std::vector<std::string> out;
      for (const mrc::svc::Setting& s : mrc::svc::settings())
        if (s.changed(a, now->opts)) out.push_back(s.key);
      return out;
    };
    EXPECT_EQ(seen(base->opts), std::vector<std::string>{k})
        << k << " changed alone: the rules that see a change";
    const auto later = mrc::svc::restart_only_changes(base->opts, now->opts);
    ServerOptions live = base->opts;
    mrc::svc::apply_reloadable(live, now->opts);
    if (later.empty()) {
      EXPECT_TRUE(seen(live).empty()) << k << ": a reload did not take it";
    } else {
      restart_only++;
      EXPECT_EQ(later, std::vector<std::string>{k});
      EXPECT_EQ(seen(live), std::vector<std::string>{k}) << k << ": a reload took it";
    }
  }
  EXPECT_EQ(restart_only, 17u);
  EXPECT_EQ(in_table, in_sample);
  // The same file at another path: only the limits' sources differ (each
  // names its file), and a reload takes them with the limits.
  const std::string other = path + ".moved";
  std::ofstream(other) << text(lines.size(), "", "");
  auto moved = parse_args({"--config", other}, "");
  unlink(other.c_str());
  ASSERT_TRUE(moved.ok()) << moved.error().message();
  std::vector<std::string> sources, left;
  ServerOptions live = base->opts;
  mrc::svc::apply_reloadable(live, moved->opts);
  for (const mrc::svc::Setting& s : mrc::svc::settings()) {
    if (s.changed(base->opts, moved->opts)) sources.push_back(s.key);
    if (s.changed(live, moved->opts)) left.push_back(s.key);
  }
  EXPECT_EQ(sources,
            (std::vector<std::string>{"limits.clients", "limits.clients_per_uid", "limits.area_mib",
                                      "limits.qps", "limits.cqs", "limits.mrs", "limits.mr_mib",
                                      "limits.wr", "limits.cqe"}));
  EXPECT_TRUE(left.empty()) << "a reload did not take the source of " << left.front();
  EXPECT_EQ(live.limit_names.qps, other + " [limits] qps");
}

TEST_F(SvcConfigTest, ShippedFilesAreValid) {
  for (const char* f : {MRC_SOURCE_DIR "/user/svc/mrc-serviced.toml.sample",
                        MRC_SOURCE_DIR "/user/svc/mrc-serviced.toml"}) {
    ServerOptions o;
    auto r = load_config(f, &o);
    EXPECT_TRUE(r.ok()) << f << ": " << r.error().message();
    EXPECT_EQ(o.max_qps, 1024u) << f;
    EXPECT_EQ(o.max_mrs, 4096u) << f;
    EXPECT_EQ(o.area_bytes, 64ull << 20) << f;
    EXPECT_EQ(o.max_wr, 8192u) << f;
    EXPECT_EQ(o.max_cqe, 1u << 20) << f;
  }
}

}  // namespace
}  // namespace mrc::testing
