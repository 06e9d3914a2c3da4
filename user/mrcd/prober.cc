#include "mrcd/prober.hpp"

#include <arpa/inet.h>
#include <linux/filter.h>
#include <linux/if_packet.h>
#include <linux/neighbour.h>
#include <linux/rtnetlink.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <span>

#include "ctl/proto.hpp"
#include "mrcd/log.hpp"
#include "xdp/netlink.hpp"

namespace mrc::mrcd {

namespace {

uint64_t real_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
}

// Accepts IPv4/IPv6 UDP frames to `port` whose BTH opcode is ENDPOINT_RESPONSE.
std::vector<sock_filter> ep_response_filter(uint16_t port) {
  return {
      BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 12),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ETH_P_IP, 1, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ETH_P_IPV6, 9, 16),
      BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 23),  // IPv4 protocol
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_UDP, 0, 14),
      BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 20),  // fragment offset / MF
      BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x1fff, 12, 0),
      BPF_STMT(BPF_LDX | BPF_B | BPF_MSH, 14),  // X = IHL * 4
      BPF_STMT(BPF_LD | BPF_H | BPF_IND, 16),   // UDP destination port
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, port, 0, 9),
      BPF_STMT(BPF_LD | BPF_B | BPF_IND, 22),  // BTH opcode
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, MRC_OP_EP_RESPONSE, 6, 7),
      BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 20),  // IPv6 next header
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_UDP, 0, 5),
      BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 56),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, port, 0, 3),
      BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 62),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, MRC_OP_EP_RESPONSE, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, 0x40000),
      BPF_STMT(BPF_RET | BPF_K, 0),
  };
}

}  // namespace

Prober::Prober(const Config& cfg, Dataplane& dp) : cfg_(cfg), dp_(dp) {}

Prober::~Prober() = default;

Status Prober::open() {
  for (const Plane& p : dp_.planes()) {
    UniqueFd sock(socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!sock) return Error(errno, "AF_PACKET socket for " + p.cfg.ifname);
    const int fd = sock.get();
    auto prog = ep_response_filter(cfg_.udp_port);
    sock_fprog fp{uint16_t(prog.size()), prog.data()};
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &fp, sizeof(fp)) ||
        setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one))) {
      return Error(errno, "configuring the AF_PACKET socket of " + p.cfg.ifname);
    }
    setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one));
    sockaddr_ll sll{};
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_ALL);
    sll.sll_ifindex = int(p.ifindex);
    if (bind(fd, reinterpret_cast<sockaddr*>(&sll), sizeof(sll))) {
      return Error(errno, "binding the AF_PACKET socket to " + p.cfg.ifname);
    }
    socks_.push_back({p.cfg.port, std::move(sock)});
  }
  // Passed responses that no socket wants would draw ICMP port unreachables.
  UniqueFd sink(socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (sink) {
    const int s = sink.get();
    int zero = 0;
    setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(cfg_.udp_port);
    if (bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
      sinks_.push_back(std::move(sink));
    } else {
      MRCD_WARN("UDP port %u is taken (%s): passed EP responses may draw ICMP port unreachables",
                cfg_.udp_port, strerror(errno));
    }
  }
  auto nl = xdp::netlink::Socket::open(0, 200);
  if (!nl) return std::move(nl).error();
  nl_ = std::move(*nl);
  return ok_status();
}

std::vector<int> Prober::fds() const {
  std::vector<int> v;
  for (const Sock& s : socks_) v.push_back(s.fd.get());
  for (const UniqueFd& s : sinks_) v.push_back(s.get());
  return v;
}

