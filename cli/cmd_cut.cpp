// walcut cut show DIR K: the global snapshot of one cut, node by node
// (LocalState, ChannelState, the marker cross-check, checks 1-5), and with
// --svg FILE its space-time diagram (cut/svg.h).

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/cut_common.h"
#include "cli/numbers.h"
#include "cli/output.h"
#include "cut/svg.h"
#include "walfmt/file_io.h"
#include "walfmt/text_escape.h"

namespace walcut::cli {
namespace {
using nlohmann::json;

struct CutShowOptions {
  std::vector<std::string> paths;  // cluster dir or summaries, then the cut id last
  Format format = Format::kText;
  unsigned jobs = 0;
  std::string svg;  // --svg FILE: also write the diagram there
};

const char* Ok(bool b) { return b ? "ok" : "FAILED"; }

void PrintTracked(const char* side, const cut::TrackedTx& t, const cut::NodeCut& nc, uint64_t k) {
  if (t.rolled_back) {
    fmt::print("    {:<6} {:<12} rolled back at {}  (a rolled-back transaction must not be tracked)\n", side,
               t.tx.Readable(), t.commit.ToString());
    return;
  }
  if (!t.committed) {
    fmt::print("    {:<6} {:<12} no TX_COMMIT found on this node\n", side, t.tx.Readable());
    return;
  }
  const bool before = std::string(side) == "before";
  const bool agree = (t.marker < k) == before;
  fmt::print("    {:<6} {:<12} committed {} {} CUT_START  marker {} {} {}{}{}\n", side, t.tx.Readable(),
             t.commit.ToString(), t.commit > nc.start ? "after " : "before", t.marker, t.marker < k ? "<" : ">=", k,
             agree ? "" : "  MARKER DISAGREES", t.recovered ? "  (recovered)" : "");
}

// Refuses an SVG path inside (or equal to) one of the inputs: walcut never
// writes to its input. Empty when the path is acceptable.
std::string SvgPathProblem(const std::string& svg, const std::vector<std::string>& inputs) {
  std::error_code ec;
  if (std::filesystem::is_directory(svg, ec)) return fmt::format("--svg {}: is a directory", svg);
  return OutputInsideInput("--svg", svg, inputs);
}

void PrintCutShowJson(const cut::ClusterCuts& cc, const cut::GlobalCut& g, const std::vector<std::string>& inputs) {
  json j = CutJson(g, true, ClockOf(cc));
  j["schema"] = kCutSchema;
  j["input"] = inputs;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (const cut::NodeCut* nc = g.nodes[i]; nc && nc->started) {
      j["nodes"][i]["local_state"] = {{"wal_prefix_end", nc->start.ToString()}, {"commits", nc->commits_before_start}};
    }
  }
  fmt::print("{}\n", walfmt::DumpJson(j, 2));
}

// One node's part of cut K in `cut show` text.
void PrintCutNode(const cut::GlobalCut& g, size_t i, const walfmt::ClusterClock& clock, uint64_t k) {
  const cut::NodeCut* nc = g.nodes[i];
  fmt::print("\nnode {}: {}\n", i, nc ? cut::CutEndName(nc->end) : "no record of this cut");
  if (!nc) return;
  if (nc->started) {
    fmt::print("  LocalState: the WAL prefix up to CUT_START {} ({}): {} commits\n", nc->start.ToString(),
               clock.Format(nc->start_time_us), nc->commits_before_start);
  } else {
    fmt::print("  LocalState: no CUT_START\n");
  }
  if (nc->finished) {
    fmt::print("  ChannelState: before {}, after {} (CUT_FINISH {} at {})\n", nc->before.size(), nc->after.size(),
               nc->finish.ToString(), clock.Format(nc->finish_time_us));
  } else {
    fmt::print("  ChannelState: unknown, no CUT_FINISH\n");
  }
  for (const auto& t : nc->before) PrintTracked("before", t, *nc, k);
  for (const auto& t : nc->after) PrintTracked("after", t, *nc, k);
  for (const auto& a : nc->aborts) {
    fmt::print("  CUT_ABORT at {}: {}{}{}\n", a.at.ToString(), walfmt::CutAbortReasonName(a.reason),
               a.detail.empty() ? "" : ": ", a.detail);
  }
  if (nc->restarted) fmt::print("  the node restarted during the cut\n");
  fmt::print("  transactions of the cut on this node: {}\n", g.node_transactions[i]);
}

int RunCutShow(const CutShowOptions& o) {
  if (o.paths.size() < 2) {
    PrintError("usage: walcut cut show DIR K (or SUMMARY... K)");
    return kExitUsage;
  }
  std::vector<std::string> inputs(o.paths.begin(), o.paths.end() - 1);
  std::string bad_k;
  const std::optional<uint64_t> parsed = ParseInRange("K", o.paths.back(), kCutIdRange, bad_k);
  if (!parsed) {
    PrintError(bad_k);
    return kExitUsage;
  }
  const uint64_t k = *parsed;
  if (!o.svg.empty()) {
    if (std::string why = SvgPathProblem(o.svg, inputs); !why.empty()) {
      PrintError(why);
      return kExitUsage;
    }
  }
  auto cc = LoadCuts(inputs, o.jobs);
  if (!cc.ok()) {
    PrintError(cc.status().message());
    return ExitForStatus(cc.status());
  }
  const cut::GlobalCut* g = cc->Find(k);
  if (!g) {
    std::string have;
    for (const auto& c : cc->cuts) have += (have.empty() ? "" : ", ") + std::to_string(c.cut_id);
    PrintError(fmt::format("cut {} is not in the WAL (cuts: {})", k, have.empty() ? "none" : have));
    return kExitUsage;
  }
  const int rc = g->status == cut::CutStatus::kConsistent ? kExitOk : kExitFindings;
  // The picture is written before any output, so a failure to write it is
  // the command's result (exit 3) and never follows a complete report.
  if (!o.svg.empty()) {
    if (auto st = walfmt::WriteFileAtomic(o.svg, cut::RenderCutSvg(*cc, k, {})); !st.ok()) {
      PrintError(st.message());
      return ExitForStatus(st);
    }
  }
  if (o.format == Format::kJson) {
    PrintCutShowJson(*cc, *g, inputs);
    return rc;
  }
  const walfmt::ClusterClock clock = ClockOf(*cc);
  fmt::print("cut {}: {}{}\n", k, cut::CutStatusName(g->status), g->reason.empty() ? "" : " - " + g->reason);
  if (g->start_time_us > 0 || g->finish_time_us > 0) {
    fmt::print("  started {}, finished {}{}\n", clock.Format(g->start_time_us),
               g->finish_time_us > 0 ? clock.Format(g->finish_time_us) : "-",
               clock.known() ? "" : " (cluster time since creation: no epoch in cluster.json)");
  }
  fmt::print(
      "  {} nodes; {} transactions in the cut; before {} / after {} (summed over nodes); "
      "rule 5: {} before committed after CUT_START, {} after committed before it\n",
      g->nodes.size(), g->transactions, g->before, g->after, g->before_after_start, g->after_before_start);
  fmt::print(
      "  checks: 1 atomicity {}, 2 monotonicity {}, 3 shape {}, 4 rollback {}, 5 completeness {}; "
      "marker cross-check {}\n",
      Ok(g->checks.atomicity), Ok(g->checks.monotonicity), Ok(g->checks.shape), Ok(g->checks.rollback),
      Ok(g->checks.completeness), Ok(g->checks.markers));
  if (g->status != cut::CutStatus::kConsistent) {
    fmt::print("  nearest consistent cuts: before {}, after {}\n",
               g->consistent_before ? std::to_string(*g->consistent_before) : "none",
               g->consistent_after ? std::to_string(*g->consistent_after) : "none");
  }
  for (size_t i = 0; i < g->nodes.size(); ++i) PrintCutNode(*g, i, clock, k);
  if (!g->findings.empty()) {
    fmt::print("\nfindings:\n");
    for (const auto& f : g->findings) fmt::print("  {}: {}\n", f.check, f.message);
  }
  if (!o.svg.empty()) fmt::print("\nwrote {}\n", o.svg);
  return rc;
}

void RegisterCut(CLI::App& root, Registry& reg) {
  auto o = std::make_shared<CutShowOptions>();
  CLI::App* cut =
      root.add_subcommand("cut", "Inspect one cut (cut show), or ask a running cluster for one (cut start)");
  cut->require_subcommand(1);
  CLI::App* show = cut->add_subcommand(
      "show",
      "The global snapshot of cut K, node by node: LocalState (the WAL prefix up to CUT_START), ChannelState\n"
      "(the before and after sets with commit positions), the marker cross-check (T is in cut K iff m(T) < K)\n"
      "and checks 1-5 of docs/cut-rule.md.\n"
      "With --svg FILE, also writes the space-time diagram of the cut to FILE (SVG 1.1): one line per node,\n"
      "CUT_START and CUT_FINISH marks, the cut line, tracked transactions as arrows coloured before / after /\n"
      "unresolved, and a legend. FILE is replaced if it exists; it may not lie inside an input.\n"
      "Exit 0 when the cut is consistent, 1 when it is not, 2 usage error (no such cut), 3 I/O error.");
  show->add_option("args", o->paths, "DIR K, or SUMMARY... K")->required()->expected(2, -1);
  AddFormatOption(show, o->format);
  AddNumber(show, "-j,--jobs", o->jobs, kJobsRange,
            "Threads scanning the WALs (default: one per core); nodes take turns segment by segment");
  AddProgressOptions(show);
  show->add_option("--svg", o->svg, "Also write the space-time diagram of the cut to FILE (SVG)")->type_name("FILE");
  reg.Add(show, [o] { return RunCutShow(*o); });
}

const CommandRegistrar kRegister{65, RegisterCut};

}  // namespace
}  // namespace walcut::cli
