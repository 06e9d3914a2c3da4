#include "xdp/xsk_socket.hpp"

#include <bpf/bpf.h>
#include <linux/if_link.h>
#include <linux/if_xdp.h>
#include <net/if.h>
#include <sys/socket.h>
#include <time.h>
#include <xdp/xsk.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <new>
#include <string>

#include "xdp/netns.hpp"
#include "xdp/umem_state.hpp"

#ifndef SO_PREFER_BUSY_POLL
#define SO_PREFER_BUSY_POLL 69
#endif
#ifndef SO_BUSY_POLL_BUDGET
#define SO_BUSY_POLL_BUDGET 70
#endif
// Linux 6.17+: frames one sendto() processes in copy mode (default 32).
#ifndef XDP_USE_SG
#define XDP_USE_SG (1 << 4)
#endif
#ifndef XDP_PKT_CONTD
#define XDP_PKT_CONTD (1 << 0)
#endif
#ifndef XDP_MAX_TX_SKB_BUDGET
#define XDP_MAX_TX_SKB_BUDGET 9
#endif

namespace mrc::xdp {

namespace {
// Frames moved per internal chunk (stack buffers, no allocation).
constexpr uint32_t kChunk = 64;
// The kernel's frames-per-sendto in copy mode when it has no budget option.
constexpr uint32_t kKernelTxBatch = 32;
// Offset of the metadata magic in front of received data (copy mode puts data
// at frame + headroom + XDP_PACKET_HEADROOM).
constexpr uint32_t kMagicOff =
    kXdpPacketHeadroom - sizeof(mrc_xdp_meta) + offsetof(mrc_xdp_meta, magic);
}  // namespace

const char* to_string(BindMode m) {
  switch (m) {
    case BindMode::kAuto:
      return "auto";
    case BindMode::kCopy:
      return "copy";
    case BindMode::kZeroCopy:
      return "zero-copy";
  }
  return "?";
}

struct XskSocket::Rings {
  xsk_ring_cons rx{};
  xsk_ring_prod tx{};
  xsk_ring_prod fill_own{};
  xsk_ring_cons comp_own{};
  xsk_ring_prod* fill = nullptr;  // fill_own, or the Umem's first fill ring
  xsk_ring_cons* comp = nullptr;
  xsk_socket* xsk = nullptr;
  std::string ifname;
  int ifindex = 0;
  BindMode mode = BindMode::kCopy;
  uint32_t tx_budget = kKernelTxBatch;
  uint32_t tx_reserved = 0;  // reserved by tx_reserve(), not yet submitted or cancelled
  // The namespace the socket was made in: libxdp resolves the interface
  // there when it removes its default program at deletion.
  UniqueFd netns;

