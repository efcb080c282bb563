// Snapshot directories (loading, every way one can be wrong, where the
// cluster description comes from) and the comparison of two of them.
#include <filesystem>

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "recovery/diff.h"
#include "recovery/state_set.h"
#include "recovery_support.h"
#include "walfmt/snapshot.h"

namespace fs = std::filesystem;
using namespace walcut::recovery;
using namespace walcut::recovery::testing;

namespace {

// Writes DIR/node-<i>.snap for each state.
void WriteSet(const std::string& dir, const std::vector<NodeState>& states, uint64_t cluster_id = 0xABCD,
              const std::string& name = "hand") {
  fs::create_directories(dir);
  for (uint32_t i = 0; i < states.size(); ++i) {
    walfmt::SnapshotFile s;
    s.node_id = i;
    s.cluster_id = cluster_id;
    s.wal_position = walfmt::Lsn{1, 0x40 + i};
    s.name = name;
    s.entries = states[i];
    REQUIRE(walfmt::WriteSnapshotFile(fmt::format("{}/node-{}.snap", dir, i), s).ok());
  }
}

std::vector<NodeState> ThreeNodes() { return {{{"a", "1"}, {"b", "2"}}, {{"c", "3"}}, {}}; }

walfmt::Status LoadError(const std::string& dir, const LoadOptions& o = {}) {
  auto r = LoadStateSet(dir, o);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find('\n') == std::string::npos);
  return r.status();
}

}  // namespace

TEST_CASE("state set: a directory of node files loads by node id", "[recovery][state_set]") {
  TempDir t("ss");
  const std::string dir = t.str() + "/s";
  WriteSet(dir, ThreeNodes());
  WriteAll(dir + "/manifest.json", "{}");  // other files are not node files
  WriteAll(dir + "/node-x.snap", "");
  WriteAll(dir + "/node-01.snap", "");
  auto r = LoadStateSet(dir);
  INFO(r.status().message());
  REQUIRE(r.ok());
  REQUIRE(r->nodes.size() == 3);
  CHECK(r->dir == dir);
  for (uint32_t i = 0; i < 3; ++i) {
    CHECK(r->nodes[i].node_id == i);
    CHECK(r->nodes[i].entries == ThreeNodes()[i]);
    CHECK(r->nodes[i].fingerprint == walfmt::StateFingerprint(ThreeNodes()[i]));
    CHECK(r->file_bytes[i] == fs::file_size(fmt::format("{}/node-{}.snap", dir, i)));
  }
  const auto states = StatesOf(*r);
  REQUIRE(states.size() == 3);
  CHECK(states[1] == &r->nodes[1].entries);
  CHECK(IsSnapshotDir(dir));
  CHECK_FALSE(IsSnapshotDir(t.str()));
  CHECK(LoadStateSet(dir, {3, 0xABCD, "x"}).ok());
}

