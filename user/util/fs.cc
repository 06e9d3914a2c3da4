#include "util/fs.hpp"

#include <sys/stat.h>

#include <cerrno>

namespace mrc {

Status make_dirs(const std::string& dir, mode_t mode) {
  if (dir.empty()) return Error(EINVAL, "empty directory name");
  for (size_t pos = 1;; pos++) {
    pos = dir.find('/', pos);
    std::string part = dir.substr(0, pos);
    if (::mkdir(part.c_str(), mode) && errno != EEXIST)
      return Error(errno, "creating directory " + part);
    if (pos == std::string::npos) break;
  }
  return ok_status();
}

}  // namespace mrc
