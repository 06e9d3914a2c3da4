// mrc_fault: attach, configure, clear, show and detach the fabric's fault
// injection program (mrc_fault.bpf.c) by link name from a fabric state file.
// Documentation/fabric.md, "Fault injection", describes every option.
#include <linux/if_link.h>
#include <linux/magic.h>
#include <net/if.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fabric_util.hpp"
#include "mrc/uapi/wire.h"
#include "mrc_fault.h"
#include "mrc_fault.skel.h"

namespace mrc::fabric {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr uint32_t kTcHandle = 0x4d52;  // "MR"
constexpr uint32_t kTcPriority = 1;

const char* const kStatNames[MRC_FAULT_ST_MAX] = {
    "seen",   "unmatched", "passed",     "dropped", "blackholed", "trimmed", "overrate_dropped",
    "marked", "corrupted", "duplicated", "flapped",
};

const char* kUsage = R"(usage: mrc_fault [--state FILE] [--bpffs DIR] [--json] [-v] COMMAND ...

  set TARGET [WHERE] FAULTS...  attach if needed, replace the configuration; prints
                                the attachments (JSON), each with updated_mono_ns:
                                CLOCK_MONOTONIC when its new configuration was in place
  clear TARGET [WHERE]          pass everything (attachment and counters kept);
                                --json: the attachments with updated_mono_ns
  reset TARGET [WHERE]          zero the counters
  show [TARGET|--all] [WHERE]   configuration and counters (--json: JSON)
  detach TARGET|--all [WHERE]   remove the program and its pins

TARGET   a link name of the state file (shell glob ok, e.g. 'p*-l1-s0'),
         or NODE:IFNAME / NAMESPACE:IFNAME for any port
WHERE    --dir fwd|rev|both   link direction: fwd = a->b (default), rev = b->a
         --hook auto|egress|ingress  auto (default): the link's fault point
                              from the state file, which sees AF_XDP and XDP
                              traffic too; egress: of the sending end;
                              ingress: of the receiving end
FAULTS   --blackhole
         --loss P           P: 20%, 0.5%, 1500ppm (random, per packet)
         --trim-rate R      R: 100mbit, 1gbit, 10mbps (bytes/s), ...; MRC data
                            beyond R is cut to its headers, other packets dropped
         --trim-burst B     bucket depth in bytes (default 16 KB)
         --trim-dscp N      DSCP of trimmed headers (default 47)
         --ecn-rate R [--ecn-burst B]  ECT packets beyond R are marked CE
         --corrupt P        flip a payload byte (MRC: the last before the ICRC)
         --dup P            send a copy (bpf_clone_redirect)
         --flap T[/D]       drop everything for D (default T/2) of every period T
                            (T, D: 20ms, 500us, 1s), down first, from the update;
                            one phase for every attachment of the command; the
                            carrier stays up (a link flapping faster than
                            `ip link set` can)
         --match-proto udp|tcp|icmp|N  --match-ipver 4|6
         --match-sport N  --match-dport N   limit the faults to these packets
         --match-sport-mask M  with it, --match-sport N matches every source
                            port with (port & M) == N (a set of MRC EVs)
         --mrc-port N       UDP port of MRC (default 4791)
         --reset            also zero the counters
)";

void libbpf_quiet() {
  libbpf_set_print([](enum libbpf_print_level lvl, const char* fmt, va_list ap) -> int {
    if (lvl == LIBBPF_WARN && std::getenv("MRC_FAULT_VERBOSE")) return vfprintf(stderr, fmt, ap);
    return 0;
  });
}

struct Attachment {
  std::string link;  // empty for a NODE:IFNAME target
  std::string dir;   // fwd / rev / ""
  std::string node, ns, ifname;
  bool ingress = false;
  std::string pin_dir;
};

Result<uint64_t> parse_rate(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || v < 0) return make_error(EINVAL, "bad rate '" + s + "'");
  std::string u(end);
  for (auto& c : u) c = char(std::tolower(c));
  double bits;
  if (u == "bit" || u.empty())
    bits = v;
  else if (u == "kbit")
    bits = v * 1e3;
  else if (u == "mbit")
    bits = v * 1e6;
  else if (u == "gbit")
    bits = v * 1e9;
  else if (u == "bps")
    bits = v * 8;
  else if (u == "kbps")
    bits = v * 8e3;
  else if (u == "mbps")
    bits = v * 8e6;
  else if (u == "gbps")
    bits = v * 8e9;
  else
    return make_error(
        EINVAL, "bad rate unit in '" + s + "' (bit, kbit, mbit, gbit, bps, kbps, mbps, gbps)");
  return uint64_t(bits / 8);
}

