// Codec: round trips of every packet type on IPv4 and IPv6, strict rejection
// of malformed input, ICRC, PSN arithmetic and the SACK bitmap.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstring>
#include <string>

#include "codec/bytes.hpp"
#include "codec/icrc.hpp"
#include "codec/packet.hpp"
#include "codec/psn_window.hpp"
#include "support/packet_factory.hpp"

namespace mrc::codec {
namespace {

using testing::build_frame;
using testing::make_packet;

CodecConfig cfg;

struct RoundTripCase {
  uint8_t opcode;
  IpVersion ver;
  uint32_t payload;
  bool ts;
};

std::string case_name(const ::testing::TestParamInfo<RoundTripCase>& i) {
  std::string n(opcode_info(i.param.opcode)->name);
  n += i.param.ver == IpVersion::kV4 ? "_v4" : "_v6";
  n += "_p" + std::to_string(i.param.payload);
  if (i.param.ts) n += "_ts";
  return n;
}

class RoundTrip : public ::testing::TestWithParam<RoundTripCase> {};

TEST_P(RoundTrip, BuildParseIdentical) {
  const auto& c = GetParam();
  Packet in = make_packet(c.opcode, c.ver, c.payload);
  in.bth.ts = c.ts;
  in.tseth.tx_ts = 0xbeef;
  in.tseth.ftype = 3;
  auto f = build_frame(in);
  ASSERT_EQ(f.size(), frame_size(in));
  Packet out;
  ASSERT_EQ(parse(f, cfg, out), ParseError::kOk) << to_string(parse(f, cfg, out));
  EXPECT_EQ(out.eth.src, in.eth.src);
  EXPECT_EQ(out.eth.dst, in.eth.dst);
  EXPECT_EQ(out.ip.src, in.ip.src);
  EXPECT_EQ(out.ip.dst, in.ip.dst);
  EXPECT_EQ(out.ip.dscp, in.ip.dscp);
  EXPECT_EQ(out.ip.ecn, in.ip.ecn);
  EXPECT_EQ(out.ip.ttl, in.ip.ttl);
  EXPECT_EQ(out.ip.flow_label, in.ip.flow_label);
  EXPECT_EQ(out.udp.sport, in.udp.sport);
  EXPECT_EQ(out.udp.dport, in.udp.dport);
  EXPECT_EQ(out.bth.opcode, in.bth.opcode);
  EXPECT_EQ(out.bth.dqpn, in.bth.dqpn);
  EXPECT_EQ(out.bth.psn, in.bth.psn);
  EXPECT_EQ(out.bth.ack_req, in.bth.ack_req);
  EXPECT_EQ(out.bth.ts, in.bth.ts);
  EXPECT_EQ(out.bth.pad, (4 - in.payload_len % 4) % 4);
  EXPECT_EQ(out.trim, TrimKind::kNone);
  if (is_data_opcode(c.opcode)) {
    EXPECT_EQ(out.meth.rqmsn, in.meth.rqmsn);
    EXPECT_EQ(out.meth.msn, in.meth.msn);
    EXPECT_EQ(out.reth.va, in.reth.va);
    EXPECT_EQ(out.reth.rkey, in.reth.rkey);
    EXPECT_EQ(out.reth.dma_len, in.reth.dma_len);
    ASSERT_EQ(out.payload_len, in.payload_len);
    if (in.payload_len) {
      EXPECT_EQ(0, std::memcmp(out.payload, in.payload, in.payload_len));
    }
    EXPECT_EQ(bool(out.hdrs & kHdrImm), opcode_has_imm(c.opcode));
    if (opcode_has_imm(c.opcode)) {
      EXPECT_EQ(out.imm, in.imm);
    }
    if (c.ts) {
      EXPECT_EQ(out.tseth.tx_ts, 0xbeef);
      EXPECT_EQ(out.tseth.ftype, 3);
    }
  }
  switch (c.opcode) {
    case MRC_OP_SACK:
      EXPECT_EQ(out.seth.verdict, in.seth.verdict);
      EXPECT_EQ(out.seth.probe_resp, in.seth.probe_resp);
      EXPECT_EQ(out.seth.ack_psn_offset, in.seth.ack_psn_offset);
      EXPECT_EQ(out.seth.entropy, in.seth.entropy);
      EXPECT_EQ(out.seth.spdcid, in.seth.spdcid);
      EXPECT_EQ(out.seth.dpdcid, in.seth.dpdcid);
      EXPECT_EQ(out.seth.port_down_mask, in.seth.port_down_mask);
      EXPECT_EQ(out.seth.cack_psn, in.seth.cack_psn);
      EXPECT_EQ(out.seth.cc_type, in.seth.cc_type);
      EXPECT_EQ(out.seth.cc_flags, in.seth.cc_flags);
      EXPECT_EQ(out.seth.mpr, in.seth.mpr);
      EXPECT_EQ(out.seth.sack_offset, in.seth.sack_offset);
      EXPECT_EQ(out.seth.sack_bitmap, in.seth.sack_bitmap);
      EXPECT_EQ(out.cc.tx_ts_echo, in.cc.tx_ts_echo);
      EXPECT_EQ(out.cc.ooo_count, in.cc.ooo_count);
      EXPECT_EQ(out.cc.restore_cwnd, in.cc.restore_cwnd);
      EXPECT_EQ(out.cc.rcv_cwnd_pen, in.cc.rcv_cwnd_pen);
      EXPECT_EQ(out.cc.rcvd_bytes, in.cc.rcvd_bytes);
      break;
    case MRC_OP_NACK:
      EXPECT_EQ(out.neth.reason, in.neth.reason);
      EXPECT_EQ(out.neth.vendor_info, in.neth.vendor_info);
      EXPECT_EQ(out.neth.entropy, in.neth.entropy);
      EXPECT_EQ(out.neth.spdcid, in.neth.spdcid);
      EXPECT_EQ(out.neth.dpdcid, in.neth.dpdcid);
      EXPECT_EQ(out.neth.nack_psn, in.neth.nack_psn);
      EXPECT_EQ(out.neth.cc_type, in.neth.cc_type);
      EXPECT_EQ(out.neth.tx_ts_echo, in.neth.tx_ts_echo);
      break;
    case MRC_OP_PROBE:
      EXPECT_EQ(out.peth.probe_id, in.peth.probe_id);
      EXPECT_EQ(out.peth.spdcid, in.peth.spdcid);
      EXPECT_EQ(out.peth.dpdcid, in.peth.dpdcid);
      EXPECT_EQ(out.peth.tx_ts, in.peth.tx_ts);
      EXPECT_EQ(out.peth.tsr, in.peth.tsr);
      EXPECT_EQ(out.peth.ftype, in.peth.ftype);
      break;
    case MRC_OP_EP_REQUEST:
      EXPECT_EQ(out.erth.op, in.erth.op);
      EXPECT_EQ(out.erth.req_id, in.erth.req_id);
      EXPECT_EQ(out.erth.port_status, in.erth.port_status);
      EXPECT_EQ(out.erth.tx_ts, in.erth.tx_ts);
      EXPECT_EQ(out.erth.entropy, in.erth.entropy);
      break;
    case MRC_OP_EP_RESPONSE:
      EXPECT_EQ(out.eeth.op, in.eeth.op);
      EXPECT_EQ(out.eeth.req_id, in.eeth.req_id);
      EXPECT_EQ(out.eeth.port_status, in.eeth.port_status);
      EXPECT_EQ(out.eeth.tx_ts_echo, in.eeth.tx_ts_echo);
      EXPECT_EQ(out.eeth.entropy, in.eeth.entropy);
      EXPECT_EQ(out.eeth.rx_port, in.eeth.rx_port);
      EXPECT_EQ(out.eeth.flags, in.eeth.flags);
      EXPECT_EQ(out.eeth.svc_time_ns, in.eeth.svc_time_ns);
      EXPECT_EQ(out.eeth.rsp_ts_ns, in.eeth.rsp_ts_ns);
      break;
    case MRC_OP_ACK:
      EXPECT_EQ(out.aeth.syndrome, in.aeth.syndrome);
      EXPECT_EQ(out.aeth.msn, in.aeth.msn);
      break;
  }
  // Building the parsed packet again gives the same bytes.
  EXPECT_EQ(build_frame(out), f);
}

std::vector<RoundTripCase> all_cases() {
  std::vector<RoundTripCase> v;
  for (IpVersion ver : {IpVersion::kV4, IpVersion::kV6}) {
    for (uint8_t op : testing::kAllOpcodes) {
      if (!is_data_opcode(op)) {
        v.push_back({op, ver, 0, false});
        continue;
      }
      const OpcodeInfo* oi = opcode_info(op);
      v.push_back({op, ver, 1024, false});
      v.push_back({op, ver, 4096, true});
      if (oi->last) {
        for (uint32_t n : {0u, 1u, 2u, 3u, 5u, 1021u}) v.push_back({op, ver, n, false});
      }
    }
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(AllTypes, RoundTrip, ::testing::ValuesIn(all_cases()), case_name);

// Conformance 1: every data packet carries METH and RETH; 2: only *_IMM carry ImmDt.
TEST(Codec, DataOpcodesCarryMethRethAndImmOnlyOnImmOpcodes) {
  for (uint8_t op : testing::kAllOpcodes) {
    const OpcodeInfo* oi = opcode_info(op);
    ASSERT_NE(oi, nullptr);
    EXPECT_EQ(bool(oi->hdrs & kHdrMeth), oi->data) << oi->name;
    EXPECT_EQ(bool(oi->hdrs & kHdrReth), oi->data) << oi->name;
    EXPECT_EQ(bool(oi->hdrs & kHdrImm), opcode_has_imm(op)) << oi->name;
  }
  EXPECT_EQ(opcode_info(0x04), nullptr);  // RC RDMA WRITE ONLY is not MRC
  EXPECT_EQ(opcode_info(0xc5), nullptr);
}

TEST(Codec, IcrcIsStandardCrc32OfMaskedFields) {
  // The ISA-L CRC equals zlib's CRC-32 (the Ethernet FCS polynomial).
  const auto& data = testing::test_payload(4096);
  for (size_t n : {0, 1, 3, 64, 65, 1500, 4096}) {
    EXPECT_EQ(crc32(0, data.data(), n), uint32_t(::crc32(0, data.data(), uInt(n)))) << n;
  }
  // ICRC over a built frame: recompute by hand with zlib and the RoCEv2 masks.
  Packet p = make_packet(MRC_OP_WRITE_ONLY, IpVersion::kV4, 100);
  auto f = build_frame(p);
  std::vector<uint8_t> m(f.size() - 14 - 4 + 8, 0xff);
  std::memcpy(m.data() + 8, f.data() + 14, f.size() - 14 - 4);
  m[8 + 1] = 0xff;                       // TOS
  m[8 + 8] = 0xff;                       // TTL
  m[8 + 10] = m[8 + 11] = 0xff;          // IP checksum
  m[8 + 20 + 6] = m[8 + 20 + 7] = 0xff;  // UDP checksum
  m[8 + 28 + 4] = 0xff;                  // BTH resv8a
  uint32_t want = uint32_t(::crc32(0, m.data(), uInt(m.size())));
  EXPECT_EQ(load_le32(f.data() + f.size() - 4), want);
}

TEST(Codec, IcrcIgnoresVariantFieldsButCoversEntropy) {
  Packet p = make_packet(MRC_OP_WRITE_ONLY, IpVersion::kV6, 64);
  auto f = build_frame(p);
  Packet q = p;
  q.ip.dscp = MRC_DSCP_TRIMMABLE_RETX_DEFAULT;
  q.ip.ecn = MRC_ECN_CE;
  q.ip.ttl = 3;
  q.ip.flow_label = 0x12345;
  auto g = build_frame(q);
  EXPECT_EQ(load_le32(f.data() + f.size() - 4), load_le32(g.data() + g.size() - 4));
  q = p;
  q.udp.sport ^= 1;
  auto h = build_frame(q);
  EXPECT_NE(load_le32(f.data() + f.size() - 4), load_le32(h.data() + h.size() - 4));
}

TEST(Codec, VlanTaggedFrameParses) {
  Packet p = make_packet(MRC_OP_WRITE_ONLY_IMM, IpVersion::kV4, 33);
  p.eth.has_vlan = true;
  p.eth.vlan_tci = 0x0064;
  auto f = build_frame(p);
  Packet out;
  ASSERT_EQ(parse(f, cfg, out), ParseError::kOk);
  EXPECT_TRUE(out.eth.has_vlan);
  EXPECT_EQ(out.eth.vlan_tci, 0x0064);
  EXPECT_EQ(out.imm, p.imm);
}

TEST(Codec, EthernetPaddingIsNotPayload) {
  Packet p = make_packet(MRC_OP_NACK, IpVersion::kV4);
  auto f = build_frame(p);
  f.resize(f.size() + 20, 0);  // L2 minimum-size padding after the IP datagram
  Packet out;
  EXPECT_EQ(parse(f, cfg, out), ParseError::kOk);
}

TEST(Codec, ConfigurableUdpPort) {
  Packet p = make_packet(MRC_OP_WRITE_ONLY, IpVersion::kV4, 8);
  p.udp.dport = 4792;
  auto f = build_frame(p);
  Packet out;
  EXPECT_EQ(parse(f, cfg, out), ParseError::kNotMrc);
  CodecConfig c2;
  c2.udp_port = 4792;
  EXPECT_EQ(parse(f, c2, out), ParseError::kOk);
}

TEST(Codec, NonMrcTrafficIsNotMrc) {
  Packet out;
  std::vector<uint8_t> arp(42, 0);
  arp[12] = 0x08, arp[13] = 0x06;
  EXPECT_EQ(parse(arp, cfg, out), ParseError::kNotMrc);
  // IPv4 TCP
  auto f = build_frame(make_packet(MRC_OP_WRITE_ONLY, IpVersion::kV4, 8));
  auto tcp = f;
  tcp[14 + 9] = 6;
  EXPECT_EQ(parse(tcp, cfg, out), ParseError::kNotMrc);
  // IPv6 ICMPv6
  auto g = build_frame(make_packet(MRC_OP_WRITE_ONLY, IpVersion::kV6, 8));
  g[14 + 6] = 58;
  EXPECT_EQ(parse(g, cfg, out), ParseError::kNotMrc);
  EXPECT_EQ(parse(std::span<const uint8_t>(f.data(), 10), cfg, out), ParseError::kNotMrc);
}

// Every truncation of a valid frame is rejected (or, for very short ones, not ours).
TEST(Codec, TruncatedFramesAreRejected) {
  for (IpVersion v : {IpVersion::kV4, IpVersion::kV6}) {
    for (uint8_t op : testing::kAllOpcodes) {
      auto f = build_frame(make_packet(op, v, is_data_opcode(op) ? 64 : 0));
      for (size_t n = 0; n < f.size(); n++) {
        Packet out;
        std::vector<uint8_t> cut(f.begin(), f.begin() + long(n));  // exact-size copy for ASan
        ParseError e = parse(cut, cfg, out);
        EXPECT_NE(e, ParseError::kOk) << int(op) << " len " << n;
      }
    }
  }
}

struct Mutation {
  const char* name;
  uint8_t opcode;
  IpVersion ver;
  ParseError want;
  void (*mutate)(std::vector<uint8_t>& f, size_t l3, size_t bth);
};

const Mutation kMutations[] = {
    {"bad_icrc_payload", MRC_OP_WRITE_ONLY, IpVersion::kV4, ParseError::kBadIcrc,
     [](auto& f, size_t, size_t) { f[f.size() - 10] ^= 1; }},
    {"bad_icrc_trailer", MRC_OP_SACK, IpVersion::kV6, ParseError::kBadIcrc,
     [](auto& f, size_t, size_t) { f.back() ^= 0x80; }},
    {"bad_ip_checksum", MRC_OP_WRITE_ONLY, IpVersion::kV4, ParseError::kBadIpChecksum,
     [](auto& f, size_t l3, size_t) { f[l3 + 10] ^= 0xff; }},
    {"ipv4_options", MRC_OP_WRITE_ONLY, IpVersion::kV4, ParseError::kBadIpHeaderLen,
     [](auto& f, size_t l3, size_t) {
       f[l3] = 0x46;
       f.insert(f.begin() + long(l3 + 20), 4, 0);
       // keep the UDP port where an IHL of 6 says it is
     }},
    {"ipv4_bad_version", MRC_OP_WRITE_ONLY, IpVersion::kV4, ParseError::kBadIpVersion,
     [](auto& f, size_t l3, size_t) { f[l3] = 0x65; }},
    {"ipv6_bad_version", MRC_OP_WRITE_ONLY, IpVersion::kV6, ParseError::kBadIpVersion,
     [](auto& f, size_t l3, size_t) { f[l3] = uint8_t((f[l3] & 0x0f) | 0x40); }},
    {"ipv4_fragment", MRC_OP_WRITE_ONLY, IpVersion::kV4, ParseError::kIpFragment,
     [](auto& f, size_t l3, size_t) {
       f[l3 + 6] = 0x20;  // MF
       f[l3 + 10] = f[l3 + 11] = 0;
       uint32_t s = 0;
       for (int i = 0; i < 20; i += 2) s += load_be16(&f[l3 + i]);
       while (s >> 16) s = (s & 0xffff) + (s >> 16);
       store_be16(&f[l3 + 10], uint16_t(~s));
     }},
    {"ipv4_length_beyond_frame", MRC_OP_WRITE_ONLY, IpVersion::kV4, ParseError::kBadIpLength,
     [](auto& f, size_t l3, size_t) {
       store_be16(&f[l3 + 2], uint16_t(load_be16(&f[l3 + 2]) + 8));
       f[l3 + 10] = f[l3 + 11] = 0;
       uint32_t s = 0;
       for (int i = 0; i < 20; i += 2) s += load_be16(&f[l3 + i]);
       while (s >> 16) s = (s & 0xffff) + (s >> 16);
       store_be16(&f[l3 + 10], uint16_t(~s));
     }},
    {"ipv6_length_beyond_frame", MRC_OP_SACK, IpVersion::kV6, ParseError::kBadIpLength,
     [](auto& f, size_t l3, size_t) {
       store_be16(&f[l3 + 4], uint16_t(load_be16(&f[l3 + 4]) + 1));
     }},
    {"udp_length", MRC_OP_NACK, IpVersion::kV6, ParseError::kBadUdpLength,
     [](auto& f, size_t l3, size_t) {
       store_be16(&f[l3 + 44], uint16_t(load_be16(&f[l3 + 44]) - 4));
     }},
    {"bth_tver", MRC_OP_WRITE_ONLY, IpVersion::kV4, ParseError::kBadTver,
     [](auto& f, size_t, size_t b) { f[b + 1] |= 0x01; }},
    {"bth_reserved", MRC_OP_SACK, IpVersion::kV4, ParseError::kBadReservedBits,
     [](auto& f, size_t, size_t b) { f[b + 8] |= 0x40; }},
    {"unknown_opcode", MRC_OP_WRITE_ONLY, IpVersion::kV6, ParseError::kUnknownOpcode,
     [](auto& f, size_t, size_t b) { f[b] = 0x0a; }},
    {"ts_flag_on_sack", MRC_OP_SACK, IpVersion::kV4, ParseError::kBadHeaderStack,
     [](auto& f, size_t, size_t b) { f[b + 8] |= 0x10; }},
    {"seth_wrong_type", MRC_OP_SACK, IpVersion::kV4, ParseError::kBadHeaderStack,
     [](auto& f, size_t, size_t b) { f[b + 12] = uint8_t((f[b + 12] & 0x0f) | 0x20); }},
    {"neth_unknown_reason", MRC_OP_NACK, IpVersion::kV4, ParseError::kBadHeaderStack,
     [](auto& f, size_t, size_t b) { f[b + 12 + 2] = 0x55; }},
    {"peth_wrong_type", MRC_OP_PROBE, IpVersion::kV6, ParseError::kBadHeaderStack,
     [](auto& f, size_t, size_t b) { f[b + 12] = 0x10; }},
    {"ep_request_to_qp", MRC_OP_EP_REQUEST, IpVersion::kV4, ParseError::kBadQpn,
     [](auto& f, size_t, size_t b) { f[b + 7] = 0x33; }},
    {"data_to_endpoint_qpn", MRC_OP_WRITE_ONLY, IpVersion::kV4, ParseError::kBadQpn,
     [](auto& f, size_t, size_t b) { f[b + 5] = f[b + 6] = 0, f[b + 7] = MRC_QPN_ENDPOINT; }},
    {"pad_on_first", MRC_OP_WRITE_FIRST, IpVersion::kV4, ParseError::kBadLength,
     [](auto& f, size_t, size_t b) { f[b + 1] |= 1 << MRC_BTH_PAD_SHIFT; }},
    {"pad_on_control", MRC_OP_SACK, IpVersion::kV6, ParseError::kBadPad,
     [](auto& f, size_t, size_t b) { f[b + 1] |= 3 << MRC_BTH_PAD_SHIFT; }},
    {"payload_on_sack", MRC_OP_SACK, IpVersion::kV4, ParseError::kBadLength,
     [](auto& f, size_t l3, size_t) {
       f.insert(f.end() - 4, 4, 0);
       store_be16(&f[l3 + 2], uint16_t(load_be16(&f[l3 + 2]) + 4));
       store_be16(&f[l3 + 24], uint16_t(load_be16(&f[l3 + 24]) + 4));
       f[l3 + 10] = f[l3 + 11] = 0;
       uint32_t s = 0;
       for (int i = 0; i < 20; i += 2) s += load_be16(&f[l3 + i]);
       while (s >> 16) s = (s & 0xffff) + (s >> 16);
       store_be16(&f[l3 + 10], uint16_t(~s));
     }},
    {"payload_beyond_dma_len", MRC_OP_WRITE_ONLY, IpVersion::kV4, ParseError::kBadLength,
     [](auto& f, size_t, size_t b) { store_be32(&f[b + 12 + 4 + 12], 4); }},
};

TEST(Codec, MalformedPacketsRejectedWithReason) {
  for (const auto& m : kMutations) {
    SCOPED_TRACE(m.name);
    Packet p = make_packet(m.opcode, m.ver, is_data_opcode(m.opcode) ? 64 : 0);
    auto f = build_frame(p);
    Packet ok;
    ASSERT_EQ(parse(f, cfg, ok), ParseError::kOk);
    m.mutate(f, ok.l3_off, ok.bth_off);
    Packet out;
    ParseError e = parse(f, cfg, out);
    EXPECT_EQ(e, m.want) << "got: " << to_string(e);
  }
}

TEST(Codec, TrimmedHeaderOnlyAndDscpMarked) {
  for (IpVersion v : {IpVersion::kV4, IpVersion::kV6}) {
    Packet p = make_packet(MRC_OP_WRITE_MIDDLE, v, 1024);
    auto f = build_frame(p);
    Packet ok;
    ASSERT_EQ(parse(f, cfg, ok), ParseError::kOk);
    // Cut after the RETH as a trimming switch does: no payload, no ICRC.
    size_t keep = ok.bth_off + 12 + 4 + 16;
    std::vector<uint8_t> t(f.begin(), f.begin() + long(keep));
    size_t l3 = ok.l3_off;
    if (v == IpVersion::kV4) {
      store_be16(&t[l3 + 2], uint16_t(keep - l3));
      t[l3 + 1] = uint8_t(cfg.dscp.trimmed << 2);
      t[l3 + 10] = t[l3 + 11] = 0;
      uint32_t s = 0;
      for (int i = 0; i < 20; i += 2) s += load_be16(&t[l3 + i]);
      while (s >> 16) s = (s & 0xffff) + (s >> 16);
      store_be16(&t[l3 + 10], uint16_t(~s));
      store_be16(&t[l3 + 24], uint16_t(keep - l3 - 20));
    } else {
      store_be16(&t[l3 + 4], uint16_t(keep - l3 - 40));
      store_be16(&t[l3 + 44], uint16_t(keep - l3 - 40));
      t[l3] = uint8_t(0x60 | cfg.dscp.trimmed_lasthop >> 2);
      t[l3 + 1] = uint8_t((cfg.dscp.trimmed_lasthop & 3) << 6 | (t[l3 + 1] & 0x0f));
    }
    Packet out;
    ASSERT_EQ(parse(t, cfg, out), ParseError::kOk);
    EXPECT_EQ(out.trim, v == IpVersion::kV4 ? TrimKind::kTrimmed : TrimKind::kTrimmedLastHop);
    EXPECT_EQ(out.payload_len, 0u);
    EXPECT_EQ(out.bth.psn, p.bth.psn);
    EXPECT_EQ(out.reth.va, p.reth.va);
  }
  // A zero-length WRITE_ONLY (with ICRC) is not a trimmed packet.
  Packet z = make_packet(MRC_OP_WRITE_ONLY, IpVersion::kV4, 0);
  auto f = build_frame(z);
  Packet out;
  ASSERT_EQ(parse(f, cfg, out), ParseError::kOk);
  EXPECT_EQ(out.trim, TrimKind::kNone);
}

TEST(Codec, BuildRejectsInconsistentDescriptions) {
  std::vector<uint8_t> buf(9000);
  Packet p = make_packet(MRC_OP_SACK, IpVersion::kV4);
  p.payload_len = 4;
  EXPECT_EQ(build(p, buf), 0u);
  p = make_packet(MRC_OP_WRITE_MIDDLE, IpVersion::kV4, 1023);
  EXPECT_EQ(build(p, buf), 0u);
  p = make_packet(MRC_OP_WRITE_ONLY, IpVersion::kV4, 1024);
  EXPECT_EQ(build(p, std::span<uint8_t>(buf.data(), 100)), 0u);
  p.bth.opcode = 0x42;
  EXPECT_EQ(build(p, buf), 0u);
}

// Multi-buffer frames: the same frame cut into buffers parses to the same
// packet, its payload described by payload_head + payload_more.
TEST(Codec, MultiBufferFrameParsesLikeTheWholeFrame) {
  for (IpVersion v : {IpVersion::kV4, IpVersion::kV6}) {
    Packet in = make_packet(MRC_OP_WRITE_LAST, v, 9999 / 4 * 4 + 3);
    auto f = build_frame(in);
    Packet whole;
    ASSERT_EQ(parse(f, cfg, whole), ParseError::kOk);
    for (uint32_t cut : {256u, 1000u, 3840u, uint32_t(f.size()) - 2}) {
      std::vector<std::vector<uint8_t>> bufs;
      for (size_t off = 0; off < f.size(); off += cut)
        bufs.emplace_back(f.begin() + off, f.begin() + std::min(f.size(), off + cut));
      std::vector<FrameSeg> more;
      for (size_t i = 1; i < bufs.size(); i++)
        more.push_back({bufs[i].data(), uint32_t(bufs[i].size())});
      Packet out;
      ASSERT_EQ(parse(bufs[0], cfg, out, more), ParseError::kOk) << "cut " << cut;
      EXPECT_EQ(out.icrc, whole.icrc);
      EXPECT_EQ(out.payload_len, whole.payload_len);
      EXPECT_EQ(out.frame_len, whole.frame_len);
      std::vector<uint8_t> pl(out.payload, out.payload + out.payload_head);
      uint32_t left = out.payload_len - out.payload_head;
      for (const FrameSeg& s : out.payload_more) {
        const uint32_t k = std::min(left, s.len);
        pl.insert(pl.end(), s.data, s.data + k);
        left -= k;
      }
      ASSERT_EQ(pl.size(), whole.payload_len);
      EXPECT_EQ(0, std::memcmp(pl.data(), whole.payload, pl.size())) << "cut " << cut;
    }
  }
}

TEST(Codec, MultiBufferFrameNeedsItsHeadersInTheFirstBuffer) {
  Packet in = make_packet(MRC_OP_WRITE_ONLY, IpVersion::kV4, 4096);
  auto f = build_frame(in);
  const uint32_t first = kMinFirstSeg - 1;
  FrameSeg rest{f.data() + first, uint32_t(f.size()) - first};
  Packet out;
  EXPECT_EQ(parse(std::span<const uint8_t>(f.data(), first), cfg, out, {&rest, 1}),
            ParseError::kTruncated);
  // A flipped byte in the last buffer fails the ICRC.
  std::vector<uint8_t> tail(f.begin() + 2048, f.end());
  tail[100] ^= 1;
  FrameSeg t{tail.data(), uint32_t(tail.size())};
  EXPECT_EQ(parse(std::span<const uint8_t>(f.data(), 2048), cfg, out, {&t, 1}),
            ParseError::kBadIcrc);
}

// Conformance 3: PSNs wrap at 2^24.
TEST(Codec, PsnArithmeticWraps) {
  EXPECT_EQ(psn_add(0xffffff, 1), 0u);
  EXPECT_EQ(psn_add(0, -1), 0xffffffu);
  EXPECT_EQ(psn_diff(2, 0xfffffe), 4);
  EXPECT_EQ(psn_diff(0xfffffe, 2), -4);
  EXPECT_TRUE(psn_lt(0xfffff0, 3));
  EXPECT_FALSE(psn_lt(3, 0xfffff0));
}

// Conformance 49: PSNs 0-11 sent, 5 and 8 lost -> cack 4, offset 1, bitmap 0110111.
// MRC's service time: SETH next = CC_STATE_SVC and 4 more bytes after
// CC_STATE; a SACK without it is the 36-byte stack it always was. A next
// that does not match the frame's length, or names nothing we define, is
// refused.
TEST(Codec, SackServiceTime) {
  for (IpVersion v : {IpVersion::kV4, IpVersion::kV6}) {
    Packet in = make_packet(MRC_OP_SACK, v);
    const auto plain = build_frame(in);
    in.cc.has_svc = true;
    in.cc.svc_time_ns = 0x89abcdef;
    const auto f = build_frame(in);
    ASSERT_EQ(f.size(), plain.size() + sizeof(mrc_cc_svc));
    ASSERT_EQ(f.size(), frame_size(in));
    Packet out;
    ASSERT_EQ(parse(f, cfg, out), ParseError::kOk);
    EXPECT_TRUE(out.cc.has_svc);
    EXPECT_EQ(out.cc.svc_time_ns, 0x89abcdefu);
    EXPECT_TRUE(out.hdrs & kHdrSvc);
    EXPECT_EQ(out.cc.rcvd_bytes, in.cc.rcvd_bytes);
    EXPECT_EQ(out.seth.sack_bitmap, in.seth.sack_bitmap);
    ASSERT_EQ(parse(plain, cfg, out), ParseError::kOk);
    EXPECT_FALSE(out.cc.has_svc);
    EXPECT_EQ(out.cc.svc_time_ns, 0u);

    const size_t bth = out.bth_off;
    const auto with_next = [&](std::vector<uint8_t> g, uint8_t next) {
      store_be16(&g[bth + 12], uint16_t((load_be16(&g[bth + 12]) & ~MRC_XH_NEXT_MASK) |
                                        (next << MRC_XH_NEXT_SHIFT)));
      seal(g, 14);
      return g;
    };
    // The plain stack claiming a service time: 4 bytes short of it.
    EXPECT_NE(parse(with_next(plain, MRC_XH_NEXT_CC_STATE_SVC), cfg, out), ParseError::kOk);
    // A service time's 4 bytes under next = CC_STATE: bytes after the stack.
    EXPECT_EQ(parse(with_next(f, MRC_XH_NEXT_CC_STATE), cfg, out), ParseError::kBadLength);
    for (uint8_t next : {uint8_t(0), uint8_t(3), uint8_t(31)})
      EXPECT_EQ(parse(with_next(f, next), cfg, out), ParseError::kBadHeaderStack) << int(next);
  }
}

TEST(Codec, SackBitmapWorkedExample) {
  PsnWindow w(0, 1024);
  for (uint32_t psn = 0; psn < 12; psn++) {
    if (psn != 5 && psn != 8) {
      EXPECT_EQ(w.mark(psn), PsnWindow::Mark::kNew);
    }
  }
  EXPECT_EQ(w.cack(), 4u);
  auto s = w.sack(11);
  EXPECT_EQ(s.sack_offset, 1);
  EXPECT_EQ(s.bitmap >> (64 - 7), 0b0110111u);
  EXPECT_EQ(s.bitmap & ((1ull << 57) - 1), 0u);
  EXPECT_EQ(w.out_of_order(), 5u);
  // Encoded in a SACK and parsed back.
  Packet p = make_packet(MRC_OP_SACK, IpVersion::kV4);
  p.seth.cack_psn = w.cack();
  p.seth.sack_offset = s.sack_offset;
  p.seth.sack_bitmap = s.bitmap;
  auto f = build_frame(p);
  Packet out;
  ASSERT_EQ(parse(f, cfg, out), ParseError::kOk);
  EXPECT_EQ(out.seth.cack_psn, 4u);
  EXPECT_EQ(out.seth.sack_offset, 1);
  EXPECT_EQ(out.seth.sack_bitmap, s.bitmap);
  // The lost ones arrive: cumulative point jumps over the SACKed PSNs.
  EXPECT_EQ(w.mark(5), PsnWindow::Mark::kNew);
  EXPECT_EQ(w.cack(), 7u);
  EXPECT_EQ(w.mark(8), PsnWindow::Mark::kNew);
  EXPECT_EQ(w.cack(), 11u);
  EXPECT_EQ(w.mark(8), PsnWindow::Mark::kDuplicate);
  EXPECT_EQ(w.mark(3), PsnWindow::Mark::kDuplicate);
}

TEST(Codec, PsnWindowBoundsAndWrap) {
  PsnWindow w(0xfffff0, 128);
  EXPECT_EQ(w.mark(psn_add(0xfffff0, 128)), PsnWindow::Mark::kOutOfWindow);
  EXPECT_EQ(w.mark(psn_add(0xfffff0, 127)), PsnWindow::Mark::kNew);
  for (int i = 0; i < 127; i++) w.mark(psn_add(0xfffff0, i));
  EXPECT_EQ(w.cack(), psn_add(0xfffff0, 127));
  EXPECT_EQ(w.out_of_order(), 0u);
  // Far-ahead trigger: the bitmap ends at the trigger.
  PsnWindow v(0, 1024);
  v.mark(200);
  auto s = v.sack(200);
  EXPECT_EQ(s.sack_offset, int16_t(200 - 63 - (-1)));
  EXPECT_EQ(s.bitmap, 1ull);
}

}  // namespace
}  // namespace mrc::codec
