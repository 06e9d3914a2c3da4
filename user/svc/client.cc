// libmrc's client backend of service mode (client.hpp).
#include "svc/client.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "svc/remap.hpp"

namespace mrc::svc {

std::string socket_path(const DeviceOptions& o) {
  if (!o.service_socket.empty()) return o.service_socket;
  const char* e = std::getenv("MRC_SERVICE_SOCKET");
  return e && *e ? e : kDefaultSocket;
}

std::string errno_name(int e) {
  switch (e) {
    case ENOENT:
      return "ENOENT";
    case ECONNREFUSED:
      return "ECONNREFUSED";
    case EACCES:
      return "EACCES";
    case ENOTSOCK:
      return "ENOTSOCK";
    case ENAMETOOLONG:
      return "ENAMETOOLONG";
    default:
      return std::strerror(e);
  }
}

Result<UniqueFd> connect_service(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.size() >= sizeof a.sun_path) return make_error(ENAMETOOLONG, "service socket path");
  std::memcpy(a.sun_path, path.data(), path.size());
  UniqueFd s(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!s) return errno_error(errno, "socket(AF_UNIX)");
  if (connect(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) < 0)
    return errno_error(errno, "connecting to " + path);
  return s;
}

std::string service_holder(const std::string& path) {
  auto s = connect_service(path);
  if (!s) return {};
  ucred cr{};
  socklen_t l = sizeof cr;
  std::string pid = "?";
  if (getsockopt(s->get(), SOL_SOCKET, SO_PEERCRED, &cr, &l) == 0) pid = std::to_string(cr.pid);
  return "the planes are held by mrc-serviced (pid " + pid + " at " + path + ")";
}

// ---------------------------------------------------------------------------

Result<std::unique_ptr<Client>> Client::open(UniqueFd sock, const std::string& path,
                                             Context::Impl& im) {
  if (im.opts.progress == Progress::kApplication)
    return make_error(EOPNOTSUPP,
                      "open: application progress (MRC_DEVICE_APP_PROGRESS) is not served by "
                      "mrc-serviced yet; use MRC_MODE=exclusive for it");
  std::unique_ptr<Client> c(new Client());
  c->sock_ = std::move(sock);
  c->path_ = path;
  ucred cr{};
  socklen_t l = sizeof cr;
  if (getsockopt(c->sock_.get(), SOL_SOCKET, SO_PEERCRED, &cr, &l) == 0) c->svc_pid_ = cr.pid;
  MRC_TRY(c->hello(im));
  c->stop_fd_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!c->stop_fd_) return errno_error(errno, "eventfd");
  c->monitor_ = std::thread([p = c.get()] { p->monitor(); });
  return c;
}

namespace {
std::string cstr(const char* s, size_t n) { return std::string(s, strnlen(s, n)); }
}  // namespace

