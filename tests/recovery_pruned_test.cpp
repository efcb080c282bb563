// A WAL that no longer starts at genesis: the oldest segments of every node
// removed up to the one holding a full snapshot's SNAPSHOT record, as WAL
// retention leaves it. Over many seeds (shapes and crashes as the restore
// sweep), against the same cluster's complete WAL and the simulator's
// oracle:
// - no cut is inconsistent or consistent in one and not the other, except
//   that a cut whose evidence was removed becomes unavailable;
// - every cut that starts after the snapshot on every node stays consistent;
// - every consistent cut restores, from the base restore chooses by itself
//   (the snapshot), to the restore of the complete WAL from genesis and to
//   the oracle's state; so does a restore chained from the previous
//   consistent cut's restore;
// - genesis is refused as a base, naming the node whose WAL was cut.
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "cut/cuts.h"
#include "cut/load.h"
#include "cut_support.h"
#include "node/cluster.h"
#include "recovery/restore.h"
#include "sweep_support.h"
#include "walfmt/topology.h"

namespace fs = std::filesystem;
using walcut::cut::ClusterCuts;
using walcut::cut::CutStatus;
using walcut::node::ClusterOptions;
using walcut::node::RunResult;
using walcut::node::Workload;
using walcut::test::LoadCuts;
using walcut::test::OracleState;
using walcut::test::ScratchDir;
using walcut::test::State;

