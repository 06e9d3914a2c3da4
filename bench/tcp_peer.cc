// tcp_peer: the TCP / MPTCP peer transport MRC is compared with.
//
//   tcp_peer server [--bind ADDR] [--port P] [--mode tcp|tcp-multi|mptcp]
//                   [--sample-ms 10] [--timeout S] [--forever]
//   tcp_peer client --connect ADDR [--port P] [--mode tcp|tcp-multi|mptcp]
//                   [--flows N] [--duration S | --bytes N] [--verify]
//                   [--bind ADDR] [--sport P[,P...]]
//                   [--pingpong --msg-size B (--iters N | --duration S) [--spin-us N]]
//                   [--sample-ms 10]
//   --cc ALGO sets TCP_CONGESTION on every socket (e.g. cubic; default: the
//   namespace's default, bbr on the project machines).
//
// The receiver (server) prints goodput samples as JSON lines
//   {"t_ms":10,"mono_ns":...,"bytes":1250000,"total":1250000}
// (bytes received in that interval, t_ms since the first connection, mono_ns
// the CLOCK_MONOTONIC time the interval really ended; with several flows
// also "flows":[bytes of flow 0, flow 1, ...] in that interval), and a
// closing {"summary":{...}}. The client prints the same for what it sent
// ("dir":"tx"). --verify fills the stream with a per-flow pattern that the
// server checks byte for byte. --sport binds flow i to source port P[i]
// (an ECMP route then hashes each flow to a known next hop). --pingpong
// measures round trips of --msg-size byte messages (--iters of them, or as
// many as fit in --duration) and prints p50/p99/p99.9 in microseconds.
// --spin-us N (ping-pong): both ends poll the socket (non-blocking recv) for
// up to N us before each blocking wait, as a polling RDMA application does
// (mrc_perf -l --progress app --spin-us N); the server learns it from the
// client's hello.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#ifndef IPPROTO_MPTCP
#define IPPROTO_MPTCP 262
#endif

namespace {

constexpr uint32_t kMagic = 0x4d524350;  // "MRCP"
constexpr size_t kBuf = 256 * 1024;
constexpr size_t kMaxFlowStats = 64;  // flows with their own sample counter

struct Hello {
  uint32_t magic;
  uint8_t pingpong;
  uint8_t verify;
  uint16_t flow;
  uint32_t msg_size;
  uint32_t flows;
  uint32_t spin_us;  // ping-pong: poll this long before a blocking recv
} __attribute__((packed));

struct Opts {
  std::string role, bind_addr, connect_addr, mode = "tcp", cc;
  uint16_t port = 5201;
  int flows = 1;
  double duration = 0;
  uint64_t bytes = 0;
  bool verify = false, pingpong = false, forever = false;
  uint32_t msg_size = 64, iters = 1000;
  uint32_t spin_us = 0;  // --spin-us (ping-pong)
  bool iters_set = false;
  std::vector<uint16_t> sports;  // client: source port of flow i
  unsigned sample_ms = 10;
  double timeout = 120;
};

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// Pattern of flow f at stream offset o: bytes of 64-bit words.
inline uint64_t pattern_word(uint32_t flow, uint64_t k) {
  return (k + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t(flow) << 48);
}
void fill_pattern(uint32_t flow, uint64_t off, uint8_t* dst, size_t len) {
  // unaligned head byte by byte, then whole words
  while (len && off % 8) {
    uint64_t w = pattern_word(flow, off / 8);
    *dst++ = reinterpret_cast<const uint8_t*>(&w)[off % 8];
    off++, len--;
  }
  for (uint64_t k = off / 8; len >= 8; k++, dst += 8, off += 8, len -= 8) {
    uint64_t w = pattern_word(flow, k);
    std::memcpy(dst, &w, 8);
  }
  while (len) {
    uint64_t w = pattern_word(flow, off / 8);
    size_t in = off % 8, n = std::min<size_t>(8 - in, len);
    std::memcpy(dst, reinterpret_cast<const uint8_t*>(&w) + in, n);
    dst += n, off += n, len -= n;
  }
}

int proto_of(const std::string& mode) { return mode == "mptcp" ? IPPROTO_MPTCP : IPPROTO_TCP; }

// TCP_CONGESTION on a socket (MPTCP passes it to its subflows). A child
// network namespace can only make "allowed" algorithms its default; per
// socket, CAP_NET_ADMIN may pick any available one.
bool set_cc(int fd, const std::string& cc) {
  if (cc.empty()) return true;
  if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc.data(), socklen_t(cc.size())) == 0)
    return true;
  std::fprintf(stderr, "tcp_peer: TCP_CONGESTION %s: %s\n", cc.c_str(), std::strerror(errno));
  return false;
}

