// ChaCha20 (RFC 8439's block function, used as a keystream generator) and
// a 16-bit Feistel permutation for unpredictable identifiers (ids.hpp).
#include "core/ids.hpp"

#include <sys/random.h>

#include <cerrno>
#include <cstring>

#include "mrc/uapi/wire.h"

namespace mrc::core {
namespace {

inline uint32_t rotl32(uint32_t x, int k) { return (x << k) | (x >> (32 - k)); }

inline void quarter(uint32_t& a, uint32_t& b, uint32_t& c, uint32_t& d) {
  a += b, d ^= a, d = rotl32(d, 16);
  c += d, b ^= c, b = rotl32(b, 12);
  a += b, d ^= a, d = rotl32(d, 8);
  c += d, b ^= c, b = rotl32(b, 7);
}

// The Feistel round function: any function of (half, round key) gives a
// permutation; this one mixes every bit of both.
inline uint8_t feistel_f(uint8_t half, uint8_t k) {
  uint32_t v = uint32_t(half ^ k) * 0x9e3779b1u;
  return uint8_t(v >> 24 ^ v >> 13);
}

}  // namespace

void chacha20_block(const uint32_t key[8], uint32_t counter, const uint32_t nonce[3],
                    uint32_t out[16]) {
  uint32_t s[16] = {0x61707865, 0x3320646e, 0x79622d32, 0x6b206574};  // "expand 32-byte k"
  for (int i = 0; i < 8; i++) s[4 + i] = key[i];
  s[12] = counter;
  for (int i = 0; i < 3; i++) s[13 + i] = nonce[i];
  uint32_t x[16];
  std::memcpy(x, s, sizeof x);
  for (int r = 0; r < 10; r++) {
    quarter(x[0], x[4], x[8], x[12]);
    quarter(x[1], x[5], x[9], x[13]);
    quarter(x[2], x[6], x[10], x[14]);
    quarter(x[3], x[7], x[11], x[15]);
    quarter(x[0], x[5], x[10], x[15]);
    quarter(x[1], x[6], x[11], x[12]);
    quarter(x[2], x[7], x[8], x[13]);
    quarter(x[3], x[4], x[9], x[14]);
  }
  for (int i = 0; i < 16; i++) out[i] = x[i] + s[i];
}

IdGen::IdGen(const IdKey& key) {
  for (int i = 0; i < 8; i++)
    key_[i] = uint32_t(key[4 * i]) | uint32_t(key[4 * i + 1]) << 8 |
              uint32_t(key[4 * i + 2]) << 16 | uint32_t(key[4 * i + 3]) << 24;
  const uint64_t rk = next();
  for (int i = 0; i < 6; i++) round_keys_[i] = uint8_t(rk >> (8 * i));
}

IdKey IdGen::os_key(const char** error) {
  IdKey k{};
  size_t got = 0;
  while (got < k.size()) {
    ssize_t n = getrandom(k.data() + got, k.size() - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (error) *error = "getrandom failed: identifiers are not secret";
      return IdKey{};
    }
    got += size_t(n);
  }
  return k;
}

IdKey IdGen::seed_key(uint64_t seed) {
  IdKey k{};
  for (int i = 0; i < 4; i++) {  // splitmix64 words
    seed += 0x9e3779b97f4a7c15ull;
    uint64_t z = seed;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    for (int b = 0; b < 8; b++) k[size_t(8 * i + b)] = uint8_t(z >> (8 * b));
  }
  return k;
}

void IdGen::refill() {
  static constexpr uint32_t kNonce[3] = {};  // each key serves one generator
  chacha20_block(key_, counter_++, kNonce, block_);
  used_ = 0;
}

uint64_t IdGen::next() {
  if (used_ + 2 > 16) refill();
  const uint64_t v = uint64_t(block_[used_]) | uint64_t(block_[used_ + 1]) << 32;
  used_ += 2;
  return v;
}

uint32_t IdGen::nonzero(unsigned bits, uint32_t not_this) {
  const uint64_t mask = bits >= 32 ? 0xffffffffull : (uint64_t(1) << bits) - 1;
  for (;;) {
    const uint32_t v = uint32_t(next() & mask);
    if (v && v != not_this) return v;
  }
}

uint16_t IdGen::permute(uint16_t i) const {
  uint8_t l = uint8_t(i >> 8), r = uint8_t(i);
  for (uint8_t k : round_keys_) {
    const uint8_t t = uint8_t(l ^ feistel_f(r, k));
    l = r;
    r = t;
  }
  return uint16_t(l << 8 | r);
}

uint16_t IdGen::unpermute(uint16_t v) const {
  uint8_t l = uint8_t(v >> 8), r = uint8_t(v);
  for (int j = 5; j >= 0; j--) {
    const uint8_t t = uint8_t(r ^ feistel_f(l, round_keys_[j]));
    r = l;
    l = t;
  }
  return uint16_t(l << 8 | r);
}

uint32_t random_psn() {
  uint32_t v = 0;
  while (getrandom(&v, sizeof v, 0) < 0 && errno == EINTR) {
  }
  return v & MRC_PSN_MASK;
}

}  // namespace mrc::core
