// Getting the summaries of a cluster: scanning its node directories (in
// parallel, one pass per node) or reading summaries written by
// `walcut scan --out`, and the summary file format itself (JSON, schema
// "walcut.summary/1", documented in README.md).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cut/scan.h"
#include "cut/summary.h"
#include "walfmt/cluster_layout.h"
#include "walfmt/status.h"

namespace walcut::cut {

struct LoadOptions {
  unsigned jobs = 0;  // scanning threads (nodes take turns segment by segment); 0: the number of cores
  // Called from the scanning threads with the total WAL bytes read so far.
  std::function<void(uint64_t bytes)> progress;
  // ScanCluster only: stop each node's scan once this cut is decided there
  // (ScanOptions::settle_cut; 0: read every WAL to the end), and start node
  // i's scan at from[i] (ScanOptions::from; empty: at the first segment).
  uint64_t settle_cut = 0;
  std::vector<walfmt::Lsn> from;
};

// The WAL directory of each node of a cluster directory: from cluster.json
// ("node_dirs") when present, else DIR/node-<i>/wal for i = 0, 1, ... Fails
// when DIR is neither (walfmt/cluster_layout.h).
using walfmt::ClusterLayout;
using walfmt::FindClusterLayout;

// Scans every node of a cluster directory.
walfmt::Result<std::vector<NodeSummary>> ScanCluster(const ClusterLayout& layout, const LoadOptions& opt);

// The options ScanCluster scans node i of `layout` with: its id, the
// cluster to check its segments against, opt's settle_cut and from[i], and
// progress through `bytes`, which sums the nodes' counts for opt.progress.
// For callers that run the node scans themselves (a restore in one pass).
class ScanProgress {
 public:
  ScanProgress(size_t nodes, std::function<void(uint64_t bytes)> report);
  ScanProgress(const ScanProgress&) = delete;
  ScanProgress& operator=(const ScanProgress&) = delete;
  // Node i's progress callback (empty without a report).
  std::function<void(uint64_t bytes)> ForNode(size_t i);

 private:
  std::vector<std::atomic<uint64_t>> done_;
  std::mutex mu_;
  std::function<void(uint64_t bytes)> report_;
};
ScanOptions NodeScanOptions(const ClusterLayout& layout, const LoadOptions& opt, size_t i, ScanProgress& bytes);

// `paths` is either one cluster directory or summary files (one per node,
// each at most walfmt::kMaxJsonFileBytes).
walfmt::Result<std::vector<NodeSummary>> LoadInputs(const std::vector<std::string>& paths, const LoadOptions& opt);

std::string SummaryToJson(const NodeSummary& s);
// A finding as it appears in every JSON document: {check, node, cut?,
// position?, tx?, expected?, found?, message}.
nlohmann::json FindingToJson(const Finding& f);
walfmt::Result<NodeSummary> SummaryFromJson(const std::string& text, const std::string& origin);

}  // namespace walcut::cut
