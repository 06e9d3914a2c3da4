#include "lib/neigh.hpp"

#include <arpa/inet.h>
#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

namespace mrc::lib {
namespace {

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

int family(const codec::IpAddr& a) { return a.ver == codec::IpVersion::kV4 ? AF_INET : AF_INET6; }
size_t alen(const codec::IpAddr& a) { return a.ver == codec::IpVersion::kV4 ? 4 : 16; }

void add_attr(nlmsghdr* n, uint16_t type, const void* data, size_t len) {
  auto* rta = reinterpret_cast<rtattr*>(reinterpret_cast<char*>(n) + NLMSG_ALIGN(n->nlmsg_len));
  rta->rta_type = type;
  rta->rta_len = uint16_t(RTA_LENGTH(len));
  std::memcpy(RTA_DATA(rta), data, len);
  n->nlmsg_len = uint32_t(NLMSG_ALIGN(n->nlmsg_len) + RTA_ALIGN(rta->rta_len));
}

// Sends one request and returns the first reply message (copied into buf).
Result<nlmsghdr*> transact(nlmsghdr* req, char* buf, size_t cap) {
  Fd s{socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE)};
  if (s.fd < 0) return errno_error(errno, "netlink socket");
  sockaddr_nl sa{};
  sa.nl_family = AF_NETLINK;
  if (sendto(s.fd, req, req->nlmsg_len, 0, reinterpret_cast<sockaddr*>(&sa), sizeof sa) < 0)
    return errno_error(errno, "netlink send");
  ssize_t n = recv(s.fd, buf, cap, 0);
  if (n < 0) return errno_error(errno, "netlink receive");
  auto* h = reinterpret_cast<nlmsghdr*>(buf);
  if (!NLMSG_OK(h, uint32_t(n))) return make_error(EIO, "netlink: short reply");
  if (h->nlmsg_type == NLMSG_ERROR) {
    auto* e = static_cast<nlmsgerr*>(NLMSG_DATA(h));
    return errno_error(e->error ? e->error : -ENOENT, "netlink");
  }
  return h;
}

// Next hop towards dst out of ifindex: the gateway of the route, or dst itself.
Result<codec::IpAddr> next_hop(int ifindex, const codec::IpAddr& dst) {
  alignas(nlmsghdr) char rq[256] = {};
  auto* n = reinterpret_cast<nlmsghdr*>(rq);
  auto* rm = static_cast<rtmsg*>(NLMSG_DATA(n));
  n->nlmsg_len = NLMSG_LENGTH(sizeof(rtmsg));
  n->nlmsg_type = RTM_GETROUTE;
  n->nlmsg_flags = NLM_F_REQUEST;
  rm->rtm_family = uint8_t(family(dst));
  rm->rtm_dst_len = uint8_t(alen(dst) * 8);
  add_attr(n, RTA_DST, dst.b.data(), alen(dst));
  uint32_t oif = uint32_t(ifindex);
  add_attr(n, RTA_OIF, &oif, sizeof oif);
  char buf[8192];
  auto h = transact(n, buf, sizeof buf);
  if (!h) return std::move(h).error().wrap("route to " + to_string(dst));
  auto* r = static_cast<rtmsg*>(NLMSG_DATA(*h));
  int len = int((*h)->nlmsg_len - NLMSG_LENGTH(sizeof(rtmsg)));
  codec::IpAddr hop = dst;
  for (rtattr* a = RTM_RTA(r); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
    if (a->rta_type == RTA_GATEWAY && RTA_PAYLOAD(a) == alen(dst)) std::memcpy(hop.b.data(), RTA_DATA(a), alen(dst));
    if (a->rta_type == RTA_OIF && *static_cast<int*>(RTA_DATA(a)) != ifindex)
      return make_error(ENETUNREACH, "the route to " + to_string(dst) + " leaves through another interface");
  }
  return hop;
}

// The neighbour entry's MAC when it is usable.
Result<codec::Mac> lookup_neigh(int ifindex, const codec::IpAddr& ip) {
  alignas(nlmsghdr) char rq[256] = {};
  auto* n = reinterpret_cast<nlmsghdr*>(rq);
  auto* ndm = static_cast<ndmsg*>(NLMSG_DATA(n));
  n->nlmsg_len = NLMSG_LENGTH(sizeof(ndmsg));
  n->nlmsg_type = RTM_GETNEIGH;
  n->nlmsg_flags = NLM_F_REQUEST;
  ndm->ndm_family = uint8_t(family(ip));
  ndm->ndm_ifindex = ifindex;
  add_attr(n, NDA_DST, ip.b.data(), alen(ip));
  char buf[8192];
  auto h = transact(n, buf, sizeof buf);
  if (!h) return std::move(h).error();
  auto* nd = static_cast<ndmsg*>(NLMSG_DATA(*h));
  if (nd->ndm_state & (NUD_INCOMPLETE | NUD_FAILED | NUD_NONE))
    return make_error(EAGAIN, "neighbour unresolved");
  int len = int((*h)->nlmsg_len - NLMSG_LENGTH(sizeof(ndmsg)));
  for (rtattr* a = reinterpret_cast<rtattr*>(reinterpret_cast<char*>(nd) + NLMSG_ALIGN(sizeof(ndmsg)));
       RTA_OK(a, len); a = RTA_NEXT(a, len)) {
    if (a->rta_type == NDA_LLADDR && RTA_PAYLOAD(a) == 6) {
      codec::Mac m;
      std::memcpy(m.data(), RTA_DATA(a), 6);
      return m;
    }
  }
  return make_error(EAGAIN, "neighbour entry without a link-layer address");
}

// Makes the kernel resolve `ip` on the interface: one datagram to the discard port.
void nudge(int ifindex, const codec::IpAddr& ip) {
  Fd s{socket(family(ip), SOCK_DGRAM | SOCK_CLOEXEC, 0)};
  if (s.fd < 0) return;
  char name[IF_NAMESIZE] = {};
  if (if_indextoname(unsigned(ifindex), name))
    setsockopt(s.fd, SOL_SOCKET, SO_BINDTODEVICE, name, socklen_t(std::strlen(name)));
  char one = 0;
  if (ip.ver == codec::IpVersion::kV4) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(9);
    std::memcpy(&a.sin_addr, ip.b.data(), 4);
    sendto(s.fd, &one, 1, MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&a), sizeof a);
  } else {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(9);
    a.sin6_scope_id = uint32_t(ifindex);
    std::memcpy(&a.sin6_addr, ip.b.data(), 16);
    sendto(s.fd, &one, 1, MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&a), sizeof a);
  }
}

}  // namespace

std::string to_string(const codec::IpAddr& a) {
  char s[INET6_ADDRSTRLEN] = {};
  inet_ntop(family(a), a.b.data(), s, sizeof s);
  return s;
}

Result<codec::IpAddr> parse_ip(const std::string& s) {
  codec::IpAddr a;
  if (inet_pton(AF_INET, s.c_str(), a.b.data()) == 1) {
    a.ver = codec::IpVersion::kV4;
    return a;
  }
  if (inet_pton(AF_INET6, s.c_str(), a.b.data()) == 1) {
    a.ver = codec::IpVersion::kV6;
    return a;
  }
  return make_error(EINVAL, "'" + s + "' is not an IPv4 or IPv6 address");
}

Result<codec::Mac> resolve_next_hop(int ifindex, const codec::IpAddr& dst, int timeout_ms) {
  auto hop = next_hop(ifindex, dst);
  if (!hop) return std::move(hop).error();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  bool nudged = false;
  while (true) {
    auto m = lookup_neigh(ifindex, *hop);
    if (m) return m;
    if (m.error().code != EAGAIN && m.error().code != ENOENT) return std::move(m).error().wrap("neighbour " + to_string(*hop));
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
