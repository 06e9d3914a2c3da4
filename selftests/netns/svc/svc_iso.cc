// Isolation between the clients of one mrc-serviced (issue 23 item 4,
// Documentation/service.md section 6), driven by svc_iso_test.sh. Three
// roles exchange their QPNs, keys and addresses through files in DIR:
//
//   owner    (host A, through A's service): process A. A 2 MiB region with a
//            known pattern, one QP connected to the peer's "legit" QP. It
//            expects one WRITE-with-immediate of 1 MiB into the first half
//            (verified) and no change to the second half.
//   intruder (host A, same service): process B. Its own PD, region and QP,
//            connected to the peer's "forger" QP. It names A's handles, QPN
//            and lkey on its own connection to the service (every one must
//            be answered EINVAL, as for objects that do not exist), posts a
//            WRITE whose SGE names A's lkey (must complete with an error and
//            send nothing), then lets the peer forge.
//   peer     (host B): two QPs. Through the forger QP (connected to B's QP,
//            so B's protection domain) it first writes with B's own rkey
//            (must succeed: the path works), then with A's rkey and address
//            (ReDMArk-style forged rkey: must fail with a remote access error
//            and write nothing), then through the legit QP it writes A's
//            first half with A's rkey (must succeed, A verifies).
//
// Every wait is bounded (20 s); each role prints "ok"/"FAIL" lines and exits
// 1 on a failed check, 2 on a setup error.
//   svc_iso ROLE DIR IFS PEER_ADDR,PEER_ADDR,...
#include <arpa/inet.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "mrc/mrc.hpp"
#include "svc/client.hpp"
#include "svc/proto.hpp"
#include "svc_tool.hpp"
#include "util/strings.hpp"

