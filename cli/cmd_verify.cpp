// walcut verify PATH...: integrity of every segment of every node.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/follow.h"
#include "cli/inputs.h"
#include "cli/numbers.h"
#include "cli/output.h"
#include "cli/signals.h"
#include "walfmt/parallel_scan.h"
#include "walfmt/text_escape.h"

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

std::string_view SegmentStatus(const walfmt::SegmentOutcome& o) {
  for (const auto& p : o.problems) {
    if (p.kind == walfmt::ProblemKind::kIo) return "io-error";
  }
  for (const auto& p : o.problems) {
    if (p.fatal) return o.scan.header_ok ? "corrupt" : "bad-header";
  }
  if (o.scan.end == walfmt::SegmentEnd::kTornTail) return "torn-tail";
  return "ok";
}

walfmt::Problem NodeProblem(walfmt::ProblemKind kind, const NodeWal& n, std::string detail) {
  walfmt::Problem p;
  p.kind = kind;
  p.node = n.node_id.value_or(0);
  p.node_known = n.node_id.has_value();
  p.file = n.label;
  p.detail = std::move(detail);
  return p;
}

// What verify found: the problems of each node (besides its segments'),
// those of the inputs together, and the tallies.
struct VerifyTally {
  std::vector<std::vector<walfmt::Problem>> node_problems;
  std::vector<walfmt::Problem> cluster_problems;
  ProblemTally tally;
  uint64_t total_segments = 0, records = 0, bytes = 0, torn = 0, bad_segments = 0;
  int rc = kExitOk;
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

// The problems beyond the segments' own (a node without segments, a node id
// given twice, segments of several clusters) and the tallies.
VerifyTally TallyVerify(const Inputs& in, const std::vector<std::vector<walfmt::SegmentOutcome>>& outcomes) {
  VerifyTally t;
  for (const auto& oc : outcomes) t.total_segments += oc.size();
  // Problems that belong to a node rather than to one segment.
  t.node_problems.resize(in.nodes.size());
  for (const walfmt::Problem& p : in.problems) {
    for (size_t i = 0; i < in.nodes.size(); ++i) {
      if (p.file.rfind(in.nodes[i].label, 0) == 0) {
        t.node_problems[i].push_back(p);
        break;
      }
    }
  }
  std::map<uint32_t, size_t> seen_ids;
  std::set<uint64_t> clusters;
  for (size_t i = 0; i < in.nodes.size(); ++i) {
    const NodeWal& n = in.nodes[i];
    if (outcomes[i].empty()) {
      t.node_problems[i].push_back(
          NodeProblem(walfmt::ProblemKind::kMissingSegment, n, "node has no WAL segments (expected wal/<index>.wal)"));
    }
    for (const auto& oc : outcomes[i]) {
      if (oc.scan.header_ok) clusters.insert(oc.scan.header.cluster_id);
    }
    if (n.node_id) {
      auto [it, fresh] = seen_ids.emplace(*n.node_id, i);
      if (!fresh) {
        t.node_problems[i].push_back(
            NodeProblem(walfmt::ProblemKind::kSegmentMismatch, n,
                        fmt::format("node id {} also used by {}", *n.node_id, in.nodes[it->second].label)));
      }
    }
  }
  if (clusters.size() > 1) {
    walfmt::Problem p;
    p.kind = walfmt::ProblemKind::kSegmentMismatch;
    p.detail = fmt::format("segments of {} different clusters were given together", clusters.size());
    t.cluster_problems.push_back(p);
  }
  for (const auto& p : t.cluster_problems) t.tally.Add(p);
  for (size_t i = 0; i < in.nodes.size(); ++i) {
    for (const auto& p : t.node_problems[i]) t.tally.Add(p);
    for (const auto& oc : outcomes[i]) {
      for (const auto& p : oc.problems) t.tally.Add(p);
      t.records += oc.scan.records;
      t.bytes += oc.scan.file_bytes;
      if (oc.scan.end == walfmt::SegmentEnd::kTornTail) ++t.torn;
      if (SegmentStatus(oc) != "ok" && SegmentStatus(oc) != "torn-tail") ++t.bad_segments;
    }
  }
  t.rc = t.tally.ExitCode();
  return t;
}

nlohmann::json SegmentJson(const walfmt::SegmentOutcome& oc) {
  nlohmann::json s{{"file", oc.scan.file.path},
                   {"index", oc.scan.file.index},
                   {"compressed", oc.scan.file.compressed},
                   {"status", std::string(SegmentStatus(oc))},
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

void PrintVerifyJson(const Inputs& in, const std::vector<std::vector<walfmt::SegmentOutcome>>& outcomes,
                     const VerifyTally& t) {
  nlohmann::json doc{{"schema", kVerifySchema}, {"ok", t.rc == kExitOk}};
  nlohmann::json nodes = nlohmann::json::array();
  for (size_t i = 0; i < in.nodes.size(); ++i) {
    const NodeWal& n = in.nodes[i];
    nlohmann::json jn{{"node", n.node_id ? nlohmann::json(*n.node_id) : nlohmann::json(nullptr)}, {"path", n.label}};
    nlohmann::json js = nlohmann::json::array();
    uint64_t nrec = 0;
    for (const auto& oc : outcomes[i]) {
      nrec += oc.scan.records;
      js.push_back(SegmentJson(oc));
    }
    jn["records"] = nrec;
    jn["segments"] = js;
    nlohmann::json np = nlohmann::json::array();
    for (const auto& p : t.node_problems[i]) np.push_back(ProblemJson(p));
    jn["problems"] = np;
    nodes.push_back(jn);
  }
  doc["nodes"] = nodes;
  nlohmann::json cp = nlohmann::json::array();
  for (const auto& p : t.cluster_problems) cp.push_back(ProblemJson(p));
  doc["problems"] = cp;
  doc["summary"] = {{"nodes", in.nodes.size()}, {"segments", t.total_segments}, {"bytes", t.bytes},
                    {"records", t.records},     {"findings", t.tally.findings}, {"notices", t.tally.notices},
                    {"io_errors", t.tally.io},  {"torn_tails", t.torn},         {"bad_segments", t.bad_segments},
                    {"exit_code", t.rc}};
  fmt::print("{}\n", walfmt::DumpJson(doc, 2));
}

void PrintVerifyText(const VerifyOptions& o, const Inputs& in,
                     const std::vector<std::vector<walfmt::SegmentOutcome>>& outcomes, const VerifyTally& t) {
  for (const auto& p : t.cluster_problems) fmt::print("cluster: {}\n", p.ToString());
  for (size_t i = 0; i < in.nodes.size(); ++i) {
    const NodeWal& n = in.nodes[i];
    uint64_t nrec = 0, nbytes = 0;
    for (const auto& oc : outcomes[i]) {
      nrec += oc.scan.records;
      nbytes += oc.scan.file_bytes;
    }
    fmt::print("node {} ({}): {} segment{}, {}, {} records\n",
               n.node_id ? fmt::format("{}", *n.node_id) : std::string("?"), n.label, outcomes[i].size(),
               outcomes[i].size() == 1 ? "" : "s", HumanBytes(nbytes), nrec);
    for (const auto& p : t.node_problems[i]) fmt::print("  {}: {}\n", p.fatal ? "FINDING" : "note", p.ToString());
    for (const auto& oc : outcomes[i]) {
      const std::string_view st = SegmentStatus(oc);
      if (st == "ok" && !o.verbose && oc.problems.empty()) continue;
      std::string line = fmt::format("  {:<26} {:<10} {} records", BaseNameOf(oc.scan.file.path), st, oc.scan.records);
      fmt::print("{}\n", line);
      for (const auto& p : oc.problems) {
        fmt::print("    {}: {}\n", p.fatal ? "FINDING" : "note", p.ToString());
      }
    }
  }
  std::string verdict;
  if (t.rc == kExitOk) {
    verdict = t.torn > 0
                  ? fmt::format("OK ({} torn tail{} at the end of the WAL, tolerated)", t.torn, t.torn > 1 ? "s" : "")
                  : std::string("OK");
  } else if (t.rc == kExitIo) {
    verdict =
        fmt::format("ERROR ({} I/O error{}, {} findings)", t.tally.io, t.tally.io > 1 ? "s" : "", t.tally.findings);
  } else {
    verdict = fmt::format("FAILED ({} finding{} in {} segment{})", t.tally.findings, t.tally.findings > 1 ? "s" : "",
                          t.bad_segments, t.bad_segments == 1 ? "" : "s");
  }
  fmt::print("verified {} node{}, {} segment{}, {}, {} records: {}\n", in.nodes.size(), in.nodes.size() == 1 ? "" : "s",
             t.total_segments, t.total_segments == 1 ? "" : "s", HumanBytes(t.bytes), t.records, verdict);
}

int RunVerify(const VerifyOptions& o) {
  auto in = ResolveInputs(o.paths);
  if (!in.ok()) {
    PrintError(in.status().message());
    return ExitForStatus(in.status());
  }
  std::vector<std::vector<walfmt::SegmentOutcome>> outcomes;
  if (const int rc = ReadOutcomes(o, *in, outcomes); rc != kExitOk) return rc;
  const VerifyTally t = TallyVerify(*in, outcomes);
  if (o.format == Format::kJson) {
    PrintVerifyJson(*in, outcomes, t);
  } else {
    PrintVerifyText(o, *in, outcomes, t);
  }
  return t.rc;
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
            "Worker threads parsing segments (default: one per core); each segment is also read ahead, and its "
            "checksums checked, on a helper thread, so -j1 still uses two threads");
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
