// mrc-serviced's service side (server.hpp): the control thread's socket,
// the clients' tables and the engine thread's hook.
#include "svc/server.hpp"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <new>
#include <set>

#include "svc/config.hpp"
#include "util/clock.hpp"
#include "util/mmap_area.hpp"

namespace mrc::svc {

struct Server::SQp {
  uint32_t qpn = 0, scq_h = 0, rcq_h = 0;
  QpLayout lay{};
  QpCtl* ctl = nullptr;
  ServiceRing<Sqe> sq;
  ServiceRing<Rqe> rq;
  // Retirement (section 5): per send handed to the engine, in order, 1 when
  // it is signaled, 0 when not, 2 when it was completed at once (refused);
  // the service's own memory, 2x the ring (ring plus engine queue).
  bool sig_all = false;
  std::vector<uint8_t> sig;
  uint64_t sig_head = 0, sig_tail = 0, sq_ret = 0, rq_ret = 0;
};

struct Server::SCq {
  uint32_t ecq = 0;
  CqLayout lay{};
  CqCtl* ctl = nullptr;
  ServiceRing<Wc> ring;
  int channel = -1;  // index into channels, -1: none
};

struct Server::ClientState {
  uint32_t id = 0;
  UniqueFd sock;
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  bool hello = false;
  bool bell_closed = false;  // the client's end of the doorbell is closed
  unsigned bad_in_row = 0;
  UniqueFd area_fd, doorbell, async_w;
  MmapArea area_map;
  uint8_t* area = nullptr;
  uint64_t area_size = 0;
  AreaHdr* hdr = nullptr;
  AreaAlloc alloc;
  ServiceRing<uint32_t> ready;
  ServiceRing<AsyncEvent> async;
  std::vector<std::optional<uint32_t>> pds;  // handle -> engine PD
  std::vector<std::unique_ptr<SQp>> qps;     // handle -> QP
  std::vector<std::unique_ptr<SCq>> cqs;     // handle -> CQ
  std::vector<UniqueFd> channels;            // handle -> eventfd
  std::map<uint32_t, MappedRegion> mrs;      // lkey -> the service's view
  std::unordered_map<uint32_t, SQp*> qp_of;  // engine QPN -> QP (retirement)
  size_t live_qps = 0, live_cqs = 0;
  // The QP and CQ limits this process connected under: its ready ring holds
  // that many; a reload that raises them applies to later processes.
  uint32_t qp_cap = 0, cq_cap = 0;
  // Visibility (OBSERVE): the command at connect, and what destroyed QPs
  // had moved and their errors (live QPs are read from the engine).
  char comm[16] = {};
  uint64_t gone_tx = 0, gone_rx = 0, gone_errors = 0, bad_requests = 0, error_wcs = 0;
};

namespace {

constexpr uint32_t kAsyncSlots = 4096;
constexpr unsigned kMaxBadInRow = 64;

// Makes a client's channel or async pipe readable: one byte on the write
// end only the service holds (non-blocking: a full pipe is readable anyway).
void notify(int fd) {
  const uint8_t one = 1;
  (void)!write(fd, &one, 1);
}

Error err(int code, const std::string& s) { return Error(code, s); }

// /proc/PID/comm into out (NUL-terminated, empty when unreadable).
void read_comm(pid_t pid, char (&out)[16]) {
  out[0] = 0;
  UniqueFd f(open(("/proc/" + std::to_string(pid) + "/comm").c_str(), O_RDONLY | O_CLOEXEC));
  if (!f) return;
  const ssize_t n = read(f.get(), out, sizeof out - 1);
  size_t l = n > 0 ? size_t(n) : 0;
  while (l && (out[l - 1] == '\n' || out[l - 1] == 0)) l--;
  out[l] = 0;
}

// The errors a QP's counters show (its side of a client's `errors`).
uint64_t qp_errors(const QpStats& s) {
  return s.rem_access_errors + s.imm_no_recv + s.imm_over_limit + s.fail_renacks;
}

}  // namespace

// ---------------------------------------------------------------------------
// Setup

Result<std::unique_ptr<Server>> Server::create(const ServerOptions& o) {
  std::unique_ptr<Server> s(new Server());
  s->o_ = o;
  s->o_.dev.mode = DeviceMode::kExclusive;
  auto c = Context::open(s->o_.dev);
  if (!c) return std::move(c).error().wrap("opening the planes");
  s->ctx_ = std::move(*c);
  s->im_ = s->ctx_->internal();
  MRC_TRY(s->listen_socket());
  std::lock_guard<std::mutex> lk(s->im_->mu);
  s->im_->hook = s.get();
  return s;
}

Server::~Server() {
  if (!im_) return;
  std::lock_guard<std::mutex> lk(im_->mu);
  for (auto& c : clients_) free_client_locked(*c);
  clients_.clear();
  im_->hook = nullptr;
  if (!o_.socket_path.empty() && listen_) unlink(o_.socket_path.c_str());
}

Status Server::listen_socket() {
  const std::string& path = o_.socket_path;
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.size() >= sizeof a.sun_path) return err(ENAMETOOLONG, "socket path too long: " + path);
  std::memcpy(a.sun_path, path.data(), path.size());
  // A socket file nobody listens on is stale (a killed service): remove it.
  {
    UniqueFd probe(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    if (connect(probe.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0)
      return err(EADDRINUSE, "another mrc-serviced serves " + path);
    unlink(path.c_str());
  }
  const size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) (void)mkdir(path.substr(0, slash).c_str(), 0755);
  listen_.reset(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!listen_) return errno_error(errno, "socket");
  if (bind(listen_.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) < 0)
    return errno_error(errno, "binding " + path);
  if (chmod(path.c_str(), o_.socket_mode) < 0) return errno_error(errno, "chmod " + path);
  if (o_.socket_group != gid_t(-1) && chown(path.c_str(), uid_t(-1), o_.socket_group) < 0)
    return errno_error(errno, "chown " + path);
  if (listen(listen_.get(), 64) < 0) return errno_error(errno, "listen " + path);
  epoll_.reset(epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_) return errno_error(errno, "epoll_create1");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 0;
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, listen_.get(), &ev) < 0)
    return errno_error(errno, "epoll_ctl");
  return {};
}

