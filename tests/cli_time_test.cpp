// Real time: the epoch in cluster.json, record times printed as ISO 8601
// UTC, and the time options (ISO 8601, @UNIX_SECONDS, a duration with a
// unit; a bare number refused).
#include <filesystem>
#include <map>
#include <string>

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_support.h"

namespace {
namespace fs = std::filesystem;
using json = nlohmann::json;
using walcut::test::Slurp;
using walcut::test::Spit;
using walcut::test::TempDir;
using walcut::test::Walcut;

std::string Healthy() { return std::string(WALCUT_SOURCE_DIR) + "/samples/healthy"; }
}  // namespace

TEST_CASE("walcut restore --before: a bare number is a usage error listing the accepted forms", "[cli][time]") {
  for (const char* bare : {"150", "1700000000"}) {
    auto r = Walcut(fmt::format("restore {} --before {} --dry-run", Healthy(), bare));
    INFO(r.out << r.err);
    CHECK(r.code == 2);
    CHECK(r.err.find("a bare number has no unit") != std::string::npos);
    CHECK(r.err.find("ISO 8601 UTC time (2026-11-30T12:00:00Z") != std::string::npos);
    CHECK(r.err.find("@UNIX_SECONDS") != std::string::npos);
    CHECK(r.err.find("250ms, 1.5s") != std::string::npos);
  }
  auto bad = Walcut(fmt::format("restore {} --before 2026-02-30T00:00:00Z --dry-run", Healthy()));
  CHECK(bad.code == 2);
  CHECK(bad.err.find("2026-02 has no day 30") != std::string::npos);
}

TEST_CASE("walcut restore --before: ISO 8601, offsets, @UNIX_SECONDS and durations pick the same cut", "[cli][time]") {
  // samples/healthy: epoch 2026-11-30T12:00:00Z; cut 2 finished at +95.713 ms, cut 3 at +131.114 ms.
  for (const char* t : {"2026-11-30T12:00:00.100Z", "2026-11-30T13:00:00.1+01:00", "@1796040000.1", "100ms",
                        "2026-11-30T12:00:00.131114Z"}) {
    auto r = Walcut(fmt::format("restore {} --before {} --dry-run", Healthy(), t));
    INFO(t << "\n" << r.out << r.err);
    CHECK(r.code == 0);
    CHECK(r.out.find("plan: restore cut 2 ") != std::string::npos);
  }
  auto c3 = Walcut(fmt::format("restore {} --before 2026-11-30T12:00:00.131115Z --dry-run", Healthy()));
  CHECK(c3.out.find("plan: restore cut 3 ") != std::string::npos);
  auto early = Walcut(fmt::format("restore {} --before 2024-01-01T00:00:00Z --dry-run", Healthy()));
  CHECK(early.code == 1);
  CHECK(early.err.find("no consistent cut finished before 2024-01-01T00:00:00.000000Z (the cluster was created at "
                       "2026-11-30T12:00:00.000000Z)") != std::string::npos);
}

