// Movable RAII owners for the plain kernel handles of the AF_XDP layer: file
// descriptors and anonymous memory mappings.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <utility>

namespace mrc::xdp {

// Owns one file descriptor; closes it on destruction. -1 = empty.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) reset(std::exchange(o.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  explicit operator bool() const { return valid(); }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

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
