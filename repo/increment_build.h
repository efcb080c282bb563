// Internal to repo/: the pieces of an increment that the single-host create
// (repo/create.cpp) and the increment made of per-node parts (repo/parts.cpp)
// share, so that both write the same artifact: the cut's evidence in the
// manifest, node i's entry, its segments and its restore plan.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cut/cuts.h"
#include "repo/repository.h"
#include "walfmt/lsn.h"
#include "walfmt/reader.h"
#include "walfmt/status.h"

namespace walcut::repo {

// The cut's global evidence (status, checks, counts, times) into m.
void FillCutEvidence(const cut::GlobalCut& g, Manifest& m);
// The next seq of an artifact of the repository listed in `l`.
uint64_t NextSeq(const RepoListing& l);
// kInvalidArgument when `name` cannot be an artifact's name.
walfmt::Status CheckName(const std::string& name);

// The parent of an increment: req.parent, else the newest artifact of cluster `cid`.
walfmt::Result<const Artifact*> IncrementParent(const CreateRequest& req, const RepoListing& l, uint64_t cid);
// Cut g may be made an increment on `parent` of: consistent, and after it.
walfmt::Status CheckIncrementCut(const cut::GlobalCut& g, const Artifact& parent);

// Node i's segments of an increment, [from, CUT_FINISH_i(K)] (kc: node i's
// cut K, or nullptr), whole; each missing range is added to `missed`.
std::vector<walfmt::SegmentFile> NodeIncrementSegments(const std::string& wal_dir, size_t i, walfmt::Lsn from,
                                                       const cut::NodeCut* kc, uint64_t k, std::string& missed);
// Node i's entry of an increment from `from` (the parent's R_i) to its cut K `kc`.
ArtifactNode IncrementNode(size_t i, walfmt::Lsn from, const cut::NodeCut& kc,
                           const std::vector<walfmt::SegmentFile>& segs);
// Node i's restore plan (REPOSITORY.md, "Restoring through a chain") from
// the scan summary `live` of its WAL.
cut::NodeSummary PlanSummary(const cut::NodeSummary& live, const Artifact& parent, uint64_t k,
                             const std::vector<walfmt::SegmentFile>& segs);

}  // namespace walcut::repo
