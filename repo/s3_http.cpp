#include "repo/s3_http.h"

#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "repo/curl_api.h"
#include "repo/s3_xml.h"

namespace walcut::repo {

using walfmt::Result;
using walfmt::Status;

namespace {

std::string Sha256Hex(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  std::string out;
  for (unsigned i = 0; i < len; ++i) out += fmt::format("{:02x}", md[i]);
  return out;
}

// What may go in a one-line message from a server: printable ASCII, at most 200 bytes.
std::string Printable(std::string_view s) {
  std::string out;
  for (const char c : s.substr(0, 200)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (s.size() > 200) out += "...";
  return out;
}

struct Sink {
  std::string* out;
  uint64_t max;
  S3Response* resp = nullptr;
  int fd = -1;  // a 2xx body goes here, at offset + resp->sink_bytes
  uint64_t offset = 0;
  bool overflow = false;
  int write_errno = 0;
};

size_t WriteCb(char* p, size_t size, size_t n, void* ud) {
  auto* sink = static_cast<Sink*>(ud);
  const size_t len = size * n;
  const long status = sink->resp->header_status;
  if (sink->fd >= 0 && status >= 200 && status < 300) {
    uint64_t& done = sink->resp->sink_bytes;
    if (done + len > sink->max) {
      sink->overflow = true;
      return 0;
    }
    size_t put = 0;
    while (put < len) {
      const ssize_t w = ::pwrite(sink->fd, p + put, len - put, static_cast<off_t>(sink->offset + done + put));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        sink->write_errno = w < 0 ? errno : ENOSPC;
        return 0;
      }
      put += static_cast<size_t>(w);
    }
    done += len;
    return len;
  }
  if (sink->out->size() + len > sink->max) {
    sink->overflow = true;
    return 0;
  }
  sink->out->append(p, len);
  return len;
}

struct Source {
  std::string_view data;
  size_t pos = 0;
};

size_t ReadCb(char* p, size_t size, size_t n, void* ud) {
  auto* src = static_cast<Source*>(ud);
  const size_t len = std::min(size * n, src->data.size() - src->pos);
  std::memcpy(p, src->data.data() + src->pos, len);
  src->pos += len;
  return len;
}

// Lets curl resend the body (a retry of its own on a reused connection that died).
int SeekCb(void* ud, curl_off_t offset, int origin) {
  auto* src = static_cast<Source*>(ud);
  if (origin != SEEK_SET || offset < 0 || static_cast<uint64_t>(offset) > src->data.size()) return CURL_SEEKFUNC_FAIL;
  src->pos = static_cast<size_t>(offset);
  return CURL_SEEKFUNC_OK;
}

size_t HeaderCb(char* p, size_t size, size_t n, void* ud) {
  auto* resp = static_cast<S3Response*>(ud);
  const std::string_view line(p, size * n);
  if (line.substr(0, 5) == "HTTP/") {  // a new answer (after a 100 Continue): forget the last one's headers
    resp->etag.clear(), resp->content_range.clear(), resp->content_length.clear();
    const size_t sp = line.find(' ');
    resp->header_status = sp == std::string_view::npos ? 0 : std::atol(std::string(line.substr(sp + 1, 3)).c_str());
  }
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return size * n;
  std::string name(line.substr(0, colon));
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  std::string_view value = line.substr(colon + 1);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' '))
    value.remove_suffix(1);
  if (value.size() > 1024) return size * n;  // no header we read is that long
  if (name == "etag") resp->etag = value;
  if (name == "content-range") resp->content_range = value;
  if (name == "content-length") resp->content_length = value;
  return size * n;
}

bool RetryableCurl(CURLcode c) {
  switch (c) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return true;
    default:
      return false;
  }
}

std::string ErrorCode(const std::string& body) {
  auto xml = ParseXml(body, XmlLimits{1 << 20, 4, 64});
  if (!xml.ok() || xml->name != "Error") return "";
  return xml->ChildText("Code");
}

bool RetryableHttp(long status, const std::string& body) {
  if (status >= 500) return status != 501 && status != 505;
  if (status == 429 || status == 408) return true;
  return status == 400 && ErrorCode(body) == "RequestTimeout";
}

std::string CanonicalQuery(const std::map<std::string, std::string>& q) {
  // Sorted by name (std::map), every value with its "=": SigV4's canonical
  // form, which curl's signer then uses as it is.
  std::string out;
  for (const auto& [k, v] : q) {
    if (!out.empty()) out += '&';
    out += S3EncodeQuery(k) + "=" + S3EncodeQuery(v);
  }
  return out;
}

