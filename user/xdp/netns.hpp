// Runs the calling thread in another network namespace for a scope. AF_XDP
// sockets, netlink sockets and XDP attachments made inside the scope belong
// to that namespace and stay usable from any thread afterwards.
#pragma once

#include <string>

#include "mrc/result.hpp"
#include "util/mmap_area.hpp"
#include "util/unique_fd.hpp"

namespace mrc::xdp {

class ScopedNetns {
 public:
  // Enters the named namespace (/run/netns/<name>, as `ip netns add` makes).
  static Result<ScopedNetns> enter(const std::string& name);
  // Enters the namespace of an open namespace fd (not taken over).
  static Result<ScopedNetns> enter_fd(int ns_fd, const std::string& what);
  // Like enter_fd(), but does nothing (no syscall beyond two fstat) when the
  // thread is already in that namespace.
  static Result<ScopedNetns> enter_if_other(int ns_fd);
  // An fd of the calling thread's network namespace (/proc/thread-self/ns/net).
  static Result<UniqueFd> current();

  ScopedNetns() = default;
  ScopedNetns(ScopedNetns&&) noexcept = default;
  ScopedNetns& operator=(ScopedNetns&& o) noexcept;
  ~ScopedNetns();  // returns the thread to the namespace it came from

  // Returns to the original namespace now (also done by the destructor).
  Status leave();

 private:
  UniqueFd saved_;
};

}  // namespace mrc::xdp
