// The corruption suite, after LevelDB's log_test: a multi-segment log written
// by WalWriter (fixed seed), byte mutators (increment a byte, set a byte,
// truncate, re-sign a checksum so the next check is reached), and every error
// path asserting three things: the records returned, the bytes dropped and
// the problem (kind, position, message). Every scenario runs over plain and
// zstd segments, and over plain segments read ahead (whose records the
// read-ahead's chain check vouches for, so that the reader skips their
// checksums: the same findings must come out).
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "test_files.h"
#include "walfmt/bytes.h"
#include "walfmt/chain_check.h"
#include "walfmt/crc32c.h"
#include "walfmt/reader.h"
#include "walfmt/record.h"
#include "walfmt/segment.h"
#include "walfmt/source.h"
#include "walfmt/writer.h"
#ifdef WALCUT_TEST_SEAMS
#include "walfmt/test_seams.h"
#endif

namespace {

using namespace walfmt;
using walcut::testing::ReadFileBytes;
using walcut::testing::TempDir;
using walcut::testing::WriteFileBytes;

// --- Files -----------------------------------------------------------------

std::span<const uint8_t> Span(const std::string& s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }

std::string Compress(const std::string& s) {
  auto z = ZstdCompress(Span(s));
  REQUIRE(z.ok());
  return *z;
}

// --- The log ---------------------------------------------------------------

enum class Variant { kPlain, kZstd, kReadAhead };
const char* VariantName(Variant v) {
  return v == Variant::kPlain ? "plain" : v == Variant::kZstd ? "zstd" : "read-ahead";
}
// Set while a kReadAhead case runs: node reads (ReadNode) read ahead too.
bool g_read_ahead = false;
struct ReadAheadScope {
  ReadAheadScope() { g_read_ahead = true; }
  ~ReadAheadScope() { g_read_ahead = false; }
  ReadAheadScope(const ReadAheadScope&) = delete;
  ReadAheadScope& operator=(const ReadAheadScope&) = delete;
};
// The read-ahead's block size in memory, by segment: small and odd, so that
// headers and payloads straddle blocks everywhere (1 byte at a time for some).
size_t ReadAheadBlock(uint64_t index) {
  static constexpr size_t kSizes[] = {997, 1, 16, 15, 4096, 233, 17, 64};
  return kSizes[index % std::size(kSizes)];
}

// A record as written, or as a reader handed it to the visitor.
struct Rec {
  Lsn lsn;
  uint16_t type = 0;
  uint16_t flags = 0;
  std::string payload;
  uint32_t header_crc = 0;
  uint64_t size() const { return kRecordHeaderSize + payload.size(); }
  uint64_t end() const { return lsn.offset + size(); }
  bool operator==(const Rec&) const = default;
};

std::string Summary(const Rec& r) {
  return fmt::format("{} type {} flags {} len {} hcrc {:08x} pcrc {:08x}", r.lsn.ToString(), r.type, r.flags,
                     r.payload.size(), r.header_crc, crc32c::Value(r.payload.data(), r.payload.size()));
}

// "" when equal, else where the lists first differ.
std::string Diff(const std::vector<Rec>& got, const std::vector<Rec>& want) {
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    if (!(got[i] == want[i])) {
      return fmt::format("record {} differs: got [{}] want [{}]", i, Summary(got[i]), Summary(want[i]));
    }
  }
  if (got.size() != want.size()) {
    return fmt::format("got {} records, want {}; first extra: [{}]", got.size(), want.size(),
                       got.size() > want.size() ? Summary(got[want.size()]) : Summary(want[got.size()]));
  }
  return "";
}

