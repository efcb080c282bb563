// `walcut history check`: a real cluster's consistent cuts checked against
// the clients' own history of transactions (`walcut load --history FILE`),
// not against the WAL's bookkeeping alone. All processes share one machine
// and so one clock; the WAL's cluster times become wall-clock times with
// cluster.json's epoch_unix_us.
//
// For every consistent cut K (the WAL's cut verdict only picks which cuts to
// check), with T in cut K on node i computed here from node i's records by
// the cut rule (docs/cut-rule.md): T committed at p(T) and p(T) <
// CUT_START_i(K) with T not in after_i(K), or p(T) > CUT_START_i(K) with T in
// before_i(K):
//   rule 1  a transaction the client saw committed (ack_us) before the
//           earliest CUT_START(K) is in cut K on every participant;
//   rule 2  a transaction the client started (start_us) after the latest
//           CUT_FINISH(K) is in cut K on no node;
//   rule 3  every committed transaction, named by the history or not (an
//           unanswered one), is in cut K on all its participants or on none;
//   rule 4  the restore of cut K (recovery/restore.h, in memory, from
//           genesis) equals the initial data (cluster.json) plus the writes
//           of the transactions in cut K, applied in commit order (for
//           each key, the order its primary's WAL committed them in): the
//           history's writes for those it saw committed, the WAL's TX_DATA
//           for the others (unanswered, in doubt, the initial data's own);
//   rule 5  the workload's invariants (recovery/invariants.h) hold on it.
// A transaction's participants are the nodes its records name and, for one
// the client saw committed, every node holding a key it wrote (topology).
// Rules 1 and 2 take the clock slack in the safe direction: a transaction
// is held to rule 1 only when ack_us + slack < CUT_START, to rule 2 only
// when start_us - slack > CUT_FINISH. And, over the whole history (rule 3,
// outcomes): a transaction the history saw committed has a TX_COMMIT on
// every participant and no TX_ROLLBACK; one it saw aborted (not in doubt,
// HistoryTx::InDoubt) is committed nowhere; the committed transactions the history does not name (after its
// first transaction started) are at most its unanswered ones, per near node.
//
// Library code: nothing here prints.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "recovery/state_set.h"
#include "walfmt/cluster_layout.h"
#include "walfmt/lsn.h"
#include "walfmt/record.h"
#include "walfmt/status.h"

namespace walcut::recovery {

inline constexpr const char* kHistoryCheckSchema = "walcut.history-check/1";
// Findings kept per cut (and for the outcomes); the rest are counted.
inline constexpr size_t kMaxHistoryFindings = 100;

// ---- The history: one JSON object per line, as `walcut load --history`
// writes it (cli/cmd_load.cpp, RecordJson).

enum class HistoryOutcome : uint8_t { kCommitted = 1, kAborted = 2, kRefused = 3, kUnknown = 4, kInDoubt = 5 };
const char* HistoryOutcomeName(HistoryOutcome o);

struct HistoryTx {
  size_t line = 0;  // 1-based line of the file
  uint32_t client = 0;
  uint64_t request = 0;
  uint32_t node = 0;               // the node the client sent it to (its near node)
  std::optional<walfmt::TxId> tx;  // known when the client got an answer (committed, aborted)
  HistoryOutcome outcome = HistoryOutcome::kUnknown;
  std::string reason;                         // why it was aborted or refused, as the node said
  std::map<std::string, std::string> writes;  // key -> value written (committed only)
  uint64_t start_us = 0;                      // wall clock, Unix microseconds: sent (or due)
  uint64_t ack_us = 0;                        // answered (0: never)
  uint64_t commit_time_us = 0;                // the near node's wall clock when it learned the commit (0: none)

