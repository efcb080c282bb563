// walcut check end to end on the samples: golden text, JSON and JUnit output
// (WALCUT_UPDATE_GOLDEN=1 rewrites tests/golden/check/), exit codes, the JSON
// validated against docs/check.schema.json, JUnit well-formed with counts that
// add up, the restore window of each sample, the incremental state file, and
// inputs left byte for byte as they were.
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_support.h"
#include "walfmt/writer.h"

namespace fs = std::filesystem;
using nlohmann::json;
using walcut::test::Lines;
using walcut::test::Run;
using walcut::test::Slurp;
using walcut::test::Spit;
using walcut::test::TempDir;
using walcut::test::Walcut;

namespace {

std::string Sample(const std::string& name) { return std::string(WALCUT_SOURCE_DIR) + "/samples/" + name; }
std::string GoldenPath(const std::string& name) {
  return std::string(WALCUT_SOURCE_DIR) + "/tests/golden/check/" + name;
}

// Absolute paths differ between machines: the source directory becomes @SRC@.
std::string Normalize(std::string s) {
  const std::string src = WALCUT_SOURCE_DIR;
  for (size_t p = s.find(src); p != std::string::npos; p = s.find(src, p)) {
    s.replace(p, src.size(), "@SRC@");
  }
  return s;
}

std::map<std::string, std::string> Files(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) out[fs::relative(e.path(), dir).string()] = Slurp(e.path().string());
  }
  return out;
}

void Golden(const std::string& name, const std::string& got) { walcut::test::CompareGolden(GoldenPath(name), got); }

// ---- a validator for the subset of JSON Schema docs/check.schema.json uses:
// type (a name or a list), properties, required, items, enum,
// additionalProperties (false).
bool TypeIs(const json& v, const std::string& t) {
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  if (t == "string") return v.is_string();
  if (t == "integer") return v.is_number_integer();
  if (t == "number") return v.is_number();
  if (t == "boolean") return v.is_boolean();
  if (t == "null") return v.is_null();
  return false;
}

void Validate(const json& schema, const json& v, const std::string& at, std::vector<std::string>& errors) {
  static const std::set<std::string> kKnown = {
      "$schema",    "$id",      "title", "description", "type",
      "properties", "required", "items", "enum",        "additionalProperties"};
  for (const auto& [k, _] : schema.items()) {
    if (!kKnown.count(k)) errors.push_back(fmt::format("{}: schema keyword {} not supported by this validator", at, k));
  }
  if (schema.contains("type")) {
    const json& t = schema["type"];
    bool ok = false;
    if (t.is_string()) ok = TypeIs(v, t.get<std::string>());
    for (const auto& x : t.is_array() ? t : json::array()) ok = ok || TypeIs(v, x.get<std::string>());
    if (!ok) {
      errors.push_back(fmt::format("{}: expected type {}, found {}", at, t.dump(), v.dump()));
      return;
    }
  }
  if (schema.contains("enum")) {
    bool found = false;
    for (const auto& e : schema["enum"]) found = found || e == v;
    if (!found) errors.push_back(fmt::format("{}: {} not in {}", at, v.dump(), schema["enum"].dump()));
  }
  if (v.is_object()) {
    for (const auto& r : schema.value("required", json::array())) {
      if (!v.contains(r.get<std::string>())) errors.push_back(fmt::format("{}: missing {}", at, r.dump()));
    }
    const json props = schema.value("properties", json::object());
    for (const auto& [k, x] : v.items()) {
      if (props.contains(k)) {
        Validate(props[k], x, at + "." + k, errors);
      } else if (schema.contains("additionalProperties") && schema["additionalProperties"] == false) {
        errors.push_back(fmt::format("{}: property {} not in the schema", at, k));
      }
    }
  }
  if (v.is_array() && schema.contains("items")) {
    for (size_t i = 0; i < v.size(); ++i) Validate(schema["items"], v[i], fmt::format("{}[{}]", at, i), errors);
  }
}

void RequireValid(const std::string& text) {
  static const json schema = json::parse(Slurp(std::string(WALCUT_SOURCE_DIR) + "/docs/check.schema.json"));
  const json doc = json::parse(text);
  std::vector<std::string> errors;
  Validate(schema, doc, "$", errors);
  // One INFO holding the first ten: an INFO inside a loop body ends with it.
  std::string shown;
  for (size_t i = 0; i < std::min<size_t>(errors.size(), 10); ++i) shown += errors[i] + "\n";
  INFO(shown);
  CHECK(errors.empty());
}

