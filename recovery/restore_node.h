// One node's WAL pass of a restore (recovery/restore.h): shared by the
// single-host restore, which runs it for every node, and the per-node restore
// of recovery/part.h, which runs it for the one node whose WAL is on this
// host. Internal to recovery/.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cut/scan.h"
#include "cut/summary.h"
#include "recovery/restore.h"
#include "walfmt/lsn.h"
#include "walfmt/record.h"
#include "walfmt/snapshot.h"
#include "walfmt/status.h"

namespace walcut::recovery {
class StateTable;
}

namespace walcut::recovery::detail {

// Membership of one cut on one node, as docs/cut-rule.md section 2 states it. The
// sets are small (the transactions in flight when the cut started) and asked
// once per commit: sorted vectors, each with a 64-bit summary (the bit
// Bit(t) of every member set; RuleOf fills them in) that tells most
// transactions, members of neither, apart without a search.
struct CutRule {
  walfmt::Lsn start;
  std::vector<walfmt::TxId> before;
  std::vector<walfmt::TxId> after;
  uint64_t before_bits = 0;
  uint64_t after_bits = 0;
  static uint64_t Bit(const walfmt::TxId& t) { return uint64_t{1} << ((t.seq * 0x9E3779B97F4A7C15ull + t.node) >> 58); }
  bool In(const walfmt::TxId& t, walfmt::Lsn p) const {
    const uint64_t bit = Bit(t);
    if (p < start) return (after_bits & bit) == 0 || !std::binary_search(after.begin(), after.end(), t);
    return p > start && (before_bits & bit) != 0 && std::binary_search(before.begin(), before.end(), t);
  }
};

CutRule RuleOf(const cut::NodeCut& nc);
// The rule of a cut that starts at `start` with these sets (in any order).
CutRule MakeRule(walfmt::Lsn start, std::vector<walfmt::TxId> before, std::vector<walfmt::TxId> after);

// The verdict of a scan up to a cut (recovery/base.cpp): the summaries
// reconstructed, read whole when no node's scan stopped early (the
// disagreements then named, as `walcut cuts` names them), else "to-cut".
// nullopt when they cannot be reconstructed or named.
std::optional<CutVerdict> VerdictOfScan(std::vector<cut::NodeSummary> sums, const cut::ClusterLayout& layout,
                                        const cut::ReconstructOptions& ro);

// A record the pass must meet at a given position (the per-node restore
// checks that the summaries it was given describe this WAL): its type and
// what it names.
struct ExpectedRecord {
  walfmt::Lsn at;
  walfmt::RecordType type = walfmt::RecordType::kCutStart;
  bool data_or_prepare = false;      // kTxData or kTxPrepare (a transaction's first record)
  uint64_t cut = 0;                  // CUT_START / CUT_FINISH
  walfmt::TxId tx;                   // TX_COMMIT / TX_ROLLBACK / first record
  uint64_t marker = 0;               // TX_COMMIT
  std::string snapshot;              // SNAPSHOT: name
  uint64_t fingerprint = 0;          //   and fingerprint
  std::vector<walfmt::TxId> before;  // CUT_FINISH: the sets, sorted
  std::vector<walfmt::TxId> after;
  std::string what;  // for messages: "CUT_FINISH(3)", "TX_COMMIT of 1:42"
};

struct NodeJob {
  uint32_t node = 0;
  std::string wal_dir;
  CutRule k;
  std::optional<CutRule> j;       // restored base: cut J
  std::string base_file;          // the base's node-<i>.snap ("" : genesis), read by the job itself
  uint64_t base_fingerprint = 0;  // as the caller checked it
  NodeRestore out;
  std::string stage_file;       // write the restored state here ("" : do not)
  walfmt::SnapshotFile header;  // its header fields
  bool keep_state = false;
  bool write_thread = true;  // the node file checksummed and written on a helper thread
  KeyFilter filter;          // partial restore: the keys kept (inactive: every key)
  // Export (recovery/export.h): called, in commit order, for every
  // transaction the pass applies, at its TX_COMMIT's position, with its
  // writes on this node (those the filter keeps) in WAL order. With it set
  // the state is not built: the observer keeps what it needs, and the
  // node's state stays empty. Unset, the pass pays one test per applied
  // commit.
  std::function<void(const walfmt::TxId& tx, walfmt::Lsn commit, std::span<const walfmt::WriteView> writes)> on_apply;
  // Per-node restore: the records the summaries place in the range, sorted
  // by position; a record that is not there (or not at a record boundary)
  // fails the pass with kInvalidArgument naming it. `origin` names where the
  // expectations came from ("the verdict", "the summaries").
  std::vector<ExpectedRecord> expect;
  std::string origin;
  // Per-node restore: every segment read must carry this node id and cluster.
  bool check_identity = false;
  bool expect_cluster = false;
  uint64_t cluster_id = 0;
};

// Reads the job's WAL range once, applies the transactions of the cut (and
// not of the base cut J), and writes / keeps the state as the job says.
// With `reuse`, the state is built in that table (cleared first) and its
// memory is kept for the caller's next job: a worker restoring one node after
// another faults in fresh pages only where a state outgrows the largest
// before it.
walfmt::Status RunNode(NodeJob& job, bool dry_run, const std::function<void(uint64_t)>& progress,
                       StateTable* reuse = nullptr);

// One node's restore of cut `cut` from genesis in the same read as its
// verdict scan (recovery/restore_one_pass.cpp): passed to cut::ScanOptions
// as the scan's tap, it applies the WAL as the scan reads it, deciding each
// commit before cut K's sets are read and checking the decisions once they
// are (recovery/node_restore.cpp says how). The job gives the node, the
// filter and where the file goes; the rule, positions and counts are learnt.
class OnePassNode final : public cut::RecordTap {
 public:
  OnePassNode(NodeJob& job, uint64_t cut, const std::function<void(uint64_t)>& progress, StateTable* reuse);
  ~OnePassNode();
  OnePassNode(const OnePassNode&) = delete;
  OnePassNode& operator=(const OnePassNode&) = delete;
  void Record(const walfmt::RecordView& v) override;
  // After the scan: "" when the pass read through CUT_FINISH(K) and every
  // decision held (job.out then has the counts, cut_start and to), else why
  // the result is not usable.
  std::string Finish();
  // Writes the node file (job.stage_file, its header's position and time
  // from CUT_START(K)) and keeps the state as the job says.
  walfmt::Status Write();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The cut can be restored as asked (recovery/restore.cpp): it exists and is
// consistent (or forced), every node started it (and finished it, unless
// forced), OUT is new.
walfmt::Status CheckRequest(const cut::GlobalCut* g, const cut::ClusterCuts& cc, const cut::ClusterLayout& layout,
                            const RestoreRequest& req);
// With an output directory, each node's file is written as soon as the node
// is restored (into a staging directory next to OUT, r.stage_dir, renamed
// into place by WriteRestore), so that only the nodes being restored are in
// memory. OUT is locked first (walfmt/staging.h): a second restore into the
// same OUT fails here, before it reads anything, and leaves nothing behind.
walfmt::Status StageOutput(const RestoreRequest& req, RestoreResult& r);
// A partial restore's subset (r.subset) checked against the cluster: its
// partitions come from cluster.json (r.cluster_json; none without one).
walfmt::Status ResolveRequestSubset(const cut::ClusterLayout& layout, RestoreResult& r);
// The layout's cluster.json into r.cluster_json (when it has one), then
// ResolveRequestSubset.
walfmt::Status ReadClusterJsonAndSubset(const cut::ClusterLayout& layout, RestoreResult& r);

// A node's entry in a restore's manifest.json ("nodes"): the same in a
// single-host restore, a per-node part and an assembled restore.
nlohmann::json NodeEntryJson(const NodeRestore& nr);

// A base snapshot file, checked by ResolveBase.
struct BaseFile {
  std::string path;  // "" : genesis
  uint64_t fingerprint = 0;
  uint64_t entries = 0;
};

// The base `req.base` names, checked against the WAL (recovery/base.cpp):
// every node's base file and, for a restored base, cut J's rule by node.
// A restored base of a subset serves only a restore of that same `subset`
// (kInvalidArgument otherwise).
walfmt::Result<BaseInfo> ResolveBase(const cut::ClusterCuts& cc, const cut::ClusterLayout& layout,
                                     const RestoreRequest& req, const KeySubset& subset, std::vector<BaseFile>& files,
                                     std::vector<std::optional<CutRule>>& base_rules);

// The fields a restore manifest is known by, each of the right type
// (recovery/restore_manifest.cpp).
bool IsRestoreManifest(const nlohmann::json& m);

// A restore manifest's "subset" (recovery/key_subset.cpp): its JSON, and
// the subset read back from manifest `m` (whole without "subset";
// kCorruption, naming `origin`, when it is malformed).
nlohmann::json SubsetJson(const KeySubset& s);
walfmt::Result<KeySubset> SubsetFromJson(const nlohmann::json& m, const std::string& origin);

}  // namespace walcut::recovery::detail
