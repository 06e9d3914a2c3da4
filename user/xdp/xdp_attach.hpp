// RAII for one XDP program attached to one interface with bpf_xdp_attach().
// The destructor detaches it again, but only if that very program is still
// the one attached (XDP_FLAGS_REPLACE with the old program fd), and from the
// network namespace it was attached in, whatever thread runs the destructor.
#pragma once

#include <cstdint>
#include <string>

#include "mrc/result.hpp"
#include "xdp/handles.hpp"

namespace mrc::xdp {

class XdpAttachment {
 public:
  // flags: XDP_FLAGS_DRV_MODE, XDP_FLAGS_SKB_MODE, ...; XDP_FLAGS_UPDATE_IF_NOEXIST
  // is always added so an existing program is never replaced silently.
  static Result<XdpAttachment> attach(int ifindex, int prog_fd, uint32_t flags,
                                      const std::string& what);

  XdpAttachment() = default;
  XdpAttachment(XdpAttachment&& o) noexcept;
  XdpAttachment& operator=(XdpAttachment&& o) noexcept;
  XdpAttachment(const XdpAttachment&) = delete;
  XdpAttachment& operator=(const XdpAttachment&) = delete;
  ~XdpAttachment();

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
