// Client side of memory option B, "remap in place" (Documentation/service.md
// section 3): the pages under an application buffer (malloc'd, calloc'd,
// std::vector storage, an mmapped chunk) are moved onto sealed memfds at the
// same addresses, so mrc-serviced can map the very same pages and the engine
// places payload straight into them. Registration-time cost only: the data
// path never comes here.
//
// What remapping changes for the application (service.md, "What remapping
// changes"): without write_fence_supported(), a thread writing into [lo, hi)
// (edge pages included) between the copy and the mmap loses that write (with
// it, such a writer waits a few milliseconds); fork() copies every remapped
// page into the child (pthread_atfork handlers; the parent's forking thread
// waits for the copy) instead of copy-on-write; pages stay memfd-backed
// after dereg (un-sharing would cost another copy).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "mrc/result.hpp"
#include "svc/pieces.hpp"
#include "util/unique_fd.hpp"

namespace mrc::svc {

// One piece of a shared range: [addr, addr + len) of this process is
// MAP_SHARED of `fd` (a sealed memfd named "mrc:<n>") from `fd_offset`.
// `fd` is a fresh descriptor (close-on-exec) the caller owns: pass it to the
// service and close it.
struct SharedPiece {
  UniqueFd fd;
  uint64_t fd_offset = 0;
  uint64_t addr = 0;
  uint64_t len = 0;
  // The area's number n ("mrc:<n>", unique in this process while the area
  // lives): pieces of one memfd share it, so a client can send each area's
  // descriptor once and name areas the service already holds by number.
  uint64_t area = 0;
  // The area was created by this share_range call (its pages were private
  // anonymous memory until now).
  bool created = false;
  PieceRef ref() const { return {fd.get(), fd_offset, addr, len}; }
};

// Makes [addr, addr + len), rounded out to whole pages, backed by sealed
// memfds (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) at the same addresses,
// with the same protection, contents and neighbouring objects preserved.
// Pages already backed by one of this process's "mrc:" memfds (an earlier,
// overlapping or identical registration, alloc_shared) are reused as they
// are. Returns the pieces in address order; they tile the rounded range.
// len == 0 gives no pieces.
//
// Refuses, with EOPNOTSUPP and a sentence naming the mapping: shared file
// mappings (memfds, tmpfs, files), MAP_SHARED anonymous memory, private file
// mappings, device memory (/dev/...), the stack, special mappings ([vdso],
// ...). EFAULT when part of the range is not mapped, EACCES when part of it
// is not readable, E2BIG when the range needs more than kMaxPieces pieces
// (the pages are remapped by then, which is harmless). Nothing is changed
// when a refusal is found before remapping (every mapping is checked first).
// Thread-safe (one registration at a time per process).
Result<std::vector<SharedPiece>> share_range(void* addr, size_t len);

// Fresh zeroed memory, `len` rounded up to pages, read-write, MAP_SHARED of a
// new sealed "mrc:" memfd: what mrc_alloc_buf hands out. share_range over it
// costs no copy.
Result<void*> alloc_shared(size_t len);
// Unmaps memory from alloc_shared (same len); the memfd is released once no
// page of it is mapped in this process any more.
Status free_shared(void* p, size_t len);

// Drops this process's descriptors of "mrc:" areas no page of which is
// mapped any more (e.g. a registered malloc chunk that free() unmapped), so
// their memory returns to the system once the service unmaps its view too.
// share_range and free_shared do this themselves. Returns how many were
// dropped.
Result<size_t> release_unmapped_areas();

// Whether share_range can fence off concurrent writers while it copies
// (userfaultfd write protection with UFFD_FEATURE_WP_UNPOPULATED, Linux 6.4,
// and userfaultfd allowed for this process, or UFFD_USER_MODE_ONLY). When
// it can, a thread writing into the range during registration waits (for
// the copy and the mmap) instead of losing its write; when it cannot, the
// window of the header comment stays open.
bool write_fence_supported();

// Number of "mrc:" areas this process holds descriptors of (tests, stats).
size_t shared_area_count();

}  // namespace mrc::svc