std::string Plural(int n) { return fmt::format("{} attempt{}", n, n == 1 ? "" : "s"); }

// One attempt's options (curl_easy_reset keeps the connections).
void SetOptions(CURL* h, const S3Config& config, const S3Request& req, const std::string& url, const std::string& sigv4,
                curl_slist* list, char* error, Sink* sink, Source* src, S3Response* resp) {
  const std::string_view method = req.method;
  Curl().easy_reset(h);
  Curl().easy_setopt(h, CURLOPT_URL, url.c_str());
  Curl().easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  Curl().easy_setopt(h, CURLOPT_PATH_AS_IS, 1L);
  Curl().easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  Curl().easy_setopt(h, CURLOPT_AWS_SIGV4, sigv4.c_str());
  Curl().easy_setopt(h, CURLOPT_USERNAME, config.credentials.access_key_id.c_str());
  Curl().easy_setopt(h, CURLOPT_PASSWORD, config.credentials.secret_access_key.c_str());
  Curl().easy_setopt(h, CURLOPT_HTTPHEADER, list);
  Curl().easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(config.connect_timeout_ms));
  Curl().easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(config.request_timeout_ms));
  Curl().easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
  Curl().easy_setopt(h, CURLOPT_LOW_SPEED_TIME, static_cast<long>(config.idle_timeout_s));
  Curl().easy_setopt(h, CURLOPT_ERRORBUFFER, error);
  Curl().easy_setopt(h, CURLOPT_WRITEFUNCTION, WriteCb);
  Curl().easy_setopt(h, CURLOPT_WRITEDATA, sink);
  Curl().easy_setopt(h, CURLOPT_HEADERFUNCTION, HeaderCb);
  Curl().easy_setopt(h, CURLOPT_HEADERDATA, resp);
  if (method == "HEAD") {
    Curl().easy_setopt(h, CURLOPT_NOBODY, 1L);
  } else if (method == "PUT") {
    Curl().easy_setopt(h, CURLOPT_UPLOAD, 1L);
    Curl().easy_setopt(h, CURLOPT_READFUNCTION, ReadCb);
    Curl().easy_setopt(h, CURLOPT_READDATA, src);
    Curl().easy_setopt(h, CURLOPT_SEEKFUNCTION, SeekCb);
    Curl().easy_setopt(h, CURLOPT_SEEKDATA, src);
    Curl().easy_setopt(h, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
  } else if (method == "POST") {
    Curl().easy_setopt(h, CURLOPT_POST, 1L);
    Curl().easy_setopt(h, CURLOPT_POSTFIELDS, req.body.data());
    Curl().easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
  } else if (method != "GET") {
    Curl().easy_setopt(h, CURLOPT_CUSTOMREQUEST, req.method);
  }
}

}  // namespace

std::string S3Where(const std::string& bucket, const std::string& key) {
  return fmt::format("s3://{}/{}", bucket, key);
}

Status S3HttpError(const S3Request& req, const S3Response& resp) {
  std::string code;
  std::string message;
  auto xml = ParseXml(resp.body, XmlLimits{1 << 20, 4, 64});
  if (xml.ok() && xml->name == "Error") code = xml->ChildText("Code"), message = xml->ChildText("Message");
  std::string line = fmt::format("{}: {}: HTTP {}", S3Where(req.bucket, req.key), req.method, resp.status);
  if (!code.empty()) line += " " + Printable(code);
  if (!message.empty()) line += ": " + Printable(message);
  line += fmt::format(" ({})", Plural(resp.attempts));
  if (resp.status == 404) return Status::NotFound(line);
  return Status::Io(line);
}

struct S3Client::Impl::Attempt {
  CURLcode code = CURLE_OK;
  char error[CURL_ERROR_SIZE] = {};
  bool overflow = false;
};

S3Client::Impl::Impl(S3Config c) : config(std::move(c)) {
  rng_.seed(config.retry.seed != 0 ? config.retry.seed : std::random_device{}());
}

S3Client::Impl::~Impl() {
  for (void* h : idle_) Curl().easy_cleanup(static_cast<CURL*>(h));
}

void* S3Client::Impl::Acquire() {
  {
    std::lock_guard lock(mu_);
    if (!idle_.empty()) {
      void* h = idle_.back();
      idle_.pop_back();
      return h;
    }
  }
  return Curl().easy_init();
}

