// mrcd: the MRC controller daemon. Documentation/controller.md.
//
// Start-up: configuration -> controller maps (created or re-opened under the
// pin directory) -> mrc_xdp on every plane interface -> control socket,
// metrics endpoint, prober. Then one poll loop: control requests, probe
// responses, metrics scrapes, and a tick that ingests EV reports, follows
// link state, reaps reports of exited processes, feeds the reroute policy
// and runs its probe rounds. SIGTERM/SIGINT end the loop; the pins and the
// XDP programs stay (unless --cleanup), so applications keep running.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <memory>

#include "loader/xdp_maps.hpp"
#include "ctl/controller.hpp"
#include "ctl/ep.hpp"
#include "ctl/pinned_store.hpp"
#include "ctl/proto.hpp"
#include "mrcd/config.hpp"
#include "mrcd/dataplane.hpp"
#include "mrcd/log.hpp"
#include "mrcd/metrics.hpp"
#include "mrcd/policy.hpp"
#include "mrcd/prober.hpp"
#include "mrcd/server.hpp"

namespace mrc::mrcd {
namespace {

using namespace mrc::ctl;
using proto::json;

uint64_t real_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
}

struct Round {
  std::vector<PolicyProbe> probes;
  std::vector<uint16_t> ids;
  uint8_t port = 0;
};

class Daemon {
 public:
  explicit Daemon(Config c) : cfg_(std::move(c)) {}
  Status start();
  int run();

 private:
  Status lock();
  void tick(Time now);
  void probe_round(Time now);
  void batch_done(const EpBatchDone& d, Time now);
  json stats() const;
  json qps() const;
  std::string metrics() const;

