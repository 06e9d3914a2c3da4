// Registration-time cost of memory option B (Documentation/service.md
// section 3): svc::share_range over fresh buffers of several sizes, filled
// (every page copied) or untouched (zero pages skipped), the same range a
// second time (reuse, no copy), and fork() of a process with the buffer
// registered (the child's private copy).
//
//   build/bench/svc_remap_bench [--reps N]
//
// Prints one line per case: the median and the minimum over N repetitions.
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "svc/remap.hpp"
#include "util/clock.hpp"

namespace {

enum class Case { kFilled, kUntouched, kTwice, kFork };

// One repetition: a fresh private anonymous buffer of `len` bytes; returns
// the measured nanoseconds, or 0 on error.
uint64_t once(size_t len, Case c) {
  auto* p = static_cast<uint8_t*>(
      ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (p == MAP_FAILED) return 0;
  if (c != Case::kUntouched)
    for (size_t i = 0; i < len; i += 64) p[i] = uint8_t(i >> 6 | 1);
  uint64_t t0 = mrc::mono_ns();
  auto r = mrc::svc::share_range(p, len);
  uint64_t t1 = mrc::mono_ns();
  if (!r.ok()) {
    std::fprintf(stderr, "share_range: %s\n", r.error().message().c_str());
    ::munmap(p, len);
    return 0;
  }
  if (c == Case::kTwice) {
    t0 = mrc::mono_ns();
    auto again = mrc::svc::share_range(p, len);
    t1 = mrc::mono_ns();
    if (!again.ok()) t1 = t0;
  } else if (c == Case::kFork) {
    t0 = mrc::mono_ns();
    const pid_t pid = ::fork();
    if (pid == 0) _exit(p[64] == uint8_t(1 | 1) ? 0 : 1);
    t1 = mrc::mono_ns();  // fork() returned in the parent: the child's copy is done
    int st = 0;
    if (pid < 0 || ::waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) t1 = t0;
  }
  ::munmap(p, len);
  (void)mrc::svc::release_unmapped_areas();
  return t1 - t0;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 9;
  for (int i = 1; i < argc; i++) {
    if (std::string(argv[i]) == "--reps" && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--reps N]\n", argv[0]);
      return 2;
    }
  }
  if (reps < 1) reps = 1;
  std::printf("write fence: %s\n", mrc::svc::write_fence_supported() ? "yes" : "no");
  std::printf("%-26s %10s %12s %12s\n", "case", "size", "median_ms", "min_ms");
  const struct {
    const char* name;
    Case c;
  } cases[] = {{"share_range filled", Case::kFilled},
               {"share_range untouched", Case::kUntouched},
               {"share_range again (reuse)", Case::kTwice},
               {"fork, registered", Case::kFork}};
  const size_t sizes[] = {size_t(4) << 10, size_t(1) << 20, size_t(64) << 20, size_t(1) << 30};
  for (const auto& k : cases)
    for (size_t len : sizes) {
      std::vector<uint64_t> t;
      for (int r = 0; r < reps; r++) {
        const uint64_t ns = once(len, k.c);
        if (!ns) return 1;
        t.push_back(ns);
      }
      std::sort(t.begin(), t.end());
      std::printf("%-26s %9zuK %12.3f %12.3f\n", k.name, len >> 10, double(t[t.size() / 2]) / 1e6,
                  double(t[0]) / 1e6);
    }
  return 0;
}
