// One UMEM per device: an mmap'ed area of frame_count frames of frame_size
// bytes, registered with the kernel once and shared by every AF_XDP socket of
// the device (each socket has its own fill and completion ring), plus the
// frame pool that tracks which frames are free.
//
// Frame layout (aligned mode, frame_size 2048 or 4096):
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

struct UmemConfig {
  uint32_t frame_count = 8192;
  uint32_t frame_size = 4096;  // 2048 or 4096
  uint32_t headroom = 256;     // user headroom per frame, multiple of 8
  uint32_t fill_size = 2048;   // per-socket fill ring entries (power of two)
  uint32_t comp_size = 2048;   // per-socket completion ring entries (power of two)
  bool hugepages = false;      // try MAP_HUGETLB first; falls back to 4 KiB pages
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
  // Sockets created on this UMEM and still alive.
  uint32_t socket_count() const;

  struct State;
  State* state() const { return s_.get(); }

 private:
  std::unique_ptr<State> s_;
};

}  // namespace mrc::xdp
