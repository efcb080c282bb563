// Restore refuses a base that cannot serve the cut, before anything is
// written: a directory whose manifest.json is not a restore's, a forced
// restore, a restore of a cut that is not before the one asked for or not a
// consistent cut of this WAL, a name that is neither a snapshot nor a restore,
// and snapshot files of another node, another cluster, or that the WAL's
// SNAPSHOT records do not describe. Each refusal names the file or the base.
#include <filesystem>
#include <string>

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cut/cuts.h"
#include "cut/load.h"
#include "cut_support.h"
#include "node/cluster.h"
#include "recovery/restore.h"
#include "recovery_support.h"

namespace fs = std::filesystem;
using walcut::recovery::testing::ReadAll;
using walcut::recovery::testing::WriteAll;

TEST_CASE("Restore refuses a base that cannot serve the cut, naming the base or its file", "[recovery][restore]") {
  walcut::test::ScratchDir d("restore-base-refusals");
  fs::create_directories(d.path);
  walcut::node::ClusterOptions o;
  o.dir = (d.path / "cluster").string();
  o.seed = 5;
  o.nodes = 3;
  o.backups = 1;
  o.txs = 300;
  o.cuts = 3;
  o.full_snapshot_at_tx = 150;
  o.segment_bytes = 64 * 1024;
  auto run = walcut::node::RunCluster(o);
  REQUIRE(run.ok());
  REQUIRE(run->snapshots.size() == 1);
  const std::string snap_name = run->snapshots[0].name;
  walcut::cut::ClusterCuts cc = walcut::test::LoadCuts(o.dir);
  auto layout = walcut::cut::FindClusterLayout(o.dir);
  REQUIRE(layout.ok());
  // Two consistent cuts, the second after the full snapshot on every node.
  std::vector<uint64_t> consistent;
  for (const auto& g : cc.cuts) {
    if (g.status == walcut::cut::CutStatus::kConsistent) consistent.push_back(g.cut_id);
  }
  REQUIRE(consistent.size() >= 2);
  const uint64_t k1 = consistent.front(), k2 = consistent.back();
  REQUIRE(cc.Find(0) == nullptr);

  // A restore of the first consistent cut, to serve as a base.
  walcut::recovery::RestoreRequest req;
  req.cluster_dir = o.dir;
  req.cut = k1;
  req.out = (d.path / "r1").string();
  {
    auto r = walcut::recovery::Restore(cc, *layout, req);
    REQUIRE(r.ok());
    REQUIRE(walcut::recovery::WriteRestore(*r, req.out).ok());
  }
  const std::string r1 = req.out;
  const std::string manifest = r1 + "/manifest.json";
  req.cut = k2;
  req.out = (d.path / "out").string();
  auto refused = [&](walfmt::ErrorCode code, const std::string& message) {
    auto r = walcut::recovery::Restore(cc, *layout, req);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == code);
    CHECK(r.status().message() == message);
    CHECK_FALSE(fs::exists(req.out));
  };
  auto edit_manifest = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json m = nlohmann::json::parse(ReadAll(manifest));
    edit(m);
    WriteAll(manifest, m.dump(2));
  };

  SECTION("the restore serves as a base of the later cut as it is") {
    req.base = r1;
    auto r = walcut::recovery::Restore(cc, *layout, req);
    REQUIRE(r.ok());
    CHECK(r->base.kind == walcut::recovery::BaseKind::kRestored);
    CHECK(r->base.cut == k1);
  }
  SECTION("a manifest.json that is not a restore's") {
    edit_manifest([](nlohmann::json& m) { m["schema"] = "walcut.something-else/1"; });
    req.base = r1;
    refused(walfmt::ErrorCode::kCorruption, manifest + ": not a walcut restore manifest");
  }
  SECTION("a forced restore") {
    edit_manifest([](nlohmann::json& m) { m["forced"] = true; });
    req.base = r1;
    refused(walfmt::ErrorCode::kInvalidArgument,
            r1 + ": a forced restore of a cut that was not consistent cannot serve as a base");
  }
  SECTION("a restore of the cut itself, not of one before it") {
    req.cut = k1;
    req.base = r1;
    refused(walfmt::ErrorCode::kInvalidArgument,
            fmt::format("base {} is a restore of cut {}, not before cut {}", r1, k1, k1));
  }
  SECTION("a restore of a cut this WAL does not hold") {
    edit_manifest([](nlohmann::json& m) { m["cut"] = 0; });
    req.base = r1;
    refused(walfmt::ErrorCode::kInvalidArgument,
            fmt::format("base {} restored cut 0, which is not a consistent cut of this WAL", r1));
  }
  SECTION("a name that is neither a snapshot nor a restore") {
    req.base = "no-such-base";
    refused(walfmt::ErrorCode::kNotFound,
            fmt::format("base 'no-such-base': no snapshot {} and no restore output (manifest.json) at that path",
                        (fs::path(layout->dir) / "snapshots" / "no-such-base").string()));
  }

  // The full snapshot, copied to a directory given by its path.
  const fs::path full = d.path / "full";
  fs::copy(fs::path(o.dir) / "snapshots" / snap_name, full);
  const std::string node1 = (full / "node-1.snap").string();
  req.base = full.string();
  SECTION("the full snapshot serves, given by its path") {
    auto r = walcut::recovery::Restore(cc, *layout, req);
    REQUIRE(r.ok());
    CHECK(r->base.kind == walcut::recovery::BaseKind::kFull);
    CHECK(r->base.name == snap_name);
  }
  SECTION("another node's snapshot file") {
    fs::copy_file(full / "node-0.snap", node1, fs::copy_options::overwrite_existing);
    refused(walfmt::ErrorCode::kCorruption, node1 + ": holds node 0, expected node 1");
  }
  SECTION("a snapshot file of another cluster than the WAL") {
    REQUIRE(cc.nodes[1].cluster_known);
    const uint64_t file_cluster = cc.nodes[1].cluster_id;
    cc.nodes[1].cluster_id ^= 0x5a5a;
    refused(walfmt::ErrorCode::kCorruption, fmt::format("{}: from cluster {:016x}, the WAL is from {:016x}", node1,
                                                        file_cluster, cc.nodes[1].cluster_id));
  }
  SECTION("a snapshot the node's WAL has no SNAPSHOT record of") {
    REQUIRE(cc.nodes[1].snapshots.size() == 1);
    const std::string at = cc.nodes[1].snapshots[0].at.ToString();
    cc.nodes[1].snapshots.clear();
    refused(walfmt::ErrorCode::kCorruption,
            fmt::format("{}: node 1's WAL has no SNAPSHOT({}) record at {}", node1, snap_name, at));
  }
  SECTION("a snapshot whose fingerprint is not the one its SNAPSHOT record says") {
    REQUIRE(cc.nodes[1].snapshots.size() == 1);
    walcut::cut::SnapshotMark& mark = cc.nodes[1].snapshots[0];
    const uint64_t file_fp = mark.fingerprint;
    mark.fingerprint ^= 1;
    refused(walfmt::ErrorCode::kCorruption,
            fmt::format("{}: fingerprint {:016x}, the SNAPSHOT record at {} says {:016x}", node1, file_fp,
                        mark.at.ToString(), mark.fingerprint));
  }
}

