// SPDX-License-Identifier: (GPL-2.0 OR BSD-3-Clause)
//
// libmrc-fi.so: the libfabric provider "mrc" (Documentation/libfabric.md).
// FI_EP_MSG endpoints with FI_MSG and FI_RMA over libmrc's public C API; one
// libmrc QP per endpoint; messages travel through a receive ring per
// connection written with WRITE-with-immediate under credits (proto.hpp);
// connections are set up over a TCP side channel the provider owns.
//
// Locking (the domain is FI_THREAD_SAFE), in this order:
//   g_ctl        control path: objects' creation, binding and closing, the
//                EQs and connection management, the completion channel;
//   Cq::eps_mu   a CQ's list of endpoints (shared while progressing them);
//   Ep::mu       one endpoint's data path (its rings, queues and QP state);
//   Cq::mu       a CQ's completion queues and wait state (a leaf).
// Data operations take their endpoint's lock only; reading a CQ takes the
// CQ's locks and those of its endpoints, never g_ctl unless a waiter armed
// the completion channel. libmrc's post and poll calls are thread-safe.
// Progress is manual: reading a CQ or an EQ (or fi_trywait) runs it;
// libmrc's engine thread moves the bytes meanwhile.
#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <rdma/providers/fi_log.h>
#include <rdma/providers/fi_prov.h>

#include "fi/info.hpp"
#include "fi/proto.hpp"
#include "fi/yield.hpp"
#include "mrc/mrc.h"
#include "util/clock.hpp"

namespace mrc::fi {
namespace {

struct fi_provider g_prov;
std::recursive_mutex g_ctl;
using Lock = std::lock_guard<std::recursive_mutex>;
using EpLock = std::lock_guard<std::mutex>;
// Set when a waiter armed libmrc CQs on the completion channel: the next CQ
// read drains the channel (otherwise it stays untouched, no syscall).
std::atomic<bool> g_armed{false};

#define MRC_FI_WARN(...) FI_WARN(&g_prov, FI_LOG_CORE, __VA_ARGS__)

// ---------------------------------------------------------------------------
// Configuration (FI_MRC_* environment variables, fi_info -e lists them)

struct Config {
  std::vector<std::string> ifaces;
  std::string domain;
  uint32_t slots = 64;
  uint32_t slot_size = 65536;
  // Application progress (the polling thread runs libmrc's engine) unless
  // FI_MRC_PROGRESS=thread; the service does not serve it, so through
  // mrc-serviced the engine thread runs it anyway (g_dev.app_progress says
  // which). progress_set: FI_MRC_PROGRESS was given (a fallback warns).
  bool app_progress = true;
  bool progress_set = false;
  // sched_yield on an empty CQ read (either progress) once the CQ has read
  // empty for yield_us (FI_MRC_YIELD, FI_MRC_YIELD_US; yield.hpp).
  bool yield = true;
  uint32_t yield_us = kYieldUsDefault;
  // UMEM frames one packet may fill (FI_MRC_FRAME_CHUNKS; 1: single-buffer
  // AF_XDP, payload at most 3392 bytes per packet even on jumbo planes).
  uint32_t frame_chunks = 1;
  // TX backend (FI_MRC_TX): MRC_DEVICE_TX_AUTO (the default: live frames
  // where the kernel has them; AF_XDP when FI_MRC_FRAME_CHUNKS > 1, whose
  // packets live frames cannot carry), MRC_DEVICE_TX_LIVE or 0 (xsk, AF_XDP
  // copy mode). Auto since 2026-12-04: with quick adapt measuring the
  // fabric, live frames carry 1 MiB ~1.3x faster (libfabric.md "Running").
  uint32_t tx_flag = MRC_DEVICE_TX_AUTO;
  // Messages of at least this many bytes go straight into a receive buffer
  // the peer advertised (FI_MRC_DIRECT_MIN; 0: never; libfabric.md
  // "Direct messages"), receives of at least this size are advertised.
  uint64_t direct_min = 65536;
  std::string why;  // empty when usable
};

std::string param_str(const char* name) {
  char* v = nullptr;
  if (fi_param_get_str(&g_prov, name, &v) == FI_SUCCESS && v) return v;
  return {};
}

Config load_config() {
  Config c;
  std::string ifs = param_str("ifaces");
  for (size_t pos = 0; pos < ifs.size();) {
    size_t e = ifs.find(',', pos);
    if (e == std::string::npos) e = ifs.size();
    if (e > pos) c.ifaces.push_back(ifs.substr(pos, e - pos));
    pos = e + 1;
  }
  if (c.ifaces.empty())
    c.why = "FI_MRC_IFACES is not set (the plane interfaces, e.g. eth1,eth2,eth3,eth4)";
  else if (c.ifaces.size() > MRC_MAX_PORTS)
    c.why = "FI_MRC_IFACES names more than 16 interfaces";
  for (size_t i = 0; i < c.ifaces.size(); i++) c.domain += (i ? "+" : "") + c.ifaces[i];
  int v = 0;
  if (fi_param_get_int(&g_prov, "slots", &v) == FI_SUCCESS) {
    if (v < 4 || uint32_t(v) > kMaxSlots) c.why = "FI_MRC_SLOTS must be 4..4095";
    c.slots = uint32_t(v);
  }
  if (fi_param_get_int(&g_prov, "slot_size", &v) == FI_SUCCESS) {
    if (v < 256 || v > (1 << 24)) c.why = "FI_MRC_SLOT_SIZE must be 256..16777216";
    c.slot_size = uint32_t(v);
  }
  if (fi_param_get_int(&g_prov, "frame_chunks", &v) == FI_SUCCESS) {
    if (v < 1 || v > 17) c.why = "FI_MRC_FRAME_CHUNKS must be 1..17";
    c.frame_chunks = uint32_t(v);
  }
  std::string tx = param_str("tx");
  if (tx == "xsk")
    c.tx_flag = 0;
  else if (tx == "live")
    c.tx_flag = MRC_DEVICE_TX_LIVE;
  else if (!tx.empty() && tx != "auto")
    c.why = "FI_MRC_TX must be xsk, live or auto";
  if (c.frame_chunks > 1) {
    if (tx == "live")
      c.why =
          "FI_MRC_TX=live carries at most ~3.2 KB per packet: FI_MRC_FRAME_CHUNKS > 1 needs "
          "xsk (or auto)";
    else
      c.tx_flag = 0;
  }
  std::string dm = param_str("direct_min");
  if (!dm.empty()) {
    char* end = nullptr;
    errno = 0;
    unsigned long long d = std::strtoull(dm.c_str(), &end, 10);
    if (errno || !end || *end || dm[0] == '-' || d > (1ull << 30))
      c.why = "FI_MRC_DIRECT_MIN must be 0 (off) or a byte count up to 1073741824";
    else
      c.direct_min = d;
  }
  std::string prog = param_str("progress");
  c.progress_set = !prog.empty();
  if (prog == "thread")
    c.app_progress = false;
  else if (!prog.empty() && prog != "app")
    c.why = "FI_MRC_PROGRESS must be thread or app";
  int y = 1;
  if (fi_param_get_bool(&g_prov, "yield", &y) == FI_SUCCESS) c.yield = y;
  // libfabric's FI_PARAM_INT takes "abc" as 0 silently: parsed here.
  std::string yus = param_str("yield_us");
  if (!yus.empty() && !parse_yield_us(yus, &c.yield_us)) {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true))
      MRC_FI_WARN("FI_MRC_YIELD_US=%s is not a whole number of microseconds in 0..%u; using %u\n",
                  yus.c_str(), kYieldUsMax, kYieldUsDefault);
  }
  return c;
}

// The first IPv4 address of interface `ifname` in this network namespace.
bool iface_addr(const std::string& ifname, struct in_addr* out) {
  struct ifaddrs* ifa = nullptr;
  if (getifaddrs(&ifa)) return false;
  bool found = false;
  for (struct ifaddrs* p = ifa; p && !found; p = p->ifa_next)
    if (p->ifa_addr && p->ifa_addr->sa_family == AF_INET && ifname == p->ifa_name) {
      *out = reinterpret_cast<struct sockaddr_in*>(p->ifa_addr)->sin_addr;
      found = true;
    }
  freeifaddrs(ifa);
  return found;
}

InfoConfig info_config(const Config& c, bool* ok) {
  InfoConfig ic;
  ic.domain = c.domain;
  ic.local.s_addr = 0;
  ic.max_msg_size = size_t(1) << 30;
  ic.inject_size = std::min<size_t>(c.slot_size - sizeof(SlotHdr), 4096);
  ic.tx_size = 1024;
  ic.rx_size = 1024;
  ic.cm_data_size = 256;
  *ok = c.why.empty() && iface_addr(c.ifaces[0], &ic.local);
  return ic;
}

// ---------------------------------------------------------------------------
// The libmrc device: one per process, opened by the first domain.

struct Device {
  struct mrc_device* dev = nullptr;
  struct mrc_context* ctx = nullptr;
  struct mrc_pd* pd = nullptr;
  struct mrc_comp_channel* chan = nullptr;
  int chan_fd = -1;
  int refs = 0;
  bool app_progress = false;  // FI_MRC_PROGRESS=app and served (not in service mode)
  uint32_t mtu = 4096;
  int num_ports = 0;
  union mrc_gid gid[MRC_MAX_PORTS] = {};
  std::mutex mrs_mu;
  struct ReadTarget {
    struct mrc_mr* m;
    uint64_t access;  // the consumer's FI_* access flags
  };
  std::unordered_map<uint32_t, ReadTarget> mrs;  // rkey -> MR (read targets), under mrs_mu
};
Device g_dev;

int errno_to_fi(int e) { return e ? -e : -FI_EOTHER; }

// Releases what device_get opened, in reverse order, and leaves g_dev as
// before the first device_get (its error path and the last device_put).
void device_release() {
  if (g_dev.chan) mrc_destroy_comp_channel(g_dev.chan);
  if (g_dev.pd) mrc_dealloc_pd(g_dev.pd);
  if (g_dev.ctx) mrc_destroy_context(g_dev.ctx);
  if (g_dev.dev) mrc_close_device(g_dev.dev);
  g_dev.dev = nullptr;
  g_dev.ctx = nullptr;
  g_dev.pd = nullptr;
  g_dev.chan = nullptr;
  g_dev.chan_fd = -1;
  g_dev.refs = 0;
}

int device_get(const Config& c) {
  if (g_dev.refs++ > 0) return 0;
  std::vector<const char*> names;
  for (auto& s : c.ifaces) names.push_back(s.c_str());
  struct mrc_device_opts opts = {};
  if (c.app_progress) opts.flags |= MRC_DEVICE_APP_PROGRESS;
  opts.frame_chunks = c.frame_chunks;
  opts.flags |= c.tx_flag;
  // Quick adapt on the fabric's part of the RTT: the provider's traffic
  // (MPI, fi_pingpong) is request/response and CPU-bound, where the hosts'
  // own delay held the window at a few packets (libfabric.md "Running";
  // MRC_ENGINE=cc_qa_fabric=0 turns it off).
  opts.flags |= MRC_DEVICE_QA_FABRIC;
  g_dev.dev = mrc_open_device(names.data(), int(names.size()), &opts);
  if (!g_dev.dev && c.app_progress && errno == EOPNOTSUPP) {
    // mrc-serviced runs the engine and does not serve application
    // progress: its engine thread drives the protocol instead (a warning
    // when FI_MRC_PROGRESS=app asked for it; the default says so at
    // FI_LOG_LEVEL=info).
    if (c.progress_set)
      MRC_FI_WARN("FI_MRC_PROGRESS=app: %s; using the engine thread\n", mrc_last_error());
    else
      FI_INFO(&g_prov, FI_LOG_CORE, "service mode: progress by the service's engine thread\n");
    opts.flags &= ~uint32_t(MRC_DEVICE_APP_PROGRESS);
    g_dev.dev = mrc_open_device(names.data(), int(names.size()), &opts);
  }
  if (!g_dev.dev) {
    int e = errno;
    MRC_FI_WARN("mrc_open_device(%s): %s\n", c.domain.c_str(), mrc_last_error());
    g_dev.refs = 0;
    return errno_to_fi(e);
  }
  g_dev.ctx = mrc_create_context(g_dev.dev, nullptr);
  g_dev.pd = g_dev.ctx ? mrc_alloc_pd(g_dev.dev) : nullptr;
  if (!g_dev.pd || mrc_create_comp_channel(g_dev.ctx, &g_dev.chan) ||
      mrc_get_comp_channel_fd(g_dev.chan, &g_dev.chan_fd)) {
    int e = errno;
    MRC_FI_WARN("mrc context/PD/channel: %s\n", mrc_last_error());
    device_release();
    return errno_to_fi(e);
  }
  fcntl(g_dev.chan_fd, F_SETFL, fcntl(g_dev.chan_fd, F_GETFL) | O_NONBLOCK);
  g_dev.app_progress = (opts.flags & MRC_DEVICE_APP_PROGRESS) != 0;
  g_dev.num_ports = mrc_num_ports(g_dev.dev);
  // The largest payload per packet every plane and the device carry (IPv4):
  // 1408 on MTU 1500 planes; on jumbo planes what the device receives in one
  // frame (3392 for single-buffer AF_XDP), not the planes' 8896: a larger
  // path MTU there loses every full-size packet (the MTU-9000 hang: 1 MiB
  // transfers stalled while 8 B ones passed).
  if (mrc_query_path_mtu(g_dev.dev, 4, &g_dev.mtu)) {
    int e = errno;
    MRC_FI_WARN("mrc_query_path_mtu: %s\n", mrc_last_error());
    device_release();
    return errno_to_fi(e);
  }
  char note[160] = "";
  const bool live = mrc_device_tx(g_dev.dev, note, sizeof note) == MRC_DEVICE_TX_KIND_LIVE;
  FI_INFO(&g_prov, FI_LOG_CORE,
          "device %s: %d planes, path MTU %u (FI_MRC_FRAME_CHUNKS %u), TX %s%s%s\n",
          c.domain.c_str(), g_dev.num_ports, g_dev.mtu, c.frame_chunks, live ? "live" : "xsk",
          note[0] ? ": " : "", note);
  for (int p = 1; p <= g_dev.num_ports; p++) {
    if (mrc_query_gid(g_dev.dev, uint8_t(p), 0, &g_dev.gid[p - 1]))
      std::memset(&g_dev.gid[p - 1], 0, sizeof g_dev.gid[p - 1]);
  }
  return 0;
}

void device_put() {
  if (--g_dev.refs > 0) return;
  device_release();
  std::lock_guard<std::mutex> ml(g_dev.mrs_mu);
  g_dev.mrs.clear();
}

// ---------------------------------------------------------------------------
// Small helpers

template <class T, class F>
T* of(F* f) {
  return reinterpret_cast<T*>(f);
}

void signal_fd(int efd) {
  uint64_t one = 1;
  ssize_t r = write(efd, &one, sizeof one);
  (void)r;
}

void drain_fd(int efd) {
  uint64_t v;
  ssize_t r = read(efd, &v, sizeof v);
  (void)r;
}

// Blocking send/recv of exactly n bytes on the CM socket (5 s limit).
bool sock_send_all(int fd, const void* p, size_t n) {
  auto* b = static_cast<const uint8_t*>(p);
  while (n) {
    ssize_t r = send(fd, b, n, MSG_NOSIGNAL);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    b += r;
    n -= size_t(r);
  }
  return true;
}