std::string RandomString(std::mt19937_64& rng, size_t max_len) {
  std::string s(rng() % (max_len + 1), '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

Record RandomRecord(std::mt19937_64& rng, uint64_t n) {
  const TxId tx{static_cast<uint32_t>(rng() % 4), n + 1};
  switch (rng() % 12) {
    case 0:
    case 1:
    case 2:
    case 3: {
      TxData r{tx, {}};
      r.writes.resize(rng() % 5);
      for (auto& w : r.writes) {
        w.op = rng() % 4 == 0 ? WriteOp::kDelete : WriteOp::kPut;
        w.key = RandomString(rng, 24);
        // Mostly small values, now and then one large enough to force an
        // early roll.
        if (w.op == WriteOp::kPut) w.value = RandomString(rng, rng() % 30 == 0 ? 2500 : 160);
      }
      return r;
    }
    case 4:
      return TxPrepare{tx, rng(), {0, 1, 2}};
    case 5:
      return TxCommit{tx, rng() % 9, rng(), static_cast<uint16_t>(rng() % 4), {0, 2}};
    case 6:
      return TxRollback{tx, rng(), 0, {1, 3}};
    case 7:
      return CutStart{rng() % 9, rng()};
    case 8: {
      CutFinish r{rng() % 9, rng(), {}, {}};
      r.before.resize(rng() % 6, tx);
      r.after.resize(rng() % 3, tx);
      return r;
    }
    case 9:
      return CutAbort{rng() % 9, rng(), CutAbortReason::kParticipantLost, RandomString(rng, 40)};
    case 10:
      return Snapshot{"snap-" + std::to_string(n), rng(), rng()};
    default:
      return NodeStart{static_cast<uint32_t>(rng() % 5), rng()};
  }
}

struct RawRecord {
  uint16_t type;
  uint16_t flags;
  std::string payload;
};

struct LogSpec {
  uint64_t seed = 0x10C0001;
  int records = 420;
  uint64_t segment_bytes = 6000;
  uint32_t node = 7;
  uint64_t cluster = 0xC105732Aull;
  std::map<int, RawRecord> raw;  // appended (AppendRaw) just before record number `key`
};

std::string SeedInfo(const LogSpec& s) { return fmt::format("log seed {:#x}", s.seed); }

struct Log {
  uint32_t node = 0;
  uint64_t cluster = 0;
  std::vector<std::string> segs;  // every segment's bytes, uncompressed
  std::vector<Rec> recs;          // every record, in order

  uint64_t last() const { return segs.size() - 1; }
  std::vector<Rec> Where(const std::function<bool(const Rec&)>& keep) const {
    std::vector<Rec> out;
    for (const Rec& r : recs) {
      if (keep(r)) out.push_back(r);
    }
    return out;
  }
  std::vector<Rec> In(uint64_t seg) const {
    return Where([&](const Rec& r) { return r.lsn.segment == seg; });
  }
  std::vector<Rec> Before(Lsn at) const {
    return Where([&](const Rec& r) { return r.lsn < at; });
  }
};

// The framing computed here, independently of the writer: checks that the
// bytes in the file are what segment.h documents.
std::string Frame(uint16_t type, uint16_t flags, const std::string& payload) {
  std::string h;
  PutU32(h, 0);
  PutU32(h, static_cast<uint32_t>(payload.size()));
  PutU16(h, type);
  PutU16(h, flags);
  PutU32(h, MaskCrc(crc32c::Value(payload.data(), payload.size())));
  const uint32_t hcrc = MaskCrc(crc32c::Value(h.data() + 4, 12));
  std::string out;
  PutU32(out, hcrc);
  return out + h.substr(4) + payload;
}

Log BuildLog(const LogSpec& spec) {
  INFO(SeedInfo(spec));
  TempDir dir;
  WriterOptions opt;
  opt.wal_dir = dir.path() + "/wal";
  opt.node_id = spec.node;
  opt.cluster_id = spec.cluster;
  opt.segment_bytes = spec.segment_bytes;
  auto w = WalWriter::Create(opt, 1000);
  REQUIRE(w.ok());
  std::mt19937_64 rng(spec.seed);
  Log log;
  log.node = spec.node;
  log.cluster = spec.cluster;
  auto add = [&](Result<Lsn> lsn, uint16_t type, uint16_t flags, std::string payload) {
    INFO(lsn.status().message());
    REQUIRE(lsn.ok());
    Rec r{*lsn, type, flags, std::move(payload), 0};
    const std::string framed = Frame(type, flags, r.payload);
    r.header_crc = LoadU32(reinterpret_cast<const uint8_t*>(framed.data()));
    log.recs.push_back(std::move(r));
  };
  for (int i = 0; i < spec.records; ++i) {
    (*w)->set_time_us(1000 + static_cast<uint64_t>(i));
    if (auto it = spec.raw.find(i); it != spec.raw.end()) {
      add((*w)->AppendRaw(it->second.type, it->second.flags, Span(it->second.payload)), it->second.type,
          it->second.flags, it->second.payload);
    }
    const Record rec = RandomRecord(rng, static_cast<uint64_t>(i));
    std::string payload;
    REQUIRE(EncodePayload(rec, payload).ok());
    add((*w)->Append(rec), static_cast<uint16_t>(TypeOf(rec)), 0, payload);
  }
  REQUIRE((*w)->Close().ok());
  const uint64_t last = log.recs.back().lsn.segment;
  for (uint64_t i = 0; i <= last; ++i) log.segs.push_back(ReadFileBytes(opt.wal_dir + "/" + SegmentFileName(i, false)));
  REQUIRE(!std::filesystem::exists(opt.wal_dir + "/" + SegmentFileName(last + 1, false)));
  // The bytes are exactly header + framed records, back to back.
  std::vector<uint64_t> ends(log.segs.size(), kSegmentHeaderSize);
  for (const Rec& r : log.recs) {
    INFO(Summary(r));
    REQUIRE(r.lsn.offset == ends[r.lsn.segment]);
    REQUIRE(log.segs[r.lsn.segment].substr(r.lsn.offset, r.size()) == Frame(r.type, r.flags, r.payload));
    ends[r.lsn.segment] = r.end();
  }
  for (size_t i = 0; i < log.segs.size(); ++i) REQUIRE(ends[i] == log.segs[i].size());
  return log;
}

// Built once: ~10 segments of up to 6000 bytes, ~400 records. Its users say
// INFO(SeedInfo(kDefaultSpec)) so that a failure names the seed.
const LogSpec kDefaultSpec{};
const Log& DefaultLog() {
  static const Log log = [] {
    Log l = BuildLog(kDefaultSpec);
    REQUIRE(l.segs.size() >= 8);
    REQUIRE(l.In(l.last()).size() >= 10);
    REQUIRE(l.In(l.segs.size() / 2).size() >= 10);
    return l;
  }();
  return log;
}

// --- Reading ---------------------------------------------------------------

Rec FromView(const RecordView& v) {
  return Rec{v.lsn, static_cast<uint16_t>(v.type), v.flags,
             std::string(reinterpret_cast<const char*>(v.payload.data()), v.payload.size()), v.header_crc};
}

struct ScanOutcome {
  SegmentScan scan;
  std::vector<Rec> recs;
  std::vector<Problem> problems;
};

std::string MemPath(uint64_t index, Variant v) { return "mem/" + SegmentFileName(index, v == Variant::kZstd); }

// Segment content as a reader gets it: for kZstd compressed (and read back
// through the streaming decoder). An exact-size heap buffer, so ASan catches a
// read past the end.
struct Input {
  Variant v;
  std::vector<uint8_t> buf;
};
Input Prepare(const std::string& bytes, Variant v) {
  const std::string data = v == Variant::kZstd ? Compress(bytes) : bytes;
  return Input{v, std::vector<uint8_t>(data.begin(), data.end())};
}

ScanOutcome ScanInput(const Input& in, uint64_t index, ScanOptions opt, const SegmentScan* prev = nullptr) {
  const Variant v = in.v;
  auto src = v == Variant::kReadAhead
                 ? detail::CheckedMemorySource({in.buf.data(), in.buf.size()}, ReadAheadBlock(index))
                 : MemorySource({in.buf.data(), in.buf.size()}, v == Variant::kZstd);
  ScanOutcome out;
  const SegmentFile file{MemPath(index, v), index, v == Variant::kZstd};
  out.scan = ScanSegment(
      *src, file, opt,
      [&](const RecordView& rv) {
        out.recs.push_back(FromView(rv));
        return true;
      },
      [&](const Problem& p) { out.problems.push_back(p); }, prev);
  return out;
}

// Scans `bytes` (uncompressed segment content) from memory.
ScanOutcome ScanBytes(const std::string& bytes, Variant v, uint64_t index, ScanOptions opt,
                      const SegmentScan* prev = nullptr) {
  return ScanInput(Prepare(bytes, v), index, opt, prev);
}

ScanOptions Opts(RecoveryMode mode, bool is_last) {
  ScanOptions o;
  o.mode = mode;
  o.is_last = is_last;
  return o;
}

struct NodeOutcome {
  NodeRead read;
  std::vector<Rec> recs;
  std::vector<Problem> problems;
};

NodeOutcome ReadNode(const std::vector<SegmentFile>& files, RecoveryMode mode, Lsn from = {},
                     bool check_payload = true) {
  NodeOutcome out;
  NodeReadOptions opt;
  opt.mode = mode;
  opt.from = from;
  opt.check_payload_crc = check_payload;
  opt.read_ahead = g_read_ahead;
  out.read = ReadNodeWal(
      files, opt,
      [&](const RecordView& rv) {
        out.recs.push_back(FromView(rv));
        return true;
      },
      [&](const Problem& p) { out.problems.push_back(p); });
  return out;
}

// A node's WAL directory on disk, rewritten segment by segment.
class WalDir {
 public:
  explicit WalDir(Variant v) : v_(v), wal_(tmp_.path() + "/wal") { std::filesystem::create_directories(wal_); }
  const std::string& path() const { return wal_; }
  std::string FilePath(uint64_t index) const { return wal_ + "/" + SegmentFileName(index, v_ == Variant::kZstd); }
  void Put(uint64_t index, const std::string& bytes) {
    WriteFileBytes(FilePath(index), v_ == Variant::kZstd ? Compress(bytes) : bytes);
  }
  void PutAll(const std::vector<std::string>& segs) {
    for (size_t i = 0; i < segs.size(); ++i) Put(i, segs[i]);
  }
  void Remove(uint64_t index) { REQUIRE(std::filesystem::remove(FilePath(index))); }
  std::vector<SegmentFile> List(std::vector<Problem>* problems = nullptr) const {
    std::vector<Problem> local;
    auto l = ListSegments(wal_, [&](const Problem& p) { local.push_back(p); });
    REQUIRE(l.ok());
    if (problems != nullptr) {
      *problems = local;
    } else {
      REQUIRE(local.empty());
    }
    return *l;
  }

 private:
  Variant v_;
  TempDir tmp_;
  std::string wal_;
};

// --- Expected problems -----------------------------------------------------

struct Want {
  ProblemKind kind;
  bool fatal = true;
  uint64_t segment = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  std::string detail;
  std::string expected;
  std::string actual;
  std::string file;              // checked when not empty
  std::optional<uint32_t> node;  // checked when set: node_known and node
};

// "" when `p` is exactly `w`, else every field that differs.
std::string ProblemDiff(const Problem& p, const Want& w) {
  std::string d;
  auto field = [&](const char* name, const std::string& got, const std::string& want) {
    if (got != want) d += fmt::format("\n  {}: got \"{}\", want \"{}\"", name, got, want);
  };
  field("kind", std::string(ProblemKindName(p.kind)), std::string(ProblemKindName(w.kind)));
  field("fatal", p.fatal ? "true" : "false", w.fatal ? "true" : "false");
  field("segment", std::to_string(p.segment), std::to_string(w.segment));
  field("offset", std::to_string(p.offset), std::to_string(w.offset));
  field("length", std::to_string(p.length), std::to_string(w.length));
  field("detail", p.detail, w.detail);
  field("expected", p.expected, w.expected);
  field("actual", p.actual, w.actual);
  if (!w.file.empty()) field("file", p.file, w.file);
  if (w.node) {
    field("node_known", p.node_known ? "true" : "false", "true");
    field("node", std::to_string(p.node), std::to_string(*w.node));
  }
  return d.empty() ? d : p.ToString() + d;
}

void CheckProblem(const Problem& p, const Want& w) { CHECK(ProblemDiff(p, w) == ""); }
// In loops over thousands of inputs: stop at the first one that differs.
void RequireProblem(const Problem& p, const Want& w) { REQUIRE(ProblemDiff(p, w) == ""); }

std::string Kinds(const std::vector<Problem>& ps) {
  std::string s;
  for (const Problem& p : ps) s += std::string(ProblemKindName(p.kind)) + " @ " + p.lsn().ToString() + "; ";
  return s;
}

bool FailsIn(RecoveryMode m) { return m == RecoveryMode::kStrict || m == RecoveryMode::kTolerateTornTail; }

constexpr RecoveryMode kModes[] = {RecoveryMode::kStrict, RecoveryMode::kTolerateTornTail, RecoveryMode::kPointInTime,
                                   RecoveryMode::kSalvage};

// The scans of the intact segments, for `prev` arguments.
std::vector<SegmentScan> IntactScans(const Log& log, Variant v) {
  std::vector<SegmentScan> out;
  for (uint64_t i = 0; i < log.segs.size(); ++i) {
    auto o =
        ScanBytes(log.segs[i], v, i, Opts(RecoveryMode::kStrict, i == log.last()), out.empty() ? nullptr : &out.back());
    REQUIRE(o.problems.empty());
    out.push_back(o.scan);
  }
  return out;
}

std::string Hex8(uint32_t v) { return fmt::format("{:08x}", v); }
const uint8_t* U8(const std::string& s) { return reinterpret_cast<const uint8_t*>(s.data()); }

// Stores `v` as the record's payload_len and re-signs the header checksum.
void SetLengthResigned(std::string& seg, uint64_t off, uint32_t v) {
  StoreU32(reinterpret_cast<uint8_t*>(seg.data()) + off + 4, v);
  StoreU32(reinterpret_cast<uint8_t*>(seg.data()) + off, ComputeRecordHeaderCrc(U8(seg) + off));
}

// Re-signs a segment header after a field was changed.
void ResignSegmentHeader(std::string& seg) {
  StoreU32(reinterpret_cast<uint8_t*>(seg.data()) + 60, MaskCrc(crc32c::Value(seg.data(), 60)));
}

}  // namespace

// Every scenario runs three times, as separate test cases: over plain
// segments, over zstd-compressed ones (MemorySource(zstd bytes, true) /
// .wal.zst files), and over plain ones read ahead (CheckedMemorySource in
// small blocks / OpenSegmentSource's read_ahead), so a defect of one variant
// is reported (and, if known, tagged) on its own.
#define VARIANT_TEST_CASE(fn, name, tags, zstd_tags)                \
  static void fn(Variant v);                                        \
  TEST_CASE(name " (plain)", tags) { fn(Variant::kPlain); }         \
  TEST_CASE(name " (zstd)", tags zstd_tags) { fn(Variant::kZstd); } \
  TEST_CASE(name " (read-ahead)", tags) {                           \
    ReadAheadScope scope;                                           \
    fn(Variant::kReadAhead);                                        \
  }                                                                 \
  static void fn(Variant v)

// ===========================================================================
// Intact logs.

VARIANT_TEST_CASE(IntactLog, "reader: an intact log reads back exactly in every mode", "[reader]", "") {
  const Log& log = DefaultLog();
  INFO(SeedInfo(kDefaultSpec));
  INFO(VariantName(v));
  WalDir dir(v);
  dir.PutAll(log.segs);
  const auto files = dir.List();
  REQUIRE(files.size() == log.segs.size());
  for (RecoveryMode mode : kModes) {
    INFO(RecoveryModeName(mode));
    const NodeOutcome o = ReadNode(files, mode);
    CHECK(Kinds(o.problems) == "");
    CHECK(Diff(o.recs, log.recs) == "");
    CHECK_FALSE(o.read.failed);
    CHECK_FALSE(o.read.stopped);
    CHECK(o.read.end == Lsn{log.last(), log.segs.back().size()});
    REQUIRE(o.read.segments.size() == log.segs.size());
    for (uint64_t i = 0; i < log.segs.size(); ++i) {
      INFO("segment " << i);
      const SegmentScan& s = o.read.segments[i];
      const auto in = log.In(i);
      CHECK(s.header_ok);
      CHECK(s.header.segment_index == i);
      CHECK(s.header.node_id == log.node);
      CHECK(s.header.cluster_id == log.cluster);
      CHECK(s.end == SegmentEnd::kClean);
      CHECK(s.records == in.size());
      CHECK(s.bytes_dropped == 0);
      CHECK(s.valid_end == log.segs[i].size());
      CHECK(s.file_bytes == log.segs[i].size());
      CHECK(s.last_record_crc == in.back().header_crc);
      CHECK(s.record_bytes == log.segs[i].size() - kSegmentHeaderSize);
      CHECK_FALSE(s.failed);
    }
  }
  // Every payload decodes.
  for (const Rec& r : log.recs) {
    INFO(Summary(r));
    CHECK(DecodePayload(static_cast<RecordType>(r.type), Span(r.payload)).ok());
  }
}

VARIANT_TEST_CASE(StopFromUnchecked, "reader: visitor stop, `from` and unchecked payloads", "[reader]", "") {
  const Log& log = DefaultLog();
  INFO(SeedInfo(kDefaultSpec));
  INFO(VariantName(v));
  WalDir dir(v);
  dir.PutAll(log.segs);
  const auto files = dir.List();

  SECTION("the visitor stops the read") {
    const size_t stop_at = log.recs.size() / 2;
    std::vector<Rec> got;
    NodeReadOptions opt;
    std::vector<Problem> problems;
    const NodeRead r = ReadNodeWal(
        files, opt,
        [&](const RecordView& rv) {
          got.push_back(FromView(rv));
          return got.size() <= stop_at;
        },
        [&](const Problem& p) { problems.push_back(p); });
    const Rec& last = log.recs[stop_at];
    CHECK(Diff(got, std::vector<Rec>(log.recs.begin(), log.recs.begin() + static_cast<ptrdiff_t>(stop_at) + 1)) == "");
    CHECK(problems.empty());
    CHECK(r.stopped);
    CHECK_FALSE(r.failed);
    CHECK(r.end == Lsn{last.lsn.segment, last.end()});
    REQUIRE(r.segments.size() == last.lsn.segment + 1);
    CHECK(r.segments.back().end == SegmentEnd::kStopped);
    CHECK(r.segments.back().valid_end == last.end());
  }
  SECTION("from skips earlier records and does not open earlier segments") {
    const Rec from = log.In(3)[2];
    // Segments wholly before `from` are not opened: removing them changes nothing.
    dir.Remove(0);
    dir.Remove(1);
    const NodeOutcome o = ReadNode(files, RecoveryMode::kStrict, from.lsn);
    CHECK(Kinds(o.problems) == "");
    CHECK(Diff(o.recs, log.Where([&](const Rec& r) { return r.lsn >= from.lsn; })) == "");
    CHECK_FALSE(o.read.failed);
  }
  SECTION("check_payload_crc = false hands over a damaged payload") {
    const Rec victim = log.In(4)[3];
    std::string seg = log.segs[4];
    ++seg[victim.lsn.offset + kRecordHeaderSize + 1];
    dir.Put(4, seg);
    const NodeOutcome o = ReadNode(files, RecoveryMode::kStrict, {}, false);
    CHECK(Kinds(o.problems) == "");
    std::vector<Rec> want = log.recs;
    for (Rec& r : want) {
      if (r.lsn == victim.lsn) ++r.payload[1];
    }
    CHECK(Diff(o.recs, want) == "");
    // With the check on, the same byte is found.
    const NodeOutcome checked = ReadNode(files, RecoveryMode::kStrict);
    REQUIRE(checked.problems.size() == 1);
    CHECK(checked.problems[0].kind == ProblemKind::kPayloadChecksum);
    CHECK(checked.problems[0].lsn() == victim.lsn);
  }
}

// ===========================================================================
// 1. Truncation.

VARIANT_TEST_CASE(TruncateLastSegmentScan, "reader: truncation at every byte offset of the last segment (ScanSegment)",
                  "[reader][corruption]", "") {
  const Log& log = DefaultLog();
  INFO(SeedInfo(kDefaultSpec));
  INFO(VariantName(v));
  const uint64_t last = log.last();
  const std::string& seg = log.segs[last];
  const std::vector<Rec> in = log.In(last);
  const std::vector<SegmentScan> prev = IntactScans(log, v);
  for (uint64_t cut = 0; cut <= seg.size(); ++cut) {
    INFO("cut at " << cut << " of " << seg.size());
    const std::string bytes = seg.substr(0, cut);
    const Input input = Prepare(bytes, v);
    // The records that end at or before the cut; the one it falls in.
    std::vector<Rec> kept;
    const Rec* torn = nullptr;
    for (const Rec& r : in) {
      if (r.end() <= cut)
        kept.push_back(r);
      else if (r.lsn.offset < cut)
        torn = &r;
    }
    for (RecoveryMode mode : kModes) {
      INFO(RecoveryModeName(mode));
      const ScanOutcome o = ScanInput(input, last, Opts(mode, true), &prev[last - 1]);
      const SegmentScan& s = o.scan;
      if (cut < kSegmentHeaderSize) {
        REQUIRE(o.problems.size() == 1);
        RequireProblem(o.problems[0], {ProblemKind::kBadSegmentHeader, true, last, 0, cut, "segment header cut short",
                                       "64 bytes", fmt::format("{} bytes", cut), MemPath(last, v), std::nullopt});
        REQUIRE_FALSE(o.problems[0].node_known);
        REQUIRE(o.recs.empty());
        REQUIRE_FALSE(s.header_ok);
        REQUIRE(s.end == SegmentEnd::kBadHeader);
        REQUIRE(s.bytes_dropped == cut);
        REQUIRE(s.failed == FailsIn(mode));
        continue;
      }
      REQUIRE(Diff(o.recs, kept) == "");
      REQUIRE(s.records == kept.size());
      REQUIRE(s.file_bytes == cut);
      if (torn == nullptr) {
        // On a record boundary (or right after the header): clean.
        REQUIRE(Kinds(o.problems) == "");
        REQUIRE(s.end == SegmentEnd::kClean);
        REQUIRE(s.valid_end == cut);
        REQUIRE(s.bytes_dropped == 0);
        REQUIRE_FALSE(s.failed);
        continue;
      }
      const uint64_t at = torn->lsn.offset;
      const uint64_t have = cut - at;
      const bool zero =
          std::all_of(bytes.begin() + static_cast<ptrdiff_t>(at), bytes.end(), [](char c) { return c == 0; });
      const bool header_cut = have < kRecordHeaderSize;
      const std::string why = header_cut ? "record header cut short" : "record runs past the end of the segment";
      REQUIRE(o.problems.size() == 1);
      RequireProblem(o.problems[0], {ProblemKind::kTornTail, mode == RecoveryMode::kStrict, last, at, have,
                                     zero ? "torn tail (zero-filled)" : "torn tail (" + why + ")",
                                     header_cut ? "16 header bytes" : fmt::format("{} bytes", torn->size()),
                                     header_cut ? fmt::format("{}", have) : fmt::format("{} bytes remain", have),
                                     MemPath(last, v), log.node});
      REQUIRE(s.end == SegmentEnd::kTornTail);
      REQUIRE(s.torn_offset == at);
      REQUIRE(s.valid_end == at);
      REQUIRE(s.bytes_dropped == have);
      REQUIRE(s.zero_filled_tail == zero);
      REQUIRE(s.last_record_crc == (kept.empty() ? 0u : kept.back().header_crc));
      REQUIRE(s.failed == (mode == RecoveryMode::kStrict));
    }
  }
}

VARIANT_TEST_CASE(TruncateLastSegmentNode, "reader: truncation at every byte offset of the last segment (ReadNodeWal)",
                  "[reader][corruption]", "") {
  // A smaller log than the default one: every cut rewrites the last file and
  // reads the whole directory twice.
  LogSpec spec;
  spec.seed = 0x10C0002;
  spec.records = 70;
  spec.segment_bytes = 2500;
  INFO(SeedInfo(spec));
  const Log log = BuildLog(spec);
  REQUIRE(log.segs.size() >= 3);
  REQUIRE(log.In(log.last()).size() >= 5);
  INFO(VariantName(v));
  const uint64_t last = log.last();
  const std::string& seg = log.segs[last];
  WalDir dir(v);
  dir.PutAll(log.segs);
  const auto files = dir.List();
  const Lsn end_before{last - 1, log.segs[last - 1].size()};
  for (uint64_t cut = 0; cut <= seg.size(); ++cut) {
    INFO("cut at " << cut << " of " << seg.size());
    dir.Put(last, seg.substr(0, cut));
    std::vector<Rec> kept = log.Where([&](const Rec& r) { return r.lsn.segment < last || r.end() <= cut; });
    const Rec* torn = nullptr;
    for (const Rec& r : log.recs) {
      if (r.lsn.segment == last && r.lsn.offset < cut && r.end() > cut) torn = &r;
    }
    for (RecoveryMode mode : {RecoveryMode::kTolerateTornTail, RecoveryMode::kStrict}) {
      INFO(RecoveryModeName(mode));
      const NodeOutcome o = ReadNode(files, mode);
      REQUIRE(Diff(o.recs, kept) == "");
      REQUIRE(o.read.segments.size() == log.segs.size());
      const SegmentScan& s = o.read.segments.back();
      REQUIRE_FALSE(o.read.stopped);
      if (cut < kSegmentHeaderSize) {
        REQUIRE(o.problems.size() == 1);
        // The node is known from the predecessor even though this header is unreadable.
        RequireProblem(o.problems[0], {ProblemKind::kBadSegmentHeader, true, last, 0, cut, "segment header cut short",
                                       "64 bytes", fmt::format("{} bytes", cut), dir.FilePath(last), log.node});
        REQUIRE(o.read.failed);
        REQUIRE(o.read.end == end_before);
        REQUIRE(s.bytes_dropped == cut);
      } else if (torn == nullptr) {
        REQUIRE(Kinds(o.problems) == "");
        REQUIRE_FALSE(o.read.failed);
        REQUIRE(o.read.end == Lsn{last, cut});
        REQUIRE(s.bytes_dropped == 0);
      } else {
        REQUIRE(o.problems.size() == 1);
        const Problem& p = o.problems[0];
        REQUIRE(p.kind == ProblemKind::kTornTail);
        REQUIRE(p.fatal == (mode == RecoveryMode::kStrict));
        REQUIRE(p.lsn() == torn->lsn);
        REQUIRE(p.length == cut - torn->lsn.offset);
        REQUIRE(p.file == dir.FilePath(last));
        REQUIRE(s.torn_offset == torn->lsn.offset);
        REQUIRE(s.bytes_dropped == cut - torn->lsn.offset);
        REQUIRE(s.failed == (mode == RecoveryMode::kStrict));
        REQUIRE(o.read.failed == (mode == RecoveryMode::kStrict));
        REQUIRE(o.read.end == torn->lsn);
      }
    }
  }
}

VARIANT_TEST_CASE(MiddleSegmentCutShort, "reader: a middle segment cut short is damage, not a torn tail",
                  "[reader][corruption]", "") {
  const Log& log = DefaultLog();
  INFO(SeedInfo(kDefaultSpec));
  INFO(VariantName(v));
  const uint64_t m = log.segs.size() / 2;
  const std::vector<Rec> in = log.In(m);
  const std::vector<SegmentScan> prev = IntactScans(log, v);
  // Inside a record header, inside a payload, one byte short of the end.
  const Rec& a = in[3];
  const Rec& b = in[5];
  const Rec& z = in.back();
  for (uint64_t cut : {a.lsn.offset + 7, b.lsn.offset + kRecordHeaderSize + 2, z.end() - 1}) {
    INFO("cut at " << cut);
    const Rec& torn = cut < a.end() ? a : cut < b.end() ? b : z;
    const uint64_t have = cut - torn.lsn.offset;
    const bool header_cut = have < kRecordHeaderSize;
    for (RecoveryMode mode : kModes) {
      INFO(RecoveryModeName(mode));
      const ScanOutcome o = ScanBytes(log.segs[m].substr(0, cut), v, m, Opts(mode, false), &prev[m - 1]);
      CHECK(Diff(o.recs, log.Where([&](const Rec& r) { return r.lsn.segment == m && r.end() <= cut; })) == "");
      REQUIRE(o.problems.size() == 1);
      CheckProblem(
          o.problems[0],
          {ProblemKind::kBadLength, true, m, torn.lsn.offset, have,
           (header_cut ? "record header cut short" : "record runs past the end of the segment") +
               std::string(" (not the last segment)"),
           header_cut ? "16 header bytes" : fmt::format("{} bytes", torn.size()),
           header_cut ? fmt::format("{}", have) : fmt::format("{} bytes remain", have), MemPath(m, v), log.node});
      CHECK(o.scan.end == (mode == RecoveryMode::kSalvage ? SegmentEnd::kSalvaged : SegmentEnd::kDamaged));
      CHECK(o.scan.bytes_dropped == have);
      CHECK(o.scan.valid_end == torn.lsn.offset);
      CHECK(o.scan.failed == FailsIn(mode));
    }
  }
}

// ===========================================================================
// 2. A damaged record.

namespace {

// The problem a byte incremented at `pos` of record `r` causes, as found in
// `seg` (the damaged bytes). `suffix` is what the reader appends to the detail.
Want ChecksumProblem(const std::string& seg, const Rec& r, uint64_t pos, const std::string& suffix,
                     const std::string& file, uint32_t node) {
  const uint64_t o = r.lsn.offset;
  if (pos < kRecordHeaderSize) {
    return {ProblemKind::kHeaderChecksum,
            true,
            r.lsn.segment,
            o,
            r.size(),
            "record header checksum mismatch" + suffix,
            Hex8(ComputeRecordHeaderCrc(U8(seg) + o)),
            Hex8(LoadU32(U8(seg) + o)),
            file,
            node};
  }
  return {ProblemKind::kPayloadChecksum,
          true,
          r.lsn.segment,
          o,
          r.size(),
          "record payload checksum mismatch" + suffix,
          Hex8(ComputePayloadCrc({U8(seg) + o + kRecordHeaderSize, r.payload.size()})),
          Hex8(LoadU32(U8(seg) + o + 12)),
          file,
          node};
}

// Positions worth damaging in a record: each header field (header crc, length,
// type, flags, payload crc) and the payload's first, middle and last byte.
std::vector<uint64_t> Positions(const Rec& r) {
  std::set<uint64_t> s = {0, 4, 8, 10, 15, kRecordHeaderSize, kRecordHeaderSize + r.payload.size() / 2, r.size() - 1};
  return {s.begin(), s.end()};
}

}  // namespace

VARIANT_TEST_CASE(DamagedMiddleRecord, "reader: a damaged record in a middle segment", "[reader][corruption]", "") {
  const Log& log = DefaultLog();
  INFO(SeedInfo(kDefaultSpec));
  INFO(VariantName(v));
  const uint64_t m = log.segs.size() / 2;
  const std::vector<Rec> in = log.In(m);
  WalDir dir(v);
  dir.PutAll(log.segs);
  const auto files = dir.List();
  for (size_t k = 0; k < in.size(); ++k) {
    const Rec& r = in[k];
    const bool last_in_seg = k + 1 == in.size();
    for (uint64_t pos : Positions(r)) {
      INFO("record " << k << " at " << r.lsn.ToString() << ", byte " << pos << " incremented");
      std::string seg = log.segs[m];
      ++seg[r.lsn.offset + pos];
      dir.Put(m, seg);
      const Want want =
          ChecksumProblem(seg, r, pos,
                          last_in_seg ? std::string(" (not the last segment)")
                                      : fmt::format(" (next intact record at {})", Lsn{m, r.end()}.ToString()),
                          dir.FilePath(m), log.node);
      for (RecoveryMode mode : kModes) {
        INFO(RecoveryModeName(mode));
        const NodeOutcome o = ReadNode(files, mode);
        // Exactly one finding in every mode: in salvage, the successor's chain
        // still matches the last intact record of this segment.
        INFO(Kinds(o.problems));
        REQUIRE(o.problems.size() == 1);
        RequireProblem(o.problems[0], want);
        const SegmentScan& s = o.read.segments.at(m);
        REQUIRE(s.bytes_dropped == r.size());
        REQUIRE(s.valid_end == r.lsn.offset);
        if (mode == RecoveryMode::kSalvage) {
          // Reading resumes at the next record: everything else is returned.
          REQUIRE(Diff(o.recs, log.Where([&](const Rec& x) { return x.lsn != r.lsn; })) == "");
          REQUIRE_FALSE(o.read.failed);
          REQUIRE_FALSE(o.read.stopped);
          REQUIRE(s.end == SegmentEnd::kSalvaged);
          REQUIRE(s.records == in.size() - 1);
          REQUIRE(o.read.segments.size() == log.segs.size());
          continue;
        }
        REQUIRE(Diff(o.recs, log.Before(r.lsn)) == "");
        REQUIRE(o.read.segments.size() == m + 1);
        REQUIRE(s.end == SegmentEnd::kDamaged);
        REQUIRE(o.read.end == r.lsn);
        if (mode == RecoveryMode::kPointInTime) {
          REQUIRE_FALSE(o.read.failed);
          REQUIRE(o.read.stopped);
        } else {
          REQUIRE(o.read.failed);
          REQUIRE_FALSE(o.read.stopped);
        }
      }
    }
  }
}

VARIANT_TEST_CASE(SalvageKeepsCheckingTheChain, "reader: salvage still checks the chain after skipping damage",
                  "[reader][corruption]", "") {
  // Damage early in segment m, and a successor whose header names another
  // last record: both are found, the second against the real end of m.
  const Log& log = DefaultLog();
  INFO(SeedInfo(kDefaultSpec));
  INFO(VariantName(v));
  const uint64_t m = log.segs.size() / 2;
  const std::vector<Rec> in = log.In(m);
  const Rec r = in[2];
  WalDir dir(v);
  std::vector<std::string> segs = log.segs;
  ++segs[m][r.lsn.offset + kRecordHeaderSize + 3];
  StoreU32(reinterpret_cast<uint8_t*>(segs[m + 1].data()) + 40, in.back().header_crc ^ 1);
  ResignSegmentHeader(segs[m + 1]);
  dir.PutAll(segs);
  const NodeOutcome o = ReadNode(dir.List(), RecoveryMode::kSalvage);
  INFO(Kinds(o.problems));
  REQUIRE(o.problems.size() == 2);
  CHECK(o.problems[0].kind == ProblemKind::kPayloadChecksum);
  CHECK(o.problems[0].lsn() == r.lsn);
  CheckProblem(o.problems[1],
               {ProblemKind::kBrokenChain, true, m + 1, 32, 0, "segment does not continue its predecessor",
                fmt::format("predecessor ending at {:X}/{:08X} with record crc {:08x}", m, log.segs[m].size(),
                            in.back().header_crc),
                fmt::format("{:X}/{:08X} with record crc {:08x}", m, log.segs[m].size(), in.back().header_crc ^ 1),
                dir.FilePath(m + 1), log.node});
  CHECK(Diff(o.recs, log.Where([&](const Rec& x) { return x.lsn != r.lsn; })) == "");
}

VARIANT_TEST_CASE(DamagedLastSegment, "reader: a damaged record in the last segment is corruption, not a torn tail",
                  "[reader][corruption]", "") {
  const Log& log = DefaultLog();
  INFO(SeedInfo(kDefaultSpec));
  INFO(VariantName(v));
  const uint64_t last = log.last();
  const std::vector<Rec> in = log.In(last);
  WalDir dir(v);
  dir.PutAll(log.segs);
  const auto files = dir.List();

  SECTION("the last record, complete, with any byte changed") {
    const Rec& r = in.back();
    // Every byte: none of them may turn a complete record into a torn tail.
    for (uint64_t pos = 0; pos < r.size(); ++pos) {
      INFO("byte " << pos << " of the last record incremented");
      std::string seg = log.segs[last];
      ++seg[r.lsn.offset + pos];
      dir.Put(last, seg);
      const Want want = ChecksumProblem(seg, r, pos, "", dir.FilePath(last), log.node);
      for (RecoveryMode mode : kModes) {
        INFO(RecoveryModeName(mode));
        const NodeOutcome o = ReadNode(files, mode);
        REQUIRE(o.problems.size() == 1);
        RequireProblem(o.problems[0], want);
        REQUIRE(Diff(o.recs, log.Before(r.lsn)) == "");
        const SegmentScan& s = o.read.segments.back();
        REQUIRE(s.end == (mode == RecoveryMode::kSalvage ? SegmentEnd::kSalvaged : SegmentEnd::kDamaged));
        REQUIRE_FALSE(s.zero_filled_tail);
        REQUIRE(s.bytes_dropped == r.size());
        REQUIRE(o.read.failed == FailsIn(mode));
        REQUIRE(o.read.stopped == (mode == RecoveryMode::kPointInTime));
      }
    }
  }
  SECTION("a record followed by intact ones") {
    for (size_t k : {size_t{0}, in.size() / 2, in.size() - 2}) {
      const Rec& r = in[k];
      for (uint64_t pos : Positions(r)) {
        INFO("record " << k << " byte " << pos);
        std::string seg = log.segs[last];
        ++seg[r.lsn.offset + pos];
        dir.Put(last, seg);
        const Want want =
            ChecksumProblem(seg, r, pos, fmt::format(" (next intact record at {})", Lsn{last, r.end()}.ToString()),
                            dir.FilePath(last), log.node);
        for (RecoveryMode mode : kModes) {
          INFO(RecoveryModeName(mode));
          const NodeOutcome o = ReadNode(files, mode);
          REQUIRE(o.problems.size() == 1);
          RequireProblem(o.problems[0], want);
          if (mode == RecoveryMode::kSalvage) {
            REQUIRE(Diff(o.recs, log.Where([&](const Rec& x) { return x.lsn != r.lsn; })) == "");
          } else {
            REQUIRE(Diff(o.recs, log.Before(r.lsn)) == "");
          }
          REQUIRE(o.read.failed == FailsIn(mode));
          REQUIRE(o.read.stopped == (mode == RecoveryMode::kPointInTime));
        }
      }
    }
  }
}

VARIANT_TEST_CASE(EveryByteDamaged, "reader: a damaged record never reaches the visitor (ScanSegment, every byte)",
                  "[reader][corruption]", "") {
  // Every byte of a whole segment, incremented and set to zero, in memory.
  const Log& log = DefaultLog();
  INFO(SeedInfo(kDefaultSpec));
  INFO(VariantName(v));
  const uint64_t m = 1;
  const std::vector<SegmentScan> prev = IntactScans(log, v);
  const std::string& orig = log.segs[m];
  const std::vector<Rec> in = log.In(m);
  for (uint64_t at = kSegmentHeaderSize; at < orig.size(); ++at) {
    for (int how = 0; how < 2; ++how) {
      std::string seg = orig;
      if (how == 0) {
        ++seg[at];
      } else {
        if (seg[at] == 0) continue;
        seg[at] = 0;
      }
      INFO("byte " << at << (how == 0 ? " incremented" : " zeroed"));
      const ScanOutcome o = ScanBytes(seg, v, m, Opts(RecoveryMode::kSalvage, false), &prev[m - 1]);
      const Rec& hit = *std::find_if(in.begin(), in.end(), [&](const Rec& r) { return r.end() > at; });
      REQUIRE(o.problems.size() == 1);
      REQUIRE(o.problems[0].lsn() == hit.lsn);
      REQUIRE(o.problems[0].length == hit.size());
      REQUIRE(Diff(o.recs, log.Where([&](const Rec& r) { return r.lsn.segment == m && r.lsn != hit.lsn; })) == "");
    }
  }
}

// ===========================================================================
// 3. Segments that do not belong together.

VARIANT_TEST_CASE(ForeignSegments, "reader: missing, swapped and foreign segments", "[reader][corruption]", "") {
  const Log& log = DefaultLog();
  INFO(SeedInfo(kDefaultSpec));
  INFO(VariantName(v));
  const uint64_t m = log.segs.size() / 2;
  WalDir dir(v);
  dir.PutAll(log.segs);

  SECTION("a missing middle segment") {
    dir.Remove(m);
    const auto files = dir.List();
    for (RecoveryMode mode : kModes) {
      INFO(RecoveryModeName(mode));
      const NodeOutcome o = ReadNode(files, mode);
      REQUIRE(o.problems.size() == 1);
      CheckProblem(
          o.problems[0],
          {ProblemKind::kMissingSegment, true, m + 1, 0, 0, fmt::format("missing segment {:X} before this one", m),
           fmt::format("segment {:X}", m), fmt::format("segment {:X}", m + 1), dir.FilePath(m + 1), log.node});
      if (mode == RecoveryMode::kSalvage) {
        CHECK(Diff(o.recs, log.Where([&](const Rec& r) { return r.lsn.segment != m; })) == "");
        CHECK_FALSE(o.read.failed);
      } else {
        CHECK(Diff(o.recs, log.Where([&](const Rec& r) { return r.lsn.segment < m; })) == "");
        CHECK(o.read.failed == FailsIn(mode));
        CHECK(o.read.stopped == (mode == RecoveryMode::kPointInTime));
      }
    }
  }
  SECTION("two missing middle segments") {
    dir.Remove(m);
    dir.Remove(m + 1);
    const NodeOutcome o = ReadNode(dir.List(), RecoveryMode::kTolerateTornTail);
    REQUIRE(o.problems.size() == 1);
    CheckProblem(o.problems[0],
                 {ProblemKind::kMissingSegment, true, m + 2, 0, 0,
                  fmt::format("missing segments {:X}..{:X} before this one", m, m + 1), fmt::format("segment {:X}", m),
                  fmt::format("segment {:X}", m + 2), dir.FilePath(m + 2), log.node});
    CHECK(Diff(o.recs, log.Where([&](const Rec& r) { return r.lsn.segment < m; })) == "");
    CHECK(o.read.failed);
  }
  SECTION("a missing first segment is not detectable from the files alone") {
    // Reading starts wherever the directory starts; segment 1 says it has a
    // predecessor, but nothing is there to compare with.
    dir.Remove(0);
    const NodeOutcome o = ReadNode(dir.List(), RecoveryMode::kStrict);
    CHECK(Kinds(o.problems) == "");
    CHECK(Diff(o.recs, log.Where([&](const Rec& r) { return r.lsn.segment > 0; })) == "");
  }
  SECTION("two segments swapped") {
    const std::string a = ReadFileBytes(dir.FilePath(m));
    const std::string b = ReadFileBytes(dir.FilePath(m + 1));
    WriteFileBytes(dir.FilePath(m), b);
    WriteFileBytes(dir.FilePath(m + 1), a);
    const auto files = dir.List();
    for (RecoveryMode mode : kModes) {
      INFO(RecoveryModeName(mode));
      const NodeOutcome o = ReadNode(files, mode);
      REQUIRE_FALSE(o.problems.empty());
      CheckProblem(o.problems[0], {ProblemKind::kSegmentMismatch, true, m, 24, 0,
                                   "segment header names another index than the file name", fmt::format("{:X}", m),
                                   fmt::format("{:X}", m + 1), dir.FilePath(m), log.node});
      if (mode == RecoveryMode::kSalvage) {
        // Salvage reads on; the second file names the wrong index as well.
        REQUIRE(o.problems.size() >= 2);
        CheckProblem(
            o.problems[1],
            {ProblemKind::kSegmentMismatch, true, m + 1, 24, 0, "segment header names another index than the file name",
             fmt::format("{:X}", m + 1), fmt::format("{:X}", m), dir.FilePath(m + 1), log.node});
        continue;
      }
      CHECK(o.problems.size() == 1);
      CHECK(Diff(o.recs, log.Where([&](const Rec& r) { return r.lsn.segment < m; })) == "");
      CHECK(o.read.failed == FailsIn(mode));
      CHECK(o.read.stopped == (mode == RecoveryMode::kPointInTime));
      CHECK(o.read.segments.back().end == SegmentEnd::kDamaged);
    }
  }
  SECTION("a segment of another node or another cluster") {
    for (int which = 0; which < 2; ++which) {
      LogSpec spec;
      spec.seed = 0xF0E16;  // another history
      if (which == 0)
        spec.node = log.node + 1;
      else
        spec.cluster = log.cluster ^ 0xFFFF;
      INFO("other " << SeedInfo(spec));
      const Log other = BuildLog(spec);
      REQUIRE(other.segs.size() > m);
      dir.PutAll(log.segs);
      dir.Put(m, other.segs[m]);
      const auto files = dir.List();
      for (RecoveryMode mode : kModes) {
        INFO((which == 0 ? "other node, " : "other cluster, ") << RecoveryModeName(mode));
        const NodeOutcome o = ReadNode(files, mode);
        REQUIRE_FALSE(o.problems.empty());
        if (which == 0) {
          CheckProblem(o.problems[0], {ProblemKind::kSegmentMismatch, true, m, 12, 0, "segment belongs to another node",
                                       fmt::format("node {}", log.node), fmt::format("node {}", log.node + 1),
                                       dir.FilePath(m), log.node + 1});
        } else {
          CheckProblem(o.problems[0], {ProblemKind::kSegmentMismatch, true, m, 16, 0,
                                       "segment belongs to another cluster", fmt::format("{:016x}", log.cluster),
                                       fmt::format("{:016x}", log.cluster ^ 0xFFFF), dir.FilePath(m), log.node});
        }
        if (mode != RecoveryMode::kSalvage) {
          CHECK(o.problems.size() == 1);
          CHECK(Diff(o.recs, log.Where([&](const Rec& r) { return r.lsn.segment < m; })) == "");
          CHECK(o.read.failed == FailsIn(mode));
          CHECK(o.read.stopped == (mode == RecoveryMode::kPointInTime));
        } else {
          // Salvage keeps reading: the foreign records are intact records.
          std::vector<Rec> want = log.Where([&](const Rec& r) { return r.lsn.segment < m; });
          for (const Rec& r : other.In(m)) want.push_back(r);
          const std::vector<Rec> got(o.recs.begin(),
                                     o.recs.begin() + static_cast<ptrdiff_t>(std::min(want.size(), o.recs.size())));
          CHECK(Diff(got, want) == "");
          CHECK_FALSE(o.read.failed);
        }
      }
    }
  }
  SECTION("CheckContinuity names every difference") {
    LogSpec spec;
    spec.seed = 0xF0E17;
    spec.node = log.node + 2;
    INFO("other " << SeedInfo(spec));
    const Log other = BuildLog(spec);
    const std::vector<SegmentScan> mine = IntactScans(log, v);
    const std::vector<SegmentScan> theirs = IntactScans(other, v);
    std::vector<Problem> ps;
    CHECK_FALSE(CheckContinuity(mine[m - 1], theirs[m], [&](const Problem& p) { ps.push_back(p); }));
    REQUIRE(ps.size() == 2);
    CheckProblem(ps[0],
                 {ProblemKind::kSegmentMismatch, true, m, 12, 0, "segment belongs to another node than its predecessor",
                  fmt::format("node {}", log.node), fmt::format("node {}", log.node + 2), MemPath(m, v), log.node + 2});
    CheckProblem(ps[1], {ProblemKind::kBrokenChain, true, m, 32, 0, "segment does not continue its predecessor",
                         fmt::format("predecessor ending at {:X}/{:08X} with record crc {:08x}", m - 1,
                                     log.segs[m - 1].size(), log.In(m - 1).back().header_crc),
                         fmt::format("{:X}/{:08X} with record crc {:08x}", m - 1, other.segs[m - 1].size(),
                                     other.In(m - 1).back().header_crc),
                         MemPath(m, v), log.node + 2});
    ps.clear();
    CHECK(CheckContinuity(mine[m - 1], mine[m], [&](const Problem& p) { ps.push_back(p); }));
    CHECK(ps.empty());
    // Out of order.
    CHECK_FALSE(CheckContinuity(mine[m], mine[m - 1], [&](const Problem& p) { ps.push_back(p); }));
    REQUIRE(ps.size() == 1);
    CheckProblem(ps[0],
                 {ProblemKind::kMissingSegment, true, m - 1, 0, 0, "segment out of order",
                  fmt::format("segment {:X}", m + 1), fmt::format("segment {:X}", m - 1), MemPath(m - 1, v), log.node});
  }
  SECTION("a middle segment that lost its last record breaks the chain") {
    const std::vector<Rec> in = log.In(m);
    const Rec& dropped = in.back();
    dir.Put(m, log.segs[m].substr(0, dropped.lsn.offset));
    const auto files = dir.List();
    for (RecoveryMode mode : kModes) {
      INFO(RecoveryModeName(mode));
      const NodeOutcome o = ReadNode(files, mode);
      REQUIRE(o.problems.size() == 1);
      CheckProblem(o.problems[0],
                   {ProblemKind::kBrokenChain, true, m + 1, 32, 0, "segment does not continue its predecessor",
                    fmt::format("predecessor ending at {:X}/{:08X} with record crc {:08x}", m, dropped.lsn.offset,
                                in[in.size() - 2].header_crc),
                    fmt::format("{:X}/{:08X} with record crc {:08x}", m, dropped.end(), dropped.header_crc),
                    dir.FilePath(m + 1), log.node});
      CHECK(o.read.segments.at(m).end == SegmentEnd::kClean);
      if (mode == RecoveryMode::kSalvage) {
        CHECK(Diff(o.recs, log.Where([&](const Rec& r) { return r.lsn != dropped.lsn; })) == "");
        CHECK_FALSE(o.read.failed);
      } else {
        CHECK(Diff(o.recs, log.Where([&](const Rec& r) { return r.lsn.segment <= m && r.lsn != dropped.lsn; })) == "");
        CHECK(o.read.failed == FailsIn(mode));
        CHECK(o.read.stopped == (mode == RecoveryMode::kPointInTime));
      }
    }
  }
  SECTION("re-signed headers with a wrong index, chain or flags") {
    struct Case {
      const char* what;
      std::function<void(std::string&)> mutate;
      Want want;
      // Salvage reads on; after a header naming index m+1, segment m+1 looks
      // out of order (a consequence, reported as kMissingSegment).
      bool salvage_follow_on = false;
    };
    const Rec before = log.In(m - 1).back();
    const std::string chain_expected =
        fmt::format("predecessor ending at {:X}/{:08X} with record crc {:08x}", m - 1, before.end(), before.header_crc);
    const std::vector<Case> cases = {
        {"index + 1",
         [&](std::string& s) { StoreU32(reinterpret_cast<uint8_t*>(s.data()) + 24, static_cast<uint32_t>(m + 1)); },
         {ProblemKind::kSegmentMismatch, true, m, 24, 0, "segment header names another index than the file name",
          fmt::format("{:X}", m), fmt::format("{:X}", m + 1), dir.FilePath(m), log.node},
         true},
        {"prev_end_offset - 1",
         [&](std::string& s) {
           StoreU32(reinterpret_cast<uint8_t*>(s.data()) + 32, static_cast<uint32_t>(before.end() - 1));
         },
         {ProblemKind::kBrokenChain, true, m, 32, 0, "segment does not continue its predecessor", chain_expected,
          fmt::format("{:X}/{:08X} with record crc {:08x}", m - 1, before.end() - 1, before.header_crc),
          dir.FilePath(m), log.node}},
        {"prev_last_crc + 1",
         [&](std::string& s) { StoreU32(reinterpret_cast<uint8_t*>(s.data()) + 40, before.header_crc + 1); },
         {ProblemKind::kBrokenChain, true, m, 32, 0, "segment does not continue its predecessor", chain_expected,
          fmt::format("{:X}/{:08X} with record crc {:08x}", m - 1, before.end(), before.header_crc + 1),
          dir.FilePath(m), log.node}},
        {"no predecessor flag",
         [&](std::string& s) { StoreU32(reinterpret_cast<uint8_t*>(s.data()) + 44, 0); },
         {ProblemKind::kBrokenChain, true, m, 32, 0, "segment does not continue its predecessor", chain_expected,
          fmt::format("{:X}/{:08X} with record crc {:08x}", m - 1, before.end(), before.header_crc), dir.FilePath(m),
          log.node}},
    };
    for (const Case& c : cases) {
      std::string seg = log.segs[m];
      c.mutate(seg);
      ResignSegmentHeader(seg);
      dir.PutAll(log.segs);
      dir.Put(m, seg);
      for (RecoveryMode mode : kModes) {
        INFO(c.what << ", " << RecoveryModeName(mode));
        const NodeOutcome o = ReadNode(dir.List(), mode);
        INFO(Kinds(o.problems));
        REQUIRE_FALSE(o.problems.empty());
        CheckProblem(o.problems[0], c.want);
        if (mode == RecoveryMode::kSalvage && c.salvage_follow_on) {
          REQUIRE(o.problems.size() == 2);
          CheckProblem(o.problems[1], {ProblemKind::kMissingSegment, true, m + 1, 0, 0, "segment out of order",
                                       fmt::format("segment {:X}", m + 2), fmt::format("segment {:X}", m + 1),
                                       dir.FilePath(m + 1), log.node});
        } else {
          CHECK(o.problems.size() == 1);
        }
        if (mode == RecoveryMode::kSalvage) {
          CHECK(Diff(o.recs, log.recs) == "");
        } else {
          CHECK(Diff(o.recs, log.Where([&](const Rec& r) { return r.lsn.segment < m; })) == "");
          CHECK(o.read.failed == FailsIn(mode));
        }
      }
    }
  }
}

// Found by this suite (reader.cpp at b065e0b: ScanSegment set valid_end = 64
// before the identity checks, so ReadNodeWal moved NodeRead::end into a
// segment it rejected); fixed in 66cda30.
TEST_CASE("reader: NodeRead::end stays at the last record read when a segment is rejected", "[reader][corruption]") {
  const Log& log = DefaultLog();
  INFO(SeedInfo(kDefaultSpec));
  const uint64_t m = log.segs.size() / 2;
  WalDir dir(Variant::kPlain);
  dir.PutAll(log.segs);
  dir.Remove(m);
  for (RecoveryMode mode : {RecoveryMode::kPointInTime, RecoveryMode::kTolerateTornTail}) {
    INFO(RecoveryModeName(mode));
    const NodeOutcome o = ReadNode(dir.List(), mode);
    CHECK(o.read.stopped == (mode == RecoveryMode::kPointInTime));
    CHECK(o.read.end == Lsn{m - 1, log.segs[m - 1].size()});
  }
}

// ===========================================================================
// 4. Bad inputs.

VARIANT_TEST_CASE(BadSegmentHeaders, "reader: unusable segment headers", "[reader][corruption]", "") {
  const Log& log = DefaultLog();
  INFO(SeedInfo(kDefaultSpec));
  INFO(VariantName(v));

  SECTION("zero-length segment") {
    for (RecoveryMode mode : kModes) {
      INFO(RecoveryModeName(mode));
      const ScanOutcome o = ScanBytes("", v, 0, Opts(mode, true));
      REQUIRE(o.problems.size() == 1);
      CheckProblem(o.problems[0], {ProblemKind::kBadSegmentHeader, true, 0, 0, 0, "segment header cut short",
                                   "64 bytes", "0 bytes", MemPath(0, v), std::nullopt});
      CHECK_FALSE(o.problems[0].node_known);
      CHECK(o.scan.end == SegmentEnd::kBadHeader);
      CHECK(o.scan.failed == FailsIn(mode));
      CHECK(o.recs.empty());
    }
  }
  SECTION("not a WAL file") {
    std::string text;
    while (text.size() < 300) text += "This is not a WAL segment, just some text. ";
    for (RecoveryMode mode : kModes) {
      INFO(RecoveryModeName(mode));
      const ScanOutcome o = ScanBytes(text, v, 0, Opts(mode, true));
      REQUIRE(o.problems.size() == 1);
      CheckProblem(o.problems[0],
                   {ProblemKind::kBadSegmentHeader, true, 0, 0, text.size(), "not a walcut WAL segment (bad magic)",
                    "57414c4355545347 (\"WALCUTSG\")", "5468697320697320", MemPath(0, v), std::nullopt});
      CHECK_FALSE(o.problems[0].node_known);
      CHECK(o.scan.bytes_dropped == text.size());
      CHECK(o.scan.file_bytes == text.size());
      CHECK(o.scan.failed == FailsIn(mode));
    }
  }
  SECTION("segment header checksum damaged, middle segment") {
    const uint64_t m = log.segs.size() / 2;
    WalDir dir(v);
    std::vector<std::string> segs = log.segs;
    ++segs[m][30];
    dir.PutAll(segs);
    const auto files = dir.List();
    for (RecoveryMode mode : kModes) {
      INFO(RecoveryModeName(mode));
      const NodeOutcome o = ReadNode(files, mode);
      REQUIRE(o.problems.size() == 1);
      CheckProblem(o.problems[0], {ProblemKind::kBadSegmentHeader, true, m, 60, segs[m].size(),
                                   "segment header checksum mismatch", Hex8(MaskCrc(crc32c::Value(segs[m].data(), 60))),
                                   Hex8(LoadU32(U8(segs[m]) + 60)), dir.FilePath(m), log.node});
      if (mode == RecoveryMode::kSalvage) {
        // The successor cannot be checked against an unreadable header: no second finding.
        CHECK(Diff(o.recs, log.Where([&](const Rec& r) { return r.lsn.segment != m; })) == "");
        CHECK_FALSE(o.read.failed);
      } else {
        CHECK(Diff(o.recs, log.Where([&](const Rec& r) { return r.lsn.segment < m; })) == "");
        CHECK(o.read.failed == FailsIn(mode));
        CHECK(o.read.stopped == (mode == RecoveryMode::kPointInTime));
      }
      CHECK(o.read.segments.at(m).bytes_dropped == segs[m].size());
    }
  }
}

VARIANT_TEST_CASE(BadLengths, "reader: re-signed record headers with bad lengths", "[reader][corruption]", "") {
  const Log& log = DefaultLog();
  INFO(SeedInfo(kDefaultSpec));
  INFO(VariantName(v));
  const uint64_t m = log.segs.size() / 2;
  const uint64_t last = log.last();
  const std::vector<SegmentScan> prev = IntactScans(log, v);
  const std::vector<Rec> mid = log.In(m);
  const std::vector<Rec> tail = log.In(last);

  SECTION("length 0xFFFFFFFF is over the limit, wherever it is") {
    struct Case {
      uint64_t seg;
      const Rec* r;
      std::string suffix;
    };
    const std::vector<Case> cases = {
        {m, &mid[4], fmt::format(" (next intact record at {})", Lsn{m, mid[4].end()}.ToString())},
        {m, &mid.back(), " (not the last segment)"},
        {last, &tail[2], fmt::format(" (next intact record at {})", Lsn{last, tail[2].end()}.ToString())},
        // The last record of the last segment: complete, so not a torn tail.
        {last, &tail.back(), ""},
    };
    for (const Case& c : cases) {
      std::string seg = log.segs[c.seg];
      SetLengthResigned(seg, c.r->lsn.offset, 0xFFFFFFFFu);
      for (RecoveryMode mode : kModes) {
        INFO(c.r->lsn.ToString() << " " << RecoveryModeName(mode));
        const ScanOutcome o = ScanBytes(seg, v, c.seg, Opts(mode, c.seg == last), &prev[c.seg - 1]);
        REQUIRE(o.problems.size() == 1);
        CheckProblem(o.problems[0], {ProblemKind::kBadLength, true, c.seg, c.r->lsn.offset, c.r->size(),
                                     "record length over the limit" + c.suffix, "at most 1048576", "4294967295",
                                     MemPath(c.seg, v), log.node});
        CHECK(o.scan.failed == FailsIn(mode));
        CHECK(o.scan.bytes_dropped == c.r->size());
        const auto want = mode == RecoveryMode::kSalvage
                              ? log.Where([&](const Rec& r) { return r.lsn.segment == c.seg && r.lsn != c.r->lsn; })
                              : log.Where([&](const Rec& r) { return r.lsn.segment == c.seg && r.lsn < c.r->lsn; });
        CHECK(Diff(o.recs, want) == "");
      }
    }
  }
  SECTION("a length past the end of the file") {
    // Last record of the last segment: an incomplete record, i.e. a torn tail.
    {
      const Rec& r = tail.back();
      std::string seg = log.segs[last];
      SetLengthResigned(seg, r.lsn.offset, static_cast<uint32_t>(r.payload.size() + 1000));
      for (RecoveryMode mode : kModes) {
        INFO("last record of the last segment, " << RecoveryModeName(mode));
        const ScanOutcome o = ScanBytes(seg, v, last, Opts(mode, true), &prev[last - 1]);
        REQUIRE(o.problems.size() == 1);
        CheckProblem(o.problems[0],
                     {ProblemKind::kTornTail, mode == RecoveryMode::kStrict, last, r.lsn.offset, r.size(),
                      "torn tail (record runs past the end of the segment)", fmt::format("{} bytes", r.size() + 1000),
                      fmt::format("{} bytes remain", r.size()), MemPath(last, v), log.node});
        CHECK(o.scan.end == SegmentEnd::kTornTail);
        CHECK(o.scan.failed == (mode == RecoveryMode::kStrict));
        CHECK(Diff(o.recs, log.Where([&](const Rec& x) { return x.lsn.segment == last && x.lsn < r.lsn; })) == "");
      }
    }
    // Last record of a middle segment: damage.
    {
      const Rec& r = mid.back();
      std::string seg = log.segs[m];
      SetLengthResigned(seg, r.lsn.offset, static_cast<uint32_t>(r.payload.size() + 1000));
      const ScanOutcome o = ScanBytes(seg, v, m, Opts(RecoveryMode::kTolerateTornTail, false), &prev[m - 1]);
      REQUIRE(o.problems.size() == 1);
      CheckProblem(o.problems[0], {ProblemKind::kBadLength, true, m, r.lsn.offset, r.size(),
                                   "record runs past the end of the segment (not the last segment)",
                                   fmt::format("{} bytes", r.size() + 1000), fmt::format("{} bytes remain", r.size()),
                                   MemPath(m, v), log.node});
      CHECK(o.scan.failed);
    }
    // A record in the middle of the last segment whose length reaches past the
    // end: the intact records after it show it is not a torn tail.
    {
      const Rec& r = tail[1];
      std::string seg = log.segs[last];
      const uint64_t claimed = seg.size() - r.lsn.offset - kRecordHeaderSize + 1;
      SetLengthResigned(seg, r.lsn.offset, static_cast<uint32_t>(claimed));
      const ScanOutcome o = ScanBytes(seg, v, last, Opts(RecoveryMode::kTolerateTornTail, true), &prev[last - 1]);
      REQUIRE(o.problems.size() == 1);
      CheckProblem(o.problems[0],
                   {ProblemKind::kBadLength, true, last, r.lsn.offset, r.size(),
                    fmt::format("record runs past the end of the segment (next intact record at {})",
                                Lsn{last, r.end()}.ToString()),
                    fmt::format("{} bytes", claimed + kRecordHeaderSize),
                    fmt::format("{} bytes remain", seg.size() - r.lsn.offset), MemPath(last, v), log.node});
      CHECK(o.scan.failed);
      CHECK(Diff(o.recs, {tail[0]}) == "");
    }
  }
  SECTION("a length a little too long, within the file: the payload checksum catches it") {
    const Rec& r = mid[3];
    std::string seg = log.segs[m];
    SetLengthResigned(seg, r.lsn.offset, static_cast<uint32_t>(r.payload.size() + 5));
    const ScanOutcome o = ScanBytes(seg, v, m, Opts(RecoveryMode::kSalvage, false), &prev[m - 1]);
    REQUIRE(o.problems.size() == 1);
    CheckProblem(
        o.problems[0],
        {ProblemKind::kPayloadChecksum, true, m, r.lsn.offset, r.size(),
         fmt::format("record payload checksum mismatch (next intact record at {})", Lsn{m, r.end()}.ToString()),
         Hex8(ComputePayloadCrc({U8(seg) + r.lsn.offset + kRecordHeaderSize, r.payload.size() + 5})),
         Hex8(LoadU32(U8(seg) + r.lsn.offset + 12)), MemPath(m, v), log.node});
    CHECK(Diff(o.recs, log.Where([&](const Rec& x) { return x.lsn.segment == m && x.lsn != r.lsn; })) == "");
  }
}

VARIANT_TEST_CASE(ZeroFilledTail, "reader: a zero-filled tail", "[reader][corruption]", "") {
  const Log& log = DefaultLog();
  INFO(SeedInfo(kDefaultSpec));
  INFO(VariantName(v));
  const uint64_t last = log.last();
  const uint64_t m = log.segs.size() / 2;
  const std::vector<SegmentScan> prev = IntactScans(log, v);
  const std::string zeros12(12, '\0');
  const std::string zero_hdr_crc = Hex8(MaskCrc(crc32c::Value(zeros12.data(), 12)));
  for (uint64_t n : {1u, 15u, 16u, 17u, 100u, 5000u}) {
    INFO(n << " zero bytes");
    const std::string seg = log.segs[last] + std::string(n, '\0');
    const bool header_cut = n < kRecordHeaderSize;
    for (RecoveryMode mode : kModes) {
      INFO(RecoveryModeName(mode));
      const ScanOutcome o = ScanBytes(seg, v, last, Opts(mode, true), &prev[last - 1]);
      REQUIRE(o.problems.size() == 1);
      CheckProblem(o.problems[0], {ProblemKind::kTornTail, mode == RecoveryMode::kStrict, last, log.segs[last].size(),
                                   n, "torn tail (zero-filled)", header_cut ? "16 header bytes" : zero_hdr_crc,
                                   header_cut ? fmt::format("{}", n) : "00000000", MemPath(last, v), log.node});
      CHECK(o.scan.zero_filled_tail);
      CHECK(o.scan.end == SegmentEnd::kTornTail);
      CHECK(o.scan.torn_offset == log.segs[last].size());
      CHECK(o.scan.valid_end == log.segs[last].size());
      CHECK(o.scan.bytes_dropped == n);
      CHECK(o.scan.file_bytes == seg.size());
      CHECK(o.scan.failed == (mode == RecoveryMode::kStrict));
      CHECK(Diff(o.recs, log.In(last)) == "");
    }
    // The same zeros at the end of a middle segment are damage.
    const ScanOutcome o =
        ScanBytes(log.segs[m] + std::string(n, '\0'), v, m, Opts(RecoveryMode::kTolerateTornTail, false), &prev[m - 1]);
    REQUIRE(o.problems.size() == 1);
    CheckProblem(o.problems[0],
                 {header_cut ? ProblemKind::kBadLength : ProblemKind::kHeaderChecksum, true, m, log.segs[m].size(), n,
                  header_cut ? "record header cut short (not the last segment)"
                             : "record header checksum mismatch (not the last segment)",
                  header_cut ? "16 header bytes" : zero_hdr_crc, header_cut ? fmt::format("{}", n) : "00000000",
                  MemPath(m, v), log.node});
    CHECK(o.scan.failed);
    CHECK_FALSE(o.scan.zero_filled_tail);
    CHECK(Diff(o.recs, log.In(m)) == "");
  }
  SECTION("zeros over a record followed by intact records are damage") {
    const std::vector<Rec> tail = log.In(last);
    const Rec& r = tail[2];
    std::string seg = log.segs[last];
    std::fill(seg.begin() + static_cast<ptrdiff_t>(r.lsn.offset), seg.begin() + static_cast<ptrdiff_t>(r.end()), '\0');
    const ScanOutcome o = ScanBytes(seg, v, last, Opts(RecoveryMode::kTolerateTornTail, true), &prev[last - 1]);
    REQUIRE(o.problems.size() == 1);
    CheckProblem(o.problems[0], {ProblemKind::kHeaderChecksum, true, last, r.lsn.offset, r.size(),
                                 fmt::format("record header checksum mismatch (next intact record at {})",
                                             Lsn{last, r.end()}.ToString()),
                                 zero_hdr_crc, "00000000", MemPath(last, v), log.node});
    CHECK(o.scan.failed);
    CHECK_FALSE(o.scan.zero_filled_tail);
  }
}

VARIANT_TEST_CASE(TypesAndFlags, "reader: record types and flags", "[reader][corruption]", "") {
  INFO(VariantName(v));
  const std::string payload = "payload of a record from the future";
  struct Case {
    const char* what;
    RawRecord raw;
    std::optional<ProblemKind> kind;  // nullopt: skipped quietly
    std::string expected, actual, detail;
  };
  const std::vector<Case> cases = {
      {"type 200",
       {200, 0, payload},
       ProblemKind::kUnknownType,
       "a type up to 9",
       "type 200",
       "unknown record type (not marked skippable)"},
      {"type 200, skippable", {200, kRecordFlagSkippable, payload}, std::nullopt, "", "", ""},
      {"type 10, skippable", {10, kRecordFlagSkippable, payload}, std::nullopt, "", "", ""},
      {"type 0",
       {0, 0, payload},
       ProblemKind::kInvalidType,
       "a non-zero type and known flags",
       "type 0 flags 0000",
       "invalid record type"},
      {"type 0, skippable",
       {0, kRecordFlagSkippable, payload},
       ProblemKind::kInvalidType,
       "a non-zero type and known flags",
       "type 0 flags 0001",
       "invalid record type"},
      {"unknown flag 0x0002",
       {3, 0x0002, payload},
       ProblemKind::kInvalidType,
       "a non-zero type and known flags",
       "type 3 flags 0002",
       "invalid record type"},
      {"unknown flag 0x8000",
       {200, 0x8000 | kRecordFlagSkippable, payload},
       ProblemKind::kInvalidType,
       "a non-zero type and known flags",
       "type 200 flags 8001",
       "invalid record type"},
  };
  for (const Case& c : cases) {
    // One such record in the middle of the last segment, one in the middle of a
    // middle segment.
    LogSpec spec;
    spec.records = 160;
    spec.raw[150] = c.raw;
    spec.raw[60] = c.raw;
    INFO(SeedInfo(spec));
    const Log log = BuildLog(spec);
    std::vector<Rec> odd =
        log.Where([&](const Rec& r) { return r.type == c.raw.type && r.flags == c.raw.flags && r.payload == payload; });
    REQUIRE(odd.size() == 2);
    REQUIRE(odd[1].lsn.segment == log.last());
    REQUIRE(odd[0].lsn.segment < log.last());
    REQUIRE(odd[0].lsn.segment > 0);
    // Neither is the last record of its segment: an intact record follows.
    REQUIRE(odd[0].end() < log.segs[odd[0].lsn.segment].size());
    REQUIRE(odd[1].end() < log.segs[odd[1].lsn.segment].size());
    // The odd records are never handed to the visitor: skipped or rejected.
    auto is_odd = [&](const Rec& r) { return r.payload == payload; };
    const std::vector<Rec> visible = log.Where([&](const Rec& r) { return !is_odd(r); });
    WalDir dir(v);
    dir.PutAll(log.segs);
    const auto files = dir.List();
    for (RecoveryMode mode : kModes) {
      INFO(c.what << ", " << RecoveryModeName(mode));
      const NodeOutcome o = ReadNode(files, mode);
      if (!c.kind) {
        CHECK(Kinds(o.problems) == "");
        CHECK(Diff(o.recs, visible) == "");
        CHECK_FALSE(o.read.failed);
        CHECK(o.read.segments.at(odd[0].lsn.segment).skipped_unknown == 1);
        CHECK(o.read.segments.at(odd[0].lsn.segment).records == log.In(odd[0].lsn.segment).size());
        CHECK(o.read.segments.back().skipped_unknown == 1);
        CHECK(o.read.end == Lsn{log.last(), log.segs.back().size()});
        continue;
      }
      REQUIRE_FALSE(o.problems.empty());
      const Rec& r = odd[0];
      CheckProblem(o.problems[0],
                   {*c.kind, true, r.lsn.segment, r.lsn.offset, r.size(),
                    c.detail + fmt::format(" (next intact record at {})", Lsn{r.lsn.segment, r.end()}.ToString()),
                    c.expected, c.actual, dir.FilePath(r.lsn.segment), log.node});
      if (mode == RecoveryMode::kSalvage) {
        // Salvage continues past both.
        CHECK(Diff(o.recs, visible) == "");
        CHECK_FALSE(o.read.failed);
        const Problem& second = o.problems.back();
        CheckProblem(second, {*c.kind, true, odd[1].lsn.segment, odd[1].lsn.offset, odd[1].size(),
                              c.detail + fmt::format(" (next intact record at {})",
                                                     Lsn{odd[1].lsn.segment, odd[1].end()}.ToString()),
                              c.expected, c.actual, dir.FilePath(odd[1].lsn.segment), log.node});
      } else {
        CHECK(o.problems.size() == 1);
        CHECK(Diff(o.recs, log.Where([&](const Rec& x) { return !is_odd(x) && x.lsn < r.lsn; })) == "");
        CHECK(o.read.failed == FailsIn(mode));
        CHECK(o.read.stopped == (mode == RecoveryMode::kPointInTime));
      }
    }
  }
}

TEST_CASE("reader: a segment present as .wal and .wal.zst", "[reader][corruption]") {
  const Log& log = DefaultLog();
  INFO(SeedInfo(kDefaultSpec));
  const uint64_t m = log.segs.size() / 2;
  WalDir dir(Variant::kZstd);
  dir.PutAll(log.segs);
  const std::string plain = dir.path() + "/" + SegmentFileName(m, false);
  const std::string zst = dir.path() + "/" + SegmentFileName(m, true);
  WriteFileBytes(plain, log.segs[m]);
  // The .wal is the one read: make the .wal.zst unreadable to prove it.
  WriteFileBytes(zst, "not zstd at all");
  std::vector<Problem> listed;
  const auto files = dir.List(&listed);
  REQUIRE(listed.size() == 1);
  const Problem& p = listed[0];
  CHECK(p.kind == ProblemKind::kDuplicateSegment);
  CHECK_FALSE(p.fatal);
  CHECK(p.segment == m);
  CHECK(p.file == plain);
  const std::string a = SegmentFileName(m, false), b = SegmentFileName(m, true);
  // readdir order decides which name comes first.
  CHECK((p.detail == fmt::format("segment present as both {} and {}; reading the .wal", a, b) ||
         p.detail == fmt::format("segment present as both {} and {}; reading the .wal", b, a)));
  REQUIRE(files.size() == log.segs.size());
  CHECK(files[m].path == plain);
  CHECK_FALSE(files[m].compressed);
  for (RecoveryMode mode : kModes) {
    INFO(RecoveryModeName(mode));
    const NodeOutcome o = ReadNode(files, mode);
    CHECK(Kinds(o.problems) == "");
    CHECK(Diff(o.recs, log.recs) == "");
  }
}

namespace {
// A .wal.zst that does not decompress is damage to the file (kCompression),
// not an I/O failure of this machine (kIo).
bool IsDecodeFailure(const Problem& p) { return p.kind == ProblemKind::kCompression && p.fatal; }
}  // namespace

TEST_CASE("reader: truncated and garbage .wal.zst", "[reader][corruption]") {
  const Log& log = DefaultLog();
  INFO(SeedInfo(kDefaultSpec));
  const uint64_t m = log.segs.size() / 2;
  const std::string packed = Compress(log.segs[m]);
  const std::vector<SegmentScan> prev = IntactScans(log, Variant::kZstd);
  const std::vector<Rec> in = log.In(m);

  auto scan_packed = [&](const std::string& data, RecoveryMode mode, bool is_last) {
    const std::vector<uint8_t> buf(data.begin(), data.end());
    auto src = MemorySource({buf.data(), buf.size()}, true);
    ScanOutcome out;
    out.scan = ScanSegment(
        *src, {MemPath(m, Variant::kZstd), m, true}, Opts(mode, is_last),
        [&](const RecordView& rv) {
          out.recs.push_back(FromView(rv));
          return true;
        },
        [&](const Problem& p) { out.problems.push_back(p); }, &prev[m - 1]);
    return out;
  };

  SECTION("every truncation of the compressed file") {
    for (uint64_t cut = 0; cut < packed.size(); ++cut) {
      for (RecoveryMode mode : {RecoveryMode::kTolerateTornTail, RecoveryMode::kSalvage}) {
        INFO("compressed file cut at " << cut << " of " << packed.size() << ", " << RecoveryModeName(mode));
        const ScanOutcome o = scan_packed(packed.substr(0, cut), mode, true);
        REQUIRE(o.problems.size() == 1);
        const Problem& p = o.problems[0];
        INFO(p.ToString());
        CHECK(IsDecodeFailure(p));
        CHECK(p.fatal);
        CHECK(p.file == MemPath(m, Variant::kZstd));
        CHECK(p.detail.find(cut == 0 ? "empty file, not a zstd frame" : "zstd frame cut short") != std::string::npos);
        // An archive that does not decompress is damage (not an I/O error):
        // it fails the modes that fail on damage, salvage goes on.
        CHECK(o.scan.end == (mode == RecoveryMode::kSalvage ? SegmentEnd::kSalvaged : SegmentEnd::kDamaged));
        CHECK(o.scan.failed == (mode != RecoveryMode::kSalvage));
        CHECK(o.scan.damaged_to_end);
        // Whatever was decoded before the cut is intact and in order.
        CHECK(p.offset == o.scan.valid_end);
        CHECK(Diff(o.recs,
                   log.Where([&](const Rec& r) { return r.lsn.segment == m && r.end() <= o.scan.valid_end; })) == "");
      }
    }
  }
  SECTION("garbage") {
    const uint64_t seed = 0x6A7BA6E;
    INFO("seed " << seed);
    std::mt19937_64 rng(seed);
    for (size_t n : {1u, 4u, 7u, 64u, 1000u}) {
      std::string junk(n, '\0');
      for (char& c : junk) c = static_cast<char>(rng());
      INFO(n << " random bytes");
      const ScanOutcome o = scan_packed(junk, RecoveryMode::kSalvage, false);
      REQUIRE(o.problems.size() == 1);
      INFO(o.problems[0].ToString());
      CHECK(IsDecodeFailure(o.problems[0]));
      CHECK(o.problems[0].offset == 0);
      CHECK(o.problems[0].detail.find("zstd") != std::string::npos);
      CHECK(o.recs.empty());
      CHECK(o.scan.end == SegmentEnd::kSalvaged);
      CHECK_FALSE(o.scan.failed);
    }
    // A valid frame followed by garbage: the records decode, then the garbage is found.
    const ScanOutcome o = scan_packed(packed + "garbage!", RecoveryMode::kSalvage, false);
    REQUIRE(o.problems.size() == 1);
    CHECK(IsDecodeFailure(o.problems[0]));
    CHECK(o.scan.end == SegmentEnd::kSalvaged);
  }
  SECTION("a damaged byte inside the compressed data") {
    for (uint64_t at = 0; at < packed.size(); ++at) {
      std::string bad = packed;
      ++bad[at];
      INFO("compressed byte " << at << " incremented");
      const ScanOutcome o = scan_packed(bad, RecoveryMode::kSalvage, false);
      // zstd may or may not notice; the WAL checksums must. Never a crash,
      // never a damaged record handed over (a record may move if the damage
      // shifts the decoded bytes, so only its content is compared).
      for (const Rec& r : o.recs) {
        INFO(Summary(r));
        CHECK(std::any_of(in.begin(), in.end(), [&](const Rec& x) {
          return x.type == r.type && x.flags == r.flags && x.payload == r.payload && x.header_crc == r.header_crc;
        }));
      }
      if (o.recs.size() != in.size()) CHECK_FALSE(o.problems.empty());
    }
  }
  SECTION("files on disk: zero-length and truncated .wal.zst in a node directory") {
    WalDir dir(Variant::kZstd);
    dir.PutAll(log.segs);
    WriteFileBytes(dir.FilePath(m), "");
    const NodeOutcome o = ReadNode(dir.List(), RecoveryMode::kTolerateTornTail);
    REQUIRE(o.problems.size() == 1);
    INFO(o.problems[0].ToString());
    CHECK(IsDecodeFailure(o.problems[0]));
    CHECK(o.problems[0].detail == dir.FilePath(m) + ": empty file, not a zstd frame");
    CHECK(o.read.failed);
    CHECK(Diff(o.recs, log.Where([&](const Rec& r) { return r.lsn.segment < m; })) == "");

    WriteFileBytes(dir.FilePath(m), packed.substr(0, packed.size() / 2));
    const NodeOutcome o2 = ReadNode(dir.List(), RecoveryMode::kTolerateTornTail);
    REQUIRE(o2.problems.size() == 1);
    CHECK(IsDecodeFailure(o2.problems[0]));
    CHECK(o2.problems[0].detail.rfind(dir.FilePath(m) + ": zstd frame cut short", 0) == 0);
    CHECK(o2.read.failed);
  }
  SECTION("a missing file") {
    const SegmentFile f{"/nonexistent/dir/" + SegmentFileName(3, true), 3, true};
    std::vector<Problem> ps;
    const SegmentScan s =
        ScanSegmentFile(f, Opts(RecoveryMode::kSalvage, true), nullptr, [&](const Problem& p) { ps.push_back(p); });
    REQUIRE(ps.size() == 1);
    CHECK(ps[0].kind == ProblemKind::kIo);
    CHECK(ps[0].file == f.path);
    CHECK(ps[0].segment == 3);
    CHECK(ps[0].detail.find("No such file or directory") != std::string::npos);
    CHECK(s.end == SegmentEnd::kIoError);
    CHECK(s.failed);
  }
}

// Found by this suite (reader.cpp at b065e0b: a zstd decode error went
// through io_fail, which failed the read in every mode, so salvage gave up on
// the segments after it and point-in-time failed instead of stopping); fixed
// in 66cda30.
TEST_CASE("reader: a damaged .wal.zst is damage to the modes that tolerate damage", "[reader][corruption]") {
  const Log& log = DefaultLog();
  INFO(SeedInfo(kDefaultSpec));
  const uint64_t m = log.segs.size() / 2;
  WalDir dir(Variant::kZstd);
  dir.PutAll(log.segs);
  WriteFileBytes(dir.FilePath(m), Compress(log.segs[m]).substr(0, 20));
  const auto files = dir.List();
  for (RecoveryMode mode : kModes) {
    INFO(RecoveryModeName(mode));
    const NodeOutcome o = ReadNode(files, mode);
    // One finding: segment m+1 is not chained to an unreadable predecessor.
    REQUIRE(o.problems.size() == 1);
    const Problem& p = o.problems[0];
    INFO(p.ToString());
    CHECK(IsDecodeFailure(p));
    CHECK(p.segment == m);
    CHECK(p.offset == 0);
    CHECK(p.file == dir.FilePath(m));
    CHECK(p.detail.rfind(dir.FilePath(m) + ": zstd frame cut short after 20 compressed bytes", 0) == 0);
    if (mode == RecoveryMode::kSalvage) {
      CHECK_FALSE(o.read.failed);
      CHECK(o.read.segments.size() == log.segs.size());
      CHECK(Diff(o.recs, log.Where([&](const Rec& r) { return r.lsn.segment != m; })) == "");
    } else {
      CHECK(o.read.failed == FailsIn(mode));
      CHECK(o.read.stopped == (mode == RecoveryMode::kPointInTime));
      CHECK(Diff(o.recs, log.Where([&](const Rec& r) { return r.lsn.segment < m; })) == "");
      CHECK(o.read.end == Lsn{m - 1, log.segs[m - 1].size()});
    }
  }
}

// ===========================================================================
// Listing, names, messages.

TEST_CASE("reader: ListSegments", "[reader]") {
  TempDir tmp;
  const std::string wal = tmp.path() + "/wal";
  std::filesystem::create_directories(wal);
  for (uint64_t i : {0x10u, 0x9u, 0xAu, 0x0u}) WriteFileBytes(wal + "/" + SegmentFileName(i, i == 0x9), "x");
  for (const char* junk : {"README", "0000000000000001.wal.zst.tmp", "000000000000001.wal", "0000000000000002.WAL",
                           "0000000000000003.wal.bak", "000000000000000a.wal.zst"}) {
    WriteFileBytes(wal + "/" + junk, "x");
  }
  std::filesystem::create_directories(wal + "/sub");
  std::vector<Problem> ps;
  auto l = ListSegments(wal, [&](const Problem& p) { ps.push_back(p); });
  REQUIRE(l.ok());
  // Named like segments but not as the writer names them: notes naming each,
  // neither read (000000000000000a is not index A).
  REQUIRE(ps.size() == 2);
  CHECK(ps[0].kind == ProblemKind::kMisnamedSegment);
  CHECK_FALSE(ps[0].fatal);
  CHECK(ps[0].file == wal + "/000000000000000a.wal.zst");
  CHECK(ps[1].file == wal + "/000000000000001.wal");
  CHECK(ps[1].ToString().starts_with(wal + "/000000000000001.wal: named like a segment but not one"));
  std::vector<std::string> got;
  for (const SegmentFile& f : *l) got.push_back(fmt::format("{:X} {} {}", f.index, f.compressed, f.path));
  CHECK(got == std::vector<std::string>{fmt::format("0 false {}/{}", wal, SegmentFileName(0, false)),
                                        fmt::format("9 true {}/{}", wal, SegmentFileName(9, true)),
                                        fmt::format("A false {}/{}", wal, SegmentFileName(0xA, false)),
                                        fmt::format("10 false {}/{}", wal, SegmentFileName(0x10, false))});
  auto missing = ListSegments(tmp.path() + "/nope", nullptr);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == ErrorCode::kNotFound);
  auto file = ListSegments(wal + "/README", nullptr);
  REQUIRE_FALSE(file.ok());
  CHECK(file.status().code() == ErrorCode::kNotFound);
  auto empty = ListSegments(wal + "/sub", nullptr);
  REQUIRE(empty.ok());
  CHECK(empty->empty());
}

