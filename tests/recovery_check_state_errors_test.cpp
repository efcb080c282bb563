// The check state file's refusals: each malformed shape refused with why.
#include <functional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "recovery/check.h"

TEST_CASE("a malformed check state file is refused, naming the file and what is wrong", "[recovery][check]") {
  walcut::recovery::CheckState s;
  walcut::recovery::SegmentState seg;
  seg.file = "00000001.wal";
  seg.index = 1;
  seg.size = 4096;
  seg.mtime_ns = 5;
  seg.crc32c = 0xdeadbeef;
  s.nodes[0][1] = seg;
  const std::string good = walcut::recovery::CheckStateToJson(s);
  auto back = walcut::recovery::CheckStateFromJson(good, "state.json");
  REQUIRE(back.ok());
  CHECK(back->nodes.at(0).at(1).crc32c == 0xdeadbeef);
  using nlohmann::json;
  struct Case {
    const char* what;
    std::function<void(json&)> edit;
    std::string why;
  };
  const std::vector<Case> cases = {
      {"an array", [](json& j) { j = json::array(); }, "not a JSON object"},
      {"another schema", [](json& j) { j["schema"] = "walcut.check-state/2"; },
       "field 'schema': \"walcut.check-state/2\" is not \"walcut.check-state/1\""},
      {"no schema", [](json& j) { j.erase("schema"); }, "field 'schema': missing"},
      {"no nodes", [](json& j) { j.erase("nodes"); }, "field 'nodes': missing"},
      {"nodes an object", [](json& j) { j["nodes"] = json::object(); }, "field 'nodes': expected an array, found {}"},
      {"node entry without segments", [](json& j) { j["nodes"][0].erase("segments"); },
       "field 'nodes[0].segments': missing"},
      {"node id negative", [](json& j) { j["nodes"][0]["node"] = -1; },
       "field 'nodes[0].node': expected an unsigned integer, found -1"},
      {"segment without crc32c", [](json& j) { j["nodes"][0]["segments"][0].erase("crc32c"); },
       "field 'nodes[0].segments[0].crc32c': missing"},
      {"segment size a string", [](json& j) { j["nodes"][0]["segments"][0]["size"] = "4096"; },
       "field 'nodes[0].segments[0].size': expected an unsigned integer, found \"4096\""},
      {"segment file a number", [](json& j) { j["nodes"][0]["segments"][0]["file"] = 7; },
       "field 'nodes[0].segments[0].file': expected a string, found 7"},
      {"segment mtime_ns a float", [](json& j) { j["nodes"][0]["segments"][0]["mtime_ns"] = 1.5; },
       "field 'nodes[0].segments[0].mtime_ns': expected an integer, found 1.5"},
      {"crc32c of 7 digits", [](json& j) { j["nodes"][0]["segments"][0]["crc32c"] = "deadbee"; },
       "field 'nodes[0].segments[0].crc32c': \"deadbee\" is not 8 hex digits"},
      {"crc32c not hex", [](json& j) { j["nodes"][0]["segments"][0]["crc32c"] = "deadbeeg"; },
       "field 'nodes[0].segments[0].crc32c': \"deadbeeg\" is not 8 hex digits"},
      {"crc32c with a sign", [](json& j) { j["nodes"][0]["segments"][0]["crc32c"] = "+deadbee"; },
       "field 'nodes[0].segments[0].crc32c': \"+deadbee\" is not 8 hex digits"},
  };
  for (const Case& c : cases) {
    DYNAMIC_SECTION(c.what) {
      json j = json::parse(good);
      c.edit(j);
      auto r = walcut::recovery::CheckStateFromJson(j.dump(), "state.json");
      CHECK_FALSE(r.ok());
      CHECK(r.status().message() == "state.json: not a walcut.check-state/1 state file: " + c.why);
    }
  }
  auto r = walcut::recovery::CheckStateFromJson("{\"schema\":", "state.json");
  CHECK_FALSE(r.ok());
  CHECK(r.status().message() == "state.json: not a walcut.check-state/1 state file: not a JSON object");
}
