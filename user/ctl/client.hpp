// The application side of the controller state (the contract libmrc uses).
//
//   Client      opens the pinned maps read-mostly, resolves EV/CC profile ids
//               into the engine's EvProfile/CcProfile, reads port and EV
//               policy from mmapped memory, pushes EV events, publishes
//               per-QP and per-EV reports.
//   EngineSync  keeps one core::Engine in step with that state: installs the
//               profiles its QPs use, applies DENIED/allowed EVs and
//               administratively disabled ports as they change, forwards the
//               engine's EV events and publishes its QPs' counters.
//
// Cost on the data path: EngineSync::poll() is one atomic load of
// mrc_ctl_dev.gen when nothing changed (call it once per batch); reports are
// published every `stats_interval` (one bpf() call per QP and per EV).
// Nothing here blocks on mrcd: while mrcd is down the maps stay readable and
// events queue (or are counted as dropped when the queue is full).
//
// Documentation/controller.md, "The libmrc contract", walks through a use.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "core/engine.hpp"
#include "core/types.hpp"
#include "ctl/store.hpp"
#include "ctl/types.hpp"
#include "mrc/result.hpp"
#include "mrc/uapi/maps.h"

namespace mrc::ctl {

struct PortView {
  uint8_t port = 0;
  std::string ifname;
  uint32_t ifindex = 0;
  bool admin_up = true;
  bool link_up = true;
  uint32_t queues = 1;
  bool usable() const { return admin_up && link_up; }
};

// An ONLINE EV profile as the engine installs it.
struct ResolvedEvProfile {
  core::EvProfile profile;
  uint64_t changes = 0;  // mrc_ctl_evp.changes when it was read
  uint64_t fmt_id = 0;
  uint32_t ev_count = 0;
};

class Client {
 public:
  // Opens the maps mrcd pinned under `pin_dir` (Access::kReadMostly).
  static Result<std::unique_ptr<Client>> open(const std::string& pin_dir = MRC_PIN_DIR_DEFAULT);
  // Over any store (tests: the MemStore a Controller works on).
  explicit Client(Store& s);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Bumped after every controller change (profiles, EV states, ports).
  uint64_t generation() const { return read_gen(s_->dev()); }
  // mrcd is running (its pid is alive). The state is usable either way.
  bool daemon_running() const;
  uint16_t udp_port() const;

  // Ports: bit N of the mask = port N must not be used (admin or link down).
  uint32_t port_down_mask() const { return load_acquire32(s_->dev().port_down_mask); }
  uint32_t port_mask() const { return load_acquire32(s_->dev().port_mask); }
  bool port_usable(uint8_t port) const;
  std::vector<PortView> ports() const;

  // EINVAL: no such profile, or not ONLINE (mrc.h: a QP may only use an
  // ONLINE profile). The event mask is GOOD|ASSUMED_BAD whatever the
  // profile's: mrcd filters events by the profile's mask itself.
  Result<ResolvedEvProfile> ev_profile(uint64_t id) const;
  Result<core::CcProfile> cc_profile(uint64_t id) const;
  // Change counter of a profile (0 when it does not exist): cheap re-check.
  uint64_t ev_profile_changes(uint64_t id) const;
  uint64_t cc_profile_changes(uint64_t id) const;

  // One EV state change of QP `ev.qpn` of device `dev`; E2BIG (counted in
  // mrc_ctl_dev.evq_dropped) when the queue is full.
  Status push_ev_event(const core::EvEvent& ev, uint32_t dev = 0);
  Status publish_qp(uint32_t dev, uint32_t qpn, const mrc_ctl_qp_report& r);
  Status remove_qp(uint32_t dev, uint32_t qpn);
  Status publish_ev_stat(const mrc_ctl_evstat_key& k, const mrc_ctl_evstat& v);
  Status remove_ev_stat(const mrc_ctl_evstat_key& k);

  uint32_t pid() const { return pid_; }
  Store& store() { return *s_; }

 private:
  Client(std::unique_ptr<Store> owned);
  int find_evp(uint64_t id) const;
  int find_cc(uint64_t id) const;

  std::unique_ptr<Store> owned_;
  Store* s_;
  uint32_t pid_;
  char comm_[16] = {};
  mutable std::map<uint64_t, int> evp_slot_, cc_slot_;
  friend class EngineSync;
};

class EngineSync {
 public:
  struct Options {
    uint32_t dev = 0;                           // device index within the process
    core::Time stats_interval = 1'000'000'000;  // ns between report publications
    // After applying a controller change the reports are published at once
    // (the counters as they stood when the change took effect), at most
    // once per this many ns; changes closer together are published together.
    core::Time change_publish_gap = 20'000'000;
  };
  EngineSync(Client& c, core::Engine& e, Options o);
  EngineSync(Client& c, core::Engine& e) : EngineSync(c, e, Options{}) {}
  ~EngineSync();

  // Installs EV / CC profile `id` in the engine before a QP references it
  // (modify_qp to INIT). EINVAL if it is unknown or not ONLINE.
  Status use_ev_profile(uint64_t id);
  Status use_cc_profile(uint64_t id);

  // Applies controller changes (one load when there are none) and publishes
  // reports every stats_interval, and right after a change was applied
  // (change_publish_gap). Call from the engine's thread.
  void poll(core::Time now);
  // EV events the application polled from the engine (Engine::poll_ev_events).
  void forward(std::span<const core::EvEvent> evs);
  // Publishes the reports now.
  Status publish(core::Time now);
  // Withdraws every report of this engine (destroying the device).
  void withdraw();

  struct Counters {
    uint64_t syncs = 0, reinstalls = 0, denied_changes = 0, port_changes = 0;
    uint64_t events_pushed = 0, events_dropped = 0, publish_errors = 0, publications = 0;
  };
  const Counters& counters() const { return ctr_; }

 private:
  void sync(core::Time now);

  Client& c_;
  core::Engine& e_;
  Options o_;
  uint64_t gen_ = ~uint64_t(0);
  uint32_t down_ = 0;
  core::Time next_publish_ = 0;
  core::Time last_change_publish_ = 0;
  bool change_pending_ = false;  // a change applied, its publication not yet made
  struct Installed {
    uint64_t changes = 0;
    std::map<std::pair<uint32_t, uint8_t>, bool> denied;  // (wire, port) -> denied
  };
  std::map<uint64_t, Installed> ev_;
  std::map<uint64_t, uint64_t> cc_;  // id -> changes
  std::set<uint32_t> published_qps_;
  std::set<std::tuple<uint64_t, uint32_t, uint8_t>> published_evs_;
  Counters ctr_;
};

}  // namespace mrc::ctl
