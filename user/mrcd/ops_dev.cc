// Handlers of the daemon, the device and its ports: ping, dev.show,
// port.show, port.set.
#include <unistd.h>

#include "mrcd/ops.hpp"

namespace mrc::mrcd {

using namespace mrc::ctl;

json op_ping(Request& r) { return r.ok(json{{"proto", proto::kProtoVersion}, {"pid", getpid()}}); }

json op_dev_show(Request& r) { return r.ok(proto::device_json(r.ctl)); }

json op_port_show(Request& r) {
  auto p = proto::get_u64(r.args, "port", 255);
  if (!p) return r.fail("port", p.error());
  json a = json::array();
  for (const auto& rec : r.ctl.store().regions().ports) {
    if (!rec.configured) continue;
    if (*p && rec.port != **p) continue;
    a.push_back(proto::port_json(rec));
  }
  if (*p && a.empty())
    return r.fail("port " + std::to_string(**p), Error(EINVAL, "not a port of this device"));
  return r.ok(a);
}

json op_port_set(Request& r) {
  auto p = proto::get_u64(r.args, "port", 255);
  if (!p || !*p) return r.fail("port", p ? Error(EINVAL, r.op + " needs \"port\"") : p.error());
  const std::string obj = "port " + std::to_string(**p);
  auto st = proto::get_str(r.args, "admin");
  if (!st || !*st || (**st != "up" && **st != "down"))
    return r.fail(obj, Error(EINVAL, "\"admin\" must be \"up\" or \"down\""));
  PortAttr a;
  a.port_admin_state = **st == "up" ? kPortAdminEnabled : kPortAdminDisabled;
  Status s = r.ctl.modify_port(uint8_t(**p), a, kPortAttrAdminState);
  if (!s) return r.fail(obj, s.error());
  return r.ok(proto::port_json(r.ctl.store().regions().ports[**p]));
}

}  // namespace mrc::mrcd
