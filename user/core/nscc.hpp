// NSCC (UET 1.0 network signal congestion control) as MRC uses it: a
// sender-side byte window driven by ECN echoes and queueing delay, clocked by
// SACKs. Four quadrants, quick adapt, fair/proportional/fast increase,
// multiplicative decrease, batched window adjustment, cwnd clamps, and the
// responder penalty (rcv_cwnd_pen / restore_cwnd).
// Documentation/design.md ("Congestion control") explains every choice.
#pragma once

#include <cstdint>

#include "core/types.hpp"

namespace mrc::core {

// EngineConfig's start-up and delay settings (cc_init_window, cc_delay_md,
// cc_queue_target, cc_qa_floor). The defaults are the engine's.
struct NsccStart {
  uint64_t init_window = 64 * 1024;
  bool delay_md = false;
  uint64_t queue_target = 0;
  uint64_t qa_floor = 0;
  bool qa_standing = false;
  bool qa_fabric = false;
  uint64_t max_target = kNsccMaxTarget;  // ceiling of a derived target (0: none)
  bool qa_fabric_on_ecn = true;
  bool qa_rate_gate = true;  // the gate per window length until an ECN mark
  bool qa_cut_full = false;  // "cut" a window to its own size (EngineConfig::cc_qa_cut_full)
};

class Nscc {
 public:
  struct Params {
    bool enabled = true;
    bool qa = true;
    uint32_t mtu = 4096;
    uint64_t max_cwnd = 4 << 20;
    uint64_t base_rtt = 0;                 // 0: learned (minimum RTT seen)
    uint64_t target_delay = 0;             // 0: derived from base_rtt
    uint64_t min_target = kNsccMinTarget;  // floor of a derived target
    uint64_t max_target = kNsccMaxTarget;  // its ceiling (0: none)
    uint64_t qa_threshold = 0;             // 0: max(4 x target, qa_floor)
    uint64_t qa_floor = 0;                 // EngineConfig::cc_qa_floor
    bool qa_standing = false;              // EngineConfig::cc_qa_standing
    bool qa_fabric = false;                // EngineConfig::cc_qa_fabric
    bool qa_fabric_on_ecn = false;         // EngineConfig::cc_qa_fabric_on_ecn
    bool qa_rate_gate = false;             // EngineConfig::cc_qa_rate_gate
    bool qa_cut_full = false;              // EngineConfig::cc_qa_cut_full
    uint8_t qa_gate = 3;
    uint64_t adjust_bytes = 0;   // 0: 8 x MTU
    uint64_t adjust_period = 0;  // 0: base_rtt + target
    double eta = 0, fi = 0, fi_scale = 0, gamma = 0.8, max_md_jump = 0.5;
    uint64_t init_window = 0;   // 0: start at max_cwnd (no slow start)
    bool delay_md = false;      // decrease on a standing queue seen as delay
    uint64_t queue_target = 0;  // of that decrease (0: target)
  };
  using Start = NsccStart;

  Nscc() = default;
  // `min_target` is the floor of a target derived from the base RTT
  // (EngineConfig::cc_min_target).
  void configure(const CcProfile& p, uint32_t mtu, uint64_t mpr_window_bytes, uint64_t min_target,
                 const Start& start = Start{});

  bool enabled() const { return p_.enabled; }
  // Bytes that may be in flight. Unlimited (~0) when CC is disabled.
  uint64_t cwnd() const { return p_.enabled ? cwnd_ : ~uint64_t(0); }
  uint64_t base_rtt() const { return base_rtt_; }
  // The smallest RTT of every QP to the same peer (EngineConfig::
  // cc_share_base_rtt): the learned base RTT is never above it. Owned by
  // the engine; null: this QP's own samples only. configure() clears it.
  void share_base(uint64_t* peer_min_rtt) { shared_base_ = peer_min_rtt; }
  uint64_t target() const { return target_; }
  uint64_t avg_delay() const { return uint64_t(avg_delay_); }
  // The standing queueing delay: the smallest RTT of the last measurement
  // period minus the base RTT (delay_md).
  uint64_t standing() const { return standing_; }
  bool slow_start() const { return slow_start_; }
  // Quick adapt judges the fabric's part of each RTT (cc_qa_fabric, or
  // cc_qa_fabric_on_ecn once an ECN mark came back).
  bool qa_on_fabric() const { return p_.qa_fabric || (p_.qa_fabric_on_ecn && marked_); }
  // Quick adapt's gate judges bytes per window length (qa_rate_gate, while
  // the whole RTT judges), not a window's bytes.
  bool rate_gate() const { return p_.qa_rate_gate && !qa_on_fabric(); }

