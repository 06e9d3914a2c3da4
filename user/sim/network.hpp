// A deterministic discrete-event network for testing the sans-I/O MRC engine.
//
// H hosts, P planes, M spine paths per plane. A frame sent by host h on port p
// crosses three links: the host uplink (h, p), one of the M spine paths of
// plane p (chosen by an ECMP hash of src IP, dst IP, UDP source port and IPv6
// flow label), and the downlink (dst, p). Every link has latency, jitter, a
// rate, two strict-priority FIFO queues (control class ahead of data), loss,
// blackhole, trimming, ECN marking, reordering, duplication, corruption and
// an up/down state, all changeable at run time.
//
// Time is virtual (nanoseconds). Same config, seed and inputs give the same
// event order and outcomes on any compiler. See Documentation/simulator.md.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "codec/packet.hpp"
#include "mrc/result.hpp"
#include "sim/rng.hpp"

namespace mrc::sim {

using Time = uint64_t;  // nanoseconds of virtual time
inline constexpr Time kNs = 1;
inline constexpr Time kUs = 1000;
inline constexpr Time kMs = 1000 * kUs;
inline constexpr Time kSec = 1000 * kMs;
inline constexpr Time kNever = ~Time(0);
inline constexpr uint32_t kOff = ~uint32_t(0);  // a threshold that never triggers

// Limits of the addressing scheme (one address byte each for host and plane).
inline constexpr uint32_t kMaxHosts = 256;
inline constexpr uint32_t kMaxPlanes = 256;
inline constexpr uint32_t kMaxPathsPerPlane = 65536;

struct LinkParams {
  Time latency = 1 * kUs;               // propagation delay
  Time jitter = 0;                      // extra delay, uniform in [0, jitter]; keeps FIFO order
  uint64_t rate_bps = 100'000'000'000;  // serialization rate, 0 = infinite
  uint32_t queue_bytes = 1u << 20;      // capacity of each of the two queues (bytes waiting)
  // A data packet whose admission would put the data queue above this depth
  // is trimmed (MRC data in a trimmable class) instead of queued.
  uint32_t trim_threshold = kOff;
  // An ECN-capable data packet whose admission puts the data queue above
  // this depth is marked CE. Ignored on host downlinks (the last hop).
  uint32_t ecn_threshold = kOff;
  double loss = 0;     // probability a frame is lost on the wire
  double reorder = 0;  // probability a frame is held back by reorder_delay
  Time reorder_delay = 0;
  double dup = 0;          // probability a frame is delivered twice
  double corrupt = 0;      // probability one bit of the payload region flips
  bool blackhole = false;  // silently drop everything arriving
  bool up = true;          // link state; a down link drops (and its port reports down)
  bool operator==(const LinkParams&) const = default;
};

enum class Tier : uint8_t { kUplink, kSpine, kDownlink };
std::string_view to_string(Tier t);

// Why a frame was dropped. The first four happen on a link.
enum class Drop : uint8_t {
  kDown,        // link down (at ingress or while on the wire)
  kBlackhole,   // link blackholed
  kQueueFull,   // queue capacity exceeded (and not trimmable)
  kLoss,        // random loss
  kNoRoute,     // unknown destination, another plane's address, or unparseable
  kNoReceiver,  // destination host has no receive callback attached
  kOversize,    // frame larger than NetConfig::max_frame (or empty)
  kBadPort,     // send() on a host or port that does not exist
  kCount,
};
inline constexpr size_t kLinkDropCauses = 4;
std::string_view to_string(Drop d);

struct LinkCounters {
  uint64_t rx_frames = 0, rx_bytes = 0;  // offered to the link
  uint64_t tx_frames = 0, tx_bytes = 0;  // handed to the next hop
  std::array<uint64_t, kLinkDropCauses> drops{};
  uint64_t trims = 0, ecn_marks = 0, dups = 0, corruptions = 0, reorders = 0;
  uint32_t max_queue_bytes = 0;       // deepest data queue seen
  uint32_t max_ctrl_queue_bytes = 0;  // deepest control queue seen

