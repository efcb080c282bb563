// Internal to repo/: where an S3 repository lives (s3://BUCKET/PREFIX) and
// how to reach it (endpoint, region, addressing, credentials, timeouts,
// retries), resolved from explicit options and the standard AWS environment
// variables and shared credentials file. Used by s3_client.h and, through
// --repo s3://... and --s3-endpoint / --s3-region, by the repository commands
// (remote.h).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "walfmt/status.h"

namespace walcut::repo {

// s3://BUCKET[/PREFIX]. The bucket follows S3's naming rules (3-63 of
// a-z 0-9 . -, starting and ending with a letter or digit); the prefix is the
// rest, without leading slash, "" when absent, and ends in "/" when not empty
// (so "s3://b/backups" and "s3://b/backups/" name the same place).
struct S3Url {
  std::string bucket;
  std::string prefix;
};
walfmt::Result<S3Url> ParseS3Url(std::string_view url);

struct S3Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // "" without one
  std::string source;         // where they came from, for messages: "environment", "FILE [profile P]"
};

// Bounded retries with jittered exponential backoff: attempt n (from 1) that
// failed in a retryable way waits a delay drawn in [d/2, d], d = min(max,
// base * 2^(n-1)), before attempt n+1; at most max_attempts attempts in all.
struct S3RetryPolicy {
  int max_attempts = 5;
  uint32_t base_delay_ms = 100;
  uint32_t max_delay_ms = 5000;
  uint64_t seed = 0;  // of the jitter; 0: a random one
};

struct S3Config {
  std::string endpoint;    // scheme://host[:port], no trailing slash
  std::string region;      // us-east-1 by default
  bool path_style = true;  // http://host/BUCKET/KEY, else http://BUCKET.host/KEY
  S3Credentials credentials;
  uint32_t connect_timeout_ms = 10000;
  uint32_t request_timeout_ms = 0;         // a whole request; 0: no limit (large objects)
  uint32_t idle_timeout_s = 60;            // no byte moved for this long: a timeout
  uint64_t max_object_bytes = 4ULL << 30;  // GetObject refuses larger answers
  S3RetryPolicy retry;
};

// What the command line says (--s3-endpoint, ...): each given one wins over
// the environment.
struct S3Options {
  std::string endpoint;            // else AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, else AWS's regional endpoint
  std::string region;              // else AWS_REGION, AWS_DEFAULT_REGION, else us-east-1
  std::optional<bool> path_style;  // else: path-style for an explicit endpoint, virtual-hosted for AWS's
  std::string profile;             // else AWS_PROFILE, else "default"
};

// Looks an environment variable up; nullopt when unset. Tests pass a map.
using S3Env = std::function<std::optional<std::string>(const std::string&)>;
S3Env ProcessEnvironment();

// Credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and
// AWS_SESSION_TOKEN) when set, else the profile's entries in the shared
// credentials file (AWS_SHARED_CREDENTIALS_FILE, else $HOME/.aws/credentials).
// An error names what is missing and where it was looked for.
walfmt::Result<S3Config> ResolveS3Config(const S3Options& options, const S3Env& env);

// The profile's credentials from the text of a shared credentials file (INI:
// [profile] sections, key = value lines, # and ; comments); `path` is for messages.
walfmt::Result<S3Credentials> ParseSharedCredentials(std::string_view text, const std::string& path,
                                                     const std::string& profile);

// The key as it goes in a URL path and in SigV4's canonical URI: every byte
// but A-Z a-z 0-9 - _ . ~ and / percent-encoded (uppercase hex).
std::string S3EncodePath(std::string_view key);
// A query parameter's name or value: as above, "/" encoded too.
std::string S3EncodeQuery(std::string_view s);

// The URL of BUCKET/KEY (KEY may be ""), before the query string.
std::string S3ObjectUrl(const S3Config& config, const std::string& bucket, const std::string& key);

}  // namespace walcut::repo
