// WAL retention (--wal-retention after-snapshot): after each full snapshot a
// node deletes the segments wholly before the one holding its SNAPSHOT
// record, and a restarted node recovers from its latest snapshot file plus the
// WAL after that record.
//
// The main check is an equivalence: deleting files draws nothing from the
// RNG, so a run with retention must be the run without it, minus exactly the
// deleted segments — same history, same snapshots, every remaining file byte
// for byte the same. Any difference in what a node recovered from snapshot +
// WAL (a value, an outcome, a cut id that reaches a record) would change what
// it writes afterwards. The run without retention is checked against the
// oracle (CheckCluster), and the state a node recovers from its latest
// snapshot plus the WAL after it is compared with the full replay and with
// the oracle's committed writes.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "node/cluster.h"
#include "node_wal_model.h"
#include "scratch_dir.h"
#include "walfmt/reader.h"
#include "walfmt/snapshot.h"
#include "walfmt/topology.h"

namespace fs = std::filesystem;
using walcut::node::ClusterOptions;
using walcut::node::RunCluster;
using walcut::node::RunResult;
using walcut::node::WalRetention;
using walcut::node::Workload;
using walcut::node::testing::CheckCluster;
using walcut::node::testing::ClusterCheck;
using walcut::node::testing::ReadNodeLog;

namespace {

using TempDir = walcut::test::ScratchDir;

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

ClusterOptions Options(const std::string& dir, uint64_t seed, uint32_t nodes, uint32_t backups, Workload w) {
  ClusterOptions o;
  o.dir = dir;
  o.seed = seed;
  o.nodes = nodes;
  o.backups = backups;
  o.workload.workload = w;
  o.workload.accounts = 100;
  o.workload.ring = 100;
  o.workload.max_transfer = 400;
  o.txs = 600;
  o.concurrency = 16;
  o.cuts = 20;
  o.cut_every = 15;
  o.segment_bytes = 8 * 1024;  // many segments, so each snapshot leaves some behind it
  o.full_snapshot_every_tx = 200;
  return o;
}

// Segment indexes present in a node's WAL directory.
std::vector<uint64_t> Segments(const fs::path& dir, uint32_t node) {
  auto segs = walfmt::ListSegments((dir / fmt::format("node-{}", node) / "wal").string(), nullptr);
  REQUIRE(segs.ok());
  std::vector<uint64_t> out;
  for (const auto& s : *segs) out.push_back(s.index);
  return out;
}

// Every regular file under dir, relative path -> bytes.
std::map<std::string, std::string> Tree(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) out[fs::relative(e.path(), dir).string()] = ReadAll(e.path());
  }
  return out;
}

// The node's state from its latest snapshot file plus the WAL after the
// SNAPSHOT record (what a restart with retention rebuilds), and from the
// whole WAL of the run without retention: committed data in WAL order.
std::map<std::string, std::string> Replay(const std::string& dir, uint32_t node, const walfmt::Lsn* from_snapshot,
                                          const std::string& snap_path) {
  std::map<std::string, std::string> kv;
  if (from_snapshot != nullptr) {
    auto f = walfmt::ReadSnapshotFile(snap_path);
    REQUIRE(f.ok());
    REQUIRE(f->wal_position == *from_snapshot);
    kv = f->entries;
  }
  auto log = ReadNodeLog(dir, node);
  REQUIRE_FALSE(log.failed);
  std::map<walfmt::TxId, std::vector<walfmt::Write>> data;
  for (size_t i = 0; i < log.recs.size(); ++i) {
    if (from_snapshot != nullptr && !(*from_snapshot < log.lsns[i])) continue;
    if (auto* d = std::get_if<walfmt::TxData>(&log.recs[i])) {
      auto& w = data[d->tx];
      w.insert(w.end(), d->writes.begin(), d->writes.end());
    } else if (auto* c = std::get_if<walfmt::TxCommit>(&log.recs[i])) {
      for (const auto& w : data[c->tx]) {
        if (w.op == walfmt::WriteOp::kDelete)
          kv.erase(w.key);
        else
          kv[w.key] = w.value;
      }
      data.erase(c->tx);
    } else if (auto* r = std::get_if<walfmt::TxRollback>(&log.recs[i])) {
      data.erase(r->tx);
    }
  }
  return kv;
}

