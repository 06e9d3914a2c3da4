// mrcctl: command-line client of mrcd, in the iproute2/bpftool style:
//
//   mrcctl [-j|-p] [-s SOCKET] OBJECT COMMAND [ARGS...]
//
// Objects: dev, port, ev-fmt, ev-profile, ev, cc-profile, probe, qp,
// monitor, stats, policy. `-j` prints the JSON result (one line, stable
// schema: Documentation/observability.md), `-p` the same pretty-printed;
// errors name the object and the reason, exit status 1 (2 for usage
// errors). Every command has --help.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ctl/ops.hpp"
#include "svc/proto.hpp"
#include "util/strings.hpp"
#include "util/unique_fd.hpp"

namespace {

using json = nlohmann::json;
namespace op = mrc::ctl::proto::op;

struct Opts {
  bool json = false;
  bool pretty = false;
  std::string socket = "/run/mrc/mrcd.sock";
};
Opts g;

// ---------------------------------------------------------------------------
// Talking to mrcd

class Conn {
 public:
  // On failure *err says why and *code is the errno that caused it.
  bool open(std::string* err, int* code) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    if (g.socket.size() >= sizeof(a.sun_path)) {
      *err = "socket path too long";
      *code = ENAMETOOLONG;
      return false;
    }
    std::strcpy(a.sun_path, g.socket.c_str());
    fd_ = mrc::UniqueFd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd_ || connect(fd_.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a))) {
      const int e = errno;  // before anything else can change it
      *err = std::string("connecting to mrcd at ") + g.socket + ": " + std::strerror(e) +
             (e == ENOENT || e == ECONNREFUSED ? " (is mrcd running?)" : "");
      *code = e;
      return false;
    }
    return true;
  }
  bool send(const json& j) {
    std::string s = j.dump() + "\n";
    size_t off = 0;
    while (off < s.size()) {
      ssize_t n = ::send(fd_.get(), s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += size_t(n);
    }
    return true;
  }
  // Next line, or nullopt when mrcd closed the connection.
  std::optional<std::string> line() {
    for (;;) {
      size_t nl = buf_.find('\n');
      if (nl != std::string::npos) {
        std::string l = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return l;
      }
      char b[65536];
      ssize_t n = recv(fd_.get(), b, sizeof(b), 0);
      if (n <= 0) return std::nullopt;
      buf_.append(b, size_t(n));
    }
  }

 private:
  mrc::UniqueFd fd_;
  std::string buf_;
};

void print_json(const json& j) {
  std::puts(j.dump(g.pretty ? 2 : -1, ' ', false, json::error_handler_t::replace).c_str());
  std::fflush(stdout);
}

int report_error(const json& err, const json& result) {
  if (g.json) {
    json out = {{"error", err}};
    if (!result.is_null()) out["result"] = result;
    print_json(out);
  } else {
    std::fprintf(stderr, "mrcctl: %s: %s: %s\n", err.value("object", "mrcd").c_str(),
                 err.value("name", "ERROR").c_str(), err.value("message", "").c_str());
  }
  return 1;
}

int local_error(const std::string& object, const std::string& msg, int code = EINVAL, int rc = 1) {
  const char* name = strerrorname_np(code);
  json e = {{"object", object}, {"errno", code}, {"name", name ? name : "ERROR"}, {"message", msg}};
  report_error(e, nullptr);
  return rc;
}

// One request; on success `*result` holds the result.
int call(const std::string& op, const json& args, json* result, json* err_out = nullptr) {
  Conn c;
  std::string err;
  int code = 0;
  if (!c.open(&err, &code)) return local_error("mrcd", err, code);
  if (!c.send({{"id", 1}, {"op", op}, {"args", args}}))
    return local_error("mrcd", "sending the request failed", EIO);
  auto l = c.line();
  if (!l) return local_error("mrcd", "mrcd closed the connection", EIO);
  json r = json::parse(*l, nullptr, false);
  if (r.is_discarded() || !r.is_object()) return local_error("mrcd", "unreadable response", EIO);
  *result = r.value("result", json());
  if (!r.value("ok", false)) {
    if (err_out) *err_out = r["error"];
    return report_error(r.value("error", json::object()), *result);
  }
  return 0;
}

// ---------------------------------------------------------------------------
// Argument parsing: a table of keywords per command.

enum class Kind { kFlag, kStr, kNum, kList, kNumList };

struct Kw {
  const char* name;
  Kind kind;
  const char* key;  // JSON key
  const char* help;
};

struct Parsed {
  json args = json::object();
  std::vector<std::string> pos;  // positional arguments
  std::map<std::string, bool> flags;
};

using mrc::util::split;

bool to_num(const std::string& s, uint64_t* out) {
  if (s.empty() || s[0] == '-') return false;
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(s.c_str(), &end, 0);
  if (*end || errno) return false;
  *out = v;
  return true;
}

// Returns an error message, or "" when parsed.
std::string parse_kw(const std::vector<std::string>& av, size_t from, const std::vector<Kw>& kws,
                     size_t max_pos, Parsed* p) {
  for (size_t i = from; i < av.size(); i++) {
    const std::string& a = av[i];
    const Kw* k = nullptr;
    for (const Kw& x : kws)
      if (a == x.name) k = &x;
    if (!k) {
      if (p->pos.size() >= max_pos) return "unexpected argument \"" + a + "\"";
      p->pos.push_back(a);
      continue;
    }
    if (k->kind == Kind::kFlag) {
      p->flags[k->name] = true;
      if (k->key && *k->key) p->args[k->key] = true;
      continue;
    }
    if (i + 1 >= av.size()) return std::string(k->name) + " needs a value";
    const std::string& v = av[++i];
    switch (k->kind) {
      case Kind::kStr:
        p->args[k->key] = v;
        break;
      case Kind::kNum: {
        uint64_t n;
        if (!to_num(v, &n)) return std::string(k->name) + " \"" + v + "\" is not a number";
        p->args[k->key] = n;
        break;
      }
      case Kind::kList: {
        json a = json::array();
        if (v != "none")
          for (const std::string& x : split(v, ',')) a.push_back(x);
        p->args[k->key] = a;
        break;
      }
      case Kind::kNumList: {
        json a = json::array();
        for (const std::string& x : split(v, ',')) {
          uint64_t n;
          if (!to_num(x, &n)) return std::string(k->name) + ": \"" + x + "\" is not a number";
          a.push_back(n);
        }
        p->args[k->key] = a;
        break;
      }
      case Kind::kFlag:
        break;
    }
  }
  return "";
}

