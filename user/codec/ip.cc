#include "codec/ip.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cerrno>

namespace mrc::codec {

Result<IpAddr> parse_ip(const std::string& s) {
  IpAddr a;
  if (inet_pton(AF_INET, s.c_str(), a.b.data()) == 1) {
    a.ver = IpVersion::kV4;
    return a;
  }
  if (inet_pton(AF_INET6, s.c_str(), a.b.data()) == 1) {
    a.ver = IpVersion::kV6;
    return a;
  }
  return make_error(EINVAL, "'" + s + "' is not an IPv4 or IPv6 address");
}

std::string to_string(const IpAddr& a) {
  char s[INET6_ADDRSTRLEN] = {};
  inet_ntop(a.ver == IpVersion::kV4 ? AF_INET : AF_INET6, a.b.data(), s, sizeof s);
  return s;
}

}  // namespace mrc::codec
