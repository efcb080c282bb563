// Turns the PATH arguments of a command into the WAL of each node: a cluster
// directory (the nodes its cluster.json lists, walfmt/cluster_layout.h; without
// one, node-<i>/wal/ below it), a node directory (wal/ below it), a WAL
// directory (segment files in it), or segment files (grouped by the node id
// in their headers).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "walfmt/parallel_scan.h"
#include "walfmt/reader.h"
#include "walfmt/status.h"

namespace walcut::cli {

struct NodeWal {
  std::string label;                // the directory, or "segment files" for loose files
  std::optional<uint32_t> node_id;  // from node-<i> or the segment headers
  std::string wal_dir;              // the WAL directory; "" for segment files (and standard input)
  walfmt::NodeSegments wal;
};

struct Inputs {
  std::vector<NodeWal> nodes;             // sorted by node id
  std::vector<walfmt::Problem> problems;  // found while listing (duplicates)
};

// Fails with kNotFound when a path does not exist or holds no WAL at all.
walfmt::Result<Inputs> ResolveInputs(const std::vector<std::string>& paths);

}  // namespace walcut::cli
