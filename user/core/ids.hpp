// Identifiers an attacker must not predict (Documentation/security.md):
// memory keys, QP numbers, initial PSNs. Each key and QPN still holds the
// index of its table slot, so lookups stay O(1), but the index is permuted
// by a keyed 16-bit Feistel network and the other bits come from a ChaCha20
// keystream: neither the first key of a process nor the next key after a
// known one can be guessed.
//
// The 256-bit secret comes from getrandom(2) (IdGen::os_key), or, for
// reproducible simulations and tests, from a seed (IdGen::seed_key).
#pragma once

#include <array>
#include <cstdint>

namespace mrc::core {

using IdKey = std::array<uint8_t, 32>;

class IdGen {
 public:
  explicit IdGen(const IdKey& key);

  // 256 bits from the kernel's CSPRNG; the error text is set and the key is
  // left zero only if getrandom(2) fails (no such kernel here).
  static IdKey os_key(const char** error = nullptr);
  // A key derived from a seed: the same seed gives the same identifiers.
  static IdKey seed_key(uint64_t seed);

  // 64 bits of the ChaCha20 keystream.
  uint64_t next();
  // A value in [1, 2^bits) that differs from `not_this` (bits 1..32).
  uint32_t nonzero(unsigned bits, uint32_t not_this = 0);

  // A keyed permutation of [0, 65536) and its inverse.
  uint16_t permute(uint16_t i) const;
  uint16_t unpermute(uint16_t v) const;

 private:
  void refill();
  uint32_t key_[8];
  uint32_t counter_ = 0;
  uint32_t block_[16];
  unsigned used_ = 16;  // 32-bit words of block_ consumed
  uint8_t round_keys_[6];
};

// RFC 8439's ChaCha20 block function (exposed for its test vector).
void chacha20_block(const uint32_t key[8], uint32_t counter, const uint32_t nonce[3],
                    uint32_t out[16]);

// A random initial PSN (24 bits) from the kernel's CSPRNG, for QPs whose
// application does not choose one.
uint32_t random_psn();

}  // namespace mrc::core
