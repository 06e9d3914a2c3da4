// Free-frame bookkeeping for one UMEM. A FramePool is the device-wide stack of
// free frame addresses; each socket fronts it with a FrameCache so the common
// case (a burst of 32-64 frames) touches only a small socket-local array.
// Single-threaded by design: the engine thread that owns the device is the
// only user, so there are no locks and no atomics.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace mrc::xdp {

class FramePool {
 public:
  FramePool() = default;
  // All frame_count frames of frame_size bytes from UMEM address base on
  // start free.
  FramePool(uint32_t frame_count, uint32_t frame_size, uint64_t base = 0)
      : stack_(frame_count), capacity_(frame_count) {
    // Lowest addresses on top, so a fresh pool hands out frames in order.
    for (uint32_t i = 0; i < frame_count; ++i)
      stack_[i] = base + static_cast<uint64_t>(frame_count - 1 - i) * frame_size;
    top_ = frame_count;
  }

  // Takes up to n frames; returns how many it wrote to out. A short answer
  // counts one empty event (the caller wanted more than the pool had).
  uint32_t alloc(uint64_t* out, uint32_t n) {
    const uint32_t got = std::min(n, top_);
    top_ -= got;
    std::copy_n(stack_.data() + top_, got, out);
    if (got < n) ++empty_events_;
    return got;
  }

  // Returns n frames. More frees than the pool has room for means a frame
  // was freed twice; the surplus is dropped and counted, never written out
  // of bounds.
  void free(const uint64_t* addrs, uint32_t n) {
    const uint32_t room = capacity_ - top_;
    if (n > room) {
      overflow_ += n - room;
      n = room;
    }
    std::copy_n(addrs, n, stack_.data() + top_);
    top_ += n;
  }

  uint32_t available() const { return top_; }
  uint32_t capacity() const { return capacity_; }
  uint64_t empty_events() const { return empty_events_; }
  uint64_t overflow() const { return overflow_; }

 private:
  std::vector<uint64_t> stack_;
  uint32_t capacity_ = 0;
  uint32_t top_ = 0;
  uint64_t empty_events_ = 0;
  uint64_t overflow_ = 0;
};

// A socket-local LIFO of free frames in front of a FramePool. It moves frames
// to and from the pool in batches of kBatch so the pool is touched once per
// batch, and recently used (cache-warm) frames are reused first.
class FrameCache {
 public:
  static constexpr uint32_t kCapacity = 256;
  static constexpr uint32_t kBatch = 64;

  FrameCache() = default;
  explicit FrameCache(FramePool* pool) : pool_(pool) {}
  FrameCache(FrameCache&&) = default;
  FrameCache& operator=(FrameCache&&) = default;
  FrameCache(const FrameCache&) = delete;
  FrameCache& operator=(const FrameCache&) = delete;

  // Takes up to n frames from the cache, topping it up from the pool.
  // Returns how many it wrote to out (fewer only when the pool ran dry).
  uint32_t get(uint64_t* out, uint32_t n) {
    uint32_t done = 0;
    while (done < n) {
      if (count_ == 0) {
        const uint32_t want = std::min<uint32_t>(kCapacity, std::max(kBatch, n - done));
        count_ = pool_->alloc(frames_, want);
        if (count_ == 0) break;
      }
      const uint32_t take = std::min(count_, n - done);
      count_ -= take;
      std::copy_n(frames_ + count_, take, out + done);
      done += take;
    }
    return done;
  }

  // Gives n frames back; spills to the pool when the cache is full.
  void put(const uint64_t* addrs, uint32_t n) {
    while (n > 0) {
      if (count_ == kCapacity) {
        // Keep the most recently cached half, spill the older half.
        const uint32_t spill = kCapacity / 2;
        pool_->free(frames_, spill);
        std::copy(frames_ + spill, frames_ + count_, frames_);
        count_ -= spill;
      }
      const uint32_t take = std::min(kCapacity - count_, n);
      std::copy_n(addrs, take, frames_ + count_);
      count_ += take;
      addrs += take;
      n -= take;
    }
  }

  // Returns every cached frame to the pool.
  void flush() {
    pool_->free(frames_, count_);
    count_ = 0;
  }

  uint32_t size() const { return count_; }
  // Frames reachable through this cache: its own plus the pool's.
  uint32_t available() const { return count_ + pool_->available(); }
  FramePool* pool() const { return pool_; }

 private:
  FramePool* pool_ = nullptr;
  uint32_t count_ = 0;
  uint64_t frames_[kCapacity] = {};
};

}  // namespace mrc::xdp
