// Global reconstruction: from the NodeSummary of every node (cut/summary.h),
// every cut of the cluster with its status, the checks of DESIGN.md section 2
// and the restore window. Works from the summaries only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cut/summary.h"
#include "walfmt/status.h"

namespace walcut::cut {

enum class CutStatus : uint8_t {
  kConsistent = 1,    // CUT_FINISH on every node, no abort or restart, every check passes
  kInconsistent = 2,  // a node aborted it, restarted during it, skipped it, or a check failed
  kIncomplete = 3,    // some node's WAL ends (torn, damaged or simply stops) before its CUT_FINISH
};
const char* CutStatusName(CutStatus s);

// Results of the checks for one cut: true when it passes (or cannot fail).
struct CutChecks {
  bool atomicity = true;     // 1
  bool monotonicity = true;  // 2
  bool shape = true;         // 3
  bool rollback = true;      // 4
  bool completeness = true;  // 5
  bool markers = true;       // sets and markers agree
};

struct GlobalCut {
  uint64_t cut_id = 0;
  CutStatus status = CutStatus::kConsistent;
  std::string reason;                      // one line when not consistent
  CutChecks checks;
  std::vector<Finding> findings;           // everything found about this cut
  std::vector<const NodeCut*> nodes;       // by node id; nullptr when the node has no record of the cut
  std::vector<uint64_t> node_transactions; // by node: committed transactions in the cut there
  uint64_t transactions = 0;               // distinct transactions of the cluster in the cut
  uint64_t before = 0;                     // |before| summed over nodes
  uint64_t after = 0;
  uint64_t before_after_start = 0;         // rule 5: before(k) members committed after CUT_START(k)
  uint64_t after_before_start = 0;         // rule 5: after(k) members committed before CUT_START(k)
  uint64_t start_time_us = 0;              // earliest CUT_START, latest CUT_FINISH (0 when none)
  uint64_t finish_time_us = 0;
  std::optional<uint64_t> consistent_before;  // nearest consistent cut with a smaller / larger id
  std::optional<uint64_t> consistent_after;
};

// The range of cuts a restore can reach, and what limits it at each end.
struct RestoreWindow {
  bool any = false;
  uint64_t earliest = 0;
  uint64_t latest = 0;
  std::string earliest_limit;
  std::string latest_limit;
};

struct ClusterCuts {
  std::vector<NodeSummary> nodes;   // by node id
  std::vector<GlobalCut> cuts;      // by cut id
  std::vector<Finding> findings;    // about the WAL or a transaction, not one cut
  RestoreWindow window;

  const GlobalCut* Find(uint64_t k) const;
  // The latest consistent cut that finished (on every node) before `time_us`.
  const GlobalCut* LatestBefore(uint64_t time_us) const;
};

// Fails (kInvalidArgument) when node ids are not 0..N-1 exactly once or the
// summaries come from different clusters.
walfmt::Result<ClusterCuts> Reconstruct(std::vector<NodeSummary> nodes);

}  // namespace walcut::cut
