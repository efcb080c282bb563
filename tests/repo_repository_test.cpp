// The repository of snapshot artifacts (repo/): manifest codec and
// checksums, full and incremental artifacts, list, chains, restore through a
// chain (byte-identical to a restore from the live WAL), refusals, create
// killed at every I/O step, expire.
#include <filesystem>
#include <functional>
#include <set>

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cut/load.h"
#include "recovery/restore.h"
#include "recovery_support.h"
#include "repo/repository.h"
#include "walfmt/file_io.h"

namespace walcut::repo {
namespace {
namespace fs = std::filesystem;
using recovery::testing::ReadAll;
using recovery::testing::TempDir;
using recovery::testing::WriteAll;

// A cluster with a full snapshot and several cuts. Large segments: each
// node's WAL is one segment, so an increment holds it from segment 0 (what the
// cut analysis reads today without the oldest-segments-missing support).
std::string MakeCluster(const std::string& parent, uint64_t seed, uint64_t segment_bytes = 16u << 20,
                        uint64_t cuts = 5) {
  node::ClusterOptions o;
  o.dir = parent + "/c";
  o.seed = seed;
  o.nodes = 3;
  o.backups = 1;
  o.workload.workload = node::Workload::kBank;
  o.workload.accounts = 0;  // the default (1000): few conflicts, so every cut gets its transactions
  o.txs = 1200;
  o.cuts = cuts;
  o.full_snapshot_at_tx = 300;
  o.segment_bytes = segment_bytes;
  auto run = node::RunCluster(o);
  INFO(fmt::format("seed {}", seed));
  REQUIRE(run.ok());
  REQUIRE(run->snapshots.size() == 1);
  return o.dir;
}

cut::ClusterCuts Cuts(const std::string& dir) {
  auto layout = cut::FindClusterLayout(dir);
  REQUIRE(layout.ok());
  auto sums = cut::ScanCluster(*layout, {});
  REQUIRE(sums.ok());
  auto cc = cut::Reconstruct(std::move(sums.value()));
  REQUIRE(cc.ok());
  return std::move(cc.value());
}

std::vector<uint64_t> ConsistentCuts(const cut::ClusterCuts& cc) {
  std::vector<uint64_t> v;
  for (const auto& g : cc.cuts) {
    if (g.status == cut::CutStatus::kConsistent) v.push_back(g.cut_id);
  }
  return v;
}

// Restores cut K of the live cluster from genesis into OUT.
void LiveRestore(const std::string& cluster, uint64_t k, const std::string& out) {
  auto layout = cut::FindClusterLayout(cluster);
  REQUIRE(layout.ok());
  const auto cc = Cuts(cluster);
  recovery::RestoreRequest rq;
  rq.cluster_dir = cluster;
  rq.cut = k;
  rq.out = out;
  auto r = recovery::Restore(cc, *layout, rq);
  INFO(r.status().message());
  REQUIRE(r.ok());
  REQUIRE(recovery::WriteRestore(*r, out).ok());
}

walfmt::Result<CreateResult> Create(const std::string& cluster, const std::string& repo, bool full, std::string from,
                                    std::optional<uint64_t> cut, std::string parent = "", bool latest = false) {
  CreateRequest rq;
  rq.cluster_dir = cluster;
  rq.repo = repo;
  rq.full = full;
  rq.from = std::move(from);
  rq.cut = cut;
  rq.parent = std::move(parent);
  rq.latest = latest;
  return CreateArtifact(rq);
}

#define REQUIRE_OK(expr)         \
  do {                           \
    auto&& _r = (expr);          \
    INFO(_r.status().message()); \
    REQUIRE(_r.ok());            \
  } while (0)

// A full artifact of the cluster's first runtime full snapshot, then an
// increment of its latest consistent cut on top; the increment.
CreateResult FullAndLatestIncrement(const std::string& cluster, const std::string& repo) {
  auto info = walfmt::LoadClusterInfo(cluster);
  REQUIRE(info.ok());
  REQUIRE_OK(Create(cluster, repo, true, info->full_snapshots[0].name, std::nullopt));
  auto inc = Create(cluster, repo, false, "", std::nullopt, "", true);
  REQUIRE_OK(inc);
  return std::move(inc.value());
}

RepoCheckReport Check(const std::string& repo, bool restore = false, std::string name = "") {
  RepoCheckOptions o;
  o.repo = repo;
  o.restore = restore;
  o.name = std::move(name);
  auto r = CheckRepository(o);
  INFO(r.status().message());
  REQUIRE(r.ok());
  return std::move(r.value());
}

std::string Findings(const RepoCheckReport& r) {
  std::string s;
  for (const auto& it : r.items) {
    for (const auto& f : it.findings) s += fmt::format("[{} {}: {}] {}\n", it.level, it.group, it.name, f.message);
  }
  for (const auto& e : r.errors) s += "ERROR " + e + "\n";
  return s;
}

void RequireClean(const RepoCheckReport& r) {
  INFO(Findings(r));
  REQUIRE(RepoCheckOutcome(r) == walfmt::Outcome::kOk);
}

void FlipByte(const std::string& path, size_t at) {
  std::string b = ReadAll(path);
  REQUIRE(!b.empty());
  b[at % b.size()] ^= 0x20;
  WriteAll(path, b);
}

}  // namespace

TEST_CASE("repo: manifest codec round-trips and its self-checksum catches any changed byte", "[repo]") {
  Manifest m;
  m.name = "i-cut-4";
  m.type = "incremental";
  m.source = "wal";
  m.parent = "f-full-1";
  m.seq = 2;
  m.cluster_id = 0xFFFFFFFFFFFFFFF0ull;
  m.cut = 4;
  m.time_us = 1234;
  m.verdict = "consistent";
  ArtifactNode n;
  n.node = 0;
  n.has_wal = true;
  n.wal_from = {1, 0x40};
  n.wal_to = {3, 0x100};
  n.first_segment = 1;
  n.last_segment = 3;
  n.segments = {"0000000000000001.wal.zst", "0000000000000002.wal.zst", "0000000000000003.wal.zst"};
  n.continue_from = {3, 0x80};
  n.has_cut = true;
  n.cut_start = {3, 0x90};
  n.cut_finish = {3, 0x100};
  n.before = 2;
  m.nodes.push_back(n);
  m.files.push_back({"node-0/wal/0000000000000001.wal.zst", 10, Xxh3Hex("x")});
  const std::string text = EncodeManifest(m);
  auto back = DecodeManifest(text, "m");
  REQUIRE(back.ok());
  CHECK(back->name == m.name);
  CHECK(back->cluster_id == m.cluster_id);
  CHECK(back->cut == m.cut);
  CHECK(back->nodes.at(0).segments == n.segments);
  CHECK(back->nodes.at(0).continue_from == n.continue_from);
  CHECK(back->nodes.at(0).cut_finish == n.cut_finish);
  CHECK(back->files.at(0).xxh3_128 == m.files[0].xxh3_128);
  CHECK(EncodeManifest(*back) == text);
  // Every byte matters, whitespace included.
  for (size_t i = 0; i < text.size(); i += 7) {
    std::string t = text;
    t[i] = t[i] == ' ' ? '\t' : (t[i] == '0' ? '1' : '0');
    INFO("byte " << i);
    CHECK_FALSE(DecodeManifest(t, "m").ok());
  }
  // XXH3-128 of the empty input (the library's documented value).
  CHECK(Xxh3Hex("") == "99aa06d3014798d86001c324468d497f");
}

TEST_CASE("repo: full artifact of a runtime snapshot, listed and checked, a tampered byte is named", "[repo]") {
  TempDir t("repo-full");
  const std::string cluster = MakeCluster(t.str(), 11);
  const std::string repo = t.str() + "/repo";
  auto info = walfmt::LoadClusterInfo(cluster);
  REQUIRE(info.ok());
  const std::string snap = info->full_snapshots.at(0).name;
  auto r = Create(cluster, repo, true, snap, std::nullopt);
  REQUIRE_OK(r);
  CHECK(r->m.name == "f-" + snap);
  CHECK(fs::exists(repo + "/" + std::string(kMarkerFile)));
  auto l = ListRepository(repo);
  REQUIRE(l.ok());
  REQUIRE(l->artifacts.size() == 1);
  CHECK(l->artifacts[0].m.nodes.size() == 3);
  CHECK(l->artifacts[0].m.nodes[1].continue_from == info->full_snapshots[0].nodes[1].wal_position);
  CHECK(RestoreTargets(*l).size() == 1);
  RequireClean(Check(repo, true));
  // The same name twice is refused.
  auto again = Create(cluster, repo, true, snap, std::nullopt);
  REQUIRE_FALSE(again.ok());
  CHECK(again.status().code() == walfmt::ErrorCode::kInvalidArgument);
  // A flipped byte in node-1.snap is a finding that names the file.
  FlipByte(repo + "/f-" + snap + "/node-1.snap", 200);
  auto rep = Check(repo);
  CHECK(RepoCheckOutcome(rep) == walfmt::Outcome::kFindings);
  CHECK(Findings(rep).find("node-1.snap") != std::string::npos);
}

TEST_CASE("repo: synthetic full plus increments restore byte-identically to the live WAL", "[repo]") {
  TempDir t("repo-chain");
  const std::string cluster = MakeCluster(t.str(), 21);
  const std::string repo = t.str() + "/repo";
  const auto cc = Cuts(cluster);
  const auto consistent = ConsistentCuts(cc);
  INFO("seed 21");
  REQUIRE(consistent.size() >= 3);
  const uint64_t k1 = consistent[0], k2 = consistent[1], k3 = consistent.back();
  REQUIRE_OK(Create(cluster, repo, true, "", k1));
  auto i2 = Create(cluster, repo, false, "", k2);
  REQUIRE_OK(i2);
  CHECK(i2->m.parent == fmt::format("f-cut-{}", k1));
  auto i3 = Create(cluster, repo, false, "", std::nullopt, "", /*latest=*/true);
  REQUIRE_OK(i3);
  CHECK(i3->m.cut == k3);
  CHECK(i3->m.parent == fmt::format("i-cut-{}", k2));
  CHECK(i3->chain.size() == 3);
  // The increment's WAL starts where the parent says a child continues.
  for (size_t i = 0; i < 3; ++i) CHECK(i3->m.nodes[i].wal_from == i2->m.nodes[i].continue_from);
  RequireClean(Check(repo, true));

  for (uint64_t k : {k2, k3}) {
    const std::string live = t.str() + fmt::format("/live-{}", k);
    const std::string chained = t.str() + fmt::format("/chain-{}", k);
    LiveRestore(cluster, k, live);
    RepoRestoreRequest rq;
    rq.repo = repo;
    rq.cut = k;
    rq.out = chained;
    auto rr = RestoreFromRepository(rq);
    INFO(rr.status().message());
    REQUIRE(rr.ok());
    for (int i = 0; i < 3; ++i) {
      INFO(fmt::format("cut {} node {}", k, i));
      CHECK(ReadAll(fmt::format("{}/node-{}.snap", live, i)) == ReadAll(fmt::format("{}/node-{}.snap", chained, i)));
    }
  }
  // A synthetic full rolled up from the chain, without the cluster.
  CreateRequest roll;
  roll.repo = repo;
  roll.full = true;
  roll.cut = k3;
  auto f3 = CreateArtifact(roll);
  REQUIRE_OK(f3);
  CHECK(f3->m.evidence.value("served_by", "") == fmt::format("i-cut-{}", k3));
  const std::string live = t.str() + "/live-roll";
  LiveRestore(cluster, k3, live);
  for (int i = 0; i < 3; ++i) {
    CHECK(ReadAll(fmt::format("{}/node-{}.snap", live, i)) ==
          ReadAll(fmt::format("{}/f-cut-{}/node-{}.snap", repo, k3, i)));
  }
  RequireClean(Check(repo, true));

  // Dry run: the chain and the WAL to apply, nothing written.
  RepoRestoreRequest dry;
  dry.repo = repo;
  dry.name = fmt::format("i-cut-{}", k3);
  dry.dry_run = true;
  auto plan = RestoreFromRepository(dry);
  REQUIRE(plan.ok());
  CHECK(plan->steps.size() == 3);
}

TEST_CASE("repo: runtime full plus an increment restores byte-identically to the live WAL", "[repo]") {
  TempDir t("repo-rtfull");
  const std::string cluster = MakeCluster(t.str(), 31);
  const std::string repo = t.str() + "/repo";
  auto inc = FullAndLatestIncrement(cluster, repo);
  const uint64_t k = *inc.m.cut;
  const std::string live = t.str() + "/live";
  const std::string chained = t.str() + "/chained";
  LiveRestore(cluster, k, live);
  RepoRestoreRequest rq;
  rq.repo = repo;
  rq.latest = true;
  rq.out = chained;
  auto rr = RestoreFromRepository(rq);
  INFO(rr.status().message());
  REQUIRE(rr.ok());
  CHECK(rr->target == inc.m.name);
  for (int i = 0; i < 3; ++i) {
    CHECK(ReadAll(fmt::format("{}/node-{}.snap", live, i)) == ReadAll(fmt::format("{}/node-{}.snap", chained, i)));
  }
  RequireClean(Check(repo, true));
}

TEST_CASE(
    "repo: an increment's restore plans are read instead of its WAL twice - a changed plan is refused, a "
    "missing one falls back to analysing the WAL",
    "[repo]") {
  TempDir t("repo-plan");
  const std::string cluster = MakeCluster(t.str(), 33);
  const std::string repo = t.str() + "/repo";
  auto inc = FullAndLatestIncrement(cluster, repo);
  const std::string dir = repo + "/" + inc.m.name;
  // One plan per node, listed in the manifest; each a summary of the node
  // with the parent's SNAPSHOT record and cut K only.
  for (int i = 0; i < 3; ++i) {
    const std::string rel = fmt::format("node-{}/restore-plan.json", i);
    CHECK(std::any_of(inc.m.files.begin(), inc.m.files.end(), [&](const auto& f) { return f.path == rel; }));
    auto plan = cut::SummaryFromJson(ReadAll(dir + "/" + rel), rel);
    REQUIRE(plan.ok());
    REQUIRE(plan->cuts.size() == 1);
    CHECK(plan->cuts[0].cut_id == *inc.m.cut);
    CHECK(plan->snapshots.size() == 1);
  }
  const std::string live = t.str() + "/live";
  LiveRestore(cluster, *inc.m.cut, live);
  auto restore = [&](const std::string& out) {
    RepoRestoreRequest rq;
    rq.repo = repo;
    rq.latest = true;
    rq.out = out;
    return RestoreFromRepository(rq);
  };
  // A plan changed by one byte: refused, naming the file (also by check).
  const std::string plan0 = dir + "/node-0/restore-plan.json";
  const std::string saved = ReadAll(plan0);
  std::string changed = saved;
  changed[changed.find("\"cut\": ") + 7] ^= 1;
  WriteAll(plan0, changed);
  auto bad = restore(t.str() + "/bad");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("node-0/restore-plan.json: xxh3-128") != std::string::npos);
  CHECK_FALSE(fs::exists(t.str() + "/bad"));
  // Without plans (an artifact of an earlier walcut) the WAL is analysed.
  WriteAll(plan0, saved);
  for (int i = 0; i < 3; ++i) fs::remove(fmt::format("{}/node-{}/restore-plan.json", dir, i));
  Manifest m = inc.m;
  m.files.erase(std::remove_if(m.files.begin(), m.files.end(),
                               [](const auto& f) { return f.path.find("restore-plan") != std::string::npos; }),
                m.files.end());
  WriteAll(dir + "/manifest.json", EncodeManifest(m));
  auto old = restore(t.str() + "/old");
  INFO(old.status().message());
  REQUIRE(old.ok());
  for (int i = 0; i < 3; ++i) {
    CHECK(ReadAll(fmt::format("{}/node-{}.snap", live, i)) == ReadAll(fmt::format("{}/old/node-{}.snap", t.str(), i)));
  }
}

