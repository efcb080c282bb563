// MakeVerdict, VerdictFromJson, RestorePart and AssembleParts refusals: each names what does not fit.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cut/cuts.h"
#include "cut_support.h"
#include "node/cluster.h"
#include "recovery/part.h"
#include "recovery/verdict.h"
#include "walfmt/cluster_layout.h"
#include "walfmt/snapshot.h"

namespace fs = std::filesystem;
using nlohmann::json;
using walcut::recovery::MakeVerdict;
using walcut::recovery::VerdictOptions;

namespace {

std::string Slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void Refused(const walfmt::Result<walcut::recovery::Verdict>& r, walfmt::ErrorCode code, const std::string& message) {
  CHECK_FALSE(r.ok());
  CHECK(r.status().code() == code);
  CHECK(r.status().message() == message);
}

// 3 nodes, 4 cuts, one full snapshot between them.
void RunWithSnapshot(const std::string& dir) {
  walcut::node::ClusterOptions o;
  o.dir = dir;
  o.seed = 5;
  o.nodes = 3;
  o.backups = 1;
  o.txs = 800;
  o.cuts = 4;
  o.full_snapshot_at_tx = 500;
  o.segment_bytes = 64 * 1024;
  REQUIRE(walcut::node::RunCluster(o).ok());
}

}  // namespace

TEST_CASE("MakeVerdict refuses a cut, a cluster.json or a base that does not fit the summaries",
          "[recovery][verdict]") {
  walcut::test::ScratchDir d("verdict-refusals");
  RunWithSnapshot(d.path.string());
  walcut::cut::ClusterCuts cc = walcut::test::LoadCuts(d.path.string());
  REQUIRE(cc.snapshots.size() == 1);
  const walcut::cut::SnapshotUse snap = cc.snapshots[0];
  REQUIRE(snap.usable);
  REQUIRE(snap.at.size() == 3);
  const std::string cluster_json = Slurp(d.path / "cluster.json");
  const auto* first = cc.Find(1);
  REQUIRE(first);
  REQUIRE(first->nodes[0]);
  REQUIRE(first->nodes[0]->start < snap.at[0]);

  VerdictOptions vo;
  vo.cluster_json = cluster_json;
  REQUIRE(MakeVerdict(cc, 1, vo).ok());
  Refused(MakeVerdict(cc, 99, vo), walfmt::ErrorCode::kNotFound, "cut 99 is not in the WAL");

  SECTION("a cluster.json that does not parse") {
    vo.cluster_json = "{";
    auto expected = walfmt::ParseClusterInfo("{", "cluster.json");
    REQUIRE_FALSE(expected.ok());
    Refused(MakeVerdict(cc, 1, vo), walfmt::ErrorCode::kInvalidArgument, expected.status().message());
  }
  SECTION("a cluster.json of another cluster") {
    auto info = walfmt::ParseClusterInfo(cluster_json, "cluster.json");
    REQUIRE(info.ok());
    json j = json::parse(cluster_json);
    j["cluster_id"] = fmt::format("{:016x}", info->cluster_id ^ 1);
    vo.cluster_json = j.dump();
    Refused(MakeVerdict(cc, 1, vo), walfmt::ErrorCode::kInvalidArgument,
            fmt::format("cluster.json is cluster {:016x}, the summaries are from cluster {:016x}", info->cluster_id ^ 1,
                        info->cluster_id));
  }
  SECTION("summaries of fewer nodes than cluster.json") {
    std::vector<walcut::cut::NodeSummary> two(cc.nodes.begin(), cc.nodes.begin() + 2);
    auto cc2 = walcut::cut::Reconstruct(std::move(two));
    REQUIRE(cc2.ok());
    Refused(MakeVerdict(*cc2, 1, vo), walfmt::ErrorCode::kInvalidArgument,
            "cluster.json describes 3 nodes, the summaries 2");
  }
  SECTION("a base the WAL does not record") {
    vo.base = "nosuch";
    Refused(MakeVerdict(cc, 1, vo), walfmt::ErrorCode::kNotFound,
            "base 'nosuch': the WAL records no full snapshot of that name");
  }
  SECTION("a base taken after the cut's CUT_START") {
    vo.base = snap.name;
    Refused(MakeVerdict(cc, 1, vo), walfmt::ErrorCode::kInvalidArgument,
            fmt::format("base {} was taken on node 0 at {}, after CUT_START(1) at {}", snap.name, snap.at[0].ToString(),
                        first->nodes[0]->start.ToString()));
  }
  SECTION("a base that cannot serve") {
    cc.snapshots[0].usable = false;
    cc.snapshots[0].why = "its record is damaged on node 2";
    vo.base = snap.name;
    Refused(MakeVerdict(cc, 1, vo), walfmt::ErrorCode::kInvalidArgument,
            fmt::format("base {} cannot serve: its record is damaged on node 2", snap.name));
  }
}

TEST_CASE("VerdictFromJson refuses what is not JSON, not a verdict, or lacks a field", "[recovery][verdict]") {
  Refused(walcut::recovery::VerdictFromJson("[1, 2]", "v.json"), walfmt::ErrorCode::kInvalidArgument,
          "v.json: not JSON");
  Refused(walcut::recovery::VerdictFromJson("{\"cut\":", "v.json"), walfmt::ErrorCode::kInvalidArgument,
          "v.json: not JSON");
  Refused(walcut::recovery::VerdictFromJson(R"({"schema": "walcut.summary/1"})", "v.json"),
          walfmt::ErrorCode::kInvalidArgument,
          fmt::format("v.json: not a walcut verdict (schema is not {})", walcut::recovery::kVerdictSchema));
  Refused(walcut::recovery::VerdictFromJson(fmt::format(R"({{"schema": "{}"}})", walcut::recovery::kVerdictSchema),
                                            "v.json"),
          walfmt::ErrorCode::kInvalidArgument, "v.json: field 'id': missing");
}

