// The checksums of a record's frame, inline: what the reader's fast path and
// the read-ahead's chain check compute for every record. Internal to walfmt.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "walfmt/bytes.h"
#include "walfmt/crc32c.h"
#include "walfmt/record.h"
#include "walfmt/segment.h"

namespace walfmt::detail {

// Masked CRC32C of bytes 4..15 of a record header (ComputeRecordHeaderCrc),
// inline: two crc32 instructions where the CPU has them.
template <bool kHw>
inline uint32_t HeaderCrc(const uint8_t* p) {
#if defined(__x86_64__)
  if constexpr (kHw) {
    uint64_t a;
    uint32_t b;
    std::memcpy(&a, p + 4, 8);
    std::memcpy(&b, p + 12, 4);
    uint64_t c = 0xFFFFFFFFu;
    asm("crc32q %1, %0" : "+r"(c) : "rm"(a));
    auto c32 = static_cast<uint32_t>(c);
    asm("crc32l %1, %0" : "+r"(c32) : "rm"(b));
    return MaskCrc(~c32);
  }
#endif
  return ComputeRecordHeaderCrc(p);
}

// CRC32C of a record's payload, inline where the CPU has the crc32
// instruction: payloads are mostly a few dozen bytes, for which the call to
// crc32c::Value costs about as much as the bytes.
template <bool kHw>
inline uint32_t PayloadCrc(const uint8_t* p, size_t n) {
#if defined(__x86_64__)
  if constexpr (kHw) {
    uint64_t c = 0xFFFFFFFFu;
    const uint8_t* const pairs_end = p + (n & ~size_t{15});
    for (; p != pairs_end; p += 16) {
      uint64_t w0, w1;
      std::memcpy(&w0, p, 8);
      std::memcpy(&w1, p + 8, 8);
      asm("crc32q %1, %0" : "+r"(c) : "rm"(w0));
      asm("crc32q %1, %0" : "+r"(c) : "rm"(w1));
    }
    if (n & 8) {
      uint64_t w;
      std::memcpy(&w, p, 8);
      asm("crc32q %1, %0" : "+r"(c) : "rm"(w));
      p += 8;
    }
    n &= 7;
    auto c32 = static_cast<uint32_t>(c);
    if (n >= 4) {
      uint32_t w;
      std::memcpy(&w, p, 4);
      asm("crc32l %1, %0" : "+r"(c32) : "rm"(w));
      p += 4;
      n -= 4;
    }
    if (n >= 2) {
      uint16_t w;
      std::memcpy(&w, p, 2);
      asm("crc32w %1, %0" : "+r"(c32) : "rm"(w));
      p += 2;
      n -= 2;
    }
    if (n > 0) asm("crc32b %1, %0" : "+r"(c32) : "rm"(*p));
    return ~c32;
  }
#endif
  return crc32c::Value(p, n);
}

}  // namespace walfmt::detail