Result<uint32_t> parse_ppm(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || v < 0) return make_error(EINVAL, "bad probability '" + s + "'");
  std::string u(end);
  double ppm;
  if (u == "%" || u.empty())
    ppm = v * 1e4;
  else if (u == "ppm")
    ppm = v;
  else
    return make_error(EINVAL, "bad probability '" + s + "' (use 5%, 0.1% or 1000ppm)");
  if (ppm > MRC_FAULT_PPM) return make_error(EINVAL, "probability above 100%: " + s);
  return uint32_t(std::lround(ppm));
}

// A duration: 20ms, 500us, 1s, 1.5ms (no unit: seconds) -> ns.
Result<uint64_t> parse_ns(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || !(v >= 0)) return make_error(EINVAL, "bad time '" + s + "'");
  std::string u(end);
  double mul;
  if (u == "s" || u.empty())
    mul = 1e9;
  else if (u == "ms")
    mul = 1e6;
  else if (u == "us")
    mul = 1e3;
  else if (u == "ns")
    mul = 1;
  else
    return make_error(EINVAL, "bad time unit in '" + s + "' (s, ms, us, ns)");
  if (v * mul > 3600e9) return make_error(EINVAL, "time above an hour: " + s);
  return uint64_t(std::llround(v * mul));
}

Result<uint32_t> parse_uint(const std::string& s, uint32_t max, const char* what) {
  char* end = nullptr;
  unsigned long v = std::strtoul(s.c_str(), &end, 0);
  if (end == s.c_str() || *end || v > max)
    return make_error(EINVAL, std::string("bad ") + what + " '" + s + "'");
  return uint32_t(v);
}

class Tool {
 public:
  int main(int argc, char** argv);

 private:
  Status parse_global(std::vector<std::string>& args);
  Result<std::vector<Attachment>> resolve(const std::string& target, const std::string& dir,
                                          const std::string& hook);
  Result<std::vector<Attachment>> all_pinned();
  Status attach(const Attachment& at);
  Status detach(const Attachment& at);
  Status write_cfg(const Attachment& at, const mrc_fault_cfg& cfg, bool reset_counters);
  Result<json> read(const Attachment& at);
  Status parse_faults(const std::vector<std::string>& a, size_t i, mrc_fault_cfg& cfg, bool& reset);

  std::optional<State> state_;
  std::string bpffs_;
  bool json_ = false;
  // CLOCK_MONOTONIC when each configuration update returned (set, clear):
  // when the fault took effect, for timelines measured to the millisecond.
  std::vector<uint64_t> updated_ns_;
};

uint64_t mono_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

Status Tool::parse_global(std::vector<std::string>& args) {
  std::vector<std::string> rest;
  std::string state_path;
  for (size_t i = 0; i < args.size(); i++) {
    const auto& a = args[i];
    if ((a == "--state" || a == "--bpffs") && i + 1 < args.size()) {
      (a == "--state" ? state_path : bpffs_) = args[++i];
    } else if (a == "--json") {
      json_ = true;
    } else if (a == "-v") {
      setenv("MRC_FAULT_VERBOSE", "1", 1);
    } else {
      rest.push_back(a);
    }
  }
  args = rest;
  if (!state_path.empty()) {
    auto st = load_state(state_path);
    if (!st) return std::move(st).error();
    state_ = std::move(*st);
    if (bpffs_.empty()) bpffs_ = state_->bpffs;
  }
  if (bpffs_.empty()) return make_error(EINVAL, "need --state FILE or --bpffs DIR");
  return ok_status();
}

