// `walcut check`: the ladder of checks a CI job runs on a cluster directory,
// as one report. Library code: it never prints; the CLI renders the report
// (text, JSON walcut.check/1, JUnit XML) and maps it to an exit code.
//
// Levels (each includes the ones before it):
//   files    every segment of every node: headers, record checksums,
//            continuity between segments, torn tails (salvage mode, so one run
//            finds every problem). With a state file, segments verified clean
//            before and unchanged since (same name, size and mtime) are skipped.
//   cuts     every cut reconstructed from one scan per node: checks 1-5 of
//            docs/cut-rule.md section 2 and the marker cross-check, per cut and node.
//   restore  the selected cut(s) restored into a temporary directory, the
//            written node-<i>.snap files read back (checksums and fingerprints
//            compared with the restore), the workload invariants run on the
//            restored states, and the directory removed.
//
// The report is a list of items, one per check per subject (a segment, a
// check of a cut on a node, a restored cut): the unit JUnit calls a test case.
// A failed item carries findings, each with its minimal evidence.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cut/cuts.h"
#include "recovery/restore.h"
#include "recovery/verdict.h"
#include "walfmt/outcome.h"
#include "walfmt/status.h"

namespace walcut::recovery {

enum class CheckLevel : uint8_t { kFiles = 1, kCuts = 2, kRestore = 3 };
const char* CheckLevelName(CheckLevel l);
bool ParseCheckLevel(const std::string& s, CheckLevel& out);

// One finding with its minimal evidence. Fields that do not apply stay empty.
struct CheckFinding {
  std::string check;  // "payload-checksum", "atomicity", "fingerprint", "segment-changed", ...
  std::optional<uint32_t> node;
  std::optional<uint64_t> cut;
  std::string file;  // the segment or snapshot file
  std::optional<walfmt::Lsn> position;
  std::string tx;  // "near:seq"
  std::string expected;
  std::string found;
  std::string message;  // one line for people
  // For a cut that is not consistent: the nearest consistent cuts around it.
  std::optional<uint64_t> consistent_before;
  std::optional<uint64_t> consistent_after;
};

enum class ItemOutcome : uint8_t { kPass = 1, kFail = 2, kSkipped = 3 };
const char* ItemOutcomeName(ItemOutcome o);

// One check of one subject. `group` is "node-1" (files), "cut-3" (cuts and
// restore) or "cluster"; `name` says what was checked ("segment
// 0000000000000002.wal", "node 1: atomicity", "fingerprints").
struct CheckItem {
  CheckLevel level = CheckLevel::kFiles;
  std::string group;
  std::string name;
  ItemOutcome outcome = ItemOutcome::kPass;
  std::string note;                    // a torn tail tolerated, why it was skipped, what was checked
  std::vector<CheckFinding> findings;  // non-empty exactly when outcome == kFail
};

// What the files level read of one node's WAL.
struct NodeFilesRead {
  uint64_t segments_read = 0;
  uint64_t bytes_read = 0;  // file bytes (compressed size for .wal.zst)
  uint64_t records = 0;
  uint64_t segments_skipped = 0;  // unchanged since the state file's run
  uint64_t bytes_skipped = 0;
};

// What the files level read, and what the state file let it skip.
struct FilesSummary {
  uint64_t nodes = 0;
  uint64_t segments = 0;
  uint64_t segments_read = 0;
  uint64_t segments_skipped = 0;  // unchanged since the state file's run
  uint64_t bytes_read = 0;        // file bytes (compressed size for .wal.zst)
  uint64_t bytes_skipped = 0;
  uint64_t records = 0;  // records in the segments read
  uint64_t torn_tails = 0;
  bool state_used = false;
  bool state_written = false;
  std::map<uint32_t, NodeFilesRead> per_node;  // every node whose WAL the level listed
};

struct RestoreCheck {
  uint64_t cut = 0;
  bool restored = false;  // false: refused or failed (see the items)
  std::string base;
  std::vector<uint64_t> fingerprints;  // by node, as restored
  uint64_t entries = 0;                // keys over all nodes
  bool invariants_ran = false;
};

struct CheckReport {
  std::string dir;
  CheckLevel level = CheckLevel::kCuts;
  std::optional<uint64_t> selected_cut;  // --cut K; nullopt: every cut
  FilesSummary files;
  std::vector<CheckItem> items;  // files items, then cuts, then restore; deterministic order
  bool has_cuts = false;         // the cuts level ran
  uint64_t cuts_total = 0, cuts_consistent = 0, cuts_inconsistent = 0, cuts_incomplete = 0;
  uint64_t cuts_unavailable = 0;  // evidence in removed segments (a WAL that starts after genesis)
  cut::RestoreWindow window;
  // The cluster times of the window's ends (each cut's latest CUT_FINISH,
  // when it is restorable) and the wall-clock time of cluster time 0, when
  // the WAL records it: together, when each end happened.
  uint64_t window_earliest_time_us = 0, window_latest_time_us = 0;
  std::optional<uint64_t> epoch_unix_us;
  std::vector<RestoreCheck> restores;
  // Failures of the tool itself (a file that cannot be read, no temporary
  // directory): exit 3, never mistaken for findings.
  std::vector<std::string> errors;

