#include "ctl/controller.hpp"

#include "ctl/ep.hpp"
#include "ctl/srv6.hpp"

#include <signal.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>

namespace mrc::ctl {

namespace {

std::string pid_str(uint64_t id) { return std::to_string(id); }

bool valid_transition(uint32_t from, uint32_t to) {
  if (from == to) return true;
  return (from == kProfileInit && to == kProfileOffline) ||
         (from == kProfileOffline && to == kProfileOnline) ||
         (from == kProfileOnline && to == kProfileOffline) ||
         (from == kProfileOffline && to == kProfileInit);
}

Status bad_transition(const std::string& obj, uint32_t from, uint32_t to) {
  if (to > kProfileOnline)
    return Error(EINVAL, obj + ": profile_state " + std::to_string(to) + " is not a state");
  return Error(EINVAL, obj + ": transition " + std::string(to_string(ProfileState(from))) + " -> " +
                           to_string(ProfileState(to)) +
                           " is not allowed (INIT -> OFFLINE -> ONLINE -> OFFLINE -> INIT)");
}

bool vendor_zero(const std::array<uint8_t, kMaxVendorCfg>& v) {
  for (uint8_t b : v)
    if (b) return false;
  return true;
}

bool single_bit(uint32_t v) { return v && !(v & (v - 1)); }

std::vector<codec::EvFmtField> fmt_fields_of(const mrc_ctl_fmt& f) {
  std::vector<codec::EvFmtField> v(f.field_count);
  for (uint32_t i = 0; i < f.field_count && i < MRC_CTL_MAX_FMT_FIELDS; i++)
    v[i].width = f.width[i];
  return v;
}

std::vector<codec::EvField> ev_fields_of(const mrc_ctl_evp& p) {
  std::vector<codec::EvField> v(p.field_count);
  for (uint32_t i = 0; i < p.field_count && i < MRC_CTL_MAX_EV_FIELDS; i++) {
    const mrc_ctl_ev_field& f = p.field[i];
    v[i] = {f.width, f.init_val, f.min_val, f.max_val, f.mask};
  }
  return v;
}

codec::EvFmtMode codec_mode(uint32_t fmt_mode) { return codec_fmt_mode(fmt_mode); }

Ev entry_ev(const mrc_ctl_ev_entry& e) {
  Ev v;
  std::memcpy(v.val.data(), e.val, codec::kEvMaxBytes);
  v.port = e.port;
  return v;
}

bool entry_is(const mrc_ctl_ev_entry& e, const Ev& ev) {
  if (ev.unpopulated()) return !e.populated;
  return e.populated && e.port == ev.port &&
         std::memcmp(e.val, ev.val.data(), codec::kEvMaxBytes) == 0;
}

uint32_t api_state_of_engine(uint8_t s) {
  switch (s) {
    case MRC_CTL_ENGINE_GOOD:
    case MRC_CTL_ENGINE_SKIP:
      return kEvGood;
    case MRC_CTL_ENGINE_ASSUMED_BAD:
      return kEvAssumedBad;
    case MRC_CTL_ENGINE_DENIED:
      return kEvDenied;
    default:
      return kEvUnknown;
  }
}

std::string obj_name(const char* kind, uint64_t id) {
  return std::string(kind) + " " + pid_str(id);
}

}  // namespace

bool pid_alive(uint32_t pid) {
  if (pid == 0) return false;
  return ::kill(pid_t(pid), 0) == 0 || errno == EPERM;
}

Controller::Controller(Store& s, Limits lim) : s_(s), lim_(lim), pid_alive_(pid_alive) {}

bool Controller::open() {
  const bool found = s_.initialised();
  s_.initialise();
  Regions& r = s_.regions();
  // A writer that died mid-write left an odd sequence: make it even again.
  auto fix = [](auto& rec) {
    if (rec.seq & 1) __atomic_store_n(&rec.seq, rec.seq + 1, __ATOMIC_RELEASE);
  };
  for (auto& p : r.ports) fix(p);
  for (auto& f : r.fmts) fix(f);
  for (auto& p : r.evps) fix(p);
  for (auto& c : r.ccs) fix(c);
  // Profile-level ASSUMED_BAD states are rebuilt from new reports: the QPs
  // holding them are not known after a restart, so they start GOOD.
  for (size_t i = 0; i < r.evps.size(); i++) {
    mrc_ctl_evp& p = r.evps[i];
    if (!p.used || p.mode == kEvModeAuto || p.cur_state == kProfileInit) continue;
    bool any = false;
    for (uint32_t k = 0; k < p.ev_count && p.base + k < r.evs.size(); k++)
      any |= r.evs[p.base + k].state == kEvAssumedBad;
    if (!any) continue;
    RecordWrite w(p);
    for (uint32_t k = 0; k < p.ev_count && p.base + k < r.evs.size(); k++)
      if (r.evs[p.base + k].state == kEvAssumedBad) r.evs[p.base + k].state = kEvGood;
  }
  dropped_seen_ = __atomic_load_n(&s_.dev().evq_dropped, __ATOMIC_ACQUIRE);
  if (found) s_.dev().restarts++;
  commit_gen();
  return found;
}

void Controller::commit_gen() { bump_gen(s_.dev()); }

// ---------------------------------------------------------------------------
// Slots and lookups

int Controller::fmt_slot(uint64_t id) const {
  const auto& v = s_.regions().fmts;
  for (size_t i = 0; i < v.size(); i++)
    if (v[i].used && v[i].id == id) return int(i);
  return -1;
}
int Controller::evp_slot(uint64_t id) const {
  const auto& v = s_.regions().evps;
  for (size_t i = 0; i < v.size(); i++)
    if (v[i].used && v[i].id == id) return int(i);
  return -1;
}
int Controller::cc_slot(uint64_t id) const {
  const auto& v = s_.regions().ccs;
  for (size_t i = 0; i < v.size(); i++)
    if (v[i].used && v[i].id == id) return int(i);
  return -1;
}

const mrc_ctl_fmt* Controller::fmt_record(uint64_t id) const {
  int s = fmt_slot(id);
  return s < 0 ? nullptr : &s_.regions().fmts[size_t(s)];
}
const mrc_ctl_evp* Controller::ev_record(uint64_t id) const {
  int s = evp_slot(id);
  return s < 0 ? nullptr : &s_.regions().evps[size_t(s)];
}
const mrc_ctl_cc* Controller::cc_record(uint64_t id) const {
  int s = cc_slot(id);
  return s < 0 ? nullptr : &s_.regions().ccs[size_t(s)];
}

std::vector<uint64_t> Controller::fmt_profile_ids() const {
  std::vector<uint64_t> v;
  for (const auto& r : s_.regions().fmts)
    if (r.used) v.push_back(r.id);
  std::sort(v.begin(), v.end());
  return v;
}
std::vector<uint64_t> Controller::ev_profile_ids() const {
  std::vector<uint64_t> v;
  for (const auto& r : s_.regions().evps)
    if (r.used) v.push_back(r.id);
  std::sort(v.begin(), v.end());
  return v;
}
std::vector<uint64_t> Controller::cc_profile_ids() const {
  std::vector<uint64_t> v;
  for (const auto& r : s_.regions().ccs)
    if (r.used) v.push_back(r.id);
  std::sort(v.begin(), v.end());
  return v;
}

std::span<const mrc_ctl_ev_entry> Controller::ev_entries(uint64_t id) const {
  const mrc_ctl_evp* p = ev_record(id);
  if (!p || p->mode == kEvModeAuto || p->cur_state == kProfileInit || p->ev_count == 0) return {};
  const auto& evs = s_.regions().evs;
  if (size_t(p->base) + p->ev_count > evs.size()) return {};
  return evs.subspan(p->base, p->ev_count);
}

bool Controller::port_configured(uint8_t port) const {
  return port > 0 && port < MRC_CTL_MAX_PORTS && (s_.dev().port_mask >> port & 1);
}

uint32_t Controller::users(bool ev, uint64_t id) const {
  auto qps = s_.list_qps();
  if (!qps) return 0;
  uint32_t n = 0;
  for (const auto& [k, v] : *qps) {
    if (v.state == uint32_t(core::QpState::kReset)) continue;
    if ((ev ? v.ev_profile_id : v.cc_profile_id) != id) continue;
    if (pid_alive_ && !pid_alive_(k.pid)) continue;
    n++;
  }
  return n;
}
uint32_t Controller::ev_profile_users(uint64_t id) const { return users(true, id); }
uint32_t Controller::cc_profile_users(uint64_t id) const { return users(false, id); }

size_t Controller::holders(const HoldKey& k) const {
  auto it = holds_.find(k);
  return it == holds_.end() ? 0 : it->second.size();
}

uint32_t Controller::ev_pool_free() const {
  uint32_t used = 0;
  for (const auto& p : s_.regions().evps)
    if (p.used && p.mode != kEvModeAuto && p.cur_state != kProfileInit) used += p.ev_count;
  uint32_t total = uint32_t(s_.regions().evs.size());
  return used > total ? 0 : total - used;
}

Result<uint32_t> Controller::pool_alloc(uint32_t count, int except_slot) const {
  std::vector<std::pair<uint32_t, uint32_t>> ext;  // base, count
  const auto& evps = s_.regions().evps;
  for (size_t i = 0; i < evps.size(); i++) {
    const auto& p = evps[i];
    if (int(i) == except_slot || !p.used || p.mode == kEvModeAuto || p.cur_state == kProfileInit ||
        p.ev_count == 0)
      continue;
    ext.push_back({p.base, p.ev_count});
  }
  std::sort(ext.begin(), ext.end());
  uint32_t at = 0;
  for (const auto& [b, n] : ext) {
    if (b >= at && b - at >= count) return at;
    at = std::max(at, b + n);
  }
  if (s_.regions().evs.size() - at >= count) return at;
  return Error(E2BIG, "no room for " + std::to_string(count) + " EVs in the EV pool (" +
                          std::to_string(ev_pool_free()) + " of " +
                          std::to_string(s_.regions().evs.size()) + " free, fragmented)");
}

// ---------------------------------------------------------------------------
// Device and ports

DeviceAttr Controller::query_device() const {
  DeviceAttr a;
  const Regions& r = s_.regions();
  a.ev.ev_max_fmt_profiles = uint32_t(r.fmts.size());
  a.ev.ev_max_profiles = uint32_t(r.evps.size());
  a.ev.ev_max_count = uint32_t(r.evs.size());
  a.ev.ev_free_count = ev_pool_free();
  a.ev.ev_max_count_profile = MRC_CTL_EV_MAX_PER_PROFILE;
  a.ev.ev_count_align = lim_.ev_count_align;
  a.ev.ev_max_width = lim_.ev_max_width;
  a.ev.ev_fmt_mode_mask = kFmtStev | kFmtSrv6 | kFmtUdp;
  a.ev.ev_mode_mask = kEvModeAuto | kEvModeExp | kEvModeGen;
  a.ev.ev_op_max_entries = lim_.ev_op_max_entries;
  a.cc.cc_max_profiles = uint32_t(r.ccs.size());
  a.cc.algorithms = {kAlgNscc};
  a.phy_port_mask = s_.dev().port_mask;
  a.opt_attr = kCapEvEvent | kCapEvEventPreciseDropCnt | kCapEpOpEvProbe;
  return a;
}

void Controller::recompute_port_masks() {
  mrc_ctl_dev& d = s_.dev();
  uint32_t cfg = 0, admin = 0, link = 0;
  for (const auto& p : s_.regions().ports) {
    if (!p.configured || p.port == 0 || p.port >= MRC_CTL_MAX_PORTS) continue;
    cfg |= 1u << p.port;
    if (p.admin_state != kPortAdminEnabled) admin |= 1u << p.port;
    if (!p.link_up) link |= 1u << p.port;
  }
  __atomic_store_n(&d.port_mask, cfg, __ATOMIC_RELAXED);
  __atomic_store_n(&d.admin_down_mask, admin, __ATOMIC_RELAXED);
  __atomic_store_n(&d.link_down_mask, link, __ATOMIC_RELAXED);
  __atomic_store_n(&d.port_down_mask, admin | link, __ATOMIC_RELEASE);
}

Status Controller::configure_ports(std::span<const PortInfo> ports) {
  auto& recs = s_.regions().ports;
  std::vector<bool> seen(recs.size(), false);
  for (const PortInfo& pi : ports) {
    if (pi.port == 0 || pi.port >= recs.size())
      return Error(EINVAL, "port " + std::to_string(pi.port) + " is not in 1.." +
                               std::to_string(recs.size() - 1));
    if (seen[pi.port])
      return Error(EINVAL, "port " + std::to_string(pi.port) + " is configured twice");
    seen[pi.port] = true;
  }
  for (size_t n = 1; n < recs.size(); n++) {
    mrc_ctl_port& r = recs[n];
    RecordWrite w(r);
    r.port = uint32_t(n);
    if (!seen[n]) {
      r.configured = 0;
      r.link_up = 0;
      r.xdp_mode = MRC_CTL_XDP_NONE;
      continue;
    }
    const PortInfo* pi = nullptr;
    for (const PortInfo& x : ports)
      if (x.port == n) pi = &x;
    r.configured = 1;
    r.ifindex = pi->ifindex;
    r.link_up = pi->link_up ? 1 : 0;
    r.xdp_mode = pi->xdp_mode;
    r.queues = pi->queues;
    std::memset(r.ifname, 0, sizeof(r.ifname));
    std::strncpy(r.ifname, pi->ifname.c_str(), sizeof(r.ifname) - 1);
  }
  recompute_port_masks();
  commit_gen();
  return ok_status();
}

Status Controller::set_link(uint8_t port, bool up) {
  if (!port_configured(port))
    return Error(EINVAL, "port " + std::to_string(port) + " is not configured");
  mrc_ctl_port& r = s_.regions().ports[port];
  if (bool(r.link_up) == up) return ok_status();
  {
    RecordWrite w(r);
    r.link_up = up ? 1 : 0;
  }
  recompute_port_masks();
  commit_gen();
  return ok_status();
}

Status Controller::set_xdp_mode(uint8_t port, uint32_t mode) {
  if (!port_configured(port))
    return Error(EINVAL, "port " + std::to_string(port) + " is not configured");
  mrc_ctl_port& r = s_.regions().ports[port];
  {
    RecordWrite w(r);
    r.xdp_mode = mode;
  }
  commit_gen();
  return ok_status();
}

Status Controller::query_port(uint8_t port_num, PortAttr* attr, uint32_t attr_mask) const {
  const std::string obj = "port " + std::to_string(port_num);
  if (!attr) return Error(EINVAL, obj + ": attr is NULL");
  if (attr_mask & ~uint32_t(kPortAttrAdminState))
    return Error(EINVAL, obj + ": unknown attribute mask bits");
  if (!port_configured(port_num))
    return Error(EINVAL, obj + ": not a port of this device (phy_port_mask)");
  if (attr_mask & kPortAttrAdminState)
    attr->port_admin_state = s_.regions().ports[port_num].admin_state;
  return ok_status();
}

Status Controller::modify_port(uint8_t port_num, const PortAttr& attr, uint32_t attr_mask) {
  const std::string obj = "port " + std::to_string(port_num);
  if (attr_mask & ~uint32_t(kPortAttrAdminState))
    return Error(EINVAL, obj + ": unknown attribute mask bits");
  if (!port_configured(port_num))
    return Error(EINVAL, obj + ": not a port of this device (phy_port_mask)");
  if (!(attr_mask & kPortAttrAdminState)) return ok_status();
  if (attr.port_admin_state != kPortAdminEnabled && attr.port_admin_state != kPortAdminDisabled)
    return Error(EINVAL, obj + ": port_admin_state " + std::to_string(attr.port_admin_state) +
                             " is neither ENABLED nor DISABLED");
  mrc_ctl_port& r = s_.regions().ports[port_num];
  if (r.admin_state == attr.port_admin_state) return ok_status();
  {
    RecordWrite w(r);
    r.admin_state = attr.port_admin_state;
    r.admin_changes++;
  }
  recompute_port_masks();
  commit_gen();
  if (hooks_.port_admin) hooks_.port_admin(port_num, attr.port_admin_state == kPortAdminEnabled);
  return ok_status();
}

// ---------------------------------------------------------------------------
// EV format profiles

Status Controller::modify_ev_fmt_profile(uint64_t id, EvFmtProfileAttr& attr, uint32_t mask) {
  const std::string obj = obj_name("EV format profile", id);
  const uint32_t known =
      kFmtAttrState | kFmtAttrCurState | kFmtAttrMode | kFmtAttrOp | kFmtAttrVendorCfg;
  if (mask & ~known) return Error(EINVAL, obj + ": unknown attribute mask bits");
  if (mask & kFmtAttrCurState) return Error(EINVAL, obj + ": cur_profile_state cannot be modified");
  if ((mask & kFmtAttrVendorCfg) && !vendor_zero(attr.vendor_cfg))
    return Error(EINVAL, obj + ": vendor configuration is not supported");
  if ((mask & kFmtAttrOp) && attr.ev_fmt_op.op > kFmtOpQueryFields)
    return Error(EINVAL, obj + ": unknown ev_fmt_op.op " + std::to_string(attr.ev_fmt_op.op));

  auto& fmts = s_.regions().fmts;
  int slot = fmt_slot(id);
  mrc_ctl_fmt rec{};
  if (slot >= 0) {
    rec = fmts[size_t(slot)];
  } else {
    if (!(mask & (kFmtAttrState | kFmtAttrMode)) &&
        !((mask & kFmtAttrOp) && attr.ev_fmt_op.op == kFmtOpModifyFields))
      return Error(EINVAL, obj + ": does not exist");
    for (size_t i = 0; i < fmts.size() && slot < 0; i++)
      if (!fmts[i].used) slot = int(i);
    if (slot < 0)
      return Error(E2BIG, obj + ": all " + std::to_string(fmts.size()) +
                              " EV format profile slots are in use");
    rec.id = id;
    rec.used = 1;
    rec.state = rec.cur_state = kProfileInit;
  }
  const uint32_t S = rec.cur_state;
  const uint32_t T = (mask & kFmtAttrState) ? attr.profile_state : S;
  const bool modify_fields = (mask & kFmtAttrOp) && attr.ev_fmt_op.op == kFmtOpModifyFields;
  const bool modifies = (T != S) || (mask & kFmtAttrMode) || modify_fields;

  // An ONLINE EV profile using this format pins it.
  if (modifies) {
    for (const auto& p : s_.regions().evps)
      if (p.used && p.mode != kEvModeAuto && p.fmt_id == id && p.cur_state == kProfileOnline)
        return Error(EBUSY, obj + ": EV profile " + pid_str(p.id) + " uses it and is ONLINE");
  }
  if (S == kProfileOnline && ((mask & kFmtAttrMode) || modify_fields))
    return Error(EINVAL, obj + ": is ONLINE: only STATE(OFFLINE) and QUERY_FIELDS are allowed");
  if ((mask & kFmtAttrState) && !valid_transition(S, T)) return bad_transition(obj, S, T);

  if (mask & kFmtAttrMode) {
    const uint32_t m = attr.ev_fmt_mode;
    if (!single_bit(m) || !(m & (kFmtStev | kFmtSrv6 | kFmtUdp)))
      return Error(EINVAL, obj + ": ev_fmt_mode " + std::to_string(m) + " is not a format mode");
    rec.mode = m;
    rec.set_mask |= MRC_CTL_SET_MODE;
  }
  if (mask & kFmtAttrOp) {
    int n = attr.ev_fmt_op.fmt_field_count;
    if (n < 0 || size_t(n) > attr.ev_fmt_op.fmt_fields.size())
      return Error(EINVAL, obj + ": fmt_field_count " + std::to_string(n) +
                               " does not fit the fmt_fields array");
    if (attr.ev_fmt_op.op == kFmtOpQueryFields) {
      if (!(rec.set_mask & MRC_CTL_SET_FIELDS)) {
        attr.ev_fmt_op.fmt_field_count = 0;
      } else if (uint32_t(n) < rec.field_count) {
        attr.ev_fmt_op.fmt_field_count = int(rec.field_count);
        return Error(E2BIG, obj + ": fmt_field_count " + std::to_string(n) + " is less than the " +
                                std::to_string(rec.field_count) + " fields");
      } else {
        for (uint32_t i = 0; i < rec.field_count; i++)
          attr.ev_fmt_op.fmt_fields[i].width = rec.width[i];
        attr.ev_fmt_op.fmt_field_count = int(rec.field_count);
      }
    } else {
      if (n == 0) return Error(EINVAL, obj + ": no format fields");
      if (n > MRC_CTL_MAX_FMT_FIELDS)
        return Error(E2BIG, obj + ": " + std::to_string(n) +
                                " format fields exceed the maximum of " +
                                std::to_string(MRC_CTL_MAX_FMT_FIELDS));
      uint32_t total = 0;
      for (int i = 0; i < n; i++) {
        uint32_t w = attr.ev_fmt_op.fmt_fields[size_t(i)].width;
        if (w == 0)
          return Error(EINVAL, obj + ": format field " + std::to_string(i) + " has width 0");
        if (w > 32)
          return Error(E2BIG, obj + ": format field " + std::to_string(i) + " is " +
                                  std::to_string(w) + " bits wide (fields are at most 32)");
        total += w;
      }
      MRC_TRY(check_fmt_width(rec.mode, total, lim_.ev_max_width, obj));
      std::memset(rec.width, 0, sizeof(rec.width));
      for (int i = 0; i < n; i++) rec.width[i] = attr.ev_fmt_op.fmt_fields[size_t(i)].width;
      rec.field_count = uint32_t(n);
      rec.set_mask |= MRC_CTL_SET_FIELDS;
    }
  }
  // The fields against the mode (which may have changed since they were set).
  if ((rec.set_mask & MRC_CTL_SET_FIELDS) && rec.mode != kFmtUdp) {
    uint32_t total = 0;
    for (uint32_t i = 0; i < rec.field_count; i++) total += rec.width[i];
    MRC_TRY(check_fmt_width(rec.mode, total, lim_.ev_max_width, obj));
  }
  if ((rec.set_mask & MRC_CTL_SET_FIELDS) && rec.mode == kFmtUdp) {
    uint32_t total = 0;
    for (uint32_t i = 0; i < rec.field_count; i++) total += rec.width[i];
    if (total > 16)
      return Error(
          E2BIG, obj + ": a UDP format carries 16 bits, the fields total " + std::to_string(total));
  }
  // Transition requirements.
  if (T != S) {
    if (T == kProfileOffline && S == kProfileInit && !(rec.set_mask & MRC_CTL_SET_MODE))
      return Error(EINVAL, obj + ": going OFFLINE needs MODE");
    if (T == kProfileOnline && !(rec.set_mask & MRC_CTL_SET_FIELDS))
      return Error(EINVAL, obj + ": going ONLINE needs MODIFY_FIELDS");
    if (T == kProfileInit) {
      uint64_t keep_id = rec.id;
      rec = mrc_ctl_fmt{};
      rec.id = keep_id;
      rec.used = 1;
    }
  }
  if (mask & kFmtAttrState) rec.state = T;
  rec.cur_state = T;
  if (!modifies && slot >= 0 && fmts[size_t(slot)].used) return ok_status();
  {
    mrc_ctl_fmt& dst = fmts[size_t(slot)];
    RecordWrite w(dst);
    uint64_t seq = dst.seq;
    dst = rec;
    dst.seq = seq;
  }
  ctr_.modifies++;
  commit_gen();
  return ok_status();
}

Status Controller::query_ev_fmt_profile(uint64_t id, EvFmtProfileAttr& attr, uint32_t mask) const {
  const std::string obj = obj_name("EV format profile", id);
  const uint32_t known =
      kFmtAttrState | kFmtAttrCurState | kFmtAttrMode | kFmtAttrOp | kFmtAttrVendorCfg;
  if (mask & ~known) return Error(EINVAL, obj + ": unknown attribute mask bits");
  const mrc_ctl_fmt* r = fmt_record(id);
  if (!r) return Error(EINVAL, obj + ": does not exist");
  if (mask & kFmtAttrState) attr.profile_state = r->state;
  if (mask & kFmtAttrCurState) attr.cur_profile_state = r->cur_state;
  if (mask & kFmtAttrMode) attr.ev_fmt_mode = r->mode;
  if (mask & kFmtAttrVendorCfg) attr.vendor_cfg.fill(0);
  if (mask & kFmtAttrOp) {
    if (attr.ev_fmt_op.op != kFmtOpQueryFields)
      return Error(EINVAL, obj + ": MODIFY_FIELDS is not a query operation");
    int n = attr.ev_fmt_op.fmt_field_count;
    if (n < 0 || size_t(n) > attr.ev_fmt_op.fmt_fields.size())
      return Error(EINVAL, obj + ": fmt_field_count " + std::to_string(n) +
                               " does not fit the fmt_fields array");
    if (uint32_t(n) < r->field_count) {
      attr.ev_fmt_op.fmt_field_count = int(r->field_count);
      return Error(E2BIG, obj + ": fmt_field_count " + std::to_string(n) + " is less than the " +
                              std::to_string(r->field_count) + " fields");
    }
    for (uint32_t i = 0; i < r->field_count; i++) attr.ev_fmt_op.fmt_fields[i].width = r->width[i];
    attr.ev_fmt_op.fmt_field_count = int(r->field_count);
  }
  return ok_status();
}

// ---------------------------------------------------------------------------
// EV profiles

// One modify_ev_profile call: its arguments, the record and EV array staged
// from them, and what the stages (controller.hpp, 1-5) tell each other.
struct Controller::EvpModify {
  uint64_t id = 0;
  EvProfileAttr& attr;
  uint32_t mask = 0;
  std::string obj;  // "EV profile 5"

