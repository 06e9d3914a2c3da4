// The objects of the OCP MRC controller API (mrc_ctl.h) in C++: the same
// enumerators and values, the same attribute structures and in/out counts,
// with spans where the C API takes a pointer and a length. Errors are
// mrc::Status values carrying the errno mrc_ctl.h specifies.
//
// Documentation/controller.md maps every call to mrcctl and to the pinned
// maps of include/mrc/uapi/ctl.h.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "codec/ev.hpp"
#include "core/types.hpp"
#include "mrc/uapi/ctl.h"

namespace mrc::ctl {

// mrc_ctl_protocol_version
enum : uint32_t { kCtlProtocolVersion1 = 1u << 0 };

// mrc_ctl_profile_state
enum ProfileState : uint32_t {
  kProfileInit = MRC_PS_INIT,
  kProfileOffline = MRC_PS_OFFLINE,
  kProfileOnline = MRC_PS_ONLINE,
};
const char* to_string(ProfileState s);

// mrc_ctl_attr_opt
enum OptCap : uint32_t {
  kCapEvProfileModifyOnline = 1u << 0,
  kCapCcProfileModifyOnline = 1u << 1,
  kCapEvEvent = 1u << 2,
  kCapEvExplicitRange = 1u << 3,
  kCapEvEventPreciseDropCnt = 1u << 4,
  kCapEpOpEvProbe = 1u << 5,
};

// mrc_ctl_port_admin_state / mrc_ctl_port_attr_mask
enum PortAdminState : uint32_t {
  kPortAdminDisabled = MRC_CTL_PORT_DISABLED,
  kPortAdminEnabled = MRC_CTL_PORT_ENABLED,
};
enum PortAttrMask : int { kPortAttrAdminState = 1 << 0 };

// mrc_ctl_ev_fmt_mode
enum EvFmtModeBits : uint32_t {
  kFmtStev = MRC_EVF_STEV,
  kFmtSrv6 = MRC_EVF_SRV6,
  kFmtUdp = MRC_EVF_UDP,
};
// mrc_ctl_ev_fmt_op
enum EvFmtOp : uint32_t { kFmtOpModifyFields = 0, kFmtOpQueryFields = 1 };
// mrc_ctl_ev_fmt_profile_attr_mask
enum EvFmtAttrMask : uint32_t {
  kFmtAttrState = 1u << 0,
  kFmtAttrCurState = 1u << 1,
  kFmtAttrMode = 1u << 2,
  kFmtAttrOp = 1u << 3,
  kFmtAttrVendorCfg = 1u << 31,
};

// mrc_ctl_ev_state
enum EvState : uint32_t {
  kEvGood = MRC_EVS_GOOD,
  kEvAssumedBad = MRC_EVS_ASSUMED_BAD,
  kEvDenied = MRC_EVS_DENIED,
  kEvUnknown = MRC_EVS_UNKNOWN,
};
const char* ev_state_name(uint32_t s);

// mrc_ctl_ev_mode
enum EvModeBits : uint32_t {
  kEvModeAuto = MRC_EVM_AUTO,
  kEvModeExp = MRC_EVM_EXP,
  kEvModeGen = MRC_EVM_GEN,
};
const char* ev_mode_name(uint32_t m);
const char* fmt_mode_name(uint32_t m);

// mrc_ctl_ev_op / mrc_ctl_ev_fields_op
enum EvOp : uint32_t {
  kEvOpReplaceEv = 0,
  kEvOpModifyEvState = 1,
  kEvOpQueryEvState = 2,
  kEvOpQueryEvArray = 3,
};
enum EvFieldsOp : uint32_t { kEvFieldsOpModifyFields = 0, kEvFieldsOpQueryFields = 1 };

// mrc_ctl_ev_profile_attr_mask
enum EvProfileAttrMask : uint32_t {
  kEvpAttrState = 1u << 0,
  kEvpAttrCurState = 1u << 1,
  kEvpAttrMode = 1u << 2,
  kEvpAttrFmtId = 1u << 3,
  kEvpAttrCount = 1u << 4,
  kEvpAttrMinActive = 1u << 5,
  kEvpAttrEventMask = 1u << 6,
  kEvpAttrEvOp = 1u << 7,
  kEvpAttrEvFieldsOp = 1u << 8,
  kEvpAttrVendorCfg = 1u << 31,
};

// mrc_ctl_ev_op_flags
enum EvOpFlags : uint32_t { kEvOpFAllCopies = 1u << 0 };

// mrc_ctl_cc_profile_attr_mask
enum CcAttrMask : uint32_t {
  kCcAttrState = 1u << 0,
  kCcAttrCurState = 1u << 1,
  kCcAttrAlgorithm = 1u << 2,
  kCcAttrConfig = 1u << 3,
  kCcAttrVendorCfg = 1u << 31,
};

// mrc_ctl_ep_op_type
enum EpOpType : uint32_t { kEpOpEvProbe = 0, kEpOpPortStatusUpdate = 1 };

inline constexpr size_t kMaxVendorCfg = 128;  // MRC_CTL_MAX_VENDOR_CFG_SIZE
inline constexpr const char* kAlgNscc = "uet-1.0-nscc";

// mrc_ctl_ev: value (big-endian bit string) + 1-based port.
struct Ev {
  codec::EvValue val{};
  uint8_t port = 0;
  bool operator==(const Ev&) const = default;
  // MRC_CTL_EV_UNPOPULATED
  bool unpopulated() const;
  static Ev unpopulated_ev() { return Ev{}; }
};

// mrc_ctl_device_attr
struct DeviceAttr {
  uint32_t mrc_ctl_protocol_version = kCtlProtocolVersion1;
  struct {
    uint32_t ev_max_fmt_profiles = 0;
    uint32_t ev_max_profiles = 0;
    uint32_t ev_max_count = 0;
    uint32_t ev_free_count = 0;
    uint32_t ev_max_count_profile = 0;
    uint32_t ev_count_align = 1;
    uint32_t ev_max_width = 0;
    uint32_t ev_fmt_mode_mask = 0;
    uint32_t ev_mode_mask = 0;
    uint32_t ev_op_max_entries = 0;
  } ev;
  struct {
    uint32_t cc_max_profiles = 0;
    std::vector<std::string> algorithms;
  } cc;
  uint32_t phy_port_mask = 0;
  uint32_t opt_attr = 0;
};

// mrc_ctl_port_attr
struct PortAttr {
  uint32_t port_admin_state = kPortAdminEnabled;
};

// mrc_ctl_ev_fmt_profile_attr. `fmt_fields` is the caller's array; its
// length is the capacity, `fmt_field_count` the in/out count.
struct EvFmtProfileAttr {
  uint32_t profile_state = kProfileInit;
  uint32_t cur_profile_state = kProfileInit;
  uint32_t ev_fmt_mode = 0;
  struct {
    uint32_t op = kFmtOpModifyFields;
    std::span<codec::EvFmtField> fmt_fields;
    int fmt_field_count = 0;
  } ev_fmt_op;
  std::array<uint8_t, kMaxVendorCfg> vendor_cfg{};
};

// mrc_ctl_ev_op_entry
struct EvOpEntry {
  Ev ev;
  Ev ev_new;
  uint32_t state = 0;
  uint32_t flags = 0;
};

// mrc_ctl_ev_profile_attr
struct EvProfileAttr {
  uint32_t profile_state = kProfileInit;
  uint32_t cur_profile_state = kProfileInit;
  uint32_t ev_mode = 0;
  uint64_t ev_fmt_profile_id = 0;
  uint32_t ev_count = 0;
  uint32_t ev_min_active = 0;
  int ev_event_mask = 0;
  struct {
    uint32_t op = kEvOpReplaceEv;
    std::span<EvOpEntry> entries;
    int entry_count = 0;
  } ev_op;
  struct {
    uint32_t op = kEvFieldsOpModifyFields;
    std::span<codec::EvField> fields;
    int field_count = 0;
  } ev_fields_op;
  std::array<uint8_t, kMaxVendorCfg> vendor_cfg{};
};

// mrc_ctl_cc_nscc_cfg (same fields and units).
using NsccCfg = core::NsccConfig;

// mrc_ctl_cc_profile_attr: `algorithm` nullopt is the C NULL (CC disabled);
// `cc_config` nullopt is a NULL config pointer.
struct CcProfileAttr {
  uint32_t profile_state = kProfileInit;
  uint32_t cur_profile_state = kProfileInit;
  std::optional<std::string> algorithm;
  std::optional<NsccCfg> cc_config;
  std::array<uint8_t, kMaxVendorCfg> vendor_cfg{};
};

// mrc_ctl_ev_event (API 1.0.1, with `state`), plus where it came from.
struct EvEvent {
  uint64_t profile_id = 0;
  Ev ev;
  uint32_t drop_count = 0;
  uint32_t state = kEvUnknown;
  // Not in mrc_ctl.h: the QP whose report caused it (0 for controller changes)
  // and the reason, for mrcctl monitor.
  uint32_t pid = 0;
  uint32_t qpn = 0;
  std::string reason;
  uint64_t time_ns = 0;  // CLOCK_MONOTONIC
};

// union ibv_gid (RoCEv2: IPv4-mapped IPv6 for IPv4).
using Gid = std::array<uint8_t, 16>;
Gid gid_from_ip(const codec::IpAddr& ip);
codec::IpAddr ip_from_gid(const Gid& g);
bool gid_is_zero(const Gid& g);

// mrc_ctl_ep_req / mrc_ctl_ep_rsp
struct EpReq {
  uint16_t req_id = 0;
  Gid sgid{};
  Gid dgid{};
  uint32_t ev_fmt_mode = kFmtStev;
  Ev req_ev;                 // the EV as put on the wire (expanded) + the local port
  uint32_t port_status = 0;  // op.port_status_update.port_status
};
struct EpRsp {
  uint16_t req_id = 0;
  uint8_t port = 0;
  uint32_t rtt = 0;  // ns
  uint8_t adj_svc_time = 0;
};

// EV values as text: hex bytes, left-aligned ("a4", "f3b04256", "0x0001c123").
std::string ev_hex(const codec::EvValue& v, size_t min_bytes = 4);
bool parse_ev_hex(std::string_view s, codec::EvValue* out);
// "VAL@PORT" (mrcctl's notation of an EV).
std::string ev_text(const Ev& e);
bool parse_ev_text(std::string_view s, Ev* out);

}  // namespace mrc::ctl
