#include "ctl/store.hpp"

#include <cerrno>

namespace mrc::ctl {

bool Store::initialised() const { return r_.dev && load_acquire32(r_.dev->magic) == MRC_CTL_MAGIC; }

void Store::initialise() {
  mrc_ctl_dev& d = *r_.dev;
  if (d.magic == MRC_CTL_MAGIC) return;
  d.version = MRC_CTL_LAYOUT_VERSION;
  for (size_t p = 0; p < r_.ports.size(); p++) {
    RecordWrite w(r_.ports[p]);
    r_.ports[p].port = uint32_t(p);
    r_.ports[p].admin_state = MRC_CTL_PORT_ENABLED;
  }
  __atomic_store_n(&d.magic, MRC_CTL_MAGIC, __ATOMIC_RELEASE);
  bump_gen(d);
}

Status Store::record_push(mrc_ctl_ev_report r) {
  r.dropped_seen = __atomic_load_n(&dev().evq_dropped, __ATOMIC_ACQUIRE);
  Status s = push_report(r);
  if (s) {
    __atomic_add_fetch(&dev().evq_pushed, 1, __ATOMIC_RELAXED);
    return s;
  }
  if (s.error().code == E2BIG) __atomic_add_fetch(&dev().evq_dropped, 1, __ATOMIC_RELEASE);
  return s;
}

MemStore::MemStore()
    : ports_(MRC_CTL_MAX_PORTS),
      fmts_(MRC_CTL_MAX_FMT_PROFILES),
      evps_(MRC_CTL_MAX_EV_PROFILES),
      evs_(MRC_CTL_EV_POOL),
      ccs_(MRC_CTL_MAX_CC_PROFILES) {
  r_.dev = &dev_;
  r_.ports = ports_;
  r_.fmts = fmts_;
  r_.evps = evps_;
  r_.evs = evs_;
  r_.ccs = ccs_;
}

Status MemStore::push_report(const mrc_ctl_ev_report& r) {
  if (evq_.size() >= evq_cap_) return Error(E2BIG, "EV report queue is full");
  evq_.push_back(r);
  return ok_status();
}

Result<size_t> MemStore::pop_reports(std::span<mrc_ctl_ev_report> out) {
  size_t n = 0;
  while (n < out.size() && !evq_.empty()) {
    out[n++] = evq_.front();
    evq_.pop_front();
  }
  return n;
}

Status MemStore::put_qp(const mrc_ctl_qp_key& k, const mrc_ctl_qp_report& v) {
  if (!qps_.count(k) && qps_.size() >= MRC_CTL_MAX_QPS)
    return Error(E2BIG, "QP report table is full");
  qps_[k] = v;
  return ok_status();
}

Status MemStore::del_qp(const mrc_ctl_qp_key& k) {
  if (!qps_.erase(k)) return Error(ENOENT, "no such QP report");
  return ok_status();
}

Result<QpList> MemStore::list_qps() const { return QpList(qps_.begin(), qps_.end()); }

Status MemStore::put_evstat(const mrc_ctl_evstat_key& k, const mrc_ctl_evstat& v) {
  if (!evstats_.count(k) && evstats_.size() >= MRC_CTL_MAX_EVSTATS)
    return Error(E2BIG, "EV counter table is full");
  evstats_[k] = v;
  return ok_status();
}

Status MemStore::del_evstat(const mrc_ctl_evstat_key& k) {
  if (!evstats_.erase(k)) return Error(ENOENT, "no such EV counter record");
  return ok_status();
}

Result<EvStatList> MemStore::list_evstats() const {
  return EvStatList(evstats_.begin(), evstats_.end());
}

}  // namespace mrc::ctl
