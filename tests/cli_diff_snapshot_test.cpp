// End-to-end tests of walcut diff and walcut snapshot check/show on clusters
// written by walcut run: exit codes, the node and key named, and inputs left
// untouched.
#include <filesystem>
#include <map>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_support.h"
#include "walfmt/snapshot.h"
#include "walfmt/topology.h"

namespace fs = std::filesystem;
using walcut::test::Slurp;
using walcut::test::Spit;
using walcut::test::TempDir;
using walcut::test::Walcut;

namespace {

// Every file below dir with its bytes and mtime.
std::map<std::string, std::string> Tree(const std::string& dir) {
  std::map<std::string, std::string> m;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    const auto mtime = e.last_write_time().time_since_epoch().count();
    m[e.path().string()] = std::to_string(mtime) + ":" + Slurp(e.path().string());
  }
  return m;
}

struct Cluster {
  std::string dir;
  std::string snap;  // DIR/snapshots/<name>
  nlohmann::json info;
};

Cluster RunCluster(const std::string& parent, const std::string& args) {
  Cluster c;
  c.dir = parent + "/c";
  auto r = Walcut("run " + c.dir + " " + args);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  c.info = nlohmann::json::parse(Slurp(c.dir + "/cluster.json"));
  REQUIRE(c.info["full_snapshots"].size() == 1);
  c.snap = c.dir + "/" + c.info["full_snapshots"][0]["dir"].get<std::string>();
  return c;
}

walfmt::Topology TopologyOf(const nlohmann::json& info) {
  return walfmt::Topology(info["nodes"].get<uint32_t>(), info["backups"].get<uint32_t>(),
                          static_cast<uint32_t>(info["partitions"].size()));
}

// Rewrites one value of node `n`'s file through the codec, so the file passes
// its own checks and only the contents tell.
void Rewrite(const std::string& snap_dir, uint32_t n, const std::string& key, const std::string& value) {
  const std::string path = snap_dir + "/node-" + std::to_string(n) + ".snap";
  auto s = walfmt::ReadSnapshotFile(path);
  REQUIRE(s.ok());
  REQUIRE(s->entries.count(key) == 1);
  s->entries[key] = value;
  REQUIRE(walfmt::WriteSnapshotFile(path, *s).ok());
}

}  // namespace

TEST_CASE("diff: a snapshot equals itself, a modified copy differs by the key", "[cli][diff]") {
  TempDir t;
  const Cluster c = RunCluster(t.path, "--txs 300 --seed 4 --cuts 2 --full-snapshot-at 120");
  const auto before = Tree(c.dir);

  auto same = Walcut("diff " + c.snap + " " + c.snap);
  INFO(same.out << same.err);
  CHECK(same.code == 0);
  CHECK_THAT(same.out, Catch::Contains("EQUAL (3 nodes)"));
  CHECK(same.err.empty());

  const std::string copy = t.path + "/copy";
  fs::copy(c.snap, copy);
  CHECK(Walcut("diff " + c.snap + " " + copy).code == 0);
  // The third key node 1 holds.
  auto n1snap = walfmt::ReadSnapshotFile(copy + "/node-1.snap");
  REQUIRE(n1snap.ok());
  REQUIRE(n1snap->entries.size() > 3);
  const std::string key = std::next(n1snap->entries.begin(), 2)->first;
  Rewrite(copy, 1, key, "123456");
  const auto copy_before = Tree(copy);
  auto differ = Walcut("diff " + c.snap + " " + copy);
  INFO(differ.out << differ.err);
  CHECK(differ.code == 1);
  CHECK_THAT(differ.out, Catch::Contains("node 1: differs: 0 only in A, 0 only in B, 1 changed"));
  CHECK_THAT(differ.out, Catch::Contains("~ " + key + ": ") && Catch::Contains(" -> 123456"));
  CHECK_THAT(differ.out, Catch::Contains("DIFFERENT (1 of 3 nodes differ"));

  auto json = Walcut("diff --format json " + c.snap + " " + copy);
  REQUIRE(json.code == 1);
  const auto doc = nlohmann::json::parse(json.out);
  CHECK(doc["schema"] == "walcut.diff/1");
  CHECK(doc["equal"] == false);
  CHECK(doc["summary"]["changed"] == 1);
  CHECK(doc["summary"]["exit_code"] == 1);
  const auto& n1 = doc["nodes"][1];
  CHECK(n1["equal"] == false);
  CHECK(n1["changed_count"] == 1);
  CHECK(n1["changed"][0]["key"] == key);
  CHECK(n1["changed"][0]["b"] == "123456");
  CHECK(n1["fingerprint_a"] != n1["fingerprint_b"]);
  CHECK(doc["nodes"][0]["equal"] == true);

  CHECK(Tree(c.dir) == before);
  CHECK(Tree(copy) == copy_before);
}

