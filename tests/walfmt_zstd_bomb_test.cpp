// A .wal.zst costs CPU in proportion to what a segment holds, not to what
// its compressed bytes can expand to: the reader decompresses no further
// than kMaxGetBytes (the longest record) past the last record, or past an
// unusable segment header, when nothing there is a record; a frame may
// decompress to no more than its header declares; and no more than
// kMaxSegmentBytes in any case (FORMAT.md, "Archived segments").
#define ZSTD_STATIC_LINKING_ONLY  // ZSTD_getFrameHeader: where a frame header ends

#include <time.h>

#include <cstring>
#include <string>
#include <vector>

#include <zstd.h>
#include <catch2/catch.hpp>

#include "test_files.h"
#include "walfmt/reader.h"
#include "walfmt/record.h"
#include "walfmt/segment.h"
#include "walfmt/source.h"

using namespace walfmt;

namespace {

std::span<const uint8_t> Span(const std::string& s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }

// A segment in memory: its header and `records` records of transaction data.
std::string BuildSegment(int records) {
  SegmentHeader h;
  h.node_id = 1;
  h.cluster_id = 42;
  uint8_t hdr[kSegmentHeaderSize];
  EncodeSegmentHeader(h, hdr);
  std::string seg(reinterpret_cast<char*>(hdr), sizeof(hdr));
  for (int i = 0; i < records; ++i) {
    std::string payload;
    REQUIRE(EncodePayload(TxData{TxId{1, static_cast<uint64_t>(i + 1)}, {{WriteOp::kPut, "k", std::string(40, 'v')}}},
                          payload)
                .ok());
    uint8_t rh[kRecordHeaderSize];
    EncodeRecordHeader(RecordType::kTxData, 0, Span(payload), rh);
    seg.append(reinterpret_cast<char*>(rh), sizeof(rh));
    seg += payload;
  }
  return seg;
}

// One zstd frame of `s` that declares its size (walfmt::ZstdCompress).
std::string Compress(const std::string& s) {
  auto z = ZstdCompress(Span(s));
  REQUIRE(z.ok());
  return *z;
}

// One zstd frame of `head` followed by `zeros` zero bytes, compressed as a
// stream (level 1): its header declares no content size.
std::string CompressStream(const std::string& head, uint64_t zeros) {
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  REQUIRE(cctx != nullptr);
  REQUIRE_FALSE(ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 1)));
  std::string out;
  std::vector<char> buf(ZSTD_CStreamOutSize());
  auto feed = [&](const void* p, size_t n, ZSTD_EndDirective mode) {
    ZSTD_inBuffer in{p, n, 0};
    for (;;) {
      ZSTD_outBuffer o{buf.data(), buf.size(), 0};
      const size_t rc = ZSTD_compressStream2(cctx, &o, &in, mode);
      REQUIRE_FALSE(ZSTD_isError(rc));
      out.append(buf.data(), o.pos);
      if (mode == ZSTD_e_end ? rc == 0 : in.pos == in.size) break;
    }
  };
  feed(head.data(), head.size(), ZSTD_e_continue);
  const std::string chunk(4u << 20, '\0');
  for (uint64_t left = zeros; left > 0;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(left, chunk.size()));
    feed(chunk.data(), n, ZSTD_e_continue);
    left -= n;
  }
  feed(nullptr, 0, ZSTD_e_end);
  ZSTD_freeCCtx(cctx);
  return out;
}

double CpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

struct Scanned {
  SegmentScan scan;
  std::vector<Problem> problems;
  int visited = 0;
};

Scanned ScanSource(ByteSource& src, bool compressed, RecoveryMode mode, bool is_last) {
  Scanned out;
  ScanOptions so;
  so.mode = mode;
  so.is_last = is_last;
  out.scan = ScanSegment(
      src, SegmentFile{compressed ? "mem.wal.zst" : "mem.wal", 0, compressed}, so,
      [&](const RecordView&) {
        ++out.visited;
        return true;
      },
      [&](const Problem& p) { out.problems.push_back(p); });
  return out;
}

Scanned ScanMemory(const std::string& data, bool zstd, RecoveryMode mode, bool is_last) {
  auto src = MemorySource(Span(data), zstd);
  return ScanSource(*src, zstd, mode, is_last);
}

const std::string kNotDecompressed = "the rest of the archive is not decompressed";

}  // namespace

