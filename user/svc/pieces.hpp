// The unit of shared registered memory between a client and mrc-serviced
// (Documentation/service.md section 3, memory option B): a page-aligned run
// of a client's address space backed by a sealed memfd at some offset.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mrc::svc {

// At most this many pieces per registration (REG_MR's piece list); a region
// that needs more is refused with E2BIG.
inline constexpr size_t kMaxPieces = 64;

// Prefix of the memfd names libmrc gives its areas ("mrc:<n>"); in
// /proc/PID/maps they show as "/memfd:mrc:<n> (deleted)".
inline constexpr const char* kAreaNamePrefix = "mrc:";

// A piece as the service receives it: `fd` is borrowed (the caller keeps
// ownership), `addr` the client address of the piece's first byte. addr,
// fd_offset and len are multiples of the page size.
struct PieceRef {
  int fd = -1;
  uint64_t fd_offset = 0;
  uint64_t addr = 0;
  uint64_t len = 0;
};

// The system page size (sysconf, read once).
size_t page_size();

}  // namespace mrc::svc
