// EV event completion queues (mrc_ctl_create_ev_event_cq /
// mrc_ctl_poll_ev_event): bounded, never overrun. An event that finds the
// queue full is dropped and counted; the next event that gets in carries
// the exact number dropped since the previous one in drop_count
// (MRC_CTL_OPT_CAP_EV_EVENT_PRECISE_DROP_CNT).
#pragma once

#include <cstdint>
#include <deque>
#include <span>

#include "ctl/types.hpp"

namespace mrc::ctl {

class EvEventCq {
 public:
  explicit EvEventCq(uint32_t capacity) : cap_(capacity) {}

  // Queues `e` (its drop_count is overwritten), or counts it as dropped.
  void push(const EvEvent& e);
  // Events lost before they reached this queue (upstream) count as dropped
  // here too, so drop_count stays exact end to end.
  void add_drops(uint64_t n) { pending_ += n, dropped_ += n; }
  // Up to out.size() events, oldest first (mrc_ctl_poll_ev_event).
  size_t poll(std::span<EvEvent> out);

  uint32_t capacity() const { return cap_; }
  size_t depth() const { return q_.size(); }
  uint64_t dropped_total() const { return dropped_; }
  uint64_t delivered_total() const { return delivered_; }

 private:
  std::deque<EvEvent> q_;
  uint32_t cap_;
  uint64_t pending_ = 0;  // dropped since the last queued event
  uint64_t dropped_ = 0;
  uint64_t delivered_ = 0;
};

}  // namespace mrc::ctl
