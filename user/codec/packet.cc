#include "packet.hpp"

#include <bit>
#include <cstring>

#include "bytes.hpp"
#include "icrc.hpp"

static_assert(std::endian::native == std::endian::little, "mrc assumes a little-endian host");

namespace mrc::codec {
namespace {

constexpr uint16_t kEthP_IPv4 = 0x0800;
constexpr uint16_t kEthP_IPv6 = 0x86dd;
constexpr uint16_t kEthP_8021Q = 0x8100;
constexpr uint16_t kEthP_8021AD = 0x88a8;
constexpr uint8_t kIpProtoUdp = 17;

constexpr uint16_t kData = kHdrMeth | kHdrReth;

constexpr OpcodeInfo kOpcodes[] = {
    {MRC_OP_WRITE_FIRST, "WRITE_FIRST", kData, true, true, false},
    {MRC_OP_WRITE_MIDDLE, "WRITE_MIDDLE", kData, true, false, false},
    {MRC_OP_WRITE_LAST, "WRITE_LAST", kData, true, false, true},
    {MRC_OP_WRITE_LAST_IMM, "WRITE_LAST_WITH_IMM", kData | kHdrImm, true, false, true},
    {MRC_OP_WRITE_ONLY, "WRITE_ONLY", kData, true, true, true},
    {MRC_OP_WRITE_ONLY_IMM, "WRITE_ONLY_WITH_IMM", kData | kHdrImm, true, true, true},
    {MRC_OP_ACK, "ACKNOWLEDGE", kHdrAeth, false, false, false},
    {MRC_OP_EP_REQUEST, "ENDPOINT_REQUEST", kHdrErth, false, false, false},
    {MRC_OP_EP_RESPONSE, "ENDPOINT_RESPONSE", kHdrEeth, false, false, false},
    {MRC_OP_SACK, "RELIABILITY_SACK", kHdrSeth, false, false, false},
    {MRC_OP_NACK, "RELIABILITY_NACK", kHdrNeth, false, false, false},
    {MRC_OP_PROBE, "RELIABILITY_PROBE_REQ", kHdrPeth, false, false, false},
};

uint32_t hdrs_len(uint16_t h) {
  uint32_t n = 0;
  if (h & kHdrMeth) n += sizeof(mrc_meth);
  if (h & kHdrTseth) n += sizeof(mrc_tseth);
  if (h & kHdrReth) n += sizeof(mrc_reth);
  if (h & kHdrImm) n += sizeof(mrc_immdt);
  if (h & kHdrSeth) n += sizeof(mrc_seth) + sizeof(mrc_cc_state);
  if (h & kHdrSvc) n += sizeof(mrc_cc_svc);
  if (h & kHdrNeth) n += sizeof(mrc_neth);
  if (h & kHdrPeth) n += sizeof(mrc_peth);
  if (h & kHdrErth) n += sizeof(mrc_erth);
  if (h & kHdrEeth) n += sizeof(mrc_eeth);
  if (h & kHdrAeth) n += sizeof(mrc_aeth);
  return n;
}

uint16_t ip_checksum(const uint8_t* p, size_t len) {
  uint32_t sum = 0;
  for (size_t i = 0; i + 1 < len; i += 2) sum += load_be16(p + i);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return uint16_t(~sum);
}

uint16_t xh_word(uint8_t type, uint8_t next) {
  return uint16_t(type << MRC_XH_TYPE_SHIFT | (next << MRC_XH_NEXT_SHIFT & MRC_XH_NEXT_MASK));
}

}  // namespace

const OpcodeInfo* opcode_info(uint8_t opcode) {
  for (const auto& o : kOpcodes)
    if (o.opcode == opcode) return &o;
  return nullptr;
}

uint32_t ext_header_len(uint8_t opcode, bool ts) {
  const OpcodeInfo* oi = opcode_info(opcode);
  if (!oi) return 0;
  return hdrs_len(uint16_t(oi->hdrs | (ts && oi->data ? kHdrTseth : 0)));
}

std::string_view to_string(ParseError e) {
  switch (e) {
    case ParseError::kOk:
      return "ok";
    case ParseError::kNotMrc:
      return "not an MRC packet";
    case ParseError::kTruncated:
      return "truncated: frame shorter than its headers";
    case ParseError::kBadIpVersion:
      return "IP version does not match the ethertype";
    case ParseError::kBadIpHeaderLen:
      return "IPv4 options or IPv6 extension headers are not allowed";
    case ParseError::kBadIpLength:
      return "IP length disagrees with the frame";
    case ParseError::kBadIpChecksum:
      return "IPv4 header checksum mismatch";
    case ParseError::kIpFragment:
      return "IP fragment";
    case ParseError::kBadUdpLength:
      return "UDP length disagrees with the IP length";
    case ParseError::kBadTver:
      return "unsupported BTH transport version";
    case ParseError::kBadReservedBits:
      return "reserved bits set";
    case ParseError::kUnknownOpcode:
      return "unknown MRC opcode";
    case ParseError::kBadHeaderStack:
      return "header stack inconsistent with the opcode";
    case ParseError::kBadLength:
      return "payload length inconsistent with the opcode";
    case ParseError::kBadPad:
      return "BTH PadCnt inconsistent with the payload";
    case ParseError::kBadQpn:
      return "QPN inconsistent with the opcode";
    case ParseError::kBadIcrc:
      return "ICRC mismatch";
    case ParseError::kCount:
      break;
  }
  return "unknown parse error";
}

namespace {

// Ethernet: the addresses and the VLAN tag into out.eth; the ethertype and
// the offset of the IP header.
ParseError parse_eth(const uint8_t* p, size_t n, Packet& out, uint16_t& etype, size_t& l3) {
  if (n < 14) return ParseError::kNotMrc;
  std::memcpy(out.eth.dst.data(), p, 6);
  std::memcpy(out.eth.src.data(), p + 6, 6);
  size_t off = 12;
  etype = load_be16(p + off);
  if (etype == kEthP_8021Q || etype == kEthP_8021AD) {
    if (n < 18) return ParseError::kNotMrc;
    out.eth.has_vlan = true;
    out.eth.vlan_tci = load_be16(p + 14);
    off += 4;
    etype = load_be16(p + off);
  }
  l3 = off + 2;
  return ParseError::kOk;
}

// IPv4 at l3 (UDP to cfg.udp_port, else not ours): into out.ip; the end of
// the datagram and the offset of the UDP header.
ParseError parse_ipv4(const uint8_t* p, size_t n, size_t l3, const CodecConfig& cfg, Packet& out,
                      size_t& l3_end, size_t& off) {
  if (n < l3 + 20) return ParseError::kNotMrc;
  const uint8_t* ip = p + l3;
  if (ip[9] != kIpProtoUdp) return ParseError::kNotMrc;
  // From here on the packet claims to be IPv4/UDP; only the port is left to
  // decide whether it is ours, so look at it before judging the header.
  if ((ip[0] & 0x0f) != 5) {
    if ((ip[0] & 0x0f) < 5 || n < l3 + (ip[0] & 0x0f) * 4u + 4) return ParseError::kNotMrc;
    if (load_be16(ip + (ip[0] & 0x0f) * 4 + 2) != cfg.udp_port) return ParseError::kNotMrc;
    return (ip[0] >> 4) != 4 ? ParseError::kBadIpVersion : ParseError::kBadIpHeaderLen;
  }
  if (n < l3 + 28 || load_be16(ip + 22) != cfg.udp_port) return ParseError::kNotMrc;
  if ((ip[0] >> 4) != 4) return ParseError::kBadIpVersion;
  uint16_t frag = load_be16(ip + 6);
  if (frag & 0x3fff) return ParseError::kIpFragment;  // MF or offset
  uint16_t tot = load_be16(ip + 2);
  if (tot < 28 || l3 + tot > n) return ParseError::kBadIpLength;
  if (ip_checksum(ip, 20) != 0) return ParseError::kBadIpChecksum;
  out.ip.src.ver = out.ip.dst.ver = IpVersion::kV4;
  std::memcpy(out.ip.src.b.data(), ip + 12, 4);
  std::memcpy(out.ip.dst.b.data(), ip + 16, 4);
  out.ip.dscp = ip[1] >> 2;
  out.ip.ecn = ip[1] & 3;
  out.ip.ttl = ip[8];
  out.ip.id = load_be16(ip + 4);
  l3_end = l3 + tot;
  off = l3 + 20;
  return ParseError::kOk;
}

// IPv6 at l3, as parse_ipv4.
ParseError parse_ipv6(const uint8_t* p, size_t n, size_t l3, const CodecConfig& cfg, Packet& out,
                      size_t& l3_end, size_t& off) {
  if (n < l3 + 40) return ParseError::kNotMrc;
  const uint8_t* ip = p + l3;
  if (ip[6] == 44) {  // fragment header: ours only if the inner next header is UDP
    if (n < l3 + 48 || ip[40] != kIpProtoUdp) return ParseError::kNotMrc;
    return ParseError::kIpFragment;
  }
  if (ip[6] != kIpProtoUdp) return ParseError::kNotMrc;
  if (n < l3 + 48 || load_be16(ip + 42) != cfg.udp_port) return ParseError::kNotMrc;
  if ((ip[0] >> 4) != 6) return ParseError::kBadIpVersion;
  uint16_t plen = load_be16(ip + 4);
  if (plen < 8 || l3 + 40 + plen > n) return ParseError::kBadIpLength;
  out.ip.src.ver = out.ip.dst.ver = IpVersion::kV6;
  std::memcpy(out.ip.src.b.data(), ip + 8, 16);
  std::memcpy(out.ip.dst.b.data(), ip + 24, 16);
  uint8_t tc = uint8_t((ip[0] & 0x0f) << 4 | ip[1] >> 4);
  out.ip.dscp = tc >> 2;
  out.ip.ecn = tc & 3;
  out.ip.flow_label = load_be24(ip + 1) & 0xfffff;
  out.ip.ttl = ip[7];
  l3_end = l3 + 40 + plen;
  off = l3 + 40;
  return ParseError::kOk;
}

// The BTH at off (within l3_end) into out.bth; its opcode's description.
ParseError parse_bth(const uint8_t* p, size_t off, size_t l3_end, Packet& out,
                     const OpcodeInfo*& oi) {
  if (l3_end < off + sizeof(mrc_bth)) return ParseError::kTruncated;
  const uint8_t* bth = p + off;
  out.bth_off = uint16_t(off);
  Bth& b = out.bth;
  b.opcode = bth[0];
  b.se = bth[1] & MRC_BTH_SE;
  b.mig = bth[1] & MRC_BTH_MIG;
  b.pad = (bth[1] & MRC_BTH_PAD_MASK) >> MRC_BTH_PAD_SHIFT;
  b.tver = bth[1] & MRC_BTH_TVER_MASK;
  b.pkey = load_be16(bth + 2);
  b.dqpn = load_be24(bth + 5);
  uint32_t fp = load_be32(bth + 8);
  b.ack_req = fp & MRC_BTH_F_ACKREQ;
  b.rtx = fp & MRC_BTH_F_RTX;
  b.ts = fp & MRC_BTH_F_TS;
  b.psn = fp & MRC_PSN_MASK;
  if (b.tver != MRC_BTH_TVER) return ParseError::kBadTver;
  oi = opcode_info(b.opcode);
  if (!oi) return ParseError::kUnknownOpcode;
  if (fp & (MRC_BTH_F_RESV6 | MRC_BTH_F_RESV_LOW)) return ParseError::kBadReservedBits;
  if (b.ts && !oi->data) return ParseError::kBadHeaderStack;
  bool ep = b.opcode == MRC_OP_EP_REQUEST || b.opcode == MRC_OP_EP_RESPONSE;
  if (ep != (b.dqpn == MRC_QPN_ENDPOINT)) return ParseError::kBadQpn;
  return ParseError::kOk;
}

// A data packet's headers: METH, TSETH (with BTH.TS), RETH, ImmDt.
ParseError parse_data_headers(const uint8_t* h, Packet& out) {
  out.meth.rqmsn = load_be16(h);
  out.meth.msn = load_be16(h + 2);
  h += 4;
  if (out.bth.ts) {
    out.tseth.tx_ts = load_be16(h);
    uint16_t w = load_be16(h + 2);
    out.tseth.tsr = w & MRC_TSETH_TSR;
    out.tseth.ftype = w & MRC_TSETH_FTYPE_MASK;
    if (w & ~(MRC_TSETH_TSR | MRC_TSETH_FTYPE_MASK)) return ParseError::kBadReservedBits;
    h += 4;
  }
  out.reth.va = load_be64(h);
  out.reth.rkey = load_be32(h + 8);
  out.reth.dma_len = load_be32(h + 12);
  h += 16;
  if (out.hdrs & kHdrImm) out.imm = load_be32(h);
  return ParseError::kOk;
}

// SETH and the CC state that follows it.
ParseError parse_seth(const uint8_t* h, Packet& out) {
  uint16_t w = load_be16(h);
  const uint16_t next = (w & MRC_XH_NEXT_MASK) >> MRC_XH_NEXT_SHIFT;
  if ((w & MRC_XH_TYPE_MASK) >> MRC_XH_TYPE_SHIFT != MRC_XH_TYPE_SACK ||
      next != ((out.hdrs & kHdrSvc) ? MRC_XH_NEXT_CC_STATE_SVC : MRC_XH_NEXT_CC_STATE))
    return ParseError::kBadHeaderStack;
  if (w & MRC_SETH_RESV_MASK) return ParseError::kBadReservedBits;
  Seth& s = out.seth;
  s.verdict = uint8_t((w & MRC_SETH_M_MASK) >> MRC_SETH_M_SHIFT);
  if (s.verdict > MRC_MP_ALWAYS_SKIP) return ParseError::kBadReservedBits;
  s.probe_resp = w & MRC_SETH_PR;
  s.ack_psn_offset = int16_t(load_be16(h + 2));
  s.entropy = load_be32(h + 4);
  s.spdcid = load_be16(h + 8);
  s.dpdcid = load_be16(h + 10);
  s.port_down_mask = h[12];
  s.cack_psn = load_be24(h + 13);
  s.cc_type = h[16] >> 4;
  s.cc_flags = h[16] & 0x0f;
  s.mpr = h[17];
  s.sack_offset = int16_t(load_be16(h + 18));
  s.sack_bitmap = load_be64(h + 20);
  const uint8_t* c = h + sizeof(mrc_seth);
  out.cc.tx_ts_echo = load_be16(c);
  uint16_t ooo = load_be16(c + 2);
  if (ooo & ~MRC_CC_OOO_MASK) return ParseError::kBadReservedBits;
  out.cc.ooo_count = ooo;
  uint32_t pr = load_be32(c + 4);
  out.cc.restore_cwnd = pr & MRC_CC_RESTORE_CWND;
  out.cc.rcv_cwnd_pen = uint8_t((pr & MRC_CC_PEN_MASK) >> MRC_CC_PEN_SHIFT);
  out.cc.rcvd_bytes = pr & MRC_CC_RCVD_MASK;
  out.cc.has_svc = out.hdrs & kHdrSvc;
  if (out.cc.has_svc) out.cc.svc_time_ns = load_be32(c + sizeof(mrc_cc_state));
  return ParseError::kOk;
}

ParseError parse_neth(const uint8_t* h, Packet& out) {
  uint16_t w = load_be16(h);
  if ((w & MRC_XH_TYPE_MASK) >> MRC_XH_TYPE_SHIFT != MRC_XH_TYPE_NACK)
    return ParseError::kBadHeaderStack;
  Neth& k = out.neth;
  k.reason = h[2];
  k.vendor_info = h[3];
  k.entropy = load_be32(h + 4);
  k.spdcid = load_be16(h + 8);
  k.dpdcid = load_be16(h + 10);
  if (h[12] != 0) return ParseError::kBadReservedBits;
  k.nack_psn = load_be24(h + 13);
  k.cc_type = h[16] >> 4;
  k.cc_flags = h[16] & 0x0f;
  k.tx_ts_echo = load_be16(h + 18);
  switch (k.reason) {
    case MRC_NACK_TRIMMED:
    case MRC_NACK_TRIMMED_LASTHOP:
    case MRC_NACK_NO_BITMAP:
    case MRC_NACK_NO_PKT_BUFFER:
    case MRC_NACK_NO_RESOURCE:
    case MRC_NACK_PSN_OOR_WINDOW:
    case MRC_NACK_UNEXP_EVENT:
      return ParseError::kOk;
    default:
      return ParseError::kBadHeaderStack;
  }
}

ParseError parse_peth(const uint8_t* h, Packet& out) {
  uint16_t w = load_be16(h);
  if ((w & MRC_XH_TYPE_MASK) >> MRC_XH_TYPE_SHIFT != MRC_XH_TYPE_PROBE)
    return ParseError::kBadHeaderStack;
  Peth& q = out.peth;
  q.vendor_info = h[3];
  q.probe_id = load_be16(h + 4);
  q.spdcid = load_be16(h + 8);
  q.dpdcid = load_be16(h + 10);
  q.tx_ts = load_be16(h + 12);
  uint16_t t = load_be16(h + 14);
  q.tsr = t & MRC_TSETH_TSR;
  q.ftype = t & MRC_TSETH_FTYPE_MASK;
  return ParseError::kOk;
}

ParseError parse_erth(const uint8_t* h, Packet& out) {
  Erth& e = out.erth;
  e.op = (h[0] & MRC_EP_OP_MASK) >> MRC_EP_OP_SHIFT;
  if (e.op > MRC_EP_OP_EV_PROBE) return ParseError::kBadHeaderStack;
  e.vendor_info = h[1];
  e.req_id = load_be16(h + 2);
  e.port_status = load_be32(h + 4);
  e.tx_ts = load_be16(h + 8);
  e.entropy = load_be32(h + 12);
  return ParseError::kOk;
}

ParseError parse_eeth(const uint8_t* h, Packet& out) {
  Eeth& e = out.eeth;
  e.op = (h[0] & MRC_EP_OP_MASK) >> MRC_EP_OP_SHIFT;
  if (e.op > MRC_EP_OP_EV_PROBE) return ParseError::kBadHeaderStack;
  e.vendor_info = h[1];
  e.req_id = load_be16(h + 2);
  e.port_status = load_be32(h + 4);
  e.tx_ts_echo = load_be16(h + 8);
  e.entropy = load_be32(h + 12);
  e.rx_port = h[16];
  e.flags = h[17];
  e.svc_time_ns = load_be32(h + 20);
  e.rsp_ts_ns = load_be64(h + 24);
  return ParseError::kOk;
}

// The extension headers out.hdrs names, at h (their length checked).
ParseError parse_ext_headers(const uint8_t* h, bool data, Packet& out) {
  if (data) return parse_data_headers(h, out);
  if (out.hdrs & kHdrSeth) return parse_seth(h, out);
  if (out.hdrs & kHdrNeth) return parse_neth(h, out);
  if (out.hdrs & kHdrPeth) return parse_peth(h, out);
  if (out.hdrs & kHdrErth) return parse_erth(h, out);
  if (out.hdrs & kHdrEeth) return parse_eeth(h, out);
  if (out.hdrs & kHdrAeth) {
    uint32_t w = load_be32(h);
    out.aeth.syndrome = uint8_t(w >> 24);
    out.aeth.msn = w & 0xffffff;
  }
  return ParseError::kOk;
}

// A data packet's payload (body: payload + pad, at off) into out.
ParseError parse_payload(const uint8_t* p, size_t off, size_t body, const OpcodeInfo* oi,
                         size_t first_len, std::span<const FrameSeg> more, Packet& out) {
  const Bth& b = out.bth;
  if (body % 4 != 0) return ParseError::kBadPad;
  if (b.pad > body) return ParseError::kBadPad;
  size_t plen = body - b.pad;
  if (!oi->last && (plen == 0 || b.pad != 0)) return ParseError::kBadLength;
  if (b.pad && oi->last && (plen % 4) + b.pad != 4) return ParseError::kBadPad;
  if (plen > out.reth.dma_len) return ParseError::kBadLength;
  out.payload = p + off;
  out.payload_len = uint32_t(plen);
  out.payload_off = uint16_t(off);
  out.payload_head = more.empty() ? uint32_t(plen) : uint32_t(std::min(plen, first_len - off));
  if (out.payload_head < plen) out.payload_more = more;
  return ParseError::kOk;
}

// Multi-buffer: the ICRC trailer at icrc_at may straddle buffers; the CRC
// runs on across them from l3.
ParseError check_icrc_segmented(std::span<const uint8_t> frame, size_t l3, size_t icrc_at,
                                std::span<const FrameSeg> more, const CodecConfig& cfg,
                                Packet& out) {
  const uint8_t* p = frame.data();
  const size_t first = frame.size();
  uint32_t crc = icrc_compute(p + l3, p + std::min(first, icrc_at));
  uint8_t trailer[MRC_ICRC_LEN];
  size_t pos = first;  // stream offset of the buffer at hand
  for (size_t i = 0; i < MRC_ICRC_LEN; i++)
    if (icrc_at + i < first) trailer[i] = p[icrc_at + i];
  for (const FrameSeg& s : more) {
    const size_t end = pos + s.len;
    if (pos < icrc_at) crc = crc32(crc, s.data, std::min(end, icrc_at) - pos);
    for (size_t i = 0; i < MRC_ICRC_LEN; i++)
      if (icrc_at + i >= pos && icrc_at + i < end) trailer[i] = s.data[icrc_at + i - pos];
    pos = end;
  }
  out.icrc = load_le32(trailer);
  if (cfg.verify_icrc && crc != out.icrc) return ParseError::kBadIcrc;
  return ParseError::kOk;
}

}  // namespace

ParseError parse(std::span<const uint8_t> frame, const CodecConfig& cfg, Packet& out,
                 std::span<const FrameSeg> more) {
  const uint8_t* p = frame.data();
  size_t n = frame.size();
  out = Packet{};
  if (!more.empty()) {
    // Headers are read from the first buffer only.
    if (n < kMinFirstSeg) return ParseError::kTruncated;
    for (const FrameSeg& s : more) n += s.len;
  }
  uint16_t etype;
  size_t l3;
  ParseError e = parse_eth(p, n, out, etype, l3);
  if (e != ParseError::kOk) return e;
  size_t l3_end, off;  // end of the IP datagram; the UDP header
  if (etype == kEthP_IPv4)
    e = parse_ipv4(p, n, l3, cfg, out, l3_end, off);
  else if (etype == kEthP_IPv6)
    e = parse_ipv6(p, n, l3, cfg, out, l3_end, off);
  else
    return ParseError::kNotMrc;
  if (e != ParseError::kOk) return e;
  const uint8_t* udp = p + off;
  out.udp.sport = load_be16(udp);
  out.udp.dport = load_be16(udp + 2);
  if (load_be16(udp + 4) != l3_end - off) return ParseError::kBadUdpLength;
  out.l3_off = uint16_t(l3);
  out.l4_off = uint16_t(off);
  out.frame_len = uint32_t(l3_end);
  off += 8;

  const OpcodeInfo* oi = nullptr;
  if ((e = parse_bth(p, off, l3_end, out, oi)) != ParseError::kOk) return e;
  off += sizeof(mrc_bth);
  out.hdrs = uint16_t(oi->hdrs | (out.bth.ts ? kHdrTseth : 0));
  // A SACK's SETH says whether the service time follows its CC_STATE.
  if ((out.hdrs & kHdrSeth) && l3_end >= off + 2 &&
      (load_be16(p + off) & MRC_XH_NEXT_MASK) >> MRC_XH_NEXT_SHIFT == MRC_XH_NEXT_CC_STATE_SVC)
    out.hdrs |= kHdrSvc;
  const size_t hl = hdrs_len(out.hdrs);
  if (l3_end < off + hl) return ParseError::kTruncated;
  if ((e = parse_ext_headers(p + off, oi->data, out)) != ParseError::kOk) return e;
  off += hl;

  // What follows the headers: payload + pad + ICRC, or nothing (trimmed).
  const size_t rest = l3_end - off;
  const bool dscp_trim = out.ip.dscp == cfg.dscp.trimmed || out.ip.dscp == cfg.dscp.trimmed_lasthop;
  if (oi->data && (rest == 0 || dscp_trim)) {
    out.trim =
        out.ip.dscp == cfg.dscp.trimmed_lasthop ? TrimKind::kTrimmedLastHop : TrimKind::kTrimmed;
    out.payload = nullptr;
    out.payload_len = 0;
    return ParseError::kOk;
  }
  if (rest < MRC_ICRC_LEN) return ParseError::kTruncated;
  const size_t body = rest - MRC_ICRC_LEN;  // payload + pad
  if (!oi->data) {
    if (body != 0) return ParseError::kBadLength;
    if (out.bth.pad != 0) return ParseError::kBadPad;
  } else {
    if ((e = parse_payload(p, off, body, oi, frame.size(), more, out)) != ParseError::kOk) return e;
  }
  const size_t icrc_at = l3_end - MRC_ICRC_LEN;
  if (!more.empty()) return check_icrc_segmented(frame, l3, icrc_at, more, cfg, out);
  out.icrc = load_le32(p + icrc_at);
  if (cfg.verify_icrc && icrc_compute(p + l3, p + icrc_at) != out.icrc) return ParseError::kBadIcrc;
  return ParseError::kOk;
}

uint32_t frame_size(const Packet& pk) {
  const OpcodeInfo* oi = opcode_info(pk.bth.opcode);
  if (!oi) return 0;
  uint32_t l2 = pk.eth.has_vlan ? 18 : 14;
  uint32_t l3 = pk.ip.src.ver == IpVersion::kV4 ? 20 : 40;
  uint32_t plen = oi->data ? pk.payload_len : 0;
  uint32_t pad = (4 - plen % 4) % 4;
  const uint32_t svc = (oi->hdrs & kHdrSeth) && pk.cc.has_svc ? sizeof(mrc_cc_svc) : 0;
  return l2 + l3 + 8 + 12 + ext_header_len(pk.bth.opcode, pk.bth.ts) + svc + plen + pad +
         MRC_ICRC_LEN;
}

size_t build(const Packet& pk, std::span<uint8_t> out) {
  uint32_t poff = 0;
  size_t n = build_headers(pk, out, &poff);
  if (!n) return 0;
  if (pk.payload_len && is_data_opcode(pk.bth.opcode))
    std::memcpy(out.data() + poff, pk.payload, pk.payload_len);
  seal(out.first(n), pk.eth.has_vlan ? 18 : 14);
  return n;
}

void seal(std::span<uint8_t> frame, uint16_t l3_off) {
  uint8_t* p = frame.data();
  uint8_t* end = p + frame.size() - MRC_ICRC_LEN;
  // Zero the pad bytes in front of the ICRC (BTH PadCnt says how many).
  const uint8_t* ip = p + l3_off;
  const size_t l4 = l3_off + ((ip[0] >> 4) == 4 ? 20 : 40);
  const uint8_t pad = (p[l4 + 8 + 1] & MRC_BTH_PAD_MASK) >> MRC_BTH_PAD_SHIFT;
  std::memset(end - pad, 0, pad);
  store_le32(end, icrc_compute(p + l3_off, end));
}

namespace {

// Ethernet (with the VLAN tag pk asks for) at p; the offset of the IP header.
size_t put_eth(const Packet& pk, uint8_t* p, bool v4) {
  std::memcpy(p, pk.eth.dst.data(), 6);
  std::memcpy(p + 6, pk.eth.src.data(), 6);
  size_t off = 12;
  if (pk.eth.has_vlan) {
    store_be16(p + 12, kEthP_8021Q);
    store_be16(p + 14, pk.eth.vlan_tci);
    off += 4;
  }
  store_be16(p + off, v4 ? kEthP_IPv4 : kEthP_IPv6);
  return off + 2;
}

void put_ipv4(const Packet& pk, uint8_t* ip, uint8_t tos, uint32_t udp_len) {
  ip[0] = 0x45;
  ip[1] = tos;
  store_be16(ip + 2, uint16_t(udp_len + 20));
  store_be16(ip + 4, pk.ip.id);
  store_be16(ip + 6, 0x4000);  // DF
  ip[8] = pk.ip.ttl;
  ip[9] = kIpProtoUdp;
  store_be16(ip + 10, 0);
  std::memcpy(ip + 12, pk.ip.src.b.data(), 4);
  std::memcpy(ip + 16, pk.ip.dst.b.data(), 4);
  store_be16(ip + 10, ip_checksum(ip, 20));
}

void put_ipv6(const Packet& pk, uint8_t* ip, uint8_t tos, uint32_t udp_len) {
  store_be32(ip, 6u << 28 | uint32_t(tos) << 20 | (pk.ip.flow_label & 0xfffff));
  store_be16(ip + 4, uint16_t(udp_len));
  ip[6] = kIpProtoUdp;
  ip[7] = pk.ip.ttl;
  std::memcpy(ip + 8, pk.ip.src.b.data(), 16);
  std::memcpy(ip + 24, pk.ip.dst.b.data(), 16);
}

void put_udp(const Packet& pk, uint8_t* udp, uint32_t udp_len) {
  store_be16(udp, pk.udp.sport);
  store_be16(udp + 2, pk.udp.dport);
  store_be16(udp + 4, uint16_t(udp_len));
  store_be16(udp + 6, 0);
}

void put_bth(const Bth& b, uint8_t* bth, uint8_t pad) {
  bth[0] = b.opcode;
  bth[1] = uint8_t((b.se ? MRC_BTH_SE : 0) | (b.mig ? MRC_BTH_MIG : 0) | pad << MRC_BTH_PAD_SHIFT |
                   (b.tver & MRC_BTH_TVER_MASK));
  store_be16(bth + 2, b.pkey);
  store_be32(bth + 4, b.dqpn & MRC_QPN_MASK);
  store_be32(bth + 8, (b.ack_req ? MRC_BTH_F_ACKREQ : 0) | (b.rtx ? MRC_BTH_F_RTX : 0) |
                          (b.ts ? MRC_BTH_F_TS : 0) | (b.psn & MRC_PSN_MASK));
}

// The extension headers below: each at h, returning the end of what it wrote.
uint8_t* put_data_headers(const Packet& pk, bool imm, uint8_t* h) {
  store_be16(h, pk.meth.rqmsn);
  store_be16(h + 2, pk.meth.msn);
  h += 4;
  if (pk.bth.ts) {
    store_be16(h, pk.tseth.tx_ts);
    store_be16(h + 2, uint16_t((pk.tseth.tsr ? MRC_TSETH_TSR : 0) |
                               (pk.tseth.ftype & MRC_TSETH_FTYPE_MASK)));
    h += 4;
  }
  store_be64(h, pk.reth.va);
  store_be32(h + 8, pk.reth.rkey);
  store_be32(h + 12, pk.reth.dma_len);
  h += 16;
  if (imm) {
    store_be32(h, pk.imm);
    h += 4;
  }
  return h;
}

uint8_t* put_seth(const Packet& pk, uint8_t* h) {
  const Seth& s = pk.seth;
  const uint8_t next = pk.cc.has_svc ? MRC_XH_NEXT_CC_STATE_SVC : MRC_XH_NEXT_CC_STATE;
  store_be16(h, uint16_t(xh_word(MRC_XH_TYPE_SACK, next) |
                         (s.verdict << MRC_SETH_M_SHIFT & MRC_SETH_M_MASK) |
                         (s.probe_resp ? MRC_SETH_PR : 0)));
  store_be16(h + 2, uint16_t(s.ack_psn_offset));
  store_be32(h + 4, s.entropy);
  store_be16(h + 8, s.spdcid);
  store_be16(h + 10, s.dpdcid);
  h[12] = s.port_down_mask;
  store_be24(h + 13, s.cack_psn & MRC_PSN_MASK);
  h[16] = uint8_t(s.cc_type << 4 | (s.cc_flags & 0x0f));
  h[17] = s.mpr;
  store_be16(h + 18, uint16_t(s.sack_offset));
  store_be64(h + 20, s.sack_bitmap);
  uint8_t* c = h + sizeof(mrc_seth);
  store_be16(c, pk.cc.tx_ts_echo);
  store_be16(c + 2, pk.cc.ooo_count & MRC_CC_OOO_MASK);
  store_be32(c + 4, (pk.cc.restore_cwnd ? MRC_CC_RESTORE_CWND : 0) |
                        (uint32_t(pk.cc.rcv_cwnd_pen & 0x7f) << MRC_CC_PEN_SHIFT) |
                        (pk.cc.rcvd_bytes & MRC_CC_RCVD_MASK));
  if (!pk.cc.has_svc) return h + sizeof(mrc_seth) + sizeof(mrc_cc_state);
  store_be32(c + sizeof(mrc_cc_state), pk.cc.svc_time_ns);
  return h + sizeof(mrc_seth) + sizeof(mrc_cc_state) + sizeof(mrc_cc_svc);
}

uint8_t* put_neth(const Neth& k, uint8_t* h) {
  store_be16(h, xh_word(MRC_XH_TYPE_NACK, MRC_XH_NEXT_NONE));
  h[2] = k.reason;
  h[3] = k.vendor_info;
  store_be32(h + 4, k.entropy);
  store_be16(h + 8, k.spdcid);
  store_be16(h + 10, k.dpdcid);
  store_be32(h + 12, k.nack_psn & MRC_PSN_MASK);
  h[16] = uint8_t(k.cc_type << 4 | (k.cc_flags & 0x0f));
  h[17] = 0;
  store_be16(h + 18, k.tx_ts_echo);
  return h + sizeof(mrc_neth);
}

uint8_t* put_peth(const Peth& q, uint8_t* h) {
  store_be16(h, xh_word(MRC_XH_TYPE_PROBE, MRC_XH_NEXT_NONE));
  h[2] = 0;
  h[3] = q.vendor_info;
  store_be16(h + 4, q.probe_id);
  store_be16(h + 6, 0);
  store_be16(h + 8, q.spdcid);
  store_be16(h + 10, q.dpdcid);
  store_be16(h + 12, q.tx_ts);
  store_be16(h + 14, uint16_t((q.tsr ? MRC_TSETH_TSR : 0) | (q.ftype & MRC_TSETH_FTYPE_MASK)));
  return h + sizeof(mrc_peth);
}

uint8_t* put_erth(const Erth& e, uint8_t* h) {
  h[0] = uint8_t(e.op << MRC_EP_OP_SHIFT & MRC_EP_OP_MASK);
  h[1] = e.vendor_info;
  store_be16(h + 2, e.req_id);
  store_be32(h + 4, e.port_status);
  store_be16(h + 8, e.tx_ts);
  store_be16(h + 10, 0);
  store_be32(h + 12, e.entropy);
  return h + sizeof(mrc_erth);
}

uint8_t* put_eeth(const Eeth& e, uint8_t* h) {
  std::memset(h, 0, sizeof(mrc_eeth));
  h[0] = uint8_t(e.op << MRC_EP_OP_SHIFT & MRC_EP_OP_MASK);
  h[1] = e.vendor_info;
  store_be16(h + 2, e.req_id);
  store_be32(h + 4, e.port_status);
  store_be16(h + 8, e.tx_ts_echo);
  store_be32(h + 12, e.entropy);
  h[16] = e.rx_port;
  h[17] = e.flags;
  store_be32(h + 20, e.svc_time_ns);
  store_be64(h + 24, e.rsp_ts_ns);
  return h + sizeof(mrc_eeth);
}

// The extension headers of pk's opcode at h; the end of them (where a data
// packet's payload goes).
uint8_t* put_ext_headers(const Packet& pk, const OpcodeInfo* oi, uint8_t* h) {
  if (oi->data) return put_data_headers(pk, oi->hdrs & kHdrImm, h);
  if (oi->hdrs & kHdrSeth) return put_seth(pk, h);
  if (oi->hdrs & kHdrNeth) return put_neth(pk.neth, h);
  if (oi->hdrs & kHdrPeth) return put_peth(pk.peth, h);
  if (oi->hdrs & kHdrErth) return put_erth(pk.erth, h);
  if (oi->hdrs & kHdrEeth) return put_eeth(pk.eeth, h);
  if (oi->hdrs & kHdrAeth) {
    store_be32(h, uint32_t(pk.aeth.syndrome) << 24 | (pk.aeth.msn & 0xffffff));
    return h + sizeof(mrc_aeth);
  }
  return h;
}

}  // namespace

size_t build_headers(const Packet& pk, std::span<uint8_t> out, uint32_t* payload_off) {
  const OpcodeInfo* oi = opcode_info(pk.bth.opcode);
  if (!oi) return 0;
  if (!oi->data && pk.payload_len) return 0;
  if (oi->data && !oi->last && pk.payload_len % 4) return 0;
  if (pk.bth.ts && !oi->data) return 0;
  const uint32_t total = frame_size(pk);
  if (total > out.size()) return 0;
  const bool v4 = pk.ip.src.ver == IpVersion::kV4;
  uint8_t* p = out.data();
  const size_t l3 = put_eth(pk, p, v4);
  const uint32_t plen = oi->data ? pk.payload_len : 0;
  const uint8_t pad = uint8_t((4 - plen % 4) % 4);
  const uint32_t udp_len = uint32_t(total - l3 - (v4 ? 20 : 40));
  const uint8_t tos = uint8_t(pk.ip.dscp << 2 | (pk.ip.ecn & 3));
  if (v4)
    put_ipv4(pk, p + l3, tos, udp_len);
  else
    put_ipv6(pk, p + l3, tos, udp_len);
  const size_t l4 = l3 + (v4 ? 20 : 40);
  put_udp(pk, p + l4, udp_len);
  put_bth(pk.bth, p + l4 + 8, pad);
  *payload_off = uint32_t(put_ext_headers(pk, oi, p + l4 + 8 + 12) - p);
  return total;
}

void refresh_icrc(std::span<uint8_t> frame, const Packet& layout) {
  uint8_t* end = frame.data() + layout.frame_len - MRC_ICRC_LEN;
  store_le32(end, icrc_compute(frame.data() + layout.l3_off, end));
}

}  // namespace mrc::codec
