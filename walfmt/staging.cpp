#include "walfmt/staging.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>

#include <fmt/format.h>

#include "walfmt/file_io.h"

namespace walfmt {
namespace {

namespace fs = std::filesystem;

// The registry. Why a mutex and not an async-signal-safe table: the signal is
// not handled in a signal handler but by a thread that waits for it (the
// CLI's cli/signals.cpp), so the cleanup may take locks and use
// std::filesystem; the mutex is what makes a commit (a rename) and the
// cleanup exclude each other.
struct Registry {
  std::mutex mu;
  std::multiset<std::string> paths;
  // Lock files held, with the pid that took them: a child made by fork(2)
  // inherits the table but not the right to nest (its flock would conflict).
  std::map<std::string, pid_t> held_locks;
};
Registry& Reg() {
  static Registry* r = new Registry;  // never destroyed: the signal thread may use it during exit
  return *r;
}

void RemovePath(const std::string& path) {
  // A writer thread may add a file between the listing and the rmdir of a
  // pass (ENOTEMPTY); a few passes outrun it, since creating a file in a
  // removed directory fails.
  for (int pass = 0; pass < 50; ++pass) {
    std::error_code ec;
    fs::remove_all(path, ec);
    if (!ec) return;
    std::error_code ec2;
    if (!fs::exists(fs::symlink_status(path, ec2))) return;
  }
}

bool ProcessGone(int64_t pid) {
  if (pid <= 0) return false;
  if (pid == ::getpid()) return false;
  return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

// ".<name>.tmp-<pid>-<seq>": the pid, or 0 when `name` is not such a name.
int64_t StagingPid(const std::string& name) {
  if (name.empty() || name[0] != '.') return 0;
  const size_t at = name.rfind(".tmp-");
  if (at == std::string::npos || at == 0) return 0;
  const char* p = name.data() + at + 5;
  const char* end = name.data() + name.size();
  int64_t pid = 0;
  auto [q, ec] = std::from_chars(p, end, pid);
  if (ec != std::errc() || q == p || q == end || *q != '-') return 0;
  uint64_t seq = 0;
  auto [r, ec2] = std::from_chars(q + 1, end, seq);
  if (ec2 != std::errc() || r == q + 1 || r != end) return 0;
  return pid;
}

bool IsLockName(const std::string& name) { return name.size() > 6 && name[0] == '.' && name.ends_with(".lock"); }

int64_t ReadPid(int fd) {
  char buf[32] = {};
  const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
  if (n <= 0) return 0;
  int64_t pid = 0;
  auto [p, ec] = std::from_chars(buf, buf + n, pid);
  if (ec != std::errc() || p == buf) return 0;
  return pid;
}

// Opens a lock file (never following a link, never blocking on a FIFO).
int OpenLock(const std::string& path, bool create) {
  return ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | (create ? O_CREAT : 0), 0644);
}

// Whether `fd` is still the file at `path` (a lock file unlinked by its last
// holder after we opened it is a dead inode: locking it protects nothing).
bool SameFile(int fd, const std::string& path) {
  struct stat a {
  }, b{};
  if (::fstat(fd, &a) != 0 || ::lstat(path.c_str(), &b) != 0) return false;
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

}  // namespace

void RegisterStaging(const std::string& path) {
  std::lock_guard<std::mutex> lock(Reg().mu);
  Reg().paths.insert(path);
}

void RemoveStaging(const std::string& path) {
  RemovePath(path);
  std::lock_guard<std::mutex> lock(Reg().mu);
  if (auto it = Reg().paths.find(path); it != Reg().paths.end()) Reg().paths.erase(it);
}

Status CommitStaging(const std::string& from, const std::string& to) {
  std::lock_guard<std::mutex> lock(Reg().mu);
  Status st = RenameDurable(from, to);
  // Once renamed, `from` no longer exists: a signal's cleanup must not look
  // for it (and OUT is complete), even when only the directory sync failed.
  std::error_code ec;
  if (st.ok() || !fs::exists(fs::symlink_status(from, ec))) {
    if (auto it = Reg().paths.find(from); it != Reg().paths.end()) Reg().paths.erase(it);
  }
  return st;
}

std::vector<std::string> RemoveAllStagingForExit() {
  Reg().mu.lock();  // never unlocked: the process is about to end, and no commit may follow
  std::vector<std::string> removed;
  for (const auto& p : Reg().paths) {
    std::error_code ec;
    if (!fs::exists(fs::symlink_status(p, ec))) continue;
    RemovePath(p);
    removed.push_back(p);
  }
  Reg().paths.clear();
  return removed;
}

std::string LockPathFor(const std::string& target) {
  const fs::path p = fs::path(target).lexically_normal();
  fs::path name = p.filename();
  if (name.empty()) name = p.parent_path().filename();  // "OUT/"
  const fs::path dir = p.filename().empty() ? p.parent_path().parent_path() : p.parent_path();
  return (dir / fmt::format(".{}.lock", name.string())).string();
}

Result<std::unique_ptr<OutputLock>> OutputLock::Acquire(const std::string& target) {
  std::error_code ec;
  const fs::path abs = fs::absolute(target, ec);
  const std::string path = LockPathFor(abs.string());
  {
    std::lock_guard<std::mutex> lock(Reg().mu);
    if (auto it = Reg().held_locks.find(path); it != Reg().held_locks.end() && it->second == ::getpid()) {
      return std::unique_ptr<OutputLock>(new OutputLock(path, -1));
    }
  }
  // A bounded number of tries: each retry means the file was replaced between
  // our open and our flock by a holder that finished (see SameFile).
  for (int attempt = 0; attempt < 16; ++attempt) {
    const int fd = OpenLock(path, true);
    if (fd < 0)
      return Status::Io(fmt::format("{}: cannot create lock file {}: {}", target, path, std::strerror(errno)));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      return Status::Io(fmt::format("{}: lock file {} is not a regular file", target, path));
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      const int64_t pid = ReadPid(fd);
      ::close(fd);
      if (err == EWOULDBLOCK) {
        return Status::Io(fmt::format("{}: another walcut{} is writing it (lock {} is held); not waiting", target,
                                      pid > 0 ? fmt::format(" (process {})", pid) : "", path));
      }
      return Status::Io(fmt::format("{}: cannot lock {}: {}", target, path, std::strerror(err)));
    }
    if (!SameFile(fd, path)) {
      ::close(fd);
      continue;
    }
    const std::string pid = fmt::format("{}\n", ::getpid());
    if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
      const int err = errno;
      ::unlink(path.c_str());
      ::close(fd);
      return Status::Io(fmt::format("{}: cannot write lock file {}: {}", target, path, std::strerror(err)));
    }
    {
      std::lock_guard<std::mutex> lock(Reg().mu);
      Reg().held_locks[path] = ::getpid();
      Reg().paths.insert(path);  // a signal's cleanup removes it too
    }
    return std::unique_ptr<OutputLock>(new OutputLock(path, fd));
  }
  return Status::Io(fmt::format("{}: lock file {} keeps being replaced; not waiting", target, path));
}