  uint64_t drop(Drop d) const { return size_t(d) < kLinkDropCauses ? drops[size_t(d)] : 0; }
  uint64_t dropped() const;
  LinkCounters& operator+=(const LinkCounters& o);
  bool operator==(const LinkCounters&) const = default;
  std::string to_string() const;
};

struct NetCounters {
  uint64_t sent = 0, sent_bytes = 0;                   // frames accepted by send()
  uint64_t delivered = 0, delivered_bytes = 0;         // frames handed to a receive callback
  std::array<uint64_t, size_t(Drop::kCount)> drops{};  // all causes, links included
  uint64_t dropped() const;
  bool operator==(const NetCounters&) const = default;
};

struct NetConfig {
  uint32_t hosts = 2;
  uint32_t planes = 1;
  uint32_t paths_per_plane = 1;
  codec::IpVersion ip_version = codec::IpVersion::kV4;  // of ip_of(); both are routed
  LinkParams uplink, spine, downlink;  // defaults per tier (and what "heal" restores)
  codec::DscpClasses dscp;
  uint16_t udp_port = MRC_UDP_PORT_DEFAULT;  // MRC frames (trimmable, corruptible payload)
  uint64_t seed = 1;                         // random streams (loss, jitter, ...)
  uint64_t ecmp_seed = 0;                    // ECMP hash salt: which EV lands on which path
  uint32_t max_frame = 10240;                // largest frame send() accepts

  mrc::Status validate() const;
};

using LinkId = uint32_t;

struct LinkInfo {
  Tier tier;
  uint32_t plane;
  uint32_t index;  // host for uplinks/downlinks, path for spine paths
};

// A set of links. Any number may be kAny ('*').
struct LinkSel {
  enum class Kind : uint8_t {
    kAll,       // every link
    kPlane,     // a = plane: uplinks, spine paths and downlinks of the plane
    kPath,      // a = plane, b = path: a spine path
    kUplink,    // a = host, b = plane
    kDownlink,  // a = host, b = plane
    kPort,      // a = host, b = plane: uplink and downlink
    kHost,      // a = host: its uplinks and downlinks on every plane
  };
  static constexpr int32_t kAny = -1;
  Kind kind = Kind::kAll;
  int32_t a = kAny, b = kAny;

  static LinkSel all() { return {}; }
  static LinkSel plane(int32_t p) { return {Kind::kPlane, p, kAny}; }
  static LinkSel path(int32_t p, int32_t m) { return {Kind::kPath, p, m}; }
  static LinkSel uplink(int32_t h, int32_t p) { return {Kind::kUplink, h, p}; }
  static LinkSel downlink(int32_t h, int32_t p) { return {Kind::kDownlink, h, p}; }
  static LinkSel port(int32_t h, int32_t p) { return {Kind::kPort, h, p}; }
  static LinkSel host(int32_t h) { return {Kind::kHost, h, kAny}; }
  bool operator==(const LinkSel&) const = default;
  std::string to_string() const;  // in timeline syntax: "path 1/7", "plane *"
};

enum class TraceKind : uint8_t {
  kSend,     // accepted by send() (host, port)
  kDrop,     // dropped (drop says why; link is kNoLink for network-level drops)
  kTrim,     // trimmed on link
  kEcnMark,  // marked CE on link
  kDup,      // duplicated on link (the frame given is the copy)
  kCorrupt,  // a bit flipped on link
  kReorder,  // held back on link
  kDeliver,  // handed to the receive callback (host, port)
};
std::string_view to_string(TraceKind k);

inline constexpr LinkId kNoLink = ~LinkId(0);

struct TraceEvent {
  Time time;
  TraceKind kind;
  Drop drop;      // for kDrop
  LinkId link;    // kNoLink when not on a link
  uint32_t host;  // sender for kSend, receiver for kDeliver, else ~0
  uint32_t port;
  uint64_t frame_id;  // sequence number given by send(); a duplicate keeps its original's
};

class Network {
 public:
  using RxFn = std::function<void(int port, std::span<const uint8_t> frame, Time now)>;
  using PortFn = std::function<void(int port, bool up, Time now)>;
  using TraceFn = std::function<void(const TraceEvent&, std::span<const uint8_t> frame)>;
  using TimerFn = std::function<void()>;
  struct TimerId {
    uint32_t slot = ~0u;
    uint64_t seq = 0;
  };

