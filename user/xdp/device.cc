#include "xdp/device.hpp"

#include <algorithm>
#include <cerrno>
#include <new>
#include <string>

#include "xdp/netns.hpp"

namespace mrc::xdp {

Device::Device() = default;
Device::Device(Device&&) noexcept = default;
Device& Device::operator=(Device&& o) noexcept {
  if (this != &o) {
    this->~Device();
    new (this) Device(std::move(o));
  }
  return *this;
}
Device::~Device() {
  // Sockets first (they point into the UMEM), then the UMEM.
  sockets_.clear();
}

Result<Device> Device::open(const DeviceConfig& cfg) {
  if (cfg.ports.empty()) return make_error(EINVAL, "AF_XDP device without interfaces");
  if (cfg.ports.size() > UINT16_MAX) return make_error(EINVAL, "too many interfaces");
  Device d;
  auto ns = ScopedNetns::current();
  if (!ns) return std::move(ns).error();
  d.netns_ = std::move(*ns);

  // Interfaces and their queues first: a missing interface fails before any
  // memory is registered.
  std::vector<std::pair<uint32_t, uint32_t>> qranges;  // first, count per port
  uint32_t total = 0;
  for (const PortConfig& pc : cfg.ports) {
    auto info = query_interface(pc.ifname);
    if (!info) return std::move(info).error().wrap("AF_XDP device");
    const uint32_t usable = info->queues.usable;
    if (pc.first_queue >= usable)
      return make_error(EINVAL, pc.ifname + ": first queue " + std::to_string(pc.first_queue) +
                                    " but the interface has " + std::to_string(usable) +
                                    " usable queues");
    const uint32_t count = pc.queues ? pc.queues : usable - pc.first_queue;
    if (pc.first_queue + count > usable)
      return make_error(EINVAL, pc.ifname + ": queues " + std::to_string(pc.first_queue) + ".." +
                                    std::to_string(pc.first_queue + count - 1) +
                                    " but the interface has " + std::to_string(usable) +
                                    " usable queues");
    Port p;
    p.info = std::move(*info);
    p.first_socket = total;
    p.socket_count = count;
    d.ports_.push_back(std::move(p));
    qranges.emplace_back(pc.first_queue, count);
    total += count;
  }
  if (total > UINT16_MAX) return make_error(EINVAL, "too many AF_XDP sockets");

  auto umem = Umem::create(cfg.umem);
  if (!umem) return std::move(umem).error();
  d.umem_ = std::move(*umem);

  SocketConfig scfg = cfg.socket;
  if (scfg.fill_target == 0) {
    // Half of the frames wait in fill rings, half stay free for TX.
    const uint32_t spans = cfg.umem.tx_chunks > 1 ? cfg.umem.tx_frames * cfg.umem.tx_chunks : 0;
    const uint32_t share =
        (cfg.umem.frame_count - std::min(spans, cfg.umem.frame_count)) / (2 * total);
    scfg.fill_target = std::max<uint32_t>(std::min(share, cfg.umem.fill_size), 1);
  }
  d.sockets_.reserve(total);
  for (size_t pi = 0; pi < d.ports_.size(); ++pi) {
    const auto [first, count] = qranges[pi];
    for (uint32_t q = first; q < first + count; ++q) {
      auto s = XskSocket::create(d.umem_, cfg.ports[pi].ifname, q, scfg, static_cast<uint16_t>(pi),
                                 static_cast<uint16_t>(d.sockets_.size()));
      if (!s) return std::move(s).error();
      d.sockets_.push_back(std::move(*s));
    }
  }
  // The default program (if libxdp loaded one) shows in the XDP facts now.
  for (Port& p : d.ports_) {
    auto x = query_xdp(p.info.ifindex);
    if (x) p.info.xdp = *x;
  }

  for (const XskSocket& s : d.sockets_) d.pfds_.push_back({s.fd(), POLLIN, 0});
  d.watch_links_ = cfg.watch_links;
  if (cfg.watch_links) {
    auto lm = LinkMonitor::open();
    if (!lm) return std::move(lm).error();
    d.links_ = std::move(*lm);
    d.pfds_.push_back({d.links_.fd(), POLLIN, 0});
  }
  return d;
}

XskSocket* Device::socket(uint16_t port, uint32_t queue) {
  if (port >= ports_.size()) return nullptr;
  const Port& p = ports_[port];
  for (uint32_t i = 0; i < p.socket_count; ++i) {
    XskSocket& s = sockets_[p.first_socket + i];
    if (s.queue() == queue) return &s;
  }
  return nullptr;
}

BindMode Device::mode() const {
  return sockets_.empty() ? BindMode::kAuto : sockets_.front().mode();
}

uint32_t Device::rx(std::span<RxFrame> out) {
  const uint32_t ns = static_cast<uint32_t>(sockets_.size());
  uint32_t n = 0;
  for (uint32_t i = 0; i < ns && n < out.size(); ++i) {
    n += sockets_[rr_].rx(out.subspan(n));
    if (++rr_ == ns) rr_ = 0;
  }
  return n;
}

void Device::release(std::span<const RxFrame> frames) {
  size_t i = 0;
  while (i < frames.size()) {
    const uint16_t s = frames[i].socket;
    size_t j = i + 1;
    while (j < frames.size() && frames[j].socket == s) ++j;
    sockets_[s].release(frames.subspan(i, j - i));
    i = j;
  }
}

bool Device::flush_tx() {
  bool drained = true;
  for (XskSocket& s : sockets_) drained &= s.flush_tx();
  return drained;
}

Result<int> Device::wait(int timeout_ms) {
  for (size_t i = 0; i < sockets_.size(); ++i)
    pfds_[i].events = static_cast<short>(POLLIN | (sockets_[i].tx_ring_pending() ? POLLOUT : 0));
  const int n = ::poll(pfds_.data(), pfds_.size(), timeout_ms);
  if (n < 0) {
    if (errno == EINTR) return 0;
    return make_error(errno, "poll on AF_XDP sockets");
  }
  if (watch_links_ && (pfds_.back().revents & POLLIN)) {
    auto r = process_link_events();
    if (!r) return std::move(r).error();
  }
  return n;
}

Result<size_t> Device::process_link_events() {
  if (!watch_links_) return size_t{0};
  link_events_.clear();
  auto r = links_.read(link_events_);
  if (!r) {
    if (r.error().code == ENOBUFS) {  // events lost: read the facts again
      MRC_TRY(refresh());
      return ports_.size();
    }
    return std::move(r).error();
  }
  size_t mine = 0;
  for (const LinkState& e : link_events_) {
    for (Port& p : ports_) {
      if (p.info.ifindex != e.ifindex) continue;
      p.info.admin_up = e.admin_up;
      p.info.link_up = e.link_up;
      if (e.mtu) p.info.mtu = e.mtu;
      ++mine;
    }
  }
  return mine;
}

Status Device::refresh() {
  auto ns = ScopedNetns::enter_if_other(netns_.get());
  if (!ns) return std::move(ns).error();
  for (Port& p : ports_) {
    auto info = query_interface(p.info.name);
    if (!info) return std::move(info).error().wrap("refreshing AF_XDP device");
    p.info = std::move(*info);
  }
  return ok_status();
}

Status Device::insert_into_xskmap(int xskmap_fd,
                                  const std::function<uint32_t(uint16_t, uint32_t)>& key) const {
  for (const XskSocket& s : sockets_)
    MRC_TRY(s.insert_into_xskmap(xskmap_fd, key(s.port(), s.queue())));
  return ok_status();
}

XskCounters Device::counters() const {
  XskCounters t;
  for (const XskSocket& s : sockets_) {
    const XskCounters& c = s.counters();
    t.rx_frames += c.rx_frames;
    t.rx_bytes += c.rx_bytes;
    t.rx_bursts += c.rx_bursts;
    t.rx_wakeups += c.rx_wakeups;
    t.fill_frames += c.fill_frames;
    t.fill_short += c.fill_short;
    t.tx_frames += c.tx_frames;
    t.tx_bytes += c.tx_bytes;
    t.tx_completed += c.tx_completed;
    t.tx_kicks += c.tx_kicks;
    t.tx_kick_again += c.tx_kick_again;
    t.tx_kick_busy += c.tx_kick_busy;
    t.tx_kick_nobufs += c.tx_kick_nobufs;
    t.tx_kick_errors += c.tx_kick_errors;
    t.tx_ring_full += c.tx_ring_full;
    t.reap_batches += c.reap_batches;
    t.pool_empty += c.pool_empty;
  }
  return t;
}

Result<XskKernelStats> Device::kernel_stats() const {
  XskKernelStats t;
  for (const XskSocket& s : sockets_) {
    auto k = s.kernel_stats();
    if (!k) return std::move(k).error();
    t.rx_dropped += k->rx_dropped;
    t.rx_invalid_descs += k->rx_invalid_descs;
    t.tx_invalid_descs += k->tx_invalid_descs;
    t.rx_ring_full += k->rx_ring_full;
    t.rx_fill_ring_empty_descs += k->rx_fill_ring_empty_descs;
    t.tx_ring_empty_descs += k->tx_ring_empty_descs;
  }
  return t;
}

}  // namespace mrc::xdp
