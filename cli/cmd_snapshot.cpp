// walcut snapshot check DIR: the workload invariants on a snapshot directory.
// walcut snapshot show DIR: what a snapshot directory holds.
#include <filesystem>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "cli/clock.h"
#include "cli/command.h"
#include "cli/numbers.h"
#include "cli/output.h"
#include "cli/repo_commands.h"
#include "cli/restore_check.h"
#include "recovery/invariants.h"
#include "recovery/key_subset.h"
#include "recovery/state_set.h"
#include "walfmt/record.h"
#include "walfmt/record_text.h"
#include "walfmt/strings.h"
#include "walfmt/text_escape.h"

namespace walcut::cli {
namespace {

inline constexpr const char* kSnapshotCheckSchema = "walcut.snapshot.check/1";
inline constexpr const char* kSnapshotShowSchema = "walcut.snapshot.show/1";

// The directory must exist before anything else is said about it.
std::optional<int> CheckDirExists(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    PrintError(fmt::format("{}: {}", dir, std::filesystem::exists(dir, ec) ? "not a directory" : "no such directory"));
    return kExitUsage;
  }
  return std::nullopt;
}

// ---- snapshot check --------------------------------------------------------

struct CheckOptions {
  std::string dir;
  std::string check = "auto";
  std::string cluster_dir;
  Format format = Format::kText;
  size_t max_findings = 1000;
  // The repository form (cli/cmd_snapshot_check_repo.cpp): DIR holds the repository marker.
  std::string name;
  bool restore = false;
  std::string format_name = "text";
  std::string output;
  unsigned jobs = 0;
  std::string metrics;
  RepoAccess access;  // an s3:// repository
};

nlohmann::json FindingJson(const recovery::Finding& f) {
  nlohmann::json keys = nlohmann::json::array();
  for (const auto& k : f.keys) keys.push_back(walfmt::Printable(k, 0));
  return {{"check", f.check},
          {"node", f.node ? nlohmann::json(*f.node) : nlohmann::json(nullptr)},
          {"peer", f.peer ? nlohmann::json(*f.peer) : nlohmann::json(nullptr)},
          {"keys", keys},
          {"key_count", f.key_count},
          {"expected", walfmt::Printable(f.expected, 0)},
          {"found", walfmt::Printable(f.found, 0)},
          {"message", f.message}};
}

// What `snapshot check` found on a snapshot directory, for its report.
struct CheckResult {
  const CheckOptions& o;
  const recovery::ClusterInfoSource& src;
  const recovery::StateSet& set;
  const recovery::InvariantOptions& iopt;
  const recovery::InvariantReport& report;
  const std::vector<recovery::Finding>& recorded;  // against the snapshot recorded in cluster.json
  const std::vector<std::string>& checks;
  const recovery::KeySubset& subset;  // a partial restore's keys; whole otherwise
  uint64_t total;
  int rc;
};

void PrintCheckJson(const CheckResult& r) {
  nlohmann::json findings = nlohmann::json::array();
  for (const auto& f : r.recorded) findings.push_back(FindingJson(f));
  for (const auto& f : r.report.findings) findings.push_back(FindingJson(f));
  nlohmann::json nodes = nlohmann::json::array();
  for (const auto& n : r.set.nodes) {
    nodes.push_back(
        {{"node", n.node_id}, {"entries", n.entries.size()}, {"fingerprint", walfmt::Hex16(n.fingerprint)}});
  }
  nlohmann::json doc{
      {"schema", kSnapshotCheckSchema},
      {"dir", r.o.dir},
      {"cluster",
       {{"path", r.src.path},
        {"from_manifest", r.src.from_manifest},
        {"cluster_id", walfmt::Hex16(r.src.info.cluster_id)},
        {"workload", walfmt::WorkloadName(r.src.info.workload)},
        {"nodes", r.src.info.nodes},
        {"backups", r.src.info.backups},
        {"partitions", r.src.info.partitions}}},
      {"snapshot", r.src.full_snapshot ? nlohmann::json(r.src.full_snapshot->name) : nlohmann::json(nullptr)},
      {"checks", r.checks},
      {"subset", SubsetJson(r.subset)},
      {"nodes", nodes},
      {"keys_checked", r.report.keys_checked},
      {"findings", findings},
      {"total_findings", r.total},
      {"ok", r.rc == kExitOk},
      {"exit_code", r.rc}};
  if (r.iopt.bank) {
    doc["bank"] = {{"accounts", r.src.info.accounts},
                   {"expected_total", r.src.info.initial_bank_total},
                   {"total", r.report.bank_total ? nlohmann::json(*r.report.bank_total) : nlohmann::json(nullptr)}};
  }
  if (r.iopt.cycle) doc["cycle"] = {{"ring_keys", r.src.info.ring_keys}, {"walked", r.report.ring_walked}};
  fmt::print("{}\n", walfmt::DumpJson(doc, 2));
}

void PrintCheckText(const CheckResult& r) {
  fmt::print("snapshot {}: {} node{}, cluster {}, workload {} ({})\n", r.o.dir, r.set.nodes.size(),
             r.set.nodes.size() == 1 ? "" : "s", walfmt::Hex16(r.src.info.cluster_id),
             walfmt::WorkloadName(r.src.info.workload), r.src.path);
  fmt::print("checks: {}\n", fmt::join(r.checks, ", "));
  if (!r.subset.whole()) {
    fmt::print("subset: {} (a partial restore: the bank and cycle invariants need every key and are not run)\n",
               r.subset.Describe());
  }
  for (const auto& f : r.recorded) fmt::print("FINDING {}: {}\n", f.check, f.message);
  for (const auto& f : r.report.findings) fmt::print("FINDING {}: {}\n", f.check, f.message);
  if (r.report.total_findings > r.report.findings.size()) {
    fmt::print("... {} more findings not listed (--max-findings)\n",
               r.report.total_findings - r.report.findings.size());
  }
  std::vector<std::string> facts{fmt::format("{} key copies", r.report.keys_checked)};
  if (r.iopt.bank && r.report.bank_total) {
    facts.push_back(fmt::format("bank total {} of {}", *r.report.bank_total, r.src.info.initial_bank_total));
  }
  if (r.iopt.cycle)
    facts.push_back(fmt::format("ring walked {} of {} keys", r.report.ring_walked, r.src.info.ring_keys));
  if (r.rc == kExitOk) {
    fmt::print("OK ({})\n", fmt::join(facts, ", "));
  } else {
    fmt::print("FAILED ({} finding{}; {})\n", r.total, r.total == 1 ? "" : "s", fmt::join(facts, ", "));
  }
}

int RunCheck(const CheckOptions& o) {
  if (o.dir.find("://") != std::string::npos) {  // s3://... or file://PATH; another scheme is refused
    const auto loc = RepoLocationOf(o.dir);
    if (!loc) return kExitUsage;
    if (loc->s3) return RunRepoCheck({o.dir, o.name, o.restore, o.format_name, o.output, o.jobs, o.metrics, o.access});
    CheckOptions local = o;
    local.dir = loc->dir;
    return RunCheck(local);
  }
  if (auto rc = CheckDirExists(o.dir)) return *rc;
  if (IsRepositoryDir(o.dir))
    return RunRepoCheck({o.dir, o.name, o.restore, o.format_name, o.output, o.jobs, o.metrics, o.access});
  if (!o.name.empty() || o.restore || o.format_name == "junit" || !o.output.empty() || !o.metrics.empty()) {
    PrintError(
        fmt::format("{}: NAME, --restore, --format junit, --output and --metrics are for a repository (no {} here)",
                    o.dir, "walcut-repository.json"));
    return kExitUsage;
  }
  auto src =
      o.cluster_dir.empty() ? recovery::FindClusterInfoFor(o.dir) : recovery::ClusterInfoFromDir(o.cluster_dir, o.dir);
  if (!src.ok()) {
    PrintError(src.status().message());
    return ExitForStatus(src.status());
  }
  const walfmt::ClusterInfo& info = src->info;

  // A partial restore holds only its subset: the placement checks apply,
  // the bank total and the ring walk need every key.
  auto subset = recovery::ReadOutputSubset(o.dir);
  if (!subset.ok()) {
    PrintError(subset.status().message());
    return ExitForStatus(subset.status());
  }
  if (!subset->whole() && o.check != "auto") {
    PrintError(fmt::format("--check {}: {} is a partial restore ({}); the {} invariants need every key", o.check, o.dir,
                           subset->Describe(), o.check));
    return kExitUsage;
  }
  recovery::InvariantOptions iopt = recovery::OptionsFor(info.workload);
  if (!subset->whole()) iopt.bank = iopt.cycle = false;
  if (o.check == "bank" || o.check == "cycle") {
    const bool bank = o.check == "bank";
    if (bank ? info.accounts == 0 : info.ring_keys == 0) {
      PrintError(fmt::format("--check {}: the cluster's workload ({}, in {}) has no {}", o.check,
                             walfmt::WorkloadName(info.workload), src->path, bank ? "bank accounts" : "ring keys"));
      return kExitUsage;
    }
    iopt.bank = bank;
    iopt.cycle = !bank;
  }
  iopt.max_findings = o.max_findings;

  recovery::LoadOptions lopt;
  lopt.expected_nodes = info.nodes;
  lopt.expected_cluster_id = info.cluster_id;
  lopt.expected_from = src->path;
  auto set = recovery::LoadStateSet(o.dir, lopt);
  if (!set.ok()) {
    PrintError(set.status().message());
    return ExitForStatus(set.status());
  }

  recovery::InvariantReport report = recovery::CheckInvariants(info, recovery::StatesOf(*set), iopt);
  // A full snapshot listed in cluster.json: its files must still be the ones
  // recorded when it was taken.
  std::vector<recovery::Finding> recorded;
  if (src->full_snapshot) recorded = recovery::CheckRecorded(*set, *src->full_snapshot);
  const uint64_t total = report.total_findings + recorded.size();
  const int rc = total == 0 ? kExitOk : kExitFindings;

  std::vector<std::string> checks;
  if (iopt.placement) checks.push_back("placement");
  if (iopt.bank) checks.push_back("bank");
  if (iopt.cycle) checks.push_back("cycle");
  if (src->full_snapshot) checks.push_back("recorded");

  const CheckResult r{o, *src, *set, iopt, report, recorded, checks, *subset, total, rc};
  if (o.format == Format::kJson) {
    PrintCheckJson(r);
  } else {
    PrintCheckText(r);
  }
  return rc;
}

// ---- snapshot show ---------------------------------------------------------

struct ShowOptions {
  std::string dir;
  std::optional<uint32_t> node;
  bool keys = false;
  size_t max_bytes = 32;
  Format format = Format::kText;
};

int RunShow(const ShowOptions& o) {
  if (auto rc = CheckDirExists(o.dir)) return *rc;
  auto set = recovery::LoadStateSet(o.dir);
  if (!set.ok()) {
    PrintError(set.status().message());
    return ExitForStatus(set.status());
  }
  if (o.node && *o.node >= set->nodes.size()) {
    PrintError(fmt::format("--node {}: {} holds nodes 0..{}", *o.node, o.dir, set->nodes.size() - 1));
    return kExitUsage;
  }
  // A partial restore's subset (its manifest says): the node files hold those keys only.
  auto subset = recovery::ReadOutputSubset(o.dir);
  if (!subset.ok()) {
    PrintError(subset.status().message());
    return ExitForStatus(subset.status());
  }
  auto shown = [&](uint32_t i) { return !o.node || *o.node == i; };
  // Header times are cluster time; the cluster's epoch (its cluster.json, or
  // a restore's manifest.json) makes them UTC.
  const walfmt::ClusterClock clock = ClockNear(o.dir);

  if (o.format == Format::kJson) {
    nlohmann::json nodes = nlohmann::json::array();
    for (uint32_t i = 0; i < set->nodes.size(); ++i) {
      if (!shown(i)) continue;
      const auto& n = set->nodes[i];
      nlohmann::json jn{{"node", n.node_id},
                        {"name", walfmt::Printable(n.name, 0)},
                        {"entries", n.entries.size()},
                        {"bytes", set->file_bytes[i]},
                        {"fingerprint", walfmt::Hex16(n.fingerprint)},
                        {"wal_position", n.wal_position.ToString()},
                        {"time_us", n.time_us},
                        {"time", clock.Format(n.time_us)}};
      if (o.keys) {
        nlohmann::json kv = nlohmann::json::array();
        for (const auto& [k, v] : n.entries)
          kv.push_back({{"key", walfmt::Printable(k, 0)}, {"value", walfmt::Printable(v, 0)}});
        jn["keys"] = kv;
      }
      nodes.push_back(jn);
    }
    nlohmann::json doc{{"schema", kSnapshotShowSchema},
                       {"dir", o.dir},
                       {"cluster_id", walfmt::Hex16(set->nodes[0].cluster_id)},
                       {"node_count", set->nodes.size()},
                       {"subset", SubsetJson(*subset)},
                       {"nodes", nodes}};
    fmt::print("{}\n", walfmt::DumpJson(doc, 2));
    return kExitOk;
  }

  fmt::print("snapshot {}: {} node{}, cluster {}\n", o.dir, set->nodes.size(), set->nodes.size() == 1 ? "" : "s",
             walfmt::Hex16(set->nodes[0].cluster_id));
  if (!subset->whole()) {
    fmt::print("subset: {} (a partial restore: each node file, and its fingerprint, covers these keys only)\n",
               subset->Describe());
  }
  for (uint32_t i = 0; i < set->nodes.size(); ++i) {
    if (!shown(i)) continue;
    const auto& n = set->nodes[i];
    fmt::print("node {}: {} entries, {}, fingerprint {}, wal position {}, name {}, time {}\n", i, n.entries.size(),
               HumanBytes(set->file_bytes[i]), walfmt::Hex16(n.fingerprint), n.wal_position.ToString(),
               walfmt::Printable(n.name, 64), clock.Format(n.time_us));
    if (!o.keys) continue;
    for (const auto& [k, v] : n.entries) {
      fmt::print("  {} = {}\n", walfmt::Printable(k, o.max_bytes), walfmt::Printable(v, o.max_bytes));
    }
  }
  return kExitOk;
}

}  // namespace

