// walcut stats PATH...: what the WAL holds, per record type and per node.
#include <algorithm>
#include <array>
#include <memory>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/inputs.h"
#include "cli/numbers.h"
#include "cli/output.h"
#include "walfmt/bytes.h"
#include "walfmt/parallel_scan.h"
#include "walfmt/text_escape.h"

namespace walcut::cli {
namespace {

constexpr size_t kSlots = walfmt::kMaxKnownRecordType + 2;  // last slot: skipped unknown types

struct Counts {
  std::array<uint64_t, kSlots> count{};
  std::array<uint64_t, kSlots> bytes{};
  uint64_t committed = 0;  // transactions counted once cluster-wide (see Count())
  uint64_t rolled_back = 0;
  uint64_t one_phase = 0;
  uint64_t commit_records = 0;
  uint64_t rollback_records = 0;
  uint64_t cut_starts = 0, cut_finishes = 0, cut_aborts = 0, snapshots = 0;
  uint64_t cut_min = UINT64_MAX, cut_max = 0;

  void Merge(const Counts& o) {
    for (size_t i = 0; i < kSlots; ++i) {
      count[i] += o.count[i];
      bytes[i] += o.bytes[i];
    }
    committed += o.committed;
    rolled_back += o.rolled_back;
    one_phase += o.one_phase;
    commit_records += o.commit_records;
    rollback_records += o.rollback_records;
    cut_starts += o.cut_starts;
    cut_finishes += o.cut_finishes;
    cut_aborts += o.cut_aborts;
    snapshots += o.snapshots;
    cut_min = std::min(cut_min, o.cut_min);
    cut_max = std::max(cut_max, o.cut_max);
  }
};

// Smallest participant of a TX_COMMIT / TX_ROLLBACK payload whose participant
// list starts at `at`; UINT32_MAX when the payload is too short (damaged
// records never get here: the checksum passed).
uint32_t MinParticipant(std::span<const uint8_t> p, size_t at) {
  if (p.size() < at + 2) return UINT32_MAX;
  // As many ids as the list says, or as the payload holds.
  const size_t n = std::min<size_t>(walfmt::LoadU16(p.data() + at), (p.size() - at - 2) / 4);
  const uint8_t* ids = p.data() + at + 2;
  uint32_t m = UINT32_MAX;
  for (size_t i = 0; i < n; ++i) m = std::min(m, walfmt::LoadU32(ids + 4 * i));
  return m;
}

// Counts one record. A transaction is counted once in the cluster: by the
// participant with the smallest node id, so no set of ids is kept and
// memory does not grow with the WAL.
void Count(Counts& c, const walfmt::RecordView& v, uint32_t node) {
  const auto t = static_cast<size_t>(v.type);
  c.count[t] += 1;
  c.bytes[t] += v.size();
  // TX_DATA and TX_PREPARE need nothing more (RunStats leaves them to the
  // scan's own counts).
  if (v.type < walfmt::RecordType::kTxCommit) return;
  const auto& p = v.payload;
  switch (v.type) {
    case walfmt::RecordType::kTxCommit:
      ++c.commit_records;
      // tx(12) marker(8) time(8) flags(2) participants
      if (MinParticipant(p, 30) == node) {
        ++c.committed;
        if (p.size() >= 30 && (walfmt::LoadU16(p.data() + 28) & walfmt::kTxFlagOnePhase)) ++c.one_phase;
      }
      break;
    case walfmt::RecordType::kTxRollback:
      ++c.rollback_records;
      // tx(12) time(8) flags(2) participants
      if (MinParticipant(p, 22) == node) ++c.rolled_back;
      break;
    case walfmt::RecordType::kCutStart:
    case walfmt::RecordType::kCutFinish:
    case walfmt::RecordType::kCutAbort:
      if (p.size() >= 8) {
        const uint64_t id = walfmt::LoadU64(p.data());
        c.cut_min = std::min(c.cut_min, id);
        c.cut_max = std::max(c.cut_max, id);
      }
      if (v.type == walfmt::RecordType::kCutStart) ++c.cut_starts;
      if (v.type == walfmt::RecordType::kCutFinish) ++c.cut_finishes;
      if (v.type == walfmt::RecordType::kCutAbort) ++c.cut_aborts;
      break;
    case walfmt::RecordType::kSnapshot:
      ++c.snapshots;
      break;
    default:
      break;
  }
}

std::string TypeLabel(size_t slot) {
  return slot == kSlots - 1 ? std::string("(skipped unknown)")
                            : std::string(walfmt::RecordTypeName(static_cast<walfmt::RecordType>(slot)));
}

double Pct(uint64_t a, uint64_t b) { return b == 0 ? 0.0 : 100.0 * static_cast<double>(a) / static_cast<double>(b); }

nlohmann::json CountsJson(const Counts& c) {
  nlohmann::json types = nlohmann::json::array();
  uint64_t n = 0, b = 0;
  for (size_t i = 1; i < kSlots; ++i) {
    n += c.count[i];
    b += c.bytes[i];
  }
  for (size_t i = 1; i < kSlots; ++i) {
    if (c.count[i] == 0) continue;
    types.push_back({{"type", TypeLabel(i)},
                     {"count", c.count[i]},
                     {"count_pct", Pct(c.count[i], n)},
                     {"bytes", c.bytes[i]},
                     {"bytes_pct", Pct(c.bytes[i], b)}});
  }
  nlohmann::json j{{"records", n},
                   {"record_bytes", b},
                   {"types", types},
                   {"transactions",
                    {{"committed", c.committed},
                     {"rolled_back", c.rolled_back},
                     {"one_phase", c.one_phase},
                     {"commit_records", c.commit_records},
                     {"rollback_records", c.rollback_records}}},
                   {"cuts", {{"starts", c.cut_starts}, {"finishes", c.cut_finishes}, {"aborts", c.cut_aborts}}},
                   {"snapshots", c.snapshots}};
  if (c.cut_min != UINT64_MAX) {
    j["cuts"]["min_id"] = c.cut_min;
    j["cuts"]["max_id"] = c.cut_max;
  }
  return j;
}

struct StatsOptions {
  std::vector<std::string> paths;
  Format format = Format::kText;
  unsigned jobs = 0;
};

// What the scan counted: in all, per node, and each node's file bytes.
struct StatsTotals {
  Counts total;
  std::vector<Counts> per_node;
  std::vector<uint64_t> node_bytes;
};

void PrintStatsJson(const Inputs& in, const StatsTotals& t, const walfmt::ProblemTally& tally, int rc) {
  nlohmann::json doc = CountsJson(t.total);
  doc["schema"] = kStatsSchema;
  nlohmann::json nodes = nlohmann::json::array();
  for (size_t i = 0; i < in.nodes.size(); ++i) {
    nlohmann::json jn = CountsJson(t.per_node[i]);
    jn["node"] = in.nodes[i].node_id ? nlohmann::json(*in.nodes[i].node_id) : nlohmann::json(nullptr);
    jn["path"] = in.nodes[i].label;
    jn["segments"] = in.nodes[i].wal.segments.size();
    jn["file_bytes"] = t.node_bytes[i];
    nodes.push_back(jn);
  }
  doc["nodes"] = nodes;
  doc["findings"] = tally.findings;
  doc["exit_code"] = rc;
  fmt::print("{}\n", walfmt::DumpJson(doc, 2));
}

void PrintStatsText(const Inputs& in, const StatsTotals& t) {
  uint64_t n = 0, b = 0;
  for (size_t i = 1; i < kSlots; ++i) {
    n += t.total.count[i];
    b += t.total.bytes[i];
  }
  fmt::print("{:<18} {:>12} {:>8} {:>16} {:>8}\n", "Type", "N", "(%)", "Record size", "(%)");
  fmt::print("{:<18} {:>12} {:>8} {:>16} {:>8}\n", "----", "-", "---", "-----------", "---");
  for (size_t i = 1; i < kSlots; ++i) {
    if (t.total.count[i] == 0) continue;
    fmt::print("{:<18} {:>12} {:>8.2f} {:>16} {:>8.2f}\n", TypeLabel(i), t.total.count[i], Pct(t.total.count[i], n),
               t.total.bytes[i], Pct(t.total.bytes[i], b));
  }
  fmt::print("{:<18} {:>12} {:>8} {:>16} {:>8}\n", "Total", n, "", b, "");
  fmt::print("\n");
  for (size_t i = 0; i < in.nodes.size(); ++i) {
    const Counts& c = t.per_node[i];
    uint64_t nn = 0;
    for (size_t k = 1; k < kSlots; ++k) nn += c.count[k];
    fmt::print("node {:<3} {:>4} segments {:>10}  {:>10} records  {:>8} commits  {:>6} rollbacks  cuts {}\n",
               in.nodes[i].node_id ? fmt::format("{}", *in.nodes[i].node_id) : std::string("?"),
               in.nodes[i].wal.segments.size(), HumanBytes(t.node_bytes[i]), nn, c.commit_records, c.rollback_records,
               c.cut_min == UINT64_MAX ? std::string("none")
                                       : fmt::format("{}..{} ({} started, {} finished, {} aborted)", c.cut_min,
                                                     c.cut_max, c.cut_starts, c.cut_finishes, c.cut_aborts));
  }
  fmt::print("\ntransactions: {} committed ({} one-phase, {} two-phase), {} rolled back\n", t.total.committed,
             t.total.one_phase, t.total.committed - t.total.one_phase, t.total.rolled_back);
  if (t.total.cut_min != UINT64_MAX) {
    fmt::print("cuts: ids {}..{}; {} CUT_START, {} CUT_FINISH, {} CUT_ABORT records\n", t.total.cut_min,
               t.total.cut_max, t.total.cut_starts, t.total.cut_finishes, t.total.cut_aborts);
  } else {
    fmt::print("cuts: none\n");
  }
  if (t.total.snapshots > 0) fmt::print("snapshots: {} SNAPSHOT records\n", t.total.snapshots);
}

int RunStats(const StatsOptions& o) {
  auto in = ResolveInputs(o.paths);
  if (!in.ok()) {
    PrintError(in.status().message());
    return ExitForStatus(in.status());
  }
  std::vector<walfmt::NodeSegments> segs;
  std::vector<std::vector<Counts>> counts(in->nodes.size());
  uint64_t total_segments = 0;
  for (size_t i = 0; i < in->nodes.size(); ++i) {
    segs.push_back(in->nodes[i].wal);
    counts[i].resize(in->nodes[i].wal.segments.size());
    total_segments += in->nodes[i].wal.segments.size();
  }
  Progress progress("stats");
  if (progress.enabled()) progress.SetTotal(DataBytes(segs));
  walfmt::ParallelScanOptions po;
  po.mode = walfmt::RecoveryMode::kSalvage;
  po.jobs = o.jobs;
  po.progress = [&progress](uint64_t, uint64_t b) { progress.Update(b); };
  // TX_DATA and TX_PREPARE, two records in three, are only counted: the scan
  // counts them itself (scan.unvisited), without a call per record.
  po.visit_types =
      ~(walfmt::RecordTypeBit(walfmt::RecordType::kTxData) | walfmt::RecordTypeBit(walfmt::RecordType::kTxPrepare));
  po.make_visitor = [&](size_t n, size_t s) -> walfmt::RecordVisitor {
    Counts* c = &counts[n][s];
    const uint32_t node = in->nodes[n].node_id.value_or(UINT32_MAX);
    return [c, node](const walfmt::RecordView& v) {
      Count(*c, v, node);
      return true;
    };
  };
  const auto outcomes = walfmt::ScanInParallel(segs, po);
  progress.Finish();

  walfmt::ProblemTally tally;
  for (const auto& p : in->problems) {
    tally.Add(p);
    PrintProblem(p);
  }
  StatsTotals t;
  t.per_node.resize(in->nodes.size());
  t.node_bytes.assign(in->nodes.size(), 0);
  for (size_t i = 0; i < in->nodes.size(); ++i) {
    for (size_t s = 0; s < counts[i].size(); ++s) {
      t.per_node[i].Merge(counts[i][s]);
      const walfmt::SegmentScan& scan = outcomes[i][s].scan;
      for (size_t type = 0; type < scan.unvisited.size(); ++type) {
        t.per_node[i].count[type] += scan.unvisited[type].records;
        t.per_node[i].bytes[type] += scan.unvisited[type].bytes;
      }
      t.per_node[i].count[kSlots - 1] += outcomes[i][s].scan.skipped_unknown;
      t.per_node[i].bytes[kSlots - 1] += outcomes[i][s].scan.skipped_unknown_bytes;
      t.node_bytes[i] += outcomes[i][s].scan.file_bytes;
      for (const auto& p : outcomes[i][s].problems) {
        tally.Add(p);
        PrintProblem(p);
      }
    }
    t.total.Merge(t.per_node[i]);
  }
  const int rc = ExitCode(tally.outcome());

  if (o.format == Format::kJson) {
    PrintStatsJson(*in, t, tally, rc);
  } else {
    PrintStatsText(*in, t);
  }
  return rc;
}

}  // namespace

void RegisterStats(CLI::App& root, Registry& reg) {
  auto o = std::make_shared<StatsOptions>();
  CLI::App* cmd = root.add_subcommand(
      "stats",
      "Per record type: count, bytes and share; per node: segments, records, commits, rollbacks, cuts.\n"
      "Every checksum is checked; damage is reported on stderr and makes the exit code 1.");
  cmd->add_option(
         "paths", o->paths,
         "Cluster dir, node dir, wal dir or segment files; - reads one segment (plain or zstd) from standard input")
      ->required();
  AddFormatOption(cmd, o->format);
  AddProgressOptions(cmd);
  AddNumber(cmd, "-j,--jobs", o->jobs, kJobsRange,
            "Worker threads parsing segments, each reading, checking and counting a segment on its own (default: "
            "one per core); -j1 does all the work on one thread");
  reg.Add(cmd, [o] { return RunStats(*o); });
}

namespace {
const CommandRegistrar kRegister{30, RegisterStats};
}  // namespace

}  // namespace walcut::cli
