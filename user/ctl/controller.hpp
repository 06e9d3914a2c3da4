// The controller model: the semantics of OCP mrc_ctl.h over a Store.
//
//   device     query_device (limits, algorithms, ports, optional features)
//   ports      query_port / modify_port (administrative state)
//   profiles   modify/query of EV format, EV and CC profiles with the state
//              machine INIT -> OFFLINE -> ONLINE -> OFFLINE -> INIT, the
//              per-state attribute rules, EV operations with per-entry
//              success, EBUSY for profiles in use
//   events     EV event CQs fed from the data path's reports (profile-level
//              EV state: ASSUMED_BAD while at least one QP holds it so) and
//              from controller changes, with exact drop counts
//
// Calls return mrc::Status with the errno of mrc_ctl.h and a message that
// names the object and the rule. Documentation/controller.md lists every rule
// and the order in which a modify call applies its parts:
//   1. the mask is checked (unknown bits, CUR_STATE, EV_OP with EV_FIELDS_OP
//      -> EINVAL; anything changing an ONLINE profile that active QPs use ->
//      EBUSY; attributes not modifiable in the current state -> EINVAL);
//   2. attributes are staged and validated (nothing is applied on error);
//   3. the EV operation runs entry by entry on the staged array; on the first
//      failing entry the staged attributes and the entries before it are
//      committed and the error returned (no state transition);
//   4. the state transition is validated; on error nothing is committed;
//   5. everything is committed and mrc_ctl_dev.gen is bumped.
#pragma once

#include <array>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "ctl/events.hpp"
#include "ctl/store.hpp"
#include "ctl/types.hpp"
#include "mrc/result.hpp"

namespace mrc::ctl {

struct Limits {
  uint32_t ev_max_width = 32;  // STEV: 32 bits; UDP formats are further limited to 16
  uint32_t ev_count_align = 1;
  uint32_t ev_op_max_entries = MRC_CTL_EV_MAX_PER_PROFILE;
  uint32_t auto_ev_count = 256;  // EVs per QP of AUTO profiles (engine default)
  uint32_t max_cq_entries = 1u << 20;
};

// The three kinds of profile records (erase_profile).
enum class ProfileKind { kEvFmt, kEv, kCc };

// A configured plane port (mrcd's configuration).
struct PortInfo {
  uint8_t port = 0;
  std::string ifname;
  uint32_t ifindex = 0;
  bool link_up = true;
  uint32_t xdp_mode = MRC_CTL_XDP_NONE;
  uint32_t queues = 1;
};

class Controller {
 public:
  struct Hooks {
    // A port's administrative state changed (mrcd mirrors it into mrc_ports).
    std::function<void(uint8_t port, bool enabled)> port_admin;
    // Every EV event delivered to the CQs (it matched the profile's mask).
    std::function<void(const EvEvent&)> event;
    // Every profile-level EV state change, whatever the event mask (policy).
    std::function<void(const EvEvent&)> transition;
  };
  using PidAlive = std::function<bool(uint32_t pid)>;

  explicit Controller(Store& s, Limits lim = {});

  void set_hooks(Hooks h) { hooks_ = std::move(h); }
  void set_pid_alive(PidAlive f) { pid_alive_ = std::move(f); }
  const Limits& limits() const { return lim_; }
  Store& store() { return s_; }
  const Store& store() const { return s_; }

  // Startup: initialises a fresh store, repairs records a crashed writer left
  // odd (mid-write), rebuilds the EV hold table. True if state was found.
  bool open();

  // mrcd: the configured ports (others keep their admin state, unconfigured).
  Status configure_ports(std::span<const PortInfo> ports);
  Status set_link(uint8_t port, bool up);
  Status set_xdp_mode(uint8_t port, uint32_t mode);

  // --- mrc_ctl.h -----------------------------------------------------------
  DeviceAttr query_device() const;
  Status query_port(uint8_t port_num, PortAttr* attr, uint32_t attr_mask) const;
  Status modify_port(uint8_t port_num, const PortAttr& attr, uint32_t attr_mask);

  Status modify_ev_fmt_profile(uint64_t id, EvFmtProfileAttr& attr, uint32_t attr_mask);
  Status query_ev_fmt_profile(uint64_t id, EvFmtProfileAttr& attr, uint32_t attr_mask) const;

  Status modify_ev_profile(uint64_t id, EvProfileAttr& attr, uint32_t attr_mask);
  Status query_ev_profile(uint64_t id, EvProfileAttr& attr, uint32_t attr_mask) const;

  Status modify_cc_profile(uint64_t id, CcProfileAttr& attr, uint32_t attr_mask);
  Status query_cc_profile(uint64_t id, CcProfileAttr& attr, uint32_t attr_mask) const;

