#include "walfmt/reader.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <map>

#include <fmt/format.h>

#include "walfmt/bytes.h"
#include "walfmt/crc32c.h"
#include "walfmt/record_crc.h"

namespace walfmt {
namespace {

std::string BaseName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool FailsRead(RecoveryMode m, bool fatal) {
  return fatal && (m == RecoveryMode::kStrict || m == RecoveryMode::kTolerateTornTail);
}

// ===== Framing: where the records of a segment are, and why the bytes at an
// offset are not one. Knows the record layout, nothing of recovery modes
// (LevelDB's ReadPhysicalRecord to ScanSegment's ReadRecord).

// Why a record at some offset is not intact. `incomplete` marks the cases a
// crash during the write explains: the record is shorter than it says it is.
struct Damage {
  ProblemKind kind = ProblemKind::kBadLength;
  std::string expected;
  std::string actual;
  std::string detail;
  bool incomplete = false;
};

// What the bytes at one offset are, looked at the slow way (Framer::Examine).
struct Examined {
  enum class Kind : uint8_t { kRecord, kEnd, kDamage, kIoError };
  Kind kind = Kind::kEnd;
  RecordHeader rh{};                 // kRecord; kDamage once the header was read
  std::span<const uint8_t> payload;  // kRecord
  uint64_t total = 0;                // kRecord: its size
  Damage dmg;                        // kDamage
  uint64_t zero_payload_end = 0;     // kDamage: end of a record whose payload is all zeros
  uint64_t skip_to = 0;              // kDamage: end of an intact record of an unknown type
  Status io;                         // kIoError
};

using detail::HeaderCrc;
using detail::PayloadCrc;

// Type and flags, loaded as one word (type | flags << 16): an intact record
// of a known type has a type from 1 to kMaxKnownRecordType and no flags but
// known ones.
inline bool KnownTypeAndFlags(uint32_t type_flags) {
  return (type_flags & ~(uint32_t{kRecordFlagsKnown} << 16)) - 1 < kMaxKnownRecordType;
}

class Framer {
 public:
  Framer(ByteSource& src, uint64_t offset, bool check_payload)
      : src_(src), off_(offset), check_payload_(check_payload), on_chain_(offset == kSegmentHeaderSize) {}

  uint64_t offset() const { return off_; }
  // Elsewhere than along the chain (after damage): the source's chain check
  // says nothing about the records from there.
  void MoveTo(uint64_t offset) {
    off_ = offset;
    on_chain_ = false;
  }
  // Past the intact record of `total` bytes at offset(): the next record of
  // the same chain.
  void Skip(uint64_t total) { off_ += total; }
  // Whether a Walk from here may take the source's word for a record
  // (Walk<kHw, true>); otherwise Walk<kHw, false>, which checks every one.
  bool Trusting() const { return on_chain_ && src_.ChecksChain(); }

  // The fast path: walks the intact records of known types from offset() on
  // through the source's windows, calling on_record(offset, header, payload)
  // for each, with no virtual call per record. Stops at anything else (the
  // end, damage, a record of an unknown type, a read error: Examine() tells
  // which) and returns true; returns false when on_record did (offset() is
  // then after that record). With kTrust (only when Trusting()), a record
  // the source's chain check has passed (ByteSource::CheckedChainEnd) is not
  // checksummed again: the walk is then on that chain, having started right
  // after the segment header and moved only from record to record since.
  template <bool kHw, bool kTrust, class OnRecord>
  bool Walk(OnRecord&& on_record) {
    // The window holds [woff, woff + (end - w)) at w; the walk is at r; the
    // records that end at or before `checked` passed the source's check.
    const uint8_t* w = nullptr;
    const uint8_t* r = nullptr;
    const uint8_t* end = nullptr;
    const uint8_t* checked = nullptr;
    uint64_t woff = off_;
    for (;;) {
      if (end - r < static_cast<ptrdiff_t>(kRecordHeaderSize)) {
        if (!Slide(w, r, end, checked, woff, kRecordHeaderSize)) break;
      }
      const uint32_t len = LoadU32(r + 4);
      size_t total = 0;
      if constexpr (kTrust) {
        if (len > kMaxRecordPayload || !KnownTypeAndFlags(LoadU32(r + 8))) break;
        total = kRecordHeaderSize + len;
        if (static_cast<ptrdiff_t>(total) > checked - r) {
          if (LoadU32(r) != HeaderCrc<kHw>(r)) break;
          if (static_cast<ptrdiff_t>(total) > end - r) {
            if (!Slide(w, r, end, checked, woff, total)) break;
          }
          if (check_payload_ && MaskCrc(PayloadCrc<kHw>(r + kRecordHeaderSize, len)) != LoadU32(r + 12)) break;
        }
      } else {
        if (LoadU32(r) != HeaderCrc<kHw>(r) || len > kMaxRecordPayload || !KnownTypeAndFlags(LoadU32(r + 8))) break;
        total = kRecordHeaderSize + len;
        if (static_cast<ptrdiff_t>(total) > end - r) {
          if (!Slide(w, r, end, checked, woff, total)) break;
        }
        if (check_payload_ && MaskCrc(PayloadCrc<kHw>(r + kRecordHeaderSize, len)) != LoadU32(r + 12)) break;
      }
      if (!on_record(woff + static_cast<uint64_t>(r - w), r, len)) {
        off_ = woff + static_cast<uint64_t>(r - w) + total;
        return false;
      }
      r += total;
    }
    off_ = woff + static_cast<uint64_t>(r - w);
    return true;
  }

