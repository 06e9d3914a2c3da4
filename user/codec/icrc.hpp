// RoCEv2-style invariant CRC (ICRC) of MRC packets, computed with ISA-L's
// PCLMUL-accelerated CRC-32 (Debian package libisal).
#pragma once

#include <cstddef>
#include <cstdint>

namespace mrc::codec {

// Standard CRC-32 (IEEE 802.3, reflected, as zlib's crc32()); chainable:
// crc32(crc32(0, a), b) == crc32(0, a ++ b).
uint32_t crc32(uint32_t crc, const uint8_t* data, size_t len);

// ICRC over a frame whose IP header starts at l3 and whose ICRC trailer
// starts at `end` (exclusive bound of the covered bytes). Variant fields are
// masked as RoCEv2 does: IPv4 TOS/TTL/checksum, IPv6 traffic class/flow
// label/hop limit, UDP checksum and BTH resv8a count as all ones, preceded
// by 8 bytes of ones standing for the (absent) IB local routing header.
uint32_t icrc_compute(const uint8_t* l3, const uint8_t* end);

}  // namespace mrc::codec
