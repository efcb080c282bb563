// cluster.json, the one reader and writer (walfmt/cluster_layout.h): what
// the writer writes parses back to what it was given; every missing or
// malformed field is one error naming the file and the field; a cluster
// directory's nodes are found the same way by every caller.
#include "walfmt/cluster_layout.h"

#include <sys/stat.h>

#include <filesystem>

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "test_files.h"
#include "walfmt/file_io.h"

using namespace walfmt;
using nlohmann::json;
using walcut::testing::TempDir;
using walcut::testing::WriteFileBytes;
namespace fs = std::filesystem;

namespace {

// A cluster.json as the runtime writes it (trimmed to what matters), 3 nodes,
// 1 backup, 6 partitions, one full snapshot.
json SampleDoc() {
  json j;
  j["schema"] = "walcut.cluster/2";
  j["cluster_id"] = "ffffffffffffffc5";  // 18446744073709551557: above 2^53 and 2^63
  j["seed"] = 7;
  j["nodes"] = 3;
  j["backups"] = 1;
  j["key_hash"] = "fnv1a64 % partitions";
  const Topology topo(3, 1, 6);
  json parts = json::array();
  for (uint32_t p = 0; p < 6; ++p) {
    parts.push_back({{"id", p}, {"primary", topo.PrimaryOfPartition(p)}, {"backups", topo.BackupsOf(p % 3)}});
  }
  j["partitions"] = parts;
  j["node_dirs"] = json::array();
  for (int n = 0; n < 3; ++n) j["node_dirs"].push_back({{"id", n}, {"wal_dir", fmt::format("node-{}/wal", n)}});
  j["parameters"] = {{"workload", "mixed"}, {"accounts", 50}, {"ring_keys", 20}, {"initial_balance", 1000}};
  j["initial_bank_total"] = 50000;
  json snap{{"name", "full-100"}, {"dir", "snapshots/full-100"}, {"at_tx", 100}, {"time_us", 123456}};
  for (int n = 0; n < 3; ++n) {
    snap["nodes"].push_back({{"node", n},
                             {"file", fmt::format("node-{}.snap", n)},
                             {"wal_position", fmt::format("{:X}/{:08X}", n, 0x40 + n)},
                             {"fingerprint", fmt::format("{:016x}", 0xF00D0000ull + n)}});
  }
  j["full_snapshots"] = json::array({snap});
  return j;
}

// The same document as older walcut wrote it: "format"/"format_version",
// cluster_id a decimal number.
json SampleDocV1() {
  json j = SampleDoc();
  j.erase("schema");
  j["format"] = "walcut-cluster";
  j["format_version"] = 1;
  j["cluster_id"] = 18446744073709551557ull;
  return j;
}

std::string ParseError(const json& doc) {
  auto r = ParseClusterInfo(doc.dump(2), "/x/cluster.json");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == ErrorCode::kCorruption);
  CHECK(r.status().message().find('\n') == std::string::npos);  // one line
  return r.status().message();
}

}  // namespace

