// The sans-I/O MRC engine: every protocol rule, no sockets, threads, clocks
// or global state. A driver (the AF_XDP data path, the simulated network of
// the tests) feeds it received frames and the current time, and gives it
// frame buffers to fill; the application side creates objects, posts work
// and polls completions; a controller installs profiles and steers EVs.
//
//   driver:      rx(frames, now)   tx(sink, now, budget)   next_deadline()
//   application: create_pd/reg_mr/create_cq/create_qp/modify_qp/post_send/
//                post_recv/poll_cq
//   controller:  install_ev_profile/install_cc_profile/set_ev_denied/
//                set_port_state/poll_ev_events/send_ep_request
//
// Documentation/design.md describes the structure and every algorithm choice.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "codec/packet.hpp"
#include "core/ids.hpp"
#include "core/nscc.hpp"
#include "core/paths.hpp"
#include "core/rng.hpp"
#include "core/types.hpp"
#include "mrc/result.hpp"

namespace mrc::core {

struct Trigger;
struct TxPkt;

// Frames go out through this interface, one call pair per frame, no copies
// beyond the engine writing into the buffer it is given.
class TxSink {
 public:
  virtual ~TxSink() = default;
  // A buffer for one frame on `port`, or nullptr when that port has no room.
  virtual uint8_t* alloc(uint8_t port, uint32_t* capacity) = 0;
  // The frame in the last buffer of `port` is `len` bytes long.
  virtual void commit(uint8_t port, uint32_t len) = 0;
};

struct RxFrame {
  const uint8_t* data = nullptr;
  uint32_t len = 0;
  uint8_t port = 0;  // 1-based port it arrived on
  Time rx_ts = 0;    // receive timestamp (XDP metadata), 0 = use `now`
  // A multi-buffer frame's further buffers (data/len is the first, holding
  // at least codec::kMinFirstSeg bytes); valid during rx() only.
  std::span<const codec::FrameSeg> more = {};
};

// An endpoint request the controller sends (EV probe or port status update).
struct EpRequest {
  uint16_t req_id = 0;
  uint8_t op = MRC_EP_OP_EV_PROBE;
  uint8_t port = 0;  // local port (plane) to send on
  uint32_t ev = 0;
  codec::IpAddr dst;
  codec::Mac dst_mac{};
  uint32_t port_status = 0;
  uint8_t dscp = 0;  // 0 = control class
};
struct EpResponse {
  uint16_t req_id = 0;
  uint8_t op = 0;
  uint8_t port = 0;     // local port the response arrived on
  uint8_t rx_port = 0;  // responder's port the request arrived on
  uint32_t rtt_ns = 0;
  bool adj_svc_time = false;
  uint32_t port_status = 0;
  codec::IpAddr from;
};

class Engine {
 public:
  explicit Engine(EngineConfig cfg);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const EngineConfig& config() const { return cfg_; }
  const DeviceAttr& device_attr() const { return cfg_.device; }

  // --- objects --------------------------------------------------------------
  Result<uint32_t> create_pd();
  Status destroy_pd(uint32_t pd);
  struct MrInfo {
    uint32_t lkey, rkey;
  };
  // A region the application (and peers) name by [addr, addr + length):
  // iova == host.
  Result<MrInfo> reg_mr(uint32_t pd, void* addr, size_t length, uint32_t access);
  // A region named by [iova, iova + length) whose bytes live at `host` (the
  // service maps a client's pages elsewhere in its own address space,
  // service.md section 3): local SGE and peer RETH addresses are checked
  // against the iova range, copies go through host + (va - iova).
  Result<MrInfo> reg_mr(uint32_t pd, uint64_t iova, void* host, size_t length, uint32_t access);
  Status dereg_mr(uint32_t lkey);
  Result<uint32_t> create_cq(uint32_t cqe);
  Status destroy_cq(uint32_t cq);
  // Returns completions polled (0..out.size()); EINVAL for an unknown CQ;
  // EOVERFLOW once the CQ has overrun.
  Result<size_t> poll_cq(uint32_t cq, std::span<Wc> out);
  size_t cq_depth(uint32_t cq) const;

