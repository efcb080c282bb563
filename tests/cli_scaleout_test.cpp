// Restoring where the WAL lives, end to end through the walcut binary: the
// flow of docs/scale-out.md run as written (its xargs block, and its GNU
// parallel block when parallel is installed) on samples/healthy split into
// one directory per host, and the refusals a per-node restore must make.
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_support.h"

namespace fs = std::filesystem;
using walcut::test::RequireValidJunit;
using walcut::test::Run;
using walcut::test::Slurp;
using walcut::test::Spit;
using walcut::test::TempDir;
using walcut::test::Walcut;

namespace {

const std::string kHealthy = std::string(WALCUT_SOURCE_DIR) + "/samples/healthy";
const std::string kCrash = std::string(WALCUT_SOURCE_DIR) + "/samples/crash-during-cut";

// SAMPLE's nodes, each in ROOT/host-<i>/node-<i> with its snapshot files in
// ROOT/host-<i>/snapshots/<name>/node-<i>.snap.
void SplitSample(const std::string& sample, const std::string& root, int nodes) {
  for (int i = 0; i < nodes; ++i) {
    const fs::path host = fs::path(root) / fmt::format("host-{}", i);
    fs::create_directories(host);
    fs::copy(fs::path(sample) / fmt::format("node-{}", i), host / fmt::format("node-{}", i),
             fs::copy_options::recursive);
    std::error_code ec;
    if (!fs::is_directory(fs::path(sample) / "snapshots", ec)) continue;
    for (const auto& e : fs::directory_iterator(fs::path(sample) / "snapshots")) {
      fs::create_directories(host / "snapshots" / e.path().filename());
      fs::copy_file(e.path() / fmt::format("node-{}.snap", i),
                    host / "snapshots" / e.path().filename() / fmt::format("node-{}.snap", i));
    }
  }
}

// samples/healthy split into hosts under DIR/hosts, each node scanned on
// its host (DIR/s<i>.json), and the verdict of cut K written to DIR/v.json;
// returns the summaries as arguments (" 'DIR/s0.json' ...").
std::string ScanAndVerdict(const std::string& dir, int k) {
  SplitSample(kHealthy, dir + "/hosts", 3);
  std::string sums;
  for (int i = 0; i < 3; ++i) {
    REQUIRE(Walcut(fmt::format("scan '{}/hosts/host-{}/node-{}' --out '{}/s{}.json'", dir, i, i, dir, i)).code == 0);
    sums += fmt::format(" '{}/s{}.json'", dir, i);
  }
  const Run v = Walcut(fmt::format("cuts{} --cluster-json '{}/cluster.json' --verdict-out '{}/v.json' --cut {}", sums,
                                   kHealthy, dir, k));
  INFO(v.out << v.err);
  REQUIRE(v.code == 0);
  return sums;
}

// The shell block of docs/scale-out.md that follows the marker line.
std::string DocBlock(const std::string& marker) {
  const std::string doc = Slurp(std::string(WALCUT_SOURCE_DIR) + "/docs/scale-out.md");
  const size_t m = doc.find(fmt::format("<!-- tested: {} -->", marker));
  REQUIRE(m != std::string::npos);
  const size_t open = doc.find("```sh\n", m);
  REQUIRE(open != std::string::npos);
  const size_t body = open + 6;
  const size_t close = doc.find("```", body);
  REQUIRE(close != std::string::npos);
  return doc.substr(body, close - body);
}

Run Shell(const std::string& script_path, const std::string& env) {
  TempDir io;
  const std::string cmd =
      fmt::format("env {} sh '{}' >'{}/out' 2>'{}/err' </dev/null", env, script_path, io.path, io.path);
  const int st = std::system(cmd.c_str());
  Run r;
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.out = Slurp(io.path + "/out");
  r.err = Slurp(io.path + "/err");
  return r;
}

// OUT equals the single-host restore SINGLE: node files byte for byte,
// manifest but for base.dir; and the tools that read restores accept it.
void SameAsSingleHost(const std::string& out, const std::string& single, int nodes) {
  for (int i = 0; i < nodes; ++i) {
    INFO("node " << i);
    CHECK(Slurp(fmt::format("{}/node-{}.snap", out, i)) == Slurp(fmt::format("{}/node-{}.snap", single, i)));
  }
  auto a = nlohmann::json::parse(Slurp(out + "/manifest.json"));
  auto b = nlohmann::json::parse(Slurp(single + "/manifest.json"));
  CHECK_FALSE(a["base"].contains("dir"));
  b["base"].erase("dir");
  a.erase("check");
  b.erase("check");
  CHECK(a == b);
  const Run diff = Walcut(fmt::format("diff '{}' '{}'", single, out));
  INFO(diff.out << diff.err);
  CHECK(diff.code == 0);
  // snapshot check finds in it what it finds in the single-host restore
  // (nothing for a consistent cut).
  const Run check = Walcut(fmt::format("snapshot check '{}' --format json", out));
  const Run check_single = Walcut(fmt::format("snapshot check '{}' --format json", single));
  INFO(check.out << check.err);
  CHECK(check.code == check_single.code);
  auto ca = nlohmann::json::parse(check.out, nullptr, false);
  auto cb = nlohmann::json::parse(check_single.out, nullptr, false);
  REQUIRE_FALSE(ca.is_discarded());
  CHECK(ca["findings"] == cb["findings"]);
  CHECK((check.code == 0) == (a["status"] == "consistent"));
}

}  // namespace

