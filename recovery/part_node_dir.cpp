#include "recovery/part_node_dir.h"

#include <filesystem>
#include <system_error>
#include <utility>

#include <fmt/format.h>

#include "walfmt/cluster_layout.h"
#include "walfmt/workload.h"

namespace walcut::recovery {
namespace fs = std::filesystem;
using walfmt::Status;

std::string NodeOutOfRange(int node, const std::string& node_dir) {
  if (node < 0) return fmt::format("--node {}: a node id is 0 or more", node);
  const fs::path cluster = fs::path(node_dir).parent_path();
  std::error_code ec;
  if (cluster.empty() || !fs::exists(cluster / "cluster.json", ec)) return "";
  auto info = walfmt::LoadClusterInfo(cluster.string());
  if (!info.ok() || info->nodes == 0 || static_cast<uint32_t>(node) < info->nodes)
    return "";  // a bad cluster.json is not --node's fault
  return fmt::format("--node {}: no such node; the cluster {} has nodes 0..{}", node, cluster.string(),
                     info->nodes - 1);
}

walfmt::Result<NodeDirTarget> ResolveNodeDir(const std::string& dir_arg, int node) {
  std::error_code ec;
  const fs::path dir(dir_arg);
  if (!fs::is_directory(dir, ec)) return Status::InvalidArgument(fmt::format("{}: no such directory", dir_arg));
  const fs::path wal = fs::is_directory(dir / "wal", ec) ? dir / "wal" : dir;
  const fs::path node_dir = wal == dir ? dir.parent_path() : dir;
  if (node >= 0) {
    if (const std::string bad = NodeOutOfRange(node, node_dir.string()); !bad.empty()) {
      return Status::InvalidArgument(bad);
    }
  }
  if (node < 0) {
    if (auto id = walfmt::NodeIdFromDirName(node_dir.filename().string())) node = static_cast<int>(*id);
  }
  if (node < 0) {
    return Status::InvalidArgument(fmt::format("{}: cannot tell the node id from the path; give --node", dir_arg));
  }
  return NodeDirTarget{wal.string(), node_dir.string(), static_cast<uint32_t>(node)};
}

walfmt::Result<Verdict> ReadPartVerdict(const std::string& path, uint64_t cut) {
  auto v = ReadVerdict(path);
  if (!v.ok()) {
    // A verdict that is not there or not one is the caller's mistake.
    if (v.status().code() == walfmt::ErrorCode::kIo) return v.status();
    return Status::InvalidArgument(v.status().message());
  }
  if (cut > 0 && cut != v->cut) {
    return Status::InvalidArgument(fmt::format("{}: the verdict is for cut {}, not cut {}", path, v->cut, cut));
  }
  return v;
}

walfmt::Result<NodeDirPlan> PlanNodeDir(const NodeDirRequest& req) {
  auto target = ResolveNodeDir(req.dir, req.node);
  if (!target.ok()) return target.status();
  NodeDirPlan plan;
  plan.target = std::move(target.value());
  // --base: genesis, a snapshot name, or a directory holding node I's file
  // (when the verdict is made here, its snapshot name goes into it).
  const bool from_file = !req.verdict.empty();
  auto base = ReadPartBaseArg(req.base, plan.target.node, !from_file);
  if (!base.ok()) return base.status();
  auto verdict = from_file ? ReadPartVerdict(req.verdict, req.cut) : req.make_verdict(base->name);
  if (!verdict.ok()) return verdict.status();
  plan.verdict = std::move(verdict.value());
  auto base_dir =
      PartBaseDir(plan.verdict, *base, (fs::path(plan.target.node_dir).parent_path() / "snapshots").string());
  if (!base_dir.ok()) return base_dir.status();
  plan.base_dir = std::move(base_dir.value());
  return plan;
}

walfmt::Result<RestoreResult> RestoreNodeDir(const NodeDirPlan& plan, bool force, bool dry_run, const std::string& out,
                                             const std::function<void(uint64_t bytes)>& progress) {
  PartRequest req;
  req.verdict = &plan.verdict;
  req.node = plan.target.node;
  req.wal_dir = plan.target.wal_dir;
  req.base_dir = plan.base_dir;
  req.force = force;
  req.dry_run = dry_run;
  req.out = out;
  req.progress = progress;
  auto r = RestorePart(req);
  if (!r.ok() || dry_run) return r;
  if (Status st = WritePart(*r, plan.verdict, out); !st.ok()) return st;
  return r;
}

walfmt::Outcome PartOutcome(const RestoreResult& r) {
  return r.status != cut::CutStatus::kConsistent ? walfmt::Outcome::kFindings : walfmt::Outcome::kOk;
}

}  // namespace walcut::recovery