Status Prober::transmit(const ctl::EpWire& w, bool* waiting) {
  *waiting = false;
  const Plane* pl = nullptr;
  for (const Plane& p : dp_.planes())
    if (p.cfg.port == w.port) pl = &p;
  int fd = -1;
  for (const Sock& s : socks_)
    if (s.port == w.port) fd = s.fd.get();
  if (!pl || fd < 0)
    return Error(EINVAL, "port " + std::to_string(w.port) + " has no plane interface");
  const bool v6 = w.dst.ver == codec::IpVersion::kV6;
  // Source address: the one asked for (it must be the interface's) or the first of the family.
  codec::IpAddr src;
  bool have_src = false;
  for (const codec::IpAddr& a : dp_.addresses(*pl)) {
    if (a.ver != w.dst.ver) continue;
    if (w.src_set ? a == w.src : !have_src) src = a, have_src = true;
  }
  if (!have_src)
    return Error(EINVAL, pl->cfg.ifname + " has no " +
                             (w.src_set ? "such source address"
                                        : std::string(v6 ? "IPv6" : "IPv4") + " address"));
  // Next hop: the route's gateway on this interface, or the destination itself.
  codec::IpAddr hop = w.dst;
  {
    rtmsg rt{};
    rt.rtm_family = uint8_t(v6 ? AF_INET6 : AF_INET);
    rt.rtm_dst_len = v6 ? 128 : 32;
    xdp::netlink::Request m(RTM_GETROUTE, 0, rt);
    m.add(RTA_DST, w.dst.b.data(), v6 ? 16 : 4);
    m.add(RTA_OIF, uint32_t(pl->ifindex));
    auto st = nl_.request(m, "RTM_GETROUTE", [&](const nlmsghdr& r) {
      if (r.nlmsg_type != RTM_NEWROUTE) return;
      xdp::netlink::for_each_attr<rtmsg>(r, [&](uint16_t type, std::span<const uint8_t> d) {
        if (type == RTA_GATEWAY && d.size() >= (v6 ? 16u : 4u))
          std::memcpy(hop.b.data(), d.data(), v6 ? 16 : 4);
      });
    });
    if (!st)
      return Error(st.error().code,
                   "no route to " + ctl::proto::ip_string(w.dst) + " via " + pl->cfg.ifname);
  }
  // Its MAC.
  codec::Mac mac{};
  bool have_mac = false;
  {
    ndmsg nd{};
    nd.ndm_family = uint8_t(v6 ? AF_INET6 : AF_INET);
    nd.ndm_ifindex = int(pl->ifindex);
    xdp::netlink::Request m(RTM_GETNEIGH, 0, nd);
    m.add(NDA_DST, hop.b.data(), v6 ? 16 : 4);
    auto st = nl_.request(m, "RTM_GETNEIGH", [&](const nlmsghdr& r) {
      const auto* n = xdp::netlink::header<ndmsg>(r);
      if (r.nlmsg_type != RTM_NEWNEIGH || !n) return;
      const uint16_t ok =
          NUD_REACHABLE | NUD_STALE | NUD_DELAY | NUD_PROBE | NUD_PERMANENT | NUD_NOARP;
      if (!(n->ndm_state & ok)) return;
      xdp::netlink::for_each_attr<ndmsg>(r, [&](uint16_t type, std::span<const uint8_t> d) {
        if (type == NDA_LLADDR && d.size() == 6)
          std::memcpy(mac.data(), d.data(), 6), have_mac = true;
      });
    });
    (void)st;  // ENOENT: not resolved yet
  }
  if (!have_mac) {
    // Ask the kernel to resolve it (as if the stack sent to it) and retry later.
    ndmsg nd{};
    nd.ndm_family = uint8_t(v6 ? AF_INET6 : AF_INET);
    nd.ndm_ifindex = int(pl->ifindex);
    nd.ndm_state = NUD_NONE;
    nd.ndm_flags = NTF_USE;
    xdp::netlink::Request m(RTM_NEWNEIGH, NLM_F_CREATE | NLM_F_ACK, nd);
    m.add(NDA_DST, hop.b.data(), v6 ? 16 : 4);
    auto st = nl_.request(m, "RTM_NEWNEIGH");
    if (!st)
      MRCD_DEBUG("neighbour resolution of %s on %s: %s", ctl::proto::ip_string(hop).c_str(),
                 pl->cfg.ifname.c_str(), st.error().message().c_str());
    *waiting = true;
    return ok_status();
  }
  codec::Packet p;
  p.eth.src = pl->mac;
  p.eth.dst = mac;
  p.ip.src = src;
  p.ip.dst = w.dst;
  p.ip.dscp = w.dscp ? w.dscp : cfg_.dscp.control;
  p.ip.ttl = 64;
  p.udp.dport = cfg_.udp_port;
  codec::ev_apply(w.entropy,
                  w.fmt_mode == ctl::kFmtUdp ? codec::EvFmtMode::kUdp : codec::EvFmtMode::kStev,
                  p.ip, p.udp);
  p.bth.opcode = MRC_OP_EP_REQUEST;
  p.bth.dqpn = MRC_QPN_ENDPOINT;
  p.erth.op = w.op;
  p.erth.vendor_info = MRC_EP_VI_CONTROLLER;
  p.erth.req_id = w.req_id;
  p.erth.port_status = w.port_status;
  p.erth.tx_ts = uint16_t(ctl::mono_ns() >> MRC_TS_SHIFT);
  p.erth.entropy = w.entropy;
  uint8_t frame[256];
  size_t n = codec::build(p, frame);
  if (!n) return Error(EINVAL, "building the endpoint request");
  if (w.srv6)
    std::memcpy(frame + 14 + 24, w.sid.data(),
                w.sid.size());  // SRv6: the container (ICRC over w.dst)
  if (n < 60) {
    std::memset(frame + n, 0, 60 - n);
    n = 60;
  }
  const uint64_t t = real_ns();
  if (::send(fd, frame, n, 0) < 0) {
    ctr_.tx_errors++;
    return Error(errno, "sending on " + pl->cfg.ifname);
  }
  sent_[w.req_id] = Sent{t, w.port};
  ctr_.tx++;
  return ok_status();
}

