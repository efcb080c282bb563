// Restoring every node of a cluster to a cut on one host (recovery/restore.h):
// the request checked, one job per node planned, the jobs run on workers.
#include "recovery/restore.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "recovery/restore_node.h"
#include "recovery/state_table.h"
#include "walfmt/cluster_layout.h"
#include "walfmt/file_io.h"
#include "walfmt/staging.h"
#include "walfmt/workers.h"

namespace walcut::recovery {
namespace fs = std::filesystem;
using walfmt::Status;

namespace detail {

Status CheckRequest(const cut::GlobalCut* g, const cut::ClusterCuts& cc, const cut::ClusterLayout& layout,
                    const RestoreRequest& req) {
  if (!g) return Status::NotFound(fmt::format("cut {} is not in the WAL", req.cut));
  if (g->status != cut::CutStatus::kConsistent && !req.force) {
    return Status::InvalidArgument(fmt::format("cut {} is {}: {}; refusing to restore it without --force", req.cut,
                                               cut::CutStatusName(g->status), g->reason));
  }
  const size_t n = cc.nodes.size();
  if (layout.wal_dirs.size() != n) {
    return Status::InvalidArgument(fmt::format("{} nodes in {}, {} summaries", layout.wal_dirs.size(), layout.dir, n));
  }
  for (size_t i = 0; i < n; ++i) {
    const cut::NodeCut* nc = g->nodes[i];
    if (!nc || !nc->started) {
      return Status::InvalidArgument(
          fmt::format("cut {} has no CUT_START on node {}: there is nothing to restore that node to", req.cut, i));
    }
    if (!nc->finished && !req.force) {
      return Status::InvalidArgument(fmt::format("cut {} has no CUT_FINISH on node {}", req.cut, i));
    }
  }
  if (!req.dry_run && !req.out.empty()) {
    std::error_code ec;
    if (fs::exists(req.out, ec)) {
      return Status::InvalidArgument(fmt::format("{}: already exists; refusing to overwrite", req.out));
    }
  }
  return Status::Ok();
}

Status StageOutput(const RestoreRequest& req, RestoreResult& r) {
  if (req.dry_run || req.out.empty()) return Status::Ok();
  std::error_code ec;
  const fs::path target = fs::absolute(req.out, ec);
  auto lock = walfmt::OutputLock::Acquire(target.string());
  if (!lock.ok()) return lock.status();
  r.out_lock = std::move(lock.value());
  if (fs::exists(fs::symlink_status(target, ec))) {
    return Status::InvalidArgument(fmt::format("{}: already exists; refusing to overwrite", req.out));
  }
  const fs::path stage = walfmt::TempNameBeside(target.string());
  walfmt::RegisterStaging(stage.string());  // before it exists: a signal from now on removes it
  if (!fs::create_directories(stage, ec) || ec) {
    walfmt::RemoveStaging(stage.string());
    return Status::Io(fmt::format("{}: cannot create: {}", stage.string(), ec.message()));
  }
  r.stage_dir = stage.string();
  return Status::Ok();
}

Status ReadClusterJsonAndSubset(const cut::ClusterLayout& layout, RestoreResult& r) {
  if (layout.has_cluster_json) {
    auto cj = walfmt::ReadWholeFile((fs::path(layout.dir) / "cluster.json").string(), walfmt::kMaxJsonFileBytes);
    if (!cj.ok()) return cj.status();
    r.cluster_json = std::move(cj.value());
  }
  return ResolveRequestSubset(layout, r);
}

Status ResolveRequestSubset(const cut::ClusterLayout& layout, RestoreResult& r) {
  if (r.subset.whole()) return Status::Ok();
  uint32_t partitions = 0;
  if (!r.cluster_json.empty()) {
    auto ci = walfmt::ParseClusterInfo(r.cluster_json, (fs::path(layout.dir) / "cluster.json").string());
    if (!ci.ok()) return ci.status();
    partitions = ci->partitions;
  }
  return ResolveSubset(r.subset, partitions, layout.dir);
}

}  // namespace detail

namespace {

using detail::BaseFile;
using detail::CheckRequest;
using detail::CutRule;
using detail::NodeJob;
using detail::RuleOf;
using detail::RunNode;
using detail::StageOutput;

// One job per node: its WAL range from the base's position to CUT_FINISH(K),
// the rules of cut K (and of the base's cut J), its base file.
walfmt::Result<std::vector<NodeJob>> PlanJobs(const cut::ClusterCuts& cc, const cut::ClusterLayout& layout,
                                              const cut::GlobalCut& g, const RestoreRequest& req,
                                              const RestoreResult& r, const std::vector<BaseFile>& base_files,
                                              const std::vector<std::optional<CutRule>>& base_rules) {
  const size_t n = cc.nodes.size();
  std::vector<NodeJob> jobs(n);
  for (size_t i = 0; i < n; ++i) {
    NodeJob& job = jobs[i];
    const cut::NodeCut& nc = *g.nodes[i];
    job.node = static_cast<uint32_t>(i);
    job.wal_dir = layout.wal_dirs[i];
    job.k = RuleOf(nc);
    job.j = base_rules[i];
    job.base_file = base_files[i].path;
    job.base_fingerprint = base_files[i].fingerprint;
    NodeRestore& o = job.out;
    o.node = job.node;
    o.from = r.base.position[i];
    // Without CUT_FINISH (forced) the sets are unknown: the node is restored
    // to its WAL prefix up to CUT_START, and the manifest says the cut was forced.
    o.to = nc.finished ? nc.finish : nc.start;
    o.cut_start = nc.start;
    o.cut_start_time_us = nc.start_time_us;
    o.continue_from = nc.ContinueFrom();
    o.base_entries = base_files[i].entries;
    if (r.base.kind == BaseKind::kFull && !(o.from < nc.start)) {
      return Status::InvalidArgument(fmt::format("base {} was taken on node {} at {}, after CUT_START({}) at {}",
                                                 r.base.name, i, o.from.ToString(), req.cut, nc.start.ToString()));
    }
    for (const auto& s : cc.nodes[i].segments) {
      if (s.index >= o.from.segment && s.index <= o.to.segment) o.segments.push_back(s);
    }
  }
  return jobs;
}

// Where each job writes its node file (the staging directory), with the
// header fields: the cluster_id is the layout's, read by the one
// cluster.json parser.
void SetOutputs(std::vector<NodeJob>& jobs, const RestoreRequest& req, const RestoreResult& r, uint64_t cluster_id) {
  for (auto& job : jobs) {
    job.keep_state = req.keep_states || (req.out.empty() && !req.dry_run);
    job.write_thread = req.io_threads > 0;
    job.filter = KeyFilter(r.subset);
    if (r.stage_dir.empty()) continue;
    job.stage_file = (fs::path(r.stage_dir) / fmt::format("node-{}.snap", job.node)).string();
    job.header.node_id = job.node;
    job.header.cluster_id = cluster_id;
    job.header.wal_position = job.out.cut_start;
    job.header.time_us = job.out.cut_start_time_us;
    job.header.name = fmt::format("cut-{}", req.cut);
  }
}

// Runs the jobs on req.jobs workers (one per core by default), each reusing
// one state table node after node; the first failure by node wins, and the
// staging directory is removed on failure.
Status RunJobs(std::vector<NodeJob>& jobs, const RestoreRequest& req, RestoreResult& r) {
  const size_t n = jobs.size();
  std::atomic<size_t> next{0};
  std::vector<Status> status(n);
  std::mutex progress_mu;
  uint64_t progress_total = 0;
  std::function<void(uint64_t)> progress;
  if (req.progress) {
    progress = [&](uint64_t b) {
      std::lock_guard<std::mutex> lock(progress_mu);
      progress_total += b;
      req.progress(progress_total);
    };
  }
  auto work = [&] {
    StateTable state;  // one per worker, reused node after node
    for (size_t i; (i = next.fetch_add(1)) < n;) status[i] = RunNode(jobs[i], req.dry_run, progress, &state);
  };
  unsigned threads = req.jobs ? req.jobs : std::max(1u, std::thread::hardware_concurrency());
  threads = static_cast<unsigned>(std::min<size_t>(threads, n));
  try {
    walfmt::RunWorkers(threads, work);
  } catch (...) {
    if (!r.stage_dir.empty()) walfmt::RemoveStaging(r.stage_dir);
    throw;
  }
  for (size_t i = 0; i < n; ++i) {
    if (!status[i].ok()) {
      if (!r.stage_dir.empty()) walfmt::RemoveStaging(r.stage_dir);
      return status[i];
    }
  }
  return Status::Ok();
}

}  // namespace

walfmt::Result<RestoreResult> Restore(const cut::ClusterCuts& cc, const cut::ClusterLayout& layout,
                                      const RestoreRequest& req) {
  const cut::GlobalCut* g = cc.Find(req.cut);
  if (Status st = CheckRequest(g, cc, layout, req); !st.ok()) return st;
  RestoreResult r;
  r.cut = req.cut;
  r.status = g->status;
  r.reason = g->reason;
  r.subset = req.subset;
  if (Status st = detail::ReadClusterJsonAndSubset(layout, r); !st.ok()) return st;
  std::vector<BaseFile> base_files;
  std::vector<std::optional<CutRule>> base_rules;
  auto base = detail::ResolveBase(cc, layout, req, r.subset, base_files, base_rules);
  if (!base.ok()) return base.status();
  r.base = std::move(base.value());
  auto jobs = PlanJobs(cc, layout, *g, req, r, base_files, base_rules);
  if (!jobs.ok()) return jobs.status();
  if (Status st = StageOutput(req, r); !st.ok()) return st;
  SetOutputs(*jobs, req, r, layout.cluster_id);
  if (Status st = RunJobs(*jobs, req, r); !st.ok()) return st;
  for (auto& job : *jobs) {
    r.bytes_read += job.out.bytes_to_read;
    r.nodes.push_back(std::move(job.out));
  }
  return r;
}

}  // namespace walcut::recovery
