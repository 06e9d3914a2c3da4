// Handlers of reports and observability: qp.show, stats, policy.show,
// monitor (the connection becomes a stream of EV events and decisions,
// Server::flush_monitors).
#include "mrcd/ops.hpp"

namespace mrc::mrcd {

using namespace mrc::ctl;

json op_qp_show(Request& r) { return r.ok(r.deps.qps ? r.deps.qps() : json::array()); }

json op_stats(Request& r) { return r.ok(r.deps.stats ? r.deps.stats() : json::object()); }

json op_policy_show(Request& r) {
  const Policy* pol = r.deps.policy;
  json dec = json::array();
  if (pol) {
    for (const Decision& d : pol->decisions())
      dec.push_back({{"time_ns", d.time_ns},
                     {"action", d.action},
                     {"profile", d.profile},
                     {"ev", d.profile == 0 ? json(nullptr) : json(ev_hex(d.ev.val))},
                     {"port", d.port},
                     {"reason", d.reason}});
  }
  const auto ctr = pol ? pol->counters() : Policy::Counters{};
  return r.ok(json{{"enabled", pol != nullptr},
                   {"counters",
                    {{"deny_ev", ctr.deny_ev},
                     {"allow_ev", ctr.allow_ev},
                     {"deny_plane", ctr.deny_plane},
                     {"allow_plane", ctr.allow_plane},
                     {"suppressed", ctr.suppressed}}},
                   {"decisions", dec}});
}

json op_monitor(Request& r) {
  if (!r.conn) return r.fail("monitor", Error(EINVAL, r.op + " needs a connection"));
  auto ev = proto::get_bool(r.args, "events");
  auto de = proto::get_bool(r.args, "decisions");
  auto cqe = proto::get_u64(r.args, "cqe", 1u << 20);
  if (!ev || !de || !cqe)
    return r.fail("monitor", Error(EINVAL, "events/decisions are booleans, cqe a number"));
  if (ev->value_or(true)) {
    auto cq = r.ctl.create_ev_event_cq(int(cqe->value_or(4096)));
    if (!cq) return r.fail("monitor", cq.error());
    r.conn->cq = *cq;
  }
  r.conn->decisions = de->value_or(true);
  return r.ok(json{{"events", r.conn->cq != nullptr}, {"decisions", r.conn->decisions}});
}

}  // namespace mrc::mrcd