  // Removes a profile record that is INIT (mrcctl ... delete walks it down
  // to INIT first). A format still named by an EV profile is EBUSY.
  Status erase_profile(ProfileKind kind, uint64_t id);

  // mrc_ctl_create_ev_event_cq: cqe 1..max_cq_entries.
  Result<std::shared_ptr<EvEventCq>> create_ev_event_cq(int cqe);

  // --- data path --------------------------------------------------------------
  // Pops the EV reports applications queued, updates profile-level EV states
  // and produces events. `seen` (optional) receives the raw reports.
  Result<size_t> ingest_reports(std::vector<mrc_ctl_ev_report>* seen = nullptr);
  // Forgets QP reports, EV counters and EV holds of processes that are gone.
  size_t reap_dead();

  // --- listing (mrcctl, metrics, tests) --------------------------------------
  std::vector<uint64_t> fmt_profile_ids() const;
  std::vector<uint64_t> ev_profile_ids() const;
  std::vector<uint64_t> cc_profile_ids() const;
  const mrc_ctl_fmt* fmt_record(uint64_t id) const;
  const mrc_ctl_evp* ev_record(uint64_t id) const;
  const mrc_ctl_cc* cc_record(uint64_t id) const;
  // The EV array of a profile (empty for AUTO / INIT).
  std::span<const mrc_ctl_ev_entry> ev_entries(uint64_t id) const;
  // Live QPs (pid alive, state not RESET) that use the profile.
  uint32_t ev_profile_users(uint64_t id) const;
  uint32_t cc_profile_users(uint64_t id) const;
  // EVs currently held ASSUMED_BAD by some QP: (profile, wire, port) -> holders.
  struct HoldKey {
    uint64_t profile = 0;
    uint32_t wire = 0;
    uint8_t port = 0;
    auto operator<=>(const HoldKey&) const = default;
  };
  size_t holders(const HoldKey& k) const;
  uint32_t ev_pool_free() const;

  struct Counters {
    uint64_t reports = 0, upstream_drops = 0, unknown_profile = 0;
    uint64_t events = 0, modifies = 0, modify_errors = 0;
    // EV state changes reported by the data path, by core::EvEventReason
    // (e.g. relapse: a path that passes probes but not data).
    std::array<uint64_t, 32> reports_by_reason{};
  };
  const Counters& counters() const { return ctr_; }

 private:
  struct Holder {
    uint32_t pid = 0, dev = 0, qpn = 0;
    auto operator<=>(const Holder&) const = default;
  };

  // modify_ev_profile, by the stages the header comment numbers
  // (controller.cc).
  struct EvpModify;
  Status evp_modify(EvpModify& m);
  Status evp_check_mask(EvpModify& m);
  Status evp_load(EvpModify& m);
  Status evp_check_state(EvpModify& m);   // 1.
  Status evp_stage_attrs(EvpModify& m);   // 2.
  Status evp_stage_fields(EvpModify& m);  // 2.
  Status evp_stage_array(EvpModify& m);   // 2.
  Status evp_rebuild(EvpModify& m);
  Status evp_run_ev_op(EvpModify& m);  // 3.
  Status evp_entry(EvpModify& m, EvOpEntry& en);
  Status evp_entry_state(EvpModify& m, const EvOpEntry& en);
  Status evp_entry_replace(EvpModify& m, const EvOpEntry& en);
  Status evp_transition(EvpModify& m);    // 4.
  Status evp_going_online(EvpModify& m);  // 4.
  Status evp_commit(EvpModify& m);        // 5.

  int fmt_slot(uint64_t id) const;
  int evp_slot(uint64_t id) const;
  int cc_slot(uint64_t id) const;
  bool port_configured(uint8_t port) const;
  uint32_t users(bool ev, uint64_t id) const;
  void recompute_port_masks();
  void commit_gen();
  void emit(EvEvent e);
  Result<uint32_t> pool_alloc(uint32_t count, int except_slot) const;
  // Sets profile-level state of (profile, wire, port) from the data path.
  void data_path_state(uint64_t profile, uint32_t wire, uint8_t port, uint32_t state,
                       const char* reason, uint32_t pid, uint32_t qpn, uint64_t time_ns);

  Store& s_;
  Limits lim_;
  Hooks hooks_;
  PidAlive pid_alive_;
  std::vector<std::weak_ptr<EvEventCq>> cqs_;
  std::map<HoldKey, std::set<Holder>> holds_;
  uint64_t dropped_seen_ = 0;
  Counters ctr_;
};

// Default liveness test of a reporting process (kill(pid, 0)).
bool pid_alive(uint32_t pid);

}  // namespace mrc::ctl