  uint64_t FailedItems() const;
  uint64_t Findings() const;
};

// The report's items counted, all of them or those of one level.
struct CheckCounts {
  uint64_t checks = 0, passed = 0, failed = 0, skipped = 0, findings = 0;
};
CheckCounts CountChecks(const CheckReport& r, std::optional<CheckLevel> level = std::nullopt);

// Workload invariants of one restored cut, run on the node states as read
// back from the restored files (by node id). recovery/invariants.h provides
// them (bank total conserved, the cycle one ring); a build without it reports
// the check as skipped. Returns findings (empty: all hold), or an error when
// the cluster description cannot be read.
struct InvariantOutcome {
  bool ran = false;
  std::string summary;  // what was checked, or why not
  std::vector<CheckFinding> findings;
};
using NodeStates = std::vector<const std::map<std::string, std::string>*>;
using InvariantChecker =
    std::function<walfmt::Result<InvariantOutcome>(const std::string& cluster_dir, const NodeStates& states)>;
// The checker this build has (recovery/invariants.h when available), or an
// empty function.
InvariantChecker DefaultInvariantChecker();

struct CheckOptions {
  std::string dir;  // cluster directory
  CheckLevel level = CheckLevel::kCuts;
  std::optional<uint64_t> cut;  // nullopt: every cut
  unsigned jobs = 0;
  std::string state_path;  // "" : no incremental state
  bool full = false;       // read every segment even when the state says it is unchanged
  std::string temp_dir;    // where the restore's temporary directory goes ("" : $TMPDIR or /tmp)
  // Level restore over several cuts: each cut is restored from the previous
  // cut's restore once that one passed its checks (the WAL between the two
  // cuts is read, not the whole prefix); false restores each from genesis.
  bool chain_restores = true;
  InvariantChecker invariants = DefaultInvariantChecker();
  // One node where its WAL lives (docs/scale-out.md): `dir` is then node
  // `node`'s WAL directory. Level files checks its segments; level restore
  // (which needs `verdict`, the cut's verdict from every node's summary)
  // adds the verdict's status of the cut and the node's restore from the
  // verdict (recovery/part.h: RestorePart), read back. Level cuts needs every
  // node and is refused. The items of such reports are named per node, so
  // that the reports of all nodes merge into one (`walcut check merge`).
  std::optional<uint32_t> node;
  const Verdict* verdict = nullptr;
  std::string base_dir;  // the node's full-snapshot base directory, when the verdict's base is one
  // Progress (from worker threads, one call at a time): the stage ("files",
  // "cuts", "cut 5/16: restore"), WAL bytes done in it, and their total (0
  // when not known; an estimate for a restore). Bytes done restart at each
  // stage and never go backwards within one.
  std::function<void(const std::string& stage, uint64_t bytes_done, uint64_t bytes_total)> progress;
};

// Runs the ladder. Fails (kNotFound / kInvalidArgument: usage) when DIR is not
// a cluster directory or --cut names no cut (with `node`: level cuts, or level
// restore without a verdict); every problem found in the data is in the
// report. Tool failures after the start go to report.errors.
walfmt::Result<CheckReport> RunCheck(const CheckOptions& opt);

// How the check came out: report.errors (kIo) come first, then a failed item
// (kFindings); an incomplete last cut alone is not a finding.
walfmt::Outcome CheckOutcome(const CheckReport& r);

// ---- Incremental state (schema "walcut.check-state/1") ---------------------

inline constexpr const char* kCheckStateSchema = "walcut.check-state/1";

struct SegmentState {
  std::string file;  // file name, no directory
  uint64_t index = 0;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  uint32_t crc32c = 0;  // of the whole file's bytes
};
struct CheckState {
  std::map<uint32_t, std::map<uint64_t, SegmentState>> nodes;  // node -> segment index -> state
};
// At most walfmt::kMaxJsonFileBytes; kNotFound when absent.
walfmt::Result<CheckState> ReadCheckState(const std::string& path);
// Atomically and durably (walfmt::WriteFileAtomic).
walfmt::Status WriteCheckState(const std::string& path, const CheckState& s);
std::string CheckStateToJson(const CheckState& s);
walfmt::Result<CheckState> CheckStateFromJson(const std::string& text, const std::string& origin);

}  // namespace walcut::recovery