struct Pair {
  RunResult keep, pruned;
  uint64_t kept_for_a_cut = 0;  // (node, snapshot) pairs where the last cut record's segment came first
};

// The first segment retention keeps after a snapshot at `at`: the one holding
// the SNAPSHOT record, or the one holding the node's last cut record before
// it, whichever comes first (a node restarted from the snapshot reads its
// last cut there).
uint64_t KeptFrom(const walcut::node::testing::NodeLog& log, const walfmt::Lsn& at) {
  uint64_t from = at.segment;
  for (size_t i = 0; i < log.recs.size() && log.lsns[i] < at; ++i) {
    const auto& r = log.recs[i];
    if (std::holds_alternative<walfmt::CutStart>(r) || std::holds_alternative<walfmt::CutFinish>(r) ||
        std::holds_alternative<walfmt::CutAbort>(r)) {
      from = std::min(at.segment, log.lsns[i].segment);
    }
  }
  return from;
}

// Runs o twice, without and with retention, and checks everything the
// retention run must satisfy. Returns both results.
Pair RunBoth(ClusterOptions o, const fs::path& keep_dir, const fs::path& pruned_dir) {
  o.dir = keep_dir.string();
  o.wal_retention = WalRetention::kKeep;
  auto a = RunCluster(o);
  INFO((a.ok() ? std::string() : a.status().message()));
  REQUIRE(a.ok());
  ClusterCheck ca = CheckCluster(*a);
  INFO(fmt::format("oracle failures (keep):\n{}", fmt::join(ca.failures, "\n")));
  REQUIRE(ca.failures.empty());

  o.dir = pruned_dir.string();
  o.wal_retention = WalRetention::kAfterSnapshot;
  auto b = RunCluster(o);
  INFO((b.ok() ? std::string() : b.status().message()));
  REQUIRE(b.ok());

  // Same run: history, counts, snapshots.
  REQUIRE(a->history.committed.size() == b->history.committed.size());
  for (size_t i = 0; i < a->history.committed.size(); ++i) {
    const auto& x = a->history.committed[i];
    const auto& y = b->history.committed[i];
    INFO(fmt::format("committed #{}: {} vs {}", i, x.id.ToString(), y.id.ToString()));
    REQUIRE(x.id == y.id);
    REQUIRE(x.marker == y.marker);
    REQUIRE(x.recovered == y.recovered);
  }
  CHECK(a->history.rolled_back == b->history.rolled_back);
  CHECK(a->summary.records == b->summary.records);
  CHECK(a->summary.crashes == b->summary.crashes);
  CHECK(a->summary.cuts_consistent == b->summary.cuts_consistent);
  CHECK(a->summary.cuts_inconsistent == b->summary.cuts_inconsistent);
  CHECK(a->summary.recovered_commits == b->summary.recovered_commits);
  CHECK(a->summary.segments_deleted == 0);
  CHECK(a->summary.snapshot_recoveries == 0);
  REQUIRE(a->snapshots.size() == b->snapshots.size());
  for (size_t s = 0; s < a->snapshots.size(); ++s) {
    CHECK(a->snapshots[s].name == b->snapshots[s].name);
    CHECK(a->snapshots[s].wal_position == b->snapshots[s].wal_position);
    CHECK(a->snapshots[s].fingerprint == b->snapshots[s].fingerprint);
  }

  // Exactly the segments before the latest snapshot's segment are gone, the
  // deletions add up, and every remaining file is byte for byte the one of
  // the run without retention.
  uint64_t deleted = 0;
  uint64_t kept_for_a_cut = 0;
  const walfmt::Topology topo(o.nodes, o.backups, b->options.partitions);
  for (uint32_t n = 0; n < o.nodes; ++n) {
    INFO(fmt::format("node {}", n));
    const auto all = Segments(keep_dir, n);
    const auto left = Segments(pruned_dir, n);
    const auto keep_log = ReadNodeLog(keep_dir.string(), n);
    REQUIRE_FALSE(keep_log.failed);
    uint64_t first = 0;
    uint64_t by_snapshots = 0;
    for (const auto& sn : b->snapshots) {
      const uint64_t from = KeptFrom(keep_log, sn.wal_position[n]);
      if (from < sn.wal_position[n].segment) ++kept_for_a_cut;
      first = std::max(first, from);
      REQUIRE(sn.segments_deleted.size() == o.nodes);
      by_snapshots += sn.segments_deleted[n];
    }
    std::vector<uint64_t> want;
    for (uint64_t i : all) {
      if (i >= first) want.push_back(i);
    }
    CHECK(left == want);
    CHECK(all.size() - left.size() == by_snapshots);
    REQUIRE(b->first_segment.size() == o.nodes);
    CHECK(b->first_segment[n] == (left.empty() ? 0 : left.front()));
    deleted += by_snapshots;
    // The chain reads clean from the first segment present.
    auto log = ReadNodeLog(pruned_dir.string(), n);
    INFO(fmt::format("problems: {}", fmt::join(log.problems, "; ")));
    CHECK_FALSE(log.failed);
    CHECK(log.problems.empty());
    // The latest SNAPSHOT record is where cluster.json says.
    if (!b->snapshots.empty()) {
      const auto& last = b->snapshots.back();
      bool found = false;
      for (size_t i = 0; i < log.recs.size(); ++i) {
        if (auto* s = std::get_if<walfmt::Snapshot>(&log.recs[i]); s != nullptr && s->name == last.name) {
          found = true;
          CHECK(log.lsns[i] == last.wal_position[n]);
        }
      }
      CHECK(found);
      // Snapshot + WAL after it gives the state of the full replay.
      const std::string snap = (pruned_dir / "snapshots" / last.name / fmt::format("node-{}.snap", n)).string();
      const auto recovered = Replay(pruned_dir.string(), n, &last.wal_position[n], snap);
      CHECK(recovered == Replay(keep_dir.string(), n, nullptr, ""));
      // ... and the oracle's: every committed write to a key the node holds,
      // in decision order (conflicting transactions are decided in lock
      // order). A transaction first committed by the recovery protocol on a
      // restarted node has no writes in the history (the node rebuilt its
      // plan from its own WAL); its writes here come from the full WAL.
      std::map<walfmt::TxId, std::vector<walfmt::Write>> wal_writes;
      const auto full = ReadNodeLog(keep_dir.string(), n);
      for (const auto& rec : full.recs) {
        if (auto* d = std::get_if<walfmt::TxData>(&rec)) {
          auto& w = wal_writes[d->tx];
          w.insert(w.end(), d->writes.begin(), d->writes.end());
        }
      }
      std::map<std::string, std::string> truth;
      for (const auto& c : b->history.committed) {
        const auto& writes = c.writes.empty() && wal_writes.count(c.id) ? wal_writes[c.id] : c.writes;
        for (const auto& w : writes) {
          if (!topo.Holds(n, w.key)) continue;
          if (w.op == walfmt::WriteOp::kDelete)
            truth.erase(w.key);
          else
            truth[w.key] = w.value;
        }
      }
      if (recovered != truth) {
        std::string diff;
        for (const auto& [k, v] : truth) {
          auto it = recovered.find(k);
          if (it == recovered.end() || it->second != v)
            diff += fmt::format(" {}: oracle {} node {};", k, v, it == recovered.end() ? "-" : it->second);
        }
        for (const auto& [k, v] : recovered)
          if (!truth.count(k)) diff += fmt::format(" {}: only node {};", k, v);
        FAIL_CHECK("state differs from the oracle:" << diff);
      }
    }
  }
  CHECK(b->summary.segments_deleted == deleted);
  const auto ta = Tree(keep_dir);
  const auto tb = Tree(pruned_dir);
  for (const auto& [p, bytes] : tb) {
    INFO(p);
    if (p == "cluster.json") continue;  // carries the retention fields
    auto it = ta.find(p);
    REQUIRE(it != ta.end());
    CHECK(it->second == bytes);
  }
  return {std::move(a.value()), std::move(b.value()), kept_for_a_cut};
}

}  // namespace

