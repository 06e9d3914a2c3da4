// Engines on the simulated network: every host of a sim::Network runs one
// mrc::core::Engine. The cluster feeds received frames to the engine, drains
// its transmit side into the host's uplinks (with a bounded "TX ring" per
// port so queues push back like a NIC's), and schedules the engine's timers
// as network events. Used by the engine's property tests and by the figures
// of Documentation/design.md (bench/sim_figures).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "core/engine.hpp"
#include "sim/network.hpp"

namespace mrc::sim {

struct ClusterOptions {
  NetConfig net;
  core::EngineConfig engine;           // ports, addresses and seed are filled per host
  uint32_t tx_ring_bytes = 64 * 1024;  // per port: what a host may queue on its uplink
};

class Cluster {
 public:
  explicit Cluster(const ClusterOptions& o);
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  Network& net() { return *net_; }
  core::Engine& engine(uint32_t host);
  uint32_t hosts() const { return uint32_t(hosts_.size()); }
  Time now() const { return net_->now(); }

  // Engine port of a plane (1-based) and the peer addressing of a QP's AV.
  static uint8_t port_of(uint32_t plane) { return uint8_t(plane + 1); }
  std::array<core::PlaneAddr, core::kMaxPorts + 1> av_of(uint32_t host) const;

  // The application posted work on `host`: let its engine transmit.
  void kick(uint32_t host);
  // Runs the network until done() or the deadline (absolute virtual time).
  bool run_until(const std::function<bool()>& done, Time deadline);

 private:
  struct Host;
  void service(uint32_t host);
  std::unique_ptr<Network> net_;
  std::vector<std::unique_ptr<Host>> hosts_;
  uint32_t ring_bytes_;
};

}  // namespace mrc::sim