std::string kw_help(const std::vector<Kw>& kws) {
  std::string s;
  for (const Kw& k : kws) {
    char b[160];
    std::snprintf(b, sizeof(b), "  %-28s %s\n",
                  (std::string(k.name) + (k.kind == Kind::kFlag  ? ""
                                          : k.kind == Kind::kNum ? " N"
                                                                 : " VALUE"))
                      .c_str(),
                  k.help);
    s += b;
  }
  return s;
}

// ---------------------------------------------------------------------------
// Human output

std::string str(const json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_null()) return "-";
  return j.dump();
}

void show_port(const json& p) {
  std::printf("port %-2s %-10s ifindex %-4s state %-4s (admin %s, link %s) xdp %s queues %s\n",
              str(p["port"]).c_str(), str(p["ifname"]).c_str(), str(p["ifindex"]).c_str(),
              str(p["state"]).c_str(), str(p["admin"]).c_str(), str(p["link"]).c_str(),
              str(p["xdp_mode"]).c_str(), str(p["queues"]).c_str());
}

void show_dev(const json& d) {
  const json& ev = d["ev"];
  std::printf("mrc controller (protocol %s), mrcd pid %s, generation %s, restarts %s\n",
              str(d["protocol_version"]).c_str(), str(d["mrcd_pid"]).c_str(), str(d["gen"]).c_str(),
              str(d["restarts"]).c_str());
  std::printf("  EV: %s/%s free of the pool, %s per profile, width %s bits, align %s, batch %s\n",
              str(ev["free_count"]).c_str(), str(ev["max_count"]).c_str(),
              str(ev["max_count_profile"]).c_str(), str(ev["max_width"]).c_str(),
              str(ev["count_align"]).c_str(), str(ev["op_max_entries"]).c_str());
  std::printf("      formats %s, modes %s, %s format / %s EV profiles\n",
              ev["fmt_modes"].dump().c_str(), ev["modes"].dump().c_str(),
              str(ev["max_fmt_profiles"]).c_str(), str(ev["max_profiles"]).c_str());
  std::printf("  CC: algorithms %s, %s profiles\n", d["cc"]["algorithms"].dump().c_str(),
              str(d["cc"]["max_profiles"]).c_str());
  std::printf("  optional: %s\n", d["opt"].dump().c_str());
  std::printf("  EV report queue: %s pushed, %s dropped; UDP port %s\n",
              str(d["evq"]["pushed"]).c_str(), str(d["evq"]["dropped"]).c_str(),
              str(d["udp_port"]).c_str());
  for (const json& p : d["ports"]) {
    std::printf("  ");
    show_port(p);
  }
}

void show_fmt(const json& f) {
  std::printf("ev-fmt %s: %s (requested %s) mode %s fields %s\n", str(f["id"]).c_str(),
              str(f["state"]).c_str(), str(f["requested_state"]).c_str(), str(f["mode"]).c_str(),
              f["fields"].dump().c_str());
}

void show_evs(const json& evs) {
  for (const json& e : evs) {
    std::printf("    [%4s] %-16s port %-2s wire %-10s %-11s", str(e["index"]).c_str(),
                str(e["ev"]).c_str(), str(e["port"]).c_str(), str(e["wire"]).c_str(),
                str(e["state"]).c_str());
    if (e.contains("hops")) {  // SRv6: the container and the uSID of each hop
      std::string h;
      for (const json& x : e["hops"]) h += (h.empty() ? "" : " > ") + x.get<std::string>();
      std::printf(" sid %s hops %s", str(e["sid"]).c_str(), h.c_str());
    }
    // ev show: what the applications published about the EV.
    if (e.contains("counters") && e["counters"].is_object()) {
      const json& c = e["counters"];
      auto f = [&c](const char* k) { return str(c.value(k, json())); };  // "-" if absent
      std::printf(" tx %s lost %s trims %s ecn %s rtt %s ns qps %s (bad %s)", f("tx_pkts").c_str(),
                  f("lost").c_str(), f("trims").c_str(), f("ecn").c_str(), f("rtt_last_ns").c_str(),
                  f("qps").c_str(), f("qps_bad").c_str());
    }
    std::printf("\n");
  }
}

void show_evp(const json& p) {
  std::printf(
      "ev-profile %s: %s (requested %s) mode %s fmt %s evs %s min_active %s events %s users %s\n",
      str(p["id"]).c_str(), str(p["state"]).c_str(), str(p["requested_state"]).c_str(),
      str(p["mode"]).c_str(), str(p["fmt"]).c_str(), str(p["ev_count"]).c_str(),
      str(p["min_active"]).c_str(), p["event_mask"].dump().c_str(), str(p["users"]).c_str());
  std::printf("    denied %s assumed_bad %s unpopulated %s changes %s\n", str(p["denied"]).c_str(),
              str(p["assumed_bad"]).c_str(), str(p["unpopulated"]).c_str(),
              str(p["changes"]).c_str());
  for (const json& f : p["fields"])
    std::printf("    field width %s init 0x%llx min %s max %s mask 0x%llx\n",
                str(f["width"]).c_str(), (unsigned long long)f.value("init_val", 0ull),
                str(f["min_val"]).c_str(), str(f["max_val"]).c_str(),
                (unsigned long long)f.value("mask", 0ull));
  if (p.contains("evs")) show_evs(p["evs"]);
}

void show_cc(const json& c) {
  std::printf("cc-profile %s: %s (requested %s) algorithm %s users %s\n", str(c["id"]).c_str(),
              str(c["state"]).c_str(), str(c["requested_state"]).c_str(),
              str(c["algorithm"]).c_str(), str(c["users"]).c_str());
  if (c["config"].is_object()) {
    std::printf("   ");
    for (auto it = c["config"].begin(); it != c["config"].end(); ++it)
      std::printf(" %s %s", it.key().c_str(), str(*it).c_str());
    std::printf("\n");
  }
}