TEST_CASE(
    "RestorePart refuses a verdict node without the cut's markers, a WAL directory without segments, and a "
    "full base without its file",
    "[recovery][verdict]") {
  walcut::test::ScratchDir d("part-refusals");
  RunWithSnapshot(d.path.string());
  walcut::cut::ClusterCuts cc = walcut::test::LoadCuts(d.path.string());
  REQUIRE(cc.snapshots.size() == 1);
  const uint64_t k = cc.cuts.back().cut_id;
  REQUIRE(cc.cuts.back().status == walcut::cut::CutStatus::kConsistent);
  VerdictOptions vo;
  vo.base = cc.snapshots[0].name;
  auto made = MakeVerdict(cc, k, vo);
  INFO(made.status().message());
  REQUIRE(made.ok());
  walcut::recovery::Verdict v = *made;
  walcut::recovery::PartRequest req;
  req.verdict = &v;
  req.node = 0;
  req.wal_dir = (d.path / "node-0" / "wal").string();
  req.base_dir = (d.path / "snapshots" / v.base_name).string();
  req.out = (d.path / "part-0").string();
  auto refused = [&](walfmt::ErrorCode code, const std::string& message) {
    auto r = walcut::recovery::RestorePart(req);
    CHECK_FALSE(r.ok());
    CHECK(r.status().code() == code);
    CHECK(r.status().message() == message);
    CHECK_FALSE(fs::exists(req.out));
  };
  // The request as made restores: each section breaks one thing.
  req.dry_run = true;
  REQUIRE(walcut::recovery::RestorePart(req).ok());
  req.dry_run = false;

  SECTION("no CUT_START on the node") {
    v.nodes[0].started = false;
    refused(walfmt::ErrorCode::kInvalidArgument,
            fmt::format("cut {} has no CUT_START on node 0: there is nothing to restore that node to", k));
  }
  SECTION("no CUT_FINISH on the node") {
    v.nodes[0].finished = false;
    refused(walfmt::ErrorCode::kInvalidArgument, fmt::format("cut {} has no CUT_FINISH on node 0", k));
  }
  SECTION("a WAL directory without segments") {
    req.wal_dir = (d.path / "empty-wal").string();
    fs::create_directories(req.wal_dir);
    refused(walfmt::ErrorCode::kNotFound, req.wal_dir + ": no WAL segments");
  }
  SECTION("a full base without a base directory") {
    req.base_dir.clear();
    refused(
        walfmt::ErrorCode::kInvalidArgument,
        fmt::format("the verdict's base is full snapshot {}: give the directory holding its node-0.snap", v.base_name));
  }
  SECTION("a base directory without the node's file") {
    req.base_dir = (d.path / "no-base").string();
    fs::create_directories(req.base_dir);
    const std::string file = (fs::path(req.base_dir) / "node-0.snap").string();
    // A path that names nothing: kNotFound (exit 2), naming the file.
    refused(walfmt::ErrorCode::kNotFound,
            fmt::format("{}: no such file (the base file of node 0: full snapshot {})", file, v.base_name));
  }
}

TEST_CASE("AssembleParts refuses no parts, an output that exists, and a part that is not a per-node restore",
          "[recovery][verdict]") {
  walcut::test::ScratchDir d("assemble-refusals");
  const fs::path empty = d.path / "empty";
  fs::create_directories(empty);
  const fs::path garbled = d.path / "garbled";
  fs::create_directories(garbled);
  std::ofstream(garbled / "manifest.json") << "[1, 2";
  const fs::path listed = d.path / "listed";
  fs::create_directories(listed);
  std::ofstream(listed / "manifest.json") << "[1, 2]";
  const std::string missing = (d.path / "missing").string();
  const std::string out = (d.path / "out").string();
  auto refused = [&](const std::vector<std::string>& parts, const std::string& o, walfmt::ErrorCode code,
                     const std::string& message) {
    auto r = walcut::recovery::AssembleParts(parts, o);
    CHECK_FALSE(r.ok());
    CHECK(r.status().code() == code);
    CHECK(r.status().message() == message);
  };
  refused({}, out, walfmt::ErrorCode::kInvalidArgument, "no parts to assemble");
  refused({missing}, out, walfmt::ErrorCode::kNotFound, missing + ": no such directory");
  refused({empty.string()}, out, walfmt::ErrorCode::kInvalidArgument,
          empty.string() + ": not a per-node restore (no manifest.json)");
  refused({garbled.string()}, out, walfmt::ErrorCode::kInvalidArgument,
          (garbled / "manifest.json").string() + ": not JSON");
  refused({listed.string()}, out, walfmt::ErrorCode::kInvalidArgument,
          (listed / "manifest.json").string() + ": not JSON");
  // OUT is refused before any part is read.
  refused({missing}, empty.string(), walfmt::ErrorCode::kInvalidArgument,
          empty.string() + ": already exists; refusing to overwrite");
  CHECK_FALSE(fs::exists(out));
}