TEST_CASE("docs/scale-out.md: the xargs -P flow on samples/healthy split into hosts equals the single-host restore") {
  TempDir t;
  SplitSample(kHealthy, t.path + "/hosts", 3);
  const std::string single = t.path + "/single";
  REQUIRE(Walcut(fmt::format("restore '{}' --cut 5 --out '{}'", kHealthy, single)).code == 0);

  for (const std::string runner : {"xargs", "parallel"}) {
    if (runner == "parallel" && std::system("command -v parallel >/dev/null 2>&1") != 0) {
      WARN("GNU parallel is not installed: its block of docs/scale-out.md was not run");
      continue;
    }
    INFO(runner);
    const std::string work = t.path + "/work-" + runner;
    const std::string script = t.path + "/flow-" + runner + ".sh";
    Spit(script, DocBlock(runner));
    const Run r =
        Shell(script, fmt::format("WALCUT='{}' HOSTS='{}/hosts' WORK='{}' CLUSTER_JSON='{}/cluster.json' CUT=5 "
                                  "JOBS=3",
                                  WALCUT_BIN, t.path, work, kHealthy));
    INFO(r.out << r.err);
    REQUIRE(r.code == 0);
    CHECK_THAT(r.out, Catch::Contains("assembled cut 5 (consistent) from 3 parts, base full-1500 (full)"));
    CHECK_THAT(r.out, Catch::Contains("check: invariants hold: bank total 1000000 as in cluster.json"));
    // Only kilobytes travel to the hosts: the verdict.
    CHECK(fs::file_size(work + "/verdict.json") < 64 * 1024);
    SameAsSingleHost(work + "/restore", single, 3);
    // The assembled restore serves as the base of a later restore.
    const Run next =
        Walcut(fmt::format("restore '{}' --cut 6 --base '{}/restore' --out '{}/next'", kHealthy, work, work));
    INFO(next.out << next.err);
    CHECK(next.code == 0);
    CHECK_THAT(next.out, Catch::Contains("from base cut-5 (restored)"));
  }
}

