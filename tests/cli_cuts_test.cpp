// End to end: walcut scan, cuts, cut show and restore on the bundled samples.
#include <filesystem>
#include <map>
#include <string>

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_support.h"

namespace fs = std::filesystem;
using nlohmann::json;
using walcut::test::Slurp;
using walcut::test::TempDir;
using walcut::test::Walcut;

namespace {

const std::string kSamples = std::string(WALCUT_SOURCE_DIR) + "/samples";
std::string Sample(const std::string& name) { return kSamples + "/" + name; }

// Every file below dir with its bytes: inputs must come out unchanged.
std::map<std::string, std::string> Tree(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) out[fs::relative(e.path(), dir).string()] = Slurp(e.path().string());
  }
  return out;
}

}  // namespace

TEST_CASE("walcut cuts: healthy sample, every cut consistent, window 1..6, text and JSON", "[cli][cuts]") {
  auto r = Walcut("cuts " + Sample("healthy"));
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(r.out.find("3 nodes, 6 cuts: 6 consistent, 0 inconsistent, 0 incomplete") != std::string::npos);
  CHECK(r.out.find("restore window: cuts 1..6") != std::string::npos);
  CHECK(r.out.find("node 2: finished") != std::string::npos);
  auto j = Walcut("cuts --format json " + Sample("healthy"));
  REQUIRE(j.code == 0);
  const json doc = json::parse(j.out);
  CHECK(doc["schema"] == "walcut.cuts/1");
  CHECK(doc["counts"]["consistent"] == 6);
  CHECK(doc["window"]["earliest"] == 1);
  CHECK(doc["window"]["latest"] == 6);
  REQUIRE(doc["cuts"].size() == 6);
  for (const auto& c : doc["cuts"]) {
    CHECK(c["status"] == "consistent");
    CHECK(c["reason"].is_null());
    CHECK(c["nodes"].size() == 3);
    CHECK(c["transactions"].get<uint64_t>() > 0);
  }
  // Transactions in the cuts only grow (monotonicity).
  for (size_t i = 1; i < 6; ++i) CHECK(doc["cuts"][i]["transactions"] >= doc["cuts"][i - 1]["transactions"]);
}

TEST_CASE("walcut cuts: crash during a cut, cut 3 inconsistent with its reason and nearest consistent cuts",
          "[cli][cuts]") {
  auto r = Walcut("cuts " + Sample("crash-during-cut"));
  INFO(r.out << r.err);
  CHECK(r.code == 1);
  CHECK(r.out.find("5 cuts: 4 consistent, 1 inconsistent, 0 incomplete") != std::string::npos);
  CHECK(r.out.find("reason: CUT_ABORT(3) on node 0 at 3/00000174: recovered-transaction") != std::string::npos);
  CHECK(r.out.find("nearest consistent: before 2, after 4") != std::string::npos);
  auto show = Walcut("cut show " + Sample("crash-during-cut") + " 3");
  CHECK(show.code == 1);
  CHECK(show.out.find("CUT_ABORT at 3/00000253: node-restart") != std::string::npos);
  CHECK(show.out.find("the node restarted during the cut") != std::string::npos);
}

TEST_CASE("walcut cuts: a damaged segment limits the restore window and names the record", "[cli][cuts]") {
  auto r = Walcut("cuts " + Sample("corrupted-segment"));
  INFO(r.out << r.err);
  CHECK(r.code == 1);
  CHECK(r.out.find("restore window: cuts 1..2") != std::string::npos);
  CHECK(r.out.find("latest 2: node 1's WAL is damaged at 2/00008015") != std::string::npos);
  CHECK(r.out.find("so no cut after 2 can be restored") != std::string::npos);
  CHECK(r.out.find("reason: no CUT_START(3) on node 1, its WAL is damaged at 2/00008015") != std::string::npos);
  auto t = Walcut("cuts " + Sample("torn-tail"));
  CHECK(t.code == 0);
  CHECK(t.out.find("node 2 ends in a torn record at 6/000036F3") != std::string::npos);
}

TEST_CASE("walcut cut show: LocalState, ChannelState, markers and checks, a missing cut is a usage error",
          "[cli][cuts]") {
  auto r = Walcut("cut show " + Sample("healthy") + " 3");
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(r.out.find("cut 3: consistent") != std::string::npos);
  CHECK(r.out.find("checks: 1 atomicity ok, 2 monotonicity ok, 3 shape ok, 4 rollback ok, 5 completeness ok; "
                   "marker cross-check ok") != std::string::npos);
  CHECK(r.out.find("LocalState: the WAL prefix up to CUT_START") != std::string::npos);
  CHECK(r.out.find("MARKER DISAGREES") == std::string::npos);
  auto j = Walcut("cut show --format json " + Sample("healthy") + " 3");
  REQUIRE(j.code == 0);
  const json doc = json::parse(j.out);
  CHECK(doc["schema"] == "walcut.cut/1");
  for (const auto& n : doc["nodes"]) {
    for (const auto& t : n["before"]) CHECK(t["marker"].get<uint64_t>() < 3);
    for (const auto& t : n["after"]) CHECK(t["marker"].get<uint64_t>() >= 3);
  }
  auto missing = Walcut("cut show " + Sample("healthy") + " 99");
  CHECK(missing.code == 2);
  CHECK(missing.err.find("cut 99 is not in the WAL (cuts: 1, 2, 3, 4, 5, 6)") != std::string::npos);
  CHECK(Walcut("cut show " + Sample("healthy") + " x").code == 2);
}

