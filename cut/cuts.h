// Global reconstruction: from the NodeSummary of every node (cut/summary.h),
// every cut of the cluster with its status, the checks of docs/cut-rule.md section 2
// and the restore window. Works from the summaries only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cut/summary.h"
#include "walfmt/status.h"

namespace walcut::cut {

enum class CutStatus : uint8_t {
  kConsistent = 1,    // CUT_FINISH on every node, no abort or restart, every check passes
  kInconsistent = 2,  // a node aborted it, restarted during it, skipped it, or a check failed
  kIncomplete = 3,    // some node's WAL ends (torn, damaged or simply stops) before its CUT_FINISH
  kUnavailable = 4,   // its evidence, or the base to check it against, lies in removed segments
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
  std::string reason;  // one line when not consistent
  CutChecks checks;
  std::vector<Finding> findings;            // everything found about this cut
  std::vector<const NodeCut*> nodes;        // by node id; nullptr when the node has no record of the cut
  std::vector<uint64_t> node_transactions;  // by node: committed transactions in the cut there
  uint64_t transactions = 0;                // distinct transactions of the cluster in the cut
  uint64_t before = 0;                      // |before| summed over nodes
  uint64_t after = 0;
  uint64_t before_after_start = 0;  // rule 5: before(k) members committed after CUT_START(k)
  uint64_t after_before_start = 0;  // rule 5: after(k) members committed before CUT_START(k)
  uint64_t start_time_us = 0;       // earliest CUT_START, latest CUT_FINISH (0 when none)
  uint64_t finish_time_us = 0;
  std::optional<uint64_t> consistent_before;  // nearest consistent cut with a smaller / larger id
  std::optional<uint64_t> consistent_after;
  // What the cross-node checks compared against: "genesis" (the whole WAL),
  // "full snapshot NAME" or "cut J" (a WAL whose oldest segments were
  // removed: only the transactions the cut adds to that base are compared).
  std::string checked_against;
  // The cross-node checks' base, as checked_against names it: a cut id, or
  // the name of a full snapshot (neither: genesis).
  std::optional<uint64_t> base_cut;
  std::string base_snapshot;
  // Pairs of nodes whose digests of shared transactions disagree in this cut
  // (atomicity), and the index of that finding in `findings`: the digests
  // say that the sets differ, NameDisagreements (cut/evidence.h) says how.
  struct Disagreement {
    uint32_t a = 0;
    uint32_t b = 0;
    size_t finding = 0;
  };
  std::vector<Disagreement> disagreements;
};

// A full snapshot whose SNAPSHOT record the WAL holds, and the cuts it can
// serve as the base of a restore: the consistent cuts that start after it on
// every node.
struct SnapshotUse {
  std::string name;
  uint64_t time_us = 0;
  std::vector<Lsn> at;  // by node; empty when not every node's WAL still holds the record
  bool usable = false;
  std::string why;               // when not usable
  std::vector<uint64_t> serves;  // consistent cut ids, ascending
};

// The range of cuts a restore can reach, and what limits it at each end.
struct RestoreWindow {
  bool any = false;
  uint64_t earliest = 0;
  uint64_t latest = 0;
  std::string earliest_limit;
  std::string latest_limit;
};

// Not copyable: GlobalCut::nodes points into `nodes` (the NodeCut elements
// of each summary's heap-allocated `cuts`), so a copy would point into the
// original. Moving is safe: moving a std::vector keeps its elements where
// they are, and every NodeCut pointed to lives in such an element.
struct ClusterCuts {
  ClusterCuts() = default;
  ClusterCuts(const ClusterCuts&) = delete;
  ClusterCuts& operator=(const ClusterCuts&) = delete;
  ClusterCuts(ClusterCuts&&) = default;
  ClusterCuts& operator=(ClusterCuts&&) = default;

  std::vector<NodeSummary> nodes;  // by node id
  std::vector<GlobalCut> cuts;     // by cut id
  std::vector<Finding> findings;   // about the WAL or a transaction, not one cut
  RestoreWindow window;
  bool pruned = false;                 // some node's WAL starts after genesis
  std::vector<SnapshotUse> snapshots;  // in WAL order
  // The wall-clock time of cluster time 0 when the summaries know it
  // (walfmt/duration.h: ClusterClock prints record times with it).
  std::optional<uint64_t> epoch_unix_us;

  // The first position of node i's WAL that the tools can read: 0/00000000,
  // or the start of its first segment when older ones were removed.
  Lsn WalStart(uint32_t i) const { return nodes[i].pruned ? nodes[i].wal_start : Lsn{}; }
  // Can cut J serve as a restored base here: CUT_START and CUT_FINISH on
  // every node, none of its evidence removed, no abort or restart.
  bool EvidenceComplete(const GlobalCut& g) const;
  const SnapshotUse* FindSnapshot(std::string_view name) const;

  const GlobalCut* Find(uint64_t k) const;
  // The latest consistent cut that finished (on every node) before `time_us`.
  const GlobalCut* LatestBefore(uint64_t time_us) const;
};

struct ReconstructOptions {
  // A cut known to be consistent from elsewhere (the cut of a restored base,
  // the parent of an increment): when its evidence is complete in this WAL
  // the later cuts are checked against it even if it cannot be checked here.
  std::optional<uint64_t> attested_cut;
};

// Fails (kInvalidArgument) when node ids are not 0..N-1 exactly once or the
// summaries come from different clusters.
walfmt::Result<ClusterCuts> Reconstruct(std::vector<NodeSummary> nodes, const ReconstructOptions& opt = {});

}  // namespace walcut::cut