  Rings() = default;
  Rings(const Rings&) = delete;
  Rings& operator=(const Rings&) = delete;
  ~Rings() {
    if (!xsk) return;
    Result<ScopedNetns> ns =
        netns ? ScopedNetns::enter_if_other(netns.get()) : Result<ScopedNetns>(ScopedNetns());
    xsk_socket__delete(xsk);
  }
};

XskSocket::XskSocket() = default;
XskSocket::XskSocket(XskSocket&& o) noexcept = default;

XskSocket& XskSocket::operator=(XskSocket&& o) noexcept {
  if (this != &o) {
    this->~XskSocket();
    new (this) XskSocket(std::move(o));
  }
  return *this;
}

XskSocket::~XskSocket() {
  if (!r_) return;
  cache_.flush();
  r_.reset();  // xsk_socket__delete
  if (umem_) --umem_->sockets;
}

Result<XskSocket> XskSocket::create(Umem& umem, const std::string& ifname, uint32_t queue,
                                    const SocketConfig& cfg, uint16_t port, uint16_t socket_index) {
  Umem::State* us = umem.state();
  const std::string what = "AF_XDP socket on " + ifname + " queue " + std::to_string(queue);
  if (!us) return make_error(EINVAL, what + ": empty Umem");
  const bool first = !us->first_ring_taken;
  if (!first && us->sockets == 0)
    return make_error(EBUSY, what +
                                 ": every socket of this UMEM was closed; libxdp cannot "
                                 "bind new ones to it (create a new Umem)");
  const int ifindex = static_cast<int>(if_nametoindex(ifname.c_str()));
  if (ifindex == 0) return make_error(errno, what + ": no such interface");

  auto r = std::make_unique<Rings>();
  if (cfg.load_default_prog) {
    auto ns = ScopedNetns::current();
    if (!ns) return std::move(ns).error().wrap(what);
    r->netns = std::move(*ns);
  }
  r->ifname = ifname;
  r->ifindex = ifindex;
  if (first) {
    r->fill = &us->fill0;
    r->comp = &us->comp0;
  } else {
    r->fill = &r->fill_own;
    r->comp = &r->comp_own;
  }

  xsk_socket_config xc{};
  xc.rx_size = cfg.rx_size;
  xc.tx_size = cfg.tx_size;
  xc.libxdp_flags = cfg.load_default_prog ? 0 : XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD;
  xc.xdp_flags = cfg.xdp_flags;
  uint16_t bind = cfg.need_wakeup ? XDP_USE_NEED_WAKEUP : 0;
  // kAuto sets neither flag: the kernel then tries zero-copy and falls back
  // to copy mode by itself.
  if (cfg.bind_mode == BindMode::kCopy) bind |= XDP_COPY;
  if (cfg.bind_mode == BindMode::kZeroCopy) bind |= XDP_ZEROCOPY;
  if (cfg.multi_buffer) bind |= XDP_USE_SG;
  xc.bind_flags = bind;

  int err = 0;
  const auto give_up =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(cfg.bind_busy_wait_ms);
  for (;;) {
    err = xsk_socket__create_shared(&r->xsk, ifname.c_str(), queue, us->umem, &r->rx, &r->tx,
                                    r->fill, r->comp, &xc);
    if (err != -EBUSY || std::chrono::steady_clock::now() >= give_up) break;
    const timespec pause{0, 1000000};  // 1 ms: control path only
    nanosleep(&pause, nullptr);
  }
  if (err) {
    r->xsk = nullptr;
    std::string hint;
    if (-err == EOPNOTSUPP && !first)
      hint =
          " (sockets sharing a UMEM get its first socket's mode; this driver cannot do "
          "that mode - give it its own Device)";
    else if (-err == EOPNOTSUPP && cfg.bind_mode == BindMode::kZeroCopy)
      hint = " (the driver has no AF_XDP zero-copy support; use copy or auto)";
    else if (-err == EINVAL && cfg.multi_buffer)
      hint = " (multi-buffer AF_XDP needs Linux 6.6+; or queue beyond the interface's queue count)";
    else if (-err == EINVAL)
      hint = " (queue beyond the interface's queue count, or ring sizes not powers of two)";
    else if (-err == EBUSY)
      hint = " (another AF_XDP socket is bound to this queue)";
    else if (-err == EPERM)
      hint = " (needs CAP_NET_RAW, and CAP_NET_ADMIN/CAP_BPF to load a program)";
    return errno_error(err, "creating " + what + " (bind " + to_string(cfg.bind_mode) + ")" + hint);
  }
  // From here on Rings' destructor deletes the socket on any error. libxdp
  // has consumed the UMEM's first rings now, even if a later step fails.
  if (first) us->first_ring_taken = true;
  const int fd = xsk_socket__fd(r->xsk);

  xdp_options opts{};
  socklen_t olen = sizeof(opts);
  if (getsockopt(fd, SOL_XDP, XDP_OPTIONS, &opts, &olen) != 0)
    return make_error(errno, what + ": getsockopt(XDP_OPTIONS)");
  r->mode = (opts.flags & XDP_OPTIONS_ZEROCOPY) ? BindMode::kZeroCopy : BindMode::kCopy;
  if (cfg.bind_mode != BindMode::kAuto && r->mode != cfg.bind_mode)
    return make_error(EINVAL, what + ": asked for " + to_string(cfg.bind_mode) +
                                  " but the shared UMEM's first socket bound in " +
                                  to_string(r->mode) + " mode");

  if (cfg.busy_poll) {
    int one = 1;
    int usec = static_cast<int>(cfg.busy_poll_usec);
    int budget = static_cast<int>(cfg.busy_poll_budget);
    if (setsockopt(fd, SOL_SOCKET, SO_PREFER_BUSY_POLL, &one, sizeof(one)) != 0)
      return make_error(errno, what + ": setsockopt(SO_PREFER_BUSY_POLL)");
    if (setsockopt(fd, SOL_SOCKET, SO_BUSY_POLL, &usec, sizeof(usec)) != 0)
      return make_error(errno, what + ": setsockopt(SO_BUSY_POLL)");
    if (setsockopt(fd, SOL_SOCKET, SO_BUSY_POLL_BUDGET, &budget, sizeof(budget)) != 0)
      return make_error(errno, what + ": setsockopt(SO_BUSY_POLL_BUDGET)");
  }

  if (r->mode == BindMode::kCopy) {
    uint32_t budget = cfg.tx_budget ? cfg.tx_budget : cfg.tx_size;
    budget = std::clamp(budget, kKernelTxBatch, cfg.tx_size);
    if (setsockopt(fd, SOL_XDP, XDP_MAX_TX_SKB_BUDGET, &budget, sizeof(budget)) == 0) {
      r->tx_budget = budget;
    } else if (errno != ENOPROTOOPT) {
      return make_error(
          errno, what + ": setsockopt(XDP_MAX_TX_SKB_BUDGET, " + std::to_string(budget) + ")");
    }
  }

  if (first) us->need_wakeup = cfg.need_wakeup;
  ++us->sockets;

  XskSocket s;
  s.r_ = std::move(r);
  s.umem_ = us;
  s.area_ = static_cast<uint8_t*>(us->area.get());
  s.frame_mask_ = ~static_cast<uint64_t>(us->cfg.frame_size - 1);
  s.headroom_ = us->cfg.headroom;
  s.fill_target_ =
      std::min(cfg.fill_target ? cfg.fill_target : us->cfg.fill_size / 2, us->cfg.fill_size);
  s.max_kicks_ = std::max<uint32_t>(cfg.max_kicks, 1);
  s.port_ = port;
  s.index_ = socket_index;
  s.queue_ = queue;
  // Shared sockets inherit need_wakeup from the UMEM's first socket.
  s.need_wakeup_ = us->need_wakeup;
  s.busy_poll_ = cfg.busy_poll;
  s.clear_magic_ = cfg.clear_meta_magic;
  s.cache_ = FrameCache(&us->pool);
  s.multi_buffer_ = cfg.multi_buffer;
  s.chunk_size_ = us->cfg.frame_size;
  if (cfg.multi_buffer && us->cfg.tx_chunks > 1) {
    s.tx_chunks_ = us->cfg.tx_chunks;
    s.tx_base_ = us->tx_base;
    s.tx_span_ = uint64_t(us->cfg.tx_chunks) * us->cfg.frame_size;
    s.tx_cache_ = FrameCache(&us->tx_pool);
  }
  s.refill();
  return s;
}

// ---------------------------------------------------------------- RX

void XskSocket::fill_put(const uint64_t* addrs, uint32_t n) {
  xsk_ring_prod* fill = r_->fill;
  const uint32_t room = xsk_prod_nb_free(fill, n);
  const uint32_t k = std::min(n, room);
  if (k > 0) {
    uint32_t idx = 0;
    xsk_ring_prod__reserve(fill, k, &idx);
    for (uint32_t i = 0; i < k; ++i) {
      const uint64_t base = addrs[i] & frame_mask_;
      if (clear_magic_) {
        uint32_t* magic = reinterpret_cast<uint32_t*>(area_ + base + headroom_ + kMagicOff);
        *magic = 0;
      }
      *xsk_ring_prod__fill_addr(fill, idx + i) = base;
    }
    xsk_ring_prod__submit(fill, k);
    c_.fill_frames += k;
  }
  if (k < n) cache_.put(addrs + k, n - k);
}

uint32_t XskSocket::refill() {
  const uint64_t owned = c_.fill_frames - c_.rx_frames;  // frames the kernel holds for RX
  if (owned >= fill_target_) return 0;
  uint32_t want = fill_target_ - static_cast<uint32_t>(owned);
  uint32_t added = 0;
  uint64_t buf[kChunk];
  while (want > 0) {
    const uint32_t got = cache_.get(buf, std::min(want, kChunk));
    if (got == 0) break;
    const uint64_t before = c_.fill_frames;
    fill_put(buf, got);
    const uint32_t put = static_cast<uint32_t>(c_.fill_frames - before);
    added += put;
    want -= got;
    if (put < got) break;  // fill ring full
  }
  if (want > 0) ++c_.fill_short;
  return added;
}

uint32_t XskSocket::rx(std::span<RxFrame> out) {
  uint32_t idx = 0;
  uint32_t n = xsk_ring_cons__peek(&r_->rx, static_cast<uint32_t>(out.size()), &idx);
  if (n == 0) {
    if (busy_poll_ || (need_wakeup_ && xsk_ring_prod__needs_wakeup(r_->fill))) {
      recvfrom(xsk_socket__fd(r_->xsk), nullptr, 0, MSG_DONTWAIT, nullptr, nullptr);
      ++c_.rx_wakeups;
    }
    if (c_.fill_frames - c_.rx_frames < fill_target_ / 2) refill();
    return 0;
  }
  if (multi_buffer_) {
    // Whole packets only: a packet cut by out's size stays in the ring.
    uint32_t whole = n;
    while (whole > 0 && (xsk_ring_cons__rx_desc(&r_->rx, idx + whole - 1)->options & XDP_PKT_CONTD))
      --whole;
    if (whole < n) xsk_ring_cons__cancel(&r_->rx, n - whole);
    n = whole;
    if (n == 0) return 0;
  }
  const uint64_t offset_mask = ~frame_mask_;
  uint64_t bytes = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const xdp_desc* d = xsk_ring_cons__rx_desc(&r_->rx, idx + i);
    RxFrame& f = out[i];
    f.addr = d->addr;
    f.data = area_ + d->addr;
    f.len = d->len;
    f.meta_room = static_cast<uint32_t>(d->addr & offset_mask) - headroom_;
    f.socket = index_;
    f.port = port_;
    f.queue = queue_;
    f.more = (d->options & XDP_PKT_CONTD) != 0;
    bytes += d->len;
  }
  xsk_ring_cons__release(&r_->rx, n);
  c_.rx_frames += n;
  c_.rx_bytes += bytes;
  ++c_.rx_bursts;
  if (c_.fill_frames - c_.rx_frames < fill_target_ / 2) refill();
  return n;
}

