// The one place that knows the layout of a cluster directory and its
// cluster.json: `walcut run` (node/cluster_driver.cpp) writes cluster.json through
// WriteClusterJson, and every reader (the cut scans in cut/load.cpp, recovery,
// the CLI's input resolution in cli/inputs.cpp) reads it through
// ParseClusterInfo / LoadClusterInfo / FindClusterLayout. A restore's
// manifest.json embeds a copy of cluster.json under "cluster", so the same
// parser reads both.
//
//   DIR/cluster.json          this file's format, schema "walcut.cluster/2"
//   DIR/node-<i>/wal/         node i's WAL (as cluster.json's node_dirs say)
//   DIR/snapshots/<name>/     full snapshots (as full_snapshots says)
//
// Only the fields of ClusterInfo are read; every other field is ignored, so
// the file may grow within its format version (to add one: a member of
// ClusterInfo, its check in ParseClusterInfo, its output in ClusterJsonText).
// Every field read is checked (type, range, agreement with the others) and an
// error is one line naming the file and the field, for example
//
//   /tmp/c/cluster.json: field "parameters.accounts": expected an unsigned integer, found "12"
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "walfmt/lsn.h"
#include "walfmt/status.h"
#include "walfmt/topology.h"
#include "walfmt/workload.h"

namespace walfmt {

// cluster.json's "schema". Version 1 of the document (older walcut) said
// "format": "walcut-cluster", "format_version": 1 instead and wrote
// cluster_id as a decimal number; the parser reads both, the writer writes
// version 2 (cluster_id as 16 lower-case hex digits, as every document and
// message of walcut shows it).
inline constexpr std::string_view kClusterSchema = "walcut.cluster/2";
inline constexpr std::string_view kClusterFormatV1 = "walcut-cluster";
// The key -> partition function the tools recompute (walfmt/topology.h).
inline constexpr std::string_view kKeyHash = "fnv1a64 % partitions";
inline constexpr std::string_view kClusterJsonName = "cluster.json";

// The directory of node `node` inside a cluster directory ("node-<i>"), its
// WAL directory ("node-<i>/wal"), and the node id a directory name stands for
// ("node-3" -> 3; nullopt for any other name).
std::string NodeDirName(uint32_t node);
std::string NodeWalDirName(uint32_t node);
std::optional<uint32_t> NodeIdFromDirName(std::string_view name);

// One node's file of a full snapshot, as cluster.json lists it.
struct FullSnapshotNode {
  uint32_t node = 0;
  std::string file;          // relative to the snapshot directory: "node-<i>.snap"
  uint64_t fingerprint = 0;  // walfmt::StateFingerprint of the node's state
  Lsn wal_position;          // of the SNAPSHOT record in the node's WAL
  // With WAL retention: the segments the node deleted right after this
  // snapshot (written by `walcut run`, not read back).
  std::optional<uint64_t> segments_deleted;
};

struct FullSnapshotInfo {
  std::string name;
  std::string dir;     // relative to the cluster directory: "snapshots/<name>"
  uint64_t at_tx = 0;  // workload transactions started before it
  uint64_t time_us = 0;
  std::vector<FullSnapshotNode> nodes;  // by node id, one per node
};

struct ClusterInfo {
  std::string origin;  // where it was read from (for messages)
  uint64_t cluster_id = 0;
  uint64_t seed = 0;
  uint32_t nodes = 0;
  uint32_t backups = 0;     // < nodes
  uint32_t partitions = 0;  // > 0
  Workload workload = Workload::kBank;
  uint32_t accounts = 0;   // bank keys acct/000000 .. acct/<accounts-1>
  uint32_t ring_keys = 0;  // cycle keys ring/000000 .. ring/<ring_keys-1>
  int64_t initial_balance = 0;
  int64_t initial_bank_total = 0;                // what the bank total must always be
  std::vector<std::string> node_wal_dirs;        // by node id, relative to the cluster directory
  std::vector<FullSnapshotInfo> full_snapshots;  // in the order they were taken
  // WAL retention of the run ("" when every segment is kept; else
  // "after-snapshot") and, with it, the first segment each node still has.
  std::string wal_retention;
  std::vector<uint64_t> first_segment;  // by node id; empty without retention
  // The wall-clock time of cluster time 0, in microseconds since the Unix
  // epoch ("epoch_unix_us"; walfmt/duration.h): record time T happened at
  // epoch + T. Absent in a cluster.json written before walcut recorded it.
  std::optional<uint64_t> epoch_unix_us;

