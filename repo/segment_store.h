// Internal to repo/: the segments of an increment stored into its staging
// directory, compressed (zstd) or copied, on several threads.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "repo/repository.h"
#include "walfmt/reader.h"
#include "walfmt/status.h"

namespace walcut::repo {

// One segment of an increment: its file in the cluster, its path in the
// artifact, and (once stored) its manifest entry.
struct SegmentTask {
  const walfmt::SegmentFile* seg;
  std::string rel;
  ArtifactFile entry;
};

// Stores every task's segment into the staging directory: a segment already
// compressed in the cluster is copied as it is (one zstd frame or several of
// the plain segment); a plain one is compressed into one zstd frame at `level`
// and written. On `jobs` threads (default: one per core, plus one, so that the
// cores keep compressing while a thread waits for its fsync), each with its own
// zstd context and buffer (memory: about one compressed segment a thread). The
// first error in task order is returned; the others stop taking tasks.
// `stored`, when set, is called on the storing thread after each segment's
// file is written, with the task and the file's path; its error fails the
// store as a write error would.
using SegmentStored = std::function<walfmt::Status(const SegmentTask&, const std::string& path)>;
walfmt::Status StoreSegments(const std::string& stage, std::vector<SegmentTask>& tasks, int level, unsigned jobs,
                             const SegmentStored& stored = {});

}  // namespace walcut::repo