// ---- JUnit: balanced tags, escaped text and attributes, counts that add up.
struct Tag {
  std::string name;
  std::map<std::string, std::string> attrs;
  std::vector<Tag> children;
};

bool EntitiesOk(const std::string& s) {
  for (size_t p = s.find('&'); p != std::string::npos; p = s.find('&', p + 1)) {
    const size_t semi = s.find(';', p);
    if (semi == std::string::npos) return false;
    const std::string ent = s.substr(p + 1, semi - p - 1);
    if (ent != "amp" && ent != "lt" && ent != "gt" && ent != "quot" && ent != "apos" && ent.rfind("#", 0) != 0) {
      return false;
    }
  }
  return true;
}

// Parses the XML the report writer produces (no comments, no CDATA); fails
// the test on anything unbalanced or unescaped.
Tag ParseXml(const std::string& x) {
  Tag root;
  std::vector<Tag*> stack{&root};
  size_t p = 0;
  while (p < x.size()) {
    const size_t lt = x.find('<', p);
    const std::string text = x.substr(p, lt == std::string::npos ? std::string::npos : lt - p);
    CHECK(text.find('>') == std::string::npos);
    CHECK(EntitiesOk(text));
    if (lt == std::string::npos) break;
    const size_t gt = x.find('>', lt);
    REQUIRE(gt != std::string::npos);
    std::string inner = x.substr(lt + 1, gt - lt - 1);
    p = gt + 1;
    if (inner.rfind("?", 0) == 0) continue;  // the declaration
    if (inner.rfind("/", 0) == 0) {
      REQUIRE(stack.size() > 1);
      CHECK(stack.back()->name == inner.substr(1));
      stack.pop_back();
      continue;
    }
    const bool empty = !inner.empty() && inner.back() == '/';
    if (empty) inner.pop_back();
    Tag t;
    size_t i = inner.find(' ');
    t.name = inner.substr(0, i);
    while (i != std::string::npos && i < inner.size()) {
      while (i < inner.size() && inner[i] == ' ') ++i;
      if (i >= inner.size()) break;
      const size_t eq = inner.find('=', i);
      REQUIRE(eq != std::string::npos);
      REQUIRE(inner[eq + 1] == '"');
      const size_t close = inner.find('"', eq + 2);
      REQUIRE(close != std::string::npos);
      const std::string value = inner.substr(eq + 2, close - eq - 2);
      CHECK(value.find('<') == std::string::npos);
      CHECK(EntitiesOk(value));
      t.attrs[inner.substr(i, eq - i)] = value;
      i = close + 1;
    }
    stack.back()->children.push_back(std::move(t));
    if (!empty) stack.push_back(&stack.back()->children.back());
  }
  CHECK(stack.size() == 1);
  return root;
}

void RequireJunit(const std::string& xml) {
  walcut::test::RequireValidJunit(xml);
  const Tag root = ParseXml(xml);
  REQUIRE(root.children.size() == 1);
  const Tag& suites = root.children[0];
  CHECK(suites.name == "testsuites");
  uint64_t tests = 0, failures = 0;
  for (const Tag& s : suites.children) {
    REQUIRE(s.name == "testsuite");
    uint64_t t = 0, f = 0;
    for (const Tag& c : s.children) {
      if (c.name == "system-out") continue;  // the suite's one line (segments --state skipped)
      CHECK(c.name == "testcase");
      CHECK(c.attrs.count("classname"));
      CHECK(c.attrs.count("name"));
      ++t;
      for (const Tag& k : c.children) f += k.name == "failure";
    }
    CHECK(s.attrs.at("tests") == std::to_string(t));
    CHECK(s.attrs.at("failures") == std::to_string(f));
    tests += t;
    failures += f;
  }
  CHECK(suites.attrs.at("tests") == std::to_string(tests));
  CHECK(suites.attrs.at("failures") == std::to_string(failures));
}

struct Case {
  std::string sample;
  std::string args;
  std::string golden;
  int exit_code;
};

