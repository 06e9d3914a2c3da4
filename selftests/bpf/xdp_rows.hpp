// Frame builders for the mrc_xdp fixture tables: MRC packets from the codec
// (selftests/support/packet_factory.hpp), their trimmed and malformed variants,
// other traffic, and the replies mrc_xdp must produce (built with the codec).
#pragma once

#include <cstdint>
#include <vector>

#include "codec/packet.hpp"
#include "support/packet_factory.hpp"

namespace mrc::testing {

using Frame = std::vector<uint8_t>;

// Offsets of a frame without/with one VLAN tag.
inline size_t l3_of(const codec::Packet& p) { return p.eth.has_vlan ? 18 : 14; }
inline size_t ip_len_of(const codec::Packet& p) {
  return p.ip.src.ver == codec::IpVersion::kV4 ? 20 : 40;
}
inline size_t bth_of(const codec::Packet& p) { return l3_of(p) + ip_len_of(p) + 8; }

// Rewrites IP and UDP lengths from the frame size and the IPv4 checksum.
void fix_lengths(Frame& f, size_t l3, bool v6);
void fix_ip4_checksum(Frame& f, size_t l3);

// A data packet cut right after its header stack (no payload, no ICRC), as a
// switch trims it; dscp is written into the IP header.
Frame header_only(const codec::Packet& p, uint8_t dscp);

// Non-MRC traffic.
Frame arp_frame();
Frame icmp4_frame();
Frame tcp4_frame(uint16_t dport);
Frame udp_frame(codec::IpVersion v, uint16_t dport, size_t payload);
Frame icmp6_nd_frame();

// What mrc_xdp must answer to trimmed data `in` (reason TRIMMED or
// TRIMMED_LASTHOP), built with the codec.
Frame expected_nack(const codec::Packet& in, uint32_t remote_qpn, uint8_t reason,
                    uint8_t dscp_control);
// The ENDPOINT_RESPONSE to EV probe `in`; svc_time_ns and rsp_ts_ns are 0
// (they depend on time; compare with ep_response_mask()).
codec::Packet expected_ep_response_packet(const codec::Packet& in, uint8_t rx_port,
                                          uint16_t port_up_mask, uint8_t dscp_control);
// Byte mask (1 = compare) of an ENDPOINT_RESPONSE frame: svc_time_ns,
// rsp_ts_ns and the ICRC covering them are left out.
std::vector<uint8_t> ep_response_mask(const codec::Packet& rsp, size_t frame_len);

}  // namespace mrc::testing
