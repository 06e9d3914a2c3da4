#include "xdp/netns.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>

#include <cerrno>

namespace mrc::xdp {

Result<ScopedNetns> ScopedNetns::enter_fd(int ns_fd, const std::string& what) {
  ScopedNetns s;
  s.saved_.reset(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  if (!s.saved_) return make_error(errno, "opening the current network namespace");
  if (::setns(ns_fd, CLONE_NEWNET) != 0) {
    s.saved_.reset();
    return make_error(errno, "entering network namespace " + what);
  }
  return s;
}

Result<UniqueFd> ScopedNetns::current() {
  UniqueFd fd(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  if (!fd) return make_error(errno, "opening the current network namespace");
  return fd;
}

Result<ScopedNetns> ScopedNetns::enter_if_other(int ns_fd) {
  struct stat want {
  }, have{};
  if (::fstat(ns_fd, &want) != 0) return make_error(errno, "fstat of a network namespace fd");
  if (::stat("/proc/thread-self/ns/net", &have) != 0)
    return make_error(errno, "stat of the current network namespace");
  if (want.st_ino == have.st_ino && want.st_dev == have.st_dev) return ScopedNetns();
  return enter_fd(ns_fd, "of fd " + std::to_string(ns_fd));
}

Result<ScopedNetns> ScopedNetns::enter(const std::string& name) {
  const std::string path = "/run/netns/" + name;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return make_error(errno, "opening network namespace " + path);
  return enter_fd(fd.get(), name);
}

Status ScopedNetns::leave() {
  if (!saved_) return ok_status();
  const int rc = ::setns(saved_.get(), CLONE_NEWNET);
  const int e = errno;
  saved_.reset();
  if (rc != 0) return make_error(e, "returning to the original network namespace");
  return ok_status();
}

ScopedNetns& ScopedNetns::operator=(ScopedNetns&& o) noexcept {
  if (this != &o) {
    (void)leave();
    saved_ = std::move(o.saved_);
  }
  return *this;
}

ScopedNetns::~ScopedNetns() { (void)leave(); }

}  // namespace mrc::xdp
