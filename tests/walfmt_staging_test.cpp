// walfmt/staging.h: the output lock (a second process fails at once, naming
// the holder; a nested Acquire in the holder succeeds; the lock file goes
// away with the lock), the registry (RemoveStaging, CommitStaging), and the
// stale leftovers of a process that is gone.
#include "walfmt/staging.h"

#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "test_files.h"
#include "walfmt/file_io.h"

namespace fs = std::filesystem;
using walcut::testing::TempDir;
using walcut::testing::WriteFileBytes;

namespace {
// A pid that certainly no longer runs: a child that has exited and been reaped.
pid_t DeadPid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  int st = 0;
  ::waitpid(pid, &st, 0);
  return pid;
}
}  // namespace

TEST_CASE("OutputLock: a second process fails at once and is told who holds OUT", "[staging]") {
  TempDir d;
  const std::string out = d.path() + "/out";
  auto lock = walfmt::OutputLock::Acquire(out);
  REQUIRE(lock.ok());
  CHECK((*lock)->lock_path() == d.path() + "/.out.lock");
  REQUIRE(fs::exists(d.path() + "/.out.lock"));
  // Nested in this process: granted without locking again.
  {
    auto again = walfmt::OutputLock::Acquire(out);
    REQUIRE(again.ok());
  }
  CHECK(fs::exists(d.path() + "/.out.lock"));  // the nested handle does not remove the outer lock's file
  // Another process: refused at once, with the holder's pid.
  int pipefd[2];
  REQUIRE(::pipe(pipefd) == 0);
  const pid_t child = ::fork();
  if (child == 0) {
    auto other = walfmt::OutputLock::Acquire(out);
    const std::string msg = other.ok() ? std::string("acquired") : other.status().message();
    (void)!::write(pipefd[1], msg.data(), msg.size());
    ::_exit(other.ok() ? 0 : other.status().code() == walfmt::ErrorCode::kIo ? 3 : 1);
  }
  ::close(pipefd[1]);
  std::string msg(512, '\0');
  const ssize_t n = ::read(pipefd[0], msg.data(), msg.size());
  ::close(pipefd[0]);
  msg.resize(n > 0 ? static_cast<size_t>(n) : 0);
  int st = 0;
  ::waitpid(child, &st, 0);
  CAPTURE(msg);
  CHECK(WEXITSTATUS(st) == 3);
  CHECK(msg.find(fmt::format("another walcut (process {}) is writing it", ::getpid())) != std::string::npos);
  lock.value().reset();
  CHECK_FALSE(fs::exists(d.path() + "/.out.lock"));
  // Released: the next writer gets it.
  auto next = walfmt::OutputLock::Acquire(out);
  CHECK(next.ok());
}

TEST_CASE("BeginStagedDir refuses an existing OUT, CommitStaging renames, RemoveStaging removes", "[staging]") {
  TempDir d;
  const std::string out = d.path() + "/out";
  {
    auto s = walfmt::BeginStagedDir(out);
    REQUIRE(s.ok());
    REQUIRE(fs::is_directory(s->dir));
    CHECK(fs::path(s->dir).filename().string().rfind(".out.tmp-", 0) == 0);
    WriteFileBytes(s->dir + "/a", "x");
    REQUIRE(walfmt::CommitStaging(s->dir, out).ok());
    CHECK(fs::exists(out + "/a"));
  }
  CHECK_FALSE(fs::exists(d.path() + "/.out.lock"));
  auto again = walfmt::BeginStagedDir(out);
  REQUIRE_FALSE(again.ok());
  CHECK(again.status().code() == walfmt::ErrorCode::kInvalidArgument);
  CHECK_FALSE(fs::exists(d.path() + "/.out.lock"));
  auto other = walfmt::BeginStagedDir(d.path() + "/other");
  REQUIRE(other.ok());
  WriteFileBytes(other->dir + "/b", "y");
  walfmt::RemoveStaging(other->dir);
  CHECK_FALSE(fs::exists(other->dir));
}

TEST_CASE("FindStaleStaging names the leftovers of a dead process and RemoveStaleStaging removes them", "[staging]") {
  TempDir d;
  const pid_t dead = DeadPid();
  const std::string stale_dir = fmt::format(".out.tmp-{}-0", dead);
  const std::string stale_file = fmt::format(".x.json.tmp-{}-3", dead);
  const std::string live_dir = fmt::format(".out.tmp-{}-1", ::getpid());  // ours: never stale
  fs::create_directory(d.path() + "/" + stale_dir);
  WriteFileBytes(d.path() + "/" + stale_dir + "/node-0.snap", "partial");
  WriteFileBytes(d.path() + "/" + stale_file, "partial");
  fs::create_directory(d.path() + "/" + live_dir);
  WriteFileBytes(d.path() + "/.out.lock", fmt::format("{}\n", dead));  // nobody holds it
  WriteFileBytes(d.path() + "/.notours.lock", "");                     // no pid: not walcut's
  WriteFileBytes(d.path() + "/.out.tmp-x-1", "");                      // not a staging name
  // A lock file that is held is not stale.
  auto held = walfmt::OutputLock::Acquire(d.path() + "/busy");
  REQUIRE(held.ok());

  auto stale = walfmt::FindStaleStaging(d.path());
  REQUIRE(stale.ok());
  std::vector<std::string> names;
  for (const auto& e : *stale) names.push_back(e.name);
  CHECK(names == std::vector<std::string>{".out.lock", stale_dir, stale_file});
  REQUIRE(stale->size() == 3);
  CHECK((*stale)[0].lock);
  CHECK((*stale)[0].pid == dead);
  CHECK((*stale)[1].directory);
  CHECK((*stale)[1].pid == dead);
  CHECK_FALSE((*stale)[2].directory);

  auto removed = walfmt::RemoveStaleStaging(d.path(), *stale);
  REQUIRE(removed.ok());
  CHECK(removed->size() == 3);
  CHECK_FALSE(fs::exists(d.path() + "/" + stale_dir));
  CHECK_FALSE(fs::exists(d.path() + "/" + stale_file));
  CHECK_FALSE(fs::exists(d.path() + "/.out.lock"));
  CHECK(fs::exists(d.path() + "/" + live_dir));
  CHECK(fs::exists(d.path() + "/.notours.lock"));
  CHECK(fs::exists(d.path() + "/.busy.lock"));
  auto none = walfmt::FindStaleStaging(d.path());
  REQUIRE(none.ok());
  CHECK(none->empty());
}