Status Client::hello(Context::Impl& im) {
  HelloReq rq{};
  rq.api_version = kApiVersion;
  rq.udp_port = im.opts.udp_port;
  rq.nifs = uint8_t(im.opts.interfaces.size());
  for (size_t i = 0; i < im.opts.interfaces.size(); i++) {
    const std::string& n = im.opts.interfaces[i];
    if (n.size() >= kIfName) return make_error(EINVAL, "open: interface name too long: " + n);
    std::memcpy(rq.ifnames[i], n.data(), n.size());
  }
  auto m = call(Op::kHello, &rq, sizeof rq);
  if (!m) return std::move(m).error().wrap("mrc-serviced at " + path_ + " refused this device");
  const HelloRep& r = *m->as<HelloRep>();
  area_fd_ = std::move(m->fds[0]);
  doorbell_ = std::move(m->fds[1]);
  async_fd_ = std::move(m->fds[2]);
  struct stat st {};
  bell_sock_ = fstat(doorbell_.get(), &st) == 0 && S_ISSOCK(st.st_mode);
  if (fstat(area_fd_.get(), &st) < 0 || uint64_t(st.st_size) != r.area_size ||
      r.area_size < sizeof(AreaHdr))
    return make_error(EPROTO, "mrc-serviced: the shared area's size disagrees with HELLO");
  void* p = mmap(nullptr, r.area_size, PROT_READ | PROT_WRITE, MAP_SHARED, area_fd_.get(), 0);
  if (p == MAP_FAILED) return errno_error(errno, "mapping the service's shared area");
  area_ = static_cast<uint8_t*>(p);
  area_size_ = r.area_size;
  hdr_ = reinterpret_cast<AreaHdr*>(area_);
  if (hdr_->magic != kAreaMagic || hdr_->version != kAreaVersion ||
      hdr_->ready_off + ring_bytes<uint32_t>(hdr_->ready_n) > area_size_ ||
      hdr_->async_off + ring_bytes<AsyncEvent>(hdr_->async_n) > area_size_)
    return make_error(EPROTO, "mrc-serviced: the shared area's header is not version 1");
  ready_ = ClientRing<uint32_t>(area_, hdr_->ready_off, hdr_->ready_n);
  async_ = ClientRing<AsyncEvent>(area_, hdr_->async_off, hdr_->async_n);
  attr_ = r.attr;
  tx_live_ = r.tx_live;
  im.max_path_mtu = r.max_path_mtu;
  im.rx_frame_cap = r.rx_frame_capacity;
  im.tx_note = cstr(r.tx_note, sizeof r.tx_note);
  im.idx.fill(-1);
  im.ports.clear();
  port_nums_.clear();
  for (uint8_t i = 0; i < std::min<uint8_t>(r.nports, kMaxPorts); i++) {
    const WirePort& w = r.ports[i];
    PortInfo pi;
    pi.port = w.port;
    pi.ifname = cstr(w.ifname, sizeof w.ifname);
    pi.ifindex = w.ifindex;
    std::memcpy(pi.mac.data(), w.mac, 6);
    pi.addrs.assign(w.addrs, w.addrs + std::min<size_t>(w.naddrs, kPortAddrs));
    pi.mtu = w.mtu;
    pi.queues = w.queues;
    pi.link_up = w.link_up;
    pi.xdp_mode = cstr(w.xdp_mode, sizeof w.xdp_mode);
    pi.xsk_mode = cstr(w.xsk_mode, sizeof w.xsk_mode);
    pi.tx = cstr(w.tx, sizeof w.tx);
    pi.max_path_mtu = w.max_path_mtu;
    if (pi.port == 0 || pi.port > kMaxPorts || im.idx[pi.port] >= 0)
      return make_error(EPROTO, "mrc-serviced: bad port number in HELLO");
    im.idx[pi.port] = int(im.ports.size());
    port_nums_.push_back(pi.port);
    im.ports.push_back(std::move(pi));
  }
  return {};
}

Client::~Client() {
  if (stop_fd_) lib::wake(stop_fd_.get());
  if (monitor_.joinable()) monitor_.join();
  sock_.close();  // the service frees everything of this client
  if (area_) munmap(area_, area_size_);
}

Error Client::gone() const { return make_error(EIO, dead_why_); }

// gone(), once the death flush is written: mark_dead() holds obj_mu_ while
// it flushes, so a waiter woken by the death that then polls finds every
// flush completion.
Error Client::gone_flushed() {
  std::lock_guard<std::mutex> lk(obj_mu_);
  return gone();
}