TEST_CASE("repo: refusals: inconsistent cut, another cluster's parent, missing segments, broken chain", "[repo]") {
  TempDir t("repo-refuse");
  const std::string repo = t.str() + "/repo";
  // An inconsistent cut: the crash-during-cut sample's cut 3.
  const std::string crash = std::string(WALCUT_SOURCE_DIR) + "/samples/crash-during-cut";
  REQUIRE_OK(Create(crash, repo, true, "", 2));
  auto bad = Create(crash, repo, false, "", 3);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == walfmt::ErrorCode::kInvalidArgument);
  CHECK(bad.status().message().find("cut 3 is inconsistent") != std::string::npos);
  auto bad_full = Create(crash, repo, true, "", 3);
  REQUIRE_FALSE(bad_full.ok());
  CHECK(bad_full.status().message().find("inconsistent") != std::string::npos);

  // Another cluster's artifact as the parent.
  fs::create_directories(t.str() + "/o");
  const std::string other = MakeCluster(t.str() + "/o", 41);
  auto cross = Create(other, repo, false, "", std::nullopt, "f-cut-2", true);
  REQUIRE_FALSE(cross.ok());
  CHECK(cross.status().message().find("belongs to cluster") != std::string::npos);

  // A segment the increment needs is gone: named with the node and the range.
  TempDir t2("repo-missing");
  const std::string small = MakeCluster(t2.str(), 51, 4096);
  const std::string repo2 = t2.str() + "/repo";
  auto info = walfmt::LoadClusterInfo(small);
  REQUIRE(info.ok());
  REQUIRE_OK(Create(small, repo2, true, info->full_snapshots[0].name, std::nullopt));
  const walfmt::Lsn from = info->full_snapshots[0].nodes[1].wal_position;
  const auto small_cuts = ConsistentCuts(Cuts(small));
  REQUIRE(!small_cuts.empty());
  bool removed = false;
  for (const auto& e : fs::directory_iterator(small + "/node-1/wal")) {
    const std::string name = e.path().filename().string();
    if (std::strtoull(name.c_str(), nullptr, 16) == from.segment) {
      fs::remove(e.path());
      removed = true;
    }
  }
  REQUIRE(removed);
  auto missing = Create(small, repo2, false, "", small_cuts.back());
  REQUIRE_FALSE(missing.ok());
  INFO(missing.status().message());
  CHECK(missing.status().message().find("Missed WAL segment(s)") != std::string::npos);
  CHECK(missing.status().message().find(fmt::format("node 1: {:016X}", from.segment)) != std::string::npos);
}

