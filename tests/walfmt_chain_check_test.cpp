// The read-ahead's chain check (chain_check.h) and the reader's use of it:
// the check vouches exactly for the records of the chain that passed, in
// whatever pieces the bytes arrive; the reader skips checksums only for a
// record on that chain, never for one it reached another way (a `start`
// inside a record, a resync after damage in salvage).
#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "test_files.h"

#include "walfmt/bytes.h"
#include "walfmt/chain_check.h"
#include "walfmt/reader.h"
#include "walfmt/record.h"
#include "walfmt/segment.h"
#include "walfmt/source.h"

namespace {

using namespace walfmt;

// A segment built by hand: header, then framed payloads; the offsets of the
// records in `starts`.
struct Seg {
  std::string bytes;
  std::vector<uint64_t> starts;
  std::vector<uint64_t> ends;
};

void Append(Seg& s, RecordType type, uint16_t flags, const std::string& payload) {
  uint8_t h[kRecordHeaderSize];
  EncodeRecordHeader(type, flags, {reinterpret_cast<const uint8_t*>(payload.data()), payload.size()}, h);
  s.starts.push_back(s.bytes.size());
  s.bytes.append(reinterpret_cast<const char*>(h), kRecordHeaderSize);
  s.bytes += payload;
  s.ends.push_back(s.bytes.size());
}

Seg NewSeg() {
  Seg s;
  SegmentHeader h;
  h.node_id = 1;
  h.cluster_id = 7;
  uint8_t b[kSegmentHeaderSize];
  EncodeSegmentHeader(h, b);
  s.bytes.assign(reinterpret_cast<const char*>(b), kSegmentHeaderSize);
  return s;
}

// Records of random sizes (empty payloads, a few large ones) with random bytes.
Seg RandomSeg(std::mt19937_64& rng, size_t records) {
  Seg s = NewSeg();
  for (size_t i = 0; i < records; ++i) {
    const size_t kind = rng() % 10;
    const size_t n = kind == 0 ? 0 : kind == 1 ? 3000 + rng() % 5000 : rng() % 200;
    std::string p(n, '\0');
    for (char& c : p) c = static_cast<char>(rng());
    Append(s, RecordType::kTxData, 0, p);
  }
  return s;
}

// Feeds `bytes` in random pieces (1 byte up to `max_piece`).
uint64_t CheckInPieces(const std::string& bytes, std::mt19937_64& rng, size_t max_piece) {
  detail::ChainCheck c;
  size_t off = 0;
  while (off < bytes.size()) {
    const size_t n = std::min<size_t>(bytes.size() - off, 1 + rng() % max_piece);
    c.Feed(reinterpret_cast<const uint8_t*>(bytes.data()) + off, n);
    off += n;
  }
  return c.verified_end();
}

uint8_t* At(std::string& s, uint64_t off) { return reinterpret_cast<uint8_t*>(s.data()) + off; }

struct Scan {
  SegmentScan scan;
  std::vector<uint64_t> visited;
  std::vector<Problem> problems;
};

Scan ScanWith(std::unique_ptr<ByteSource> src, RecoveryMode mode, uint64_t start = 0) {
  Scan out;
  ScanOptions opt;
  opt.mode = mode;
  opt.start = start;
  out.scan = ScanSegment(
      *src, {"mem/0000000000000000.wal", 0, false}, opt,
      [&](const RecordView& v) {
        out.visited.push_back(v.lsn.offset);
        return true;
      },
      [&](const Problem& p) { out.problems.push_back(p); });
  return out;
}
std::span<const uint8_t> Span(const std::string& s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }

}  // namespace

TEST_CASE("chain check: an intact segment is vouched for to its last record, in pieces of any size", "[chain]") {
  const uint64_t seed = 0xC4A1;
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  for (int round = 0; round < 40; ++round) {
    INFO("round " << round);
    const Seg s = RandomSeg(rng, 1 + rng() % 60);
    for (size_t max_piece : {size_t{1}, size_t{7}, size_t{16}, size_t{100}, size_t{5000}, size_t{1} << 20}) {
      INFO("pieces up to " << max_piece);
      CHECK(CheckInPieces(s.bytes, rng, max_piece) == s.ends.back());
    }
  }
  detail::ChainCheck none;
  CHECK(none.verified_end() == kSegmentHeaderSize);
}