  Result<uint32_t> create_qp(const QpInitAttr& init);
  Status destroy_qp(uint32_t qpn);
  // Like mrc_modify_qp: ibv mask (IbvAttrMask) and MRC mask (MrcAttrMask).
  Status modify_qp(uint32_t qpn, const QpAttr& attr, uint32_t ibv_mask, uint32_t mrc_mask);
  Result<QpAttr> query_qp(uint32_t qpn) const;
  Result<QpStats> qp_stats(uint32_t qpn) const;
  Status post_send(uint32_t qpn, const SendWr& wr);
  Status post_recv(uint32_t qpn, const RecvWr& wr);
  // Live QPs (tombstones are not listed).
  std::vector<uint32_t> qp_list() const;
  // A QP whose owner is gone (service.md section 5, "The peers"): if its
  // peer may still send (RTR, RTS, ERR) it stays as a tombstone until
  // `until`, in ERR: its work is flushed to no one (its CQs are detached,
  // so they can be destroyed at once), its queues and windows are freed, it
  // belongs to no protection domain and places nothing; every request
  // that reaches it is answered with an AETH NAK (remote operation error),
  // so the peer's QP fails after one confirming resend instead of by retry
  // exhaustion (or with the UNEXP_EVENT NACK of a QP already failed by a
  // WriteIMM without a receive). Its QPN (and slot) stays taken until tx()
  // frees it at `until`; at most EngineConfig::max_tombstones exist, and
  // the oldest one is freed early to make room for a new tombstone or for a
  // create_qp that would otherwise fail. Returns true if the QP became a
  // tombstone, false if it was destroyed at once (RESET or INIT, or
  // max_tombstones 0): then, as after destroy_qp, the caller drops its
  // steering. destroy_qp of a tombstone frees it at once.
  Result<bool> entomb_qp(uint32_t qpn, Time until);
  // QPNs of tombstones the engine freed (linger over, or early) since the
  // last call: the driver drops their steering (at most 65536 are kept).
  size_t poll_freed_tombstones(std::span<uint32_t> out);
  std::vector<uint32_t> tombstone_list() const;
  size_t tombstone_count() const { return tombs_.size(); }

  // --- profiles and controller ---------------------------------------------
  Status install_ev_profile(uint64_t id, EvProfile p);
  Status remove_ev_profile(uint64_t id);
  Status install_cc_profile(uint64_t id, CcProfile p);
  Status remove_cc_profile(uint64_t id);
  bool ev_profile_in_use(uint64_t id) const;
  bool cc_profile_in_use(uint64_t id) const;
  // DENY (true) or allow (false) an EV of a profile in every QP using it.
  Status set_ev_denied(uint64_t profile, uint32_t ev, uint8_t port, bool denied);
  // EV state of one QP's EV set (index order), for QUERY_EV_STATE/ARRAY and mrcctl.
  Result<std::vector<PathSet::Ev>> qp_evs(uint32_t qpn) const;
  // Local port link/admin state. Down: no EV on it is used, peers are told.
  void set_port_state(uint8_t port, bool up, Time now);
  bool port_up(uint8_t port) const;
  size_t poll_ev_events(std::span<EvEvent> out);
  // Responder flow-control penalty advertised in SACKs (0 = none).
  void set_receive_penalty(uint8_t pen, bool restore);
  Status send_ep_request(const EpRequest& req, Time now);
  size_t poll_ep_responses(std::span<EpResponse> out);

  // --- I/O --------------------------------------------------------------------
  void rx(std::span<const RxFrame> frames, Time now);
  // Emits up to `budget` frames (control first, then retransmissions, then new
  // data). Returns the number emitted. Also runs timers that are due.
  size_t tx(TxSink& sink, Time now, size_t budget);
  // The control frames alone (SACKs, NACKs, responses), up to `budget`: a
  // driver sends them ahead of a data burst (data_queued()), which they
  // would otherwise wait behind. tx() emits what is left.
  size_t tx_control(TxSink& sink, Time now, size_t budget);
  // Some QP may have data to send (cheap; may be true when none has).
  bool data_queued() const { return !txq_.empty(); }
  // The frames committed since the last tx_done() have left: the system
  // call that sent them returned at `now` (the engine loop calls it after
  // its flush, DeviceTxSink after each live-frames submission, which sends
  // in the middle of a transmit). Their time from their stamp to now is
  // this host's own, which quick adapt leaves out with
  // EngineConfig::cc_qa_fabric (TxPkt::hold). Drivers that do not call it
  // lose only that.
  void tx_done(Time now);
  // Whether the driver should call tx_done (cc_qa_fabric, cc_qa_fabric_on_ecn).
  bool tracks_holds() const { return cfg_.cc_qa_fabric || cfg_.cc_qa_fabric_on_ecn; }
  // Earliest time tx() has something to do without new input (kNever if idle).
  Time next_deadline() const;
  // True when tx() would emit a frame right now.
  bool tx_ready() const;

  const EngineStats& stats() const { return stats_; }
  // QPs the engine moved to ERR on its own (retry exhaustion, remote errors,
  // protocol violations) since the last call: the QP-fatal async events.
  size_t poll_qp_errors(std::span<uint32_t> out);

