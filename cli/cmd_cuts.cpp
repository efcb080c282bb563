// walcut cuts DIR: every cut of the cluster with its status, per-node
// CUT_START / CUT_FINISH, transaction counts, and the restore window.
#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/cut_common.h"
#include "cli/numbers.h"
#include "cli/output.h"
#include "recovery/verdict.h"
#include "walfmt/file_io.h"
#include "walfmt/text_escape.h"

namespace walcut::cli {
namespace {
using nlohmann::json;

struct CutsOptions {
  std::vector<std::string> paths;
  Format format = Format::kText;
  unsigned jobs = 0;
  // --verdict-out: the verdict of one cut for the per-node restores.
  std::string verdict_out;
  uint64_t cut = 0;
  bool latest = false;
  std::string base;
  std::string cluster_json;
};

// `walcut cuts ... --verdict-out FILE --cut K`: the verdict of cut K
// (recovery/verdict.h), for `walcut restore NODE_DIR --verdict FILE` on
// every node's host. Exit 0 when the cut is consistent, 1 when not (the
// verdict is written all the same: a forced restore needs it).
int RunVerdict(const CutsOptions& o) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if ((o.cut > 0) + o.latest != 1) {
    PrintError("--verdict-out needs exactly one of --cut K, --latest");
    return kExitUsage;
  }
  if (fs::exists(o.verdict_out, ec)) {
    PrintError(fmt::format("{}: already exists; refusing to overwrite", o.verdict_out));
    return kExitUsage;
  }
  if (const std::string p = OutputInsideInput("--verdict-out", o.verdict_out, o.paths); !p.empty()) {
    PrintError(p);
    return kExitUsage;
  }
  const bool cluster_dir = o.paths.size() == 1 && fs::is_directory(o.paths[0], ec);
  if (cluster_dir && !o.cluster_json.empty()) {
    PrintError("--cluster-json goes with summary files; a cluster directory has its own cluster.json");
    return kExitUsage;
  }
  recovery::VerdictOptions vo;
  vo.base = o.base;
  std::optional<cut::ClusterLayout> layout;
  if (cluster_dir) {
    auto l = cut::FindClusterLayout(o.paths[0]);
    if (!l.ok()) {
      PrintError(l.status().message());
      return ExitForStatus(l.status());
    }
    layout = std::move(l.value());
  }
  const std::string cj_path =
      layout ? (layout->has_cluster_json ? (fs::path(layout->dir) / "cluster.json").string() : "") : o.cluster_json;
  if (!cj_path.empty()) {
    auto text = walfmt::ReadWholeFile(cj_path, walfmt::kMaxJsonFileBytes);
    if (!text.ok()) {
      PrintError(text.status().message());
      return ExitForStatus(text.status());  // a missing file is kNotFound: usage
    }
    vo.cluster_json = std::move(text.value());
  }
  auto cc = LoadCuts(o.paths, o.jobs);
  if (!cc.ok()) {
    PrintError(cc.status().message());
    return ExitForStatus(cc.status());
  }
  if (layout) {
    const size_t n = cc->nodes.size();
    const std::string dir = layout->dir;
    vo.snapshot_files_missing = [dir, n](const std::string& name) -> std::string {
      std::error_code e;
      const fs::path d = fs::path(dir) / "snapshots" / name;
      for (size_t i = 0; i < n; ++i) {
        if (!fs::is_regular_file(d / fmt::format("node-{}.snap", i), e))
          return fmt::format("{} lacks its files", d.string());
      }
      return "";
    };
  }
  const uint64_t k = CutOrLatest(*cc, o.cut, o.latest);
  if (o.latest && k == 0) return kExitFindings;
  auto v = recovery::MakeVerdict(*cc, k, vo);
  if (!v.ok()) {
    PrintError(v.status().message());
    return ExitForStatus(v.status());
  }
  const std::string text = recovery::VerdictToJson(*v);
  if (auto st = walfmt::WriteFileAtomic(o.verdict_out, text); !st.ok()) {
    PrintError(st.message());
    return kExitIo;
  }
  const bool consistent = v->status == cut::CutStatus::kConsistent;
  if (o.format == Format::kJson) {
    json j = {{"schema", "walcut.verdict-out/1"},
              {"cut", v->cut},
              {"status", cut::CutStatusName(v->status)},
              {"nodes", v->nodes.size()},
              {"base", {{"kind", recovery::BaseKindName(v->base_kind)}, {"name", v->base_name}, {"why", v->base_why}}},
              {"verdict", v->id},
              {"file", o.verdict_out},
              {"bytes", text.size()}};
    if (!consistent) j["reason"] = v->reason;
    fmt::print("{}\n", walfmt::DumpJson(j, 2));
  } else {
    fmt::print("verdict {}: cut {} of {} nodes is {}{}\n", v->id, v->cut, v->nodes.size(),
               cut::CutStatusName(v->status),
               consistent ? "" : fmt::format(" ({}); the node restores refuse it unless --force", v->reason));
    fmt::print("  base: {} ({})\n", v->base_name, v->base_why);
    fmt::print("wrote {} ({})\n", o.verdict_out, HumanBytes(text.size()));
  }
  return consistent ? kExitOk : kExitFindings;
}

// A node's CUT_START or CUT_FINISH: its position and time (the time of day
// when the cut's row shows the date, cli/clock.h).
std::string At(const cut::NodeCut* nc, bool start, const walfmt::ClusterClock& clock, uint64_t ref) {
  if (!nc) return "-";
  if (start) {
    return nc->started ? fmt::format("{} {}", nc->start.ToString(), ShortTime(clock, nc->start_time_us, ref)) : "-";
  }
  return nc->finished ? fmt::format("{} {}", nc->finish.ToString(), ShortTime(clock, nc->finish_time_us, ref)) : "-";
}

// When the cut finished (its latest CUT_FINISH, the time --before compares);
// "-" when no node finished it (the node rows show its CUT_START times).
std::string CutTime(const cut::GlobalCut& g, const walfmt::ClusterClock& clock) {
  return g.finish_time_us > 0 ? clock.Format(g.finish_time_us) : "-";
}

// `walcut cuts --format json`; `counts` by cut::CutStatus.
void PrintCutsJson(const CutsOptions& o, const cut::ClusterCuts& cc, const uint64_t (&counts)[5]) {
  json j;
  j["schema"] = kCutsSchema;
  j["input"] = o.paths;
  j["nodes"] = cc.nodes.size();
  j["epoch_unix_us"] = cc.epoch_unix_us ? json(*cc.epoch_unix_us) : json(nullptr);
  j["epoch"] = cc.epoch_unix_us ? json(ClockOf(cc).Format(0)) : json(nullptr);
  j["counts"] = {{"cuts", cc.cuts.size()},
                 {"consistent", counts[static_cast<int>(cut::CutStatus::kConsistent)]},
                 {"inconsistent", counts[static_cast<int>(cut::CutStatus::kInconsistent)]},
                 {"incomplete", counts[static_cast<int>(cut::CutStatus::kIncomplete)]},
                 {"unavailable", counts[static_cast<int>(cut::CutStatus::kUnavailable)]}};
  j["window"] = WindowJson(cc.window);
  j["snapshots"] = SnapshotsJson(cc);
  json wal = json::array();
  for (const auto& s : cc.nodes) {
    json n = {{"node", s.node}, {"end", s.end.ToString()}, {"records", s.records}, {"commits", s.commits}};
    n["torn_tail"] = s.torn_tail ? json(s.torn_at.ToString()) : json(nullptr);
    n["damage"] = s.damaged ? json({{"at", s.damage_at.ToString()}, {"message", s.damage}}) : json(nullptr);
    wal.push_back(std::move(n));
  }
  j["wal"] = wal;
  json cuts = json::array();
  for (const auto& g : cc.cuts) cuts.push_back(CutJson(g, false, ClockOf(cc)));
  j["cuts"] = cuts;
  json fs = json::array();
  for (const auto& f : cc.findings) fs.push_back(FindingJson(f));
  j["findings"] = fs;
  fmt::print("{}\n", walfmt::DumpJson(j, 2));
}

int RunCuts(const CutsOptions& o) {
  if (!o.verdict_out.empty()) return RunVerdict(o);
  if (o.cut > 0 || o.latest || !o.base.empty() || !o.cluster_json.empty()) {
    PrintError("--cut, --latest, --base and --cluster-json go with --verdict-out FILE");
    return kExitUsage;
  }
  auto cc = LoadCuts(o.paths, o.jobs);
  if (!cc.ok()) {
    PrintError(cc.status().message());
    return ExitForStatus(cc.status());
  }
  if (o.paths.size() == 1) AddListedSnapshots(*cc, o.paths[0]);
  uint64_t counts[5] = {0, 0, 0, 0, 0};  // by cut::CutStatus
  for (const auto& g : cc->cuts) ++counts[static_cast<int>(g.status)];
  bool damaged = false;
  for (const auto& s : cc->nodes) damaged = damaged || s.damaged;
  const bool findings = counts[static_cast<int>(cut::CutStatus::kInconsistent)] > 0 || !cc->findings.empty() || damaged;
  const std::string where = o.paths.size() == 1 ? o.paths[0] : fmt::format("{} summaries", o.paths.size());

  if (o.format == Format::kJson) {
    PrintCutsJson(o, *cc, counts);
    return findings ? kExitFindings : kExitOk;
  }

  const uint64_t unavailable = counts[static_cast<int>(cut::CutStatus::kUnavailable)];
  fmt::print("cluster {}: {} nodes, {} cuts: {} consistent, {} inconsistent, {} incomplete{}\n", where,
             cc->nodes.size(), cc->cuts.size(), counts[static_cast<int>(cut::CutStatus::kConsistent)],
             counts[static_cast<int>(cut::CutStatus::kInconsistent)],
             counts[static_cast<int>(cut::CutStatus::kIncomplete)],
             unavailable > 0 ? fmt::format(", {} unavailable", unavailable) : "");
  const walfmt::ClusterClock clock = ClockOf(*cc);
  fmt::print("{}\n", ClockLine(clock));
  for (const auto& l : WindowLines(cc->window)) fmt::print("{}\n", l);
  for (const auto& s : cc->nodes) {
    if (s.pruned) {
      fmt::print("wal: node {} starts at {} (segments before it were removed)\n", s.node, s.wal_start.ToString());
    }
  }
  for (const auto& l : SnapshotLines(*cc)) fmt::print("{}\n", l);
  for (const auto& s : cc->nodes) {
    if (s.damaged) fmt::print("wal: {}\n", s.damage);
    if (s.torn_tail)
      fmt::print("wal: node {} ends in a torn record at {} ({} bytes; a crash artefact)\n", s.node,
                 s.torn_at.ToString(), s.torn_bytes);
  }
  // The time column is as wide as the widest time (ISO: 27 characters).
  size_t time_width = 8;
  for (const auto& g : cc->cuts) time_width = std::max(time_width, CutTime(g, clock).size());
  fmt::print("\n{:>5}  {:<12} {:>8} {:>7} {:>6}  {:<{}}  {}\n", "cut", "status", "txs", "before", "after", "finished",
             time_width, "rule 5 (before committed after start / after committed before start)");
  for (const auto& g : cc->cuts) {
    fmt::print("{:>5}  {:<12} {:>8} {:>7} {:>6}  {:<{}}  {} / {}\n", g.cut_id, cut::CutStatusName(g.status),
               g.transactions, g.before, g.after, CutTime(g, clock), time_width, g.before_after_start,
               g.after_before_start);
    const uint64_t ref = g.finish_time_us > 0 ? g.finish_time_us : g.start_time_us;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const cut::NodeCut* nc = g.nodes[i];
      fmt::print("       node {}: {:<10} start {:<28} finish {:<28} before {:>3} after {:>3} txs {}\n", i,
                 nc ? cut::CutEndName(nc->end) : "absent", At(nc, true, clock, ref), At(nc, false, clock, ref),
                 nc ? nc->before.size() : 0, nc ? nc->after.size() : 0, g.node_transactions[i]);
    }
    if (!g.reason.empty()) {
      fmt::print("       reason: {}\n", g.reason);
      fmt::print("       nearest consistent: before {}, after {}\n",
                 g.consistent_before ? std::to_string(*g.consistent_before) : "none",
                 g.consistent_after ? std::to_string(*g.consistent_after) : "none");
    }
  }
  if (!cc->findings.empty()) {
    fmt::print("\nfindings not tied to one cut:\n");
    for (const auto& f : cc->findings) fmt::print("  {}: {}\n", f.check, f.message);
  }
  return findings ? kExitFindings : kExitOk;
}

