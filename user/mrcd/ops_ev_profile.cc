// Handlers of EV profiles: ev_profile.show, ev_profile.modify,
// ev_profile.delete. (The EVs of a profile: ops_ev.cc.)
#include "mrcd/ops_profile.hpp"

namespace mrc::mrcd {

using namespace mrc::ctl;

namespace {

const ProfileOps kEvProfile = {
    "ev-profile",
    ProfileKind::kEv,
    &Controller::ev_profile_ids,
    [](const Controller& c, uint64_t id, bool with_evs) -> std::optional<json> {
      const mrc_ctl_evp* p = c.ev_record(id);
      if (!p) return std::nullopt;
      return proto::evp_json(c, *p, with_evs);
    },
    [](const Controller& c, uint64_t id) -> std::optional<uint32_t> {
      const mrc_ctl_evp* p = c.ev_record(id);
      if (!p) return std::nullopt;
      return p->cur_state;
    },
    [](Controller& c, uint64_t id, uint32_t state) {
      EvProfileAttr a;
      a.profile_state = state;
      return c.modify_ev_profile(id, a, kEvpAttrState);
    },
    true,
};

// The attributes of one ev_profile.modify and the storage its spans point to
// (so it stays where it was made).
struct EvpModify {
  EvProfileAttr a;
  uint32_t mask = 0;
  std::vector<codec::EvField> fields;   // "fields"
  std::vector<codec::EvField> qfields;  // "query_fields"
  std::vector<EvOpEntry> entries;       // "ev_op"
};

// A number under `key` (at most `max`) into *dst, with `bit` in the mask.
template <class T>
Status num_arg(const json& args, const char* key, uint64_t max, T* dst, uint32_t* mask,
               uint32_t bit) {
  auto v = proto::get_u64(args, key, max);
  if (!v) return std::move(v).error();
  if (*v) {
    *dst = T(**v);
    *mask |= bit;
  }
  return ok_status();
}

// "event_mask": an array of state names or a number.
Status event_mask_arg(const json& m, EvpModify& e) {
  uint32_t bits = 0;
  if (m.is_number_integer() && m.get<int64_t>() >= 0) {
    bits = uint32_t(m.get<int64_t>());
  } else if (m.is_array()) {
    for (const json& x : m) {
      if (!x.is_string()) return Error(EINVAL, "event_mask names are strings");
      auto v = proto::ev_state_from(x.get<std::string>());
      if (!v) return std::move(v).error();
      bits |= *v;
    }
  } else {
    return Error(EINVAL, "event_mask is an array of state names or a number");
  }
  e.a.ev_event_mask = int(bits);
  e.mask |= kEvpAttrEventMask;
  return ok_status();
}

// state, mode, fmt, count, min_active, event_mask.
Status attr_args(const json& args, EvpModify& e) {
  MRC_TRY(profile_state_arg(args, &e.a.profile_state, &e.mask, kEvpAttrState));
  if (auto s = proto::get_str(args, "mode"); !s) {
    return std::move(s).error();
  } else if (*s) {
    auto v = proto::ev_mode_from(**s);
    if (!v) return std::move(v).error();
    e.a.ev_mode = *v;
    e.mask |= kEvpAttrMode;
  }
  MRC_TRY(num_arg(args, "fmt", UINT64_MAX, &e.a.ev_fmt_profile_id, &e.mask, kEvpAttrFmtId));
  MRC_TRY(num_arg(args, "count", UINT32_MAX, &e.a.ev_count, &e.mask, kEvpAttrCount));
  MRC_TRY(num_arg(args, "min_active", UINT32_MAX, &e.a.ev_min_active, &e.mask, kEvpAttrMinActive));
  if (args.contains("event_mask")) MRC_TRY(event_mask_arg(args["event_mask"], e));
  return ok_status();
}

// "fields" (MODIFY_FIELDS) and "query_fields" (QUERY_FIELDS with that many slots).
Status fields_args(const json& args, EvpModify& e) {
  if (args.contains("fields")) {
    if (!args["fields"].is_array()) return Error(EINVAL, "\"fields\" must be an array");
    for (const json& f : args["fields"]) {
      auto v = proto::field_from_json(f);
      if (!v) return std::move(v).error();
      e.fields.push_back(*v);
    }
    e.a.ev_fields_op.op = kEvFieldsOpModifyFields;
    e.a.ev_fields_op.fields = e.fields;
    e.a.ev_fields_op.field_count = int(e.fields.size());
    e.mask |= kEvpAttrEvFieldsOp;
  }
  auto q = proto::get_u64(args, "query_fields", 4096);
  if (!q) return std::move(q).error();
  if (*q) {
    e.qfields.resize(**q);
    e.a.ev_fields_op.op = kEvFieldsOpQueryFields;
    e.a.ev_fields_op.fields = e.qfields;
    e.a.ev_fields_op.field_count = int(**q);
    e.mask |= kEvpAttrEvFieldsOp;
  }
  return ok_status();
}

// One entry of "ev_op": {"ev", "new", "state", "all_copies"}.
Result<EvOpEntry> ev_op_entry(const json& e) {
  EvOpEntry en;
  if (e.contains("ev")) {
    if (e["ev"].is_null()) {
      en.ev = Ev::unpopulated_ev();
    } else {
      auto v = proto::ev_from_json(e["ev"]);
      if (!v) return std::move(v).error();
      en.ev = *v;
    }
  }
  if (e.contains("new")) {
    auto v = proto::ev_from_json(e["new"]);
    if (!v) return std::move(v).error();
    en.ev_new = *v;
  }
  auto st = state_arg(e, "state", 0);
  if (!st) return std::move(st).error();
  en.state = *st;
  auto all = proto::get_bool(e, "all_copies");
  if (!all) return std::move(all).error();
  en.flags = all->value_or(false) ? uint32_t(kEvOpFAllCopies) : 0u;
  return en;
}

// "ev_op": {"op", "entries", "entry_count"}.
Status ev_op_arg(const json& o, EvpModify& e) {
  if (!o.is_object()) return Error(EINVAL, "\"ev_op\" must be an object");
  auto opn = proto::get_str(o, "op");
  if (!opn || !*opn) return Error(EINVAL, "ev_op needs \"op\"");
  static const std::map<std::string, uint32_t> ops = {{"replace", kEvOpReplaceEv},
                                                      {"modify_state", kEvOpModifyEvState},
                                                      {"query_state", kEvOpQueryEvState},
                                                      {"query_array", kEvOpQueryEvArray}};
  auto oi = ops.find(**opn);
  if (oi == ops.end())
    return Error(EINVAL, "ev_op.op \"" + **opn +
                             "\" is not replace, modify_state, query_state or query_array");
  e.a.ev_op.op = oi->second;
  if (o.contains("entries")) {
    if (!o["entries"].is_array()) return Error(EINVAL, "ev_op.entries must be an array");
    for (const json& x : o["entries"]) {
      auto en = ev_op_entry(x);
      if (!en) return std::move(en).error();
      e.entries.push_back(*en);
    }
  }
  auto cnt = proto::get_u64(o, "entry_count", 1u << 20);
  if (!cnt) return std::move(cnt).error();
  if (*cnt && **cnt > e.entries.size()) e.entries.resize(**cnt);
  e.a.ev_op.entries = e.entries;
  e.a.ev_op.entry_count = int(cnt->value_or(e.entries.size()));
  e.mask |= kEvpAttrEvOp;
  return ok_status();
}

// The result of a modify: the profile, the EV operation's entries, the
// fields' count, and on E2BIG the number of entries or fields required.
json modify_result(const Controller& c, uint64_t pid, const EvpModify& e, const Status& s) {
  json result = json::object();
  if (const mrc_ctl_evp* p = c.ev_record(pid)) result["profile"] = proto::evp_json(c, *p, false);
  if (e.mask & kEvpAttrEvOp) {
    json out = json::array();
    size_t n = std::min<size_t>(size_t(std::max(e.a.ev_op.entry_count, 0)), e.entries.size());
    for (size_t i = 0; i < n; i++) {
      json j = {
          {"ev", e.entries[i].ev.unpopulated() ? json(nullptr) : proto::ev_json(e.entries[i].ev)},
          {"state", ev_state_name(e.entries[i].state)}};
      out.push_back(j);
    }
    result["entries"] = out;
    result["entry_count"] = e.a.ev_op.entry_count;
  }
  if (!e.qfields.empty() ||
      (e.mask & kEvpAttrEvFieldsOp && e.a.ev_fields_op.op == kEvFieldsOpQueryFields))
    result["field_count"] = e.a.ev_fields_op.field_count;
  if (!s && s.error().code == E2BIG)
    result["required"] =
        (e.mask & kEvpAttrEvOp) ? e.a.ev_op.entry_count : e.a.ev_fields_op.field_count;
  return result;
}

}  // namespace

json op_ev_profile_show(Request& r) { return show_profiles(r, kEvProfile); }
json op_ev_profile_delete(Request& r) { return delete_profile(r, kEvProfile); }

json op_ev_profile_modify(Request& r) {
  auto pid = need_id(r.args, r.op);
  if (!pid) return r.fail(kEvProfile.object, pid.error());
  const std::string obj = profile_object(kEvProfile, *pid);
  EvpModify e;
  if (Status s = attr_args(r.args, e); !s) return r.fail(obj, s.error());
  if (Status s = fields_args(r.args, e); !s) return r.fail(obj, s.error());
  if (r.args.contains("ev_op"))
    if (Status s = ev_op_arg(r.args["ev_op"], e); !s) return r.fail(obj, s.error());
  Status s = r.ctl.modify_ev_profile(*pid, e.a, e.mask);
  json result = modify_result(r.ctl, *pid, e, s);
  if (!s) return r.fail(obj, s.error(), result);
  return r.ok(result);
}

}  // namespace mrc::mrcd
