// SPDX-License-Identifier: (GPL-2.0 OR BSD-3-Clause)
//
// When a CQ read that finds nothing gives up the CPU (FI_MRC_YIELD,
// FI_MRC_YIELD_US; Documentation/libfabric.md, "Running"): only once the CQ
// has been empty for a while, so that a consumer polling through a short gap
// (a streaming exchange, the next message tens of microseconds away) keeps
// its CPU, and one that waits longer leaves it to whatever else is runnable
// (libmrc's engine thread, the peer, the other ranks). Pure logic: the
// caller passes the time, so the unit tests drive it with their own clock.
#pragma once

#include <atomic>
#include <charconv>
#include <cstdint>
#include <string_view>

namespace mrc::fi {

// FI_MRC_YIELD_US when unset (Documentation/libfabric.md gives the
// measurements behind it).
inline constexpr uint32_t kYieldUsDefault = 5;
inline constexpr uint32_t kYieldUsMax = 1000000;

// FI_MRC_YIELD_US's value: a decimal whole number of microseconds in
// 0..kYieldUsMax, nothing else (no sign, no blanks, no suffix).
inline bool parse_yield_us(std::string_view s, uint32_t* us) {
  uint32_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v > kYieldUsMax) return false;
  *us = v;
  return true;
}

// Per CQ: the time of the first read of the current empty run. Relaxed
// atomics, no lock: readers of one CQ in several threads only blur when the
// run began, which moves a yield by one read at most.
class EmptyYield {
 public:
  // after_ns < 0: never yield (FI_MRC_YIELD=0); 0: on every empty read.
  explicit EmptyYield(int64_t after_ns = -1) : after_ns_(after_ns) {}
  // Before the CQ is used (not thread-safe).
  void configure(int64_t after_ns) {
    after_ns_ = after_ns;
    since_.store(0, std::memory_order_relaxed);
  }

  bool never() const { return after_ns_ < 0; }
  // Whether on_empty needs the time (a clock read) at all.
  bool timed() const { return after_ns_ > 0; }

  // A read returned something (a completion or an error entry): the run of
  // empty reads is over.
  void on_entry() {
    if (since_.load(std::memory_order_relaxed) != 0) since_.store(0, std::memory_order_relaxed);
  }

  // A read found nothing at now_ns (a monotonic clock, any origin but 0 is
  // taken as "no run"): whether this read yields.
  bool on_empty(int64_t now_ns) {
    if (after_ns_ <= 0) return after_ns_ == 0;
    if (now_ns == 0) now_ns = 1;
    int64_t s = since_.load(std::memory_order_relaxed);
    if (s == 0) {
      since_.store(now_ns, std::memory_order_relaxed);
      return false;
    }
    return now_ns - s >= after_ns_;
  }

 private:
  int64_t after_ns_;
  std::atomic<int64_t> since_{0};
};

}  // namespace mrc::fi
