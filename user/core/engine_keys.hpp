// SPDX-License-Identifier: (GPL-2.0 OR BSD-3-Clause)
// Protocol tunables of EngineConfig by name, for the tools' and the
// service's --engine KEY=VALUE (mrc_perf, mrc-serviced): times in us (at most
// an hour), counts at most 2^32-1, switches 0 or 1.
#pragma once
#include <cstdint>
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

}  // namespace mrc::core
