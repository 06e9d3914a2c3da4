// Facts about a network interface, read through rtnetlink, ethtool ioctls and
// getifaddrs() in the calling thread's network namespace (never sysfs, whose
// view belongs to whoever mounted /sys).
#pragma once

#include <netinet/in.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "mrc/result.hpp"
#include "util/mmap_area.hpp"
#include "util/unique_fd.hpp"
#include "xdp/netlink.hpp"

namespace mrc::xdp {

enum class XdpMode : uint8_t { kNone, kNative, kGeneric, kOffload, kMulti };
const char* to_string(XdpMode m);

struct XdpAttachInfo {
  XdpMode mode = XdpMode::kNone;
  uint32_t prog_id = 0;  // 0 = no program (or several: see the per-mode ids)
  uint32_t drv_prog_id = 0;
  uint32_t skb_prog_id = 0;
  uint32_t hw_prog_id = 0;
};

struct QueueInfo {
  uint32_t rx = 0;  // ethtool rx-only channels (or real rx queues)
  uint32_t tx = 0;
  uint32_t combined = 0;
  uint32_t usable = 1;  // queues an AF_XDP socket can use for both RX and TX
  bool from_ethtool = false;
};

struct InterfaceInfo {
  std::string name;
  int ifindex = 0;
  std::array<uint8_t, 6> mac{};
  uint32_t mtu = 0;
  bool admin_up = false;  // IFF_UP
  bool link_up = false;   // carrier (IFF_LOWER_UP)
  uint8_t operstate = 0;  // IF_OPER_*
  QueueInfo queues;
  std::vector<in_addr> ipv4;
  std::vector<in6_addr> ipv6;
  XdpAttachInfo xdp;

  std::string mac_string() const;
};

Result<InterfaceInfo> query_interface(const std::string& name);
Result<QueueInfo> query_queues(const std::string& name);
Result<XdpAttachInfo> query_xdp(int ifindex);

// Link state as rtnetlink reports it (query or event).
struct LinkState {
  int ifindex = 0;
  bool admin_up = false;
  bool link_up = false;
  uint32_t mtu = 0;
};

// Subscribes to RTMGRP_LINK in the current network namespace. fd() goes into
// the engine's poll set; read() drains pending events without blocking.
class LinkMonitor {
 public:
  static Result<LinkMonitor> open();
  int fd() const { return nl_.fd(); }
  // Appends every link event received so far to out; returns how many.
  Result<size_t> read(std::vector<LinkState>& out);

 private:
  netlink::Socket nl_;
};

}  // namespace mrc::xdp
