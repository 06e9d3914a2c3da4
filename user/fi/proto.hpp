// SPDX-License-Identifier: (GPL-2.0 OR BSD-3-Clause)
//
// The message protocol of the mrc libfabric provider (Documentation/libfabric.md,
// "Messages over WRITE-with-immediate"): immediate encoding, the slot header,
// the per-connection credit ring and the completion-entry formats. Pure logic,
// no libmrc and no I/O, so that the unit tests drive it directly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include <rdma/fabric.h>
#include <rdma/fi_eq.h>

namespace mrc::fi {

// The 32-bit immediate of every WRITE_WITH_IMM the provider sends:
//   bits 31..28 type, 27..16 credits returned to the peer, 15..0 slot (or read id).
enum class ImmType : uint8_t {
  kMsg = 1,        // a message segment in ring slot `slot`
  kCredit = 2,     // no data, only credits
  kWriteData = 3,  // an fi_writedata notice (64-bit data) in ring slot `slot`
  kReadReq = 4,    // an emulated-read request in ring slot `slot`
  kReadResp = 5,   // the data of read `slot` (written into the reader's buffer)
  kReadErr = 6,    // read `slot` failed at the target (bad key or range)
};

inline constexpr uint32_t kMaxCredits = 0xfff;
inline constexpr uint32_t kMaxSlots = 4095;  // credits must fit the 12-bit field

struct Imm {
  ImmType type;
  uint32_t credits;
  uint32_t slot;
};

inline uint32_t imm_encode(Imm i) {
  return (uint32_t(i.type) & 0xf) << 28 | (i.credits & kMaxCredits) << 16 | (i.slot & 0xffff);
}

inline Imm imm_decode(uint32_t v) {
  return Imm{ImmType((v >> 28) & 0xf), (v >> 16) & kMaxCredits, v & 0xffff};
}

// The header at the start of every ring slot.
enum SlotFlags : uint16_t {
  kSlotFirst = 1 << 0,  // first segment of a message (total is valid)
  kSlotLast = 1 << 1,   // last segment
  kSlotData = 1 << 2,   // the message carries remote CQ data
};

struct SlotHdr {
  uint32_t seg_len;  // payload bytes after the header
  uint16_t flags;    // SlotFlags
  uint16_t reserved;
  uint64_t total;  // message length (first segment)
  uint64_t data;   // remote CQ data (kSlotData, or the writedata notice)
};
static_assert(sizeof(SlotHdr) == 24);

// An emulated read: the reader asks the target to write [raddr, raddr+len)
// of the target's MR `rkey` into the reader's buffer laddr / lrkey.
struct ReadReq {
  uint64_t raddr;
  uint64_t laddr;
  uint64_t len;
  uint32_t rkey;
  uint32_t lrkey;
  uint32_t id;
  uint32_t reserved;
};

// Receive-side state of a ring of `slots` slots. The sender writes slot
// k % slots for its k-th slot message, only while it holds a credit; slots
// are freed in any order (messages wait for fi_recv buffers, notices are
// consumed at once) but credits go back in ring order, so a credit always
// names the oldest slot the sender may reuse.
class RxRing {
 public:
  explicit RxRing(uint32_t slots) : state_(slots, kFree) {}

  uint32_t slots() const { return uint32_t(state_.size()); }
  uint32_t to_return() const { return to_return_; }
  uint32_t occupied() const { return occupied_; }

  // A slot message arrived. False if the slot is not the next one expected
  // (a protocol violation: the sender wrote without a credit).
  bool arrive(uint32_t slot) {
    if (slot != next_ || state_[slot] != kFree) return false;
    state_[slot] = kFull;
    next_ = (next_ + 1) % slots();
    occupied_++;
    return true;
  }

  // The slot's content has been consumed. False for a slot not occupied.
  bool release(uint32_t slot) {
    if (slot >= slots() || state_[slot] != kFull) return false;
    state_[slot] = kReleased;
    occupied_--;
    while (state_[tail_] == kReleased) {
      state_[tail_] = kFree;
      tail_ = (tail_ + 1) % slots();
      to_return_++;
    }
    return true;
  }

