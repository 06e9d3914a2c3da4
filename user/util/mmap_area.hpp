// Owner of one memory mapping (mmap(2)): munmaps it on destruction, movable,
// not copyable. Shared by the AF_XDP layer (UMEM, rings, live-frames slots)
// and the controller's pinned store (mmapable BPF arrays).
#pragma once

#include <sys/mman.h>

#include <cerrno>
#include <cstddef>
#include <string>
#include <utility>

#include "mrc/result.hpp"

namespace mrc {

class MmapArea {
 public:
  MmapArea() = default;
  MmapArea(void* addr, size_t len) : addr_(addr), len_(len) {}
  MmapArea(MmapArea&& o) noexcept
      : addr_(std::exchange(o.addr_, nullptr)), len_(std::exchange(o.len_, 0)) {}
  MmapArea& operator=(MmapArea&& o) noexcept {
    if (this != &o) {
      reset();
      addr_ = std::exchange(o.addr_, nullptr);
      len_ = std::exchange(o.len_, 0);
    }
    return *this;
  }
  MmapArea(const MmapArea&) = delete;
  MmapArea& operator=(const MmapArea&) = delete;
  ~MmapArea() { reset(); }

  // mmap(nullptr, len, prot, flags, fd, offset), owned.
  static Result<MmapArea> map(size_t len, int prot, int flags, int fd, off_t offset,
                              const std::string& what) {
    void* p = ::mmap(nullptr, len, prot, flags, fd, offset);
    if (p == MAP_FAILED) return Error(errno, "mapping " + what);
    return MmapArea(p, len);
  }

  void* get() const { return addr_; }
  size_t size() const { return len_; }
  explicit operator bool() const { return addr_ != nullptr; }
  void reset() {
    if (addr_) ::munmap(addr_, len_);
    addr_ = nullptr;
    len_ = 0;
  }

 private:
  void* addr_ = nullptr;
  size_t len_ = 0;
};

}  // namespace mrc