  // The slow path: what the bytes at offset() are, with a Get per question.
  Examined Examine() {
    src_.Release(off_);
    Examined e;
    const uint8_t* p = nullptr;
    size_t got = 0;
    if (Status st = src_.Get(off_, kRecordHeaderSize, p, got); !st.ok()) return IoError(std::move(st));
    if (got == 0) return e;  // kEnd
    e.kind = Examined::Kind::kDamage;
    if (got < kRecordHeaderSize) {
      e.dmg = {ProblemKind::kBadLength, fmt::format("{} header bytes", kRecordHeaderSize), fmt::format("{}", got),
               "record header cut short", true};
      return e;
    }
    const RecordHeader rh = LoadRecordHeader(p);
    e.rh = rh;
    const uint32_t hcrc = ComputeRecordHeaderCrc(p);
    if (rh.header_crc != hcrc) {
      e.dmg = {ProblemKind::kHeaderChecksum, fmt::format("{:08x}", hcrc), fmt::format("{:08x}", rh.header_crc),
               "record header checksum mismatch", false};
      return e;
    }
    if (rh.payload_len > kMaxRecordPayload) {
      e.dmg = {ProblemKind::kBadLength, fmt::format("at most {}", kMaxRecordPayload), fmt::format("{}", rh.payload_len),
               "record length over the limit", false};
      return e;
    }
    if (rh.type == 0 || (rh.flags & ~kRecordFlagsKnown) != 0) {
      e.dmg = {ProblemKind::kInvalidType, "a non-zero type and known flags",
               fmt::format("type {} flags {:04x}", rh.type, rh.flags), "invalid record type", false};
      return e;
    }
    const size_t total = kRecordHeaderSize + rh.payload_len;
    if (Status st = src_.Get(off_, total, p, got); !st.ok()) return IoError(std::move(st));
    if (got < total) {
      e.dmg = {ProblemKind::kBadLength, fmt::format("{} bytes", total), fmt::format("{} bytes remain", got),
               "record runs past the end of the segment", true};
      return e;
    }
    const std::span<const uint8_t> payload(p + kRecordHeaderSize, rh.payload_len);
    const uint32_t pcrc = check_payload_ ? ComputePayloadCrc(payload) : rh.payload_crc;
    if (pcrc != rh.payload_crc) {
      e.dmg = {ProblemKind::kPayloadChecksum, fmt::format("{:08x}", pcrc), fmt::format("{:08x}", rh.payload_crc),
               "record payload checksum mismatch", false};
      // The header reached the disk but the payload did not: zeros up to the
      // end of the data are a crash artefact (the policy decides, once it is
      // known that nothing follows).
      if (std::all_of(payload.begin(), payload.end(), [](uint8_t b) { return b == 0; })) {
        e.zero_payload_end = off_ + total;
      }
      return e;
    }
    if (rh.type > kMaxKnownRecordType && (rh.flags & kRecordFlagSkippable) == 0) {
      e.dmg = {ProblemKind::kUnknownType, fmt::format("a type up to {}", kMaxKnownRecordType),
               fmt::format("type {}", rh.type), "unknown record type (not marked skippable)", false};
      e.skip_to = off_ + total;
      return e;
    }
    e.kind = Examined::Kind::kRecord;
    e.payload = payload;
    e.total = total;
    return e;
  }

