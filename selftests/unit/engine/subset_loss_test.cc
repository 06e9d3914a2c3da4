// A fault confined to a subset of a plane's paths (issue 21): a quarter of
// plane 1's entropy values lose half their packets, the rest of the plane
// nothing. The plane is lossy on average (design.md "Grey failure"), which
// stops retiring its EVs for a loss; the subset loses far more than its
// plane (PathParams::ev_outlier_ratio) and must still be retired, and come
// back rarely (the relapse back-off), whatever the plane's average.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "codec/ev.hpp"
#include "engine/fixture.hpp"
#include "engine/harness.hpp"

namespace mrc::testing {
namespace {

using namespace core;

constexpr size_t kBytes = 128 << 20;
constexpr int kWrites = 6;
constexpr int kLossyPlane = 1;  // 0-based; the harness's port 2

struct SubsetRun {
  QpStats st;
  Time took = 0;
  bool ok = false;
  uint64_t plane_data = 0;   // data packets the requester sent on plane 1
  uint64_t subset_data = 0;  // ... of them on the subset's EVs
  uint64_t subset_lost = 0;  // ... of them dropped
  // Samples (every 1 ms once the first 50 ms are over) of the subset's EVs:
  // how many were ASSUMED_BAD, out of how many looked at.
  uint64_t bad_samples = 0, samples = 0;
};

// Whether an entropy value belongs to the subset: one in four.
bool in_subset(uint32_t ev) { return (ev & 3) == 0; }

// 6 x 128 MiB over 4 planes (about 75 ms). With `loss`, every
// frame (data, acknowledgement, probe: both directions) on plane 1 whose EV
// is in the subset is dropped with probability `loss`.
SubsetRun run_subset(double loss, PathParams paths = PathParams{}, double uniform = 0,
                     bool data_only = false) {
  PairOptions o;
  o.cfg.paths = paths;
  // As in grey_test: the window, not the planes, limits the QP (as the CPU
  // does on a host), and the plane's losses are spread over many RTTs.
  o.gbps = 40;
  o.cfg.default_cc.nscc.max_cwnd = 128 << 10;
  o.mtu = 4096;
  // Every EV active (no backups): a readmitted EV is back in the spray at
  // once, as a backup is after any retirement of its plane.
  o.cfg.auto_active_per_port = o.cfg.auto_evs_per_port;
  Fixture f(kBytes, o);
  SubsetRun r;
  std::mt19937_64 rng(17);
  f.p.hook = [&](int from, uint8_t port, std::vector<uint8_t>& fr, Time) {
    Hook h;
    if (port - 1 != kLossyPlane) return h;
    auto k = parse_or_die(fr);
    const bool subset = in_subset(codec::ev_from_wire(k.ip, k.udp, codec::EvFmtMode::kStev));
    const bool data = from == 0 && codec::is_data_opcode(k.bth.opcode);
    const double p = subset ? loss : uniform;
    h.drop = (data || !data_only) && p > 0 && std::uniform_real_distribution<double>(0, 1)(rng) < p;
    if (data) {
      r.plane_data++;
      r.subset_data += subset;
      r.subset_lost += subset && h.drop;
    }
    return h;
  };
  const Time t0 = f.p.now;
  Time next_sample = t0 + 5'000'000;
  // The same 128 MiB written kWrites times, one write after the other.
  bool done = true;
  for (int w = 0; w < kWrites && done; w++) {
    EXPECT_TRUE(f.write(uint64_t(w), 0, kBytes).ok());
    done = f.p.run(
        [&] {
          if (f.p.now >= next_sample) {
            next_sample = f.p.now + 100'000;
            auto evs = f.p.e(0).qp_evs(f.q0);
            if (evs.ok())
              for (const PathSet::Ev& e : *evs)
                if (e.port - 1 == kLossyPlane && in_subset(e.ev)) {
                  r.samples++;
                  r.bad_samples += e.state == EvState::kAssumedBad;
                }
          }
          f.p.poll(0, f.p.h(0).scq, f.swc);
          return f.swc.size() > size_t(w);
        },
        20'000'000'000);
    done = done && f.swc.back().status == kWcSuccess;
  }
  r.ok = done && f.same(0, kBytes);
  r.took = f.p.now - t0;
  r.st = *f.p.e(0).qp_stats(f.q0);
  return r;
}

void print(const char* name, const SubsetRun& r, const SubsetRun& clean) {
  std::printf(
      "%-28s %7.1f ms (%.3f of the clean run's goodput), plane-1 data %llu, on the subset %llu "
      "(%.1f%%), subset data lost %llu (%.2f%% of plane 1), subset ASSUMED_BAD %.0f%% of samples, "
      "retired %llu, readmitted %llu, relapses %llu, outliers %llu, probes %llu, rtx %llu, "
      "lossy %llu, timeouts %llu\n",
      name, r.took / 1e6, double(clean.took) / double(r.took), (unsigned long long)r.plane_data,
      (unsigned long long)r.subset_data,
      100.0 * double(r.subset_data) / double(std::max<uint64_t>(r.plane_data, 1)),
      (unsigned long long)r.subset_lost,
      100.0 * double(r.subset_lost) / double(std::max<uint64_t>(r.plane_data, 1)),
      r.samples ? 100.0 * double(r.bad_samples) / double(r.samples) : 0.0,
      (unsigned long long)r.st.ev_assumed_bad, (unsigned long long)r.st.ev_readmitted,
      (unsigned long long)r.st.ev_relapses, (unsigned long long)r.st.ev_outliers,
      (unsigned long long)r.st.tx_probe_pkts, (unsigned long long)r.st.tx_rtx_pkts,
      (unsigned long long)r.st.plane_lossy, (unsigned long long)r.st.timeouts);
}

PathParams without_outlier_rule() {
  PathParams p;
  p.ev_outlier_ratio = 0;
  return p;
}

TEST(SubsetLoss, ASubsetThatLosesHalfIsRetiredOnALossyPlane) {
  const SubsetRun clean = run_subset(0);
  const SubsetRun on = run_subset(0.5, PathParams{}, 0, true);
  const SubsetRun off = run_subset(0.5, without_outlier_rule(), 0, true);
  print("no fault", clean, clean);
  print("subset 50%", on, clean);
  print("subset 50%, no outlier rule", off, clean);
  ASSERT_TRUE(clean.ok);
  ASSERT_TRUE(on.ok);
  ASSERT_TRUE(off.ok);
  // Without the rule the subset keeps a large part of plane 1's data and
  // loses half of it (the failure this rule exists for).
  EXPECT_GE(off.st.plane_lossy, 1u);
  EXPECT_GT(off.subset_lost * 50, off.plane_data) << "the fault was not exercised";
  // With it the subset is retired most of the time, carries little of the
  // plane's data and loses under 1% of it; its retirements and readmissions
  // are bounded (the relapse back-off: each of its 16 EVs comes back about
  // log2(run / probe_initial) times, a dozen), and the good paths carry the
  // rest at close to the clean run's goodput.
  EXPECT_GT(on.bad_samples * 4, on.samples * 3) << "the subset was not kept retired";
  EXPECT_LT(on.subset_lost * 100, on.plane_data) << "the subset lost 1% of plane 1's data or more";
  EXPECT_LT(on.subset_lost * 4, off.subset_lost);
  EXPECT_LT(on.st.ev_readmitted, 16u * 16) << "retire/readmit cycles not bounded";
  EXPECT_LT(on.st.ev_readmitted * 4, off.st.ev_readmitted);
  EXPECT_GT(on.st.ev_relapses, 0u);
  EXPECT_GT(double(clean.took), 0.9 * double(on.took)) << "goodput under 0.9 of the clean run's";
  EXPECT_EQ(on.st.timeouts, 0u);
}

TEST(SubsetLoss, ASubsetLosingHalfOnAPlaneLosingFivePercentIsRetired) {
  // Plane 1 loses 5% of its data everywhere (lossy: its EVs are kept) and
  // half on the subset: those EVs lose ten times their plane's rate and are
  // retired on the lossy plane all the same.
  const SubsetRun on = run_subset(0.5, PathParams{}, 0.05, true);
  const SubsetRun off = run_subset(0.5, without_outlier_rule(), 0.05, true);
  print("5% + subset 50%", on, off);
  print("5% + subset 50%, no outlier rule", off, off);
  ASSERT_TRUE(on.ok);
  ASSERT_TRUE(off.ok);
  EXPECT_GE(off.st.plane_lossy, 1u);
  EXPECT_GT(on.st.ev_outliers, 0u) << "no EV retired as an outlier on the lossy plane";
  EXPECT_LT(on.subset_lost * 2, off.subset_lost);
  EXPECT_GT(on.bad_samples * 4, on.samples * 3) << "the subset was not kept retired";
  EXPECT_EQ(on.st.timeouts, 0u);
}

TEST(SubsetLoss, UniformLossOnThePlaneStillKeepsItsEvs) {
  // 5% on every path of plane 1 (the case the lossy-plane rule exists for):
  // its EVs lose alike, none is an outlier, and the plane keeps them.
  const SubsetRun on = run_subset(0.05, PathParams{}, 0.05);
  const SubsetRun off = run_subset(0.05, without_outlier_rule(), 0.05);
  print("uniform 5%", on, off);
  print("uniform 5%, no outlier rule", off, off);
  ASSERT_TRUE(on.ok);
  ASSERT_TRUE(off.ok);
  EXPECT_GE(on.st.plane_lossy, 1u);
  EXPECT_LT(on.st.ev_outliers * 20, on.st.tx_rtx_pkts)
      << "EVs losing like their plane taken for outliers";
  EXPECT_LT(double(on.st.ev_assumed_bad), 1.25 * double(off.st.ev_assumed_bad) + 8);
}

}  // namespace
}  // namespace mrc::testing
