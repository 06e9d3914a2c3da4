// mrc_perf: bandwidth and latency of MRC between two hosts, in the manner of
// perftest's ib_write_bw / ib_write_lat.
//
//   mrc_perf server -d eth1,eth2,eth3,eth4 [options]
//   mrc_perf client PEER -d eth1,eth2,eth3,eth4 [options]
//
// PEER is the server's address for the out-of-band TCP exchange (any
// interface); MRC traffic then flows over the plane interfaces given by -d.
// Run `mrc_perf --help` for the options.
#include <getopt.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/engine_keys.hpp"
#include "lib/exchange.hpp"
#include "lib/neigh.hpp"
#include "mrc/mrc.hpp"
#include "tools/perf_srv6.hpp"

using namespace mrc;
using Clock = std::chrono::steady_clock;

namespace {

// SIGINT/SIGTERM end the run cleanly: the Context's destructor removes the
// XDP program and the map entries it added.
std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop.store(true); }

constexpr uint64_t kDefaultInflightBytes = 128ull << 20;

struct Opts {
  bool server = false;
  std::string peer;
  std::vector<std::string> devs;
  std::string bind = "0.0.0.0";
  uint16_t port = 18515;
  uint32_t size = 65536;
  uint32_t qps = 1;
  bool imm = false;
  double duration = 5;
  uint64_t iters = 0;
  uint32_t inflight = 16;
  bool inflight_set = false;  // -t given (else at most kDefaultInflightBytes in flight)
  uint32_t mtu = 0;           // -m (0: the largest every plane of both ends carries)
  bool lat = false;
  bool json = false;
  bool verify = false;
  bool ipv6 = false;
  double interval = 1;
  uint32_t sample_ms = 0;
  uint8_t timeout = 14;
  uint8_t retry_linear = 7, retry_exp = 7;
  bool generic = false, busy_poll = false;
  uint32_t frame_chunks = 1;  // --frame-chunks: UMEM frames per packet (multi-buffer above 1)
  uint32_t idle_spin_us = 0;  // --idle-spin: DeviceOptions::idle_spin_us
  uint32_t coalesce_us = 0;   // --coalesce: DeviceOptions::engine_coalesce_us
  int cpu = -1;
  EngineSched sched = EngineSched::kDefault;  // --sched: DeviceOptions::engine_sched
  uint32_t queues = 0;
  bool no_cc = false;
  bool counters = false;
  TxBackend tx = TxBackend::kXsk;         // --tx: xsk, live or auto
  int live_min = -1;                      // --tx live/N: DeviceOptions::live_tx_min (-1: default)
  Progress progress = Progress::kThread;  // --progress: thread or app
  uint32_t spin_us = 0;                   // --spin-us: polling before sleeping (app)
  uint32_t progress_idle_us = 0;          // --progress-idle-us (0: the library's default)
  uint32_t clients = 1;                   // server: clients served at once
  uint32_t slots = 0;                     // message slots per QP (0: 2 x inflight)
  std::vector<std::pair<std::string, std::string>> engine;  // --engine KEY=VALUE
  std::string pin_dir = MRC_PIN_DIR_DEFAULT;
  bool no_mrcd = false;
  std::string ev_log;  // client: every EV state change, one JSON line each
  bool mem = false;    // --mem: memory per QP (idle, connected) and after the run
  uint64_t ev_profile = 0, cc_profile = 0;  // mrcd's profiles (0: the built-in ones)
  std::string counters_json;     // --counters-json: every counter at exit, one JSON object
  std::string srv6;              // --srv6 FILE: SRv6 uSID EVs (perf_srv6.hpp)
  core::EvProfile srv6_profile;  // read from it while parsing the options
  uint32_t srv6_qps = ~0u;       // --srv6-qps N: only the first N QPs use them
};

FILE* g_ev_log = nullptr;

[[noreturn]] void usage(int code) {
  std::fprintf(
      code ? stderr : stdout,
      "usage: mrc_perf server -d IF[,IF...] [options]\n"
      "       mrc_perf client PEER -d IF[,IF...] [options]\n"
      "       mrc_perf --version\n"
      "  -d, --dev IFS        plane interfaces, in port order (required)\n"
      "  -p, --port N         TCP port of the out-of-band exchange (18515)\n"
      "  -B, --bind ADDR      server: address to listen on (0.0.0.0)\n"
      "  -s, --size BYTES     message size (65536)\n"
      "  -q, --qps N          QPs (1)\n"
      "  -i, --imm            RDMA WRITE with immediate (default: RDMA WRITE)\n"
      "  -D, --duration SEC   length of the run (5)\n"
      "  -n, --iters N        messages per QP instead of a duration\n"
      "  -t, --inflight N     messages outstanding per QP (16; by default at most 128 MiB:\n"
      "                       -s 67108864 has 2)\n"
      "  -m, --mtu BYTES      path MTU (payload bytes per packet; default: the largest\n"
      "                       every plane of both ends carries, at most 3392 with one\n"
      "                       frame chunk); a plane that cannot carry -m is an error\n"
      "  -l, --lat            latency mode: WRITE-with-immediate ping-pong\n"
      "  -j, --json           machine-readable output\n"
      "  -v, --verify         check the data byte for byte\n"
      "  -6, --ipv6           use the planes' IPv6 addresses\n"
      "  -I, --interval SEC   report interval (1)\n"
      "  -V, --version        print the version and exit\n"
      "      --sample-ms MS   server: JSON line of received bytes every MS ms; client:\n"
      "                       JSON line (\"dir\":\"tx\") of bytes sent, the congestion\n"
      "                       window, bytes in flight, smoothed and smallest RTT,\n"
      "                       quick adapt's cuts and gated windows, planes gone\n"
      "                       silent and quiet so far, ACK timeouts and tail-loss\n"
      "                       probes so far, and QP 0's dark planes now\n"
      "      --timeout N      QP ACK timeout 1.024us x 2^N (14)\n"
      "      --retry L,E      linear and exponential retries (7,7)\n"
      "      --generic        attach XDP in generic mode\n"
      "      --busy-poll      busy-polling sockets and engine\n"
      "      --progress MODE  who runs the engine: thread (the device's engine thread)\n"
      "                       or app (this program's thread while it waits for\n"
      "                       completions; the engine thread only as a fallback)\n"
      "      --spin-us N      poll the CQ for N us before sleeping: in\n"
      "                       Context::progress() (--progress app; 0: sleep once a pass\n"
      "                       finds nothing) or on the completion channel (engine\n"
      "                       thread; 0: after 64 empty polls)\n"
      "      --progress-idle-us N  --progress app: the engine thread takes over when\n"
      "                       no pass came for N us (DeviceOptions::progress_idle_us)\n"
      "      --cpu N          pin the engine thread\n"
      "      --sched MODE     engine thread scheduling: default ($MRC_ENGINE_SCHED, else\n"
      "                       nice), normal, nice (nice -10), fifo (SCHED_FIFO 1 while it\n"
      "                       serves bursts), dedicated (needs --cpu: never sleeps)\n"
      "      --queues N       rx queues per interface with a socket (all)\n"
      "      --no-cc          congestion control off\n"
      "      --counters       print engine, progress, AF_XDP and XDP counters at the end\n"
      "      --counters-json FILE  write every counter at exit (also after an error) to FILE\n"
      "                       as one JSON object: engine (parse errors by name), every QP,\n"
      "                       XDP per port by name, AF_XDP\n"
      "      --tx MODE        TX backend: xsk (AF_XDP), live (XDP live frames, path MTU\n"
      "                       clamped to fit them; live/N: iterations with fewer than N\n"
      "                       frames use AF_XDP, 16) or auto (live if it works; xsk)\n"
      "      --frame-chunks N multi-buffer AF_XDP: a packet may fill N UMEM frames of 4 KiB\n"
      "                       (1..17; 1 = single-buffer). -m up to about N x 3.8 KB; the\n"
      "                       planes' MTU must carry it (fabric.sh mtu=)\n"
      "      --idle-spin US   the engine thread polls US microseconds (yielding) before it\n"
      "                       sleeps (0: 64 passes)\n"
      "      --coalesce US    wake-up coalescing: in a transfer the engine thread waits US\n"
      "                       microseconds between passes instead of waking per packet\n"
      "                       batch (0..1000; 0: off, or $MRC_ENGINE_COALESCE_US)\n"
      "      --clients N      server: serve N clients at once (each with --qps QPs; 1);\n"
      "                       they start together once all N are connected\n"
      "      --slots N        message slots per QP in the target buffer (2 x inflight);\n"
      "                       both sides must agree. With -i the server grants credits:\n"
      "                       the client starts a message only once the server has a\n"
      "                       receive posted for it and (--verify: checked on arrival)\n"
      "                       has checked the message that used its slot before\n"
      "      --engine K=V     engine tunable (repeatable): probe_initial_us, probe_max_us,\n"
      "                       probe_relapse_max_us,\n"
      "                       probe_timeout_us, probe_successes, probe_inflight_max\n"
      "                       (probes of one QP at once; 0: no limit), plane_suspect_losses,\n"
      "                       plane_quiet_max_us (0: plane suspicion ignores the delivery\n"
      "                       delay tail), loss_needs_plane_evidence (0: a loss judged by\n"
      "                       time alone retires its EV),\n"
      "                       plane_lossy_ppm (0: no down-weighting of a lossy plane),\n"
      "                       plane_lossy_ratio, plane_lossy_div, plane_window,\n"
      "                       plane_lossy_keep_evs, ev_outlier_ratio (0: an EV losing\n"
      "                       far more than its lossy plane is kept), ev_outlier_min,\n"
      "                       plane_relapse_window_us (0: no plane relapse back-off;\n"
      "                       a plane retired again within it of its readmission is\n"
      "                       held off plane_relapse_initial_us << (relapses - 1), up\n"
      "                       to plane_relapse_max_us), silent_plane_pace (0: a plane\n"
      "                       that went silent is not paced), quiet_plane_pace (0: nor\n"
      "                       one that merely looks dark before a loss is judged),\n"
      "                       dark_plane_credit (0: a dark plane's bytes in flight hold\n"
      "                       the congestion window), sack_plane_gap (as responder,\n"
      "                       SACKs go to planes that delivered one of the QP's last\n"
      "                       N+1 data packets; default 16, 0: every plane that is up),\n"
      "                       silent_suspect_wait_us (a silent plane's suspicion waits\n"
      "                       this long; default 12000, 0: none), probe_delivery (0: a\n"
      "                       probe's answer is no delivery),\n"
      "                       min_reorder_us, reo_extra_cap (0: what spurious\n"
      "                       retransmissions taught the reordering windows counts in\n"
      "                       full, not at most the smoothed RTT),\n"
      "                       min_rto_us, sack_bytes, sack_delay_us, sack_each_ce (1: a\n"
      "                       SACK for every ECN-marked packet, not the burst's),\n"
      "                       tx_quantum,\n"
      "                       evs_per_port, active_per_port, cc_target_delay_us,\n"
      "                       cc_min_target_us (floor of a learned target),\n"
      "                       cc_max_target_us (its ceiling; 0: none),\n"
      "                       cc_qa (0: NSCC without quick adapt), cc_max_cwnd,\n"
      "                       cc_init_window (bytes, default 131072; 0: start at\n"
      "                       cc_max_cwnd, no slow start), cc_delay_md (0: high\n"
      "                       delay without ECN ignored),\n"
      "                       cc_queue_target_us (of that decrease; 0: NSCC's target),\n"
      "                       cc_qa_fabric (quick adapt on the fabric's delay),\n"
      "                       cc_qa_fabric_on_ecn (the same from the first ECN mark;\n"
      "                       default 1), cc_qa_rate_gate (quick adapt's gate per\n"
      "                       window length until then; default 1),\n"
      "                       cc_qa_cut_full (quick adapt also \"cuts\" a window to\n"
      "                       its own size; default 0),\n"
      "                       cc_base_rtt_us, report_all_ev_events,\n"
      "                       probe_rate (EV probes per second, all QPs; 0: no limit),\n"
      "                       probe_burst\n"
      "      --pin-dir DIR    mrcd's pinned maps (" MRC_PIN_DIR_DEFAULT
      "): with mrcd running the\n"
      "                       device uses its XDP program instead of loading one\n"
      "      --no-mrcd        always load our own XDP program\n"
      "      --ev-log FILE    client: write every EV state change (time, EV, port, from, to,\n"
      "                       reason) to FILE as JSON lines\n"
      "      --mem            report memory per QP: RSS and heap before the QPs are created,\n"
      "                       with every QP connected and idle (200 ms after the handshake,\n"
      "                       before any traffic) and at the end of the run\n"
      "      --ev-profile ID  QPs use mrcd's EV profile ID (mrcctl ev-profile create)\n"
      "      --cc-profile ID  QPs use mrcd's CC profile ID (mrcctl cc-profile create)\n"
      "      --srv6 FILE      QPs send over SRv6 uSID EVs: FILE lists one per line,\n"
      "                       \"PORT CONTAINER\" (installed in the engine, not mrcd)\n"
      "      --srv6-qps N     only the first N QPs use --srv6 (the others: UDP/flow-label EVs)\n");
  std::exit(code);
}

