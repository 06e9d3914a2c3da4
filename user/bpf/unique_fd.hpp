// Owning file descriptor (mrc/unique_fd.hpp), under the loader's namespace.
#pragma once

#include "mrc/unique_fd.hpp"

namespace mrc::bpf {
using mrc::UniqueFd;
}  // namespace mrc::bpf
