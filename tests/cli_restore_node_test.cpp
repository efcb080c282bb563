// `walcut restore NODE_DIR` (one node where its WAL lives) with each way of
// naming the base: from a verdict file (--verdict) or from the summaries
// (--summaries), with --base genesis, a full snapshot's name, or a snapshot
// directory given by its path; each node file must equal the single-host
// restore's. And a base file that is not there: exit 2, naming the file.
#include <filesystem>
#include <string>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "cli_support.h"

namespace fs = std::filesystem;
using walcut::test::Run;
using walcut::test::Slurp;
using walcut::test::TempDir;
using walcut::test::Walcut;

namespace {

const std::string kHealthy = std::string(WALCUT_SOURCE_DIR) + "/samples/healthy";
constexpr int kNodes = 3;
constexpr int kCut = 6;

// samples/healthy with each node in ROOT/host-<i>/node-<i> and its snapshot
// files in ROOT/host-<i>/snapshots/<name>/node-<i>.snap; each node scanned
// on its host into ROOT/s<i>.json. Returns the summaries as --summaries.
std::string SplitAndScan(const std::string& root) {
  std::string sums = " --summaries '";
  for (int i = 0; i < kNodes; ++i) {
    const fs::path host = fs::path(root) / fmt::format("host-{}", i);
    fs::create_directories(host);
    fs::copy(fs::path(kHealthy) / fmt::format("node-{}", i), host / fmt::format("node-{}", i),
             fs::copy_options::recursive);
    for (const auto& e : fs::directory_iterator(fs::path(kHealthy) / "snapshots")) {
      fs::create_directories(host / "snapshots" / e.path().filename());
      fs::copy_file(e.path() / fmt::format("node-{}.snap", i),
                    host / "snapshots" / e.path().filename() / fmt::format("node-{}.snap", i));
    }
    const Run s = Walcut(fmt::format("scan '{}/node-{}' --out '{}/s{}.json'", host.string(), i, root, i));
    INFO(s.out << s.err);
    REQUIRE(s.code == 0);
    sums += fmt::format("{}{}/s{}.json", i == 0 ? "" : ",", root, i);
  }
  return sums + "'";
}

}  // namespace

TEST_CASE("per-node restore: --verdict or --summaries with --base genesis, a snapshot name or a directory") {
  TempDir t;
  const std::string sums = SplitAndScan(t.path);
  const std::string single = t.path + "/single";
  const Run s = Walcut(fmt::format("restore '{}' --cut {} --out '{}'", kHealthy, kCut, single));
  INFO(s.out << s.err);
  REQUIRE(s.code == 0);
  // The snapshot's files somewhere else, named by their directory's path.
  const std::string copy = t.path + "/elsewhere/full-copy";
  fs::create_directories(fs::path(copy).parent_path());
  fs::copy(kHealthy + "/snapshots/full-1500", copy, fs::copy_options::recursive);
  const std::string cj = fmt::format(" --cluster-json '{}/cluster.json'", kHealthy);
  for (const std::string base : {"genesis", "full-1500"}) {
    const Run v =
        Walcut(fmt::format("cuts {}/s0.json {}/s1.json {}/s2.json{} --verdict-out '{}/v-{}.json' --cut {} "
                           "--base {}",
                           t.path, t.path, t.path, cj, t.path, base, kCut, base));
    INFO(v.out << v.err);
    REQUIRE(v.code == 0);
  }
  struct Case {
    std::string base;          // --base
    std::string verdict_base;  // the verdict it goes with
  };
  const Case cases[] = {{"genesis", "genesis"}, {"full-1500", "full-1500"}, {copy, "full-1500"}};
  int n = 0;
  for (const Case& c : cases) {
    for (const bool summaries : {false, true}) {
      for (int i = 0; i < kNodes; ++i) {
        const std::string out = fmt::format("{}/part-{}", t.path, n++);
        const std::string from = summaries ? fmt::format("{}{} --cut {}", sums, cj, kCut)
                                           : fmt::format(" --verdict '{}/v-{}.json'", t.path, c.verdict_base);
        const Run r = Walcut(fmt::format("restore '{}/host-{}/node-{}' --node {}{} --base '{}' --out '{}'", t.path, i,
                                         i, i, from, c.base, out));
        INFO(fmt::format("--base {} {} node {}", c.base, summaries ? "--summaries" : "--verdict", i));
        INFO(r.out << r.err);
        REQUIRE(r.code == 0);
        CHECK_THAT(r.out, Catch::Contains(fmt::format("from base {} ({})", c.verdict_base,
                                                      c.verdict_base == "genesis" ? "genesis" : "full")));
        CHECK(Slurp(fmt::format("{}/node-{}.snap", out, i)) == Slurp(fmt::format("{}/node-{}.snap", single, i)));
      }
    }
  }
}

TEST_CASE("per-node restore: a base file that is not there is a usage error naming the file") {
  TempDir t;
  const std::string sums = SplitAndScan(t.path);
  const std::string cj = fmt::format(" --cluster-json '{}/cluster.json'", kHealthy);
  const Run v =
      Walcut(fmt::format("cuts {0}/s0.json {0}/s1.json {0}/s2.json{1} --verdict-out '{0}/v.json' --cut {2} "
                         "--base full-1500",
                         t.path, cj, kCut));
  REQUIRE(v.code == 0);
  const std::string node0 = t.path + "/host-0/node-0";
  const std::string empty = t.path + "/empty";
  fs::create_directories(empty);
  auto refused = [&](const std::string& args, const std::string& file) {
    const Run r = Walcut(fmt::format("restore '{}' --node 0{} --out '{}/out'", node0, args, t.path));
    INFO(args);
    INFO(r.out << r.err);
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains(file + ": no such file"));
    CHECK_FALSE(fs::exists(t.path + "/out"));
  };
  SECTION("a directory without the node's file") {
    refused(fmt::format(" --verdict '{}/v.json' --base '{}'", t.path, empty), empty + "/node-0.snap");
    refused(fmt::format("{}{} --cut {} --base '{}'", sums, cj, kCut, empty), empty + "/node-0.snap");
  }
  SECTION("a path that names nothing") {
    refused(fmt::format(" --verdict '{}/v.json' --base '{}/nosuch'", t.path, t.path), t.path + "/nosuch/node-0.snap");
    refused(fmt::format("{}{} --cut {} --base '{}/nosuch'", sums, cj, kCut, t.path), t.path + "/nosuch/node-0.snap");
  }
  SECTION("the snapshot named, its files not on this host") {
    fs::remove_all(t.path + "/host-0/snapshots");
    const std::string file = t.path + "/host-0/snapshots/full-1500/node-0.snap";
    refused(fmt::format(" --verdict '{}/v.json'", t.path), file);
    refused(fmt::format(" --verdict '{}/v.json' --base full-1500", t.path), file);
    refused(fmt::format("{}{} --cut {} --base full-1500", sums, cj, kCut), file);
  }
}
