// mrcd's daemon: everything main() runs once the configuration is parsed.
//
// Start-up: configuration -> controller maps (created or re-opened under the
// pin directory) -> mrc_xdp on every plane interface -> control socket,
// metrics endpoint, prober. Then one poll loop: control requests, probe
// responses, metrics scrapes, and a tick that ingests EV reports, follows
// link state, reaps reports of exited processes, feeds the reroute policy
// and runs its probe rounds. SIGTERM/SIGINT end the loop; the pins and the
// XDP programs stay (unless --cleanup), so applications keep running.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ctl/controller.hpp"
#include "ctl/ep.hpp"
#include "ctl/pinned_store.hpp"
#include "ctl/proto.hpp"
#include "mrcd/config.hpp"
#include "mrcd/dataplane.hpp"
#include "mrcd/policy.hpp"
#include "mrcd/prober.hpp"
#include "mrcd/server.hpp"
#include "util/prom.hpp"
#include "util/unique_fd.hpp"

namespace mrc::mrcd {

using prom::Expo;
using prom::Metrics;

class Daemon {
 public:
  explicit Daemon(Config c) : cfg_(std::move(c)) {}
  Status start();
  // The poll loop, until SIGTERM/SIGINT; the exit status of mrcd.
  int run();

 private:
  // One policy probe round on a port (its batch id is the key of rounds_).
  struct Round {
    std::vector<PolicyProbe> probes;
    std::vector<uint16_t> ids;
    uint8_t port = 0;
  };

  Status lock();
  void tick(ctl::Time now);
  void probe_round(ctl::Time now);
  void batch_done(const ctl::EpBatchDone& d, ctl::Time now);
  ctl::proto::json stats() const;
  ctl::proto::json qps() const;
  // The Prometheus exposition (daemon_metrics.cc), by part.
  std::string metrics() const;
  void metrics_ports(Expo& e) const;
  void metrics_xdp(Expo& e) const;
  void metrics_profiles(Expo& e) const;
  void metrics_evs(Expo& e) const;
  void metrics_qps(Expo& e) const;
  void metrics_daemon(Expo& e) const;

  Config cfg_;
  UniqueFd lock_fd_;  // held (flock) while mrcd runs
  UniqueFd sig_fd_;
  std::unique_ptr<ctl::PinnedStore> store_;
  std::unique_ptr<ctl::Controller> ctl_;
  std::unique_ptr<Dataplane> dp_;
  std::unique_ptr<Prober> prober_;
  std::unique_ptr<ctl::EpBatcher> ep_;
  std::unique_ptr<Policy> policy_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<Metrics> metrics_;
  std::map<uint64_t, Round> rounds_;
  uint16_t next_internal_id_ = 0;
  ctl::Time next_tick_ = 0, next_reap_ = 0, next_policy_ = 0, next_probe_ = 0;
  uint64_t relapses_logged_ = 0;        // EV relapses the log has reported
  uint64_t plane_relapses_logged_ = 0;  // EVs retired by plane relapses, logged
  ctl::Time next_relapse_log_ = 0;
  uint64_t start_real_ = 0;
  std::map<uint8_t, uint32_t> last_rtt_;  // port -> last policy probe RTT
};

}  // namespace mrc::mrcd
