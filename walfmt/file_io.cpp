#include "walfmt/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

namespace walfmt {
namespace {

namespace fs = std::filesystem;

std::string Why(int err) { return std::strerror(err); }

// The test hook: 0 when off. In a test build (WALCUT_TEST_SEAMS: the
// walcut_seams binary and the test suites, never what is installed) read
// from WALCUT_FAIL_IO_AT the first time.
std::atomic<uint64_t>& FailAt() {
  static std::atomic<uint64_t> at = [] {
#ifdef WALCUT_TEST_SEAMS
    const char* e = std::getenv("WALCUT_FAIL_IO_AT");
    return e != nullptr ? std::strtoull(e, nullptr, 10) : 0ULL;
#else
    return 0ULL;
#endif
  }();
  return at;
}
std::atomic<uint64_t> g_steps{0};
std::atomic<uint64_t> g_temp_seq{0};

std::string DirOf(const std::string& path) {
  const fs::path p(path);
  const fs::path d = p.parent_path();
  return d.empty() ? std::string(".") : d.string();
}

// Writes all of `data` to `fd`, counting one step per call.
Status WriteAll(int fd, std::string_view data, const std::string& path) {
  if (Status st = CountIoStep(fmt::format("write {}", path)); !st.ok()) return st;
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::Io(fmt::format("{}: write failed: {}", path, Why(errno)));
    if (n == 0) return Status::Io(fmt::format("{}: write failed: no space written", path));
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace

Status SyncAndClose(int fd, const std::string& path) {
  Status st = CountIoStep(fmt::format("fsync {}", path));
  if (st.ok() && ::fsync(fd) != 0) st = Status::Io(fmt::format("{}: cannot sync: {}", path, Why(errno)));
  if (::close(fd) != 0 && st.ok()) st = Status::Io(fmt::format("{}: cannot close: {}", path, Why(errno)));
  return st;
}

uint64_t SetFailAtStep(uint64_t n) {
  FailAt().store(n);
  return g_steps.exchange(0);
}

Status CountIoStep(std::string_view what) {
  const uint64_t step = g_steps.fetch_add(1) + 1;
  const uint64_t at = FailAt().load(std::memory_order_relaxed);
  if (at != 0 && step == at) return Status::Io(fmt::format("{}: injected fault at I/O step {}", what, step));
  return Status::Ok();
}

Status ReadFileChunks(const std::string& path, size_t chunk, const std::function<Status(std::string_view)>& each) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return Status::NotFound(fmt::format("{}: no such file", path));
    return Status::Io(fmt::format("{}: cannot open: {}", path, Why(err)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int err = errno;
    ::close(fd);
    return Status::Io(
        fmt::format("{}: {}", path, S_ISREG(st.st_mode) ? "cannot stat: " + Why(err) : "not a regular file"));
  }
  std::string buf(std::max<size_t>(chunk, 1), '\0');
  uint64_t done = 0;
  Status result;
  while (true) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      result = Status::Io(fmt::format("{}: read error at byte {}: {}", path, done, Why(errno)));
      break;
    }
    if (n == 0) break;
    done += static_cast<uint64_t>(n);
    result = each(std::string_view(buf.data(), static_cast<size_t>(n)));
    if (!result.ok()) break;
  }
  ::close(fd);
  return result;
}

Status CopyToNewFile(const std::string& from, const std::string& to,
                     const std::function<void(std::string_view)>& each) {
  const int fd = ::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return Status::Io(fmt::format("{}: cannot create: {}", to, Why(errno)));
  Status st = ReadFileChunks(from, size_t{1} << 20, [&](std::string_view piece) {
    if (each) each(piece);
    return WriteAll(fd, piece, to);
  });
  if (!st.ok()) {
    ::close(fd);
    ::unlink(to.c_str());
    return st;
  }
  st = SyncAndClose(fd, to);
  if (!st.ok()) ::unlink(to.c_str());
  return st;
}

Result<std::string> ReadWholeFile(const std::string& path, uint64_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return Status::NotFound(fmt::format("{}: no such file", path));
    return Status::Io(fmt::format("{}: cannot open: {}", path, Why(err)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::Io(fmt::format("{}: cannot stat: {}", path, Why(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::Io(fmt::format("{}: not a regular file", path));
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes) {
    ::close(fd);
    return Status::Io(fmt::format("{}: {} bytes, more than the {} this file may hold", path, size, max_bytes));
  }
  std::string data(size, '\0');
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(fd, data.data() + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return Status::Io(fmt::format("{}: read error at byte {}: {}", path, done, Why(err)));
    }
    if (n == 0) break;  // shrank while we read: keep what is there
    done += static_cast<size_t>(n);
  }
  data.resize(done);
  ::close(fd);
  return data;
}

std::string TempPrefixFor(const std::string& name) { return fmt::format(".{}.tmp-", name); }

std::string TempNameBeside(const std::string& path) {
  const fs::path p(path);
  const uint64_t seq = g_temp_seq.fetch_add(1);
  return (p.parent_path() / fmt::format("{}{}-{}", TempPrefixFor(p.filename().string()), ::getpid(), seq)).string();
}

Status SyncDir(const std::string& dir) {
  if (Status st = CountIoStep(fmt::format("fsync {}", dir)); !st.ok()) return st;
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::Io(fmt::format("{}: cannot open directory: {}", dir, Why(errno)));
  Status st;
  // Some file systems refuse fsync on a directory (EINVAL); there is nothing
  // more durable to do on them.
  if (::fsync(fd) != 0 && errno != EINVAL)
    st = Status::Io(fmt::format("{}: cannot sync directory: {}", dir, Why(errno)));
  ::close(fd);
  return st;
}

namespace {
Status RenameOnly(const std::string& from, const std::string& to) {
  if (Status st = CountIoStep(fmt::format("rename {}", to)); !st.ok()) return st;
  if (::rename(from.c_str(), to.c_str()) != 0) {
    return Status::Io(fmt::format("{}: cannot rename into place: {}", to, Why(errno)));
  }
  return Status::Ok();
}
}  // namespace

Status RenameDurable(const std::string& from, const std::string& to) {
  if (Status st = RenameOnly(from, to); !st.ok()) return st;
  const std::string to_dir = DirOf(to);
  if (Status st = SyncDir(to_dir); !st.ok()) return st;
  const std::string from_dir = DirOf(from);
  if (fs::path(from_dir).lexically_normal() != fs::path(to_dir).lexically_normal()) return SyncDir(from_dir);
  return Status::Ok();
}

Status WriteNewFile(const std::string& path, std::string_view data, Durability d) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return Status::Io(fmt::format("{}: cannot create: {}", path, Why(errno)));
  Status st = WriteAll(fd, data, path);
  if (!st.ok()) {
    ::close(fd);
    return st;
  }
  if (d == Durability::kSynced) return SyncAndClose(fd, path);
  if (::close(fd) != 0) return Status::Io(fmt::format("{}: cannot close: {}", path, Why(errno)));
  return Status::Ok();
}

Status WriteFileAtomic(const std::string& path, std::string_view data, Durability d) {
  const std::string tmp = TempNameBeside(path);
  Status st = WriteNewFile(tmp, data, d);
  if (st.ok()) st = d == Durability::kSynced ? RenameDurable(tmp, path) : RenameOnly(tmp, path);
  if (!st.ok()) ::unlink(tmp.c_str());
  return st;
}

}  // namespace walfmt
