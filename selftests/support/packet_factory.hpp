// Canonical MRC packets of every type, for codec, BPF and fuzz tests.
// Addresses are in 198.18.0.0/15 and fd00::/8 only.
#pragma once

#include <cstdint>
#include <vector>

#include "codec/packet.hpp"

namespace mrc::testing {

inline codec::IpAddr test_ip(codec::IpVersion v, uint8_t host) {
  codec::IpAddr a;
  a.ver = v;
  if (v == codec::IpVersion::kV4) {
    a.b[0] = 198, a.b[1] = 18, a.b[2] = 0, a.b[3] = host;
  } else {
    a.b[0] = 0xfd, a.b[1] = 0x00, a.b[15] = host;
  }
  return a;
}

inline const std::vector<uint8_t>& test_payload(size_t n) {
  static std::vector<uint8_t> buf;
  if (buf.size() < n) {
    buf.resize(n);
    for (size_t i = 0; i < n; i++) buf[i] = uint8_t(i * 31 + 7);
  }
  return buf;
}

// A fully populated packet of `opcode` with distinctive field values.
inline codec::Packet make_packet(uint8_t opcode, codec::IpVersion v, uint32_t payload_len = 0) {
  using namespace codec;
  Packet p;
  p.eth.src = {0x02, 0, 0, 0, 0, 0x01};
  p.eth.dst = {0x02, 0, 0, 0, 0, 0x02};
  p.ip.src = test_ip(v, 1);
  p.ip.dst = test_ip(v, 2);
  p.ip.dscp = MRC_DSCP_TRIMMABLE_DEFAULT;
  p.ip.ecn = MRC_ECN_ECT0;
  p.ip.ttl = 64;
  p.ip.flow_label = v == IpVersion::kV6 ? 0x0abcd : 0;
  p.udp.sport = 0xc123;
  p.udp.dport = MRC_UDP_PORT_DEFAULT;
  p.bth.opcode = opcode;
  p.bth.dqpn = 0x000123;
  p.bth.psn = 0x00fffe;
  p.bth.ack_req = true;
  if (is_data_opcode(opcode)) {
    p.meth.rqmsn = 7;
    p.meth.msn = 9;
    p.reth.va = 0x00007f0012345000ull;
    p.reth.rkey = 0x11223344;
    p.reth.dma_len = 1u << 20;
    p.imm = 0xdeadbeef;
    p.payload_len = payload_len;
    p.payload = test_payload(payload_len).data();
  }
  switch (opcode) {
    case MRC_OP_SACK:
      p.ip.dscp = MRC_DSCP_CONTROL_DEFAULT;
      p.bth.ack_req = false;
      p.seth.verdict = MRC_MP_SKIP_ONCE;
      p.seth.probe_resp = true;
      p.seth.ack_psn_offset = -3;
      p.seth.entropy = 0x1234abcd;
      p.seth.spdcid = 0x0123;
      p.seth.dpdcid = 0x0456;
      p.seth.port_down_mask = 0x04;
      p.seth.cack_psn = 0xfffff0;
      p.seth.cc_type = MRC_CC_TYPE_NSCC;
      p.seth.cc_flags = MRC_CC_F_ECN_CE;
      p.seth.mpr = 8;
      p.seth.sack_offset = 1;
      p.seth.sack_bitmap = 0x6e00000000000001ull;
      p.cc.tx_ts_echo = 0x5555;
      p.cc.ooo_count = 0x1234;
      p.cc.restore_cwnd = true;
      p.cc.rcv_cwnd_pen = 64;
      p.cc.rcvd_bytes = 0xabcdef;
      break;
    case MRC_OP_NACK:
      p.ip.dscp = MRC_DSCP_CONTROL_DEFAULT;
      p.bth.ack_req = false;
      p.neth.reason = MRC_NACK_TRIMMED;
      p.neth.vendor_info = 3;
      p.neth.entropy = 0x99887766;
      p.neth.spdcid = 1;
      p.neth.dpdcid = 2;
      p.neth.nack_psn = 0x00abcd;
      p.neth.cc_type = MRC_CC_TYPE_NSCC;
      p.neth.tx_ts_echo = 0x4242;
      break;
    case MRC_OP_PROBE:
      p.peth.probe_id = 0x7777;
      p.peth.spdcid = 5;
      p.peth.dpdcid = 6;
      p.peth.tx_ts = 0x1111;
      p.peth.tsr = true;
      p.peth.ftype = 2;
      break;
    case MRC_OP_EP_REQUEST:
      p.bth.dqpn = MRC_QPN_ENDPOINT;
      p.bth.psn = 0;
      p.erth.op = MRC_EP_OP_EV_PROBE;
      p.erth.req_id = 0x0102;
      p.erth.port_status = 0xf;
      p.erth.tx_ts = 0x2222;
      p.erth.entropy = 0x0001c123;
      break;
    case MRC_OP_EP_RESPONSE:
      p.bth.dqpn = MRC_QPN_ENDPOINT;
      p.bth.psn = 0;
      p.ip.dscp = MRC_DSCP_CONTROL_DEFAULT;
      p.eeth.op = MRC_EP_OP_EV_PROBE;
      p.eeth.req_id = 0x0102;
      p.eeth.port_status = 0xe;
      p.eeth.tx_ts_echo = 0x2222;
      p.eeth.entropy = 0x0001c123;
      p.eeth.rx_port = 3;
      p.eeth.flags = MRC_EETH_F_SVC_TIME;
      p.eeth.svc_time_ns = 1500;
      p.eeth.rsp_ts_ns = 0x0102030405060708ull;
      break;
    case MRC_OP_ACK:
      p.aeth.syndrome = 0x1f;
      p.aeth.msn = 0x000042;
      break;
    default:
      break;
  }
  return p;
}

inline std::vector<uint8_t> build_frame(const codec::Packet& p) {
  std::vector<uint8_t> f(codec::frame_size(p) + 64);
  size_t n = codec::build(p, f);
  f.resize(n);
  return f;
}

inline constexpr uint8_t kAllOpcodes[] = {
    MRC_OP_WRITE_FIRST, MRC_OP_WRITE_MIDDLE,   MRC_OP_WRITE_LAST, MRC_OP_WRITE_LAST_IMM,
    MRC_OP_WRITE_ONLY,  MRC_OP_WRITE_ONLY_IMM, MRC_OP_ACK,        MRC_OP_EP_REQUEST,
    MRC_OP_EP_RESPONSE, MRC_OP_SACK,           MRC_OP_NACK,       MRC_OP_PROBE,
};

}  // namespace mrc::testing