TEST_CASE("state set: every way a directory can be wrong", "[recovery][state_set]") {
  TempDir t("ss-bad");
  const std::string dir = t.str() + "/s";
  WriteSet(dir, ThreeNodes());

  SECTION("no such directory") {
    const auto st = LoadError(t.str() + "/nope");
    CHECK(st.code() == walfmt::ErrorCode::kNotFound);
    CHECK(st.message() == t.str() + "/nope: no such directory");
  }
  SECTION("a file, not a directory") {
    const auto st = LoadError(dir + "/node-0.snap");
    CHECK(st.code() == walfmt::ErrorCode::kNotFound);
    CHECK_THAT(st.message(), Catch::EndsWith("not a directory"));
  }
  SECTION("a directory without node files") {
    const auto st = LoadError(t.str());
    CHECK(st.code() == walfmt::ErrorCode::kNotFound);
    CHECK(st.message() == t.str() + ": not a snapshot directory (no node-<i>.snap files)");
  }
  SECTION("a gap in the node files") {
    fs::remove(dir + "/node-1.snap");
    const auto st = LoadError(dir);
    CHECK(st.code() == walfmt::ErrorCode::kNotFound);
    CHECK(st.message() == dir + "/node-1.snap: missing (the directory holds node files up to node-2.snap)");
  }
  SECTION("fewer or more nodes than the cluster has") {
    auto st = LoadError(dir, {4, std::nullopt, "c/cluster.json"});
    CHECK(st.code() == walfmt::ErrorCode::kNotFound);
    CHECK(st.message() == dir + "/node-3.snap: missing (the cluster has 4 nodes in c/cluster.json)");
    st = LoadError(dir, {2, std::nullopt, "c/cluster.json"});
    CHECK(st.code() == walfmt::ErrorCode::kInvalidArgument);
    CHECK(st.message() == dir + ": 3 node files, but the cluster has 2 nodes in c/cluster.json");
  }
  SECTION("another cluster than expected") {
    const auto st = LoadError(dir, {3, 0x1234, "c/cluster.json"});
    CHECK(st.code() == walfmt::ErrorCode::kInvalidArgument);
    CHECK(st.message() == dir +
                              "/node-0.snap: belongs to cluster 000000000000abcd, not to cluster "
                              "0000000000001234 of c/cluster.json");
  }
  SECTION("a damaged file: the file and what is wrong") {
    const std::string path = dir + "/node-1.snap";
    std::string bytes = ReadAll(path);
    bytes[bytes.size() - walfmt::kSnapshotTrailerSize - 1] ^= 0x10;  // the last byte of the last value
    WriteAll(path, bytes);
    const auto st = LoadError(dir);
    CHECK(st.code() == walfmt::ErrorCode::kCorruption);
    CHECK_THAT(st.message(), Catch::StartsWith(path + ": snapshot: body checksum"));
  }
  SECTION("a truncated file") {
    const std::string path = dir + "/node-2.snap";
    WriteAll(path, ReadAll(path).substr(0, 30));
    const auto st = LoadError(dir);
    CHECK(st.code() == walfmt::ErrorCode::kCorruption);
    CHECK_THAT(st.message(), Catch::StartsWith(path + ": snapshot of 30 bytes"));
  }
  SECTION("a file in the wrong place: its header names another node") {
    fs::copy_file(dir + "/node-2.snap", dir + "/node-1.snap", fs::copy_options::overwrite_existing);
    const auto st = LoadError(dir);
    CHECK(st.code() == walfmt::ErrorCode::kCorruption);
    CHECK(st.message() == dir + "/node-1.snap: header names node 2, expected 1");
  }
  SECTION("a node file beyond the node limit") {
    WriteAll(dir + "/node-1024.snap", "");
    const auto st = LoadError(dir);
    CHECK(st.code() == walfmt::ErrorCode::kInvalidArgument);
    CHECK(st.message() == dir + "/node-1024.snap: node id 1024 is beyond the limit of 1024 nodes");
    fs::remove(dir + "/node-1024.snap");
    WriteAll(dir + "/node-1023.snap", "");  // within the limit: the gap is what is wrong
    CHECK(LoadError(dir).message() ==
          dir + "/node-3.snap: missing (the directory holds node files up to node-1023.snap)");
  }
  SECTION("files of two clusters") {
    WriteSet(t.str() + "/other", ThreeNodes(), 0x9999);
    fs::copy_file(t.str() + "/other/node-2.snap", dir + "/node-2.snap", fs::copy_options::overwrite_existing);
    const auto st = LoadError(dir);
    CHECK(st.code() == walfmt::ErrorCode::kCorruption);
    CHECK(st.message() ==
          dir + "/node-2.snap: header names cluster 0000000000009999, node-0.snap cluster 000000000000abcd");
  }
}

