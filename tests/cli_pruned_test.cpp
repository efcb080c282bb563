// `walcut run --wal-retention after-snapshot` end to end, and the sample it
// makes (samples/pruned, scripts/make-samples.sh): the segments before each
// node's latest SNAPSHOT record are gone, the rest is one chain that `walcut
// verify` accepts, and the sample regenerates byte for byte.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_support.h"
#include "walfmt/source.h"

using walcut::test::Decompress;
using walcut::test::Lines;
using walcut::test::Slurp;
using walcut::test::TempDir;
using walcut::test::Walcut;

namespace {

const std::string kPruned = std::string(WALCUT_SOURCE_DIR) + "/samples/pruned";
// scripts/make-samples.sh: the options every sample shares, then pruned's.
const std::string kPrunedArgs =
    " --nodes 3 --backups 1 --workload bank --txs 3000 --cut-every 400 --seed 12 --segment-size 64K"
    " --epoch 2026-11-30T12:00:00Z"
    " --full-snapshot-every 1200 --wal-retention after-snapshot";

// Every regular file below dir, by path relative to dir.
std::set<std::string> Files(const std::string& dir, const std::string& rel = "") {
  std::set<std::string> out;
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
      out.insert(r);
    }
  }
  closedir(h);
  return out;
}

// Segment indexes in a WAL directory (from the file names).
std::vector<uint64_t> SegmentIndexes(const std::string& wal_dir) {
  std::vector<uint64_t> out;
  for (const auto& f : Files(wal_dir)) {
    out.push_back(std::stoull(f.substr(1, 16), nullptr, 16));
  }
  return out;
}

}  // namespace

TEST_CASE("pruned: the segments before each node's latest SNAPSHOT record are gone, verify passes", "[cli][samples]") {
  // Except the one holding the node's last cut record before it, when that
  // comes first: a node restarted from the snapshot learns its last cut there.
  const auto j = nlohmann::json::parse(Slurp(kPruned + "/cluster.json"));
  CHECK(j["wal_retention"] == "after-snapshot");
  CHECK(j["complete"] == true);
  CHECK(j["parameters"]["full_snapshot_every"] == 1200);
  const auto& snaps = j["full_snapshots"];
  REQUIRE(snaps.size() == 2);
  CHECK(snaps[0]["name"] == "full-1200");
  CHECK(snaps[1]["name"] == "full-2400");

  // The SNAPSHOT records, as dump finds them in the pruned WAL: only the
  // latest one per node is still there if the earlier one's segment went.
  // And the segment of each node's last cut record before full-2400's.
  auto d = Walcut("dump --format json --type snapshot,cut_start,cut_finish,cut_abort " + kPruned);
  INFO(d.out << d.err);
  REQUIRE(d.code == 0);
  std::map<uint64_t, std::map<std::string, uint64_t>> snapshot_segment;  // node -> name -> segment
  std::map<uint64_t, uint64_t> last_cut_segment;                         // node -> segment, before full-2400
  for (const auto& l : Lines(d.out)) {
    const auto r = nlohmann::json::parse(l);
    const uint64_t node = r["node"].get<uint64_t>();
    if (r["type"] == "SNAPSHOT") {
      snapshot_segment[node][r["record"]["name"].get<std::string>()] = r["segment"].get<uint64_t>();
    } else if (!snapshot_segment[node].count("full-2400")) {
      last_cut_segment[node] = r["segment"].get<uint64_t>();
    }
  }
  // Node 2's CUT_FINISH(5) is in segment 4, its full-2400 record in 5.
  CHECK(last_cut_segment[2] == 4);

  for (uint64_t n = 0; n < 3; ++n) {
    INFO("node " << n);
    const std::string pos = snaps[1]["nodes"][n]["wal_position"];
    const uint64_t snap_seg = std::stoull(pos.substr(0, pos.find('/')), nullptr, 16);
    CHECK(snap_seg >= 2);  // something was deleted
    REQUIRE(last_cut_segment.count(n) == 1);
    const uint64_t first = std::min(snap_seg, last_cut_segment[n]);
    CHECK(j["node_dirs"][n]["first_segment"] == first);
    // Exactly the segments from the one holding full-2400's record (or the
    // last cut record before it) on.
    const auto segs = SegmentIndexes(kPruned + "/node-" + std::to_string(n) + "/wal");
    REQUIRE(!segs.empty());
    CHECK(segs.front() == first);
    for (size_t i = 1; i < segs.size(); ++i) CHECK(segs[i] == segs[i - 1] + 1);
    REQUIRE(snapshot_segment[n].count("full-2400") == 1);
    CHECK(snapshot_segment[n]["full-2400"] == snap_seg);
    // The deletions per snapshot add up to the missing segments.
    const uint64_t d0 = snaps[0]["nodes"][n]["segments_deleted"];
    const uint64_t d1 = snaps[1]["nodes"][n]["segments_deleted"];
    CHECK(d0 + d1 == first);
  }

  auto v = Walcut("verify " + kPruned);
  INFO(v.out << v.err);
  CHECK(v.code == 0);
  CHECK(v.out.find(": OK") != std::string::npos);
}

