#include "svc/config.hpp"

#include <grp.h>
#include <sys/stat.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <set>

#include "core/engine_keys.hpp"
#include "util/toml_reader.hpp"

namespace mrc::svc {

namespace {

using config::Reader;

Status parse_tx(const std::string& t, TxBackend* out, const std::string& where) {
  if (t == "xsk")
    *out = TxBackend::kXsk;
  else if (t == "live")
    *out = TxBackend::kLive;
  else if (t == "auto")
    *out = TxBackend::kAuto;
  else
    return Error(EINVAL, where + "tx \"" + t + "\" is not xsk, live or auto");
  return ok_status();
}

Status parse_group(const std::string& g, gid_t* out, const std::string& where) {
  const group* gr = getgrnam(g.c_str());
  if (!gr) return Error(EINVAL, where + "no group " + g);
  *out = gr->gr_gid;
  return ok_status();
}

Status split_interfaces(const std::string& ifs, std::vector<std::string>* out) {
  out->clear();
  size_t p = 0;
  while (p <= ifs.size()) {
    const size_t q = std::min(ifs.find(',', p), ifs.size());
    if (q == p) return Error(EINVAL, "empty interface name in " + ifs);
    out->push_back(ifs.substr(p, q - p));
    p = q + 1;
  }
  return ok_status();
}

}  // namespace

Status load_config(const std::string& path, ServerOptions* o) {
  auto parsed = config::parse_file(path);
  if (!parsed) return std::move(parsed).error();
  const toml::table& root = *parsed;
  MRC_TRY(config::tables_only(path, root, {"service", "device", "engine", "limits"}));
  for (const auto& [k, v] : root) {
    static const std::set<std::string> known = {"service", "device", "engine", "limits"};
    if (!known.count(std::string(k.str())))
      return Error(EINVAL, path + ":" + std::to_string(v.source().begin.line) +
                               ": unknown section or key " + std::string(k.str()));
  }
  auto section = [&](const char* name) -> const toml::table* {
    const toml::node* n = root.get(name);
    return n ? n->as_table() : nullptr;
  };
  if (const toml::table* t = section("service")) {
    Reader r(path, *t, "service.");
    MRC_TRY(r.str("socket", &o->socket_path));
    MRC_TRY(r.integer("socket_mode", &o->socket_mode, 0, 07777));
    std::string g;
    bool has_group = false;
    MRC_TRY(r.str("group", &g, &has_group));
    if (has_group) MRC_TRY(parse_group(g, &o->socket_group, r.at(*t->get("group"))));
    MRC_TRY(r.str("metrics", &o->metrics));
    MRC_TRY(r.integer("tomb_linger_ms", &o->tomb_linger_ms, 0, 600000));
    MRC_TRY(r.integer("max_tombstones", &o->dev.engine.max_tombstones, 0, 65536));
    r.known("interfaces");
    if (const toml::node* n = t->get("interfaces")) {
      const toml::array* a = n->as_array();
      if (!a) return Error(EINVAL, r.at(*n) + "service.interfaces must be an array of names");
      o->dev.interfaces.clear();
      for (const toml::node& e : *a) {
        auto s = e.value<std::string>();
        if (!s || s->empty() || s->size() >= 16)
          return Error(EINVAL, r.at(e) + "service.interfaces: each must be an interface name");
        o->dev.interfaces.push_back(*s);
      }
    }
    MRC_TRY(r.done());
    if (o->socket_path.empty() || o->socket_path[0] != '/')
      return Error(EINVAL, r.at(*t->get("socket")) + "service.socket must be an absolute path");
  }
  if (const toml::table* t = section("device")) {
    Reader r(path, *t, "device.");
    MRC_TRY(r.boolean("use_mrcd", &o->dev.use_mrcd));
    MRC_TRY(r.str("pin_dir", &o->dev.pin_dir));
    MRC_TRY(r.boolean("generic", &o->dev.force_generic));
    MRC_TRY(r.integer("queues", &o->dev.queues, 0, 1024));
    std::string tx;
    bool has_tx = false;
    MRC_TRY(r.str("tx", &tx, &has_tx));
    if (has_tx) MRC_TRY(parse_tx(tx, &o->dev.tx, r.at(*t->get("tx")) + "device."));
    MRC_TRY(r.integer("udp_port", &o->dev.udp_port, 1, 65535));
    MRC_TRY(r.done());
  }
  if (const toml::table* t = section("engine")) {
    Reader r(path, *t, "engine.");
    MRC_TRY(r.integer("cpu", &o->dev.engine_cpu, -1, 4095));
    std::string sched;
    bool has_sched = false;
    MRC_TRY(r.str("sched", &sched, &has_sched));
    if (has_sched) {
      auto m = parse_engine_sched(sched);
      if (!m) return Error(EINVAL, r.at(*t->get("sched")) + "engine.sched: " + m.error().context);
      o->dev.engine_sched = *m;
    }
    MRC_TRY(r.integer("nice", &o->dev.engine_nice, -20, 19));
    MRC_TRY(r.integer("idle_spin_us", &o->dev.idle_spin_us, 0, 1000000));
    MRC_TRY(r.integer("coalesce_us", &o->dev.engine_coalesce_us, 0, 1000));
    MRC_TRY(r.done());
  }
  if (const toml::table* t = section("limits")) {
    Reader r(path, *t, "limits.");
    ServerOptions::LimitNames& n = o->limit_names;
    const std::string src = path + " [limits] ";
    bool f = false;
    MRC_TRY(r.integer("clients", &o->max_clients, 0, 100000, &f));
    if (f) n.clients = src + "clients";
    MRC_TRY(r.integer("clients_per_uid", &o->max_clients_per_uid, 0, 100000, &f));
    if (f) n.clients_per_uid = src + "clients_per_uid";
    uint64_t mib = 0;
    MRC_TRY(r.integer("area_mib", &mib, 1, 4096, &f));
    if (f) o->area_bytes = mib << 20, n.area = src + "area_mib";
    MRC_TRY(r.integer("qps", &o->max_qps, 0, 1 << 20, &f));
    if (f) n.qps = src + "qps";
    MRC_TRY(r.integer("cqs", &o->max_cqs, 0, 1 << 20, &f));
    if (f) n.cqs = src + "cqs";
    MRC_TRY(r.integer("mrs", &o->max_mrs, 0, 1 << 20, &f));
    if (f) n.mrs = src + "mrs";
    MRC_TRY(r.integer("mr_mib", &mib, 0, 1 << 24, &f));
    if (f) o->max_mr_bytes = mib << 20, n.mr_bytes = src + "mr_mib";
    MRC_TRY(r.integer("wr", &o->max_wr, 1, 65536, &f));
    if (f) n.wr = src + "wr";
    MRC_TRY(r.integer("cqe", &o->max_cqe, 1, 1 << 22, &f));
    if (f) n.cqe = src + "cqe";
    MRC_TRY(r.done());
  }
  return ok_status();
}

std::string usage() {
  return std::string(
             "usage: mrc-serviced [options] [IF[,IF...]]\n"
             "Serves the plane interfaces IF... (port 1 first) to every libmrc process on this "
             "host\n"
             "(Documentation/service.md). Runs as root; clients need only access to the socket.\n"
             "Options override the configuration file; IF... overrides its interfaces.\n"
             "  --config FILE      configuration file (default ") +
         kDefaultConfig +
         " when it exists;\n"
         "                     mrc-serviced.toml.sample lists every key)\n"
         "  --no-config        read no file, not even the default one\n"
         "  --check            check the configuration and exit (0: good)\n"
         "  --socket PATH      control socket (default $MRC_SERVICE_SOCKET, else " +
         kDefaultSocket +
         ")\n"
         "  --socket-mode OCT  permissions of the socket file (default 0660)\n"
         "  --group NAME       group of the socket file (default: root's)\n"
         "  --metrics ADDR     Prometheus endpoint host:port (GET /metrics; default: none)\n"
         "  --no-mrcd          load our own mrc_xdp even when mrcd's pinned maps exist\n"
         "  --pin-dir DIR      mrcd's bpffs directory (default /sys/fs/bpf/mrc)\n"
         "  --generic          attach XDP in generic (SKB) mode\n"
         "  --queues N         rx queues per interface with a socket (default all)\n"
         "  --tx xsk|live|auto TX backend (default xsk)\n"
         "  --udp-port N       MRC's UDP port (default 4791)\n"
         "  --max-clients N    processes served at once (default 64)\n"
         "  --area-mib N       shared area per process, MiB (default 64)\n"
         "  --max-qps N        QPs per process (default 1024)\n"
         "  --max-cqs N        CQs per process (default 1024)\n"
         "  --max-mrs N        memory regions per process (default 4096)\n"
         "  --max-mr-mib N     registered MiB per process (default 0: no limit)\n"
         "  --max-wr N         work requests per queue of a QP (default 8192, at most 65536)\n"
         "  --max-cqe N        entries per CQ (default 1048576, at most 4194304)\n"
         "  --max-clients-per-uid N  processes of one uid served at once (default 0: no limit)\n"
         "  --cpu N            pin the engine thread to CPU N\n"
         "  --sched MODE       engine thread scheduling (Documentation/service.md section 6):\n"
         "                     nice (default: SCHED_OTHER at nice -10, for hosts whose\n"
         "                     applications keep every CPU busy), normal (the service's\n"
         "                     nice), fifo (SCHED_FIFO 1 while serving bursts, nice -10\n"
         "                     after 1 ms of work without a sleep), dedicated (needs --cpu:\n"
         "                     pinned, never sleeps); default: $MRC_ENGINE_SCHED, else nice\n"
         "  --nice N           the engine thread's nice value in nice, fifo, dedicated (-10)\n"
         "  --idle-spin-us N   engine thread: keep polling N us before sleeping\n"
         "  --coalesce-us N    engine thread: in a transfer, wait N us between passes\n"
         "                     instead of waking per packet batch (0..1000; 0: off)\n"
         "  --tomb-linger-ms N a departed process's QPs stay N ms as tombstones that refuse\n"
         "                     their peers' requests, so the peers fail at once (default 5000,\n"
         "                     0: destroyed at once)\n"
         "  --max-tombstones N tombstones at once, all processes; beyond, the oldest goes\n"
         "                     early (default 1024)\n"
         "  --engine K=V       a protocol tunable of the engine (repeatable; the keys of\n"
         "                     mrc_perf --engine, e.g. cc_qa=0); a restart changes it\n";
}

namespace {

// A whole number from 0 to max, nothing around it. Digits first: strtoull
// alone takes leading blanks and a sign ("-1" wraps). Decimal, 0x hex or 0
// octal.
Result<uint64_t> num(const std::string& opt, const std::string& v, uint64_t max) {
  char* end = nullptr;
  errno = 0;
  const bool digit = !v.empty() && v[0] >= '0' && v[0] <= '9';
  const unsigned long long n = digit ? std::strtoull(v.c_str(), &end, 0) : 0;
  if (!digit || *end || errno || n > max)
    return Error(EINVAL, "bad value for " + opt + ": '" + v + "' (a number from 0 to " +
                             std::to_string(max) + ")");
  return uint64_t(n);
}

// --engine KEY=VALUE: a protocol tunable of the engine (core/engine_keys.hpp,
// mrc_perf's --engine), set in e; for a restart (a reload does not re-read it).
Status parse_engine_kv(const std::string& v, core::EngineConfig* e) {
  const size_t eq = v.find('=');
  const core::EngineKey* ek =
      eq == std::string::npos ? nullptr : core::find_engine_key(v.substr(0, eq));
  if (!ek) {
    std::string keys;
    for (const core::EngineKey& k : core::engine_keys())
      keys += std::string(keys.empty() ? "" : ", ") + k.name;
    return Error(EINVAL,
                 "bad value for --engine: '" + v + "' (KEY=VALUE, KEY one of: " + keys + ")");
  }
  auto n = num("--engine " + v.substr(0, eq), v.substr(eq + 1), ek->max);
  if (!n) return n.error();
  ek->set(*e, *n);
  return ok_status();
}

// --nice N: a whole number in -20..19, nothing around it.
Status parse_nice(const std::string& v, int* out) {
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || std::isspace(static_cast<unsigned char>(v[0])) || *end || errno || n < -20 ||
      n > 19)
    return Error(EINVAL, "--nice takes -20..19, not " + v);
  *out = int(n);
  return {};
}

}  // namespace

