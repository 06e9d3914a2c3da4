// Handlers of the EVs of an EV profile: ev.show, and ev.set, ev.populate,
// ev.replace (each an EV operation, EV_OP, on the profile).
#include <algorithm>
#include <cstring>

#include "mrcd/ops.hpp"

namespace mrc::mrcd {

using namespace mrc::ctl;

namespace {

std::string evp_obj(uint64_t x) { return "ev-profile " + std::to_string(x); }

// The EV operation's entries from the request's arguments, and its op.
struct EvChange {
  uint32_t op = kEvOpReplaceEv;
  std::vector<EvOpEntry> entries;
};
using ChangeArgs = Result<EvChange> (*)(Request& r, uint64_t profile);

// ev.set {"state", "evs" and/or "port"}: MODIFY_EV_STATE of the EVs given
// and of every EV of the plane.
Result<EvChange> set_args(Request& r, uint64_t pid) {
  auto st = state_arg(r.args, "state", 0);
  if (!st) return std::move(st).error();
  if (!*st) return Error(EINVAL, r.op + " needs \"state\"");
  auto evs = evs_from(r.args, "evs");
  if (!evs) return std::move(evs).error();
  auto port = proto::get_u64(r.args, "port", 255);
  if (!port) return std::move(port).error();
  std::vector<Ev> list = *evs;
  if (*port) {
    // Every EV of the plane (its distinct values).
    for (const auto& e : r.ctl.ev_entries(pid)) {
      if (!e.populated || e.port != **port) continue;
      Ev v;
      std::memcpy(v.val.data(), e.val, codec::kEvMaxBytes);
      v.port = e.port;
      if (std::find(list.begin(), list.end(), v) == list.end()) list.push_back(v);
    }
    if (list.empty()) return Error(ENOENT, "no EV on port " + std::to_string(**port));
  }
  if (list.empty()) return Error(EINVAL, "no EVs given (\"evs\" or \"port\")");
  EvChange c;
  c.op = kEvOpModifyEvState;
  for (const Ev& v : list) c.entries.push_back({v, {}, *st, 0});
  return c;
}

// ev.populate {"evs", "state"}: REPLACE_EV of UNPOPULATED slots.
Result<EvChange> populate_args(Request& r, uint64_t) {
  auto st = state_arg(r.args, "state", kEvGood);
  if (!st) return std::move(st).error();
  auto evs = evs_from(r.args, "evs");
  if (!evs) return std::move(evs).error();
  if (evs->empty()) return Error(EINVAL, "no EVs given");
  EvChange c;
  for (const Ev& v : *evs) c.entries.push_back({Ev::unpopulated_ev(), v, *st, 0});
  return c;
}

// ev.replace {"entries": [{"ev", "new", "state", "all_copies"}]}: REPLACE_EV.
Result<EvChange> replace_args(Request& r, uint64_t) {
  if (!r.args.contains("entries") || !r.args["entries"].is_array())
    return Error(EINVAL, r.op + " needs \"entries\"");
  EvChange c;
  for (const json& e : r.args["entries"]) {
    auto v = proto::ev_from_json(e.value("ev", json()));
    if (!v) return std::move(v).error();
    auto n = proto::ev_from_json(e.value("new", json()));
    if (!n) return std::move(n).error();
    auto st = state_arg(e, "state", kEvGood);
    if (!st) return std::move(st).error();
    auto all = proto::get_bool(e, "all_copies");
    if (!all) return std::move(all).error();
    c.entries.push_back({*v, *n, *st, all->value_or(false) ? uint32_t(kEvOpFAllCopies) : 0u});
  }
  return c;
}

// What ev.set, ev.populate and ev.replace share: the profile, the entries
// (from `args`), one modify with EV_OP and its timing.
json ev_change(Request& r, ChangeArgs args) {
  auto pid = proto::get_u64(r.args, "profile");
  if (!pid || !*pid)
    return r.fail("ev", pid ? Error(EINVAL, r.op + " needs \"profile\"") : pid.error());
  const std::string obj = evp_obj(**pid);
  auto c = args(r, **pid);
  if (!c) return r.fail(obj, c.error());
  EvProfileAttr a;
  a.ev_op.op = c->op;
  a.ev_op.entries = c->entries;
  a.ev_op.entry_count = int(c->entries.size());
  // When the change was committed (CLOCK_MONOTONIC): time_ns just before
  // the call, done_ns after it, so no engine can have applied the change
  // before time_ns; and the generation applications see from then on.
  // What a measurement of the data path's reaction starts from.
  const Time t_call = mono_ns();
  Status s = r.ctl.modify_ev_profile(**pid, a, kEvpAttrEvOp);
  json result = {{"requested", c->entries.size()},
                 {"time_ns", t_call},
                 {"done_ns", mono_ns()},
                 {"gen", read_gen(r.ctl.store().dev())}};
  if (const mrc_ctl_evp* p = r.ctl.ev_record(**pid))
    result["profile"] = proto::evp_json(r.ctl, *p, false);
  if (!s) return r.fail(obj, s.error(), result);
  return r.ok(result);
}

}  // namespace

json op_ev_show(Request& r) {
  auto pid = proto::get_u64(r.args, "profile");
  if (!pid || !*pid)
    return r.fail("ev", pid ? Error(EINVAL, r.op + " needs \"profile\"") : pid.error());
  const mrc_ctl_evp* p = r.ctl.ev_record(**pid);
  if (!p) return r.fail(evp_obj(**pid), Error(EINVAL, "does not exist"));
  auto filt = proto::get_str(r.args, "state");
  if (!filt) return r.fail(evp_obj(**pid), filt.error());
  auto port = proto::get_u64(r.args, "port", 255);
  if (!port) return r.fail(evp_obj(**pid), port.error());
  json a = json::array();
  auto arr = r.ctl.ev_entries(**pid);
  // What the applications using the profile published about each EV.
  std::map<proto::EvCounterKey, proto::EvCounterSum> sums;
  if (auto st = r.ctl.store().list_evstats()) sums = proto::sum_evstats(*st);
  const Time now = mono_ns();
  for (size_t i = 0; i < arr.size(); i++) {
    json e = proto::ev_entry_json(i, arr[i]);
    if (*filt && e["state"] != **filt) continue;
    if (*port && arr[i].port != **port) continue;
    auto it = arr[i].populated ? sums.find({**pid, arr[i].wire, uint8_t(arr[i].port)}) : sums.end();
    e["counters"] = it == sums.end() ? json(nullptr) : proto::ev_counters_json(it->second, now);
    a.push_back(e);
  }
  return r.ok(json{{"profile", **pid}, {"mode", ev_mode_name(p->mode)}, {"evs", a}});
}

json op_ev_set(Request& r) { return ev_change(r, set_args); }
json op_ev_populate(Request& r) { return ev_change(r, populate_args); }
json op_ev_replace(Request& r) { return ev_change(r, replace_args); }

}  // namespace mrc::mrcd
