// An increment made where the WAL lives (repo/REPOSITORY.md, "Increments
// from parts"): each host uploads its node's part of the increment of a
// cut (`snapshot create NODE_DIR --incremental --node I --verdict V`), its
// WAL checked against the cut's verdict (recovery/verdict.h) as the
// per-node restore checks it, and one `snapshot create --incremental
// --assemble --verdict V` makes the artifact of the parts, the same one the
// single-host create makes. Parts wait under REPO/.parts/<artifact>/ (never
// an artifact). Library code: never prints; errors are values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "repo/remote.h"
#include "repo/repository.h"
#include "walfmt/status.h"

namespace walcut::repo {

// REPO/.parts/<artifact>/node-<i>.<token>/: node i's part of an increment.
inline constexpr const char* kPartsDir = ".parts";

struct IncrementPartRequest {
  std::string node_dir;  // NODE_DIR: node-<i> (holding wal/) or its WAL directory
  int node = -1;         // --node; -1: from NODE_DIR's name node-<i>
  std::string verdict;   // --verdict FILE (walcut cuts ... --verdict-out FILE)
  std::string repo;      // a directory, file://PATH or s3://BUCKET/PREFIX
  std::string parent;    // "" : the newest artifact of the verdict's cluster
  std::string name;      // "" : i-cut-<K>
  int zstd_level = 1;
  unsigned jobs = 0;
};

struct IncrementPartResult {
  std::string artifact;  // the increment the part belongs to
  std::string where;     // the part: REPO/.parts/<artifact>/node-<i>.<token>
  uint64_t cut = 0;
  std::string parent;
  std::string verdict_id;
  ArtifactNode node;  // its entry in the increment's manifest
  uint64_t files = 0, bytes = 0;
};

// Node I's part, written once (each file new, its manifest.json last; on S3
// the manifest with a create-only PUT), without the repository's lock.
// Errors: kInvalidArgument / kNotFound (usage: NODE_DIR is not node I's WAL,
// the WAL does not match the verdict, no such parent, a parent of another
// cluster or not before the cut, the artifact or node I's part exists),
// kCorruption (refused: the verdict's cut is not consistent, WAL segments
// missing, damaged WAL), kIo.
walfmt::Result<IncrementPartResult> CreateIncrementPart(const IncrementPartRequest& req, const RemoteOptions& o);

struct AssembleRequest {
  std::string repo;
  std::string verdict;
  std::string parent;  // "" : the newest artifact of the verdict's cluster
  std::string name;    // "" : i-cut-<K>
  unsigned jobs = 0;
};

// The increment of the verdict's cut made of its parts, under the
// repository's lock; the parts are removed once it is published. Errors:
// kInvalidArgument / kNotFound (a part missing, present twice or of another
// verdict, cut, cluster, parent or artifact; usage), kCorruption (a part's
// file whose bytes do not match its manifest), kIo (also: locked).
walfmt::Result<CreateResult> AssembleIncrement(const AssembleRequest& req, const RemoteOptions& o);

// The pending parts named by keys (or paths) relative to the repository:
// "<artifact>/<part>" for each .parts/<artifact>/<part>/..., with
// " (incomplete)" when its manifest.json is not among them.
std::vector<std::string> PendingParts(const std::vector<std::string>& rel_keys);
// The relative paths of every file under DIR/.parts (a directory repository).
std::vector<std::string> PartFiles(const std::string& dir);

}  // namespace walcut::repo
