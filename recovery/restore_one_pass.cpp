// A restore of cut K from genesis in one read of each node's WAL
// (recovery/restore.h, RestoreOnePass): each node's verdict scan
// (cut::NodeScan up to where cut K is decided) carries the node's apply
// pass (detail::OnePassNode) as its tap, so the WAL up to CUT_FINISH(K) is
// read, checksummed and decoded once instead of twice. The result is used
// only when the verdict and every node's decisions say it equals what the
// two-pass restore (ScanToCut, then Restore) gives.
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "cut/load.h"
#include "cut/scan.h"
#include "recovery/restore.h"
#include "recovery/restore_node.h"
#include "recovery/state_table.h"
#include "walfmt/staging.h"
#include "walfmt/workers.h"

namespace walcut::recovery {
namespace fs = std::filesystem;
using walfmt::Status;

namespace {

// A full snapshot of the cluster has its files under DIR/snapshots/: the
// restore's base is then most likely that snapshot, not genesis.
bool HasSnapshotFiles(const cut::ClusterLayout& layout) {
  std::error_code ec;
  fs::directory_iterator it(fs::path(layout.dir) / "snapshots", ec);
  if (ec) return false;
  for (const auto& e : it) {
    if (fs::exists(e.path() / "node-0.snap", ec)) return true;
  }
  return false;
}

// Why the one-pass restore does not apply to `req` ("" when it does).
std::string NotApplicable(const cut::ClusterLayout& layout, const RestoreRequest& req) {
  if (req.dry_run) return "a dry run";
  if (!req.base.empty() && req.base != "genesis") return "a base other than genesis";
  if (layout.wal_dirs.empty()) return "no nodes";
  if (req.base.empty() && HasSnapshotFiles(layout)) return "a full snapshot may be the base";
  std::error_code ec;
  if (!req.out.empty() && fs::exists(fs::symlink_status(req.out, ec))) return "OUT exists";
  return "";
}

// The highest cut finished on every node, from the tails of their WALs:
// each node's segments are read from the last one back until one holds a
// CUT_FINISH (at most a quarter of them, and at least two). The guess of
// the latest restorable cut that a restore of the latest cut starts from;
// only a guess: the whole WAL's verdict says whether it is right. nullopt
// when a node's tail holds no CUT_FINISH or cannot be listed.
std::optional<uint64_t> LatestFinishedCut(const cut::ClusterLayout& layout) {
  std::optional<uint64_t> guess;
  const walfmt::ProblemSink ignore = [](const walfmt::Problem&) {};
  for (const auto& dir : layout.wal_dirs) {
    auto segs = walfmt::ListSegments(dir, ignore);
    if (!segs.ok() || segs->empty()) return std::nullopt;
    const size_t most = std::max<size_t>(2, segs->size() / 4);
    uint64_t last = 0;
    for (size_t back = 1; back <= std::min(most, segs->size()) && last == 0; ++back) {
      walfmt::ReadNodeWal(
          {(*segs)[segs->size() - back]}, {},
          [&last](const walfmt::RecordView& v) {
            if (v.type != walfmt::RecordType::kCutFinish) return true;
            auto rec = walfmt::DecodePayload(v.type, v.payload);
            if (rec.ok()) last = std::max(last, std::get<walfmt::CutFinish>(*rec).cut_id);
            return true;
          },
          ignore);
    }
    if (last == 0) return std::nullopt;
    guess = guess ? std::min(*guess, last) : last;
  }
  return guess;
}

// One node's scan and apply pass, on a worker.
struct NodePass {
  detail::NodeJob job;
  walfmt::Result<cut::NodeSummary> summary = Status::Internal("not scanned");
  std::string why_not;  // the pass is not usable
};

// Scans node i's WAL with its apply pass attached, then writes its file.
void RunNodePass(NodePass& p, const cut::ScanOptions& base_opt, uint64_t k, StateTable* state) {
  static const std::function<void(uint64_t)> kNoProgress;  // the scan reports the bytes read
  detail::OnePassNode apply(p.job, k, kNoProgress, state);
  cut::ScanOptions so = base_opt;
  so.tap = &apply;
  auto scan = cut::NodeScan::Open(p.job.wal_dir, so);
  if (!scan.ok()) {
    p.summary = scan.status();
    return;
  }
  while (!(*scan)->done()) (*scan)->Step();
  p.summary = (*scan)->Finish();
  if (!p.summary.ok()) return;
  p.why_not = apply.Finish();
  if (!p.why_not.empty()) return;
  if (Status st = apply.Write(); !st.ok()) p.why_not = st.message();
}

// Runs every node's pass for cut k on lo.jobs workers (one per core by
// default), each reusing one state table node after node, as Restore does;
// with `latest` every scan reads its WAL to the end.
void RunPasses(std::vector<NodePass>& passes, const cut::ClusterLayout& layout, uint64_t k, bool latest,
               const cut::LoadOptions& lo) {
  const size_t n = passes.size();
  cut::LoadOptions scan_opt;
  scan_opt.settle_cut = latest ? 0 : k;
  cut::ScanProgress bytes(n, lo.progress);
  std::atomic<size_t> next{0};
  auto work = [&] {
    StateTable state;
    for (size_t i; (i = next.fetch_add(1)) < n;) {
      RunNodePass(passes[i], cut::NodeScanOptions(layout, scan_opt, i, bytes), k, &state);
    }
  };
  unsigned threads = lo.jobs ? lo.jobs : std::max(1u, std::thread::hardware_concurrency());
  walfmt::RunWorkers(static_cast<unsigned>(std::min<size_t>(threads, n)), work);
}

// The result of the passes, when the verdict and every pass say it is the
// two-pass restore's; else why not.
std::string Assemble(std::vector<NodePass>& passes, const cut::ClusterLayout& layout, const RestoreRequest& req,
                     bool latest, OnePassRestore& out) {
  const size_t n = passes.size();
  std::vector<cut::NodeSummary> sums;
  sums.reserve(n);
  for (auto& p : passes) {
    if (!p.summary.ok()) return p.summary.status().message();
    if (!p.why_not.empty()) return p.why_not;
    sums.push_back(std::move(p.summary.value()));
    sums.back().epoch_unix_us = layout.epoch_unix_us;
  }
  // As ScanToCut decides it.
  auto v = detail::VerdictOfScan(std::move(sums), layout, {});
  if (!v) return "the summaries cannot be reconstructed";
  const cut::ClusterCuts* cc = &v->cuts;
  if (latest && (!cc->window.any || cc->window.latest != req.cut)) {
    return cc->window.any
               ? fmt::format("cut {} is not the latest restorable cut (cut {} is)", req.cut, cc->window.latest)
               : fmt::format("no cut can be restored: {}", cc->window.latest_limit);
  }
  const cut::GlobalCut* g = cc->Find(req.cut);
  if (g == nullptr || g->status != cut::CutStatus::kConsistent) return fmt::format("cut {} is not consistent", req.cut);
  if (Status st = detail::CheckRequest(g, *cc, layout, req); !st.ok()) return st.message();
  if (req.base.empty()) {
    auto choice = ChooseBase(*cc, layout, req.cut);
    if (!choice.ok()) return choice.status().message();
    if (choice->base != "genesis") return fmt::format("the base is {}", choice->base);
    out.base_why = choice->why;
  }
  std::vector<detail::BaseFile> files;
  std::vector<std::optional<detail::CutRule>> rules;
  auto base = detail::ResolveBase(*cc, layout, req, out.result.subset, files, rules);
  if (!base.ok()) return base.status().message();
  RestoreResult& r = out.result;
  r.cut = req.cut;
  r.status = g->status;
  r.reason = g->reason;
  r.base = std::move(base.value());
  for (size_t i = 0; i < n; ++i) {
    NodeRestore& o = passes[i].job.out;
    o.node = static_cast<uint32_t>(i);
    o.from = r.base.position[i];
    o.continue_from = g->nodes[i]->ContinueFrom();
    for (const auto& s : cc->nodes[i].segments) {
      if (s.index >= o.from.segment && s.index <= o.to.segment) o.segments.push_back(s);
    }
    r.bytes_read += o.bytes_to_read;
    r.nodes.push_back(std::move(o));
  }
  out.verdict = std::move(*v);
  return "";
}

}  // namespace

std::optional<OnePassRestore> RestoreOnePass(const cut::ClusterLayout& layout, const RestoreRequest& asked,
                                             const cut::LoadOptions& lo, std::string* why_not) {
  // The latest cut (req.cut 0): the whole WAL is read, as the two-pass
  // restore reads it for every cut's verdict, with the guess applied.
  const bool latest = asked.cut == 0;
  RestoreRequest req = asked;
  std::string why = NotApplicable(layout, req);
  if (why.empty() && latest) {
    if (auto k = LatestFinishedCut(layout)) {
      req.cut = *k;
    } else {
      why = "no CUT_FINISH in the last segments of every node";
    }
  }
  OnePassRestore out;
  RestoreResult& r = out.result;
  r.subset = req.subset;
  if (why.empty()) {
    if (Status st = detail::ReadClusterJsonAndSubset(layout, r); !st.ok()) why = st.message();
  }
  if (why.empty()) {
    if (Status st = detail::StageOutput(req, r); !st.ok()) why = st.message();
  }
  if (!why.empty()) {
    if (why_not) *why_not = why;
    return std::nullopt;
  }
  std::vector<NodePass> passes(layout.wal_dirs.size());
  for (size_t i = 0; i < passes.size(); ++i) {
    detail::NodeJob& job = passes[i].job;
    job.node = static_cast<uint32_t>(i);
    job.wal_dir = layout.wal_dirs[i];
    job.keep_state = req.keep_states || req.out.empty();
    job.write_thread = req.io_threads > 0;
    job.filter = KeyFilter(r.subset);
    if (r.stage_dir.empty()) continue;
    job.stage_file = (fs::path(r.stage_dir) / fmt::format("node-{}.snap", i)).string();
    job.header.node_id = job.node;
    job.header.cluster_id = layout.cluster_id;
    job.header.name = fmt::format("cut-{}", req.cut);
  }
  try {
    RunPasses(passes, layout, req.cut, latest, lo);
  } catch (...) {
    if (!r.stage_dir.empty()) walfmt::RemoveStaging(r.stage_dir);
    throw;
  }
  why = Assemble(passes, layout, req, latest, out);
  if (!why.empty()) {
    // Nothing of the attempt stays: the two-pass restore starts afresh.
    if (!r.stage_dir.empty()) walfmt::RemoveStaging(r.stage_dir);
    if (why_not) *why_not = why;
    return std::nullopt;
  }
  return out;
}

}  // namespace walcut::recovery
