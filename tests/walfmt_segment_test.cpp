// Segment framing (segment.h): the 64-byte segment header and its every
// rejection, the 16-byte record header, and segment file names.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "walfmt/bytes.h"
#include "walfmt/crc32c.h"
#include "walfmt/record.h"
#include "walfmt/segment.h"

namespace {

using namespace walfmt;

SegmentHeader SampleHeader() {
  SegmentHeader h;
  h.node_id = 0x01020304;
  h.cluster_id = 0x1122334455667788ull;
  h.segment_index = 0x2A;
  h.prev_end_offset = 0x1F40;
  h.prev_last_crc = 0xCAFEBABE;
  h.flags = kSegmentFlagHasPredecessor;
  h.created_time_us = 987654321;
  return h;
}

std::vector<uint8_t> Encoded(const SegmentHeader& h) {
  std::vector<uint8_t> b(kSegmentHeaderSize);
  EncodeSegmentHeader(h, b.data());
  return b;
}

void Resign(std::vector<uint8_t>& b) { StoreU32(b.data() + 60, MaskCrc(crc32c::Value(b.data(), 60))); }

}  // namespace

TEST_CASE("segment: header layout and round trip", "[segment]") {
  const SegmentHeader h = SampleHeader();
  const std::vector<uint8_t> b = Encoded(h);
  CHECK(std::memcmp(b.data(), "WALCUTSG", 8) == 0);
  CHECK(LoadU16(&b[8]) == kFormatVersion);
  CHECK(LoadU16(&b[10]) == 64);
  CHECK(LoadU32(&b[12]) == 0x01020304u);
  CHECK(LoadU64(&b[16]) == 0x1122334455667788ull);
  CHECK(LoadU64(&b[24]) == 0x2Aull);
  CHECK(LoadU64(&b[32]) == 0x1F40ull);
  CHECK(LoadU32(&b[40]) == 0xCAFEBABEu);
  CHECK(LoadU32(&b[44]) == kSegmentFlagHasPredecessor);
  CHECK(LoadU64(&b[48]) == 987654321ull);
  CHECK(LoadU32(&b[56]) == 0u);
  CHECK(LoadU32(&b[60]) == MaskCrc(crc32c::Value(b.data(), 60)));

  SegmentHeader back;
  HeaderError err;
  REQUIRE(DecodeSegmentHeader(b, back, err));
  CHECK(back == h);
  CHECK(back.has_predecessor());
  SegmentHeader first;
  CHECK_FALSE(first.has_predecessor());
  // Extra bytes after the header are the records: ignored here.
  std::vector<uint8_t> longer = b;
  longer.resize(200, 0xAB);
  SegmentHeader back2;
  REQUIRE(DecodeSegmentHeader(longer, back2, err));
  CHECK(back2 == h);
}

TEST_CASE("segment: every short header is rejected", "[segment]") {
  const std::vector<uint8_t> b = Encoded(SampleHeader());
  for (size_t n = 0; n < kSegmentHeaderSize; ++n) {
    INFO("header cut to " << n << " bytes");
    const std::vector<uint8_t> cut(b.begin(), b.begin() + static_cast<ptrdiff_t>(n));
    SegmentHeader h;
    HeaderError err;
    REQUIRE_FALSE(DecodeSegmentHeader(cut, h, err));
    CHECK(err.what == "segment header cut short");
    CHECK(err.expected == "64 bytes");
    CHECK(err.actual == fmt::format("{} bytes", n));
    CHECK(err.offset == 0);
  }
}

