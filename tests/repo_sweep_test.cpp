// The repository against the live WAL and the simulator's oracle, over many
// seeds (issue 14, item 4). Shapes as the restore sweep (3 or 5 nodes, 0-2
// backups, bank / cycle / mixed, random crashes on some seeds), with full
// snapshots taken by the runtime (one, or periodic ones) and, on some seeds,
// WAL retention: the runtime itself removes the segments before each
// snapshot, so the live WAL no longer starts at genesis. Per seed:
// - a repository: a full artifact of the runtime's first usable full
//   snapshot, or (other seeds, and when there is none) a synthetic full of an
//   early consistent cut; then an increment for later consistent cuts (all of
//   them, or with some skipped so that an increment spans several cuts), and
//   on some seeds a synthetic full rolled up from the chain in the middle,
//   with the chain continuing on top of it;
// - for every artifact of a cut K: the restore through its chain equals,
//   byte for byte, the restore of K from the live WAL (from genesis, or from
//   the base ChooseBase picks when the WAL was pruned), whose states equal
//   the oracle's (the committed transactions with marker < K), crashes
//   included; a pruned live
//   restore also equals the restore from genesis of the complete WAL of a
//   twin run without retention;
// - a runtime full restores to the cluster's snapshot files;
// - a synthetic full rolled up from the chain at the last cut (without the
//   cluster) holds and restores the same bytes;
// - `snapshot check` passes, with the trial restore on some seeds.
// WALCUT_REPO_SEEDS=N runs N seeds (default 200); WALCUT_REPO_SEED=N reruns one.
// The same sweep runs against an S3 server (--repo s3://, issue 30): moto_server
// when installed, else tests/s3_server.py; 12 seeds in the test command
// (WALCUT_REPO_S3_SEEDS=N), all 200 with the hidden tag [.s3sweep].
// The scratch directories go to /dev/shm when it is writable (see SweepDir).
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "cut/cuts.h"
#include "cut/load.h"
#include "cut_support.h"
#include "node/cluster.h"
#include "node/workload.h"
#include "recovery/restore.h"
#include "recovery_support.h"
#include "repo/remote.h"
#include "repo/repository.h"
#include "repo/s3_client.h"
#include "repo/s3_config.h"
#include "s3_moto_server.h"
#include "s3_test_server.h"
#include "sweep_support.h"
#include "walfmt/topology.h"

namespace fs = std::filesystem;
using walcut::cut::ClusterCuts;
using walcut::cut::CutStatus;
using walcut::node::ClusterOptions;
using walcut::node::RunResult;
using walcut::node::WalRetention;
using walcut::node::Workload;
using walcut::recovery::testing::ReadAll;
using walcut::test::LoadCuts;
using walcut::test::OracleState;
using walcut::test::State;

