// libmrc's C API (include/mrc/mrc.h) over the C++ API (include/mrc/mrc.hpp).
//
// Each C object wraps its C++ object and the little state the C semantics
// need on top: which context owns it, the completion and async events handed
// out and not yet acknowledged (destroy waits for them, as verbs does), and
// a copy of the QP's creation attributes and state so that post calls can
// check their arguments without a lock.
//
// Locks: mrc_device::mu (its contexts and PD count) is taken before
// mrc_context::mu (the context's objects), which is taken before
// mrc_context::ev_mu (its async event queue), which is taken before an
// object's own mutex. The post and poll calls take none of them.
#include "mrc/mrc.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "codec/packet.hpp"
#include "core/types.hpp"
#include "lib/exchange.hpp"
#include "mrc/mrc.hpp"
#include "util/unique_fd.hpp"

namespace core = mrc::core;

struct mrc_device {
  std::unique_ptr<mrc::Context> ctx;
  std::vector<mrc::PortInfo> ports;  // as opened: names, MTUs, addresses
  std::mutex mu;
  std::vector<mrc_context*> contexts;
  size_t pds = 0;
  mrc::UniqueFd stop_fd;
  std::thread dispatcher;  // routes the Context's async events to contexts
};

struct mrc_context {
  mrc_device* dev = nullptr;
  uint32_t api_version = 0, vendor_api_version = 0;
  std::mutex mu;
  std::vector<mrc_qp*> qps;
  std::vector<mrc_cq*> cqs;
  std::vector<mrc_qp_hint*> hints;
  std::vector<mrc_comp_channel*> channels;
  std::mutex ev_mu;
  std::deque<mrc_async_event> events;
  mrc::UniqueFd ev_fd;  // eventfd semaphore: one count per queued event
};

struct mrc_pd {
  mrc_device* dev = nullptr;
  uint32_t handle = 0;
};

struct mrc_comp_channel {
  mrc_context* ctx = nullptr;
  std::unique_ptr<mrc::CompChannel> ch;
  std::vector<mrc_cq*> cqs;  // under ctx->mu
};

// Events handed out for an object and their acknowledgements.
struct EventCount {
  std::mutex m;
  std::condition_variable cv;
  uint64_t got = 0, acked = 0;
  void get() {
    std::lock_guard<std::mutex> lk(m);
    got++;
  }
  void ack(uint64_t n) {
    std::lock_guard<std::mutex> lk(m);
    acked = std::min(got, acked + n);
    cv.notify_all();
  }
  void wait_acked() {
    std::unique_lock<std::mutex> lk(m);
    cv.wait(lk, [&] { return acked >= got; });
  }
};

struct mrc_cq {
  mrc_context* ctx = nullptr;
  std::unique_ptr<mrc::Cq> cq;
  void* cq_context = nullptr;
  mrc_comp_channel* channel = nullptr;
  int cqe = 0;
  uint32_t qp_refs = 0;  // under ctx->mu
  EventCount comp, async;
};

struct mrc_qp_hint {
  mrc_context* ctx = nullptr;
  uint64_t id = 0;
};

struct mrc_qp {
  mrc_context* ctx = nullptr;
  std::unique_ptr<mrc::Qp> qp;
  uint32_t qpn = 0;
  mrc_qp_init_attr init{};
  uint64_t send_ops = 0;  // allowed opcodes (bit per mrc_wr_opcode)
  std::atomic<int> state{MRC_QPS_RESET};
  EventCount async;
};

namespace {

thread_local std::string t_last_error;

int fail(int code, std::string msg) {
  t_last_error = std::move(msg);
  errno = code;
  return -1;
}
int fail(const mrc::Error& e) { return fail(e.code, e.message()); }
template <class T>
T* fail_null(int code, std::string msg) {
  fail(code, std::move(msg));
  return nullptr;
}
template <class T>
T* fail_null(const mrc::Error& e) {
  fail(e);
  return nullptr;
}

const char* state_name(int s) { return core::to_string(core::QpState(s)); }

bool gid_is_zero(const mrc_gid& g) {
  return std::all_of(std::begin(g.raw), std::end(g.raw), [](uint8_t b) { return b == 0; });
}

// RoCEv2 GIDs: IPv4 as ::ffff:a.b.c.d.
mrc_gid ip_to_gid(const mrc::codec::IpAddr& ip) {
  mrc_gid g;
  std::memset(&g, 0, sizeof g);
  if (ip.ver == mrc::codec::IpVersion::kV6) {
    std::memcpy(g.raw, ip.b.data(), 16);
  } else if (!std::all_of(ip.b.begin(), ip.b.begin() + 4, [](uint8_t b) { return b == 0; })) {
    g.raw[10] = g.raw[11] = 0xff;
    std::memcpy(g.raw + 12, ip.b.data(), 4);
  }
  return g;
}

mrc::codec::IpAddr gid_to_ip(const mrc_gid& g) {
  mrc::codec::IpAddr ip;
  static const uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(g.raw, kMapped, 12) == 0) {
    ip.ver = mrc::codec::IpVersion::kV4;
    std::memcpy(ip.b.data(), g.raw + 12, 4);
  } else if (!gid_is_zero(g)) {
    ip.ver = mrc::codec::IpVersion::kV6;
    std::memcpy(ip.b.data(), g.raw, 16);
  }
  return ip;
}

// IP packet bytes around a full-size payload: IP, UDP, BTH, the largest
// data header stack (with TSETH) and the ICRC.
uint32_t packet_overhead(bool v6) {
  uint32_t ext = 0;
  for (unsigned op = MRC_OP_WRITE_FIRST; op <= MRC_OP_WRITE_ONLY_IMM; op++)
    ext = std::max(ext, mrc::codec::ext_header_len(uint8_t(op), true));
  return (v6 ? 40u : 20u) + 8u + uint32_t(sizeof(mrc_bth)) + ext + MRC_ICRC_LEN;
}

constexpr uint32_t kIbvKnown =
    MRC_IBV_QP_STATE | MRC_IBV_QP_CUR_STATE | MRC_IBV_QP_ACCESS_FLAGS | MRC_IBV_QP_PKEY_INDEX |
    MRC_IBV_QP_PORT | MRC_IBV_QP_AV | MRC_IBV_QP_PATH_MTU | MRC_IBV_QP_TIMEOUT |
    MRC_IBV_QP_RETRY_CNT | MRC_IBV_QP_RNR_RETRY | MRC_IBV_QP_RQ_PSN | MRC_IBV_QP_MAX_QP_RD_ATOMIC |
    MRC_IBV_QP_ALT_PATH | MRC_IBV_QP_MIN_RNR_TIMER | MRC_IBV_QP_SQ_PSN |
    MRC_IBV_QP_MAX_DEST_RD_ATOMIC | MRC_IBV_QP_PATH_MIG_STATE | MRC_IBV_QP_CAP |
    MRC_IBV_QP_DEST_QPN;
constexpr uint32_t kMrcKnown = MRC_QP_MAX_WIMM | MRC_QP_MAX_WIMM_DEST | MRC_QP_MPR |
                               MRC_QP_MPR_DEST | MRC_QP_TIMEOUT | MRC_QP_EV_PROFILE_ID |
                               MRC_QP_CC_PROFILE_ID | MRC_QP_HINT | MRC_QP_RETRY_CNT | MRC_QP_CAP |
                               uint32_t(MRC_QP_VENDOR_CFG);
constexpr uint32_t kHintKnown = MRC_QP_HINT_NUM_QPS_PER_PEER | MRC_QP_HINT_NUM_SEND_PEERS |
                                MRC_QP_HINT_NUM_REMOTE_RECV_PEERS |
                                uint32_t(MRC_QP_HINT_VENDOR_CFG);

