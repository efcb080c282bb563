// The artifact manifest and the repository marker are read field by field
// (walfmt::JsonFields): a missing or mistyped field is refused with an error
// naming the file and the field's path, never read as 0 or "". Only what the
// writer omits may be absent: "restore" (synthetic fulls), a node's "wal"
// (increments), "file" (fulls) and "cut_start" (artifacts of a cut), with
// what goes with each.
#include <string>
#include <vector>

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "recovery_support.h"
#include "repo/repository.h"

namespace walcut::repo {
namespace {
using nlohmann::json;
using recovery::testing::TempDir;
using recovery::testing::WriteAll;

ArtifactNode CutEvidence(ArtifactNode n) {
  n.has_cut = true;
  n.cut_start = {3, 0x90};
  n.cut_finish = {3, 0x100};
  n.start_time_us = 10;
  n.finish_time_us = 20;
  n.before = 2;
  return n;
}

// An increment: every node member the writer writes for one (wal, cut evidence).
Manifest Increment() {
  Manifest m;
  m.name = "i-cut-4";
  m.type = "incremental";
  m.source = "wal";
  m.parent = "f-cut-2";
  m.seq = 2;
  m.cluster_id = 0xabcdef0123456789ull;
  m.cut = 4;
  m.time_us = 1234;
  m.verdict = "consistent";
  m.evidence = json{{"status", "consistent"}};
  ArtifactNode n;
  n.has_wal = true;
  n.wal_from = {1, 0x40};
  n.wal_to = {3, 0x100};
  n.first_segment = 1;
  n.last_segment = 3;
  n.segments = {"0000000000000001.wal.zst", "0000000000000002.wal.zst", "0000000000000003.wal.zst"};
  n.continue_from = {3, 0x80};
  m.nodes.push_back(CutEvidence(n));
  m.files.push_back({"node-0/wal/0000000000000001.wal.zst", 10, Xxh3Hex("x")});
  return m;
}

// A synthetic full: a node's snapshot file, cut evidence, the restore's manifest.
Manifest SyntheticFull() {
  Manifest m;
  m.name = "f-cut-2";
  m.type = "full";
  m.source = "restore";
  m.seq = 1;
  m.cluster_id = 7;
  m.cut = 2;
  m.verdict = "consistent";
  ArtifactNode n;
  n.continue_from = {0, 0x80};
  n.snap_file = "node-0.snap";
  n.fingerprint = 0x1234;
  n.entries = 3;
  n.snap_position = {0, 0x60};
  m.nodes.push_back(CutEvidence(n));
  m.files.push_back({"node-0.snap", 10, Xxh3Hex("x")});
  m.restore = json{{"format", "walcut-restore"}};
  return m;
}

// The manifest `doc` as text with a correct self-checksum.
std::string WithChecksum(json doc) {
  const std::string zeros(32, '0');
  doc[kManifestChecksumKey] = zeros;
  std::string text = doc.dump(2) + "\n";
  const std::string key = fmt::format("\n  \"{}\": \"", kManifestChecksumKey);
  const size_t at = text.find(key + zeros);
  REQUIRE(at != std::string::npos);
  text.replace(at + key.size(), zeros.size(), Xxh3Hex(text));
  return text;
}

struct Field {
  const char* pointer;  // JSON pointer of the member
  const char* path;     // as the error names it
  json wrong;           // a value of the wrong type
  bool optional;        // the writer omits it where it does not apply
};

void CheckFields(const Manifest& m, const std::vector<Field>& fields) {
  const json good = json::parse(EncodeManifest(m));
  REQUIRE(DecodeManifest(WithChecksum(good), "REPO/a/manifest.json").ok());
  for (const auto& f : fields) {
    const json::json_pointer ptr(f.pointer);
    REQUIRE(good.contains(ptr));
    const std::string named = fmt::format("REPO/a/manifest.json: field '{}': ", f.path);
    if (good.at(ptr.parent_pointer()).is_object()) {  // an element of an array is not a field to remove
      json doc = good;
      doc.at(ptr.parent_pointer()).erase(ptr.back());
      auto r = DecodeManifest(WithChecksum(doc), "REPO/a/manifest.json");
      INFO(f.pointer << " removed: " << r.status().message());
      if (f.optional) {
        CHECK(r.ok());
      } else {
        REQUIRE_FALSE(r.ok());
        CHECK(r.status().code() == walfmt::ErrorCode::kCorruption);
        CHECK(r.status().message() == named + "missing");
      }
    }
    json doc = good;
    doc[ptr] = f.wrong;
    auto r = DecodeManifest(WithChecksum(doc), "REPO/a/manifest.json");
    INFO(f.pointer << " = " << f.wrong.dump() << ": " << r.status().message());
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == walfmt::ErrorCode::kCorruption);
    CHECK(r.status().message().rfind(named, 0) == 0);
  }
}

}  // namespace

