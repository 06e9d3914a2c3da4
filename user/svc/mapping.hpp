// Service side of memory option B (Documentation/service.md section 3): maps
// the sealed memfd pieces a client passed with REG_MR into one contiguous
// range of the service's address space, so the engine can register the
// region as (iova = the client's address, host = this mapping).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "mrc/result.hpp"
#include "svc/pieces.hpp"
#include "util/mmap_area.hpp"

namespace mrc::svc {

class MappedRegion {
 public:
  MappedRegion() = default;
  MappedRegion(MappedRegion&&) noexcept = default;
  MappedRegion& operator=(MappedRegion&&) noexcept = default;
  MappedRegion(const MappedRegion&) = delete;
  MappedRegion& operator=(const MappedRegion&) = delete;
  ~MappedRegion() = default;  // the MmapArea unmaps the whole reservation

  // Checks every piece's fd: a memfd (F_GET_SEALS works) sealed with at
  // least F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL, big enough for
  // fd_offset + len (fstat); pieces page-aligned, in address order, tiling
  // [iova, iova + len) rounded out to pages, at most kMaxPieces. Then
  // reserves one PROT_NONE range and maps every piece MAP_SHARED | MAP_FIXED
  // read-write into it. The fds are not kept (the mappings hold the files).
  // Errors: EINVAL (layout, a fd that is not a sealed memfd, with a sentence
  // naming the piece), E2BIG (too many pieces), or the errno of the failing
  // system call.
  static Result<MappedRegion> map(std::span<const PieceRef> pieces, uint64_t iova, uint64_t len);

  // Where the region's first byte (the client's `iova`) is in this process;
  // nullptr for an empty region.
  void* host() const { return host_; }
  uint64_t iova() const { return iova_; }
  uint64_t length() const { return len_; }
  // The whole page-rounded reservation.
  size_t mapped_bytes() const { return area_.size(); }

 private:
  MmapArea area_;
  void* host_ = nullptr;
  uint64_t iova_ = 0, len_ = 0;
};

}  // namespace mrc::svc