bool resolve(const std::string& host, uint16_t port, sockaddr_storage& ss, socklen_t& len) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_flags = AI_NUMERICHOST | (host.empty() ? AI_PASSIVE : 0);
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_family = AF_UNSPEC;
  if (getaddrinfo(host.empty() ? nullptr : host.c_str(), std::to_string(port).c_str(), &hints,
                  &res) != 0)
    return false;
  std::memcpy(&ss, res->ai_addr, res->ai_addrlen);
  len = res->ai_addrlen;
  freeaddrinfo(res);
  return true;
}

void set_timeouts(int fd, int ms) {
  timeval tv{ms / 1000, (ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

// Reads exactly n bytes before the deadline. spin_ns: each time the socket
// has nothing, poll it with non-blocking reads for up to that long, then block.
bool read_full(int fd, void* p, size_t n, uint64_t deadline, uint64_t spin_ns = 0) {
  auto* b = static_cast<uint8_t*>(p);
  while (n) {
    ssize_t r = -1;
    if (spin_ns) {
      const uint64_t until = now_ns() + spin_ns;
      do {
        r = recv(fd, b, n, MSG_DONTWAIT);
      } while (r < 0 && errno == EAGAIN && now_ns() < until);
      if (r < 0 && errno == EAGAIN) r = recv(fd, b, n, 0);
    } else {
      r = recv(fd, b, n, 0);
    }
    if (r > 0) {
      b += r, n -= size_t(r);
    } else if (r == 0 || (errno != EAGAIN && errno != EINTR) || now_ns() > deadline) {
      return false;
    }
  }
  return true;
}
bool write_full(int fd, const void* p, size_t n, uint64_t deadline) {
  auto* b = static_cast<const uint8_t*>(p);
  while (n) {
    ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
    if (w > 0) {
      b += w, n -= size_t(w);
    } else if ((errno != EAGAIN && errno != EINTR) || now_ns() > deadline) {
      return false;
    }
  }
  return true;
}

using FlowCounters = std::array<std::atomic<uint64_t>, kMaxFlowStats>;

// Prints {"t_ms","bytes","total"} every sample_ms from counter until stop
// (and "flows": the interval's bytes of each flow, when there are several).
class Sampler {
 public:
  Sampler(const std::atomic<uint64_t>& c, unsigned ms, const char* dir)
      : c_(c), ms_(ms), dir_(dir) {}
  void start(uint64_t t0, const FlowCounters* flows = nullptr, size_t nflows = 0) {
    t0_ = t0;
    flows_ = flows;
    nflows_ = std::min(nflows, kMaxFlowStats);
    th_ = std::thread([this] { run(); });
  }
  void stop() {
    stop_ = true;
    if (th_.joinable()) th_.join();
  }

 private:
  void run() {
    uint64_t next = t0_, prev = 0;
    std::vector<uint64_t> fprev(nflows_, 0);
    std::string fl;
    while (!stop_) {
      next += uint64_t(ms_) * 1000000ull;
      timespec ts{time_t(next / 1000000000ull), long(next % 1000000000ull)};
      clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr);
      uint64_t total = c_.load(std::memory_order_relaxed);
      timespec now{};
      // The wake-up may be late: the real end of the interval.
      clock_gettime(CLOCK_MONOTONIC, &now);
      const uint64_t mono = uint64_t(now.tv_sec) * 1000000000ull + uint64_t(now.tv_nsec);
      fl.clear();
      if (flows_ && nflows_ > 1) {
        fl = ",\"flows\":[";
        for (size_t f = 0; f < nflows_; f++) {
          const uint64_t v = (*flows_)[f].load(std::memory_order_relaxed);
          fl += (f ? "," : "") + std::to_string(v - fprev[f]);
          fprev[f] = v;
        }
        fl += "]";
      }
      std::printf("{\"t_ms\":%" PRIu64 ",\"mono_ns\":%" PRIu64 ",\"bytes\":%" PRIu64
                  ",\"total\":%" PRIu64 "%s%s}\n",
                  uint64_t((next - t0_) / 1000000ull), mono, total - prev, total, fl.c_str(), dir_);
      std::fflush(stdout);
      prev = total;
    }
  }
  const std::atomic<uint64_t>& c_;
  unsigned ms_;
  const char* dir_;
  const FlowCounters* flows_ = nullptr;
  size_t nflows_ = 0;
  uint64_t t0_ = 0;
  std::atomic<bool> stop_{false};
  std::thread th_;
};

int server(const Opts& o) {
  sockaddr_storage ss{};
  socklen_t sl = 0;
  std::string bind_addr = o.bind_addr.empty() ? "::" : o.bind_addr;
  if (!resolve(bind_addr, o.port, ss, sl)) {
    std::fprintf(stderr, "tcp_peer: bad --bind %s\n", bind_addr.c_str());
    return 2;
  }
  int lfd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, proto_of(o.mode));
  if (lfd < 0) {
    std::fprintf(stderr, "tcp_peer: socket(%s): %s\n", o.mode.c_str(), std::strerror(errno));
    return 1;
  }
  int one = 1;
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (!set_cc(lfd, o.cc)) {
    close(lfd);
    return 1;
  }
  if (bind(lfd, reinterpret_cast<sockaddr*>(&ss), sl) != 0 || listen(lfd, 64) != 0) {
    std::fprintf(stderr, "tcp_peer: bind/listen %s:%u: %s\n", bind_addr.c_str(), o.port,
                 std::strerror(errno));
    close(lfd);
    return 1;
  }
  std::fprintf(stderr, "tcp_peer: listening on %s port %u (%s)\n", bind_addr.c_str(), o.port,
               o.mode.c_str());
  const uint64_t deadline = now_ns() + uint64_t(o.timeout * 1e9);
  int rc = 0;
  do {
    std::atomic<uint64_t> received{0};
    FlowCounters flow_rx{};
    std::atomic<int> done{0}, errors{0};
    std::atomic<uint64_t> verify_fail{0};
    Sampler sampler(received, o.sample_ms, "");
    std::vector<std::thread> th;
    std::mutex mu;
    uint32_t flows = 1;
    bool pingpong = false, verify = false;
    uint32_t spin_us = 0;
    uint64_t t0 = 0, t_last = 0;
    int accepted = 0;
    while (accepted < int(flows)) {
      pollfd p{lfd, POLLIN, 0};
      if (now_ns() > deadline) {
        std::fprintf(stderr, "tcp_peer: timeout waiting for connections\n");
        close(lfd);
        return 1;
      }
      if (poll(&p, 1, 200) <= 0) continue;
      int fd = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      set_timeouts(fd, 500);
      Hello h{};
      if (!read_full(fd, &h, sizeof(h), now_ns() + 5000000000ull) || h.magic != kMagic) {
        close(fd);
        continue;
      }
      if (accepted == 0) {
        flows = std::max<uint32_t>(1, h.flows);
        pingpong = h.pingpong;
        verify = h.verify;
        spin_us = h.pingpong ? h.spin_us : 0;
        t0 = now_ns();
        if (!pingpong) sampler.start(t0, &flow_rx, flows);
      }
      accepted++;
      th.emplace_back([&, fd, h] {
        std::vector<uint8_t> buf(std::max<size_t>(kBuf, h.msg_size)), exp(kBuf);
        uint64_t off = 0;
        if (h.pingpong) {
          while (now_ns() < deadline) {
            if (!read_full(fd, buf.data(), h.msg_size, deadline, uint64_t(h.spin_us) * 1000)) break;
            if (!write_full(fd, buf.data(), h.msg_size, deadline)) break;
            received.fetch_add(h.msg_size, std::memory_order_relaxed);
          }
        } else {
          while (now_ns() < deadline) {
            ssize_t r = recv(fd, buf.data(), kBuf, 0);
            if (r == 0) break;
            if (r < 0) {
              if (errno == EAGAIN || errno == EINTR) continue;
              errors++;
              break;
            }
            if (h.verify) {
              fill_pattern(h.flow, off, exp.data(), size_t(r));
              if (std::memcmp(exp.data(), buf.data(), size_t(r)) != 0) verify_fail++;
            }
            off += uint64_t(r);
            received.fetch_add(uint64_t(r), std::memory_order_relaxed);
            flow_rx[h.flow % kMaxFlowStats].fetch_add(uint64_t(r), std::memory_order_relaxed);
          }
        }
        {
          std::lock_guard<std::mutex> g(mu);
          t_last = std::max(t_last, now_ns());
        }
        close(fd);
        done++;
      });
    }
    for (auto& t : th) t.join();
    sampler.stop();
    const double secs = double(t_last - t0) / 1e9;
    const uint64_t total = received.load();
    std::printf("{\"summary\":{\"role\":\"server\",\"mode\":\"%s\",\"flows\":%u,\"bytes\":%" PRIu64
                ",\"secs\":%.3f,\"gbps\":%.4f,\"verify\":\"%s\",\"errors\":%d,\"spin_us\":%u}}\n",
                o.mode.c_str(), flows, total, secs, secs > 0 ? double(total) * 8 / secs / 1e9 : 0.0,
                !verify       ? "off"
                : verify_fail ? "failed"
                              : "ok",
                errors.load(), spin_us);
    std::fflush(stdout);
    if (verify && verify_fail) rc = 3;
  } while (o.forever && now_ns() < deadline);
  close(lfd);
  return rc;
}

int client(const Opts& o) {
  sockaddr_storage ss{};
  socklen_t sl = 0;
  if (!resolve(o.connect_addr, o.port, ss, sl)) {
    std::fprintf(stderr, "tcp_peer: bad --connect %s\n", o.connect_addr.c_str());
    return 2;
  }
  const int flows = o.pingpong ? 1 : (o.mode == "tcp-multi" ? std::max(1, o.flows) : 1);
  std::vector<int> fds;
  for (int f = 0; f < flows; f++) {
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, proto_of(o.mode));
    if (fd < 0) {
      std::fprintf(stderr, "tcp_peer: socket(%s): %s\n", o.mode.c_str(), std::strerror(errno));
      return 1;
    }
    const uint16_t sport = o.sports.empty() ? 0 : o.sports[size_t(f)];
    if (!o.bind_addr.empty() || sport) {
      sockaddr_storage bs{};
      socklen_t bl = 0;
      // no address: the wildcard of the destination's family (the route
      // picks the source address)
      const std::string ba =
          !o.bind_addr.empty() ? o.bind_addr : (ss.ss_family == AF_INET6 ? "::" : "0.0.0.0");
      int one = 1;
      // a source port of an earlier run may still be in TIME_WAIT
      if (sport) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
      if (!resolve(ba, sport, bs, bl) || bind(fd, reinterpret_cast<sockaddr*>(&bs), bl) != 0) {
        std::fprintf(stderr, "tcp_peer: bind %s port %u: %s\n", ba.c_str(), sport,
                     std::strerror(errno));
        return 1;
      }
    }
    int one = 1;
    if (o.pingpong) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (!set_cc(fd, o.cc)) return 1;
    int tries = 0;
    while (connect(fd, reinterpret_cast<sockaddr*>(&ss), sl) != 0) {
      // the server may still be starting: retry for up to 5 s
      if ((errno != ECONNREFUSED && errno != EAGAIN) || ++tries > 100) {
        std::fprintf(stderr, "tcp_peer: connect %s:%u: %s\n", o.connect_addr.c_str(), o.port,
                     std::strerror(errno));
        return 1;
      }
      usleep(50000);
    }
    set_timeouts(fd, 200);
    Hello h{kMagic,     uint8_t(o.pingpong), uint8_t(o.verify), uint16_t(f),
            o.msg_size, uint32_t(flows),     o.spin_us};
    if (!write_full(fd, &h, sizeof(h), now_ns() + 5000000000ull)) {
      std::fprintf(stderr, "tcp_peer: hello: %s\n", std::strerror(errno));
      return 1;
    }
    fds.push_back(fd);
  }
  const uint64_t t0 = now_ns();
  if (o.pingpong) {
    std::vector<uint8_t> buf(o.msg_size, 0x5a), in(o.msg_size);
    std::vector<double> us;
    const uint64_t deadline = t0 + uint64_t(o.timeout * 1e9);
    // --duration: as many round trips as fit (at most --iters when given)
    const uint64_t stop =
        o.duration > 0 ? std::min(deadline, t0 + uint64_t(o.duration * 1e9)) : deadline;
    const uint32_t iters = o.duration > 0 && !o.iters_set ? UINT32_MAX : o.iters;
    if (o.duration <= 0) us.reserve(o.iters);
    for (uint32_t i = 0; i < iters && now_ns() < stop; i++) {
      uint64_t a = now_ns();
      if (!write_full(fds[0], buf.data(), buf.size(), deadline) ||
          !read_full(fds[0], in.data(), in.size(), deadline, uint64_t(o.spin_us) * 1000))
        break;
      us.push_back(double(now_ns() - a) / 1e3);
    }
    close(fds[0]);
    if (us.empty()) {
      std::fprintf(stderr, "tcp_peer: no round trip completed\n");
      return 1;
    }
    std::sort(us.begin(), us.end());
    auto pct = [&](double q) { return us[std::min(us.size() - 1, size_t(q * double(us.size())))]; };
    std::printf(
        "{\"summary\":{\"role\":\"client\",\"mode\":\"%s\",\"pingpong\":true,\"msg_size\":%u,"
        "\"iters\":%zu,\"spin_us\":%u,"
        "\"p50_us\":%.1f,\"p99_us\":%.1f,\"p999_us\":%.1f,\"min_us\":%.1f,\"max_us\":%.1f}}\n",
        o.mode.c_str(), o.msg_size, us.size(), o.spin_us, pct(0.5), pct(0.99), pct(0.999),
        us.front(), us.back());
    return (o.duration > 0 || us.size() == o.iters) ? 0 : 1;
  }
  std::atomic<uint64_t> sent{0};
  std::atomic<int> errors{0};
  Sampler sampler(sent, o.sample_ms, ",\"dir\":\"tx\"");
  sampler.start(t0);
  const uint64_t end =
      o.duration > 0 ? t0 + uint64_t(o.duration * 1e9) : t0 + uint64_t(o.timeout * 1e9);
  std::vector<std::thread> th;
  for (int f = 0; f < flows; f++) {
    const uint64_t quota =
        o.bytes ? o.bytes / uint64_t(flows) + (f == 0 ? o.bytes % uint64_t(flows) : 0) : 0;
    th.emplace_back([&, f, quota] {
      std::vector<uint8_t> buf(kBuf, 0);
      uint64_t off = 0;
      const int fd = fds[size_t(f)];
      while (now_ns() < end && (!quota || off < quota)) {
        size_t n = quota ? size_t(std::min<uint64_t>(kBuf, quota - off)) : kBuf;
        if (o.verify) fill_pattern(uint32_t(f), off, buf.data(), n);
        size_t done = 0;
        while (done < n && now_ns() < end) {
          ssize_t w = send(fd, buf.data() + done, n - done, MSG_NOSIGNAL);
          if (w > 0) {
            done += size_t(w);
            sent.fetch_add(uint64_t(w), std::memory_order_relaxed);
          } else if (errno != EAGAIN && errno != EINTR) {
            errors++;
            return;
          }
        }
        off += done;
        if (done < n) break;
      }
      // Let the receiver drain, then close (bounded: 10 s).
      shutdown(fd, SHUT_WR);
      uint8_t b;
      const uint64_t grace = now_ns() + 10000000000ull;
      while (now_ns() < grace) {
        ssize_t r = recv(fd, &b, 1, 0);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) break;
      }
    });
  }
  for (auto& t : th) t.join();
  sampler.stop();
  for (int fd : fds) close(fd);
  const double secs = double(now_ns() - t0) / 1e9;
  std::printf("{\"summary\":{\"role\":\"client\",\"mode\":\"%s\",\"flows\":%d,\"bytes\":%" PRIu64
              ",\"secs\":%.3f,\"gbps\":%.4f,\"errors\":%d}}\n",
              o.mode.c_str(), flows, sent.load(), secs, double(sent.load()) * 8 / secs / 1e9,
              errors.load());
  return errors ? 1 : 0;
}

