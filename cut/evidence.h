// Naming the transactions behind a digest disagreement. Reconstruct compares,
// for each pair of nodes, an order-independent digest of the transactions
// they share in a cut: cheap, and it travels in the summaries, but when two
// digests differ it says only that the sets differ. With the WALs at hand, a
// second, targeted pass over the two nodes collects the shared transactions
// themselves and names the ones that are in the cut on one node and not on
// the other.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "cut/cuts.h"
#include "cut/load.h"
#include "walfmt/cluster_layout.h"
#include "walfmt/status.h"

namespace walcut::cut {

// For every disagreement of every cut in `cuts` (GlobalCut::disagreements),
// rescans both nodes' WALs (from `layout`) and appends to the finding the
// transactions (up to `max_named` per side) that the cut holds on one node
// only; the finding's `tx` becomes the first of them. Each pair of nodes is
// scanned once whatever the number of cuts. Fails only when a WAL cannot be
// read again.
walfmt::Status NameDisagreements(ClusterCuts& cuts, const walfmt::ClusterLayout& layout, size_t max_named = 5);

// What `walcut cuts`, `cut show`, `check` and `restore` start from: the
// inputs read (LoadInputs), the cuts reconstructed, and, when the input is a
// cluster directory and two nodes disagree, the transactions named.
walfmt::Result<ClusterCuts> ReadCuts(const std::vector<std::string>& paths, const LoadOptions& lo,
                                     const ReconstructOptions& ro = {});

}  // namespace walcut::cut