TEST_CASE("reader: names and messages", "[reader]") {
  for (RecoveryMode m : kModes) {
    RecoveryMode back = RecoveryMode::kStrict;
    INFO(RecoveryModeName(m));
    REQUIRE(ParseRecoveryMode(RecoveryModeName(m), back));
    CHECK(back == m);
  }
  CHECK(RecoveryModeName(RecoveryMode::kTolerateTornTail) == "tolerate-torn-tail");
  RecoveryMode out = RecoveryMode::kSalvage;
  CHECK_FALSE(ParseRecoveryMode("", out));
  CHECK_FALSE(ParseRecoveryMode("Strict", out));
  CHECK_FALSE(ParseRecoveryMode("invalid", out));
  CHECK(out == RecoveryMode::kSalvage);

  std::set<std::string> names;
  for (int k = static_cast<int>(ProblemKind::kTornTail); k <= static_cast<int>(ProblemKind::kIo); ++k) {
    const std::string n(ProblemKindName(static_cast<ProblemKind>(k)));
    INFO(k);
    CHECK(n != "invalid");
    CHECK(names.insert(n).second);
  }

  Problem p;
  p.kind = ProblemKind::kPayloadChecksum;
  p.node = 1;
  p.node_known = true;
  p.file = "wal/0000000000000003.wal";
  p.segment = 3;
  p.offset = 0xA1F0;
  p.length = 212;
  p.detail = "record payload checksum mismatch";
  p.expected = "1a2b3c4d";
  p.actual = "00ff00ff";
  CHECK(p.ToString() ==
        "node 1, wal/0000000000000003.wal at 3/0000A1F0: record payload checksum mismatch: expected 1a2b3c4d, "
        "found 00ff00ff; 212 bytes dropped");
  p.kind = ProblemKind::kTornTail;
  p.node_known = false;
  p.expected.clear();
  p.actual.clear();
  p.detail = "torn tail (zero-filled)";
  CHECK(p.ToString() == "wal/0000000000000003.wal at 3/0000A1F0: torn tail (zero-filled); 212 bytes lost");
  p.length = 0;
  p.file.clear();
  CHECK(p.ToString() == "<no file> at 3/0000A1F0: torn tail (zero-filled)");
}

