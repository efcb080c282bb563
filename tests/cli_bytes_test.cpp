// Byte strings that are not UTF-8 (README.md, "Byte strings in JSON, JUnit
// and SVG"): a cluster under a directory whose name holds the bytes 0xff
// 0xfe goes through every command that writes JSON, JUnit or SVG. Each
// document is valid (parses), names the directory escaped and losslessly,
// and each command exits as its text format does; outputs are complete and
// no temporary file is left.
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_support.h"

namespace walcut::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kHealthy = std::string(WALCUT_SOURCE_DIR) + "/samples/healthy";

// Every file below `dir` whose name says it is a temporary.
std::vector<std::string> Temporaries(const std::string& dir) {
  std::vector<std::string> v;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.find(".tmp") != std::string::npos || name.rfind(".walcut-", 0) == 0) v.push_back(e.path().string());
  }
  return v;
}

// Well-formed XML 1.0 (python3's expat: it rejects bytes that are not UTF-8
// and characters XML cannot carry).
void RequireWellFormedXml(const std::string& path) {
  TempDir t;
  const std::string cmd = fmt::format(
      "python3 -c 'import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])' '{}' >'{}/out' 2>&1", path, t.path);
  const int st = std::system(cmd.c_str());
  INFO(Slurp(t.path + "/out"));
  REQUIRE(st == 0);
}

// A document walcut wrote: valid JSON that names its schema.
json ParseJson(const std::string& text) {
  INFO(text);
  json j = json::parse(text, nullptr, false);
  REQUIRE_FALSE(j.is_discarded());
  CHECK(j.contains("schema"));
  return j;
}

}  // namespace

