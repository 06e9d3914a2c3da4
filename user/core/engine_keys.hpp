// SPDX-License-Identifier: (GPL-2.0 OR BSD-3-Clause)
// Protocol tunables of EngineConfig by name, for the tools' and the
// service's --engine KEY=VALUE (mrc_perf, mrc-serviced): times in us (at most
// an hour), counts at most 2^32-1, switches 0 or 1.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "core/engine.hpp"

namespace mrc::core {

struct EngineKey {
  const char* name;
  uint64_t max;  // the largest value it takes
  void (*set)(EngineConfig&, uint64_t);
};

// Every key, in the order the tools' help lists them.
std::span<const EngineKey> engine_keys();
// The key of that name, or nullptr.
const EngineKey* find_engine_key(std::string_view name);

// A whole decimal number: digits only (no sign, blank or suffix), at most
// 2^64-1; nullopt otherwise (an empty string too).
std::optional<uint64_t> parse_whole(std::string_view v);

// Applies settings "KEY=VALUE" separated by commas or blanks (e.g. the
// MRC_ENGINE environment variable: "cc_qa=0,sack_bytes=32768") to *e, each
// as --engine sets it. VALUE is a whole decimal number in 0..the key's max.
// An unknown key, a bad value or an item without '=' is EINVAL naming it
// (`what` says where it came from) and leaves *e as it was; an empty list
// changes nothing.
Status apply_engine_settings(std::string_view list, EngineConfig* e, std::string_view what);

}  // namespace mrc::core