TEST_CASE("per-node restore: --summaries decides the verdict on the host, the parts equal the verdict's") {
  TempDir t;
  ScanAndVerdict(t.path, 4);
  std::string summaries_each, summaries_list;
  for (int i = 0; i < 3; ++i) {
    summaries_each += fmt::format(" --summaries '{}/s{}.json'", t.path, i);
    summaries_list += fmt::format("{}{}/s{}.json", i == 0 ? " --summaries '" : ",", t.path, i);
  }
  summaries_list += "'";
  for (int i = 0; i < 3; ++i) {
    const Run a = Walcut(fmt::format("restore '{}/hosts/host-{}/node-{}' --verdict '{}/v.json' --out '{}/a{}'", t.path,
                                     i, i, t.path, t.path, i));
    INFO(a.out << a.err);
    REQUIRE(a.code == 0);
    // --summaries takes one file per occurrence, or a comma list.
    const Run b =
        Walcut(fmt::format("restore '{}/hosts/host-{}/node-{}'{} --cluster-json '{}/cluster.json' "
                           "--cut 4 --out '{}/b{}' --format json",
                           t.path, i, i, i == 1 ? summaries_list : summaries_each, kHealthy, t.path, i));
    INFO(b.out << b.err);
    REQUIRE(b.code == 0);
    CHECK(Slurp(fmt::format("{}/a{}/node-{}.snap", t.path, i, i)) ==
          Slurp(fmt::format("{}/b{}/node-{}.snap", t.path, i, i)));
    const auto j = nlohmann::json::parse(b.out);
    CHECK(j["node"] == i);
    CHECK(j["cut"] == 4);
  }
  // Parts of the same verdict decided on each host assemble.
  const Run asm_ = Walcut(fmt::format("restore assemble '{0}/out' '{0}/b2' '{0}/b0' '{0}/b1'", t.path));
  INFO(asm_.out << asm_.err);
  CHECK(asm_.code == 0);
  // Mixed with parts of the shipped verdict too: it is the same verdict.
  const Run mixed = Walcut(fmt::format("restore assemble '{0}/out2' '{0}/a0' '{0}/b1' '{0}/a2'", t.path));
  INFO(mixed.out << mixed.err);
  CHECK(mixed.code == 0);
}

