// `walcut restore NODE_DIR --node I (--verdict FILE | --summaries FILE...)`:
// what the per-node restore decides before and after recovery::RestorePart
// (recovery/part.h). Where node I's WAL is and which node it is, the verdict
// (read, and for the cut asked, or made by the caller), the base's
// directory; then the part restored and written, and how it came out. The
// CLI checks its options, renders the result and maps each failure's Status
// to its exit code: every failure here is kInvalidArgument or kNotFound
// (usage: a directory that is not there, a verdict that does not match) but
// for those RestorePart, WritePart and the base documents (kCorruption: a
// refused cut or damaged input; kIo).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "recovery/part.h"
#include "recovery/restore.h"
#include "recovery/verdict.h"
#include "walfmt/outcome.h"
#include "walfmt/status.h"

namespace walcut::recovery {

// The usage error of `--node I` given with NODE_DIR (node-<i>, whose parent
// may be its cluster directory) as one line: I negative, or not one of the
// nodes of the cluster.json beside NODE_DIR; empty otherwise (no
// cluster.json, or one that does not read: nothing to check).
std::string NodeOutOfRange(int node, const std::string& node_dir);

// Where node I's WAL is: NODE_DIR is node-<i> (with wal/ inside) or its WAL
// directory; the node id is `node` (>= 0) or comes from the name node-<i>.
struct NodeDirTarget {
  std::string wal_dir;
  std::string node_dir;  // node-<i>: its parent holds snapshots/
  uint32_t node = 0;
};
walfmt::Result<NodeDirTarget> ResolveNodeDir(const std::string& dir, int node);

// The verdict of --verdict FILE: kIo when it cannot be read, kInvalidArgument
// for any other failure, or when `cut` (> 0) is not its cut.
walfmt::Result<Verdict> ReadPartVerdict(const std::string& path, uint64_t cut);

struct NodeDirRequest {
  std::string dir;      // NODE_DIR as given
  int node = -1;        // --node; -1: from the name
  std::string base;     // --base ("" : the verdict's)
  std::string verdict;  // --verdict FILE; "" : make_verdict decides
  uint64_t cut = 0;     // --cut K (0: not given)
  // Decides the verdict (from summaries) for the base named ("" : chosen as
  // restore chooses); a failure is passed on as it is.
  std::function<walfmt::Result<Verdict>(const std::string& base_name)> make_verdict;
};

// Everything RestorePart needs, decided.
struct NodeDirPlan {
  NodeDirTarget target;
  Verdict verdict;
  std::string base_dir;  // PartRequest::base_dir
};
walfmt::Result<NodeDirPlan> PlanNodeDir(const NodeDirRequest& req);

// Node I restored as planned (RestorePart) and, unless a dry run, written to
// OUT (WritePart).
walfmt::Result<RestoreResult> RestoreNodeDir(const NodeDirPlan& plan, bool force, bool dry_run, const std::string& out,
                                             const std::function<void(uint64_t bytes)>& progress);

// A part restored from a cut that is not consistent (--force) is a finding.
walfmt::Outcome PartOutcome(const RestoreResult& r);

}  // namespace walcut::recovery