namespace {

// ScanOptions::start: what --follow reads with. Scans of a segment that
// grows, each from the last one's valid_end, visit every record once.
TEST_CASE("reader: a scan from `start` reads the records from there, growing data is read in passes", "[reader]") {
  const Log& log = DefaultLog();
  INFO(SeedInfo(kDefaultSpec));
  const std::string& seg = log.segs.front();
  const auto in = log.In(0);
  REQUIRE(in.size() > 10);
  SegmentFile file{"mem", 0, false};
  auto scan = [&](const std::string& bytes, uint64_t start, std::vector<Rec>& got) {
    auto src = MemorySource(Span(bytes));
    ScanOptions so;
    so.start = start;
    std::vector<Problem> problems;
    return ScanSegment(
        *src, file, so,
        [&](const RecordView& r) {
          got.push_back(Rec{r.lsn, static_cast<uint16_t>(r.type), r.flags,
                            std::string(reinterpret_cast<const char*>(r.payload.data()), r.payload.size()),
                            r.header_crc});
          return true;
        },
        [&](const Problem& p) { problems.push_back(p); });
  };
  // From the boundary before record k: records k.. and nothing else.
  for (size_t k : {size_t{0}, size_t{1}, in.size() / 2, in.size() - 1}) {
    INFO("from record " << k);
    std::vector<Rec> got;
    const SegmentScan s = scan(seg, in[k].lsn.offset, got);
    CHECK(Diff(got, std::vector<Rec>(in.begin() + static_cast<std::ptrdiff_t>(k), in.end())) == "");
    CHECK(s.records == in.size() - k);
    CHECK(s.valid_end == seg.size());
    CHECK(s.end == SegmentEnd::kClean);
  }
  // The segment written in pieces that end inside records: every pass
  // starts at the previous one's valid_end; together they visit each record
  // once, in order.
  std::vector<Rec> all;
  uint64_t pos = 0;
  for (size_t len = 100;; len = std::min<size_t>(len + 997, seg.size())) {
    std::vector<Rec> got;
    const SegmentScan s = scan(seg.substr(0, len), pos, got);
    INFO("pass at " << len << " bytes from " << pos);
    CHECK((s.end == SegmentEnd::kClean || s.end == SegmentEnd::kTornTail || s.end == SegmentEnd::kBadHeader));
    all.insert(all.end(), got.begin(), got.end());
    if (s.header_ok) pos = s.valid_end;
    if (len == seg.size()) break;
  }
  CHECK(Diff(all, in) == "");
}

}  // namespace

