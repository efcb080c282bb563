#include "walfmt/segment.h"

#include <cstring>

#include <fmt/format.h>

#include "walfmt/bytes.h"
#include "walfmt/crc32c.h"

namespace walfmt {

void EncodeSegmentHeader(const SegmentHeader& h, uint8_t out[kSegmentHeaderSize]) {
  std::string b;
  b.reserve(kSegmentHeaderSize);
  b.append(kSegmentMagic, sizeof(kSegmentMagic));
  PutU16(b, h.version);
  PutU16(b, static_cast<uint16_t>(kSegmentHeaderSize));
  PutU32(b, h.node_id);
  PutU64(b, h.cluster_id);
  PutU64(b, h.segment_index);
  PutU64(b, h.prev_end_offset);
  PutU32(b, h.prev_last_crc);
  PutU32(b, h.flags);
  PutU64(b, h.created_time_us);
  PutU32(b, 0);
  static_assert(kSegmentHeaderSize == 64);
  PutU32(b, MaskCrc(crc32c::Value(b.data(), 60)));
  std::memcpy(out, b.data(), kSegmentHeaderSize);
}

bool DecodeSegmentHeader(std::span<const uint8_t> bytes, SegmentHeader& h, HeaderError& err) {
  if (bytes.size() < kSegmentHeaderSize) {
    err = {"segment header cut short", fmt::format("{} bytes", kSegmentHeaderSize),
           fmt::format("{} bytes", bytes.size()), 0};
    return false;
  }
  const uint8_t* p = bytes.data();
  if (std::memcmp(p, kSegmentMagic, sizeof(kSegmentMagic)) != 0) {
    err = {"not a walcut WAL segment (bad magic)", "57414c4355545347 (\"WALCUTSG\")",
           fmt::format("{:016x}", __builtin_bswap64(LoadU64(p))), 0};
    return false;
  }
  const uint32_t stored = LoadU32(p + 60);
  const uint32_t computed = MaskCrc(crc32c::Value(p, 60));
  if (stored != computed) {
    err = {"segment header checksum mismatch", fmt::format("{:08x}", computed), fmt::format("{:08x}", stored), 60};
    return false;
  }
  h.version = LoadU16(p + 8);
  if (h.version != kFormatVersion) {
    err = {"unsupported format version", fmt::format("{}", kFormatVersion), fmt::format("{}", h.version), 8};
    return false;
  }
  const uint16_t hsize = LoadU16(p + 10);
  if (hsize != kSegmentHeaderSize) {
    err = {"unexpected segment header size", fmt::format("{}", kSegmentHeaderSize), fmt::format("{}", hsize), 10};
    return false;
  }
  h.node_id = LoadU32(p + 12);
  h.cluster_id = LoadU64(p + 16);
  h.segment_index = LoadU64(p + 24);
  h.prev_end_offset = LoadU64(p + 32);
  h.prev_last_crc = LoadU32(p + 40);
  h.flags = LoadU32(p + 44);
  h.created_time_us = LoadU64(p + 48);
  if ((h.flags & ~kSegmentFlagHasPredecessor) != 0) {
    err = {"unsupported segment header flags", fmt::format("{:08x}", kSegmentFlagHasPredecessor & h.flags),
           fmt::format("{:08x}", h.flags), 44};
    return false;
  }
  if (LoadU32(p + 56) != 0) {
    err = {"reserved segment header field is not zero", "00000000", fmt::format("{:08x}", LoadU32(p + 56)), 56};
    return false;
  }
  return true;
}

uint32_t ComputeRecordHeaderCrc(const uint8_t* p) { return MaskCrc(crc32c::Value(p + 4, kRecordHeaderSize - 4)); }

uint32_t ComputePayloadCrc(std::span<const uint8_t> payload) {
  return MaskCrc(crc32c::Value(payload.data(), payload.size()));
}

void EncodeRecordHeader(RecordType type, uint16_t flags, std::span<const uint8_t> payload,
                        uint8_t out[kRecordHeaderSize]) {
  StoreU32(out + 4, static_cast<uint32_t>(payload.size()));
  const auto t = static_cast<uint16_t>(type);
  out[8] = static_cast<uint8_t>(t);
  out[9] = static_cast<uint8_t>(t >> 8);
  out[10] = static_cast<uint8_t>(flags);
  out[11] = static_cast<uint8_t>(flags >> 8);
  StoreU32(out + 12, ComputePayloadCrc(payload));
  StoreU32(out, ComputeRecordHeaderCrc(out));
}

std::string SegmentFileName(uint64_t index, bool compressed) {
  return fmt::format("{:016X}.wal{}", index, compressed ? ".zst" : "");
}

bool ParseSegmentName(std::string_view name, uint64_t& index, bool& compressed) {
  if (name.size() < 20) return false;
  const std::string_view ext = name.substr(16);
  if (ext == ".wal") {
    compressed = false;
  } else if (ext == ".wal.zst") {
    compressed = true;
  } else {
    return false;
  }
  uint64_t v = 0;
  for (size_t i = 0; i < 16; ++i) {
    const char c = name[i];
    uint64_t d;
    if (c >= '0' && c <= '9') {
      d = static_cast<uint64_t>(c - '0');
    } else if (c >= 'A' && c <= 'F') {
      d = static_cast<uint64_t>(c - 'A' + 10);
    } else {
      return false;
    }
    v = (v << 4) | d;
  }
  index = v;
  return true;
}

bool LooksLikeSegmentName(std::string_view name) {
  auto ends = [&](std::string_view suffix) {
    return name.size() > suffix.size() && name.substr(name.size() - suffix.size()) == suffix;
  };
  return ends(".wal") || ends(".wal.zst");
}

}  // namespace walfmt
