// libmrc's Context: the API methods of a device, its QPs, CQs and
// completion channels. One engine thread per device runs the sans-I/O engine
// over the AF_XDP sockets of every plane interface (engine_loop.cc). It
// sends through their TX rings or, with TxBackend::kLive, as XDP live frames
// (xdp::LiveTx, Documentation/xdp-tx.md) via the DeviceTxSink (tx_sink.cc);
// it always receives from the sockets. The shared state, Context::Impl, and
// its threading: context_impl.hpp.
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>

#include "core/engine_keys.hpp"
#include "lib/context_impl.hpp"
#include "lib/neigh.hpp"
#include "svc/client.hpp"
#include "svc/remap.hpp"

namespace mrc {

using lib::ChannelState;
using lib::CqRing;
using lib::kBurst;
using lib::mono_ns;
using lib::PostedSend;
using lib::QpRings;
using lib::wake;

namespace {

// Bytes of a data packet besides its payload, at most: Ethernet, IPv6, UDP,
// BTH, the largest extension headers of a WRITE (RETH, TSETH, ImmDt) and the
// ICRC. A live frame of path_mtu + this must fit LiveTx::max_frame(port).
uint32_t max_frame_overhead() {
  uint32_t ext = 0;
  for (unsigned op = MRC_OP_WRITE_FIRST; op <= MRC_OP_WRITE_ONLY_IMM; op++)
    ext = std::max(ext, codec::ext_header_len(uint8_t(op), true));
  return 14u + 40u + 8u + uint32_t(sizeof(mrc_bth)) + ext + MRC_ICRC_LEN;
}

}  // namespace

uint32_t random_psn() { return core::random_psn(); }

const char* to_string(Progress p) {
  switch (p) {
    case Progress::kThread:
      return "thread";
    case Progress::kApplication:
      return "application";
  }
  return "?";
}

const char* to_string(DeviceMode m) {
  switch (m) {
    case DeviceMode::kAuto:
      return "auto";
    case DeviceMode::kService:
      return "service";
    case DeviceMode::kExclusive:
      return "exclusive";
  }
  return "?";
}

const char* to_string(TxBackend b) {
  switch (b) {
    case TxBackend::kXsk:
      return "xsk";
    case TxBackend::kLive:
      return "live";
    case TxBackend::kAuto:
      return "auto";
  }
  return "?";
}

// ---------------------------------------------------------------------------
// alloc_buf / free_buf, and the process's registered ranges they check
// against: freeing memory a region still covers would leave the engine (in
// exclusive mode) placing into unmapped pages.

namespace {

struct BufRegistry {
  std::mutex mu;
  std::map<uintptr_t, size_t> bufs;  // alloc_buf's address -> the length asked
  struct Reg {
    uintptr_t end;
    const Context* owner;
    uint32_t lkey;
  };
  std::multimap<uintptr_t, Reg> regs;  // registered [begin, end)
};

BufRegistry& buf_registry() {
  static BufRegistry r;
  return r;
}

void note_registered(const Context* owner, const MemoryRegion& mr) {
  auto& r = buf_registry();
  std::lock_guard<std::mutex> lk(r.mu);
  const uintptr_t b = reinterpret_cast<uintptr_t>(mr.addr);
  r.regs.emplace(b, BufRegistry::Reg{b + mr.length, owner, mr.lkey});
}

void note_deregistered(const Context* owner, uint32_t lkey) {
  auto& r = buf_registry();
  std::lock_guard<std::mutex> lk(r.mu);
  for (auto it = r.regs.begin(); it != r.regs.end(); ++it)
    if (it->second.owner == owner && it->second.lkey == lkey) {
      r.regs.erase(it);
      return;
    }
}

void forget_context(const Context* owner) {
  auto& r = buf_registry();
  std::lock_guard<std::mutex> lk(r.mu);
  for (auto it = r.regs.begin(); it != r.regs.end();)
    it = it->second.owner == owner ? r.regs.erase(it) : std::next(it);
}

}  // namespace

Result<void*> alloc_buf(size_t length) {
  if (length == 0) return Error(EINVAL, "alloc_buf: zero length");
  auto p = svc::alloc_shared(length);
  if (!p) {
    Error e = p.error();
    return e.wrap("alloc_buf");
  }
  auto& r = buf_registry();
  std::lock_guard<std::mutex> lk(r.mu);
  r.bufs[reinterpret_cast<uintptr_t>(*p)] = length;
  return *p;
}

Status free_buf(void* buf, size_t length) {
  auto& r = buf_registry();
  const uintptr_t b = reinterpret_cast<uintptr_t>(buf);
  {
    std::lock_guard<std::mutex> lk(r.mu);
    auto it = r.bufs.find(b);
    if (!buf || it == r.bufs.end())
      return Error(EINVAL, "free_buf: " + std::string(buf ? "not" : "a null pointer is not") +
                               " an address alloc_buf returned");
    if (it->second != length)
      return Error(EINVAL, "free_buf: length " + std::to_string(length) + ", but " +
                               std::to_string(it->second) + " bytes were allocated there");
    for (const auto& [rb, reg] : r.regs)
      if (rb < b + length && reg.end > b)
        return Error(EBUSY, "free_buf: memory region lkey " + std::to_string(reg.lkey) +
                                " still covers part of it: deregister it first");
    r.bufs.erase(it);
  }
  if (auto s = svc::free_shared(buf, length); !s) {
    Error e = s.error();
    return e.wrap("free_buf");
  }
  return {};
}

// ---------------------------------------------------------------------------

Context::Context() : impl_(std::make_unique<Impl>()) {}

Context::~Context() {
  if (!impl_) return;
  forget_context(this);
  if (impl_->svc) {
    impl_->svc.reset();
    return;
  }
  impl_->stop.store(true);
  if (impl_->wake_fd) wake(impl_->wake_fd.get());
  if (impl_->thr.joinable()) impl_->thr.join();
  if (impl_->sync) impl_->sync->withdraw();
  // Remove what we registered in the (possibly shared) maps.
  if (impl_->maps) {
    for (const auto& q : impl_->qps)
      if (q) (void)impl_->maps->del_qp(q->qpn);
    if (impl_->eng)
      for (uint32_t qpn : impl_->eng->tombstone_list()) (void)impl_->maps->del_qp(qpn);
    for (size_t i = 0; i < impl_->ports.size(); i++)
      for (const auto& s : impl_->dev.sockets())
        if (s.port() == i) (void)impl_->maps->del_xsk(impl_->ports[i].port, s.queue());
  }
  // The eventfds and the timerfd close with *impl_.
}

std::array<uint32_t, 4> Context::query_version() {
  return {kApiVersion, api_version(1, 0, 0), kVendorApiVersion, kVendorApiVersion};
}

namespace {

// The mode asked for: the option, MRC_MODE for kAuto.
Result<DeviceMode> wanted_mode(const DeviceOptions& o) {
  if (o.mode != DeviceMode::kAuto) return o.mode;
  const char* e = std::getenv("MRC_MODE");
  if (!e || !*e || !std::strcmp(e, "auto")) return DeviceMode::kAuto;
  if (!std::strcmp(e, "service")) return DeviceMode::kService;
  if (!std::strcmp(e, "exclusive")) return DeviceMode::kExclusive;
  return make_error(EINVAL,
                    std::string("open: MRC_MODE=") + e + " is not one of auto, service, exclusive");
}

}  // namespace

Result<std::unique_ptr<Context>> Context::open(const DeviceOptions& o) {
  if (o.interfaces.empty()) return make_error(EINVAL, "open: no plane interfaces given");
  if (o.interfaces.size() > core::kMaxPorts)
    return make_error(EINVAL,
                      "open: at most " + std::to_string(core::kMaxPorts) + " plane interfaces");
  auto want = wanted_mode(o);
  if (!want) return std::move(want).error();
  const std::string path = svc::socket_path(o);
  std::unique_ptr<Context> ctx(new Context());
  Impl& im = *ctx->impl_;
  im.opts = o;
  // MRC_ENGINE: the operator's engine tunables, over the program's
  // (api.md, "Device options"); through the service its --engine decides.
  if (const char* e = std::getenv("MRC_ENGINE"); e && *e)
    MRC_TRY(core::apply_engine_settings(e, &im.opts.engine, "open: MRC_ENGINE"));
  MRC_TRY(im.resolve_sched());
  if (*want == DeviceMode::kExclusive) {
    im.mode_why = o.mode == DeviceMode::kExclusive
                      ? "exclusive mode: requested by the open flag (MRC_DEVICE_EXCLUSIVE)"
                      : "exclusive mode: requested by MRC_MODE=exclusive";
  } else {
    auto sock = svc::connect_service(path);
    if (sock) {
      auto c = svc::Client::open(std::move(*sock), path, im);
      if (!c) return std::move(c).error();
      im.svc = std::move(*c);
      im.mode = DeviceMode::kService;
      im.mode_why =
          "service mode: mrc-serviced pid " + std::to_string(im.svc->service_pid()) + " at " + path;
      im.sched_why = "in mrc-serviced (pid " + std::to_string(im.svc->service_pid()) +
                     "): its --sched decides";
      return ctx;
    }
    if (*want == DeviceMode::kService)
      return make_error(sock.error().code,
                        "service mode required (MRC_MODE=service): no service at " + path);
    im.mode_why =
        "exclusive mode: no service at " + path + " (" + svc::errno_name(sock.error().code) + ")";
  }
  auto st = open_exclusive(im);
  if (!st) {
    // The planes may be busy because the service holds them: say so.
    if (auto busy = svc::service_holder(path); !busy.empty())
      return make_error(EBUSY, busy +
                                   "; unset MRC_MODE=exclusive (or the exclusive flag) to "
                                   "use the service (" +
                                   st.error().context + ")");

    return std::move(st).error();
  }
  return ctx;
}

Status Context::open_exclusive(Impl& im) {
  const DeviceOptions& o = im.opts;
  auto have_mrcd = im.open_program();
  if (!have_mrcd) return std::move(have_mrcd).error();
  MRC_TRY(im.open_sockets());
  core::EngineConfig ec = o.engine;
  ec.ports.clear();
  ec.codec.udp_port = o.udp_port;
  ec.codec.dscp = o.dscp;
  if (!ec.seed || ec.seed == 1) ec.seed = mono_ns() ^ uint64_t(getpid()) << 32;
  MRC_TRY(im.open_ports(*have_mrcd, ec));
  MRC_TRY(im.open_tx_backend());
  im.rx_frame_cap = im.dev.umem().rx_frame_capacity();
  MRC_TRY(im.start(ec));
  return {};
}

DeviceMode Context::mode() const { return impl_->mode; }
const std::string& Context::mode_reason() const { return impl_->mode_why; }

Result<bool> Context::Impl::open_program() {
  const DeviceOptions& o = opts;
  if (o.use_mrcd) {
    auto m = loader::XdpMaps::open_pinned(o.pin_dir);
    if (m.ok()) {
      pinned = std::move(*m);
      maps = &pinned;
      // The controller's state next to the XDP maps (absent with an old mrcd).
      auto c = ctl::Client::open(o.pin_dir);
      if (c.ok()) ctl = std::move(*c);
      return true;
    }
  }
  loader::LoadOptions lo;
  lo.cfg.udp_port = o.udp_port;
  lo.cfg.dscp_trimmed = o.dscp.trimmed;
  lo.cfg.dscp_trimmed_lasthop = o.dscp.trimmed_lasthop;
  lo.cfg.dscp_control = o.dscp.control;
  auto p = loader::MrcXdp::open_and_load(lo);
  if (!p) return std::move(p).error().wrap("loading the XDP program");
  prog.emplace(std::move(*p));
  maps = &prog->maps();
  auto at = lib::attach_planes(*prog, o.interfaces, o.force_generic, o.pin_dir);
  if (!at) return std::move(at).error();
  attachments = std::move(*at);
  return false;
}

Status Context::Impl::open_sockets() {
  const DeviceOptions& o = opts;
  xdp::DeviceConfig dc;
  for (const auto& name : o.interfaces) dc.ports.push_back({name, o.queues, 0});
  dc.umem.frame_size = o.frame_size;
  dc.umem.frame_count = o.umem_frames;
  dc.umem.headroom = 0;
  dc.socket.busy_poll = o.busy_poll;
  if (o.frame_chunks > 1) {
    dc.umem.tx_chunks = o.frame_chunks;
    dc.umem.tx_frames = std::min<uint32_t>(4096, o.umem_frames / (2 * o.frame_chunks));
    dc.socket.multi_buffer = true;
  }
  dc.socket.load_default_prog = false;
  auto d = xdp::Device::open(dc);
  if (!d) return std::move(d).error().wrap("opening AF_XDP sockets");
  dev = std::move(*d);
  return {};
}

namespace {

// A plane interface's addresses (GIDs): IPv4 and IPv6, less link-local.
std::vector<Gid> plane_addrs(const xdp::Port& xp) {
  std::vector<Gid> addrs;
  for (const in_addr& a : xp.info.ipv4) {
    codec::IpAddr ip;
    ip.ver = codec::IpVersion::kV4;
    std::memcpy(ip.b.data(), &a, 4);
    addrs.push_back(ip);
  }
  for (const in6_addr& a : xp.info.ipv6) {
    codec::IpAddr ip;
    ip.ver = codec::IpVersion::kV6;
    std::memcpy(ip.b.data(), &a, 16);
    if (ip.b[0] == 0xfe && (ip.b[1] & 0xc0) == 0x80) continue;  // link-local: not a GID
    addrs.push_back(ip);
  }
  return addrs;
}

}  // namespace

Status Context::Impl::open_ports(bool have_mrcd, core::EngineConfig& ec) {
  tx_socket.assign(opts.interfaces.size(), 0);
  idx.fill(-1);
  for (size_t i = 0; i < dev.ports().size(); i++) {
    const xdp::Port& xp = dev.ports()[i];
    PortInfo pi;
    pi.port = uint8_t(i + 1);
    if (have_mrcd) {
      // mrcd numbered its plane ports; use its numbers so the XDP program,
      // the controller's port states and our engine agree.
      auto mp = maps->port(uint32_t(xp.info.ifindex));
      if (!mp.ok())
        return make_error(
            EINVAL, "interface " + xp.info.name + " is not a plane port of mrcd (" + opts.pin_dir +
                        "); add it to mrcd's configuration or open the device without mrcd");
      if (mp->port == 0 || mp->port > core::kMaxPorts || idx[mp->port] >= 0)
        return make_error(EINVAL, "interface " + xp.info.name + ": mrcd's port number " +
                                      std::to_string(mp->port) + " is out of range or used twice");
      pi.port = uint8_t(mp->port);
    }
    idx[pi.port] = int(i);
    pi.ifname = xp.info.name;
    pi.ifindex = xp.info.ifindex;
    std::memcpy(pi.mac.data(), xp.info.mac.data(), 6);
    pi.mtu = xp.info.mtu;
    pi.queues = xp.socket_count;
    pi.link_up = xp.info.admin_up && xp.info.link_up;
    pi.xdp_mode = have_mrcd ? xdp::to_string(xp.info.xdp.mode)
                            : std::string(loader::to_string(attachments[i].mode()));
    pi.xsk_mode = xdp::to_string(dev.mode());
    pi.addrs = plane_addrs(xp);
    if (pi.addrs.empty())
      return make_error(EADDRNOTAVAIL, "plane interface " + pi.ifname + " has no IP address");
    // The engine gets one entry per address family (the first address of each).
    bool v4 = false, v6 = false;
    for (const auto& a : pi.addrs) {
      bool is4 = a.ver == codec::IpVersion::kV4;
      if ((is4 && v4) || (!is4 && v6)) continue;
      (is4 ? v4 : v6) = true;
      ec.ports.push_back({pi.port, pi.mac, a, pi.link_up});
    }
    tx_socket[i] = uint16_t(xp.first_socket);
    if (!have_mrcd) MRC_TRY(maps->set_port(uint32_t(pi.ifindex), {pi.port, 0}));
    for (uint32_t k = 0; k < xp.socket_count; k++) {
      const xdp::XskSocket& sk = dev.sockets()[xp.first_socket + k];
      MRC_TRY(maps->set_xsk(pi.port, sk.queue(), sk.fd()));
    }
    ports.push_back(pi);
  }
  return {};
}

Status Context::Impl::open_tx_backend() {
  const DeviceOptions& o = opts;
  if (o.tx != TxBackend::kXsk) {
    // Live frames: one LiveTx for the engine thread.
    xdp::LiveTxConfig lc;
    for (const auto& name : o.interfaces) lc.ports.push_back({name, ""});
    lc.slots = o.live_tx_slots;
    lc.batch = std::clamp<uint32_t>(o.live_tx_submit, 1, 64);
    auto lt = xdp::LiveTx::create(lc);
    uint32_t clamp = 0;
    if (lt) {
      clamp = 9000;
      for (uint16_t i = 0; i < lt->port_count(); i++) {
        const uint32_t mf = lt->max_frame(i);
        clamp =
            std::min(clamp, mf > max_frame_overhead() ? (mf - max_frame_overhead()) / 64 * 64 : 0);
      }
      if (clamp < 256) {
        lt = make_error(EMSGSIZE, "live frames of at most " + std::to_string(lt->max_frame()) +
                                      " bytes leave no room for a path MTU of 256");
      }
    }
    if (lt) {
      live = std::move(*lt);
      max_path_mtu = clamp;
    } else if (o.tx == TxBackend::kLive) {
      return std::move(lt).error().wrap("live-frames TX (DeviceOptions::tx = live)");
    } else {
      tx_note = "live-frames TX unavailable, using AF_XDP TX: " + lt.error().message();
    }
  }
  if (o.frame_chunks > 1 && !live) {
    // Multi-buffer: a packet fills at most frame_chunks UMEM frames, on the
    // way out (from the start of the first) and on the way in (each after
    // the kernel's XDP headroom).
    const uint32_t out = dev.umem().tx_span_capacity();
    const uint32_t in = o.frame_chunks * dev.umem().rx_frame_capacity();
    const uint32_t frame = std::min(out, in);
    max_path_mtu =
        frame > max_frame_overhead() + 256 ? (frame - max_frame_overhead()) / 64 * 64 : 256;
  }
  for (auto& pi : ports) {
    pi.tx = live ? "live" : "xsk";
    pi.max_path_mtu = max_path_mtu;
  }
  return {};
}

Status Context::Impl::destroy_qp_locked(uint32_t qpn) {
  MRC_TRY(eng->destroy_qp(qpn));
  (void)maps->del_qp(qpn);
  return {};
}

Status Context::Impl::entomb_qp_locked(uint32_t qpn, core::Time until) {
  auto kept = eng->entomb_qp(qpn, until);
  if (!kept) return kept.error();
  if (!*kept && maps) (void)maps->del_qp(qpn);
  return {};
}

Status Context::Impl::start(const core::EngineConfig& ec) {
  eng = std::make_unique<core::Engine>(ec);
  if (ctl) {
    ctl::EngineSync::Options so;
    so.dev = uint32_t(getpid());
    sync = std::make_unique<ctl::EngineSync>(*ctl, *eng, so);
    sync->poll(mono_ns());  // ports and policy before the first QP
  }
  wake_fd.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  // One count per queued event: readable exactly while an event is queued.
  async_fd.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK | EFD_SEMAPHORE));
  if (!wake_fd || !async_fd) return errno_error(errno, "eventfd");
  if (app_mode()) {
    idle_tfd.reset(timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK));
    if (!idle_tfd) return errno_error(errno, "timerfd_create");
  }
  auto ready = sched_ready.get_future();
  thr = std::thread([this] { run(); });
  // The thread reports its scheduling before its first pass.
  ready.wait();
  return {};
}