TEST_CASE("segment: bad magic, checksum, version and size", "[segment]") {
  const std::vector<uint8_t> good = Encoded(SampleHeader());
  SegmentHeader h;
  HeaderError err;

  SECTION("bad magic") {
    std::vector<uint8_t> b = good;
    std::memcpy(b.data(), "PK\x03\x04zip!", 8);
    REQUIRE_FALSE(DecodeSegmentHeader(b, h, err));
    CHECK(err.what == "not a walcut WAL segment (bad magic)");
    CHECK(err.expected == "57414c4355545347 (\"WALCUTSG\")");
    CHECK(err.actual == "504b03047a697021");
    CHECK(err.offset == 0);
  }
  SECTION("every single-byte change of bytes 8..63 breaks the checksum") {
    for (size_t i = 8; i < kSegmentHeaderSize; ++i) {
      INFO("byte " << i);
      std::vector<uint8_t> b = good;
      ++b[i];
      REQUIRE_FALSE(DecodeSegmentHeader(b, h, err));
      CHECK(err.what == "segment header checksum mismatch");
      CHECK(err.expected == fmt::format("{:08x}", MaskCrc(crc32c::Value(b.data(), 60))));
      CHECK(err.actual == fmt::format("{:08x}", LoadU32(b.data() + 60)));
      CHECK(err.offset == 60);
    }
  }
  SECTION("a re-signed unknown version") {
    std::vector<uint8_t> b = good;
    b[8] = 2;
    Resign(b);
    REQUIRE_FALSE(DecodeSegmentHeader(b, h, err));
    CHECK(err.what == "unsupported format version");
    CHECK(err.expected == "1");
    CHECK(err.actual == "2");
    CHECK(err.offset == 8);
  }
  SECTION("a re-signed wrong header size") {
    std::vector<uint8_t> b = good;
    b[10] = 128;
    Resign(b);
    REQUIRE_FALSE(DecodeSegmentHeader(b, h, err));
    CHECK(err.what == "unexpected segment header size");
    CHECK(err.expected == "64");
    CHECK(err.actual == "128");
    CHECK(err.offset == 10);
  }
}

TEST_CASE("segment: record header framing", "[segment]") {
  const std::string payload = "hello record";
  const std::span<const uint8_t> p(reinterpret_cast<const uint8_t*>(payload.data()), payload.size());
  uint8_t hdr[kRecordHeaderSize];
  EncodeRecordHeader(RecordType::kCutAbort, kRecordFlagSkippable, p, hdr);
  const RecordHeader rh = LoadRecordHeader(hdr);
  CHECK(rh.payload_len == payload.size());
  CHECK(rh.type == static_cast<uint16_t>(RecordType::kCutAbort));
  CHECK(rh.flags == kRecordFlagSkippable);
  CHECK(rh.payload_crc == MaskCrc(crc32c::Value(payload.data(), payload.size())));
  CHECK(rh.payload_crc == ComputePayloadCrc(p));
  CHECK(rh.header_crc == MaskCrc(crc32c::Value(hdr + 4, 12)));
  CHECK(rh.header_crc == ComputeRecordHeaderCrc(hdr));
  // Byte positions as documented in segment.h.
  CHECK(LoadU32(hdr + 4) == payload.size());
  CHECK(LoadU16(hdr + 8) == 7);
  CHECK(LoadU16(hdr + 10) == 1);
  // The header checksum covers every byte of 4..15.
  for (size_t i = 4; i < kRecordHeaderSize; ++i) {
    INFO("byte " << i);
    uint8_t copy[kRecordHeaderSize];
    std::memcpy(copy, hdr, sizeof(copy));
    ++copy[i];
    CHECK(ComputeRecordHeaderCrc(copy) != rh.header_crc);
  }
  // An empty payload has a well-defined checksum too.
  EncodeRecordHeader(RecordType::kTxData, 0, {}, hdr);
  CHECK(LoadRecordHeader(hdr).payload_len == 0);
  CHECK(LoadRecordHeader(hdr).payload_crc == MaskCrc(0));
}

TEST_CASE("segment: file names", "[segment]") {
  CHECK(SegmentFileName(0, false) == "0000000000000000.wal");
  CHECK(SegmentFileName(0x2A, true) == "000000000000002A.wal.zst");
  CHECK(SegmentFileName(~0ull, false) == "FFFFFFFFFFFFFFFF.wal");

  const uint64_t seed = 0x5E6A0001;
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 1000; ++i) {
    const uint64_t index = rng() >> (rng() % 64);
    const bool compressed = (rng() & 1) != 0;
    const std::string name = SegmentFileName(index, compressed);
    INFO(name);
    uint64_t back = ~index;
    bool back_c = !compressed;
    REQUIRE(ParseSegmentName(name, back, back_c));
    REQUIRE(back == index);
    REQUIRE(back_c == compressed);
  }

  for (const char* bad :
       {"", ".wal", "000000000000000.wal", "00000000000000000.wal", "0000000000000000.WAL", "0000000000000000.wal.gz",
        "0000000000000000.wal.zst.tmp", "0000000000000000.walx", "0000000000000000.wal ", " 000000000000000.wal",
        "000000000000000G.wal", "000000000000000-.wal", "0000000000000000", "0000000000000000.zst",
        "x000000000000000.wal", "0000000000000000.wal.ZST", "0000000000000000.wal.zstd"}) {
    INFO("'" << bad << "'");
    uint64_t index = 77;
    bool compressed = true;
    CHECK_FALSE(ParseSegmentName(bad, index, compressed));
    CHECK(index == 77);
  }
}

