#include "xdp/umem.hpp"

#include <sys/mman.h>
#include <xdp/xsk.h>

#include <cerrno>
#include <string>

#include "util/mmap_area.hpp"
#include "util/unique_fd.hpp"
#include "xdp/umem_state.hpp"

namespace mrc::xdp {

namespace {

bool power_of_two(uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }

Status validate(const UmemConfig& c) {
  if (c.frame_size != 2048 && c.frame_size != 4096)
    return make_error(EINVAL,
                      "UMEM frame_size must be 2048 or 4096, got " + std::to_string(c.frame_size));
  if (c.headroom % 8 != 0 || c.headroom + kXdpPacketHeadroom + 64 > c.frame_size)
    return make_error(EINVAL, "UMEM headroom " + std::to_string(c.headroom) +
                                  " must be a multiple of 8 and leave room for " +
                                  std::to_string(kXdpPacketHeadroom) +
                                  " bytes of XDP headroom and a 64-byte frame");
  if (c.frame_count < 64)
    return make_error(EINVAL,
                      "UMEM needs at least 64 frames, got " + std::to_string(c.frame_count));
  if (c.tx_chunks < 1 || c.tx_chunks > kMaxTxChunks)
    return make_error(EINVAL, "UMEM tx_chunks must be 1.." + std::to_string(kMaxTxChunks) +
                                  ", got " + std::to_string(c.tx_chunks));
  if (c.tx_chunks > 1 &&
      (c.tx_frames == 0 || uint64_t(c.tx_frames) * c.tx_chunks + 64 > c.frame_count))
    return make_error(EINVAL, "UMEM of " + std::to_string(c.frame_count) +
                                  " frames has no room for " + std::to_string(c.tx_frames) +
                                  " TX frames of " + std::to_string(c.tx_chunks) +
                                  " frames and 64 single frames");
  if (!power_of_two(c.fill_size) || !power_of_two(c.comp_size))
    return make_error(EINVAL, "UMEM fill_size and comp_size must be powers of two");
  return ok_status();
}

}  // namespace

Result<Umem> Umem::create(const UmemConfig& cfg) {
  MRC_TRY(validate(cfg));
  auto s = std::make_unique<State>();
  s->cfg = cfg;
  const uint64_t size = static_cast<uint64_t>(cfg.frame_count) * cfg.frame_size;

  void* area = MAP_FAILED;
  if (cfg.hugepages) {
    const uint64_t huge = 2ull << 20;
    const uint64_t rounded = (size + huge - 1) & ~(huge - 1);
    area = ::mmap(nullptr, rounded, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_POPULATE, -1, 0);
    if (area != MAP_FAILED) {
      s->area = MmapArea(area, rounded);
      s->huge = true;
    }
  }
  if (area == MAP_FAILED) {
    area = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
                  -1, 0);
    if (area == MAP_FAILED)
      return make_error(errno, "mmap of a " + std::to_string(size >> 20) + " MiB UMEM area");
    s->area = MmapArea(area, size);
  }
  s->size = size;

  xsk_umem_config ucfg{};
  ucfg.fill_size = cfg.fill_size;
  ucfg.comp_size = cfg.comp_size;
  ucfg.frame_size = cfg.frame_size;
  ucfg.frame_headroom = cfg.headroom;
  ucfg.flags = 0;
  const int err = xsk_umem__create(&s->umem, area, size, &s->fill0, &s->comp0, &ucfg);
  if (err) {
    s->umem = nullptr;
    std::string hint;
    if (-err == EAFNOSUPPORT) hint = " (kernel without AF_XDP)";
    if (-err == ENOMEM || -err == EPERM)
      hint = " (locked-memory limit: raise RLIMIT_MEMLOCK or run with CAP_IPC_LOCK)";
    return errno_error(err, "registering the UMEM (xsk_umem__create, " +
                                std::to_string(cfg.frame_count) + " frames of " +
                                std::to_string(cfg.frame_size) + " bytes)" + hint);
  }
  const uint32_t span_frames = cfg.tx_chunks > 1 ? cfg.tx_frames * cfg.tx_chunks : 0;
  const uint32_t single = cfg.frame_count - span_frames;
  s->pool = FramePool(single, cfg.frame_size);
  s->tx_base = uint64_t(single) * cfg.frame_size;
  if (span_frames)
    s->tx_pool = FramePool(cfg.tx_frames, cfg.tx_chunks * cfg.frame_size, s->tx_base);
  Umem u;
  u.s_ = std::move(s);
  return u;
}

Umem::State::~State() {
  if (umem) xsk_umem__delete(umem);
}

Umem::Umem() = default;
Umem::Umem(Umem&&) noexcept = default;
Umem& Umem::operator=(Umem&&) noexcept = default;
Umem::~Umem() = default;

uint8_t* Umem::area() const { return static_cast<uint8_t*>(s_->area.get()); }
uint64_t Umem::size() const { return s_->size; }
const UmemConfig& Umem::config() const { return s_->cfg; }
bool Umem::hugepages() const { return s_->huge; }
int Umem::fd() const { return xsk_umem__fd(s_->umem); }
FramePool& Umem::pool() { return s_->pool; }
const FramePool& Umem::pool() const { return s_->pool; }
uint32_t Umem::rx_frame_capacity() const {
  return s_->cfg.frame_size - s_->cfg.headroom - kXdpPacketHeadroom;
}
uint32_t Umem::tx_frame_capacity() const { return s_->cfg.frame_size - s_->cfg.headroom; }
uint32_t Umem::tx_span_capacity() const {
  return s_->cfg.tx_chunks * s_->cfg.frame_size - s_->cfg.headroom;
}
FramePool& Umem::tx_pool() { return s_->tx_pool; }
const FramePool& Umem::tx_pool() const { return s_->tx_pool; }
uint32_t Umem::socket_count() const { return s_->sockets; }

}  // namespace mrc::xdp
