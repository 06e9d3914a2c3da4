// The service's bookkeeping of space in a client's shared area (shm.hpp).
#include "svc/shm.hpp"

namespace mrc::svc {

AreaAlloc::AreaAlloc(uint64_t size) {
  if (size > kLine) holes_.push_back({kLine, size / kLine * kLine - kLine});
}

uint64_t AreaAlloc::alloc(uint64_t len) {
  len = (len + kLine - 1) / kLine * kLine;
  if (!len) return 0;
  for (size_t i = 0; i < holes_.size(); i++) {
    if (holes_[i].len < len) continue;
    const uint64_t off = holes_[i].off;
    holes_[i].off += len;
    holes_[i].len -= len;
    if (!holes_[i].len) holes_.erase(holes_.begin() + long(i));
    return off;
  }
  return 0;
}

void AreaAlloc::free(uint64_t off, uint64_t len) {
  len = (len + kLine - 1) / kLine * kLine;
  if (!off || !len) return;
  size_t i = 0;
  while (i < holes_.size() && holes_[i].off < off) i++;
  holes_.insert(holes_.begin() + long(i), {off, len});
  // Coalesce with the next, then with the previous.
  if (i + 1 < holes_.size() && holes_[i].off + holes_[i].len == holes_[i + 1].off) {
    holes_[i].len += holes_[i + 1].len;
    holes_.erase(holes_.begin() + long(i) + 1);
  }
  if (i > 0 && holes_[i - 1].off + holes_[i - 1].len == holes_[i].off) {
    holes_[i - 1].len += holes_[i].len;
    holes_.erase(holes_.begin() + long(i));
  }
}

uint64_t AreaAlloc::free_bytes() const {
  uint64_t n = 0;
  for (const Hole& h : holes_) n += h.len;
  return n;
}

}  // namespace mrc::svc
