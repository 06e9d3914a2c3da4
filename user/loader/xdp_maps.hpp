// Typed access to the maps of bpf/mrc_xdp.bpf.c (include/mrc/uapi/maps.h),
// either from a freshly loaded program (MrcXdp::maps()) or re-opened from
// their pins (XdpMaps::open_pinned), e.g. by the daemon after a restart or by
// a CLI. Control path only: every call is a bpf() syscall.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "mrc/result.hpp"
#include "mrc/uapi/maps.h"
#include "util/unique_fd.hpp"

struct bpf_object;

namespace mrc::loader {

// Map names in the object and file names under the pin directory.
inline constexpr const char* kMapXsks = "mrc_xsks";
inline constexpr const char* kMapCfg = "mrc_cfg";
inline constexpr const char* kMapPorts = "mrc_ports";
inline constexpr const char* kMapQps = "mrc_qps";
inline constexpr const char* kMapStats = "mrc_stats";
inline constexpr std::array<const char*, 5> kMapNames = {kMapXsks, kMapCfg, kMapPorts, kMapQps,
                                                         kMapStats};

// The configuration the loader writes unless told otherwise (wire.h defaults).
mrc_xdp_cfg default_xdp_cfg();

// Number of __u64 counters in struct mrc_xdp_stats.
inline constexpr size_t kStatsFields = sizeof(mrc_xdp_stats) / sizeof(uint64_t);
// Field names in declaration order (the names bpftool prints from BTF).
extern const std::array<const char*, kStatsFields> kStatsFieldNames;
inline uint64_t stats_field(const mrc_xdp_stats& s, size_t i) {
  return reinterpret_cast<const uint64_t*>(&s)[i];
}

class XdpMaps {
 public:
  XdpMaps() = default;
  XdpMaps(XdpMaps&&) noexcept = default;
  XdpMaps& operator=(XdpMaps&&) noexcept = default;

  // Duplicates the descriptors of a loaded object's maps.
  static Result<XdpMaps> from_object(bpf_object* obj);
  // Opens the maps pinned under `dir` (every one must exist).
  static Result<XdpMaps> open_pinned(const std::string& dir = MRC_PIN_DIR_DEFAULT);

  bool valid() const { return cfg_.valid(); }

  Status set_cfg(const mrc_xdp_cfg& cfg);
  Result<mrc_xdp_cfg> cfg() const;

  // Interface ifindex -> plane port (1-based) and admin flags.
  Status set_port(uint32_t ifindex, const mrc_port_info& info);
  Status del_port(uint32_t ifindex);
  Result<mrc_port_info> port(uint32_t ifindex) const;

  // Local QPN -> remote QPN and flags (what XDP needs to NACK trimmed packets).
  Status set_qp(uint32_t qpn, const mrc_qp_info& info);
  Status del_qp(uint32_t qpn);
  Result<mrc_qp_info> qp(uint32_t qpn) const;

  // AF_XDP socket `xsk_fd` receives the MRC packets of rx queue `queue` of
  // plane port `port` (the number in mrc_ports; 0 = unregistered interface).
  Status set_xsk(uint32_t port, uint32_t queue, int xsk_fd);
  Status del_xsk(uint32_t port, uint32_t queue);

  // Counters of one port (0 = interfaces not in mrc_ports), summed over CPUs.
  Result<mrc_xdp_stats> stats(uint32_t port) const;
  Result<std::array<mrc_xdp_stats, MRC_MAX_PORTS>> all_stats() const;
  // Zeroes the counters of one port on every CPU.
  Status reset_stats(uint32_t port);

  int xsks_fd() const { return xsks_.get(); }
  int cfg_fd() const { return cfg_.get(); }
  int ports_fd() const { return ports_.get(); }
  int qps_fd() const { return qps_.get(); }
  int stats_fd() const { return stats_.get(); }

 private:
  UniqueFd xsks_, cfg_, ports_, qps_, stats_;
  int ncpus_ = 0;
};

}  // namespace mrc::loader