TxBackend Context::tx_backend() const {
  if (impl_->svc) return impl_->svc->tx_live() ? TxBackend::kLive : TxBackend::kXsk;
  return impl_->live ? TxBackend::kLive : TxBackend::kXsk;
}
std::string Context::tx_note() const { return impl_->tx_note; }
const DeviceOptions& Context::options() const { return impl_->opts; }

Context::LiveTxStats Context::live_tx_stats() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  LiveTxStats x{};
  if (impl_->svc || !impl_->live) return x;
  const xdp::LiveTxCounters& c = impl_->live.counters();
  x.submits = c.submits;
  x.frames = c.committed;
  x.bytes = c.committed_bytes;
  x.redirected = c.redirected;
  x.prog_errors = c.prog_errors;
  x.submit_errors = c.submit_errors;
  x.lost = c.lost;
  x.ring_full = c.ring_full;
  x.xmit_sent = c.xmit_sent;
  x.xmit_drops = c.xmit_drops;
  x.redirect_err = c.redirect_err;
  x.submit_ns = c.submit_ns;
  return x;
}

DeviceAttr Context::query_device() const {
  return impl_->svc ? impl_->svc->attr() : impl_->eng->device_attr();
}
std::vector<PortInfo> Context::ports() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->ports;
}

// The largest path MTU every plane interface carries (its MTU less the IP,
// UDP and MRC headers of a data packet), or why none does; with want > 0,
// an error naming the interface that cannot carry want.
static Result<uint32_t> planes_fit(const std::vector<PortInfo>& ports, codec::IpVersion v,
                                   uint32_t want) {
  // IP packet bytes around the payload: IP, UDP, BTH, the largest data header
  // stack (with TSETH) and the ICRC (the C API's packet_overhead()).
  uint32_t ext = 0;
  for (unsigned op = MRC_OP_WRITE_FIRST; op <= MRC_OP_WRITE_ONLY_IMM; op++)
    ext = std::max(ext, codec::ext_header_len(uint8_t(op), true));
  const uint32_t over = (v == codec::IpVersion::kV6 ? 40u : 20u) + 8u + uint32_t(sizeof(mrc_bth)) +
                        ext + MRC_ICRC_LEN;
  uint32_t limit = core::kMaxPathMtu / 64 * 64;
  for (const PortInfo& pi : ports) {
    if (!pi.mtu) continue;
    if (pi.mtu < over + 256)
      return make_error(EMSGSIZE, "the MTU " + std::to_string(pi.mtu) + " of " + pi.ifname +
                                      " leaves no room for a path MTU of 256 (" +
                                      std::to_string(over) + " header bytes)");
    const uint32_t fit = (pi.mtu - over) / 64 * 64;
    if (want > fit)
      return make_error(EMSGSIZE, "path MTU " + std::to_string(want) + " + " +
                                      std::to_string(over) + " header bytes exceeds the MTU " +
                                      std::to_string(pi.mtu) + " of " + pi.ifname +
                                      " (it carries at most " + std::to_string(fit) + ")");
    limit = std::min(limit, fit);
  }
  return limit;
}

