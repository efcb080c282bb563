// walcut restore assemble OUT PARTS...: the per-node restores of one cut
// (walcut restore NODE_DIR --verdict FILE, recovery/part.h), gathered into
// one restore output as a single-host restore writes it.
#include <filesystem>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/output.h"
#include "cli/restore_check.h"
#include "cli/signals.h"
#include "recovery/part.h"
#include "recovery/restore.h"
#include "walfmt/staging.h"
#include "walfmt/text_escape.h"

namespace walcut::cli {
namespace {
using nlohmann::json;

struct AssembleOptions {
  std::string out;
  std::vector<std::string> parts;
  std::string check;  // "", bank, cycle, auto
  Format format = Format::kText;
  bool clean_stale = false;
};

int RunAssemble(const AssembleOptions& o) {
  if (const std::string p = OutputInsideInput("OUT", o.out, o.parts); !p.empty()) {
    PrintError(p);
    return kExitUsage;
  }
  if (const int rc = NoteStaleStaging(o.out, o.clean_stale); rc != kExitOk) return rc;
  auto r = recovery::AssembleParts(o.parts, o.out);
  if (!r.ok()) {
    PrintError(r.status().message());
    return ExitForStatus(r.status());
  }
  auto drop_stage = [&] {
    if (!r->stage_dir.empty()) walfmt::RemoveStaging(r->stage_dir);
  };
  std::vector<std::string> check_lines;
  json check_json;
  if (!o.check.empty()) {
    walfmt::Result<walfmt::ClusterInfo> info =
        r->cluster_json.empty()
            ? walfmt::Result<walfmt::ClusterInfo>(walfmt::Status::InvalidArgument(
                  "--check needs the cluster's description, and the parts carry no cluster.json (give --cluster-json "
                  "to `walcut cuts --verdict-out`)"))
            : walfmt::ParseClusterInfo(r->cluster_json, "cluster.json (from the parts)");
    auto cj = CheckRestoredWith(*r, info, o.parts.front(), o.check, check_lines);
    if (!cj.ok()) {
      drop_stage();
      PrintError(cj.status().message());
      return ExitForStatus(cj.status());
    }
    check_json = *cj;
  }
  const std::string extra = check_json.is_null() ? "" : walfmt::DumpJson(json({{"check", check_json}}));
  if (auto st = recovery::WriteRestore(*r, o.out, extra); !st.ok()) {
    PrintError(st.message());
    return ExitForStatus(st);
  }
  const bool forced = r->status != cut::CutStatus::kConsistent;
  const bool check_failed = !check_json.is_null() && !check_json["ok"].get<bool>();
  if (o.format == Format::kJson) {
    json j;
    j["schema"] = "walcut.restore-assemble/1";
    j["out"] = o.out;
    j["cut"] = r->cut;
    j["status"] = cut::CutStatusName(r->status);
    j["forced"] = forced;
    j["base"] = {{"kind", recovery::BaseKindName(r->base.kind)}, {"name", r->base.name}};
    json nodes = json::array();
    for (const auto& n : r->nodes) {
      nodes.push_back({{"node", n.node},
                       {"entries", n.entries},
                       {"fingerprint", fmt::format("{:016x}", n.fingerprint)},
                       {"txs_applied", n.txs_applied}});
    }
    j["nodes"] = nodes;
    j["parts"] = o.parts;
    if (!check_json.is_null()) j["check"] = check_json;
    fmt::print("{}\n", walfmt::DumpJson(j, 2));
  } else {
    fmt::print("assembled cut {} ({}{}) from {} parts, base {} ({})\n", r->cut, cut::CutStatusName(r->status),
               forced ? ", forced: " + r->reason : "", r->nodes.size(), r->base.name,
               recovery::BaseKindName(r->base.kind));
    for (const auto& n : r->nodes) {
      fmt::print("  node {}: {} keys, fingerprint {:016x}, {} transactions applied\n", n.node, n.entries, n.fingerprint,
                 n.txs_applied);
    }
    for (const auto& l : check_lines) fmt::print("check: {}\n", l);
    fmt::print("wrote {}/node-*.snap and {}/manifest.json\n", o.out, o.out);
  }
  return forced || check_failed ? kExitFindings : kExitOk;
}

void RegisterRestoreAssemble(CLI::App& root, Registry& reg) {
  auto o = std::make_shared<AssembleOptions>();
  CLI::App* restore = root.get_subcommand("restore");
  CLI::App* cmd = restore->add_subcommand(
      "assemble",
      "Gather the per-node restores of one cut (walcut restore NODE_DIR --verdict FILE --out PART, one per node,\n"
      "each on its own host) into one restore output: checks that the parts come from the same verdict (cut,\n"
      "cluster, base) and hold every node exactly once, copies the node files and reads each back (checksums,\n"
      "fingerprint, keys), and writes OUT/node-<i>.snap and OUT/manifest.json as a single-host restore does\n"
      "(walcut diff, snapshot check and --base accept it). Never overwrites OUT.\n"
      "Exit 0 assembled, 1 forced parts, a failed --check or a node file that does not read back, 2 parts that\n"
      "do not belong together or OUT exists, 3 I/O error.");
  cmd->add_option("out", o->out, "Output directory (must not exist)")->required();
  cmd->add_option("parts", o->parts, "The per-node restore outputs, one per node, in any order")->required();
  cmd->add_option("--check", o->check,
                  "Check the workload invariants on the assembled state, as restore --check does (the cluster "
                  "description comes from the verdict's cluster.json)")
      ->check(CLI::IsMember({"bank", "cycle", "auto"}));
  cmd->add_flag("--clean-stale", o->clean_stale,
                "Remove the staging directories and lock files that killed walcut processes left beside OUT");
  AddFormatOption(cmd, o->format);
  reg.Add(cmd, [o] { return RunAssemble(*o); });
}

const CommandRegistrar kRegister{76, RegisterRestoreAssemble};

}  // namespace
}  // namespace walcut::cli
