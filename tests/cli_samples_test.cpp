// End-to-end tests on the bundled samples (samples/README.md): what walcut
// verify, stats and dump report on each, the numbers pinned. When
// scripts/make-samples.sh or the runtime changes what `walcut run` writes,
// regenerate the samples and update the numbers here and in samples/README.md.
#include <dirent.h>
#include <sys/stat.h>

#include <map>
#include <set>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_support.h"
#include "walfmt/snapshot.h"
#include "walfmt/source.h"

using walcut::test::Decompress;
using walcut::test::Lines;
using walcut::test::Slurp;
using walcut::test::TempDir;
using walcut::test::Walcut;

namespace {

const std::string kSamples = std::string(WALCUT_SOURCE_DIR) + "/samples";

std::string Sample(const std::string& name) { return kSamples + "/" + name; }

// Every regular file below dir, by path relative to dir, with its size.
std::map<std::string, uint64_t> Files(const std::string& dir, const std::string& rel = "") {
  std::map<std::string, uint64_t> out;
  DIR* h = opendir((dir + rel).c_str());
  if (h == nullptr) return out;
  while (dirent* e = readdir(h)) {
    const std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    const std::string r = rel + "/" + n;
    struct stat sb {};
    if (stat((dir + r).c_str(), &sb) != 0) continue;
    if (S_ISDIR(sb.st_mode)) {
      out.merge(Files(dir, r));
    } else {
      out[r] = static_cast<uint64_t>(sb.st_size);
    }
  }
  closedir(h);
  return out;
}

nlohmann::json Json(const std::string& args, int want_code) {
  auto r = Walcut(args);
  INFO(args << "\n" << r.out << r.err);
  REQUIRE(r.code == want_code);
  return nlohmann::json::parse(r.out);
}

// dump --format json of the cut records: {node, type, cut} per line.
std::vector<nlohmann::json> CutRecords(const std::string& dir) {
  auto r = Walcut("dump --format json --type cut_start,cut_finish,cut_abort " + dir);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  std::vector<nlohmann::json> v;
  for (const auto& l : Lines(r.out)) v.push_back(nlohmann::json::parse(l));
  return v;
}

}  // namespace

TEST_CASE("samples: each sample is under 1 MiB and keeps its cluster.json", "[cli][samples]") {
  for (const char* name : {"healthy", "crash-during-cut", "corrupted-segment", "torn-tail"}) {
    INFO(name);
    const auto files = Files(Sample(name));
    REQUIRE(files.size() > 3);
    uint64_t total = 0;
    for (const auto& [p, size] : files) total += size;
    CHECK(total < 1024 * 1024);
    REQUIRE(files.count("/cluster.json") == 1);
    const auto j = nlohmann::json::parse(Slurp(Sample(name) + "/cluster.json"));
    CHECK(j["schema"] == "walcut.cluster/2");
    CHECK(j["cluster_id"].get<std::string>().size() == 16);
    CHECK(j["nodes"] == 3);
    CHECK(j["complete"] == true);
  }
}

TEST_CASE("samples: healthy verifies clean, pinned stats, six consistent cuts and a full snapshot", "[cli][samples]") {
  const std::string dir = Sample("healthy");
  auto r = Walcut("verify " + dir);
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(r.out.find("verified 3 nodes, 21 segments, 1.2 MiB, 20388 records: OK\n") != std::string::npos);
  CHECK(r.err.empty());

  const auto s = Json("stats --format json " + dir, 0);
  CHECK(s["records"] == 20388);
  CHECK(s["transactions"]["committed"] == 2655);  // 2637 workload + 18 initial-load
  CHECK(s["transactions"]["one_phase"] == 915);
  CHECK(s["transactions"]["rolled_back"] == 11);
  CHECK(s["cuts"]["starts"] == 18);
  CHECK(s["cuts"]["finishes"] == 18);
  CHECK(s["cuts"]["aborts"] == 0);
  CHECK(s["cuts"]["min_id"] == 1);
  CHECK(s["cuts"]["max_id"] == 6);
  CHECK(s["snapshots"] == 3);
  for (const auto& n : s["nodes"]) CHECK(n["segments"] == 7);

  // Older segments archived, the last one plain.
  const auto files = Files(dir);
  CHECK(files.count("/node-0/wal/0000000000000000.wal.zst") == 1);
  CHECK(files.count("/node-0/wal/0000000000000006.wal") == 1);

  // The snapshot files decode and point at their SNAPSHOT records, as
  // cluster.json says.
  const auto j = nlohmann::json::parse(Slurp(dir + "/cluster.json"));
  REQUIRE(j["full_snapshots"].size() == 1);
  const auto& sn = j["full_snapshots"][0];
  CHECK(sn["name"] == "full-1500");
  for (const auto& per : sn["nodes"]) {
    auto f = walfmt::ReadSnapshotFile(dir + "/" + sn["dir"].get<std::string>() + "/" + per["file"].get<std::string>());
    REQUIRE(f.ok());
    CHECK(f->node_id == per["node"]);
    CHECK(f->name == "full-1500");
    CHECK(f->wal_position.ToString() == per["wal_position"]);
    CHECK(fmt::format("{:016x}", f->fingerprint) == per["fingerprint"]);
    auto rec = Walcut(fmt::format("dump --format json --type snapshot --node {} {}", per["node"].get<int>(), dir));
    REQUIRE(rec.code == 0);
    const auto d = nlohmann::json::parse(rec.out);
    CHECK(d["lsn"] == per["wal_position"]);
    CHECK(d["record"]["fingerprint"] == per["fingerprint"]);
  }
  // Node 0's snapshot at 3/00002D91: between cut 3 and cut 4 (the worked
  // example of walfmt/FORMAT.md).
  CHECK(sn["nodes"][0]["wal_position"] == "3/00002D91");

  std::map<uint64_t, std::set<int>> finished;
  for (const auto& c : CutRecords(dir)) {
    CHECK(c["type"] != "CUT_ABORT");
    if (c["type"] == "CUT_FINISH") finished[c["record"]["cut"]].insert(c["node"].get<int>());
  }
  CHECK(finished.size() == 6);
  for (const auto& [cut, nodes] : finished) CHECK(nodes == std::set<int>{0, 1, 2});
}

