// The host service's control protocol (user/svc/proto.hpp): every op's exact
// request and reply shape, wrong lengths, wrong descriptor counts, bad magic
// and version, framing, and the socket I/O with SCM_RIGHTS over a
// SOCK_SEQPACKET pair (descriptors that arrive with a bad message are
// closed, never leaked).
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "svc/proto.hpp"

namespace mrc::testing {
namespace {

using svc::Msg;
using svc::MsgHdr;
using svc::Op;
using svc::OpShape;

size_t open_fds() {
  size_t n = 0;
  DIR* d = opendir("/proc/self/fd");
  while (readdir(d)) n++;
  closedir(d);
  return n;
}

std::vector<UniqueFd> eventfds(size_t n) {
  std::vector<UniqueFd> v;
  for (size_t i = 0; i < n; i++) v.emplace_back(eventfd(0, EFD_CLOEXEC));
  return v;
}

// A request of op with len payload bytes and nfds descriptors.
Msg request(uint16_t op, size_t len, size_t nfds) {
  Msg m;
  m.hdr = MsgHdr{svc::kMagic, svc::kVersion, op, 7, uint32_t(len), 0, uint32_t(nfds)};
  m.payload.assign(len, 0);
  m.fds = eventfds(nfds);
  return m;
}

constexpr uint16_t kFirst = uint16_t(Op::kHello), kEnd = uint16_t(Op::kEnd);

TEST(SvcProto, EveryOpHasAShapeAndUnknownOpsNone) {
  OpShape s;
  for (uint16_t op = kFirst; op < kEnd; op++) {
    EXPECT_TRUE(svc::op_shape(op, s)) << op;
    EXPECT_LE(s.req_len, svc::kMaxPayload);
    EXPECT_LE(s.rep_len, svc::kMaxPayload);
    EXPECT_STRNE(svc::to_string(Op(op)), "?");
  }
  for (uint16_t op : {uint16_t(0), kEnd, uint16_t(0xffff)}) EXPECT_FALSE(svc::op_shape(op, s));
  EXPECT_EQ(svc::check_request(request(kEnd, 0, 0)).error().code, EINVAL);
}

TEST(SvcProto, ExactRequestShapesPassEveryDeviationFails) {
  for (uint16_t op = kFirst; op < kEnd; op++) {
    OpShape s;
    ASSERT_TRUE(svc::op_shape(op, s));
    const size_t fds = s.req_fds_variable ? 3 : s.req_fds;
    EXPECT_TRUE(svc::check_request(request(op, s.req_len, fds)).ok()) << svc::to_string(Op(op));
    // One byte more, one byte less.
    EXPECT_EQ(svc::check_request(request(op, s.req_len + 1, fds)).error().code, EINVAL);
    if (s.req_len) {
      EXPECT_EQ(svc::check_request(request(op, s.req_len - 1, fds)).error().code, EINVAL);
    }
    // Descriptor counts: one more than the op takes; announced != attached.
    if (!s.req_fds_variable) {
      EXPECT_EQ(svc::check_request(request(op, s.req_len, s.req_fds + 1)).error().code, EINVAL);
      if (s.req_fds) {
        EXPECT_EQ(svc::check_request(request(op, s.req_len, s.req_fds - 1)).error().code, EINVAL);
      }
    }
    Msg m = request(op, s.req_len, fds);
    m.hdr.nfds++;
    EXPECT_EQ(svc::check_request(m).error().code, EINVAL);
    // Bad magic, another version, a status in a request.
    m = request(op, s.req_len, fds);
    m.hdr.magic ^= 1;
    EXPECT_EQ(svc::check_request(m).error().code, EPROTO);
    m = request(op, s.req_len, fds);
    m.hdr.version = svc::kVersion + 1;
    EXPECT_EQ(svc::check_request(m).error().code, EPROTO);
    m = request(op, s.req_len, fds);
    m.hdr.status = 5;
    EXPECT_EQ(svc::check_request(m).error().code, EINVAL);
  }
}

TEST(SvcProto, RegMrTakesUpToMaxPiecesDescriptors) {
  OpShape s;
  ASSERT_TRUE(svc::op_shape(uint16_t(Op::kRegMr), s));
  EXPECT_TRUE(svc::check_request(request(uint16_t(Op::kRegMr), s.req_len, 0)).ok());
  EXPECT_TRUE(svc::check_request(request(uint16_t(Op::kRegMr), s.req_len, svc::kMaxPieces)).ok());
  EXPECT_EQ(svc::check_request(request(uint16_t(Op::kRegMr), s.req_len, svc::kMaxPieces + 1))
                .error()
                .code,
            EINVAL);
}

TEST(SvcProto, Replies) {
  for (uint16_t op = kFirst; op < kEnd; op++) {
    OpShape s;
    ASSERT_TRUE(svc::op_shape(op, s));
    Msg r = request(op, s.rep_len, s.rep_fds);
    EXPECT_TRUE(svc::check_reply(r, Op(op), 7).ok()) << svc::to_string(Op(op));
    EXPECT_EQ(svc::check_reply(r, Op(op), 8).error().code, EPROTO);  // another seq
    EXPECT_EQ(svc::check_reply(r, Op(op == kFirst ? op + 1 : kFirst), 7).error().code, EPROTO);
    Msg bad = request(op, s.rep_len + 1, s.rep_fds);
    EXPECT_EQ(svc::check_reply(bad, Op(op), 7).error().code, EPROTO);
    bad = request(op, s.rep_len, s.rep_fds + 1);
    EXPECT_EQ(svc::check_reply(bad, Op(op), 7).error().code, EPROTO);
    // A failure: any sentence, no descriptors; a negative status is garbage.
    Msg f = request(op, 11, 0);
    f.hdr.status = EPERM;
    EXPECT_TRUE(svc::check_reply(f, Op(op), 7).ok());
    f.hdr.status = -1;
    EXPECT_EQ(svc::check_reply(f, Op(op), 7).error().code, EPROTO);
    Msg ff = request(op, 11, 1);
    ff.hdr.status = EPERM;
    EXPECT_EQ(svc::check_reply(ff, Op(op), 7).error().code, EPROTO);
  }
}

TEST(SvcProto, DecodeFramesExactly) {
  MsgHdr h{svc::kMagic, svc::kVersion, uint16_t(Op::kAllocPd), 1, 4, 0, 0};
  std::vector<uint8_t> b = svc::encode(h, "abcd", 4);
  auto m = svc::decode(b.data(), b.size(), {});
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->payload.size(), 4u);
  EXPECT_EQ(svc::decode(b.data(), b.size() - 1, {}).error().code, EPROTO);        // len disagrees
  EXPECT_EQ(svc::decode(b.data(), sizeof(MsgHdr) - 1, {}).error().code, EPROTO);  // no header
  h.len = svc::kMaxPayload + 1;
  std::vector<uint8_t> big = svc::encode(h, std::vector<uint8_t>(h.len).data(), h.len);
  EXPECT_EQ(svc::decode(big.data(), big.size(), {}).error().code, EPROTO);
}

class SvcSocket : public ::testing::Test {
 protected:
  void SetUp() override {
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
    a.reset(sv[0]);
    b.reset(sv[1]);
  }
  UniqueFd a, b;
};

TEST_F(SvcSocket, MessageAndDescriptorsRoundTrip) {
  auto fds = eventfds(2);
  int raw[2] = {fds[0].get(), fds[1].get()};
  svc::Handle hd{42};
  MsgHdr h{svc::kMagic, svc::kVersion, uint16_t(Op::kAllocPd), 3, sizeof hd, 0, 2};
  ASSERT_TRUE(svc::send_msg(a.get(), h, &hd, sizeof hd, raw, 2).ok());
  auto m = svc::recv_msg(b.get());
  ASSERT_TRUE(m.ok()) << m.error().message();
  EXPECT_EQ(m->hdr.seq, 3u);
  ASSERT_NE(m->as<svc::Handle>(), nullptr);
  EXPECT_EQ(m->as<svc::Handle>()->h, 42u);
  ASSERT_EQ(m->fds.size(), 2u);
  struct stat st {};
  EXPECT_EQ(fstat(m->fds[1].get(), &st), 0);
  EXPECT_EQ(m->as<svc::RegMrRep>(), nullptr);  // another size: no view
}

TEST_F(SvcSocket, OversizedDatagramIsRefusedAndItsDescriptorsClosed) {
  const size_t before = open_fds();
  {
    std::vector<uint8_t> junk(sizeof(MsgHdr) + svc::kMaxPayload + 100, 0xab);
    auto fds = eventfds(3);
    int raw[3] = {fds[0].get(), fds[1].get(), fds[2].get()};
    iovec iov{junk.data(), junk.size()};
    alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof raw)] = {};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = cbuf;
    mh.msg_controllen = sizeof cbuf;
    cmsghdr* c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof raw);
    std::memcpy(CMSG_DATA(c), raw, sizeof raw);
    ASSERT_EQ(sendmsg(a.get(), &mh, 0), ssize_t(junk.size()));
  }
  auto m = svc::recv_msg(b.get());
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().code, EPROTO);
  EXPECT_EQ(open_fds(), before);  // the three passed descriptors were closed
}

