// The engine's names for the public vocabulary: work requests and
// completions, QP attributes, EV and CC profiles, events, counters
// (include/mrc/types.hpp) and the engine configuration (include/mrc/config.hpp).
// They are defined once, in the public headers, and imported here so the
// engine's code names them core::X.
#pragma once

#include "codec/ev.hpp"
#include "codec/packet.hpp"
#include "mrc/config.hpp"
#include "mrc/types.hpp"

namespace mrc::core {
using namespace ::mrc::v1;
}  // namespace mrc::core
