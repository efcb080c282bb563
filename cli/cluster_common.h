// What the commands that talk to a real cluster share (cluster, cut start,
// load): its two files, the processes runtime.json names, a node's status.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "node/client.h"
#include "node/runtime_file.h"
#include "node/wire.h"
#include "walfmt/cluster_layout.h"
#include "walfmt/status.h"

namespace walcut::cli {

inline constexpr auto kCallTimeout = std::chrono::milliseconds(2000);

struct RealCluster {
  walfmt::ClusterInfo info;
  node::RuntimeInfo rt;
};
// DIR's cluster.json and runtime.json. A DIR without runtime.json (a
// cluster of `walcut run`) is kNotFound with a message that says so.
walfmt::Result<RealCluster> LoadRealCluster(const std::string& dir);

// Whether pid is a live `walcut node DIR --node I` (not a zombie, not a
// recycled pid running something else). DIR as AbsoluteDir gives it.
bool IsOurNode(int64_t pid, const std::string& dir, uint32_t node);
// The directory as the node processes get it: absolute and normal.
std::string AbsoluteDir(const std::string& dir);

// Node n's status over a control connection.
walfmt::Result<node::wire::StatusReply> AskStatus(const node::RuntimeInfo& rt, uint64_t cluster_id, uint32_t n);

// The node that starts the cuts and takes the full snapshots, as the first
// live node that knows it says; node::sim::kNoNode when none answers (then
// `last` says why).
uint32_t FindInitiator(const std::string& dir, const RealCluster& l, std::string& last);

// One request to the initiator (found with FindInitiator) on a control
// connection, waiting for its answer until `deadline`. Sets `initiator` to
// the node asked; an error (no initiator known, the connection or the call
// failed) says why, for the caller that asks again.
walfmt::Result<node::wire::Message> CallInitiator(const std::string& dir, const RealCluster& l,
                                                  const node::wire::Message& request,
                                                  std::chrono::steady_clock::time_point deadline, uint32_t& initiator);

}  // namespace walcut::cli
