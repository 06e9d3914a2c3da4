// One UMEM per device: an mmap'ed area of frame_count frames of frame_size
// bytes, registered with the kernel once and shared by every AF_XDP socket of
// the device (each socket has its own fill and completion ring), plus the
// frame pool that tracks which frames are free.
//
// Frame layout (aligned mode, frame_size 2048 or 4096; multi-buffer TX
// frames span tx_chunks adjacent frames, see UmemConfig::tx_chunks):
//
//   RX: | user headroom | XDP_PACKET_HEADROOM (256) ... meta | packet data ... |
//       the kernel puts received data at frame + headroom + 256; an XDP
//       program's metadata (bpf_xdp_adjust_meta) sits right before the data.
//   TX: | user headroom | packet data ... |
//       frames sent by user space start at frame + headroom.
//
// The user headroom is never written by the kernel: it is per-frame scratch
// space for user space.
#pragma once

#include <cstdint>
#include <memory>

#include "mrc/result.hpp"
#include "xdp/frame_pool.hpp"

struct xsk_umem;
struct xsk_ring_prod;
struct xsk_ring_cons;

namespace mrc::xdp {

// Bytes the kernel keeps in front of received data (XDP_PACKET_HEADROOM).
inline constexpr uint32_t kXdpPacketHeadroom = 256;
// Most descriptors one multi-buffer TX frame may take (a copy-mode skb holds
// its first descriptor in the head and at most MAX_SKB_FRAGS - 1 = 16 more).
inline constexpr uint32_t kMaxTxChunks = 17;

struct UmemConfig {
  uint32_t frame_count = 8192;
  uint32_t frame_size = 4096;  // 2048 or 4096
  uint32_t headroom = 256;     // user headroom per frame, multiple of 8
  uint32_t fill_size = 2048;   // per-socket fill ring entries (power of two)
  uint32_t comp_size = 2048;   // per-socket completion ring entries (power of two)
  bool hugepages = false;      // try MAP_HUGETLB first; falls back to 4 KiB pages
  // Multi-buffer TX frames: tx_frames frames of tx_chunks adjacent frames
  // each, taken from the end of the area (the rest stays the shared pool of
  // single frames for RX and small TX). A socket bound with multi_buffer
  // sends such a frame as one descriptor per frame it covers, chained with
  // XDP_PKT_CONTD. tx_chunks 1: no multi-buffer TX frames (tx_frames ignored).
  uint32_t tx_chunks = 1;  // 1..17 (the kernel's MAX_SKB_FRAGS bounds a packet)
  uint32_t tx_frames = 0;
};

class Umem {
 public:
  static Result<Umem> create(const UmemConfig& cfg);

  Umem();
  Umem(Umem&&) noexcept;
  Umem& operator=(Umem&&) noexcept;
  ~Umem();

  explicit operator bool() const { return s_ != nullptr; }
  uint8_t* area() const;
  uint64_t size() const;
  const UmemConfig& config() const;
  bool hugepages() const;  // true if MAP_HUGETLB succeeded
  int fd() const;          // the UMEM's socket (also the first XSK's fd)
  FramePool& pool();
  const FramePool& pool() const;

  uint8_t* data(uint64_t addr) const { return area() + addr; }
  // Largest frame the kernel can receive into one UMEM frame.
  uint32_t rx_frame_capacity() const;
  // Largest frame user space can send from one UMEM frame.
  uint32_t tx_frame_capacity() const;
  // Largest frame user space can send from one multi-buffer TX frame
  // (tx_chunks frames); tx_frame_capacity() when there are none.
  uint32_t tx_span_capacity() const;
  // The pool of multi-buffer TX frames (empty when tx_chunks is 1).
  FramePool& tx_pool();
  const FramePool& tx_pool() const;
  // Sockets created on this UMEM and still alive.
  uint32_t socket_count() const;

  struct State;
  State* state() const { return s_.get(); }

 private:
  std::unique_ptr<State> s_;
};

}  // namespace mrc::xdp