  // Looks for the first intact record after the damaged one at offset():
  // header checksum, plausible length and type, payload checksum. Bounded by
  // the data: at most one header check per byte and one payload check per
  // plausible header. Forward only (a zstd source cannot go back), so when
  // nothing is found it also tells where the data ends and whether every
  // byte from offset() on is zero.
  // A candidate starts before `limit` (the end of the look past, see
  // kLookPastBytes): when the data goes on past it, `cut` is set and `end`
  // is `limit`.
  bool FindNext(uint64_t limit, uint64_t& found, uint64_t& end, bool& all_zero, bool& cut, Status& io) {
    all_zero = true;
    cut = false;
    for (uint64_t o = off_;; ++o) {
      const uint8_t* p = nullptr;
      size_t got = 0;
      io = src_.Get(o, kRecordHeaderSize, p, got);
      if (!io.ok()) return false;
      if (got < kRecordHeaderSize) {
        if (all_zero) all_zero = std::all_of(p, p + got, [](uint8_t b) { return b == 0; });
        end = o + got;
        return false;
      }
      if (o >= limit) {
        cut = true;
        end = o;
        return false;
      }
      if (p[0] != 0) all_zero = false;
      if (o == off_) continue;
      const RecordHeader rh = LoadRecordHeader(p);
      if (rh.header_crc != ComputeRecordHeaderCrc(p) || rh.payload_len > kMaxRecordPayload || rh.type == 0 ||
          (rh.flags & ~kRecordFlagsKnown) != 0) {
        continue;
      }
      io = src_.Get(o, kRecordHeaderSize + rh.payload_len, p, got);
      if (!io.ok()) return false;
      if (got < kRecordHeaderSize + rh.payload_len) continue;
      if (check_payload_ && ComputePayloadCrc({p + kRecordHeaderSize, rh.payload_len}) != rh.payload_crc) {
        continue;
      }
      found = o;
      return true;
    }
  }

 private:
  // Moves the walk's window to start at the walk's position, holding at
  // least `need` bytes from there; false when the source has fewer.
  bool Slide(const uint8_t*& w, const uint8_t*& r, const uint8_t*& end, const uint8_t*& checked, uint64_t& woff,
             size_t need) {
    woff += static_cast<uint64_t>(r - w);
    size_t got = 0;
    src_.Window(woff, need, w, got);
    r = w;
    end = w + got;
    // Used by Walk<kHw, true> alone, which runs only on the chain (Trusting).
    const uint64_t chain_end = src_.CheckedChainEnd();
    checked = w + (chain_end > woff ? std::min<uint64_t>(chain_end - woff, got) : 0);
    return got >= need;
  }

  static Examined IoError(Status st) {
    Examined e;
    e.kind = Examined::Kind::kIoError;
    e.io = std::move(st);
    return e;
  }

