// One representation across walcut's documents: every cluster_id is the same
// 16 hex digits in files, JSON and text; every JSON document names its
// schema; files written by older walcut (cluster.json of format
// walcut-cluster 1 with a decimal cluster_id, restore manifests of format
// walcut-restore / walcut-restore-part 1) still read.
#include <filesystem>
#include <string>

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_support.h"

namespace walcut::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kHealthy = std::string(WALCUT_SOURCE_DIR) + "/samples/healthy";

json JsonOf(const Run& r) {
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  return json::parse(r.out);
}

json JsonFile(const std::string& path) { return json::parse(Slurp(path)); }

// cluster.json as older walcut wrote it.
json Version1(json c) {
  c.erase("schema");
  c["format"] = "walcut-cluster";
  c["format_version"] = 1;
  c["cluster_id"] = std::stoull(c["cluster_id"].get<std::string>(), nullptr, 16);
  return c;
}

}  // namespace

TEST_CASE("consistency: the cluster id is the same 16 hex digits in every file, document and message",
          "[cli][consistency]") {
  TempDir t;
  const json cluster = JsonFile(kHealthy + "/cluster.json");
  CHECK(cluster["schema"] == "walcut.cluster/2");
  const std::string id = cluster["cluster_id"].get<std::string>();
  REQUIRE(id.size() == 16);
  CHECK(id.find_first_not_of("0123456789abcdef") == std::string::npos);

  CHECK(JsonOf(Walcut(fmt::format("snapshot show '{}/snapshots/full-1500' --format json", kHealthy)))["cluster_id"] ==
        id);
  CHECK(Walcut(fmt::format("snapshot show '{}/snapshots/full-1500'", kHealthy)).out.find(id) != std::string::npos);
  CHECK(JsonOf(Walcut(fmt::format("snapshot check '{}/snapshots/full-1500' --format json",
                                  kHealthy)))["cluster"]["cluster_id"] == id);
  REQUIRE(Walcut(fmt::format("scan '{}/node-0' --out '{}/s0.json'", kHealthy, t.path)).code == 0);
  CHECK(JsonFile(t.path + "/s0.json")["cluster_id"] == id);
  REQUIRE(Walcut(fmt::format("cuts '{}' --verdict-out '{}/v.json' --cut 4", kHealthy, t.path)).code == 0);
  CHECK(JsonFile(t.path + "/v.json")["cluster_id"] == id);
  REQUIRE(Walcut(fmt::format("restore '{}' --cut 4 --out '{}/r'", kHealthy, t.path)).code == 0);
  const json manifest = JsonFile(t.path + "/r/manifest.json");
  CHECK(manifest["schema"] == "walcut.restore-manifest/2");
  CHECK(manifest["cluster"]["cluster_id"] == id);
  REQUIRE(
      Walcut(fmt::format("restore '{}/node-1' --verdict '{}/v.json' --out '{}/p1'", kHealthy, t.path, t.path)).code ==
      0);
  const json part = JsonFile(t.path + "/p1/manifest.json");
  CHECK(part["schema"] == "walcut.restore-part/2");
  CHECK(part["cluster_id"] == id);
  REQUIRE(Walcut(fmt::format("snapshot create '{}' --repo '{}/repo' --full --from full-1500", kHealthy, t.path)).code ==
          0);
  CHECK(JsonFile(t.path + "/repo/walcut-repository.json")["schema"] == "walcut.repository/2");
  CHECK(JsonFile(t.path + "/repo/f-full-1500/manifest.json")["cluster_id"] == id);
  CHECK(JsonOf(Walcut(fmt::format("snapshot list '{}/repo' --format json", t.path)))["artifacts"][0]["cluster_id"] ==
        id);
  CHECK(Walcut(fmt::format("snapshot list '{}/repo'", t.path)).out.find("cluster " + id) != std::string::npos);
}

