// Staging directories and the locks that guard an output, for every writer
// that builds OUT as ".<OUT>.tmp-<pid>-<seq>" beside it (file_io.h's
// TempNameBeside) and renames it into place at the end.
//
// - Registry: a staging path is registered when it is named (before it is
//   created) and leaves the registry when it is renamed into place
//   (CommitStaging) or removed (RemoveStaging). RemoveAllStagingForExit,
//   called by the CLI when a termination signal arrives, removes every
//   registered path and then holds the registry for good, so that no commit
//   can start after it: OUT is then either complete (the rename happened
//   first) or absent, never a renamed, half-removed staging directory.
// - Lock: OutputLock takes an exclusive, non-blocking flock(2) on
//   ".<OUT>.lock" beside OUT, holding the owner's pid, so that a second
//   writer of the same OUT fails at once (kIo, naming the process) instead of
//   racing the first one. The lock file is removed when the lock is dropped.
// - Leftovers: after a kill -9 neither runs. FindStaleStaging lists the
//   staging entries and lock files in a directory whose owner is gone (its
//   pid no longer runs; for a lock file, nobody holds it), and
//   RemoveStaleStaging removes them. Library code: nothing here prints.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "walfmt/status.h"

namespace walfmt {

// Registers `path` for removal on a termination signal (see above).
void RegisterStaging(const std::string& path);
// Removes `path` (recursively) and unregisters it.
void RemoveStaging(const std::string& path);
// rename(2) of the staging path `from` to `to`, durably (RenameDurable), with
// the registry held so that a signal's cleanup runs wholly before or after
// it; `from` is unregistered when the rename succeeded. On failure `from`
// stays registered (the caller removes it with RemoveStaging).
Status CommitStaging(const std::string& from, const std::string& to);

// For the CLI's signal handling thread only: removes every registered path
// (files, directories with their contents; a writer thread still adding
// files is outrun by retrying) and never releases the registry afterwards.
// Returns the paths that were removed.
std::vector<std::string> RemoveAllStagingForExit();

// An exclusive lock on an output path (see above). Movable, not copyable.
class OutputLock {
 public:
  // Takes the lock for `target` (any path: its lock file is
  // "<dir>/.<name>.lock"). kIo when another process holds it (the message
  // names `target`, the lock file and the holder's pid) or when the lock file
  // cannot be created. A second Acquire of a target this process already
  // holds succeeds without locking again (a nested writer, such as a
  // repository restore whose last step restores into the same OUT).
  static Result<std::unique_ptr<OutputLock>> Acquire(const std::string& target);
  ~OutputLock();
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

  const std::string& lock_path() const { return path_; }

 private:
  OutputLock(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_ = -1;  // -1: nested, the outer lock owns the file
};

// The usual start of a staged output: locks `target` (OutputLock), checks
// that it does not exist (kInvalidArgument "already exists"), then names,
// registers and creates the staging directory beside it (kIo).
struct StagedDir {
  std::shared_ptr<OutputLock> lock;
  std::string dir;
};
Result<StagedDir> BeginStagedDir(const std::string& target);

// The lock file beside `target`: "<dir>/.<name>.lock".
std::string LockPathFor(const std::string& target);

struct StaleEntry {
  std::string name;  // the entry's name in the directory
  bool directory = false;
  bool lock = false;  // a ".<name>.lock" file nobody holds
  int64_t pid = 0;    // the process that made it, as its name or content says (0: unknown)
};

// Staging entries (".<name>.tmp-<pid>-<seq>", ".<name>-work.tmp-...") of
// processes that no longer run, and lock files that nobody holds, in `dir`,
// sorted by name. A missing `dir` has none. kIo when `dir` cannot be listed.
Result<std::vector<StaleEntry>> FindStaleStaging(const std::string& dir);

// Removes the entries FindStaleStaging found (checking each again first, so
// an entry whose owner came back, or a lock taken meanwhile, is left alone).
// Returns the names removed; kIo naming the first entry that could not be.
Result<std::vector<std::string>> RemoveStaleStaging(const std::string& dir, const std::vector<StaleEntry>& entries);

}  // namespace walfmt
