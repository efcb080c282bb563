// The text of a record as `walcut dump` prints it: one line of fields per
// record, keys and values escaped so any byte string prints safely. The
// std::string functions are for everything else; the Write* functions are
// the dump hot path's allocation-free versions and write the same bytes.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "walfmt/record.h"

namespace walfmt {

struct ClusterClock;  // walfmt/duration.h

// One line: the fields of the record, keys and values shortened to
// `max_bytes` each (0 = no limit). Record times print as "time 1234us", or,
// given the cluster's clock, as clock->Format prints them ("time
// 2026-11-30T12:00:00.001234Z"; walfmt/duration.h).
std::string Describe(const Record& r, size_t max_bytes = 32);
void AppendDescription(std::string& out, const Record& r, size_t max_bytes = 32, const ClusterClock* clock = nullptr);

// Escapes a key or value for printing: printable ASCII as is, other bytes
// (and the backslash) as \xNN; longer than max_bytes (0 = no limit) ends in
// "...(+N)".
std::string Printable(std::string_view bytes, size_t max_bytes);
void AppendPrintable(std::string& out, std::string_view bytes, size_t max_bytes);

// The writes of a TX_DATA as Describe prints them, from ParseTxData's views.
void AppendWritesDescription(std::string& out, const std::vector<WriteView>& writes, size_t max_bytes);

// Raw-buffer writers: each writes the same bytes as the Append* function of
// the same name (for TX_PREPARE/COMMIT/ROLLBACK: as AppendDescription of the
// decoded record) at `out` and returns the end. `out` must have room for the
// matching *Bound() bytes; nothing allocates.
size_t PrintableBound(std::string_view bytes, size_t max_bytes);
char* WritePrintable(char* out, std::string_view bytes, size_t max_bytes);
size_t WritesDescriptionBound(std::span<const WriteView> writes, size_t max_bytes);
char* WriteWritesDescription(char* out, std::span<const WriteView> writes, size_t max_bytes);
size_t TxOutcomeDescriptionBound(const TxOutcomeView& v);
char* WriteTxOutcomeDescription(char* out, RecordType type, const TxOutcomeView& v);

// Digit helpers of the raw writers (dump's fixed columns too).
// The digits of v in decimal (1 for 0), without a division: log10 from the
// bit length (1233 / 4096 is just above log10(2)), then one compare.
inline int DecimalDigits(uint64_t v) {
  static constexpr auto kPow10 = [] {
    std::array<uint64_t, 20> t{};
    uint64_t x = 1;
    for (uint64_t& e : t) {
      e = x;
      x *= 10;  // wraps once, after 10^19, unused
    }
    return t;
  }();
  const uint64_t w = v | 1;  // 0 has one digit, as 1 has
  const int t = ((64 - std::countl_zero(w)) * 1233) >> 12;
  return t + 1 - (w < kPow10[static_cast<size_t>(t)] ? 1 : 0);
}
// The 8 upper-case hex digits of v, most significant first, as the bytes of
// a word in memory order: each nibble spread to a byte, then to its digit.
inline uint64_t Hex8Upper(uint32_t v) {
  uint64_t x = v;
  x = (x | (x << 16)) & 0x0000FFFF0000FFFFull;
  x = (x | (x << 8)) & 0x00FF00FF00FF00FFull;
  x = (x | (x << 4)) & 0x0F0F0F0F0F0F0F0Full;  // nibble k (from the low end) in byte k
  const uint64_t letters = ((x + 0x0606060606060606ull) >> 4) & 0x0101010101010101ull;  // 1 where > 9
  x += 0x3030303030303030ull + letters * 7;  // '0'..'9', or 'A'..'F' ('A' - '9' - 1 = 7)
  if constexpr (std::endian::native == std::endian::little) return __builtin_bswap64(x);
  return x;
}

}  // namespace walfmt
