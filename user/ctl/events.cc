#include "ctl/events.hpp"

#include <algorithm>

namespace mrc::ctl {

void EvEventCq::push(const EvEvent& e) {
  if (q_.size() >= cap_) {
    pending_++;
    dropped_++;
    return;
  }
  q_.push_back(e);
  q_.back().drop_count = uint32_t(std::min<uint64_t>(pending_, UINT32_MAX));
  pending_ = 0;
}

size_t EvEventCq::poll(std::span<EvEvent> out) {
  size_t n = std::min(out.size(), q_.size());
  for (size_t i = 0; i < n; i++) {
    out[i] = std::move(q_.front());
    q_.pop_front();
  }
  delivered_ += n;
  return n;
}

}  // namespace mrc::ctl
