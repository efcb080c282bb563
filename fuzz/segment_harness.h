// Shared by the segment targets (fuzz_segment_reader, fuzz_segment_modes):
// one read of a segment recorded as a Trace, the invariants every read must
// satisfy (CheckPlain), the comparison of two reads (CheckSame), the record
// codec round trip (Decode), and the custom mutator that repairs checksums.
// Include it from exactly one .cpp per executable: it defines the mutator.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "fuzz/check.h"
#include "walfmt/bytes.h"
#include "walfmt/chain_check.h"
#include "walfmt/crc32c.h"
#include "walfmt/lsn.h"
#include "walfmt/reader.h"
#include "walfmt/record.h"
#include "walfmt/record_text.h"
#include "walfmt/segment.h"
#include "walfmt/source.h"

namespace walcut_fuzz {
using namespace walfmt;

// Decompressed bytes the zstd runs may look at. A 64 KiB zstd frame can
// expand to gigabytes (RLE blocks); the reader is linear in that size, which
// is correct but would turn every such input into a timeout. Past this cap
// the harness's source reports the end of data.
constexpr uint64_t kMaxDecompressed = 8u << 20;

// Forwards to another source but ends the data at `cap` bytes.
class CappedSource final : public ByteSource {
 public:
  CappedSource(std::unique_ptr<ByteSource> inner, uint64_t cap) : inner_(std::move(inner)), cap_(cap) {}
  Status Get(uint64_t offset, size_t n, const uint8_t*& p, size_t& got) override {
    if (offset >= cap_) {
      p = nullptr;
      got = 0;
      return Status::Ok();
    }
    const size_t want = static_cast<size_t>(std::min<uint64_t>(n, cap_ - offset));
    Status st = inner_->Get(offset, want, p, got);
    if (st.ok()) {
      Check(got <= want, "inner source returned more bytes than asked");
      Check(got == 0 || p != nullptr, "inner source returned bytes at a null pointer");
    }
    return st;
  }
  void Release(uint64_t offset) override { inner_->Release(offset); }
  std::optional<uint64_t> size() const override { return std::nullopt; }

 private:
  std::unique_ptr<ByteSource> inner_;
  uint64_t cap_;
};

struct SeenRecord {
  uint64_t offset = 0;
  uint16_t type = 0;
  uint16_t flags = 0;
  uint32_t header_crc = 0;
  std::vector<uint8_t> payload;
  bool operator==(const SeenRecord&) const = default;
};

struct SeenProblem {
  ProblemKind kind = ProblemKind::kIo;
  bool fatal = false;
  uint64_t segment = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  std::string expected, actual, detail;
  bool operator==(const SeenProblem&) const = default;
};

struct Trace {
  std::vector<SeenRecord> records;
  std::vector<SeenProblem> problems;
  SegmentScan scan;
};

std::string Hex(uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "%llx", static_cast<unsigned long long>(v));
  return b;
}

// Decodes a record, describes it, and re-encodes it.
void Decode(const RecordView& v) {
  auto rec = DecodePayload(v.type, v.payload);
  if (!rec.ok()) {
    Check(!rec.status().message().empty(), "a decode error without a message");
    return;
  }
  Check(TypeOf(*rec) == v.type, "decoded record has another type");
  std::string d1 = Describe(*rec);
  std::string d2 = Describe(*rec, 0);
  std::string d3 = Describe(*rec, 1);
  Check(!d1.empty() || !d2.empty() || d3.empty(), "Describe");
  std::string again;
  Status st = EncodePayload(*rec, again);
  Check(st.ok(), "a decoded record does not encode: " + st.message());
  Check(again.size() == v.payload.size() && std::memcmp(again.data(), v.payload.data(), again.size()) == 0,
        "decode/encode round trip changed the payload of a " + std::string(RecordTypeName(v.type)) + " at " +
            v.lsn.ToString());
}

struct RunSpec {
  RecoveryMode mode = RecoveryMode::kTolerateTornTail;
  bool is_last = true;
  bool check_crc = true;
  bool zstd = false;
  bool decode = false;
  uint64_t stop_after = 0;  // 0: never stop
  uint64_t index = 0;       // segment index given to the reader (the file name's)
  const SegmentScan* prev = nullptr;
  // Plain bytes through the read-ahead's source instead (its chain check
  // vouches for records, which the reader then does not checksum), handed
  // out this many bytes at a time; 0: MemorySource.
  size_t checked_blocks = 0;
  uint32_t visit_types = UINT32_MAX;  // ScanOptions::visit_types
};