void show_qp(const json& q) {
  std::printf(
      "qp %s pid %s (%s) dev %s: %s -> %s ev-profile %s cc-profile %s evs good %s skip %s bad %s "
      "denied %s%s\n",
      str(q["qpn"]).c_str(), str(q["pid"]).c_str(), str(q["comm"]).c_str(), str(q["dev"]).c_str(),
      str(q["state"]).c_str(), str(q["remote_qpn"]).c_str(), str(q["ev_profile"]).c_str(),
      str(q["cc_profile"]).c_str(), str(q["evs"]["good"]).c_str(), str(q["evs"]["skip"]).c_str(),
      str(q["evs"]["assumed_bad"]).c_str(), str(q["evs"]["denied"]).c_str(),
      q.value("alive", true) ? "" : " (process gone)");
  const json& c = q["counters"];
  std::printf(
      "    tx %s pkts %s B rtx %s, rx %s pkts %s B, timeouts %s, cwnd %s B inflight %s B srtt %s "
      "ns, %s ms ago\n",
      str(c["tx_pkts"]).c_str(), str(c["tx_bytes"]).c_str(), str(c["rtx_pkts"]).c_str(),
      str(c["rx_pkts"]).c_str(), str(c["rx_bytes"]).c_str(), str(c["timeouts"]).c_str(),
      str(c["cwnd_bytes"]).c_str(), str(c["inflight_bytes"]).c_str(), str(c["srtt_ns"]).c_str(),
      str(q["age_ms"]).c_str());
}

void show_line(const json& j) {
  const std::string t = j.value("type", "");
  if (t == "ev_event") {
    std::printf("event profile %s ev %s@%s -> %s (%s) pid %s qp %s drops %s\n",
                str(j["profile"]).c_str(), str(j["ev"]).c_str(), str(j["port"]).c_str(),
                str(j["state"]).c_str(), str(j["reason"]).c_str(), str(j["pid"]).c_str(),
                str(j["qpn"]).c_str(), str(j["drop_count"]).c_str());
  } else if (t == "decision") {
    std::printf("decision %s profile %s ev %s port %s: %s\n", str(j["action"]).c_str(),
                str(j["profile"]).c_str(), str(j["ev"]).c_str(), str(j["port"]).c_str(),
                str(j["reason"]).c_str());
  } else {
    std::puts(j.dump().c_str());
  }
  std::fflush(stdout);
}

// Prints a result as JSON (-j/-p) or through `human`.
int out(const json& r, const std::function<void(const json&)>& human) {
  if (g.json) {
    print_json(r);
  } else {
    human(r);
  }
  return 0;
}

// ---------------------------------------------------------------------------
// Commands

struct Cmd {
  const char* object;
  const char* command;
  const char* synopsis;
  const char* help;
  std::vector<Kw> kws;
  size_t max_pos;
  std::function<int(Parsed&)> run;
};

int need_id(const Parsed& p, const char* obj, uint64_t* id) {
  if (p.pos.empty() || !to_num(p.pos[0], id)) {
    local_error(obj, "a numeric profile id is needed", EINVAL, 2);
    return 2;
  }
  return 0;
}

const std::vector<Kw> kFmtKws = {
    {"state", Kind::kStr, "state", "init | offline | online"},
    {"mode", Kind::kStr, "mode", "stev | udp | srv6"},
    {"widths", Kind::kNumList, "widths", "format field widths in bits, e.g. 16,16"},
    {"online", Kind::kFlag, "", "take it ONLINE after creating it"},
};

const std::vector<Kw> kEvpKws = {
    {"state", Kind::kStr, "state", "init | offline | online"},
    {"mode", Kind::kStr, "mode", "auto | explicit | generated"},
    {"fmt", Kind::kNum, "fmt", "EV format profile id"},
    {"count", Kind::kNum, "count", "EVs in the profile"},
    {"min-active", Kind::kNum, "min_active", "ev_min_active"},
    {"events", Kind::kList, "event_mask", "good,assumed_bad (or none)"},
    {"fields", Kind::kStr, "fields", "W:INIT:MIN:MAX:MASK[,...] generation/expansion fields"},
    {"evs", Kind::kStr, "populate", "EXPLICIT: EVs to fill the array with, HEX@PORT[,...]"},
    {"online", Kind::kFlag, "", "take it ONLINE after creating it"},
};

const std::vector<Kw> kCcKws = {
    {"state", Kind::kStr, "state", "init | offline | online"},
    {"algo", Kind::kStr, "algorithm", "uet-1.0-nscc | none"},
    {"target-delay", Kind::kNum, "target_delay", "NSCC target delay, ns"},
    {"base-rtt", Kind::kNum, "base_rtt", "base RTT, ns (0 = learn it)"},
    {"max-cwnd", Kind::kNum, "max_cwnd", "maximum window, bytes"},
    {"qa-threshold", Kind::kNum, "qa_threshold", "quick adapt threshold, ns"},
    {"qa-gate", Kind::kNum, "qa_gate", "quick adapt gate"},
    {"adjust-bytes", Kind::kNum, "adjust_bytes_threshold", "bytes between adjustments"},
    {"adjust-period", Kind::kNum, "adjust_period_threshold", "ns between adjustments"},
    {"eta", Kind::kStr, "eta", "eta (float)"},
    {"fi", Kind::kStr, "fi", "fi (float)"},
    {"fi-scale", Kind::kStr, "fi_scale", "fi_scale (float)"},
    {"gamma", Kind::kStr, "gamma", "gamma (float)"},
    {"max-md-jump", Kind::kStr, "max_md_jump", "max_md_jump (float)"},
    {"no-qa", Kind::kFlag, "", "disable quick adapt"},
    {"online", Kind::kFlag, "", "take it ONLINE after creating it"},
};

// "16:256:0:15:0xf,16:512:0:15:0xf" -> fields
std::string parse_fields(const std::string& s, json* out) {
  json a = json::array();
  for (const std::string& f : split(s, ',')) {
    auto p = split(f, ':');
    if (p.size() != 5) return "field \"" + f + "\" is not WIDTH:INIT:MIN:MAX:MASK";
    uint64_t v[5];
    for (int i = 0; i < 5; i++)
      if (!to_num(p[size_t(i)], &v[i]))
        return "field \"" + f + "\": \"" + p[size_t(i)] + "\" is not a number";
    a.push_back({{"width", v[0]},
                 {"init_val", v[1]},
                 {"min_val", v[2]},
                 {"max_val", v[3]},
                 {"mask", v[4]}});
  }
  *out = a;
  return "";
}