void XskSocket::release(std::span<const RxFrame> frames) {
  uint64_t buf[kChunk];
  size_t i = 0;
  while (i < frames.size()) {
    const uint32_t k = static_cast<uint32_t>(std::min<size_t>(kChunk, frames.size() - i));
    for (uint32_t j = 0; j < k; ++j) buf[j] = frames[i + j].addr;
    fill_put(buf, k);
    i += k;
  }
}

void XskSocket::release_addrs(std::span<const uint64_t> addrs) {
  size_t i = 0;
  while (i < addrs.size()) {
    const uint32_t k = static_cast<uint32_t>(std::min<size_t>(kChunk, addrs.size() - i));
    fill_put(addrs.data() + i, k);
    i += k;
  }
}

uint32_t XskSocket::fill_level() const {
  const xsk_ring_prod* f = r_->fill;
  return *f->producer - __atomic_load_n(f->consumer, __ATOMIC_ACQUIRE);
}

// ---------------------------------------------------------------- TX

uint32_t XskSocket::reap() {
  xsk_ring_cons* comp = r_->comp;
  uint32_t total = 0;
  uint64_t buf[kChunk], spans[kChunk];
  for (;;) {
    uint32_t idx = 0;
    const uint32_t n = xsk_ring_cons__peek(comp, kChunk, &idx);
    if (n == 0) break;
    uint32_t k = 0, m = 0;
    for (uint32_t i = 0; i < n; ++i) {
      const uint64_t a = *xsk_ring_cons__comp_addr(comp, idx + i) & frame_mask_;
      if (tx_chunks_ == 1 || a < tx_base_)
        buf[k++] = a;
      else if (span_of(a) == a)
        // A multi-buffer frame's first descriptor frees it; the kernel
        // completes all its descriptors together (one skb).
        spans[m++] = a;
    }
    xsk_ring_cons__release(comp, n);
    cache_.put(buf, k);
    if (m) tx_cache_.put(spans, m);
    total += n;
    if (n < kChunk) break;
  }
  if (total) {
    ++c_.reap_batches;
    c_.tx_completed += total;
    tx_completed_ += total;
  }
  return total;
}