// The integer in an enum-typed field a C caller filled: C allows any int
// there, C++ may assume the enumerators' range, so read the bytes.
template <class E>
int raw(const E& e) {
  static_assert(sizeof(E) == sizeof(int));
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

bool valid_state(int s) {
  return s == MRC_QPS_RESET || s == MRC_QPS_INIT || s == MRC_QPS_RTR || s == MRC_QPS_RTS ||
         s == MRC_QPS_ERR;
}

template <class T>
void erase_one(std::vector<T*>& v, T* p) {
  v.erase(std::remove(v.begin(), v.end(), p), v.end());
}

template <class T>
bool contains(const std::vector<T*>& v, const T* p) {
  return std::find(v.begin(), v.end(), p) != v.end();
}

void push_event(mrc_context* c, const mrc_async_event& e) {
  std::lock_guard<std::mutex> lk(c->ev_mu);
  c->events.push_back(e);
  uint64_t one = 1;
  (void)!write(c->ev_fd.get(), &one, sizeof one);
}

// Removes queued (not yet returned) events naming an object being destroyed.
template <class Pred>
void purge_events(mrc_context* c, Pred match) {
  std::lock_guard<std::mutex> lk(c->ev_mu);
  for (auto it = c->events.begin(); it != c->events.end();) {
    if (match(*it)) {
      uint64_t v;
      (void)!read(c->ev_fd.get(), &v, sizeof v);
      it = c->events.erase(it);
    } else {
      ++it;
    }
  }
}

void route_event(mrc_device* d, const mrc::AsyncEvent& ev) {
  std::lock_guard<std::mutex> dl(d->mu);
  for (mrc_context* c : d->contexts) {
    std::lock_guard<std::mutex> cl(c->mu);
    mrc_async_event e;
    std::memset(&e, 0, sizeof e);
    switch (ev.type) {
      case mrc::AsyncEventType::kQpFatal:
        for (mrc_qp* q : c->qps)
          if (q->qpn == ev.qpn) {
            e.event_type = MRC_EVENT_QP_FATAL;
            e.element.qp = q;
            q->state.store(MRC_QPS_ERR, std::memory_order_release);
            push_event(c, e);
          }
        break;
      case mrc::AsyncEventType::kCqError:
        for (mrc_cq* q : c->cqs)
          if (q->cq && q->cq->handle() == ev.cq) {
            e.event_type = MRC_EVENT_CQ_ERR;
            e.element.cq = q;
            push_event(c, e);
          }
        break;
      case mrc::AsyncEventType::kPortActive:
      case mrc::AsyncEventType::kPortError:
        e.event_type = ev.type == mrc::AsyncEventType::kPortActive ? MRC_EVENT_PORT_ACTIVE
                                                                   : MRC_EVENT_PORT_ERR;
        e.element.port_num = ev.port;
        push_event(c, e);
        break;
      case mrc::AsyncEventType::kDeviceFatal:
        e.event_type = MRC_EVENT_DEVICE_FATAL;
        push_event(c, e);
        break;
    }
  }
}

void dispatch_loop(mrc_device* d) {
  pollfd p[2] = {{d->ctx->async_fd(), POLLIN, 0}, {d->stop_fd.get(), POLLIN, 0}};
  while (true) {
    int r = poll(p, 2, -1);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 || (p[1].revents & POLLIN)) return;
    mrc::AsyncEvent ev{};
    bool any = false;
    while (d->ctx->get_async_event(ev)) {
      any = true;
      route_event(d, ev);
    }
    if (!any && (p[0].revents & POLLIN)) {
      // A count whose event was taken before the count was written.
      uint64_t v;
      (void)!read(p[0].fd, &v, sizeof v);
    }
  }
}

// The engine's view of a completion, as verbs shows it.
void to_c(const core::Wc& in, mrc_wc& out) {
  out.wr_id = in.wr_id;
  out.status = mrc_wc_status(in.status);
  out.opcode = mrc_wc_opcode(uint8_t(in.opcode));
  out.vendor_err = 0;
  out.byte_len = in.byte_len;
  out.imm_data = htonl(in.imm_data);
  out.qp_num = in.qp_num;
  out.wc_flags = in.wc_flags;
}

int fill_device_attr(mrc_device* d, mrc_device_attr* attr, int* supported, const char* fn) {
  if (!d) return fail(EINVAL, std::string(fn) + ": null device");
  if (!attr) return fail(EINVAL, std::string(fn) + ": null attr");
  const core::DeviceAttr a = d->ctx->query_device();
  std::memset(attr, 0, sizeof *attr);
  attr->mrc_protocol_version = a.protocol_versions;
  attr->wimm_attr.max_wimm = a.max_wimm;
  attr->wimm_attr.max_wimm_dest = a.max_wimm_dest;
  attr->mpr_attr.max_mpr = a.max_mpr;
  attr->mpr_attr.mpr_resolution = a.mpr_resolution;
  attr->qp_attr.max_qp_hint = a.max_qp_hint;
  attr->cap = a.cap;
  if (supported) *supported = 1;
  return 0;
}

mrc::QpHintAttr hint_from_c(const mrc_qp_hint_attr& a) {
  mrc::QpHintAttr h;
  h.num_qps_per_peer = a.num_qps_per_peer;
  h.num_send_peers = a.num_send_peers;
  h.num_remote_recv_peers = a.num_remote_recv_peers;
  return h;
}
bool zero_bytes(const uint8_t* p, size_t n) {
  return std::all_of(p, p + n, [](uint8_t b) { return b == 0; });
}

mrc::QpEndpoint ep_from_c(const mrc_endpoint& e) {
  mrc::QpEndpoint q;
  q.qpn = e.qpn;
  q.psn = e.psn;
  q.addr = e.addr;
  q.len = e.len;
  q.rkey = e.rkey;
  q.max_wimm_dest = e.max_wimm_dest;
  q.mpr_dest = e.mpr_dest;
  q.mtu = e.mtu;
  for (uint32_t i = 0; i < e.num_gids; i++) q.gids.push_back(gid_to_ip(e.gid[i]));
  return q;
}

}  // namespace

