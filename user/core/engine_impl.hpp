// Internal state of the engine, shared by engine.cc (objects, state machine,
// scheduling), requester.cc and responder.cc. Not installed.
#pragma once

#include <algorithm>
#include <vector>

#include "codec/psn_window.hpp"
#include "core/engine.hpp"

namespace mrc::core {

// A FIFO on a power-of-two ring that only allocates when it has to grow.
template <class T>
class Ring {
 public:
  bool empty() const { return n_ == 0; }
  size_t size() const { return n_; }
  T& front() { return v_[h_]; }
  void pop() {
    h_ = (h_ + 1) & (v_.size() - 1);
    n_--;
  }
  void push(const T& x) {
    if (n_ == v_.size()) grow();
    v_[(h_ + n_) & (v_.size() - 1)] = x;
    n_++;
  }
  void clear() { h_ = n_ = 0; }

 private:
  void grow() {
    std::vector<T> w(v_.empty() ? 64 : v_.size() * 2);
    for (size_t i = 0; i < n_; i++) w[i] = v_[(h_ + i) & (v_.size() - 1)];
    v_.swap(w);
    h_ = 0;
  }
  std::vector<T> v_;
  size_t h_ = 0, n_ = 0;
};

struct Engine::Mr {
  uint32_t pd = 0;
  // [iova, iova + len) is the range SGEs and RETHs name; its bytes are at
  // va + delta (delta = host - iova, modulo 2^64: one add per SGE/packet).
  uint64_t iova = 0;
  uint64_t delta = 0;
  size_t len = 0;
  uint32_t access = 0;
  uint32_t key = 0;
  bool valid = false;
};

struct Engine::Cq {
  std::vector<Wc> ring;
  size_t head = 0, count = 0;
  bool overflow = false;
  bool valid = false;
  uint32_t refs = 0;
};

struct SendWqe {
  uint64_t wr_id = 0;
  bool imm_op = false;
  bool signaled = false;
  uint64_t remote_addr = 0;
  uint32_t rkey = 0, imm = 0;
  uint32_t len = 0;
  uint32_t nsge = 0;
  uint32_t first_psn = 0;  // valid once started
  uint32_t npkts = 0;
  uint32_t sent = 0;  // packets transmitted at least once
  uint16_t msn = 0, rqmsn = 0;
  bool started = false;
};

enum TxFlag : uint8_t {
  kTxSacked = 1 << 0,   // selectively acknowledged
  kTxLost = 1 << 1,     // queued for retransmission
  kTxNacked = 1 << 2,   // the last loss was reported by a NACK (no silent-loss penalty)
  kTxDemoted = 1 << 3,  // its presumed loss made its EV ASSUMED_BAD
  kTxHole = 1 << 4,     // a SACK bitmap covered it and it was missing then
  kTxRefused = 1 << 5,  // refused once (AETH NAK, NACK UNEXP_EVENT): resent to confirm
};

struct TxPkt {
  uint32_t wqe = 0;     // SQ slot
  uint32_t offset = 0;  // byte offset in the message
  uint32_t len = 0;     // payload bytes
  // ns from `sent` to the return of the system call that made the last
  // transmission (Engine::tx_done; 0: not reported)
  uint32_t hold = 0;
  Time sent = 0;          // last transmission
  uint16_t ev = 0;        // EV index of the last transmission
  uint16_t ev_first = 0;  // EV index of the first transmission
  uint16_t ts = 0;        // TSETH of the last transmission
  uint16_t ts_first = 0;  // TSETH of the first transmission
  uint8_t tx_count = 0;
  uint8_t flags = 0;
  uint8_t port = 0;
};

struct PendImm {
  bool known = false;
  uint16_t msn = 0;
  uint32_t last_psn = 0;
  uint32_t imm = 0;
};

struct Trigger {
  uint32_t psn = 0;
  uint32_t entropy = 0;
  uint16_t ts = 0;
  uint8_t port = 0;
  bool valid = false;
  Time rx_ts = 0;  // its arrival (XDP timestamp); 0: not known, no service time
};

struct Engine::Qp {
  uint32_t qpn = 0;
  uint32_t pd = 0;
  uint32_t send_cq = 0, recv_cq = 0;
  QpCap cap;
  bool sq_sig_all = false;
  QpState state = QpState::kReset;
  QpAttr attr;
  uint32_t have_mrc = 0;  // MRC attributes set so far (MrcAttrMask)
  QpStats stats;

