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
#include <sstream>

#include "mrcd/log.hpp"
#include "mrcd/ops.hpp"

namespace mrc::mrcd {

using namespace mrc::ctl;
using proto::json;

namespace {

constexpr size_t kMaxLine = 4 << 20;         // a request larger than this is refused
constexpr size_t kMonitorBacklog = 1 << 20;  // monitors lagging more than this lose events

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

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

}  // namespace

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
  conns_.clear();  // closes the connections
  if (lfd_) {
    lfd_.reset();
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
  s->lfd_ = UniqueFd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!s->lfd_) return Error(errno, "creating the control socket");
  const int fd = s->lfd_.get();
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
  out->push_back({lfd_.get(), POLLIN, 0});
  for (const auto& [fd, c] : conns_)
    out->push_back({fd, short((c.closing ? 0 : POLLIN) | (c.out.empty() ? 0 : POLLOUT)), 0});
}

void Server::accept_all() {
  for (;;) {
    UniqueFd sock(accept4(lfd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!sock) return;
    const int fd = sock.get();
    auto cred = peer_cred(fd);
    if (!cred) continue;  // closed
    ctr_.accepted++;
    Conn c;
    c.sock = std::move(sock);
    c.fd = fd;
    c.cred = *cred;
    conns_[fd] = std::move(c);
  }
}

void Server::drop(int fd) {
  auto it = conns_.find(fd);
  if (it == conns_.end()) return;
  for (auto p = probes_.begin(); p != probes_.end();)
    p = p->second.fd == fd ? probes_.erase(p) : std::next(p);
  conns_.erase(it);
}

void Server::handle(const pollfd& p) {
  if (p.fd == lfd_.get()) {
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
  const OpSpec* spec = find_op(**op);
  if (spec && spec->modifies && !cred.net_admin) {
    ctr_.eperm++;
    ctr_.errors++;
    return err_rsp(
        id, "mrcd",
        Error(EPERM, **op + " needs CAP_NET_ADMIN (caller pid " + std::to_string(cred.pid) +
                         " uid " + std::to_string(cred.uid) + " does not have it)"));
  }
  if (!spec) {
    ctr_.errors++;
    return err_rsp(id, "mrcd", Error(EINVAL, "unknown operation \"" + **op + "\""));
  }
  Conn* c = nullptr;
  if (auto it = conns_.find(conn_fd); it != conns_.end()) c = &it->second;
  Request r{*d_.ctl, d_, c, &probes_, cred, **op, args, id};
  json rsp;
  try {
    rsp = spec->run(r);
  } catch (const std::exception& e) {
    // nlohmann::json type errors on malformed arguments end up here.
    rsp = err_rsp(id, "mrcd", Error(EINVAL, std::string("malformed arguments: ") + e.what()));
  }
  if (r.pending) return std::nullopt;
  if (!rsp.value("ok", false)) ctr_.errors++;
  return rsp;
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
