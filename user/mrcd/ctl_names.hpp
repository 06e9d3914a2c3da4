// mrcd speaks the ctl model (mrc::ctl, OCP mrc_ctl.h). A few of its names
// are also names of libmrc's public vocabulary (include/mrc/types.hpp, members
// of namespace mrc): inside mrcd they mean the ctl model's.
#pragma once

#include "ctl/types.hpp"

namespace mrc::mrcd {
using ctl::DeviceAttr, ctl::EvEvent, ctl::EvState, ctl::kEvGood, ctl::kEvAssumedBad, ctl::kEvDenied,
    ctl::kEvUnknown;
}  // namespace mrc::mrcd
