#include "sim/network.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "codec/bytes.hpp"

namespace mrc::sim {
namespace {

using codec::load_be16;
using codec::load_be24;
using codec::load_be32;
using codec::store_be16;

constexpr uint16_t kEthIPv4 = 0x0800;
constexpr uint16_t kEthIPv6 = 0x86dd;
constexpr uint16_t kEth8021Q = 0x8100;
constexpr uint16_t kEth8021AD = 0x88a8;
constexpr uint8_t kProtoUdp = 17;
constexpr uint32_t kSlabBuffers = 64;

void ipv4_fix_checksum(uint8_t* ip) {
  const size_t ihl = size_t(ip[0] & 0x0f) * 4;
  ip[10] = ip[11] = 0;
  uint32_t sum = 0;
  for (size_t i = 0; i + 1 < ihl; i += 2) sum += load_be16(ip + i);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  store_be16(ip + 10, uint16_t(~sum));
}

bool prob_ok(double p) { return p >= 0 && p <= 1; }  // false for NaN

mrc::Status check_params(const LinkParams& p, const char* tier) {
  auto bad = [&](const char* what) {
    return mrc::make_error(
        EINVAL, std::string("NetConfig.") + tier + "." + what + " must be a probability in [0, 1]");
  };
  if (!prob_ok(p.loss)) return bad("loss");
  if (!prob_ok(p.reorder)) return bad("reorder");
  if (!prob_ok(p.dup)) return bad("dup");
  if (!prob_ok(p.corrupt)) return bad("corrupt");
  return {};
}

}  // namespace

// ---------------------------------------------------------------------------
// Names and counters

std::string_view to_string(Tier t) {
  switch (t) {
    case Tier::kUplink:
      return "uplink";
    case Tier::kSpine:
      return "path";
    case Tier::kDownlink:
      return "downlink";
  }
  return "?";
}

std::string_view to_string(Drop d) {
  switch (d) {
    case Drop::kDown:
      return "down";
    case Drop::kBlackhole:
      return "blackhole";
    case Drop::kQueueFull:
      return "queue_full";
    case Drop::kLoss:
      return "loss";
    case Drop::kNoRoute:
      return "no_route";
    case Drop::kNoReceiver:
      return "no_receiver";
    case Drop::kOversize:
      return "oversize";
    case Drop::kBadPort:
      return "bad_port";
    case Drop::kCount:
      break;
  }
  return "?";
}

std::string_view to_string(TraceKind k) {
  switch (k) {
    case TraceKind::kSend:
      return "send";
    case TraceKind::kDrop:
      return "drop";
    case TraceKind::kTrim:
      return "trim";
    case TraceKind::kEcnMark:
      return "ecn";
    case TraceKind::kDup:
      return "dup";
    case TraceKind::kCorrupt:
      return "corrupt";
    case TraceKind::kReorder:
      return "reorder";
    case TraceKind::kDeliver:
      return "deliver";
  }
  return "?";
}

uint64_t LinkCounters::dropped() const {
  uint64_t n = 0;
  for (auto d : drops) n += d;
  return n;
}

LinkCounters& LinkCounters::operator+=(const LinkCounters& o) {
  rx_frames += o.rx_frames;
  rx_bytes += o.rx_bytes;
  tx_frames += o.tx_frames;
  tx_bytes += o.tx_bytes;
  for (size_t i = 0; i < drops.size(); i++) drops[i] += o.drops[i];
  trims += o.trims;
  ecn_marks += o.ecn_marks;
  dups += o.dups;
  corruptions += o.corruptions;
  reorders += o.reorders;
  max_queue_bytes = std::max(max_queue_bytes, o.max_queue_bytes);
  max_ctrl_queue_bytes = std::max(max_ctrl_queue_bytes, o.max_ctrl_queue_bytes);
  return *this;
}

std::string LinkCounters::to_string() const {
  std::string s = "rx " + std::to_string(rx_frames) + "/" + std::to_string(rx_bytes) + "B tx " +
                  std::to_string(tx_frames) + "/" + std::to_string(tx_bytes) + "B";
  for (size_t i = 0; i < drops.size(); i++)
    if (drops[i])
      s += " drop_" + std::string(sim::to_string(Drop(i))) + " " + std::to_string(drops[i]);
  if (trims) s += " trim " + std::to_string(trims);
  if (ecn_marks) s += " ecn " + std::to_string(ecn_marks);
  if (dups) s += " dup " + std::to_string(dups);
  if (corruptions) s += " corrupt " + std::to_string(corruptions);
  if (reorders) s += " reorder " + std::to_string(reorders);
  s += " maxq " + std::to_string(max_queue_bytes) + "B";
  if (max_ctrl_queue_bytes) s += " maxq_ctrl " + std::to_string(max_ctrl_queue_bytes) + "B";
  return s;
}

uint64_t NetCounters::dropped() const {
  uint64_t n = 0;
  for (auto d : drops) n += d;
  return n;
}

std::string LinkSel::to_string() const {
  auto num = [](int32_t v) { return v == kAny ? std::string("*") : std::to_string(v); };
  switch (kind) {
    case Kind::kAll:
      return "all";
    case Kind::kPlane:
      return "plane " + num(a);
    case Kind::kPath:
      return "path " + num(a) + "/" + num(b);
    case Kind::kUplink:
      return "uplink " + num(a) + "/" + num(b);
    case Kind::kDownlink:
      return "downlink " + num(a) + "/" + num(b);
    case Kind::kPort:
      return "port " + num(a) + "/" + num(b);
    case Kind::kHost:
      return "host " + num(a);
  }
  return "?";
}

std::string format_time(Time t) {
  if (t != 0 && t % kSec == 0) return std::to_string(t / kSec) + "s";
  if (t != 0 && t % kMs == 0) return std::to_string(t / kMs) + "ms";
  if (t != 0 && t % kUs == 0) return std::to_string(t / kUs) + "us";
  return std::to_string(t) + "ns";
}

// ---------------------------------------------------------------------------
// Config

mrc::Status NetConfig::validate() const {
  if (hosts < 1 || hosts > kMaxHosts)
    return mrc::make_error(EINVAL, "NetConfig.hosts = " + std::to_string(hosts) +
                                       ": must be in [1, 256] (one address byte)");
  if (planes < 1 || planes > kMaxPlanes)
    return mrc::make_error(EINVAL, "NetConfig.planes = " + std::to_string(planes) +
                                       ": must be in [1, 256] (one address byte)");
  if (paths_per_plane < 1 || paths_per_plane > kMaxPathsPerPlane)
    return mrc::make_error(EINVAL, "NetConfig.paths_per_plane = " +
                                       std::to_string(paths_per_plane) + ": must be in [1, 65536]");
  if (max_frame < 64 || max_frame > 65535)
    return mrc::make_error(
        EINVAL, "NetConfig.max_frame = " + std::to_string(max_frame) + ": must be in [64, 65535]");
  for (uint8_t d : {dscp.control, dscp.trimmable, dscp.trimmable_retx, dscp.no_trim, dscp.trimmed,
                    dscp.trimmed_lasthop})
    if (d > 63) return mrc::make_error(EINVAL, "NetConfig.dscp: codepoints are 6 bits (0..63)");
  MRC_TRY(check_params(uplink, "uplink"));
  MRC_TRY(check_params(spine, "spine"));
  MRC_TRY(check_params(downlink, "downlink"));
  return {};
}

// ---------------------------------------------------------------------------
// Construction

mrc::Result<std::unique_ptr<Network>> Network::create(const NetConfig& cfg) {
  auto st = cfg.validate();
  if (!st) return std::move(st).error();
  return std::make_unique<Network>(cfg);
}

Network::Network(const NetConfig& cfg) : cfg_(cfg) {
  cfg_.hosts = std::clamp<uint32_t>(cfg_.hosts, 1, kMaxHosts);
  cfg_.planes = std::clamp<uint32_t>(cfg_.planes, 1, kMaxPlanes);
  cfg_.paths_per_plane = std::clamp<uint32_t>(cfg_.paths_per_plane, 1, kMaxPathsPerPlane);
  cfg_.max_frame = std::clamp<uint32_t>(cfg_.max_frame, 64, 65535);
  n_host_links_ = cfg_.hosts * cfg_.planes;
  n_spine_links_ = cfg_.planes * cfg_.paths_per_plane;
  links_.resize(2 * n_host_links_ + n_spine_links_);
  for (LinkId id = 0; id < links_.size(); id++) {
    Link& L = links_[id];
    if (id < n_host_links_) {
      L.tier = Tier::kUplink;
      L.index = id / cfg_.planes;
      L.plane = id % cfg_.planes;
      L.p = cfg_.uplink;
    } else if (id < n_host_links_ + n_spine_links_) {
      L.tier = Tier::kSpine;
      L.plane = (id - n_host_links_) / cfg_.paths_per_plane;
      L.index = (id - n_host_links_) % cfg_.paths_per_plane;
      L.p = cfg_.spine;
    } else {
      L.tier = Tier::kDownlink;
      L.index = (id - n_host_links_ - n_spine_links_) / cfg_.planes;
      L.plane = (id - n_host_links_ - n_spine_links_) % cfg_.planes;
      L.p = cfg_.downlink;
    }
    // An independent stream per link, so a fault on one link does not shift
    // the random draws of another.
    L.rng.reseed(mix64(cfg_.seed ^ mix64(0x6c696e6b00000000ull + id)));
  }
  rx_.resize(cfg_.hosts);
  port_fn_.resize(cfg_.hosts);
  heap_.reserve(4096);
  pkts_.reserve(4096);
}

Network::~Network() = default;

// ---------------------------------------------------------------------------
// Addresses and routing

codec::Mac Network::mac_of(uint32_t host, uint32_t plane) const {
  return {0x02, 0, 0, 0, uint8_t(plane), uint8_t(host)};
}

codec::IpAddr Network::ip_of(uint32_t host, uint32_t plane) const {
  return ip_of(host, plane, cfg_.ip_version);
}

codec::IpAddr Network::ip_of(uint32_t host, uint32_t plane, codec::IpVersion v) const {
  if (v == codec::IpVersion::kV4) return codec::IpAddr::v4(198, 18, uint8_t(plane), uint8_t(host));
  codec::IpAddr a;
  a.ver = codec::IpVersion::kV6;
  a.b[0] = 0xfd;
  a.b[13] = uint8_t(plane);
  a.b[15] = uint8_t(host);
  return a;
}

Network::Route Network::classify(std::span<const uint8_t> f) const {
  Route r;
  const uint8_t* p = f.data();
  const size_t n = f.size();
  if (n < 14) return r;
  size_t off = 12;
  uint16_t et = load_be16(p + off);
  if (et == kEth8021Q || et == kEth8021AD) {
    if (n < 18) return r;
    off += 4;
    et = load_be16(p + off);
  }
  off += 2;
  uint64_t h = cfg_.ecmp_seed ^ 0x65636d7068617368ull;
  auto add = [&h](uint64_t v) { h = mix64(h ^ v) + 0x9e3779b97f4a7c15ull; };
  int host = -1, plane = -1;
  if (et == kEthIPv4 && n >= off + 20 && (p[off] >> 4) == 4) {
    const uint8_t* ip = p + off;
    const size_t ihl = size_t(ip[0] & 0x0f) * 4;
    r.l3 = uint16_t(off);
    if (ip[16] == 198 && ip[17] == 18) plane = ip[18], host = ip[19];
    uint16_t sport = 0;
    if (ip[9] == kProtoUdp && ihl >= 20 && n >= off + ihl + 8) {
      r.l4 = uint16_t(off + ihl);
      sport = load_be16(p + r.l4);
    }
    add(load_be32(ip + 12));
    add(load_be32(ip + 16));
    add(sport);
  } else if (et == kEthIPv6 && n >= off + 40 && (p[off] >> 4) == 6) {
    const uint8_t* ip = p + off;
    const uint8_t* dst = ip + 24;
    r.l3 = uint16_t(off);
    r.v6 = true;
    static constexpr uint8_t kZero[12] = {};
    if (dst[0] == 0xfd && std::memcmp(dst + 1, kZero, 11) == 0 && dst[12] == 0 && dst[14] == 0)
      plane = dst[13], host = dst[15];
    uint16_t sport = 0;
    if (ip[6] == kProtoUdp && n >= off + 48) {
      r.l4 = uint16_t(off + 40);
      sport = load_be16(p + r.l4);
    }
    uint64_t w[4];
    std::memcpy(w, ip + 8, 32);
    for (uint64_t x : w) add(x);
    add(sport);
    add(load_be24(ip + 1) & 0xfffff);
  } else {
    // Not IP: deliver by destination MAC if it is one of ours.
    if (p[0] == 0x02 && p[1] == 0 && p[2] == 0 && p[3] == 0) plane = p[4], host = p[5];
    uint64_t w[2] = {0, 0};
    std::memcpy(w, p, 12);
    add(w[0]);
    add(w[1]);
  }
  if (host >= 0 && uint32_t(host) < cfg_.hosts && uint32_t(plane) < cfg_.planes) {
    r.dst_host = host;
    r.plane = plane;
  }
  r.path = uint32_t((unsigned __int128)mix64(h) * cfg_.paths_per_plane >> 64);
  return r;
}

int Network::ecmp_path(std::span<const uint8_t> frame) const {
  Route r = classify(frame);
  return r.dst_host < 0 ? -1 : int(r.path);
}

// ---------------------------------------------------------------------------
// Links

LinkInfo Network::info(LinkId id) const {
  const Link& L = links_[id];
  return {L.tier, L.plane, L.index};
}

std::string Network::link_name(LinkId id) const {
  const Link& L = links_[id];
  if (L.tier == Tier::kSpine)
    return "path " + std::to_string(L.plane) + "/" + std::to_string(L.index);
  return std::string(to_string(L.tier)) + " " + std::to_string(L.index) + "/" +
         std::to_string(L.plane);
}

std::vector<LinkId> Network::select(const LinkSel& s) const {
  using K = LinkSel::Kind;
  auto match = [](int32_t want, uint32_t have) {
    return want == LinkSel::kAny || (want >= 0 && uint32_t(want) == have);
  };
  std::vector<LinkId> out;
  for (LinkId id = 0; id < links_.size(); id++) {
    const Link& L = links_[id];
    bool hit = false;
    switch (s.kind) {
      case K::kAll:
        hit = true;
        break;
      case K::kPlane:
        hit = match(s.a, L.plane);
        break;
      case K::kPath:
        hit = L.tier == Tier::kSpine && match(s.a, L.plane) && match(s.b, L.index);
        break;
      case K::kUplink:
        hit = L.tier == Tier::kUplink && match(s.a, L.index) && match(s.b, L.plane);
        break;
      case K::kDownlink:
        hit = L.tier == Tier::kDownlink && match(s.a, L.index) && match(s.b, L.plane);
        break;
      case K::kPort:
        hit = L.tier != Tier::kSpine && match(s.a, L.index) && match(s.b, L.plane);
        break;
      case K::kHost:
        hit = L.tier != Tier::kSpine && match(s.a, L.index);
        break;
    }
    if (hit) out.push_back(id);
  }
  return out;
}

mrc::Status Network::check(const LinkSel& s) const {
  using K = LinkSel::Kind;
  auto in = [&](int32_t v, uint32_t limit, const char* what, const char* many) -> mrc::Status {
    if (v == LinkSel::kAny || (v >= 0 && uint32_t(v) < limit)) return {};
    return mrc::make_error(EINVAL, std::string(what) + " " + std::to_string(v) +
                                       " does not exist (the network has " + std::to_string(limit) +
                                       " " + many + ")");
  };
  switch (s.kind) {
    case K::kAll:
      return {};
    case K::kPlane:
      return in(s.a, cfg_.planes, "plane", "planes");
    case K::kPath:
      MRC_TRY(in(s.a, cfg_.planes, "plane", "planes"));
      return in(s.b, cfg_.paths_per_plane, "path", "paths per plane");
    case K::kUplink:
    case K::kDownlink:
    case K::kPort:
      MRC_TRY(in(s.a, cfg_.hosts, "host", "hosts"));
      return in(s.b, cfg_.planes, "plane", "planes");
    case K::kHost:
      return in(s.a, cfg_.hosts, "host", "hosts");
  }
  return {};
}

bool Network::port_up(uint32_t host, uint32_t plane) const {
  if (host >= cfg_.hosts || plane >= cfg_.planes) return false;
  return links_[uplink(host, plane)].p.up && links_[downlink(host, plane)].p.up;
}

void Network::set_params(LinkId id, const LinkParams& p) {
  Link& L = links_[id];
  const bool host_link = L.tier != Tier::kSpine;
  const bool was_up = host_link && port_up(L.index, L.plane);
  L.p = p;
  if (host_link) notify_ports(id, was_up);
}

void Network::notify_ports(LinkId id, bool was_up) {
  const Link& L = links_[id];
  const bool is_up = port_up(L.index, L.plane);
  if (is_up != was_up && port_fn_[L.index]) port_fn_[L.index](int(L.plane), is_up, now_);
}

void Network::update(const LinkSel& sel, const std::function<void(LinkParams&, Tier)>& fn) {
  for (LinkId id : select(sel)) {
    LinkParams p = links_[id].p;
    fn(p, links_[id].tier);
    set_params(id, p);
  }
}

const LinkParams& Network::default_params(Tier t) const {
  switch (t) {
    case Tier::kUplink:
      return cfg_.uplink;
    case Tier::kSpine:
      return cfg_.spine;
    case Tier::kDownlink:
      break;
  }
  return cfg_.downlink;
}

LinkCounters Network::plane_counters(uint32_t plane) const {
  LinkCounters c;
  for (const Link& L : links_)
    if (L.plane == plane) c += L.c;
  return c;
}

LinkCounters Network::tier_counters(Tier t) const {
  LinkCounters c;
  for (const Link& L : links_)
    if (L.tier == t) c += L.c;
  return c;
}

void Network::reset_counters() {
  for (Link& L : links_) L.c = LinkCounters{};
  net_ = NetCounters{};
}

std::string Network::dump_counters() const {
  std::string s;
  for (LinkId id = 0; id < links_.size(); id++) {
    if (!links_[id].c.rx_frames) continue;
    s += link_name(id) + ": " + links_[id].c.to_string() + "\n";
  }
  s += "net: sent " + std::to_string(net_.sent) + " delivered " + std::to_string(net_.delivered);
  for (size_t i = 0; i < net_.drops.size(); i++)
    if (net_.drops[i])
      s += " drop_" + std::string(to_string(Drop(i))) + " " + std::to_string(net_.drops[i]);
  s += "\n";
  return s;
}

// ---------------------------------------------------------------------------
// Hosts

void Network::attach(uint32_t host, RxFn rx) {
  if (host < cfg_.hosts) rx_[host] = std::move(rx);
}

void Network::on_port_change(uint32_t host, PortFn fn) {
  if (host < cfg_.hosts) port_fn_[host] = std::move(fn);
}

bool Network::send(uint32_t host, uint32_t port, std::span<const uint8_t> frame) {
  const uint64_t id = frame_ids_++;
  if (host >= cfg_.hosts || port >= cfg_.planes) {
    net_.drops[size_t(Drop::kBadPort)]++;
    if (trace_) trace_({now_, TraceKind::kDrop, Drop::kBadPort, kNoLink, host, port, id}, frame);
    return false;
  }
  if (frame.empty() || frame.size() > cfg_.max_frame) {
    net_.drops[size_t(Drop::kOversize)]++;
    if (trace_) trace_({now_, TraceKind::kDrop, Drop::kOversize, kNoLink, host, port, id}, frame);
    return false;
  }
  const Route r = classify(frame);
  if (r.dst_host < 0 || uint32_t(r.plane) != port) {
    net_.drops[size_t(Drop::kNoRoute)]++;
    if (trace_) trace_({now_, TraceKind::kDrop, Drop::kNoRoute, kNoLink, host, port, id}, frame);
    return false;
  }
  const uint32_t pi = alloc_pkt(uint32_t(frame.size()));
  Pkt& P = pkts_[pi];
  std::memcpy(P.buf, frame.data(), frame.size());
  P.len = uint32_t(frame.size());
  P.id = id;
  P.links[0] = uplink(host, port);
  P.links[1] = spine(port, r.path);
  P.links[2] = downlink(uint32_t(r.dst_host), port);
  P.l3 = r.l3;
  P.l4 = r.l4;
  P.v6 = r.v6;
  P.dst_host = uint16_t(r.dst_host);
  P.plane = uint8_t(port);
  P.hop = 0;
  net_.sent++;
  net_.sent_bytes += P.len;
  if (trace_) trace(TraceKind::kSend, Drop::kCount, kNoLink, host, port, P);
  return ingress(P.links[0], pi);
}

// ---------------------------------------------------------------------------
// Frame editing

uint8_t Network::dscp_of(const Pkt& P) const {
  if (!P.l3) return 0;
  const uint8_t* ip = P.buf + P.l3;
  return P.v6 ? uint8_t(((ip[0] & 0x0f) << 4 | ip[1] >> 4) >> 2) : uint8_t(ip[1] >> 2);
}

bool Network::is_ctrl_class(uint8_t d) const {
  return d == cfg_.dscp.control || d == cfg_.dscp.trimmed || d == cfg_.dscp.trimmed_lasthop;
}

bool Network::try_trim(Link& L, Pkt& P) {
  if (!P.l4) return false;
  uint8_t* b = P.buf;
  if (load_be16(b + P.l4 + 2) != cfg_.udp_port) return false;
  const uint8_t d = dscp_of(P);
  if (d != cfg_.dscp.trimmable && d != cfg_.dscp.trimmable_retx) return false;
  const uint32_t bth = P.l4 + 8u;
  if (P.len < bth + sizeof(mrc_bth)) return false;
  const uint8_t op = b[bth];
  if (!codec::is_data_opcode(op)) return false;
  const bool ts = load_be32(b + bth + 8) & MRC_BTH_F_TS;
  const uint32_t newlen = bth + uint32_t(sizeof(mrc_bth)) + codec::ext_header_len(op, ts);
  if (newlen >= P.len) return false;
  P.len = newlen;
  const uint8_t nd = L.tier == Tier::kDownlink ? cfg_.dscp.trimmed_lasthop : cfg_.dscp.trimmed;
  uint8_t* ip = b + P.l3;
  if (P.v6) {
    const uint8_t tc = uint8_t(nd << 2 | (ip[1] >> 4 & 3));
    ip[0] = uint8_t(0x60 | tc >> 4);
    ip[1] = uint8_t(tc << 4 | (ip[1] & 0x0f));
    store_be16(ip + 4, uint16_t(newlen - P.l3 - 40));
  } else {
    ip[1] = uint8_t(nd << 2 | (ip[1] & 3));
    store_be16(ip + 2, uint16_t(newlen - P.l3));
    ipv4_fix_checksum(ip);
  }
  store_be16(b + P.l4 + 4, uint16_t(newlen - P.l4));
  store_be16(b + P.l4 + 6, 0);
  return true;
}

void Network::mark_ce(Pkt& P) {
  uint8_t* ip = P.buf + P.l3;
  if (P.v6)
    ip[1] |= 0x30;
  else {
    ip[1] |= 0x03;
    ipv4_fix_checksum(ip);
  }
}

bool Network::corrupt(Link& L, Pkt& P) {
  const uint8_t* b = P.buf;
  size_t start = 14, end = P.len;
  if (P.l3) {
    const uint8_t* ip = b + P.l3;
    const size_t l3_end = P.v6 ? P.l3 + 40u + load_be16(ip + 4) : P.l3 + size_t(load_be16(ip + 2));
    end = std::min<size_t>(end, l3_end);
    start = P.l3 + (P.v6 ? 40u : size_t(ip[0] & 0x0f) * 4);
    if (P.l4) {
      start = P.l4 + 8u;
      const size_t bth = start;
      if (load_be16(b + P.l4 + 2) == cfg_.udp_port && P.len >= bth + sizeof(mrc_bth) &&
          codec::opcode_info(b[bth]))
        start = bth + sizeof(mrc_bth) +
                codec::ext_header_len(b[bth], load_be32(b + bth + 8) & MRC_BTH_F_TS);
    }
  }
  if (start >= end) return false;
  const size_t pos = start + size_t(L.rng.below(end - start));
  P.buf[pos] ^= uint8_t(1u << L.rng.below(8));
  return true;
}

// ---------------------------------------------------------------------------
// The data path

void Network::trace(TraceKind k, Drop d, LinkId li, uint32_t host, uint32_t port, const Pkt& P) {
  trace_({now_, k, d, li, host, port, P.id}, {P.buf, P.len});
}

void Network::drop(LinkId li, uint32_t pi, Drop why) {
  links_[li].c.drops[size_t(why)]++;
  net_.drops[size_t(why)]++;
  if (trace_) trace(TraceKind::kDrop, why, li, ~0u, ~0u, pkts_[pi]);
  free_pkt(pi);
}

bool Network::ingress(LinkId li, uint32_t pi) {
  Link& L = links_[li];
  Pkt& P = pkts_[pi];
  L.c.rx_frames++;
  L.c.rx_bytes += P.len;
  if (!L.p.up) {
    drop(li, pi, Drop::kDown);
    return false;
  }
  if (L.p.blackhole) {
    drop(li, pi, Drop::kBlackhole);
    return false;
  }
  int cls = is_ctrl_class(dscp_of(P)) ? kCtrl : kData;
  if (cls == kData) {
    // Occupancy of the data queue if this frame were admitted.
    const uint64_t occ = uint64_t(L.qbytes[kData]) + P.len;
    const bool full = occ > L.p.queue_bytes;
    if ((full || occ > L.p.trim_threshold) && L.p.trim_threshold != kOff && try_trim(L, P)) {
      L.c.trims++;
      if (trace_) trace(TraceKind::kTrim, Drop::kCount, li, ~0u, ~0u, P);
      cls = kCtrl;
    } else if (full) {
      drop(li, pi, Drop::kQueueFull);
      return false;
    } else if (occ > L.p.ecn_threshold && L.tier != Tier::kDownlink && P.l3) {
      const uint8_t* ip = P.buf + P.l3;
      const uint8_t ecn = P.v6 ? (ip[1] >> 4) & 3 : ip[1] & 3;
      if (ecn == MRC_ECN_ECT0 || ecn == MRC_ECN_ECT1) {
        mark_ce(P);
        L.c.ecn_marks++;
        if (trace_) trace(TraceKind::kEcnMark, Drop::kCount, li, ~0u, ~0u, P);
      }
    }
  }
  if (cls == kCtrl && uint64_t(L.qbytes[kCtrl]) + P.len > L.p.queue_bytes) {
    drop(li, pi, Drop::kQueueFull);
    return false;
  }
  if (L.q[kCtrl].empty() && L.q[kData].empty() && now_ >= L.busy_until) {
    start_tx(li, pi);
    return true;
  }
  L.q[cls].push(pi);
  L.qbytes[cls] += P.len;
  if (cls == kData)
    L.c.max_queue_bytes = std::max(L.c.max_queue_bytes, L.qbytes[kData]);
  else
    L.c.max_ctrl_queue_bytes = std::max(L.c.max_ctrl_queue_bytes, L.qbytes[kCtrl]);
  if (!L.tx_pending) {
    L.tx_pending = true;
    push_event(L.busy_until, kEvTxDone, li);
  }
  return true;
}

void Network::start_tx(LinkId li, uint32_t pi) {
  Link& L = links_[li];
  const uint32_t len = pkts_[pi].len;
  const uint64_t rate = L.p.rate_bps;
  const Time ser = rate ? (uint64_t(len) * 8'000'000'000ull + rate - 1) / rate : 0;
  L.busy_until = now_ + ser;
  if (L.p.loss > 0 && L.rng.chance(L.p.loss)) {
    drop(li, pi, Drop::kLoss);
    return;
  }
  if (L.p.corrupt > 0 && L.rng.chance(L.p.corrupt) && corrupt(L, pkts_[pi])) {
    L.c.corruptions++;
    if (trace_) trace(TraceKind::kCorrupt, Drop::kCount, li, ~0u, ~0u, pkts_[pi]);
  }
  Time t = L.busy_until + L.p.latency + (L.p.jitter ? L.rng.below(L.p.jitter + 1) : 0);
  if (t < L.last_arrival) t = L.last_arrival;  // jitter does not reorder a link
  L.last_arrival = t;
  if (L.p.reorder > 0 && L.rng.chance(L.p.reorder)) {
    t += L.p.reorder_delay;
    L.c.reorders++;
    if (trace_) trace(TraceKind::kReorder, Drop::kCount, li, ~0u, ~0u, pkts_[pi]);
  }
  push_event(t, kEvHop, pi);
  if (L.p.dup > 0 && L.rng.chance(L.p.dup)) {
    const uint32_t ci = alloc_pkt(len);
    Pkt& C = pkts_[ci];
    const Pkt& P = pkts_[pi];
    uint8_t* buf = C.buf;
    const uint32_t cap = C.cap;
    C = P;
    C.buf = buf;
    C.cap = cap;
    std::memcpy(C.buf, P.buf, len);
    L.c.dups++;
    if (trace_) trace(TraceKind::kDup, Drop::kCount, li, ~0u, ~0u, C);
    push_event(t, kEvHop, ci);
  }
}

void Network::on_tx_done(LinkId li) {
  Link& L = links_[li];
  L.tx_pending = false;
  const int cls = !L.q[kCtrl].empty() ? kCtrl : kData;
  if (L.q[cls].empty()) return;
  const uint32_t pi = L.q[cls].pop();
  L.qbytes[cls] -= pkts_[pi].len;
  start_tx(li, pi);
  if (!L.q[kCtrl].empty() || !L.q[kData].empty()) {
    L.tx_pending = true;
    push_event(L.busy_until, kEvTxDone, li);
  }
}

void Network::on_hop(uint32_t pi) {
  Pkt& P = pkts_[pi];
  const LinkId li = P.links[P.hop];
  Link& L = links_[li];
  if (!L.p.up) {  // went down while the frame was on the wire
    drop(li, pi, Drop::kDown);
    return;
  }
  L.c.tx_frames++;
  L.c.tx_bytes += P.len;
  if (++P.hop < 3) {
    ingress(P.links[P.hop], pi);
    return;
  }
  const uint32_t host = P.dst_host, port = P.plane;
  if (!rx_[host]) {
    net_.drops[size_t(Drop::kNoReceiver)]++;
    if (trace_) trace(TraceKind::kDrop, Drop::kNoReceiver, kNoLink, host, port, P);
    free_pkt(pi);
    return;
  }
  net_.delivered++;
  net_.delivered_bytes += P.len;
  if (trace_) trace(TraceKind::kDeliver, Drop::kCount, kNoLink, host, port, P);
  // rx may send (growing pkts_), so hold the buffer, not the record.
  const std::span<const uint8_t> f(P.buf, P.len);
  rx_[host](int(port), f, now_);
  free_pkt(pi);
}

// ---------------------------------------------------------------------------
// Events

namespace {
inline bool before(Time at, uint64_t as, Time bt, uint64_t bs) {
  return at < bt || (at == bt && as < bs);
}
}  // namespace

void Network::push_event(Time t, uint32_t kind, uint32_t arg) {
  // Binary min-heap on (time, sequence). The sequence makes the order total,
  // so any correct heap pops the same order. (A 4-ary heap measured slower:
  // the heap stays small and the extra comparisons cost more than depth.)
  const Ev e{t, ++seq_, kind, arg};
  size_t i = heap_.size();
  heap_.push_back(e);
  while (i > 0) {
    const size_t parent = (i - 1) / 2;
    if (!before(e.t, e.seq, heap_[parent].t, heap_[parent].seq)) break;
    heap_[i] = heap_[parent];
    i = parent;
  }
  heap_[i] = e;
}

void Network::pop_event() {
  const Ev last = heap_.back();
  heap_.pop_back();
  const size_t n = heap_.size();
  if (!n) return;
  size_t i = 0;
  for (;;) {
    const size_t first = 2 * i + 1;
    if (first >= n) break;
    size_t c = first;
    if (first + 1 < n && before(heap_[first + 1].t, heap_[first + 1].seq, heap_[c].t, heap_[c].seq))
      c = first + 1;
    if (!before(heap_[c].t, heap_[c].seq, last.t, last.seq)) break;
    heap_[i] = heap_[c];
    i = c;
  }
  heap_[i] = last;
}

Network::TimerId Network::at(Time t, TimerFn fn) {
  if (t < now_) t = now_;
  uint32_t slot;
  if (!free_timers_.empty()) {
    slot = free_timers_.back();
    free_timers_.pop_back();
  } else {
    slot = uint32_t(timers_.size());
    timers_.emplace_back();
  }
  push_event(t, kEvTimer, slot);
  timers_[slot].fn = std::move(fn);
  timers_[slot].seq = seq_;
  return {slot, seq_};
}

bool Network::cancel(TimerId id) {
  if (id.slot >= timers_.size() || timers_[id.slot].seq != id.seq || id.seq == 0) return false;
  timers_[id.slot].fn = nullptr;
  timers_[id.slot].seq = 0;
  free_timers_.push_back(id.slot);
  return true;
}

Time Network::next_event_time() {
  // Cancelled timers at the top are dropped so they do not hold time back.
  while (!heap_.empty() && heap_[0].kind == kEvTimer && timers_[heap_[0].arg].seq != heap_[0].seq)
    pop_event();
  return heap_.empty() ? kNever : heap_[0].t;
}

bool Network::step() {
  if (next_event_time() == kNever) return false;
  const Ev top = heap_[0];
  pop_event();
  now_ = top.t;
  dispatch(top);
  return true;
}

void Network::dispatch(const Ev& e) {
  switch (e.kind) {
    case kEvHop:
      on_hop(e.arg);
      break;
    case kEvTxDone:
      on_tx_done(e.arg);
      break;
    case kEvTimer: {
      Timer& tm = timers_[e.arg];
      if (tm.seq != e.seq) break;
      TimerFn fn = std::move(tm.fn);
      tm.fn = nullptr;
      tm.seq = 0;
      free_timers_.push_back(e.arg);
      fn();  // may schedule more timers (timers_ may grow)
      break;
    }
    default:
      break;
  }
}

void Network::run_until(Time t) {
  while (next_event_time() <= t && step()) {
  }
  if (t != kNever && now_ < t) now_ = t;
}

bool Network::run_until_done(const std::function<bool()>& done, Time deadline) {
  while (!done()) {
    if (next_event_time() > deadline || !step()) return done();
  }
  return true;
}

bool Network::run_until_idle(Time deadline) {
  while (next_event_time() <= deadline && step()) {
  }
  return next_event_time() == kNever;
}

// ---------------------------------------------------------------------------
// Pools

void Network::Ring::push(uint32_t x) {
  if (n == v.size()) {
    // Grow (power of two), unrolling the ring into the new storage.
    std::vector<uint32_t> nv(v.empty() ? 64 : v.size() * 2);
    for (uint32_t i = 0; i < n; i++) nv[i] = v[(head + i) & (v.size() - 1)];
    v.swap(nv);
    head = 0;
  }
  v[(head + n) & (v.size() - 1)] = x;
  n++;
}

uint32_t Network::Ring::pop() {
  const uint32_t x = v[head];
  head = (head + 1) & uint32_t(v.size() - 1);
  n--;
  return x;
}

uint8_t* Network::alloc_buf(uint32_t len, uint32_t& cap) {
  const bool small = len <= kSmallBuf;
  auto& fl = small ? free_small_ : free_large_;
  const uint32_t size = small ? kSmallBuf : cfg_.max_frame;
  if (fl.empty()) {
    slabs_.emplace_back(new uint8_t[size_t(size) * kSlabBuffers]);
    uint8_t* base = slabs_.back().get();
    for (uint32_t i = kSlabBuffers; i-- > 0;) fl.push_back(base + size_t(i) * size);
    n_buffers_ += kSlabBuffers;
  }
  uint8_t* b = fl.back();
  fl.pop_back();
  cap = size;
  return b;
}

uint32_t Network::alloc_pkt(uint32_t len) {
  uint32_t pi;
  if (!free_pkts_.empty()) {
    pi = free_pkts_.back();
    free_pkts_.pop_back();
  } else {
    pi = uint32_t(pkts_.size());
    pkts_.emplace_back();
  }
  Pkt& P = pkts_[pi];
  P.buf = alloc_buf(len, P.cap);
  return pi;
}

void Network::free_pkt(uint32_t pi) {
  Pkt& P = pkts_[pi];
  (P.cap == kSmallBuf ? free_small_ : free_large_).push_back(P.buf);
  P.buf = nullptr;
  free_pkts_.push_back(pi);
}

}  // namespace mrc::sim