// The records a scan counted without visiting them (ScanOptions::visit_types).
inline uint64_t Unvisited(const SegmentScan& s) {
  uint64_t n = 0;
  for (const TypeTally& t : s.unvisited) n += t.records;
  return n;
}

Trace Run(std::span<const uint8_t> bytes, const RunSpec& spec) {
  Trace t;
  std::unique_ptr<ByteSource> src = spec.checked_blocks != 0 && !spec.zstd
                                        ? detail::CheckedMemorySource(bytes, spec.checked_blocks)
                                        : MemorySource(bytes, spec.zstd);
  if (spec.zstd) src = std::make_unique<CappedSource>(std::move(src), kMaxDecompressed);
  SegmentFile file{"fuzz.wal", spec.index, spec.zstd};
  ScanOptions opt;
  opt.mode = spec.mode;
  opt.is_last = spec.is_last;
  opt.check_payload_crc = spec.check_crc;
  opt.visit_types = spec.visit_types;

  uint64_t last_end = 0;
  auto visit = [&](const RecordView& v) -> bool {
    Check(v.lsn.segment == spec.index, "record in another segment");
    Check(v.lsn.offset >= kSegmentHeaderSize, "record inside the segment header");
    Check(v.lsn.offset >= last_end, "records overlap or go backwards");
    Check(v.type != RecordType::kInvalid && static_cast<uint16_t>(v.type) <= kMaxKnownRecordType,
          "visited a record of type " + Hex(static_cast<uint16_t>(v.type)));
    Check((v.flags & ~kRecordFlagsKnown) == 0, "visited a record with unknown flags");
    Check(((spec.visit_types >> static_cast<uint16_t>(v.type)) & 1u) != 0,
          "visited a record of type " + Hex(static_cast<uint16_t>(v.type)) + ", which visit_types leaves out");
    Check(v.payload.size() <= kMaxRecordPayload, "payload over the limit");
    if (!spec.zstd) {
      if (spec.checked_blocks == 0) {
        // Zero-copy: the payload points into the input, inside its bounds, at
        // the place the header says.
        Check(v.payload.data() >= bytes.data() + v.lsn.offset + kRecordHeaderSize &&
                  v.payload.data() + v.payload.size() <= bytes.data() + bytes.size(),
              "payload outside the input");
        Check(v.payload.data() == bytes.data() + v.lsn.offset + kRecordHeaderSize, "payload not after its header");
      } else {
        // A copy, in blocks: the same bytes as the input's at that place.
        Check(v.lsn.offset + v.size() <= bytes.size(), "record past the end of the input");
        Check(std::memcmp(v.payload.data(), bytes.data() + v.lsn.offset + kRecordHeaderSize, v.payload.size()) == 0,
              "payload differs from the input's bytes at " + v.lsn.ToString());
      }
      const uint8_t* h = bytes.data() + v.lsn.offset;
      const RecordHeader rh = LoadRecordHeader(h);
      Check(rh.header_crc == v.header_crc && rh.payload_len == v.payload.size() &&
                rh.type == static_cast<uint16_t>(v.type) && rh.flags == v.flags,
            "record view disagrees with the bytes at " + v.lsn.ToString());
      Check(ComputeRecordHeaderCrc(h) == rh.header_crc, "visited a record whose header checksum is wrong");
      if (spec.check_crc)
        Check(ComputePayloadCrc(v.payload) == rh.payload_crc, "visited a record whose payload checksum is wrong");
    }
    auto parsed = Lsn::Parse(v.lsn.ToString());
    Check(parsed && *parsed == v.lsn, "LSN does not round-trip: " + v.lsn.ToString());
    last_end = v.lsn.offset + v.size();
    t.records.push_back({v.lsn.offset, static_cast<uint16_t>(v.type), v.flags, v.header_crc,
                         std::vector<uint8_t>(v.payload.begin(), v.payload.end())});
    if (spec.decode) Decode(v);
    return spec.stop_after == 0 || t.records.size() < spec.stop_after;
  };
  auto sink = [&](const Problem& p) {
    Check(!p.ToString().empty(), "empty problem text");
    Check(p.file == file.path && p.segment == spec.index, "problem names another file");
    t.problems.push_back({p.kind, p.fatal, p.segment, p.offset, p.length, p.expected, p.actual, p.detail});
  };
  t.scan = ScanSegment(*src, file, opt, visit, sink, spec.prev);
  return t;
}

