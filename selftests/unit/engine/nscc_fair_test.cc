// NSCC fairness between QPs of one engine on a software host (issue 23):
// 8 QPs of one pair of hosts share 4 planes, every one with the same bulk
// load, while the hosts' engine threads sleep and wake (the scheduling
// delays of nscc_host_test; frames are stamped on arrival, as XDP stamps
// them). Quick adapt measured the whole RTT until 2026-12-04: then a QP
// that met no wake-up early learned a small base RTT and was held small,
// which one base RTT per peer (EngineConfig::cc_share_base_rtt, mrc-serviced's
// setting) mended, but every QP was cut on wake-ups (seed 2: 3.8 of 9.8
// Gbit/s). Measuring the fabric's part of the RTT (cc_qa_fabric, off by
// default) leaves the wake-ups out: equal shares and the whole capacity
// with or without the shared base.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/nscc.hpp"
#include "engine/harness.hpp"

namespace mrc::testing {
namespace {

using namespace core;

constexpr int kQps = 8;
constexpr size_t kMsg = 64 * 1024;
constexpr int kDepth = 16;  // WRITEs in flight per QP (svc_fair's bulk shape)
// Under ASan the simulation runs about 35x slower (120 s per run): there it
// runs a fifth of the span for what ASan checks (the shared base RTT's
// entries held and freed, every byte placed), and the shares are judged
// only by the release build's unit layer.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif
constexpr Time kWarm = kSanitized ? 4'000'000 : 20'000'000;
constexpr Time kSpan = kSanitized ? 16'000'000 : 80'000'000;

struct Share {
  bool ok = false;
  double jain = 0, gbps = 0;
  uint64_t bytes[kQps] = {};
};

struct Mix {
  uint64_t seed = 1;
  bool share_base = true;  // mrc-serviced's default
  bool qa_fabric = false;  // EngineConfig::cc_qa_fabric (off by default)
};

// Every QP keeps kDepth WRITEs posted; each completion posts the next into
// the same slot. Bytes completed per QP in [kWarm, kWarm + kSpan).
Share share(const Mix& su) {
  PairOptions o;
  o.seed = su.seed;
  o.mtu = 4096;
  o.gbps = 2.5;  // per plane: 10 Gbit/s over the 4
  o.cfg.cc_share_base_rtt = su.share_base;
  o.cfg.cc_qa_fabric = su.qa_fabric;
  Pair p(o);
  std::vector<uint32_t> qps;
  for (int i = 0; i < kQps; i++) qps.push_back(p.connect().first);
  std::vector<Buffer> src, dst;
  src.reserve(kQps);
  dst.reserve(kQps);
  for (int i = 0; i < kQps; i++) {
    src.emplace_back(p.e(0), p.h(0).pd, kDepth * kMsg, uint8_t(1 + i), kAccessLocalWrite);
    dst.emplace_back(p.e(1), p.h(1).pd, kDepth * kMsg, uint8_t(101 + i),
                     kAccessLocalWrite | kAccessRemoteWrite);
  }
  p.hook = host_wakeups(su.seed);
  Share out;
  bool posted_ok = true, errors = false;
  auto post = [&](int q, int slot) {
    const size_t i = size_t(q);
    posted_ok = posted_ok && post_write(p.e(0), qps[i], src[i], dst[i], size_t(slot) * kMsg, kMsg,
                                        uint64_t(q) << 8 | uint64_t(slot))
                                 .ok();
  };
  for (int q = 0; q < kQps; q++)
    for (int s = 0; s < kDepth; s++) post(q, s);
  std::vector<Wc> wc;
  std::vector<bool> completed(size_t(kQps) * kDepth);  // slots written at least once
  const Time end = kWarm + kSpan;
  p.run(
      [&] {
        wc.clear();
        p.poll(0, p.h(0).scq, wc);
        for (const Wc& w : wc) {
          errors = errors || w.status != kWcSuccess;
          const int q = int(w.wr_id >> 8);
          if (p.now >= kWarm && p.now < end) out.bytes[q] += kMsg;
          completed[size_t(q) * kDepth + (w.wr_id & 0xff)] = true;
          post(q, int(w.wr_id & 0xff));
        }
        return p.now >= end || errors || !posted_ok;
      },
      end + 1);
  double sum = 0, sq = 0;
  for (uint64_t b : out.bytes) {
    sum += double(b);
    sq += double(b) * double(b);
  }
  out.jain = sq > 0 ? sum * sum / (kQps * sq) : 0;
  out.gbps = sum * 8 / double(kSpan);
  out.ok = !errors && posted_ok;
  // Every slot a completion reported holds its source's bytes (a slot still
  // in flight at the end may hold part of them).
  for (size_t k = 0; k < completed.size(); k++) {
    const size_t i = k / kDepth, off = (k % kDepth) * kMsg;
    if (completed[k])
      out.ok = out.ok && !std::memcmp(src[i].bytes.data() + off, dst[i].bytes.data() + off, kMsg);
  }
  return out;
}

std::string describe(const Share& s) {
  std::string per;
  for (uint64_t b : s.bytes) per += " " + std::to_string(b >> 20);
  return "Jain " + std::to_string(s.jain) + ", " + std::to_string(s.gbps) +
         " Gbit/s, MiB per QP:" + per;
}

// What the shared base RTT mends when quick adapt measures the whole RTT:
// with each QP's own, it holds the QP that met no wake-up early (the
// smallest base RTT, so the smallest target) at a fraction of the others'
// share (seed 2: 2 MiB against 12-13). Fails if the scenario stops
// reproducing it, and the tests below would prove nothing.
TEST(NsccFair, EachQpsOwnBaseRttHoldsOneQpSmall) {
  const Share s = share({.seed = 2, .share_base = false});
  EXPECT_TRUE(s.ok);
  if (!kSanitized) {
    EXPECT_LT(s.jain, 0.95) << describe(s);
  }
}

// mrc-serviced's setting: every QP within a few percent of the others,
// every byte where it belongs. Judged over ten seeds: the wake-ups make
// each run's figure chaotic (any change of timing, even one SACK sent on
// another plane, moves a seed's Jain index by a few hundredths either way;
// 2026-12-05: with PathParams::sack_plane_gap at 32 instead of 16, seed 4
// went from 0.988 to 0.961 and the others stayed), so a floor on one or two
// seeds judged the lottery, and changes that left the mean alone failed on
// seed 2 (design.md, "Acknowledgements avoid a plane that delivers
// nothing"). When written: mean 0.984, lowest 0.950 (seed 2); without
// sack_plane_gap mean 0.988, lowest 0.971, and the gap of 32 above (both
// from a throwaway variant of this test, not in the tree). The sanitized
// build runs seeds 1 and 2 for what ASan checks.
TEST(NsccFair, EightQpsOfOneEngineShareEqually) {
  const uint64_t seeds = kSanitized ? 2 : 10;
  double sum = 0;
  for (uint64_t seed = 1; seed <= seeds; seed++) {
    const Share s = share({.seed = seed});
    EXPECT_TRUE(s.ok) << "seed " << seed;
    if (!kSanitized) {
      EXPECT_GE(s.jain, 0.94) << "seed " << seed << ": " << describe(s);
    }
    sum += s.jain;
    printf("seed %llu: %s\n", (unsigned long long)seed, describe(s).c_str());
  }
  if (!kSanitized) {
    EXPECT_GE(sum / double(seeds), 0.975);
  }
}

// Quick adapt on the fabric's delay: the wake-ups (host time, stamped
// apart by the receive timestamps and the SACKs' service time) fire it no
// more, so the QPs share equally without the shared base RTT, and where
// the wake-ups cut them before (seed 2; seed 1 met none that fired it) they
// moved at least 1.5x as much (9.8 against 3.7 Gbit/s) until quick adapt
// stopped "cutting" a window to its own size (2026-12-06: NsccQuickAdapt.
// WindowOfOnePacketIsNotHeldThere); now the whole RTT moves 7.4 there, and
// the fabric's delay at least as much.
TEST(NsccFair, FabricDelayLeavesWakeupsOut) {
  for (uint64_t seed : {1, 2}) {
    const Share fab = share({.seed = seed, .share_base = false, .qa_fabric = true});
    const Share whole = share({.seed = seed});
    EXPECT_TRUE(fab.ok && whole.ok) << "seed " << seed;
    if (!kSanitized) {
      EXPECT_GE(fab.jain, 0.97) << "seed " << seed << ": " << describe(fab);
      if (seed == 2) {
        EXPECT_GE(fab.gbps, 0.98 * whole.gbps) << describe(fab) << " against " << describe(whole);
      }
    }
    printf("seed %llu: fabric %s; whole RTT %s\n", (unsigned long long)seed, describe(fab).c_str(),
           describe(whole).c_str());
  }
}

// Quick adapt's delay trigger and its two off-by-default options
// (EngineConfig::cc_qa_floor, cc_qa_standing), on one Nscc fed acks
// directly. Base RTT 20 us, so the target is 20 us and the trigger 4 x 20 =
// 80 us. After the first ack opens a quick adapt window (base + target =
// 40 us), acks come 1 us apart with RTT `rest`; the ack at the window's end,
// the one quick adapt judges, has RTT `last`. True when it fired (and the
// window fell to what the window achieved).
constexpr Time kBase = 20'000;

bool qa_fires(uint64_t floor, bool standing, uint64_t rest, uint64_t last) {
  CcProfile prof;  // quick adapt on
  Nscc cc;
  cc.configure(prof, 4096, 2u << 20, kNsccMinTarget,
               NsccStart{.init_window = 0, .qa_floor = floor, .qa_standing = standing});
  Time now = 1'000'000;
  cc.on_ack(4096, kBase, false, 0, now);
  const Time end = now + 2 * kBase;
  for (now += 1000; now < end; now += 1000) {
    cc.on_ack(4096, rest, false, 0, now);
    if (cc.quick_adapted()) ADD_FAILURE() << "fired before the window's end";
  }
  cc.on_ack(4096, last, false, 0, end);
  if (cc.quick_adapted() && cc.cwnd() >= (2u << 20)) ADD_FAILURE() << "fired, window not cut";
  // Counted once when it fired, never as a loss (QpStats::cc_qa_cuts).
  if (cc.qa_cuts() != (cc.quick_adapted() ? 1u : 0u)) ADD_FAILURE() << "cuts " << cc.qa_cuts();
  if (cc.qa_loss_cuts()) ADD_FAILURE() << "loss cuts " << cc.qa_loss_cuts();
  return cc.quick_adapted();
}

// cc_qa_fabric: the ack's fabric RTT (the RTT less the hosts' own time,
// Engine::on_sack) decides, against the smallest fabric RTT seen. Every
// ack here has an RTT of 200 us, far above the 80 us trigger; the fabric
// part of the judged ack is `fabric` (the others' 21 us; 0: not known).
// `inflight`: bytes still in flight after the judged ack. `mark`: the
// first ack echoes an ECN mark; `on_fabric`: whether quick adapt then
// judged the fabric's part (Nscc::qa_on_fabric).
bool qa_judged(const NsccStart& start, uint64_t fabric, uint64_t inflight, bool mark = false,
               bool* on_fabric = nullptr) {
  CcProfile prof;
  Nscc cc;
  cc.configure(prof, 4096, 2u << 20, kNsccMinTarget, start);
  Time now = 1'000'000;
  cc.on_ack(4096, kBase, mark, 64 << 10, now, kBase);
  if (on_fabric) *on_fabric = cc.qa_on_fabric();
  const Time end = now + 2 * kBase;
  for (now += 1000; now < end; now += 1000) cc.on_ack(4096, 200'000, false, 64 << 10, now, 21'000);
  cc.on_ack(4096, 200'000, false, inflight, end, fabric);
  return cc.quick_adapted();
}

bool qa_fires_fabric(bool qa_fabric, uint64_t fabric, uint64_t inflight = 64 << 10) {
  return qa_judged(NsccStart{.init_window = 0, .qa_fabric = qa_fabric}, fabric, inflight);
}

TEST(NsccQuickAdapt, FabricRttDecides) {
  EXPECT_FALSE(qa_fires_fabric(true, 21'000));  // the hosts' delay: no queue in the fabric
  EXPECT_FALSE(qa_fires_fabric(true, 99'000));  // 79 us above the fabric's smallest: below
  EXPECT_TRUE(qa_fires_fabric(true, 101'000));  // 81 us above it: a queue
  EXPECT_TRUE(qa_fires_fabric(false, 21'000));  // off: the whole RTT, as before
  // not known (the hosts' own time covered the whole RTT, Engine::on_sack):
  // no sign of a queue in the fabric. Until 2026-12-04 05:50 the whole RTT
  // judged it, and a hold that ran past the SACK's arrival fed a fabric RTT
  // of 1 ns as the smallest seen, so every later ack looked queued.
  EXPECT_FALSE(qa_fires_fabric(true, 0));
  EXPECT_TRUE(qa_fires_fabric(false, 0));  // off: the whole RTT
  // Nothing in flight after the judged ack (the end of a burst, a lone
  // message): no cut on the fabric's delay, however late; the whole RTT
  // (the setting off) still cuts.
  EXPECT_FALSE(qa_fires_fabric(true, 101'000, 0));
  EXPECT_FALSE(qa_fires_fabric(true, 1'000'000, 0));
  EXPECT_TRUE(qa_fires_fabric(false, 101'000, 0));
}

// cc_qa_fabric_on_ecn (on by default): the whole RTT judges until an ECN
// mark comes back, the fabric's part from then on. The judged ack's RTT is
// 200 us, its fabric part 21 us (1 us above the smallest).
bool qa_fires_after_mark(bool on_ecn, bool mark) {
  bool on_fabric = false;
  const bool fired = qa_judged(NsccStart{.init_window = 0, .qa_fabric_on_ecn = on_ecn}, 21'000,
                               64 << 10, mark, &on_fabric);
  if (on_fabric != (on_ecn && mark)) ADD_FAILURE() << "qa_on_fabric " << on_fabric;
  return fired;
}

TEST(NsccQuickAdapt, FabricRttFromTheFirstEcnMark) {
  EXPECT_TRUE(qa_fires_after_mark(true, false));  // no mark yet: the whole RTT
  EXPECT_FALSE(qa_fires_after_mark(true, true));  // marked: the fabric's 1 us
  EXPECT_TRUE(qa_fires_after_mark(false, true));  // off: the whole RTT, marked or not
  EXPECT_TRUE(qa_fires_after_mark(false, false));
}

// A NACK (loss) fires it whatever the delay, counted as a loss cut; a new
// configure starts the counts over.
TEST(NsccQuickAdapt, LossCutsAreCountedApart) {
  CcProfile prof;
  Nscc cc;
  cc.configure(prof, 4096, 2u << 20, kNsccMinTarget, NsccStart{.init_window = 0});
  Time now = 1'000'000;
  cc.on_ack(4096, kBase, false, 0, now);
  cc.on_nack(4096, 0, now + 3 * kBase);
  EXPECT_TRUE(cc.quick_adapted());
  EXPECT_EQ(cc.qa_cuts(), 1u);
  EXPECT_EQ(cc.qa_loss_cuts(), 1u);
  cc.configure(prof, 4096, 2u << 20, kNsccMinTarget, NsccStart{.init_window = 0});
  EXPECT_EQ(cc.qa_cuts(), 0u);
  EXPECT_EQ(cc.qa_loss_cuts(), 0u);
}

// Quick adapt's gate, on one Nscc fed acks directly. After the first ack
// each window (base RTT + target = 40 us) gets `acks` acks of 4 KiB, all 1
// ms late: all but the last within it, the last 60 us after its start, so
// that one closes it. A host's stall delivers such a window at once: the
// acks of a millisecond arrive together (performance.md, "Start-up").
// `fabric`: the fabric's part of each RTT (0: not known).
struct GateRun {
  explicit GateRun(const NsccStart& s, bool mark = false) {
    cc.configure(CcProfile{}, 4096, 2u << 20, kNsccMinTarget, s);
    cc.on_ack(4096, kBase, mark, 64 << 10, now, kBase);  // the base RTT; the first window ends here
  }
  void window(int acks, uint64_t fabric = 0) {
    for (int i = 0; i < acks - 1; i++)
      cc.on_ack(4096, 1'000'000, false, 64 << 10, now + 1000, fabric);
    now += 3 * kBase;
    cc.on_ack(4096, 1'000'000, false, 64 << 10, now, fabric);
  }
  Nscc cc;
  Time now = 1'000'000;
};

// The gate on a window's bytes (cc_qa_rate_gate=0, and every QP once it
// judges the fabric's delay): a window whose acks carried max_cwnd >>
// qa_gate (256 KiB of 2 MiB) or more is not cut, however late its last ack,
// and that is counted (QpStats::cc_qa_gated).
TEST(NsccQuickAdapt, GateClosedIsCounted) {
  GateRun r(NsccStart{.init_window = 0, .qa_rate_gate = false});
  r.window(64);  // 256 KiB
  EXPECT_FALSE(r.cc.quick_adapted());
  EXPECT_EQ(r.cc.qa_cuts(), 0u);
  EXPECT_EQ(r.cc.qa_gated(), 1u);
  EXPECT_EQ(r.cc.cwnd(), uint64_t(2u << 20));
  r.window(63);  // under the gate: cut to what the window achieved
  EXPECT_TRUE(r.cc.quick_adapted());
  EXPECT_EQ(r.cc.qa_cuts(), 1u);
  EXPECT_EQ(r.cc.qa_gated(), 1u);
  EXPECT_EQ(r.cc.cwnd(), uint64_t(63 * 4096));
  r.cc.configure(CcProfile{}, 4096, 2u << 20, kNsccMinTarget, NsccStart{.init_window = 0});
  EXPECT_EQ(r.cc.qa_gated(), 0u);
}

// cc_qa_rate_gate (on by default): while the whole RTT judges, the gate
// judges what a window carried per window length. The 256 KiB that closed
// the gate above took 60 us of a 40 us window: 171 KiB per length, and the
// window is cut to the 256 KiB. A window that acked ignored bytes (the
// flight of the last cut) keeps the bytes gate; the next one is judged per
// length again.
TEST(NsccQuickAdapt, RateGateJudgesBytesPerWindowLength) {
  GateRun r(NsccStart{.init_window = 0});
  r.window(128);  // 512 KiB in 60 us: 341 KiB per length, closed
  EXPECT_EQ(r.cc.qa_cuts(), 0u);
  EXPECT_EQ(r.cc.qa_gated(), 1u);
  EXPECT_EQ(r.cc.cwnd(), uint64_t(2u << 20));
  r.window(64);  // 256 KiB in 60 us: open
  EXPECT_TRUE(r.cc.quick_adapted());
  EXPECT_EQ(r.cc.qa_cuts(), 1u);
  EXPECT_EQ(r.cc.cwnd(), uint64_t(64 * 4096));
  // The cut ignores the 64 KiB then in flight. The next window acks them
  // and 256 KiB more: 320 KiB on the bytes gate, closed. Per length (213
  // KiB) it would "cut" the window up to 320 KiB.
  r.window(80);
  EXPECT_EQ(r.cc.qa_cuts(), 1u);
  EXPECT_EQ(r.cc.qa_gated(), 2u);
  EXPECT_GE(r.cc.cwnd(), uint64_t(64 * 4096));  // not cut (NSCC's increases ran)
  r.window(80);                                 // no ignored bytes: per length again, open
  EXPECT_EQ(r.cc.qa_cuts(), 2u);
  EXPECT_EQ(r.cc.cwnd(), uint64_t(80 * 4096));
}

// From a QP's first ECN mark (cc_qa_fabric_on_ecn) the fabric's delay
// judges, and with it the bytes gate: the window the rate gate cut above
// is not cut. The fabric's part of each late ack is 1 ms.
TEST(NsccQuickAdapt, MarkedQpKeepsTheBytesGate) {
  GateRun r(NsccStart{.init_window = 0}, true);
  ASSERT_TRUE(r.cc.qa_on_fabric());
  r.window(64, 1'000'000);
  EXPECT_EQ(r.cc.qa_cuts(), 0u);
  EXPECT_EQ(r.cc.qa_gated(), 1u);
  r.window(63, 1'000'000);
  EXPECT_EQ(r.cc.qa_cuts(), 1u);
  EXPECT_EQ(r.cc.cwnd(), uint64_t(63 * 4096));
}

// A window of one packet on a host whose engine threads sleep between its
// packets: the base RTT is 5 us (both threads awake once), every later round
// trip holds a wake-up (55 us), above quick adapt's trigger (4 x 5 us). Each
// ack ends a window that achieved the one packet, so quick adapt's "cut" to
// it left the window where it was and skipped the ack's increase: the
// window stayed at one packet for good (1 of 100 start-ups at 4 x 500
// Mbit/s, 2026-12-05: 0.345 of capacity). A "cut" that would leave the
// window as it is is no cut; the ack's increase runs and the window opens.
TEST(NsccQuickAdapt, WindowOfOnePacketIsNotHeldThere) {
  Nscc cc;
  cc.configure(CcProfile{}, 4096, 2u << 20, kNsccMinTarget, NsccStart{});
  Time now = 1'000'000;
  cc.on_ack(4096, 5'000, false, 64 << 10, now);  // the base RTT
  now += 60'000;
  cc.on_ack(4096, 55'000, false, 0, now);  // a window of one late ack: cut to it
  ASSERT_TRUE(cc.quick_adapted());
  ASSERT_EQ(cc.cwnd(), 4096u);
  int open = 0;
  for (int i = 0; i < 50; i++) {
    // one packet per round trip, each ack 55 us after its packet (this
    // feed does not send more when the window opens: the next ack, one
    // packet in a window opened wider, is a real cut again)
    now += 60'000;
    const uint64_t before = cc.cwnd();
    cc.on_ack(4096, 55'000, false, 0, now);
    if (before == 4096) {
      EXPECT_FALSE(cc.quick_adapted()) << "ack " << i;
    }
    if (cc.cwnd() >= 16 * 4096) open++;
  }
  EXPECT_GE(open, 20);  // every other ack: opened by the fair increase
}

TEST(NsccQuickAdapt, OneLateAckFiresItByDefault) {
  EXPECT_FALSE(qa_fires(0, false, kBase, kBase));
  EXPECT_FALSE(qa_fires(0, false, kBase, kBase + 70'000));  // under 4 x target
  EXPECT_TRUE(qa_fires(0, false, kBase, kBase + 100'000));
}

// cc_qa_floor: a delay under the floor no longer fires it; one above still
// does (a floor, not an off switch).
TEST(NsccQuickAdapt, FloorRaisesTheDelayTrigger) {
  EXPECT_FALSE(qa_fires(200'000, false, kBase, kBase + 100'000));
  EXPECT_TRUE(qa_fires(200'000, false, kBase, kBase + 300'000));
  EXPECT_TRUE(qa_fires(50'000, false, kBase, kBase + 100'000));  // 4 x target is higher
}

// cc_qa_standing: one late ack (a host's wake-up) does not fire it; a
// window in which every ack was late (a queue that stands) does.
TEST(NsccQuickAdapt, StandingNeedsEveryAckOfTheWindowLate) {
  EXPECT_FALSE(qa_fires(0, true, kBase, kBase + 100'000));
  EXPECT_FALSE(qa_fires(0, true, kBase + 100'000, kBase));
  EXPECT_TRUE(qa_fires(0, true, kBase + 100'000, kBase + 100'000));
}

}  // namespace
}  // namespace mrc::testing