TEST_CASE("repo: a missing increment in the middle of a chain and tampered increment files are findings", "[repo]") {
  TempDir t("repo-midchain");
  const std::string cluster = MakeCluster(t.str(), 61);
  const std::string repo = t.str() + "/repo";
  const auto consistent = ConsistentCuts(Cuts(cluster));
  REQUIRE(consistent.size() >= 3);
  REQUIRE_OK(Create(cluster, repo, true, "", consistent[0]));
  auto i1 = Create(cluster, repo, false, "", consistent[1]);
  REQUIRE_OK(i1);
  auto i2 = Create(cluster, repo, false, "", consistent[2]);
  REQUIRE_OK(i2);
  RequireClean(Check(repo));
  // Every file of the last increment, tampered one at a time, is named.
  for (const auto& f : i2->m.files) {
    const std::string path = repo + "/" + i2->m.name + "/" + f.path;
    const std::string keep = ReadAll(path);
    FlipByte(path, keep.size() / 2);
    auto rep = Check(repo);
    INFO(f.path << "\n" << Findings(rep));
    CHECK(RepoCheckOutcome(rep) == walfmt::Outcome::kFindings);
    CHECK(Findings(rep).find(f.path) != std::string::npos);
    WriteAll(path, keep);
  }
  {
    const std::string path = repo + "/" + i2->m.name + "/manifest.json";
    const std::string keep = ReadAll(path);
    FlipByte(path, keep.size() / 3);
    auto rep = Check(repo);
    CHECK(RepoCheckOutcome(rep) == walfmt::Outcome::kFindings);
    CHECK(Findings(rep).find("manifest.json") != std::string::npos);
    WriteAll(path, keep);
  }
  RequireClean(Check(repo));
  fs::rename(repo + "/" + i1->m.name, t.str() + "/moved");
  auto rep = Check(repo);
  CHECK(RepoCheckOutcome(rep) == walfmt::Outcome::kFindings);
  CHECK(Findings(rep).find(fmt::format("needs its parent {}, which is missing", i1->m.name)) != std::string::npos);
  RepoRestoreRequest rq;
  rq.repo = repo;
  rq.name = i2->m.name;
  rq.out = t.str() + "/out";
  auto rr = RestoreFromRepository(rq);
  REQUIRE_FALSE(rr.ok());
  CHECK(rr.status().message().find(i1->m.name) != std::string::npos);
  CHECK_FALSE(fs::exists(t.str() + "/out"));
}