  ByteSource& src_;
  uint64_t off_;
  const bool check_payload_;
  bool on_chain_;  // offset() is on the segment's record chain (ByteSource::CheckedChainEnd)
};

// How far past the useful part of a source that Inflates() a reader looks:
// past damage for the next intact record, past an unusable segment header
// for the end of the data. The longest record: after one damaged record the
// next starts within it. Bytes in which no record starts that far are not a
// segment, however far they go on (a file of compressed zeros is small and
// would decompress up to kMaxSegmentBytes): the rest is not decompressed.
constexpr uint64_t kLookPastBytes = kMaxGetBytes;

// Bytes past `from` a reader of `src` looks at: all for a plain source.
uint64_t LookPastLimit(const ByteSource& src, uint64_t from) {
  return src.Inflates() ? from + kLookPastBytes : UINT64_MAX;
}

// Reads from `from` to the end of the data: its end offset and whether every
// byte is zero. Stops at `limit` when the data goes on past it: `cut` is then
// set and `end` is `limit`.
Status DataEnd(ByteSource& src, uint64_t from, uint64_t limit, uint64_t& end, bool& all_zero, bool& cut) {
  all_zero = true;
  cut = false;
  constexpr size_t kStep = 1u << 20;
  uint64_t o = from;
  for (;;) {
    const uint8_t* p = nullptr;
    size_t got = 0;
    if (o == limit) {
      if (Status st = src.Get(o, 1, p, got); !st.ok()) return st;
      cut = got > 0;
      break;
    }
    Status st = src.Get(o, static_cast<size_t>(std::min<uint64_t>(kStep, limit - o)), p, got);
    if (!st.ok()) return st;
    if (got == 0) break;
    if (all_zero) all_zero = std::all_of(p, p + got, [](uint8_t b) { return b == 0; });
    o += got;
    src.Release(o);
  }
  end = o;
  return Status::Ok();
}

}  // namespace

std::string_view RecoveryModeName(RecoveryMode m) {
  switch (m) {
    case RecoveryMode::kStrict:
      return "strict";
    case RecoveryMode::kTolerateTornTail:
      return "tolerate-torn-tail";
    case RecoveryMode::kPointInTime:
      return "point-in-time";
    case RecoveryMode::kSalvage:
      return "salvage";
  }
  return "invalid";
}

bool ParseRecoveryMode(std::string_view name, RecoveryMode& out) {
  for (RecoveryMode m :
       {RecoveryMode::kStrict, RecoveryMode::kTolerateTornTail, RecoveryMode::kPointInTime, RecoveryMode::kSalvage}) {
    if (name == RecoveryModeName(m)) {
      out = m;
      return true;
    }
  }
  return false;
}

std::string_view ProblemKindName(ProblemKind k) {
  switch (k) {
    case ProblemKind::kTornTail:
      return "torn-tail";
    case ProblemKind::kHeaderChecksum:
      return "header-checksum";
    case ProblemKind::kPayloadChecksum:
      return "payload-checksum";
    case ProblemKind::kBadLength:
      return "bad-length";
    case ProblemKind::kInvalidType:
      return "invalid-type";
    case ProblemKind::kUnknownType:
      return "unknown-type";
    case ProblemKind::kBadPayload:
      return "bad-payload";
    case ProblemKind::kBadSegmentHeader:
      return "bad-segment-header";
    case ProblemKind::kSegmentMismatch:
      return "segment-mismatch";
    case ProblemKind::kMissingSegment:
      return "missing-segment";
    case ProblemKind::kBrokenChain:
      return "broken-chain";
    case ProblemKind::kDuplicateSegment:
      return "duplicate-segment";
    case ProblemKind::kCompression:
      return "compression";
    case ProblemKind::kIo:
      return "io";
    case ProblemKind::kMisnamedSegment:
      return "misnamed-segment";
  }
  return "invalid";
}

std::string Problem::ToString() const {
  // A file that could not be read: "<path>: <reason>" (the OS error), with
  // the position only for a read that failed inside the file.
  if (kind == ProblemKind::kIo && !file.empty() && detail.starts_with(file + ": ")) {
    std::string s = file;
    if (offset > 0) s += fmt::format(" at {}", lsn().ToString());
    return s + detail.substr(file.size());
  }
  if (kind == ProblemKind::kMisnamedSegment) return fmt::format("{}: {}", file, detail);
  std::string s;
  if (node_known) s += fmt::format("node {}, ", node);
  s += file.empty() ? std::string("<no file>") : file;
  s += fmt::format(" at {}: {}", lsn().ToString(), detail);
  if (!expected.empty() || !actual.empty()) s += fmt::format(": expected {}, found {}", expected, actual);
  if (length > 0) s += fmt::format("; {} bytes {}", length, kind == ProblemKind::kTornTail ? "lost" : "dropped");
  return s;
}

// ===== Policy: what ScanSegment does with what the framer finds, per
// recovery mode: account for and visit intact records, and report damage,
// then stop, fail or skip it.

namespace {

// What the report of bytes of a source that Inflates() read no further adds
// to its detail.
std::string NotDecompressed(uint64_t looked_at) {
  return fmt::format(" (no record in the {} bytes from here: the rest of the archive is not decompressed)", looked_at);
}

// The records of one segment, walked by the framer's fast path, then
// examined one by one wherever it stops.
class SegmentPolicy {
 public:
  SegmentPolicy(ByteSource& src, const SegmentFile& file, const ScanOptions& opt, const RecordVisitor& visit,
                const ProblemSink& sink)
      : src_(src),
        file_(file),
        opt_(opt),
        visit_(visit),
        sink_(sink),
        fr_(src, std::max<uint64_t>(kSegmentHeaderSize, opt.start), opt.check_payload_crc) {
    s_.file = file;
  }

  SegmentScan Scan(const SegmentScan* prev) {
    if (Header(prev)) Records();
    return std::move(s_);
  }

 private:
  void Report(ProblemKind kind, bool fatal, uint64_t offset, uint64_t length, std::string detail,
              std::string expected = {}, std::string actual = {}) {
    Problem p;
    p.kind = kind;
    p.fatal = fatal;
    p.node = s_.header_ok ? s_.header.node_id : opt_.node_id;
    p.node_known = s_.header_ok || opt_.expect_node;
    p.file = file_.path;
    p.segment = file_.index;
    p.offset = offset;
    p.length = length;
    p.detail = std::move(detail);
    p.expected = std::move(expected);
    p.actual = std::move(actual);
    if (fatal && FailsRead(opt_.mode, true)) s_.failed = true;
    if (sink_) sink_(p);
  }

  void IoFail(const Status& st, uint64_t offset) {
    if (st.code() == ErrorCode::kCorruption) {
      // A zstd frame that does not decode is damage to the file, not an I/O
      // failure of this machine: the modes treat it like any other damage.
      // Nothing after this point of the segment can be read.
      Report(ProblemKind::kCompression, true, offset, 0, st.message());
      s_.end = opt_.mode == RecoveryMode::kSalvage ? SegmentEnd::kSalvaged : SegmentEnd::kDamaged;
      s_.damaged_to_end = true;
      return;
    }
    Report(ProblemKind::kIo, true, offset, 0, st.message());
    s_.end = SegmentEnd::kIoError;
    s_.failed = true;
  }