[[noreturn]] void version() {
  std::printf("mrc_perf %s\n", MRC_VERSION);
  std::exit(0);
}

// Every numeric option's value: the whole argument a number within
// [lo, hi], else the option is named and the program exits with code 2.
template <class T>
T num(const char* opt, const std::string& arg, T lo = std::numeric_limits<T>::lowest(),
      T hi = std::numeric_limits<T>::max()) {
  bool ok = false, in_range = false;
  T v{};
  if (!arg.empty() && !std::isspace(static_cast<unsigned char>(arg[0]))) {
    char* end = nullptr;
    errno = 0;
    if constexpr (std::is_floating_point_v<T>) {
      const double d = std::strtod(arg.c_str(), &end);
      ok = *end == 0 && std::isfinite(d) && errno == 0;
      in_range = d >= double(lo) && d <= double(hi);
      v = T(d);
    } else if constexpr (std::is_signed_v<T>) {
      const long long n = std::strtoll(arg.c_str(), &end, 10);
      ok = *end == 0;
      in_range = errno == 0 && n >= (long long)lo && n <= (long long)hi;
      v = T(n);
    } else {
      const unsigned long long n = std::strtoull(arg.c_str(), &end, 10);
      ok = *end == 0 && arg[0] != '-';
      in_range = errno == 0 && n >= (unsigned long long)lo && n <= (unsigned long long)hi;
      v = T(n);
    }
  }
  if (!ok) {
    std::fprintf(stderr, "mrc_perf: %s: '%s' is not a number\n", opt, arg.c_str());
    std::exit(2);
  }
  if (!in_range) {
    std::ostringstream r;
    r << "mrc_perf: " << opt << ": '" << arg << "' is out of range (" << +lo << ".." << +hi
      << ")\n";
    std::fputs(r.str().c_str(), stderr);
    std::exit(2);
  }
  return v;
}

enum LongOption {
  kSample = 1000,
  kTimeout,
  kRetry,
  kGeneric,
  kBusy,
  kFrameChunks,
  kIdleSpin,
  kCoalesce,
  kCpu,
  kSched,
  kQueues,
  kNoCc,
  kCounters,
  kTx,
  kClients,
  kSlots,
  kEngine,
  kPinDir,
  kNoMrcd,
  kEvLog,
  kMem,
  kEvProfile,
  kCcProfile,
  kSrv6,
  kSrv6Qps,
  kProgress,
  kSpinUs,
  kProgressIdle,
  kCountersJson
};

const option kLongOptions[] = {{"dev", required_argument, nullptr, 'd'},
                               {"port", required_argument, nullptr, 'p'},
                               {"bind", required_argument, nullptr, 'B'},
                               {"size", required_argument, nullptr, 's'},
                               {"qps", required_argument, nullptr, 'q'},
                               {"imm", no_argument, nullptr, 'i'},
                               {"duration", required_argument, nullptr, 'D'},
                               {"iters", required_argument, nullptr, 'n'},
                               {"inflight", required_argument, nullptr, 't'},
                               {"mtu", required_argument, nullptr, 'm'},
                               {"lat", no_argument, nullptr, 'l'},
                               {"json", no_argument, nullptr, 'j'},
                               {"verify", no_argument, nullptr, 'v'},
                               {"ipv6", no_argument, nullptr, '6'},
                               {"interval", required_argument, nullptr, 'I'},
                               {"sample-ms", required_argument, nullptr, kSample},
                               {"timeout", required_argument, nullptr, kTimeout},
                               {"retry", required_argument, nullptr, kRetry},
                               {"generic", no_argument, nullptr, kGeneric},
                               {"busy-poll", no_argument, nullptr, kBusy},
                               {"frame-chunks", required_argument, nullptr, kFrameChunks},
                               {"idle-spin", required_argument, nullptr, kIdleSpin},
                               {"coalesce", required_argument, nullptr, kCoalesce},
                               {"cpu", required_argument, nullptr, kCpu},
                               {"sched", required_argument, nullptr, kSched},
                               {"queues", required_argument, nullptr, kQueues},
                               {"no-cc", no_argument, nullptr, kNoCc},
                               {"help", no_argument, nullptr, 'h'},
                               {"version", no_argument, nullptr, 'V'},
                               {"counters", no_argument, nullptr, kCounters},
                               {"counters-json", required_argument, nullptr, kCountersJson},
                               {"tx", required_argument, nullptr, kTx},
                               {"clients", required_argument, nullptr, kClients},
                               {"slots", required_argument, nullptr, kSlots},
                               {"engine", required_argument, nullptr, kEngine},
                               {"pin-dir", required_argument, nullptr, kPinDir},
                               {"no-mrcd", no_argument, nullptr, kNoMrcd},
                               {"ev-log", required_argument, nullptr, kEvLog},
                               {"mem", no_argument, nullptr, kMem},
                               {"ev-profile", required_argument, nullptr, kEvProfile},
                               {"cc-profile", required_argument, nullptr, kCcProfile},
                               {"srv6", required_argument, nullptr, kSrv6},
                               {"srv6-qps", required_argument, nullptr, kSrv6Qps},
                               {"progress", required_argument, nullptr, kProgress},
                               {"spin-us", required_argument, nullptr, kSpinUs},
                               {"progress-idle-us", required_argument, nullptr, kProgressIdle},
                               {nullptr, 0, nullptr, 0}};

// The role (server, or client and its peer) from argv[1] and argv[2].
void parse_role(Opts& o, int argc, char** argv) {
  if (argc < 2) usage(2);
  std::string role = argv[1];
  if (role == "-h" || role == "--help") usage(0);
  if (role == "-V" || role == "--version") version();
  if (role == "server") {
    o.server = true;
  } else if (role == "client") {
    if (argc < 3) usage(2);
    o.peer = argv[2];
  } else {
    usage(2);
  }
}

// --tx xsk|live|live/N|auto.
void parse_tx(Opts& o, const char* arg) {
  if (!std::strcmp(arg, "xsk"))
    o.tx = TxBackend::kXsk;
  else if (!std::strcmp(arg, "live"))
    o.tx = TxBackend::kLive;
  else if (!std::strncmp(arg, "live/", 5)) {
    o.tx = TxBackend::kLive;
    o.live_min = num<int>("--tx live/N", arg + 5, 0, 1 << 20);
  } else if (!std::strcmp(arg, "auto"))
    o.tx = TxBackend::kAuto;
  else
    usage(2);
}

std::pair<std::string, std::string> parse_engine_kv(const std::string& kv);  // --engine, below

// A long option without a short form (c: its LongOption) with its
// argument; throws std::invalid_argument on a malformed value.
void apply_long_option(Opts& o, int c, const char* arg) {
  switch (c) {
    case kSample:
      o.sample_ms = num<uint32_t>("--sample-ms", arg);
      break;
    case kTimeout:
      o.timeout = num<uint8_t>("--timeout", arg, 0, 31);
      break;
    case kRetry: {
      auto comma = std::string(arg).find(',');
      if (comma == std::string::npos) throw std::invalid_argument("--retry L,E");
      o.retry_linear = num<uint8_t>("--retry", std::string(arg).substr(0, comma), 0, 7);
      o.retry_exp = num<uint8_t>("--retry", std::string(arg).substr(comma + 1), 0, 7);
      break;
    }
    case kGeneric:
      o.generic = true;
      break;
    case kBusy:
      o.busy_poll = true;
      break;
    case kFrameChunks:
      o.frame_chunks = num<uint32_t>("--frame-chunks", arg, 1, 17);
      break;
    case kIdleSpin:
      o.idle_spin_us = num<uint32_t>("--idle-spin", arg);
      break;
    case kCoalesce:
      o.coalesce_us = num<uint32_t>("--coalesce", arg, 0, 1000);
      break;
    case kCpu:
      o.cpu = num<int>("--cpu", arg, -1, 4095);
      break;
    case kSched: {
      auto m = parse_engine_sched(arg);
      if (!m) {
        std::fprintf(stderr, "mrc_perf: --sched: %s\n", m.error().context.c_str());
        std::exit(2);
      }
      o.sched = *m;
      break;
    }
    case kQueues:
      o.queues = num<uint32_t>("--queues", arg);
      break;
    case kNoCc:
      o.no_cc = true;
      break;
    case kCounters:
      o.counters = true;
      break;
    case kCountersJson:
      o.counters_json = arg;
      break;
    case kClients:
      o.clients = num<uint32_t>("--clients", arg, 1, 4096);
      break;
    case kSlots:
      o.slots = num<uint32_t>("--slots", arg, 1, 1u << 24);
      break;
    case kTx:
      parse_tx(o, arg);
      break;
    case kPinDir:
      o.pin_dir = arg;
      break;
    case kNoMrcd:
      o.no_mrcd = true;
      break;
    case kEvLog:
      o.ev_log = arg;
      break;
    case kMem:
      o.mem = true;
      break;
    case kEvProfile:
      o.ev_profile = num<uint64_t>("--ev-profile", arg);
      break;
    case kCcProfile:
      o.cc_profile = num<uint64_t>("--cc-profile", arg);
      break;
    case kSrv6:
      o.srv6 = arg;
      break;
    case kSrv6Qps:
      o.srv6_qps = num<uint32_t>("--srv6-qps", arg);
      break;
    case kSpinUs:
      o.spin_us = num<uint32_t>("--spin-us", arg);
      break;
    case kProgressIdle:
      o.progress_idle_us = num<uint32_t>("--progress-idle-us", arg, 1);
      break;
    case kProgress:
      if (!std::strcmp(arg, "thread"))
        o.progress = Progress::kThread;
      else if (!std::strcmp(arg, "app"))
        o.progress = Progress::kApplication;
      else
        usage(2);
      break;
    case kEngine: {
      o.engine.push_back(parse_engine_kv(arg));
      break;
    }
    default:
      usage(2);
  }
}

// One option c (getopt_long's value) with its argument; throws
// std::invalid_argument on a malformed value.
void apply_option(Opts& o, int c, const char* arg) {
  switch (c) {
    case 'd': {
      std::stringstream ss(arg);
      std::string d;
      while (std::getline(ss, d, ',')) o.devs.push_back(d);
      break;
    }
    case 'p':
      o.port = num<uint16_t>("-p/--port", arg);
      break;
    case 'B':
      o.bind = arg;
      break;
    case 's':
      o.size = num<uint32_t>("-s/--size", arg);
      break;
    case 'q':
      o.qps = num<uint32_t>("-q/--qps", arg, 1, 65536);
      break;
    case 'i':
      o.imm = true;
      break;
    case 'D':
      o.duration = num<double>("-D/--duration", arg, 0, 1e9);
      break;
    case 'n':
      o.iters = num<uint64_t>("-n/--iters", arg);
      break;
    case 't':
      o.inflight = num<uint32_t>("-t/--inflight", arg, 1, 1u << 20);
      o.inflight_set = true;
      break;
    case 'm':
      o.mtu = num<uint32_t>("-m/--mtu", arg);
      break;
    case 'l':
      o.lat = true;
      break;
    case 'j':
      o.json = true;
      break;
    case 'v':
      o.verify = true;
      break;
    case '6':
      o.ipv6 = true;
      break;
    case 'I':
      o.interval = num<double>("-I/--interval", arg, 0, 1e9);
      break;
    case 'h':
      usage(0);
    case 'V':
      version();
    default:
      apply_long_option(o, c, arg);
  }
}

