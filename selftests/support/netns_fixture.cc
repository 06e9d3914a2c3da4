#include "support/netns_fixture.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>
#include <sstream>

#include "util/mmap_area.hpp"
#include "util/unique_fd.hpp"

extern char** environ;

namespace mrc::xsktest {

using mrc::UniqueFd;

Result<std::string> run(const std::vector<std::string>& argv) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return make_error(errno, "pipe");
  UniqueFd rd(p[0]), wr(p[1]);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, wr.get(), 1);
  posix_spawn_file_actions_adddup2(&fa, wr.get(), 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  std::string cmd;
  for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
  if (rc != 0) return make_error(rc, "running " + cmd);
  wr.reset();
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(rd.get(), buf, sizeof(buf));
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return make_error(EIO, cmd + " failed (status " + std::to_string(status) + "): " + out);
  return out;
}

std::string skip_reason() {
  if (geteuid() != 0) return "needs root (network namespaces, veth, XDP, AF_XDP)";
  const int fd = socket(AF_XDP, SOCK_RAW | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::string("AF_XDP sockets unavailable: ") + std::strerror(errno);
  close(fd);
  auto v = run({"ip", "-V"});
  if (!v) return "iproute2 (ip) not usable: " + v.error().message();
  return "";
}

std::string multi_buffer_skip_reason() {
  std::string why = skip_reason();
  if (!why.empty()) return why;
  utsname u{};
  int major = 0, minor = 0;
  if (uname(&u) != 0 || std::sscanf(u.release, "%d.%d", &major, &minor) != 2)
    return "cannot tell the kernel version";
  if (major < 6 || (major == 6 && minor < 6))
    return std::string("multi-buffer AF_XDP (XDP_USE_SG) needs Linux 6.6+, this is ") + u.release;
  return "";
}

namespace {

// ---- reaper: deletes namespaces the test process leaves behind ----------

std::mutex g_reaper_mu;
int g_reaper_fd = -1;

[[noreturn]] void reaper_main(int rd) {
  for (int fd = 0; fd < 4096; ++fd)
    if (fd != rd) close(fd);
  const int null = open("/dev/null", O_RDWR);
  if (null >= 0) {
    dup2(null, 0);
    dup2(null, 1);
    dup2(null, 2);
  }
  signal(SIGINT, SIG_IGN);
  signal(SIGTERM, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);
  constexpr int kMax = 64;
  static char names[kMax][64];
  static bool live[kMax];
  char line[128];
  size_t len = 0;
  char c;
  for (;;) {
    const ssize_t n = read(rd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (c != '\n') {
      if (len + 1 < sizeof(line)) line[len++] = c;
      continue;
    }
    line[len] = '\0';
    if (len > 1 && len < 64) {
      if (line[0] == '+') {
        for (int i = 0; i < kMax; ++i) {
          if (!live[i]) {
            std::memcpy(names[i], line + 1, len);
            live[i] = true;
            break;
          }
        }
      } else if (line[0] == '-') {
        for (int i = 0; i < kMax; ++i)
          if (live[i] && std::strcmp(names[i], line + 1) == 0) live[i] = false;
      }
    }
    len = 0;
  }
  // The test process is gone: remove what it did not (as `ip netns del`).
  for (int i = 0; i < kMax; ++i) {
    if (!live[i]) continue;
    static const char kDir[] = "/run/netns/";
    char path[sizeof(kDir) + 64];
    std::memcpy(path, kDir, sizeof(kDir) - 1);
    const size_t n = strnlen(names[i], 63);
    std::memcpy(path + sizeof(kDir) - 1, names[i], n);
    path[sizeof(kDir) - 1 + n] = '\0';
    umount2(path, MNT_DETACH);
    unlink(path);
  }
  _exit(0);
}

void reaper_send(char op, const std::string& name) {
  std::lock_guard<std::mutex> lock(g_reaper_mu);
  if (g_reaper_fd < 0) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) return;
    const pid_t child = fork();
    if (child == 0) {
      // Double fork: the reaper is re-parented to init, outside the test's
      // process tree, so killing the tree does not kill it.
      if (fork() == 0) {
        setsid();
        reaper_main(p[0]);
      }
      _exit(0);
    }
    close(p[0]);
    if (child < 0) {
      close(p[1]);
      return;
    }
    while (waitpid(child, nullptr, 0) < 0 && errno == EINTR) {
    }
    g_reaper_fd = p[1];
  }
  const std::string msg = std::string(1, op) + name + "\n";
  ssize_t w;
  do {
    w = write(g_reaper_fd, msg.data(), msg.size());
  } while (w < 0 && errno == EINTR);
}

std::string unique_prefix() {
  std::random_device rd;
  char buf[32];
  std::snprintf(buf, sizeof(buf), "mrcx%d-%04x", static_cast<int>(getpid()), rd() & 0xffff);
  return buf;
}

std::string mac_string(const std::array<uint8_t, 6>& m) {
  char buf[18];
  std::snprintf(buf, sizeof(buf), "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4],
                m[5]);
  return buf;
}

}  // namespace

