// The repository of snapshot artifacts end to end through the walcut binary:
// snapshot create / list / check / expire and restore --repo, golden outputs
// for list and check (WALCUT_UPDATE_GOLDEN=1 rewrites tests/golden/repo/),
// refusals and their exit codes, create killed at every I/O step
// (WALCUT_FAIL_IO_AT), and a chain restore byte-identical to a restore from
// the live WAL.
#include <cstdlib>
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

std::string GoldenPath(const std::string& name) {
  return std::string(WALCUT_SOURCE_DIR) + "/tests/golden/repo/" + name;
}

// Temporary paths differ between runs: the repository becomes @REPO@.
std::string Normalize(std::string s, const std::string& repo) {
  for (size_t p = s.find(repo); p != std::string::npos; p = s.find(repo, p)) s.replace(p, repo.size(), "@REPO@");
  return s;
}

void Golden(const std::string& name, const std::string& got) { walcut::test::CompareGolden(GoldenPath(name), got); }

// A cluster whose nodes each write one segment (16 MiB segments): same seed,
// same bytes, so the goldens hold.
std::string MakeRunCluster(const std::string& dir) {
  const std::string c = dir + "/cluster";
  auto r =
      Walcut(fmt::format("run '{}' --nodes 3 --backups 1 --txs 2400 --cuts 4 --full-snapshot-at 800 --seed 5 "
                         "--segment-size 16MiB --epoch 2026-11-30T12:00:00Z",
                         c));
  INFO(r.err);
  REQUIRE(r.code == 0);
  return c;
}

void Flip(const std::string& path, size_t at) {
  std::string b = Slurp(path);
  REQUIRE(!b.empty());
  b[at % b.size()] ^= 0x01;
  Spit(path, b);
}

}  // namespace

TEST_CASE("cli repo: create, list, check (golden), restore through the chain, expire", "[cli][repo]") {
  TempDir t;
  const std::string c = MakeRunCluster(t.path);
  const std::string repo = t.path + "/repo";
  auto r = Walcut(fmt::format("snapshot create '{}' --repo '{}' --full --from full-800", c, repo));
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  r = Walcut(fmt::format("snapshot create '{}' --repo '{}' --incremental --cut 3", c, repo));
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("chain: f-full-800 <- i-cut-3") != std::string::npos);
  r = Walcut(fmt::format("snapshot create '{}' --repo '{}' --incremental --latest --format json", c, repo));
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const json created = json::parse(r.out);
  const uint64_t latest = created["cut"].get<uint64_t>();
  CHECK(latest > 3);
  // A synthetic full of the latest cut, rolled up from the chain without the cluster.
  r = Walcut(fmt::format("snapshot create --repo '{}' --full --cut {}", repo, latest));
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);

  r = Walcut(fmt::format("snapshot list '{}'", repo));
  REQUIRE(r.code == 0);
  Golden("list.txt", Normalize(r.out, repo));
  r = Walcut(fmt::format("snapshot list '{}' --format json", repo));
  REQUIRE(r.code == 0);
  Golden("list.json", Normalize(r.out, repo));
  const json list = json::parse(r.out);
  CHECK(list["schema"] == "walcut.repository.list/1");
  CHECK(list["artifacts"].size() == 4);
  CHECK(list["restore_targets"].size() == 4);

  r = Walcut(fmt::format("snapshot check '{}'", repo));
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  Golden("check.txt", Normalize(r.out, repo));
  r = Walcut(fmt::format("snapshot check '{}' --format json", repo));
  CHECK(r.code == 0);
  Golden("check.json", Normalize(r.out, repo));
  r = Walcut(fmt::format("snapshot check '{}' --format junit", repo));
  CHECK(r.code == 0);
  RequireValidJunit(r.out);
  Golden("check.junit.xml", Normalize(r.out, repo));
  r = Walcut(fmt::format("snapshot check '{}' --restore --format json", repo));
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(json::parse(r.out)["summary"]["restores"].get<uint64_t>() == 4);

  // Restore through the chain == restore of the same cut from the live WAL.
  r = Walcut(fmt::format("restore --repo '{}' --latest --dry-run", repo));
  CHECK(r.code == 0);
  r = Walcut(fmt::format("restore --repo '{}' i-cut-{} --dry-run", repo, latest));
  CHECK(r.code == 0);
  CHECK(r.out.find(fmt::format("apply i-cut-{}", latest)) != std::string::npos);
  r = Walcut(fmt::format("restore --repo '{}' i-cut-{} --out '{}/chained'", repo, latest, t.path));
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  r = Walcut(fmt::format("restore '{}' --cut {} --out '{}/live'", c, latest, t.path));
  REQUIRE(r.code == 0);
  for (int i = 0; i < 3; ++i) {
    CHECK(Slurp(fmt::format("{}/chained/node-{}.snap", t.path, i)) ==
          Slurp(fmt::format("{}/live/node-{}.snap", t.path, i)));
    CHECK(Slurp(fmt::format("{}/live/node-{}.snap", t.path, i)) ==
          Slurp(fmt::format("{}/f-cut-{}/node-{}.snap", repo, latest, i)));
  }
  r = Walcut(fmt::format("restore --repo '{}' --cut 3 --out '{}/chained'", repo, t.path));
  CHECK(r.code == 2);  // OUT exists

  // Expire: keep the newest full, so the runtime full's chain goes.
  r = Walcut(fmt::format("snapshot expire '{}' --keep-full 1 --dry-run", repo));
  CHECK(r.code == 0);
  CHECK(r.out.find("would remove i-cut-3") != std::string::npos);
  CHECK(fs::exists(repo + "/i-cut-3"));
  r = Walcut(fmt::format("snapshot expire '{}' --keep-full 1", repo));
  CHECK(r.code == 0);
  CHECK_FALSE(fs::exists(repo + "/i-cut-3"));
  CHECK_FALSE(fs::exists(repo + "/f-full-800"));
  CHECK(fs::exists(repo + fmt::format("/f-cut-{}", latest)));
  r = Walcut(fmt::format("snapshot check '{}' --restore", repo));
  CHECK(r.code == 0);
}

