// Fixture table for bpf/mrc_xdp.bpf.c run through BPF_PROG_TEST_RUN
// (Katran-style): every row is an input frame, the expected XDP action, the
// expected output bytes and the expected counter deltas of mrc_stats.
// Redirect rows need a real AF_XDP socket in mrc_xsks: the process runs in a
// private network namespace with a veth pair and binds one in copy mode.
#include <bpf/bpf.h>
#include <gtest/gtest.h>
#include <net/if.h>
#include <time.h>

#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "bpf_test_env.hpp"
#include "codec/bytes.hpp"
#include "codec/ev.hpp"
#include "codec/icrc.hpp"
#include "codec/srv6.hpp"
#include "loader/mrc_xdp.hpp"
#include "mrc_crc32_table.h"
#include "xdp_rows.hpp"

namespace mrc::testing {
namespace {

using namespace mrc::codec;
using loader::MrcXdp;
using loader::XdpMaps;

constexpr uint32_t kPort = 3;
constexpr uint32_t kLocalQpn = 0x000123;  // make_packet()'s DestQP
constexpr uint32_t kRemoteQpn = 0x00abcdef;
constexpr uint32_t kNoNackQpn = 0x000777;
constexpr uint16_t kPortUpMask = 0x0005;
constexpr uint8_t kDscpTrimmed = MRC_DSCP_TRIMMED_DEFAULT;
constexpr uint8_t kDscpLastHop = MRC_DSCP_TRIMMED_LASTHOP_DEFAULT;
constexpr uint8_t kDscpControl = MRC_DSCP_CONTROL_DEFAULT;

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// One loaded program, a veth pair and an XSK per test process.
struct Env {
  MrcXdp prog;
  XskSocket xsk;
  uint32_t ifindex = 0;
  uint32_t lo_ifindex = 0;

  static Env& get() {
    static std::unique_ptr<Env> env = [] {
      auto p = MrcXdp::open_and_load();
      if (!p) throw std::runtime_error(p.error().message());
      auto e = std::unique_ptr<Env>(new Env{std::move(*p), {}, 0, 0});
      std::string a = "mrcx" + std::to_string(getpid() % 100000) + "a";
      std::string b = "mrcx" + std::to_string(getpid() % 100000) + "b";
      if (auto s = make_veth(a, b); !s) throw std::runtime_error(s.error().message());
      e->ifindex = if_nametoindex(a.c_str());
      e->lo_ifindex = if_nametoindex("lo");
      if (auto s = e->xsk.open(a, 0); !s) throw std::runtime_error(s.error().message());
      return e;
    }();
    return *env;
  }

