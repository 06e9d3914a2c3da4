#include "ctl/srv6.hpp"

#include <cstring>

#include <vector>
#include "ctl/ep.hpp"

namespace mrc::ctl {

uint32_t fmt_width_limit(uint32_t mode, uint32_t ev_max_width) {
  return mode == kFmtSrv6 ? kSrv6MaxWidth : ev_max_width;
}

Status check_fmt_width(uint32_t mode, uint32_t total, uint32_t ev_max_width,
                       const std::string& obj) {
  if (mode == kFmtSrv6 && total > kSrv6MaxWidth && total <= 2 * kSrv6MaxWidth)
    return Error(ENOTSUP,
                 obj + ": an SRv6 format of " + std::to_string(total) +
                     " bits needs an SRH segment (SRv6+SRH), which this implementation does "
                     "not support (at most " +
                     std::to_string(kSrv6MaxWidth) + " bits: one uSID container)");
  const uint32_t lim = fmt_width_limit(mode, ev_max_width);
  if (total > lim)
    return Error(
        E2BIG,
        obj + ": format fields total " + std::to_string(total) + " bits, more than " +
            (mode == kFmtSrv6 ? std::string("an SRv6 format's ") : std::string("ev_max_width ")) +
            std::to_string(lim));
  return {};
}

codec::EvFmtMode codec_fmt_mode(uint32_t fmt_mode) {
  switch (fmt_mode) {
    case kFmtUdp:
      return codec::EvFmtMode::kUdp;
    case kFmtSrv6:
      return codec::EvFmtMode::kSrv6;
    default:
      return codec::EvFmtMode::kStev;
  }
}

uint32_t ev_wire(const codec::EvValue& expanded, uint32_t fmt_mode) {
  if (fmt_mode == kFmtSrv6) {
    codec::Srv6Sid sid{};
    codec::srv6_sid_from_value(expanded, sid);
    return codec::srv6_entropy(sid);
  }
  return codec::ev_to_u32(expanded, codec_fmt_mode(fmt_mode));
}

bool srv6_sid_of(const mrc_ctl_fmt& fmt, const mrc_ctl_evp& p, const mrc_ctl_ev_entry& e,
                 codec::Srv6Sid& sid) {
  std::vector<codec::EvFmtField> ff(fmt.field_count);
  for (uint32_t i = 0; i < fmt.field_count && i < MRC_CTL_MAX_FMT_FIELDS; i++)
    ff[i].width = fmt.width[i];
  std::vector<codec::EvField> f(p.field_count);
  for (uint32_t i = 0; i < p.field_count && i < MRC_CTL_MAX_EV_FIELDS; i++)
    f[i] = {p.field[i].width, p.field[i].init_val, p.field[i].min_val, p.field[i].max_val,
            p.field[i].mask};
  codec::EvValue compact{}, out{};
  std::memcpy(compact.data(), e.val, codec::kEvMaxBytes);
  if (!codec::ev_expand(ff, f, compact, out)) return false;
  return codec::srv6_sid_from_value(out, sid);
}

Status srv6_ep_request(const codec::EvValue& val, EpWire& w, const std::string& what) {
  for (size_t b = 16; b < val.size(); b++)
    if (val[b])
      return Error(ENOTSUP,
                   what + ": SRv6 EVs with an SRH segment (bytes 16-31) are not supported");
  codec::Srv6Sid sid{};
  codec::srv6_sid_from_value(val, sid);
  if (sid == codec::Srv6Sid{}) return Error(EINVAL, what + ": req_ev has no uSID container");
  if (w.dst.ver != codec::IpVersion::kV6 || codec::srv6_final(sid) != w.dst.b)
    return Error(EINVAL,
                 what + ": the uSID container " + codec::srv6_to_string(sid) +
                     " does not end at dgid (its last uSID must be the destination's address)");
  w.srv6 = true;
  w.sid = sid;
  w.entropy = codec::srv6_entropy(sid);
  return {};
}

}  // namespace mrc::ctl