TEST_CASE(
    "per-node restore refusals through the CLI: another cut, node or cluster, an inconsistent cut unless forced") {
  TempDir t;
  ScanAndVerdict(t.path, 5);
  const std::string node0 = t.path + "/hosts/host-0/node-0";

  SECTION("a verdict for another cut") {
    const Run r = Walcut(fmt::format("restore '{}' --verdict '{}/v.json' --cut 4 --out '{}/x'", node0, t.path, t.path));
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains("the verdict is for cut 5, not cut 4"));
  }
  SECTION("another node's directory") {
    const Run r =
        Walcut(fmt::format("restore '{}' --node 1 --verdict '{}/v.json' --out '{}/x'", node0, t.path, t.path));
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains("holds node 0's WAL (segment"));
    CHECK_THAT(r.err, Catch::Contains("not node 1's"));
  }
  SECTION("a segment of another node inside the range") {
    // Node 0's segment 4 (cut 5's range is 3..4) replaced by node 1's: the
    // first segment is node 0's, the foreign one is named by the pass.
    const std::string wal = node0 + "/wal";
    fs::remove(wal + "/0000000000000004.wal.zst");
    fs::copy_file(t.path + "/hosts/host-1/node-1/wal/0000000000000004.wal.zst", wal + "/0000000000000004.wal.zst");
    const Run r = Walcut(fmt::format("restore '{}' --verdict '{}/v.json' --out '{}/x'", node0, t.path, t.path));
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains("0000000000000004.wal.zst belongs to node 1, not node 0"));
    CHECK_FALSE(fs::exists(t.path + "/x"));
  }
  SECTION("a verdict of another cluster") {
    const std::string other = t.path + "/other";
    REQUIRE(Walcut(fmt::format("run '{}' --txs 600 --cut-every 200 --seed 8", other)).code == 0);
    const Run ov = Walcut(fmt::format("cuts '{}' --verdict-out '{}/ov.json' --latest", other, t.path));
    INFO(ov.out << ov.err);
    REQUIRE(ov.code == 0);
    const Run r = Walcut(fmt::format("restore '{}' --verdict '{}/ov.json' --out '{}/x'", node0, t.path, t.path));
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains(
                          "the WAL is from cluster 0171803ddfa9d1cc, the verdict is for cluster 0c51046f320c66c2"));
  }
  SECTION("a summary of another node's WAL") {
    // Node 1's WAL scanned as if it were node 0's: the verdict's positions
    // for node 0 are node 1's.
    REQUIRE(Walcut(fmt::format("scan '{}/hosts/host-1/node-1/wal' --node 0 --out '{}/s0-wrong.json'", t.path, t.path))
                .code == 0);
    const Run bv =
        Walcut(fmt::format("cuts '{0}/s0-wrong.json' '{0}/s1.json' '{0}/s2.json' --verdict-out '{0}/bad.json' "
                           "--cut 5 --base genesis",
                           t.path));
    INFO(bv.out << bv.err);
    REQUIRE(bv.code <= 1);  // written whatever the cut's status
    const Run r =
        Walcut(fmt::format("restore '{}' --verdict '{}/bad.json' --out '{}/x' --force", node0, t.path, t.path));
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains("node 0: the verdict (cut 5) places"));
    CHECK_FALSE(fs::exists(t.path + "/x"));
  }
  SECTION("an edited verdict") {
    std::string text = Slurp(t.path + "/v.json");
    const size_t at = text.find("\"status\": \"consistent\"");
    REQUIRE(at != std::string::npos);
    Spit(t.path + "/v.json", text.replace(at, 22, "\"status\": \"inconsistent\""));
    const Run r = Walcut(fmt::format("restore '{}' --verdict '{}/v.json' --out '{}/x'", node0, t.path, t.path));
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains("its content does not match its id"));
  }
  SECTION("an inconsistent cut: refused per node, restored with --force and marked so") {
    TempDir c;
    SplitSample(kCrash, c.path + "/hosts", 3);
    std::string csums;
    for (int i = 0; i < 3; ++i) {
      REQUIRE(
          Walcut(fmt::format("scan '{}/hosts/host-{}/node-{}' --out '{}/s{}.json'", c.path, i, i, c.path, i)).code ==
          0);
      csums += fmt::format(" '{}/s{}.json'", c.path, i);
    }
    const Run cv = Walcut(fmt::format("cuts{} --cluster-json '{}/cluster.json' --verdict-out '{}/v3.json' --cut 3",
                                      csums, kCrash, c.path));
    CHECK(cv.code == 1);
    CHECK_THAT(cv.out, Catch::Contains("cut 3 of 3 nodes is inconsistent"));
    for (int i = 0; i < 3; ++i) {
      const std::string nd = fmt::format("{}/hosts/host-{}/node-{}", c.path, i, i);
      const Run r = Walcut(fmt::format("restore '{}' --verdict '{}/v3.json' --out '{}/p{}'", nd, c.path, c.path, i));
      CHECK(r.code == 1);
      CHECK_THAT(r.err, Catch::Contains("cut 3 is inconsistent"));
      CHECK_THAT(r.err, Catch::Contains("refusing to restore it without --force"));
      CHECK_FALSE(fs::exists(fmt::format("{}/p{}", c.path, i)));
    }
    // Forced: every node restores (each has CUT_START(3)), exit 1 and
    // marked forced; assembled, the single-host forced restore.
    for (int i = 0; i < 3; ++i) {
      const std::string nd = fmt::format("{}/hosts/host-{}/node-{}", c.path, i, i);
      const Run r =
          Walcut(fmt::format("restore '{}' --verdict '{}/v3.json' --out '{}/p{}' --force", nd, c.path, c.path, i));
      INFO(r.out << r.err);
      CHECK(r.code == 1);
      CHECK_THAT(r.out, Catch::Contains("(inconsistent, forced: CUT_ABORT(3) on node 0 at 3/00000174"));
      const auto m = nlohmann::json::parse(Slurp(fmt::format("{}/p{}/manifest.json", c.path, i)));
      CHECK(m["forced"] == true);
    }
    const Run a = Walcut(fmt::format("restore assemble '{0}/out' '{0}/p0' '{0}/p1' '{0}/p2'", c.path));
    INFO(a.out << a.err);
    CHECK(a.code == 1);
    REQUIRE(Walcut(fmt::format("restore '{}' --cut 3 --force --out '{}/single'", kCrash, c.path)).code == 1);
    SameAsSingleHost(c.path + "/out", c.path + "/single", 3);
  }
  SECTION("assembly with a node missing") {
    for (int i = 0; i < 2; ++i) {
      REQUIRE(Walcut(fmt::format("restore '{0}/hosts/host-{1}/node-{1}' --verdict '{0}/v.json' --out '{0}/p{1}'",
                                 t.path, i))
                  .code == 0);
    }
    const Run r = Walcut(fmt::format("restore assemble '{0}/out' '{0}/p0' '{0}/p1'", t.path));
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains("cut 5 of a 3-node cluster: no part for node 2"));
    CHECK_FALSE(fs::exists(t.path + "/out"));
  }
}

