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

}  // namespace walcut::cli