void Client::mark_dead(const std::string& why) {
  std::lock_guard<std::mutex> lk(obj_mu_);
  if (dead_.load()) return;
  dead_why_ = "the mrc service (pid " + std::to_string(svc_pid_) + ") is gone (" + why +
              "); close and reopen the device";
  dead_.store(true, std::memory_order_release);
  flush_dead();
  flushed_.store(true, std::memory_order_release);
  // Waiters on channels see their pipe's end (the service's write ends
  // closed): get_event says EIO. The async pipe would stay readable at its
  // end: an eventfd with one count takes its number, so a poller wakes once
  // per event flush_dead queued, plus once more (get_async_event finds
  // nothing), and then sleeps.
  UniqueFd e(
      eventfd(uint32_t(dead_events_.size()) + 1, EFD_CLOEXEC | EFD_NONBLOCK | EFD_SEMAPHORE));
  if (e) (void)dup3(e.get(), async_fd_.get(), O_CLOEXEC);
}

// The service is gone: the client is now the only producer of its CQ
// rings. Every posted work request the service had not retired completes
// with WR_FLUSH_ERR, sends before receives per QP, in posting order. Posts
// racing with this see dead_ and fail; a post whose ring slot was claimed
// but not yet published is flushed too (its shadow entry is written first).
void Client::flush_dead() {
  std::vector<uint64_t> prod(cqs_.size());
  std::vector<bool> ok(cqs_.size());
  for (size_t i = 0; i < cqs_.size(); i++) ok[i] = cqs_[i]->ring.producer_pos(prod[i]);
  auto put = [&](uint32_t cq_h, const Wc& wc) {
    for (size_t i = 0; i < cqs_.size(); i++) {
      if (cqs_[i]->h != cq_h) continue;
      if (!ok[i] || !cqs_[i]->ring.produce_at(prod[i], wc)) {
        ok[i] = false;
        cqs_[i]->ctl->overflow.store(1, std::memory_order_release);
      }
      return;
    }
  };
  for (auto& q : qps_) {
    Wc wc;
    wc.status = kWcWrFlushErr;
    wc.qp_num = q->qpn;
    const uint64_t sq_end = q->sq.index(), rq_end = q->rq.index();
    uint64_t s0 = q->ctl->sq_retired.load(std::memory_order_acquire);
    uint64_t r0 = q->ctl->rq_retired.load(std::memory_order_acquire);
    // The shadow holds the last 2 rings' worth; anything older is lost.
    if (sq_end - s0 > q->shadow.sq_mask + 1) s0 = sq_end - (q->shadow.sq_mask + 1);
    if (rq_end - r0 > q->shadow.rq_mask + 1) r0 = rq_end - (q->shadow.rq_mask + 1);
    wc.opcode = WcOpcode::kRdmaWrite;
    for (uint64_t i = s0; int64_t(sq_end - i) > 0; i++) {
      wc.wr_id = q->shadow.sq[i & q->shadow.sq_mask];
      put(q->scq_h, wc);
    }
    wc.opcode = WcOpcode::kRecvRdmaWithImm;
    for (uint64_t i = r0; int64_t(rq_end - i) > 0; i++) {
      wc.wr_id = q->shadow.rq[i & q->shadow.rq_mask];
      put(q->rcq_h, wc);
    }
    dead_events_.push_back({AsyncEventType::kQpFatal, q->qpn, 0, 0});
  }
  for (uint8_t port : port_nums_) dead_events_.push_back({AsyncEventType::kPortError, 0, port, 0});
  dead_events_.push_back({AsyncEventType::kDeviceFatal, 0, 0, 0});
}

// Waits for the service's end of the socket to close (POLLHUP: no data is
// read here, the replies stay for call()).
void Client::monitor() {
  pollfd p[2] = {{sock_.get(), 0, 0}, {stop_fd_.get(), POLLIN, 0}};
  for (;;) {
    if (::poll(p, 2, -1) < 0 && errno != EINTR) return;
    if (p[1].revents) return;
    if (p[0].revents & (POLLHUP | POLLERR | POLLNVAL)) {
      mark_dead("its socket closed");
      return;
    }
  }
}