int fmt_modify(Parsed& p, bool create) {
  uint64_t id;
  if (int rc = need_id(p, "ev-fmt", &id)) return rc;
  json a = p.args;
  a["id"] = id;
  if (create && !a.contains("state")) a["state"] = "offline";
  json r;
  if (int rc = call(op::kEvFmtModify, a, &r)) return rc;
  if (p.flags.count("online")) {
    if (int rc = call(op::kEvFmtModify, {{"id", id}, {"state", "online"}}, &r)) return rc;
  }
  return out(r, show_fmt);
}

int evp_modify(Parsed& p, bool create) {
  uint64_t id;
  if (int rc = need_id(p, "ev-profile", &id)) return rc;
  json a = p.args;
  a["id"] = id;
  if (a.contains("fields")) {
    json f;
    std::string e = parse_fields(a["fields"].get<std::string>(), &f);
    if (!e.empty()) return local_error("ev-profile " + std::to_string(id), e, EINVAL, 2);
    a["fields"] = f;
  }
  json populate;
  if (a.contains("populate")) {
    populate = json::array();
    for (const std::string& x : split(a["populate"].get<std::string>(), ',')) populate.push_back(x);
    a.erase("populate");
  }
  if (create && !a.contains("state")) a["state"] = "offline";
  json r;
  if (int rc = call(op::kEvProfileModify, a, &r)) return rc;
  if (!populate.is_null()) {
    if (int rc = call(op::kEvPopulate, {{"profile", id}, {"evs", populate}}, &r)) return rc;
  }
  if (p.flags.count("online")) {
    if (int rc = call(op::kEvProfileModify, {{"id", id}, {"state", "online"}}, &r)) return rc;
  }
  if (int rc = call(op::kEvProfileShow, {{"id", id}}, &r)) return rc;
  return out(r, show_evp);
}

int cc_modify(Parsed& p, bool create) {
  uint64_t id;
  if (int rc = need_id(p, "cc-profile", &id)) return rc;
  json a;
  a["id"] = id;
  if (p.args.contains("state")) a["state"] = p.args["state"];
  if (p.args.contains("algorithm")) a["algorithm"] = p.args["algorithm"];
  json cfg = json::object();
  for (const char* k : {"target_delay", "base_rtt", "max_cwnd", "qa_threshold", "qa_gate",
                        "adjust_bytes_threshold", "adjust_period_threshold"})
    if (p.args.contains(k)) cfg[k] = p.args[k];
  for (const char* k : {"eta", "fi", "fi_scale", "gamma", "max_md_jump"}) {
    if (!p.args.contains(k)) continue;
    char* end = nullptr;
    std::string s = p.args[k].get<std::string>();
    double v = std::strtod(s.c_str(), &end);
    if (s.empty() || *end)
      return local_error("cc-profile " + std::to_string(id), std::string(k) + " is not a number",
                         EINVAL, 2);
    cfg[k] = v;
  }
  if (p.flags.count("no-qa")) cfg["disable_qa"] = true;
  if (create) {
    if (!a.contains("state")) a["state"] = "offline";
    if (!a.contains("algorithm")) a["algorithm"] = "uet-1.0-nscc";
    if (a["algorithm"] != "none") a["config"] = cfg;
  } else if (!cfg.empty()) {
    a["config"] = cfg;
  }
  json r;
  if (int rc = call(op::kCcProfileModify, a, &r)) return rc;
  if (p.flags.count("online")) {
    if (int rc = call(op::kCcProfileModify, {{"id", id}, {"state", "online"}}, &r)) return rc;
  }
  return out(r, show_cc);
}

int show_list(const char* op, const Parsed& p, const char* obj,
              const std::function<void(const json&)>& one, json extra = json::object()) {
  json a = extra;
  if (!p.pos.empty()) {
    uint64_t id;
    if (!to_num(p.pos[0], &id))
      return local_error(obj, "\"" + p.pos[0] + "\" is not a number", EINVAL, 2);
    a["id"] = id;
  }
  json r;
  if (int rc = call(op, a, &r)) return rc;
  return out(r, [&](const json& x) {
    if (x.is_array()) {
      for (const json& e : x) one(e);
      if (x.empty()) std::printf("(none)\n");
    } else {
      one(x);
    }
  });
}