bool sock_recv_all(int fd, void* p, size_t n) {
  auto* b = static_cast<uint8_t*>(p);
  while (n) {
    ssize_t r = recv(fd, b, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    b += r;
    n -= size_t(r);
  }
  return true;
}

void sock_timeouts(int fd) {
  struct timeval tv = {5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// ---------------------------------------------------------------------------
// The CM side-channel message (one fixed-size record each way).

constexpr uint32_t kCmMagic = 0x4d524346;  // "MRCF"
// 2: credits as a counter of freed slots (proto.hpp, kCreditMod)
// 3: receive adverts and direct messages (ImmType::kRecvAd, kDirect)
constexpr uint16_t kCmVersion = 3;
constexpr uint32_t kCmDataMax = 256;
enum CmType : uint16_t { kConnReq = 1, kAccept = 2, kReject = 3, kReady = 4, kBye = 5 };

struct CmMsg {
  uint32_t magic;
  uint16_t version;
  uint16_t type;
  uint32_t qpn, psn;
  uint64_t ring_addr;
  uint32_t ring_rkey;
  uint32_t slots, slot_size;
  uint32_t mtu;
  uint16_t max_wimm_dest;
  uint8_t mpr_dest;
  uint8_t num_gids;
  uint32_t cm_len;
  union mrc_gid gid[MRC_MAX_PORTS];
  uint8_t cm[kCmDataMax];
};

// ---------------------------------------------------------------------------
// Objects

struct Cq;
struct Eq;
struct Ep;

struct Fabric {
  struct fid_fabric f;
  Config cfg;
};

struct Domain {
  struct fid_domain f;
  Fabric* fab;
  struct fi_info* info;
};

struct Mr {
  struct fid_mr f;
  struct mrc_mr* m;
};

struct Cq {
  struct fid_cq f;
  Domain* dom;
  enum fi_cq_format fmt;
  enum fi_wait_obj wait;
  std::mutex mu;  // q, errq
  std::deque<Completion> q;
  std::deque<struct fi_cq_err_entry> errq;
  std::shared_mutex eps_mu;  // eps
  std::vector<Ep*> eps;
  // The wait fd (FI_GETWAIT gives epfd: efd and the completion channel).
  // efd is written only for a waiter (Documentation/libfabric.md, "Wait
  // objects"); a consumer that polls never pays for it. Under mu:
  //   armed     a waiter armed the CQ (fi_trywait returned FI_SUCCESS, or
  //             fi_cq_sread is about to block): the next completion writes
  //             efd once and disarms it;
  //   signaled  efd holds a count (drained by the next arming, not by reads);
  //   kicked    the completion channel named one of the CQ's endpoints while
  //             it was not armed: an arming under way returns -FI_EAGAIN;
  //   wakeup    fi_cq_signal: fi_cq_sread returns -FI_EAGAIN.
  bool armed = false, signaled = false, kicked = false, wakeup = false;
  int efd = -1, epfd = -1;
  int refs = 0;  // under g_ctl
  // When an empty read yields (set at open from FI_MRC_YIELD/_YIELD_US).
  EmptyYield yield;
};

struct EqEvent {
  uint32_t event;
  struct fid* fid;
  struct fi_info* info;
  std::vector<uint8_t> data;
};

struct Pep;
struct ConnReq;

struct Eq {
  struct fid_eq f;
  Fabric* fab;
  enum fi_wait_obj wait;
  std::deque<EqEvent> q;
  std::deque<struct fi_eq_err_entry> errq;
  std::vector<std::vector<uint8_t>> err_data;  // keeps err_data alive until the next readerr
  std::vector<Pep*> peps;
  std::vector<Ep*> eps;
  int efd = -1, epfd = -1;
  int refs = 0;
};

struct ConnReq {
  struct fid f;
  int sock = -1;
  CmMsg peer;
  struct sockaddr_in peer_addr;
};

struct Pep {
  struct fid_pep f;
  Fabric* fab;
  Eq* eq = nullptr;
  struct fi_info* info;
  int lfd = -1;
  struct sockaddr_in addr;
};

// One operation on the send side (pooled; index is its id in wr_id).
enum class OpKind : uint8_t { kMsg, kWrite, kRead, kAd };

struct TxOp {
  OpKind kind;
  bool completion;  // write a CQ entry when done
  bool inject;      // data copied into `copy`
  bool has_data;    // remote CQ data
  bool failed;      // an error entry was written
  bool reported;    // its completion was written before its WRITEs completed
  void* ctx;
  uint64_t flags;  // completion flags
  uint64_t data;
  struct iovec iov[4];
  size_t iov_count;
  uint64_t total;      // bytes
  uint64_t sent;       // bytes staged so far
  uint32_t segs_left;  // WRs posted whose completion is still due
  bool all_posted;
  // kMsg: its number among the endpoint's messages (kUnnumbered until it
  // starts), which names the peer's receive it matches (RecvAd::seq)
  uint64_t msg_seq;
  // RMA
  uint64_t raddr;
  uint64_t rkey;
  void* desc;  // RMA: Mr* (or the inject copy's mrc_mr*); kMsg: the consumer's Mr* or null
  RecvAd ad;   // kAd: the advert to send
  std::vector<uint8_t> copy;
};

constexpr uint64_t kUnnumbered = ~uint64_t(0);

enum WrKind : uint64_t {
  kWrSeg = 1,
  kWrCredit = 2,
  kWrRma = 3,
  kWrReadResp = 4,
  kWrNote = 5,
  kWrDirect = 6
};

inline uint64_t wr_id(WrKind k, uint32_t op) { return uint64_t(k) << 56 | op; }

enum class EpState { kIdle, kConnecting, kAccepting, kConnected, kShutdown };

struct PostedRecv {
  void* ctx;
  bool started;  // a segment was delivered into it
  struct iovec iov[4];
  size_t iov_count;
  size_t cap;
  size_t off;
  uint64_t flags;
  bool trunc;
  uint64_t total;
  bool has_data;
  uint64_t data;
  uint64_t seq;          // its number among the endpoint's receives
  struct mrc_mr* ad_mr;  // registered for the peer's direct message, or null
};

// A message segment waiting in the ring for a receive buffer, with its
// header as validated on arrival (the ring is peer-writable: never re-read).
struct PendingSeg {
  uint32_t slot;
  SlotHdr hdr;
};

struct Ep {
  struct fid_ep f;
  std::mutex mu;  // the data path below (and state, txcq, rxcq)
  Domain* dom;
  struct fi_info* info;
  Eq* eq = nullptr;
  Cq *txcq = nullptr, *rxcq = nullptr;
  bool tx_selective = false, rx_selective = false;
  uint64_t tx_op_flags = 0;
  EpState state = EpState::kIdle;
  int sock = -1;
  ConnReq* creq = nullptr;  // passive side: the request being accepted
  bool enabled = false;
  bool qp_error = false;
  bool shutdown_reported = false;
  // libmrc objects
  struct mrc_cq* mcq = nullptr;
  struct mrc_qp* qp = nullptr;
  uint32_t qpn = 0, psn = 0;
  uint32_t slots = 0, slot_size = 0;
  uint8_t *ring = nullptr, *bounce = nullptr;
  struct mrc_mr *ring_mr = nullptr, *bounce_mr = nullptr;
  uint32_t recv_wrs = 0, send_wrs = 0;
  uint32_t sq_used = 0;
  uint32_t recv_owed = 0;  // receives consumed, to repost in a batch
  // peer
  CmMsg peer = {};
  struct sockaddr_in peer_addr = {};
  // protocol state
  RxCheck* rxc = nullptr;  // the receive ring and the checks of every arrival
  TxRing* txr = nullptr;
  uint64_t faults_logged = 0;      // refused arrivals already reported in the log
  std::deque<PendingSeg> pending;  // occupied message slots in arrival order
  std::deque<PostedRecv> recvs;    // fi_recv buffers, in posting order
  std::deque<uint32_t> txq;        // ops waiting for credits / SQ room
  std::vector<TxOp> ops;           // pool
  std::vector<uint32_t> free_ops;
  std::deque<uint32_t> inflight_segs;  // op of each posted slot WRITE (bounce order)
  std::vector<int64_t> reads;          // read id -> op (-1 free)
  // direct messages (libfabric.md "Direct messages")
  uint64_t recv_seq = 0;  // receives posted so far
  uint64_t ad_next = 0;   // the next receive (number) to consider for an advert
  uint64_t tx_msgs = 0;   // messages numbered so far
  AdQueue ads;            // the peer's adverts
  uint64_t direct_tx = 0, direct_rx = 0, ads_sent = 0, ad_reg_failed = 0;
};

// ---------------------------------------------------------------------------
// Completion queues

// Under cq->mu: makes the wait fd readable and disarms the CQ. Once: a count
// not yet drained (signaled) is not written again.
void cq_signal_locked(Cq* cq) {
  cq->armed = false;
  if (!cq->signaled && cq->efd >= 0) signal_fd(cq->efd);
  cq->signaled = true;
}

// Under cq->mu: signals the wait fd if a waiter armed the CQ. Otherwise
// nothing: no syscall per completion.
void cq_wake_locked(Cq* cq) {
  if (cq->armed) cq_signal_locked(cq);
}

void cq_push(Cq* cq, const Completion& c) {
  std::lock_guard<std::mutex> l(cq->mu);
  cq->q.push_back(c);
  cq_wake_locked(cq);
}

void cq_push_err(Cq* cq, void* ctx, uint64_t flags, size_t len, int err, int prov_errno,
                 size_t olen = 0) {
  struct fi_cq_err_entry e = {};
  e.op_context = ctx;
  e.flags = flags;
  e.len = len;
  e.err = err;
  e.prov_errno = prov_errno;
  e.olen = olen;
  FI_INFO(&g_prov, FI_LOG_CQ, "error completion: ctx %p flags %#llx err %d (%s) prov %d\n", ctx,
          (unsigned long long)flags, err, fi_strerror(err), prov_errno);
  std::lock_guard<std::mutex> l(cq->mu);
  cq->errq.push_back(e);
  cq_wake_locked(cq);
}

int wc_to_fi(enum mrc_wc_status s) {
  switch (s) {
    case MRC_WC_SUCCESS:
      return 0;
    case MRC_WC_LOC_LEN_ERR:
      return FI_EMSGSIZE;
    case MRC_WC_LOC_PROT_ERR:
    case MRC_WC_LOC_ACCESS_ERR:
    case MRC_WC_REM_ACCESS_ERR:
      return FI_EACCES;
    case MRC_WC_WR_FLUSH_ERR:
      return FI_ECANCELED;
    case MRC_WC_RETRY_EXC_ERR:
      return FI_ETIMEDOUT;
    case MRC_WC_REM_OP_ERR:
    case MRC_WC_REM_INV_REQ_ERR:
      return FI_EREMOTEIO;
    default:
      return FI_EIO;
  }
}

// ---------------------------------------------------------------------------
// Endpoint data path (every function here runs with ep->mu held)

// An op of `kind` from the pool with every field at its start (zero, no
// message number); the inject copy keeps its capacity.
uint32_t op_alloc(Ep* ep, OpKind kind) {
  uint32_t i;
  if (ep->free_ops.empty()) {
    ep->ops.emplace_back();
    i = uint32_t(ep->ops.size() - 1);
  } else {
    i = ep->free_ops.back();
    ep->free_ops.pop_back();
  }
  TxOp& op = ep->ops[i];
  std::vector<uint8_t> copy = std::move(op.copy);
  op = TxOp{};
  op.copy = std::move(copy);
  op.kind = kind;
  op.msg_seq = kUnnumbered;
  return i;
}

void op_free(Ep* ep, uint32_t i) {
  ep->ops[i].copy.clear();  // keeps its capacity: no allocation for the next inject
  ep->free_ops.push_back(i);
}

void op_complete(Ep* ep, uint32_t i) {
  TxOp& op = ep->ops[i];
  if (!op.failed && !op.reported && op.completion && ep->txcq)
    cq_push(ep->txcq, Completion{op.ctx, op.flags, size_t(op.kind == OpKind::kRead ? op.total : 0),
                                 nullptr, 0});
  op_free(ep, i);
}

void op_fail(Ep* ep, uint32_t i, int err, int prov) {
  TxOp& op = ep->ops[i];
  if (!op.failed && !op.reported && ep->txcq) cq_push_err(ep->txcq, op.ctx, op.flags, 0, err, prov);
  op.failed = true;
}

// Posts a WRITE(_WITH_IMM). len 0 with no SGE is a zero-length write.
int post_write(Ep* ep, uint64_t id, void* laddr, uint32_t len, uint32_t lkey, uint64_t raddr,
               uint32_t rkey, bool with_imm, uint32_t imm) {
  struct mrc_sge sge = {uint64_t(uintptr_t(laddr)), len, lkey};
  struct mrc_send_wr wr = {};
  wr.wr_id = id;
  wr.sg_list = len ? &sge : nullptr;
  wr.num_sge = len ? 1 : 0;
  wr.opcode = with_imm ? MRC_WR_RDMA_WRITE_WITH_IMM : MRC_WR_RDMA_WRITE;
  wr.send_flags = MRC_SEND_SIGNALED;
  wr.imm_data = htonl(imm);
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rkey;
  struct mrc_send_wr* bad = nullptr;
  if (mrc_post_send(ep->qp, &wr, &bad)) return errno_to_fi(errno);
  ep->sq_used++;
  return 0;
}

// The credit field of the next immediate (every ring slot freed so far).
uint32_t credit_word(Ep* ep) { return ep->rxc->ring().credit_word(); }

// Copies `n` bytes at offset `off` of op's data into dst.
void gather(const TxOp& op, uint64_t off, uint8_t* dst, size_t n) {
  if (op.inject) {
    std::memcpy(dst, op.copy.data() + off, n);
    return;
  }
  for (size_t i = 0; i < op.iov_count && n; i++) {
    size_t l = op.iov[i].iov_len;
    if (off >= l) {
      off -= l;
      continue;
    }
    size_t c = std::min(n, size_t(l - off));
    std::memcpy(dst, static_cast<uint8_t*>(op.iov[i].iov_base) + off, c);
    dst += c;
    n -= c;
    off = 0;
  }
}

// Payload bytes per slot message: what fits both the peer's slots and the
// local bounce slots.
uint32_t slot_payload(const Ep* ep) {
  return std::min(ep->peer.slot_size, ep->slot_size) - uint32_t(sizeof(SlotHdr));
}

// Stages one slot message (segment of op, or a notice) and writes it into the
// peer's ring. Returns false when credits or SQ room are missing.
bool send_slot(Ep* ep, uint32_t opi, ImmType type, const void* payload, uint32_t plen,
               uint16_t flags, uint64_t total, uint64_t data) {
  if (!ep->txr->can_send() || ep->sq_used >= ep->send_wrs) return false;
  TxRing::Claim c = ep->txr->claim();
  uint8_t* b = ep->bounce + size_t(c.bounce) * ep->slot_size;
  SlotHdr h = {plen, flags, 0, total, data};
  std::memcpy(b, &h, sizeof h);
  if (payload)
    std::memcpy(b + sizeof h, payload, plen);
  else if (plen)
    gather(ep->ops[opi], ep->ops[opi].sent, b + sizeof h, plen);
  uint32_t imm = imm_encode(Imm{type, credit_word(ep), c.slot});
  int r = post_write(ep, wr_id(kWrSeg, opi), b, uint32_t(sizeof h + plen), ep->bounce_mr->lkey,
                     ep->peer.ring_addr + uint64_t(c.slot) * ep->peer.slot_size, ep->peer.ring_rkey,
                     true, imm);
  if (r) {
    MRC_FI_WARN("post_send: %s\n", mrc_last_error());
    ep->qp_error = true;
    return false;
  }
  ep->inflight_segs.push_back(opi);
  return true;
}

// Every segment of a message is staged in the bounce buffers and posted:
// the sender's buffer is no longer read, so its completion is written now
// (inject-complete), not at the last WRITE's completion. The peer may answer
// the message before the ACK of its last WRITE comes back (the ACK is late or
// takes another path); a completion written at that ACK would then follow the
// answer's receive completion in the CQ, and ofi_rxm's rendezvous takes the
// answer to a message whose send has not completed for a protocol error
// (rxm_rndv_handle_wr_done: "Failed to find rndv wait entry"), which it
// reports as an error entry without a context: Open MPI's mtl ofi then
// dereferences that NULL context (segfault at 0x50 in its progress).
void msg_staged(Ep* ep, TxOp& op) {
  if (op.failed || op.reported) return;
  if (op.completion && ep->txcq) cq_push(ep->txcq, Completion{op.ctx, op.flags, 0, nullptr, 0});
  op.reported = true;
}

// Writes message op straight into the peer's receive buffer when the
// peer advertised the receive it matches (libfabric.md "Direct messages"):
// one WRITE-with-immediate from the consumer's registered buffer, no ring
// slot, no credit, no copy. The send completes when the WRITE does (every
// byte acknowledged): the engine reads the buffer until then. 1: posted;
// 0: not eligible (the ring carries it); -1: no SQ room yet.
int try_direct(Ep* ep, uint32_t opi) {
  TxOp& op = ep->ops[opi];
  const uint64_t min = ep->dom->fab->cfg.direct_min;
  if (!min || op.total < min || op.total > UINT32_MAX || op.inject || op.has_data ||
      op.iov_count != 1 || !op.desc)
    return 0;
  const struct mrc_mr* m = static_cast<Mr*>(op.desc)->m;
  const uint64_t a = uintptr_t(op.iov[0].iov_base), base = uintptr_t(m->addr);
  if (a < base || op.total > m->length || a - base > m->length - op.total) return 0;
  const RecvAd* ad = ep->ads.match(op.msg_seq);
  if (!ad || ad->len < op.total) return 0;
  if (ep->sq_used >= ep->send_wrs) return -1;
  uint32_t imm = imm_encode(Imm{ImmType::kDirect, credit_word(ep), uint32_t(op.msg_seq & 0xffff)});
  if (post_write(ep, wr_id(kWrDirect, opi), op.iov[0].iov_base, uint32_t(op.total), m->lkey,
                 ad->addr, ad->rkey, true, imm)) {
    MRC_FI_WARN("post_send: %s\n", mrc_last_error());
    ep->qp_error = true;
    return -1;
  }
  op.sent = op.total;
  op.segs_left = 1;
  op.all_posted = true;
  ep->direct_tx++;
  return 1;
}

// Moves queued operations onto the wire while credits and SQ room last.
void push_tx(Ep* ep) {
  if (ep->state != EpState::kConnected || ep->qp_error) return;
  const uint32_t payload = slot_payload(ep);
  while (!ep->txq.empty()) {
    uint32_t opi = ep->txq.front();
    TxOp& op = ep->ops[opi];
    if (op.kind == OpKind::kMsg) {
      if (op.msg_seq == kUnnumbered) op.msg_seq = ep->tx_msgs++;
      if (op.sent == 0 && !op.all_posted) {
        int d = try_direct(ep, opi);
        if (d < 0) return;
        if (d > 0) {
          ep->txq.pop_front();
          continue;
        }
      }
      while (!op.all_posted) {
        uint64_t n = std::min<uint64_t>(payload, op.total - op.sent);
        uint16_t fl = 0;
        if (op.sent == 0) fl |= kSlotFirst;
        if (op.sent + n == op.total) fl |= kSlotLast;
        if (op.has_data) fl |= kSlotData;
        if (!send_slot(ep, opi, ImmType::kMsg, nullptr, uint32_t(n), fl, op.total, op.data)) return;
        op.sent += n;
        op.segs_left++;
        if (fl & kSlotLast) {
          op.all_posted = true;
          msg_staged(ep, op);
        }
      }
    } else if (op.kind == OpKind::kWrite) {
      // The data WRITE, then (writedata) a notice in the ring.
      if (op.sent == 0) {
        if (ep->sq_used >= ep->send_wrs) return;
        void* src = op.inject ? op.copy.data() : op.iov[0].iov_base;
        uint32_t lkey = 0;
        if (op.inject && op.total) {
          // fi_inject_write: the copy is registered for the time of the WRITE
          struct mrc_mr* tmp =
              mrc_reg_mr(g_dev.pd, op.copy.data(), op.copy.size(), MRC_ACCESS_LOCAL_WRITE);
          if (!tmp) {
            op_fail(ep, opi, FI_ENOMEM, 0);
            ep->txq.pop_front();
            op_free(ep, opi);
            continue;
          }
          lkey = tmp->lkey;
          op.desc = tmp;  // deregistered at completion
        } else if (op.total) {
          lkey = static_cast<Mr*>(op.desc)->m->lkey;
        }
        if (post_write(ep, wr_id(kWrRma, opi), src, uint32_t(op.total), lkey, op.raddr,
                       uint32_t(op.rkey), false, 0)) {
          ep->qp_error = true;
          return;
        }
        op.sent = op.total ? op.total : 1;
        op.segs_left++;
      }
      if (op.has_data) {
        if (!send_slot(ep, opi, ImmType::kWriteData, nullptr, 0, kSlotFirst | kSlotLast, 0,
                       op.data))
          return;
        op.segs_left++;
      }
      op.all_posted = true;
    } else if (op.kind == OpKind::kAd) {
      if (!send_slot(ep, opi, ImmType::kRecvAd, &op.ad, sizeof op.ad, kSlotFirst | kSlotLast, 0, 0))
        return;
      op.segs_left++;
      op.all_posted = true;
    } else {  // kRead: a request in the ring
      ReadReq rq = {op.raddr,
                    uint64_t(uintptr_t(op.iov[0].iov_base)),
                    op.total,
                    uint32_t(op.rkey),
                    op.desc ? static_cast<Mr*>(op.desc)->m->rkey : 0,
                    0,
                    0};
      uint32_t id = 0;
      while (id < ep->reads.size() && ep->reads[id] >= 0) id++;
      if (id == ep->reads.size()) return;  // every read id in use: wait
      rq.id = id;
      if (!send_slot(ep, opi, ImmType::kReadReq, &rq, sizeof rq, kSlotFirst | kSlotLast, 0, 0))
        return;
      ep->reads[id] = opi;
      ep->rxc->read_started(id, op.total);
      op.segs_left++;
      op.all_posted = true;
    }
    ep->txq.pop_front();
  }
}

// Owed credits that go out alone without waiting for a message: a quarter
// of the ring.
uint32_t credit_batch(const Ep* ep) { return std::max(1u, ep->slots / 4); }

// Sends the credits the peer is owed in a zero-length WRITE_WITH_IMM (when
// no message carries them): once `threshold` slots are owed, or with
// `idle` (the consumer found its CQ empty) when the peer may be short of
// credits (half of its ring used without word of any slot freed since).
void flush_credits(Ep* ep, uint32_t threshold, bool idle = false) {
  if (ep->state != EpState::kConnected || ep->qp_error || ep->sq_used >= ep->send_wrs) return;
  const RxRing& rr = ep->rxc->ring();
  uint32_t owed = rr.to_return();
  if (owed == 0) return;
  if (owed < threshold && !(idle && rr.unreported_use() * 2 >= rr.slots())) return;
  uint32_t imm = imm_encode(Imm{ImmType::kCredit, credit_word(ep), 0});
  if (post_write(ep, wr_id(kWrCredit, 0), nullptr, 0, 0, ep->peer.ring_addr, ep->peer.ring_rkey,
                 true, imm))
    ep->qp_error = true;
}

// Receives go back to the QP in batches (one post of a chain): each
// consumes a libmrc receive, and there are 2S + 128 posted, far more than
// can be outstanding, so a batch of 16 never lets the QP run dry.
constexpr uint32_t kRecvBatch = 16;

int repost_recvs(Ep* ep, uint32_t n) {
  struct mrc_recv_wr rw[kRecvBatch] = {};
  while (n) {
    uint32_t k = std::min(n, kRecvBatch);
    for (uint32_t i = 0; i < k; i++) rw[i].next = i + 1 < k ? &rw[i + 1] : nullptr;
    struct mrc_recv_wr* bad = nullptr;
    if (mrc_post_recv(ep->qp, rw, &bad)) return errno_to_fi(errno);
    n -= k;
  }
  return 0;
}

// Copies n bytes from src into the posted receive at its offset.
void scatter(PostedRecv& r, const uint8_t* src, size_t n) {
  size_t off = r.off;
  for (size_t i = 0; i < r.iov_count && n; i++) {
    size_t l = r.iov[i].iov_len;
    if (off >= l) {
      off -= l;
      continue;
    }
    size_t c = std::min(n, l - off);
    std::memcpy(static_cast<uint8_t*>(r.iov[i].iov_base) + off, src, c);
    src += c;
    n -= c;
    r.off += c;
    off = 0;
  }
}

// The oldest posted receive is done: its advert's registration (if any)
// ends, so the peer's key for it is dead.
void recv_retire(Ep* ep) {
  PostedRecv& r = ep->recvs.front();
  if (r.ad_mr) mrc_dereg_mr(r.ad_mr);
  ep->recvs.pop_front();
}

// Delivers waiting ring messages into posted receives, in order. The
// headers were validated on arrival (RxCheck): lengths fit the slot and
// segments continue their message, except after a refused segment cut a
// message short; its receive then completes with FI_EIO.
void drain_rx(Ep* ep) {
  while (!ep->pending.empty()) {
    const PendingSeg& ps = ep->pending.front();
    const SlotHdr& h = ps.hdr;
    const uint8_t* slot = ep->ring + size_t(ps.slot) * ep->slot_size;
    if (ep->recvs.empty()) return;
    PostedRecv& r = ep->recvs.front();
    uint64_t fl = FI_RECV | FI_MSG | (r.has_data ? FI_REMOTE_CQ_DATA : 0);
    if ((h.flags & kSlotFirst) && r.started) {
      // the previous message was cut (a refused segment): fail its receive
      if (ep->rxcq) cq_push_err(ep->rxcq, r.ctx, fl, r.off, FI_EIO, 0);
      recv_retire(ep);
      continue;
    }
    if (h.flags & kSlotFirst) {
      r.total = h.total;
      r.has_data = h.flags & kSlotData;
      r.data = h.data;
      fl = FI_RECV | FI_MSG | (r.has_data ? FI_REMOTE_CQ_DATA : 0);
    }
    r.started = true;
    size_t room = r.cap - r.off;
    size_t n = std::min<size_t>(h.seg_len, room);
    if (n < h.seg_len) r.trunc = true;
    scatter(r, slot + sizeof h, n);
    ep->rxc->ring().release(ps.slot);
    ep->pending.pop_front();
    if (h.flags & kSlotLast) {
      if (r.trunc) {
        if (ep->rxcq)
          cq_push_err(ep->rxcq, r.ctx, fl, r.off, FI_ETRUNC, 0,
                      r.total > r.off ? r.total - r.off : 0);
      } else if (ep->rxcq && (!ep->rx_selective || (r.flags & FI_COMPLETION))) {
        cq_push(ep->rxcq, Completion{r.ctx, fl, r.off, nullptr, r.data});
      }
      recv_retire(ep);
    }
  }
}

// Advertises a posted receive to the peer (libfabric.md "Direct messages"):
// one of at least FI_MRC_DIRECT_MIN bytes in one buffer, registered for
// this receive alone (recv_retire ends it), so the peer can write into
// nothing else and nothing after. A registration that fails leaves the
// receive to the ring.
void advertise(Ep* ep, PostedRecv& r) {
  const uint64_t min = ep->dom->fab->cfg.direct_min;
  if (!min || r.cap < min || r.iov_count != 1 || r.cap > UINT32_MAX) return;
  r.ad_mr = mrc_reg_mr(g_dev.pd, r.iov[0].iov_base, r.cap,
                       MRC_ACCESS_LOCAL_WRITE | MRC_ACCESS_REMOTE_WRITE);
  if (!r.ad_mr) {
    if (ep->ad_reg_failed++ == 0)
      FI_INFO(&g_prov, FI_LOG_EP_DATA, "QP %u: receive not advertised (ring instead): %s\n",
              ep->qpn, mrc_last_error());
    return;
  }
  uint32_t opi = op_alloc(ep, OpKind::kAd);
  TxOp& op = ep->ops[opi];
  op.ad = RecvAd{uint64_t(uintptr_t(r.iov[0].iov_base)), r.cap, r.seq, r.ad_mr->rkey, 0};
  ep->txq.push_back(opi);
  ep->ads_sent++;
}

// Advertises, once connected, the posted receives not yet considered, in
// order, while they lie within kAdWindow of the oldest one still posted (the
// receives complete in order, so the oldest's number is the count of those
// completed): the rest wait until earlier ones complete. O(1) per call when
// there is nothing to do (progress_ep calls it every time).
void advertise_recvs(Ep* ep) {
  if (ep->state != EpState::kConnected || ep->qp_error || !ep->txr || ep->recvs.empty()) return;
  const uint64_t first = ep->recvs.front().seq;
  ep->ad_next = std::max(ep->ad_next, first);
  while (ep->ad_next < ep->recv_seq && ep->ad_next < first + kAdWindow) {
    advertise(ep, ep->recvs[size_t(ep->ad_next - first)]);  // each number once: ad_next only grows
    ep->ad_next++;
  }
}

// A READ_REQ from the peer: write the asked range back with READ_RESP. The
// range must lie in one MR registered for remote read.
void serve_read(Ep* ep, const ReadReq& rq) {
  struct mrc_mr* m = nullptr;
  {
    std::lock_guard<std::mutex> l(g_dev.mrs_mu);
    auto it = g_dev.mrs.find(rq.rkey);
    if (it != g_dev.mrs.end() && (!it->second.access || (it->second.access & FI_REMOTE_READ)))
      m = it->second.m;
  }
  uint64_t base = m ? uint64_t(uintptr_t(m->addr)) : 0;
  bool ok = m && rq.raddr >= base && rq.len <= m->length && rq.raddr - base <= m->length - rq.len &&
            rq.len <= UINT32_MAX;
  uint32_t imm =
      imm_encode(Imm{ok ? ImmType::kReadResp : ImmType::kReadErr, credit_word(ep), rq.id & 0xffff});
  int r = ok ? post_write(ep, wr_id(kWrReadResp, 0), reinterpret_cast<void*>(uintptr_t(rq.raddr)),
                          uint32_t(rq.len), m->lkey, rq.laddr, rq.lrkey, true, imm)
             : post_write(ep, wr_id(kWrReadResp, 0), nullptr, 0, 0, ep->peer.ring_addr,
                          ep->peer.ring_rkey, true, imm);
  if (r) ep->qp_error = true;
}

// Logs refused arrivals: the first of each connection, then at powers of two.
void log_faults(Ep* ep, uint32_t imm) {
  uint64_t t = ep->rxc->faults().total();
  if (t == ep->faults_logged || (t & (t - 1))) return;
  ep->faults_logged = t;
  const RxFaults& f = ep->rxc->faults();
  MRC_FI_WARN(
      "QP %u: %llu arrival(s) refused (last imm %#x): type %llu slot %llu credits %llu length %llu "
      "sequence %llu read-id %llu advert %llu direct %llu\n",
      ep->qpn, (unsigned long long)t, imm, (unsigned long long)f[RxFault::kType],
      (unsigned long long)f[RxFault::kSlot], (unsigned long long)f[RxFault::kCredits],
      (unsigned long long)f[RxFault::kLength], (unsigned long long)f[RxFault::kSequence],
      (unsigned long long)f[RxFault::kReadId], (unsigned long long)f[RxFault::kAdvert],
      (unsigned long long)f[RxFault::kDirect]);
}

// A direct message of `len` bytes for receive number `seq16` (mod 2^16).
// MRC placed it before delivering the immediate, and delivers immediates in
// order, so every earlier ring message has arrived: they take their
// receives first. It must then be for the oldest receive, advertised,
// untouched and big enough; otherwise it is refused and counted (the bytes
// went only where the peer's own advert allowed) and the receive stays.
void deliver_direct(Ep* ep, uint32_t seq16, uint32_t len, uint32_t imm) {
  drain_rx(ep);
  PostedRecv* r = ep->recvs.empty() ? nullptr : &ep->recvs.front();
  OldestRecv o;
  if (r) o = OldestRecv{true, r->ad_mr != nullptr, r->started, r->seq, r->cap};
  if (!direct_accepted(o, !ep->pending.empty(), seq16, len)) {
    ep->rxc->refused(RxFault::kDirect);
    log_faults(ep, imm);
    return;
  }
  r->off = len;
  if (ep->rxcq && (!ep->rx_selective || (r->flags & FI_COMPLETION)))
    cq_push(ep->rxcq, Completion{r->ctx, FI_RECV | FI_MSG, len, nullptr, 0});
  ep->direct_rx++;
  recv_retire(ep);
}

void handle_recv_wc(Ep* ep, const struct mrc_wc& wc) {
  uint32_t v = ntohl(wc.imm_data);
  FI_TRACE(&g_prov, FI_LOG_EP_DATA, "recv imm %#x len %u\n", v, wc.byte_len);
  ep->recv_owed++;
  Arrival a = ep->rxc->arrival(v, wc.byte_len, ep->ring, ep->txr);
  if (a.fault) log_faults(ep, v);
  switch (a.action) {
    case RxAction::kNone:
      break;
    case RxAction::kSegment:
      ep->pending.push_back(PendingSeg{a.slot, a.hdr});
      break;
    case RxAction::kWriteData:
      if (ep->rxcq)
        cq_push(ep->rxcq, Completion{nullptr, FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA, 0,
                                     nullptr, a.hdr.data});
      ep->rxc->ring().release(a.slot);
      break;
    case RxAction::kReadReq:
      serve_read(ep, a.req);
      ep->rxc->ring().release(a.slot);
      break;
    case RxAction::kRecvAd:
      if (!ep->ads.push(a.ad, ep->tx_msgs)) {
        ep->rxc->refused(RxFault::kAdvert);
        log_faults(ep, v);
      }
      ep->rxc->ring().release(a.slot);
      break;
    case RxAction::kDirect:
      deliver_direct(ep, a.slot, a.byte_len, v);
      break;
    case RxAction::kReadResp:
    case RxAction::kReadErr: {
      uint32_t opi = uint32_t(ep->reads[a.slot]);
      ep->reads[a.slot] = -1;
      if (a.action == RxAction::kReadErr) op_fail(ep, opi, FI_EACCES, 0);
      TxOp& op = ep->ops[opi];
      if (--op.segs_left == 0) op_complete(ep, opi);
      break;
    }
  }
}

void handle_send_wc(Ep* ep, const struct mrc_wc& wc) {
  FI_TRACE(&g_prov, FI_LOG_EP_DATA, "send wc %#llx status %d\n", (unsigned long long)wc.wr_id,
           wc.status);
  if (ep->sq_used) ep->sq_used--;
  WrKind k = WrKind(wc.wr_id >> 56);
  uint32_t opi = uint32_t(wc.wr_id & 0xffffffff);
  int err = wc.status == MRC_WC_SUCCESS ? 0 : wc_to_fi(wc.status);
  if (err) {
    if (!ep->qp_error)
      MRC_FI_WARN("QP %u: send WR %#llx failed: status %d (%s)\n", ep->qpn,
                  (unsigned long long)wc.wr_id, int(wc.status), fi_strerror(err));
    ep->qp_error = true;
  }
  if (k == kWrSeg) {
    ep->txr->bounce_done();
    if (!ep->inflight_segs.empty()) ep->inflight_segs.pop_front();
  }
  if (k == kWrSeg || k == kWrRma || k == kWrDirect) {
    if (opi >= ep->ops.size()) return;
    TxOp& op = ep->ops[opi];
    if (err) op_fail(ep, opi, err, int(wc.status));
    if (k == kWrRma && op.inject && op.desc) {
      mrc_dereg_mr(static_cast<struct mrc_mr*>(op.desc));
      op.desc = nullptr;
    }
    if (op.kind == OpKind::kRead) {
      // the request is out; the read completes on READ_RESP (or here on error)
      if (err) {
        for (uint32_t id = 0; id < ep->reads.size(); id++)
          if (ep->reads[id] == int64_t(opi)) {
            ep->reads[id] = -1;
            ep->rxc->read_ended(id);
          }
        op_free(ep, opi);
      }
      return;
    }
    if (--op.segs_left == 0 && op.all_posted) op_complete(ep, opi);
  }
}

// Polls the endpoint's libmrc CQ and runs the ring protocol. `idle`: the
// consumer found its CQ empty (credits the peer may wait for go out).
void progress_ep(Ep* ep, bool idle = false) {
  if (!ep->mcq) return;
  struct mrc_wc wc[32];
  for (int round = 0; round < 8; round++) {
    int n = mrc_poll_cq(ep->mcq, 32, wc);
    if (n <= 0) break;
    for (int i = 0; i < n; i++) {
      if (wc[i].opcode == MRC_WC_RECV_RDMA_WITH_IMM) {
        if (wc[i].status == MRC_WC_SUCCESS) {
          handle_recv_wc(ep, wc[i]);
        } else {
          if (!ep->qp_error)
            MRC_FI_WARN("QP %u: receive failed: status %d\n", ep->qpn, int(wc[i].status));
          ep->recv_owed++;
          ep->qp_error = true;
        }
      } else {
        handle_send_wc(ep, wc[i]);
      }
    }
    if (n < 32) break;
  }
  if (ep->recv_owed >= kRecvBatch && !ep->qp_error) {
    if (repost_recvs(ep, ep->recv_owed))
      ep->qp_error = true;
    else
      ep->recv_owed = 0;
  }
  drain_rx(ep);
  advertise_recvs(ep);  // receives the window now reaches
  push_tx(ep);
  flush_credits(ep, credit_batch(ep), idle);
}

// A post of the consumer: its WRs go to libmrc first, then the protocol
// runs (with application progress an engine pass, which sends them at once,
// together with the ACKs the last pass deferred for them). Running the pass
// first sent those ACKs alone and left the new WRs for the next pass: two
// system calls, the first on the answer's critical path.
void post_and_progress(Ep* ep) {
  push_tx(ep);
  progress_ep(ep);
}

// Drains the completion channel (its fd stays readable while events are
// pending) and wakes the CQs of every endpoint that had one: the channel is
// shared, so the thread that drains it may not be the one that sleeps on
// that endpoint's CQ (an armed CQ gets its fd written, one being armed
// fails its arming). Only after a waiter armed it (g_armed); under g_ctl,
// which keeps the endpoints named by the events alive.
void drain_channel() {
  if (!g_armed.load(std::memory_order_acquire)) return;
  Lock l(g_ctl);
  if (!g_dev.chan) return;
  g_armed.store(false, std::memory_order_release);
  struct mrc_cq* mcq;
  void* cctx;
  while (mrc_get_cq_event(g_dev.chan, &mcq, &cctx) == 0) {
    mrc_ack_cq_events(mcq, 1);
    Ep* ep = static_cast<Ep*>(cctx);
    EpLock el(ep->mu);
    for (Cq* cq : {ep->txcq, ep->rxcq}) {
      if (!cq) continue;
      std::lock_guard<std::mutex> cl(cq->mu);
      if (cq->armed)
        cq_wake_locked(cq);
      else
        cq->kicked = true;
    }
  }
}

// Runs the protocol of every endpoint of the CQ (nothing of the CQ's held);
// `drain`: first the completion channel, if a waiter armed it.
void progress_cq(Cq* cq, bool idle = false, bool drain = true) {
  if (drain) drain_channel();
  std::shared_lock<std::shared_mutex> l(cq->eps_mu);
  for (Ep* ep : cq->eps) {
    EpLock el(ep->mu);
    progress_ep(ep, idle);
  }
}

// ---------------------------------------------------------------------------
// Endpoint setup: QP, ring, bounce buffers

void ep_free_qp(Ep* ep) {
  if (ep->qp)
    FI_INFO(&g_prov, FI_LOG_EP_DATA,
            "QP %u: direct messages sent %llu, received %llu; receives advertised %llu "
            "(registration failed %llu)\n",
            ep->qpn, (unsigned long long)ep->direct_tx, (unsigned long long)ep->direct_rx,
            (unsigned long long)ep->ads_sent, (unsigned long long)ep->ad_reg_failed);
  if (ep->qp) mrc_destroy_qp(ep->qp);
  // the adverts' registrations end with the QP that could use them
  for (PostedRecv& r : ep->recvs)
    if (r.ad_mr) {
      mrc_dereg_mr(r.ad_mr);
      r.ad_mr = nullptr;
    }
  if (ep->mcq) mrc_destroy_cq(ep->mcq);
  if (ep->ring_mr) mrc_dereg_mr(ep->ring_mr);
  if (ep->bounce_mr) mrc_dereg_mr(ep->bounce_mr);
  std::free(ep->ring);
  std::free(ep->bounce);
  delete ep->rxc;
  delete ep->txr;
  ep->qp = nullptr;
  ep->mcq = nullptr;
  ep->ring_mr = ep->bounce_mr = nullptr;
  ep->ring = ep->bounce = nullptr;
  ep->rxc = nullptr;
  ep->txr = nullptr;
}

constexpr uint32_t kMaxReads = 64;

int ep_create_qp(Ep* ep) {
  const Config& c = ep->dom->fab->cfg;
  ep->slots = c.slots;
  ep->slot_size = c.slot_size;
  size_t len = size_t(ep->slots) * ep->slot_size;
  ep->ring = static_cast<uint8_t*>(std::aligned_alloc(4096, len));
  ep->bounce = static_cast<uint8_t*>(std::aligned_alloc(4096, len));
  if (!ep->ring || !ep->bounce) return -FI_ENOMEM;
  std::memset(ep->ring, 0, len);
  ep->ring_mr =
      mrc_reg_mr(g_dev.pd, ep->ring, len, MRC_ACCESS_LOCAL_WRITE | MRC_ACCESS_REMOTE_WRITE);
  ep->bounce_mr = mrc_reg_mr(g_dev.pd, ep->bounce, len, MRC_ACCESS_LOCAL_WRITE);
  // Receives: every ring slot, the credit notices and read answers that can
  // be in flight, the direct messages the receive adverts allow (kAdWindow),
  // with room to spare.
  ep->recv_wrs = 2 * ep->slots + kMaxReads + 64 + kAdWindow;
  ep->send_wrs = 2 * ep->slots + kMaxReads + 64;
  ep->mcq = mrc_create_cq(g_dev.ctx, int(ep->recv_wrs + ep->send_wrs), ep, g_dev.chan, 0);
  if (!ep->ring_mr || !ep->bounce_mr || !ep->mcq) return errno_to_fi(errno);
  struct mrc_qp_init_attr init = {};
  init.qp_context = ep;
  init.send_cq = ep->mcq;
  init.recv_cq = ep->mcq;
  init.pd = g_dev.pd;
  init.cap.max_send_wr = ep->send_wrs;
  init.cap.max_recv_wr = ep->recv_wrs;
  init.cap.max_send_sge = 1;
  ep->qp = mrc_create_qp(g_dev.ctx, &init);
  if (!ep->qp) return errno_to_fi(errno);
  struct mrc_ibv_qp_attr va = {};
  va.qp_state = MRC_QPS_INIT;
  va.qp_access_flags = MRC_ACCESS_LOCAL_WRITE | MRC_ACCESS_REMOTE_WRITE;
  struct mrc_qp_attr ma = {};
  if (mrc_modify_qp(ep->qp, &va, MRC_IBV_QP_STATE | MRC_IBV_QP_PKEY_INDEX | MRC_IBV_QP_ACCESS_FLAGS,
                    &ma, MRC_QP_HINT | MRC_QP_EV_PROFILE_ID | MRC_QP_CC_PROFILE_ID))
    return errno_to_fi(errno);
  if (repost_recvs(ep, ep->recv_wrs)) return errno_to_fi(errno);
  mrc_get_qpn(ep->qp, &ep->qpn);
  ep->psn = mrc_random_psn();
  ep->rxc = new RxCheck(ep->slots, ep->slot_size, size_t(1) << 30, kMaxReads);
  ep->reads.assign(kMaxReads, -1);
  if (mrc_req_notify_cq(ep->mcq, 0)) return errno_to_fi(errno);
  return 0;
}

void fill_cm(Ep* ep, CmMsg* m, CmType type, const void* param, size_t plen) {
  std::memset(m, 0, sizeof *m);
  m->magic = kCmMagic;
  m->version = kCmVersion;
  m->type = type;
  m->qpn = ep->qpn;
  m->psn = ep->psn;
  m->ring_addr = uint64_t(uintptr_t(ep->ring));
  m->ring_rkey = ep->ring_mr ? ep->ring_mr->rkey : 0;
  m->slots = ep->slots;
  m->slot_size = ep->slot_size;
  m->mtu = g_dev.mtu;
  m->max_wimm_dest = uint16_t(std::min<uint32_t>(1024, ep->recv_wrs));
  m->mpr_dest = 8;
  m->num_gids = uint8_t(g_dev.num_ports);
  std::memcpy(m->gid, g_dev.gid, sizeof m->gid);
  m->cm_len = uint32_t(plen);
  if (plen) std::memcpy(m->cm, param, plen);
}

bool cm_valid(const CmMsg& m) {
  return m.magic == kCmMagic && m.version == kCmVersion && m.cm_len <= kCmDataMax &&
         m.num_gids <= MRC_MAX_PORTS && m.slots >= 4 && m.slots <= kMaxSlots &&
         m.slot_size >= 256 && m.slot_size <= (1u << 24);
}

// INIT -> RTR -> RTS toward the peer in ep->peer.
int ep_connect_qp(Ep* ep) {
  const CmMsg& p = ep->peer;
  struct mrc_ibv_qp_attr va = {};
  va.qp_state = MRC_QPS_RTR;
  va.path_mtu = std::min(p.mtu, g_dev.mtu);
  va.dest_qp_num = p.qpn;
  va.rq_psn = p.psn;
  std::memcpy(va.ah_attr.dgid, p.gid, sizeof p.gid);
  va.ah_attr.peer_max_wimm_dest = p.max_wimm_dest;
  struct mrc_qp_attr ma = {};
  ma.wimm.max_wimm_dest = uint16_t(std::min<uint32_t>(1024, ep->recv_wrs));
  ma.mpr.mpr_dest = 8;
  if (mrc_modify_qp(ep->qp, &va,
                    MRC_IBV_QP_STATE | MRC_IBV_QP_AV | MRC_IBV_QP_PATH_MTU | MRC_IBV_QP_DEST_QPN |
                        MRC_IBV_QP_RQ_PSN,
                    &ma, MRC_QP_MAX_WIMM_DEST | MRC_QP_MPR_DEST)) {
    MRC_FI_WARN("modify to RTR: %s\n", mrc_last_error());
    return errno_to_fi(errno);
  }
  va = {};
  va.qp_state = MRC_QPS_RTS;
  va.sq_psn = ep->psn;
  ma = {};
  ma.wimm.max_wimm = uint16_t(std::min<uint32_t>(1024, ep->send_wrs));
  ma.mpr.mpr = std::min<uint8_t>(p.mpr_dest, 8);
  ma.timeout = 14;
  ma.retry.linear_cnt = 7;
  ma.retry.exp_cnt = 7;
  if (mrc_modify_qp(ep->qp, &va, MRC_IBV_QP_STATE | MRC_IBV_QP_SQ_PSN, &ma,
                    MRC_QP_MAX_WIMM | MRC_QP_MPR | MRC_QP_TIMEOUT | MRC_QP_RETRY_CNT)) {
    MRC_FI_WARN("modify to RTS: %s\n", mrc_last_error());
    return errno_to_fi(errno);
  }
  // Slots are named by the peer's ring; bounce slots are ours.
  EpLock l(ep->mu);
  ep->txr = new TxRing(p.slots, ep->slots);
  return 0;
}

// ---------------------------------------------------------------------------
// Event queues and connection management (under g_ctl)

// The connection state changes under g_ctl and the endpoint's lock (the
// data path reads it under the latter).
void set_state(Ep* ep, EpState st) {
  EpLock l(ep->mu);
  ep->state = st;
}

void eq_watch(Eq* eq, int fd) {
  if (!eq || fd < 0) return;
  struct epoll_event ev = {};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  epoll_ctl(eq->epfd, EPOLL_CTL_ADD, fd, &ev);
}

void eq_unwatch(Eq* eq, int fd) {
  if (eq && fd >= 0) epoll_ctl(eq->epfd, EPOLL_CTL_DEL, fd, nullptr);
}

void eq_push(Eq* eq, uint32_t event, struct fid* fid, struct fi_info* info, const void* data,
             size_t len) {
  EqEvent e{event, fid, info, {}};
  if (len)
    e.data.assign(static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(data) + len);
  bool was_empty = eq->q.empty() && eq->errq.empty();
  eq->q.push_back(std::move(e));
  if (was_empty) signal_fd(eq->efd);
}

void eq_push_err(Eq* eq, struct fid* fid, void* ctx, int err, const void* data, size_t len) {
  struct fi_eq_err_entry e = {};
  e.fid = fid;
  e.context = ctx;
  e.err = err;
  eq->err_data.emplace_back();
  if (len) {
    eq->err_data.back().assign(static_cast<const uint8_t*>(data),
                               static_cast<const uint8_t*>(data) + len);
    e.err_data = eq->err_data.back().data();
    e.err_data_size = len;
  }
  bool was_empty = eq->q.empty() && eq->errq.empty();
  eq->errq.push_back(e);
  if (was_empty) signal_fd(eq->efd);
}

int close_connreq(struct fid* f) {
  auto* c = of<ConnReq>(f);
  if (c->sock >= 0) close(c->sock);
  delete c;
  return 0;
}

struct fi_ops g_connreq_ops = {
    sizeof(struct fi_ops), close_connreq, nullptr, nullptr, nullptr, nullptr, nullptr};

// A connection arrived at a listening endpoint: read its request.
void pep_accept(Pep* pep) {
  struct sockaddr_in pa;
  socklen_t plen = sizeof pa;
  int s = accept(pep->lfd, reinterpret_cast<struct sockaddr*>(&pa), &plen);
  if (s < 0) return;
  sock_timeouts(s);
  CmMsg m;
  if (!sock_recv_all(s, &m, sizeof m) || !cm_valid(m) || m.type != kConnReq) {
    close(s);
    return;
  }
  auto* c = new ConnReq;
  c->f.fclass = FI_CLASS_CONNREQ;
  c->f.context = nullptr;
  c->f.ops = &g_connreq_ops;
  c->sock = s;
  c->peer = m;
  c->peer_addr = pa;
  struct fi_info* info = fi_dupinfo(pep->info);
  if (!info) {
    close_connreq(&c->f);
    return;
  }
  std::free(info->dest_addr);
  info->dest_addr = std::malloc(sizeof pa);
  std::memcpy(info->dest_addr, &pa, sizeof pa);
  info->dest_addrlen = sizeof pa;
  info->handle = &c->f;
  eq_push(pep->eq, FI_CONNREQ, &pep->f.fid, info, m.cm, m.cm_len);
}

void ep_report_shutdown(Ep* ep) {
  if (ep->shutdown_reported || !ep->eq) return;
  ep->shutdown_reported = true;
  eq_push(ep->eq, FI_SHUTDOWN, &ep->f.fid, nullptr, nullptr, 0);
}

// The CM socket of an endpoint is readable.
void ep_cm_event(Ep* ep) {
  CmMsg m;
  if (!sock_recv_all(ep->sock, &m, sizeof m) || !cm_valid(m)) {
    eq_unwatch(ep->eq, ep->sock);
    if (ep->state == EpState::kConnecting || ep->state == EpState::kAccepting) {
      set_state(ep, EpState::kShutdown);
      eq_push_err(ep->eq, &ep->f.fid, ep->f.fid.context, FI_ECONNRESET, nullptr, 0);
    } else if (ep->state == EpState::kConnected) {
      set_state(ep, EpState::kShutdown);
      ep_report_shutdown(ep);
    }
    return;
  }
  switch (ep->state) {
    case EpState::kConnecting:
      if (m.type == kReject) {
        set_state(ep, EpState::kShutdown);
        eq_unwatch(ep->eq, ep->sock);
        eq_push_err(ep->eq, &ep->f.fid, ep->f.fid.context, FI_ECONNREFUSED, m.cm, m.cm_len);
        return;
      }
      if (m.type != kAccept) return;
      ep->peer = m;
      if (ep_connect_qp(ep)) {
        set_state(ep, EpState::kShutdown);
        eq_push_err(ep->eq, &ep->f.fid, ep->f.fid.context, FI_EIO, nullptr, 0);
        return;
      }
      {
        CmMsg ready;
        fill_cm(ep, &ready, kReady, nullptr, 0);
        sock_send_all(ep->sock, &ready, sizeof ready);
      }
      set_state(ep, EpState::kConnected);
      advertise_recvs(ep);
      eq_push(ep->eq, FI_CONNECTED, &ep->f.fid, nullptr, m.cm, m.cm_len);
      break;
    case EpState::kAccepting:
      if (m.type != kReady) return;
      set_state(ep, EpState::kConnected);
      advertise_recvs(ep);
      eq_push(ep->eq, FI_CONNECTED, &ep->f.fid, nullptr, nullptr, 0);
      break;
    case EpState::kConnected:
      if (m.type == kBye) {
        set_state(ep, EpState::kShutdown);
        eq_unwatch(ep->eq, ep->sock);
        ep_report_shutdown(ep);
      }
      break;
    default:
      break;
  }
}

// Runs connection management: accepts, replies, shutdowns (never blocks
// longer than a CM record takes to arrive).
void progress_eq(Eq* eq) {
  struct epoll_event evs[16];
  int n = epoll_wait(eq->epfd, evs, 16, 0);
  for (int i = 0; i < n; i++) {
    int fd = evs[i].data.fd;
    if (fd == eq->efd) continue;
    for (Pep* p : eq->peps)
      if (p->lfd == fd) {
        pep_accept(p);
        fd = -1;
        break;
      }
    if (fd < 0) continue;
    for (Ep* e : eq->eps)
      if (e->sock == fd) {
        ep_cm_event(e);
        break;
      }
  }
}

// ---------------------------------------------------------------------------
// fid ops shared by every class

int no_bind(struct fid*, struct fid*, uint64_t) { return -FI_ENOSYS; }
int no_control(struct fid*, int, void*) { return -FI_ENOSYS; }
int no_ops_open(struct fid*, const char*, uint64_t, void**, void*) { return -FI_ENOSYS; }

// ---------------------------------------------------------------------------
// CQ ops

// Reads up to `count` completions without running progress; -FI_EAGAIN when
// empty, -FI_EAVAIL when an error entry is first.
ssize_t cq_take(Cq* cq, void* buf, size_t count) {
  std::lock_guard<std::mutex> l(cq->mu);
  if (!cq->errq.empty()) return -FI_EAVAIL;
  if (cq->q.empty()) return -FI_EAGAIN;
  size_t es = cq_entry_size(cq->fmt), n = 0;
  auto* out = static_cast<uint8_t*>(buf);
  while (n < count && !cq->q.empty()) {
    cq_write_entry(cq->fmt, cq->q.front(), out + n * es);
    cq->q.pop_front();
    n++;
  }
  return ssize_t(n);
}

ssize_t cq_read_impl(Cq* cq, void* buf, size_t count) {
  ssize_t n = cq_take(cq, buf, count);
  if (n != -FI_EAGAIN) {
    cq->yield.on_entry();
    return n;
  }
  // Empty: run the protocol of its endpoints (the consumer waits, so owed
  // credits a peer may be short of go out).
  progress_cq(cq, true);
  n = cq_take(cq, buf, count);
  if (n != -FI_EAGAIN) {
    cq->yield.on_entry();
    return n;
  }
  // Still empty: a consumer that spins on this call would hold the CPU that
  // libmrc's engine thread needs (thread progress) or, with application
  // progress (the poller has just run an engine pass), that the peer or the
  // other ranks on a host with more busy threads than cores need to answer,
  // so give it up (returns at once when nothing else is runnable) -- once the
  // CQ has read empty for FI_MRC_YIELD_US: on a host with other work, a
  // yield in every short gap of a streaming exchange can hand the CPU away
  // for a scheduler slice each time. FI_MRC_YIELD=0: spin.
  // (mrc::mono_ns: CLOCK_MONOTONIC through the vDSO, no system call.)
  if (cq->yield.on_empty(cq->yield.timed() ? int64_t(mrc::mono_ns()) : 0)) sched_yield();
  return n;
}

ssize_t cq_read(struct fid_cq* f, void* buf, size_t count) {
  return cq_read_impl(of<Cq>(f), buf, count);
}

ssize_t cq_readfrom(struct fid_cq* f, void* buf, size_t count, fi_addr_t* src) {
  ssize_t n = cq_read_impl(of<Cq>(f), buf, count);
  for (ssize_t i = 0; src && i < n; i++) src[i] = FI_ADDR_NOTAVAIL;
  return n;
}

ssize_t cq_readerr(struct fid_cq* f, struct fi_cq_err_entry* buf, uint64_t flags) {
  Cq* cq = of<Cq>(f);
  std::lock_guard<std::mutex> l(cq->mu);
  if (cq->errq.empty()) return -FI_EAGAIN;
  struct fi_cq_err_entry e = cq->errq.front();
  // API >= 1.5: the caller's err_data buffer (none is provided by us).
  void* ud = buf->err_data;
  size_t us = buf->err_data_size;
  *buf = e;
  buf->err_data = ud;
  buf->err_data_size = FI_VERSION_GE(cq->dom->fab->f.api_version, FI_VERSION(1, 5)) ? 0 : us;
  if (!(flags & FI_PEEK)) cq->errq.pop_front();
  return 1;
}

// Arms the CQ for a waiter (fi_trywait, fi_cq_sread): its libmrc CQs (the
// completion channel fires on their next completion: the engine thread's, or
// the one a libmrc pass makes) and the CQ itself (the next completion the
// provider writes into it writes efd). False, nothing armed for the caller
// to rely on, if something is already there or arrived while arming.
bool cq_arm(Cq* cq) {
  progress_cq(cq, true);
  {
    std::lock_guard<std::mutex> l(cq->mu);
    if (!cq->q.empty() || !cq->errq.empty()) return false;
    cq->kicked = false;
  }
  g_armed.store(true, std::memory_order_release);
  {
    std::shared_lock<std::shared_mutex> l(cq->eps_mu);
    for (Ep* ep : cq->eps) {
      EpLock el(ep->mu);
      flush_credits(ep, 1);
      if (ep->mcq) mrc_req_notify_cq(ep->mcq, 0);
    }
  }
  // Re-check after arming: what libmrc completed before its CQs were armed
  // (an event that arming fired stays in the channel: the fd is readable,
  // so the channel is not drained here).
  progress_cq(cq, false, false);
  std::lock_guard<std::mutex> l(cq->mu);
  if (!cq->q.empty() || !cq->errq.empty() || cq->kicked) return false;
  // Arm under the lock cq_push takes: a completion after this writes efd.
  // A count left from an earlier wake goes first (fi_cq_signal's stays).
  if (cq->signaled && !cq->wakeup && cq->efd >= 0) {
    drain_fd(cq->efd);
    cq->signaled = false;
  }
  cq->armed = true;
  return true;
}

// fi_cq_signal was called: fi_cq_sread returns (once).
bool cq_take_wakeup(Cq* cq) {
  std::lock_guard<std::mutex> l(cq->mu);
  bool w = cq->wakeup;
  cq->wakeup = false;
  return w;
}

ssize_t cq_sreadfrom(struct fid_cq* f, void* buf, size_t count, fi_addr_t* src, const void* cond,
                     int timeout) {
  (void)cond;
  Cq* cq = of<Cq>(f);
  if (cq->wait == FI_WAIT_NONE) return -FI_ENOSYS;
  auto start = std::chrono::steady_clock::now();
  for (;;) {
    ssize_t n = cq_read_impl(cq, buf, count);
    if (n != -FI_EAGAIN) {
      for (ssize_t i = 0; src && i < n; i++) src[i] = FI_ADDR_NOTAVAIL;
      return n;
    }
    if (cq_take_wakeup(cq)) return -FI_EAGAIN;
    if (!cq_arm(cq)) continue;
    int left = -1;
    if (timeout >= 0) {
      auto el = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::steady_clock::now() - start)
                    .count();
      if (el >= timeout) return -FI_EAGAIN;
      left = int(timeout - el);
    }
    struct epoll_event ev;
    int r = epoll_wait(cq->epfd, &ev, 1, left);
    if (r < 0 && errno != EINTR) return -errno;
  }
}

ssize_t cq_sread(struct fid_cq* f, void* buf, size_t count, const void* cond, int timeout) {
  return cq_sreadfrom(f, buf, count, nullptr, cond, timeout);
}

int cq_signal(struct fid_cq* f) {
  Cq* cq = of<Cq>(f);
  std::lock_guard<std::mutex> l(cq->mu);
  cq->wakeup = true;
  cq_signal_locked(cq);
  return 0;
}

const char* cq_strerror(struct fid_cq*, int prov_errno, const void*, char* buf, size_t len) {
  const char* s = mrc_wc_status_str(static_cast<enum mrc_wc_status>(prov_errno));
  if (buf && len) {
    std::snprintf(buf, len, "%s", s);
    return buf;
  }
  return s;
}

int cq_close(struct fid* f) {
  Lock l(g_ctl);
  Cq* cq = of<Cq>(f);
  // Still bound: the endpoints lose their CQ (their completions are dropped)
  // rather than the consumer's close failing (ofi_rxm closes its CQ after its
  // connections, which may leave one being torn down).
  if (cq->refs) FI_INFO(&g_prov, FI_LOG_CQ, "CQ closed with %d endpoint binding(s)\n", cq->refs);
  {
    std::unique_lock<std::shared_mutex> el(cq->eps_mu);
    for (Ep* ep : cq->eps) {
      EpLock l2(ep->mu);
      if (ep->txcq == cq) ep->txcq = nullptr;
      if (ep->rxcq == cq) ep->rxcq = nullptr;
    }
  }
  if (cq->epfd >= 0) close(cq->epfd);
  if (cq->efd >= 0) close(cq->efd);
  delete cq;
  return 0;
}

int cq_control(struct fid* f, int cmd, void* arg) {
  Cq* cq = of<Cq>(f);
  if (cmd != FI_GETWAIT) return -FI_ENOSYS;
  if (cq->wait == FI_WAIT_NONE) return -FI_ENODATA;
  *static_cast<int*>(arg) = cq->epfd;
  return 0;
}

struct fi_ops g_cq_fid_ops = {sizeof(struct fi_ops), cq_close, no_bind, cq_control,
                              no_ops_open,           nullptr,  nullptr};
struct fi_ops_cq g_cq_ops = {sizeof(struct fi_ops_cq),
                             cq_read,
                             cq_readfrom,
                             cq_readerr,
                             cq_sread,
                             cq_sreadfrom,
                             cq_signal,
                             cq_strerror};

int cq_open(struct fid_domain* d, struct fi_cq_attr* attr, struct fid_cq** out, void* context) {
  Lock l(g_ctl);
  enum fi_cq_format fmt = attr ? attr->format : FI_CQ_FORMAT_CONTEXT;
  enum fi_wait_obj wait = attr ? attr->wait_obj : FI_WAIT_NONE;
  if (fmt == FI_CQ_FORMAT_UNSPEC) fmt = FI_CQ_FORMAT_CONTEXT;
  if (cq_entry_size(fmt) == 0) return -FI_ENOSYS;
  if (wait == FI_WAIT_UNSPEC) wait = FI_WAIT_FD;
  if (wait != FI_WAIT_NONE && wait != FI_WAIT_FD) return -FI_ENOSYS;
  if (attr && (attr->flags & FI_AFFINITY)) return -FI_ENOSYS;
  auto* cq = new Cq;
  cq->f.fid.fclass = FI_CLASS_CQ;
  cq->f.fid.context = context;
  cq->f.fid.ops = &g_cq_fid_ops;
  cq->f.ops = &g_cq_ops;
  cq->dom = of<Domain>(d);
  cq->fmt = fmt;
  cq->wait = wait;
  const Config& cfg = cq->dom->fab->cfg;
  cq->yield.configure(cfg.yield ? int64_t(cfg.yield_us) * 1000 : -1);
  cq->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  cq->epfd = epoll_create1(EPOLL_CLOEXEC);
  struct epoll_event ev = {};
  ev.events = EPOLLIN;
  ev.data.fd = cq->efd;
  epoll_ctl(cq->epfd, EPOLL_CTL_ADD, cq->efd, &ev);
  ev.data.fd = g_dev.chan_fd;
  epoll_ctl(cq->epfd, EPOLL_CTL_ADD, g_dev.chan_fd, &ev);
  *out = &cq->f;
  return 0;
}

// ---------------------------------------------------------------------------
// EQ ops

ssize_t eq_read_locked(Eq* eq, uint32_t* event, void* buf, size_t len, uint64_t flags) {
  if (eq->q.empty() && eq->errq.empty()) progress_eq(eq);
  if (!eq->errq.empty()) return -FI_EAVAIL;
  if (eq->q.empty()) return -FI_EAGAIN;
  EqEvent& e = eq->q.front();
  size_t need = sizeof(struct fi_eq_cm_entry) + e.data.size();
  if (e.event != FI_CONNREQ && e.event != FI_CONNECTED && e.event != FI_SHUTDOWN)
    need = sizeof(struct fi_eq_entry);
  if (len < sizeof(struct fi_eq_cm_entry)) return -FI_ETOOSMALL;
  struct fi_eq_cm_entry ce = {};
  ce.fid = e.fid;
  ce.info = e.info;
  std::memcpy(buf, &ce, sizeof ce);
  size_t dl = std::min(e.data.size(), len - sizeof ce);
  if (dl) std::memcpy(static_cast<uint8_t*>(buf) + sizeof ce, e.data.data(), dl);
  *event = e.event;
  ssize_t ret = ssize_t(std::min(need, sizeof ce + dl));
  if (!(flags & FI_PEEK)) {
    eq->q.pop_front();
    if (eq->q.empty() && eq->errq.empty()) drain_fd(eq->efd);
  }
  return ret;
}

ssize_t eq_read(struct fid_eq* f, uint32_t* event, void* buf, size_t len, uint64_t flags) {
  Lock l(g_ctl);
  return eq_read_locked(of<Eq>(f), event, buf, len, flags);
}

ssize_t eq_readerr(struct fid_eq* f, struct fi_eq_err_entry* buf, uint64_t flags) {
  Lock l(g_ctl);
  Eq* eq = of<Eq>(f);
  if (eq->errq.empty()) return -FI_EAGAIN;
  *buf = eq->errq.front();
  if (!(flags & FI_PEEK)) {
    eq->errq.pop_front();
    // err_data stays valid until the next call, as fi_eq_readerr(3) allows
    if (eq->err_data.size() > 4) eq->err_data.erase(eq->err_data.begin());
    if (eq->q.empty() && eq->errq.empty()) drain_fd(eq->efd);
  }
  return sizeof *buf;
}

ssize_t eq_write(struct fid_eq* f, uint32_t event, const void* buf, size_t len, uint64_t flags) {
  Lock l(g_ctl);
  Eq* eq = of<Eq>(f);
  (void)flags;
  if (len < sizeof(struct fi_eq_entry)) return -FI_EINVAL;
  auto* e = static_cast<const struct fi_eq_entry*>(buf);
  eq_push(eq, event, e->fid, nullptr, static_cast<const uint8_t*>(buf) + sizeof(struct fid*),
          len - sizeof(struct fid*));
  return ssize_t(len);
}

ssize_t eq_sread(struct fid_eq* f, uint32_t* event, void* buf, size_t len, int timeout,
                 uint64_t flags) {
  Eq* eq = of<Eq>(f);
  if (eq->wait == FI_WAIT_NONE) return -FI_ENOSYS;
  auto start = std::chrono::steady_clock::now();
  for (;;) {
    {
      Lock l(g_ctl);
      ssize_t n = eq_read_locked(eq, event, buf, len, flags);
      if (n != -FI_EAGAIN) return n;
    }
    int left = -1;
    if (timeout >= 0) {
      auto el = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::steady_clock::now() - start)
                    .count();
      if (el >= timeout) return -FI_EAGAIN;
      left = int(timeout - el);
    }
    struct pollfd p = {eq->epfd, POLLIN, 0};
    int r = poll(&p, 1, left);
    if (r < 0 && errno != EINTR) return -errno;
  }
}

const char* eq_strerror(struct fid_eq*, int prov_errno, const void*, char* buf, size_t len) {
  const char* s = fi_strerror(prov_errno);
  if (buf && len) {
    std::snprintf(buf, len, "%s", s);
    return buf;
  }
  return s;
}

int eq_close(struct fid* f) {
  Lock l(g_ctl);
  Eq* eq = of<Eq>(f);
  if (eq->refs) FI_INFO(&g_prov, FI_LOG_EQ, "EQ closed with %d binding(s)\n", eq->refs);
  for (Ep* ep : eq->eps) ep->eq = nullptr;
  for (Pep* p : eq->peps) p->eq = nullptr;
  for (auto& e : eq->q)
    if (e.info) fi_freeinfo(e.info);
  close(eq->epfd);
  close(eq->efd);
  delete eq;
  return 0;
}

int eq_control(struct fid* f, int cmd, void* arg) {
  Eq* eq = of<Eq>(f);
  if (cmd != FI_GETWAIT) return -FI_ENOSYS;
  if (eq->wait == FI_WAIT_NONE) return -FI_ENODATA;
  *static_cast<int*>(arg) = eq->epfd;
  return 0;
}

struct fi_ops g_eq_fid_ops = {sizeof(struct fi_ops), eq_close, no_bind, eq_control,
                              no_ops_open,           nullptr,  nullptr};
struct fi_ops_eq g_eq_ops = {
    sizeof(struct fi_ops_eq), eq_read, eq_readerr, eq_write, eq_sread, eq_strerror};

int eq_open(struct fid_fabric* fab, struct fi_eq_attr* attr, struct fid_eq** out, void* context) {
  Lock l(g_ctl);
  enum fi_wait_obj wait = attr ? attr->wait_obj : FI_WAIT_NONE;
  if (wait == FI_WAIT_UNSPEC) wait = FI_WAIT_FD;
  if (wait != FI_WAIT_NONE && wait != FI_WAIT_FD) return -FI_ENOSYS;
  auto* eq = new Eq;
  eq->f.fid.fclass = FI_CLASS_EQ;
  eq->f.fid.context = context;
  eq->f.fid.ops = &g_eq_fid_ops;
  eq->f.ops = &g_eq_ops;
  eq->fab = of<Fabric>(fab);
  eq->wait = wait;
  eq->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  eq->epfd = epoll_create1(EPOLL_CLOEXEC);
  eq_watch(eq, eq->efd);
  *out = &eq->f;
  return 0;
}

// ---------------------------------------------------------------------------
// Memory registration

int mr_close(struct fid* f) {
  Lock l(g_ctl);
  Mr* mr = of<Mr>(f);
  uint32_t rkey = mr->m->rkey;
  if (mrc_dereg_mr(mr->m)) {
    int e = errno;
    MRC_FI_WARN("fi_close(mr): %s\n", mrc_last_error());
    return errno_to_fi(e);
  }
  {
    std::lock_guard<std::mutex> ml(g_dev.mrs_mu);
    g_dev.mrs.erase(rkey);
  }
  delete mr;
  return 0;
}

struct fi_ops g_mr_fid_ops = {sizeof(struct fi_ops), mr_close, no_bind, no_control,
                              no_ops_open,           nullptr,  nullptr};

int mr_reg(struct fid* fid, const void* buf, size_t len, uint64_t access, uint64_t offset,
           uint64_t requested_key, uint64_t flags, struct fid_mr** out, void* context) {
  (void)offset;
  (void)requested_key;
  Lock l(g_ctl);
  // flags: FI_RMA_EVENT and FI_HMEM_DEVICE_ONLY are not offered; the bits
  // utility providers set for themselves (ofi_rxm: no MR cache) are ignored.
  if (fid->fclass != FI_CLASS_DOMAIN || (flags & (FI_RMA_EVENT | FI_HMEM_DEVICE_ONLY)) || !len) {
    MRC_FI_WARN("fi_mr_reg: class %zu flags %#llx len %zu refused\n", fid->fclass,
                (unsigned long long)flags, len);
    return -FI_EINVAL;
  }
  int acc = MRC_ACCESS_LOCAL_WRITE;
  // FI_READ: the target of an emulated read writes into this buffer.
  if (!access || (access & (FI_REMOTE_WRITE | FI_READ | FI_REMOTE_READ)))
    acc |= MRC_ACCESS_REMOTE_WRITE;
  struct mrc_mr* m = mrc_reg_mr(g_dev.pd, const_cast<void*>(buf), len, acc);
  FI_TRACE(&g_prov, FI_LOG_MR, "reg %p len %zu access %#llx -> rkey %#x\n", buf, len,
           (unsigned long long)access, m ? m->rkey : 0);
  if (!m) {
    int e = errno;
    MRC_FI_WARN("fi_mr_reg(%p, %zu): %s\n", buf, len, mrc_last_error());
    return errno_to_fi(e);
  }
  auto* mr = new Mr;
  mr->f.fid.fclass = FI_CLASS_MR;
  mr->f.fid.context = context;
  mr->f.fid.ops = &g_mr_fid_ops;
  mr->f.mem_desc = mr;
  mr->f.key = m->rkey;
  mr->m = m;
  {
    std::lock_guard<std::mutex> ml(g_dev.mrs_mu);
    g_dev.mrs[m->rkey] = Device::ReadTarget{m, access};
  }
  *out = &mr->f;
  return 0;
}

int mr_regv(struct fid* fid, const struct iovec* iov, size_t count, uint64_t access,
            uint64_t offset, uint64_t requested_key, uint64_t flags, struct fid_mr** out,
            void* context) {
  if (count != 1) return -FI_EINVAL;
  return mr_reg(fid, iov[0].iov_base, iov[0].iov_len, access, offset, requested_key, flags, out,
                context);
}

int mr_regattr(struct fid* fid, const struct fi_mr_attr* attr, uint64_t flags,
               struct fid_mr** out) {
  if (!attr || attr->iov_count != 1 || attr->iface != FI_HMEM_SYSTEM) return -FI_EINVAL;
  return mr_regv(fid, attr->mr_iov, 1, attr->access, attr->offset, attr->requested_key, flags, out,
                 attr->context);
}

struct fi_ops_mr g_mr_ops = {sizeof(struct fi_ops_mr), mr_reg, mr_regv, mr_regattr};

// ---------------------------------------------------------------------------
// Endpoint ops

Ep* as_ep(struct fid_ep* f) { return of<Ep>(f); }

bool ep_ready(Ep* ep) { return ep->state == EpState::kConnected && !ep->qp_error; }

ssize_t ep_sendmsg_impl(Ep* ep, const struct iovec* iov, void** desc, size_t count, void* ctx,
                        uint64_t flags, uint64_t data) {
  if (count > 4) return -FI_EINVAL;
  if (!ep_ready(ep)) return ep->state == EpState::kConnected ? -FI_EIO : -FI_ENOTCONN;
  uint64_t total = 0;
  for (size_t i = 0; i < count; i++) total += iov[i].iov_len;
  if (total > (size_t(1) << 30)) return -FI_EMSGSIZE;
  bool inject = flags & FI_INJECT;
  if (inject && total > slot_payload(ep)) return -FI_EMSGSIZE;
  if (ep->txq.size() >= ep->info->tx_attr->size) return -FI_EAGAIN;
  uint32_t opi = op_alloc(ep, OpKind::kMsg);
  TxOp& op = ep->ops[opi];
  op.completion = !inject && (!ep->tx_selective || (flags & FI_COMPLETION));
  op.inject = inject;
  op.has_data = flags & FI_REMOTE_CQ_DATA;
  op.ctx = ctx;
  op.flags = FI_SEND | FI_MSG;
  op.data = data;
  op.iov_count = count;
  for (size_t i = 0; i < count; i++) op.iov[i] = iov[i];
  op.total = total;
  // the consumer's registration of a single buffer: a direct message can
  // then be written from it (FI_MR_LOCAL gives one with every send)
  op.desc = !inject && count == 1 && desc ? desc[0] : nullptr;
  if (inject) {
    op.copy.resize(total);
    size_t off = 0;
    for (size_t i = 0; i < count; i++) {
      std::memcpy(op.copy.data() + off, iov[i].iov_base, iov[i].iov_len);
      off += iov[i].iov_len;
    }
  }
  ep->txq.push_back(opi);
  FI_TRACE(&g_prov, FI_LOG_EP_DATA, "send %llu bytes inject %d credits %u\n",
           (unsigned long long)total, int(inject), ep->txr->credits());
  post_and_progress(ep);
  return 0;
}

ssize_t ep_recvmsg_impl(Ep* ep, const struct iovec* iov, size_t count, void* ctx, uint64_t flags) {
  if (count > 4) return -FI_EINVAL;
  if (ep->recvs.size() >= ep->info->rx_attr->size) return -FI_EAGAIN;
  PostedRecv r = {};
  r.ctx = ctx;
  r.iov_count = count;
  for (size_t i = 0; i < count; i++) {
    r.iov[i] = iov[i];
    r.cap += iov[i].iov_len;
  }
  r.flags = flags;
  r.seq = ep->recv_seq++;
  ep->recvs.push_back(r);
  // Messages already in the ring take the buffer now; no engine pass (with
  // application progress a pass would send the ACKs it deferred on their
  // own, just before the consumer posts its answer: fi_pingpong reposts
  // its receive between the two). The next CQ read or post runs one.
  if (ep->rxc) {
    drain_rx(ep);
    advertise_recvs(ep);  // queued: leaves with the next post or CQ read
    flush_credits(ep, credit_batch(ep));
  }
  return 0;
}

// Every fi_ops_msg and fi_ops_rma entry point takes its endpoint's lock
// here and nothing else.
uint64_t default_flags(struct fid_ep* f) { return as_ep(f)->tx_op_flags | FI_COMPLETION; }

ssize_t recv_post(struct fid_ep* f, const struct iovec* iov, size_t count, void* ctx,
                  uint64_t flags) {
  Ep* ep = as_ep(f);
  EpLock l(ep->mu);
  return ep_recvmsg_impl(ep, iov, count, ctx, flags);
}

ssize_t send_post(struct fid_ep* f, const struct iovec* iov, void** desc, size_t count, void* ctx,
                  uint64_t flags, uint64_t data) {
  Ep* ep = as_ep(f);
  EpLock l(ep->mu);
  return ep_sendmsg_impl(ep, iov, desc, count, ctx, flags, data);
}

ssize_t ep_recv(struct fid_ep* f, void* buf, size_t len, void*, fi_addr_t, void* ctx) {
  struct iovec iov = {buf, len};
  return recv_post(f, &iov, 1, ctx, FI_COMPLETION);
}

ssize_t ep_recvv(struct fid_ep* f, const struct iovec* iov, void**, size_t count, fi_addr_t,
                 void* ctx) {
  return recv_post(f, iov, count, ctx, FI_COMPLETION);
}

ssize_t ep_recvmsg(struct fid_ep* f, const struct fi_msg* msg, uint64_t flags) {
  return recv_post(f, msg->msg_iov, msg->iov_count, msg->context, flags);
}

ssize_t ep_send(struct fid_ep* f, const void* buf, size_t len, void* desc, fi_addr_t, void* ctx) {
  struct iovec iov = {const_cast<void*>(buf), len};
  return send_post(f, &iov, &desc, 1, ctx, default_flags(f), 0);
}

ssize_t ep_sendv(struct fid_ep* f, const struct iovec* iov, void** desc, size_t count, fi_addr_t,
                 void* ctx) {
  return send_post(f, iov, desc, count, ctx, default_flags(f), 0);
}

ssize_t ep_sendmsg(struct fid_ep* f, const struct fi_msg* msg, uint64_t flags) {
  return send_post(f, msg->msg_iov, msg->desc, msg->iov_count, msg->context, flags, msg->data);
}

ssize_t ep_inject(struct fid_ep* f, const void* buf, size_t len, fi_addr_t) {
  struct iovec iov = {const_cast<void*>(buf), len};
  return send_post(f, &iov, nullptr, 1, nullptr, FI_INJECT, 0);
}

ssize_t ep_senddata(struct fid_ep* f, const void* buf, size_t len, void* desc, uint64_t data,
                    fi_addr_t, void* ctx) {
  struct iovec iov = {const_cast<void*>(buf), len};
  return send_post(f, &iov, &desc, 1, ctx, default_flags(f) | FI_REMOTE_CQ_DATA, data);
}

ssize_t ep_injectdata(struct fid_ep* f, const void* buf, size_t len, uint64_t data, fi_addr_t) {
  struct iovec iov = {const_cast<void*>(buf), len};
  return send_post(f, &iov, nullptr, 1, nullptr, FI_INJECT | FI_REMOTE_CQ_DATA, data);
}

struct fi_ops_msg g_msg_ops = {sizeof(struct fi_ops_msg),
                               ep_recv,
                               ep_recvv,
                               ep_recvmsg,
                               ep_send,
                               ep_sendv,
                               ep_sendmsg,
                               ep_inject,
                               ep_senddata,
                               ep_injectdata};

// RMA
ssize_t rma_impl(Ep* ep, OpKind kind, const struct iovec* iov, void** desc, size_t count,
                 uint64_t addr, uint64_t key, void* ctx, uint64_t flags, uint64_t data) {
  if (count != 1) return -FI_EINVAL;
  if (!ep_ready(ep)) return ep->state == EpState::kConnected ? -FI_EIO : -FI_ENOTCONN;
  bool inject = flags & FI_INJECT;
  if (kind == OpKind::kRead && inject) return -FI_EINVAL;
  if (!inject && iov[0].iov_len && (!desc || !desc[0]))
    return -FI_EINVAL;  // FI_MR_LOCAL: a registered local buffer
  if (inject && iov[0].iov_len > slot_payload(ep)) return -FI_EMSGSIZE;
  if (iov[0].iov_len > UINT32_MAX) return -FI_EMSGSIZE;
  if (ep->txq.size() >= ep->info->tx_attr->size) return -FI_EAGAIN;
  FI_TRACE(&g_prov, FI_LOG_EP_DATA, "%s %p len %zu -> %#llx key %#llx flags %#llx\n",
           kind == OpKind::kRead ? "read" : "write", iov[0].iov_base, iov[0].iov_len,
           (unsigned long long)addr, (unsigned long long)key, (unsigned long long)flags);
  uint32_t opi = op_alloc(ep, kind);
  TxOp& op = ep->ops[opi];
  op.completion = !inject && (!ep->tx_selective || (flags & FI_COMPLETION));
  op.inject = inject;
  op.has_data = kind == OpKind::kWrite && (flags & FI_REMOTE_CQ_DATA);
  op.ctx = ctx;
  op.flags = FI_RMA | (kind == OpKind::kRead ? FI_READ : FI_WRITE);
  op.data = data;
  op.iov[0] = iov[0];
  op.iov_count = 1;
  op.total = iov[0].iov_len;
  op.raddr = addr;
  op.rkey = key;
  op.desc = inject ? nullptr : desc[0];
  if (inject)
    op.copy.assign(static_cast<uint8_t*>(iov[0].iov_base),
                   static_cast<uint8_t*>(iov[0].iov_base) + iov[0].iov_len);
  ep->txq.push_back(opi);
  post_and_progress(ep);
  return 0;
}

ssize_t rma_post(struct fid_ep* f, OpKind kind, const struct iovec* iov, void** desc, size_t count,
                 uint64_t addr, uint64_t key, void* ctx, uint64_t flags, uint64_t data) {
  Ep* ep = as_ep(f);
  EpLock l(ep->mu);
  return rma_impl(ep, kind, iov, desc, count, addr, key, ctx, flags, data);
}

// fi_read / fi_write (Buf: void* or const void*).
template <OpKind K, class Buf>
ssize_t rma_one(struct fid_ep* f, Buf buf, size_t len, void* desc, fi_addr_t, uint64_t addr,
                uint64_t key, void* ctx) {
  struct iovec iov = {const_cast<void*>(buf), len};
  return rma_post(f, K, &iov, &desc, 1, addr, key, ctx, default_flags(f), 0);
}

// fi_readv / fi_writev
template <OpKind K>
ssize_t rma_vec(struct fid_ep* f, const struct iovec* iov, void** desc, size_t count, fi_addr_t,
                uint64_t addr, uint64_t key, void* ctx) {
  return rma_post(f, K, iov, desc, count, addr, key, ctx, default_flags(f), 0);
}

// fi_readmsg / fi_writemsg
template <OpKind K>
ssize_t rma_msg(struct fid_ep* f, const struct fi_msg_rma* m, uint64_t flags) {
  if (m->rma_iov_count != 1) return -FI_EINVAL;
  return rma_post(f, K, m->msg_iov, m->desc, m->iov_count, m->rma_iov[0].addr, m->rma_iov[0].key,
                  m->context, flags, K == OpKind::kWrite ? m->data : 0);
}

ssize_t rma_inject(struct fid_ep* f, const void* buf, size_t len, fi_addr_t, uint64_t addr,
                   uint64_t key) {
  struct iovec iov = {const_cast<void*>(buf), len};
  return rma_post(f, OpKind::kWrite, &iov, nullptr, 1, addr, key, nullptr, FI_INJECT, 0);
}

ssize_t rma_writedata(struct fid_ep* f, const void* buf, size_t len, void* desc, uint64_t data,
                      fi_addr_t, uint64_t addr, uint64_t key, void* ctx) {
  struct iovec iov = {const_cast<void*>(buf), len};
  return rma_post(f, OpKind::kWrite, &iov, &desc, 1, addr, key, ctx,
                  default_flags(f) | FI_REMOTE_CQ_DATA, data);
}

ssize_t rma_injectdata(struct fid_ep* f, const void* buf, size_t len, uint64_t data, fi_addr_t,
                       uint64_t addr, uint64_t key) {
  struct iovec iov = {const_cast<void*>(buf), len};
  return rma_post(f, OpKind::kWrite, &iov, nullptr, 1, addr, key, nullptr,
                  FI_INJECT | FI_REMOTE_CQ_DATA, data);
}

struct fi_ops_rma g_rma_ops = {sizeof(struct fi_ops_rma),
                               rma_one<OpKind::kRead, void*>,
                               rma_vec<OpKind::kRead>,
                               rma_msg<OpKind::kRead>,
                               rma_one<OpKind::kWrite, const void*>,
                               rma_vec<OpKind::kWrite>,
                               rma_msg<OpKind::kWrite>,
                               rma_inject,
                               rma_writedata,
                               rma_injectdata};

// Tagged messages are not offered by the MSG endpoint (ofi_rxm adds them).
ssize_t tg_recv(struct fid_ep*, void*, size_t, void*, fi_addr_t, uint64_t, uint64_t, void*) {
  return -FI_ENOSYS;
}
ssize_t tg_recvv(struct fid_ep*, const struct iovec*, void**, size_t, fi_addr_t, uint64_t, uint64_t,
                 void*) {
  return -FI_ENOSYS;
}
ssize_t tg_recvmsg(struct fid_ep*, const struct fi_msg_tagged*, uint64_t) { return -FI_ENOSYS; }
ssize_t tg_send(struct fid_ep*, const void*, size_t, void*, fi_addr_t, uint64_t, void*) {
  return -FI_ENOSYS;
}
ssize_t tg_sendv(struct fid_ep*, const struct iovec*, void**, size_t, fi_addr_t, uint64_t, void*) {
  return -FI_ENOSYS;
}
ssize_t tg_sendmsg(struct fid_ep*, const struct fi_msg_tagged*, uint64_t) { return -FI_ENOSYS; }
ssize_t tg_inject(struct fid_ep*, const void*, size_t, fi_addr_t, uint64_t) { return -FI_ENOSYS; }
ssize_t tg_senddata(struct fid_ep*, const void*, size_t, void*, uint64_t, fi_addr_t, uint64_t,
                    void*) {
  return -FI_ENOSYS;
}
ssize_t tg_injectdata(struct fid_ep*, const void*, size_t, uint64_t, fi_addr_t, uint64_t) {
  return -FI_ENOSYS;
}
struct fi_ops_tagged g_tagged_ops = {sizeof(struct fi_ops_tagged),
                                     tg_recv,
                                     tg_recvv,
                                     tg_recvmsg,
                                     tg_send,
                                     tg_sendv,
                                     tg_sendmsg,
                                     tg_inject,
                                     tg_senddata,
                                     tg_injectdata};

// CM
int ep_getname(fid_t fid, void* addr, size_t* addrlen) {
  Lock l(g_ctl);
  struct sockaddr_in sa = {};
  if (fid->fclass == FI_CLASS_PEP) {
    sa = of<Pep>(fid)->addr;
  } else {
    Ep* ep = of<Ep>(fid);
    socklen_t sl = sizeof sa;
    if (ep->sock >= 0)
      getsockname(ep->sock, reinterpret_cast<struct sockaddr*>(&sa), &sl);
    else if (ep->info->src_addr)
      std::memcpy(&sa, ep->info->src_addr, sizeof sa);
  }
  size_t have = *addrlen;
  *addrlen = sizeof sa;
  if (have < sizeof sa) return -FI_ETOOSMALL;
  std::memcpy(addr, &sa, sizeof sa);
  return 0;
}

int ep_setname(fid_t fid, void* addr, size_t addrlen) {
  Lock l(g_ctl);
  if (fid->fclass != FI_CLASS_PEP || addrlen != sizeof(struct sockaddr_in)) return -FI_EINVAL;
  Pep* p = of<Pep>(fid);
  if (p->lfd >= 0) return -FI_EBUSY;
  std::memcpy(&p->addr, addr, sizeof p->addr);
  return 0;
}

int ep_getpeer(struct fid_ep* f, void* addr, size_t* addrlen) {
  Lock l(g_ctl);
  Ep* ep = as_ep(f);
  size_t have = *addrlen;
  *addrlen = sizeof ep->peer_addr;
  if (have < sizeof ep->peer_addr) return -FI_ETOOSMALL;
  std::memcpy(addr, &ep->peer_addr, sizeof ep->peer_addr);
  return 0;
}

int ep_connect(struct fid_ep* f, const void* addr, const void* param, size_t plen) {
  Lock l(g_ctl);
  Ep* ep = as_ep(f);
  if (plen > kCmDataMax) return -FI_EINVAL;
  if (!ep->enabled || !ep->eq || ep->state != EpState::kIdle) return -FI_EOPBADSTATE;
  const void* dst = addr ? addr : ep->info->dest_addr;
  if (!dst) return -FI_EINVAL;
  std::memcpy(&ep->peer_addr, dst, sizeof ep->peer_addr);
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return -errno;
  sock_timeouts(s);
  ep->sock = s;
  set_state(ep, EpState::kConnecting);
  CmMsg m;
  fill_cm(ep, &m, kConnReq, param, plen);
  if (connect(s, reinterpret_cast<const struct sockaddr*>(&ep->peer_addr), sizeof ep->peer_addr) ||
      !sock_send_all(s, &m, sizeof m)) {
    set_state(ep, EpState::kShutdown);
    eq_push_err(ep->eq, &ep->f.fid, ep->f.fid.context, FI_ECONNREFUSED, nullptr, 0);
    return 0;
  }
  eq_watch(ep->eq, s);
  return 0;
}

int pep_listen(struct fid_pep* f) {
  Lock l(g_ctl);
  Pep* p = of<Pep>(f);
  if (!p->eq) return -FI_EOPBADSTATE;
  if (p->lfd >= 0) return 0;
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return -errno;
  int one = 1;
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(s, reinterpret_cast<struct sockaddr*>(&p->addr), sizeof p->addr) || listen(s, 128)) {
    int e = errno;
    close(s);
    return -e;
  }
  socklen_t sl = sizeof p->addr;
  getsockname(s, reinterpret_cast<struct sockaddr*>(&p->addr), &sl);
  p->lfd = s;
  eq_watch(p->eq, s);
  return 0;
}