TEST_F(SvcSocket, TooManyDescriptorsAreCutAndRefused) {
  const size_t before = open_fds();
  {
    auto fds = eventfds(svc::kMaxFds + 8);
    std::vector<int> raw;
    for (auto& f : fds) raw.push_back(f.get());
    MsgHdr h{svc::kMagic, svc::kVersion, uint16_t(Op::kRegMr), 1, 0, 0, uint32_t(raw.size())};
    std::vector<uint8_t> b0 = svc::encode(h, nullptr, 0);
    iovec iov{b0.data(), b0.size()};
    std::vector<char> cbuf(CMSG_SPACE(sizeof(int) * raw.size()));
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = cbuf.data();
    mh.msg_controllen = cbuf.size();
    cmsghdr* c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * raw.size());
    std::memcpy(CMSG_DATA(c), raw.data(), sizeof(int) * raw.size());
    ASSERT_EQ(sendmsg(a.get(), &mh, 0), ssize_t(b0.size()));
  }
  auto m = svc::recv_msg(b.get());
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().code, EPROTO);
  EXPECT_EQ(open_fds(), before);
  // send_msg itself refuses more than the protocol carries.
  std::vector<int> many(svc::kMaxFds + 1, 0);
  MsgHdr h{svc::kMagic, svc::kVersion, uint16_t(Op::kRegMr), 1, 0, 0, 0};
  EXPECT_EQ(svc::send_msg(a.get(), h, nullptr, 0, many.data(), many.size()).error().code, EINVAL);
}

TEST_F(SvcSocket, PeerCloseIsAnOrderlyEnd) {
  a.close();
  auto m = svc::recv_msg(b.get());
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().code, ENOTCONN);
}

}  // namespace
}  // namespace mrc::testing