TEST_CASE("check per node: files and restore levels where the WAL lives, the reports merged into one") {
  TempDir t;
  const std::string sums = ScanAndVerdict(t.path, 5);
  // Level files per node: the same segment checks as the cluster's check.
  std::string files_reports, restore_reports;
  for (int i = 0; i < 3; ++i) {
    const std::string nd = fmt::format("{}/hosts/host-{}/node-{}", t.path, i, i);
    const Run f = Walcut(fmt::format("check '{}' --format json -o '{}/f{}.json'", nd, t.path, i));
    INFO(f.out << f.err);
    REQUIRE(f.code == 0);
    const Run r =
        Walcut(fmt::format("check '{}' --verdict '{}/v.json' --format json -o '{}/r{}.json'", nd, t.path, t.path, i));
    INFO(r.out << r.err);
    REQUIRE(r.code == 0);
    files_reports = fmt::format(" '{}/f{}.json'", t.path, i) + files_reports;  // reversed: the merge orders by node
    restore_reports = fmt::format(" '{}/r{}.json'", t.path, i) + restore_reports;
  }
  const Run whole = Walcut(fmt::format("check '{}' --level files --format json", kHealthy));
  const Run merged_files = Walcut(fmt::format("check merge{} --format json", files_reports));
  INFO(merged_files.out << merged_files.err);
  REQUIRE(merged_files.code == 0);
  auto a = nlohmann::json::parse(merged_files.out);
  auto b = nlohmann::json::parse(whole.out);
  CHECK(a["checks"] == b["checks"]);  // every segment of every node, in the same order
  CHECK(a["files"] == b["files"]);
  CHECK(a["summary"] == b["summary"]);

  const Run merged = Walcut(fmt::format("check merge{} --format junit", restore_reports));
  INFO(merged.out << merged.err);
  CHECK(merged.code == 0);
  RequireValidJunit(merged.out);
  CHECK_THAT(merged.out, Catch::Contains("<testcase classname=\"walcut.restore.cut-5\" name=\"node 2: fingerprint\">"));
  CHECK_THAT(merged.out, Catch::Contains("<testcase classname=\"walcut.cuts.cut-5\" name=\"node 0: verdict\">"));
  const Run merged_text = Walcut(fmt::format("check merge{}", restore_reports));
  CHECK_THAT(merged_text.out, Catch::Contains(": OK (30 checks passed)"));

  SECTION("a damaged segment on one node fails the merged report, naming the node") {
    const std::string seg = t.path + "/hosts/host-1/node-1/wal/0000000000000006.wal";
    std::string bytes = Slurp(seg);
    REQUIRE(bytes.size() > 300);
    bytes[200] ^= 0x10;
    Spit(seg, bytes);
    const Run f1 = Walcut(fmt::format("check '{}/hosts/host-1/node-1' --format json -o '{}/f1.json'", t.path, t.path));
    CHECK(f1.code == 1);
    const Run m = Walcut(fmt::format("check merge{}", files_reports));
    CHECK(m.code == 1);
    CHECK_THAT(m.out, Catch::Contains("FINDING [files node-1: segment 0000000000000006.wal]"));
  }
  SECTION("a node's restore refused (a wrong base file): the merged report fails, naming the node") {
    fs::create_directories(t.path + "/wrong");
    fs::copy_file(t.path + "/hosts/host-1/snapshots/full-1500/node-1.snap", t.path + "/wrong/node-2.snap");
    const Run r2 = Walcut(fmt::format(
        "check '{0}/hosts/host-2/node-2' --verdict '{0}/v.json' --base '{0}/wrong' --format json -o '{0}/r2.json'",
        t.path));
    INFO(r2.out << r2.err);
    CHECK(r2.code == 1);
    const Run m = Walcut(fmt::format("check merge '{0}/r0.json' '{0}/r1.json' '{0}/r2.json'", t.path));
    CHECK(m.code == 1);
    CHECK_THAT(m.out, Catch::Contains("FINDING [restore cut-5: node 2: restore]"));
    CHECK_THAT(m.out, Catch::Contains("holds node 1, expected node 2"));
  }
  SECTION("merge refuses reports of different verdicts") {
    REQUIRE(
        Walcut(fmt::format("cuts{} --cluster-json '{}/cluster.json' --verdict-out '{}/vg.json' --cut 5 --base genesis",
                           sums, kHealthy, t.path))
            .code == 0);
    REQUIRE(Walcut(fmt::format("check '{0}/hosts/host-2/node-2' --verdict '{0}/vg.json' --format json -o '{0}/r2.json'",
                               t.path))
                .code == 0);
    const Run m = Walcut(fmt::format("check merge '{0}/r0.json' '{0}/r1.json' '{0}/r2.json'", t.path));
    CHECK(m.code == 2);
    CHECK_THAT(m.err, Catch::Contains("are not of one verdict"));
  }
  SECTION("merge refuses a node twice and a whole-cluster report") {
    const Run twice = Walcut(fmt::format("check merge '{0}/f0.json' '{0}/f0.json'", t.path));
    CHECK(twice.code == 2);
    CHECK_THAT(twice.err, Catch::Contains("node 0 appears twice"));
    Spit(t.path + "/whole.json", Walcut(fmt::format("check '{}' --format json", kHealthy)).out);
    const Run w = Walcut(fmt::format("check merge '{0}/f0.json' '{0}/whole.json'", t.path));
    CHECK(w.code == 2);
    CHECK_THAT(w.err, Catch::Contains("not of one node"));
  }
  SECTION("level cuts needs every node") {
    const Run c = Walcut(fmt::format("check '{}/hosts/host-0/node-0' --level cuts", t.path));
    CHECK(c.code == 2);
    CHECK_THAT(c.err, Catch::Contains("level cuts needs every node's WAL or summary"));
  }
}

