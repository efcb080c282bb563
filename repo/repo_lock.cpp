// One writer at a time (REPOSITORY.md, "One writer at a time"): the lock of a
// directory repository (a flock(2), walfmt::OutputLock) and of an S3 one (a
// lock object created with If-None-Match: *).
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <ctime>
#include <fstream>
#include <optional>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "repo/remote.h"
#include "repo/s3_store.h"
#include "walfmt/file_io.h"
#include "walfmt/staging.h"
#include "walfmt/strings.h"

namespace walcut::repo {
using nlohmann::json;
using walfmt::Result;
using walfmt::Status;

namespace {

// An S3 lock expires this long after it was taken: then --break-lock may remove it.
constexpr uint64_t kS3LockTtlUs = 6ULL * 3600 * 1000000;

class DirLock : public RepoLock {
 public:
  explicit DirLock(std::unique_ptr<walfmt::OutputLock> l) : lock_(std::move(l)) {}

 private:
  std::unique_ptr<walfmt::OutputLock> lock_;
};

uint64_t NowUs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

std::string HostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

std::string Token() {
  std::random_device rd;
  return fmt::format("{:08x}{:08x}{:08x}{:08x}", rd(), rd(), rd(), rd());
}

std::string UtcText(uint64_t us) {
  const std::time_t t = static_cast<std::time_t>(us / 1000000);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                     tm.tm_min, tm.tm_sec);
}

struct LockInfo {
  std::string host, token, command;
  int64_t pid = 0;
  uint64_t created_us = 0, expires_us = 0;
};

std::string Describe(const LockInfo& i) {
  return fmt::format("{} (process {} on {}, since {}, expires {})", i.command.empty() ? "walcut" : i.command, i.pid,
                     i.host, UtcText(i.created_us), UtcText(i.expires_us));
}

// Why the lock is stale ("" when it is not): expired, or its process on this
// host is gone.
std::string Stale(const LockInfo& i) {
  if (i.expires_us <= NowUs()) return "it expired";
  if (i.host == HostName() && i.pid > 0 && ::kill(static_cast<pid_t>(i.pid), 0) != 0 && errno == ESRCH)
    return "its process is gone";
  return "";
}

std::optional<LockInfo> ParseLock(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  if (!j.is_object()) return std::nullopt;
  LockInfo i;
  try {
    i.host = j.at("host").get<std::string>();
    i.pid = j.at("pid").get<int64_t>();
    i.token = j.at("token").get<std::string>();
    i.command = j.value("command", std::string());
    i.created_us = j.at("created_unix_us").get<uint64_t>();
    i.expires_us = j.at("expires_unix_us").get<uint64_t>();
  } catch (const json::exception&) {
    return std::nullopt;
  }
  return i;
}

class S3Lock : public RepoLock {
 public:
  // `client` must outlive the lock (an S3Repo's client does not move with it).
  S3Lock(S3Client* client, std::string bucket, std::string key, std::string token)
      : client_(client), bucket_(std::move(bucket)), key_(std::move(key)), token_(std::move(token)) {}
  ~S3Lock() override {
    // Removed only when it is still ours (a --break-lock elsewhere may have replaced it).
    auto text = client_->GetObject(bucket_, key_);
    if (!text.ok()) return;
    auto info = ParseLock(*text);
    if (info && info->token == token_) (void)client_->DeleteObject(bucket_, key_);
  }

 private:
  S3Client* client_;
  std::string bucket_, key_, token_;
};

}  // namespace

Result<std::unique_ptr<RepoLock>> LockDirectory(const std::string& dir) {
  const std::string target = walfmt::JoinPath(dir, "walcut-lock");
  auto l = walfmt::OutputLock::Acquire(target);
  if (l.ok()) return std::unique_ptr<RepoLock>(new DirLock(std::move(l.value())));
  const std::string path = walfmt::LockPathFor(target);
  std::ifstream in(path);
  int64_t pid = 0;
  in >> pid;
  return Status::Io(
      fmt::format("{}: the repository is locked by another writer ({}on this host, lock file {}); not waiting", dir,
                  pid > 0 ? fmt::format("process {} ", pid) : "", path));
}

Result<std::unique_ptr<RepoLock>> LockS3(const S3Repo& r, bool break_lock, const std::string& command) {
  const std::string key = r.Key(kS3LockObject);
  const std::string token = Token();
  const uint64_t now = NowUs();
  const json j = {{"schema", "walcut.repository-lock/1"},    {"command", command}, {"host", HostName()},
                  {"pid", static_cast<int64_t>(::getpid())}, {"token", token},     {"created_unix_us", now},
                  {"expires_unix_us", now + kS3LockTtlUs}};
  const std::string body = j.dump(2) + "\n";
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto put = r.client->PutObject(r.url.bucket, key, body, S3PutMode::kCreateOnly);
    if (!put.ok()) return put.status();
    if (*put == S3PutOutcome::kCreated)
      return std::unique_ptr<RepoLock>(new S3Lock(r.client.get(), r.url.bucket, key, token));
    auto text = r.client->GetObject(r.url.bucket, key);
    if (text.status().code() == walfmt::ErrorCode::kNotFound) continue;  // released meanwhile: try again
    if (!text.ok()) return text.status();
    auto info = ParseLock(*text);
    if (!info) {
      if (!break_lock) {
        return Status::Io(
            fmt::format("{}: the repository is locked (lock object {} is unreadable); --break-lock "
                        "removes it",
                        r.display, r.Where(kS3LockObject)));
      }
    } else {
      const std::string stale = Stale(*info);
      if (stale.empty() || !break_lock) {
        return Status::Io(
            fmt::format("{}: the repository is locked by {}{}; not waiting", r.display, Describe(*info),
                        stale.empty() ? "" : fmt::format(": stale ({}), --break-lock removes it", stale)));
      }
    }
    if (Status st = r.client->DeleteObject(r.url.bucket, key); !st.ok()) return st;
  }
  return Status::Io(
      fmt::format("{}: the lock object {} keeps changing; not waiting", r.display, r.Where(kS3LockObject)));
}

}  // namespace walcut::repo
