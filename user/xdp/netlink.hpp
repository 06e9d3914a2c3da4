// rtnetlink (NETLINK_ROUTE) requests and events: the one helper the AF_XDP
// layer (link facts and events), libmrc (next-hop resolution) and mrcd's
// prober (route and neighbour lookups) share.
#pragma once

#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sys/types.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "mrc/result.hpp"
#include "util/unique_fd.hpp"

namespace mrc::xdp::netlink {

// One request message: nlmsghdr, the family header T (ifinfomsg, rtmsg,
// ndmsg, ...) and attributes. NLM_F_REQUEST is always set.
class Request {
 public:
  template <class T>
  Request(uint16_t type, uint16_t flags, const T& family_header) : buf_(NLMSG_SPACE(sizeof(T)), 0) {
    hdr()->nlmsg_len = uint32_t(NLMSG_LENGTH(sizeof(T)));
    hdr()->nlmsg_type = type;
    hdr()->nlmsg_flags = uint16_t(flags | NLM_F_REQUEST);
    std::memcpy(NLMSG_DATA(hdr()), &family_header, sizeof(T));
  }
  // Appends one attribute (rtattr + data, padded).
  void add(uint16_t type, const void* data, size_t len);
  template <class V>
  void add(uint16_t type, const V& v) {
    add(type, &v, sizeof v);
  }

  nlmsghdr* hdr() { return reinterpret_cast<nlmsghdr*>(buf_.data()); }

 private:
  std::vector<uint8_t> buf_;
};

// The family header of a message, or null when the message is too short.
template <class T>
const T* header(const nlmsghdr& h) {
  if (h.nlmsg_len < NLMSG_LENGTH(sizeof(T))) return nullptr;
  return static_cast<const T*>(NLMSG_DATA(&h));
}

// Calls f(type, payload) for every attribute after the family header T.
template <class T, class F>
void for_each_attr(const nlmsghdr& h, F&& f) {
  if (!header<T>(h)) return;
  const auto* base = reinterpret_cast<const uint8_t*>(&h);
  int len = int(h.nlmsg_len) - int(NLMSG_SPACE(sizeof(T)));
  for (auto* a = reinterpret_cast<const rtattr*>(base + NLMSG_SPACE(sizeof(T))); RTA_OK(a, len);
       a = RTA_NEXT(a, len))
    f(a->rta_type,
      std::span<const uint8_t>(static_cast<const uint8_t*>(RTA_DATA(a)), RTA_PAYLOAD(a)));
}

// An owned NETLINK_ROUTE socket of the calling thread's network namespace.
class Socket {
 public:
  using OnMessage = std::function<void(const nlmsghdr&)>;

  // groups: RTMGRP_* multicast groups to receive events from (0: none).
  // timeout_ms bounds every request() (the whole exchange).
  static Result<Socket> open(uint32_t groups = 0, int timeout_ms = 1000);

  int fd() const { return fd_.get(); }

  // Sends req (with the next sequence number) and calls on_msg for every
  // reply message of its sequence number until the reply is complete:
  // NLMSG_DONE, an NLMSG_ERROR (the ACK), or a single-part reply when no
  // ACK was asked for. The kernel's error comes back as Error(errno, what).
  // on_msg may be empty (an ACK is all the request asks for).
  Status request(Request& req, const std::string& what, const OnMessage& on_msg = {});

  // Events: hands every message already received to on_msg without
  // blocking; returns how many. ENOBUFS: events were lost (the kernel
  // dropped some, or one did not fit).
  Result<size_t> drain(const OnMessage& on_msg);

 private:
  Result<ssize_t> receive();

  UniqueFd fd_;
  uint32_t port_id_ = 0;
  uint32_t seq_ = 0;
  int timeout_ms_ = 1000;
  std::vector<uint8_t> buf_;
};

}  // namespace mrc::xdp::netlink
