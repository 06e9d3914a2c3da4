#include "mrcd/log.hpp"

#include <time.h>

#include <cstdio>

#include "bpf/log.hpp"

namespace mrc::mrcd {

namespace {
Level g_level = Level::kInfo;
const char* names[] = {"error", "warn", "info", "debug"};
}  // namespace

void set_log_level(const std::string& name) {
  for (int i = 0; i < 4; i++)
    if (name == names[i]) g_level = Level(i);
  bpf::LogLevel bl = g_level >= Level::kDebug  ? bpf::LogLevel::kDebug
                     : g_level >= Level::kInfo ? bpf::LogLevel::kInfo
                                               : bpf::LogLevel::kWarn;
  bpf::set_log_hook(
      [](bpf::LogLevel l, std::string_view src, std::string_view msg) {
        Level ml = l == bpf::LogLevel::kWarn   ? Level::kWarn
                   : l == bpf::LogLevel::kInfo ? Level::kInfo
                                               : Level::kDebug;
        logf(ml, "%.*s: %.*s", int(src.size()), src.data(), int(msg.size()), msg.data());
      },
      bl);
}

Level log_level() { return g_level; }

void logf(Level l, const char* fmt, ...) {
  if (l > g_level) return;
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  localtime_r(&ts.tv_sec, &tm);
  char t[32];
  strftime(t, sizeof(t), "%H:%M:%S", &tm);
  std::fprintf(stderr, "%s.%03ld mrcd %s: %s\n", t, ts.tv_nsec / 1000000, names[int(l)], buf);
}

}  // namespace mrc::mrcd
