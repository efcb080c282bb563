// WalWriter: rolling (records never span segments, a segment rolls only when
// the next record does not fit), the segment header chain, archiving to
// .wal.zst, Create/Open, and recovery after SimulateCrash at every byte.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <zstd.h>
#include <catch2/catch.hpp>

#include "test_files.h"
#include "walfmt/bytes.h"
#include "walfmt/reader.h"
#include "walfmt/record.h"
#include "walfmt/segment.h"
#include "walfmt/writer.h"

namespace {

using namespace walfmt;
using walcut::testing::ReadFileBytes;
using walcut::testing::TempDir;
using walcut::testing::WriteFileBytes;

std::string Unzstd(const std::string& packed) {
  const unsigned long long n = ZSTD_getFrameContentSize(packed.data(), packed.size());
  REQUIRE(n != ZSTD_CONTENTSIZE_ERROR);
  REQUIRE(n != ZSTD_CONTENTSIZE_UNKNOWN);
  std::string out(n, '\0');
  const size_t got = ZSTD_decompress(out.data(), out.size(), packed.data(), packed.size());
  REQUIRE_FALSE(ZSTD_isError(got));
  REQUIRE(got == n);
  return out;
}

std::string RandomString(std::mt19937_64& rng, size_t max_len) {
  std::string s(rng() % (max_len + 1), '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

// Mixed types; about one in 25 is larger than a 4 KiB segment.
Record RandomRecord(std::mt19937_64& rng, uint64_t n) {
  const TxId tx{static_cast<uint32_t>(rng() % 3), n + 1};
  switch (rng() % 8) {
    case 0:
    case 1:
    case 2: {
      TxData r{tx, {}};
      r.writes.resize(1 + rng() % 4);
      for (auto& w : r.writes) {
        w.key = RandomString(rng, 20);
        w.value = RandomString(rng, rng() % 25 == 0 ? 9000 : 300);
      }
      return r;
    }
    case 3:
      return TxPrepare{tx, rng(), {0, 1}};
    case 4:
      return TxCommit{tx, rng() % 5, rng(), 0, {0, 1}};
    case 5:
      return CutStart{rng() % 5, rng()};
    case 6:
      return CutFinish{rng() % 5, rng(), {tx}, {}};
    default:
      return NodeStart{static_cast<uint32_t>(rng() % 3), rng()};
  }
}

struct Written {
  Lsn lsn;
  std::string payload;
  uint16_t type = 0;
  uint64_t time_us = 0;  // the writer's clock when it was appended
  uint64_t size() const { return kRecordHeaderSize + payload.size(); }
  uint64_t end() const { return lsn.offset + size(); }
};

WriterOptions Options(const std::string& dir, uint64_t segment_bytes, bool archive = false) {
  WriterOptions o;
  o.wal_dir = dir;
  o.node_id = 3;
  o.cluster_id = 0xABCDEF0123ull;
  o.segment_bytes = segment_bytes;
  o.archive_compressed = archive;
  return o;
}

// Appends `n` random records, checking Append's position against end().
std::vector<Written> AppendRandom(WalWriter& w, std::mt19937_64& rng, int n, uint64_t first_time) {
  std::vector<Written> out;
  for (int i = 0; i < n; ++i) {
    const uint64_t t = first_time + static_cast<uint64_t>(i);
    w.set_time_us(t);
    const Record r = RandomRecord(rng, t);
    std::string payload;
    REQUIRE(EncodePayload(r, payload).ok());
    auto lsn = w.Append(r);
    INFO(lsn.status().message());
    REQUIRE(lsn.ok());
    Written x{*lsn, payload, static_cast<uint16_t>(TypeOf(r)), t};
    REQUIRE(w.end() == Lsn{x.lsn.segment, x.end()});
    REQUIRE(w.segment_index() == x.lsn.segment);
    out.push_back(std::move(x));
  }
  return out;
}

struct ReadBack {
  NodeRead read;
  std::vector<Written> recs;
  std::vector<std::string> problems;
};

ReadBack ReadAll(const std::string& dir, RecoveryMode mode = RecoveryMode::kStrict) {
  ReadBack out;
  auto segs = ListSegments(dir, [&](const Problem& p) { out.problems.push_back(p.ToString()); });
  REQUIRE(segs.ok());
  NodeReadOptions opt;
  opt.mode = mode;
  out.read = ReadNodeWal(
      *segs, opt,
      [&](const RecordView& v) {
        out.recs.push_back(Written{v.lsn,
                                   std::string(reinterpret_cast<const char*>(v.payload.data()), v.payload.size()),
                                   static_cast<uint16_t>(v.type), 0});
        return true;
      },
      [&](const Problem& p) { out.problems.push_back(p.ToString()); });
  return out;
}

// "" when the records read are exactly the ones written.
std::string Diff(const std::vector<Written>& got, const std::vector<Written>& want) {
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    if (got[i].lsn != want[i].lsn || got[i].type != want[i].type || got[i].payload != want[i].payload) {
      return fmt::format("record {}: got {} type {} len {}, want {} type {} len {}", i, got[i].lsn.ToString(),
                         got[i].type, got[i].payload.size(), want[i].lsn.ToString(), want[i].type,
                         want[i].payload.size());
    }
  }
  if (got.size() != want.size()) return fmt::format("got {} records, want {}", got.size(), want.size());
  return "";
}

SegmentHeader HeaderOf(const std::string& bytes) {
  SegmentHeader h;
  HeaderError err;
  INFO(err.what);
  REQUIRE(DecodeSegmentHeader({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, h, err));
  return h;
}

std::string SegPath(const std::string& dir, uint64_t i, bool z = false) { return dir + "/" + SegmentFileName(i, z); }

}  // namespace

TEST_CASE("writer: rolling keeps records whole and chains the segment headers", "[writer]") {
  const uint64_t seed = 0x3417E401;
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  TempDir tmp;
  const std::string dir = tmp.path() + "/a/b/wal";  // created, parents included
  const uint64_t seg_bytes = 4096;
  auto w = WalWriter::Create(Options(dir, seg_bytes), 500);
  REQUIRE(w.ok());
  CHECK((*w)->end() == Lsn{0, kSegmentHeaderSize});
  const std::vector<Written> recs = AppendRandom(**w, rng, 400, 1000);
  REQUIRE((*w)->Close().ok());
  const uint64_t last = recs.back().lsn.segment;
  REQUIRE(last >= 10);
  CHECK_FALSE(std::filesystem::exists(SegPath(dir, last + 1)));

  std::vector<std::string> segs;
  for (uint64_t i = 0; i <= last; ++i) segs.push_back(ReadFileBytes(SegPath(dir, i)));
  size_t next = 0;
  bool saw_oversized = false;
  for (uint64_t i = 0; i <= last; ++i) {
    INFO("segment " << i);
    const std::string& s = segs[i];
    // The records of this segment, back to back from the header to the end.
    std::vector<const Written*> in;
    uint64_t off = kSegmentHeaderSize;
    while (next < recs.size() && recs[next].lsn.segment == i) {
      const Written& r = recs[next++];
      REQUIRE(r.lsn.offset == off);
      REQUIRE(r.end() <= s.size());
      CHECK(s.compare(r.lsn.offset + kRecordHeaderSize, r.payload.size(), r.payload) == 0);
      CHECK(LoadU16(reinterpret_cast<const uint8_t*>(s.data()) + r.lsn.offset + 8) == r.type);
      off = r.end();
      in.push_back(&r);
    }
    REQUIRE_FALSE(in.empty());
    CHECK(off == s.size());
    // Over the limit only when one record alone is.
    if (s.size() > seg_bytes) {
      CHECK(in.size() == 1);
      saw_oversized = true;
    }
    // Rolled only when the next record would not fit.
    if (i < last) CHECK(s.size() + recs[next].size() > seg_bytes);

    const SegmentHeader h = HeaderOf(s);
    CHECK(h.segment_index == i);
    CHECK(h.node_id == 3u);
    CHECK(h.cluster_id == 0xABCDEF0123ull);
    CHECK(h.version == kFormatVersion);
    if (i == 0) {
      CHECK(h.flags == 0u);
      CHECK(h.prev_end_offset == 0u);
      CHECK(h.prev_last_crc == 0u);
      CHECK(h.created_time_us == 500u);
    } else {
      CHECK(h.flags == kSegmentFlagHasPredecessor);
      CHECK(h.prev_end_offset == segs[i - 1].size());
      const Written& prev_last = *(in.front() - 1);  // the record before, in segment i - 1
      CHECK(h.prev_last_crc == LoadU32(reinterpret_cast<const uint8_t*>(segs[i - 1].data()) + prev_last.lsn.offset));
      // A segment is started by the append that did not fit in the previous one.
      CHECK(h.created_time_us == in.front()->time_us);
    }
  }
  CHECK(next == recs.size());
  CHECK(saw_oversized);

  const ReadBack rb = ReadAll(dir);
  CHECK(rb.problems.empty());
  CHECK(Diff(rb.recs, recs) == "");
  CHECK_FALSE(rb.read.failed);
}

TEST_CASE("writer: archived segments read back identical", "[writer]") {
  const uint64_t seed = 0x3417E402;
  INFO("seed " << seed);
  TempDir tmp;
  const std::string plain_dir = tmp.path() + "/plain";
  const std::string zst_dir = tmp.path() + "/zst";
  const int level = GENERATE(1, 5);
  INFO("zstd level " << level);
  std::vector<Written> a, b;
  {
    std::mt19937_64 rng(seed);
    auto w = WalWriter::Create(Options(plain_dir, 4096), 7);
    REQUIRE(w.ok());
    a = AppendRandom(**w, rng, 200, 100);
    REQUIRE((*w)->Close().ok());
  }
  {
    std::mt19937_64 rng(seed);
    WriterOptions o = Options(zst_dir, 4096, true);
    o.zstd_level = level;
    auto w = WalWriter::Create(o, 7);
    REQUIRE(w.ok());
    b = AppendRandom(**w, rng, 200, 100);
    REQUIRE((*w)->Close().ok());
  }
  REQUIRE(Diff(b, a) == "");
  const uint64_t last = a.back().lsn.segment;
  REQUIRE(last >= 3);
  for (uint64_t i = 0; i <= last; ++i) {
    INFO("segment " << i);
    const std::string want = ReadFileBytes(SegPath(plain_dir, i));
    if (i < last) {
      CHECK_FALSE(std::filesystem::exists(SegPath(zst_dir, i)));
      const std::string packed = ReadFileBytes(SegPath(zst_dir, i, true));
      CHECK(Unzstd(packed) == want);
    } else {
      // The segment being written is never archived.
      CHECK_FALSE(std::filesystem::exists(SegPath(zst_dir, i, true)));
      CHECK(ReadFileBytes(SegPath(zst_dir, i)) == want);
    }
  }
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(zst_dir)) {
    INFO(e.path().string());
    CHECK(e.path().string().find(".tmp") == std::string::npos);
    ++files;
  }
  CHECK(files == last + 1);
  const ReadBack rb = ReadAll(zst_dir);
  CHECK(rb.problems.empty());
  CHECK(Diff(rb.recs, a) == "");
}

TEST_CASE("writer: Open after SimulateCrash at every byte cuts the torn tail and continues", "[writer]") {
  const uint64_t seed = 0x3417E403;
  INFO("seed " << seed);
  // Small segments so that appending after the restart rolls, and the chain
  // from the repaired segment to the next one is checked by the strict read.
  const uint64_t seg_bytes = 2048;
  // Measure the unsynced span once.
  uint64_t unsynced = 0;
  {
    TempDir tmp;
    std::mt19937_64 rng(seed);
    auto w = WalWriter::Create(Options(tmp.path(), seg_bytes));
    REQUIRE(w.ok());
    (void)AppendRandom(**w, rng, 3, 0);
    REQUIRE((*w)->Sync().ok());
    (void)AppendRandom(**w, rng, 3, 100);
    unsynced = (*w)->unsynced_bytes();
    REQUIRE((*w)->Close().ok());
  }
  REQUIRE(unsynced > 0);
  for (uint64_t keep = 0; keep <= unsynced + 1; ++keep) {
    INFO("kept " << keep << " of " << unsynced << " unsynced bytes");
    TempDir tmp;
    std::mt19937_64 rng(seed);
    std::vector<Written> durable;
    uint64_t synced_end = 0;
    uint64_t seg = 0;
    {
      auto w = WalWriter::Create(Options(tmp.path(), seg_bytes));
      REQUIRE(w.ok());
      durable = AppendRandom(**w, rng, 3, 0);
      REQUIRE((*w)->Sync().ok());
      synced_end = (*w)->end().offset;
      seg = (*w)->segment_index();
      const std::vector<Written> lost = AppendRandom(**w, rng, 3, 100);
      REQUIRE((*w)->unsynced_bytes() == unsynced);
      // Unsynced bytes all belong to the current segment (a roll syncs).
      for (const Written& r : lost) REQUIRE(r.lsn.segment == seg);
      REQUIRE((*w)->SimulateCrash(keep).ok());
      for (const Written& r : lost) {
        if (r.end() <= synced_end + keep) durable.push_back(r);
      }
      // Unusable after the crash.
      CHECK((*w)->Append(NodeStart{1, 1}).status().code() == ErrorCode::kInvalidArgument);
    }
    const uint64_t on_disk = synced_end + std::min(keep, unsynced);
    REQUIRE(std::filesystem::file_size(SegPath(tmp.path(), seg)) == on_disk);
    const uint64_t intact_end = durable.back().end();

    auto w = WalWriter::Open(Options(tmp.path(), seg_bytes), 9999);
    INFO(w.status().message());
    REQUIRE(w.ok());
    // The torn tail is cut off; appending resumes right after the last intact record.
    CHECK(std::filesystem::file_size(SegPath(tmp.path(), seg)) == intact_end);
    CHECK((*w)->end() == Lsn{seg, intact_end});
    const std::vector<Written> more = AppendRandom(**w, rng, 12, 200);
    REQUIRE((*w)->Close().ok());
    CHECK(more.back().lsn.segment > seg);  // rolled at least once after the restart
    std::vector<Written> want = durable;
    want.insert(want.end(), more.begin(), more.end());
    const ReadBack rb = ReadAll(tmp.path(), RecoveryMode::kStrict);
    std::string problems;
    for (const std::string& p : rb.problems) problems += p + "\n";
    INFO(problems);
    CHECK(rb.problems.empty());
    CHECK_FALSE(rb.read.failed);
    CHECK(Diff(rb.recs, want) == "");
  }
}

TEST_CASE("writer: a crash right after a roll leaves a header-only segment that Open continues", "[writer]") {
  TempDir tmp;
  auto w = WalWriter::Create(Options(tmp.path(), 256));
  REQUIRE(w.ok());
  std::vector<Written> durable;
  const std::string payload(150, 'p');
  for (int i = 0; i < 2; ++i) {
    auto lsn = (*w)->AppendRaw(static_cast<uint16_t>(RecordType::kSnapshot), 0,
                               {reinterpret_cast<const uint8_t*>(payload.data()), payload.size()});
    REQUIRE(lsn.ok());
    durable.push_back({*lsn, payload, 8, 0});
  }
  // The second append rolled: segment 1 holds a header and an unsynced record.
  REQUIRE(durable[1].lsn == Lsn{1, kSegmentHeaderSize});
  REQUIRE((*w)->SimulateCrash(0).ok());
  CHECK(std::filesystem::file_size(SegPath(tmp.path(), 1)) == kSegmentHeaderSize);
  durable.pop_back();

  auto w2 = WalWriter::Open(Options(tmp.path(), 256));
  REQUIRE(w2.ok());
  CHECK((*w2)->end() == Lsn{1, kSegmentHeaderSize});
  for (int i = 0; i < 3; ++i) {
    auto lsn = (*w2)->AppendRaw(static_cast<uint16_t>(RecordType::kSnapshot), 0,
                                {reinterpret_cast<const uint8_t*>(payload.data()), payload.size()});
    REQUIRE(lsn.ok());
    CHECK(lsn->segment == 1 + static_cast<uint64_t>(i));
    durable.push_back({*lsn, payload, 8, 0});
  }
  REQUIRE((*w2)->Close().ok());
  const ReadBack rb = ReadAll(tmp.path());
  CHECK(rb.problems.empty());
  CHECK(Diff(rb.recs, durable) == "");
}

TEST_CASE("writer: a segment killed before its header was written is dropped by Open, at every header length",
          "[writer]") {
  // A writer killed between creating a segment and writing its header (as
  // walcut's writer could be before it created segments whole) leaves a
  // last segment shorter than a header. It holds no record: Open removes it
  // and the WAL continues from the segment before; the next roll makes that
  // segment again. A leftover hidden ".new" file of an interrupted creation
  // is replaced, and no ".new" file stays after a roll.
  for (size_t cut : {size_t{0}, size_t{1}, kSegmentHeaderSize - 1}) {
    INFO("header bytes left: " << cut);
    TempDir tmp;
    std::vector<Written> durable;
    const std::string payload(150, 'p');
    {
      auto w = WalWriter::Create(Options(tmp.path(), 256));
      REQUIRE(w.ok());
      auto lsn = (*w)->AppendRaw(static_cast<uint16_t>(RecordType::kSnapshot), 0,
                                 {reinterpret_cast<const uint8_t*>(payload.data()), payload.size()});
      REQUIRE(lsn.ok());
      durable.push_back({*lsn, payload, 8, 0});
      REQUIRE((*w)->Close().ok());
    }
    const std::string header = ReadFileBytes(SegPath(tmp.path(), 0)).substr(0, kSegmentHeaderSize);
    WriteFileBytes(SegPath(tmp.path(), 1), header.substr(0, cut));
    WriteFileBytes(tmp.path() + "/.0000000000000001.wal.new", "leftover");
    auto w = WalWriter::Open(Options(tmp.path(), 256));
    REQUIRE(w.ok());
    CHECK((*w)->end() == Lsn{0, durable.back().end()});
    CHECK_FALSE(std::filesystem::exists(SegPath(tmp.path(), 1)));
    auto lsn = (*w)->AppendRaw(static_cast<uint16_t>(RecordType::kSnapshot), 0,
                               {reinterpret_cast<const uint8_t*>(payload.data()), payload.size()});
    REQUIRE(lsn.ok());
    CHECK(lsn->segment == 1u);  // rolled: segment 1 made again, whole
    durable.push_back({*lsn, payload, 8, 0});
    REQUIRE((*w)->Close().ok());
    CHECK_FALSE(std::filesystem::exists(tmp.path() + "/.0000000000000001.wal.new"));
    const ReadBack rb = ReadAll(tmp.path());
    CHECK(rb.problems.empty());
    CHECK(Diff(rb.recs, durable) == "");
  }
}

TEST_CASE("writer: Open continues after an archived last segment", "[writer]") {
  const uint64_t seed = 0x3417E404;
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  TempDir tmp;
  const std::string dir = tmp.path();
  std::vector<Written> recs;
  {
    auto w = WalWriter::Create(Options(dir, 4096, true));
    REQUIRE(w.ok());
    recs = AppendRandom(**w, rng, 60, 0);
    REQUIRE((*w)->Close().ok());
  }
  const uint64_t last = recs.back().lsn.segment;
  // Archive the last segment too, as a cold copy would be.
  {
    const std::string plain = ReadFileBytes(SegPath(dir, last));
    std::string packed(ZSTD_compressBound(plain.size()), '\0');
    const size_t n = ZSTD_compress(packed.data(), packed.size(), plain.data(), plain.size(), 1);
    REQUIRE_FALSE(ZSTD_isError(n));
    packed.resize(n);
    WriteFileBytes(SegPath(dir, last, true), packed);
    REQUIRE(std::filesystem::remove(SegPath(dir, last)));
  }
  auto w = WalWriter::Open(Options(dir, 4096, true), 42);
  REQUIRE(w.ok());
  CHECK((*w)->end() == Lsn{last + 1, kSegmentHeaderSize});
  const std::vector<Written> more = AppendRandom(**w, rng, 20, 100);
  REQUIRE((*w)->Close().ok());
  CHECK(more.front().lsn.segment == last + 1);
  const bool archived = more.back().lsn.segment > last + 1;
  const std::string next = ReadFileBytes(SegPath(dir, last + 1, archived));
  const SegmentHeader h = HeaderOf(archived ? Unzstd(next) : next);
  CHECK(h.prev_end_offset == recs.back().end());
  CHECK(h.created_time_us == 42u);
  recs.insert(recs.end(), more.begin(), more.end());
  const ReadBack rb = ReadAll(dir);
  CHECK(rb.problems.empty());
  CHECK(Diff(rb.recs, recs) == "");
}

TEST_CASE("writer: Open refuses a damaged last segment and leaves it untouched", "[writer]") {
  const uint64_t seed = 0x3417E405;
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  TempDir tmp;
  std::vector<Written> recs;
  {
    auto w = WalWriter::Create(Options(tmp.path(), 1 << 20));
    REQUIRE(w.ok());
    recs = AppendRandom(**w, rng, 20, 0);
    REQUIRE((*w)->Close().ok());
  }
  const std::string path = SegPath(tmp.path(), 0);
  std::string bytes = ReadFileBytes(path);
  ++bytes[recs[10].lsn.offset + kRecordHeaderSize];
  WriteFileBytes(path, bytes);
  auto w = WalWriter::Open(Options(tmp.path(), 1 << 20));
  REQUIRE_FALSE(w.ok());
  CHECK(w.status().code() == ErrorCode::kCorruption);
  CHECK(w.status().message() == path + ": cannot continue this WAL: its last segment is damaged");
  CHECK(ReadFileBytes(path) == bytes);
}

TEST_CASE("writer: Create refuses a directory that already holds segments", "[writer]") {
  TempDir tmp;
  const std::string dir = tmp.path() + "/wal";
  {
    auto w = WalWriter::Create(Options(dir, 4096));
    REQUIRE(w.ok());
    REQUIRE((*w)->Append(NodeStart{0, 1}).ok());
    REQUIRE((*w)->Close().ok());
  }
  const std::string before = ReadFileBytes(SegPath(dir, 0));
  auto again = WalWriter::Create(Options(dir, 4096));
  REQUIRE_FALSE(again.ok());
  CHECK(again.status().code() == ErrorCode::kInvalidArgument);
  CHECK(again.status().message() == dir + ": already holds WAL segments");
  CHECK(ReadFileBytes(SegPath(dir, 0)) == before);

  // Only archived segments count as well.
  const std::string dir2 = tmp.path() + "/wal2";
  std::filesystem::create_directories(dir2);
  WriteFileBytes(SegPath(dir2, 5, true), "x");
  auto z = WalWriter::Create(Options(dir2, 4096));
  REQUIRE_FALSE(z.ok());
  CHECK(z.status().code() == ErrorCode::kInvalidArgument);

  // Files that are not segments do not.
  const std::string dir3 = tmp.path() + "/wal3";
  std::filesystem::create_directories(dir3);
  WriteFileBytes(dir3 + "/README", "notes");
  auto ok = WalWriter::Create(Options(dir3, 4096));
  REQUIRE(ok.ok());
  REQUIRE((*ok)->Close().ok());
  CHECK(std::filesystem::file_size(SegPath(dir3, 0)) == kSegmentHeaderSize);

  // Open on a fresh directory starts a new WAL.
  auto fresh = WalWriter::Open(Options(tmp.path() + "/new/wal", 4096), 77);
  REQUIRE(fresh.ok());
  CHECK((*fresh)->end() == Lsn{0, kSegmentHeaderSize});
  REQUIRE((*fresh)->Close().ok());
  CHECK(HeaderOf(ReadFileBytes(SegPath(tmp.path() + "/new/wal", 0))).created_time_us == 77u);
}

TEST_CASE("writer: limits and a closed writer", "[writer]") {
  TempDir tmp;
  auto w = WalWriter::Create(Options(tmp.path(), 4096));
  REQUIRE(w.ok());
  REQUIRE((*w)->Append(CutStart{1, 1}).ok());
  const Lsn end = (*w)->end();

  const std::string too_big(kMaxRecordPayload + 1, 'x');
  auto r = (*w)->AppendRaw(1, 0, {reinterpret_cast<const uint8_t*>(too_big.data()), too_big.size()});
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == ErrorCode::kInvalidArgument);
  CHECK(r.status().message() == "record payload of 1048577 bytes exceeds the limit of 1048576");
  CHECK((*w)->end() == end);
  auto r2 = (*w)->Append(TxData{{1, 1}, {{WriteOp::kPut, std::string(kMaxKeyBytes + 1, 'k'), ""}}});
  REQUIRE_FALSE(r2.ok());
  CHECK(r2.status().code() == ErrorCode::kInvalidArgument);
  CHECK((*w)->end() == end);