  // Validates the config first; the error names the bad field.
  static mrc::Result<std::unique_ptr<Network>> create(const NetConfig& cfg);
  // Values out of range are clamped (hosts and planes to [1, 256], paths to
  // [1, 65536], max_frame to [64, 65535]); use create() to get an error instead.
  explicit Network(const NetConfig& cfg);
  ~Network();
  Network(const Network&) = delete;
  Network& operator=(const Network&) = delete;

  const NetConfig& config() const { return cfg_; }

  // --- Hosts ---------------------------------------------------------------
  // Frames for `host` arrive through rx(port = plane, frame, now). The frame
  // is valid only during the call. rx may call send() and at(); it must not
  // call attach() for the same host.
  void attach(uint32_t host, RxFn rx);
  // Called when the port's link state (uplink and downlink up) changes.
  void on_port_change(uint32_t host, PortFn fn);
  // Sends a frame at the current time; it is copied. Returns false when it
  // was dropped at once (bad port, oversize, no route, port link down or
  // blackholed, queue full); the drop is counted either way.
  bool send(uint32_t host, uint32_t port, std::span<const uint8_t> frame);
  bool port_up(uint32_t host, uint32_t plane) const;

  // --- Addresses: host h on plane p is 02:00:00:00:pp:hh, 198.18.p.h, fd00::p:h
  codec::Mac mac_of(uint32_t host, uint32_t plane) const;
  codec::IpAddr ip_of(uint32_t host, uint32_t plane) const;  // in config().ip_version
  codec::IpAddr ip_of(uint32_t host, uint32_t plane, codec::IpVersion v) const;
  // The spine path a frame sent on `plane` would take, or -1 if it has no route.
  int ecmp_path(std::span<const uint8_t> frame) const;

  // --- Time and events -----------------------------------------------------
  Time now() const { return now_; }
  // Runs fn at time t (at now() if t is in the past). Events at the same
  // time run in the order they were scheduled.
  TimerId at(Time t, TimerFn fn);
  TimerId after(Time delay, TimerFn fn) { return at(now_ + delay, std::move(fn)); }
  bool cancel(TimerId id);  // false if it already ran or was cancelled
  // Runs one event. False if there is none.
  bool step();
  // Runs every event up to and including time t, then sets now() to t.
  void run_until(Time t);
  void run_for(Time d) { run_until(now_ + d); }
  // Runs until done() holds (checked after every event) or the next event
  // is later than deadline. Returns done().
  bool run_until_done(const std::function<bool()>& done, Time deadline);
  // Runs until no events are left or the next is later than deadline.
  // Returns true if the queue emptied.
  bool run_until_idle(Time deadline = kNever);
  Time next_event_time();
  // Events queued, counting cancelled timers not yet discarded.
  size_t pending_events() const { return heap_.size(); }

  // --- Links ---------------------------------------------------------------
  uint32_t link_count() const { return uint32_t(links_.size()); }
  LinkId uplink(uint32_t host, uint32_t plane) const { return host * cfg_.planes + plane; }
  LinkId spine(uint32_t plane, uint32_t path) const {
    return n_host_links_ + plane * cfg_.paths_per_plane + path;
  }
  LinkId downlink(uint32_t host, uint32_t plane) const {
    return n_host_links_ + n_spine_links_ + host * cfg_.planes + plane;
  }
  LinkInfo info(LinkId id) const;
  std::string link_name(LinkId id) const;  // "uplink 3/1", "path 1/7", "downlink 0/2"
  // Links matching a selector, in id order; out-of-range numbers match nothing.
  std::vector<LinkId> select(const LinkSel& sel) const;
  // Checks that every number in the selector exists in this network.
  mrc::Status check(const LinkSel& sel) const;

  const LinkParams& params(LinkId id) const { return links_[id].p; }
  void set_params(LinkId id, const LinkParams& p);
  // Changes the parameters of every selected link; fn sees each link's tier.
  void update(const LinkSel& sel, const std::function<void(LinkParams&, Tier)>& fn);
  const LinkParams& default_params(Tier t) const;

