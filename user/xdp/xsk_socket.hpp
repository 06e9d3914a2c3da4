// One AF_XDP socket per (interface, queue), bound to a shared Umem. The hot
// path works in bursts: rx() peeks up to out.size() descriptors, release()
// hands frames back to the fill ring, tx_reserve()/tx_submit() move frames
// through the TX ring. There is no allocation, lock or syscall per frame; the
// only syscalls are ring kicks (sendto/recvfrom with MSG_DONTWAIT) when the
// kernel asks for them through need_wakeup, one per burst.
//
// Not thread-safe: one engine thread owns a socket (and its Umem).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "mrc/result.hpp"
#include "mrc/uapi/maps.h"
#include "xdp/umem.hpp"

namespace mrc::xdp {

// How the socket binds. kAuto tries zero-copy and falls back to copy mode.
// Only the first socket of a Umem chooses: the kernel gives every further
// socket sharing the Umem the first socket's mode (and need_wakeup setting).
enum class BindMode : uint8_t { kAuto, kCopy, kZeroCopy };
const char* to_string(BindMode m);

struct SocketConfig {
  uint32_t rx_size = 2048;  // RX ring entries (power of two)
  uint32_t tx_size = 2048;  // TX ring entries (power of two)
  BindMode bind_mode = BindMode::kAuto;
  bool need_wakeup = true;
  // Let libxdp load and attach its default XSK program (redirect every frame
  // of the queue to this socket). Off: no program is loaded (the caller's
  // loader owns the XDP program and inserts fd() into its XSKMAP).
  bool load_default_prog = false;
  uint32_t xdp_flags = 0;  // XDP_FLAGS_* for the default program
  // Busy polling (SO_PREFER_BUSY_POLL, SO_BUSY_POLL, SO_BUSY_POLL_BUDGET).
  // rx() on an empty ring then calls recvfrom() to drive the poll loop.
  bool busy_poll = false;
  uint32_t busy_poll_usec = 20;
  uint32_t busy_poll_budget = 64;
  // Frames kept in the fill ring; 0 = fill_size / 2 (Device sets it from the
  // UMEM size and socket count).
  uint32_t fill_target = 0;
  // Copy mode sends at most this many frames per sendto() (kernel option
  // XDP_MAX_TX_SKB_BUDGET, Linux 6.17+; the default there is 32). 0 = the TX
  // ring size. Ignored where the kernel lacks the option.
  uint32_t tx_budget = 0;
  // sendto() calls per flush while the kernel answers EAGAIN and frames are
  // still in the TX ring (copy mode processes tx_budget frames per call).
  uint32_t max_kicks = 16;
  // The kernel releases a closed socket's queue asynchronously (a work item
  // after an RCU grace period), so binding right after a close can see
  // EBUSY. Retry that long before reporting the queue busy.
  uint32_t bind_busy_wait_ms = 1000;
  // Clear the metadata magic of every frame put on the fill ring, so a stale
  // magic from an earlier use of the frame is never taken for fresh metadata.
  bool clear_meta_magic = true;
  // Multi-buffer (XDP_USE_SG, Linux 6.6+): a received packet larger than one
  // UMEM frame arrives as several descriptors (RxFrame::more on all but the
  // last), and tx_reserve() hands out the UMEM's multi-buffer TX frames
  // (UmemConfig::tx_chunks), sent as one descriptor per frame they cover.
  bool multi_buffer = false;
};

// A received frame. The frame belongs to the caller until release().
struct RxFrame {
  uint8_t* data = nullptr;
  uint32_t len = 0;
  // Bytes in front of data that an XDP program may have filled with metadata
  // (descriptor offset in the frame minus the user headroom).
  uint32_t meta_room = 0;
  uint64_t addr = 0;    // UMEM address of data (descriptor address)
  uint16_t socket = 0;  // index of the socket in its Device
  uint16_t port = 0;    // index of the interface in its Device
  uint32_t queue = 0;   // rx queue
  // Multi-buffer sockets: the packet continues in the next RxFrame (same
  // socket, same burst; rx() returns whole packets only).
  bool more = false;

