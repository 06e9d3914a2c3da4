// Owning file descriptor: closes on destruction, movable, not copyable.
// Shared by the loader, the AF_XDP layer, the controller, mrcd, libmrc and the
// tools: no other code in user/ closes a descriptor it owns.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <utility>

#include "mrc/result.hpp"

namespace mrc {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  explicit operator bool() const { return valid(); }
  // Gives up ownership.
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }
  // Closes now (errors of close(2) are not reported: the descriptor is gone
  // either way).
  void close() { reset(); }
  // An independent descriptor for the same open file (close-on-exec).
  static Result<UniqueFd> dup(int fd, const std::string& what) {
    int d = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (d < 0) return Error(errno, "duplicating the descriptor of " + what);
    return UniqueFd(d);
  }

 private:
  int fd_ = -1;
};

}  // namespace mrc