namespace {

// The seed's other choices, independent of the bits Shape's seed arithmetic uses.
uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

struct SweepShape {
  ClusterOptions opt;
  bool synthetic_full = false;  // the chain starts at a synthetic full of an early cut
  bool skip_some = false;       // some consistent cuts get no increment: increments span several cuts
  bool roll_mid = false;        // a synthetic full rolled up in the middle, the chain continuing on top
  bool check_restore = false;   // CheckRepository with its trial restore
};

SweepShape Shape(const std::string& dir, uint64_t seed) {
  SweepShape s;
  s.opt = walcut::test::SweepShape(dir, seed);
  ClusterOptions& o = s.opt;
  o.txs = 360;
  o.cuts = 12;
  o.cut_every = 25;
  const uint64_t h = Mix(seed);
  o.full_snapshot_at_tx = 20 + (h % 5) * 15;  // 20 .. 80
  if ((h >> 12) % 5 < 2) o.wal_retention = WalRetention::kAfterSnapshot;
  // Small segments (so that retention has whole segments to remove) on most
  // retention seeds and half the others.
  const bool small = (h >> 8) % 4 < (o.wal_retention == WalRetention::kAfterSnapshot ? 3u : 2u);
  o.segment_bytes = small ? 4 * 1024 : 16 * 1024;
  // Periodic snapshots (every 90 transactions on top): with retention each
  // one removes the evidence of the cuts before it, so only on a quarter of
  // those seeds.
  if ((h >> 4) % (o.wal_retention == WalRetention::kAfterSnapshot ? 4 : 2) == 1) o.full_snapshot_every_tx = 90;
  s.synthetic_full = (h >> 16) % 3 == 0;
  s.skip_some = (h >> 20) % 3 == 0;
  s.roll_mid = (h >> 24) % 4 == 0;
  s.check_restore = (h >> 28) % 5 == 0;
  return s;
}

// "" when the states are equal, else how many keys differ and the first one.
std::string StateDiff(const State& got, const State& want) {
  size_t differ = 0;
  std::string first;
  auto note = [&](const std::string& key, const std::string* g, const std::string* w) {
    if (differ++ == 0) first = fmt::format("{}: restored {}, oracle {}", key, g ? *g : "-", w ? *w : "-");
  };
  for (const auto& [key, v] : got) {
    auto it = want.find(key);
    if (it == want.end() || it->second != v) note(key, &v, it == want.end() ? nullptr : &it->second);
  }
  for (const auto& [key, v] : want) {
    if (!got.count(key)) note(key, nullptr, &v);
  }
  return differ == 0 ? "" : fmt::format("{} keys differ, first {}", differ, first);
}

struct Counts {
  uint64_t runs = 0;
  uint64_t no_full = 0;      // no consistent cut and no usable snapshot: nothing to build a repository on
  uint64_t pruned_runs = 0;  // the live WAL pruned by the runtime's retention
  uint64_t crash_runs = 0;
  uint64_t snapshot_recoveries = 0;  // restarts from a snapshot file plus the WAL after it (retention)
  uint64_t artifacts = 0;
  uint64_t runtime_fulls = 0;
  uint64_t synthetic_fulls = 0;         // from the live WAL
  uint64_t pruned_synthetic_fulls = 0;  // ... of a WAL pruned by retention
  uint64_t rolled_fulls = 0;            // served by the repository (mid-chain and at the last cut)
  uint64_t increments = 0;
  uint64_t spanning_increments = 0;  // increments over at least one skipped consistent cut
  uint64_t chain_restores = 0;
  uint64_t longest_chain = 0;
  uint64_t pruned_chain_restores = 0;
  uint64_t twin_restores = 0;   // pruned live restores compared with the complete WAL of an unpruned twin
  uint64_t oracle_checked = 0;  // cut restores compared with the oracle
  uint64_t checks = 0, check_restores = 0;
};

// "" when DIR_A/node-<n>.snap and DIR_B/node-<n>.snap hold the same bytes (and
// are not empty), else what differs (not the bytes: they are binary).
std::string SnapDiff(const std::string& a, const std::string& b, uint32_t n) {
  const std::string pa = fmt::format("{}/node-{}.snap", a, n), pb = fmt::format("{}/node-{}.snap", b, n);
  const std::string x = ReadAll(pa), y = ReadAll(pb);
  if (x.empty() || y.empty()) return fmt::format("{} has {} bytes, {} has {}", pa, x.size(), pb, y.size());
  if (x == y) return "";
  size_t at = 0;
  while (at < x.size() && at < y.size() && x[at] == y[at]) ++at;
  return fmt::format("{} ({} bytes) and {} ({} bytes) differ from offset {}", pa, x.size(), pb, y.size(), at);
}

void RequireCreated(const walfmt::Result<walcut::repo::CreateResult>& r, const std::string& what) {
  INFO(what << ": " << r.status().message());
  REQUIRE(r.ok());
}

// A scratch directory on tmpfs when there is one: the repository and the
// restores sync every file and directory they write, about two hundred fsyncs
// a seed, which on a busy disk cost more than the rest of the seed (on the
// shared build machine: 1 s a seed on disk, 0.15 s on tmpfs). A seed's
// directory stays under 1 MB.
struct SweepDir {
  fs::path path;
  SweepDir() {
    static int counter = 0;
    fs::path root = fs::temp_directory_path();
    if (::access("/dev/shm", W_OK | X_OK) == 0 && fs::is_directory("/dev/shm")) root = "/dev/shm";
    path = root / fmt::format("walcut-repo-sweep-{}-{}", ::getpid(), counter++);
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~SweepDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  SweepDir(const SweepDir&) = delete;
  SweepDir& operator=(const SweepDir&) = delete;
};

// Where the sweep keeps its repositories: a directory per seed, or (with
// `url` set) the prefix s3://BUCKET/seed-<N> of an S3 server, through the
// same library calls the CLI makes for --repo s3://.
struct Backend {
  std::string url;  // "s3://BUCKET" or "" for directories
  walcut::repo::RemoteOptions remote;

