#include "lib/exchange.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <type_traits>

#include "lib/neigh.hpp"

namespace mrc {
namespace {

bool wait_fd(int fd, short ev, int timeout_ms) {
  pollfd p{fd, ev, 0};
  return poll(&p, 1, timeout_ms) > 0;
}

}  // namespace

std::string encode(const std::vector<QpEndpoint>& eps) {
  std::ostringstream s;
  for (const auto& e : eps) {
    s << "qp qpn=" << e.qpn << " psn=" << e.psn << " addr=" << e.addr << " len=" << e.len
      << " rkey=" << e.rkey << " wimm_dest=" << e.max_wimm_dest
      << " mpr_dest=" << unsigned(e.mpr_dest) << " mtu=" << e.mtu << " max_mtu=" << e.max_mtu
      << " gids=";
    for (size_t i = 0; i < e.gids.size(); i++) s << (i ? "," : "") << lib::to_string(e.gids[i]);
    s << "\n";
  }
  s << "end\n";
  return s.str();
}

Result<std::vector<QpEndpoint>> decode(const std::string& text) {
  std::vector<QpEndpoint> out;
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    n++;
    if (line == "end") return out;
    std::istringstream ls(line);
    std::string word;
    ls >> word;
    if (word != "qp")
      return make_error(EPROTO, "exchange line " + std::to_string(n) + ": expected 'qp' or 'end'");
    QpEndpoint e;
    while (ls >> word) {
      auto eq = word.find('=');
      if (eq == std::string::npos)
        return make_error(EPROTO, "exchange line " + std::to_string(n) + ": '" + word + "'");
      std::string k = word.substr(0, eq), v = word.substr(eq + 1);
      // Every number is checked against its field: "-5" (which stoul takes
      // as 2^64 - 5) or 300 for an 8-bit field is refused, not truncated.
      auto num = [&](uint64_t max, auto* field) {
        size_t used = 0;
        if (v.empty() || v[0] < '0' || v[0] > '9') throw std::invalid_argument(k);
        const uint64_t x = std::stoull(v, &used);
        if (used != v.size() || x > max) throw std::out_of_range(k);
        *field = static_cast<std::remove_pointer_t<decltype(field)>>(x);
      };
      try {
        if (k == "qpn")
          num(MRC_QPN_MASK, &e.qpn);
        else if (k == "psn")
          num(MRC_PSN_MASK, &e.psn);
        else if (k == "addr")
          num(UINT64_MAX, &e.addr);
        else if (k == "len")
          num(UINT64_MAX, &e.len);
        else if (k == "rkey")
          num(UINT32_MAX, &e.rkey);
        else if (k == "wimm_dest")
          num(UINT16_MAX, &e.max_wimm_dest);
        else if (k == "mpr_dest")
          num(UINT8_MAX, &e.mpr_dest);
        else if (k == "mtu")
          num(UINT32_MAX, &e.mtu);
        else if (k == "max_mtu")
          num(UINT32_MAX, &e.max_mtu);
        else if (k == "gids") {
          std::istringstream gs(v);
          std::string g;
          while (std::getline(gs, g, ',')) {
            auto ip = lib::parse_ip(g);
            if (!ip) return std::move(ip).error().wrap("exchange line " + std::to_string(n));
            e.gids.push_back(*ip);
          }
        }
        // unknown keys are ignored: newer peers may send more
      } catch (const std::exception&) {
        return make_error(EPROTO, "exchange line " + std::to_string(n) + ": bad value for " + k);
      }
    }
    out.push_back(e);
  }
  return make_error(EPROTO, "exchange: the peer closed before 'end'");
}