// What the options imply, and what they may not combine to.
void check_options(Opts& o) {
  if (o.devs.empty()) {
    std::fprintf(stderr, "mrc_perf: -d IF[,IF...] is required\n");
    std::exit(2);
  }
  if (o.lat) o.imm = true, o.qps = 1, o.inflight = 1;
  if (!o.size && !o.lat) o.size = 1;
  // Large messages: fewer in flight by default, so that the slots (2 x
  // inflight per QP, on both sides) stay within memory (-s 64M: 2 in flight).
  if (!o.inflight_set && !o.lat)
    o.inflight = std::clamp<uint32_t>(uint32_t(kDefaultInflightBytes / o.size), 1, o.inflight);
  if (o.qps == 0 || o.inflight == 0 || o.clients == 0) {
    std::fprintf(stderr, "mrc_perf: --qps, --inflight and --clients must be at least 1\n");
    std::exit(2);
  }
  if (o.lat && o.clients > 1) {
    std::fprintf(stderr, "mrc_perf: --lat serves one client\n");
    std::exit(2);
  }
  if (!o.slots) o.slots = o.inflight * 2;
  if (o.slots < o.inflight) {
    std::fprintf(stderr, "mrc_perf: --slots must be at least --inflight\n");
    std::exit(2);
  }
}

Opts parse(int argc, char** argv) {
  Opts o;
  parse_role(o, argc, argv);
  optind = o.server ? 2 : 3;
  int c;
  try {
    while ((c = getopt_long(argc, argv, "d:p:B:s:q:iD:n:t:m:ljv6I:hV", kLongOptions, nullptr)) !=
           -1)
      apply_option(o, c, optarg);
  } catch (const std::exception&) {
    std::fprintf(stderr, "mrc_perf: bad value for option '%s'\n", argv[optind - 1]);
    std::exit(2);
  }
  check_options(o);
  // --srv6 FILE is read now: a bad file is a usage error, before any device.
  if (!o.srv6.empty()) {
    auto p = perf::read_srv6_profile(o.srv6);
    if (!p) {
      std::fprintf(stderr, "mrc_perf: %s\n", p.error().message().c_str());
      std::exit(2);
    }
    o.srv6_profile = std::move(*p);
  }
  return o;
}

// A fatal error unwinds to main so every destructor runs (the Context then
// detaches its XDP program instead of leaving it on the interfaces).
struct Fatal {};
[[noreturn]] void die(const std::string& what, const Error& e) {
  std::fprintf(stderr, "mrc_perf: %s: %s\n", what.c_str(), e.message().c_str());
  throw Fatal{};
}
template <class T>
T must(Result<T> r, const std::string& what) {
  if (!r) die(what, r.error());
  return std::move(*r);
}
void must(const Status& s, const std::string& what) {
  if (!s) die(what, s.error());
}

// Word i of message k (self-verifying payload: every 8 bytes name the message).
inline uint64_t pattern(uint64_t k, uint64_t i) {
  return (k << 32) ^ (i * 0x9e3779b97f4a7c15ull) ^ 0x6d7263;
}

void fill(uint8_t* p, uint32_t len, uint64_t k) {
  uint32_t i = 0;
  for (; i + 8 <= len; i += 8) {
    uint64_t v = pattern(k, i);
    std::memcpy(p + i, &v, 8);
  }
  for (; i < len; i++) p[i] = uint8_t(pattern(k, i));
}

bool check(const uint8_t* p, uint32_t len, uint64_t k) {
  uint32_t i = 0;
  for (; i + 8 <= len; i += 8) {
    uint64_t v = pattern(k, i), w;
    std::memcpy(&w, p + i, 8);
    if (v != w) return false;
  }
  for (; i < len; i++)
    if (p[i] != uint8_t(pattern(k, i))) return false;
  return true;
}

struct Buffer {
  uint8_t* p = nullptr;
  size_t n = 0;
  explicit Buffer(size_t bytes) : n(std::max<size_t>(bytes, 4096)) {
    void* m =
        mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (m == MAP_FAILED) {
      std::perror("mmap");
      std::exit(1);
    }
    p = static_cast<uint8_t*>(m);
  }
  ~Buffer() { munmap(p, n); }
};

// Process memory: resident set (/proc/self/statm) and heap in use (glibc
// mallinfo2 over every arena: small chunks in use + mmapped chunks).
struct MemSnap {
  uint64_t rss = 0, heap = 0;
};
MemSnap mem_snap() {
  MemSnap m;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    unsigned long long size = 0, resident = 0;
    if (std::fscanf(f, "%llu %llu", &size, &resident) == 2)
      m.rss = uint64_t(resident) * uint64_t(sysconf(_SC_PAGESIZE));
    std::fclose(f);
  }
  const struct mallinfo2 mi = mallinfo2();
  m.heap = uint64_t(mi.uordblks) + uint64_t(mi.hblkhd);
  return m;
}

// -j/--json output: one object per line, keys in the order they are set.
using Json = nlohmann::ordered_json;

// v with `decimals` decimals, the value printf's "%.<decimals>f" printed
// before the JSON library did (consumers compare these numbers); with 0, an
// integer. Not finite: null.
Json fixed(double v, int decimals) {
  if (!std::isfinite(v)) return nullptr;
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", decimals, v);
  const double r = std::strtod(b, nullptr);
  if (decimals == 0 && std::fabs(r) < 9e18) return int64_t(r);
  return r;
}

// One JSON line on stdout (strings not valid UTF-8 get U+FFFD).
void print_json(const Json& j) {
  std::printf("%s\n", j.dump(-1, ' ', false, Json::error_handler_t::replace).c_str());
}

// {"role":..,"qps":N,"rss_base":..,"rss":..,"heap_base":..,"heap":..,"rss_per_qp":..,"heap_per_qp":..}
// (bytes; per QP = (now - base) / N, negative when memory was returned).
Json mem_json(const char* role, uint32_t nqps, const MemSnap& base, const MemSnap& now) {
  const double n = std::max<uint32_t>(nqps, 1);
  return Json{{"role", role},
              {"qps", nqps},
              {"rss_base", base.rss},
              {"rss", now.rss},
              {"heap_base", base.heap},
              {"heap", now.heap},
              {"rss_per_qp", fixed((double(now.rss) - double(base.rss)) / n, 1)},
              {"heap_per_qp", fixed((double(now.heap) - double(base.heap)) / n, 1)}};
}

struct Side {
  std::unique_ptr<Context> ctx;
  std::unique_ptr<CompChannel> ch;
  std::unique_ptr<Cq> cq;
  std::vector<std::unique_ptr<Qp>> qps;
  uint32_t pd = 0;
  MemSnap mem_base;      // before the QPs were created
  MemSnap mem_idle;      // every QP connected, no traffic yet (--mem)
  uint32_t spin_us = 0;  // --spin-us: polling before progress() sleeps
};

// --mem: the summary's "mem_idle" (every QP connected, no traffic yet) and
// "mem_end" (now).
void add_mem(Json& sum, const Opts& o, const char* role, uint32_t nqps, const Side& s) {
  if (!o.mem) return;
  sum["mem_idle"] = mem_json(role, nqps, s.mem_base, s.mem_idle);
  sum["mem_end"] = mem_json(role, nqps, s.mem_base, mem_snap());
}

// --engine KEY=VALUE: protocol tunables of core::EngineConfig (times in us,
// at most an hour; a count at most 2^32-1; a switch 0 or 1). A value is
// checked when the option is parsed (an unknown key, a value that is not a
// whole number or out of its range: exit 2 naming both) and applied when the
// device opens.
using core::EngineKey;

// KEY=VALUE of --engine: checked here, so a bad one stops mrc_perf before
// it opens anything.
std::pair<std::string, std::string> parse_engine_kv(const std::string& kv) {
  auto eq = kv.find('=');
  if (eq == std::string::npos || eq == 0) throw std::invalid_argument("--engine KEY=VALUE");
  std::string k = kv.substr(0, eq), v = kv.substr(eq + 1);
  const EngineKey* ek = core::find_engine_key(k);
  if (!ek) {
    std::fprintf(stderr, "mrc_perf: unknown --engine key '%s' (mrc_perf --help lists them)\n",
                 k.c_str());
    std::exit(2);
  }
  num<uint64_t>(("--engine " + k).c_str(), v, 0, ek->max);
  return {k, v};
}

void apply_engine(core::EngineConfig& e,
                  const std::vector<std::pair<std::string, std::string>>& kvs) {
  for (const auto& [k, v] : kvs) {
    const EngineKey* ek = core::find_engine_key(k);
    if (ek) ek->set(e, num<uint64_t>(("--engine " + k).c_str(), v, 0, ek->max));
  }
}

// Receives posted per QP for WRITE-with-immediate. MRC has no RNR: a WriteIMM
// that finds no posted receive is fatal to the QP, and the client completes
// its messages without waiting for this application to repost, so the depth
// is what lets the server fall behind (descheduled on a busy host) without
// failing: at least one receive per slot.
uint32_t recv_depth(const Opts& o) { return std::max<uint32_t>({o.inflight * 4, o.slots, 16}); }

// Credits (WRITE-with-immediate, not --lat). Receives alone cannot keep the
// client within them: a message completes at the client once acknowledged,
// before the server's thread has taken its completion and reposted the
// receive, and (with --verify) before it has checked the slot the client is
// about to reuse. So the server grants: it RDMA WRITEs to every client QP a
// limit, the number of messages the client may have started, consumed +
// window, where consumed counts the WriteIMM completions it has taken (each
// receive reposted, each slot checked) and window is what it can absorb
// unseen: its posted receives, and with --verify also the slots. One grant
// per QP is in flight at a time, from its own cell of the server's buffer
// (unchanged until the WRITE completes); the client reads its cell and
// trusts it only when both words agree.
constexpr uint64_t kCreditCheck = 0x6d72632d63726564ull;  // "mrc-cred"
constexpr uint64_t kCreditWrId = 1ull << 63;              // server: a grant's wr_id
bool uses_credits(const Opts& o) { return o.imm && !o.lat; }
uint32_t credit_window(const Opts& o) {
  return o.verify ? std::min(o.slots, recv_depth(o)) : recv_depth(o);
}
// Per-QP part of both buffers: the slots, then (64-byte aligned) the credit
// cell {limit, limit ^ kCreditCheck} the server writes on the client.
size_t credit_offset(const Opts& o) {
  return (size_t(o.slots) * std::max<uint32_t>(o.size, 1) + 63) / 64 * 64;
}
size_t per_qp_bytes(const Opts& o) { return credit_offset(o) + 64; }
// The client's limit from its cell (the last one when the two words disagree:
// a grant being placed).
uint64_t read_credit(const uint8_t* cell, uint64_t last) {
  const uint64_t v =
      std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(const_cast<uint8_t*>(cell)))
          .load(std::memory_order_acquire);
  const uint64_t c =
      std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(const_cast<uint8_t*>(cell) + 8))
          .load(std::memory_order_acquire);
  return (c == (v ^ kCreditCheck) && v > last) ? v : last;
}

