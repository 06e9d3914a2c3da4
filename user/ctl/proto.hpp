// The JSON mrcd and mrcctl exchange over mrcd's unix socket, and that
// `mrcctl -j` prints. One request per line, one response per line:
//
//   request   {"id": 7, "op": "ev_profile.modify", "args": {...}}
//   response  {"id": 7, "ok": true, "result": {...}}
//             {"id": 7, "ok": false, "error": {"object": "ev-profile 5",
//              "errno": 16, "name": "EBUSY", "message": "..."}, "result": {...}}
//
// The object schemas (dev, port, ev-fmt, ev-profile, ev, cc-profile, qp,
// probe, event, decision, stats) are built here and documented in
// Documentation/observability.md ("mrcctl JSON"); they are stable: fields
// are only ever added.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>

#include "ctl/controller.hpp"
#include "ctl/types.hpp"
#include "mrc/result.hpp"

namespace mrc::ctl::proto {

using json = nlohmann::json;

inline constexpr int kProtoVersion = 1;

const char* errno_name(int e);
json error_json(const Error& e, const std::string& object);

// Non-throwing accessors of request arguments: absent -> nullopt, present but
// of the wrong type or range -> error naming the key.
Result<std::optional<uint64_t>> get_u64(const json& args, const char* key,
                                        uint64_t max = UINT64_MAX);
Result<std::optional<std::string>> get_str(const json& args, const char* key);
Result<std::optional<bool>> get_bool(const json& args, const char* key);
Result<std::optional<double>> get_num(const json& args, const char* key);
// "a4@1" or {"ev": "a4", "port": 1}
Result<Ev> ev_from_json(const json& j);
json ev_json(const Ev& e);
// State names (good, assumed_bad, denied; online, offline, init; explicit, generated, auto; stev,
// udp).
Result<uint32_t> ev_state_from(const std::string& s);
Result<uint32_t> profile_state_from(const std::string& s);
Result<uint32_t> ev_mode_from(const std::string& s);
Result<uint32_t> fmt_mode_from(const std::string& s);
Result<codec::EvField> field_from_json(const json& j);

// Objects.
json port_json(const mrc_ctl_port& p);
json device_json(const Controller& c);
json fmt_json(const mrc_ctl_fmt& f);
json evp_json(const Controller& c, const mrc_ctl_evp& p, bool with_evs);
json ev_entry_json(size_t index, const mrc_ctl_ev_entry& e);
// ... and, of an SRv6 profile, the EV's uSID container ("sid") and its hops.
json ev_entry_json(const Controller& c, const mrc_ctl_evp& p, size_t index,
                   const mrc_ctl_ev_entry& e);
// The per-EV counters applications publish (mrc_ctl_evstat), summed over the
// reporting processes per (profile, wire, port): counts add up, rtt_min_ns is
// the smallest, rtt_last_ns and update_ns the largest.
struct EvCounterSum {
  mrc_ctl_evstat s{};
  uint32_t reports = 0;  // processes whose report was summed
};
using EvCounterKey = std::tuple<uint64_t, uint32_t, uint8_t>;  // profile, wire, port
std::map<EvCounterKey, EvCounterSum> sum_evstats(const EvStatList& list);
// The "counters" object of `ev show` (age_ms relative to now_ns, CLOCK_MONOTONIC).
json ev_counters_json(const EvCounterSum& c, uint64_t now_ns);
json cc_json(const Controller& c, const mrc_ctl_cc& p);
json qp_json(const mrc_ctl_qp_key& k, const mrc_ctl_qp_report& r, uint64_t now_ns);
json event_json(const EvEvent& e);
json ip_json(const codec::IpAddr& ip);
bool parse_ip(const std::string& s, codec::IpAddr* out);
std::string ip_string(const codec::IpAddr& ip);

}  // namespace mrc::ctl::proto