// Snapshot files name the cluster of the WAL (a restore refuses a snapshot of
// another cluster).
TEST_CASE("samples: healthy's snapshot files carry the cluster id of the WAL", "[cli][samples]") {
  const std::string dir = Sample("healthy");
  const auto j = nlohmann::json::parse(Slurp(dir + "/cluster.json"));
  auto f = walfmt::ReadSnapshotFile(dir + "/snapshots/full-1500/node-0.snap");
  REQUIRE(f.ok());
  CHECK(fmt::format("{:016x}", f->cluster_id) == j["cluster_id"].get<std::string>());
}

TEST_CASE("samples: crash-during-cut has cut 3 aborted between consistent cuts", "[cli][samples]") {
  const std::string dir = Sample("crash-during-cut");
  auto r = Walcut("verify " + dir);
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(r.out.find("verified 3 nodes, 15 segments, 948.7 KiB, 16011 records: OK\n") != std::string::npos);

  const auto s = Json("stats --format json " + dir, 0);
  CHECK(s["records"] == 16011);
  CHECK(s["transactions"]["committed"] == 2067);
  CHECK(s["cuts"]["starts"] == 15);
  CHECK(s["cuts"]["finishes"] == 12);
  CHECK(s["cuts"]["aborts"] == 4);
  CHECK(s["cuts"]["max_id"] == 5);

  std::map<uint64_t, std::set<int>> started, finished;
  std::map<int, std::vector<std::string>> aborts;  // node -> reasons, in WAL order
  for (const auto& c : CutRecords(dir)) {
    const uint64_t cut = c["record"]["cut"];
    const int node = c["node"];
    if (c["type"] == "CUT_START") started[cut].insert(node);
    if (c["type"] == "CUT_FINISH") finished[cut].insert(node);
    if (c["type"] == "CUT_ABORT") {
      CHECK(cut == 3);
      aborts[node].push_back(c["record"]["reason"]);
    }
  }
  const std::set<int> all{0, 1, 2};
  for (uint64_t k = 1; k <= 5; ++k) {
    INFO("cut " << k);
    CHECK(started[k] == all);
    CHECK(finished[k] == (k == 3 ? std::set<int>{} : all));
  }
  CHECK(aborts[0] == std::vector<std::string>{"recovered-transaction", "participant-lost"});
  CHECK(aborts[1] == std::vector<std::string>{"recovered-transaction"});
  CHECK(aborts[2] == std::vector<std::string>{"node-restart"});

  // Node 2 restarted once: a second NODE_START, incarnation 1, after its CUT_START(3).
  auto ns = Walcut("dump --type node_start --node 2 " + dir);
  REQUIRE(ns.code == 0);
  const auto lines = Lines(ns.out);
  REQUIRE(lines.size() == 2);
  CHECK(lines[1].find("3/000001FB NODE_START") != std::string::npos);
  CHECK(lines[1].find("incarnation 1") != std::string::npos);
}