  // The largest payload is accepted, in a segment of its own.
  const std::string max(kMaxRecordPayload, 'm');
  auto r3 = (*w)->AppendRaw(8, 0, {reinterpret_cast<const uint8_t*>(max.data()), max.size()});
  REQUIRE(r3.ok());
  CHECK(*r3 == Lsn{1, kSegmentHeaderSize});
  auto r4 = (*w)->Append(CutStart{2, 2});
  REQUIRE(r4.ok());
  CHECK(*r4 == Lsn{2, kSegmentHeaderSize});

  REQUIRE((*w)->Close().ok());
  CHECK((*w)->Close().ok());  // idempotent
  auto after = (*w)->Append(CutStart{3, 3});
  REQUIRE_FALSE(after.ok());
  CHECK(after.status().message() == "WAL writer is closed");
  CHECK((*w)->Sync().code() == ErrorCode::kInvalidArgument);
  CHECK((*w)->SimulateCrash(0).code() == ErrorCode::kInvalidArgument);

  const ReadBack rb = ReadAll(tmp.path());
  CHECK(rb.problems.empty());
  REQUIRE(rb.recs.size() == 3);
  CHECK(rb.recs[1].payload == max);
}

TEST_CASE("writer: buffering, Sync and the destructor", "[writer]") {
  TempDir tmp;
  const std::string path = SegPath(tmp.path(), 0);
  {
    auto w = WalWriter::Create(Options(tmp.path(), 64 << 20));
    REQUIRE(w.ok());
    // The header is on disk at once; records wait for Sync.
    CHECK(std::filesystem::file_size(path) == kSegmentHeaderSize);
    REQUIRE((*w)->Append(CutStart{1, 1}).ok());
    CHECK(std::filesystem::file_size(path) == kSegmentHeaderSize);
    CHECK((*w)->unsynced_bytes() == kRecordHeaderSize + 16);
    REQUIRE((*w)->Sync().ok());
    CHECK((*w)->unsynced_bytes() == 0u);
    CHECK(std::filesystem::file_size(path) == kSegmentHeaderSize + kRecordHeaderSize + 16);
    REQUIRE((*w)->Append(CutStart{2, 2}).ok());
    // Dropped without Close: the destructor still writes what was buffered.
  }
  CHECK(std::filesystem::file_size(path) == kSegmentHeaderSize + 2 * (kRecordHeaderSize + 16));

  // Past 4 MiB of unsynced bytes the buffer goes to the file: a crash may keep them.
  const std::string dir2 = tmp.path() + "/big";
  auto w = WalWriter::Create(Options(dir2, 64 << 20));
  REQUIRE(w.ok());
  const std::string payload(100000, 'b');
  uint64_t appended = 0;
  while (appended < (5u << 20)) {
    REQUIRE((*w)->AppendRaw(8, 0, {reinterpret_cast<const uint8_t*>(payload.data()), payload.size()}).ok());
    appended += kRecordHeaderSize + payload.size();
  }
  CHECK((*w)->unsynced_bytes() < (4u << 20));
  REQUIRE((*w)->SimulateCrash(0).ok());
  const uint64_t size = std::filesystem::file_size(SegPath(dir2, 0));
  CHECK(size >= kSegmentHeaderSize + (4u << 20));
  CHECK(size < kSegmentHeaderSize + appended);
  const ReadBack rb = ReadAll(dir2, RecoveryMode::kStrict);
  CHECK(rb.problems.empty());
  CHECK(rb.recs.size() == (size - kSegmentHeaderSize) / (kRecordHeaderSize + payload.size()));
}

