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
#include <deque>
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
  kRecvAd = 7,     // an advert of a posted receive buffer (RecvAd) in ring slot `slot`
  kDirect = 8,     // a whole message written straight into the advertised receive
                   // whose sequence number is `slot` modulo 65536 (no ring slot)
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

// A receive buffer the peer may write one message into directly (the
// "direct" path, Documentation/libfabric.md): the receiver's `seq`-th posted
// receive (counted from 0 over the endpoint's life) is [addr, addr+len),
// registered for this receive alone under `rkey`. The sender's `seq`-th
// message matches it (FI_MSG matches messages to receives in order).
struct RecvAd {
  uint64_t addr;
  uint64_t len;
  uint64_t seq;
  uint32_t rkey;
  uint32_t reserved;
};
static_assert(sizeof(RecvAd) == 32);

// A receiver advertises receives at most this far (in receive numbers)
// ahead of the last one completed: every direct message consumes a receive
// WR without a ring credit, so at most kAdWindow of them are ever in flight,
// and the receiver keeps that many more receive WRs posted. It is also far
// below the sender's bound (AdQueue::kMax), so an honest receiver's adverts
// are never refused there.
inline constexpr uint32_t kAdWindow = 64;

// The oldest posted receive, as a direct message finds it.
struct OldestRecv {
  bool present = false;     // a receive is posted at all
  bool advertised = false;  // it was advertised (its registration stands)
  bool started = false;     // a ring message has begun to fill it
  uint64_t seq = 0;         // its number among the endpoint's receives
  uint64_t cap = 0;         // its length
};

// Whether a direct message (the immediate's receive number `seq16`, modulo
// 2^16; the WRITE's `len` bytes) may complete the oldest receive. MRC
// delivers immediates in the order sent, so every ring message sent before
// it has arrived; `ring_waiting`: some still wait for a receive (then this
// one cannot be the oldest's). Anything else is refused and counted
// (RxFault::kDirect): its bytes went only where the peer's own advert let
// them, and the receive stays posted.
inline bool direct_accepted(const OldestRecv& r, bool ring_waiting, uint32_t seq16, uint64_t len) {
  return !ring_waiting && r.present && r.advertised && !r.started &&
         (r.seq & 0xffff) == (seq16 & 0xffff) && len <= r.cap;
}

// The sender's adverts, in sequence order, bounded. A message numbered n
// uses the advert of sequence n if it has arrived; adverts older than the
// next message are stale (their receives took ring messages) and dropped.
class AdQueue {
 public:
  static constexpr size_t kMax = 256;
  // An advert arrived (after `next_msg` messages were numbered). False,
  // and nothing kept, for one that does not follow the last (a forged or
  // replayed sequence) or when full; a stale one is dropped and true.
  bool push(const RecvAd& ad, uint64_t next_msg) {
    if (have_last_ && ad.seq <= last_) return false;
    if (ad.len == 0) return false;
    have_last_ = true;
    last_ = ad.seq;
    if (ad.seq < next_msg) return true;
    if (q_.size() >= kMax) return false;
    q_.push_back(ad);
    return true;
  }
  // The advert for message `msg` (nullptr if none): drops older ones.
  const RecvAd* match(uint64_t msg) {
    while (!q_.empty() && q_.front().seq < msg) q_.pop_front();
    return !q_.empty() && q_.front().seq == msg ? &q_.front() : nullptr;
  }
  size_t size() const { return q_.size(); }

 private:
  std::deque<RecvAd> q_;
  uint64_t last_ = 0;
  bool have_last_ = false;
};

// Credits travel as a counter, not as a delta: the 12-bit credit field of
// every immediate is the number of ring slots the receiver has freed since
// the connection began, modulo 4096. A duplicated or replayed word then
// grants nothing, and a stale or forged one that names more slots than the
// sender has outstanding is refused (TxRing::credit_word).
inline constexpr uint32_t kCreditMod = kMaxCredits + 1;

// Receive-side state of a ring of `slots` slots. The sender writes slot
// k % slots for its k-th slot message, only while it holds a credit; slots
// are freed in any order (messages wait for fi_recv buffers, notices are
// consumed at once) but credits go back in ring order, so a credit always
// names the oldest slot the sender may reuse.
class RxRing {
 public:
  explicit RxRing(uint32_t slots) : state_(slots, kFree) {}

