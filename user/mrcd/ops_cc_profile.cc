// Handlers of CC profiles: cc_profile.show, cc_profile.modify,
// cc_profile.delete.
#include <set>

#include "mrcd/ops_profile.hpp"

namespace mrc::mrcd {

using namespace mrc::ctl;

namespace {

const ProfileOps kCcProfile = {
    "cc-profile",
    ProfileKind::kCc,
    &Controller::cc_profile_ids,
    [](const Controller& c, uint64_t id, bool) -> std::optional<json> {
      const mrc_ctl_cc* p = c.cc_record(id);
      if (!p) return std::nullopt;
      return proto::cc_json(c, *p);
    },
    [](const Controller& c, uint64_t id) -> std::optional<uint32_t> {
      const mrc_ctl_cc* p = c.cc_record(id);
      if (!p) return std::nullopt;
      return p->cur_state;
    },
    [](Controller& c, uint64_t id, uint32_t state) {
      CcProfileAttr a;
      a.profile_state = state;
      return c.modify_cc_profile(id, a, kCcAttrState);
    },
};

// "config": the NSCC fields (the others keep their defaults).
Result<NsccCfg> nscc_arg(const json& g) {
  if (!g.is_object()) return Error(EINVAL, "\"config\" must be an object of NSCC fields");
  NsccCfg n;
  static const std::set<std::string> known = {"disable_qa",
                                              "adjust_bytes_threshold",
                                              "adjust_period_threshold",
                                              "base_rtt",
                                              "eta",
                                              "fi",
                                              "fi_scale",
                                              "gamma",
                                              "max_md_jump",
                                              "max_cwnd",
                                              "qa_gate",
                                              "qa_threshold",
                                              "target_delay"};
  for (auto it = g.begin(); it != g.end(); ++it)
    if (!known.count(it.key())) return Error(EINVAL, "unknown NSCC field \"" + it.key() + "\"");
  for (auto [k, dst] :
       {std::pair{"adjust_bytes_threshold", &n.adjust_bytes_threshold},
        std::pair{"adjust_period_threshold", &n.adjust_period_threshold},
        std::pair{"base_rtt", &n.base_rtt}, std::pair{"max_cwnd", &n.max_cwnd},
        std::pair{"qa_threshold", &n.qa_threshold}, std::pair{"target_delay", &n.target_delay}}) {
    auto v = proto::get_u64(g, k, UINT32_MAX);
    if (!v) return std::move(v).error();
    if (*v) *dst = uint32_t(**v);
  }
  for (auto [k, dst] :
       {std::pair{"eta", &n.eta}, std::pair{"fi", &n.fi}, std::pair{"fi_scale", &n.fi_scale},
        std::pair{"gamma", &n.gamma}, std::pair{"max_md_jump", &n.max_md_jump}}) {
    auto v = proto::get_num(g, k);
    if (!v) return std::move(v).error();
    if (*v) *dst = float(**v);
  }
  auto qg = proto::get_u64(g, "qa_gate", 255);
  if (!qg) return std::move(qg).error();
  n.qa_gate = uint8_t(qg->value_or(0));
  auto dq = proto::get_bool(g, "disable_qa");
  if (!dq) return std::move(dq).error();
  n.disable_qa = dq->value_or(false);
  return n;
}

}  // namespace

json op_cc_profile_show(Request& r) { return show_profiles(r, kCcProfile); }
json op_cc_profile_delete(Request& r) { return delete_profile(r, kCcProfile); }

json op_cc_profile_modify(Request& r) {
  auto cid = need_id(r.args, r.op);
  if (!cid) return r.fail(kCcProfile.object, cid.error());
  const std::string obj = profile_object(kCcProfile, *cid);
  CcProfileAttr a;
  uint32_t mask = 0;
  if (Status s = profile_state_arg(r.args, &a.profile_state, &mask, kCcAttrState); !s)
    return r.fail(obj, s.error());
  if (r.args.contains("algorithm")) {
    const json& g = r.args["algorithm"];
    if (g.is_null() || (g.is_string() && g.get<std::string>() == "none")) {
      a.algorithm.reset();
    } else if (g.is_string()) {
      a.algorithm = g.get<std::string>();
    } else {
      return r.fail(obj, Error(EINVAL, "\"algorithm\" is a name or null"));
    }
    mask |= kCcAttrAlgorithm;
  }
  if (r.args.contains("config")) {
    auto n = nscc_arg(r.args["config"]);
    if (!n) return r.fail(obj, n.error());
    a.cc_config = *n;
    mask |= kCcAttrConfig;
  }
  Status s = r.ctl.modify_cc_profile(*cid, a, mask);
  const mrc_ctl_cc* p = r.ctl.cc_record(*cid);
  if (!s) return r.fail(obj, s.error(), p ? proto::cc_json(r.ctl, *p) : json(nullptr));
  return r.ok(proto::cc_json(r.ctl, *p));
}

}  // namespace mrc::mrcd