  // The struct mrc_xdp_meta right before data, or nullptr when there is no
  // room for it or its magic is not MRC_XDP_META_MAGIC.
  const mrc_xdp_meta* meta() const {
    if (meta_room < sizeof(mrc_xdp_meta)) return nullptr;
    auto* m = reinterpret_cast<const mrc_xdp_meta*>(data - sizeof(mrc_xdp_meta));
    return m->magic == MRC_XDP_META_MAGIC ? m : nullptr;
  }
};

// A frame reserved for sending: write up to room bytes at data, set len.
struct TxFrame {
  uint8_t* data = nullptr;
  uint64_t addr = 0;  // UMEM address of data
  uint32_t len = 0;
  uint32_t room = 0;
};

// Counters kept by the socket itself (XDP_STATISTICS has the kernel's).
struct XskCounters {
  uint64_t rx_frames = 0;
  uint64_t rx_bytes = 0;
  uint64_t rx_bursts = 0;    // rx() calls that returned frames
  uint64_t rx_wakeups = 0;   // recvfrom() calls (need_wakeup on fill, busy poll)
  uint64_t fill_frames = 0;  // frames put on the fill ring
  uint64_t fill_short = 0;   // refills that could not reach the fill target
  uint64_t tx_frames = 0;    // frames submitted to the TX ring
  uint64_t tx_bytes = 0;
  uint64_t tx_completed = 0;    // frames the kernel completed (reaped)
  uint64_t tx_kicks = 0;        // sendto() calls
  uint64_t tx_kick_again = 0;   // ... that returned EAGAIN (budget, completion ring full)
  uint64_t tx_kick_busy = 0;    // ... EBUSY (the driver dropped a frame)
  uint64_t tx_kick_nobufs = 0;  // ... ENOBUFS
  uint64_t tx_kick_errors = 0;  // ... any other error (ENETDOWN, ENXIO)
  uint64_t tx_ring_full = 0;    // tx_reserve() calls limited by TX ring space
  uint64_t reap_batches = 0;    // completion ring reads that returned frames
  uint64_t pool_empty = 0;      // tx_reserve()/refill() calls the pool could not satisfy
};

// XDP_STATISTICS of the socket.
struct XskKernelStats {
  uint64_t rx_dropped = 0;
  uint64_t rx_invalid_descs = 0;
  uint64_t tx_invalid_descs = 0;
  uint64_t rx_ring_full = 0;
  uint64_t rx_fill_ring_empty_descs = 0;
  uint64_t tx_ring_empty_descs = 0;
};

class XskSocket {
 public:
  // Creates a socket on ifname/queue sharing umem. port/socket_index are the
  // indices stamped on received frames. umem must outlive the socket.
  static Result<XskSocket> create(Umem& umem, const std::string& ifname, uint32_t queue,
                                  const SocketConfig& cfg, uint16_t port = 0,
                                  uint16_t socket_index = 0);

  XskSocket();
  XskSocket(XskSocket&&) noexcept;
  XskSocket& operator=(XskSocket&&) noexcept;
  ~XskSocket();

  explicit operator bool() const { return r_ != nullptr; }

  // ---- RX ----
  // Up to out.size() received frames; 0 when the ring is empty. A
  // multi-buffer socket returns whole packets only, so out must hold a
  // packet's descriptors (at most kMaxTxChunks with this layer's peers;
  // libmrc passes 64): a packet larger than out waits in the ring.
  uint32_t rx(std::span<RxFrame> out);
  // Returns frames to this socket's fill ring (any frame of the same Umem).
  void release(std::span<const RxFrame> frames);
  void release_addrs(std::span<const uint64_t> addrs);
  // Tops the fill ring up to the fill target from the pool; returns frames added.
  uint32_t refill();

