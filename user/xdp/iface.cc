#include "xdp/iface.hpp"

#include <arpa/inet.h>
#include <bpf/libbpf.h>
#include <ifaddrs.h>
#include <linux/ethtool.h>
#include <linux/if_link.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <span>

#include "xdp/netlink.hpp"

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

void parse_link(const nlmsghdr& h, LinkReply& out) {
  const auto* ifi = netlink::header<ifinfomsg>(h);
  if (!ifi) return;
  out.ifindex = ifi->ifi_index;
  out.flags = ifi->ifi_flags;
  netlink::for_each_attr<ifinfomsg>(h, [&](uint16_t type, std::span<const uint8_t> d) {
    switch (type) {
      case IFLA_MTU:
        if (d.size() >= 4) std::memcpy(&out.mtu, d.data(), 4);
        break;
      case IFLA_OPERSTATE:
        if (d.size() >= 1) out.operstate = d[0];
        break;
      case IFLA_NUM_RX_QUEUES:
        if (d.size() >= 4) std::memcpy(&out.num_rx, d.data(), 4);
        break;
      case IFLA_NUM_TX_QUEUES:
        if (d.size() >= 4) std::memcpy(&out.num_tx, d.data(), 4);
        break;
      case IFLA_ADDRESS:
        if (d.size() == 6) std::memcpy(out.mac.data(), d.data(), 6);
        break;
      default:
        break;
    }
  });
}

Result<LinkReply> get_link(int ifindex, const std::string& name) {
  auto nl = netlink::Socket::open();
  if (!nl) return std::move(nl).error();
  ifinfomsg ifi{};
  ifi.ifi_family = AF_UNSPEC;
  ifi.ifi_index = ifindex;
  netlink::Request req(RTM_GETLINK, 0, ifi);
  LinkReply r;
  bool found = false;
  auto st = nl->request(req, "RTM_GETLINK " + name, [&](const nlmsghdr& h) {
    if (h.nlmsg_type != RTM_NEWLINK || found) return;
    parse_link(h, r);
    found = true;
  });
  if (!st) return std::move(st).error();
  if (!found) return make_error(EIO, "RTM_GETLINK " + name + ": no link in the reply");
  return r;
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
  auto nl = netlink::Socket::open(RTMGRP_LINK);
  if (!nl) return std::move(nl).error().wrap("rtnetlink socket for link events");
  LinkMonitor m;
  m.nl_ = std::move(*nl);
  return m;
}

Result<size_t> LinkMonitor::read(std::vector<LinkState>& out) {
  size_t n = 0;
  // ENOBUFS: the kernel dropped events; the caller re-queries its links.
  auto r = nl_.drain([&](const nlmsghdr& h) {
    if (h.nlmsg_type != RTM_NEWLINK && h.nlmsg_type != RTM_DELLINK) return;
    LinkReply l;
    parse_link(h, l);
    LinkState s;
    s.ifindex = l.ifindex;
    const bool gone = h.nlmsg_type == RTM_DELLINK;
    s.admin_up = !gone && (l.flags & IFF_UP);
    s.link_up = !gone && (l.flags & IFF_LOWER_UP);
    s.mtu = l.mtu;
    out.push_back(s);
    ++n;
  });
  if (!r) return std::move(r).error().wrap("reading link events");
  return n;
}

}  // namespace mrc::xdp