TEST_CASE("zstd bomb: records then 4 GiB of zeros cost well under a second of CPU", "[zstd][bomb]") {
  const std::string seg = BuildSegment(5);
  const std::string z = CompressStream(seg, uint64_t{4} << 30);
  INFO("compressed: " << z.size() << " bytes");
  REQUIRE(z.size() < (4u << 20));
  REQUIRE(ZSTD_getFrameContentSize(z.data(), z.size()) == ZSTD_CONTENTSIZE_UNKNOWN);
  walcut::testing::TempDir dir;
  const std::string path = dir.path() + "/0000000000000000.wal.zst";
  walcut::testing::WriteFileBytes(path, z);

  for (RecoveryMode mode :
       {RecoveryMode::kStrict, RecoveryMode::kTolerateTornTail, RecoveryMode::kPointInTime, RecoveryMode::kSalvage}) {
    for (bool from_file : {false, true}) {
      INFO(RecoveryModeName(mode) << (from_file ? ", from the file (decoded on a thread)" : ", from memory"));
      const double t0 = CpuSeconds();
      Scanned o;
      if (from_file) {
        auto src = OpenSegmentSource(path, true);
        REQUIRE(src.ok());
        o = ScanSource(**src, true, mode, true);
      } else {
        o = ScanMemory(z, true, mode, true);
      }
      const double cpu = CpuSeconds() - t0;
      INFO("CPU: " << cpu << " s");
      // Before the reader stopped past the records: about 10 s (1 GiB
      // decompressed and searched byte by byte for a record).
      CHECK(cpu < 3.0);
      CHECK(o.visited == 5);
      CHECK(o.scan.records == 5);
      CHECK(o.scan.valid_end == seg.size());
      REQUIRE(o.problems.size() == 1);
      const Problem& p = o.problems[0];
      // Zeros where the next record would start: a header checksum
      // mismatch, not a torn tail (what follows was never looked at).
      CHECK(p.kind == ProblemKind::kHeaderChecksum);
      CHECK(p.fatal);
      CHECK(p.offset == seg.size());
      CHECK(p.length == kMaxGetBytes);
      CHECK(p.actual == "00000000");
      CHECK(p.detail == "record header checksum mismatch (no record in the " + std::to_string(kMaxGetBytes) +
                            " bytes from here: " + kNotDecompressed + ")");
      CHECK(o.scan.damaged_to_end);
      CHECK_FALSE(o.scan.zero_filled_tail);
      CHECK(o.scan.file_bytes == seg.size() + kMaxGetBytes);
      CHECK(o.scan.end == (mode == RecoveryMode::kSalvage ? SegmentEnd::kSalvaged : SegmentEnd::kDamaged));
      CHECK(o.scan.failed == (mode == RecoveryMode::kStrict || mode == RecoveryMode::kTolerateTornTail));
    }
  }
}

TEST_CASE("zstd bomb: zeros past the records, up to the look past and one byte more", "[zstd][bomb]") {
  // The last candidate record start FindNext looks at is kMaxGetBytes past
  // the last record; with 15 zeros more (a header cut short) the data ends
  // before a header could start there: the tail is read to its end.
  const std::string seg = BuildSegment(3);
  for (uint64_t zeros :
       {uint64_t{5000}, kMaxGetBytes + kRecordHeaderSize - 1, kMaxGetBytes + kRecordHeaderSize, uint64_t{3} << 20}) {
    INFO(zeros << " zeros after the records");
    const std::string data = seg + std::string(zeros, '\0');
    const bool cut = zeros >= kMaxGetBytes + kRecordHeaderSize;
    // A plain segment: a zero-filled torn tail, however long.
    const Scanned plain = ScanMemory(data, false, RecoveryMode::kTolerateTornTail, true);
    REQUIRE(plain.problems.size() == 1);
    CHECK(plain.problems[0].kind == ProblemKind::kTornTail);
    CHECK(plain.problems[0].length == zeros);
    CHECK(plain.scan.zero_filled_tail);
    CHECK_FALSE(plain.scan.failed);
    // Not the last segment: damage to the end of the data.
    const Scanned middle = ScanMemory(data, false, RecoveryMode::kTolerateTornTail, false);
    REQUIRE(middle.problems.size() == 1);
    CHECK(middle.problems[0].kind == ProblemKind::kHeaderChecksum);
    CHECK(middle.problems[0].length == zeros);
    CHECK(middle.problems[0].detail == "record header checksum mismatch (not the last segment)");

    // The same bytes archived: the same while the zeros end within the look past.
    for (const std::string& z : {CompressStream(data, 0), Compress(data)}) {
      const Scanned o = ScanMemory(z, true, RecoveryMode::kTolerateTornTail, true);
      CHECK(o.visited == 3);
      REQUIRE(o.problems.size() == 1);
      if (!cut) {
        CHECK(o.problems[0].kind == ProblemKind::kTornTail);
        CHECK(o.problems[0].length == zeros);
        CHECK(o.scan.zero_filled_tail);
        CHECK(o.scan.file_bytes == data.size());
        CHECK_FALSE(o.scan.failed);
        continue;
      }
      CHECK(o.problems[0].kind == ProblemKind::kHeaderChecksum);
      CHECK(o.problems[0].length == kMaxGetBytes);
      CHECK(o.problems[0].detail.find(kNotDecompressed) != std::string::npos);
      CHECK_FALSE(o.scan.zero_filled_tail);
      CHECK(o.scan.file_bytes == seg.size() + kMaxGetBytes);
      CHECK(o.scan.failed);
    }
  }
}

