// Handlers of EV format profiles: ev_fmt.show, ev_fmt.modify, ev_fmt.delete.
#include "mrcd/ops_profile.hpp"

namespace mrc::mrcd {

using namespace mrc::ctl;

namespace {

const ProfileOps kEvFmt = {
    "ev-fmt",
    ProfileKind::kEvFmt,
    &Controller::fmt_profile_ids,
    [](const Controller& c, uint64_t id, bool) -> std::optional<json> {
      const mrc_ctl_fmt* f = c.fmt_record(id);
      if (!f) return std::nullopt;
      return proto::fmt_json(*f);
    },
    [](const Controller& c, uint64_t id) -> std::optional<uint32_t> {
      const mrc_ctl_fmt* f = c.fmt_record(id);
      if (!f) return std::nullopt;
      return f->cur_state;
    },
    [](Controller& c, uint64_t id, uint32_t state) {
      EvFmtProfileAttr a;
      a.profile_state = state;
      return c.modify_ev_fmt_profile(id, a, kFmtAttrState);
    },
};

// "widths": the bit widths of the format's fields.
Status widths_arg(const json& args, std::vector<codec::EvFmtField>* w) {
  if (!args["widths"].is_array()) return Error(EINVAL, "\"widths\" must be an array of bit widths");
  for (const json& x : args["widths"]) {
    if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > 255)
      return Error(EINVAL, "a format field width must be a number of bits");
    w->push_back({uint8_t(x.get<int64_t>())});
  }
  return ok_status();
}

}  // namespace

json op_ev_fmt_show(Request& r) { return show_profiles(r, kEvFmt); }
json op_ev_fmt_delete(Request& r) { return delete_profile(r, kEvFmt); }

json op_ev_fmt_modify(Request& r) {
  auto fid = need_id(r.args, r.op);
  if (!fid) return r.fail(kEvFmt.object, fid.error());
  const std::string obj = profile_object(kEvFmt, *fid);
  EvFmtProfileAttr a;
  uint32_t mask = 0;
  std::vector<codec::EvFmtField> w;
  if (Status s = profile_state_arg(r.args, &a.profile_state, &mask, kFmtAttrState); !s)
    return r.fail(obj, s.error());
  if (auto s = proto::get_str(r.args, "mode"); !s) {
    return r.fail(obj, s.error());
  } else if (*s) {
    auto v = proto::fmt_mode_from(**s);
    if (!v) return r.fail(obj, v.error());
    a.ev_fmt_mode = *v;
    mask |= kFmtAttrMode;
  }
  if (r.args.contains("widths")) {
    if (Status s = widths_arg(r.args, &w); !s) return r.fail(obj, s.error());
    a.ev_fmt_op.op = kFmtOpModifyFields;
    a.ev_fmt_op.fmt_fields = w;
    a.ev_fmt_op.fmt_field_count = int(w.size());
    mask |= kFmtAttrOp;
  }
  Status s = r.ctl.modify_ev_fmt_profile(*fid, a, mask);
  const mrc_ctl_fmt* f = r.ctl.fmt_record(*fid);
  if (!s) return r.fail(obj, s.error(), f ? proto::fmt_json(*f) : json(nullptr));
  return r.ok(proto::fmt_json(*f));
}

}  // namespace mrc::mrcd