 private:
  struct Mr;
  struct Cq;
  struct Qp;
  struct Ctrl;
  struct CtrlQueue;

  Qp* qp_by_num(uint32_t qpn) const;
  // A live QP (not a tombstone): the API calls that act on a QP's work.
  Qp* live_qp(uint32_t qpn) const;
  void free_qp(uint32_t qpn);
  void free_oldest_tomb();
  uint32_t qp_index(uint32_t qpn) const;
  Cq* cq_by_handle(uint32_t h) const;
  const Mr* mr_by_key(uint32_t key) const;
  Status check_transition(const Qp& qp, const QpAttr& a, uint32_t ibv, uint32_t mrc) const;
  void enter_rts(Qp& qp);
  // NSCC's base RTT shared by the QPs to one peer (cc_share_base_rtt): the
  // peer's IP version and address on the QP's lowest plane -> the smallest
  // RTT seen and the QPs holding the entry (gone with the last of them).
  using PeerKey = std::array<uint8_t, 17>;
  struct PeerRtt {
    uint64_t min_rtt = 0;
    uint32_t refs = 0;
  };
  std::map<PeerKey, PeerRtt> peer_rtt_;
  void hold_peer_rtt(Qp& q);
  void release_peer_rtt(Qp& q);
  void want_tx(Qp& qp);
  void enter_rtr(Qp& qp);
  void to_error(Qp& qp, WcStatus first_status);
  void flush(Qp& qp, WcStatus first_status);
  void push_cqe(uint32_t cq, const Wc& wc);
  void build_paths(Qp& qp);
  void ev_event(Qp& qp, uint32_t idx, EvState from, EvState to, EvEventReason why);
  uint32_t port_mask_for(const Qp& qp) const;

  // requester
  // rx_ts: the SACK's arrival (XDP timestamp; `now` when not known).
  void on_sack(Qp& qp, const codec::Packet& p, uint8_t port, Time rx_ts, Time now);
  void on_nack(Qp& qp, const codec::Packet& p, Time now);
  void on_aeth(Qp& qp, const codec::Packet& p, Time now);
  bool on_refusal(Qp& qp, uint32_t psn, Time now);
  // `blame`: the loss is evidence against its path (a silent loss retires
  // the EV); false: judged by time alone (PathParams::loss_needs_plane_evidence).
  void mark_lost(Qp& qp, uint32_t psn, bool silent, EvEventReason why, Time now, bool blame = true);
  void plane_suspect(Qp& qp, uint8_t port, Time now);
  bool path_blamed(const Qp& qp, uint32_t psn) const;
  void rack(Qp& qp, uint32_t from, uint32_t upto, Time now);
  void rack_timer(Qp& qp, Time now);
  Time rack_wait(const Qp& qp) const;
  Time learned_reo(const Qp& qp) const;
  Time tlp_due(const Qp& q) const;
  void remote_ports(Qp& qp, uint32_t down, Time now);
  void advance_cack(Qp& qp, uint32_t cack, Time now, uint64_t& newly);
  void complete_sends(Qp& qp);
  void requester_timers(Qp& qp, Time now);
  bool emit_data(Qp& qp, TxSink& sink, Time now, uint32_t& port_full);
  // `ports` less the silent planes whose next paced packet is not due yet
  // (PathParams::silent_plane_pace); `ports` itself when that leaves none.
  uint32_t data_ports(Qp& qp, uint32_t ports, Time now);
  // `t` went missing on its plane with nothing sent after it there delivered
  // (a later packet on another plane was): the plane is silent.
  void note_silent(Qp& qp, const TxPkt& t, Time now);
  // t is missing with nothing sent after it on its plane delivered, and one
  // sent reo_wnd (and the plane's lag) after it on another plane was: the
  // plane is quiet (PathParams::quiet_plane_pace).
  void note_quiet(Qp& qp, const TxPkt& t, Time now);
  // `ports` less the silent and quiet planes (`ports` itself when that
  // leaves none): where a tail-loss probe goes. A silent plane's EVs stay
  // GOOD until plane suspicion (PathParams::silent_suspect_wait), and a probe
  // sent there goes unanswered: three in a row leave only the ACK timeout.
  uint32_t lit_ports(const Qp& qp, uint32_t ports) const;
  bool emit_probe(Qp& qp, TxSink& sink, Time now, int ev_idx, uint32_t& port_full);
  bool send_data_pkt(Qp& qp, TxSink& sink, uint32_t psn, bool rtx, int ev_idx, Time now,
                     uint32_t& port_full);
  Time qp_deadline(const Qp& qp) const;
  Time ack_timeout(const Qp& qp) const;
  static Time ack_timeout_base(const Qp& qp);