TEST_CASE("repo: an increment whose manifest misplaces its WAL range or names a node its parent lacks", "[repo]") {
  TempDir t("repo-continuity");
  const std::string cluster = MakeCluster(t.str(), 61);
  const std::string repo = t.str() + "/repo";
  const auto consistent = ConsistentCuts(Cuts(cluster));
  REQUIRE(consistent.size() >= 2);
  REQUIRE_OK(Create(cluster, repo, true, "", consistent[0]));
  auto inc = Create(cluster, repo, false, "", consistent[1]);
  REQUIRE_OK(inc);
  RequireClean(Check(repo));
  const std::string path = repo + "/" + inc->m.name + "/manifest.json";
  const std::string keep = ReadAll(path);
  auto tampered = [&](const std::function<void(Manifest&)>& edit) {
    Manifest m = inc->m;
    edit(m);
    WriteAll(path, EncodeManifest(m));
    auto rep = Check(repo);
    WriteAll(path, keep);
    return Findings(rep);
  };
  SECTION("a node without WAL, its segments still listed") {
    const std::string f = tampered([](Manifest& m) { m.nodes[1].has_wal = false; });
    INFO(f);
    CHECK(f.find("node 1: the increment holds no WAL") != std::string::npos);
  }
  SECTION("the range ending in another segment than the last one listed") {
    const std::string f = tampered([](Manifest& m) { m.nodes[2].wal_to.segment += 1; });
    INFO(f);
    CHECK(f.find("node 2: segments") != std::string::npos);
    CHECK(f.find("do not cover the range") != std::string::npos);
  }
  SECTION("an increment of the latest cut without a cluster directory is not a --from request") {
    CreateRequest rq;
    rq.repo = repo;
    rq.latest = true;
    auto r = CreateArtifact(rq);
    REQUIRE_FALSE(r.ok());
    INFO(r.status().message());
    CHECK(r.status().message() == "an increment needs the cluster directory");
  }
  SECTION("a node beyond the parent's nodes") {
    const std::string f = tampered([](Manifest& m) {
      auto extra = m.nodes.back();
      extra.node = static_cast<uint32_t>(m.nodes.size());
      m.nodes.push_back(extra);
    });
    INFO(f);
    CHECK(f.find(fmt::format("node 3: the parent {} has no such node", inc->m.parent)) != std::string::npos);
  }
  RequireClean(Check(repo));
}

