// Regressions for what the fuzz targets found in walfmt's parsers
// (fuzz/README.md, "Findings"); each input that failed is also kept in
// fuzz/corpus/<target>/finding-*.
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "walfmt/cluster_layout.h"

using namespace walfmt;
using nlohmann::json;

namespace {

// The smallest cluster.json the parser accepts: one node, one partition.
json MinimalCluster() {
  return json::parse(R"({"format": "walcut-cluster", "format_version": 1, "cluster_id": 1, "seed": 1,
    "nodes": 1, "backups": 0, "key_hash": "fnv1a64 % partitions",
    "partitions": [{"id": 0, "primary": 0, "backups": []}],
    "node_dirs": [{"id": 0, "wal_dir": "node-0/wal"}],
    "parameters": {"workload": "bank", "accounts": 1, "ring_keys": 0, "initial_balance": 5},
    "initial_bank_total": 5,
    "full_snapshots": [{"name": "s", "dir": "snapshots/s", "at_tx": 1, "time_us": 1,
      "nodes": [{"node": 0, "file": "node-0.snap", "wal_position": "0/40", "fingerprint": "0000000000000000"}]}]})");
}

}  // namespace

TEST_CASE("cluster.json: a string shown in an error is escaped, so the error stays one line", "[cluster_layout]") {
  REQUIRE(ParseClusterInfo(MinimalCluster().dump(), "c.json").ok());
  // fuzz input finding-newline-in-error.json: "format": "walcut\ncluster"
  // gave a two-line error. Every field whose value an error quotes:
  const std::string odd = "a\"b\nc";
  const std::string shown = R"("a\"b\nc")";
  struct Case {
    json::json_pointer at;
    std::string expect;
  } cases[] = {
      {json::json_pointer("/format"), "field 'format': expected \"walcut-cluster\", found " + shown},
      {json::json_pointer("/key_hash"), "field 'key_hash': expected \"fnv1a64 % partitions\", found " + shown},
      {json::json_pointer("/parameters/workload"),
       "field 'parameters.workload': expected bank, cycle or mixed, found " + shown},
      {json::json_pointer("/node_dirs/0/wal_dir"),
       "field 'node_dirs[0].wal_dir': expected a relative path inside the cluster directory, found \"/\\n\""},
      {json::json_pointer("/full_snapshots/0/nodes/0/wal_position"),
       "field 'full_snapshots[0].nodes[0].wal_position': " + shown + " is not a position (SEGMENT/OFFSET in hex)"},
      {json::json_pointer("/full_snapshots/0/nodes/0/fingerprint"),
       "field 'full_snapshots[0].nodes[0].fingerprint': " + shown + " is not 16 lower-case hex digits"},
  };
  for (const Case& c : cases) {
    json doc = MinimalCluster();
    doc[c.at] = c.at.to_string() == "/node_dirs/0/wal_dir" ? std::string("/\n") : odd;
    auto r = ParseClusterInfo(doc.dump(), "c.json");
    INFO(c.at.to_string());
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message() == "c.json: " + c.expect);
  }
  // A snapshot name listed twice.
  json doc = MinimalCluster();
  doc["full_snapshots"][0]["name"] = odd;
  doc["full_snapshots"].push_back(doc["full_snapshots"][0]);
  auto r = ParseClusterInfo(doc.dump(), "c.json");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message() == "c.json: field 'full_snapshots[1].name': " + shown + " is listed twice");
}