bool AnyFatal(const Trace& t) {
  for (const auto& p : t.problems) {
    if (p.fatal) return true;
  }
  return false;
}

// Fatal problems with the bytes of the records (not with the segment's
// identity or its place in the chain, which salvage reports and reads past).
bool AnyRecordDamage(const Trace& t) {
  for (const auto& p : t.problems) {
    if (p.fatal && p.kind != ProblemKind::kSegmentMismatch && p.kind != ProblemKind::kBrokenChain &&
        p.kind != ProblemKind::kMissingSegment) {
      return true;
    }
  }
  return false;
}

// Invariants of one read of a plain segment held in memory.
void CheckPlain(std::span<const uint8_t> bytes, const RunSpec& spec, const Trace& t) {
  const SegmentScan& s = t.scan;
  const std::string mode(RecoveryModeName(spec.mode));
  Check(s.end != SegmentEnd::kIoError, "I/O error reading memory");
  Check(s.file_bytes <= bytes.size(), "file_bytes past the input");
  Check(s.valid_end <= bytes.size(), "valid_end past the input");
  Check(s.bytes_dropped <= bytes.size(), "more bytes dropped than there are");
  if (s.end != SegmentEnd::kStopped) {
    Check(s.records == t.records.size() + s.skipped_unknown + Unvisited(s),
          mode + ": records " + Hex(s.records) + " != visited " + Hex(t.records.size()) + " + skipped " +
              Hex(s.skipped_unknown) + " + counted unvisited " + Hex(Unvisited(s)));
  }
  if (!s.header_ok) {
    Check(t.records.empty() && s.records == 0, "records read from a segment whose header is bad");
    Check(s.end == SegmentEnd::kBadHeader || s.end == SegmentEnd::kDamaged, "bad header, end not kBadHeader");
    return;
  }
  // A segment rejected on its identity has no intact prefix (valid_end 0).
  Check(s.valid_end >= kSegmentHeaderSize || (s.end == SegmentEnd::kDamaged && s.records == 0),
        "valid_end inside the header");
  if (!t.records.empty() && !AnyRecordDamage(t)) {
    // Once damage was skipped (salvage), valid_end stays where it began.
    const SeenRecord& last = t.records.back();
    if (s.skipped_unknown == 0 && Unvisited(s) == 0) {  // else the last record may be one not visited
      Check(s.valid_end == last.offset + kRecordHeaderSize + last.payload.size(),
            mode + ": valid_end is not after the last record");
      Check(s.last_record_crc == last.header_crc, "last_record_crc is not the last record's");
    }
  }
  if (s.end == SegmentEnd::kClean) {
    Check(!AnyRecordDamage(t), mode + ": clean end with damage reported");
    Check(s.bytes_dropped == 0, "clean end with dropped bytes");
    if (spec.prev == nullptr)
      Check(s.file_bytes == bytes.size() && s.valid_end == bytes.size(), "clean end before the end of the input");
  }
  if (s.end == SegmentEnd::kTornTail) {
    Check(spec.is_last, "torn tail in a segment that is not the last");
    Check(s.torn_offset >= s.valid_end && s.torn_offset < bytes.size(), "torn tail offset out of place");
    Check(s.file_bytes == bytes.size(), "torn tail: file_bytes is not the input size");
  }
  switch (spec.mode) {
    case RecoveryMode::kStrict:
      Check(t.problems.empty() || s.failed, "strict read with problems did not fail");
      break;
    case RecoveryMode::kTolerateTornTail:
      Check(s.failed == AnyFatal(t), "tolerate-torn-tail: failed != any fatal problem");
      break;
    case RecoveryMode::kPointInTime:
    case RecoveryMode::kSalvage:
      Check(!s.failed, mode + " read failed on memory input");
      break;
  }
  for (const auto& p : t.problems) {
    if (p.kind == ProblemKind::kTornTail) Check(spec.is_last, "torn tail reported for a middle segment");
    Check(p.offset <= bytes.size(), "problem offset outside the input: " + Hex(p.offset));
    // A bad segment header drops the whole file, whatever field the offset
    // points at; any other problem drops bytes from its offset on.
    const uint64_t room = p.kind == ProblemKind::kBadSegmentHeader ? bytes.size() : bytes.size() - p.offset;
    Check(p.length <= room, "problem length past the input: offset " + Hex(p.offset) + " length " + Hex(p.length));
  }
}