Side open_side(const Opts& o, uint32_t nqps) {
  Side s;
  DeviceOptions d;
  apply_engine(d.engine, o.engine);
  d.interfaces = o.devs;
  d.pin_dir = o.pin_dir;
  d.use_mrcd = !o.no_mrcd;
  d.force_generic = o.generic;
  d.busy_poll = o.busy_poll;
  d.frame_chunks = o.frame_chunks;
  d.idle_spin_us = o.idle_spin_us;
  d.engine_coalesce_us = o.coalesce_us;
  d.engine_cpu = o.cpu;
  d.engine_sched = o.sched;
  d.progress = o.progress;
  s.spin_us = o.spin_us;
  if (o.progress_idle_us) d.progress_idle_us = o.progress_idle_us;
  d.queues = o.queues;
  d.tx = o.tx;
  if (o.live_min >= 0) d.live_tx_min = uint32_t(o.live_min);
  s.ctx = must(Context::open(d), "opening " + o.devs[0] + "...");
  if (!s.ctx->tx_note().empty()) std::fprintf(stderr, "mrc_perf: %s\n", s.ctx->tx_note().c_str());
  // Through the host service: say so (exclusive mode, the default without
  // one, stays silent; --counters-json has the mode and its reason either way).
  if (s.ctx->mode() == DeviceMode::kService)
    std::fprintf(stderr, "mrc_perf: %s\n", s.ctx->mode_reason().c_str());
  std::fprintf(stderr, "mrc_perf: engine thread: %s\n", s.ctx->engine_sched_reason().c_str());
  s.pd = must(s.ctx->alloc_pd(), "alloc_pd");
  if (o.no_cc) {
    core::CcProfile off;
    off.enabled = false;
    must(s.ctx->install_cc_profile(1, off), "installing a CC profile");
  }
  if (!o.srv6.empty())
    must(s.ctx->install_ev_profile(perf::kSrv6ProfileId, o.srv6_profile),
         "installing the --srv6 EV profile");
  s.ch = must(s.ctx->create_comp_channel(), "create_comp_channel");
  s.cq = must(s.ctx->create_cq(65536, s.ch.get()), "create_cq");
  s.mem_base = mem_snap();
  for (uint32_t i = 0; i < nqps; i++) {
    QpInitAttr ia;
    ia.cap.max_send_wr = std::max<uint32_t>(o.inflight * 2, 16);
    ia.cap.max_recv_wr = recv_depth(o);
    ia.cap.max_send_sge = 1;
    ia.pd = s.pd;
    s.qps.push_back(must(s.ctx->create_qp(ia, *s.cq, *s.cq), "create_qp"));
  }
  return s;
}

ConnectOptions conn_opts(const Opts& o) {
  ConnectOptions c;
  c.mtu = o.mtu;
  c.timeout = o.timeout;
  c.retry_linear = o.retry_linear;
  c.retry_exp = o.retry_exp;
  c.ip = o.ipv6 ? codec::IpVersion::kV6 : codec::IpVersion::kV4;
  c.max_wimm = uint16_t(std::min<uint32_t>(o.inflight * 4, 1024));
  c.mpr = 16;
  if (o.no_cc) c.cc_profile = 1;
  if (o.ev_profile) c.ev_profile = o.ev_profile;
  if (o.cc_profile && !o.no_cc) c.cc_profile = o.cc_profile;
  return c;
}

const std::vector<std::string>& bpf_stats_names() {
  static const std::vector<std::string> n = Context::xdp_stats_names();
  return n;
}

// What the data path saw, for diagnosing a failed run.
void dump_counters(Side& s) {
  auto es = s.ctx->engine_stats();
  std::fprintf(stderr,
               "  engine: rx %" PRIu64 " frames, tx %" PRIu64 " frames, unknown QP %" PRIu64
               ", not MRC %" PRIu64 "\n",
               es.rx_frames, es.tx_frames, es.rx_unknown_qp, es.rx_not_mrc);
  const auto ps = s.ctx->progress_stats();
  std::fprintf(stderr,
               "  progress (%s): application passes %" PRIu64 ", engine-thread passes %" PRIu64
               ", deferred transmits %" PRIu64 ", engine-thread sleeps %" PRIu64
               ", stand-aside checks %" PRIu64 ", coalesced waits %" PRIu64 "\n",
               to_string(s.ctx->progress_mode()), ps.app_passes, ps.thread_passes, ps.tx_deferred,
               ps.thread_sleeps, ps.stand_aside_checks, ps.coalesced_waits);
  for (size_t i = 0; i < std::size(es.rx_parse_errors); i++)
    if (es.rx_parse_errors[i])
      std::fprintf(stderr, "  engine: dropped %" PRIu64 " frames: %s\n", es.rx_parse_errors[i],
                   std::string(codec::to_string(codec::ParseError(i))).c_str());
  for (auto& q : s.qps) {
    auto st = q->stats();
    if (!st) continue;
    std::fprintf(
        stderr,
        "  qp %u: tx %" PRIu64 " rtx %" PRIu64 " (sack %" PRIu64 " nack %" PRIu64
        " timeout %" PRIu64 ") spurious %" PRIu64 " tlp %" PRIu64 " timeouts %" PRIu64
        " ev skips %" PRIu64 " assumed_bad %" PRIu64 " readmitted %" PRIu64 " undone %" PRIu64
        " plane_suspects %" PRIu64 " plane_relapses %" PRIu64 " srtt %" PRIu64 " ns cwnd %" PRIu64
        " rx %" PRIu64 " dup %" PRIu64 " sacks tx %" PRIu64 " rx %" PRIu64 " probes tx %" PRIu64
        " qa cuts %" PRIu64 " (loss %" PRIu64 ", gated %" PRIu64 ") ecn decreases %" PRIu64
        " svc sacks %" PRIu64 " (bad %" PRIu64 ") fabric unknown %" PRIu64 "\n",
        q->qpn(), st->tx_data_pkts, st->tx_rtx_pkts, st->rtx_sack, st->rtx_nack, st->rtx_timeout,
        st->spurious_rtx, st->tlp_probes, st->timeouts, st->ev_skips, st->ev_assumed_bad,
        st->ev_readmitted, st->ev_undone, st->plane_suspects, st->plane_relapses, st->srtt_ns,
        st->cwnd_bytes, st->rx_data_pkts, st->rx_dup_pkts, st->tx_sacks, st->rx_sacks,
        st->tx_probe_pkts, st->cc_qa_cuts, st->cc_qa_loss_cuts, st->cc_qa_gated,
        st->cc_ecn_decreases, st->rx_sack_svc, st->bad_svc_time, st->fabric_unknown);
    if (st->imm_no_recv || st->imm_over_limit || st->rem_access_errors)
      std::fprintf(stderr,
                   "  qp %u: as responder: fatal WRITE-with-immediate without a receive %" PRIu64
                   "; refused: beyond max_wimm_dest %" PRIu64 ", access errors %" PRIu64 "\n",
                   q->qpn(), st->imm_no_recv, st->imm_over_limit, st->rem_access_errors);
    if (st->ghost_sacks || st->ghost_nacks || st->ghost_naks || st->refusals_retried ||
        st->ghost_probe_resps || st->unverified_sacks)
      std::fprintf(stderr,
                   "  qp %u: dropped as requester: ghost sacks %" PRIu64 " nacks %" PRIu64
                   " naks %" PRIu64 " probe answers %" PRIu64 ", unverified sacks %" PRIu64
                   "; refusals resent %" PRIu64 "\n",
                   q->qpn(), st->ghost_sacks, st->ghost_nacks, st->ghost_naks,
                   st->ghost_probe_resps, st->unverified_sacks, st->refusals_retried);
  }
  auto x = s.ctx->xsk_stats();
  std::fprintf(stderr,
               "  af_xdp: rx %" PRIu64 " tx %" PRIu64 " completed %" PRIu64 " kicks %" PRIu64
               " (again %" PRIu64 " busy %" PRIu64 " errors %" PRIu64 ") pool_empty %" PRIu64
               " rx_dropped %" PRIu64 " rx_ring_full %" PRIu64 " fill_empty %" PRIu64
               " tx_invalid %" PRIu64 "\n",
               x.rx_frames, x.tx_frames, x.tx_completed, x.tx_kicks, x.tx_kick_again,
               x.tx_kick_busy, x.tx_kick_errors, x.pool_empty, x.rx_dropped, x.rx_ring_full,
               x.fill_empty, x.tx_invalid);
  if (s.ctx->tx_backend() == TxBackend::kLive) {
    auto l = s.ctx->live_tx_stats();
    std::fprintf(
        stderr,
        "  live tx: frames %" PRIu64 " in %" PRIu64 " submits (%.1f us each), redirected %" PRIu64
        " prog_errors %" PRIu64 " submit_errors %" PRIu64 " lost %" PRIu64 " ring_full %" PRIu64
        " driver: sent %" PRIu64 " drops %" PRIu64 " redirect_err %" PRIu64 "\n",
        l.frames, l.submits, l.submits ? double(l.submit_ns) / 1e3 / double(l.submits) : 0.0,
        l.redirected, l.prog_errors, l.submit_errors, l.lost, l.ring_full, l.xmit_sent,
        l.xmit_drops, l.redirect_err);
  }
  if (auto xs = s.ctx->xdp_stats(); xs.ok())
    for (size_t p = 0; p < xs->size(); p++) {
      const auto* v = reinterpret_cast<const uint64_t*>(&(*xs)[p]);
      std::string line;
      for (size_t f = 0; f < bpf_stats_names().size(); f++)
        if (v[f]) line += " " + std::string(bpf_stats_names()[f]) + "=" + std::to_string(v[f]);
      std::fprintf(stderr, "  xdp port %zu:%s\n", p + 1, line.c_str());
    }
}

