// Addresses of the two-host test world (harness.hpp, the Engine::rx() fuzz
// target): host h's port on plane p is 198.18.p.(h+1) or fd00::p:0:(h+1).
// No gtest here, so the fuzz target can include it.
#pragma once

#include "codec/packet.hpp"

namespace mrc::testing {

inline codec::IpAddr host_ip(int host, int plane, codec::IpVersion v) {
  codec::IpAddr a;
  a.ver = v;
  if (v == codec::IpVersion::kV4) {
    a.b[0] = 198, a.b[1] = 18, a.b[2] = uint8_t(plane), a.b[3] = uint8_t(host + 1);
  } else {
    a.b[0] = 0xfd, a.b[13] = uint8_t(plane), a.b[15] = uint8_t(host + 1);
  }
  return a;
}
inline codec::Mac host_mac(int host, int plane) {
  return {0x02, 0, 0, 0, uint8_t(plane), uint8_t(host + 1)};
}

}  // namespace mrc::testing
