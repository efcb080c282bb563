// CRC32C three ways, chosen once at start-up:
//
// - Three streams (SSE4.2 crc32 and PCLMULQDQ), for inputs of kThreeMin bytes
//   or more. The crc32 instruction takes 3 cycles before its result can feed
//   the next one but can start one a cycle, so a single chain runs at a
//   third of what the core can do. The input is cut into three consecutive
//   blocks of equal length whose CRCs run as three independent chains,
//   interleaved (the first from the running value, the other two from 0).
//   CRC is linear over GF(2), so the whole is the first block's value moved
//   past the other two blocks, XOR the second's moved past the third, XOR the
//   third's. Moving a value v past 8j zero bytes multiplies it by x^(64j)
//   mod P: one carry-less multiply by the precomputed x^(64j-33) mod P (a
//   63-bit product) and one crc32 of that product (which multiplies by x^32
//   and reduces mod P; the missing x^1 comes from the product's bit order).
//   Both products are XORed first, so a combine costs two multiplies, one
//   crc32 and two XORs, about 12 cycles of latency. Long inputs go in rounds
//   of 3 x kBlock bytes (the combine is about 1% of a round); what is left,
//   if kThreeMin bytes or more, is one round of three equal blocks of whole
//   8-byte words with constants from the same table, and the last 0..23
//   bytes go through one chain. Our own rather than ISA-L's: it is about 60
//   lines, needs no new dependency for a library that is installed, and the
//   bytes it reads are the same as before, so every value is unchanged.
// - One stream of the crc32 instruction (SSE4.2 without PCLMULQDQ, and
//   inputs shorter than kThreeMin, where the combine would cost more than
//   it saves: record headers and small payloads). From 8 bytes on it has no
//   branch on the length but the loop's (crc32c_inline.h, which the reader's
//   inline record checksums share).
// - Slicing-by-8 tables, portable, for other CPUs.
#include "walfmt/crc32c.h"

#include "walfmt/crc32c_inline.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace walfmt::crc32c {
namespace {

constexpr uint32_t kPoly = 0x82F63B78u;  // reflected Castagnoli polynomial

struct Tables {
  std::array<std::array<uint32_t, 256>, 8> t{};
  constexpr Tables() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i) {
      for (size_t s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFF];
    }
  }
};
constexpr Tables kTables;

#if defined(__x86_64__)
// Bytes per stream in a round of the long loop, and the shortest input that
// goes three ways. Below 256 bytes one chain was as fast or faster on this
// machine kind in a loop over records of mixed lengths, where the CPU
// overlaps one record's chain with the next one's and every wrongly guessed
// branch stops that (the figures are in the commit that added this).
constexpr size_t kBlock = 4096;
constexpr size_t kThreeMin = 256;

// kShift[j] = x^(64j - 33) mod P, reflected (bit 31 is x^0), j = 1..2*kBlock/8:
// the constant that moves a value past 8j bytes.
struct ShiftTable {
  std::array<uint32_t, 2 * kBlock / 8 + 1> k{};
  constexpr ShiftTable() {
    auto times_x = [](uint32_t r) { return (r & 1) ? (r >> 1) ^ kPoly : r >> 1; };
    uint32_t r = 0x80000000u;                     // x^0
    for (int i = 0; i < 31; ++i) r = times_x(r);  // x^31 = x^(64 - 33)
    k[1] = r;
    for (size_t j = 2; j < k.size(); ++j) {
      for (int i = 0; i < 64; ++i) r = times_x(r);
      k[j] = r;
    }
  }
};
constexpr ShiftTable kShift;

__attribute__((target("sse4.2"), always_inline)) inline uint64_t Load64(const uint8_t* p) {
  uint64_t w;
  std::memcpy(&w, p, 8);
  return w;
}