TEST_CASE("zstd bomb: an archive of zeros has no segment header and is not decompressed past the look past",
          "[zstd][bomb]") {
  const std::string z = CompressStream("", uint64_t{1} << 30);
  const double t0 = CpuSeconds();
  const Scanned o = ScanMemory(z, true, RecoveryMode::kSalvage, true);
  const double cpu = CpuSeconds() - t0;
  INFO("CPU: " << cpu << " s");
  CHECK(cpu < 1.0);
  REQUIRE(o.problems.size() == 1);
  CHECK(o.problems[0].kind == ProblemKind::kBadSegmentHeader);
  CHECK(o.problems[0].detail == "not a walcut WAL segment (bad magic) (no record in the " +
                                    std::to_string(kMaxGetBytes) + " bytes from here: " + kNotDecompressed + ")");
  CHECK(o.scan.end == SegmentEnd::kBadHeader);
  CHECK(o.scan.file_bytes == kMaxGetBytes);
  // A plain file of zeros is read to its end, as before.
  const Scanned plain = ScanMemory(std::string(3u << 20, '\0'), false, RecoveryMode::kSalvage, true);
  REQUIRE(plain.problems.size() == 1);
  CHECK(plain.problems[0].detail == "not a walcut WAL segment (bad magic)");
  CHECK(plain.problems[0].length == (3u << 20));
}

TEST_CASE("zstd budget: a segment of exactly the budget is read, one byte more is refused", "[zstd][budget]") {
  // The budget is kMaxSegmentBytes (1 GiB) in the library; the same check
  // with a budget of the segment's own size, so that a test decompresses
  // kilobytes. Both frame kinds: one that declares its size (refused before
  // decompressing) and a stream that does not (refused once it is past it).
  const std::string seg = BuildSegment(20);
  const uint64_t n = seg.size();
  for (bool declared : {true, false}) {
    INFO((declared ? "frame declares its size" : "stream, no size declared"));
    const std::string z = declared ? Compress(seg) : CompressStream(seg, 0);
    REQUIRE((ZSTD_getFrameContentSize(z.data(), z.size()) == n) == declared);
    for (uint64_t budget : {n, n + 1}) {
      INFO("budget " << budget);
      auto src = detail::ZstdMemorySource(Span(z), budget);
      const Scanned o = ScanSource(*src, true, RecoveryMode::kStrict, true);
      CHECK(o.problems.empty());
      CHECK(o.visited == 20);
      CHECK(o.scan.end == SegmentEnd::kClean);
      CHECK(o.scan.file_bytes == n);
    }
    auto src = detail::ZstdMemorySource(Span(z), n - 1);
    const Scanned o = ScanSource(*src, true, RecoveryMode::kSalvage, true);
    REQUIRE(o.problems.size() == 1);
    CHECK(o.problems[0].kind == ProblemKind::kCompression);
    CHECK(o.problems[0].fatal);
    const std::string want =
        declared
            ? "<memory>: decompresses to " + std::to_string(n) + " bytes (its zstd frame header says), more than " +
                  std::to_string(n - 1) + ", the most a segment may hold"
            : "<memory>: decompresses to more than " + std::to_string(n - 1) + " bytes, the most a segment may hold";
    CHECK(o.problems[0].detail.rfind(want, 0) == 0);
    // Refused before a record is visited when the header says so; the
    // stream's records are visited until the budget runs out.
    CHECK(o.visited == (declared ? 0 : 19));
    CHECK(o.scan.end == SegmentEnd::kSalvaged);
  }
}

TEST_CASE("zstd: a frame that decompresses to more than its header declares is refused there", "[zstd][budget]") {
  // The segment, then 64 MiB of zeros in the same frame, whose header says
  // the frame holds the segment alone. zstd itself refuses to decode past
  // the declared size (its buffers are sized by it): the reader reports the
  // archive as damaged without decompressing the 64 MiB.
  const std::string seg = BuildSegment(4);
  const std::string data = seg + std::string(64u << 20, '\0');
  std::string z = Compress(data);
  // Re-declare: the header's content size field, rewritten in place.
  ZSTD_frameHeader fh{};
  REQUIRE(ZSTD_getFrameHeader(&fh, z.data(), z.size()) == 0);
  REQUIRE(fh.frameContentSize == data.size());
  const size_t fcs_bytes = 4;  // 64 MiB and more: a 4-byte field, the header's last bytes
  REQUIRE(fh.headerSize >= 4 + 1 + fcs_bytes);
  const uint32_t declared = static_cast<uint32_t>(seg.size());
  std::memcpy(z.data() + fh.headerSize - fcs_bytes, &declared, fcs_bytes);  // little-endian
  REQUIRE(ZSTD_getFrameContentSize(z.data(), z.size()) == seg.size());

  const double t0 = CpuSeconds();
  const Scanned o = ScanMemory(z, true, RecoveryMode::kSalvage, true);
  const double cpu = CpuSeconds() - t0;
  INFO("CPU: " << cpu << " s");
  CHECK(cpu < 1.0);
  REQUIRE(o.problems.size() == 1);
  CHECK(o.problems[0].kind == ProblemKind::kCompression);
  CHECK(o.problems[0].fatal);
  CHECK(o.problems[0].detail.rfind("<memory>: zstd: ", 0) == 0);
  CHECK(o.scan.end == SegmentEnd::kSalvaged);
}
