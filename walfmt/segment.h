// Segment files and record framing. Byte layouts (all integers little-endian;
// FORMAT.md has the full grammar and a worked example):
//
// Segment header, 64 bytes at offset 0 of every segment:
//   0  magic            8  "WALCUTSG"
//   8  version          u16 kFormatVersion
//  10  header_size      u16 64
//  12  node_id          u32
//  16  cluster_id       u64 random per cluster; every segment of a cluster has it
//  24  segment_index    u64 equals the index in the file name
//  32  prev_end_offset  u64 where the predecessor's last record ends (0: no predecessor)
//  40  prev_last_crc    u32 header_crc of the predecessor's last record (0: none)
//  44  flags            u32 bit 0: has a predecessor (index > 0)
//  48  created_time_us  u64 when the writer opened the segment (cluster clock)
//  56  reserved         u32 zero
//  60  header_crc       u32 masked CRC32C of bytes 0..59
//
// Record, immediately after the header or the previous record (no padding;
// a record never spans two segments):
//   0  header_crc   u32 masked CRC32C of bytes 4..15 of this record header
//   4  payload_len  u32 <= kMaxRecordPayload
//   8  type         u16 RecordType, never 0
//  10  flags        u16 kRecordFlag* bits
//  12  payload_crc  u32 masked CRC32C of the payload
//  16  payload      payload_len bytes
//
// The header checksum is checked before payload_len is believed, so a damaged
// length never sends the reader past the damage.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "walfmt/record.h"
#include "walfmt/status.h"

namespace walfmt {

constexpr char kSegmentMagic[8] = {'W', 'A', 'L', 'C', 'U', 'T', 'S', 'G'};
constexpr uint16_t kFormatVersion = 1;
constexpr size_t kSegmentHeaderSize = 64;
constexpr size_t kRecordHeaderSize = 16;
constexpr uint32_t kSegmentFlagHasPredecessor = 0x1;
// The most bytes one segment may hold (header included). The writer never
// rolls later than this; a `.wal.zst` archive that decompresses to more is
// refused after decompressing this much, so a small file of zeros cannot
// cost minutes of CPU (a zstd bomb).
constexpr uint64_t kMaxSegmentBytes = uint64_t{1} << 30;

// LevelDB-style masking: a CRC stored next to data that is itself checksummed
// (the payload CRC inside the header CRC) is rotated and offset, so that a
// CRC of bytes that contain CRCs does not degenerate.
constexpr uint32_t kCrcMaskDelta = 0xA282EAD8u;
inline uint32_t MaskCrc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + kCrcMaskDelta; }
inline uint32_t UnmaskCrc(uint32_t masked) {
  const uint32_t rot = masked - kCrcMaskDelta;
  return (rot >> 17) | (rot << 15);
}

struct SegmentHeader {
  uint16_t version = kFormatVersion;
  uint32_t node_id = 0;
  uint64_t cluster_id = 0;
  uint64_t segment_index = 0;
  uint64_t prev_end_offset = 0;
  uint32_t prev_last_crc = 0;
  uint32_t flags = 0;
  uint64_t created_time_us = 0;

  bool has_predecessor() const { return (flags & kSegmentFlagHasPredecessor) != 0; }
  bool operator==(const SegmentHeader&) const = default;
};

// Writes the 64 header bytes of `h`, header_crc included, to `out`.
void EncodeSegmentHeader(const SegmentHeader& h, uint8_t out[kSegmentHeaderSize]);

// Why a header was rejected, with the expected and the found value.
struct HeaderError {
  std::string what;  // "bad magic", "header checksum mismatch", ...
  std::string expected;
  std::string actual;
  uint64_t offset = 0;  // of the offending field
};
// Decodes and checks magic, version, size and checksum. On failure fills `err`.
bool DecodeSegmentHeader(std::span<const uint8_t> bytes, SegmentHeader& h, HeaderError& err);

// Frames a payload: writes the 16-byte record header for it into `out`.
void EncodeRecordHeader(RecordType type, uint16_t flags, std::span<const uint8_t> payload,
                        uint8_t out[kRecordHeaderSize]);

struct RecordHeader {
  uint32_t header_crc = 0;  // as stored (masked)
  uint32_t payload_len = 0;
  uint16_t type = 0;
  uint16_t flags = 0;
  uint32_t payload_crc = 0;  // as stored (masked)
};
// The fields of the 16 record header bytes at `p`, unchecked: compare
// header_crc with ComputeRecordHeaderCrc(p) before believing payload_len.
inline RecordHeader LoadRecordHeader(const uint8_t* p);
// Masked CRC32C of bytes 4..15 of a record header: what header_crc must be.
uint32_t ComputeRecordHeaderCrc(const uint8_t* p);
// Masked CRC32C of a payload: what payload_crc must be.
uint32_t ComputePayloadCrc(std::span<const uint8_t> payload);

// File names: 16 upper-case hex digits and ".wal", or ".wal.zst" when
// archived, exactly as the writer makes them (SegmentFileName).
// ParseSegmentName accepts that one spelling only: "000000000000000a.wal"
// or a 15-digit name is not a segment name.
std::string SegmentFileName(uint64_t index, bool compressed);
bool ParseSegmentName(std::string_view name, uint64_t& index, bool& compressed);
// A name ending in ".wal" or ".wal.zst": what a reader listing a WAL
// directory reports (never skips silently) when ParseSegmentName refuses it.
// Archiving's "<name>.wal.zst.tmp" does not end so and is ignored.
bool LooksLikeSegmentName(std::string_view name);

}  // namespace walfmt

#include "walfmt/bytes.h"

namespace walfmt {
inline RecordHeader LoadRecordHeader(const uint8_t* p) {
  return RecordHeader{LoadU32(p), LoadU32(p + 4), LoadU16(p + 8), LoadU16(p + 10), LoadU32(p + 12)};
}
}  // namespace walfmt
