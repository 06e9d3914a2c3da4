// Next-hop MAC resolution for a peer address on a plane interface: a route
// lookup (the peer or its gateway) and the kernel's neighbour table, with a
// nudge to resolve it when the entry is missing (AF_XDP bypasses ARP/ND).
#pragma once

#include <string>

#include "codec/ip.hpp"
#include "codec/packet.hpp"
#include "mrc/result.hpp"

namespace mrc::lib {

// The MAC the kernel would use to reach `dst` out of `ifindex`. Waits up to
// `timeout_ms` for the neighbour entry to resolve.
Result<codec::Mac> resolve_next_hop(int ifindex, const codec::IpAddr& dst, int timeout_ms = 2000);

// The address text helpers of codec/ip.hpp, as libmrc has always named them.
using codec::parse_ip;
using codec::to_string;

}  // namespace mrc::lib
