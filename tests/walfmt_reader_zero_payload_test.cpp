// A record whose header reached the disk but whose payload did not: zeros
// to the end of the last segment are a torn tail, anywhere else damage
// (FORMAT.md, "Reading: damage and torn tails").
#include <cstring>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "walfmt/crc32c.h"
#include "walfmt/reader.h"
#include "walfmt/record.h"
#include "walfmt/segment.h"
#include "walfmt/source.h"

using namespace walfmt;

namespace {

// One segment built in memory: header + records, returning record offsets.
std::string BuildSegment(uint64_t index, int records, std::vector<uint64_t>& offsets) {
  SegmentHeader h;
  h.node_id = 1;
  h.cluster_id = 42;
  h.segment_index = index;
  uint8_t hdr[kSegmentHeaderSize];
  EncodeSegmentHeader(h, hdr);
  std::string seg(reinterpret_cast<char*>(hdr), sizeof(hdr));
  for (int i = 0; i < records; ++i) {
    std::string payload;
    REQUIRE(EncodePayload(TxData{TxId{1, static_cast<uint64_t>(i + 1)}, {{WriteOp::kPut, "k", std::string(40, 'v')}}},
                          payload)
                .ok());
    uint8_t rh[kRecordHeaderSize];
    EncodeRecordHeader(RecordType::kTxData, 0, {reinterpret_cast<const uint8_t*>(payload.data()), payload.size()}, rh);
    offsets.push_back(seg.size());
    seg.append(reinterpret_cast<char*>(rh), sizeof(rh));
    seg += payload;
  }
  return seg;
}

struct Scanned {
  SegmentScan scan;
  std::vector<Problem> problems;
  int visited = 0;
};

Scanned Scan(const std::string& seg, RecoveryMode mode, bool is_last) {
  Scanned out;
  auto src = MemorySource({reinterpret_cast<const uint8_t*>(seg.data()), seg.size()});
  ScanOptions so;
  so.mode = mode;
  so.is_last = is_last;
  out.scan = ScanSegment(
      *src, SegmentFile{"mem", 0, false}, so,
      [&](const RecordView&) {
        ++out.visited;
        return true;
      },
      [&](const Problem& p) { out.problems.push_back(p); });
  return out;
}

}  // namespace

TEST_CASE("reader: a last record whose payload is all zeros is a torn tail, elsewhere damage", "[reader][torn]") {
  std::vector<uint64_t> offs;
  std::string seg = BuildSegment(0, 5, offs);
  const uint64_t last = offs.back();
  std::memset(seg.data() + last + kRecordHeaderSize, 0, seg.size() - last - kRecordHeaderSize);

  const Scanned t = Scan(seg, RecoveryMode::kTolerateTornTail, /*is_last=*/true);
  CHECK(t.visited == 4);
  CHECK(t.scan.end == SegmentEnd::kTornTail);
  CHECK_FALSE(t.scan.failed);
  CHECK(t.scan.torn_offset == last);
  CHECK(t.scan.valid_end == last);
  REQUIRE(t.problems.size() == 1);
  CHECK(t.problems[0].kind == ProblemKind::kTornTail);
  CHECK_FALSE(t.problems[0].fatal);
  CHECK(t.problems[0].length == seg.size() - last);
  CHECK(t.problems[0].detail == "torn tail (record payload never written (zeros))");

  // The same bytes in a segment that is not the last: damage.
  const Scanned m = Scan(seg, RecoveryMode::kTolerateTornTail, /*is_last=*/false);
  CHECK(m.visited == 4);
  CHECK(m.scan.failed);
  REQUIRE(m.problems.size() == 1);
  CHECK(m.problems[0].kind == ProblemKind::kPayloadChecksum);

  // Zeros followed by another intact record: damage even in the last segment.
  std::vector<uint64_t> offs2;
  std::string seg2 = BuildSegment(0, 5, offs2);
  std::memset(seg2.data() + offs2[2] + kRecordHeaderSize, 0, offs2[3] - offs2[2] - kRecordHeaderSize);
  const Scanned d = Scan(seg2, RecoveryMode::kSalvage, /*is_last=*/true);
  CHECK(d.visited == 4);
  REQUIRE(d.problems.size() == 1);
  CHECK(d.problems[0].kind == ProblemKind::kPayloadChecksum);
  CHECK(d.problems[0].offset == offs2[2]);
  CHECK(d.problems[0].fatal);
}
