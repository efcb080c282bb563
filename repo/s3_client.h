// Internal to repo/: an S3 client (AWS S3 and S3-compatible stores: MinIO,
// Ceph RGW) over libcurl, whose AWS SigV4 signing (CURLOPT_AWS_SIGV4) signs
// every request; the payload's SHA-256 goes in x-amz-content-sha256, so the
// store checks the bytes it received. Foundation of `--repo s3://` (issue
// 30); the S3 repository (s3_store.h) uses it. See repo/REPOSITORY.md, "Object storage".
//
// Errors: walfmt::Status, one line naming s3://BUCKET/KEY, the operation, and
// the HTTP status with S3's error code, or curl's error. NotFound for a
// missing key, upload or bucket; InvalidArgument for a request the client
// refuses to send; Io for everything the store or the network answered.
//
// Retries (S3RetryPolicy): on 5xx (but 501, 505), 503 SlowDown, 429, 408 and
// S3's 400 RequestTimeout, on timeouts, refused connections and connection
// resets; never on another 4xx. Every operation is safe to repeat: objects
// are written once, and a conditional create that may have succeeded in an
// attempt that got no answer is checked (see PutObject).
//
// Thread-safe: calls may run on several threads at once (each takes an idle
// curl handle from a pool, so connections are kept alive between calls).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "repo/s3_config.h"
#include "walfmt/status.h"

namespace walcut::repo {

enum class S3PutMode : uint8_t {
  kOverwrite = 1,   // a plain PUT
  kCreateOnly = 2,  // If-None-Match: *: only when the key does not exist yet
};

enum class S3PutOutcome : uint8_t {
  kCreated = 1,
  kAlreadyExists = 2,  // kCreateOnly and the key exists (412 Precondition Failed)
};

struct S3ObjectInfo {
  std::string key;
  uint64_t size = 0;
  std::string etag;  // as the store sent it, quotes included
};

struct S3Listing {
  std::vector<S3ObjectInfo> objects;         // in key order
  std::vector<std::string> common_prefixes;  // with a delimiter: the "directories"
};

struct S3Part {
  int part_number = 0;  // 1..10000
  std::string etag;     // UploadPart's answer
};

struct S3Upload {
  std::string key;
  std::string upload_id;
  std::string initiated;  // ISO 8601, as the store sent it
};

// What the client counts (for tests and, later, metrics).
struct S3Stats {
  uint64_t requests = 0;  // attempts sent
  uint64_t retries = 0;   // attempts after a retryable failure
};

class S3Client {
 public:
  // curl_global_init happens once per process, on the first Create.
  static walfmt::Result<std::unique_ptr<S3Client>> Create(S3Config config);
  ~S3Client();
  S3Client(const S3Client&) = delete;
  S3Client& operator=(const S3Client&) = delete;

  // Writes `data` as the object. kCreateOnly sends If-None-Match: * and
  // answers kAlreadyExists on 412 Precondition Failed. An attempt of the same
  // call that got no answer (a reset, a timeout, a 5xx; or a resend curl
  // makes by itself when a kept-alive connection died) may have created the
  // object before the 412: so on 412 the object is read back (HEAD, then GET
  // when the size is ours) and the call answers kCreated when its bytes are
  // `data`. A creator whose bytes are its own (a lock holding a unique token)
  // thus always learns whether it won.
  walfmt::Result<S3PutOutcome> PutObject(const std::string& bucket, const std::string& key, std::string_view data,
                                         S3PutMode mode = S3PutMode::kOverwrite);
  walfmt::Result<std::string> GetObject(const std::string& bucket, const std::string& key);
  // `length` bytes from `offset`; the object must hold them all (else InvalidArgument).
  walfmt::Result<std::string> GetObjectRange(const std::string& bucket, const std::string& key, uint64_t offset,
                                             uint64_t length);
  // The same bytes written to `fd` (named `path` in messages) at file offset
  // `offset` as they arrive, never held in memory whole; a retried attempt
  // writes them again from the start.
  walfmt::Status GetObjectRangeToFile(const std::string& bucket, const std::string& key, uint64_t offset,
                                      uint64_t length, int fd, const std::string& path);
  // NotFound when the key does not exist.
  walfmt::Result<S3ObjectInfo> HeadObject(const std::string& bucket, const std::string& key);
  // Ok also when the key did not exist (as S3 answers).
  walfmt::Status DeleteObject(const std::string& bucket, const std::string& key);
  // Every page (ListObjectsV2, `page_size` keys a page, at most 1000).
  walfmt::Result<S3Listing> ListObjects(const std::string& bucket, const std::string& prefix,
                                        const std::string& delimiter = "", int page_size = 1000);

  // Multipart: each part but the last at least 5 MiB on AWS; parts may be
  // uploaded in any order and on several threads. The caller is the key's
  // one writer: when an attempt that got no answer (or a 5xx) may have begun
  // an upload too, every other open upload of the key is aborted, so that a
  // retried create leaves none behind.
  walfmt::Result<std::string> CreateMultipartUpload(const std::string& bucket, const std::string& key);
  walfmt::Result<S3Part> UploadPart(const std::string& bucket, const std::string& key, const std::string& upload_id,
                                    int part_number, std::string_view data);
  // `parts` in ascending part number. When the upload is gone (404), an
  // attempt without answer may have completed it: Ok when the object exists
  // with an ETag of as many parts ("...-N"). Keys are written once, so no
  // other upload completes the same key.
  walfmt::Status CompleteMultipartUpload(const std::string& bucket, const std::string& key,
                                         const std::string& upload_id, const std::vector<S3Part>& parts);
  // Ok also when the upload is gone already (404 NoSuchUpload).
  walfmt::Status AbortMultipartUpload(const std::string& bucket, const std::string& key, const std::string& upload_id);
  // The uploads begun and neither completed nor aborted, every page.
  walfmt::Result<std::vector<S3Upload>> ListMultipartUploads(const std::string& bucket, const std::string& prefix,
                                                             int page_size = 1000);

  // Creates the bucket (tests against a store that starts empty); Ok when it
  // exists already and is ours (409 BucketAlreadyOwnedByYou).
  walfmt::Status CreateBucket(const std::string& bucket);

  const S3Config& config() const;
  S3Stats stats() const;

  struct Impl;

 private:
  explicit S3Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace walcut::repo