Status Prober::send(const ctl::EpWire& w) {
  bool waiting = false;
  MRC_TRY(transmit(w, &waiting));
  if (waiting) {
    ctr_.neigh_waits++;
    const ctl::Time now = ctl::mono_ns();
    waiting_.push_back({w, now, now + 1'000'000});
  }
  return ok_status();
}

void Prober::cancel(std::span<const uint16_t> ids) {
  for (uint16_t id : ids) {
    sent_.erase(id);
    waiting_.erase(std::remove_if(waiting_.begin(), waiting_.end(),
                                  [id](const Waiting& w) { return w.w.req_id == id; }),
                   waiting_.end());
  }
}

void Prober::tick(ctl::Time now) {
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (it->next_try > now) {
      ++it;
      continue;
    }
    bool still = false;
    Status s = transmit(it->w, &still);
    if (!s || (still && now - it->since > 3'000'000'000ull)) {
      if (still) ctr_.neigh_failures++;
      it = waiting_.erase(it);
      continue;
    }
    if (still) {
      it->next_try = now + 1'000'000;
      ++it;
    } else {
      it = waiting_.erase(it);
    }
  }
}

ctl::Time Prober::next_deadline() const {
  ctl::Time t = ~ctl::Time(0);
  for (const Waiting& w : waiting_) t = std::min(t, w.next_try);
  return t;
}

bool Prober::read_one(int fd, uint8_t port, std::vector<ctl::EpArrival>* out) {
  uint8_t buf[2048];
  alignas(cmsghdr) uint8_t cbuf[256];
  iovec iov{buf, sizeof(buf)};
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = cbuf;
  mh.msg_controllen = sizeof(cbuf);
  ssize_t n = recvmsg(fd, &mh, MSG_DONTWAIT);
  if (n <= 0) return false;
  uint64_t rx = 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
      timespec ts;
      std::memcpy(&ts, CMSG_DATA(c), sizeof(ts));
      rx = uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
    }
  if (!rx) rx = real_ns();
  codec::Packet p;
  codec::CodecConfig cc;
  cc.udp_port = cfg_.udp_port;
  cc.dscp = cfg_.dscp;
  if (codec::parse({buf, size_t(n)}, cc, p) != codec::ParseError::kOk ||
      p.bth.opcode != MRC_OP_EP_RESPONSE) {
    ctr_.rx_parse_errors++;
    return true;
  }
  ctr_.rx++;
  if (!(p.eeth.vendor_info & MRC_EP_VI_CONTROLLER)) {
    ctr_.rx_unknown++;
    return true;
  }
  auto it = sent_.find(p.eeth.req_id);
  if (it == sent_.end()) {
    ctr_.rx_unknown++;
    return true;
  }
  uint64_t rtt = rx > it->second.tx_real_ns ? rx - it->second.tx_real_ns : 0;
  ctl::EpArrival a;
  a.req_id = p.eeth.req_id;
  a.port = port;
  if (p.eeth.flags & MRC_EETH_F_SVC_TIME) {
    rtt = rtt > p.eeth.svc_time_ns ? rtt - p.eeth.svc_time_ns : 0;
    a.adj_svc_time = true;
  }
  a.rtt_ns = uint32_t(std::min<uint64_t>(rtt, UINT32_MAX));
  a.from = p.ip.src;
  a.port_status = p.eeth.port_status;
  a.rx_port = p.eeth.rx_port;
  sent_.erase(it);
  out->push_back(a);
  return true;
}

void Prober::on_readable(int fd, std::vector<ctl::EpArrival>* out) {
  for (const UniqueFd& s : sinks_) {
    if (s.get() != fd) continue;
    uint8_t b[2048];
    while (recv(fd, b, sizeof(b), MSG_DONTWAIT) >= 0) ctr_.sink_drained++;
    return;
  }
  for (const Sock& s : socks_) {
    if (s.fd.get() != fd) continue;
    for (int i = 0; i < 64 && read_one(fd, s.port, out); i++) {
    }
    return;
  }
}

Status Prober::receive(ctl::Time wait_ns, std::vector<ctl::EpArrival>* out) {
  std::vector<pollfd> p;
  for (int fd : fds()) p.push_back({fd, POLLIN, 0});
  int ms = int(std::min<ctl::Time>(wait_ns / 1'000'000 + 1, 1000));
  if (!waiting_.empty()) ms = 1;
  int r = poll(p.data(), p.size(), ms);
  if (r < 0 && errno != EINTR) return Error(errno, "poll");
  for (const pollfd& x : p)
    if (x.revents & POLLIN) on_readable(x.fd, out);
  tick(ctl::mono_ns());
  return ok_status();
}

}  // namespace mrc::mrcd