  // Take up to `max` credits to send back to the peer.
  uint32_t take_credits(uint32_t max) {
    uint32_t n = to_return_ < max ? to_return_ : max;
    to_return_ -= n;
    return n;
  }

 private:
  enum State : uint8_t { kFree, kFull, kReleased };
  std::vector<State> state_;
  uint32_t next_ = 0, tail_ = 0, to_return_ = 0, occupied_ = 0;
};

// Send-side state: credits for the peer's ring and the local bounce slots
// (one per ring slot) that stage a segment until its WRITE completes. Bounce
// slots are released in post order (send completions come in post order).
class TxRing {
 public:
  explicit TxRing(uint32_t slots) : slots_(slots), credits_(slots) {}

  uint32_t credits() const { return credits_; }
  bool can_send() const { return credits_ > 0 && bounce_used_ < slots_; }
  // Claims the next peer slot (== the bounce slot index). Call only if can_send().
  uint32_t claim() {
    uint32_t s = head_;
    head_ = (head_ + 1) % slots_;
    credits_--;
    bounce_used_++;
    return s;
  }
  // The WRITE of the oldest bounce slot completed.
  void bounce_done() {
    if (bounce_used_ > 0) bounce_used_--;
  }
  // Credits the peer returned; false if that would exceed the ring.
  bool grant(uint32_t n) {
    if (credits_ + n > slots_) return false;
    credits_ += n;
    return true;
  }

 private:
  uint32_t slots_, credits_, head_ = 0, bounce_used_ = 0;
};

// A completion as the provider keeps it, written out in the consumer's format.
struct Completion {
  void* op_context = nullptr;
  uint64_t flags = 0;
  size_t len = 0;
  void* buf = nullptr;
  uint64_t data = 0;
};

inline size_t cq_entry_size(enum fi_cq_format f) {
  switch (f) {
    case FI_CQ_FORMAT_UNSPEC:
    case FI_CQ_FORMAT_CONTEXT:
      return sizeof(struct fi_cq_entry);
    case FI_CQ_FORMAT_MSG:
      return sizeof(struct fi_cq_msg_entry);
    case FI_CQ_FORMAT_DATA:
      return sizeof(struct fi_cq_data_entry);
    case FI_CQ_FORMAT_TAGGED:
      return sizeof(struct fi_cq_tagged_entry);
  }
  return 0;
}

// Writes c as one entry of format f at out (cq_entry_size(f) bytes).
inline void cq_write_entry(enum fi_cq_format f, const Completion& c, void* out) {
  switch (f) {
    case FI_CQ_FORMAT_UNSPEC:
    case FI_CQ_FORMAT_CONTEXT: {
      struct fi_cq_entry e = {c.op_context};
      std::memcpy(out, &e, sizeof e);
      break;
    }
    case FI_CQ_FORMAT_MSG: {
      struct fi_cq_msg_entry e = {c.op_context, c.flags, c.len};
      std::memcpy(out, &e, sizeof e);
      break;
    }
    case FI_CQ_FORMAT_DATA: {
      struct fi_cq_data_entry e = {c.op_context, c.flags, c.len, c.buf, c.data};
      std::memcpy(out, &e, sizeof e);
      break;
    }
    case FI_CQ_FORMAT_TAGGED: {
      struct fi_cq_tagged_entry e = {c.op_context, c.flags, c.len, c.buf, c.data, 0};
      std::memcpy(out, &e, sizeof e);
      break;
    }
  }
}

// Segments a message of `total` bytes needs with `payload` bytes per slot
// (a zero-byte message still takes one).
inline uint64_t segments(uint64_t total, uint64_t payload) {
  return total == 0 ? 1 : (total + payload - 1) / payload;
}

}  // namespace mrc::fi
