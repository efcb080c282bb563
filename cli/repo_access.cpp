// --repo and the S3 options of the repository commands (cli/repo_access.h).
#include "cli/repo_access.h"

#include "cli/command.h"
#include "cli/output.h"

namespace walcut::cli {

void AddRepoAccessOptions(CLI::App* cmd, RepoAccess& a, bool writer) {
  cmd->add_option("--s3-endpoint", a.s3_endpoint,
                  "S3: the store's URL (http[s]://host[:port], path-style addressing); default "
                  "AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, else AWS");
  cmd->add_option("--s3-region", a.s3_region, "S3: the region (default AWS_REGION, AWS_DEFAULT_REGION, us-east-1)");
  cmd->add_option("--encrypt-key-file", a.key_file,
                  "The key of an encrypted repository: 32 bytes, or 64 hex digits (mode 0600); a create into a new "
                  "repository encrypts it (AES-256-GCM)");
  if (writer) {
    cmd->add_flag("--break-lock", a.break_lock,
                  "Remove a stale repository lock (an S3 lock that expired or whose process on this host is gone)");
  }
}

std::optional<repo::RepoLocation> RepoLocationOf(const std::string& arg) {
  auto loc = repo::ParseRepoLocation(arg);
  if (!loc.ok()) {
    PrintError(loc.status().message());
    return std::nullopt;
  }
  return *loc;
}

repo::RemoteOptions RemoteOf(const RepoAccess& a, unsigned jobs) {
  repo::RemoteOptions o;
  o.s3_endpoint = a.s3_endpoint;
  o.s3_region = a.s3_region;
  o.break_lock = a.break_lock;
  o.jobs = jobs;
  return o;
}

std::optional<repo::RemoteOptions> RemoteFor(const RepoAccess& a, const repo::RepoLocation& loc, unsigned jobs,
                                             int& rc) {
  repo::RemoteOptions o = RemoteOf(a, jobs);
  if (!a.key_file.empty()) {
    auto key = repo::LoadRepoKey(a.key_file);
    if (!key.ok()) {
      PrintError(key.status().message());
      rc = kExitUsage;
      return std::nullopt;
    }
    o.key = *key;
  }
  if (walfmt::Status st = repo::CheckKeyAt(loc, o); !st.ok()) {
    PrintError(st.message());
    rc = st.code() == walfmt::ErrorCode::kInvalidArgument ? kExitUsage : ExitForStatus(st);
    return std::nullopt;
  }
  return o;
}

}  // namespace walcut::cli
