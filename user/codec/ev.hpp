// Entropy values (EVs) as mrc_ctl.h defines them: an EV format profile (the
// on-wire field widths), an EV profile (per-field init value, generation
// range and mask), expansion of a compact EV into the wire value, the five
// configuration rules, generation, and carriage in UDP sport / flow label.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "packet.hpp"

namespace mrc::codec {

constexpr size_t kEvMaxBytes = 32;  // MRC_CTL_EV_MAX_BYTES
// An EV value: a big-endian bit string (byte 0 bit 7 is bit 0).
using EvValue = std::array<uint8_t, kEvMaxBytes>;

// mrc_ctl_ev_fmt_mode bits (a public type: include/mrc/types.hpp).
using ::mrc::EvFmtMode;

struct EvFmtField {
  uint8_t width = 0;  // bits
};

struct EvField {
  uint32_t width = 0, init_val = 0, min_val = 0, max_val = 0, mask = 0;
};

// Checks the profile/format pair against the rules of mrc_ctl.h:
//  1. field_count <= fmt_field_count                       (EINVAL)
//  2. sum of field widths <= sum of format widths          (EINVAL)
//  3. init_val fits the field width                        (EINVAL)
//  4. mask has no bit outside the field width              (EINVAL)
//  5. max_val fits popcount(mask) bits                     (EINVAL)
// plus: field width <= 32 and <= its format width (EINVAL), min_val <= max_val
// (EINVAL), and the format's total width <= max_width (E2BIG).
// Returns 0 or the errno; `why` says which rule and which field.
int ev_validate(std::span<const EvFmtField> fmt, std::span<const EvField> fields,
                uint32_t max_width, std::string* why);

// Bits of compact EV a profile consumes (sum of popcount(mask)).
uint32_t ev_compact_bits(std::span<const EvField> fields);

// Expands a compact EV (big-endian bit string) into `out`. Fields beyond the
// profile's stay zero. Returns false if the compact EV has a bit set past the
// bits the profile consumes (the reference expander rejects that too).
bool ev_expand(std::span<const EvFmtField> fmt, std::span<const EvField> fields,
               std::span<const uint8_t> compact, EvValue& out);

// The compact EV of generated entry `index`: each field's masked bits count
// from min_val to max_val, the last field fastest (mixed radix), wrapping.
EvValue ev_generate_compact(std::span<const EvField> fields, uint64_t index);
// Number of distinct generated values (product of (max - min + 1)).
uint64_t ev_generate_space(std::span<const EvField> fields);

// Total width of a format profile in bits.
uint32_t ev_fmt_width(std::span<const EvFmtField> fmt);

// The 32-bit entropy of a wire EV value for a 32-bit (STEV) or 16-bit (UDP)
// carriage: the first 4 or 2 bytes of the value, big-endian.
uint32_t ev_to_u32(const EvValue& v, EvFmtMode mode);
EvValue ev_from_u32(uint32_t ev, EvFmtMode mode);

// Carriage (Documentation/wire-format.md "Entropy"):
//  UDP:  sport = EV[15:0] (16-bit EVs).
//  STEV: sport = EV[15:0]; on IPv6 the flow label's low 16 bits = EV[31:16],
//        its top 4 bits zero; on IPv4 EV[31:16] is not carried.
void ev_apply(uint32_t ev, EvFmtMode mode, Ip& ip, Udp& udp);
// The EV as a receiver can reconstruct it (bits not carried read as zero).
uint32_t ev_from_wire(const Ip& ip, const Udp& udp, EvFmtMode mode);
// Bits of a 32-bit EV that survive carriage for this mode/IP version.
uint32_t ev_carried_mask(EvFmtMode mode, IpVersion ver);

}  // namespace mrc::codec