// --counters-json: every counter as one JSON object, written when the run
// ends (a failed run included: CountersAtExit writes it while the stack
// unwinds). Fields keep the names of core::QpStats, core::EngineStats,
// struct mrc_xdp_stats and Context::XskStats.
#define MRC_KV(obj, field) \
  { #field, (obj).field }
void write_counters_json(Side& s, const Opts& o) {
  using nlohmann::json;
  json j;
  j["role"] = o.server ? "server" : "client";
  j["op"] = o.imm ? "write_imm" : "write";
  j["device_mode"] = to_string(s.ctx->mode());
  j["device_mode_reason"] = s.ctx->mode_reason();
  j["engine_sched"] = to_string(s.ctx->engine_sched());
  j["engine_sched_reason"] = s.ctx->engine_sched_reason();
  const auto es = s.ctx->engine_stats();
  json e = json{
      MRC_KV(es, rx_frames),          MRC_KV(es, rx_bytes),        MRC_KV(es, tx_frames),
      MRC_KV(es, tx_bytes),           MRC_KV(es, rx_not_mrc),      MRC_KV(es, rx_unknown_qp),
      MRC_KV(es, rx_bad_state),       MRC_KV(es, rx_unexpected),   MRC_KV(es, ep_requests),
      MRC_KV(es, ep_responses_tx),    MRC_KV(es, ep_responses_rx), MRC_KV(es, cq_overflows),
      MRC_KV(es, ev_events_dropped),  MRC_KV(es, tx_no_frame),     MRC_KV(es, ep_unsolicited),
      MRC_KV(es, ep_bad_port_status), MRC_KV(es, tombstones),      MRC_KV(es, tombstones_early),
      MRC_KV(es, tomb_naks)};
  // By kind name (parse_error_name; kind 0, "ok", left out).
  json pe = json::object();
  for (size_t i = 1; i < std::size(es.rx_parse_errors); i++)
    pe[parse_error_name(i)] = es.rx_parse_errors[i];
  e["rx_parse_errors"] = pe;
  j["engine"] = e;
  json qps = json::array();
  for (auto& q : s.qps) {
    auto st = q->stats();
    if (!st) continue;
    json x = json{{"qpn", q->qpn()},
                  MRC_KV(*st, tx_data_pkts),
                  MRC_KV(*st, tx_data_bytes),
                  MRC_KV(*st, tx_rtx_pkts),
                  MRC_KV(*st, tx_probe_pkts),
                  MRC_KV(*st, rx_data_pkts),
                  MRC_KV(*st, rx_data_bytes),
                  MRC_KV(*st, rx_dup_pkts),
                  MRC_KV(*st, rx_oor_pkts),
                  MRC_KV(*st, tx_sacks),
                  MRC_KV(*st, tx_nacks),
                  MRC_KV(*st, rx_sacks),
                  MRC_KV(*st, rx_nacks),
                  MRC_KV(*st, rtx_sack),
                  MRC_KV(*st, rtx_nack),
                  MRC_KV(*st, rtx_timeout),
                  MRC_KV(*st, spurious_rtx),
                  MRC_KV(*st, timeouts),
                  MRC_KV(*st, tlp_probes),
                  MRC_KV(*st, plane_suspects),
                  MRC_KV(*st, plane_lossy),
                  MRC_KV(*st, plane_relapses),
                  MRC_KV(*st, plane_hold_ns),
                  MRC_KV(*st, ev_skips),
                  MRC_KV(*st, ev_assumed_bad),
                  MRC_KV(*st, ev_readmitted),
                  MRC_KV(*st, ev_promoted),
                  MRC_KV(*st, ev_undone),
                  MRC_KV(*st, losses_by_time),
                  MRC_KV(*st, plane_silences),
                  MRC_KV(*st, silent_paced_pkts),
                  MRC_KV(*st, plane_quiets),
                  MRC_KV(*st, silent_plane_losses),
                  MRC_KV(*st, rem_access_errors),
                  MRC_KV(*st, imm_no_recv),
                  MRC_KV(*st, imm_over_limit),
                  MRC_KV(*st, fail_renacks),
                  MRC_KV(*st, ghost_sacks),
                  MRC_KV(*st, stale_sacks),
                  MRC_KV(*st, ghost_nacks),
                  MRC_KV(*st, stale_nacks),
                  MRC_KV(*st, ghost_naks),
                  MRC_KV(*st, stale_naks),
                  MRC_KV(*st, refusals_retried),
                  MRC_KV(*st, ghost_probe_resps),
                  MRC_KV(*st, unverified_sacks),
                  MRC_KV(*st, bad_port_status),
                  MRC_KV(*st, wimm_completions),
                  MRC_KV(*st, send_completions),
                  MRC_KV(*st, cwnd_bytes),
                  MRC_KV(*st, inflight_bytes),
                  MRC_KV(*st, srtt_ns),
                  MRC_KV(*st, reo_wnd_ns),
                  MRC_KV(*st, reo_extra_ns),
                  MRC_KV(*st, cc_qa_cuts),
                  MRC_KV(*st, cc_qa_loss_cuts),
                  MRC_KV(*st, cc_qa_gated),
                  MRC_KV(*st, cc_ecn_decreases),
                  MRC_KV(*st, rx_sack_svc),
                  MRC_KV(*st, bad_svc_time),
                  MRC_KV(*st, fabric_unknown)};
    x["plane_tx_bytes"] =
        std::vector<uint64_t>(st->plane_tx_bytes + 1, st->plane_tx_bytes + 1 + o.devs.size());
    x["plane_rx_bytes"] =
        std::vector<uint64_t>(st->plane_rx_bytes + 1, st->plane_rx_bytes + 1 + o.devs.size());
    if (!o.srv6.empty()) x["srv6_evs"] = perf::srv6_ev_json<json>(*q, o.srv6_profile);
    qps.push_back(x);
  }
  j["qps"] = qps;
  json xdp = json::array();
  if (auto xs = s.ctx->xdp_stats(); xs.ok())
    for (size_t p = 0; p < xs->size(); p++) {
      json port;
      port["port"] = p + 1;  // plane port, 1-based (the order of -d)
      for (size_t f = 0; f < bpf_stats_names().size(); f++)
        port[bpf_stats_names()[f]] = reinterpret_cast<const uint64_t*>(&(*xs)[p])[f];
      xdp.push_back(port);
    }
  j["xdp"] = xdp;
  const auto x = s.ctx->xsk_stats();
  json k = json{MRC_KV(x, rx_frames),      MRC_KV(x, tx_frames),     MRC_KV(x, tx_completed),
                MRC_KV(x, tx_kicks),       MRC_KV(x, tx_kick_again), MRC_KV(x, tx_kick_busy),
                MRC_KV(x, tx_kick_errors), MRC_KV(x, pool_empty),    MRC_KV(x, rx_dropped),
                MRC_KV(x, rx_invalid),     MRC_KV(x, tx_invalid),    MRC_KV(x, rx_ring_full),
                MRC_KV(x, fill_empty),     MRC_KV(x, tx_ring_empty)};
  j["af_xdp"] = k;
  const std::string tmp = o.counters_json + ".tmp";
  if (FILE* f = std::fopen(tmp.c_str(), "w")) {
    const std::string out = j.dump() + "\n";
    const bool ok = std::fwrite(out.data(), 1, out.size(), f) == out.size();
    if (std::fclose(f) == 0 && ok && std::rename(tmp.c_str(), o.counters_json.c_str()) == 0) return;
  }
  std::fprintf(stderr, "mrc_perf: writing %s: %s\n", o.counters_json.c_str(), std::strerror(errno));
}
#undef MRC_KV

// Writes --counters-json when the run ends, however it ends.
struct CountersAtExit {
  const Opts& o;
  Side& s;
  ~CountersAtExit() {
    if (o.counters_json.empty() || !s.ctx) return;
    try {
      write_counters_json(s, o);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "mrc_perf: --counters-json: %s\n", e.what());
    }
  }
};

// A QP that failed without a completion saying so (a responder QP whose
// failure found no receive posted to flush): the QP-fatal async event, with
// the cause the QP's counters name. False (reported) if one of ours failed.
bool no_fatal_event(Side& s) {
  AsyncEvent ev;
  while (s.ctx->get_async_event(ev)) {
    if (ev.type != AsyncEventType::kQpFatal) continue;
    const char* why = "";
    for (auto& q : s.qps)
      if (q->qpn() == ev.qpn)
        if (auto st = q->stats()) {
          // The responder's only fatal request (refused ones are not: security.md).
          if (st->imm_no_recv)
            why = ": a WRITE-with-immediate found no posted receive (MRC has no RNR)";
        }
    std::fprintf(stderr, "mrc_perf: QP %u failed (QP-fatal event)%s\n", ev.qpn, why);
    dump_counters(s);
    return false;
  }
  return true;
}

// Waits for completions: polls, then sleeps on the completion channel.
size_t wait_wc(Side& s, std::span<Wc> out, int timeout_ms) {
  if (s.ctx->progress_mode() == Progress::kApplication) {
    // This thread runs the engine: poll (a pass each time), then sleep in
    // progress() on the sockets and the engine's timers.
    const auto t0 = Clock::now();
    const auto until = t0 + std::chrono::milliseconds(timeout_ms);
    const auto spin_until = t0 + std::chrono::microseconds(s.spin_us);
    for (uint32_t spin = 0;; spin++) {
      auto n = s.cq->poll(out);
      if (!n) die("poll_cq", n.error());
      if (*n) return *n;
      if ((spin & 15) || Clock::now() < spin_until) continue;
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
      if (left <= 0) return 0;
      if (auto r = s.ctx->progress(int(std::min<long long>(left, 10))); !r)
        die("progress", r.error());
    }
  }
  // The engine thread progresses: poll at least 64 times and for spin_us,
  // then sleep on the completion channel. (A poll costs a ring read through
  // the service and a locked engine call in-process, so a count alone
  // spins for very different times in the two modes.)
  const auto spin_until = Clock::now() + std::chrono::microseconds(s.spin_us);
  for (uint32_t spin = 0;; spin++) {
    auto n = s.cq->poll(out);
    if (!n) die("poll_cq", n.error());
    if (*n) return *n;
    if (spin >= 64 && (!s.spin_us || Clock::now() >= spin_until)) break;
  }
  must(s.cq->req_notify(), "req_notify");
  auto n = s.cq->poll(out);
  if (n && *n) return *n;
  pollfd p{s.ch->fd(), POLLIN, 0};
  if (poll(&p, 1, timeout_ms) > 0) (void)s.ch->get_event();
  n = s.cq->poll(out);
  if (!n) die("poll_cq", n.error());
  return *n;
}

uint64_t ev_changes(Side& s) {
  EvEvent ev[256];
  uint64_t total = 0;
  size_t n;
  while ((n = s.ctx->poll_ev_events(ev)) > 0) {
    total += n;
    if (g_ev_log)
      for (size_t i = 0; i < n; i++) {
        char evh[9];
        std::snprintf(evh, sizeof evh, "%08x", unsigned(ev[i].ev));
        const Json j{{"t_ns", ev[i].time},
                     {"qpn", ev[i].qpn},
                     {"ev", evh},
                     {"port", ev[i].port},
                     {"from", core::to_string(ev[i].from)},
                     {"to", core::to_string(ev[i].to)},
                     {"reason", core::to_string(ev[i].reason)},
                     {"dropped_before", ev[i].drop_count}};
        std::fprintf(g_ev_log, "%s\n", j.dump().c_str());
      }
  }
  return total;
}

struct Totals {
  uint64_t bytes = 0, msgs = 0, rtx = 0, timeouts = 0, ev_changes = 0;
  uint64_t ev_skips = 0, assumed_bad = 0, readmitted = 0, undone = 0, plane_suspects = 0,
           plane_lossy = 0, plane_relapses = 0, plane_hold_ns = 0, tlp = 0, spurious = 0, trims = 0;
  uint64_t plane_silences = 0, silent_paced = 0, plane_quiets = 0;
  std::vector<uint64_t> plane_bytes;
};

Totals qp_totals(Side& s) {
  Totals t;
  t.plane_bytes.assign(s.ctx->ports().size(), 0);
  for (auto& q : s.qps) {
    auto st = q->stats();
    if (!st) continue;
    t.rtx += st->tx_rtx_pkts;
    t.timeouts += st->timeouts;
    t.ev_skips += st->ev_skips;
    t.assumed_bad += st->ev_assumed_bad;
    t.readmitted += st->ev_readmitted;
    t.undone += st->ev_undone;
    t.plane_suspects += st->plane_suspects;
    t.plane_lossy += st->plane_lossy;
    t.plane_relapses += st->plane_relapses;
    t.plane_hold_ns += st->plane_hold_ns;
    t.tlp += st->tlp_probes;
    t.spurious += st->spurious_rtx;
    t.trims += st->rx_nacks;
    t.plane_silences += st->plane_silences;
    t.silent_paced += st->silent_paced_pkts;
    t.plane_quiets += st->plane_quiets;
    for (size_t p = 0; p < t.plane_bytes.size(); p++)
      t.plane_bytes[p] += st->plane_tx_bytes[p + 1] + st->plane_rx_bytes[p + 1];
  }
  return t;
}

// ---------------------------------------------------------------------------
// Server

// One connected client: its exchange socket, its QPs (indexes into Side::qps)
// and its part of the target buffer.
struct Client {
  UniqueFd fd;
  uint32_t first_qp = 0;
  std::vector<QpEndpoint> theirs;
  bool done = false;
  bool stopping = false;  // "done" read: no more grants
  uint64_t imm_ok = 0, imm_bad = 0, imm_overwritten = 0, imm_missing = 0;
  uint64_t checked = 0, bad_slots = 0;
};

// The server: accepts the clients, serves them (latency echo, or counts and
// checks WriteIMM arrivals, granting credits), checks their final reports.
class ServerRun {
 public:
  explicit ServerRun(const Opts& o)
      : o(o),
        nqps(o.qps * o.clients),
        slots(o.slots),
        per_qp(per_qp_bytes(o)),
        buf(per_qp * nqps),
        s(open_side(o, nqps)),
        counters_at_exit{o, s},
        mr(must(
            s.ctx->reg_mr(s.pd, buf.p, buf.n, core::kAccessLocalWrite | core::kAccessRemoteWrite),
            "reg_mr")),
        co(conn_opts(o)),
        lfd(must(tcp_listen(o.bind, o.port), "listen")),
        cl(o.clients),
        wcv(256),
        grants(nqps),
        window(credit_window(o)) {}
  // Errors unwind through here (die throws): the sampler stops first.
  ~ServerRun() { finish(0); }

  int run();

 private:
  // Credits (uses_credits): per QP, the WriteIMM completions taken, the
  // limit granted last and whether its WRITE is still in flight.
  struct Grant {
    uint64_t consumed = 0, granted = 0;
    bool busy = false;
  };

  void start_sampler();
  void sample_loop();
  int finish(int rc) {
    done = true;
    if (sampler.joinable()) sampler.join();
    return rc;
  }
  void grant(uint32_t qi);
  bool serve_wcs(int timeout_ms);
  void take_imm(const Wc& w);
  int accept_clients();
  void connect_client(uint32_t c, UniqueFd fd);
  void report_idle_mem();
  int serve();
  int check_report(Client& k);
  void check_slots(Client& k, std::istringstream& in);
  int summarize();

  const Opts& o;
  const uint32_t nqps;
  const uint32_t slots;
  const size_t per_qp;
  // The buffer outlives the device: until the Context is gone its engine
  // thread may still place arriving data in it (an interrupted run).
  Buffer buf;
  Side s;
  CountersAtExit counters_at_exit;
  MemoryRegion mr;
  ConnectOptions co;
  UniqueFd lfd;
  std::atomic<bool> done{false};
  std::thread sampler;
  std::vector<Client> cl;
  std::vector<Wc> wcv;
  uint64_t echo_k = 0;
  std::vector<Grant> grants;
  const uint64_t window;
  size_t served = 0;  // completions the last serve_wcs() took
};