namespace {

ClusterOptions PrunedShape(const std::string& dir, uint64_t seed) {
  ClusterOptions o = walcut::test::SweepShape(dir, seed);
  o.txs = 300;
  o.cuts = 8;
  o.segment_bytes = 4 * 1024;
  o.full_snapshot_at_tx = 100 + (seed % 5) * 20;
  return o;
}

// Copies the cluster to `to` and removes, on every node, the segments before
// the one holding the snapshot's SNAPSHOT record. Returns how many went.
size_t CopyPruned(const std::string& from, const std::string& to, const RunResult& run) {
  fs::copy(from, to, fs::copy_options::recursive);
  size_t removed = 0;
  const auto& snap = run.snapshots.front();
  for (uint32_t n = 0; n < snap.wal_position.size(); ++n) {
    const fs::path wal = fs::path(to) / fmt::format("node-{}/wal", n);
    for (const auto& e : fs::directory_iterator(wal)) {
      const uint64_t index = std::strtoull(e.path().filename().string().substr(0, 16).c_str(), nullptr, 16);
      if (index < snap.wal_position[n].segment) {
        fs::remove(e.path());
        ++removed;
      }
    }
  }
  return removed;
}

struct Counts {
  uint64_t runs = 0, pruned_runs = 0, unavailable = 0, consistent = 0, restored = 0, chained = 0;
};

void CheckSeed(uint64_t seed, Counts& counts) {
  INFO("seed " << seed << " (rerun: WALCUT_PRUNED_SEED=" << seed << ")");
  ScratchDir d("pruned");
  fs::create_directories(d.path);
  const ClusterOptions opt = PrunedShape((d.path / "full").string(), seed);
  auto run = walcut::node::RunCluster(opt);
  REQUIRE(run.ok());
  if (run->snapshots.empty()) return;  // a crash kept the snapshot from being taken
  ++counts.runs;
  const RunResult& rr = *run;
  const walfmt::Topology topo(rr.options.nodes, rr.options.backups, rr.options.partitions);
  const std::string pruned_dir = (d.path / "pruned").string();
  if (CopyPruned(opt.dir, pruned_dir, rr) == 0) return;
  ++counts.pruned_runs;

  const ClusterCuts full = LoadCuts(opt.dir);
  const ClusterCuts cc = LoadCuts(pruned_dir);
  CHECK(cc.pruned);
  auto layout = walcut::cut::FindClusterLayout(pruned_dir);
  REQUIRE(layout.ok());
  auto full_layout = walcut::cut::FindClusterLayout(opt.dir);
  REQUIRE(full_layout.ok());
  CHECK(cc.findings.size() <= full.findings.size());
  const auto& snap = rr.snapshots.front();
  std::optional<uint64_t> prev;
  for (const auto& g : cc.cuts) {
    const walcut::cut::GlobalCut* f = full.Find(g.cut_id);
    REQUIRE(f != nullptr);
    INFO("cut " << g.cut_id << ": pruned " << CutStatusName(g.status) << " (" << g.reason << "), complete WAL "
                << CutStatusName(f->status) << " (" << f->reason << ")");
    if (g.status == CutStatus::kUnavailable) {
      ++counts.unavailable;
      continue;
    }
    CHECK(g.status == f->status);
    bool after_snapshot = true;
    for (uint32_t n = 0; n < opt.nodes; ++n) {
      after_snapshot &= f->nodes[n] && f->nodes[n]->started && snap.wal_position[n] < f->nodes[n]->start;
    }
    if (f->status == CutStatus::kConsistent && after_snapshot) CHECK(g.status == CutStatus::kConsistent);
    if (g.status != CutStatus::kConsistent) continue;
    ++counts.consistent;

    // Genesis is no longer a base.
    walcut::recovery::RestoreRequest req;
    req.cluster_dir = pruned_dir;
    req.cut = g.cut_id;
    req.base = "genesis";
    req.dry_run = true;
    auto refused = walcut::recovery::Restore(cc, *layout, req);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.status().message().find("segments before it were removed") != std::string::npos);

    // The chosen base, and the restore from it.
    auto choice = walcut::recovery::ChooseBase(cc, *layout, g.cut_id);
    if (!after_snapshot) {
      REQUIRE_FALSE(choice.ok());  // consistent, but only a restore of an earlier cut can serve it
      CHECK(choice.status().code() == walfmt::ErrorCode::kInvalidArgument);
      CHECK(choice.status().message().find(
                fmt::format("cut {} cannot be restored from this WAL alone: node ", g.cut_id)) == 0);
      CHECK(choice.status().message().find("give --base with an earlier restore output") != std::string::npos);
      continue;
    }
    REQUIRE(choice.ok());
    CHECK(choice->base == snap.name);
    req.base = choice->base;
    req.dry_run = false;
    req.keep_states = true;
    req.out = (d.path / fmt::format("r-{}", g.cut_id)).string();
    auto r = walcut::recovery::Restore(cc, *layout, req);
    REQUIRE(r.ok());
    ++counts.restored;
    // Against the complete WAL restored from genesis, and against the
    // oracle.
    walcut::recovery::RestoreRequest whole = req;
    whole.cluster_dir = opt.dir;
    whole.base = "genesis";
    whole.out.clear();
    auto from_genesis = walcut::recovery::Restore(full, *full_layout, whole);
    REQUIRE(from_genesis.ok());
    for (uint32_t n = 0; n < opt.nodes; ++n) {
      CHECK(r->nodes[n].state == from_genesis->nodes[n].state);
      CHECK(r->nodes[n].state == OracleState(rr, topo, n, g.cut_id));
    }
    if (prev) {
      auto chained_req = req;
      chained_req.base = (d.path / fmt::format("r-{}", *prev)).string();
      chained_req.out = (d.path / fmt::format("c-{}", g.cut_id)).string();
      auto chained = walcut::recovery::Restore(cc, *layout, chained_req);
      REQUIRE(chained.ok());
      ++counts.chained;
      for (uint32_t n = 0; n < opt.nodes; ++n) CHECK(chained->nodes[n].state == r->nodes[n].state);
    }
    REQUIRE(walcut::recovery::WriteRestore(*r, req.out).ok());
    prev = g.cut_id;
  }
}

}  // namespace

TEST_CASE("a WAL pruned up to a full snapshot: no false finding, every cut after it restores to the oracle",
          "[pruned]") {
  uint64_t first = 1, count = 60;
  if (const char* s = std::getenv("WALCUT_PRUNED_SEED")) {
    first = std::strtoull(s, nullptr, 10);
    count = 1;
  } else if (const char* c = std::getenv("WALCUT_PRUNED_SEEDS")) {
    count = std::strtoull(c, nullptr, 10);
  }
  Counts counts;
  for (uint64_t seed = first; seed < first + count; ++seed) CheckSeed(seed, counts);
  WARN(fmt::format(
      "{} runs ({} pruned): {} consistent cuts, {} restored from the snapshot, {} chained, {} "
      "unavailable",
      counts.runs, counts.pruned_runs, counts.consistent, counts.restored, counts.chained, counts.unavailable));
  if (count >= 20) {
    CHECK(counts.pruned_runs > count / 3);
    CHECK(counts.restored > 0);
    CHECK(counts.chained > 0);
    CHECK(counts.unavailable > 0);
  }
}

