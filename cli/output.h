// Output helpers shared by the subcommands: output formats, problem lines and
// their JSON form, byte counts for people, progress on a terminal, and the
// mapping from outcomes to exit codes.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "walfmt/outcome.h"
#include "walfmt/parallel_scan.h"
#include "walfmt/reader.h"
#include "walfmt/status.h"

namespace walcut::cli {

enum class Format { kText, kJson };
void AddFormatOption(CLI::App* cmd, Format& f);

// Versioned identifiers of the JSON documents (docs in README.md).
inline constexpr const char* kDumpSchema = "walcut.dump/1";
inline constexpr const char* kStatsSchema = "walcut.stats/1";
inline constexpr const char* kVerifySchema = "walcut.verify/1";

// -q/--quiet (every command): no notes (problems that are not findings) and
// no progress on stderr. Errors, findings, standard output and the exit code
// are the same either way.
void SetQuiet(bool quiet);
bool Quiet();

nlohmann::json ProblemJson(const walfmt::Problem& p);
// "walcut: error: <problem>" (or "note:" for a problem that is not a finding;
// none under --quiet).
void PrintProblem(const walfmt::Problem& p);
// "walcut: <message>" for a failure that stops the command.
void PrintError(const std::string& message);

std::string HumanBytes(uint64_t n);

// The exit code of an outcome (command.h; README.md, "Exit codes"): the one
// place an outcome the library decided becomes a number.
int ExitCode(walfmt::Outcome outcome);
// Exit code for a failed Status: ExitCode(walfmt::OutcomeOf(st)).
int ExitForStatus(const walfmt::Status& st);

// Progress on stderr: one line "STAGE 40% (27.5 MiB/68.9 MiB, 120.3 MiB/s,
// ETA 0:01)" (or "STAGE 27.5 MiB, 120.3 MiB/s" when the total is not known),
// redrawn at most 5 times a second. By default only when stderr is a
// terminal; --progress draws it anyway, --no-progress and -q never.
//
// The line is cleared ("\r\x1b[K") before anything else is written: errors
// and notes (PrintProblem, PrintError) clear it themselves; a command clears
// it (Finish, or ClearProgressLine) before it writes its results to stdout.
// Thread-safe; one Progress at a time.
enum class ProgressWhen { kAuto, kAlways, kNever };
void SetProgressWhen(ProgressWhen w);
// --progress and --no-progress, for a command that shows progress.
void AddProgressOptions(CLI::App* cmd);
// Clears the progress line if one is on the screen (it is drawn again at the
// next update). Safe to call from any thread, with or without a Progress.
void ClearProgressLine();

class Progress {
 public:
  // total_bytes 0: not known.
  explicit Progress(std::string stage, uint64_t total_bytes = 0);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  // Bytes done so far in the current stage. A smaller value than one given
  // before is ignored: the count never goes backwards.
  void Update(uint64_t bytes_done);
  // A new stage: its name and total; the count and the rate start again.
  void Stage(std::string stage, uint64_t total_bytes);
  // The total of the current stage, once known.
  void SetTotal(uint64_t total_bytes);
  // Clears the line for good: nothing is drawn after this.
  void Finish();
  bool enabled() const { return enabled_; }
  // Whether a Progress made now would draw (the options, -q, stderr): a
  // command computes a total only then.
  static bool Wanted();

 private:
  void DrawLocked(std::chrono::steady_clock::time_point now);
  bool enabled_;
  std::string stage_;
  uint64_t total_;
  uint64_t done_ = 0;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_{};
  bool drawn_once_ = false;
};

// The line Progress draws (without the "\r\x1b[K"), for tests.
std::string ProgressLine(const std::string& stage, uint64_t done, uint64_t total, double seconds);

// The bytes of WAL data in the segments: their sizes, for .wal.zst the
// decompressed size (walfmt::SegmentDataBytes). A progress total.
uint64_t DataBytes(const std::vector<walfmt::NodeSegments>& nodes);

}  // namespace walcut::cli

namespace walcut::cli {
// The last path component.
std::string BaseNameOf(const std::string& path);

// walcut never writes to its input: the problem with writing `path` (given
// to `option`) when it is one of `inputs` or lies inside one (symlinks and
// `..` resolved as far as the path exists), as one line; empty when there is
// none. Empty inputs are ignored.
std::string OutputInsideInput(const std::string& option, const std::string& path,
                              const std::vector<std::string>& inputs);
}  // namespace walcut::cli
