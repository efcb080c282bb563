// A snapshot directory: the state of every node of a cluster at one point,
// one file per node, DIR/node-<i>.snap for i = 0..N-1 (walfmt/snapshot.h).
// Two kinds exist:
//   - a full snapshot taken by the runtime: CLUSTER/snapshots/<name>/, with
//     CLUSTER/cluster.json two levels up;
//   - a restore output (`walcut restore --out DIR`): DIR/manifest.json holds
//     a copy of cluster.json under the key "cluster".
// Loading never modifies the directory.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "walfmt/cluster_layout.h"
#include "walfmt/snapshot.h"
#include "walfmt/status.h"
#include "walfmt/workload.h"

namespace walcut::recovery {

// One node's state: key -> value.
using NodeState = std::map<std::string, std::string>;

struct StateSet {
  std::string dir;
  std::vector<walfmt::SnapshotFile> nodes;  // index = node id; nodes[i].node_id == i
  std::vector<uint64_t> file_bytes;         // size of each node-<i>.snap
};

// The node states of a set, by node id, for the checks (invariants.h).
std::vector<const NodeState*> StatesOf(const StateSet& s);

struct LoadOptions {
  // When set, the directory must hold exactly this many nodes.
  std::optional<uint32_t> expected_nodes;
  // When set, every file's header must name this cluster (or 0, "not
  // recorded", which the node runtime currently writes).
  std::optional<uint64_t> expected_cluster_id;
  std::string expected_from;  // where the expectations come from, for messages (a cluster.json)
};

// Loads DIR/node-<i>.snap for every node. The node count is the number of
// node-<i>.snap files; they must be node-0 .. node-<N-1> without a gap, and
// each header must name its own node id and the same cluster as node 0.
// Errors (one line, naming the directory or the file):
//   kNotFound   DIR does not exist, is not a directory, holds no node-<i>.snap,
//               or a node's file is missing (a gap, or fewer than expected)
//   kInvalidArgument  more nodes than expected, or another cluster than expected
//   kCorruption a file fails its checks (walfmt::ReadSnapshotFile: header,
//               body checksum, fingerprint), or names another node or cluster
//   kIo         a file exists but cannot be read
walfmt::Result<StateSet> LoadStateSet(const std::string& dir, const LoadOptions& options = {});

// Whether DIR looks like a snapshot directory (holds a node-0.snap).
bool IsSnapshotDir(const std::string& dir);

// Where the cluster description of a snapshot directory lives.
struct ClusterInfoSource {
  walfmt::ClusterInfo info;
  std::string path;                                       // cluster.json or manifest.json
  bool from_manifest = false;                             // a restore output
  std::optional<walfmt::FullSnapshotInfo> full_snapshot;  // cluster.json's entry for this directory, when listed
};

// The ClusterInfo for a snapshot directory: DIR/manifest.json's "cluster" when
// there is a manifest (a restore output), else DIR/../../cluster.json when DIR
// is CLUSTER/snapshots/<name>. kNotFound when neither exists.
walfmt::Result<ClusterInfoSource> FindClusterInfoFor(const std::string& snapshot_dir);
// The same, reading CLUSTER_DIR/cluster.json (an explicit --cluster); the
// snapshot is looked up in it by DIR's last path component.
walfmt::Result<ClusterInfoSource> ClusterInfoFromDir(const std::string& cluster_dir, const std::string& snapshot_dir);

}  // namespace walcut::recovery