TEST_CASE("diff: --limit lists that many keys per node, counts stay complete", "[cli][diff]") {
  TempDir t;
  const Cluster c = RunCluster(t.path, "--txs 200 --seed 6 --cuts 1 --full-snapshot-at 100 --workload cycle");
  const std::string copy = t.path + "/copy";
  fs::copy(c.snap, copy);
  // Change every key of node 0.
  auto s = walfmt::ReadSnapshotFile(copy + "/node-0.snap");
  REQUIRE(s.ok());
  const size_t keys = s->entries.size();
  REQUIRE(keys > 5);
  for (auto& [k, v] : s->entries) v += "x";
  REQUIRE(walfmt::WriteSnapshotFile(copy + "/node-0.snap", *s).ok());
  auto r = Walcut("diff --limit 3 --format json " + c.snap + " " + copy);
  REQUIRE(r.code == 1);
  const auto doc = nlohmann::json::parse(r.out);
  CHECK(doc["nodes"][0]["changed_count"] == keys);
  CHECK(doc["nodes"][0]["changed"].size() == 3);
  CHECK(doc["nodes"][0]["truncated"] == true);
  auto text = Walcut("diff -n 3 " + c.snap + " " + copy);
  CHECK_THAT(text.out, Catch::Contains(fmt::format("... {} more", keys - 3)));
}

TEST_CASE(
    "diff: a corrupt file is exit 1 (a finding, as ExitForStatus maps corruption) naming it, usage errors are exit 2",
    "[cli][diff]") {
  TempDir t;
  const Cluster c = RunCluster(t.path, "--txs 200 --seed 8 --cuts 1 --full-snapshot-at 100");
  const std::string copy = t.path + "/copy";
  fs::copy(c.snap, copy);

  SECTION("a flipped byte") {
    const std::string victim = copy + "/node-2.snap";
    std::string bytes = Slurp(victim);
    bytes[bytes.size() / 2] ^= 0x01;
    Spit(victim, bytes);
    const auto before = Tree(copy);
    auto r = Walcut("diff " + c.snap + " " + copy);
    INFO(r.out << r.err);
    CHECK(r.code == 1);
    CHECK_THAT(r.err, Catch::StartsWith("walcut: " + victim + ": snapshot: "));
    CHECK(walcut::test::Lines(r.err).size() == 1);
    CHECK(Tree(copy) == before);
  }
  SECTION("a missing directory") {
    auto r = Walcut("diff " + c.snap + " " + t.path + "/nope");
    CHECK(r.code == 2);
    CHECK(r.err == "walcut: " + t.path + "/nope: no such directory\n");
  }
  SECTION("not a snapshot directory") {
    auto r = Walcut("diff " + c.dir + " " + c.snap);
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains("not a snapshot directory"));
  }
  SECTION("node counts that differ") {
    fs::remove(copy + "/node-2.snap");
    auto r = Walcut("diff " + c.snap + " " + copy);
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains("holds 3 nodes") && Catch::Contains("holds 2: not comparable"));
  }
  SECTION("a missing argument") { CHECK(Walcut("diff " + c.snap).code == 2); }
}

