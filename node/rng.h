// A small seeded random number generator whose output is fixed by the seed on
// every platform. std::uniform_int_distribution and friends are
// implementation-defined (libstdc++ and libc++ draw differently), so the
// simulation never uses them: a run must give byte-identical WAL files for the
// same seed, wherever it runs.
#pragma once

#include <cstdint>

namespace walcut::node {

// SplitMix64: used to seed and to derive independent streams from one seed.
inline uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// xoshiro256** (Blackman and Vigna): fast, 256 bits of state.
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    uint64_t sm = seed;
    for (auto& w : s_) w = SplitMix64(sm);
  }

  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, n); n == 0 yields 0. Lemire's multiply-shift without the
  // rejection step: the bias is below n / 2^64, irrelevant here, and the draw
  // costs exactly one Next() so the stream stays easy to reason about.
  uint64_t Below(uint64_t n) { return static_cast<uint64_t>((static_cast<unsigned __int128>(Next()) * n) >> 64); }
  // Uniform in [lo, hi] (inclusive); requires lo <= hi.
  uint64_t Range(uint64_t lo, uint64_t hi) { return lo + Below(hi - lo + 1); }
  // True with probability per_million / 1e6.
  bool Chance(uint32_t per_million) { return Below(1000000) < per_million; }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace walcut::node
