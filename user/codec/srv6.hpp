// SRv6 uSID carriage of entropy values (Documentation/wire-format.md,
// "SRv6 uSID EVs"): an EV of an SRv6 format is a uSID container, a locator
// block followed by one micro-SID per hop, put in the IPv6 destination
// address; every hop shifts its own uSID out (End with the NEXT-C-SID
// flavour) until the address left is the destination's own.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace mrc::codec {

using Srv6Sid = std::array<uint8_t, 16>;

// Locator block and uSID widths of the containers this implementation forms
// (RFC 9800 NEXT-C-SID defaults: LBL 32, NFL 16).
inline constexpr uint32_t kSrv6BlockBits = 32, kSrv6UsidBits = 16;

// The 32-bit entropy an SRv6 EV carries in the UDP source port and the flow
// label (so the receiver can echo it: the shifts erase the container). A
// hash of the container; never 0, and its UDP half never below 1024.
uint32_t srv6_entropy(const Srv6Sid& sid);

// The container in the first 16 bytes of an expanded EV value; false if
// the value has bits beyond 128 (an SRv6+SRH EV: a second segment).
bool srv6_sid_from_value(std::span<const uint8_t> value, Srv6Sid& sid);

// The uSIDs after the block, in order, up to the first zero one.
std::vector<uint16_t> srv6_hops(const Srv6Sid& sid);

// The address the container becomes after every hop but the last has
// shifted its uSID out: block, last uSID, zeros (the destination's own
// address in a uSID fabric). A container of one uSID is its own final form.
Srv6Sid srv6_final(const Srv6Sid& sid);

// "fd00:1:100:1002:200:4::" style text, and "100 > 1002 > 200 > 4" hops.
std::string srv6_to_string(const Srv6Sid& sid);
std::string srv6_hops_string(const Srv6Sid& sid);

}  // namespace mrc::codec
