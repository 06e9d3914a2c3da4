// A path that answers probes but loses data (issue 21; a switch with a lower
// MTU inside a plane, issue 22): probes readmit its EVs, the next data packet
// retires them again. The back-off on relapse keeps that cycle rare.
#include <gtest/gtest.h>

#include "engine/fixture.hpp"
#include "engine/harness.hpp"

namespace mrc::testing {
namespace {

using namespace core;

struct BlackholeRun {
  QpStats st;
  Time took = 0;
  bool ok = false;
};

// 32 MiB over 4 planes of 0.25 Gbit/s (about 0.3 s); plane 2 drops every data packet (both
// ways nothing else is touched: probes and SACKs pass) when `hole`.
// `plane_window`: PathParams::plane_relapse_window (0: the plane relapse
// back-off off, so the EVs' own back-off is what is measured).
BlackholeRun run_blackhole(bool hole, Time relapse_max = PathParams{}.probe_relapse_max,
                           Time plane_window = 0) {
  PairOptions o;
  o.cfg.paths.probe_relapse_max = relapse_max;
  o.cfg.paths.plane_relapse_window = plane_window;
  o.gbps = 0.25;
  o.mtu = 4096;
  Fixture f(32 << 20, o);
  f.p.hook = [&](int from, uint8_t port, std::vector<uint8_t>& fr, Time) {
    Hook h;
    if (hole && from == 0 && port == 2) {
      auto k = parse_or_die(fr);
      if (codec::is_data_opcode(k.bth.opcode)) h.drop = true;
    }
    return h;
  };
  const Time t0 = f.p.now;
  BlackholeRun r;
  EXPECT_TRUE(f.write(1, 0, 32 << 20).ok());
  r.ok = f.wait_sends(1, 20'000'000'000) && f.swc[0].status == kWcSuccess && f.same(0, 32 << 20);
  r.took = f.p.now - t0;
  r.st = *f.p.e(0).qp_stats(f.q0);
  return r;
}

TEST(Relapse, PathThatPassesProbesButNotDataIsRetiredForLonger) {
  const BlackholeRun clean = run_blackhole(false), hole = run_blackhole(true);
  // The same without the back-off (a relapse waits no longer than a first loss).
  const BlackholeRun flat = run_blackhole(true, PathParams{}.probe_initial);
  ASSERT_TRUE(clean.ok);
  ASSERT_TRUE(hole.ok);
  std::printf(
      "clean %.2f ms; blackholed plane %.2f ms (%.2fx), retired %llu, readmitted %llu, "
      "relapses %llu, rtx %llu, timeouts %llu\n",
      clean.took / 1e6, hole.took / 1e6, double(hole.took) / double(clean.took),
      (unsigned long long)hole.st.ev_assumed_bad, (unsigned long long)hole.st.ev_readmitted,
      (unsigned long long)hole.st.ev_relapses, (unsigned long long)hole.st.tx_rtx_pkts,
      (unsigned long long)hole.st.timeouts);
  // Three planes of four carry it: within 1.5x of 4/3 of the clean time.
  EXPECT_LT(double(hole.took), 1.5 * 4.0 / 3.0 * double(clean.took));
  EXPECT_GT(hole.st.ev_relapses, 0u);
  // Each of the plane's 64 EVs comes back about log2(run / probe_initial)
  // times, not once every few RTTs.
  EXPECT_LT(hole.st.ev_readmitted, 64u * 13);
  ASSERT_TRUE(flat.ok);
  std::printf("without the back-off: readmitted %llu, rtx %llu\n",
              (unsigned long long)flat.st.ev_readmitted, (unsigned long long)flat.st.tx_rtx_pkts);
  EXPECT_GT(double(flat.st.ev_readmitted), 1.5 * double(hole.st.ev_readmitted));
  EXPECT_EQ(hole.st.timeouts, 0u);
  // With the plane relapse back-off too (the default): the plane goes dark
  // each time its readmitted EVs have relapsed, and is held off longer each
  // time (plane_relapse_test.cc).
  const BlackholeRun both =
      run_blackhole(true, PathParams{}.probe_relapse_max, PathParams{}.plane_relapse_window);
  ASSERT_TRUE(both.ok);
  std::printf(
      "with the plane relapse back-off: %.2f ms, readmitted %llu, plane relapses %llu, "
      "rtx %llu\n",
      both.took / 1e6, (unsigned long long)both.st.ev_readmitted,
      (unsigned long long)both.st.plane_relapses, (unsigned long long)both.st.tx_rtx_pkts);
  EXPECT_GT(both.st.plane_relapses, 0u);
  EXPECT_LT(both.st.ev_readmitted, hole.st.ev_readmitted);
  EXPECT_LT(double(both.took), 1.5 * 4.0 / 3.0 * double(clean.took));
}

}  // namespace
}  // namespace mrc::testing