TEST_CASE("bytes: a cluster under a directory that is not UTF-8, every command in every format", "[cli][bytes]") {
  TempDir t;
  const std::string w = t.path + "/w-\xff\xfe";  // every input and output lives here
  const std::string d = w + "/cluster";
  fs::create_directories(w);
  REQUIRE(std::system(fmt::format("cp -r '{}' '{}'", kHealthy, d).c_str()) == 0);
  const std::string escaped = "w-\\xff\\xfe";      // how the documents name it
  const std::string in_json = "w-\\\\xff\\\\xfe";  // the same in a JSON string literal

  // Commands that only read: text and JSON exit alike, the JSON parses and
  // names the directory escaped.
  const std::vector<std::string> reading = {
      fmt::format("verify '{}'", d),
      fmt::format("stats '{}'", d),
      fmt::format("cuts '{}'", d),
      fmt::format("cut show '{}' 3", d),
      fmt::format("check '{}'", d),
      fmt::format("check '{}/node-1' --level files", d),
      fmt::format("snapshot show '{}/snapshots/full-1500'", d),
      fmt::format("snapshot check '{}/snapshots/full-1500'", d),
      fmt::format("diff '{0}/snapshots/full-1500' '{0}/snapshots/full-1500'", d),
      fmt::format("restore '{}' --cut 4 --dry-run", d),
  };
  for (const std::string& c : reading) {
    INFO("walcut " << c);
    const Run text = Walcut(c);
    const Run js = Walcut(c + " --format json");
    INFO(js.err);
    CHECK(js.err.find("internal error") == std::string::npos);
    CHECK(js.code == text.code);
    ParseJson(js.out);
    CHECK(js.out.find(in_json) != std::string::npos);
  }
  {
    const Run text = Walcut(fmt::format("dump -n 5 '{}'", d));
    const Run js = Walcut(fmt::format("dump -n 5 '{}' --format json", d));
    CHECK(js.code == text.code);
    for (const std::string& line : Lines(js.out)) ParseJson(line);
  }

  SECTION("JUnit reports are valid and name the directory escaped") {
    for (const std::string& c : {fmt::format("check '{}'", d), fmt::format("check '{}' --level files", d)}) {
      INFO("walcut " << c);
      const Run text = Walcut(c);
      const Run junit = Walcut(c + " --format junit");
      CHECK(junit.code == text.code);
      RequireValidJunit(junit.out);
      CHECK(junit.out.find(escaped) != std::string::npos);
    }
  }

  SECTION("the SVG of a cut is well-formed") {
    const Run r = Walcut(fmt::format("cut show '{}' 3 --svg '{}/cut.svg'", d, w));
    CHECK(r.code == 0);
    RequireWellFormedXml(w + "/cut.svg");
  }

  SECTION("restore completes with exit 0 in every format, and its manifest reads back as a base") {
    const Run text = Walcut(fmt::format("restore '{}' --cut 4 --out '{}/o-text'", d, w));
    const Run js = Walcut(fmt::format("restore '{}' --cut 4 --out '{}/o-json' --format json", d, w));
    INFO(text.err << js.err);
    CHECK(text.code == 0);
    CHECK(js.code == 0);
    const json j = ParseJson(js.out);
    CHECK(j["schema"] == "walcut.restore/1");
    const json m = ParseJson(Slurp(w + "/o-json/manifest.json"));
    CHECK(m["schema"] == "walcut.restore-manifest/2");
    CHECK(m["cluster"]["cluster_id"].is_string());
    // The restored directory (its path not UTF-8) serves as the base of the next restore.
    const Run next =
        Walcut(fmt::format("restore '{}' --cut 5 --base '{}/o-json' --out '{}/o-next' --format json", d, w, w));
    INFO(next.err);
    CHECK(next.code == 0);
    ParseJson(next.out);
    CHECK(Temporaries(w).empty());
  }

  SECTION("scan, cuts --verdict-out, per-node restores, assemble and check merge") {
    std::string sums;
    for (int i = 0; i < 3; ++i) {
      const Run s = Walcut(fmt::format("scan '{}/node-{}' --out '{}/s{}.json'", d, i, w, i));
      INFO(s.err);
      REQUIRE(s.code == 0);
      const json j = ParseJson(Slurp(fmt::format("{}/s{}.json", w, i)));
      CHECK(j["schema"] == "walcut.summary/1");
      sums += fmt::format(" '{}/s{}.json'", w, i);
    }
    CHECK(Temporaries(w).empty());
    const Run v = Walcut(fmt::format(
        "cuts{} --cluster-json '{}/cluster.json' --verdict-out '{}/v.json' --cut 4 --format json", sums, d, w));
    INFO(v.err);
    REQUIRE(v.code == 0);
    ParseJson(v.out);
    std::string parts, reports;
    for (int i = 0; i < 3; ++i) {
      const Run p =
          Walcut(fmt::format("restore '{}/node-{}' --verdict '{}/v.json' --out '{}/p{}' --format json", d, i, w, w, i));
      INFO(p.err);
      REQUIRE(p.code == 0);
      ParseJson(p.out);
      CHECK(ParseJson(Slurp(fmt::format("{}/p{}/manifest.json", w, i)))["schema"] == "walcut.restore-part/2");
      parts += fmt::format(" '{}/p{}'", w, i);
      const Run c = Walcut(fmt::format("check '{}/node-{}' --format json -o '{}/r{}.json'", d, i, w, i));
      INFO(c.out << c.err);
      REQUIRE(c.code == 0);
      reports += fmt::format(" '{}/r{}.json'", w, i);
    }
    const Run a = Walcut(fmt::format("restore assemble '{}/asm'{} --format json", w, parts));
    INFO(a.err);
    CHECK(a.code == 0);
    ParseJson(a.out);
    const Run mt = Walcut(fmt::format("check merge{}", reports));
    const Run mj = Walcut(fmt::format("check merge{} --format json", reports));
    const Run mx = Walcut(fmt::format("check merge{} --format junit", reports));
    CHECK(mt.code == 0);
    CHECK(mj.code == mt.code);
    CHECK(mx.code == mt.code);
    // The merged report names the directory escaped once, not twice.
    ParseJson(mj.out);
    CHECK(mj.out.find(in_json) != std::string::npos);
    CHECK(mj.out.find("x5cxff") == std::string::npos);
    RequireValidJunit(mx.out);
    CHECK(mx.out.find(escaped) != std::string::npos);
    CHECK(Temporaries(w).empty());
  }

  SECTION("a repository under the directory") {
    const std::string repo = w + "/repo";
    const Run c =
        Walcut(fmt::format("snapshot create '{}' --repo '{}' --full --from full-1500 --format json", d, repo));
    INFO(c.err);
    REQUIRE(c.code == 0);
    ParseJson(c.out);
    const Run i = Walcut(fmt::format("snapshot create '{}' --repo '{}' --incremental --cut 5 --format json", d, repo));
    INFO(i.err);
    REQUIRE(i.code == 0);
    const json list = ParseJson(Walcut(fmt::format("snapshot list '{}' --format json", repo)).out);
    REQUIRE(list["artifacts"].size() == 2);
    CHECK(list["artifacts"][0]["cluster_id"].is_string());
    const Run text = Walcut(fmt::format("snapshot check '{}'", repo));
    const Run js = Walcut(fmt::format("snapshot check '{}' --format json", repo));
    const Run junit = Walcut(fmt::format("snapshot check '{}' --format junit", repo));
    CHECK(text.code == 0);
    CHECK(js.code == 0);
    CHECK(junit.code == 0);
    ParseJson(js.out);
    RequireValidJunit(junit.out);
    const Run r = Walcut(fmt::format("restore --repo '{}' --latest --out '{}/from-repo' --format json", repo, w));
    INFO(r.err);
    CHECK(r.code == 0);
    ParseJson(r.out);
    CHECK(Temporaries(w).empty());
  }

  SECTION("walcut run into the directory") {
    const Run r =
        Walcut(fmt::format("run '{}/run' --nodes 2 --backups 1 --txs 100 --cuts 2 --seed 3 --format json", w));
    INFO(r.err);
    CHECK(r.code == 0);
    ParseJson(r.out);
    const json cj = ParseJson(Slurp(w + "/run/cluster.json"));
    CHECK(cj["schema"] == "walcut.cluster/2");
    CHECK(cj["cluster_id"].get<std::string>().size() == 16);
  }
}

}  // namespace walcut::test
