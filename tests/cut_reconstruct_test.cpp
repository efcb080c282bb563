// cut::Reconstruct on hand-made summaries: which sets of summaries it
// refuses, and how a finding that is not tied to a cut reaches the cuts that
// contain it. The checks of real WALs are in cut_scan_test.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "cut/cuts.h"
#include "cut/summary.h"

using walcut::cut::Check;
using walcut::cut::CutStatus;
using walcut::cut::Finding;
using walcut::cut::NodeCut;
using walcut::cut::NodeSummary;
using walcut::cut::Reconstruct;

namespace {

// Node `id` of cluster 7 that took part in cuts 1 and 2, both finished.
NodeSummary Node(uint32_t id) {
  NodeSummary s;
  s.node = id;
  s.cluster_known = true;
  s.cluster_id = 7;
  for (uint64_t k : {1, 2}) {
    NodeCut c;
    c.cut_id = k;
    c.started = c.finished = true;
    c.start = walfmt::Lsn{0, 100 * k};
    c.finish = walfmt::Lsn{0, 100 * k + 50};
    s.cuts.push_back(c);
  }
  s.end = walfmt::Lsn{0, 1000};
  return s;
}

}  // namespace

TEST_CASE("Reconstruct refuses summaries that are not nodes 0..N-1 of one cluster", "[reconstruct]") {
  SECTION("no nodes") {
    auto r = Reconstruct({});
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message() == "no nodes");
  }
  SECTION("a node twice") {
    auto r = Reconstruct({Node(0), Node(1), Node(1)});
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message() == "two summaries of node 1");
  }
  SECTION("a node missing") {
    auto r = Reconstruct({Node(0), Node(2)});
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message() == "no summary of node 1 (the nodes must be numbered 0..1)");
  }
  SECTION("another cluster") {
    NodeSummary other = Node(1);
    other.cluster_id = 8;
    auto r = Reconstruct({Node(0), other});
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message() == "node 1 belongs to cluster 0000000000000008, node 0 to 0000000000000007");
  }
  SECTION("in any order, one cluster: accepted, in node order, every cut consistent") {
    auto r = Reconstruct({Node(2), Node(0), Node(1)});
    REQUIRE(r.ok());
    REQUIRE(r->nodes.size() == 3);
    for (uint32_t i = 0; i < 3; ++i) CHECK(r->nodes[i].node == i);
    REQUIRE(r->cuts.size() == 2);
    for (const auto& g : r->cuts) CHECK(g.status == CutStatus::kConsistent);
    CHECK(r->window.any);
    CHECK(r->window.earliest == 1);
    CHECK(r->window.latest == 2);
  }
}

TEST_CASE("Reconstruct: a transaction finding not tied to a cut fails the cuts that start after it on its node",
          "[reconstruct]") {
  NodeSummary n1 = Node(1);
  Finding f;
  f.check = Check::kAtomicity;
  f.node = 1;
  f.has_tx = true;
  f.tx = walfmt::TxId{1, 9};
  f.has_position = true;
  f.position = walfmt::Lsn{0, 150};  // after CUT_START(1) at 0/100, before CUT_START(2) at 0/200
  f.message = "node 1: transaction 1:9 began at 0/00000096 and never finished here";
  n1.findings.push_back(f);
  auto r = Reconstruct({Node(0), n1});
  REQUIRE(r.ok());
  REQUIRE(r->findings.size() == 1);
  CHECK(r->findings[0].message == f.message);
  CHECK(r->cuts[0].status == CutStatus::kConsistent);
  CHECK(r->cuts[1].status == CutStatus::kInconsistent);
  CHECK(r->cuts[1].reason == f.message);
  CHECK_FALSE(r->cuts[1].checks.atomicity);
  CHECK(r->window.latest == 1);
}