TEST_CASE("chain check: it stops at the first record that fails, whatever fails and wherever the pieces end",
          "[chain]") {
  const uint64_t seed = 0xC4A2;
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  const Seg s = RandomSeg(rng, 40);
  // Every byte of every record flipped in turn (header and payload), and
  // the bytes cut short at every record: the check ends at that record's
  // start, never past it.
  for (size_t k = 0; k < s.starts.size(); ++k) {
    for (uint64_t off = s.starts[k]; off < s.ends[k]; off += 1 + (off - s.starts[k]) / 8) {
      std::string bad = s.bytes;
      *At(bad, off) ^= 0x20;
      INFO("record " << k << " at " << s.starts[k] << ", byte " << off << " flipped");
      const uint64_t got = CheckInPieces(bad, rng, 1 + rng() % 300);
      CHECK(got == s.starts[k]);
    }
    std::string cut = s.bytes.substr(0, s.ends[k] - 1);
    INFO("cut one byte short of the end of record " << k);
    CHECK(CheckInPieces(cut, rng, 1 + rng() % 300) == s.starts[k]);
  }
  SECTION("a length over the limit, re-signed, is not followed") {
    std::string bad = s.bytes;
    const uint64_t off = s.starts[5];
    StoreU32(At(bad, off + 4), static_cast<uint32_t>(kMaxRecordPayload) + 1);
    StoreU32(At(bad, off), ComputeRecordHeaderCrc(At(bad, off)));
    CHECK(CheckInPieces(bad, rng, 64) == off);
  }
}

TEST_CASE("chain check: the reader over a checked source finds what it finds over memory", "[chain][reader]") {
  const uint64_t seed = 0xC4A3;
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  const Seg s = RandomSeg(rng, 30);
  for (int round = 0; round < 200; ++round) {
    INFO("round " << round);
    std::string bad = s.bytes;
    const int flips = static_cast<int>(rng() % 3);
    for (int i = 0; i < flips; ++i)
      *At(bad, kSegmentHeaderSize + rng() % (bad.size() - kSegmentHeaderSize)) ^= 1 + rng() % 255;
    if (rng() % 4 == 0) bad.resize(kSegmentHeaderSize + rng() % (bad.size() - kSegmentHeaderSize));
    for (RecoveryMode mode : {RecoveryMode::kStrict, RecoveryMode::kTolerateTornTail, RecoveryMode::kSalvage}) {
      INFO("mode " << RecoveryModeName(mode));
      const Scan want = ScanWith(MemorySource(Span(bad)), mode);
      const Scan got = ScanWith(detail::CheckedMemorySource(Span(bad), 1 + rng() % 2000), mode);
      CHECK(got.visited == want.visited);
      REQUIRE(got.problems.size() == want.problems.size());
      for (size_t i = 0; i < want.problems.size(); ++i)
        CHECK(got.problems[i].ToString() == want.problems[i].ToString());
      CHECK(got.scan.valid_end == want.scan.valid_end);
      CHECK(got.scan.end == want.scan.end);
    }
  }
}

// The records inside another record's payload are not on the chain: the
// check never looked at them, whatever their bytes.
TEST_CASE("chain check: the reader checksums every record it reached off the chain", "[chain][reader]") {
  // An inner segment's records: A (intact), then B whose payload checksum is
  // wrong. They are laid inside the payload of an outer record.
  Seg inner = NewSeg();
  Append(inner, RecordType::kTxData, 0, std::string(40, 'a'));
  Append(inner, RecordType::kTxData, 0, std::string(40, 'b'));
  std::string nested = inner.bytes.substr(kSegmentHeaderSize);
  nested[nested.size() - 1] ^= 1;  // B's payload no longer matches its checksum
  const uint64_t b_in_nested = inner.starts[1] - kSegmentHeaderSize;

  SECTION("a scan that starts inside a record (ScanOptions::start)") {
    Seg s = NewSeg();
    Append(s, RecordType::kTxData, 0, std::string(10, 'x') + nested);
    Append(s, RecordType::kTxData, 0, "after");
    const uint64_t a = s.starts[0] + kRecordHeaderSize + 10;
    for (size_t block : {size_t{13}, size_t{4096}}) {
      INFO("blocks of " << block);
      const Scan got = ScanWith(detail::CheckedMemorySource(Span(s.bytes), block), RecoveryMode::kSalvage, a);
      REQUIRE(!got.visited.empty());
      CHECK(got.visited[0] == a);
      REQUIRE(!got.problems.empty());
      CHECK(got.problems[0].kind == ProblemKind::kPayloadChecksum);
      CHECK(got.problems[0].offset == a + b_in_nested);
      const Scan want = ScanWith(MemorySource(Span(s.bytes)), RecoveryMode::kSalvage, a);
      CHECK(got.visited == want.visited);
    }
  }
  SECTION("salvage resyncing inside a record the check passed (type 0: intact, but not a record to read)") {
    Seg s = NewSeg();
    Append(s, RecordType::kTxData, 0, "before");
    Append(s, static_cast<RecordType>(0), 0, std::string(10, 'x') + nested);
    Append(s, RecordType::kTxData, 0, "after");
    const uint64_t a = s.starts[1] + kRecordHeaderSize + 10;
    for (size_t block : {size_t{13}, size_t{4096}}) {
      INFO("blocks of " << block);
      const Scan got = ScanWith(detail::CheckedMemorySource(Span(s.bytes), block), RecoveryMode::kSalvage);
      // The type-0 record is damage; salvage finds A inside it, then B's
      // checksum must still be computed.
      REQUIRE(got.problems.size() >= 2);
      CHECK(got.problems[0].kind == ProblemKind::kInvalidType);
      CHECK(got.problems[1].kind == ProblemKind::kPayloadChecksum);
      CHECK(got.problems[1].offset == a + b_in_nested);
      CHECK(std::find(got.visited.begin(), got.visited.end(), a + b_in_nested) == got.visited.end());
      const Scan want = ScanWith(MemorySource(Span(s.bytes)), RecoveryMode::kSalvage);
      CHECK(got.visited == want.visited);
    }
  }
}