Result<UniqueFd> tcp_listen(const std::string& bind_addr, uint16_t port) {
  auto ip = lib::parse_ip(bind_addr.empty() ? "0.0.0.0" : bind_addr);
  if (!ip) return std::move(ip).error();
  const bool v6 = ip->ver == codec::IpVersion::kV6;
  UniqueFd fd(socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return errno_error(errno, "tcp_listen: socket");
  int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_storage ss{};
  socklen_t sl;
  if (v6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(port);
    std::memcpy(&a->sin6_addr, ip->b.data(), 16);
    sl = sizeof(*a);
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    a->sin_port = htons(port);
    std::memcpy(&a->sin_addr, ip->b.data(), 4);
    sl = sizeof(*a);
  }
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&ss), sl) < 0 || listen(fd.get(), 16) < 0)
    return errno_error(errno, "tcp_listen " + bind_addr + ":" + std::to_string(port));
  return fd;
}

Result<UniqueFd> tcp_accept(int lfd, int timeout_ms) {
  if (!wait_fd(lfd, POLLIN, timeout_ms)) return make_error(ETIMEDOUT, "tcp_accept: no connection");
  UniqueFd fd(accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC));
  if (!fd) return errno_error(errno, "tcp_accept");
  int one = 1;
  setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

Result<UniqueFd> tcp_connect(const std::string& host, uint16_t port, int timeout_ms) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc) return make_error(EHOSTUNREACH, "tcp_connect " + host + ": " + gai_strerror(rc));
  int last = ECONNREFUSED;
  for (int waited = 0; waited <= timeout_ms; waited += 50) {
    for (addrinfo* a = res; a; a = a->ai_next) {
      UniqueFd fd(socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
      if (!fd) continue;
      if (connect(fd.get(), a->ai_addr, a->ai_addrlen) == 0) {
        freeaddrinfo(res);
        int one = 1;
        setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        return fd;
      }
      last = errno;
    }
    usleep(50 * 1000);  // the server may not listen yet
  }
  freeaddrinfo(res);
  return errno_error(last, "tcp_connect " + host + ":" + std::to_string(port));
}

Status send_line(int fd, const std::string& line) {
  std::string s = line;
  if (s.empty() || s.back() != '\n') s += '\n';
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_error(errno, "send");
    }
    off += size_t(n);
  }
  return {};
}

Result<std::string> recv_line(int fd, int timeout_ms) {
  std::string s;
  char c;
  while (true) {
    if (!wait_fd(fd, POLLIN, timeout_ms))
      return make_error(ETIMEDOUT, "recv_line: nothing from the peer");
    ssize_t n = recv(fd, &c, 1, 0);
    if (n == 0) return make_error(ECONNRESET, "recv_line: the peer closed the connection");
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_error(errno, "recv_line");
    }
    if (c == '\n') return s;
    s += c;
    if (s.size() > 1 << 20) return make_error(EPROTO, "recv_line: line too long");
  }
}

Result<std::vector<QpEndpoint>> exchange_endpoints(int fd, const std::vector<QpEndpoint>& ours,
                                                   int timeout_ms) {
  MRC_TRY(send_line(fd, encode(ours)));
  std::string text;
  while (true) {
    auto l = recv_line(fd, timeout_ms);
    if (!l) return std::move(l).error().wrap("exchange");
    text += *l + "\n";
    if (*l == "end") break;
  }
  return decode(text);
}

QpEndpoint describe(const Context& ctx, const Qp& qp, uint32_t psn, const ConnectOptions& o,
                    uint16_t max_wimm_dest, uint8_t mpr_dest) {
  QpEndpoint e;
  e.qpn = qp.qpn();
  e.psn = psn;
  for (const auto& p : ctx.ports()) {
    codec::IpAddr none;
    auto g = ctx.gid(p.port, o.ip);
    e.gids.push_back(g ? *g : none);
  }
  e.max_wimm_dest = max_wimm_dest;
  e.mpr_dest = mpr_dest;
  // An error (a plane too small, a forced MTU too large) is connect_qp's to
  // report: the peer learns nothing of it here.
  // max_mtu: what our planes carry; mtu: what we want, by default the most
  // our planes and this device carry.
  auto planes = ctx.plane_mtu_limit(o.ip);
  auto limit = ctx.path_mtu_limit(o.ip);
  e.max_mtu = planes ? *planes : 0;
  e.mtu = o.mtu ? o.mtu : limit ? *limit : 0;
  return e;
}

