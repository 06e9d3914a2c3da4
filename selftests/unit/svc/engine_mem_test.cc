// The memory model end to end, without sockets (Documentation/service.md
// section 3): a client process shares a malloc'd buffer (share_range) and
// passes the memfds over a Unix socket (SCM_RIGHTS); the "service" (this
// process) maps them (MappedRegion) and registers them in an engine as
// (iova = the client's address, host = its own mapping). The engine sends
// from the client's bytes and a peer's WRITE and WRITE-with-immediate land
// in the client's buffer, with no copy besides the engine's own.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "engine/fixture.hpp"
#include "engine/harness.hpp"
#include "svc/mapping.hpp"
#include "svc/remap.hpp"
#include "unit/svc/mem_test_util.hpp"
#include "util/mmap_area.hpp"

namespace mrc::testing {
namespace {

using namespace core;

constexpr size_t kLen = (1 << 20) + 3000;  // not page-aligned, starts mid-page
constexpr size_t kHalf = kLen / 2;

struct Header {
  uint64_t iova = 0, len = 0;
  uint32_t npieces = 0;
  svc::PieceRef pieces[svc::kMaxPieces];
};

bool send_region(int sock, uint64_t iova, uint64_t len, const std::vector<svc::SharedPiece>& ps) {
  if (ps.size() > svc::kMaxPieces) return false;
  Header h;
  h.iova = iova;
  h.len = len;
  h.npieces = uint32_t(ps.size());
  std::vector<int> fds;
  for (size_t i = 0; i < ps.size(); i++) {
    h.pieces[i] = ps[i].ref();
    fds.push_back(ps[i].fd.get());
  }
  iovec io{&h, sizeof h};
  std::vector<char> ctl(CMSG_SPACE(sizeof(int) * fds.size()));
  msghdr m{};
  m.msg_iov = &io;
  m.msg_iovlen = 1;
  m.msg_control = ctl.data();
  m.msg_controllen = ctl.size();
  cmsghdr* c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
  std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  return ::sendmsg(sock, &m, 0) == ssize_t(sizeof h);
}

// The received header with the pieces' fds replaced by ours.
bool recv_region(int sock, Header* h, std::vector<UniqueFd>* fds) {
  iovec io{h, sizeof *h};
  std::vector<char> ctl(CMSG_SPACE(sizeof(int) * svc::kMaxPieces));
  msghdr m{};
  m.msg_iov = &io;
  m.msg_iovlen = 1;
  m.msg_control = ctl.data();
  m.msg_controllen = ctl.size();
  pollfd p{sock, POLLIN, 0};
  if (::poll(&p, 1, 20000) != 1) return false;
  if (::recvmsg(sock, &m, MSG_CMSG_CLOEXEC) != ssize_t(sizeof *h)) return false;
  cmsghdr* c = CMSG_FIRSTHDR(&m);
  if (!c || c->cmsg_type != SCM_RIGHTS) return false;
  const size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
  if (n != h->npieces) return false;
  for (size_t i = 0; i < n; i++) {
    int fd = -1;
    std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
    fds->emplace_back(fd);
    h->pieces[i].fd = fd;
  }
  return true;
}

// The client: shares a malloc'd buffer (first half its data, second half to
// be written by a peer), then checks what landed. Exit status 0 = verified.
[[noreturn]] void client(int sock) {
  auto* nb = static_cast<uint8_t*>(std::malloc(500));  // a neighbour on the heap
  fill(nb, 500, 90);
  auto* buf = static_cast<uint8_t*>(std::malloc(kLen));
  fill(buf, kHalf, 91);
  std::memset(buf + kHalf, 0, kLen - kHalf);
  auto ps = svc::share_range(buf, kLen);
  if (!ps.ok()) _exit(10);
  if (!send_region(sock, uint64_t(uintptr_t(buf)), kLen, *ps)) _exit(11);
  ps->clear();
  char done = 0;
  pollfd p{sock, POLLIN, 0};
  if (::poll(&p, 1, 30000) != 1 || ::read(sock, &done, 1) != 1 || done != 'D') _exit(12);
  if (!check(buf, kHalf, 91)) _exit(13);
  if (!check(buf + kHalf, kLen - kHalf, 92)) _exit(14);  // what the peer wrote
  if (!check(nb, 500, 90)) _exit(15);
  _exit(0);
}

struct Child {
  pid_t pid = -1;
  ~Child() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
  int wait() {
    int st = 0;
    if (::waitpid(pid, &st, 0) != pid) return -1;
    pid = -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
};

TEST(ServiceMemory, EngineSendsFromAndPlacesIntoAnotherProcess) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd mine(sv[0]), theirs(sv[1]);
  Child ch;
  ch.pid = ::fork();
  ASSERT_GE(ch.pid, 0);
  if (ch.pid == 0) client(theirs.get());
  theirs.close();

