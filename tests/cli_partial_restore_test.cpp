// walcut restore --keys PREFIX / --partition P (a partial restore): what it
// prints and writes, what snapshot show, snapshot check and diff say of its
// output, the base rule, the same subset restored from a repository, and
// each refusal (exit 2, one line).
#include <filesystem>
#include <string>

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_support.h"

namespace fs = std::filesystem;
using nlohmann::json;
using walcut::test::Run;
using walcut::test::Slurp;
using walcut::test::TempDir;
using walcut::test::Walcut;

namespace {

const std::string kHealthy = std::string(WALCUT_SOURCE_DIR) + "/samples/healthy";

// The first line of stderr, for one-line refusals.
std::string FirstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

}  // namespace

TEST_CASE("restore --keys/--partition writes the subset, and show, check and diff say so", "[cli][restore][partial]") {
  TempDir t;
  const std::string whole = t.path + "/whole", part = t.path + "/part";
  REQUIRE(Walcut(fmt::format("restore '{}' --cut 2 --out '{}' -q", kHealthy, whole)).code == 0);
  Run r = Walcut(fmt::format("restore '{}' --cut 2 --keys acct/0001 --partition 3 --out '{}' -q", kHealthy, part));
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("  subset: keys acct/0001 or partition 3 (of 12) (a partial restore: the node files hold these "
                   "keys only)\n") != std::string::npos);
  const json m = json::parse(Slurp(part + "/manifest.json"));
  CHECK(m["schema"] == "walcut.restore-manifest/3");
  CHECK(m["subset"] ==
        json({{"key_prefixes", {"acct/0001"}}, {"partitions", {3}}, {"partition_count", 12}, {"rule", "union"}}));

  // JSON report of the restore.
  r = Walcut(fmt::format("restore '{}' --cut 2 --partition 3,5 --dry-run --format json -q", kHealthy));
  REQUIRE(r.code == 0);
  CHECK(json::parse(r.out)["subset"] ==
        json({{"key_prefixes", json::array()}, {"partitions", {3, 5}}, {"partition_count", 12}}));
  r = Walcut(fmt::format("restore '{}' --cut 2 --dry-run --format json -q", kHealthy));
  CHECK(json::parse(r.out)["subset"].is_null());

  // snapshot show
  r = Walcut(fmt::format("snapshot show '{}'", part));
  REQUIRE(r.code == 0);
  CHECK(walcut::test::Lines(r.out).at(1) ==
        "subset: keys acct/0001 or partition 3 (of 12) (a partial restore: each node file, and its fingerprint, "
        "covers these keys only)");
  r = Walcut(fmt::format("snapshot show '{}' --format json", part));
  CHECK(json::parse(r.out)["subset"]["partitions"] == json({3}));
  r = Walcut(fmt::format("snapshot show '{}' --format json", whole));
  CHECK(json::parse(r.out)["subset"].is_null());
  CHECK(Walcut(fmt::format("snapshot show '{}'", whole)).out.find("subset") == std::string::npos);

  // snapshot check: placement only (the bank total needs every key).
  r = Walcut(fmt::format("snapshot check '{}'", part));
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(r.out.find("checks: placement\n") != std::string::npos);
  CHECK(r.out.find("subset: keys acct/0001 or partition 3 (of 12) (a partial restore: the bank and cycle "
                   "invariants need every key and are not run)") != std::string::npos);
  r = Walcut(fmt::format("snapshot check '{}' --format json", part));
  CHECK(json::parse(r.out)["checks"] == json({"placement"}));
  CHECK(json::parse(r.out)["subset"]["key_prefixes"] == json({"acct/0001"}));
  r = Walcut(fmt::format("snapshot check '{}' --check bank", part));
  CHECK(r.code == 2);
  CHECK(FirstLine(r.err) ==
        fmt::format("walcut: --check bank: {} is a partial restore (keys acct/0001 or partition 3 (of 12)); the bank "
                    "invariants need every key",
                    part));
  // The whole restore still runs every check.
  r = Walcut(fmt::format("snapshot check '{}' --format json", whole));
  CHECK(json::parse(r.out)["checks"] == json({"placement", "bank"}));

  // diff: the partial output is the whole one without the other keys.
  r = Walcut(fmt::format("diff '{}' '{}' --format json", whole, part));
  CHECK(r.code == 1);
  const json d = json::parse(r.out);
  CHECK(d["a"]["subset"].is_null());
  CHECK(d["b"]["subset"]["partitions"] == json({3}));
  CHECK(d["summary"]["only_a"].get<uint64_t>() > 0);
  CHECK(d["summary"]["only_b"] == 0);
  CHECK(d["summary"]["changed"] == 0);
  r = Walcut(fmt::format("diff '{}' '{}'", whole, part));
  const auto lines = walcut::test::Lines(r.out);
  CHECK(lines.at(1) == fmt::format("B: {} (3 nodes, snapshot cut-2; partial restore: keys acct/0001 or partition 3 "
                                   "(of 12))",
                                   part));
  CHECK(lines.at(2) ==
        "note: A and B hold different sets of keys; keys that only one of them holds count as differences");
}

