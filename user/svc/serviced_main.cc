// mrc-serviced: the host service of mrc (Documentation/service.md). It owns
// the planes (the AF_XDP sockets, the UMEM, the XDP program's socket map)
// and runs the engine; every libmrc process on the host uses the planes
// through it (service mode). Usage: mrc-serviced --help.
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "svc/config.hpp"
#include "svc/metrics.hpp"
#include "svc/server.hpp"

namespace {

// SIGHUP: the configuration read again as at the start; the reloadable part
// goes into the running service, the rest is named as waiting for a restart.
void reload(mrc::svc::Server& s, const std::vector<std::string>& argl) {
  auto n = mrc::svc::parse_args(argl);
  if (!n) {
    std::fprintf(stderr, "mrc-serviced: reload refused, the running configuration stays: %s\n",
                 n.error().context.c_str());
    return;
  }
  const mrc::svc::ServerOptions was = s.options();
  s.reload(n->opts);
  const mrc::svc::ServerOptions& o = n->opts;
  std::fprintf(stderr,
               "mrc-serviced: reloaded %s: limits clients %u, clients_per_uid %u, area_mib %llu, "
               "qps %u, cqs %u, mrs %u, mr_mib %llu, wr %u, cqe %u; tomb_linger_ms %u\n",
               n->config.empty() ? "(no file)" : n->config.c_str(), o.max_clients,
               o.max_clients_per_uid, (unsigned long long)(o.area_bytes >> 20), o.max_qps,
               o.max_cqs, o.max_mrs, (unsigned long long)(o.max_mr_bytes >> 20), o.max_wr,
               o.max_cqe, o.tomb_linger_ms);
  std::string later;
  for (const std::string& k : mrc::svc::restart_only_changes(was, o))
    later += (later.empty() ? "" : ", ") + k;
  if (!later.empty())
    std::fprintf(stderr, "mrc-serviced: changed, but kept until a restart: %s\n", later.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  // The configuration: the file, then the options over it; anything wrong is
  // refused here, exit 2, before anything starts.
  auto args = mrc::svc::parse_args(std::vector<std::string>(argv + 1, argv + argc));
  if (!args) {
    std::fprintf(stderr, "mrc-serviced: %s\n", args.error().context.c_str());
    return 2;
  }
  if (args->help) {
    std::fputs(mrc::svc::usage().c_str(), stdout);
    return 0;
  }
  if (args->check) {
    std::fprintf(stderr, "mrc-serviced: configuration %s: good\n",
                 args->config.empty() ? "(no file)" : args->config.c_str());
    return 0;
  }
  const mrc::svc::ServerOptions& o = args->opts;
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
  std::unique_ptr<mrc::svc::MetricsThread> metrics;
  if (!o.metrics.empty()) {
    auto m = mrc::svc::MetricsThread::start(**s, o);
    if (!m) {
      std::fprintf(stderr, "mrc-serviced: metrics: %s\n", m.error().message().c_str());
      return 1;
    }
    metrics = std::move(*m);
    std::fprintf(stderr, "mrc-serviced: metrics at %s (port %u)\n", o.metrics.c_str(),
                 unsigned(metrics->port()));
  }
  // SIGHUP reloads (the same file and options, read again); SIGINT and
  // SIGTERM stop. A file that no longer parses changes nothing.
  const std::vector<std::string> argl(argv + 1, argv + argc);
  auto on_signal = [&]() -> bool {
    signalfd_siginfo si{};
    if (read(sfd.get(), &si, sizeof si) != ssize_t(sizeof si)) return false;
    if (si.ssi_signo != SIGHUP) return true;
    reload(**s, argl);
    return false;
  };
  auto r = (*s)->run(sfd.get(), on_signal);
  metrics.reset();
  const auto& c = (*s)->counters();
  std::fprintf(stderr,
               "mrc-serviced: stopping; clients served %llu, broken %llu, bad requests %llu, "
               "bad work requests %llu, bad ready entries %llu, CQ overruns %llu, closed "
               "doorbells %llu\n",
               (unsigned long long)c.clients_total.load(),
               (unsigned long long)c.clients_broken.load(),
               (unsigned long long)c.bad_requests.load(), (unsigned long long)c.bad_wqe.load(),
               (unsigned long long)c.bad_ready.load(), (unsigned long long)c.cq_overruns.load(),
               (unsigned long long)c.bad_doorbell.load());
  if (!r) {
    std::fprintf(stderr, "mrc-serviced: %s\n", r.error().message().c_str());
    return 1;
  }
  return 0;
}