int ep_accept(struct fid_ep* f, const void* param, size_t plen) {
  Lock l(g_ctl);
  Ep* ep = as_ep(f);
  if (plen > kCmDataMax) return -FI_EINVAL;
  if (!ep->creq || !ep->enabled || !ep->eq || ep->state != EpState::kIdle) return -FI_EOPBADSTATE;
  ep->peer = ep->creq->peer;
  ep->peer_addr = ep->creq->peer_addr;
  ep->sock = ep->creq->sock;
  ep->creq->sock = -1;
  close_connreq(&ep->creq->f);
  ep->creq = nullptr;
  int r = ep_connect_qp(ep);
  CmMsg m;
  fill_cm(ep, &m, r ? kReject : kAccept, param, plen);
  if (!sock_send_all(ep->sock, &m, sizeof m) || r) {
    set_state(ep, EpState::kShutdown);
    return r ? r : -FI_ECONNABORTED;
  }
  set_state(ep, EpState::kAccepting);
  eq_watch(ep->eq, ep->sock);
  return 0;
}

int pep_reject(struct fid_pep*, fid_t handle, const void* param, size_t plen) {
  Lock l(g_ctl);
  if (!handle || handle->fclass != FI_CLASS_CONNREQ || plen > kCmDataMax) return -FI_EINVAL;
  auto* c = of<ConnReq>(handle);
  CmMsg m = {};
  m.magic = kCmMagic;
  m.version = kCmVersion;
  m.type = kReject;
  m.slots = 4;
  m.slot_size = 256;
  m.cm_len = uint32_t(plen);
  if (plen) std::memcpy(m.cm, param, plen);
  sock_send_all(c->sock, &m, sizeof m);
  return close_connreq(handle);
}

