// cluster.json: what the runtime writes parses to what it ran; every missing
// or malformed field is one error naming the file and the field.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "recovery/cluster_info.h"
#include "recovery_support.h"

using namespace walcut::recovery;
using namespace walcut::recovery::testing;
using nlohmann::json;

namespace {

// A cluster.json as the runtime writes it (trimmed to what matters), 3 nodes,
// 1 backup, 6 partitions, one full snapshot.
json SampleDoc() {
  json j;
  j["format"] = "walcut-cluster";
  j["format_version"] = 1;
  j["cluster_id"] = 18446744073709551557ull;  // above 2^63: must survive as unsigned
  j["seed"] = 7;
  j["nodes"] = 3;
  j["backups"] = 1;
  j["key_hash"] = "fnv1a64 % partitions";
  const walfmt::Topology topo(3, 1, 6);
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

std::string ParseError(const json& doc) {
  auto r = ParseClusterInfo(doc.dump(2), "/x/cluster.json");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == walfmt::ErrorCode::kCorruption);
  CHECK(r.status().message().find('\n') == std::string::npos);  // one line
  return r.status().message();
}

}  // namespace

TEST_CASE("cluster.json: the sample parses field by field", "[recovery][cluster_info]") {
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
  CHECK(s.nodes[2].wal_position == walfmt::Lsn{2, 0x42});
  CHECK(s.nodes[2].fingerprint == 0xF00D0002ull);
  CHECK(ci.FindSnapshot("full-100") == &s);
  CHECK(ci.FindSnapshot("nope") == nullptr);
  const walfmt::Topology topo = ci.topology();
  CHECK(topo.nodes() == 3);
  CHECK(topo.partitions() == 6);
  CHECK(topo.PrimaryOf("acct/000001") == walfmt::Topology(3, 1, 6).PrimaryOf("acct/000001"));
}

TEST_CASE("cluster.json: no full_snapshots means none", "[recovery][cluster_info]") {
  json doc = SampleDoc();
  doc.erase("full_snapshots");
  auto r = ParseClusterInfo(doc.dump(), "c.json");
  REQUIRE(r.ok());
  CHECK(r->full_snapshots.empty());
}

TEST_CASE("cluster.json: every missing field is named", "[recovery][cluster_info]") {
  const std::vector<std::pair<std::string, std::string>> fields = {
      {"/format", "format"},
      {"/format_version", "format_version"},
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
    CHECK(msg == fmt::format("/x/cluster.json: field \"{}\": missing", field));
  }
}