TEST_CASE("repo: every field of an increment's manifest is required with its type, the error names it", "[repo]") {
  CheckFields(Increment(),
              {
                  {"/schema", "schema", 7, false},
                  {"/name", "name", 7, false},
                  {"/type", "type", 7, false},
                  {"/source", "source", 7, false},
                  {"/parent", "parent", 7, false},
                  {"/seq", "seq", "2", false},
                  {"/cluster_id", "cluster_id", 7, false},
                  {"/cut", "cut", "4", false},
                  {"/snapshot", "snapshot", 7, false},
                  {"/time_us", "time_us", -1, false},
                  {"/verdict", "verdict", json::array(), false},
                  {"/evidence", "evidence", "x", false},
                  {"/nodes", "nodes", json::object(), false},
                  {"/files", "files", "x", false},
                  {"/nodes/0/node", "nodes[0].node", "0", false},
                  {"/nodes/0/continue_from", "nodes[0].continue_from", 7, false},
                  {"/nodes/0/wal", "nodes[0].wal", 7, true},
                  {"/nodes/0/wal/from", "nodes[0].wal.from", 7, false},
                  {"/nodes/0/wal/to", "nodes[0].wal.to", "not a position", false},
                  {"/nodes/0/wal/first_segment", "nodes[0].wal.first_segment", "1", false},
                  {"/nodes/0/wal/last_segment", "nodes[0].wal.last_segment", 1.5, false},
                  {"/nodes/0/wal/segments", "nodes[0].wal.segments", "x", false},
                  {"/nodes/0/wal/segments/1", "nodes[0].wal.segments[1]", 2, false},
                  {"/nodes/0/cut_start", "nodes[0].cut_start", 7, true},
                  {"/nodes/0/cut_finish", "nodes[0].cut_finish", 7, false},
                  {"/nodes/0/evidence", "nodes[0].evidence", json::array(), false},
                  {"/nodes/0/evidence/start_time_us", "nodes[0].evidence.start_time_us", "1", false},
                  {"/nodes/0/evidence/finish_time_us", "nodes[0].evidence.finish_time_us", "1", false},
                  {"/nodes/0/evidence/local_state_commits", "nodes[0].evidence.local_state_commits", "1", false},
                  {"/nodes/0/evidence/commits_before_finish", "nodes[0].evidence.commits_before_finish", "1", false},
                  {"/nodes/0/evidence/before", "nodes[0].evidence.before", "1", false},
                  {"/nodes/0/evidence/after", "nodes[0].evidence.after", "1", false},
                  {"/nodes/0/evidence/before_committed_after_start", "nodes[0].evidence.before_committed_after_start",
                   "1", false},
                  {"/nodes/0/evidence/after_committed_before_start", "nodes[0].evidence.after_committed_before_start",
                   "1", false},
                  {"/files/0", "files[0]", "x", false},
                  {"/files/0/path", "files[0].path", 7, false},
                  {"/files/0/bytes", "files[0].bytes", "10", false},
                  {"/files/0/xxh3_128", "files[0].xxh3_128", 7, false},
              });
}

TEST_CASE("repo: every field of a full artifact's manifest is required with its type, the error names it", "[repo]") {
  CheckFields(SyntheticFull(), {
                                   {"/restore", "restore", "x", true},
                                   {"/cut", "cut", -2, false},
                                   {"/nodes/0/file", "nodes[0].file", 7, true},
                                   {"/nodes/0/fingerprint", "nodes[0].fingerprint", 4660, false},
                                   {"/nodes/0/entries", "nodes[0].entries", "3", false},
                                   {"/nodes/0/snapshot_position", "nodes[0].snapshot_position", 7, false},
                               });
  // A fingerprint or a cluster_id must be exactly 16 lower-case hex digits.
  json doc = json::parse(EncodeManifest(SyntheticFull()));
  doc["nodes"][0]["fingerprint"] = "0000000000001234 ";
  auto r = DecodeManifest(WithChecksum(doc), "m");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().rfind("m: field 'nodes[0].fingerprint': ", 0) == 0);
  doc = json::parse(EncodeManifest(SyntheticFull()));
  doc["cluster_id"] = "000000000000000A";
  r = DecodeManifest(WithChecksum(doc), "m");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().rfind("m: field 'cluster_id': ", 0) == 0);
  // Nulls where the writer writes them decode as "none".
  Manifest runtime = SyntheticFull();
  runtime.cut.reset();
  runtime.source = "runtime-snapshot";
  runtime.snapshot = "snap-1";
  runtime.restore = json();
  auto back = DecodeManifest(EncodeManifest(runtime), "m");
  REQUIRE(back.ok());
  CHECK_FALSE(back->cut.has_value());
  CHECK(back->parent.empty());
  CHECK(back->snapshot == "snap-1");
}

TEST_CASE("repo: a repository marker with a missing or mistyped field is refused naming the field", "[repo]") {
  TempDir t("repo-marker");
  const std::string marker = t.str() + "/" + kMarkerFile;
  struct Case {
    const char* text;
    const char* error;  // "" : accepted
  };
  const Case cases[] = {
      {R"({"schema": "walcut.repository/2", "artifact_schema": "walcut.artifact/2"})", ""},
      {R"({"format": "walcut-repository", "version": 1})", ""},
      {R"({"schema": 2})", "field 'schema': expected a string"},
      {R"({"format": "walcut-repository"})", "field 'version': missing"},
      {R"({"format": "walcut-repository", "version": "1"})", "field 'version': expected an unsigned integer"},
      {R"({"format": ["walcut-repository"], "version": 1})", "field 'format': expected a string"},
  };
  for (const auto& c : cases) {
    INFO(c.text);
    WriteAll(marker, std::string(c.text) + "\n");
    const walfmt::Status st = InitRepository(t.str());
    INFO(st.message());
    if (std::string(c.error).empty()) {
      CHECK(st.ok());
    } else {
      CHECK(st.code() == walfmt::ErrorCode::kCorruption);
      CHECK(st.message().rfind(marker + ": " + c.error, 0) == 0);
    }
  }
}

}  // namespace walcut::repo