// The pread stand-in exists in a test build alone (walfmt/test_seams.h).
#ifdef WALCUT_TEST_SEAMS
namespace {

// A pread that fails with EIO in one file (by inode) from one offset on,
// after a short read up to it; every other read is the real one.
ino_t g_failing_inode = 0;
uint64_t g_fail_from = 0;
ssize_t FailingPread(int fd, void* buf, size_t n, off_t off) {
  struct stat sb {};
  if (fstat(fd, &sb) == 0 && sb.st_ino == g_failing_inode) {
    if (static_cast<uint64_t>(off) >= g_fail_from) {
      errno = EIO;
      return -1;
    }
    n = std::min<size_t>(n, g_fail_from - static_cast<uint64_t>(off));
  }
  return ::pread(fd, buf, n, off);
}

struct PreadFailureScope {
  PreadFailureScope(const std::string& path, uint64_t from) {
    struct stat sb {};
    REQUIRE(stat(path.c_str(), &sb) == 0);
    g_failing_inode = sb.st_ino;
    g_fail_from = from;
    detail::SetPreadForTesting(&FailingPread);
  }
  ~PreadFailureScope() { detail::SetPreadForTesting(nullptr); }
};

}  // namespace

TEST_CASE("reader: a read of a plain segment that fails (pread) fails the node's read in every mode, naming the file") {
  // An I/O error is not damage: no mode reads past it, none calls it torn
  // or salvages around it; the records of the segments before it are all
  // there, and of the failing one at most those before the failing offset.
  LogSpec spec;
  spec.records = 1200;
  spec.segment_bytes = 40000;
  const Log log = BuildLog(spec);
  REQUIRE(log.segs.size() >= 4);
  const uint64_t m = 2;
  for (bool read_ahead : {false, true}) {
    for (RecoveryMode mode : {RecoveryMode::kStrict, RecoveryMode::kTolerateTornTail, RecoveryMode::kSalvage}) {
      for (uint64_t from : {uint64_t{0}, uint64_t{kSegmentHeaderSize}, uint64_t{20000}}) {
        INFO((read_ahead ? "read ahead" : "window")
             << ", mode " << static_cast<int>(mode) << ", fails from byte " << from);
        WalDir dir(Variant::kPlain);
        dir.PutAll(log.segs);
        std::optional<ReadAheadScope> ahead;
        if (read_ahead) ahead.emplace();
        PreadFailureScope failing(dir.FilePath(m), from);
        const NodeOutcome o = ReadNode(dir.List(), mode);
        REQUIRE(o.problems.size() == 1);
        INFO(o.problems[0].ToString());
        CHECK(o.problems[0].kind == ProblemKind::kIo);
        CHECK(o.problems[0].file == dir.FilePath(m));
        CHECK(o.problems[0].detail == dir.FilePath(m) + ": read: Input/output error");
        CHECK(o.read.failed);
        const std::vector<Rec> before = log.Where([&](const Rec& r) { return r.lsn.segment < m; });
        REQUIRE(o.recs.size() >= before.size());
        CHECK(Diff(std::vector<Rec>(o.recs.begin(), o.recs.begin() + static_cast<long>(before.size())), before) == "");
        for (size_t i = before.size(); i < o.recs.size(); ++i) {
          INFO("record " << i);
          CHECK(o.recs[i].lsn.segment == m);
          CHECK(o.recs[i].lsn.offset + kRecordHeaderSize + o.recs[i].payload.size() <= from);
        }
      }
    }
  }
}
#endif  // WALCUT_TEST_SEAMS