Result<uint32_t> Context::plane_mtu_limit(codec::IpVersion v) const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return planes_fit(impl_->ports, v, 0);
}

Result<uint32_t> Context::path_mtu_limit(codec::IpVersion v, uint32_t want) const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  const Impl& im = *impl_;
  auto planes = planes_fit(im.ports, v, want);
  if (!planes) return planes;
  // What one packet of this device may be: live frames and multi-buffer set
  // max_path_mtu; single-buffer AF_XDP receives a frame in one page, less
  // XDP's headroom and skb_shared_info (veth and page-per-packet drivers).
  uint32_t dev = im.max_path_mtu;
  if (!dev) {
    constexpr uint32_t kSingleBufferFrame = 4096 - 256 - 320;
    const uint32_t frame = std::min(kSingleBufferFrame, im.rx_frame_cap);
    dev = frame > max_frame_overhead() + 256 ? (frame - max_frame_overhead()) / 64 * 64 : 256;
  }
  if (want > dev) {
    // Live frames and multi-buffer clamp a QP's path_mtu to max_path_mtu
    // (Qp::modify): the same here. Single-buffer would lose every frame.
    if (im.max_path_mtu) return im.max_path_mtu;
    return make_error(EMSGSIZE, "path MTU " + std::to_string(want) + " exceeds the " +
                                    std::to_string(dev) +
                                    " of single-buffer AF_XDP (DeviceOptions::frame_chunks 1; "
                                    "more chunks carry more)");
  }
  return want ? want : std::min(*planes, dev);
}

