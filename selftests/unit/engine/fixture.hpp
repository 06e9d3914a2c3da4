// A connected pair of engines over the harness's simulated planes with a
// source and a destination buffer: the fixture of the conformance and
// security tests.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "codec/ev.hpp"
#include "engine/harness.hpp"

namespace mrc::testing {

using namespace core;

// A connected pair with a source and destination buffer of n bytes.
struct Fixture {
  Pair p;
  uint32_t q0 = 0, q1 = 0;
  std::unique_ptr<Buffer> src, dst;
  std::vector<Wc> swc, rwc;
  explicit Fixture(size_t n, PairOptions o = PairOptions(), uint32_t psn = 0) : p(o) {
    std::tie(q0, q1) = p.connect(psn, psn);
    src = std::make_unique<Buffer>(p.e(0), p.h(0).pd, n, 1, kAccessLocalWrite);
    dst = std::make_unique<Buffer>(p.e(1), p.h(1).pd, n, 2, kAccessLocalWrite | kAccessRemoteWrite);
  }
  Status write(uint64_t id, size_t off, size_t len, bool imm = false, uint32_t immv = 0,
               uint32_t rkey = 0, uint64_t raddr = 0) {
    Sge sg{src->addr(off), uint32_t(len), src->mr.lkey};
    SendWr wr;
    wr.wr_id = id;
    wr.opcode = imm ? WrOpcode::kRdmaWriteWithImm : WrOpcode::kRdmaWrite;
    wr.sg_list = &sg;
    wr.num_sge = 1;
    wr.remote_addr = raddr ? raddr : dst->addr(off);
    wr.rkey = rkey ? rkey : dst->mr.rkey;
    wr.imm_data = immv;
    return p.e(0).post_send(q0, wr);
  }
  void recv(uint64_t id) {
    RecvWr r;
    r.wr_id = id;
    ASSERT_TRUE(p.e(1).post_recv(q1, r).ok());
  }
  bool wait_sends(size_t n, Time limit = 5'000'000'000) {
    return p.run(
        [&] {
          p.poll(0, p.h(0).scq, swc);
          return swc.size() >= n;
        },
        limit);
  }
  bool wait_recvs(size_t n, Time limit = 5'000'000'000) {
    return p.run(
        [&] {
          p.poll(1, p.h(1).rcq, rwc);
          return rwc.size() >= n;
        },
        limit);
  }
  bool same(size_t off, size_t len) {
    return !std::memcmp(src->bytes.data() + off, dst->bytes.data() + off, len);
  }
  std::vector<PathSet::Ev> evs(int host = 0) { return *p.e(host).qp_evs(host ? q1 : q0); }
};

inline uint32_t wire_ev(const codec::Packet& k) {
  return codec::ev_from_wire(k.ip, k.udp, codec::EvFmtMode::kStev);
}

}  // namespace mrc::testing