  // paths and congestion control
  PathSet paths;
  Nscc cc;
  codec::IpVersion ipver = codec::IpVersion::kV4;
  codec::EvFmtMode fmt = codec::EvFmtMode::kStev;
  uint32_t carried_mask = ~0u;
  uint32_t remote_down = 0;  // peer ports reported down (bit = port)
  uint32_t event_mask = kEvGood | kEvAssumedBad;

  // requester
  std::vector<SendWqe> sq;
  std::vector<Sge> sq_sge;
  uint32_t sq_head = 0, sq_next = 0, sq_tail = 0, sq_count = 0;
  uint32_t next_psn = 0;  // next new PSN
  uint32_t una = 0;       // oldest PSN not cumulatively acked
  std::vector<TxPkt> win;
  uint32_t win_mask = 0;
  uint32_t win_max = 0;                        // the window's size at MPR x 128 outstanding PSNs
  uint32_t mpr_eff = 0;                        // PSNs allowed beyond the cumulative ack
  uint64_t inflight = 0;                       // bytes sent and not sacked/acked/lost
  uint64_t port_inflight[kMaxPorts + 1] = {};  // ... by the plane of their last transmission
  uint32_t lost = 0;                           // packets queued for retransmission
  bool in_txq = false;                         // listed in Engine::txq_
  uint16_t msn = 0, rqmsn = 0;
  uint32_t wimm_out = 0;
  Time last_progress = 0;
  uint32_t retries = 0;
  Time last_ack = 0;           // last SACK/NACK received
  uint32_t sampled_psn = ~0u;  // trigger and echo of the last SACK (one RTT sample each)
  uint64_t refusal_sent = 0;   // packets sent when a SACKed PSN was first refused (on_refusal)
  uint16_t sampled_ts = 0;
  Time srtt = 0, rttvar = 0, min_rtt = 0;
  Time reo_wnd = 0, reo_extra = 0;
  Time latest_delivered = 0;                  // send time of the latest delivered transmission
  Time latest_port[kMaxPorts + 1] = {};       // ... per plane
  uint32_t plane_losses[kMaxPorts + 1] = {};  // silent losses since the last delivery
  Time plane_heard[kMaxPorts + 1] = {};       // when a delivery on the plane was last reported
  // Silent planes (PathParams::silent_plane_pace): bit p set when a packet
  // sent on plane p at plane_silent[p] was lost with nothing sent after it
  // on p delivered; it stays until p delivers that packet (the loss was
  // spurious) or one sent later (checked lazily). plane_paced[p]: its last
  // data packet meanwhile.
  uint32_t silent_mask = 0;
  Time plane_silent[kMaxPorts + 1] = {};
  Time plane_paced[kMaxPorts + 1] = {};
  Time silent_since[kMaxPorts + 1] = {};  // when bit p was last set
  bool plane_is_silent(uint8_t p) const {
    return p <= kMaxPorts && (silent_mask >> p & 1) && latest_port[p] < plane_silent[p];
  }
  // Quiet planes (PathParams::quiet_plane_pace): bit p set while a packet
  // sent on p at plane_quiet[p] is missing with nothing sent after it on p
  // delivered (cleared lazily, as silent_mask); paced as a silent plane.
  uint32_t quiet_mask = 0;
  Time plane_quiet[kMaxPorts + 1] = {};
  Time quiet_since[kMaxPorts + 1] = {};  // when the plane's quiet began
  bool plane_is_quiet(uint8_t p) const {
    return p <= kMaxPorts && (quiet_mask >> p & 1) && latest_port[p] < plane_quiet[p];
  }
  // A transmission enters the bytes in flight (sent), or leaves them
  // (SACKed, ACKed or judged lost); its plane's too (t.port: the plane of
  // its last transmission).
  void enter_flight(const TxPkt& t) {
    inflight += t.len;
    if (t.port <= kMaxPorts) port_inflight[t.port] += t.len;
  }
  void leave_flight(const TxPkt& t) {
    inflight -= std::min<uint64_t>(inflight, t.len);
    if (t.port <= kMaxPorts)
      port_inflight[t.port] -= std::min(port_inflight[t.port], uint64_t(t.len));
  }
  // The planes of `ports` that are silent or quiet now (paced by data_ports).
  uint32_t dark_planes(uint32_t ports) const {
    uint32_t dark = 0;
    for (uint32_t m = (silent_mask | quiet_mask) & ports; m; m &= m - 1) {
      const uint8_t p = uint8_t(__builtin_ctz(m));
      if (plane_is_silent(p) || plane_is_quiet(p)) dark |= 1u << p;
    }
    return dark;
  }
  // The delivery-delay tail: the longest a first transmission took from
  // its send to the report of its delivery, in the current window and the
  // one before (windows of kTailWindow): what a healthy plane of this host
  // has shown lately (plane suspicion waits longer than that).
  static constexpr Time kTailWindow = 2'000'000'000;
  Time dl_tail = 0, dl_tail_prev = 0, dl_tail_since = 0;
  Time delivery_tail() const { return std::max(dl_tail, dl_tail_prev); }
  Time port_srtt[kMaxPorts + 1] = {};  // RTT of each plane (its queues differ from the others')
  Time port_rttvar[kMaxPorts + 1] = {};
  Time rack_due = kNever;  // a packet's plane RTT will have passed: judge again (RACK timer)
  uint32_t rtx_hint = 0;   // no lost PSN below this one
  Time last_send = 0;
  bool tlp_pending = false;      // send a tail-loss probe
  bool tlp_outstanding = false;  // the newest of tlp_recent, not yet answered
  uint8_t tlp_unanswered = 0;    // probes in a row that got no answer
  // The last tail-loss probes sent, the newest at tlp_recent[tlp_head]: an
  // answer slower than the probe timeout, which arrives after the next probe
  // went out, still answers its own probe (each answered once).
  struct TlpSent {
    Time sent = 0;
    uint16_t ts = 0;  // its PETH timestamp, echoed by the answer
    int idx = -1;     // its EV (the answer reflects it)
    uint8_t port = 0;
  };
  static constexpr size_t kTlpRemembered = 3;
  TlpSent tlp_recent[kTlpRemembered] = {};
  uint8_t tlp_head = 0;
  // The probe of tlp_recent that a probe answer echoes (timestamp and EV),
  // or null.
  TlpSent* tlp_answered(uint16_t ts_echo, int idx) {
    for (TlpSent& t : tlp_recent)
      if (t.sent && t.ts == ts_echo && t.idx == idx) return &t;
    return nullptr;
  }
  Time probe_check = 0;  // next time EV probes may be due
  Time armed = kNever;   // time of this QP's live entry in Engine::timer_heap_ (kNever: none)
  std::vector<uint32_t> probe_queue;  // ASSUMED_BAD EVs to probe now

