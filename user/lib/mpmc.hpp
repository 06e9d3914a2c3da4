// Bounded lock-free multi-producer multi-consumer queue (Dmitry Vyukov's
// sequence-number design): the path between application threads and the
// engine thread. No allocation after construction.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <new>

namespace mrc::lib {

template <class T>
class MpmcQueue {
 public:
  explicit MpmcQueue(size_t capacity) {
    size_t n = 2;
    while (n < capacity) n <<= 1;
    mask_ = n - 1;
    cells_ = std::make_unique<Cell[]>(n);
    for (size_t i = 0; i < n; i++) cells_[i].seq.store(i, std::memory_order_relaxed);
  }
  size_t capacity() const { return mask_ + 1; }

  bool push(const T& v) {
    size_t pos = head_.load(std::memory_order_relaxed);
    for (;;) {
      Cell& c = cells_[pos & mask_];
      size_t seq = c.seq.load(std::memory_order_acquire);
      intptr_t d = intptr_t(seq) - intptr_t(pos);
      if (d == 0) {
        if (head_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          c.v = v;
          c.seq.store(pos + 1, std::memory_order_release);
          return true;
        }
      } else if (d < 0) {
        return false;  // full
      } else {
        pos = head_.load(std::memory_order_relaxed);
      }
    }
  }

  bool pop(T& out) {
    size_t pos = tail_.load(std::memory_order_relaxed);
    for (;;) {
      Cell& c = cells_[pos & mask_];
      size_t seq = c.seq.load(std::memory_order_acquire);
      intptr_t d = intptr_t(seq) - intptr_t(pos + 1);
      if (d == 0) {
        if (tail_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          out = c.v;
          c.seq.store(pos + mask_ + 1, std::memory_order_release);
          return true;
        }
      } else if (d < 0) {
        return false;  // empty
      } else {
        pos = tail_.load(std::memory_order_relaxed);
      }
    }
  }

  bool empty() const {
    return head_.load(std::memory_order_acquire) == tail_.load(std::memory_order_acquire);
  }

 private:
  struct Cell {
    std::atomic<size_t> seq;
    T v;
  };
  static constexpr size_t kLine = 64;
  std::unique_ptr<Cell[]> cells_;
  size_t mask_ = 0;
  alignas(kLine) std::atomic<size_t> head_{0};
  alignas(kLine) std::atomic<size_t> tail_{0};
};

}  // namespace mrc::lib