TEST_CASE("pruned: regenerates byte for byte", "[cli][samples]") {
  TempDir t;
  const std::string out = t.path + "/p";
  auto r = Walcut("run " + out + kPrunedArgs);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("wal retention after-snapshot:") != std::string::npos);
  const auto want = Files(kPruned);
  REQUIRE(Files(out) == want);
  for (const auto& p : want) {
    INFO(p);
    const std::string a = out + p, b = kPruned + p;
    if (p.ends_with(".zst")) {
      CHECK(Decompress(a) == Decompress(b));
      if (Slurp(a) != Slurp(b)) WARN(p << ": same segment, other zstd frame bytes (another libzstd?)");
    } else {
      CHECK(Slurp(a) == Slurp(b));
    }
  }
}

TEST_CASE("run --wal-retention: json summary, the default adds nothing, bad values are usage errors", "[cli]") {
  TempDir t;
  auto r = Walcut("run " + t.path +
                  "/a --txs 600 --cut-every 100 --segment-size 8K --full-snapshot-every 200"
                  " --wal-retention after-snapshot --crashes 2 --seed 3 --format json");
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(j.contains("wal_retention"));
  CHECK(j["wal_retention"]["policy"] == "after-snapshot");
  CHECK(j["wal_retention"]["segments_deleted"].get<uint64_t>() > 0);
  CHECK(j["wal_retention"]["first_segment"].size() == 3);
  CHECK(j["full_snapshots"].size() == 3);
  auto v = Walcut("verify " + t.path + "/a");
  INFO(v.out << v.err);
  CHECK(v.code == 0);

  auto k = Walcut("run " + t.path + "/b --txs 600 --cut-every 100 --full-snapshot-at 200 --seed 3 --format json");
  REQUIRE(k.code == 0);
  const auto jk = nlohmann::json::parse(k.out);
  CHECK_FALSE(jk.contains("wal_retention"));
  const auto ck = nlohmann::json::parse(Slurp(t.path + "/b/cluster.json"));
  CHECK_FALSE(ck.contains("wal_retention"));
  CHECK_FALSE(ck["node_dirs"][0].contains("first_segment"));

  auto bad = Walcut("run " + t.path + "/c --wal-retention sometimes");
  CHECK(bad.code == 2);
  CHECK(bad.err.find("--wal-retention sometimes") != std::string::npos);
  auto far = Walcut("run " + t.path + "/d --txs 100 --full-snapshot-every 101");
  CHECK(far.code == 2);
}

TEST_CASE("run --segment-size above the 1 GiB a segment may hold is a usage error", "[cli]") {
  TempDir t;
  const auto r = Walcut("run " + t.path + "/c --segment-size 2048MiB");
  CHECK(r.code == 2);
  CHECK(r.err == "walcut: --segment-size 2048MiB: at most 1GiB (1073741824 bytes)\n");
}

