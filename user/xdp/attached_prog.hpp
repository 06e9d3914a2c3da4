// RAII for one XDP program attached to one interface with bpf_xdp_attach().
// The destructor detaches it again, but only if that very program is still
// the one attached (XDP_FLAGS_REPLACE with the old program fd), and from the
// network namespace it was attached in, whatever thread runs the destructor.
#pragma once

#include <cstdint>
#include <string>

#include "mrc/result.hpp"
#include "util/mmap_area.hpp"
#include "util/unique_fd.hpp"

namespace mrc::xdp {

class AttachedXdpProg {
 public:
  // flags: XDP_FLAGS_DRV_MODE, XDP_FLAGS_SKB_MODE, ...; XDP_FLAGS_UPDATE_IF_NOEXIST
  // is always added so an existing program is never replaced silently.
  static Result<AttachedXdpProg> attach(int ifindex, int prog_fd, uint32_t flags,
                                        const std::string& what);

  AttachedXdpProg() = default;
  AttachedXdpProg(AttachedXdpProg&& o) noexcept;
  AttachedXdpProg& operator=(AttachedXdpProg&& o) noexcept;
  AttachedXdpProg(const AttachedXdpProg&) = delete;
  AttachedXdpProg& operator=(const AttachedXdpProg&) = delete;
  ~AttachedXdpProg();

  Status detach();
  int ifindex() const { return ifindex_; }
  explicit operator bool() const { return ifindex_ != 0; }

 private:
  UniqueFd netns_;
  int ifindex_ = 0;
  int prog_fd_ = -1;  // not owned: the program object outlives the attachment
  uint32_t flags_ = 0;
};

}  // namespace mrc::xdp
