// Restore and WriteRestore refusals: a cut the WAL does not hold, summaries
// that do not match the cluster, a node without the cut's markers, an output
// that exists. Each refusal names what is wrong.
#include <filesystem>
#include <string>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "cut/cuts.h"
#include "cut/load.h"
#include "cut_support.h"
#include "node/cluster.h"
#include "recovery/restore.h"

namespace fs = std::filesystem;

TEST_CASE("Restore refuses a cut it cannot restore and an output that exists", "[recovery][restore]") {
  walcut::test::ScratchDir d("restore-refusals");
  walcut::node::ClusterOptions o;
  o.dir = (d.path / "cluster").string();
  o.seed = 3;
  o.nodes = 3;
  o.backups = 1;
  o.txs = 300;
  o.cuts = 2;
  o.segment_bytes = 64 * 1024;
  REQUIRE(walcut::node::RunCluster(o).ok());
  walcut::cut::ClusterCuts cc = walcut::test::LoadCuts(o.dir);
  auto layout = walcut::cut::FindClusterLayout(o.dir);
  REQUIRE(layout.ok());
  const walcut::cut::GlobalCut* g = cc.Find(1);
  REQUIRE(g);
  REQUIRE(g->status == walcut::cut::CutStatus::kConsistent);
  const size_t gi = static_cast<size_t>(g - cc.cuts.data());
  walcut::recovery::RestoreRequest req;
  req.cluster_dir = o.dir;
  req.cut = 1;
  req.out = (d.path / "out").string();
  auto refused = [&](const walcut::cut::ClusterCuts& c, const walcut::cut::ClusterLayout& l, walfmt::ErrorCode code,
                     const std::string& message) {
    auto r = walcut::recovery::Restore(c, l, req);
    CHECK_FALSE(r.ok());
    CHECK(r.status().code() == code);
    CHECK(r.status().message() == message);
  };

  SECTION("a cut the WAL does not hold") {
    req.cut = 99;
    refused(cc, *layout, walfmt::ErrorCode::kNotFound, "cut 99 is not in the WAL");
  }
  SECTION("summaries of another number of nodes than the cluster") {
    walcut::cut::ClusterLayout two = *layout;
    two.wal_dirs.pop_back();
    refused(cc, two, walfmt::ErrorCode::kInvalidArgument, fmt::format("2 nodes in {}, 3 summaries", two.dir));
  }
  SECTION("a node with no record of the cut") {
    cc.cuts[gi].nodes[1] = nullptr;
    refused(cc, *layout, walfmt::ErrorCode::kInvalidArgument,
            "cut 1 has no CUT_START on node 1: there is nothing to restore that node to");
  }
  SECTION("a node whose cut did not finish") {
    walcut::cut::NodeCut unfinished = *cc.cuts[gi].nodes[2];
    unfinished.finished = false;
    cc.cuts[gi].nodes[2] = &unfinished;
    refused(cc, *layout, walfmt::ErrorCode::kInvalidArgument, "cut 1 has no CUT_FINISH on node 2");
  }
  SECTION("an output that exists, refused before the base is looked at") {
    fs::create_directories(req.out);
    req.base = "no-such-base";
    refused(cc, *layout, walfmt::ErrorCode::kInvalidArgument, req.out + ": already exists; refusing to overwrite");
  }
  SECTION("an output made while the restore ran") {
    auto r = walcut::recovery::Restore(cc, *layout, req);
    REQUIRE(r.ok());
    fs::create_directories(req.out);
    const auto st = walcut::recovery::WriteRestore(*r, req.out);
    CHECK_FALSE(st.ok());
    CHECK(st.code() == walfmt::ErrorCode::kInvalidArgument);
    CHECK(st.message() == req.out + ": already exists; refusing to overwrite");
  }
}
