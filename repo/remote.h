// Where a repository lives (repo/REPOSITORY.md, "Object storage"): a local
// directory (a path, or file://PATH) or an S3 bucket (s3://BUCKET/PREFIX); and
// the five repository operations on S3, with the same results as their
// directory forms in repository.h. An S3 artifact is the set of objects under
// PREFIX/<name>/, its manifest.json written last; one writer at a time holds
// the lock object PREFIX/.walcut-lock (repo_lock.h). Library code: never
// prints; errors are values.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "repo/repository.h"
#include "walfmt/status.h"

namespace walcut::repo {

struct RepoKey;  // repo/crypt.h: the key of an encrypted repository

struct RepoLocation {
  bool s3 = false;
  std::string dir;  // a directory: the path (file:// removed)
  std::string url;  // S3: "s3://BUCKET/PREFIX" as given
};
// A path or file://PATH is a directory; s3://... an S3 location (checked as
// ParseS3Url does); any other SCHEME:// is refused (kInvalidArgument), so
// that "gs://x" never becomes a directory named "gs:".
walfmt::Result<RepoLocation> ParseRepoLocation(std::string_view arg);

// How to reach an S3 repository and how to write to it.
struct RemoteOptions {
  std::string s3_endpoint;  // --s3-endpoint; else AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL
  std::string s3_region;    // --s3-region; else AWS_REGION / AWS_DEFAULT_REGION / us-east-1
  bool break_lock = false;  // --break-lock: remove a stale lock (never a live one)
  unsigned jobs = 0;        // parallel transfers (0: one per core, at most 16)
  // --encrypt-key-file: the key of an encrypted repository (REPOSITORY.md,
  // "Encryption"); null for a plain one.
  std::shared_ptr<const RepoKey> key;
};

// The key file (REPOSITORY.md, "Encryption": 32 bytes, or 64 hex digits and
// an optional newline; mode 0600 or 0400). kInvalidArgument naming the file.
walfmt::Result<std::shared_ptr<const RepoKey>> LoadRepoKey(const std::string& path);
// Whether the key given (o.key, or none) fits the repository's marker, read
// alone (nothing decrypted, nothing written): kInvalidArgument for an
// encrypted repository without the key or with another key, and for a key
// given to a plain repository. Ok when there is no marker yet.
walfmt::Status CheckKeyAt(const RepoLocation& loc, const RemoteOptions& o);

// The commands on a repository wherever it lives: S3 (below), a directory
// encrypted with o.key (each command decrypts what it reads into a private
// directory and runs the directory code there; create encrypts what it
// built), or a plain directory (repository.h).
walfmt::Result<RepoListing> ListAt(const RepoLocation& loc, const RemoteOptions& o);
walfmt::Result<CreateResult> CreateAt(const RepoLocation& loc, const CreateRequest& req, const RemoteOptions& o);
walfmt::Result<ExpireResult> ExpireAt(const RepoLocation& loc, uint64_t keep_full, bool dry_run,
                                      const RemoteOptions& o);
walfmt::Result<RepoCheckReport> CheckAt(const RepoLocation& loc, const RepoCheckOptions& opts, const RemoteOptions& o);
walfmt::Result<RepoRestoreResult> RestoreAt(const RepoLocation& loc, const RepoRestoreRequest& req,
                                            const RemoteOptions& o);

// `snapshot list`: the manifests (and each artifact's cluster.json, for its
// epoch) read from the bucket; leftovers are artifact prefixes without a
// manifest.json ("<name>/") and multipart uploads never completed. Artifact
// `dir`s are "s3://BUCKET/PREFIX<name>".
walfmt::Result<RepoListing> ListS3Repository(const std::string& url, const RemoteOptions& o);

// `snapshot create` into s3://... (req.repo): the lock taken, the artifact
// built in a private directory under TMPDIR from the bucket's manifests (and,
// for a synthetic full the repository serves, the serving chain), then
// uploaded object by object (multipart for large files, -j in parallel) with
// manifest.json last. A leftover of an interrupted create with the same name
// is removed first. The marker is created when the prefix is empty.
walfmt::Result<CreateResult> CreateS3Artifact(const CreateRequest& req, const RemoteOptions& o);

// `snapshot expire` on s3://...: the lock taken (not for a dry run); each
// removed artifact loses its manifest.json first (so an interruption leaves a
// leftover, never a half artifact under its name); every leftover is removed
// (the lock guarantees no create is running) with its open uploads.
walfmt::Result<ExpireResult> ExpireS3(const std::string& url, uint64_t keep_full, bool dry_run, const RemoteOptions& o);

// `snapshot check` on s3://...: the artifacts checked (O.name's chain, or
// every artifact) are downloaded into a private directory under TMPDIR and
// checked there exactly as a directory is; paths in the report name s3://.
walfmt::Result<RepoCheckReport> CheckS3Repository(const RepoCheckOptions& opts, const RemoteOptions& o);

// `restore --repo s3://...`: the target's chain downloaded into a private
// directory beside OUT (removed after, also on failure or a termination
// signal), then restored from there as from a directory.
walfmt::Result<RepoRestoreResult> RestoreFromS3(const RepoRestoreRequest& req, const RemoteOptions& o);

// Exclusive access of one writer to a repository (REPOSITORY.md, "One writer
// at a time"): a flock(2) on REPO/.walcut-lock.lock for a directory, the
// create-only object PREFIX/.walcut-lock for S3. Released when destroyed.
class RepoLock {
 public:
  virtual ~RepoLock() = default;
};
// A directory: kIo "locked by another writer (process P)" at once when held.
walfmt::Result<std::unique_ptr<RepoLock>> LockDirectory(const std::string& dir);

}  // namespace walcut::repo