TEST_CASE("cli repo: tampered bytes, a missing link, refusals and usage errors", "[cli][repo]") {
  TempDir t;
  const std::string c = MakeRunCluster(t.path);
  const std::string repo = t.path + "/repo";
  REQUIRE(Walcut(fmt::format("snapshot create '{}' --repo '{}' --full --from full-800", c, repo)).code == 0);
  REQUIRE(Walcut(fmt::format("snapshot create '{}' --repo '{}' --incremental --cut 3", c, repo)).code == 0);
  REQUIRE(Walcut(fmt::format("snapshot create '{}' --repo '{}' --incremental --cut 4", c, repo)).code == 0);
  const std::string seg = repo + "/i-cut-3/node-1/wal/0000000000000000.wal.zst";
  REQUIRE(fs::exists(seg));
  const std::string keep = Slurp(seg);
  Flip(seg, keep.size() / 2);
  auto r = Walcut(fmt::format("snapshot check '{}'", repo));
  CHECK(r.code == 1);
  CHECK(r.out.find("i-cut-3/node-1/wal/0000000000000000.wal.zst") != std::string::npos);
  Golden("check-tampered.txt", Normalize(r.out, repo));
  r = Walcut(fmt::format("snapshot check '{}' --format json", repo));
  CHECK(r.code == 1);
  CHECK(json::parse(r.out)["summary"]["exit_code"] == 1);
  Spit(seg, keep);
  CHECK(Walcut(fmt::format("snapshot check '{}'", repo)).code == 0);

  // The middle of the chain gone.
  fs::rename(repo + "/i-cut-3", t.path + "/away");
  r = Walcut(fmt::format("snapshot check '{}'", repo));
  CHECK(r.code == 1);
  CHECK(r.out.find("needs its parent i-cut-3, which is missing") != std::string::npos);
  r = Walcut(fmt::format("restore --repo '{}' i-cut-4 --out '{}/o'", repo, t.path));
  CHECK(r.code == 1);
  CHECK_FALSE(fs::exists(t.path + "/o"));
  r = Walcut(fmt::format("snapshot list '{}'", repo));
  CHECK(r.code == 0);
  CHECK(r.out.find("cut 4: i-cut-4") == std::string::npos);  // not a restore target any more
  fs::rename(t.path + "/away", repo + "/i-cut-3");

  // An inconsistent cut is refused with its reason.
  const std::string crash = std::string(WALCUT_SOURCE_DIR) + "/samples/crash-during-cut";
  const std::string repo2 = t.path + "/repo2";
  REQUIRE(Walcut(fmt::format("snapshot create '{}' --repo '{}' --full --cut 2", crash, repo2)).code == 0);
  r = Walcut(fmt::format("snapshot create '{}' --repo '{}' --incremental --cut 3", crash, repo2));
  CHECK(r.code == 1);
  CHECK(r.err.find("cut 3 is inconsistent") != std::string::npos);
  // A parent of another cluster.
  r = Walcut(fmt::format("snapshot create '{}' --repo '{}' --incremental --latest --parent f-cut-2", c, repo2));
  CHECK(r.code == 1);
  CHECK(r.err.find("belongs to cluster") != std::string::npos);
  // Usage: no such artifact, not a repository, options only a repository takes.
  CHECK(Walcut(fmt::format("restore --repo '{}' nope --out '{}/o2'", repo, t.path)).code == 2);
  CHECK(Walcut(fmt::format("snapshot list '{}'", c)).code == 2);
  CHECK(Walcut(fmt::format("restore --repo '{}' i-cut-4 --force --out '{}/o3'", repo, t.path)).code == 2);
  CHECK(Walcut("restore --cut 2 --out /nonexistent/o").code == 2);  // neither DIR nor --repo
  CHECK(Walcut(fmt::format("snapshot check '{}/snapshots/full-800' --restore", c)).code == 2);
  CHECK(Walcut(fmt::format("snapshot create '{}' --repo '{}' --incremental", c, repo)).code == 2);
  CHECK(Walcut(fmt::format("snapshot create '{}' --repo '{}'", c, c)).code == 2);
}

