// What the recovery tools need to know about a cluster lives in
// walfmt/cluster_layout.h (the one reader and writer of cluster.json, shared
// with the node runtime and the cut scans); these names keep recovery's code
// and tests reading as before.
#pragma once

#include "walfmt/cluster_layout.h"
#include "walfmt/workload.h"

namespace walcut::recovery {

using walfmt::kClusterSchema;
using walfmt::kKeyHash;

using walfmt::ParseWorkload;
using walfmt::Workload;
using walfmt::WorkloadName;

using walfmt::ClusterInfo;
using walfmt::FullSnapshotInfo;
using walfmt::FullSnapshotNode;
using walfmt::LoadClusterInfo;
using walfmt::ParseClusterInfo;

}  // namespace walcut::recovery