Result<Msg> Client::call(Op op, const void* req, size_t len, const int* fds, size_t nfds) {
  if (dead_.load(std::memory_order_acquire)) return gone();
  std::lock_guard<std::mutex> lk(call_mu_);
  MsgHdr h{kMagic, kVersion, uint16_t(op), ++seq_, uint32_t(len), 0, uint32_t(nfds)};
  if (auto s = send_msg(sock_.get(), h, req, len, fds, nfds); !s) {
    mark_dead(s.error().message());
    return gone();
  }
  auto m = recv_msg(sock_.get());
  if (!m) {
    mark_dead(m.error().message());
    return gone();
  }
  if (auto s = check_reply(*m, op, h.seq); !s) {
    mark_dead(s.error().message());
    return gone();
  }
  if (m->hdr.status)
    return make_error(m->hdr.status, std::string(reinterpret_cast<const char*>(m->payload.data()),
                                                 m->payload.size()));
  return m;
}

bool Client::get_async_event(AsyncEvent& ev) {
  if (dead_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lk(obj_mu_);
    if (dead_events_.empty()) return false;
    ev = dead_events_.front();
    dead_events_.erase(dead_events_.begin());
    uint64_t v;
    (void)!read(async_fd_.get(), &v, sizeof v);  // its count (a semaphore eventfd)
    return true;
  }
  if (!async_.pop(ev)) return false;
  uint8_t b;
  (void)!read(async_fd_.get(), &b, 1);  // the service's byte for this event
  return true;
}

Result<uint32_t> Client::alloc_pd() {
  auto m = call(Op::kAllocPd, nullptr, 0);
  if (!m) return std::move(m).error();
  return m->as<Handle>()->h;
}

Status Client::dealloc_pd(uint32_t pd) {
  Handle h{pd};
  auto m = call(Op::kDeallocPd, &h, sizeof h);
  if (!m && !dead_.load()) return std::move(m).error();  // a dead device's objects are gone
  return {};
}

Result<MemoryRegion> Client::reg_mr(uint32_t pd, void* addr, size_t length, uint32_t access) {
  if (dead_.load()) return gone();
  if (!addr || !length) return make_error(EINVAL, "reg_mr: empty or null range");
  auto pieces = share_range(addr, length);
  if (!pieces) return std::move(pieces).error().wrap("reg_mr (service mode)");
  if (pieces->size() > kMaxPieces)
    return make_error(E2BIG, "reg_mr: the range spans " + std::to_string(pieces->size()) +
                                 " mappings; the service takes at most " +
                                 std::to_string(kMaxPieces));
  auto rq = std::make_unique<RegMrReq>();
  *rq = RegMrReq{};
  rq->pd = pd;
  rq->access = access;
  rq->iova = uint64_t(reinterpret_cast<uintptr_t>(addr));
  rq->length = length;
  rq->npieces = uint32_t(pieces->size());
  std::vector<int> fds;
  for (size_t i = 0; i < pieces->size(); i++) {
    const SharedPiece& sp = (*pieces)[i];
    rq->pieces[i] = {sp.fd_offset, sp.addr, sp.len};
    fds.push_back(sp.fd.get());
  }
  auto m = call(Op::kRegMr, rq.get(), sizeof *rq, fds.data(), fds.size());
  if (!m) return std::move(m).error();
  const RegMrRep& r = *m->as<RegMrRep>();
  return MemoryRegion{addr, length, r.lkey, r.rkey};
}

Status Client::dereg_mr(const MemoryRegion& mr) {
  Handle h{mr.lkey};
  auto m = call(Op::kDeregMr, &h, sizeof h);
  if (!m && !dead_.load()) return std::move(m).error();  // a dead device's objects are gone
  return {};
}

Result<Client::Channel> Client::create_channel() {
  auto m = call(Op::kCreateChannel, nullptr, 0);
  if (!m) return std::move(m).error();
  auto ch = std::make_unique<ClientChannel>();
  ch->c = this;
  ch->h = m->as<Handle>()->h;
  ch->fd = m->fds[0].release();
  std::lock_guard<std::mutex> lk(obj_mu_);
  channels_.push_back(std::move(ch));
  return Channel{channels_.back().get(), channels_.back()->fd};
}

