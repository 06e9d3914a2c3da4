// Service death as one client sees it (Documentation/service.md section 5),
// driven by svc_death_test.sh: a QP in RTS towards host B's planes with a
// destination QP nobody has (its sends stay outstanding, retried), 48 sends
// (every other one signaled) and 32 receives posted. It prints "ready" and
// waits: a thread blocks in get_event on the receive CQ's channel, the main
// thread polls the send CQ. When the script kills the service, every work
// request must complete exactly once (WR_FLUSH_ERR written by libmrc after
// what the service retired), sends and receives each in posting order,
// get_event must return EIO, the async events must be QP_FATAL for the QP
// and DEVICE_FATAL, later posts must fail with EIO, and destroying every
// object must succeed. Bounded: 30 s after "ready" it gives up.
//
//   svc_death IFS B_ADDR,B_ADDR,...   (one IPv4 address per plane, in order)
#include <arpa/inet.h>
#include <poll.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "mrc/mrc.hpp"
#include "svc_tool.hpp"
#include "util/strings.hpp"

namespace {

using svc_tool::check;
using svc_tool::failures;
using svc_tool::must;
std::vector<std::string> split(const std::string& s) { return mrc::util::split(s, ','); }
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

constexpr uint32_t kSends = 48, kRecvs = 32;

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: svc_death IFS B_ADDRS\n");
    return 2;
  }
  mrc::DeviceOptions opts;
  opts.interfaces = split(argv[1]);
  const std::vector<std::string> peers = split(argv[2]);
  auto ctx = must(mrc::Context::open(opts), "open");
  const uint32_t pd = must(ctx->alloc_pd(), "alloc_pd");
  std::vector<uint8_t> buf(64 << 10, 0x5a);
  const mrc::MemoryRegion mr =
      must(ctx->reg_mr(pd, buf.data(), buf.size(), mrc::kAccessLocalWrite), "reg_mr");
  auto ch = must(ctx->create_comp_channel(), "create_comp_channel");
  auto scq = must(ctx->create_cq(128), "create_cq");
  auto rcq = must(ctx->create_cq(128, ch.get()), "create_cq");
  mrc::QpInitAttr init;
  init.pd = pd;
  init.cap.max_send_wr = 64;
  init.cap.max_recv_wr = 64;
  init.cap.max_send_sge = 1;
  auto qp = must(ctx->create_qp(init, *scq, *rcq), "create_qp");
  mrc::QpAttr a;
  a.qp_state = mrc::QpState::kInit;
  a.qp_access_flags = mrc::kAccessLocalWrite | mrc::kAccessRemoteWrite;
  must(qp->modify(a, mrc::kQpState | mrc::kQpPkeyIndex | mrc::kQpAccessFlags,
                  mrc::kMrcHint | mrc::kMrcEvProfileId | mrc::kMrcCcProfileId),
       "modify to INIT");
  a = mrc::QpAttr{};
  a.qp_state = mrc::QpState::kRtr;
  a.path_mtu = must(ctx->path_mtu_limit(mrc::IpVersion::kV4), "path MTU");
  a.dest_qp_num = 0xabcde;  // nobody's
  a.rq_psn = 1;
  const auto ports = ctx->ports();
  for (size_t i = 0; i < ports.size() && i < peers.size(); i++) {
    mrc::Gid g;
    if (inet_pton(AF_INET, peers[i].c_str(), g.b.data()) != 1) {
      std::fprintf(stderr, "svc_death: bad address %s\n", peers[i].c_str());
      return 2;
    }
    a.av[ports[i].port] = must(ctx->resolve(ports[i].port, g), "resolve");
  }
  a.peer_max_wimm_dest = 64;
  a.max_wimm_dest = 64;
  a.mpr_dest = 4;
  must(qp->modify(a, mrc::kQpState | mrc::kQpAv | mrc::kQpPathMtu | mrc::kQpDestQpn | mrc::kQpRqPsn,
                  mrc::kMrcMaxWimmDest | mrc::kMrcMprDest),
       "modify to RTR");
  a = mrc::QpAttr{};
  a.qp_state = mrc::QpState::kRts;
  a.sq_psn = 1;
  a.max_wimm = 64;
  a.mpr = 4;
  a.timeout = 20;  // 1.07 s per try: no retry exhaustion while the test runs
  a.retry_linear = 7;
  a.retry_exp = 7;
  must(qp->modify(a, mrc::kQpState | mrc::kQpSqPsn,
                  mrc::kMrcMaxWimm | mrc::kMrcMpr | mrc::kMrcTimeout | mrc::kMrcRetryCnt),
       "modify to RTS");
  for (uint32_t i = 0; i < kRecvs; i++) {
    mrc::RecvWr w;
    w.wr_id = 1000 + i;
    must(qp->post_recv(w), "post_recv");
  }
  for (uint32_t i = 0; i < kSends; i++) {
    mrc::Sge sge{.addr = uintptr_t(buf.data() + i * 1024), .length = 1024, .lkey = mr.lkey};
    mrc::SendWr w;
    w.wr_id = i;
    w.opcode = mrc::WrOpcode::kRdmaWrite;
    w.send_flags = (i % 2) ? uint32_t(mrc::kSendSignaled) : 0u;
    w.sg_list = &sge;
    w.num_sge = 1;
    w.remote_addr = 0x10000 + i * 1024;
    w.rkey = 0x1234;
    must(qp->post_send(w), "post_send");
  }
  must(rcq->req_notify(), "req_notify");

  // The receive side: blocked in get_event until the service dies.
  std::atomic<bool> ev_done{false};
  int ev_code = 0;
  Clock::time_point ev_at{};
  std::thread waiter([&] {
    auto r = ch->get_event();
    ev_at = Clock::now();
    ev_code = r ? 0 : r.error().code;
    ev_done = true;
  });
  std::printf("ready qpn %u\n", qp->qpn());
  std::fflush(stdout);

  // The send side: poll until the CQ says EIO (the service is gone and every
  // flush was taken), bounded.
  const auto t0 = Clock::now();
  std::vector<mrc::Wc> sends, recvs;
  Clock::time_point eio_at{};
  int poll_code = 0;
  while (ms_since(t0) < 30000) {
    mrc::Wc wc[16];
    auto n = scq->poll(wc);
    if (!n) {
      poll_code = n.error().code;
      eio_at = Clock::now();
      break;
    }
    sends.insert(sends.end(), wc, wc + *n);
    if (!*n) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  check(poll_code == EIO, "send CQ poll ends with EIO (got " + std::to_string(poll_code) + ")");
  for (int k = 0; k < 3000 && !ev_done; k++)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  check(ev_done.load(), "the thread blocked in get_event returned");
  if (!ev_done) {
    std::printf("FAIL summary: get_event still blocked\n");
    std::fflush(stdout);
    std::_Exit(1);
  }
  waiter.join();
  check(ev_code == EIO, "get_event returned EIO (got " + std::to_string(ev_code) + ")");
  std::printf("figure ms_getevent_after_poll_eio %.1f\n",
              std::chrono::duration<double, std::milli>(ev_at - eio_at).count());
  for (int k = 0; k < 100; k++) {
    mrc::Wc wc[16];
    auto n = rcq->poll(wc);
    if (!n || !*n) break;
    recvs.insert(recvs.end(), wc, wc + *n);
  }

  // Every WR exactly once, in posting order; count libmrc's flushes.
  bool order = sends.size() == kSends;
  uint32_t flushed = 0;
  for (size_t i = 0; i < sends.size(); i++) {
    if (sends[i].wr_id != i || sends[i].status == mrc::kWcSuccess) order = false;
    if (sends[i].status == mrc::kWcWrFlushErr) flushed++;
  }
  check(order, "every send completed once, in order, with an error (" +
                   std::to_string(sends.size()) + " of " + std::to_string(kSends) + ")");
  bool rorder = recvs.size() == kRecvs;
  for (size_t i = 0; i < recvs.size(); i++)
    if (recvs[i].wr_id != 1000 + i || recvs[i].status != mrc::kWcWrFlushErr) rorder = false;
  check(rorder, "every receive flushed once, in order (" + std::to_string(recvs.size()) + " of " +
                    std::to_string(kRecvs) + ")");
  check(flushed > 0, "sends flushed: " + std::to_string(flushed));

  // Async events: QP_FATAL for the QP, PORT_ERR for each port, DEVICE_FATAL.
  bool qp_fatal = false, dev_fatal = false;
  std::set<uint8_t> port_err;
  for (int k = 0; k < 10 && !(qp_fatal && dev_fatal); k++) {
    pollfd p{ctx->async_fd(), POLLIN, 0};
    (void)::poll(&p, 1, 100);
    mrc::AsyncEvent ev{};
    while (ctx->get_async_event(ev)) {
      if (ev.type == mrc::AsyncEventType::kQpFatal && ev.qpn == qp->qpn()) qp_fatal = true;
      if (ev.type == mrc::AsyncEventType::kDeviceFatal) dev_fatal = true;
      if (ev.type == mrc::AsyncEventType::kPortError) port_err.insert(ev.port);
    }
  }
  check(qp_fatal, "async event QP_FATAL for the QP");
  bool every_port = !ctx->ports().empty();
  for (const auto& p : ctx->ports()) every_port &= port_err.count(p.port) == 1;
  check(every_port, "async event PORT_ERR for each of the " + std::to_string(ctx->ports().size()) +
                        " ports (" + std::to_string(port_err.size()) + ")");
  check(dev_fatal, "async event DEVICE_FATAL");

  mrc::RecvWr w;
  auto pr = qp->post_recv(w);
  check(!pr && pr.error().code == EIO, "a post after the death fails with EIO");
  auto pd2 = ctx->alloc_pd();
  check(!pd2 && pd2.error().code == EIO &&
            pd2.error().message().find("the mrc service (pid") != std::string::npos,
        "a control call after the death fails with EIO and names the service");
  check(bool(ctx->destroy_qp(std::move(qp))), "destroy_qp succeeds");
  check(bool(ctx->destroy_cq(std::move(scq))), "destroy_cq (send) succeeds");
  check(bool(ctx->destroy_cq(std::move(rcq))), "destroy_cq (receive) succeeds");
  check(bool(ctx->dereg_mr(mr)), "dereg_mr succeeds");
  check(bool(ctx->dealloc_pd(pd)), "dealloc_pd succeeds");
  ch.reset();
  ctx.reset();
  std::printf("%s summary: %zu sends (%u with WR_FLUSH_ERR), %zu receives\n",
              failures ? "FAIL" : "ok", sends.size(), flushed, recvs.size());
  return failures ? 1 : 0;
}