TEST_CASE("walcut scan: per-node summaries give the same cuts as the cluster directory", "[cli][cuts]") {
  TempDir t;
  std::string files;
  for (int n = 0; n < 3; ++n) {
    const std::string f = fmt::format("{}/s{}.json", t.path, n);
    auto r = Walcut(fmt::format("scan {}/node-{} --out {}", Sample("healthy"), n, f));
    INFO(r.out << r.err);
    REQUIRE(r.code == 0);
    files += " " + f;
  }
  CHECK(Walcut(fmt::format("scan {}/node-0 --out {}/s0.json", Sample("healthy"), t.path)).code == 2);  // no overwrite
  auto from_dir = json::parse(Walcut("cuts --format json " + Sample("healthy")).out);
  auto from_sums = Walcut("cuts --format json" + files);
  REQUIRE(from_sums.code == 0);
  CHECK(json::parse(from_sums.out)["cuts"] == from_dir["cuts"]);
  CHECK(json::parse(from_sums.out)["window"] == from_dir["window"]);
  auto show = Walcut("cut show" + files + " 4");
  CHECK(show.code == 0);
  CHECK(show.out.find("cut 4: consistent") != std::string::npos);
  // A summary that is not one.
  walcut::test::Spit(t.path + "/bad.json", "{\"schema\": \"walcut.summary/1\", \"node\": \"x\"}");
  auto bad = Walcut("cuts " + t.path + "/bad.json");
  CHECK(bad.code == 2);
  CHECK(bad.err.find("bad.json: field 'node': expected an unsigned integer, found \"x\"") != std::string::npos);
}

TEST_CASE("walcut restore: same state from genesis, the full snapshot and an earlier restore, byte-identical reruns",
          "[cli][restore]") {
  const auto before = Tree(Sample("healthy"));
  TempDir t;
  auto a = Walcut(fmt::format("restore {} --cut 6 --out {}/a", Sample("healthy"), t.path));
  INFO(a.out << a.err);
  REQUIRE(a.code == 0);
  CHECK(a.out.find("restored cut 6") != std::string::npos);
  REQUIRE(Walcut(fmt::format("restore {} --cut 6 --out {}/b", Sample("healthy"), t.path)).code == 0);
  CHECK(Tree(t.path + "/a") == Tree(t.path + "/b"));
  REQUIRE(Walcut(fmt::format("restore {} --cut 6 --base full-1500 --out {}/full", Sample("healthy"), t.path)).code ==
          0);
  REQUIRE(Walcut(fmt::format("restore {} --cut 3 --out {}/c3", Sample("healthy"), t.path)).code == 0);
  auto inc = Walcut(fmt::format("restore {} --cut 6 --base {}/c3 --out {}/inc", Sample("healthy"), t.path, t.path));
  REQUIRE(inc.code == 0);
  CHECK(inc.out.find("from base cut-3 (restored)") != std::string::npos);
  for (int n = 0; n < 3; ++n) {
    const std::string f = fmt::format("/node-{}.snap", n);
    CHECK(Slurp(t.path + "/a" + f) == Slurp(t.path + "/full" + f));
    CHECK(Slurp(t.path + "/a" + f) == Slurp(t.path + "/inc" + f));
  }
  const json m = json::parse(Slurp(t.path + "/a/manifest.json"));
  CHECK(m["schema"] == "walcut.restore-manifest/2");
  CHECK(m.find("format") == m.end());
  CHECK(m["cut"] == 6);
  CHECK(m["forced"] == false);
  CHECK(m["nodes"].size() == 3);
  CHECK(m["cluster"]["nodes"] == 3);
  // The full snapshot is after cut 3: it cannot be the base of cut 3.
  auto late = Walcut(fmt::format("restore {} --cut 3 --base full-1500 --out {}/x", Sample("healthy"), t.path));
  CHECK(late.code == 2);
  CHECK(late.err.find("after CUT_START(3)") != std::string::npos);
  CHECK_FALSE(fs::exists(t.path + "/x"));
  // OUT exists: refused, untouched.
  const auto a_tree = Tree(t.path + "/a");
  auto again = Walcut(fmt::format("restore {} --cut 5 --out {}/a", Sample("healthy"), t.path));
  CHECK(again.code == 2);
  CHECK(again.err.find("already exists") != std::string::npos);
  CHECK(Tree(t.path + "/a") == a_tree);
  CHECK(Tree(Sample("healthy")) == before);
}