TEST_CASE("chain check: a file read ahead is checked on the reading thread, across its 512 KiB blocks",
          "[chain][reader]") {
  const uint64_t seed = 0xC4A4;
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  Seg s = NewSeg();
  while (s.bytes.size() < (3u << 20)) {
    std::string p(rng() % 9000, '\0');
    for (char& c : p) c = static_cast<char>(rng());
    Append(s, RecordType::kTxData, 0, p);
  }
  walcut::testing::TempDir tmp;
  const std::string path = tmp.path() + "/0000000000000000.wal";
  // One record in the third block damaged: what comes before it is read
  // the same, the damage is found at the same place.
  size_t k = 0;
  while (s.starts[k] < (1u << 20) + 100) ++k;
  std::string bad = s.bytes;
  *At(bad, s.ends[k] - 1) ^= 4;
  for (const std::string* data : {&bad, &s.bytes}) {  // the intact one last: see below
    const Scan want = ScanWith(MemorySource(Span(*data)), RecoveryMode::kTolerateTornTail);
    walcut::testing::WriteFileBytes(path, *data);
    auto src = OpenSegmentSource(path, false, true);
    REQUIRE(src.ok());
    const Scan got = ScanWith(std::move(*src), RecoveryMode::kTolerateTornTail);
    CHECK(got.visited == want.visited);
    REQUIRE(got.problems.size() == want.problems.size());
    for (size_t i = 0; i < want.problems.size(); ++i) CHECK(got.problems[i].ToString() == want.problems[i].ToString());
    CHECK(got.scan.valid_end == want.scan.valid_end);
  }
  // The blocks go to this thread's spares and come back for the next source
  // opened here: a .wal.zst source (which checks nothing) must not inherit
  // what a read-ahead block said of another file (the intact one, vouched
  // for well past the damage here).
  // Damage every 256 KiB, read in salvage mode: every one is found.
  std::string many = s.bytes;
  size_t damaged = 0;
  for (size_t i = 1; i < s.starts.size(); ++i) {
    if (s.starts[i] / (256u << 10) != s.starts[i - 1] / (256u << 10)) {
      *At(many, s.ends[i] - 1) ^= 4;
      ++damaged;
    }
  }
  REQUIRE(damaged >= 10);
  auto z = ZstdCompress(Span(many));
  REQUIRE(z.ok());
  walcut::testing::WriteFileBytes(path + ".zst", *z);
  auto zsrc = OpenSegmentSource(path + ".zst", true);
  REQUIRE(zsrc.ok());
  CHECK((*zsrc)->CheckedChainEnd() == 0);
  const Scan zgot = ScanWith(std::move(*zsrc), RecoveryMode::kSalvage);
  const Scan want = ScanWith(MemorySource(Span(many)), RecoveryMode::kSalvage);
  CHECK(want.problems.size() == damaged);
  CHECK(zgot.visited == want.visited);
  CHECK(zgot.problems.size() == want.problems.size());
}
