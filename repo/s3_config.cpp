#include "repo/s3_config.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace walcut::repo {

using walfmt::Result;
using walfmt::Status;

namespace {

constexpr size_t kMaxCredentialsFileBytes = 1 << 20;

bool BucketChar(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-'; }
bool AlnumLower(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

std::string Trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return "";
  const size_t e = s.find_last_not_of(" \t\r");
  return std::string(s.substr(b, e - b + 1));
}

std::string Encode(std::string_view s, bool keep_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
        c == '.' || c == '~' || (keep_slash && c == '/')) {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::optional<std::string> NonEmpty(const S3Env& env, const char* name) {
  auto v = env(name);
  if (v && v->empty()) return std::nullopt;
  return v;
}

// scheme://host[:port] with nothing after it but an optional "/".
Result<std::string> CheckEndpoint(std::string e, const std::string& from) {
  while (!e.empty() && e.back() == '/') e.pop_back();
  const size_t scheme_end = e.find("://");
  const std::string scheme = scheme_end == std::string::npos ? "" : e.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https") {
    return Status::InvalidArgument(fmt::format("{}: S3 endpoint '{}' must start with http:// or https://", from, e));
  }
  const std::string host = e.substr(scheme_end + 3);
  if (host.empty() || host.find_first_of("/?#@ \t") != std::string::npos) {
    return Status::InvalidArgument(
        fmt::format("{}: S3 endpoint '{}' must be scheme://host[:port], without a path, query or user", from, e));
  }
  return e;
}

Result<S3Credentials> CredentialsFromEnvironment(const S3Env& env, const std::string& profile) {
  auto id = NonEmpty(env, "AWS_ACCESS_KEY_ID");
  auto secret = NonEmpty(env, "AWS_SECRET_ACCESS_KEY");
  if (id && secret) {
    return S3Credentials{*id, *secret, NonEmpty(env, "AWS_SESSION_TOKEN").value_or(""), "environment"};
  }
  if (id || secret) {
    return Status::InvalidArgument(fmt::format("S3 credentials: {} is set but {} is not",
                                               id ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY",
                                               id ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID"));
  }
  std::string path;
  if (auto f = NonEmpty(env, "AWS_SHARED_CREDENTIALS_FILE")) {
    path = *f;
  } else if (auto home = NonEmpty(env, "HOME")) {
    path = *home + "/.aws/credentials";
  } else {
    return Status::InvalidArgument(
        "no S3 credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set, and neither "
        "AWS_SHARED_CREDENTIALS_FILE nor HOME is set to find a credentials file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Status::InvalidArgument(fmt::format(
        "no S3 credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set, and {} cannot be read", path));
  }
  std::string text(kMaxCredentialsFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxCredentialsFileBytes) {
    return Status::InvalidArgument(
        fmt::format("{}: larger than {} bytes, not a credentials file", path, kMaxCredentialsFileBytes));
  }
  return ParseSharedCredentials(text, path, profile);
}

}  // namespace

Result<S3Url> ParseS3Url(std::string_view url) {
  constexpr std::string_view kScheme = "s3://";
  const auto bad = [&](std::string_view why) {
    return Status::InvalidArgument(fmt::format("repository URL '{}': {}", url, why));
  };
  if (url.substr(0, kScheme.size()) != kScheme) return bad("must start with s3://");
  std::string_view rest = url.substr(kScheme.size());
  const size_t slash = rest.find('/');
  const std::string_view bucket = rest.substr(0, slash);
  std::string_view prefix = slash == std::string_view::npos ? "" : rest.substr(slash + 1);
  if (bucket.empty()) return bad("no bucket name after s3://");
  if (bucket.size() < 3 || bucket.size() > 63) return bad("a bucket name has 3 to 63 characters");
  for (const char c : bucket) {
    if (!BucketChar(c)) return bad("a bucket name has only lowercase letters, digits, '.' and '-'");
  }
  if (!AlnumLower(bucket.front()) || !AlnumLower(bucket.back())) {
    return bad("a bucket name starts and ends with a letter or digit");
  }
  if (bucket.find("..") != std::string_view::npos) return bad("a bucket name has no '..'");
  if (!prefix.empty() && prefix.front() == '/') return bad("the prefix starts with '/' (an empty path segment)");
  if (prefix.find("//") != std::string_view::npos) return bad("the prefix has an empty path segment ('//')");
  for (const char c : prefix) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return bad("the prefix has a control character");
  }
  if (prefix.size() > 512) return bad("the prefix is longer than 512 bytes");
  S3Url out{std::string(bucket), std::string(prefix)};
  if (!out.prefix.empty() && out.prefix.back() != '/') out.prefix += '/';
  for (const std::string_view seg : {std::string_view("./"), std::string_view("../")}) {
    if (out.prefix.substr(0, seg.size()) == seg || out.prefix.find("/" + std::string(seg)) != std::string::npos) {
      return bad("the prefix has a '.' or '..' path segment");
    }
  }
  return out;
}

S3Env ProcessEnvironment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());  // NOLINT(concurrency-mt-unsafe): read only
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