TEST_CASE("cluster.json: the sample parses field by field", "[cluster_layout]") {
  auto r = ParseClusterInfo(SampleDoc().dump(), "/x/cluster.json");
  INFO(r.status().message());
  REQUIRE(r.ok());
  const ClusterInfo& ci = *r;
  CHECK(ci.origin == "/x/cluster.json");
  CHECK(ci.cluster_id == 18446744073709551557ull);
  CHECK(ci.seed == 7);
  CHECK(ci.nodes == 3);
  CHECK(ci.backups == 1);
  CHECK(ci.partitions == 6);
  CHECK(ci.workload == Workload::kMixed);
  CHECK(ci.has_bank());
  CHECK(ci.has_cycle());
  CHECK(ci.accounts == 50);
  CHECK(ci.ring_keys == 20);
  CHECK(ci.initial_balance == 1000);
  CHECK(ci.initial_bank_total == 50000);
  CHECK(ci.node_wal_dirs == std::vector<std::string>{"node-0/wal", "node-1/wal", "node-2/wal"});
  REQUIRE(ci.full_snapshots.size() == 1);
  const FullSnapshotInfo& s = ci.full_snapshots[0];
  CHECK(s.name == "full-100");
  CHECK(s.dir == "snapshots/full-100");
  CHECK(s.at_tx == 100);
  CHECK(s.time_us == 123456);
  REQUIRE(s.nodes.size() == 3);
  CHECK(s.nodes[2].file == "node-2.snap");
  CHECK(s.nodes[2].wal_position == Lsn{2, 0x42});
  CHECK(s.nodes[2].fingerprint == 0xF00D0002ull);
  CHECK(ci.FindSnapshot("full-100") == &s);
  CHECK(ci.FindSnapshot("nope") == nullptr);
  const Topology topo = ci.topology();
  CHECK(topo.nodes() == 3);
  CHECK(topo.partitions() == 6);
  CHECK(topo.PrimaryOf("acct/000001") == Topology(3, 1, 6).PrimaryOf("acct/000001"));
}

TEST_CASE("cluster.json: no full_snapshots means none", "[cluster_layout]") {
  json doc = SampleDoc();
  doc.erase("full_snapshots");
  auto r = ParseClusterInfo(doc.dump(), "c.json");
  REQUIRE(r.ok());
  CHECK(r->full_snapshots.empty());
}

TEST_CASE("cluster.json: every missing field is named", "[cluster_layout]") {
  const std::vector<std::pair<std::string, std::string>> fields = {
      {"/schema", "schema"},
      {"/cluster_id", "cluster_id"},
      {"/seed", "seed"},
      {"/nodes", "nodes"},
      {"/backups", "backups"},
      {"/key_hash", "key_hash"},
      {"/partitions", "partitions"},
      {"/partitions/4/primary", "partitions[4].primary"},
      {"/partitions/2/backups", "partitions[2].backups"},
      {"/node_dirs", "node_dirs"},
      {"/node_dirs/1/wal_dir", "node_dirs[1].wal_dir"},
      {"/parameters", "parameters"},
      {"/parameters/workload", "parameters.workload"},
      {"/parameters/accounts", "parameters.accounts"},
      {"/parameters/ring_keys", "parameters.ring_keys"},
      {"/parameters/initial_balance", "parameters.initial_balance"},
      {"/initial_bank_total", "initial_bank_total"},
      {"/full_snapshots/0/name", "full_snapshots[0].name"},
      {"/full_snapshots/0/nodes", "full_snapshots[0].nodes"},
      {"/full_snapshots/0/nodes/1/wal_position", "full_snapshots[0].nodes[1].wal_position"},
      {"/full_snapshots/0/nodes/2/fingerprint", "full_snapshots[0].nodes[2].fingerprint"},
  };
  for (const auto& [pointer, field] : fields) {
    json doc = SampleDoc();
    const json::json_pointer ptr(pointer);
    doc[ptr.parent_pointer()].erase(ptr.back());
    INFO(pointer);
    const std::string msg = ParseError(doc);
    CHECK(msg == fmt::format("/x/cluster.json: field '{}': missing", field));
  }
}

