// The summary loader's refusals: each malformed field named with what is wrong.
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cut/load.h"
#include "cut/summary.h"
#include "scratch_dir.h"
#include "walfmt/duration.h"

TEST_CASE("a malformed summary is refused with the field and what is wrong with it", "[cut]") {
  walcut::cut::NodeSummary s;
  s.node = 1;
  walcut::cut::SegmentInfo seg;
  seg.index = 1;
  seg.file = "00000001.wal";
  s.segments.push_back(seg);
  s.notes.push_back("a note");
  walcut::cut::NodeCut c;
  c.cut_id = 1;
  c.end = walcut::cut::CutEnd::kFinished;
  walcut::cut::TrackedTx t;
  t.tx = walfmt::TxId{1, 7};
  c.before.push_back(t);
  s.cuts.push_back(c);
  const std::string good = walcut::cut::SummaryToJson(s);
  REQUIRE(walcut::cut::SummaryFromJson(good, "s.json").ok());
  using nlohmann::json;
  struct Case {
    const char* what;
    std::function<void(json&)> edit;
    std::string error;
  };
  const std::vector<Case> cases = {
      {"schema missing", [](json& j) { j.erase("schema"); }, "s.json: field '.schema' is missing"},
      {"records missing", [](json& j) { j.erase("records"); }, "s.json: field '.records' is missing"},
      {"other schema", [](json& j) { j["schema"] = "walcut.summary/9"; },
       "s.json: not a walcut summary (schema is not walcut.summary/1)"},
      {"top level array", [](json& j) { j = json::array(); }, "s.json: field '' is not an object"},
      {"segment not an object", [](json& j) { j["segments"][0] = 5; }, "s.json: field 'segments[0]' is not an object"},
      {"compressed not a boolean", [](json& j) { j["segments"][0]["compressed"] = "yes"; },
       "s.json: field 'segments[0].compressed' is not a boolean"},
      {"file not a string", [](json& j) { j["segments"][0]["file"] = 3; },
       "s.json: field 'segments[0].file' is not a string"},
      {"note not a string", [](json& j) { j["notes"][0] = 3; }, "s.json: field 'notes[0]' is not a string"},
      {"end not a position", [](json& j) { j["end"] = "x"; }, "s.json: field '.end' is not a position SEG/OFFSET"},
      {"tx not an id", [](json& j) { j["cuts"][0]["before"][0]["tx"] = "zz"; },
       "s.json: field 'cuts[0].before[0].tx' is not a transaction id NODE:SEQ"},
      {"segments not an array", [](json& j) { j["segments"] = json::object(); },
       "s.json: field '.segments' is not an array"},
      {"epoch after 9999", [](json& j) { j["epoch_unix_us"] = walfmt::kMaxUnixMicros + 1; },
       fmt::format("s.json: field \"epoch_unix_us\": {} is after 9999-12-31T23:59:59.999999Z",
                   walfmt::kMaxUnixMicros + 1)},
  };
  for (const Case& k : cases) {
    DYNAMIC_SECTION(k.what) {
      json j = json::parse(good);
      k.edit(j);
      auto r = walcut::cut::SummaryFromJson(j.dump(), "s.json");
      CHECK_FALSE(r.ok());
      CHECK(r.status().message() == k.error);
    }
  }
  auto r = walcut::cut::SummaryFromJson(good.substr(0, good.size() / 2), "s.json");
  CHECK_FALSE(r.ok());
  CHECK(r.status().message() == "s.json: not JSON");
}

TEST_CASE("LoadInputs refuses no input, a directory among several inputs and a path that does not exist", "[cut]") {
  walcut::test::ScratchDir d("load-inputs");
  std::filesystem::create_directories(d.path);
  const std::string dir = d.path.string();
  const std::string file = (d.path / "s.json").string();
  walcut::cut::NodeSummary s;
  s.node = 0;
  std::ofstream(file) << walcut::cut::SummaryToJson(s);
  auto one = walcut::cut::LoadInputs({file}, {});
  INFO(one.status().message());
  REQUIRE(one.ok());
  struct Case {
    std::vector<std::string> paths;
    walfmt::ErrorCode code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{}, walfmt::ErrorCode::kInvalidArgument, "no input"},
      {{file, dir},
       walfmt::ErrorCode::kInvalidArgument,
       dir + ": a directory among several inputs; give one cluster directory or summary files"},
      {{file, dir + "/nothing.json"}, walfmt::ErrorCode::kNotFound, dir + "/nothing.json: no such file or directory"},
  };
  for (const Case& c : cases) {
    INFO(c.message);
    auto r = walcut::cut::LoadInputs(c.paths, {});
    CHECK_FALSE(r.ok());
    CHECK(r.status().code() == c.code);
    CHECK(r.status().message() == c.message);
  }
}