  uint32_t slots() const { return uint32_t(state_.size()); }
  // Slots freed that no immediate has reported yet.
  uint32_t to_return() const { return uint32_t(freed_ - reported_); }
  uint32_t occupied() const { return occupied_; }
  // The next slot the sender must write.
  uint32_t next() const { return next_; }
  // Slots the sender has filled that no credit word has yet reported free:
  // its credits are at most slots() minus this.
  uint64_t unreported_use() const { return arrived_ - reported_; }

  // A slot message arrived. False if the slot is not the next one expected
  // (a protocol violation: the sender wrote without a credit).
  bool arrive(uint32_t slot) {
    if (slot != next_ || state_[slot] != kFree) return false;
    state_[slot] = kFull;
    next_ = (next_ + 1) % slots();
    occupied_++;
    arrived_++;
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
      freed_++;
    }
    return true;
  }

  // The credit field for the next immediate sent to the peer (every slot
  // freed so far, modulo 4096); what it reports no longer counts as owed.
  uint32_t credit_word() {
    reported_ = freed_;
    return uint32_t(freed_ % kCreditMod);
  }

 private:
  enum State : uint8_t { kFree, kFull, kReleased };
  std::vector<State> state_;
  uint32_t next_ = 0, tail_ = 0, occupied_ = 0;
  uint64_t arrived_ = 0, freed_ = 0, reported_ = 0;
};

// Send-side state: credits for the peer's ring (`peer_slots` slots, named by
// the peer's ring size) and the local bounce slots (`bounce_slots`, the local
// ring size) that stage a segment until its WRITE completes. Bounce slots are
// released in post order (send completions come in post order).
class TxRing {
 public:
  TxRing(uint32_t peer_slots, uint32_t bounce_slots)
      : slots_(peer_slots), bounce_slots_(bounce_slots), credits_(peer_slots) {}
  explicit TxRing(uint32_t slots) : TxRing(slots, slots) {}

  uint32_t credits() const { return credits_; }
  bool can_send() const { return credits_ > 0 && bounce_used_ < bounce_slots_; }
  struct Claim {
    uint32_t slot;    // the peer's ring slot to write
    uint32_t bounce;  // the local bounce slot that stages it
  };
  // Claims the next peer slot and bounce slot. Call only if can_send().
  Claim claim() {
    Claim c{head_, (bounce_head_ + bounce_used_) % bounce_slots_};
    head_ = (head_ + 1) % slots_;
    credits_--;
    bounce_used_++;
    return c;
  }
  // The WRITE of the oldest bounce slot completed.
  void bounce_done() {
    if (bounce_used_ == 0) return;
    bounce_head_ = (bounce_head_ + 1) % bounce_slots_;
    bounce_used_--;
  }
  // The peer's credit word (RxRing::credit_word). False, and nothing
  // changes, if it names more newly freed slots than are outstanding: a
  // stale, wrapped or forged word. A repeated word grants nothing.
  bool credit_word(uint32_t w) {
    uint32_t delta = (w - peer_freed_) % kCreditMod;
    if (delta > slots_ - credits_) return false;
    credits_ += delta;
    peer_freed_ = w % kCreditMod;
    return true;
  }

 private:
  uint32_t slots_, bounce_slots_, credits_, head_ = 0, bounce_head_ = 0, bounce_used_ = 0;
  uint32_t peer_freed_ = 0;
};

// Why an arrival (a WRITE-with-immediate from the peer) was refused. Each
// refusal is counted and costs nothing else: the receive is reposted, the
// ring stays consistent, the QP and every other connection carry on.
enum class RxFault : uint8_t {
  kType,      // unknown immediate type
  kSlot,      // slot out of range or not the next one expected (no credit)
  kCredits,   // credit word naming more slots than the peer has outstanding
  kLength,    // header length past the slot, or more than the WRITE carried
  kSequence,  // segment flags/lengths that do not continue the message
  kReadId,    // read answer for a read not in flight, or of the wrong length
  kAdvert,    // receive advert out of sequence, empty, or beyond the bound
  kDirect,    // direct message not for the oldest receive, not advertised, or too long
  kCount,
};

