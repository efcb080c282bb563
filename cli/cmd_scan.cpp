// walcut scan NODE_DIR --out FILE: one node's WAL summary, so that the
// per-node scans can run where the WAL lives and only summaries travel.
#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "cli/clock.h"
#include "cli/command.h"
#include "cli/inputs.h"
#include "cli/numbers.h"
#include "cli/output.h"
#include "cut/load.h"
#include "cut/scan.h"
#include "recovery/part_node_dir.h"
#include "walfmt/file_io.h"

namespace walcut::cli {
namespace {
namespace fs = std::filesystem;

struct ScanCmdOptions {
  std::string node_dir;
  std::string out;
  int node = -1;
};

// NODE_DIR is a node directory (with wal/ inside, named node-<i>) or its wal
// directory itself.
int RunScan(const ScanCmdOptions& o) {
  std::error_code ec;
  fs::path dir(o.node_dir);
  if (!fs::is_directory(dir, ec)) {
    PrintError(fmt::format("{}: no such directory", o.node_dir));
    return kExitUsage;
  }
  fs::path wal = fs::is_directory(dir / "wal", ec) ? dir / "wal" : dir;
  if (o.node >= 0) {
    if (const std::string bad = recovery::NodeOutOfRange(o.node, (wal == dir ? dir.parent_path() : dir).string());
        !bad.empty()) {
      PrintError(bad);
      return kExitUsage;
    }
  }
  int node = o.node;
  if (node < 0) {
    const std::string name = (wal == dir ? dir.parent_path() : dir).filename().string();
    if (name.rfind("node-", 0) == 0) node = std::atoi(name.c_str() + 5);
  }
  if (node < 0) {
    PrintError(fmt::format("{}: cannot tell the node id from the path; give --node", o.node_dir));
    return kExitUsage;
  }
  if (fs::exists(o.out, ec)) {
    PrintError(fmt::format("{}: already exists; refusing to overwrite", o.out));
    return kExitUsage;
  }
  if (const std::string p = OutputInsideInput("--out", o.out, {o.node_dir}); !p.empty()) {
    PrintError(p);
    return kExitUsage;
  }
  Progress progress("scan");
  if (progress.enabled()) {
    if (auto segs = walfmt::ListSegments(wal.string(), [](const walfmt::Problem&) {}); segs.ok()) {
      progress.SetTotal(DataBytes({walfmt::NodeSegments{*segs, std::nullopt}}));
    }
  }
  cut::ScanOptions so;
  so.node = static_cast<uint32_t>(node);
  so.progress = [&progress](uint64_t b) { progress.Update(b); };
  auto s = cut::ScanNode(wal.string(), so);
  progress.Finish();
  if (!s.ok()) {
    PrintError(s.status().message());
    return ExitForStatus(s.status());
  }
  // The epoch of the cluster the node lies in (its cluster.json), so that
  // the commands reading the summaries print real times.
  s->epoch_unix_us = ClockNear(o.node_dir).epoch_unix_us;
  if (auto st = walfmt::WriteFileAtomic(o.out, cut::SummaryToJson(*s)); !st.ok()) {
    PrintError(st.message());
    return kExitIo;
  }
  fmt::print("node {}: {} records, {} cuts, {} findings{}{} -> {}\n", s->node, s->records, s->cuts.size(),
             s->findings.size() + s->findings_dropped, s->torn_tail ? ", torn tail at " + s->torn_at.ToString() : "",
             s->damaged ? ", damaged at " + s->damage_at.ToString() : "", o.out);
  return kExitOk;
}

void RegisterScan(CLI::App& root, Registry& reg) {
  auto o = std::make_shared<ScanCmdOptions>();
  CLI::App* cmd = root.add_subcommand(
      "scan",
      "Summarize one node's WAL (cut records, tracked transactions, commit counts and digests) into a file.\n"
      "Every global command (cuts, cut show, check) accepts a set of summaries instead of a cluster directory,\n"
      "so the scans can run on the machines that hold the WAL and only the summaries travel.");
  cmd->add_option("node_dir", o->node_dir, "Node directory (node-<i>, with wal/ inside) or its wal directory")
      ->required();
  cmd->add_option("-o,--out", o->out, "Summary file to write (JSON, schema walcut.summary/1); never overwritten")
      ->required();
  AddNumber(cmd, "--node", o->node, kNodeIdRange, "Node id (default: from the directory name node-<i>)");
  AddProgressOptions(cmd);
  reg.Add(cmd, [o] { return RunScan(*o); });
}

const CommandRegistrar kRegister{55, RegisterScan};

}  // namespace
}  // namespace walcut::cli
