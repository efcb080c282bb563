// walcut run DIR: create a simulated cluster, run transactions and consistent
// cuts on it, and leave its WAL (and cluster.json) in DIR. Parsing and
// printing only; the cluster is node/cluster.h.
#include <charconv>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/numbers.h"
#include "cli/output.h"
#include "node/cluster.h"
#include "walfmt/duration.h"
#include "walfmt/segment.h"
#include "walfmt/text_escape.h"

namespace walcut::cli {
namespace {

constexpr const char* kRunSchema = "walcut.run/1";

struct RunOpts {
  std::string dir;
  node::ClusterOptions cluster;
  std::string workload = "bank";
  std::string segment_size = "1MiB";
  std::vector<std::string> crashes;
  std::string wal_retention = "keep";
  std::string epoch;  // --epoch TIME (ISO 8601 or @UNIX_SECONDS); empty: the real clock
  Format format = Format::kText;
};

// "4096", "64K", "64KiB", "1M", "1MiB" -> bytes.
bool ParseSize(const std::string& s, uint64_t& out) {
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p == s.data()) return false;
  const std::string unit(p, s.data() + s.size());
  uint64_t mul = 1;
  if (unit.empty() || unit == "B")
    mul = 1;
  else if (unit == "K" || unit == "k" || unit == "KiB")
    mul = 1024;
  else if (unit == "M" || unit == "m" || unit == "MiB")
    mul = 1024 * 1024;
  else if (unit == "G" || unit == "g" || unit == "GiB")
    mul = 1024ull * 1024 * 1024;
  else
    return false;
  if (v > UINT64_MAX / mul) return false;
  out = v * mul;
  return true;
}

walfmt::ClusterClock Clock(const node::RunResult& r) { return walfmt::ClusterClock{r.options.epoch_unix_us}; }

nlohmann::json SnapshotsJson(const node::RunResult& r) {
  const walfmt::ClusterClock clock = Clock(r);
  nlohmann::json a = nlohmann::json::array();
  for (const auto& sn : r.snapshots) {
    nlohmann::json pos = nlohmann::json::array();
    for (const auto& l : sn.wal_position) pos.push_back(l.ToString());
    a.push_back({{"name", sn.name},
                 {"at_tx", sn.at_tx},
                 {"time_us", sn.time_us},
                 {"time", clock.Format(sn.time_us)},
                 {"wal_positions", pos}});
    if (!sn.segments_deleted.empty()) a.back()["segments_deleted"] = sn.segments_deleted;
  }
  return a;
}

nlohmann::json SummaryJson(const node::RunResult& r) {
  const auto& s = r.summary;
  const auto& o = r.options;
  nlohmann::json j = {{"schema", kRunSchema},
                      {"dir", o.dir},
                      {"seed", o.seed},
                      {"epoch_unix_us", o.epoch_unix_us.value_or(0)},
                      {"epoch", Clock(r).Format(0)},
                      {"nodes", o.nodes},
                      {"backups", o.backups},
                      {"partitions", o.partitions},
                      {"workload", node::WorkloadName(o.workload.workload)},
                      {"transactions",
                       {{"load", s.load_txs},
                        {"committed", s.committed},
                        {"one_phase", s.committed_1pc},
                        {"two_phase", s.committed_2pc},
                        {"rolled_back", s.rolled_back},
                        {"rolled_back_conflict", s.rolled_back_conflict},
                        {"rolled_back_insufficient_funds", s.rolled_back_funds},
                        {"rolled_back_vote_no", s.rolled_back_vote_no},
                        {"rolled_back_other", s.rolled_back_other},
                        {"lost_at_near", s.lost_at_near},
                        {"recovered_commits", s.recovered_commits},
                        {"recovered_rollbacks", s.recovered_rollbacks}}},
                      {"faults",
                       {{"crashes", s.crashes},
                        {"restarts", s.restarts},
                        {"initiator_failovers", s.initiator_failovers},
                        {"cuts_taken_over", s.cuts_taken_over}}},
                      {"cuts",
                       {{"started", s.cuts_started},
                        {"consistent", s.cuts_consistent},
                        {"inconsistent", s.cuts_inconsistent},
                        {"before", s.before},
                        {"after", s.after},
                        {"after_commit_before_cut_start", s.after_commit_before_start},
                        {"before_commit_after_cut_start", s.before_commit_after_start},
                        {"cut_abort_records", s.cut_aborts}}},
                      {"wal", {{"records", s.records}, {"bytes", s.wal_bytes}}},
                      {"simulation",
                       {{"events", s.events},
                        {"messages", s.messages},
                        {"virtual_time_us", s.sim_time_us},
                        {"wall_seconds", s.wall_seconds},
                        {"cpu_seconds", s.cpu_seconds}}},
                      {"initial_bank_total", s.initial_bank_total},
                      {"full_snapshots", SnapshotsJson(r)}};
  // Only with retention on, so that the default output stays as it was.
  if (o.wal_retention != node::WalRetention::kKeep) {
    j["wal_retention"] = {{"policy", node::WalRetentionName(o.wal_retention)},
                          {"segments_deleted", s.segments_deleted},
                          {"bytes_deleted", s.segment_bytes_deleted},
                          {"snapshot_recoveries", s.snapshot_recoveries},
                          {"first_segment", r.first_segment}};
  }
  return j;
}

void PrintSummary(const node::RunResult& r) {
  const auto& s = r.summary;
  const auto& o = r.options;
  fmt::print("cluster {}: {} nodes, {} backups, {} partitions, workload {}, seed {}\n", o.dir, o.nodes, o.backups,
             o.partitions, node::WorkloadName(o.workload.workload), o.seed);
  fmt::print("clock: cluster time 0 is {}; record times are cluster time since then\n", Clock(r).Format(0));
  fmt::print(
      "transactions: {} committed ({} 1PC, {} 2PC), {} rolled back ({} conflict, {} insufficient funds, "
      "{} refused prepare, {} other); {} initial-load transactions\n",
      s.committed, s.committed_1pc, s.committed_2pc, s.rolled_back, s.rolled_back_conflict, s.rolled_back_funds,
      s.rolled_back_vote_no, s.rolled_back_other, s.load_txs);
  fmt::print("cuts: {} started, {} consistent, {} inconsistent; before {} / after {} (summed over nodes)\n",
             s.cuts_started, s.cuts_consistent, s.cuts_inconsistent, s.before, s.after);
  fmt::print(
      "rule 5: {} `after` transactions committed before CUT_START, {} `before` transactions committed "
      "after CUT_START\n",
      s.after_commit_before_start, s.before_commit_after_start);
  if (s.crashes > 0) {
    fmt::print(
        "faults: {} crashes, {} restarts, {} initiator failovers ({} during a cut); {} transactions lost "
        "their near node; recovery committed {} and rolled back {} copies; {} CUT_ABORT records\n",
        s.crashes, s.restarts, s.initiator_failovers, s.cuts_taken_over, s.lost_at_near, s.recovered_commits,
        s.recovered_rollbacks, s.cut_aborts);
  }
  for (const auto& sn : r.snapshots) {
    fmt::print("full snapshot {}: after {} transactions, at {} ({:.3f} s), files in {}/snapshots/{}/\n", sn.name,
               sn.at_tx, Clock(r).Format(sn.time_us), static_cast<double>(sn.time_us) / 1e6, o.dir, sn.name);
  }
  if (o.wal_retention != node::WalRetention::kKeep) {
    std::vector<std::string> first;
    for (size_t i = 0; i < r.first_segment.size(); ++i)
      first.push_back(fmt::format("node {}: {}", i, r.first_segment[i]));
    fmt::print("wal retention {}: {} segments ({}) deleted after the full snapshots; first segment now: {}{}\n",
               node::WalRetentionName(o.wal_retention), s.segments_deleted, HumanBytes(s.segment_bytes_deleted),
               fmt::join(first, ", "),
               s.restarts > 0
                   ? fmt::format("; {} of {} restarts recovered from a snapshot", s.snapshot_recoveries, s.restarts)
                   : "");
  }
  if (s.initial_bank_total != 0) fmt::print("bank total: {}\n", s.initial_bank_total);
  const double txs = static_cast<double>(s.committed + s.rolled_back);
  fmt::print(
      "wal: {} records, {}; simulated {:.3f} s in {:.3f} s wall, {:.3f} s CPU ({:.0f} tx/s wall, {:.0f} tx/s "
      "CPU; {} events, {} messages)\n",
      s.records, HumanBytes(s.wal_bytes), static_cast<double>(s.sim_time_us) / 1e6, s.wall_seconds, s.cpu_seconds,
      s.wall_seconds > 0 ? txs / s.wall_seconds : 0, s.cpu_seconds > 0 ? txs / s.cpu_seconds : 0, s.events, s.messages);
}

int Run(const RunOpts& in) {
  node::ClusterOptions o = in.cluster;
  o.dir = in.dir;
  o.keep_history = false;  // the oracle is for tests; the CLI only prints the summary
  if (!node::ParseWorkload(in.workload, o.workload.workload)) {
    PrintError(fmt::format("--workload {}: expected bank, cycle or mixed", in.workload));
    return kExitUsage;
  }
  if (!in.epoch.empty()) {
    if (auto d = walfmt::ParseTime(in.epoch); d.ok() && !d->wall_clock) {
      PrintError(
          fmt::format("--epoch {}: a wall-clock time is needed, ISO 8601 (2026-11-30T12:00:00Z) or "
                      "@UNIX_SECONDS, not a duration",
                      in.epoch));
      return kExitUsage;
    }
    auto t = walfmt::ParseWallTime(in.epoch);
    if (!t.ok()) {
      PrintError(fmt::format("--epoch {}: {}", in.epoch, t.status().message()));
      return kExitUsage;
    }
    o.epoch_unix_us = static_cast<uint64_t>(*t);
  }
  for (const auto& c : in.crashes) {
    node::CrashSpec spec;
    if (!node::ParseCrashSpec(c, spec)) {
      PrintError(
          fmt::format("--crash {}: expected NODE@TIME[+RESTART_DELAY], TIME and RESTART_DELAY numbers with a "
                      "unit us, ms, s, m or h (cluster time), e.g. 2@40ms+5ms",
                      c));
      return kExitUsage;
    }
    o.crashes.push_back(spec);
  }
  if (!node::ParseWalRetention(in.wal_retention, o.wal_retention)) {
    PrintError(fmt::format("--wal-retention {}: expected keep or after-snapshot", in.wal_retention));
    return kExitUsage;
  }
  if (!ParseSize(in.segment_size, o.segment_bytes)) {
    PrintError(fmt::format("--segment-size {}: expected a size such as 65536, 64KiB or 1MiB", in.segment_size));
    return kExitUsage;
  }
  if (o.segment_bytes > walfmt::kMaxSegmentBytes) {
    PrintError(fmt::format("--segment-size {}: at most 1GiB ({} bytes)", in.segment_size, walfmt::kMaxSegmentBytes));
    return kExitUsage;
  }
  auto r = node::RunCluster(o);
  if (!r.ok()) {
    PrintError(r.status().message());
    return ExitForStatus(r.status());
  }
  if (in.format == Format::kJson) {
    fmt::print("{}\n", walfmt::DumpJson(SummaryJson(*r), 2));
  } else {
    PrintSummary(*r);
  }
  return kExitOk;
}

}  // namespace

