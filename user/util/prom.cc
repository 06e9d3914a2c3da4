#include "util/prom.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cinttypes>
#include <cstring>

namespace mrc::prom {

void Expo::family(const std::string& name, const char* type, const std::string& help) {
  // HELP text escapes backslash and newline (the text format, 0.0.4).
  s_ += "# HELP " + name + " ";
  for (char c : help) {
    if (c == '\\')
      s_ += "\\\\";
    else if (c == '\n')
      s_ += "\\n";
    else
      s_ += c;
  }
  s_ += "\n# TYPE " + name + " " + type + "\n";
}

void Expo::labels(const std::vector<std::pair<std::string, std::string>>& l) {
  if (l.empty()) return;
  s_ += '{';
  for (size_t i = 0; i < l.size(); i++) {
    if (i) s_ += ',';
    s_ += l[i].first + "=\"";
    for (char c : l[i].second) {
      if (c == '\\' || c == '"') s_ += '\\';
      if (c == '\n') {
        s_ += "\\n";
        continue;
      }
      s_ += c;
    }
    s_ += '"';
  }
  s_ += '}';
}

void Expo::sample(const std::string& name,
                  const std::vector<std::pair<std::string, std::string>>& l, double v) {
  s_ += name;
  labels(l);
  char b[64];
  std::snprintf(b, sizeof(b), " %.9g\n", v);
  s_ += b;
}

void Expo::sample_u(const std::string& name,
                    const std::vector<std::pair<std::string, std::string>>& l, uint64_t v) {
  s_ += name;
  labels(l);
  char b[32];
  std::snprintf(b, sizeof(b), " %" PRIu64 "\n", v);
  s_ += b;
}

Result<std::unique_ptr<Metrics>> Metrics::listen(const std::string& addr,
                                                 std::function<std::string()> render) {
  std::unique_ptr<Metrics> m(new Metrics());
  m->render_ = std::move(render);
  size_t colon = addr.rfind(':');
  if (colon == std::string::npos)
    return Error(EINVAL, "metrics address \"" + addr + "\" is not host:port");
  std::string host = addr.substr(0, colon), port = addr.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  char* end = nullptr;
  unsigned long p = std::strtoul(port.c_str(), &end, 10);
  if (port.empty() || *end || p > 65535)
    return Error(EINVAL, "metrics address \"" + addr + "\": bad port");
  sockaddr_storage ss{};
  socklen_t len;
  int fam;
  if (host.empty() || host == "*") {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    a->sin6_addr = in6addr_any;
    a->sin6_port = htons(uint16_t(p));
    len = sizeof(*a);
    fam = AF_INET6;
  } else if (inet_pton(AF_INET, host.c_str(), &reinterpret_cast<sockaddr_in*>(&ss)->sin_addr) ==
             1) {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    a->sin_port = htons(uint16_t(p));
    len = sizeof(*a);
    fam = AF_INET;
  } else if (inet_pton(AF_INET6, host.c_str(), &reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr) ==
             1) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(uint16_t(p));
    len = sizeof(*a);
    fam = AF_INET6;
  } else {
    return Error(EINVAL, "metrics address \"" + addr + "\": host must be a numeric address");
  }
  m->lfd_ = UniqueFd(socket(fam, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!m->lfd_) return Error(errno, "metrics socket");
  const int fd = m->lfd_.get();
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, reinterpret_cast<sockaddr*>(&ss), len))
    return Error(errno, "binding the metrics endpoint " + addr);
  if (::listen(fd, 16)) return Error(errno, "listen on " + addr);
  sockaddr_storage got{};
  socklen_t gl = sizeof(got);
  getsockname(fd, reinterpret_cast<sockaddr*>(&got), &gl);
  m->port_ = ntohs(fam == AF_INET ? reinterpret_cast<sockaddr_in*>(&got)->sin_port
                                  : reinterpret_cast<sockaddr_in6*>(&got)->sin6_port);
  return m;
}

void Metrics::fill_pollfds(std::vector<pollfd>* out) const {
  out->push_back({lfd_.get(), POLLIN, 0});
  for (const auto& [fd, c] : conns_)
    out->push_back({fd, short(c.out.empty() ? POLLIN : POLLOUT), 0});
}

void Metrics::respond(int fd, Conn& c) {
  (void)fd;
  std::string line = c.in.substr(0, c.in.find("\r\n"));
  std::string status = "200 OK", body, type = "text/plain; version=0.0.4; charset=utf-8";
  if (line.rfind("GET /metrics ", 0) == 0 || line.rfind("GET /metrics?", 0) == 0) {
    body = render_();
    scrapes_++;
  } else if (line.rfind("GET ", 0) == 0) {
    status = "404 Not Found";
    body = "this endpoint serves /metrics\n";
    type = "text/plain";
  } else {
    status = "405 Method Not Allowed";
    body = "GET only\n";
    type = "text/plain";
  }
  c.out = "HTTP/1.1 " + status + "\r\nContent-Type: " + type +
          "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" +
          body;
  c.responded = true;
}

void Metrics::handle(const pollfd& p) {
  if (p.fd == lfd_.get()) {
    for (;;) {
      UniqueFd fd(accept4(lfd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
      if (!fd) break;
      if (conns_.size() >= 64) continue;  // closed
      const int key = fd.get();
      conns_[key] = Conn{std::move(fd), {}, {}, false};
    }
    return;
  }
  auto it = conns_.find(p.fd);
  if (it == conns_.end()) return;
  Conn& c = it->second;
  bool done = false;
  if (!c.responded) {
    char buf[4096];
    ssize_t n = recv(p.fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n <= 0) {
      if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) done = true;
    } else {
      c.in.append(buf, size_t(n));
      if (c.in.size() > 16384)
        done = true;
      else if (c.in.find("\r\n\r\n") != std::string::npos)
        respond(p.fd, c);
    }
  }
  if (!done && !c.out.empty()) {
    ssize_t n = send(p.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0)
      c.out.erase(0, size_t(n));
    else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
      done = true;
    if (c.out.empty()) done = true;
  }
  if (done) conns_.erase(it);  // closes
}

}  // namespace mrc::prom
