// The per-node summary of a WAL: everything the global reconstruction of cuts
// needs from one node, gathered in one streaming pass (cut/scan.h) and small
// enough to travel (`walcut scan --out`, cut/summary_io.h). Its size grows
// with the number of cuts and findings, not with the WAL.
//
// Positions are WAL positions (LSNs). "First cut" f(T) of a committed
// transaction T on a node is the smallest cut id k such that T belongs to cut
// k there by docs/cut-rule.md section 2 (with the genesis base):
//   p(T) < CUT_START(k) and T not in after(k), or p(T) > CUT_START(k) and T in before(k).
// Cuts are monotone, so T is in every cut >= f(T); the summary keeps counts
// and digests bucketed by f(T) and a cut's membership is a prefix sum.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "walfmt/lsn.h"
#include "walfmt/record.h"

namespace walcut::cut {

using walfmt::Lsn;
using walfmt::TxId;

// Summary format version (written by `walcut scan --out`).
inline constexpr int kSummaryVersion = 1;

// What a finding is about: the WAL itself, or one of the checks of a cut.
// The names (CheckName) are what reports and summary files carry.
enum class Check : uint8_t {
  kWal = 1,           // "wal": the WAL itself is damaged or unreadable
  kShape = 2,         // "shape": check 3
  kMarker = 3,        // "marker": the marker cross-check
  kRollback = 4,      // "rollback": check 4
  kAtomicity = 5,     // "atomicity": check 1
  kMonotonicity = 6,  // "monotonicity": check 2
  kCompleteness = 7,  // "completeness": check 5
};
const char* CheckName(Check c);
// nullopt for a name that is not one of CheckName's.
std::optional<Check> ParseCheck(std::string_view name);

// One finding with its minimal evidence.
struct Finding {
  Check check = Check::kWal;
  uint32_t node = 0;
  uint64_t cut = 0;  // 0: not about one cut
  bool has_position = false;
  Lsn position;
  bool has_tx = false;
  TxId tx;
  std::string expected;
  std::string found;
  std::string message;  // one line, names node, cut, record or transaction
};

// A tracked transaction (a member of before(k) or after(k)) as resolved on
// this node.
struct TrackedTx {
  TxId tx;
  bool committed = false;  // its TX_COMMIT was found on this node
  Lsn commit;              // where
  uint64_t marker = 0;
  bool recovered = false;    // finished by the recovery protocol
  bool rolled_back = false;  // a TX_ROLLBACK here instead
  uint64_t time_us = 0;      // cluster clock of that TX_COMMIT / TX_ROLLBACK
  Lsn first_seen;            // its first TX_DATA / TX_PREPARE here (where a restore must start reading it)
};

// How a cut ended on this node.
enum class CutEnd : uint8_t {
  kFinished = 1,    // CUT_FINISH written
  kAborted = 2,     // CUT_ABORT written (with or without CUT_FINISH)
  kOpen = 3,        // the WAL ends (cleanly or torn) before CUT_FINISH
  kSuperseded = 4,  // a later CUT_START came before any CUT_FINISH
  kDamaged = 5,     // the readable WAL stops at damage before CUT_FINISH
  kNotStarted = 6,  // CUT_FINISH or CUT_ABORT without CUT_START
};
const char* CutEndName(CutEnd e);

struct CutAbortMark {
  Lsn at;
  uint64_t time_us = 0;
  walfmt::CutAbortReason reason = walfmt::CutAbortReason::kOther;
  std::string detail;
};

// Where a tracked transaction's first record would be when it lies before
// the first segment still present (a WAL whose oldest segments were
// removed): a restore that needs it cannot be served by this WAL.
inline constexpr Lsn kFirstSeenPruned{};

// One cut as one node saw it.
struct NodeCut {
  uint64_t cut_id = 0;
  bool started = false;
  Lsn start;
  uint64_t start_time_us = 0;
  uint64_t commits_before_start = 0;  // TX_COMMIT records before CUT_START (LocalState)
  bool finished = false;
  Lsn finish;
  uint64_t finish_time_us = 0;
  uint64_t commits_before_finish = 0;  // TX_COMMIT records before CUT_FINISH
  std::vector<TrackedTx> before;
  std::vector<TrackedTx> after;
  std::vector<CutAbortMark> aborts;
  bool restarted = false;  // a NODE_START between CUT_START and the end of the cut
  CutEnd end = CutEnd::kOpen;
  // Some of this cut's evidence on this node lay in segments that were
  // removed: its CUT_START, or the first record of a tracked transaction
  // (then that TrackedTx::first_seen is kFirstSeenPruned). Only a WAL that
  // starts after genesis (NodeSummary::pruned) has such cuts.
  bool evidence_pruned = false;

