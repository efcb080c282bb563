// The one file layer of the project: every whole-file read and every file or
// directory that walcut writes goes through here, so that the rules live in
// one place:
//
// - Reading: a path is opened with O_NONBLOCK (a FIFO never blocks the open)
//   and must be a regular file, read with a size bound checked against fstat
//   before anything is allocated.
// - Writing: data goes to a uniquely named temporary file in the target's
//   directory (".NAME.tmp-PID-SEQ"), is fsynced, renamed into place, and the
//   directory is fsynced, so that after a crash the target is either absent,
//   the old version or the complete new version, never a prefix.
// - Fault injection for crash tests: every write, fsync and rename done here
//   counts as one step; SetFailAtStep(n) (or WALCUT_FAIL_IO_AT=n in the
//   environment, in a test build only: the CMake option WALCUT_TEST_SEAMS
//   builds it into walcut_seams and the test suites, never into the walcut
//   and libwalfmt that are installed) makes the n-th step fail with kIo
//   "injected fault", the way a full disk or a crash at that point would
//   stop the writer.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "walfmt/status.h"

namespace walfmt {

// Reads a regular file whole. kNotFound when it does not exist, kIo when it
// cannot be read or is not a regular file (FIFO, device, directory), or when
// it holds more than `max_bytes` (the message names the size and the limit).
Result<std::string> ReadWholeFile(const std::string& path, uint64_t max_bytes);

// The bound for a JSON document walcut reads whole (cluster.json, a restore's
// manifest.json, check state, summaries, reports): far above anything walcut
// writes, small enough that a wrong path cannot exhaust memory.
inline constexpr uint64_t kMaxJsonFileBytes = uint64_t{64} << 20;

// Whether a write is made durable. kSynced (the default) fsyncs the file and
// its directory as described above. kUnsynced keeps the temporary name and
// the rename, so a reader still never sees a prefix, but skips the fsyncs:
// only for writers whose own data is not synced either (the WAL writer with
// WriterOptions::fsync off, in simulation), where a sync would buy nothing.
enum class Durability : uint8_t { kSynced, kUnsynced };
// Reads a regular file (opened as ReadWholeFile opens it) from start to end in
// pieces of at most `chunk` bytes and hands each to `each`; memory holds one
// piece. A non-Ok status from `each` stops the read and is returned. kNotFound
// when the file does not exist, kIo as ReadWholeFile.
Status ReadFileChunks(const std::string& path, size_t chunk, const std::function<Status(std::string_view)>& each);

// Copies the regular file `from` to the new file `to` (which must not exist),
// piece by piece, and fsyncs it, as WriteNewFile would write it: every write and
// the fsync are steps of the fault hook. `each`, when given, sees every piece
// (to checksum the bytes on the way). On an error `to` is removed.
Status CopyToNewFile(const std::string& from, const std::string& to,
                     const std::function<void(std::string_view)>& each = {});

// Writes `data` to `path` atomically and durably (see above). An existing
// file at `path` is replaced.
Status WriteFileAtomic(const std::string& path, std::string_view data, Durability d = Durability::kSynced);

// Writes `data` to a new file `path` (which must not exist) and fsyncs it; no
// rename. For files inside a staging directory that is renamed as a whole.
Status WriteNewFile(const std::string& path, std::string_view data, Durability d = Durability::kSynced);

// fsync of an open file `fd` (named `path` in messages), then close(2) of it
// whatever happened: for writers that stream a file too large to hold whole
// (SnapshotStreamWriter) into a directory that is then renamed as a whole.
Status SyncAndClose(int fd, const std::string& path);

// fsync of a directory, so that the entries created or renamed in it are
// durable.
Status SyncDir(const std::string& dir);

// rename(2) of `from` to `to` followed by an fsync of the directory of `to`
// (and of `from` when it is another directory).
Status RenameDurable(const std::string& from, const std::string& to);

// A temporary name beside `path` in the same directory, unique in this
// process and across processes: "<dir>/.<name>.tmp-<pid>-<seq>".
std::string TempNameBeside(const std::string& path);

// The prefix every temporary name beside `path` starts with (".<name>.tmp-"),
// for finding leftovers of killed writers.
std::string TempPrefixFor(const std::string& name);

// Test hook (see above). 0 switches it off. Returns the steps counted so far
// since the last call.
uint64_t SetFailAtStep(uint64_t n);
// One step of a durable write: returns an injected kIo error naming `what`
// when this is the step chosen by SetFailAtStep, else Ok.
Status CountIoStep(std::string_view what);

}  // namespace walfmt