Result<Gid> Context::gid(uint8_t port, codec::IpVersion v) const {
  if (port == 0 || port > core::kMaxPorts || impl_->idx[port] < 0)
    return make_error(EINVAL, "gid: no port " + std::to_string(port));
  for (const auto& a : impl_->ports[size_t(impl_->idx[port])].addrs)
    if (a.ver == v) return a;
  return make_error(ENOENT,
                    "gid: port " + std::to_string(port) + " has no address of that IP version");
}

Result<uint32_t> Context::alloc_pd() {
  if (impl_->svc) return impl_->svc->alloc_pd();
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->eng->create_pd();
}

Status Context::dealloc_pd(uint32_t pd) {
  if (impl_->svc) return impl_->svc->dealloc_pd(pd);
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->eng->destroy_pd(pd);
}

Result<MemoryRegion> Context::reg_mr(uint32_t pd, void* addr, size_t length, uint32_t access) {
  Result<MemoryRegion> m = [&]() -> Result<MemoryRegion> {
    if (impl_->svc) return impl_->svc->reg_mr(pd, addr, length, access);
    std::lock_guard<std::mutex> lk(impl_->mu);
    auto r = impl_->eng->reg_mr(pd, addr, length, access);
    if (!r) return std::move(r).error();
    return MemoryRegion{addr, length, r->lkey, r->rkey};
  }();
  if (m) note_registered(this, *m);
  return m;
}