inline const char* rx_fault_name(RxFault f) {
  switch (f) {
    case RxFault::kType:
      return "type";
    case RxFault::kSlot:
      return "slot";
    case RxFault::kCredits:
      return "credits";
    case RxFault::kLength:
      return "length";
    case RxFault::kSequence:
      return "sequence";
    case RxFault::kReadId:
      return "read-id";
    case RxFault::kAdvert:
      return "advert";
    case RxFault::kDirect:
      return "direct";
    case RxFault::kCount:
      break;
  }
  return "?";
}

struct RxFaults {
  uint64_t n[size_t(RxFault::kCount)] = {};
  uint64_t operator[](RxFault f) const { return n[size_t(f)]; }
  uint64_t total() const {
    uint64_t t = 0;
    for (uint64_t v : n) t += v;
    return t;
  }
};

// What the endpoint does with one arrival after RxCheck::arrival.
enum class RxAction : uint8_t {
  kNone,       // credits only, or refused (see the fault counters)
  kSegment,    // a message segment now occupies `slot` (hdr validated)
  kWriteData,  // an fi_writedata notice (hdr.data); slot occupied until released
  kReadReq,    // a read request (req validated for size); slot occupied until released
  kReadResp,   // read `slot` answered with data
  kReadErr,    // read `slot` failed at the target
  kRecvAd,     // an advert of the peer's receive (ad validated for size); slot occupied
  kDirect,     // a direct message of byte_len bytes for receive sequence `slot` (mod 2^16)
};

struct Arrival {
  RxAction action = RxAction::kNone;
  uint32_t slot = 0;
  SlotHdr hdr = {};
  ReadReq req = {};
  RecvAd ad = {};
  uint32_t byte_len = 0;
  bool fault = false;  // something in it was refused (counted)
};

// The receive side of one connection's ring protocol, without I/O: every
// arrival is decoded and checked here before the endpoint acts on it. The
// slot header and read request are copied out of the ring once, so the
// endpoint never reads peer-writable memory twice.
class RxCheck {
 public:
  // `slot_size`: bytes per local ring slot; `max_msg`: largest message;
  // `max_reads`: read ids in use are 0..max_reads-1.
  RxCheck(uint32_t slots, uint32_t slot_size, uint64_t max_msg, uint32_t max_reads)
      : ring_(slots), slot_size_(slot_size), max_msg_(max_msg), read_len_(max_reads, kNoRead) {}

  RxRing& ring() { return ring_; }
  const RxFaults& faults() const { return faults_; }
  // Counts a refusal the endpoint decided (a direct message or an advert
  // that does not fit its state).
  void refused(RxFault f) { faults_.n[size_t(f)]++; }

  // A read `id` of `len` bytes is in flight (answers are accepted for it).
  void read_started(uint32_t id, uint64_t len) {
    if (id < read_len_.size()) read_len_[id] = len;
  }
  void read_ended(uint32_t id) {
    if (id < read_len_.size()) read_len_[id] = kNoRead;
  }

  // One WRITE-with-immediate arrived: `imm_host` (host order), `byte_len`
  // the WRITE's length, `ring` the local ring memory. Credits go to `tx`
  // (null before the connection's send side exists: none accepted).
  Arrival arrival(uint32_t imm_host, uint32_t byte_len, const uint8_t* ring, TxRing* tx) {
    Arrival a;
    Imm imm = imm_decode(imm_host);
    uint32_t type = imm_host >> 28;
    if (type < uint32_t(ImmType::kMsg) || type > uint32_t(ImmType::kDirect))
      return refuse(a, RxFault::kType);
    if (!tx || !tx->credit_word(imm.credits)) {
      // the rest of the arrival may still be good: only the credits go
      if (tx || imm.credits) count(a, RxFault::kCredits);
    }
    a.slot = imm.slot;
    switch (imm.type) {
      case ImmType::kCredit:
        return a;
      case ImmType::kMsg:
      case ImmType::kWriteData:
      case ImmType::kReadReq:
      case ImmType::kRecvAd:
        return slot_arrival(a, imm.type, byte_len, ring);
      case ImmType::kDirect:
        // Matched against the receives by the endpoint (refuse_direct).
        a.action = RxAction::kDirect;
        a.byte_len = byte_len;
        return a;
      case ImmType::kReadResp:
      case ImmType::kReadErr: {
        if (imm.slot >= read_len_.size() || read_len_[imm.slot] == kNoRead)
          return refuse(a, RxFault::kReadId);
        if (imm.type == ImmType::kReadResp && byte_len != read_len_[imm.slot])
          return refuse(a, RxFault::kReadId);
        read_len_[imm.slot] = kNoRead;
        a.action = imm.type == ImmType::kReadResp ? RxAction::kReadResp : RxAction::kReadErr;
        return a;
      }
    }
    return refuse(a, RxFault::kType);
  }

