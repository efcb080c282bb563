// What the recovery tools need to know about a cluster, read from the
// cluster.json that `walcut run` writes (node/cluster.cpp, WriteClusterJson).
// A restore's manifest.json embeds a copy of cluster.json under "cluster", so
// the same parser reads both.
//
// Only the fields listed here are read; every other field is ignored, so the
// file may grow within its format version. Every field read is checked (type,
// range, agreement with the others) and an error is one line naming the file
// and the field, for example
//
//   /tmp/c/cluster.json: field "parameters.accounts": expected an unsigned integer, found "12"
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "walfmt/lsn.h"
#include "walfmt/status.h"
#include "walfmt/topology.h"
#include "walfmt/workload.h"

namespace walcut::recovery {

// cluster.json "format" and "format_version" that this parser understands.
inline constexpr std::string_view kClusterFormat = "walcut-cluster";
inline constexpr uint64_t kClusterFormatVersion = 1;
// The key -> partition function the tools recompute (walfmt/topology.h).
inline constexpr std::string_view kKeyHash = "fnv1a64 % partitions";

using walfmt::ParseWorkload;
using walfmt::Workload;
using walfmt::WorkloadName;

// One node's file of a full snapshot, as cluster.json lists it.
struct FullSnapshotNode {
  uint32_t node = 0;
  std::string file;            // relative to the snapshot directory: "node-<i>.snap"
  uint64_t fingerprint = 0;    // walfmt::StateFingerprint of the node's state
  walfmt::Lsn wal_position;    // of the SNAPSHOT record in the node's WAL
};

struct FullSnapshotInfo {
  std::string name;
  std::string dir;             // relative to the cluster directory: "snapshots/<name>"
  uint64_t at_tx = 0;          // workload transactions started before it
  uint64_t time_us = 0;
  std::vector<FullSnapshotNode> nodes;  // by node id, one per node
};

struct ClusterInfo {
  std::string origin;          // where it was read from (for messages)
  uint64_t cluster_id = 0;
  uint64_t seed = 0;
  uint32_t nodes = 0;
  uint32_t backups = 0;        // < nodes
  uint32_t partitions = 0;     // > 0
  Workload workload = Workload::kBank;
  uint32_t accounts = 0;       // bank keys acct/000000 .. acct/<accounts-1>
  uint32_t ring_keys = 0;      // cycle keys ring/000000 .. ring/<ring_keys-1>
  int64_t initial_balance = 0;
  int64_t initial_bank_total = 0;  // what the bank total must always be
  std::vector<std::string> node_wal_dirs;        // by node id, relative to the cluster directory
  std::vector<FullSnapshotInfo> full_snapshots;  // in the order they were taken

  walfmt::Topology topology() const { return walfmt::Topology(nodes, backups, partitions); }
  bool has_bank() const { return workload != Workload::kCycle; }
  bool has_cycle() const { return workload != Workload::kBank; }
  // nullptr when no full snapshot has that name.
  const FullSnapshotInfo* FindSnapshot(std::string_view name) const;
};

// Parses the text of a cluster.json. `origin` names it in error messages
// (a path, or "manifest.json (cluster)"). Errors are kCorruption.
walfmt::Result<ClusterInfo> ParseClusterInfo(std::string_view json_text, std::string_view origin);

// Reads CLUSTER_DIR/cluster.json. kNotFound when there is none, kIo when it
// cannot be read, kCorruption when it is malformed.
walfmt::Result<ClusterInfo> LoadClusterInfo(const std::string& cluster_dir);

}  // namespace walcut::recovery