TEST_CASE("cluster.json: malformed values are named with what was found", "[cluster_layout]") {
  struct Case {
    std::string pointer;
    json value;
    std::string expect;  // the whole message after "/x/cluster.json: "
  };
  const std::vector<Case> cases = {
      {"/schema", "walcut.cluster/3", "field 'schema': expected \"walcut.cluster/2\", found \"walcut.cluster/3\""},
      {"/cluster_id", 18446744073709551557ull, "field 'cluster_id': expected a string, found 18446744073709551557"},
      {"/cluster_id", "c5", "field 'cluster_id': \"c5\" is not 16 lower-case hex digits"},
      {"/cluster_id", "fffffffffffffffg", "field 'cluster_id': \"fffffffffffffffg\" is not 16 lower-case hex digits"},
      {"/nodes", "3", "field 'nodes': expected an unsigned integer, found \"3\""},
      {"/nodes", -3, "field 'nodes': expected an unsigned integer, found -3"},
      {"/nodes", 2.5, "field 'nodes': expected an unsigned integer, found 2.5"},
      {"/nodes", 0, "field 'nodes': expected at least 1, found 0"},
      {"/nodes", 5000, "field 'nodes': 5000 is larger than the limit 1024"},
      {"/backups", 3, "field 'backups': 3 backups need more than 3 nodes"},
      {"/key_hash", "crc32 % partitions",
       "field 'key_hash': expected \"fnv1a64 % partitions\", found \"crc32 % partitions\""},
      {"/partitions", json::array(), "field 'partitions': no partitions"},
      {"/partitions", 6, "field 'partitions': expected an array, found 6"},
      {"/partitions/1/primary", 2,
       "field 'partitions[1].primary': expected node 1 (fnv1a64 % partitions over 3 nodes), found 2"},
      {"/partitions/1/backups", json::array({0}), "field 'partitions[1].backups': expected [2], found [0]"},
      {"/partitions/3/id", 7, "field 'partitions[3].id': expected 3, found 7"},
      {"/node_dirs/2/id", 0, "field 'node_dirs[2].id': expected 2, found 0"},
      {"/parameters/workload", "ledger",
       "field 'parameters.workload': expected bank, cycle or mixed, found \"ledger\""},
      {"/parameters/accounts", 0, "field 'parameters.accounts': 0 accounts for the mixed workload"},
      {"/parameters/ring_keys", 1000001, "field 'parameters.ring_keys': 1000001 is larger than the limit 1000000"},
      {"/parameters/initial_balance", "1000",
       "field 'parameters.initial_balance': expected an integer, found \"1000\""},
      {"/initial_bank_total", 9223372036854775808ull,
       "field 'initial_bank_total': 9223372036854775808 does not fit a signed 64-bit integer"},
      {"/full_snapshots/0/name", "", "field 'full_snapshots[0].name': empty"},
      {"/full_snapshots/0/nodes/1/wal_position", "1:40",
       "field 'full_snapshots[0].nodes[1].wal_position': \"1:40\" is not a position (SEGMENT/OFFSET in hex)"},
      {"/full_snapshots/0/nodes/0/fingerprint", "xyz",
       "field 'full_snapshots[0].nodes[0].fingerprint': \"xyz\" is not 16 lower-case hex digits"},
      {"/full_snapshots/0/nodes/1/node", 2, "field 'full_snapshots[0].nodes[1].node': expected 1, found 2"},
      {"/full_snapshots/0/nodes/1/segments_deleted", "2",
       "field 'full_snapshots[0].nodes[1].segments_deleted': expected an unsigned integer, found \"2\""},
      {"/wal_retention", "keep", "field 'wal_retention': is 'keep', expected 'after-snapshot'"},
      {"/wal_retention", 1, "field 'wal_retention': expected a string, found 1"},
  };
  for (const auto& c : cases) {
    json doc = SampleDoc();
    doc[json::json_pointer(c.pointer)] = c.value;
    INFO(c.pointer << " = " << c.value.dump());
    CHECK(ParseError(doc) == "/x/cluster.json: " + c.expect);
  }
  SECTION("a snapshot listed with too few nodes") {
    json doc = SampleDoc();
    doc["full_snapshots"][0]["nodes"].erase(2);
    CHECK(ParseError(doc) == "/x/cluster.json: field 'full_snapshots[0].nodes': 2 entries, expected one per node (3)");
  }
  SECTION("a snapshot listed twice") {
    json doc = SampleDoc();
    doc["full_snapshots"].push_back(doc["full_snapshots"][0]);
    CHECK(ParseError(doc) == "/x/cluster.json: field 'full_snapshots[1].name': \"full-100\" is listed twice");
  }
  SECTION("not an object") {
    CHECK(ParseError(json::array({1, 2})) == "/x/cluster.json: field '(document)': expected an object, found [1,2]");
  }
}

