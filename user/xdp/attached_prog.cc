#include "xdp/attached_prog.hpp"

#include <bpf/libbpf.h>
#include <linux/if_link.h>

#include <utility>

#include "xdp/netns.hpp"

namespace mrc::xdp {

Result<AttachedXdpProg> AttachedXdpProg::attach(int ifindex, int prog_fd, uint32_t flags,
                                                const std::string& what) {
  const uint32_t mode = flags & XDP_FLAGS_MODES;
  const int err = bpf_xdp_attach(ifindex, prog_fd, mode | XDP_FLAGS_UPDATE_IF_NOEXIST, nullptr);
  if (err)
    return errno_error(err, "attaching XDP program to " + what +
                                (-err == EBUSY || -err == EEXIST
                                     ? std::string(" (another XDP program is attached)")
                                     : std::string()));
  AttachedXdpProg a;
  auto ns = ScopedNetns::current();
  if (!ns) {
    bpf_xdp_detach(ifindex, mode, nullptr);
    return std::move(ns).error();
  }
  a.netns_ = std::move(*ns);
  a.ifindex_ = ifindex;
  a.prog_fd_ = prog_fd;
  a.flags_ = mode;
  return a;
}

AttachedXdpProg::AttachedXdpProg(AttachedXdpProg&& o) noexcept
    : netns_(std::move(o.netns_)),
      ifindex_(std::exchange(o.ifindex_, 0)),
      prog_fd_(std::exchange(o.prog_fd_, -1)),
      flags_(o.flags_) {}

AttachedXdpProg& AttachedXdpProg::operator=(AttachedXdpProg&& o) noexcept {
  if (this != &o) {
    (void)detach();
    netns_ = std::move(o.netns_);
    ifindex_ = std::exchange(o.ifindex_, 0);
    prog_fd_ = std::exchange(o.prog_fd_, -1);
    flags_ = o.flags_;
  }
  return *this;
}

AttachedXdpProg::~AttachedXdpProg() { (void)detach(); }

Status AttachedXdpProg::detach() {
  if (ifindex_ == 0) return ok_status();
  auto ns = ScopedNetns::enter_if_other(netns_.get());
  if (!ns) {
    ifindex_ = 0;
    return std::move(ns).error().wrap("detaching XDP program");
  }
  LIBBPF_OPTS(bpf_xdp_attach_opts, opts, .old_prog_fd = prog_fd_);
  const int err = bpf_xdp_detach(ifindex_, flags_, &opts);
  netns_.reset();
  const int ifindex = std::exchange(ifindex_, 0);
  prog_fd_ = -1;
  if (err) return errno_error(err, "detaching XDP program from ifindex " + std::to_string(ifindex));
  return ok_status();
}

}  // namespace mrc::xdp
