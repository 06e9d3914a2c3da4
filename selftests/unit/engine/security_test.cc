// Issue 20 (Documentation/security.md): forged, stale and replayed packets
// cost a counter, never a QP or a byte of memory; identifiers an attacker
// cannot predict.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "core/ids.hpp"
#include "engine/fixture.hpp"
#include "engine/harness.hpp"

namespace mrc::testing {
namespace {

using namespace core;

// --- identifiers -------------------------------------------------------------

TEST(Ids, ChaCha20BlockMatchesRfc8439) {
  // RFC 8439 section 2.3.2: key 00..1f, nonce 00:00:00:09:00:00:00:4a:00:00:00:00, counter 1.
  uint32_t key[8];
  for (int i = 0; i < 8; i++)
    key[i] = uint32_t(4 * i) | uint32_t(4 * i + 1) << 8 | uint32_t(4 * i + 2) << 16 |
             uint32_t(4 * i + 3) << 24;
  const uint32_t nonce[3] = {0x09000000, 0x4a000000, 0};
  uint32_t out[16];
  chacha20_block(key, 1, nonce, out);
  const uint32_t want[16] = {0xe4e7f110, 0x15593bd1, 0x1fdd0f50, 0xc47120a3, 0xc7f4d1c7, 0x0368c033,
                             0x9aaa2204, 0x4e6cd4c3, 0x466482d2, 0x09aa9f07, 0x05d7c214, 0xa2028bd9,
                             0xd19c12b5, 0xb94e16de, 0xe883d0cb, 0x4e3c50a2};
  for (int i = 0; i < 16; i++) EXPECT_EQ(out[i], want[i]) << "word " << i;
}

TEST(Ids, PermutationIsABijectionAndKeyed) {
  IdGen a(IdGen::seed_key(1)), b(IdGen::seed_key(2));
  std::vector<bool> seen(65536);
  size_t same = 0;
  for (uint32_t i = 0; i < 65536; i++) {
    const uint16_t v = a.permute(uint16_t(i));
    ASSERT_FALSE(seen[v]) << "two indices map to " << v;
    seen[v] = true;
    ASSERT_EQ(a.unpermute(v), i);
    same += v == b.permute(uint16_t(i));
  }
  EXPECT_LT(same, 64u) << "two secrets give nearly the same permutation";
}

std::vector<uint32_t> first_keys(Engine& e, int n) {
  static std::vector<uint8_t> mem(4096);
  const uint32_t pd = *e.create_pd();
  std::vector<uint32_t> k;
  for (int i = 0; i < n; i++)
    k.push_back(e.reg_mr(pd, mem.data(), mem.size(), kAccessLocalWrite | kAccessRemoteWrite)->rkey);
  return k;
}

// Two processes (engines keyed from getrandom) share no key and no QPN;
// consecutive registrations follow no sequence.
TEST(Ids, KeysAndQpnsDifferBetweenRunsAndFollowNoSequence) {
  Engine e1{EngineConfig{}}, e2{EngineConfig{}};
  const auto k1 = first_keys(e1, 64), k2 = first_keys(e2, 64);
  std::set<uint32_t> both(k1.begin(), k1.end());
  for (uint32_t k : k2) EXPECT_FALSE(both.count(k)) << "key " << k << " in both runs";
  // No sequence: neither the keys nor their differences repeat a pattern,
  // and the secret (upper) bits take 64 different values.
  std::set<uint32_t> diffs, hi;
  for (size_t i = 0; i < k1.size(); i++) {
    hi.insert(k1[i] >> 16);
    if (i) diffs.insert(k1[i] - k1[i - 1]);
  }
  EXPECT_GE(hi.size(), 60u);
  EXPECT_GE(diffs.size(), 60u);
  auto qpns = [](Engine& e) {
    const uint32_t pd = *e.create_pd(), cq = *e.create_cq(16);
    std::vector<uint32_t> v;
    for (int i = 0; i < 16; i++) {
      QpInitAttr ia;
      ia.pd = pd;
      ia.send_cq = ia.recv_cq = cq;
      v.push_back(*e.create_qp(ia));
    }
    return v;
  };
  const auto q1 = qpns(e1), q2 = qpns(e2);
  size_t shared = 0;
  for (uint32_t q : q1) {
    EXPECT_GE(q, 0x10000u) << "a QPN among the reserved ones";
    EXPECT_LE(q, MRC_QPN_MASK);
    shared += std::count(q2.begin(), q2.end(), q);
  }
  EXPECT_LE(shared, 1u);
}

// The same id_seed gives the same keys (reproducible simulations).
TEST(Ids, SeededKeysAreReproducible) {
  EngineConfig c;
  c.id_seed = 42;
  Engine e1{c}, e2{c};
  EXPECT_EQ(first_keys(e1, 8), first_keys(e2, 8));
}

// A slot reused after dereg gets a new key; the old one, and a key with the
// right index but other secret bits, are refused.
TEST(Ids, ReusedSlotAndWrongSecretBitsAreRefused) {
  PairOptions o;
  Fixture f(64 * 1024, o);
  const uint32_t old_key = f.dst->mr.rkey;
  ASSERT_TRUE(f.p.e(1).dereg_mr(old_key).ok());
  auto again = f.p.e(1).reg_mr(f.p.h(1).pd, f.dst->bytes.data(), f.dst->bytes.size(),
                               kAccessLocalWrite | kAccessRemoteWrite);
  ASSERT_TRUE(again.ok());
  EXPECT_NE(again->rkey, old_key);
  EXPECT_EQ(again->rkey & 0xffff, old_key & 0xffff) << "the same slot";
  std::vector<uint8_t> before = f.dst->bytes;
  // Written with the old key, then with the right index and a flipped secret bit.
  ASSERT_TRUE(f.write(1, 0, 4096, false, 0, old_key).ok());
  ASSERT_TRUE(f.wait_sends(1));
  EXPECT_EQ(f.swc[0].status, kWcRemAccessErr);
  EXPECT_EQ(f.dst->bytes, before);
  EXPECT_GE(f.p.e(1).qp_stats(f.q1)->rem_access_errors, 2u);
  EXPECT_EQ(f.p.e(1).query_qp(f.q1)->qp_state, QpState::kRts);
}

// --- protection domains --------------------------------------------------------

// A region's keys are valid only on QPs of its protection domain (a shared
// engine, as mrc-serviced's, holds many processes' PDs). Host 1 has two PDs:
// its QP q1 is in the first ("B"), region a in the second ("A"). A WRITE
// through q1 with a's rkey is refused and writes nothing (ReDMArk's forged
// rkey); a local SGE naming a's lkey on q1 is refused at post; a QP of A's PD
// connected to its own peer writes into a, verified; q1 itself still works.
TEST(Security, KeysAreValidOnlyInTheirProtectionDomain) {
  Fixture f(64 * 1024);
  Engine& e1 = f.p.e(1);
  const uint32_t pd_b = f.p.h(1).pd, pd_a = *e1.create_pd();
  Buffer a(e1, pd_a, 64 * 1024, 9, kAccessLocalWrite | kAccessRemoteWrite);
  const std::vector<uint8_t> a_before = a.bytes;
  // Remote: A's rkey and address through B's QP.
  ASSERT_TRUE(f.write(1, 0, 4096, false, 0, a.mr.rkey, a.addr()).ok());
  ASSERT_TRUE(f.wait_sends(1));
  EXPECT_EQ(f.swc[0].status, kWcRemAccessErr);
  EXPECT_EQ(a.bytes, a_before) << "a forged rkey wrote into another PD's region";
  EXPECT_GE(e1.qp_stats(f.q1)->rem_access_errors, 1u);
  EXPECT_EQ(e1.query_qp(f.q1)->qp_state, QpState::kRts) << "the responder QP stays up";
  // Local: A's lkey in an SGE of B's QP (its bytes would go out on B's QP).
  {
    Sge sg{a.addr(), 4096, a.mr.lkey};
    SendWr wr;
    wr.wr_id = 7;
    wr.opcode = WrOpcode::kRdmaWrite;
    wr.sg_list = &sg;
    wr.num_sge = 1;
    wr.remote_addr = f.src->addr();
    wr.rkey = f.src->mr.rkey;
    const Status s = e1.post_send(f.q1, wr);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().code, EINVAL);
  }
  // A's own QP pair (host 1's end in A's PD) writes into a: placed, verified.
  f.p.h(1).pd = pd_a;
  const auto [qa0, qa1] = f.p.connect(100, 200);
  f.p.h(1).pd = pd_b;
  EXPECT_EQ(e1.query_qp(qa1)->qp_state, QpState::kRts);
  ASSERT_TRUE(post_write(f.p.e(0), qa0, *f.src, a, 0, 16384, 2).ok());
  std::vector<Wc> wc;
  ASSERT_TRUE(f.p.run([&] {
    f.p.poll(0, f.p.h(0).scq, wc);
    return !wc.empty();
  }));
  EXPECT_EQ(wc[0].status, kWcSuccess);
  EXPECT_EQ(wc[0].qp_num, qa0);
  EXPECT_EQ(std::memcmp(a.bytes.data(), f.src->bytes.data(), 16384), 0);
  EXPECT_TRUE(std::equal(a.bytes.begin() + 16384, a.bytes.end(), a_before.begin() + 16384));
  EXPECT_EQ(e1.qp_stats(qa1)->rem_access_errors, 0u);
  // B's rkey on A's QP is refused the same way.
  ASSERT_TRUE(post_write(f.p.e(0), qa0, *f.src, *f.dst, 0, 4096, 3).ok());
  wc.clear();
  ASSERT_TRUE(f.p.run([&] {
    f.p.poll(0, f.p.h(0).scq, wc);
    return !wc.empty();
  }));
  EXPECT_EQ(wc[0].status, kWcRemAccessErr);
  EXPECT_GE(e1.qp_stats(qa1)->rem_access_errors, 1u);
}

// --- forged and stale acknowledgements ----------------------------------------

// Injects `n` into host `to` as if it arrived on `port`.
void inject(Fixture& f, int to, const codec::Packet& n, uint8_t port) {
  std::vector<uint8_t> fr(codec::frame_size(n));
  ASSERT_GT(codec::build(n, fr), 0u);
  RxFrame rf{fr.data(), uint32_t(fr.size()), port, 0};
  f.p.e(to).rx({&rf, 1}, f.p.now);
}

// A transfer in flight meets one forged acknowledgement of every kind with a
// PSN the requester never sent, and stale ones: each is counted by its kind,
// none changes the QP or the data.
TEST(Security, GhostAndStaleAcknowledgementsAreCountedAndIgnored) {
  // The injected copies reuse a SACK captured after 8 SACKs, whose trigger
  // must still be in flight when they arrive: the sequence of the old
  // start-up (the whole window at once), not slow start's (issue 21).
  PairOptions o;
  o.cfg.cc_init_window = 0;
  Fixture f(1 << 20, o);
  codec::Packet sack;
  uint8_t sack_port = 0;
  bool have = false, done = false;
  f.p.hook = [&](int from, uint8_t port, std::vector<uint8_t>& fr, Time) {
    auto k = parse_or_die(fr);
    if (from == 1 && k.bth.opcode == MRC_OP_SACK && !have) {
      sack = k;
      sack_port = port;
      have = true;
    }
    return Hook{};
  };
  ASSERT_TRUE(f.write(1, 0, 1 << 20).ok());
  ASSERT_TRUE(f.p.run([&] { return f.p.e(0).qp_stats(f.q0)->rx_sacks >= 8; }));
  ASSERT_TRUE(have);
  const auto una = f.p.e(0).qp_stats(f.q0)->rx_sacks;  // progress made: PSN 0.. acknowledged
  (void)una;
  const uint32_t far = codec::psn_add(sack.seth.cack_psn, 1 << 22);
  // SACK acknowledging everything up to a PSN never sent.
  codec::Packet g = sack;
  g.seth.cack_psn = g.bth.psn = far;
  inject(f, 0, g, sack_port);
  // NACK of every reason and AETH NAKs naming it.
  for (uint8_t r :
       {MRC_NACK_TRIMMED, MRC_NACK_TRIMMED_LASTHOP, MRC_NACK_NO_BITMAP, MRC_NACK_NO_PKT_BUFFER,
        MRC_NACK_NO_RESOURCE, MRC_NACK_PSN_OOR_WINDOW, MRC_NACK_UNEXP_EVENT}) {
    codec::Packet n = sack;
    n.bth.opcode = MRC_OP_NACK;
    n.hdrs = 0;
    n.neth.reason = r;
    n.neth.nack_psn = n.bth.psn = far;
    inject(f, 0, n, sack_port);
  }
  for (uint8_t syn : {0x60, 0x61, 0x62, 0x63}) {
    codec::Packet a = sack;
    a.bth.opcode = MRC_OP_ACK;
    a.hdrs = 0;
    a.aeth.syndrome = syn;
    a.bth.psn = far;
    inject(f, 0, a, sack_port);
  }
  // Stale: the first SACK's PSN, acknowledged long since, in a NACK and a NAK.
  {
    codec::Packet n = sack;
    n.bth.opcode = MRC_OP_NACK;
    n.hdrs = 0;
    n.neth.reason = MRC_NACK_UNEXP_EVENT;
    n.neth.nack_psn = n.bth.psn = sack.seth.cack_psn;
    inject(f, 0, n, sack_port);
    codec::Packet a = sack;
    a.bth.opcode = MRC_OP_ACK;
    a.hdrs = 0;
    a.aeth.syndrome = 0x62;
    a.bth.psn = sack.seth.cack_psn;
    inject(f, 0, a, sack_port);
  }
  // A probe answer nobody asked for, and a port-down report naming the
  // plane it came through.
  {
    codec::Packet pr = sack;
    pr.seth.probe_resp = true;
    pr.cc.tx_ts_echo = uint16_t(sack.cc.tx_ts_echo + 1234);
    inject(f, 0, pr, sack_port);
    codec::Packet pd = sack;
    pd.seth.port_down_mask = uint8_t(1u << (sack_port - 1));
    inject(f, 0, pd, sack_port);
  }
  (void)done;
  ASSERT_TRUE(f.wait_sends(1));
  EXPECT_EQ(f.swc[0].status, kWcSuccess);
  EXPECT_TRUE(f.same(0, 1 << 20));
  EXPECT_EQ(f.p.e(0).query_qp(f.q0)->qp_state, QpState::kRts);
  EXPECT_EQ(f.p.e(1).query_qp(f.q1)->qp_state, QpState::kRts);
  const auto st = *f.p.e(0).qp_stats(f.q0);
  EXPECT_EQ(st.ghost_sacks, 1u);
  EXPECT_EQ(st.ghost_nacks, 7u);
  EXPECT_EQ(st.ghost_naks, 4u);
  EXPECT_EQ(st.stale_nacks, 1u);
  EXPECT_EQ(st.stale_naks, 1u);
  EXPECT_EQ(st.refusals_retried, 0u);
  EXPECT_GE(st.ghost_probe_resps, 1u);
  EXPECT_EQ(st.bad_port_status, 1u);
  EXPECT_EQ(st.timeouts, 0u);
}

// A forged SACK with a plausible cumulative PSN and a bitmap claiming
// everything would complete data that never arrived; it echoes no
// transmission of its trigger, so nothing in it is believed.
TEST(Security, SackEchoingNoTransmissionIsNotBelieved) {
  PairOptions o;
  o.gbps = 1;  // SACKs come back while the message is in flight
  Fixture f(256 * 1024, o);
  bool forged = false;
  f.p.hook = [&](int from, uint8_t port, std::vector<uint8_t>& fr, Time) {
    auto k = parse_or_die(fr);
    Hook h;
    if (from == 0 && codec::is_data_opcode(k.bth.opcode) && k.bth.psn == 40 && !k.bth.rtx)
      h.drop = true;  // lost: only a retransmission delivers it
    if (from == 1 && k.bth.opcode == MRC_OP_SACK && !forged && k.seth.cack_psn < 30) {
      codec::Packet x = k;
      x.seth.sack_offset = 1;
      x.seth.sack_bitmap = ~0ull;  // "everything after cack arrived"
      x.cc.tx_ts_echo = uint16_t(k.cc.tx_ts_echo + 777);
      inject(f, 0, x, port);
      forged = true;
    }
    return h;
  };
  ASSERT_TRUE(f.write(1, 0, 256 * 1024).ok());
  ASSERT_TRUE(f.wait_sends(1));
  ASSERT_TRUE(forged);
  EXPECT_EQ(f.swc[0].status, kWcSuccess);
  EXPECT_TRUE(f.same(0, 256 * 1024)) << "a forged SACK completed data that never arrived";
  EXPECT_EQ(f.p.e(0).qp_stats(f.q0)->unverified_sacks, 1u);
}

// An attacker on the path who copies each SACK's echo (so the copies verify)
// restates every SACK with every packet of one plane missing: a subset of
// the truth, the evidence the quiet and silent plane rules act on. Sent
// ahead of each SACK, or in its place (the plane then seems to lag a SACK
// behind). It may cost that plane's share and retransmissions of data
// already delivered; never data, the QP, an ACK timeout or a plane
// retirement (design.md, "A quiet plane"; security.md).
TEST(Security, ForgedHolesOnOnePlaneCostShareNotData) {
  constexpr size_t kLen = 4 << 20;
  constexpr uint8_t kVictim = 2;  // the plane (port) whose packets the forgeries hide
  struct Run {
    Time took = 0;
    QpStats st;
    uint64_t forged = 0;
    double victim_share = 0;
  };
  enum Mode { kNone, kAhead, kInstead };
  auto run = [&](Mode forge) {
    PairOptions o;
    o.gbps = 1;  // SACKs come back while the message is in flight
    Fixture f(kLen, o);
    std::vector<uint8_t> port_of(1 << 16, 0);  // PSN -> the port of its last transmission
    Run r;
    uint32_t last_cack = 0;
    bool have_last = false;
    f.p.hook = [&](int from, uint8_t port, std::vector<uint8_t>& fr, Time) {
      auto k = parse_or_die(fr);
      if (from == 0 && codec::is_data_opcode(k.bth.opcode)) port_of[k.bth.psn & 0xffff] = port;
      if (from != 1 || k.bth.opcode != MRC_OP_SACK || k.seth.probe_resp) return Hook{};
      // The copy restates what this SACK reports past the previous one's
      // cumulative point (the requester's una when it arrives), less the
      // victim plane's packets: cumulative up to that point, the rest as a
      // bitmap, the same trigger and echo.
      const uint32_t cack = k.seth.cack_psn;
      const uint32_t gbase = codec::psn_add(cack, k.seth.sack_offset);
      if (forge && have_last && codec::psn_lt(last_cack, cack)) {
        codec::Packet x = k;
        x.seth.cack_psn = last_cack;
        x.seth.sack_offset = 1;
        x.seth.ack_psn_offset =
            int16_t(codec::psn_diff(codec::psn_add(cack, k.seth.ack_psn_offset), last_cack));
        x.seth.sack_bitmap = 0;
        bool hidden = false;
        for (int i = 0; i < 64; i++) {
          const uint32_t psn = codec::psn_add(last_cack, 1 + i);
          const int32_t g = codec::psn_diff(psn, gbase);
          const bool got = !codec::psn_lt(cack, psn) ||
                           (g >= 0 && g < 64 && (k.seth.sack_bitmap >> (63 - g) & 1));
          if (!got) continue;
          if (port_of[psn & 0xffff] == kVictim)
            hidden = true;
          else
            x.seth.sack_bitmap |= 1ull << (63 - i);
        }
        if (hidden && forge == kAhead) inject(f, 0, x, port);  // ahead of the genuine SACK
        if (hidden && forge == kInstead) {
          fr.assign(codec::frame_size(x), 0);
          EXPECT_GT(codec::build(x, fr), 0u);
        }
        r.forged += hidden;
      }
      if (!have_last || codec::psn_lt(last_cack, cack)) last_cack = cack;
      have_last = true;
      return Hook{};
    };
    EXPECT_TRUE(f.write(1, 0, kLen).ok());
    EXPECT_TRUE(f.wait_sends(1));
    r.took = f.p.now;
    r.st = *f.p.e(0).qp_stats(f.q0);
    EXPECT_EQ(f.swc.size(), 1u);
    if (!f.swc.empty()) {
      EXPECT_EQ(f.swc[0].status, kWcSuccess);
    }
    EXPECT_TRUE(f.same(0, kLen)) << "forgery " << forge << " lost data";
    EXPECT_EQ(f.p.e(0).query_qp(f.q0)->qp_state, QpState::kRts);
    EXPECT_EQ(f.p.e(1).query_qp(f.q1)->qp_state, QpState::kRts);
    uint64_t all = 0;
    for (uint32_t p = 0; p <= kMaxPorts; p++) all += r.st.plane_tx_bytes[p];
    r.victim_share = all ? double(r.st.plane_tx_bytes[kVictim]) / double(all) : 0;
    return r;
  };
  const Run clean = run(kNone);
  for (Mode m : {kAhead, kInstead}) {
    const Run forged = run(m);
    std::printf(
        "forged holes on plane %u %s: %lu forgeries; took %.2f ms against %.2f; plane "
        "share %.3f against %.3f; quiets %lu against %lu, silences %lu against %lu, "
        "rtx_sack %lu against %lu, spurious %lu against %lu, suspects %lu\n",
        kVictim, m == kAhead ? "ahead of each SACK" : "instead of each SACK",
        (unsigned long)forged.forged, forged.took / 1e6, clean.took / 1e6, forged.victim_share,
        clean.victim_share, (unsigned long)forged.st.plane_quiets,
        (unsigned long)clean.st.plane_quiets, (unsigned long)forged.st.plane_silences,
        (unsigned long)clean.st.plane_silences, (unsigned long)forged.st.rtx_sack,
        (unsigned long)clean.st.rtx_sack, (unsigned long)forged.st.spurious_rtx,
        (unsigned long)clean.st.spurious_rtx, (unsigned long)forged.st.plane_suspects);
    // The forgeries reached the plane rules; nothing was lost or failed.
    EXPECT_GT(forged.forged, 100u);
    EXPECT_GT(forged.st.plane_quiets, 100u);
    EXPECT_EQ(forged.st.unverified_sacks, 0u);
    EXPECT_EQ(forged.st.timeouts, 0u);
    EXPECT_EQ(forged.st.plane_suspects, 0u);
    if (m == kAhead) {
      // The genuine SACK right behind each copy ends the plane's quiet at
      // once: it costs a counter.
      EXPECT_LE(forged.st.rtx_sack, clean.st.rtx_sack + 8);
      EXPECT_NEAR(forged.victim_share, clean.victim_share, 0.02);
      EXPECT_LE(double(forged.took), 1.05 * double(clean.took));
    } else {
      // The plane seems to lag one SACK behind the others: paced, some of
      // its packets resent sooner (security.md, "A silent plane"); a few
      // percent of the packets and of the time, no more.
      EXPECT_LE(forged.st.rtx_sack, clean.st.rtx_sack + kLen / 1024 / 10);
      EXPECT_GE(forged.victim_share, 0.8 * clean.victim_share);
      EXPECT_LE(double(forged.took), 1.2 * double(clean.took));
    }
  }
}

// A forged AETH NAK for a PSN in flight costs one retransmission.
TEST(Security, ForgedNakForAPsnInFlightIsResentNotFatal) {
  PairOptions o;
  o.gbps = 1;  // SACKs come back while the message is in flight
  Fixture f(256 * 1024, o);
  bool forged = false;
  int sacks = 0;
  f.p.hook = [&](int from, uint8_t, std::vector<uint8_t>& fr, Time) {
    auto k = parse_or_die(fr);
    // The third SACK, with many PSNs in flight, becomes a NAK of the PSN
    // after its cumulative point.
    if (from == 1 && k.bth.opcode == MRC_OP_SACK && ++sacks == 3) {
      codec::Packet a = k;
      a.bth.opcode = MRC_OP_ACK;
      a.hdrs = 0;
      a.aeth.syndrome = 0x62;
      a.bth.psn = codec::psn_add(k.seth.cack_psn, 1);
      fr.assign(codec::frame_size(a), 0);
      EXPECT_GT(codec::build(a, fr), 0u);
      forged = true;
    }
    return Hook{};
  };
  ASSERT_TRUE(f.write(1, 0, 256 * 1024).ok());
  ASSERT_TRUE(f.wait_sends(1));
  EXPECT_TRUE(forged);
  EXPECT_EQ(f.swc[0].status, kWcSuccess);
  EXPECT_TRUE(f.same(0, 256 * 1024));
  const auto st = *f.p.e(0).qp_stats(f.q0);
  EXPECT_EQ(st.ghost_naks, 0u);
  EXPECT_EQ(st.refusals_retried + st.stale_naks, 1u);
  EXPECT_EQ(f.p.e(0).query_qp(f.q0)->qp_state, QpState::kRts);
}

// The responder: a forged request in the window with a wrong key is refused
// without touching memory or the QP, and the real packet with that PSN lands;
// requests far outside the window and replays are counted.
TEST(Security, ForgedAndReplayedRequestsCostACounter) {
  PairOptions o;
  o.cfg.min_reorder = 2'000'000;  // the delay below is reordering, not loss
  Fixture f(64 * 1024, o);
  std::vector<std::pair<codec::Packet, uint8_t>> seen;
  f.p.hook = [&](int from, uint8_t port, std::vector<uint8_t>& fr, Time) {
    auto k = parse_or_die(fr);
    Hook h;
    if (from == 0 && codec::is_data_opcode(k.bth.opcode) && !k.bth.rtx) {
      if (k.bth.psn == 3) {
        // A forgery of PSN 3 with a wrong key overtakes the real one.
        codec::Packet x = k;
        x.reth.rkey ^= 0x00800000;
        x.payload = nullptr;
        std::vector<uint8_t> junk(k.payload_len, 0xee);
        x.payload = junk.data();
        inject(f, 1, x, port);
        h.extra_delay = 100'000;
      }
      if (seen.size() < 4) seen.push_back({k, port});
    }
    return h;
  };
  ASSERT_TRUE(f.write(1, 0, 64 * 1024).ok());
  ASSERT_TRUE(f.wait_sends(1));
  EXPECT_EQ(f.swc[0].status, kWcSuccess);
  EXPECT_TRUE(f.same(0, 64 * 1024));
  f.p.run([&] { return false; }, 1'000'000);  // the refused PSN's resend, now a duplicate
  auto rs = *f.p.e(1).qp_stats(f.q1);
  EXPECT_EQ(rs.rem_access_errors, 1u);
  EXPECT_EQ(f.p.e(0).qp_stats(f.q0)->refusals_retried, 1u);
  const uint64_t dup0 = rs.rx_dup_pkts, oor0 = rs.rx_oor_pkts;
  // Replays of delivered packets and a request far beyond the window.
  ASSERT_EQ(seen.size(), 4u);
  for (auto& [k, port] : seen) {
    std::vector<uint8_t> junk(k.payload_len, 0xdd);
    codec::Packet x = k;
    x.payload = junk.data();  // a replay with other bytes changes nothing
    inject(f, 1, x, port);
  }
  codec::Packet far = seen[0].first;
  far.bth.psn = codec::psn_add(far.bth.psn, 1 << 20);
  std::vector<uint8_t> junk(far.payload_len, 0xcc);
  far.payload = junk.data();
  inject(f, 1, far, seen[0].second);
  f.p.run([&] { return false; }, 1'000'000);
  rs = *f.p.e(1).qp_stats(f.q1);
  EXPECT_EQ(rs.rx_dup_pkts - dup0, 4u);
  EXPECT_EQ(rs.rx_oor_pkts - oor0, 1u);
  EXPECT_TRUE(f.same(0, 64 * 1024));
  EXPECT_EQ(f.p.e(1).query_qp(f.q1)->qp_state, QpState::kRts);
  EXPECT_EQ(f.p.e(0).query_qp(f.q0)->qp_state, QpState::kRts);
  // The far request's NACK reaches the requester as a ghost.
  EXPECT_EQ(f.p.e(0).qp_stats(f.q0)->ghost_nacks, 1u);
}

// A replayed WRITE-with-immediate completes nothing a second time.
TEST(Security, ReplayedWriteImmCompletesOnce) {
  Fixture f(64 * 1024);
  std::vector<std::pair<codec::Packet, uint8_t>> imm;
  std::vector<std::vector<uint8_t>> frames;
  f.p.hook = [&](int from, uint8_t port, std::vector<uint8_t>& fr, Time) {
    auto k = parse_or_die(fr);
    if (from == 0 && codec::opcode_has_imm(k.bth.opcode) && !k.bth.rtx) {
      frames.push_back(fr);
      imm.push_back({parse_or_die(frames.back()), port});
    }
    return Hook{};
  };
  f.recv(1);
  f.recv(2);
  ASSERT_TRUE(f.write(1, 0, 1024, true, 77).ok());
  ASSERT_TRUE(f.wait_recvs(1));
  ASSERT_TRUE(f.wait_sends(1));
  ASSERT_EQ(imm.size(), 1u);
  const uint64_t dup0 = f.p.e(1).qp_stats(f.q1)->rx_dup_pkts;
  for (int i = 0; i < 3; i++) inject(f, 1, imm[0].first, imm[0].second);
  f.p.run([&] { return false; }, 1'000'000);
  f.p.poll(1, f.p.h(1).rcq, f.rwc);
  EXPECT_EQ(f.rwc.size(), 1u) << "a replay completed a receive";
  EXPECT_EQ(f.p.e(1).qp_stats(f.q1)->rx_dup_pkts - dup0, 3u);
  EXPECT_EQ(f.p.e(1).qp_stats(f.q1)->wimm_completions, 1u);
  EXPECT_EQ(f.p.e(1).query_qp(f.q1)->qp_state, QpState::kRts);
}

}  // namespace
}  // namespace mrc::testing
