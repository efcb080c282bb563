// walcut verify PATH...: integrity of every segment of every node.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <utility>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/follow.h"
#include "cli/inputs.h"
#include "cli/numbers.h"
#include "cli/output.h"
#include "cli/signals.h"
#include "walfmt/parallel_scan.h"
#include "walfmt/text_escape.h"
#include "walfmt/verify_report.h"

namespace walcut::cli {
namespace {

struct VerifyOptions {
  std::vector<std::string> paths;
  Format format = Format::kText;
  unsigned jobs = 0;
  bool verbose = false;
  bool follow = false;
  unsigned follow_interval_ms = 100;
};

// Every segment of every node read (in parallel, or followed live with
// --follow); kExitOk, or the usage error printed.
int ReadOutcomes(const VerifyOptions& o, const Inputs& in, std::vector<std::vector<walfmt::SegmentOutcome>>& outcomes) {
  if (o.follow) {
    if (in.nodes.size() != 1) {
      PrintError(fmt::format("--follow reads one node's WAL; the input has {} nodes: give a node or WAL directory",
                             in.nodes.size()));
      return kExitUsage;
    }
    if (in.nodes.front().wal_dir.empty()) {
      PrintError("--follow reads a WAL directory (a node or WAL directory), not segment files");
      return kExitUsage;
    }
    // Each problem on its own line as it is found; the report below once
    // interrupted.
    FollowOptions fo;
    fo.mode = walfmt::RecoveryMode::kSalvage;
    fo.interval = std::chrono::milliseconds(o.follow_interval_ms);
    auto live = [&o](const walfmt::Problem& p) {
      if (o.format == Format::kJson) {
        PrintProblem(p);
        return;
      }
      fmt::print("{}: {}\n", p.fatal ? "FINDING" : "note", p.ToString());
      std::fflush(stdout);
    };
    std::atomic<bool> stop{false};
    StopOnSignal(&stop);
    outcomes.push_back(FollowNodeWal(
        in.nodes.front(), 0, fo, stop, [](const walfmt::RecordView&) { return true; }, live));
    StopOnSignal(nullptr);
    return kExitOk;
  }
  std::vector<walfmt::NodeSegments> segs;
  for (const NodeWal& n : in.nodes) segs.push_back(n.wal);
  Progress progress("verify");
  if (progress.enabled()) progress.SetTotal(DataBytes(segs));
  walfmt::ParallelScanOptions po;
  po.mode = walfmt::RecoveryMode::kSalvage;  // find every problem, not just the first
  po.jobs = o.jobs;
  po.progress = [&progress](uint64_t, uint64_t b) { progress.Update(b); };
  outcomes = walfmt::ScanInParallel(segs, po);
  progress.Finish();
  return kExitOk;
}

nlohmann::json SegmentJson(const walfmt::VerifySegment& vs) {
  const walfmt::SegmentOutcome& oc = vs.outcome;
  nlohmann::json s{{"file", oc.scan.file.path},
                   {"index", oc.scan.file.index},
                   {"compressed", oc.scan.file.compressed},
                   {"status", std::string(walfmt::SegmentStatusName(vs.status))},
                   {"records", oc.scan.records},
                   {"bytes", oc.scan.file_bytes},
                   {"valid_end", walfmt::Lsn{oc.scan.file.index, oc.scan.valid_end}.ToString()},
                   {"bytes_dropped", oc.scan.bytes_dropped}};
  if (oc.scan.end == walfmt::SegmentEnd::kTornTail) {
    s["torn_tail"] = {{"lsn", walfmt::Lsn{oc.scan.file.index, oc.scan.torn_offset}.ToString()},
                      {"bytes_lost", oc.scan.file_bytes - oc.scan.torn_offset},
                      {"zero_filled", oc.scan.zero_filled_tail}};
  }
  nlohmann::json jp = nlohmann::json::array();
  for (const auto& p : oc.problems) jp.push_back(ProblemJson(p));
  s["problems"] = jp;
  return s;
}

void PrintVerifyJson(const walfmt::VerifyReport& r) {
  nlohmann::json doc{{"schema", kVerifySchema}, {"ok", r.ok()}};
  nlohmann::json nodes = nlohmann::json::array();
  for (const walfmt::VerifyNode& n : r.nodes) {
    nlohmann::json jn{{"node", n.node_id ? nlohmann::json(*n.node_id) : nlohmann::json(nullptr)}, {"path", n.label}};
    nlohmann::json js = nlohmann::json::array();
    for (const auto& s : n.segments) js.push_back(SegmentJson(s));
    jn["records"] = n.records;
    jn["segments"] = js;
    nlohmann::json np = nlohmann::json::array();
    for (const auto& p : n.problems) np.push_back(ProblemJson(p));
    jn["problems"] = np;
    nodes.push_back(jn);
  }
  doc["nodes"] = nodes;
  nlohmann::json cp = nlohmann::json::array();
  for (const auto& p : r.problems) cp.push_back(ProblemJson(p));
  doc["problems"] = cp;
  doc["summary"] = {{"nodes", r.nodes.size()},
                    {"segments", r.segments},
                    {"bytes", r.bytes},
                    {"records", r.records},
                    {"findings", r.tally.findings},
                    {"notices", r.tally.notices},
                    {"io_errors", r.tally.io},
                    {"torn_tails", r.torn_tails},
                    {"bad_segments", r.bad_segments},
                    {"exit_code", ExitCode(r.outcome)}};
  fmt::print("{}\n", walfmt::DumpJson(doc, 2));
}

// The last line: what verify concluded.
std::string VerdictText(const walfmt::VerifyReport& r) {
  switch (r.outcome) {
    case walfmt::Outcome::kOk:
      return r.torn_tails > 0 ? fmt::format("OK ({} torn tail{} at the end of the WAL, tolerated)", r.torn_tails,
                                            r.torn_tails > 1 ? "s" : "")
                              : std::string("OK");
    case walfmt::Outcome::kIo:
      return fmt::format("ERROR ({} I/O error{}, {} findings)", r.tally.io, r.tally.io > 1 ? "s" : "",
                         r.tally.findings);
    default:
      return fmt::format("FAILED ({} finding{} in {} segment{})", r.tally.findings, r.tally.findings > 1 ? "s" : "",
                         r.bad_segments, r.bad_segments == 1 ? "" : "s");
  }
}

void PrintVerifyText(const VerifyOptions& o, const walfmt::VerifyReport& r) {
  for (const auto& p : r.problems) fmt::print("cluster: {}\n", p.ToString());
  for (const walfmt::VerifyNode& n : r.nodes) {
    fmt::print("node {} ({}): {} segment{}, {}, {} records\n",
               n.node_id ? fmt::format("{}", *n.node_id) : std::string("?"), n.label, n.segments.size(),
               n.segments.size() == 1 ? "" : "s", HumanBytes(n.bytes), n.records);
    for (const auto& p : n.problems) fmt::print("  {}: {}\n", p.fatal ? "FINDING" : "note", p.ToString());
    for (const auto& s : n.segments) {
      const walfmt::SegmentOutcome& oc = s.outcome;
      if (s.status == walfmt::SegmentStatus::kOk && !o.verbose && oc.problems.empty()) continue;
      fmt::print("  {:<26} {:<10} {} records\n", BaseNameOf(oc.scan.file.path), walfmt::SegmentStatusName(s.status),
                 oc.scan.records);
      for (const auto& p : oc.problems) {
        fmt::print("    {}: {}\n", p.fatal ? "FINDING" : "note", p.ToString());
      }
    }
  }
  fmt::print("verified {} node{}, {} segment{}, {}, {} records: {}\n", r.nodes.size(), r.nodes.size() == 1 ? "" : "s",
             r.segments, r.segments == 1 ? "" : "s", HumanBytes(r.bytes), r.records, VerdictText(r));
}

int RunVerify(const VerifyOptions& o) {
  auto in = ResolveInputs(o.paths);
  if (!in.ok()) {
    PrintError(in.status().message());
    return ExitForStatus(in.status());
  }
  std::vector<std::vector<walfmt::SegmentOutcome>> outcomes;
  if (const int rc = ReadOutcomes(o, *in, outcomes); rc != kExitOk) return rc;
  std::vector<walfmt::VerifyInput> nodes;
  for (const NodeWal& n : in->nodes) nodes.push_back({n.label, n.node_id});
  const walfmt::VerifyReport r = walfmt::MakeVerifyReport(nodes, in->problems, std::move(outcomes));
  if (o.format == Format::kJson) {
    PrintVerifyJson(r);
  } else {
    PrintVerifyText(o, r);
  }
  return ExitCode(r.outcome);
}

}  // namespace

void RegisterVerify(CLI::App& root, Registry& reg) {
  auto o = std::make_shared<VerifyOptions>();
  CLI::App* cmd = root.add_subcommand(
      "verify",
      "Check the integrity of every segment: headers, checksums, continuity between segments, torn tails.\n"
      "Exit 0 when clean (a torn tail at the very end of a node's WAL is reported but is not a failure),\n"
      "1 on findings, 2 on usage errors, 3 on I/O errors.");
  cmd->add_option(
         "paths", o->paths,
         "Cluster dir, node dir, wal dir or segment files; - reads one segment (plain or zstd) from standard input")
      ->required();
  AddFormatOption(cmd, o->format);
  AddProgressOptions(cmd);
  AddNumber(cmd, "-j,--jobs", o->jobs, kJobsRange,
            "Worker threads parsing segments, each reading, checking and counting a segment on its own (default: "
            "one per core); -j1 does all the work on one thread");
  cmd->add_flag("-v,--verbose", o->verbose, "List every segment, not only those with problems");
  cmd->add_flag("-f,--follow", o->follow,
                "Keep checking records as the WAL grows, across new segments, printing each finding as it is "
                "found, until interrupted (SIGINT, SIGTERM: the report of what was read, exit 0 or 1); one node "
                "(a node or WAL directory); an incomplete record at the end is checked once it is complete");
  AddNumber(cmd, "--follow-interval", o->follow_interval_ms, {1, 60000},
            "With --follow: milliseconds between looks for more WAL (default 100)");
  reg.Add(cmd, [o] { return RunVerify(*o); });
}

namespace {
const CommandRegistrar kRegister{10, RegisterVerify};
}  // namespace

}  // namespace walcut::cli
