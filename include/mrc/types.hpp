// The vocabulary of libmrc's C++ API (mrc.hpp): addresses, work requests
// and completions, QP and device attributes and their masks (numbering as in
// libibverbs and OCP mrc.h), EV and CC profiles (as in OCP mrc_ctl.h), EV
// events and counters. Self-contained: it includes only the standard library
// and <mrc/uapi/wire.h>; the engine inside libmrc uses these same types.
//
// The names live in the inline namespace mrc::v1 (they are members of mrc for
// every purpose; the engine's namespaces import them with a using-directive).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "mrc/uapi/wire.h"

namespace mrc {
inline namespace v1 {

using Time = uint64_t;  // nanoseconds of the engine's monotonic clock
constexpr Time kNever = ~Time(0);

// ---------------------------------------------------------------------------
// Addresses

using Mac = std::array<uint8_t, 6>;

enum class IpVersion : uint8_t { kV4 = 4, kV6 = 6 };

// An IPv4 address lives in the first 4 bytes.
struct IpAddr {
  IpVersion ver = IpVersion::kV4;
  std::array<uint8_t, 16> b{};
  bool operator==(const IpAddr&) const = default;
  static IpAddr v4(uint8_t a, uint8_t b2, uint8_t c, uint8_t d) {
    IpAddr r;
    r.b[0] = a, r.b[1] = b2, r.b[2] = c, r.b[3] = d;
    return r;
  }
};

// DSCP classes are configuration (Documentation/wire-format.md, "DSCP").
struct DscpClasses {
  uint8_t control = MRC_DSCP_CONTROL_DEFAULT;
  uint8_t trimmable = MRC_DSCP_TRIMMABLE_DEFAULT;
  uint8_t trimmable_retx = MRC_DSCP_TRIMMABLE_RETX_DEFAULT;
  uint8_t no_trim = MRC_DSCP_NO_TRIM_DEFAULT;
  uint8_t trimmed = MRC_DSCP_TRIMMED_DEFAULT;
  uint8_t trimmed_lasthop = MRC_DSCP_TRIMMED_LASTHOP_DEFAULT;
};

struct CodecConfig {
  uint16_t udp_port = MRC_UDP_PORT_DEFAULT;
  DscpClasses dscp;
  bool verify_icrc = true;
};

// mrc_ctl_ev_fmt_mode bits.
enum class EvFmtMode : uint32_t { kStev = 1u << 0, kSrv6 = 1u << 1, kUdp = 1u << 2 };

// Kinds of frame the engine drops as malformed (EngineStats::rx_parse_errors
// is indexed by kind; parse_error_name() names each, 0 is "ok").
constexpr size_t kParseErrorKinds = 17;
inline const char* parse_error_name(size_t kind) {
  static constexpr const char* kNames[kParseErrorKinds] = {"ok",
                                                           "not_mrc",
                                                           "truncated",
                                                           "bad_ip_version",
                                                           "bad_ip_header_len",
                                                           "bad_ip_length",
                                                           "bad_ip_checksum",
                                                           "ip_fragment",
                                                           "bad_udp_length",
                                                           "bad_tver",
                                                           "bad_reserved_bits",
                                                           "unknown_opcode",
                                                           "bad_header_stack",
                                                           "bad_length",
                                                           "bad_pad",
                                                           "bad_qpn",
                                                           "bad_icrc"};
  return kind < kParseErrorKinds ? kNames[kind] : "unknown";
}

// ---------------------------------------------------------------------------
// Verbs-like objects (values of libibverbs' enums so a verbs user reads them)

enum class QpState : uint8_t { kReset = 0, kInit = 1, kRtr = 2, kRts = 3, kErr = 6 };

enum WcStatus : uint8_t {
  kWcSuccess = 0,
  kWcLocLenErr = 1,
  kWcLocQpOpErr = 2,
  kWcLocProtErr = 4,
  kWcWrFlushErr = 5,
  kWcLocAccessErr = 8,
  kWcRemInvReqErr = 9,
  kWcRemAccessErr = 10,
  kWcRemOpErr = 11,
  kWcRetryExcErr = 12,
  kWcFatalErr = 19,
  kWcGeneralErr = 21,
};

enum class WcOpcode : uint8_t { kRdmaWrite = 1, kRecvRdmaWithImm = 129 };
constexpr uint32_t kWcWithImm = 1 << 1;  // IBV_WC_WITH_IMM

struct Wc {
  uint64_t wr_id = 0;
  WcStatus status = kWcSuccess;
  WcOpcode opcode = WcOpcode::kRdmaWrite;
  uint32_t byte_len = 0;
  uint32_t imm_data = 0;  // host order
  uint32_t qp_num = 0;
  uint32_t wc_flags = 0;
};

enum Access : uint32_t {
  kAccessLocalWrite = 1 << 0,
  kAccessRemoteWrite = 1 << 1,
  kAccessRemoteRead = 1 << 2,
};

struct Sge {
  uint64_t addr = 0;
  uint32_t length = 0;
  uint32_t lkey = 0;
};

enum class WrOpcode : uint8_t { kRdmaWrite = 0, kRdmaWriteWithImm = 1 };
enum SendFlags : uint32_t { kSendSignaled = 1 << 1 };  // IBV_SEND_SIGNALED

constexpr size_t kMaxSge = 16;

struct SendWr {
  uint64_t wr_id = 0;
  WrOpcode opcode = WrOpcode::kRdmaWrite;
  uint32_t send_flags = kSendSignaled;
  const Sge* sg_list = nullptr;
  uint32_t num_sge = 0;
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  uint32_t imm_data = 0;  // host order
};

struct RecvWr {
  uint64_t wr_id = 0;
  const Sge* sg_list = nullptr;  // WriteIMM consumes the WQE, places nothing
  uint32_t num_sge = 0;
};

struct QpCap {
  uint32_t max_send_wr = 256;
  uint32_t max_recv_wr = 256;
  uint32_t max_send_sge = 4;
  uint32_t max_recv_sge = 1;
};

struct QpInitAttr {
  uint32_t send_cq = 0, recv_cq = 0;  // CQ handles from create_cq()
  uint32_t pd = 0;
  QpCap cap;
  bool sq_sig_all = false;
  uint64_t send_ops_flags = 0;    // bit 0 WRITE, bit 1 WRITE_WITH_IMM (0 = both)
  uint32_t protocol_version = 0;  // 0 = default, else MRC_PROTOCOL_VERSION_1
};

// ibv_qp_attr_mask values (those MRC uses or explicitly rejects).
enum IbvAttrMask : uint32_t {
  kQpState = 1 << 0,
  kQpCurState = 1 << 1,
  kQpAccessFlags = 1 << 3,
  kQpPkeyIndex = 1 << 4,
  kQpPort = 1 << 5,
  kQpAv = 1 << 7,
  kQpPathMtu = 1 << 8,
  kQpTimeoutIbv = 1 << 9,
  kQpRetryCntIbv = 1 << 10,
  kQpRnrRetry = 1 << 11,
  kQpRqPsn = 1 << 12,
  kQpMaxQpRdAtomic = 1 << 13,
  kQpAltPath = 1 << 14,
  kQpMinRnrTimer = 1 << 15,
  kQpSqPsn = 1 << 16,
  kQpMaxDestRdAtomic = 1 << 17,
  kQpPathMigState = 1 << 18,
  kQpCap = 1 << 19,
  kQpDestQpn = 1 << 20,
};
constexpr uint32_t kIbvUnsupported = kQpPort | kQpTimeoutIbv | kQpRetryCntIbv | kQpRnrRetry |
                                     kQpMinRnrTimer | kQpMaxQpRdAtomic | kQpMaxDestRdAtomic |
                                     kQpAltPath | kQpPathMigState;

// mrc_qp_attr_mask values (OCP mrc.h).
enum MrcAttrMask : uint32_t {
  kMrcMaxWimm = 1 << 0,
  kMrcMaxWimmDest = 1 << 1,
  kMrcMpr = 1 << 2,
  kMrcMprDest = 1 << 3,
  kMrcTimeout = 1 << 4,
  kMrcEvProfileId = 1 << 5,
  kMrcCcProfileId = 1 << 6,
  kMrcHint = 1 << 7,
  kMrcRetryCnt = 1 << 8,
  kMrcCap = 1 << 9,
  kMrcVendorCfg = 1u << 31,
};
enum MrcQpCap : uint32_t {
  kQpCapTrimNackDestUnsupported = 1 << 0,
  kQpCapDynamicMpr = 1 << 1,
  kQpCapSvcTimeDestUnsupported = 1 << 2,
};
enum MrcDeviceCap : uint32_t {
  kDevCapTrimNack = 1 << 0,
  kDevCapDynamicMpr = 1 << 1,
  kDevCapSvcTime = 1 << 2,
};

// Where the peer is on one plane (the GID and its resolved MAC).
struct PlaneAddr {
  IpAddr ip;
  Mac mac{};
  bool valid = false;
};

constexpr size_t kMaxPorts = 16;
// Largest path_mtu (payload bytes per packet): with MRC's headers (at most
// 92 bytes over IPv6) a packet stays within IP's 65535-byte length field.
// Above 9000 only multi-buffer devices carry it (DeviceOptions::frame_chunks).
constexpr uint32_t kMaxPathMtu = 65280;

struct QpAttr {
  // verbs part
  QpState qp_state = QpState::kReset;
  QpState cur_qp_state = QpState::kReset;
  uint32_t qp_access_flags = 0;
  uint16_t pkey_index = 0;
  uint32_t path_mtu = 4096;  // payload bytes per packet (256..kMaxPathMtu, multiple of 64)
  uint32_t rq_psn = 0, sq_psn = 0;
  uint32_t dest_qp_num = 0;
  std::array<PlaneAddr, kMaxPorts + 1> av{};  // indexed by port (1-based)
  QpCap cap;
  // MRC part
  uint8_t mpr = 0, mpr_dest = 0;  // units of 128 PSNs
  uint16_t max_wimm = 0, max_wimm_dest = 0;
  uint8_t timeout = 0;  // 1.024 us x 2^timeout
  uint64_t ev_profile_id = 0, cc_profile_id = 0;
  uint8_t retry_linear = 0, retry_exp = 0;  // exp 25 = infinite
  uint64_t hint = 0;                        // opaque hint handle, 0 = none
  uint32_t cap_flags = 0;                   // MrcQpCap
  // Extension, set with the AV: the peer's max_wimm_dest learned out of band
  // (0 = unknown). The requester keeps min(max_wimm, this) WriteIMMs in flight.
  uint16_t peer_max_wimm_dest = 0;
};

struct DeviceAttr {
  uint32_t protocol_versions = 1;  // MRC_PROTOCOL_VERSION_1
  uint16_t max_wimm = 1024, max_wimm_dest = 1024;
  uint8_t max_mpr = 64, mpr_resolution = 1;
  uint32_t max_qp_hint = 64;
  uint32_t cap = kDevCapTrimNack | kDevCapSvcTime | kDevCapDynamicMpr;
};

// ---------------------------------------------------------------------------
// EVs, profiles, events

// mrc_ctl_ev_state bits.
enum EvCtlState : uint32_t {
  kEvGood = 1u << 0,
  kEvAssumedBad = 1u << 1,
  kEvDenied = 1u << 2,
  kEvUnknown = 1u << 31,
};

// Engine-internal EV state (SKIP is transient and not visible through the API).
enum class EvState : uint8_t { kGood, kSkip, kAssumedBad, kDenied };

// One entry of an EV profile as the engine uses it: the 32-bit wire entropy
// (UDP sport in the low half, flow label in the high half) and the 1-based port.
struct EvEntry {
  uint32_t ev = 0;
  uint8_t port = 0;
  bool denied = false;            // controller decision, shared by every QP of the profile
  std::array<uint8_t, 16> sid{};  // SRv6 formats: the uSID container (the IPv6 destination)
};

enum class EvMode : uint32_t { kAuto = 1u << 0, kExplicit = 1u << 1, kGenerated = 1u << 2 };

struct EvProfile {
  EvMode mode = EvMode::kAuto;
  EvFmtMode fmt = EvFmtMode::kStev;
  std::vector<EvEntry> evs;  // empty for AUTO: the engine makes them per QP
  uint32_t ev_min_active = 0;
  uint32_t event_mask = kEvGood | kEvAssumedBad;
  uint32_t active_per_plane = 0;  // 0: half of each plane's EVs are active
};

// Floor of an NSCC target delay derived from the base RTT, ns
// (EngineConfig::cc_min_target's default).
inline constexpr uint64_t kNsccMinTarget = 4000;

// Ceiling of an NSCC target delay derived from the base RTT, ns
// (EngineConfig::cc_max_target's default).
inline constexpr uint64_t kNsccMaxTarget = 32000;

// mrc_ctl_cc_nscc_cfg, with units as there. Zero fields take engine defaults.
struct NsccConfig {
  bool disable_qa = false;
  uint32_t adjust_bytes_threshold = 0;   // B
  uint32_t adjust_period_threshold = 0;  // ns
  uint32_t base_rtt = 0;                 // ns; 0 = learn the minimum RTT
  float eta = 0, fi = 0, fi_scale = 0, gamma = 0, max_md_jump = 0;
  uint32_t max_cwnd = 0;  // B
  uint8_t qa_gate = 0;
  uint32_t qa_threshold = 0;  // ns
  uint32_t target_delay = 0;  // ns
};

struct CcProfile {
  bool enabled = true;  // algorithm "uet-1.0-nscc"; false = no CC (algorithm NULL)
  NsccConfig nscc;
};

enum class EvEventReason : uint8_t {
  kEcn,         // SACK verdict SKIP_ONCE
  kTrimNack,    // NACK TRIMMED
  kAlwaysSkip,  // SACK verdict ALWAYS_SKIP
  kSilentLoss,  // loss inferred from SACKs with no trim
  kTimeout,     // ACK timeout
  kProbeOk,     // enough probes succeeded
  kProbeFail,   // a probe went unanswered
  kController,  // DENY / allow
  kPortDown,
  kPortUp,
  kRotation,      // SKIP expired at the end of a rotation
  kPromoted,      // a backup EV entered the active set
  kSuppressed,    // a demotion suppressed by ev_min_active
  kSpurious,      // the loss that demoted it was reordering: undone
  kPlaneLoss,     // its plane lost packets on many EVs with no delivery
  kPlaneLossy,    // left the active set: its plane loses far more than the QP's others
  kRelapse,       // lost data again right after probes readmitted it: probed less often
  kPlaneRelapse,  // its plane was retired again right after it came back: held off longer
};

// One EV state change (mrc_ctl_ev_event plus the QP and the reason).
struct EvEvent {
  uint64_t profile_id = 0;
  uint32_t qpn = 0;
  uint32_t ev = 0;
  uint8_t port = 0;
  EvState from = EvState::kGood, to = EvState::kGood;
  EvEventReason reason = EvEventReason::kEcn;
  uint32_t drop_count = 0;  // events dropped just before this one
  Time time = 0;
};

// ---------------------------------------------------------------------------
// Counters

struct EvStats {
  uint64_t tx_pkts = 0, tx_bytes = 0, rtx_pkts = 0;
  uint64_t acked = 0, lost = 0, ecn = 0, trims = 0;
  uint64_t probes_sent = 0, probes_ok = 0, probes_failed = 0;
  uint32_t rtt_min_ns = 0, rtt_last_ns = 0;
  uint64_t rtt_sum_ns = 0, rtt_samples = 0;
};

struct QpStats {
  uint64_t tx_data_pkts = 0, tx_data_bytes = 0, tx_rtx_pkts = 0, tx_probe_pkts = 0;
  uint64_t rx_data_pkts = 0, rx_data_bytes = 0, rx_dup_pkts = 0, rx_oor_pkts = 0;
  uint64_t tx_sacks = 0, tx_nacks = 0, rx_sacks = 0, rx_nacks = 0;
  uint64_t rtx_sack = 0, rtx_nack = 0, rtx_timeout = 0;
  uint64_t spurious_rtx = 0;
  uint64_t timeouts = 0, tlp_probes = 0, plane_suspects = 0, plane_lossy = 0;
  uint64_t ev_skips = 0, ev_assumed_bad = 0, ev_readmitted = 0, ev_promoted = 0;
  uint64_t ev_undone = 0;  // returned at once: the loss that retired them proved spurious
  // Retired again, by a loss, after probes readmitted them and before they
  // delivered anything: a path that passes probes but not data (a lower MTU
  // inside the path), or while losing far more than their plane
  // (PathParams::ev_outlier_ratio). Each relapse doubles the EV's probe
  // back-off.
  uint64_t ev_relapses = 0;
  // Retired on a lossy plane (PathParams::plane_lossy_keep_evs) for losing
  // far more than the plane (PathParams::ev_outlier_ratio).
  uint64_t ev_outliers = 0;
  // Planes retired as a whole again within PathParams::plane_relapse_window
  // of their readmission (a flapping plane, one that passes probes but loses
  // data), and the hold those relapses imposed on the plane's probes,
  // together (ns; each relapse in a row doubles it, up to plane_relapse_max).
  uint64_t plane_relapses = 0, plane_hold_ns = 0;
  // Silent losses judged by time alone (the RACK timer, the cross-plane
  // rule; nothing sent later on the packet's plane delivered): resent, and
  // counted towards plane suspicion, but no EV retired for them
  // (PathParams::loss_needs_plane_evidence).
  uint64_t losses_by_time = 0;
  // As responder: requests refused, nothing written (a bad rkey, address or
  // access right); answered with an AETH NAK, the QP stays up (a forged
  // request must not end it: the requester confirms a real one by resending).
  uint64_t rem_access_errors = 0;
  // As responder, fatal to the QP (MRC has no RNR): a WriteIMM that found no
  // posted receive; one beyond max_wimm_dest outstanding.
  uint64_t imm_no_recv = 0, imm_over_limit = 0;
  // As responder: requests answered by a QP that failed (the UNEXP_EVENT
  // NACK that names its failure, sent again for each).
  uint64_t fail_renacks = 0;
  // As requester: acknowledgements dropped without any effect (security.md).
  // ghost: names a PSN this QP never sent (at or beyond next_psn, or further
  // below the oldest unacknowledged one than any in flight could be);
  // stale: names a PSN already acknowledged or an older transmission of it.
  uint64_t ghost_sacks = 0, stale_sacks = 0;
  uint64_t ghost_nacks = 0, stale_nacks = 0;
  uint64_t ghost_naks = 0, stale_naks = 0;  // AETH NAKs
  // A refusal (AETH NAK, NACK UNEXP_EVENT) of a PSN sent once: the PSN is
  // resent, and only a refusal of the resent PSN fails the QP.
  uint64_t refusals_retried = 0;
  // Probe answers (SACK with probe_resp) that answer no probe of ours.
  uint64_t ghost_probe_resps = 0;
  // SACKs whose timestamp echo matches no transmission of their trigger PSN
  // (with TSETH on): nothing in them is believed.
  uint64_t unverified_sacks = 0;
  // Port-down reports in SACKs that name the plane they arrived through.
  uint64_t bad_port_status = 0;
  uint64_t wimm_completions = 0, send_completions = 0;
  uint64_t cwnd_bytes = 0, inflight_bytes = 0, srtt_ns = 0;
  uint64_t min_rtt_ns = 0;  // the smallest RTT sample seen (the base RTT)
  // The reordering window now, and what spurious retransmissions taught
  // the windows (EngineConfig::reo_extra_cap caps what counts at srtt_ns).
  uint64_t reo_wnd_ns = 0, reo_extra_ns = 0;
  uint64_t plane_tx_bytes[kMaxPorts + 1] = {};
  uint64_t plane_rx_bytes[kMaxPorts + 1] = {};
  // NSCC's quick adapt: the times it cut the window to what its last window
  // achieved, and of those the ones a loss (NACK) triggered; the rest were
  // a delay above its trigger (performance.md, "Quick adapt on a software
  // host": on a CPU-bound host the hosts' own delay fires it).
  uint64_t cc_qa_cuts = 0, cc_qa_loss_cuts = 0;
  // Windows whose trigger was met but that had achieved too much for a cut
  // (at least max_cwnd >> qa_gate: the gate held quick adapt closed), or
  // exactly the window's own size (no cut: EngineConfig::cc_qa_cut_full).
  uint64_t cc_qa_gated = 0;
  // NSCC's multiplicative decreases on ECN marks (an ECN-marked ack with the
  // delay above the target; at most one per base RTT).
  uint64_t cc_ecn_decreases = 0;
  // RTT samples from SACKs that carried the responder's service time, and
  // those whose service time was longer than the RTT (impossible: unused).
  uint64_t rx_sack_svc = 0, bad_svc_time = 0;
  // RTT samples whose hosts' own time (the SACK's wait here, the service
  // time, the packet's hold) covered the whole RTT: no fabric part is left,
  // so quick adapt on the fabric's delay (EngineConfig::cc_qa_fabric)
  // judges nothing from them (design.md, "Quick adapt can measure the fabric").
  uint64_t fabric_unknown = 0;
  // Silent planes (PathParams::silent_plane_pace): the times a plane became
  // silent (lost a packet with nothing sent after it on the plane
  // delivered, while another plane delivered a later one); the data packets
  // sent on silent planes (one per smoothed RTT at most); the packets
  // judged lost sooner for being on a silent plane.
  uint64_t plane_silences = 0, silent_paced_pkts = 0, silent_plane_losses = 0;
  // Quiet planes (PathParams::quiet_plane_pace): the times a plane became
  // quiet (a packet on it missing, nothing sent after it on the plane
  // delivered, a later one on another plane delivered).
  uint64_t plane_quiets = 0;
  // Gauge: the planes silent or quiet now (bit p: plane p), which the QP
  // paces to a packet per RTT.
  uint64_t dark_planes = 0;
};

struct EngineStats {
  uint64_t rx_frames = 0, rx_bytes = 0, tx_frames = 0, tx_bytes = 0;
  uint64_t rx_not_mrc = 0;
  uint64_t rx_parse_errors[kParseErrorKinds] = {};
  uint64_t rx_unknown_qp = 0, rx_bad_state = 0, rx_unexpected = 0;
  uint64_t ep_requests = 0, ep_responses_tx = 0, ep_responses_rx = 0;
  uint64_t cq_overflows = 0, ev_events_dropped = 0, tx_no_frame = 0;
  // Endpoint responses that answer no request of ours; port status updates
  // that say the plane they arrived through is down (both dropped).
  uint64_t ep_unsolicited = 0, ep_bad_port_status = 0;
  // Tombstones (Engine::entomb_qp): QPs made tombstones; of those, freed
  // before their linger ended (EngineConfig::max_tombstones, or a slot a new
  // QP needed); requests they answered (AETH NAK, remote operation error).
  uint64_t tombstones = 0, tombstones_early = 0, tomb_naks = 0;
};

// ---------------------------------------------------------------------------
// Names

inline const char* to_string(QpState s) {
  switch (s) {
    case QpState::kReset:
      return "RESET";
    case QpState::kInit:
      return "INIT";
    case QpState::kRtr:
      return "RTR";
    case QpState::kRts:
      return "RTS";
    case QpState::kErr:
      return "ERR";
  }
  return "?";
}

inline const char* to_string(WcStatus s) {
  switch (s) {
    case kWcSuccess:
      return "success";
    case kWcLocLenErr:
      return "local length error";
    case kWcLocQpOpErr:
      return "local QP operation error";
    case kWcLocProtErr:
      return "local protection error";
    case kWcWrFlushErr:
      return "work request flushed";
    case kWcLocAccessErr:
      return "local access error";
    case kWcRemInvReqErr:
      return "remote invalid request";
    case kWcRemAccessErr:
      return "remote access error";
    case kWcRemOpErr:
      return "remote operation error";
    case kWcRetryExcErr:
      return "transport retry counter exceeded";
    case kWcFatalErr:
      return "fatal error";
    case kWcGeneralErr:
      return "general error";
  }
  return "unknown status";
}

inline const char* to_string(EvState s) {
  switch (s) {
    case EvState::kGood:
      return "GOOD";
    case EvState::kSkip:
      return "SKIP";
    case EvState::kAssumedBad:
      return "ASSUMED_BAD";
    case EvState::kDenied:
      return "DENIED";
  }
  return "?";
}

inline const char* to_string(EvEventReason r) {
  switch (r) {
    case EvEventReason::kEcn:
      return "ecn";
    case EvEventReason::kTrimNack:
      return "trim_nack";
    case EvEventReason::kAlwaysSkip:
      return "always_skip";
    case EvEventReason::kSilentLoss:
      return "silent_loss";
    case EvEventReason::kTimeout:
      return "timeout";
    case EvEventReason::kProbeOk:
      return "probe_ok";
    case EvEventReason::kProbeFail:
      return "probe_fail";
    case EvEventReason::kController:
      return "controller";
    case EvEventReason::kPortDown:
      return "port_down";
    case EvEventReason::kPortUp:
      return "port_up";
    case EvEventReason::kRotation:
      return "rotation";
    case EvEventReason::kPromoted:
      return "promoted";
    case EvEventReason::kSuppressed:
      return "suppressed";
    case EvEventReason::kSpurious:
      return "spurious";
    case EvEventReason::kPlaneLoss:
      return "plane_loss";
    case EvEventReason::kPlaneLossy:
      return "plane_lossy";
    case EvEventReason::kRelapse:
      return "relapse";
    case EvEventReason::kPlaneRelapse:
      return "plane_relapse";
  }
  return "?";
}

}  // namespace v1
}  // namespace mrc