  int slot = -1;                      // the record's slot (a free one when it is created)
  mrc_ctl_evp rec{};                  // the record as it will be
  std::vector<mrc_ctl_ev_entry> arr;  // the profile's array as it will be
  bool arr_dirty = false;             // arr differs from the store
  bool rebuild = false;               // arr must be regenerated from attributes
  bool mode_changed = false;
  uint32_t S = 0, T = 0;  // current and target state
  bool ev_op = false;     // EV_OP in the mask
  bool fields_mod = false;
  // Staged attributes the later stages read.
  bool auto_mode = false;
  uint32_t eff_count = 0;  // ev_count, or the AUTO default
  const mrc_ctl_fmt* fmt = nullptr;
  std::vector<codec::EvFmtField> fmtf;  // the format's fields (empty: none)
  // Stage 3: the first failing entry (the entries before it are committed)
  // and the events of the state changes.
  Status op_err = ok_status();
  std::vector<EvEvent> events;

  Error fail(int code, const std::string& why) const { return Error(code, obj + ": " + why); }

  // The staged fields against the format's.
  Status validate_fields(uint32_t max_width) const {
    std::string why;
    auto f = ev_fields_of(rec);
    int e =
        codec::ev_validate(fmtf, f, fmt_width_limit(fmt ? fmt->mode : kFmtStev, max_width), &why);
    if (e) return Error(e, why);
    return ok_status();
  }

