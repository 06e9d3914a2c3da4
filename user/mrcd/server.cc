#include "mrcd/server.hpp"

#include <fcntl.h>
#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "mrcd/log.hpp"

namespace mrc::mrcd {

using namespace mrc::ctl;
using proto::json;

namespace {

constexpr size_t kMaxLine = 4 << 20;         // a request larger than this is refused
constexpr size_t kMonitorBacklog = 1 << 20;  // monitors lagging more than this lose events

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json ok_rsp(const json& id, json result) {
  return json{{"id", id}, {"ok", true}, {"result", std::move(result)}};
}

json err_rsp(const json& id, const std::string& object, const Error& e, json result = nullptr) {
  return json{{"id", id},
              {"ok", false},
              {"error", proto::error_json(e, object)},
              {"result", std::move(result)}};
}

// Deleting a profile: ONLINE -> OFFLINE -> INIT (the states the profile
// state machine requires on the way down), then erased. `set_state` makes
// one transition, `erase` removes the record; the first error stops it.
template <class SetState, class Erase>
Status delete_profile(uint32_t cur_state, SetState set_state, Erase erase) {
  if (cur_state != kProfileInit) {
    if (cur_state == kProfileOnline)
      if (Status s = set_state(uint32_t(kProfileOffline)); !s) return s;
    if (Status s = set_state(uint32_t(kProfileInit)); !s) return s;
  }
  return erase();
}

bool cap_net_admin(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("CapEff:", 0) != 0) continue;
    unsigned long long caps = std::strtoull(line.c_str() + 7, nullptr, 16);
    return caps & (1ull << 12);  // CAP_NET_ADMIN
  }
  return false;
}

// Arguments of one request, with errors that name the object.
struct Args {
  const json& j;
  template <class T>
  Result<std::optional<T>> u(const char* key, uint64_t max) {
    auto v = proto::get_u64(j, key, max);
    if (!v) return std::move(v).error();
    if (!*v) return std::optional<T>();
    return std::optional<T>(T(**v));
  }
};

Result<uint64_t> need_id(const json& args, const char* what) {
  auto id = proto::get_u64(args, "id");
  if (!id) return std::move(id).error();
  if (!*id) return Error(EINVAL, std::string(what) + " needs \"id\"");
  return **id;
}

Result<std::vector<Ev>> evs_from(const json& args, const char* key) {
  std::vector<Ev> out;
  if (!args.contains(key)) return out;
  const json& a = args[key];
  if (!a.is_array()) return Error(EINVAL, std::string(key) + " must be an array of EVs");
  for (const json& e : a) {
    auto v = proto::ev_from_json(e);
    if (!v) return std::move(v).error();
    out.push_back(*v);
  }
  return out;
}

Result<uint32_t> state_arg(const json& args, const char* key, uint32_t def) {
  auto s = proto::get_str(args, key);
  if (!s) return std::move(s).error();
  if (!*s) return def;
  return proto::ev_state_from(**s);
}

}  // namespace

bool op_modifies(const std::string& op) {
  static const std::set<std::string> mod = {
      "port.set", "ev_fmt.modify", "ev_fmt.delete", "ev_profile.modify", "ev_profile.delete",
      "ev.set",   "ev.populate",   "ev.replace",    "cc_profile.modify", "cc_profile.delete",
      "probe"};
  return mod.count(op) > 0;
}

Result<PeerCred> peer_cred(int fd) {
  ucred uc{};
  socklen_t len = sizeof(uc);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len)) return Error(errno, "SO_PEERCRED");
  PeerCred c;
  c.pid = uc.pid;
  c.uid = uc.uid;
  c.gid = uc.gid;
  c.net_admin = cap_net_admin(uc.pid);
  return c;
}

Server::~Server() {
  for (auto& [fd, c] : conns_) close(fd);
  if (lfd_ >= 0) {
    close(lfd_);
    unlink(path_.c_str());
  }
}

Result<std::unique_ptr<Server>> Server::listen(const std::string& path, const std::string& group,
                                               Deps deps) {
  std::unique_ptr<Server> s(new Server());
  s->path_ = path;
  s->d_ = deps;
  // The socket's directory (e.g. /run/mrc) is created if missing.
  size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) {
    std::string dir = path.substr(0, slash);
    if (mkdir(dir.c_str(), 0755) && errno != EEXIST) return Error(errno, "creating " + dir);
  }
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.size() >= sizeof(a.sun_path))
    return Error(ENAMETOOLONG, "socket path " + path + " is too long");
  std::strcpy(a.sun_path, path.c_str());
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Error(errno, "creating the control socket");
  s->lfd_ = fd;
  // A socket left by a crashed mrcd is removed; a live one is not.
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0)
    return Error(EADDRINUSE, path + ": another mrcd is listening there");
  unlink(path.c_str());
  mode_t old = umask(0117);
  int r = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  umask(old);
  if (r) return Error(errno, "binding " + path);
  if (chmod(path.c_str(), 0660)) return Error(errno, "chmod 0660 " + path);
  if (!group.empty()) {
    struct group* g = getgrnam(group.c_str());
    if (!g) return Error(EINVAL, "socket_group " + group + ": no such group");
    if (chown(path.c_str(), uid_t(-1), g->gr_gid))
      return Error(errno, "chown " + path + " to group " + group);
  }
  if (::listen(fd, 64)) return Error(errno, "listen on " + path);
  return s;
}

void Server::fill_pollfds(std::vector<pollfd>* out) const {
  out->push_back({lfd_, POLLIN, 0});
  for (const auto& [fd, c] : conns_)
    out->push_back({fd, short((c.closing ? 0 : POLLIN) | (c.out.empty() ? 0 : POLLOUT)), 0});
}