TEST_CASE("cluster.json: version 1, as older walcut wrote it, still reads", "[cluster_layout]") {
  auto v1 = ParseClusterInfo(SampleDocV1().dump(), "/x/cluster.json");
  INFO(v1.status().message());
  REQUIRE(v1.ok());
  auto v2 = ParseClusterInfo(SampleDoc().dump(), "/x/cluster.json");
  REQUIRE(v2.ok());
  CHECK(v1->cluster_id == 18446744073709551557ull);
  CHECK(v1->cluster_id == v2->cluster_id);
  CHECK(v1->full_snapshots[0].nodes[2].fingerprint == v2->full_snapshots[0].nodes[2].fingerprint);
  // Its own keys are checked as before.
  json doc = SampleDocV1();
  doc["format"] = "something-else";
  CHECK(ParseError(doc) == "/x/cluster.json: field 'format': expected \"walcut-cluster\", found \"something-else\"");
  doc = SampleDocV1();
  doc["format_version"] = 2;
  CHECK(ParseError(doc) ==
        "/x/cluster.json: field 'format_version': version 2 is not supported (this walcut reads 1, "
        "and \"schema\": \"walcut.cluster/2\")");
  doc = SampleDocV1();
  doc["cluster_id"] = "ffffffffffffffc5";
  CHECK(ParseError(doc) ==
        "/x/cluster.json: field 'cluster_id': expected an unsigned integer, found \"ffffffffffffffc5\"");
  // The copy walcut embeds in what it writes is made current, other members kept.
  json v1doc = SampleDocV1();
  v1doc["complete"] = true;
  const json cur = json::parse(CurrentClusterJsonText(v1doc.dump()));
  CHECK(cur["schema"] == "walcut.cluster/2");
  CHECK(cur["cluster_id"] == "ffffffffffffffc5");
  CHECK(cur.find("format") == cur.end());
  CHECK(cur.find("format_version") == cur.end());
  CHECK(cur["complete"] == true);
  const std::string current = SampleDoc().dump();
  CHECK(CurrentClusterJsonText(current) == current);  // already current: unchanged
}

TEST_CASE("cluster.json: a name of bytes that are not UTF-8 is written escaped and reads back", "[cluster_layout]") {
  auto parsed = ParseClusterInfo(SampleDoc().dump(), "sample");
  REQUIRE(parsed.ok());
  ClusterInfo in = parsed.value();
  in.full_snapshots[0].name = "full-\xff\xfe\\x";  // not UTF-8, and a backslash
  const std::string text = ClusterJsonText(in, ClusterRunRecord{});
  const json j = json::parse(text);  // valid JSON
  CHECK(j["full_snapshots"][0]["name"] == "full-\\xff\\xfe\\x5cx");
  auto back = ParseClusterInfo(text, "w");
  INFO(back.status().message());
  REQUIRE(back.ok());
  CHECK(back->full_snapshots[0].name == in.full_snapshots[0].name);
}

TEST_CASE("cluster.json: text that is not JSON", "[cluster_layout]") {
  for (const std::string text : {"", "{", "{\"nodes\": 3,}", "nodes: 3"}) {
    auto r = ParseClusterInfo(text, "/y/cluster.json");
    INFO(text);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == ErrorCode::kCorruption);
    CHECK_THAT(r.status().message(), Catch::StartsWith("/y/cluster.json: not valid JSON: parse error"));
  }
}

