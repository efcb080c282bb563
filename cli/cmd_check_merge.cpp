// walcut check merge REPORT...: the JSON reports of `walcut check NODE_DIR`
// run on every node where its WAL lives (docs/scale-out.md), joined into one
// report (text, JSON walcut.check/1 or JUnit XML).
#include <chrono>

#include <fmt/format.h>

#include "cli/check_report.h"
#include "cli/command.h"
#include "cli/metrics.h"
#include "cli/output.h"
#include "recovery/check.h"
#include "recovery/check_merge.h"
#include "walfmt/file_io.h"

namespace walcut::cli {
namespace {

struct MergeOptions {
  std::vector<std::string> reports;
  std::string format = "text";
  std::string output;
  std::string metrics;
};

int RunMerge(const MergeOptions& o) {
  for (const auto& [option, path] :
       {std::pair<const char*, std::string>{"--output", o.output}, {"--metrics", o.metrics}}) {
    if (const std::string p = OutputInsideInput(option, path, o.reports); !p.empty()) {
      PrintError(p);
      return kExitUsage;
    }
  }
  const auto started = std::chrono::steady_clock::now();
  std::vector<recovery::CheckReport> reports;
  for (const auto& path : o.reports) {
    auto r = recovery::ReadCheckReport(path);
    if (!r.ok()) {
      PrintError(r.status().message());
      return ExitForStatus(r.status());
    }
    reports.push_back(std::move(r.value()));
  }
  auto m = recovery::MergeCheckReports(std::move(reports), o.reports);
  if (!m.ok()) {
    PrintError(m.status().message());
    return kExitUsage;
  }
  const int rc = ExitCode(recovery::CheckOutcome(*m));
  const std::string text = CheckReportAs(o.format, *m, rc);
  if (o.output.empty()) {
    fmt::print("{}", text);
  } else if (auto st = walfmt::WriteFileAtomic(o.output, text); !st.ok()) {
    PrintError(st.message());
    return kExitIo;
  } else {
    fmt::print("merged {} reports: {}; {} report in {}\n", o.reports.size(), CheckVerdict(*m, rc), o.format, o.output);
  }
  if (o.metrics.empty()) return rc;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const int mrc = WriteMetrics(o.metrics, CheckMetrics(*m, rc, secs, NowUnixMicros()));
  return mrc != 0 ? mrc : rc;
}

void RegisterCheckMerge(CLI::App& root, Registry& reg) {
  auto o = std::make_shared<MergeOptions>();
  CLI::App* check = root.get_subcommand("check");
  CLI::App* cmd = check->add_subcommand(
      "merge",
      "Join the JSON reports of `walcut check NODE_DIR ... --format json`, one per node, each run where the\n"
      "node's WAL lives, into one report: files counts summed, the checks level by level and node by node,\n"
      "tool errors kept. Refuses a report that is not of one node, a node twice, reports of different cuts\n"
      "or verdicts.\n"
      "Exit as walcut check on the merged report: 0 all good, 1 findings, 2 usage error, 3 tool errors.");
  cmd->add_option("reports", o->reports, "Per-node reports (walcut.check/1 JSON)")->required();
  cmd->add_option("--format", o->format, "text (default), json (walcut.check/1) or junit (JUnit XML)")
      ->check(CLI::IsMember({"text", "json", "junit"}))
      ->type_name("text|json|junit");
  cmd->add_option("-o,--output", o->output,
                  "Write the merged report to FILE (atomically); stdout gets a one-line summary");
  cmd->add_option("--metrics", o->metrics,
                  "Also write the merged result as Prometheus metrics to FILE (atomically; as walcut check "
                  "--metrics: findings by check, WAL read per node)");
  reg.Add(cmd, [o] { return RunMerge(*o); });
}

const CommandRegistrar kRegister{91, RegisterCheckMerge};

}  // namespace
}  // namespace walcut::cli
