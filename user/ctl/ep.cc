#include "ctl/ep.hpp"

#include <algorithm>
#include <set>

#include "ctl/srv6.hpp"

namespace mrc::ctl {

EpBatcher::EpBatcher(EpTransport& t, EpLimits lim, PortCheck check)
    : t_(t), lim_(lim), check_(std::move(check)) {}

void EpBatcher::expire(Time now) {
  for (auto it = out_.begin(); it != out_.end();) {
    if (it->second.batch == 0 && it->second.drain_until <= now)
      it = out_.erase(it);
    else
      ++it;
  }
}

Result<uint64_t> EpBatcher::start(uint8_t req_tc, uint32_t op_type, std::span<const EpReq> reqs,
                                  uint32_t rsp_timeout_ns, Time now) {
  expire(now);
  if (op_type != kEpOpEvProbe && op_type != kEpOpPortStatusUpdate)
    return Error(EINVAL, "endpoint operation type " + std::to_string(op_type) + " is unknown");
  if (reqs.empty()) return Error(EINVAL, "no endpoint requests (num_req must be at least 1)");
  if (reqs.size() > lim_.max_batch)
    return Error(EINVAL, "num_req " + std::to_string(reqs.size()) + " exceeds the batch limit " +
                             std::to_string(lim_.max_batch));
  if (rsp_timeout_ns == 0) return Error(EINVAL, "rsp_timeout must be greater than 0 ns");
  if (req_tc > 63)
    return Error(EINVAL, "req_tc " + std::to_string(req_tc) + " is not a DSCP (0..63)");
  std::set<uint16_t> seen;
  std::vector<EpWire> wires;
  for (size_t i = 0; i < reqs.size(); i++) {
    const EpReq& r = reqs[i];
    const std::string what =
        "request " + std::to_string(i) + " (req_id " + std::to_string(r.req_id) + ")";
    if (!seen.insert(r.req_id).second)
      return Error(EINVAL, what + ": req_id repeated in the batch");
    if (auto it = out_.find(r.req_id); it != out_.end())
      return Error(EINVAL, what + ": req_id is outstanding (wait until its responses drained)");
    if (r.ev_fmt_mode != kFmtStev && r.ev_fmt_mode != kFmtUdp && r.ev_fmt_mode != kFmtSrv6)
      return Error(EINVAL, what + ": ev_fmt_mode " + std::to_string(r.ev_fmt_mode) +
                               " is not a format mode");
    if (gid_is_zero(r.dgid)) return Error(EINVAL, what + ": dgid is zero");
    if (Status s = check_(r.req_ev.port); !s)
      return Error(s.error().code, what + ": " + s.error().context);
    EpWire w;
    w.req_id = r.req_id;
    w.op = op_type == kEpOpEvProbe ? MRC_EP_OP_EV_PROBE : MRC_EP_OP_PORT_STATUS_UPDATE;
    w.port = r.req_ev.port;
    w.dscp = req_tc;
    if (r.ev_fmt_mode == kFmtSrv6) {
      w.dst = ip_from_gid(r.dgid);
      MRC_TRY(srv6_ep_request(r.req_ev.val, w, what));
      w.fmt_mode = r.ev_fmt_mode;
      if (!gid_is_zero(r.sgid)) {
        w.src = ip_from_gid(r.sgid);
        w.src_set = true;
      }
      w.port_status = r.port_status;
      wires.push_back(w);
      continue;
    }
    const auto mode = r.ev_fmt_mode == kFmtUdp ? codec::EvFmtMode::kUdp : codec::EvFmtMode::kStev;
    // Bits beyond the carriage's width cannot be put on the wire.
    const size_t width = mode == codec::EvFmtMode::kUdp ? 2 : 4;
    for (size_t b = width; b < r.req_ev.val.size(); b++)
      if (r.req_ev.val[b])
        return Error(EINVAL, what + ": req_ev has bits beyond the " + std::to_string(width * 8) +
                                 "-bit " + fmt_mode_name(r.ev_fmt_mode) + " carriage");
    w.entropy = codec::ev_to_u32(r.req_ev.val, mode);
    w.fmt_mode = r.ev_fmt_mode;
    w.dst = ip_from_gid(r.dgid);
    if (!gid_is_zero(r.sgid)) {
      w.src = ip_from_gid(r.sgid);
      w.src_set = true;
      if (w.src.ver != w.dst.ver)
        return Error(EINVAL, what + ": sgid and dgid are of different IP versions");
    }
    w.port_status = r.port_status;
    wires.push_back(w);
  }
  if (Time(rsp_timeout_ns) > lim_.max_timeout_ns)
    return Error(EINVAL, "rsp_timeout exceeds " + std::to_string(lim_.max_timeout_ns) + " ns");

  Batch b;
  b.id = next_id_++;
  b.deadline = now + rsp_timeout_ns;
  b.num_req = uint32_t(reqs.size());
  for (const EpWire& w : wires) {
    Status s = t_.send(w);
    if (!s) {
      // Requests already sent stay reserved until they drain.
      for (uint16_t id : b.ids) out_[id].batch = 0, out_[id].drain_until = now + lim_.drain_ns;
      t_.cancel(b.ids);
      return Error(s.error().code,
                   "sending req_id " + std::to_string(w.req_id) + ": " + s.error().context);
    }
    ctr_.requests++;
    b.ids.push_back(w.req_id);
    out_[w.req_id] = Outstanding{b.id, w.dst, 0};
  }
  uint64_t id = b.id;
  batches_.emplace(id, std::move(b));
  return id;
}

void EpBatcher::on_response(const EpArrival& a, Time now) {
  auto it = out_.find(a.req_id);
  if (it == out_.end() || !(it->second.dst == a.from)) {
    ctr_.unmatched++;
    return;
  }
  if (it->second.batch == 0) {
    ctr_.late++;
    out_.erase(it);
    return;
  }
  auto bt = batches_.find(it->second.batch);
  out_.erase(it);
  if (bt == batches_.end()) return;
  ctr_.responses++;
  EpRsp r;
  r.req_id = a.req_id;
  r.port = a.port;
  r.rtt = a.rtt_ns;
  r.adj_svc_time = a.adj_svc_time ? 1 : 0;
  bt->second.rsps.push_back(r);
  bt->second.detail.push_back(a);
  (void)now;
}

EpBatchDone EpBatcher::finish(Batch& b, int err, Time now) {
  EpBatchDone d;
  d.id = b.id;
  d.rsps = std::move(b.rsps);
  d.detail = std::move(b.detail);
  d.err = err;
  d.num_req = b.num_req;
  std::vector<uint16_t> pending;
  for (uint16_t id : b.ids) {
    auto it = out_.find(id);
    if (it != out_.end() && it->second.batch == b.id) {
      it->second.batch = 0;
      it->second.drain_until = now + lim_.drain_ns;
      pending.push_back(id);
    }
  }
  if (!pending.empty()) t_.cancel(pending);
  if (err == ETIMEDOUT) ctr_.timeouts++;
  return d;
}

std::vector<EpBatchDone> EpBatcher::poll(Time now) {
  expire(now);
  std::vector<EpBatchDone> done;
  for (auto it = batches_.begin(); it != batches_.end();) {
    Batch& b = it->second;
    if (b.rsps.size() == b.num_req) {
      done.push_back(finish(b, 0, now));
      it = batches_.erase(it);
    } else if (now >= b.deadline) {
      done.push_back(finish(b, ETIMEDOUT, now));
      it = batches_.erase(it);
    } else {
      ++it;
    }
  }
  return done;
}

Time EpBatcher::next_deadline() const {
  Time t = ~Time(0);
  for (const auto& [id, b] : batches_) t = std::min(t, b.deadline);
  return t;
}

Status EpBatcher::send_wait(uint8_t req_tc, uint32_t op_type, std::span<const EpReq> reqs,
                            uint32_t rsp_timeout_ns, std::vector<EpRsp>* rsp) {
  rsp->clear();
  auto id = start(req_tc, op_type, reqs, rsp_timeout_ns, mono_ns());
  if (!id) return std::move(id).error();
  std::vector<EpArrival> in;
  for (;;) {
    Time now = mono_ns();
    for (EpBatchDone& d : poll(now)) {
      if (d.id != *id) continue;
      *rsp = std::move(d.rsps);
      if (d.err)
        return Error(d.err, std::to_string(rsp->size()) + " of " + std::to_string(d.num_req) +
                                " responses before the timeout");
      return ok_status();
    }
    Time dl = next_deadline();
    in.clear();
    Status s = t_.receive(dl > now ? dl - now : 0, &in);
    if (!s) return s;
    now = mono_ns();
    for (const EpArrival& a : in) on_response(a, now);
  }
}

}  // namespace mrc::ctl
