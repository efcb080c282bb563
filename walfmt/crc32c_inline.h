// One chain of the crc32 instruction over 8 bytes or more, with no branch
// that depends on the length but the loop's: what crc32c::Extend and the
// reader's record checksums (walfmt/record_crc.h) run on short inputs. Only
// on CPUs with SSE4.2 (crc32c::HardwareAccelerated()). Internal to walfmt.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace walfmt::detail {

#if defined(__x86_64__)
// The CRC32C register (not inverted) after the n >= 8 bytes at p, from
// register `reg`. Whole words first; then the r = n % 8 bytes left, in one
// crc32 of a word that holds them in its top r bytes and zeros below (read
// as the last 8 bytes of the input, which n >= 8 allows): a register of 0
// stays 0 over zero bytes, so that crc32 starts from 0, with the register's
// first r bytes XORed into the tail bytes as the instruction would, and the
// register's other bytes, shifted down by r bytes, XORed into the result
// (CRC is linear). Records have lengths all over the place; the 4-, 2- and
// 1-byte steps of a tail would each be a branch the CPU guesses wrong half
// the time, and a wrong guess also stops it from starting the next record.
inline uint32_t Crc32cRegister(uint32_t reg, const uint8_t* p, size_t n) {
  uint64_t c = reg;
  uint64_t w;
  const uint8_t* const words_end = p + (n & ~size_t{7});
  for (; p != words_end; p += 8) {
    std::memcpy(&w, p, 8);
    asm("crc32q %1, %0" : "+r"(c) : "rm"(w));
  }
  const size_t r = n & 7;
  std::memcpy(&w, words_end + r - 8, 8);  // the last 8 bytes: n >= 8
  // The r tail bytes at the top of a word, zeros below them, the register's
  // first r bytes XORed into them; 0 when r == 0 (shifts of 64 - 8r bits
  // done in two steps: a shift by 64 is undefined).
  const uint64_t tail = ((((w >> (63 - 8 * r)) >> 1) ^ c) << (63 - 8 * r)) << 1;
  uint64_t t = 0;
  asm("crc32q %1, %0" : "+r"(t) : "rm"(tail));
  return static_cast<uint32_t>(t ^ (c >> (8 * r)));
}
#endif

}  // namespace walfmt::detail
