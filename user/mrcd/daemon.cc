// mrcd's daemon (daemon.hpp): start-up, the poll loop, the tick, the policy's
// probe rounds and the "stats" and "qp.show" reports. The metrics exposition
// is in daemon_metrics.cc.
#include "mrcd/daemon.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cstring>

#include "loader/xdp_maps.hpp"
#include "mrcd/log.hpp"

namespace mrc::mrcd {

using namespace mrc::ctl;
using proto::json;

namespace {

uint64_t real_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
}

}  // namespace

Status Daemon::lock() {
  std::string path = cfg_.socket + ".lock";
  size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) mkdir(path.substr(0, slash).c_str(), 0755);
  lock_fd_ = UniqueFd(open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!lock_fd_) return Error(errno, "opening " + path);
  if (flock(lock_fd_.get(), LOCK_EX | LOCK_NB)) return Error(EBUSY, "another mrcd holds " + path);
  return ok_status();
}

Status Daemon::start() {
  start_real_ = real_ns();
  MRC_TRY(lock());
  bool found = false;
  auto st = PinnedStore::create_or_open(cfg_.pin_dir, &found);
  if (!st) return std::move(st).error();
  store_ = std::move(*st);
  ctl_ = std::make_unique<Controller>(*store_);
  const bool had = ctl_->open();
  MRCD_INFO("controller state under %s: %s", cfg_.pin_dir.c_str(),
            had ? "found (profiles and port states kept)" : "created");
  auto admin_up = [this](uint8_t port) {
    const auto& ports = store_->regions().ports;
    return port >= ports.size() || ports[port].admin_state == MRC_CTL_PORT_ENABLED;
  };
  auto dp = Dataplane::start(cfg_, admin_up);
  if (!dp) return std::move(dp).error();
  dp_ = std::move(*dp);
  std::vector<PortInfo> ports;
  for (const Plane& p : dp_->planes()) {
    ports.push_back(
        {p.cfg.port, p.cfg.ifname, p.ifindex, p.link_up,
         uint32_t(p.mode == loader::XdpMode::kGeneric ? MRC_CTL_XDP_GENERIC : MRC_CTL_XDP_NATIVE),
         p.cfg.queues});
    MRCD_INFO("plane %s: port %u, %s, link %s, admin %s", p.cfg.ifname.c_str(), p.cfg.port,
              p.attach_notes.c_str(), p.link_up ? "up" : "down", p.admin_up ? "up" : "down");
  }
  MRC_TRY(ctl_->configure_ports(ports));
  mrc_ctl_dev& d = store_->dev();
  __atomic_store_n(&d.udp_port, uint32_t(cfg_.udp_port), __ATOMIC_RELEASE);
  d.mrcd_start_ns = start_real_;
  __atomic_store_n(&d.mrcd_pid, uint32_t(getpid()), __ATOMIC_RELEASE);

  prober_ = std::make_unique<Prober>(cfg_, *dp_);
  MRC_TRY(prober_->open());
  ep_ = std::make_unique<EpBatcher>(*prober_, EpLimits{}, [this](uint8_t port) -> Status {
    const auto& ports = store_->regions().ports;
    if (port == 0 || port >= ports.size() || !ports[port].configured)
      return Error(EINVAL, "port " + std::to_string(port) + " is not a port of this device");
    if (ports[port].admin_state != MRC_CTL_PORT_ENABLED)
      return Error(EINVAL, "port " + std::to_string(port) + " is administratively disabled");
    return ok_status();
  });
  if (cfg_.policy.enabled) policy_ = std::make_unique<Policy>(cfg_.policy, cfg_.probe, *ctl_);

  Server::Deps deps;
  deps.ctl = ctl_.get();
  deps.ep = ep_.get();
  deps.policy = policy_.get();
  deps.stats = [this] { return stats(); };
  deps.qps = [this] { return qps(); };
  auto srv = Server::listen(cfg_.socket, cfg_.socket_group, deps);
  if (!srv) return std::move(srv).error();
  server_ = std::move(*srv);
  if (policy_) policy_->on_decision = [this](const Decision& dd) { server_->on_decision(dd); };

  Controller::Hooks h;
  h.port_admin = [this](uint8_t port, bool up) {
    Status s = dp_->set_admin(port, up);
    if (!s)
      MRCD_WARN("mirroring port %u admin state into mrc_ports: %s", port,
                s.error().message().c_str());
    MRCD_INFO("port %u administratively %s", port, up ? "enabled" : "disabled");
  };
  h.transition = [this](const EvEvent& e) {
    if (policy_) policy_->on_event(e, mono_ns());
  };
  ctl_->set_hooks(h);

  if (!cfg_.metrics.empty()) {
    auto m = Metrics::listen(cfg_.metrics, [this] { return metrics(); });
    if (!m) return std::move(m).error();
    metrics_ = std::move(*m);
    MRCD_INFO("metrics on http://%s/metrics", cfg_.metrics.c_str());
  }
  sigset_t ss;
  sigemptyset(&ss);
  sigaddset(&ss, SIGTERM);
  sigaddset(&ss, SIGINT);
  sigaddset(&ss, SIGHUP);
  sigprocmask(SIG_BLOCK, &ss, nullptr);
  signal(SIGPIPE, SIG_IGN);
  sig_fd_ = UniqueFd(signalfd(-1, &ss, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!sig_fd_) return Error(errno, "signalfd");
  MRCD_INFO("serving %s (pid %d)", cfg_.socket.c_str(), int(getpid()));
  return ok_status();
}

void Daemon::probe_round(Time now) {
  if (!policy_) return;
  std::vector<std::pair<uint8_t, std::vector<codec::IpAddr>>> planes;
  for (const Plane& p : dp_->planes())
    if (!p.cfg.peers.empty() && p.link_up && p.admin_up)
      planes.push_back({p.cfg.port, p.cfg.peers});
  if (planes.empty()) return;
  std::map<uint8_t, std::vector<PolicyProbe>> by_port;
  for (const PolicyProbe& pp : policy_->plan(planes)) by_port[pp.port].push_back(pp);
  for (auto& [port, probes] : by_port) {
    std::vector<EpReq> reqs;
    Round r;
    r.port = port;
    for (const PolicyProbe& pp : probes) {
      EpReq q;
      q.req_id = uint16_t(0xc000 | (next_internal_id_++ & 0x3fff));
      q.dgid = gid_from_ip(pp.dst);
      q.ev_fmt_mode = pp.fmt_mode;
      q.req_ev.val = codec::ev_from_u32(
          pp.wire, pp.fmt_mode == kFmtUdp ? codec::EvFmtMode::kUdp : codec::EvFmtMode::kStev);
      q.req_ev.port = port;
      reqs.push_back(q);
      r.ids.push_back(q.req_id);
    }
    r.probes = std::move(probes);
    auto b =
        ep_->start(cfg_.probe.dscp, kEpOpEvProbe, reqs, cfg_.probe.timeout_ms * 1'000'000u, now);
    if (!b) {
      MRCD_DEBUG("probe round on port %u: %s", port, b.error().message().c_str());
      policy_->on_plane_round(port, false, now);
      continue;
    }
    rounds_[*b] = std::move(r);
  }
}

void Daemon::batch_done(const EpBatchDone& d, Time now) {
  auto it = rounds_.find(d.id);
  if (it == rounds_.end()) {
    server_->on_batch_done(d);
    return;
  }
  Round r = std::move(it->second);
  rounds_.erase(it);
  bool any = false;
  for (size_t i = 0; i < r.probes.size(); i++) {
    const EpRsp* got = nullptr;
    for (const EpRsp& x : d.rsps)
      if (x.req_id == r.ids[i]) got = &x;
    any |= got != nullptr;
    if (got) last_rtt_[r.port] = got->rtt;
    policy_->on_probe(r.probes[i], got != nullptr, got ? got->rtt : 0, now);
  }
  policy_->on_plane_round(r.port, any, now);
}

void Daemon::tick(Time now) {
  mrc_ctl_dev& d = store_->dev();
  __atomic_store_n(&d.heartbeat_ns, now, __ATOMIC_RELEASE);
  if (auto n = ctl_->ingest_reports(); !n)
    MRCD_WARN("reading EV reports: %s", n.error().message().c_str());
  // Paths that pass probes but lose data (EV relapses), planes retired again
  // right after they came back (EVs retired by a plane relapse): one warning
  // per 10 s at most, with the counts since the last one.
  const auto& by_reason = ctl_->counters().reports_by_reason;
  const uint64_t relapses = by_reason[size_t(core::EvEventReason::kRelapse)];
  const uint64_t plane_relapses = by_reason[size_t(core::EvEventReason::kPlaneRelapse)];
  if ((relapses > relapses_logged_ || plane_relapses > plane_relapses_logged_) &&
      now >= next_relapse_log_) {
    MRCD_WARN(
        "%llu EV relapse(s) and %llu EV(s) retired by plane relapses reported: paths that pass "
        "probes but lose data (a lower MTU inside a plane?), planes that flap; mrcctl monitor "
        "shows them, metric mrc_ctl_ev_reports_by_reason_total{reason=\"relapse\"} and "
        "{reason=\"plane_relapse\"}",
        (unsigned long long)(relapses - relapses_logged_),
        (unsigned long long)(plane_relapses - plane_relapses_logged_));
    relapses_logged_ = relapses;
    plane_relapses_logged_ = plane_relapses;
    next_relapse_log_ = now + 10'000'000'000ull;
  }
  dp_->refresh_links([this](uint8_t port, bool up) {
    MRCD_INFO("port %u link %s", port, up ? "up" : "down");
    (void)ctl_->set_link(port, up);
  });
  if (now >= next_reap_) {
    ctl_->reap_dead();
    next_reap_ = now + 1'000'000'000ull;
  }
  if (policy_ && now >= next_policy_) {
    if (auto ev = store_->list_evstats()) policy_->on_counters(*ev, now);
    next_policy_ = now + Time(cfg_.policy.interval_ms) * 1'000'000ull;
  }
  if (policy_) policy_->evaluate(now);
  if (policy_ && cfg_.probe.interval_ms && now >= next_probe_) {
    probe_round(now);
    next_probe_ = now + Time(cfg_.probe.interval_ms) * 1'000'000ull;
  }
  server_->flush_monitors();
}

int Daemon::run() {
  bool stop = false;
  std::vector<pollfd> fds;
  std::vector<EpArrival> arr;
  while (!stop) {
    // Errors are values everywhere; this only keeps a stray library
    // exception (allocation, JSON) from taking the daemon down.
    try {
      Time now = mono_ns();
      if (now >= next_tick_) {
        tick(now);
        next_tick_ = now + Time(cfg_.tick_ms) * 1'000'000ull;
      }
      for (const EpBatchDone& b : ep_->poll(now)) batch_done(b, now);
      prober_->tick(now);
      Time dl = std::min({next_tick_, ep_->next_deadline(), prober_->next_deadline()});
      int timeout = dl <= now ? 0 : int(std::min<Time>((dl - now) / 1'000'000 + 1, 1000));
      fds.clear();
      fds.push_back({sig_fd_.get(), POLLIN, 0});
      const size_t prober_at = fds.size();
      for (int fd : prober_->fds()) fds.push_back({fd, POLLIN, 0});
      const size_t server_at = fds.size();
      server_->fill_pollfds(&fds);
      const size_t metrics_at = fds.size();
      if (metrics_) metrics_->fill_pollfds(&fds);
      int r = poll(fds.data(), fds.size(), timeout);
      if (r < 0) {
        if (errno == EINTR) continue;
        MRCD_ERROR("poll: %s", strerror(errno));
        return 1;
      }
      now = mono_ns();
      if (fds[0].revents & POLLIN) {
        signalfd_siginfo si;
        while (read(sig_fd_.get(), &si, sizeof(si)) == sizeof(si)) {
          if (si.ssi_signo == SIGHUP) {
            MRCD_INFO(
                "SIGHUP: configuration is read at start only (restart mrcd to apply changes)");
            continue;
          }
          MRCD_INFO("signal %u: shutting down", si.ssi_signo);
          stop = true;
        }
      }
      arr.clear();
      for (size_t i = prober_at; i < server_at; i++)
        if (fds[i].revents & POLLIN) prober_->on_readable(fds[i].fd, &arr);
      for (const EpArrival& a : arr) ep_->on_response(a, now);
      for (size_t i = server_at; i < metrics_at; i++)
        if (fds[i].revents) server_->handle(fds[i]);
      for (size_t i = metrics_at; i < fds.size(); i++)
        if (fds[i].revents) metrics_->handle(fds[i]);
    } catch (const std::exception& e) {
      MRCD_ERROR("internal error (continuing): %s", e.what());
    }
  }
  // Clean exit.
  __atomic_store_n(&store_->dev().mrcd_pid, 0u, __ATOMIC_RELEASE);
  server_.reset();
  metrics_.reset();
  Status s = ok_status();
  if (!cfg_.keep_on_exit) {
    s = PinnedStore::unpin(cfg_.pin_dir);
    if (s) s = dp_->stop(false);
    MRCD_INFO("cleanup: XDP detached, pins under %s removed%s", cfg_.pin_dir.c_str(),
              s ? "" : " (with errors)");
  } else {
    s = dp_->stop(true);
    MRCD_INFO("exit: mrc_xdp stays attached and the state pinned under %s", cfg_.pin_dir.c_str());
  }
  if (!s) {
    MRCD_ERROR("%s", s.error().message().c_str());
    return 1;
  }
  return 0;
}

json Daemon::qps() const {
  json a = json::array();
  auto q = store_->list_qps();
  if (!q) return a;
  const Time now = mono_ns();
  for (const auto& [k, v] : *q) {
    json j = proto::qp_json(k, v, now);
    j["alive"] = pid_alive(k.pid);
    a.push_back(j);
  }
  return a;
}

json Daemon::stats() const {
  json ports = json::array();
  auto& maps = dp_->maps();
  std::vector<std::pair<uint32_t, std::string>> list = {{0, ""}};
  for (const Plane& p : dp_->planes()) list.push_back({p.cfg.port, p.cfg.ifname});
  for (const auto& [port, name] : list) {
    auto s = maps.stats(port);
    if (!s) continue;
    json x = json::object();
    for (size_t i = 0; i < loader::kStatsFields; i++)
      x[loader::kStatsFieldNames[i]] = loader::stats_field(*s, i);
    ports.push_back({{"port", port}, {"ifname", name}, {"xdp", x}});
  }
  const auto& cc = ctl_->counters();
  const auto& pc = prober_->counters();
  const auto& ec = ep_->counters();
  const auto& sc = server_->counters();
  const mrc_ctl_dev& d = store_->dev();
  json j = {
      {"ports", ports},
      {"controller",
       {{"reports", cc.reports},
        {"upstream_drops", cc.upstream_drops},
        {"unknown_profile", cc.unknown_profile},
        {"events", cc.events},
        {"modifies", cc.modifies},
        {"modify_errors", cc.modify_errors},
        {"generation", d.gen}}},
      {"evq", {{"pushed", d.evq_pushed}, {"dropped", d.evq_dropped}}},
      {"prober",
       {{"tx", pc.tx},
        {"tx_errors", pc.tx_errors},
        {"rx", pc.rx},
        {"rx_parse_errors", pc.rx_parse_errors},
        {"rx_unknown", pc.rx_unknown},
        {"neigh_waits", pc.neigh_waits},
        {"neigh_failures", pc.neigh_failures},
        {"requests", ec.requests},
        {"responses", ec.responses},
        {"unmatched", ec.unmatched},
        {"late", ec.late},
        {"timeouts", ec.timeouts}}},
      {"server",
       {{"accepted", sc.accepted},
        {"requests", sc.requests},
        {"errors", sc.errors},
        {"eperm", sc.eperm}}},
      {"daemon", {{"pid", getpid()}, {"start_time_ns", start_real_}, {"restarts", d.restarts}}}};
  if (policy_) {
    const auto& p = policy_->counters();
    j["policy"] = {{"deny_ev", p.deny_ev},
                   {"allow_ev", p.allow_ev},
                   {"deny_plane", p.deny_plane},
                   {"allow_plane", p.allow_plane},
                   {"suppressed", p.suppressed}};
  }
  return j;
}

}  // namespace mrc::mrcd