  // The segment header and the identity it claims. False when no record is
  // to be read.
  bool Header(const SegmentScan* prev) {
    const uint8_t* p = nullptr;
    size_t got = 0;
    if (Status st = src_.Get(0, kSegmentHeaderSize, p, got); !st.ok()) {
      IoFail(st, 0);
      return false;
    }
    HeaderError herr;
    if (!DecodeSegmentHeader({p, got}, s_.header, herr)) {
      uint64_t end = got;
      bool zero = false;
      bool cut = false;
      if (got == kSegmentHeaderSize) {
        if (Status st = DataEnd(src_, 0, LookPastLimit(src_, 0), end, zero, cut); !st.ok()) {
          IoFail(st, 0);
          return false;
        }
      }
      s_.file_bytes = end;  // of a source that Inflates(), as far as it was decompressed
      s_.bytes_dropped = end;
      Report(ProblemKind::kBadSegmentHeader, true, herr.offset, end, herr.what + (cut ? NotDecompressed(end) : ""),
             herr.expected, herr.actual);
      s_.end = SegmentEnd::kBadHeader;
      s_.failed = FailsRead(opt_.mode, true);
      return false;
    }
    s_.header_ok = true;
    s_.valid_end = std::max<uint64_t>(kSegmentHeaderSize, opt_.start);
    s_.last_end = s_.valid_end;
    bool identity_ok = true;
    if (s_.header.segment_index != file_.index) {
      Report(ProblemKind::kSegmentMismatch, true, 24, 0, "segment header names another index than the file name",
             fmt::format("{:X}", file_.index), fmt::format("{:X}", s_.header.segment_index));
      identity_ok = false;
    }
    if (opt_.expect_node && s_.header.node_id != opt_.node_id) {
      Report(ProblemKind::kSegmentMismatch, true, 12, 0, "segment belongs to another node",
             fmt::format("node {}", opt_.node_id), fmt::format("node {}", s_.header.node_id));
      identity_ok = false;
    }
    if (opt_.expect_cluster && s_.header.cluster_id != opt_.cluster_id) {
      Report(ProblemKind::kSegmentMismatch, true, 16, 0, "segment belongs to another cluster",
             fmt::format("{:016x}", opt_.cluster_id), fmt::format("{:016x}", s_.header.cluster_id));
      identity_ok = false;
    }
    if (identity_ok && prev != nullptr && !CheckContinuity(*prev, s_, sink_)) {
      identity_ok = false;
      if (FailsRead(opt_.mode, true)) s_.failed = true;
    }
    if (!identity_ok && opt_.mode != RecoveryMode::kSalvage) {
      // Rejected before any record was read: no intact prefix here.
      s_.end = SegmentEnd::kDamaged;
      s_.valid_end = 0;
      s_.last_end = 0;
      return false;
    }
    return true;
  }

  // Reads the records; fills in the scan's counters and end.
  void Records() {
    const bool hw = crc32c::HardwareAccelerated();
    for (;;) {
      const bool go = hw ? (visit_ ? WalkRun<true, true>() : WalkRun<true, false>())
                         : (visit_ ? WalkRun<false, true>() : WalkRun<false, false>());
      if (!go) {
        s_.end = SegmentEnd::kStopped;
        return;
      }
      Examined e = fr_.Examine();
      switch (e.kind) {
        case Examined::Kind::kEnd:
          s_.file_bytes = fr_.offset();
          s_.end = damaged_ ? SegmentEnd::kSalvaged : SegmentEnd::kClean;
          return;
        case Examined::Kind::kIoError:
          IoFail(e.io, fr_.offset());
          return;
        case Examined::Kind::kRecord:
          if (!Intact(e)) {
            s_.end = SegmentEnd::kStopped;
            return;
          }
          break;
        case Examined::Kind::kDamage:
          if (!Damaged(e)) return;
          break;
      }
    }
  }

  // One run of the fast path, then the counters for the records it passed.
  template <bool kHw, bool kVisit>
  bool WalkRun() {
    const uint64_t start = fr_.offset();
    uint64_t n = 0;
    uint32_t crc = 0;
    const uint64_t index = file_.index;
    const uint32_t visit_types = opt_.visit_types;
    auto on_record = [&](uint64_t off, const uint8_t* r, uint32_t len) {
      ++n;
      crc = LoadU32(r);
      if constexpr (kVisit) {
        const uint16_t type = LoadU16(r + 8);  // a known type: Walk takes no other
        if ((visit_types >> type) & 1u) {
          return visit_(RecordView{Lsn{index, off}, static_cast<RecordType>(type), LoadU16(r + 10), crc,
                                   std::span<const uint8_t>(r + kRecordHeaderSize, len)});
        }
        CountUnvisited(type, kRecordHeaderSize + len);
        return true;
      } else {
        (void)off;
        (void)len;
        (void)index;
        (void)visit_types;
        return true;
      }
    };
    const bool go = fr_.Trusting() ? fr_.Walk<kHw, true>(on_record) : fr_.Walk<kHw, false>(on_record);
    if (n > 0) Count(n, fr_.offset() - start, crc);
    return go;
  }