  // responder
  codec::PsnWindow rwin;
  uint64_t rcvd_bytes = 0;
  uint32_t unacked_bytes = 0;
  Time sack_deadline = kNever;
  bool first_rx = true;
  bool sack_due = false;  // owes a SACK at the end of the rx() burst  // the last far-ahead SACK
                          // reported the oldest PSNs
  Trigger last;
  // A marked packet of this receive burst not yet answered (sack_each_ce
  // off): the burst's SACK carries the mark, with ce_last's EV as trigger.
  Trigger ce_last;
  bool ce_owed = false;
  uint32_t rev_ev[kMaxPorts + 1] = {};
  // SRv6 profiles: each path's uSID container (the data and probe destination).
  std::vector<std::array<uint8_t, 16>> srv6_sid;
  uint8_t rev_rr = 0;
  // PathParams::sack_plane_gap: control packets sent; data packets
  // received, and that count at each plane's latest.
  uint8_t rev_count = 0;
  uint32_t rx_seq = 0;
  uint32_t rx_port_seq[kMaxPorts + 1] = {};
  std::vector<uint64_t> rq;
  uint32_t rq_head = 0, rq_count = 0;
  std::vector<PendImm> imm;
  std::vector<uint32_t> msg_len;  // message length by MSN (messages in the PSN window)
  uint16_t imm_next = 0;          // RQMSN of the next WriteIMM to complete
  uint32_t imm_span = 0;          // WriteIMMs known beyond imm_next (outstanding)
  // Failed by a WriteIMM without a receive: the cumulative point covers that
  // message, so no SACK may report it (the UNEXP_EVENT NACK says the rest).
  bool acks_stopped = false;
  // ... and that NACK's PSN, named again to every request that reaches the
  // failed QP (the requester fails only on a refusal of a resent PSN).
  bool fail_nack = false;
  uint32_t fail_psn = 0;
  // Its owner is gone (Engine::entomb_qp): it only answers requests, and is
  // freed at tomb_until.
  bool tomb = false;
  // Its entry in Engine::peer_rtt_ (cc_share_base_rtt), when it holds one.
  bool peer_rtt_held = false;
  std::array<uint8_t, 17> peer_rtt_key{};
  Time tomb_until = kNever;

