// `walcut check DIR [options]`: what the check decides before it runs. The
// level asked for (or the default of the selection), a state file that must
// be ours, and, for one node where its WAL lives (docs/scale-out.md), which
// node, its WAL directory, the verdict and the base's directory. The CLI
// parses the options, hands them over as a CheckRequest, runs the plan's
// options (RunCheck, recovery/check.h) and renders the report. Every
// failure is kInvalidArgument or kNotFound (usage: an option that does not
// fit, a path that names nothing), but for a state file or a verdict that
// cannot be read (kIo, or the state file's own error).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "recovery/check.h"
#include "recovery/verdict.h"
#include "walfmt/status.h"

namespace walcut::recovery {

struct CheckRequest {
  std::string dir;              // DIR as given
  std::optional<uint64_t> cut;  // --cut K
  bool all = false;             // --all
  std::string level;            // --level ("" : the selection's default)
  std::string state;            // --state FILE
  bool full = false;            // --full
  bool from_genesis = false;    // --from-genesis
  unsigned jobs = 0;            // -j
  int node = -1;                // --node; -1: from DIR's name, when DIR is a node's directory
  std::string verdict;          // --verdict FILE (one node, level restore)
  std::string base;             // --base DIR (with --verdict)
};

// The options RunCheck takes, decided; `options.verdict` points at `verdict`
// (held here, so that a moved plan keeps it valid). `options.progress` is
// left to the caller.
struct CheckPlan {
  CheckOptions options;
  std::unique_ptr<Verdict> verdict;
};

// Level: --level, else restore for --cut K and cuts for every cut; for one
// node, files, or restore with a verdict. A state file that exists must read
// as one (an absent one starts a new state). One node is checked when
// --node or --verdict is given or DIR is a node's directory (wal/ inside, no
// cluster.json): its id is --node (in the range of the cluster.json beside
// it) or comes from the name node-<i>; it takes neither --all nor
// --from-genesis, and the verdict must cover it; the base defaults to
// NODE_DIR/../snapshots/<the verdict's base>. --base without one node is
// refused.
walfmt::Result<CheckPlan> PlanCheck(const CheckRequest& req);

}  // namespace walcut::recovery
