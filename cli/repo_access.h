// How a command reaches its repository (repo/remote.h): --repo as a directory,
// file://PATH or s3://BUCKET/PREFIX, and the S3 options every repository
// command takes (--s3-endpoint, --s3-region; --break-lock for the writers).
#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "repo/remote.h"

namespace walcut::cli {

struct RepoAccess {
  std::string s3_endpoint;
  std::string s3_region;
  bool break_lock = false;
};

// Adds --s3-endpoint and --s3-region, and --break-lock when `writer`.
void AddRepoAccessOptions(CLI::App* cmd, RepoAccess& a, bool writer);

// `arg` as a repository location; a refusal (an unknown scheme, a bad s3://
// URL) is printed as one line and gives nullopt (exit 2).
std::optional<repo::RepoLocation> RepoLocationOf(const std::string& arg);

repo::RemoteOptions RemoteOf(const RepoAccess& a, unsigned jobs);

}  // namespace walcut::cli
