// mrcd's view of the data plane: mrc_xdp loaded through mrc_loader with its maps
// pinned under the pin directory, attached to every plane interface (native
// first, generic as a reported fallback), mrc_cfg / mrc_ports written from
// the configuration and the controller's port state. On a restart the pinned
// maps are re-opened and an mrc_xdp already attached to a plane (using those
// maps) is left running, so QPs never see the daemon restart.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "codec/packet.hpp"
#include "loader/attach.hpp"
#include "loader/mrc_xdp.hpp"
#include "mrc/result.hpp"
#include "mrcd/config.hpp"
#include "util/unique_fd.hpp"

namespace mrc::mrcd {

struct Plane {
  PlaneCfg cfg;
  uint32_t ifindex = 0;
  codec::Mac mac{};
  bool link_up = false;
  bool admin_up = true;
  loader::XdpMode mode = loader::XdpMode::kNative;
  bool kept = false;  // an mrc_xdp attached by an earlier mrcd was kept
  std::string attach_notes;
  std::optional<loader::MrcXdpAttachment> att;
};

class Dataplane {
 public:
  ~Dataplane();
  // Loads (reusing pinned maps), pins, attaches, writes mrc_cfg/mrc_ports.
  // `admin_up(port)` gives the persisted administrative state.
  static Result<std::unique_ptr<Dataplane>> start(const Config& c,
                                                  const std::function<bool(uint8_t)>& admin_up);

  std::vector<Plane>& planes() { return planes_; }
  const std::vector<Plane>& planes() const { return planes_; }
  Plane* plane_by_port(uint8_t port);
  loader::XdpMaps& maps() { return xdp_->maps(); }

  // Administrative state of a port into mrc_ports (MRC_PORT_F_ADMIN_DOWN)
  // and the EETH port-up mask of mrc_cfg.
  Status set_admin(uint8_t port, bool up);
  // Re-reads link state (IFF_UP && IFF_RUNNING); calls changed(port, up).
  void refresh_links(const std::function<void(uint8_t, bool)>& changed);
  // Interface addresses of a plane (IPv4 and IPv6, global first).
  std::vector<codec::IpAddr> addresses(const Plane& p) const;

  // On exit: keep everything (default), or detach and remove the pins.
  Status stop(bool keep);

 private:
  Dataplane() = default;
  Status write_cfg();
  Status attach_plane(Plane& p);

  Config cfg_;
  std::optional<loader::MrcXdp> xdp_;
  std::vector<Plane> planes_;
  UniqueFd ioctl_fd_;
};

}  // namespace mrc::mrcd