extern "C" {

const char* mrc_last_error(void) { return t_last_error.c_str(); }

// ---------------------------------------------------------------------------
// Versions and devices

void mrc_query_version(uint32_t* current_version, uint32_t* last_supported_version,
                       uint32_t* vendor_version, uint32_t* last_supported_vendor_version) {
  const auto v = mrc::Context::query_version();
  if (current_version) *current_version = v[0];
  if (last_supported_version) *last_supported_version = v[1];
  if (vendor_version) *vendor_version = v[2];
  if (last_supported_vendor_version) *last_supported_vendor_version = v[3];
}

struct mrc_device* mrc_open_device(const char* const* ifnames, int num_ifnames,
                                   const struct mrc_device_opts* opts) {
  if (!ifnames || num_ifnames <= 0)
    return fail_null<mrc_device>(EINVAL, "mrc_open_device: no plane interfaces given");
  if (num_ifnames > MRC_MAX_PORTS)
    return fail_null<mrc_device>(
        EINVAL, "mrc_open_device: at most " + std::to_string(MRC_MAX_PORTS) + " plane interfaces");
  mrc::DeviceOptions o;
  for (int i = 0; i < num_ifnames; i++) {
    const char* n = ifnames[i];
    if (!n || !*n)
      return fail_null<mrc_device>(
          EINVAL, "mrc_open_device: interface " + std::to_string(i) + " has no name");
    if (std::strlen(n) >= IFNAMSIZ)
      return fail_null<mrc_device>(EINVAL,
                                   std::string("mrc_open_device: interface name too long: ") + n);
    if (std::find(o.interfaces.begin(), o.interfaces.end(), n) != o.interfaces.end())
      return fail_null<mrc_device>(EINVAL,
                                   std::string("mrc_open_device: interface listed twice: ") + n);
    if (!if_nametoindex(n))
      return fail_null<mrc_device>(ENODEV, std::string("mrc_open_device: no interface ") + n);
    o.interfaces.push_back(n);
  }
  if (opts) {
    const uint32_t known = MRC_DEVICE_NO_MRCD | MRC_DEVICE_BUSY_POLL | MRC_DEVICE_XDP_GENERIC |
                           MRC_DEVICE_PIN_CPU | MRC_DEVICE_APP_PROGRESS | MRC_DEVICE_EXCLUSIVE |
                           MRC_DEVICE_TX_LIVE | MRC_DEVICE_TX_AUTO | MRC_DEVICE_QA_FABRIC;
    if (opts->flags & ~known)
      return fail_null<mrc_device>(EINVAL, "mrc_open_device: unknown flags");
    if ((opts->flags & MRC_DEVICE_TX_LIVE) && (opts->flags & MRC_DEVICE_TX_AUTO))
      return fail_null<mrc_device>(EINVAL,
                                   "mrc_open_device: MRC_DEVICE_TX_LIVE and MRC_DEVICE_TX_AUTO "
                                   "exclude each other");
    if (opts->frame_size && opts->frame_size != 2048 && opts->frame_size != 4096)
      return fail_null<mrc_device>(EINVAL, "mrc_open_device: frame_size must be 2048 or 4096");
    if (opts->frame_chunks > 17)
      return fail_null<mrc_device>(EINVAL, "mrc_open_device: frame_chunks must be 0..17");
    if ((opts->flags & MRC_DEVICE_PIN_CPU) && opts->engine_cpu < 0)
      return fail_null<mrc_device>(EINVAL,
                                   "mrc_open_device: MRC_DEVICE_PIN_CPU needs engine_cpu >= 0");
    if (opts->udp_port) o.udp_port = opts->udp_port;
    if (opts->pin_dir) o.pin_dir = opts->pin_dir;
    o.use_mrcd = !(opts->flags & MRC_DEVICE_NO_MRCD);
    o.busy_poll = opts->flags & MRC_DEVICE_BUSY_POLL;
    o.force_generic = opts->flags & MRC_DEVICE_XDP_GENERIC;
    if (opts->flags & MRC_DEVICE_PIN_CPU) o.engine_cpu = opts->engine_cpu;
    if (opts->flags & MRC_DEVICE_APP_PROGRESS) o.progress = mrc::Progress::kApplication;
    if (opts->flags & MRC_DEVICE_EXCLUSIVE) o.mode = mrc::DeviceMode::kExclusive;
    if (opts->flags & MRC_DEVICE_TX_LIVE) o.tx = mrc::TxBackend::kLive;
    if (opts->flags & MRC_DEVICE_TX_AUTO) o.tx = mrc::TxBackend::kAuto;
    if (opts->flags & MRC_DEVICE_QA_FABRIC) o.engine.cc_qa_fabric = true;  // MRC_ENGINE may undo
    o.queues = opts->queues;
    if (opts->frame_size) o.frame_size = opts->frame_size;
    if (opts->umem_frames) o.umem_frames = opts->umem_frames;
    if (opts->frame_chunks) o.frame_chunks = opts->frame_chunks;
  }
  mrc::UniqueFd stop(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!stop) return fail_null<mrc_device>(errno, "mrc_open_device: eventfd");
  auto c = mrc::Context::open(o);
  if (!c) return fail_null<mrc_device>(std::move(c).error().wrap("mrc_open_device"));
  auto* d = new mrc_device;
  d->ctx = std::move(*c);
  d->ports = d->ctx->ports();
  d->stop_fd = std::move(stop);
  d->dispatcher = std::thread(dispatch_loop, d);
  return d;
}

int mrc_close_device(struct mrc_device* d) {
  if (!d) return fail(EINVAL, "mrc_close_device: null device");
  {
    std::lock_guard<std::mutex> lk(d->mu);
    if (!d->contexts.empty())
      return fail(EBUSY, "mrc_close_device: " + std::to_string(d->contexts.size()) +
                             " context(s) still open");
    if (d->pds)
      return fail(EBUSY, "mrc_close_device: " + std::to_string(d->pds) +
                             " protection domain(s) still allocated");
  }
  uint64_t one = 1;
  (void)!write(d->stop_fd.get(), &one, sizeof one);
  d->dispatcher.join();
  d->stop_fd.reset();
  d->ctx.reset();
  delete d;
  return 0;
}

int mrc_query_device(struct mrc_device* d, struct mrc_device_attr* attr, int* supported) {
  return fill_device_attr(d, attr, supported, "mrc_query_device");
}

int mrc_query_device_ex(struct mrc_device* d, struct mrc_context* c, struct mrc_device_attr* attr,
                        int* supported) {
  if (!c) return fail(EINVAL, "mrc_query_device_ex: null context");
  if (d && c->dev != d)
    return fail(EINVAL, "mrc_query_device_ex: the context belongs to another device");
  return fill_device_attr(d, attr, supported, "mrc_query_device_ex");
}

int mrc_num_ports(struct mrc_device* d) {
  if (!d) return fail(EINVAL, "mrc_num_ports: null device");
  return int(d->ports.size());
}

int mrc_query_port(struct mrc_device* d, uint8_t port, struct mrc_port_attr* attr) {
  if (!d) return fail(EINVAL, "mrc_query_port: null device");
  if (!attr) return fail(EINVAL, "mrc_query_port: null attr");
  if (port == 0 || port > d->ports.size())
    return fail(EINVAL, "mrc_query_port: no port " + std::to_string(port) + " (ports are 1.." +
                            std::to_string(d->ports.size()) + ")");
  const auto live = d->ctx->ports();
  const mrc::PortInfo& p = live[port - 1];
  std::memset(attr, 0, sizeof *attr);
  attr->state = p.link_up ? MRC_PORT_ACTIVE : MRC_PORT_DOWN;
  attr->mtu = p.mtu;
  attr->gid_tbl_len = int(p.addrs.size());
  attr->ifindex = p.ifindex;
  std::snprintf(attr->ifname, sizeof attr->ifname, "%s", p.ifname.c_str());
  std::memcpy(attr->mac, p.mac.data(), 6);
  attr->num_queues = p.queues;
  std::snprintf(attr->xdp_mode, sizeof attr->xdp_mode, "%s", p.xdp_mode.c_str());
  std::snprintf(attr->xsk_mode, sizeof attr->xsk_mode, "%s", p.xsk_mode.c_str());
  return 0;
}

int mrc_query_gid(struct mrc_device* d, uint8_t port, int index, union mrc_gid* gid) {
  if (!d) return fail(EINVAL, "mrc_query_gid: null device");
  if (!gid) return fail(EINVAL, "mrc_query_gid: null gid");
  if (port == 0 || port > d->ports.size())
    return fail(EINVAL, "mrc_query_gid: no port " + std::to_string(port));
  if (index < 0) return fail(EINVAL, "mrc_query_gid: negative index");
  const auto& addrs = d->ports[port - 1].addrs;
  if (size_t(index) >= addrs.size())
    return fail(ENOENT, "mrc_query_gid: port " + std::to_string(port) + " has " +
                            std::to_string(addrs.size()) + " GID(s)");
  *gid = ip_to_gid(addrs[size_t(index)]);
  return 0;
}

int mrc_query_path_mtu(struct mrc_device* d, int ip_version, uint32_t* path_mtu) {
  if (!d) return fail(EINVAL, "mrc_query_path_mtu: null device");
  if (!path_mtu) return fail(EINVAL, "mrc_query_path_mtu: null path_mtu");
  if (ip_version != 4 && ip_version != 6)
    return fail(EINVAL,
                "mrc_query_path_mtu: ip_version " + std::to_string(ip_version) + " (4 or 6)");
  auto lim = d->ctx->path_mtu_limit(ip_version == 6 ? mrc::codec::IpVersion::kV6
                                                    : mrc::codec::IpVersion::kV4);
  if (!lim) return fail(std::move(lim).error().wrap("mrc_query_path_mtu"));
  *path_mtu = *lim;
  return 0;
}

// ---------------------------------------------------------------------------
// Contexts

struct mrc_context* mrc_create_context(struct mrc_device* d, struct mrc_context_attr* attr) {
  if (!d) return fail_null<mrc_context>(EINVAL, "mrc_create_context: null device");
  uint32_t api = MRC_API_CURRENT_VERSION, vendor = MRC_VENDOR_API_CURRENT_VERSION;
  if (attr) {
    const uint32_t a = attr->mrc_api_version_used, v = attr->mrc_vendor_api_version_used;
    if (a && a != MRC_API_VER_LATEST) {
      if (a < MRC_API_LAST_SUPPORTED_VERSION || a > MRC_API_CURRENT_VERSION)
        return fail_null<mrc_context>(
            ENOTSUP, "mrc_create_context: API version " + std::to_string(a >> 24) + "." +
                         std::to_string(a >> 16 & 0xff) + "." + std::to_string(a & 0xffff) +
                         " is not supported (1.0.0 to 1.0.1)");
      api = a;
    }
    if (v && v != MRC_API_VER_LATEST) {
      if (v < MRC_VENDOR_API_LAST_SUPPORTED_VERSION || v > MRC_VENDOR_API_CURRENT_VERSION)
        return fail_null<mrc_context>(
            ENOTSUP, "mrc_create_context: vendor API version not supported (0.1.0)");
      vendor = v;
    }
  }
  mrc::UniqueFd fd(eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE));
  if (!fd) return fail_null<mrc_context>(errno, "mrc_create_context: eventfd");
  auto* c = new mrc_context;
  c->dev = d;
  c->api_version = api;
  c->vendor_api_version = vendor;
  c->ev_fd = std::move(fd);
  std::lock_guard<std::mutex> lk(d->mu);
  d->contexts.push_back(c);
  return c;
}

