// CRC32C (Castagnoli), as used by iSCSI, ext4 and LevelDB. Hardware (SSE4.2
// crc32 instruction) when the CPU has it, a slicing-by-8 table otherwise; the
// choice is made once at start-up.
#pragma once

#include <cstddef>
#include <cstdint>

namespace walfmt::crc32c {

// Extends `crc` (the value returned for the bytes before `data`) over `n` more
// bytes. Value(data, n) == Extend(0, data, n).
uint32_t Extend(uint32_t crc, const void* data, size_t n);
inline uint32_t Value(const void* data, size_t n) { return Extend(0, data, n); }

// The portable implementation, exposed so tests can compare it with hardware.
uint32_t ExtendPortable(uint32_t crc, const void* data, size_t n);

// True when Extend uses the crc32 instruction.
bool HardwareAccelerated();

}  // namespace walfmt::crc32c
