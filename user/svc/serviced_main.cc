// mrc-serviced: the host service of mrc (Documentation/service.md). It owns
// the planes (the AF_XDP sockets, the UMEM, the XDP program's socket map)
// and runs the engine; every libmrc process on the host uses the planes
// through it (service mode). Usage: mrc-serviced --help.
#include <grp.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "svc/server.hpp"

namespace {

void usage(FILE* f) {
  std::fprintf(
      f,
      "usage: mrc-serviced [options] IF[,IF...]\n"
      "Serves the plane interfaces IF... (port 1 first) to every libmrc process on this host\n"
      "(Documentation/service.md). Runs as root; clients need only access to the socket.\n"
      "  --socket PATH      control socket (default $MRC_SERVICE_SOCKET, else %s)\n"
      "  --socket-mode OCT  permissions of the socket file (default 0660)\n"
      "  --group NAME       group of the socket file (default: root's)\n"
      "  --no-mrcd          load our own mrc_xdp even when mrcd's pinned maps exist\n"
      "  --pin-dir DIR      mrcd's bpffs directory (default /sys/fs/bpf/mrc)\n"
      "  --generic          attach XDP in generic (SKB) mode\n"
      "  --queues N         rx queues per interface with a socket (default all)\n"
      "  --tx xsk|live|auto TX backend (default xsk)\n"
      "  --udp-port N       MRC's UDP port (default 4791)\n"
      "  --max-clients N    processes served at once (default 64)\n"
      "  --area-mib N       shared area per process, MiB (default 64)\n"
      "  --max-qps N        QPs per process (default 1024)\n"
      "  --max-cqs N        CQs per process (default 1024)\n"
      "  --max-mrs N        memory regions per process (default 4096)\n"
      "  --max-mr-mib N     registered MiB per process (default 0: no limit)\n"
      "  --max-clients-per-uid N  processes of one uid served at once (default 0: no limit)\n"
      "  --tomb-linger-ms N a departed process's QPs stay N ms as tombstones that refuse\n"
      "                     their peers' requests, so the peers fail at once (default 5000,\n"
      "                     0: destroyed at once)\n"
      "  --max-tombstones N tombstones at once, all processes; beyond, the oldest goes\n"
      "                     early (default 1024)\n"
      "  --cpu N            pin the engine thread to CPU N\n"
      "  --sched MODE       engine thread scheduling (Documentation/service.md section 6):\n"
      "                     nice (default: SCHED_OTHER at nice -10, for hosts whose\n"
      "                     applications keep every CPU busy), normal (the service's\n"
      "                     nice), fifo (SCHED_FIFO 1 while serving bursts, nice -10\n"
      "                     after 1 ms of work without a sleep), dedicated (needs --cpu:\n"
      "                     pinned, never sleeps); default: $MRC_ENGINE_SCHED, else nice\n"
      "  --nice N           the engine thread's nice value in nice, fifo, dedicated (-10)\n"
      "  --idle-spin-us N   engine thread: keep polling N us before sleeping\n",
      mrc::svc::kDefaultSocket);
}

[[noreturn]] void bad(const std::string& what) {
  std::fprintf(stderr, "mrc-serviced: %s (--help for usage)\n", what.c_str());
  std::exit(2);
}

// A number (decimal, 0x hex or 0 octal) from 0 to max. Digits first:
// strtoull alone takes leading blanks and a sign ("-1" wraps, and
// "-18446744073709551615" is 1).
uint64_t num(const char* opt, const char* v, uint64_t max) {
  char* end = nullptr;
  errno = 0;
  const bool digit = *v >= '0' && *v <= '9';
  const unsigned long long n = digit ? std::strtoull(v, &end, 0) : 0;
  if (!digit || *end || errno || n > max)
    bad(std::string("bad value for ") + opt + ": '" + v + "' (a number from 0 to " +
        std::to_string(max) + ")");
  return n;
}

mrc::svc::ServerOptions parse(int argc, char** argv) {
  mrc::svc::ServerOptions o;
  if (const char* e = std::getenv("MRC_SERVICE_SOCKET"); e && *e) o.socket_path = e;
  std::string ifs;
  for (int i = 1; i < argc; i++) {
    const std::string a = argv[i];
    auto val = [&]() -> const char* {
      if (i + 1 >= argc) bad(a + " needs a value");
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      usage(stdout);
      std::exit(0);
    } else if (a == "--socket") {
      o.socket_path = val();
    } else if (a == "--socket-mode") {
      o.socket_mode = uint32_t(num("--socket-mode", val(), 07777));
    } else if (a == "--group") {
      const char* g = val();
      const group* gr = getgrnam(g);
      if (!gr) bad(std::string("no group ") + g);
      o.socket_group = gr->gr_gid;
    } else if (a == "--no-mrcd") {
      o.dev.use_mrcd = false;
    } else if (a == "--pin-dir") {
      o.dev.pin_dir = val();
    } else if (a == "--generic") {
      o.dev.force_generic = true;
    } else if (a == "--queues") {
      o.dev.queues = uint32_t(num("--queues", val(), 1024));
    } else if (a == "--tx") {
      const std::string t = val();
      if (t == "xsk")
        o.dev.tx = mrc::TxBackend::kXsk;
      else if (t == "live")
        o.dev.tx = mrc::TxBackend::kLive;
      else if (t == "auto")
        o.dev.tx = mrc::TxBackend::kAuto;
      else
        bad("--tx takes xsk, live or auto");
    } else if (a == "--udp-port") {
      o.dev.udp_port = uint16_t(num("--udp-port", val(), 65535));
    } else if (a == "--max-clients") {
      o.max_clients = uint32_t(num("--max-clients", val(), 100000));
    } else if (a == "--max-qps") {
      o.max_qps = uint32_t(num("--max-qps", val(), 1u << 20));
    } else if (a == "--max-cqs") {
      o.max_cqs = uint32_t(num("--max-cqs", val(), 1u << 20));
    } else if (a == "--max-mrs") {
      o.max_mrs = uint32_t(num("--max-mrs", val(), 1u << 20));
    } else if (a == "--max-mr-mib") {
      o.max_mr_bytes = num("--max-mr-mib", val(), 1u << 24) << 20;
    } else if (a == "--max-clients-per-uid") {
      o.max_clients_per_uid = uint32_t(num("--max-clients-per-uid", val(), 100000));
    } else if (a == "--tomb-linger-ms") {
      o.tomb_linger_ms = uint32_t(num("--tomb-linger-ms", val(), 600000));
    } else if (a == "--max-tombstones") {
      o.dev.engine.max_tombstones = uint32_t(num("--max-tombstones", val(), 65536));
    } else if (a == "--area-mib") {
      o.area_bytes = num("--area-mib", val(), 4096) << 20;
      if (o.area_bytes < (1u << 20)) bad("--area-mib must be at least 1");
    } else if (a == "--cpu") {
      o.dev.engine_cpu = int(num("--cpu", val(), 4095));
    } else if (a == "--sched") {
      auto m = mrc::parse_engine_sched(val());
      if (!m) bad("--sched: " + m.error().context);
      o.dev.engine_sched = *m;
    } else if (a == "--nice") {
      const char* v = val();
      char* end = nullptr;
      errno = 0;
      const long n = std::strtol(v, &end, 10);
      if (!*v || *end || errno || n < -20 || n > 19)
        bad(std::string("--nice takes -20..19, not ") + v);
      o.dev.engine_nice = int(n);
    } else if (a == "--idle-spin-us") {
      o.dev.idle_spin_us = uint32_t(num("--idle-spin-us", val(), 1000000));
    } else if (!a.empty() && a[0] == '-') {
      bad("unknown option " + a);
    } else if (ifs.empty()) {
      ifs = a;
    } else {
      bad("one interface list (IF,IF,...), got a second: " + a);
    }
  }
  if (ifs.empty()) bad("no plane interfaces given");
  size_t p = 0;
  while (p <= ifs.size()) {
    const size_t q = std::min(ifs.find(',', p), ifs.size());
    if (q == p) bad("empty interface name in " + ifs);
    o.dev.interfaces.push_back(ifs.substr(p, q - p));
    p = q + 1;
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const mrc::svc::ServerOptions o = parse(argc, argv);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // before any thread starts
  signal(SIGPIPE, SIG_IGN);
  mrc::UniqueFd sfd(signalfd(-1, &set, SFD_CLOEXEC));
  if (!sfd) {
    std::perror("mrc-serviced: signalfd");
    return 1;
  }
  auto s = mrc::svc::Server::create(o);
  if (!s) {
    std::fprintf(stderr, "mrc-serviced: %s\n", s.error().message().c_str());
    return 1;
  }
  std::string list;
  for (const auto& p : (*s)->context().ports())
    list += (list.empty() ? "" : " ") + p.ifname + "=port" + std::to_string(p.port) + "(" +
            p.xdp_mode + "," + p.xsk_mode + ")";
  std::fprintf(stderr, "mrc-serviced: pid %d serving %s at %s\n", int(getpid()), list.c_str(),
               o.socket_path.c_str());
  std::fprintf(stderr, "mrc-serviced: engine thread: %s\n",
               (*s)->context().engine_sched_reason().c_str());
  auto r = (*s)->run(sfd.get());
  const auto& c = (*s)->counters();
  std::fprintf(stderr,
               "mrc-serviced: stopping; clients served %llu, broken %llu, bad requests %llu, "
               "bad work requests %llu, bad ready entries %llu, CQ overruns %llu\n",
               (unsigned long long)c.clients_total.load(),
               (unsigned long long)c.clients_broken.load(),
               (unsigned long long)c.bad_requests.load(), (unsigned long long)c.bad_wqe.load(),
               (unsigned long long)c.bad_ready.load(), (unsigned long long)c.cq_overruns.load());
  if (!r) {
    std::fprintf(stderr, "mrc-serviced: %s\n", r.error().message().c_str());
    return 1;
  }
  return 0;
}