  // The state every row starts from.
  void reset() {
    XdpMaps& m = prog.maps();
    mrc_xdp_cfg cfg = loader::default_xdp_cfg();
    cfg.port_up_mask = kPortUpMask;
    ASSERT_TRUE(m.set_cfg(cfg));
    ASSERT_TRUE(m.set_port(ifindex, {kPort, 0}));
    ASSERT_TRUE(m.set_qp(kLocalQpn, {kRemoteQpn, 0}));
    ASSERT_TRUE(m.set_qp(kNoNackQpn, {kRemoteQpn, MRC_QP_F_NO_TRIM_NACK}));
    ASSERT_TRUE(m.set_xsk(kPort, 0, xsk.fd()));
  }
};

enum class Out {
  kSame,        // output == input (PASS/DROP)
  kMeta,        // struct mrc_xdp_meta + input (REDIRECT)
  kExact,       // byte for byte `expect` (NACK), parses with ICRC
  kEpResponse,  // `expect` except time fields, parses with ICRC
};

struct MetaExpect {
  uint8_t kind = 0, opcode = 0, ecn = 0;
  uint16_t l3_off = 0, bth_off = 0, payload_off = 0, payload_len = 0;
};

struct Row {
  std::string name;
  Frame in;
  uint32_t action = XDP_PASS;
  Out out = Out::kSame;
  Frame expect;
  MetaExpect meta;
  std::map<std::string, uint64_t> deltas;  // besides rx_packets/rx_bytes
  std::function<void(XdpMaps&)> setup;     // changes to the default state
  bool on_lo = false;                      // ingress interface not in mrc_ports (port 0)
};

void PrintTo(const Row& r, std::ostream* os) { *os << r.name; }

// --------------------------------------------------------------------------
// Row builders

const char* ipname(IpVersion v) { return v == IpVersion::kV4 ? "v4" : "v6"; }

Row pass_row(std::string name, Frame f) {
  Row r;
  r.name = std::move(name);
  r.in = std::move(f);
  r.action = XDP_PASS;
  r.deltas = {{"pass_non_mrc", 1}};
  return r;
}

Row drop_row(std::string name, Frame f, const char* counter) {
  Row r;
  r.name = std::move(name);
  r.in = std::move(f);
  r.action = XDP_DROP;
  r.deltas = {{counter, 1}};
  return r;
}

MetaExpect meta_for(const Packet& p, uint8_t kind) {
  MetaExpect m;
  m.kind = kind;
  m.opcode = p.bth.opcode;
  m.ecn = p.ip.ecn;
  m.l3_off = uint16_t(l3_of(p));
  m.bth_off = uint16_t(bth_of(p));
  if (kind == MRC_META_KIND_DATA) {
    m.payload_off = uint16_t(bth_of(p) + sizeof(mrc_bth) + ext_header_len(p.bth.opcode, p.bth.ts));
    m.payload_len = uint16_t(p.payload_len);
  }
  return m;
}

Row redirect_row(std::string name, const Packet& p, Frame f, uint8_t kind) {
  Row r;
  r.name = std::move(name);
  r.in = std::move(f);
  r.action = XDP_REDIRECT;
  r.out = Out::kMeta;
  r.meta = meta_for(p, kind);
  const char* c = kind == MRC_META_KIND_DATA      ? "redirect_data"
                  : kind == MRC_META_KIND_TRIMMED ? "redirect_trimmed"
                                                  : "redirect_ctrl";
  r.deltas = {{c, 1}};
  if ((kind == MRC_META_KIND_DATA || kind == MRC_META_KIND_TRIMMED) && p.ip.ecn == MRC_ECN_CE)
    r.deltas["ecn_ce"] = 1;
  return r;
}

Row redirect_row(std::string name, const Packet& p, uint8_t kind) {
  return redirect_row(std::move(name), p, build_frame(p), kind);
}

uint8_t kind_of(uint8_t op) {
  if (is_data_opcode(op)) return MRC_META_KIND_DATA;
  if (op == MRC_OP_EP_REQUEST || op == MRC_OP_EP_RESPONSE) return MRC_META_KIND_ENDPOINT;
  return MRC_META_KIND_CONTROL;
}

std::string opname(uint8_t op) {
  std::string s(opcode_info(op)->name);
  for (auto& c : s) c = char(std::tolower(c));
  return s;
}

// A trimmed data packet of QP kLocalQpn: DSCP-marked (payload still there)
// or header-only.
struct Trim {
  bool header_only;
  uint8_t dscp;
  bool ts;
  uint8_t opcode;
  bool vlan = false;
  uint8_t ecn = MRC_ECN_ECT0;
};

Packet trimmed_packet(IpVersion v, const Trim& t) {
  Packet p = make_packet(t.opcode, v, 64);
  p.ip.dscp = t.dscp;
  p.ip.ecn = t.ecn;
  p.bth.ts = t.ts;
  p.tseth.tx_ts = 0x3456;
  p.tseth.ftype = 1;
  if (t.vlan) {
    p.eth.has_vlan = true;
    p.eth.vlan_tci = 0x0064;
  }
  return p;
}

Frame trimmed_frame(const Packet& p, const Trim& t) {
  return t.header_only ? header_only(p, t.dscp) : build_frame(p);
}

std::string trim_name(IpVersion v, const Trim& t) {
  std::string n = std::string(ipname(v)) + "_" + opname(t.opcode) + "_";
  n += t.header_only ? "header_only" : t.dscp == kDscpLastHop ? "dscp_lasthop" : "dscp_trimmed";
  if (t.ts) n += "_tseth";
  if (t.vlan) n += "_vlan";
  if (t.ecn == MRC_ECN_CE) n += "_ce";
  return n;
}

// Frame patchers for malformed rows.
Frame patched(const Packet& p, const std::function<void(Frame&, size_t l3, size_t bth)>& fn) {
  Frame f = build_frame(p);
  fn(f, l3_of(p), bth_of(p));
  return f;
}

std::vector<Row> make_rows() {
  std::vector<Row> rows;
  const IpVersion kVers[] = {IpVersion::kV4, IpVersion::kV6};

  // --- not MRC: passed untouched -------------------------------------
  rows.push_back(pass_row("pass_arp", arp_frame()));
  rows.push_back(pass_row("pass_icmp4", icmp4_frame()));
  rows.push_back(pass_row("pass_tcp4_to_4791", tcp4_frame(4791)));
  rows.push_back(pass_row("pass_ipv6_nd", icmp6_nd_frame()));
  rows.push_back(pass_row("pass_udp4_other_port", udp_frame(IpVersion::kV4, 53, 32)));
  rows.push_back(pass_row("pass_udp6_other_port", udp_frame(IpVersion::kV6, 53, 32)));
  {
    Row r = pass_row("pass_udp4_on_unknown_interface", udp_frame(IpVersion::kV4, 53, 32));
    r.on_lo = true;
    rows.push_back(r);
  }
  {
    // MRC on another port when mrc_cfg.udp_port is changed: 4791 is not ours
    Row r = pass_row("pass_mrc_on_4791_when_port_changed",
                     build_frame(make_packet(MRC_OP_WRITE_ONLY, IpVersion::kV4, 64)));
    r.setup = [](XdpMaps& m) {
      mrc_xdp_cfg c = *m.cfg();
      c.udp_port = 4792;
      ASSERT_TRUE(m.set_cfg(c));
    };
    rows.push_back(r);
  }

  // --- every MRC packet type is redirected ---------------------------
  for (IpVersion v : kVers) {
    for (uint8_t op : kAllOpcodes) {
      Packet p = make_packet(op, v, is_data_opcode(op) ? 64 : 0);
      if (op == MRC_OP_EP_REQUEST) p.erth.op = MRC_EP_OP_PORT_STATUS_UPDATE;
      rows.push_back(
          redirect_row(std::string("redirect_") + ipname(v) + "_" + opname(op), p, kind_of(op)));
    }
    Packet p = make_packet(MRC_OP_WRITE_LAST, v, 61);  // PadCnt 3
    rows.push_back(redirect_row(std::string("redirect_") + ipname(v) + "_write_last_padded", p,
                                MRC_META_KIND_DATA));
    p = make_packet(MRC_OP_WRITE_MIDDLE, v, 128);
    p.bth.ts = true;
    p.tseth.tx_ts = 0x1234;
    rows.push_back(redirect_row(std::string("redirect_") + ipname(v) + "_write_middle_tseth", p,
                                MRC_META_KIND_DATA));
    p = make_packet(MRC_OP_WRITE_ONLY_IMM, v, 32);
    p.ip.ecn = MRC_ECN_CE;
    rows.push_back(redirect_row(std::string("redirect_") + ipname(v) + "_write_only_imm_ce", p,
                                MRC_META_KIND_DATA));
    p = make_packet(MRC_OP_SACK, v);
    p.eth.has_vlan = true;
    p.eth.vlan_tci = 0x2064;
    rows.push_back(redirect_row(std::string("redirect_") + ipname(v) + "_sack_vlan", p,
                                MRC_META_KIND_CONTROL));
    p = make_packet(MRC_OP_SACK, v);  // with the service time: 4 bytes more
    p.cc.has_svc = true;
    p.cc.svc_time_ns = 123456;
    rows.push_back(redirect_row(std::string("redirect_") + ipname(v) + "_sack_svc_time", p,
                                MRC_META_KIND_CONTROL));
    p = make_packet(MRC_OP_EP_REQUEST, v);
    Row r = redirect_row(std::string("redirect_") + ipname(v) + "_ev_probe_when_disabled", p,
                         MRC_META_KIND_ENDPOINT);
    r.setup = [](XdpMaps& m) {
      mrc_xdp_cfg c = *m.cfg();
      c.flags |= MRC_XDP_CFG_F_NO_EP_PROBE;
      ASSERT_TRUE(m.set_cfg(c));
    };
    rows.push_back(r);
  }
  {
    // custom MRC UDP port
    Packet p = make_packet(MRC_OP_WRITE_ONLY, IpVersion::kV6, 64);
    p.udp.dport = 4792;
    Row r = redirect_row("redirect_v6_custom_udp_port", p, MRC_META_KIND_DATA);
    r.setup = [](XdpMaps& m) {
      mrc_xdp_cfg c = *m.cfg();
      c.udp_port = 4792;
      ASSERT_TRUE(m.set_cfg(c));
    };
    rows.push_back(r);
  }

  // --- SRv6 uSID EVs (wire-format.md "SRv6 uSID EVs"): after the last
  // shift the destination is the host's own address (its uSID's final form)
  // and the packet is plain MRC over IPv6, classified by UDP port as any; the
  // entropy (the container's hash) rides in the flow label and source port.
  {
    IpAddr a, b;
    a.ver = b.ver = IpVersion::kV6;
    a.b = {0xfd, 0, 0, 1, 0x04, 0x01};  // fd00:1:401::
    b.b = {0xfd, 0, 0, 1, 0x04, 0x02};  // fd00:1:402::
    const codec::Srv6Sid sid = {0xfd, 0, 0, 1, 0x01, 0x01, 0x02, 0x03, 0x01, 0x02, 0x04, 0x02};
    auto srv6 = [&](uint8_t op, const IpAddr& dst) {
      Packet p = make_packet(op, IpVersion::kV6, 64);
      p.ip.src = a;
      p.ip.dst = dst;
      codec::ev_apply(codec::srv6_entropy(sid), codec::EvFmtMode::kSrv6, p.ip, p.udp);
      return p;
    };
    rows.push_back(redirect_row("redirect_v6_srv6_after_last_shift", srv6(MRC_OP_WRITE_MIDDLE, b),
                                MRC_META_KIND_DATA));
    rows.push_back(redirect_row("redirect_v6_srv6_sack_to_plain_address", srv6(MRC_OP_SACK, b),
                                MRC_META_KIND_CONTROL));
    // Not shifted (a fabric that did not forward by uSID): still MRC by its
    // port; the engine drops it (its ICRC covers the final address).
    IpAddr c;
    c.ver = IpVersion::kV6;
    c.b = sid;
    rows.push_back(redirect_row("redirect_v6_srv6_unshifted_container",
                                srv6(MRC_OP_WRITE_MIDDLE, c), MRC_META_KIND_DATA));
    // Trimmed on the way: the NACK goes back to the requester's own address
    // with the entropy echoed, like any.
    Trim t{true, kDscpTrimmed, false, MRC_OP_WRITE_MIDDLE};
    Packet p = srv6(MRC_OP_WRITE_MIDDLE, b);
    p.ip.dscp = t.dscp;
    Row r;
    r.name = "trim_nack_v6_srv6";
    r.in = trimmed_frame(p, t);
    r.action = XDP_TX;
    r.out = Out::kExact;
    r.expect = expected_nack(p, kRemoteQpn, MRC_NACK_TRIMMED, kDscpControl);
    r.deltas = {{"tx_trim_nack", 1}};
    rows.push_back(r);
  }

  // --- no socket on the queue -----------------------------------------
  for (IpVersion v : kVers) {
    Row r = drop_row(std::string("no_xsk_drop_") + ipname(v),
                     build_frame(make_packet(MRC_OP_WRITE_FIRST, v, 64)), "drop_no_xsk");
    r.setup = [](XdpMaps& m) { ASSERT_TRUE(m.del_xsk(kPort, 0)); };
    rows.push_back(r);
    Row q = pass_row(std::string("no_xsk_pass_flag_") + ipname(v),
                     build_frame(make_packet(MRC_OP_SACK, v)));
    q.deltas.clear();
    q.setup = [](XdpMaps& m) {
      ASSERT_TRUE(m.del_xsk(kPort, 0));
      mrc_xdp_cfg c = *m.cfg();
      c.flags |= MRC_XDP_CFG_F_PASS_NO_XSK;
      ASSERT_TRUE(m.set_cfg(c));
    };
    rows.push_back(q);
  }

  // --- trimmed data -> NACK via XDP_TX ------------------------------------
  const Trim kTrims[] = {
      {false, kDscpTrimmed, false, MRC_OP_WRITE_MIDDLE},
      {false, kDscpTrimmed, true, MRC_OP_WRITE_FIRST},
      {false, kDscpLastHop, false, MRC_OP_WRITE_LAST},
      {false, kDscpLastHop, true, MRC_OP_WRITE_ONLY_IMM},
      {true, MRC_DSCP_TRIMMABLE_DEFAULT, false, MRC_OP_WRITE_ONLY},
      {true, MRC_DSCP_TRIMMABLE_DEFAULT, true, MRC_OP_WRITE_MIDDLE},
      {true, kDscpTrimmed, false, MRC_OP_WRITE_LAST_IMM},
      {true, kDscpLastHop, true, MRC_OP_WRITE_FIRST},
      {false, kDscpTrimmed, true, MRC_OP_WRITE_LAST, true},
      {true, kDscpLastHop, false, MRC_OP_WRITE_MIDDLE, true, MRC_ECN_CE},
  };
  for (IpVersion v : kVers) {
    for (const Trim& t : kTrims) {
      Packet p = trimmed_packet(v, t);
      Row r;
      r.name = "trim_nack_" + trim_name(v, t);
      r.in = trimmed_frame(p, t);
      r.action = XDP_TX;
      r.out = Out::kExact;
      r.expect = expected_nack(p, kRemoteQpn,
                               t.dscp == kDscpLastHop ? MRC_NACK_TRIMMED_LASTHOP : MRC_NACK_TRIMMED,
                               kDscpControl);
      r.deltas = {{"tx_trim_nack", 1}};
      if (t.ecn == MRC_ECN_CE) r.deltas["ecn_ce"] = 1;
      rows.push_back(r);
    }
  }
  // trimmed but not answered in XDP: redirected with kind TRIMMED
  for (IpVersion v : kVers) {
    Trim t{false, kDscpTrimmed, false, MRC_OP_WRITE_MIDDLE};
    Packet p = trimmed_packet(v, t);
    p.bth.dqpn = 0x000999;  // not in mrc_qps
    rows.push_back(redirect_row(std::string("trim_redirect_unknown_qp_") + ipname(v), p,
                                MRC_META_KIND_TRIMMED));
    p.bth.dqpn = kNoNackQpn;
    rows.push_back(redirect_row(std::string("trim_redirect_qp_no_trim_nack_") + ipname(v), p,
                                MRC_META_KIND_TRIMMED));
    Trim h{true, MRC_DSCP_TRIMMABLE_DEFAULT, false, MRC_OP_WRITE_ONLY};
    Packet q = trimmed_packet(v, h);
    Row r = redirect_row(std::string("trim_redirect_cfg_no_trim_nack_header_only_") + ipname(v), q,
                         trimmed_frame(q, h), MRC_META_KIND_TRIMMED);
    r.setup = [](XdpMaps& m) {
      mrc_xdp_cfg c = *m.cfg();
      c.flags |= MRC_XDP_CFG_F_NO_TRIM_NACK;
      ASSERT_TRUE(m.set_cfg(c));
    };
    rows.push_back(r);
  }

  // --- EV probe -> ENDPOINT_RESPONSE via XDP_TX ------------------------------
  for (IpVersion v : kVers) {
    for (bool vlan : {false, true}) {
      Packet p = make_packet(MRC_OP_EP_REQUEST, v);
      p.eth.has_vlan = vlan;
      p.eth.vlan_tci = 0x0042;
      Row r;
      r.name = std::string("ev_probe_response_") + ipname(v) + (vlan ? "_vlan" : "");
      r.in = build_frame(p);
      r.action = XDP_TX;
      r.out = Out::kEpResponse;
      r.expect = build_frame(expected_ep_response_packet(p, kPort, kPortUpMask, kDscpControl));
      r.deltas = {{"tx_ep_response", 1}};
      rows.push_back(r);
    }
  }

  // --- controller endpoint operations (mrcd) -----------------------------------
  // vendor_info MRC_EP_VI_CONTROLLER is echoed by the responder; with
  // MRC_XDP_CFG_F_PASS_EP_RSP the response goes to the stack (mrcd's
  // AF_PACKET socket), every other response still to the AF_XDP socket.
  auto pass_ep_rsp = [](XdpMaps& m) {
    mrc_xdp_cfg c = *m.cfg();
    c.flags |= MRC_XDP_CFG_F_PASS_EP_RSP;
    ASSERT_TRUE(m.set_cfg(c));
  };
  for (IpVersion v : kVers) {
    Packet req = make_packet(MRC_OP_EP_REQUEST, v);
    req.erth.vendor_info = MRC_EP_VI_CONTROLLER;
    Row r;
    r.name = std::string("ev_probe_response_echoes_controller_bit_") + ipname(v);
    r.in = build_frame(req);
    r.action = XDP_TX;
    r.out = Out::kEpResponse;
    r.expect = build_frame(expected_ep_response_packet(req, kPort, kPortUpMask, kDscpControl));
    r.deltas = {{"tx_ep_response", 1}};
    rows.push_back(r);

    Packet rsp = make_packet(MRC_OP_EP_RESPONSE, v);
    rsp.eeth.vendor_info = MRC_EP_VI_CONTROLLER;
    Row pass =
        pass_row(std::string("pass_ep_response_to_controller_") + ipname(v), build_frame(rsp));
    pass.deltas.clear();  // MRC, so not pass_non_mrc; mrcd counts what it reads
    pass.setup = pass_ep_rsp;
    rows.push_back(pass);

    Row nopass =
        redirect_row(std::string("redirect_ep_response_controller_bit_without_flag_") + ipname(v),
                     rsp, MRC_META_KIND_ENDPOINT);
    rows.push_back(nopass);

    Packet app = make_packet(MRC_OP_EP_RESPONSE, v);
    Row own =
        redirect_row(std::string("redirect_ep_response_of_application_with_flag_") + ipname(v), app,
                     MRC_META_KIND_ENDPOINT);
    own.setup = pass_ep_rsp;
    rows.push_back(own);

    Packet cut = make_packet(MRC_OP_EP_RESPONSE, v);
    cut.eeth.vendor_info = MRC_EP_VI_CONTROLLER;
    Row down = drop_row(std::string("drop_admin_down_ep_response_to_controller_") + ipname(v),
                        build_frame(cut), "drop_admin_down");
    down.setup = [pass_ep_rsp](XdpMaps& m) {
      pass_ep_rsp(m);
      ASSERT_TRUE(m.set_port(Env::get().ifindex, {kPort, MRC_PORT_F_ADMIN_DOWN}));
    };
    rows.push_back(down);
  }

  // --- malformations: dropped, exactly one counter each ----------------------
  for (IpVersion v : kVers) {
    const bool v6 = v == IpVersion::kV6;
    const std::string s = std::string("_") + ipname(v);
    Packet data = make_packet(MRC_OP_WRITE_ONLY, v, 64);
    Packet sack = make_packet(MRC_OP_SACK, v);

    // UDP payload shorter than a BTH
    {
      Frame f = udp_frame(v, MRC_UDP_PORT_DEFAULT, 6);
      rows.push_back(drop_row("drop_truncated_bth" + s, f, "drop_truncated"));
    }
    // IP header inconsistent
    rows.push_back(drop_row("drop_bad_ip_version" + s,
                            patched(data,
                                    [v6](Frame& f, size_t l3, size_t) {
                                      f[l3] = uint8_t((v6 ? 4 : 6) << 4 | (f[l3] & 0x0f));
                                      if (!v6) fix_ip4_checksum(f, l3);
                                    }),
                            "drop_bad_ip"));
    rows.push_back(drop_row("drop_bad_ip_length" + s,
                            patched(data,
                                    [v6](Frame& f, size_t l3, size_t) {
                                      size_t off = v6 ? l3 + 4 : l3 + 2;
                                      store_be16(f.data() + off,
                                                 uint16_t(load_be16(f.data() + off) + 8));
                                      if (!v6) fix_ip4_checksum(f, l3);
                                    }),
                            "drop_bad_ip"));
    if (!v6) {
      rows.push_back(drop_row(
          "drop_bad_ip_checksum_v4",
          patched(data, [](Frame& f, size_t l3, size_t) { f[l3 + 10] ^= 0x40; }), "drop_bad_ip"));
      // IHL 6 (options): UDP header found after the options
      Frame f = build_frame(data);
      f.insert(f.begin() + 14 + 20, {1, 1, 1, 0});
      f[14] = 0x46;
      store_be16(f.data() + 16, uint16_t(load_be16(f.data() + 16) + 4));
      store_be16(f.data() + 24, 0);
      {
        uint32_t sum = 0;
        for (size_t i = 0; i < 24; i += 2) sum += load_be16(f.data() + 14 + i);
        while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
        store_be16(f.data() + 24, uint16_t(~sum));
      }
      rows.push_back(drop_row("drop_bad_ip_options_v4", f, "drop_bad_ip"));
      rows.push_back(drop_row("drop_ip_fragment_mf_v4",
                              patched(data,
                                      [](Frame& f, size_t l3, size_t) {
                                        store_be16(f.data() + l3 + 6, 0x2000);
                                        fix_ip4_checksum(f, l3);
                                      }),
                              "drop_ip_fragment"));
      rows.push_back(drop_row("drop_ip_fragment_offset_v4",
                              patched(data,
                                      [](Frame& f, size_t l3, size_t) {
                                        store_be16(f.data() + l3 + 6, 0x0010);
                                        fix_ip4_checksum(f, l3);
                                      }),
                              "drop_ip_fragment"));
    } else {
      // fragment header between IPv6 and UDP
      Frame f = build_frame(data);
      const uint8_t frag[8] = {17, 0, 0, 1, 0, 0, 0x12, 0x34};  // more fragments
      f.insert(f.begin() + 14 + 40, frag, frag + 8);
      f[14 + 6] = 44;
      store_be16(f.data() + 14 + 4, uint16_t(load_be16(f.data() + 14 + 4) + 8));
      rows.push_back(drop_row("drop_ip_fragment_header_v6", f, "drop_ip_fragment"));
    }
    rows.push_back(drop_row("drop_bad_udp_length" + s,
                            patched(data,
                                    [v6](Frame& f, size_t l3, size_t) {
                                      size_t u = l3 + (v6 ? 40 : 20) + 4;
                                      store_be16(f.data() + u,
                                                 uint16_t(load_be16(f.data() + u) - 4));
                                    }),
                            "drop_bad_udp"));
    // BTH
    rows.push_back(drop_row("drop_bad_bth_tver" + s,
                            patched(data, [](Frame& f, size_t, size_t bth) { f[bth + 1] |= 1; }),
                            "drop_bad_bth"));
    rows.push_back(drop_row("drop_bad_bth_reserved_flag" + s,
                            patched(data, [](Frame& f, size_t, size_t bth) { f[bth + 8] |= 0x40; }),
                            "drop_bad_bth"));
    rows.push_back(drop_row("drop_bad_bth_reserved_low" + s,
                            patched(data, [](Frame& f, size_t, size_t bth) { f[bth + 8] |= 0x02; }),
                            "drop_bad_bth"));
    rows.push_back(drop_row("drop_bad_bth_tseth_on_control" + s,
                            patched(sack, [](Frame& f, size_t, size_t bth) { f[bth + 8] |= 0x10; }),
                            "drop_bad_bth"));
    rows.push_back(drop_row("drop_bad_opcode_rc_send" + s,
                            patched(data, [](Frame& f, size_t, size_t bth) { f[bth] = 0x04; }),
                            "drop_bad_opcode"));
    rows.push_back(drop_row("drop_bad_opcode_0xd0" + s,
                            patched(sack, [](Frame& f, size_t, size_t bth) { f[bth] = 0xd0; }),
                            "drop_bad_opcode"));
    // header stack does not fit / wrong trailer
    {
      Frame f = build_frame(sack);
      f.resize(bth_of(sack) + sizeof(mrc_bth) + 20);  // SETH cut short
      fix_lengths(f, l3_of(sack), v6);
      rows.push_back(drop_row("drop_bad_length_sack_short" + s, f, "drop_bad_length"));
    }
    {
      Frame f = build_frame(make_packet(MRC_OP_WRITE_ONLY_IMM, v, 0));
      f.resize(bth_of(sack) + sizeof(mrc_bth) + 22);  // RETH there, ImmDt cut
      fix_lengths(f, l3_of(sack), v6);
      rows.push_back(drop_row("drop_bad_length_data_imm_short" + s, f, "drop_bad_length"));
    }
    {
      Frame f = build_frame(sack);
      f.insert(f.end(), {0, 0, 0, 0});  // 4 bytes after the ICRC
      fix_lengths(f, l3_of(sack), v6);
      rows.push_back(drop_row("drop_bad_length_control_trailing" + s, f, "drop_bad_length"));
    }
    {
      // SETH next = CC_STATE_SVC on a SACK without the service time's 4 bytes
      Frame f = build_frame(sack);
      const size_t b = bth_of(sack) + sizeof(mrc_bth);
      f[b] = uint8_t((f[b] & 0xf0) | (MRC_XH_NEXT_CC_STATE_SVC >> 1));
      f[b + 1] = uint8_t((f[b + 1] & 0x7f) | (MRC_XH_NEXT_CC_STATE_SVC & 1) << 7);
      rows.push_back(drop_row("drop_bad_length_sack_svc_short" + s, f, "drop_bad_length"));
    }
    {
      Frame f = build_frame(make_packet(MRC_OP_ACK, v));
      f.resize(f.size() - 4);  // no ICRC
      fix_lengths(f, l3_of(sack), v6);
      rows.push_back(drop_row("drop_bad_length_control_no_icrc" + s, f, "drop_bad_length"));
    }
    {
      // data with 2 bytes after the headers: neither header-only nor room for the ICRC
      Frame f = build_frame(data);
      f.resize(bth_of(data) + sizeof(mrc_bth) + ext_header_len(MRC_OP_WRITE_ONLY, false) + 2);
      fix_lengths(f, l3_of(data), v6);
      rows.push_back(drop_row("drop_bad_length_data_no_icrc" + s, f, "drop_bad_length"));
    }
    // QPN
    {
      Packet p = make_packet(MRC_OP_EP_REQUEST, v);
      p.bth.dqpn = 5;
      rows.push_back(drop_row("drop_bad_qpn_ep_request" + s, build_frame(p), "drop_bad_qpn"));
      Packet q = make_packet(MRC_OP_WRITE_MIDDLE, v, 64);
      q.bth.dqpn = MRC_QPN_ENDPOINT;
      rows.push_back(drop_row("drop_bad_qpn_data_to_qpn2" + s, build_frame(q), "drop_bad_qpn"));
    }
    // admin down
    {
      Row r = drop_row("drop_admin_down" + s, build_frame(data), "drop_admin_down");
      r.setup = [](XdpMaps& m) {
        ASSERT_TRUE(m.set_port(Env::get().ifindex, {kPort, MRC_PORT_F_ADMIN_DOWN}));
      };
      rows.push_back(r);
    }
  }
  return rows;
}

// --------------------------------------------------------------------------

class XdpRows : public ::testing::TestWithParam<Row> {};

TEST_P(XdpRows, Run) {
  const Row& row = GetParam();
  Env& env = Env::get();
  env.reset();
  XdpMaps& maps = env.prog.maps();
  if (row.setup) row.setup(maps);
  const uint32_t port = row.on_lo ? 0 : kPort;
  const uint32_t ifindex = row.on_lo ? env.lo_ifindex : env.ifindex;

  auto before = maps.stats(port);
  ASSERT_TRUE(before) << before.error().message();
  const uint64_t t0 = now_ns();
  auto run = xdp_test_run(env.prog.prog_fd(), row.in, ifindex, 0);
  const uint64_t t1 = now_ns();
  ASSERT_TRUE(run) << run.error().message();
  auto after = maps.stats(port);
  ASSERT_TRUE(after) << after.error().message();

  EXPECT_EQ(run->action, row.action);

  // counters: every field moves by exactly what the row says
  for (size_t i = 0; i < loader::kStatsFields; i++) {
    const std::string name = loader::kStatsFieldNames[i];
    uint64_t want = 0;
    if (name == "rx_packets")
      want = 1;
    else if (name == "rx_bytes")
      want = row.in.size();
    else if (auto it = row.deltas.find(name); it != row.deltas.end())
      want = it->second;
    EXPECT_EQ(loader::stats_field(*after, i) - loader::stats_field(*before, i), want) << name;
  }

  const Frame& out = run->out;
  switch (row.out) {
    case Out::kSame:
      EXPECT_EQ(run->meta_len, 0u);
      EXPECT_EQ(hex(out), hex(row.in));
      break;
    case Out::kMeta: {
      ASSERT_EQ(run->meta_len, sizeof(mrc_xdp_meta));
      ASSERT_GE(out.size(), sizeof(mrc_xdp_meta));
      mrc_xdp_meta m;
      std::memcpy(&m, out.data(), sizeof(m));
      Frame frame(out.begin() + sizeof(m), out.end());
      EXPECT_EQ(hex(frame), hex(row.in));
      EXPECT_EQ(m.magic, MRC_XDP_META_MAGIC);
      EXPECT_GE(m.rx_ts_ns, t0);
      EXPECT_LE(m.rx_ts_ns, t1);
      EXPECT_EQ(m.l3_off, row.meta.l3_off);
      EXPECT_EQ(m.bth_off, row.meta.bth_off);
      EXPECT_EQ(m.payload_off, row.meta.payload_off);
      EXPECT_EQ(m.payload_len, row.meta.payload_len);
      EXPECT_EQ(m.port, kPort);
      EXPECT_EQ(m.kind, row.meta.kind);
      EXPECT_EQ(m.opcode, row.meta.opcode);
      EXPECT_EQ(m.ecn, row.meta.ecn);
      EXPECT_EQ(m.rx_queue, 0u);
      EXPECT_EQ(m.resv, 0u);
      break;
    }
    case Out::kExact: {
      EXPECT_EQ(run->meta_len, 0u);
      EXPECT_EQ(hex(out), hex(row.expect));
      Packet parsed;
      CodecConfig cfg;
      EXPECT_EQ(parse(out, cfg, parsed), ParseError::kOk);
      break;
    }
    case Out::kEpResponse: {
      EXPECT_EQ(run->meta_len, 0u);
      ASSERT_EQ(out.size(), row.expect.size());
      Packet rsp;
      CodecConfig cfg;
      ASSERT_EQ(parse(out, cfg, rsp), ParseError::kOk) << "ICRC or layout wrong";
      auto mask = ep_response_mask(rsp, out.size());
      for (size_t i = 0; i < out.size(); i++)
        if (mask[i]) {
          EXPECT_EQ(out[i], row.expect[i]) << "byte " << i;
        }
      EXPECT_EQ(rsp.eeth.flags, MRC_EETH_F_SVC_TIME);
      EXPECT_LE(rsp.eeth.svc_time_ns, t1 - t0);
      EXPECT_GE(rsp.eeth.rsp_ts_ns, t0);
      EXPECT_LE(rsp.eeth.rsp_ts_ns, t1);
      break;
    }
  }
  if (HasFailure()) ADD_FAILURE() << "input:\n" << hex(row.in) << "\noutput:\n" << hex(out);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, XdpRows, ::testing::ValuesIn(make_rows()),
                         [](const ::testing::TestParamInfo<Row>& i) { return i.param.name; });

// --------------------------------------------------------------------------
// Other checks of the program

// The generated CRC tables are the CRC-32 the codec uses.
TEST(XdpCrcTable, MatchesCodecCrc32) {
  for (uint32_t n = 0; n < 256; n++) {
    uint8_t b[4] = {uint8_t(n), 0, 0, 0};
    // tbl[k][n] is the register after feeding byte n then k zero bytes from 0
    for (uint32_t k = 0; k < 4; k++) {
      uint32_t reg = ~crc32(0xffffffffu, b, k + 1);  // undo the final inversion
      uint32_t reg0 = ~crc32(0xffffffffu, b, 0);     // == 0
      ASSERT_EQ(reg0, 0u);
      EXPECT_EQ(mrc_crc32_tbl[k][n], reg) << "k=" << k << " n=" << n;
    }
  }
  uint8_t ones[8];
  std::memset(ones, 0xff, 8);
  EXPECT_EQ(MRC_ICRC_SEED, ~crc32(0, ones, 8));
}

// Many random rows: the XDP NACK always equals the codec's NACK and parses.
TEST(XdpTrimNack, RandomizedAgainstCodec) {
  Env& env = Env::get();
  env.reset();
  uint32_t seed = 12345;
  auto rnd = [&seed] {
    seed = seed * 1103515245u + 12345u;
    return seed >> 8;
  };
  for (int i = 0; i < 400; i++) {
    IpVersion v = rnd() & 1 ? IpVersion::kV6 : IpVersion::kV4;
    uint8_t op = uint8_t(MRC_OP_WRITE_FIRST + rnd() % 6);
    Packet p = make_packet(op, v, 4 * (1 + rnd() % 64));
    p.bth.psn = rnd() & MRC_PSN_MASK;
    p.udp.sport = uint16_t(rnd());
    p.ip.flow_label = v == IpVersion::kV6 ? rnd() & 0xfffff : 0;
    p.ip.ecn = uint8_t(rnd() & 3);
    p.ip.id = uint16_t(rnd());
    p.bth.ts = rnd() & 1;
    p.tseth.tx_ts = uint16_t(rnd());
    p.eth.has_vlan = (rnd() & 3) == 0;
    p.eth.vlan_tci = uint16_t(rnd() & 0x0fff);
    const bool hdr_only = rnd() & 1;
    const uint8_t dscp = hdr_only ? uint8_t(rnd() % 64) : (rnd() & 1 ? kDscpTrimmed : kDscpLastHop);
    p.ip.dscp = dscp;
    Frame in = hdr_only ? header_only(p, dscp) : build_frame(p);
    auto run = xdp_test_run(env.prog.prog_fd(), in, env.ifindex, 0);
    ASSERT_TRUE(run);
    ASSERT_EQ(run->action, uint32_t(XDP_TX)) << "iteration " << i << "\n" << hex(in);
    uint8_t reason = dscp == kDscpLastHop ? MRC_NACK_TRIMMED_LASTHOP : MRC_NACK_TRIMMED;
    Frame want = expected_nack(p, kRemoteQpn, reason, kDscpControl);
    ASSERT_EQ(hex(run->out), hex(want)) << "iteration " << i;
  }
}

// A zeroed mrc_cfg (never written) falls back to the wire.h defaults.
TEST(XdpCfg, ZeroConfigUsesDefaults) {
  Env& env = Env::get();
  env.reset();
  ASSERT_TRUE(env.prog.maps().set_cfg(mrc_xdp_cfg{}));
  Trim t{false, kDscpTrimmed, false, MRC_OP_WRITE_MIDDLE};
  Packet p = trimmed_packet(IpVersion::kV4, t);
  auto run = xdp_test_run(env.prog.prog_fd(), build_frame(p), env.ifindex, 0);
  ASSERT_TRUE(run);
  EXPECT_EQ(run->action, uint32_t(XDP_TX));
  EXPECT_EQ(hex(run->out), hex(expected_nack(p, kRemoteQpn, MRC_NACK_TRIMMED, kDscpControl)));
  // DSCP 0 data is not trimmed with a zero configuration
  Packet d = make_packet(MRC_OP_WRITE_ONLY, IpVersion::kV4, 64);
  d.ip.dscp = 0;
  run = xdp_test_run(env.prog.prog_fd(), build_frame(d), env.ifindex, 0);
  ASSERT_TRUE(run);
  EXPECT_EQ(run->action, uint32_t(XDP_REDIRECT));
}

}  // namespace
}  // namespace mrc::testing
