// An adversarial client of mrc-serviced (svc_garbage_test.sh): for a bounded
// time it sends the service garbage on its control socket (random datagrams,
// bad magic and versions, unknown ops, wrong lengths and descriptor counts,
// descriptors of the wrong kind, requests before HELLO, foreign handles) and,
// after an honest HELLO and a real PD, CQ and QP, writes random bytes over its
// whole shared area, publishes garbage work requests and ready entries and
// floods the doorbell. First it checks isolation (exit 1 if broken): a
// second client naming the first's QP handle or lkey gets EINVAL, as for
// nonexistent ones, and the first's objects stay. The test checks that the
// service and an honest transfer beside it survive. Prints what it sent.
//   svc_garbage SOCKET IF[,IF...] SECONDS SEED
// The "shut" mode: an honest HELLO, then it shuts down and closes its end of
// the doorbell and holds the connection for SECONDS (prints "shut" first):
// the service must stop watching that doorbell, not wake on its end of file
// for ever.
//   svc_garbage SOCKET IF[,IF...] shut SECONDS
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "svc/client.hpp"
#include "svc/proto.hpp"
#include "svc/remap.hpp"

namespace svc = mrc::svc;
using mrc::UniqueFd;

namespace {

std::mt19937_64 rng;
uint64_t sent = 0, replies = 0, errors = 0, connects = 0, area_writes = 0;

void drain_reply(int s) {
  pollfd p{s, POLLIN, 0};
  if (poll(&p, 1, 50) == 1 && (p.revents & POLLIN)) {
    auto m = svc::recv_msg(s);
    if (m) {
      replies++;
      if (m->hdr.status) errors++;
    }
  }
}

void send_hdr(int s, uint16_t op, uint32_t magic, uint16_t ver, size_t len, const int* fds,
              size_t nfds, uint32_t announced) {
  std::vector<uint8_t> payload(len);
  for (auto& b : payload) b = uint8_t(rng());
  svc::MsgHdr h{magic, ver, op, uint32_t(rng()), uint32_t(len), 0, announced};
  (void)svc::send_msg(s, h, payload.data(), len, fds, nfds);
  sent++;
}

// One connection, one kind of garbage, before any HELLO.
void pre_hello_garbage(const std::string& path) {
  auto s = svc::connect_service(path);
  if (!s) return;
  connects++;
  const int kind = int(rng() % 7);
  UniqueFd p[2];
  int pp[2];
  if (pipe(pp) == 0) p[0].reset(pp[0]), p[1].reset(pp[1]);
  const int pf[3] = {p[0].get(), p[1].get(), p[0].get()};
  svc::OpShape sh{};
  (void)svc::op_shape(uint16_t(svc::Op::kHello), sh);
  switch (kind) {
    case 0: {  // random bytes, random length
      std::vector<uint8_t> b(rng() % 5000);
      for (auto& x : b) x = uint8_t(rng());
      (void)!send(s->get(), b.data(), b.size(), MSG_NOSIGNAL);
      sent++;
      break;
    }
    case 1:
      send_hdr(s->get(), uint16_t(svc::Op::kHello), svc::kMagic ^ 1, svc::kVersion, sh.req_len, pf,
               1, 1);
      break;
    case 2:
      send_hdr(s->get(), uint16_t(svc::Op::kHello), svc::kMagic, 77, sh.req_len, pf, 1, 1);
      break;
    case 3:
      send_hdr(s->get(), uint16_t(rng()), svc::kMagic, svc::kVersion, rng() % 64, nullptr, 0, 0);
      break;
    case 4:  // a HELLO with a pipe for the async eventfd
      send_hdr(s->get(), uint16_t(svc::Op::kHello), svc::kMagic, svc::kVersion, sh.req_len, pf, 1,
               1);
      break;
    case 5:  // wrong descriptor count
      send_hdr(s->get(), uint16_t(svc::Op::kHello), svc::kMagic, svc::kVersion, sh.req_len, pf, 3,
               2);
      break;
    default:  // an op before HELLO
      send_hdr(s->get(), uint16_t(svc::Op::kAllocPd), svc::kMagic, svc::kVersion, 0, nullptr, 0, 0);
  }
  drain_reply(s->get());
}

struct Honest {
  UniqueFd sock, area_fd, bell, async;
  uint8_t* area = nullptr;
  uint64_t size = 0;
  uint32_t seq = 0;
  svc::QpLayout qp{};
  svc::CqLayout cq{};
};

mrc::Result<svc::Msg> call(Honest& h, svc::Op op, const void* req, size_t len,
                           const int* fds = nullptr, size_t nfds = 0) {
  svc::MsgHdr hd{svc::kMagic, svc::kVersion, uint16_t(op), ++h.seq, uint32_t(len),
                 0,           uint32_t(nfds)};
  MRC_TRY(svc::send_msg(h.sock.get(), hd, req, len, fds, nfds));
  sent++;
  auto m = svc::recv_msg(h.sock.get());
  if (m) {
    replies++;
    if (m->hdr.status) errors++;
  }
  return m;
}

bool hello(Honest& h, const std::string& path, const std::vector<std::string>& ifs) {
  auto s = svc::connect_service(path);
  if (!s) return false;
  h.sock = std::move(*s);
  svc::HelloReq rq{};
  rq.api_version = mrc::kApiVersion;
  rq.udp_port = MRC_UDP_PORT_DEFAULT;
  rq.nifs = uint8_t(ifs.size());
  for (size_t i = 0; i < ifs.size(); i++)
    std::strncpy(rq.ifnames[i], ifs[i].c_str(), svc::kIfName - 1);
  auto m = call(h, svc::Op::kHello, &rq, sizeof rq);
  if (!m || m->hdr.status || m->fds.size() != 3) return false;
  h.async = std::move(m->fds[2]);
  h.size = m->as<svc::HelloRep>()->area_size;
  h.area_fd = std::move(m->fds[0]);
  h.bell = std::move(m->fds[1]);
  void* p = mmap(nullptr, h.size, PROT_READ | PROT_WRITE, MAP_SHARED, h.area_fd.get(), 0);
  if (p == MAP_FAILED) return false;
  h.area = static_cast<uint8_t*>(p);
  // A real PD, CQ and QP: rings the engine drains.
  auto pd = call(h, svc::Op::kAllocPd, nullptr, 0);
  svc::CreateCqReq cr{256, 0};
  auto cq = call(h, svc::Op::kCreateCq, &cr, sizeof cr);
  if (!pd || !cq || pd->hdr.status || cq->hdr.status) return false;
  h.cq = cq->as<svc::CreateCqRep>()->lay;
  svc::CreateQpReq qr{};
  qr.init.pd = pd->as<svc::Handle>()->h;
  qr.init.send_cq = qr.init.recv_cq = cq->as<svc::CreateCqRep>()->h;
  auto qp = call(h, svc::Op::kCreateQp, &qr, sizeof qr);
  if (!qp || qp->hdr.status) return false;
  h.qp = qp->as<svc::CreateQpRep>()->lay;
  return true;
}

// Random control requests of the exact size of a random op (random handles).
void control_garbage(Honest& h) {
  const uint16_t op = uint16_t(2 + rng() % (uint16_t(svc::Op::kEnd) - 2));  // not HELLO
  svc::OpShape sh{};
  if (!svc::op_shape(op, sh)) return;
  std::vector<uint8_t> b(sh.req_len);
  for (auto& x : b) x = uint8_t(rng());
  UniqueFd e(eventfd(0, EFD_CLOEXEC));
  const int f = e.get();
  const size_t nfds = sh.req_fds_variable ? 0 : sh.req_fds;
  (void)call(h, svc::Op(op), b.data(), b.size(), &f, nfds);
}

// Published garbage: work requests and ready entries whose seq says
// "published" for the positions the service is at (and anything else).
void bell(Honest& h, int n) {
  const uint8_t b[64] = {};
  for (int k = 0; k < n; k++) (void)!write(h.bell.get(), b, sizeof b);
}

void ring_garbage(Honest& h, uint64_t lap) {
  auto* sq = reinterpret_cast<svc::Slot<svc::Sqe>*>(h.area + h.qp.sq_off + sizeof(svc::RingIdx));
  for (uint64_t i = 0; i < h.qp.sq_n; i++) {
    uint8_t* v = reinterpret_cast<uint8_t*>(&sq[i].v);
    for (size_t k = 0; k < sizeof(svc::Sqe); k++) v[k] = uint8_t(rng());
    sq[i].seq.store(lap * h.qp.sq_n + i + 1 + (rng() % 4 == 0 ? rng() : 0));
  }
  auto* hdr = reinterpret_cast<svc::AreaHdr*>(h.area);
  const uint64_t rn = h.size > sizeof *hdr ? hdr->ready_n : 0;
  if (rn && rn <= 65536 && hdr->ready_off + svc::ring_bytes<uint32_t>(rn) <= h.size) {
    auto* rd =
        reinterpret_cast<svc::Slot<uint32_t>*>(h.area + hdr->ready_off + sizeof(svc::RingIdx));
    for (uint64_t i = 0; i < rn; i++) {
      rd[i].v = uint32_t(rng() % 4 ? 0 : rng());
      rd[i].seq.store(lap * rn + i + 1);
    }
  }
  bell(h, 64);
  area_writes++;
}

void area_garbage(Honest& h) {
  for (uint64_t off = 0; off < h.size; off += 4096)
    for (size_t k = 0; k < 64; k++) h.area[off + (rng() % 4096)] = uint8_t(rng());
  area_writes++;
}

// Two honest clients: the second names the first's second QP handle and
// its region's lkey; the service must answer exactly as for a handle that
// does not exist (EINVAL), and the first's objects must stay.
bool isolation(const std::string& path, const std::vector<std::string>& ifs) {
  Honest a, b;
  if (!hello(a, path, ifs) || !hello(b, path, ifs)) {
    std::printf("isolation: HELLO failed\n");
    return false;
  }
  svc::CreateQpReq qr{};
  qr.init.pd = 0;
  qr.init.send_cq = qr.init.recv_cq = 0;
  auto q = call(a, svc::Op::kCreateQp, &qr, sizeof qr);  // a's handle 1
  const size_t len = 1 << 20;
  void* buf = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  auto pieces = svc::share_range(buf, len);
  if (!q || q->hdr.status || !pieces || pieces->size() != 1) {
    std::printf("isolation: setup failed\n");
    return false;
  }
  auto rq = std::make_unique<svc::RegMrReq>();
  *rq = svc::RegMrReq{};
  rq->iova = uint64_t(reinterpret_cast<uintptr_t>(buf));
  rq->length = len;
  rq->access = mrc::kAccessLocalWrite | mrc::kAccessRemoteWrite;
  rq->npieces = 1;
  rq->pieces[0] = {(*pieces)[0].fd_offset, (*pieces)[0].addr, (*pieces)[0].len};
  const int pfd = (*pieces)[0].fd.get();
  auto mr = call(a, svc::Op::kRegMr, rq.get(), sizeof *rq, &pfd, 1);
  if (!mr || mr->hdr.status) {
    std::printf("isolation: reg_mr failed\n");
    return false;
  }
  const uint32_t lkey = mr->as<svc::RegMrRep>()->lkey;
  bool ok = true;
  auto expect = [&](const char* what, Honest& h, svc::Op op, uint32_t handle, int want) {
    svc::Handle hd{handle};
    auto m = call(h, op, &hd, sizeof hd);
    const int got = m ? m->hdr.status : -1;
    std::printf("isolation: %s: %s (want %s)\n", what, got ? std::strerror(got) : "ok",
                want ? std::strerror(want) : "ok");
    if (got != want) ok = false;
  };
  expect("B queries A's QP handle 1", b, svc::Op::kQueryQp, 1, EINVAL);
  expect("B destroys A's QP handle 1", b, svc::Op::kDestroyQp, 1, EINVAL);
  expect("B deregisters A's lkey", b, svc::Op::kDeregMr, lkey, EINVAL);
  expect("B deallocates a PD handle it does not have", b, svc::Op::kDeallocPd, 7, EINVAL);
  expect("A queries its QP handle 1", a, svc::Op::kQueryQp, 1, 0);
  expect("A deregisters its lkey", a, svc::Op::kDeregMr, lkey, 0);
  munmap(a.area, a.size);
  munmap(b.area, b.size);
  munmap(buf, len);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: svc_garbage SOCKET IF[,IF...] (SECONDS SEED | shut SECONDS)\n");
    return 2;
  }
  const std::string path = argv[1];
  std::vector<std::string> ifs;
  for (char* t = std::strtok(argv[2], ","); t; t = std::strtok(nullptr, ",")) ifs.push_back(t);
  if (std::string(argv[3]) == "shut") {
    Honest h;
    if (!hello(h, path, ifs)) {
      std::fprintf(stderr, "svc_garbage: HELLO refused\n");
      return 1;
    }
    (void)shutdown(h.bell.get(), SHUT_WR);  // a pipe of an older service: not a socket
    h.bell.close();
    std::printf("shut\n");
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::duration<double>(std::atof(argv[4])));
    return 0;
  }
  const double secs = std::atof(argv[3]);
  rng.seed(std::strtoull(argv[4], nullptr, 0));
  if (!isolation(path, ifs)) return 1;
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  uint64_t hellos = 0;
  while (elapsed() < secs) {
    uint64_t lap = 0;  // the service's positions start at 0 per client
    for (int i = 0; i < 20; i++) pre_hello_garbage(path);
    Honest h;
    if (!hello(h, path, ifs)) continue;
    hellos++;
    for (int i = 0; i < 200 && elapsed() < secs; i++) {
      control_garbage(h);
      if (i % 10 == 0) ring_garbage(h, lap++);
    }
    area_garbage(h);
    // Flood the doorbell, then make our end of it blocking: the service's
    // end must not care.
    bell(h, 2048);
    (void)fcntl(h.bell.get(), F_SETFL, 0);
    if (h.area) munmap(h.area, h.size);
  }
  std::printf(
      "garbage: %llu connections, %llu honest HELLOs, %llu messages, %llu replies (%llu errors), "
      "%llu area writes\n",
      (unsigned long long)connects, (unsigned long long)hellos, (unsigned long long)sent,
      (unsigned long long)replies, (unsigned long long)errors, (unsigned long long)area_writes);
  return 0;
}
