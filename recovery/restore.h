// Restoring every node of a cluster to cut K (docs/cut-rule.md section 2):
//   state_i(K) = base state of node i + the writes of exactly the transactions
//   T committed on node i with P_B < p(T) and T in cut K, applied in WAL order,
// where T is in cut K iff p(T) < CUT_START_i(K) and T not in after_i(K), or
// p(T) > CUT_START_i(K) and T in before_i(K).
//
// Bases: genesis (the empty cluster at creation), a full snapshot taken by the
// runtime (DIR/snapshots/<name>/, positions P_B = its SNAPSHOT records), or
// an earlier restore of cut J < K (a directory with manifest.json): then the
// transactions applied are those in cut K and not in cut J, read from the
// first position where a transaction outside cut J can start (min of
// CUT_START_i(J) and the first record of every tracked transaction of J).
//
// One read of each node's WAL range [base, CUT_FINISH_i(K)]; memory holds the
// state and the data of the transactions in flight, never the WAL.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cut/cuts.h"
#include "cut/load.h"
#include "recovery/key_subset.h"
#include "walfmt/lsn.h"
#include "walfmt/staging.h"
#include "walfmt/status.h"

namespace walcut::recovery {

// The "schema" of a restore's OUT/manifest.json. Older walcut wrote
// "format": "walcut-restore", "version": 1 instead; both are read.
inline constexpr const char* kRestoreManifestSchema = "walcut.restore-manifest/2";
inline constexpr const char* kRestoreManifestFormatV1 = "walcut-restore";

enum class BaseKind : uint8_t { kGenesis = 1, kFull = 2, kRestored = 3 };
const char* BaseKindName(BaseKind k);

struct BaseInfo {
  BaseKind kind = BaseKind::kGenesis;
  std::string name;                   // "genesis", the snapshot name, or "cut-J"
  std::string dir;                    // where its node-<i>.snap files are ("" for genesis)
  uint64_t cut = 0;                   // kRestored: J
  std::vector<walfmt::Lsn> position;  // by node: where the WAL is read from
};

struct RestoreRequest {
  std::string cluster_dir;
  uint64_t cut = 0;
  std::string base;          // "" or "genesis": genesis; a name under DIR/snapshots/; or a restore output directory
  bool force = false;        // restore a cut that is not consistent
  bool dry_run = false;      // read and count, keep nothing, write nothing
  std::string out;           // output directory (must not exist); unused with dry_run. The node files are
                             // staged next to it as nodes finish; WriteRestore completes them
  bool keep_states = false;  // also keep every node's state in NodeRestore::state (tests); implied without out
  unsigned jobs = 0;         // nodes restored at once; 0: one per core
  unsigned io_threads = 1;   // 1: each node file is checksummed and written on a helper thread; 0: by the worker
  // Partial restore: only these keys (recovery/key_subset.h); whole when
  // empty. Restore checks it against the cluster's cluster.json
  // (ResolveSubset). Writes outside it are skipped as their TX_DATA is
  // decoded, base entries outside it as the base is read.
  KeySubset subset;
  // Called about once per MiB and when a node is done with the WAL bytes read
  // so far over all nodes: after a successful restore the last call says
  // RestoreResult::bytes_read. Called from the worker threads, one at a time.
  std::function<void(uint64_t bytes)> progress;
};

struct NodeRestore {
  uint32_t node = 0;
  walfmt::Lsn from;  // first position read
  walfmt::Lsn to;    // CUT_FINISH_i(K): reading stops there
  walfmt::Lsn cut_start;
  uint64_t cut_start_time_us = 0;          // the CUT_START's cluster time: the restored file's header time
  walfmt::Lsn continue_from;               // where a restore based on this one reads from
  std::vector<cut::SegmentInfo> segments;  // the segments the range touches
  uint64_t bytes_to_read = 0;              // WAL bytes in the range (decompressed)
  uint64_t base_entries = 0;
  uint64_t txs_applied = 0;
  uint64_t txs_skipped = 0;  // committed in the range but not in the increment
  uint64_t txs_rolled_back = 0;
  uint64_t writes_applied = 0;   // with a subset: its writes only
  double apply_cpu_seconds = 0;  // CPU time of the WAL pass (reading, decoding, applying)
  uint64_t entries = 0;          // keys of the restored state
  uint64_t fingerprint = 0;
  std::map<std::string, std::string> state;  // only with RestoreRequest::keep_states (or without out)
};

struct RestoreResult {
  uint64_t cut = 0;
  cut::CutStatus status = cut::CutStatus::kConsistent;
  std::string reason;  // why the cut is not consistent (with force)
  BaseInfo base;
  KeySubset subset;  // as checked (partition_count filled in); whole when the restore is
  std::vector<NodeRestore> nodes;
  uint64_t bytes_read = 0;
  std::string cluster_json;  // cluster.json, copied into the manifest
  std::string stage_dir;     // node files written so far (with RestoreRequest::out), until WriteRestore
  // The lock on OUT (walfmt/staging.h), held from the staging directory's
  // creation until the result is dropped: a second writer of OUT fails at once.
  std::shared_ptr<walfmt::OutputLock> out_lock;
};

// Checks the request against the cluster (the cut exists and is consistent,
// or `force`; the base precedes it) and restores. With dry_run nothing is
// kept or written. Errors: kNotFound (no such cut, base or directory),
// kInvalidArgument (refused: inconsistent cut without force, base not before
// the cut, OUT exists), kCorruption (a base file or the WAL range is damaged),
// kIo.
walfmt::Result<RestoreResult> Restore(const cut::ClusterCuts& cuts, const cut::ClusterLayout& layout,
                                      const RestoreRequest& req);

// The base a restore of cut `k` uses when none is given: the newest full
// snapshot of the cluster (DIR/snapshots/<name>/ with its files present)
// whose SNAPSHOT record every node's WAL still holds before CUT_START(k),
// because it leaves the least WAL to read; else genesis when every node's
// WAL still starts at genesis. `why` says which and why, in one line.
// kInvalidArgument when no base can serve cut k from this WAL.
// The cut a restore output directory holds (its manifest.json says), or
// nullopt when `dir` is not a restore output. A restore from it passes this
// to cut::Reconstruct as the attested cut: it was checked when it was made.
std::optional<uint64_t> RestoredBaseCut(const std::string& dir);

// What a restore output directory says of its cut (manifest.json): the
// cut, and by node where its cut started and where a restore based on it
// continues from. nullopt when `dir` is not the output of a restore that was
// not forced, or its manifest lacks a position of a node 0..N-1.
struct RestoredBase {
  uint64_t cut = 0;
  std::vector<walfmt::Lsn> cut_start;
  std::vector<walfmt::Lsn> continue_from;
};
std::optional<RestoredBase> ReadRestoredBase(const std::string& dir);

// How much of the WAL the verdict on a cut was decided from.
enum class VerdictScan : uint8_t {
  kWhole = 1,     // every node's whole WAL (walcut cuts reads the same)
  kToCut = 2,     // every node's WAL from its start to where cut K is decided there
  kFromBase = 3,  // from the positions of a restored base cut J to where cut K is decided
};
const char* VerdictScanName(VerdictScan s);  // "whole", "to-cut", "from-base"

struct CutVerdict {
  cut::ClusterCuts cuts;
  VerdictScan scan = VerdictScan::kWhole;
  uint64_t bytes_scanned = 0;  // WAL bytes the scan read, over every node
};

// The verdict on cut `k` for a restore from `base` (RestoreRequest::base),
// read from less than the whole WAL (cut::ScanOptions::settle_cut): with a
// restored base of cut J < k whose manifest positions this WAL confirms
// (J's CUT_START and continue-from positions, its evidence complete), from
// those positions, with J attested (cut K is then checked against J); else
// from every WAL's start. Every node's scan stops once cut k is decided
// there; when no node's scan stopped before the end of its WAL, that was
// the whole WAL's scan, returned as such (VerdictScan::kWhole, whatever it
// says of cut k, the disagreements named as cut::ReadCuts names them).
// nullopt when a shorter scan does not show cut k consistent (or cannot be
// read): the caller decides from the whole WAL, as `walcut cuts` does, so
// that a refusal, a forced restore or an error reads and says exactly what
// the whole WAL does. What it returns equals the whole WAL's verdict on a
// consistent cut K, except when a record after the point where the scan
// stopped names cut K again (a repeated CUT_START or CUT_FINISH, a late
// CUT_ABORT) or a SNAPSHOT record repeating an earlier one's name, which the
// runtime never writes.
std::optional<CutVerdict> ScanToCut(const cut::ClusterLayout& layout, uint64_t k, const std::string& base,
                                    const cut::LoadOptions& lo);

// The verdict on cut req.cut and the restore of it from genesis in one read
// of each node's WAL: each node's apply pass runs inside its verdict scan
// (as ScanToCut scans, to where cut K is decided), deciding each commit
// before cut K's sets are read and checking the decisions once they are.
// Returns what ScanToCut and then Restore would (the verdict, the base's
// reason when the base was chosen, the result with its node files staged),
// or nullopt, with `why_not` saying why, when the request is not one it
// serves (a dry run, a base other than genesis, a cluster with full
// snapshot files) or its result is not certain to be theirs (cut K not
// consistent, the base chosen is not genesis, a decision the sets
// contradict, anything the two-pass restore would fail on): nothing of the
// attempt is then left behind, and the caller restores the two-pass way,
// which reports what is wrong exactly as before. With req.cut 0 it restores
// the latest restorable cut (`restore --latest`): every WAL is read to its
// end, as for the whole WAL's verdict, and the cut applied is the highest
// one finished in the last segments of every node, used only when that
// verdict names it the latest restorable cut.
struct OnePassRestore {
  CutVerdict verdict;
  RestoreResult result;
  std::string base_why;  // with req.base empty: why genesis was chosen (ChooseBase)
};
std::optional<OnePassRestore> RestoreOnePass(const cut::ClusterLayout& layout, const RestoreRequest& req,
                                             const cut::LoadOptions& lo, std::string* why_not = nullptr);

struct BaseChoice {
  std::string base;  // "genesis" or a snapshot name (RestoreRequest::base)
  std::string why;
};
walfmt::Result<BaseChoice> ChooseBase(const cut::ClusterCuts& cc, const cut::ClusterLayout& layout, uint64_t k);
// The same choice from the summaries alone (the hosts hold the snapshot
// files): `files_missing(name)` says what of snapshot NAME's files is
// missing ("" when they are there; a null function assumes they are).
walfmt::Result<BaseChoice> ChooseBaseFromSummaries(const cut::ClusterCuts& cc, uint64_t k,
                                                   const std::function<std::string(const std::string&)>& files_missing);

// Writes OUT/node-<i>.snap and OUT/manifest.json into a temporary directory
// next to OUT and renames it into place; refuses an existing OUT. `extra` is
// merged into the manifest (for example the results of workload checks).
// The node states are moved into the files: afterwards r.nodes[i].state is
// empty (memory stays at one copy of the state).
walfmt::Status WriteRestore(RestoreResult& r, const std::string& out, const std::string& extra_json = "");

}  // namespace walcut::recovery
