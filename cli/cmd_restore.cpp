// walcut restore DIR --cut K | --latest | --before TIME --out OUT: every node
// restored to a cut from a base (genesis, a full snapshot, or an earlier
// restore) plus the WAL.
#include <filesystem>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/cut_common.h"
#include "cli/inputs.h"
#include "cli/numbers.h"
#include "cli/output.h"
#include "cli/repo_commands.h"
#include "cli/restore_check.h"
#include "cli/signals.h"
#include "cut/load.h"
#include "recovery/invariants.h"
#include "recovery/key_subset.h"
#include "recovery/part.h"
#include "recovery/part_node_dir.h"
#include "recovery/restore.h"
#include "recovery/state_set.h"
#include "recovery/verdict.h"
#include "walfmt/cluster_layout.h"
#include "walfmt/duration.h"
#include "walfmt/file_io.h"
#include "walfmt/staging.h"
#include "walfmt/text_escape.h"
#include "walfmt/workload.h"

namespace walcut::cli {
namespace {
using nlohmann::json;

struct RestoreOptions {
  RepoAccess access;  // --repo s3://...
  std::string dir;
  uint64_t cut = 0;
  bool latest = false;
  std::string before;
  std::string base;
  std::string out;
  bool dry_run = false;
  bool force = false;
  unsigned jobs = 0;
  unsigned io_threads = 1;
  Format format = Format::kText;
  std::string check;  // "", bank, cycle, auto
  std::string repo;   // --repo: restore from a repository (cli/cmd_restore_repo.cpp); `dir` is then the artifact
  // One node where its WAL lives: `dir` is then NODE_DIR.
  int node = -1;
  std::string verdict;
  std::vector<std::string> summaries;
  std::string cluster_json;
  bool clean_stale = false;
  // Partial restore: --keys PREFIX and --partition P, each repeatable.
  std::vector<std::string> keys;
  std::vector<uint32_t> partitions;
  bool partial() const { return !keys.empty() || !partitions.empty(); }
  recovery::KeySubset Subset() const { return {keys, partitions, 0}; }
};

}  // namespace

// Runs the workload invariants on the staged node files (read back, so the
// files themselves are what is checked). Returns the findings as JSON.
walfmt::Result<json> CheckRestored(const recovery::RestoreResult& r, const std::string& dir, const std::string& what,
                                   std::vector<std::string>& lines) {
  return CheckRestoredWith(r, walfmt::LoadClusterInfo(dir), dir, what, lines);
}

json SubsetJson(const recovery::KeySubset& s) {
  if (s.whole()) return nullptr;
  return {{"key_prefixes", s.prefixes}, {"partitions", s.partitions}, {"partition_count", s.partition_count}};
}

walfmt::Result<json> CheckRestoredWith(const recovery::RestoreResult& r,
                                       const walfmt::Result<walfmt::ClusterInfo>& info, const std::string& dir,
                                       const std::string& what, std::vector<std::string>& lines) {
  if (!info.ok()) return info.status();
  recovery::InvariantOptions io = recovery::OptionsFor(info->workload);
  if (what == "bank") {
    io.cycle = false;
    io.bank = true;
  } else if (what == "cycle") {
    io.bank = false;
    io.cycle = true;
  }
  if ((io.bank && !info->has_bank()) || (io.cycle && !info->has_cycle())) {
    return walfmt::Status::InvalidArgument(fmt::format("--check {}: the {} workload of {} has no such keys", what,
                                                       walfmt::WorkloadName(info->workload), dir));
  }
  recovery::LoadOptions lo;
  lo.expected_nodes = info->nodes;
  lo.expected_cluster_id = info->cluster_id;
  auto set = recovery::LoadStateSet(r.stage_dir, lo);
  if (!set.ok()) return set.status();
  const auto report = recovery::CheckInvariants(info.value(), recovery::StatesOf(*set), io);
  json j = {{"checks", json::array()}, {"ok", report.ok()}, {"findings", json::array()}};
  if (io.bank) j["checks"].push_back("bank");
  if (io.cycle) j["checks"].push_back("cycle");
  if (report.bank_total) j["bank_total"] = *report.bank_total;
  j["expected_bank_total"] = info->initial_bank_total;
  j["ring_walked"] = report.ring_walked;
  j["total_findings"] = report.total_findings;
  for (const auto& f : report.findings) {
    json x = {{"check", f.check}, {"message", f.message}, {"keys", f.keys}, {"key_count", f.key_count}};
    x["node"] = f.node ? json(*f.node) : json(nullptr);
    if (!f.expected.empty()) x["expected"] = f.expected;
    if (!f.found.empty()) x["found"] = f.found;
    j["findings"].push_back(std::move(x));
    lines.push_back(f.message);
  }
  if (report.ok()) {
    lines.push_back(io.bank && report.bank_total
                        ? fmt::format("invariants hold: bank total {} as in cluster.json{}", *report.bank_total,
                                      io.cycle ? fmt::format(", one ring of {} keys", report.ring_walked) : "")
                        : fmt::format("invariants hold: one ring of {} keys", report.ring_walked));
  }
  return j;
}

namespace {

json NodeJson(const recovery::NodeRestore& n, bool dry_run) {
  json segs = json::array();
  for (const auto& s : n.segments) segs.push_back(s.file);
  json j = {{"node", n.node},
            {"wal_from", n.from.ToString()},
            {"wal_to", n.to.ToString()},
            {"cut_start", n.cut_start.ToString()},
            {"continue_from", n.continue_from.ToString()},
            {"segments", segs},
            {"bytes_to_read", n.bytes_to_read},
            {"base_entries", n.base_entries},
            {"txs_applied", n.txs_applied},
            {"txs_skipped", n.txs_skipped},
            {"txs_rolled_back", n.txs_rolled_back},
            {"writes_applied", n.writes_applied},
            {"apply_cpu_seconds", n.apply_cpu_seconds}};
  if (!dry_run) {
    j["entries"] = n.entries;
    j["fingerprint"] = fmt::format("{:016x}", n.fingerprint);
  }
  return j;
}

// The usage checks of a per-node restore that need no file: kExitOk when
// they pass, else kExitUsage (printed).
int CheckNodeArgs(const RestoreOptions& o) {
  std::string bad;
  if (o.partial()) {
    bad =
        "--keys and --partition are not for a per-node restore: restore the subset from the cluster directory "
        "(walcut restore DIR --cut K --keys ...) or from a repository (--repo)";
  } else if (!o.verdict.empty() && !o.summaries.empty()) {
    bad = "give --verdict FILE or --summaries FILE..., not both";
  } else if (!o.repo.empty() || !o.before.empty() || !o.check.empty()) {
    bad =
        "a per-node restore takes neither --repo nor --before nor --check (check the assembled restore: "
        "walcut restore assemble OUT PARTS... --check auto)";
  } else if (!o.cluster_json.empty() && o.summaries.empty()) {
    bad = "--cluster-json goes with --summaries (a verdict carries cluster.json already)";
  } else if (o.dir.empty()) {
    bad = "NODE_DIR is required: the node's directory (with wal/ inside) or its WAL directory";
  } else if (!o.dry_run && o.out.empty()) {
    bad = "--out OUT is required (or --dry-run)";
  } else if (const std::string p = OutputInsideInput("--out", o.out, {o.dir, o.base}); !o.dry_run && !p.empty()) {
    bad = p;
  } else if (!o.verdict.empty() && o.latest) {
    bad = "--latest goes with --summaries; a verdict names its cut (--cut K, if given, must match it)";
  } else if (o.verdict.empty() && (o.cut > 0) + o.latest != 1) {
    bad = "with --summaries give exactly one of --cut K, --latest";
  }
  if (bad.empty()) return kExitOk;
  PrintError(bad);
  return kExitUsage;
}

// The verdict decided here from --summaries, with the base --base names
// (`base_name`: "" to choose it as restore does).
walfmt::Result<recovery::Verdict> MakeNodeVerdict(const RestoreOptions& o, const std::string& base_name) {
  recovery::VerdictOptions vo;
  vo.base = base_name;
  if (!o.cluster_json.empty()) {
    auto text = walfmt::ReadWholeFile(o.cluster_json, walfmt::kMaxJsonFileBytes);
    if (!text.ok()) return text.status();  // a missing file is kNotFound: usage
    vo.cluster_json = std::move(text.value());
  }
  auto cc = LoadCuts(o.summaries, o.jobs);
  if (!cc.ok()) return cc.status();
  if (o.latest && !cc->window.any) {
    return walfmt::Status::Corruption(fmt::format("no cut can be restored: {}", cc->window.latest_limit));
  }
  return recovery::MakeVerdict(*cc, o.latest ? cc->window.latest : o.cut, vo);
}

void PrintNodeRestore(const RestoreOptions& o, uint32_t node, const recovery::Verdict& verdict,
                      const std::string& verdict_origin, const recovery::RestoreResult& r) {
  const bool forced = r.status != cut::CutStatus::kConsistent;
  const recovery::NodeRestore& n = r.nodes.front();
  if (o.format == Format::kJson) {
    json j;
    j["schema"] = "walcut.restore/1";
    j["node_dir"] = o.dir;
    j["node"] = node;
    j["verdict"] = verdict.id;
    j["cut"] = r.cut;
    j["status"] = cut::CutStatusName(r.status);
    j["forced"] = forced;
    j["dry_run"] = o.dry_run;
    j["base"] = {{"kind", recovery::BaseKindName(r.base.kind)}, {"name", r.base.name}, {"why", verdict.base_why}};
    j["out"] = o.dry_run ? json(nullptr) : json(o.out);
    j["nodes"] = json::array({NodeJson(n, o.dry_run)});
    j["bytes_read"] = r.bytes_read;
    fmt::print("{}\n", walfmt::DumpJson(j, 2));
    return;
  }
  fmt::print("{} node {} to cut {} ({}{}) from base {} ({})\n", o.dry_run ? "plan: restore" : "restored", node, r.cut,
             cut::CutStatusName(r.status), forced ? ", forced: " + r.reason : "", r.base.name,
             recovery::BaseKindName(r.base.kind));
  fmt::print("  verdict: {} (from {}); base: {} ({})\n", verdict.id, verdict_origin, r.base.name, verdict.base_why);
  fmt::print(
      "  node {}: WAL {} .. {}, {} read; base {} keys; {} transactions applied ({} writes), {} skipped, {} "
      "rolled back",
      n.node, n.from.ToString(), n.to.ToString(), HumanBytes(n.bytes_to_read), n.base_entries, n.txs_applied,
      n.writes_applied, n.txs_skipped, n.txs_rolled_back);
  if (!o.dry_run) fmt::print("; {} keys, fingerprint {:016x}", n.entries, n.fingerprint);
  fmt::print("\n");
  if (!o.dry_run) fmt::print("wrote {}/node-{}.snap and {}/manifest.json\n", o.out, node, o.out);
}

// `walcut restore NODE_DIR --node I --cut K (--verdict FILE | --summaries
// FILE...) --out OUT`: node I alone, where its WAL lives (recovery/part.h).
int RunRestoreNode(const RestoreOptions& o) {
  if (const int rc = CheckNodeArgs(o); rc != kExitOk) return rc;
  recovery::NodeDirRequest req;
  req.dir = o.dir;
  req.node = o.node;
  req.base = o.base;
  req.verdict = o.verdict;
  req.cut = o.cut;
  req.make_verdict = [&o](const std::string& base_name) { return MakeNodeVerdict(o, base_name); };
  auto plan = recovery::PlanNodeDir(req);
  if (!plan.ok()) {
    PrintError(plan.status().message());
    return ExitForStatus(plan.status());
  }
  Progress progress(o.dry_run ? "plan" : "restore", 0);
  auto r = recovery::RestoreNodeDir(*plan, o.force, o.dry_run, o.out, [&progress](uint64_t b) { progress.Update(b); });
  progress.Finish();
  if (!r.ok()) {
    PrintError(r.status().message());
    return ExitForStatus(r.status());
  }
  const std::string verdict_origin = o.verdict.empty() ? fmt::format("{} summaries", o.summaries.size()) : o.verdict;
  PrintNodeRestore(o, plan->target.node, plan->verdict, verdict_origin, *r);
  return ExitCode(recovery::PartOutcome(*r));
}

// Prints a single-host restore (text or JSON): the base and why, how the
// verdict was read, every node's range and counts, the check's lines.
void PrintRestore(const RestoreOptions& o, const recovery::CutVerdict& v, const recovery::RestoreResult& r,
                  const std::string& base_why, const json& check_json, const std::vector<std::string>& check_lines) {
  const bool forced = r.status != cut::CutStatus::kConsistent;
  if (o.format == Format::kJson) {
    json j;
    j["schema"] = "walcut.restore/1";
    j["cluster"] = o.dir;
    j["cut"] = r.cut;
    j["status"] = cut::CutStatusName(r.status);
    j["forced"] = forced;
    j["dry_run"] = o.dry_run;
    j["base"] = {{"kind", recovery::BaseKindName(r.base.kind)}, {"name", r.base.name}, {"why", base_why}};
    j["subset"] = SubsetJson(r.subset);
    j["out"] = o.dry_run ? json(nullptr) : json(o.out);
    json nodes = json::array();
    for (const auto& n : r.nodes) nodes.push_back(NodeJson(n, o.dry_run));
    j["nodes"] = nodes;
    j["bytes_read"] = r.bytes_read;
    j["verdict_scan"] = {{"read", recovery::VerdictScanName(v.scan)}, {"bytes", v.bytes_scanned}};
    if (!check_json.is_null()) j["check"] = check_json;
    fmt::print("{}\n", walfmt::DumpJson(j, 2));
  } else {
    fmt::print("{} cut {} of {} ({}{}) from base {} ({})\n", o.dry_run ? "plan: restore" : "restored", r.cut, o.dir,
               cut::CutStatusName(r.status), forced ? ", forced: " + r.reason : "", r.base.name,
               recovery::BaseKindName(r.base.kind));
    fmt::print("  base: {} ({})\n", r.base.name, base_why);
    if (!r.subset.whole())
      fmt::print("  subset: {} (a partial restore: the node files hold these keys only)\n", r.subset.Describe());
    fmt::print("  verdict: cut {} decided from {} of WAL, {}\n", r.cut, HumanBytes(v.bytes_scanned),
               v.scan == recovery::VerdictScan::kWhole   ? "every node's whole WAL"
               : v.scan == recovery::VerdictScan::kToCut ? "every node's WAL up to where the cut is decided"
                                                         : "from the base's positions up to where the cut is decided");
    for (const auto& n : r.nodes) {
      std::string segs;
      if (!n.segments.empty()) {
        segs = n.segments.size() == 1 ? n.segments.front().file
                                      : fmt::format("{} .. {} ({} segments)", n.segments.front().file,
                                                    n.segments.back().file, n.segments.size());
      }
      fmt::print(
          "  node {}: WAL {} .. {} [{}], {} read; base {} keys; {} transactions applied ({} writes), {} "
          "skipped, {} rolled back",
          n.node, n.from.ToString(), n.to.ToString(), segs, HumanBytes(n.bytes_to_read), n.base_entries, n.txs_applied,
          n.writes_applied, n.txs_skipped, n.txs_rolled_back);
      if (!o.dry_run) fmt::print("; {} keys, fingerprint {:016x}", n.entries, n.fingerprint);
      fmt::print("\n");
    }
    for (const auto& l : check_lines) fmt::print("check: {}\n", l);
    if (!o.dry_run) fmt::print("wrote {}/node-*.snap and {}/manifest.json\n", o.out, o.out);
  }
}

// A partial restore's usage checks before any WAL is read (Restore makes
// them again): the subset against the cluster's partitions, and the base
// rule for a restore output given as --base (a partial one serves only the
// same subset, whole restores included). kExitOk or kExitUsage (printed).
int CheckSubset(const RestoreOptions& o, const cut::ClusterLayout& layout) {
  if (!o.partial() && o.base.empty()) return kExitOk;
  recovery::KeySubset subset = o.Subset();
  uint32_t partitions = 0;
  if (layout.has_cluster_json) {
    auto info = walfmt::LoadClusterInfo(o.dir);
    if (!info.ok()) {
      PrintError(info.status().message());
      return ExitForStatus(info.status());
    }
    partitions = info->partitions;
  }
  walfmt::Status st = recovery::ResolveSubset(subset, partitions, o.dir);
  if (st.ok() && !o.base.empty()) {
    auto held = recovery::ReadOutputSubset(o.base);
    st = held.ok() ? recovery::BaseServesSubset(o.base, *held, subset) : held.status();
  }
  if (st.ok()) return kExitOk;
  PrintError(st.message());
  return st.code() == walfmt::ErrorCode::kInvalidArgument ? kExitUsage : ExitForStatus(st);
}

int FinishRestore(const RestoreOptions& o, const recovery::CutVerdict& v, recovery::RestoreResult& r,
                  const std::string& base_why);

// The restore of cut k of DIR from `base` the options ask for.
recovery::RestoreRequest RequestFor(const RestoreOptions& o, uint64_t k, const std::string& base) {
  recovery::RestoreRequest req;
  req.cluster_dir = o.dir;
  req.cut = k;
  req.base = base;
  req.force = o.force;
  req.dry_run = o.dry_run;
  req.out = o.out;
  req.jobs = o.jobs;
  req.io_threads = o.io_threads;
  req.subset = o.Subset();
  return req;
}

// RestoreWith's answer when a restore from a verdict not read from the
// whole WAL failed: the caller decides again from the whole WAL, so that the
// error is the one the whole WAL gives.
constexpr int kRetryWhole = -1;

// Restores from the verdict `v` (the cuts as recovery::ScanToCut or the whole
// WAL shows them) and prints the result.
int RestoreWith(const RestoreOptions& o, const std::optional<walfmt::TimeArg>& before, const cut::ClusterLayout& layout,
                const recovery::CutVerdict& v) {
  const cut::ClusterCuts* cc = &v.cuts;
  uint64_t k = CutOrLatest(*cc, o.cut, o.latest, o.dir);
  if (o.latest && k == 0) return kExitFindings;
  if (before) {
    // A wall-clock time goes through the cluster's epoch (cluster.json).
    auto before_us = ClockOf(*cc).Resolve(*before, "--before");
    if (!before_us.ok()) {
      PrintError(before_us.status().message());
      return kExitUsage;
    }
    const cut::GlobalCut* g = cc->LatestBefore(*before_us);
    if (!g) {
      const bool early = before->wall_clock && *before_us == 0;
      PrintError(fmt::format("{}: no consistent cut finished before {}{}", o.dir,
                             before->wall_clock ? walfmt::FormatUtc(before->unix_us) : ClockOf(*cc).Format(*before_us),
                             early ? fmt::format(" (the cluster was created at {})", ClockOf(*cc).Format(0)) : ""));
      return kExitFindings;
    }
    k = g->cut_id;
  }
  std::string base = o.base;
  std::string base_why = "given by --base";
  const cut::GlobalCut* target = cc->Find(k);
  if (base.empty() && target && (target->status == cut::CutStatus::kConsistent || o.force)) {
    auto choice = recovery::ChooseBase(*cc, layout, k);
    if (!choice.ok() && v.scan != recovery::VerdictScan::kWhole) return kRetryWhole;
    if (!choice.ok()) {
      PrintError(choice.status().message());
      return choice.status().code() == walfmt::ErrorCode::kInvalidArgument ? kExitFindings
                                                                           : ExitForStatus(choice.status());
    }
    base = choice->base;
    base_why = choice->why;
  }
  Progress progress(o.dry_run ? "plan" : "restore", 0);
  recovery::RestoreRequest req = RequestFor(o, k, base);
  req.progress = [&progress](uint64_t b) { progress.Update(b); };
  auto r = recovery::Restore(*cc, layout, req);
  progress.Finish();
  if (!r.ok() && v.scan != recovery::VerdictScan::kWhole) return kRetryWhole;
  if (!r.ok()) {
    PrintError(r.status().message());
    // A refused cut is a finding (CI must see it); a bad request is usage.
    if (r.status().code() == walfmt::ErrorCode::kInvalidArgument) {
      const cut::GlobalCut* g = cc->Find(k);
      return g && g->status != cut::CutStatus::kConsistent && !o.force ? kExitFindings : kExitUsage;
    }
    return ExitForStatus(r.status());
  }
  return FinishRestore(o, v, *r, base_why);
}

// A restore done (its node files staged unless a dry run): the workload
// checks, OUT written, the result printed.
int FinishRestore(const RestoreOptions& o, const recovery::CutVerdict& v, recovery::RestoreResult& r,
                  const std::string& base_why) {
  std::vector<std::string> check_lines;
  bool check_failed = false;
  json check_json;
  if (!o.check.empty()) {
    auto cj = CheckRestored(r, o.dir, o.check, check_lines);
    if (!cj.ok()) {
      walfmt::RemoveStaging(r.stage_dir);
      PrintError(cj.status().message());
      return ExitForStatus(cj.status());
    }
    check_json = *cj;
    check_failed = !check_json["ok"].get<bool>();
  }
  if (!o.dry_run) {
    const std::string extra = check_json.is_null() ? "" : walfmt::DumpJson(json({{"check", check_json}}));
    if (auto st = recovery::WriteRestore(r, o.out, extra); !st.ok()) {
      PrintError(st.message());
      return ExitForStatus(st);
    }
  }
  PrintRestore(o, v, r, base_why, check_json, check_lines);
  const bool forced = r.status != cut::CutStatus::kConsistent;
  return forced || check_failed ? kExitFindings : kExitOk;
}

// --cut K or --latest from genesis: the verdict and the restore in one read
// of each WAL (recovery::RestoreOnePass). kRetryWhole when that does not
// serve this restore: the caller then decides and restores the two-pass way.
int RestoreInOnePass(const RestoreOptions& o, const cut::ClusterLayout& layout) {
  // Cut 0: the latest restorable cut.
  const recovery::RestoreRequest req = RequestFor(o, o.latest ? 0 : o.cut, o.base);
  std::optional<recovery::OnePassRestore> one;
  {
    Progress progress("restore", 0);
    cut::LoadOptions lo;
    lo.jobs = o.jobs;
    lo.progress = [&progress](uint64_t b) { progress.Update(b); };
    one = recovery::RestoreOnePass(layout, req, lo);
    progress.Finish();
  }
  if (!one) return kRetryWhole;
  for (const auto& n : one->verdict.cuts.nodes) {
    for (const auto& note : n.notes) PrintError("note: " + note);
  }
  return FinishRestore(o, one->verdict, one->result, o.base.empty() ? one->base_why : "given by --base");
}

// --before TIME, when given: kExitOk, or a usage error printed.
int ParseBefore(const std::string& text, std::optional<walfmt::TimeArg>& before) {
  if (text.empty()) return kExitOk;
  auto t = walfmt::ParseTime(text);
  if (!t.ok()) {
    PrintError(fmt::format("--before {}", t.status().message()));
    return kExitUsage;
  }
  before = *t;
  return kExitOk;
}

int RunRestore(const RestoreOptions& o) {
  // Leftovers of a killed restore beside OUT: named (or removed with --clean-stale).
  if (!o.dry_run && !o.out.empty()) {
    if (const int rc = NoteStaleStaging(o.out, o.clean_stale); rc != kExitOk) return rc;
  }
  if (o.io_threads != 1 && (!o.verdict.empty() || !o.summaries.empty() || !o.repo.empty())) {
    PrintError("--io-threads 0 goes with a restore of a cluster DIR (not --verdict, --summaries or --repo)");
    return kExitUsage;
  }
  if (!o.verdict.empty() || !o.summaries.empty()) return RunRestoreNode(o);
  if (o.node >= 0 || !o.cluster_json.empty()) {
    PrintError("--node and --cluster-json go with --verdict FILE or --summaries FILE... (a per-node restore)");
    return kExitUsage;
  }
  if (!o.repo.empty()) {  // --repo: a full artifact and its increments (cli/cmd_restore_repo.cpp), not DIR's WAL
    std::optional<walfmt::TimeArg> before;  // a wall-clock time goes through each artifact's epoch (its cluster.json)
    if (const int rc = ParseBefore(o.before, before); rc != kExitOk) return rc;
    if (!o.base.empty() || o.force || !o.check.empty()) {
      PrintError("with --repo: --base, --force and --check do not apply");
      return kExitUsage;
    }
    return RunRestoreRepo({o.repo, o.dir, o.cut ? std::optional<uint64_t>(o.cut) : std::nullopt, o.latest, before,
                           o.out, o.dry_run, o.format == Format::kJson, o.jobs, o.Subset(), o.access});
  }
  if (o.dir.empty()) {
    PrintError("DIR is required (or --repo REPO)");
    return kExitUsage;
  }
  if (const std::string p = OutputInsideInput("--out", o.out, {o.dir, o.base}); !o.dry_run && !p.empty()) {
    PrintError(p);
    return kExitUsage;
  }
  const int chosen = (o.cut > 0) + o.latest + !o.before.empty();
  if (chosen != 1) {
    PrintError("give exactly one of --cut K, --latest, --before TIME");
    return kExitUsage;
  }
  if (!o.dry_run && o.out.empty()) {
    PrintError("--out OUT is required (or --dry-run)");
    return kExitUsage;
  }
  if (!o.check.empty() && (o.dry_run || o.partial())) {
    PrintError(o.dry_run
                   ? "--check needs the restored state: it cannot run with --dry-run"
                   : "--check runs the workload invariants, which need every key: not with --keys or --partition");
    return kExitUsage;
  }
  std::optional<walfmt::TimeArg> before;
  if (const int rc = ParseBefore(o.before, before); rc != kExitOk) return rc;
  auto layout = cut::FindClusterLayout(o.dir);
  if (!layout.ok()) {
    PrintError(layout.status().message());
    return ExitForStatus(layout.status());
  }
  if (const int rc = CheckSubset(o, *layout); rc != kExitOk) return rc;
  // --cut K: the verdict comes from each WAL up to where cut K is decided
  // (from a restored base's positions when it has them): recovery::ScanToCut.
  // --latest and --before need every cut's verdict, and a cut that scan does
  // not show consistent (a refusal, --force) is decided as `walcut cuts`
  // decides it: from the whole WAL. From genesis, --cut K and --latest first
  // try to apply the WAL in the verdict's own read (RestoreInOnePass).
  if (o.cut > 0 || o.latest) {
    if (const int rc = RestoreInOnePass(o, *layout); rc != kRetryWhole) return rc;
  }
  if (o.cut > 0) {
    std::optional<recovery::CutVerdict> verdict;
    {
      Progress scan_progress("scan", 0);
      cut::LoadOptions lo;
      lo.jobs = o.jobs;
      lo.progress = [&scan_progress](uint64_t b) { scan_progress.Update(b); };
      verdict = recovery::ScanToCut(*layout, o.cut, o.base, lo);
      scan_progress.Finish();
    }
    if (verdict) {
      for (const auto& n : verdict->cuts.nodes) {
        for (const auto& note : n.notes) PrintError("note: " + note);
      }
      if (const int rc = RestoreWith(o, before, *layout, *verdict); rc != kRetryWhole) return rc;
    }
  }
  cut::ReconstructOptions ro;
  ro.attested_cut = recovery::RestoredBaseCut(o.base);
  auto cc = LoadCuts({o.dir}, o.jobs, ro);
  if (!cc.ok()) {
    PrintError(cc.status().message());
    return ExitForStatus(cc.status());
  }
  recovery::CutVerdict whole;
  whole.cuts = std::move(cc.value());
  for (const auto& n : whole.cuts.nodes) whole.bytes_scanned += n.bytes;
  return RestoreWith(o, before, *layout, whole);
}

void RegisterRestore(CLI::App& root, Registry& reg) {
  auto o = std::make_shared<RestoreOptions>();
  CLI::App* cmd = root.add_subcommand(
      "restore",
      "Restore every node to a cut: base state (genesis, a full snapshot, or an earlier restore) plus the\n"
      "writes of exactly the transactions of the cut (the rule of docs/cut-rule.md).\n"
      "--cut K decides the cut from each WAL up to where K is decided (from the positions of a restored\n"
      "--base); --latest and --before read every WAL to the end, as `walcut cuts` does. From genesis,\n"
      "--cut K and --latest apply the writes in that same read (each WAL is read once); otherwise each\n"
      "node's range from its base to CUT_FINISH(K) is read once more.\n"
      "Writes OUT/node-<i>.snap and OUT/manifest.json through a temporary directory renamed at the end;\n"
      "never overwrites OUT and never modifies the input. An inconsistent or incomplete cut is refused\n"
      "(exit 1) unless --force, and then the manifest says what is wrong.\n"
      "One node where its WAL lives (docs/scale-out.md): restore NODE_DIR --verdict FILE --out PART restores\n"
      "node I alone from the cut's verdict (walcut cuts SUMMARIES... --verdict-out FILE --cut K), checking\n"
      "that the verdict describes this WAL; walcut restore assemble OUT PARTS... gathers the parts.\n"
      "Exit 0 restored, 1 refused or forced, 2 usage error or a verdict that does not match the WAL,\n"
      "3 I/O error or damaged input.");
  cmd->add_option("dir", o->dir,
                  "Cluster directory (with --repo: an artifact NAME, or none with --cut/--latest/--before; with "
                  "--verdict or --summaries: the node directory)");
  cmd->add_option("--repo", o->repo,
                  "Restore from a repository of snapshot artifacts (a directory, file://PATH or s3://BUCKET/PREFIX): "
                  "a full and its increments");
  AddRepoAccessOptions(cmd, o->access, false);
  AddNumber(cmd, "--cut", o->cut, kCutIdRange, "Cut id to restore");
  cmd->add_flag("--latest", o->latest, "The latest restorable cut (the end of the restore window)");
  cmd->add_option("--before", o->before,
                  "The latest consistent cut that finished before TIME: ISO 8601 (2026-11-30T12:00:00Z, "
                  "2026-11-30T13:00:00.5+01:00), @UNIX_SECONDS, or cluster time since creation with a unit "
                  "(250ms, 1.5s, 2m, 1h); a bare number is refused. With --repo: the newest artifact finished before "
                  "TIME, a wall-clock TIME through each artifact's cluster epoch");
  cmd->add_option("--base", o->base,
                  "Base: 'genesis', a full snapshot name under DIR/snapshots/, a snapshot directory's path, or a "
                  "restore output dir. Default: the newest full snapshot every node's WAL still holds before the "
                  "cut, else genesis (the choice and its reason are printed)");
  cmd->add_option("-o,--out", o->out, "Output directory (must not exist)");
  cmd->add_flag("--dry-run", o->dry_run,
                "Print the plan (per node: base, WAL range and segments, bytes, transactions to apply and skip);"
                " write nothing");
  cmd->add_flag("--force", o->force, "Restore a cut that is not consistent (the manifest records why)");
  AddNumber(cmd, "-j,--jobs", o->jobs, kJobsRange,
            "Worker threads, each restoring (applying the WAL of) one node at a time (default: one per core); "
            "a helper thread checksums and writes each node's file while the node's entries are sorted and "
            "formatted (unless --io-threads 0), so -j1 uses up to two threads");
  AddNumber(cmd, "--io-threads", o->io_threads, {0, 1},
            "Restoring a cluster DIR: 1 (default) checksums and writes each node's file on a helper thread; 0 "
            "on the worker thread, so that -j1 runs on one thread");
  AddProgressOptions(cmd);
  cmd->add_option("--check", o->check,
                  "Check the workload invariants on the restored state (bank total as in cluster.json, the cycle is "
                  "one ring, replicas agree); 'auto' = the cluster's workload. Findings name node and keys; exit 1")
      ->check(CLI::IsMember({"bank", "cycle", "auto"}));
  cmd->add_option("--verdict", o->verdict,
                  "Restore one node where its WAL lives: DIR is NODE_DIR, the verdict of the cut from `walcut cuts "
                  "SUMMARIES... --verdict-out FILE --cut K`; writes OUT/node-<I>.snap and a per-node manifest");
  cmd->add_option("--summaries", o->summaries,
                  "Restore one node where its WAL lives, deciding the verdict here from every node's summary "
                  "(walcut scan --out; repeat or comma-separate)")
      ->delimiter(',');
  AddNumber(cmd, "--node", o->node, kNodeIdRange,
            "With --verdict/--summaries: the node id (default: from NODE_DIR's name node-<i>)");
  cmd->add_option("--cluster-json", o->cluster_json, "With --summaries: the cluster's cluster.json");
  cmd->add_option("--keys", o->keys,
                  "Partial restore: only the keys that start with PREFIX (repeatable); with --partition, the keys "
                  "either one names (their union). The manifest records the subset; such an output serves as "
                  "--base only for a restore of the same subset")
      ->type_name("PREFIX");
  AddNumberList(cmd, "--partition", o->partitions, {0, 65535},
                "Partial restore: only the keys of partition P (fnv1a64(key) % the partitions of cluster.json; "
                "repeatable)");
  cmd->add_flag("--clean-stale", o->clean_stale,
                "Remove the staging directories and lock files that killed walcut processes left beside OUT "
                "(without it they are only named on stderr)");
  AddFormatOption(cmd, o->format);
  // `restore assemble` (cli/cmd_restore_assemble.cpp) is a subcommand of
  // this one: when it was given, its action runs, not the restore's.
  reg.Add(cmd, [o, cmd, &reg] {
    for (const auto& [sub, action] : reg.commands()) {
      if (sub != cmd && sub->get_parent() == cmd && sub->parsed()) return action();
    }
    return RunRestore(*o);
  });
}

const CommandRegistrar kRegister{75, RegisterRestore};

}  // namespace
}  // namespace walcut::cli