TEST_CASE(
    "docs/scale-out.md flow on samples/pruned (WAL starting after genesis, full-snapshot base) equals the single-host "
    "restore") {
  const std::string pruned = std::string(WALCUT_SOURCE_DIR) + "/samples/pruned";
  TempDir t;
  SplitSample(pruned, t.path + "/hosts", 3);
  const std::string single = t.path + "/single";
  REQUIRE(Walcut(fmt::format("restore '{}' --cut 6 --out '{}'", pruned, single)).code == 0);
  const std::string script = t.path + "/flow.sh";
  Spit(script, DocBlock("xargs"));
  const Run r =
      Shell(script, fmt::format("WALCUT='{}' HOSTS='{}/hosts' WORK='{}/work' CLUSTER_JSON='{}/cluster.json' CUT=6",
                                WALCUT_BIN, t.path, t.path, pruned));
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("assembled cut 6 (consistent) from 3 parts, base full-2400 (full)"));
  SameAsSingleHost(t.path + "/work/restore", single, 3);
  // Genesis cannot serve a WAL whose oldest segments were removed.
  const Run g =
      Walcut(fmt::format("cuts {0}/work/summaries/node-0.json {0}/work/summaries/node-1.json "
                         "{0}/work/summaries/node-2.json --verdict-out {0}/g.json --cut 6 --base genesis",
                         t.path));
  CHECK(g.code == 2);
  CHECK_THAT(g.err, Catch::Contains(
                        "base genesis needs every node's WAL from 0/00000000, but node 0's WAL starts at 4/00000000"));
}