// Found by this suite (writer.cpp at b065e0b: Open never compared the last
// segment's header with opt.node_id / opt.cluster_id, appended to the foreign
// log and chained a segment of the wrong node to it at the next roll); fixed
// in 66cda30.
TEST_CASE("writer: Open refuses a WAL of another node or cluster", "[writer]") {
  TempDir tmp;
  {
    auto w = WalWriter::Create(Options(tmp.path(), 4096));
    REQUIRE(w.ok());
    REQUIRE((*w)->Append(NodeStart{0, 1}).ok());
    REQUIRE((*w)->Close().ok());
  }
  const std::string before = ReadFileBytes(SegPath(tmp.path(), 0));
  WriterOptions other_node = Options(tmp.path(), 4096);
  other_node.node_id = 4;
  auto a = WalWriter::Open(other_node);
  CHECK_FALSE(a.ok());
  if (a.ok()) REQUIRE((*a)->Close().ok());
  CHECK(a.status().code() == ErrorCode::kInvalidArgument);
  CHECK(a.status().message() ==
        SegPath(tmp.path(), 0) +
            ": cannot continue this WAL: it belongs to node 3 of cluster 000000abcdef0123, not node 4 of cluster "
            "000000abcdef0123");
  WriterOptions other_cluster = Options(tmp.path(), 4096);
  other_cluster.cluster_id ^= 1;
  auto b = WalWriter::Open(other_cluster);
  CHECK_FALSE(b.ok());
  if (b.ok()) REQUIRE((*b)->Close().ok());
  CHECK(b.status().code() == ErrorCode::kInvalidArgument);
  CHECK(ReadFileBytes(SegPath(tmp.path(), 0)) == before);
  // The owner itself continues.
  auto own = WalWriter::Open(Options(tmp.path(), 4096));
  REQUIRE(own.ok());
  CHECK((*own)->end() == Lsn{0, std::filesystem::file_size(SegPath(tmp.path(), 0))});
  REQUIRE((*own)->Close().ok());
}
