// FNV-1a 64 (offset basis 0xCBF29CE484222325, prime 0x100000001B3): the
// fingerprint of a snapshot's entries (FORMAT.md, "Snapshot files"). Long
// inputs go through a bit-sliced form that computes the same value several
// times faster when the CPU has AVX-512 with VBMI, VNNI and GFNI; the choice
// is made once at start-up.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace walfmt::fnv1a {

inline constexpr uint64_t kOffset = 0xCBF29CE484222325ull;
inline constexpr uint64_t kPrime = 0x100000001B3ull;

// Extends `h` (the value for the bytes before `data`; kOffset for none) over
// `n` more bytes.
uint64_t Extend(uint64_t h, const void* data, size_t n);
inline uint64_t Value(std::string_view s) { return Extend(kOffset, s.data(), s.size()); }

// A byte at a time, as the definition reads: what tests compare Extend with.
uint64_t ExtendPortable(uint64_t h, const void* data, size_t n);

// True when Extend takes the bit-sliced path for long inputs.
bool Accelerated();

}  // namespace walfmt::fnv1a
