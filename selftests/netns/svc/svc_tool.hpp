// What the service's test programs (svc_iso, svc_death) share: their check
// lines ("ok WHAT" / "FAIL WHAT", counted in failures) and leaving with
// status 2 when the set-up itself fails (not a test failure).
#pragma once

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "mrc/mrc.hpp"

namespace svc_tool {

inline int failures = 0;

inline void check(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok" : "FAIL", what.c_str());
  std::fflush(stdout);
  if (!ok) failures++;
}

[[noreturn]] inline void die(const std::string& what) {
  std::fprintf(stderr, "%s: %s\n", program_invocation_short_name, what.c_str());
  std::exit(2);
}

template <class T>
T must(mrc::Result<T> r, const char* what) {
  if (!r) die(std::string(what) + ": " + r.error().message());
  return std::move(*r);
}

inline void must(mrc::Status s, const char* what) {
  if (!s) die(std::string(what) + ": " + s.error().message());
}

}  // namespace svc_tool
