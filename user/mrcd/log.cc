#include "mrcd/log.hpp"

#include <time.h>

#include <cstdio>

#include "loader/log.hpp"

namespace mrc::mrcd {

namespace {
Level g_level = Level::kInfo;
const char* names[] = {"error", "warn", "info", "debug"};
}  // namespace

void set_log_level(const std::string& name) {
  for (int i = 0; i < 4; i++)
    if (name == names[i]) g_level = Level(i);
  loader::LogLevel bl = g_level >= Level::kDebug  ? loader::LogLevel::kDebug
                        : g_level >= Level::kInfo ? loader::LogLevel::kInfo
                                                  : loader::LogLevel::kWarn;
  loader::set_log_hook(
      [](loader::LogLevel l, std::string_view src, std::string_view msg) {
        Level ml = l == loader::LogLevel::kWarn   ? Level::kWarn
                   : l == loader::LogLevel::kInfo ? Level::kInfo
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
