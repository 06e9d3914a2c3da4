// mrcd configuration: a TOML file (user/mrcd/mrcd.toml.sample documents every
// key) and command-line flags that override it. A bad file is refused at start
// with "FILE:LINE: reason".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codec/packet.hpp"
#include "mrc/result.hpp"

namespace mrc::mrcd {

struct PlaneCfg {
  std::string ifname;
  uint8_t port = 0;
  uint32_t queues = 1;               // rx queues carrying MRC traffic
  std::vector<codec::IpAddr> peers;  // probe targets reachable on this plane
};

struct ProbeCfg {
  uint32_t interval_ms = 1000;  // cadence of policy probe rounds (0 = off)
  uint32_t timeout_ms = 200;    // response timeout of a probe round
  uint32_t evs_per_plane = 2;   // EVs probed per plane and peer when nothing is denied
  uint8_t dscp = 0;             // 0 = the control class
};

struct PolicyCfg {
  bool enabled = true;
  uint32_t interval_ms = 1000;     // evaluation period of the per-EV counters
  double loss_threshold = 0.05;    // lost / sent on an EV in an interval
  double trim_threshold = 0.25;    // trimmed / sent
  double rtt_factor = 4.0;         // RTT above factor x the plane's median is an outlier
  uint64_t min_packets = 64;       // fewer packets in an interval: no verdict
  uint32_t bad_intervals = 3;      // consecutive degraded intervals before a deny
  uint32_t bad_hold_ms = 3000;     // an EV held ASSUMED_BAD this long is denied
  uint32_t restore_probes = 3;     // consecutive good probes before an allow
  uint32_t plane_fail_rounds = 3;  // probe rounds with every probe of a plane lost
  uint32_t plane_restore_rounds = 3;
  double max_denied_fraction = 0.5;    // of a profile's EVs the policy may deny
  uint32_t restore_backoff_ms = 2000;  // a re-denied EV waits this much longer (doubling)
  // mrcd's own EV probes: an EV whose last probe_loss_window probes (counted
  // only in rounds where its plane answered) lost at least this fraction is
  // denied. Catches lossy paths the data path already routes around (their
  // EVs carry too little traffic for the counters). 0 = off.
  double probe_loss_threshold = 0.2;
  uint32_t probe_loss_window = 20;  // probes per verdict (1..64)
};

struct Config {
  std::string path;  // the file, "" without one
  std::string pin_dir = "/sys/fs/bpf/mrc";
  std::string socket = "/run/mrc/mrcd.sock";
  std::string socket_group;                // group that may connect (mode 0660); "" = root only
  std::string metrics = "127.0.0.1:9477";  // "" disables the HTTP endpoint
  // Per-EV series (mrc_ev_*{profile,ev,port}) on /metrics. Off: the per-EV
  // counters are exported summed per (profile, port), so the series count does
  // not grow with the EVs of a profile (observability.md, cardinality).
  bool metrics_per_ev = false;
  std::string log_level = "info";  // error, warn, info, debug
  std::string xdp_mode = "auto";   // auto (native, reported fallback to generic), native, generic
  bool keep_on_exit = true;        // leave XDP attached and the pins in place on exit
  bool reload_xdp = false;         // replace an mrc_xdp already attached (after an upgrade)
  uint16_t udp_port = MRC_UDP_PORT_DEFAULT;
  codec::DscpClasses dscp;
  bool xdp_trim_nack = true;  // answer trimmed packets with NACKs in XDP
  bool xdp_ep_probe = true;   // answer EV probes in XDP
  uint32_t tick_ms = 100;     // housekeeping period
  std::vector<PlaneCfg> planes;
  ProbeCfg probe;
  PolicyCfg policy;
};

// Parses the TOML file. Errors read "FILE:LINE: reason".
Result<Config> load_config(const std::string& path);
// The same checks on a configuration built from flags alone.
Status validate(const Config& c);

// Command line: `mrcd [options]`; `--help` text in usage().
struct Options {
  Config cfg;
  bool check_only = false;  // --check: validate and exit
  bool help = false;
  bool version = false;
};
Result<Options> parse_args(int argc, char** argv);
std::string usage();

}  // namespace mrc::mrcd