// ---------------------------------------------------------------------------
// The control loop

Status Server::run(int stop_fd, const std::function<bool()>& on_stop_fd) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = ~0ull;
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, stop_fd, &ev) < 0)
    return errno_error(errno, "epoll_ctl");
  std::array<epoll_event, 32> evs;
  for (;;) {
    const int n = epoll_wait(epoll_.get(), evs.data(), int(evs.size()), -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error(errno, "epoll_wait");
    for (int i = 0; i < n; i++) {
      const uint64_t id = evs[size_t(i)].data.u64;
      if (id == ~0ull) {
        if (!on_stop_fd || on_stop_fd()) return {};
        continue;
      }
      if (id == 0) {
        accept_client();
        continue;
      }
      ClientState* c = nullptr;
      for (auto& p : clients_)
        if (p->id == id) c = p.get();
      if (!c) continue;
      if (evs[size_t(i)].events & EPOLLIN) {
        handle(*c);
      } else {
        drop(*c, "hung up");
      }
    }
  }
}

void Server::reload(const ServerOptions& n) {
  std::lock_guard<std::mutex> lk(opt_mu_);
  apply_reloadable(o_, n);
}

ServerOptions Server::options() const {
  std::lock_guard<std::mutex> lk(opt_mu_);
  return o_;
}

void Server::accept_client() {
  for (;;) {
    // Non-blocking: a client that does not read its replies must not stall
    // the control thread (a reply that does not fit ends that client).
    UniqueFd s(accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!s) return;  // EAGAIN: all taken
    auto c = std::make_unique<ClientState>();
    ucred cr{};
    socklen_t l = sizeof cr;
    if (getsockopt(s.get(), SOL_SOCKET, SO_PEERCRED, &cr, &l) < 0) continue;
    c->pid = cr.pid;
    c->uid = cr.uid;
    c->gid = cr.gid;
    read_comm(cr.pid, c->comm);
    c->id = ++next_id_;
    c->sock = std::move(s);
    if (clients_.size() >= o_.max_clients) {
      const std::string why = "mrc-serviced: service limit: " + std::to_string(o_.max_clients) +
                              " clients (" + o_.limit_names.clients + ")";
      MsgHdr h{kMagic, kVersion, uint16_t(Op::kHello), 0, uint32_t(why.size()), EAGAIN, 0};
      (void)send_msg(c->sock.get(), h, why.data(), why.size(), nullptr, 0);
      continue;
    }
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.u64 = c->id;
    if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, c->sock.get(), &ev) < 0) continue;
    cnt_.clients_total++;
    cnt_.clients_now++;
    std::lock_guard<std::mutex> lk(im_->mu);
    clients_.push_back(std::move(c));
  }
}

void Server::drop(ClientState& c, const char* why) {
  (void)epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, c.sock.get(), nullptr);
  std::lock_guard<std::mutex> lk(im_->mu);
  if (c.hello)
    std::fprintf(stderr,
                 "mrc-serviced: client %u (pid %d, uid %u) left (%s): freed %zu QPs, %zu CQs, "
                 "%zu regions (its QPs stay as tombstones for %u ms)\n",
                 c.id, int(c.pid), unsigned(c.uid), why, c.live_qps, c.live_cqs, c.mrs.size(),
                 unsigned(o_.tomb_linger_ms));
  free_client_locked(c);
  cnt_.clients_now--;
  std::erase_if(clients_, [&](const auto& p) { return p.get() == &c; });
}

// Everything of a client goes: its QPs first (the engine flushes their
// work; those a peer may still send to stay as tombstones for
// tomb_linger_ms, holding nothing of the client), then CQs, regions (the
// service's view unmapped), PDs.
void Server::free_client_locked(ClientState& c) {
  const core::Time until = mono_ns() + core::Time(o_.tomb_linger_ms) * 1'000'000;
  for (auto& q : c.qps) {
    if (!q) continue;
    if (o_.tomb_linger_ms)
      (void)im_->entomb_qp_locked(q->qpn, until);
    else
      (void)im_->destroy_qp_locked(q->qpn);
    by_qpn_.erase(q->qpn);
  }
  // The engine thread sleeps until its next deadline: a tombstone's end is one.
  if (o_.tomb_linger_ms && !c.qps.empty()) lib::wake(im_->wake_fd.get());
  c.qp_of.clear();
  c.qps.clear();
  for (auto& q : c.cqs)
    if (q) (void)im_->eng->destroy_cq(q->ecq);
  c.cqs.clear();
  for (auto& [lkey, map] : c.mrs) (void)im_->eng->dereg_mr(lkey);
  c.mrs.clear();
  for (auto& pd : c.pds)
    if (pd) (void)im_->eng->destroy_pd(*pd);
  c.pds.clear();
  c.hello = false;
}

void Server::handle(ClientState& c) {
  auto m = recv_msg(c.sock.get());
  if (!m && (m.error().code == EAGAIN || m.error().code == EINTR)) return;
  if (!m) {
    // The peer's end (close, exit, kill) is no breach; anything else is.
    const int code = m.error().code;
    if (code == ENOTCONN || code == ECONNRESET) {
      drop(c, code == ENOTCONN ? "closed its connection" : "connection reset");
    } else {
      cnt_.clients_broken++;
      drop(c, "message cannot be framed");
    }
    return;
  }
  Result<Reply> r = [&]() -> Result<Reply> {
    MRC_TRY(check_request(*m));
    if (m->hdr.op == uint16_t(Op::kObserve)) return op_observe(*m);
    if (!c.hello && m->hdr.op != uint16_t(Op::kHello))
      return err(EINVAL, std::string(to_string(Op(m->hdr.op))) + ": HELLO first");
    if (c.hello && m->hdr.op == uint16_t(Op::kHello)) return err(EINVAL, "HELLO: twice");
    return dispatch(c, *m);
  }();
  Status sent;
  if (r) {
    c.bad_in_row = 0;
    std::vector<int> fds;
    for (auto& f : r->fds) fds.push_back(f.get());
    sent = send_msg(c.sock.get(), reply_hdr(m->hdr, 0, r->payload.size(), fds.size()),
                    r->payload.data(), r->payload.size(), fds.data(), fds.size());
  } else {
    cnt_.bad_requests++;
    c.bad_requests++;
    std::string why = r.error().context;
    if (why.size() > kMaxPayload) why.resize(kMaxPayload);
    const int code = r.error().code > 0 ? r.error().code : EINVAL;
    sent = send_msg(c.sock.get(), reply_hdr(m->hdr, code, why.size(), 0), why.data(), why.size(),
                    nullptr, 0);
    if (++c.bad_in_row > kMaxBadInRow) {
      cnt_.clients_broken++;
      drop(c, "too many bad requests in a row");
      return;
    }
  }
  if (!sent) drop(c, "reply failed");
}

