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
  std::string key_file;  // --encrypt-key-file
};

// Adds --s3-endpoint, --s3-region and --encrypt-key-file, and --break-lock
// when `writer`.
void AddRepoAccessOptions(CLI::App* cmd, RepoAccess& a, bool writer);

// `arg` as a repository location; a refusal (an unknown scheme, a bad s3://
// URL) is printed as one line and gives nullopt (exit 2).
std::optional<repo::RepoLocation> RepoLocationOf(const std::string& arg);

repo::RemoteOptions RemoteOf(const RepoAccess& a, unsigned jobs);

// RemoteOf with the key of --encrypt-key-file loaded and checked against the
// repository's marker (nothing decrypted or written); nullopt when refused,
// printed as one line, `rc` the exit code (2; 3 when the marker cannot be
// read).
std::optional<repo::RemoteOptions> RemoteFor(const RepoAccess& a, const repo::RepoLocation& loc, unsigned jobs,
                                             int& rc);

}  // namespace walcut::cli
