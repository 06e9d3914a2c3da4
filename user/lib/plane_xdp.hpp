// Who owns mrc_xdp on a plane interface in libmrc's in-process mode (no
// mrcd), Documentation/xdp.md "Ownership in libmrc".
//
// The Context attaches its own copy of mrc_xdp with a BPF link
// (bpf_link_create, BPF_XDP, kernel >= 5.9) and owns the link's only file
// descriptor: the kernel detaches the program when that descriptor closes,
// so a process that dies in any way (exit without closing the device,
// SIGKILL, a crash) frees its interfaces. Where a link cannot be created (an
// older kernel) it falls back to loader::MrcXdpAttachment (libxdp / netlink), which
// detaches in the destructor only.
//
// Before attaching it looks at the hook (xdp_holder): a stale mrc_xdp, one
// attached through netlink by a process that no longer exists and not
// mrcd's, is detached first (compare-and-detach: XDP_FLAGS_REPLACE with its
// fd as the expected program) with a warning; anything else that holds the
// hook makes the attach fail with EBUSY and a message naming the holder. A
// program that is not mrc_xdp is never replaced; libxdp's dispatcher may run
// mrc_xdp beside it where the kernel allows that (the libxdp path).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "loader/attach.hpp"
#include "loader/mrc_xdp.hpp"
#include "mrc/result.hpp"
#include "util/unique_fd.hpp"

namespace mrc::lib {

// What is attached to an interface's XDP hook, and who keeps it alive.
struct XdpHolder {
  uint32_t prog_id = 0;     // 0: nothing is attached
  uint32_t mode_flag = 0;   // XDP_FLAGS_DRV_MODE / XDP_FLAGS_SKB_MODE / XDP_FLAGS_HW_MODE
  std::string prog_name;    // the kernel's (truncated) program name
  bool mrc_xdp = false;     // the program is mrc_xdp_rx
  bool link = false;        // attached through a BPF link (its owner is alive)
  bool dispatcher = false;  // mrc_xdp runs behind libxdp's dispatcher (prog_id: mrc_xdp's)
  bool mrcd = false;        // it uses the maps mrcd pinned in the pin directory
  std::string pin_dir;      // the pin directory checked for `mrcd`
  std::vector<pid_t> pids;  // processes holding a descriptor of the program or its link
  int unreadable = 0;       // processes whose descriptors could not be read
  // mrc_xdp left behind through netlink by a process that no longer exists.
  bool stale() const {
    return prog_id && mrc_xdp && !link && !dispatcher && !mrcd && pids.empty() && unreadable == 0;
  }
  // "mrc_xdp of pid 123 (write_imm_server), bpf_link" / "another XDP program (xdp_dispatcher)"
  std::string describe() const;
};

// Inspects `ifindex` in the current network namespace. `pin_dir`: where an
// mrcd would have pinned its maps (DeviceOptions::pin_dir).
Result<XdpHolder> xdp_holder(int ifindex, const std::string& pin_dir);

// mrc_xdp on one plane interface, owned by a Context.
class PlaneXdp {
 public:
  // generic_only: DeviceOptions::force_generic.
  static Result<PlaneXdp> attach(const loader::MrcXdp& prog, const std::string& ifname,
                                 bool generic_only, const std::string& pin_dir);

  PlaneXdp(PlaneXdp&&) noexcept = default;
  PlaneXdp& operator=(PlaneXdp&&) noexcept = default;
  ~PlaneXdp() = default;  // closing the link detaches; legacy_ detaches itself

  loader::XdpMode mode() const { return mode_; }
  bool via_link() const { return link_.valid(); }
  // "veth0: native, bpf_link" / "veth0: native, single program (...)"
  std::string describe() const;

 private:
  PlaneXdp() = default;
  // The libxdp / netlink path of loader::MrcXdpAttachment (`why` goes to the notes).
  Status attach_libxdp(const loader::MrcXdp& prog, bool generic_only, const std::string& why);
  UniqueFd link_;
  std::optional<loader::MrcXdpAttachment> legacy_;
  loader::XdpMode mode_ = loader::XdpMode::kNative;
  std::string ifname_;
  std::string notes_;
};

// Attaches to every interface; on a failure the ones already done are
// released (detached) and the error returned.
Result<std::vector<PlaneXdp>> attach_planes(const loader::MrcXdp& prog,
                                            const std::vector<std::string>& ifnames,
                                            bool generic_only, const std::string& pin_dir);

}  // namespace mrc::lib
