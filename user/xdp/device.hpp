// A Device is the AF_XDP side of one node: a set of plane interfaces, each
// with its queues, one Umem shared by all of them, and one XskSocket per
// (interface, queue). One engine thread owns a Device; nothing in it locks.
//
//   auto dev = Device::open({.ports = {{"eth1"}, {"eth2"}}});
//   RxFrame rx[64];
//   for (;;) {
//     uint32_t n = dev->rx(rx);           // bursts from every socket
//     ...engine consumes rx[0..n)...
//     dev->release({rx, n});               // back to the fill rings
//     dev->flush_tx();                     // kicks TX rings that still hold frames
//     if (n == 0) dev->wait(1);            // idle: poll() on the socket fds
//   }
#pragma once

#include <poll.h>

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "mrc/result.hpp"
#include "util/mmap_area.hpp"
#include "util/unique_fd.hpp"
#include "xdp/iface.hpp"
#include "xdp/umem.hpp"
#include "xdp/xsk_socket.hpp"

namespace mrc::xdp {

struct PortConfig {
  std::string ifname;
  uint32_t queues = 0;  // sockets on [first_queue, first_queue + queues); 0 = all usable
  uint32_t first_queue = 0;
};

struct DeviceConfig {
  std::vector<PortConfig> ports;
  UmemConfig umem;
  SocketConfig socket;      // socket.fill_target 0 = derived from the UMEM size
  bool watch_links = true;  // subscribe to rtnetlink link events
};

struct Port {
  InterfaceInfo info;
  uint32_t first_socket = 0;  // sockets [first_socket, first_socket + socket_count)
  uint32_t socket_count = 0;
};

class Device {
 public:
  static Result<Device> open(const DeviceConfig& cfg);

  Device();
  Device(Device&&) noexcept;
  Device& operator=(Device&&) noexcept;
  ~Device();

  std::span<Port> ports() { return ports_; }
  std::span<const Port> ports() const { return ports_; }
  std::span<XskSocket> sockets() { return sockets_; }
  std::span<const XskSocket> sockets() const { return sockets_; }
  // The socket of (port index, queue), or nullptr.
  XskSocket* socket(uint16_t port, uint32_t queue);
  Umem& umem() { return umem_; }
  const Umem& umem() const { return umem_; }
  // Bind mode every socket got (they share the UMEM, so they share the mode).
  BindMode mode() const;

  // ---- data path ----
  // Frames from the sockets in round-robin order, up to out.size() (whole
  // packets of multi-buffer sockets: see XskSocket::rx).
  uint32_t rx(std::span<RxFrame> out);
  // Each frame back to the fill ring of the socket it came from.
  void release(std::span<const RxFrame> frames);
  // flush_tx() on every socket; true when every TX ring is drained.
  bool flush_tx();

  // ---- waiting ----
  // One pollfd per socket (in sockets() order), then the link monitor's.
  std::span<pollfd> poll_fds() { return pfds_; }
  // poll() on every fd for up to timeout_ms (copy mode: poll also drives
  // TX). Handles link events itself. Returns the number of ready fds.
  Result<int> wait(int timeout_ms);

  // ---- control ----
  // Reads pending link events and updates ports()[i].info (admin_up,
  // link_up, mtu). Returns how many events concerned this device's ports.
  Result<size_t> process_link_events();
  // Re-reads every port's interface facts (addresses, MTU, XDP mode, ...).
  Status refresh();
  // Inserts every socket into an XSKMAP at key(port index, queue).
  Status insert_into_xskmap(int xskmap_fd,
                            const std::function<uint32_t(uint16_t, uint32_t)>& key) const;
  XskCounters counters() const;                 // summed over sockets
  Result<XskKernelStats> kernel_stats() const;  // summed over sockets

 private:
  UniqueFd netns_;  // the namespace the interfaces live in
  Umem umem_;       // declared before sockets_: sockets are destroyed first
  std::vector<Port> ports_;
  std::vector<XskSocket> sockets_;
  std::vector<pollfd> pfds_;
  std::vector<LinkState> link_events_;
  LinkMonitor links_;
  bool watch_links_ = false;
  uint32_t rr_ = 0;
};

}  // namespace mrc::xdp
