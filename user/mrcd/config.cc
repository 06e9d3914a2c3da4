#include "mrcd/config.hpp"

#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <set>

#include "ctl/proto.hpp"
#include "mrc/uapi/maps.h"
#include "util/toml_reader.hpp"

namespace mrc::mrcd {

namespace {

using config::Reader;

// An array of addresses (mrcd's probe peers).
Status ips(Reader& r, const toml::table& t, const char* key, const std::string& where,
           std::vector<codec::IpAddr>* out) {
  r.known(key);
  const toml::node* n = t.get(key);
  if (!n) return ok_status();
  const toml::array* a = n->as_array();
  if (!a) return Error(EINVAL, r.at(*n) + where + key + " must be an array of addresses");
  for (const toml::node& e : *a) {
    auto s = e.value<std::string>();
    codec::IpAddr ip;
    if (!s || !ctl::proto::parse_ip(*s, &ip))
      return Error(EINVAL, r.at(e) + where + key + ": \"" + (s ? *s : "?") +
                               "\" is not an IPv4 or IPv6 address");
    out->push_back(ip);
  }
  return ok_status();
}

Status check_mode(const std::string& m, const std::string& where) {
  if (m == "auto" || m == "native" || m == "generic") return ok_status();
  return Error(EINVAL, where + "xdp mode \"" + m + "\" is not auto, native or generic");
}

Status check_level(const std::string& l, const std::string& where) {
  if (l == "error" || l == "warn" || l == "info" || l == "debug") return ok_status();
  return Error(EINVAL, where + "log_level \"" + l + "\" is not error, warn, info or debug");
}

}  // namespace

Status validate(const Config& c) {
  if (c.planes.empty())
    return Error(EINVAL, "no planes configured (a [[plane]] table or --plane IF:PORT)");
  std::set<std::string> names;
  std::set<int> ports;
  for (const PlaneCfg& p : c.planes) {
    if (p.ifname.empty() || p.ifname.size() >= 16)
      return Error(EINVAL, "plane interface name \"" + p.ifname + "\" is invalid");
    if (p.port == 0 || p.port >= MRC_MAX_PORTS)
      return Error(EINVAL, "plane " + p.ifname + ": port " + std::to_string(p.port) +
                               " is not in 1.." + std::to_string(MRC_MAX_PORTS - 1));
    if (!names.insert(p.ifname).second)
      return Error(EINVAL, "plane " + p.ifname + " is configured twice");
    if (!ports.insert(p.port).second)
      return Error(EINVAL, "port " + std::to_string(p.port) + " is configured twice");
    if (p.queues == 0 || p.queues > MRC_XSK_QUEUES_PER_PORT)
      return Error(EINVAL, "plane " + p.ifname + ": queues must be 1.." +
                               std::to_string(MRC_XSK_QUEUES_PER_PORT));
  }
  if (c.pin_dir.empty() || c.pin_dir[0] != '/')
    return Error(EINVAL, "pin_dir must be an absolute path");
  if (c.socket.empty() || c.socket[0] != '/')
    return Error(EINVAL, "socket must be an absolute path");
  MRC_TRY(check_mode(c.xdp_mode, ""));
  MRC_TRY(check_level(c.log_level, ""));
  if (c.udp_port == 0) return Error(EINVAL, "udp_port must be 1..65535");
  if (c.tick_ms == 0) return Error(EINVAL, "tick_ms must be at least 1");
  return ok_status();
}

Result<Config> load_config(const std::string& path) {
  Config c;
  c.path = path;
  auto parsed = config::parse_file(path);
  if (!parsed) return std::move(parsed).error();
  const toml::table& root = *parsed;
  Reader top(path, root, "");
  auto section = [&](const char* name) -> const toml::table* {
    const toml::node* n = root.get(name);
    return n ? n->as_table() : nullptr;
  };
  MRC_TRY(config::tables_only(path, root, {"daemon", "xdp", "dscp", "probe", "policy"}));

  if (const toml::table* t = section("daemon")) {
    Reader r(path, *t, "daemon.");
    MRC_TRY(r.str("pin_dir", &c.pin_dir));
    MRC_TRY(r.str("socket", &c.socket));
    MRC_TRY(r.str("socket_group", &c.socket_group));
    MRC_TRY(r.str("metrics", &c.metrics));
    MRC_TRY(r.boolean("metrics_per_ev", &c.metrics_per_ev));
    MRC_TRY(r.str("log_level", &c.log_level));
    MRC_TRY(r.boolean("keep_on_exit", &c.keep_on_exit));
    MRC_TRY(r.integer("tick_ms", &c.tick_ms, 1, 10000));
    MRC_TRY(r.done());
    if (const toml::node* n = t->get("log_level")) MRC_TRY(check_level(c.log_level, r.at(*n)));
  }
  if (const toml::table* t = section("xdp")) {
    Reader r(path, *t, "xdp.");
    MRC_TRY(r.str("mode", &c.xdp_mode));
    MRC_TRY(r.integer("udp_port", &c.udp_port, 1, 65535));
    MRC_TRY(r.boolean("trim_nack", &c.xdp_trim_nack));
    MRC_TRY(r.boolean("ep_probe", &c.xdp_ep_probe));
    MRC_TRY(r.boolean("reload", &c.reload_xdp));
    MRC_TRY(r.done());
    if (const toml::node* n = t->get("mode")) MRC_TRY(check_mode(c.xdp_mode, r.at(*n)));
  }
  if (const toml::table* t = section("dscp")) {
    Reader r(path, *t, "dscp.");
    MRC_TRY(r.integer("control", &c.dscp.control, 0, 63));
    MRC_TRY(r.integer("trimmable", &c.dscp.trimmable, 0, 63));
    MRC_TRY(r.integer("trimmable_retx", &c.dscp.trimmable_retx, 0, 63));
    MRC_TRY(r.integer("no_trim", &c.dscp.no_trim, 0, 63));
    MRC_TRY(r.integer("trimmed", &c.dscp.trimmed, 0, 63));
    MRC_TRY(r.integer("trimmed_lasthop", &c.dscp.trimmed_lasthop, 0, 63));
    MRC_TRY(r.done());
  }
  if (const toml::table* t = section("probe")) {
    Reader r(path, *t, "probe.");
    MRC_TRY(r.integer("interval_ms", &c.probe.interval_ms, 0, 3600000));
    MRC_TRY(r.integer("timeout_ms", &c.probe.timeout_ms, 1, 60000));
    MRC_TRY(r.integer("evs_per_plane", &c.probe.evs_per_plane, 1, 64));
    MRC_TRY(r.integer("dscp", &c.probe.dscp, 0, 63));
    MRC_TRY(r.done());
  }
  if (const toml::table* t = section("policy")) {
    Reader r(path, *t, "policy.");
    PolicyCfg& p = c.policy;
    MRC_TRY(r.boolean("enabled", &p.enabled));
    MRC_TRY(r.integer("interval_ms", &p.interval_ms, 10, 3600000));
    MRC_TRY(r.number("loss_threshold", &p.loss_threshold, 0.0, 1.0));
    MRC_TRY(r.number("trim_threshold", &p.trim_threshold, 0.0, 1.0));
    MRC_TRY(r.number("rtt_factor", &p.rtt_factor, 1.0, 1000.0));
    MRC_TRY(r.integer("min_packets", &p.min_packets, 1, 1000000000));
    MRC_TRY(r.integer("bad_intervals", &p.bad_intervals, 1, 1000));
    MRC_TRY(r.integer("bad_hold_ms", &p.bad_hold_ms, 0, 3600000));
    MRC_TRY(r.integer("restore_probes", &p.restore_probes, 1, 1000));
    MRC_TRY(r.integer("plane_fail_rounds", &p.plane_fail_rounds, 1, 1000));
    MRC_TRY(r.integer("plane_restore_rounds", &p.plane_restore_rounds, 1, 1000));
    MRC_TRY(r.number("max_denied_fraction", &p.max_denied_fraction, 0.0, 1.0));
    MRC_TRY(r.integer("restore_backoff_ms", &p.restore_backoff_ms, 0, 3600000));
    MRC_TRY(r.number("probe_loss_threshold", &p.probe_loss_threshold, 0.0, 1.0));
    MRC_TRY(r.integer("probe_loss_window", &p.probe_loss_window, 1, 64));
    MRC_TRY(r.done());
  }
  if (const toml::node* n = root.get("plane")) {
    const toml::array* a = n->as_array();
    if (!a) return Error(EINVAL, top.at(*n) + "plane must be an array of tables ([[plane]])");
    for (const toml::node& e : *a) {
      const toml::table* t = e.as_table();
      if (!t) return Error(EINVAL, top.at(e) + "each [[plane]] must be a table");
      Reader r(path, *t, "plane.");
      PlaneCfg p;
      MRC_TRY(r.str("ifname", &p.ifname));
      MRC_TRY(r.integer("port", &p.port, 1, MRC_MAX_PORTS - 1));
      MRC_TRY(r.integer("queues", &p.queues, 1, MRC_XSK_QUEUES_PER_PORT));
      MRC_TRY(ips(r, *t, "peers", "plane.", &p.peers));
      MRC_TRY(r.done());
      if (p.ifname.empty()) return Error(EINVAL, r.at_table() + "[[plane]] needs ifname");
      if (!p.port)
        return Error(EINVAL, r.at_table() + "[[plane]] " + p.ifname + " needs port (1.." +
                                 std::to_string(MRC_MAX_PORTS - 1) + ")");
      for (const PlaneCfg& o : c.planes) {
        if (o.ifname == p.ifname)
          return Error(EINVAL, r.at_table() + "plane " + p.ifname + " is configured twice");
        if (o.port == p.port)
          return Error(EINVAL, r.at_table() + "port " + std::to_string(p.port) + " is used by " +
                                   o.ifname + " already");
      }
      c.planes.push_back(p);
    }
  }
  // Unknown top-level keys.
  for (const auto& [k, v] : root) {
    std::string key(k.str());
    static const std::set<std::string> known = {"daemon", "xdp",    "dscp",
                                                "probe",  "policy", "plane"};
    if (!known.count(key)) return Error(EINVAL, top.at(v) + "unknown section or key " + key);
  }
  return c;
}

std::string usage() {
  return "Usage: mrcd [OPTIONS]\n"
         "The MRC controller daemon: loads mrc_xdp on the plane interfaces, owns the\n"
         "controller state pinned under the pin directory, serves mrcctl, probes EVs\n"
         "and applies the reroute policy. Documentation/controller.md.\n"
         "\n"
         "  -c, --config FILE      TOML configuration (see mrcd.toml.sample)\n"
         "      --plane IF:PORT[:Q]\n"
         "                         a plane interface and its port number (repeatable;\n"
         "                         replaces the file's [[plane]] list), Q rx queues\n"
         "      --peer IF=ADDR     a probe target reachable on plane IF (repeatable)\n"
         "      --pin-dir DIR      bpffs directory of the pinned maps (/sys/fs/bpf/mrc)\n"
         "      --socket PATH      control socket (/run/mrc/mrcd.sock)\n"
         "      --socket-group G   group allowed to connect (mode 0660)\n"
         "      --metrics ADDR     Prometheus endpoint host:port, \"\" to disable\n"
         "      --metrics-per-ev   also export per-EV series (one per EV and port)\n"
         "      --udp-port N       MRC UDP destination port (4791)\n"
         "      --xdp-mode M       auto | native | generic\n"
         "      --reload-xdp       replace an mrc_xdp that is already attached\n"
         "      --cleanup          on exit detach XDP and remove the pins\n"
         "      --no-policy        do not deny or allow EVs automatically\n"
         "      --probe-interval MS  policy probe cadence (0 = off)\n"
         "      --tick MS          housekeeping period (100)\n"
         "      --log-level L      error | warn | info | debug\n"
         "      --check            validate the configuration and exit\n"
         "  -h, --help             this text\n"
         "  -V, --version          version\n";
}

Result<Options> parse_args(int argc, char** argv) {
  Options o;
  std::vector<std::string> args(argv + 1, argv + argc);
  // The file first, flags override it.
  for (size_t i = 0; i < args.size(); i++) {
    if ((args[i] == "-c" || args[i] == "--config") && i + 1 < args.size()) {
      auto c = load_config(args[i + 1]);
      if (!c) return std::move(c).error();
      o.cfg = std::move(*c);
    } else if (args[i].rfind("--config=", 0) == 0) {
      auto c = load_config(args[i].substr(9));
      if (!c) return std::move(c).error();
      o.cfg = std::move(*c);
    }
  }
  Config& c = o.cfg;
  bool planes_from_flags = false;
  std::vector<std::pair<std::string, codec::IpAddr>> peers;
  auto need = [&](size_t& i, const std::string& opt) -> Result<std::string> {
    if (i + 1 >= args.size()) return Error(EINVAL, opt + " needs a value");
    return args[++i];
  };
  auto num = [](const std::string& s, const std::string& opt, uint64_t max) -> Result<uint64_t> {
    char* end = nullptr;
    errno = 0;
    unsigned long long v = std::strtoull(s.c_str(), &end, 10);
    if (s.empty() || *end || errno || v > max || s[0] == '-')
      return Error(EINVAL, opt + ": \"" + s + "\" is not a number in 0.." + std::to_string(max));
    return uint64_t(v);
  };
  for (size_t i = 0; i < args.size(); i++) {
    std::string a = args[i];
    std::string val;
    bool inline_val = false;
    if (a.rfind("--", 0) == 0 && a.find('=') != std::string::npos) {
      val = a.substr(a.find('=') + 1);
      a = a.substr(0, a.find('='));
      inline_val = true;
    }
    auto value = [&]() -> Result<std::string> {
      if (inline_val) return val;
      return need(i, a);
    };
#define MRCD_VAL()                       \
  auto v_ = value();                     \
  if (!v_) return std::move(v_).error(); \
  const std::string& v = *v_
    if (a == "-h" || a == "--help") {
      o.help = true;
    } else if (a == "-V" || a == "--version") {
      o.version = true;
    } else if (a == "-c" || a == "--config") {
      MRCD_VAL();
      (void)v;
    } else if (a == "--plane") {
      MRCD_VAL();
      if (!planes_from_flags) c.planes.clear();
      planes_from_flags = true;
      PlaneCfg p;
      size_t c1 = v.find(':');
      if (c1 == std::string::npos)
        return Error(EINVAL, "--plane " + v + ": expected IF:PORT[:QUEUES]");
      p.ifname = v.substr(0, c1);
      std::string rest = v.substr(c1 + 1);
      size_t c2 = rest.find(':');
      auto port = num(rest.substr(0, c2), "--plane " + v, MRC_MAX_PORTS - 1);
      if (!port) return std::move(port).error();
      p.port = uint8_t(*port);
      if (c2 != std::string::npos) {
        auto q = num(rest.substr(c2 + 1), "--plane " + v, MRC_XSK_QUEUES_PER_PORT);
        if (!q) return std::move(q).error();
        p.queues = uint32_t(*q);
      }
      c.planes.push_back(p);
    } else if (a == "--peer") {
      MRCD_VAL();
      size_t eq = v.find('=');
      codec::IpAddr ip;
      if (eq == std::string::npos || !ctl::proto::parse_ip(v.substr(eq + 1), &ip))
        return Error(EINVAL, "--peer " + v + ": expected IF=ADDRESS");
      peers.push_back({v.substr(0, eq), ip});
    } else if (a == "--pin-dir") {
      MRCD_VAL();
      c.pin_dir = v;
    } else if (a == "--socket") {
      MRCD_VAL();
      c.socket = v;
    } else if (a == "--socket-group") {
      MRCD_VAL();
      c.socket_group = v;
    } else if (a == "--metrics") {
      MRCD_VAL();
      c.metrics = v;
    } else if (a == "--udp-port") {
      MRCD_VAL();
      auto n = num(v, a, 65535);
      if (!n) return std::move(n).error();
      c.udp_port = uint16_t(*n);
    } else if (a == "--xdp-mode") {
      MRCD_VAL();
      MRC_TRY(check_mode(v, "--xdp-mode: "));
      c.xdp_mode = v;
    } else if (a == "--metrics-per-ev") {
      c.metrics_per_ev = true;
    } else if (a == "--reload-xdp") {
      c.reload_xdp = true;
    } else if (a == "--cleanup") {
      c.keep_on_exit = false;
    } else if (a == "--no-policy") {
      c.policy.enabled = false;
    } else if (a == "--probe-interval") {
      MRCD_VAL();
      auto n = num(v, a, 3600000);
      if (!n) return std::move(n).error();
      c.probe.interval_ms = uint32_t(*n);
    } else if (a == "--tick") {
      MRCD_VAL();
      auto n = num(v, a, 10000);
      if (!n) return std::move(n).error();
      c.tick_ms = uint32_t(*n);
    } else if (a == "--log-level") {
      MRCD_VAL();
      MRC_TRY(check_level(v, "--log-level: "));
      c.log_level = v;
    } else if (a == "--check") {
      o.check_only = true;
    } else {
      return Error(EINVAL, "unknown option " + a + " (mrcd --help)");
    }
#undef MRCD_VAL
  }
  for (const auto& [ifname, ip] : peers) {
    bool found = false;
    for (PlaneCfg& p : c.planes)
      if (p.ifname == ifname) p.peers.push_back(ip), found = true;
    if (!found) return Error(EINVAL, "--peer " + ifname + "=...: no plane " + ifname);
  }
  return o;
}

}  // namespace mrc::mrcd