namespace {
bool inside(uint64_t off, uint64_t len, uint64_t size) { return off <= size && len <= size - off; }
}  // namespace

Result<Client::Made> Client::create_cq(uint32_t cqe, void* channel_state, Cq* cq) {
  auto* ch = static_cast<ClientChannel*>(channel_state);
  CreateCqReq rq{cqe, ch ? ch->h + 1 : 0};
  auto m = call(Op::kCreateCq, &rq, sizeof rq);
  if (!m) return std::move(m).error();
  const CreateCqRep& r = *m->as<CreateCqRep>();
  if (!inside(r.lay.ctl_off, sizeof(CqCtl), area_size_) ||
      !inside(r.lay.ring_off, ring_bytes<Wc>(r.lay.ring_n), area_size_) ||
      (r.lay.ring_n & (r.lay.ring_n - 1)))
    return make_error(EPROTO, "mrc-serviced: CQ ring outside the shared area");
  auto c = std::make_unique<ClientCq>();
  c->c = this;
  c->h = r.h;
  c->lay = r.lay;
  c->ctl = reinterpret_cast<CqCtl*>(area_ + r.lay.ctl_off);
  c->ring = ClientRing<Wc>(area_, r.lay.ring_off, r.lay.ring_n);
  c->ch = ch;
  c->cq = cq;
  std::lock_guard<std::mutex> lk(obj_mu_);
  cqs_.push_back(std::move(c));
  return Made{r.h, 0, cqs_.back().get(), nullptr};
}

Status Client::destroy_cq(void* ring) {
  auto* c = static_cast<ClientCq*>(ring);
  Handle h{c->h};
  auto m = call(Op::kDestroyCq, &h, sizeof h);
  if (!m && !dead_.load()) return std::move(m).error();
  std::lock_guard<std::mutex> lk(obj_mu_);
  std::erase_if(cqs_, [&](const auto& p) { return p.get() == c; });
  return {};
}

Result<Client::Made> Client::create_qp(const QpInitAttr& init) {
  CreateQpReq rq{};
  rq.init = init;
  auto m = call(Op::kCreateQp, &rq, sizeof rq);
  if (!m) return std::move(m).error();
  const CreateQpRep& r = *m->as<CreateQpRep>();
  if (!inside(r.lay.ctl_off, sizeof(QpCtl), area_size_) ||
      !inside(r.lay.sq_off, ring_bytes<Sqe>(r.lay.sq_n), area_size_) ||
      !inside(r.lay.rq_off, ring_bytes<Rqe>(r.lay.rq_n), area_size_) ||
      (r.lay.sq_n & (r.lay.sq_n - 1)) || (r.lay.rq_n & (r.lay.rq_n - 1)))
    return make_error(EPROTO, "mrc-serviced: QP rings outside the shared area");
  auto q = std::make_unique<ClientQp>();
  q->c = this;
  q->h = r.h;
  q->qpn = r.qpn;
  q->lay = r.lay;
  q->ctl = reinterpret_cast<QpCtl*>(area_ + r.lay.ctl_off);
  q->sq = ClientRing<Sqe>(area_, r.lay.sq_off, r.lay.sq_n);
  q->rq = ClientRing<Rqe>(area_, r.lay.rq_off, r.lay.rq_n);
  q->scq_h = init.send_cq;
  q->rcq_h = init.recv_cq;
  q->shadow.sq.assign(2 * r.lay.sq_n, 0);
  q->shadow.rq.assign(2 * r.lay.rq_n, 0);
  q->shadow.sq_mask = 2 * r.lay.sq_n - 1;
  q->shadow.rq_mask = 2 * r.lay.rq_n - 1;
  std::lock_guard<std::mutex> lk(obj_mu_);
  qps_.push_back(std::move(q));
  return Made{r.h, r.qpn, nullptr, qps_.back().get()};
}