TEST_CASE("cuts, cut show, dump and snapshot show print ISO 8601 UTC, JSON keeps time_us and adds time",
          "[cli][time]") {
  auto cuts = Walcut("cuts " + Healthy());
  INFO(cuts.out << cuts.err);
  CHECK(cuts.out.find("clock: cluster time 0 is 2026-11-30T12:00:00.000000Z") != std::string::npos);
  CHECK(cuts.out.find("    3  consistent       1230       5     22  2026-11-30T12:00:00.131114Z  5 / 1") !=
        std::string::npos);
  CHECK(cuts.out.find("start 2/0000F5BC 12:00:00.127460") != std::string::npos);
  CHECK(cuts.out.find("full snapshot full-1500 (2026-11-30T12:00:00.142405Z)") != std::string::npos);
  auto cj = json::parse(Walcut("cuts --format json " + Healthy()).out);
  CHECK(cj["epoch_unix_us"] == uint64_t{1796040000000000});
  CHECK(cj["cuts"][2]["finish_time_us"] == 131114);
  CHECK(cj["cuts"][2]["finish_time"] == "2026-11-30T12:00:00.131114Z");
  CHECK(cj["cuts"][2]["nodes"][0]["start_time"] == "2026-11-30T12:00:00.127460Z");
  CHECK(cj["snapshots"][0]["time"] == "2026-11-30T12:00:00.142405Z");

  auto show = Walcut("cut show " + Healthy() + " 3");
  CHECK(show.out.find("started 2026-11-30T12:00:00.127460Z, finished 2026-11-30T12:00:00.131114Z") !=
        std::string::npos);
  CHECK(show.out.find("CUT_START 2/0000F5BC (2026-11-30T12:00:00.127460Z)") != std::string::npos);
  auto sj = json::parse(Walcut("cut show --format json " + Healthy() + " 3").out);
  CHECK(sj["start_time_us"] == 127460);
  CHECK(sj["start_time"] == "2026-11-30T12:00:00.127460Z");

  auto dump = Walcut("dump " + Healthy() + " --node 0 --type CUT_START -n 1");
  CHECK(dump.out.find("cut 1 time 2026-11-30T12:00:00.047259Z") != std::string::npos);
  auto dj = json::parse(Walcut("dump " + Healthy() + " --node 0 --type CUT_START -n 1 --format json").out);
  CHECK(dj["record"]["time_us"] == 47259);
  CHECK(dj["record"]["time"] == "2026-11-30T12:00:00.047259Z");

  auto snap = Walcut("snapshot show " + Healthy() + "/snapshots/full-1500");
  CHECK(snap.out.find("name full-1500, time 2026-11-30T12:00:00.142405Z") != std::string::npos);
}

TEST_CASE("a restored snapshot carries its nodes' CUT_START times, its manifest prints them as UTC", "[cli][time]") {
  TempDir t;
  auto r = Walcut(fmt::format("restore {} --cut 3 --out {}/r", Healthy(), t.path));
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  auto show = Walcut("snapshot show " + t.path + "/r");
  INFO(show.out);
  CHECK(show.out.find("name cut-3, time 2026-11-30T12:00:00.127460Z") != std::string::npos);  // node 0's CUT_START
  CHECK(show.out.find("time 0us") == std::string::npos);
  const json m = json::parse(Slurp(t.path + "/r/manifest.json"));
  CHECK(m["nodes"][1]["cut_start_time_us"] == 127665);
  CHECK(m["nodes"][1]["cut_start_time"] == "2026-11-30T12:00:00.127665Z");
}

TEST_CASE("a per-node restore's manifest prints its CUT_START time as UTC too", "[cli][time]") {
  TempDir t;
  const auto v = Walcut(fmt::format("cuts {} --verdict-out {}/v.json --cut 3", Healthy(), t.path));
  INFO(v.out << v.err);
  REQUIRE(v.code == 0);
  const auto r = Walcut(fmt::format("restore {}/node-1 --verdict {}/v.json --out {}/p1", Healthy(), t.path, t.path));
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const json m = json::parse(Slurp(t.path + "/p1/manifest.json"));
  CHECK(m["entry"]["cut_start_time_us"] == 127665);
  CHECK(m["entry"]["cut_start_time"] == "2026-11-30T12:00:00.127665Z");
}