void ServerRun::start_sampler() {
  sampler = std::thread([this] { sample_loop(); });
}

// --sample-ms: the bytes received, in total and per plane, every sample_ms.
void ServerRun::sample_loop() {
  auto t0 = Clock::now();
  uint64_t last = 0;
  std::vector<uint64_t> lastp;
  while (!done.load()) {
    std::this_thread::sleep_until(
        t0 + std::chrono::milliseconds(o.sample_ms) *
                 (1 + (Clock::now() - t0) / std::chrono::milliseconds(o.sample_ms)));
    uint64_t total = 0;
    std::vector<uint64_t> planes(o.devs.size(), 0);
    for (auto& q : s.qps) {
      auto st = q->stats();
      if (!st) continue;
      total += st->rx_data_bytes;
      for (size_t p = 0; p < planes.size(); p++) planes[p] += st->plane_rx_bytes[p + 1];
    }
    std::vector<uint64_t> dp(planes.size());
    for (size_t p = 0; p < planes.size(); p++) dp[p] = planes[p] - (lastp.empty() ? 0 : lastp[p]);
    const auto now = Clock::now();
    auto t = std::chrono::duration_cast<std::chrono::milliseconds>(now - t0).count();
    // mono_ns: CLOCK_MONOTONIC (steady_clock), so a runner can align the
    // samples with its own timeline.
    print_json(Json{
        {"t_ms", int64_t(t)},
        {"mono_ns",
         int64_t(
             std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count())},
        {"bytes", total - last},
        {"total", total},
        {"planes", dp}});
    std::fflush(stdout);
    last = total;
    lastp = planes;
  }
}

void ServerRun::grant(uint32_t qi) {
  Grant& g = grants[qi];
  const Client& k = cl[qi / o.qps];
  const uint64_t limit = g.consumed + window;
  if (g.busy || limit == g.granted || k.stopping || k.theirs.empty()) return;
  auto* cell = reinterpret_cast<uint64_t*>(buf.p + qi * per_qp + credit_offset(o));
  cell[0] = limit;
  cell[1] = limit ^ kCreditCheck;
  Sge sg{uint64_t(uintptr_t(cell)), 16, mr.lkey};
  SendWr wr;
  wr.wr_id = kCreditWrId | qi;
  wr.opcode = WrOpcode::kRdmaWrite;
  wr.send_flags = core::kSendSignaled;
  wr.sg_list = &sg;
  wr.num_sge = 1;
  wr.remote_addr = k.theirs[qi % o.qps].addr + credit_offset(o);
  wr.rkey = k.theirs[qi % o.qps].rkey;
  must(s.qps[qi]->post_send(wr), "post_send (credit)");
  g.granted = limit;
  g.busy = true;
}

// Takes the completions there are (waiting up to timeout_ms for the first):
// counts and checks WriteIMM arrivals, reposts their receives, echoes in
// latency mode. False on a completion error (reported).
bool ServerRun::serve_wcs(int timeout_ms) {
  size_t n = wait_wc(s, wcv, timeout_ms);
  served = n;
  if (!no_fatal_event(s)) return false;
  for (size_t i = 0; i < n; i++) {
    const Wc& w = wcv[i];
    if (w.status != core::kWcSuccess) {
      std::fprintf(stderr, "mrc_perf: completion error on QP %u: %s\n", w.qp_num,
                   core::to_string(w.status));
      dump_counters(s);
      return false;
    }
    if (w.opcode == WcOpcode::kRdmaWrite && (w.wr_id & kCreditWrId) &&
        (w.wr_id & ~kCreditWrId) < nqps)
      grants[w.wr_id & ~kCreditWrId].busy = false;
    if (w.opcode == WcOpcode::kRecvRdmaWithImm) take_imm(w);
  }
  if (uses_credits(o))
    for (uint32_t qi = 0; qi < nqps; qi++) grant(qi);
  return true;
}

// A WriteIMM arrival: its receive reposted, its slot checked (--verify),
// echoed (--lat).
void ServerRun::take_imm(const Wc& w) {
  uint32_t qi = 0;
  while (qi < nqps && s.qps[qi]->qpn() != w.qp_num) qi++;
  if (qi == nqps) return;
  grants[qi].consumed++;
  Client& k = cl[qi / o.qps];
  must(s.qps[qi]->post_recv(RecvWr{w.wr_id, nullptr, 0}), "post_recv");
  const uint64_t m = w.imm_data;
  const uint8_t* slot = buf.p + qi * per_qp + (m % slots) * o.size;
  if (o.verify && o.size) {
    if (check(slot, o.size, m))
      k.imm_ok++;
    else if (!check(slot, std::min<uint32_t>(o.size, 8), m))
      k.imm_overwritten++;  // the client already reused the slot (header changed)
    else
      k.imm_bad++;
  }
  if (o.lat) {
    // Echo the same size back into the client's buffer.
    Sge sg{uint64_t(uintptr_t(slot)), o.size, mr.lkey};
    SendWr wr;
    wr.wr_id = echo_k++;
    wr.opcode = WrOpcode::kRdmaWriteWithImm;
    wr.send_flags = 0;  // unsignaled: the client's next ping tells us it arrived
    if (echo_k % 64 == 0) wr.send_flags = core::kSendSignaled;
    wr.sg_list = o.size ? &sg : nullptr;
    wr.num_sge = o.size ? 1 : 0;
    wr.remote_addr = k.theirs[0].addr;
    wr.rkey = k.theirs[0].rkey;
    wr.imm_data = w.imm_data;
    must(s.qps[0]->post_send(wr), "post_send");
  }
}

// Clients connect one after the other and start together, once every one
// is connected: this thread cannot take completions while it exchanges
// with and connects a client, and a client already writing meanwhile
// would use up its posted receives (MRC has no RNR: a WRITE-with-immediate
// that finds none fails the QP). A stall of a second there failed the
// incast scenario with the early clients' QPs. 0, or the exit code.
int ServerRun::accept_clients() {
  for (uint32_t c = 0; c < o.clients; c++) {
    Result<UniqueFd> fd = make_error(ETIMEDOUT, "tcp_accept: no connection in 600 s");
    for (const auto until = Clock::now() + std::chrono::seconds(600); Clock::now() < until;) {
      if (g_stop.load()) return 130;
      pollfd lp{lfd.get(), POLLIN, 0};
      if (poll(&lp, 1, 100) > 0) {
        fd = tcp_accept(lfd.get(), 1000);
        break;
      }
    }
    if (!fd) {
      finish(0);
      die("accept", fd.error());
    }
    connect_client(c, std::move(*fd));
    if (o.mem && c + 1 == o.clients) report_idle_mem();
  }
  return 0;
}

// Exchanges endpoints with client c, connects its QPs, posts their receives
// and grants the first credits.
void ServerRun::connect_client(uint32_t c, UniqueFd fd) {
  Client& k = cl[c];
  k.fd = std::move(fd);
  k.first_qp = c * o.qps;
  std::vector<QpEndpoint> ours;
  for (uint32_t i = 0; i < o.qps; i++) {
    const uint32_t qi = k.first_qp + i;
    QpEndpoint e = describe(*s.ctx, *s.qps[qi], random_psn(), co, co.max_wimm, co.mpr);
    e.addr = uint64_t(uintptr_t(buf.p + qi * per_qp));
    e.len = per_qp;
    e.rkey = mr.rkey;
    ours.push_back(e);
  }
  k.theirs = must(exchange_endpoints(k.fd.get(), ours), "exchange");
  if (k.theirs.size() != o.qps)
    die("exchange", make_error(EPROTO, "the client has a different QP count"));
  for (uint32_t i = 0; i < o.qps; i++)
    must(connect_qp(*s.ctx, *s.qps[k.first_qp + i], ours[i].psn, k.theirs[i], co), "connect QP");
  // WRITE-with-immediate needs posted receives (MRC has no RNR).
  if (o.imm)
    for (uint32_t i = 0; i < o.qps; i++)
      for (uint32_t n = 0; n < recv_depth(o); n++)
        must(s.qps[k.first_qp + i]->post_recv(RecvWr{n, nullptr, 0}), "post_recv");
  // The first grant: the window (completions are taken once all are connected).
  if (uses_credits(o))
    for (uint32_t i = 0; i < o.qps; i++) grant(k.first_qp + i);
}

// Every QP connected, none has carried anything yet: the idle footprint
// (the client starts when it reads "go").
void ServerRun::report_idle_mem() {
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  s.mem_idle = mem_snap();
  if (o.json)
    print_json(Json{{"mem_idle", mem_json("server", nqps, s.mem_base, s.mem_idle)}});
  else
    std::printf("server: %u idle QPs: %.0f B RSS, %.0f B heap per QP\n", nqps,
                (double(s.mem_idle.rss) - double(s.mem_base.rss)) / nqps,
                (double(s.mem_idle.heap) - double(s.mem_base.heap)) / nqps);
  std::fflush(stdout);
}