Result<ServicedArgs> parse_args(const std::vector<std::string>& args,
                                const std::string& default_config) {
  ServicedArgs r;
  ServerOptions& o = r.opts;
  if (const char* e = std::getenv("MRC_SERVICE_SOCKET"); e && *e) o.socket_path = e;
  // The file first: --config FILE, else the default when it exists.
  bool no_config = false;
  for (size_t i = 0; i < args.size(); i++) {
    if (args[i] == "--config") {
      if (i + 1 >= args.size()) return Error(EINVAL, "--config needs a value");
      r.config = args[++i];
    } else if (args[i] == "--no-config") {
      no_config = true;
    }
  }
  if (no_config) {
    r.config.clear();
  } else if (r.config.empty()) {
    struct stat st;
    if (!default_config.empty() && stat(default_config.c_str(), &st) == 0)
      r.config = default_config;
  }
  if (!r.config.empty()) MRC_TRY(load_config(r.config, &o));

  std::string ifs;
  for (size_t i = 0; i < args.size(); i++) {
    const std::string& a = args[i];
    std::string v;
    auto val = [&]() -> Status {
      if (i + 1 >= args.size()) return Error(EINVAL, a + " needs a value");
      v = args[++i];
      return ok_status();
    };
#define SVC_NUM(field, max, T)  \
  do {                          \
    MRC_TRY(val());             \
    auto n_ = num(a, v, max);   \
    if (!n_) return n_.error(); \
    field = T(*n_);             \
  } while (0)
    if (a == "-h" || a == "--help") {
      r.help = true;
    } else if (a == "--config") {
      i++;  // read above
    } else if (a == "--no-config") {
    } else if (a == "--check") {
      r.check = true;
    } else if (a == "--socket") {
      MRC_TRY(val());
      o.socket_path = v;
    } else if (a == "--socket-mode") {
      SVC_NUM(o.socket_mode, 07777, uint32_t);
    } else if (a == "--group") {
      MRC_TRY(val());
      MRC_TRY(parse_group(v, &o.socket_group, "--group: "));
    } else if (a == "--metrics") {
      MRC_TRY(val());
      o.metrics = v;
    } else if (a == "--no-mrcd") {
      o.dev.use_mrcd = false;
    } else if (a == "--pin-dir") {
      MRC_TRY(val());
      o.dev.pin_dir = v;
    } else if (a == "--generic") {
      o.dev.force_generic = true;
    } else if (a == "--queues") {
      SVC_NUM(o.dev.queues, 1024, uint32_t);
    } else if (a == "--tx") {
      MRC_TRY(val());
      if (!parse_tx(v, &o.dev.tx, ""))
        return Error(EINVAL, "--tx takes xsk, live or auto, not \"" + v + "\"");
    } else if (a == "--udp-port") {
      SVC_NUM(o.dev.udp_port, 65535, uint16_t);
    } else if (a == "--max-clients") {
      SVC_NUM(o.max_clients, 100000, uint32_t);
      o.limit_names.clients = a;
    } else if (a == "--max-qps") {
      SVC_NUM(o.max_qps, 1u << 20, uint32_t);
      o.limit_names.qps = a;
    } else if (a == "--max-cqs") {
      SVC_NUM(o.max_cqs, 1u << 20, uint32_t);
      o.limit_names.cqs = a;
    } else if (a == "--max-mrs") {
      SVC_NUM(o.max_mrs, 1u << 20, uint32_t);
      o.limit_names.mrs = a;
    } else if (a == "--max-mr-mib") {
      SVC_NUM(o.max_mr_bytes, 1u << 24, uint64_t);
      o.max_mr_bytes <<= 20;
      o.limit_names.mr_bytes = a;
    } else if (a == "--max-wr") {
      SVC_NUM(o.max_wr, 65536, uint32_t);
      if (!o.max_wr) return Error(EINVAL, "--max-wr must be at least 1");
      o.limit_names.wr = a;
    } else if (a == "--max-cqe") {
      SVC_NUM(o.max_cqe, 1u << 22, uint32_t);
      if (!o.max_cqe) return Error(EINVAL, "--max-cqe must be at least 1");
      o.limit_names.cqe = a;
    } else if (a == "--max-clients-per-uid") {
      SVC_NUM(o.max_clients_per_uid, 100000, uint32_t);
      o.limit_names.clients_per_uid = a;
    } else if (a == "--area-mib") {
      SVC_NUM(o.area_bytes, 4096, uint64_t);
      if (o.area_bytes < 1) return Error(EINVAL, "--area-mib must be at least 1");
      o.area_bytes <<= 20;
      o.limit_names.area = a;
    } else if (a == "--cpu") {
      SVC_NUM(o.dev.engine_cpu, 4095, int);
    } else if (a == "--sched") {
      MRC_TRY(val());
      auto m = parse_engine_sched(v);
      if (!m) return Error(EINVAL, "--sched: " + m.error().context);
      o.dev.engine_sched = *m;
    } else if (a == "--nice") {
      MRC_TRY(val());
      MRC_TRY(parse_nice(v, &o.dev.engine_nice));
    } else if (a == "--idle-spin-us") {
      SVC_NUM(o.dev.idle_spin_us, 1000000, uint32_t);
    } else if (a == "--coalesce-us") {
      SVC_NUM(o.dev.engine_coalesce_us, 1000, uint32_t);
    } else if (a == "--tomb-linger-ms") {
      SVC_NUM(o.tomb_linger_ms, 600000, uint32_t);
    } else if (a == "--max-tombstones") {
      SVC_NUM(o.dev.engine.max_tombstones, 65536, uint32_t);
    } else if (a == "--engine") {
      MRC_TRY(val());
      MRC_TRY(parse_engine_kv(v, &o.dev.engine));
    } else if (!a.empty() && a[0] == '-') {
      return Error(EINVAL, "unknown option " + a);
    } else if (ifs.empty()) {
      ifs = a;
    } else {
      return Error(EINVAL, "one interface list (IF,IF,...), got a second: " + a);
    }
#undef SVC_NUM
  }
  if (!ifs.empty()) MRC_TRY(split_interfaces(ifs, &o.dev.interfaces));
  if (o.dev.interfaces.empty() && !r.help)
    return Error(EINVAL, "no plane interfaces given (IF,IF,... or [service] interfaces)");
  return r;
}

