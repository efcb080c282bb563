// The checksums of a record's frame, inline: what the reader's fast path and
// the read-ahead's chain check compute for every record. Internal to walfmt.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "walfmt/bytes.h"
#include "walfmt/crc32c.h"
#include "walfmt/crc32c_inline.h"
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
// instruction: payloads are mostly a few dozen to a few hundred bytes, for
// which the call to crc32c::Value costs about as much as the bytes, and one
// chain without length-dependent branches (Crc32cRegister) lets the CPU run
// ahead into the next record's. Longer payloads go to crc32c::Value, whose
// three chains then win. The bound is above crc32c::Value's own (256): on
// walgen's records (a seventh of the payloads 256..760 bytes) one inline
// chain up to 512 bytes checked a segment in 13.6 ns a record, against
// 15.0 with the bound at 256 and 17.7 before any of this.
inline constexpr size_t kInlinePayloadCrcMax = 512;
template <bool kHw>
inline uint32_t PayloadCrc(const uint8_t* p, size_t n) {
#if defined(__x86_64__)
  if constexpr (kHw) {
    if (n >= 8 && n < kInlinePayloadCrcMax) return ~Crc32cRegister(0xFFFFFFFFu, p, n);
    if (n < 8) {
      uint32_t c = 0xFFFFFFFFu;
      if (n >= 4) {
        uint32_t w;
        std::memcpy(&w, p, 4);
        asm("crc32l %1, %0" : "+r"(c) : "rm"(w));
        p += 4;
        n -= 4;
      }
      if (n >= 2) {
        uint16_t w;
        std::memcpy(&w, p, 2);
        asm("crc32w %1, %0" : "+r"(c) : "rm"(w));
        p += 2;
        n -= 2;
      }
      if (n > 0) asm("crc32b %1, %0" : "+r"(c) : "rm"(*p));
      return ~c;
    }
  }
#endif
  return crc32c::Value(p, n);
}

}  // namespace walfmt::detail