Result<Topology> Topology::create(uint32_t pairs, uint32_t queues, uint32_t mtu) {
  Topology t;
  const std::string prefix = unique_prefix();
  for (int side = 0; side < 2; ++side) {
    const std::string name = prefix + (side == 0 ? "-a" : "-b");
    reaper_send('+', name);  // before creating: a crash in between still cleans up
    auto r = run({"ip", "netns", "add", name});
    if (!r) {
      reaper_send('-', name);
      return std::move(r).error();
    }
    t.ns_[side] = name;
  }
  for (int side = 0; side < 2; ++side) MRC_TRY(t.ip(side, {"link", "set", "lo", "up"}));
  const std::string q = std::to_string(queues);
  for (uint32_t i = 0; i < pairs; ++i) {
    VethSpec v;
    v.a_if = "mxa" + std::to_string(i);
    v.b_if = "mxb" + std::to_string(i);
    v.queues = queues;
    v.mtu = mtu;
    v.a_mac = {0x02, 0x00, 0x00, 0x00, static_cast<uint8_t>(i), 0x0a};
    v.b_mac = {0x02, 0x00, 0x00, 0x00, static_cast<uint8_t>(i), 0x0b};
    v.a_ip4 = "198.18." + std::to_string(i) + ".1";
    v.b_ip4 = "198.18." + std::to_string(i) + ".2";
    v.a_ip6 = "fd00:" + std::to_string(i) + "::1";
    v.b_ip6 = "fd00:" + std::to_string(i) + "::2";
    MRC_TRY(t.ip(0, {"link",
                     "add",
                     v.a_if,
                     "numtxqueues",
                     q,
                     "numrxqueues",
                     q,
                     "address",
                     mac_string(v.a_mac),
                     "type",
                     "veth",
                     "peer",
                     "name",
                     v.b_if,
                     "numtxqueues",
                     q,
                     "numrxqueues",
                     q,
                     "address",
                     mac_string(v.b_mac),
                     "netns",
                     t.ns_[1]}));
    for (int side = 0; side < 2; ++side) {
      const std::string& dev = side == 0 ? v.a_if : v.b_if;
      MRC_TRY(t.ip(side, {"link", "set", "dev", dev, "addrgenmode", "none"}));
      MRC_TRY(t.ip(side, {"link", "set", "dev", dev, "mtu", std::to_string(mtu), "up"}));
      MRC_TRY(t.ip(side, {"addr", "add", (side == 0 ? v.a_ip4 : v.b_ip4) + "/24", "dev", dev}));
      MRC_TRY(t.ip(side,
                   {"addr", "add", (side == 0 ? v.a_ip6 : v.b_ip6) + "/64", "dev", dev, "nodad"}));
    }
    t.pairs_.push_back(std::move(v));
  }
  return t;
}

Topology::Topology(Topology&& o) noexcept : ns_(std::move(o.ns_)), pairs_(std::move(o.pairs_)) {
  o.ns_ = {};
}

Topology& Topology::operator=(Topology&& o) noexcept {
  if (this != &o) {
    destroy();
    ns_ = std::move(o.ns_);
    pairs_ = std::move(o.pairs_);
    o.ns_ = {};
  }
  return *this;
}

Topology::~Topology() { destroy(); }

void Topology::destroy() {
  for (auto& name : ns_) {
    if (name.empty()) continue;
    (void)run({"ip", "netns", "del", name});
    reaper_send('-', name);
    name.clear();
  }
  pairs_.clear();
}

Result<std::string> Topology::ip(int side, const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {"ip", "-n", ns_[side]};
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv);
}

Result<std::string> Topology::exec(int side, const std::vector<std::string>& argv) const {
  std::vector<std::string> full = {"ip", "netns", "exec", ns_[side]};
  full.insert(full.end(), argv.begin(), argv.end());
  return run(full);
}

Result<int> Topology::xdp_socket_count(int side) const {
  // The "sockets" column of /proc/net/protocols counts a namespace's sockets
  // per protocol (ss --xdp needs CONFIG_XDP_SOCKETS_DIAG, often missing).
  auto out = exec(side, {"cat", "/proc/net/protocols"});
  if (!out) return std::move(out).error();
  std::istringstream in(*out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string proto;
    long size = 0, sockets = 0;
    if (f >> proto >> size >> sockets && proto == "XDP") return static_cast<int>(sockets);
  }
  return make_error(ENOENT, "no XDP line in /proc/net/protocols of " + ns_[side]);
}

Status Topology::set_mtu(uint32_t mtu) {
  for (auto& v : pairs_) {
    MRC_TRY(ip(0, {"link", "set", "dev", v.a_if, "mtu", std::to_string(mtu)}));
    MRC_TRY(ip(1, {"link", "set", "dev", v.b_if, "mtu", std::to_string(mtu)}));
    v.mtu = mtu;
  }
  return ok_status();
}

}  // namespace mrc::xsktest
