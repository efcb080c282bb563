// Internal to repo/: the objects of an S3 repository (remote.h,
// REPOSITORY.md "Object storage"): its listing grouped by artifact, files
// moved between the bucket and local directories with bounded memory
// (downloads in ranged pieces, uploads of large files as multipart uploads
// with parts sent on several threads), deletions, and the lock object.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "repo/remote.h"
#include "repo/s3_client.h"
#include "repo/s3_config.h"
#include "walfmt/status.h"

namespace walcut::repo {

inline constexpr const char* kS3LockObject = ".walcut-lock";  // PREFIX/.walcut-lock

// Transfer sizes: a file larger than `multipart_threshold` goes up as a
// multipart upload of `part_bytes` parts (S3 needs at least 5 MiB but for the
// last); downloads read `piece_bytes` at a time. Memory: one part or piece per
// thread.
struct S3Transfer {
  uint64_t multipart_threshold = 16ULL << 20;
  uint64_t part_bytes = 8ULL << 20;
  uint64_t piece_bytes = 8ULL << 20;
};

struct S3Repo {
  std::unique_ptr<S3Client> client;
  S3Url url;
  std::string display;  // "s3://BUCKET/PREFIX" without the trailing "/"
  unsigned jobs = 1;
  S3Transfer transfer;

  std::string Key(const std::string& rel) const { return url.prefix + rel; }
  std::string Where(const std::string& rel) const { return display + "/" + rel; }
};
walfmt::Result<S3Repo> OpenS3Repo(const std::string& url, const RemoteOptions& o);

// The bucket's objects under PREFIX, by what they are.
struct S3RepoObjects {
  bool has_marker = false;
  bool has_lock = false;
  // Artifact name -> its objects (S3ObjectInfo.key relative to PREFIX<name>/).
  std::map<std::string, std::vector<S3ObjectInfo>> artifacts;
  std::vector<std::string> others;  // other keys directly under PREFIX (relative)
  std::vector<S3Upload> uploads;    // multipart uploads begun and never completed
  bool Complete(const std::string& name) const;
  // Artifact prefixes without a manifest.json, and names that only have an
  // open upload ("<name>/"): what an interrupted create or expire left; an
  // open upload under a whole artifact is named by its key ("<name>/<path>"),
  // never as the artifact.
  std::vector<std::string> Leftovers() const;
};
walfmt::Result<S3RepoObjects> ListS3Objects(const S3Repo& r);

// Runs f(0..n-1) on up to `jobs` threads; the first error wins (the rest still run).
walfmt::Status ParallelFor(size_t n, unsigned jobs, const std::function<walfmt::Status(size_t)>& f);

// Bytes [offset, offset + length) of the file `fd` (named `path` in
// messages) for an upload: mapped from the page cache (no zeroed buffer, no
// copy), else, when it cannot be mapped, read into memory. A file shorter
// than offset + length is an error (kIo), never a SIGBUS.
class FileRange {
 public:
  FileRange() = default;
  FileRange(const FileRange&) = delete;
  FileRange& operator=(const FileRange&) = delete;
  ~FileRange();
  walfmt::Status Open(int fd, uint64_t offset, uint64_t length, const std::string& path);
  std::string_view view() const { return view_; }

 private:
  void* map_ = nullptr;
  size_t map_len_ = 0;
  std::string copy_;
  std::string_view view_;
};

// The object `key` (of `size` bytes) into a new file `path`, piece by piece.
walfmt::Status DownloadToFile(const S3Repo& r, const std::string& key, uint64_t size, const std::string& path);
// Every object of artifact `name` into DIR/<name>/ (parallel over objects).
// A key with an empty, "." or ".." path segment is refused (kCorruption).
walfmt::Status DownloadArtifact(const S3Repo& r, const S3RepoObjects& objs, const std::string& name,
                                const std::string& dir);
// The file `path` as the object `key`: one PUT, or a multipart upload whose
// parts go up on r.jobs threads (aborted when a part fails).
walfmt::Status UploadFile(const S3Repo& r, const std::string& key, const std::string& path, unsigned jobs);
// The files of `m` built in `dir` as objects under PREFIX/<rel_dir> (small
// ones on r.jobs threads, then each large one in parallel parts), but those in
// `uploaded` (gone up already), and manifest.json last with a create-only PUT:
// its outcome is returned (kAlreadyExists: one of that key was there).
walfmt::Result<S3PutOutcome> UploadTree(const S3Repo& r, const std::string& rel_dir, const Manifest& m,
                                        const std::string& dir, const std::set<std::string>& uploaded = {});
// Aborts the open uploads of the key `rel` (relative to PREFIX).
walfmt::Status AbortUploadsOf(const S3Repo& r, const S3RepoObjects& objs, const std::string& rel);
// Every object of artifact `name`, manifest.json first (so that an
// interruption leaves a leftover, never an artifact missing files), and its
// open uploads.
walfmt::Status DeleteArtifactObjects(const S3Repo& r, const S3RepoObjects& objs, const std::string& name);

// The S3 lock (REPOSITORY.md, "One writer at a time").
walfmt::Result<std::unique_ptr<RepoLock>> LockS3(const S3Repo& r, bool break_lock, const std::string& command);

// `st` with every occurrence of `from` in its message replaced by `to` (a
// private directory's path by the s3:// location it mirrors).
walfmt::Status Renamed(const walfmt::Status& st, const std::string& from, const std::string& to);
std::string ReplaceAll(std::string s, const std::string& from, const std::string& to);
// The same in every path and message of a check's report.
void RenameReport(RepoCheckReport& rep, const std::string& from, const std::string& to);
// OUT's manifest.json naming the repository `to` instead of the private
// directory `from` it was restored from ("repository.dir").
walfmt::Status FixRestoredRepositoryDir(const std::string& out, const std::string& from, const std::string& to);

}  // namespace walcut::repo
