// SPDX-License-Identifier: (GPL-2.0 OR BSD-3-Clause)
#include "core/engine_keys.hpp"

#include <cerrno>
#include <string>

namespace mrc::core {
namespace {

constexpr uint64_t kMaxUs = 3'600'000'000ull;
constexpr uint64_t kMaxNs32Us = UINT32_MAX / 1000;  // kept in ns in 32 bits
constexpr uint64_t kMaxU32 = UINT32_MAX;
const EngineKey kEngineKeys[] = {
    {"probe_initial_us", kMaxUs,
     [](EngineConfig& e, uint64_t n) { e.paths.probe_initial = n * 1000; }},
    {"probe_max_us", kMaxUs, [](EngineConfig& e, uint64_t n) { e.paths.probe_max = n * 1000; }},
    {"plane_relapse_window_us", kMaxUs,
     [](EngineConfig& e, uint64_t n) { e.paths.plane_relapse_window = n * 1000; }},
    {"plane_relapse_initial_us", kMaxUs,
     [](EngineConfig& e, uint64_t n) { e.paths.plane_relapse_initial = n * 1000; }},
    {"plane_relapse_max_us", kMaxUs,
     [](EngineConfig& e, uint64_t n) { e.paths.plane_relapse_max = n * 1000; }},
    {"probe_relapse_max_us", kMaxUs,
     [](EngineConfig& e, uint64_t n) { e.paths.probe_relapse_max = n * 1000; }},
    {"probe_timeout_us", kMaxUs,
     [](EngineConfig& e, uint64_t n) { e.paths.probe_timeout = n * 1000; }},
    {"probe_inflight_max", kMaxU32,
     [](EngineConfig& e, uint64_t n) { e.paths.probe_inflight_max = uint32_t(n); }},
    {"probe_successes", kMaxU32,
     [](EngineConfig& e, uint64_t n) { e.paths.probe_successes = uint32_t(n); }},
    {"plane_suspect_losses", kMaxU32,
     [](EngineConfig& e, uint64_t n) { e.paths.plane_suspect_losses = uint32_t(n); }},
    {"plane_quiet_max_us", kMaxUs,
     [](EngineConfig& e, uint64_t n) { e.paths.plane_quiet_max = n * 1000; }},
    {"loss_needs_plane_evidence", 1,
     [](EngineConfig& e, uint64_t n) { e.paths.loss_needs_plane_evidence = n != 0; }},
    {"plane_lossy_ppm", kMaxU32,
     [](EngineConfig& e, uint64_t n) { e.paths.plane_lossy_ppm = uint32_t(n); }},
    {"plane_lossy_ratio", kMaxU32,
     [](EngineConfig& e, uint64_t n) { e.paths.plane_lossy_ratio = uint32_t(n); }},
    {"plane_lossy_div", kMaxU32,
     [](EngineConfig& e, uint64_t n) { e.paths.plane_lossy_div = uint32_t(n); }},
    {"plane_window", kMaxU32,
     [](EngineConfig& e, uint64_t n) { e.paths.plane_window = uint32_t(n); }},
    {"plane_lossy_keep_evs", 1,
     [](EngineConfig& e, uint64_t n) { e.paths.plane_lossy_keep_evs = n != 0; }},
    {"ev_outlier_ratio", kMaxU32,
     [](EngineConfig& e, uint64_t n) { e.paths.ev_outlier_ratio = uint32_t(n); }},
    {"ev_outlier_min", kMaxU32,
     [](EngineConfig& e, uint64_t n) { e.paths.ev_outlier_min = uint32_t(n); }},
    {"min_reorder_us", kMaxUs, [](EngineConfig& e, uint64_t n) { e.min_reorder = n * 1000; }},
    {"reo_extra_cap", 1, [](EngineConfig& e, uint64_t n) { e.reo_extra_cap = n != 0; }},
    {"min_rto_us", kMaxUs, [](EngineConfig& e, uint64_t n) { e.min_rto = n * 1000; }},
    {"sack_bytes", kMaxU32, [](EngineConfig& e, uint64_t n) { e.sack_bytes = uint32_t(n); }},
    {"sack_each_ce", 1, [](EngineConfig& e, uint64_t n) { e.sack_each_ce = n != 0; }},
    {"sack_delay_us", kMaxUs, [](EngineConfig& e, uint64_t n) { e.sack_delay = n * 1000; }},
    {"tx_quantum", kMaxU32, [](EngineConfig& e, uint64_t n) { e.tx_quantum = uint32_t(n); }},
    {"evs_per_port", kMaxU32,
     [](EngineConfig& e, uint64_t n) { e.auto_evs_per_port = uint32_t(n); }},
    {"active_per_port", kMaxU32,
     [](EngineConfig& e, uint64_t n) { e.auto_active_per_port = uint32_t(n); }},
    {"cc_target_delay_us", kMaxNs32Us,
     [](EngineConfig& e, uint64_t n) { e.default_cc.nscc.target_delay = uint32_t(n * 1000); }},
    {"cc_min_target_us", kMaxUs, [](EngineConfig& e, uint64_t n) { e.cc_min_target = n * 1000; }},
    {"cc_max_target_us", kMaxUs, [](EngineConfig& e, uint64_t n) { e.cc_max_target = n * 1000; }},
    {"cc_max_cwnd", kMaxU32,
     [](EngineConfig& e, uint64_t n) { e.default_cc.nscc.max_cwnd = uint32_t(n); }},
    {"cc_base_rtt_us", kMaxNs32Us,
     [](EngineConfig& e, uint64_t n) { e.default_cc.nscc.base_rtt = uint32_t(n * 1000); }},
    {"cc_init_window", kMaxU32,
     [](EngineConfig& e, uint64_t n) { e.cc_init_window = uint32_t(n); }},
    {"cc_delay_md", 1, [](EngineConfig& e, uint64_t n) { e.cc_delay_md = n != 0; }},
    {"cc_queue_target_us", kMaxUs,
     [](EngineConfig& e, uint64_t n) { e.cc_queue_target = n * 1000; }},
    {"cc_qa", 1, [](EngineConfig& e, uint64_t n) { e.default_cc.nscc.disable_qa = n == 0; }},
    {"cc_qa_floor_us", kMaxUs, [](EngineConfig& e, uint64_t n) { e.cc_qa_floor = n * 1000; }},
    {"cc_qa_standing", 1, [](EngineConfig& e, uint64_t n) { e.cc_qa_standing = n != 0; }},
    {"cc_qa_fabric", 1, [](EngineConfig& e, uint64_t n) { e.cc_qa_fabric = n != 0; }},
    {"cc_qa_rate_gate", 1, [](EngineConfig& e, uint64_t n) { e.cc_qa_rate_gate = n != 0; }},
    {"cc_qa_cut_full", 1, [](EngineConfig& e, uint64_t n) { e.cc_qa_cut_full = n != 0; }},
    {"probe_delivery", 1, [](EngineConfig& e, uint64_t n) { e.probe_delivery = n != 0; }},
    {"silent_plane_pace", 1,
     [](EngineConfig& e, uint64_t n) { e.paths.silent_plane_pace = n != 0; }},
    {"silent_suspect_wait_us", kMaxUs,
     [](EngineConfig& e, uint64_t n) { e.paths.silent_suspect_wait = n * 1000; }},
    {"quiet_plane_pace", 1, [](EngineConfig& e, uint64_t n) { e.paths.quiet_plane_pace = n != 0; }},
    {"dark_plane_credit", 1,
     [](EngineConfig& e, uint64_t n) { e.paths.dark_plane_credit = n != 0; }},
    {"sack_plane_gap", kMaxU32,
     [](EngineConfig& e, uint64_t n) { e.paths.sack_plane_gap = uint32_t(n); }},
    {"cc_qa_fabric_on_ecn", 1, [](EngineConfig& e, uint64_t n) { e.cc_qa_fabric_on_ecn = n != 0; }},
    {"cc_share_base_rtt", 1, [](EngineConfig& e, uint64_t n) { e.cc_share_base_rtt = n != 0; }},
    {"report_all_ev_events", 1,
     [](EngineConfig& e, uint64_t n) { e.report_all_ev_events = n != 0; }},
    {"probe_rate", kMaxU32, [](EngineConfig& e, uint64_t n) { e.probe_rate = uint32_t(n); }},
    {"probe_burst", kMaxU32, [](EngineConfig& e, uint64_t n) { e.probe_burst = uint32_t(n); }},
};

}  // namespace

std::span<const EngineKey> engine_keys() { return kEngineKeys; }

std::optional<uint64_t> parse_whole(std::string_view v) {
  if (v.empty() || v.size() > 20) return std::nullopt;
  uint64_t n = 0;
  for (char c : v) {
    if (c < '0' || c > '9' || n > (UINT64_MAX - uint64_t(c - '0')) / 10) return std::nullopt;
    n = n * 10 + uint64_t(c - '0');
  }
  return n;
}

const EngineKey* find_engine_key(std::string_view name) {
  for (const auto& ek : kEngineKeys)
    if (name == ek.name) return &ek;
  return nullptr;
}

Status apply_engine_settings(std::string_view list, EngineConfig* e, std::string_view what) {
  EngineConfig out = *e;
  size_t pos = 0;
  while (pos < list.size()) {
    const size_t end = list.find_first_of(", \t\n", pos);
    const std::string_view item = list.substr(pos, end == std::string_view::npos ? end : end - pos);
    pos = end == std::string_view::npos ? list.size() : end + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    const EngineKey* ek =
        eq == std::string_view::npos ? nullptr : find_engine_key(item.substr(0, eq));
    if (!ek)
      return Error(EINVAL, std::string(what) + ": '" + std::string(item) +
                               "' is not KEY=VALUE with a known KEY (mrc_perf --help lists them)");
    const std::string_view v = item.substr(eq + 1);
    const std::optional<uint64_t> n = parse_whole(v);
    if (!n || *n > ek->max)
      return Error(EINVAL, std::string(what) + ": bad value for " + ek->name + ": '" +
                               std::string(v) + "' (a whole number from 0 to " +
                               std::to_string(ek->max) + ")");
    ek->set(out, *n);
  }
  *e = std::move(out);
  return ok_status();
}

}  // namespace mrc::core