TEST_CASE("walcut restore: the dry run plans what the restore applies and writes nothing", "[cli][restore]") {
  TempDir t;
  auto plan = Walcut(fmt::format("restore {} --cut 5 --dry-run --format json --out {}/p", Sample("healthy"), t.path));
  INFO(plan.out << plan.err);
  REQUIRE(plan.code == 0);
  CHECK_FALSE(fs::exists(t.path + "/p"));
  auto real = Walcut(fmt::format("restore {} --cut 5 --format json --out {}/r", Sample("healthy"), t.path));
  REQUIRE(real.code == 0);
  const json p = json::parse(plan.out), r = json::parse(real.out);
  CHECK(p["dry_run"] == true);
  REQUIRE(p["nodes"].size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    for (const char* k : {"txs_applied", "txs_skipped", "writes_applied", "bytes_to_read", "wal_from", "wal_to"}) {
      CHECK(p["nodes"][i][k] == r["nodes"][i][k]);
    }
    CHECK(p["nodes"][i]["segments"].size() > 1);
  }
}

TEST_CASE("walcut restore: inconsistent cut refused (exit 1) unless --force, --latest and --before use the window",
          "[cli][restore]") {
  TempDir t;
  auto refused = Walcut(fmt::format("restore {} --cut 3 --out {}/x", Sample("crash-during-cut"), t.path));
  CHECK(refused.code == 1);
  CHECK(refused.err.find("cut 3 is inconsistent: CUT_ABORT(3) on node 0") != std::string::npos);
  CHECK_FALSE(fs::exists(t.path + "/x"));
  auto forced = Walcut(fmt::format("restore {} --cut 3 --force --out {}/f", Sample("crash-during-cut"), t.path));
  CHECK(forced.code == 1);
  const json m = json::parse(Slurp(t.path + "/f/manifest.json"));
  CHECK(m["forced"] == true);
  CHECK(m["status"] == "inconsistent");
  CHECK(m["problem"].get<std::string>().find("CUT_ABORT(3)") != std::string::npos);
  // A forced restore is not a base.
  auto on_forced =
      Walcut(fmt::format("restore {} --cut 4 --base {}/f --out {}/y", Sample("crash-during-cut"), t.path, t.path));
  CHECK(on_forced.code == 2);
  auto latest = Walcut(fmt::format("restore {} --latest --out {}/l", Sample("corrupted-segment"), t.path));
  INFO(latest.out << latest.err);
  CHECK(latest.code == 0);
  CHECK(latest.out.find("restored cut 2") != std::string::npos);
  auto before = Walcut(fmt::format("restore {} --before 100ms --dry-run", Sample("healthy")));
  CHECK(before.code == 0);
  CHECK(before.out.find("plan: restore cut 2") != std::string::npos);
  CHECK(Walcut(fmt::format("restore {} --before 1ms --dry-run", Sample("healthy"))).code == 1);
  CHECK(Walcut(fmt::format("restore {} --cut 2 --latest --dry-run", Sample("healthy"))).code == 2);
  CHECK(Walcut(fmt::format("restore {} --cut 2", Sample("healthy"))).code == 2);
  CHECK(Walcut(fmt::format("restore {} --cut 42 --dry-run", Sample("healthy"))).code == 2);
}

TEST_CASE("walcut restore --check: invariants on the restored files, node and keys named when they break",
          "[cli][restore]") {
  TempDir t;
  auto ok = Walcut(fmt::format("restore {} --cut 6 --check bank --out {}/ok", Sample("healthy"), t.path));
  INFO(ok.out << ok.err);
  CHECK(ok.code == 0);
  CHECK(ok.out.find("check: invariants hold: bank total 1000000 as in cluster.json") != std::string::npos);
  CHECK(json::parse(Slurp(t.path + "/ok/manifest.json"))["check"]["ok"] == true);
  // The forced restore of the aborted cut 3 (WAL prefix up to CUT_START, no
  // sets) breaks the bank: the check says where.
  auto bad =
      Walcut(fmt::format("restore {} --cut 3 --force --check auto --out {}/bad", Sample("crash-during-cut"), t.path));
  CHECK(bad.code == 1);
  CHECK(bad.out.find("but its primary node") != std::string::npos);
  CHECK(bad.out.find("bank total of the 1000 primary copies is") != std::string::npos);
  CHECK(json::parse(Slurp(t.path + "/bad/manifest.json"))["check"]["ok"] == false);
  CHECK(Walcut(fmt::format("restore {} --cut 6 --check bank --dry-run", Sample("healthy"))).code == 2);
  CHECK(Walcut(fmt::format("restore {} --cut 6 --check cycle --out {}/c", Sample("healthy"), t.path)).code == 2);
  CHECK_FALSE(fs::exists(t.path + "/c"));
}
