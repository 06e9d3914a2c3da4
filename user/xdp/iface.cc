#include "xdp/iface.hpp"

#include <arpa/inet.h>
#include <bpf/libbpf.h>
#include <ifaddrs.h>
#include <linux/ethtool.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#ifndef IFF_LOWER_UP
#define IFF_LOWER_UP (1 << 16)
#endif

namespace mrc::xdp {

const char* to_string(XdpMode m) {
  switch (m) {
    case XdpMode::kNone:
      return "none";
    case XdpMode::kNative:
      return "native";
    case XdpMode::kGeneric:
      return "generic";
    case XdpMode::kOffload:
      return "offload";
    case XdpMode::kMulti:
      return "multi";
  }
  return "?";
}

std::string InterfaceInfo::mac_string() const {
  char buf[18];
  std::snprintf(buf, sizeof(buf), "%02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1], mac[2], mac[3],
                mac[4], mac[5]);
  return buf;
}

namespace {

struct LinkReply {
  int ifindex = 0;
  unsigned flags = 0;
  uint32_t mtu = 0;
  uint8_t operstate = 0;
  uint32_t num_rx = 0, num_tx = 0;
  std::array<uint8_t, 6> mac{};
};

void parse_link(const nlmsghdr* h, LinkReply& out) {
  const auto* ifi = static_cast<const ifinfomsg*>(NLMSG_DATA(h));
  out.ifindex = ifi->ifi_index;
  out.flags = ifi->ifi_flags;
  int len = static_cast<int>(h->nlmsg_len) - static_cast<int>(NLMSG_LENGTH(sizeof(*ifi)));
  for (const rtattr* a = IFLA_RTA(ifi); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
    const void* d = RTA_DATA(a);
    const size_t n = RTA_PAYLOAD(a);
    switch (a->rta_type) {
      case IFLA_MTU:
        if (n >= 4) std::memcpy(&out.mtu, d, 4);
        break;
      case IFLA_OPERSTATE:
        if (n >= 1) out.operstate = *static_cast<const uint8_t*>(d);
        break;
      case IFLA_NUM_RX_QUEUES:
        if (n >= 4) std::memcpy(&out.num_rx, d, 4);
        break;
      case IFLA_NUM_TX_QUEUES:
        if (n >= 4) std::memcpy(&out.num_tx, d, 4);
        break;
      case IFLA_ADDRESS:
        if (n == 6) std::memcpy(out.mac.data(), d, 6);
        break;
      default:
        break;
    }
  }
}

Result<LinkReply> get_link(int ifindex, const std::string& name) {
  UniqueFd fd(socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE));
  if (!fd) return make_error(errno, "rtnetlink socket");
  struct {
    nlmsghdr h;
    ifinfomsg ifi;
  } req{};
  req.h.nlmsg_len = NLMSG_LENGTH(sizeof(ifinfomsg));
  req.h.nlmsg_type = RTM_GETLINK;
  req.h.nlmsg_flags = NLM_F_REQUEST;
  req.h.nlmsg_seq = 1;
  req.ifi.ifi_family = AF_UNSPEC;
  req.ifi.ifi_index = ifindex;
  if (send(fd.get(), &req, req.h.nlmsg_len, 0) < 0) return make_error(errno, "RTM_GETLINK " + name);
  alignas(nlmsghdr) char buf[16384];
  const ssize_t got = recv(fd.get(), buf, sizeof(buf), 0);
  if (got < 0) return make_error(errno, "RTM_GETLINK reply for " + name);
  unsigned len = static_cast<unsigned>(got);
  for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
    if (h->nlmsg_type == NLMSG_ERROR) {
      const auto* e = static_cast<const nlmsgerr*>(NLMSG_DATA(h));
      return make_error(e->error ? -e->error : EIO, "RTM_GETLINK " + name);
    }
    if (h->nlmsg_type == RTM_NEWLINK) {
      LinkReply r;
      parse_link(h, r);
      return r;
    }
  }
  return make_error(EIO, "RTM_GETLINK " + name + ": no link in the reply");
}

}  // namespace

Result<QueueInfo> query_queues(const std::string& name) {
  QueueInfo q;
  UniqueFd sock(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!sock) return make_error(errno, "socket for ethtool on " + name);
  ethtool_channels ch{};
  ch.cmd = ETHTOOL_GCHANNELS;
  ifreq ifr{};
  std::snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name.c_str());
  ifr.ifr_data = reinterpret_cast<char*>(&ch);
  if (ioctl(sock.get(), SIOCETHTOOL, &ifr) == 0) {
    q.rx = ch.rx_count;
    q.tx = ch.tx_count;
    q.combined = ch.combined_count;
    q.from_ethtool = true;
    uint32_t usable = ch.combined_count;
    if (ch.rx_count && ch.tx_count) usable += std::min(ch.rx_count, ch.tx_count);
    q.usable = usable;
  }
  if (!q.from_ethtool || q.usable == 0) {
    // No ethtool channels: the real queue counts from rtnetlink.
    const int ifindex = static_cast<int>(if_nametoindex(name.c_str()));
    if (ifindex == 0) return make_error(errno, "interface " + name);
    auto l = get_link(ifindex, name);
    if (!l) return std::move(l).error();
    if (!q.from_ethtool) {
      q.rx = l->num_rx;
      q.tx = l->num_tx;
    }
    q.usable = std::min(l->num_rx, l->num_tx);
  }
  q.usable = std::max<uint32_t>(q.usable, 1);
  return q;
}

