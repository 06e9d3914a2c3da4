// Conformance behaviour 21: endpoint operations (EV probes) through the
// batcher with a scripted transport: req_id rules, arrival order, RTT in ns,
// ETIMEDOUT with partial results.
#include <gtest/gtest.h>

#include <deque>

#include "ctl/ep.hpp"

namespace mrc::testing {
namespace {

using namespace mrc::ctl;
// Names the ctl model shares with libmrc's vocabulary (mrc/types.hpp): here
// they mean the ctl model's.
using ctl::DeviceAttr, ctl::EvEvent, ctl::EvState, ctl::kEvGood, ctl::kEvAssumedBad, ctl::kEvDenied,
    ctl::kEvUnknown;

Gid gid4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  return gid_from_ip(codec::IpAddr::v4(a, b, c, d));
}

// Answers requests whose req_id is in `answer` after `delay[req_id]` ns,
// in the order of increasing delay; remembers what was sent.
class FakeTransport : public EpTransport {
 public:
  Status send(const EpWire& w) override {
    if (fail_id && w.req_id == fail_id) return Error(EIO, "link down");
    sent.push_back(w);
    if (answer.count(w.req_id)) {
      EpArrival a;
      a.req_id = w.req_id;
      a.port = w.port;
      a.rtt_ns = delay[w.req_id];
      a.adj_svc_time = true;
      a.from = responder.count(w.req_id) ? responder[w.req_id] : w.dst;
      pending.insert({now_ns() + delay[w.req_id], a});
    }
    return ok_status();
  }
  Status receive(Time wait_ns, std::vector<EpArrival>* out) override {
    Time until = now_ns() + wait_ns;
    while (now_ns() < until && (pending.empty() || pending.begin()->first > now_ns())) {
      struct timespec ts = {0, 100'000};
      nanosleep(&ts, nullptr);
    }
    while (!pending.empty() && pending.begin()->first <= now_ns()) {
      out->push_back(pending.begin()->second);
      pending.erase(pending.begin());
    }
    return ok_status();
  }
  void cancel(std::span<const uint16_t> ids) override {
    cancelled.insert(cancelled.end(), ids.begin(), ids.end());
  }
  static Time now_ns() { return mono_ns(); }

  std::vector<EpWire> sent;
  std::set<uint16_t> answer;
  std::map<uint16_t, uint32_t> delay;
  std::map<uint16_t, codec::IpAddr> responder;
  std::multimap<Time, EpArrival> pending;
  std::vector<uint16_t> cancelled;
  uint16_t fail_id = 0;
};

EpReq probe(uint16_t id, uint8_t port, uint32_t ev = 0x0001c123) {
  EpReq r;
  r.req_id = id;
  r.dgid = gid4(198, 18, port, 2);
  r.ev_fmt_mode = kFmtStev;
  r.req_ev.val = codec::ev_from_u32(ev, codec::EvFmtMode::kStev);
  r.req_ev.port = port;
  return r;
}

Status ports_1_to_4(uint8_t p) {
  if (p >= 1 && p <= 4) return ok_status();
  return Error(EINVAL, "port " + std::to_string(p) + " is not configured");
}

TEST(EpBatch, Conf21_ResponsesInArrivalOrderWithRtt) {
  FakeTransport t;
  EpBatcher b(t, {}, ports_1_to_4);
  std::vector<EpReq> req = {probe(1, 1), probe(2, 2), probe(3, 3)};
  t.answer = {1, 2, 3};
  t.delay = {{1, 3'000'000}, {2, 1'000'000}, {3, 2'000'000}};
  std::vector<EpRsp> rsp;
  Status s = b.send_wait(0, kEpOpEvProbe, req, 500'000'000, &rsp);
  ASSERT_TRUE(s) << s.error().message();
  ASSERT_EQ(rsp.size(), 3u);
  EXPECT_EQ(rsp[0].req_id, 2);
  EXPECT_EQ(rsp[1].req_id, 3);
  EXPECT_EQ(rsp[2].req_id, 1);
  EXPECT_EQ(rsp[0].rtt, 1'000'000u);
  EXPECT_EQ(rsp[0].port, 2);
  EXPECT_EQ(rsp[0].adj_svc_time, 1);
  ASSERT_EQ(t.sent.size(), 3u);
  EXPECT_EQ(t.sent[0].entropy, 0x0001c123u);
  EXPECT_EQ(t.sent[0].op, MRC_EP_OP_EV_PROBE);
  EXPECT_EQ(t.sent[1].dst, codec::IpAddr::v4(198, 18, 2, 2));
  EXPECT_EQ(b.outstanding(), 0u);
}

TEST(EpBatch, Conf21_MissingResponsesGiveEtimedoutWithPartialResults) {
  FakeTransport t;
  EpBatcher b(t, {}, ports_1_to_4);
  std::vector<EpReq> req = {probe(10, 1), probe(11, 2), probe(12, 3)};
  t.answer = {10, 12};
  t.delay = {{10, 1'000'000}, {12, 2'000'000}};
  std::vector<EpRsp> rsp;
  const Time t0 = mono_ns();
  Status s = b.send_wait(0, kEpOpEvProbe, req, 30'000'000, &rsp);
  const Time took = mono_ns() - t0;
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ETIMEDOUT);
  ASSERT_EQ(rsp.size(), 2u);
  EXPECT_EQ(rsp[0].req_id, 10);
  EXPECT_EQ(rsp[1].req_id, 12);
  EXPECT_GE(took, 30'000'000u);
  EXPECT_EQ(b.counters().timeouts, 1u);
  // The unanswered id stays reserved while it drains, then is free again.
  EXPECT_EQ(t.cancelled, std::vector<uint16_t>{11});
  std::vector<EpReq> again = {probe(11, 2)};
  auto r = b.start(0, kEpOpEvProbe, again, 1'000'000, mono_ns());
  EXPECT_EQ(r.error().code, EINVAL);
  EXPECT_NE(r.error().message().find("outstanding"), std::string::npos);
  auto later = b.start(0, kEpOpEvProbe, again, 1'000'000, mono_ns() + 2'000'000'000ull);
  EXPECT_TRUE(later) << later.error().message();
}

TEST(EpBatch, Conf21_DuplicateReqIdsAreRejected) {
  FakeTransport t;
  EpBatcher b(t, {}, ports_1_to_4);
  std::vector<EpReq> dup = {probe(5, 1), probe(6, 2), probe(5, 3)};
  auto r = b.start(0, kEpOpEvProbe, dup, 1'000'000, 0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, EINVAL);
  EXPECT_TRUE(t.sent.empty());  // nothing of a refused batch goes out
  // Outstanding in another batch.
  std::vector<EpReq> first = {probe(7, 1)};
  ASSERT_TRUE(b.start(0, kEpOpEvProbe, first, 1'000'000'000, 0));
  std::vector<EpReq> second = {probe(8, 1), probe(7, 2)};
  EXPECT_EQ(b.start(0, kEpOpEvProbe, second, 1'000'000, 0).error().code, EINVAL);
  EXPECT_EQ(t.sent.size(), 1u);
}

TEST(EpBatch, Conf21_ArgumentsAreChecked) {
  FakeTransport t;
  EpBatcher b(t, {}, ports_1_to_4);
  std::vector<EpReq> one = {probe(1, 1)};
  EXPECT_EQ(b.start(0, 7, one, 1000, 0).error().code, EINVAL);              // op type
  EXPECT_EQ(b.start(0, kEpOpEvProbe, {}, 1000, 0).error().code, EINVAL);    // num_req 0
  EXPECT_EQ(b.start(0, kEpOpEvProbe, one, 0, 0).error().code, EINVAL);      // timeout 0
  EXPECT_EQ(b.start(64, kEpOpEvProbe, one, 1000, 0).error().code, EINVAL);  // not a DSCP
  std::vector<EpReq> bad = {probe(1, 9)};
  EXPECT_EQ(b.start(0, kEpOpEvProbe, bad, 1000, 0).error().code, EINVAL);  // port
  bad = {probe(1, 1)};
  bad[0].ev_fmt_mode = kFmtSrv6;
  EXPECT_EQ(b.start(0, kEpOpEvProbe, bad, 1000, 0).error().code, ENOTSUP);
  bad = {probe(1, 1)};
  bad[0].dgid = {};
  EXPECT_EQ(b.start(0, kEpOpEvProbe, bad, 1000, 0).error().code, EINVAL);
  bad = {probe(1, 1)};
  bad[0].ev_fmt_mode = kFmtUdp;  // 0x0001c123 does not fit 16 bits
  EXPECT_EQ(b.start(0, kEpOpEvProbe, bad, 1000, 0).error().code, EINVAL);
  std::vector<EpReq> many;
  for (uint16_t i = 0; i < 257; i++) many.push_back(probe(i, 1));
  EXPECT_EQ(b.start(0, kEpOpEvProbe, many, 1000, 0).error().code, EINVAL);
  EXPECT_TRUE(t.sent.empty());
  // PORT_STATUS_UPDATE goes out as the other wire op with its mask.
  std::vector<EpReq> ps = {probe(2, 1)};
  ps[0].port_status = 0x5;
  ASSERT_TRUE(b.start(0, kEpOpPortStatusUpdate, ps, 1000, 0));
  EXPECT_EQ(t.sent[0].op, MRC_EP_OP_PORT_STATUS_UPDATE);
  EXPECT_EQ(t.sent[0].port_status, 0x5u);
}

TEST(EpBatch, Conf21_ResponsesFromElsewhereDoNotComplete) {
  FakeTransport t;
  EpBatcher b(t, {}, ports_1_to_4);
  std::vector<EpReq> one = {probe(3, 1)};
  auto id = b.start(0, kEpOpEvProbe, one, 10'000'000, 100);
  ASSERT_TRUE(id);
  EpArrival stray;
  stray.req_id = 3;
  stray.from = codec::IpAddr::v4(198, 18, 9, 9);
  b.on_response(stray, 200);
  EpArrival other;
  other.req_id = 4;
  other.from = codec::IpAddr::v4(198, 18, 1, 2);
  b.on_response(other, 200);
  EXPECT_EQ(b.counters().unmatched, 2u);
  EXPECT_TRUE(b.poll(300).empty());
  EpArrival good;
  good.req_id = 3;
  good.from = codec::IpAddr::v4(198, 18, 1, 2);
  good.rtt_ns = 777;
  b.on_response(good, 400);
  auto done = b.poll(500);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].err, 0);
  ASSERT_EQ(done[0].rsps.size(), 1u);
  EXPECT_EQ(done[0].rsps[0].rtt, 777u);
  // A duplicate response after completion is not matched again.
  b.on_response(good, 600);
  EXPECT_EQ(b.counters().unmatched, 3u);
}

TEST(EpBatch, Conf21_SendFailureKeepsSentIdsReserved) {
  FakeTransport t;
  t.fail_id = 2;
  EpBatcher b(t, {}, ports_1_to_4);
  std::vector<EpReq> req = {probe(1, 1), probe(2, 2)};
  auto r = b.start(0, kEpOpEvProbe, req, 1'000'000, 0);
  EXPECT_EQ(r.error().code, EIO);
  std::vector<EpReq> again = {probe(1, 1)};
  EXPECT_EQ(b.start(0, kEpOpEvProbe, again, 1'000'000, 0).error().code, EINVAL);
}

}  // namespace
}  // namespace mrc::testing
