// mrc-serviced's Prometheus exposition (Documentation/observability.md,
// "mrc-serviced"): per process (client, pid, uid, comm) its QPs, CQs,
// regions, bytes and errors, as OBSERVE reports them; the service's own
// counters and totals; its limits and where each was set; the engine
// thread's scheduling. Served by util/prom's endpoint on its own thread
// (MetricsThread), so the control loop (Server::run) is not touched.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "mrc/result.hpp"
#include "svc/server.hpp"
#include "util/prom.hpp"
#include "util/unique_fd.hpp"

namespace mrc::svc {

// The text of one scrape.
std::string render_metrics(Server& s, double start_time);

// The endpoint on its own thread until destroyed.
class MetricsThread {
 public:
  static Result<std::unique_ptr<MetricsThread>> start(Server& s, const ServerOptions& o);
  ~MetricsThread();
  uint16_t port() const { return ep_->port(); }

 private:
  MetricsThread() = default;
  void loop();
  std::unique_ptr<prom::Metrics> ep_;
  UniqueFd stop_;  // eventfd
  std::thread th_;
};

}  // namespace mrc::svc