// With application progress libmrc leaves the ACKs of what a pass delivered
// to the caller's next pass: run passes before a QP goes away, or the peer's
// last WRITEs (fi_pingpong's "fin", credits) are never acknowledged and end
// in retry-exceeded errors there.
void flush_acks(Ep*) {
  if (!g_dev.app_progress || !g_dev.dev) return;
  for (int i = 0; i < 4; i++) mrc_progress(g_dev.dev, 0);
}

// Message sends complete once staged (msg_staged), before their WRITEs are
// acknowledged: before the QP goes, those WRITEs must complete (a lost
// packet is resent only while the QP lives), at most 2 s.
void drain_sends(Ep* ep) {
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (;;) {
    {
      EpLock l(ep->mu);
      if (ep->state != EpState::kConnected || ep->qp_error || !ep->mcq) return;
      progress_ep(ep);
      if (ep->inflight_segs.empty()) return;
    }
    if (std::chrono::steady_clock::now() >= until) return;
    if (g_dev.app_progress && g_dev.dev)
      mrc_progress(g_dev.dev, 1);
    else
      std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// Close handshake: the first side to close a connected endpoint keeps its QP
// (and so the engine's ACKs of what arrived last) until the peer's CM socket
// says it closes too (BYE or EOF), at most 1 s. libmrc drops a destroyed
// QP's state at once; a peer whose last send was not yet acknowledged then
// waited forever for its completion (fi_pingpong's final message).
void close_wait(Ep* ep) {
  if (ep->state != EpState::kConnected || ep->sock < 0 || !ep->qp) return;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  for (;;) {
    struct pollfd p = {ep->sock, POLLIN, 0};
    if (poll(&p, 1, g_dev.app_progress ? 0 : 5) != 0) return;  // BYE, EOF or error
    if (g_dev.app_progress) mrc_progress(g_dev.dev, 5);
    if (std::chrono::steady_clock::now() >= until) return;
  }
}

int ep_shutdown(struct fid_ep* f, uint64_t) {
  Lock l(g_ctl);
  Ep* ep = as_ep(f);
  drain_sends(ep);
  if (ep->qp) flush_acks(ep);
  if (ep->state == EpState::kConnected || ep->state == EpState::kAccepting) {
    CmMsg m = {};
    m.magic = kCmMagic;
    m.version = kCmVersion;
    m.type = kBye;
    m.slots = 4;
    m.slot_size = 256;
    sock_send_all(ep->sock, &m, sizeof m);
  }
  if (ep->state != EpState::kIdle) set_state(ep, EpState::kShutdown);
  eq_unwatch(ep->eq, ep->sock);
  return 0;
}

int no_join(struct fid_ep*, const void*, uint64_t, struct fid_mc**, void*) { return -FI_ENOSYS; }
int ep_no_listen(struct fid_pep*) { return -FI_ENOSYS; }
int ep_no_reject(struct fid_pep*, fid_t, const void*, size_t) { return -FI_ENOSYS; }
int pep_no_connect(struct fid_ep*, const void*, const void*, size_t) { return -FI_ENOSYS; }
int pep_no_accept(struct fid_ep*, const void*, size_t) { return -FI_ENOSYS; }
int pep_no_shutdown(struct fid_ep*, uint64_t) { return -FI_ENOSYS; }
int pep_no_getpeer(struct fid_ep*, void*, size_t*) { return -FI_ENOSYS; }

struct fi_ops_cm g_ep_cm_ops = {sizeof(struct fi_ops_cm),
                                ep_setname,
                                ep_getname,
                                ep_getpeer,
                                ep_connect,
                                ep_no_listen,
                                ep_accept,
                                ep_no_reject,
                                ep_shutdown,
                                no_join};
struct fi_ops_cm g_pep_cm_ops = {
    sizeof(struct fi_ops_cm), ep_setname, ep_getname,    pep_no_getpeer,
    pep_no_connect,           pep_listen, pep_no_accept, pep_reject,
    pep_no_shutdown,          no_join};

// fi_ops_ep
ssize_t ep_cancel(fid_t, void*) { return -FI_ENOENT; }

int ep_getopt(fid_t, int level, int optname, void* optval, size_t* optlen) {
  if (level != FI_OPT_ENDPOINT) return -FI_ENOPROTOOPT;
  if (optname == FI_OPT_CM_DATA_SIZE) {
    if (*optlen < sizeof(size_t)) return -FI_ETOOSMALL;
    *static_cast<size_t*>(optval) = kCmDataMax;
    *optlen = sizeof(size_t);
    return 0;
  }
  return -FI_ENOPROTOOPT;
}

int ep_setopt(fid_t, int level, int, const void*, size_t) {
  return level == FI_OPT_ENDPOINT ? -FI_ENOPROTOOPT : -FI_ENOPROTOOPT;
}

int no_tx_ctx(struct fid_ep*, int, struct fi_tx_attr*, struct fid_ep**, void*) {
  return -FI_ENOSYS;
}
int no_rx_ctx(struct fid_ep*, int, struct fi_rx_attr*, struct fid_ep**, void*) {
  return -FI_ENOSYS;
}

ssize_t ep_rx_size_left(struct fid_ep* f) {
  Ep* ep = as_ep(f);
  EpLock l(ep->mu);
  return ssize_t(ep->info->rx_attr->size - std::min(ep->recvs.size(), ep->info->rx_attr->size));
}

ssize_t ep_tx_size_left(struct fid_ep* f) {
  Ep* ep = as_ep(f);
  EpLock l(ep->mu);
  return ssize_t(ep->info->tx_attr->size - std::min(ep->txq.size(), ep->info->tx_attr->size));
}

struct fi_ops_ep g_ep_ops = {
    sizeof(struct fi_ops_ep), ep_cancel,      ep_getopt, ep_setopt, no_tx_ctx, no_rx_ctx,
    ep_rx_size_left,          ep_tx_size_left};

void detach(std::vector<Ep*>& v, Ep* ep) { v.erase(std::remove(v.begin(), v.end(), ep), v.end()); }

int ep_close(struct fid* f) {
  Lock l(g_ctl);
  Ep* ep = of<Ep>(f);
  drain_sends(ep);
  close_wait(ep);
  if (ep->qp) flush_acks(ep);
  if (ep->sock >= 0) {
    eq_unwatch(ep->eq, ep->sock);
    close(ep->sock);
  }
  if (ep->creq) close_connreq(&ep->creq->f);
  // Off its CQs first: once no CQ read can reach it (they progress their
  // endpoints under eps_mu), it can go.
  for (Cq* cq : {ep->txcq, ep->rxcq})
    if (cq) {
      std::unique_lock<std::shared_mutex> el(cq->eps_mu);
      detach(cq->eps, ep);
      cq->refs--;  // bound to both directions: counted twice, listed once
    }
  if (ep->eq) {
    detach(ep->eq->eps, ep);
    ep->eq->refs--;
  }
  ep_free_qp(ep);
  fi_freeinfo(ep->info);
  delete ep;
  return 0;
}

int ep_bind(struct fid* f, struct fid* bf, uint64_t flags) {
  Lock l(g_ctl);
  Ep* ep = of<Ep>(f);
  if (ep->enabled) return -FI_EOPBADSTATE;
  switch (bf->fclass) {
    case FI_CLASS_EQ:
      if (ep->eq) return -FI_EINVAL;
      ep->eq = of<Eq>(bf);
      ep->eq->eps.push_back(ep);
      ep->eq->refs++;
      return 0;
    case FI_CLASS_CQ: {
      Cq* cq = of<Cq>(bf);
      if (!(flags & (FI_TRANSMIT | FI_RECV))) return -FI_EINVAL;
      if (flags & FI_TRANSMIT) {
        if (ep->txcq) return -FI_EINVAL;
        ep->txcq = cq;
        ep->tx_selective = flags & FI_SELECTIVE_COMPLETION;
        cq->refs++;
      }
      if (flags & FI_RECV) {
        if (ep->rxcq) return -FI_EINVAL;
        ep->rxcq = cq;
        ep->rx_selective = flags & FI_SELECTIVE_COMPLETION;
        cq->refs++;
      }
      std::unique_lock<std::shared_mutex> el(cq->eps_mu);
      if (std::find(cq->eps.begin(), cq->eps.end(), ep) == cq->eps.end()) cq->eps.push_back(ep);
      return 0;
    }
    case FI_CLASS_CNTR:
    case FI_CLASS_SRX_CTX:
    case FI_CLASS_STX_CTX:
    case FI_CLASS_AV:
    default:
      return -FI_ENOSYS;
  }
}

int ep_control(struct fid* f, int cmd, void* arg) {
  Lock l(g_ctl);
  Ep* ep = of<Ep>(f);
  switch (cmd) {
    case FI_ENABLE: {
      if (ep->enabled) return 0;
      if (!ep->txcq && !ep->rxcq) return -FI_ENOCQ;
      if (!ep->eq) return -FI_ENOEQ;
      EpLock el(ep->mu);  // a CQ read may already progress it (bound, not enabled)
      int r = ep_create_qp(ep);
      if (r) {
        MRC_FI_WARN("endpoint: %s (%s)\n", fi_strerror(-r), mrc_last_error());
        ep_free_qp(ep);
        return r;
      }
      ep->enabled = true;
      return 0;
    }
    case FI_GETOPSFLAG:
      *static_cast<uint64_t*>(arg) = ep->tx_op_flags;
      return 0;
    case FI_SETOPSFLAG:
      ep->tx_op_flags = *static_cast<uint64_t*>(arg) & FI_COMPLETION;
      return 0;
    default:
      return -FI_ENOSYS;
  }
}

struct fi_ops g_ep_fid_ops = {sizeof(struct fi_ops), ep_close, ep_bind, ep_control,
                              no_ops_open,           nullptr,  nullptr};

int ep_open(struct fid_domain* d, struct fi_info* info, struct fid_ep** out, void* context) {
  Lock l(g_ctl);
  if (!info || !info->ep_attr || info->ep_attr->type != FI_EP_MSG) return -FI_EINVAL;
  if (info->handle && info->handle->fclass != FI_CLASS_CONNREQ) return -FI_EINVAL;
  auto* ep = new Ep;
  ep->f.fid.fclass = FI_CLASS_EP;
  ep->f.fid.context = context;
  ep->f.fid.ops = &g_ep_fid_ops;
  ep->f.ops = &g_ep_ops;
  ep->f.cm = &g_ep_cm_ops;
  ep->f.msg = &g_msg_ops;
  ep->f.rma = &g_rma_ops;
  ep->f.tagged = &g_tagged_ops;
  ep->f.atomic = nullptr;
  ep->f.collective = nullptr;
  ep->dom = of<Domain>(d);
  ep->info = fi_dupinfo(info);
  if (!ep->info) {
    delete ep;
    return -FI_ENOMEM;
  }
  if (ep->info->tx_attr->size == 0 || ep->info->tx_attr->size > 1024)
    ep->info->tx_attr->size = 1024;
  if (ep->info->rx_attr->size == 0 || ep->info->rx_attr->size > 1024)
    ep->info->rx_attr->size = 1024;
  ep->tx_op_flags = info->tx_attr ? info->tx_attr->op_flags & FI_COMPLETION : 0;
  if (info->handle) {
    ep->creq = of<ConnReq>(info->handle);
    ep->info->handle = nullptr;
  }
  *out = &ep->f;
  return 0;
}

// ---------------------------------------------------------------------------
// Passive endpoint

int pep_close(struct fid* f) {
  Lock l(g_ctl);
  Pep* p = of<Pep>(f);
  if (p->lfd >= 0) {
    eq_unwatch(p->eq, p->lfd);
    close(p->lfd);
  }
  if (p->eq) {
    p->eq->peps.erase(std::remove(p->eq->peps.begin(), p->eq->peps.end(), p), p->eq->peps.end());
    p->eq->refs--;
  }
  fi_freeinfo(p->info);
  delete p;
  return 0;
}

int pep_bind(struct fid* f, struct fid* bf, uint64_t) {
  Lock l(g_ctl);
  Pep* p = of<Pep>(f);
  if (bf->fclass != FI_CLASS_EQ) return -FI_EINVAL;
  if (p->eq) return -FI_EINVAL;
  p->eq = of<Eq>(bf);
  p->eq->peps.push_back(p);
  p->eq->refs++;
  return 0;
}

struct fi_ops g_pep_fid_ops = {sizeof(struct fi_ops), pep_close, pep_bind, no_control,
                               no_ops_open,           nullptr,   nullptr};
struct fi_ops_ep g_pep_ops = {sizeof(struct fi_ops_ep),
                              ep_cancel,
                              ep_getopt,
                              ep_setopt,
                              no_tx_ctx,
                              no_rx_ctx,
                              nullptr,
                              nullptr};

int pep_open(struct fid_fabric* fab, struct fi_info* info, struct fid_pep** out, void* context) {
  Lock l(g_ctl);
  if (!info) return -FI_EINVAL;
  auto* p = new Pep;
  p->f.fid.fclass = FI_CLASS_PEP;
  p->f.fid.context = context;
  p->f.fid.ops = &g_pep_fid_ops;
  p->f.ops = &g_pep_ops;
  p->f.cm = &g_pep_cm_ops;
  p->fab = of<Fabric>(fab);
  p->info = fi_dupinfo(info);
  std::memset(&p->addr, 0, sizeof p->addr);
  p->addr.sin_family = AF_INET;
  if (info->src_addr && info->src_addrlen == sizeof p->addr)
    std::memcpy(&p->addr, info->src_addr, sizeof p->addr);
  if (!p->info) {
    delete p;
    return -FI_ENOMEM;
  }
  *out = &p->f;
  return 0;
}

// ---------------------------------------------------------------------------
// Domain and fabric

int domain_close(struct fid* f) {
  Lock l(g_ctl);
  Domain* d = of<Domain>(f);
  fi_freeinfo(d->info);
  delete d;
  device_put();
  return 0;
}

struct fi_ops g_domain_fid_ops = {sizeof(struct fi_ops), domain_close, no_bind, no_control,
                                  no_ops_open,           nullptr,      nullptr};

int no_av_open(struct fid_domain*, struct fi_av_attr*, struct fid_av**, void*) {
  return -FI_ENOSYS;
}
int no_sep(struct fid_domain*, struct fi_info*, struct fid_ep**, void*) { return -FI_ENOSYS; }
int no_cntr(struct fid_domain*, struct fi_cntr_attr*, struct fid_cntr**, void*) {
  return -FI_ENOSYS;
}
int no_poll(struct fid_domain*, struct fi_poll_attr*, struct fid_poll**) { return -FI_ENOSYS; }
int no_stx(struct fid_domain*, struct fi_tx_attr*, struct fid_stx**, void*) { return -FI_ENOSYS; }
int no_srx(struct fid_domain*, struct fi_rx_attr*, struct fid_ep**, void*) { return -FI_ENOSYS; }
int no_query_atomic(struct fid_domain*, enum fi_datatype, enum fi_op, struct fi_atomic_attr*,
                    uint64_t) {
  return -FI_ENOSYS;
}
int no_query_coll(struct fid_domain*, enum fi_collective_op, struct fi_collective_attr*, uint64_t) {
  return -FI_ENOSYS;
}
int ep_open2(struct fid_domain* d, struct fi_info* info, struct fid_ep** ep, uint64_t flags,
             void* ctx) {
  if (flags) return -FI_EINVAL;
  return ep_open(d, info, ep, ctx);
}

struct fi_ops_domain g_domain_ops = {sizeof(struct fi_ops_domain),
                                     no_av_open,
                                     cq_open,
                                     ep_open,
                                     no_sep,
                                     no_cntr,
                                     no_poll,
                                     no_stx,
                                     no_srx,
                                     no_query_atomic,
                                     no_query_coll,
                                     ep_open2};

int domain_open(struct fid_fabric* fab, struct fi_info* info, struct fid_domain** out,
                void* context) {
  Lock l(g_ctl);
  Fabric* f = of<Fabric>(fab);
  if (!f->cfg.why.empty()) return -FI_ENODEV;
  if (info && info->domain_attr && info->domain_attr->name &&
      f->cfg.domain != info->domain_attr->name)
    return -FI_EINVAL;
  int r = device_get(f->cfg);
  if (r) return r;
  auto* d = new Domain;
  d->f.fid.fclass = FI_CLASS_DOMAIN;
  d->f.fid.context = context;
  d->f.fid.ops = &g_domain_fid_ops;
  d->f.ops = &g_domain_ops;
  d->f.mr = &g_mr_ops;
  d->fab = f;
  d->info = info ? fi_dupinfo(info) : nullptr;
  *out = &d->f;
  return 0;
}

int fabric_trywait(struct fid_fabric*, struct fid** fids, int count) {
  for (int i = 0; i < count; i++) {
    if (fids[i]->fclass == FI_CLASS_CQ) {
      if (!cq_arm(of<Cq>(fids[i]))) return -FI_EAGAIN;
    } else if (fids[i]->fclass == FI_CLASS_EQ) {
      Lock l(g_ctl);
      Eq* eq = of<Eq>(fids[i]);
      progress_eq(eq);
      if (!eq->q.empty() || !eq->errq.empty()) return -FI_EAGAIN;
    } else {
      return -FI_EINVAL;
    }
  }
  return 0;
}

int no_wait_open(struct fid_fabric*, struct fi_wait_attr*, struct fid_wait**) { return -FI_ENOSYS; }
int domain_open2(struct fid_fabric* fab, struct fi_info* info, struct fid_domain** dom,
                 uint64_t flags, void* ctx) {
  if (flags) return -FI_EINVAL;
  return domain_open(fab, info, dom, ctx);
}

int fabric_close(struct fid* f) {
  delete of<Fabric>(f);
  return 0;
}

struct fi_ops g_fabric_fid_ops = {sizeof(struct fi_ops), fabric_close, no_bind, no_control,
                                  no_ops_open,           nullptr,      nullptr};
struct fi_ops_fabric g_fabric_ops = {sizeof(struct fi_ops_fabric),
                                     domain_open,
                                     pep_open,
                                     eq_open,
                                     no_wait_open,
                                     fabric_trywait,
                                     domain_open2};

int prov_fabric(struct fi_fabric_attr* attr, struct fid_fabric** out, void* context) {
  if (attr && attr->name && std::strcmp(attr->name, kFabricName)) return -FI_ENODATA;
  auto* f = new Fabric;
  f->f.fid.fclass = FI_CLASS_FABRIC;
  f->f.fid.context = context;
  f->f.fid.ops = &g_fabric_fid_ops;
  f->f.ops = &g_fabric_ops;
  f->f.api_version = attr ? attr->api_version : FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION);
  f->cfg = load_config();
  *out = &f->f;
  return 0;
}

int prov_getinfo(uint32_t version, const char* node, const char* service, uint64_t flags,
                 const struct fi_info* hints, struct fi_info** info) {
  Config c = load_config();
  if (!c.why.empty()) {
    FI_INFO(&g_prov, FI_LOG_CORE, "%s\n", c.why.c_str());
    return -FI_ENODATA;
  }
  bool ok = false;
  InfoConfig ic = info_config(c, &ok);
  if (!ok) {
    FI_INFO(&g_prov, FI_LOG_CORE, "no IPv4 address on %s\n", c.ifaces[0].c_str());
    return -FI_ENODATA;
  }
  std::string why;
  int r = build_info(version, ic, node, service, flags, hints, info, &why);
  if (r == -FI_ENODATA && !why.empty())
    FI_INFO(&g_prov, FI_LOG_CORE, "hints not met: %s\n", why.c_str());
  return r;
}

void prov_cleanup() {}

}  // namespace
}  // namespace mrc::fi