int ev_state(Parsed& p, const char* state) {
  if (p.pos.empty()) return local_error("ev", "a profile id is needed", EINVAL, 2);
  uint64_t id;
  if (!to_num(p.pos[0], &id))
    return local_error("ev", "\"" + p.pos[0] + "\" is not a profile id", EINVAL, 2);
  json a = {{"profile", id}, {"state", state}};
  json evs = json::array();
  for (size_t i = 1; i < p.pos.size(); i++) evs.push_back(p.pos[i]);
  if (p.args.contains("hop")) {
    // SRv6: every EV whose path names this uSID (a failed node or link's
    // far end), from the containers ev show decodes (optionally one port).
    // A uSID is 16 bits: 1-4 hex digits, compared as ev show prints them
    // (lower case, no leading zeros).
    std::string hop = p.args["hop"].get<std::string>();
    if (hop.empty() || hop.size() > 4 ||
        hop.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
      return local_error("ev", "hop \"" + hop + "\" is not a uSID (1-4 hex digits)", EINVAL, 2);
    for (auto& ch : hop) ch = char(std::tolower(ch));
    while (hop.size() > 1 && hop[0] == '0') hop.erase(0, 1);
    json q = {{"profile", id}}, r;
    if (p.args.contains("port")) q["port"] = p.args["port"];
    if (int rc = call(op::kEvShow, q, &r)) return rc;
    for (const json& e : r["evs"]) {
      if (!e.contains("hops")) continue;
      for (const json& h : e["hops"])
        if (h == hop) {
          evs.push_back(e["ev"].get<std::string>() + "@" + std::to_string(e["port"].get<int>()));
          break;
        }
    }
    if (evs.empty())
      return local_error("ev",
                         "no SRv6 EV of ev-profile " + std::to_string(id) + " crosses uSID " + hop,
                         ENOENT, 1);
  } else if (p.args.contains("port")) {
    a["port"] = p.args["port"];
  }
  a["evs"] = evs;
  json r;
  if (int rc = call(op::kEvSet, a, &r)) return rc;
  return out(r, [&](const json& x) {
    std::printf("%s %s EV(s) of ev-profile %llu\n",
                std::string(state) == "denied" ? "denied" : "allowed", str(x["requested"]).c_str(),
                (unsigned long long)id);
  });
}

// The device and its ports.
void dev_commands(std::vector<Cmd>& c) {
  c.push_back({"dev",
               "show",
               "dev show",
               "device attributes (mrc_ctl_query_device), ports and daemon state",
               {},
               0,
               [](Parsed&) {
                 json r;
                 if (int rc = call(op::kDevShow, json::object(), &r)) return rc;
                 return out(r, show_dev);
               }});
  c.push_back({"port",
               "show",
               "port show [N]",
               "plane ports: admin and link state, XDP mode",
               {},
               1,
               [](Parsed& p) {
                 json a = json::object();
                 if (!p.pos.empty()) {
                   uint64_t n;
                   if (!to_num(p.pos[0], &n))
                     return local_error("port", "\"" + p.pos[0] + "\" is not a port", EINVAL, 2);
                   a["port"] = n;
                 }
                 json r;
                 if (int rc = call(op::kPortShow, a, &r)) return rc;
                 return out(r, [](const json& x) {
                   for (const json& e : x) show_port(e);
                 });
               }});
  c.push_back({"port",
               "set",
               "port set N up|down",
               "administrative state (mrc_ctl_modify_port); a disabled port is reported down and "
               "carries nothing",
               {},
               2,
               [](Parsed& p) {
                 uint64_t n;
                 if (p.pos.size() != 2 || !to_num(p.pos[0], &n) ||
                     (p.pos[1] != "up" && p.pos[1] != "down"))
                   return local_error("port", "usage: mrcctl port set N up|down", EINVAL, 2);
                 json r;
                 if (int rc = call(op::kPortSet, {{"port", n}, {"admin", p.pos[1]}}, &r)) return rc;
                 return out(r, show_port);
               }});
  // EV format profiles
}

// EV format profiles and EV profiles.
void ev_profile_commands(std::vector<Cmd>& c) {
  c.push_back({"ev-fmt", "create", "ev-fmt create ID mode stev|udp widths W,W... [online]",
               "creates an EV format profile (INIT -> OFFLINE, optionally ONLINE)", kFmtKws, 1,
               [](Parsed& p) { return fmt_modify(p, true); }});
  c.push_back({"ev-fmt", "set", "ev-fmt set ID [state S] [mode M] [widths W,...]",
               "modifies an EV format profile", kFmtKws, 1,
               [](Parsed& p) { return fmt_modify(p, false); }});
  c.push_back({"ev-fmt", "show", "ev-fmt show [ID]", "EV format profiles", {}, 1, [](Parsed& p) {
                 return show_list(op::kEvFmtShow, p, "ev-fmt", show_fmt);
               }});
  c.push_back({"ev-fmt",
               "delete",
               "ev-fmt delete ID",
               "takes it to INIT and removes it",
               {},
               1,
               [](Parsed& p) {
                 uint64_t id;
                 if (int rc = need_id(p, "ev-fmt", &id)) return rc;
                 json r;
                 if (int rc = call(op::kEvFmtDelete, {{"id", id}}, &r)) return rc;
                 return out(r, [](const json& x) {
                   std::printf("ev-fmt %s deleted\n", str(x["id"]).c_str());
                 });
               }});
  // EV profiles
  c.push_back({"ev-profile", "create",
               "ev-profile create ID mode explicit|generated|auto [fmt F] [count N] [min-active M] "
               "[events LIST] "
               "[fields SPEC] [evs HEX@PORT,...] [online]",
               "creates an EV profile (INIT -> OFFLINE, optionally populated and ONLINE)", kEvpKws,
               1, [](Parsed& p) { return evp_modify(p, true); }});
  c.push_back({"ev-profile", "set",
               "ev-profile set ID [state S] [count N] [min-active M] [events LIST] [fields SPEC]",
               "modifies an EV profile", kEvpKws, 1,
               [](Parsed& p) { return evp_modify(p, false); }});
  c.push_back(
      {"ev-profile",
       "show",
       "ev-profile show [ID] [evs]",
       "EV profiles (evs: with the EV array)",
       {{"evs", Kind::kFlag, "evs", "include the EV array"}},
       1,
       [](Parsed& p) { return show_list(op::kEvProfileShow, p, "ev-profile", show_evp, p.args); }});
  c.push_back({"ev-profile",
               "delete",
               "ev-profile delete ID",
               "takes it to INIT and removes it",
               {},
               1,
               [](Parsed& p) {
                 uint64_t id;
                 if (int rc = need_id(p, "ev-profile", &id)) return rc;
                 json r;
                 if (int rc = call(op::kEvProfileDelete, {{"id", id}}, &r)) return rc;
                 return out(r, [](const json& x) {
                   std::printf("ev-profile %s deleted\n", str(x["id"]).c_str());
                 });
               }});
  // EVs
}

// The EVs of an EV profile.
void ev_commands(std::vector<Cmd>& c) {
  c.push_back({"ev",
               "show",
               "ev show PROFILE [state good|assumed_bad|denied|unpopulated] [port N]",
               "the EV array of a profile with each EV's state and the counters applications "
               "published for it",
               {{"state", Kind::kStr, "state", "only EVs in this state"},
                {"port", Kind::kNum, "port", "only EVs on this port"}},
               1,
               [](Parsed& p) {
                 uint64_t id;
                 if (p.pos.empty() || !to_num(p.pos[0], &id))
                   return local_error("ev", "a profile id is needed", EINVAL, 2);
                 json a = p.args;
                 a["profile"] = id;
                 json r;
                 if (int rc = call(op::kEvShow, a, &r)) return rc;
                 return out(r, [](const json& x) {
                   std::printf("ev-profile %s (%s):\n", str(x["profile"]).c_str(),
                               str(x["mode"]).c_str());
                   show_evs(x["evs"]);
                 });
               }});
  c.push_back(
      {"ev",
       "deny",
       "ev deny PROFILE HEX@PORT... | ev deny PROFILE port N | ev deny PROFILE hop USID [port N]",
       "sets EVs (or every EV of a port, or every SRv6 EV whose path names uSID USID) "
       "DENIED: no QP uses them",
       {{"port", Kind::kNum, "port", "every EV of this port"},
        {"hop", Kind::kStr, "hop", "SRv6: every EV whose container names this uSID (hex)"}},
       1024,
       [](Parsed& p) { return ev_state(p, "denied"); }});
  c.push_back({"ev",
               "allow",
               "ev allow PROFILE HEX@PORT... | ev allow PROFILE port N | ev allow PROFILE hop USID "
               "[port N]",
               "sets EVs GOOD again",
               {{"port", Kind::kNum, "port", "every EV of this port"},
                {"hop", Kind::kStr, "hop", "SRv6: every EV whose container names this uSID (hex)"}},
               1024,
               [](Parsed& p) { return ev_state(p, "good"); }});
  c.push_back({"ev",
               "populate",
               "ev populate PROFILE HEX@PORT...",
               "replaces UNPOPULATED entries of an EXPLICIT profile, one per EV",
               {},
               1024,
               [](Parsed& p) {
                 uint64_t id;
                 if (p.pos.size() < 2 || !to_num(p.pos[0], &id))
                   return local_error("ev", "usage: mrcctl ev populate PROFILE HEX@PORT...", EINVAL,
                                      2);
                 json evs = json::array();
                 for (size_t i = 1; i < p.pos.size(); i++) evs.push_back(p.pos[i]);
                 json r;
                 if (int rc = call(op::kEvPopulate, {{"profile", id}, {"evs", evs}}, &r)) return rc;
                 return out(r, [](const json& x) {
                   std::printf("populated %s EV(s)\n", str(x["requested"]).c_str());
                 });
               }});
  c.push_back(
      {"ev",
       "replace",
       "ev replace PROFILE OLD@PORT NEW@PORT [all] [state good|denied]",
       "REPLACE_EV: one occurrence, or every copy with `all`",
       {{"all", Kind::kFlag, "", "replace every copy (ALL_COPIES)"},
        {"state", Kind::kStr, "state", "state of the new EV"}},
       3,
       [](Parsed& p) {
         uint64_t id;
         if (p.pos.size() != 3 || !to_num(p.pos[0], &id))
           return local_error("ev", "usage: mrcctl ev replace PROFILE OLD@PORT NEW@PORT [all]",
                              EINVAL, 2);
         json e = {{"ev", p.pos[1]}, {"new", p.pos[2]}, {"all_copies", p.flags.count("all") > 0}};
         if (p.args.contains("state")) e["state"] = p.args["state"];
         json r;
         if (int rc = call(op::kEvReplace, {{"profile", id}, {"entries", json::array({e})}}, &r))
           return rc;
         return out(r, [](const json&) { std::printf("replaced\n"); });
       }});
  // CC profiles
}

// CC profiles.
void cc_profile_commands(std::vector<Cmd>& c) {
  c.push_back({"cc-profile", "create",
               "cc-profile create ID [algo uet-1.0-nscc|none] [target-delay NS] ... [online]",
               "creates a CC profile (INIT -> OFFLINE with the algorithm and its configuration)",
               kCcKws, 1, [](Parsed& p) { return cc_modify(p, true); }});
  c.push_back({"cc-profile", "set", "cc-profile set ID [state S] [algo A] [NSCC fields]",
               "modifies a CC profile", kCcKws, 1, [](Parsed& p) { return cc_modify(p, false); }});
  c.push_back({"cc-profile", "show", "cc-profile show [ID]", "CC profiles", {}, 1, [](Parsed& p) {
                 return show_list(op::kCcProfileShow, p, "cc-profile", show_cc);
               }});
  c.push_back({"cc-profile",
               "delete",
               "cc-profile delete ID",
               "takes it to INIT and removes it",
               {},
               1,
               [](Parsed& p) {
                 uint64_t id;
                 if (int rc = need_id(p, "cc-profile", &id)) return rc;
                 json r;
                 if (int rc = call(op::kCcProfileDelete, {{"id", id}}, &r)) return rc;
                 return out(r, [](const json& x) {
                   std::printf("cc-profile %s deleted\n", str(x["id"]).c_str());
                 });
               }});
  // Endpoint operations
}

// Endpoint operations.
void probe_commands(std::vector<Cmd>& c) {
  c.push_back(
      {"probe",
       "",
       "probe DST [HEX@PORT[=ADDR]...] [timeout MS] [tc DSCP] [src ADDR] [fmt stev|udp|srv6] "
       "[req-ids N,...] [port-status MASK]",
       "EV probes to DST (one per EV, =ADDR sends that one elsewhere; without EVs one per "
       "port on EV 0), "
       "RTT in ns; ETIMEDOUT with the responses that arrived",
       {{"timeout", Kind::kNum, "timeout_ms", "response timeout, ms (1000)"},
        {"tc", Kind::kNum, "tc", "DSCP of the requests (control class)"},
        {"src", Kind::kStr, "src", "source address (the port's by default)"},
        {"fmt", Kind::kStr, "fmt", "EV carriage: stev | udp | srv6"},
        {"req-ids", Kind::kNumList, "req_ids", "request ids, one per EV"},
        {"port-status", Kind::kNum, "port_status",
         "send PORT_STATUS_UPDATE with this mask instead"}},
       1024,
       [](Parsed& p) {
         if (p.pos.empty())
           return local_error("probe", "usage: mrcctl probe DST [HEX@PORT...]", EINVAL, 2);
         json a = p.args;
         a["dst"] = p.pos[0];
         json evs = json::array();
         for (size_t i = 1; i < p.pos.size(); i++) evs.push_back(p.pos[i]);
         a["evs"] = evs;
         if (a.contains("port_status")) a["op"] = "port_status";
         json r;
         int rc = call(op::kProbe, a, &r);
         auto human = [](const json& x) {
           for (const json& y : x.value("responses", json::array()))
             std::printf("req_id %-5s port %-2s ev %-10s from %s rtt %s ns%s\n",
                         str(y["req_id"]).c_str(), str(y["port"]).c_str(),
                         str(y.value("ev", json())).c_str(), str(y.value("from", json())).c_str(),
                         str(y["rtt_ns"]).c_str(),
                         y.value("adj_svc_time", false) ? " (service time removed)" : "");
           std::printf("%s of %s answered\n", str(x.value("answered", json(0))).c_str(),
                       str(x.value("sent", json(0))).c_str());
         };
         if (!rc) return out(r, human);
         if (!g.json && r.is_object() && r.contains("responses")) human(r);  // partial results
         return rc;
       }});
}

// Reports and observability: QPs, statistics, the policy, monitor.
void report_commands(std::vector<Cmd>& c) {
  c.push_back({"qp",
               "show",
               "qp show",
               "QPs applications report (state, profiles, EV states, counters)",
               {},
               0,
               [](Parsed&) {
                 json r;
                 if (int rc = call(op::kQpShow, json::object(), &r)) return rc;
                 return out(r, [](const json& x) {
                   for (const json& q : x) show_qp(q);
                   if (x.empty()) std::printf("(no QPs reported)\n");
                 });
               }});
  c.push_back(
      {"stats",
       "",
       "stats",
       "XDP counters per port, controller, prober, policy and socket counters",
       {},
       0,
       [](Parsed&) {
         json r;
         if (int rc = call(op::kStats, json::object(), &r)) return rc;
         return out(r, [](const json& x) {
           for (const json& p : x["ports"]) {
             std::printf("port %s %s:", str(p["port"]).c_str(), str(p["ifname"]).c_str());
             for (auto it = p["xdp"].begin(); it != p["xdp"].end(); ++it)
               if (it->get<uint64_t>()) std::printf(" %s %s", it.key().c_str(), str(*it).c_str());
             std::printf("\n");
           }
           for (const char* k : {"controller", "evq", "prober", "policy", "server", "daemon"}) {
             if (!x.contains(k)) continue;
             std::printf("%s:", k);
             for (auto it = x[k].begin(); it != x[k].end(); ++it)
               std::printf(" %s %s", it.key().c_str(), str(*it).c_str());
             std::printf("\n");
           }
         });
       }});
  c.push_back({"policy",
               "show",
               "policy show",
               "reroute policy counters and its recent decisions with reasons",
               {},
               0,
               [](Parsed&) {
                 json r;
                 if (int rc = call(op::kPolicyShow, json::object(), &r)) return rc;
                 return out(r, [](const json& x) {
                   std::printf("policy %s: %s\n",
                               x.value("enabled", false) ? "enabled" : "disabled",
                               x["counters"].dump().c_str());
                   for (json d : x["decisions"]) {
                     d["type"] = "decision";
                     show_line(d);
                   }
                 });
               }});
  c.push_back({"monitor",
               "",
               "monitor [events] [decisions]",
               "streams EV events (with exact drop counts) and reroute decisions until interrupted",
               {{"events", Kind::kFlag, "", "EV events only"},
                {"decisions", Kind::kFlag, "", "decisions only"}},
               0,
               [](Parsed& p) {
                 const bool only_ev = p.flags.count("events"),
                            only_dec = p.flags.count("decisions");
                 json a = {{"events", !only_dec || only_ev}, {"decisions", !only_ev || only_dec}};
                 Conn cn;
                 std::string err;
                 int code = 0;
                 if (!cn.open(&err, &code)) return local_error("mrcd", err, code);
                 cn.send({{"id", 1}, {"op", op::kMonitor}, {"args", a}});
                 auto first = cn.line();
                 if (!first) return local_error("mrcd", "mrcd closed the connection", EIO);
                 json r = json::parse(*first, nullptr, false);
                 if (r.is_discarded() || !r.value("ok", false))
                   return report_error(r.value("error", json::object()), nullptr);
                 while (auto l = cn.line()) {
                   json j = json::parse(*l, nullptr, false);
                   if (j.is_discarded()) continue;
                   if (g.json)
                     print_json(j);
                   else
                     show_line(j);
                 }
                 return 0;
               }});
}

// The host service mrc-serviced (Documentation/service.md): its OBSERVE op,
// over the service's own socket ($MRC_SERVICE_SOCKET, else
// /run/mrc/service.sock), not mrcd's.
int service_clients(Parsed&) {
  namespace svc = mrc::svc;
  const char* env = getenv("MRC_SERVICE_SOCKET");
  const std::string path = env && *env ? env : svc::kDefaultSocket;
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.size() >= sizeof a.sun_path)
    return local_error("service", "socket path too long: " + path, ENAMETOOLONG);
  std::memcpy(a.sun_path, path.data(), path.size());
  mrc::UniqueFd s(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!s || connect(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) < 0) {
    const int e = errno;
    return local_error("service", "cannot reach mrc-serviced at " + path + ": " + strerror(e), e);
  }
  json clients = json::array();
  uint32_t total = 0;
  for (uint32_t first = 0, seq = 1;; seq++) {
    svc::ObserveReq rq{first, 0};
    svc::MsgHdr h{svc::kMagic, svc::kVersion, uint16_t(svc::Op::kObserve), seq, sizeof rq, 0, 0};
    if (auto st = svc::send_msg(s.get(), h, &rq, sizeof rq, nullptr, 0); !st)
      return local_error("service", st.error().context, st.error().code);
    auto m = svc::recv_msg(s.get());
    if (!m) return local_error("service", m.error().context, m.error().code);
    if (auto st = svc::check_reply(*m, svc::Op::kObserve, seq); !st)
      return local_error("service", st.error().context, st.error().code);
    const auto* r = m->as<svc::ObserveRep>();
    total = r->total;
    for (uint32_t i = 0; i < r->count && i < svc::kObservePage; i++) {
      const svc::ObserveClient& o = r->c[i];
      clients.push_back({{"client", o.id},
                         {"pid", o.pid},
                         {"uid", o.uid},
                         {"comm", std::string(o.comm, strnlen(o.comm, sizeof o.comm))},
                         {"qps", o.qps},
                         {"cqs", o.cqs},
                         {"mrs", o.mrs},
                         {"mr_bytes", o.mr_bytes},
                         {"tx_bytes", o.tx_bytes},
                         {"rx_bytes", o.rx_bytes},
                         {"errors", o.errors}});
    }
    if (r->count == 0 || first + r->count >= total) break;
    first += r->count;
  }
  json res = {{"socket", path}, {"total", total}, {"clients", clients}};
  return out(res, [](const json& x) {
    std::printf("%-6s %-8s %-6s %-16s %4s %4s %4s %12s %14s %14s %7s\n", "CLIENT", "PID", "UID",
                "COMMAND", "QPS", "CQS", "MRS", "MR_BYTES", "TX_BYTES", "RX_BYTES", "ERRORS");
    for (const json& c : x["clients"])
      std::printf("%-6u %-8d %-6u %-16s %4u %4u %4u %12llu %14llu %14llu %7llu\n",
                  c["client"].get<unsigned>(), c["pid"].get<int>(), c["uid"].get<unsigned>(),
                  c["comm"].get<std::string>().c_str(), c["qps"].get<unsigned>(),
                  c["cqs"].get<unsigned>(), c["mrs"].get<unsigned>(),
                  c["mr_bytes"].get<unsigned long long>(), c["tx_bytes"].get<unsigned long long>(),
                  c["rx_bytes"].get<unsigned long long>(), c["errors"].get<unsigned long long>());
  });
}