TEST_CASE("state set: the cluster description of a full snapshot, a restore output, or neither",
          "[recovery][state_set][cluster]") {
  TempDir t("ss-find");
  const SmallCluster c = MakeSmallCluster(t.str(), walcut::node::Workload::kBank, 9);

  SECTION("a full snapshot: cluster.json two levels up, with its entry") {
    for (const std::string& d : {c.snapshot_dir, c.snapshot_dir + "/"}) {
      auto src = FindClusterInfoFor(d);
      INFO(src.status().message());
      REQUIRE(src.ok());
      CHECK_FALSE(src->from_manifest);
      CHECK(src->path == c.dir + "/cluster.json");
      REQUIRE(src->full_snapshot);
      CHECK(src->full_snapshot->name == c.run.snapshots[0].name);
      CHECK(src->info.nodes == 3);
    }
    auto set = LoadStateSet(c.snapshot_dir);
    REQUIRE(set.ok());
    CHECK(set->nodes.size() == 3);
    for (uint32_t n = 0; n < 3; ++n) {
      CHECK(set->nodes[n].fingerprint == c.run.snapshots[0].fingerprint[n]);
      CHECK(set->nodes[n].wal_position == c.run.snapshots[0].wal_position[n]);
    }
  }
  SECTION("a restore output: the copy of cluster.json in manifest.json") {
    const std::string out = t.str() + "/restored";
    fs::copy(c.snapshot_dir, out);
    nlohmann::json manifest{{"cut", 2}, {"cluster", nlohmann::json::parse(ReadAll(c.dir + "/cluster.json"))}};
    WriteAll(out + "/manifest.json", manifest.dump(2));
    auto src = FindClusterInfoFor(out);
    INFO(src.status().message());
    REQUIRE(src.ok());
    CHECK(src->from_manifest);
    CHECK(src->path == out + "/manifest.json");
    CHECK_FALSE(src->full_snapshot);
    CHECK(src->info.cluster_id == walfmt::LoadClusterInfo(c.dir)->cluster_id);

    manifest["cluster"].erase("nodes");
    WriteAll(out + "/manifest.json", manifest.dump(2));
    auto bad = FindClusterInfoFor(out);
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.status().message() == out + "/manifest.json (cluster): field 'nodes': missing");
    WriteAll(out + "/manifest.json", "{\"cut\": 2}");
    bad = FindClusterInfoFor(out);
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.status().message() == out + "/manifest.json: field 'cluster': missing");
    WriteAll(out + "/manifest.json", "{\"cut\": 2, \"cluster\": \"c/cluster.json\"}");
    bad = FindClusterInfoFor(out);
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.status().code() == walfmt::ErrorCode::kCorruption);
    CHECK(bad.status().message() ==
          out + "/manifest.json: field 'cluster': expected an object, found \"c/cluster.json\"");
    WriteAll(out + "/manifest.json", "{\"cut\": 2,");
    bad = FindClusterInfoFor(out);
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.status().code() == walfmt::ErrorCode::kCorruption);
    CHECK_THAT(bad.status().message(), Catch::StartsWith(out + "/manifest.json: not valid JSON: "));
  }
  SECTION("a copy elsewhere: not found, unless the cluster is named") {
    const std::string copy = t.str() + "/copy";
    fs::copy(c.snapshot_dir, copy);
    auto src = FindClusterInfoFor(copy);
    REQUIRE_FALSE(src.ok());
    CHECK(src.status().code() == walfmt::ErrorCode::kNotFound);
    CHECK_THAT(src.status().message(), Catch::Contains("--cluster"));
    auto named = ClusterInfoFromDir(c.dir, copy);
    REQUIRE(named.ok());
    CHECK_FALSE(named->full_snapshot);  // "copy" is not a snapshot name
  }
}