TEST_CASE("ChooseBaseFromSummaries: a cut the WAL does not hold, and a pruned WAL with no snapshot before the cut",
          "[recovery][restore]") {
  walcut::cut::ClusterCuts cc;
  cc.nodes.resize(2);
  for (uint32_t i = 0; i < 2; ++i) cc.nodes[i].node = i;
  cc.nodes[1].pruned = true;
  cc.nodes[1].wal_start = walfmt::Lsn{3, 0};
  walcut::cut::NodeCut nc;
  nc.cut_id = 4;
  nc.started = nc.finished = true;
  nc.start = walfmt::Lsn{5, 0x40};
  nc.finish = walfmt::Lsn{5, 0x80};
  walcut::cut::GlobalCut g;
  g.cut_id = 4;
  g.nodes = {&nc, &nc};
  cc.cuts.push_back(g);

  auto none = walcut::recovery::ChooseBaseFromSummaries(cc, 9, nullptr);
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().code() == walfmt::ErrorCode::kNotFound);
  CHECK(none.status().message() == "cut 9 is not in the WAL");

  // The whole WAL present: genesis serves.
  auto genesis = walcut::recovery::ChooseBaseFromSummaries(cc, 4, nullptr);
  REQUIRE(genesis.ok());
  CHECK(genesis->base == "genesis");

  cc.pruned = true;
  auto pruned = walcut::recovery::ChooseBaseFromSummaries(cc, 4, nullptr);
  REQUIRE_FALSE(pruned.ok());
  CHECK(pruned.status().code() == walfmt::ErrorCode::kInvalidArgument);
  CHECK(pruned.status().message() ==
        "cut 4 cannot be restored from this WAL alone: node 1's WAL starts at 3/00000000 (segments before it were "
        "removed) and no full snapshot every node's WAL still holds precedes the cut; give --base with an earlier "
        "restore output");
}

TEST_CASE("Restore and WriteRestore refuse an output that is a dangling symbolic link", "[recovery][restore]") {
  walcut::test::ScratchDir d("restore-dangling");
  fs::create_directories(d.path);
  walcut::node::ClusterOptions o;
  o.dir = (d.path / "cluster").string();
  o.seed = 3;
  o.nodes = 3;
  o.txs = 200;
  o.cuts = 2;
  REQUIRE(walcut::node::RunCluster(o).ok());
  walcut::cut::ClusterCuts cc = walcut::test::LoadCuts(o.dir);
  auto layout = walcut::cut::FindClusterLayout(o.dir);
  REQUIRE(layout.ok());
  REQUIRE_FALSE(cc.cuts.empty());
  walcut::recovery::RestoreRequest req;
  req.cluster_dir = o.dir;
  req.cut = cc.cuts.front().cut_id;
  REQUIRE(cc.cuts.front().status == walcut::cut::CutStatus::kConsistent);
  // exists() follows the link and finds nothing; the output path is taken all the same.
  const fs::path link = d.path / "out";
  fs::create_symlink(d.path / "nowhere", link);
  REQUIRE_FALSE(fs::exists(link));
  req.out = link.string();
  auto r = walcut::recovery::Restore(cc, *layout, req);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == walfmt::ErrorCode::kInvalidArgument);
  CHECK(r.status().message() == req.out + ": already exists; refusing to overwrite");
  CHECK_FALSE(fs::exists(d.path / "nowhere"));

  // Restored in memory (no output directory), then written over the link.
  req.out.clear();
  auto mem = walcut::recovery::Restore(cc, *layout, req);
  REQUIRE(mem.ok());
  const auto st = walcut::recovery::WriteRestore(*mem, link.string());
  CHECK(st.code() == walfmt::ErrorCode::kInvalidArgument);
  CHECK(st.message() == link.string() + ": already exists; refusing to overwrite");
  CHECK_FALSE(fs::exists(d.path / "nowhere"));
}