uint32_t XskSocket::tx_reserve(std::span<TxFrame> out) {
  if (tx_outstanding() > 0) reap();
  // Ring space is counted in descriptors: a multi-buffer frame may need
  // tx_chunks_ of them (tx_submit() takes only what its length needs).
  uint32_t want = static_cast<uint32_t>(out.size());
  const uint32_t need = want * tx_chunks_;
  const uint32_t ring_free = xsk_prod_nb_free(&r_->tx, need + r_->tx_reserved);
  const uint32_t space = ring_free > r_->tx_reserved ? ring_free - r_->tx_reserved : 0;
  if (space < need) {
    want = space / tx_chunks_;
    ++c_.tx_ring_full;
  }
  FrameCache& cache = tx_chunks_ > 1 ? tx_cache_ : cache_;
  const uint32_t room =
      static_cast<uint32_t>(tx_chunks_ > 1 ? tx_span_ : ~frame_mask_ + 1) - headroom_;
  uint32_t done = 0;
  uint64_t buf[kChunk];
  while (done < want) {
    const uint32_t ask = std::min(want - done, kChunk);
    const uint32_t got = cache.get(buf, ask);
    for (uint32_t i = 0; i < got; ++i) {
      TxFrame& f = out[done + i];
      f.addr = buf[i] + headroom_;
      f.data = area_ + f.addr;
      f.len = 0;
      f.room = room;
    }
    done += got;
    if (got < ask) {
      ++c_.pool_empty;
      break;
    }
  }
  r_->tx_reserved += done * tx_chunks_;
  return done;
}

