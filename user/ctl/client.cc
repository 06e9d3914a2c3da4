#include "ctl/client.hpp"

#include <sys/prctl.h>
#include <unistd.h>

#include <cstring>

#include "ctl/controller.hpp"
#include "ctl/pinned_store.hpp"
#include "ctl/srv6.hpp"

namespace mrc::ctl {

namespace {

core::EvMode core_mode(uint32_t m) {
  switch (m) {
    case kEvModeExp:
      return core::EvMode::kExplicit;
    case kEvModeGen:
      return core::EvMode::kGenerated;
    default:
      return core::EvMode::kAuto;
  }
}

uint8_t engine_state(core::EvState s) {
  switch (s) {
    case core::EvState::kGood:
      return MRC_CTL_ENGINE_GOOD;
    case core::EvState::kSkip:
      return MRC_CTL_ENGINE_SKIP;
    case core::EvState::kAssumedBad:
      return MRC_CTL_ENGINE_ASSUMED_BAD;
    case core::EvState::kDenied:
      return MRC_CTL_ENGINE_DENIED;
  }
  return MRC_CTL_ENGINE_GOOD;
}

}  // namespace

Client::Client(Store& s) : s_(&s), pid_(uint32_t(::getpid())) {
  prctl(PR_GET_NAME, comm_, 0, 0, 0);
}

Client::Client(std::unique_ptr<Store> owned)
    : owned_(std::move(owned)), s_(owned_.get()), pid_(uint32_t(::getpid())) {
  prctl(PR_GET_NAME, comm_, 0, 0, 0);
}

Client::~Client() = default;

Result<std::unique_ptr<Client>> Client::open(const std::string& pin_dir) {
  auto st = PinnedStore::open(pin_dir, Access::kReadMostly);
  if (!st) return std::move(st).error();
  return std::unique_ptr<Client>(new Client(std::unique_ptr<Store>(std::move(*st))));
}

bool Client::daemon_running() const {
  uint32_t pid = load_acquire32(s_->dev().mrcd_pid);
  return pid != 0 && pid_alive(pid);
}

uint16_t Client::udp_port() const {
  uint32_t p = load_acquire32(s_->dev().udp_port);
  return p ? uint16_t(p) : uint16_t(MRC_UDP_PORT_DEFAULT);
}

bool Client::port_usable(uint8_t port) const {
  if (port == 0 || port >= MRC_CTL_MAX_PORTS) return false;
  const uint32_t bit = 1u << port;
  return (port_mask() & bit) && !(port_down_mask() & bit);
}

std::vector<PortView> Client::ports() const {
  std::vector<PortView> v;
  for (const mrc_ctl_port& src : s_->regions().ports) {
    mrc_ctl_port p;
    if (!read_record(src, &p) || !p.configured) continue;
    PortView pv;
    pv.port = uint8_t(p.port);
    pv.ifname.assign(p.ifname, strnlen(p.ifname, sizeof(p.ifname)));
    pv.ifindex = p.ifindex;
    pv.admin_up = p.admin_state == MRC_CTL_PORT_ENABLED;
    pv.link_up = p.link_up != 0;
    pv.queues = p.queues;
    v.push_back(pv);
  }
  return v;
}

namespace {
// A profile record's slot in `recs` (-1: none): the cached slot while it
// still holds that id, else a scan that caches what it finds.
template <class Rec>
int find_slot(std::span<Rec> recs, std::map<uint64_t, int>& cache, uint64_t id) {
  auto it = cache.find(id);
  if (it != cache.end()) {
    const Rec& r = recs[size_t(it->second)];
    if (__atomic_load_n(&r.used, __ATOMIC_ACQUIRE) &&
        __atomic_load_n(&r.id, __ATOMIC_ACQUIRE) == id)
      return it->second;
  }
  for (size_t i = 0; i < recs.size(); i++) {
    Rec h;
    if (read_record(recs[i], &h) && h.used && h.id == id) {
      cache[id] = int(i);
      return int(i);
    }
  }
  return -1;
}
}  // namespace

int Client::find_evp(uint64_t id) const { return find_slot(s_->regions().evps, evp_slot_, id); }

int Client::find_cc(uint64_t id) const { return find_slot(s_->regions().ccs, cc_slot_, id); }

uint64_t Client::ev_profile_changes(uint64_t id) const {
  int s = find_evp(id);
  return s < 0 ? 0 : __atomic_load_n(&s_->regions().evps[size_t(s)].changes, __ATOMIC_ACQUIRE);
}

uint64_t Client::cc_profile_changes(uint64_t id) const {
  int s = find_cc(id);
  return s < 0 ? 0 : __atomic_load_n(&s_->regions().ccs[size_t(s)].changes, __ATOMIC_ACQUIRE);
}

Result<ResolvedEvProfile> Client::ev_profile(uint64_t id) const {
  const std::string obj = "EV profile " + std::to_string(id);
  int slot = find_evp(id);
  if (slot < 0) return Error(EINVAL, obj + " does not exist");
  const mrc_ctl_evp& src = s_->regions().evps[size_t(slot)];
  mrc_ctl_evp h;
  std::vector<mrc_ctl_ev_entry> entries;
  const auto& pool = s_->regions().evs;
  bool ok = read_record(src, &h, [&] {
    entries.clear();
    uint32_t n = src.ev_count, base = src.base;
    if (src.mode != kEvModeAuto && src.cur_state != kProfileInit && size_t(base) + n <= pool.size())
      entries.assign(pool.begin() + base, pool.begin() + base + n);
  });
  if (!ok) return Error(EAGAIN, obj + " is being rewritten (retry)");
  if (!h.used || h.id != id) return Error(EINVAL, obj + " does not exist");
  if (h.cur_state != kProfileOnline)
    return Error(EINVAL, obj + " is " + to_string(ProfileState(h.cur_state)) + ", not ONLINE");
  ResolvedEvProfile r;
  r.changes = h.changes;
  r.fmt_id = h.fmt_id;
  r.ev_count = h.ev_count;
  core::EvProfile& p = r.profile;
  p.mode = core_mode(h.mode);
  p.fmt = codec_fmt_mode(h.fmt_mode);
  // SRv6: each entry's uSID container, expanded with the format's widths.
  mrc_ctl_fmt fmt{};
  if (h.fmt_mode == kFmtSrv6) {
    bool found = false;
    for (const mrc_ctl_fmt& f : s_->regions().fmts)
      if (read_record(f, &fmt) && fmt.used && fmt.id == h.fmt_id) {
        found = true;
        break;
      }
    if (!found)
      return Error(EAGAIN,
                   obj + ": its SRv6 format " + std::to_string(h.fmt_id) + " is gone (retry)");
  }
  p.ev_min_active = h.min_active;
  p.event_mask = core::kEvGood | core::kEvAssumedBad;
  if (h.mode != kEvModeAuto) {
    p.evs.reserve(entries.size());
    for (const auto& e : entries) {
      if (!e.populated) return Error(EAGAIN, obj + " has an UNPOPULATED EV while ONLINE (retry)");
      p.evs.push_back(core::EvEntry{e.wire, e.port, e.state == kEvDenied});
      if (h.fmt_mode == kFmtSrv6 && !srv6_sid_of(fmt, h, e, p.evs.back().sid))
        return Error(EINVAL, obj + ": an SRv6 EV does not expand to a uSID container");
    }
  }
  return r;
}

Result<core::CcProfile> Client::cc_profile(uint64_t id) const {
  const std::string obj = "CC profile " + std::to_string(id);
  int slot = find_cc(id);
  if (slot < 0) return Error(EINVAL, obj + " does not exist");
  mrc_ctl_cc h;
  if (!read_record(s_->regions().ccs[size_t(slot)], &h))
    return Error(EAGAIN, obj + " is being rewritten (retry)");
  if (!h.used || h.id != id) return Error(EINVAL, obj + " does not exist");
  if (h.cur_state != kProfileOnline)
    return Error(EINVAL, obj + " is " + to_string(ProfileState(h.cur_state)) + ", not ONLINE");
  core::CcProfile p;
  p.enabled = h.algorithm == MRC_CTL_CC_NSCC;
  const mrc_ctl_nscc& n = h.nscc;
  p.nscc.disable_qa = n.disable_qa != 0;
  p.nscc.adjust_bytes_threshold = n.adjust_bytes_threshold;
  p.nscc.adjust_period_threshold = n.adjust_period_threshold;
  p.nscc.base_rtt = n.base_rtt;
  p.nscc.eta = n.eta;
  p.nscc.fi = n.fi;
  p.nscc.fi_scale = n.fi_scale;
  p.nscc.gamma = n.gamma;
  p.nscc.max_md_jump = n.max_md_jump;
  p.nscc.max_cwnd = n.max_cwnd;
  p.nscc.qa_gate = n.qa_gate;
  p.nscc.qa_threshold = n.qa_threshold;
  p.nscc.target_delay = n.target_delay;
  return p;
}

Status Client::push_ev_event(const core::EvEvent& ev, uint32_t dev) {
  if (ev.drop_count) __atomic_add_fetch(&s_->dev().evq_dropped, ev.drop_count, __ATOMIC_RELEASE);
  mrc_ctl_ev_report r{};
  r.profile_id = ev.profile_id;
  r.time_ns = ev.time;
  r.pid = pid_;
  r.dev = dev;
  r.qpn = ev.qpn;
  r.wire = ev.ev;
  r.port = ev.port;
  r.from = engine_state(ev.from);
  r.to = engine_state(ev.to);
  r.reason = uint8_t(ev.reason);
  return s_->record_push(r);
}

Status Client::publish_qp(uint32_t dev, uint32_t qpn, const mrc_ctl_qp_report& rep) {
  mrc_ctl_qp_key k{pid_, dev, qpn, 0};
  mrc_ctl_qp_report r = rep;
  std::memcpy(r.comm, comm_, sizeof(r.comm));
  return s_->put_qp(k, r);
}

Status Client::remove_qp(uint32_t dev, uint32_t qpn) {
  mrc_ctl_qp_key k{pid_, dev, qpn, 0};
  return s_->del_qp(k);
}

Status Client::publish_ev_stat(const mrc_ctl_evstat_key& k, const mrc_ctl_evstat& v) {
  mrc_ctl_evstat_key key = k;
  key.pid = pid_;
  return s_->put_evstat(key, v);
}

Status Client::remove_ev_stat(const mrc_ctl_evstat_key& k) {
  mrc_ctl_evstat_key key = k;
  key.pid = pid_;
  return s_->del_evstat(key);
}

// ---------------------------------------------------------------------------
// EngineSync

EngineSync::EngineSync(Client& c, core::Engine& e, Options o) : c_(c), e_(e), o_(o) {}

EngineSync::~EngineSync() = default;

Status EngineSync::use_ev_profile(uint64_t id) {
  auto r = c_.ev_profile(id);
  if (!r) return std::move(r).error();
  auto it = ev_.find(id);
  if (it != ev_.end() && it->second.changes == r->changes) return ok_status();
  if (e_.ev_profile_in_use(id)) {
    // Installed and in use: keep the installed copy (EV states still follow).
    return ok_status();
  }
  Installed inst;
  inst.changes = r->changes;
  for (const core::EvEntry& e : r->profile.evs) inst.denied[{e.ev, e.port}] = e.denied;
  MRC_TRY(e_.install_ev_profile(id, std::move(r->profile)));
  ev_[id] = std::move(inst);
  ctr_.reinstalls++;
  return ok_status();
}

Status EngineSync::use_cc_profile(uint64_t id) {
  auto p = c_.cc_profile(id);
  if (!p) return std::move(p).error();
  uint64_t ch = c_.cc_profile_changes(id);
  auto it = cc_.find(id);
  if (it != cc_.end() && it->second == ch) return ok_status();
  if (e_.cc_profile_in_use(id)) return ok_status();
  MRC_TRY(e_.install_cc_profile(id, *p));
  cc_[id] = ch;
  ctr_.reinstalls++;
  return ok_status();
}

void EngineSync::sync(core::Time now) {
  ctr_.syncs++;
  // Ports: admin-disabled or link-down ports are down for the engine.
  const uint32_t down = c_.port_down_mask();
  for (const core::PortConfig& pc : e_.config().ports) {
    const bool want_up = !(down >> pc.port & 1);
    if (e_.port_up(pc.port) != want_up) {
      e_.set_port_state(pc.port, want_up, now);
      ctr_.port_changes++;
    }
  }
  down_ = down;
  // Profiles: reinstall when unused, else follow the DENIED flags.
  for (auto& [id, inst] : ev_) {
    if (c_.ev_profile_changes(id) == inst.changes) continue;
    auto r = c_.ev_profile(id);
    if (!r) continue;  // went OFFLINE: QPs keep the installed copy
    if (!e_.ev_profile_in_use(id)) {
      Installed fresh;
      fresh.changes = r->changes;
      for (const core::EvEntry& e : r->profile.evs) fresh.denied[{e.ev, e.port}] = e.denied;
      if (e_.install_ev_profile(id, r->profile)) {
        inst = std::move(fresh);
        ctr_.reinstalls++;
      }
      continue;
    }
    std::map<std::pair<uint32_t, uint8_t>, bool> want;
    for (const core::EvEntry& e : r->profile.evs)
      want[{e.ev, e.port}] = want[{e.ev, e.port}] || e.denied;
    for (const auto& [k, d] : want) {
      auto cur = inst.denied.find(k);
      if (cur != inst.denied.end() && cur->second == d) continue;
      if (e_.set_ev_denied(id, k.first, k.second, d)) ctr_.denied_changes++;
      inst.denied[k] = d;
    }
    inst.changes = r->changes;
  }
  for (auto& [id, ch] : cc_) {
    uint64_t now_ch = c_.cc_profile_changes(id);
    if (now_ch == ch || e_.cc_profile_in_use(id)) continue;
    auto p = c_.cc_profile(id);
    if (p && e_.install_cc_profile(id, *p)) {
      ch = now_ch;
      ctr_.reinstalls++;
    }
  }
}

void EngineSync::poll(core::Time now) {
  const uint64_t g = c_.generation();
  if (g != gen_) {
    // The first sync (construction) is followed by the first periodic
    // publication anyway.
    change_pending_ = gen_ != ~uint64_t(0);
    gen_ = g;
    sync(now);
  }
  bool due = now >= next_publish_;
  if (change_pending_ &&
      (!last_change_publish_ || now - last_change_publish_ >= o_.change_publish_gap)) {
    // mrcd (and whoever watches its `ev show` / `qp show`) sees the counters
    // as they stood when the change took effect, not a stats_interval later.
    due = true;
    last_change_publish_ = now ? now : 1;
  }
  if (due) {
    change_pending_ = false;
    if (!publish(now)) ctr_.publish_errors++;
    ctr_.publications++;
    next_publish_ = now + o_.stats_interval;
  }
}

void EngineSync::forward(std::span<const core::EvEvent> evs) {
  for (const core::EvEvent& ev : evs) {
    Status s = c_.push_ev_event(ev, o_.dev);
    if (s)
      ctr_.events_pushed++;
    else
      ctr_.events_dropped++;
  }
}

Status EngineSync::publish(core::Time now) {
  Status first = ok_status();
  std::set<uint32_t> qps;
  std::map<std::tuple<uint64_t, uint32_t, uint8_t>, mrc_ctl_evstat> evs;
  for (uint32_t qpn : e_.qp_list()) {
    auto attr = e_.query_qp(qpn);
    auto st = e_.qp_stats(qpn);
    if (!attr || !st) continue;
    mrc_ctl_qp_report r{};
    r.ev_profile_id = attr->ev_profile_id;
    r.cc_profile_id = attr->cc_profile_id;
    r.update_ns = now;
    r.state = uint32_t(attr->qp_state);
    r.remote_qpn = attr->dest_qp_num;
    r.tx_pkts = st->tx_data_pkts;
    r.tx_bytes = st->tx_data_bytes;
    r.rtx_pkts = st->tx_rtx_pkts;
    r.rx_pkts = st->rx_data_pkts;
    r.rx_bytes = st->rx_data_bytes;
    r.rx_sacks = st->rx_sacks;
    r.rx_nacks = st->rx_nacks;
    r.timeouts = st->timeouts;
    r.cwnd_bytes = st->cwnd_bytes;
    r.inflight_bytes = st->inflight_bytes;
    r.srtt_ns = st->srtt_ns;
    if (auto paths = e_.qp_evs(qpn)) {
      for (const auto& ev : *paths) {
        switch (ev.state) {
          case core::EvState::kGood:
            r.ev_good++;
            break;
          case core::EvState::kSkip:
            r.ev_skip++;
            break;
          case core::EvState::kAssumedBad:
            r.ev_assumed_bad++;
            break;
          case core::EvState::kDenied:
            r.ev_denied++;
            break;
        }
        auto& s = evs[{attr->ev_profile_id, ev.ev, ev.port}];
        s.update_ns = now;
        s.tx_pkts += ev.stats.tx_pkts;
        s.acked += ev.stats.acked;
        s.lost += ev.stats.lost;
        s.ecn += ev.stats.ecn;
        s.trims += ev.stats.trims;
        s.probes_ok += ev.stats.probes_ok;
        s.probes_failed += ev.stats.probes_failed;
        s.rtt_sum_ns += ev.stats.rtt_sum_ns;
        s.rtt_samples += ev.stats.rtt_samples;
        if (ev.stats.rtt_min_ns && (!s.rtt_min_ns || ev.stats.rtt_min_ns < s.rtt_min_ns))
          s.rtt_min_ns = ev.stats.rtt_min_ns;
        if (ev.stats.rtt_last_ns) s.rtt_last_ns = ev.stats.rtt_last_ns;
        s.qps++;
        if (ev.state == core::EvState::kAssumedBad) s.qps_bad++;
      }
    }
    Status s = c_.publish_qp(o_.dev, qpn, r);
    if (!s && first.ok()) first = s;
    qps.insert(qpn);
  }
  for (uint32_t gone : published_qps_)
    if (!qps.count(gone)) (void)c_.remove_qp(o_.dev, gone);
  published_qps_ = std::move(qps);
  std::set<std::tuple<uint64_t, uint32_t, uint8_t>> keys;
  for (const auto& [k, v] : evs) {
    mrc_ctl_evstat_key key{};
    key.profile_id = std::get<0>(k);
    key.dev = o_.dev;
    key.wire = std::get<1>(k);
    key.port = std::get<2>(k);
    Status s = c_.publish_ev_stat(key, v);
    if (!s && first.ok()) first = s;
    keys.insert(k);
  }
  for (const auto& k : published_evs_) {
    if (keys.count(k)) continue;
    mrc_ctl_evstat_key key{};
    key.profile_id = std::get<0>(k);
    key.dev = o_.dev;
    key.wire = std::get<1>(k);
    key.port = std::get<2>(k);
    (void)c_.remove_ev_stat(key);
  }
  published_evs_ = std::move(keys);
  return first;
}

void EngineSync::withdraw() {
  for (uint32_t q : published_qps_) (void)c_.remove_qp(o_.dev, q);
  published_qps_.clear();
  for (const auto& k : published_evs_) {
    mrc_ctl_evstat_key key{};
    key.profile_id = std::get<0>(k);
    key.dev = o_.dev;
    key.wire = std::get<1>(k);
    key.port = std::get<2>(k);
    (void)c_.remove_ev_stat(key);
  }
  published_evs_.clear();
}

}  // namespace mrc::ctl