// ===========================================================================
// visit_types: the visitor sees the chosen types only; the records of the
// others are counted per type (what `walcut stats` uses instead of a call per
// TX_DATA and TX_PREPARE).

namespace {

// What a read with visit_types `mask` should give for `recs`: the records it
// visits, and per type the records and bytes it only counts.
struct MaskedWant {
  std::vector<Rec> visited;
  std::array<TypeTally, kMaxKnownRecordType + 1> counted{};
};
MaskedWant Masked(const std::vector<Rec>& recs, uint32_t mask) {
  MaskedWant w;
  for (const Rec& r : recs) {
    if ((mask >> r.type) & 1u) {
      w.visited.push_back(r);
    } else {
      ++w.counted[r.type].records;
      w.counted[r.type].bytes += r.size();
    }
  }
  return w;
}

// The counts of a read against what Masked says.
void CheckCounted(const SegmentScan& s, const MaskedWant& w) {
  for (size_t t = 0; t < w.counted.size(); ++t) {
    INFO("type " << t);
    CHECK(s.unvisited[t].records == w.counted[t].records);
    CHECK(s.unvisited[t].bytes == w.counted[t].bytes);
  }
}

}  // namespace

VARIANT_TEST_CASE(VisitTypes, "reader: visit_types visits the chosen types and counts the others per type", "[reader]",
                  "") {
  const Log& log = DefaultLog();
  INFO(SeedInfo(kDefaultSpec));
  INFO(VariantName(v));
  const uint32_t mask = RecordTypeBit(RecordType::kTxCommit) | RecordTypeBit(RecordType::kCutStart) |
                        RecordTypeBit(RecordType::kTxRollback);
  std::array<int, kMaxKnownRecordType + 1> seen{};
  for (uint64_t i = 0; i < log.segs.size(); ++i) {
    INFO("segment " << i);
    for (const Rec& r : log.In(i)) ++seen[r.type];
    const MaskedWant want = Masked(log.In(i), mask);
    ScanOptions o = Opts(RecoveryMode::kStrict, i + 1 == log.segs.size());
    o.visit_types = mask;
    const ScanOutcome got = ScanBytes(log.segs[i], v, i, o);
    CHECK(got.problems.empty());
    CHECK(Diff(got.recs, want.visited) == "");
    CheckCounted(got.scan, want);
    CHECK(got.scan.records == log.In(i).size());
    // By default every type is visited and nothing is left to count.
    const ScanOutcome all = ScanBytes(log.segs[i], v, i, Opts(RecoveryMode::kStrict, i + 1 == log.segs.size()));
    CHECK(Diff(all.recs, log.In(i)) == "");
    for (const TypeTally& t : all.scan.unvisited) CHECK(t.records == 0);
  }
  // The log has records of both kinds: the test compares something.
  CHECK(seen[static_cast<int>(RecordType::kTxData)] > 0);
  CHECK(seen[static_cast<int>(RecordType::kTxCommit)] > 0);
}

