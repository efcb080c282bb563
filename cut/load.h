// Getting the summaries of a cluster: scanning its node directories (in
// parallel, one pass per node) or reading summaries written by
// `walcut scan --out`, and the summary file format itself (JSON, schema
// "walcut.summary/1", documented in README.md).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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

// `paths` is either one cluster directory or summary files (one per node,
// each at most walfmt::kMaxJsonFileBytes).
walfmt::Result<std::vector<NodeSummary>> LoadInputs(const std::vector<std::string>& paths, const LoadOptions& opt);

std::string SummaryToJson(const NodeSummary& s);
// A finding as it appears in every JSON document: {check, node, cut?,
// position?, tx?, expected?, found?, message}.
nlohmann::json FindingToJson(const Finding& f);
walfmt::Result<NodeSummary> SummaryFromJson(const std::string& text, const std::string& origin);

}  // namespace walcut::cut
