// The monotonic clock (CLOCK_MONOTONIC) in nanoseconds: the time base of the
// engine's timers, the controller's EV reports and the live-frames TX ring.
#pragma once

#include <time.h>

#include <cstdint>

namespace mrc {

inline uint64_t mono_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
}

}  // namespace mrc