OutputLock::~OutputLock() {
  if (fd_ < 0) return;
  // Unlinked while still held: whoever opened the old file finds it is no
  // longer at `path` (SameFile) and opens the new one.
  ::unlink(path_.c_str());
  ::close(fd_);
  std::lock_guard<std::mutex> lock(Reg().mu);
  Reg().held_locks.erase(path_);
  if (auto it = Reg().paths.find(path_); it != Reg().paths.end()) Reg().paths.erase(it);
}

Result<StagedDir> BeginStagedDir(const std::string& target) {
  std::error_code ec;
  const fs::path abs = fs::absolute(target, ec);
  auto lock = OutputLock::Acquire(abs.string());
  if (!lock.ok()) return lock.status();
  StagedDir s;
  s.lock = std::move(lock.value());
  if (fs::exists(fs::symlink_status(abs, ec))) {
    return Status::InvalidArgument(fmt::format("{}: already exists; refusing to overwrite", target));
  }
  s.dir = TempNameBeside(abs.string());
  RegisterStaging(s.dir);  // before it exists: a signal from now on removes it
  if (!fs::create_directory(s.dir, ec) || ec) {
    RemoveStaging(s.dir);
    return Status::Io(fmt::format("{}: cannot create: {}", s.dir, ec ? ec.message() : "exists"));
  }
  return s;
}

namespace {

// Whether the lock file `path` is held by nobody: it is locked here for a
// moment to find out. With `remove`, it is unlinked while locked.
bool LockIsFree(const std::string& path, bool remove, int64_t* pid) {
  {
    std::lock_guard<std::mutex> lock(Reg().mu);
    if (auto it = Reg().held_locks.find(path); it != Reg().held_locks.end() && it->second == ::getpid()) return false;
  }
  const int fd = OpenLock(path, false);
  if (fd < 0) return false;
  struct stat st {};
  bool free = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && ::flock(fd, LOCK_EX | LOCK_NB) == 0 && SameFile(fd, path);
  if (pid) *pid = ReadPid(fd);
  // Only walcut's own lock files (a pid inside) are taken for stale ones.
  if (free && ReadPid(fd) <= 0) free = false;
  if (free && remove) free = ::unlink(path.c_str()) == 0;
  ::close(fd);
  return free;
}

}  // namespace

Result<std::vector<StaleEntry>> FindStaleStaging(const std::string& dir) {
  std::vector<StaleEntry> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  fs::directory_iterator it(dir, ec);
  if (ec) return Status::Io(fmt::format("{}: cannot list: {}", dir, ec.message()));
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name[0] != '.') continue;
    StaleEntry e;
    e.name = name;
    if (const int64_t pid = StagingPid(name); pid > 0) {
      if (!ProcessGone(pid)) continue;
      e.pid = pid;
      std::error_code ec2;
      e.directory = it->symlink_status(ec2).type() == fs::file_type::directory;
      out.push_back(e);
    } else if (IsLockName(name)) {
      if (!LockIsFree(it->path().string(), false, &e.pid)) continue;
      e.lock = true;
      out.push_back(e);
    }
  }
  if (ec) return Status::Io(fmt::format("{}: cannot list: {}", dir, ec.message()));
  std::sort(out.begin(), out.end(), [](const StaleEntry& a, const StaleEntry& b) { return a.name < b.name; });
  return out;
}

Result<std::vector<std::string>> RemoveStaleStaging(const std::string& dir, const std::vector<StaleEntry>& entries) {
  std::vector<std::string> removed;
  for (const auto& e : entries) {
    const std::string path = (fs::path(dir) / e.name).string();
    if (e.lock) {
      if (LockIsFree(path, true, nullptr)) removed.push_back(e.name);
      continue;
    }
    const int64_t pid = StagingPid(e.name);
    if (pid <= 0 || !ProcessGone(pid)) continue;
    std::error_code ec;
    fs::remove_all(path, ec);
    if (ec) return Status::Io(fmt::format("{}: cannot remove: {}", path, ec.message()));
    removed.push_back(e.name);
  }
  if (!removed.empty()) {
    if (Status st = SyncDir(dir); !st.ok()) return st;
  }
  return removed;
}

}  // namespace walfmt