  Config cfg_;
  int lock_fd_ = -1;
  int sig_fd_ = -1;
  std::unique_ptr<PinnedStore> store_;
  std::unique_ptr<Controller> ctl_;
  std::unique_ptr<Dataplane> dp_;
  std::unique_ptr<Prober> prober_;
  std::unique_ptr<EpBatcher> ep_;
  std::unique_ptr<Policy> policy_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<Metrics> metrics_;
  std::map<uint64_t, Round> rounds_;
  uint16_t next_internal_id_ = 0;
  Time next_tick_ = 0, next_reap_ = 0, next_policy_ = 0, next_probe_ = 0;
  uint64_t relapses_logged_ = 0;  // EV relapses the log has reported
  Time next_relapse_log_ = 0;
  uint64_t start_real_ = 0;
  std::map<uint8_t, uint32_t> last_rtt_;  // port -> last policy probe RTT
};

Status Daemon::lock() {
  std::string path = cfg_.socket + ".lock";
  size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) mkdir(path.substr(0, slash).c_str(), 0755);
  lock_fd_ = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd_ < 0) return Error(errno, "opening " + path);
  if (flock(lock_fd_, LOCK_EX | LOCK_NB)) return Error(EBUSY, "another mrcd holds " + path);
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
  sig_fd_ = signalfd(-1, &ss, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sig_fd_ < 0) return Error(errno, "signalfd");
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
  // Paths that pass probes but lose data (EV relapses): one warning per
  // 10 s at most, with the count since the last one.
  const uint64_t relapses =
      ctl_->counters().reports_by_reason[size_t(core::EvEventReason::kRelapse)];
  if (relapses > relapses_logged_ && now >= next_relapse_log_) {
    MRCD_WARN("%llu EV relapse(s) reported: paths that pass probes but lose data (a lower MTU "
              "inside a plane?); mrcctl monitor shows them, metric "
              "mrc_ctl_ev_reports_by_reason_total{reason=\"relapse\"}",
              (unsigned long long)(relapses - relapses_logged_));
    relapses_logged_ = relapses;
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
      fds.push_back({sig_fd_, POLLIN, 0});
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
        while (read(sig_fd_, &si, sizeof(si)) == sizeof(si)) {
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

std::string Daemon::metrics() const {
  Expo e;
  using L = std::vector<std::pair<std::string, std::string>>;
  auto& maps = dp_->maps();
  e.family("mrcd_up", "gauge", "mrcd is running");
  e.sample("mrcd_up", L{}, uint64_t(1));
  e.family("mrcd_start_time_seconds", "gauge", "when mrcd started (unix time)");
  e.sample("mrcd_start_time_seconds", L{}, double(start_real_) / 1e9);

  // Ports and XDP.
  e.family("mrc_port_up", "gauge", "port usable (admin enabled and link up)");
  for (const auto& p : store_->regions().ports)
    if (p.configured)
      e.sample("mrc_port_up", L{{"port", std::to_string(p.port)}, {"ifname", p.ifname}},
               uint64_t(p.admin_state == MRC_CTL_PORT_ENABLED && p.link_up));
  e.family("mrc_port_admin_up", "gauge", "port administratively enabled");
  for (const auto& p : store_->regions().ports)
    if (p.configured)
      e.sample("mrc_port_admin_up", L{{"port", std::to_string(p.port)}, {"ifname", p.ifname}},
               uint64_t(p.admin_state == MRC_CTL_PORT_ENABLED));
  e.family("mrc_port_link_up", "gauge", "port link up");
  for (const auto& p : store_->regions().ports)
    if (p.configured)
      e.sample("mrc_port_link_up", L{{"port", std::to_string(p.port)}, {"ifname", p.ifname}},
               uint64_t(p.link_up != 0));
  e.family("mrc_xdp_mode", "gauge", "XDP attach mode of a plane interface (1 for the mode in use)");
  for (const Plane& p : dp_->planes())
    e.sample("mrc_xdp_mode",
             L{{"port", std::to_string(p.cfg.port)},
               {"ifname", p.cfg.ifname},
               {"mode", std::string(loader::to_string(p.mode))}},
             uint64_t(1));
  struct Ctr {
    const char* field;
    const char* metric;
    const char* label;  // action or reason label value, nullptr for plain counters
  };
  const Ctr ctrs[] = {{"rx_packets", "mrc_xdp_rx_packets_total", nullptr},
                      {"rx_bytes", "mrc_xdp_rx_bytes_total", nullptr},
                      {"ecn_ce", "mrc_xdp_ecn_ce_packets_total", nullptr},
                      {"pass_non_mrc", "mrc_xdp_actions_total", "pass_non_mrc"},
                      {"redirect_data", "mrc_xdp_actions_total", "redirect_data"},
                      {"redirect_ctrl", "mrc_xdp_actions_total", "redirect_ctrl"},
                      {"redirect_trimmed", "mrc_xdp_actions_total", "redirect_trimmed"},
                      {"tx_trim_nack", "mrc_xdp_actions_total", "tx_trim_nack"},
                      {"tx_ep_response", "mrc_xdp_actions_total", "tx_ep_response"}};
  std::vector<std::pair<uint32_t, std::string>> list = {{0, "(unregistered)"}};
  for (const Plane& p : dp_->planes()) list.push_back({p.cfg.port, p.cfg.ifname});
  std::vector<std::pair<L, mrc_xdp_stats>> st;
  for (const auto& [port, name] : list)
    if (auto s = maps.stats(port))
      st.push_back({L{{"port", std::to_string(port)}, {"ifname", name}}, *s});
  std::string fam;
  for (const Ctr& c : ctrs) {
    if (fam != c.metric) {
      fam = c.metric;
      e.family(
          fam, "counter",
          c.label ? "frames per XDP action" : std::string("XDP ") + c.field + " per plane port");
    }
    size_t idx = 0;
    for (size_t i = 0; i < loader::kStatsFields; i++)
      if (std::strcmp(loader::kStatsFieldNames[i], c.field) == 0) idx = i;
    for (const auto& [l, s] : st) {
      L lab = l;
      if (c.label) lab.push_back({"action", c.label});
      e.sample(fam, lab, loader::stats_field(s, idx));
    }
  }
  e.family("mrc_xdp_drops_total", "counter", "frames mrc_xdp dropped, by reason");
  for (size_t i = 0; i < loader::kStatsFields; i++) {
    std::string n = loader::kStatsFieldNames[i];
    if (n.rfind("drop_", 0) != 0) continue;
    for (const auto& [l, s] : st) {
      L lab = l;
      lab.push_back({"reason", n.substr(5)});
      e.sample("mrc_xdp_drops_total", lab, loader::stats_field(s, i));
    }
  }

  // Profiles and EVs.
  e.family("mrc_ev_profile_evs", "gauge", "EVs of a profile by state");
  e.family("mrc_ev_profile_users", "gauge", "live QPs using an EV profile");
  std::string evs, users;
  for (uint64_t id : ctl_->ev_profile_ids()) {
    uint32_t n[4] = {};
    for (const auto& x : ctl_->ev_entries(id)) {
      if (!x.populated)
        n[3]++;
      else if (x.state == kEvDenied)
        n[2]++;
      else if (x.state == kEvAssumedBad)
        n[1]++;
      else
        n[0]++;
    }
    const char* names[] = {"good", "assumed_bad", "denied", "unpopulated"};
    for (int k = 0; k < 4; k++)
      e.sample("mrc_ev_profile_evs", L{{"profile", std::to_string(id)}, {"state", names[k]}},
               uint64_t(n[k]));
    e.sample("mrc_ev_profile_users", L{{"profile", std::to_string(id)}},
             uint64_t(ctl_->ev_profile_users(id)));
  }
  // Per-EV counters. By default summed per (profile, port): the series count
  // depends on the ports and profiles, not on the EVs (a 4096-EV profile would
  // otherwise add 7 x 4096 x QP-ports series). One series per EV with
  // metrics_per_ev (--metrics-per-ev).
  if (auto ev = store_->list_evstats()) {
    struct Sum {
      uint64_t tx = 0, lost = 0, trims = 0, ecn = 0, acked = 0, bad = 0;
      uint32_t rtt = 0;
      void add(const mrc_ctl_evstat& v) {
        tx += v.tx_pkts;
        lost += v.lost;
        trims += v.trims;
        ecn += v.ecn;
        acked += v.acked;
        rtt = std::max(rtt, v.rtt_last_ns);
        bad += v.qps_bad;
      }
    };
    const std::pair<const char*, uint64_t Sum::*> ctr[] = {{"tx_packets_total", &Sum::tx},
                                                           {"acked_packets_total", &Sum::acked},
                                                           {"lost_packets_total", &Sum::lost},
                                                           {"trimmed_packets_total", &Sum::trims},
                                                           {"ecn_marked_packets_total", &Sum::ecn}};
    std::map<std::pair<uint64_t, uint8_t>, Sum> agg;
    for (const auto& [k, v] : *ev) agg[{k.profile_id, k.port}].add(v);
    for (const auto& [name, mem] : ctr) {
      const std::string fam = std::string("mrc_ev_profile_") + name;
      e.family(fam, "counter", "per-EV counter summed over the EVs of a profile on a port");
      for (const auto& [k, s] : agg)
        e.sample(fam, L{{"profile", std::to_string(k.first)}, {"port", std::to_string(k.second)}},
                 s.*mem);
    }
    e.family("mrc_ev_profile_rtt_last_max_seconds", "gauge",
             "largest last RTT sample of the EVs of a profile on a port");
    e.family("mrc_ev_profile_qp_evs_assumed_bad", "gauge",
             "(QP, EV) pairs of a profile on a port in ASSUMED_BAD");
    for (const auto& [k, s] : agg) {
      L lab{{"profile", std::to_string(k.first)}, {"port", std::to_string(k.second)}};
      e.sample("mrc_ev_profile_rtt_last_max_seconds", lab, double(s.rtt) / 1e9);
      e.sample("mrc_ev_profile_qp_evs_assumed_bad", lab, s.bad);
    }
    if (cfg_.metrics_per_ev) {
      std::map<std::tuple<uint64_t, uint32_t, uint8_t>, Sum> sum;
      for (const auto& [k, v] : *ev) sum[{k.profile_id, k.wire, k.port}].add(v);
      auto ev_labels = [](const std::tuple<uint64_t, uint32_t, uint8_t>& k) {
        char w[16];
        std::snprintf(w, sizeof(w), "0x%08x", std::get<1>(k));
        return L{{"profile", std::to_string(std::get<0>(k))},
                 {"ev", w},
                 {"port", std::to_string(std::get<2>(k))}};
      };
      for (const auto& [name, mem] : ctr) {
        const std::string fam = std::string("mrc_ev_") + name;
        e.family(fam, "counter", "per-EV counter summed over the QPs reporting it");
        for (const auto& [k, s] : sum) e.sample(fam, ev_labels(k), s.*mem);
      }
      e.family("mrc_ev_rtt_last_seconds", "gauge",
               "last RTT sample of an EV (worst over processes)");
      e.family("mrc_ev_qps_assumed_bad", "gauge", "QPs holding an EV ASSUMED_BAD");
      for (const auto& [k, s] : sum) {
        L lab = ev_labels(k);
        e.sample("mrc_ev_rtt_last_seconds", lab, double(s.rtt) / 1e9);
        e.sample("mrc_ev_qps_assumed_bad", lab, s.bad);
      }
    }
  }

  // QPs.
  if (auto q = store_->list_qps()) {
    const std::pair<const char*, __u64 mrc_ctl_qp_report::*> f[] = {
        {"mrc_qp_tx_bytes_total", &mrc_ctl_qp_report::tx_bytes},
        {"mrc_qp_tx_packets_total", &mrc_ctl_qp_report::tx_pkts},
        {"mrc_qp_rtx_packets_total", &mrc_ctl_qp_report::rtx_pkts},
        {"mrc_qp_rx_bytes_total", &mrc_ctl_qp_report::rx_bytes},
        {"mrc_qp_rx_packets_total", &mrc_ctl_qp_report::rx_pkts},
        {"mrc_qp_timeouts_total", &mrc_ctl_qp_report::timeouts},
        {"mrc_qp_cwnd_bytes", &mrc_ctl_qp_report::cwnd_bytes},
        {"mrc_qp_inflight_bytes", &mrc_ctl_qp_report::inflight_bytes}};
    auto qp_labels = [](const mrc_ctl_qp_key& k, const mrc_ctl_qp_report& v) {
      return L{{"pid", std::to_string(k.pid)},
               {"dev", std::to_string(k.dev)},
               {"qpn", std::to_string(k.qpn)},
               {"comm", std::string(v.comm, strnlen(v.comm, sizeof(v.comm)))}};
    };
    for (const auto& [name, mem] : f) {
      const bool gauge = std::strstr(name, "_total") == nullptr;
      e.family(name, gauge ? "gauge" : "counter",
               "per-QP value as the application last published it");
      for (const auto& [k, v] : *q) e.sample(name, qp_labels(k, v), v.*mem);
    }
    e.family("mrc_qp_srtt_seconds", "gauge",
             "smoothed RTT of a QP as the application last published it");
    for (const auto& [k, v] : *q)
      e.sample("mrc_qp_srtt_seconds", qp_labels(k, v), double(v.srtt_ns) / 1e9);
  }

  // Controller, prober, policy, server.
  const mrc_ctl_dev& d = store_->dev();
  const auto& cc = ctl_->counters();
  e.family("mrc_ctl_generation", "gauge", "controller state generation");
  e.sample("mrc_ctl_generation", L{}, d.gen);
  e.family("mrc_ctl_ev_reports_total", "counter", "EV reports applications queued");
  e.sample("mrc_ctl_ev_reports_total", L{}, d.evq_pushed);
  e.family("mrc_ctl_ev_reports_dropped_total", "counter", "EV reports lost to a full queue");
  e.sample("mrc_ctl_ev_reports_dropped_total", L{}, d.evq_dropped);
  e.family("mrc_ctl_ev_events_total", "counter", "EV events delivered to controller CQs");
  e.sample("mrc_ctl_ev_events_total", L{}, cc.events);
  e.family("mrc_ctl_ev_reports_by_reason_total", "counter",
           "EV state changes the data path reported, by reason (relapse: a path that passes "
           "probes but not data, e.g. a lower MTU inside it)");
  for (size_t r = 0; r < cc.reports_by_reason.size(); r++)
    if (cc.reports_by_reason[r])
      e.sample("mrc_ctl_ev_reports_by_reason_total",
               L{{"reason", core::to_string(core::EvEventReason(r))}}, cc.reports_by_reason[r]);
  const auto& pc = prober_->counters();
  const auto& ec = ep_->counters();
  e.family("mrc_probe_requests_total", "counter", "endpoint requests sent");
  e.sample("mrc_probe_requests_total", L{}, ec.requests);
  e.family("mrc_probe_responses_total", "counter", "endpoint responses matched");
  e.sample("mrc_probe_responses_total", L{}, ec.responses);
  e.family("mrc_probe_timeouts_total", "counter", "batches that timed out");
  e.sample("mrc_probe_timeouts_total", L{}, ec.timeouts);
  e.family("mrc_probe_unmatched_total", "counter", "responses with no outstanding request");
  e.sample("mrc_probe_unmatched_total", L{}, ec.unmatched + pc.rx_unknown);
  e.family("mrc_probe_rtt_last_seconds", "gauge", "last policy probe RTT per port");
  for (const auto& [port, rtt] : last_rtt_)
    e.sample("mrc_probe_rtt_last_seconds", L{{"port", std::to_string(port)}}, double(rtt) / 1e9);
  if (policy_) {
    const auto& p = policy_->counters();
    e.family("mrc_policy_decisions_total", "counter", "reroute policy decisions by action");
    e.sample("mrc_policy_decisions_total", L{{"action", "deny_ev"}}, p.deny_ev);
    e.sample("mrc_policy_decisions_total", L{{"action", "allow_ev"}}, p.allow_ev);
    e.sample("mrc_policy_decisions_total", L{{"action", "deny_plane"}}, p.deny_plane);
    e.sample("mrc_policy_decisions_total", L{{"action", "allow_plane"}}, p.allow_plane);
    e.sample("mrc_policy_decisions_total", L{{"action", "suppressed"}}, p.suppressed);
  }
  const auto& sc = server_->counters();
  e.family("mrcd_control_requests_total", "counter", "control socket requests");
  e.sample("mrcd_control_requests_total", L{}, sc.requests);
  e.family("mrcd_control_eperm_total", "counter", "requests refused for lack of CAP_NET_ADMIN");
  e.sample("mrcd_control_eperm_total", L{}, sc.eperm);
  return e.str();
}

}  // namespace
}  // namespace mrc::mrcd

int main(int argc, char** argv) {
  using namespace mrc::mrcd;
  auto o = parse_args(argc, argv);
  if (!o) {
    std::fprintf(stderr, "mrcd: %s\n", o.error().message().c_str());
    return 2;
  }
  if (o->help) {
    std::fputs(usage().c_str(), stdout);
    return 0;
  }
  if (o->version) {
    std::printf("mrcd %s (controller layout %d)\n", MRC_VERSION, MRC_CTL_LAYOUT_VERSION);
    return 0;
  }
  if (mrc::Status s = validate(o->cfg); !s) {
    std::fprintf(stderr, "mrcd: %s%s\n", o->cfg.path.empty() ? "" : (o->cfg.path + ": ").c_str(),
                 s.error().context.c_str());
    return 2;
  }
  if (o->check_only) {
    std::printf("mrcd: configuration ok (%zu planes)\n", o->cfg.planes.size());
    return 0;
  }
  set_log_level(o->cfg.log_level);
  Daemon d(o->cfg);
  if (mrc::Status s = d.start(); !s) {
    MRCD_ERROR("%s", s.error().message().c_str());
    return 1;
  }
  return d.run();
}