namespace {

// A setting at member path M of ServerOptions (e.g. dev.engine_nice):
// restart-only, reloadable, or a reloadable limit with its source
// limit_names.N.
#define SVC_RESTART(key, M)                                                                        \
  Setting {                                                                                        \
    key, false, [](const ServerOptions& a, const ServerOptions& b) { return a.M != b.M; }, nullptr \
  }
#define SVC_RELOAD(key, M)                                                                \
  Setting {                                                                               \
    key, true, [](const ServerOptions& a, const ServerOptions& b) { return a.M != b.M; }, \
        [](ServerOptions& to, const ServerOptions& from) { to.M = from.M; }               \
  }
#define SVC_LIMIT(key, M, N)                                       \
  Setting {                                                        \
    key, true,                                                     \
        [](const ServerOptions& a, const ServerOptions& b) {       \
          return a.M != b.M || a.limit_names.N != b.limit_names.N; \
        },                                                         \
        [](ServerOptions& to, const ServerOptions& from) {         \
          to.M = from.M;                                           \
          to.limit_names.N = from.limit_names.N;                   \
        }                                                          \
  }
const Setting kSettings[] = {
    SVC_RESTART("service.socket", socket_path),
    SVC_RESTART("service.socket_mode", socket_mode),
    SVC_RESTART("service.group", socket_group),
    SVC_RESTART("service.metrics", metrics),
    SVC_RESTART("service.interfaces", dev.interfaces),
    SVC_RELOAD("service.tomb_linger_ms", tomb_linger_ms),
    SVC_RESTART("service.max_tombstones", dev.engine.max_tombstones),
    SVC_RESTART("device.use_mrcd", dev.use_mrcd),
    SVC_RESTART("device.pin_dir", dev.pin_dir),
    SVC_RESTART("device.generic", dev.force_generic),
    SVC_RESTART("device.queues", dev.queues),
    SVC_RESTART("device.tx", dev.tx),
    SVC_RESTART("device.udp_port", dev.udp_port),
    SVC_RESTART("engine.cpu", dev.engine_cpu),
    SVC_RESTART("engine.sched", dev.engine_sched),
    SVC_RESTART("engine.nice", dev.engine_nice),
    SVC_RESTART("engine.idle_spin_us", dev.idle_spin_us),
    SVC_RESTART("engine.coalesce_us", dev.engine_coalesce_us),
    SVC_LIMIT("limits.clients", max_clients, clients),
    SVC_LIMIT("limits.clients_per_uid", max_clients_per_uid, clients_per_uid),
    SVC_LIMIT("limits.area_mib", area_bytes, area),
    SVC_LIMIT("limits.qps", max_qps, qps),
    SVC_LIMIT("limits.cqs", max_cqs, cqs),
    SVC_LIMIT("limits.mrs", max_mrs, mrs),
    SVC_LIMIT("limits.mr_mib", max_mr_bytes, mr_bytes),
    SVC_LIMIT("limits.wr", max_wr, wr),
    SVC_LIMIT("limits.cqe", max_cqe, cqe),
};
#undef SVC_RESTART
#undef SVC_RELOAD
#undef SVC_LIMIT

}  // namespace

std::span<const Setting> settings() { return kSettings; }

std::vector<std::string> restart_only_changes(const ServerOptions& was, const ServerOptions& now) {
  std::vector<std::string> out;
  for (const Setting& s : kSettings)
    if (!s.reloadable && s.changed(was, now)) out.push_back(s.key);
  return out;
}

void apply_reloadable(ServerOptions& live, const ServerOptions& next) {
  for (const Setting& s : kSettings)
    if (s.reloadable) s.take(live, next);
}

}  // namespace mrc::svc