  bool win_ready() const { return !win.empty(); }
  // Anything for tx() to send: a probe, a retransmission or unsent data.
  bool has_tx_work() const {
    return lost || tlp_pending || !probe_queue.empty() || sq_next != sq_tail;
  }
  // Records a delivered transmission for loss inference. A retransmitted
  // packet acknowledged sooner than an RTT after its last transmission was
  // delivered by an earlier copy: its send time says nothing (RACK's rule).
  void delivered(const TxPkt& t, Time now) {
    if (t.ev < paths.size()) paths.at(t.ev).stats.acked++;
    if (t.port <= kMaxPorts) {
      plane_losses[t.port] = 0;
      plane_heard[t.port] = now;
    }
    if (t.tx_count == 1 && t.sent && now > t.sent) {
      if (now - dl_tail_since >= kTailWindow) {
        dl_tail_prev = now - dl_tail_since >= 2 * kTailWindow ? 0 : dl_tail;
        dl_tail = 0;
        dl_tail_since = now;
      }
      dl_tail = std::max(dl_tail, now - t.sent);
    }
    if (t.tx_count > 1 && now - t.sent < min_rtt) return;
    latest_delivered = std::max(latest_delivered, t.sent);
    if (t.port <= kMaxPorts) latest_port[t.port] = std::max(latest_port[t.port], t.sent);
  }
  TxPkt& pkt(uint32_t psn) { return win[psn & win_mask]; }
  const TxPkt& pkt(uint32_t psn) const { return win[psn & win_mask]; }
  // A SACK's parts: its bitmap, its RTT sample and what the sample updates.
  // Defined inline in requester.cc, for Engine::on_sack alone (the per-SACK
  // path: no call of its own).
  void sack_bitmap(uint32_t base, uint64_t bitmap, Time now, uint64_t& newly);
  Time rtt_sample(TxPkt& t, uint16_t echo, const EngineConfig& cfg, Time now);
  void rtt_update(const TxPkt& t, Time rtt, Time min_reorder);
  // Doubles the send window (rare: at most log2(MPR x 128 / 64) times per
  // QP); the PSNs in flight move to their slots under the new mask, and so
  // do the acknowledged ones still in the old window (a late SACK they
  // triggered is checked against their timestamps).
  void grow_win() {
    const uint32_t n = uint32_t(win.size()) * 2;
    std::vector<TxPkt> w(n);
    const uint32_t from = codec::psn_add(next_psn, -int64_t(win.size()));
    for (uint32_t psn = from; psn != next_psn; psn = codec::psn_add(psn, 1))
      w[psn & (n - 1)] = win[psn & win_mask];
    win.swap(w);
    win_mask = n - 1;
  }
  uint32_t outstanding() const { return uint32_t(codec::psn_diff(next_psn, una)); }
};

enum class CtrlKind : uint8_t { kSack, kNack, kAethNak, kEpRequest, kEpResponse };

struct Engine::Ctrl {
  CtrlKind kind = CtrlKind::kSack;
  uint32_t qpn = 0;
  uint8_t port = 0;
  uint32_t psn = 0;
  uint32_t entropy = 0;
  uint16_t ts_echo = 0;
  uint8_t code = 0;  // SACK verdict / NACK reason / AETH syndrome
  bool probe_resp = false;
  bool ecn = false;
  Time rx_ts = 0;  // SACK: the trigger's arrival, for its service time (0: none)
  // endpoint operations
  codec::IpAddr peer;
  codec::Mac peer_mac{};
  uint32_t ev = 0;
  uint16_t req_id = 0;
  uint8_t op = 0;
  uint32_t port_status = 0;
  uint8_t dscp = 0;
  uint8_t rx_port = 0;
  uint8_t vendor_info = 0;
  uint32_t svc_ns = 0;
};

struct Engine::CtrlQueue : Ring<Engine::Ctrl> {};

// 16-bit TSETH timestamps.
inline uint16_t ts16(Time t) { return uint16_t(t >> MRC_TS_SHIFT); }

}  // namespace mrc::core