TEST_CASE("cluster.json: malformed values are named with what was found", "[recovery][cluster_info]") {
  struct Case {
    std::string pointer;
    json value;
    std::string expect;  // the whole message after "/x/cluster.json: "
  };
  const std::vector<Case> cases = {
      {"/format", "something-else", "field \"format\": expected \"walcut-cluster\", found \"something-else\""},
      {"/format_version", 2, "field \"format_version\": version 2 is not supported (this walcut reads 1)"},
      {"/nodes", "3", "field \"nodes\": expected an unsigned integer, found \"3\""},
      {"/nodes", -3, "field \"nodes\": expected an unsigned integer, found -3"},
      {"/nodes", 2.5, "field \"nodes\": expected an unsigned integer, found 2.5"},
      {"/nodes", 0, "field \"nodes\": expected at least 1, found 0"},
      {"/nodes", 5000, "field \"nodes\": 5000 is larger than the limit 1024"},
      {"/backups", 3, "field \"backups\": 3 backups need more than 3 nodes"},
      {"/key_hash", "crc32 % partitions", "field \"key_hash\": expected \"fnv1a64 % partitions\", found \"crc32 % partitions\""},
      {"/partitions", json::array(), "field \"partitions\": no partitions"},
      {"/partitions", 6, "field \"partitions\": expected an array, found 6"},
      {"/partitions/1/primary", 2, "field \"partitions[1].primary\": expected node 1 (fnv1a64 % partitions over 3 nodes), found 2"},
      {"/partitions/1/backups", json::array({0}), "field \"partitions[1].backups\": expected [2], found [0]"},
      {"/partitions/3/id", 7, "field \"partitions[3].id\": expected 3, found 7"},
      {"/node_dirs/2/id", 0, "field \"node_dirs[2].id\": expected 2, found 0"},
      {"/parameters/workload", "ledger", "field \"parameters.workload\": expected bank, cycle or mixed, found \"ledger\""},
      {"/parameters/accounts", 0, "field \"parameters.accounts\": 0 accounts for the mixed workload"},
      {"/parameters/ring_keys", 1000001, "field \"parameters.ring_keys\": 1000001 is larger than the limit 1000000"},
      {"/parameters/initial_balance", "1000", "field \"parameters.initial_balance\": expected an integer, found \"1000\""},
      {"/initial_bank_total", 9223372036854775808ull,
       "field \"initial_bank_total\": 9223372036854775808 does not fit a signed 64-bit integer"},
      {"/full_snapshots/0/name", "", "field \"full_snapshots[0].name\": empty"},
      {"/full_snapshots/0/nodes/1/wal_position", "1:40",
       "field \"full_snapshots[0].nodes[1].wal_position\": \"1:40\" is not a position (SEGMENT/OFFSET in hex)"},
      {"/full_snapshots/0/nodes/0/fingerprint", "xyz",
       "field \"full_snapshots[0].nodes[0].fingerprint\": \"xyz\" is not a 64-bit hex fingerprint"},
      {"/full_snapshots/0/nodes/1/node", 2, "field \"full_snapshots[0].nodes[1].node\": expected 1, found 2"},
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
    CHECK(ParseError(doc) == "/x/cluster.json: field \"full_snapshots[0].nodes\": 2 entries, expected one per node (3)");
  }
  SECTION("a snapshot listed twice") {
    json doc = SampleDoc();
    doc["full_snapshots"].push_back(doc["full_snapshots"][0]);
    CHECK(ParseError(doc) == "/x/cluster.json: field \"full_snapshots[1].name\": \"full-100\" is listed twice");
  }
  SECTION("not an object") {
    CHECK(ParseError(json::array({1, 2})) == "/x/cluster.json: field \"(document)\": expected an object, found [1,2]");
  }
}

TEST_CASE("cluster.json: text that is not JSON", "[recovery][cluster_info]") {
  for (const std::string text : {"", "{", "{\"nodes\": 3,}", "nodes: 3"}) {
    auto r = ParseClusterInfo(text, "/y/cluster.json");
    INFO(text);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == walfmt::ErrorCode::kCorruption);
    CHECK_THAT(r.status().message(), Catch::StartsWith("/y/cluster.json: not valid JSON: parse error"));
  }
}

TEST_CASE("cluster.json: LoadClusterInfo reads a directory's file, says when there is none", "[recovery][cluster_info]") {
  TempDir t("ci");
  auto none = LoadClusterInfo(t.str());
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().code() == walfmt::ErrorCode::kNotFound);
  CHECK_THAT(none.status().message(), Catch::Contains(t.str() + "/cluster.json"));
  WriteAll(t.str() + "/cluster.json", SampleDoc().dump(2));
  auto ok = LoadClusterInfo(t.str());
  REQUIRE(ok.ok());
  CHECK(ok->origin == t.str() + "/cluster.json");
  CHECK(ok->nodes == 3);
  WriteAll(t.str() + "/cluster.json", "{\"format\": \"walcut-cluster\"");
  auto bad = LoadClusterInfo(t.str());
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.status().message(), Catch::StartsWith(t.str() + "/cluster.json: not valid JSON"));
}

TEST_CASE("cluster.json: what the runtime writes is what it ran", "[recovery][cluster_info][cluster]") {
  TempDir t("ci-run");
  const SmallCluster c = MakeSmallCluster(t.str(), walcut::node::Workload::kMixed, 5, 5, 2);
  auto r = LoadClusterInfo(c.dir);
  INFO(r.status().message());
  REQUIRE(r.ok());
  const auto& o = c.run.options;
  CHECK(r->nodes == o.nodes);
  CHECK(r->backups == o.backups);
  CHECK(r->partitions == o.partitions);
  CHECK(r->seed == o.seed);
  CHECK(r->workload == Workload::kMixed);
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
