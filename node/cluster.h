// The node runtime: a simulated cluster that runs two-phase-commit
// transactions and takes consistent cuts (docs/cut-rule.md section 1) while writing
// real WAL files through walfmt.
//
// Everything runs in one process as a deterministic discrete-event simulation:
// a virtual clock in microseconds, one seeded RNG (node/rng.h), an event queue
// ordered by (time, sequence number), a non-FIFO network that delays every
// message at random, and nodes as objects. The same options give the same
// events and therefore byte-identical WAL files.
//
// The simulator also keeps the true history in memory (History): every
// committed transaction with its participants, marker and writes. Tests use it
// as an oracle that does not depend on the WAL.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "node/workload.h"
#include "walfmt/lsn.h"
#include "walfmt/record.h"
#include "walfmt/status.h"

namespace walcut::node {

struct CrashSpec {
  uint32_t node = 0;
  uint64_t at_us = 0;             // virtual time of the crash
  uint64_t restart_delay_us = 0;  // 0: ClusterOptions::restart_delay_us
};
// "NODE@TIME[+DELAY]", TIME cluster time since creation and DELAY as
// walfmt::ParseDuration reads them (walfmt/duration.h: a number with a unit
// us, ms, s, m or h, decimals allowed; a bare number is refused).
bool ParseCrashSpec(std::string_view text, CrashSpec& out);

// What a node does with its WAL segments after a full snapshot.
enum class WalRetention : uint8_t {
  kKeep,           // keep every segment (the default)
  kAfterSnapshot,  // delete the segments wholly before the SNAPSHOT record's (or last cut record's)
};
std::string_view WalRetentionName(WalRetention r);  // "keep", "after-snapshot"
bool ParseWalRetention(std::string_view text, WalRetention& out);

struct ClusterOptions {
  std::string dir;  // must not exist or be empty
  uint32_t nodes = 3;
  uint32_t backups = 1;       // < nodes
  uint32_t partitions = 0;    // 0: 4 per node
  WorkloadParams workload;    // accounts/ring 0: defaults for the workload
  uint64_t txs = 1000;        // workload transactions (the initial load comes on top)
  uint32_t concurrency = 32;  // transactions in flight
  uint64_t cuts = 5;          // cuts to take (upper bound)
  uint64_t cut_every = 0;     // committed transactions between cuts; 0: txs / (cuts + 1)
  uint64_t seed = 1;
  uint64_t segment_bytes = 1u << 20;
  uint32_t vote_no_per_million = 5000;  // a primary refuses a 2PC prepare this often (0.5 %)
  // Network delay of every message, and the delay between the steps a node
  // takes locally (commit: read cut id, write record; cut: set id, write
  // CUT_START). Local steps being small but non-zero is what interleaves them.
  uint64_t net_delay_min_us = 20;
  uint64_t net_delay_max_us = 400;
  uint64_t step_delay_max_us = 40;
  uint32_t slow_message_per_million = 50000;  // 5 % of messages take up to 10x net_delay_max_us
  bool keep_history = true;                   // keep the committed writes in History (tests)
  // Full snapshot: when this many workload transactions have started, stop
  // starting new ones, wait until nothing is in flight, and have every node
  // write DIR/snapshots/<name>/node-<i>.snap and a SNAPSHOT record. 0: none.
  uint64_t full_snapshot_at_tx = 0;
  // Periodic full snapshots: one after every this many workload transactions
  // started (N, 2N, ... up to txs), named full-<at_tx> like the one above,
  // with which it combines. 0: none.
  uint64_t full_snapshot_every_tx = 0;
  // kAfterSnapshot: after each full snapshot, every node deletes (unlink,
  // then fsync of the WAL directory) its segments that lie wholly before the
  // segment holding its SNAPSHOT record, or the one holding its last cut
  // record when that comes first; a restarted node then recovers from
  // its latest snapshot file plus the WAL after that record.
  WalRetention wal_retention = WalRetention::kKeep;
  // The wall-clock time of cluster time 0 (microseconds since the Unix
  // epoch), recorded in cluster.json so that every record time maps to a
  // real time. Absent: the real clock when the run starts.
  std::optional<uint64_t> epoch_unix_us;