TEST_CASE("diff: equal sets, and each kind of difference with complete counts", "[recovery][diff]") {
  TempDir t("diff");
  const auto base = ThreeNodes();
  WriteSet(t.str() + "/a", base);
  WriteSet(t.str() + "/same", base, 0xABCD, "another name");  // names do not matter, states do
  auto changed = base;
  changed[0]["b"] = "20";    // changed
  changed[0].erase("a");     // only in A
  changed[0]["aa"] = "new";  // only in B
  changed[2]["z"] = "26";    // only in B, on another node
  WriteSet(t.str() + "/b", changed);
  WriteSet(t.str() + "/two", {base[0], base[1]});
  auto a = LoadStateSet(t.str() + "/a");
  auto same = LoadStateSet(t.str() + "/same");
  auto b = LoadStateSet(t.str() + "/b");
  auto two = LoadStateSet(t.str() + "/two");
  REQUIRE((a.ok() && same.ok() && b.ok() && two.ok()));

  auto eq = DiffStates(*a, *same);
  REQUIRE(eq.ok());
  CHECK(eq->equal());
  CHECK(eq->nodes_differing() == 0);
  for (const auto& n : eq->nodes) CHECK(n.fingerprint_a == n.fingerprint_b);

  auto d = DiffStates(*a, *b);
  REQUIRE(d.ok());
  CHECK_FALSE(d->equal());
  CHECK(d->nodes_differing() == 2);
  const NodeDiff& n0 = d->nodes[0];
  CHECK(n0.only_a_count == 1);
  CHECK(n0.only_b_count == 1);
  CHECK(n0.changed_count == 1);
  REQUIRE(n0.only_a.size() == 1);
  CHECK(n0.only_a[0].key == "a");
  CHECK(n0.only_a[0].value == "1");
  REQUIRE(n0.only_b.size() == 1);
  CHECK(n0.only_b[0].key == "aa");
  REQUIRE(n0.changed.size() == 1);
  CHECK(n0.changed[0].key == "b");
  CHECK(n0.changed[0].a == "2");
  CHECK(n0.changed[0].b == "20");
  CHECK(n0.fingerprint_a == walfmt::StateFingerprint(base[0]));
  CHECK(n0.fingerprint_b == walfmt::StateFingerprint(changed[0]));
  CHECK(n0.entries_a == 2);
  CHECK(n0.entries_b == 2);
  CHECK_FALSE(n0.truncated());
  CHECK(d->nodes[1].equal());
  CHECK(d->nodes[2].only_b_count == 1);

  SECTION("a limit lists the first keys in key order; the counts stay complete") {
    DiffOptions o;
    o.limit = 2;
    auto l = DiffStates(*a, *b, o);
    REQUIRE(l.ok());
    const NodeDiff& m = l->nodes[0];
    CHECK(m.only_a.size() == 1);  // "a"
    CHECK(m.only_b.size() == 1);  // "aa"
    CHECK(m.changed.empty());     // "b" is the third
    CHECK(m.changed_count == 1);
    CHECK(m.truncated());
    CHECK(m.differences() == 3);
  }
  SECTION("different node counts are not comparable") {
    auto bad = DiffStates(*a, *two);
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.status().code() == walfmt::ErrorCode::kInvalidArgument);
    CHECK(bad.status().message() == t.str() + "/a holds 3 nodes, " + t.str() + "/two holds 2: not comparable");
  }
}

TEST_CASE("diff: one node, large and disjoint", "[recovery][diff]") {
  NodeState a, b;
  for (int i = 0; i < 1000; ++i) a[fmt::format("k{:04}", i)] = "v";
  for (int i = 500; i < 1500; ++i) b[fmt::format("k{:04}", i)] = i % 100 == 0 ? "w" : "v";
  DiffOptions o;
  o.limit = 10;
  const NodeDiff d = DiffNode(4, a, b, o);
  CHECK(d.node == 4);
  CHECK(d.only_a_count == 500);
  CHECK(d.only_b_count == 500);
  CHECK(d.changed_count == 5);  // 500, 600, 700, 800, 900
  CHECK(d.only_a.size() == 10);
  CHECK(d.only_b.empty());
  CHECK(d.only_a.front().key == "k0000");
  CHECK(DiffNode(0, a, a).equal());
}
