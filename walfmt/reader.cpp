#include "walfmt/reader.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <map>

#include <fmt/format.h>

namespace walfmt {
namespace {

std::string BaseName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool FailsRead(RecoveryMode m, bool fatal) {
  return fatal && (m == RecoveryMode::kStrict || m == RecoveryMode::kTolerateTornTail);
}

// Why a record at some offset is not intact. `incomplete` marks the cases a
// crash during the write explains: the record is shorter than it says it is.
struct Damage {
  ProblemKind kind = ProblemKind::kBadLength;
  std::string expected;
  std::string actual;
  std::string detail;
  bool incomplete = false;
};

// Looks for the first intact record after the damaged one at `damaged`:
// header checksum, plausible length and type, payload checksum. Bounded by the
// data: at most one header check per byte and one payload check per plausible
// header. Forward only (a zstd source cannot go back), so when nothing is
// found it also tells where the data ends and whether every byte from
// `damaged` on is zero.
bool FindNextRecord(ByteSource& src, uint64_t damaged, bool check_payload, uint64_t& found, uint64_t& end,
                    bool& all_zero, Status& io) {
  all_zero = true;
  for (uint64_t o = damaged;; ++o) {
    const uint8_t* p = nullptr;
    size_t got = 0;
    io = src.Get(o, kRecordHeaderSize, p, got);
    if (!io.ok()) return false;
    if (got < kRecordHeaderSize) {
      if (all_zero) all_zero = std::all_of(p, p + got, [](uint8_t b) { return b == 0; });
      end = o + got;
      return false;
    }
    if (p[0] != 0) all_zero = false;
    if (o == damaged) continue;
    const RecordHeader rh = LoadRecordHeader(p);
    if (rh.header_crc != ComputeRecordHeaderCrc(p) || rh.payload_len > kMaxRecordPayload || rh.type == 0 ||
        (rh.flags & ~kRecordFlagsKnown) != 0) {
      continue;
    }
    io = src.Get(o, kRecordHeaderSize + rh.payload_len, p, got);
    if (!io.ok()) return false;
    if (got < kRecordHeaderSize + rh.payload_len) continue;
    if (check_payload &&
        ComputePayloadCrc({p + kRecordHeaderSize, rh.payload_len}) != rh.payload_crc) {
      continue;
    }
    found = o;
    return true;
  }
}

// Reads from `from` to the end of the data: its end offset and whether every
// byte is zero.
Status DataEnd(ByteSource& src, uint64_t from, uint64_t& end, bool& all_zero) {
  all_zero = true;
  constexpr size_t kStep = 1u << 20;
  uint64_t o = from;
  for (;;) {
    const uint8_t* p = nullptr;
    size_t got = 0;
    Status st = src.Get(o, kStep, p, got);
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
    case RecoveryMode::kStrict: return "strict";
    case RecoveryMode::kTolerateTornTail: return "tolerate-torn-tail";
    case RecoveryMode::kPointInTime: return "point-in-time";
    case RecoveryMode::kSalvage: return "salvage";
  }
  return "invalid";
}

bool ParseRecoveryMode(std::string_view name, RecoveryMode& out) {
  for (RecoveryMode m : {RecoveryMode::kStrict, RecoveryMode::kTolerateTornTail, RecoveryMode::kPointInTime,
                         RecoveryMode::kSalvage}) {
    if (name == RecoveryModeName(m)) {
      out = m;
      return true;
    }
  }
  return false;
}

std::string_view ProblemKindName(ProblemKind k) {
  switch (k) {
    case ProblemKind::kTornTail: return "torn-tail";
    case ProblemKind::kHeaderChecksum: return "header-checksum";
    case ProblemKind::kPayloadChecksum: return "payload-checksum";
    case ProblemKind::kBadLength: return "bad-length";
    case ProblemKind::kInvalidType: return "invalid-type";
    case ProblemKind::kUnknownType: return "unknown-type";
    case ProblemKind::kBadPayload: return "bad-payload";
    case ProblemKind::kBadSegmentHeader: return "bad-segment-header";
    case ProblemKind::kSegmentMismatch: return "segment-mismatch";
    case ProblemKind::kMissingSegment: return "missing-segment";
    case ProblemKind::kBrokenChain: return "broken-chain";
    case ProblemKind::kDuplicateSegment: return "duplicate-segment";
    case ProblemKind::kCompression: return "compression";
    case ProblemKind::kIo: return "io";
  }
  return "invalid";
}

std::string Problem::ToString() const {
  std::string s;
  if (node_known) s += fmt::format("node {}, ", node);
  s += file.empty() ? std::string("<no file>") : file;
  s += fmt::format(" at {}: {}", lsn().ToString(), detail);
  if (!expected.empty() || !actual.empty()) s += fmt::format(": expected {}, found {}", expected, actual);
  if (length > 0) s += fmt::format("; {} bytes {}", length, kind == ProblemKind::kTornTail ? "lost" : "dropped");
  return s;
}

SegmentScan ScanSegment(ByteSource& src, const SegmentFile& file, const ScanOptions& opt, const RecordVisitor& visit,
                        const ProblemSink& sink, const SegmentScan* prev) {
  SegmentScan s;
  s.file = file;
  auto report = [&](ProblemKind kind, bool fatal, uint64_t offset, uint64_t length, std::string detail,
                    std::string expected = {}, std::string actual = {}) {
    Problem p;
    p.kind = kind;
    p.fatal = fatal;
    p.node = s.header_ok ? s.header.node_id : opt.node_id;
    p.node_known = s.header_ok || opt.expect_node;
    p.file = file.path;
    p.segment = file.index;
    p.offset = offset;
    p.length = length;
    p.detail = std::move(detail);
    p.expected = std::move(expected);
    p.actual = std::move(actual);
    if (fatal && FailsRead(opt.mode, true)) s.failed = true;
    if (sink) sink(p);
  };
  auto io_fail = [&](const Status& st, uint64_t offset) {
    if (st.code() == ErrorCode::kCorruption) {
      // A zstd frame that does not decode is damage to the file, not an I/O
      // failure of this machine: the modes treat it like any other damage.
      // Nothing after this point of the segment can be read.
      report(ProblemKind::kCompression, true, offset, 0, st.message());
      s.end = opt.mode == RecoveryMode::kSalvage ? SegmentEnd::kSalvaged : SegmentEnd::kDamaged;
      s.damaged_to_end = true;
      return;
    }
    report(ProblemKind::kIo, true, offset, 0, st.message());
    s.end = SegmentEnd::kIoError;
    s.failed = true;
  };

  // --- Segment header.
  const uint8_t* p = nullptr;
  size_t got = 0;
  if (Status st = src.Get(0, kSegmentHeaderSize, p, got); !st.ok()) {
    io_fail(st, 0);
    return s;
  }
  HeaderError herr;
  if (!DecodeSegmentHeader({p, got}, s.header, herr)) {
    uint64_t end = got;
    bool zero = false;
    if (got == kSegmentHeaderSize) {
      if (Status st = DataEnd(src, 0, end, zero); !st.ok()) {
        io_fail(st, 0);
        return s;
      }
    }
    s.file_bytes = end;
    s.bytes_dropped = end;
    report(ProblemKind::kBadSegmentHeader, true, herr.offset, end, herr.what, herr.expected, herr.actual);
    s.end = SegmentEnd::kBadHeader;
    s.failed = FailsRead(opt.mode, true);
    return s;
  }
  s.header_ok = true;
  s.valid_end = kSegmentHeaderSize;
  s.last_end = kSegmentHeaderSize;
  bool identity_ok = true;
  if (s.header.segment_index != file.index) {
    report(ProblemKind::kSegmentMismatch, true, 24, 0, "segment header names another index than the file name",
           fmt::format("{:X}", file.index), fmt::format("{:X}", s.header.segment_index));
    identity_ok = false;
  }
  if (opt.expect_node && s.header.node_id != opt.node_id) {
    report(ProblemKind::kSegmentMismatch, true, 12, 0, "segment belongs to another node",
           fmt::format("node {}", opt.node_id), fmt::format("node {}", s.header.node_id));
    identity_ok = false;
  }
  if (opt.expect_cluster && s.header.cluster_id != opt.cluster_id) {
    report(ProblemKind::kSegmentMismatch, true, 16, 0, "segment belongs to another cluster",
           fmt::format("{:016x}", opt.cluster_id), fmt::format("{:016x}", s.header.cluster_id));
    identity_ok = false;
  }
  if (identity_ok && prev != nullptr && !CheckContinuity(*prev, s, sink)) {
    identity_ok = false;
    if (FailsRead(opt.mode, true)) s.failed = true;
  }
  if (!identity_ok && opt.mode != RecoveryMode::kSalvage) {
    // Rejected before any record was read: no intact prefix here.
    s.end = SegmentEnd::kDamaged;
    s.valid_end = 0;
    s.last_end = 0;
    return s;
  }

  // --- Records.
  uint64_t off = kSegmentHeaderSize;
  bool damaged = false;  // true once any damage was skipped: valid_end stops moving
  const uint8_t* base = nullptr;
  uint64_t size = 0;
  const bool contiguous = src.Contiguous(base, size);
  for (;;) {
    if (contiguous) {
      // Fast path over a map or buffer: intact records of known types, no
      // call per record. Anything else (the end, damage, unknown types)
      // falls through to the general code below, which decides.
      uint64_t next_release = off + (8u << 20);
      while (off + kRecordHeaderSize <= size) {
        const uint8_t* r = base + off;
        const RecordHeader rh = LoadRecordHeader(r);
        if (rh.header_crc != ComputeRecordHeaderCrc(r) || rh.payload_len > kMaxRecordPayload || rh.type == 0 ||
            rh.type > kMaxKnownRecordType || (rh.flags & ~kRecordFlagsKnown) != 0 ||
            rh.payload_len > size - off - kRecordHeaderSize) {
          break;
        }
        const std::span<const uint8_t> payload(r + kRecordHeaderSize, rh.payload_len);
        if (opt.check_payload_crc && ComputePayloadCrc(payload) != rh.payload_crc) break;
        const uint64_t total = kRecordHeaderSize + rh.payload_len;
        ++s.records;
        s.record_bytes += total;
        s.last_end = off + total;
        s.last_crc = rh.header_crc;
        if (!damaged) {
          s.valid_end = off + total;
          s.last_record_crc = rh.header_crc;
        }
        if (visit && !visit(RecordView{Lsn{file.index, off}, static_cast<RecordType>(rh.type), rh.flags,
                                       rh.header_crc, payload})) {
          s.end = SegmentEnd::kStopped;
          return s;
        }
        off += total;
        if (off >= next_release) {
          src.Release(off);
          next_release = off + (8u << 20);
        }
      }
    }
    src.Release(off);
    if (Status st = src.Get(off, kRecordHeaderSize, p, got); !st.ok()) {
      io_fail(st, off);
      return s;
    }
    if (got == 0) break;
    Damage dmg;
    bool ok = false;
    uint64_t zero_payload_end = 0;  // end of a record whose payload is all zeros
    uint64_t skip_to = 0;  // for intact records that are rejected (unknown type)
    RecordHeader rh{};
    if (got < kRecordHeaderSize) {
      dmg = {ProblemKind::kBadLength, fmt::format("{} header bytes", kRecordHeaderSize), fmt::format("{}", got),
             "record header cut short", true};
    } else {
      rh = LoadRecordHeader(p);
      const uint32_t hcrc = ComputeRecordHeaderCrc(p);
      if (rh.header_crc != hcrc) {
        dmg = {ProblemKind::kHeaderChecksum, fmt::format("{:08x}", hcrc), fmt::format("{:08x}", rh.header_crc),
               "record header checksum mismatch", false};
      } else if (rh.payload_len > kMaxRecordPayload) {
        dmg = {ProblemKind::kBadLength, fmt::format("at most {}", kMaxRecordPayload),
               fmt::format("{}", rh.payload_len), "record length over the limit", false};
      } else if (rh.type == 0 || (rh.flags & ~kRecordFlagsKnown) != 0) {
        dmg = {ProblemKind::kInvalidType, "a non-zero type and known flags",
               fmt::format("type {} flags {:04x}", rh.type, rh.flags), "invalid record type", false};
      } else {
        const size_t total = kRecordHeaderSize + rh.payload_len;
        if (Status st = src.Get(off, total, p, got); !st.ok()) {
          io_fail(st, off);
          return s;
        }
        if (got < total) {
          dmg = {ProblemKind::kBadLength, fmt::format("{} bytes", total), fmt::format("{} bytes remain", got),
                 "record runs past the end of the segment", true};
        } else {
          const std::span<const uint8_t> payload(p + kRecordHeaderSize, rh.payload_len);
          const uint32_t pcrc = opt.check_payload_crc ? ComputePayloadCrc(payload) : rh.payload_crc;
          if (pcrc != rh.payload_crc) {
            dmg = {ProblemKind::kPayloadChecksum, fmt::format("{:08x}", pcrc), fmt::format("{:08x}", rh.payload_crc),
                   "record payload checksum mismatch", false};
            // The header reached the disk but the payload did not: zeros
            // up to the end of the data are a crash artefact (decided below,
            // once it is known that nothing follows).
            zero_payload_end = std::all_of(payload.begin(), payload.end(), [](uint8_t b) { return b == 0; })
                                   ? off + total
                                   : 0;
          } else if (rh.type > kMaxKnownRecordType && (rh.flags & kRecordFlagSkippable) == 0) {
            dmg = {ProblemKind::kUnknownType, fmt::format("a type up to {}", kMaxKnownRecordType),
                   fmt::format("type {}", rh.type), "unknown record type (not marked skippable)", false};
            skip_to = off + total;
          } else {
            ok = true;
            if (rh.type > kMaxKnownRecordType) {
              ++s.skipped_unknown;
              s.skipped_unknown_bytes += total;
            } else if (visit) {
              RecordView v{Lsn{file.index, off}, static_cast<RecordType>(rh.type), rh.flags, rh.header_crc, payload};
              if (!visit(v)) {
                ++s.records;
                s.record_bytes += total;
                s.last_end = off + total;
                s.last_crc = rh.header_crc;
                if (!damaged) {
                  s.valid_end = off + total;
                  s.last_record_crc = rh.header_crc;
                }
                s.end = SegmentEnd::kStopped;
                return s;
              }
            }
            ++s.records;
            s.record_bytes += total;
            off += total;
            s.last_end = off;
            s.last_crc = rh.header_crc;
            if (!damaged) {
              s.valid_end = off;
              s.last_record_crc = rh.header_crc;
            }
          }
        }
      }
    }
    if (ok) continue;

    // --- Damage at `off`: is anything intact after it?
    uint64_t next = 0;
    uint64_t end = off;
    bool zero = false;
    Status io;
    bool found = false;
    if (skip_to != 0) {
      next = skip_to;
      found = true;
    } else {
      found = FindNextRecord(src, off, opt.check_payload_crc, next, end, zero, io);
      if (!io.ok()) {
        io_fail(io, off);
        return s;
      }
    }
    if (!found) {
      s.damaged_to_end = true;
      s.file_bytes = end;
      if (zero_payload_end != 0 && zero_payload_end == end && rh.payload_len > 0) {
        dmg.incomplete = true;
        dmg.detail = "record payload never written (zeros)";
      }
      if (opt.is_last && (dmg.incomplete || zero)) {
        // A crash while appending: the record is shorter than it says, or
        // the file was extended with zeros the write never reached.
        s.end = SegmentEnd::kTornTail;
        s.torn_offset = off;
        s.zero_filled_tail = zero;
        s.bytes_dropped += end - off;
        const bool fatal = opt.mode == RecoveryMode::kStrict;
        report(ProblemKind::kTornTail, fatal, off, end - off,
               zero ? std::string("torn tail (zero-filled)") : fmt::format("torn tail ({})", dmg.detail),
               dmg.expected, dmg.actual);
        return s;
      }
      s.bytes_dropped += end - off;
      report(dmg.kind, true, off, end - off, dmg.detail + (opt.is_last ? "" : " (not the last segment)"),
             dmg.expected, dmg.actual);
      s.end = opt.mode == RecoveryMode::kSalvage ? SegmentEnd::kSalvaged : SegmentEnd::kDamaged;
      return s;
    }
    s.bytes_dropped += next - off;
    report(dmg.kind, true, off, next - off,
           dmg.detail + fmt::format(" (next intact record at {})", Lsn{file.index, next}.ToString()), dmg.expected,
           dmg.actual);
    if (opt.mode != RecoveryMode::kSalvage) {
      s.end = SegmentEnd::kDamaged;
      uint64_t end = next;
      bool zero = false;
      if (Status st = DataEnd(src, next, end, zero); st.ok()) s.file_bytes = end;
      return s;
    }
    damaged = true;
    off = next;
  }
  s.file_bytes = off;
  s.end = damaged ? SegmentEnd::kSalvaged : SegmentEnd::kClean;
  return s;
}

SegmentScan ScanSegmentFile(const SegmentFile& file, const ScanOptions& opt, const RecordVisitor& visit,
                            const ProblemSink& sink, const SegmentScan* prev) {
  auto src = OpenSegmentSource(file.path, file.compressed);
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
  while (dirent* e = readdir(d)) {
    uint64_t index = 0;
    bool compressed = false;
    if (!ParseSegmentName(e->d_name, index, compressed)) continue;
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
      p.detail = fmt::format("segment present as both {} and {}; reading the .wal",
                             BaseName(have.path), BaseName(f.path));
      if (sink) sink(p);
      if (have.compressed) have = f;
    }
  }
  closedir(d);
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
    const bool damaged = s.end == SegmentEnd::kDamaged || s.end == SegmentEnd::kBadHeader ||
                         s.end == SegmentEnd::kIoError;
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

NodeRead ReadNodeWal(const std::vector<SegmentFile>& segments, const NodeReadOptions& opt,
                     const RecordVisitor& visit, const ProblemSink& sink) {
  NodeWalReader reader(segments, opt, visit, sink);
  while (!reader.done()) reader.Step();
  return reader.Take();
}

}  // namespace walfmt
