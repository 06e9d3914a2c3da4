// Handler of endpoint operations: probe (EV_PROBE or PORT_STATUS_UPDATE
// requests to a peer; the answer comes when the batch is done,
// Server::on_batch_done).
#include <algorithm>

#include "mrcd/ops.hpp"

namespace mrc::mrcd {

using namespace mrc::ctl;

namespace {

struct ProbeArgs {
  codec::IpAddr dip, sip;
  bool has_src = false;
  std::vector<Ev> evs;
  std::vector<codec::IpAddr> dsts;  // one per EV
  uint32_t fmode = kFmtStev;
  uint32_t op_type = kEpOpEvProbe;
  uint64_t port_status = 0, timeout_ms = 1000, tc = 0;
  std::vector<uint16_t> ids;  // one per EV
};

// "evs": each EV may go to its own destination, "HEX@PORT=ADDR" or
// {"ev", "port", "dst"}; none: EV 0 on every configured port.
Status probe_evs(const Request& r, ProbeArgs& p) {
  if (r.args.contains("evs")) {
    if (!r.args["evs"].is_array()) return Error(EINVAL, "\"evs\" must be an array");
    for (const json& e : r.args["evs"]) {
      json ev = e;
      codec::IpAddr to = p.dip;
      std::string alt;
      if (e.is_string() && e.get<std::string>().find('=') != std::string::npos) {
        const std::string s = e.get<std::string>();
        ev = s.substr(0, s.find('='));
        alt = s.substr(s.find('=') + 1);
      } else if (e.is_object() && e.contains("dst") && e["dst"].is_string()) {
        alt = e["dst"].get<std::string>();
      }
      if (!alt.empty() && !proto::parse_ip(alt, &to))
        return Error(EINVAL, "destination \"" + alt + "\" is not an address");
      auto v = proto::ev_from_json(ev);
      if (!v) return std::move(v).error();
      p.evs.push_back(*v);
      p.dsts.push_back(to);
    }
  }
  if (p.evs.empty()) {
    for (const auto& port : r.ctl.store().regions().ports)
      if (port.configured) {
        p.evs.push_back(Ev{codec::ev_from_u32(0, codec::EvFmtMode::kStev), uint8_t(port.port)});
        p.dsts.push_back(p.dip);
      }
  }
  return ok_status();
}

// "fmt", "op", "port_status", "timeout_ms", "tc".
Status probe_options(const json& args, ProbeArgs& p) {
  auto fmt = proto::get_str(args, "fmt");
  if (!fmt) return std::move(fmt).error();
  if (*fmt) {
    auto v = proto::fmt_mode_from(**fmt);
    if (!v) return std::move(v).error();
    p.fmode = *v;
  }
  auto opn = proto::get_str(args, "op");
  if (!opn) return std::move(opn).error();
  if (*opn && **opn == "port_status")
    p.op_type = kEpOpPortStatusUpdate;
  else if (*opn && **opn != "ev_probe")
    return Error(EINVAL, "\"op\" must be ev_probe or port_status");
  auto ps = proto::get_u64(args, "port_status", UINT32_MAX);
  auto to = proto::get_u64(args, "timeout_ms", 60000);
  auto tc = proto::get_u64(args, "tc", 255);
  if (!ps || !to || !tc) return Error(EINVAL, "port_status, timeout_ms and tc are numbers");
  p.port_status = ps->value_or(0);
  p.timeout_ms = to->value_or(1000);
  p.tc = tc->value_or(0);
  return ok_status();
}

// "req_ids": one per EV; none: the next of mrcd's own (0x8000 | 14 bits).
Status probe_req_ids(const json& args, ProbeArgs& p) {
  if (args.contains("req_ids")) {
    if (!args["req_ids"].is_array()) return Error(EINVAL, "\"req_ids\" must be an array");
    for (const json& x : args["req_ids"]) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > 0xffff)
        return Error(EINVAL, "a req_id is a number 0..65535");
      p.ids.push_back(uint16_t(x.get<int64_t>()));
    }
    if (p.ids.size() != p.evs.size()) return Error(EINVAL, "one req_id per EV is needed");
  } else {
    static uint16_t next = 0;
    for (size_t i = 0; i < p.evs.size(); i++) p.ids.push_back(uint16_t(0x8000 | (next++ & 0x3fff)));
  }
  return ok_status();
}

std::vector<EpReq> probe_requests(const ProbeArgs& p) {
  std::vector<EpReq> reqs;
  for (size_t i = 0; i < p.evs.size(); i++) {
    EpReq q;
    q.req_id = p.ids[i];
    q.dgid = gid_from_ip(p.dsts[i]);
    if (p.has_src) q.sgid = gid_from_ip(p.sip);
    q.ev_fmt_mode = p.fmode;
    q.req_ev = p.evs[i];
    q.port_status = uint32_t(p.port_status);
    reqs.push_back(q);
  }
  return reqs;
}

}  // namespace

json op_probe(Request& r) {
  if (!r.deps.ep) return r.fail("probe", Error(ENOTSUP, "endpoint operations are not available"));
  ProbeArgs p;
  auto dst = proto::get_str(r.args, "dst");
  if (!dst || !*dst || !proto::parse_ip(**dst, &p.dip))
    return r.fail("probe", Error(EINVAL, "\"dst\" must be an IPv4 or IPv6 address"));
  const std::string obj = "probe " + **dst;
  auto src = proto::get_str(r.args, "src");
  if (!src) return r.fail(obj, src.error());
  p.has_src = src->has_value();
  if (*src && !proto::parse_ip(**src, &p.sip))
    return r.fail(obj, Error(EINVAL, "\"src\" is not an address"));
  if (Status s = probe_evs(r, p); !s) return r.fail(obj, s.error());
  if (Status s = probe_options(r.args, p); !s) return r.fail(obj, s.error());
  if (Status s = probe_req_ids(r.args, p); !s) return r.fail(obj, s.error());
  const std::vector<EpReq> reqs = probe_requests(p);
  const uint32_t timeout_ns = uint32_t(std::min<uint64_t>(p.timeout_ms * 1'000'000ull, UINT32_MAX));
  auto b = r.deps.ep->start(uint8_t(p.tc), p.op_type, reqs, timeout_ns, mono_ns());
  if (!b) return r.fail(obj, b.error());
  json rq = json::array();
  for (size_t i = 0; i < reqs.size(); i++)
    rq.push_back({{"req_id", reqs[i].req_id},
                  {"ev", ev_hex(reqs[i].req_ev.val)},
                  {"port", reqs[i].req_ev.port},
                  {"dst", proto::ip_string(p.dsts[i])}});
  json keep = {{"dst", **dst},
               {"op", p.op_type == kEpOpEvProbe ? "ev_probe" : "port_status"},
               {"timeout_ns", timeout_ns},
               {"requests", rq}};
  (*r.probes)[*b] = PendingProbe{r.conn ? r.conn->fd : -1, r.id, keep};
  r.pending = r.conn != nullptr;
  return r.ok(keep);
}

}  // namespace mrc::mrcd