Status Context::dereg_mr(const MemoryRegion& mr) {
  Status s = [&]() -> Status {
    if (impl_->svc) return impl_->svc->dereg_mr(mr);
    std::lock_guard<std::mutex> lk(impl_->mu);
    return impl_->eng->dereg_mr(mr.lkey);
  }();
  if (s) note_deregistered(this, mr.lkey);
  return s;
}

Result<std::unique_ptr<CompChannel>> Context::create_comp_channel() {
  auto ch = std::make_unique<CompChannel>();
  ch->ctx_ = this;
  if (impl_->svc) {
    // The service's pipe: its read end is the channel's descriptor.
    auto st = impl_->svc->create_channel();
    if (!st) return std::move(st).error();
    ch->fd_ = st->fd;
    ch->state_ = st->state;
    return ch;
  }
  ch->fd_ = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
  if (ch->fd_ < 0) return errno_error(errno, "create_comp_channel: eventfd");
  std::lock_guard<std::mutex> lk(impl_->mu);
  impl_->channels.push_back(std::make_unique<ChannelState>());
  ch->state_ = impl_->channels.back().get();
  return ch;
}

Result<std::unique_ptr<Cq>> Context::create_cq(uint32_t cqe, CompChannel* channel) {
  if (impl_->svc) {
    auto cq = std::make_unique<Cq>();
    auto m = impl_->svc->create_cq(std::max<uint32_t>(cqe, kBurst),
                                   channel ? channel->state_ : nullptr, cq.get());
    if (!m) return std::move(m).error();
    cq->ctx_ = this;
    cq->handle_ = m->h;
    cq->ring_ = m->ring;
    return cq;
  }
  std::lock_guard<std::mutex> lk(impl_->mu);
  auto h = impl_->eng->create_cq(std::max<uint32_t>(cqe, kBurst));
  if (!h) return std::move(h).error();
  auto ring = std::make_unique<CqRing>(*h, std::max<uint32_t>(cqe, kBurst));
  auto cq = std::make_unique<Cq>();
  cq->ctx_ = this;
  cq->handle_ = *h;
  cq->ring_ = ring.get();
  ring->channel = channel;
  ring->cq = cq.get();
  impl_->cqs.push_back(std::move(ring));
  return cq;
}

Status Context::destroy_cq(std::unique_ptr<Cq>&& cq) {
  if (!cq) return make_error(EINVAL, "destroy_cq: null CQ");
  if (impl_->svc) {
    MRC_TRY(impl_->svc->destroy_cq(cq->ring_));
    cq.reset();
    return {};
  }
  std::lock_guard<std::mutex> lk(impl_->mu);
  MRC_TRY(impl_->eng->destroy_cq(cq->handle_));
  auto& v = impl_->cqs;
  v.erase(std::remove_if(v.begin(), v.end(), [&](const auto& r) { return r.get() == cq->ring_; }),
          v.end());
  cq.reset();
  return {};
}

Result<std::unique_ptr<Qp>> Context::create_qp(const QpInitAttr& init_in, const Cq& send_cq,
                                               const Cq& recv_cq) {
  QpInitAttr init = init_in;
  init.send_cq = send_cq.handle_;
  init.recv_cq = recv_cq.handle_;
  if (impl_->svc) {
    auto m = impl_->svc->create_qp(init);
    if (!m) return std::move(m).error();
    auto qp = std::make_unique<Qp>();
    qp->ctx_ = this;
    qp->qpn_ = m->qpn;
    qp->post_ = m->post;
    return qp;
  }
  std::lock_guard<std::mutex> lk(impl_->mu);
  auto qpn = impl_->eng->create_qp(init);
  if (!qpn) return std::move(qpn).error();
  auto rings = std::make_unique<QpRings>(*qpn, init.cap.max_send_wr,
                                         std::max<uint32_t>(init.cap.max_recv_wr, 1));
  rings->send_cq = init.send_cq;
  rings->recv_cq = init.recv_cq;
  auto qp = std::make_unique<Qp>();
  qp->ctx_ = this;
  qp->qpn_ = *qpn;
  qp->post_ = rings.get();
  impl_->qps.push_back(std::move(rings));
  return qp;
}