Status connect_qp(Context& ctx, Qp& qp, uint32_t our_psn, const QpEndpoint& peer,
                  const ConnectOptions& o) {
  QpAttr a;
  a.qp_state = QpState::kInit;
  a.qp_access_flags = o.access;
  a.ev_profile_id = o.ev_profile;
  a.cc_profile_id = o.cc_profile;
  MRC_TRY(qp.modify(a, core::kQpState | core::kQpPkeyIndex | core::kQpAccessFlags,
                    core::kMrcHint | core::kMrcEvProfileId | core::kMrcCcProfileId));
  a.qp_state = QpState::kRtr;
  // Our planes first (a forced MTU they cannot carry fails here), then the
  // peer's: what they carry and what the peer wants.
  auto mtu = ctx.path_mtu_limit(o.ip, o.mtu);
  if (!mtu) return std::move(mtu).error().wrap("connect_qp");
  if (o.mtu && peer.max_mtu && o.mtu > peer.max_mtu)
    return make_error(EMSGSIZE, "connect_qp: path MTU " + std::to_string(o.mtu) +
                                    " exceeds what every plane of the peer carries (" +
                                    std::to_string(peer.max_mtu) + ")");
  a.path_mtu = *mtu;
  if (peer.max_mtu) a.path_mtu = std::min(a.path_mtu, peer.max_mtu);
  if (peer.mtu) a.path_mtu = std::min(a.path_mtu, peer.mtu);
  a.path_mtu &= ~63u;  // a path MTU is a multiple of 64; the peer's figures need not be
  if (a.path_mtu < 256)
    return make_error(EMSGSIZE, "connect_qp: the peer carries at most " +
                                    std::to_string(a.path_mtu) +
                                    " payload bytes per packet (MRC needs 256)");
  a.dest_qp_num = peer.qpn;
  a.rq_psn = peer.psn;
  a.max_wimm_dest = o.max_wimm;
  a.mpr_dest = o.mpr;
  a.cap_flags = o.cap_flags;
  a.peer_max_wimm_dest = peer.max_wimm_dest;
  const auto ports = ctx.ports();
  bool any = false;
  for (size_t i = 0; i < ports.size() && i < peer.gids.size(); i++) {
    const Gid& g = peer.gids[i];
    if (std::all_of(g.b.begin(), g.b.end(), [](uint8_t b) { return b == 0; })) continue;
    if (g.ver != o.ip) continue;
    auto pa = ctx.resolve(ports[i].port, g);
    if (!pa) return std::move(pa).error();
    a.av[ports[i].port] = *pa;
    any = true;
  }
  if (!any)
    return make_error(EHOSTUNREACH, "connect_qp: the peer has no address on any of our planes");
  MRC_TRY(qp.modify(
      a, core::kQpState | core::kQpAv | core::kQpPathMtu | core::kQpDestQpn | core::kQpRqPsn,
      core::kMrcMaxWimmDest | core::kMrcMprDest | core::kMrcCap));
  a.qp_state = QpState::kRts;
  a.sq_psn = our_psn;
  a.max_wimm = o.max_wimm;
  a.mpr = std::min(o.mpr, peer.mpr_dest ? peer.mpr_dest : o.mpr);
  a.timeout = o.timeout;
  a.retry_linear = o.retry_linear;
  a.retry_exp = o.retry_exp;
  return qp.modify(a, core::kQpState | core::kQpSqPsn,
                   core::kMrcMaxWimm | core::kMrcMpr | core::kMrcRetryCnt | core::kMrcTimeout);
}

}  // namespace mrc
