// Internal to repo/: an increment read as a cluster of its own, for the
// chain restore and the export through a repository
// (repo/chain_restore.cpp).
#pragma once

#include <cstdint>
#include <optional>

#include "cut/cuts.h"
#include "cut/load.h"
#include "repo/repository.h"
#include "walfmt/status.h"

namespace walcut::repo {

// Increment `a` as a cluster: its node-<i>/wal directories and cluster.json.
cut::ClusterLayout LayoutOfIncrement(const Artifact& a);
// Its cuts, from its restore plans (checked against the manifest), or from
// its segments when it has none, with its parent's cut `attested`.
walfmt::Result<cut::ClusterCuts> IncrementCuts(const Artifact& a, std::optional<uint64_t> attested, unsigned jobs);

}  // namespace walcut::repo
