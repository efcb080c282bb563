#include "repo/s3_client.h"

#include <algorithm>

#include <fmt/format.h>

#include "repo/curl_api.h"
#include "repo/s3_http.h"
#include "repo/s3_xml.h"

namespace walcut::repo {

using walfmt::Result;
using walfmt::Status;

namespace {

// Bounds on what a listing may make us do, against a store that never stops.
constexpr int kMaxPages = 1000000;
constexpr size_t kMaxTokenBytes = 4096;

Status Malformed(const S3Request& req, const std::string& why) {
  return Status::Io(fmt::format("{}: {}: malformed answer: {}", S3Where(req.bucket, req.key), req.method, why));
}

S3Request Request(const char* method, const std::string& bucket, const std::string& key = "",
                  std::string_view body = {}) {
  S3Request r;
  r.method = method;
  r.bucket = bucket;
  r.key = key;
  r.body = body;
  return r;
}

bool Is2xx(const S3Response& r) { return r.status >= 200 && r.status < 300; }

// The answer's XML root, which must be named `root`.
Result<XmlElement> Root(const S3Request& req, const S3Response& resp, std::string_view root) {
  auto xml = ParseXml(resp.body);
  if (!xml.ok()) return Malformed(req, xml.status().message());
  if (xml->name != root) return Malformed(req, fmt::format("root element <{}>, expected <{}>", xml->name, root));
  return xml;
}

Result<bool> Truncated(const S3Request& req, const XmlElement& root) {
  const std::string t = root.ChildText("IsTruncated");
  if (t != "true" && t != "false") return Malformed(req, "IsTruncated is neither true nor false");
  return t == "true";
}

std::string XmlEscape(std::string_view s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace

Result<std::unique_ptr<S3Client>> S3Client::Create(S3Config config) {
  if (Status st = LoadCurl(); !st.ok()) return st;
  if (config.credentials.access_key_id.empty() || config.credentials.secret_access_key.empty()) {
    return Status::InvalidArgument("S3 client: no credentials");
  }
  return std::unique_ptr<S3Client>(new S3Client(std::make_unique<Impl>(std::move(config))));
}

S3Client::S3Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
S3Client::~S3Client() = default;
const S3Config& S3Client::config() const { return impl_->config; }
S3Stats S3Client::stats() const { return S3Stats{impl_->requests.load(), impl_->retries.load()}; }

Result<S3PutOutcome> S3Client::PutObject(const std::string& bucket, const std::string& key, std::string_view data,
                                         S3PutMode mode) {
  S3Request req = Request("PUT", bucket, key, data);
  if (mode == S3PutMode::kCreateOnly) req.headers.emplace_back("If-None-Match: *");
  auto resp = impl_->Send(req);
  if (!resp.ok()) return resp.status();
  if (Is2xx(*resp)) return S3PutOutcome::kCreated;
  if (resp->status != 412 || mode != S3PutMode::kCreateOnly) return S3HttpError(req, *resp);
  // Did this call create it? An attempt that got no answer (ours, or curl's
  // own resend on a reused connection, which we cannot see) may have. Then
  // the object's bytes are ours; a creator's bytes are unique to it.
  auto head = HeadObject(bucket, key);
  if (head.status().code() == walfmt::ErrorCode::kNotFound) return S3PutOutcome::kAlreadyExists;  // and gone again
  if (!head.ok()) return head.status();
  if (head->size != data.size()) return S3PutOutcome::kAlreadyExists;
  auto got = GetObject(bucket, key);
  if (got.status().code() == walfmt::ErrorCode::kNotFound) return S3PutOutcome::kAlreadyExists;
  if (!got.ok()) return got.status();
  return *got == data ? S3PutOutcome::kCreated : S3PutOutcome::kAlreadyExists;
}

Result<std::string> S3Client::GetObject(const std::string& bucket, const std::string& key) {
  S3Request req = Request("GET", bucket, key);
  req.max_response_bytes = impl_->config.max_object_bytes;
  auto resp = impl_->Send(req);
  if (!resp.ok()) return resp.status();
  if (resp->status != 200) return S3HttpError(req, *resp);
  return std::move(resp->body);
}

namespace {

Status CheckRangeArgs(const std::string& where, uint64_t offset, uint64_t length, uint64_t max_object_bytes) {
  if (length == 0 || offset > UINT64_MAX - length || length > max_object_bytes) {
    return Status::InvalidArgument(
        fmt::format("{}: GET: a byte range of {} bytes at {} is not readable", where, length, offset));
  }
  return Status::Ok();
}

// The answer to a GET of bytes [offset, offset + length): a 206 of exactly
// those bytes (`got` of them received), else why not.
Status CheckRangeAnswer(const S3Request& req, const S3Response& resp, uint64_t offset, uint64_t length, uint64_t got) {
  const std::string where = S3Where(req.bucket, req.key);
  const uint64_t last = offset + length - 1;
  if (resp.status == 416) {
    return Status::InvalidArgument(
        fmt::format("{}: GET: bytes {}-{} are beyond the object's end (HTTP 416)", where, offset, last));
  }
  if (resp.status != 206) return S3HttpError(req, resp);
  const std::string want = fmt::format("bytes {}-{}/", offset, last);
  if (resp.content_range.rfind(want, 0) != 0 || got != length) {
    if (resp.content_range.rfind(fmt::format("bytes {}-", offset), 0) == 0 && got < length) {
      return Status::InvalidArgument(fmt::format("{}: GET: bytes {}-{} are beyond the object's end ({})", where, offset,
                                                 last, resp.content_range));
    }
    return Malformed(req, fmt::format("asked bytes {}-{}, got {} bytes with Content-Range '{}'", offset, last, got,
                                      resp.content_range.substr(0, 100)));
  }
  return Status::Ok();
}

}  // namespace

Result<std::string> S3Client::GetObjectRange(const std::string& bucket, const std::string& key, uint64_t offset,
                                             uint64_t length) {
  if (Status st = CheckRangeArgs(S3Where(bucket, key), offset, length, impl_->config.max_object_bytes); !st.ok())
    return st;
  // Room for an error's XML too; a 206 of another length is refused.
  S3Request req = Request("GET", bucket, key);
  req.max_response_bytes = std::max<uint64_t>(length, 1 << 16);
  req.headers.push_back(fmt::format("Range: bytes={}-{}", offset, offset + length - 1));
  auto resp = impl_->Send(req);
  if (!resp.ok()) return resp.status();
  if (Status st = CheckRangeAnswer(req, *resp, offset, length, resp->body.size()); !st.ok()) return st;
  return std::move(resp->body);
}

Status S3Client::GetObjectRangeToFile(const std::string& bucket, const std::string& key, uint64_t offset,
                                      uint64_t length, int fd, const std::string& path) {
  if (Status st = CheckRangeArgs(S3Where(bucket, key), offset, length, impl_->config.max_object_bytes); !st.ok())
    return st;
  S3Request req = Request("GET", bucket, key);
  req.max_response_bytes = std::max<uint64_t>(length, 1 << 16);
  req.headers.push_back(fmt::format("Range: bytes={}-{}", offset, offset + length - 1));
  req.sink_fd = fd;
  req.sink_offset = offset;
  req.sink_path = path;
  auto resp = impl_->Send(req);
  if (!resp.ok()) return resp.status();
  return CheckRangeAnswer(req, *resp, offset, length, resp->sink_bytes);
}

Result<S3ObjectInfo> S3Client::HeadObject(const std::string& bucket, const std::string& key) {
  S3Request req = Request("HEAD", bucket, key);
  auto resp = impl_->Send(req);
  if (!resp.ok()) return resp.status();
  if (resp->status == 404) return Status::NotFound(fmt::format("{}: no such object (HTTP 404)", S3Where(bucket, key)));
  if (resp->status != 200) return S3HttpError(req, *resp);
  S3ObjectInfo info{key, 0, resp->etag};
  if (!ParseXmlUint(resp->content_length, info.size)) return Malformed(req, "no Content-Length");
  return info;
}

Status S3Client::DeleteObject(const std::string& bucket, const std::string& key) {
  S3Request req = Request("DELETE", bucket, key);
  auto resp = impl_->Send(req);
  if (!resp.ok()) return resp.status();
  if (!Is2xx(*resp)) return S3HttpError(req, *resp);
  return Status::Ok();
}

Result<S3Listing> S3Client::ListObjects(const std::string& bucket, const std::string& prefix,
                                        const std::string& delimiter, int page_size) {
  S3Listing out;
  std::string token;
  for (int page = 0;; ++page) {
    S3Request req = Request("GET", bucket);
    req.query = {{"list-type", "2"}, {"max-keys", std::to_string(std::clamp(page_size, 1, 1000))}, {"prefix", prefix}};
    if (!delimiter.empty()) req.query["delimiter"] = delimiter;
    if (!token.empty()) req.query["continuation-token"] = token;
    if (page >= kMaxPages) return Malformed(req, fmt::format("more than {} pages", kMaxPages));
    auto resp = impl_->Send(req);
    if (!resp.ok()) return resp.status();
    if (resp->status != 200) return S3HttpError(req, *resp);
    auto root = Root(req, *resp, "ListBucketResult");
    if (!root.ok()) return root.status();
    for (const auto& c : root->children) {
      if (c.name == "Contents") {
        S3ObjectInfo o{c.ChildText("Key"), 0, c.ChildText("ETag")};
        if (o.key.empty()) return Malformed(req, "a <Contents> without <Key>");
        if (!ParseXmlUint(c.ChildText("Size"), o.size)) {
          return Malformed(req, fmt::format("key '{}': <Size> is not a number", o.key.substr(0, 200)));
        }
        out.objects.push_back(std::move(o));
      } else if (c.name == "CommonPrefixes") {
        std::string p = c.ChildText("Prefix");
        if (p.empty()) return Malformed(req, "a <CommonPrefixes> without <Prefix>");
        out.common_prefixes.push_back(std::move(p));
      }
    }
    auto truncated = Truncated(req, *root);
    if (!truncated.ok()) return truncated.status();
    if (!*truncated) return out;
    std::string next = root->ChildText("NextContinuationToken");
    if (next.empty() || next.size() > kMaxTokenBytes || next == token) {
      return Malformed(req, "truncated without a new NextContinuationToken");
    }
    token = std::move(next);
  }
}

Result<std::string> S3Client::CreateMultipartUpload(const std::string& bucket, const std::string& key) {
  S3Request req = Request("POST", bucket, key);
  req.query = {{"uploads", ""}};
  auto resp = impl_->Send(req);
  if (!resp.ok()) return resp.status();
  if (resp->status != 200) return S3HttpError(req, *resp);
  auto root = Root(req, *resp, "InitiateMultipartUploadResult");
  if (!root.ok()) return root.status();
  std::string id = root->ChildText("UploadId");
  if (id.empty() || id.size() > kMaxTokenBytes) return Malformed(req, "no UploadId");
  if (resp->maybe_applied_before) {
    // An earlier attempt (reset, 5xx) may have begun an upload that nobody
    // would complete: abort the key's other open uploads (best effort; what
    // stays open is a leftover that `expire` aborts).
    auto open = ListMultipartUploads(bucket, key);
    if (open.ok()) {
      for (const auto& u : *open) {
        if (u.key == key && u.upload_id != id) (void)AbortMultipartUpload(bucket, key, u.upload_id);
      }
    }
  }
  return id;
}

Result<S3Part> S3Client::UploadPart(const std::string& bucket, const std::string& key, const std::string& upload_id,
                                    int part_number, std::string_view data) {
  if (part_number < 1 || part_number > 10000) {
    return Status::InvalidArgument(
        fmt::format("{}: part number {} is not in 1..10000", S3Where(bucket, key), part_number));
  }
  S3Request req = Request("PUT", bucket, key, data);
  req.query = {{"partNumber", std::to_string(part_number)}, {"uploadId", upload_id}};
  auto resp = impl_->Send(req);
  if (!resp.ok()) return resp.status();
  if (resp->status != 200) return S3HttpError(req, *resp);
  if (resp->etag.empty()) return Malformed(req, fmt::format("part {}: no ETag", part_number));
  return S3Part{part_number, resp->etag};
}

Status S3Client::CompleteMultipartUpload(const std::string& bucket, const std::string& key,
                                         const std::string& upload_id, const std::vector<S3Part>& parts) {
  std::string body = "<CompleteMultipartUpload>";
  int previous = 0;
  for (const auto& p : parts) {
    if (p.part_number <= previous || p.part_number > 10000) {
      return Status::InvalidArgument(
          fmt::format("{}: parts must be in ascending order, 1..10000 (part {})", S3Where(bucket, key), p.part_number));
    }
    previous = p.part_number;
    body += fmt::format("<Part><PartNumber>{}</PartNumber><ETag>{}</ETag></Part>", p.part_number, XmlEscape(p.etag));
  }
  body += "</CompleteMultipartUpload>";
  if (parts.empty()) return Status::InvalidArgument(fmt::format("{}: no parts to complete", S3Where(bucket, key)));
  S3Request req = Request("POST", bucket, key, body);
  req.error_in_200 = true;
  req.query = {{"uploadId", upload_id}};
  auto resp = impl_->Send(req);
  if (!resp.ok()) return resp.status();
  if (resp->status == 404) {
    // An attempt that got no answer (ours, or curl's own resend) may have
    // completed it: then the object is there, made of as many parts.
    auto head = HeadObject(bucket, key);
    if (head.ok() && head->etag.size() > 2 && head->etag.ends_with(fmt::format("-{}\"", parts.size()))) {
      return Status::Ok();
    }
  }
  if (resp->status != 200) return S3HttpError(req, *resp);
  // moto answers <CompleteMultipartUploadResponse>; AWS, MinIO and Ceph <CompleteMultipartUploadResult>.
  auto xml = ParseXml(resp->body);
  if (xml.ok() && xml->name == "CompleteMultipartUploadResponse") return Status::Ok();
  auto root = Root(req, *resp, "CompleteMultipartUploadResult");
  if (!root.ok()) return root.status();
  return Status::Ok();
}

Status S3Client::AbortMultipartUpload(const std::string& bucket, const std::string& key, const std::string& upload_id) {
  S3Request req = Request("DELETE", bucket, key);
  req.query = {{"uploadId", upload_id}};
  auto resp = impl_->Send(req);
  if (!resp.ok()) return resp.status();
  if (resp->status == 404) return Status::Ok();  // gone: never begun, or aborted (by an attempt without answer)
  if (!Is2xx(*resp)) return S3HttpError(req, *resp);
  return Status::Ok();
}

Status S3Client::CreateBucket(const std::string& bucket) {
  S3Request req = Request("PUT", bucket);
  auto resp = impl_->Send(req);
  if (!resp.ok()) return resp.status();
  if (Is2xx(*resp) || (resp->status == 409 && resp->body.find("BucketAlreadyOwnedByYou") != std::string::npos)) {
    return Status::Ok();
  }
  return S3HttpError(req, *resp);
}

Result<std::vector<S3Upload>> S3Client::ListMultipartUploads(const std::string& bucket, const std::string& prefix,
                                                             int page_size) {
  std::vector<S3Upload> out;
  std::string key_marker;
  std::string id_marker;
  for (int page = 0;; ++page) {
    S3Request req = Request("GET", bucket);
    req.query = {{"uploads", ""}, {"prefix", prefix}, {"max-uploads", std::to_string(std::clamp(page_size, 1, 1000))}};
    if (!key_marker.empty()) req.query["key-marker"] = key_marker;
    if (!id_marker.empty()) req.query["upload-id-marker"] = id_marker;
    if (page >= kMaxPages) return Malformed(req, fmt::format("more than {} pages", kMaxPages));
    auto resp = impl_->Send(req);
    if (!resp.ok()) return resp.status();
    if (resp->status != 200) return S3HttpError(req, *resp);
    auto root = Root(req, *resp, "ListMultipartUploadsResult");
    if (!root.ok()) return root.status();
    for (const auto& c : root->children) {
      if (c.name != "Upload") continue;
      S3Upload u{c.ChildText("Key"), c.ChildText("UploadId"), c.ChildText("Initiated")};
      if (u.key.empty() || u.upload_id.empty()) return Malformed(req, "an <Upload> without <Key> or <UploadId>");
      out.push_back(std::move(u));
    }
    auto truncated = Truncated(req, *root);
    if (!truncated.ok()) return truncated.status();
    if (!*truncated) return out;
    std::string next_key = root->ChildText("NextKeyMarker");
    std::string next_id = root->ChildText("NextUploadIdMarker");
    if (next_key.empty() || next_key.size() > kMaxTokenBytes || next_id.size() > kMaxTokenBytes ||
        (next_key == key_marker && next_id == id_marker)) {
      return Malformed(req, "truncated without new NextKeyMarker and NextUploadIdMarker");
    }
    key_marker = std::move(next_key);
    id_marker = std::move(next_id);
  }
}

}  // namespace walcut::repo