Result<std::vector<Attachment>> Tool::resolve(const std::string& target, const std::string& dir,
                                              const std::string& hook) {
  if (hook != "auto" && hook != "egress" && hook != "ingress")
    return make_error(EINVAL, "--hook must be auto, egress or ingress");
  const bool ingress = hook == "ingress";
  std::vector<Attachment> out;
  auto pin = [&](Attachment& at) {
    at.pin_dir = bpffs_ + "/" + at.ns + "/" + at.ifname + "-" + (at.ingress ? "ingress" : "egress");
  };
  if (auto c = target.find(':'); c != std::string::npos) {
    Attachment at;
    at.node = target.substr(0, c);
    at.ifname = target.substr(c + 1);
    at.ns = at.node;
    if (state_ && state_->node_ns.count(at.node)) at.ns = state_->node_ns[at.node];
    at.ingress = ingress;  // auto means egress for a port
    pin(at);
    out.push_back(at);
    return out;
  }
  if (!state_) return make_error(EINVAL, "a link target needs --state");
  if (dir != "fwd" && dir != "rev" && dir != "both")
    return make_error(EINVAL, "--dir must be fwd, rev or both");
  for (const auto& l : state_->links) {
    if (!glob_match(target.c_str(), l.name.c_str())) continue;
    for (const char* d : {"fwd", "rev"}) {
      if (dir != "both" && dir != d) continue;
      Attachment at;
      const FaultPoint& fp = std::string(d) == "fwd" ? l.fwd : l.rev;
      if (hook == "auto" && !fp.ns.empty()) {
        at = Attachment{l.name, d, "", fp.ns, fp.ifname, fp.hook == "ingress", {}};
        for (const auto& [node, ns] : state_->node_ns)
          if (ns == fp.ns) at.node = node;
      } else {
        // a->b traffic leaves a (egress) and enters b (ingress)
        const bool use_a = (std::string(d) == "fwd") != ingress;
        const LinkEnd& e = use_a ? l.a : l.b;
        at = Attachment{l.name, d, e.node, e.ns, e.ifname, ingress, {}};
      }
      pin(at);
      out.push_back(at);
    }
  }
  if (out.empty())
    return make_error(ENOENT, "no link matches '" + target + "' in run " + state_->run);
  return out;
}

Result<std::vector<Attachment>> Tool::all_pinned() {
  std::vector<Attachment> out;
  std::error_code ec;
  if (!fs::exists(bpffs_, ec)) return out;
  for (const auto& nsd : fs::directory_iterator(bpffs_, ec)) {
    if (!nsd.is_directory()) continue;
    for (const auto& ad : fs::directory_iterator(nsd.path(), ec)) {
      std::string name = ad.path().filename();
      auto dash = name.rfind('-');
      if (dash == std::string::npos) continue;
      Attachment at;
      at.ns = nsd.path().filename();
      at.ifname = name.substr(0, dash);
      at.ingress = name.substr(dash + 1) == "ingress";
      at.pin_dir = ad.path();
      if (state_) {
        for (const auto& l : state_->links) {
          for (auto [fp, d] : {std::pair{&l.fwd, "fwd"}, std::pair{&l.rev, "rev"}}) {
            if (fp->ns == at.ns && fp->ifname == at.ifname &&
                (fp->hook == "ingress") == at.ingress) {
              at.link = l.name;
              at.dir = d;
            }
          }
          if (!at.link.empty()) break;
          for (auto [end, d] : {std::pair{&l.a, "fwd"}, std::pair{&l.b, "rev"}}) {
            if (end->ns == at.ns && end->ifname == at.ifname) {
              at.link = l.name;
              at.node = end->node;
              // egress of a carries fwd traffic; ingress of a carries rev
              at.dir = at.ingress ? (std::string(d) == "fwd" ? "rev" : "fwd") : d;
            }
          }
        }
      }
      out.push_back(at);
    }
  }
  return out;
}

