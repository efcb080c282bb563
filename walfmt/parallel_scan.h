// Scans many segments on several threads. Segments are independent once the
// continuity between them is checked from their summaries afterwards, so
// `walcut stats` and `walcut verify` use both cores even for a single node.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "walfmt/reader.h"

namespace walfmt {

struct NodeSegments {
  std::vector<SegmentFile> segments;      // in index order
  std::optional<uint32_t> expected_node;  // from the directory name, when known
};

struct SegmentOutcome {
  SegmentScan scan;
  std::vector<Problem> problems;  // of this segment, in file order; continuity problems last
};

struct ParallelScanOptions {
  RecoveryMode mode = RecoveryMode::kSalvage;
  bool check_payload_crc = true;
  unsigned jobs = 0;  // 0: one per core
  // Called on the worker threads with (node index, segment index in that node).
  // Returns the visitor for that segment, or nullptr to only check it.
  std::function<RecordVisitor(size_t, size_t)> make_visitor;
  // As ScanOptions::visit_types: the record types the visitors are called
  // for; the others are counted in each outcome's scan.unvisited.
  uint32_t visit_types = UINT32_MAX;
  // Called from the worker threads after each segment (bytes scanned so far);
  // must be thread-safe.
  std::function<void(uint64_t segments_done, uint64_t bytes_done)> progress;
};

// outcome[node][segment]. Continuity between consecutive segments of a node
// is checked after all are scanned; its problems go to the later segment.
std::vector<std::vector<SegmentOutcome>> ScanInParallel(const std::vector<NodeSegments>& nodes,
                                                        const ParallelScanOptions& opt);

}  // namespace walfmt
