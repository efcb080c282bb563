// libFuzzer target for the plain segment reader (walfmt::ScanSegment over
// bytes in memory) and the record codec, built to be fast (thousands of
// executions per second) so that mutations reach deep into the records.
//
// Each input is read twice, as the last segment of a node:
//   - in salvage mode, which visits every record it can find (a superset of
//     the other modes); every record is decoded, described and re-encoded,
//     and must give back its payload byte for byte;
//   - in one other mode picked by the input's length (strict,
//     tolerate-torn-tail or point-in-time): its records must be a prefix of
//     salvage's, and its failure must agree with the mode's rule.
// A third read, in salvage mode again, goes through the read-ahead's source
// (its chain check vouches for records, which the reader then does not
// checksum), in blocks of a size picked by the input: it must find exactly
// what the first found.
// A fourth, in salvage mode, visits only the record types of a mask picked
// by the input (ScanOptions::visit_types): it must visit exactly the first
// read's records of those types and count the others, per type, in records
// and bytes.
// All reads go through the invariants of segment_harness.h (CheckPlain):
// payloads inside the input right after their header, both CRCs right,
// offsets growing, counts adding up, a clean end without damage.
//
// The every-mode sweep, the zstd round trip, predecessor scans and other
// segment indexes are in fuzz_segment_modes (slower).
//
// fuzz.sh: -max_len=8192
#include "fuzz/segment_harness.h"

using namespace walfmt;
using namespace walcut_fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> in(data, size);
  const uint64_t index = size >= 32 ? LoadU64(data + 24) : 0;

  RunSpec salvage;
  salvage.mode = RecoveryMode::kSalvage;
  salvage.index = index;
  salvage.decode = true;
  const Trace all = Run(in, salvage);
  CheckPlain(in, salvage, all);

  RunSpec ahead = salvage;
  ahead.decode = false;
  ahead.checked_blocks = 1 + (size * 31 + (size > 0 ? data[size - 1] : 0)) % 700;
  const Trace via_check = Run(in, ahead);
  CheckPlain(in, ahead, via_check);
  CheckSame(all, via_check, "read ahead in blocks of " + Hex(ahead.checked_blocks));

  RunSpec masked = salvage;
  masked.decode = false;
  masked.visit_types = size > 0 ? (uint32_t{data[size / 2]} << 1 | (size & 0x200u)) : 0;
  const Trace part = Run(in, masked);
  CheckPlain(in, masked, part);
  {
    std::vector<SeenRecord> want;
    std::array<TypeTally, kMaxKnownRecordType + 1> counted{};
    for (const SeenRecord& r : all.records) {
      if ((masked.visit_types >> r.type) & 1u) {
        want.push_back(r);
      } else {
        ++counted[r.type].records;
        counted[r.type].bytes += kRecordHeaderSize + r.payload.size();
      }
    }
    Check(part.records == want, "visit_types " + Hex(masked.visit_types) + ": not the records of those types");
    for (size_t ty = 0; ty < counted.size(); ++ty) {
      Check(
          part.scan.unvisited[ty].records == counted[ty].records && part.scan.unvisited[ty].bytes == counted[ty].bytes,
          "visit_types " + Hex(masked.visit_types) + ": type " + Hex(ty) + " miscounted");
    }
    for (const TypeTally& ty : all.scan.unvisited) Check(ty.records == 0, "all types visited, yet some counted");
    // Everything else about the read is the full read's.
    Check(part.problems == all.problems, "visit_types " + Hex(masked.visit_types) + ": other problems");
    Check(part.scan.records == all.scan.records && part.scan.record_bytes == all.scan.record_bytes &&
              part.scan.valid_end == all.scan.valid_end && part.scan.last_end == all.scan.last_end &&
              part.scan.last_record_crc == all.scan.last_record_crc && part.scan.end == all.scan.end &&
              part.scan.bytes_dropped == all.scan.bytes_dropped,
          "visit_types " + Hex(masked.visit_types) + ": the scan's summary differs from the full read's");
  }

  RunSpec other;
  other.mode = kModes[size % 3];  // strict, tolerate-torn-tail, point-in-time
  other.index = index;
  const Trace t = Run(in, other);
  CheckPlain(in, other, t);
  Check(RecordsArePrefix(t, all), std::string(RecoveryModeName(other.mode)) + " records are not a prefix of salvage's");
  return 0;
}
