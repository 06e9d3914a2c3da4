#include "svc/mapping.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <string>

namespace mrc::svc {
namespace {

constexpr int kRequiredSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

std::string hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

std::string piece_name(size_t i, const PieceRef& p) {
  return "piece " + std::to_string(i) + " (fd " + std::to_string(p.fd) + ", client address " +
         hex(p.addr) + ", " + std::to_string(p.len) + " bytes)";
}

// The layout: page-aligned pieces in address order that tile [lo, hi).
Status check_layout(std::span<const PieceRef> pieces, uint64_t lo, uint64_t hi) {
  const uint64_t pg = page_size();
  if (pieces.size() > kMaxPieces)
    return Error(E2BIG, "a region of " + std::to_string(pieces.size()) + " pieces (at most " +
                            std::to_string(kMaxPieces) + ")");
  if (lo == hi) {
    if (!pieces.empty()) return Error(EINVAL, "an empty region with pieces");
    return {};
  }
  uint64_t at = lo;
  for (size_t i = 0; i < pieces.size(); i++) {
    const PieceRef& p = pieces[i];
    if (p.len == 0 || p.addr % pg || p.len % pg || p.fd_offset % pg)
      return Error(EINVAL, piece_name(i, p) + " is empty or not page-aligned");
    if (p.addr != at)
      return Error(EINVAL, piece_name(i, p) + " does not start where the region continues (" +
                               hex(at) + ")");
    if (p.len > hi - at) return Error(EINVAL, piece_name(i, p) + " runs past the region's end");
    at += p.len;
  }
  if (at != hi) return Error(EINVAL, "the pieces do not cover the whole region");
  return {};
}

// A memfd sealed against shrinking, growing and seal changes, big enough.
Status check_fd(size_t i, const PieceRef& p) {
  struct stat st {};
  if (p.fd < 0 || ::fstat(p.fd, &st) != 0)
    return Error(EINVAL, piece_name(i, p) + ": not an open descriptor");
  if (!S_ISREG(st.st_mode)) return Error(EINVAL, piece_name(i, p) + ": not a memfd");
  const int seals = ::fcntl(p.fd, F_GET_SEALS);
  if (seals < 0) return Error(EINVAL, piece_name(i, p) + ": not a memfd (no seals)");
  if ((seals & kRequiredSeals) != kRequiredSeals)
    return Error(EINVAL, piece_name(i, p) +
                             ": memfd not sealed with F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL");
  if (p.fd_offset > uint64_t(st.st_size) || p.len > uint64_t(st.st_size) - p.fd_offset)
    return Error(EINVAL, piece_name(i, p) + ": memfd of " + std::to_string(st.st_size) +
                             " bytes is too small for offset " + std::to_string(p.fd_offset));
  return {};
}

}  // namespace

Result<MappedRegion> MappedRegion::map(std::span<const PieceRef> pieces, uint64_t iova,
                                       uint64_t len) {
  const uint64_t pg = page_size();
  if (len > (uint64_t(1) << 40)) return Error(EINVAL, "region longer than 1 TiB");
  if (iova + len < iova || iova + len > UINT64_MAX - pg)
    return Error(EINVAL, "region wraps around the address space");
  const uint64_t lo = len ? iova & ~(pg - 1) : iova;
  const uint64_t hi = len ? (iova + len + pg - 1) & ~(pg - 1) : iova;
  MRC_TRY(check_layout(pieces, lo, hi));
  for (size_t i = 0; i < pieces.size(); i++) MRC_TRY(check_fd(i, pieces[i]));
  MappedRegion r;
  r.iova_ = iova;
  r.len_ = len;
  if (lo == hi) return r;
  auto area = MmapArea::map(size_t(hi - lo), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                            -1, 0, "a reservation for a registered region");
  if (!area) return std::move(area).error();
  r.area_ = std::move(*area);
  auto* base = static_cast<uint8_t*>(r.area_.get());
  for (size_t i = 0; i < pieces.size(); i++) {
    const PieceRef& p = pieces[i];
    void* want = base + (p.addr - lo);
    void* got = ::mmap(want, size_t(p.len), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, p.fd,
                       off_t(p.fd_offset));
    if (got == MAP_FAILED) return Error(errno, "mapping " + piece_name(i, p));
  }
  r.host_ = base + (iova - lo);
  return r;
}

}  // namespace mrc::svc