  // An intact record of a known type that visit_types leaves out.
  void CountUnvisited(uint16_t type, uint64_t bytes) {
    TypeTally& t = s_.unvisited[type];
    ++t.records;
    t.bytes += bytes;
  }

  void Count(uint64_t records, uint64_t bytes, uint32_t last_crc) {
    const uint64_t end = fr_.offset();
    s_.records += records;
    s_.record_bytes += bytes;
    s_.last_end = end;
    s_.last_crc = last_crc;
    if (!damaged_) {
      s_.valid_end = end;
      s_.last_record_crc = last_crc;
    }
  }

  // An intact record the fast path did not take (an unknown type marked
  // skippable, or one at the edge of what the source could hand at once).
  // False when the visitor stops the read.
  bool Intact(const Examined& e) {
    const uint64_t off = fr_.offset();
    fr_.Skip(e.total);
    bool go = true;
    if (e.rh.type > kMaxKnownRecordType) {
      ++s_.skipped_unknown;
      s_.skipped_unknown_bytes += e.total;
    } else if (visit_ && ((opt_.visit_types >> e.rh.type) & 1u)) {
      go = visit_(RecordView{Lsn{file_.index, off}, static_cast<RecordType>(e.rh.type), e.rh.flags, e.rh.header_crc,
                             e.payload});
    } else if (visit_) {
      CountUnvisited(e.rh.type, e.total);
    }
    Count(1, e.total, e.rh.header_crc);
    return go;
  }

  // Damage at the framer's offset: is anything intact after it? Reports it;
  // false when the scan ends here.
  bool Damaged(Examined& e) {
    const uint64_t off = fr_.offset();
    Damage& dmg = e.dmg;
    uint64_t next = 0;
    uint64_t end = off;
    bool zero = false;
    bool found = false;
    bool cut = false;
    if (e.skip_to != 0) {
      next = e.skip_to;
      found = true;
    } else {
      Status io;
      found = fr_.FindNext(LookPastLimit(src_, off), next, end, zero, cut, io);
      if (!io.ok()) {
        IoFail(io, off);
        return false;
      }
    }
    if (cut) {
      // No record where one would have to be: the bytes stopped being
      // records, and no more of them is decompressed. Not a torn tail, even
      // of zeros: what follows is not known.
      s_.damaged_to_end = true;
      s_.file_bytes = end;
      s_.bytes_dropped += end - off;
      Report(dmg.kind, true, off, end - off, dmg.detail + NotDecompressed(end - off), dmg.expected, dmg.actual);
      s_.end = opt_.mode == RecoveryMode::kSalvage ? SegmentEnd::kSalvaged : SegmentEnd::kDamaged;
      return false;
    }
    if (!found) {
      s_.damaged_to_end = true;
      s_.file_bytes = end;
      if (e.zero_payload_end != 0 && e.zero_payload_end == end && e.rh.payload_len > 0) {
        dmg.incomplete = true;
        dmg.detail = "record payload never written (zeros)";
      }
      if (opt_.is_last && (dmg.incomplete || zero)) {
        // A crash while appending: the record is shorter than it says, or
        // the file was extended with zeros the write never reached.
        s_.end = SegmentEnd::kTornTail;
        s_.torn_offset = off;
        s_.zero_filled_tail = zero;
        s_.bytes_dropped += end - off;
        const bool fatal = opt_.mode == RecoveryMode::kStrict;
        Report(ProblemKind::kTornTail, fatal, off, end - off,
               zero ? std::string("torn tail (zero-filled)") : fmt::format("torn tail ({})", dmg.detail), dmg.expected,
               dmg.actual);
        return false;
      }
      s_.bytes_dropped += end - off;
      Report(dmg.kind, true, off, end - off, dmg.detail + (opt_.is_last ? "" : " (not the last segment)"), dmg.expected,
             dmg.actual);
      s_.end = opt_.mode == RecoveryMode::kSalvage ? SegmentEnd::kSalvaged : SegmentEnd::kDamaged;
      return false;
    }
    s_.bytes_dropped += next - off;
    Report(dmg.kind, true, off, next - off,
           dmg.detail + fmt::format(" (next intact record at {})", Lsn{file_.index, next}.ToString()), dmg.expected,
           dmg.actual);
    if (opt_.mode != RecoveryMode::kSalvage) {
      s_.end = SegmentEnd::kDamaged;
      uint64_t data_end = next;
      bool all_zero = false;
      bool data_cut = false;
      if (Status st = DataEnd(src_, next, LookPastLimit(src_, next), data_end, all_zero, data_cut); st.ok()) {
        s_.file_bytes = data_end;
      }
      return false;
    }
    damaged_ = true;
    fr_.MoveTo(next);
    return true;
  }