namespace {

using svc_tool::check;
using svc_tool::die;
using svc_tool::failures;
using svc_tool::must;
std::vector<std::string> split(const std::string& s) { return mrc::util::split(s, ','); }

using Clock = std::chrono::steady_clock;
constexpr auto kWait = std::chrono::seconds(20);
constexpr size_t kHalf = 1 << 20;
constexpr uint32_t kImm = 0x150;

uint8_t owner_byte(size_t i) { return uint8_t(i * 7 + 3 + (i >> 12)); }
uint8_t peer_byte(size_t i) { return uint8_t(i * 13 + 5 + (i >> 10)); }

std::string dir;
// Files: written whole, then renamed (a reader never sees half a line).
void put(const std::string& name, const std::vector<uint64_t>& v) {
  const std::string p = dir + "/" + name;
  {
    std::ofstream f(p + ".tmp");
    for (uint64_t x : v) f << x << ' ';
    f << '\n';
  }
  if (std::rename((p + ".tmp").c_str(), p.c_str()) != 0) die("rename " + p);
}
std::vector<uint64_t> get(const std::string& name) {
  const std::string p = dir + "/" + name;
  const auto t0 = Clock::now();
  while (Clock::now() - t0 < kWait) {
    std::ifstream f(p);
    if (f) {
      std::vector<uint64_t> v;
      for (uint64_t x; f >> x;) v.push_back(x);
      return v;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  die("no " + p + " within 20 s");
}

struct Dev {
  std::unique_ptr<mrc::Context> ctx;
  std::vector<std::string> peers;
};

Dev open_dev(const std::string& ifs, const std::string& peers) {
  mrc::DeviceOptions o;
  o.interfaces = split(ifs);
  Dev d{must(mrc::Context::open(o), "open"), split(peers)};
  return d;
}

// RESET -> INIT -> RTR -> RTS towards dest (PSNs 1 both ways).
void connect(Dev& d, mrc::Qp& qp, uint32_t dest) {
  mrc::QpAttr a;
  a.qp_state = mrc::QpState::kInit;
  a.qp_access_flags = mrc::kAccessLocalWrite | mrc::kAccessRemoteWrite;
  must(qp.modify(a, mrc::kQpState | mrc::kQpPkeyIndex | mrc::kQpAccessFlags,
                 mrc::kMrcHint | mrc::kMrcEvProfileId | mrc::kMrcCcProfileId),
       "modify to INIT");
  a = mrc::QpAttr{};
  a.qp_state = mrc::QpState::kRtr;
  a.path_mtu = must(d.ctx->path_mtu_limit(mrc::IpVersion::kV4), "path MTU");
  a.dest_qp_num = dest;
  a.rq_psn = 1;
  const auto ports = d.ctx->ports();
  for (size_t i = 0; i < ports.size() && i < d.peers.size(); i++) {
    mrc::Gid g;
    if (inet_pton(AF_INET, d.peers[i].c_str(), g.b.data()) != 1) die("bad address " + d.peers[i]);
    a.av[ports[i].port] = must(d.ctx->resolve(ports[i].port, g), "resolve");
  }
  a.peer_max_wimm_dest = 64;
  a.max_wimm_dest = 64;
  a.mpr_dest = 4;
  must(qp.modify(a, mrc::kQpState | mrc::kQpAv | mrc::kQpPathMtu | mrc::kQpDestQpn | mrc::kQpRqPsn,
                 mrc::kMrcMaxWimmDest | mrc::kMrcMprDest),
       "modify to RTR");
  a = mrc::QpAttr{};
  a.qp_state = mrc::QpState::kRts;
  a.sq_psn = 1;
  a.max_wimm = 64;
  a.mpr = 4;
  a.timeout = 12;  // 16.8 ms
  a.retry_linear = 7;
  a.retry_exp = 3;
  must(qp.modify(a, mrc::kQpState | mrc::kQpSqPsn,
                 mrc::kMrcMaxWimm | mrc::kMrcMpr | mrc::kMrcTimeout | mrc::kMrcRetryCnt),
       "modify to RTS");
}

struct Node {
  Dev d;
  uint32_t pd = 0;
  std::unique_ptr<mrc::Cq> cq;
};
Node node(const std::string& ifs, const std::string& peers) {
  Node n{open_dev(ifs, peers)};
  n.pd = must(n.d.ctx->alloc_pd(), "alloc_pd");
  n.cq = must(n.d.ctx->create_cq(256), "create_cq");
  return n;
}
std::unique_ptr<mrc::Qp> make_qp(Node& n) {
  mrc::QpInitAttr init;
  init.pd = n.pd;
  init.cap.max_send_wr = 64;
  init.cap.max_recv_wr = 64;
  init.cap.max_send_sge = 1;
  return must(n.d.ctx->create_qp(init, *n.cq, *n.cq), "create_qp");
}

// One completion (bounded); status 0xff when none came.
mrc::Wc one_wc(mrc::Cq& cq) {
  const auto t0 = Clock::now();
  while (Clock::now() - t0 < kWait) {
    mrc::Wc wc[1];
    auto n = cq.poll(wc);
    if (!n) die("poll: " + n.error().message());
    if (*n) return wc[0];
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  mrc::Wc none{};
  none.status = mrc::WcStatus(0xff);
  return none;
}

mrc::Status write(mrc::Qp& qp, uint64_t id, const mrc::MemoryRegion& src, size_t off, size_t len,
                  uint64_t raddr, uint32_t rkey, bool imm) {
  mrc::Sge sge{.addr = uintptr_t(src.addr) + off, .length = uint32_t(len), .lkey = src.lkey};
  mrc::SendWr w;
  w.wr_id = id;
  w.opcode = imm ? mrc::WrOpcode::kRdmaWriteWithImm : mrc::WrOpcode::kRdmaWrite;
  w.send_flags = mrc::kSendSignaled;
  w.sg_list = &sge;
  w.num_sge = 1;
  w.remote_addr = raddr;
  w.rkey = rkey;
  w.imm_data = imm ? kImm : 0;
  return qp.post_send(w);
}

std::string status_name(mrc::WcStatus s) {
  return s == mrc::WcStatus(0xff) ? "none within 20 s" : std::to_string(int(s));
}

// ---------------------------------------------------------------------------

int owner(const std::string& ifs, const std::string& peers) {
  Node n = node(ifs, peers);
  std::vector<uint8_t> buf(2 * kHalf);
  for (size_t i = 0; i < buf.size(); i++) buf[i] = owner_byte(i);
  const mrc::MemoryRegion mr =
      must(n.d.ctx->reg_mr(n.pd, buf.data(), buf.size(),
                           mrc::kAccessLocalWrite | mrc::kAccessRemoteWrite),
           "reg_mr");
  auto qp = make_qp(n);
  put("owner", {uint64_t(getpid()), qp->qpn(), n.pd, n.cq->handle(), mr.lkey, mr.rkey,
                uint64_t(uintptr_t(buf.data())), buf.size()});
  const auto p = get("peer");  // legit qpn, forger qpn, sink rkey, sink addr
  connect(n.d, *qp, uint32_t(p.at(0)));
  mrc::RecvWr r;
  r.wr_id = 99;
  must(qp->post_recv(r), "post_recv");
  put("owner.ready", {1});
  const mrc::Wc wc = one_wc(*n.cq);
  check(wc.status == mrc::kWcSuccess && wc.wr_id == 99 && wc.imm_data == kImm,
        "A: the peer's WRITE-with-immediate arrived (status " + status_name(wc.status) + ")");
  bool first = true, second = true;
  for (size_t i = 0; i < kHalf; i++) first &= buf[i] == peer_byte(i);
  check(first, "A: its own transfer (1 MiB from its peer) verified");
  (void)get("end");
  for (size_t i = kHalf; i < 2 * kHalf; i++) second &= buf[i] == owner_byte(i);
  check(second, "A: the half the forged rkey aimed at is unchanged");
  auto st = must(qp->stats(), "qp stats");
  check(st.rem_access_errors == 0,
        "A: its QP counts no remote access error (" + std::to_string(st.rem_access_errors) + ")");
  must(n.d.ctx->destroy_qp(std::move(qp)), "destroy_qp");
  must(n.d.ctx->dereg_mr(mr), "dereg_mr");
  return failures ? 1 : 0;
}

// B names A's objects on a connection of its own (a client of the service
// with its own, empty tables: whatever handle it names is somebody else's).
void name_foreign(const std::vector<uint64_t>& a) {
  const char* sock = std::getenv("MRC_SERVICE_SOCKET");
  auto s = mrc::svc::connect_service(sock ? sock : mrc::svc::kDefaultSocket);
  if (!s) die("connecting to the service: " + s.error().message());
  uint32_t seq = 0;
  auto call = [&](mrc::svc::Op op, uint32_t h) {
    mrc::svc::Handle hd{h};
    mrc::svc::MsgHdr m{mrc::svc::kMagic, mrc::svc::kVersion, uint16_t(op), ++seq, sizeof hd, 0, 0};
    if (!mrc::svc::send_msg(s->get(), m, &hd, sizeof hd, nullptr, 0)) return -1;
    auto r = mrc::svc::recv_msg(s->get());
    return r ? int(r->hdr.status) : -1;
  };
  auto hello = [&](const std::vector<std::string>& ifs) {
    mrc::svc::HelloReq rq{};
    rq.api_version = mrc::kApiVersion;
    rq.udp_port = MRC_UDP_PORT_DEFAULT;
    rq.nifs = uint8_t(ifs.size());
    for (size_t i = 0; i < ifs.size(); i++)
      std::strncpy(rq.ifnames[i], ifs[i].c_str(), mrc::svc::kIfName - 1);
    mrc::svc::MsgHdr m{mrc::svc::kMagic,
                       mrc::svc::kVersion,
                       uint16_t(mrc::svc::Op::kHello),
                       ++seq,
                       sizeof rq,
                       0,
                       0};
    if (!mrc::svc::send_msg(s->get(), m, &rq, sizeof rq, nullptr, 0)) return -1;
    auto r = mrc::svc::recv_msg(s->get());
    return r ? int(r->hdr.status) : -1;
  };
  // OBSERVE pages past the end (and a huge first): an empty page, the
  // right total, no error; the first page lists A and B.
  auto observe = [&](uint32_t first, mrc::svc::ObserveRep& rep) {
    mrc::svc::ObserveReq rq{first, 0};
    mrc::svc::MsgHdr m{mrc::svc::kMagic,
                       mrc::svc::kVersion,
                       uint16_t(mrc::svc::Op::kObserve),
                       ++seq,
                       sizeof rq,
                       0,
                       0};
    if (!mrc::svc::send_msg(s->get(), m, &rq, sizeof rq, nullptr, 0)) return -1;
    auto r = mrc::svc::recv_msg(s->get());
    if (!r) return -1;
    if (r->hdr.status) return int(r->hdr.status);
    if (r->payload.size() != sizeof rep) return -2;
    std::memcpy(&rep, r->payload.data(), sizeof rep);
    return 0;
  };
  auto rep = std::make_unique<mrc::svc::ObserveRep>();
  const int o0 = observe(0, *rep);
  const uint32_t total = rep->total;
  bool a_seen = false, b_seen = false;
  for (uint32_t i = 0; o0 == 0 && i < rep->count && i < mrc::svc::kObservePage; i++) {
    a_seen |= rep->c[i].pid == int32_t(a.at(0));
    b_seen |= rep->c[i].pid == getpid();
  }
  const bool both = a_seen && b_seen;
  check(o0 == 0 && total >= 2 && rep->count == total && both,
        "B: OBSERVE from 0 lists " + std::to_string(total) + " clients, A and B among them");
  for (const uint32_t first : {total, total + 1, 4096u, 0x7fffffffu, 0xffffffffu}) {
    const int o = observe(first, *rep);
    check(o == 0 && rep->count == 0 && rep->total == total && rep->first == first,
          "B: OBSERVE from " + std::to_string(first) + " past the end: an empty page (status " +
              std::to_string(o) + ", count " + std::to_string(rep->count) + ", total " +
              std::to_string(rep->total) + ")");
  }
  check(hello(split(std::getenv("SVC_ISO_IFS"))) == 0, "B: a second connection says HELLO");
  const uint32_t qpn = uint32_t(a.at(1)), pd = uint32_t(a.at(2)), cq = uint32_t(a.at(3)),
                 lkey = uint32_t(a.at(4));
  struct Try {
    const char* what;
    mrc::svc::Op op;
    uint32_t h;
  };
  const Try tries[] = {
      {"queries A's QP handle 0", mrc::svc::Op::kQueryQp, 0},
      {"reads the stats of A's QP handle 0", mrc::svc::Op::kQpStats, 0},
      {"queries A's QPN as a handle", mrc::svc::Op::kQueryQp, qpn},
      {"reads the stats of A's QPN", mrc::svc::Op::kQpStats, qpn},
      {"destroys A's QPN as a handle", mrc::svc::Op::kDestroyQp, qpn},
      {"destroys A's QP handle 0", mrc::svc::Op::kDestroyQp, 0},
      {"destroys A's CQ handle", mrc::svc::Op::kDestroyCq, cq},
      {"deallocates A's PD handle", mrc::svc::Op::kDeallocPd, pd},
      {"deregisters A's lkey", mrc::svc::Op::kDeregMr, lkey},
  };
  for (const Try& t : tries) {
    const int got = call(t.op, t.h);
    check(got == EINVAL, std::string("B ") + t.what + ": " +
                             (got < 0 ? "no reply"
                              : got   ? std::strerror(got)
                                      : "ok") +
                             " (want EINVAL)");
  }
}

int intruder(const std::string& ifs, const std::string& peers) {
  Node n = node(ifs, peers);
  std::vector<uint8_t> buf(64 << 10, 0);
  const mrc::MemoryRegion mr =
      must(n.d.ctx->reg_mr(n.pd, buf.data(), buf.size(),
                           mrc::kAccessLocalWrite | mrc::kAccessRemoteWrite),
           "reg_mr");
  auto qp = make_qp(n);
  put("intruder", {uint64_t(getpid()), qp->qpn(), mr.rkey, uint64_t(uintptr_t(buf.data()))});
  const auto a = get("owner");
  const auto p = get("peer");
  connect(n.d, *qp, uint32_t(p.at(1)));
  setenv("SVC_ISO_IFS", ifs.c_str(), 1);
  name_foreign(a);
  // Through the public API too: dereg_mr of a region naming A's lkey.
  mrc::MemoryRegion fake{reinterpret_cast<void*>(uintptr_t(a.at(6))), 4096, uint32_t(a.at(4)),
                         uint32_t(a.at(5))};
  auto dr = n.d.ctx->dereg_mr(fake);
  check(!dr && dr.error().code == EINVAL, "B: dereg_mr of A's lkey through libmrc: EINVAL");
  // A WRITE whose SGE names A's lkey and address, to the peer's sink.
  mrc::MemoryRegion theirs{reinterpret_cast<void*>(uintptr_t(a.at(6))), 4096, uint32_t(a.at(4)), 0};
  must(write(*qp, 5, theirs, 0, 4096, p.at(3), uint32_t(p.at(2)), false), "post_send");
  const mrc::Wc wc = one_wc(*n.cq);
  check(wc.wr_id == 5 && wc.status != mrc::kWcSuccess && wc.status != mrc::WcStatus(0xff),
        "B: a WRITE from A's lkey completes with an error (status " + status_name(wc.status) + ")");
  check(must(qp->query(), "query_qp").qp_state == mrc::QpState::kRts, "B: its QP is still RTS");
  put("intruder.ready", {1});
  (void)get("end");
  bool got = true;
  for (size_t i = 0; i < 4096; i++) got &= buf[i] == peer_byte(i);
  check(got, "B: the peer's write with B's own rkey arrived (the path works)");
  auto st = must(qp->stats(), "qp stats");
  check(st.rem_access_errors >= 1, "B: its QP counts the forged write in rem_access_errors (" +
                                       std::to_string(st.rem_access_errors) + ")");
  must(n.d.ctx->destroy_qp(std::move(qp)), "destroy_qp");
  must(n.d.ctx->dereg_mr(mr), "dereg_mr");
  return failures ? 1 : 0;
}

int peer(const std::string& ifs, const std::string& peers) {
  Node n = node(ifs, peers);
  std::vector<uint8_t> src(kHalf), sink(64 << 10, 0);
  for (size_t i = 0; i < src.size(); i++) src[i] = peer_byte(i);
  const mrc::MemoryRegion smr =
      must(n.d.ctx->reg_mr(n.pd, src.data(), src.size(), mrc::kAccessLocalWrite), "reg_mr");
  const mrc::MemoryRegion kmr =
      must(n.d.ctx->reg_mr(n.pd, sink.data(), sink.size(),
                           mrc::kAccessLocalWrite | mrc::kAccessRemoteWrite),
           "reg_mr");
  auto legit = make_qp(n), forger = make_qp(n);
  put("peer", {legit->qpn(), forger->qpn(), kmr.rkey, uint64_t(uintptr_t(sink.data()))});
  const auto a = get("owner");
  const auto b = get("intruder");
  connect(n.d, *legit, uint32_t(a.at(1)));
  connect(n.d, *forger, uint32_t(b.at(1)));
  (void)get("owner.ready");
  (void)get("intruder.ready");
  // The forger QP ends in B's PD: B's own key works ...
  must(write(*forger, 1, smr, 0, 4096, b.at(3), uint32_t(b.at(2)), false), "post_send");
  mrc::Wc wc = one_wc(*n.cq);
  check(wc.wr_id == 1 && wc.status == mrc::kWcSuccess,
        "peer: a WRITE with B's rkey through B's QP succeeds (status " + status_name(wc.status) +
            ")");
  // ... A's key and address (the second half of A's region) do not.
  must(write(*forger, 2, smr, 0, 64 << 10, a.at(6) + kHalf, uint32_t(a.at(5)), false), "post_send");
  wc = one_wc(*n.cq);
  check(wc.wr_id == 2 && wc.status == mrc::kWcRemAccessErr,
        "peer: a WRITE with A's rkey through B's QP fails with a remote access error (status " +
            status_name(wc.status) + ", want " + std::to_string(int(mrc::kWcRemAccessErr)) + ")");
  // A's own QP with A's key: 1 MiB into A's first half, with an immediate.
  must(write(*legit, 3, smr, 0, kHalf, a.at(6), uint32_t(a.at(5)), true), "post_send");
  wc = one_wc(*n.cq);
  check(wc.wr_id == 3 && wc.status == mrc::kWcSuccess,
        "peer: 1 MiB WRITE-with-immediate with A's rkey through A's QP succeeds (status " +
            status_name(wc.status) + ")");
  bool clean = true;
  for (uint8_t x : sink) clean &= x == 0;
  check(clean, "peer: nothing arrived in the sink B aimed A's lkey at");
  put("peer.done", {uint64_t(failures)});
  (void)get("end");
  must(n.d.ctx->destroy_qp(std::move(legit)), "destroy_qp");
  must(n.d.ctx->destroy_qp(std::move(forger)), "destroy_qp");
  return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: svc_iso owner|intruder|peer DIR IFS PEER_ADDRS\n");
    return 2;
  }
  const std::string role = argv[1];
  dir = argv[2];
  if (role == "owner") return owner(argv[3], argv[4]);
  if (role == "intruder") return intruder(argv[3], argv[4]);
  if (role == "peer") return peer(argv[3], argv[4]);
  std::fprintf(stderr, "svc_iso: unknown role %s\n", role.c_str());
  return 2;
}
