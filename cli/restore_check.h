// The workload invariants of a restore (`restore --check`, `restore assemble
// --check`), defined in cli/cmd_restore.cpp: run on the staged node files of
// `r` (read back, so the files themselves are what is checked). Returns the
// result as the manifest's "check" object; `lines` gets one line per finding
// (or what holds).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "recovery/restore.h"
#include "walfmt/cluster_layout.h"
#include "walfmt/status.h"
#include "walfmt/workload.h"

namespace walcut::cli {

// A partial restore's subset in a JSON report ("subset"): null for every
// key, else its key_prefixes, partitions and partition_count.
nlohmann::json SubsetJson(const recovery::KeySubset& s);

// `what`: bank, cycle or auto (the cluster's workload). The cluster
// description comes from DIR/cluster.json.
walfmt::Result<nlohmann::json> CheckRestored(const recovery::RestoreResult& r, const std::string& dir,
                                             const std::string& what, std::vector<std::string>& lines);
// The same with the cluster description given (an assembled restore carries
// the text of cluster.json); `dir` names the cluster in messages.
walfmt::Result<nlohmann::json> CheckRestoredWith(const recovery::RestoreResult& r,
                                                 const walfmt::Result<walfmt::ClusterInfo>& info,
                                                 const std::string& dir, const std::string& what,
                                                 std::vector<std::string>& lines);

}  // namespace walcut::cli