void XskSocket::tx_cancel(std::span<const TxFrame> frames) {
  uint64_t buf[kChunk];
  size_t i = 0;
  FrameCache& cache = tx_chunks_ > 1 ? tx_cache_ : cache_;
  while (i < frames.size()) {
    const uint32_t k = static_cast<uint32_t>(std::min<size_t>(kChunk, frames.size() - i));
    for (uint32_t j = 0; j < k; ++j)
      buf[j] = tx_chunks_ > 1 ? span_of(frames[i + j].addr) : frames[i + j].addr & frame_mask_;
    cache.put(buf, k);
    i += k;
  }
  const uint32_t n = static_cast<uint32_t>(frames.size()) * tx_chunks_;
  r_->tx_reserved -= std::min(r_->tx_reserved, n);
}

void XskSocket::tx_submit(std::span<const TxFrame> frames, bool kick) {
  uint32_t n = static_cast<uint32_t>(frames.size());
  if (n == 0) return;
  // Descriptors: one per UMEM frame a multi-buffer frame's bytes touch.
  uint32_t descs = n;
  if (tx_chunks_ > 1) {
    descs = 0;
    for (const TxFrame& f : frames) descs += descs_of(f);
  }
  uint32_t idx = 0;
  if (xsk_ring_prod__reserve(&r_->tx, descs, &idx) != descs) {
    // Only reachable when frames did not come from tx_reserve(): queue what
    // fits and give the rest back rather than lose them.
    const uint32_t free = xsk_prod_nb_free(&r_->tx, descs);
    uint32_t fit = 0, fit_descs = 0;
    while (fit < n && fit_descs + descs_of(frames[fit]) <= free)
      fit_descs += descs_of(frames[fit++]);
    tx_cancel(frames.subspan(fit));
    n = fit;
    descs = fit_descs;
    if (n == 0 || xsk_ring_prod__reserve(&r_->tx, descs, &idx) != descs) return;
  }
  uint64_t bytes = 0;
  uint32_t k = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const TxFrame& f = frames[i];
    uint64_t addr = f.addr;
    uint32_t left = f.len;
    for (;;) {
      // Up to the end of the UMEM frame addr lies in (aligned mode).
      const uint32_t in_chunk = chunk_size_ - static_cast<uint32_t>(addr & ~frame_mask_);
      const uint32_t len = std::min(left, in_chunk);
      xdp_desc* d = xsk_ring_prod__tx_desc(&r_->tx, idx + k++);
      d->addr = addr;
      d->len = len;
      left -= len;
      d->options = left ? XDP_PKT_CONTD : 0;
      if (!left) break;
      addr += len;
    }
    bytes += f.len;
  }
  xsk_ring_prod__submit(&r_->tx, descs);
  r_->tx_reserved -= std::min(r_->tx_reserved, n * tx_chunks_);
  tx_submitted_ += descs;
  c_.tx_frames += n;
  c_.tx_bytes += bytes;
  // Zero-copy drivers that are polling the ring clear need_wakeup: no kick.
  if (kick && (!need_wakeup_ || xsk_ring_prod__needs_wakeup(&r_->tx))) kick_tx();
}

