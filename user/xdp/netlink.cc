#include "xdp/netlink.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>

namespace mrc::xdp::netlink {

namespace {
// Room for the largest datagram a dump sends (the kernel sizes them by the
// reader's buffer, up to 32 KiB).
constexpr size_t kBufSize = 32768;
}  // namespace

void Request::add(uint16_t type, const void* data, size_t len) {
  const size_t off = NLMSG_ALIGN(hdr()->nlmsg_len);
  buf_.resize(off + RTA_SPACE(len), 0);
  auto* rta = reinterpret_cast<rtattr*>(buf_.data() + off);
  rta->rta_type = type;
  rta->rta_len = uint16_t(RTA_LENGTH(len));
  std::memcpy(RTA_DATA(rta), data, len);
  hdr()->nlmsg_len = uint32_t(off + RTA_SPACE(len));
}

Result<Socket> Socket::open(uint32_t groups, int timeout_ms) {
  Socket s;
  s.fd_.reset(socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_ROUTE));
  if (!s.fd_) return make_error(errno, "rtnetlink socket");
  sockaddr_nl sa{};
  sa.nl_family = AF_NETLINK;
  sa.nl_groups = groups;
  if (bind(s.fd_.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0)
    return make_error(errno,
                      groups ? "binding rtnetlink to its event groups" : "binding rtnetlink");
  socklen_t sl = sizeof sa;
  if (getsockname(s.fd_.get(), reinterpret_cast<sockaddr*>(&sa), &sl) != 0)
    return make_error(errno, "rtnetlink socket address");
  s.port_id_ = sa.nl_pid;
  s.timeout_ms_ = timeout_ms;
  s.buf_.resize(kBufSize);
  return s;
}

// One datagram from the kernel into buf_: its length; 0: it came from
// elsewhere; -1: none waiting. A truncated one is an error.
Result<ssize_t> Socket::receive() {
  sockaddr_nl from{};
  iovec iov{buf_.data(), buf_.size()};
  msghdr mh{};
  mh.msg_name = &from;
  mh.msg_namelen = sizeof from;
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  const ssize_t got = recvmsg(fd_.get(), &mh, MSG_DONTWAIT);
  if (got < 0 && (errno == EAGAIN || errno == EINTR)) return ssize_t{-1};
  if (got < 0) return make_error(errno, "receiving from rtnetlink");
  if (mh.msg_flags & MSG_TRUNC) return make_error(ENOBUFS, "rtnetlink message truncated");
  return from.nl_pid == 0 ? got : ssize_t{0};
}

Status Socket::request(Request& req, const std::string& what, const OnMessage& on_msg) {
  nlmsghdr* q = req.hdr();
  const uint32_t seq = ++seq_;
  q->nlmsg_seq = seq;
  q->nlmsg_pid = 0;
  const bool acked = q->nlmsg_flags & NLM_F_ACK;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (sendto(fd_.get(), q, q->nlmsg_len, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) <
      0)
    return make_error(errno, "sending " + what);
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms_);
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    pollfd p{fd_.get(), POLLIN, 0};
    const int r = left > 0 ? poll(&p, 1, int(left)) : 0;
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return make_error(errno, "waiting for the reply to " + what);
    if (r == 0)
      return make_error(ETIMEDOUT,
                        "no reply to " + what + " within " + std::to_string(timeout_ms_) + " ms");
    auto got = receive();
    if (!got) return std::move(got).error().wrap(what);
    if (*got <= 0) continue;
    auto len = uint32_t(*got);
    for (auto* h = reinterpret_cast<const nlmsghdr*>(buf_.data()); NLMSG_OK(h, len);
         h = NLMSG_NEXT(h, len)) {
      // A late reply to an earlier request that timed out, or an event.
      if (h->nlmsg_seq != seq || (h->nlmsg_pid != 0 && h->nlmsg_pid != port_id_)) continue;
      if (h->nlmsg_type == NLMSG_NOOP) continue;
      if (h->nlmsg_type == NLMSG_ERROR) {
        const auto* e = header<nlmsgerr>(*h);
        if (!e) return make_error(EIO, what + ": short error message");
        if (e->error) return errno_error(e->error, what);
        return ok_status();  // the ACK
      }
      if (h->nlmsg_type == NLMSG_DONE) {
        // A dump that failed part-way puts its error after the header.
        const auto* e = header<int>(*h);
        if (e && *e < 0) return errno_error(*e, what);
        return ok_status();
      }
      if (h->nlmsg_type == NLMSG_OVERRUN) return make_error(EIO, what + ": overrun");
      if (on_msg) on_msg(*h);
      if (!(h->nlmsg_flags & NLM_F_MULTI) && !acked) return ok_status();
    }
  }
}

Result<size_t> Socket::drain(const OnMessage& on_msg) {
  size_t n = 0;
  for (;;) {
    auto got = receive();
    if (!got) return std::move(got).error();
    if (*got < 0) return n;
    auto len = uint32_t(*got);
    for (auto* h = reinterpret_cast<const nlmsghdr*>(buf_.data()); NLMSG_OK(h, len);
         h = NLMSG_NEXT(h, len)) {
      on_msg(*h);
      ++n;
    }
  }
}

}  // namespace mrc::xdp::netlink