TEST_CASE("reader: visit_types in salvage counts the intact records on both sides of damage, not the damaged one",
          "[reader]") {
  const Log& log = DefaultLog();
  INFO(SeedInfo(kDefaultSpec));
  // Damage a TX_DATA record in the middle of a segment: salvage skips it and
  // goes on; the records around it still count.
  uint64_t seg = 0;
  size_t victim = SIZE_MAX;
  std::vector<Rec> in;
  for (seg = 0; seg < log.segs.size() && victim == SIZE_MAX; ++seg) {
    in = log.In(seg);
    for (size_t k = 2; k + 2 < in.size(); ++k) {
      if (in[k].type == static_cast<uint16_t>(RecordType::kTxData)) {
        victim = k;
        break;
      }
    }
  }
  REQUIRE(victim != SIZE_MAX);
  --seg;
  std::string bytes = log.segs[seg];
  bytes[in[victim].lsn.offset + kRecordHeaderSize] ^= 0x5A;  // its payload: the payload checksum fails
  ScanOptions o = Opts(RecoveryMode::kSalvage, seg + 1 == log.segs.size());
  o.visit_types = RecordTypeBit(RecordType::kTxCommit);
  const ScanOutcome got = ScanBytes(bytes, Variant::kPlain, seg, o);
  CHECK(got.scan.end == SegmentEnd::kSalvaged);
  uint64_t data = 0, commits = 0;
  for (size_t k = 0; k < in.size(); ++k) {
    if (k == victim) continue;
    data += in[k].type == static_cast<uint16_t>(RecordType::kTxData);
    commits += in[k].type == static_cast<uint16_t>(RecordType::kTxCommit);
  }
  CHECK(got.scan.unvisited[static_cast<size_t>(RecordType::kTxData)].records == data);
  CHECK(got.recs.size() == commits);
  CHECK(got.scan.records == in.size() - 1);
}