// Serves until every client has reported its last messages; 0, or the
// exit code.
int ServerRun::serve() {
  uint32_t remaining = o.clients;
  std::vector<pollfd> pf(o.clients);
  // The clients' reports are looked for when no completion came or every
  // 5 ms, not at every pass: a poll() per echo would sit on the latency
  // mode's critical path (between the echo's post and its transmission).
  auto next_report_check = Clock::now();
  while (remaining) {
    if (g_stop.load()) return 130;
    const auto now = Clock::now();
    if (served > 0 && now < next_report_check) {
      if (!serve_wcs(50)) return 1;
      continue;
    }
    next_report_check = now + std::chrono::milliseconds(5);
    for (uint32_t c = 0; c < o.clients; c++) pf[c] = {cl[c].done ? -1 : cl[c].fd.get(), POLLIN, 0};
    if (poll(pf.data(), pf.size(), 0) > 0) {
      for (uint32_t c = 0; c < o.clients; c++) {
        if (!(pf[c].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        if (int rc = check_report(cl[c])) return rc;
        remaining--;
      }
      if (!remaining) break;
    }
    if (!serve_wcs(50)) return 1;
  }
  return 0;
}

// The client reports the last message written to every slot: its data is
// complete (the client saw every WRITE acknowledged). Checks it and sends
// the verdict; 0, or the exit code.
int ServerRun::check_report(Client& k) {
  auto lr = recv_line(k.fd.get(), 30'000);
  if (!lr) {
    // A client whose QP failed hangs up: say first if ours failed too.
    if (!no_fatal_event(s)) return 1;
    dump_counters(s);
    finish(0);
    die("waiting for the client's result", lr.error());
  }
  // "done N slot...": N messages completed at the client, i.e.
  // acknowledged, so their WriteIMM completions exist here or are on
  // their way through the engine thread: take them before the verdict.
  std::istringstream in(*lr);
  std::string w;
  uint64_t n_done = 0;
  in >> w >> n_done;
  k.stopping = true;
  if (o.imm && o.verify && o.size && !o.lat) {  // (arrivals are counted when checked)
    const auto until = Clock::now() + std::chrono::seconds(5);
    while (k.imm_ok + k.imm_bad + k.imm_overwritten < n_done && Clock::now() < until)
      if (!serve_wcs(10)) return 1;
    if (k.imm_ok + k.imm_bad + k.imm_overwritten < n_done)
      k.imm_missing = n_done - (k.imm_ok + k.imm_bad + k.imm_overwritten);
  }
  // The client keeps its QPs until it has our verdict: let the grants
  // in flight to it complete first (a QP it destroyed would fail them).
  if (uses_credits(o)) {
    auto busy = [&] {
      for (uint32_t i = 0; i < o.qps; i++)
        if (grants[k.first_qp + i].busy) return true;
      return false;
    };
    const auto until = Clock::now() + std::chrono::seconds(5);
    while (busy() && Clock::now() < until)
      if (!serve_wcs(10)) return 1;
  }
  if (o.verify && !o.lat) check_slots(k, in);
  // With credits the client never reuses a slot before it is checked:
  // an overwritten slot is a failure too.
  const bool ok =
      k.bad_slots == 0 && k.imm_bad == 0 && k.imm_overwritten == 0 && k.imm_missing == 0;
  char res[256];
  std::snprintf(res, sizeof res,
                "result %s slots=%" PRIu64 " bad_slots=%" PRIu64 " imm_ok=%" PRIu64
                " imm_bad=%" PRIu64 " imm_overwritten=%" PRIu64 " imm_missing=%" PRIu64,
                ok ? "ok" : "fail", k.checked, k.bad_slots, k.imm_ok, k.imm_bad, k.imm_overwritten,
                k.imm_missing);
  must(send_line(k.fd.get(), res), "sending the result");
  k.done = true;
  return 0;
}

// The slots the client's report names (the last message in each): checked.
void ServerRun::check_slots(Client& k, std::istringstream& in) {
  for (uint32_t i = 0; i < o.qps; i++)
    for (uint32_t sl = 0; sl < slots; sl++) {
      long long m;
      if (!(in >> m)) return;
      if (m < 0) continue;
      k.checked++;
      const size_t qi = k.first_qp + i;
      if (!check(buf.p + qi * per_qp + sl * size_t(o.size), o.size, uint64_t(m))) k.bad_slots++;
    }
}

// The server's summary; the exit code.
int ServerRun::summarize() {
  uint64_t checked = 0, bad_slots = 0, imm_ok = 0, imm_bad = 0, imm_overwritten = 0,
           imm_missing = 0;
  for (const Client& k : cl) {
    checked += k.checked;
    bad_slots += k.bad_slots;
    imm_ok += k.imm_ok;
    imm_bad += k.imm_bad;
    imm_overwritten += k.imm_overwritten;
    imm_missing += k.imm_missing;
  }
  const bool ok = bad_slots == 0 && imm_bad == 0 && imm_overwritten == 0 && imm_missing == 0;
  if (o.counters) dump_counters(s);
  Totals t = qp_totals(s);
  uint64_t rx = 0;
  for (auto& q : s.qps) rx += q->stats() ? q->stats()->rx_data_bytes : 0;
  if (o.json) {
    Json sum{{"role", "server"},
             {"clients", o.clients},
             {"rx_bytes", rx},
             {"verify", o.verify ? (ok ? "ok" : "fail") : "off"},
             {"slots_checked", checked},
             {"bad_slots", bad_slots},
             {"imm_ok", imm_ok},
             {"imm_bad", imm_bad},
             {"imm_overwritten", imm_overwritten},
             {"imm_missing", imm_missing},
             {"planes", t.plane_bytes}};
    add_mem(sum, o, "server", nqps, s);
    print_json(Json{{"summary", std::move(sum)}});
  } else {
    std::printf("server: received %.1f MB from %u client(s); verification %s\n", double(rx) / 1e6,
                o.clients, o.verify ? (ok ? "passed" : "FAILED") : "off");
  }
  for (Client& k : cl) k.fd.reset();
  lfd.reset();
  return ok ? 0 : 3;
}

int ServerRun::run() {
  if (!o.json)
    std::fprintf(stderr, "mrc_perf: waiting for %u client(s) on port %u\n", o.clients, o.port);
  if (int rc = accept_clients()) return finish(rc);
  for (Client& k : cl) must(send_line(k.fd.get(), "go"), "handshake");
  if (o.sample_ms) start_sampler();
  if (int rc = serve()) return finish(rc);
  finish(0);
  return summarize();
}

int run_server(const Opts& o) {
  ServerRun r(o);
  return r.run();
}

// ---------------------------------------------------------------------------
// Client

double pct(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  size_t i =
      std::min(v.size() - 1, size_t(std::ceil(p / 100.0 * double(v.size()))) - (p > 0 ? 1 : 0));
  return v[i];
}

// The client: writes messages to the server (bandwidth) or pings it
// (latency), reports every interval, then asks the server for its verdict.
class ClientRun {
 public:
  explicit ClientRun(const Opts& o)
      : o(o),
        slots(o.slots),
        per_qp(per_qp_bytes(o)),
        buf(per_qp * o.qps),
        s(open_side(o, o.qps)),
        counters_at_exit{o, s},
        mr(must(
            s.ctx->reg_mr(s.pd, buf.p, buf.n, core::kAccessLocalWrite | core::kAccessRemoteWrite),
            "reg_mr")),
        co(conn_opts(o)),
        fd(must(tcp_connect(o.peer, o.port, 30'000), "connecting to the server")),
        wcv(256),
        next_k(o.qps, 0),
        done_k(o.qps, 0),
        slot_k(o.qps, std::vector<long long>(slots, -1)) {}

  int run();
  ~ClientRun() { stop_sampler(); }

 private:
  void connect();
  void report_idle_mem();
  void sample_loop();
  void stop_sampler() {
    sampling = false;
    if (sampler.joinable()) sampler.join();
  }
  void print_header();
  void post(uint32_t qi);
  bool more(uint32_t qi) const {
    if (g_stop.load()) return false;
    if (o.iters) return next_k[qi] < o.iters;
    return Clock::now() < end;
  }
  int run_lat();
  int run_bw();
  void pump();
  void report_interval(Clock::time_point now);
  void print_lat_summary(const Totals& t, const char* verify);
  // secs, path_mtu: the run's, taken before the verdict.
  void print_bw_summary(const Totals& t, const char* verify, const std::string& verdict,
                        double secs, uint32_t path_mtu);

  const Opts& o;
  const uint32_t slots;
  const size_t per_qp;
  Buffer buf;  // outlives the device (see ServerRun)
  Side s;
  CountersAtExit counters_at_exit;
  MemoryRegion mr;
  ConnectOptions co;
  UniqueFd fd;
  std::vector<QpEndpoint> theirs;
  std::vector<Wc> wcv;
  Clock::time_point t0, end;
  std::vector<uint64_t> next_k, done_k;
  std::vector<std::vector<long long>> slot_k;
  std::vector<double> lat_us;
  uint64_t completed = 0;
  Totals prev{};
  Clock::time_point last_report;
  uint64_t bytes_since = 0;
  // Bandwidth: at most --inflight messages outstanding per QP and, with
  // credits, none beyond the server's limit (read from the QP's credit cell).
  std::vector<uint64_t> limit;
  uint64_t outstanding = 0;
  bool blocked = false;  // a QP waits for a grant
  Clock::time_point last_grant;
  std::atomic<bool> sampling{false};
  std::thread sampler;  // --sample-ms
};

// Exchanges endpoints with the server, connects the QPs and waits for "go".
void ClientRun::connect() {
  std::vector<QpEndpoint> ours;
  // --srv6: the first --srv6-qps QPs use the SRv6 EV profile.
  auto co_of = [&](uint32_t i) {
    ConnectOptions c = co;
    if (!o.srv6.empty() && i < o.srv6_qps) c.ev_profile = perf::kSrv6ProfileId;
    return c;
  };
  for (uint32_t i = 0; i < o.qps; i++) {
    QpEndpoint e = describe(*s.ctx, *s.qps[i], random_psn(), co_of(i), co.max_wimm, co.mpr);
    e.addr = uint64_t(uintptr_t(buf.p + i * per_qp));
    e.len = per_qp;
    e.rkey = mr.rkey;
    ours.push_back(e);
  }
  theirs = must(exchange_endpoints(fd.get(), ours), "exchange");
  if (theirs.size() != o.qps)
    die("exchange", make_error(EPROTO, "the server has a different QP count"));
  for (const auto& t : theirs)
    if (t.len < per_qp)
      die("exchange",
          make_error(EPROTO,
                     "the server's buffer is smaller than ours (give both sides the same "
                     "--size, --inflight and --slots)"));
  for (uint32_t i = 0; i < o.qps; i++)
    must(connect_qp(*s.ctx, *s.qps[i], ours[i].psn, theirs[i], co_of(i)), "connect QP");
  if (o.lat)
    for (uint32_t k = 0; k < recv_depth(o); k++)
      must(s.qps[0]->post_recv(RecvWr{k, nullptr, 0}), "post_recv");
  // The server starts its clients together, once all have connected.
  auto go = must(recv_line(fd.get(), 600'000), "handshake");
  if (go != "go") die("handshake", make_error(EPROTO, "unexpected '" + go + "'"));
}

// Every QP connected on both ends (the server measured its side before
// "go"), no traffic yet: the idle footprint.
void ClientRun::report_idle_mem() {
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  s.mem_idle = mem_snap();
  if (o.json)
    print_json(Json{{"mem_idle", mem_json("client", o.qps, s.mem_base, s.mem_idle)}});
  else
    std::printf("client: %u idle QPs: %.0f B RSS, %.0f B heap per QP\n", o.qps,
                (double(s.mem_idle.rss) - double(s.mem_base.rss)) / o.qps,
                (double(s.mem_idle.heap) - double(s.mem_base.heap)) / o.qps);
  std::fflush(stdout);
}

void ClientRun::print_header() {
  auto ports = s.ctx->ports();
  auto qa = s.qps[0]->query();
  std::printf(
      "mrc_perf: %s, %u QP(s), %u B messages, %u in flight per QP, MTU %u, %zu plane(s):",
      o.lat ? "latency (WRITE_WITH_IMM ping-pong)" : (o.imm ? "RDMA WRITE_WITH_IMM" : "RDMA WRITE"),
      o.qps, o.size, o.inflight, qa ? qa->path_mtu : 0, ports.size());
  for (const auto& p : ports)
    std::printf(" %s[%s/%s/tx %s]", p.ifname.c_str(), p.xdp_mode.c_str(), p.xsk_mode.c_str(),
                p.tx.c_str());
  std::printf("\n");
}

void ClientRun::post(uint32_t qi) {
  const uint64_t k = next_k[qi]++;
  const uint32_t sl = uint32_t(k % slots);
  uint8_t* src = buf.p + qi * per_qp + size_t(sl) * o.size;
  if (o.verify) fill(src, o.size, k);
  Sge sg{uint64_t(uintptr_t(src)), o.size, mr.lkey};
  SendWr wr;
  wr.wr_id = (uint64_t(qi) << 40) | k;
  wr.opcode = o.imm ? WrOpcode::kRdmaWriteWithImm : WrOpcode::kRdmaWrite;
  wr.sg_list = o.size ? &sg : nullptr;
  wr.num_sge = o.size ? 1 : 0;
  wr.remote_addr = theirs[qi].addr + uint64_t(sl) * o.size;
  wr.rkey = theirs[qi].rkey;
  wr.imm_data = uint32_t(k);
  slot_k[qi][sl] = (long long)k;
  must(s.qps[qi]->post_send(wr), "post_send");
}

// Ping-pong: one message out, wait for the echo. 0, or the exit code.
int ClientRun::run_lat() {
  Clock::time_point sent = Clock::now();
  post(0);
  while (true) {
    size_t n = wait_wc(s, wcv, 1000);
    for (size_t i = 0; i < n; i++) {
      const Wc& w = wcv[i];
      if (w.status != core::kWcSuccess) {
        std::fprintf(stderr, "mrc_perf: completion error: %s\n", core::to_string(w.status));
        return 1;
      }
      if (w.opcode != WcOpcode::kRecvRdmaWithImm) continue;
      lat_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - sent).count() / 2);
      must(s.qps[0]->post_recv(RecvWr{w.wr_id, nullptr, 0}), "post_recv");
      completed++;
      if (!more(0)) return 0;
      sent = Clock::now();
      post(0);
    }
    if (!n && Clock::now() > end + std::chrono::seconds(5)) {
      std::fprintf(stderr, "mrc_perf: no echo for 5 s\n");
      return 1;
    }
  }
}

// Posts on every QP what its window and its credits allow.
void ClientRun::pump() {
  blocked = false;
  for (uint32_t qi = 0; qi < o.qps; qi++)
    while (next_k[qi] - done_k[qi] < o.inflight && more(qi)) {
      if (next_k[qi] >= limit[qi]) {
        const uint64_t l = read_credit(buf.p + qi * per_qp + credit_offset(o), limit[qi]);
        if (l > limit[qi]) last_grant = Clock::now();
        limit[qi] = l;
        if (next_k[qi] >= l) {
          blocked = true;
          break;
        }
      }
      post(qi);
      outstanding++;
    }
}

// Bandwidth: keeps every QP's window full until the run ends. 0, or the
// exit code.
int ClientRun::run_bw() {
  limit.assign(o.qps, uses_credits(o) ? 0 : UINT64_MAX);
  last_grant = Clock::now();
  pump();
  while (outstanding || blocked) {
    if (blocked && !outstanding && Clock::now() - last_grant > std::chrono::seconds(10)) {
      std::fprintf(stderr, "mrc_perf: no credit from the server for 10 s\n");
      dump_counters(s);
      return 1;
    }
    size_t n = wait_wc(s, wcv, blocked ? 1 : 100);
    for (size_t i = 0; i < n; i++) {
      const Wc& w = wcv[i];
      if (w.status != core::kWcSuccess) {
        std::fprintf(stderr, "mrc_perf: completion error on QP %u: %s\n", w.qp_num,
                     core::to_string(w.status));
        dump_counters(s);
        return 1;
      }
      uint32_t qi = uint32_t(w.wr_id >> 40);
      done_k[qi]++;
      completed++;
      outstanding--;
      bytes_since += o.size;
    }
    pump();
    auto now = Clock::now();
    if (now - last_report >= std::chrono::duration<double>(o.interval)) report_interval(now);
  }
  return 0;
}

// --sample-ms (client, --json): every sample_ms, the bytes sent since the
// last sample (data and retransmissions, all planes and per plane), the sum
// of the QPs' congestion windows and bytes in flight, and QP 0's smoothed
// and smallest RTT, and what spurious retransmissions taught its reordering
// windows: how a transfer starts (bench/compare, startup section).
void ClientRun::sample_loop() {
  uint64_t last = 0;
  std::vector<uint64_t> lastp;
  const auto ms = std::chrono::milliseconds(o.sample_ms);
  while (sampling.load()) {
    std::this_thread::sleep_until(t0 + ms * (1 + (Clock::now() - t0) / ms));
    uint64_t total = 0, cwnd = 0, inflight = 0, srtt = 0, min_rtt = 0, reo_extra = 0, rtx = 0,
             qa_cuts = 0, qa_gated = 0, ecn_decs = 0, dark = 0, silences = 0, quiets = 0,
             timeouts = 0, tlp = 0;
    std::vector<uint64_t> planes(o.devs.size(), 0);
    for (size_t i = 0; i < s.qps.size(); i++) {
      auto st = s.qps[i]->stats();
      if (!st) continue;
      for (size_t p = 0; p < planes.size(); p++) planes[p] += st->plane_tx_bytes[p + 1];
      cwnd += st->cwnd_bytes;
      inflight += st->inflight_bytes;
      rtx += st->tx_rtx_pkts;
      qa_cuts += st->cc_qa_cuts;
      qa_gated += st->cc_qa_gated;
      ecn_decs += st->cc_ecn_decreases;
      silences += st->plane_silences;
      quiets += st->plane_quiets;
      timeouts += st->timeouts;
      tlp += st->tlp_probes;
      if (i == 0) srtt = st->srtt_ns, min_rtt = st->min_rtt_ns, reo_extra = st->reo_extra_ns;
      if (i == 0) dark = st->dark_planes;
    }
    std::vector<uint64_t> dp(planes.size());
    for (size_t p = 0; p < planes.size(); p++) {
      dp[p] = planes[p] - (lastp.empty() ? 0 : lastp[p]);
      total += planes[p];
    }
    const auto now = Clock::now();
    print_json(Json{
        {"dir", "tx"},
        {"t_ms", int64_t(std::chrono::duration_cast<std::chrono::milliseconds>(now - t0).count())},
        {"mono_ns",
         int64_t(
             std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count())},
        {"bytes", total - last},
        {"cwnd", cwnd},
        {"inflight", inflight},
        {"srtt_ns", srtt},
        {"min_rtt_ns", min_rtt},
        {"reo_extra_ns", reo_extra},
        {"rtx", rtx},
        {"qa_cuts", qa_cuts},
        {"qa_gated", qa_gated},
        {"ecn_decs", ecn_decs},
        {"silences", silences},
        {"quiets", quiets},
        {"dark", dark},
        {"timeouts", timeouts},
        {"tlp", tlp},
        {"planes", dp}});
    std::fflush(stdout);
    last = total;
    lastp = planes;
  }
}

// The rate since the last report (-I/--interval).
void ClientRun::report_interval(Clock::time_point now) {
  double secs = std::chrono::duration<double>(now - last_report).count();
  Totals t = qp_totals(s);
  uint64_t evc = ev_changes(s);
  if (o.json)
    print_json(
        Json{{"t_s", fixed(std::chrono::duration<double>(now - t0).count(), 3)},
             {"gbps", fixed(double(bytes_since) * 8 / secs / 1e9, 3)},
             {"msg_rate", fixed(double(bytes_since) / std::max<double>(o.size, 1) / secs, 0)},
             {"rtx", t.rtx - prev.rtx},
             {"ev_changes", evc}});
  else
    std::printf("%6.1f s  %8.3f Gbit/s  %10.0f msg/s  rtx %" PRIu64 "  EV changes %" PRIu64 "\n",
                std::chrono::duration<double>(now - t0).count(),
                double(bytes_since) * 8 / secs / 1e9,
                double(bytes_since) / std::max<double>(o.size, 1) / secs, t.rtx - prev.rtx, evc);
  std::fflush(stdout);
  prev.rtx = t.rtx;
  prev.ev_changes += evc;
  bytes_since = 0;
  last_report = now;
}

void ClientRun::print_lat_summary(const Totals& t, const char* verify) {
  std::sort(lat_us.begin(), lat_us.end());
  // p*_us: one way (RTT/2, as ib_write_lat); rtt_*_us: the round trip.
  if (o.json) {
    Json sum{{"mode", "lat"},
             {"engine_sched", to_string(s.ctx->engine_sched())},
             {"size", o.size},
             {"iters", lat_us.size()},
             {"p50_us", fixed(pct(lat_us, 50), 2)},
             {"p99_us", fixed(pct(lat_us, 99), 2)},
             {"p999_us", fixed(pct(lat_us, 99.9), 2)},
             {"min_us", fixed(lat_us.empty() ? 0 : lat_us.front(), 2)},
             {"rtt_p50_us", fixed(2 * pct(lat_us, 50), 2)},
             {"rtt_p99_us", fixed(2 * pct(lat_us, 99), 2)},
             {"rtt_p999_us", fixed(2 * pct(lat_us, 99.9), 2)},
             {"rtt_min_us", fixed(lat_us.empty() ? 0 : 2 * lat_us.front(), 2)},
             {"rtx", t.rtx},
             {"verify", verify}};
    add_mem(sum, o, "client", o.qps, s);
    print_json(Json{{"summary", std::move(sum)}});
  } else {
    std::printf(
        "latency (one way, RTT/2) over %zu round trips: min %.2f us  p50 %.2f us  p99 %.2f us  "
        "p99.9 %.2f us\n",
        lat_us.size(), lat_us.empty() ? 0 : lat_us.front(), pct(lat_us, 50), pct(lat_us, 99),
        pct(lat_us, 99.9));
  }
}

void ClientRun::print_bw_summary(const Totals& t, const char* verify, const std::string& verdict,
                                 double secs, uint32_t path_mtu) {
  const uint64_t bytes = completed * o.size;
  const uint64_t evc = prev.ev_changes + ev_changes(s);
  if (o.json) {
    Json sum{{"mode", "bw"},
             {"engine_sched", to_string(s.ctx->engine_sched())},
             {"op", o.imm ? "write_imm" : "write"},
             {"size", o.size},
             {"path_mtu", path_mtu},
             {"qps", o.qps},
             {"seconds", fixed(secs, 3)},
             {"bytes", bytes},
             {"msgs", completed},
             {"gbps", fixed(double(bytes) * 8 / secs / 1e9, 3)},
             {"msg_rate", fixed(double(completed) / secs, 0)},
             {"rtx", t.rtx},
             {"timeouts", t.timeouts},
             {"ev_changes", evc},
             {"ev_skips", t.ev_skips},
             {"ev_assumed_bad", t.assumed_bad},
             {"ev_readmitted", t.readmitted},
             {"ev_undone", t.undone},
             {"plane_suspects", t.plane_suspects},
             {"plane_lossy", t.plane_lossy},
             {"plane_relapses", t.plane_relapses},
             {"plane_hold_ms", fixed(double(t.plane_hold_ns) / 1e6, 1)},
             {"plane_silences", t.plane_silences},
             {"silent_paced", t.silent_paced},
             {"plane_quiets", t.plane_quiets},
             {"tlp", t.tlp},
             {"spurious_rtx", t.spurious},
             {"nacks", t.trims},
             {"planes", t.plane_bytes},
             {"verify", verify},
             {"server", verdict}};
    add_mem(sum, o, "client", o.qps, s);
    print_json(Json{{"summary", std::move(sum)}});
  } else {
    std::printf("total: %.3f Gbit/s, %.0f msg/s, %.1f MB in %.2f s; retransmissions %" PRIu64
                ", ACK timeouts %" PRIu64 ", EV state changes %" PRIu64 "\n",
                double(bytes) * 8 / secs / 1e9, double(completed) / secs, double(bytes) / 1e6, secs,
                t.rtx, t.timeouts, evc);
    std::printf("EVs: %" PRIu64 " assumed bad (retired), %" PRIu64 " readmitted by probes, %" PRIu64
                " returned at once (their loss proved spurious), %" PRIu64
                " skipped (ECN/trim); plane suspicions %" PRIu64
                ", lossy planes down-weighted %" PRIu64 ", plane relapses %" PRIu64
                " (held off %.1f ms)\n",
                t.assumed_bad, t.readmitted, t.undone, t.ev_skips, t.plane_suspects, t.plane_lossy,
                t.plane_relapses, double(t.plane_hold_ns) / 1e6);
    std::printf("per plane (MB):");
    for (size_t p = 0; p < t.plane_bytes.size(); p++)
      std::printf(" %s=%.1f", o.devs[p].c_str(), double(t.plane_bytes[p]) / 1e6);
    std::printf("\n");
  }
}

int ClientRun::run() {
  connect();
  if (o.mem) report_idle_mem();
  if (!o.json) print_header();
  t0 = Clock::now();
  end = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.duration));
  last_report = t0;
  if (o.sample_ms && o.json) {
    sampling = true;
    sampler = std::thread([this] { sample_loop(); });
  }
  int brc = o.lat ? run_lat() : run_bw();
  stop_sampler();
  if (brc) return brc;
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  const auto qattr = s.qps[0]->query();
  const uint32_t path_mtu = qattr ? qattr->path_mtu : 0;
  // Tell the server which message sits in every slot, get its verdict.
  std::string line = "done " + std::to_string(completed);
  for (uint32_t qi = 0; qi < o.qps; qi++)
    for (uint32_t sl = 0; sl < slots; sl++) line += " " + std::to_string(slot_k[qi][sl]);
  must(send_line(fd.get(), line), "sending the result");
  std::string verdict = must(recv_line(fd.get(), 30'000), "waiting for the server's verdict");
  const bool verified = verdict.rfind("result ok", 0) == 0;
  int rc = o.verify && !verified ? 3 : 0;
  Totals t = qp_totals(s);
  const char* verify = o.verify ? (verified ? "ok" : "fail") : "off";
  if (o.lat)
    print_lat_summary(t, verify);
  else
    print_bw_summary(t, verify, verdict, secs, path_mtu);
  if (o.verify && !o.json)
    std::printf("verification: %s\n", verified ? "passed (every byte checked)" : verdict.c_str());
  if (o.mem && !o.json) {
    const MemSnap e = mem_snap();
    std::printf("client: after the run %.0f B RSS, %.0f B heap per QP\n",
                (double(e.rss) - double(s.mem_base.rss)) / o.qps,
                (double(e.heap) - double(s.mem_base.heap)) / o.qps);
  }
  if (o.counters) dump_counters(s);
  fd.reset();
  return rc;
}

int run_client(const Opts& o) {
  struct EvLog {
    ~EvLog() {
      if (g_ev_log) std::fclose(g_ev_log);
      g_ev_log = nullptr;
    }
  } ev_log_closer;
  if (!o.ev_log.empty() && !(g_ev_log = std::fopen(o.ev_log.c_str(), "w"))) {
    std::fprintf(stderr, "mrc_perf: %s: %s\n", o.ev_log.c_str(), std::strerror(errno));
    return 2;
  }
  ClientRun r(o);
  return r.run();
}

}  // namespace

int main(int argc, char** argv) {
  Opts o = parse(argc, argv);
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  try {
    return o.server ? run_server(o) : run_client(o);
  } catch (const Fatal&) {
    return 1;
  }
}