Status Client::destroy_qp(void* post) {
  auto* q = static_cast<ClientQp*>(post);
  Handle h{q->h};
  auto m = call(Op::kDestroyQp, &h, sizeof h);
  if (!m && !dead_.load()) return std::move(m).error();
  std::lock_guard<std::mutex> lk(obj_mu_);
  std::erase_if(qps_, [&](const auto& p) { return p.get() == q; });
  return {};
}

Status Client::modify_qp(void* post, const QpAttr& attr, uint32_t ibv_mask, uint32_t mrc_mask) {
  auto rq = std::make_unique<ModifyQpReq>();
  *rq = ModifyQpReq{};
  rq->h = static_cast<ClientQp*>(post)->h;
  rq->ibv_mask = ibv_mask;
  rq->mrc_mask = mrc_mask;
  rq->attr = attr;
  auto m = call(Op::kModifyQp, rq.get(), sizeof *rq);
  if (!m) return std::move(m).error();
  return {};
}

Result<QpAttr> Client::query_qp(void* post) {
  Handle h{static_cast<ClientQp*>(post)->h};
  auto m = call(Op::kQueryQp, &h, sizeof h);
  if (!m) return std::move(m).error();
  return *m->as<QpAttr>();
}

Result<QpAttr> Client::query_qpn(uint32_t qpn) {
  ClientQp* q = nullptr;
  {
    std::lock_guard<std::mutex> lk(obj_mu_);
    for (auto& p : qps_)
      if (p->qpn == qpn) q = p.get();
  }
  if (!q) return make_error(EINVAL, "query_qp: no QP " + std::to_string(qpn));
  return query_qp(q);
}

std::vector<uint32_t> Client::qp_list() {
  std::lock_guard<std::mutex> lk(obj_mu_);
  std::vector<uint32_t> v;
  for (auto& p : qps_) v.push_back(p->qpn);
  return v;
}

Result<QpStats> Client::qp_stats(void* post) {
  Handle h{static_cast<ClientQp*>(post)->h};
  auto m = call(Op::kQpStats, &h, sizeof h);
  if (!m) return std::move(m).error();
  return *m->as<QpStats>();
}

Result<StatsRep> Client::stats() {
  auto m = call(Op::kStats, nullptr, 0);
  if (!m) return std::move(m).error();
  return *m->as<StatsRep>();
}

// ---------------------------------------------------------------------------
// The data path

// After a post: the QP onto the ready ring (once until the service takes it
// off), and the doorbell when the service sleeps. The fence orders the
// post's stores before the load of engine_sleeping, against the service's
// store of it before its last look at the rings (as kick_engine()).
void Client::ring_doorbell(uint32_t qp_handle, ClientQp& q) {
  if (!q.ctl->queued.exchange(1, std::memory_order_acq_rel)) (void)ready_.push(qp_handle);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (hdr_->engine_sleeping.load(std::memory_order_relaxed)) ring_bell();
}