Result<XdpAttachInfo> query_xdp(int ifindex) {
  LIBBPF_OPTS(bpf_xdp_query_opts, opts);
  const int err = bpf_xdp_query(ifindex, 0, &opts);
  if (err) return errno_error(err, "bpf_xdp_query ifindex " + std::to_string(ifindex));
  XdpAttachInfo x;
  switch (opts.attach_mode) {
    case XDP_ATTACHED_DRV:
      x.mode = XdpMode::kNative;
      break;
    case XDP_ATTACHED_SKB:
      x.mode = XdpMode::kGeneric;
      break;
    case XDP_ATTACHED_HW:
      x.mode = XdpMode::kOffload;
      break;
    case XDP_ATTACHED_MULTI:
      x.mode = XdpMode::kMulti;
      break;
    default:
      x.mode = XdpMode::kNone;
      break;
  }
  x.prog_id = opts.prog_id;
  x.drv_prog_id = opts.drv_prog_id;
  x.skb_prog_id = opts.skb_prog_id;
  x.hw_prog_id = opts.hw_prog_id;
  return x;
}

Result<InterfaceInfo> query_interface(const std::string& name) {
  InterfaceInfo info;
  info.name = name;
  info.ifindex = static_cast<int>(if_nametoindex(name.c_str()));
  if (info.ifindex == 0) return make_error(errno, "interface " + name);
  auto l = get_link(info.ifindex, name);
  if (!l) return std::move(l).error();
  info.mac = l->mac;
  info.mtu = l->mtu;
  info.admin_up = (l->flags & IFF_UP) != 0;
  info.link_up = (l->flags & IFF_LOWER_UP) != 0;
  info.operstate = l->operstate;
  auto q = query_queues(name);
  if (!q) return std::move(q).error();
  info.queues = *q;
  auto x = query_xdp(info.ifindex);
  if (!x) return std::move(x).error();
  info.xdp = *x;

  ifaddrs* ifa = nullptr;
  if (getifaddrs(&ifa) != 0) return make_error(errno, "getifaddrs");
  for (ifaddrs* p = ifa; p; p = p->ifa_next) {
    if (!p->ifa_addr || !p->ifa_name || name != p->ifa_name) continue;
    if (p->ifa_addr->sa_family == AF_INET)
      info.ipv4.push_back(reinterpret_cast<const sockaddr_in*>(p->ifa_addr)->sin_addr);
    else if (p->ifa_addr->sa_family == AF_INET6)
      info.ipv6.push_back(reinterpret_cast<const sockaddr_in6*>(p->ifa_addr)->sin6_addr);
  }
  freeifaddrs(ifa);
  return info;
}

Result<LinkMonitor> LinkMonitor::open() {
  LinkMonitor m;
  m.fd_.reset(socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_ROUTE));
  if (!m.fd_) return make_error(errno, "rtnetlink socket for link events");
  sockaddr_nl sa{};
  sa.nl_family = AF_NETLINK;
  sa.nl_groups = RTMGRP_LINK;
  if (bind(m.fd_.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0)
    return make_error(errno, "binding rtnetlink to RTMGRP_LINK");
  return m;
}

Result<size_t> LinkMonitor::read(std::vector<LinkState>& out) {
  size_t n = 0;
  alignas(nlmsghdr) char buf[16384];
  for (;;) {
    const ssize_t got = recv(fd_.get(), buf, sizeof(buf), MSG_DONTWAIT);
    if (got < 0) {
      if (errno == EAGAIN || errno == EINTR) break;
      // ENOBUFS: the kernel dropped events; the caller re-queries its links.
      return make_error(errno, "reading link events");
    }
    unsigned len = static_cast<unsigned>(got);
    for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
      if (h->nlmsg_type != RTM_NEWLINK && h->nlmsg_type != RTM_DELLINK) continue;
      LinkReply r;
      parse_link(h, r);
      LinkState s;
      s.ifindex = r.ifindex;
      const bool gone = h->nlmsg_type == RTM_DELLINK;
      s.admin_up = !gone && (r.flags & IFF_UP);
      s.link_up = !gone && (r.flags & IFF_LOWER_UP);
      s.mtu = r.mtu;
      out.push_back(s);
      ++n;
    }
  }
  return n;
}

}  // namespace mrc::xdp
