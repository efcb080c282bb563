// `walcut restore --cut K` reads each WAL only up to where cut K is decided:
// the segments after that are never opened (a FIFO, garbage or a directory
// named like a later segment changes nothing), the report says how much it
// read, a restore from an earlier restore reads from that restore's
// positions on, and --latest (every cut's verdict) still reads everything.
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

namespace {

// `walcut ARGS`, bounded in time: a command that waited on a FIFO would be
// ended by timeout (exit 124).
Run WalcutTimed(const std::string& args) {
  TempDir io;
  const std::string cmd =
      fmt::format("timeout 60 '{}' {} >'{}/out' 2>'{}/err' </dev/null", WALCUT_BIN, args, io.path, io.path);
  const int st = std::system(cmd.c_str());
  Run r;
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.out = Slurp(io.path + "/out");
  r.err = Slurp(io.path + "/err");
  return r;
}

std::string CopyHealthy(const std::string& to) {
  REQUIRE(std::system(fmt::format("cp -r '{}/samples/healthy' '{}'", WALCUT_SOURCE_DIR, to).c_str()) == 0);
  return to;
}

// Replaces every node's segments from index `from` on with `what`.
void ReplaceSegments(const std::string& cluster, uint64_t from, const std::string& what) {
  for (int n = 0; n < 3; ++n) {
    for (const auto& e : fs::directory_iterator(fmt::format("{}/node-{}/wal", cluster, n))) {
      const std::string name = e.path().filename().string();
      if (std::stoull(name.substr(0, 16), nullptr, 16) < from) continue;
      fs::remove(e.path());
      const std::string p = e.path().string();
      if (what == "fifo") {
        REQUIRE(::mkfifo(p.c_str(), 0600) == 0);
      } else if (what == "dir") {
        fs::create_directory(p);
      } else {
        walcut::test::Spit(p, std::string(5000, '\x5a'));
      }
    }
  }
}

}  // namespace

TEST_CASE("restore --cut K never opens the segments after the ones that decide K", "[cli]") {
  TempDir t;
  const std::string good = CopyHealthy(t.path + "/good");
  const Run ref = WalcutTimed(fmt::format("restore '{}' --cut 1 --out '{}/ref' --format json", good, t.path));
  REQUIRE(ref.code == 0);
  const json rj = json::parse(ref.out);
  // The scan read a part of the WAL, less than half of what --latest reads
  // (every cut's verdict: the whole WAL).
  CHECK(rj["verdict_scan"]["read"] == "to-cut");
  const Run whole = WalcutTimed(fmt::format("restore '{}' --latest --dry-run --format json", good));
  REQUIRE(whole.code == 0);
  const json wj = json::parse(whole.out);
  CHECK(wj["verdict_scan"]["read"] == "whole");
  const uint64_t wal = wj["verdict_scan"]["bytes"].get<uint64_t>();
  CHECK(rj["verdict_scan"]["bytes"].get<uint64_t>() < wal / 2);
  CHECK(rj["bytes_read"].get<uint64_t>() < rj["verdict_scan"]["bytes"].get<uint64_t>());
  for (const std::string what : {"fifo", "garbage", "dir"}) {
    INFO("segments 4 and later replaced by: " << what);
    const std::string c = CopyHealthy(fmt::format("{}/{}", t.path, what));
    ReplaceSegments(c, 4, what);
    const std::string out = fmt::format("{}/{}-out", t.path, what);
    const Run r = WalcutTimed(fmt::format("restore '{}' --cut 1 --out '{}' --format json", c, out));
    INFO(r.err);
    REQUIRE(r.code == 0);
    for (int n = 0; n < 3; ++n) {
      CHECK(Slurp(fmt::format("{}/node-{}.snap", out, n)) == Slurp(fmt::format("{}/ref/node-{}.snap", t.path, n)));
    }
    // A restore that needs them, or every cut's verdict, reads them: it
    // fails on a file it cannot read, and garbage is damage there.
    const Run need = WalcutTimed(fmt::format("restore '{}' --cut 6 --dry-run", c));
    CHECK(need.code != 0);
    CHECK(need.code != 124);
    const Run latest = WalcutTimed(fmt::format("restore '{}' --latest --dry-run --format json", c));
    CHECK(latest.code != 124);
    if (what == "garbage") {
      REQUIRE(latest.code == 0);
      CHECK(json::parse(latest.out)["cut"].get<uint64_t>() < 6);
    } else {
      CHECK(latest.code == 3);
    }
  }
}

