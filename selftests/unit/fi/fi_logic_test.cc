// SPDX-License-Identifier: (GPL-2.0 OR BSD-3-Clause)
//
// The libfabric provider's own logic (user/fi): immediate encoding, the
// credit ring, completion formats and fi_getinfo's hint filtering.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <random>
#include <vector>

#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include "fi/info.hpp"
#include "fi/proto.hpp"
#include "fi/yield.hpp"

namespace mrc::fi {
namespace {

TEST(FiImm, RoundTripsEveryField) {
  for (ImmType t : {ImmType::kMsg, ImmType::kCredit, ImmType::kWriteData, ImmType::kReadReq,
                    ImmType::kReadResp, ImmType::kReadErr}) {
    for (uint32_t credits : {0u, 1u, 17u, kMaxCredits}) {
      for (uint32_t slot : {0u, 1u, 4094u, 65535u}) {
        Imm d = imm_decode(imm_encode(Imm{t, credits, slot}));
        EXPECT_EQ(d.type, t);
        EXPECT_EQ(d.credits, credits);
        EXPECT_EQ(d.slot, slot);
      }
    }
  }
  EXPECT_EQ(imm_encode(Imm{ImmType::kMsg, 3, 5}), 0x10030005u);
}

TEST(FiRing, ArrivalsMustComeInRingOrder) {
  RxRing rx(4);
  EXPECT_FALSE(rx.arrive(1));  // slot 0 is next
  EXPECT_TRUE(rx.arrive(0));
  EXPECT_FALSE(rx.arrive(0));  // not again
  EXPECT_TRUE(rx.arrive(1));
  EXPECT_EQ(rx.occupied(), 2u);
  EXPECT_FALSE(rx.release(2));  // never arrived
  EXPECT_FALSE(rx.release(9));
}

TEST(FiRing, CreditsReturnInRingOrderOnly) {
  RxRing rx(4);
  for (uint32_t s = 0; s < 4; s++) ASSERT_TRUE(rx.arrive(s));
  // Slot 2 consumed first: the sender must not get a credit, its next write
  // goes to slot 0, which is still occupied.
  EXPECT_TRUE(rx.release(2));
  EXPECT_EQ(rx.to_return(), 0u);
  EXPECT_TRUE(rx.release(0));
  EXPECT_EQ(rx.to_return(), 1u);
  EXPECT_TRUE(rx.release(1));
  EXPECT_EQ(rx.to_return(), 3u);  // 0, 1 and the already released 2
  EXPECT_EQ(rx.unreported_use(), 4u);
  EXPECT_EQ(rx.credit_word(), 3u);  // the word counts every slot freed so far
  EXPECT_EQ(rx.to_return(), 0u);
  EXPECT_EQ(rx.unreported_use(), 1u);
  EXPECT_TRUE(rx.release(3));
  EXPECT_EQ(rx.to_return(), 1u);
  EXPECT_EQ(rx.credit_word(), 4u);
  EXPECT_EQ(rx.occupied(), 0u);
}

TEST(FiRing, SenderStopsWithoutCreditOrBounceSlot) {
  TxRing tx(3);
  EXPECT_EQ(tx.claim().slot, 0u);
  EXPECT_EQ(tx.claim().slot, 1u);
  EXPECT_EQ(tx.claim().slot, 2u);
  EXPECT_FALSE(tx.can_send());     // no credit
  EXPECT_TRUE(tx.credit_word(1));  // the peer freed one slot
  EXPECT_FALSE(tx.can_send());     // a credit, but every bounce slot in flight
  tx.bounce_done();
  EXPECT_TRUE(tx.can_send());
  EXPECT_EQ(tx.claim().slot, 0u);
  EXPECT_FALSE(tx.credit_word(5));  // 4 more freed, only 3 outstanding: a peer bug
  EXPECT_EQ(tx.credits(), 0u);
  EXPECT_TRUE(tx.credit_word(4));
  EXPECT_EQ(tx.credits(), 3u);
}

// The sender names slots by the peer's ring and stages them in its own,
// smaller or larger, bounce area.
TEST(FiRing, SlotsFollowThePeerRingAndBounceSlotsTheLocalOne) {
  TxRing tx(8, 3);
  std::vector<uint32_t> bounce;
  for (int i = 0; i < 3; i++) {
    TxRing::Claim c = tx.claim();
    EXPECT_EQ(c.slot, uint32_t(i));
    bounce.push_back(c.bounce);
  }
  EXPECT_EQ(bounce, (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_FALSE(tx.can_send());  // credits left (5), bounce slots not
  tx.bounce_done();
  TxRing::Claim c = tx.claim();
  EXPECT_EQ(c.slot, 3u);
  EXPECT_EQ(c.bounce, 0u);  // the oldest bounce slot, freed first
}

// Credit words are cumulative: repeating one grants nothing, a stale one
// from before a wrap of the 12-bit counter is refused, and the count runs
// through many wraps without drift.
TEST(FiRing, CreditWordsAreIdempotentAndBoundedAcrossWraps) {
  const uint32_t kSlots = 64;
  RxRing rx(kSlots);
  TxRing tx(kSlots);
  uint32_t next = 0;
  for (int round = 0; round < 20000; round++) {  // 20000 slots: ~5 wraps of 4096
    ASSERT_TRUE(tx.can_send());
    uint32_t s = tx.claim().slot;
    tx.bounce_done();
    ASSERT_EQ(s, next);
    ASSERT_TRUE(rx.arrive(s));
    ASSERT_TRUE(rx.release(s));
    next = (next + 1) % kSlots;
    if (round % 7 == 0) {
      uint32_t w = rx.credit_word();
      ASSERT_TRUE(tx.credit_word(w));
      uint32_t have = tx.credits();
      EXPECT_TRUE(tx.credit_word(w));  // duplicated: nothing more
      EXPECT_EQ(tx.credits(), have);
      // a word from 2 frees back, wrapped: names ~4094 slots, refused
      EXPECT_FALSE(tx.credit_word((w + kCreditMod - 2) % kCreditMod));
      EXPECT_EQ(tx.credits(), have);
    }
  }
  EXPECT_TRUE(tx.credit_word(rx.credit_word()));
  EXPECT_EQ(tx.credits(), kSlots);
}

// A sender and a receiver exchange 20000 slot messages; the receiver consumes
// them in random order (messages wait for receive buffers, notices do not)
// and returns credits lazily, piggy-backed or in bulk. The receiver's ring
// rejects any write into an occupied slot, so the run proves the sender never
// writes without a credit, and it must not deadlock.
TEST(FiRing, RandomConsumptionNeverOverrunsTheRing) {
  std::mt19937 rng(7);
  const uint32_t kSlots = 16;
  RxRing rx(kSlots);
  TxRing tx(kSlots);
  std::deque<uint32_t> wire;   // slots written, not yet seen by the receiver
  std::vector<uint32_t> held;  // slots the receiver holds
  std::deque<uint32_t> acks;   // WRITE completions due to the sender (bounce)
  uint32_t sent = 0, consumed = 0;
  for (int step = 0; consumed < 20000 && step < 1000000; step++) {
    switch (rng() % 5) {
      case 0:
      case 1:
        if (sent < 20000 && tx.can_send()) {
          wire.push_back(tx.claim().slot);
          acks.push_back(0);
          sent++;
        }
        break;
      case 2:
        if (!wire.empty()) {
          ASSERT_TRUE(rx.arrive(wire.front())) << "write into an occupied slot";
          held.push_back(wire.front());
          wire.pop_front();
          if (!acks.empty()) {
            tx.bounce_done();
            acks.pop_front();
          }
        }
        break;
      case 3:
        if (!held.empty()) {
          size_t i = rng() % held.size();
          ASSERT_TRUE(rx.release(held[i]));
          held.erase(held.begin() + long(i));
          consumed++;
        }
        break;
      case 4:
        // the provider's rule: S/4 owed, or (idle) the sender may be short
        if (rx.to_return() >= kSlots / 4 ||
            (rx.to_return() > 0 && rx.unreported_use() * 2 >= kSlots)) {
          ASSERT_TRUE(tx.credit_word(rx.credit_word()));
        }
        break;
    }
  }
  EXPECT_EQ(consumed, 20000u);
}

// ---------------------------------------------------------------------------
// Hostile input: arrivals from a forged or buggy peer (RxCheck). Each is
// refused and counted; the ring stays in step and good traffic carries on.

constexpr uint32_t kTSlots = 4, kTSlotSize = 256, kTMaxMsg = 1 << 20, kTReads = 8;

struct RxFixture {
  std::vector<uint8_t> ring = std::vector<uint8_t>(size_t(kTSlots) * kTSlotSize, 0);
  RxCheck rx{kTSlots, kTSlotSize, kTMaxMsg, kTReads};
  TxRing tx{kTSlots};

  // Writes a header (and optional payload) into `slot`, as the peer would.
  void put(uint32_t slot, SlotHdr h, const void* payload = nullptr, size_t n = 0) {
    std::memcpy(ring.data() + size_t(slot) * kTSlotSize, &h, sizeof h);
    if (n) std::memcpy(ring.data() + size_t(slot) * kTSlotSize + sizeof h, payload, n);
  }
  Arrival in(ImmType t, uint32_t credits, uint32_t slot, uint32_t byte_len) {
    return rx.arrival(imm_encode(Imm{t, credits, slot}), byte_len, ring.data(), &tx);
  }
  // A good one-segment message of n bytes into the next slot.
  Arrival msg(uint32_t n, uint32_t credits = 0) {
    uint32_t s = rx.ring().next();
    put(s, SlotHdr{n, kSlotFirst | kSlotLast, 0, n, 0});
    return in(ImmType::kMsg, credits, s, uint32_t(sizeof(SlotHdr) + n));
  }
  uint64_t faults() const { return rx.faults().total(); }
};

TEST(FiRx, GoodTrafficIsAccepted) {
  RxFixture f;
  for (int i = 0; i < 10; i++) {
    Arrival a = f.msg(100);
    ASSERT_EQ(a.action, RxAction::kSegment);
    EXPECT_FALSE(a.fault);
    EXPECT_EQ(a.hdr.seg_len, 100u);
    EXPECT_TRUE(f.rx.ring().release(a.slot));
  }
  EXPECT_EQ(f.faults(), 0u);
}

TEST(FiRx, SlotsOutOfRangeOrOutOfTurnAreRefused) {
  RxFixture f;
  f.put(0, SlotHdr{8, kSlotFirst | kSlotLast, 0, 8, 0});
  for (uint32_t slot : {kTSlots, 9u, 4095u, 65535u, 1u, 3u}) {
    Arrival a = f.in(ImmType::kMsg, 0, slot, 32);
    EXPECT_EQ(a.action, RxAction::kNone) << slot;
    EXPECT_TRUE(a.fault);
  }
  EXPECT_EQ(f.rx.faults()[RxFault::kSlot], 6u);
  EXPECT_EQ(f.rx.ring().next(), 0u);  // nothing consumed
  EXPECT_EQ(f.rx.ring().occupied(), 0u);
  // a duplicate of an occupied slot (the ring wrapped onto it without a credit)
  for (uint32_t i = 0; i < kTSlots; i++) ASSERT_EQ(f.msg(8).action, RxAction::kSegment);
  EXPECT_EQ(f.in(ImmType::kMsg, 0, 0, 32).action, RxAction::kNone);
  EXPECT_EQ(f.rx.faults()[RxFault::kSlot], 7u);
  // the good traffic carries on once the slots are consumed
  for (uint32_t i = 0; i < kTSlots; i++) ASSERT_TRUE(f.rx.ring().release(i));
  EXPECT_EQ(f.msg(8).action, RxAction::kSegment);
  EXPECT_EQ(f.faults(), 7u);
}

TEST(FiRx, CreditsBeyondTheRingOrStaleAreRefusedDuplicatesGrantNothing) {
  RxFixture f;
  for (int i = 0; i < 3; i++) f.tx.claim();  // 3 outstanding, 1 credit left
  // credit beyond the ring size (and beyond what is outstanding)
  Arrival a = f.msg(8, kTSlots + 1);
  EXPECT_EQ(a.action, RxAction::kSegment);  // the message itself is good
  EXPECT_TRUE(a.fault);
  EXPECT_EQ(f.rx.faults()[RxFault::kCredits], 1u);
  EXPECT_EQ(f.tx.credits(), 1u);
  f.rx.ring().release(a.slot);
  // the peer freed 2: granted once, the same word again grants nothing
  EXPECT_EQ(f.in(ImmType::kCredit, 2, 0, 0).fault, false);
  EXPECT_EQ(f.tx.credits(), 3u);
  EXPECT_EQ(f.in(ImmType::kCredit, 2, 0, 0).fault, false);
  EXPECT_EQ(f.tx.credits(), 3u);
  // wrapped (older than the last word): names 4095 newly freed slots
  EXPECT_TRUE(f.in(ImmType::kCredit, 1, 0, 0).fault);
  EXPECT_TRUE(f.in(ImmType::kCredit, kMaxCredits, 0, 0).fault);
  EXPECT_EQ(f.rx.faults()[RxFault::kCredits], 3u);
  EXPECT_EQ(f.tx.credits(), 3u);
  // and the honest word still counts after all that
  EXPECT_FALSE(f.in(ImmType::kCredit, 3, 0, 0).fault);
  EXPECT_EQ(f.tx.credits(), 4u);
}

TEST(FiRx, LengthsPastTheSlotOrTheWriteAreRefusedAndTheSlotFreed) {
  RxFixture f;
  const uint32_t room = kTSlotSize - sizeof(SlotHdr);
  struct Case {
    uint32_t seg_len, byte_len;
  } cases[] = {
      {room + 1, kTSlotSize + 1},            // past the slot
      {0xffffffffu, 0xffffffffu},            // wildly past
      {64, uint32_t(sizeof(SlotHdr)) + 63},  // more than the WRITE carried
      {0, 10},                               // the WRITE did not even carry the header
  };
  uint64_t n = 0;
  for (const Case& c : cases) {
    uint32_t s = f.rx.ring().next();
    f.put(s, SlotHdr{c.seg_len, kSlotFirst | kSlotLast, 0, c.seg_len, 0});
    Arrival a = f.in(ImmType::kMsg, 0, s, c.byte_len);
    EXPECT_EQ(a.action, RxAction::kNone) << c.seg_len;
    EXPECT_EQ(f.rx.faults()[RxFault::kLength], ++n);
    // consumed and freed: the ring moved on and the slot's credit is owed
    EXPECT_EQ(f.rx.ring().next(), (s + 1) % kTSlots);
    EXPECT_EQ(f.rx.ring().occupied(), 0u);
  }
  EXPECT_EQ(f.rx.ring().to_return(), 4u);
  // a full slot is fine
  EXPECT_EQ(f.msg(room).action, RxAction::kSegment);
  // notices: writedata carries no payload, a read request exactly one ReadReq
  uint32_t s = f.rx.ring().next();
  f.put(s, SlotHdr{8, kSlotFirst | kSlotLast, 0, 0, 42});
  EXPECT_EQ(f.in(ImmType::kWriteData, 0, s, 64).action, RxAction::kNone);
  s = f.rx.ring().next();
  f.put(s, SlotHdr{uint32_t(sizeof(ReadReq)) - 1, kSlotFirst | kSlotLast, 0, 0, 0});
  EXPECT_EQ(f.in(ImmType::kReadReq, 0, s, 64).action, RxAction::kNone);
  EXPECT_EQ(f.rx.faults()[RxFault::kLength], 6u);
}

TEST(FiRx, SegmentsThatDoNotContinueTheirMessageAreRefused) {
  RxFixture f;
  auto seg = [&](uint32_t len, uint16_t flags, uint64_t total) {
    uint32_t s = f.rx.ring().next();
    f.put(s, SlotHdr{len, flags, 0, total, 0});
    Arrival a = f.in(ImmType::kMsg, 0, s, uint32_t(sizeof(SlotHdr) + len));
    if (a.action == RxAction::kSegment) f.rx.ring().release(a.slot);
    return a.action;
  };
  EXPECT_EQ(seg(10, kSlotLast, 10), RxAction::kNone);               // no first segment
  EXPECT_EQ(seg(10, kSlotFirst, kTMaxMsg + 1), RxAction::kNone);    // beyond max_msg_size
  EXPECT_EQ(seg(10, kSlotFirst | kSlotLast, 11), RxAction::kNone);  // last, 1 byte short
  EXPECT_EQ(seg(20, kSlotFirst | kSlotLast, 10), RxAction::kNone);  // longer than its message
  EXPECT_EQ(seg(10, kSlotFirst | 0x80, 10), RxAction::kNone);       // unknown flag
  EXPECT_EQ(f.rx.faults()[RxFault::kSequence], 5u);
  // a good two-segment message, then one cut by a second "first"
  EXPECT_EQ(seg(100, kSlotFirst, 150), RxAction::kSegment);
  EXPECT_EQ(seg(50, kSlotLast, 0), RxAction::kSegment);
  EXPECT_EQ(seg(100, kSlotFirst, 150), RxAction::kSegment);
  EXPECT_EQ(seg(100, kSlotFirst, 150), RxAction::kNone);             // the first was not finished
  EXPECT_EQ(seg(50, kSlotLast, 0), RxAction::kNone);                 // continues nothing now
  EXPECT_EQ(seg(0, kSlotFirst | kSlotLast, 0), RxAction::kSegment);  // afresh: fine
  EXPECT_EQ(f.rx.faults()[RxFault::kSequence], 7u);
}

TEST(FiRx, UnknownTypesAndReadAnswersOutOfTurnAreRefused) {
  RxFixture f;
  for (uint32_t t : {0u, 9u, 10u, 15u}) {
    Arrival a = f.rx.arrival(t << 28 | 1u << 16, 0, f.ring.data(), &f.tx);
    EXPECT_EQ(a.action, RxAction::kNone) << t;
  }
  EXPECT_EQ(f.rx.faults()[RxFault::kType], 4u);
  EXPECT_EQ(f.tx.credits(), kTSlots);  // a refused type grants nothing either
  // read answers: none in flight, out of range
  EXPECT_EQ(f.in(ImmType::kReadResp, 0, 3, 100).action, RxAction::kNone);
  EXPECT_EQ(f.in(ImmType::kReadErr, 0, kTReads, 0).action, RxAction::kNone);
  EXPECT_EQ(f.in(ImmType::kReadResp, 0, 65535, 100).action, RxAction::kNone);
  f.rx.read_started(3, 100);
  EXPECT_EQ(f.in(ImmType::kReadResp, 0, 3, 99).action, RxAction::kNone);  // wrong length
  EXPECT_EQ(f.in(ImmType::kReadResp, 0, 3, 100).action, RxAction::kReadResp);
  EXPECT_EQ(f.in(ImmType::kReadResp, 0, 3, 100).action, RxAction::kNone);  // duplicate
  f.rx.read_started(4, 100);
  EXPECT_EQ(f.in(ImmType::kReadErr, 0, 4, 0).action, RxAction::kReadErr);
  EXPECT_EQ(f.rx.faults()[RxFault::kReadId], 5u);
  EXPECT_EQ(f.faults(), 9u);
}

// Receive adverts (libfabric.md "Direct messages") occupy a ring slot and
// carry exactly one RecvAd; a direct message takes no slot and no credit
// and names the receive by its sequence number modulo 2^16.
TEST(FiRx, AdvertsAndDirectMessages) {
  RxFixture f;
  RecvAd ad{0x7f0000001000ull, 1u << 20, 70000, 0xabcd1234u, 0};
  uint32_t s = f.rx.ring().next();
  f.put(s, SlotHdr{uint32_t(sizeof ad), kSlotFirst | kSlotLast, 0, 0, 0}, &ad, sizeof ad);
  Arrival a = f.in(ImmType::kRecvAd, 0, s, uint32_t(sizeof(SlotHdr) + sizeof ad));
  ASSERT_EQ(a.action, RxAction::kRecvAd);
  EXPECT_FALSE(a.fault);
  EXPECT_EQ(a.ad.addr, ad.addr);
  EXPECT_EQ(a.ad.len, ad.len);
  EXPECT_EQ(a.ad.seq, ad.seq);
  EXPECT_EQ(a.ad.rkey, ad.rkey);
  EXPECT_TRUE(f.rx.ring().release(a.slot));
  // a short or long advert is refused and its slot freed
  for (uint32_t len : {uint32_t(sizeof ad) - 1, uint32_t(sizeof ad) + 8}) {
    s = f.rx.ring().next();
    f.put(s, SlotHdr{len, kSlotFirst | kSlotLast, 0, 0, 0}, &ad, sizeof ad);
    EXPECT_EQ(f.in(ImmType::kRecvAd, 0, s, uint32_t(sizeof(SlotHdr) + len)).action,
              RxAction::kNone);
    EXPECT_EQ(f.rx.ring().occupied(), 0u);
  }
  EXPECT_EQ(f.rx.faults()[RxFault::kLength], 2u);
  // direct: no slot consumed, the length is the WRITE's
  uint32_t next = f.rx.ring().next();
  a = f.in(ImmType::kDirect, 0, 70000 & 0xffff, 1u << 20);
  EXPECT_EQ(a.action, RxAction::kDirect);
  EXPECT_EQ(a.slot, 70000u & 0xffff);
  EXPECT_EQ(a.byte_len, 1u << 20);
  EXPECT_EQ(f.rx.ring().next(), next);
  EXPECT_EQ(f.rx.ring().occupied(), 0u);
  // the endpoint's own refusals count too
  f.rx.refused(RxFault::kDirect);
  f.rx.refused(RxFault::kAdvert);
  EXPECT_EQ(f.rx.faults()[RxFault::kDirect], 1u);
  EXPECT_EQ(f.rx.faults()[RxFault::kAdvert], 1u);
  EXPECT_STREQ(rx_fault_name(RxFault::kDirect), "direct");
  EXPECT_STREQ(rx_fault_name(RxFault::kAdvert), "advert");
}

// A direct message completes the oldest receive only if that receive was
// advertised, is untouched, is the one it names (its number modulo 2^16)
// and is long enough, and no ring message still waits before it.
TEST(FiDirect, OnlyTheOldestAdvertisedUntouchedReceiveLongEnough) {
  const OldestRecv good{true, true, false, 70000, 1u << 20};
  const uint32_t s16 = 70000 & 0xffff;
  EXPECT_TRUE(direct_accepted(good, false, s16, 1u << 20));
  EXPECT_TRUE(direct_accepted(good, false, s16, 0));           // an empty message
  EXPECT_FALSE(direct_accepted(good, true, s16, 1u << 20));    // a ring message waits
  EXPECT_FALSE(direct_accepted(OldestRecv{}, false, s16, 1));  // no receive posted
  EXPECT_FALSE(
      direct_accepted({true, false, false, 70000, 1u << 20}, false, s16, 1));  // not advertised
  EXPECT_FALSE(direct_accepted({true, true, true, 70000, 1u << 20}, false, s16, 1));  // started
  EXPECT_FALSE(direct_accepted(good, false, s16 + 1, 1));                  // names the next one
  EXPECT_FALSE(direct_accepted(good, false, (s16 + 0xffff) & 0xffff, 1));  // the one before
  EXPECT_FALSE(direct_accepted(good, false, s16, (1u << 20) + 1));         // longer than the buffer
  // the number wraps at 2^16: receive 70000 + 65536 is named like 70000
  EXPECT_TRUE(direct_accepted({true, true, false, 70000 + 65536, 64}, false, s16, 64));
}

RecvAd ad_of(uint64_t seq, uint64_t len = 4096) {
  return RecvAd{0x1000 * (seq + 1), len, seq, 7, 0};
}

// The sender's adverts: message n uses advert n; older adverts are stale;
// a sequence that does not increase, an empty advert or one past the bound
// is refused.
TEST(FiAds, MessagesMatchTheirAdvertStaleOnesAreDroppedForgedRefused) {
  AdQueue q;
  EXPECT_EQ(q.match(0), nullptr);  // none yet: the ring carries message 0
  EXPECT_TRUE(q.push(ad_of(1), 1));
  EXPECT_TRUE(q.push(ad_of(2), 1));
  EXPECT_TRUE(q.push(ad_of(4), 1));  // receive 3 was small: not advertised
  ASSERT_NE(q.match(1), nullptr);
  EXPECT_EQ(q.match(1)->addr, 0x2000u);
  ASSERT_NE(q.match(2), nullptr);
  EXPECT_EQ(q.match(3), nullptr);  // no advert for 3; 1 and 2 dropped
  EXPECT_EQ(q.size(), 1u);
  ASSERT_NE(q.match(4), nullptr);
  // an advert for a message already numbered is stale: accepted, not kept
  EXPECT_TRUE(q.push(ad_of(5), 9));
  EXPECT_EQ(q.size(), 1u);
  EXPECT_EQ(q.match(5), nullptr);
  // replayed, going backwards, or empty: refused
  EXPECT_FALSE(q.push(ad_of(5), 9));
  EXPECT_FALSE(q.push(ad_of(3), 9));
  EXPECT_FALSE(q.push(ad_of(10, 0), 9));
  EXPECT_TRUE(q.push(ad_of(10), 9));
  ASSERT_NE(q.match(10), nullptr);
  // bounded: a peer advertising without end does not grow the queue
  AdQueue b;
  for (uint64_t i = 0; i < AdQueue::kMax; i++) ASSERT_TRUE(b.push(ad_of(i), 0));
  EXPECT_FALSE(b.push(ad_of(AdQueue::kMax), 0));
  EXPECT_EQ(b.size(), AdQueue::kMax);
  ASSERT_NE(b.match(AdQueue::kMax - 1), nullptr);
  EXPECT_EQ(b.size(), 1u);
}

// 200000 random immediates and headers: every arrival is either accepted as
// the protocol allows or refused and counted; the ring never holds more
// than its slots, and good traffic still flows afterwards.
TEST(FiRx, RandomForgeriesAreCountedNeverCorruptTheRing) {
  std::mt19937 rng(11);
  RxFixture f;
  uint64_t refused = 0;
  for (int i = 0; i < 200000; i++) {
    uint32_t imm = rng();
    if (i % 3 == 0) imm = (imm & 0xf0ff0000u) | (rng() % (kTSlots + 2));  // near-valid slots
    SlotHdr h{uint32_t(rng() % (2 * kTSlotSize)), uint16_t(rng() % 8), 0, rng() % 600, 0};
    uint32_t s = f.rx.ring().next();
    f.put(s, h);
    Arrival a = f.rx.arrival(imm, rng() % (2 * kTSlotSize), f.ring.data(), &f.tx);
    if (a.fault) refused++;
    ASSERT_LE(f.rx.ring().occupied(), kTSlots);
    ASSERT_LE(f.tx.credits(), kTSlots);
    if (a.action == RxAction::kSegment || a.action == RxAction::kWriteData ||
        a.action == RxAction::kReadReq || a.action == RxAction::kRecvAd) {
      ASSERT_LE(a.hdr.seg_len, kTSlotSize - sizeof(SlotHdr));
      ASSERT_TRUE(f.rx.ring().release(a.slot));
    }
    if (f.tx.can_send() && rng() % 2) {  // the local side sends too: credits outstanding
      f.tx.claim();
      f.tx.bounce_done();
    }
  }
  EXPECT_GT(refused, 100000u);
  EXPECT_GE(f.faults(), refused);
  // afterwards: a complete good message is accepted (a cut one may be pending)
  Arrival a = f.msg(8);
  if (a.action != RxAction::kSegment) {
    a = f.msg(8);  // the first reset an unfinished forged message
  }
  EXPECT_EQ(a.action, RxAction::kSegment);
}

TEST(FiCq, EveryFormatCarriesItsFields) {
  int ctx = 0;
  uint8_t buf[8];
  Completion c{&ctx, FI_RECV | FI_MSG | FI_REMOTE_CQ_DATA, 77, buf, 0x1122334455667788ull};
  struct fi_cq_entry e0;
  EXPECT_EQ(cq_entry_size(FI_CQ_FORMAT_CONTEXT), sizeof e0);
  cq_write_entry(FI_CQ_FORMAT_CONTEXT, c, &e0);
  EXPECT_EQ(e0.op_context, &ctx);
  struct fi_cq_msg_entry e1;
  EXPECT_EQ(cq_entry_size(FI_CQ_FORMAT_MSG), sizeof e1);
  cq_write_entry(FI_CQ_FORMAT_MSG, c, &e1);
  EXPECT_EQ(e1.op_context, &ctx);
  EXPECT_EQ(e1.flags, c.flags);
  EXPECT_EQ(e1.len, 77u);
  struct fi_cq_data_entry e2;
  EXPECT_EQ(cq_entry_size(FI_CQ_FORMAT_DATA), sizeof e2);
  cq_write_entry(FI_CQ_FORMAT_DATA, c, &e2);
  EXPECT_EQ(e2.buf, buf);
  EXPECT_EQ(e2.data, c.data);
  EXPECT_EQ(e2.len, 77u);
  struct fi_cq_tagged_entry e3;
  std::memset(&e3, 0xff, sizeof e3);
  EXPECT_EQ(cq_entry_size(FI_CQ_FORMAT_TAGGED), sizeof e3);
  cq_write_entry(FI_CQ_FORMAT_TAGGED, c, &e3);
  EXPECT_EQ(e3.data, c.data);
  EXPECT_EQ(e3.tag, 0u);
  EXPECT_EQ(e3.flags, c.flags);
}

TEST(FiCq, SegmentsCoverEveryByte) {
  EXPECT_EQ(segments(0, 100), 1u);
  EXPECT_EQ(segments(1, 100), 1u);
  EXPECT_EQ(segments(100, 100), 1u);
  EXPECT_EQ(segments(101, 100), 2u);
  EXPECT_EQ(segments(6u << 20, 65512), (6ull << 20) / 65512 + 1);
}

InfoConfig cfg() {
  InfoConfig c;
  c.domain = "p0+p1+p2+p3";
  inet_pton(AF_INET, "198.18.0.1", &c.local);
  c.max_msg_size = 1u << 30;
  c.inject_size = 4096;
  c.tx_size = 1024;
  c.rx_size = 1024;
  c.cm_data_size = 256;
  return c;
}

struct Info {
  struct fi_info* fi = nullptr;
  ~Info() { fi_freeinfo(fi); }
};

TEST(FiGetinfo, NoHintsGiveAMsgEndpointOnPlaneZero) {
  Info i;
  ASSERT_EQ(build_info(FI_VERSION(1, 17), cfg(), nullptr, nullptr, 0, nullptr, &i.fi, nullptr), 0);
  ASSERT_NE(i.fi, nullptr);
  EXPECT_EQ(i.fi->next, nullptr);
  EXPECT_EQ(i.fi->ep_attr->type, FI_EP_MSG);
  EXPECT_EQ(i.fi->caps & (FI_MSG | FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_WRITE),
            FI_MSG | FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_WRITE);
  EXPECT_EQ(i.fi->caps & FI_TAGGED, 0u);
  EXPECT_EQ(i.fi->addr_format, uint32_t(FI_SOCKADDR_IN));
  ASSERT_EQ(i.fi->src_addrlen, sizeof(struct sockaddr_in));
  auto* sa = static_cast<struct sockaddr_in*>(i.fi->src_addr);
  char a[32];
  EXPECT_STREQ(inet_ntop(AF_INET, &sa->sin_addr, a, sizeof a), "198.18.0.1");
  EXPECT_EQ(i.fi->dest_addr, nullptr);
  EXPECT_STREQ(i.fi->domain_attr->name, "p0+p1+p2+p3");
  EXPECT_STREQ(i.fi->fabric_attr->name, "mrc");
  EXPECT_EQ(i.fi->domain_attr->mr_mode & kMrMode, int(kMrMode));
  EXPECT_EQ(i.fi->domain_attr->data_progress, FI_PROGRESS_MANUAL);
  EXPECT_EQ(i.fi->domain_attr->cq_data_size, 8u);
  EXPECT_EQ(i.fi->tx_attr->inject_size, 4096u);
}

TEST(FiGetinfo, NodeAndServiceNameThePeerOrTheSource) {
  Info d;
  ASSERT_EQ(build_info(FI_VERSION(1, 17), cfg(), "198.18.0.2", "7000", 0, nullptr, &d.fi, nullptr),
            0);
  ASSERT_NE(d.fi->dest_addr, nullptr);
  auto* da = static_cast<struct sockaddr_in*>(d.fi->dest_addr);
  EXPECT_EQ(ntohs(da->sin_port), 7000);
  EXPECT_EQ(da->sin_addr.s_addr, inet_addr("198.18.0.2"));
  Info s;
  ASSERT_EQ(
      build_info(FI_VERSION(1, 17), cfg(), nullptr, "7001", FI_SOURCE, nullptr, &s.fi, nullptr), 0);
  auto* sa = static_cast<struct sockaddr_in*>(s.fi->src_addr);
  EXPECT_EQ(ntohs(sa->sin_port), 7001);
  EXPECT_EQ(sa->sin_addr.s_addr, inet_addr("198.18.0.1"));
  EXPECT_EQ(s.fi->dest_addr, nullptr);
  Info bad;
  EXPECT_EQ(
      build_info(FI_VERSION(1, 17), cfg(), nullptr, "port", FI_SOURCE, nullptr, &bad.fi, nullptr),
      -FI_ENODATA);
}

// Hints ofi_rxm sends its core provider (prov/rxm, rxm_info_to_core in 1.17).
TEST(FiGetinfo, RxmCoreHintsAreMet) {
  struct fi_info* h = fi_allocinfo();
  h->caps = FI_MSG | FI_SEND | FI_RECV | FI_RMA | FI_READ | FI_REMOTE_READ | FI_REMOTE_WRITE;
  h->mode = FI_RX_CQ_DATA | FI_CONTEXT;
  h->ep_attr->type = FI_EP_MSG;
  h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR;
  h->tx_attr->size = 128;
  h->rx_attr->size = 128;
  Info i;
  EXPECT_EQ(build_info(FI_VERSION(1, 17), cfg(), nullptr, nullptr, 0, h, &i.fi, nullptr), 0);
  ASSERT_NE(i.fi, nullptr);
  EXPECT_EQ(i.fi->mode, 0u);  // needs none of the modes offered
  fi_freeinfo(h);
}

TEST(FiGetinfo, HintsBeyondTheProviderAreRefusedWithAReason) {
  struct Case {
    const char* name;
    void (*set)(struct fi_info*);
  } cases[] = {
      {"tagged", [](struct fi_info* h) { h->caps = FI_TAGGED; }},
      {"atomic", [](struct fi_info* h) { h->caps = FI_MSG | FI_ATOMIC; }},
      {"rdm", [](struct fi_info* h) { h->ep_attr->type = FI_EP_RDM; }},
      {"dgram", [](struct fi_info* h) { h->ep_attr->type = FI_EP_DGRAM; }},
      {"ipv6", [](struct fi_info* h) { h->addr_format = FI_SOCKADDR_IN6; }},
      {"domain", [](struct fi_info* h) { h->domain_attr->name = strdup("eth9"); }},
      {"fabric", [](struct fi_info* h) { h->fabric_attr->name = strdup("tcp"); }},
      {"auto progress",
       [](struct fi_info* h) { h->domain_attr->data_progress = FI_PROGRESS_AUTO; }},
      {"no FI_MR_LOCAL",
       [](struct fi_info* h) {
         h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
       }},
      {"scalable", [](struct fi_info* h) { h->domain_attr->mr_mode = FI_MR_SCALABLE; }},
      {"big message", [](struct fi_info* h) { h->ep_attr->max_msg_size = size_t(1) << 40; }},
      {"prefix", [](struct fi_info* h) { h->ep_attr->msg_prefix_size = 16; }},
      {"cq data", [](struct fi_info* h) { h->domain_attr->cq_data_size = 16; }},
      {"srx", [](struct fi_info* h) { h->ep_attr->rx_ctx_cnt = FI_SHARED_CONTEXT; }},
  };
  for (const Case& c : cases) {
    struct fi_info* h = fi_allocinfo();
    h->domain_attr->mr_mode = int(kMrMode);
    c.set(h);
    Info i;
    std::string why;
    EXPECT_EQ(build_info(FI_VERSION(1, 17), cfg(), nullptr, nullptr, 0, h, &i.fi, &why),
              -FI_ENODATA)
        << c.name;
    EXPECT_EQ(i.fi, nullptr) << c.name;
    EXPECT_FALSE(why.empty()) << c.name;
    fi_freeinfo(h);
  }
}

TEST(FiGetinfo, HintsNarrowCapsAndKeepTheDomain) {
  struct fi_info* h = fi_allocinfo();
  h->caps = FI_MSG;
  h->domain_attr->name = strdup("p0+p1+p2+p3");
  h->domain_attr->mr_mode = int(kMrMode);
  h->domain_attr->threading = FI_THREAD_DOMAIN;
  Info i;
  ASSERT_EQ(build_info(FI_VERSION(1, 17), cfg(), nullptr, nullptr, 0, h, &i.fi, nullptr), 0);
  EXPECT_EQ(i.fi->caps & FI_RMA, 0u);
  EXPECT_NE(i.fi->caps & FI_MSG, 0u);
  EXPECT_EQ(i.fi->domain_attr->threading, FI_THREAD_DOMAIN);
  fi_freeinfo(h);
}

// FI_MRC_YIELD_US: an empty CQ read yields only once the CQ has read empty
// for the threshold; a read that returns something starts over.
TEST(FiYield, EmptyReadsYieldOnlyPastTheThreshold) {
  const int64_t us = 1000;
  EmptyYield y(50 * us);
  int64_t t = 7'000'000'000;  // any origin
  int yields = 0;
  for (int64_t dt = 0; dt < 50 * us; dt += us / 4) yields += y.on_empty(t + dt);
  EXPECT_EQ(yields, 0);  // 200 empty reads within 50 us of the first
  EXPECT_TRUE(y.on_empty(t + 50 * us));
  EXPECT_TRUE(y.on_empty(t + 900 * us));
  y.on_entry();  // a completion
  t += 1000 * us;
  EXPECT_FALSE(y.on_empty(t));
  EXPECT_FALSE(y.on_empty(t + 49 * us));
  EXPECT_TRUE(y.on_empty(t + 51 * us));
  y.on_entry();
  y.on_entry();  // again: nothing to reset
  EXPECT_FALSE(y.on_empty(t + 52 * us));
}

TEST(FiYield, ZeroYieldsOnEveryEmptyReadNegativeNever) {
  EmptyYield every(0);
  EXPECT_FALSE(every.timed());
  for (int i = 0; i < 3; i++) EXPECT_TRUE(every.on_empty(0));
  EmptyYield never(-1);  // FI_MRC_YIELD=0
  EXPECT_TRUE(never.never());
  for (int64_t t : {int64_t(1), int64_t(1) << 40, int64_t(1) << 60})
    EXPECT_FALSE(never.on_empty(t));
  EmptyYield y;
  y.configure(1000);
  EXPECT_TRUE(y.timed());
  EXPECT_FALSE(y.on_empty(0));  // 0 is taken as 1: still a start
  EXPECT_TRUE(y.on_empty(1001));
}

TEST(FiYield, ThresholdParsesWholeMicrosecondsOnly) {
  uint32_t v = 7;
  EXPECT_TRUE(parse_yield_us("0", &v));
  EXPECT_EQ(v, 0u);
  EXPECT_TRUE(parse_yield_us("50", &v));
  EXPECT_EQ(v, 50u);
  EXPECT_TRUE(parse_yield_us("1000000", &v));
  EXPECT_EQ(v, kYieldUsMax);
  v = 7;
  for (const char* bad :
       {"", "-1", "+5", " 5", "5 ", "5us", "abc", "1000001", "99999999999", "0x10"})
    EXPECT_FALSE(parse_yield_us(bad, &v)) << '"' << bad << '"';
  EXPECT_EQ(v, 7u);  // untouched by a bad value
}

}  // namespace
}  // namespace mrc::fi