Status Context::destroy_qp(std::unique_ptr<Qp>&& qp) {
  if (!qp) return make_error(EINVAL, "destroy_qp: null QP");
  if (impl_->svc) {
    MRC_TRY(impl_->svc->destroy_qp(qp->post_));
    qp.reset();
    return {};
  }
  std::lock_guard<std::mutex> lk(impl_->mu);
  MRC_TRY(impl_->destroy_qp_locked(qp->qpn_));
  auto* r = static_cast<QpRings*>(qp->post_);
  r->alive.store(false);
  // The ring object stays until the context goes: a stale entry in the ready
  // queue may still point at it.
  qp.reset();
  return {};
}

// ---------------------------------------------------------------------------
// QP hints

namespace {
Status check_hint(const QpHintAttr& a, uint32_t mask) {
  if (mask &
      ~uint32_t(kHintNumQpsPerPeer | kHintNumSendPeers | kHintNumRemoteRecvPeers | kHintVendorCfg))
    return make_error(EINVAL, "QP hint: unknown attribute mask bits");
  if (mask & kHintVendorCfg)
    return make_error(EINVAL, "QP hint: no vendor configuration is defined");
  if (((mask & kHintNumQpsPerPeer) && a.num_qps_per_peer < 0) ||
      ((mask & kHintNumSendPeers) && a.num_send_peers < 0) ||
      ((mask & kHintNumRemoteRecvPeers) && a.num_remote_recv_peers < 0))
    return make_error(EINVAL, "QP hint: counts must not be negative");
  return {};
}
constexpr uint32_t kHintAll = kHintNumQpsPerPeer | kHintNumSendPeers | kHintNumRemoteRecvPeers;
}  // namespace

Result<uint64_t> Context::create_qp_hint(const QpHintAttr& a) {
  MRC_TRY(check_hint(a, kHintAll));
  std::lock_guard<std::mutex> lk(impl_->mu);
  if (impl_->hints.size() >= impl_->eng->device_attr().max_qp_hint)
    return make_error(ENOMEM, "create_qp_hint: the device has max_qp_hint (" +
                                  std::to_string(impl_->eng->device_attr().max_qp_hint) +
                                  ") hints");
  const uint64_t id = impl_->next_hint++;
  impl_->hints[id] = a;
  return id;
}

Status Context::destroy_qp_hint(uint64_t id) {
  std::lock_guard<std::mutex> lk(impl_->mu);
  auto it = impl_->hints.find(id);
  if (it == impl_->hints.end())
    return make_error(EINVAL, "destroy_qp_hint: unknown hint " + std::to_string(id));
  const std::vector<uint32_t> qpns = impl_->svc ? impl_->svc->qp_list() : impl_->eng->qp_list();
  for (uint32_t qpn : qpns) {
    auto a = impl_->svc ? impl_->svc->query_qpn(qpn) : impl_->eng->query_qp(qpn);
    if (a && a->hint == id)
      return make_error(
          EBUSY, "destroy_qp_hint: QP " + std::to_string(qpn) + " uses hint " + std::to_string(id));
  }
  impl_->hints.erase(it);
  return {};
}

Result<QpHintAttr> Context::query_qp_hint(uint64_t id) const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  auto it = impl_->hints.find(id);
  if (it == impl_->hints.end())
    return make_error(EINVAL, "query_qp_hint: unknown hint " + std::to_string(id));
  return it->second;
}

Status Context::modify_qp_hint(uint64_t id, const QpHintAttr& a, uint32_t mask) {
  MRC_TRY(check_hint(a, mask));
  std::lock_guard<std::mutex> lk(impl_->mu);
  auto it = impl_->hints.find(id);
  if (it == impl_->hints.end())
    return make_error(EINVAL, "modify_qp_hint: unknown hint " + std::to_string(id));
  if (mask & kHintNumQpsPerPeer) it->second.num_qps_per_peer = a.num_qps_per_peer;
  if (mask & kHintNumSendPeers) it->second.num_send_peers = a.num_send_peers;
  if (mask & kHintNumRemoteRecvPeers) it->second.num_remote_recv_peers = a.num_remote_recv_peers;
  return {};
}

Status Context::install_ev_profile(uint64_t id, const core::EvProfile& p) {
  if (impl_->svc)
    return make_error(EOPNOTSUPP,
                      "install_ev_profile: in service mode profiles come from mrcd (or "
                      "mrc-serviced's own); open the device in exclusive mode to install one");
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->eng->install_ev_profile(id, p);
}

Status Context::install_cc_profile(uint64_t id, const core::CcProfile& p) {
  if (impl_->svc)
    return make_error(EOPNOTSUPP,
                      "install_cc_profile: in service mode profiles come from mrcd (or "
                      "mrc-serviced's own); open the device in exclusive mode to install one");
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->eng->install_cc_profile(id, p);
}

Result<core::PlaneAddr> Context::resolve(uint8_t port, const Gid& peer) {
  if (port == 0 || port > core::kMaxPorts || impl_->idx[port] < 0)
    return make_error(EINVAL, "resolve: no port " + std::to_string(port));
  const PortInfo& pi = impl_->ports[size_t(impl_->idx[port])];
  // A peer on this host, on this port's own address (another QP of this
  // device, or another process through the same mrc-serviced): the port's
  // own MAC, which makes the transmit path loop its frames back to the
  // engine (tx_sink.hpp) instead of sending them out of the interface.
  for (const IpAddr& a : pi.addrs)
    if (a == peer) return core::PlaneAddr{peer, pi.mac, true};
  auto mac = lib::resolve_next_hop(pi.ifindex, peer);
  if (!mac)
    return std::move(mac).error().wrap("resolving " + lib::to_string(peer) + " on " + pi.ifname);
  return core::PlaneAddr{peer, *mac, true};
}