 private:
  static constexpr uint64_t kNoRead = ~uint64_t(0);

  Arrival& count(Arrival& a, RxFault f) {
    faults_.n[size_t(f)]++;
    a.fault = true;
    return a;
  }
  Arrival& refuse(Arrival& a, RxFault f) {
    a.action = RxAction::kNone;
    return count(a, f);
  }

  Arrival& slot_arrival(Arrival& a, ImmType type, uint32_t byte_len, const uint8_t* ring) {
    // Only the next slot, and only if free (else the sender had no credit).
    // It is then consumed whatever its content, so a refused message still
    // frees its slot and the ring stays in step.
    if (a.slot >= ring_.slots() || !ring_.arrive(a.slot)) return refuse(a, RxFault::kSlot);
    const uint8_t* p = ring + size_t(a.slot) * slot_size_;
    std::memcpy(&a.hdr, p, sizeof a.hdr);
    RxFault f = RxFault::kCount;
    const uint64_t room = slot_size_ - sizeof(SlotHdr);
    if (a.hdr.seg_len > room || byte_len < sizeof(SlotHdr) + uint64_t(a.hdr.seg_len))
      f = RxFault::kLength;
    else if (type == ImmType::kMsg)
      f = check_segment(a.hdr);
    else if (type == ImmType::kWriteData)
      f = a.hdr.seg_len == 0 ? f : RxFault::kLength;
    else if (type == ImmType::kRecvAd)
      f = a.hdr.seg_len == sizeof(RecvAd) ? f : RxFault::kLength;
    else if (a.hdr.seg_len != sizeof(ReadReq))
      f = RxFault::kLength;
    if (f == RxFault::kCount && type == ImmType::kReadReq)
      std::memcpy(&a.req, p + sizeof(SlotHdr), sizeof a.req);
    if (f == RxFault::kCount && type == ImmType::kRecvAd)
      std::memcpy(&a.ad, p + sizeof(SlotHdr), sizeof a.ad);
    if (f != RxFault::kCount) {
      ring_.release(a.slot);
      return refuse(a, f);
    }
    a.action = type == ImmType::kMsg         ? RxAction::kSegment
               : type == ImmType::kWriteData ? RxAction::kWriteData
               : type == ImmType::kRecvAd    ? RxAction::kRecvAd
                                             : RxAction::kReadReq;
    return a;
  }

  // Segments of a message arrive in order: a first segment (with the
  // message length) when none is in progress, then continuations, the last
  // one exactly completing the length.
  RxFault check_segment(const SlotHdr& h) {
    bool first = h.flags & kSlotFirst, last = h.flags & kSlotLast;
    if (h.flags & ~uint16_t(kSlotFirst | kSlotLast | kSlotData)) return RxFault::kSequence;
    if (first) {
      if (in_msg_ || h.total > max_msg_ || h.seg_len > h.total) {
        in_msg_ = false;  // a cut message: start afresh with the next first segment
        return RxFault::kSequence;
      }
      left_ = h.total;
    } else if (!in_msg_ || h.seg_len > left_) {
      in_msg_ = false;
      return RxFault::kSequence;
    }
    left_ -= h.seg_len;
    if (last != (left_ == 0) || (!last && h.seg_len == 0)) {
      in_msg_ = false;
      return RxFault::kSequence;
    }
    in_msg_ = !last;
    return RxFault::kCount;
  }

  RxRing ring_;
  uint32_t slot_size_;
  uint64_t max_msg_;
  std::vector<uint64_t> read_len_;
  RxFaults faults_;
  bool in_msg_ = false;
  uint64_t left_ = 0;
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