void Server::accept_all() {
  for (;;) {
    int fd = accept4(lfd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    auto cred = peer_cred(fd);
    if (!cred) {
      close(fd);
      continue;
    }
    ctr_.accepted++;
    Conn c;
    c.fd = fd;
    c.cred = *cred;
    conns_[fd] = std::move(c);
  }
}

void Server::drop(int fd) {
  auto it = conns_.find(fd);
  if (it == conns_.end()) return;
  close(fd);
  for (auto p = probes_.begin(); p != probes_.end();)
    p = p->second.fd == fd ? probes_.erase(p) : std::next(p);
  conns_.erase(it);
}

void Server::handle(const pollfd& p) {
  if (p.fd == lfd_) {
    if (p.revents & POLLIN) accept_all();
    return;
  }
  auto it = conns_.find(p.fd);
  if (it == conns_.end()) return;
  Conn& c = it->second;
  if (p.revents & (POLLIN | POLLHUP | POLLERR)) read_conn(c);
  it = conns_.find(p.fd);
  if (it == conns_.end()) return;
  if (p.revents & (POLLHUP | POLLERR)) {
    // Gone for good: nobody is left to read an answer (pending probes of
    // this connection are forgotten with it).
    drop(p.fd);
    return;
  }
  if (!it->second.out.empty()) write_conn(it->second);
  it = conns_.find(p.fd);
  if (it != conns_.end() && it->second.closing && it->second.out.empty()) drop(p.fd);
}

void Server::send_line(Conn& c, const json& j) {
  c.out += dump(j);
  c.out += '\n';
}

void Server::write_conn(Conn& c) {
  while (!c.out.empty()) {
    ssize_t n = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      drop(c.fd);
      return;
    }
    c.out.erase(0, size_t(n));
  }
}

void Server::read_conn(Conn& c) {
  char buf[65536];
  for (;;) {
    ssize_t n = recv(c.fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n == 0) {
      // End of the requests (the peer shut its side down): answer what
      // came, then go.
      c.closing = true;
      break;
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      drop(c.fd);
      return;
    }
    c.in.append(buf, size_t(n));
    if (c.in.size() > kMaxLine) {
      send_line(c, err_rsp(nullptr, "mrcd", Error(E2BIG, "request longer than 4 MiB")));
      c.closing = true;
      c.in.clear();
      break;
    }
  }
  size_t nl;
  while ((nl = c.in.find('\n')) != std::string::npos) {
    std::string line = c.in.substr(0, nl);
    c.in.erase(0, nl + 1);
    if (line.empty()) continue;
    json req = json::parse(line, nullptr, false);
    ctr_.requests++;
    if (req.is_discarded() || !req.is_object()) {
      ctr_.errors++;
      send_line(c, err_rsp(nullptr, "mrcd", Error(EINVAL, "the request is not a JSON object")));
      continue;
    }
    auto rsp = dispatch(c.fd, c.cred, req);
    if (rsp) send_line(c, *rsp);
  }
  if (c.closing && c.out.empty() && !c.cq && !c.decisions) {
    bool waiting = false;
    for (const auto& [id, p] : probes_) waiting |= p.fd == c.fd;
    if (!waiting) drop(c.fd);
  }
}

std::optional<json> Server::dispatch(int conn_fd, const PeerCred& cred, const json& req) {
  json id = req.contains("id") ? req["id"] : json(nullptr);
  auto op = proto::get_str(req, "op");
  if (!op || !*op) {
    ctr_.errors++;
    return err_rsp(id, "mrcd", Error(EINVAL, "the request has no \"op\""));
  }
  const json empty = json::object();
  const json& args = req.contains("args") && req["args"].is_object() ? req["args"] : empty;
  if (op_modifies(**op) && !cred.net_admin) {
    ctr_.eperm++;
    ctr_.errors++;
    return err_rsp(
        id, "mrcd",
        Error(EPERM, **op + " needs CAP_NET_ADMIN (caller pid " + std::to_string(cred.pid) +
                         " uid " + std::to_string(cred.uid) + " does not have it)"));
  }
  Conn* c = nullptr;
  if (auto it = conns_.find(conn_fd); it != conns_.end()) c = &it->second;
  bool pending = false;
  json rsp;
  try {
    rsp = run(c, cred, **op, args, id, &pending);
  } catch (const std::exception& e) {
    // nlohmann::json type errors on malformed arguments end up here.
    rsp = err_rsp(id, "mrcd", Error(EINVAL, std::string("malformed arguments: ") + e.what()));
  }
  if (pending) return std::nullopt;
  if (!rsp.value("ok", false)) ctr_.errors++;
  return rsp;
}

