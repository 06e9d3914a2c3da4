// File-system helpers shared by the loader and the controller store.
#pragma once

#include <sys/types.h>

#include <string>

#include "mrc/result.hpp"

namespace mrc {

// Creates `dir` and its missing parents with `mode` (existing ones are left
// as they are); ok if `dir` exists.
Status make_dirs(const std::string& dir, mode_t mode);

}  // namespace mrc