TEST_CASE("restore --cut K from the restore of an earlier cut reads from its positions, same bytes", "[cli]") {
  TempDir t;
  const std::string c = CopyHealthy(t.path + "/c");
  REQUIRE(WalcutTimed(fmt::format("restore '{}' --cut 4 --out '{}/r4'", c, t.path)).code == 0);
  const Run genesis =
      WalcutTimed(fmt::format("restore '{}' --cut 5 --base genesis --out '{}/g5' --format json", c, t.path));
  REQUIRE(genesis.code == 0);
  const Run delta =
      WalcutTimed(fmt::format("restore '{}' --cut 5 --base '{}/r4' --out '{}/d5' --format json", c, t.path, t.path));
  REQUIRE(delta.code == 0);
  const json g = json::parse(genesis.out);
  const json d = json::parse(delta.out);
  CHECK(g["verdict_scan"]["read"] == "to-cut");
  CHECK(d["verdict_scan"]["read"] == "from-base");
  CHECK(d["verdict_scan"]["bytes"].get<uint64_t>() < g["verdict_scan"]["bytes"].get<uint64_t>() / 2);
  for (int n = 0; n < 3; ++n) {
    CHECK(Slurp(fmt::format("{}/d5/node-{}.snap", t.path, n)) == Slurp(fmt::format("{}/g5/node-{}.snap", t.path, n)));
  }
  // The segments before the base's positions are not opened either.
  const std::string base_manifest = Slurp(t.path + "/r4/manifest.json");
  const json m = json::parse(base_manifest);
  for (const auto& e : m["nodes"]) {
    const std::string from = e["continue_from"].get<std::string>();
    const uint64_t seg = std::stoull(from.substr(0, from.find('/')), nullptr, 16);
    for (uint64_t s = 0; s < seg; ++s) {
      const std::string p = fmt::format("{}/node-{}/wal/{:016X}.wal.zst", c, e["node"].get<int>(), s);
      if (fs::exists(p)) {
        fs::remove(p);
        REQUIRE(::mkfifo(p.c_str(), 0600) == 0);
      }
    }
  }
  const Run again = WalcutTimed(fmt::format("restore '{}' --cut 5 --base '{}/r4' --out '{}/e5'", c, t.path, t.path));
  INFO(again.err);
  CHECK(again.code == 0);
}

TEST_CASE("restore --cut K of an inconsistent cut is refused with the whole WAL's reason", "[cli]") {
  const std::string c = fmt::format("{}/samples/crash-during-cut", WALCUT_SOURCE_DIR);
  const Run cuts = WalcutTimed(fmt::format("cuts '{}' --format json", c));
  REQUIRE(cuts.code <= 1);
  const json j = json::parse(cuts.out);
  size_t refused = 0;
  for (const auto& g : j["cuts"]) {
    if (g["status"] == "consistent") continue;
    const uint64_t k = g["cut"].get<uint64_t>();
    INFO("cut " << k << ": " << g["reason"]);
    const Run r = WalcutTimed(fmt::format("restore '{}' --cut {} --dry-run", c, k));
    CHECK(r.code == 1);
    CHECK(r.err.find(g["reason"].get<std::string>()) != std::string::npos);
    ++refused;
  }
  CHECK(refused > 0);
}