int mrc_destroy_context(struct mrc_context* c) {
  if (!c) return fail(EINVAL, "mrc_destroy_context: null context");
  mrc_device* d = c->dev;
  {
    std::lock_guard<std::mutex> lk(d->mu);
    if (!contains(d->contexts, c)) return fail(EINVAL, "mrc_destroy_context: not an open context");
    erase_one(d->contexts, c);  // no more events routed here
  }
  {
    std::lock_guard<std::mutex> lk(c->mu);
    for (mrc_qp* q : c->qps) {
      (void)d->ctx->destroy_qp(std::move(q->qp));
      delete q;
    }
    for (mrc_cq* q : c->cqs) {
      (void)d->ctx->destroy_cq(std::move(q->cq));
      delete q;
    }
    for (mrc_qp_hint* h : c->hints) {
      (void)d->ctx->destroy_qp_hint(h->id);
      delete h;
    }
    for (mrc_comp_channel* ch : c->channels) delete ch;
  }
  delete c;  // closes ev_fd
  return 0;
}

// ---------------------------------------------------------------------------
// PDs and MRs

struct mrc_pd* mrc_alloc_pd(struct mrc_device* d) {
  if (!d) return fail_null<mrc_pd>(EINVAL, "mrc_alloc_pd: null device");
  auto h = d->ctx->alloc_pd();
  if (!h) return fail_null<mrc_pd>(h.error());
  auto* pd = new mrc_pd;
  pd->dev = d;
  pd->handle = *h;
  std::lock_guard<std::mutex> lk(d->mu);
  d->pds++;
  return pd;
}

int mrc_dealloc_pd(struct mrc_pd* pd) {
  if (!pd) return fail(EINVAL, "mrc_dealloc_pd: null PD");
  if (auto s = pd->dev->ctx->dealloc_pd(pd->handle); !s) return fail(s.error());
  {
    std::lock_guard<std::mutex> lk(pd->dev->mu);
    pd->dev->pds--;
  }
  delete pd;
  return 0;
}

struct mrc_mr* mrc_reg_mr(struct mrc_pd* pd, void* addr, size_t length, int access) {
  if (!pd) return fail_null<mrc_mr>(EINVAL, "mrc_reg_mr: null PD");
  if (access < 0) return fail_null<mrc_mr>(EINVAL, "mrc_reg_mr: unknown access flags");
  auto r = pd->dev->ctx->reg_mr(pd->handle, addr, length, uint32_t(access));
  if (!r) return fail_null<mrc_mr>(r.error());
  auto* mr = new mrc_mr;
  mr->device = pd->dev;
  mr->pd = pd;
  mr->addr = addr;
  mr->length = length;
  mr->lkey = r->lkey;
  mr->rkey = r->rkey;
  return mr;
}

int mrc_dereg_mr(struct mrc_mr* mr) {
  if (!mr) return fail(EINVAL, "mrc_dereg_mr: null MR");
  mrc::MemoryRegion m{mr->addr, mr->length, mr->lkey, mr->rkey};
  if (auto s = mr->device->ctx->dereg_mr(m); !s) return fail(s.error());
  delete mr;
  return 0;
}

void* mrc_alloc_buf(size_t length) {
  auto r = mrc::alloc_buf(length);
  if (!r) return fail_null<void>(r.error());
  return *r;
}

int mrc_free_buf(void* buf, size_t length) {
  if (auto s = mrc::free_buf(buf, length); !s) return fail(s.error());
  return 0;
}

// ---------------------------------------------------------------------------
// Completion channels and CQs

int mrc_create_comp_channel(struct mrc_context* c, struct mrc_comp_channel** channel) {
  if (!c) return fail(EINVAL, "mrc_create_comp_channel: null context");
  if (!channel) return fail(EINVAL, "mrc_create_comp_channel: null channel pointer");
  auto ch = c->dev->ctx->create_comp_channel();
  if (!ch) return fail(ch.error());
  auto* w = new mrc_comp_channel;
  w->ctx = c;
  w->ch = std::move(*ch);
  std::lock_guard<std::mutex> lk(c->mu);
  c->channels.push_back(w);
  *channel = w;
  return 0;
}

int mrc_get_comp_channel_fd(struct mrc_comp_channel* channel, int* fd) {
  if (!channel) return fail(EINVAL, "mrc_get_comp_channel_fd: null channel");
  if (!fd) return fail(EINVAL, "mrc_get_comp_channel_fd: null fd pointer");
  *fd = channel->ch->fd();
  return 0;
}

int mrc_destroy_comp_channel(struct mrc_comp_channel* channel) {
  if (!channel) return fail(EINVAL, "mrc_destroy_comp_channel: null channel");
  mrc_context* c = channel->ctx;
  {
    std::lock_guard<std::mutex> lk(c->mu);
    if (!channel->cqs.empty())
      return fail(EBUSY, "mrc_destroy_comp_channel: " + std::to_string(channel->cqs.size()) +
                             " CQ(s) still use it");
    erase_one(c->channels, channel);
  }
  delete channel;
  return 0;
}

struct mrc_cq* mrc_create_cq(struct mrc_context* c, int cqe, void* cq_context,
                             struct mrc_comp_channel* channel, int comp_vector) {
  if (!c) return fail_null<mrc_cq>(EINVAL, "mrc_create_cq: null context");
  if (cqe <= 0) return fail_null<mrc_cq>(EINVAL, "mrc_create_cq: cqe must be 1..4194304");
  if (comp_vector != 0)
    return fail_null<mrc_cq>(EINVAL, "mrc_create_cq: comp_vector must be 0 (one engine thread)");
  if (channel && channel->ctx != c)
    return fail_null<mrc_cq>(EINVAL,
                             "mrc_create_cq: the completion channel belongs to another context");
  std::lock_guard<std::mutex> lk(c->mu);
  auto q = c->dev->ctx->create_cq(uint32_t(cqe), channel ? channel->ch.get() : nullptr);
  if (!q) return fail_null<mrc_cq>(q.error());
  auto* w = new mrc_cq;
  w->ctx = c;
  w->cq = std::move(*q);
  w->cq_context = cq_context;
  w->channel = channel;
  w->cqe = cqe;
  c->cqs.push_back(w);
  if (channel) channel->cqs.push_back(w);
  return w;
}

int mrc_destroy_cq(struct mrc_cq* cq) {
  if (!cq) return fail(EINVAL, "mrc_destroy_cq: null CQ");
  mrc_context* c = cq->ctx;
  {
    std::lock_guard<std::mutex> lk(c->mu);
    if (cq->qp_refs)
      return fail(EBUSY, "mrc_destroy_cq: " + std::to_string(cq->qp_refs) + " QP(s) still use it");
  }
  // As verbs: every event handed out must be acknowledged first.
  cq->comp.wait_acked();
  cq->async.wait_acked();
  {
    std::lock_guard<std::mutex> lk(c->mu);
    if (auto s = c->dev->ctx->destroy_cq(std::move(cq->cq)); !s) return fail(s.error());
    erase_one(c->cqs, cq);
    if (cq->channel) erase_one(cq->channel->cqs, cq);
  }
  purge_events(c, [cq](const mrc_async_event& e) {
    return e.event_type == MRC_EVENT_CQ_ERR && e.element.cq == cq;
  });
  delete cq;
  return 0;
}

