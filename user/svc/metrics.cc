#include "svc/metrics.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

namespace mrc::svc {

namespace {
using L = std::vector<std::pair<std::string, std::string>>;
}  // namespace

std::string render_metrics(Server& s, double start_time) {
  prom::Expo e;
  e.family("mrc_service_up", "gauge", "mrc-serviced is running");
  e.sample("mrc_service_up", L{}, uint64_t(1));
  e.family("mrc_service_start_time_seconds", "gauge", "when mrc-serviced started (unix time)");
  e.sample("mrc_service_start_time_seconds", L{}, start_time);

  // The engine thread's scheduling as obtained; `asked` differs when it fell
  // back (the reason says why).
  Context& ctx = s.context();
  e.family("mrc_service_engine_sched", "gauge",
           "the engine thread's scheduling obtained (1), the mode asked for and the reason");
  e.sample("mrc_service_engine_sched",
           L{{"mode", to_string(ctx.engine_sched())},
             {"asked", to_string(s.sched_asked())},
             {"reason", ctx.engine_sched_reason()}},
           uint64_t(1));

  // The limits and where each was set (an option or the file's key).
  e.family("mrc_service_limit", "gauge",
           "a per-process limit (0: none for mr_bytes, clients_per_uid)");
  const ServerOptions o = s.options();  // a reload may have changed them
  const ServerOptions::LimitNames& n = o.limit_names;
  const std::pair<const char*, std::pair<uint64_t, const std::string*>> lim[] = {
      {"clients", {o.max_clients, &n.clients}},
      {"clients_per_uid", {o.max_clients_per_uid, &n.clients_per_uid}},
      {"area_bytes", {o.area_bytes, &n.area}},
      {"qps", {o.max_qps, &n.qps}},
      {"cqs", {o.max_cqs, &n.cqs}},
      {"mrs", {o.max_mrs, &n.mrs}},
      {"mr_bytes", {o.max_mr_bytes, &n.mr_bytes}},
      {"wr", {o.max_wr, &n.wr}},
      {"cqe", {o.max_cqe, &n.cqe}}};
  for (const auto& [name, v] : lim)
    e.sample("mrc_service_limit", L{{"limit", name}, {"source", *v.second}}, v.first);

  // The service's own counters.
  const ServerCounters& c = s.counters();
  e.family("mrc_service_connections_total", "counter",
           "connections accepted (clients and observers such as mrcctl)");
  e.sample("mrc_service_connections_total", L{}, c.clients_total.load());
  e.family("mrc_service_connections", "gauge", "connections open now");
  e.sample("mrc_service_connections", L{}, c.clients_now.load());
  e.family("mrc_service_clients_broken_total", "counter",
           "clients dropped for breaking the protocol");
  e.sample("mrc_service_clients_broken_total", L{}, c.clients_broken.load());
  e.family("mrc_service_refusals_total", "counter",
           "refused requests and ring entries, by kind (service.md section 2)");
  e.sample("mrc_service_refusals_total", L{{"kind", "bad_request"}}, c.bad_requests.load());
  e.sample("mrc_service_refusals_total", L{{"kind", "bad_wqe"}}, c.bad_wqe.load());
  e.sample("mrc_service_refusals_total", L{{"kind", "bad_ready"}}, c.bad_ready.load());
  e.sample("mrc_service_refusals_total", L{{"kind", "closed_doorbell"}}, c.bad_doorbell.load());
  e.family("mrc_service_cq_overruns_total", "counter", "completions a client's full CQ lost");
  e.sample("mrc_service_cq_overruns_total", L{}, c.cq_overruns.load());
  const EngineStats es = ctx.engine_stats();
  e.family(
      "mrc_service_engine_bytes_total", "counter",
      "bytes of the frames the service's engine sent and received (all clients, headers included)");
  e.sample("mrc_service_engine_bytes_total", L{{"dir", "tx"}}, es.tx_bytes);
  e.sample("mrc_service_engine_bytes_total", L{{"dir", "rx"}}, es.rx_bytes);
  e.family("mrc_service_engine_frames_total", "counter",
           "frames the service's engine sent and received");
  e.sample("mrc_service_engine_frames_total", L{{"dir", "tx"}}, es.tx_frames);
  e.sample("mrc_service_engine_frames_total", L{{"dir", "rx"}}, es.rx_frames);
  // How the engine thread spent its time (Context::ProgressStats): passes,
  // sleeps on its sockets and timer, and the waits of wake-up coalescing
  // ([engine] coalesce_us), which show whether coalescing acts.
  const Context::ProgressStats ps = ctx.progress_stats();
  e.family("mrc_service_engine_passes_total", "counter",
           "engine passes, by who ran them (the engine thread, or another thread of the service)");
  e.sample("mrc_service_engine_passes_total", L{{"by", "engine_thread"}}, ps.thread_passes);
  e.sample("mrc_service_engine_passes_total", L{{"by", "other"}}, ps.app_passes);
  e.family("mrc_service_engine_waits_total", "counter",
           "times the engine thread waited: asleep on its sockets and timer (sleep), or a "
           "wake-up coalescing wait (coalesced, [engine] coalesce_us)");
  e.sample("mrc_service_engine_waits_total", L{{"kind", "sleep"}}, ps.thread_sleeps);
  e.sample("mrc_service_engine_waits_total", L{{"kind", "coalesced"}}, ps.coalesced_waits);
  e.family("mrc_service_engine_rt_demotions_total", "counter",
           "fifo: bursts the engine thread finished under SCHED_OTHER (engine_rt_burst_us)");
  e.sample("mrc_service_engine_rt_demotions_total", L{}, ps.rt_demotions);
  // Tombstones (service.md section 5, "The peers"): a departed process's QPs
  // kept to refuse their peers' requests.
  e.family("mrc_service_tombstones_total", "counter",
           "QPs of departed processes kept as tombstones; early: freed before their linger ended");
  e.sample("mrc_service_tombstones_total", L{{"end", "any"}}, es.tombstones);
  e.sample("mrc_service_tombstones_total", L{{"end", "early"}}, es.tombstones_early);
  e.family("mrc_service_tombstone_refusals_total", "counter",
           "peers' requests a tombstone answered with a NAK (remote operation error)");
  e.sample("mrc_service_tombstone_refusals_total", L{}, es.tomb_naks);

  // Per process (OBSERVE's figures).
  const std::vector<ObserveClient> all = s.observe();
  e.family("mrc_service_clients", "gauge", "processes served now (past HELLO)");
  e.sample("mrc_service_clients", L{}, all.size());
  auto labels = [](const ObserveClient& x) {
    return L{{"client", std::to_string(x.id)},
             {"pid", std::to_string(x.pid)},
             {"uid", std::to_string(x.uid)},
             {"comm", std::string(x.comm, strnlen(x.comm, sizeof x.comm))}};
  };
  struct Fam {
    const char* name;
    const char* type;
    const char* help;
    uint64_t ObserveClient::*field;
  };
  const Fam u64s[] = {
      {"mrc_service_client_mr_bytes", "gauge", "bytes a process has registered now",
       &ObserveClient::mr_bytes},
      {"mrc_service_client_tx_bytes_total", "counter",
       "payload bytes a process's QPs sent (destroyed QPs included)", &ObserveClient::tx_bytes},
      {"mrc_service_client_rx_bytes_total", "counter",
       "payload bytes a process's QPs received (destroyed QPs included)", &ObserveClient::rx_bytes},
      {"mrc_service_client_errors_total", "counter",
       "a process's error completions, refused requests and its QPs' remote access errors",
       &ObserveClient::errors}};
  const std::pair<const char*, uint32_t ObserveClient::*> u32s[] = {
      {"qps", &ObserveClient::qps}, {"cqs", &ObserveClient::cqs}, {"mrs", &ObserveClient::mrs}};
  for (const auto& [what, field] : u32s) {
    const std::string name = std::string("mrc_service_client_") + what;
    e.family(name, "gauge", std::string("a process's live ") + what);
    for (const ObserveClient& x : all) e.sample(name, labels(x), x.*field);
  }
  for (const Fam& f : u64s) {
    e.family(f.name, f.type, f.help);
    for (const ObserveClient& x : all) e.sample(f.name, labels(x), x.*(f.field));
  }
  return e.str();
}

Result<std::unique_ptr<MetricsThread>> MetricsThread::start(Server& s, const ServerOptions& o) {
  std::unique_ptr<MetricsThread> t(new MetricsThread());
  const double started = double(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                    std::chrono::system_clock::now().time_since_epoch())
                                    .count()) /
                         1e9;
  auto ep = prom::Metrics::listen(o.metrics, [&s, started] { return render_metrics(s, started); });
  if (!ep) return std::move(ep).error();
  t->ep_ = std::move(*ep);
  t->stop_ = UniqueFd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!t->stop_) return Error(errno, "metrics: eventfd");
  t->th_ = std::thread([p = t.get()] { p->loop(); });
  return t;
}

MetricsThread::~MetricsThread() {
  if (th_.joinable()) {
    const uint64_t one = 1;
    (void)!write(stop_.get(), &one, sizeof one);
    th_.join();
  }
}

void MetricsThread::loop() {
  std::vector<pollfd> fds;
  for (;;) {
    fds.clear();
    fds.push_back({stop_.get(), POLLIN, 0});
    ep_->fill_pollfds(&fds);
    if (poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[0].revents) return;
    for (size_t i = 1; i < fds.size(); i++)
      if (fds[i].revents) ep_->handle(fds[i]);
  }
}

}  // namespace mrc::svc
