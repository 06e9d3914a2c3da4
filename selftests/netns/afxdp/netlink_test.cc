// The rtnetlink helper (user/xdp/netlink): request building and attribute
// walking on their own, and read-only requests (no traffic, nothing changed)
// to the kernel of the test's network namespace about its loopback device.
#include <gtest/gtest.h>
#include <net/if.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "xdp/netlink.hpp"

namespace mrc::xdp::netlink {
namespace {

TEST(Netlink, RequestCarriesHeaderAndPaddedAttributes) {
  rtmsg rm{};
  rm.rtm_family = AF_INET;
  rm.rtm_dst_len = 32;
  Request req(RTM_GETROUTE, 0, rm);
  EXPECT_EQ(req.hdr()->nlmsg_type, RTM_GETROUTE);
  EXPECT_EQ(req.hdr()->nlmsg_flags, NLM_F_REQUEST);
  EXPECT_EQ(req.hdr()->nlmsg_len, NLMSG_LENGTH(sizeof(rtmsg)));
  const uint8_t dst[4] = {198, 18, 0, 1};
  req.add(RTA_DST, dst, sizeof dst);
  const uint8_t odd[3] = {1, 2, 3};  // padded to 4
  req.add(RTA_TABLE + 100, odd, sizeof odd);
  req.add(RTA_OIF, uint32_t(7));
  EXPECT_EQ(req.hdr()->nlmsg_len, NLMSG_SPACE(sizeof(rtmsg)) + 3 * RTA_SPACE(4));

  const auto* h = header<rtmsg>(*req.hdr());
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->rtm_family, AF_INET);
  EXPECT_EQ(h->rtm_dst_len, 32);
  std::vector<uint16_t> types;
  std::vector<size_t> sizes;
  uint32_t oif = 0;
  for_each_attr<rtmsg>(*req.hdr(), [&](uint16_t type, std::span<const uint8_t> d) {
    types.push_back(type);
    sizes.push_back(d.size());
    if (type == RTA_DST) {
      EXPECT_EQ(std::memcmp(d.data(), dst, 4), 0);
    }
    if (type == RTA_OIF) std::memcpy(&oif, d.data(), 4);
  });
  EXPECT_EQ(types, (std::vector<uint16_t>{RTA_DST, RTA_TABLE + 100, RTA_OIF}));
  EXPECT_EQ(sizes, (std::vector<size_t>{4, 3, 4}));
  EXPECT_EQ(oif, 7u);
}

TEST(Netlink, ShortMessageHasNoHeaderNorAttributes) {
  nlmsghdr h{};
  h.nlmsg_len = NLMSG_LENGTH(2);
  EXPECT_EQ(header<ifinfomsg>(h), nullptr);
  int n = 0;
  for_each_attr<ifinfomsg>(h, [&](uint16_t, std::span<const uint8_t>) { ++n; });
  EXPECT_EQ(n, 0);
}

TEST(Netlink, SingleReplyAndDumpOfLoopback) {
  auto nl = Socket::open();
  ASSERT_TRUE(nl) << nl.error().message();
  const int lo = int(if_nametoindex("lo"));
  ASSERT_GT(lo, 0);

  ifinfomsg ifi{};
  ifi.ifi_index = lo;
  Request one(RTM_GETLINK, 0, ifi);
  int replies = 0;
  std::string name;
  auto st = nl->request(one, "RTM_GETLINK lo", [&](const nlmsghdr& h) {
    ++replies;
    EXPECT_EQ(h.nlmsg_type, RTM_NEWLINK);
    for_each_attr<ifinfomsg>(h, [&](uint16_t type, std::span<const uint8_t> d) {
      if (type == IFLA_IFNAME) name.assign(reinterpret_cast<const char*>(d.data()));
    });
  });
  ASSERT_TRUE(st) << st.error().message();
  EXPECT_EQ(replies, 1);
  EXPECT_EQ(name, "lo");

  // A dump: several parts until NLMSG_DONE, loopback among them.
  Request all(RTM_GETLINK, NLM_F_DUMP, ifinfomsg{});
  bool saw_lo = false;
  replies = 0;
  st = nl->request(all, "RTM_GETLINK dump", [&](const nlmsghdr& h) {
    ++replies;
    const auto* x = header<ifinfomsg>(h);
    ASSERT_NE(x, nullptr);
    if (x->ifi_index == lo) saw_lo = true;
  });
  ASSERT_TRUE(st) << st.error().message();
  EXPECT_GE(replies, 1);
  EXPECT_TRUE(saw_lo);

  // The same socket again (the next sequence number).
  replies = 0;
  st = nl->request(one, "RTM_GETLINK lo", [&](const nlmsghdr&) { ++replies; });
  ASSERT_TRUE(st) << st.error().message();
  EXPECT_EQ(replies, 1);
}

TEST(Netlink, KernelErrorComesBackAsErrno) {
  auto nl = Socket::open();
  ASSERT_TRUE(nl) << nl.error().message();
  ifinfomsg ifi{};
  ifi.ifi_index = 0x7ffffff0;  // no such interface
  Request req(RTM_GETLINK, 0, ifi);
  int replies = 0;
  auto st = nl->request(req, "RTM_GETLINK nowhere", [&](const nlmsghdr&) { ++replies; });
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, ENODEV);
  EXPECT_EQ(st.error().context, "RTM_GETLINK nowhere");
  EXPECT_EQ(replies, 0);
}

TEST(Netlink, SocketIsMovableAndEventsDrainWithoutBlocking) {
  auto nl = Socket::open(RTMGRP_LINK);
  ASSERT_TRUE(nl) << nl.error().message();
  const int fd = nl->fd();
  EXPECT_GE(fd, 0);
  Socket moved = std::move(*nl);
  EXPECT_EQ(moved.fd(), fd);
  EXPECT_EQ(nl->fd(), -1);
  auto n = moved.drain([](const nlmsghdr&) {});
  ASSERT_TRUE(n) << n.error().message();
}

}  // namespace
}  // namespace mrc::xdp::netlink
