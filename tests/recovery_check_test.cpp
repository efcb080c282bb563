// recovery/check: the ladder on small clusters made by the node runtime (a
// healthy one, one with a crash), the incremental state file, and the
// invariant hook. End-to-end output on the samples is in cli_check_test.cpp.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "cut/load.h"
#include "node/cluster.h"
#include "recovery/check.h"
#include "scratch_dir.h"
#include "walfmt/snapshot.h"

namespace fs = std::filesystem;
using walcut::recovery::CheckLevel;
using walcut::recovery::CheckOptions;
using walcut::recovery::CheckReport;
using walcut::recovery::ItemOutcome;

namespace {

using TempDir = walcut::test::ScratchDir;

walcut::node::ClusterOptions Small(const std::string& dir, bool crash) {
  walcut::node::ClusterOptions o;
  o.dir = dir;
  o.seed = 5;
  o.nodes = 3;
  o.backups = 1;
  o.workload.workload = walcut::node::Workload::kBank;
  o.workload.accounts = 60;
  o.txs = 240;
  o.concurrency = 16;
  o.cuts = 5;
  o.cut_every = 30;
  o.segment_bytes = 16 * 1024;
  if (crash) o.random_crashes = 1;
  return o;
}

std::map<std::string, std::string> Files(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::ifstream f(e.path(), std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    out[fs::relative(e.path(), dir).string()] = ss.str();
  }
  return out;
}

const walcut::recovery::CheckItem* FindItem(const CheckReport& r, CheckLevel l, const std::string& group,
                                            const std::string& name) {
  for (const auto& i : r.items) {
    if (i.level == l && i.group == group && i.name == name) return &i;
  }
  return nullptr;
}

// check of DIR at LEVEL, which must run and exit 1.
CheckReport CheckFails(const fs::path& dir, CheckLevel level) {
  CheckOptions o;
  o.dir = dir.string();
  o.level = level;
  auto r = walcut::recovery::RunCheck(o);
  REQUIRE(r.ok());
  CHECK(walcut::recovery::CheckOutcome(*r) == walfmt::Outcome::kFindings);
  return std::move(r.value());
}

// The one finding of item (level, group, name), which must have failed.
const walcut::recovery::CheckFinding& OnlyFinding(const CheckReport& r, CheckLevel l, const std::string& group,
                                                  const std::string& name) {
  const auto* item = FindItem(r, l, group, name);
  INFO(group << " / " << name);
  REQUIRE(item);
  CHECK(item->outcome == ItemOutcome::kFail);
  REQUIRE(item->findings.size() == 1);
  return item->findings[0];
}

}  // namespace

TEST_CASE("check: a healthy cluster passes every level and leaves its input alone", "[recovery][check]") {
  TempDir d("healthy");
  auto run = walcut::node::RunCluster(Small(d.path.string(), false));
  REQUIRE(run.ok());
  const auto before = Files(d.path);

  TempDir scratch("healthy-tmp");
  fs::create_directories(scratch.path);
  CheckOptions o;
  o.dir = d.path.string();
  o.level = CheckLevel::kRestore;
  o.temp_dir = scratch.path.string();
  auto r = walcut::recovery::RunCheck(o);
  REQUIRE(r.ok());
  INFO(r->items.size() << " items");
  for (const auto& i : r->items) {
    INFO(i.group << ": " << i.name << ": " << (i.findings.empty() ? i.note : i.findings.front().message));
    CHECK(i.outcome != ItemOutcome::kFail);
  }
  CHECK(r->errors.empty());
  CHECK(walcut::recovery::CheckOutcome(*r) == walfmt::Outcome::kOk);
  CHECK(r->cuts_total == run->summary.cuts_started);
  CHECK(r->cuts_consistent == r->cuts_total);
  CHECK(r->window.any);
  CHECK(r->window.latest == r->cuts_total);
  // Every consistent cut restored, read back, fingerprints compared; the
  // first from genesis, each later one from the previous cut's restore.
  REQUIRE(r->restores.size() == r->cuts_total);
  for (size_t i = 0; i < r->restores.size(); ++i) {
    const auto& rs = r->restores[i];
    CHECK(rs.restored);
    CHECK(rs.fingerprints.size() == 3);
    CHECK(rs.base == (i == 0 ? std::string("genesis") : fmt::format("cut-{}", r->restores[i - 1].cut)));
    const auto* fp = FindItem(*r, CheckLevel::kRestore, fmt::format("cut-{}", rs.cut), "fingerprints");
    REQUIRE(fp != nullptr);
    CHECK(fp->outcome == ItemOutcome::kPass);
  }
  // Restored each from genesis instead: the same states.
  o.chain_restores = false;
  auto g = walcut::recovery::RunCheck(o);
  REQUIRE(g.ok());
  REQUIRE(g->restores.size() == r->restores.size());
  for (size_t i = 0; i < g->restores.size(); ++i) {
    CHECK(g->restores[i].base == "genesis");
    CHECK(g->restores[i].fingerprints == r->restores[i].fingerprints);
    CHECK(g->restores[i].entries == r->restores[i].entries);
  }
  // One item per check per node and cut, plus the cut's status.
  const auto* atom = FindItem(*r, CheckLevel::kCuts, "cut-1", "node 2: atomicity");
  REQUIRE(atom != nullptr);
  CHECK(atom->outcome == ItemOutcome::kPass);
  CHECK(FindItem(*r, CheckLevel::kCuts, "cut-1", "status") != nullptr);
  CHECK(Files(d.path) == before);
  // The temporary restore directories are gone.
  for (const auto& e : fs::directory_iterator(scratch.path)) FAIL("left behind: " << e.path().string());
}

