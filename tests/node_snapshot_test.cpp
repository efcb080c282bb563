// Full snapshots taken by the runtime: restoring a cut from a snapshot base
// (docs/cut-rule.md section 2 with P_B = the SNAPSHOT record) equals restoring it
// from the genesis base. The file codec is tested in walfmt_snapshot_test.
#include <filesystem>
#include <fstream>
#include <map>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "node/cluster.h"
#include "node_wal_model.h"
#include "scratch_dir.h"
#include "walfmt/snapshot.h"

namespace fs = std::filesystem;
using namespace walcut::node;
using namespace walfmt;
using namespace walcut::node::testing;

namespace {

using TempDir = walcut::test::ScratchDir;

}  // namespace

TEST_CASE("full snapshot: files match the WAL and cuts restore the same from either base") {
  uint64_t checked_cuts = 0;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    for (uint32_t crashes : {0u, 2u}) {
      TempDir d("full");
      ClusterOptions o;
      o.dir = d.path.string();
      o.seed = seed;
      o.nodes = seed % 2 ? 3 : 5;
      o.backups = static_cast<uint32_t>(seed % 3);
      if (o.backups >= o.nodes) o.backups = 1;
      o.workload.workload = seed % 2 ? Workload::kBank : Workload::kCycle;
      o.workload.accounts = 100;
      o.workload.ring = 100;
      o.txs = 600;
      o.cuts = 30;
      o.cut_every = 20;
      o.full_snapshot_at_tx = 250;
      o.random_crashes = crashes;
      o.segment_bytes = 16 * 1024;
      INFO(fmt::format("seed {} nodes {} backups {} crashes {}", seed, o.nodes, o.backups, crashes));
      auto run = RunCluster(o);
      REQUIRE(run.ok());
      REQUIRE(run->snapshots.size() == 1);
      const auto& snap = run->snapshots[0];
      ClusterCheck c = CheckCluster(*run);
      INFO(fmt::format("failures:\n{}", fmt::join(c.failures, "\n")));
      REQUIRE(c.failures.empty());

      std::vector<NodeView> views;
      std::vector<size_t> snap_index(o.nodes);
      std::vector<std::map<std::string, std::string>> base(o.nodes);
      for (uint32_t n = 0; n < o.nodes; ++n) {
        NodeLog log = ReadNodeLog(o.dir, n);
        REQUIRE_FALSE(log.failed);
        views.push_back(IndexLog(log));
        // The SNAPSHOT record: where the run says, with the file's fingerprint.
        size_t at = log.recs.size();
        for (size_t i = 0; i < log.recs.size(); ++i) {
          if (auto* r = std::get_if<walfmt::Snapshot>(&log.recs[i]); r && r->name == snap.name) {
            at = i;
            CHECK(r->fingerprint == snap.fingerprint[n]);
          }
        }
        REQUIRE(at < log.recs.size());
        CHECK(log.lsns[at] == snap.wal_position[n]);
        snap_index[n] = at;
        auto file = ReadSnapshotFile(fmt::format("{}/snapshots/{}/node-{}.snap", o.dir, snap.name, n));
        REQUIRE(file.ok());
        CHECK(file->node_id == n);
        CHECK(file->wal_position == snap.wal_position[n]);
        CHECK(file->fingerprint == snap.fingerprint[n]);
        // The file holds exactly the WAL's committed state at the record.
        std::set<TxId> before_snap;
        for (const auto& [tx, pos] : views[n].commit_pos) {
          if (pos < at) before_snap.insert(tx);
        }
        CHECK(RestoreNode(views[n], before_snap) == file->entries);
        base[n] = file->entries;
      }
      // Every consistent cut that starts after the snapshot on every node.
      for (const auto& [k, start0] : views[0].cut_start) {
        bool usable = true;
        for (uint32_t n = 0; n < o.nodes; ++n) {
          const auto& v = views[n];
          usable = usable && v.cut_start.count(k) && v.cut_finish.count(k) && v.cut_start.at(k) > snap_index[n];
        }
        for (const auto& v : views) usable = usable && !v.cut_abort.count(k);
        if (!usable) continue;
        for (uint32_t n = 0; n < o.nodes; ++n) {
          const auto members = Members(views[n], k);
          std::set<TxId> incremental;  // P_B < p(T)
          for (const auto& tx : members) {
            if (views[n].commit_pos.at(tx) > snap_index[n]) incremental.insert(tx);
          }
          CHECK(RestoreNode(views[n], incremental, base[n]) == RestoreNode(views[n], members));
        }
        ++checked_cuts;
      }
    }
  }
  WARN(fmt::format("full snapshot: {} cuts restored from the snapshot base", checked_cuts));
  CHECK(checked_cuts > 20);
}
