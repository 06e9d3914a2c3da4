// SRv6 uSID EV formats in the controller model (Documentation/controller.md,
// "SRv6"): how wide an SRv6 format may be, the wire entropy of an expanded
// SRv6 EV, and the uSID container of a profile's entry (for the engine and
// for `mrcctl ev show`).
#pragma once

#include <cstdint>
#include <string>

#include "codec/ev.hpp"
#include "codec/srv6.hpp"
#include "ctl/types.hpp"
#include "mrc/result.hpp"
#include "mrc/uapi/ctl.h"

namespace mrc::ctl {

struct EpWire;

// A uSID container is one IPv6 address.
inline constexpr uint32_t kSrv6MaxWidth = 128;

// The widest format of `mode`: SRv6 128 bits, the others the device's
// ev_max_width.
uint32_t fmt_width_limit(uint32_t mode, uint32_t ev_max_width);

// An SRv6 format wider than one container is SRv6+SRH (a second, SRH
// segment): ENOTSUP; otherwise the generic limit (E2BIG).
Status check_fmt_width(uint32_t mode, uint32_t total_bits, uint32_t ev_max_width,
                       const std::string& obj);

// The 32-bit entropy of an expanded EV as the data path carries it: the
// value's first bits (STEV/UDP), or the container's hash (SRv6).
uint32_t ev_wire(const codec::EvValue& expanded, uint32_t fmt_mode);

codec::EvFmtMode codec_fmt_mode(uint32_t fmt_mode);

// The container of an SRv6 profile's entry: its compact EV expanded with the
// profile's fields and the format's widths. False if it does not expand.
bool srv6_sid_of(const mrc_ctl_fmt& fmt, const mrc_ctl_evp& p, const mrc_ctl_ev_entry& e,
                 codec::Srv6Sid& sid);

// An endpoint request (EV probe) on an SRv6 EV `val` (bytes 0-15 the
// container, 16-31 an SRH segment: ENOTSUP), ending at w.dst: fills w.sid,
// w.srv6 and w.entropy.
Status srv6_ep_request(const codec::EvValue& val, EpWire& w, const std::string& what);

}  // namespace mrc::ctl