TEST_CASE("snapshot check: a runtime full snapshot passes, a rewritten balance names node and key", "[cli][snapshot]") {
  TempDir t;
  const Cluster c = RunCluster(t.path, "--txs 300 --seed 12 --cuts 2 --full-snapshot-at 150 --workload mixed");
  const auto before = Tree(c.dir);

  auto ok = Walcut("snapshot check " + c.snap);
  INFO(ok.out << ok.err);
  CHECK(ok.code == 0);
  CHECK_THAT(ok.out, Catch::Contains("checks: placement, bank, cycle, recorded"));
  CHECK_THAT(ok.out, Catch::Contains("OK ("));
  auto okj = Walcut("snapshot check --format json " + c.snap);
  REQUIRE(okj.code == 0);
  const auto ojs = nlohmann::json::parse(okj.out);
  CHECK(ojs["schema"] == "walcut.snapshot.check/1");
  CHECK(ojs["ok"] == true);
  CHECK(ojs["bank"]["total"] == c.info["initial_bank_total"]);
  CHECK(ojs["cycle"]["walked"] == c.info["parameters"]["ring_keys"]);
  CHECK(Walcut("snapshot check --check bank " + c.snap).code == 0);
  CHECK(Walcut("snapshot check --check cycle " + c.snap).code == 0);
  CHECK(Tree(c.dir) == before);

  // A copy outside the cluster, named after the snapshot, with one balance
  // rewritten on its primary: the backup now disagrees, the total is off,
  // and the file no longer matches what cluster.json recorded.
  const walfmt::Topology topo = TopologyOf(c.info);
  const std::string key = "acct/000011";
  const uint32_t primary = topo.PrimaryOf(key);
  const uint32_t backup = topo.BackupOf(primary, 0);
  const std::string name = c.info["full_snapshots"][0]["name"];
  const std::string copy = t.path + "/" + name;
  fs::copy(c.snap, copy);
  auto s = walfmt::ReadSnapshotFile(copy + "/node-" + std::to_string(primary) + ".snap");
  REQUIRE(s.ok());
  const int64_t old_balance = std::stoll(s->entries.at(key));
  Rewrite(copy, primary, key, std::to_string(old_balance + 7));
  const auto copy_before = Tree(copy);

  auto no_cluster = Walcut("snapshot check " + copy);
  CHECK(no_cluster.code == 2);
  CHECK_THAT(no_cluster.err, Catch::Contains("--cluster"));

  auto bad = Walcut("snapshot check " + copy + " --cluster " + c.dir);
  INFO(bad.out << bad.err);
  CHECK(bad.code == 1);
  CHECK_THAT(bad.out, Catch::Contains(fmt::format("FINDING bank.replica-mismatch: node {}: {} = '{}', but its primary "
                                                  "node {} holds '{}'",
                                                  backup, key, old_balance, primary, old_balance + 7)));
  CHECK_THAT(bad.out, Catch::Contains("FINDING bank.total:") && Catch::Contains("(+7)"));
  CHECK_THAT(bad.out,
             Catch::Contains(fmt::format("FINDING recorded: node {}: node-{}.snap has fingerprint", primary, primary)));
  CHECK_THAT(bad.out, Catch::Contains("FAILED (3 findings"));

  auto badj = Walcut("snapshot check --format json --check bank " + copy + " --cluster " + c.dir);
  REQUIRE(badj.code == 1);
  const auto bj = nlohmann::json::parse(badj.out);
  CHECK(bj["ok"] == false);
  CHECK(bj["exit_code"] == 1);
  bool named = false;
  for (const auto& f : bj["findings"]) {
    if (f["check"] == "bank.replica-mismatch") {
      CHECK(f["node"] == backup);
      CHECK(f["peer"] == primary);
      CHECK(f["keys"] == nlohmann::json::array({key}));
      named = true;
    }
  }
  CHECK(named);
  // The ring is intact: checking only the cycle passes except for the recorded fingerprint.
  auto cyc = Walcut("snapshot check --format json --check cycle " + copy + " --cluster " + c.dir);
  CHECK(cyc.code == 1);
  CHECK(nlohmann::json::parse(cyc.out)["findings"].size() == 1);

  CHECK(Tree(c.dir) == before);
  CHECK(Tree(copy) == copy_before);
}

TEST_CASE("snapshot check: a ring rewired on every copy names the sub-ring", "[cli][snapshot]") {
  TempDir t;
  const Cluster c =
      RunCluster(t.path, "--txs 200 --seed 13 --cuts 1 --full-snapshot-at 100 --workload cycle --ring-keys 50");
  // ring/000000 -> ring/000000 on every node that holds it.
  const std::string copy = t.path + "/copy";
  fs::copy(c.snap, copy);
  const walfmt::Topology topo = TopologyOf(c.info);
  for (uint32_t n = 0; n < topo.nodes(); ++n) {
    if (topo.Holds(n, "ring/000000")) Rewrite(copy, n, "ring/000000", "0");
  }
  auto r = Walcut("snapshot check " + copy + " --cluster " + c.dir);
  INFO(r.out << r.err);
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Catch::Contains("FINDING cycle.sub-ring: the walk from ring/000000 returns after 1 of 50 keys: "
                                    "ring/000000 -> ring/000000"));
  CHECK_THAT(r.out, Catch::Contains("FINDING cycle.unreached: 49 of 50 ring keys are never reached"));
  CHECK(Walcut("snapshot check --check bank " + c.snap).code == 2);  // a cycle cluster has no accounts
}