// FORMAT.md "Files": exactly one spelling is a segment, the writer's (upper
// case); a look-alike is reported by ListSegments, never read.
TEST_CASE("segment: only the writer's upper-case spelling is a segment name", "[segment]") {
  uint64_t index = 0;
  bool compressed = true;
  REQUIRE(ParseSegmentName("000000000000002A.wal", index, compressed));
  CHECK(index == 0x2A);
  CHECK_FALSE(compressed);
  CHECK_FALSE(ParseSegmentName("000000000000002a.wal", index, compressed));
  CHECK_FALSE(ParseSegmentName("00000000000000fF.wal.zst", index, compressed));
  CHECK(LooksLikeSegmentName("000000000000002a.wal"));
  CHECK(LooksLikeSegmentName("00000000000000fF.wal.zst"));
  CHECK(LooksLikeSegmentName("000000000000002.wal"));
  CHECK_FALSE(LooksLikeSegmentName("000000000000002A.wal.zst.tmp"));
  CHECK_FALSE(LooksLikeSegmentName("cluster.json"));
  CHECK_FALSE(LooksLikeSegmentName(".wal"));
}

TEST_CASE("segment: the worked example of FORMAT.md", "[segment]") {
  // A node 0 segment holding one NODE_START record (incarnation 0, time 0).
  SegmentHeader h;
  h.cluster_id = 0x0123456789ABCDEFull;
  std::vector<uint8_t> seg(kSegmentHeaderSize);
  EncodeSegmentHeader(h, seg.data());
  std::string payload;
  REQUIRE(EncodePayload(NodeStart{0, 0}, payload).ok());
  CHECK(payload == std::string(12, '\0'));
  uint8_t rh[kRecordHeaderSize];
  EncodeRecordHeader(RecordType::kNodeStart, 0, {reinterpret_cast<const uint8_t*>(payload.data()), payload.size()}, rh);
  seg.insert(seg.end(), rh, rh + kRecordHeaderSize);
  seg.insert(seg.end(), payload.begin(), payload.end());

  CHECK(seg.size() == 0x5C);  // "the segment's data ends at 0x5C"
  const std::vector<uint8_t> line0 = {0x57, 0x41, 0x4c, 0x43, 0x55, 0x54, 0x53, 0x47,
                                      0x01, 0x00, 0x40, 0x00, 0x00, 0x00, 0x00, 0x00};
  CHECK(std::vector<uint8_t>(seg.begin(), seg.begin() + 16) == line0);
  CHECK(LoadU64(&seg[0x10]) == h.cluster_id);
  CHECK(std::all_of(seg.begin() + 0x18, seg.begin() + 0x3C, [](uint8_t b) { return b == 0; }));
  const std::vector<uint8_t> lens = {0x0c, 0x00, 0x00, 0x00, 0x09, 0x00, 0x00, 0x00};
  CHECK(std::vector<uint8_t>(seg.begin() + 0x44, seg.begin() + 0x4C) == lens);
  CHECK(std::all_of(seg.begin() + 0x50, seg.end(), [](uint8_t b) { return b == 0; }));
}
TEST_CASE("segment header: unknown flags and a non-zero reserved field are rejected", "[segment]") {
  SegmentHeader h;
  h.node_id = 2;
  uint8_t b[kSegmentHeaderSize];
  SegmentHeader out;
  HeaderError err;
  SECTION("flags") {
    h.flags = 0x4;
    EncodeSegmentHeader(h, b);  // signs the header, unknown bit included
    CHECK_FALSE(DecodeSegmentHeader({b, sizeof(b)}, out, err));
    CHECK(err.what == "unsupported segment header flags");
    CHECK(err.offset == 44);
    CHECK(err.actual == "00000004");
  }
  SECTION("reserved") {
    EncodeSegmentHeader(h, b);
    b[57] = 1;
    StoreU32(b + 60, MaskCrc(crc32c::Value(b, 60)));  // re-signed, so the field check is reached
    CHECK_FALSE(DecodeSegmentHeader({b, sizeof(b)}, out, err));
    CHECK(err.what == "reserved segment header field is not zero");
    CHECK(err.offset == 56);
    CHECK(err.actual == "00000100");
  }
  SECTION("both clear: accepted") {
    EncodeSegmentHeader(h, b);
    CHECK(DecodeSegmentHeader({b, sizeof(b)}, out, err));
    CHECK(out.node_id == 2);
  }
}
