// End-to-end tests of walcut run: the cluster it writes is read back by the
// inspection commands, the same seed gives the same bytes, misuse exits 2.
#include <dirent.h>

#include <algorithm>
#include <sstream>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_support.h"

using walcut::test::Slurp;
using walcut::test::TempDir;
using walcut::test::Walcut;

namespace {

std::vector<std::string> Files(const std::string& dir) {
  std::vector<std::string> v;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n != "." && n != "..") v.push_back(n);
    }
    closedir(d);
  }
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace

TEST_CASE("run: the cluster it writes verifies, and stats agree with its summary", "[cli][run]") {
  TempDir t;
  const std::string dir = t.path + "/c";
  auto r = Walcut("run " + dir + " --txs 400 --seed 3 --cuts 4 --format json");
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const auto run = nlohmann::json::parse(r.out);
  CHECK(run["schema"] == "walcut.run/1");
  CHECK(run["nodes"] == 3);
  CHECK(run["cuts"]["started"] == 4);
  CHECK(run["cuts"]["consistent"] == 4);
  CHECK(run["cuts"]["inconsistent"] == 0);

  auto v = Walcut("verify " + dir);
  INFO(v.out << v.err);
  CHECK(v.code == 0);

  auto s = Walcut("stats --format json " + dir);
  REQUIRE(s.code == 0);
  const auto st = nlohmann::json::parse(s.out);
  // Every committed transaction, the initial load included, counted once.
  CHECK(st["transactions"]["committed"] ==
        run["transactions"]["committed"].get<uint64_t>() + run["transactions"]["load"].get<uint64_t>());
  // Every node joined and finished every cut.
  CHECK(st["cuts"]["starts"] == 3 * 4);
  CHECK(st["cuts"]["finishes"] == 3 * 4);
  CHECK(st["cuts"]["max_id"] == 4);
}

TEST_CASE("run: the same seed and options give byte-identical WAL", "[cli][run]") {
  TempDir t;
  const std::string args = " --txs 300 --seed 11 --nodes 5 --backups 2 --workload mixed --segment-size 16KiB";
  REQUIRE(Walcut("run " + t.path + "/a" + args).code == 0);
  REQUIRE(Walcut("run " + t.path + "/b" + args).code == 0);
  for (int n = 0; n < 5; ++n) {
    const std::string wa = t.path + "/a/node-" + std::to_string(n) + "/wal";
    const std::string wb = t.path + "/b/node-" + std::to_string(n) + "/wal";
    const auto fa = Files(wa);
    REQUIRE(fa.size() >= 2);  // small segments: several, the older archived
    CHECK(fa == Files(wb));
    for (const auto& f : fa) {
      INFO("node " << n << " " << f);
      CHECK(Slurp(wa + "/" + f) == Slurp(wb + "/" + f));
    }
  }
  // A different seed writes something else.
  REQUIRE(Walcut("run " + t.path +
                 "/c --txs 300 --seed 12 --nodes 5 --backups 2 --workload mixed "
                 "--segment-size 16KiB")
              .code == 0);
  CHECK(Slurp(t.path + "/a/node-0/wal/0000000000000000.wal.zst") !=
        Slurp(t.path + "/c/node-0/wal/0000000000000000.wal.zst"));
}

TEST_CASE("run: misuse exits 2 and touches nothing", "[cli][run]") {
  TempDir t;
  walcut::test::Spit(t.path + "/keep.txt", "precious");
  auto r = Walcut("run " + t.path + " --txs 10");
  CHECK(r.code == 2);
  CHECK(Files(t.path) == std::vector<std::string>{"keep.txt"});
  CHECK(Slurp(t.path + "/keep.txt") == "precious");
  CHECK(Walcut("run " + t.path + "/x --workload nosuch").code == 2);
  CHECK(Walcut("run " + t.path + "/y --nodes 2 --backups 2").code == 2);
}

// The initiator (node 0) crashes while cut 1 runs: node 1, the oldest live
// node, takes the cut over and records why it is inconsistent; later cuts are
// consistent and restore. (Seed 3 at 33 ms: cut 1 runs from 32.5 ms.)
TEST_CASE("run: the initiator crashes during a cut and node 1 takes over", "[cli][run]") {
  TempDir t;
  const std::string dir = t.path + "/c";
  auto r = Walcut("run " + dir + " --txs 3000 --cuts 10 --seed 3 --crash 0@33ms+5ms --format json");
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const auto run = nlohmann::json::parse(r.out);
  CHECK(run["faults"]["crashes"] == 1);
  CHECK(run["faults"]["initiator_failovers"] == 1);
  CHECK(run["faults"]["cuts_taken_over"] == 1);
  CHECK(run["cuts"]["inconsistent"] == 1);
  CHECK(run["cuts"]["consistent"].get<int>() >= 5);

  auto d = Walcut("dump --type cut_abort --format json " + dir);
  REQUIRE(d.code == 0);
  bool took_over = false;
  std::istringstream lines(d.out);
  for (std::string line; std::getline(lines, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j["node"] == 1 && j["record"]["reason"] == "participant-lost") {
      CHECK(j["record"]["cut"] == 1);
      CHECK(j["record"]["detail"] == "initiator node 0 crashed while cut 1 ran; node 1 took over");
      took_over = true;
    }
  }
  CHECK(took_over);

  auto c = Walcut("cuts --format json " + dir);
  REQUIRE(c.code == 1);  // an inconsistent cut is a finding
  const auto cuts = nlohmann::json::parse(c.out);
  CHECK(cuts["cuts"][0]["status"] == "inconsistent");
  for (size_t i = 1; i < cuts["cuts"].size(); ++i) CHECK(cuts["cuts"][i]["status"] == "consistent");

  auto rs = Walcut("restore " + dir + " --latest --check bank --out " + t.path + "/r");
  INFO(rs.out << rs.err);
  CHECK(rs.code == 0);
}
