// Self-verifying test frames: Ethernet header (ethertype 0x88b5), a small
// header naming the frame (sequence, length, plane, queue, stream), then a
// payload whose every byte is a function of (sequence, offset). verify()
// checks every byte, so truncation, corruption and misdelivery all show.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <string>

namespace mrc::xsktest {

struct FrameHdr {
  uint64_t seq;
  uint32_t len;     // whole frame, Ethernet header included
  uint16_t plane;   // veth pair / port index it was sent on
  uint16_t queue;   // TX queue it was sent on
  uint32_t stream;  // test-chosen id (tells runs apart)
  uint32_t magic;
};
inline constexpr uint32_t kFrameMagic = 0x78736b74;  // "xskt"
inline constexpr uint32_t kEthLen = 14;
inline constexpr uint32_t kMinFrame = kEthLen + sizeof(FrameHdr);

inline uint8_t pattern_byte(uint64_t seq, uint32_t i) {
  const uint64_t x =
      (seq * 0x9e3779b97f4a7c15ull) ^ (static_cast<uint64_t>(i) * 0xbf58476d1ce4e5b9ull);
  return static_cast<uint8_t>((x >> 29) ^ (x >> 7) ^ i);
}

inline void write_frame(uint8_t* p, uint32_t len, const std::array<uint8_t, 6>& dst,
                        const std::array<uint8_t, 6>& src, uint64_t seq, uint16_t plane,
                        uint16_t queue, uint32_t stream) {
  std::memcpy(p, dst.data(), 6);
  std::memcpy(p + 6, src.data(), 6);
  p[12] = 0x88;
  p[13] = 0xb5;
  FrameHdr h{seq, len, plane, queue, stream, kFrameMagic};
  std::memcpy(p + kEthLen, &h, sizeof(h));
  for (uint32_t i = kMinFrame; i < len; ++i) p[i] = pattern_byte(seq, i);
}

// "" when the frame is intact, else what is wrong with it.
inline std::string verify_frame(const uint8_t* p, uint32_t len, const std::array<uint8_t, 6>& dst,
                                const std::array<uint8_t, 6>& src, FrameHdr* out = nullptr) {
  if (len < kMinFrame) return "frame of " + std::to_string(len) + " bytes is too short";
  if (std::memcmp(p, dst.data(), 6) != 0) return "wrong destination MAC";
  if (std::memcmp(p + 6, src.data(), 6) != 0) return "wrong source MAC";
  if (p[12] != 0x88 || p[13] != 0xb5) return "wrong ethertype";
  FrameHdr h;
  std::memcpy(&h, p + kEthLen, sizeof(h));
  if (h.magic != kFrameMagic) return "bad frame magic";
  if (h.len != len)
    return "length " + std::to_string(len) + " but the frame says " + std::to_string(h.len);
  for (uint32_t i = kMinFrame; i < len; ++i)
    if (p[i] != pattern_byte(h.seq, i))
      return "payload byte " + std::to_string(i) + " of frame " + std::to_string(h.seq) +
             " corrupted";
  if (out) *out = h;
  return "";
}

}  // namespace mrc::xsktest
