// What the show and delete operations of the three profile kinds (ev_fmt,
// ev_profile, cc_profile) share: one implementation over a description of
// the kind.
#pragma once

#include <optional>
#include <vector>

#include "mrcd/ops.hpp"

namespace mrc::mrcd {

struct ProfileOps {
  const char* object;     // "ev-profile": errors name "ev-profile 5"
  ctl::ProfileKind kind;  // for Controller::erase_profile
  std::vector<uint64_t> (ctl::Controller::*ids)() const;
  // The profile's JSON and state, nullopt when it does not exist.
  std::optional<json> (*to_json)(const ctl::Controller& c, uint64_t id, bool with_evs);
  std::optional<uint32_t> (*cur_state)(const ctl::Controller& c, uint64_t id);
  // One state transition (modify with the STATE bit only).
  Status (*set_state)(ctl::Controller& c, uint64_t id, uint32_t state);
  bool evs_arg = false;  // show takes "evs" (the EV array with each profile)
};

// OBJECT.show: {"id"} one profile, else all of them.
json show_profiles(Request& r, const ProfileOps& k);
// OBJECT.delete: {"id"}: walks the profile down to INIT (ONLINE -> OFFLINE ->
// INIT, the transitions the state machine requires) and erases it; the first
// error stops it.
json delete_profile(Request& r, const ProfileOps& k);

// "ev-profile 5"
std::string profile_object(const ProfileOps& k, uint64_t id);

}  // namespace mrc::mrcd
