#include "xdp_rows.hpp"

#include "codec/bytes.hpp"

namespace mrc::testing {

using namespace mrc::codec;

namespace {

uint16_t csum16(const uint8_t* p, size_t len) {
  uint32_t sum = 0;
  for (size_t i = 0; i + 1 < len; i += 2) sum += load_be16(p + i);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return uint16_t(~sum);
}

Frame eth_header(uint16_t ethertype) {
  Frame f = {0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0, 0};
  store_be16(f.data() + 12, ethertype);
  return f;
}

void append_ip4(Frame& f, uint8_t proto, size_t l4_len) {
  size_t l3 = f.size();
  f.resize(l3 + 20, 0);
  uint8_t* ip = f.data() + l3;
  ip[0] = 0x45;
  store_be16(ip + 2, uint16_t(20 + l4_len));
  store_be16(ip + 6, 0x4000);
  ip[8] = 64;
  ip[9] = proto;
  ip[12] = 198, ip[13] = 18, ip[14] = 0, ip[15] = 1;
  ip[16] = 198, ip[17] = 18, ip[18] = 0, ip[19] = 2;
  store_be16(ip + 10, csum16(ip, 20));
}

void append_ip6(Frame& f, uint8_t nexthdr, size_t l4_len) {
  size_t l3 = f.size();
  f.resize(l3 + 40, 0);
  uint8_t* ip = f.data() + l3;
  store_be32(ip, 6u << 28);
  store_be16(ip + 4, uint16_t(l4_len));
  ip[6] = nexthdr;
  ip[7] = 255;
  ip[8] = 0xfd, ip[23] = 1;
  ip[24] = 0xfd, ip[39] = 2;
}

}  // namespace

void fix_ip4_checksum(Frame& f, size_t l3) {
  store_be16(f.data() + l3 + 10, 0);
  store_be16(f.data() + l3 + 10, csum16(f.data() + l3, 20));
}

void fix_lengths(Frame& f, size_t l3, bool v6) {
  size_t ip_len = v6 ? 40 : 20;
  if (v6) {
    store_be16(f.data() + l3 + 4, uint16_t(f.size() - l3 - 40));
  } else {
    store_be16(f.data() + l3 + 2, uint16_t(f.size() - l3));
    fix_ip4_checksum(f, l3);
  }
  store_be16(f.data() + l3 + ip_len + 4, uint16_t(f.size() - l3 - ip_len));
}

Frame header_only(const Packet& p, uint8_t dscp) {
  Packet q = p;
  q.ip.dscp = dscp;
  Frame f = build_frame(q);
  f.resize(bth_of(q) + sizeof(mrc_bth) + ext_header_len(q.bth.opcode, q.bth.ts));
  fix_lengths(f, l3_of(q), q.ip.src.ver == IpVersion::kV6);
  return f;
}

Frame arp_frame() {
  Frame f = eth_header(0x0806);
  const uint8_t arp[28] = {0,   1,  8, 0, 6, 4, 0, 1, 2, 0, 0,   0,  0, 1,
                           198, 18, 0, 1, 0, 0, 0, 0, 0, 0, 198, 18, 0, 2};
  f.insert(f.end(), arp, arp + sizeof(arp));
  return f;
}

Frame icmp4_frame() {
  Frame f = eth_header(0x0800);
  append_ip4(f, 1, 16);
  size_t l4 = f.size();
  f.resize(l4 + 16, 0xab);
  f[l4] = 8, f[l4 + 1] = 0;  // echo request
  store_be16(f.data() + l4 + 2, 0);
  return f;
}

Frame tcp4_frame(uint16_t dport) {
  Frame f = eth_header(0x0800);
  append_ip4(f, 6, 20);
  size_t l4 = f.size();
  f.resize(l4 + 20, 0);
  store_be16(f.data() + l4, 40000);
  store_be16(f.data() + l4 + 2, dport);
  f[l4 + 12] = 0x50;
  f[l4 + 13] = 0x02;  // SYN
  return f;
}

Frame udp_frame(IpVersion v, uint16_t dport, size_t payload) {
  Frame f = eth_header(v == IpVersion::kV4 ? 0x0800 : 0x86dd);
  if (v == IpVersion::kV4)
    append_ip4(f, 17, 8 + payload);
  else
    append_ip6(f, 17, 8 + payload);
  size_t l4 = f.size();
  f.resize(l4 + 8 + payload, 0x5a);
  store_be16(f.data() + l4, 5353);
  store_be16(f.data() + l4 + 2, dport);
  store_be16(f.data() + l4 + 4, uint16_t(8 + payload));
  store_be16(f.data() + l4 + 6, 0);
  return f;
}

Frame icmp6_nd_frame() {
  Frame f = eth_header(0x86dd);
  append_ip6(f, 58, 24);
  size_t l4 = f.size();
  f.resize(l4 + 24, 0);
  f[l4] = 135;  // neighbour solicitation
  f[l4 + 8] = 0xfd, f[l4 + 23] = 2;
  return f;
}

Frame expected_nack(const Packet& in, uint32_t remote_qpn, uint8_t reason, uint8_t dscp_control) {
  Packet n;
  n.eth = in.eth;
  n.eth.src = in.eth.dst;
  n.eth.dst = in.eth.src;
  n.ip.src = in.ip.dst;
  n.ip.dst = in.ip.src;
  n.ip.dscp = dscp_control;
  n.ip.ecn = 0;
  n.ip.ttl = 64;
  n.ip.flow_label = in.ip.flow_label;
  n.ip.id = in.ip.id;
  n.udp.sport = in.udp.sport;
  n.udp.dport = in.udp.dport;
  n.bth.opcode = MRC_OP_NACK;
  n.bth.dqpn = remote_qpn;
  n.bth.psn = in.bth.psn;
  const bool v6 = in.ip.src.ver == IpVersion::kV6;
  n.neth.reason = reason;
  n.neth.entropy = v6 ? (in.ip.flow_label & 0xffff) << 16 | in.udp.sport : in.udp.sport;
  n.neth.spdcid = uint16_t(in.bth.dqpn);
  n.neth.dpdcid = uint16_t(remote_qpn);
  n.neth.nack_psn = in.bth.psn;
  n.neth.cc_type = MRC_CC_TYPE_NSCC;
  n.neth.cc_flags = in.ip.ecn == MRC_ECN_CE ? MRC_CC_F_ECN_CE : 0;
  n.neth.tx_ts_echo = in.bth.ts ? in.tseth.tx_ts : 0;
  return build_frame(n);
}

Packet expected_ep_response_packet(const Packet& in, uint8_t rx_port, uint16_t port_up_mask,
                                   uint8_t dscp_control) {
  Packet r;
  r.eth = in.eth;
  r.eth.src = in.eth.dst;
  r.eth.dst = in.eth.src;
  r.ip.src = in.ip.dst;
  r.ip.dst = in.ip.src;
  r.ip.dscp = dscp_control;
  r.ip.ecn = 0;
  r.ip.ttl = 64;
  r.ip.flow_label = in.ip.flow_label;
  r.ip.id = in.ip.id;
  r.udp = in.udp;
  r.bth.opcode = MRC_OP_EP_RESPONSE;
  r.bth.dqpn = MRC_QPN_ENDPOINT;
  r.bth.psn = 0;
  r.eeth.op = MRC_EP_OP_EV_PROBE;
  r.eeth.vendor_info = in.erth.vendor_info;  // echoed (MRC_EP_VI_CONTROLLER)
  r.eeth.req_id = in.erth.req_id;
  r.eeth.port_status = port_up_mask;
  r.eeth.tx_ts_echo = in.erth.tx_ts;
  r.eeth.entropy = in.erth.entropy;
  r.eeth.rx_port = rx_port;
  r.eeth.flags = MRC_EETH_F_SVC_TIME;
  r.eeth.svc_time_ns = 0;
  r.eeth.rsp_ts_ns = 0;
  return r;
}

std::vector<uint8_t> ep_response_mask(const Packet& rsp, size_t frame_len) {
  std::vector<uint8_t> m(frame_len, 1);
  size_t eeth = bth_of(rsp) + sizeof(mrc_bth);
  for (size_t i = eeth + 20; i < eeth + 32; i++) m[i] = 0;  // svc_time_ns + rsp_ts_ns
  for (size_t i = frame_len - MRC_ICRC_LEN; i < frame_len; i++) m[i] = 0;
  return m;
}

}  // namespace mrc::testing