TEST_CASE("pruned: cuts, check, cut show and restore read the WAL as starting after genesis", "[cli][samples]") {
  // cuts: cut 5 unavailable (every node still holds its records, but no
  // base before it is left to check it against), cut 6 consistent against
  // full-2400; full-1200 listed as not usable.
  const auto cuts = Walcut("cuts " + kPruned);
  INFO(cuts.out << cuts.err);
  CHECK(cuts.code == 0);
  CHECK(cuts.out.find("2 cuts: 1 consistent, 0 inconsistent, 0 incomplete, 1 unavailable") != std::string::npos);
  CHECK(cuts.out.find("reason: no full snapshot or consistent cut before cut 5 is still in every node's WAL to check "
                      "it against (node 0's WAL starts at 4/00000000; segments before it were removed)") !=
        std::string::npos);
  CHECK(cuts.out.find("full snapshot full-2400 (2026-11-30T12:00:00.227021Z): base for cuts 6 (1 consistent cuts)") !=
        std::string::npos);
  CHECK(cuts.out.find("full snapshot full-1200: not usable as a base: no node's WAL holds its SNAPSHOT record any "
                      "more") != std::string::npos);
  CHECK(cuts.out.find("earliest 6: base full-2400, the oldest full snapshot every node's WAL still holds") !=
        std::string::npos);
  const auto js = Walcut("cuts --format json " + kPruned);
  REQUIRE(js.code == 0);
  const auto j = nlohmann::json::parse(js.out);
  CHECK(j["counts"]["unavailable"] == 1);
  CHECK(j["cuts"][0]["status"] == "unavailable");
  CHECK(j["cuts"][1]["checked_against"] == "full snapshot full-2400");
  REQUIRE(j["snapshots"].size() == 2);
  CHECK(j["snapshots"][0]["usable"] == false);
  CHECK(j["snapshots"][1]["serves"] == nlohmann::json::array({6}));

  // check: the unavailable cut is a note, not a finding; the restore level
  // restores cut 6 from full-2400.
  const auto check = Walcut("check --level restore " + kPruned);
  INFO(check.out << check.err);
  CHECK(check.code == 0);
  CHECK(check.out.find("cuts: 2 cuts: 1 consistent, 0 inconsistent, 0 incomplete, 1 unavailable") != std::string::npos);
  CHECK(check.out.find("restore cut 6: pass (base full-2400 (the newest full snapshot") != std::string::npos);
  const auto check_json = Walcut("check --format json " + kPruned);
  CHECK(check_json.out.find("unavailable (not a finding") != std::string::npos);
  // Asked for by name, the unavailable cut cannot be checked: a finding.
  CHECK(Walcut("check --cut 5 " + kPruned).code == 1);
  CHECK(Walcut("cut show " + kPruned + " 5").code == 1);

  // restore chooses full-2400 by itself and says why; genesis is refused.
  TempDir out;
  const auto r = Walcut("restore " + kPruned + " --latest --check auto --out " + out.path + "/r");
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("from base full-2400 (full)") != std::string::npos);
  CHECK(r.out.find("base: full-2400 (the newest full snapshot taken before cut 6 on every node") != std::string::npos);
  CHECK(r.out.find("fingerprint 8a0d20d50657408e") != std::string::npos);
  const auto g = Walcut("restore " + kPruned + " --cut 6 --base genesis --dry-run");
  CHECK(g.code == 2);
  CHECK(g.err.find("node 0's WAL starts at 4/00000000 (segments before it were removed)") != std::string::npos);
  // --base takes the snapshot directory's path too.
  const auto p = Walcut("restore " + kPruned + " --cut 6 --base " + kPruned + "/snapshots/full-2400 --dry-run");
  INFO(p.out << p.err);
  CHECK(p.code == 0);
  CHECK(p.out.find("from base full-2400 (full)") != std::string::npos);
  // The cut 5 restore is refused: it is unavailable, not inconsistent.
  const auto five = Walcut("restore " + kPruned + " --cut 5 --dry-run");
  CHECK(five.code == 1);
  CHECK(five.err.find("cut 5 is unavailable") != std::string::npos);
}