  ByteSource& src_;
  const SegmentFile& file_;
  const ScanOptions& opt_;
  const RecordVisitor& visit_;
  const ProblemSink& sink_;
  SegmentScan s_;
  Framer fr_;
  bool damaged_ = false;  // true once any damage was skipped: valid_end stops moving
};

}  // namespace

SegmentScan ScanSegment(ByteSource& src, const SegmentFile& file, const ScanOptions& opt, const RecordVisitor& visit,
                        const ProblemSink& sink, const SegmentScan* prev) {
  return SegmentPolicy(src, file, opt, visit, sink).Scan(prev);
}

SegmentScan ScanSegmentFile(const SegmentFile& file, const ScanOptions& opt, const RecordVisitor& visit,
                            const ProblemSink& sink, const SegmentScan* prev) {
  auto src = OpenSegmentSource(file.path, file.compressed, opt.read_ahead);
  if (!src.ok()) {
    SegmentScan s;
    s.file = file;
    s.end = SegmentEnd::kIoError;
    s.failed = true;
    Problem p;
    p.kind = ProblemKind::kIo;
    p.node = opt.node_id;
    p.node_known = opt.expect_node;
    p.file = file.path;
    p.segment = file.index;
    p.detail = src.status().message();
    if (sink) sink(p);
    return s;
  }
  return ScanSegment(**src, file, opt, visit, sink, prev);
}

bool CheckContinuity(const SegmentScan& prev, const SegmentScan& cur, const ProblemSink& sink) {
  if (!prev.header_ok || !cur.header_ok) return true;  // already reported as bad headers
  auto report = [&](ProblemKind kind, uint64_t offset, std::string detail, std::string expected, std::string actual) {
    Problem p;
    p.kind = kind;
    p.node = cur.header.node_id;
    p.node_known = true;
    p.file = cur.file.path;
    p.segment = cur.file.index;
    p.offset = offset;
    p.detail = std::move(detail);
    p.expected = std::move(expected);
    p.actual = std::move(actual);
    if (sink) sink(p);
  };
  bool ok = true;
  if (cur.header.node_id != prev.header.node_id) {
    report(ProblemKind::kSegmentMismatch, 12, "segment belongs to another node than its predecessor",
           fmt::format("node {}", prev.header.node_id), fmt::format("node {}", cur.header.node_id));
    ok = false;
  }
  if (cur.header.cluster_id != prev.header.cluster_id) {
    report(ProblemKind::kSegmentMismatch, 16, "segment belongs to another cluster than its predecessor",
           fmt::format("{:016x}", prev.header.cluster_id), fmt::format("{:016x}", cur.header.cluster_id));
    ok = false;
  }
  if (cur.header.segment_index != prev.header.segment_index + 1) {
    const uint64_t lo = prev.header.segment_index + 1;
    const uint64_t hi = cur.header.segment_index - 1;
    report(ProblemKind::kMissingSegment, 0,
           cur.header.segment_index > lo
               ? (lo == hi ? fmt::format("missing segment {:X} before this one", lo)
                           : fmt::format("missing segments {:X}..{:X} before this one", lo, hi))
               : std::string("segment out of order"),
           fmt::format("segment {:X}", lo), fmt::format("segment {:X}", cur.header.segment_index));
    return false;  // the predecessor fields refer to a segment we do not have
  }
  // The predecessor's true end is unknown when damage runs to its end (that
  // damage is reported already); otherwise its last intact record must be
  // the one this header names, even when salvage skipped damage before it.
  if (prev.damaged_to_end || prev.end == SegmentEnd::kDamaged || prev.end == SegmentEnd::kStopped ||
      prev.end == SegmentEnd::kIoError) {
    return ok;
  }
  if (!cur.header.has_predecessor() || cur.header.prev_end_offset != prev.last_end ||
      cur.header.prev_last_crc != prev.last_crc) {
    report(ProblemKind::kBrokenChain, 32, "segment does not continue its predecessor",
           fmt::format("predecessor ending at {:X}/{:08X} with record crc {:08x}", prev.header.segment_index,
                       prev.last_end, prev.last_crc),
           fmt::format("{:X}/{:08X} with record crc {:08x}", prev.header.segment_index, cur.header.prev_end_offset,
                       cur.header.prev_last_crc));
    ok = false;
  }
  return ok;
}

Result<std::vector<SegmentFile>> ListSegments(const std::string& wal_dir, const ProblemSink& sink) {
  DIR* d = opendir(wal_dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT || errno == ENOTDIR) {
      return Status::NotFound(fmt::format("{}: {}", wal_dir, std::strerror(errno)));
    }
    return Status::Io(fmt::format("{}: opendir: {}", wal_dir, std::strerror(errno)));
  }
  std::map<uint64_t, SegmentFile> by_index;
  std::vector<std::string> misnamed;
  for (;;) {
    errno = 0;
    dirent* e = readdir(d);
    if (e == nullptr) {
      if (errno != 0) {
        Status st = Status::Io(fmt::format("{}: readdir: {}", wal_dir, std::strerror(errno)));
        closedir(d);
        return st;
      }
      break;
    }
    uint64_t index = 0;
    bool compressed = false;
    if (!ParseSegmentName(e->d_name, index, compressed)) {
      if (LooksLikeSegmentName(e->d_name)) misnamed.emplace_back(e->d_name);
      continue;
    }
    SegmentFile f{wal_dir + "/" + e->d_name, index, compressed};
    auto [it, inserted] = by_index.emplace(index, f);
    if (!inserted) {
      // Archiving writes the .zst, then removes the .wal: a crash between the
      // two leaves both. The plain file is the original.
      SegmentFile& have = it->second;
      Problem p;
      p.kind = ProblemKind::kDuplicateSegment;
      p.fatal = false;
      p.file = have.compressed ? f.path : have.path;
      p.segment = index;
      p.detail =
          fmt::format("segment present as both {} and {}; reading the .wal", BaseName(have.path), BaseName(f.path));
      if (sink) sink(p);
      if (have.compressed) have = f;
    }
  }
  closedir(d);
  std::sort(misnamed.begin(), misnamed.end());
  for (const std::string& name : misnamed) {
    Problem p;
    p.kind = ProblemKind::kMisnamedSegment;
    p.fatal = false;
    p.file = wal_dir + "/" + name;
    p.detail = fmt::format(
        "named like a segment but not one: a segment is named <16 upper-case hex digits>.wal or .wal.zst "
        "(as {}); not read",
        SegmentFileName(0, false));
    if (sink) sink(p);
  }
  std::vector<SegmentFile> out;
  out.reserve(by_index.size());
  for (auto& [i, f] : by_index) out.push_back(std::move(f));
  return out;
}