void RegisterRun(CLI::App& root, Registry& reg) {
  auto opts = std::make_shared<RunOpts>();
  CLI::App* sub = root.add_subcommand(
      "run", "Create a simulated cluster in DIR, run 2PC transactions and consistent cuts, write its WAL");
  sub->add_option("dir", opts->dir, "Cluster directory (must not exist, or be empty)")->required();
  auto& c = opts->cluster;
  AddNumber(sub, "--nodes", c.nodes, {1, 64}, "Number of nodes")->default_str(std::to_string(c.nodes));
  AddNumber(sub, "--backups", c.backups, {0, 63}, "Backups per partition (less than --nodes)")
      ->default_str(std::to_string(c.backups));
  AddNumber(sub, "--partitions", c.partitions, {1, 65536}, "Number of partitions (default: 4 per node)");
  sub->add_option("--workload", opts->workload, "bank, cycle or mixed")->capture_default_str();
  AddNumber(sub, "--txs", c.txs, {1, 1000000000}, "Workload transactions to run")->default_str(std::to_string(c.txs));
  AddNumber(sub, "--concurrency", c.concurrency, {1, 100000}, "Transactions in flight")
      ->default_str(std::to_string(c.concurrency));
  auto* cuts =
      AddNumber(sub, "--cuts", c.cuts, {0, 1000000}, "Number of cuts to take")->default_str(std::to_string(c.cuts));
  auto* every = AddNumber(sub, "--cut-every", c.cut_every, {1, 1000000}, "Committed transactions between cuts");
  AddNumber(sub, "--seed", c.seed, {0, UINT64_MAX}, "Seed of the simulation")->default_str(std::to_string(c.seed));
  sub->add_option("--segment-size", opts->segment_size, "WAL segment size (bytes, or with KiB/MiB)")
      ->capture_default_str();
  AddNumber(sub, "--accounts", c.workload.accounts, {2, 1000000}, "Bank accounts (default 1000)");
  AddNumber(sub, "--ring-keys", c.workload.ring, {4, 1000000}, "Keys in the cycle workload's ring (default 1000)");
  sub->add_option("--crash", opts->crashes,
                  "Crash NODE (any, the cut initiator included) at virtual TIME, restart after DELAY: "
                  "NODE@TIME[+DELAY], TIME cluster time since creation with a unit us, ms, s, m or h, "
                  "e.g. 2@40ms+5ms (repeatable)");
  sub->add_option("--epoch", opts->epoch,
                  "The wall-clock time of cluster time 0, recorded in cluster.json so that record times print as "
                  "real times: ISO 8601 (2026-11-30T12:00:00Z) or @UNIX_SECONDS. Default: now");
  AddNumber(sub, "--full-snapshot-at", c.full_snapshot_at_tx, {1, 1000000000},
            "Take a full snapshot (transactions quiesced) after this many workload transactions started");
  AddNumber(sub, "--full-snapshot-every", c.full_snapshot_every_tx, {1, 1000000000},
            "Take a full snapshot after every N workload transactions started (N, 2N, ... up to --txs), "
            "each named full-<at>; combines with --full-snapshot-at");
  sub->add_option("--wal-retention", opts->wal_retention,
                  "WAL retention: keep (every segment) or after-snapshot (after each full snapshot, each node deletes "
                  "its segments wholly before the one holding its SNAPSHOT record, or its last cut record if earlier; "
                  "a restarted node recovers from "
                  "its latest snapshot file plus the WAL after that record)")
      ->capture_default_str();
  AddNumber(sub, "--crashes", c.random_crashes, {0, 1000},
            "Random crashes drawn from the seed, on any node (the initiator included)");
  AddFormatOption(sub, opts->format);
  reg.Add(sub, [opts, cuts, every] {
    // --cut-every alone means "as many cuts as fit".
    if (every->count() > 0 && cuts->count() == 0) opts->cluster.cuts = UINT64_MAX;
    return Run(*opts);
  });
}

namespace {
const CommandRegistrar kRegister{50, RegisterRun};
}  // namespace

}  // namespace walcut::cli
