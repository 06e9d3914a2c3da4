// Configuration of the MRC engine inside a libmrc device
// (DeviceOptions::engine): protocol tunables, path management (EV states,
// probes, plane failure rules) and the defaults of QPs without profiles.
// Self-contained like <mrc/types.hpp>. Documentation/api.md, "Engine
// configuration", and design.md explain each rule these numbers tune.
#pragma once

#include <cstdint>
#include <vector>

#include "mrc/types.hpp"

namespace mrc {
inline namespace v1 {

struct PathParams {
  uint32_t min_active = 0;       // ev_min_active
  uint32_t probe_successes = 3;  // K consecutive successes to readmit
  Time probe_initial = 50'000;   // first probe of an ASSUMED_BAD EV after this
  Time probe_max = 20'000'000;   // back-off cap
  // An EV retired again before it delivered anything since probes readmitted
  // it (its path passes probes but not data, e.g. a lower MTU inside it)
  // relapsed: its first probe waits probe_initial << relapses, up to this.
  Time probe_relapse_max = 1'000'000'000;
  Time probe_timeout = 2'000'000;  // a probe unanswered this long after the RTO failed (set_rtt)
  // Probes of one QP outstanding or queued at once (0 = no limit). A QP whose
  // EVs were all retired would otherwise probe every one of them each
  // back-off, whatever its RTT: on a receiver that is itself the bottleneck
  // (an incast, a starved host) the probes' answers then crowd out the data.
  uint32_t probe_inflight_max = 16;
  // A plane whose packets were lost silently this many times in a row, with
  // no delivery on it in between, is failing as a whole: all its EVs become
  // ASSUMED_BAD at once (each is probed and readmitted on its own). 0 = off.
  uint32_t plane_suspect_losses = 8;
  // ... and nothing delivered on it for max(2 srtt, min_rto, the QP's
  // delivery-delay tail): the longest a first transmission took from its
  // send to the report of its delivery, over the last 2-4 s, capped at
  // this (0: the tail is not used). A host that stalls a plane's softirq or
  // its receiver for milliseconds makes a healthy plane that silent; a plane
  // silent longer than every delivery the QP has seen lately is dead.
  Time plane_quiet_max = 10'000'000;
  // An EV is retired for a silent loss only on evidence its plane cannot
  // give when it is merely late: a packet sent after it on the same plane
  // (another path of that plane) delivered, or the ACK timeout. A loss
  // judged by time alone (the RACK timer, the cross-plane rule: the whole
  // plane is late, as a host stall makes it) is resent and counts towards
  // plane suspicion, but retires nothing by itself. false: every silent
  // loss retires its EV at once (the rule before issue 25).
  bool loss_needs_plane_evidence = true;
  // Grey failure: a plane that keeps losing packets silently while the QP's
  // other planes deliver is "lossy". Each plane's silent-loss rate (loss
  // episodes, see plane_loss, per packet sent on it) is measured over
  // windows of plane_window packets sent on it (smoothed, 1/16 per window);
  // a plane at or above plane_lossy_ppm that loses at least
  // plane_lossy_ratio times the rate of the QP's best plane is lossy until
  // its rate is under half of plane_lossy_ppm (or under twice the best
  // plane's). On a lossy plane a loss does not retire its EV
  // (plane_lossy_keep_evs), and the plane keeps 1/plane_lossy_div of its
  // active EVs (its share of the spray falls by as much; 1 = keep its share:
  // on a network-bound fabric its capacity is worth more than its losses).
  // Its active EVs keep measuring it, over windows 1/plane_lossy_div as
  // long. 0 = off.
  uint32_t plane_lossy_ppm = 10'000;
  uint32_t plane_lossy_ratio = 4;
  uint32_t plane_lossy_div = 1;
  uint32_t plane_window = 256;
  // On a lossy plane a silent loss does not retire its EV (every EV of the
  // plane loses alike), unless the EV loses again far sooner than the
  // plane's rate says; the plane-suspicion rule still applies.
  bool plane_lossy_keep_evs = true;
  // A path inside a plane that loses far more than the plane (a subset of
  // its entropy values losing, the rest not): an EV whose own silent-loss
  // rate (the packets it sends between losses, smoothed over its last few
  // losses) is at least ev_outlier_ratio times its plane's per-packet rate
  // and at least plane_lossy_ppm, measured over at least ev_outlier_min
  // losses, is retired even on a lossy plane; retired so again after probes
  // readmitted it, it has relapsed (probe_relapse_max). Needs the plane's
  // measurement (plane_lossy_ppm > 0). 0 = off.
  uint32_t ev_outlier_ratio = 3;
  uint32_t ev_outlier_min = 4;
  // Plane relapse back-off (issue 21). A plane retired as a whole (plane
  // suspicion) again within plane_relapse_window of its readmission (the
  // first of its EVs back by probes, or undone) has relapsed: a link that
  // flaps faster than a probe round, a plane whose probes pass and whose data
  // does not. Each relapse in a row holds the plane's EVs off their probes
  // for plane_relapse_initial << (relapses - 1), up to plane_relapse_max
  // (the EV relapse back-off's rule, PathSet::relapse_wait); a retirement
  // more than plane_relapse_window after the readmission starts afresh (the
  // plane was stable). A plane that heals for good is back within the hold
  // then in force plus a probe round (design.md, "Plane relapse").
  // plane_relapse_window = 0: off.
  Time plane_relapse_window = 100'000'000;
  Time plane_relapse_initial = 1'000'000;
  Time plane_relapse_max = 500'000'000;
  // A silent plane: a packet on it was lost with nothing sent after it on
  // the plane delivered, while another plane delivered something sent
  // later (a link down, flapping or blackholed; not random loss, which
  // later packets on the plane outrun). Until the plane delivers a packet
  // sent after that loss, data goes on it at most once per smoothed RTT
  // (each such packet asks whether the plane is back), the rest of the
  // window goes to the other planes, and a packet on it is lost once one
  // sent reo_wnd after it on another plane was delivered (the rule across
  // planes waits srtt + 4 rttvar). Without it every packet sprayed on the
  // plane until plane suspicion retires it (milliseconds on a host whose
  // stalls lengthen the delivery-delay tail) is lost and holds its share of
  // the window for that wait (design.md, "A silent plane").
  bool silent_plane_pace = true;
  // A quiet plane: a SACK reports a packet on it missing with nothing sent
  // after it on the plane delivered, while another plane delivered one sent
  // reo_wnd (plus the plane's lag behind the QP's fastest plane, port RTTs)
  // after it. Until the plane delivers that packet or a later one it is
  // paced as a silent plane is (nothing is judged lost sooner: a plane that
  // merely runs behind is quiet only as long as it is behind). A plane that
  // went dark gets a packet per RTT from the first SACK after its fault,
  // not only once the rule across planes judged a loss there (about 1 ms on
  // a software host: a quarter of the spray lost meanwhile) (design.md, "A
  // quiet plane").
  bool quiet_plane_pace = true;
  // Bytes in flight on a plane that is silent, or has been quiet for a
  // smoothed RTT (a plane that merely runs behind is quiet for less), do not
  // hold the congestion window: the QP keeps sending on its other planes,
  // whose deliveries judge the dark plane's packets, instead of waiting with
  // a full window for the rule across planes or a tail-loss probe
  // (design.md, "A dark plane's bytes do not hold the window").
  bool dark_plane_credit = true;
  // As responder, SACKs, NACKs and probe answers rotate over the planes on
  // which one of this QP's last sack_plane_gap + 1 new data packets (PSNs
  // inside the window not received before) arrived (every eighth
  // over all planes that are up, so that a fault that kills only the
  // reverse direction of those planes cannot silence the QP). A plane dead
  // in both directions (a flap, a blackhole) then costs few
  // acknowledgements: with the rotation over every plane a quarter of the
  // SACKs were lost there, and the sender's ack clock and RTT slowed on the
  // planes that work (design.md, "Acknowledgements avoid a plane that
  // delivers nothing"). Counted in packets, not time: a QP that sprays
  // sends a healthy plane about every fourth packet whatever its rate.
  // 0: rotate over every plane that is up.
  uint32_t sack_plane_gap = 16;
  // Plane suspicion (plane_suspect_losses) of a silent plane waits this long
  // after the silence began: the pace above already keeps its share of the
  // data to a packet per RTT, and a plane dark for less than this (a link
  // that flaps) is back in the spray at its first paced packet after it
  // heals, where a retired plane waits for its EVs' probes and, once it
  // relapses, the back-off (plane_relapse_window). A plane silent for good
  // is retired once the wait is over. 12 ms: longer than a 10 ms down phase;
  // with 30 ms a blackholed plane's late retirement was a second dip in its
  // goodput (design.md, "A silent plane's suspicion waits"). 0: no wait.
  Time silent_suspect_wait = 12'000'000;
};

struct PortConfig {
  uint8_t port = 0;  // 1-based plane port
  Mac mac{};
  IpAddr ip;  // this port's address (its version decides the QP's IP version)
  bool up = true;
};

struct EngineConfig {
  CodecConfig codec;
  std::vector<PortConfig> ports;
  DeviceAttr device;
  uint64_t seed = 1;
  // Secret behind memory keys and QP numbers (core/ids.hpp): 0 draws it
  // from getrandom(2), so no two processes share keys; any other value
  // derives it from this seed (reproducible simulations and tests).
  uint64_t id_seed = 0;
  uint32_t max_qps = 4096;
  uint32_t max_cqs = 4096;
  uint32_t max_mrs = 65536;  // at most 65536: a key holds a 16-bit index
  // QPs kept as tombstones at once (Engine::entomb_qp): beyond this, the
  // oldest is freed early (0: none are kept, entomb_qp destroys). They also
  // never cost a new QP its slot: create_qp frees the oldest when max_qps
  // would refuse it.
  uint32_t max_tombstones = 1024;
  // EV set the engine builds for AUTO profiles (and QPs without a profile).
  uint32_t auto_evs_per_port = 64;
  uint32_t auto_active_per_port = 32;
  PathParams paths;
  bool tseth = true;            // timestamp every data packet (TSETH)
  uint32_t sack_bytes = 16384;  // coalesce SACKs up to this many new bytes
  Time sack_delay = 20'000;     // ...or this long after the first unacked packet
  // ECN-CE marked data: false (default): the receive burst's SACK answers
  // the marks (ECN flag, SKIP_ONCE for the EV of the burst's last marked
  // packet), whatever sack_bytes; true: a SACK for every marked packet
  // (UEC's reference), which on a software host costs the sender's CPU a
  // SACK per mark: a CPU-bound QP on 4 x 1 Gbit/s planes with ECN marking
  // moved 0.92 of their capacity against 0.94 (performance.md, "Start-up").
  bool sack_each_ce = false;
  // Payload bytes a QP may send in one round-robin turn before the next QP
  // with something to send gets its turn (0: one packet per turn). With
  // hundreds of busy QPs, one packet per turn switches to another QP's
  // (cold) state at every packet; a larger turn makes a newly busy QP wait
  // longer behind the others (performance.md, "256 QPs: a quantum per turn").
  uint32_t tx_quantum = 16384;
  Time min_reorder = 10'000;  // floor of the RACK reordering window
  // What spurious retransmissions add to the reordering windows (the RACK
  // timer's wait, the rule across planes) counts at most the smoothed RTT
  // now (false: all of it, the largest RTT it was learned at; design.md,
  // "What reordering taught is capped at the RTT").
  bool reo_extra_cap = true;
  Time min_rto = 50'000;  // floor for the tail-loss probe timer
  // The answer to an ASSUMED_BAD EV's probe counts as a delivery of what was
  // sent when the probe was, for loss detection across planes (as a
  // tail-loss probe's answer does): packets sent a whole RTT before it and
  // still missing are lost. And when no data went out after a probe
  // (tail-loss or EV), its answer runs the RACK timer over everything sent
  // before it (design.md, "A probe's answer as a delivery").
  bool probe_delivery = true;
  // EV probes of ASSUMED_BAD EVs, all QPs together: at most this many per
  // second (a token bucket of probe_burst). Each QP probes its own EVs, so
  // hundreds of QPs with a plane's EVs retired would otherwise send hundreds
  // of thousands of probes a second, whose answers crowd out the SACKs
  // (0: no limit).
  uint32_t probe_rate = 50'000;
  uint32_t probe_burst = 512;
  uint32_t ev_event_capacity = 4096;
  bool report_all_ev_events = false;  // also SKIP, promotions, probe failures
  // Congestion control of QPs without a CC profile (id 0).
  CcProfile default_cc;
  // Floor of NSCC's target queueing delay when a profile leaves it to the
  // engine (target_delay 0: the learned base RTT, the smallest RTT seen). On
  // a software host that minimum is a round trip in which neither engine
  // thread had to wake up; most round trips carry one or two wake-ups
  // without any queue, which a target of a few microseconds reads as
  // congestion (quick adapt). A floor above the host's wake-up delay keeps
  // one QP's window open on CPU-bound hosts, but lets shaped bottlenecks
  // queue more: performance.md, "NSCC on software hosts", measures both.
  Time cc_min_target = kNsccMinTarget;
  // Ceiling of that derived target (0: none). The base RTT is the smallest
  // RTT seen, and a QP whose first round trips already met a queue (its own
  // first window in the shapers, a host waking up) learns one that holds
  // that queue: 60-300 us where the path's is 10-20 us on the shaped demo
  // fabric. Every threshold derived from it (quick adapt's 4 x target) then
  // let the queue stand, and no smaller RTT ever came to correct it: half
  // the cold starts took 60-580 ms to reach 90% of capacity. With the
  // ceiling the target is what a datacenter path's is (a few to tens of
  // microseconds) whatever the first samples met (performance.md,
  // "Start-up"; design.md, "Start-up and fabrics without ECN").
  Time cc_max_target = kNsccMaxTarget;
  // Start-up and fabrics without ECN (performance.md, "Start-up"; design.md,
  // "Congestion control"). A QP's window starts at cc_init_window bytes and
  // doubles per round trip (slow start) until the paths show a queue, instead
  // of starting at max_cwnd (0: start at max_cwnd, the default before
  // 2026-12-04 18:30). 128 KiB by default: the maximum window's burst fills
  // the hosts' rings and shapers at once, and a cold start then spends its
  // first 20-50 ms at half the capacity with a smoothed RTT of 1-3 ms. On
  // the shaped demo fabric without ECN marking, 71 of 100 cold starts
  // reached 90% of capacity within 50 ms against 55 of 100 from the maximum
  // (64 KiB: 64 of 100); with marking 27 against 24 of 100 (performance.md,
  // "Start-up").
  uint32_t cc_init_window = 131072;
  // Without ECN a standing queue is seen only as delay: when the smallest RTT
  // of a measurement period (at least half a smoothed RTT and 8 samples)
  // exceeds the base RTT by more than the queue target, the window decreases
  // multiplicatively (at most once per period, never below max(cc_init_window
  // or 64 KiB, max_cwnd / 4), nor does ECN's decrease) and stops its fair
  // increase (false: high delay without ECN is ignored, the old behaviour).
  // Off by default until it keeps resilience 06 (5% loss on a plane) whole:
  // there it kept 0.24 and 0.48 of the goodput in 2 of 4 runs (performance.md,
  // "Start-up").
  bool cc_delay_md = false;
  // The queue target of that decrease (0: NSCC's target, max(base RTT,
  // cc_min_target)).
  Time cc_queue_target = 0;
  // NSCC's learned base RTT is the smallest RTT any QP of this engine saw to
  // the same peer (its address on the QP's lowest plane), not each QP's own.
  // A QP that met no wake-up early learns a smaller base RTT than the
  // others; quick adapt, whose delay trigger is 4 x the target, then keeps
  // that QP's window small while the others' are not cut (8 QPs of one
  // engine: one held at a sixth of the others' share, NsccFair; Jain over 8
  // processes of the host service 0.75-0.96). Shared, every QP to the peer
  // is judged against the same delay: Jain 0.999, but quick adapt then cuts
  // them all and their aggregate fell by about a fifth (bench/svc_fair.sh,
  // 2026-12-03). Off here (each QP its own minimum); mrc-serviced turns it
  // on (svc/server.hpp, service_device_defaults).
  bool cc_share_base_rtt = false;
  // Quick adapt's delay trigger (a profile's qa_threshold 0: 4 x the target)
  // is at least cc_qa_floor, and with cc_qa_standing it needs the smallest
  // delay of its window above it (a queue that stands), not one late ack.
  // Either keeps quick adapt off a software host's own wake-up delays, and
  // either costs the shaped 1 Gbit/s planes half their goodput (0.41-0.54
  // against 0.78-0.89, bench/compare --only shaped, 2026-12-03): there quick
  // adapt's cuts are what keep the tbf queues short. Off by default
  // (performance.md, "NSCC on software hosts").
  Time cc_qa_floor = 0;
  bool cc_qa_standing = false;
  // Quick adapt's delay is the fabric's: each RTT sample less the
  // responder's service time (carried in the SACK), the SACK's wait at this
  // host and the packet's time in this host's transmit, against the
  // smallest such RTT. It keeps a CPU-bound host's own delay from firing
  // quick adapt (fi_pingpong RDM 1 MiB over the libfabric provider 1.36x,
  // which turns it on: MRC_DEVICE_QA_FABRIC), but on this machine's shaped
  // 1 Gbit/s planes one bulk QP then keeps 0.57-0.62 of the capacity
  // against 0.96 (performance.md, "Quick adapt on a software host"). Off by
  // default: the whole RTT against the base RTT.
  bool cc_qa_fabric = false;
  // The same from the first ECN mark a QP's SACKs echo: a fabric that marks
  // keeps its queues short with the marks (NSCC's decrease), and quick
  // adapt on the whole RTT then only answers the hosts' own delay, cutting
  // the window to what 30-40 us delivered many times per millisecond. On
  // the shaped demo fabric with marking, cold starts reached 90% of
  // capacity within 50 ms in 30 of 40 runs against 21 of 40 without this
  // (the same runs; performance.md, "Start-up"). A fabric that never marks
  // keeps the whole RTT, the only signal that shortens its queues there
  // (with cc_qa_fabric alone no cold start reached 90% within 1 s).
  bool cc_qa_fabric_on_ecn = true;
  // Until then (while the whole RTT judges) quick adapt's gate judges what a
  // window carried per window length (base RTT + target), not its bytes: a
  // window ends at its first ack after its end, and after a host's stall
  // that ack comes with a millisecond's acks, whose bytes closed the gate
  // and held a cold start at the maximum window for 50-670 ms. Without ECN
  // marking on the shaped demo fabric, cold starts reached 90% of capacity
  // within 50 ms in 96 of 140 runs against 77 of 140, the slowest in 110-122
  // ms against 340-670 (three runs; performance.md, "Start-up").
  bool cc_qa_rate_gate = true;
  // Quick adapt "cuts" a window to what its last window achieved even when
  // that is the window's own size (true: the behaviour before 2026-12-06).
  // By default such an ack is no cut and goes on to NSCC's increases: the
  // "cut" left a window of one packet where it was and skipped the
  // increase, and on a host whose threads sleep between the packets of so
  // small a window every ack "cut" it again, for good (design.md, "Quick
  // adapt never cuts a window to itself"). A cut that raises the window
  // (a stall's acks carried more than it) is unchanged.
  bool cc_qa_cut_full = false;
};

}  // namespace v1
}  // namespace mrc