TEST_CASE("check: a cut broken by a crash is a finding naming its consistent neighbours", "[recovery][check]") {
  // Seeds with one random crash; find one whose run has an inconsistent cut.
  for (uint64_t seed = 1; seed < 40; ++seed) {
    TempDir d("crash");
    auto opt = Small(d.path.string(), true);
    opt.seed = seed;
    auto run = walcut::node::RunCluster(opt);
    REQUIRE(run.ok());
    if (run->summary.cuts_inconsistent == 0) continue;
    INFO("seed " << seed);
    CheckOptions o;
    o.dir = d.path.string();
    auto r = walcut::recovery::RunCheck(o);
    REQUIRE(r.ok());
    CHECK(walcut::recovery::CheckOutcome(*r) == walfmt::Outcome::kFindings);
    bool named = false;
    for (const auto& i : r->items) {
      if (i.name != "status" || i.outcome != ItemOutcome::kFail) continue;
      REQUIRE(!i.findings.empty());
      const auto& f = i.findings.front();
      CHECK(f.check == "status");
      CHECK(f.found == "inconsistent");
      CHECK(f.message.find("nearest consistent cut before") != std::string::npos);
      named = named || f.consistent_before.has_value() || f.consistent_after.has_value();
    }
    CHECK(named);
    return;
  }
  FAIL("no seed in 1..39 gave an inconsistent cut");
}

