#include "icrc.hpp"

#include <isa-l/crc.h>

#include <cstring>

namespace mrc::codec {

uint32_t crc32(uint32_t crc, const uint8_t* data, size_t len) {
  return crc32_gzip_refl(crc, data, len);
}

uint32_t icrc_compute(const uint8_t* l3, const uint8_t* end) {
  // Masked copy of IP + UDP + BTH, at most 40 + 8 + 12 bytes, plus 8 ones.
  uint8_t hdr[8 + 40 + 8 + 12];
  std::memset(hdr, 0xff, 8);
  size_t ip_len = (l3[0] >> 4) == 4 ? 20 : 40;
  size_t n = ip_len + 8 + 12;
  std::memcpy(hdr + 8, l3, n);
  uint8_t* ip = hdr + 8;
  if (ip_len == 20) {
    ip[1] = 0xff;            // TOS (DSCP + ECN)
    ip[8] = 0xff;            // TTL
    ip[10] = ip[11] = 0xff;  // header checksum
  } else {
    ip[0] |= 0x0f;                 // traffic class high nibble
    ip[1] = ip[2] = ip[3] = 0xff;  // traffic class low nibble + flow label
    ip[7] = 0xff;                  // hop limit
  }
  uint8_t* udp = ip + ip_len;
  udp[6] = udp[7] = 0xff;  // UDP checksum
  uint8_t* bth = udp + 8;
  bth[4] = 0xff;  // resv8a (FECN/BECN)
  uint32_t crc = crc32(0, hdr, 8 + n);
  const uint8_t* rest = l3 + n;
  return crc32(crc, rest, size_t(end - rest));
}

}  // namespace mrc::codec