TEST_CASE("consistency: a cluster.json and restore outputs written by older walcut still read", "[cli][consistency]") {
  TempDir t;
  const std::string dir = t.path + "/c";
  REQUIRE(std::system(fmt::format("cp -r '{}' '{}'", kHealthy, dir).c_str()) == 0);
  const json current = JsonFile(dir + "/cluster.json");
  Spit(dir + "/cluster.json", Version1(current).dump(2) + "\n");

  // Read as before: the same cuts, the same check, the same restore.
  const Run check = Walcut(fmt::format("check '{}'", dir));
  INFO(check.out << check.err);
  CHECK(check.code == 0);
  const Run restore = Walcut(fmt::format("restore '{}' --cut 3 --out '{}/r3'", dir, t.path));
  INFO(restore.err);
  REQUIRE(restore.code == 0);
  const Run fresh = Walcut(fmt::format("restore '{}' --cut 3 --out '{}/r3-current'", kHealthy, t.path));
  REQUIRE(fresh.code == 0);
  for (int n = 0; n < 3; ++n) {
    const std::string f = fmt::format("/node-{}.snap", n);
    CHECK(Slurp(t.path + "/r3" + f) == Slurp(t.path + "/r3-current" + f));
  }
  // The copy the manifest embeds is made current.
  const json m = JsonFile(t.path + "/r3/manifest.json");
  CHECK(m["cluster"]["schema"] == "walcut.cluster/2");
  CHECK(m["cluster"]["cluster_id"] == current["cluster_id"]);

  // A repository artifact of the cluster holds cluster.json in the current form.
  const Run c = Walcut(fmt::format("snapshot create '{}' --repo '{}/repo' --full --from full-1500", dir, t.path));
  INFO(c.err);
  REQUIRE(c.code == 0);
  CHECK(JsonFile(t.path + "/repo/f-full-1500/cluster.json")["schema"] == "walcut.cluster/2");
  CHECK(Walcut(fmt::format("snapshot check '{}/repo'", t.path)).code == 0);

  // A restore output as older walcut wrote its manifest serves as a base.
  json old = m;
  old.erase("schema");
  old["format"] = "walcut-restore";
  old["version"] = 1;
  old["cluster"] = Version1(old["cluster"]);
  Spit(t.path + "/r3/manifest.json", old.dump(2) + "\n");
  const Run next = Walcut(fmt::format("restore '{}' --cut 5 --base '{}/r3' --out '{}/r5'", dir, t.path, t.path));
  INFO(next.out << next.err);
  CHECK(next.code == 0);
  CHECK(next.out.find("cut-3 (restored)") != std::string::npos);
  CHECK(Walcut(fmt::format("snapshot show '{}/r3' --format json", t.path)).code == 0);

  // Per-node restores as older walcut wrote them assemble.
  REQUIRE(Walcut(fmt::format("cuts '{}' --verdict-out '{}/v.json' --cut 4", dir, t.path)).code == 0);
  const json verdict_cluster = json::parse(JsonFile(t.path + "/v.json")["cluster_json"].get<std::string>());
  CHECK(verdict_cluster["schema"] == "walcut.cluster/2");  // the copy it carries is current
  std::string parts;
  for (int i = 0; i < 3; ++i) {
    const std::string p = fmt::format("{}/p{}", t.path, i);
    const Run r = Walcut(fmt::format("restore '{}/node-{}' --verdict '{}/v.json' --out '{}'", dir, i, t.path, p));
    INFO(r.err);
    REQUIRE(r.code == 0);
    json pm = JsonFile(p + "/manifest.json");
    pm.erase("schema");
    pm["format"] = "walcut-restore-part";
    pm["version"] = 1;
    Spit(p + "/manifest.json", pm.dump(2) + "\n");
    parts += " '" + p + "'";
  }
  const Run a = Walcut(fmt::format("restore assemble '{}/asm'{}", t.path, parts));
  INFO(a.out << a.err);
  CHECK(a.code == 0);
  CHECK(JsonFile(t.path + "/asm/manifest.json")["schema"] == "walcut.restore-manifest/2");
  // A whole restore is not a part, in either version.
  const Run wrong = Walcut(fmt::format("restore assemble '{}/asm2' '{}/r3'", t.path, t.path));
  CHECK(wrong.code == 2);
  CHECK(wrong.err.find("it is a whole restore already") != std::string::npos);
}

}  // namespace walcut::test
