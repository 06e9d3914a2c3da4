// Small helpers the AF_XDP benchmarks share: clocks, CPU pinning, and
// exiting with a message on setup errors (benchmarks are not the daemon).
#pragma once

#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "mrc/result.hpp"

namespace mrc::bench {

// Name printed before error messages (set by main).
inline const char* g_prog = "bench";

inline uint64_t clock_ns(clockid_t id) {
  timespec ts;
  clock_gettime(id, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}
inline uint64_t now_ns() { return clock_ns(CLOCK_MONOTONIC); }

inline void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

[[noreturn]] inline void die(const std::string& what) {
  std::fprintf(stderr, "%s: %s\n", g_prog, what.c_str());
  std::exit(1);
}

template <class T>
T must(Result<T>&& r, const char* what) {
  if (!r) die(std::string(what) + ": " + r.error().message());
  return std::move(*r);
}
inline void must(Status&& s, const char* what) {
  if (!s) die(std::string(what) + ": " + s.error().message());
}

}  // namespace mrc::bench