namespace {
template <class T>
std::vector<uint8_t> bytes(const T& v) {
  std::vector<uint8_t> b(sizeof v);
  std::memcpy(b.data(), &v, sizeof v);
  return b;
}
}  // namespace

Result<Server::Reply> Server::dispatch(ClientState& c, Msg& m) {
  switch (Op(m.hdr.op)) {
    case Op::kHello:
      MRC_TRY(check_uid(c));
      return op_hello(c, m);
    case Op::kStats: {
      StatsRep st{};
      st.xsk = ctx_->xsk_stats();  // takes the engine lock itself
      std::lock_guard<std::mutex> lk(im_->mu);
      st.eng = im_->eng->stats();
      return Reply{bytes(st), {}};
    }
    case Op::kRegMr:
      return op_reg_mr(c, m);
    case Op::kCreateCq:
      return op_create_cq(c, m);
    case Op::kCreateQp:
      return op_create_qp(c, m);
    case Op::kModifyQp:
      return op_modify_qp(c, m);
    case Op::kDeallocPd:
    case Op::kDeregMr:
    case Op::kDestroyCq:
    case Op::kDestroyQp:
      return op_destroy(c, m);
    default:
      return op_simple(c, m);
  }
}

// ---------------------------------------------------------------------------
// HELLO: the interfaces and the namespace must be ours; then the client's
// shared area, its doorbell, and what the device looks like.

namespace {

Status check_same_netns(pid_t pid) {
  struct stat mine {
  }, theirs{};
  if (stat("/proc/self/ns/net", &mine) < 0) return errno_error(errno, "stat /proc/self/ns/net");
  const std::string p = "/proc/" + std::to_string(pid) + "/ns/net";
  if (stat(p.c_str(), &theirs) < 0) return errno_error(errno, "stat " + p);
  if (mine.st_ino != theirs.st_ino || mine.st_dev != theirs.st_dev)
    return err(EXDEV,
               "mrc-serviced serves another network namespace than this process's; run "
               "a service in this namespace (MRC_SERVICE_SOCKET names its socket)");
  return {};
}

void fill_port(WirePort& w, const PortInfo& pi) {
  w = WirePort{};
  w.port = pi.port;
  w.link_up = pi.link_up;
  w.ifindex = pi.ifindex;
  w.mtu = pi.mtu;
  w.queues = pi.queues;
  w.max_path_mtu = pi.max_path_mtu;
  std::memcpy(w.mac, pi.mac.data(), 6);
  std::strncpy(w.ifname, pi.ifname.c_str(), sizeof w.ifname - 1);
  std::strncpy(w.xdp_mode, pi.xdp_mode.c_str(), sizeof w.xdp_mode - 1);
  std::strncpy(w.xsk_mode, pi.xsk_mode.c_str(), sizeof w.xsk_mode - 1);
  std::strncpy(w.tx, pi.tx.c_str(), sizeof w.tx - 1);
  w.naddrs = uint8_t(std::min<size_t>(pi.addrs.size(), kPortAddrs));
  for (size_t i = 0; i < w.naddrs; i++) w.addrs[i] = pi.addrs[i];
}

}  // namespace