TEST_CASE("cluster.json: LoadClusterInfo reads a directory's file, says when there is none", "[cluster_layout]") {
  TempDir t;
  auto none = LoadClusterInfo(t.path());
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().code() == ErrorCode::kNotFound);
  CHECK_THAT(none.status().message(), Catch::Contains(t.path() + "/cluster.json"));
  WriteFileBytes(t.path() + "/cluster.json", SampleDoc().dump(2));
  auto ok = LoadClusterInfo(t.path());
  REQUIRE(ok.ok());
  CHECK(ok->origin == t.path() + "/cluster.json");
  CHECK(ok->nodes == 3);
  WriteFileBytes(t.path() + "/cluster.json", "{\"format\": \"walcut-cluster\"");
  auto bad = LoadClusterInfo(t.path());
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.status().message(), Catch::StartsWith(t.path() + "/cluster.json: not valid JSON"));
}

namespace {

// What the runtime records for a 3-node cluster with one full snapshot.
ClusterInfo SampleInfo() {
  auto r = ParseClusterInfo(SampleDoc().dump(), "sample");
  REQUIRE(r.ok());
  return r.value();
}

}  // namespace

TEST_CASE("cluster.json: what the writer writes parses back to what it was given", "[cluster_layout]") {
  const ClusterInfo in = SampleInfo();
  ClusterRunRecord run;
  run.txs = 3000;
  run.concurrency = 32;
  run.crashes.push_back({2, 128500, 5000});
  run.complete = true;
  const std::string text = ClusterJsonText(in, run);
  CHECK(text.back() == '\n');
  auto r = ParseClusterInfo(text, "w");
  INFO(r.status().message());
  REQUIRE(r.ok());
  CHECK(r->cluster_id == in.cluster_id);
  CHECK(r->seed == in.seed);
  CHECK(r->nodes == in.nodes);
  CHECK(r->backups == in.backups);
  CHECK(r->partitions == in.partitions);
  CHECK(r->workload == in.workload);
  CHECK(r->accounts == in.accounts);
  CHECK(r->ring_keys == in.ring_keys);
  CHECK(r->initial_balance == in.initial_balance);
  CHECK(r->initial_bank_total == in.initial_bank_total);
  CHECK(r->node_wal_dirs == in.node_wal_dirs);
  REQUIRE(r->full_snapshots.size() == 1);
  CHECK(r->full_snapshots[0].dir == "snapshots/full-100");
  CHECK(r->full_snapshots[0].nodes[2].wal_position == in.full_snapshots[0].nodes[2].wal_position);
  CHECK(r->full_snapshots[0].nodes[2].fingerprint == in.full_snapshots[0].nodes[2].fingerprint);
  // The run record is written for people and scripts, in sorted key order.
  const json j = json::parse(text);
  CHECK(j["schema"] == "walcut.cluster/2");
  CHECK(j["cluster_id"] == "ffffffffffffffc5");
  CHECK(j["parameters"]["txs"] == 3000);
  CHECK(j["faults"]["crashes"][0]["at_us"] == 128500);
  CHECK(j["complete"] == true);
  CHECK(j["base"] == "genesis");
  CHECK(text.rfind("{\n  \"backups\": 1,\n", 0) == 0);

  TempDir d;
  REQUIRE(WriteClusterJson(d.path(), in, run).ok());
  auto loaded = LoadClusterInfo(d.path());
  REQUIRE(loaded.ok());
  CHECK(loaded->origin == d.path() + "/cluster.json");
  CHECK(std::distance(fs::directory_iterator(d.path()), fs::directory_iterator()) == 1);  // no temporary left
}

TEST_CASE("cluster.json: fields this walcut does not know are ignored", "[cluster_layout]") {
  json doc = SampleDoc();
  doc["retention"] = {{"keep_segments", 4}};
  doc["parameters"]["something_new"] = "x";
  doc["node_dirs"][1]["archive_dir"] = "node-1/archive";
  auto r = ParseClusterInfo(doc.dump(), "c.json");
  INFO(r.status().message());
  REQUIRE(r.ok());
  CHECK(r->node_wal_dirs[1] == "node-1/wal");
}

