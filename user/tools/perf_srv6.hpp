// mrc_perf --srv6 FILE: an SRv6 uSID EV profile installed in the engine
// directly (no mrcd), one EV per line "PORT CONTAINER", e.g.
// "1 fd00:1:101:201:102:402::" (Documentation/wire-format.md, "SRv6 uSID EVs").
#pragma once

#include <arpa/inet.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "codec/srv6.hpp"
#include "core/types.hpp"
#include "mrc/result.hpp"

namespace mrc::perf {

inline constexpr uint64_t kSrv6ProfileId = 0x5276;  // the id --srv6 installs its profile under

inline Result<core::EvProfile> read_srv6_profile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error(ENOENT, "--srv6: cannot read " + path);
  core::EvProfile p;
  p.mode = core::EvMode::kExplicit;
  p.fmt = codec::EvFmtMode::kSrv6;
  std::string line;
  for (int n = 1; std::getline(in, line); n++) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    unsigned port = 0;
    std::string addr;
    core::EvEntry e;
    if (!(ls >> port >> addr) || port < 1 || port > core::kMaxPorts ||
        inet_pton(AF_INET6, addr.c_str(), e.sid.data()) != 1)
      return make_error(EINVAL,
                        "--srv6: " + path + ":" + std::to_string(n) + ": not \"PORT CONTAINER\"");
    e.port = uint8_t(port);
    e.ev = codec::srv6_entropy(e.sid);
    p.evs.push_back(e);
  }
  if (p.evs.empty()) return make_error(EINVAL, "--srv6: " + path + " lists no EV");
  // Every EV active: each names a distinct path, and the sender spreads
  // its packets over all of them (a retired one leaves its plane one fewer).
  uint32_t per_port[17] = {};
  for (const auto& e : p.evs) p.active_per_plane = std::max(p.active_per_plane, ++per_port[e.port]);
  return p;
}

// A QP's SRv6 EVs for -j: container, hops, port, state, packets sent
// (`p`: the profile --srv6 installed, which names each entropy's container).
template <class Json, class Qp>
Json srv6_ev_json(const Qp& q, const core::EvProfile& p) {
  Json a = Json::array();
  auto evs = q.evs();
  if (!evs.ok()) return a;
  for (const auto& e : *evs) {
    const core::EvEntry* w = nullptr;
    for (const auto& x : p.evs)
      if (x.ev == e.ev && x.port == e.port) w = &x;
    if (!w) continue;  // not an SRv6 QP
    // "ev" as --ev-log writes it; probes_sent > 0: it was ASSUMED_BAD at
    // some point (only retired EVs are probed).
    char evh[9];
    std::snprintf(evh, sizeof evh, "%08x", unsigned(e.ev));
    a.push_back(Json{{"sid", codec::srv6_to_string(w->sid)},
                     {"hops", codec::srv6_hops_string(w->sid)},
                     {"ev", evh},
                     {"port", e.port},
                     {"state", core::to_string(e.state)},
                     {"tx_pkts", e.stats.tx_pkts},
                     {"lost", e.stats.lost},
                     {"probes_sent", e.stats.probes_sent}});
  }
  return a;
}

}  // namespace mrc::perf
