// Receive-side PSN tracking for one QP: which PSNs inside the MPR window have
// arrived, the cumulative ACK point, and the SACK fields (offset + 64-bit
// bitmap) that describe them. Ring bitmap sized to the window; no allocation
// after construction.
#pragma once

#include <cstdint>
#include <vector>

#include "packet.hpp"

namespace mrc::codec {

class PsnWindow {
 public:
  enum class Mark : uint8_t { kNew, kDuplicate, kOutOfWindow };

  // `window` PSNs may be tracked beyond the cumulative point (MPR x 128).
  PsnWindow() : PsnWindow(0, 128) {}
  PsnWindow(uint32_t start_psn, uint32_t window) { reset(start_psn, window); }

  void reset(uint32_t start_psn, uint32_t window) {
    window_ = window ? window : 1;
    uint32_t bits = 64;
    while (bits < window_) bits <<= 1;
    mask_ = bits - 1;
    words_.assign(bits / 64, 0);
    next_ = start_psn & MRC_PSN_MASK;
    highest_ = psn_add(next_, -1);
  }

  // Records `psn`. kNew when first seen inside [next, next + window).
  Mark mark(uint32_t psn) {
    int32_t d = psn_diff(psn, next_);
    if (d < 0) return Mark::kDuplicate;
    if (uint32_t(d) >= window_) return Mark::kOutOfWindow;
    if (test_bit(psn)) return Mark::kDuplicate;
    set_bit(psn);
    if (psn_lt(highest_, psn)) highest_ = psn;
    while (test_bit(next_)) {
      clear_bit(next_);
      next_ = psn_add(next_, 1);
    }
    return Mark::kNew;
  }

  bool received(uint32_t psn) const {
    int32_t d = psn_diff(psn, next_);
    if (d < 0) return true;
    if (uint32_t(d) >= window_) return false;
    return test_bit(psn);
  }

  // Cumulative ACK PSN: the last PSN before the first gap (inclusive).
  uint32_t cack() const { return psn_add(next_, -1); }
  // First PSN not yet received.
  uint32_t next_expected() const { return next_; }
  // Highest PSN received so far.
  uint32_t highest() const { return highest_; }
  uint32_t window() const { return window_; }
  // PSNs received beyond the cumulative point.
  uint32_t out_of_order() const {
    int32_t d = psn_diff(highest_, next_);
    if (d < 0) return 0;
    uint32_t n = 0;
    for (uint64_t w : words_) n += uint32_t(__builtin_popcountll(w));
    return n;
  }

  struct SackFields {
    int16_t sack_offset;
    uint64_t bitmap;  // wire order: bit 63 = PSN cack + sack_offset
  };
  // Bitmap of the 64 PSNs starting at max(trigger - 63, cack + 1), or at
  // cack + 1 when `oldest` (the holes a trigger far ahead leaves unreported).
  SackFields sack(uint32_t trigger_psn, bool oldest = false) const {
    uint32_t base = next_;
    if (!oldest && psn_diff(trigger_psn, next_) > 63) base = psn_add(trigger_psn, -63);
    uint64_t bm = 0;
    for (int i = 0; i < 64; i++) {
      uint32_t p = psn_add(base, i);
      if (uint32_t(psn_diff(p, next_)) < window_ && test_bit(p)) bm |= 1ull << (63 - i);
    }
    return {int16_t(psn_diff(base, cack())), bm};
  }

 private:
  bool test_bit(uint32_t psn) const {
    uint32_t i = psn & mask_;
    return (words_[i >> 6] >> (i & 63)) & 1;
  }
  void set_bit(uint32_t psn) {
    uint32_t i = psn & mask_;
    words_[i >> 6] |= 1ull << (i & 63);
  }
  void clear_bit(uint32_t psn) {
    uint32_t i = psn & mask_;
    words_[i >> 6] &= ~(1ull << (i & 63));
  }
  std::vector<uint64_t> words_;
  uint32_t mask_ = 0;
  uint32_t window_ = 0;
  uint32_t next_ = 0;
  uint32_t highest_ = 0;
};

}  // namespace mrc::codec