int mrc_progress(struct mrc_device* d, int timeout_ms) {
  if (!d) return fail(EINVAL, "mrc_progress: null device");
  auto r = d->ctx->progress(timeout_ms);
  if (!r) return fail(std::move(r).error().wrap("mrc_progress"));
  return *r ? 1 : 0;
}

namespace {
// A sentence into the caller's buffer (none when out is NULL or len 0),
// cut to len bytes with its NUL.
void copy_sentence(const std::string& s, char* out, size_t len) {
  if (!out || !len) return;
  const size_t n = std::min(len - 1, s.size());
  std::memcpy(out, s.data(), n);
  out[n] = 0;
}
}  // namespace

int mrc_device_mode(struct mrc_device* d, char* why, size_t len) {
  if (!d) return fail(EINVAL, "mrc_device_mode: null device");
  copy_sentence(d->ctx->mode_reason(), why, len);
  return d->ctx->mode() == mrc::DeviceMode::kService ? MRC_DEVICE_MODE_SERVICE
                                                     : MRC_DEVICE_MODE_EXCLUSIVE;
}

int mrc_device_tx(struct mrc_device* d, char* note, size_t len) {
  if (!d) return fail(EINVAL, "mrc_device_tx: null device");
  copy_sentence(d->ctx->tx_note(), note, len);
  return d->ctx->tx_backend() == mrc::TxBackend::kLive ? MRC_DEVICE_TX_KIND_LIVE
                                                       : MRC_DEVICE_TX_KIND_XSK;
}

int mrc_poll_cq(struct mrc_cq* cq, int num_entries, struct mrc_wc* wc) {
  if (!cq) return fail(EINVAL, "mrc_poll_cq: null CQ");
  if (num_entries < 0) return fail(EINVAL, "mrc_poll_cq: negative num_entries");
  if (num_entries > 0 && !wc) return fail(EINVAL, "mrc_poll_cq: null wc array");
  core::Wc buf[64];
  int got = 0;
  while (got < num_entries) {
    const size_t want = std::min<size_t>(64, size_t(num_entries - got));
    auto r = cq->cq->poll({buf, want});
    if (!r) {
      if (got) break;
      return fail(r.error());
    }
    for (size_t i = 0; i < *r; i++) to_c(buf[i], wc[got + int(i)]);
    got += int(*r);
    if (*r < want) break;
  }
  return got;
}

int mrc_req_notify_cq(struct mrc_cq* cq, int solicited_only) {
  if (!cq) return fail(EINVAL, "mrc_req_notify_cq: null CQ");
  if (solicited_only) return fail(EOPNOTSUPP, "mrc_req_notify_cq: MRC has no solicited events");
  if (!cq->channel) return fail(EINVAL, "mrc_req_notify_cq: the CQ has no completion channel");
  if (auto s = cq->cq->req_notify(); !s) return fail(s.error());
  return 0;
}

int mrc_get_cq_event(struct mrc_comp_channel* channel, struct mrc_cq** cq, void** cq_context) {
  if (!channel) return fail(EINVAL, "mrc_get_cq_event: null channel");
  if (!cq) return fail(EINVAL, "mrc_get_cq_event: null CQ pointer");
  mrc_context* c = channel->ctx;
  while (true) {
    auto r = channel->ch->get_event();
    if (!r) return fail(r.error());
    std::lock_guard<std::mutex> lk(c->mu);
    for (mrc_cq* w : channel->cqs)
      if (w->cq.get() == *r) {
        w->comp.get();
        *cq = w;
        if (cq_context) *cq_context = w->cq_context;
        return 0;
      }
    // An event of a CQ destroyed since: not the application's any more.
  }
}

void mrc_ack_cq_events(struct mrc_cq* cq, unsigned int nevents) {
  if (cq) cq->comp.ack(nevents);
}

// ---------------------------------------------------------------------------
// QP hints

struct mrc_qp_hint* mrc_create_qp_hint(struct mrc_context* c, struct mrc_qp_hint_init_attr* init) {
  if (!c) return fail_null<mrc_qp_hint>(EINVAL, "mrc_create_qp_hint: null context");
  if (!init) return fail_null<mrc_qp_hint>(EINVAL, "mrc_create_qp_hint: null init_attr");
  if (!zero_bytes(init->attr.vendor_cfg, MRC_MAX_VENDOR_CFG_SIZE))
    return fail_null<mrc_qp_hint>(
        EINVAL, "mrc_create_qp_hint: no vendor configuration is defined (vendor_cfg must be zero)");
  std::lock_guard<std::mutex> lk(c->mu);
  auto id = c->dev->ctx->create_qp_hint(hint_from_c(init->attr));
  if (!id) return fail_null<mrc_qp_hint>(id.error());
  auto* h = new mrc_qp_hint;
  h->ctx = c;
  h->id = *id;
  c->hints.push_back(h);
  return h;
}

int mrc_destroy_qp_hint(struct mrc_qp_hint* h) {
  if (!h) return fail(EINVAL, "mrc_destroy_qp_hint: null hint");
  mrc_context* c = h->ctx;
  {
    std::lock_guard<std::mutex> lk(c->mu);
    if (auto s = c->dev->ctx->destroy_qp_hint(h->id); !s) return fail(s.error());
    erase_one(c->hints, h);
  }
  delete h;
  return 0;
}

int mrc_query_qp_hint(struct mrc_qp_hint* h, struct mrc_qp_hint_attr* attr, int mask) {
  if (!h) return fail(EINVAL, "mrc_query_qp_hint: null hint");
  if (!attr) return fail(EINVAL, "mrc_query_qp_hint: null attr");
  if (uint32_t(mask) & ~kHintKnown)
    return fail(EINVAL, "mrc_query_qp_hint: unknown attribute mask bits");
  auto a = h->ctx->dev->ctx->query_qp_hint(h->id);
  if (!a) return fail(a.error());
  if (mask & MRC_QP_HINT_NUM_QPS_PER_PEER) attr->num_qps_per_peer = a->num_qps_per_peer;
  if (mask & MRC_QP_HINT_NUM_SEND_PEERS) attr->num_send_peers = a->num_send_peers;
  if (mask & MRC_QP_HINT_NUM_REMOTE_RECV_PEERS)
    attr->num_remote_recv_peers = a->num_remote_recv_peers;
  if (uint32_t(mask) & uint32_t(MRC_QP_HINT_VENDOR_CFG))
    std::memset(attr->vendor_cfg, 0, sizeof attr->vendor_cfg);
  return 0;
}

int mrc_modify_qp_hint(struct mrc_qp_hint* h, struct mrc_qp_hint_attr* attr, int mask) {
  if (!h) return fail(EINVAL, "mrc_modify_qp_hint: null hint");
  if (!attr) return fail(EINVAL, "mrc_modify_qp_hint: null attr");
  if (uint32_t(mask) & ~kHintKnown)
    return fail(EINVAL, "mrc_modify_qp_hint: unknown attribute mask bits");
  if (auto s = h->ctx->dev->ctx->modify_qp_hint(h->id, hint_from_c(*attr), uint32_t(mask)); !s)
    return fail(s.error());
  return 0;
}

// ---------------------------------------------------------------------------
// QPs