TEST_CASE("wal retention: snapshots every 200 transactions delete exactly the segments before each SNAPSHOT record") {
  TempDir ka("keep"), kb("pruned");
  auto o = Options("", 3, 3, 1, Workload::kBank);
  auto [keep, pruned, kept] = RunBoth(o, ka.path, kb.path);
  REQUIRE(pruned.snapshots.size() == 3);  // full-200, full-400, full-600
  CHECK(pruned.snapshots[0].name == "full-200");
  CHECK(pruned.snapshots[2].name == "full-600");
  CHECK(pruned.summary.segments_deleted > 0);
  for (uint32_t n = 0; n < 3; ++n) {
    // Each snapshot deleted what lay between the previous one's segment and its own.
    uint64_t prev = 0;
    for (const auto& sn : pruned.snapshots) {
      CHECK(sn.segments_deleted[n] == sn.wal_position[n].segment - prev);
      prev = sn.wal_position[n].segment;
    }
    CHECK(pruned.first_segment[n] == pruned.snapshots.back().wal_position[n].segment);
    CHECK(pruned.first_segment[n] > 0);
  }
  // Without retention nothing is deleted and the WAL starts at segment 0.
  for (uint32_t n = 0; n < 3; ++n) CHECK(keep.first_segment[n] == 0);
}