void RegisterSnapshot(CLI::App& root, Registry& reg) {
  CLI::App* cmd = root.add_subcommand(
      "snapshot",
      "Snapshot directories and repositories of snapshot artifacts. show / check: a full snapshot\n"
      "(CLUSTER/snapshots/<name>) or a restore output (node-<i>.snap files and a manifest.json), nothing\n"
      "modified; check also takes a repository. create / list / expire: a repository of full snapshots and\n"
      "increments that outlives the cluster's WAL (walcut restore --repo restores from it).");
  cmd->require_subcommand(1);

  auto c = std::make_shared<CheckOptions>();
  CLI::App* check = cmd->add_subcommand(
      "check",
      "Check the workload invariants on every node's state. bank: every account on each node that holds it\n"
      "(primary and backups), backups equal to the primary, no negative balance, the primary copies add up\n"
      "to initial_bank_total. cycle: every ring key where it belongs, copies agree, values are key indexes,\n"
      "and the walk from ring/000000 visits every key once and returns. Always: no node holds a key that\n"
      "is not its own or lies outside the workload's key space; for a full snapshot listed in cluster.json,\n"
      "each file's fingerprint and WAL position are the ones recorded when it was taken. Each finding names\n"
      "the node and the keys. The cluster comes from DIR/manifest.json, else DIR/../../cluster.json, else\n"
      "--cluster. Exit 0 when every check passes, 1 on findings, 2 on usage errors (no such directory, no\n"
      "cluster.json to be found, a --check the workload has no keys for, node counts or cluster ids that do\n"
      "not match), 1 also when a file is damaged (.snap, cluster.json, manifest.json), 3 when one cannot be\n"
      "read.");
  check
      ->add_option("DIR", c->dir,
                   "Snapshot directory, or a repository of snapshot artifacts (a directory, file://PATH or "
                   "s3://BUCKET/PREFIX)")
      ->required();
  check->add_option("NAME", c->name, "Repository: check this artifact and its chain only");
  check->add_flag("--restore", c->restore, "Repository: trial restore through each chain with the workload invariants");
  check->add_option("-o,--output", c->output,
                    "Repository: write the report to FILE (atomically); stdout gets the verdict");
  check->add_option("--metrics", c->metrics,
                    "Repository: also write the result as Prometheus metrics to FILE (atomically; for "
                    "node_exporter's textfile collector, name it *.prom): artifacts by type, newest restorable cut "
                    "and its age, longest chain, bytes held, findings by check");
  AddNumber(check, "-j,--jobs", c->jobs, kJobsRange, "Repository: threads (default: one per core)");
  check
      ->add_option("--check", c->check,
                   "bank, cycle, or auto: what the cluster's workload has (default; mixed runs both)")
      ->check(CLI::IsMember({"bank", "cycle", "auto"}))
      ->type_name("bank|cycle|auto");
  check->add_option("--cluster", c->cluster_dir, "Cluster directory whose cluster.json describes the snapshot");
  AddNumber(check, "--max-findings", c->max_findings, {0, 1000000000},
            "List at most this many findings (default 1000); all are counted");
  check
      ->add_option_function<std::string>(
          "--format",
          [c](const std::string& v) {
            c->format_name = v;
            c->format = v == "json" ? Format::kJson : Format::kText;
          },
          "Output format: text (default), json, or junit (a repository only)")
      ->check(CLI::IsMember({"text", "json", "junit"}))
      ->type_name("text|json|junit");
  AddRepoAccessOptions(check, c->access, false);
  reg.Add(check, [c] { return RunCheck(*c); });

  auto s = std::make_shared<ShowOptions>();
  CLI::App* show = cmd->add_subcommand(
      "show",
      "Per node: entries, file size, state fingerprint, the WAL position of its SNAPSHOT record, name and\n"
      "time; with --keys every entry, keys and values shortened like `walcut dump`. Every file is checked\n"
      "(header and body checksums, fingerprint) before anything is shown. Exit 0, 1 when a\n"
      "snapshot file fails its checks, 2 on usage errors, 3 when one cannot be read.");
  show->add_option("DIR", s->dir, "Snapshot directory")->required();
  AddNumber(show, "--node", s->node, kNodeIdRange, "Only this node");
  show->add_flag("-k,--keys", s->keys, "List the entries");
  AddNumber(show, "--max-bytes", s->max_bytes, kMaxBytesRange,
            "Shorten keys and values to N bytes (default 32; 0 prints them whole)");
  AddFormatOption(show, s->format);
  reg.Add(show, [s] { return RunShow(*s); });
}

namespace {
const CommandRegistrar kRegister{80, RegisterSnapshot};
}  // namespace

}  // namespace walcut::cli
