// Fault timelines: grammar, errors with positions, printing, scheduling and
// the seeded random generator.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/timeline.hpp"

namespace mrc::sim {
namespace {

using AK = FaultAction::Kind;

Timeline must_parse(std::string_view text) {
  auto r = parse_timeline(text);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().context);
  return r.ok() ? *r : Timeline{};
}

TEST(SimTimeline, ParsesTheExampleFromTheBrief) {
  Timeline tl = must_parse("3ms: plane 2 blackhole; 5ms: path 1/7 loss 0.05; 8ms: plane 2 up");
  ASSERT_EQ(tl.events.size(), 3u);
  EXPECT_EQ(tl.events[0].at, 3 * kMs);
  EXPECT_EQ(tl.events[0].sel, LinkSel::plane(2));
  EXPECT_EQ(tl.events[0].action.kind, AK::kBlackhole);
  EXPECT_EQ(tl.events[1].at, 5 * kMs);
  EXPECT_EQ(tl.events[1].sel, LinkSel::path(1, 7));
  EXPECT_EQ(tl.events[1].action.kind, AK::kLoss);
  EXPECT_EQ(tl.events[1].action.prob, 0.05);
  EXPECT_EQ(tl.events[1].line, 1u);
  EXPECT_EQ(tl.events[1].col, 25u);
  EXPECT_EQ(tl.events[2].action.kind, AK::kUp);
}

TEST(SimTimeline, ParsesEverySelectorActionAndUnit) {
  Timeline tl = must_parse(R"(
    # a comment line
    0ns: all heal
    2.5us: plane * down           # trailing comment
    1ms: path */3 up
    +500us: uplink 4/1 loss 5%; +0ns: downlink */0 trim 16KiB
    2ms: port 1/2 ecn off trim off
    2ms: host 3 rate 25Gbps delay 1.5us jitter 200ns
    3ms: all reorder 0.1 20us dup 0.001 corrupt 1 queue 1MiB
    4s: path 0/0 rate 800M ; 4s: path 0/0 rate inf ; 4s: all queue 1500 ; 4s: all ecn 2.5KB
  )");
  ASSERT_EQ(tl.events.size(), 18u);
  const auto& e = tl.events;
  EXPECT_EQ(e[0].at, 0u);
  EXPECT_EQ(e[0].sel, LinkSel::all());
  EXPECT_EQ(e[1].at, 2500u);
  EXPECT_EQ(e[1].sel, LinkSel::plane(LinkSel::kAny));
  EXPECT_EQ(e[1].action.kind, AK::kDown);
  EXPECT_EQ(e[2].sel, LinkSel::path(LinkSel::kAny, 3));
  EXPECT_EQ(e[3].at, 1500 * kUs);  // relative to the previous entry
  EXPECT_EQ(e[3].sel, LinkSel::uplink(4, 1));
  EXPECT_EQ(e[3].action.prob, 0.05);
  EXPECT_EQ(e[4].at, 1500 * kUs);
  EXPECT_EQ(e[4].sel, LinkSel::downlink(LinkSel::kAny, 0));
  EXPECT_EQ(e[4].action, (FaultAction{AK::kTrim, 0, 16384}));
  EXPECT_EQ(e[5].sel, LinkSel::port(1, 2));
  EXPECT_EQ(e[5].action, (FaultAction{AK::kEcn, 0, kOff}));
  EXPECT_EQ(e[6].action, (FaultAction{AK::kTrim, 0, kOff}));
  EXPECT_EQ(e[7].sel, LinkSel::host(3));
  EXPECT_EQ(e[7].action, (FaultAction{AK::kRate, 0, 25'000'000'000}));
  EXPECT_EQ(e[8].action, (FaultAction{AK::kDelay, 0, 1500}));
  EXPECT_EQ(e[9].action, (FaultAction{AK::kJitter, 0, 200}));
  EXPECT_EQ(e[10].action, (FaultAction{AK::kReorder, 0.1, 20 * kUs}));
  EXPECT_EQ(e[11].action, (FaultAction{AK::kDup, 0.001, 0}));
  EXPECT_EQ(e[12].action, (FaultAction{AK::kCorrupt, 1, 0}));
  EXPECT_EQ(e[13].action, (FaultAction{AK::kQueue, 0, 1 << 20}));
  EXPECT_EQ(e[14].at, 4 * kSec);
  EXPECT_EQ(e[14].action, (FaultAction{AK::kRate, 0, 800'000'000}));
  EXPECT_EQ(e[15].action, (FaultAction{AK::kRate, 0, 0}));
  EXPECT_EQ(e[16].action, (FaultAction{AK::kQueue, 0, 1500}));
  EXPECT_EQ(e[17].action, (FaultAction{AK::kEcn, 0, 2500}));
  EXPECT_EQ(e[3].line, 6u);
  EXPECT_EQ(e[3].col, 5u);
  // Printing and parsing back gives the same timeline.
  EXPECT_EQ(must_parse(tl.to_string()), tl);
  EXPECT_TRUE(must_parse("").events.empty());
  EXPECT_TRUE(must_parse(" ; \n ;; # nothing\n").events.empty());
}

TEST(SimTimeline, PrintsInCanonicalForm) {
  Timeline tl =
      must_parse("1500us: path 1/7 loss 5%; 2ms: downlink 0/1 trim 65536; 3s: all rate 100G");
  EXPECT_EQ(tl.to_string(),
            "1500us: path 1/7 loss 0.05\n"
            "2ms: downlink 0/1 trim 64KiB\n"
            "3s: all rate 100Gbps\n");
}

struct BadCase {
  const char* text;
  uint32_t line, col;
  const char* says;
};

TEST(SimTimeline, ErrorsNameThePosition) {
  const BadCase cases[] = {
      {"3: plane 2 blackhole", 1, 1, "bad time '3'"},
      {"3ms plane 2 blackhole", 1, 5, "expected ':' after the time"},
      {"3ms: plain 2 blackhole", 1, 6, "unknown selector 'plain'"},
      {"3ms: plane x blackhole", 1, 12, "expected 'plane P'"},
      {"3ms: path 1 loss 0.1", 1, 11, "expected 'path P/M'"},
      {"3ms: uplink 1/ down", 1, 13, "expected 'uplink H/P'"},
      {"3ms: path 1/2 lose 0.1", 1, 15, "unknown action 'lose'"},
      {"3ms: path 1/2 loss 1.5", 1, 20, "'loss' needs a probability"},
      {"3ms: path 1/2 loss", 1, 19, "'loss' needs a probability"},
      {"3ms: path 1/2 loss -0.1", 1, 20, "'loss' needs a probability"},
      {"3ms: path 1/2 loss 120%", 1, 20, "'loss' needs a probability"},
      {"3ms: path 1/2", 1, 14, "expected an action after 'path 1/2'"},
      {"3ms: path 1/2;", 1, 14, "expected an action"},
      {"1ms: all heal\n2ms: plane 0 trim 12XB", 2, 19, "'trim' needs a queue depth"},
      {"1ms: all rate 0", 1, 15, "'rate' needs a rate"},
      {"1ms: all queue off", 1, 16, "'queue' needs a capacity"},
      {"1ms: all reorder 0.1", 1, 21, "needs a probability and then a delay"},
      {"1ms: all reorder 0.1 5", 1, 22, "needs a probability and then a delay"},
      {"1.5ns: all heal", 1, 1, "bad time '1.5ns'"},
      {"1ms: all heal : x", 1, 15, "unexpected ':'"},
      {"\n\n  7ms: all delay 3", 3, 18, "'delay' needs a time"},
      {"1ms: : all heal", 1, 6, "expected a selector"},
      {": all heal", 1, 1, "expected a time"},
      {"99999999999999999999s: all heal", 1, 1, "bad time"},
  };
  for (const auto& c : cases) {
    auto r = parse_timeline(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    const std::string want =
        "timeline:" + std::to_string(c.line) + ":" + std::to_string(c.col) + ": ";
    EXPECT_EQ(r.error().context.rfind(want, 0), 0u) << c.text << " -> " << r.error().context;
    EXPECT_NE(r.error().context.find(c.says), std::string::npos)
        << c.text << " -> " << r.error().context;
  }
}

NetConfig shape(uint32_t hosts, uint32_t planes, uint32_t paths) {
  NetConfig c;
  c.hosts = hosts;
  c.planes = planes;
  c.paths_per_plane = paths;
  return c;
}

TEST(SimTimeline, ScheduleAppliesEachEventAtItsTime) {
  NetConfig c = shape(2, 2, 2);
  c.spine.latency = 2 * kUs;
  Network net(c);
  std::vector<std::pair<Time, bool>> port_events;
  net.on_port_change(0, [&](int port, bool up, Time now) {
    EXPECT_EQ(port, 1);
    port_events.push_back({now, up});
  });
  Timeline tl = must_parse(
      "1ms: path 0/1 loss 0.5 rate 10G\n"
      "2ms: plane 1 blackhole\n"
      "3ms: plane 1 up\n"
      "4ms: uplink 0/1 down\n"
      "5ms: all heal\n");
  ASSERT_TRUE(schedule(net, tl, 10 * kUs).ok());
  const LinkId p01 = net.spine(0, 1);
  net.run_until(1 * kMs + 9 * kUs);
  EXPECT_EQ(net.params(p01), c.spine);
  net.run_until(1 * kMs + 10 * kUs);
  EXPECT_EQ(net.params(p01).loss, 0.5);
  EXPECT_EQ(net.params(p01).rate_bps, 10'000'000'000u);
  EXPECT_EQ(net.params(net.spine(0, 0)), c.spine);
  net.run_until(2 * kMs + 10 * kUs);
  for (LinkId id : net.select(LinkSel::plane(1))) EXPECT_TRUE(net.params(id).blackhole);
  for (LinkId id : net.select(LinkSel::plane(0))) EXPECT_FALSE(net.params(id).blackhole);
  net.run_until(3 * kMs + 10 * kUs);
  for (LinkId id : net.select(LinkSel::plane(1))) EXPECT_FALSE(net.params(id).blackhole);
  net.run_until(4 * kMs + 10 * kUs);
  EXPECT_FALSE(net.params(net.uplink(0, 1)).up);
  EXPECT_FALSE(net.port_up(0, 1));
  net.run_until(5 * kMs + 10 * kUs);
  for (LinkId id = 0; id < net.link_count(); id++)
    EXPECT_EQ(net.params(id), net.default_params(net.info(id).tier)) << net.link_name(id);
  EXPECT_EQ(net.params(p01).latency, 2 * kUs);  // heal restores the configured tier default
  ASSERT_EQ(port_events.size(), 2u);
  EXPECT_EQ(port_events[0], std::make_pair(4 * kMs + 10 * kUs, false));
  EXPECT_EQ(port_events[1], std::make_pair(5 * kMs + 10 * kUs, true));
}

TEST(SimTimeline, ScheduleRejectsLinksThatDoNotExist) {
  Network net(shape(2, 1, 4));
  Timeline tl = must_parse("1ms: all heal\n  2ms: path 3/0 loss 0.1");
  auto st = schedule(net, tl);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().context.rfind("timeline:2:3: plane 3 does not exist", 0), 0u)
      << st.error().context;
  EXPECT_EQ(net.pending_events(), 0u);  // nothing scheduled
  EXPECT_FALSE(schedule(net, must_parse("1ms: path 0/4 up")).ok());
  EXPECT_FALSE(schedule(net, must_parse("1ms: uplink 2/0 up")).ok());
  EXPECT_FALSE(schedule(net, must_parse("1ms: host 2 up")).ok());
  EXPECT_TRUE(schedule(net, must_parse("1ms: path 0/3 up; 1ms: downlink */0 up")).ok());
}

// ---------------------------------------------------------------------------
// Random timelines

FaultBudget busy_budget() {
  FaultBudget b;
  b.loss_episodes = 6;
  b.max_loss = 0.2;
  b.path_blackholes = 4;
  b.plane_failures = 2;
  b.link_failures = 3;
  b.trim_episodes = 3;
  b.ecn_episodes = 3;
  b.reorder_episodes = 2;
  b.dup_episodes = 2;
  b.corrupt_episodes = 2;
  return b;
}

TEST(SimRandomTimeline, SeedDecidesEverything) {
  const NetConfig c = shape(4, 4, 8);
  const FaultBudget b = busy_budget();
  const Timeline a = random_timeline(c, b, 11);
  EXPECT_EQ(random_timeline(c, b, 11), a);
  EXPECT_NE(random_timeline(c, b, 12), a);
  // Two events per episode plus the final heal.
  EXPECT_EQ(a.events.size(), 2u * (6 + 4 + 2 + 3 + 3 + 3 + 2 + 2 + 2) + 1);
  EXPECT_EQ(must_parse(a.to_string()), a);
  Time prev = 0;
  for (const auto& e : a.events) {
    EXPECT_GE(e.at, prev);
    EXPECT_LE(e.at, b.end);
    prev = e.at;
    const double cap = e.action.kind == AK::kLoss      ? b.max_loss
                       : e.action.kind == AK::kDup     ? b.max_dup
                       : e.action.kind == AK::kCorrupt ? b.max_corrupt
                       : e.action.kind == AK::kReorder ? b.max_reorder
                                                       : 0;
    EXPECT_LE(e.action.prob, cap) << e.action.to_string();
    if (e.action.kind == AK::kTrim && e.action.value != kOff) {
      EXPECT_GE(e.action.value, b.trim_min);
      EXPECT_LE(e.action.value, b.trim_max);
    }
  }
  EXPECT_EQ(a.events.back().action.kind, AK::kHeal);
  EXPECT_EQ(a.events.back().at, b.end);
  Network net(c);
  EXPECT_TRUE(schedule(net, a).ok());
}

bool link_works(const Network& net, LinkId id) {
  const LinkParams& p = net.params(id);
  return p.up && !p.blackhole && p.loss == 0 && p.corrupt == 0;
}

// For every ordered pair of hosts, some (plane, path) works end to end.
bool every_direction_has_a_path(const Network& net) {
  const NetConfig& c = net.config();
  for (uint32_t s = 0; s < c.hosts; s++)
    for (uint32_t d = 0; d < c.hosts; d++) {
      bool ok = false;
      for (uint32_t p = 0; p < c.planes && !ok; p++) {
        if (!link_works(net, net.uplink(s, p)) || !link_works(net, net.downlink(d, p))) continue;
        for (uint32_t m = 0; m < c.paths_per_plane && !ok; m++)
          ok = link_works(net, net.spine(p, m));
      }
      if (!ok) return false;
    }
  return true;
}

TEST(SimRandomTimeline, KeepPathLeavesAWorkingPathAtAllTimes) {
  FaultBudget b = busy_budget();
  b.heal_at_end = false;
  b.path_blackholes = 12;
  b.plane_failures = 4;
  b.link_failures = 8;
  b.max_len = 20 * kMs;  // long, overlapping episodes
  for (uint64_t seed = 0; seed < 200; seed++) {
    const NetConfig c = shape(3, 1 + uint32_t(seed % 3), 1 + uint32_t(seed % 4));
    Network net(c);
    ASSERT_TRUE(schedule(net, random_timeline(c, b, seed)).ok());
    while (net.step()) ASSERT_TRUE(every_direction_has_a_path(net)) << "seed " << seed;
  }
}

TEST(SimRandomTimeline, WithoutKeepPathEverythingCanFail) {
  FaultBudget b;
  b.path_blackholes = 1;
  b.keep_path = false;
  b.heal_at_end = false;
  const NetConfig c = shape(2, 1, 1);
  Timeline tl = random_timeline(c, b, 5);
  ASSERT_EQ(tl.events.size(), 2u);
  EXPECT_EQ(tl.events[0].sel, LinkSel::path(0, 0));
  EXPECT_EQ(tl.events[0].action.kind, AK::kBlackhole);
  EXPECT_EQ(tl.events[1].action.kind, AK::kUp);
  // With keep_path the only path is never blackholed.
  b.keep_path = true;
  EXPECT_TRUE(random_timeline(c, b, 5).events.empty());
}

}  // namespace
}  // namespace mrc::sim
