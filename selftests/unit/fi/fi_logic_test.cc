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
  EXPECT_EQ(rx.take_credits(2), 2u);
  EXPECT_EQ(rx.take_credits(100), 1u);
  EXPECT_EQ(rx.take_credits(100), 0u);
  EXPECT_TRUE(rx.release(3));
  EXPECT_EQ(rx.take_credits(100), 1u);
  EXPECT_EQ(rx.occupied(), 0u);
}

TEST(FiRing, SenderStopsWithoutCreditOrBounceSlot) {
  TxRing tx(3);
  EXPECT_EQ(tx.claim(), 0u);
  EXPECT_EQ(tx.claim(), 1u);
  EXPECT_EQ(tx.claim(), 2u);
  EXPECT_FALSE(tx.can_send());  // no credit
  EXPECT_TRUE(tx.grant(1));
  EXPECT_FALSE(tx.can_send());  // a credit, but every bounce slot in flight
  tx.bounce_done();
  EXPECT_TRUE(tx.can_send());
  EXPECT_EQ(tx.claim(), 0u);
  EXPECT_FALSE(tx.grant(4));  // more than the ring: a peer bug
  EXPECT_TRUE(tx.grant(3));
  EXPECT_EQ(tx.credits(), 3u);
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
          wire.push_back(tx.claim());
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
        if (rx.to_return() >= kSlots / 4 || held.empty()) {
          ASSERT_TRUE(tx.grant(rx.take_credits(kMaxCredits)));
        }
        break;
    }
  }
  EXPECT_EQ(consumed, 20000u);
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

}  // namespace
}  // namespace mrc::fi
