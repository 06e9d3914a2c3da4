// SPDX-License-Identifier: (GPL-2.0 OR BSD-3-Clause)
//
// write_imm_client_cpp: write_imm_client.c written against the C++ API
// (<mrc/mrc.hpp>), talking to the same write_imm_server.
//
//   write_imm_client_cpp [-p PORT] [-n MESSAGES] [-s BYTES] SERVER_ADDR IF[,IF...]
//
// The data path is mrc::Context, Qp and Cq; the endpoint exchange uses the
// C API's helpers (mrc_exchange_*), which the C++ API shares. See
// examples/README.md.
#include <arpa/inet.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "mrc/mrc.h"
#include "mrc/mrc.hpp"

namespace {

constexpr uint16_t kMaxWimm = 64;  // WRITE_WITH_IMMs in flight
constexpr uint8_t kMpr = 8;        // send window, units of 128 packets

// A failed call ends the program through main(), unwinding: the device's
// destructor detaches its XDP program from the planes (std::exit would leave
// it attached, and the next program on these interfaces would find them busy).
struct Failure {
  std::string what;
};

[[noreturn]] void die(const std::string& what, const mrc::Error& e) {
  throw Failure{what + ": " + e.message()};
}

template <class T>
T must(mrc::Result<T> r, const char* what) {
  if (!r) die(what, r.error());
  return std::move(r).value();
}

void must(mrc::Status s, const char* what) {
  if (!s) die(what, s.error());
}

// The bytes of message i (the server checks them).
uint8_t pattern(uint32_t i, size_t j) { return uint8_t(i * 31u + j * 7u + 1u); }

// RoCEv2 GIDs carry IPv4 as ::ffff:a.b.c.d.
mrc_gid to_gid(const mrc::Gid& ip) {
  mrc_gid g{};
  if (ip.ver == mrc::IpVersion::kV6) {
    std::memcpy(g.raw, ip.b.data(), 16);
  } else {
    g.raw[10] = g.raw[11] = 0xff;
    std::memcpy(g.raw + 12, ip.b.data(), 4);
  }
  return g;
}

mrc::Gid from_gid(const mrc_gid& g) {
  static const uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  mrc::Gid ip;
  if (std::memcmp(g.raw, kMapped, 12) == 0) {
    std::memcpy(ip.b.data(), g.raw + 12, 4);
  } else {
    ip.ver = mrc::IpVersion::kV6;
    std::memcpy(ip.b.data(), g.raw, 16);
  }
  return ip;
}

}  // namespace