  const LinkCounters& counters(LinkId id) const { return links_[id].c; }
  LinkCounters plane_counters(uint32_t plane) const;
  LinkCounters tier_counters(Tier t) const;
  const NetCounters& net_counters() const { return net_; }
  void reset_counters();
  uint32_t queue_depth(LinkId id) const { return links_[id].qbytes[kData]; }
  uint32_t ctrl_queue_depth(LinkId id) const { return links_[id].qbytes[kCtrl]; }
  // Counters of every link that saw traffic, one line each.
  std::string dump_counters() const;

  // Observes every frame's fate (slows the simulation a little).
  void set_trace(TraceFn fn) { trace_ = std::move(fn); }

  // Packet buffers and records allocated so far (they are reused; in steady
  // state this stops growing).
  size_t pool_buffers() const { return n_buffers_; }

 private:
  static constexpr int kCtrl = 0, kData = 1;
  struct Ring {
    std::vector<uint32_t> v;
    uint32_t head = 0, n = 0;
    bool empty() const { return n == 0; }
    void push(uint32_t x);
    uint32_t pop();
  };
  struct Link {
    LinkParams p;
    LinkCounters c;
    Tier tier;
    uint32_t plane, index;
    Time busy_until = 0;    // transmitter free from then
    Time last_arrival = 0;  // keeps FIFO order under jitter
    bool tx_pending = false;
    Ring q[2];
    uint32_t qbytes[2] = {0, 0};
    Rng rng;
  };
  struct Pkt {
    uint8_t* buf;
    uint32_t len;
    uint32_t cap;
    uint64_t id;
    LinkId links[3];
    uint16_t l3, l4;  // offsets of the IP and UDP headers, 0 = absent
    uint16_t dst_host;
    uint8_t plane;
    uint8_t hop;
    bool v6;
  };
  enum EvKind : uint32_t { kEvHop, kEvTxDone, kEvTimer };
  struct Ev {
    Time t;
    uint64_t seq;
    uint32_t kind;
    uint32_t arg;
  };
  struct Timer {
    TimerFn fn;
    uint64_t seq = 0;  // of the pending event, 0 = slot free
  };
  struct Route {
    int dst_host = -1;
    int plane = -1;
    uint32_t path = 0;
    uint16_t l3 = 0, l4 = 0;
    bool v6 = false;
  };

  Route classify(std::span<const uint8_t> f) const;
  void push_event(Time t, uint32_t kind, uint32_t arg);
  void pop_event();  // removes heap_[0]
  void dispatch(const Ev& e);
  bool ingress(LinkId li, uint32_t pi);
  void start_tx(LinkId li, uint32_t pi);
  void on_hop(uint32_t pi);
  void on_tx_done(LinkId li);
  void drop(LinkId li, uint32_t pi, Drop why);
  void net_drop(Drop why, uint32_t host, uint32_t port, std::span<const uint8_t> f);
  bool try_trim(Link& L, Pkt& P);
  void mark_ce(Pkt& P);
  bool corrupt(Link& L, Pkt& P);
  void trace(TraceKind k, Drop d, LinkId li, uint32_t host, uint32_t port, const Pkt& P);
  uint8_t dscp_of(const Pkt& P) const;
  bool is_ctrl_class(uint8_t dscp) const;
  uint32_t alloc_pkt(uint32_t len);
  void free_pkt(uint32_t pi);
  uint8_t* alloc_buf(uint32_t len, uint32_t& cap);
  void notify_ports(LinkId id, bool was_up);

  NetConfig cfg_;
  uint32_t n_host_links_ = 0, n_spine_links_ = 0;
  std::vector<Link> links_;
  std::vector<RxFn> rx_;
  std::vector<PortFn> port_fn_;
  TraceFn trace_;
  NetCounters net_;

  Time now_ = 0;
  uint64_t seq_ = 0;
  uint64_t frame_ids_ = 0;
  std::vector<Ev> heap_;
  std::vector<Timer> timers_;
  std::vector<uint32_t> free_timers_;

  std::vector<Pkt> pkts_;
  std::vector<uint32_t> free_pkts_;
  static constexpr uint32_t kSmallBuf = 256;
  std::vector<uint8_t*> free_small_, free_large_;
  std::vector<std::unique_ptr<uint8_t[]>> slabs_;
  size_t n_buffers_ = 0;
};

// Time as text: the largest of s, ms, us, ns that divides it ("3ms", "1500ns").
std::string format_time(Time t);

}  // namespace mrc::sim