NodeWalReader::NodeWalReader(const std::vector<SegmentFile>& segments, const NodeReadOptions& opt,
                             const RecordVisitor& visit, const ProblemSink& sink)
    : segments_(segments), opt_(opt), visit_(visit), sink_(sink) {
  if (opt_.from > Lsn{0, 0} && visit_) {
    filtered_ = [this](const RecordView& v) { return v.lsn < opt_.from || visit_(v); };
  }
  done_ = segments_.empty();
}

void NodeWalReader::Step() {
  while (!done_ && next_ < segments_.size()) {
    const size_t i = next_++;
    if (segments_[i].index < opt_.from.segment && i + 1 < segments_.size() &&
        segments_[i + 1].index <= opt_.from.segment) {
      continue;  // wholly before `from`: not even opened
    }
    ScanOptions so;
    so.mode = opt_.mode;
    so.check_payload_crc = opt_.check_payload_crc;
    so.read_ahead = opt_.read_ahead;
    so.is_last = i + 1 == segments_.size();
    const SegmentScan* prev = r_.segments.empty() ? nullptr : &r_.segments.back();
    if (prev != nullptr && prev->header_ok) {
      so.expect_node = true;
      so.node_id = prev->header.node_id;
      so.expect_cluster = true;
      so.cluster_id = prev->header.cluster_id;
    }
    // The visitor is called straight from the scan loop (no wrapper per
    // record): a visitor that returns false ends the segment as kStopped.
    SegmentScan s = ScanSegmentFile(segments_[i], so, filtered_ ? filtered_ : visit_, sink_, prev);
    if (s.valid_end > 0) r_.end = Lsn{s.file.index, s.valid_end};
    const bool failed = s.failed;
    const bool stopped = s.end == SegmentEnd::kStopped;
    const bool damaged =
        s.end == SegmentEnd::kDamaged || s.end == SegmentEnd::kBadHeader || s.end == SegmentEnd::kIoError;
    r_.segments.push_back(std::move(s));
    if (failed) {
      r_.failed = true;
      done_ = true;
    } else if (stopped) {
      r_.stopped = true;
      done_ = true;
    } else if (damaged && opt_.mode != RecoveryMode::kSalvage) {
      r_.stopped = true;  // point in time: keep what came before
      done_ = true;
    }
    break;
  }
  if (next_ >= segments_.size()) done_ = true;
}

NodeRead ReadNodeWal(const std::vector<SegmentFile>& segments, const NodeReadOptions& opt, const RecordVisitor& visit,
                     const ProblemSink& sink) {
  NodeWalReader reader(segments, opt, visit, sink);
  while (!reader.done()) reader.Step();
  return reader.Take();
}

}  // namespace walfmt
