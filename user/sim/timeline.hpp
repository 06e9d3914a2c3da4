// Fault timelines for the simulated network: a small text grammar
//
//   3ms: plane 2 blackhole; 5ms: path 1/7 loss 0.05
//   8ms: plane 2 up   # comments run to the end of the line
//   +1ms: uplink 0/* rate 10Gbps delay 5us
//
// (full grammar in Documentation/simulator.md), its printer (which the parser
// reads back to the same timeline), scheduling on a Network, and a seeded
// random generator for property tests.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "mrc/result.hpp"
#include "sim/network.hpp"

namespace mrc::sim {

struct FaultAction {
  enum class Kind : uint8_t {
    kBlackhole,  // drop everything arriving, silently (port stays up)
    kUp,         // link up and blackhole cleared
    kDown,       // link down (the port reports down)
    kLoss,       // prob
    kTrim,       // value = threshold bytes, kOff = off
    kEcn,        // value = threshold bytes, kOff = off
    kRate,       // value = bits/s, 0 = infinite
    kDelay,      // value = latency ns
    kJitter,     // value = ns
    kReorder,    // prob, value = extra delay ns
    kDup,        // prob
    kCorrupt,    // prob
    kQueue,      // value = capacity bytes
    kHeal,       // back to the tier's default parameters
  };
  Kind kind = Kind::kHeal;
  double prob = 0;
  uint64_t value = 0;

  void apply(LinkParams& p, const LinkParams& tier_default) const;
  std::string to_string() const;  // in timeline syntax: "loss 0.05", "trim 16KiB"
  bool operator==(const FaultAction&) const = default;
};

struct FaultEvent {
  Time at = 0;
  LinkSel sel;
  FaultAction action;
  uint32_t line = 0, col = 0;  // where the parser found it (0 = generated)
  bool operator==(const FaultEvent& o) const {
    return at == o.at && sel == o.sel && action == o.action;
  }
};

struct Timeline {
  std::vector<FaultEvent> events;  // in text order; scheduling keeps it for equal times
  // One "TIME: SELECTOR ACTION" line per event; parse_timeline() reads it back.
  std::string to_string() const;
  bool operator==(const Timeline&) const = default;
};

// Parses a timeline. Errors read "timeline:LINE:COL: what was expected".
mrc::Result<Timeline> parse_timeline(std::string_view text);

// Applies one action to the selected links at once.
void apply(Network& net, const LinkSel& sel, const FaultAction& action);

// Checks every selector against the network (errors name the entry's
// position), then schedules each event at offset + its time. Nothing is
// scheduled if any selector is out of range.
mrc::Status schedule(Network& net, const Timeline& tl, Time offset = 0);

// What random_timeline() may inject. Every fault is an episode that starts
// in [start, end) and lasts [min_len, max_len] (cut at end); "count" fields
// are numbers of episodes.
struct FaultBudget {
  Time start = 0;
  Time end = 10 * kMs;
  Time min_len = 100 * kUs;
  Time max_len = 2 * kMs;

  uint32_t loss_episodes = 0;  // a spine path loses a fraction in (0, max_loss]
  double max_loss = 0.05;
  uint32_t path_blackholes = 0;  // a spine path blackholed
  uint32_t plane_failures = 0;   // a whole plane blackholed or down
  uint32_t link_failures = 0;    // a host uplink or downlink down or blackholed
  uint32_t trim_episodes = 0;    // trimming on a spine path or downlink
  uint32_t trim_min = 8 * 1024, trim_max = 64 * 1024;
  uint32_t ecn_episodes = 0;  // ECN marking on a spine path
  uint32_t ecn_min = 4 * 1024, ecn_max = 32 * 1024;
  uint32_t reorder_episodes = 0;  // a spine path holds back a fraction of frames
  double max_reorder = 0.1;
  Time max_reorder_delay = 20 * kUs;
  uint32_t dup_episodes = 0;  // a spine path duplicates a fraction
  double max_dup = 0.05;
  uint32_t corrupt_episodes = 0;  // a spine path corrupts a fraction
  double max_corrupt = 0.01;

  // Keep one (plane, spine path) pair free of every fault that destroys
  // frames (loss, blackhole, down, corruption) on it and on every host's
  // uplink and downlink of that plane: each direction between any two hosts
  // always has a working path. The pair is drawn from the seed.
  bool keep_path = true;
  // Add "END: all heal" so the fabric is clean after the window.
  bool heal_at_end = true;
};

// A timeline drawn from seed within the budget, sorted by time. Print it with
// to_string() to replay a failing seed without the generator.
Timeline random_timeline(const NetConfig& shape, const FaultBudget& budget, uint64_t seed);

}  // namespace mrc::sim