TEST_CASE("repo: check restores an increment and compares it with a synthetic full of its cut, not a full with itself",
          "[repo]") {
  TempDir t("repo-crosscheck");
  const std::string cluster = MakeCluster(t.str(), 61);
  const std::string repo = t.str() + "/repo";
  const auto consistent = ConsistentCuts(Cuts(cluster));
  REQUIRE(consistent.size() >= 2);
  auto full0 = Create(cluster, repo, true, "", consistent[0]);
  REQUIRE_OK(full0);
  auto inc = Create(cluster, repo, false, "", consistent[1], full0->m.name);
  REQUIRE_OK(inc);
  auto full1 = Create(cluster, repo, true, "", consistent[1]);
  REQUIRE_OK(full1);
  const RepoCheckReport rep = Check(repo, true);
  RequireClean(rep);
  std::vector<std::string> cross;
  for (const auto& it : rep.items) {
    if (it.name.rfind("fingerprints against ", 0) == 0) cross.push_back(it.group + ": " + it.name);
  }
  CHECK(cross == std::vector<std::string>{inc->m.name + ": fingerprints against " + full1->m.name});
}

TEST_CASE("repo: create failing at every I/O step leaves no artifact or a complete one", "[repo]") {
  TempDir t("repo-crash");
  const std::string cluster = MakeCluster(t.str(), 71);
  const std::string repo = t.str() + "/repo";
  auto info = walfmt::LoadClusterInfo(cluster);
  REQUIRE(info.ok());
  const auto consistent = ConsistentCuts(Cuts(cluster));
  REQUIRE(consistent.size() >= 2);
  struct Kind {
    const char* what;
    bool full;
    std::string from;
    std::optional<uint64_t> cut;
  };
  const std::vector<Kind> kinds = {{"runtime full", true, info->full_snapshots[0].name, std::nullopt},
                                   {"increment", false, "", consistent.back()},
                                   {"synthetic full", true, "", consistent[0]}};
  for (const auto& kind : kinds) {
    uint64_t n = 1;
    for (;; ++n) {
      INFO(kind.what << ", failing I/O step " << n);
      REQUIRE(n < 500);
      const size_t before = IsRepository(repo) ? ListRepository(repo)->artifacts.size() : 0;
      walfmt::SetFailAtStep(n);
      auto r = Create(cluster, repo, kind.full, kind.from, kind.cut);
      walfmt::SetFailAtStep(0);
      bool made = r.ok();
      if (IsRepository(repo)) {  // the marker is the first thing written: before it, nothing is a repository
        auto l = ListRepository(repo);
        REQUIRE(l.ok());
        for (const auto& a : l->artifacts) CHECK(a.status.ok());
        CHECK(l->leftovers.empty());
        // A fault after the rename (the directory's fsync) reports an error, but
        // the artifact in place is complete: check passes either way.
        made = l->artifacts.size() == before + 1;
        if (r.ok()) CHECK(made);
        CHECK(l->artifacts.size() <= before + 1);
        RequireClean(Check(repo));
      }
      if (made) break;
      CHECK(r.status().message().find("injected fault") != std::string::npos);
    }
    CHECK(n > 2);
  }
  RequireClean(Check(repo, true));
}