  // Expands a compact EV value with the staged fields into an array entry.
  bool build_entry(mrc_ctl_ev_entry& e, const codec::EvValue& compact, uint8_t port) const {
    codec::EvValue out{};
    auto f = ev_fields_of(rec);
    if (!codec::ev_expand(fmtf, f, compact, out)) return false;
    std::memcpy(e.val, compact.data(), codec::kEvMaxBytes);
    e.wire = ev_wire(out, fmt ? fmt->mode : kFmtStev);
    e.port = port;
    e.populated = 1;
    return true;
  }
};

Status Controller::modify_ev_profile(uint64_t id, EvProfileAttr& attr, uint32_t mask) {
  ctr_.modifies++;
  EvpModify m{id, attr, mask, obj_name("EV profile", id)};
  Status s = evp_modify(m);
  if (!s) ctr_.modify_errors++;
  return s;
}

Status Controller::evp_modify(EvpModify& m) {
  MRC_TRY(evp_check_mask(m));
  MRC_TRY(evp_load(m));
  MRC_TRY(evp_check_state(m));  // 1.
  MRC_TRY(evp_stage_attrs(m));  // 2.
  MRC_TRY(evp_stage_fields(m));
  MRC_TRY(evp_stage_array(m));
  MRC_TRY(evp_run_ev_op(m));                      // 3.
  if (m.op_err.ok()) MRC_TRY(evp_transition(m));  // 4.
  return evp_commit(m);                           // 5.
}

// The mask and the operations' codes, before anything is looked at.
Status Controller::evp_check_mask(EvpModify& m) {
  const uint32_t mask = m.mask;
  const EvProfileAttr& attr = m.attr;
  const uint32_t known = kEvpAttrState | kEvpAttrCurState | kEvpAttrMode | kEvpAttrFmtId |
                         kEvpAttrCount | kEvpAttrMinActive | kEvpAttrEventMask | kEvpAttrEvOp |
                         kEvpAttrEvFieldsOp | kEvpAttrVendorCfg;
  if (mask & ~known) return m.fail(EINVAL, "unknown attribute mask bits");
  if (mask & kEvpAttrCurState) return m.fail(EINVAL, "cur_profile_state cannot be modified");
  if ((mask & kEvpAttrEvOp) && (mask & kEvpAttrEvFieldsOp))
    return m.fail(EINVAL, "EV_OP and EV_FIELDS_OP are mutually exclusive");
  if ((mask & kEvpAttrVendorCfg) && !vendor_zero(attr.vendor_cfg))
    return m.fail(EINVAL, "vendor configuration is not supported");
  if ((mask & kEvpAttrEvOp) && attr.ev_op.op > kEvOpQueryEvArray)
    return m.fail(EINVAL, "unknown ev_op.op " + std::to_string(attr.ev_op.op));
  if ((mask & kEvpAttrEvFieldsOp) && attr.ev_fields_op.op > kEvFieldsOpQueryFields)
    return m.fail(EINVAL, "unknown ev_fields_op.op " + std::to_string(attr.ev_fields_op.op));
  return ok_status();
}

// The record and its array, or a free slot for a profile the call creates.
Status Controller::evp_load(EvpModify& m) {
  Regions& R = s_.regions();
  m.slot = evp_slot(m.id);
  if (m.slot >= 0) {
    m.rec = R.evps[size_t(m.slot)];
    auto cur = ev_entries(m.id);
    m.arr.assign(cur.begin(), cur.end());
  } else {
    const bool creates =
        (m.mask & (kEvpAttrState | kEvpAttrMode | kEvpAttrFmtId | kEvpAttrCount |
                   kEvpAttrMinActive | kEvpAttrEventMask)) ||
        ((m.mask & kEvpAttrEvFieldsOp) && m.attr.ev_fields_op.op == kEvFieldsOpModifyFields);
    if (!creates) return m.fail(EINVAL, "does not exist");
    for (size_t i = 0; i < R.evps.size() && m.slot < 0; i++)
      if (!R.evps[i].used) m.slot = int(i);
    if (m.slot < 0)
      return m.fail(E2BIG, "all " + std::to_string(R.evps.size()) + " EV profile slots are in use");
    m.rec.id = m.id;
    m.rec.used = 1;
    m.rec.state = m.rec.cur_state = kProfileInit;
  }
  m.S = m.rec.cur_state;
  m.T = (m.mask & kEvpAttrState) ? m.attr.profile_state : m.S;
  m.ev_op = m.mask & kEvpAttrEvOp;
  m.fields_mod = (m.mask & kEvpAttrEvFieldsOp) && m.attr.ev_fields_op.op == kEvFieldsOpModifyFields;
  return ok_status();
}

// 1. What the current state allows.
Status Controller::evp_check_state(EvpModify& m) {
  const uint32_t S = m.S, T = m.T;
  const uint32_t attr_bits =
      kEvpAttrMode | kEvpAttrFmtId | kEvpAttrCount | kEvpAttrMinActive | kEvpAttrEventMask;
  if (S == kProfileOnline) {
    std::string what;
    if (m.mask & attr_bits) what = "MODE, FMT_ID, COUNT, MIN_ACTIVE and EVENT_MASK";
    if (m.ev_op && m.attr.ev_op.op == kEvOpReplaceEv) what = "REPLACE_EV";
    if (m.fields_mod) what = "MODIFY_FIELDS";
    const bool leaving = T != S;
    if (!what.empty() || leaving) {
      uint32_t n = ev_profile_users(m.id);
      if (n) return m.fail(EBUSY, "used by " + std::to_string(n) + " active QP(s)");
    }
    if (!what.empty())
      return m.fail(
          EINVAL,
          "is ONLINE: " + what +
              " cannot be modified (MRC_CTL_OPT_CAP_EV_PROFILE_MODIFY_ONLINE is not supported)");
  }
  if (S == kProfileInit && m.ev_op)
    return m.fail(EINVAL, "is INIT and has no EV array (EV_OP needs OFFLINE or ONLINE)");
  if ((m.mask & kEvpAttrState) && !valid_transition(S, T)) return bad_transition(m.obj, S, T);
  return ok_status();
}

// 2. Stage the attributes: mode, format, count, min_active, event mask.
Status Controller::evp_stage_attrs(EvpModify& m) {
  const EvProfileAttr& attr = m.attr;
  mrc_ctl_evp& rec = m.rec;
  if (m.mask & kEvpAttrMode) {
    uint32_t v = attr.ev_mode;
    if (!single_bit(v) || !(v & (kEvModeAuto | kEvModeExp | kEvModeGen)))
      return m.fail(EINVAL, "ev_mode " + std::to_string(v) + " is not an EV mode");
    if (v != rec.mode) m.rebuild = m.mode_changed = true;
    rec.mode = v;
    rec.set_mask |= MRC_CTL_SET_MODE;
  }
  if (m.mask & kEvpAttrFmtId) {
    const mrc_ctl_fmt* f = fmt_record(attr.ev_fmt_profile_id);
    if (!f)
      return m.fail(EINVAL,
                    "EV format profile " + pid_str(attr.ev_fmt_profile_id) + " does not exist");
    if (attr.ev_fmt_profile_id != rec.fmt_id) m.rebuild = true;
    rec.fmt_id = attr.ev_fmt_profile_id;
    rec.set_mask |= MRC_CTL_SET_FMT_ID;
  }
  if (m.mask & kEvpAttrCount) {
    uint32_t c = attr.ev_count;
    if (c == 0) return m.fail(EINVAL, "ev_count is 0");
    if (c > MRC_CTL_EV_MAX_PER_PROFILE)
      return m.fail(E2BIG, "ev_count " + std::to_string(c) + " exceeds ev_max_count_profile " +
                               std::to_string(MRC_CTL_EV_MAX_PER_PROFILE));
    if (lim_.ev_count_align > 1 && c % lim_.ev_count_align)
      return m.fail(EINVAL, "ev_count " + std::to_string(c) +
                                " is not a multiple of ev_count_align " +
                                std::to_string(lim_.ev_count_align));
    if (c != rec.ev_count) m.rebuild = true;
    rec.ev_count = c;
    rec.set_mask |= MRC_CTL_SET_COUNT;
  }
  if (m.mask & kEvpAttrMinActive) {
    rec.min_active = attr.ev_min_active;
    rec.set_mask |= MRC_CTL_SET_MIN_ACTIVE;
  }
  if (m.mask & kEvpAttrEventMask) {
    uint32_t v = uint32_t(attr.ev_event_mask);
    if (v & ~uint32_t(kEvGood | kEvAssumedBad))
      return m.fail(EINVAL, "ev_event_mask " + std::to_string(v) +
                                ": only GOOD and ASSUMED_BAD can be monitored");
    rec.event_mask = v;
    rec.set_mask |= MRC_CTL_SET_EVENT_MASK;
  }
  return ok_status();
}

// 2. Stage the fields (MODIFY_FIELDS), or answer QUERY_FIELDS.
Status Controller::evp_stage_fields(EvpModify& m) {
  if (!(m.mask & kEvpAttrEvFieldsOp)) return ok_status();
  auto& fop = m.attr.ev_fields_op;
  mrc_ctl_evp& rec = m.rec;
  int n = fop.field_count;
  if (n < 0 || size_t(n) > fop.fields.size())
    return m.fail(EINVAL, "field_count " + std::to_string(n) + " does not fit the fields array");
  if (fop.op == kEvFieldsOpQueryFields) {
    if (uint32_t(n) < rec.field_count) {
      fop.field_count = int(rec.field_count);
      return m.fail(E2BIG, "field_count " + std::to_string(n) + " is less than the " +
                               std::to_string(rec.field_count) + " fields");
    }
    auto f = ev_fields_of(rec);
    std::copy(f.begin(), f.end(), fop.fields.begin());
    fop.field_count = int(rec.field_count);
    return ok_status();
  }
  if (n == 0) return m.fail(EINVAL, "no EV fields");
  if (n > MRC_CTL_MAX_EV_FIELDS)
    return m.fail(E2BIG, std::to_string(n) + " EV fields exceed the maximum of " +
                             std::to_string(MRC_CTL_MAX_EV_FIELDS));
  std::memset(rec.field, 0, sizeof(rec.field));
  for (int i = 0; i < n; i++) {
    const codec::EvField& f = fop.fields[size_t(i)];
    rec.field[i] = {f.width, f.init_val, f.min_val, f.max_val, f.mask};
  }
  rec.field_count = uint32_t(n);
  rec.set_mask |= MRC_CTL_SET_FIELDS;
  m.rebuild = true;
  return ok_status();
}

// 2. Cross checks on the staged attributes; the EV array follows them while
// OFFLINE (and on INIT -> OFFLINE).
Status Controller::evp_stage_array(EvpModify& m) {
  const mrc_ctl_evp& rec = m.rec;
  const uint32_t S = m.S;
  m.auto_mode = rec.mode == kEvModeAuto;
  m.eff_count =
      m.auto_mode && !(rec.set_mask & MRC_CTL_SET_COUNT) ? lim_.auto_ev_count : rec.ev_count;
  const bool count_known =
      (rec.set_mask & MRC_CTL_SET_COUNT) || (m.auto_mode && (rec.set_mask & MRC_CTL_SET_MODE));
  if ((rec.set_mask & MRC_CTL_SET_MIN_ACTIVE) && count_known && rec.min_active > m.eff_count &&
      (m.mask & (kEvpAttrMinActive | kEvpAttrCount | kEvpAttrMode)))
    return m.fail(EINVAL, "ev_min_active " + std::to_string(rec.min_active) +
                              " is greater than ev_count " + std::to_string(m.eff_count));
  m.fmt = (rec.set_mask & MRC_CTL_SET_FMT_ID) ? fmt_record(rec.fmt_id) : nullptr;
  if (m.fmt && (m.fmt->set_mask & MRC_CTL_SET_FIELDS)) m.fmtf = fmt_fields_of(*m.fmt);
  if (!m.auto_mode && (rec.set_mask & MRC_CTL_SET_FIELDS) && !m.fmtf.empty() &&
      (m.mask & (kEvpAttrEvFieldsOp | kEvpAttrFmtId | kEvpAttrMode))) {
    if (Status v = m.validate_fields(lim_.ev_max_width); !v)
      return m.fail(v.error().code, v.error().context);
  }
  const bool has_array_after = !m.auto_mode && (S != kProfileInit || m.T == kProfileOffline);
  if (has_array_after && (m.rebuild || S == kProfileInit) && S != kProfileOnline) {
    if (Status b = evp_rebuild(m); !b)
      return m.fail(b.error().code,
                    (S == kProfileInit ? "going OFFLINE " : "") + b.error().context);
  }
  if (m.auto_mode && !m.arr.empty()) {
    m.arr.clear();
    m.arr_dirty = true;
  }
  return ok_status();
}

// The EV array regenerated from the staged attributes: GENERATED spreads
// generated EVs over the configured ports; EXPLICIT keeps the entries that
// still fit, the rest start UNPOPULATED. Errors without the object's name.
Status Controller::evp_rebuild(EvpModify& m) {
  mrc_ctl_evp& rec = m.rec;
  const mrc_ctl_fmt* fmt = m.fmt;
  if (!(rec.set_mask & MRC_CTL_SET_FMT_ID) || !fmt)
    return Error(EINVAL, "needs FMT_ID (an existing EV format profile)");
  if (!(fmt->set_mask & MRC_CTL_SET_FIELDS) || fmt->cur_state == kProfileInit)
    return Error(EINVAL,
                 "EV format profile " + pid_str(rec.fmt_id) + " has no fields (it is INIT)");
  if (!(rec.set_mask & MRC_CTL_SET_COUNT)) return Error(EINVAL, "needs COUNT");
  if (!(rec.set_mask & MRC_CTL_SET_FIELDS)) return Error(EINVAL, "needs MODIFY_FIELDS");
  MRC_TRY(m.validate_fields(lim_.ev_max_width));
  rec.fmt_mode = fmt->mode;
  std::vector<mrc_ctl_ev_entry> old = std::move(m.arr);
  m.arr.assign(rec.ev_count, mrc_ctl_ev_entry{});
  if (rec.mode == kEvModeGen) {
    std::vector<uint8_t> ports;
    for (uint8_t p = 1; p < MRC_CTL_MAX_PORTS; p++)
      if (port_configured(p)) ports.push_back(p);
    if (ports.empty()) return Error(EINVAL, "no ports are configured to spread generated EVs over");
    auto f = ev_fields_of(rec);
    for (uint32_t i = 0; i < rec.ev_count; i++) {
      mrc_ctl_ev_entry& e = m.arr[i];
      if (!m.build_entry(e, codec::ev_generate_compact(f, i), ports[i % ports.size()]))
        return Error(EINVAL, "generated EV " + std::to_string(i) + " does not expand");
      e.state = kEvGood;
    }
  } else {
    for (uint32_t i = 0; i < rec.ev_count; i++) {
      mrc_ctl_ev_entry& e = m.arr[i];
      e.state = kEvGood;
      if (i < old.size() && old[i].populated && m.S != kProfileInit && !m.mode_changed) {
        codec::EvValue c{};
        std::memcpy(c.data(), old[i].val, codec::kEvMaxBytes);
        if (!m.build_entry(e, c, old[i].port))
          return Error(EINVAL, "EV " + std::to_string(i) + " (" + ev_text(entry_ev(old[i])) +
                                   ") does not fit the new fields");
        e.state = old[i].state;
      }
    }
  }
  m.arr_dirty = true;
  return ok_status();
}

// 3. The EV operation, entry by entry, on the staged array. An error of the
// operation as a whole is returned; the first failing entry is m.op_err.
Status Controller::evp_run_ev_op(EvpModify& m) {
  if (!m.ev_op) return ok_status();
  auto& op = m.attr.ev_op;
  int n = op.entry_count;
  if (n < 0 || size_t(n) > op.entries.size())
    return m.fail(EINVAL, "entry_count " + std::to_string(n) + " does not fit the entries array");
  if (m.auto_mode) return m.fail(EINVAL, "AUTO profiles have no EV array");
  if (op.op == kEvOpQueryEvArray) {
    if (uint32_t(n) < m.arr.size()) {
      op.entry_count = int(m.arr.size());
      return m.fail(E2BIG, "entry_count " + std::to_string(n) + " is less than ev_count " +
                               std::to_string(m.arr.size()));
    }
    for (size_t i = 0; i < m.arr.size(); i++) {
      op.entries[i].ev = entry_ev(m.arr[i]);
      op.entries[i].state = m.arr[i].populated ? m.arr[i].state : uint32_t(kEvUnknown);
    }
    op.entry_count = int(m.arr.size());
    return ok_status();
  }
  if (uint32_t(n) > lim_.ev_op_max_entries)
    return m.fail(E2BIG, std::to_string(n) + " entries exceed ev_op_max_entries " +
                             std::to_string(lim_.ev_op_max_entries));
  for (int i = 0; i < n && m.op_err.ok(); i++) {
    EvOpEntry& en = op.entries[size_t(i)];
    if (Status s = evp_entry(m, en); !s)
      m.op_err = Error(s.error().code, m.obj + ": entry " + std::to_string(i) + " (" +
                                           ev_text(en.ev) + "): " + s.error().context);
  }
  return ok_status();
}

// 3. One entry of the EV operation (errors without the object and entry).
Status Controller::evp_entry(EvpModify& m, EvOpEntry& en) {
  const uint32_t op = m.attr.ev_op.op;
  if (op == kEvOpQueryEvState) {
    for (const auto& e : m.arr)
      if (entry_is(e, en.ev)) {
        en.state = e.populated ? e.state : uint32_t(kEvUnknown);
        return ok_status();
      }
    return Error(ENOENT, "EV not found");
  }
  if (en.flags & ~uint32_t(kEvOpFAllCopies))
    return Error(EINVAL, "unknown flags " + std::to_string(en.flags));
  if (en.state != kEvGood && en.state != kEvDenied)
    return Error(EINVAL, std::string("state ") + ev_state_name(en.state) +
                             " cannot be set by the controller (GOOD or DENIED)");
  if (op == kEvOpModifyEvState) return evp_entry_state(m, en);
  return evp_entry_replace(m, en);
}

// MODIFY_EV_STATE: every copy of the EV; a change is an event, and a DENIED
// decision restarts the data path's holds on it.
Status Controller::evp_entry_state(EvpModify& m, const EvOpEntry& en) {
  if (en.ev.unpopulated()) return Error(EINVAL, "UNPOPULATED has no state");
  bool found = false, changed = false;
  uint32_t prev = 0;
  for (auto& e : m.arr) {
    if (!entry_is(e, en.ev)) continue;
    found = true;
    if (e.state != en.state) {
      prev = e.state;
      changed = true;
      e.state = en.state;
      m.arr_dirty = true;
    }
  }
  if (!found) return Error(ENOENT, "EV not found");
  if (changed) {
    EvEvent ev;
    ev.profile_id = m.id;
    ev.ev = en.ev;
    ev.state = en.state;
    ev.reason = en.state == kEvDenied ? "controller deny" : "controller allow";
    if (prev == kEvDenied || en.state == kEvDenied) {
      // The data path's holds restart from this decision.
      for (auto& e : m.arr)
        if (entry_is(e, en.ev)) holds_.erase(HoldKey{m.id, e.wire, e.port});
    }
    m.events.push_back(ev);
  }
  return ok_status();
}

// REPLACE_EV: the first copy of the EV (every copy with ALL_COPIES).
Status Controller::evp_entry_replace(EvpModify& m, const EvOpEntry& en) {
  const Ev& nv = en.ev_new;
  if (nv.unpopulated()) return Error(EINVAL, "ev_new is UNPOPULATED");
  if (!port_configured(nv.port))
    return Error(EINVAL,
                 "ev_new port " + std::to_string(nv.port) + " is not a port of this device");
  mrc_ctl_ev_entry fresh{};
  if (!m.build_entry(fresh, nv.val, nv.port))
    return Error(EINVAL, "ev_new " + ev_text(nv) + " has bits beyond the " +
                             std::to_string(codec::ev_compact_bits(ev_fields_of(m.rec))) +
                             " bits the profile's fields consume");
  fresh.state = en.state;
  bool found = false;
  for (auto& e : m.arr) {
    if (!entry_is(e, en.ev)) continue;
    found = true;
    e = fresh;
    m.arr_dirty = true;
    if (!(en.flags & kEvOpFAllCopies)) break;
  }
  if (!found) return Error(ENOENT, "EV not found");
  return ok_status();
}

// 4. The state transition (only when every entry succeeded).
Status Controller::evp_transition(EvpModify& m) {
  mrc_ctl_evp& rec = m.rec;
  const uint32_t S = m.S, T = m.T;
  if (T != S && T == kProfileOffline && S == kProfileInit) {
    if (!(rec.set_mask & MRC_CTL_SET_MODE)) return m.fail(EINVAL, "going OFFLINE needs MODE");
    if (!m.auto_mode && !m.arr_dirty) {
      if (Status b = evp_rebuild(m); !b)
        return m.fail(b.error().code, "going OFFLINE " + b.error().context);
    }
  }
  if (T != S && T == kProfileOnline) MRC_TRY(evp_going_online(m));
  if (T != S && T == kProfileInit) {
    uint64_t keep = rec.id;
    rec = mrc_ctl_evp{};
    rec.id = keep;
    rec.used = 1;
    m.arr.clear();
    m.arr_dirty = true;
    for (auto it = holds_.begin(); it != holds_.end();)
      it = it->first.profile == m.id ? holds_.erase(it) : std::next(it);
  }
  if (m.mask & kEvpAttrState) rec.state = T;
  rec.cur_state = T;
  return ok_status();
}

// 4. Going ONLINE: every attribute set, the format ONLINE, every EV
// populated, and the array re-expanded with the format as it is now.
Status Controller::evp_going_online(EvpModify& m) {
  mrc_ctl_evp& rec = m.rec;
  if (!(rec.set_mask & MRC_CTL_SET_MIN_ACTIVE))
    return m.fail(EINVAL, "going ONLINE needs MIN_ACTIVE");
  if (!(rec.set_mask & MRC_CTL_SET_EVENT_MASK))
    return m.fail(EINVAL, "going ONLINE needs EVENT_MASK");
  if (rec.min_active > m.eff_count)
    return m.fail(EINVAL, "ev_min_active " + std::to_string(rec.min_active) +
                              " is greater than ev_count " + std::to_string(m.eff_count));
  if (m.auto_mode) return ok_status();
  if (!m.fmt || m.fmt->cur_state != kProfileOnline)
    return m.fail(EINVAL, "EV format profile " + pid_str(rec.fmt_id) + " is not ONLINE");
  uint32_t unpop = 0;
  for (const auto& e : m.arr) unpop += e.populated ? 0 : 1;
  if (unpop)
    return m.fail(EINVAL, std::to_string(unpop) + " of " + std::to_string(m.arr.size()) +
                              " EVs are still UNPOPULATED (REPLACE_EV them before going ONLINE)");
  // The format may have been redefined since the array was built.
  if (Status v = m.validate_fields(lim_.ev_max_width); !v)
    return m.fail(v.error().code, v.error().context);
  rec.fmt_mode = m.fmt->mode;
  for (size_t i = 0; i < m.arr.size(); i++) {
    mrc_ctl_ev_entry& e = m.arr[i];
    codec::EvValue c{};
    std::memcpy(c.data(), e.val, codec::kEvMaxBytes);
    const uint32_t old_wire = e.wire;
    const uint32_t keep_state = e.state;
    if (!m.build_entry(e, c, e.port))
      return m.fail(EINVAL, "EV " + std::to_string(i) + " does not expand with format " +
                                pid_str(rec.fmt_id));
    e.state = keep_state;
    m.arr_dirty |= e.wire != old_wire;
  }
  return ok_status();
}

// 5. Commit: the array into the pool (moved when its size changed), the
// record, the generation; then the events. Returns the EV operation's error.
Status Controller::evp_commit(EvpModify& m) {
  Regions& R = s_.regions();
  mrc_ctl_evp& rec = m.rec;
  const size_t slot = size_t(m.slot);
  const bool header_changed =
      std::memcmp(&rec, &R.evps[slot], sizeof(rec)) != 0 || !R.evps[slot].used;
  if (!header_changed && !m.arr_dirty) return m.op_err;
  const bool needs_array =
      rec.mode != kEvModeAuto && rec.cur_state != kProfileInit && !m.arr.empty();
  uint32_t base = rec.base;
  if (needs_array) {
    const mrc_ctl_evp& old = R.evps[slot];
    const bool old_array =
        old.used && old.mode != kEvModeAuto && old.cur_state != kProfileInit && old.ev_count;
    if (!old_array || old.ev_count != m.arr.size()) {
      auto b = pool_alloc(uint32_t(m.arr.size()), m.slot);
      if (!b) return m.fail(b.error().code, b.error().context);
      base = *b;
    }
  }
  rec.base = needs_array ? base : 0;
  uint32_t denied = 0;
  for (const auto& e : m.arr) denied += e.state == kEvDenied ? 1 : 0;
  rec.n_denied = denied;
  rec.changes++;
  {
    mrc_ctl_evp& dst = R.evps[slot];
    RecordWrite w(dst);
    if (needs_array) std::copy(m.arr.begin(), m.arr.end(), R.evs.begin() + rec.base);
    uint64_t seq = dst.seq;
    dst = rec;
    dst.seq = seq;
  }
  commit_gen();
  for (EvEvent& e : m.events) {
    e.time_ns = mono_ns();
    if (hooks_.transition) hooks_.transition(e);
    if (e.state & rec.event_mask) emit(e);
  }
  return m.op_err;
}

Status Controller::query_ev_profile(uint64_t id, EvProfileAttr& attr, uint32_t mask) const {
  const std::string obj = obj_name("EV profile", id);
  const uint32_t known = kEvpAttrState | kEvpAttrCurState | kEvpAttrMode | kEvpAttrFmtId |
                         kEvpAttrCount | kEvpAttrMinActive | kEvpAttrEventMask | kEvpAttrEvOp |
                         kEvpAttrEvFieldsOp | kEvpAttrVendorCfg;
  if (mask & ~known) return Error(EINVAL, obj + ": unknown attribute mask bits");
  if ((mask & kEvpAttrEvOp) && (mask & kEvpAttrEvFieldsOp))
    return Error(EINVAL, obj + ": EV_OP and EV_FIELDS_OP are mutually exclusive");
  const mrc_ctl_evp* r = ev_record(id);
  if (!r) return Error(EINVAL, obj + ": does not exist");
  if (mask & kEvpAttrState) attr.profile_state = r->state;
  if (mask & kEvpAttrCurState) attr.cur_profile_state = r->cur_state;
  if (mask & kEvpAttrMode) attr.ev_mode = r->mode;
  if (mask & kEvpAttrFmtId) attr.ev_fmt_profile_id = r->fmt_id;
  if (mask & kEvpAttrCount)
    attr.ev_count = r->mode == kEvModeAuto && !(r->set_mask & MRC_CTL_SET_COUNT)
                        ? lim_.auto_ev_count
                        : r->ev_count;
  if (mask & kEvpAttrMinActive) attr.ev_min_active = r->min_active;
  if (mask & kEvpAttrEventMask) attr.ev_event_mask = int(r->event_mask);
  if (mask & kEvpAttrVendorCfg) attr.vendor_cfg.fill(0);
  if (mask & kEvpAttrEvFieldsOp) {
    if (attr.ev_fields_op.op != kEvFieldsOpQueryFields)
      return Error(EINVAL, obj + ": MODIFY_FIELDS is not a query operation");
    int n = attr.ev_fields_op.field_count;
    if (n < 0 || size_t(n) > attr.ev_fields_op.fields.size())
      return Error(EINVAL,
                   obj + ": field_count " + std::to_string(n) + " does not fit the fields array");
    if (uint32_t(n) < r->field_count) {
      attr.ev_fields_op.field_count = int(r->field_count);
      return Error(E2BIG, obj + ": field_count " + std::to_string(n) + " is less than the " +
                              std::to_string(r->field_count) + " fields");
    }
    auto f = ev_fields_of(*r);
    std::copy(f.begin(), f.end(), attr.ev_fields_op.fields.begin());
    attr.ev_fields_op.field_count = int(r->field_count);
  }
  if (mask & kEvpAttrEvOp) {
    const uint32_t op = attr.ev_op.op;
    if (op != kEvOpQueryEvState && op != kEvOpQueryEvArray)
      return Error(EINVAL, obj + ": only QUERY_EV_STATE and QUERY_EV_ARRAY are query operations");
    int n = attr.ev_op.entry_count;
    if (n < 0 || size_t(n) > attr.ev_op.entries.size())
      return Error(EINVAL,
                   obj + ": entry_count " + std::to_string(n) + " does not fit the entries array");
    auto arr = ev_entries(id);
    if (op == kEvOpQueryEvArray) {
      if (uint32_t(n) < arr.size()) {
        attr.ev_op.entry_count = int(arr.size());
        return Error(E2BIG, obj + ": entry_count " + std::to_string(n) + " is less than ev_count " +
                                std::to_string(arr.size()));
      }
      for (size_t i = 0; i < arr.size(); i++) {
        attr.ev_op.entries[i].ev = entry_ev(arr[i]);
        attr.ev_op.entries[i].state = arr[i].populated ? arr[i].state : uint32_t(kEvUnknown);
      }
      attr.ev_op.entry_count = int(arr.size());
    } else {
      for (int i = 0; i < n; i++) {
        EvOpEntry& en = attr.ev_op.entries[size_t(i)];
        bool found = false;
        for (const auto& e : arr)
          if (entry_is(e, en.ev)) {
            en.state = e.populated ? e.state : uint32_t(kEvUnknown);
            found = true;
            break;
          }
        if (!found)
          return Error(ENOENT, obj + ": entry " + std::to_string(i) + " (" + ev_text(en.ev) +
                                   "): EV not found");
      }
    }
  }
  return ok_status();
}

// ---------------------------------------------------------------------------
// CC profiles

Status Controller::modify_cc_profile(uint64_t id, CcProfileAttr& attr, uint32_t mask) {
  const std::string obj = obj_name("CC profile", id);
  const uint32_t known =
      kCcAttrState | kCcAttrCurState | kCcAttrAlgorithm | kCcAttrConfig | kCcAttrVendorCfg;
  if (mask & ~known) return Error(EINVAL, obj + ": unknown attribute mask bits");
  if (mask & kCcAttrCurState) return Error(EINVAL, obj + ": cur_profile_state cannot be modified");
  if ((mask & kCcAttrVendorCfg) && !vendor_zero(attr.vendor_cfg))
    return Error(EINVAL, obj + ": vendor configuration is not supported");
  auto& ccs = s_.regions().ccs;
  int slot = cc_slot(id);
  mrc_ctl_cc rec{};
  if (slot >= 0) {
    rec = ccs[size_t(slot)];
  } else {
    if ((mask & (kCcAttrState | kCcAttrAlgorithm | kCcAttrConfig)) == 0)
      return Error(EINVAL, obj + ": does not exist");
    for (size_t i = 0; i < ccs.size() && slot < 0; i++)
      if (!ccs[i].used) slot = int(i);
    if (slot < 0)
      return Error(E2BIG,
                   obj + ": all " + std::to_string(ccs.size()) + " CC profile slots are in use");
    rec.id = id;
    rec.used = 1;
  }
  const uint32_t S = rec.cur_state;
  const uint32_t T = (mask & kCcAttrState) ? attr.profile_state : S;
  if (S == kProfileOnline && ((mask & (kCcAttrAlgorithm | kCcAttrConfig)) || T != S)) {
    uint32_t n = cc_profile_users(id);
    if (n) return Error(EBUSY, obj + ": used by " + std::to_string(n) + " active QP(s)");
    if (mask & (kCcAttrAlgorithm | kCcAttrConfig))
      return Error(EINVAL, obj +
                               ": is ONLINE: ALGORITHM and CONFIG cannot be modified "
                               "(MRC_CTL_OPT_CAP_CC_PROFILE_MODIFY_ONLINE is not supported)");
  }
  if ((mask & kCcAttrState) && !valid_transition(S, T)) return bad_transition(obj, S, T);
  if (mask & kCcAttrAlgorithm) {
    if (!attr.algorithm) {
      rec.algorithm = MRC_CTL_CC_NONE;
    } else if (*attr.algorithm == kAlgNscc) {
      rec.algorithm = MRC_CTL_CC_NSCC;
    } else {
      return Error(EINVAL, obj + ": algorithm \"" + *attr.algorithm +
                               "\" is not one of the device's (" + kAlgNscc + ")");
    }
    rec.set_mask |= MRC_CTL_SET_ALGORITHM;
  }
  if (mask & kCcAttrConfig) {
    if (!attr.cc_config) return Error(EINVAL, obj + ": cc_config is NULL");
    const NsccCfg& c = *attr.cc_config;
    const std::pair<const char*, float> floats[] = {{"eta", c.eta},
                                                    {"fi", c.fi},
                                                    {"fi_scale", c.fi_scale},
                                                    {"gamma", c.gamma},
                                                    {"max_md_jump", c.max_md_jump}};
    for (const auto& [name, v] : floats)
      if (!std::isfinite(v) || v < 0)
        return Error(EINVAL, obj + ": " + name + " must be a finite number >= 0");
    if (c.max_cwnd && c.max_cwnd < 256)
      return Error(EINVAL,
                   obj + ": max_cwnd " + std::to_string(c.max_cwnd) + " is below one packet");
    mrc_ctl_nscc& n = rec.nscc;
    n.disable_qa = c.disable_qa ? 1 : 0;
    n.adjust_bytes_threshold = c.adjust_bytes_threshold;
    n.adjust_period_threshold = c.adjust_period_threshold;
    n.base_rtt = c.base_rtt;
    n.eta = c.eta;
    n.fi = c.fi;
    n.fi_scale = c.fi_scale;
    n.gamma = c.gamma;
    n.max_md_jump = c.max_md_jump;
    n.max_cwnd = c.max_cwnd;
    n.qa_gate = c.qa_gate;
    n.qa_threshold = c.qa_threshold;
    n.target_delay = c.target_delay;
    rec.set_mask |= MRC_CTL_SET_CONFIG;
  }
  if (T != S) {
    if (S == kProfileInit && T == kProfileOffline && !(rec.set_mask & MRC_CTL_SET_ALGORITHM))
      return Error(EINVAL, obj + ": going OFFLINE needs ALGORITHM");
    if (T == kProfileOnline && rec.algorithm != MRC_CTL_CC_NONE &&
        !(rec.set_mask & MRC_CTL_SET_CONFIG))
      return Error(EINVAL, obj + ": going ONLINE needs CONFIG");
    if (T == kProfileInit) {
      uint64_t keep = rec.id;
      rec = mrc_ctl_cc{};
      rec.id = keep;
      rec.used = 1;
    }
  }
  if (mask & kCcAttrState) rec.state = T;
  rec.cur_state = T;
  rec.changes++;
  {
    mrc_ctl_cc& dst = ccs[size_t(slot)];
    RecordWrite w(dst);
    uint64_t seq = dst.seq;
    dst = rec;
    dst.seq = seq;
  }
  commit_gen();
  return ok_status();
}

Status Controller::query_cc_profile(uint64_t id, CcProfileAttr& attr, uint32_t mask) const {
  const std::string obj = obj_name("CC profile", id);
  const uint32_t known =
      kCcAttrState | kCcAttrCurState | kCcAttrAlgorithm | kCcAttrConfig | kCcAttrVendorCfg;
  if (mask & ~known) return Error(EINVAL, obj + ": unknown attribute mask bits");
  const mrc_ctl_cc* r = cc_record(id);
  if (!r) return Error(EINVAL, obj + ": does not exist");
  if (mask & kCcAttrState) attr.profile_state = r->state;
  if (mask & kCcAttrCurState) attr.cur_profile_state = r->cur_state;
  if (mask & kCcAttrAlgorithm) {
    if (r->algorithm == MRC_CTL_CC_NSCC)
      attr.algorithm = kAlgNscc;
    else
      attr.algorithm.reset();
  }
  if (mask & kCcAttrConfig) {
    if (!(r->set_mask & MRC_CTL_SET_CONFIG)) {
      attr.cc_config.reset();
    } else {
      NsccCfg c;
      const mrc_ctl_nscc& n = r->nscc;
      c.disable_qa = n.disable_qa != 0;
      c.adjust_bytes_threshold = n.adjust_bytes_threshold;
      c.adjust_period_threshold = n.adjust_period_threshold;
      c.base_rtt = n.base_rtt;
      c.eta = n.eta;
      c.fi = n.fi;
      c.fi_scale = n.fi_scale;
      c.gamma = n.gamma;
      c.max_md_jump = n.max_md_jump;
      c.max_cwnd = n.max_cwnd;
      c.qa_gate = n.qa_gate;
      c.qa_threshold = n.qa_threshold;
      c.target_delay = n.target_delay;
      attr.cc_config = c;
    }
  }
  if (mask & kCcAttrVendorCfg) attr.vendor_cfg.fill(0);
  return ok_status();
}

// ---------------------------------------------------------------------------
// Removing INIT records

namespace {

// Clears the record at `slot` of `table` if it is INIT (after `busy`, a check
// of records that still name it, allows it); one body for every profile kind.
template <class Table, class Busy>
Status erase_record(Table& table, int slot, const std::string& obj, Busy busy) {
  if (slot < 0) return Error(EINVAL, obj + ": does not exist");
  auto& r = table[size_t(slot)];
  if (r.cur_state != kProfileInit)
    return Error(EINVAL,
                 obj + ": is " + to_string(ProfileState(r.cur_state)) + " (take it to INIT first)");
  MRC_TRY(busy());
  {
    RecordWrite w(r);
    uint64_t seq = r.seq;
    r = std::remove_reference_t<decltype(r)>{};
    r.seq = seq;
  }
  return ok_status();
}

}  // namespace

Status Controller::erase_profile(ProfileKind kind, uint64_t id) {
  Regions& R = s_.regions();
  auto none = [] { return ok_status(); };
  Status s = ok_status();
  switch (kind) {
    case ProfileKind::kEvFmt: {
      const std::string obj = obj_name("EV format profile", id);
      s = erase_record(R.fmts, fmt_slot(id), obj, [&]() -> Status {
        for (const auto& p : R.evps)
          if (p.used && (p.set_mask & MRC_CTL_SET_FMT_ID) && p.fmt_id == id &&
              p.cur_state != kProfileInit)
            return Error(EBUSY, obj + ": EV profile " + pid_str(p.id) + " uses it");
        return ok_status();
      });
      break;
    }
    case ProfileKind::kEv:
      s = erase_record(R.evps, evp_slot(id), obj_name("EV profile", id), none);
      break;
    case ProfileKind::kCc:
      s = erase_record(R.ccs, cc_slot(id), obj_name("CC profile", id), none);
      break;
  }
  if (s) commit_gen();
  return s;
}

// ---------------------------------------------------------------------------
// Events

Result<std::shared_ptr<EvEventCq>> Controller::create_ev_event_cq(int cqe) {
  if (cqe < 1 || uint32_t(cqe) > lim_.max_cq_entries)
    return Error(EINVAL, "EV event CQ: cqe " + std::to_string(cqe) + " is not in 1.." +
                             std::to_string(lim_.max_cq_entries));
  auto cq = std::make_shared<EvEventCq>(uint32_t(cqe));
  cqs_.erase(std::remove_if(cqs_.begin(), cqs_.end(), [](const auto& w) { return w.expired(); }),
             cqs_.end());
  cqs_.push_back(cq);
  return cq;
}

void Controller::emit(EvEvent e) {
  ctr_.events++;
  if (hooks_.event) hooks_.event(e);
  for (auto it = cqs_.begin(); it != cqs_.end();) {
    if (auto cq = it->lock()) {
      cq->push(e);
      ++it;
    } else {
      it = cqs_.erase(it);
    }
  }
}

void Controller::data_path_state(uint64_t profile, uint32_t wire, uint8_t port, uint32_t state,
                                 const char* reason, uint32_t pid, uint32_t qpn, uint64_t time_ns) {
  int slot = evp_slot(profile);
  if (slot < 0) {
    ctr_.unknown_profile++;
    return;
  }
  mrc_ctl_evp& p = s_.regions().evps[size_t(slot)];
  EvEvent ev;
  ev.profile_id = profile;
  ev.state = state;
  ev.reason = reason;
  ev.pid = pid;
  ev.qpn = qpn;
  ev.time_ns = time_ns;
  bool have_entry = false, denied = false;
  auto arr = ev_entries(profile);
  for (const auto& e : arr)
    if (e.populated && e.wire == wire && e.port == port) {
      if (!have_entry) ev.ev = entry_ev(e);
      have_entry = true;
      denied |= e.state == kEvDenied;
    }
  if (denied) return;  // a DENIED EV has no data-path state
  if (have_entry) {
    RecordWrite w(p);
    auto& evs = s_.regions().evs;
    for (uint32_t k = 0; k < p.ev_count; k++) {
      mrc_ctl_ev_entry& e = evs[p.base + k];
      if (e.populated && e.wire == wire && e.port == port) e.state = state;
    }
  } else {
    // AUTO profiles (or an EV the engine made up): the wire value is the EV.
    ev.ev.val = codec::ev_from_u32(wire, codec_mode(p.fmt_mode ? p.fmt_mode : kFmtStev));
    ev.ev.port = port;
  }
  if (hooks_.transition) hooks_.transition(ev);
  if (state & p.event_mask) emit(ev);
}

Result<size_t> Controller::ingest_reports(std::vector<mrc_ctl_ev_report>* seen) {
  std::array<mrc_ctl_ev_report, 256> buf;
  size_t total = 0;
  for (;;) {
    auto n = s_.pop_reports(buf);
    if (!n) return std::move(n).error();
    for (size_t i = 0; i < *n; i++) {
      const mrc_ctl_ev_report& r = buf[i];
      ctr_.reports++;
      if (r.reason < ctr_.reports_by_reason.size()) ctr_.reports_by_reason[r.reason]++;
      uint64_t drops = r.engine_drops;
      if (r.dropped_seen > dropped_seen_) {
        drops += r.dropped_seen - dropped_seen_;
        dropped_seen_ = r.dropped_seen;
      }
      if (drops) {
        ctr_.upstream_drops += drops;
        for (auto& w : cqs_)
          if (auto cq = w.lock()) cq->add_drops(drops);
      }
      if (seen) seen->push_back(r);
      const uint32_t api = api_state_of_engine(r.to);
      if (api != kEvGood && api != kEvAssumedBad) continue;
      HoldKey k{r.profile_id, r.wire, r.port};
      Holder h{r.pid, r.dev, r.qpn};
      const char* why = core::to_string(core::EvEventReason(r.reason));
      if (api == kEvAssumedBad) {
        auto& set = holds_[k];
        if (set.insert(h).second && set.size() == 1)
          data_path_state(r.profile_id, r.wire, r.port, kEvAssumedBad, why, r.pid, r.qpn,
                          r.time_ns);
      } else {
        auto it = holds_.find(k);
        if (it != holds_.end() && it->second.erase(h) && it->second.empty()) {
          holds_.erase(it);
          data_path_state(r.profile_id, r.wire, r.port, kEvGood, why, r.pid, r.qpn, r.time_ns);
        }
      }
    }
    total += *n;
    if (*n < buf.size()) break;
  }
  // Reports lost after the last one we got are attributed when seen; a
  // queue that emptied with drops pending still reaches the CQs now.
  uint64_t d = __atomic_load_n(&s_.dev().evq_dropped, __ATOMIC_ACQUIRE);
  if (d > dropped_seen_) {
    uint64_t extra = d - dropped_seen_;
    dropped_seen_ = d;
    ctr_.upstream_drops += extra;
    for (auto& w : cqs_)
      if (auto cq = w.lock()) cq->add_drops(extra);
  }
  return total;
}

size_t Controller::reap_dead() {
  size_t n = 0;
  std::set<uint32_t> dead;
  if (auto qps = s_.list_qps()) {
    for (const auto& [k, v] : *qps)
      if (pid_alive_ && !pid_alive_(k.pid)) {
        dead.insert(k.pid);
        if (s_.del_qp(k)) n++;
      }
  }
  if (auto ev = s_.list_evstats()) {
    for (const auto& [k, v] : *ev)
      if (pid_alive_ && !pid_alive_(k.pid)) {
        dead.insert(k.pid);
        (void)s_.del_evstat(k);
      }
  }
  for (auto it = holds_.begin(); it != holds_.end();) {
    auto& set = it->second;
    for (auto h = set.begin(); h != set.end();) {
      if (dead.count(h->pid) || (pid_alive_ && !pid_alive_(h->pid)))
        h = set.erase(h);
      else
        ++h;
    }
    if (set.empty()) {
      HoldKey k = it->first;
      it = holds_.erase(it);
      data_path_state(k.profile, k.wire, k.port, kEvGood, "holder exited", 0, 0, mono_ns());
    } else {
      ++it;
    }
  }
  return n;
}

}  // namespace mrc::ctl
