#include "mrcd/ops_profile.hpp"

namespace mrc::mrcd {

using namespace mrc::ctl;

std::string profile_object(const ProfileOps& k, uint64_t id) {
  return std::string(k.object) + " " + std::to_string(id);
}

json show_profiles(Request& r, const ProfileOps& k) {
  auto i = proto::get_u64(r.args, "id");
  if (!i) return r.fail(k.object, i.error());
  bool with_evs = false;
  if (k.evs_arg) {
    auto evs = proto::get_bool(r.args, "evs");
    if (!evs) return r.fail(k.object, evs.error());
    with_evs = evs->value_or(false);
  }
  if (*i) {
    auto j = k.to_json(r.ctl, **i, with_evs);
    if (!j) return r.fail(profile_object(k, **i), Error(EINVAL, "does not exist"));
    return r.ok(std::move(*j));
  }
  json a = json::array();
  for (uint64_t x : (r.ctl.*k.ids)()) a.push_back(*k.to_json(r.ctl, x, with_evs));
  return r.ok(a);
}

json delete_profile(Request& r, const ProfileOps& k) {
  auto id = need_id(r.args, r.op);
  if (!id) return r.fail(k.object, id.error());
  const std::string obj = profile_object(k, *id);
  const std::optional<uint32_t> cur = k.cur_state(r.ctl, *id);
  if (!cur) return r.fail(obj, Error(EINVAL, "does not exist"));
  Status s = ok_status();
  if (*cur != kProfileInit) {
    if (*cur == kProfileOnline) s = k.set_state(r.ctl, *id, kProfileOffline);
    if (s) s = k.set_state(r.ctl, *id, kProfileInit);
  }
  if (s) s = r.ctl.erase_profile(k.kind, *id);
  if (!s) return r.fail(obj, s.error());
  return r.ok(json{{"id", *id}, {"deleted", true}});
}

}  // namespace mrc::mrcd
