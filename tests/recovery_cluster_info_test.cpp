// cluster.json as the runtime writes it parses to what it ran. The parser's
// own tests are in walfmt_cluster_layout_test.cpp.
#include <catch2/catch.hpp>

#include "recovery_support.h"
#include "walfmt/cluster_layout.h"
#include "walfmt/workload.h"

using namespace walcut::recovery;
using namespace walcut::recovery::testing;

TEST_CASE("cluster.json: what the runtime writes is what it ran", "[recovery][cluster_info][cluster]") {
  TempDir t("ci-run");
  const SmallCluster c = MakeSmallCluster(t.str(), walcut::node::Workload::kMixed, 5, 5, 2);
  auto r = walfmt::LoadClusterInfo(c.dir);
  INFO(r.status().message());
  REQUIRE(r.ok());
  const auto& o = c.run.options;
  CHECK(r->nodes == o.nodes);
  CHECK(r->backups == o.backups);
  CHECK(r->partitions == o.partitions);
  CHECK(r->seed == o.seed);
  CHECK(r->workload == walfmt::Workload::kMixed);
  CHECK(r->accounts == o.workload.accounts);
  CHECK(r->ring_keys == o.workload.ring);
  CHECK(r->initial_balance == o.workload.initial_balance);
  CHECK(r->initial_bank_total == c.run.summary.initial_bank_total);
  REQUIRE(r->full_snapshots.size() == 1);
  const auto& snap = c.run.snapshots[0];
  CHECK(r->full_snapshots[0].name == snap.name);
  CHECK(r->full_snapshots[0].at_tx == snap.at_tx);
  for (uint32_t n = 0; n < o.nodes; ++n) {
    CHECK(r->full_snapshots[0].nodes[n].wal_position == snap.wal_position[n]);
    CHECK(r->full_snapshots[0].nodes[n].fingerprint == snap.fingerprint[n]);
  }
}
