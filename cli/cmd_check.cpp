// walcut check DIR [--cut K | --all] [--level files|cuts|restore]: the ladder
// of checks a CI job runs (recovery/check.h), reported as text, JSON
// (walcut.check/1) or JUnit XML, with an exit code CI can act on.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>

#include <fmt/format.h>

#include "cli/check_report.h"
#include "cli/command.h"
#include "cli/output.h"
#include "recovery/check.h"
#include "walfmt/file_io.h"

namespace walcut::cli {
namespace {

struct CheckCliOptions {
  std::string dir;
  std::optional<uint64_t> cut;
  bool all = false;
  std::string level;
  std::string format = "text";
  std::string output;
  std::string state;
  bool full = false;
  bool from_genesis = false;
  unsigned jobs = 0;
};

// One Progress line per phase (verify, scan, restore); the library calls from
// its worker threads.
class PhaseProgress {
 public:
  void Update(const char* phase, uint64_t done, uint64_t total, uint64_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    if (phase_ != phase) {
      progress_.reset();  // clears the previous phase's line
      phase_ = phase;
      progress_ = std::make_unique<Progress>(phase_, total);
    }
    progress_->Update(done, bytes);
  }

 private:
  std::mutex mu_;
  std::string phase_;
  std::unique_ptr<Progress> progress_;
};

int RunCheck(const CheckCliOptions& o) {
  if (o.cut && o.all) {
    PrintError("give --cut K or --all, not both");
    return kExitUsage;
  }
  for (const auto& [option, path] : {std::pair<const char*, std::string>{"--output", o.output}, {"--state", o.state}}) {
    if (const std::string p = OutputInsideInput(option, path, {o.dir}); !p.empty()) {
      PrintError(p);
      return kExitUsage;
    }
  }
  recovery::CheckOptions opt;
  opt.dir = o.dir;
  opt.cut = o.cut;
  opt.level = o.cut ? recovery::CheckLevel::kRestore : recovery::CheckLevel::kCuts;
  if (!o.level.empty() && !recovery::ParseCheckLevel(o.level, opt.level)) {
    PrintError(fmt::format("--level {}: expected files, cuts or restore", o.level));
    return kExitUsage;
  }
  if (!o.state.empty()) {
    // A state file that is not ours is a usage error (the wrong path given),
    // found before any work; an absent one starts a new state.
    auto st = recovery::ReadCheckState(o.state);
    if (!st.ok() && st.status().code() != walfmt::ErrorCode::kNotFound) {
      PrintError(st.status().message());
      return ExitForStatus(st.status());
    }
  }
  opt.jobs = o.jobs;
  opt.state_path = o.state;
  opt.full = o.full;
  opt.chain_restores = !o.from_genesis;
  auto progress = std::make_shared<PhaseProgress>();
  opt.progress = [progress](const char* phase, uint64_t d, uint64_t t, uint64_t b) {
    progress->Update(phase, d, t, b);
  };

  auto rep = recovery::RunCheck(opt);
  progress.reset();
  opt.progress = nullptr;
  if (!rep.ok()) {
    PrintError(rep.status().message());
    // A DIR that is not a cluster or a cut that does not exist is usage.
    return ExitForStatus(rep.status());
  }
  const int rc = recovery::CheckExitCode(*rep);
  std::string text;
  if (o.format == "json") text = CheckReportJson(*rep, rc).dump(2) + "\n";
  else if (o.format == "junit") text = CheckReportJunit(*rep, rc);
  else text = CheckReportText(*rep, rc);

  for (const auto& e : rep->errors) PrintError(e);
  if (o.output.empty()) {
    fmt::print("{}", text);
    return rc;
  }
  if (auto st = walfmt::WriteFileAtomic(o.output, text); !st.ok()) {
    PrintError(st.message());
    return kExitIo;
  }
  fmt::print("checked {}: {}; {} report in {}\n", rep->dir, CheckVerdict(*rep, rc), o.format, o.output);
  return rc;
}

void RegisterCheck(CLI::App& root, Registry& reg) {
  auto o = std::make_shared<CheckCliOptions>();
  CLI::App* cmd = root.add_subcommand(
      "check",
      "Check a cluster for CI: files (every segment: checksums, continuity, torn tails), cuts (every cut:\n"
      "checks 1-5 of docs/cut-rule.md and the marker cross-check, per cut and node) and restore (restore the cut\n"
      "into a temporary directory, read it back, compare fingerprints, run the workload invariants).\n"
      "--cut K checks one cut up to restore; --all (the default) every cut up to cuts. With --all --level\n"
      "restore, each consistent cut is restored from the previous cut's restore once that one passed its\n"
      "checks (one pass over the WAL in all); --from-genesis restores each from genesis instead.\n"
      "Exit 0 all good, 1 findings, 2 usage error, 3 I/O or internal error.");
  cmd->add_option("dir", o->dir, "Cluster directory")->required();
  cmd->add_option("--cut", o->cut, "Check this cut (default level: restore)");
  cmd->add_flag("--all", o->all, "Check every cut (the default; default level: cuts)");
  cmd->add_option("--level", o->level, "files, cuts or restore (each includes the ones before it)")
      ->check(CLI::IsMember({"files", "cuts", "restore"}))
      ->type_name("files|cuts|restore");
  cmd->add_option("--format", o->format, "text (default), json (walcut.check/1) or junit (JUnit XML)")
      ->check(CLI::IsMember({"text", "json", "junit"}))
      ->type_name("text|json|junit");
  cmd->add_option("-o,--output", o->output,
                  "Write the report to FILE (atomically); stdout gets a one-line summary; the exit code is the same");
  cmd->add_option("--state", o->state,
                  "Incremental state file (walcut.check-state/1): skip segments verified clean before and unchanged "
                  "since (same size and mtime); report verified segments that changed");
  cmd->add_flag("--full", o->full, "With --state: read every segment anyway (an in-place rewrite keeping size and "
                                   "mtime is only caught this way)");
  cmd->add_flag("--from-genesis", o->from_genesis,
                "Level restore: restore every cut from genesis, not from the previous cut's checked restore "
                "(each restore independent of the others; reads the WAL prefix once per cut)");
  cmd->add_option("-j,--jobs", o->jobs, "Threads (default: one per core)");
  reg.Add(cmd, [o] { return RunCheck(*o); });
}

const CommandRegistrar kRegister{90, RegisterCheck};

}  // namespace
}  // namespace walcut::cli