struct mrc_qp* mrc_create_qp(struct mrc_context* c, struct mrc_qp_init_attr* a) {
  if (!c) return fail_null<mrc_qp>(EINVAL, "mrc_create_qp: null context");
  if (!a) return fail_null<mrc_qp>(EINVAL, "mrc_create_qp: null init_attr");
  if (!a->send_cq || !a->recv_cq)
    return fail_null<mrc_qp>(EINVAL, "mrc_create_qp: send_cq and recv_cq are required");
  if (a->send_cq->ctx != c || a->recv_cq->ctx != c)
    return fail_null<mrc_qp>(EINVAL, "mrc_create_qp: a CQ belongs to another context");
  if (!a->pd) return fail_null<mrc_qp>(EINVAL, "mrc_create_qp: pd is required");
  if (a->pd->dev != c->dev)
    return fail_null<mrc_qp>(EINVAL, "mrc_create_qp: the PD belongs to another device");
  if (a->cap.max_inline_data)
    return fail_null<mrc_qp>(
        EINVAL, "mrc_create_qp: inline data is not supported (max_inline_data must be 0)");
  if (a->cap.max_recv_sge > MRC_MAX_SGE)
    return fail_null<mrc_qp>(
        EINVAL, "mrc_create_qp: max_recv_sge must be 0.." + std::to_string(MRC_MAX_SGE));
  if (raw(a->protocol_version) != MRC_PROTOCOL_VERSION_0 &&
      raw(a->protocol_version) != MRC_PROTOCOL_VERSION_1)
    return fail_null<mrc_qp>(EINVAL, "mrc_create_qp: unsupported protocol version");
  if (a->send_ops_flags & ~uint64_t(MRC_QP_EX_WITH_RDMA_WRITE | MRC_QP_EX_WITH_RDMA_WRITE_WITH_IMM))
    return fail_null<mrc_qp>(
        EINVAL, "mrc_create_qp: only RDMA_WRITE and RDMA_WRITE_WITH_IMM send ops are supported");
  core::QpInitAttr init;
  init.pd = a->pd->handle;
  init.cap.max_send_wr = a->cap.max_send_wr;
  init.cap.max_recv_wr = a->cap.max_recv_wr;
  init.cap.max_send_sge = a->cap.max_send_sge;
  init.cap.max_recv_sge = a->cap.max_recv_sge;
  init.sq_sig_all = a->sq_sig_all != 0;
  init.send_ops_flags = a->send_ops_flags;
  init.protocol_version = uint32_t(raw(a->protocol_version));
  std::lock_guard<std::mutex> lk(c->mu);
  auto q = c->dev->ctx->create_qp(init, *a->send_cq->cq, *a->recv_cq->cq);
  if (!q) return fail_null<mrc_qp>(q.error());
  auto* w = new mrc_qp;
  w->ctx = c;
  w->qpn = (*q)->qpn();
  w->qp = std::move(*q);
  w->init = *a;
  w->send_ops = a->send_ops_flags
                    ? a->send_ops_flags
                    : (MRC_QP_EX_WITH_RDMA_WRITE | MRC_QP_EX_WITH_RDMA_WRITE_WITH_IMM);
  a->send_cq->qp_refs++;
  a->recv_cq->qp_refs++;
  c->qps.push_back(w);
  return w;
}

int mrc_destroy_qp(struct mrc_qp* qp) {
  if (!qp) return fail(EINVAL, "mrc_destroy_qp: null QP");
  mrc_context* c = qp->ctx;
  {
    std::lock_guard<std::mutex> lk(c->mu);
    if (auto s = c->dev->ctx->destroy_qp(std::move(qp->qp)); !s) return fail(s.error());
    erase_one(c->qps, qp);
    qp->init.send_cq->qp_refs--;
    qp->init.recv_cq->qp_refs--;
  }
  purge_events(c, [qp](const mrc_async_event& e) {
    return e.event_type == MRC_EVENT_QP_FATAL && e.element.qp == qp;
  });
  qp->async.wait_acked();
  delete qp;
  return 0;
}

int mrc_get_qpn(struct mrc_qp* qp, uint32_t* qpn) {
  if (!qp) return fail(EINVAL, "mrc_get_qpn: null QP");
  if (!qpn) return fail(EINVAL, "mrc_get_qpn: null qpn pointer");
  *qpn = qp->qpn;
  return 0;
}

int mrc_query_qp(struct mrc_qp* qp, struct mrc_ibv_qp_attr* vattr, int vattr_mask,
                 struct mrc_qp_attr* mattr, int mrc_attr_mask, struct mrc_qp_init_attr* init_attr) {
  if (!qp) return fail(EINVAL, "mrc_query_qp: null QP");
  if (uint32_t(vattr_mask) & ~kIbvKnown)
    return fail(EINVAL, "mrc_query_qp: unknown verbs attribute mask bits");
  if (uint32_t(mrc_attr_mask) & ~kMrcKnown)
    return fail(EINVAL, "mrc_query_qp: unknown MRC attribute mask bits");
  if (vattr_mask && !vattr) return fail(EINVAL, "mrc_query_qp: vattr_mask without vattr");
  if (mrc_attr_mask && !mattr) return fail(EINVAL, "mrc_query_qp: mrc_attr_mask without mrc_attr");
  auto r = qp->qp->query();
  if (!r) return fail(r.error());
  const core::QpAttr& a = *r;
  qp->state.store(int(a.qp_state), std::memory_order_release);
  if (vattr) {
    std::memset(vattr, 0, sizeof *vattr);
    vattr->qp_state = mrc_qp_state(a.qp_state);
    vattr->cur_qp_state = mrc_qp_state(a.cur_qp_state);
    vattr->path_mtu = a.path_mtu;
    vattr->qp_access_flags = a.qp_access_flags;
    vattr->pkey_index = a.pkey_index;
    vattr->rq_psn = a.rq_psn;
    vattr->sq_psn = a.sq_psn;
    vattr->dest_qp_num = a.dest_qp_num;
    vattr->cap = qp->init.cap;
    for (size_t p = 1; p <= MRC_MAX_PORTS; p++)
      if (a.av[p].valid) vattr->ah_attr.dgid[p - 1] = ip_to_gid(a.av[p].ip);
    vattr->ah_attr.peer_max_wimm_dest = a.peer_max_wimm_dest;
  }
  if (mattr) {
    std::memset(mattr, 0, sizeof *mattr);
    mattr->mpr.mpr = a.mpr;
    mattr->mpr.mpr_dest = a.mpr_dest;
    mattr->wimm.max_wimm = a.max_wimm;
    mattr->wimm.max_wimm_dest = a.max_wimm_dest;
    mattr->timeout = a.timeout;
    mattr->profile.ev_profile_id = a.ev_profile_id;
    mattr->profile.cc_profile_id = a.cc_profile_id;
    mattr->retry.linear_cnt = a.retry_linear;
    mattr->retry.exp_cnt = a.retry_exp;
    mattr->cap = a.cap_flags;
    if (a.hint) {
      std::lock_guard<std::mutex> lk(qp->ctx->mu);
      for (mrc_qp_hint* h : qp->ctx->hints)
        if (h->id == a.hint) mattr->qp_hint = h;
    }
  }
  if (init_attr) *init_attr = qp->init;
  return 0;
}