  Header h;
  std::vector<UniqueFd> fds;
  ASSERT_TRUE(recv_region(mine.get(), &h, &fds));
  // The child is a fork of this process, so the client's addresses are free
  // here too and the kernel could place the service's view at exactly the
  // same address; occupy them so that iova != host, as between unrelated
  // processes.
  const size_t pg = svc::page_size();
  const uint64_t lo = h.iova & ~uint64_t(pg - 1);
  const size_t span = size_t(((h.iova + h.len + pg - 1) & ~uint64_t(pg - 1)) - lo);
  void* hold = ::mmap(reinterpret_cast<void*>(uintptr_t(lo)), span, PROT_NONE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  MmapArea held;
  if (hold != MAP_FAILED) held = MmapArea(hold, span);
  auto region = svc::MappedRegion::map({h.pieces, h.npieces}, h.iova, h.len);  // the service's view
  ASSERT_TRUE(region.ok()) << region.error().message();
  fds.clear();  // the mapping holds the memfds
  ASSERT_NE(uint64_t(uintptr_t(region->host())), h.iova);

  // Host 0 is the service's engine, host 1 the remote peer.
  Fixture f(kLen);
  auto mr = f.p.e(0).reg_mr(f.p.h(0).pd, h.iova, region->host(), h.len,
                            kAccessLocalWrite | kAccessRemoteWrite);
  ASSERT_TRUE(mr.ok()) << mr.error().message();
  // 1. The client's first half, named by client addresses, goes to the peer.
  Sge g{h.iova, uint32_t(kHalf), mr->lkey};
  SendWr w;
  w.wr_id = 1;
  w.opcode = WrOpcode::kRdmaWrite;
  w.send_flags = kSendSignaled;
  w.sg_list = &g;
  w.num_sge = 1;
  w.remote_addr = f.dst->addr(0);
  w.rkey = f.dst->mr.rkey;
  ASSERT_TRUE(f.p.e(0).post_send(f.q0, w).ok());
  ASSERT_TRUE(f.wait_sends(1));
  EXPECT_EQ(f.swc[0].status, kWcSuccess);
  EXPECT_TRUE(check(f.dst->bytes.data(), kHalf, 91)) << "gathered from the client's pages";
  // 2. The peer writes the second half: a WRITE, then a WRITE-with-imm.
  std::vector<uint8_t> payload(kLen - kHalf);
  fill(payload.data(), payload.size(), 92);
  auto pmr = f.p.e(1).reg_mr(f.p.h(1).pd, payload.data(), payload.size(), kAccessLocalWrite);
  ASSERT_TRUE(pmr.ok());
  RecvWr r;
  r.wr_id = 5;
  ASSERT_TRUE(f.p.e(0).post_recv(f.q0, r).ok());
  const size_t cut = 300000;
  Sge a{uint64_t(uintptr_t(payload.data())), uint32_t(cut), pmr->lkey};
  Sge b{uint64_t(uintptr_t(payload.data())) + cut, uint32_t(payload.size() - cut), pmr->lkey};
  SendWr w1 = w, w2 = w;
  w1.wr_id = 2;
  w1.sg_list = &a;
  w1.remote_addr = h.iova + kHalf;
  w1.rkey = mr->rkey;
  w2.wr_id = 3;
  w2.opcode = WrOpcode::kRdmaWriteWithImm;
  w2.imm_data = 0x5eed;
  w2.sg_list = &b;
  w2.remote_addr = h.iova + kHalf + cut;
  w2.rkey = mr->rkey;
  ASSERT_TRUE(f.p.e(1).post_send(f.q1, w1).ok());
  ASSERT_TRUE(f.p.e(1).post_send(f.q1, w2).ok());
  std::vector<Wc> peer, mine_wc;
  ASSERT_TRUE(f.p.run([&] {
    f.p.poll(1, f.p.h(1).scq, peer);
    f.p.poll(0, f.p.h(0).rcq, mine_wc);
    return peer.size() >= 2 && !mine_wc.empty();
  }));
  for (const Wc& c : peer) EXPECT_EQ(c.status, kWcSuccess);
  EXPECT_EQ(mine_wc[0].status, kWcSuccess);
  EXPECT_EQ(mine_wc[0].imm_data, 0x5eedu);
  EXPECT_TRUE(check(static_cast<uint8_t*>(region->host()) + kHalf, kLen - kHalf, 92));
  // The client checks its own buffer: every byte, its neighbour too.
  ASSERT_EQ(::write(mine.get(), "D", 1), 1);
  EXPECT_EQ(ch.wait(), 0) << "10-15: the client's step that failed (engine_mem_test.cc)";
}

}  // namespace
}  // namespace mrc::testing