int Context::async_fd() const {
  return impl_->svc ? impl_->svc->async_fd() : impl_->async_fd.get();
}

bool Context::get_async_event(AsyncEvent& ev) {
  if (impl_->svc) return impl_->svc->get_async_event(ev);
  if (!impl_->async.pop(ev)) return false;
  uint64_t v;
  (void)!read(impl_->async_fd.get(), &v, sizeof v);
  return true;
}

core::EngineStats Context::engine_stats() const {
  if (impl_->svc) {
    auto st = impl_->svc->stats();
    return st ? st->eng : core::EngineStats{};
  }
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->eng->stats();
}

Result<std::vector<mrc_xdp_stats>> Context::xdp_stats() const {
  if (impl_->svc)
    return make_error(EOPNOTSUPP,
                      "xdp_stats: the XDP program belongs to mrc-serviced (service "
                      "mode); read its counters with mrcctl or bpftool");
  std::vector<mrc_xdp_stats> v;
  for (const auto& p : impl_->ports) {
    auto s = impl_->maps->stats(p.port);
    if (!s) return std::move(s).error();
    v.push_back(*s);
  }
  return v;
}

std::vector<std::string> Context::xdp_stats_names() {
  return {loader::kStatsFieldNames.begin(), loader::kStatsFieldNames.end()};
}

Context::XskStats Context::xsk_stats() const {
  if (impl_->svc) {
    auto st = impl_->svc->stats();
    return st ? st->xsk : XskStats{};
  }
  std::lock_guard<std::mutex> lk(impl_->mu);
  XskStats x{};
  auto c = impl_->dev.counters();
  x.rx_frames = c.rx_frames;
  x.tx_frames = c.tx_frames;
  x.tx_kicks = c.tx_kicks;
  x.tx_completed = c.tx_completed;
  x.tx_kick_again = c.tx_kick_again;
  x.tx_kick_busy = c.tx_kick_busy;
  x.tx_kick_errors = c.tx_kick_errors + c.tx_kick_nobufs;
  x.pool_empty = c.pool_empty;
  if (auto k = impl_->dev.kernel_stats(); k.ok()) {
    x.rx_dropped = k->rx_dropped;
    x.rx_invalid = k->rx_invalid_descs;
    x.tx_invalid = k->tx_invalid_descs;
    x.rx_ring_full = k->rx_ring_full;
    x.fill_empty = k->rx_fill_ring_empty_descs;
    x.tx_ring_empty = k->tx_ring_empty_descs;
  }
  return x;
}

Progress Context::progress_mode() const { return impl_->opts.progress; }

Context::ProgressStats Context::progress_stats() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  ProgressStats st = impl_->pstats;
  st.stand_aside_checks = impl_->stand_aside_checks.load(std::memory_order_relaxed);
  st.rt_demotions = impl_->rt_demotions.load(std::memory_order_relaxed);
  return st;
}

Result<bool> Context::progress(int timeout_ms) {
  Impl& im = *impl_;
  if (!im.app_mode())
    return make_error(
        EINVAL,
        "progress: the engine thread drives this device (DeviceOptions::progress = thread)");
  if (timeout_ms < 0) return make_error(EINVAL, "progress: negative timeout");
  const bool work = im.app_step();
  if (work || timeout_ms == 0) return work;
  im.sleep_on_io(core::Time(timeout_ms) * 1'000'000, true);
  return im.app_step();
}

size_t Context::poll_ev_events(std::span<EvEvent> out) {
  if (impl_->svc) return 0;  // EV events stay in the service (service.md, "Status")
  size_t n = 0;
  while (n < out.size() && impl_->app_events.pop(out[n])) n++;
  return n;
}

// ---------------------------------------------------------------------------
// Qp, Cq, CompChannel

Status Qp::modify(const QpAttr& attr, uint32_t ibv_mask, uint32_t mrc_mask) {
  Context::Impl& im = *ctx_->impl_;
  std::unique_lock<std::mutex> lk(im.mu);
  if ((mrc_mask & core::kMrcHint) && attr.hint && !im.hints.count(attr.hint))
    return make_error(EINVAL, "modify_qp " + std::to_string(qpn_) + ": unknown QP hint " +
                                  std::to_string(attr.hint));
  if (im.svc) {
    lk.unlock();
    return im.svc->modify_qp(post_, attr, ibv_mask, mrc_mask);
  }
  // Work posted before this call reaches the engine before the transition
  // (as verbs orders post and modify), not after it.
  im.drain_posts();
  return im.modify_qp_locked(qpn_, attr, ibv_mask, mrc_mask);
}

Status Context::Impl::modify_qp_locked(uint32_t qpn_, const QpAttr& attr, uint32_t ibv_mask,
                                       uint32_t mrc_mask) {
  Context::Impl& im = *this;
  // Profiles come from mrcd (pinned, ONLINE) when it runs: install the ones
  // this QP names in the engine first. Without mrcd, install_*_profile did.
  if (im.sync) {
    if ((mrc_mask & core::kMrcEvProfileId) && attr.ev_profile_id)
      MRC_TRY(im.sync->use_ev_profile(attr.ev_profile_id));
    if ((mrc_mask & core::kMrcCcProfileId) && attr.cc_profile_id)
      MRC_TRY(im.sync->use_cc_profile(attr.cc_profile_id));
  }
  // Live-frames TX: frames must fit the kernel's live-frame limit, so the
  // path MTU is at most max_path_mtu (the receiver accepts any size).
  if ((ibv_mask & core::kQpPathMtu) && im.max_path_mtu && attr.path_mtu > im.max_path_mtu) {
    QpAttr a = attr;
    a.path_mtu = im.max_path_mtu;
    MRC_TRY(im.eng->modify_qp(qpn_, a, ibv_mask, mrc_mask));
  } else {
    MRC_TRY(im.eng->modify_qp(qpn_, attr, ibv_mask, mrc_mask));
  }
  auto a = im.eng->query_qp(qpn_);
  if (!a) return std::move(a).error();
  // What the XDP program needs to NACK trimmed packets for this QP.
  if (a->qp_state == QpState::kRtr || a->qp_state == QpState::kRts) {
    uint32_t flags =
        (a->cap_flags & core::kQpCapTrimNackDestUnsupported) ? MRC_QP_F_NO_TRIM_NACK : 0;
    MRC_TRY(im.maps->set_qp(qpn_, {a->dest_qp_num, flags}));
  } else if (a->qp_state == QpState::kReset) {
    (void)im.maps->del_qp(qpn_);
  }
  return {};
}