  // ---- TX ----
  // Reaps completions, then reserves up to out.size() frames (limited by the
  // pool and by TX ring space). Returns how many entries of out are valid.
  uint32_t tx_reserve(std::span<TxFrame> out);
  // Queues frames[0..n) (each len set by the caller) on the TX ring and,
  // with kick, wakes the kernel once if it needs a wakeup. kick = false
  // leaves the wakeup to a later flush_tx() (one kick for several submits).
  // Every frame must come from tx_reserve() of this socket.
  void tx_submit(std::span<const TxFrame> frames, bool kick = true);
  // Gives reserved but unsent frames back.
  void tx_cancel(std::span<const TxFrame> frames);
  // Moves completed TX frames back to the free frames; returns how many.
  uint32_t reap();
  // Kicks the kernel if submitted frames still wait in the TX ring. Returns
  // true when the TX ring is drained (nothing left for the kernel to take).
  bool flush_tx();
  // Frames submitted and not yet completed.
  uint32_t tx_outstanding() const { return static_cast<uint32_t>(tx_submitted_ - tx_completed_); }
  // Frames submitted that the kernel has not yet taken off the TX ring.
  uint32_t tx_ring_pending() const;

  // ---- control ----
  int fd() const;
  const std::string& ifname() const;
  int ifindex() const;
  uint32_t queue() const;
  uint16_t port() const { return port_; }
  // Actual mode after bind: kCopy or kZeroCopy.
  BindMode mode() const;
  bool need_wakeup() const { return need_wakeup_; }
  // Frames per sendto() in copy mode (32 where the kernel has no option).
  uint32_t tx_budget() const;
  bool busy_poll() const { return busy_poll_; }
  // Inserts fd() into an XSKMAP at key (a loader's map: mrc_xsks).
  Status insert_into_xskmap(int xskmap_fd, uint32_t key) const;
  Result<XskKernelStats> kernel_stats() const;
  const XskCounters& counters() const { return c_; }
  // Frames in the fill ring (approximate: reads the kernel's consumer index).
  uint32_t fill_level() const;
  uint32_t fill_target() const { return fill_target_; }
  // Frames in the socket's free-frame cache (of the UMEM's shared pool).
  uint32_t cached_frames() const { return cache_.size(); }
  // Multi-buffer TX frames in the socket's cache (of the UMEM's tx_pool).
  uint32_t cached_tx_frames() const { return tx_chunks_ > 1 ? tx_cache_.size() : 0; }
  // Returns the caches' frames to their pools (control path, e.g. teardown).
  void flush_cache() {
    cache_.flush();
    if (tx_chunks_ > 1) tx_cache_.flush();
  }

  struct Rings;

 private:
  void kick_tx();
  // Start of the multi-buffer TX frame holding UMEM address addr (tx_span_
  // need not be a power of two).
  uint64_t span_of(uint64_t addr) const {
    return tx_base_ + (addr - tx_base_) / tx_span_ * tx_span_;
  }
  // Descriptors tx_submit() writes for f (1 for single-frame sockets).
  uint32_t descs_of(const TxFrame& f) const {
    if (tx_chunks_ == 1) return 1;
    const uint32_t off = static_cast<uint32_t>(f.addr & ~frame_mask_);
    return f.len ? (off + f.len + chunk_size_ - 1) / chunk_size_ : 1;
  }
  void fill_put(const uint64_t* addrs, uint32_t n);

  std::unique_ptr<Rings> r_;  // heap: libxdp keeps pointers to the ring structs
  Umem::State* umem_ = nullptr;
  uint8_t* area_ = nullptr;
  uint64_t frame_mask_ = 0;  // ~(frame_size - 1)
  uint32_t headroom_ = 0;
  uint32_t fill_target_ = 0;
  uint32_t max_kicks_ = 0;
  uint16_t port_ = 0;
  uint16_t index_ = 0;
  uint32_t queue_ = 0;
  bool need_wakeup_ = false;
  bool busy_poll_ = false;
  bool clear_magic_ = false;
  bool multi_buffer_ = false;
  uint64_t tx_submitted_ = 0;  // descriptors
  uint64_t tx_completed_ = 0;  // descriptors
  // Multi-buffer TX frames (tx_chunks_ > 1): their own cache over the UMEM's
  // tx_pool, from address tx_base_ on, tx_span_ bytes each.
  uint32_t tx_chunks_ = 1;
  uint64_t tx_base_ = 0;
  uint64_t tx_span_ = 0;
  uint32_t chunk_size_ = 0;
  FrameCache cache_;
  FrameCache tx_cache_;
  XskCounters c_;
};

}  // namespace mrc::xdp
