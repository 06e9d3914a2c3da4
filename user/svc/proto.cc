// The control protocol's codec and socket I/O (proto.hpp).
#include "svc/proto.hpp"

#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <cstring>

namespace mrc::svc {

const char* to_string(Op op) {
  switch (op) {
    case Op::kHello:
      return "HELLO";
    case Op::kAllocPd:
      return "ALLOC_PD";
    case Op::kDeallocPd:
      return "DEALLOC_PD";
    case Op::kRegMr:
      return "REG_MR";
    case Op::kDeregMr:
      return "DEREG_MR";
    case Op::kCreateCq:
      return "CREATE_CQ";
    case Op::kDestroyCq:
      return "DESTROY_CQ";
    case Op::kCreateChannel:
      return "CREATE_COMP_CHANNEL";
    case Op::kCreateQp:
      return "CREATE_QP";
    case Op::kDestroyQp:
      return "DESTROY_QP";
    case Op::kModifyQp:
      return "MODIFY_QP";
    case Op::kQueryQp:
      return "QUERY_QP";
    case Op::kQpStats:
      return "QP_STATS";
    case Op::kStats:
      return "STATS";
    case Op::kObserve:
      return "OBSERVE";
    case Op::kEnd:
      break;
  }
  return "?";
}

bool op_shape(uint16_t op, OpShape& s) {
  constexpr uint32_t H = sizeof(Handle);
  switch (Op(op)) {
    case Op::kHello:
      s = {sizeof(HelloReq), 0, sizeof(HelloRep), 3, false};
      return true;
    case Op::kAllocPd:
      s = {0, 0, H, 0, false};
      return true;
    case Op::kDeallocPd:
    case Op::kDeregMr:
    case Op::kDestroyCq:
    case Op::kDestroyQp:
      s = {H, 0, 0, 0, false};
      return true;
    case Op::kRegMr:
      s = {sizeof(RegMrReq), 0, sizeof(RegMrRep), 0, true};
      return true;
    case Op::kCreateCq:
      s = {sizeof(CreateCqReq), 0, sizeof(CreateCqRep), 0, false};
      return true;
    case Op::kCreateChannel:
      s = {0, 0, H, 1, false};
      return true;
    case Op::kCreateQp:
      s = {sizeof(CreateQpReq), 0, sizeof(CreateQpRep), 0, false};
      return true;
    case Op::kModifyQp:
      s = {sizeof(ModifyQpReq), 0, 0, 0, false};
      return true;
    case Op::kQueryQp:
      s = {H, 0, sizeof(QpAttr), 0, false};
      return true;
    case Op::kQpStats:
      s = {H, 0, sizeof(QpStats), 0, false};
      return true;
    case Op::kStats:
      s = {0, 0, sizeof(StatsRep), 0, false};
      return true;
    case Op::kObserve:
      s = {sizeof(ObserveReq), 0, sizeof(ObserveRep), 0, false};
      return true;
    case Op::kEnd:
      break;
  }
  return false;
}

namespace {
Status check_hdr(const MsgHdr& h) {
  if (h.magic != kMagic) return make_error(EPROTO, "service message: bad magic");
  if (h.version != kVersion)
    return make_error(EPROTO, "service message: protocol version " + std::to_string(h.version) +
                                  " (this side speaks " + std::to_string(kVersion) + ")");
  return {};
}
}  // namespace

Status check_request(const Msg& m) {
  MRC_TRY(check_hdr(m.hdr));
  OpShape s;
  if (!op_shape(m.hdr.op, s))
    return make_error(EINVAL, "service request: unknown op " + std::to_string(m.hdr.op));
  const char* name = to_string(Op(m.hdr.op));
  if (m.hdr.status != 0) return make_error(EINVAL, std::string(name) + ": status set in a request");
  if (m.payload.size() != s.req_len)
    return make_error(EINVAL, std::string(name) + ": payload of " +
                                  std::to_string(m.payload.size()) + " bytes, expected " +
                                  std::to_string(s.req_len));
  const bool fds_ok = s.req_fds_variable ? m.fds.size() <= kMaxPieces : m.fds.size() == s.req_fds;
  if (!fds_ok || m.hdr.nfds != m.fds.size())
    return make_error(EINVAL, std::string(name) + ": " + std::to_string(m.fds.size()) +
                                  " descriptors attached, " + std::to_string(m.hdr.nfds) +
                                  " announced, expected " + std::to_string(s.req_fds));
  return {};
}

Status check_reply(const Msg& m, Op op, uint32_t seq) {
  MRC_TRY(check_hdr(m.hdr));
  if (m.hdr.op != uint16_t(op) || m.hdr.seq != seq)
    return make_error(EPROTO, std::string("service reply: to ") + to_string(Op(m.hdr.op)) + " #" +
                                  std::to_string(m.hdr.seq) + ", expected " + to_string(op) + " #" +
                                  std::to_string(seq));
  if (m.hdr.nfds != m.fds.size())
    return make_error(EPROTO, "service reply: descriptor count disagrees with its header");
  if (m.hdr.status < 0) return make_error(EPROTO, "service reply: negative status");
  if (m.hdr.status > 0) {
    if (!m.fds.empty()) return make_error(EPROTO, "service reply: descriptors on a failure");
    return {};
  }
  OpShape s;
  op_shape(uint16_t(op), s);
  if (m.payload.size() != s.rep_len || m.fds.size() != s.rep_fds)
    return make_error(EPROTO, std::string("service reply to ") + to_string(op) + ": " +
                                  std::to_string(m.payload.size()) + " bytes and " +
                                  std::to_string(m.fds.size()) + " descriptors, expected " +
                                  std::to_string(s.rep_len) + " and " + std::to_string(s.rep_fds));
  return {};
}

std::vector<uint8_t> encode(const MsgHdr& h, const void* payload, size_t len) {
  std::vector<uint8_t> b(sizeof h + len);
  std::memcpy(b.data(), &h, sizeof h);
  if (len) std::memcpy(b.data() + sizeof h, payload, len);
  return b;
}

Result<Msg> decode(const uint8_t* buf, size_t len, std::vector<UniqueFd>&& fds) {
  Msg m;
  m.fds = std::move(fds);
  if (len < sizeof(MsgHdr))
    return make_error(EPROTO,
                      "service message: " + std::to_string(len) + " bytes, shorter than a header");
  std::memcpy(&m.hdr, buf, sizeof m.hdr);
  if (m.hdr.len > kMaxPayload || m.hdr.len != len - sizeof(MsgHdr))
    return make_error(EPROTO, "service message: header says " + std::to_string(m.hdr.len) +
                                  " payload bytes, the datagram has " +
                                  std::to_string(len - sizeof(MsgHdr)));
  m.payload.assign(buf + sizeof(MsgHdr), buf + len);
  return m;
}

Status send_msg(int sock, const MsgHdr& h, const void* payload, size_t len, const int* fds,
                size_t nfds) {
  if (nfds > kMaxFds) return make_error(EINVAL, "service message: too many descriptors");
  std::vector<uint8_t> b = encode(h, payload, len);
  iovec iov{b.data(), b.size()};
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  alignas(cmsghdr) std::array<char, CMSG_SPACE(sizeof(int) * kMaxFds)> cbuf{};
  if (nfds) {
    mh.msg_control = cbuf.data();
    mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
    cmsghdr* c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
    std::memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
  }
  for (;;) {
    const ssize_t n = sendmsg(sock, &mh, MSG_NOSIGNAL);
    if (n == ssize_t(b.size())) return {};
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error(errno, "sending to the service socket");
    return make_error(EIO, "service socket: short send");
  }
}

Result<Msg> recv_msg(int sock) {
  std::array<uint8_t, sizeof(MsgHdr) + kMaxPayload + 1> buf;
  alignas(cmsghdr) std::array<char, CMSG_SPACE(sizeof(int) * kMaxFds)> cbuf{};
  iovec iov{buf.data(), buf.size()};
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = cbuf.data();
  mh.msg_controllen = cbuf.size();
  ssize_t n;
  do n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  if (n < 0) return errno_error(errno, "receiving from the service socket");
  std::vector<UniqueFd> fds;
  for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < k; i++) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      fds.emplace_back(fd);
    }
  }
  if (n == 0) return make_error(ENOTCONN, "the service connection ended");
  if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
    return make_error(EPROTO, "service message: longer than the protocol allows");
  return decode(buf.data(), size_t(n), std::move(fds));
}

MsgHdr reply_hdr(const MsgHdr& req, int status, size_t len, size_t nfds) {
  MsgHdr h{};
  h.magic = kMagic;
  h.version = kVersion;
  h.op = req.op;
  h.seq = req.seq;
  h.len = uint32_t(len);
  h.status = status;
  h.nfds = uint32_t(nfds);
  return h;
}

}  // namespace mrc::svc
