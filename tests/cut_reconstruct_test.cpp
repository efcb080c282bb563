// cut::Reconstruct on hand-made summaries: which sets of summaries it
// refuses, and how a finding that is not tied to a cut reaches the cuts that
// contain it. The checks of real WALs are in cut_scan_test.
#include <string>
#include <type_traits>
#include <utility>
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
  SECTION("another cluster epoch") {
    NodeSummary a = Node(0), b = Node(1);
    a.epoch_unix_us = 1000;
    b.epoch_unix_us = 2000;
    auto r = Reconstruct({a, b});
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message() == "node 1 records the cluster epoch 2000, node 0 1000");
    b.epoch_unix_us = 1000;
    CHECK(Reconstruct({a, b}).ok());
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

TEST_CASE(
    "Reconstruct: one transaction in before(K) on one node and in after(K) on another is an atomicity finding "
    "naming both nodes, the cut and the transaction",
    "[reconstruct]") {
  // The set-based atomicity check alone: the summaries carry no digests and no
  // marker findings, so nothing else can see that node 0 counts 0:5 in cut 1
  // and node 1 does not.
  walfmt::TxId t{0, 5};
  NodeSummary n0 = Node(0), n1 = Node(1);
  walcut::cut::TrackedTx in;
  in.tx = t;
  in.committed = true;
  in.commit = walfmt::Lsn{0, 90};
  in.first_seen = walfmt::Lsn{0, 80};
  n0.cuts[0].before.push_back(in);
  walcut::cut::TrackedTx out = in;
  out.commit = walfmt::Lsn{0, 120};
  n1.cuts[0].after.push_back(out);
  auto r = Reconstruct({n0, n1});
  REQUIRE(r.ok());
  const auto& g = r->cuts[0];
  CHECK(g.status == CutStatus::kInconsistent);
  CHECK_FALSE(g.checks.atomicity);
  const Finding* named = nullptr;
  for (const auto& f : g.findings) {
    if (f.check == Check::kAtomicity && f.has_tx && f.tx == t) named = &f;
  }
  REQUIRE(named != nullptr);
  CHECK(named->cut == 1);
  CHECK(named->message == "transaction 0:5 before cut 1 on node 0 but after it on node 1");
  // Cut 2 holds none of it: still consistent.
  CHECK(r->cuts[1].status == CutStatus::kConsistent);
}

// GlobalCut::nodes points into ClusterCuts::nodes: a copy would point into
// the original, so ClusterCuts only moves, and a move keeps the pointers valid.
static_assert(!std::is_copy_constructible_v<walcut::cut::ClusterCuts>);
static_assert(!std::is_copy_assignable_v<walcut::cut::ClusterCuts>);
static_assert(std::is_nothrow_move_constructible_v<walcut::cut::ClusterCuts>);

TEST_CASE("Reconstruct: a moved ClusterCuts still points into its own summaries", "[reconstruct]") {
  auto cc = Reconstruct({Node(0), Node(1)});
  REQUIRE(cc.ok());
  walcut::cut::ClusterCuts moved = std::move(cc.value());
  REQUIRE(moved.cuts.size() == 2);
  for (const auto& g : moved.cuts) {
    REQUIRE(g.nodes.size() == 2);
    for (uint32_t i = 0; i < 2; ++i) CHECK(g.nodes[i] == moved.nodes[i].FindCut(g.cut_id));
  }
}