TEST_CASE("check: the state file skips unchanged segments and catches a rewritten one", "[recovery][check]") {
  TempDir d("state");
  auto run = walcut::node::RunCluster(Small(d.path.string(), false));
  REQUIRE(run.ok());
  const std::string state = (d.path / "state.json").string();
  CheckOptions o;
  o.dir = d.path.string();
  o.level = CheckLevel::kFiles;
  o.state_path = state;
  auto first = walcut::recovery::RunCheck(o);
  REQUIRE(first.ok());
  CHECK(first->files.segments_skipped == 0);
  CHECK(first->files.segments_read == first->files.segments);
  CHECK(first->files.state_written);
  auto st = walcut::recovery::ReadCheckState(state);
  REQUIRE(st.ok());
  CHECK(st->nodes.size() == 3);

  auto second = walcut::recovery::RunCheck(o);
  REQUIRE(second.ok());
  CHECK(second->files.segments_read == 0);
  CHECK(second->files.segments_skipped == first->files.segments);
  CHECK(second->files.bytes_skipped == first->files.bytes_read);
  CHECK(walcut::recovery::CheckOutcome(*second) == walfmt::Outcome::kOk);

  // Round trip of the state format.
  auto again = walcut::recovery::CheckStateFromJson(walcut::recovery::CheckStateToJson(*st), "x");
  REQUIRE(again.ok());
  CHECK(walcut::recovery::CheckStateToJson(*again) == walcut::recovery::CheckStateToJson(*st));
  CHECK_FALSE(walcut::recovery::CheckStateFromJson("{\"schema\":\"other\"}", "x").ok());

  // Flip a byte of node 0's first segment (plain: the runtime writes no
  // archives here) at the same size: changed, reported with both checksums.
  fs::path seg;
  for (const auto& e : fs::directory_iterator(d.path / "node-0" / "wal")) {
    if (seg.empty() || e.path() < seg) seg = e.path();
  }
  REQUIRE(seg.extension() == ".wal");
  {
    std::fstream f(seg, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(200);
    char c = 0;
    f.read(&c, 1);
    c ^= 0x40;
    f.seekp(200);
    f.write(&c, 1);
  }
  auto third = walcut::recovery::RunCheck(o);
  REQUIRE(third.ok());
  CHECK(walcut::recovery::CheckOutcome(*third) == walfmt::Outcome::kFindings);
  bool changed = false;
  for (const auto& i : third->items) {
    for (const auto& f : i.findings) {
      if (f.check == "segment-changed") {
        changed = true;
        CHECK(f.node == 0u);
        CHECK(f.message.find("segment 0 of node 0 changed since it was verified: crc32c") != std::string::npos);
      }
    }
  }
  CHECK(changed);

  // Node 1's first segment cut short: it shrank, with both sizes and its file.
  fs::path seg1;
  for (const auto& e : fs::directory_iterator(d.path / "node-1" / "wal")) {
    if (seg1.empty() || e.path() < seg1) seg1 = e.path();
  }
  const uint64_t size = fs::file_size(seg1);
  REQUIRE(size > 1000);
  fs::resize_file(seg1, size - 100);
  auto fourth = walcut::recovery::RunCheck(o);
  REQUIRE(fourth.ok());
  CHECK(walcut::recovery::CheckOutcome(*fourth) == walfmt::Outcome::kFindings);
  bool shrank = false;
  for (const auto& i : fourth->items) {
    for (const auto& f : i.findings) {
      if (f.check == "segment-changed" && f.node == 1u) {
        shrank = true;
        CHECK(f.message == fmt::format("segment 0 of node 1 shrank since it was verified: {} -> {} bytes ({})", size,
                                       size - 100, seg1.string()));
      }
    }
  }
  CHECK(shrank);

  // Node 2's last segment removed: the item of the segment that disappeared fails.
  fs::path last2;
  for (const auto& e : fs::directory_iterator(d.path / "node-2" / "wal")) {
    if (last2.empty() || last2 < e.path()) last2 = e.path();
  }
  fs::remove(last2);
  auto fifth = walcut::recovery::RunCheck(o);
  REQUIRE(fifth.ok());
  const auto& gone = OnlyFinding(*fifth, CheckLevel::kFiles, "node-2", "segment " + last2.filename().string());
  CHECK_THAT(gone.message, Catch::EndsWith("(" + last2.filename().string() + ") disappeared since it was verified"));
}

TEST_CASE("check: a node whose WAL directory holds no segment fails its segment list", "[recovery][check]") {
  TempDir d("nosegs");
  auto run = walcut::node::RunCluster(Small(d.path.string(), false));
  REQUIRE(run.ok());
  for (const auto& e : fs::directory_iterator(d.path / "node-2" / "wal")) fs::remove(e.path());
  const CheckReport rep = CheckFails(d.path, CheckLevel::kFiles);
  const auto& list = OnlyFinding(rep, CheckLevel::kFiles, "node-2", "segment list");
  CHECK(list.node == 2u);
  CHECK_THAT(list.message, Catch::Contains("node has no WAL segments (expected wal/<index>.wal)"));
  CHECK(FindItem(rep, CheckLevel::kFiles, "node-1", "segment list") == nullptr);
}

TEST_CASE("check: the invariant hook's findings fail the restored cut", "[recovery][check]") {
  TempDir d("hook");
  auto run = walcut::node::RunCluster(Small(d.path.string(), false));
  REQUIRE(run.ok());
  CheckOptions o;
  o.dir = d.path.string();
  o.cut = 2;
  o.level = CheckLevel::kRestore;
  o.temp_dir = d.path.parent_path().string();
  uint64_t calls = 0;
  o.invariants = [&calls](
                     const std::string&,
                     const walcut::recovery::NodeStates& states) -> walfmt::Result<walcut::recovery::InvariantOutcome> {
    ++calls;
    CHECK(states.size() == 3);
    for (const auto* s : states) CHECK((s != nullptr && !s->empty()));
    walcut::recovery::InvariantOutcome out;
    out.ran = true;
    out.summary = "test hook";
    walcut::recovery::CheckFinding f;
    f.check = "invariant bank.total";
    f.expected = "100";
    f.found = "99";
    f.message = "bank total is 99, expected 100";
    out.findings.push_back(f);
    return out;
  };
  auto r = walcut::recovery::RunCheck(o);
  REQUIRE(r.ok());
  CHECK(calls == 1);
  const auto* inv = FindItem(*r, CheckLevel::kRestore, "cut-2", "invariants");
  REQUIRE(inv != nullptr);
  CHECK(inv->outcome == ItemOutcome::kFail);
  REQUIRE(inv->findings.size() == 1);
  CHECK(inv->findings[0].cut == 2u);
  CHECK(walcut::recovery::CheckOutcome(*r) == walfmt::Outcome::kFindings);

  // The build's own checker (recovery/invariants.h): the bank total holds.
  o.invariants = walcut::recovery::DefaultInvariantChecker();
  REQUIRE(o.invariants);
  auto d2 = walcut::recovery::RunCheck(o);
  REQUIRE(d2.ok());
  const auto* real = FindItem(*d2, CheckLevel::kRestore, "cut-2", "invariants");
  REQUIRE(real != nullptr);
  INFO(real->note);
  CHECK(real->outcome == ItemOutcome::kPass);
  CHECK(d2->restores.at(0).invariants_ran);

  // Without a checker the step is skipped, not passed.
  o.invariants = nullptr;
  auto s = walcut::recovery::RunCheck(o);
  REQUIRE(s.ok());
  const auto* skipped = FindItem(*s, CheckLevel::kRestore, "cut-2", "invariants");
  REQUIRE(skipped != nullptr);
  CHECK(skipped->outcome == ItemOutcome::kSkipped);
  CHECK(walcut::recovery::CheckOutcome(*s) == walfmt::Outcome::kOk);

  // A cut that does not exist is a usage error, not a finding.
  o.cut = 99;
  auto none = walcut::recovery::RunCheck(o);
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().code() == walfmt::ErrorCode::kNotFound);
}