extern "C" __attribute__((visibility("default"))) struct fi_provider* fi_prov_ini(void) {
  using namespace mrc::fi;
  g_prov.version = kProvVersion;
  g_prov.fi_version = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION);
  g_prov.name = kProvName;
  g_prov.getinfo = prov_getinfo;
  g_prov.fabric = prov_fabric;
  g_prov.cleanup = prov_cleanup;
  fi_param_define(&g_prov, "ifaces", FI_PARAM_STRING,
                  "Plane interfaces of the mrc device, comma-separated, plane 0 first (required)");
  fi_param_define(&g_prov, "slots", FI_PARAM_INT, "Receive-ring slots per connection (default 64)");
  fi_param_define(&g_prov, "slot_size", FI_PARAM_INT,
                  "Bytes per ring slot, header included (default 65536)");
  fi_param_define(&g_prov, "frame_chunks", FI_PARAM_INT,
                  "UMEM frames of 4 KiB one packet may fill, 1..17 (default 1, single-buffer "
                  "AF_XDP: at most 3392 payload bytes per packet; 3 on MTU 9000 planes carries "
                  "8896; needs multi-buffer AF_XDP, Linux 6.6+)");
  fi_param_define(&g_prov, "direct_min", FI_PARAM_STRING,
                  "Messages of at least this many bytes go straight into the peer's receive "
                  "buffer when it advertised it (receives this large are advertised); 0: "
                  "never (default 65536)");
  fi_param_define(&g_prov, "tx", FI_PARAM_STRING,
                  "How libmrc sends: auto (default: live where available, else xsk; xsk "
                  "with FI_MRC_FRAME_CHUNKS > 1), xsk (AF_XDP copy-mode TX rings) or live (XDP "
                  "live frames, one kernel copy less per packet, path MTU at most ~3.2 KB; no "
                  "device where the kernel lacks them)");
  fi_param_define(
      &g_prov, "progress", FI_PARAM_STRING,
      "app (the polling thread runs libmrc's engine; default; the engine thread through "
      "mrc-serviced) or thread (libmrc's engine thread)");
  fi_param_define(&g_prov, "yield", FI_PARAM_BOOL,
                  "Yield the CPU when a CQ read finds nothing, so libmrc's engine thread (or "
                  "the peer, on a busy host) runs, once it has found nothing for FI_MRC_YIELD_US "
                  "(default on)");
  fi_param_define(&g_prov, "yield_us", FI_PARAM_STRING,
                  "Microseconds a CQ must have read empty before an empty read yields, 0..1000000; "
                  "0: every empty read (default %u)",
                  kYieldUsDefault);
  return &g_prov;
}
