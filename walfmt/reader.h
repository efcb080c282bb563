// Reading WAL: one segment at a time (ScanSegment), a node's whole WAL in
// order (ReadNodeWal), and the checks that tie segments together
// (CheckContinuity). Problems are reported through a sink, never printed.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "walfmt/lsn.h"
#include "walfmt/record.h"
#include "walfmt/segment.h"
#include "walfmt/source.h"
#include "walfmt/status.h"

namespace walfmt {

// What a reader does when the bytes are not a clean sequence of records
// (after RocksDB's WALRecoveryMode). Every problem is reported to the sink in
// every mode; the mode decides whether reading stops and whether it fails.
enum class RecoveryMode : uint8_t {
  // Absolute consistency: any damage, a torn tail included, fails the read.
  // For WALs that were closed cleanly (archives, copies).
  kStrict = 1,
  // The default: a torn tail (the last record of the last segment cut short,
  // as a crash leaves it) ends the log quietly; damage anywhere else fails.
  kTolerateTornTail = 2,
  // Point in time: stop at the first damage and keep everything before it,
  // without failing. For recovering as far as the log is intact.
  kPointInTime = 3,
  // Salvage: report damage, skip to the next intact record and keep going,
  // across segments. For forensics (`walcut verify` uses it to find all damage).
  kSalvage = 4,
};
// "strict", "tolerate-torn-tail", "point-in-time", "salvage"; Parse accepts
// those names and returns false for any other.
std::string_view RecoveryModeName(RecoveryMode m);
bool ParseRecoveryMode(std::string_view name, RecoveryMode& out);

enum class ProblemKind : uint8_t {
  kTornTail = 1,      // last record of the last segment cut short (or a zero-filled tail)
  kHeaderChecksum,    // record header checksum mismatch
  kPayloadChecksum,   // record payload checksum mismatch
  kBadLength,         // payload length over the limit or past the end of the segment
  kInvalidType,       // type 0, or flags this version does not know
  kUnknownType,       // intact record of a type this version does not know, not skippable
  kBadPayload,        // intact record whose payload does not decode
  kBadSegmentHeader,  // magic, version, size or header checksum wrong, or header cut short
  kSegmentMismatch,   // header names another index, node or cluster than expected
  kMissingSegment,    // a hole in the segment indexes
  kBrokenChain,       // header's predecessor fields do not match the predecessor
  kDuplicateSegment,  // the same index as .wal and .wal.zst
  kCompression,       // an archived (.wal.zst) segment does not decompress
  kIo,                // the file could not be opened or read
  kMisnamedSegment,   // a file in a WAL directory named like a segment but not as the writer names one (a note)
};
std::string_view ProblemKindName(ProblemKind k);

struct Problem {
  ProblemKind kind = ProblemKind::kIo;
  bool fatal = true;  // false: a notice (torn tail where the mode tolerates it)
  uint32_t node = 0;
  bool node_known = false;
  std::string file;
  uint64_t segment = 0;
  uint64_t offset = 0;
  uint64_t length = 0;  // bytes dropped from this point (0 when not applicable)
  std::string expected;
  std::string actual;
  std::string detail;
  Lsn lsn() const { return Lsn{segment, offset}; }
  // One line: "node 1, 0000000000000003.wal at 3/0000A1F0: payload checksum
  // mismatch: expected 1a2b3c4d, found 00ff00ff; 212 bytes dropped".
  std::string ToString() const;
};
using ProblemSink = std::function<void(const Problem&)>;

// A record as found in the file. `payload` points into the reader's buffer and
// is valid only during the visitor call.
struct RecordView {
  Lsn lsn;
  RecordType type = RecordType::kInvalid;
  uint16_t flags = 0;
  uint32_t header_crc = 0;
  std::span<const uint8_t> payload;
  uint32_t size() const { return static_cast<uint32_t>(kRecordHeaderSize + payload.size()); }
};
// Returns false to stop reading.
using RecordVisitor = std::function<bool(const RecordView&)>;

struct SegmentFile {
  std::string path;
  uint64_t index = 0;
  bool compressed = false;
};

struct ScanOptions {
  RecoveryMode mode = RecoveryMode::kTolerateTornTail;
  bool is_last = true;  // a short tail here is a torn tail, not damage
  bool check_payload_crc = true;
  // Expected identity; a header that disagrees is reported (kSegmentMismatch).
  bool expect_node = false;
  uint32_t node_id = 0;
  bool expect_cluster = false;
  uint64_t cluster_id = 0;
  // Read the records from this offset on (a record boundary an earlier scan
  // of the same file found, e.g. its valid_end; 0: right after the header).
  // The header is still read and checked; the counters of the result cover
  // the records read, and valid_end/last_end start here. For following a
  // segment that is still being written.
  uint64_t start = 0;
  // ScanSegmentFile reads a plain file on a thread of its own, ahead of the
  // parse (OpenSegmentSource's read_ahead).
  bool read_ahead = false;
  // The known record types the visitor is called for: bit t for type t
  // (RecordTypeBit). The intact records of the other known types are not
  // visited, only counted per type (SegmentScan::unvisited), which costs a
  // reader that only counts them (stats) no call per record. All types by
  // default. Without a visitor nothing is visited or counted.
  uint32_t visit_types = UINT32_MAX;
};

// The bit of type t in ScanOptions::visit_types.
constexpr uint32_t RecordTypeBit(RecordType t) { return uint32_t{1} << static_cast<uint16_t>(t); }
static_assert(kMaxKnownRecordType < 32, "visit_types has a bit per known type");

// Records and bytes (headers included) of one record type.
struct TypeTally {
  uint64_t records = 0;
  uint64_t bytes = 0;
};

enum class SegmentEnd : uint8_t {
  kClean = 0,  // every byte is part of an intact record
  kTornTail,   // ends in a torn record (tolerated or not, per mode)
  kDamaged,    // stopped at damage (strict, tolerate, point in time)
  kSalvaged,   // damage was skipped (salvage)
  kBadHeader,  // the segment header is unusable: nothing was read
  kStopped,    // the visitor asked to stop
  kIoError,
};

struct SegmentScan {
  SegmentFile file;
  SegmentHeader header;
  bool header_ok = false;
  uint64_t file_bytes = 0;       // decompressed size for .wal.zst
  uint64_t valid_end = 0;        // end of the intact prefix of records
  uint32_t last_record_crc = 0;  // header_crc of the last record of that prefix
  uint64_t records = 0;          // intact records seen (skipped unknown ones included)
  uint64_t record_bytes = 0;
  uint64_t skipped_unknown = 0;  // skippable records of unknown type
  uint64_t skipped_unknown_bytes = 0;
  uint64_t last_end = 0;        // end of the last intact record anywhere (salvage reads past damage)
  uint32_t last_crc = 0;        // its header_crc
  bool damaged_to_end = false;  // damage runs to the end of the data: the true end is unknown
  uint64_t bytes_dropped = 0;   // bytes not part of any intact record
  uint64_t torn_offset = 0;     // where the torn tail starts (SegmentEnd::kTornTail)
  bool zero_filled_tail = false;
  // Per known type (indexed by its number), the intact records that were not
  // visited because ScanOptions::visit_types leaves their type out.
  std::array<TypeTally, kMaxKnownRecordType + 1> unvisited{};
  SegmentEnd end = SegmentEnd::kClean;
  bool failed = false;  // the mode says this read fails
};

// Reads one segment from `src`, calling `visit` for each intact record of a
// known type (skippable records of unknown types are counted, not visited).
// Never fails for damage: damage is reported to `sink` and summarized in the
// result; `failed` tells whether the mode treats it as a failure. With `prev`
// (the scan of the preceding file of the same node) continuity is checked as
// soon as the header is read, before any record is visited; outside salvage
// mode a break in it stops the scan there.
SegmentScan ScanSegment(ByteSource& src, const SegmentFile& file, const ScanOptions& opt, const RecordVisitor& visit,
                        const ProblemSink& sink, const SegmentScan* prev = nullptr);
// Opens `file` and scans it; an unreadable file yields end == kIoError.
SegmentScan ScanSegmentFile(const SegmentFile& file, const ScanOptions& opt, const RecordVisitor& visit,
                            const ProblemSink& sink, const SegmentScan* prev = nullptr);

// Checks that `cur` follows `prev` (the scans of consecutive files of one
// node): index, node, cluster, and the predecessor fields of the header.
// Returns false after reporting when they do not.
bool CheckContinuity(const SegmentScan& prev, const SegmentScan& cur, const ProblemSink& sink);

// Lists the segments of one WAL directory in index order (numeric, not by
// name). Only the writer's spelling is a segment (ParseSegmentName); another
// name ending in .wal or .wal.zst (lower-case digits, another digit count)
// is reported as a note (kMisnamedSegment, not fatal) naming it, and not
// read; other files are ignored. An index present as both .wal and .wal.zst
// is reported and the .wal is used. Fails (kIo) when the directory cannot
// be listed.
Result<std::vector<SegmentFile>> ListSegments(const std::string& wal_dir, const ProblemSink& sink);

struct NodeReadOptions {
  RecoveryMode mode = RecoveryMode::kTolerateTornTail;
  bool check_payload_crc = true;
  Lsn from{0, 0};           // skip records before this position
  bool read_ahead = false;  // plain segments read on a thread ahead of the parse (ScanOptions::read_ahead)
};

struct NodeRead {
  std::vector<SegmentScan> segments;
  bool failed = false;   // the mode says the read failed (see problems)
  bool stopped = false;  // the visitor stopped it, or point-in-time stopped at damage
  Lsn end;               // position after the last intact record read
};

// Reads one node's segments in order (as ListSegments returns them), checking
// continuity between them, and calls `visit` for every intact record.
NodeRead ReadNodeWal(const std::vector<SegmentFile>& segments, const NodeReadOptions& opt, const RecordVisitor& visit,
                     const ProblemSink& sink);

// ReadNodeWal one segment at a time, so that a caller can interleave the
// reads of several nodes on fewer threads (a node's read may move from one
// thread to another between steps, never run on two at once). The segments,
// visitor and sink must outlive the reader.
class NodeWalReader {
 public:
  NodeWalReader(const std::vector<SegmentFile>& segments, const NodeReadOptions& opt, const RecordVisitor& visit,
                const ProblemSink& sink);
  NodeWalReader(const NodeWalReader&) = delete;
  NodeWalReader& operator=(const NodeWalReader&) = delete;

  bool done() const { return done_; }
  // Reads the next segment (those wholly before `from` are skipped unopened).
  // Does nothing once done().
  void Step();
  const NodeRead& result() const { return r_; }
  NodeRead Take() { return std::move(r_); }

 private:
  const std::vector<SegmentFile>& segments_;
  NodeReadOptions opt_;
  const RecordVisitor& visit_;
  const ProblemSink& sink_;
  RecordVisitor filtered_;  // visit_ behind the `from` filter, when there is one
  size_t next_ = 0;
  bool done_ = false;
  NodeRead r_;
};

}  // namespace walfmt