TEST_CASE("a cluster.json without an epoch still loads: offsets, and wall-clock options refused", "[cli][time]") {
  TempDir t;
  const std::string c = t.path + "/c";
  fs::copy(Healthy(), c, fs::copy_options::recursive);
  json cj = json::parse(Slurp(c + "/cluster.json"));
  cj.erase("epoch_unix_us");
  cj.erase("epoch");
  Spit(c + "/cluster.json", cj.dump(2) + "\n");
  auto cuts = Walcut("cuts " + c);
  INFO(cuts.out << cuts.err);
  CHECK(cuts.code == 0);
  CHECK(cuts.out.find("the cluster records no epoch") != std::string::npos);
  CHECK(cuts.out.find("    3  consistent       1230       5     22  +0.131114s") != std::string::npos);
  CHECK(Walcut(fmt::format("restore {} --before 100ms --dry-run", c)).code == 0);
  auto iso = Walcut(fmt::format("restore {} --before 2026-11-30T12:00:00.1Z --dry-run", c));
  CHECK(iso.code == 2);
  CHECK(iso.err.find("this cluster records no epoch") != std::string::npos);
}

TEST_CASE("walcut run --epoch records the epoch, --crash refuses a bare number", "[cli][time]") {
  TempDir t;
  auto r = Walcut("run " + t.path + "/c --txs 200 --cuts 2 --seed 3 --epoch @1796040000.5");
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("clock: cluster time 0 is 2026-11-30T12:00:00.500000Z") != std::string::npos);
  const json cj = json::parse(Slurp(t.path + "/c/cluster.json"));
  CHECK(cj["epoch_unix_us"] == uint64_t{1796040000500000});
  CHECK(cj["epoch"] == "2026-11-30T12:00:00.500000Z");
  CHECK(Walcut("run " + t.path + "/d --txs 200 --epoch 2026-13-01T00:00:00Z").code == 2);
  auto crash = Walcut("run " + t.path + "/e --txs 200 --crash 1@500");
  CHECK(crash.code == 2);
  CHECK(crash.err.find("with a unit") != std::string::npos);
  // Without --epoch: the real clock, so the epoch is recent.
  REQUIRE(Walcut("run " + t.path + "/f --txs 200 --cuts 1 --seed 3").code == 0);
  const json fj = json::parse(Slurp(t.path + "/f/cluster.json"));
  CHECK(fj["epoch_unix_us"].get<uint64_t>() > uint64_t{1700000000} * 1000000);
}

TEST_CASE("walcut scan summaries carry the epoch: cuts over summaries prints UTC times", "[cli][time]") {
  TempDir t;
  std::string args = "cuts";
  for (int n = 0; n < 3; ++n) {
    const std::string out = fmt::format("{}/n{}.json", t.path, n);
    auto s = Walcut(fmt::format("scan {}/node-{} --out {}", Healthy(), n, out));
    INFO(s.out << s.err);
    REQUIRE(s.code == 0);
    CHECK(json::parse(Slurp(out))["epoch_unix_us"] == uint64_t{1796040000000000});
    args += " " + out;
  }
  auto cuts = Walcut(args);
  INFO(cuts.out << cuts.err);
  CHECK(cuts.out.find("    3  consistent       1230       5     22  2026-11-30T12:00:00.131114Z  5 / 1") !=
        std::string::npos);
  CHECK(Walcut("run " + t.path + "/c --txs 200 --epoch 5s").code == 2);
}