TEST_CASE("cluster.json: a WAL directory must stay inside the cluster directory", "[cluster_layout]") {
  for (const std::string bad : {"", "/var/wal", "../other/node-0/wal", "node-0/../../x"}) {
    json doc = SampleDoc();
    doc["node_dirs"][0]["wal_dir"] = bad;
    INFO(bad);
    CHECK(ParseError(doc) == fmt::format("/x/cluster.json: field 'node_dirs[0].wal_dir': expected a relative path "
                                         "inside the cluster directory, found \"{}\"",
                                         bad));
  }
}

TEST_CASE("cluster.json: read with a bound, never from a FIFO", "[cluster_layout]") {
  TempDir d;
  const std::string p = d.path() + "/cluster.json";
  WriteFileBytes(p, "{}");
  fs::resize_file(p, kMaxJsonFileBytes + 1);  // sparse
  auto big = LoadClusterInfo(d.path());
  REQUIRE_FALSE(big.ok());
  CHECK(big.status().code() == ErrorCode::kIo);
  CHECK(big.status().message().find(p) == 0);
  fs::remove(p);
  REQUIRE(::mkfifo(p.c_str(), 0600) == 0);
  auto fifo = LoadClusterInfo(d.path());
  REQUIRE_FALSE(fifo.ok());
  CHECK(fifo.status().code() == ErrorCode::kIo);
}

TEST_CASE("cluster layout: node directories from cluster.json, else by name", "[cluster_layout]") {
  CHECK(NodeDirName(3) == "node-3");
  CHECK(NodeWalDirName(3) == "node-3/wal");
  CHECK(NodeIdFromDirName("node-12") == 12u);
  for (const char* bad : {"node-", "node-x", "node-1a", "nodes-1", "node--1", "wal"})
    CHECK_FALSE(NodeIdFromDirName(bad));

  TempDir d;
  auto none = FindClusterLayout(d.path() + "/missing");
  CHECK(none.status().code() == ErrorCode::kNotFound);
  auto empty = FindClusterLayout(d.path());
  CHECK(empty.status().code() == ErrorCode::kNotFound);

  // Without cluster.json: node-0/wal, node-1/wal, ... up to the first gap.
  for (const char* sub : {"node-0/wal", "node-1/wal", "node-3/wal"}) fs::create_directories(d.path() + "/" + sub);
  auto byname = FindClusterLayout(d.path());
  REQUIRE(byname.ok());
  CHECK_FALSE(byname->has_cluster_json);
  CHECK(byname->cluster_id == 0);
  CHECK(byname->wal_dirs == std::vector<std::string>{d.path() + "/node-0/wal", d.path() + "/node-1/wal"});

  // With one: what it lists, joined to the directory.
  json doc = SampleDoc();
  doc["node_dirs"][2]["wal_dir"] = "elsewhere/two";
  WriteFileBytes(d.path() + "/cluster.json", doc.dump());
  auto listed = FindClusterLayout(d.path());
  REQUIRE(listed.ok());
  CHECK(listed->has_cluster_json);
  CHECK(listed->cluster_id == 18446744073709551557ull);
  CHECK(listed->wal_dirs ==
        std::vector<std::string>{d.path() + "/node-0/wal", d.path() + "/node-1/wal", d.path() + "/elsewhere/two"});

  // A damaged one is an error, not a reason to guess.
  doc["node_dirs"].erase(1);
  WriteFileBytes(d.path() + "/cluster.json", doc.dump());
  auto damaged = FindClusterLayout(d.path());
  REQUIRE_FALSE(damaged.ok());
  CHECK(damaged.status().code() == ErrorCode::kCorruption);
  CHECK(damaged.status().message() ==
        d.path() + "/cluster.json: field 'node_dirs': 2 entries, expected one per node (3)");
}
