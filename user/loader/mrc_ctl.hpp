// bpf/mrc_ctl.bpf.c: the controller's maps (include/mrc/uapi/ctl.h). The
// object has no programs; loading it creates the maps, or reuses compatible
// ones pinned by an earlier run. The controller model over them is
// user/ctl/pinned_store.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "mrc/result.hpp"
#include "util/unique_fd.hpp"

namespace mrc::loader {

// Creates the maps `names` (MRC_CTL_MAP_*) of mrc_ctl, or re-opens those
// pinned under `dir`, pins the new ones there, and returns a descriptor of
// each, in the order of `names`. The object itself is gone on return: the
// pins and the descriptors keep the maps.
Result<std::vector<UniqueFd>> load_ctl_maps(const std::string& dir,
                                            std::span<const char* const> names);

}  // namespace mrc::loader
