// --io-threads 0: dump -j1 and restore -j1 on one thread (for comparisons with
// single-threaded tools) give the same output as with their helper thread;
// the option takes 0 or 1, and a restore takes it only for a cluster DIR.
#include <filesystem>
#include <string>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "cli_support.h"

namespace fs = std::filesystem;
using walcut::test::Slurp;
using walcut::test::TempDir;
using walcut::test::Walcut;

namespace {

std::string Healthy() { return std::string(WALCUT_SOURCE_DIR) + "/samples/healthy"; }

}  // namespace

TEST_CASE("dump -j1 --io-threads 0 prints what dump -j1 prints", "[cli]") {
  for (const char* args : {"", " --format json", " --node 1 --limit 500"}) {
    INFO(args);
    const auto with = Walcut(fmt::format("dump -j1 '{}'{}", Healthy(), args));
    const auto without = Walcut(fmt::format("dump -j1 --io-threads 0 '{}'{}", Healthy(), args));
    REQUIRE(with.code == 0);
    CHECK(without.code == 0);
    CHECK(without.out.size() > 1000);
    CHECK(without.out == with.out);
    CHECK(without.err == with.err);
  }
}

TEST_CASE("restore -j1 --io-threads 0 writes the same node files", "[cli]") {
  TempDir d;
  const auto with = Walcut(fmt::format("restore '{}' --cut 5 -j1 -q --out '{}/a'", Healthy(), d.path));
  const auto without =
      Walcut(fmt::format("restore '{}' --cut 5 -j1 --io-threads 0 -q --out '{}/b'", Healthy(), d.path));
  REQUIRE(with.code == 0);
  REQUIRE(without.code == 0);
  for (int i = 0; i < 3; ++i) {
    INFO("node " << i);
    const std::string a = Slurp(fmt::format("{}/a/node-{}.snap", d.path, i));
    CHECK(a.size() > 100);
    CHECK(Slurp(fmt::format("{}/b/node-{}.snap", d.path, i)) == a);
  }
}

TEST_CASE("dump and restore take --io-threads 0 or 1, restore only for a cluster DIR", "[cli]") {
  TempDir d;
  const auto two = Walcut(fmt::format("dump --io-threads 2 '{}'", Healthy()));
  CHECK(two.code == 2);
  CHECK(two.err == "walcut: dump: --io-threads: must be 0..1 (see walcut help dump)\n");
  const auto neg = Walcut(fmt::format("restore '{}' --cut 5 --io-threads -1 --out '{}/x'", Healthy(), d.path));
  CHECK(neg.code == 2);
  CHECK(neg.err == "walcut: restore: --io-threads: must be 0..1 (see walcut help restore)\n");
  const auto repo = Walcut(fmt::format("restore --repo '{}/r' --latest --io-threads 0 --out '{}/x'", d.path, d.path));
  CHECK(repo.code == 2);
  CHECK(repo.err ==
        "walcut: --io-threads 0 goes with a restore of a cluster DIR (not --verdict, --summaries or --repo)\n");
  CHECK_FALSE(fs::exists(d.path + "/x"));
}