TEST_CASE("cli repo: a missing WAL segment is named when creating", "[cli][repo]") {
  TempDir t;
  const std::string c = t.path + "/healthy";
  fs::copy(std::string(WALCUT_SOURCE_DIR) + "/samples/healthy", c, fs::copy_options::recursive);
  const std::string repo = t.path + "/repo";
  REQUIRE(Walcut(fmt::format("snapshot create '{}' --repo '{}' --full --from full-1500", c, repo)).code == 0);
  for (const auto& e : fs::directory_iterator(c + "/node-1/wal")) {
    if (e.path().filename().string().rfind("0000000000000004.wal", 0) == 0) fs::remove(e.path());
  }
  auto r = Walcut(fmt::format("snapshot create '{}' --repo '{}' --incremental --cut 6", c, repo));
  CHECK(r.code == 1);
  INFO(r.err);
  CHECK(r.err.find("Missed WAL segment(s)") != std::string::npos);
  CHECK(r.err.find("node 1: 0000000000000004") != std::string::npos);
  CHECK(fs::directory_iterator(repo) != fs::directory_iterator());
  CHECK(Walcut(fmt::format("snapshot check '{}'", repo)).code == 0);
}

TEST_CASE("cli repo: create killed at every I/O step leaves the repository valid", "[cli][repo]") {
  TempDir t;
  const std::string c = MakeRunCluster(t.path);
  const std::string repo = t.path + "/repo";
  REQUIRE(Walcut(fmt::format("snapshot create '{}' --repo '{}' --full --from full-800", c, repo)).code == 0);
  int n = 1;
  for (;; ++n) {
    INFO("WALCUT_FAIL_IO_AT=" << n);
    REQUIRE(n < 100);
    const std::string cmd = fmt::format(
        "WALCUT_FAIL_IO_AT={} '{}' snapshot create '{}' --repo '{}' --incremental --cut 3 "
        ">/dev/null 2>&1",
        n, WALCUT_SEAMS_BIN, c, repo);
    const int st = std::system(cmd.c_str());
    const int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    auto check = Walcut(fmt::format("snapshot check '{}'", repo));
    INFO(check.out);
    CHECK(check.code == 0);
    if (code == 0 || fs::exists(repo + "/i-cut-3")) break;
    CHECK(code == 3);
  }
  CHECK(n > 3);
}

}  // namespace walcut::test

namespace walcut::test {

TEST_CASE("cli repo: a chain over many segments (samples/healthy) checks clean and restores like the live WAL",
          "[cli][repo]") {
  TempDir t;
  const std::string c = std::string(WALCUT_SOURCE_DIR) + "/samples/healthy";
  const std::string repo = t.path + "/repo";
  REQUIRE(Walcut(fmt::format("snapshot create '{}' --repo '{}' --full --from full-1500", c, repo)).code == 0);
  auto r = Walcut(fmt::format("snapshot create '{}' --repo '{}' --incremental --cut 4", c, repo));
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  r = Walcut(fmt::format("snapshot create '{}' --repo '{}' --incremental --latest", c, repo));
  REQUIRE(r.code == 0);
  CHECK(r.out.find("i-cut-6") != std::string::npos);
  CHECK(r.out.find("in 3 segments") != std::string::npos);
  r = Walcut(fmt::format("snapshot check '{}' --restore", repo));
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  Golden("check-healthy-restore.txt", Normalize(r.out, repo));
  REQUIRE(Walcut(fmt::format("restore --repo '{}' --latest --out '{}/chained'", repo, t.path)).code == 0);
  REQUIRE(Walcut(fmt::format("restore '{}' --cut 6 --out '{}/live'", c, t.path)).code == 0);
  for (int i = 0; i < 3; ++i) {
    CHECK(Slurp(fmt::format("{}/chained/node-{}.snap", t.path, i)) ==
          Slurp(fmt::format("{}/live/node-{}.snap", t.path, i)));
  }
}

}  // namespace walcut::test