  // Faults. Any node may crash, the cut initiator included (the oldest live
  // node takes over); a crash that would leave no ready node waits until
  // another node is back.
  std::vector<CrashSpec> crashes;       // explicit crash schedule
  uint32_t random_crashes = 0;          // crashes drawn from the seed, spread over the workload
  uint64_t restart_delay_us = 5000;     // default time a crashed node stays down
  uint64_t detect_delay_max_us = 1000;  // failure detection: other nodes learn of a crash within this
  uint64_t recovery_retry_us = 3000;    // the recovery protocol asks again after this
};

// One committed transaction as the simulator saw it decided.
struct CommittedTx {
  walfmt::TxId id;
  uint64_t marker = 0;
  bool one_phase = false;
  bool load = false;                   // part of the initial data
  std::vector<uint32_t> participants;  // sorted node ids
  std::vector<walfmt::Write> writes;   // all writes (empty without keep_history)
  uint64_t decided_us = 0;
  bool recovered = false;  // first committed by the recovery protocol
};

struct History {
  std::vector<CommittedTx> committed;     // in decision order
  std::vector<walfmt::TxId> rolled_back;  // every transaction that ended without committing
};

struct RunSummary {
  uint64_t load_txs = 0;
  uint64_t committed = 0;  // workload transactions (load excluded)
  uint64_t committed_1pc = 0;
  uint64_t committed_2pc = 0;
  uint64_t rolled_back = 0;
  uint64_t rolled_back_conflict = 0;
  uint64_t rolled_back_funds = 0;
  uint64_t rolled_back_vote_no = 0;
  uint64_t rolled_back_other = 0;
  uint64_t cuts_started = 0;
  uint64_t cuts_consistent = 0;
  uint64_t cuts_inconsistent = 0;
  uint64_t before = 0;  // sum over nodes and cuts of |before|
  uint64_t after = 0;
  uint64_t after_commit_before_start = 0;  // rule 5: `after` tx whose TX_COMMIT precedes CUT_START
  uint64_t before_commit_after_start = 0;  // rule 5: `before` tx whose TX_COMMIT follows CUT_START
  uint64_t crashes = 0;
  uint64_t restarts = 0;
  uint64_t lost_at_near = 0;       // transactions whose near node crashed (outcome settled by recovery)
  uint64_t recovered_commits = 0;  // TX_COMMIT records written by the recovery protocol
  uint64_t recovered_rollbacks = 0;
  uint64_t cut_aborts = 0;           // CUT_ABORT records
  uint64_t initiator_failovers = 0;  // times the oldest live node took over from a crashed initiator
  uint64_t cuts_taken_over = 0;      // ... with a cut running, which the new initiator ended
  uint64_t snapshots = 0;            // full snapshots taken
  uint64_t segments_deleted = 0;     // WAL segments deleted by the retention policy, all nodes
  uint64_t segment_bytes_deleted = 0;
  uint64_t snapshot_recoveries = 0;  // restarts that recovered from a snapshot file plus the WAL after it
  uint64_t stuck_recoveries = 0;     // recoveries started by the timeout rather than a failure notice
  uint64_t messages = 0;
  uint64_t events = 0;
  uint64_t records = 0;
  uint64_t wal_bytes = 0;
  uint64_t sim_time_us = 0;
  double wall_seconds = 0;
  double cpu_seconds = 0;  // process CPU time of the run (a fairer speed measure on a busy machine)
  int64_t initial_bank_total = 0;
};

struct SnapshotTaken {
  std::string name;    // snapshots/<name>/node-<i>.snap
  uint64_t at_tx = 0;  // workload transactions started before it
  uint64_t time_us = 0;
  std::vector<walfmt::Lsn> wal_position;   // by node: the SNAPSHOT record
  std::vector<uint64_t> fingerprint;       // by node
  std::vector<uint64_t> segments_deleted;  // by node, right after it (retention; empty with kKeep)
};

struct RunResult {
  RunSummary summary;
  History history;
  std::vector<SnapshotTaken> snapshots;
  std::vector<uint64_t> first_segment;  // by node: the index of its first WAL segment still present after the run
  ClusterOptions options;               // with defaults filled in
};

// Fills defaults and checks the options. Errors are kInvalidArgument.
walfmt::Status NormalizeOptions(ClusterOptions& opt);

// Creates opt.dir, runs the cluster to completion and writes
// DIR/node-<i>/wal/ and DIR/cluster.json.
walfmt::Result<RunResult> RunCluster(ClusterOptions opt);

}  // namespace walcut::node