int mrc_modify_qp(struct mrc_qp* qp, struct mrc_ibv_qp_attr* v, int vattr_mask,
                  struct mrc_qp_attr* m, int mrc_attr_mask) {
  if (!qp) return fail(EINVAL, "mrc_modify_qp: null QP");
  const uint32_t vm = uint32_t(vattr_mask), mm = uint32_t(mrc_attr_mask);
  const std::string who = "mrc_modify_qp " + std::to_string(qp->qpn);
  if (vm & ~kIbvKnown) return fail(EINVAL, who + ": unknown verbs attribute mask bits");
  if (mm & ~kMrcKnown) return fail(EINVAL, who + ": unknown MRC attribute mask bits");
  if (vm && !v) return fail(EINVAL, who + ": vattr_mask without vattr");
  if (mm && !m) return fail(EINVAL, who + ": mrc_attr_mask without mrc_attr");
  mrc_device* d = qp->ctx->dev;
  core::QpAttr a;
  if (v) {
    if ((vm & MRC_IBV_QP_STATE) && !valid_state(raw(v->qp_state)))
      return fail(EINVAL, who + ": qp_state must be RESET, INIT, RTR, RTS or ERR");
    if ((vm & MRC_IBV_QP_CUR_STATE) && !valid_state(raw(v->cur_qp_state)))
      return fail(EINVAL, who + ": cur_qp_state must be RESET, INIT, RTR, RTS or ERR");
    if ((vm & MRC_IBV_QP_PKEY_INDEX) && v->pkey_index != 0)
      return fail(EINVAL, who + ": the P_Key table has one entry (pkey_index 0)");
    if ((vm & MRC_IBV_QP_RQ_PSN) && v->rq_psn > MRC_PSN_MASK)
      return fail(EINVAL, who + ": rq_psn is 24 bits");
    if ((vm & MRC_IBV_QP_SQ_PSN) && v->sq_psn > MRC_PSN_MASK)
      return fail(EINVAL, who + ": sq_psn is 24 bits");
    a.qp_state = core::QpState(raw(v->qp_state));
    a.cur_qp_state = core::QpState(raw(v->cur_qp_state));
    a.qp_access_flags = v->qp_access_flags;
    a.pkey_index = v->pkey_index;
    a.path_mtu = v->path_mtu;
    a.rq_psn = v->rq_psn;
    a.sq_psn = v->sq_psn;
    a.dest_qp_num = v->dest_qp_num;
  }
  if (m) {
    if ((mm & uint32_t(MRC_QP_VENDOR_CFG)))
      return fail(EINVAL, who + ": no vendor configuration is defined (MRC_QP_VENDOR_CFG)");
    if ((mm & MRC_QP_HINT) && m->qp_hint && m->qp_hint->ctx != qp->ctx)
      return fail(EINVAL, who + ": the QP hint belongs to another context");
    a.mpr = m->mpr.mpr;
    a.mpr_dest = m->mpr.mpr_dest;
    a.max_wimm = m->wimm.max_wimm;
    a.max_wimm_dest = m->wimm.max_wimm_dest;
    a.timeout = m->timeout;
    a.ev_profile_id = m->profile.ev_profile_id;
    a.cc_profile_id = m->profile.cc_profile_id;
    a.retry_linear = m->retry.linear_cnt;
    a.retry_exp = m->retry.exp_cnt;
    a.hint = m->qp_hint ? m->qp_hint->id : 0;
    a.cap_flags = m->cap;
  }
  // The address vector: a GID per plane, next hops resolved here.
  bool v6 = false;
  std::vector<uint8_t> av_ports;
  if (vm & MRC_IBV_QP_AV) {
    bool any = false, v4 = false;
    for (size_t p = 1; p <= MRC_MAX_PORTS; p++) {
      const mrc_gid& g = v->ah_attr.dgid[p - 1];
      if (gid_is_zero(g)) continue;
      if (p > d->ports.size())
        return fail(EINVAL, who + ": the AV names port " + std::to_string(p) +
                                " but the device has " + std::to_string(d->ports.size()));
      const mrc::codec::IpAddr ip = gid_to_ip(g);
      (ip.ver == mrc::codec::IpVersion::kV6 ? v6 : v4) = true;
      const auto& addrs = d->ports[p - 1].addrs;
      if (std::none_of(addrs.begin(), addrs.end(), [&](const auto& x) { return x.ver == ip.ver; }))
        return fail(EINVAL, who + ": port " + std::to_string(p) + " (" + d->ports[p - 1].ifname +
                                ") has no " +
                                (ip.ver == mrc::codec::IpVersion::kV6 ? "IPv6" : "IPv4") +
                                " address");
      any = true;
      av_ports.push_back(uint8_t(p));
    }
    if (!any) return fail(EINVAL, who + ": the AV has no GID (dgid[port - 1]) on any plane");
    if (v4 && v6) return fail(EINVAL, who + ": the AV mixes IPv4 and IPv6 GIDs");
    a.peer_max_wimm_dest = v->ah_attr.peer_max_wimm_dest;
  }
  // Path MTU against the plane interfaces' MTU (frames above it are dropped).
  if (vm & (MRC_IBV_QP_PATH_MTU | MRC_IBV_QP_AV)) {
    auto cur = qp->qp->query();
    if (!cur) return fail(cur.error());
    const uint32_t mtu = (vm & MRC_IBV_QP_PATH_MTU) ? v->path_mtu : cur->path_mtu;
    if (!(vm & MRC_IBV_QP_AV)) {
      for (size_t p = 1; p <= MRC_MAX_PORTS; p++)
        if (cur->av[p].valid) {
          av_ports.push_back(uint8_t(p));
          v6 = cur->av[p].ip.ver == mrc::codec::IpVersion::kV6;
        }
    }
    const uint32_t over = packet_overhead(v6);
    for (uint8_t p : av_ports) {
      const mrc::PortInfo& pi = d->ports[p - 1];
      if (pi.mtu && mtu + over > pi.mtu)
        return fail(EINVAL, who + ": path_mtu " + std::to_string(mtu) + " + " +
                                std::to_string(over) + " header bytes exceeds the MTU " +
                                std::to_string(pi.mtu) + " of " + pi.ifname);
    }
    // What one packet of the device carries: single-buffer AF_XDP receives
    // a frame within one page and loses every larger one, whatever the
    // interfaces' MTU (live frames and multi-buffer clamp path_mtu to their
    // limit in Qp::modify instead). The device's limit binds when it is below
    // what the planes alone carry.
    const auto ver = v6 ? mrc::codec::IpVersion::kV6 : mrc::codec::IpVersion::kV4;
    const auto lim = d->ctx->path_mtu_limit(ver);
    const auto planes = d->ctx->plane_mtu_limit(ver);
    if (!d->ports.empty() && d->ports[0].max_path_mtu == 0 && lim && planes && *lim < *planes &&
        mtu > *lim)
      return fail(EINVAL, who + ": path_mtu " + std::to_string(mtu) + " exceeds the " +
                              std::to_string(*lim) +
                              " a single-buffer AF_XDP device receives in one frame "
                              "(mrc_query_path_mtu; mrc_device_opts.frame_chunks carries more)");
  }
  if (vm & MRC_IBV_QP_AV) {
    for (uint8_t p : av_ports) {
      auto pa = d->ctx->resolve(p, gid_to_ip(v->ah_attr.dgid[p - 1]));
      if (!pa) return fail(std::move(pa).error().wrap(who));
      a.av[p] = *pa;
    }
  }
  if (auto s = qp->qp->modify(a, vm, mm); !s) return fail(s.error());
  if (auto q = qp->qp->query(); q.ok())
    qp->state.store(int(q->qp_state), std::memory_order_release);
  return 0;
}

// ---------------------------------------------------------------------------
// Work requests

int mrc_post_send(struct mrc_qp* qp, struct mrc_send_wr* wr, struct mrc_send_wr** bad_wr) {
  if (bad_wr) *bad_wr = nullptr;
  if (!qp) return fail(EINVAL, "mrc_post_send: null QP");
  if (!wr) return fail(EINVAL, "mrc_post_send: null work request");
  const int st = qp->state.load(std::memory_order_acquire);
  auto bad = [&](mrc_send_wr* w, const char* why) {
    if (bad_wr) *bad_wr = w;
    return fail(EINVAL, "mrc_post_send on QP " + std::to_string(qp->qpn) + ", wr_id " +
                            std::to_string(w->wr_id) + ": " + why);
  };
  for (mrc_send_wr* w = wr; w; w = w->next) {
    if (st != MRC_QPS_RTS && st != MRC_QPS_ERR) {
      if (bad_wr) *bad_wr = w;
      return fail(EINVAL, "mrc_post_send: QP " + std::to_string(qp->qpn) + " is in " +
                              state_name(st) + " (sending needs RTS)");
    }
    if (raw(w->opcode) != MRC_WR_RDMA_WRITE && raw(w->opcode) != MRC_WR_RDMA_WRITE_WITH_IMM)
      return bad(w, "only RDMA_WRITE and RDMA_WRITE_WITH_IMM are supported");
    if (!(qp->send_ops & (uint64_t(1) << raw(w->opcode))))
      return bad(w, "opcode not enabled in send_ops_flags");
    if (w->send_flags & ~unsigned(MRC_SEND_SIGNALED))
      return bad(w, "only the SIGNALED send flag is supported");
    if (w->num_sge < 0 || uint32_t(w->num_sge) > qp->init.cap.max_send_sge)
      return bad(w, "num_sge exceeds max_send_sge");
    if (w->num_sge && !w->sg_list) return bad(w, "null sg_list");
    uint64_t total = 0;
    for (int i = 0; i < w->num_sge; i++) total += w->sg_list[i].length;
    if (total > 0x80000000ull) return bad(w, "message longer than 2 GiB");
  }
  for (mrc_send_wr* w = wr; w; w = w->next) {
    core::Sge sg[MRC_MAX_SGE];
    for (int i = 0; i < w->num_sge; i++)
      sg[i] = {w->sg_list[i].addr, w->sg_list[i].length, w->sg_list[i].lkey};
    core::SendWr s;
    s.wr_id = w->wr_id;
    s.opcode = raw(w->opcode) == MRC_WR_RDMA_WRITE_WITH_IMM ? core::WrOpcode::kRdmaWriteWithImm
                                                            : core::WrOpcode::kRdmaWrite;
    s.send_flags = w->send_flags;
    s.sg_list = sg;
    s.num_sge = uint32_t(w->num_sge);
    s.remote_addr = w->wr.rdma.remote_addr;
    s.rkey = w->wr.rdma.rkey;
    s.imm_data = ntohl(w->imm_data);
    if (auto r = qp->qp->post_send(s); !r) {
      if (bad_wr) *bad_wr = w;
      return fail(r.error());
    }
  }
  return 0;
}