TEST_CASE("samples: corrupted-segment fails verify naming node 1, segment 2, offset 0x8015", "[cli][samples]") {
  const std::string dir = Sample("corrupted-segment");
  auto r = Walcut("verify " + dir);
  INFO(r.out << r.err);
  CHECK(r.code == 1);
  CHECK(r.out.find("FINDING: node 1, ") != std::string::npos);
  CHECK(r.out.find("node-1/wal/0000000000000002.wal at 2/00008015: record payload checksum mismatch (next intact "
                   "record at 2/00008043): expected 08a149c2, found 1082f08f; 46 bytes dropped") != std::string::npos);
  CHECK(r.out.find("20387 records: FAILED (1 finding in 1 segment)") != std::string::npos);

  const auto v = Json("verify --format json " + dir, 1);
  CHECK(v["summary"]["findings"] == 1);
  CHECK(v["summary"]["torn_tails"] == 0);
  const auto& seg = v["nodes"][1]["segments"][2];
  CHECK(seg["status"] == "corrupt");
  CHECK(seg["compressed"] == false);
  REQUIRE(seg["problems"].size() == 1);
  const auto& p = seg["problems"][0];
  CHECK(p["kind"] == "payload-checksum");
  CHECK(p["node"] == 1);
  CHECK(p["segment"] == 2);
  CHECK(p["offset"] == 0x8015);
  CHECK(p["length"] == 46);

  // stats still counts what it can read, and exits 1.
  const auto s = Json("stats --format json " + dir, 1);
  CHECK(s["records"] == 20387);
  CHECK(s["findings"] == 1);

  // The damage is one bit: the plain segment is healthy's archive,
  // decompressed, with the low bit of byte 0x8029 (payload byte 4 of the
  // TX_PREPARE at 2/00008015) flipped.
  const std::string good = Decompress(Sample("healthy") + "/node-1/wal/0000000000000002.wal.zst");
  const std::string bad = Slurp(dir + "/node-1/wal/0000000000000002.wal");
  REQUIRE(good.size() == bad.size());
  std::vector<size_t> diff;
  for (size_t i = 0; i < good.size(); ++i) {
    if (good[i] != bad[i]) diff.push_back(i);
  }
  REQUIRE(diff == std::vector<size_t>{0x8029});
  CHECK((good[0x8029] ^ bad[0x8029]) == 1);
}

TEST_CASE("samples: torn-tail passes verify and reports node 2's torn last record", "[cli][samples]") {
  const std::string dir = Sample("torn-tail");
  auto r = Walcut("verify " + dir);
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(r.out.find("note: node 2, ") != std::string::npos);
  CHECK(r.out.find("node-2/wal/0000000000000006.wal at 6/000036F3: torn tail (record runs past the end of the "
                   "segment): expected 60 bytes, found 51 bytes remain; 51 bytes lost") != std::string::npos);
  CHECK(r.out.find("20387 records: OK (1 torn tail at the end of the WAL, tolerated)") != std::string::npos);

  const auto v = Json("verify --format json " + dir, 0);
  CHECK(v["summary"]["findings"] == 0);
  CHECK(v["summary"]["torn_tails"] == 1);
  CHECK(v["nodes"][2]["segments"][6]["torn_tail"]["lsn"] == "6/000036F3");

  // Strict mode does not tolerate it.
  CHECK(Walcut("dump --mode strict --node 2 " + dir + " >/dev/null").code == 1);
  // Only node 2's last record is missing compared to healthy.
  const auto s = Json("stats --format json " + dir, 0);
  CHECK(s["records"] == 20387);
  CHECK(s["nodes"][2]["records"] == 6760);
}

TEST_CASE("samples: crash-during-cut regenerates byte for byte", "[cli][samples]") {
  // The command of scripts/make-samples.sh for this sample.
  TempDir t;
  const std::string out = t.path + "/c";
  auto r = Walcut("run " + out +
                  " --nodes 3 --backups 1 --workload bank --txs 3000 --cut-every 400 --seed 12 --segment-size 64K"
                  " --epoch 2026-11-30T12:00:00Z"
                  " --crash 2@128500us+5ms");
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const auto want = Files(Sample("crash-during-cut"));
  const auto got = Files(out);
  REQUIRE(got == want);
  for (const auto& [p, size] : want) {
    INFO(p);
    const std::string a = out + p, b = Sample("crash-during-cut") + p;
    if (p.ends_with(".zst")) {
      // The segment inside is the runtime's; the frame around it is
      // libzstd's, whose bytes may change with its version.
      CHECK(Decompress(a) == Decompress(b));
      if (Slurp(a) != Slurp(b)) WARN(p << ": same segment, other zstd frame bytes (another libzstd?)");
    } else {
      CHECK(Slurp(a) == Slurp(b));
    }
  }
}