const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = {
      {"healthy", "", "healthy", 0},
      {"crash-during-cut", "", "crash-during-cut", 1},
      {"corrupted-segment", "", "corrupted-segment", 1},
      {"torn-tail", "", "torn-tail", 0},
      {"healthy", "--cut 6", "healthy-cut-6", 0},
      {"crash-during-cut", "--cut 3", "crash-during-cut-cut-3", 1},
  };
  return cases;
}

}  // namespace

TEST_CASE("check: golden text, JSON and JUnit on every sample, exit codes, inputs untouched", "[cli][check]") {
  for (const Case& c : Cases()) {
    const std::string dir = Sample(c.sample);
    REQUIRE(fs::is_directory(dir));
    const auto before = Files(dir);
    for (const std::string format : {"text", "json", "junit"}) {
      INFO("walcut check " << c.sample << " " << c.args << " --format " << format);
      const Run r = Walcut(fmt::format("check {} {} --format {}", dir, c.args, format));
      CHECK(r.code == c.exit_code);
      const std::string ext = format == "text" ? "txt" : format == "json" ? "json" : "xml";
      Golden(fmt::format("{}.{}", c.golden, ext), Normalize(r.out));
      if (format == "json") {
        RequireValid(r.out);
        const json j = json::parse(r.out);
        CHECK(j["exit_code"] == c.exit_code);
        CHECK(j["ok"] == (c.exit_code == 0));
      }
      if (format == "junit") RequireJunit(r.out);
    }
    CHECK(Files(dir) == before);
  }
}

TEST_CASE("check --level restore: cuts after a broken one restore from the last checked restore", "[cli][check]") {
  // crash-during-cut: cut 3 is inconsistent, 1, 2, 4 and 5 consistent. Each
  // restore is based on the previous checked one (4 on 2); --from-genesis
  // restores each from genesis, to the same states.
  const std::string dir = Sample("crash-during-cut");
  const auto before = Files(dir);
  const Run chained = Walcut(fmt::format("check {} --level restore --format json", dir));
  const Run genesis = Walcut(fmt::format("check {} --level restore --from-genesis --format json", dir));
  CHECK(chained.code == 1);  // cut 3's findings
  CHECK(genesis.code == 1);
  const json c = json::parse(chained.out);
  const json g = json::parse(genesis.out);
  RequireValid(chained.out);
  REQUIRE(c["restores"].size() == 4);
  REQUIRE(g["restores"].size() == 4);
  const std::vector<std::pair<int, std::string>> want = {{1, "genesis"}, {2, "cut-1"}, {4, "cut-2"}, {5, "cut-4"}};
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("restore " << i);
    CHECK(c["restores"][i]["cut"] == want[i].first);
    CHECK(c["restores"][i]["restored"] == true);
    CHECK(c["restores"][i]["base"] == want[i].second);
    CHECK(g["restores"][i]["base"] == "genesis");
    CHECK(c["restores"][i]["fingerprints"] == g["restores"][i]["fingerprints"]);
    CHECK(c["restores"][i]["entries"] == g["restores"][i]["entries"]);
  }
  CHECK(Files(dir) == before);
}

TEST_CASE("check: the restore window of each sample", "[cli][check]") {
  struct W {
    const char* sample;
    bool any;
    int earliest;
    int latest;
    const char* limit;  // a piece of latest_limit
  };
  for (const W& w : {W{"healthy", true, 1, 6, "last cut"}, W{"crash-during-cut", true, 1, 5, "last cut"},
                     W{"corrupted-segment", true, 1, 2, "2/00008015"}, W{"torn-tail", true, 1, 6, "last cut"}}) {
    INFO(w.sample);
    const Run r = Walcut(fmt::format("check {} --level cuts --format json", Sample(w.sample)));
    const json j = json::parse(r.out);
    const json& win = j["window"];
    CHECK(win["restorable"] == w.any);
    CHECK(win["earliest"] == w.earliest);
    CHECK(win["latest"] == w.latest);
    CHECK(win["latest_limit"].get<std::string>().find(w.limit) != std::string::npos);
    const Run t = Walcut(fmt::format("check {}", Sample(w.sample)));
    CHECK(t.out.find("restore window: ") != std::string::npos);
  }
}

