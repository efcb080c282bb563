// walcut check DIR [--cut K | --all] [--level files|cuts|restore]: the ladder
// of checks a CI job runs (recovery/check.h), reported as text, JSON
// (walcut.check/1) or JUnit XML, with an exit code CI can act on.
#include <chrono>
#include <memory>
#include <mutex>

#include <fmt/format.h>

#include "cli/check_report.h"
#include "cli/command.h"
#include "cli/inputs.h"
#include "cli/metrics.h"
#include "cli/numbers.h"
#include "cli/output.h"
#include "recovery/check.h"
#include "recovery/check_plan.h"
#include "walfmt/file_io.h"

namespace walcut::cli {
namespace {

// The check's own options (recovery/check_plan.h), and how to render them.
struct CheckCliOptions {
  recovery::CheckRequest req;
  std::string format = "text";
  std::string output;
  std::string metrics;  // --metrics FILE: Prometheus text (cli/metrics.h)
};

// One progress line; its stage follows the library's ("files", "cuts",
// "cut 5/16: restore"), each with its own count and total. The library calls
// from its worker threads.
class StageProgress {
 public:
  void Update(const std::string& stage, uint64_t bytes_done, uint64_t bytes_total) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stage != stage_ || bytes_total != total_) {
      stage_ = stage;
      total_ = bytes_total;
      progress_.Stage(stage_, total_);
    }
    progress_.Update(bytes_done);
  }
  void Finish() { progress_.Finish(); }

 private:
  std::mutex mu_;
  std::string stage_;
  uint64_t total_ = 0;
  Progress progress_{"check"};
};

// Prints (or writes to --output) the report as text, JSON or JUnit; the
// exit code is the report's.
int RenderCheck(const CheckCliOptions& o, const recovery::CheckReport& rep) {
  const int rc = ExitCode(recovery::CheckOutcome(rep));
  const std::string text = CheckReportAs(o.format, rep, rc);

  for (const auto& e : rep.errors) PrintError(e);
  if (o.output.empty()) {
    fmt::print("{}", text);
    return rc;
  }
  if (auto st = walfmt::WriteFileAtomic(o.output, text); !st.ok()) {
    PrintError(st.message());
    return kExitIo;
  }
  fmt::print("checked {}: {}; {} report in {}\n", rep.dir, CheckVerdict(rep, rc), o.format, o.output);
  return rc;
}

int RunCheck(const CheckCliOptions& o) {
  const recovery::CheckRequest& r = o.req;
  if (r.cut && r.all) {
    PrintError("give --cut K or --all, not both");
    return kExitUsage;
  }
  for (const auto& [option, path] :
       {std::pair<const char*, std::string>{"--output", o.output}, {"--state", r.state}, {"--metrics", o.metrics}}) {
    if (const std::string p = OutputInsideInput(option, path, {r.dir}); !p.empty()) {
      PrintError(p);
      return kExitUsage;
    }
  }
  auto plan = recovery::PlanCheck(o.req);
  if (!plan.ok()) {
    PrintError(plan.status().message());
    return ExitForStatus(plan.status());
  }
  recovery::CheckOptions& opt = plan->options;
  auto progress = std::make_shared<StageProgress>();
  if (Progress::Wanted()) {  // the library computes totals only for a progress it reports to
    opt.progress = [progress](const std::string& stage, uint64_t done, uint64_t total) {
      progress->Update(stage, done, total);
    };
  }

  const auto started = std::chrono::steady_clock::now();
  auto rep = recovery::RunCheck(opt);
  progress->Finish();
  opt.progress = nullptr;
  if (!rep.ok()) {
    PrintError(rep.status().message());
    // A DIR that is not a cluster or a cut that does not exist is usage.
    return ExitForStatus(rep.status());
  }
  const int rc = RenderCheck(o, *rep);
  if (o.metrics.empty()) return rc;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const int mrc = WriteMetrics(o.metrics, CheckMetrics(*rep, rc, secs, NowUnixMicros()));
  return mrc != 0 ? mrc : rc;
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
  cmd->add_option("dir", o->req.dir, "Cluster directory, or one node's directory (see --node)");
  AddNumber(cmd, "--cut", o->req.cut, kCutIdRange, "Check this cut (default level: restore)");
  cmd->add_flag("--all", o->req.all, "Check every cut (the default; default level: cuts)");
  cmd->add_option("--level", o->req.level, "files, cuts or restore (each includes the ones before it)")
      ->check(CLI::IsMember({"files", "cuts", "restore"}))
      ->type_name("files|cuts|restore");
  cmd->add_option("--format", o->format, "text (default), json (walcut.check/1) or junit (JUnit XML)")
      ->check(CLI::IsMember({"text", "json", "junit"}))
      ->type_name("text|json|junit");
  cmd->add_option("-o,--output", o->output,
                  "Write the report to FILE (atomically); stdout gets a one-line summary; the exit code is the same");
  cmd->add_option("--metrics", o->metrics,
                  "Also write the result as Prometheus metrics to FILE (atomically; for node_exporter's textfile "
                  "collector, name it *.prom): restore window, age of the latest restorable cut, cuts by status, "
                  "findings by check, WAL read per node");
  cmd->add_option("--state", o->req.state,
                  "Incremental state file (walcut.check-state/1): skip segments verified clean before and unchanged "
                  "since (same size and mtime); report verified segments that changed");
  cmd->add_flag("--full", o->req.full,
                "With --state: read every segment anyway (an in-place rewrite keeping size and "
                "mtime is only caught this way)");
  cmd->add_flag("--from-genesis", o->req.from_genesis,
                "Level restore: restore every cut from genesis, not from the previous cut's checked restore "
                "(each restore independent of the others; reads the WAL prefix once per cut)");
  AddNumber(cmd, "-j,--jobs", o->req.jobs, kJobsRange, "Threads (default: one per core)");
  AddProgressOptions(cmd);
  AddNumber(cmd, "--node", o->req.node, kNodeIdRange,
            "Check one node where its WAL lives: DIR is its directory (node-<i>, with wal/; checked this way "
            "without --node too) or its WAL directory; level files (default), or restore with --verdict");
  cmd->add_option("--verdict", o->req.verdict,
                  "One node, level restore: the cut's verdict (walcut cuts SUMMARIES... --verdict-out FILE --cut K); "
                  "the node is restored from it into a temporary directory and read back");
  cmd->add_option("--base", o->req.base,
                  "One node, level restore: the directory holding its full-snapshot base "
                  "(default NODE_DIR/../snapshots/<name>)");
  // `check merge` (cli/cmd_check_merge.cpp) is a subcommand of this one:
  // when it was given, its action runs.
  reg.Add(cmd, [o, cmd, &reg] {
    for (const auto& [sub, action] : reg.commands()) {
      if (sub != cmd && sub->get_parent() == cmd && sub->parsed()) return action();
    }
    if (o->req.dir.empty()) {
      PrintError("DIR is required");
      return kExitUsage;
    }
    return RunCheck(*o);
  });
}

const CommandRegistrar kRegister{90, RegisterCheck};

}  // namespace
}  // namespace walcut::cli
