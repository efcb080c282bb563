// Internal to repo/: one S3 request over libcurl, signed (SigV4) and retried
// under the client's S3RetryPolicy; the body of S3Client (s3_client.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "repo/s3_client.h"
#include "repo/s3_config.h"
#include "walfmt/status.h"

namespace walcut::repo {

struct S3Request {
  const char* method = "GET";  // GET, HEAD, PUT, POST, DELETE
  std::string bucket;
  std::string key;                           // "" for a bucket request
  std::map<std::string, std::string> query;  // name -> value, not yet encoded
  std::string_view body;
  std::vector<std::string> headers;  // extra "Name: value" lines
  uint64_t max_response_bytes = 32 << 20;
  // A 2xx answer's body written to this file at `sink_offset` (pwrite, as it
  // arrives; each attempt from the start again) instead of kept in memory;
  // any other answer's body is kept as usual. `sink_path` names the file.
  int sink_fd = -1;
  uint64_t sink_offset = 0;
  std::string sink_path;
  bool error_in_200 = false;  // CompleteMultipartUpload: a 200 may carry <Error> (then retried as a 500)
};

struct S3Response {
  long status = 0;
  std::string body;
  std::string etag;
  std::string content_range;
  std::string content_length;
  long header_status = 0;   // the status line's code, as the headers arrive
  uint64_t sink_bytes = 0;  // body bytes written to sink_fd by the last attempt
  int attempts = 0;
  // An earlier attempt got no answer or a 5xx: it may have been applied.
  bool maybe_applied_before = false;
};

// "s3://BUCKET/KEY" for messages.
std::string S3Where(const std::string& bucket, const std::string& key);

// A non-2xx answer as one line: "s3://B/K: PUT: HTTP 403 SignatureDoesNotMatch: message (1 attempt)".
// NotFound for 404, Io otherwise.
walfmt::Status S3HttpError(const S3Request& req, const S3Response& resp);

struct S3Client::Impl {
  explicit Impl(S3Config c);
  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  // Sends `req`, retrying what is retryable. Any answer that is not retried
  // (2xx, 4xx) is returned as a response; a failure to get one (curl errors,
  // retries exhausted, a too large answer) as a Status.
  walfmt::Result<S3Response> Send(const S3Request& req);

  S3Config config;
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> retries{0};

 private:
  struct Attempt;
  void* Acquire();
  void Release(void* handle);
  uint32_t BackoffMs(int attempt);

  std::mutex mu_;
  std::vector<void*> idle_;  // CURL* handles
  std::mt19937_64 rng_;
};

}  // namespace walcut::repo