TEST_CASE("check: usage errors exit 2, tool failures exit 3, --output keeps the exit code", "[cli][check]") {
  const std::string healthy = Sample("healthy");
  CHECK(Walcut(fmt::format("check {} --cut 99", healthy)).code == 2);
  CHECK(Walcut(fmt::format("check {} --cut 1 --all", healthy)).code == 2);
  CHECK(Walcut(fmt::format("check {} --level nope", healthy)).code == 2);
  CHECK(Walcut("check /nonexistent/walcut-cluster").code == 2);

  TempDir t;
  const Run w =
      Walcut(fmt::format("check {} --format junit --output {}/report.xml", Sample("crash-during-cut"), t.path));
  CHECK(w.code == 1);
  CHECK(Lines(w.out).size() == 1);
  CHECK(w.out.find("FAILED") != std::string::npos);
  CHECK(w.out.find("report.xml") != std::string::npos);
  RequireJunit(Slurp(t.path + "/report.xml"));
  CHECK(Normalize(Slurp(t.path + "/report.xml")) == Slurp(GoldenPath("crash-during-cut.xml")));

  const Run io = Walcut(fmt::format("check {} --output {}/no/such/dir/report.txt", healthy, t.path));
  CHECK(io.code == 3);
  CHECK(io.err.find("report.txt") != std::string::npos);
}

TEST_CASE("check: JUnit escapes what XML cannot carry raw", "[cli][check]") {
  // A cluster directory whose name needs escaping: it shows up in the report.
  TempDir t;
  const std::string dir = t.path + "/a&b<c>\"d";
  REQUIRE(std::system(fmt::format("cp -r '{}' '{}'", Sample("torn-tail"), dir).c_str()) == 0);
  const Run r = Walcut(fmt::format("check '{}' --level files --format junit", dir));
  CHECK(r.code == 0);
  RequireJunit(r.out);
  CHECK(r.out.find("a&amp;b&lt;c&gt;&quot;d") != std::string::npos);
}