uint32_t XskSocket::tx_ring_pending() const {
  const xsk_ring_prod& tx = r_->tx;
  return *tx.producer - __atomic_load_n(tx.consumer, __ATOMIC_ACQUIRE);
}

void XskSocket::kick_tx() {
  const int fd = xsk_socket__fd(r_->xsk);
  uint32_t pending = tx_ring_pending();
  for (uint32_t k = 0; k < max_kicks_ && pending > 0; ++k) {
    const ssize_t ret = sendto(fd, nullptr, 0, MSG_DONTWAIT, nullptr, 0);
    ++c_.tx_kicks;
    if (ret >= 0) {
      // Zero-copy: the driver takes the ring asynchronously, one wakeup is all.
      if (r_->mode == BindMode::kZeroCopy) break;
      const uint32_t now = tx_ring_pending();
      if (now == pending) break;  // nothing taken (e.g. queue without a TX queue)
      pending = now;
      continue;
    }
    const int e = errno;
    if (e == EAGAIN) {
      // Budget used up with frames left, the completion ring full, or the
      // driver pushing back. Make completion room and go on while the kernel
      // makes progress; frames never leave the TX ring unsent.
      ++c_.tx_kick_again;
      reap();
    } else if (e == EBUSY) {
      ++c_.tx_kick_busy;  // the driver dropped one frame; it still completes
    } else if (e == ENOBUFS) {
      ++c_.tx_kick_nobufs;
      break;
    } else {
      ++c_.tx_kick_errors;
      break;
    }
    const uint32_t now = tx_ring_pending();
    if (now == pending && e != EBUSY) break;  // no progress: retry on the next flush
    pending = now;
  }
}

bool XskSocket::flush_tx() {
  if (tx_outstanding() > 0) reap();
  if (tx_ring_pending() == 0) return true;
  if (!need_wakeup_ || xsk_ring_prod__needs_wakeup(&r_->tx)) kick_tx();
  return tx_ring_pending() == 0;
}

// ---------------------------------------------------------------- control

int XskSocket::fd() const { return xsk_socket__fd(r_->xsk); }
const std::string& XskSocket::ifname() const { return r_->ifname; }
int XskSocket::ifindex() const { return r_->ifindex; }
uint32_t XskSocket::queue() const { return queue_; }
BindMode XskSocket::mode() const { return r_->mode; }
uint32_t XskSocket::tx_budget() const { return r_->tx_budget; }

Status XskSocket::insert_into_xskmap(int xskmap_fd, uint32_t key) const {
  const int fd = xsk_socket__fd(r_->xsk);
  const int err = bpf_map_update_elem(xskmap_fd, &key, &fd, 0);
  if (err)
    return errno_error(err, "inserting the AF_XDP socket of " + r_->ifname + " queue " +
                                std::to_string(queue_) + " into XSKMAP fd " +
                                std::to_string(xskmap_fd) + " at key " + std::to_string(key));
  return ok_status();
}

Result<XskKernelStats> XskSocket::kernel_stats() const {
  xdp_statistics st{};
  socklen_t len = sizeof(st);
  if (getsockopt(xsk_socket__fd(r_->xsk), SOL_XDP, XDP_STATISTICS, &st, &len) != 0)
    return make_error(errno, "getsockopt(XDP_STATISTICS) on " + r_->ifname);
  XskKernelStats s;
  s.rx_dropped = st.rx_dropped;
  s.rx_invalid_descs = st.rx_invalid_descs;
  s.tx_invalid_descs = st.tx_invalid_descs;
  if (len >= offsetof(xdp_statistics, rx_ring_full) + sizeof(st.rx_ring_full)) {
    s.rx_ring_full = st.rx_ring_full;
    s.rx_fill_ring_empty_descs = st.rx_fill_ring_empty_descs;
    s.tx_ring_empty_descs = st.tx_ring_empty_descs;
  }
  return s;
}

}  // namespace mrc::xdp