// One chain over all n bytes; c is the register (not inverted).
__attribute__((target("sse4.2"), always_inline)) inline uint32_t OneStream(uint32_t c, const uint8_t* p, size_t n) {
  if (n >= 8) return detail::Crc32cRegister(c, p, n);
  if (n >= 4) {
    uint32_t w;
    std::memcpy(&w, p, 4);
    c = _mm_crc32_u32(c, w);
    p += 4;
    n -= 4;
  }
  if (n >= 2) {
    uint16_t w;
    std::memcpy(&w, p, 2);
    c = _mm_crc32_u16(c, w);
    p += 2;
    n -= 2;
  }
  if (n > 0) c = _mm_crc32_u8(c, *p);
  return c;
}

// The register after 24 * words bytes from p, starting from c: three chains
// of `words` 8-byte words each, then combined (see the top of the file).
__attribute__((target("sse4.2,pclmul"))) inline uint64_t ThreeStreams(uint64_t c, const uint8_t* p, size_t words) {
  uint64_t a = c, b = 0, d = 0;
  const uint8_t* pb = p + 8 * words;
  const uint8_t* pd = pb + 8 * words;
  for (size_t i = 0; i < 8 * words; i += 8) {
    a = _mm_crc32_u64(a, Load64(p + i));
    b = _mm_crc32_u64(b, Load64(pb + i));
    d = _mm_crc32_u64(d, Load64(pd + i));
  }
  const __m128i ka = _mm_cvtsi32_si128(static_cast<int>(kShift.k[2 * words]));
  const __m128i kb = _mm_cvtsi32_si128(static_cast<int>(kShift.k[words]));
  const __m128i va = _mm_clmulepi64_si128(_mm_cvtsi64_si128(static_cast<long long>(a)), ka, 0);
  const __m128i vb = _mm_clmulepi64_si128(_mm_cvtsi64_si128(static_cast<long long>(b)), kb, 0);
  const auto v = static_cast<uint64_t>(_mm_cvtsi128_si64(_mm_xor_si128(va, vb)));
  return _mm_crc32_u64(0, v) ^ d;
}

__attribute__((target("sse4.2,pclmul"))) uint32_t ExtendClmul(uint32_t crc, const uint8_t* p, size_t n) {
  uint32_t c = ~crc;
  if (n >= kThreeMin) {
    while (n >= 3 * kBlock) {
      c = static_cast<uint32_t>(ThreeStreams(c, p, kBlock / 8));
      p += 3 * kBlock;
      n -= 3 * kBlock;
    }
    if (n >= kThreeMin) {
      const size_t words = n / 24;
      c = static_cast<uint32_t>(ThreeStreams(c, p, words));
      p += 24 * words;
      n -= 24 * words;
    }
  }
  return ~OneStream(c, p, n);
}

__attribute__((target("sse4.2"))) uint32_t ExtendHw(uint32_t crc, const uint8_t* p, size_t n) {
  return ~OneStream(~crc, p, n);
}

struct Cpu {
  bool sse42 = false;
  bool clmul = false;
};
Cpu DetectCpu() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return {};
  return {(c & bit_SSE4_2) != 0, (c & bit_SSE4_2) != 0 && (c & bit_PCLMUL) != 0};
}
const Cpu kCpu = DetectCpu();
const bool kHw = kCpu.sse42;
#else
const bool kHw = false;
#endif

}  // namespace

uint32_t ExtendPortable(uint32_t crc, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
  while (n >= 8) {
    uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    lo ^= c;
    c = kTables.t[7][lo & 0xFF] ^ kTables.t[6][(lo >> 8) & 0xFF] ^ kTables.t[5][(lo >> 16) & 0xFF] ^
        kTables.t[4][lo >> 24] ^ kTables.t[3][hi & 0xFF] ^ kTables.t[2][(hi >> 8) & 0xFF] ^
        kTables.t[1][(hi >> 16) & 0xFF] ^ kTables.t[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n > 0) {
    c = kTables.t[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    --n;
  }
  return ~c;
}

uint32_t Extend(uint32_t crc, const void* data, size_t n) {
#if defined(__x86_64__)
  if (kCpu.clmul) return ExtendClmul(crc, static_cast<const uint8_t*>(data), n);
  if (kHw) return ExtendHw(crc, static_cast<const uint8_t*>(data), n);
#endif
  return ExtendPortable(crc, data, n);
}

bool HardwareAccelerated() { return kHw; }

}  // namespace walfmt::crc32c