TEST_CASE("wal retention: --full-snapshot-every combines with --full-snapshot-at, option checks") {
  TempDir d("combine");
  auto o = Options(d.path.string(), 4, 3, 1, Workload::kCycle);
  o.full_snapshot_at_tx = 300;
  o.full_snapshot_every_tx = 250;
  o.wal_retention = WalRetention::kAfterSnapshot;
  auto r = RunCluster(o);
  REQUIRE(r.ok());
  std::vector<std::string> names;
  for (const auto& sn : r->snapshots) names.push_back(sn.name);
  CHECK(names == std::vector<std::string>{"full-250", "full-300", "full-500"});
  auto bad = Options((d.path / "x").string(), 4, 3, 1, Workload::kBank);
  bad.full_snapshot_every_tx = 601;
  CHECK_FALSE(RunCluster(bad).ok());
  WalRetention w = WalRetention::kKeep;
  CHECK(walcut::node::ParseWalRetention("after-snapshot", w));
  CHECK(w == WalRetention::kAfterSnapshot);
  CHECK(walcut::node::ParseWalRetention("keep", w));
  CHECK(w == WalRetention::kKeep);
  CHECK_FALSE(walcut::node::ParseWalRetention("never", w));
  CHECK(walcut::node::WalRetentionName(WalRetention::kAfterSnapshot) == "after-snapshot");
}

// Random crashes with retention: restarted nodes recover from their latest
// snapshot plus the WAL after it, and the run is still the run without
// retention (which matches the oracle), file for file.
TEST_CASE("wal retention: crash sweep - recovery from snapshot + WAL matches the oracle") {
  constexpr uint64_t kSeeds = 8;
  uint64_t runs = 0, crashes = 0, from_snapshot = 0, deleted = 0, kept_for_a_cut = 0;
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    for (uint32_t nodes : {3u, 5u}) {
      for (uint32_t backups : {0u, 1u, 2u}) {
        const Workload w = seed % 2 ? Workload::kBank : Workload::kCycle;
        TempDir ka("crash-keep"), kb("crash-pruned");
        auto o = Options("", 800000 + seed * 1000 + nodes * 10 + backups, nodes, backups, w);
        o.random_crashes = 3;
        o.full_snapshot_every_tx = 150;
        INFO(fmt::format("seed {} nodes {} backups {} workload {} crashes 3 snapshot every 150", o.seed, nodes, backups,
                         walcut::node::WorkloadName(w)));
        auto [keep, pruned, kept] = RunBoth(o, ka.path, kb.path);
        ++runs;
        kept_for_a_cut += kept;
        crashes += pruned.summary.crashes;
        from_snapshot += pruned.summary.snapshot_recoveries;
        deleted += pruned.summary.segments_deleted;
      }
    }
  }
  WARN(fmt::format("retention crash sweep: {} runs, {} crashes, {} restarts from a snapshot, {} segments deleted", runs,
                   crashes, from_snapshot, deleted));
  CHECK(crashes > runs);
  CHECK(from_snapshot > runs / 2);
  CHECK(deleted > 0);
  CHECK(kept_for_a_cut > 0);  // some snapshot's segment held no cut record before it
}
