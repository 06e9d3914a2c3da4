// mrcd's Prometheus exposition (Documentation/observability.md lists every
// family): the daemon, ports and XDP, profiles and EVs, QPs, and the
// controller, prober, policy and server counters.
#include <cstring>

#include "loader/xdp_maps.hpp"
#include "mrcd/daemon.hpp"

namespace mrc::mrcd {

using namespace mrc::ctl;

namespace {
using L = std::vector<std::pair<std::string, std::string>>;
}  // namespace

std::string Daemon::metrics() const {
  Expo e;
  e.family("mrcd_up", "gauge", "mrcd is running");
  e.sample("mrcd_up", L{}, uint64_t(1));
  e.family("mrcd_start_time_seconds", "gauge", "when mrcd started (unix time)");
  e.sample("mrcd_start_time_seconds", L{}, double(start_real_) / 1e9);
  metrics_ports(e);
  metrics_xdp(e);
  metrics_profiles(e);
  metrics_evs(e);
  metrics_qps(e);
  metrics_daemon(e);
  return e.str();
}

// Ports: usable, administratively up, link up.
void Daemon::metrics_ports(Expo& e) const {
  e.family("mrc_port_up", "gauge", "port usable (admin enabled and link up)");
  for (const auto& p : store_->regions().ports)
    if (p.configured)
      e.sample("mrc_port_up", L{{"port", std::to_string(p.port)}, {"ifname", p.ifname}},
               uint64_t(p.admin_state == MRC_CTL_PORT_ENABLED && p.link_up));
  e.family("mrc_port_admin_up", "gauge", "port administratively enabled");
  for (const auto& p : store_->regions().ports)
    if (p.configured)
      e.sample("mrc_port_admin_up", L{{"port", std::to_string(p.port)}, {"ifname", p.ifname}},
               uint64_t(p.admin_state == MRC_CTL_PORT_ENABLED));
  e.family("mrc_port_link_up", "gauge", "port link up");
  for (const auto& p : store_->regions().ports)
    if (p.configured)
      e.sample("mrc_port_link_up", L{{"port", std::to_string(p.port)}, {"ifname", p.ifname}},
               uint64_t(p.link_up != 0));
}

// XDP: the attach mode, the counters and the drops of mrc_xdp per plane.
void Daemon::metrics_xdp(Expo& e) const {
  auto& maps = dp_->maps();
  e.family("mrc_xdp_mode", "gauge", "XDP attach mode of a plane interface (1 for the mode in use)");
  for (const Plane& p : dp_->planes())
    e.sample("mrc_xdp_mode",
             L{{"port", std::to_string(p.cfg.port)},
               {"ifname", p.cfg.ifname},
               {"mode", std::string(loader::to_string(p.mode))}},
             uint64_t(1));
  struct Ctr {
    const char* field;
    const char* metric;
    const char* label;  // action or reason label value, nullptr for plain counters
  };
  const Ctr ctrs[] = {{"rx_packets", "mrc_xdp_rx_packets_total", nullptr},
                      {"rx_bytes", "mrc_xdp_rx_bytes_total", nullptr},
                      {"ecn_ce", "mrc_xdp_ecn_ce_packets_total", nullptr},
                      {"pass_non_mrc", "mrc_xdp_actions_total", "pass_non_mrc"},
                      {"redirect_data", "mrc_xdp_actions_total", "redirect_data"},
                      {"redirect_ctrl", "mrc_xdp_actions_total", "redirect_ctrl"},
                      {"redirect_trimmed", "mrc_xdp_actions_total", "redirect_trimmed"},
                      {"tx_trim_nack", "mrc_xdp_actions_total", "tx_trim_nack"},
                      {"tx_ep_response", "mrc_xdp_actions_total", "tx_ep_response"}};
  std::vector<std::pair<uint32_t, std::string>> list = {{0, "(unregistered)"}};
  for (const Plane& p : dp_->planes()) list.push_back({p.cfg.port, p.cfg.ifname});
  std::vector<std::pair<L, mrc_xdp_stats>> st;
  for (const auto& [port, name] : list)
    if (auto s = maps.stats(port))
      st.push_back({L{{"port", std::to_string(port)}, {"ifname", name}}, *s});
  std::string fam;
  for (const Ctr& c : ctrs) {
    if (fam != c.metric) {
      fam = c.metric;
      e.family(
          fam, "counter",
          c.label ? "frames per XDP action" : std::string("XDP ") + c.field + " per plane port");
    }
    size_t idx = 0;
    for (size_t i = 0; i < loader::kStatsFields; i++)
      if (std::strcmp(loader::kStatsFieldNames[i], c.field) == 0) idx = i;
    for (const auto& [l, s] : st) {
      L lab = l;
      if (c.label) lab.push_back({"action", c.label});
      e.sample(fam, lab, loader::stats_field(s, idx));
    }
  }
  e.family("mrc_xdp_drops_total", "counter", "frames mrc_xdp dropped, by reason");
  for (size_t i = 0; i < loader::kStatsFields; i++) {
    std::string n = loader::kStatsFieldNames[i];
    if (n.rfind("drop_", 0) != 0) continue;
    for (const auto& [l, s] : st) {
      L lab = l;
      lab.push_back({"reason", n.substr(5)});
      e.sample("mrc_xdp_drops_total", lab, loader::stats_field(s, i));
    }
  }
}

// EV profiles: their EVs by state and their users.
void Daemon::metrics_profiles(Expo& e) const {
  e.family("mrc_ev_profile_evs", "gauge", "EVs of a profile by state");
  e.family("mrc_ev_profile_users", "gauge", "live QPs using an EV profile");
  std::string evs, users;
  for (uint64_t id : ctl_->ev_profile_ids()) {
    uint32_t n[4] = {};
    for (const auto& x : ctl_->ev_entries(id)) {
      if (!x.populated)
        n[3]++;
      else if (x.state == kEvDenied)
        n[2]++;
      else if (x.state == kEvAssumedBad)
        n[1]++;
      else
        n[0]++;
    }
    const char* names[] = {"good", "assumed_bad", "denied", "unpopulated"};
    for (int k = 0; k < 4; k++)
      e.sample("mrc_ev_profile_evs", L{{"profile", std::to_string(id)}, {"state", names[k]}},
               uint64_t(n[k]));
    e.sample("mrc_ev_profile_users", L{{"profile", std::to_string(id)}},
             uint64_t(ctl_->ev_profile_users(id)));
  }
}

void Daemon::metrics_evs(Expo& e) const {
  // Per-EV counters. By default summed per (profile, port): the series count
  // depends on the ports and profiles, not on the EVs (a 4096-EV profile would
  // otherwise add 7 x 4096 x QP-ports series). One series per EV with
  // metrics_per_ev (--metrics-per-ev).
  if (auto ev = store_->list_evstats()) {
    struct Sum {
      uint64_t tx = 0, lost = 0, trims = 0, ecn = 0, acked = 0, bad = 0;
      uint32_t rtt = 0;
      void add(const mrc_ctl_evstat& v) {
        tx += v.tx_pkts;
        lost += v.lost;
        trims += v.trims;
        ecn += v.ecn;
        acked += v.acked;
        rtt = std::max(rtt, v.rtt_last_ns);
        bad += v.qps_bad;
      }
    };
    const std::pair<const char*, uint64_t Sum::*> ctr[] = {{"tx_packets_total", &Sum::tx},
                                                           {"acked_packets_total", &Sum::acked},
                                                           {"lost_packets_total", &Sum::lost},
                                                           {"trimmed_packets_total", &Sum::trims},
                                                           {"ecn_marked_packets_total", &Sum::ecn}};
    std::map<std::pair<uint64_t, uint8_t>, Sum> agg;
    for (const auto& [k, v] : *ev) agg[{k.profile_id, k.port}].add(v);
    for (const auto& [name, mem] : ctr) {
      const std::string fam = std::string("mrc_ev_profile_") + name;
      e.family(fam, "counter", "per-EV counter summed over the EVs of a profile on a port");
      for (const auto& [k, s] : agg)
        e.sample(fam, L{{"profile", std::to_string(k.first)}, {"port", std::to_string(k.second)}},
                 s.*mem);
    }
    e.family("mrc_ev_profile_rtt_last_max_seconds", "gauge",
             "largest last RTT sample of the EVs of a profile on a port");
    e.family("mrc_ev_profile_qp_evs_assumed_bad", "gauge",
             "(QP, EV) pairs of a profile on a port in ASSUMED_BAD");
    for (const auto& [k, s] : agg) {
      L lab{{"profile", std::to_string(k.first)}, {"port", std::to_string(k.second)}};
      e.sample("mrc_ev_profile_rtt_last_max_seconds", lab, double(s.rtt) / 1e9);
      e.sample("mrc_ev_profile_qp_evs_assumed_bad", lab, s.bad);
    }
    if (cfg_.metrics_per_ev) {
      std::map<std::tuple<uint64_t, uint32_t, uint8_t>, Sum> sum;
      for (const auto& [k, v] : *ev) sum[{k.profile_id, k.wire, k.port}].add(v);
      auto ev_labels = [](const std::tuple<uint64_t, uint32_t, uint8_t>& k) {
        char w[16];
        std::snprintf(w, sizeof(w), "0x%08x", std::get<1>(k));
        return L{{"profile", std::to_string(std::get<0>(k))},
                 {"ev", w},
                 {"port", std::to_string(std::get<2>(k))}};
      };
      for (const auto& [name, mem] : ctr) {
        const std::string fam = std::string("mrc_ev_") + name;
        e.family(fam, "counter", "per-EV counter summed over the QPs reporting it");
        for (const auto& [k, s] : sum) e.sample(fam, ev_labels(k), s.*mem);
      }
      e.family("mrc_ev_rtt_last_seconds", "gauge",
               "last RTT sample of an EV (worst over processes)");
      e.family("mrc_ev_qps_assumed_bad", "gauge", "QPs holding an EV ASSUMED_BAD");
      for (const auto& [k, s] : sum) {
        L lab = ev_labels(k);
        e.sample("mrc_ev_rtt_last_seconds", lab, double(s.rtt) / 1e9);
        e.sample("mrc_ev_qps_assumed_bad", lab, s.bad);
      }
    }
  }
}

// QPs: the counters applications publish.
void Daemon::metrics_qps(Expo& e) const {
  if (auto q = store_->list_qps()) {
    const std::pair<const char*, __u64 mrc_ctl_qp_report::*> f[] = {
        {"mrc_qp_tx_bytes_total", &mrc_ctl_qp_report::tx_bytes},
        {"mrc_qp_tx_packets_total", &mrc_ctl_qp_report::tx_pkts},
        {"mrc_qp_rtx_packets_total", &mrc_ctl_qp_report::rtx_pkts},
        {"mrc_qp_rx_bytes_total", &mrc_ctl_qp_report::rx_bytes},
        {"mrc_qp_rx_packets_total", &mrc_ctl_qp_report::rx_pkts},
        {"mrc_qp_timeouts_total", &mrc_ctl_qp_report::timeouts},
        {"mrc_qp_cwnd_bytes", &mrc_ctl_qp_report::cwnd_bytes},
        {"mrc_qp_inflight_bytes", &mrc_ctl_qp_report::inflight_bytes}};
    auto qp_labels = [](const mrc_ctl_qp_key& k, const mrc_ctl_qp_report& v) {
      return L{{"pid", std::to_string(k.pid)},
               {"dev", std::to_string(k.dev)},
               {"qpn", std::to_string(k.qpn)},
               {"comm", std::string(v.comm, strnlen(v.comm, sizeof(v.comm)))}};
    };
    for (const auto& [name, mem] : f) {
      const bool gauge = std::strstr(name, "_total") == nullptr;
      e.family(name, gauge ? "gauge" : "counter",
               "per-QP value as the application last published it");
      for (const auto& [k, v] : *q) e.sample(name, qp_labels(k, v), v.*mem);
    }
    e.family("mrc_qp_srtt_seconds", "gauge",
             "smoothed RTT of a QP as the application last published it");
    for (const auto& [k, v] : *q)
      e.sample("mrc_qp_srtt_seconds", qp_labels(k, v), double(v.srtt_ns) / 1e9);
  }
}

// Controller, prober, policy, server.
void Daemon::metrics_daemon(Expo& e) const {
  const mrc_ctl_dev& d = store_->dev();
  const auto& cc = ctl_->counters();
  e.family("mrc_ctl_generation", "gauge", "controller state generation");
  e.sample("mrc_ctl_generation", L{}, d.gen);
  e.family("mrc_ctl_ev_reports_total", "counter", "EV reports applications queued");
  e.sample("mrc_ctl_ev_reports_total", L{}, d.evq_pushed);
  e.family("mrc_ctl_ev_reports_dropped_total", "counter", "EV reports lost to a full queue");
  e.sample("mrc_ctl_ev_reports_dropped_total", L{}, d.evq_dropped);
  e.family("mrc_ctl_ev_events_total", "counter", "EV events delivered to controller CQs");
  e.sample("mrc_ctl_ev_events_total", L{}, cc.events);
  e.family("mrc_ctl_ev_reports_by_reason_total", "counter",
           "EV state changes the data path reported, by reason (relapse: a path that passes "
           "probes but not data, e.g. a lower MTU inside it)");
  for (size_t r = 0; r < cc.reports_by_reason.size(); r++)
    if (cc.reports_by_reason[r])
      e.sample("mrc_ctl_ev_reports_by_reason_total",
               L{{"reason", core::to_string(core::EvEventReason(r))}}, cc.reports_by_reason[r]);
  const auto& pc = prober_->counters();
  const auto& ec = ep_->counters();
  e.family("mrc_probe_requests_total", "counter", "endpoint requests sent");
  e.sample("mrc_probe_requests_total", L{}, ec.requests);
  e.family("mrc_probe_responses_total", "counter", "endpoint responses matched");
  e.sample("mrc_probe_responses_total", L{}, ec.responses);
  e.family("mrc_probe_timeouts_total", "counter", "batches that timed out");
  e.sample("mrc_probe_timeouts_total", L{}, ec.timeouts);
  e.family("mrc_probe_unmatched_total", "counter", "responses with no outstanding request");
  e.sample("mrc_probe_unmatched_total", L{}, ec.unmatched + pc.rx_unknown);
  e.family("mrc_probe_rtt_last_seconds", "gauge", "last policy probe RTT per port");
  for (const auto& [port, rtt] : last_rtt_)
    e.sample("mrc_probe_rtt_last_seconds", L{{"port", std::to_string(port)}}, double(rtt) / 1e9);
  if (policy_) {
    const auto& p = policy_->counters();
    e.family("mrc_policy_decisions_total", "counter", "reroute policy decisions by action");
    e.sample("mrc_policy_decisions_total", L{{"action", "deny_ev"}}, p.deny_ev);
    e.sample("mrc_policy_decisions_total", L{{"action", "allow_ev"}}, p.allow_ev);
    e.sample("mrc_policy_decisions_total", L{{"action", "deny_plane"}}, p.deny_plane);
    e.sample("mrc_policy_decisions_total", L{{"action", "allow_plane"}}, p.allow_plane);
    e.sample("mrc_policy_decisions_total", L{{"action", "suppressed"}}, p.suppressed);
  }
  const auto& sc = server_->counters();
  e.family("mrcd_control_requests_total", "counter", "control socket requests");
  e.sample("mrcd_control_requests_total", L{}, sc.requests);
  e.family("mrcd_control_eperm_total", "counter", "requests refused for lack of CAP_NET_ADMIN");
  e.sample("mrcd_control_eperm_total", L{}, sc.eperm);
}

}  // namespace mrc::mrcd
