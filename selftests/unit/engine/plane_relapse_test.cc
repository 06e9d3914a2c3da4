// The plane relapse back-off (issue 21; PathParams::plane_relapse_window): a
// plane retired as a whole again soon after it came back is held off its
// probes longer each time, so a plane that flaps faster than a probe round
// stops costing the QP its goodput; a plane that heals for good comes back
// within the documented time; a fault-free run never backs off.
#include <gtest/gtest.h>

#include "engine/fixture.hpp"
#include "engine/harness.hpp"

namespace mrc::testing {
namespace {

using namespace core;

constexpr uint8_t kFlapPort = 2;
constexpr Time kBin = 1'000'000;  // "in use": the plane carried data in this 1 ms bin

struct FlapRun {
  QpStats st;
  Time took = 0;
  bool ok = false;
  // Data packets host 0 sent, on the flapping plane and on all planes, while
  // it flapped; 1 ms bins (of the flapping time) in which the plane carried
  // any data.
  uint64_t flap_pkts = 0, all_pkts = 0, bins_used = 0, bins = 0;
  uint64_t early_pkts = 0;  // data packets sent in the first 3 ms of the flapping
  // After the heal: the first data packet on the plane (0: none), and the
  // plane's share of the data sent from `heal + settle` on.
  Time back_after = 0;
  uint64_t late_flap = 0, late_all = 0;
};

struct FlapSpec {
  Time period = 0, down = 0;  // plane 2 drops everything, both ways, `down` of every `period`
  Time heal = kNever;         // ... until then (from the start)
  Time settle = 0;            // the late share is counted from heal + settle
  double uniform_loss = 0;    // every plane drops this fraction (seeded)
  double gbps = 0.25;         // per plane
  uint32_t mtu = 4096;
  uint32_t max_cwnd = 0;  // NSCC's maximum window (0: the default)
  Time flap_from = 0;     // the flapping starts then
  // Until then, an RTT spike: SACKs take 1 ms longer; in its first half,
  // every 64th data packet (the first transmission) 2 ms longer, so it is
  // judged lost and arrives after its retransmission (a spurious
  // retransmission, all of them within the spike).
  Time spike = 0;
  bool reo_extra_cap = true;  // EngineConfig::reo_extra_cap
  // A stall of host 1 from stall_at for `stall`: what it sends meanwhile
  // leaves when the stall ends.
  Time stall_at = 0, stall = 0;
  Time latency = 5'000;  // one way (PairOptions::latency)
  // Scheduling waits at the receiving host (host_wakeups): half the frames
  // wait wait_min + [0, wait_spread). 0: none.
  Time wait_min = 0;
  uint32_t wait_spread = 0;
};

// Host 0 writes `bytes` to host 1 and waits for it: whether it completed
// with the bytes intact, the time since t0, and host 0's QP counters.
template <class Run>
void write_and_wait(Fixture& f, size_t bytes, Time t0, Run& r) {
  EXPECT_TRUE(f.write(1, 0, bytes).ok());
  r.ok = f.wait_sends(1, 60'000'000'000) && f.swc[0].status == kWcSuccess && f.same(0, bytes);
  r.took = f.p.now - t0;
  r.st = *f.p.e(0).qp_stats(f.q0);
}

// `bytes` over 4 planes of 0.25 Gbit/s (about 8.4 ms per MiB).
FlapRun run(size_t bytes, const FlapSpec& s, PathParams paths = PathParams{}) {
  PairOptions o;
  o.cfg.paths = paths;
  o.gbps = s.gbps;
  o.mtu = s.mtu;
  o.latency = s.latency;
  if (s.max_cwnd) o.cfg.default_cc.nscc.max_cwnd = s.max_cwnd;
  o.cfg.reo_extra_cap = s.reo_extra_cap;
  Fixture f(bytes, o);
  const Time t0 = f.p.now;
  FlapRun r;
  Time last_bin = kNever;
  Rng rng;
  rng.reseed(7);
  auto waits = host_wakeups(11, s.latency, s.wait_min, s.wait_spread);
  f.p.hook = [&](int from, uint8_t port, std::vector<uint8_t>& fr, Time now) {
    Hook h;
    if (s.wait_spread) h = waits(from, port, fr, now);
    const Time t = now - t0;
    const bool flapping = s.period && t >= s.flap_from && t < s.heal;
    if (flapping && port == kFlapPort && (t - s.flap_from) % s.period < s.down) h.drop = true;
    if (s.uniform_loss > 0 && rng.below(1'000'000) < uint32_t(s.uniform_loss * 1e6)) h.drop = true;
    if (from != 0 && t < s.spike) h.extra_delay = 1'000'000;
    if (from != 0 && s.stall && t >= s.stall_at && t < s.stall_at + s.stall)
      h.extra_delay = s.stall_at + s.stall - t;
    if (from != 0) return h;
    const auto k = parse_or_die(fr);
    if (!codec::is_data_opcode(k.bth.opcode)) return h;
    if (2 * t < s.spike && !k.bth.rtx && k.bth.psn % 64 == 17) h.extra_delay = 2'000'000;
    if (flapping) {
      r.all_pkts++;
      r.early_pkts += t - s.flap_from < 3'000'000;
      if (port == kFlapPort) {
        r.flap_pkts++;
        if (t / kBin != last_bin) {
          last_bin = t / kBin;
          r.bins_used++;
        }
      }
    } else if (s.heal != kNever && t >= s.heal) {
      if (port == kFlapPort && !r.back_after) r.back_after = t - s.heal + 1;
      if (t >= s.heal + s.settle) {
        r.late_all++;
        r.late_flap += port == kFlapPort;
      }
    }
    return h;
  };
  EXPECT_TRUE(f.write(1, 0, bytes).ok());
  r.ok = f.wait_sends(1, 60'000'000'000) && f.swc[0].status == kWcSuccess && f.same(0, bytes);
  r.took = f.p.now - t0;
  r.bins = (std::min(r.took, s.period ? s.heal : 0) + kBin - 1) / kBin;
  r.st = *f.p.e(0).qp_stats(f.q0);
  return r;
}

void print(const char* what, const FlapRun& r, const FlapRun& clean) {
  std::printf(
      "%-34s %.1f ms (goodput %.3f of clean), plane 2: %.3f of the data, in use in %llu of %llu "
      "ms; plane retirements %llu, plane relapses %llu (held %.1f ms), EVs readmitted %llu, "
      "rtx %llu, ACK timeouts %llu\n",
      what, r.took / 1e6, double(clean.took) / double(r.took),
      r.all_pkts ? double(r.flap_pkts) / double(r.all_pkts) : 0.0, (unsigned long long)r.bins_used,
      (unsigned long long)r.bins, (unsigned long long)r.st.plane_suspects,
      (unsigned long long)r.st.plane_relapses, r.st.plane_hold_ns / 1e6,
      (unsigned long long)r.st.ev_readmitted, (unsigned long long)r.st.tx_rtx_pkts,
      (unsigned long long)r.st.timeouts);
}

// The relapse back-off alone: plane suspicion as soon as its rule allows,
// also on a silent plane (PathParams::silent_suspect_wait, which by default
// holds a flapping plane's suspicion back, and with it the back-off).
PathParams relapse() {
  PathParams p;
  p.silent_suspect_wait = 0;
  return p;
}

PathParams off() {
  PathParams p = relapse();
  p.plane_relapse_window = 0;
  return p;
}

// Plane 2 down 2.5 ms of every 5 ms (and 10 of every 20) for the whole
// transfer: without the back-off it is readmitted in nearly every up phase
// and retired in the next down phase; with it, it carries data in a small
// fraction of the milliseconds, and the QP keeps at least the clean goodput
// less that plane's quarter.
TEST(PlaneRelapse, FlappingPlaneIsUsedABoundedFractionOfTheTime) {
  constexpr size_t kBytes = 64 << 20;  // about 0.55 s clean
  const FlapRun clean = run(kBytes, {});
  ASSERT_TRUE(clean.ok);
  EXPECT_EQ(clean.st.plane_relapses, 0u);
  for (const FlapSpec& s : {FlapSpec{5'000'000, 2'500'000}, FlapSpec{20'000'000, 10'000'000}}) {
    const FlapRun without = run(kBytes, s, off());
    const FlapRun with = run(kBytes, s, relapse());
    const FlapRun held = run(kBytes, s);
    ASSERT_TRUE(held.ok);
    ASSERT_TRUE(without.ok);
    ASSERT_TRUE(with.ok);
    char what[64];
    std::snprintf(what, sizeof what, "flap %.1f/%.0f ms, no back-off", s.down / 1e6,
                  s.period / 1e6);
    print(what, without, clean);
    std::snprintf(what, sizeof what, "flap %.1f/%.0f ms, back-off", s.down / 1e6, s.period / 1e6);
    print(what, with, clean);
    std::snprintf(what, sizeof what, "flap %.1f/%.0f ms, default", s.down / 1e6, s.period / 1e6);
    print(what, held, clean);
    EXPECT_GT(with.st.plane_relapses, 3u);
    EXPECT_GT(with.st.plane_hold_ns, 0u);
    EXPECT_EQ(without.st.plane_relapses, 0u);
    // Used in at most a fifth of the milliseconds (6% and 14% here: the
    // holds grow to plane_relapse_max, and in a run of 0.7 s the first,
    // short ones weigh), against most of its up phases without the back-off.
    EXPECT_LT(5 * with.bins_used, with.bins);
    EXPECT_LT(2 * with.bins_used, without.bins_used);
    EXPECT_LT(2 * with.st.plane_suspects, without.st.plane_suspects);
    // Goodput >= clean goodput x 3/4 (the no-fault control less the
    // flapping plane's share): time <= 4/3 of the clean time.
    EXPECT_LE(3 * with.took, 4 * clean.took);
    // By default a silent plane's suspicion waits silent_suspect_wait (12
    // ms), longer than a down phase here: no retirement and no hold; the
    // silent pace alone keeps the plane's packets few while it is down, and
    // it is back at its first paced packet in each up phase. Faster than
    // either (0.871 and 0.873 of clean when written, 0.871 and 0.872 since
    // the dark plane's credit, against 0.754 and 0.775 with the back-off,
    // 0.846 and 0.853 without).
    EXPECT_EQ(held.st.plane_suspects, 0u);
    EXPECT_GT(held.st.plane_silences, 10u);
    EXPECT_LT(held.took, with.took);
    EXPECT_LT(held.took, without.took);
  }
}

// The flaps above at a software host's round trip: 4 planes of 1 Gbit/s,
// 100 us each way (the veth fabric's hosts take about 200 us per round
// trip), without and with scheduling waits of 12.5-62.5 us for half the
// frames (the host model of nscc_host_test, smaller; the clean run still
// moves 3.8 Gbit/s). The QP keeps at least 0.95 of the capacity that
// remains (the clean goodput less the flapping plane's half of its
// quarter: issue 21's target). So a round trip of that length does not by
// itself cost a flap's goodput when the planes, not the window, hold the
// QP, and the silent pace and the dark plane's credit are what keep it
// (without them 0.87-0.94). (When quick adapt holds the window, as with a 10 us round trip and
// longer waits, the QP's rate scales with its planes and a flap costs
// about the plane's share: resilience.md, "Partial faults".)
TEST(PlaneRelapse, AFlapAtASoftwareHostsRoundTripKeepsWhatRemains) {
  constexpr size_t kBytes = 64 << 20;  // about 0.14 s clean
  for (const Time wait : {Time(0), Time(12'500)}) {
    FlapSpec c;
    c.gbps = 1;
    c.latency = 100'000;
    c.wait_min = wait;
    c.wait_spread = wait ? 50'000 : 0;
    const FlapRun clean = run(kBytes, c);
    ASSERT_TRUE(clean.ok);
    std::printf("clean, waits %s: %.2f Gbit/s\n", wait ? "yes" : "no",
                double(kBytes) * 8 / double(clean.took));
    for (const Time down : {Time(2'500'000), Time(10'000'000)}) {
      FlapSpec s = c;
      s.period = 2 * down;
      s.down = down;
      // What buys it: without the silent pace and the dark plane's credit
      // the flapping plane's losses hold the window.
      PathParams bare;
      bare.silent_plane_pace = false;
      bare.dark_plane_credit = false;
      const FlapRun r = run(kBytes, s);
      const FlapRun without = run(kBytes, s, bare);
      ASSERT_TRUE(r.ok);
      ASSERT_TRUE(without.ok);
      const double kept = double(clean.took) / double(r.took) / 0.875;
      const double kept_without = double(clean.took) / double(without.took) / 0.875;
      char what[96];
      std::snprintf(what, sizeof what, "flap %.1f/%.0f ms, 200 us RTT, waits %s: %.3f of remaining",
                    s.down / 1e6, s.period / 1e6, wait ? "yes" : "no", kept);
      print(what, r, clean);
      std::snprintf(what, sizeof what, "  without the pace and the credit: %.3f", kept_without);
      print(what, without, clean);
      // 0.984-0.998 when written (the 2.5/5 ms flap the lowest); 0.867-0.941
      // without the two rules.
      EXPECT_GE(kept, 0.95);
      EXPECT_EQ(r.st.timeouts, 0u);
      EXPECT_LT(kept_without + 0.03, kept);
    }
  }
}

// The plane flaps for 200 ms, then heals for good: it is back within the
// hold then in force (at most plane_relapse_max) plus a probe round
// (probe_max, and a few RTTs), and carries its quarter again.
TEST(PlaneRelapse, APlaneThatHealsComesBackWithinTheDocumentedTime) {
  constexpr size_t kBytes = 160 << 20;  // about 1.35 s clean
  const PathParams p;
  const Time bound = p.plane_relapse_max + p.probe_max + 5'000'000;
  FlapSpec s{5'000'000, 2'500'000, 200'000'000};
  s.settle = bound;
  const FlapRun clean = run(kBytes, {});
  const FlapRun r = run(kBytes, s, relapse());
  ASSERT_TRUE(clean.ok);
  ASSERT_TRUE(r.ok);
  print("flap 2.5/5 ms for 200 ms, then healed", r, clean);
  std::printf("back %.2f ms after the heal (bound %.0f ms); its share from then on %.3f\n",
              r.back_after / 1e6, bound / 1e6,
              r.late_all ? double(r.late_flap) / double(r.late_all) : 0.0);
  EXPECT_GT(r.st.plane_relapses, 3u);
  ASSERT_GT(r.back_after, 0);
  EXPECT_LE(r.back_after, bound);
  ASSERT_GT(r.late_all, 1000u);
  EXPECT_GT(double(r.late_flap) / double(r.late_all), 0.2);
}

// A silent plane (PathParams::silent_plane_pace). Plane 2 drops everything
// for the first 20 ms, then heals. Plane suspicion is off, as it is in
// effect on a host whose stalls make the delivery-delay tail longer than
// the fault (it waits that long). Without the pace a quarter of the spray
// keeps going to the dead plane and is lost; with it, once a loss showed
// the plane silent, the plane gets a packet per RTT, and the rest goes to
// the other planes. Back within a few RTTs of the heal, it carries its
// quarter again. (The goodput is the same here: the simulator's window is
// large and its RTT steady, so the rule across planes judges the lost
// packets soon and they hold little of the window. resilience 19 on veth
// shows what the pace buys a host whose window is small and RTT jittery.)
TEST(PlaneRelapse, ASilentPlaneIsPacedUntilItDeliversAgain) {
  constexpr size_t kBytes = 16 << 20;
  PathParams on = off();
  on.plane_suspect_losses = 0;
  PathParams no = on;
  no.silent_plane_pace = false;
  no.quiet_plane_pace = false;
  FlapSpec s{1'000'000'000, 20'000'000, 20'000'000};
  s.settle = 5'000'000;
  s.gbps = 1;
  s.mtu = 1024;
  FlapSpec none = s;
  none.period = 0;
  const FlapRun clean = run(kBytes, none);
  const FlapRun with = run(kBytes, s, on);
  const FlapRun without = run(kBytes, s, no);
  ASSERT_TRUE(clean.ok);
  ASSERT_TRUE(with.ok);
  ASSERT_TRUE(without.ok);
  print("dead 20 ms, paced", with, clean);
  print("dead 20 ms, not paced", without, clean);
  std::printf(
      "paced: %llu silences, %llu paced packets, %llu losses judged sooner, srtt %.0f us, back "
      "%.2f ms after the heal, then %.3f of the data\n",
      (unsigned long long)with.st.plane_silences, (unsigned long long)with.st.silent_paced_pkts,
      (unsigned long long)with.st.silent_plane_losses, with.st.srtt_ns / 1e3, with.back_after / 1e6,
      double(with.late_flap) / double(with.late_all));
  EXPECT_EQ(without.st.plane_silences, 0u);
  EXPECT_GE(with.st.plane_silences, 1u);
  EXPECT_GT(with.st.silent_paced_pkts, 0u);
  // The dead plane's share of the data sent while it was dead: 0.146
  // against 0.250 when written (here a packet takes 8 us, an RTT about
  // 20-40: the pace allows a packet per 2-5 packet times; on the veth
  // fabric's hosts, 24 us and 200-300 us). The retransmissions: 1163
  // against 2263.
  EXPECT_LT(double(with.flap_pkts) / double(with.all_pkts), 0.2);
  EXPECT_GT(double(without.flap_pkts) / double(without.all_pkts), 0.24);
  EXPECT_LT(5 * with.st.tx_rtx_pkts, 3 * without.st.tx_rtx_pkts);
  EXPECT_LE(with.took, without.took + without.took / 100);
  ASSERT_GT(with.back_after, 0);
  EXPECT_LT(with.back_after, 1'000'000);
  EXPECT_GT(double(with.late_flap) / double(with.late_all), 0.2);
}

// A silent plane's suspicion waits (PathParams::silent_suspect_wait, 12
// ms): a plane dead for 8 ms is paced and never retired; one dead for good
// is retired once the wait is over, and its EVs probed as before.
TEST(PlaneRelapse, ASilentPlaneIsRetiredOnlyAfterTheWait) {
  constexpr size_t kBytes = 32 << 20;  // about 0.28 s clean
  const FlapSpec briefly{1'000'000'000, 8'000'000};
  const FlapSpec for_good{1'000'000'000, 1'000'000'000};
  const FlapRun b = run(kBytes, briefly);
  const FlapRun b_now = run(kBytes, briefly, relapse());
  const FlapRun g = run(kBytes, for_good);
  for (const FlapRun* r : {&b, &b_now, &g}) ASSERT_TRUE(r->ok);
  print("down 8 ms once, default", b, b);
  print("down 8 ms once, no wait", b_now, b);
  print("down for good, default", g, b);
  EXPECT_EQ(b.st.plane_suspects, 0u);
  EXPECT_GE(b.st.plane_silences, 1u);
  EXPECT_GE(b_now.st.plane_suspects, 1u);
  EXPECT_GE(g.st.plane_suspects, 1u);
  EXPECT_GT(g.st.ev_assumed_bad, 0u);
}

// A quiet plane (PathParams::quiet_plane_pace) with a small window (a
// software host's quick adapt holds its window at a few packets): plane 2
// drops everything 2.5 ms of every 5 ms; the silent pace and plane
// suspicion are off, so only the quiet rule acts. From the first SACK that
// shows packets sent later on the other planes delivered, the plane gets a
// packet per RTT, and it is back at the first one delivered. Nothing is
// judged lost sooner for it. When written: the plane's share 0.209 against
// 0.242, 169 retransmissions against 262, 20.3 against 21.1 ms; since the
// dark plane's credit 0.211 against 0.250, 187 (186 since sack_plane_gap)
// against 300, 19.7 ms each. (The simulator's RTT is steady, so the rule
// across planes judges the lost packets within a few RTTs anyway; on the
// veth fabric's hosts it waits about 1 ms, and resilience 19 shows what the
// pace buys there: design.md, "A quiet plane".)
TEST(PlaneRelapse, AQuietPlaneIsPacedFromTheFirstSack) {
  constexpr size_t kBytes = 8 << 20;
  FlapSpec s{5'000'000, 2'500'000};
  s.gbps = 1;
  PathParams on;
  on.silent_plane_pace = false;
  on.plane_suspect_losses = 0;  // the plane is never retired: the pace alone
  PathParams no = on;
  no.quiet_plane_pace = false;
  const FlapRun with = run(kBytes, s, on);
  const FlapRun without = run(kBytes, s, no);
  for (const FlapRun* r : {&with, &without}) ASSERT_TRUE(r->ok);
  print("flap 2.5/5 ms, 32 KiB, quiet pace", with, without);
  print("flap 2.5/5 ms, 32 KiB, no pace", without, without);
  std::printf("quiet pace: %llu quiet planes, %llu paced packets\n",
              (unsigned long long)with.st.plane_quiets,
              (unsigned long long)with.st.silent_paced_pkts);
  EXPECT_EQ(without.st.plane_quiets, 0u);
  EXPECT_EQ(without.st.silent_paced_pkts, 0u);
  EXPECT_GT(with.st.plane_quiets, 5u);
  EXPECT_GT(with.st.silent_paced_pkts, 0u);
  EXPECT_EQ(with.st.plane_silences, 0u);
  EXPECT_EQ(with.st.silent_plane_losses, 0u);  // nothing judged sooner
  EXPECT_LT(double(with.flap_pkts) / double(with.all_pkts),
            double(without.flap_pkts) / double(without.all_pkts));
  EXPECT_LE(with.st.tx_rtx_pkts, without.st.tx_rtx_pkts);
  EXPECT_LE(with.took, without.took + without.took / 50);
}

// No plane relapse, no hold, without a fault; nor with 1% loss on every plane;
// nor for a plane that fails once (20 ms) and comes back.
TEST(PlaneRelapse, NoBackOffWithoutAFlappingPlane) {
  constexpr size_t kBytes = 32 << 20;
  const FlapRun clean = run(kBytes, {});
  ASSERT_TRUE(clean.ok);
  FlapSpec lossy;
  lossy.uniform_loss = 0.01;
  const FlapRun loss = run(kBytes, lossy);
  ASSERT_TRUE(loss.ok);
  const FlapRun once = run(kBytes, FlapSpec{1'000'000'000, 20'000'000});
  ASSERT_TRUE(once.ok);
  print("clean", clean, clean);
  print("1% loss on every plane", loss, clean);
  print("plane 2 down 20 ms once", once, clean);
  for (const FlapRun* r : {&clean, &loss, &once}) {
    EXPECT_EQ(r->st.plane_relapses, 0u);
    EXPECT_EQ(r->st.plane_hold_ns, 0u);
  }
  EXPECT_EQ(clean.st.plane_suspects, 0u);
  EXPECT_LE(once.st.plane_suspects, 1u);
  // Nor is a plane silent without a fault (silent_plane_pace).
  std::printf("plane silences: clean %llu, 1%% loss %llu, down once %llu\n",
              (unsigned long long)clean.st.plane_silences,
              (unsigned long long)loss.st.plane_silences,
              (unsigned long long)once.st.plane_silences);
  EXPECT_EQ(clean.st.plane_silences, 0u);
}

// A plane that passes probes but loses every data packet (the shape of an
// MTU blackhole), with small windows (quick adapt cuts a software host's
// window to a packet or a few): a window's packets on that plane are lost
// and nothing sent later is delivered to judge them, while the answers to
// the plane's EV probes keep coming. Each such answer counts as a delivery
// of what was sent before it (EngineConfig::probe_delivery), so the RACK
// timer judges them without waiting for a tail-loss probe. On a real host
// under a 2.5/5 ms flap (resilience 19) the answers kept the tail-loss probe
// from coming due at all: 8-11 ACK timeouts of 16.8 ms in 3 s, none with
// the rule. Here the tail-loss probes still come, and the rule saves time.
struct BlackholeRun {
  QpStats st;
  Time took = 0;
  bool ok = false;
};

BlackholeRun data_blackhole(uint32_t max_cwnd, bool probe_delivery) {
  PairOptions o;
  o.cfg.paths.plane_relapse_window = 0;
  // The silent-plane rule judges these losses too; off, the probes' answers alone.
  o.cfg.paths.silent_plane_pace = false;
  o.cfg.default_cc.nscc.max_cwnd = max_cwnd;
  o.cfg.probe_delivery = probe_delivery;
  o.gbps = 0.25;
  o.mtu = 4096;
  o.timeout = 14;  // 16.8 ms
  constexpr size_t kBytes = 2 << 20;
  Fixture f(kBytes, o);
  f.p.hook = [&](int from, uint8_t port, std::vector<uint8_t>& fr, Time) {
    Hook h;
    if (from == 0 && port == kFlapPort) h.drop = codec::is_data_opcode(parse_or_die(fr).bth.opcode);
    return h;
  };
  BlackholeRun r;
  const Time t0 = f.p.now;
  write_and_wait(f, kBytes, t0, r);
  return r;
}

TEST(PlaneRelapse, ProbeAnswersJudgeTheLossesOfAWindowOnAPlaneThatLosesData) {
  for (const uint32_t cwnd : {4096u, 8192u, 16384u}) {
    const BlackholeRun with = data_blackhole(cwnd, true);
    const BlackholeRun without = data_blackhole(cwnd, false);
    ASSERT_TRUE(with.ok);
    ASSERT_TRUE(without.ok);
    std::printf(
        "window %5u B: probe answers as deliveries %.1f ms, %llu tail-loss probes; without "
        "%.1f ms, %llu\n",
        cwnd, with.took / 1e6, (unsigned long long)with.st.tlp_probes, without.took / 1e6,
        (unsigned long long)without.st.tlp_probes);
    EXPECT_EQ(with.st.timeouts, 0u);
    // 94.8 / 121.3, 47.0 / 59.6, 26.8 / 31.7 ms when written
    EXPECT_LT(10 * with.took, 9 * without.took);
    EXPECT_LT(with.st.tlp_probes, without.st.tlp_probes);
  }
}

// What spurious retransmissions taught the reordering windows counts at
// most the smoothed RTT now (EngineConfig::reo_extra_cap). An RTT spike of
// 1 ms at the start, with spurious retransmissions in it, teaches about
// 1 ms; then plane 2 flaps 2.5 ms of every 5 ms at an RTT of 60-80 us.
// Counted in full, that 1 ms holds back the RACK timer's judgement of
// every packet lost on the plane, past this harness's ACK timeout (1.05
// ms): each down phase ended in an ACK timeout (on the veth fabric, whose
// ACK timeout is longer, in tail-loss probes: design.md, "What reordering
// taught is capped at the RTT"). The window is large here, so the time to
// finish is the same either way.
TEST(PlaneRelapse, ReorderingLearnedInAnRttSpikeCountsAtMostTheRttNow) {
  constexpr size_t kBytes = 48 << 20;
  FlapSpec s{5'000'000, 2'500'000};
  s.gbps = 1;
  s.spike = 20'000'000;
  s.flap_from = 40'000'000;
  FlapSpec full = s;
  full.reo_extra_cap = false;
  const FlapRun capped = run(kBytes, s);
  const FlapRun counted = run(kBytes, full);
  for (const FlapRun* r : {&capped, &counted}) ASSERT_TRUE(r->ok);
  print("spike, flap 2.5/5 ms, capped", capped, counted);
  print("spike, flap 2.5/5 ms, in full", counted, counted);
  for (const FlapRun* r : {&capped, &counted})
    std::printf("learned %.0f us, srtt %.0f us, spurious rtx %llu, tail-loss probes %llu\n",
                r->st.reo_extra_ns / 1e3, r->st.srtt_ns / 1e3,
                (unsigned long long)r->st.spurious_rtx, (unsigned long long)r->st.tlp_probes);
  // The spike taught both as much; only what counts of it differs.
  for (const FlapRun* r : {&capped, &counted}) {
    EXPECT_GE(r->st.reo_extra_ns, 500'000u);
    EXPECT_LT(r->st.srtt_ns, 250'000u);
  }
  // When written: 2 ACK timeouts (both in the spike) against 17.
  EXPECT_LE(capped.st.timeouts, 3u);
  EXPECT_GE(counted.st.timeouts, capped.st.timeouts + 8);
}

// A dark plane's bytes do not hold the window (PathParams::dark_plane_credit).
// Plane 2 is blackholed for good 5 ms into a transfer whose window is
// small (a software host's quick adapt keeps it at a few packets), right
// after host 1 stalled for 2 ms (which the smoothed RTT and its variation
// take in, and with them the rule across planes' wait). Until that rule
// judges them, the plane's packets in flight held the window, and the QP
// sent nothing more on its three good planes.
TEST(PlaneRelapse, ADarkPlanesBytesDoNotHoldTheWindow) {
  constexpr size_t kBytes = 16 << 20;
  FlapSpec s{1'000'000'000, 1'000'000'000};
  s.flap_from = 5'000'000;
  s.gbps = 1;
  s.max_cwnd = 32768;
  s.stall_at = 3'000'000;
  s.stall = 2'000'000;
  // Without the SACK rule (sack_plane_gap): acknowledgements that avoid the
  // dead plane release the window sooner with or without the credit (244
  // and 236 packets here), which hides what the credit alone does.
  PathParams yes;
  yes.sack_plane_gap = 0;
  PathParams no = yes;
  no.dark_plane_credit = false;
  const FlapRun with = run(kBytes, s, yes);
  const FlapRun without = run(kBytes, s, no);
  for (const FlapRun* r : {&with, &without}) ASSERT_TRUE(r->ok);
  print("blackhole at 5 ms, 32 KiB, credit", with, without);
  print("blackhole at 5 ms, 32 KiB, no credit", without, without);
  std::printf("first 3 ms of the fault: %llu data packets sent with the credit, %llu without\n",
              (unsigned long long)with.early_pkts, (unsigned long long)without.early_pkts);
  // When written: 215 against 190 (of about 275 the three good planes
  // carry in 3 ms), 47.9 against 48.2 ms in all.
  EXPECT_GE(double(with.early_pkts), 1.05 * double(without.early_pkts));
  EXPECT_LE(with.took, without.took);
}

// Acknowledgements avoid a plane that delivers nothing
// (PathParams::sack_plane_gap). Plane 2 is blackholed both ways from
// 5 ms on: the responder's SACKs rotated over every plane that is up, so a
// quarter of them went into the blackhole. Now they rotate over the planes
// that delivered data lately, and every eighth over all of them.
struct AckRun {
  bool ok = false;
  Time took = 0;
  uint64_t ctrl = 0, ctrl_dead = 0;  // host 1's control frames after the fault, on plane 2
  QpStats st;
};

AckRun ack_run(size_t bytes, uint32_t sack_gap, uint32_t fwd_dead, uint32_t rev_dead,
               Time from = 5'000'000) {
  PairOptions o;
  o.cfg.paths.sack_plane_gap = sack_gap;
  o.gbps = 0.25;
  o.mtu = 4096;
  Fixture f(bytes, o);
  const Time t0 = f.p.now;
  AckRun r;
  f.p.hook = [&](int from_host, uint8_t port, std::vector<uint8_t>& fr, Time now) {
    Hook h;
    if (now - t0 < from) return h;
    const bool data = codec::is_data_opcode(parse_or_die(fr).bth.opcode);
    if (from_host == 1 && !data) {
      r.ctrl++;
      r.ctrl_dead += port == kFlapPort;
    }
    h.drop = ((from_host == 0 ? fwd_dead : rev_dead) >> port & 1) != 0;
    return h;
  };
  write_and_wait(f, bytes, t0, r);
  return r;
}

TEST(PlaneRelapse, AcksAvoidAPlaneThatDeliversNothing) {
  constexpr size_t kBytes = 16 << 20;
  constexpr uint32_t kDead = 1u << kFlapPort;
  const AckRun now = ack_run(kBytes, PathParams{}.sack_plane_gap, kDead, kDead);
  const AckRun before = ack_run(kBytes, 0, kDead, kDead);
  for (const AckRun* r : {&now, &before}) {
    ASSERT_TRUE(r->ok);
    ASSERT_GT(r->ctrl, 100u);
    std::printf(
        "plane 2 dead both ways: %llu of %llu SACKs/NACKs sent into it, %.2f ms, "
        "ACK timeouts %llu\n",
        (unsigned long long)r->ctrl_dead, (unsigned long long)r->ctrl, r->took / 1e6,
        (unsigned long long)r->st.timeouts);
  }
  // When written: 343 of 1373 before (a quarter), 86 of 1378 now (every
  // eighth rotates over all four planes; in this rhythm it lands on plane 2
  // every other time). The time is the same here: the simulated hosts have
  // no time of their own for a late acknowledgement to add to the RTT.
  EXPECT_GT(5 * before.ctrl_dead, before.ctrl);
  EXPECT_LT(10 * now.ctrl_dead, now.ctrl);
  EXPECT_LE(now.took, before.took);
}

// The safety valve: data passes only plane 1, and plane 1 loses everything
// towards the requester (the other three planes the other way round). The
// planes that delivered data lately are then exactly the one whose
// acknowledgements never arrive; every eighth control packet still rotates
// over all planes, and the write completes, its data intact.
TEST(PlaneRelapse, AcksStillReachARequesterWhoseOnlyForwardPlaneLosesThem) {
  constexpr size_t kBytes = 1 << 20;
  const AckRun r = ack_run(kBytes, PathParams{}.sack_plane_gap, 0b11100, 0b00010, 0);
  const AckRun all = ack_run(kBytes, 0, 0b11100, 0b00010, 0);
  ASSERT_TRUE(r.ok);
  ASSERT_TRUE(all.ok);
  std::printf(
      "forward only on plane 1, reverse only on 2-4: %.2f ms (%.2f rotating over all), "
      "ACK timeouts %llu (%llu)\n",
      r.took / 1e6, all.took / 1e6, (unsigned long long)r.st.timeouts,
      (unsigned long long)all.st.timeouts);
}

}  // namespace
}  // namespace mrc::testing