namespace {

// A source whose windows hold at most `cap` bytes, as when reading ahead
// stops short: a record longer than that is left by the fast path and read
// record by record (Get), the path a record at the edge of a window takes.
class ShortWindowSource : public ByteSource {
 public:
  ShortWindowSource(std::unique_ptr<ByteSource> inner, size_t cap) : inner_(std::move(inner)), cap_(cap) {}
  Status Get(uint64_t offset, size_t n, const uint8_t*& p, size_t& got) override {
    return inner_->Get(offset, n, p, got);
  }
  void Window(uint64_t offset, size_t want, const uint8_t*& p, size_t& got) override {
    inner_->Window(offset, std::min(want, cap_), p, got);
    got = std::min(got, cap_);
  }
  void Release(uint64_t offset) override { inner_->Release(offset); }
  std::optional<uint64_t> size() const override { return inner_->size(); }

 private:
  std::unique_ptr<ByteSource> inner_;
  size_t cap_;
};

}  // namespace

TEST_CASE("reader: visit_types holds for the records read one by one, off the fast path", "[reader]") {
  const Log& log = DefaultLog();
  INFO(SeedInfo(kDefaultSpec));
  const uint32_t mask = RecordTypeBit(RecordType::kTxCommit);
  uint64_t long_records = 0;
  for (uint64_t i = 0; i < log.segs.size(); ++i) {
    INFO("segment " << i);
    const std::string& seg = log.segs[i];
    ShortWindowSource src(MemorySource({reinterpret_cast<const uint8_t*>(seg.data()), seg.size()}), 64);
    ScanOptions o = Opts(RecoveryMode::kStrict, i + 1 == log.segs.size());
    o.visit_types = mask;
    std::vector<Rec> got;
    std::vector<Problem> problems;
    const SegmentScan s = ScanSegment(
        src, SegmentFile{MemPath(i, Variant::kPlain), i, false}, o,
        [&](const RecordView& rv) {
          got.push_back(FromView(rv));
          return true;
        },
        [&](const Problem& p) { problems.push_back(p); });
    for (const Rec& r : log.In(i)) long_records += r.size() > 64;
    const MaskedWant want = Masked(log.In(i), mask);
    CHECK(problems.empty());
    CHECK(s.end == SegmentEnd::kClean);
    CHECK(Diff(got, want.visited) == "");
    CheckCounted(s, want);
  }
  CHECK(long_records > 0);  // some records did go the slow way
}