std::vector<Cmd> commands() {
  std::vector<Cmd> c;
  dev_commands(c);
  c.push_back({"service",
               "clients",
               "service clients",
               "mrc-serviced's clients: pid, uid, command, QPs, CQs, regions, bytes, errors "
               "(socket: $MRC_SERVICE_SOCKET, else /run/mrc/service.sock)",
               {},
               0,
               service_clients});
  ev_profile_commands(c);
  ev_commands(c);
  cc_profile_commands(c);
  probe_commands(c);
  report_commands(c);
  return c;
}

void usage_all(FILE* f, const std::vector<Cmd>& cmds) {
  std::fprintf(f,
               "Usage: mrcctl [-j|-p] [-s SOCKET] OBJECT COMMAND [ARGS]\n"
               "       mrcctl OBJECT [COMMAND] --help\n"
               "  -j, --json     JSON output (one line)\n"
               "  -p, --pretty   pretty-printed JSON\n"
               "  -s, --socket   mrcd's control socket (/run/mrc/mrcd.sock, or $MRCD_SOCKET)\n"
               "Commands:\n");
  for (const Cmd& c : cmds) std::fprintf(f, "  mrcctl %s\n", c.synopsis);
  std::fprintf(
      f, "EVs are written HEX@PORT: the EV's bytes in hex, left-aligned (a4@1, 0001c123@2).\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> av(argv + 1, argv + argc);
  if (const char* s = getenv("MRCD_SOCKET")) g.socket = s;
  size_t i = 0;
  for (; i < av.size(); i++) {
    const std::string& a = av[i];
    if (a == "-j" || a == "--json") {
      g.json = true;
    } else if (a == "-p" || a == "--pretty") {
      g.json = g.pretty = true;
    } else if ((a == "-s" || a == "--socket") && i + 1 < av.size()) {
      g.socket = av[++i];
    } else if (a == "-h" || a == "--help" || a == "help") {
      usage_all(stdout, commands());
      return 0;
    } else if (a == "-V" || a == "--version") {
      std::printf("mrcctl %s\n", MRC_VERSION);
      return 0;
    } else {
      break;
    }
  }
  auto cmds = commands();
  if (i >= av.size()) {
    usage_all(stderr, cmds);
    return 2;
  }
  // Objects and commands may be shortened to any unique prefix, as ip(8)
  // and bpftool(8) accept them ("mrcctl dev sh").
  auto resolve = [](const std::string& word, const std::vector<std::string>& names,
                    std::string* out) -> std::string {
    std::vector<std::string> hits;
    for (const std::string& n : names) {
      if (n == word) {
        *out = n;
        return "";
      }
      if (!word.empty() && n.compare(0, word.size(), word) == 0 &&
          std::find(hits.begin(), hits.end(), n) == hits.end())
        hits.push_back(n);
    }
    if (hits.size() == 1) *out = hits[0];
    if (hits.size() <= 1) return "";
    std::string all;
    for (const std::string& h : hits) all += (all.empty() ? "" : ", ") + h;
    return "\"" + word + "\" is ambiguous: " + all;
  };
  std::vector<std::string> objects;
  for (const Cmd& c : cmds) objects.push_back(c.object);
  std::string object = av[i++];
  if (std::string why = resolve(object, objects, &object); !why.empty()) {
    std::fprintf(stderr, "mrcctl: %s\n", why.c_str());
    return 2;
  }
  std::string command = i < av.size() ? av[i] : "";
  if (!command.empty() && command[0] != '-') {
    std::vector<std::string> names;
    for (const Cmd& c : cmds)
      if (object == c.object && c.command[0]) names.push_back(c.command);
    if (std::string why = resolve(command, names, &command); !why.empty()) {
      std::fprintf(stderr, "mrcctl: %s: %s\n", object.c_str(), why.c_str());
      return 2;
    }
    if (i < av.size()) av[i] = command;
  }
  const bool want_help = std::find(av.begin() + long(i), av.end(), "--help") != av.end() ||
                         std::find(av.begin() + long(i), av.end(), "-h") != av.end();
  const Cmd* found = nullptr;
  bool object_known = false;
  for (const Cmd& c : cmds) {
    if (object != c.object) continue;
    object_known = true;
    if (c.command[0] == '\0' || command == c.command) {
      found = &c;
      break;
    }
  }
  if (!object_known) {
    std::fprintf(stderr, "mrcctl: unknown object \"%s\"\n", object.c_str());
    usage_all(stderr, cmds);
    return 2;
  }
  if (!found) {
    if (want_help || command.empty() || command == "help") {
      // "mrcctl OBJECT" of an object without a default command: its help.
      std::printf("Usage:\n");
      for (const Cmd& c : cmds)
        if (object == c.object) std::printf("  mrcctl %s\n      %s\n", c.synopsis, c.help);
      return 0;
    }
    // "show" is the default command of most objects.
    std::fprintf(stderr, "mrcctl: %s: unknown command \"%s\" (mrcctl %s --help)\n", object.c_str(),
                 command.c_str(), object.c_str());
    return 2;
  }
  if (found->command[0] != '\0') i++;
  if (want_help) {
    std::printf("Usage: mrcctl %s\n  %s\n", found->synopsis, found->help);
    if (!found->kws.empty()) std::printf("Arguments:\n%s", kw_help(found->kws).c_str());
    return 0;
  }
  Parsed p;
  std::string err = parse_kw(av, i, found->kws, found->max_pos, &p);
  if (!err.empty()) {
    local_error(object, err + " (mrcctl " + object + " " + found->command + " --help)", EINVAL);
    return 2;
  }
  return found->run(p);
}