TEST_CASE("a WAL pruned up to where a restore of cut J continues: cut K restores from J's restore, J attested",
          "[pruned]") {
  ScratchDir d("pruned-attested");
  fs::create_directories(d.path);
  ClusterOptions opt = PrunedShape((d.path / "full").string(), 1);
  opt.random_crashes = 0;
  auto run = walcut::node::RunCluster(opt);
  REQUIRE(run.ok());
  const ClusterCuts full = LoadCuts(opt.dir);
  auto full_layout = walcut::cut::FindClusterLayout(opt.dir);
  REQUIRE(full_layout.ok());
  std::vector<uint64_t> consistent;
  for (const auto& g : full.cuts) {
    if (g.status == CutStatus::kConsistent) consistent.push_back(g.cut_id);
  }
  REQUIRE(consistent.size() >= 3);
  const uint64_t j = consistent[consistent.size() - 2], k = consistent.back();
  INFO("J = " << j << ", K = " << k);
  walcut::recovery::RestoreRequest req;
  req.cluster_dir = opt.dir;
  req.cut = j;
  req.base = "genesis";
  req.out = (d.path / "rj").string();
  auto rj = walcut::recovery::Restore(full, *full_layout, req);
  REQUIRE(rj.ok());
  REQUIRE(walcut::recovery::WriteRestore(*rj, req.out).ok());
  CHECK(walcut::recovery::RestoredBaseCut(req.out) == j);
  CHECK_FALSE(walcut::recovery::RestoredBaseCut(opt.dir).has_value());

  // Keep only the segments from the one where a restore based on J reads.
  const std::string pruned = (d.path / "pruned").string();
  fs::copy(opt.dir, pruned, fs::copy_options::recursive);
  size_t removed = 0;
  for (uint32_t n = 0; n < opt.nodes; ++n) {
    const fs::path wal = fs::path(pruned) / fmt::format("node-{}/wal", n);
    for (const auto& e : fs::directory_iterator(wal)) {
      if (std::strtoull(e.path().filename().string().substr(0, 16).c_str(), nullptr, 16) <
          rj->nodes[n].continue_from.segment) {
        fs::remove(e.path());
        ++removed;
      }
    }
  }
  REQUIRE(removed > 0);
  auto layout = walcut::cut::FindClusterLayout(pruned);
  REQUIRE(layout.ok());
  auto sums = walcut::cut::ScanCluster(*layout, {});
  REQUIRE(sums.ok());
  walcut::cut::ReconstructOptions attested;
  attested.attested_cut = j;
  auto plain = walcut::cut::Reconstruct(*sums, {});
  auto with_j = walcut::cut::Reconstruct(*sums, attested);
  REQUIRE(plain.ok());
  REQUIRE(with_j.ok());
  // Without the attestation nothing checks J, so nothing after it can be
  // checked either; with it, K is checked against J.
  CHECK(plain->Find(k)->status == CutStatus::kUnavailable);
  CHECK(with_j->Find(j)->status == CutStatus::kUnavailable);
  CHECK(with_j->EvidenceComplete(*with_j->Find(j)));
  REQUIRE(with_j->Find(k)->status == CutStatus::kConsistent);
  CHECK(with_j->Find(k)->checked_against == fmt::format("cut {}", j));

  req.cluster_dir = pruned;
  req.cut = k;
  req.base = (d.path / "rj").string();
  req.out.clear();
  req.keep_states = true;
  auto rk = walcut::recovery::Restore(*with_j, *layout, req);
  REQUIRE(rk.ok());
  req.cluster_dir = opt.dir;
  req.base = "genesis";
  auto whole = walcut::recovery::Restore(full, *full_layout, req);
  REQUIRE(whole.ok());
  for (uint32_t n = 0; n < opt.nodes; ++n) CHECK(rk->nodes[n].state == whole->nodes[n].state);
  // Genesis is refused, naming the removed segments.
  req.cluster_dir = pruned;
  auto refused = walcut::recovery::Restore(*with_j, *layout, req);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message().find("segments before it were removed") != std::string::npos);
}