Status Tool::attach(const Attachment& at) {
  if (access((at.pin_dir + "/cfg").c_str(), F_OK) == 0) return ok_status();
  std::unique_ptr<mrc_fault, void (*)(mrc_fault*)> skel(mrc_fault__open(), mrc_fault__destroy);
  if (!skel) return make_error(errno ? errno : ENOMEM, "opening the mrc_fault BPF object");
  if (int err = mrc_fault__load(skel.get()))
    return errno_error(err, "loading mrc_fault (verifier)");
  // Pins need a bpf filesystem: say so instead of failing to mkdir in sysfs.
  fs::path base = at.pin_dir;
  std::error_code ec;
  while (!base.empty() && base != base.root_path() && !fs::exists(base, ec))
    base = base.parent_path();
  if (struct statfs sf{}; statfs(base.c_str(), &sf) == 0 && sf.f_type != BPF_FS_MAGIC)
    return make_error(ENOTSUP, base.string() + " is not a bpf filesystem (mount -t bpf bpf " +
                                   base.string() + "; fabric.sh up does it): cannot pin " +
                                   at.pin_dir);
  fs::create_directories(at.pin_dir, ec);
  if (ec) return make_error(ec.value(), "creating " + at.pin_dir);
  const std::pair<bpf_map*, const char*> maps[] = {{skel->maps.fault_cfg, "cfg"},
                                                   {skel->maps.fault_stats, "stats"},
                                                   {skel->maps.fault_tb, "tb"}};
  for (auto [m, n] : maps) {
    if (int err = bpf_map__pin(m, (at.pin_dir + "/" + n).c_str()))
      return errno_error(err, "pinning " + at.pin_dir + "/" + n);
  }
  auto scope = NetnsScope::enter(at.ns);
  if (!scope) return std::move(scope).error();
  int ifindex = int(if_nametoindex(at.ifname.c_str()));
  if (!ifindex) return make_error(errno, "no interface " + at.ifname + " in " + at.ns);
  bpf_tc_hook hook{};
  hook.sz = sizeof(hook);
  hook.ifindex = ifindex;
  hook.attach_point = at.ingress ? BPF_TC_INGRESS : BPF_TC_EGRESS;
  int err = bpf_tc_hook_create(&hook);
  if (err && err != -EEXIST) return errno_error(err, "creating clsact on " + at.ifname);
  bpf_tc_opts opts{};
  opts.sz = sizeof(opts);
  opts.handle = kTcHandle;
  opts.priority = kTcPriority;
  opts.flags = BPF_TC_F_REPLACE;
  opts.prog_fd =
      bpf_program__fd(at.ingress ? skel->progs.mrc_fault_ingress : skel->progs.mrc_fault_egress);
  if ((err = bpf_tc_attach(&hook, &opts)))
    return errno_error(err, "attaching to " + at.ifname + " in " + at.ns);
  return ok_status();
}

Status Tool::detach(const Attachment& at) {
  {
    auto scope = NetnsScope::enter(at.ns);
    if (scope) {
      int ifindex = int(if_nametoindex(at.ifname.c_str()));
      if (ifindex) {
        bpf_tc_hook hook{};
        hook.sz = sizeof(hook);
        hook.ifindex = ifindex;
        hook.attach_point = at.ingress ? BPF_TC_INGRESS : BPF_TC_EGRESS;
        bpf_tc_opts opts{};
        opts.sz = sizeof(opts);
        opts.handle = kTcHandle;
        opts.priority = kTcPriority;
        int err = bpf_tc_detach(&hook, &opts);
        if (err && err != -ENOENT) return errno_error(err, "detaching from " + at.ifname);
      }
    }
  }
  std::error_code ec;
  fs::remove_all(at.pin_dir, ec);
  fs::path parent = fs::path(at.pin_dir).parent_path();
  if (fs::is_empty(parent, ec)) fs::remove(parent, ec);
  return ok_status();
}

Status Tool::write_cfg(const Attachment& at, const mrc_fault_cfg& cfg, bool reset_counters) {
  UniqueFd cfd(bpf_obj_get((at.pin_dir + "/cfg").c_str()));
  if (!cfd.valid()) return make_error(errno, "opening " + at.pin_dir + "/cfg (not attached?)");
  UniqueFd tfd(bpf_obj_get((at.pin_dir + "/tb").c_str()));
  if (!tfd.valid()) return make_error(errno, "opening " + at.pin_dir + "/tb");
  uint32_t key = 0;
  mrc_fault_tb tb{};  // empty buckets refill to their burst on the first packet
  if (bpf_map_update_elem(tfd.get(), &key, &tb, BPF_ANY))
    return make_error(errno, "resetting token buckets");
  if (bpf_map_update_elem(cfd.get(), &key, &cfg, BPF_ANY))
    return make_error(errno, "writing configuration");
  updated_ns_.push_back(mono_ns());
  if (reset_counters) {
    UniqueFd sfd(bpf_obj_get((at.pin_dir + "/stats").c_str()));
    if (!sfd.valid()) return make_error(errno, "opening " + at.pin_dir + "/stats");
    std::vector<mrc_fault_stats> zero(static_cast<size_t>(libbpf_num_possible_cpus()));
    if (bpf_map_update_elem(sfd.get(), &key, zero.data(), BPF_ANY))
      return make_error(errno, "zeroing counters");
  }
  return ok_status();
}

