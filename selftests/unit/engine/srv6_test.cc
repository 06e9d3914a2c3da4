// SRv6 uSID EVs in the engine over the two-host harness: every data packet
// and probe leaves with its EV's uSID container as the IPv6 destination and
// the container's entropy in the UDP source port and flow label; the wire
// hook plays the fabric (each hop shifts its uSID out, Documentation/
// fabric.md) so the receiver sees its own address; SACKs come back to the
// requester's plain address. Containers come from the SRv6 EV format and a
// generated EV profile through the codec's expansion (ev_test.cc vectors).
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <set>

#include "codec/ev.hpp"
#include "codec/srv6.hpp"
#include "engine/harness.hpp"

namespace mrc::testing {
namespace {

using namespace core;
using codec::Srv6Sid;

// Host h's address on plane p in a uSID fabric: block fd00:<p>::/32, host
// uSID 0x0400 | (h + 1): fd00:p:401:: and fd00:p:402::.
codec::IpAddr usid_ip(int h, int p, codec::IpVersion) {
  codec::IpAddr a;
  a.ver = codec::IpVersion::kV6;
  a.b[0] = 0xfd, a.b[3] = uint8_t(p), a.b[4] = 0x04, a.b[5] = uint8_t(h + 1);
  return a;
}

constexpr uint32_t kSpines = 4;

// The SRv6 format of the vectors (32,16,16,16,16) and a generated profile:
// block, source leaf, spine 1..kSpines (generated), destination leaf, host.
std::vector<EvEntry> srv6_evs(int from, int planes) {
  const std::vector<codec::EvFmtField> fmt = {{32}, {16}, {16}, {16}, {16}};
  std::vector<EvEntry> out;
  for (int p = 1; p <= planes; p++) {
    const int to = 1 - from;
    const std::vector<codec::EvField> f = {
        {32, 0xfd000000u | uint32_t(p), 0, 0, 0},  {16, 0x0100u | uint32_t(from + 1), 0, 0, 0},
        {16, 0x0200u, 1, kSpines, 0x000f},         {16, 0x0300u | uint32_t(to + 1), 0, 0, 0},
        {16, 0x0400u | uint32_t(to + 1), 0, 0, 0},
    };
    std::string why;
    EXPECT_EQ(codec::ev_validate(fmt, f, 128, &why), 0) << why;
    for (uint64_t i = 0; i < codec::ev_generate_space(f); i++) {
      codec::EvValue v{};
      EXPECT_TRUE(codec::ev_expand(fmt, f, codec::ev_generate_compact(f, i), v));
      EvEntry e;
      EXPECT_TRUE(codec::srv6_sid_from_value(v, e.sid));
      e.ev = codec::srv6_entropy(e.sid);
      e.port = uint8_t(p);
      out.push_back(e);
    }
  }
  return out;
}

EvProfile srv6_profile(int from, int planes) {
  EvProfile prof;
  prof.mode = EvMode::kGenerated;
  prof.fmt = codec::EvFmtMode::kSrv6;
  prof.evs = srv6_evs(from, planes);
  prof.active_per_plane = kSpines;
  return prof;
}

Srv6Sid dst_of(const std::vector<uint8_t>& f) {
  Srv6Sid s;
  std::memcpy(s.data(), f.data() + 38, 16);
  return s;
}
uint32_t entropy_of(const std::vector<uint8_t>& f) {
  return uint32_t(f[54] << 8 | f[55]) | uint32_t((f[16] & 0xff) << 8 | f[17]) << 16;
}

struct Fabric {
  // Data packets per container seen on the wire, and what crossed which spine.
  std::map<Srv6Sid, uint64_t> data_by_sid;
  std::map<std::pair<int, int>, uint64_t> spine_pkts;  // (plane, spine uSID) -> data packets
  uint64_t bad_entropy = 0, ctrl_to_plain = 0, ctrl_other = 0;
  std::set<std::pair<int, uint32_t>> dead;  // (plane, spine uSID) that drop everything

