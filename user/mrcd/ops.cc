// The handler table of mrcd's control socket and the argument helpers the
// handlers share. To add an operation: its name in ctl/ops.hpp, a handler in
// the ops_<object>.cc of its object (declared in ops.hpp), a row below, and
// its schema in Documentation/observability.md.
#include "mrcd/ops.hpp"

namespace mrc::mrcd {

using namespace mrc::ctl;
namespace op = ctl::proto::op;

namespace {

constexpr bool kModifies = true;  // needs CAP_NET_ADMIN
constexpr bool kReads = false;    // open to whoever may connect

const std::map<std::string_view, OpSpec>& table() {
  static const std::map<std::string_view, OpSpec> t = {
      {op::kPing, {op_ping, kReads}},
      {op::kDevShow, {op_dev_show, kReads}},
      {op::kPortShow, {op_port_show, kReads}},
      {op::kPortSet, {op_port_set, kModifies}},
      {op::kEvFmtShow, {op_ev_fmt_show, kReads}},
      {op::kEvFmtModify, {op_ev_fmt_modify, kModifies}},
      {op::kEvFmtDelete, {op_ev_fmt_delete, kModifies}},
      {op::kEvProfileShow, {op_ev_profile_show, kReads}},
      {op::kEvProfileModify, {op_ev_profile_modify, kModifies}},
      {op::kEvProfileDelete, {op_ev_profile_delete, kModifies}},
      {op::kEvShow, {op_ev_show, kReads}},
      {op::kEvSet, {op_ev_set, kModifies}},
      {op::kEvPopulate, {op_ev_populate, kModifies}},
      {op::kEvReplace, {op_ev_replace, kModifies}},
      {op::kCcProfileShow, {op_cc_profile_show, kReads}},
      {op::kCcProfileModify, {op_cc_profile_modify, kModifies}},
      {op::kCcProfileDelete, {op_cc_profile_delete, kModifies}},
      {op::kProbe, {op_probe, kModifies}},  // sends frames
      {op::kQpShow, {op_qp_show, kReads}},
      {op::kStats, {op_stats, kReads}},
      {op::kPolicyShow, {op_policy_show, kReads}},
      {op::kMonitor, {op_monitor, kReads}},
  };
  return t;
}

}  // namespace

const OpSpec* find_op(std::string_view name) {
  auto it = table().find(name);
  return it == table().end() ? nullptr : &it->second;
}

bool op_modifies(const std::string& name) {
  const OpSpec* s = find_op(name);
  return s && s->modifies;
}

json ok_rsp(const json& id, json result) {
  return json{{"id", id}, {"ok", true}, {"result", std::move(result)}};
}

json err_rsp(const json& id, const std::string& object, const Error& e, json result) {
  return json{{"id", id},
              {"ok", false},
              {"error", proto::error_json(e, object)},
              {"result", std::move(result)}};
}

Result<uint64_t> need_id(const json& args, const std::string& op) {
  auto id = proto::get_u64(args, "id");
  if (!id) return std::move(id).error();
  if (!*id) return Error(EINVAL, op + " needs \"id\"");
  return **id;
}

Result<std::vector<Ev>> evs_from(const json& args, const char* key) {
  std::vector<Ev> out;
  if (!args.contains(key)) return out;
  const json& a = args[key];
  if (!a.is_array()) return Error(EINVAL, std::string(key) + " must be an array of EVs");
  for (const json& e : a) {
    auto v = proto::ev_from_json(e);
    if (!v) return std::move(v).error();
    out.push_back(*v);
  }
  return out;
}

Result<uint32_t> state_arg(const json& args, const char* key, uint32_t def) {
  auto s = proto::get_str(args, key);
  if (!s) return std::move(s).error();
  if (!*s) return def;
  return proto::ev_state_from(**s);
}

Status profile_state_arg(const json& args, uint32_t* state, uint32_t* mask, uint32_t bit) {
  auto s = proto::get_str(args, "state");
  if (!s) return std::move(s).error();
  if (!*s) return ok_status();
  auto v = proto::profile_state_from(**s);
  if (!v) return std::move(v).error();
  *state = *v;
  *mask |= bit;
  return ok_status();
}

}  // namespace mrc::mrcd
