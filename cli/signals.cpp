#include "cli/signals.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/output.h"
#include "walfmt/staging.h"

namespace walcut::cli {
namespace {

// Why a waiting thread and not a signal handler: removing a directory tree
// needs opendir/readdir and allocation, none of which is async-signal-safe,
// and a handler would race the thread that renames the staging directory
// into place. With the signals blocked everywhere and taken by sigwait(2)
// here, the cleanup runs as ordinary code: it takes the staging registry's
// lock (so a rename in progress completes first, and none starts after),
// removes what is registered, then unblocks the signal in this thread only
// and raises it with its default action, which ends the whole process.
std::atomic<std::atomic<bool>*> stop_flag{nullptr};

void WaitForSignal(sigset_t set) {
  int sig = 0;
  for (;;) {
    while (::sigwait(&set, &sig) != 0) {
    }
    std::atomic<bool>* flag = stop_flag.exchange(nullptr);
    if (flag == nullptr || (sig != SIGINT && sig != SIGTERM)) break;
    flag->store(true);  // the command stops; a second signal ends the process
  }
  const std::vector<std::string> removed = walfmt::RemoveAllStagingForExit();
  ClearProgressLine();
  for (const auto& p : removed) {
    if (p.ends_with(".lock")) continue;  // the lock file is an implementation detail
    fmt::print(stderr, "walcut: {}: removed {}\n", ::strsignal(sig), p);
  }
  std::fflush(stderr);
  ::signal(sig, SIG_DFL);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  ::pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  ::raise(sig);
  ::_exit(128 + sig);  // not reached: the default action of these signals ends the process
}

}  // namespace

void InstallSignalCleanup() {
  sigset_t set;
  sigemptyset(&set);
  bool any = false;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old {};
    // A signal ignored when walcut started (nohup, a background job) stays ignored.
    if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    sigaddset(&set, sig);
    any = true;
  }
  if (!any) return;
  if (::pthread_sigmask(SIG_BLOCK, &set, nullptr) != 0) return;
  std::thread(WaitForSignal, set).detach();
}

void StopOnSignal(std::atomic<bool>* flag) { stop_flag.store(flag); }

int NoteStaleStaging(const std::string& out, bool clean) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path dir = fs::absolute(out, ec).lexically_normal();
  dir = dir.has_filename() ? dir.parent_path() : dir.parent_path().parent_path();
  auto stale = walfmt::FindStaleStaging(dir.string());
  if (!stale.ok()) {
    PrintError(stale.status().message());
    return kExitIo;
  }
  if (stale->empty()) return kExitOk;
  if (clean) {
    auto removed = walfmt::RemoveStaleStaging(dir.string(), *stale);
    if (!removed.ok()) {
      PrintError(removed.status().message());
      return kExitIo;
    }
    for (const auto& name : *removed) fmt::print(stderr, "walcut: removed stale {}\n", (dir / name).string());
    return kExitOk;
  }
  std::fflush(stdout);
  for (const auto& e : *stale) {
    const std::string what = e.lock ? "lock file" : e.directory ? "staging directory" : "staging file";
    fmt::print(stderr, "walcut: note: stale {} {} (left by process {}, {}); --clean-stale removes it\n", what,
               (dir / e.name).string(), e.pid, e.lock ? "nobody holds it" : "no longer running");
  }
  return kExitOk;
}

}  // namespace walcut::cli
