// Movable RAII owners for the plain kernel handles of the AF_XDP layer: file
// descriptors and anonymous memory mappings.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <utility>

#include "mrc/unique_fd.hpp"

namespace mrc::xdp {

using mrc::UniqueFd;  // owns one file descriptor (mrc/unique_fd.hpp)

// Owns one mmap'ed region; munmaps it on destruction.
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

}  // namespace mrc::xdp