  // responder
  void on_data(Qp& qp, const codec::Packet& p, uint8_t port, Time rx_ts, Time now);
  // rx_ts: the packet's arrival (for the service time of the SACK it triggers).
  void on_trimmed(Qp& qp, const codec::Packet& p, uint8_t port, Time rx_ts);
  void on_probe(Qp& qp, const codec::Packet& p, uint8_t port, Time rx_ts);
  void queue_sack(Qp& qp, const Trigger& trigger, uint8_t verdict, bool probe_resp, bool ecn);
  void queue_nack(Qp& qp, uint32_t psn, uint8_t reason, uint32_t entropy, uint16_t ts_echo,
                  uint8_t port);
  void queue_aeth_nak(Qp& qp, uint32_t psn, uint8_t syndrome, uint8_t port);
  void deliver_imm(Qp& qp);
  uint8_t reverse_port(Qp& qp, uint8_t hint);

  // endpoint ops
  void on_ep_request(const codec::Packet& p, uint8_t port, Time rx_ts, Time now);
  void on_ep_response(const codec::Packet& p, uint8_t port, Time now);

  // frames
  void fill_l2l3(codec::Packet& pk, const Qp& qp, uint8_t port, uint32_t ev) const;
  bool emit_ctrl(const Ctrl& queued, TxSink& sink, Time now);

  EngineConfig cfg_;
  Rng rng_;
  IdGen ids_;
  EngineStats stats_;
  std::vector<std::unique_ptr<Mr>> mrs_;
  std::vector<std::unique_ptr<Cq>> cqs_;
  std::vector<std::unique_ptr<Qp>> qps_;
  std::vector<uint8_t> qp_gen_;
  uint32_t next_pd_ = 1;
  std::vector<uint32_t> pds_;
  std::map<uint64_t, EvProfile> ev_profiles_;
  std::map<uint64_t, CcProfile> cc_profiles_;
  std::unique_ptr<CtrlQueue> ctrl_;
  std::vector<uint32_t> active_;    // QPs with work or timers (qpn)
  std::vector<uint32_t> sack_due_;  // QPs owing a SACK at the end of this rx() burst
  // Data packets sent since the last tx_done(), for their hold (bounded by
  // its reserved capacity: no allocation on the hot path).
  struct TxLog {
    uint32_t qpn, psn;
    Time stamp;
  };
  std::vector<TxLog> tx_log_;
  size_t rr_ = 0;
  // QPs that may have a probe, retransmission or new data to send (qpn;
  // Qp::in_txq): tx() walks these, not every active QP, and drops the ones
  // found with nothing to send. want_tx() adds a QP wherever work appears
  // (post_send, mark_lost, timers' probes, entering RTS).
  std::vector<uint32_t> txq_;
  std::vector<EvEvent> ev_events_;
  size_t ev_head_ = 0, ev_count_ = 0;
  // QP timers: a min-heap of (deadline, qpn) with at most one live entry
  // per QP, the one at Qp::armed; older entries of a QP are stale and
  // skipped when they come up. Whatever may bring a QP's deadline forward
  // arms it; a deadline that moved later is found when its entry comes up.
  // rescan_: a deadline may have moved without its QP being armed (API
  // calls, port changes, endpoint requests): tx() runs every active QP's
  // timers and rebuilds the heap.
  std::vector<std::pair<Time, uint32_t>> timer_heap_;
  std::vector<uint32_t> timers_due_;  // scratch: the QPs whose entries came up
  bool rescan_ = true;
  void arm(Qp& q);
  void run_timers(Qp& q, Time now);
  // EV probe budget (EngineConfig::probe_rate): tokens in 1/1e9 units.
  uint64_t probe_tokens_ = 0;
  Time probe_tokens_at_ = 0;
  bool probe_token(Time now);
  Time probe_token_due() const;
  uint32_t ev_dropped_ = 0;
  std::vector<EpResponse> ep_rsp_;
  std::vector<uint32_t> qp_errors_;
  // Tombstones by the time they are freed (earliest first), and the freed
  // ones not yet polled.
  std::deque<std::pair<Time, uint32_t>> tombs_;
  std::vector<uint32_t> tombs_freed_;
  bool in_modify_ = false;
  struct EpPending {
    uint16_t req_id;
    Time sent;
  };
  std::vector<EpPending> ep_pending_;
  uint32_t ports_down_ = 0;
  Time now_ = 0;  // time of the current rx/tx/port call (stamps EV events)
  uint8_t rcv_pen_ = 0;
  bool rcv_restore_ = false;
  uint16_t next_probe_id_ = 1;
  std::vector<uint8_t> scratch_;  // payload staging for scatter lists
};

}  // namespace mrc::core