TEST_CASE("snapshot check and show: usage and damage", "[cli][snapshot]") {
  TempDir t;
  const Cluster c = RunCluster(t.path, "--txs 200 --seed 14 --cuts 1 --full-snapshot-at 100");
  auto missing = Walcut("snapshot check " + t.path + "/nope");
  CHECK(missing.code == 2);
  CHECK(missing.err == "walcut: " + t.path + "/nope: no such directory\n");
  CHECK(Walcut("snapshot check --check ledger " + c.snap).code == 2);
  CHECK(Walcut("snapshot").code == 2);
  CHECK(Walcut("snapshot show " + c.dir).code == 2);  // no node files

  const std::string copy = t.path + "/copy";
  fs::copy(c.snap, copy);
  std::string bytes = Slurp(copy + "/node-1.snap");
  bytes[70] ^= 0x40;
  Spit(copy + "/node-1.snap", bytes);
  auto corrupt = Walcut("snapshot check " + copy + " --cluster " + c.dir);
  CHECK(corrupt.code == 1);  // damage is a finding (README, exit codes), as for every command
  CHECK_THAT(corrupt.err, Catch::StartsWith("walcut: " + copy + "/node-1.snap: snapshot:"));
  CHECK(Walcut("snapshot show " + copy).code == 1);

  Spit(t.path + "/c/cluster.json", "{ not json");
  auto badjson = Walcut("snapshot check " + c.snap);
  CHECK(badjson.code == 1);  // a damaged cluster.json is a finding (ExitForStatus: corruption)
  CHECK_THAT(badjson.err, Catch::Contains("cluster.json: not valid JSON"));
}

TEST_CASE("snapshot show: per node counts, fingerprints, positions, --keys lists entries", "[cli][snapshot]") {
  TempDir t;
  const Cluster c = RunCluster(t.path, "--txs 200 --seed 15 --cuts 1 --full-snapshot-at 100 --accounts 30");
  const auto before = Tree(c.dir);
  auto r = Walcut("snapshot show --format json " + c.snap);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const auto doc = nlohmann::json::parse(r.out);
  CHECK(doc["schema"] == "walcut.snapshot.show/1");
  REQUIRE(doc["nodes"].size() == 3);
  uint64_t entries = 0;
  for (uint32_t n = 0; n < 3; ++n) {
    const auto& jn = doc["nodes"][n];
    const auto& rec = c.info["full_snapshots"][0]["nodes"][n];
    CHECK(jn["node"] == n);
    CHECK(jn["fingerprint"] == rec["fingerprint"]);
    CHECK(jn["wal_position"] == rec["wal_position"]);
    CHECK(jn["name"] == c.info["full_snapshots"][0]["name"]);
    CHECK(jn["bytes"] == fs::file_size(c.snap + "/node-" + std::to_string(n) + ".snap"));
    CHECK_FALSE(jn.contains("keys"));
    entries += jn["entries"].get<uint64_t>();
  }
  CHECK(entries == 30 * 2);  // every account on its primary and one backup

  auto one = Walcut("snapshot show --node 2 --keys --format json " + c.snap);
  REQUIRE(one.code == 0);
  const auto j2 = nlohmann::json::parse(one.out);
  REQUIRE(j2["nodes"].size() == 1);
  CHECK(j2["nodes"][0]["node"] == 2);
  CHECK(j2["nodes"][0]["keys"].size() == j2["nodes"][0]["entries"]);

  auto text = Walcut("snapshot show --keys --node 0 --max-bytes 8 " + c.snap);
  REQUIRE(text.code == 0);
  CHECK_THAT(text.out, Catch::Contains("node 0: ") &&
                           Catch::Contains("fingerprint " +
                                           c.info["full_snapshots"][0]["nodes"][0]["fingerprint"].get<std::string>()));
  CHECK_THAT(text.out, Catch::Contains("  acct/000...(+3) = "));
  CHECK(Walcut("snapshot show --node 3 " + c.snap).code == 2);
  CHECK(Tree(c.dir) == before);
}
