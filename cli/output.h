// Output helpers shared by the subcommands: output formats, problem lines and
// their JSON form, byte counts for people, progress on a terminal, and the
// mapping from problems to exit codes.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

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

// Exit code for a failed Status (see command.h).
int ExitForStatus(const walfmt::Status& st);

// Counts problems by consequence: I/O failures beat findings.
struct ProblemTally {
  uint64_t findings = 0;  // fatal problems
  uint64_t notices = 0;   // reported, not findings (torn tail at the end, duplicate archive)
  uint64_t io = 0;
  void Add(const walfmt::Problem& p);
  int ExitCode() const;
};

// Progress on stderr, only when stderr is a terminal (and not --quiet); redraws at most 5 times
// a second and clears its line at the end. Thread-safe.
class Progress {
 public:
  explicit Progress(std::string what, uint64_t total_units);
  ~Progress();
  void Update(uint64_t units_done, uint64_t bytes_done);

 private:
  bool enabled_;
  std::string what_;
  uint64_t total_;
  std::mutex mu_;
  std::chrono::steady_clock::time_point last_{};
  bool drawn_ = false;
};

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