TEST_CASE(
    "check: one node's WAL from another cluster fails the files level and the reconstruction, naming both clusters",
    "[recovery][check]") {
  TempDir a("mixed-a");
  TempDir b("mixed-b");
  auto ob = Small(b.path.string(), false);
  ob.seed = 6;
  auto ra = walcut::node::RunCluster(Small(a.path.string(), false));
  auto rb = walcut::node::RunCluster(ob);
  REQUIRE(ra.ok());
  REQUIRE(rb.ok());
  auto la = walcut::cut::FindClusterLayout(a.path.string());
  auto lb = walcut::cut::FindClusterLayout(b.path.string());
  REQUIRE(la.ok());
  REQUIRE(lb.ok());
  REQUIRE(la->cluster_id != lb->cluster_id);
  fs::remove_all(a.path / "node-1" / "wal");
  fs::copy(b.path / "node-1" / "wal", a.path / "node-1" / "wal");
  // Without cluster.json each node's cluster comes from its segment headers.
  fs::remove(a.path / "cluster.json");
  const CheckReport rep = CheckFails(a.path, CheckLevel::kCuts);
  const auto& one = OnlyFinding(rep, CheckLevel::kFiles, "cluster", "one cluster");
  CHECK(one.check == "segment-mismatch");
  CHECK(one.found == "2 cluster ids");
  CHECK(one.message == "segments of 2 different clusters are in one cluster directory");
  const auto& rec = OnlyFinding(rep, CheckLevel::kCuts, "cluster", "reconstruct");
  CHECK(rec.check == "reconstruct");
  CHECK(rec.message ==
        fmt::format("node 1 belongs to cluster {:016x}, node 0 to {:016x}", lb->cluster_id, la->cluster_id));
  CHECK(rep.errors.empty());
}