  Topology topology() const { return Topology(nodes, backups, partitions); }
  bool has_bank() const { return workload != Workload::kCycle; }
  bool has_cycle() const { return workload != Workload::kBank; }
  // nullptr when no full snapshot has that name.
  const FullSnapshotInfo* FindSnapshot(std::string_view name) const;
};

// The text of a cluster.json document in the current version: version 1's
// "format"/"format_version" become "schema", its decimal cluster_id hex;
// every other member is kept. Text that is not a version 1 document is
// returned as it is. For the copies of cluster.json walcut embeds in the
// documents it writes (a restore's manifest.json).
std::string CurrentClusterJsonText(std::string_view json_text);

// Parses the text of a cluster.json. `origin` names it in error messages
// (a path, or "manifest.json (cluster)"). Errors are kCorruption.
Result<ClusterInfo> ParseClusterInfo(std::string_view json_text, std::string_view origin);

// Reads CLUSTER_DIR/cluster.json (at most kMaxJsonFileBytes, walfmt/file_io.h).
// kNotFound when there is none, kIo when it cannot be read, kCorruption when
// it is malformed.
Result<ClusterInfo> LoadClusterInfo(const std::string& cluster_dir);

// What `walcut run` records in cluster.json besides ClusterInfo: how the
// cluster was produced. Written for people and scripts; the tools never read
// it back (ParseClusterInfo ignores these fields).
struct ClusterRunRecord {
  uint32_t initiator = 0;  // the node that starts the cuts
  uint64_t txs = 0;
  uint64_t concurrency = 0;
  uint64_t cuts = 0;
  uint64_t cut_every = 0;
  uint64_t segment_bytes = 0;
  uint64_t full_snapshot_every = 0;  // 0: not given
  uint64_t vote_no_per_million = 0;
  uint64_t net_delay_min_us = 0;
  uint64_t net_delay_max_us = 0;
  uint64_t step_delay_max_us = 0;
  struct Crash {
    uint32_t node = 0;
    uint64_t at_us = 0;
    uint64_t restart_delay_us = 0;
  };
  std::vector<Crash> crashes;  // the explicit crash schedule
  uint64_t random_crashes = 0;
  bool complete = false;  // false while the run is in progress
};

// The text of cluster.json (pretty-printed, keys sorted, a final newline).
// `info.node_wal_dirs` and the snapshots' `dir` are written as given;
// `info.origin` is not written.
std::string ClusterJsonText(const ClusterInfo& info, const ClusterRunRecord& run);
// Writes CLUSTER_DIR/cluster.json atomically and durably (WriteFileAtomic).
Status WriteClusterJson(const std::string& cluster_dir, const ClusterInfo& info, const ClusterRunRecord& run);

// Where the nodes of a cluster directory keep their WAL: from cluster.json
// (node_dirs, checked by ParseClusterInfo) when there is one, else
// DIR/node-<i>/wal for i = 0, 1, ... as long as those directories exist.
// kNotFound when DIR is neither; the errors of LoadClusterInfo otherwise.
struct ClusterLayout {
  std::string dir;
  bool has_cluster_json = false;
  uint64_t cluster_id = 0;                // 0 without cluster.json
  std::optional<uint64_t> epoch_unix_us;  // from cluster.json, when it records one
  std::vector<std::string> wal_dirs;      // by node id: DIR joined with the relative WAL directory
};
Result<ClusterLayout> FindClusterLayout(const std::string& dir);

}  // namespace walfmt
