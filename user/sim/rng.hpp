// Fixed pseudo-random generators for the simulator: splitmix64 to seed,
// xoshiro256** to draw. Their output is defined bit for bit (unlike the
// std:: distributions), so a seed replays identically with any compiler.
#pragma once

#include <cstdint>

#include "core/rng.hpp"

namespace mrc::sim {

// A 64-bit finaliser (splitmix64's), used as a hash mixer.
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The engine's generator (core::Rng: the same splitmix64 seeding and
// xoshiro256** steps), with the draws the simulator needs.
class Rng : public core::Rng {
 public:
  explicit Rng(uint64_t seed = 1) : core::Rng(seed) {}

  // Uniform in [0, 1) with 53 bits.
  double uniform() { return unit(); }
  // True with probability p (p <= 0: never, p >= 1: always; no draw then).
  bool chance(double p) {
    if (p <= 0) return false;
    if (p >= 1) return true;
    return uniform() < p;
  }
  // Uniform in [0, n) (n > 0), by multiply-high over 64 bits (core::Rng's
  // below() works in 32).
  uint64_t below(uint64_t n) { return uint64_t((unsigned __int128)next() * n >> 64); }
  // Uniform in [lo, hi] inclusive.
  uint64_t range(uint64_t lo, uint64_t hi) {
    return hi <= lo ? lo : lo + (hi - lo == ~0ull ? next() : below(hi - lo + 1));
  }
};

}  // namespace mrc::sim