TEST_CASE("check: --cut naming a cut the cluster does not have is refused, with the cuts it has", "[recovery][check]") {
  TempDir d("nocut");
  auto run = walcut::node::RunCluster(Small(d.path.string(), false));
  REQUIRE(run.ok());
  CheckOptions o;
  o.dir = d.path.string();
  o.cut = 1;
  auto r = walcut::recovery::RunCheck(o);
  REQUIRE(r.ok());
  const uint64_t cuts = r->cuts_total;
  REQUIRE(cuts >= 2);
  o.cut = cuts + 7;
  r = walcut::recovery::RunCheck(o);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == walfmt::ErrorCode::kNotFound);
  CHECK(r.status().message() ==
        fmt::format("{}: no cut {} (the cluster has {} cuts, 1..{})", o.dir, cuts + 7, cuts, cuts));
}

namespace {

// The node file a restore of `check` staged under `root` (its temporary
// directory): DIR/.../<staging dir>/node-<node>.snap, or "" when none is yet.
fs::path StagedNodeFile(const fs::path& root, uint32_t node) {
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (ec) break;
    const fs::path& p = it->path();
    if (p.filename() == fmt::format("node-{}.snap", node) &&
        p.parent_path().filename().string().find(".tmp-") != std::string::npos) {
      return p;
    }
  }
  return {};
}

}  // namespace

