// One logging funnel for mrc_loader and for the libbpf and libxdp messages it
// triggers. Install a hook once at start-up (the daemon routes it into its
// logger); the default prints warnings to stderr.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

namespace mrc::loader {

enum class LogLevel : uint8_t { kWarn = 0, kInfo = 1, kDebug = 2 };
std::string_view to_string(LogLevel l);

// Receives one message, without the trailing newline. `source` is "mrc_loader",
// "libbpf" or "libxdp".
using LogHook = std::function<void(LogLevel level, std::string_view source, std::string_view msg)>;

// Replaces the hook (nullptr restores the stderr default) and routes libbpf's
// and libxdp's print callbacks to it. Messages above `max_level` are dropped
// before they are formatted. Not meant to be called concurrently with itself.
void set_log_hook(LogHook hook, LogLevel max_level = LogLevel::kInfo);
void set_log_level(LogLevel max_level);

// Routes libbpf/libxdp output through the hook; called by every entry point
// of mrc_loader, idempotent.
void install_library_logging();

// While alive (on this thread), libbpf/libxdp warnings are reported at info
// level: for attempts whose failure mrc_loader handles and reports itself (e.g.
// libxdp probing its dispatcher before falling back to a single program).
class ScopedDemoteLibraryWarnings {
 public:
  ScopedDemoteLibraryWarnings();
  ~ScopedDemoteLibraryWarnings();
  ScopedDemoteLibraryWarnings(const ScopedDemoteLibraryWarnings&) = delete;
  ScopedDemoteLibraryWarnings& operator=(const ScopedDemoteLibraryWarnings&) = delete;
};

// printf-style message from mrc_loader itself.
void log(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace mrc::loader