int usage() {
  std::fprintf(
      stderr,
      "usage: tcp_peer server [--bind ADDR] [--port P] [--mode tcp|tcp-multi|mptcp] [--sample-ms "
      "N]\n"
      "                       [--timeout S] [--forever] [--cc ALGO]\n"
      "       tcp_peer client --connect ADDR [--port P] [--mode tcp|tcp-multi|mptcp] [--flows N]\n"
      "                       [--duration S | --bytes N] [--verify] [--bind ADDR] [--sport "
      "P[,P...]]\n"
      "                       [--sample-ms N] [--pingpong --msg-size B (--iters N | --duration S)\n"
      "                       [--spin-us N]]\n"
      "                       [--timeout S] [--cc ALGO]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  Opts o;
  o.role = argv[1];
  if (o.role != "server" && o.role != "client") return usage();
  for (int i = 2; i < argc; i++) {
    std::string a = argv[i];
    auto val = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (a == "--verify") {
      o.verify = true;
    } else if (a == "--pingpong") {
      o.pingpong = true;
    } else if (a == "--forever") {
      o.forever = true;
    } else if (!(v = val())) {
      return usage();
    } else if (a == "--bind") {
      o.bind_addr = v;
    } else if (a == "--connect") {
      o.connect_addr = v;
    } else if (a == "--port") {
      o.port = uint16_t(std::strtoul(v, nullptr, 10));
    } else if (a == "--mode") {
      o.mode = v;
    } else if (a == "--flows") {
      o.flows = std::atoi(v);
    } else if (a == "--duration") {
      o.duration = std::atof(v);
    } else if (a == "--bytes") {
      o.bytes = std::strtoull(v, nullptr, 10);
    } else if (a == "--msg-size") {
      o.msg_size = uint32_t(std::strtoul(v, nullptr, 10));
    } else if (a == "--spin-us") {
      o.spin_us = uint32_t(std::strtoul(v, nullptr, 10));
    } else if (a == "--iters") {
      o.iters = uint32_t(std::strtoul(v, nullptr, 10));
      o.iters_set = true;
    } else if (a == "--sport") {
      // comma-separated source ports, one per flow
      std::string list = v;
      size_t pos = 0;
      while (pos <= list.size()) {
        const size_t comma = std::min(list.find(',', pos), list.size());
        const std::string item = list.substr(pos, comma - pos);
        char* end = nullptr;
        const unsigned long port = std::strtoul(item.c_str(), &end, 10);
        if (item.empty() || *end || port == 0 || port > 65535) return usage();
        o.sports.push_back(uint16_t(port));
        pos = comma + 1;
      }
    } else if (a == "--sample-ms") {
      o.sample_ms = unsigned(std::strtoul(v, nullptr, 10));
    } else if (a == "--cc") {
      o.cc = v;
    } else if (a == "--timeout") {
      o.timeout = std::atof(v);
    } else {
      return usage();
    }
  }
  if (o.mode != "tcp" && o.mode != "tcp-multi" && o.mode != "mptcp") return usage();
  if (o.sample_ms == 0 || o.msg_size == 0) return usage();
  if (o.role == "client" && o.connect_addr.empty()) return usage();
  if (!o.sports.empty()) {
    const size_t flows =
        o.pingpong ? 1 : (o.mode == "tcp-multi" ? size_t(std::max(1, o.flows)) : 1);
    if (o.sports.size() != flows) {
      std::fprintf(stderr, "tcp_peer: --sport needs one port per flow (%zu)\n", flows);
      return 2;
    }
  }
  if (o.role == "client" && !o.pingpong && o.duration <= 0 && o.bytes == 0) o.duration = 5;
  return o.role == "server" ? server(o) : client(o);
}