  // Where a restore based on this cut must start reading on this node: the
  // earliest of CUT_START and the first record of every finished transaction
  // whose side of the cut the before/after sets decide (it may have been
  // prepared, or even committed, before CUT_START). Nothing outside the cut
  // was written before it.
  Lsn ContinueFrom() const {
    Lsn from = start;
    for (const auto* list : {&before, &after}) {
      for (const auto& t : *list) {
        if ((t.committed || t.rolled_back) && t.first_seen < from) from = t.first_seen;
      }
    }
    return from;
  }
};

// Order-independent digest of a set of transactions (XOR of a 64-bit hash of
// each id, and the count). Two nodes agree on the transactions they share in
// a cut when their digests for each other agree.
struct TxDigest {
  uint64_t x = 0;
  uint64_t n = 0;
  bool operator==(const TxDigest&) const = default;
};
uint64_t TxHash(const TxId& t);

// Transactions committed on this node whose first cut is f: how many, and how
// many of them have this node as their smallest participant (so that summing
// `owned` over nodes counts each transaction of the cluster once).
struct FirstCutCount {
  uint64_t count = 0;
  uint64_t owned = 0;
};

struct SnapshotMark {
  std::string name;
  Lsn at;
  uint64_t time_us = 0;
  uint64_t fingerprint = 0;
  // Everything this node's WAL (as read) committed before the SNAPSHOT
  // record: counts and, per peer, the digest of the shared transactions. A
  // full snapshot is taken quiesced, so subtracting these from a cut's
  // prefix sums leaves exactly what the cut adds to the snapshot, whatever
  // was removed from the WAL before it.
  FirstCutCount committed_before;
  std::map<uint32_t, TxDigest> shared_before;
};

struct StartMark {
  uint32_t incarnation = 0;
  Lsn at;
  uint64_t time_us = 0;
};

struct SegmentInfo {
  uint64_t index = 0;
  std::string file;  // file name (no directory)
  bool compressed = false;
  uint64_t bytes = 0;  // bytes of WAL data (decompressed size for .wal.zst)
  uint64_t records = 0;
};

struct NodeSummary {
  int version = kSummaryVersion;
  uint32_t node = 0;
  bool cluster_known = false;
  uint64_t cluster_id = 0;
  // The wall-clock time of cluster time 0 (walfmt/duration.h), from the
  // cluster's cluster.json when the scan found one that records it.
  std::optional<uint64_t> epoch_unix_us;
  std::string wal_dir;
  std::vector<SegmentInfo> segments;
  // The oldest segments were removed: the first one present has an index
  // above 0, so the WAL starts at `wal_start` (that segment, offset 0), not
  // at genesis. Evidence before it is unavailable, not missing.
  bool pruned = false;
  Lsn wal_start;
  uint64_t wal_start_time_us = 0;  // when that segment was created (its header)

  // The readable WAL: records from the start to `end` (exclusive).
  Lsn end;
  uint64_t records = 0;
  uint64_t bytes = 0;
  uint64_t commits = 0;
  uint64_t rollbacks = 0;
  uint64_t recovered_commits = 0;
  uint64_t peak_in_flight = 0;
  bool torn_tail = false;  // the WAL ends in a torn record (a crash artefact, not damage)
  Lsn torn_at;
  uint64_t torn_bytes = 0;
  bool damaged = false;  // reading stopped at damage; nothing after `damage_at` was read
  Lsn damage_at;
  std::string damage;  // one line
  // Reported while listing the WAL directory, not damage: a file named like
  // a segment but not as the writer names one, an index present both plain
  // and archived. One line each, naming the file.
  std::vector<std::string> notes;
  // The scan stopped once this cut was decided on the node
  // (ScanOptions::settle_cut), before the end of the WAL; 0: it read on to
  // the end (or to damage). Not part of the summary file.
  uint64_t settled_cut = 0;

  std::vector<NodeCut> cuts;  // by cut id
  std::vector<SnapshotMark> snapshots;
  std::vector<StartMark> starts;

  std::map<uint64_t, FirstCutCount> first_cut;              // f -> counts
  std::map<uint32_t, std::map<uint64_t, TxDigest>> shared;  // peer -> f -> digest of shared transactions

  std::vector<Finding> findings;  // local findings (shape, marker, rollback, wal)
  uint64_t findings_dropped = 0;  // beyond the cap

  // Only when ScanOptions::witness_peer is set: (transaction, f) for every
  // transaction committed here that the peer also took part in.
  std::vector<std::pair<TxId, uint64_t>> witness;
  // With witness_peer: by snapshots[] index, the transactions of `witness`
  // committed before that SNAPSHOT record (sorted).
  std::vector<std::vector<TxId>> witness_at_snapshot;

  const NodeCut* FindCut(uint64_t k) const;
};

}  // namespace walcut::cut

// Checks print by their names: fmt::format("{}", f.check) == CheckName(f.check).
template <>
struct fmt::formatter<walcut::cut::Check> : fmt::formatter<std::string_view> {
  auto format(walcut::cut::Check c, fmt::format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(walcut::cut::CheckName(c), ctx);
  }
};
