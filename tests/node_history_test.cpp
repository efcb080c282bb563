// The oracle's writes against the WAL's. With crashes, every committed
// transaction in the simulator's history, whether the recovery protocol
// committed it or not, carries exactly the writes its participants' TX_DATA
// records: for each participant, the history's writes to the keys it holds,
// in order, are that node's TX_DATA writes for the transaction — what a
// restore from the WAL applies for it. A transaction the recovery protocol
// commits first on a restarted node (which rebuilt it from its WAL and knows
// only its own share) once had no writes in the history at all.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "node/cluster.h"
#include "node_wal_model.h"
#include "scratch_dir.h"
#include "sweep_support.h"
#include "walfmt/topology.h"

namespace fs = std::filesystem;
using walcut::node::ClusterOptions;
using walcut::node::RunCluster;
using walcut::node::RunResult;
using walcut::node::Workload;
using walcut::node::testing::IndexLog;
using walcut::node::testing::NodeView;
using walcut::node::testing::ReadNodeLog;

namespace {

using TempDir = walcut::test::ScratchDir;

// The shape of the pruned-restore sweep (tests/recovery_pruned_test.cpp),
// crashes always on, WAL kept whole.
ClusterOptions CrashShape(const std::string& dir, uint64_t seed) {
  ClusterOptions o = walcut::test::SweepShape(dir, seed);
  o.txs = 300;
  o.cuts = 8;
  o.segment_bytes = 4 * 1024;
  o.full_snapshot_at_tx = 100 + (seed % 5) * 20;
  o.random_crashes = 2;
  return o;
}

std::string Show(const std::vector<walfmt::Write>& ws) {
  std::vector<std::string> parts;
  for (const auto& w : ws) {
    parts.push_back(w.op == walfmt::WriteOp::kDelete ? fmt::format("-{}", w.key)
                                                     : fmt::format("{}={}", w.key, w.value));
  }
  return fmt::format("[{}]", fmt::join(parts, " "));
}

bool SameWrites(const std::vector<walfmt::Write>& a, const std::vector<walfmt::Write>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const walfmt::Write& x, const walfmt::Write& y) {
    return x.op == y.op && x.key == y.key && (x.op == walfmt::WriteOp::kDelete || x.value == y.value);
  });
}

struct Seen {
  uint64_t committed = 0;
  uint64_t recovered = 0;  // history entries first committed by the recovery protocol
};

// Failures, one a line (at most 20); empty: the history matches the WAL.
std::vector<std::string> CheckHistoryWrites(const RunResult& run, Seen& seen) {
  std::vector<std::string> failures;
  auto fail = [&](std::string s) {
    if (failures.size() < 20) failures.push_back(std::move(s));
  };
  const ClusterOptions& opt = run.options;
  const walfmt::Topology topo(opt.nodes, opt.backups, opt.partitions);
  std::vector<NodeView> views;
  for (uint32_t n = 0; n < opt.nodes; ++n) {
    auto log = ReadNodeLog(opt.dir, n);
    if (log.failed) fail(fmt::format("node {}: WAL read failed", n));
    views.push_back(IndexLog(log));
  }
  for (const auto& c : run.history.committed) {
    ++seen.committed;
    seen.recovered += c.recovered;
    const std::string what =
        fmt::format("tx {} (marker {}{})", c.id.ToString(), c.marker, c.recovered ? ", recovered" : "");
    if (c.writes.empty()) fail(fmt::format("{}: no writes in the history", what));
    for (const auto& w : c.writes) {
      bool held = false;
      for (uint32_t p : c.participants) held = held || topo.Holds(p, w.key);
      if (!held) fail(fmt::format("{}: writes {}, which no participant holds", what, w.key));
    }
    for (uint32_t n = 0; n < opt.nodes; ++n) {
      const bool participant = std::binary_search(c.participants.begin(), c.participants.end(), n);
      auto it = views[n].data.find(c.id);
      if (!participant) {
        if (it != views[n].data.end()) fail(fmt::format("{}: TX_DATA on node {}, not a participant", what, n));
        continue;
      }
      std::vector<walfmt::Write> expected;
      for (const auto& w : c.writes) {
        if (topo.Holds(n, w.key)) expected.push_back(w);
      }
      const std::vector<walfmt::Write> none;
      const auto& logged = it == views[n].data.end() ? none : it->second;
      if (!SameWrites(expected, logged)) {
        fail(fmt::format("{} on node {}: history {}, TX_DATA {}", what, n, Show(expected), Show(logged)));
      }
    }
  }
  return failures;
}

}  // namespace

// Seeds on which the recovery protocol commits some transaction first on a
// node that restarted since it prepared it, so the history once lacked its
// writes: 3 and 5 nodes, 0 to 2 backups, bank, cycle and mixed. (Of seeds
// 1-300, 56 did.) WALCUT_HISTORY_SEEDS=N [WALCUT_HISTORY_FIRST=S] runs the
// range S..S+N-1 instead.
TEST_CASE("with crashes, every committed transaction in the history has the writes its participants' TX_DATA records") {
  std::vector<uint64_t> seeds = {1, 7, 9, 10, 23, 26, 31, 38};
  if (const char* c = std::getenv("WALCUT_HISTORY_SEEDS")) {
    const char* f = std::getenv("WALCUT_HISTORY_FIRST");
    const uint64_t first = f ? std::strtoull(f, nullptr, 10) : 1;
    seeds.clear();
    for (uint64_t s = first; s < first + std::strtoull(c, nullptr, 10); ++s) seeds.push_back(s);
  }
  Seen seen;
  uint64_t failed = 0;
  for (uint64_t seed : seeds) {
    TempDir d("history");
    auto run = RunCluster(CrashShape(d.path.string(), seed));
    INFO(fmt::format("seed {}: {}", seed, run.ok() ? "" : run.status().message()));
    REQUIRE(run.ok());
    const auto failures = CheckHistoryWrites(*run, seen);
    INFO(fmt::format("seed {} (rerun: WALCUT_HISTORY_FIRST={} WALCUT_HISTORY_SEEDS=1):\n{}", seed, seed,
                     fmt::join(failures, "\n")));
    CHECK(failures.empty());
    failed += !failures.empty();
  }
  WARN(fmt::format("{} seeds, {} failed; {} committed transactions, {} first committed by recovery", seeds.size(),
                   failed, seen.committed, seen.recovered));
  CHECK(seen.recovered > 0);
}