TEST_CASE(
    "restore --repo --before: wall-clock times through each artifact's epoch, cluster time refused across "
    "clusters",
    "[cli][time][repo]") {
  TempDir t;
  const std::string repo = t.path + "/r";
  for (const char* step : {"--full --from full-1500", "--incremental --cut 5", "--incremental --cut 6"}) {
    auto r = Walcut(fmt::format("snapshot create {} --repo {} {}", Healthy(), repo, step));
    INFO(step << "\n" << r.out << r.err);
    REQUIRE(r.code == 0);
  }
  auto list = Walcut("snapshot list " + repo + " --format json");
  REQUIRE(list.code == 0);
  const json lj = json::parse(list.out);
  std::map<std::string, std::string> time_of;
  for (const auto& a : lj["artifacts"]) {
    CHECK(a["epoch_unix_us"] == uint64_t{1796040000000000});
    time_of[a["name"].get<std::string>()] = a["time"].get<std::string>();
  }
  REQUIRE(time_of.count("i-cut-6") == 1);
  REQUIRE(time_of.count("i-cut-5") == 1);
  REQUIRE(time_of.count("f-full-1500") == 1);
  // The text listing prints the same UTC times.
  auto text = Walcut("snapshot list " + repo);
  CHECK(text.out.find("time " + time_of["i-cut-6"]) != std::string::npos);

  auto pick = [&](const std::string& before) {
    auto r = Walcut(fmt::format("restore --repo {} --before {} --dry-run", repo, before));
    INFO(before << "\n" << r.out << r.err);
    CHECK(r.code == 0);
    const auto p = r.out.find("plan: restore ");
    return p == std::string::npos ? std::string() : r.out.substr(p + 14, r.out.find(' ', p + 14) - p - 14);
  };
  // A cut finished at T is before T + 1 us, not before T itself.
  const std::string t6 = time_of["i-cut-6"];
  CHECK(pick(t6) == "i-cut-5");
  const std::string t6_plus = t6.substr(0, t6.size() - 2) + std::to_string(t6[t6.size() - 2] - '0' + 1) + "Z";
  if (t6[t6.size() - 2] != '9') CHECK(pick(t6_plus) == "i-cut-6");
  CHECK(pick(time_of["i-cut-5"]) == "f-full-1500");
  CHECK(pick("2027-01-01T00:00:00+01:00") == "i-cut-6");
  CHECK(pick("@1796040001") == "i-cut-6");
  CHECK(pick("1s") == "i-cut-6");  // one cluster: cluster time still works

  auto early = Walcut(fmt::format("restore --repo {} --before 2026-11-30T11:59:59Z --dry-run", repo));
  CHECK(early.code == 2);
  CHECK(early.err.find("no restorable artifact finished before 2026-11-30T11:59:59.000000Z") != std::string::npos);

  // A second cluster in the same repository: wall-clock times still name one
  // instant (its epoch is a day later), cluster time does not.
  const std::string other = t.path + "/other";
  REQUIRE(Walcut("run " + other + " --txs 300 --cuts 2 --seed 5 --epoch 2026-12-01T12:00:00Z").code == 0);
  auto inc = Walcut(fmt::format("snapshot create {} --repo {} --full --cut 1", other, repo));
  INFO(inc.out << inc.err);
  REQUIRE(inc.code == 0);
  CHECK(pick("2026-12-01T00:00:00Z") == "i-cut-6");
  CHECK(pick("2026-12-02T00:00:00Z") == "f-cut-1");
  auto ambiguous = Walcut(fmt::format("restore --repo {} --before 1s --dry-run", repo));
  CHECK(ambiguous.code == 2);
  CHECK(ambiguous.err.find("holds artifacts of 2 clusters") != std::string::npos);
  CHECK(ambiguous.err.find("give a wall-clock time") != std::string::npos);

  // An artifact whose cluster.json predates epochs is skipped by a wall-clock
  // time, and the error says so.
  const std::string old_repo = t.path + "/old";
  fs::copy(repo, old_repo, fs::copy_options::recursive);
  fs::remove_all(old_repo + "/f-cut-1");
  for (const auto& e : fs::directory_iterator(old_repo)) {
    if (!fs::is_regular_file(e.path() / "cluster.json")) continue;
    json cj = json::parse(Slurp((e.path() / "cluster.json").string()));
    cj.erase("epoch_unix_us");
    cj.erase("epoch");
    Spit((e.path() / "cluster.json").string(), cj.dump(2) + "\n");
  }
  auto no_epoch = Walcut(fmt::format("restore --repo {} --before 2027-01-01T00:00:00Z --dry-run", old_repo));
  CHECK(no_epoch.code == 2);
  CHECK(no_epoch.err.find("3 restorable artifacts record no cluster epoch") != std::string::npos);
  auto listed = Walcut("snapshot list " + old_repo);
  CHECK(listed.out.find("time +0.") != std::string::npos);
}