  // A SACK acknowledged `bytes` new bytes; `rtt` is 0 when no sample.
  // `fabric_rtt` is the sample less the hosts' own time (the responder's
  // service time, the SACK's wait here and the packet's hold in this
  // host's transmit; 0: not known, the whole RTT):
  // with qa_fabric, quick adapt measures its delay on it.
  void on_ack(uint64_t bytes, uint64_t rtt, bool ecn, uint64_t inflight, Time now,
              uint64_t fabric_rtt = 0);
  // NACK TRIMMED/TRIMMED_LASTHOP for `bytes`.
  void on_nack(uint64_t bytes, uint64_t inflight, Time now);
  // ACK timeout of `bytes`.
  void on_timeout(uint64_t bytes);
  // Responder penalty carried in a SACK (0..127) and the restore flag.
  void on_penalty(uint8_t pen, bool restore, uint64_t newly_acked, uint64_t inflight);

  // For tests: quadrant of the last on_ack (0 = none).
  enum Quadrant : uint8_t { kNone, kProportional, kFast, kFair, kDecrease, kHold };
  Quadrant last_quadrant() const { return last_q_; }
  bool quick_adapted() const { return last_qa_; }
  // Quick adapt's cuts since configure: all, and those a loss triggered
  // (the rest were triggered by delay).
  uint64_t qa_cuts() const { return qa_cuts_; }
  uint64_t qa_loss_cuts() const { return qa_loss_cuts_; }
  // Windows whose trigger was met but whose achieved bytes closed the gate.
  uint64_t qa_gated() const { return qa_gated_; }
  // Multiplicative decreases on ECN marks (the marked-and-delayed quadrant).
  uint64_t ecn_decreases() const { return ecn_decs_; }

 private:
  // The target derived from a base RTT: at least min_target, at most
  // max_target (when set; never below min_target).
  uint64_t derived_target(uint64_t base) const;
  // One window's length: the base RTT plus the target queue delay.
  uint64_t window_len() const { return base_rtt_ + target_; }
  void update_base(uint64_t rtt);
  void update_avg(double d);
  bool quick_adapt(bool loss, uint64_t delay, uint64_t inflight, Time now);
  void clamp();
  // delay_md: one RTT sample into the period's minimum; at the end of a
  // period, the standing delay and, above the queue target, the decrease.
  // True when it decreased the window.
  bool standing_sample(uint64_t rtt, Time now);
  // delay_md: the factor of an increase (1 without it).
  double grow_scale(uint64_t inflight, uint64_t bytes) const;
  // delay_md: the window no decrease by delay or ECN goes below.
  uint64_t md_floor() const;
  uint64_t mtu() const { return p_.mtu; }

  Params p_;
  uint64_t cwnd_ = 0;
  uint64_t base_rtt_ = 0;
  uint64_t fabric_base_ = ~uint64_t(0);
  bool marked_ = false;  // an ECN mark came back since configure
  uint64_t* shared_base_ = nullptr;
  uint64_t target_ = 0;
  double inc_ = 0;
  uint64_t received_ = 0;
  Time last_adjust_ = 0, last_dec_ = 0, qa_window_end_ = 0, qa_window_start_ = 0;
  // Ignored bytes (a cut's flight) were acked in this quick-adapt window.
  bool qa_spanned_ignore_ = false;
  uint64_t achieved_ = 0;
  // The smallest queueing delay of the quick-adapt window's acks (none: ~0).
  uint64_t qa_min_delay_ = ~uint64_t(0);
  uint64_t ignore_bytes_ = 0;
  uint64_t low_delay_bytes_ = 0;
  double avg_delay_ = 0;
  bool pen_active_ = false;
  uint64_t saved_cwnd_ = 0;
  Quadrant last_q_ = kNone;
  bool last_qa_ = false;
  uint64_t qa_cuts_ = 0, qa_loss_cuts_ = 0, qa_gated_ = 0, ecn_decs_ = 0;
  // Start-up and delay (Params::init_window, delay_md).
  bool slow_start_ = false;
  bool queue_high_ = false;  // the last period's standing delay was above the queue target
  uint64_t srtt_ = 0;        // smoothed RTT (gain 1/8), the period's length
  uint64_t win_min_ = ~uint64_t(0);
  uint32_t win_samples_ = 0;
  Time win_start_ = 0;
  uint64_t standing_ = 0;
};

}  // namespace mrc::core