TEST_CASE("repo: expire keeps the newest fulls and every chain they start, the rest goes leaves first", "[repo]") {
  TempDir t("repo-expire");
  const std::string cluster = MakeCluster(t.str(), 81);
  const std::string repo = t.str() + "/repo";
  auto info = walfmt::LoadClusterInfo(cluster);
  REQUIRE(info.ok());
  const auto consistent = ConsistentCuts(Cuts(cluster));
  REQUIRE(consistent.size() >= 4);
  REQUIRE_OK(Create(cluster, repo, true, info->full_snapshots[0].name, std::nullopt));  // F1
  REQUIRE_OK(Create(cluster, repo, false, "", consistent[1]));                          // on F1
  auto f2 = Create(cluster, repo, true, "", consistent[2]);                             // F2
  REQUIRE_OK(f2);
  REQUIRE_OK(Create(cluster, repo, false, "", consistent[3]));  // on F2
  std::set<std::string> on_f2;                                  // every artifact whose chain starts at the kept full F2
  {
    auto before = ListRepository(repo);
    REQUIRE(before.ok());
    for (const auto& a : before->artifacts) {
      auto chain = ChainOf(*before, a.name);
      REQUIRE(chain.ok());
      if (chain->front()->name == f2->m.name) on_f2.insert(a.name);
    }
  }
  REQUIRE(on_f2 == std::set<std::string>{f2->m.name, fmt::format("i-cut-{}", consistent[3])});
  auto dry = Expire(repo, 1, true);
  REQUIRE(dry.ok());
  CHECK(dry->removed ==
        std::vector<std::string>{fmt::format("i-cut-{}", consistent[1]), "f-" + info->full_snapshots[0].name});
  // The increments built on the kept full are kept: the chain of an artifact
  // is decided by its first member (the full), not its last (itself).
  CHECK(std::set<std::string>(dry->kept.begin(), dry->kept.end()) == on_f2);
  CHECK(ListRepository(repo)->artifacts.size() == 4);
  auto r = Expire(repo, 1, false);
  REQUIRE(r.ok());
  auto l = ListRepository(repo);
  REQUIRE(l.ok());
  CHECK(l->artifacts.size() == 2);
  for (const auto& name : on_f2) CHECK(l->Find(name) != nullptr);
  CHECK(l->leftovers.empty());
  for (const auto& tgt : RestoreTargets(*l)) {
    RepoRestoreRequest rq;
    rq.repo = repo;
    rq.name = tgt.artifact;
    rq.out = t.str() + "/out-" + tgt.artifact;
    INFO(tgt.artifact);
    REQUIRE(RestoreFromRepository(rq).ok());
  }
  CHECK(RestoreTargets(*l).size() == 2);
  RequireClean(Check(repo, true));
  auto again = Expire(repo, 1, false);
  REQUIRE(again.ok());
  CHECK(again->removed.empty());
  // What a killed create or expire leaves is a note for check and list, and
  // expire removes it once its process is gone (pid 999999999 is never alive).
  fs::create_directories(repo + "/.i-cut-9.tmp-999999999-1/node-0/wal");
  WriteAll(repo + "/.i-cut-9.tmp-999999999-1/node-0/wal/0000000000000000.wal.zst", "partial");
  fs::create_directories(repo + fmt::format("/.i-cut-8.tmp-{}-1", ::getpid()));  // a live create: kept
  fs::create_directories(repo + "/.f-old.expire-999999999");
  auto rep = Check(repo);
  RequireClean(rep);
  CHECK(rep.notes.size() == 3);
  CHECK(ListRepository(repo)->leftovers.size() == 3);
  auto sweep = Expire(repo, 1, false);
  REQUIRE(sweep.ok());
  CHECK(sweep->leftovers_removed.size() == 2);
  CHECK(ListRepository(repo)->leftovers == std::vector<std::string>{fmt::format(".i-cut-8.tmp-{}-1", ::getpid())});
}

}  // namespace walcut::repo

