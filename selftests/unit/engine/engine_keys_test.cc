// apply_engine_settings (core/engine_keys.hpp): the MRC_ENGINE list libmrc
// reads at open. Good lists set every key they name; a bad item refuses the
// whole list, says which item and where it came from, and changes nothing.
#include <gtest/gtest.h>

#include <cerrno>
#include <string>

#include "core/engine_keys.hpp"

namespace mrc::testing {
namespace {

using core::apply_engine_settings;
using core::EngineConfig;

TEST(EngineSettings, ListsSetEveryKeyTheyName) {
  EngineConfig e;
  ASSERT_FALSE(e.default_cc.nscc.disable_qa);
  auto s = apply_engine_settings("cc_qa=0,sack_bytes=32768  probe_max_us=2500\tcc_qa_floor_us=300,",
                                 &e, "MRC_ENGINE");
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_TRUE(e.default_cc.nscc.disable_qa);
  EXPECT_EQ(e.sack_bytes, 32768u);
  EXPECT_EQ(e.paths.probe_max, 2'500'000u);
  EXPECT_EQ(e.cc_qa_floor, 300'000u);
  ASSERT_FALSE(e.cc_qa_fabric);
  ASSERT_TRUE(apply_engine_settings("cc_qa_fabric=1", &e, "x").ok());
  EXPECT_TRUE(e.cc_qa_fabric);
  ASSERT_EQ(e.cc_max_target, kNsccMaxTarget);
  ASSERT_TRUE(apply_engine_settings("cc_max_target_us=64", &e, "x").ok());
  EXPECT_EQ(e.cc_max_target, 64'000u);
  ASSERT_TRUE(apply_engine_settings("cc_max_target_us=0", &e, "x").ok());  // no ceiling
  EXPECT_EQ(e.cc_max_target, 0u);
  ASSERT_TRUE(e.cc_qa_fabric_on_ecn);  // on by default
  ASSERT_TRUE(apply_engine_settings("cc_qa_fabric_on_ecn=0", &e, "x").ok());
  EXPECT_FALSE(e.cc_qa_fabric_on_ecn);
  ASSERT_TRUE(apply_engine_settings("cc_qa_fabric_on_ecn=1", &e, "x").ok());
  EXPECT_TRUE(e.cc_qa_fabric_on_ecn);
  ASSERT_TRUE(e.cc_qa_rate_gate);  // on by default
  ASSERT_TRUE(apply_engine_settings("cc_qa_rate_gate=0", &e, "x").ok());
  EXPECT_FALSE(e.cc_qa_rate_gate);
  ASSERT_TRUE(apply_engine_settings("cc_qa_rate_gate=1", &e, "x").ok());
  EXPECT_TRUE(e.cc_qa_rate_gate);
  ASSERT_FALSE(e.cc_qa_cut_full);  // off by default
  ASSERT_TRUE(apply_engine_settings("cc_qa_cut_full=1", &e, "x").ok());
  EXPECT_TRUE(e.cc_qa_cut_full);
  ASSERT_TRUE(apply_engine_settings("cc_qa_cut_full=0", &e, "x").ok());
  EXPECT_FALSE(e.cc_qa_cut_full);
  ASSERT_TRUE(e.probe_delivery);  // on by default
  ASSERT_TRUE(apply_engine_settings("probe_delivery=0", &e, "x").ok());
  EXPECT_FALSE(e.probe_delivery);
  ASSERT_TRUE(apply_engine_settings("probe_delivery=1", &e, "x").ok());
  EXPECT_TRUE(e.probe_delivery);
  ASSERT_TRUE(e.paths.silent_plane_pace);  // on by default
  ASSERT_TRUE(apply_engine_settings("silent_plane_pace=0", &e, "x").ok());
  EXPECT_FALSE(e.paths.silent_plane_pace);
  ASSERT_TRUE(apply_engine_settings("silent_plane_pace=1", &e, "x").ok());
  EXPECT_TRUE(e.paths.silent_plane_pace);
  ASSERT_TRUE(e.paths.quiet_plane_pace);  // on by default
  ASSERT_TRUE(apply_engine_settings("quiet_plane_pace=0", &e, "x").ok());
  EXPECT_FALSE(e.paths.quiet_plane_pace);
  ASSERT_TRUE(apply_engine_settings("quiet_plane_pace=1", &e, "x").ok());
  EXPECT_TRUE(e.paths.quiet_plane_pace);
  ASSERT_EQ(e.paths.silent_suspect_wait, 12'000'000u);  // 12 ms by default
  ASSERT_TRUE(apply_engine_settings("silent_suspect_wait_us=0", &e, "x").ok());
  EXPECT_EQ(e.paths.silent_suspect_wait, 0u);
  ASSERT_TRUE(apply_engine_settings("silent_suspect_wait_us=5000", &e, "x").ok());
  EXPECT_EQ(e.paths.silent_suspect_wait, 5'000'000u);
  ASSERT_TRUE(e.paths.dark_plane_credit);  // on by default
  ASSERT_TRUE(apply_engine_settings("dark_plane_credit=0", &e, "x").ok());
  EXPECT_FALSE(e.paths.dark_plane_credit);
  ASSERT_TRUE(apply_engine_settings("dark_plane_credit=1", &e, "x").ok());
  EXPECT_TRUE(e.paths.dark_plane_credit);
  ASSERT_EQ(e.paths.sack_plane_gap, 16u);  // 16 packets by default
  ASSERT_TRUE(apply_engine_settings("sack_plane_gap=0", &e, "x").ok());
  EXPECT_EQ(e.paths.sack_plane_gap, 0u);
  ASSERT_TRUE(apply_engine_settings("sack_plane_gap=64", &e, "x").ok());
  EXPECT_EQ(e.paths.sack_plane_gap, 64u);
  ASSERT_TRUE(e.reo_extra_cap);  // on by default
  ASSERT_TRUE(apply_engine_settings("reo_extra_cap=0", &e, "x").ok());
  EXPECT_FALSE(e.reo_extra_cap);
  ASSERT_TRUE(apply_engine_settings("reo_extra_cap=1", &e, "x").ok());
  EXPECT_TRUE(e.reo_extra_cap);
  ASSERT_FALSE(e.sack_each_ce);  // off by default: the burst's SACK answers its marks
  ASSERT_TRUE(apply_engine_settings("sack_each_ce=1", &e, "x").ok());
  EXPECT_TRUE(e.sack_each_ce);
  ASSERT_TRUE(apply_engine_settings("sack_each_ce=0", &e, "x").ok());
  EXPECT_FALSE(e.sack_each_ce);
  // The last setting of a key wins; an empty list changes nothing.
  ASSERT_TRUE(apply_engine_settings("cc_qa=0,cc_qa=1", &e, "x").ok());
  EXPECT_FALSE(e.default_cc.nscc.disable_qa);
  const uint32_t before = e.sack_bytes;
  ASSERT_TRUE(apply_engine_settings("", &e, "x").ok());
  ASSERT_TRUE(apply_engine_settings(" , ,", &e, "x").ok());
  EXPECT_EQ(e.sack_bytes, before);
}

TEST(EngineSettings, ABadItemRefusesTheListAndChangesNothing) {
  for (const char* bad : {"bogus=1",
                          "cc_qa",
                          "=1",
                          "cc_qa=2",
                          "cc_qa=-1",
                          "cc_qa=1x",
                          "cc_qa=",
                          "cc_qa=0x1",
                          "sack_bytes=4294967296",
                          "cc_qa_floor_us=3600000001",
                          "cc_qa_floor_us=99999999999999999999",
                          "cc_qa_floor_us=184467440737095516160",
                          "sack_bytes=+5",
                          "sack_bytes=1 cc_qa=2",
                          "cc_qa_fabric=2",
                          "cc_qa_fabric=-1",
                          "cc_qa_fabric=yes",
                          "cc_qa=0,bogus=1",
                          "cc_max_target_us=-1",
                          "cc_max_target_us=32us",
                          "cc_max_target_us=3600000001",
                          "cc_max_target_us=",
                          "cc_qa=0,cc_max_target_us=x",
                          "cc_qa_fabric_on_ecn=2",
                          "cc_qa_fabric_on_ecn=off",
                          "cc_qa_fabric_on_ecn=",
                          "cc_qa_fabric_on_ecn=0,cc_qa=9",
                          "cc_qa_rate_gate=2",
                          "cc_qa_rate_gate=on",
                          "cc_qa_rate_gate=0,bogus",
                          "cc_qa_cut_full=2",
                          "cc_qa_cut_full=yes",
                          "cc_qa_cut_full=1,cc_qa_cut_full=",
                          "probe_delivery=2",
                          "probe_delivery=0,probe_delivery=x",
                          "silent_plane_pace=2",
                          "silent_plane_pace=0,silent_plane_pace=on",
                          "quiet_plane_pace=2",
                          "quiet_plane_pace=0,quiet_plane_pace=yes",
                          "silent_suspect_wait_us=-1",
                          "silent_suspect_wait_us=0,silent_suspect_wait_us=1ms",
                          "reo_extra_cap=2",
                          "dark_plane_credit=7",
                          "dark_plane_credit=1,dark_plane_credit=",
                          "sack_plane_gap=-1",
                          "sack_plane_gap=4,sack_plane_gap=4294967296",
                          "reo_extra_cap=0,reo_extra_cap=off",
                          "sack_each_ce=2",
                          "sack_each_ce=on",
                          "sack_each_ce=1,sack_each_ce="}) {
    EngineConfig e;
    e.sack_bytes = 12345;
    auto s = apply_engine_settings(bad, &e, "open: MRC_ENGINE");
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.error().code, EINVAL) << bad;
    EXPECT_NE(s.error().message().find("open: MRC_ENGINE: "), std::string::npos)
        << s.error().message();
    // Nothing of the list applied, not even its good items before the bad one.
    EXPECT_EQ(e.sack_bytes, 12345u) << bad;
    EXPECT_FALSE(e.default_cc.nscc.disable_qa) << bad;
    EXPECT_EQ(e.cc_max_target, kNsccMaxTarget) << bad;
    EXPECT_TRUE(e.cc_qa_fabric_on_ecn) << bad;
    EXPECT_TRUE(e.cc_qa_rate_gate) << bad;
    EXPECT_FALSE(e.cc_qa_cut_full) << bad;
    EXPECT_TRUE(e.probe_delivery) << bad;
    EXPECT_TRUE(e.paths.silent_plane_pace) << bad;
    EXPECT_TRUE(e.paths.quiet_plane_pace) << bad;
    EXPECT_EQ(e.paths.silent_suspect_wait, 12'000'000u) << bad;
    EXPECT_TRUE(e.reo_extra_cap) << bad;
    EXPECT_TRUE(e.paths.dark_plane_credit) << bad;
    EXPECT_EQ(e.paths.sack_plane_gap, 16u) << bad;
    EXPECT_FALSE(e.sack_each_ce) << bad;
  }
  EngineConfig e;
  auto s = apply_engine_settings("cc_qa=7", &e, "MRC_ENGINE");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("bad value for cc_qa: '7' (a whole number from 0 to 1)"),
            std::string::npos)
      << s.error().message();
  s = apply_engine_settings("nosuch=1", &e, "MRC_ENGINE");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("'nosuch=1' is not KEY=VALUE with a known KEY"),
            std::string::npos)
      << s.error().message();
}

}  // namespace
}  // namespace mrc::testing