// One byte (a full doorbell already wakes the service). A socket since
// 2026-12-03: MSG_NOSIGNAL makes a write after the service's death EPIPE,
// where the pipe of older services raised SIGPIPE.
void Client::ring_bell() {
  const uint8_t one = 1;
  if (bell_sock_)
    (void)!send(doorbell_.get(), &one, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
  else
    (void)!write(doorbell_.get(), &one, 1);
}

Status Client::post_send(void* post, const SendWr& wr) {
  auto* q = static_cast<ClientQp*>(post);
  Client& c = *q->c;
  if (c.dead_.load(std::memory_order_acquire)) return c.gone();
  Sqe e;
  e.wr_id = wr.wr_id;
  e.remote_addr = wr.remote_addr;
  e.rkey = wr.rkey;
  e.imm_data = wr.imm_data;
  e.send_flags = wr.send_flags;
  e.opcode = uint8_t(wr.opcode);
  e.num_sge = uint8_t(wr.num_sge);
  e.rsvd[0] = e.rsvd[1] = 0;
  std::copy(wr.sg_list, wr.sg_list + wr.num_sge, e.sg);
  if (!q->sq.push(e, [&](uint64_t pos) { q->shadow.sq[pos & q->shadow.sq_mask] = wr.wr_id; }))
    return make_error(ENOMEM, "post_send: send queue full");
  c.ring_doorbell(q->h, *q);
  return {};
}

Status Client::post_recv(void* post, const RecvWr& wr) {
  auto* q = static_cast<ClientQp*>(post);
  Client& c = *q->c;
  if (c.dead_.load(std::memory_order_acquire)) return c.gone();
  if (!q->rq.push(Rqe{wr.wr_id},
                  [&](uint64_t pos) { q->shadow.rq[pos & q->shadow.rq_mask] = wr.wr_id; }))
    return make_error(ENOMEM, "post_recv: receive queue full");
  c.ring_doorbell(q->h, *q);
  return {};
}

Result<size_t> Client::poll(void* ring, std::span<Wc> out) {
  auto* r = static_cast<ClientCq*>(ring);
  // Read before the ring: once it is set, every flush completion is in the
  // ring, so an empty ring then means the end.
  const bool flushed = r->c->flushed_.load(std::memory_order_acquire);
  size_t n = 0;
  while (n < out.size() && r->ring.pop(out[n])) n++;
  if (n) return n;
  if (r->ctl->overflow.load(std::memory_order_acquire))
    return make_error(EOVERFLOW, "poll_cq: completion queue overrun");
  if (flushed) return r->c->gone();
  return n;
}

Status Client::req_notify(void* ring) {
  auto* r = static_cast<ClientCq*>(ring);
  if (!r->ch) return make_error(EINVAL, "req_notify: the CQ has no completion channel");
  if (r->c->dead_.load(std::memory_order_acquire)) return r->c->gone_flushed();
  r->ctl->armed.store(1, std::memory_order_seq_cst);
  // A completion that raced with arming must not be lost.
  // Only the service writes the channel's pipe: ask it (once per CQ while
  // a request is pending) through the ready ring.
  if (!r->ring.empty() && r->ctl->armed.exchange(0)) {
    r->ctl->fired.fetch_add(1, std::memory_order_acq_rel);
    Client& c = *r->c;
    if (!r->ctl->kick.exchange(1, std::memory_order_acq_rel)) (void)c.ready_.push(kCqKick | r->h);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (c.hdr_->engine_sleeping.load(std::memory_order_relaxed)) c.ring_bell();
  }
  return {};
}

Result<Cq*> Client::get_event(void* channel, int fd) {
  auto* ch = static_cast<ClientChannel*>(channel);
  Client& c = *ch->c;
  for (;;) {
    if (c.dead_.load(std::memory_order_acquire)) return c.gone_flushed();
    uint8_t b;
    const ssize_t n = read(fd, &b, 1);  // one byte per event the service wrote
    if (n < 0) return errno_error(errno, "get_cq_event");
    if (n == 0) {  // the service's end closed: it is gone
      c.mark_dead("its completion channel closed");
      return c.gone();
    }
    std::lock_guard<std::mutex> lk(c.obj_mu_);
    for (auto& q : c.cqs_) {
      if (q->ch != ch) continue;
      uint32_t f = q->ctl->fired.load(std::memory_order_acquire);
      while (f && !q->ctl->fired.compare_exchange_weak(f, f - 1, std::memory_order_acq_rel)) {
      }
      if (f) return q->cq;
    }
    // A count without a fired CQ: the service died (woken above) or an
    // event another get_event took with this one's count; look again.
  }
}

}  // namespace mrc::svc