TEST_CASE("check: the state file skips what was verified, reads what is new, reports what changed", "[cli][check]") {
  TempDir t;
  const std::string dir = t.path + "/c";
  REQUIRE(std::system(fmt::format("cp -r '{}' '{}'", Sample("healthy"), dir).c_str()) == 0);
  const std::string state = t.path + "/state.json";
  const std::string cmd = fmt::format("check {} --level files --format json --state {}", dir, state);

  const Run first = Walcut(cmd);
  CHECK(first.code == 0);
  json j = json::parse(first.out);
  CHECK(j["files"]["segments_read"] == 21);
  CHECK(j["files"]["segments_skipped"] == 0);
  CHECK(json::parse(Slurp(state))["schema"] == "walcut.check-state/1");

  // Unchanged: nothing read, and the text says how much was skipped.
  const Run second = Walcut(cmd);
  CHECK(second.code == 0);
  j = json::parse(second.out);
  CHECK(j["files"]["segments_read"] == 0);
  CHECK(j["files"]["bytes_read"] == 0);
  CHECK(j["files"]["segments_skipped"] == 21);
  const Run text = Walcut(fmt::format("check {} --level files --state {}", dir, state));
  CHECK(text.out.find("0 read (0 B, 0 records), 21 skipped (") != std::string::npos);
  CHECK(text.out.find("segment 0000000000000000.wal") == std::string::npos);  // counted, not listed
  // JUnit: the unchanged segments are one line of output, not 21 skipped tests.
  const Run junit = Walcut(fmt::format("check {} --level files --format junit --state {}", dir, state));
  CHECK(junit.code == 0);
  RequireJunit(junit.out);
  CHECK(junit.out.find("<skipped") == std::string::npos);
  CHECK(junit.out.find("<system-out>21 segments not read again: unchanged since the state file&apos;s run (") !=
        std::string::npos);

  // Appended: node 0's WAL continues (its last segment is archived, a new one
  // starts): those two and the one before them (for continuity) are read.
  {
    const json cluster = json::parse(Slurp(dir + "/cluster.json"));
    walfmt::WriterOptions o;
    o.wal_dir = dir + "/node-0/wal";
    o.node_id = 0;
    o.cluster_id = std::stoull(cluster["cluster_id"].get<std::string>(), nullptr, 16);
    o.segment_bytes = 64 * 1024;
    o.archive_compressed = true;
    auto w = walfmt::WalWriter::Open(o, 400000);
    REQUIRE(w.ok());
    for (uint64_t i = 0; i < 60; ++i) {
      walfmt::TxData d{walfmt::TxId{0, 100000 + i}, {{walfmt::WriteOp::kPut, "acct/000001", std::string(1000, 'x')}}};
      REQUIRE((*w)->Append(d).ok());
    }
    REQUIRE((*w)->Close().ok());
  }
  REQUIRE(fs::exists(dir + "/node-0/wal/0000000000000007.wal"));
  const Run third = Walcut(cmd);
  CHECK(third.code == 0);
  j = json::parse(third.out);
  CHECK(j["files"]["segments"] == 22);
  CHECK(j["files"]["segments_read"] == 3);
  CHECK(j["files"]["segments_skipped"] == 19);

  // Modified in place (same size, new mtime): read again and reported.
  const std::string seg = dir + "/node-1/wal/0000000000000006.wal";
  {
    std::string bytes = Slurp(seg);
    REQUIRE(bytes.size() > 200);
    bytes[200] = static_cast<char>(bytes[200] ^ 0x01);
    Spit(seg, bytes);
  }
  const Run fourth = Walcut(fmt::format("check {} --level files --state {}", dir, state));
  CHECK(fourth.code == 1);
  CHECK(fourth.out.find("segment 6 of node 1 changed since it was verified: crc32c ") != std::string::npos);
  // Still reported on the next run (a changed segment keeps its old entry).
  CHECK(Walcut(fmt::format("check {} --level files --state {}", dir, state)).code == 1);

  // --full reads every segment.
  const Run full = Walcut(cmd + " --full");
  j = json::parse(full.out);
  CHECK(j["files"]["segments_read"] == 22);
  CHECK(full.code == 1);

  // A file that is not a state file is a usage error, and is left alone.
  Spit(t.path + "/not-state.json", "{\"schema\": \"something else\"}");
  const Run wrong = Walcut(fmt::format("check {} --level files --state {}/not-state.json", dir, t.path));
  CHECK(wrong.code == 2);
  CHECK(wrong.err.find("not a walcut.check-state/1 state file") != std::string::npos);
  CHECK(Slurp(t.path + "/not-state.json") == "{\"schema\": \"something else\"}");

  // A verified segment that disappears is a finding too.
  fs::remove(dir + "/node-2/wal/0000000000000006.wal");
  const Run gone = Walcut(fmt::format("check {} --level files --state {}", dir, state));
  CHECK(gone.code == 1);
  CHECK(gone.out.find("segment 6 of node 2 (0000000000000006.wal) disappeared since it was verified") !=
        std::string::npos);
}

TEST_CASE("check: an incomplete last cut is a note, unless named by --cut", "[cli][check]") {
  // healthy with node 2's WAL ending just before its CUT_FINISH(6) at
  // 5/0000BD98, on a record boundary: the cut is still open there.
  TempDir t;
  const std::string dir = t.path + "/c";
  REQUIRE(std::system(fmt::format("cp -r '{}' '{}'", Sample("healthy"), dir).c_str()) == 0);
  const std::string wal = dir + "/node-2/wal/";
  REQUIRE(std::system(fmt::format("zstd -q -d '{0}0000000000000005.wal.zst' -o '{0}0000000000000005.wal' && rm "
                                  "'{0}0000000000000005.wal.zst' '{0}0000000000000006.wal' && truncate -s {1} "
                                  "'{0}0000000000000005.wal'",
                                  wal, 0xBD98)
                          .c_str()) == 0);
  const Run all = Walcut(fmt::format("check {}", dir));
  CHECK(all.code == 0);
  CHECK(all.out.find("note [cuts cut-6: status] incomplete (the last cut, still open; not a finding)") !=
        std::string::npos);
  CHECK(all.out.find("FINDING") == std::string::npos);
  CHECK(all.out.find("restore window: cuts 1..5") != std::string::npos);
  const Run named = Walcut(fmt::format("check {} --cut 6", dir));
  CHECK(named.code == 1);
  CHECK(named.out.find("FINDING [cuts cut-6: status] cut 6 is incomplete") != std::string::npos);
}