void RegisterCuts(CLI::App& root, Registry& reg) {
  auto o = std::make_shared<CutsOptions>();
  CLI::App* cmd = root.add_subcommand(
      "cuts",
      "List every cut of a cluster: consistent / inconsistent / incomplete / unavailable (with a one-line\n"
      "reason naming the node and the record or transaction at fault, or the removed segments its evidence\n"
      "lay in), per-node CUT_START and CUT_FINISH positions and times, transactions in the cut,\n"
      "before/after counts, the restore window, and the full snapshots with the cuts each can serve.\n"
      "Exit 0 when no cut is inconsistent and the WAL is intact (an incomplete last cut is reported, not a\n"
      "failure), 1 on findings, 2 usage error, 3 I/O error.");
  cmd->add_option("paths", o->paths, "A cluster directory, or one summary file per node (walcut scan --out)")
      ->required();
  AddFormatOption(cmd, o->format);
  AddNumber(cmd, "-j,--jobs", o->jobs, kJobsRange,
            "Threads scanning the WALs (default: one per core); nodes take turns segment by segment");
  AddProgressOptions(cmd);
  cmd->add_option("--verdict-out", o->verdict_out,
                  "Write the verdict of one cut (--cut K or --latest) to FILE for the per-node restores "
                  "(walcut restore NODE_DIR --verdict FILE) and print one line instead of the table; exit 0 when the "
                  "cut is consistent, 1 when not; never overwrites FILE");
  AddNumber(cmd, "--cut", o->cut, kCutIdRange, "With --verdict-out: the cut");
  cmd->add_flag("--latest", o->latest, "With --verdict-out: the latest restorable cut");
  cmd->add_option("--base", o->base,
                  "With --verdict-out: 'genesis' or a full snapshot name (default: chosen as restore chooses)");
  cmd->add_option("--cluster-json", o->cluster_json,
                  "With --verdict-out and summary files: the cluster's cluster.json, carried in the verdict (the "
                  "restored files then carry its cluster id, and the assembled manifest its copy)");
  reg.Add(cmd, [o] { return RunCuts(*o); });
}

const CommandRegistrar kRegister{60, RegisterCuts};

}  // namespace
}  // namespace walcut::cli