  // "in-doubt": the near node lost a participant before it learned the
  // outcome (a 1PC transaction whose primary crashed: its decider may have
  // committed it, and the primary's recovery commits it then). Such a
  // transaction may be committed or not, like an unanswered one, but the
  // history names it. (An abort for "participant-lost" is a decided abort.)
  bool InDoubt() const { return outcome == HistoryOutcome::kInDoubt; }
  bool AcknowledgedCommitted() const { return outcome == HistoryOutcome::kCommitted; }
};

struct History {
  std::string origin;  // the file, for messages
  std::vector<HistoryTx> txs;
};

// Parses the text of a history file. Errors are kInvalidArgument, one line
// naming the file and the line: "h.jsonl:12: field 'start_us': ...". Blank
// lines are skipped; a transaction id named twice is refused.
walfmt::Result<History> ParseHistory(std::string_view text, std::string_view origin);
// Reads and parses FILE (kNotFound / kIo when it cannot be read).
walfmt::Result<History> LoadHistory(const std::string& path);

// ---- What the check reads from the WAL.

// One transaction as one node's WAL has it.
struct NodeTx {
  walfmt::Lsn first;  // its first record here
  bool committed = false;
  walfmt::Lsn commit;           // the TX_COMMIT
  uint64_t commit_time_us = 0;  // its cluster time
  bool rolled_back = false;
  std::vector<uint32_t> participants;  // as its records name them
};
using NodeTxs = std::unordered_map<walfmt::TxId, NodeTx, walfmt::TxIdHash>;

// Cut K on one node: its CUT_START and CUT_FINISH and the tracked sets.
struct CutNodeFacts {
  walfmt::Lsn start;
  uint64_t start_time_us = 0;
  walfmt::Lsn finish;
  uint64_t finish_time_us = 0;
  std::set<walfmt::TxId> before;
  std::set<walfmt::TxId> after;
};

struct CutFacts {
  uint64_t cut = 0;
  bool consistent = false;
  std::string status;               // the WAL's verdict: consistent, inconsistent, incomplete, unavailable
  std::string reason;               // why not consistent
  std::vector<CutNodeFacts> nodes;  // by node id; only for a consistent cut
};

using RestoreStatesFn = std::function<walfmt::Result<std::vector<NodeState>>(uint64_t cut)>;

struct HistoryCheckInput {
  walfmt::ClusterInfo info;  // topology, workload, initial data, epoch_unix_us (required)
  History history;
  std::vector<NodeTxs> wal;  // by node id
  // The writes (TX_DATA, every participant's share) of the committed
  // transactions whose writes the history does not hold: those it does not
  // name, and those in doubt.
  std::map<walfmt::TxId, std::map<std::string, walfmt::Write>> wal_writes;
  std::vector<CutFacts> cuts;  // by cut id
  RestoreStatesFn restore;     // the restored state of a consistent cut, by node id
};

struct HistoryCheckOptions {
  uint64_t clock_slack_us = 1000;
  size_t max_findings = kMaxHistoryFindings;
};

// ---- The result.

// The rule a finding breaks (the numbers above). Names, stable in JSON:
// "acknowledged-in-cut", "started-after-cut", "all-or-nothing", "outcome",
// "state", "invariant".
enum class HistoryRule : uint8_t {
  kAcknowledged = 1,
  kStartedAfter = 2,
  kAllOrNothing = 3,
  kOutcome = 4,    // rule 3 over the whole history: committed in history <=> committed in the WAL
  kState = 5,      // rule 4
  kInvariant = 6,  // rule 5
};
const char* HistoryRuleName(HistoryRule r);
int HistoryRuleNumber(HistoryRule r);  // 1..5 as above

struct HistoryFinding {
  HistoryRule rule = HistoryRule::kState;
  uint64_t cut = 0;  // 0: about the whole history
  std::optional<uint32_t> node;
  std::optional<walfmt::TxId> tx;
  std::optional<size_t> line;  // the history line
  std::string key;
  std::string expected;
  std::string found;
  std::string message;  // one line
};

struct CutHistoryResult {
  uint64_t cut = 0;
  bool checked = false;  // consistent, so checked
  std::string status;    // the WAL's verdict
  std::string reason;
  uint64_t start_unix_us = 0;          // earliest CUT_START, wall clock
  uint64_t finish_unix_us = 0;         // latest CUT_FINISH
  uint64_t history_in_cut = 0;         // transactions the history saw committed that are in the cut
  uint64_t unacknowledged_in_cut = 0;  // in it without a client having seen it commit (not named, in doubt)
  uint64_t acknowledged_before = 0;    // held to rule 1
  uint64_t started_after = 0;          // held to rule 2
  uint64_t keys = 0;                   // keys of the expected state
  std::vector<HistoryFinding> findings;
  uint64_t total_findings = 0;
  bool pass() const { return total_findings == 0; }
};

struct HistoryReport {
  uint64_t committed = 0;  // history outcomes
  uint64_t aborted = 0;    // not in doubt
  uint64_t in_doubt = 0;   // in doubt: the near node lost a 1PC primary
  uint64_t refused = 0;
  uint64_t unknown = 0;
  uint64_t wal_committed = 0;  // transactions committed on some node
  uint64_t unnamed = 0;        // of those, not named by the history
  std::vector<HistoryFinding> outcome_findings;
  uint64_t total_outcome_findings = 0;
  std::vector<CutHistoryResult> cuts;
  uint64_t cuts_checked = 0;
  uint64_t cuts_failed = 0;
  bool ok() const { return total_outcome_findings == 0 && cuts_failed == 0; }
};

// The check on prepared inputs (a real cluster's, or a test's). Fails only
// when a restore fails for a reason that is not a finding about the cut
// (kIo); a restore refused or damaged is a rule 4 finding.
walfmt::Result<HistoryReport> CheckHistory(const HistoryCheckInput& in, const HistoryCheckOptions& opt);

// The whole check on a cluster directory: cluster.json (with an epoch), every
// node's whole WAL (a WAL whose oldest segments were removed is refused,
// kInvalidArgument), the cuts, the restores. Errors: kInvalidArgument and
// kNotFound (usage), kCorruption (a damaged WAL), kIo.
walfmt::Result<HistoryReport> CheckClusterHistory(const std::string& cluster_dir, History history,
                                                  const HistoryCheckOptions& opt);

}  // namespace walcut::recovery
