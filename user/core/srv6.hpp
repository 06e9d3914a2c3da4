// SRv6 uSID EV profiles in the engine (Documentation/wire-format.md,
// "SRv6 uSID EVs"): checks at install and connect time, and the rewrite of a
// sealed frame's destination address to the EV's uSID container.
#pragma once

#include <cstdint>
#include <span>

#include "codec/packet.hpp"
#include "core/types.hpp"
#include "mrc/result.hpp"

namespace mrc::core {

// An SRv6 profile lists its containers (explicit or generated; AUTO has none
// to give), each non-zero, and no two different containers share an entropy
// (the echo must name one EV).
Status srv6_check_profile(const EvProfile& p);

// True if `e`'s container ends (after the last shift) at `peer`: only such
// EVs reach the QP's peer, and only for them is the ICRC (computed over the
// peer's address, the destination address the receiver sees) right.
bool srv6_ends_at(const EvEntry& e, const codec::IpAddr& peer);

// Puts the container in the IPv6 destination of a frame whose IP header
// starts at `l3`, after its ICRC was computed over the final address.
void srv6_set_dst(std::span<uint8_t> frame, size_t l3, const std::array<uint8_t, 16>& sid);

}  // namespace mrc::core