void S3Client::Impl::Release(void* handle) {
  std::lock_guard lock(mu_);
  idle_.push_back(handle);
}

uint32_t S3Client::Impl::BackoffMs(int attempt) {
  const auto& r = config.retry;
  uint64_t d = r.base_delay_ms;
  for (int i = 1; i < attempt && d < r.max_delay_ms; ++i) d *= 2;
  d = std::min<uint64_t>(d, r.max_delay_ms);
  std::lock_guard lock(mu_);
  return static_cast<uint32_t>(std::uniform_int_distribution<uint64_t>(d / 2, d)(rng_));
}

Result<S3Response> S3Client::Impl::Send(const S3Request& req) {
  const std::string query = CanonicalQuery(req.query);
  const std::string url = S3ObjectUrl(config, req.bucket, req.key) + (query.empty() ? "" : "?" + query);
  const std::string sigv4 = "aws:amz:" + config.region + ":s3";
  std::vector<std::string> headers = req.headers;
  headers.push_back("x-amz-content-sha256: " + Sha256Hex(req.body));
  if (std::string_view(req.method) == "PUT" || std::string_view(req.method) == "POST")
    headers.emplace_back("Content-Type: application/octet-stream");
  if (!config.credentials.session_token.empty()) {
    headers.push_back("x-amz-security-token: " + config.credentials.session_token);
  }
  curl_slist* list = nullptr;
  for (const auto& h : headers) list = Curl().slist_append(list, h.c_str());
  S3Response resp;
  const int max_attempts = std::max(1, config.retry.max_attempts);
  std::string last_failure;
  CURL* h = static_cast<CURL*>(Acquire());
  if (h == nullptr) {
    Curl().slist_free_all(list);
    return Status::Internal(fmt::format("{}: {}: curl_easy_init failed", S3Where(req.bucket, req.key), req.method));
  }
  for (int attempt = 1;; ++attempt) {
    resp.body.clear();
    resp.attempts = attempt;
    resp.header_status = 0;
    resp.sink_bytes = 0;
    Attempt a;
    Sink sink{&resp.body, req.max_response_bytes, &resp, req.sink_fd, req.sink_offset};
    Source src{req.body};
    SetOptions(h, config, req, url, sigv4, list, a.error, &sink, &src, &resp);
    ++requests;
    a.code = Curl().easy_perform(h);
    bool retry = false;
    if (a.code != CURLE_OK) {
      if (sink.write_errno != 0) {
        Release(h);
        Curl().slist_free_all(list);
        return Status::Io(fmt::format("{}: cannot write: {}", req.sink_path, std::strerror(sink.write_errno)));
      }
      if (sink.overflow) {
        Release(h);
        Curl().slist_free_all(list);
        return Status::Io(fmt::format("{}: {}: the answer is larger than {} bytes", S3Where(req.bucket, req.key),
                                      req.method, req.max_response_bytes));
      }
      retry = RetryableCurl(a.code);
      resp.maybe_applied_before = resp.maybe_applied_before || a.code != CURLE_COULDNT_CONNECT;
      last_failure = fmt::format("curl error {} ({})", static_cast<int>(a.code),
                                 Printable(a.error[0] != 0 ? a.error : Curl().easy_strerror(a.code)));
    } else {
      Curl().easy_getinfo(h, CURLINFO_RESPONSE_CODE, &resp.status);
      const bool error_200 = req.error_in_200 && resp.status == 200 && !ErrorCode(resp.body).empty();
      if (!error_200 && !RetryableHttp(resp.status, resp.body)) break;
      retry = true;
      resp.maybe_applied_before = resp.maybe_applied_before || resp.status >= 500 || error_200;
      const std::string code = ErrorCode(resp.body);
      last_failure = fmt::format("HTTP {}{}", resp.status, code.empty() ? "" : " " + Printable(code));
    }
    if (!retry || attempt >= max_attempts) {
      Release(h);
      Curl().slist_free_all(list);
      return Status::Io(fmt::format("{}: {}: {} ({}{})", S3Where(req.bucket, req.key), req.method, last_failure,
                                    Plural(attempt), retry ? ", giving up" : ""));
    }
    ++retries;
    std::this_thread::sleep_for(std::chrono::milliseconds(BackoffMs(attempt)));
  }
  Release(h);
  Curl().slist_free_all(list);
  return resp;
}

}  // namespace walcut::repo
