// The verdict of one cut: what the per-node restores of a cluster whose WAL
// stays on each node's own host need to know, decided once from the
// summaries of every node (`walcut scan --out`) and small enough to ship to
// every host (kilobytes: the cut's positions and tracked transactions per
// node, the base, cluster.json).
//
// A node's restore (recovery/part.h) needs from the global reconstruction
// only: whether cut K is consistent, the base every node starts from, and
// its own CUT_START(K), CUT_FINISH(K) and the before/after sets with their
// positions: docs/cut-rule.md section 2 is then local to the node. The
// verdict carries exactly that, plus what the node checks its WAL against
// (the cluster id, the positions of the records the summaries name, the
// number of transactions of the cut on the node).
//
// File format: JSON, schema "walcut.verdict/1" (README.md, "Restoring where
// the WAL lives"); `id` is a digest of everything else, so the parts of one
// restore can be told to come from the same verdict.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cut/cuts.h"
#include "cut/load.h"
#include "recovery/restore.h"
#include "walfmt/lsn.h"
#include "walfmt/status.h"

namespace walcut::recovery {

inline constexpr const char* kVerdictSchema = "walcut.verdict/1";

// One node's share of the verdict.
struct VerdictNode {
  uint32_t node = 0;
  bool pruned = false;  // its WAL starts at wal_start, not at genesis
  walfmt::Lsn wal_start;
  bool started = false;  // CUT_START(K) on this node
  walfmt::Lsn start;
  uint64_t start_time_us = 0;  // the CUT_START's cluster time (0 in a verdict written without it)
  bool finished = false;       // CUT_FINISH(K) on this node
  walfmt::Lsn finish;
  std::vector<cut::TrackedTx> before;  // K's sets on this node, with their positions
  std::vector<cut::TrackedTx> after;
  walfmt::Lsn from;                   // where the restore reads from (the base's position)
  uint64_t snapshot_fingerprint = 0;  // full base: its SNAPSHOT record's fingerprint
  bool has_transactions = false;      // consistent cut: the transactions the restore applies on this node
  uint64_t transactions = 0;
  std::vector<cut::SegmentInfo> segments;  // the segments of the range, as the summary lists them
};

struct Verdict {
  std::string id;  // 16 hex digits: digest of the rest (set by VerdictToJson / VerdictFromJson)
  uint64_t cut = 0;
  cut::CutStatus status = cut::CutStatus::kConsistent;
  std::string reason;          // why the cut is not consistent
  bool cluster_known = false;  // the WAL's segment headers name the cluster
  uint64_t cluster_id = 0;
  std::string cluster_json;      // cluster.json as given ("" when none was)
  uint64_t file_cluster_id = 0;  // what the restored node files carry: cluster.json's id (0 without one)
  BaseKind base_kind = BaseKind::kGenesis;
  std::string base_name;           // "genesis" or the snapshot name
  std::string base_why;            // how the base was chosen
  std::vector<VerdictNode> nodes;  // by node id, every node of the cluster
};

struct VerdictOptions {
  std::string base;          // "": chosen (as restore chooses, from the summaries); "genesis"; a snapshot name
  std::string cluster_json;  // the text of cluster.json, or "" (then the node files carry cluster id 0,
                             // as a restore of a directory without cluster.json does)
  // With a cluster directory at hand: what of snapshot NAME's files is
  // missing ("" when they are there; the choice then skips snapshots
  // without files, as restore does).
  // Empty: assumed present (each host has its node's file).
  std::function<std::string(const std::string& name)> snapshot_files_missing;
};

// The verdict of cut `k` from the reconstructed cuts. Fails with kNotFound
// when there is no cut k; kInvalidArgument when no base can serve it, the
// named base is not usable, or cluster.json names another cluster or node
// count. An inconsistent or incomplete cut still gets a verdict (its status
// says so; the node restores refuse it unless forced).
walfmt::Result<Verdict> MakeVerdict(const cut::ClusterCuts& cc, uint64_t k, const VerdictOptions& opt);

std::string VerdictToJson(const Verdict& v);
// Checks the schema, every field and that `id` matches the content.
walfmt::Result<Verdict> VerdictFromJson(const std::string& text, const std::string& origin);
// Reads a verdict file (at most walfmt::kMaxJsonFileBytes).
walfmt::Result<Verdict> ReadVerdict(const std::string& path);

}  // namespace walcut::recovery
