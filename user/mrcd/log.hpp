// mrcd's log: one line per message on stderr ("LEVEL component: text"),
// which systemd's journal stores with timestamps. mrc_loader, libbpf and libxdp
// messages are routed here too.
#pragma once

#include <cstdarg>
#include <string>

namespace mrc::mrcd {

enum class Level { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

void set_log_level(const std::string& name);
Level log_level();
void logf(Level l, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

#define MRCD_ERROR(...) ::mrc::mrcd::logf(::mrc::mrcd::Level::kError, __VA_ARGS__)
#define MRCD_WARN(...) ::mrc::mrcd::logf(::mrc::mrcd::Level::kWarn, __VA_ARGS__)
#define MRCD_INFO(...) ::mrc::mrcd::logf(::mrc::mrcd::Level::kInfo, __VA_ARGS__)
#define MRCD_DEBUG(...) ::mrc::mrcd::logf(::mrc::mrcd::Level::kDebug, __VA_ARGS__)

}  // namespace mrc::mrcd
