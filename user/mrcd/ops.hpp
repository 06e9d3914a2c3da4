// mrcd's request handling: one handler per operation of the control protocol
// (the names are in ctl/ops.hpp), grouped by object in ops_<object>.cc, and
// the table in ops.cc that maps each name to its handler and says whether it
// needs CAP_NET_ADMIN. Server::dispatch checks the capability, looks the
// operation up and runs the handler with the request (Documentation/
// controller.md, "Request handling").
//
// A handler returns the response line (ok or error, built with Request::ok
// and Request::fail); a handler whose answer comes later (probe) sets
// `pending` and the server answers when the work is done.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ctl/controller.hpp"
#include "ctl/ops.hpp"
#include "ctl/proto.hpp"
#include "mrc/result.hpp"
#include "mrcd/server.hpp"

namespace mrc::mrcd {

using ctl::proto::json;

json ok_rsp(const json& id, json result);
json err_rsp(const json& id, const std::string& object, const Error& e, json result = nullptr);

// One request as a handler sees it.
struct Request {
  ctl::Controller& ctl;
  const Server::Deps& deps;
  Conn* conn;                                // nullptr: no connection (tests)
  std::map<uint64_t, PendingProbe>* probes;  // answers that come later
  const PeerCred& cred;
  const std::string& op;
  const json& args;  // an object (empty when the request has none)
  const json& id;
  bool pending = false;  // set by a handler that answers later

  json ok(json result) const { return ok_rsp(id, std::move(result)); }
  json fail(const std::string& object, const Error& e, json result = nullptr) const {
    return err_rsp(id, object, e, std::move(result));
  }
};

using Handler = json (*)(Request&);

struct OpSpec {
  Handler run = nullptr;
  bool modifies = false;  // needs CAP_NET_ADMIN
};

// The operation's entry of the table, nullptr for an unknown operation.
const OpSpec* find_op(std::string_view op);

// ----- argument helpers shared by the handlers (ops.cc)
// "id" that must be present ("<op> needs \"id\"").
Result<uint64_t> need_id(const json& args, const std::string& op);
// An array of EVs under `key` (absent: empty).
Result<std::vector<ctl::Ev>> evs_from(const json& args, const char* key);
// An EV state name under `key` (absent: `def`).
Result<uint32_t> state_arg(const json& args, const char* key, uint32_t def);
// A profile state name under "state": sets *state and `bit` in *mask.
Status profile_state_arg(const json& args, uint32_t* state, uint32_t* mask, uint32_t bit);

// ----- the handlers, by object
// ops_dev.cc: the daemon, the device and its ports
json op_ping(Request& r);
json op_dev_show(Request& r);
json op_port_show(Request& r);
json op_port_set(Request& r);
// ops_ev_fmt.cc
json op_ev_fmt_show(Request& r);
json op_ev_fmt_modify(Request& r);
json op_ev_fmt_delete(Request& r);
// ops_ev_profile.cc
json op_ev_profile_show(Request& r);
json op_ev_profile_modify(Request& r);
json op_ev_profile_delete(Request& r);
// ops_ev.cc: the EVs of an EV profile
json op_ev_show(Request& r);
json op_ev_set(Request& r);
json op_ev_populate(Request& r);
json op_ev_replace(Request& r);
// ops_cc_profile.cc
json op_cc_profile_show(Request& r);
json op_cc_profile_modify(Request& r);
json op_cc_profile_delete(Request& r);
// ops_probe.cc: endpoint operations
json op_probe(Request& r);
// ops_report.cc: reports and observability
json op_qp_show(Request& r);
json op_stats(Request& r);
json op_policy_show(Request& r);
json op_monitor(Request& r);

}  // namespace mrc::mrcd
