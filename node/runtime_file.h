// DIR/runtime.json: what `walcut cluster up` records about a running real
// cluster beside cluster.json — where each node listens, which process runs
// it, and the runtime's options — for `walcut node`, `walcut cluster
// down/kill/restart`, `walcut cut start` and `walcut load`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "node/cluster.h"
#include "node/process.h"
#include "walfmt/status.h"

namespace walcut::node {

inline constexpr const char* kRuntimeSchema = "walcut.runtime/2";
inline constexpr const char* kRuntimeFile = "runtime.json";
// Present in the cluster directory while `walcut cluster down` stops the
// nodes: a node that sees a peer leave then stops too, rather than take it
// for a crash (no takeover, no cut aborted).
inline constexpr const char* kStoppingFile = "stopping";

// DIR/node-<i>/incarnation: the node's incarnation, one decimal number and a
// newline, written (durably) at each start before the node takes part. A
// restarted node's incarnation follows it and the last NODE_START of its
// WAL, whichever is higher: WAL retention may have deleted that record.
inline constexpr const char* kIncarnationFile = "incarnation";
// The recorded incarnation of the node whose directory is `node_dir`
// (nullopt: none recorded). kCorruption when the file holds anything else.
walfmt::Result<std::optional<uint32_t>> LoadIncarnation(const std::string& node_dir);
walfmt::Status SaveIncarnation(const std::string& node_dir, uint32_t incarnation);

struct RuntimeInfo {
  std::string host = "127.0.0.1";  // every node listens there
  std::vector<uint16_t> ports;     // by node id
  std::vector<int64_t> pids;       // by node id: the process last started for it (0: none)
  SyncMode sync = SyncMode::kGroup;
  uint64_t cut_every_us = 0;  // the initiator starts a cut this often (0: only when asked)
  // The initiator takes a full snapshot this often (0: only when asked).
  uint64_t full_snapshot_every_us = 0;
  // kAfterSnapshot: after each full snapshot every node deletes the WAL
  // segments it no longer needs, and recovers from its latest snapshot.
  WalRetention wal_retention = WalRetention::kKeep;
  uint64_t segment_bytes = 1u << 20;
  uint32_t vote_no_per_million = 0;  // injected refusals of a prepare (0: none)
};

// DIR/runtime.json. Errors: kNotFound (no such file: not a running
// cluster's directory), kCorruption (a field missing or out of range).
walfmt::Result<RuntimeInfo> LoadRuntimeInfo(const std::string& cluster_dir);
// Writes DIR/runtime.json atomically and durably.
walfmt::Status SaveRuntimeInfo(const std::string& cluster_dir, const RuntimeInfo& info);

}  // namespace walcut::node