TEST_CASE("restore: a partial output is a base only for the same subset, a whole one for any",
          "[cli][restore][partial]") {
  TempDir t;
  const std::string whole = t.path + "/whole", part = t.path + "/part";
  REQUIRE(Walcut(fmt::format("restore '{}' --cut 2 --out '{}' -q", kHealthy, whole)).code == 0);
  REQUIRE(Walcut(fmt::format("restore '{}' --cut 2 --keys acct/0001 --out '{}' -q", kHealthy, part)).code == 0);
  for (const std::string other : {"", "--keys acct/0002", "--keys acct/0001 --partition 1"}) {
    INFO(other);
    Run r = Walcut(fmt::format("restore '{}' --cut 5 --base '{}' {} --out '{}/x' -q", kHealthy, part, other, t.path));
    CHECK(r.code == 2);
    CHECK(FirstLine(r.err).find(fmt::format("walcut: base {} is a partial restore (keys acct/0001); it serves only a "
                                            "restore of the same subset, not of ",
                                            part)) == 0);
    CHECK_FALSE(fs::exists(t.path + "/x"));
  }
  // The base rule is checked before the WAL is read: before the cut is looked for.
  Run r = Walcut(fmt::format("restore '{}' --cut 99 --base '{}' --out '{}/x' -q", kHealthy, part, t.path));
  CHECK(r.code == 2);
  CHECK(FirstLine(r.err) == fmt::format("walcut: base {} is a partial restore (keys acct/0001); it serves only a "
                                        "restore of the same subset, not of every key",
                                        part));
  // The same subset on the partial base, and on the whole one, and from the
  // default base: the same node files.
  REQUIRE(Walcut(fmt::format("restore '{}' --cut 5 --base '{}' --keys acct/0001 --out '{}/on-part' -q", kHealthy, part,
                             t.path))
              .code == 0);
  REQUIRE(Walcut(fmt::format("restore '{}' --cut 5 --base '{}' --keys acct/0001 --out '{}/on-whole' -q", kHealthy,
                             whole, t.path))
              .code == 0);
  REQUIRE(Walcut(fmt::format("restore '{}' --cut 5 --keys acct/0001 --out '{}/default' -q", kHealthy, t.path)).code ==
          0);
  CHECK(Walcut(fmt::format("diff '{}/on-part' '{}/on-whole'", t.path, t.path)).code == 0);
  CHECK(Walcut(fmt::format("diff '{}/on-part' '{}/default'", t.path, t.path)).code == 0);
}

