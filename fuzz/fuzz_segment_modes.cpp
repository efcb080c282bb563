// libFuzzer target for the segment reader (walfmt::ScanSegment) and the
// record codec (DecodePayload, EncodePayload, Describe).
//
// Each input is read
//   - as a plain segment, through MemorySource, in every RecoveryMode, as the
//     last segment and as a middle one, with and without payload checksums,
//     with a visitor that stops early, and with a predecessor scan so that
//     CheckContinuity runs too;
//   - as a compressed segment (.wal.zst) when it starts with the zstd magic,
//     in every mode;
//   - compressed by walfmt::ZstdCompress and read back through the zstd
//     source (in one mode, chosen by the input): the result must be identical
//     to the plain read
//     (same records, same problems, same summary). This is a differential
//     check between MemSource and the streaming zstd window.
// Every visited record is decoded; a record that decodes is re-encoded and
// must give back its payload byte for byte.
//
// Besides the sanitizers, the target checks invariants of the reader and
// aborts (a libFuzzer crash) when one does not hold; see Check() below.
//
// A custom mutator repairs the checksums after libFuzzer's mutation three
// times out of four, so mutated payloads get past the CRCs and reach the
// decoders instead of dying at the first checksum.
//
// The slow, thorough target (tens of executions per second): the plain
// reader at thousands per second is fuzz_segment_reader.
//
// fuzz.sh: -max_len=65536
#include "fuzz/segment_harness.h"

using namespace walfmt;
using namespace walcut_fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> in(data, size);
  // The index the file name would carry: the header's, so that the records
  // are read; mismatches are exercised by the salvage run with index + 1.
  const uint64_t index = size >= 32 ? LoadU64(data + 24) : 0;

  // --- Plain, every mode, last segment.
  Trace plain[4];
  for (int m = 0; m < 4; ++m) {
    RunSpec spec;
    spec.mode = kModes[m];
    spec.index = index;
    spec.decode = kModes[m] == RecoveryMode::kSalvage;  // salvage visits a superset
    plain[m] = Run(in, spec);
    CheckPlain(in, spec, plain[m]);
  }
  // The mode changes what fails and where reading stops, never which bytes
  // form a record: strict and tolerant read the same records; point in time
  // reads a prefix of what salvage reads.
  Check(plain[0].records == plain[1].records, "strict and tolerate-torn-tail read different records");
  Check(RecordsArePrefix(plain[1], plain[3]), "tolerate-torn-tail records are not a prefix of salvage's");
  Check(RecordsArePrefix(plain[2], plain[3]), "point-in-time records are not a prefix of salvage's");
  Check(RecordsArePrefix(plain[1], plain[2]) || RecordsArePrefix(plain[2], plain[1]),
        "point-in-time and tolerate-torn-tail disagree");

  // --- Plain, not the last segment.
  for (RecoveryMode m : kModes) {
    RunSpec spec;
    spec.mode = m;
    spec.is_last = false;
    spec.index = index;
    CheckPlain(in, spec, Run(in, spec));
  }
  // --- Without payload checksums; stopping early; another index.
  {
    RunSpec spec;
    spec.mode = RecoveryMode::kSalvage;
    spec.check_crc = false;
    spec.index = index;
    spec.decode = true;
    CheckPlain(in, spec, Run(in, spec));
    spec.check_crc = true;
    spec.decode = false;
    spec.stop_after = 1 + size % 5;
    const Trace st = Run(in, spec);
    CheckPlain(in, spec, st);
    Check(st.records.size() <= spec.stop_after, "visitor asked to stop, reading went on");
    spec.stop_after = 0;
    spec.index = index + 1;
    CheckPlain(in, spec, Run(in, spec));
  }
  // --- With a predecessor: one that matches the header's chain fields, and
  // one that leaves a hole.
  if (plain[1].scan.header_ok) {
    const SegmentHeader& h = plain[1].scan.header;
    SegmentScan prev;
    prev.header_ok = true;
    prev.header = h;
    prev.header.segment_index = h.segment_index - 1;
    prev.valid_end = h.prev_end_offset;
    prev.last_record_crc = h.prev_last_crc;
    prev.file = SegmentFile{"prev.wal", prev.header.segment_index, false};
    for (RecoveryMode m : {RecoveryMode::kTolerateTornTail, RecoveryMode::kSalvage}) {
      RunSpec spec;
      spec.mode = m;
      spec.index = index;
      spec.prev = &prev;
      CheckPlain(in, spec, Run(in, spec));
    }
    prev.header.segment_index = h.segment_index - 3;
    prev.header.node_id = h.node_id + 1;
    RunSpec spec;
    spec.mode = RecoveryMode::kSalvage;
    spec.index = index;
    spec.prev = &prev;
    CheckPlain(in, spec, Run(in, spec));
  }

  // --- The input as a compressed segment, when it is a zstd frame.
  if (IsZstdFrame(in)) {
    for (RecoveryMode m : kModes) {
      RunSpec spec;
      spec.mode = m;
      spec.zstd = true;
      spec.decode = m == RecoveryMode::kSalvage;
      const Trace t = Run(in, spec);
      Check(t.scan.file_bytes <= kMaxDecompressed, "file_bytes past what the source returned");
    }
  }

  // --- The input compressed, read back: the same as the plain read.
  auto packed = ZstdCompress(in, 1);
  Check(packed.ok(), "ZstdCompress failed");
  const std::span<const uint8_t> z(reinterpret_cast<const uint8_t*>(packed->data()), packed->size());
  // One mode per input (each zstd source costs a decoder and a 1 MiB window,
  // which dominates the cost of an execution): the mode is picked from the
  // input, so every mode is covered across the corpus.
  {
    const int m = static_cast<int>((size + (size ? data[size / 2] : 0)) % 4);
    RunSpec spec;
    spec.mode = kModes[m];
    spec.index = index;
    spec.zstd = true;
    const Trace t = Run(z, spec);
    CheckSame(plain[m], t, std::string("plain vs zstd, ") + std::string(RecoveryModeName(kModes[m])));
  }
  // A compressed segment cut short is a damaged frame, never a crash (for a
  // quarter of the inputs: a zstd source is the costly part of a run).
  // Strict fails on it; salvage reports it and does not fail (a frame that
  // does not decode is damage to the file, like any other).
  if (z.size() > 8 && size % 4 == 0) {
    RunSpec spec;
    spec.mode = (size / 4) % 2 == 0 ? RecoveryMode::kStrict : RecoveryMode::kSalvage;
    spec.zstd = true;
    spec.index = index;
    const Trace t = Run(z.first(z.size() - 1 - size % 7), spec);
    Check(!t.problems.empty(), "a truncated zstd frame read without a problem");
    if (spec.mode == RecoveryMode::kStrict)
      Check(t.scan.failed, "a truncated zstd frame read in strict mode without failing");
    Check(t.scan.end != SegmentEnd::kClean, "a truncated zstd frame read to a clean end");
  }
  return 0;
}
