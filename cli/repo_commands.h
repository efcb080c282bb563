// The repository of snapshot artifacts on the command line (repo/, README.md
// "Repository of snapshot artifacts"): the entry points that other command
// files route to. `snapshot create|list|expire` register themselves.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "cli/repo_access.h"
#include "recovery/key_subset.h"
#include "walfmt/duration.h"

namespace walcut::cli {

// Whether DIR is a repository (holds its top-level marker): `snapshot check`
// dispatches on it.
bool IsRepositoryDir(const std::string& dir);

struct RepoCheckCliOptions {
  std::string repo;
  std::string name;  // "" : every artifact
  bool restore = false;
  std::string format = "text";  // text, json, junit
  std::string output;           // "" : stdout
  unsigned jobs = 0;
  std::string metrics;  // "" : none; else Prometheus text (cli/metrics.h)
  RepoAccess access;    // an s3:// repository
};
int RunRepoCheck(const RepoCheckCliOptions& o);

struct RepoRestoreCliOptions {
  std::string repo;
  std::string name;
  std::optional<uint64_t> cut;
  bool latest = false;
  std::optional<walfmt::TimeArg> before;
  std::string out;
  bool dry_run = false;
  bool json = false;
  unsigned jobs = 0;
  recovery::KeySubset subset;  // --keys / --partition: a partial restore
  RepoAccess access;           // an s3:// repository
};
// `walcut restore --repo REPO (NAME | --cut K | --latest | --before TIME) --out OUT`.
int RunRestoreRepo(const RepoRestoreCliOptions& o);

struct CreatePartsCliOptions {
  std::string node_dir;  // CLUSTER's place: NODE_DIR
  int node = -1;
  std::string verdict;
  bool assemble = false;
  std::string repo;
  bool incremental = false;
  bool other = false;  // --full, --from, --cut or --latest given
  std::string parent;
  std::string name;
  int level = 1;
  unsigned jobs = 0;
  bool json = false;
  RepoAccess access;
};
// `walcut snapshot create NODE_DIR --repo REPO --incremental --verdict V
// [--node I]` (a part) and `snapshot create --repo REPO --incremental
// --assemble --verdict V` (repo/parts.h).
int RunCreateParts(const CreatePartsCliOptions& o);

}  // namespace walcut::cli