int run(int argc, char** argv) {
  uint16_t port = 18516;
  uint32_t count = 4, size = 65536;
  for (int opt; (opt = getopt(argc, argv, "p:n:s:")) != -1;) {
    if (opt == 'p')
      port = uint16_t(std::atoi(optarg));
    else if (opt == 'n')
      count = uint32_t(std::atoi(optarg));
    else if (opt == 's')
      size = uint32_t(std::atoi(optarg));
    else
      return 2;
  }
  if (optind + 2 != argc || count == 0 || count > kMaxWimm || size == 0) {
    std::fprintf(stderr,
                 "usage: write_imm_client_cpp [-p PORT] [-n 1..%u] [-s BYTES] SERVER_ADDR "
                 "IF[,IF...]\n",
                 unsigned(kMaxWimm));
    return 2;
  }
  const char* server = argv[optind];

  // 1. The device on the plane interfaces, a PD, the messages in one
  // registered buffer, a CQ and a QP.
  mrc::DeviceOptions opts;
  for (std::string list = argv[optind + 1], rest; !list.empty(); list = rest) {
    size_t comma = list.find(',');
    rest = comma == std::string::npos ? "" : list.substr(comma + 1);
    opts.interfaces.push_back(list.substr(0, comma));
  }
  auto ctx = must(mrc::Context::open(opts), "opening the device");
  uint32_t pd = must(ctx->alloc_pd(), "alloc_pd");
  size_t len = size_t(count) * size;
  std::vector<uint8_t> buf(len);
  for (uint32_t i = 0; i < count; i++)
    for (size_t j = 0; j < size; j++) buf[size_t(i) * size + j] = pattern(i, j);
  mrc::MemoryRegion mr = must(ctx->reg_mr(pd, buf.data(), len, mrc::kAccessLocalWrite), "reg_mr");
  auto cq = must(ctx->create_cq(kMaxWimm), "create_cq");
  mrc::QpInitAttr init;
  init.pd = pd;
  init.cap.max_send_wr = kMaxWimm;
  init.cap.max_recv_wr = 0;
  init.cap.max_send_sge = 1;
  auto qp = must(ctx->create_qp(init, *cq, *cq), "create_qp");

  // 2. RESET -> INIT.
  mrc::QpAttr a;
  a.qp_state = mrc::QpState::kInit;
  a.qp_access_flags = mrc::kAccessLocalWrite;
  must(qp->modify(a, mrc::kQpState | mrc::kQpPkeyIndex | mrc::kQpAccessFlags,
                  mrc::kMrcHint | mrc::kMrcEvProfileId | mrc::kMrcCcProfileId),
       "modify to INIT");

  // 3. Swap endpoints: ours has no buffer to offer, the server's does. The
  // path MTU: the largest every plane carries (the device computes it).
  mrc_endpoint me{};
  me.qpn = qp->qpn();
  me.psn = mrc::random_psn();
  me.max_wimm_dest = kMaxWimm;
  me.mpr_dest = kMpr;
  me.mtu = must(ctx->path_mtu_limit(mrc::IpVersion::kV4), "path MTU");
  std::vector<mrc::PortInfo> ports = ctx->ports();
  me.num_gids = uint32_t(ports.size());
  for (const mrc::PortInfo& p : ports)
    me.gid[p.port - 1] = to_gid(must(ctx->gid(p.port, mrc::IpVersion::kV4), "GID"));
  int fd = mrc_exchange_connect(server, port, 30000);
  mrc_endpoint peer{};
  if (fd < 0 || mrc_exchange_endpoints(fd, &me, 1, &peer, 1, 10000) != 1) {
    std::fprintf(stderr, "write_imm_client_cpp: endpoint exchange: %s\n", mrc_last_error());
    return 1;
  }
  if (peer.len < len) {
    std::fprintf(stderr, "client: the server's buffer holds %llu bytes, %zu needed\n",
                 static_cast<unsigned long long>(peer.len), len);
    return 1;
  }

  // 4. INIT -> RTR (the server's GID on every plane, its MAC resolved) -> RTS.
  a = mrc::QpAttr{};
  a.qp_state = mrc::QpState::kRtr;
  a.path_mtu = peer.mtu && peer.mtu < me.mtu ? peer.mtu : me.mtu;
  a.dest_qp_num = peer.qpn;
  a.rq_psn = peer.psn;
  for (const mrc::PortInfo& p : ports)
    a.av[p.port] =
        must(ctx->resolve(p.port, from_gid(peer.gid[p.port - 1])), "resolving the server");
  a.peer_max_wimm_dest = peer.max_wimm_dest;
  a.max_wimm_dest = kMaxWimm;
  a.mpr_dest = kMpr;
  must(qp->modify(a, mrc::kQpState | mrc::kQpAv | mrc::kQpPathMtu | mrc::kQpDestQpn | mrc::kQpRqPsn,
                  mrc::kMrcMaxWimmDest | mrc::kMrcMprDest),
       "modify to RTR");
  a = mrc::QpAttr{};
  a.qp_state = mrc::QpState::kRts;
  a.sq_psn = me.psn;
  a.max_wimm = kMaxWimm;
  a.mpr = peer.mpr_dest < kMpr ? peer.mpr_dest : kMpr;
  a.timeout = 14;  // ACK timeout 1.024 us x 2^14 = 16.8 ms
  a.retry_linear = 7;
  a.retry_exp = 7;
  must(qp->modify(a, mrc::kQpState | mrc::kQpSqPsn,
                  mrc::kMrcMaxWimm | mrc::kMrcMpr | mrc::kMrcTimeout | mrc::kMrcRetryCnt),
       "modify to RTS");

  // 5. Every message as an RDMA WRITE with immediate, each signaled.
  for (uint32_t i = 0; i < count; i++) {
    mrc::Sge sge{.addr = uintptr_t(buf.data() + size_t(i) * size), .length = size, .lkey = mr.lkey};
    mrc::SendWr wr;
    wr.wr_id = i;
    wr.opcode = mrc::WrOpcode::kRdmaWriteWithImm;
    wr.send_flags = mrc::kSendSignaled;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.remote_addr = peer.addr + uint64_t(i) * size;
    wr.rkey = peer.rkey;
    wr.imm_data = 0x1000 + i;  // host order in the C++ API
    must(qp->post_send(wr), "post_send");
  }

  // 6. A completion means the server acknowledged every byte of the message.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (uint32_t done = 0; done < count;) {
    mrc::Wc wc[8];
    size_t n = must(cq->poll(wc), "poll");
    if (n == 0 && std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "client: %u of %u completions after 60 s\n", done, count);
      return 1;
    }
    for (size_t k = 0; k < n; k++, done++) {
      if (wc[k].status != mrc::kWcSuccess) {
        std::fprintf(stderr, "client: message %llu failed: %s\n",
                     static_cast<unsigned long long>(wc[k].wr_id), mrc::to_string(wc[k].status));
        return 1;
      }
    }
  }
  std::printf("client: wrote %u messages of %u bytes with immediates 0x%08x..0x%08x\n", count, size,
              0x1000u, 0x1000u + count - 1);

  // 7. Tell the server we are done and print its verdict.
  char line[64];
  if (mrc_exchange_send_line(fd, "done") ||
      mrc_exchange_recv_line(fd, line, sizeof line, 30000) < 0) {
    std::fprintf(stderr, "write_imm_client_cpp: talking to the server: %s\n", mrc_last_error());
    return 1;
  }
  std::printf("client: server says: %s\n", line);
  close(fd);
  must(ctx->destroy_qp(std::move(qp)), "destroy_qp");
  must(ctx->destroy_cq(std::move(cq)), "destroy_cq");
  must(ctx->dereg_mr(mr), "dereg_mr");
  must(ctx->dealloc_pd(pd), "dealloc_pd");
  char want[64];
  std::snprintf(want, sizeof want, "verified %u of %u", count, count);
  return std::strcmp(line, want) == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const Failure& f) {
    std::fprintf(stderr, "write_imm_client_cpp: %s\n", f.what.c_str());
    return 1;
  }
}
