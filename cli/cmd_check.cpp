// walcut check DIR [--cut K | --all] [--level files|cuts|restore]: the ladder
// of checks a CI job runs (recovery/check.h), reported as text, JSON
// (walcut.check/1) or JUnit XML, with an exit code CI can act on.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>

#include <fmt/format.h>

#include "cli/check_report.h"
#include "cli/command.h"
#include "cli/inputs.h"
#include "cli/numbers.h"
#include "cli/output.h"
#include "recovery/check.h"
#include "recovery/part_node_dir.h"
#include "recovery/verdict.h"
#include "walfmt/cluster_layout.h"
#include "walfmt/file_io.h"
#include "walfmt/text_escape.h"

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
  // One node where its WAL lives (docs/scale-out.md).
  int node = -1;
  std::string verdict;
  std::string base;
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

// One node (docs/scale-out.md): DIR is a node directory (node-<i> with
// wal/ inside) or, with --node, its WAL directory; or --verdict was given.
// Sets up `opt` (and `verdict`) for that node; kExitOk, or the usage error
// printed.
int SetUpNodeCheck(const CheckCliOptions& o, recovery::CheckOptions& opt, recovery::Verdict& verdict) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path dir(o.dir);
  const bool node_dir = fs::is_directory(dir / "wal", ec) && !fs::exists(dir / "cluster.json", ec);
  if (!(o.node >= 0 || !o.verdict.empty() || node_dir)) {
    if (o.base.empty()) return kExitOk;
    PrintError("--base goes with --verdict (one node's check)");
    return kExitUsage;
  }
  const fs::path wal = node_dir ? dir / "wal" : dir;
  const fs::path nd = wal == dir ? dir.parent_path() : dir;
  if (o.node >= 0) {
    if (const std::string bad = recovery::NodeOutOfRange(o.node, nd.string()); !bad.empty()) {
      PrintError(bad);
      return kExitUsage;
    }
  }
  int node = o.node;
  if (node < 0) {
    if (auto id = walfmt::NodeIdFromDirName(nd.filename().string())) node = static_cast<int>(*id);
  }
  if (node < 0) {
    PrintError(fmt::format("{}: cannot tell the node id from the path; give --node", o.dir));
    return kExitUsage;
  }
  if (o.all || o.from_genesis) {
    PrintError("one node's check takes neither --all nor --from-genesis: level restore checks the verdict's cut");
    return kExitUsage;
  }
  if (o.level.empty()) opt.level = o.verdict.empty() ? recovery::CheckLevel::kFiles : recovery::CheckLevel::kRestore;
  if (!o.verdict.empty()) {
    auto v = recovery::ReadVerdict(o.verdict);
    if (!v.ok()) {
      PrintError(v.status().message());
      return v.status().code() == walfmt::ErrorCode::kIo ? kExitIo : kExitUsage;
    }
    verdict = std::move(v.value());
    if (static_cast<size_t>(node) >= verdict.nodes.size()) {
      PrintError(fmt::format("--node {}: no such node; the verdict (cut {}) covers {} nodes", node, verdict.cut,
                             verdict.nodes.size()));
      return kExitUsage;
    }
    opt.verdict = &verdict;
    opt.base_dir = !o.base.empty() ? o.base : (nd.parent_path() / "snapshots" / verdict.base_name).string();
  }
  opt.node = static_cast<uint32_t>(node);
  opt.dir = wal.string();
  return kExitOk;
}

// Prints (or writes to --output) the report as text, JSON or JUnit; the
// exit code is the report's.
int RenderCheck(const CheckCliOptions& o, const recovery::CheckReport& rep) {
  const int rc = ExitCode(recovery::CheckOutcome(rep));
  std::string text;
  if (o.format == "json")
    text = walfmt::DumpJson(CheckReportJson(rep, rc), 2) + "\n";
  else if (o.format == "junit")
    text = CheckReportJunit(rep, rc);
  else
    text = CheckReportText(rep, rc);

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
  recovery::Verdict verdict;
  if (const int rc = SetUpNodeCheck(o, opt, verdict); rc != kExitOk) return rc;
  opt.jobs = o.jobs;
  opt.state_path = o.state;
  opt.full = o.full;
  opt.chain_restores = !o.from_genesis;
  auto progress = std::make_shared<StageProgress>();
  if (Progress::Wanted()) {  // the library computes totals only for a progress it reports to
    opt.progress = [progress](const std::string& stage, uint64_t done, uint64_t total) {
      progress->Update(stage, done, total);
    };
  }

  auto rep = recovery::RunCheck(opt);
  progress->Finish();
  opt.progress = nullptr;
  if (!rep.ok()) {
    PrintError(rep.status().message());
    // A DIR that is not a cluster or a cut that does not exist is usage.
    return ExitForStatus(rep.status());
  }
  return RenderCheck(o, *rep);
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
  cmd->add_option("dir", o->dir, "Cluster directory, or one node's directory (see --node)");
  AddNumber(cmd, "--cut", o->cut, kCutIdRange, "Check this cut (default level: restore)");
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
  cmd->add_flag("--full", o->full,
                "With --state: read every segment anyway (an in-place rewrite keeping size and "
                "mtime is only caught this way)");
  cmd->add_flag("--from-genesis", o->from_genesis,
                "Level restore: restore every cut from genesis, not from the previous cut's checked restore "
                "(each restore independent of the others; reads the WAL prefix once per cut)");
  AddNumber(cmd, "-j,--jobs", o->jobs, kJobsRange, "Threads (default: one per core)");
  AddProgressOptions(cmd);
  AddNumber(cmd, "--node", o->node, kNodeIdRange,
            "Check one node where its WAL lives: DIR is its directory (node-<i>, with wal/; checked this way "
            "without --node too) or its WAL directory; level files (default), or restore with --verdict");
  cmd->add_option("--verdict", o->verdict,
                  "One node, level restore: the cut's verdict (walcut cuts SUMMARIES... --verdict-out FILE --cut K); "
                  "the node is restored from it into a temporary directory and read back");
  cmd->add_option("--base", o->base,
                  "One node, level restore: the directory holding its full-snapshot base "
                  "(default NODE_DIR/../snapshots/<name>)");
  // `check merge` (cli/cmd_check_merge.cpp) is a subcommand of this one:
  // when it was given, its action runs.
  reg.Add(cmd, [o, cmd, &reg] {
    for (const auto& [sub, action] : reg.commands()) {
      if (sub != cmd && sub->get_parent() == cmd && sub->parsed()) return action();
    }
    if (o->dir.empty()) {
      PrintError("DIR is required");
      return kExitUsage;
    }
    return RunCheck(*o);
  });
}

const CommandRegistrar kRegister{90, RegisterCheck};

}  // namespace
}  // namespace walcut::cli
