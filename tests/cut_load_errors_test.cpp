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
  // Pruned, with a snapshot and a finding: every part of the file is there.
  s.pruned = true;
  s.wal_start = walfmt::Lsn{1, 0};
  s.wal_start_time_us = 5;
  walcut::cut::SnapshotMark snap;
  snap.name = "full-1";
  s.snapshots.push_back(snap);
  walcut::cut::Finding f;
  f.check = walcut::cut::Check::kShape;
  f.node = 1;
  f.cut = 1;
  f.message = "node 1: something";
  s.findings.push_back(f);
  const std::string good = walcut::cut::SummaryToJson(s);
  REQUIRE(walcut::cut::SummaryFromJson(good, "s.json").ok());
  using nlohmann::json;
  struct Case {
    const char* what;
    std::function<void(json&)> edit;
    std::string error;
  };
  const std::vector<Case> cases = {
      {"schema missing", [](json& j) { j.erase("schema"); }, "s.json: field 'schema': missing"},
      {"records missing", [](json& j) { j.erase("records"); }, "s.json: field 'records': missing"},
      {"other schema", [](json& j) { j["schema"] = "walcut.summary/9"; },
       "s.json: not a walcut summary (schema is not walcut.summary/1)"},
      {"top level array", [](json& j) { j = json::array(); },
       "s.json: field '(document)': expected an object, found []"},
      {"segment not an object", [](json& j) { j["segments"][0] = 5; },
       "s.json: field 'segments[0]': expected an object, found 5"},
      {"compressed not a boolean", [](json& j) { j["segments"][0]["compressed"] = "yes"; },
       "s.json: field 'segments[0].compressed': expected true or false, found \"yes\""},
      {"file not a string", [](json& j) { j["segments"][0]["file"] = 3; },
       "s.json: field 'segments[0].file': expected a string, found 3"},
      {"note not a string", [](json& j) { j["notes"][0] = 3; }, "s.json: field 'notes[0]': expected a string, found 3"},
      {"end not a position", [](json& j) { j["end"] = "x"; },
       "s.json: field 'end': \"x\" is not a position (SEGMENT/OFFSET in hex)"},
      {"tx not an id", [](json& j) { j["cuts"][0]["before"][0]["tx"] = "zz"; },
       "s.json: field 'cuts[0].before[0].tx': \"zz\" is not a transaction id NODE:SEQ"},
      {"segments not an array", [](json& j) { j["segments"] = json::object(); },
       "s.json: field 'segments': expected an array, found {}"},
      {"epoch after 9999", [](json& j) { j["epoch_unix_us"] = walfmt::kMaxUnixMicros + 1; },
       fmt::format("s.json: field 'epoch_unix_us': {} is after 9999-12-31T23:59:59.999999Z",
                   walfmt::kMaxUnixMicros + 1)},
      {"cut end unknown", [](json& j) { j["cuts"][0]["end"] = "later"; },
       "s.json: field 'cuts[0].end': \"later\" is not a known cut end"},
      // Fields the writer omits when false, 0 or empty may be absent, never mistyped.
      {"restarted not a boolean", [](json& j) { j["cuts"][0]["restarted"] = 1; },
       "s.json: field 'cuts[0].restarted': expected true or false, found 1"},
      {"rolled_back not a boolean", [](json& j) { j["cuts"][0]["before"][0]["rolled_back"] = "no"; },
       "s.json: field 'cuts[0].before[0].rolled_back': expected true or false, found \"no\""},
      {"finding cut not a number", [](json& j) { j["findings"][0]["cut"] = "2"; },
       "s.json: field 'findings[0].cut': expected an unsigned integer, found \"2\""},
      {"notes not an array", [](json& j) { j["notes"] = "a note"; },
       "s.json: field 'notes': expected an array, found \"a note\""},
      // Fields the writer always writes, once read as 0, "" or false when missing.
      {"wal_dir missing", [](json& j) { j.erase("wal_dir"); }, "s.json: field 'wal_dir': missing"},
      {"wal_start_time_us missing", [](json& j) { j.erase("wal_start_time_us"); },
       "s.json: field 'wal_start_time_us': missing"},
      {"compressed missing", [](json& j) { j["segments"][0].erase("compressed"); },
       "s.json: field 'segments[0].compressed': missing"},
      {"peak_in_flight missing", [](json& j) { j.erase("peak_in_flight"); }, "s.json: field 'peak_in_flight': missing"},
      {"committed_before missing", [](json& j) { j["snapshots"][0].erase("committed_before"); },
       "s.json: field 'snapshots[0].committed_before': missing"},
      {"shared_before missing", [](json& j) { j["snapshots"][0].erase("shared_before"); },
       "s.json: field 'snapshots[0].shared_before': missing"},
      {"findings_dropped missing", [](json& j) { j.erase("findings_dropped"); },
       "s.json: field 'findings_dropped': missing"},
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
