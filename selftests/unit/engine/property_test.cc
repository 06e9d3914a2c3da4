// Randomized property test: for each seed, random message sizes and mixes
// (WRITE and WRITE-with-immediate, several QPs in both directions) over a
// random multi-plane fabric under a random fault timeline (loss up to 10% per
// path, blackholes, trims, ECN, reordering, duplicates, corruption, plane
// loss), with at least one working path per direction. Invariants: every
// byte placed exactly as sent, every completion exactly once and in order, no
// QP error. A second property: with every path dead the QP errors out within
// its retry budget. A failing seed is printed and replays exactly:
//   engine_test --gtest_filter='Property.*' --seed=N --seeds=1
#include <gtest/gtest.h>

#include <cstring>
#include <sstream>

#include "core/rng.hpp"
#include "sim/cluster.hpp"
#include "sim/timeline.hpp"

namespace mrc::testing {

extern uint64_t g_seed_base;
extern uint32_t g_seeds;

namespace {

using namespace core;
using sim::kMs;
using sim::kUs;

struct QpEnd {
  uint32_t host, qpn, pd, scq, rcq;
};

struct Flow {
  QpEnd src, dst;
  std::vector<uint8_t> sbuf, dbuf;
  Engine::MrInfo smr{}, dmr{};
  struct Msg {
    size_t off, len;
    bool imm;
    uint32_t immv;
  };
  std::vector<Msg> msgs;
  size_t sends_done = 0, recvs_done = 0, imm_count = 0;
};

struct Totals {
  uint64_t bytes = 0, msgs = 0, rtx = 0, nacks = 0, timeouts = 0, ev_bad = 0, ev_readmit = 0,
           skips = 0;
  uint64_t net_drops = 0, trims = 0, ecn = 0, dups = 0, corrupt = 0;
};
Totals g_tot;

struct Outcome {
  bool ok = true;
  std::string why;
  void fail(const std::string& w) {
    if (ok) why = w;
    ok = false;
  }
};

QpEnd make_end(sim::Cluster& c, uint32_t host, uint32_t pd, uint32_t scq, uint32_t rcq) {
  QpInitAttr ia;
  ia.pd = pd;
  ia.send_cq = scq;
  ia.recv_cq = rcq;
  ia.cap.max_send_wr = 64;
  ia.cap.max_recv_wr = 64;
  return {host, *c.engine(host).create_qp(ia), pd, scq, rcq};
}

Status connect(sim::Cluster& c, const QpEnd& a, const QpEnd& b, uint32_t mtu, uint8_t timeout,
               uint8_t lin, uint8_t exp) {
  for (int side = 0; side < 2; side++) {
    const QpEnd& me = side ? b : a;
    const QpEnd& peer = side ? a : b;
    Engine& e = c.engine(me.host);
    QpAttr at;
    at.qp_state = QpState::kInit;
    at.qp_access_flags = kAccessLocalWrite | kAccessRemoteWrite;
    MRC_TRY(e.modify_qp(me.qpn, at, kQpState | kQpPkeyIndex | kQpAccessFlags,
                        kMrcHint | kMrcEvProfileId | kMrcCcProfileId));
    at.qp_state = QpState::kRtr;
    at.path_mtu = mtu;
    at.dest_qp_num = peer.qpn;
    at.rq_psn = 0x100 * peer.host;
    at.av = c.av_of(peer.host);
    at.max_wimm_dest = 16;
    at.mpr_dest = 8;
    at.peer_max_wimm_dest = 16;
    MRC_TRY(e.modify_qp(me.qpn, at, kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn,
                        kMrcMaxWimmDest | kMrcMprDest));
  }
  for (int side = 0; side < 2; side++) {
    const QpEnd& me = side ? b : a;
    Engine& e = c.engine(me.host);
    QpAttr at;
    at.qp_state = QpState::kRts;
    at.sq_psn = 0x100 * me.host;
    at.max_wimm = 16;
    at.mpr = 8;
    at.timeout = timeout;
    at.retry_linear = lin;
    at.retry_exp = exp;
    MRC_TRY(e.modify_qp(me.qpn, at, kQpState | kQpSqPsn,
                        kMrcMaxWimm | kMrcMpr | kMrcRetryCnt | kMrcTimeout));
  }
  return {};
}

Outcome run_seed(uint64_t seed, std::string* summary) {
  Rng r(seed);
  sim::ClusterOptions o;
  o.net.hosts = 2 + r.below(2);
  o.net.planes = 2 + r.below(3);
  o.net.paths_per_plane = 2 + r.below(7);
  o.net.ip_version = r.below(2) ? codec::IpVersion::kV6 : codec::IpVersion::kV4;
  o.net.seed = seed;
  o.net.ecmp_seed = seed ^ 0x5eed;
  // Slow enough links that transfers last through the fault window; queues
  // build at the downlinks when flows converge (incast), so trimming and ECN
  // thresholds matter.
  const uint64_t gbps = 2 + r.below(9);
  for (sim::LinkParams* lp : {&o.net.uplink, &o.net.spine, &o.net.downlink}) {
    lp->latency = (1 + r.below(4)) * kUs;
    lp->rate_bps = gbps * 1'000'000'000ull;
    lp->queue_bytes = 256 * 1024;
  }
  if (r.below(2)) o.net.downlink.rate_bps /= 2;  // a slow last hop: queues, trims, ECN
  o.engine.seed = seed;
  o.engine.auto_evs_per_port = 16 + r.below(48);
  o.engine.auto_active_per_port = o.engine.auto_evs_per_port / 2;
  sim::Cluster c(o);

  sim::FaultBudget b;
  b.start = 0;
  b.end = 8 * kMs;
  b.min_len = 100 * kUs;
  b.max_len = 2 * kMs;
  b.loss_episodes = r.below(4);
  b.max_loss = 0.10;
  b.path_blackholes = r.below(3);
  b.plane_failures = r.below(2);
  b.link_failures = r.below(2);
  b.trim_episodes = r.below(3);
  b.ecn_episodes = r.below(3);
  b.reorder_episodes = r.below(3);
  b.dup_episodes = r.below(2);
  b.corrupt_episodes = r.below(2);
  b.keep_path = true;
  b.heal_at_end = true;
  sim::Timeline tl = sim::random_timeline(o.net, b, seed);
  if (auto s = sim::schedule(c.net(), tl); !s.ok())
    return Outcome{false, "timeline: " + s.error().message()};
  if (summary) *summary = tl.to_string();

  // Flows: random (src, dst) host pairs, several QPs.
  const uint32_t nflows = 1 + r.below(4);
  std::vector<std::unique_ptr<Flow>> flows;
  std::vector<uint32_t> pd(o.net.hosts), scq(o.net.hosts), rcq(o.net.hosts);
  for (uint32_t h = 0; h < o.net.hosts; h++) {
    pd[h] = *c.engine(h).create_pd();
    scq[h] = *c.engine(h).create_cq(4096);
    rcq[h] = *c.engine(h).create_cq(4096);
  }
  const uint32_t mtu = 1024u << r.below(3);
  for (uint32_t f = 0; f < nflows; f++) {
    auto fl = std::make_unique<Flow>();
    uint32_t a = r.below(o.net.hosts), bb = (a + 1 + r.below(o.net.hosts - 1)) % o.net.hosts;
    fl->src = make_end(c, a, pd[a], scq[a], rcq[a]);
    fl->dst = make_end(c, bb, pd[bb], scq[bb], rcq[bb]);
    if (auto s = connect(c, fl->src, fl->dst, mtu, 10, 7, 7); !s.ok())
      return Outcome{false, s.error().message()};
    const uint32_t nmsg = 1 + r.below(8);
    size_t off = 0;
    for (uint32_t m = 0; m < nmsg; m++) {
      size_t len = r.below(8) == 0 ? r.below(1 << 20) : r.below(96 * 1024);
      if (r.below(10) == 0) len = 0;
      bool imm = r.below(2);
      fl->msgs.push_back({off, len, imm, uint32_t(r.next())});
      off += len + r.below(64);
    }
    fl->sbuf.resize(off + 1);
    fl->dbuf.assign(off + 1, 0);
    for (auto& x : fl->sbuf) x = uint8_t(r.next());
    fl->smr = *c.engine(a).reg_mr(pd[a], fl->sbuf.data(), fl->sbuf.size(), kAccessLocalWrite);
    fl->dmr = *c.engine(bb).reg_mr(pd[bb], fl->dbuf.data(), fl->dbuf.size(),
                                   kAccessLocalWrite | kAccessRemoteWrite);
    for (size_t m = 0; m < fl->msgs.size(); m++) {
      const auto& msg = fl->msgs[m];
      if (msg.imm) {
        RecvWr rw;
        rw.wr_id = (uint64_t(f) << 32) | m;
        if (!c.engine(bb).post_recv(fl->dst.qpn, rw).ok()) return Outcome{false, "post_recv"};
        fl->imm_count++;
      }
      Sge sg{uint64_t(uintptr_t(fl->sbuf.data() + msg.off)), uint32_t(msg.len), fl->smr.lkey};
      SendWr wr;
      wr.wr_id = (uint64_t(f) << 32) | m;
      wr.opcode = msg.imm ? WrOpcode::kRdmaWriteWithImm : WrOpcode::kRdmaWrite;
      wr.sg_list = &sg;
      wr.num_sge = 1;
      wr.remote_addr = uint64_t(uintptr_t(fl->dbuf.data() + msg.off));
      wr.rkey = fl->dmr.rkey;
      wr.imm_data = msg.immv;
      if (auto s = c.engine(a).post_send(fl->src.qpn, wr); !s.ok())
        return Outcome{false, s.error().message()};
    }
    c.kick(a);
    flows.push_back(std::move(fl));
  }

  Outcome out;
  // Completions: exactly once, in order, with the right content.
  auto poll_all = [&] {
    Wc wc[64];
    for (uint32_t h = 0; h < o.net.hosts; h++) {
      for (uint32_t cq : {scq[h], rcq[h]}) {
        while (true) {
          auto n = c.engine(h).poll_cq(cq, wc);
          if (!n.ok()) {
            out.fail("poll_cq: " + n.error().message());
            return;
          }
          if (!*n) break;
          for (size_t i = 0; i < *n; i++) {
            const Wc& w = wc[i];
            uint32_t f = uint32_t(w.wr_id >> 32), m = uint32_t(w.wr_id);
            if (f >= flows.size()) return out.fail("completion for an unknown flow");
            Flow& fl = *flows[f];
            if (w.status != kWcSuccess) {
              return out.fail("QP " + std::to_string(w.qp_num) +
                              " completion error: " + to_string(w.status));
            }
            if (w.opcode == WcOpcode::kRdmaWrite) {
              if (m != fl.sends_done) return out.fail("send completion out of order");
              if (w.byte_len != fl.msgs[m].len) return out.fail("send completion byte_len");
              fl.sends_done++;
            } else {
              // Receive completions: WriteIMM messages in send order.
              size_t k = 0, seen = 0;
              for (; k < fl.msgs.size(); k++)
                if (fl.msgs[k].imm && seen++ == fl.recvs_done) break;
              if (k >= fl.msgs.size()) return out.fail("extra receive completion");
              if (w.imm_data != fl.msgs[k].immv)
                return out.fail("WriteIMM completion out of order");
              if (w.byte_len != fl.msgs[k].len) return out.fail("WriteIMM byte_len");
              // Everything up to and including this message is in place.
              for (size_t j = 0; j <= k; j++)
                if (std::memcmp(fl.sbuf.data() + fl.msgs[j].off, fl.dbuf.data() + fl.msgs[j].off,
                                fl.msgs[j].len))
                  return out.fail("WriteIMM completed before its data (message " +
                                  std::to_string(j) + ")");
              fl.recvs_done++;
            }
          }
        }
      }
    }
  };
  auto done = [&] {
    poll_all();
    if (!out.ok) return true;
    for (auto& fl : flows)
      if (fl->sends_done < fl->msgs.size() || fl->recvs_done < fl->imm_count) return false;
    return true;
  };
  c.run_until(done, 400 * kMs);
  if (!out.ok) return out;
  for (size_t f = 0; f < flows.size(); f++) {
    Flow& fl = *flows[f];
    if (fl.sends_done < fl.msgs.size() || fl.recvs_done < fl.imm_count) {
      std::ostringstream s;
      s << "flow " << f << " incomplete after 400 ms: " << fl.sends_done << "/" << fl.msgs.size()
        << " sends, " << fl.recvs_done << "/" << fl.imm_count << " recvs; QP state "
        << to_string(c.engine(fl.src.host).query_qp(fl.src.qpn)->qp_state);
      out.fail(s.str());
      return out;
    }
    for (const auto& m : fl.msgs)
      if (std::memcmp(fl.sbuf.data() + m.off, fl.dbuf.data() + m.off, m.len)) {
        out.fail("flow " + std::to_string(f) + ": data differs");
        return out;
      }
    // Nothing outside the messages was written.
    size_t at = 0;
    for (const auto& m : fl.msgs) {
      for (size_t i = at; i < m.off; i++)
        if (fl.dbuf[i]) {
          out.fail("flow " + std::to_string(f) + ": byte written between messages");
          return out;
        }
      at = m.off + m.len;
    }
    for (uint32_t h : {fl.src.host, fl.dst.host})
      for (uint32_t q : {fl.src.qpn, fl.dst.qpn}) {
        auto st = c.engine(h).query_qp(q);
        if (st.ok() && st->qp_state == QpState::kErr) out.fail("a QP is in ERR");
      }
    auto st = *c.engine(fl.src.host).qp_stats(fl.src.qpn);
    g_tot.msgs += fl.msgs.size();
    for (const auto& m : fl.msgs) g_tot.bytes += m.len;
    g_tot.rtx += st.tx_rtx_pkts;
    g_tot.nacks += st.rx_nacks;
    g_tot.timeouts += st.timeouts;
    g_tot.ev_bad += st.ev_assumed_bad;
    g_tot.ev_readmit += st.ev_readmitted;
    g_tot.skips += st.ev_skips;
  }
  const auto& nc = c.net().net_counters();
  g_tot.net_drops += nc.dropped();
  for (uint32_t pl = 0; pl < o.net.planes; pl++) {
    auto lc = c.net().plane_counters(pl);
    g_tot.trims += lc.trims;
    g_tot.ecn += lc.ecn_marks;
    g_tot.dups += lc.dups;
    g_tot.corrupt += lc.corruptions;
  }
  return out;
}

TEST(Property, RandomTrafficUnderRandomFaults) {
  uint32_t failures = 0;
  for (uint32_t i = 0; i < g_seeds; i++) {
    const uint64_t seed = g_seed_base + i;
    std::string tl;
    Outcome o = run_seed(seed, &tl);
    if (!o.ok) {
      failures++;
      ADD_FAILURE() << "seed " << seed << ": " << o.why << "\n  timeline: " << tl
                    << "\n  replay: engine_test --gtest_filter='Property.*' --seed=" << seed
                    << " --seeds=1";
      if (failures >= 5) break;
    }
  }
  std::printf("property: %u seeds from %llu, %u failed\n", g_seeds, (unsigned long long)g_seed_base,
              failures);
  std::printf(
      "  moved %llu messages, %.1f MB; fabric: %llu drops, %llu trims, %llu ECN marks, %llu dups, "
      "%llu corruptions\n  engine: %llu retransmissions, %llu NACKs, %llu ACK timeouts, %llu EV "
      "skips, "
      "%llu EVs assumed bad, %llu readmitted\n",
      (unsigned long long)g_tot.msgs, double(g_tot.bytes) / 1e6,
      (unsigned long long)g_tot.net_drops, (unsigned long long)g_tot.trims,
      (unsigned long long)g_tot.ecn, (unsigned long long)g_tot.dups,
      (unsigned long long)g_tot.corrupt, (unsigned long long)g_tot.rtx,
      (unsigned long long)g_tot.nacks, (unsigned long long)g_tot.timeouts,
      (unsigned long long)g_tot.skips, (unsigned long long)g_tot.ev_bad,
      (unsigned long long)g_tot.ev_readmit);
}

// With every path dead the QP must fail within its retry budget.
TEST(Property, DeadFabricErrorsWithinRetryBudget) {
  for (uint64_t seed = g_seed_base; seed < g_seed_base + 20; seed++) {
    Rng r(seed);
    sim::ClusterOptions o;
    o.net.hosts = 2;
    o.net.planes = 2 + r.below(3);
    o.net.paths_per_plane = 4;
    o.net.seed = seed;
    o.engine.seed = seed;
    sim::Cluster c(o);
    uint32_t pd[2], cq[2];
    for (uint32_t h = 0; h < 2; h++)
      pd[h] = *c.engine(h).create_pd(), cq[h] = *c.engine(h).create_cq(256);
    QpEnd a = make_end(c, 0, pd[0], cq[0], cq[0]), b = make_end(c, 1, pd[1], cq[1], cq[1]);
    const uint8_t timeout = uint8_t(8 + r.below(3)), lin = uint8_t(r.below(4)),
                  exp = uint8_t(r.below(4));
    ASSERT_TRUE(connect(c, a, b, 1024, timeout, lin, exp).ok());
    const size_t kMsg = 4 << 20;  // long enough to still be in flight at the kill
    std::vector<uint8_t> s(4 * kMsg, 1), d(4 * kMsg);
    auto ms = *c.engine(0).reg_mr(pd[0], s.data(), s.size(), kAccessLocalWrite);
    auto md =
        *c.engine(1).reg_mr(pd[1], d.data(), d.size(), kAccessLocalWrite | kAccessRemoteWrite);
    const Time kill = (20 + r.below(100)) * kUs;
    c.net().at(kill, [&] {
      c.net().update(sim::LinkSel::all(),
                     [](sim::LinkParams& p, sim::Tier) { p.blackhole = true; });
    });
    for (int i = 0; i < 4; i++) {
      Sge sg{uint64_t(uintptr_t(s.data() + i * kMsg)), uint32_t(kMsg), ms.lkey};
      SendWr wr;
      wr.wr_id = uint64_t(i);
      wr.sg_list = &sg;
      wr.num_sge = 1;
      wr.remote_addr = uint64_t(uintptr_t(d.data() + i * kMsg));
      wr.rkey = md.rkey;
      ASSERT_TRUE(c.engine(0).post_send(a.qpn, wr).ok());
    }
    c.kick(0);
    std::vector<Wc> wcs;
    auto done = [&] {
      Wc wc[8];
      auto n = c.engine(0).poll_cq(cq[0], wc);
      if (n.ok()) wcs.insert(wcs.end(), wc, wc + *n);
      return wcs.size() == 4;
    };
    // Budget: linear timeouts at T, then T*2, T*4 ... for exp retries, plus slack.
    const double T = 1024.0 * (1u << timeout);
    double budget = T * (lin + 1);
    for (uint32_t k = 1; k <= exp; k++) budget += T * double(1u << k);
    ASSERT_TRUE(c.run_until(done, kill + Time(budget * 1.5) + 5 * kMs))
        << "seed " << seed << ": no error within the retry budget";
    bool saw_retry = false;
    for (const auto& w : wcs) {
      if (w.status == kWcRetryExcErr) saw_retry = true;
      EXPECT_TRUE(w.status == kWcSuccess || w.status == kWcRetryExcErr || w.status == kWcWrFlushErr)
          << "seed " << seed << ": " << to_string(w.status);
    }
    EXPECT_TRUE(saw_retry) << "seed " << seed;
    EXPECT_EQ(c.engine(0).query_qp(a.qpn)->qp_state, QpState::kErr) << "seed " << seed;
    EXPECT_LE(double(c.now() - kill), budget * 1.5 + 5e6) << "seed " << seed;
  }
}

}  // namespace

uint64_t g_seed_base = 1;
uint32_t g_seeds = 500;

}  // namespace mrc::testing

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; i++) {
    if (!std::strncmp(argv[i], "--seed=", 7))
      mrc::testing::g_seed_base = std::strtoull(argv[i] + 7, nullptr, 0);
    if (!std::strncmp(argv[i], "--seeds=", 8))
      mrc::testing::g_seeds = uint32_t(std::strtoul(argv[i] + 8, nullptr, 0));
  }
  return RUN_ALL_TESTS();
}