Result<json> Tool::read(const Attachment& at) {
  UniqueFd cfd(bpf_obj_get((at.pin_dir + "/cfg").c_str()));
  UniqueFd sfd(bpf_obj_get((at.pin_dir + "/stats").c_str()));
  if (!cfd.valid() || !sfd.valid())
    return make_error(errno, "opening the pins in " + at.pin_dir + " (not attached?)");
  uint32_t key = 0;
  mrc_fault_cfg cfg{};
  if (bpf_map_lookup_elem(cfd.get(), &key, &cfg)) return make_error(errno, "reading configuration");
  std::vector<mrc_fault_stats> per(static_cast<size_t>(libbpf_num_possible_cpus()));
  if (bpf_map_lookup_elem(sfd.get(), &key, per.data()))
    return make_error(errno, "reading counters");
  json counters = json::object();
  for (int i = 0; i < MRC_FAULT_ST_MAX; i++) {
    uint64_t sum = 0;
    for (const auto& p : per) sum += p.c[i];
    counters[kStatNames[i]] = sum;
  }
  json faults = json::object();
  if (cfg.flags & MRC_FAULT_F_BLACKHOLE) faults["blackhole"] = true;
  if (cfg.flags & MRC_FAULT_F_LOSS) faults["loss_ppm"] = cfg.loss_ppm;
  if (cfg.flags & MRC_FAULT_F_TRIM)
    faults["trim"] = {
        {"rate_bps", cfg.trim_rate * 8}, {"burst", cfg.trim_burst}, {"dscp", cfg.trim_dscp}};
  if (cfg.flags & MRC_FAULT_F_ECN)
    faults["ecn"] = {{"rate_bps", cfg.ecn_rate * 8}, {"burst", cfg.ecn_burst}};
  if (cfg.flags & MRC_FAULT_F_CORRUPT) faults["corrupt_ppm"] = cfg.corrupt_ppm;
  if (cfg.flags & MRC_FAULT_F_DUP) faults["dup_ppm"] = cfg.dup_ppm;
  if (cfg.flags & MRC_FAULT_F_FLAP)
    faults["flap"] = {{"period_ns", cfg.flap_period_ns},
                      {"down_ns", cfg.flap_down_ns},
                      {"start_mono_ns", cfg.flap_start_ns}};
  json match = json::object();
  if (cfg.match_ipver) match["ipver"] = cfg.match_ipver;
  if (cfg.match_proto) match["proto"] = cfg.match_proto;
  if (cfg.match_sport || cfg.match_sport_mask) match["sport"] = cfg.match_sport;
  if (cfg.match_sport_mask) match["sport_mask"] = cfg.match_sport_mask;
  if (cfg.match_dport) match["dport"] = cfg.match_dport;
  return json{
      {"link", at.link},  {"dir", at.dir},       {"node", at.node},
      {"ns", at.ns},      {"ifname", at.ifname}, {"hook", at.ingress ? "ingress" : "egress"},
      {"faults", faults}, {"match", match},      {"counters", counters}};
}