Result<S3Credentials> ParseSharedCredentials(std::string_view text, const std::string& path,
                                             const std::string& profile) {
  std::istringstream in{std::string(text)};
  std::string line;
  std::string section;
  bool found = false;
  S3Credentials c;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    const std::string t = Trim(line);
    if (t.empty() || t[0] == '#' || t[0] == ';') continue;
    if (t[0] == '[') {
      if (t.back() != ']')
        return Status::InvalidArgument(fmt::format("{}:{}: a section line without ']'", path, line_no));
      section = Trim(std::string_view(t).substr(1, t.size() - 2));
      found = found || section == profile;
      continue;
    }
    const size_t eq = t.find('=');
    if (eq == std::string::npos) {
      return Status::InvalidArgument(fmt::format("{}:{}: expected 'key = value'", path, line_no));
    }
    if (section != profile) continue;
    const std::string key = Trim(std::string_view(t).substr(0, eq));
    const std::string value = Trim(std::string_view(t).substr(eq + 1));
    if (key == "aws_access_key_id") c.access_key_id = value;
    if (key == "aws_secret_access_key") c.secret_access_key = value;
    if (key == "aws_session_token") c.session_token = value;
  }
  if (!found) {
    return Status::InvalidArgument(
        fmt::format("no S3 credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
                    "are not set, and {} has no profile [{}]",
                    path, profile));
  }
  for (const auto& [name, value] :
       {std::pair{"aws_access_key_id", &c.access_key_id}, std::pair{"aws_secret_access_key", &c.secret_access_key}}) {
    if (value->empty()) {
      return Status::InvalidArgument(fmt::format("{}, profile [{}]: no {}", path, profile, name));
    }
  }
  c.source = fmt::format("{} [profile {}]", path, profile);
  return c;
}

Result<S3Config> ResolveS3Config(const S3Options& options, const S3Env& env) {
  S3Config config;
  config.region = !options.region.empty()
                      ? options.region
                      : NonEmpty(env, "AWS_REGION").value_or(NonEmpty(env, "AWS_DEFAULT_REGION").value_or("us-east-1"));
  for (const char c : config.region) {
    if (!AlnumLower(c) && c != '-') {
      return Status::InvalidArgument(
          fmt::format("S3 region '{}': only lowercase letters, digits and '-'", config.region));
    }
  }
  std::string endpoint;
  std::string from;
  if (!options.endpoint.empty()) {
    endpoint = options.endpoint, from = "--s3-endpoint";
  } else if (auto e = NonEmpty(env, "AWS_ENDPOINT_URL_S3")) {
    endpoint = *e, from = "AWS_ENDPOINT_URL_S3";
  } else if (auto e2 = NonEmpty(env, "AWS_ENDPOINT_URL")) {
    endpoint = *e2, from = "AWS_ENDPOINT_URL";
  }
  if (endpoint.empty()) {
    config.endpoint = fmt::format("https://s3.{}.amazonaws.com", config.region);
    config.path_style = options.path_style.value_or(false);
  } else {
    auto checked = CheckEndpoint(endpoint, from);
    if (!checked.ok()) return checked.status();
    config.endpoint = std::move(checked.value());
    config.path_style = options.path_style.value_or(true);
  }
  const std::string profile =
      !options.profile.empty() ? options.profile : NonEmpty(env, "AWS_PROFILE").value_or("default");
  auto creds = CredentialsFromEnvironment(env, profile);
  if (!creds.ok()) return creds.status();
  config.credentials = std::move(creds.value());
  return config;
}

std::string S3EncodePath(std::string_view key) { return Encode(key, true); }
std::string S3EncodeQuery(std::string_view s) { return Encode(s, false); }

std::string S3ObjectUrl(const S3Config& config, const std::string& bucket, const std::string& key) {
  if (config.path_style) return fmt::format("{}/{}/{}", config.endpoint, bucket, S3EncodePath(key));
  const size_t host = config.endpoint.find("://") + 3;
  return fmt::format("{}{}.{}/{}", config.endpoint.substr(0, host), bucket, config.endpoint.substr(host),
                     S3EncodePath(key));
}

}  // namespace walcut::repo