TEST_CASE(
    "check: a restored file changed before it is read back is a fingerprint finding, the invariants run on "
    "what was read back",
    "[recovery][check]") {
  // Node 0's file is staged when node 1's restore reports progress (one node
  // at a time); changing it then stands for a disk or another process
  // changing the output between the restore and its read-back.
  TempDir d("readback");
  auto run = walcut::node::RunCluster(Small(d.path.string(), false));
  REQUIRE(run.ok());
  TempDir scratch("readback-tmp");
  fs::create_directories(scratch.path);
  CheckOptions o;
  o.dir = d.path.string();
  o.level = CheckLevel::kRestore;
  o.cut = 2;
  o.jobs = 1;
  o.temp_dir = scratch.path.string();
  std::string changed;
  std::function<void(const fs::path&)> change;
  o.progress = [&](const std::string& stage, uint64_t, uint64_t) {
    if (!changed.empty() || stage.find("restore") == std::string::npos) return;
    const fs::path f = StagedNodeFile(scratch.path, 0);
    if (f.empty()) return;
    change(f);
    changed = f.string();
  };

  SECTION("a file that no longer reads") {
    change = [](const fs::path& f) {
      std::string bytes;
      {
        std::ifstream in(f, std::ios::binary);
        bytes.assign(std::istreambuf_iterator<char>(in), {});
      }
      REQUIRE(bytes.size() > 100);
      bytes[bytes.size() / 2] ^= 0x10;
      std::ofstream(f, std::ios::binary | std::ios::trunc) << bytes;
    };
    auto r = walcut::recovery::RunCheck(o);
    REQUIRE(r.ok());
    REQUIRE_FALSE(changed.empty());
    CHECK(walcut::recovery::CheckOutcome(*r) == walfmt::Outcome::kFindings);
    const auto& fp = OnlyFinding(*r, CheckLevel::kRestore, "cut-2", "fingerprints");
    CHECK(fp.check == "fingerprint");
    CHECK(fp.node == 0u);
    CHECK_THAT(fp.message, Catch::StartsWith("cut 2, node 0: the restored node-0.snap does not read back: "));
    const auto* inv = FindItem(*r, CheckLevel::kRestore, "cut-2", "invariants");
    REQUIRE(inv);
    CHECK(inv->outcome == ItemOutcome::kSkipped);
  }
  SECTION("a valid file of another state with as many keys: one value changed") {
    uint64_t keys = 0;
    change = [&keys](const fs::path& f) {
      auto snap = walfmt::ReadSnapshotFile(f.string());
      REQUIRE(snap.ok());
      REQUIRE_FALSE(snap->entries.empty());
      keys = snap->entries.size();
      snap->entries.begin()->second += "0";
      REQUIRE(walfmt::WriteSnapshotFile(f.string() + ".new", *snap).ok());
      fs::rename(f.string() + ".new", f);
    };
    auto r = walcut::recovery::RunCheck(o);
    REQUIRE(r.ok());
    REQUIRE_FALSE(changed.empty());
    const auto& fp = OnlyFinding(*r, CheckLevel::kRestore, "cut-2", "fingerprints");
    CHECK(fp.node == 0u);
    CHECK_THAT(fp.message,
               Catch::StartsWith("cut 2, node 0: node-0.snap read back differs from the restored state: expected "));
    CHECK_THAT(fp.expected, Catch::EndsWith(fmt::format(", {} keys", keys)));
    CHECK_THAT(fp.found, Catch::EndsWith(fmt::format(", {} keys", keys)));
    CHECK(fp.expected != fp.found);
  }
  SECTION("a valid file of another state: 1100 keys of no workload added") {
    uint64_t keys = 0;
    change = [&keys](const fs::path& f) {
      auto snap = walfmt::ReadSnapshotFile(f.string());
      REQUIRE(snap.ok());
      keys = snap->entries.size();
      for (int i = 0; i < 1100; ++i) snap->entries[fmt::format("junk-{:04}", i)] = "x";
      REQUIRE(walfmt::WriteSnapshotFile(f.string() + ".new", *snap).ok());
      fs::rename(f.string() + ".new", f);
    };
    auto r = walcut::recovery::RunCheck(o);
    REQUIRE(r.ok());
    REQUIRE_FALSE(changed.empty());
    CHECK(walcut::recovery::CheckOutcome(*r) == walfmt::Outcome::kFindings);
    const auto& fp = OnlyFinding(*r, CheckLevel::kRestore, "cut-2", "fingerprints");
    CHECK(fp.node == 0u);
    CHECK_THAT(fp.message,
               Catch::StartsWith("cut 2, node 0: node-0.snap read back differs from the restored state: expected "));
    CHECK_THAT(fp.found, Catch::EndsWith(fmt::format(", {} keys", keys + 1100)));
    // The invariants see the keys of no workload: 1000 listed, the rest counted.
    const auto* inv = FindItem(*r, CheckLevel::kRestore, "cut-2", "invariants");
    REQUIRE(inv);
    CHECK(inv->outcome == ItemOutcome::kFail);
    REQUIRE(inv->findings.size() == 1001);
    CHECK(inv->findings[0].node == 0u);
    CHECK_THAT(inv->findings[0].message, Catch::Contains("junk-0000"));
    CHECK(inv->findings.back().check == "invariant");
    CHECK(inv->findings.back().message == "100 more invariant findings not listed");
  }
}

TEST_CASE("check: a restore that meets damage the scan did not see is a finding of the cut", "[recovery][check]") {
  TempDir d("late-damage");
  auto run = walcut::node::RunCluster(Small(d.path.string(), false));
  REQUIRE(run.ok());
  TempDir scratch("late-damage-tmp");
  fs::create_directories(scratch.path);
  CheckOptions o;
  o.dir = d.path.string();
  o.level = CheckLevel::kRestore;
  o.cut = 2;
  o.temp_dir = scratch.path.string();
  // After the scan, before the restore: node 1's WAL cut short to its first segment's header.
  bool damaged = false;
  o.progress = [&](const std::string& stage, uint64_t, uint64_t) {
    if (damaged || stage.find("restore") == std::string::npos) return;
    for (const auto& e : fs::directory_iterator(d.path / "node-1" / "wal")) fs::resize_file(e.path(), 64);
    damaged = true;
  };
  auto r = walcut::recovery::RunCheck(o);
  REQUIRE(r.ok());
  REQUIRE(damaged);
  CHECK(walcut::recovery::CheckOutcome(*r) == walfmt::Outcome::kFindings);
  CHECK(r->errors.empty());
  const auto& item = OnlyFinding(*r, CheckLevel::kRestore, "cut-2", "restore");
  CHECK(item.check == "restore-damaged");
  CHECK(item.cut == 2u);
  CHECK_THAT(item.message, Catch::StartsWith("node 1: "));
}