json Server::run(Conn* conn, const PeerCred& cred, const std::string& op, const json& args,
                 const json& id, bool* pending) {
  (void)cred;
  Controller& C = *d_.ctl;
  auto fail = [&](const std::string& obj, const Error& e, json result = nullptr) {
    return err_rsp(id, obj, e, std::move(result));
  };

  if (op == "ping") return ok_rsp(id, json{{"proto", proto::kProtoVersion}, {"pid", getpid()}});
  if (op == "dev.show") return ok_rsp(id, proto::device_json(C));

  // ----- ports
  if (op == "port.show") {
    auto p = proto::get_u64(args, "port", 255);
    if (!p) return fail("port", p.error());
    json a = json::array();
    for (const auto& r : C.store().regions().ports) {
      if (!r.configured) continue;
      if (*p && r.port != **p) continue;
      a.push_back(proto::port_json(r));
    }
    if (*p && a.empty())
      return fail("port " + std::to_string(**p), Error(EINVAL, "not a port of this device"));
    return ok_rsp(id, a);
  }
  if (op == "port.set") {
    auto p = proto::get_u64(args, "port", 255);
    if (!p || !*p) return fail("port", p ? Error(EINVAL, "port.set needs \"port\"") : p.error());
    const std::string obj = "port " + std::to_string(**p);
    auto st = proto::get_str(args, "admin");
    if (!st || !*st || (**st != "up" && **st != "down"))
      return fail(obj, Error(EINVAL, "\"admin\" must be \"up\" or \"down\""));
    PortAttr a;
    a.port_admin_state = **st == "up" ? kPortAdminEnabled : kPortAdminDisabled;
    Status s = C.modify_port(uint8_t(**p), a, kPortAttrAdminState);
    if (!s) return fail(obj, s.error());
    return ok_rsp(id, proto::port_json(C.store().regions().ports[**p]));
  }

  // ----- EV format profiles
  if (op == "ev_fmt.show") {
    auto i = proto::get_u64(args, "id");
    if (!i) return fail("ev-fmt", i.error());
    if (*i) {
      const mrc_ctl_fmt* f = C.fmt_record(**i);
      if (!f) return fail("ev-fmt " + std::to_string(**i), Error(EINVAL, "does not exist"));
      return ok_rsp(id, proto::fmt_json(*f));
    }
    json a = json::array();
    for (uint64_t x : C.fmt_profile_ids()) a.push_back(proto::fmt_json(*C.fmt_record(x)));
    return ok_rsp(id, a);
  }
  if (op == "ev_fmt.modify") {
    auto fid = need_id(args, "ev_fmt.modify");
    if (!fid) return fail("ev-fmt", fid.error());
    const std::string obj = "ev-fmt " + std::to_string(*fid);
    EvFmtProfileAttr a;
    uint32_t mask = 0;
    std::vector<codec::EvFmtField> w;
    if (auto s = proto::get_str(args, "state"); !s) {
      return fail(obj, s.error());
    } else if (*s) {
      auto v = proto::profile_state_from(**s);
      if (!v) return fail(obj, v.error());
      a.profile_state = *v;
      mask |= kFmtAttrState;
    }
    if (auto s = proto::get_str(args, "mode"); !s) {
      return fail(obj, s.error());
    } else if (*s) {
      auto v = proto::fmt_mode_from(**s);
      if (!v) return fail(obj, v.error());
      a.ev_fmt_mode = *v;
      mask |= kFmtAttrMode;
    }
    if (args.contains("widths")) {
      if (!args["widths"].is_array())
        return fail(obj, Error(EINVAL, "\"widths\" must be an array of bit widths"));
      for (const json& x : args["widths"]) {
        if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > 255)
          return fail(obj, Error(EINVAL, "a format field width must be a number of bits"));
        w.push_back({uint8_t(x.get<int64_t>())});
      }
      a.ev_fmt_op.op = kFmtOpModifyFields;
      a.ev_fmt_op.fmt_fields = w;
      a.ev_fmt_op.fmt_field_count = int(w.size());
      mask |= kFmtAttrOp;
    }
    Status s = C.modify_ev_fmt_profile(*fid, a, mask);
    const mrc_ctl_fmt* f = C.fmt_record(*fid);
    if (!s) return fail(obj, s.error(), f ? proto::fmt_json(*f) : json(nullptr));
    return ok_rsp(id, proto::fmt_json(*f));
  }
  if (op == "ev_fmt.delete") {
    auto fid = need_id(args, "ev_fmt.delete");
    if (!fid) return fail("ev-fmt", fid.error());
    const std::string obj = "ev-fmt " + std::to_string(*fid);
    const mrc_ctl_fmt* f = C.fmt_record(*fid);
    if (!f) return fail(obj, Error(EINVAL, "does not exist"));
    for (uint32_t st : {uint32_t(kProfileOffline), uint32_t(kProfileInit)}) {
      if (f->cur_state == kProfileInit) break;
      if (st == kProfileOffline && f->cur_state != kProfileOnline) continue;
      EvFmtProfileAttr a;
      a.profile_state = st;
      if (Status s = C.modify_ev_fmt_profile(*fid, a, kFmtAttrState); !s)
        return fail(obj, s.error());
    }
    if (Status s = C.erase_ev_fmt_profile(*fid); !s) return fail(obj, s.error());
    return ok_rsp(id, json{{"id", *fid}, {"deleted", true}});
  }

  // ----- EV profiles and EVs
  auto evp_obj = [](uint64_t x) { return "ev-profile " + std::to_string(x); };
  if (op == "ev_profile.show") {
    auto i = proto::get_u64(args, "id");
    if (!i) return fail("ev-profile", i.error());
    auto evs = proto::get_bool(args, "evs");
    if (!evs) return fail("ev-profile", evs.error());
    const bool with = evs->value_or(false);
    if (*i) {
      const mrc_ctl_evp* p = C.ev_record(**i);
      if (!p) return fail(evp_obj(**i), Error(EINVAL, "does not exist"));
      return ok_rsp(id, proto::evp_json(C, *p, with));
    }
    json a = json::array();
    for (uint64_t x : C.ev_profile_ids()) a.push_back(proto::evp_json(C, *C.ev_record(x), with));
    return ok_rsp(id, a);
  }
  if (op == "ev_profile.modify") {
    auto pid = need_id(args, "ev_profile.modify");
    if (!pid) return fail("ev-profile", pid.error());
    const std::string obj = evp_obj(*pid);
    EvProfileAttr a;
    uint32_t mask = 0;
    Args A{args};
    if (auto s = proto::get_str(args, "state"); !s) {
      return fail(obj, s.error());
    } else if (*s) {
      auto v = proto::profile_state_from(**s);
      if (!v) return fail(obj, v.error());
      a.profile_state = *v;
      mask |= kEvpAttrState;
    }
    if (auto s = proto::get_str(args, "mode"); !s) {
      return fail(obj, s.error());
    } else if (*s) {
      auto v = proto::ev_mode_from(**s);
      if (!v) return fail(obj, v.error());
      a.ev_mode = *v;
      mask |= kEvpAttrMode;
    }
    if (auto v = A.u<uint64_t>("fmt", UINT64_MAX); !v) {
      return fail(obj, v.error());
    } else if (*v) {
      a.ev_fmt_profile_id = **v;
      mask |= kEvpAttrFmtId;
    }
    if (auto v = A.u<uint32_t>("count", UINT32_MAX); !v) {
      return fail(obj, v.error());
    } else if (*v) {
      a.ev_count = **v;
      mask |= kEvpAttrCount;
    }
    if (auto v = A.u<uint32_t>("min_active", UINT32_MAX); !v) {
      return fail(obj, v.error());
    } else if (*v) {
      a.ev_min_active = **v;
      mask |= kEvpAttrMinActive;
    }
    if (args.contains("event_mask")) {
      const json& m = args["event_mask"];
      uint32_t bits = 0;
      if (m.is_number_integer() && m.get<int64_t>() >= 0) {
        bits = uint32_t(m.get<int64_t>());
      } else if (m.is_array()) {
        for (const json& x : m) {
          if (!x.is_string()) return fail(obj, Error(EINVAL, "event_mask names are strings"));
          auto v = proto::ev_state_from(x.get<std::string>());
          if (!v) return fail(obj, v.error());
          bits |= *v;
        }
      } else {
        return fail(obj, Error(EINVAL, "event_mask is an array of state names or a number"));
      }
      a.ev_event_mask = int(bits);
      mask |= kEvpAttrEventMask;
    }
    std::vector<codec::EvField> fields;
    if (args.contains("fields")) {
      if (!args["fields"].is_array())
        return fail(obj, Error(EINVAL, "\"fields\" must be an array"));
      for (const json& f : args["fields"]) {
        auto v = proto::field_from_json(f);
        if (!v) return fail(obj, v.error());
        fields.push_back(*v);
      }
      a.ev_fields_op.op = kEvFieldsOpModifyFields;
      a.ev_fields_op.fields = fields;
      a.ev_fields_op.field_count = int(fields.size());
      mask |= kEvpAttrEvFieldsOp;
    }
    std::vector<codec::EvField> qfields;
    if (auto q = A.u<uint32_t>("query_fields", 4096); !q) {
      return fail(obj, q.error());
    } else if (*q) {
      qfields.resize(**q);
      a.ev_fields_op.op = kEvFieldsOpQueryFields;
      a.ev_fields_op.fields = qfields;
      a.ev_fields_op.field_count = int(**q);
      mask |= kEvpAttrEvFieldsOp;
    }
    std::vector<EvOpEntry> entries;
    if (args.contains("ev_op")) {
      const json& o = args["ev_op"];
      if (!o.is_object()) return fail(obj, Error(EINVAL, "\"ev_op\" must be an object"));
      auto opn = proto::get_str(o, "op");
      if (!opn || !*opn) return fail(obj, Error(EINVAL, "ev_op needs \"op\""));
      static const std::map<std::string, uint32_t> ops = {{"replace", kEvOpReplaceEv},
                                                          {"modify_state", kEvOpModifyEvState},
                                                          {"query_state", kEvOpQueryEvState},
                                                          {"query_array", kEvOpQueryEvArray}};
      auto oi = ops.find(**opn);
      if (oi == ops.end())
        return fail(
            obj, Error(EINVAL, "ev_op.op \"" + **opn +
                                   "\" is not replace, modify_state, query_state or query_array"));
      a.ev_op.op = oi->second;
      if (o.contains("entries")) {
        if (!o["entries"].is_array())
          return fail(obj, Error(EINVAL, "ev_op.entries must be an array"));
        for (const json& e : o["entries"]) {
          EvOpEntry en;
          if (e.contains("ev")) {
            if (e["ev"].is_null()) {
              en.ev = Ev::unpopulated_ev();
            } else {
              auto v = proto::ev_from_json(e["ev"]);
              if (!v) return fail(obj, v.error());
              en.ev = *v;
            }
          }
          if (e.contains("new")) {
            auto v = proto::ev_from_json(e["new"]);
            if (!v) return fail(obj, v.error());
            en.ev_new = *v;
          }
          auto st = state_arg(e, "state", 0);
          if (!st) return fail(obj, st.error());
          en.state = *st;
          auto all = proto::get_bool(e, "all_copies");
          if (!all) return fail(obj, all.error());
          en.flags = all->value_or(false) ? uint32_t(kEvOpFAllCopies) : 0u;
          entries.push_back(en);
        }
      }
      auto cnt = proto::get_u64(o, "entry_count", 1u << 20);
      if (!cnt) return fail(obj, cnt.error());
      if (*cnt && **cnt > entries.size()) entries.resize(**cnt);
      a.ev_op.entries = entries;
      a.ev_op.entry_count = int(cnt->value_or(entries.size()));
      mask |= kEvpAttrEvOp;
    }
    Status s = C.modify_ev_profile(*pid, a, mask);
    json result = json::object();
    if (const mrc_ctl_evp* p = C.ev_record(*pid)) result["profile"] = proto::evp_json(C, *p, false);
    if (mask & kEvpAttrEvOp) {
      json out = json::array();
      size_t n = std::min<size_t>(size_t(std::max(a.ev_op.entry_count, 0)), entries.size());
      for (size_t i = 0; i < n; i++) {
        json e = {
            {"ev", entries[i].ev.unpopulated() ? json(nullptr) : proto::ev_json(entries[i].ev)},
            {"state", ev_state_name(entries[i].state)}};
        out.push_back(e);
      }
      result["entries"] = out;
      result["entry_count"] = a.ev_op.entry_count;
    }
    if (!qfields.empty() ||
        (mask & kEvpAttrEvFieldsOp && a.ev_fields_op.op == kEvFieldsOpQueryFields))
      result["field_count"] = a.ev_fields_op.field_count;
    if (!s) {
      if (s.error().code == E2BIG) {
        result["required"] =
            (mask & kEvpAttrEvOp) ? a.ev_op.entry_count : a.ev_fields_op.field_count;
      }
      return fail(obj, s.error(), result);
    }
    return ok_rsp(id, result);
  }
  if (op == "ev_profile.delete") {
    auto pid = need_id(args, "ev_profile.delete");
    if (!pid) return fail("ev-profile", pid.error());
    const std::string obj = evp_obj(*pid);
    const mrc_ctl_evp* p = C.ev_record(*pid);
    if (!p) return fail(obj, Error(EINVAL, "does not exist"));
    Status s = delete_profile(
        p->cur_state,
        [&](uint32_t st) {
          EvProfileAttr a;
          a.profile_state = st;
          return C.modify_ev_profile(*pid, a, kEvpAttrState);
        },
        [&] { return C.erase_ev_profile(*pid); });
    if (!s) return fail(obj, s.error());
    return ok_rsp(id, json{{"id", *pid}, {"deleted", true}});
  }
  if (op == "ev.show") {
    auto pid = proto::get_u64(args, "profile");
    if (!pid || !*pid)
      return fail("ev", pid ? Error(EINVAL, "ev.show needs \"profile\"") : pid.error());
    const mrc_ctl_evp* p = C.ev_record(**pid);
    if (!p) return fail(evp_obj(**pid), Error(EINVAL, "does not exist"));
    auto filt = proto::get_str(args, "state");
    if (!filt) return fail(evp_obj(**pid), filt.error());
    auto port = proto::get_u64(args, "port", 255);
    if (!port) return fail(evp_obj(**pid), port.error());
    json a = json::array();
    auto arr = C.ev_entries(**pid);
    // What the applications using the profile published about each EV.
    std::map<proto::EvCounterKey, proto::EvCounterSum> sums;
    if (auto st = C.store().list_evstats()) sums = proto::sum_evstats(*st);
    const Time now = mono_ns();
    for (size_t i = 0; i < arr.size(); i++) {
      json e = proto::ev_entry_json(C, *p, i, arr[i]);
      if (*filt && e["state"] != **filt) continue;
      if (*port && arr[i].port != **port) continue;
      auto it =
          arr[i].populated ? sums.find({**pid, arr[i].wire, uint8_t(arr[i].port)}) : sums.end();
      e["counters"] = it == sums.end() ? json(nullptr) : proto::ev_counters_json(it->second, now);
      a.push_back(e);
    }
    return ok_rsp(id, json{{"profile", **pid}, {"mode", ev_mode_name(p->mode)}, {"evs", a}});
  }
  if (op == "ev.set" || op == "ev.populate" || op == "ev.replace") {
    auto pid = proto::get_u64(args, "profile");
    if (!pid || !*pid)
      return fail("ev", pid ? Error(EINVAL, op + " needs \"profile\"") : pid.error());
    const std::string obj = evp_obj(**pid);
    std::vector<EvOpEntry> entries;
    EvProfileAttr a;
    if (op == "ev.set") {
      auto st = state_arg(args, "state", 0);
      if (!st) return fail(obj, st.error());
      if (!*st) return fail(obj, Error(EINVAL, "ev.set needs \"state\""));
      auto evs = evs_from(args, "evs");
      if (!evs) return fail(obj, evs.error());
      auto port = proto::get_u64(args, "port", 255);
      if (!port) return fail(obj, port.error());
      std::vector<Ev> list = *evs;
      if (*port) {
        // Every EV of the plane (its distinct values).
        for (const auto& e : C.ev_entries(**pid)) {
          if (!e.populated || e.port != **port) continue;
          Ev v;
          std::memcpy(v.val.data(), e.val, codec::kEvMaxBytes);
          v.port = e.port;
          if (std::find(list.begin(), list.end(), v) == list.end()) list.push_back(v);
        }
        if (list.empty())
          return fail(obj, Error(ENOENT, "no EV on port " + std::to_string(**port)));
      }
      if (list.empty()) return fail(obj, Error(EINVAL, "no EVs given (\"evs\" or \"port\")"));
      for (const Ev& v : list) entries.push_back({v, {}, *st, 0});
      a.ev_op.op = kEvOpModifyEvState;
    } else if (op == "ev.populate") {
      auto st = state_arg(args, "state", kEvGood);
      if (!st) return fail(obj, st.error());
      auto evs = evs_from(args, "evs");
      if (!evs) return fail(obj, evs.error());
      if (evs->empty()) return fail(obj, Error(EINVAL, "no EVs given"));
      for (const Ev& v : *evs) entries.push_back({Ev::unpopulated_ev(), v, *st, 0});
      a.ev_op.op = kEvOpReplaceEv;
    } else {
      if (!args.contains("entries") || !args["entries"].is_array())
        return fail(obj, Error(EINVAL, "ev.replace needs \"entries\""));
      for (const json& e : args["entries"]) {
        auto v = proto::ev_from_json(e.value("ev", json()));
        if (!v) return fail(obj, v.error());
        auto n = proto::ev_from_json(e.value("new", json()));
        if (!n) return fail(obj, n.error());
        auto st = state_arg(e, "state", kEvGood);
        if (!st) return fail(obj, st.error());
        auto all = proto::get_bool(e, "all_copies");
        if (!all) return fail(obj, all.error());
        entries.push_back({*v, *n, *st, all->value_or(false) ? uint32_t(kEvOpFAllCopies) : 0u});
      }
      a.ev_op.op = kEvOpReplaceEv;
    }
    a.ev_op.entries = entries;
    a.ev_op.entry_count = int(entries.size());
    // When the change was committed (CLOCK_MONOTONIC): time_ns just before
    // the call, done_ns after it, so no engine can have applied the change
    // before time_ns; and the generation applications see from then on.
    // What a measurement of the data path's reaction starts from.
    const Time t_call = mono_ns();
    Status s = C.modify_ev_profile(**pid, a, kEvpAttrEvOp);
    json result = {{"requested", entries.size()},
                   {"time_ns", t_call},
                   {"done_ns", mono_ns()},
                   {"gen", read_gen(C.store().dev())}};
    if (const mrc_ctl_evp* p = C.ev_record(**pid))
      result["profile"] = proto::evp_json(C, *p, false);
    if (!s) return fail(obj, s.error(), result);
    return ok_rsp(id, result);
  }

  // ----- CC profiles
  auto cc_obj = [](uint64_t x) { return "cc-profile " + std::to_string(x); };
  if (op == "cc_profile.show") {
    auto i = proto::get_u64(args, "id");
    if (!i) return fail("cc-profile", i.error());
    if (*i) {
      const mrc_ctl_cc* p = C.cc_record(**i);
      if (!p) return fail(cc_obj(**i), Error(EINVAL, "does not exist"));
      return ok_rsp(id, proto::cc_json(C, *p));
    }
    json a = json::array();
    for (uint64_t x : C.cc_profile_ids()) a.push_back(proto::cc_json(C, *C.cc_record(x)));
    return ok_rsp(id, a);
  }
  if (op == "cc_profile.modify") {
    auto cid = need_id(args, "cc_profile.modify");
    if (!cid) return fail("cc-profile", cid.error());
    const std::string obj = cc_obj(*cid);
    CcProfileAttr a;
    uint32_t mask = 0;
    if (auto s = proto::get_str(args, "state"); !s) {
      return fail(obj, s.error());
    } else if (*s) {
      auto v = proto::profile_state_from(**s);
      if (!v) return fail(obj, v.error());
      a.profile_state = *v;
      mask |= kCcAttrState;
    }
    if (args.contains("algorithm")) {
      const json& g = args["algorithm"];
      if (g.is_null() || (g.is_string() && g.get<std::string>() == "none")) {
        a.algorithm.reset();
      } else if (g.is_string()) {
        a.algorithm = g.get<std::string>();
      } else {
        return fail(obj, Error(EINVAL, "\"algorithm\" is a name or null"));
      }
      mask |= kCcAttrAlgorithm;
    }
    if (args.contains("config")) {
      const json& g = args["config"];
      if (!g.is_object())
        return fail(obj, Error(EINVAL, "\"config\" must be an object of NSCC fields"));
      NsccCfg n;
      static const std::set<std::string> known = {"disable_qa",
                                                  "adjust_bytes_threshold",
                                                  "adjust_period_threshold",
                                                  "base_rtt",
                                                  "eta",
                                                  "fi",
                                                  "fi_scale",
                                                  "gamma",
                                                  "max_md_jump",
                                                  "max_cwnd",
                                                  "qa_gate",
                                                  "qa_threshold",
                                                  "target_delay"};
      for (auto it = g.begin(); it != g.end(); ++it)
        if (!known.count(it.key()))
          return fail(obj, Error(EINVAL, "unknown NSCC field \"" + it.key() + "\""));
      auto u32 = [&](const char* k, uint32_t* dst) -> Status {
        auto v = proto::get_u64(g, k, UINT32_MAX);
        if (!v) return std::move(v).error();
        if (*v) *dst = uint32_t(**v);
        return ok_status();
      };
      auto f32 = [&](const char* k, float* dst) -> Status {
        auto v = proto::get_num(g, k);
        if (!v) return std::move(v).error();
        if (*v) *dst = float(**v);
        return ok_status();
      };
      for (auto [k, dst] :
           {std::pair{"adjust_bytes_threshold", &n.adjust_bytes_threshold},
            std::pair{"adjust_period_threshold", &n.adjust_period_threshold},
            std::pair{"base_rtt", &n.base_rtt}, std::pair{"max_cwnd", &n.max_cwnd},
            std::pair{"qa_threshold", &n.qa_threshold}, std::pair{"target_delay", &n.target_delay}})
        if (Status s = u32(k, dst); !s) return fail(obj, s.error());
      for (auto [k, dst] :
           {std::pair{"eta", &n.eta}, std::pair{"fi", &n.fi}, std::pair{"fi_scale", &n.fi_scale},
            std::pair{"gamma", &n.gamma}, std::pair{"max_md_jump", &n.max_md_jump}})
        if (Status s = f32(k, dst); !s) return fail(obj, s.error());
      auto qg = proto::get_u64(g, "qa_gate", 255);
      if (!qg) return fail(obj, qg.error());
      n.qa_gate = uint8_t(qg->value_or(0));
      auto dq = proto::get_bool(g, "disable_qa");
      if (!dq) return fail(obj, dq.error());
      n.disable_qa = dq->value_or(false);
      a.cc_config = n;
      mask |= kCcAttrConfig;
    }
    Status s = C.modify_cc_profile(*cid, a, mask);
    const mrc_ctl_cc* p = C.cc_record(*cid);
    if (!s) return fail(obj, s.error(), p ? proto::cc_json(C, *p) : json(nullptr));
    return ok_rsp(id, proto::cc_json(C, *p));
  }
  if (op == "cc_profile.delete") {
    auto cid = need_id(args, "cc_profile.delete");
    if (!cid) return fail("cc-profile", cid.error());
    const std::string obj = cc_obj(*cid);
    const mrc_ctl_cc* p = C.cc_record(*cid);
    if (!p) return fail(obj, Error(EINVAL, "does not exist"));
    Status s = delete_profile(
        p->cur_state,
        [&](uint32_t st) {
          CcProfileAttr a;
          a.profile_state = st;
          return C.modify_cc_profile(*cid, a, kCcAttrState);
        },
        [&] { return C.erase_cc_profile(*cid); });
    if (!s) return fail(obj, s.error());
    return ok_rsp(id, json{{"id", *cid}, {"deleted", true}});
  }

  // ----- endpoint operations
  if (op == "probe") {
    if (!d_.ep) return fail("probe", Error(ENOTSUP, "endpoint operations are not available"));
    auto dst = proto::get_str(args, "dst");
    codec::IpAddr dip;
    if (!dst || !*dst || !proto::parse_ip(**dst, &dip))
      return fail("probe", Error(EINVAL, "\"dst\" must be an IPv4 or IPv6 address"));
    const std::string obj = "probe " + **dst;
    codec::IpAddr sip;
    auto src = proto::get_str(args, "src");
    if (!src) return fail(obj, src.error());
    if (*src && !proto::parse_ip(**src, &sip))
      return fail(obj, Error(EINVAL, "\"src\" is not an address"));
    // Each EV may go to its own destination: "HEX@PORT=ADDR" or {"ev", "port", "dst"}.
    std::vector<Ev> list;
    std::vector<codec::IpAddr> dsts;
    if (args.contains("evs")) {
      if (!args["evs"].is_array()) return fail(obj, Error(EINVAL, "\"evs\" must be an array"));
      for (const json& e : args["evs"]) {
        json ev = e;
        codec::IpAddr to = dip;
        std::string alt;
        if (e.is_string() && e.get<std::string>().find('=') != std::string::npos) {
          const std::string s = e.get<std::string>();
          ev = s.substr(0, s.find('='));
          alt = s.substr(s.find('=') + 1);
        } else if (e.is_object() && e.contains("dst") && e["dst"].is_string()) {
          alt = e["dst"].get<std::string>();
        }
        if (!alt.empty() && !proto::parse_ip(alt, &to))
          return fail(obj, Error(EINVAL, "destination \"" + alt + "\" is not an address"));
        auto v = proto::ev_from_json(ev);
        if (!v) return fail(obj, v.error());
        list.push_back(*v);
        dsts.push_back(to);
      }
    }
    if (list.empty()) {
      for (const auto& p : C.store().regions().ports)
        if (p.configured) {
          list.push_back(Ev{codec::ev_from_u32(0, codec::EvFmtMode::kStev), uint8_t(p.port)});
          dsts.push_back(dip);
        }
    }
    auto fmt = proto::get_str(args, "fmt");
    if (!fmt) return fail(obj, fmt.error());
    uint32_t fmode = kFmtStev;
    if (*fmt) {
      auto v = proto::fmt_mode_from(**fmt);
      if (!v) return fail(obj, v.error());
      fmode = *v;
    }
    auto opn = proto::get_str(args, "op");
    if (!opn) return fail(obj, opn.error());
    uint32_t op_type = kEpOpEvProbe;
    if (*opn && **opn == "port_status")
      op_type = kEpOpPortStatusUpdate;
    else if (*opn && **opn != "ev_probe")
      return fail(obj, Error(EINVAL, "\"op\" must be ev_probe or port_status"));
    auto ps = proto::get_u64(args, "port_status", UINT32_MAX);
    auto to = proto::get_u64(args, "timeout_ms", 60000);
    auto tc = proto::get_u64(args, "tc", 255);
    if (!ps || !to || !tc)
      return fail(obj, Error(EINVAL, "port_status, timeout_ms and tc are numbers"));
    std::vector<uint16_t> ids;
    if (args.contains("req_ids")) {
      if (!args["req_ids"].is_array())
        return fail(obj, Error(EINVAL, "\"req_ids\" must be an array"));
      for (const json& x : args["req_ids"]) {
        if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > 0xffff)
          return fail(obj, Error(EINVAL, "a req_id is a number 0..65535"));
        ids.push_back(uint16_t(x.get<int64_t>()));
      }
      if (ids.size() != list.size()) return fail(obj, Error(EINVAL, "one req_id per EV is needed"));
    } else {
      static uint16_t next = 0;
      for (size_t i = 0; i < list.size(); i++) ids.push_back(uint16_t(0x8000 | (next++ & 0x3fff)));
    }
    std::vector<EpReq> reqs;
    for (size_t i = 0; i < list.size(); i++) {
      EpReq r;
      r.req_id = ids[i];
      r.dgid = gid_from_ip(dsts[i]);
      if (*src) r.sgid = gid_from_ip(sip);
      r.ev_fmt_mode = fmode;
      r.req_ev = list[i];
      r.port_status = uint32_t(ps->value_or(0));
      reqs.push_back(r);
    }
    const uint32_t timeout_ns =
        uint32_t(std::min<uint64_t>(to->value_or(1000) * 1'000'000ull, UINT32_MAX));
    auto b = d_.ep->start(uint8_t(tc->value_or(0)), op_type, reqs, timeout_ns, mono_ns());
    if (!b) return fail(obj, b.error());
    json rq = json::array();
    for (size_t i = 0; i < reqs.size(); i++)
      rq.push_back({{"req_id", reqs[i].req_id},
                    {"ev", ev_hex(reqs[i].req_ev.val)},
                    {"port", reqs[i].req_ev.port},
                    {"dst", proto::ip_string(dsts[i])}});
    json keep = {{"dst", **dst},
                 {"op", op_type == kEpOpEvProbe ? "ev_probe" : "port_status"},
                 {"timeout_ns", timeout_ns},
                 {"requests", rq}};
    probes_[*b] = PendingProbe{conn ? conn->fd : -1, id, keep};
    *pending = conn != nullptr;
    return ok_rsp(id, keep);
  }

  // ----- reports and observability
  if (op == "qp.show") return ok_rsp(id, d_.qps ? d_.qps() : json::array());
  if (op == "stats") return ok_rsp(id, d_.stats ? d_.stats() : json::object());
  if (op == "policy.show") {
    json dec = json::array();
    if (d_.policy) {
      for (const Decision& d : d_.policy->decisions())
        dec.push_back({{"time_ns", d.time_ns},
                       {"action", d.action},
                       {"profile", d.profile},
                       {"ev", d.profile == 0 ? json(nullptr) : json(ev_hex(d.ev.val))},
                       {"port", d.port},
                       {"reason", d.reason}});
    }
    const auto ctr = d_.policy ? d_.policy->counters() : Policy::Counters{};
    return ok_rsp(id, json{{"enabled", d_.policy != nullptr},
                           {"counters",
                            {{"deny_ev", ctr.deny_ev},
                             {"allow_ev", ctr.allow_ev},
                             {"deny_plane", ctr.deny_plane},
                             {"allow_plane", ctr.allow_plane},
                             {"suppressed", ctr.suppressed}}},
                           {"decisions", dec}});
  }
  if (op == "monitor") {
    if (!conn) return fail("monitor", Error(EINVAL, "monitor needs a connection"));
    auto ev = proto::get_bool(args, "events");
    auto de = proto::get_bool(args, "decisions");
    auto cqe = proto::get_u64(args, "cqe", 1u << 20);
    if (!ev || !de || !cqe)
      return fail("monitor", Error(EINVAL, "events/decisions are booleans, cqe a number"));
    if (ev->value_or(true)) {
      auto cq = C.create_ev_event_cq(int(cqe->value_or(4096)));
      if (!cq) return fail("monitor", cq.error());
      conn->cq = *cq;
    }
    conn->decisions = de->value_or(true);
    return ok_rsp(id, json{{"events", conn->cq != nullptr}, {"decisions", conn->decisions}});
  }
  return fail("mrcd", Error(EINVAL, "unknown operation \"" + op + "\""));
}