Result<QpAttr> Qp::query() const {
  if (ctx_->impl_->svc) return ctx_->impl_->svc->query_qp(post_);
  std::lock_guard<std::mutex> lk(ctx_->impl_->mu);
  return ctx_->impl_->eng->query_qp(qpn_);
}

Result<QpStats> Qp::stats() const {
  if (ctx_->impl_->svc) return ctx_->impl_->svc->qp_stats(post_);
  std::lock_guard<std::mutex> lk(ctx_->impl_->mu);
  return ctx_->impl_->eng->qp_stats(qpn_);
}

Result<std::vector<EvInfo>> Qp::evs() const {
  if (ctx_->impl_->svc)
    return make_error(EOPNOTSUPP, "evs: not served by mrc-serviced yet (service mode)");
  std::lock_guard<std::mutex> lk(ctx_->impl_->mu);
  auto evs = ctx_->impl_->eng->qp_evs(qpn_);
  if (!evs) return std::move(evs).error();
  std::vector<EvInfo> out;
  out.reserve(evs->size());
  for (const core::PathSet::Ev& e : *evs)
    out.push_back(EvInfo{.ev = e.ev,
                         .port = e.port,
                         .state = e.state,
                         .active = e.active,
                         .probing = e.probing,
                         .probe_ok = e.probe_ok,
                         .relapses = e.relapses,
                         .backoff = e.backoff,
                         .next_probe = e.next_probe,
                         .stats = e.stats});
  return out;
}

Status Qp::post_send(const SendWr& wr) {
  auto* r = static_cast<QpRings*>(post_);
  if (wr.num_sge > core::kMaxSge) return make_error(EINVAL, "post_send: too many SGEs");
  if (wr.num_sge && !wr.sg_list) return make_error(EINVAL, "post_send: null sg_list");
  if (wr.opcode != WrOpcode::kRdmaWrite && wr.opcode != WrOpcode::kRdmaWriteWithImm)
    return make_error(EINVAL, "post_send: only RDMA WRITE and WRITE_WITH_IMM are supported");
  if (ctx_->impl_->svc) return svc::Client::post_send(post_, wr);
  PostedSend ps;
  ps.wr = wr;
  std::copy(wr.sg_list, wr.sg_list + wr.num_sge, ps.sg.begin());
  if (!r->sq.push(ps)) return make_error(ENOMEM, "post_send: send queue full");
  if (!r->queued.exchange(true)) ctx_->impl_->ready.push(r);
  ctx_->impl_->kick_engine();
  return {};
}

Status Qp::post_recv(const RecvWr& wr) {
  if (ctx_->impl_->svc) return svc::Client::post_recv(post_, wr);
  auto* r = static_cast<QpRings*>(post_);
  if (!r->rq.push(wr.wr_id)) return make_error(ENOMEM, "post_recv: receive queue full");
  if (!r->queued.exchange(true)) ctx_->impl_->ready.push(r);
  ctx_->impl_->kick_engine();
  return {};
}

Result<size_t> Cq::poll(std::span<Wc> out) {
  if (ctx_->impl_->svc) return svc::Client::poll(ring_, out);
  auto* r = static_cast<CqRing*>(ring_);
  size_t n = 0;
  while (n < out.size() && r->ring.pop(out[n])) n++;
  // kApplication: nothing to return, so run the engine here and look again.
  if (!n && ctx_->impl_->app_mode() && ctx_->impl_->app_step())
    while (n < out.size() && r->ring.pop(out[n])) n++;
  if (!n && r->overflow.load(std::memory_order_acquire))
    return make_error(EOVERFLOW, "poll_cq: completion queue overrun");
  return n;
}

Status Cq::req_notify() {
  if (ctx_->impl_->svc) return svc::Client::req_notify(ring_);
  auto* r = static_cast<CqRing*>(ring_);
  if (!r->channel) return make_error(EINVAL, "req_notify: the CQ has no completion channel");
  r->armed.store(true, std::memory_order_seq_cst);
  // A completion that raced with arming must not be lost.
  if (!r->ring.empty() && r->armed.exchange(false)) {
    static_cast<ChannelState*>(r->channel->state_)->fired.push(this);
    wake(r->channel->fd());
  }
  return {};
}

Result<Cq*> CompChannel::get_event() {
  if (ctx_->impl_->svc) return svc::Client::get_event(state_, fd_);
  uint64_t v;
  if (read(fd_, &v, sizeof v) < 0) return errno_error(errno, "get_cq_event");
  Cq* cq = nullptr;
  if (!static_cast<ChannelState*>(state_)->fired.pop(cq))
    return make_error(EAGAIN, "get_cq_event: no event");
  return cq;
}

void CompChannel::ack_events(Cq* cq, unsigned n) {
  (void)cq;
  (void)n;  // events carry no resources to release here
}

CompChannel::~CompChannel() {
  // fd_ is a plain int of the public header (mrc.hpp); adopted here to close.
  const UniqueFd fd(std::exchange(fd_, -1));
}

}  // namespace mrc
