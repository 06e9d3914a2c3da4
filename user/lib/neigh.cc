#include "lib/neigh.hpp"

#include <arpa/inet.h>
#include <linux/neighbour.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <span>
#include <thread>

#include "util/unique_fd.hpp"
#include "xdp/netlink.hpp"

namespace mrc::lib {
namespace {

int family(const codec::IpAddr& a) { return a.ver == codec::IpVersion::kV4 ? AF_INET : AF_INET6; }
size_t alen(const codec::IpAddr& a) { return a.ver == codec::IpVersion::kV4 ? 4 : 16; }

// Next hop towards dst out of ifindex: the gateway of the route, or dst itself.
Result<codec::IpAddr> next_hop(xdp::netlink::Socket& nl, int ifindex, const codec::IpAddr& dst) {
  rtmsg rm{};
  rm.rtm_family = uint8_t(family(dst));
  rm.rtm_dst_len = uint8_t(alen(dst) * 8);
  xdp::netlink::Request req(RTM_GETROUTE, 0, rm);
  req.add(RTA_DST, dst.b.data(), alen(dst));
  req.add(RTA_OIF, uint32_t(ifindex));
  codec::IpAddr hop = dst;
  bool found = false, elsewhere = false;
  auto st = nl.request(req, "netlink", [&](const nlmsghdr& h) {
    if (found) return;
    found = true;
    xdp::netlink::for_each_attr<rtmsg>(h, [&](uint16_t type, std::span<const uint8_t> d) {
      if (type == RTA_GATEWAY && d.size() == alen(dst))
        std::memcpy(hop.b.data(), d.data(), d.size());
      int oif = 0;
      if (type == RTA_OIF && d.size() >= sizeof oif) std::memcpy(&oif, d.data(), sizeof oif);
      if (type == RTA_OIF && oif != ifindex) elsewhere = true;
    });
  });
  if (st && !found) st = make_error(ENOENT, "netlink");
  if (!st) return std::move(st).error().wrap("route to " + to_string(dst));
  if (elsewhere)
    return make_error(ENETUNREACH,
                      "the route to " + to_string(dst) + " leaves through another interface");
  return hop;
}

// The neighbour entry's MAC when it is usable.
Result<codec::Mac> lookup_neigh(xdp::netlink::Socket& nl, int ifindex, const codec::IpAddr& ip) {
  ndmsg ndm{};
  ndm.ndm_family = uint8_t(family(ip));
  ndm.ndm_ifindex = ifindex;
  xdp::netlink::Request req(RTM_GETNEIGH, 0, ndm);
  req.add(NDA_DST, ip.b.data(), alen(ip));
  bool found = false, usable = false, have_mac = false;
  codec::Mac m{};
  auto st = nl.request(req, "netlink", [&](const nlmsghdr& h) {
    const auto* nd = xdp::netlink::header<ndmsg>(h);
    if (found || !nd) return;
    found = true;
    usable = !(nd->ndm_state & (NUD_INCOMPLETE | NUD_FAILED | NUD_NONE));
    xdp::netlink::for_each_attr<ndmsg>(h, [&](uint16_t type, std::span<const uint8_t> d) {
      if (type == NDA_LLADDR && d.size() == 6 && !have_mac) {
        std::memcpy(m.data(), d.data(), 6);
        have_mac = true;
      }
    });
  });
  if (st && !found) st = make_error(ENOENT, "netlink");
  if (!st) return std::move(st).error();
  if (!usable) return make_error(EAGAIN, "neighbour unresolved");
  if (!have_mac) return make_error(EAGAIN, "neighbour entry without a link-layer address");
  return m;
}

// Makes the kernel resolve `ip` on the interface: one datagram to the discard port.
void nudge(int ifindex, const codec::IpAddr& ip) {
  UniqueFd s(socket(family(ip), SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!s) return;
  char name[IF_NAMESIZE] = {};
  if (if_indextoname(unsigned(ifindex), name))
    setsockopt(s.get(), SOL_SOCKET, SO_BINDTODEVICE, name, socklen_t(std::strlen(name)));
  char one = 0;
  if (ip.ver == codec::IpVersion::kV4) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(9);
    std::memcpy(&a.sin_addr, ip.b.data(), 4);
    sendto(s.get(), &one, 1, MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&a), sizeof a);
  } else {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(9);
    a.sin6_scope_id = uint32_t(ifindex);
    std::memcpy(&a.sin6_addr, ip.b.data(), 16);
    sendto(s.get(), &one, 1, MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&a), sizeof a);
  }
}

}  // namespace

Result<codec::Mac> resolve_next_hop(int ifindex, const codec::IpAddr& dst, int timeout_ms) {
  auto nl = xdp::netlink::Socket::open();
  if (!nl) return std::move(nl).error();
  auto hop = next_hop(*nl, ifindex, dst);
  if (!hop) return std::move(hop).error();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  bool nudged = false;
  while (true) {
    auto m = lookup_neigh(*nl, ifindex, *hop);
    if (m) return m;
    if (m.error().code != EAGAIN && m.error().code != ENOENT)
      return std::move(m).error().wrap("neighbour " + to_string(*hop));
    if (!nudged) {
      nudge(ifindex, *hop);
      nudged = true;
    }
    if (std::chrono::steady_clock::now() >= deadline)
      return make_error(EHOSTUNREACH, "no link-layer address for " + to_string(*hop) + " after " +
                                          std::to_string(timeout_ms) + " ms");
    // The kernel answers ARP/ND asynchronously; poll its table.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace mrc::lib
