#include "srv6.hpp"

#include <arpa/inet.h>

#include <cstdio>

namespace mrc::codec {

uint32_t srv6_entropy(const Srv6Sid& sid) {
  // FNV-1a, then a 32-bit finaliser: containers differing in one uSID bit
  // differ in about half the entropy bits.
  uint32_t h = 2166136261u;
  for (uint8_t b : sid) h = (h ^ b) * 16777619u;
  h ^= h >> 16;
  h *= 0x7feb352du;
  h ^= h >> 15;
  h *= 0x846ca68bu;
  h ^= h >> 16;
  if ((h & 0xffff) < 1024) h |= 0x8000;  // stay clear of well-known ports
  return h;
}

bool srv6_sid_from_value(std::span<const uint8_t> value, Srv6Sid& sid) {
  sid = {};
  for (size_t i = 0; i < value.size(); i++) {
    if (i < sid.size())
      sid[i] = value[i];
    else if (value[i])
      return false;
  }
  return true;
}

std::vector<uint16_t> srv6_hops(const Srv6Sid& sid) {
  std::vector<uint16_t> v;
  for (size_t i = kSrv6BlockBits / 8; i + 1 < sid.size(); i += kSrv6UsidBits / 8) {
    const uint16_t u = uint16_t(sid[i] << 8 | sid[i + 1]);
    if (!u) break;
    v.push_back(u);
  }
  return v;
}

Srv6Sid srv6_final(const Srv6Sid& sid) {
  const auto hops = srv6_hops(sid);
  Srv6Sid f{};
  for (size_t i = 0; i < kSrv6BlockBits / 8; i++) f[i] = sid[i];
  if (!hops.empty()) {
    f[kSrv6BlockBits / 8] = uint8_t(hops.back() >> 8);
    f[kSrv6BlockBits / 8 + 1] = uint8_t(hops.back());
  }
  return f;
}

std::string srv6_to_string(const Srv6Sid& sid) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (!inet_ntop(AF_INET6, sid.data(), buf, sizeof(buf))) return "?";
  return buf;
}

std::string srv6_hops_string(const Srv6Sid& sid) {
  std::string s;
  for (uint16_t u : srv6_hops(sid)) {
    char b[8];
    std::snprintf(b, sizeof(b), "%x", unsigned(u));
    if (!s.empty()) s += " > ";
    s += b;
  }
  return s;
}

}  // namespace mrc::codec
