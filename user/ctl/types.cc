#include "ctl/types.hpp"

#include <cstdio>

namespace mrc::ctl {

const char* to_string(ProfileState s) {
  switch (s) {
    case kProfileInit:
      return "init";
    case kProfileOffline:
      return "offline";
    case kProfileOnline:
      return "online";
  }
  return "unknown";
}

const char* ev_state_name(uint32_t s) {
  switch (s) {
    case kEvGood:
      return "good";
    case kEvAssumedBad:
      return "assumed_bad";
    case kEvDenied:
      return "denied";
    case kEvUnknown:
      return "unknown";
    default:
      return "invalid";
  }
}

const char* ev_mode_name(uint32_t m) {
  switch (m) {
    case kEvModeAuto:
      return "auto";
    case kEvModeExp:
      return "explicit";
    case kEvModeGen:
      return "generated";
    case 0:
      return "none";
    default:
      return "invalid";
  }
}

const char* fmt_mode_name(uint32_t m) {
  switch (m) {
    case kFmtStev:
      return "stev";
    case kFmtSrv6:
      return "srv6";
    case kFmtUdp:
      return "udp";
    case 0:
      return "none";
    default:
      return "invalid";
  }
}

bool Ev::unpopulated() const {
  if (port != 0) return false;
  for (uint8_t b : val)
    if (b) return false;
  return true;
}

Gid gid_from_ip(const codec::IpAddr& ip) {
  Gid g{};
  if (ip.ver == codec::IpVersion::kV6) {
    g = ip.b;
  } else {
    g[10] = g[11] = 0xff;
    for (int i = 0; i < 4; i++) g[12 + i] = ip.b[i];
  }
  return g;
}

codec::IpAddr ip_from_gid(const Gid& g) {
  codec::IpAddr ip;
  bool mapped = g[10] == 0xff && g[11] == 0xff;
  for (int i = 0; i < 10; i++) mapped = mapped && g[i] == 0;
  if (mapped) {
    ip.ver = codec::IpVersion::kV4;
    for (int i = 0; i < 4; i++) ip.b[i] = g[12 + i];
  } else {
    ip.ver = codec::IpVersion::kV6;
    ip.b = g;
  }
  return ip;
}

bool gid_is_zero(const Gid& g) {
  for (uint8_t b : g)
    if (b) return false;
  return true;
}

std::string ev_hex(const codec::EvValue& v, size_t min_bytes) {
  size_t n = v.size();
  while (n > min_bytes && v[n - 1] == 0) n--;
  std::string s;
  char buf[3];
  for (size_t i = 0; i < n; i++) {
    std::snprintf(buf, sizeof(buf), "%02x", v[i]);
    s += buf;
  }
  return s;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool parse_ev_hex(std::string_view s, codec::EvValue* out) {
  if (s.size() >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s.remove_prefix(2);
  if (s.empty() || s.size() % 2 || s.size() > 2 * codec::kEvMaxBytes) return false;
  codec::EvValue v{};
  for (size_t i = 0; i < s.size(); i += 2) {
    int hi = hexval(s[i]), lo = hexval(s[i + 1]);
    if (hi < 0 || lo < 0) return false;
    v[i / 2] = uint8_t(hi << 4 | lo);
  }
  *out = v;
  return true;
}

std::string ev_text(const Ev& e) { return ev_hex(e.val) + "@" + std::to_string(e.port); }

bool parse_ev_text(std::string_view s, Ev* out) {
  size_t at = s.find('@');
  if (at == std::string_view::npos) return false;
  Ev e;
  if (!parse_ev_hex(s.substr(0, at), &e.val)) return false;
  std::string_view p = s.substr(at + 1);
  if (p.empty() || p.size() > 3) return false;
  unsigned port = 0;
  for (char c : p) {
    if (c < '0' || c > '9') return false;
    port = port * 10 + unsigned(c - '0');
  }
  if (port > 255) return false;
  e.port = uint8_t(port);
  *out = e;
  return true;
}

}  // namespace mrc::ctl
