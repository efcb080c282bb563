#include "recovery/check_plan.h"

#include <filesystem>
#include <system_error>
#include <utility>

#include <fmt/format.h>

#include "recovery/part_node_dir.h"
#include "walfmt/cluster_layout.h"

namespace walcut::recovery {
namespace fs = std::filesystem;
using walfmt::Status;

namespace {

// One node (docs/scale-out.md): DIR is a node directory (node-<i> with wal/
// inside) or, with --node, its WAL directory; or --verdict was given. Fills
// in the node's part of `plan`; nothing when the check is of a cluster.
Status PlanNodeCheck(const CheckRequest& req, CheckPlan& plan) {
  std::error_code ec;
  const fs::path dir(req.dir);
  const bool node_dir = fs::is_directory(dir / "wal", ec) && !fs::exists(dir / "cluster.json", ec);
  if (!(req.node >= 0 || !req.verdict.empty() || node_dir)) {
    if (req.base.empty()) return Status::Ok();
    return Status::InvalidArgument("--base goes with --verdict (one node's check)");
  }
  const fs::path wal = node_dir ? dir / "wal" : dir;
  const fs::path nd = wal == dir ? dir.parent_path() : dir;
  if (req.node >= 0) {
    if (const std::string bad = NodeOutOfRange(req.node, nd.string()); !bad.empty()) {
      return Status::InvalidArgument(bad);
    }
  }
  int node = req.node;
  if (node < 0) {
    if (auto id = walfmt::NodeIdFromDirName(nd.filename().string())) node = static_cast<int>(*id);
  }
  if (node < 0) {
    return Status::InvalidArgument(fmt::format("{}: cannot tell the node id from the path; give --node", req.dir));
  }
  if (req.all || req.from_genesis) {
    return Status::InvalidArgument(
        "one node's check takes neither --all nor --from-genesis: level restore checks the verdict's cut");
  }
  CheckOptions& opt = plan.options;
  if (req.level.empty()) opt.level = req.verdict.empty() ? CheckLevel::kFiles : CheckLevel::kRestore;
  if (!req.verdict.empty()) {
    auto v = ReadPartVerdict(req.verdict, 0);  // kIo when it cannot be read, else kInvalidArgument
    if (!v.ok()) return v.status();
    plan.verdict = std::make_unique<Verdict>(std::move(v.value()));
    const Verdict& verdict = *plan.verdict;
    if (static_cast<size_t>(node) >= verdict.nodes.size()) {
      return Status::InvalidArgument(fmt::format("--node {}: no such node; the verdict (cut {}) covers {} nodes", node,
                                                 verdict.cut, verdict.nodes.size()));
    }
    opt.verdict = plan.verdict.get();
    opt.base_dir = !req.base.empty() ? req.base : (nd.parent_path() / "snapshots" / verdict.base_name).string();
  }
  opt.node = static_cast<uint32_t>(node);
  opt.dir = wal.string();
  return Status::Ok();
}

}  // namespace

walfmt::Result<CheckPlan> PlanCheck(const CheckRequest& req) {
  CheckPlan plan;
  CheckOptions& opt = plan.options;
  opt.dir = req.dir;
  opt.cut = req.cut;
  opt.level = req.cut ? CheckLevel::kRestore : CheckLevel::kCuts;
  if (!req.level.empty() && !ParseCheckLevel(req.level, opt.level)) {
    return Status::InvalidArgument(fmt::format("--level {}: expected files, cuts or restore", req.level));
  }
  if (!req.state.empty()) {
    // A state file that is not ours is a usage error (the wrong path given),
    // found before any work; an absent one starts a new state.
    auto st = ReadCheckState(req.state);
    if (!st.ok() && st.status().code() != walfmt::ErrorCode::kNotFound) return st.status();
  }
  if (Status st = PlanNodeCheck(req, plan); !st.ok()) return st;
  opt.jobs = req.jobs;
  opt.state_path = req.state;
  opt.full = req.full;
  opt.chain_restores = !req.from_genesis;
  return plan;
}

}  // namespace walcut::recovery
