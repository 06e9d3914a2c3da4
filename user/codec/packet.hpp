// MRC packet codec: build and parse every MRC packet type over IPv4 and IPv6,
// with strict validation. Layouts come from include/mrc/uapi/wire.h; this
// file only decodes them into host-order fields.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "mrc/types.hpp"
#include "mrc/uapi/wire.h"

namespace mrc::codec {

// Addresses, DSCP classes and the codec's configuration are public types
// (include/mrc/types.hpp).
using ::mrc::CodecConfig;
using ::mrc::DscpClasses;
using ::mrc::IpAddr;
using ::mrc::IpVersion;
using ::mrc::Mac;

// Which optional headers a packet carries (bit set).
enum Hdr : uint16_t {
  kHdrMeth = 1 << 0,
  kHdrTseth = 1 << 1,
  kHdrReth = 1 << 2,
  kHdrImm = 1 << 3,
  kHdrSeth = 1 << 4,  // always with CC_STATE
  kHdrNeth = 1 << 5,
  kHdrPeth = 1 << 6,
  kHdrErth = 1 << 7,
  kHdrEeth = 1 << 8,
  kHdrAeth = 1 << 9,
  kHdrSvc = 1 << 10,  // the SACK's service time after CC_STATE (SETH next = CC_STATE_SVC)
};

struct Eth {
  Mac dst{}, src{};
  bool has_vlan = false;
  uint16_t vlan_tci = 0;
};

struct Ip {
  IpAddr src, dst;  // src.ver decides the IP version
  uint8_t dscp = 0, ecn = 0;
  uint8_t ttl = 64;         // hop limit on IPv6
  uint32_t flow_label = 0;  // IPv6 only, 20 bits
  uint16_t id = 0;          // IPv4 only
};

struct Udp {
  uint16_t sport = 0, dport = MRC_UDP_PORT_DEFAULT;
};

struct Bth {
  uint8_t opcode = 0;
  bool se = false, mig = false;
  uint8_t pad = 0;  // derived by build(); reported by parse()
  uint8_t tver = MRC_BTH_TVER;
  uint16_t pkey = MRC_PKEY_DEFAULT;
  uint32_t dqpn = 0;
  bool ack_req = false, rtx = false, ts = false;
  uint32_t psn = 0;
};

struct Meth {
  uint16_t rqmsn = 0, msn = 0;
};
struct Tseth {
  uint16_t tx_ts = 0;
  bool tsr = false;
  uint8_t ftype = 0;
};
struct Reth {
  uint64_t va = 0;
  uint32_t rkey = 0, dma_len = 0;
};
struct Aeth {
  uint8_t syndrome = 0;
  uint32_t msn = 0;
};
struct Seth {
  uint8_t verdict = MRC_MP_NONE;  // enum mrc_mp_verdict
  bool probe_resp = false;
  int16_t ack_psn_offset = 0;
  uint32_t entropy = 0;
  uint16_t spdcid = 0, dpdcid = 0;
  uint8_t port_down_mask = 0;
  uint32_t cack_psn = 0;
  uint8_t cc_type = MRC_CC_TYPE_NONE, cc_flags = 0;
  uint8_t mpr = 0;
  int16_t sack_offset = 0;
  uint64_t sack_bitmap = 0;  // bit 63 = PSN cack_psn + sack_offset
};
struct CcState {
  uint16_t tx_ts_echo = 0;
  uint16_t ooo_count = 0;  // 15 bits
  bool restore_cwnd = false;
  uint8_t rcv_cwnd_pen = 0;  // 0..127
  uint32_t rcvd_bytes = 0;   // 24 bits, units of 256 bytes
  // The responder's service time (struct mrc_cc_svc), carried when has_svc.
  bool has_svc = false;
  uint32_t svc_time_ns = 0;
};
struct Neth {
  uint8_t reason = 0;  // enum mrc_nack_reason
  uint8_t vendor_info = 0;
  uint32_t entropy = 0;
  uint16_t spdcid = 0, dpdcid = 0;
  uint32_t nack_psn = 0;
  uint8_t cc_type = MRC_CC_TYPE_NONE, cc_flags = 0;
  uint16_t tx_ts_echo = 0;
};
struct Peth {
  uint8_t vendor_info = 0;
  uint16_t probe_id = 0;
  uint16_t spdcid = 0, dpdcid = 0;
  uint16_t tx_ts = 0;
  bool tsr = false;
  uint8_t ftype = 0;
};
struct Erth {
  uint8_t op = MRC_EP_OP_EV_PROBE;  // enum mrc_ep_op
  uint8_t vendor_info = 0;
  uint16_t req_id = 0;
  uint32_t port_status = 0;
  uint16_t tx_ts = 0;
  uint32_t entropy = 0;
};
struct Eeth {
  uint8_t op = MRC_EP_OP_EV_PROBE;
  uint8_t vendor_info = 0;
  uint16_t req_id = 0;
  uint32_t port_status = 0;
  uint16_t tx_ts_echo = 0;
  uint32_t entropy = 0;
  uint8_t rx_port = 0;
  uint8_t flags = 0;
  uint32_t svc_time_ns = 0;
  uint64_t rsp_ts_ns = 0;
};

enum class TrimKind : uint8_t { kNone = 0, kTrimmed, kTrimmedLastHop };

// A further buffer of a multi-buffer frame (the first is parse()'s frame):
// multi-buffer AF_XDP delivers a packet larger than one UMEM frame as
// several descriptors.
struct FrameSeg {
  const uint8_t* data = nullptr;
  uint32_t len = 0;
};

// Bytes a multi-buffer frame's first buffer must hold: every header MRC
// defines ends within it (Ethernet + VLAN + IPv6 + UDP + BTH + the largest
// extension stack are well under this).
inline constexpr uint32_t kMinFirstSeg = 256;

// A decoded packet, or the description of one to build. For parse() the
// payload points into the parsed frame; for build() it is copied from.
struct Packet {
  Eth eth;
  Ip ip;
  Udp udp;
  Bth bth;
  uint16_t hdrs = 0;  // Hdr bits present (parse) / derived from opcode (build)
  Meth meth;
  Tseth tseth;
  Reth reth;
  uint32_t imm = 0;
  Aeth aeth;
  Seth seth;
  CcState cc;
  Neth neth;
  Peth peth;
  Erth erth;
  Eeth eeth;
  const uint8_t* payload = nullptr;
  uint32_t payload_len = 0;
  // parse of a multi-buffer frame: the first payload_head bytes are at
  // payload, the rest continue in payload_more (in order; its last buffer
  // also holds pad and ICRC). Single buffer: payload_head == payload_len.
  uint32_t payload_head = 0;
  std::span<const FrameSeg> payload_more;
  TrimKind trim = TrimKind::kNone;  // parse: header-only / trimmed DSCP
  uint32_t icrc = 0;                // parse: value found on the wire
  uint16_t l3_off = 0, l4_off = 0, bth_off = 0, payload_off = 0;  // parse only
  uint32_t frame_len = 0;  // parse: bytes that belong to the packet (without L2 padding)
};

// ---------------------------------------------------------------------------
// Opcode table

struct OpcodeInfo {
  uint8_t opcode;
  std::string_view name;
  uint16_t hdrs;     // mandatory headers after the BTH (TSETH decided by the TS flag)
  bool data;         // a WRITE packet (carries METH/RETH and may carry payload)
  bool first, last;  // segment position
};

// nullptr for an opcode MRC does not define.
const OpcodeInfo* opcode_info(uint8_t opcode);
inline bool is_data_opcode(uint8_t op) {
  return op >= MRC_OP_WRITE_FIRST && op <= MRC_OP_WRITE_ONLY_IMM;
}
inline bool opcode_has_imm(uint8_t op) {
  return op == MRC_OP_WRITE_LAST_IMM || op == MRC_OP_WRITE_ONLY_IMM;
}
// Bytes of headers after the BTH for an opcode (with TSETH when ts is set;
// a SACK without the optional service time).
uint32_t ext_header_len(uint8_t opcode, bool ts);

// ---------------------------------------------------------------------------
// Parse

enum class ParseError : uint8_t {
  kOk = 0,
  kNotMrc,           // not IPv4/IPv6 UDP to the MRC port: not ours, pass it on
  kTruncated,        // frame shorter than the headers it announces
  kBadIpVersion,     // ethertype and IP version disagree
  kBadIpHeaderLen,   // IPv4 IHL != 5 (options are not allowed) or IPv6 ext headers
  kBadIpLength,      // IP total/payload length disagrees with the frame
  kBadIpChecksum,    // IPv4 header checksum wrong
  kIpFragment,       // fragmented IP
  kBadUdpLength,     // UDP length disagrees with the IP length
  kBadTver,          // BTH TVer not supported
  kBadReservedBits,  // reserved bits set where they must be zero
  kUnknownOpcode,    // opcode outside the MRC table
  kBadHeaderStack,   // flags inconsistent with opcode (TS on control, wrong XH type)
  kBadLength,        // payload/pad length inconsistent with opcode
  kBadPad,           // PadCnt wrong for the payload
  kBadQpn,           // endpoint op not to QPN 2, or a QP packet to QPN 2
  kBadIcrc,          // ICRC mismatch
  kCount,
};
static_assert(size_t(ParseError::kCount) == kParseErrorKinds,
              "mrc/types.hpp counts (and parse_error_name names) every kind of parse error");
std::string_view to_string(ParseError e);

// Parses one Ethernet frame. On success `out` describes it. A trimmed data
// packet (header only or trimmed DSCP) parses with out.trim != kNone and
// no payload; its ICRC is not checked (the switch cut it off).
// A multi-buffer frame passes its further buffers in `more`: headers are
// read from the first (at least kMinFirstSeg bytes, else kTruncated), the
// ICRC covers all of them, and the payload is described by payload,
// payload_head and payload_more (pointing into `more`, which must outlive
// the Packet's use).
ParseError parse(std::span<const uint8_t> frame, const CodecConfig& cfg, Packet& out,
                 std::span<const FrameSeg> more = {});

// ---------------------------------------------------------------------------
// Build

// Bytes build() needs for a packet (without Ethernet minimum padding).
uint32_t frame_size(const Packet& p);

// Writes the frame for `p` into `out`. Derives the header set from the
// opcode and bth.ts, PadCnt from the payload, lengths, the IPv4 checksum
// (UDP checksum is 0 as in RoCEv2) and the ICRC. Returns the frame length,
// or 0 if `out` is too small or the description is inconsistent (unknown
// opcode, payload on a control packet, payload on FIRST/MIDDLE not a
// multiple of 4).
size_t build(const Packet& p, std::span<uint8_t> out);

// The two halves of build() for callers that write the payload themselves
// (gathering from several buffers straight into the frame, one copy):
// build_headers() writes every header, leaves payload, pad and ICRC bytes
// alone, returns the frame length (0 on error) and the payload offset;
// seal() zeroes the pad and writes the ICRC once the payload is in place.
size_t build_headers(const Packet& p, std::span<uint8_t> out, uint32_t* payload_off);
void seal(std::span<uint8_t> frame, uint16_t l3_off);

// Recomputes the ICRC of a built frame in place (after patching fields).
void refresh_icrc(std::span<uint8_t> frame, const Packet& layout);

// ---------------------------------------------------------------------------
// PSN arithmetic (24 bit, wrap-safe)

inline uint32_t psn_add(uint32_t psn, int64_t d) {
  return uint32_t(int64_t(psn) + d) & MRC_PSN_MASK;
}
// Signed distance b - a in (-2^23, 2^23].
inline int32_t psn_diff(uint32_t b, uint32_t a) {
  int32_t d = int32_t((b - a) & MRC_PSN_MASK);
  return d >= (1 << 23) ? d - (1 << 24) : d;
}
inline bool psn_lt(uint32_t a, uint32_t b) { return psn_diff(b, a) > 0; }

}  // namespace mrc::codec
