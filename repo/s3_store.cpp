// The objects of an S3 repository (s3_store.h): listing, transfers and
// deletions. The lock object is in s3_lock.cpp.
#include "repo/s3_store.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "repo/manifest.h"
#include "repo/repository.h"
#include "walfmt/file_io.h"
#include "walfmt/strings.h"

namespace walcut::repo {
namespace fs = std::filesystem;
using walfmt::Result;
using walfmt::Status;

std::string ReplaceAll(std::string s, const std::string& from, const std::string& to) {
  if (from.empty()) return s;
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
  return s;
}

Status Renamed(const Status& st, const std::string& from, const std::string& to) {
  if (st.ok()) return st;
  std::string m = ReplaceAll(st.message(), from, to);
  switch (st.code()) {
    case walfmt::ErrorCode::kCorruption:
      return Status::Corruption(std::move(m));
    case walfmt::ErrorCode::kInvalidArgument:
      return Status::InvalidArgument(std::move(m));
    case walfmt::ErrorCode::kNotFound:
      return Status::NotFound(std::move(m));
    case walfmt::ErrorCode::kIo:
      return Status::Io(std::move(m));
    default:
      return Status::Internal(std::move(m));
  }
}

Result<S3Repo> OpenS3Repo(const std::string& url, const RemoteOptions& o) {
  auto u = ParseS3Url(url);
  if (!u.ok()) return u.status();
  S3Options so;
  so.endpoint = o.s3_endpoint;
  so.region = o.s3_region;
  auto config = ResolveS3Config(so, ProcessEnvironment());
  if (!config.ok()) return config.status();
  auto client = S3Client::Create(std::move(config.value()));
  if (!client.ok()) return client.status();
  S3Repo r;
  r.client = std::move(client.value());
  r.url = *u;
  r.display = fmt::format("s3://{}/{}", u->bucket, u->prefix);
  while (r.display.back() == '/') r.display.pop_back();
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  r.jobs = o.jobs ? o.jobs : std::min(16u, cores);
  return r;
}

bool S3RepoObjects::Complete(const std::string& name) const {
  auto it = artifacts.find(name);
  if (it == artifacts.end()) return false;
  return std::any_of(it->second.begin(), it->second.end(),
                     [](const S3ObjectInfo& o) { return o.key == kManifestFile; });
}

std::vector<std::string> S3RepoObjects::Leftovers() const {
  std::set<std::string> out;
  for (const auto& [name, objs] : artifacts) {
    if (!Complete(name)) out.insert(name + "/");
  }
  for (const auto& u : uploads) {
    const size_t slash = u.key.find('/');
    // An upload under a dot-name is no artifact's: .parts/ (parts.h) are left alone.
    if (slash == std::string::npos || u.key[0] == '.') continue;
    const std::string name = u.key.substr(0, slash);
    out.insert(Complete(name) ? u.key : name + "/");  // under a whole artifact: the upload's key alone
  }
  return {out.begin(), out.end()};
}

Result<S3RepoObjects> ListS3Objects(const S3Repo& r) {
  auto l = r.client->ListObjects(r.url.bucket, r.url.prefix);
  if (!l.ok()) return l.status();
  S3RepoObjects out;
  for (auto& o : l->objects) {
    std::string rel = o.key.substr(r.url.prefix.size());
    const size_t slash = rel.find('/');
    if (slash == std::string::npos) {
      if (rel == kMarkerFile) {
        out.has_marker = true;
      } else if (rel == kS3LockObject) {
        out.has_lock = true;
      } else {
        out.others.push_back(rel);
      }
      continue;
    }
    const std::string name = rel.substr(0, slash);
    if (name.empty() || name[0] == '.') {  // never an artifact
      out.others.push_back(rel);
      continue;
    }
    o.key = rel.substr(slash + 1);
    out.artifacts[name].push_back(std::move(o));
  }
  auto ups = r.client->ListMultipartUploads(r.url.bucket, r.url.prefix);
  if (!ups.ok()) return ups.status();
  for (auto& u : *ups) {
    u.key = u.key.substr(r.url.prefix.size());
    out.uploads.push_back(std::move(u));
  }
  return out;
}

Status ParallelFor(size_t n, unsigned jobs, const std::function<Status(size_t)>& f) {
  std::atomic<size_t> next{0};
  std::mutex mu;
  Status first;
  auto work = [&] {
    for (size_t i = next++; i < n; i = next++) {
      Status st = f(i);
      if (st.ok()) continue;
      std::lock_guard<std::mutex> lock(mu);
      if (first.ok()) first = st;
    }
  };
  const unsigned threads = static_cast<unsigned>(std::min<size_t>(std::max(1u, jobs), n));
  std::vector<std::thread> pool;
  for (unsigned j = 1; j < threads; ++j) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  return first;
}

namespace {

// A relative key safe as a path under a directory: no empty, "." or ".." segment.
bool SafeRelative(const std::string& rel) {
  if (rel.empty()) return false;
  size_t start = 0;
  while (true) {
    const size_t slash = rel.find('/', start);
    const std::string seg = rel.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (seg.empty() || seg == "." || seg == "..") return false;
    if (slash == std::string::npos) return true;
    start = slash + 1;
  }
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

FileRange::~FileRange() {
  if (map_ != nullptr) ::munmap(map_, map_len_);
}

Status FileRange::Open(int fd, uint64_t offset, uint64_t length, const std::string& path) {
  if (length == 0) return Status::Ok();
  const auto shorter = [&] {
    return Status::Io(fmt::format("{}: shorter than expected (changed while uploading?)", path));
  };
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t start = offset / page * page;
  const size_t map_len = static_cast<size_t>(offset - start + length);
  void* p = ::mmap(nullptr, map_len, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, static_cast<off_t>(start));
  if (p != MAP_FAILED) {
    map_ = p;
    map_len_ = map_len;
    // A page past the end of the file would be SIGBUS when read, not an error.
    struct stat st {};
    if (::fstat(fd, &st) != 0) return Status::Io(fmt::format("{}: cannot stat: {}", path, std::strerror(errno)));
    if (static_cast<uint64_t>(st.st_size) < offset + length) return shorter();
    view_ = std::string_view(static_cast<const char*>(p) + (offset - start), static_cast<size_t>(length));
    return Status::Ok();
  }
  copy_.resize(static_cast<size_t>(length));
  size_t done = 0;
  while (done < length) {
    const ssize_t n = ::pread(fd, copy_.data() + done, length - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::Io(fmt::format("{}: cannot read: {}", path, std::strerror(errno)));
    if (n == 0) return shorter();
    done += static_cast<size_t>(n);
  }
  view_ = copy_;
  return Status::Ok();
}

Status DownloadToFile(const S3Repo& r, const std::string& key, uint64_t size, const std::string& path) {
  Fd f;
  f.fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (f.fd < 0) return Status::Io(fmt::format("{}: cannot create: {}", path, std::strerror(errno)));
  for (uint64_t off = 0; off < size; off += r.transfer.piece_bytes) {
    const uint64_t len = std::min(r.transfer.piece_bytes, size - off);
    if (Status st = r.client->GetObjectRangeToFile(r.url.bucket, key, off, len, f.fd, path); !st.ok()) return st;
  }
  return Status::Ok();
}

Status DownloadArtifact(const S3Repo& r, const S3RepoObjects& objs, const std::string& name, const std::string& dir) {
  auto it = objs.artifacts.find(name);
  if (it == objs.artifacts.end()) return Status::NotFound(fmt::format("{}: no artifact {}", r.display, name));
  const std::string root = walfmt::JoinPath(dir, name);
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) return Status::Io(fmt::format("{}: cannot create: {}", root, ec.message()));
  const auto& list = it->second;
  for (const auto& o : list) {
    if (!SafeRelative(o.key)) {
      return Status::Corruption(
          fmt::format("{}: object key '{}' has an empty, '.' or '..' path segment", r.Where(name + "/"), o.key));
    }
    const fs::path parent = fs::path(walfmt::JoinPath(root, o.key)).parent_path();
    fs::create_directories(parent, ec);
    if (ec) return Status::Io(fmt::format("{}: cannot create: {}", parent.string(), ec.message()));
  }
  return ParallelFor(list.size(), r.jobs, [&](size_t i) {
    return DownloadToFile(r, r.Key(name + "/" + list[i].key), list[i].size, walfmt::JoinPath(root, list[i].key));
  });
}

Status UploadFile(const S3Repo& r, const std::string& key, const std::string& path, unsigned jobs) {
  Fd f;
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd < 0) return Status::Io(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  std::error_code ec;
  const uint64_t size = fs::file_size(path, ec);
  if (ec) return Status::Io(fmt::format("{}: cannot stat: {}", path, ec.message()));
  if (size <= r.transfer.multipart_threshold) {
    FileRange data;
    if (Status st = data.Open(f.fd, 0, size, path); !st.ok()) return st;
    auto put = r.client->PutObject(r.url.bucket, key, data.view());
    return put.status();
  }
  auto id = r.client->CreateMultipartUpload(r.url.bucket, key);
  if (!id.ok()) return id.status();
  const uint64_t part = r.transfer.part_bytes;
  const size_t n = static_cast<size_t>((size + part - 1) / part);
  if (n > 10000) return Status::InvalidArgument(fmt::format("{}: {} bytes need more than 10000 parts", path, size));
  std::vector<S3Part> parts(n);
  Status st = ParallelFor(n, jobs, [&](size_t i) {
    FileRange data;
    if (Status st = data.Open(f.fd, i * part, std::min(part, size - i * part), path); !st.ok()) return st;
    auto p = r.client->UploadPart(r.url.bucket, key, *id, static_cast<int>(i + 1), data.view());
    if (!p.ok()) return p.status();
    parts[i] = *p;
    return Status::Ok();
  });
  if (st.ok()) st = r.client->CompleteMultipartUpload(r.url.bucket, key, *id, parts);
  if (!st.ok()) (void)r.client->AbortMultipartUpload(r.url.bucket, key, *id);
  return st;
}

Result<S3PutOutcome> UploadTree(const S3Repo& r, const std::string& rel_dir, const Manifest& m, const std::string& dir,
                                const std::set<std::string>& uploaded) {
  std::vector<const ArtifactFile*> small, large;
  for (const auto& f : m.files) {
    if (!uploaded.count(f.path)) (f.bytes > r.transfer.multipart_threshold ? large : small).push_back(&f);
  }
  const auto key = [&](const std::string& rel) { return r.Key(rel_dir + rel); };
  Status st = ParallelFor(small.size(), r.jobs, [&](size_t i) {
    return UploadFile(r, key(small[i]->path), walfmt::JoinPath(dir, small[i]->path), 1);
  });
  if (!st.ok()) return st;
  for (const auto* f : large) {
    if (Status st2 = UploadFile(r, key(f->path), walfmt::JoinPath(dir, f->path), r.jobs); !st2.ok()) return st2;
  }
  auto text = walfmt::ReadWholeFile(walfmt::JoinPath(dir, kManifestFile), kMaxManifestBytes);
  if (!text.ok()) return text.status();
  return r.client->PutObject(r.url.bucket, key(kManifestFile), *text, S3PutMode::kCreateOnly);
}

Status AbortUploadsOf(const S3Repo& r, const S3RepoObjects& objs, const std::string& rel) {
  for (const auto& u : objs.uploads) {
    if (u.key != rel) continue;
    if (Status st = r.client->AbortMultipartUpload(r.url.bucket, r.Key(u.key), u.upload_id); !st.ok()) return st;
  }
  return Status::Ok();
}

Status DeleteArtifactObjects(const S3Repo& r, const S3RepoObjects& objs, const std::string& name) {
  if (auto it = objs.artifacts.find(name); it != objs.artifacts.end()) {
    if (objs.Complete(name)) {
      if (Status st = r.client->DeleteObject(r.url.bucket, r.Key(name + "/" + kManifestFile)); !st.ok()) return st;
    }
    std::vector<std::string> keys;
    for (const auto& o : it->second) {
      if (o.key != kManifestFile) keys.push_back(r.Key(name + "/" + o.key));
    }
    if (Status st =
            ParallelFor(keys.size(), r.jobs, [&](size_t i) { return r.client->DeleteObject(r.url.bucket, keys[i]); });
        !st.ok()) {
      return st;
    }
  }
  for (const auto& u : objs.uploads) {
    if (u.key.rfind(name + "/", 0) != 0) continue;
    if (Status st = r.client->AbortMultipartUpload(r.url.bucket, r.Key(u.key), u.upload_id); !st.ok()) return st;
  }
  return Status::Ok();
}

}  // namespace walcut::repo
