#include "loader/log.hpp"

#include <bpf/libbpf.h>
#include <xdp/libxdp.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <mutex>
#include <string>

namespace mrc::loader {
namespace {

std::mutex g_mu;
LogHook g_hook;  // empty: stderr
std::atomic<int> g_max{int(LogLevel::kWarn)};
std::once_flag g_installed;
thread_local int t_demote = 0;  // > 0: library warnings are reported as info

void emit(LogLevel level, std::string_view source, const char* fmt, va_list ap) {
  if (int(level) > g_max.load(std::memory_order_relaxed)) return;
  char buf[1024];
  int n = std::vsnprintf(buf, sizeof(buf), fmt, ap);
  if (n < 0) return;
  size_t len = std::min(size_t(n), sizeof(buf) - 1);
  while (len && (buf[len - 1] == '\n' || buf[len - 1] == '\r')) len--;
  std::string_view msg(buf, len);
  // libbpf and libxdp prefix most messages with their own name
  std::string prefix = std::string(source) + ": ";
  if (msg.substr(0, prefix.size()) == prefix) msg.remove_prefix(prefix.size());
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_hook) {
    g_hook(level, source, msg);
  } else {
    std::fprintf(stderr, "%.*s: %.*s: %.*s\n", int(source.size()), source.data(),
                 int(to_string(level).size()), to_string(level).data(), int(msg.size()),
                 msg.data());
  }
}

// The level of a libbpf or libxdp message: their warnings are info while a
// ScopedDemoteLibraryWarnings is alive on this thread (a handled fallback).
LogLevel library_level(bool warn, bool info) {
  if (warn) return t_demote > 0 ? LogLevel::kInfo : LogLevel::kWarn;
  return info ? LogLevel::kInfo : LogLevel::kDebug;
}

int libbpf_cb(enum libbpf_print_level level, const char* fmt, va_list ap) {
  emit(library_level(level == LIBBPF_WARN, level == LIBBPF_INFO), "libbpf", fmt, ap);
  return 0;
}

int libxdp_cb(enum libxdp_print_level level, const char* fmt, va_list ap) {
  emit(library_level(level == LIBXDP_WARN, level == LIBXDP_INFO), "libxdp", fmt, ap);
  return 0;
}

}  // namespace

std::string_view to_string(LogLevel l) {
  switch (l) {
    case LogLevel::kWarn:
      return "warning";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kDebug:
      return "debug";
  }
  return "?";
}

void install_library_logging() {
  std::call_once(g_installed, [] {
    libbpf_set_print(libbpf_cb);
    libxdp_set_print(libxdp_cb);
  });
}

void set_log_hook(LogHook hook, LogLevel max_level) {
  install_library_logging();
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_hook = std::move(hook);
  }
  set_log_level(max_level);
}

ScopedDemoteLibraryWarnings::ScopedDemoteLibraryWarnings() { t_demote++; }
ScopedDemoteLibraryWarnings::~ScopedDemoteLibraryWarnings() { t_demote--; }

void set_log_level(LogLevel max_level) { g_max.store(int(max_level), std::memory_order_relaxed); }

void log(LogLevel level, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  emit(level, "mrc_loader", fmt, ap);
  va_end(ap);
}

}  // namespace mrc::loader
