#include "ctl/proto.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "codec/ip.hpp"
#include "ctl/srv6.hpp"

namespace mrc::ctl::proto {

const char* errno_name(int e) {
  switch (e) {
    case 0:
      return "OK";
    case EPERM:
      return "EPERM";
    case ENOENT:
      return "ENOENT";
    case EIO:
      return "EIO";
    case E2BIG:
      return "E2BIG";
    case EAGAIN:
      return "EAGAIN";
    case ENOMEM:
      return "ENOMEM";
    case EACCES:
      return "EACCES";
    case EBUSY:
      return "EBUSY";
    case EEXIST:
      return "EEXIST";
    case ENODEV:
      return "ENODEV";
    case EINVAL:
      return "EINVAL";
    case ENOSPC:
      return "ENOSPC";
    case ERANGE:
      return "ERANGE";
    case ENOTSUP:
      return "ENOTSUP";
    case EPROTO:
      return "EPROTO";
    case ETIMEDOUT:
      return "ETIMEDOUT";
    case ENETUNREACH:
      return "ENETUNREACH";
    case ENETDOWN:
      return "ENETDOWN";
    case ENAMETOOLONG:
      return "ENAMETOOLONG";
    case EADDRINUSE:
      return "EADDRINUSE";
    case ECONNREFUSED:
      return "ECONNREFUSED";
    case ENOTCONN:
      return "ENOTCONN";
    case EHOSTUNREACH:
      return "EHOSTUNREACH";
    default:
      return "ERRNO";
  }
}

json error_json(const Error& e, const std::string& object) {
  return json{{"object", object},
              {"errno", e.code},
              {"name", errno_name(e.code)},
              {"message", e.message()}};
}

Result<std::optional<uint64_t>> get_u64(const json& args, const char* key, uint64_t max) {
  if (!args.is_object() || !args.contains(key) || args[key].is_null())
    return std::optional<uint64_t>();
  const json& v = args[key];
  uint64_t x;
  if (v.is_number_unsigned()) {
    x = v.get<uint64_t>();
  } else if (v.is_number_integer()) {
    int64_t s = v.get<int64_t>();
    if (s < 0) return Error(EINVAL, std::string(key) + " must not be negative");
    x = uint64_t(s);
  } else if (v.is_string()) {
    const std::string& str = v.get_ref<const std::string&>();
    char* end = nullptr;
    errno = 0;
    x = std::strtoull(str.c_str(), &end, 0);
    if (str.empty() || *end || errno || str[0] == '-')
      return Error(EINVAL, std::string(key) + " \"" + str + "\" is not a number");
  } else {
    return Error(EINVAL, std::string(key) + " must be a number");
  }
  if (x > max)
    return Error(EINVAL,
                 std::string(key) + " " + std::to_string(x) + " is above " + std::to_string(max));
  return std::optional<uint64_t>(x);
}

Result<std::optional<std::string>> get_str(const json& args, const char* key) {
  if (!args.is_object() || !args.contains(key) || args[key].is_null())
    return std::optional<std::string>();
  if (!args[key].is_string()) return Error(EINVAL, std::string(key) + " must be a string");
  return std::optional<std::string>(args[key].get<std::string>());
}

Result<std::optional<bool>> get_bool(const json& args, const char* key) {
  if (!args.is_object() || !args.contains(key) || args[key].is_null()) return std::optional<bool>();
  if (!args[key].is_boolean()) return Error(EINVAL, std::string(key) + " must be true or false");
  return std::optional<bool>(args[key].get<bool>());
}

Result<std::optional<double>> get_num(const json& args, const char* key) {
  if (!args.is_object() || !args.contains(key) || args[key].is_null())
    return std::optional<double>();
  if (!args[key].is_number()) return Error(EINVAL, std::string(key) + " must be a number");
  double d = args[key].get<double>();
  if (!std::isfinite(d)) return Error(EINVAL, std::string(key) + " must be finite");
  return std::optional<double>(d);
}

Result<Ev> ev_from_json(const json& j) {
  Ev e;
  if (j.is_string()) {
    if (!parse_ev_text(j.get_ref<const std::string&>(), &e))
      return Error(EINVAL,
                   "EV \"" + j.get<std::string>() + "\" is not HEXBYTES@PORT (e.g. 0001c123@1)");
    return e;
  }
  if (!j.is_object())
    return Error(EINVAL, "an EV is \"HEXBYTES@PORT\" or {\"ev\": HEX, \"port\": N}");
  auto v = get_str(j, "ev");
  if (!v) return std::move(v).error();
  auto p = get_u64(j, "port", 255);
  if (!p) return std::move(p).error();
  if (!*v || !*p) return Error(EINVAL, "an EV object needs \"ev\" and \"port\"");
  if (!parse_ev_hex(**v, &e.val)) return Error(EINVAL, "EV value \"" + **v + "\" is not hex bytes");
  e.port = uint8_t(**p);
  return e;
}

json ev_json(const Ev& e) { return json{{"ev", ev_hex(e.val)}, {"port", e.port}}; }

Result<uint32_t> ev_state_from(const std::string& s) {
  if (s == "good") return uint32_t(kEvGood);
  if (s == "assumed_bad") return uint32_t(kEvAssumedBad);
  if (s == "denied") return uint32_t(kEvDenied);
  return Error(EINVAL, "EV state \"" + s + "\" is not good, assumed_bad or denied");
}

Result<uint32_t> profile_state_from(const std::string& s) {
  if (s == "init") return uint32_t(kProfileInit);
  if (s == "offline") return uint32_t(kProfileOffline);
  if (s == "online") return uint32_t(kProfileOnline);
  return Error(EINVAL, "profile state \"" + s + "\" is not init, offline or online");
}

Result<uint32_t> ev_mode_from(const std::string& s) {
  if (s == "auto") return uint32_t(kEvModeAuto);
  if (s == "explicit" || s == "exp") return uint32_t(kEvModeExp);
  if (s == "generated" || s == "gen") return uint32_t(kEvModeGen);
  return Error(EINVAL, "EV mode \"" + s + "\" is not auto, explicit or generated");
}

Result<uint32_t> fmt_mode_from(const std::string& s) {
  if (s == "stev") return uint32_t(kFmtStev);
  if (s == "udp") return uint32_t(kFmtUdp);
  if (s == "srv6") return uint32_t(kFmtSrv6);
  return Error(EINVAL, "EV format mode \"" + s + "\" is not stev, udp or srv6");
}

Result<codec::EvField> field_from_json(const json& j) {
  codec::EvField f;
  if (!j.is_object())
    return Error(EINVAL,
                 "an EV field is {\"width\", \"init_val\", \"min_val\", \"max_val\", \"mask\"}");
  const char* keys[] = {"width", "init_val", "min_val", "max_val", "mask"};
  uint32_t* dst[] = {&f.width, &f.init_val, &f.min_val, &f.max_val, &f.mask};
  for (int i = 0; i < 5; i++) {
    auto v = get_u64(j, keys[i], UINT32_MAX);
    if (!v) return std::move(v).error();
    if (i == 0 && !*v) return Error(EINVAL, "an EV field needs \"width\"");
    *dst[i] = uint32_t(v->value_or(0));
  }
  return f;
}

static const char* xdp_mode_name(uint32_t m) {
  switch (m) {
    case MRC_CTL_XDP_NATIVE:
      return "native";
    case MRC_CTL_XDP_GENERIC:
      return "generic";
    default:
      return "none";
  }
}

json port_json(const mrc_ctl_port& p) {
  const bool admin = p.admin_state == MRC_CTL_PORT_ENABLED;
  return json{{"port", p.port},
              {"ifname", std::string(p.ifname, strnlen(p.ifname, sizeof(p.ifname)))},
              {"ifindex", p.ifindex},
              {"admin", admin ? "up" : "down"},
              {"link", p.link_up ? "up" : "down"},
              {"state", admin && p.link_up ? "up" : "down"},
              {"xdp_mode", xdp_mode_name(p.xdp_mode)},
              {"queues", p.queues},
              {"admin_changes", p.admin_changes}};
}

json device_json(const Controller& c) {
  DeviceAttr a = c.query_device();
  json opt = json::array();
  const std::pair<uint32_t, const char*> caps[] = {
      {kCapEvProfileModifyOnline, "ev_profile_modify_online"},
      {kCapCcProfileModifyOnline, "cc_profile_modify_online"},
      {kCapEvEvent, "ev_event"},
      {kCapEvExplicitRange, "ev_explicit_range"},
      {kCapEvEventPreciseDropCnt, "ev_event_precise_drop_cnt"},
      {kCapEpOpEvProbe, "ep_op_ev_probe"}};
  for (const auto& [bit, name] : caps)
    if (a.opt_attr & bit) opt.push_back(name);
  json fmt_modes = json::array(), ev_modes = json::array();
  for (uint32_t m : {uint32_t(kFmtStev), uint32_t(kFmtSrv6), uint32_t(kFmtUdp)})
    if (a.ev.ev_fmt_mode_mask & m) fmt_modes.push_back(fmt_mode_name(m));
  for (uint32_t m : {uint32_t(kEvModeAuto), uint32_t(kEvModeExp), uint32_t(kEvModeGen)})
    if (a.ev.ev_mode_mask & m) ev_modes.push_back(ev_mode_name(m));
  json ports = json::array();
  for (const auto& p : c.store().regions().ports)
    if (p.configured) ports.push_back(port_json(p));
  const mrc_ctl_dev& d = c.store().dev();
  return json{{"protocol_version", a.mrc_ctl_protocol_version},
              {"ev",
               {{"max_fmt_profiles", a.ev.ev_max_fmt_profiles},
                {"max_profiles", a.ev.ev_max_profiles},
                {"max_count", a.ev.ev_max_count},
                {"free_count", a.ev.ev_free_count},
                {"max_count_profile", a.ev.ev_max_count_profile},
                {"count_align", a.ev.ev_count_align},
                {"max_width", a.ev.ev_max_width},
                {"fmt_modes", fmt_modes},
                {"modes", ev_modes},
                {"op_max_entries", a.ev.ev_op_max_entries}}},
              {"cc", {{"max_profiles", a.cc.cc_max_profiles}, {"algorithms", a.cc.algorithms}}},
              {"phy_port_mask", a.phy_port_mask},
              {"opt_attr", a.opt_attr},
              {"opt", opt},
              {"ports", ports},
              {"gen", d.gen},
              {"udp_port", d.udp_port},
              {"mrcd_pid", d.mrcd_pid},
              {"restarts", d.restarts},
              {"evq", {{"pushed", d.evq_pushed}, {"dropped", d.evq_dropped}}}};
}

json fmt_json(const mrc_ctl_fmt& f) {
  json w = json::array();
  for (uint32_t i = 0; i < f.field_count && i < MRC_CTL_MAX_FMT_FIELDS; i++)
    w.push_back(f.width[i]);
  return json{{"id", f.id},
              {"state", to_string(ProfileState(f.cur_state))},
              {"requested_state", to_string(ProfileState(f.state))},
              {"mode", fmt_mode_name(f.mode)},
              {"fields", w}};
}

json ev_entry_json(size_t index, const mrc_ctl_ev_entry& e) {
  codec::EvValue v{};
  std::memcpy(v.data(), e.val, codec::kEvMaxBytes);
  char wire[16];
  std::snprintf(wire, sizeof(wire), "0x%08x", e.wire);
  if (!e.populated)
    return json{{"index", index},
                {"ev", nullptr},
                {"port", 0},
                {"wire", nullptr},
                {"state", "unpopulated"}};
  return json{{"index", index},
              {"ev", ev_hex(v)},
              {"port", e.port},
              {"wire", wire},
              {"state", ev_state_name(e.state)}};
}

json ev_entry_json(const Controller& c, const mrc_ctl_evp& p, size_t index,
                   const mrc_ctl_ev_entry& e) {
  json j = ev_entry_json(index, e);
  const mrc_ctl_fmt* fmt = p.fmt_mode == kFmtSrv6 ? c.fmt_record(p.fmt_id) : nullptr;
  codec::Srv6Sid sid{};
  if (fmt && e.populated && srv6_sid_of(*fmt, p, e, sid)) {
    j["sid"] = codec::srv6_to_string(sid);
    json hops = json::array();
    for (uint16_t u : codec::srv6_hops(sid)) {
      char b[8];
      std::snprintf(b, sizeof(b), "%x", unsigned(u));
      hops.push_back(b);
    }
    j["hops"] = hops;
  }
  return j;
}

std::map<EvCounterKey, EvCounterSum> sum_evstats(const EvStatList& list) {
  std::map<EvCounterKey, EvCounterSum> m;
  for (const auto& [k, v] : list) {
    EvCounterSum& c = m[{k.profile_id, k.wire, k.port}];
    mrc_ctl_evstat& s = c.s;
    s.update_ns = std::max(s.update_ns, v.update_ns);
    s.tx_pkts += v.tx_pkts;
    s.acked += v.acked;
    s.lost += v.lost;
    s.ecn += v.ecn;
    s.trims += v.trims;
    s.probes_ok += v.probes_ok;
    s.probes_failed += v.probes_failed;
    s.rtt_sum_ns += v.rtt_sum_ns;
    s.rtt_samples += v.rtt_samples;
    if (v.rtt_min_ns && (!s.rtt_min_ns || v.rtt_min_ns < s.rtt_min_ns)) s.rtt_min_ns = v.rtt_min_ns;
    s.rtt_last_ns = std::max(s.rtt_last_ns, v.rtt_last_ns);
    s.qps += v.qps;
    s.qps_bad += v.qps_bad;
    c.reports++;
  }
  return m;
}

json ev_counters_json(const EvCounterSum& c, uint64_t now_ns) {
  const mrc_ctl_evstat& s = c.s;
  return json{{"tx_pkts", s.tx_pkts},
              {"acked", s.acked},
              {"lost", s.lost},
              {"ecn", s.ecn},
              {"trims", s.trims},
              {"probes_ok", s.probes_ok},
              {"probes_failed", s.probes_failed},
              {"rtt_min_ns", s.rtt_min_ns},
              {"rtt_last_ns", s.rtt_last_ns},
              {"rtt_avg_ns", s.rtt_samples ? s.rtt_sum_ns / s.rtt_samples : 0},
              {"qps", s.qps},
              {"qps_bad", s.qps_bad},
              {"reports", c.reports},
              {"update_ns", s.update_ns},
              {"age_ms", now_ns > s.update_ns ? (now_ns - s.update_ns) / 1000000 : 0}};
}

json evp_json(const Controller& c, const mrc_ctl_evp& p, bool with_evs) {
  json mask = json::array();
  if (p.event_mask & kEvGood) mask.push_back("good");
  if (p.event_mask & kEvAssumedBad) mask.push_back("assumed_bad");
  json fields = json::array();
  for (uint32_t i = 0; i < p.field_count && i < MRC_CTL_MAX_EV_FIELDS; i++) {
    const mrc_ctl_ev_field& f = p.field[i];
    fields.push_back({{"width", f.width},
                      {"init_val", f.init_val},
                      {"min_val", f.min_val},
                      {"max_val", f.max_val},
                      {"mask", f.mask}});
  }
  auto evs = c.ev_entries(p.id);
  uint32_t bad = 0, unpop = 0;
  for (const auto& e : evs) {
    bad += e.populated && e.state == kEvAssumedBad;
    unpop += !e.populated;
  }
  json j{{"id", p.id},
         {"state", to_string(ProfileState(p.cur_state))},
         {"requested_state", to_string(ProfileState(p.state))},
         {"mode", ev_mode_name(p.mode)},
         {"fmt", (p.set_mask & MRC_CTL_SET_FMT_ID) ? json(p.fmt_id) : json(nullptr)},
         {"fmt_mode", fmt_mode_name(p.fmt_mode)},
         {"ev_count", p.mode == kEvModeAuto && !(p.set_mask & MRC_CTL_SET_COUNT)
                          ? c.limits().auto_ev_count
                          : p.ev_count},
         {"min_active", p.min_active},
         {"event_mask", mask},
         {"fields", fields},
         {"denied", p.n_denied},
         {"assumed_bad", bad},
         {"unpopulated", unpop},
         {"users", c.ev_profile_users(p.id)},
         {"changes", p.changes}};
  if (with_evs) {
    json a = json::array();
    for (size_t i = 0; i < evs.size(); i++) a.push_back(ev_entry_json(c, p, i, evs[i]));
    j["evs"] = a;
  }
  return j;
}

json cc_json(const Controller& c, const mrc_ctl_cc& p) {
  json cfg = nullptr;
  if (p.set_mask & MRC_CTL_SET_CONFIG) {
    const mrc_ctl_nscc& n = p.nscc;
    cfg = json{{"disable_qa", n.disable_qa != 0},
               {"adjust_bytes_threshold", n.adjust_bytes_threshold},
               {"adjust_period_threshold", n.adjust_period_threshold},
               {"base_rtt", n.base_rtt},
               {"eta", n.eta},
               {"fi", n.fi},
               {"fi_scale", n.fi_scale},
               {"gamma", n.gamma},
               {"max_md_jump", n.max_md_jump},
               {"max_cwnd", n.max_cwnd},
               {"qa_gate", n.qa_gate},
               {"qa_threshold", n.qa_threshold},
               {"target_delay", n.target_delay}};
  }
  json alg = nullptr;
  if (p.set_mask & MRC_CTL_SET_ALGORITHM)
    alg = p.algorithm == MRC_CTL_CC_NSCC ? json(kAlgNscc) : json("none");
  return json{{"id", p.id},
              {"state", to_string(ProfileState(p.cur_state))},
              {"requested_state", to_string(ProfileState(p.state))},
              {"algorithm", alg},
              {"config", cfg},
              {"users", c.cc_profile_users(p.id)},
              {"changes", p.changes}};
}

json qp_json(const mrc_ctl_qp_key& k, const mrc_ctl_qp_report& r, uint64_t now_ns) {
  return json{{"pid", k.pid},
              {"comm", std::string(r.comm, strnlen(r.comm, sizeof(r.comm)))},
              {"dev", k.dev},
              {"qpn", k.qpn},
              {"state", core::to_string(core::QpState(r.state))},
              {"remote_qpn", r.remote_qpn},
              {"ev_profile", r.ev_profile_id},
              {"cc_profile", r.cc_profile_id},
              {"evs",
               {{"good", r.ev_good},
                {"skip", r.ev_skip},
                {"assumed_bad", r.ev_assumed_bad},
                {"denied", r.ev_denied}}},
              {"counters",
               {{"tx_pkts", r.tx_pkts},
                {"tx_bytes", r.tx_bytes},
                {"rtx_pkts", r.rtx_pkts},
                {"rx_pkts", r.rx_pkts},
                {"rx_bytes", r.rx_bytes},
                {"rx_sacks", r.rx_sacks},
                {"rx_nacks", r.rx_nacks},
                {"timeouts", r.timeouts},
                {"cwnd_bytes", r.cwnd_bytes},
                {"inflight_bytes", r.inflight_bytes},
                {"srtt_ns", r.srtt_ns}}},
              {"update_ns", r.update_ns},
              {"age_ms", now_ns > r.update_ns ? (now_ns - r.update_ns) / 1000000 : 0}};
}

json event_json(const EvEvent& e) {
  return json{
      {"type", "ev_event"},         {"time_ns", e.time_ns}, {"profile", e.profile_id},
      {"ev", ev_hex(e.ev.val)},     {"port", e.ev.port},    {"state", ev_state_name(e.state)},
      {"drop_count", e.drop_count}, {"pid", e.pid},         {"qpn", e.qpn},
      {"reason", e.reason}};
}

std::string ip_string(const codec::IpAddr& ip) { return codec::to_string(ip); }

json ip_json(const codec::IpAddr& ip) { return ip_string(ip); }

bool parse_ip(const std::string& s, codec::IpAddr* out) {
  auto ip = codec::parse_ip(s);
  if (!ip) return false;
  *out = *ip;
  return true;
}

}  // namespace mrc::ctl::proto
