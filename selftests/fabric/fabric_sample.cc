// fabric_sample: samples interface byte/packet counters of fabric namespaces
// every N ms (absolute deadlines, CLOCK_MONOTONIC) and prints JSON lines
//   {"t_ns":..,"c":{"NS/IF":[rx_bytes,tx_bytes,rx_packets,tx_packets],...}}
// until --duration-ms passes or SIGTERM/SIGINT arrives.
//
//   fabric_sample [--interval-ms 10] [--duration-ms D] [--out FILE] NS:IF[,IF...] ...
//
// Counters come from /proc/thread-self/net/dev opened inside each namespace
// (kept open and re-read from offset 0), so no process has to live there.
#include <fcntl.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "fabric_util.hpp"

namespace {

volatile sig_atomic_t g_stop = 0;

struct Source {
  std::string ns;
  std::vector<std::string> ifs;
  mrc::fabric::UniqueFd fd;
};

uint64_t mono_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace mrc::fabric;
  uint64_t interval_ms = 10, duration_ms = 0;
  std::string out_path;
  std::vector<Source> src;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--interval-ms" && i + 1 < argc) {
      interval_ms = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--duration-ms" && i + 1 < argc) {
      duration_ms = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--out" && i + 1 < argc) {
      out_path = argv[++i];
    } else if (a.find(':') != std::string::npos) {
      Source s;
      s.ns = a.substr(0, a.find(':'));
      std::stringstream ss(a.substr(a.find(':') + 1));
      for (std::string f; std::getline(ss, f, ',');)
        if (!f.empty()) s.ifs.push_back(f);
      src.push_back(std::move(s));
    } else {
      std::cerr << "usage: fabric_sample [--interval-ms N] [--duration-ms D] [--out FILE] "
                   "NS:IF[,IF...] ...\n";
      return 2;
    }
  }
  if (src.empty() || interval_ms == 0) {
    std::cerr << "fabric_sample: nothing to sample\n";
    return 2;
  }
  for (auto& s : src) {
    auto scope = NetnsScope::enter(s.ns);
    if (!scope) {
      std::cerr << "fabric_sample: " << scope.error().message() << "\n";
      return 1;
    }
    s.fd = UniqueFd(::open("/proc/thread-self/net/dev", O_RDONLY | O_CLOEXEC));
    if (!s.fd.valid()) {
      std::cerr << "fabric_sample: /proc/net/dev in " << s.ns << ": " << std::strerror(errno)
                << "\n";
      return 1;
    }
  }
  FILE* out = out_path.empty() ? stdout : std::fopen(out_path.c_str(), "w");
  if (!out) {
    std::cerr << "fabric_sample: " << out_path << ": " << std::strerror(errno) << "\n";
    return 1;
  }
  struct sigaction sa {};
  sa.sa_handler = [](int) { g_stop = 1; };
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);

  std::vector<char> buf(1 << 16);
  std::string line;
  const uint64_t t0 = mono_ns();
  uint64_t next = t0;
  while (!g_stop) {
    const uint64_t t = mono_ns();
    line = "{\"t_ns\":" + std::to_string(t) + ",\"c\":{";
    bool first = true;
    for (auto& s : src) {
      ssize_t n = pread(s.fd.get(), buf.data(), buf.size() - 1, 0);
      if (n <= 0) continue;
      buf[size_t(n)] = 0;
      // lines: "  name: rx_bytes rx_packets errs drop fifo frame compressed multicast tx_bytes
      // tx_packets ..."
      for (char* l = std::strtok(buf.data(), "\n"); l; l = std::strtok(nullptr, "\n")) {
        char* colon = std::strchr(l, ':');
        if (!colon) continue;
        *colon = 0;
        char* name = l;
        while (*name == ' ') name++;
        bool want = false;
        for (const auto& f : s.ifs) want |= f == name;
        if (!want) continue;
        unsigned long long v[16] = {};
        int k = std::sscanf(colon + 1, "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0],
                            &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]);
        if (k < 10) continue;
        char rec[256];
        std::snprintf(rec, sizeof(rec), "%s\"%s/%s\":[%llu,%llu,%llu,%llu]", first ? "" : ",",
                      s.ns.c_str(), name, v[0], v[8], v[1], v[9]);
        line += rec;
        first = false;
      }
    }
    line += "}}\n";
    std::fputs(line.c_str(), out);
    std::fflush(out);
    if (duration_ms && t - t0 >= duration_ms * 1000000ull) break;
    next += interval_ms * 1000000ull;
    const uint64_t now = mono_ns();
    while (next <= now) next += interval_ms * 1000000ull;  // fell behind: skip slots, keep the grid
    timespec ts{time_t(next / 1000000000ull), long(next % 1000000000ull)};
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr);
  }
  if (out != stdout) std::fclose(out);
  return 0;
}