Status Tool::parse_faults(const std::vector<std::string>& a, size_t i, mrc_fault_cfg& cfg,
                          bool& reset) {
  cfg = {};
  cfg.trim_dscp = MRC_DSCP_TRIMMED_DEFAULT;
  cfg.trim_burst = 16384;
  cfg.ecn_burst = 16384;
  for (; i < a.size(); i++) {
    const std::string& o = a[i];
    auto val = [&]() -> Result<std::string> {
      if (i + 1 >= a.size()) return make_error(EINVAL, o + " needs a value");
      return a[++i];
    };
#define VAL(var)                                   \
  auto var##_r = val();                            \
  if (!var##_r) return std::move(var##_r).error(); \
  const std::string& var = *var##_r
    if (o == "--blackhole") {
      cfg.flags |= MRC_FAULT_F_BLACKHOLE;
    } else if (o == "--reset") {
      reset = true;
    } else if (o == "--loss" || o == "--corrupt" || o == "--dup") {
      VAL(v);
      auto p = parse_ppm(v);
      if (!p) return std::move(p).error();
      if (o == "--loss") cfg.flags |= MRC_FAULT_F_LOSS, cfg.loss_ppm = *p;
      if (o == "--corrupt") cfg.flags |= MRC_FAULT_F_CORRUPT, cfg.corrupt_ppm = *p;
      if (o == "--dup") cfg.flags |= MRC_FAULT_F_DUP, cfg.dup_ppm = *p;
    } else if (o == "--flap") {
      VAL(v);
      auto slash = v.find('/');
      auto period = parse_ns(v.substr(0, slash));
      if (!period) return std::move(period).error();
      uint64_t down = *period / 2;
      if (slash != std::string::npos) {
        auto d = parse_ns(v.substr(slash + 1));
        if (!d) return std::move(d).error();
        down = *d;
      }
      if (*period < 1000 || down > *period)
        return make_error(EINVAL, "--flap T/D wants T >= 1us and D <= T: " + v);
      cfg.flags |= MRC_FAULT_F_FLAP;
      cfg.flap_period_ns = *period;
      cfg.flap_down_ns = down;
      // one phase for every attachment this command configures
      cfg.flap_start_ns = mono_ns();
    } else if (o == "--trim-rate" || o == "--ecn-rate") {
      VAL(v);
      auto r = parse_rate(v);
      if (!r) return std::move(r).error();
      if (o == "--trim-rate") cfg.flags |= MRC_FAULT_F_TRIM, cfg.trim_rate = *r;
      if (o == "--ecn-rate") cfg.flags |= MRC_FAULT_F_ECN, cfg.ecn_rate = *r;
    } else if (o == "--trim-burst" || o == "--ecn-burst") {
      VAL(v);
      auto n = parse_uint(v, 1u << 30, "burst");
      if (!n) return std::move(n).error();
      (o == "--trim-burst" ? cfg.trim_burst : cfg.ecn_burst) = *n;
    } else if (o == "--trim-dscp") {
      VAL(v);
      auto n = parse_uint(v, 63, "DSCP");
      if (!n) return std::move(n).error();
      cfg.trim_dscp = uint8_t(*n);
    } else if (o == "--corrupt-xor") {
      VAL(v);
      auto n = parse_uint(v, 255, "XOR mask");
      if (!n) return std::move(n).error();
      cfg.corrupt_xor = uint8_t(*n);
    } else if (o == "--match-proto") {
      VAL(v);
      if (v == "udp")
        cfg.match_proto = 17;
      else if (v == "tcp")
        cfg.match_proto = 6;
      else if (v == "icmp")
        cfg.match_proto = 1;
      else if (v == "any")
        cfg.match_proto = 0;
      else {
        auto n = parse_uint(v, 255, "protocol");
        if (!n) return std::move(n).error();
        cfg.match_proto = uint8_t(*n);
      }
    } else if (o == "--match-ipver") {
      VAL(v);
      if (v != "4" && v != "6") return make_error(EINVAL, "--match-ipver must be 4 or 6");
      cfg.match_ipver = uint8_t(v[0] - '0');
    } else if (o == "--match-sport-mask") {
      VAL(v);
      auto n = parse_uint(v, 65535, "mask");
      if (!n) return std::move(n).error();
      cfg.match_sport_mask = uint16_t(*n);
    } else if (o == "--match-sport" || o == "--match-dport" || o == "--mrc-port") {
      VAL(v);
      auto n = parse_uint(v, 65535, "port");
      if (!n) return std::move(n).error();
      if (o == "--match-sport") cfg.match_sport = uint16_t(*n);
      if (o == "--match-dport") cfg.match_dport = uint16_t(*n);
      if (o == "--mrc-port") cfg.mrc_port = uint16_t(*n);
    } else {
      return make_error(EINVAL, "unknown option " + o);
    }
#undef VAL
  }
  return ok_status();
}

int Tool::main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "-h" || args[0] == "--help") {
    std::cout << kUsage;
    return args.empty() ? 2 : 0;
  }
  libbpf_quiet();
  auto fail = [&](const Error& e) {
    std::cerr << "mrc_fault: " << e.message() << "\n";
    return 1;
  };
  if (auto s = parse_global(args); !s) return fail(s.error());
  if (args.empty()) return fail(make_error(EINVAL, "no command"));
  const std::string cmd = args[0];
  std::string target, dir = "fwd", hook = "auto";
  bool all = false;
  std::vector<std::string> rest;
  for (size_t i = 1; i < args.size(); i++) {
    if (args[i] == "--dir" && i + 1 < args.size()) {
      dir = args[++i];
    } else if (args[i] == "--hook" && i + 1 < args.size()) {
      hook = args[++i];
    } else if (args[i] == "--all") {
      all = true;
    } else if (target.empty() && !all && args[i].rfind("--", 0) != 0) {
      target = args[i];
    } else {
      rest.push_back(args[i]);
    }
  }
  std::vector<Attachment> ats;
  if (all || (cmd == "show" && target.empty())) {
    auto r = all_pinned();
    if (!r) return fail(r.error());
    ats = std::move(*r);
  } else {
    if (target.empty()) return fail(make_error(EINVAL, cmd + " needs a TARGET (or --all)"));
    auto r = resolve(target, dir, hook);
    if (!r) return fail(r.error());
    ats = std::move(*r);
  }
  json out = json::array();
  if (cmd == "set") {
    mrc_fault_cfg cfg;
    bool reset = false;
    if (auto s = parse_faults(rest, 0, cfg, reset); !s) return fail(s.error());
    for (const auto& at : ats) {
      if (auto s = attach(at); !s) return fail(Error(s.error()).wrap(at.ns + ":" + at.ifname));
      if (auto s = write_cfg(at, cfg, reset); !s) return fail(s.error());
    }
  } else if (cmd == "clear" || cmd == "reset") {
    if (!rest.empty()) return fail(make_error(EINVAL, "unexpected " + rest[0]));
    for (const auto& at : ats) {
      if (cmd == "clear") {
        mrc_fault_cfg cfg{};
        if (auto s = write_cfg(at, cfg, false); !s) return fail(s.error());
        if (json_)
          out.push_back({{"link", at.link},
                         {"dir", at.dir},
                         {"ns", at.ns},
                         {"ifname", at.ifname},
                         {"updated_mono_ns", updated_ns_.back()}});
        continue;
      }
      UniqueFd sfd(bpf_obj_get((at.pin_dir + "/stats").c_str()));
      std::vector<mrc_fault_stats> zero(static_cast<size_t>(libbpf_num_possible_cpus()));
      uint32_t key = 0;
      if (!sfd.valid() || bpf_map_update_elem(sfd.get(), &key, zero.data(), BPF_ANY))
        return fail(make_error(errno, "zeroing counters in " + at.pin_dir));
    }
  } else if (cmd == "detach") {
    for (const auto& at : ats) {
      if (auto s = detach(at); !s) return fail(s.error());
    }
  } else if (cmd != "show") {
    return fail(make_error(EINVAL, "unknown command '" + cmd + "'"));
  }
  if (cmd == "clear" && json_) std::cout << out.dump(2) << "\n";
  if (cmd == "show" || cmd == "set") {
    for (size_t i = 0; i < ats.size(); i++) {
      auto j = read(ats[i]);
      if (!j) {
        if (cmd == "show" && !all && !target.empty()) return fail(j.error());
        continue;
      }
      if (cmd == "set" && i < updated_ns_.size()) (*j)["updated_mono_ns"] = updated_ns_[i];
      out.push_back(*j);
    }
    if (json_ || cmd == "set") {
      std::cout << out.dump(json_ ? 2 : -1) << "\n";
    } else {
      for (const auto& j : out) {
        std::cout << (j["link"].get<std::string>().empty() ? "-" : j["link"].get<std::string>())
                  << " " << j["dir"].get<std::string>() << " " << j["ns"].get<std::string>() << ":"
                  << j["ifname"].get<std::string>() << " " << j["hook"].get<std::string>()
                  << " faults " << j["faults"].dump() << "\n ";
        for (auto& [k, v] : j["counters"].items()) std::cout << " " << k << "=" << v;
        std::cout << "\n";
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace mrc::fabric

int main(int argc, char** argv) {
  mrc::fabric::Tool t;
  return t.main(argc, argv);
}