  // The uSID fabric: a container must start with the plane's block and the
  // sender's leaf; the packet crosses the spine its second uSID names; the
  // leaves and the spine shift, so the receiver sees the final address.
  Hook on_frame(int from, uint8_t port, std::vector<uint8_t>& f, const Pair::Options& o) {
    Hook h;
    const Srv6Sid d = dst_of(f);
    const auto hops = codec::srv6_hops(d);
    const bool container = hops.size() == 4;
    codec::Packet pk = parse_or_die_shifted(f, container);
    const bool data =
        pk.bth.opcode != MRC_OP_SACK && pk.bth.opcode != MRC_OP_NACK && pk.bth.opcode != MRC_OP_ACK;
    if (container) {
      if (entropy_of(f) != codec::srv6_entropy(d)) bad_entropy++;
      EXPECT_EQ(d[3], port) << "container of another plane's block: " << codec::srv6_to_string(d);
      EXPECT_EQ(hops[0], 0x0100 | (from + 1));
      if (dead.count({port, hops[1]})) {
        h.drop = true;
        return h;
      }
      if (data && pk.bth.opcode != MRC_OP_PROBE) {
        data_by_sid[d]++;
        spine_pkts[{port, hops[1]}]++;
      }
      const Srv6Sid fin = codec::srv6_final(d);
      std::memcpy(f.data() + 38, fin.data(), 16);  // what the three shifts leave
    } else {
      if (d == usid_ip(1 - from, port, o.ver).b)
        ctrl_to_plain++;
      else
        ctrl_other++;
    }
    return h;
  }
  static codec::Packet parse_or_die_shifted(const std::vector<uint8_t>& f, bool container) {
    // Parse what the receiver will see (the ICRC covers the final address).
    std::vector<uint8_t> g = f;
    if (container) {
      const Srv6Sid fin = codec::srv6_final(dst_of(f));
      std::memcpy(g.data() + 38, fin.data(), 16);
    }
    return parse_or_die(g);
  }
};

Pair::Options srv6_options() {
  Pair::Options o;
  o.ver = codec::IpVersion::kV6;
  o.addr = usid_ip;
  o.ev_profile = 5;
  return o;
}

void install(Pair& pr, int planes) {
  for (int h = 0; h < 2; h++)
    ASSERT_TRUE(pr.e(h).install_ev_profile(5, srv6_profile(h, planes)).ok());
}

TEST(Srv6, EveryEvLeavesWithItsContainerAndDataArrivesIntact) {
  auto o = srv6_options();
  Pair pr(o);
  install(pr, o.planes);
  Fabric fab;
  pr.hook = [&](int from, uint8_t port, std::vector<uint8_t>& f, Time) {
    return fab.on_frame(from, port, f, o);
  };
  auto [q0, q1] = pr.connect();
  const size_t n = 4 << 20;
  Buffer src(pr.e(0), pr.h(0).pd, n, 1, kAccessLocalWrite);
  Buffer dst(pr.e(1), pr.h(1).pd, n, 2, kAccessLocalWrite | kAccessRemoteWrite);
  ASSERT_TRUE(post_write(pr.e(0), q0, src, dst, 0, n, 1).ok());
  std::vector<Wc> wcs;
  ASSERT_TRUE(pr.run([&] { return pr.poll(0, pr.h(0).scq, wcs), !wcs.empty(); }, 5'000'000'000));
  ASSERT_EQ(wcs[0].status, kWcSuccess) << to_string(wcs[0].status);
  EXPECT_EQ(0, std::memcmp(src.bytes.data(), dst.bytes.data(), n));
  EXPECT_EQ(fab.bad_entropy, 0u);
  EXPECT_GT(fab.ctrl_to_plain, 0u);  // SACKs return to the requester's own address
  EXPECT_EQ(fab.ctrl_other, 0u);     // and nothing else leaves without a container
  // EV -> destination: the engine's per-EV counts are exactly the packets
  // seen with that EV's container; every spine of every plane carried data.
  auto evs = pr.e(0).qp_evs(q0);
  ASSERT_TRUE(evs.ok());
  ASSERT_EQ(evs->size(), size_t(o.planes) * kSpines);
  const auto want = srv6_evs(0, o.planes);
  uint64_t total = 0;
  for (size_t i = 0; i < evs->size(); i++) {
    const auto& e = (*evs)[i];
    const EvEntry* w = nullptr;
    for (const EvEntry& x : want)
      if (x.ev == e.ev && x.port == e.port) w = &x;
    ASSERT_NE(w, nullptr);
    EXPECT_GT(e.stats.tx_pkts, 0u) << codec::srv6_to_string(w->sid);
    EXPECT_EQ(fab.data_by_sid[w->sid], e.stats.tx_pkts) << codec::srv6_to_string(w->sid);
    total += e.stats.tx_pkts;
  }
  for (int p = 1; p <= o.planes; p++)
    for (uint32_t s = 1; s <= kSpines; s++) EXPECT_GT((fab.spine_pkts[{p, int(0x0200 | s)}]), 0u);
  EXPECT_EQ(total, pr.e(0).qp_stats(q0)->tx_data_pkts);
  (void)q1;
}

TEST(Srv6, ASpineThatDropsEverythingRetiresExactlyItsEvs) {
  auto o = srv6_options();
  Pair pr(o);
  install(pr, o.planes);
  Fabric fab;
  fab.dead.insert({2, 0x0203});  // plane 2, spine 3
  pr.hook = [&](int from, uint8_t port, std::vector<uint8_t>& f, Time) {
    return fab.on_frame(from, port, f, o);
  };
  auto [q0, q1] = pr.connect();
  const size_t n = 4 << 20;
  Buffer src(pr.e(0), pr.h(0).pd, n, 1, kAccessLocalWrite);
  Buffer dst(pr.e(1), pr.h(1).pd, n, 2, kAccessLocalWrite | kAccessRemoteWrite);
  ASSERT_TRUE(post_write(pr.e(0), q0, src, dst, 0, n, 1).ok());
  std::vector<Wc> wcs;
  ASSERT_TRUE(pr.run([&] { return pr.poll(0, pr.h(0).scq, wcs), !wcs.empty(); }, 5'000'000'000));
  ASSERT_EQ(wcs[0].status, kWcSuccess);
  EXPECT_EQ(0, std::memcmp(src.bytes.data(), dst.bytes.data(), n));
  auto evs = pr.e(0).qp_evs(q0);
  ASSERT_TRUE(evs.ok());
  for (const auto& e : *evs) {
    Srv6Sid sid{};
    for (const EvEntry& x : srv6_evs(0, o.planes))
      if (x.ev == e.ev) sid = x.sid;
    const bool crosses = e.port == 2 && codec::srv6_hops(sid)[1] == 0x0203;
    if (crosses)
      EXPECT_EQ(e.state, EvState::kAssumedBad) << codec::srv6_to_string(sid);
    else
      EXPECT_EQ(e.state, EvState::kGood) << codec::srv6_to_string(sid);
  }
  (void)q1;
}

TEST(Srv6, WithoutTheShiftsTheReceiverDropsIt) {
  // The ICRC covers the destination the receiver sees (its own address):
  // a container that was not shifted is not accepted.
  auto o = srv6_options();
  Pair pr(o);
  install(pr, 1);
  auto [q0, q1] = pr.connect();
  Buffer src(pr.e(0), pr.h(0).pd, 4096, 1, kAccessLocalWrite);
  Buffer dst(pr.e(1), pr.h(1).pd, 4096, 2, kAccessLocalWrite | kAccessRemoteWrite);
  ASSERT_TRUE(post_write(pr.e(0), q0, src, dst, 0, 4096, 1).ok());
  std::vector<Wc> wcs;
  pr.run([&] { return pr.poll(0, pr.h(0).scq, wcs), !wcs.empty(); }, 2'000'000);
  EXPECT_TRUE(wcs.empty());
  EXPECT_GT(pr.e(1).stats().rx_parse_errors[size_t(codec::ParseError::kBadIcrc)], 0u);
  EXPECT_NE(0, std::memcmp(src.bytes.data(), dst.bytes.data(), 4096));
  (void)q1;
}

TEST(Srv6, ProfilesAndQpsThatCannotWorkAreRefused) {
  auto o = srv6_options();
  Pair pr(o);
  // AUTO has no containers.
  EvProfile autop;
  autop.fmt = codec::EvFmtMode::kSrv6;
  EXPECT_EQ(pr.e(0).install_ev_profile(6, autop).error().code, EINVAL);
  // An entropy that is not the container's.
  EvProfile bad = srv6_profile(0, 1);
  bad.evs[0].ev ^= 1;
  EXPECT_EQ(pr.e(0).install_ev_profile(6, bad).error().code, EINVAL);
  // Containers that end at another host: the QP cannot reach its peer.
  ASSERT_TRUE(pr.e(0).install_ev_profile(5, srv6_profile(1, o.planes)).ok());
  QpInitAttr ia;
  ia.pd = pr.h(0).pd, ia.send_cq = pr.h(0).scq, ia.recv_cq = pr.h(0).rcq;
  ia.cap.max_send_wr = ia.cap.max_recv_wr = 16;
  const uint32_t q = *pr.e(0).create_qp(ia);
  ASSERT_TRUE(pr.to_init(0, q).ok());
  EXPECT_EQ(pr.to_rtr(0, q, 77, 0).error().code, EINVAL);
  // IPv4 addresses with an SRv6 profile.
  Pair::Options o4;
  o4.ev_profile = 5;
  Pair p4(o4);
  ASSERT_TRUE(p4.e(0).install_ev_profile(5, srv6_profile(0, o4.planes)).ok());
  ia.pd = p4.h(0).pd, ia.send_cq = p4.h(0).scq, ia.recv_cq = p4.h(0).rcq;
  const uint32_t q4 = *p4.e(0).create_qp(ia);
  ASSERT_TRUE(p4.to_init(0, q4).ok());
  EXPECT_EQ(p4.to_rtr(0, q4, 77, 0).error().code, EINVAL);
}

}  // namespace
}  // namespace mrc::testing