Result<Server::Reply> Server::op_hello(ClientState& c, Msg& m) {
  const HelloReq& rq = *m.as<HelloReq>();
  std::set<std::string> want, have;
  for (size_t i = 0; i < std::min<size_t>(rq.nifs, kMaxPorts); i++)
    want.insert(std::string(rq.ifnames[i], strnlen(rq.ifnames[i], kIfName)));
  std::string list;
  for (const auto& n : o_.dev.interfaces) {
    have.insert(n);
    list += (list.empty() ? "" : ",") + n;
  }
  if (want != have || rq.nifs != o_.dev.interfaces.size())
    return err(EINVAL, "mrc-serviced serves the planes " + list +
                           "; open the device on exactly these (or use MRC_MODE=exclusive on "
                           "other interfaces)");
  if (rq.udp_port != o_.dev.udp_port)
    return err(EINVAL, "mrc-serviced runs UDP port " + std::to_string(o_.dev.udp_port));
  MRC_TRY(check_same_netns(c.pid));
  // The shared area: sealed so the client cannot shrink it under us.
  UniqueFd fd(memfd_create("mrc:svc-area", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd) return errno_error(errno, "memfd_create");
  if (ftruncate(fd.get(), off_t(o_.area_bytes)) < 0) return errno_error(errno, "ftruncate");
  if (fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
    return errno_error(errno, "sealing the shared area");
  auto map = MmapArea::map(o_.area_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0,
                           "the shared area");
  if (!map) return std::move(map).error();
  // The doorbell: a stream socket pair. The service reads its own end
  // (non-blocking, an open file the client never holds: it cannot make our
  // reads block); the client gets the other. A socket, not a pipe: the
  // client writes it with MSG_NOSIGNAL, so a write after the service died
  // is EPIPE, not a SIGPIPE that kills the application.
  int bp[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, bp) < 0)
    return errno_error(errno, "socketpair (doorbell)");
  UniqueFd bell(bp[0]), bell_w(bp[1]);
  (void)shutdown(bell.get(), SHUT_WR);  // one way: client to service
  // Async events: a pipe whose write end only the service holds.
  if (pipe2(bp, O_CLOEXEC | O_NONBLOCK) < 0) return errno_error(errno, "pipe2");
  UniqueFd async_r(bp[0]), async_w(bp[1]);
  auto* area = static_cast<uint8_t*>(map->get());
  c.alloc = AreaAlloc(o_.area_bytes);
  const uint64_t ready_n = pow2_at_least(o_.max_qps + o_.max_cqs), async_n = kAsyncSlots;
  const uint64_t ready_off = c.alloc.alloc(ring_bytes<uint32_t>(ready_n));
  const uint64_t async_off = c.alloc.alloc(ring_bytes<AsyncEvent>(async_n));
  if (!ready_off || !async_off) return err(ENOMEM, "mrc-serviced: shared area too small");
  auto* hdr = reinterpret_cast<AreaHdr*>(area);
  hdr->magic = kAreaMagic;
  hdr->version = kAreaVersion;
  hdr->client_id = c.id;
  hdr->area_size = o_.area_bytes;
  hdr->svc_state.store(uint32_t(SvcState::kRunning));
  hdr->engine_sleeping.store(1);  // until the engine's first wake-up: ring
  hdr->ready_off = ready_off;
  hdr->ready_n = ready_n;
  hdr->async_off = async_off;
  hdr->async_n = async_n;
  std::unique_ptr<HelloRep> rep(new HelloRep{});
  rep->client_id = c.id;
  rep->service_pid = getpid();
  rep->area_size = o_.area_bytes;
  {
    std::lock_guard<std::mutex> lk(im_->mu);
    c.ready = ServiceRing<uint32_t>(area, ready_off, ready_n);
    c.ready.init();
    c.async = ServiceRing<AsyncEvent>(area, async_off, async_n);
    c.async.init();
    c.area_map = std::move(*map);
    c.area = area;
    c.area_size = o_.area_bytes;
    c.qp_cap = o_.max_qps;
    c.cq_cap = o_.max_cqs;
    c.hdr = hdr;
    c.area_fd = std::move(fd);
    c.doorbell = std::move(bell);
    c.async_w = std::move(async_w);
    c.hello = true;
    rep->attr = im_->eng->device_attr();
    rep->max_path_mtu = im_->max_path_mtu;
    rep->rx_frame_capacity = im_->rx_frame_cap;
    rep->tx_live = bool(im_->live);
    rep->nports = uint8_t(std::min<size_t>(im_->ports.size(), kMaxPorts));
    for (size_t i = 0; i < rep->nports; i++) fill_port(rep->ports[i], im_->ports[i]);
    std::strncpy(rep->tx_note, im_->tx_note.c_str(), sizeof rep->tx_note - 1);
  }
  lib::wake(im_->wake_fd.get());  // sleep again with this client's doorbell
  Reply r{bytes(*rep), {}};
  auto a = UniqueFd::dup(c.area_fd.get(), "the shared area");
  if (!a) return err(EMFILE, "HELLO: duplicating descriptors");
  r.fds.push_back(std::move(*a));
  r.fds.push_back(std::move(bell_w));
  r.fds.push_back(std::move(async_r));
  return r;
}

// ---------------------------------------------------------------------------
// Objects

namespace {
template <class V>
bool valid(const V& v, uint32_t h) {
  return h < v.size() && bool(v[h]);
}
}  // namespace

Result<Server::Reply> Server::op_reg_mr(ClientState& c, Msg& m) {
  const RegMrReq& rq = *m.as<RegMrReq>();
  if (rq.npieces > kMaxPieces || rq.npieces != m.fds.size())
    return err(EINVAL, "REG_MR: " + std::to_string(rq.npieces) + " pieces, " +
                           std::to_string(m.fds.size()) + " descriptors");
  std::vector<PieceRef> pieces(rq.npieces);
  for (size_t i = 0; i < rq.npieces; i++)
    pieces[i] = {m.fds[i].get(), rq.pieces[i].fd_offset, rq.pieces[i].addr, rq.pieces[i].len};
  std::lock_guard<std::mutex> lk(im_->mu);
  if (!valid(c.pds, rq.pd)) return err(EINVAL, "reg_mr: no PD " + std::to_string(rq.pd));
  if (c.mrs.size() >= o_.max_mrs)
    return err(ENOMEM, "reg_mr: service limit: " + std::to_string(o_.max_mrs) +
                           " regions per process (" + o_.limit_names.mrs + ")");
  MRC_TRY(check_mr_bytes(c, rq.length));
  auto map = MappedRegion::map(pieces, rq.iova, rq.length);
  if (!map) return std::move(map).error();
  auto r = im_->eng->reg_mr(*c.pds[rq.pd], rq.iova, map->host(), rq.length, rq.access);
  if (!r) return std::move(r).error();
  c.mrs.emplace(r->lkey, std::move(*map));
  return Reply{bytes(RegMrRep{r->lkey, r->rkey}), {}};
}

Result<Server::Reply> Server::op_create_cq(ClientState& c, const Msg& m) {
  const CreateCqReq& rq = *m.as<CreateCqReq>();
  std::lock_guard<std::mutex> lk(im_->mu);
  if (rq.channel && !valid(c.channels, rq.channel - 1))
    return err(EINVAL, "create_cq: no completion channel " + std::to_string(rq.channel - 1));
  if (rq.cqe > o_.max_cqe)
    return err(EINVAL, "create_cq: at most " + std::to_string(o_.max_cqe) + " entries (" +
                           o_.limit_names.cqe + ")");
  if (const uint32_t cap = std::min(o_.max_cqs, c.cq_cap); c.live_cqs >= cap)
    return err(ENOMEM, "create_cq: service limit: " + std::to_string(cap) + " CQs per process (" +
                           o_.limit_names.cqs +
                           (cap < o_.max_cqs ? "; the limit this process connected under" : "") +
                           ")");
  const uint32_t cqe = std::max<uint32_t>(rq.cqe, lib::kBurst);
  const uint64_t n = pow2_at_least(cqe);
  auto cq = std::make_unique<SCq>();
  cq->lay.ctl_off = c.alloc.alloc(sizeof(CqCtl));
  cq->lay.ring_off = c.alloc.alloc(ring_bytes<Wc>(n));
  cq->lay.ring_n = n;
  if (!cq->lay.ctl_off || !cq->lay.ring_off) {
    c.alloc.free(cq->lay.ctl_off, cq->lay.ctl_off ? sizeof(CqCtl) : 0);
    c.alloc.free(cq->lay.ring_off, cq->lay.ring_off ? ring_bytes<Wc>(n) : 0);
    return err(ENOMEM, "create_cq: service limit: the shared area (" +
                           std::to_string(c.area_size >> 20) + " MiB per process, " +
                           o_.limit_names.area + ") is full");
  }
  auto e = im_->eng->create_cq(cqe);
  if (!e) {
    c.alloc.free(cq->lay.ctl_off, sizeof(CqCtl));
    c.alloc.free(cq->lay.ring_off, ring_bytes<Wc>(n));
    return std::move(e).error();
  }
  cq->ecq = *e;
  cq->ctl = new (c.area + cq->lay.ctl_off) CqCtl{};
  cq->ring = ServiceRing<Wc>(c.area, cq->lay.ring_off, n);
  cq->ring.init();
  cq->channel = rq.channel ? int(rq.channel - 1) : -1;
  CreateCqRep rep{uint32_t(c.cqs.size()), 0, cq->lay};
  c.cqs.push_back(std::move(cq));
  c.live_cqs++;
  return Reply{bytes(rep), {}};
}

Result<Server::Reply> Server::op_create_qp(ClientState& c, const Msg& m) {
  CreateQpReq rq;
  std::memcpy(static_cast<void*>(&rq), m.payload.data(), sizeof rq);
  // A client's bytes: the one bool gets a value the language allows.
  uint8_t sig;
  std::memcpy(&sig, &rq.init.sq_sig_all, 1);
  rq.init.sq_sig_all = sig & 1;
  QpInitAttr init = rq.init;
  std::lock_guard<std::mutex> lk(im_->mu);
  if (!valid(c.pds, init.pd) || !valid(c.cqs, init.send_cq) || !valid(c.cqs, init.recv_cq))
    return err(EINVAL, "create_qp: no such PD or CQ");
  if (init.cap.max_send_wr > o_.max_wr || init.cap.max_recv_wr > o_.max_wr)
    return err(EINVAL, "create_qp: at most " + std::to_string(o_.max_wr) + " work requests (" +
                           o_.limit_names.wr + ")");
  if (const uint32_t cap = std::min(o_.max_qps, c.qp_cap); c.live_qps >= cap)
    return err(ENOMEM, "create_qp: service limit: " + std::to_string(cap) + " QPs per process (" +
                           o_.limit_names.qps +
                           (cap < o_.max_qps ? "; the limit this process connected under" : "") +
                           ")");
  const uint32_t scq_h = init.send_cq, rcq_h = init.recv_cq;
  init.pd = *c.pds[init.pd];
  init.send_cq = c.cqs[scq_h]->ecq;
  init.recv_cq = c.cqs[rcq_h]->ecq;
  auto q = std::make_unique<SQp>();
  q->lay.sq_n = pow2_at_least(init.cap.max_send_wr);
  q->lay.rq_n = pow2_at_least(std::max<uint32_t>(init.cap.max_recv_wr, 1));
  q->lay.ctl_off = c.alloc.alloc(sizeof(QpCtl));
  q->lay.sq_off = c.alloc.alloc(ring_bytes<Sqe>(q->lay.sq_n));
  q->lay.rq_off = c.alloc.alloc(ring_bytes<Rqe>(q->lay.rq_n));
  auto give_back = [&] {
    if (q->lay.ctl_off) c.alloc.free(q->lay.ctl_off, sizeof(QpCtl));
    if (q->lay.sq_off) c.alloc.free(q->lay.sq_off, ring_bytes<Sqe>(q->lay.sq_n));
    if (q->lay.rq_off) c.alloc.free(q->lay.rq_off, ring_bytes<Rqe>(q->lay.rq_n));
  };
  if (!q->lay.ctl_off || !q->lay.sq_off || !q->lay.rq_off) {
    give_back();
    return err(ENOMEM, "create_qp: service limit: the shared area (" +
                           std::to_string(c.area_size >> 20) + " MiB per process, " +
                           o_.limit_names.area + ") is full");
  }
  auto qpn = im_->eng->create_qp(init);
  if (!qpn) {
    give_back();
    return std::move(qpn).error();
  }
  q->qpn = *qpn;
  q->scq_h = scq_h;
  q->rcq_h = rcq_h;
  q->ctl = new (c.area + q->lay.ctl_off) QpCtl{};
  q->sq = ServiceRing<Sqe>(c.area, q->lay.sq_off, q->lay.sq_n);
  q->sq.init();
  q->rq = ServiceRing<Rqe>(c.area, q->lay.rq_off, q->lay.rq_n);
  q->rq.init();
  q->sig_all = init.sq_sig_all;
  q->sig.assign(2 * q->lay.sq_n, 0);
  c.qp_of[*qpn] = q.get();
  CreateQpRep rep{uint32_t(c.qps.size()), *qpn, q->lay};
  by_qpn_[*qpn] = &c;
  c.qps.push_back(std::move(q));
  c.live_qps++;
  return Reply{bytes(rep), {}};
}

Result<Server::Reply> Server::op_modify_qp(ClientState& c, const Msg& m) {
  const ModifyQpReq& rq = *m.as<ModifyQpReq>();
  std::lock_guard<std::mutex> lk(im_->mu);
  if (!valid(c.qps, rq.h)) return err(EINVAL, "modify_qp: no QP handle " + std::to_string(rq.h));
  SQp& q = *c.qps[rq.h];
  // Work posted before this call reaches the engine before the transition.
  drain_qp(*im_->eng, c, q);
  QpAttr a = rq.attr;
  // The bytes came from a client: make the enums and flags values the
  // engine knows (it checks the rest).
  auto state_ok = [](QpState s) {
    return s == QpState::kReset || s == QpState::kInit || s == QpState::kRtr ||
           s == QpState::kRts || s == QpState::kErr;
  };
  if (!state_ok(a.qp_state) || !state_ok(a.cur_qp_state))
    return err(EINVAL, "modify_qp: unknown QP state");
  for (auto& av : a.av) {
    uint8_t ver, valid;
    std::memcpy(&ver, &av.ip.ver, 1);
    std::memcpy(&valid, &av.valid, 1);
    if (ver != uint8_t(IpVersion::kV4) && ver != uint8_t(IpVersion::kV6))
      av.ip.ver = IpVersion::kV4;
    av.valid = valid & 1;
  }
  MRC_TRY(im_->modify_qp_locked(q.qpn, a, rq.ibv_mask, rq.mrc_mask));
  return Reply{};
}

Result<Server::Reply> Server::op_simple(ClientState& c, Msg& m) {
  std::lock_guard<std::mutex> lk(im_->mu);
  switch (Op(m.hdr.op)) {
    case Op::kAllocPd: {
      auto pd = im_->eng->create_pd();
      if (!pd) return std::move(pd).error();
      c.pds.push_back(*pd);
      return Reply{bytes(Handle{uint32_t(c.pds.size() - 1)}), {}};
    }
    case Op::kCreateChannel: {
      // The channel's pipe: the client reads (blocking, as an eventfd
      // channel is), the service writes its own non-blocking end.
      int p[2];
      if (pipe2(p, O_CLOEXEC) < 0) return errno_error(errno, "pipe2");
      UniqueFd rd(p[0]), wr(p[1]);
      if (fcntl(wr.get(), F_SETFL, O_NONBLOCK) < 0) return errno_error(errno, "fcntl");
      c.channels.push_back(std::move(wr));
      Reply r{bytes(Handle{uint32_t(c.channels.size() - 1)}), {}};
      r.fds.push_back(std::move(rd));
      return r;
    }
    case Op::kQueryQp:
    case Op::kQpStats: {
      const uint32_t h = m.as<Handle>()->h;
      if (!valid(c.qps, h)) return err(EINVAL, "query_qp: no QP handle " + std::to_string(h));
      if (Op(m.hdr.op) == Op::kQpStats) {
        auto s = im_->eng->qp_stats(c.qps[h]->qpn);
        if (!s) return std::move(s).error();
        return Reply{bytes(*s), {}};
      }
      auto a = im_->eng->query_qp(c.qps[h]->qpn);
      if (!a) return std::move(a).error();
      return Reply{bytes(*a), {}};
    }
    default:
      return err(EINVAL, "unknown op");
  }
}

Result<Server::Reply> Server::op_destroy(ClientState& c, const Msg& m) {
  const uint32_t h = m.as<Handle>()->h;
  std::lock_guard<std::mutex> lk(im_->mu);
  switch (Op(m.hdr.op)) {
    case Op::kDeallocPd:
      if (!valid(c.pds, h)) return err(EINVAL, "dealloc_pd: no PD " + std::to_string(h));
      MRC_TRY(im_->eng->destroy_pd(*c.pds[h]));
      c.pds[h].reset();
      return Reply{};
    case Op::kDeregMr: {
      auto it = c.mrs.find(h);
      if (it == c.mrs.end()) return err(EINVAL, "dereg_mr: no region " + std::to_string(h));
      MRC_TRY(im_->eng->dereg_mr(h));
      c.mrs.erase(it);  // unmaps the service's view
      return Reply{};
    }
    case Op::kDestroyCq: {
      if (!valid(c.cqs, h)) return err(EINVAL, "destroy_cq: no CQ handle " + std::to_string(h));
      SCq& q = *c.cqs[h];
      MRC_TRY(im_->eng->destroy_cq(q.ecq));
      c.alloc.free(q.lay.ctl_off, sizeof(CqCtl));
      c.alloc.free(q.lay.ring_off, ring_bytes<Wc>(q.lay.ring_n));
      c.cqs[h].reset();
      c.live_cqs--;
      return Reply{};
    }
    case Op::kDestroyQp: {
      if (!valid(c.qps, h)) return err(EINVAL, "destroy_qp: no QP handle " + std::to_string(h));
      SQp& q = *c.qps[h];
      keep_qp_totals(*im_->eng, c, q.qpn);
      MRC_TRY(im_->destroy_qp_locked(q.qpn));
      by_qpn_.erase(q.qpn);
      c.qp_of.erase(q.qpn);
      c.alloc.free(q.lay.ctl_off, sizeof(QpCtl));
      c.alloc.free(q.lay.sq_off, ring_bytes<Sqe>(q.lay.sq_n));
      c.alloc.free(q.lay.rq_off, ring_bytes<Rqe>(q.lay.rq_n));
      c.qps[h].reset();
      c.live_qps--;
      return Reply{};
    }
    default:
      return err(EINVAL, "unknown op");
  }
}

// ---------------------------------------------------------------------------
// Limits beyond the fixed tables (serviced_main's --max-mr-mib and
// --max-clients-per-uid; 0: none).

Status Server::check_mr_bytes(const ClientState& c, uint64_t len) const {
  if (!o_.max_mr_bytes) return {};
  uint64_t now = 0;
  for (const auto& [lkey, mr] : c.mrs) now += mr.length();
  if (len > o_.max_mr_bytes || now > o_.max_mr_bytes - len)
    return err(ENOMEM, "reg_mr: service limit: " + std::to_string(o_.max_mr_bytes) +
                           " registered bytes per process (" + o_.limit_names.mr_bytes + "; " +
                           std::to_string(now) + " registered, " + std::to_string(len) + " asked)");
  return {};
}

// At HELLO (an answer the client reads, not a closed socket): clients of
// c's uid already past HELLO.
Status Server::check_uid(const ClientState& c) const {
  if (!o_.max_clients_per_uid) return {};
  uint32_t n = 0;
  for (const auto& p : clients_) n += p->hello && p->uid == c.uid;
  if (n < o_.max_clients_per_uid) return {};
  return err(ENOMEM, "mrc-serviced: service limit: " + std::to_string(o_.max_clients_per_uid) +
                         " clients per uid (" + o_.limit_names.clients_per_uid + "; uid " +
                         std::to_string(c.uid) + ")");
}

// ---------------------------------------------------------------------------
// OBSERVE: every client's pid, uid, command, objects, bytes and errors.
// Read-only and allowed without HELLO (an observer such as `mrcctl service
// clients` is a client that never says HELLO). Like /proc, it shows other
// users' processes to whoever may connect to the socket.

void Server::keep_qp_totals(core::Engine& eng, ClientState& c, uint32_t qpn) {
  auto s = eng.qp_stats(qpn);
  if (!s) return;
  c.gone_tx += s->tx_data_bytes;
  c.gone_rx += s->rx_data_bytes;
  c.gone_errors += qp_errors(*s);
}

std::vector<ObserveClient> Server::observe() {
  std::vector<ObserveClient> out;
  std::lock_guard<std::mutex> lk(im_->mu);
  for (const auto& cp : clients_) {
    if (!cp->hello) continue;
    const ClientState& c = *cp;
    ObserveClient o{};
    o.id = c.id;
    o.uid = c.uid;
    o.pid = c.pid;
    o.qps = uint32_t(c.live_qps);
    o.cqs = uint32_t(c.live_cqs);
    o.mrs = uint32_t(c.mrs.size());
    for (const auto& [lkey, mr] : c.mrs) o.mr_bytes += mr.length();
    o.tx_bytes = c.gone_tx;
    o.rx_bytes = c.gone_rx;
    o.errors = c.gone_errors + c.bad_requests + c.error_wcs;
    for (const auto& q : c.qps) {
      if (!q) continue;
      auto s = im_->eng->qp_stats(q->qpn);
      if (!s) continue;
      o.tx_bytes += s->tx_data_bytes;
      o.rx_bytes += s->rx_data_bytes;
      o.errors += qp_errors(*s);
    }
    std::memcpy(o.comm, c.comm, sizeof o.comm);
    out.push_back(o);
  }
  return out;
}

Result<Server::Reply> Server::op_observe(const Msg& m) {
  const uint32_t first = m.as<ObserveReq>()->first;
  auto rep = std::make_unique<ObserveRep>();
  std::memset(rep.get(), 0, sizeof *rep);
  const std::vector<ObserveClient> all = observe();
  rep->total = uint32_t(all.size());
  rep->first = first;
  for (size_t i = first; i < all.size() && rep->count < kObservePage; i++)
    rep->c[rep->count++] = all[i];
  // The engine thread's scheduling as obtained (and why, when it fell back).
  rep->sched = uint8_t(ctx_->engine_sched());
  rep->sched_asked = uint8_t(sched_asked());
  const std::string& why = ctx_->engine_sched_reason();
  std::memcpy(rep->sched_why, why.data(), std::min(why.size(), sizeof rep->sched_why - 1));
  return Reply{bytes(*rep), {}};
}

// ---------------------------------------------------------------------------
// The engine thread's side (engine lock held)

namespace {

// Completions into a client's CQ ring; the channel fires when armed.
// Returns false when the ring was full (the client did not poll: its CQ
// overran, as on a NIC).
bool deliver_to(const std::vector<UniqueFd>& channels, Server::SCq& q, const Wc* wc, size_t n) {
  bool ok = true;
  for (size_t i = 0; i < n; i++)
    if (!q.ring.produce(wc[i])) ok = false;
  if (!ok) q.ctl->overflow.store(1, std::memory_order_release);
  if (n && q.channel >= 0 && q.ctl->armed.exchange(0, std::memory_order_acq_rel)) {
    q.ctl->fired.fetch_add(1, std::memory_order_acq_rel);
    if (size_t(q.channel) < channels.size() && channels[size_t(q.channel)])
      notify(channels[size_t(q.channel)].get());
  }
  return ok;
}

}  // namespace

void Server::push_async(ClientState& c, const AsyncEvent& ev) {
  if (c.async.produce(ev)) notify(c.async_w.get());
}

// One QP's posted work into the engine: at most one ring's worth of each
// per pass. Every entry is copied out of shared memory once (consume) and
// only the copy is looked at.
void Server::drain_qp(core::Engine& eng, ClientState& c, SQp& q) {
  SCq* rcq = valid(c.cqs, q.rcq_h) ? c.cqs[q.rcq_h].get() : nullptr;
  SCq* scq = valid(c.cqs, q.scq_h) ? c.cqs[q.scq_h].get() : nullptr;
  auto fail = [&](SCq* cq, uint64_t wr_id, WcOpcode op) {
    Wc wc;
    wc.wr_id = wr_id;
    wc.status = kWcLocQpOpErr;
    wc.opcode = op;
    wc.qp_num = q.qpn;
    if (cq && !deliver_to(c.channels, *cq, &wc, 1)) cnt_.cq_overruns++;
  };
  Rqe r;
  for (uint64_t k = q.rq.size(); k-- && q.rq.consume(r);) {
    RecvWr w;
    w.wr_id = r.wr_id;
    if (!eng.post_recv(q.qpn, w)) {
      fail(rcq, r.wr_id, WcOpcode::kRecvRdmaWithImm);
      q.rq_ret++;
      q.ctl->rq_retired.store(q.rq_ret, std::memory_order_release);
    }
  }
  Sqe e;
  for (uint64_t k = q.sq.size(); k-- && q.sq.consume(e);) {
    if (e.num_sge > kMaxSge || e.opcode > uint8_t(WrOpcode::kRdmaWriteWithImm)) {
      // Garbage in a published slot: that QP fails, nothing else.
      cnt_.bad_wqe++;
      fail(scq, e.wr_id, WcOpcode::kRdmaWrite);
      sq_track(q, 2);
      QpAttr a;
      a.qp_state = QpState::kErr;
      (void)eng.modify_qp(q.qpn, a, kQpState, 0);
      continue;
    }
    SendWr w;
    w.wr_id = e.wr_id;
    w.opcode = WrOpcode(e.opcode);
    w.send_flags = e.send_flags;
    w.sg_list = e.sg;
    w.num_sge = e.num_sge;
    w.remote_addr = e.remote_addr;
    w.rkey = e.rkey;
    w.imm_data = e.imm_data;
    if (!eng.post_send(q.qpn, w)) {
      fail(scq, e.wr_id, WcOpcode::kRdmaWrite);
      sq_track(q, 2);
    } else {
      sq_track(q, (q.sig_all || (w.send_flags & kSendSignaled)) ? 1 : 0);
    }
  }
}

// Retirement bookkeeping (service.md section 5). A send handed over: its
// kind at the tail of the QP's list (2: completed already; a full list,
// which an honest client cannot cause, drops the oldest).
void Server::sq_track(SQp& q, uint8_t kind) {
  const uint64_t mask = q.sig.size() - 1;
  if (q.sig_tail - q.sig_head > mask) {
    q.sig_head++;
    q.sq_ret++;
  }
  q.sig[q.sig_tail++ & mask] = kind;
  if (kind == 2 && q.sig_tail - q.sig_head == 1) {  // nothing before it: retired now
    q.sig_head++;
    q.sq_ret++;
    q.ctl->sq_retired.store(q.sq_ret, std::memory_order_release);
  }
}

// Completions the engine wrote, delivered into the client's ring: the sends
// and receives they retire. The engine completes a QP's sends in order: a
// successful completion retires the unsignaled sends before it and itself;
// an error completion (every send gets one, signaled or not) retires one.
void Server::retire(ClientState& c, const Wc* wc, size_t n) {
  for (size_t i = 0; i < n; i++) {
    auto it = c.qp_of.find(wc[i].qp_num);
    if (it == c.qp_of.end()) continue;
    SQp& q = *it->second;
    if (wc[i].opcode == WcOpcode::kRecvRdmaWithImm) {
      q.ctl->rq_retired.store(++q.rq_ret, std::memory_order_release);
      continue;
    }
    const uint64_t mask = q.sig.size() - 1;
    const bool ok = wc[i].status == kWcSuccess;
    while (q.sig_head != q.sig_tail) {
      const uint8_t k = q.sig[q.sig_head++ & mask];
      q.sq_ret++;
      if (k == 2) continue;
      if (!ok || k == 1) break;
    }
    // Sends completed at once right behind it are retired with it.
    while (q.sig_head != q.sig_tail && q.sig[q.sig_head & mask] == 2) {
      q.sig_head++;
      q.sq_ret++;
    }
    q.ctl->sq_retired.store(q.sq_ret, std::memory_order_release);
  }
}

bool Server::drain(core::Engine& eng) {
  bool any = false;
  // Each pass starts one client further on: no client's work always reaches
  // the engine first (or its completions last, in deliver()).
  const size_t n = clients_.size(), first = n ? rot_++ % n : 0;
  for (size_t i = 0; i < n; i++) {
    ClientState& c = *clients_[(first + i) % n];
    if (!c.hello) continue;
    uint32_t h;
    for (uint64_t k = c.ready.size(); k-- && c.ready.consume(h);) {
      any = true;
      if (h & kCqKick) {
        const uint32_t cq = h & ~kCqKick;
        if (!valid(c.cqs, cq)) {
          cnt_.bad_ready++;
          continue;
        }
        SCq& q = *c.cqs[cq];
        q.ctl->kick.store(0, std::memory_order_seq_cst);
        if (q.channel >= 0 && size_t(q.channel) < c.channels.size())
          notify(c.channels[size_t(q.channel)].get());
        continue;
      }
      if (!valid(c.qps, h)) {
        cnt_.bad_ready++;
        continue;
      }
      SQp& q = *c.qps[h];
      q.ctl->queued.store(0, std::memory_order_seq_cst);
      drain_qp(eng, c, q);
    }
  }
  return any;
}

bool Server::deliver(core::Engine& eng, std::span<Wc> scratch) {
  bool any = false;
  const size_t n = clients_.size(), first = n ? rot_ % n : 0;
  for (size_t i = 0; i < n; i++) {
    ClientState& c = *clients_[(first + i) % n];
    for (auto& q : c.cqs) {
      if (!q) continue;
      for (;;) {
        auto r = eng.poll_cq(q->ecq, scratch);
        if (!r) {
          q->ctl->overflow.store(1, std::memory_order_release);
          break;
        }
        if (!*r) break;
        any = true;
        for (size_t i = 0; i < *r; i++) c.error_wcs += scratch[i].status != kWcSuccess;
        if (!deliver_to(c.channels, *q, scratch.data(), *r)) cnt_.cq_overruns++;
        retire(c, scratch.data(), *r);
      }
    }
  }
  return any;
}

bool Server::qp_error(uint32_t qpn) {
  auto it = by_qpn_.find(qpn);
  if (it == by_qpn_.end()) return false;
  push_async(*it->second, {AsyncEventType::kQpFatal, qpn, 0, 0});
  return true;
}

void Server::port_event(const AsyncEvent& ev) {
  for (auto& c : clients_)
    if (c->hello) push_async(*c, ev);
}

bool Server::sleep_prepare(std::vector<pollfd>& fds) {
  for (auto& c : clients_)
    if (c->hello) c->hdr->engine_sleeping.store(1, std::memory_order_seq_cst);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  for (auto& c : clients_) {
    if (!c->hello) continue;
    if (c->ready.ready()) return false;
    // A doorbell whose client end is closed reads as end-of-file for ever:
    // not watched (its posts wait for another wake-up, its own loss).
    if (!c->bell_closed) fds.push_back({c->doorbell.get(), POLLIN, 0});
  }
  return true;
}

void Server::woke() {
  for (auto& c : clients_) {
    if (!c->hello) continue;
    c->hdr->engine_sleeping.store(0, std::memory_order_relaxed);
    if (c->bell_closed) continue;
    // Empty the doorbell (bounded: a flooding client costs at most 16 reads).
    std::array<uint8_t, 4096> buf;
    for (int k = 0; k < 16; k++) {
      const ssize_t n = read(c->doorbell.get(), buf.data(), buf.size());
      if (n == 0) {  // the client closed or shut down its end
        c->bell_closed = true;
        cnt_.bad_doorbell++;
      }
      if (n != ssize_t(buf.size())) break;
    }
  }
}

}  // namespace mrc::svc