  bool s3() const { return !url.empty(); }
  std::string Repo(const fs::path& dir, uint64_t seed) const {
    return s3() ? fmt::format("{}/seed-{}", url, seed) : (dir / "repo").string();
  }
  walfmt::Result<walcut::repo::CreateResult> Create(const walcut::repo::CreateRequest& r) const {
    return s3() ? walcut::repo::CreateS3Artifact(r, remote) : walcut::repo::CreateArtifact(r);
  }
  walfmt::Result<walcut::repo::RepoListing> List(const std::string& repo) const {
    return s3() ? walcut::repo::ListS3Repository(repo, remote) : walcut::repo::ListRepository(repo);
  }
  walfmt::Result<walcut::repo::RepoRestoreResult> Restore(const walcut::repo::RepoRestoreRequest& r) const {
    return s3() ? walcut::repo::RestoreFromS3(r, remote) : walcut::repo::RestoreFromRepository(r);
  }
  walfmt::Result<walcut::repo::RepoCheckReport> Check(const walcut::repo::RepoCheckOptions& o) const {
    return s3() ? walcut::repo::CheckS3Repository(o, remote) : walcut::repo::CheckRepository(o);
  }
};

void CheckSeed(uint64_t seed, Counts& counts, const Backend& be) {
  INFO("seed " << seed << " (rerun: WALCUT_REPO_SEED=" << seed << ")");
  SweepDir d;
  const SweepShape shape = Shape((d.path / "c").string(), seed);
  const ClusterOptions& opt = shape.opt;
  auto run = walcut::node::RunCluster(opt);
  REQUIRE(run.ok());
  const RunResult& rr = *run;
  ++counts.runs;
  counts.crash_runs += rr.summary.crashes > 0;
  counts.snapshot_recoveries += rr.summary.snapshot_recoveries;
  const walfmt::Topology topo(rr.options.nodes, rr.options.backups, rr.options.partitions);
  auto layout = walcut::cut::FindClusterLayout(opt.dir);
  REQUIRE(layout.ok());
  const ClusterCuts cc = LoadCuts(opt.dir);
  if (opt.wal_retention == WalRetention::kAfterSnapshot && rr.summary.segments_deleted > 0) {
    CHECK(cc.pruned);
    ++counts.pruned_runs;
  }
  const std::string repo = be.Repo(d.path, seed);
  // A pruned cluster's twin: the same run without retention (the same WAL
  // bytes, node_retention_test checks it), whose complete WAL restores from
  // genesis.
  std::optional<ClusterOptions> twin;
  std::optional<ClusterCuts> twin_cc;
  std::optional<walcut::cut::ClusterLayout> twin_layout;
  if (cc.pruned) {
    twin = opt;
    twin->dir = (d.path / "twin").string();
    twin->wal_retention = WalRetention::kKeep;
    auto t = walcut::node::RunCluster(*twin);
    REQUIRE(t.ok());
    CHECK(t->summary.committed == rr.summary.committed);
    twin_cc = LoadCuts(twin->dir);
    CHECK_FALSE(twin_cc->pruned);
    auto tl = walcut::cut::FindClusterLayout(twin->dir);
    REQUIRE(tl.ok());
    twin_layout = std::move(tl.value());
  }

  // ---- the live restores, one per cut, with the oracle ----------------------
  std::map<uint64_t, std::string> live;  // cut -> restore output
  auto live_restore = [&](uint64_t k) -> const std::string& {
    auto it = live.find(k);
    if (it != live.end()) return it->second;
    INFO("live restore of cut " << k);
    walcut::recovery::RestoreRequest req;
    req.cluster_dir = opt.dir;
    req.cut = k;
    req.base = "genesis";
    if (cc.pruned) {
      auto choice = walcut::recovery::ChooseBase(cc, *layout, k);
      INFO(choice.status().message());
      REQUIRE(choice.ok());
      req.base = choice->base;
    }
    req.keep_states = true;
    req.out = (d.path / fmt::format("live-{}", k)).string();
    auto r = walcut::recovery::Restore(cc, *layout, req);
    INFO(r.status().message());
    REQUIRE(r.ok());
    for (uint32_t n = 0; n < opt.nodes; ++n) {
      INFO("node " << n);
      CHECK(StateDiff(r->nodes[n].state, OracleState(rr, topo, n, k)) == "");
    }
    ++counts.oracle_checked;
    REQUIRE(walcut::recovery::WriteRestore(*r, req.out).ok());
    if (twin) {  // the complete WAL of the twin, from genesis
      walcut::recovery::RestoreRequest whole;
      whole.cluster_dir = twin->dir;
      whole.cut = k;
      whole.base = "genesis";
      whole.out = (d.path / fmt::format("twin-{}", k)).string();
      auto w = walcut::recovery::Restore(*twin_cc, *twin_layout, whole);
      INFO("the twin's complete WAL: " << w.status().message());
      REQUIRE(w.ok());
      REQUIRE(walcut::recovery::WriteRestore(*w, whole.out).ok());
      for (uint32_t n = 0; n < opt.nodes; ++n) {
        INFO("cut " << k << " node " << n << ": pruned WAL (base " << req.base << ") against the complete WAL");
        CHECK(SnapDiff(req.out, whole.out, n) == "");
      }
      ++counts.twin_restores;
    }
    return live.emplace(k, req.out).first->second;
  };

  // ---- the repository ---------------------------------------------------------
  std::vector<uint64_t> consistent;
  for (const auto& g : cc.cuts) {
    if (g.status == CutStatus::kConsistent) consistent.push_back(g.cut_id);
  }
  const walcut::cut::SnapshotUse* snap = nullptr;
  for (const auto& u : cc.snapshots) {
    if (u.usable) {
      snap = &u;
      break;
    }
  }
  // A cut the live WAL can restore (a pruned WAL needs a snapshot before it).
  auto restorable = [&](uint64_t k) { return walcut::recovery::ChooseBase(cc, *layout, k).ok(); };
  std::optional<uint64_t> full_cut;  // the synthetic full's cut
  if (shape.synthetic_full || !snap) {
    for (uint64_t k : consistent) {
      if (restorable(k)) {
        full_cut = k;
        break;
      }
    }
  }
  walcut::repo::CreateRequest base_req;
  base_req.cluster_dir = opt.dir;
  base_req.repo = repo;
  base_req.full = true;
  base_req.jobs = 2;
  if (full_cut) {
    base_req.cut = *full_cut;
    RequireCreated(be.Create(base_req), fmt::format("synthetic full of cut {}", *full_cut));
    ++counts.synthetic_fulls;
    counts.pruned_synthetic_fulls += cc.pruned;
  } else if (snap) {
    base_req.from = snap->name;
    RequireCreated(be.Create(base_req), "runtime full " + snap->name);
    ++counts.runtime_fulls;
  } else {
    ++counts.no_full;  // a crash kept every snapshot and every cut from being usable
    return;
  }
  ++counts.artifacts;

  // Increments for the consistent cuts after the full.
  auto after_full = [&](uint64_t k) {
    if (full_cut) return k > *full_cut;
    const walcut::cut::GlobalCut* g = cc.Find(k);
    for (uint32_t i = 0; i < opt.nodes; ++i) {
      if (!g->nodes[i] || !g->nodes[i]->started || !(snap->at[i] < g->nodes[i]->start)) return false;
    }
    return true;
  };
  std::vector<uint64_t> later;
  for (uint64_t k : consistent) {
    if (after_full(k)) later.push_back(k);
  }
  const uint64_t h = Mix(seed ^ 0x5EED);
  bool skipped = false;
  for (size_t x = 0; x < later.size(); ++x) {
    const uint64_t k = later[x];
    if (shape.skip_some && x + 1 < later.size() && (h >> (2 * x)) % 3 == 0) {
      skipped = true;
      continue;
    }
    walcut::repo::CreateRequest inc;
    inc.cluster_dir = opt.dir;
    inc.repo = repo;
    inc.cut = k;
    inc.jobs = 2;
    auto r = be.Create(inc);
    RequireCreated(r, fmt::format("increment of cut {}", k));
    ++counts.artifacts;
    ++counts.increments;
    counts.spanning_increments += skipped;
    skipped = false;
    if (shape.roll_mid && x == later.size() / 2 && x + 1 < later.size()) {
      // Rolled up from the chain, without the cluster; the next increments build on it.
      walcut::repo::CreateRequest roll;
      roll.repo = repo;
      roll.full = true;
      roll.cut = k;
      roll.jobs = 2;
      auto f = be.Create(roll);
      RequireCreated(f, fmt::format("synthetic full rolled up at cut {}", k));
      CHECK(f->m.evidence.value("served_by", "") == r->m.name);
      ++counts.artifacts;
      ++counts.rolled_fulls;
    }
  }

  // ---- every artifact restores through its chain --------------------------
  auto listing = be.List(repo);
  REQUIRE(listing.ok());
  const auto targets = walcut::repo::RestoreTargets(*listing);
  CHECK(targets.size() == listing->artifacts.size());
  std::optional<uint64_t> last_cut;
  for (const auto& t : targets) {
    INFO("artifact " << t.artifact << " (chain of " << t.chain.size() << ")");
    walcut::repo::RepoRestoreRequest rq;
    rq.repo = repo;
    rq.name = t.artifact;
    rq.out = (d.path / ("r-" + t.artifact)).string();
    rq.jobs = 2;
    auto res = be.Restore(rq);
    INFO(res.status().message());
    REQUIRE(res.ok());
    CHECK(res->steps.size() == t.chain.size());
    REQUIRE(res->fingerprints.size() == opt.nodes);
    if (!t.cut) {  // the runtime full: the snapshot's files
      for (uint32_t n = 0; n < opt.nodes; ++n) {
        CHECK(SnapDiff(rq.out, (fs::path(opt.dir) / "snapshots" / t.snapshot).string(), n) == "");
      }
      continue;
    }
    const uint64_t k = *t.cut;
    if (!last_cut || k > *last_cut) last_cut = k;
    const std::string& l = live_restore(k);
    for (uint32_t n = 0; n < opt.nodes; ++n) {
      INFO("cut " << k << " node " << n);
      CHECK(SnapDiff(rq.out, l, n) == "");
    }
    ++counts.chain_restores;
    counts.pruned_chain_restores += cc.pruned;
    counts.longest_chain = std::max<uint64_t>(counts.longest_chain, t.chain.size());
  }

  // ---- a synthetic full rolled up at the last cut ---------------------------
  if (last_cut) {
    walcut::repo::RepoRestoreRequest q;
    q.cut = *last_cut;
    auto newest = walcut::repo::SelectTarget(*listing, q);
    REQUIRE(newest.ok());
    if (!(*newest)->m.full()) {
      walcut::repo::CreateRequest roll;
      roll.repo = repo;
      roll.full = true;
      roll.cut = *last_cut;
      roll.name = fmt::format("roll-{}", *last_cut);
      roll.jobs = 2;
      auto f = be.Create(roll);
      RequireCreated(f, fmt::format("synthetic full rolled up at the last cut {}", *last_cut));
      CHECK(f->m.evidence.value("served_by", "") == (*newest)->name);
      ++counts.artifacts;
      ++counts.rolled_fulls;
      walcut::repo::RepoRestoreRequest rq;
      rq.repo = repo;
      rq.name = roll.name;
      rq.out = (d.path / ("r-" + roll.name)).string();
      auto res = be.Restore(rq);
      INFO(res.status().message());
      REQUIRE(res.ok());
      CHECK(res->steps.size() == 1);
      const std::string& l = live_restore(*last_cut);
      for (uint32_t n = 0; n < opt.nodes; ++n) {
        INFO("rolled-up cut " << *last_cut << " node " << n);
        if (!be.s3()) CHECK(SnapDiff(f->dir, l, n) == "");  // on S3 f->dir is s3://...: its restore below
        CHECK(SnapDiff(rq.out, l, n) == "");
      }
    }
  }

  // ---- snapshot check --------------------------------------------------------
  walcut::repo::RepoCheckOptions co;
  co.repo = repo;
  co.restore = shape.check_restore;
  co.jobs = 2;
  auto report = be.Check(co);
  INFO(report.status().message());
  REQUIRE(report.ok());
  std::string findings;
  for (const auto& it : report->items) {
    for (const auto& f : it.findings)
      findings += fmt::format("[{} {}: {}] {}\n", it.level, it.group, it.name, f.message);
  }
  for (const auto& e : report->errors) findings += "ERROR " + e + "\n";
  INFO(findings);
  CHECK(walcut::repo::RepoCheckOutcome(*report) == walfmt::Outcome::kOk);
  ++counts.checks;
  counts.check_restores += report->restores;
}

// Runs seeds [first, first + count) (WALCUT_REPO_SEED=N: N alone) and checks
// that a long sweep covered every shape.
void Sweep(uint64_t count, const Backend& be) {
  uint64_t first = 1;
  if (const char* s = std::getenv("WALCUT_REPO_SEED")) {
    first = std::strtoull(s, nullptr, 10);
    count = 1;
  }
  Counts counts;
  for (uint64_t seed = first; seed < first + count; ++seed) CheckSeed(seed, counts, be);
  WARN(fmt::format(
      "{}{} runs ({} with crashes, {} pruned by retention, {} restarts from a snapshot, {} without a full): {} "
      "artifacts "
      "({} runtime fulls, {} synthetic fulls from "
      "the WAL ({} pruned), {} rolled up from a chain, {} increments, {} spanning skipped cuts); {} chain restores ({} "
      "on pruned "
      "clusters, longest chain {}), {} cut restores checked against the oracle, {} pruned ones against the complete "
      "WAL of a twin; {} checks ({} trial restores)",
      be.s3() ? "S3 (" + be.url + "): " : "", counts.runs, counts.crash_runs, counts.pruned_runs,
      counts.snapshot_recoveries, counts.no_full, counts.artifacts, counts.runtime_fulls, counts.synthetic_fulls,
      counts.pruned_synthetic_fulls, counts.rolled_fulls, counts.increments, counts.spanning_increments,
      counts.chain_restores, counts.pruned_chain_restores, counts.longest_chain, counts.oracle_checked,
      counts.twin_restores, counts.checks, counts.check_restores));
  if (count >= 100) {
    CHECK(counts.chain_restores > 0);
    CHECK(counts.pruned_runs > 0);
    CHECK(counts.runtime_fulls > 0);
    CHECK(counts.synthetic_fulls > 0);
    CHECK(counts.pruned_synthetic_fulls > 0);
    CHECK(counts.rolled_fulls > 0);
    CHECK(counts.increments > 0);
    CHECK(counts.spanning_increments > 0);
    CHECK(counts.pruned_chain_restores > 0);
    CHECK(counts.twin_restores > 0);
    CHECK(counts.longest_chain >= 4);
    CHECK(counts.oracle_checked > 0);
    CHECK(counts.check_restores > 0);
  }
}

uint64_t SeedsFromEnv(const char* name, uint64_t otherwise) {
  const char* c = std::getenv(name);
  return c ? std::strtoull(c, nullptr, 10) : otherwise;
}

// The sweep against an S3 server: moto_server when installed, else
// tests/s3_server.py (both on the loopback, stopped by PID when done).
void SweepS3(uint64_t count) {
  if (!walcut::test::HavePython3()) FAIL("the S3 sweep needs python3 (tests/s3_server.py) or moto_server");
  const std::string moto = walcut::test::FindMotoServer();
  std::unique_ptr<walcut::test::MotoServer> m;
  std::unique_ptr<walcut::test::S3TestServer> py;
  Backend be;
  be.url = "s3://walcut-sweep";
  be.remote.jobs = 2;
  if (!moto.empty()) {
    m = std::make_unique<walcut::test::MotoServer>(moto, 3600);
    if (!m->error.empty()) FAIL(m->error);
    be.remote.s3_endpoint = m->endpoint();
  } else {
    py = std::make_unique<walcut::test::S3TestServer>(
        std::vector<std::string>{"--bucket", "walcut-sweep", "--max-seconds", "3600"});
    if (!py->error.empty()) FAIL(py->error);
    be.remote.s3_endpoint = py->endpoint();
  }
  WARN("S3 server: " << (m ? "moto_server (" + moto + ")" : "tests/s3_server.py (moto_server is not installed)")
                     << " at " << be.remote.s3_endpoint);
  // The credentials come from the environment, as for the CLI (moto takes any).
  ::setenv("AWS_ACCESS_KEY_ID", "AKIDWALCUTTEST", 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", "walcut-test-secret", 1);
  ::unsetenv("AWS_SESSION_TOKEN");
  if (m) {
    walcut::repo::S3Options so;
    so.endpoint = be.remote.s3_endpoint;
    auto config = walcut::repo::ResolveS3Config(so, walcut::repo::ProcessEnvironment());
    REQUIRE(config.ok());
    auto client = walcut::repo::S3Client::Create(std::move(config.value()));
    REQUIRE(client.ok());
    REQUIRE((*client)->CreateBucket("walcut-sweep").ok());
  }
  Sweep(count, be);
}

}  // namespace

TEST_CASE(
    "repository chains restore like the live WAL and the oracle, over 200 seeds of shapes, crashes and "
    "retention",
    "[sweep]") {
  Sweep(SeedsFromEnv("WALCUT_REPO_SEEDS", 200), Backend{});
}

// The same seeds on S3: 12 by default (the test command's budget; each seed
// costs about 10 s against moto_server on the shared 2-core machine: 12 seeds
// took 120 s), all 200 (about 35 min) behind the hidden tag below.
// WALCUT_REPO_S3_SEEDS=N runs N; WALCUT_REPO_SEED=N reruns one.
TEST_CASE("repository chains on S3 (--repo s3://) restore like the live WAL and the oracle, a few seeds",
          "[sweep][s3]") {
  SweepS3(SeedsFromEnv("WALCUT_REPO_S3_SEEDS", 12));
}

TEST_CASE("repository chains on S3 restore like the live WAL and the oracle, over 200 seeds", "[.s3sweep]") {
  SweepS3(SeedsFromEnv("WALCUT_REPO_S3_SEEDS", 200));
}