void CheckSame(const Trace& a, const Trace& b, const std::string& what) {
  Check(a.records == b.records, what + ": different records");
  Check(a.problems.size() == b.problems.size(), what + ": different number of problems");
  for (size_t i = 0; i < a.problems.size(); ++i) {
    const auto& x = a.problems[i];
    const auto& y = b.problems[i];
    Check(x == y, what + ": problem " + Hex(i) + " differs: {" + std::string(ProblemKindName(x.kind)) + " @" +
                      Hex(x.offset) + " " + x.detail + "} vs {" + std::string(ProblemKindName(y.kind)) + " @" +
                      Hex(y.offset) + " " + y.detail + "}");
  }
  const SegmentScan& s = a.scan;
  const SegmentScan& z = b.scan;
  Check(s.header_ok == z.header_ok && s.header == z.header, what + ": header");
  Check(s.valid_end == z.valid_end, what + ": valid_end " + Hex(s.valid_end) + " vs " + Hex(z.valid_end));
  Check(s.last_record_crc == z.last_record_crc, what + ": last_record_crc");
  Check(s.records == z.records && s.record_bytes == z.record_bytes && s.skipped_unknown == z.skipped_unknown,
        what + ": record counts");
  Check(s.bytes_dropped == z.bytes_dropped,
        what + ": bytes_dropped " + Hex(s.bytes_dropped) + " vs " + Hex(z.bytes_dropped));
  Check(s.torn_offset == z.torn_offset && s.zero_filled_tail == z.zero_filled_tail, what + ": torn tail");
  Check(s.end == z.end, what + ": end " + Hex(static_cast<int>(s.end)) + " vs " + Hex(static_cast<int>(z.end)));
  Check(s.failed == z.failed, what + ": failed");
  Check(s.file_bytes == z.file_bytes, what + ": file_bytes " + Hex(s.file_bytes) + " vs " + Hex(z.file_bytes));
}

bool RecordsArePrefix(const Trace& a, const Trace& b) {
  if (a.records.size() > b.records.size()) return false;
  for (size_t i = 0; i < a.records.size(); ++i) {
    if (!(a.records[i] == b.records[i])) return false;
  }
  return true;
}

constexpr RecoveryMode kModes[] = {RecoveryMode::kStrict, RecoveryMode::kTolerateTornTail, RecoveryMode::kPointInTime,
                                   RecoveryMode::kSalvage};

bool IsZstdFrame(std::span<const uint8_t> b) {
  // Regular frames (28 B5 2F FD) and skippable frames (5? 2A 4D 18).
  if (b.size() < 4) return false;
  const uint32_t m = LoadU32(b.data());
  return m == 0xFD2FB528u || (m & 0xFFFFFFF0u) == 0x184D2A50u;
}

}  // namespace walcut_fuzz

// ---------------------------------------------------------------------------
// Custom mutator: mutate, then (3 times in 4) repair the checksums of the
// segment header and of every record whose length fits, so that mutations of
// payloads and lengths reach the decoders.

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  using namespace walfmt;
  std::minstd_rand rng(seed);
  size = LLVMFuzzerMutate(data, size, max_size);
  if (rng() % 4 == 0 || size < kSegmentHeaderSize || std::memcmp(data, kSegmentMagic, sizeof kSegmentMagic) != 0) {
    return size;
  }
  if (rng() % 8 != 0) StoreU32(data + 60, MaskCrc(crc32c::Value(data, 60)));
  const uint32_t leave_one = static_cast<uint32_t>(rng() % 16);  // which record to leave alone (>= count: none)
  uint32_t n = 0;
  size_t o = kSegmentHeaderSize;
  while (o + kRecordHeaderSize <= size) {
    uint8_t* h = data + o;
    uint32_t len = LoadU32(h + 4);
    if (len > kMaxRecordPayload || len > size - o - kRecordHeaderSize) {
      // Occasionally make the length fit what is left: a record at the end.
      if (rng() % 4 != 0) break;
      len = static_cast<uint32_t>(std::min<size_t>(size - o - kRecordHeaderSize, kMaxRecordPayload));
      StoreU32(h + 4, len);
    }
    if (n++ != leave_one) {
      StoreU32(h + 12, ComputePayloadCrc({h + kRecordHeaderSize, len}));
      StoreU32(h, ComputeRecordHeaderCrc(h));
    }
    o += kRecordHeaderSize + len;
  }
  return size;
}
