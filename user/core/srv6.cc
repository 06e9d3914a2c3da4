#include "core/srv6.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "codec/srv6.hpp"

namespace mrc::core {

Status srv6_check_profile(const EvProfile& p) {
  if (p.fmt != codec::EvFmtMode::kSrv6) return {};
  if (p.mode == EvMode::kAuto || p.evs.empty())
    return Error(
        EINVAL, "an SRv6 EV profile needs explicit or generated EVs (AUTO has no uSID containers)");
  std::vector<std::pair<uint32_t, const EvEntry*>> seen;
  seen.reserve(p.evs.size());
  for (const EvEntry& e : p.evs) {
    if (e.sid == std::array<uint8_t, 16>{})
      return Error(EINVAL, "SRv6 EV with an all-zero uSID container");
    if (e.ev != codec::srv6_entropy(e.sid))
      return Error(EINVAL,
                   "SRv6 EV " + codec::srv6_to_string(e.sid) + ": entropy is not the container's");
    seen.push_back({e.ev, &e});
  }
  std::sort(seen.begin(), seen.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 1; i < seen.size(); i++)
    if (seen[i].first == seen[i - 1].first && seen[i].second->sid != seen[i - 1].second->sid)
      return Error(EINVAL, "SRv6 EVs " + codec::srv6_to_string(seen[i - 1].second->sid) + " and " +
                               codec::srv6_to_string(seen[i].second->sid) + " share an entropy");
  return {};
}

bool srv6_ends_at(const EvEntry& e, const codec::IpAddr& peer) {
  return peer.ver == codec::IpVersion::kV6 && codec::srv6_final(e.sid) == peer.b;
}

void srv6_set_dst(std::span<uint8_t> frame, size_t l3, const std::array<uint8_t, 16>& sid) {
  if (frame.size() >= l3 + 40) std::memcpy(frame.data() + l3 + 24, sid.data(), sid.size());
}

}  // namespace mrc::core