void Server::on_batch_done(const EpBatchDone& d) {
  auto it = probes_.find(d.id);
  if (it == probes_.end()) return;
  PendingProbe p = std::move(it->second);
  probes_.erase(it);
  auto c = conns_.find(p.fd);
  if (c == conns_.end()) return;
  json rs = json::array();
  for (size_t i = 0; i < d.rsps.size(); i++) {
    const EpRsp& r = d.rsps[i];
    json e = {{"req_id", r.req_id},
              {"port", r.port},
              {"rtt_ns", r.rtt},
              {"adj_svc_time", r.adj_svc_time != 0}};
    if (i < d.detail.size()) {
      e["from"] = proto::ip_string(d.detail[i].from);
      e["rx_port"] = d.detail[i].rx_port;
      e["port_status"] = d.detail[i].port_status;
    }
    for (const json& q : p.req["requests"])
      if (q["req_id"] == r.req_id) e["ev"] = q["ev"];
    rs.push_back(e);
  }
  json result = p.req;
  result["responses"] = rs;
  result["answered"] = d.rsps.size();
  result["sent"] = d.num_req;
  if (d.err) {
    send_line(c->second,
              err_rsp(p.id, "probe " + p.req["dst"].get<std::string>(),
                      Error(d.err, std::to_string(d.rsps.size()) + " of " +
                                       std::to_string(d.num_req) + " responses before the timeout"),
                      result));
  } else {
    send_line(c->second, ok_rsp(p.id, result));
  }
  write_conn(c->second);
  c = conns_.find(p.fd);
  if (c != conns_.end() && c->second.closing && c->second.out.empty() && !c->second.cq &&
      !c->second.decisions) {
    bool waiting = false;
    for (const auto& [id, q] : probes_) waiting |= q.fd == p.fd;
    if (!waiting) drop(p.fd);
  }
}

void Server::on_decision(const Decision& d) {
  json j = {{"type", "decision"},
            {"time_ns", d.time_ns},
            {"action", d.action},
            {"profile", d.profile},
            {"ev", d.profile == 0 ? json(nullptr) : json(ev_hex(d.ev.val))},
            {"port", d.port},
            {"reason", d.reason}};
  for (auto& [fd, c] : conns_)
    if (c.decisions && c.out.size() < kMonitorBacklog) send_line(c, j);
}

void Server::flush_monitors() {
  std::vector<int> fds;
  for (auto& [fd, c] : conns_) {
    if (c.cq) {
      EvEvent buf[64];
      while (c.out.size() < kMonitorBacklog) {
        size_t n = c.cq->poll(buf);
        for (size_t i = 0; i < n; i++) send_line(c, proto::event_json(buf[i]));
        if (n < 64) break;
      }
    }
    if (!c.out.empty()) fds.push_back(fd);
  }
  for (int fd : fds) {
    auto it = conns_.find(fd);
    if (it != conns_.end()) write_conn(it->second);
  }
}

}  // namespace mrc::mrcd
