// What `walcut verify` decides about the WAL of some nodes: the status of
// every segment, the problems that belong to a node or to the inputs together
// (a node without segments, a node id given twice, segments of several
// clusters), the tallies and the outcome. The CLI reads the segments
// (walfmt/parallel_scan.h) and renders the report as text or JSON.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "walfmt/outcome.h"
#include "walfmt/parallel_scan.h"
#include "walfmt/reader.h"

namespace walfmt {

enum class SegmentStatus : uint8_t { kOk, kTornTail, kCorrupt, kBadHeader, kIoError };
// "ok", "torn-tail", "corrupt", "bad-header", "io-error".
std::string_view SegmentStatusName(SegmentStatus s);
// An I/O problem first, then a fatal one (a bad header when the header did
// not read), then a torn tail.
SegmentStatus StatusOf(const SegmentOutcome& o);

// One node as the inputs name it.
struct VerifyInput {
  std::string label;                // its directory, or "segment files"
  std::optional<uint32_t> node_id;  // when known
};

struct VerifySegment {
  SegmentOutcome outcome;
  SegmentStatus status = SegmentStatus::kOk;
};

struct VerifyNode {
  std::string label;
  std::optional<uint32_t> node_id;
  std::vector<VerifySegment> segments;
  std::vector<Problem> problems;  // the node's own, besides its segments'
  uint64_t records = 0;
  uint64_t bytes = 0;
};

struct VerifyReport {
  std::vector<VerifyNode> nodes;
  std::vector<Problem> problems;  // of the inputs together (several clusters)
  ProblemTally tally;
  uint64_t segments = 0, records = 0, bytes = 0;
  uint64_t torn_tails = 0;
  uint64_t bad_segments = 0;  // neither ok nor a torn tail
  Outcome outcome = Outcome::kOk;
  bool ok() const { return outcome == Outcome::kOk; }
};

// `nodes[i]` was read as `outcomes[i]`; `input_problems` are those found
// while listing the inputs (each goes to the node whose label starts its
// file name).
VerifyReport MakeVerifyReport(const std::vector<VerifyInput>& nodes, const std::vector<Problem>& input_problems,
                              std::vector<std::vector<SegmentOutcome>> outcomes);

}  // namespace walfmt