namespace walcut::repo {

// Small segments: every increment's WAL starts after segment 0, and the cut
// analysis checks it against the parent's cut or full snapshot.
TEST_CASE("repo: increments of a WAL of many segments restore byte-identically through the chain", "[repo]") {
  TempDir t("repo-multiseg");
  const std::string cluster = MakeCluster(t.str(), 91, 8192);
  const std::string repo = t.str() + "/repo";
  auto info = walfmt::LoadClusterInfo(cluster);
  REQUIRE(info.ok());
  const auto consistent = ConsistentCuts(Cuts(cluster));
  REQUIRE(consistent.size() >= 3);
  REQUIRE_OK(Create(cluster, repo, true, info->full_snapshots[0].name, std::nullopt));
  auto i1 = Create(cluster, repo, false, "", consistent[consistent.size() - 2]);
  REQUIRE_OK(i1);
  CHECK(i1->m.nodes[0].first_segment > 0);
  auto i2 = Create(cluster, repo, false, "", consistent.back());
  REQUIRE_OK(i2);
  CHECK(i2->m.nodes[0].first_segment > 0);
  RequireClean(Check(repo, true));
  for (const auto* inc : {&i1.value(), &i2.value()}) {
    const uint64_t k = *inc->m.cut;
    const std::string live = t.str() + fmt::format("/live-{}", k);
    const std::string chained = t.str() + fmt::format("/chain-{}", k);
    LiveRestore(cluster, k, live);
    RepoRestoreRequest rq;
    rq.repo = repo;
    rq.name = inc->m.name;
    rq.out = chained;
    auto rr = RestoreFromRepository(rq);
    INFO(rr.status().message());
    REQUIRE(rr.ok());
    for (int i = 0; i < 3; ++i) {
      CHECK(ReadAll(fmt::format("{}/node-{}.snap", live, i)) == ReadAll(fmt::format("{}/node-{}.snap", chained, i)));
    }
  }
}

}  // namespace walcut::repo

namespace walcut::repo {

// A synthetic full made from the cluster's WAL restores from the base
// `walcut restore` chooses: genesis alone cannot serve a WAL whose oldest
// segments the runtime's retention removed (this failed with "base genesis
// needs every node's WAL from 0/00000000").
TEST_CASE("repo: a synthetic full of a WAL pruned by retention restores from the full snapshot before the cut",
          "[repo]") {
  TempDir t("repo-pruned-synthetic");
  node::ClusterOptions o;
  o.dir = t.str() + "/c";
  o.seed = 23;
  o.nodes = 3;
  o.backups = 1;
  o.workload.workload = node::Workload::kBank;
  o.workload.accounts = 60;
  o.txs = 360;
  o.cuts = 8;
  o.cut_every = 30;
  o.segment_bytes = 4096;
  o.full_snapshot_at_tx = 80;
  o.wal_retention = node::WalRetention::kAfterSnapshot;
  auto run = node::RunCluster(o);
  REQUIRE(run.ok());
  REQUIRE(run->summary.segments_deleted > 0);
  const std::string cluster = o.dir;
  const auto cc = Cuts(cluster);
  REQUIRE(cc.pruned);
  auto layout = cut::FindClusterLayout(cluster);
  REQUIRE(layout.ok());
  std::optional<uint64_t> k;
  for (uint64_t c : ConsistentCuts(cc)) {
    if (recovery::ChooseBase(cc, *layout, c).ok()) {
      k = c;
      break;
    }
  }
  REQUIRE(k);
  const std::string repo = t.str() + "/repo";
  auto f = Create(cluster, repo, true, "", *k);
  REQUIRE_OK(f);
  CHECK(f->m.restore["base"]["kind"] == "full");
  CHECK(f->m.restore["base"]["name"] == run->snapshots.front().name);
  auto inc = Create(cluster, repo, false, "", std::nullopt, "", /*latest=*/true);
  REQUIRE_OK(inc);
  RequireClean(Check(repo, true));
  // Both restore like the pruned live WAL from the snapshot.
  for (const auto& [name, cut] : {std::pair{f->m.name, *k}, std::pair{inc->m.name, *inc->m.cut}}) {
    INFO(name);
    recovery::RestoreRequest rq;
    rq.cluster_dir = cluster;
    rq.cut = cut;
    rq.base = run->snapshots.front().name;
    rq.out = t.str() + "/live-" + name;
    auto live = recovery::Restore(cc, *layout, rq);
    INFO(live.status().message());
    REQUIRE(live.ok());
    REQUIRE(recovery::WriteRestore(*live, rq.out).ok());
    RepoRestoreRequest rr;
    rr.repo = repo;
    rr.name = name;
    rr.out = t.str() + "/chain-" + name;
    auto res = RestoreFromRepository(rr);
    INFO(res.status().message());
    REQUIRE(res.ok());
    for (int i = 0; i < 3; ++i) {
      CHECK(ReadAll(fmt::format("{}/node-{}.snap", rq.out, i)) == ReadAll(fmt::format("{}/node-{}.snap", rr.out, i)));
    }
  }
}

}  // namespace walcut::repo