int mrc_post_recv(struct mrc_qp* qp, struct mrc_recv_wr* wr, struct mrc_recv_wr** bad_wr) {
  if (bad_wr) *bad_wr = nullptr;
  if (!qp) return fail(EINVAL, "mrc_post_recv: null QP");
  if (!wr) return fail(EINVAL, "mrc_post_recv: null work request");
  const int st = qp->state.load(std::memory_order_acquire);
  for (mrc_recv_wr* w = wr; w; w = w->next) {
    const char* why = nullptr;
    if (st == MRC_QPS_RESET)
      why = "the QP is in RESET";
    else if (w->num_sge < 0 || uint32_t(w->num_sge) > qp->init.cap.max_recv_sge)
      why = "num_sge exceeds max_recv_sge";
    else if (w->num_sge && !w->sg_list)
      why = "null sg_list";
    if (why) {
      if (bad_wr) *bad_wr = w;
      return fail(EINVAL, "mrc_post_recv on QP " + std::to_string(qp->qpn) + ", wr_id " +
                              std::to_string(w->wr_id) + ": " + why);
    }
  }
  for (mrc_recv_wr* w = wr; w; w = w->next) {
    core::RecvWr r;
    r.wr_id = w->wr_id;
    if (auto s = qp->qp->post_recv(r); !s) {
      if (bad_wr) *bad_wr = w;
      return fail(s.error());
    }
  }
  return 0;
}

// ---------------------------------------------------------------------------
// Async events

int mrc_get_async_fd(struct mrc_context* c, int* fd) {
  if (!c) return fail(EINVAL, "mrc_get_async_fd: null context");
  if (!fd) return fail(EINVAL, "mrc_get_async_fd: null fd pointer");
  *fd = c->ev_fd.get();
  return 0;
}

int mrc_get_async_event(struct mrc_context* c, struct mrc_async_event* event) {
  if (!c) return fail(EINVAL, "mrc_get_async_event: null context");
  if (!event) return fail(EINVAL, "mrc_get_async_event: null event");
  while (true) {
    {
      std::lock_guard<std::mutex> lk(c->ev_mu);
      if (!c->events.empty()) {
        *event = c->events.front();
        c->events.pop_front();
        uint64_t v;
        (void)!read(c->ev_fd.get(), &v, sizeof v);
        if (event->event_type == MRC_EVENT_QP_FATAL) event->element.qp->async.get();
        if (event->event_type == MRC_EVENT_CQ_ERR) event->element.cq->async.get();
        return 0;
      }
    }
    const int fl = fcntl(c->ev_fd.get(), F_GETFL);
    if (fl >= 0 && (fl & O_NONBLOCK)) return fail(EAGAIN, "mrc_get_async_event: no event pending");
    pollfd p{c->ev_fd.get(), POLLIN, 0};
    if (poll(&p, 1, -1) < 0 && errno != EINTR) return fail(errno, "mrc_get_async_event: poll");
  }
}

void mrc_ack_async_event(struct mrc_async_event* event) {
  if (!event) return;
  const int type = raw(event->event_type);
  if (type == MRC_EVENT_QP_FATAL && event->element.qp) event->element.qp->async.ack(1);
  if (type == MRC_EVENT_CQ_ERR && event->element.cq) event->element.cq->async.ack(1);
}

const char* mrc_wc_status_str(enum mrc_wc_status status) {
  return core::to_string(core::WcStatus(uint8_t(raw(status))));
}

// ---------------------------------------------------------------------------
// Out-of-band exchange

uint32_t mrc_random_psn(void) { return mrc::random_psn(); }

int mrc_exchange_listen(const char* bind_addr, uint16_t port) {
  auto r = mrc::tcp_listen(bind_addr ? bind_addr : "0.0.0.0", port);
  return r ? r->release() : fail(r.error());  // the caller closes it
}

int mrc_exchange_accept(int listen_fd, int timeout_ms) {
  if (listen_fd < 0) return fail(EBADF, "mrc_exchange_accept: bad listening socket");
  auto r = mrc::tcp_accept(listen_fd, timeout_ms);
  return r ? r->release() : fail(r.error());  // the caller closes it
}

int mrc_exchange_connect(const char* host, uint16_t port, int timeout_ms) {
  if (!host || !*host) return fail(EINVAL, "mrc_exchange_connect: no host");
  auto r = mrc::tcp_connect(host, port, timeout_ms);
  return r ? r->release() : fail(r.error());  // the caller closes it
}

int mrc_exchange_endpoints(int fd, const struct mrc_endpoint* ours, int num_ours,
                           struct mrc_endpoint* theirs, int max_theirs, int timeout_ms) {
  if (fd < 0) return fail(EBADF, "mrc_exchange_endpoints: bad socket");
  if (num_ours < 0 || (num_ours && !ours))
    return fail(EINVAL, "mrc_exchange_endpoints: bad list of our endpoints");
  if (max_theirs < 0 || (max_theirs && !theirs))
    return fail(EINVAL, "mrc_exchange_endpoints: bad output array");
  std::vector<mrc::QpEndpoint> mine;
  for (int i = 0; i < num_ours; i++) {
    if (ours[i].num_gids > MRC_MAX_PORTS)
      return fail(EINVAL, "mrc_exchange_endpoints: num_gids above MRC_MAX_PORTS");
    mine.push_back(ep_from_c(ours[i]));
  }
  auto r = mrc::exchange_endpoints(fd, mine, timeout_ms);
  if (!r) return fail(r.error());
  if (r->size() > size_t(max_theirs))
    return fail(EOVERFLOW, "mrc_exchange_endpoints: the peer sent " + std::to_string(r->size()) +
                               " endpoints, room for " + std::to_string(max_theirs));
  for (size_t i = 0; i < r->size(); i++) {
    const mrc::QpEndpoint& q = (*r)[i];
    if (q.gids.size() > MRC_MAX_PORTS)
      return fail(EPROTO, "mrc_exchange_endpoints: the peer sent more GIDs than ports");
    mrc_endpoint& e = theirs[i];
    std::memset(&e, 0, sizeof e);
    e.qpn = q.qpn;
    e.psn = q.psn;
    e.addr = q.addr;
    e.len = q.len;
    e.rkey = q.rkey;
    e.max_wimm_dest = q.max_wimm_dest;
    e.mpr_dest = q.mpr_dest;
    e.mtu = q.mtu;
    e.num_gids = uint32_t(q.gids.size());
    for (size_t g = 0; g < q.gids.size(); g++) e.gid[g] = ip_to_gid(q.gids[g]);
  }
  return int(r->size());
}

int mrc_exchange_send_line(int fd, const char* line) {
  if (fd < 0) return fail(EBADF, "mrc_exchange_send_line: bad socket");
  if (!line) return fail(EINVAL, "mrc_exchange_send_line: null line");
  if (std::strchr(line, '\n'))
    return fail(EINVAL, "mrc_exchange_send_line: the line contains a newline");
  auto s = mrc::send_line(fd, line);
  return s ? 0 : fail(s.error());
}

int mrc_exchange_recv_line(int fd, char* buf, size_t size, int timeout_ms) {
  if (fd < 0) return fail(EBADF, "mrc_exchange_recv_line: bad socket");
  if (!buf || !size) return fail(EINVAL, "mrc_exchange_recv_line: no buffer");
  auto r = mrc::recv_line(fd, timeout_ms);
  if (!r) return fail(r.error());
  if (r->size() >= size)
    return fail(EMSGSIZE,
                "mrc_exchange_recv_line: line of " + std::to_string(r->size()) + " bytes");
  std::memcpy(buf, r->data(), r->size());
  buf[r->size()] = 0;
  return int(r->size());
}

}  // extern "C"