TEST_CASE("restore --keys/--partition refusals: exit 2, one line, nothing written", "[cli][restore][partial]") {
  TempDir t;
  const std::string out = t.path + "/out";
  auto refused = [&](const std::string& args) {
    Run r = Walcut(args);
    INFO(args << "\n" << r.out << r.err);
    CHECK(r.code == 2);
    CHECK_FALSE(fs::exists(out));
    return FirstLine(r.err);
  };
  CHECK(refused(fmt::format("restore '{}' --cut 2 --keys '' --out '{}'", kHealthy, out)) ==
        "walcut: --keys: an empty prefix names every key; give a prefix, or no --keys");
  CHECK(refused(fmt::format("restore '{}' --cut 2 --partition 12 --out '{}'", kHealthy, out)) ==
        fmt::format("walcut: --partition 12: {} has partitions 0..11", kHealthy));
  // Checked before the WAL is read: before the cut is looked for.
  CHECK(refused(fmt::format("restore '{}' --cut 99 --partition 2,12 --out '{}'", kHealthy, out)) ==
        fmt::format("walcut: --partition 12: {} has partitions 0..11", kHealthy));
  CHECK(refused(fmt::format("restore '{}' --cut 2 --partition x --out '{}'", kHealthy, out)).find("--partition") !=
        std::string::npos);
  CHECK(refused(fmt::format("restore '{}' --cut 2 --keys acct/ --check auto --out '{}'", kHealthy, out)) ==
        "walcut: --check runs the workload invariants, which need every key: not with --keys or --partition");
  CHECK(refused(fmt::format("restore '{}/node-0' --verdict '{}/v.json' --keys acct/ --out '{}'", kHealthy, t.path, out))
            .find("walcut: --keys and --partition are not for a per-node restore") == 0);
  // A cluster without cluster.json has no partitions.
  fs::copy(kHealthy, t.path + "/bare", fs::copy_options::recursive);
  fs::remove(t.path + "/bare/cluster.json");
  CHECK(refused(fmt::format("restore '{}/bare' --cut 2 --partition 0 --out '{}'", t.path, out)) ==
        fmt::format("walcut: --partition: {}/bare has no partitions (no cluster.json says how keys map to them); use "
                    "--keys",
                    t.path));
  CHECK(Walcut(fmt::format("restore '{}/bare' --cut 2 --keys acct/ --dry-run -q", t.path)).code == 0);
}

TEST_CASE("restore --repo --keys: each step restores the subset, as from the cluster",
          "[cli][restore][partial][repo]") {
  TempDir t;
  const std::string c = t.path + "/c", repo = t.path + "/repo";
  fs::copy(kHealthy, c, fs::copy_options::recursive);
  REQUIRE(Walcut(fmt::format("snapshot create '{}' --repo '{}' --full --from full-1500 -q", c, repo)).code == 0);
  REQUIRE(Walcut(fmt::format("snapshot create '{}' --repo '{}' --incremental --cut 4 -q", c, repo)).code == 0);
  REQUIRE(Walcut(fmt::format("snapshot create '{}' --repo '{}' --incremental --cut 5 -q", c, repo)).code == 0);
  Run r = Walcut(
      fmt::format("restore --repo '{}' i-cut-5 --keys acct/0001 --partition 7 --out '{}/from-repo'", repo, t.path));
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("  subset: keys acct/0001 or partition 7 (a partial restore)\n") != std::string::npos);
  REQUIRE(Walcut(fmt::format("restore '{}' --cut 5 --keys acct/0001 --partition 7 --out '{}/from-dir' -q", c, t.path))
              .code == 0);
  CHECK(Walcut(fmt::format("diff '{}/from-repo' '{}/from-dir'", t.path, t.path)).code == 0);
  const json m = json::parse(Slurp(t.path + "/from-repo/manifest.json"));
  CHECK(m["schema"] == "walcut.restore-manifest/3");
  CHECK(m["subset"]["partitions"] == json({7}));
  // Refusals: a full alone (copied, not restored), a partition out of range.
  r = Walcut(fmt::format("restore --repo '{}' f-full-1500 --keys acct/ --out '{}/x'", repo, t.path));
  CHECK(r.code == 2);
  CHECK(FirstLine(r.err) ==
        "walcut: --keys/--partition: f-full-1500 is a full artifact, restored by copying its files; a partial restore "
        "from a repository needs an increment as the target");
  r = Walcut(fmt::format("restore --repo '{}' i-cut-5 --partition 40 --out '{}/x'", repo, t.path));
  CHECK(r.code == 2);
  CHECK(FirstLine(r.err).find("walcut: --partition 40: ") == 0);
  CHECK_FALSE(fs::exists(t.path + "/x"));
}