namespace walcut::repo {
namespace {

// The documents of a repository as walcut wrote them before "schema" and hex
// cluster ids: cluster.json of format walcut-cluster 1 (decimal cluster_id).
nlohmann::json OldClusterJson(nlohmann::json c) {
  c.erase("schema");
  c["format"] = "walcut-cluster";
  c["format_version"] = 1;
  c["cluster_id"] = std::stoull(c["cluster_id"].get<std::string>(), nullptr, 16);
  return c;
}

// Rewrites artifact DIR's manifest.json (and its cluster.json) in the
// version 1 form, with a correct self-checksum.
void MakeArtifactVersion1(const std::string& dir) {
  nlohmann::json m = nlohmann::json::parse(ReadAll(dir + "/manifest.json"));
  REQUIRE(m["schema"] == kArtifactSchema);
  m["schema"] = kArtifactSchemaV1;
  m["cluster_id"] = std::stoull(m["cluster_id"].get<std::string>(), nullptr, 16);
  if (m.contains("restore")) {  // a synthetic full: the restore's manifest as walcut-restore 1
    for (nlohmann::json* r : {&m, &m["restore"]}) {
      (*r)["format"] = "walcut-restore";
      (*r)["version"] = 1;
      if (r != &m) r->erase("schema");
      if (r->contains("cluster")) (*r)["cluster"] = OldClusterJson((*r)["cluster"]);
    }
  }
  const std::string cj = OldClusterJson(nlohmann::json::parse(ReadAll(dir + "/cluster.json"))).dump(2) + "\n";
  WriteAll(dir + "/cluster.json", cj);
  for (auto& f : m["files"]) {
    if (f["path"] == "cluster.json") {
      f["bytes"] = cj.size();
      f["xxh3_128"] = Xxh3Hex(cj);
    }
  }
  const std::string zeros(32, '0');
  m[kManifestChecksumKey] = zeros;
  std::string text = m.dump(2) + "\n";
  const std::string key = fmt::format("\n  \"{}\": \"", kManifestChecksumKey);
  const size_t at = text.find(key + zeros);
  REQUIRE(at != std::string::npos);
  text.replace(at + key.size(), zeros.size(), Xxh3Hex(text));
  WriteAll(dir + "/manifest.json", text);
  REQUIRE(DecodeManifest(text, dir).ok());
}

}  // namespace

TEST_CASE(
    "repo: a repository written by older walcut (format/version, decimal cluster_id) lists, checks, restores "
    "and grows",
    "[repo]") {
  TempDir t("repo-v1");
  const std::string cluster = MakeCluster(t.str(), 21);
  const std::string repo = t.str() + "/repo";
  const auto consistent = ConsistentCuts(Cuts(cluster));
  INFO("seed 21");
  REQUIRE(consistent.size() >= 3);
  const uint64_t k1 = consistent[0], k2 = consistent[1], k3 = consistent.back();
  auto full = Create(cluster, repo, true, "", k1);
  REQUIRE_OK(full);
  auto inc = Create(cluster, repo, false, "", k2);
  REQUIRE_OK(inc);
  const uint64_t cluster_id = inc->m.cluster_id;
  WriteAll(repo + "/" + kMarkerFile,
           R"({"format": "walcut-repository", "version": 1, "artifact_schema": "walcut.artifact/1"})"
           "\n");
  MakeArtifactVersion1(repo + "/" + full->m.name);
  MakeArtifactVersion1(repo + "/" + inc->m.name);

  auto l = ListRepository(repo);
  REQUIRE_OK(l);
  REQUIRE(l->artifacts.size() == 2);
  for (const auto& a : l->artifacts) {
    INFO(a.name << ": " << a.status.message());
    CHECK(a.status.ok());
    CHECK(a.m.cluster_id == cluster_id);
  }
  RequireClean(Check(repo, true));
  // The synthetic full still serves as a restored base.
  CHECK(recovery::RestoredBaseCut(repo + "/" + full->m.name) == std::optional<uint64_t>(k1));
  const std::string live = t.str() + "/live", chained = t.str() + "/chained";
  LiveRestore(cluster, k2, live);
  RepoRestoreRequest rq;
  rq.repo = repo;
  rq.cut = k2;
  rq.out = chained;
  REQUIRE_OK(RestoreFromRepository(rq));
  for (int i = 0; i < 3; ++i) {
    CHECK(ReadAll(fmt::format("{}/node-{}.snap", live, i)) == ReadAll(fmt::format("{}/node-{}.snap", chained, i)));
  }
  // A new artifact (version 2) joins the old chain.
  auto next = Create(cluster, repo, false, "", k3);
  REQUIRE_OK(next);
  CHECK(next->m.parent == inc->m.name);
  CHECK(nlohmann::json::parse(ReadAll(repo + "/" + next->m.name + "/manifest.json"))["cluster_id"] ==
        fmt::format("{:016x}", cluster_id));
  RequireClean(Check(repo, true));
  // A marker of a later version is refused, not misread.
  WriteAll(repo + "/" + kMarkerFile, R"({"schema": "walcut.repository/3"})"
                                     "\n");
  CHECK(InitRepository(repo).code() == walfmt::ErrorCode::kInvalidArgument);
}

}  // namespace walcut::repo
