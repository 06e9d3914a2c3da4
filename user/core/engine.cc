// Engine objects, the QP state machine, profiles, events, frame dispatch and
// the transmit scheduler. The requester and responder rules live in
// requester.cc and responder.cc.
#include <algorithm>
#include <cstring>

#include "codec/ev.hpp"
#include "core/engine_impl.hpp"
#include "core/srv6.hpp"

namespace mrc::core {

namespace {
// A QPN is gen << 16 | permute(index): gen (8 random bits, never 0) keeps
// every QPN above the reserved ones (QPN 2 = endpoint ops) and changes each
// time a slot is reused; a memory key is random16 << 16 | permute(index).
constexpr uint32_t kIdxBits = 16;
constexpr uint32_t kIdxMask = (1u << kIdxBits) - 1;
constexpr uint8_t kAethNakRemoteOp = 0x63;  // IBTA AETH NAK code: remote operational error

uint32_t ev_api_state(EvState s) {
  switch (s) {
    case EvState::kGood:
    case EvState::kSkip:
      return kEvGood;
    case EvState::kAssumedBad:
      return kEvAssumedBad;
    case EvState::kDenied:
      return kEvDenied;
  }
  return kEvUnknown;
}
}  // namespace

Engine::Engine(EngineConfig cfg)
    : cfg_(std::move(cfg)),
      rng_(cfg_.seed),
      ids_(cfg_.id_seed ? IdGen::seed_key(cfg_.id_seed) : IdGen::os_key()),
      ctrl_(std::make_unique<CtrlQueue>()) {
  ev_events_.resize(std::max<uint32_t>(cfg_.ev_event_capacity, 1));
  sack_due_.reserve(256);
  if (tracks_holds()) tx_log_.reserve(1024);  // TxPkt::hold (tx_done)
  for (const PortConfig& p : cfg_.ports)
    if (!p.up && p.port < 32) ports_down_ |= 1u << p.port;
}

Engine::~Engine() = default;

// ---------------------------------------------------------------------------
// Protection domains and memory regions

Result<uint32_t> Engine::create_pd() {
  uint32_t pd = next_pd_++;
  pds_.push_back(pd);
  return pd;
}

Status Engine::destroy_pd(uint32_t pd) {
  auto it = std::find(pds_.begin(), pds_.end(), pd);
  if (it == pds_.end())
    return Error(EINVAL, "destroy_pd: unknown protection domain " + std::to_string(pd));
  for (const auto& m : mrs_)
    if (m && m->valid && m->pd == pd)
      return Error(EBUSY, "destroy_pd: memory regions still registered");
  for (const auto& q : qps_)
    if (q && q->pd == pd) return Error(EBUSY, "destroy_pd: QPs still use it");
  pds_.erase(it);
  return {};
}

Result<Engine::MrInfo> Engine::reg_mr(uint32_t pd, void* addr, size_t length, uint32_t access) {
  return reg_mr(pd, uint64_t(uintptr_t(addr)), addr, length, access);
}

Result<Engine::MrInfo> Engine::reg_mr(uint32_t pd, uint64_t iova, void* host, size_t length,
                                      uint32_t access) {
  if (std::find(pds_.begin(), pds_.end(), pd) == pds_.end())
    return Error(EINVAL, "reg_mr: unknown protection domain " + std::to_string(pd));
  if (!host && length) return Error(EINVAL, "reg_mr: null address");
  if (length && iova + length < iova) return Error(EINVAL, "reg_mr: iova + length wraps around");
  if (access & ~(kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead))
    return Error(EINVAL, "reg_mr: unknown access flags");
  if ((access & kAccessRemoteWrite) && !(access & kAccessLocalWrite))
    return Error(EINVAL, "reg_mr: REMOTE_WRITE requires LOCAL_WRITE");
  if (length > (uint64_t(1) << 40)) return Error(EINVAL, "reg_mr: length too large");
  size_t idx = 0;
  while (idx < mrs_.size() && mrs_[idx] && mrs_[idx]->valid) idx++;
  if (idx >= cfg_.max_mrs || idx > kIdxMask)
    return Error(ENOMEM, "reg_mr: too many memory regions");
  if (idx == mrs_.size()) {
    mrs_.push_back(std::make_unique<Mr>());
  } else if (!mrs_[idx]) {
    mrs_[idx] = std::make_unique<Mr>();
  }
  Mr& m = *mrs_[idx];
  m.pd = pd;
  m.iova = iova;
  m.delta = uint64_t(uintptr_t(host)) - iova;
  m.len = length;
  m.access = access;
  // 16 secret random bits (a new value at each reuse of the slot) above the
  // permuted index: not guessable from the slot, the order, or an old key.
  const uint32_t rnd = ids_.nonzero(32 - kIdxBits, m.key >> kIdxBits);
  m.key = rnd << kIdxBits | ids_.permute(uint16_t(idx));
  m.valid = true;
  return MrInfo{m.key, m.key};
}

const Engine::Mr* Engine::mr_by_key(uint32_t key) const {
  const uint32_t idx = ids_.unpermute(uint16_t(key & kIdxMask));
  if (idx >= mrs_.size()) return nullptr;
  const Mr* m = mrs_[idx].get();
  if (!m || !m->valid || m->key != key) return nullptr;
  return m;
}

Status Engine::dereg_mr(uint32_t lkey) {
  const Mr* m = mr_by_key(lkey);
  if (!m) return Error(EINVAL, "dereg_mr: unknown key");
  const_cast<Mr*>(m)->valid = false;
  return {};
}

// ---------------------------------------------------------------------------
// Completion queues

Result<uint32_t> Engine::create_cq(uint32_t cqe) {
  if (cqe == 0 || cqe > (1u << 22)) return Error(EINVAL, "create_cq: cqe must be 1..4194304");
  size_t idx = 0;
  while (idx < cqs_.size() && cqs_[idx] && cqs_[idx]->valid) idx++;
  if (idx >= cfg_.max_cqs) return Error(ENOMEM, "create_cq: too many CQs");
  if (idx == cqs_.size()) cqs_.push_back(nullptr);
  cqs_[idx] = std::make_unique<Cq>();
  Cq& c = *cqs_[idx];
  c.ring.resize(cqe);
  c.valid = true;
  return uint32_t(idx + 1);
}

Engine::Cq* Engine::cq_by_handle(uint32_t h) const {
  if (h == 0 || h > cqs_.size()) return nullptr;
  Cq* c = cqs_[h - 1].get();
  return c && c->valid ? c : nullptr;
}

Status Engine::destroy_cq(uint32_t h) {
  Cq* c = cq_by_handle(h);
  if (!c) return Error(EINVAL, "destroy_cq: unknown CQ");
  if (c->refs) return Error(EBUSY, "destroy_cq: QPs still use it");
  c->valid = false;
  return {};
}

void Engine::push_cqe(uint32_t h, const Wc& wc) {
  Cq* c = cq_by_handle(h);
  if (!c) return;
  if (c->count == c->ring.size()) {
    c->overflow = true;
    stats_.cq_overflows++;
    return;
  }
  c->ring[(c->head + c->count) % c->ring.size()] = wc;
  c->count++;
}

Result<size_t> Engine::poll_cq(uint32_t h, std::span<Wc> out) {
  Cq* c = cq_by_handle(h);
  if (!c) return Error(EINVAL, "poll_cq: unknown CQ");
  size_t n = 0;
  while (n < out.size() && c->count) {
    out[n++] = c->ring[c->head];
    c->head = (c->head + 1) % c->ring.size();
    c->count--;
  }
  if (n == 0 && c->overflow) return Error(EOVERFLOW, "poll_cq: completion queue overrun");
  return n;
}

size_t Engine::cq_depth(uint32_t h) const {
  Cq* c = cq_by_handle(h);
  return c ? c->count : 0;
}

// ---------------------------------------------------------------------------
// Queue pairs

uint32_t Engine::qp_index(uint32_t qpn) const { return ids_.unpermute(uint16_t(qpn & kIdxMask)); }

Engine::Qp* Engine::qp_by_num(uint32_t qpn) const {
  if (!(qpn >> kIdxBits)) return nullptr;  // reserved
  const uint32_t idx = qp_index(qpn);
  if (idx >= qps_.size() || !qps_[idx]) return nullptr;
  Qp* q = qps_[idx].get();
  return q->qpn == qpn ? q : nullptr;
}

Engine::Qp* Engine::live_qp(uint32_t qpn) const {
  Qp* q = qp_by_num(qpn);
  return q && !q->tomb ? q : nullptr;
}

Result<uint32_t> Engine::create_qp(const QpInitAttr& init) {
  rescan_ = true;  // some QP's next deadline may now be sooner
  if (std::find(pds_.begin(), pds_.end(), init.pd) == pds_.end())
    return Error(EINVAL, "create_qp: unknown protection domain");
  Cq* scq = cq_by_handle(init.send_cq);
  Cq* rcq = cq_by_handle(init.recv_cq);
  if (!scq || !rcq) return Error(EINVAL, "create_qp: unknown send or receive CQ");
  const QpCap& c = init.cap;
  if (c.max_send_wr == 0 || c.max_send_wr > 65536 || c.max_recv_wr > 65536)
    return Error(EINVAL, "create_qp: max_send_wr must be 1..65536 and max_recv_wr <= 65536");
  if (c.max_send_sge == 0 || c.max_send_sge > kMaxSge)
    return Error(EINVAL, "create_qp: max_send_sge must be 1.." + std::to_string(kMaxSge));
  if (init.protocol_version & ~1u) return Error(EINVAL, "create_qp: unsupported protocol version");
  if (init.send_ops_flags & ~3ull)
    return Error(EINVAL, "create_qp: only WRITE and WRITE_WITH_IMM are supported");
  size_t idx = 0;
  while (idx < qps_.size() && qps_[idx]) idx++;
  if ((idx >= cfg_.max_qps || idx > kIdxMask) && !tombs_.empty()) {
    // Tombstones never cost a live QP its slot: the oldest goes early.
    free_oldest_tomb();
    idx = 0;
    while (idx < qps_.size() && qps_[idx]) idx++;
  }
  if (idx >= cfg_.max_qps || idx > kIdxMask) return Error(ENOMEM, "create_qp: too many QPs");
  if (idx == qps_.size()) {
    qps_.push_back(nullptr);
    qp_gen_.push_back(0);
  }
  // 8 secret random bits, never 0 and never the slot's previous ones: a
  // packet for the QP that had this slot before does not reach this one.
  const uint8_t gen = uint8_t(ids_.nonzero(24 - kIdxBits, qp_gen_[idx]));
  qp_gen_[idx] = gen;
  auto q = std::make_unique<Qp>();
  q->qpn = (uint32_t(gen) << kIdxBits | ids_.permute(uint16_t(idx))) & MRC_QPN_MASK;
  q->pd = init.pd;
  q->send_cq = init.send_cq;
  q->recv_cq = init.recv_cq;
  q->cap = c;
  q->sq_sig_all = init.sq_sig_all;
  q->sq.resize(c.max_send_wr);
  q->sq_sge.resize(size_t(c.max_send_wr) * c.max_send_sge);
  q->rq.resize(std::max<uint32_t>(c.max_recv_wr, 1));
  q->attr.cap = c;
  scq->refs++;
  rcq->refs++;
  uint32_t qpn = q->qpn;
  qps_[idx] = std::move(q);
  return qpn;
}

Status Engine::destroy_qp(uint32_t qpn) {
  rescan_ = true;  // some QP's next deadline may now be sooner
  Qp* q = qp_by_num(qpn);
  if (!q) return Error(EINVAL, "destroy_qp: unknown QP " + std::to_string(qpn));
  if (q->tomb) {
    auto it =
        std::find_if(tombs_.begin(), tombs_.end(), [&](const auto& t) { return t.second == qpn; });
    if (it != tombs_.end()) tombs_.erase(it);
  }
  free_qp(qpn);
  return {};
}

void Engine::free_qp(uint32_t qpn) {
  Qp* q = qp_by_num(qpn);
  if (!q) return;
  if (Cq* c = cq_by_handle(q->send_cq)) c->refs--;
  if (Cq* c = cq_by_handle(q->recv_cq)) c->refs--;
  release_peer_rtt(*q);
  active_.erase(std::remove(active_.begin(), active_.end(), qpn), active_.end());
  txq_.erase(std::remove(txq_.begin(), txq_.end(), qpn), txq_.end());
  const uint32_t idx = qp_index(qpn);
  qps_[idx].reset();
}

std::vector<uint32_t> Engine::qp_list() const {
  std::vector<uint32_t> v;
  for (const auto& q : qps_)
    if (q && !q->tomb) v.push_back(q->qpn);
  return v;
}

// ---------------------------------------------------------------------------
// Tombstones: the QPs of an owner that is gone (service.md section 5)

Result<bool> Engine::entomb_qp(uint32_t qpn, Time until) {
  rescan_ = true;
  Qp* q = qp_by_num(qpn);
  if (!q) return Error(EINVAL, "entomb_qp: unknown QP " + std::to_string(qpn));
  if (q->tomb) return true;
  const bool peer_may_send =
      q->state == QpState::kRtr || q->state == QpState::kRts || q->state == QpState::kErr;
  if (!peer_may_send || cfg_.max_tombstones == 0) {
    free_qp(qpn);
    return false;
  }
  if (tombs_.size() >= cfg_.max_tombstones) free_oldest_tomb();
  // Nothing of the owner stays: its CQs (nobody reads them; the flush
  // below writes to no CQ), its queues and windows, its protection domain.
  if (Cq* c = cq_by_handle(q->send_cq)) c->refs--;
  if (Cq* c = cq_by_handle(q->recv_cq)) c->refs--;
  q->send_cq = q->recv_cq = 0;
  in_modify_ = true;  // no QP-fatal event: there is no one to tell
  to_error(*q, kWcWrFlushErr);
  in_modify_ = false;
  q->pd = 0;
  q->tomb = true;
  q->tomb_until = until;
  q->sack_due = false;
  std::vector<SendWqe>().swap(q->sq);
  std::vector<Sge>().swap(q->sq_sge);
  std::vector<uint64_t>().swap(q->rq);
  std::vector<TxPkt>().swap(q->win);
  std::vector<PendImm>().swap(q->imm);
  std::vector<uint32_t>().swap(q->msg_len);
  std::vector<uint32_t>().swap(q->probe_queue);
  q->sq_head = q->sq_next = q->sq_tail = q->sq_count = 0;
  q->rq_head = q->rq_count = 0;
  active_.erase(std::remove(active_.begin(), active_.end(), qpn), active_.end());
  txq_.erase(std::remove(txq_.begin(), txq_.end(), qpn), txq_.end());
  q->in_txq = false;
  auto at = std::upper_bound(tombs_.begin(), tombs_.end(), until,
                             [](Time t, const auto& e) { return t < e.first; });
  tombs_.insert(at, {until, qpn});
  stats_.tombstones++;
  return true;
}

void Engine::free_oldest_tomb() {
  if (tombs_.empty()) return;
  const uint32_t qpn = tombs_.front().second;
  tombs_.pop_front();
  stats_.tombstones_early++;
  free_qp(qpn);
  if (tombs_freed_.size() < 65536) tombs_freed_.push_back(qpn);
}

size_t Engine::poll_freed_tombstones(std::span<uint32_t> out) {
  size_t n = std::min(out.size(), tombs_freed_.size());
  std::copy(tombs_freed_.begin(), tombs_freed_.begin() + long(n), out.begin());
  tombs_freed_.erase(tombs_freed_.begin(), tombs_freed_.begin() + long(n));
  return n;
}

std::vector<uint32_t> Engine::tombstone_list() const {
  std::vector<uint32_t> v;
  for (const auto& t : tombs_) v.push_back(t.second);
  return v;
}

Result<QpAttr> Engine::query_qp(uint32_t qpn) const {
  Qp* q = qp_by_num(qpn);
  if (!q) return Error(EINVAL, "query_qp: unknown QP " + std::to_string(qpn));
  QpAttr a = q->attr;
  a.qp_state = a.cur_qp_state = q->state;
  return a;
}

Result<QpStats> Engine::qp_stats(uint32_t qpn) const {
  Qp* q = qp_by_num(qpn);
  if (!q) return Error(EINVAL, "qp_stats: unknown QP " + std::to_string(qpn));
  QpStats s = q->stats;
  s.cwnd_bytes = q->cc.enabled() ? q->cc.cwnd() : 0;
  s.inflight_bytes = q->inflight;
  s.srtt_ns = q->srtt;
  s.min_rtt_ns = q->min_rtt;
  s.reo_wnd_ns = q->reo_wnd;
  s.reo_extra_ns = q->reo_extra;
  s.dark_planes = q->dark_planes(q->silent_mask | q->quiet_mask);
  s.cc_qa_cuts = q->cc.qa_cuts();
  s.cc_qa_loss_cuts = q->cc.qa_loss_cuts();
  s.cc_qa_gated = q->cc.qa_gated();
  s.cc_ecn_decreases = q->cc.ecn_decreases();
  s.plane_lossy = q->paths.plane_lossy_events();
  s.plane_relapses = q->paths.plane_relapses();
  s.plane_hold_ns = q->paths.plane_hold_ns();
  return s;
}

// The attribute rules of OCP mrc.h on top of the verbs RC state machine.
Status Engine::check_transition(const Qp& qp, const QpAttr& a, uint32_t ibv, uint32_t mrc) const {
  auto bad = [&](const std::string& why) {
    return Error(EINVAL,
                 "modify_qp " + std::to_string(qp.qpn) + " (" + to_string(qp.state) + "): " + why);
  };
  if (ibv & kIbvUnsupported)
    return bad(
        "attribute not supported by MRC (PORT, TIMEOUT, RETRY_CNT, RNR, RD_ATOMIC, ALT_PATH, "
        "PATH_MIG)");
  if (mrc & kMrcVendorCfg) return bad("no vendor configuration is defined");
  if ((ibv & kQpCurState) && a.cur_qp_state != qp.state) return bad("cur_qp_state does not match");
  const QpState from = qp.state;
  const QpState to = (ibv & kQpState) ? a.qp_state : from;
  const uint32_t ibv_attrs = ibv & ~(kQpState | kQpCurState);
  auto require = [&](uint32_t need_ibv, uint32_t need_mrc, const char* what) -> Status {
    if ((ibv & need_ibv) != need_ibv || ((mrc | (from == to ? 0 : 0)) & need_mrc) != need_mrc)
      return bad(std::string("transition needs ") + what);
    return {};
  };
  auto only = [&](uint32_t ok_ibv, uint32_t ok_mrc) -> Status {
    if (ibv_attrs & ~ok_ibv) return bad("attribute not allowed in this transition");
    if (mrc & ~ok_mrc) return bad("MRC attribute not allowed in this transition");
    return {};
  };
  if (to == QpState::kReset || to == QpState::kErr) {
    // Any state may go to RESET or ERR, with no other attributes.
    return only(0, 0);
  }
  switch (from) {
    case QpState::kReset:
      if (to != QpState::kInit) return bad("RESET can only go to INIT");
      MRC_TRY(require(
          kQpState | kQpPkeyIndex | kQpAccessFlags, kMrcHint | kMrcEvProfileId | kMrcCcProfileId,
          "STATE, PKEY_INDEX, ACCESS_FLAGS and MRC HINT, EV_PROFILE_ID, CC_PROFILE_ID"));
      return only(kQpPkeyIndex | kQpAccessFlags, kMrcHint | kMrcEvProfileId | kMrcCcProfileId);
    case QpState::kInit:
      if (to == QpState::kInit)
        return only(kQpPkeyIndex | kQpAccessFlags, kMrcHint | kMrcEvProfileId | kMrcCcProfileId);
      if (to != QpState::kRtr) return bad("INIT can only go to RTR");
      MRC_TRY(require(kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn,
                      kMrcMaxWimmDest | kMrcMprDest,
                      "STATE, AV, PATH_MTU, DEST_QPN, RQ_PSN and MRC MAX_WIMM_DEST, MPR_DEST"));
      return only(kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpAccessFlags | kQpPkeyIndex,
                  kMrcMaxWimmDest | kMrcMprDest | kMrcCap);
    case QpState::kRtr:
      if (to != QpState::kRts) return bad("RTR can only go to RTS");
      MRC_TRY(require(kQpState | kQpSqPsn, kMrcMaxWimm | kMrcMpr | kMrcRetryCnt | kMrcTimeout,
                      "STATE, SQ_PSN and MRC MAX_WIMM, MPR, RETRY_CNT, TIMEOUT"));
      return only(kQpSqPsn | kQpAccessFlags,
                  kMrcMaxWimm | kMrcMpr | kMrcRetryCnt | kMrcTimeout | kMrcCap);
    case QpState::kRts:
      if (to != QpState::kRts) return bad("RTS can only go to RTS, RESET or ERR");
      return only(kQpAccessFlags, kMrcTimeout | kMrcRetryCnt);
    case QpState::kErr:
      return bad("ERR can only go to RESET");
  }
  return bad("invalid state");
}

Status Engine::modify_qp(uint32_t qpn, const QpAttr& a, uint32_t ibv, uint32_t mrc) {
  rescan_ = true;  // some QP's next deadline may now be sooner
  Qp* q = live_qp(qpn);
  if (!q) return Error(EINVAL, "modify_qp: unknown QP " + std::to_string(qpn));
  MRC_TRY(check_transition(*q, a, ibv, mrc));
  const QpState to = (ibv & kQpState) ? a.qp_state : q->state;
  auto bad = [&](const std::string& why) {
    return Error(EINVAL, "modify_qp " + std::to_string(qpn) + ": " + why);
  };
  // Value checks before anything changes.
  if ((mrc & kMrcEvProfileId) && a.ev_profile_id && !ev_profiles_.count(a.ev_profile_id))
    return bad("EV profile " + std::to_string(a.ev_profile_id) + " is not installed");
  if (ibv & kQpAv) {
    const uint64_t evp = (mrc & kMrcEvProfileId) ? a.ev_profile_id : q->attr.ev_profile_id;
    auto it = evp ? ev_profiles_.find(evp) : ev_profiles_.end();
    if (it != ev_profiles_.end() && it->second.fmt == codec::EvFmtMode::kSrv6) {
      bool any = false;
      for (size_t p = 1; p <= kMaxPorts; p++) {
        if (!a.av[p].valid) continue;
        if (a.av[p].ip.ver != codec::IpVersion::kV6)
          return bad("an SRv6 EV profile needs IPv6 addresses");
        for (const EvEntry& e : it->second.evs) any |= e.port == p && srv6_ends_at(e, a.av[p].ip);
      }
      if (!any)
        return bad("no SRv6 EV of profile " + std::to_string(evp) + " ends at the peer's address");
    }
  }
  if ((mrc & kMrcCcProfileId) && a.cc_profile_id && !cc_profiles_.count(a.cc_profile_id))
    return bad("CC profile " + std::to_string(a.cc_profile_id) + " is not installed");
  if ((ibv & kQpPathMtu) && (a.path_mtu < 256 || a.path_mtu > kMaxPathMtu || a.path_mtu % 64))
    return bad("path_mtu must be 256.." + std::to_string(kMaxPathMtu) +
               " bytes and a multiple of 64");
  if ((ibv & kQpAccessFlags) &&
      (a.qp_access_flags & ~(kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead)))
    return bad("unknown access flags");
  if ((mrc & kMrcMpr) && (a.mpr == 0 || a.mpr > cfg_.device.max_mpr))
    return bad("mpr must be 1..max_mpr");
  if ((mrc & kMrcMprDest) && (a.mpr_dest == 0 || a.mpr_dest > cfg_.device.max_mpr))
    return bad("mpr_dest must be 1..max_mpr");
  if ((mrc & kMrcMaxWimm) && a.max_wimm > cfg_.device.max_wimm)
    return bad("max_wimm exceeds the device limit");
  if ((mrc & kMrcMaxWimmDest) && a.max_wimm_dest > cfg_.device.max_wimm_dest)
    return bad("max_wimm_dest exceeds the device limit");
  if ((mrc & kMrcTimeout) && a.timeout > 24) return bad("timeout must be 0..24");
  if ((mrc & kMrcRetryCnt) && (a.retry_linear > 7 || a.retry_exp > 25))
    return bad("retry counts: linear 0..7, exponential 0..25");
  if ((mrc & kMrcCap) && (a.cap_flags & ~(kQpCapTrimNackDestUnsupported | kQpCapDynamicMpr |
                                          kQpCapSvcTimeDestUnsupported)))
    return bad("unknown QP capability bits");
  if ((mrc & kMrcCap) && (a.cap_flags & kQpCapDynamicMpr) && !(cfg_.device.cap & kDevCapDynamicMpr))
    return bad("dynamic MPR is not supported by the device");
  if (ibv & kQpAv) {
    bool any = false;
    for (size_t p = 1; p <= kMaxPorts; p++) {
      if (!a.av[p].valid) continue;
      any = true;
      bool local = false;
      for (const PortConfig& pc : cfg_.ports) local |= pc.port == p && pc.ip.ver == a.av[p].ip.ver;
      if (!local)
        return bad("AV names port " + std::to_string(p) +
                   " which has no address of that IP version");
    }
    if (!any) return bad("AV has no plane address");
  }
  if ((ibv & kQpDestQpn) && (a.dest_qp_num > MRC_QPN_MASK || a.dest_qp_num == MRC_QPN_ENDPOINT))
    return bad("invalid destination QPN");

  // Apply.
  QpAttr& s = q->attr;
  if (ibv & kQpAccessFlags) s.qp_access_flags = a.qp_access_flags;
  if (ibv & kQpPkeyIndex) s.pkey_index = a.pkey_index;
  if (ibv & kQpPathMtu) s.path_mtu = a.path_mtu;
  if (ibv & kQpRqPsn) s.rq_psn = a.rq_psn & MRC_PSN_MASK;
  if (ibv & kQpSqPsn) s.sq_psn = a.sq_psn & MRC_PSN_MASK;
  if (ibv & kQpDestQpn) s.dest_qp_num = a.dest_qp_num;
  if (ibv & kQpAv) s.av = a.av;
  if (mrc & kMrcHint) s.hint = a.hint;
  if (mrc & kMrcEvProfileId) s.ev_profile_id = a.ev_profile_id;
  if (mrc & kMrcCcProfileId) s.cc_profile_id = a.cc_profile_id;
  if (mrc & kMrcMaxWimmDest) s.max_wimm_dest = a.max_wimm_dest;
  if (mrc & kMrcMprDest) s.mpr_dest = a.mpr_dest;
  if (mrc & kMrcMaxWimm) s.max_wimm = a.max_wimm;
  if (mrc & kMrcMpr) s.mpr = a.mpr;
  if (mrc & kMrcTimeout) s.timeout = a.timeout;
  if (mrc & kMrcRetryCnt) s.retry_linear = a.retry_linear, s.retry_exp = a.retry_exp;
  if (mrc & kMrcCap) s.cap_flags = a.cap_flags;
  s.peer_max_wimm_dest = (ibv & kQpAv) ? a.peer_max_wimm_dest : s.peer_max_wimm_dest;
  q->have_mrc |= mrc;

  if (to == q->state) return {};
  const QpState from = q->state;
  q->state = to;
  s.qp_state = s.cur_qp_state = to;
  switch (to) {
    case QpState::kReset: {
      // Back to a fresh QP: keep CQs and caps, drop everything else.
      flush(*q, kWcWrFlushErr);
      auto keep = std::make_unique<Qp>();
      keep->qpn = q->qpn, keep->pd = q->pd, keep->send_cq = q->send_cq, keep->recv_cq = q->recv_cq;
      keep->cap = q->cap, keep->sq_sig_all = q->sq_sig_all;
      keep->sq.resize(q->cap.max_send_wr);
      keep->sq_sge.resize(size_t(q->cap.max_send_wr) * q->cap.max_send_sge);
      keep->rq.resize(std::max<uint32_t>(q->cap.max_recv_wr, 1));
      keep->attr.cap = q->cap;
      const uint32_t idx = qp_index(qpn);
      active_.erase(std::remove(active_.begin(), active_.end(), qpn), active_.end());
      txq_.erase(std::remove(txq_.begin(), txq_.end(), qpn), txq_.end());
      qps_[idx] = std::move(keep);
      break;
    }
    case QpState::kErr:
      in_modify_ = true;
      to_error(*q, kWcWrFlushErr);
      in_modify_ = false;
      break;
    case QpState::kRtr:
      enter_rtr(*q);
      break;
    case QpState::kRts:
      enter_rts(*q);
      break;
    case QpState::kInit:
      (void)from;
      break;
  }
  return {};
}

void Engine::enter_rtr(Qp& q) {
  // The QP's IP version follows its AV; the EV format follows its profile.
  for (size_t p = 1; p <= kMaxPorts; p++)
    if (q.attr.av[p].valid) q.ipver = q.attr.av[p].ip.ver;
  q.rwin.reset(q.attr.rq_psn, uint32_t(q.attr.mpr_dest) * 128);
  uint32_t wimm = std::max<uint32_t>(q.attr.max_wimm_dest, 1);
  uint32_t n = 1;
  while (n < wimm) n <<= 1;
  q.imm.assign(n, PendImm{});
  uint32_t m = 64;
  while (m < uint32_t(q.attr.mpr_dest) * 128) m <<= 1;
  q.msg_len.assign(m, 0);
  q.imm_next = 0;
  q.imm_span = 0;
  q.acks_stopped = false;
  q.first_rx = true;
  q.ce_owed = false;
  build_paths(q);
  if (std::find(active_.begin(), active_.end(), q.qpn) == active_.end()) active_.push_back(q.qpn);
}

void Engine::want_tx(Qp& q) {
  if (q.in_txq) return;
  q.in_txq = true;
  txq_.push_back(q.qpn);
}

void Engine::enter_rts(Qp& q) {
  q.next_psn = q.una = q.attr.sq_psn;
  uint32_t w = uint32_t(q.attr.mpr) * 128;
  uint32_t n = 64;
  while (n < w) n <<= 1;
  // The send window starts small and doubles as the PSNs in flight need it
  // (up to MPR x 128): an idle QP costs 2 KiB here, not MPR x 4 KiB.
  q.win_max = n;
  n = std::min<uint32_t>(n, 64);
  q.win.assign(n, TxPkt{});
  q.win_mask = n - 1;
  q.mpr_eff = w;
  q.inflight = 0;
  std::fill(std::begin(q.port_inflight), std::end(q.port_inflight), 0);
  q.lost = 0;
  q.retries = 0;
  CcProfile cc = cfg_.default_cc;
  if (q.attr.cc_profile_id) cc = cc_profiles_[q.attr.cc_profile_id];
  q.cc.configure(
      cc, q.attr.path_mtu, uint64_t(w) * q.attr.path_mtu, cfg_.cc_min_target,
      Nscc::Start{cfg_.cc_init_window, cfg_.cc_delay_md, cfg_.cc_queue_target, cfg_.cc_qa_floor,
                  cfg_.cc_qa_standing, cfg_.cc_qa_fabric, cfg_.cc_max_target,
                  cfg_.cc_qa_fabric_on_ecn, cfg_.cc_qa_rate_gate, cfg_.cc_qa_cut_full});
  hold_peer_rtt(q);
  q.reo_wnd = cfg_.min_reorder;
}

void Engine::hold_peer_rtt(Qp& q) {
  release_peer_rtt(q);
  if (!cfg_.cc_share_base_rtt) return;
  for (const PlaneAddr& a : q.attr.av) {
    if (!a.valid) continue;
    std::copy(a.ip.b.begin(), a.ip.b.end(), q.peer_rtt_key.begin());
    q.peer_rtt_key[16] = uint8_t(a.ip.ver);
    PeerRtt& e = peer_rtt_[q.peer_rtt_key];
    e.refs++;
    q.peer_rtt_held = true;
    q.cc.share_base(&e.min_rtt);  // std::map: the entry stays where it is
    return;
  }
}

void Engine::release_peer_rtt(Qp& q) {
  if (!q.peer_rtt_held) return;
  q.peer_rtt_held = false;
  q.cc.share_base(nullptr);
  auto it = peer_rtt_.find(q.peer_rtt_key);
  if (it != peer_rtt_.end() && --it->second.refs == 0) peer_rtt_.erase(it);
}

void Engine::build_paths(Qp& q) {
  EvProfile prof;
  if (q.attr.ev_profile_id) prof = ev_profiles_[q.attr.ev_profile_id];
  q.fmt = prof.fmt;
  q.event_mask = prof.event_mask;
  std::vector<EvEntry> evs;
  uint32_t active = prof.active_per_plane;
  if (prof.mode == EvMode::kAuto || prof.evs.empty()) {
    // AUTO: per plane with an AV entry, distinct random entropies per QP.
    active = active ? active : cfg_.auto_active_per_port;
    // Values are distinct in the bits the wire carries, so every echo names
    // exactly one EV.
    const uint32_t carried = codec::ev_carried_mask(prof.fmt, q.ipver);
    std::vector<uint32_t> used;
    for (size_t p = 1; p <= kMaxPorts; p++) {
      if (!q.attr.av[p].valid) continue;
      for (uint32_t k = 0; k < cfg_.auto_evs_per_port; k++) {
        uint32_t ev;
        do {
          ev = uint32_t(rng_.next()) & carried;
          if ((ev & 0xffff) < 1024) ev |= 0x8000;  // stay clear of well-known ports
        } while (std::find(used.begin(), used.end(), ev) != used.end());
        used.push_back(ev);
        evs.push_back({ev, uint8_t(p), false});
      }
    }
  } else {
    // SRv6: only the containers that end at the peer's address reach it.
    const bool srv6 = prof.fmt == codec::EvFmtMode::kSrv6;
    for (const EvEntry& e : prof.evs)
      if (e.port <= kMaxPorts && q.attr.av[e.port].valid &&
          (!srv6 || srv6_ends_at(e, q.attr.av[e.port].ip)))
        evs.push_back(e);
  }
  q.srv6_sid.clear();
  if (prof.fmt == codec::EvFmtMode::kSrv6)
    for (const EvEntry& e : evs) q.srv6_sid.push_back(e.sid);
  q.carried_mask = codec::ev_carried_mask(q.fmt, q.ipver);
  PathParams pp = cfg_.paths;
  pp.min_active = prof.ev_min_active;
  Qp* qp = &q;
  q.paths.init(evs, active, q.carried_mask, pp, rng_.next(),
               [this, qp](uint32_t i, EvState from, EvState to, EvEventReason why) {
                 ev_event(*qp, i, from, to, why);
               });
  for (uint8_t p = 1; p <= kMaxPorts; p++)
    if (!port_up(p)) q.paths.port_state(p, false);
  for (size_t p = 1; p <= kMaxPorts; p++)
    q.rev_ev[p] = (q.qpn * 2654435761u >> 8 & 0x3fff) | 0xc000;
}

uint32_t Engine::port_mask_for(const Qp& q) const {
  uint32_t m = 0;
  for (size_t p = 1; p <= kMaxPorts; p++)
    if (q.attr.av[p].valid && port_up(uint8_t(p)) && !(q.remote_down >> p & 1)) m |= 1u << p;
  return m;
}

size_t Engine::poll_qp_errors(std::span<uint32_t> out) {
  size_t n = std::min(out.size(), qp_errors_.size());
  std::copy(qp_errors_.begin(), qp_errors_.begin() + long(n), out.begin());
  qp_errors_.erase(qp_errors_.begin(), qp_errors_.begin() + long(n));
  return n;
}

void Engine::to_error(Qp& q, WcStatus first) {
  if (q.state != QpState::kErr) {
    if (!in_modify_ && qp_errors_.size() < 65536) qp_errors_.push_back(q.qpn);
    q.state = QpState::kErr;
    q.attr.qp_state = q.attr.cur_qp_state = QpState::kErr;
  }
  flush(q, first);
}

void Engine::flush(Qp& q, WcStatus first) {
  bool first_done = false;
  while (q.sq_count) {
    SendWqe& w = q.sq[q.sq_head];
    Wc wc;
    wc.wr_id = w.wr_id;
    wc.status = first_done ? kWcWrFlushErr : first;
    first_done = true;
    wc.opcode = WcOpcode::kRdmaWrite;
    wc.qp_num = q.qpn;
    wc.byte_len = w.len;
    // Errors complete every WQE, signaled or not (verbs semantics).
    push_cqe(q.send_cq, wc);
    q.sq_head = (q.sq_head + 1) % q.sq.size();
    q.sq_count--;
  }
  q.sq_next = q.sq_tail = q.sq_head;
  while (q.rq_count) {
    Wc wc;
    wc.wr_id = q.rq[q.rq_head];
    wc.status = kWcWrFlushErr;
    wc.opcode = WcOpcode::kRecvRdmaWithImm;
    wc.qp_num = q.qpn;
    push_cqe(q.recv_cq, wc);
    q.rq_head = uint32_t((q.rq_head + 1) % q.rq.size());
    q.rq_count--;
  }
  q.inflight = 0;
  std::fill(std::begin(q.port_inflight), std::end(q.port_inflight), 0);
  q.lost = 0;
  q.wimm_out = 0;
  q.una = q.next_psn;
  q.sack_deadline = kNever;
}

Status Engine::post_send(uint32_t qpn, const SendWr& wr) {
  // Only this QP's deadlines may move (arm() below), not every QP's: no
  // rescan per posted message.
  Qp* q = live_qp(qpn);
  if (!q) return Error(EINVAL, "post_send: unknown QP " + std::to_string(qpn));
  if (q->state == QpState::kErr) {
    // Verbs: accepted and completed at once with a flush error.
    Wc wc;
    wc.wr_id = wr.wr_id;
    wc.status = kWcWrFlushErr;
    wc.qp_num = qpn;
    push_cqe(q->send_cq, wc);
    return {};
  }
  if (q->state != QpState::kRts)
    return Error(EINVAL, std::string("post_send: QP is in ") + to_string(q->state));
  if (wr.opcode != WrOpcode::kRdmaWrite && wr.opcode != WrOpcode::kRdmaWriteWithImm)
    return Error(EINVAL, "post_send: only RDMA WRITE and WRITE_WITH_IMM are supported");
  if (wr.num_sge > q->cap.max_send_sge) return Error(EINVAL, "post_send: too many SGEs");
  if (wr.num_sge && !wr.sg_list) return Error(EINVAL, "post_send: null sg_list");
  if (q->sq_count == q->sq.size()) return Error(ENOMEM, "post_send: send queue full");
  // The SGEs are checked against their regions' iova ranges and stored with
  // host addresses (the gather in the requester copies from them). The slot
  // is not live until sq_tail moves, so a refusal midway leaves nothing.
  Sge* const stored = q->sq_sge.data() + size_t(q->sq_tail) * q->cap.max_send_sge;
  uint64_t total = 0;
  for (uint32_t i = 0; i < wr.num_sge; i++) {
    const Sge& g = wr.sg_list[i];
    stored[i] = g;
    total += g.length;
    if (!g.length) continue;
    const Mr* m = mr_by_key(g.lkey);
    if (!m || m->pd != q->pd)
      return Error(EINVAL, "post_send: SGE " + std::to_string(i) + " has an invalid lkey");
    if (g.addr < m->iova || g.addr + g.length < g.addr || g.addr + g.length > m->iova + m->len)
      return Error(EINVAL, "post_send: SGE " + std::to_string(i) + " is outside its memory region");
    stored[i].addr = g.addr + m->delta;
  }
  if (total > 0x80000000ull) return Error(EINVAL, "post_send: message longer than 2 GiB");
  SendWqe& w = q->sq[q->sq_tail];
  w = SendWqe{};
  w.wr_id = wr.wr_id;
  w.imm_op = wr.opcode == WrOpcode::kRdmaWriteWithImm;
  w.signaled = q->sq_sig_all || (wr.send_flags & kSendSignaled);
  w.remote_addr = wr.remote_addr;
  w.rkey = wr.rkey;
  w.imm = wr.imm_data;
  w.len = uint32_t(total);
  w.nsge = wr.num_sge;
  w.npkts = std::max<uint32_t>(1, (w.len + q->attr.path_mtu - 1) / q->attr.path_mtu);
  q->sq_tail = uint32_t((q->sq_tail + 1) % q->sq.size());
  q->sq_count++;
  if (q->state == QpState::kRts) want_tx(*q);
  arm(*q);
  return {};
}

Status Engine::post_recv(uint32_t qpn, const RecvWr& wr) {
  Qp* q = live_qp(qpn);
  if (!q) return Error(EINVAL, "post_recv: unknown QP " + std::to_string(qpn));
  if (q->state == QpState::kReset) return Error(EINVAL, "post_recv: QP is in RESET");
  if (wr.num_sge > q->cap.max_recv_sge) return Error(EINVAL, "post_recv: too many SGEs");
  if (q->state == QpState::kErr) {
    Wc wc;
    wc.wr_id = wr.wr_id;
    wc.status = kWcWrFlushErr;
    wc.opcode = WcOpcode::kRecvRdmaWithImm;
    wc.qp_num = qpn;
    push_cqe(q->recv_cq, wc);
    return {};
  }
  if (q->rq_count == q->cap.max_recv_wr) return Error(ENOMEM, "post_recv: receive queue full");
  q->rq[(q->rq_head + q->rq_count) % q->rq.size()] = wr.wr_id;
  q->rq_count++;  // no deadline depends on the receive queue: nothing to arm
  return {};
}

// ---------------------------------------------------------------------------
// Profiles, controller hooks, events

Status Engine::install_ev_profile(uint64_t id, EvProfile p) {
  rescan_ = true;  // some QP's next deadline may now be sooner
  if (id == 0) return Error(EINVAL, "EV profile id 0 is reserved for AUTO");
  if (ev_profile_in_use(id))
    return Error(EBUSY, "EV profile " + std::to_string(id) + " is used by active QPs");
  if (p.ev_min_active > p.evs.size() && p.mode != EvMode::kAuto)
    return Error(EINVAL, "ev_min_active exceeds ev_count");
  for (const EvEntry& e : p.evs)
    if (e.port == 0 || e.port > kMaxPorts) return Error(EINVAL, "EV port must be 1..16");
  MRC_TRY(srv6_check_profile(p));
  ev_profiles_[id] = std::move(p);
  return {};
}

Status Engine::remove_ev_profile(uint64_t id) {
  rescan_ = true;  // some QP's next deadline may now be sooner
  if (ev_profile_in_use(id))
    return Error(EBUSY, "EV profile " + std::to_string(id) + " is used by active QPs");
  if (!ev_profiles_.erase(id))
    return Error(EINVAL, "EV profile " + std::to_string(id) + " is not installed");
  return {};
}

Status Engine::install_cc_profile(uint64_t id, CcProfile p) {
  rescan_ = true;  // some QP's next deadline may now be sooner
  if (id == 0) return Error(EINVAL, "CC profile id 0 is reserved (default)");
  if (cc_profile_in_use(id))
    return Error(EBUSY, "CC profile " + std::to_string(id) + " is used by active QPs");
  cc_profiles_[id] = p;
  return {};
}

Status Engine::remove_cc_profile(uint64_t id) {
  rescan_ = true;  // some QP's next deadline may now be sooner
  if (cc_profile_in_use(id))
    return Error(EBUSY, "CC profile " + std::to_string(id) + " is used by active QPs");
  if (!cc_profiles_.erase(id))
    return Error(EINVAL, "CC profile " + std::to_string(id) + " is not installed");
  return {};
}

bool Engine::ev_profile_in_use(uint64_t id) const {
  for (const auto& q : qps_)
    if (q && !q->tomb && q->attr.ev_profile_id == id && q->state != QpState::kReset) return true;
  return false;
}

bool Engine::cc_profile_in_use(uint64_t id) const {
  for (const auto& q : qps_)
    if (q && !q->tomb && q->attr.cc_profile_id == id && q->state != QpState::kReset) return true;
  return false;
}

Status Engine::set_ev_denied(uint64_t profile, uint32_t ev, uint8_t port, bool denied) {
  rescan_ = true;  // some QP's next deadline may now be sooner
  auto it = ev_profiles_.find(profile);
  if (it == ev_profiles_.end())
    return Error(EINVAL, "EV profile " + std::to_string(profile) + " is not installed");
  bool found = false;
  for (EvEntry& e : it->second.evs)
    if (e.ev == ev && e.port == port) e.denied = denied, found = true;
  if (!found) return Error(ENOENT, "EV not in profile " + std::to_string(profile));
  for (const auto& q : qps_) {
    if (!q || q->tomb || q->attr.ev_profile_id != profile || q->state == QpState::kReset ||
        q->paths.size() == 0)
      continue;
    for (uint32_t i = 0; i < q->paths.size(); i++) {
      const auto& e = q->paths.at(i);
      if (e.ev == ev && e.port == port) q->paths.deny(i, denied);
    }
  }
  return {};
}

Result<std::vector<PathSet::Ev>> Engine::qp_evs(uint32_t qpn) const {
  Qp* q = qp_by_num(qpn);
  if (!q) return Error(EINVAL, "qp_evs: unknown QP " + std::to_string(qpn));
  std::vector<PathSet::Ev> v;
  for (uint32_t i = 0; i < q->paths.size(); i++) v.push_back(q->paths.at(i));
  return v;
}

void Engine::ev_event(Qp& q, uint32_t idx, EvState from, EvState to, EvEventReason why) {
  const auto& e = q.paths.at(idx);
  // Counters count transitions; failed probes and suppressed demotions are
  // reported with from == to and are not retirements.
  if (from != to) {
    switch (to) {
      case EvState::kSkip:
        q.stats.ev_skips++;
        break;
      case EvState::kAssumedBad:
        q.stats.ev_assumed_bad++;
        break;
      default:
        break;
    }
  }
  if (why == EvEventReason::kProbeOk) q.stats.ev_readmitted++;
  if (why == EvEventReason::kSpurious) q.stats.ev_undone++;
  if (why == EvEventReason::kRelapse) q.stats.ev_relapses++;
  if (why == EvEventReason::kPromoted) q.stats.ev_promoted++;
  bool report;
  if (cfg_.report_all_ev_events) {
    report = true;
  } else {
    uint32_t a = ev_api_state(from), b = ev_api_state(to);
    report = a != b && (b & q.event_mask & (kEvGood | kEvAssumedBad));
  }
  if (!report) return;
  if (ev_count_ == ev_events_.size()) {
    ev_dropped_++;
    stats_.ev_events_dropped++;
    return;
  }
  EvEvent& ev = ev_events_[(ev_head_ + ev_count_) % ev_events_.size()];
  ev = EvEvent{q.attr.ev_profile_id, q.qpn, e.ev, e.port, from, to, why, ev_dropped_, now_};
  ev_dropped_ = 0;
  ev_count_++;
}

size_t Engine::poll_ev_events(std::span<EvEvent> out) {
  size_t n = 0;
  while (n < out.size() && ev_count_) {
    out[n++] = ev_events_[ev_head_];
    ev_head_ = (ev_head_ + 1) % ev_events_.size();
    ev_count_--;
  }
  return n;
}

bool Engine::port_up(uint8_t port) const { return port < 32 && !(ports_down_ >> port & 1); }

void Engine::set_port_state(uint8_t port, bool up, Time now) {
  rescan_ = true;  // some QP's next deadline may now be sooner
  now_ = now;
  if (port == 0 || port > kMaxPorts || port_up(port) == up) return;
  if (up)
    ports_down_ &= ~(1u << port);
  else
    ports_down_ |= 1u << port;
  uint32_t status = 0;
  for (const PortConfig& pc : cfg_.ports)
    if (port_up(pc.port)) status |= 1u << (pc.port - 1);
  std::vector<codec::IpAddr> told;
  for (const auto& qp : qps_) {
    if (!qp || qp->tomb || qp->paths.size() == 0) continue;
    Qp& q = *qp;
    q.paths.port_state(port, up);
    if (!up && q.win_ready()) {
      // Everything in flight on that port is gone: resend it elsewhere at once.
      for (uint32_t psn = q.una; psn != q.next_psn; psn = codec::psn_add(psn, 1)) {
        TxPkt& t = q.pkt(psn);
        if (t.port == port && !(t.flags & (kTxSacked | kTxLost))) {
          t.flags |= kTxNacked;
          mark_lost(q, psn, false, EvEventReason::kPortDown, now);
        }
      }
    }
    // Tell the peer on a plane that works (Port Status Update endpoint op).
    for (size_t p = 1; p <= kMaxPorts; p++) {
      if (!q.attr.av[p].valid || !port_up(uint8_t(p))) continue;
      const codec::IpAddr& peer = q.attr.av[p].ip;
      bool dup = false;
      for (const auto& t : told) dup |= t == peer;
      if (dup) break;
      told.push_back(peer);
      Ctrl c;
      c.kind = CtrlKind::kEpRequest;
      c.port = uint8_t(p);
      c.peer = peer;
      c.peer_mac = q.attr.av[p].mac;
      c.ev = q.rev_ev[p];
      c.req_id = next_probe_id_++;
      c.op = MRC_EP_OP_PORT_STATUS_UPDATE;
      c.port_status = status;
      ctrl_->push(c);
      break;
    }
  }
}

void Engine::set_receive_penalty(uint8_t pen, bool restore) {
  rescan_ = true;  // some QP's next deadline may now be sooner
  rcv_pen_ = pen > 127 ? 127 : pen;
  rcv_restore_ = restore;
}

Status Engine::send_ep_request(const EpRequest& r, Time now) {
  rescan_ = true;  // some QP's next deadline may now be sooner
  if (r.op > MRC_EP_OP_EV_PROBE) return Error(EINVAL, "endpoint request: unknown operation");
  if (r.port == 0 || r.port > kMaxPorts)
    return Error(EINVAL, "endpoint request: port must be 1..16");
  bool have = false;
  for (const PortConfig& pc : cfg_.ports) have |= pc.port == r.port && pc.ip.ver == r.dst.ver;
  if (!have)
    return Error(EINVAL, "endpoint request: no local address of that IP version on the port");
  if (!port_up(r.port)) return Error(EIO, "endpoint request: port is down");
  for (const auto& p : ep_pending_)
    if (p.req_id == r.req_id)
      return Error(EINVAL,
                   "endpoint request: req_id " + std::to_string(r.req_id) + " is outstanding");
  Ctrl c;
  c.kind = CtrlKind::kEpRequest;
  c.port = r.port;
  c.peer = r.dst;
  c.peer_mac = r.dst_mac;
  c.ev = r.ev;
  c.req_id = r.req_id;
  c.op = r.op;
  c.port_status = r.port_status;
  c.dscp = r.dscp;
  ctrl_->push(c);
  ep_pending_.push_back({r.req_id, now});
  return {};
}

size_t Engine::poll_ep_responses(std::span<EpResponse> out) {
  size_t n = std::min(out.size(), ep_rsp_.size());
  std::copy(ep_rsp_.begin(), ep_rsp_.begin() + long(n), out.begin());
  ep_rsp_.erase(ep_rsp_.begin(), ep_rsp_.begin() + long(n));
  return n;
}

// ---------------------------------------------------------------------------
// Frames in

void Engine::rx(std::span<const RxFrame> frames, Time now) {
  now_ = now;
  codec::Packet p;
  for (const RxFrame& f : frames) {
    stats_.rx_frames++;
    stats_.rx_bytes += f.len;
    for (const codec::FrameSeg& s : f.more) stats_.rx_bytes += s.len;
    codec::ParseError e = codec::parse({f.data, f.len}, cfg_.codec, p, f.more);
    if (e == codec::ParseError::kNotMrc) {
      stats_.rx_not_mrc++;
      continue;
    }
    if (e != codec::ParseError::kOk) {
      stats_.rx_parse_errors[size_t(e)]++;
      continue;
    }
    const Time rx_ts = f.rx_ts ? f.rx_ts : now;
    const uint8_t op = p.bth.opcode;
    if (op == MRC_OP_EP_REQUEST) {
      on_ep_request(p, f.port, rx_ts, now);
      rescan_ = true;
      continue;
    }
    if (op == MRC_OP_EP_RESPONSE) {
      on_ep_response(p, f.port, now);
      rescan_ = true;
      continue;
    }
    Qp* q = qp_by_num(p.bth.dqpn);
    if (!q) {
      stats_.rx_unknown_qp++;
      continue;
    }
    if (codec::is_data_opcode(op) || op == MRC_OP_PROBE) {
      if (q->state == QpState::kErr && q->fail_nack) {
        // Failed by a WriteIMM without a receive: every request hears why
        // (the requester fails only on a refusal of a PSN it resent).
        q->stats.fail_renacks++;
        if (q->tomb) stats_.tomb_naks++;
        queue_nack(*q, q->fail_psn, MRC_NACK_UNEXP_EVENT, 0, 0, f.port);
        continue;
      }
      if (q->tomb) {
        // Its owner is gone: the request is refused (nothing is placed),
        // and its resend refused again fails the peer's QP (REM_OP_ERR).
        stats_.tomb_naks++;
        queue_aeth_nak(*q, p.bth.psn, kAethNakRemoteOp, f.port);
        continue;
      }
      if (q->state != QpState::kRtr && q->state != QpState::kRts) {
        stats_.rx_bad_state++;
        continue;
      }
      if (op == MRC_OP_PROBE)
        on_probe(*q, p, f.port, rx_ts);
      else if (p.trim != codec::TrimKind::kNone)
        on_trimmed(*q, p, f.port, rx_ts);
      else
        on_data(*q, p, f.port, rx_ts, now);
      arm(*q);
      continue;
    }
    if (q->state != QpState::kRts) {
      stats_.rx_bad_state++;
      continue;
    }
    switch (op) {
      case MRC_OP_SACK:
        on_sack(*q, p, f.port, rx_ts, now);
        break;
      case MRC_OP_NACK:
        on_nack(*q, p, now);
        break;
      case MRC_OP_ACK:
        on_aeth(*q, p, now);
        break;
      default:
        stats_.rx_unexpected++;
        break;
    }
    // The window may have opened: a QP parked by tx() sends again.
    if (q->state == QpState::kRts && q->has_tx_work()) want_tx(*q);
    arm(*q);
  }
  // SACKs owed for data volume go out once per QP and burst, triggered by
  // the burst's last packet: a driver that hands over 64 frames at a time
  // answers them with one SACK, not one per sack_bytes.
  for (uint32_t qpn : sack_due_) {
    Qp* q = qp_by_num(qpn);
    if (!q || !q->sack_due) continue;
    q->sack_due = false;
    if (q->state == QpState::kRtr || q->state == QpState::kRts) {
      // A burst with marks: its last marked packet is the trigger, so the
      // verdict lands on that packet's EV (queue_sack adds the ECN flag).
      if (q->ce_owed)
        queue_sack(*q, q->ce_last, MRC_MP_SKIP_ONCE, false, false);
      else
        queue_sack(*q, q->last, MRC_MP_NONE, false, false);
    }
  }
  sack_due_.clear();
}

// ---------------------------------------------------------------------------
// Endpoint operations

void Engine::on_ep_request(const codec::Packet& p, uint8_t port, Time rx_ts, Time now) {
  stats_.ep_requests++;
  if (p.erth.op == MRC_EP_OP_PORT_STATUS_UPDATE && port >= 1 && port <= 32 &&
      !(p.erth.port_status >> (port - 1) & 1)) {
    // It came through the plane it calls down: forged. Answered, not believed.
    stats_.ep_bad_port_status++;
  } else if (p.erth.op == MRC_EP_OP_PORT_STATUS_UPDATE) {
    // The sender's ports: bit N-1 = port N up. Peers stop using its down planes.
    uint32_t down = 0;
    for (size_t n = 1; n <= kMaxPorts; n++)
      if (!(p.erth.port_status >> (n - 1) & 1)) down |= 1u << n;
    for (const auto& qp : qps_) {
      if (!qp || !qp->win_ready()) continue;
      Qp& q = *qp;
      bool peer = false;
      for (size_t n = 1; n <= kMaxPorts; n++)
        peer |= q.attr.av[n].valid && q.attr.av[n].ip == p.ip.src;
      if (!peer) continue;
      remote_ports(q, down, now);
    }
  }
  Ctrl c;
  c.kind = CtrlKind::kEpResponse;
  c.port = port;
  c.peer = p.ip.src;
  c.peer_mac = p.eth.src;
  c.ev = p.erth.entropy;
  c.req_id = p.erth.req_id;
  c.op = p.erth.op;
  c.vendor_info = p.erth.vendor_info;  // echoed: mrcd marks its own requests
  c.ts_echo = p.erth.tx_ts;
  c.rx_port = port;
  c.svc_ns = uint32_t(now > rx_ts ? now - rx_ts : 0);
  ctrl_->push(c);
}

void Engine::on_ep_response(const codec::Packet& p, uint8_t port, Time now) {
  stats_.ep_responses_rx++;
  auto it = std::find_if(ep_pending_.begin(), ep_pending_.end(),
                         [&](const EpPending& e) { return e.req_id == p.eeth.req_id; });
  if (it == ep_pending_.end()) {
    stats_.ep_unsolicited++;  // late, duplicated or forged
    return;
  }
  EpResponse r;
  r.req_id = p.eeth.req_id;
  r.op = p.eeth.op;
  r.port = port;
  r.rx_port = p.eeth.rx_port;
  Time rtt = now - it->sent;
  if (p.eeth.flags & MRC_EETH_F_SVC_TIME) {
    rtt = rtt > p.eeth.svc_time_ns ? rtt - p.eeth.svc_time_ns : 0;
    r.adj_svc_time = true;
  }
  r.rtt_ns = uint32_t(std::min<Time>(rtt, 0xffffffffu));
  r.port_status = p.eeth.port_status;
  r.from = p.ip.src;
  ep_rsp_.push_back(r);
  ep_pending_.erase(it);
}

// ---------------------------------------------------------------------------
// Frames out

void Engine::fill_l2l3(codec::Packet& pk, const Qp& q, uint8_t port, uint32_t ev) const {
  const PortConfig* pc = nullptr;
  for (const PortConfig& c : cfg_.ports)
    if (c.port == port && c.ip.ver == q.ipver) pc = &c;
  if (pc) {
    pk.eth.src = pc->mac;
    pk.ip.src = pc->ip;
  }
  pk.eth.dst = q.attr.av[port].mac;
  pk.ip.dst = q.attr.av[port].ip;
  pk.ip.src.ver = pk.ip.dst.ver = q.ipver;
  pk.ip.ttl = 64;
  pk.udp.dport = cfg_.codec.udp_port;
  codec::ev_apply(ev, q.fmt, pk.ip, pk.udp);
}

bool Engine::emit_ctrl(const Ctrl& queued, TxSink& sink, Time now) {
  const Ctrl& c = queued;
  bool then_oldest = false;
  codec::Packet pk;
  pk.ip.dscp = c.dscp ? c.dscp : cfg_.codec.dscp.control;
  Qp* q = nullptr;
  if (c.kind == CtrlKind::kEpRequest || c.kind == CtrlKind::kEpResponse) {
    const PortConfig* pc = nullptr;
    for (const PortConfig& x : cfg_.ports)
      if (x.port == c.port && x.ip.ver == c.peer.ver) pc = &x;
    if (!pc) return true;  // nothing to send it from: drop
    pk.eth.src = pc->mac;
    pk.eth.dst = c.peer_mac;
    pk.ip.src = pc->ip;
    pk.ip.dst = c.peer;
    pk.udp.dport = cfg_.codec.udp_port;
    codec::ev_apply(c.ev, codec::EvFmtMode::kStev, pk.ip, pk.udp);
    pk.bth.dqpn = MRC_QPN_ENDPOINT;
    if (c.kind == CtrlKind::kEpRequest) {
      pk.bth.opcode = MRC_OP_EP_REQUEST;
      pk.erth.op = c.op;
      pk.erth.req_id = c.req_id;
      pk.erth.port_status = c.port_status;
      pk.erth.tx_ts = ts16(now);
      pk.erth.entropy = c.ev;
    } else {
      pk.bth.opcode = MRC_OP_EP_RESPONSE;
      pk.eeth.op = c.op;
      pk.eeth.vendor_info = c.vendor_info;
      pk.eeth.req_id = c.req_id;
      uint32_t st = 0;
      for (const PortConfig& x : cfg_.ports)
        if (port_up(x.port)) st |= 1u << (x.port - 1);
      pk.eeth.port_status = st;
      pk.eeth.tx_ts_echo = c.ts_echo;
      pk.eeth.entropy = c.ev;
      pk.eeth.rx_port = c.rx_port;
      pk.eeth.flags = MRC_EETH_F_SVC_TIME;
      pk.eeth.svc_time_ns = c.svc_ns;
      pk.eeth.rsp_ts_ns = now;
      stats_.ep_responses_tx++;
    }
  } else {
    q = qp_by_num(c.qpn);
    if (!q || q->state == QpState::kReset) return true;  // QP went away: drop
    // A QP failed by a WriteIMM that found no receive acknowledges nothing
    // more: its cumulative point covers that message, and a SACK would
    // complete it at the requester.
    if (c.kind == CtrlKind::kSack && q->acks_stopped) return true;
    fill_l2l3(pk, *q, c.port, q->rev_ev[c.port]);
    pk.ip.dscp = cfg_.codec.dscp.control;
    pk.bth.dqpn = q->attr.dest_qp_num;
    switch (c.kind) {
      case CtrlKind::kSack: {
        pk.bth.opcode = MRC_OP_SACK;
        const uint32_t cack = q->rwin.cack();
        pk.bth.psn = cack;
        // A trigger more than 63 PSNs past the cumulative point leaves the
        // oldest PSNs out of its bitmap: a second SACK reports them, so the
        // requester hears about old holes and new arrivals alike.
        then_oldest = codec::psn_diff(c.psn, q->rwin.next_expected()) > 63;
        auto s = q->rwin.sack(c.psn);
        pk.seth.verdict = c.code;
        pk.seth.probe_resp = c.probe_resp;
        int32_t off = codec::psn_diff(c.psn, cack);
        pk.seth.ack_psn_offset = int16_t(std::clamp(off, -32768, 32767));
        pk.seth.entropy = c.entropy;
        pk.seth.spdcid = uint16_t(q->qpn);
        pk.seth.dpdcid = uint16_t(q->attr.dest_qp_num);
        uint8_t down = 0;
        for (uint8_t n = 1; n <= 8; n++)
          if (!port_up(n)) down |= uint8_t(1u << (n - 1));
        pk.seth.port_down_mask = down;
        pk.seth.cack_psn = cack;
        pk.seth.cc_type = MRC_CC_TYPE_NSCC;
        pk.seth.cc_flags = c.ecn ? MRC_CC_F_ECN_CE : 0;
        pk.seth.mpr = (q->attr.cap_flags & kQpCapDynamicMpr) ? q->attr.mpr_dest : 0;
        pk.seth.sack_offset = s.sack_offset;
        pk.seth.sack_bitmap = s.bitmap;
        pk.cc.tx_ts_echo = c.ts_echo;
        pk.cc.ooo_count = uint16_t(std::min<uint32_t>(q->rwin.out_of_order(), MRC_CC_OOO_MASK));
        pk.cc.rcv_cwnd_pen = rcv_pen_;
        pk.cc.restore_cwnd = rcv_restore_;
        pk.cc.rcvd_bytes = uint32_t(q->rcvd_bytes >> MRC_RCVD_SHIFT) & MRC_CC_RCVD_MASK;
        // MRC's service time: how long this host held the trigger, from
        // its arrival at XDP to now (a peer that cannot parse it has
        // SVC_TIME_DEST_UNSUPPORTED on this QP).
        pk.cc.has_svc = c.rx_ts && (cfg_.device.cap & kDevCapSvcTime) &&
                        !(q->attr.cap_flags & kQpCapSvcTimeDestUnsupported);
        if (pk.cc.has_svc)
          pk.cc.svc_time_ns = uint32_t(std::min<Time>(now > c.rx_ts ? now - c.rx_ts : 0, ~0u));
        q->stats.tx_sacks++;
        q->unacked_bytes = 0;
        break;
      }
      case CtrlKind::kNack:
        pk.bth.opcode = MRC_OP_NACK;
        pk.bth.psn = c.psn;
        pk.neth.reason = c.code;
        pk.neth.entropy = c.entropy;
        pk.neth.spdcid = uint16_t(q->qpn);
        pk.neth.dpdcid = uint16_t(q->attr.dest_qp_num);
        pk.neth.nack_psn = c.psn;
        pk.neth.cc_type = MRC_CC_TYPE_NSCC;
        pk.neth.tx_ts_echo = c.ts_echo;
        q->stats.tx_nacks++;
        break;
      case CtrlKind::kAethNak:
        pk.bth.opcode = MRC_OP_ACK;
        pk.bth.psn = c.psn;
        pk.aeth.syndrome = c.code;
        pk.aeth.msn = q->msn;
        break;
      default:
        return true;
    }
  }
  uint32_t cap = 0;
  uint8_t* buf = sink.alloc(c.port, &cap);
  if (!buf) return false;
  size_t n = codec::build(pk, {buf, cap});
  if (!n) {
    sink.commit(c.port, 0);
    return true;
  }
  sink.commit(c.port, uint32_t(n));
  stats_.tx_frames++;
  stats_.tx_bytes += n;
  if (then_oldest) {
    // Right behind it, the same SACK with the bitmap from cack + 1; the
    // verdict went with the first. It keeps the timestamp echo, which the
    // requester needs to believe it (security.md) and samples only once.
    // A full port loses it.
    auto s = q->rwin.sack(c.psn, true);
    pk.seth.sack_offset = s.sack_offset;
    pk.seth.sack_bitmap = s.bitmap;
    pk.seth.verdict = MRC_MP_NONE;
    pk.seth.cc_flags = 0;
    buf = sink.alloc(c.port, &cap);
    if (!buf) return true;
    n = codec::build(pk, {buf, cap});
    sink.commit(c.port, uint32_t(n));
    if (!n) return true;
    q->stats.tx_sacks++;
    stats_.tx_frames++;
    stats_.tx_bytes += n;
  }
  return true;
}

size_t Engine::tx_control(TxSink& sink, Time now, size_t budget) {
  now_ = now;
  size_t sent = 0;
  while (sent < budget && !ctrl_->empty()) {
    if (!emit_ctrl(ctrl_->front(), sink, now)) break;  // port full: retry later
    ctrl_->pop();
    sent++;
  }
  return sent;
}

bool Engine::tx_ready() const {
  if (!ctrl_->empty()) return true;
  for (uint32_t qpn : active_) {
    const Qp* q = qp_by_num(qpn);
    if (!q || q->state != QpState::kRts) continue;
    if (q->lost) return true;
    if (q->sq_next != q->sq_tail || (q->sq_count && q->sq[q->sq_next].started &&
                                     q->sq[q->sq_next].sent < q->sq[q->sq_next].npkts))
      return true;
  }
  return false;
}

void Engine::arm(Qp& q) {
  const Time d = qp_deadline(q);
  if (d >= q.armed) return;  // its live entry comes up no later
  q.armed = d;
  timer_heap_.emplace_back(d, q.qpn);
  std::push_heap(timer_heap_.begin(), timer_heap_.end(), std::greater<>());
  // Stale entries pile up when deadlines keep moving forward between
  // expiries (a QP re-armed by every received packet): rebuild now and then.
  if (timer_heap_.size() > 4 * active_.size() + 4096) rescan_ = true;
}

void Engine::run_timers(Qp& q, Time now) {
  if (q.state == QpState::kRtr || q.state == QpState::kRts) {
    if (q.sack_deadline <= now) {
      q.sack_deadline = kNever;
      if (q.last.valid) queue_sack(q, q.last, MRC_MP_NONE, false, false);
    }
  }
  if (q.state == QpState::kRts) requester_timers(q, now);
}

void Engine::tx_done(Time now) {
  for (const TxLog& l : tx_log_) {
    Qp* q = qp_by_num(l.qpn);
    if (!q || !q->win_ready() || codec::psn_diff(l.psn, q->una) < 0 ||
        codec::psn_diff(q->next_psn, l.psn) <= 0)
      continue;  // gone or acknowledged already
    TxPkt& t = q->pkt(l.psn);
    if (t.sent == l.stamp && now > l.stamp) t.hold = uint32_t(std::min<Time>(now - l.stamp, ~0u));
  }
  tx_log_.clear();
}

size_t Engine::tx(TxSink& sink, Time now, size_t budget) {
  now_ = now;
  size_t sent = 0;
  // Tombstones whose linger is over go (their answers already queued are
  // dropped: the QP is gone).
  while (!tombs_.empty() && tombs_.front().first <= now) {
    const uint32_t qpn = tombs_.front().second;
    tombs_.pop_front();
    free_qp(qpn);
    if (tombs_freed_.size() < 65536) tombs_freed_.push_back(qpn);
  }
  // Timers first: they may queue control frames and retransmissions. Only
  // the QPs whose deadline came run theirs (the heap), so with many QPs a
  // timer costs O(log QPs), not a walk over all of them.
  if (rescan_) {
    rescan_ = false;
    timer_heap_.clear();
    for (uint32_t qpn : active_)
      if (Qp* q = qp_by_num(qpn)) {
        q->armed = kNever;
        run_timers(*q, now);
        // What an API call changed (ports, EVs, attributes) may unblock a
        // QP tx() parked.
        if (q->state == QpState::kRts && q->has_tx_work()) want_tx(*q);
      }
    for (uint32_t qpn : active_)
      if (Qp* q = qp_by_num(qpn)) arm(*q);
  } else if (!timer_heap_.empty() && timer_heap_.front().first <= now) {
    // Take every entry that came up, then run them: a QP still due after
    // its timers ran (a probe waiting for a port) is armed for the next
    // call, not run again in this one.
    timers_due_.clear();
    while (!timer_heap_.empty() && timer_heap_.front().first <= now) {
      std::pop_heap(timer_heap_.begin(), timer_heap_.end(), std::greater<>());
      const auto [t, qpn] = timer_heap_.back();
      timer_heap_.pop_back();
      Qp* q = qp_by_num(qpn);
      if (!q || q->armed != t) continue;  // stale: the QP is gone or has an earlier entry
      q->armed = kNever;
      timers_due_.push_back(qpn);
    }
    for (uint32_t qpn : timers_due_)
      if (Qp* q = qp_by_num(qpn)) run_timers(*q, now);
    for (uint32_t qpn : timers_due_)
      if (Qp* q = qp_by_num(qpn)) arm(*q);
  }
  sent += tx_control(sink, now, budget - sent);
  // Data: round-robin over the QPs that may have something to send, up to
  // tx_quantum payload bytes per QP per turn (one packet when 0). A QP found
  // with nothing to send (no probe, retransmission or unsent packet: the
  // common case with many QPs waiting for acknowledgements), or blocked by
  // its window with packets in flight, leaves the list until want_tx() puts
  // it back.
  uint32_t port_full = 0;
  size_t idle = 0;
  while (sent < budget && !txq_.empty() && idle < txq_.size()) {
    rr_ = (rr_ + 1) % txq_.size();
    Qp* q = qp_by_num(txq_[rr_]);
    if (!q || q->state != QpState::kRts || !q->has_tx_work()) {
      if (q) q->in_txq = false;
      txq_[rr_] = txq_.back();
      txq_.pop_back();
      rr_ = (rr_ + txq_.size() - 1) % std::max<size_t>(txq_.size(), 1);  // the moved entry is next
      continue;
    }
    // A QP that had nothing outstanding starts its ACK timeout and tail-loss
    // timer with this packet.
    const bool was_idle = q->una == q->next_psn;
    const uint64_t turn_start = q->stats.tx_data_bytes;
    bool any = false;
    while (sent < budget && emit_data(*q, sink, now, port_full)) {
      sent++;
      any = true;
      if (q->stats.tx_data_bytes - turn_start >= cfg_.tx_quantum || q->state != QpState::kRts)
        break;
    }
    if (any) {
      idle = 0;
      if (was_idle) arm(*q);
    } else if (q->una != q->next_psn && !q->tlp_pending && q->probe_queue.empty() &&
               (q->inflight + q->attr.path_mtu > q->cc.cwnd() ||
                uint32_t(codec::psn_diff(q->next_psn, q->una)) >= q->mpr_eff)) {
      // Its congestion or MPR window is full: only an acknowledgement (rx())
      // or one of its timers (a loss frees the window: mark_lost; a
      // tail-loss probe) lets it send again, and those put it back. With
      // hundreds of QPs waiting for their windows, each call would otherwise
      // walk them all to find nothing to send.
      q->in_txq = false;
      txq_[rr_] = txq_.back();
      txq_.pop_back();
      rr_ = (rr_ + txq_.size() - 1) % std::max<size_t>(txq_.size(), 1);
    } else {
      idle++;
    }
  }
  return sent;
}

Time Engine::next_deadline() const {
  if (!ctrl_->empty() || rescan_) return 0;  // tx() has work now
  // The earliest entry; if stale, tx() finds nothing due and waits again.
  const Time t = timer_heap_.empty() ? kNever : timer_heap_.front().first;
  return tombs_.empty() ? t : std::min(t, tombs_.front().first);
}

}  // namespace mrc::core
