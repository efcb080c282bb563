// Restore against the simulator's oracle: for many seeds and cluster shapes,
// every consistent cut found in the WAL restores to exactly the state the
// in-memory history gives (the writes of the committed transactions with
// marker < K, in commit order), and the cut summaries agree with it.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <set>
#include <string>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "cut/cuts.h"
#include "cut/load.h"
#include "cut_support.h"
#include "node/cluster.h"
#include "node/workload.h"
#include "recovery/restore.h"
#include "sweep_support.h"
#include "walfmt/topology.h"
#include "walfmt/writer.h"

namespace fs = std::filesystem;
using walcut::cut::ClusterCuts;
using walcut::cut::CutStatus;
using walcut::node::ClusterOptions;
using walcut::node::RunResult;
using walcut::node::Workload;
using walcut::test::OracleState;
using walcut::test::State;

using TempDir = walcut::test::ScratchDir;
using walcut::test::LoadCuts;

namespace {

ClusterOptions Shape(const std::string& dir, uint64_t seed) { return walcut::test::SweepShape(dir, seed); }

// The cluster of Shape(dir, 7) (3 nodes), run, with its cuts and the ids of
// its consistent ones in order.
struct Seven {
  ClusterOptions opt;
  walcut::cut::ClusterLayout layout;
  ClusterCuts cc;
  std::vector<uint64_t> consistent;
};
Seven RunSeven(const std::string& dir) {
  Seven c;
  c.opt = Shape(dir, 7);
  REQUIRE(walcut::node::RunCluster(c.opt).ok());
  auto layout = walcut::cut::FindClusterLayout(c.opt.dir);
  REQUIRE(layout.ok());
  c.layout = std::move(layout.value());
  c.cc = LoadCuts(c.opt.dir);
  for (const auto& g : c.cc.cuts) {
    if (g.status == CutStatus::kConsistent) c.consistent.push_back(g.cut_id);
  }
  return c;
}

// The primaries' copies: the cluster's logical state.
State Global(const std::vector<State>& nodes, const walfmt::Topology& topo) {
  State g;
  for (uint32_t n = 0; n < nodes.size(); ++n) {
    for (const auto& [k, v] : nodes[n]) {
      if (topo.PrimaryOf(k) == n) g[k] = v;
    }
  }
  return g;
}

struct SweepCounts {
  uint64_t runs = 0;
  uint64_t consistent = 0;
  uint64_t inconsistent = 0;
  uint64_t restores = 0;
  uint64_t incremental = 0;
  uint64_t naive_breaks = 0;
  uint64_t naive_checked = 0;
  uint64_t widest = 0;              // most participants of a committed transaction
  uint64_t wide_tracked = 0;        // tracked transactions with more than 6 participants
  uint64_t after_before_start = 0;  // after(k) transactions committed before CUT_START(k)
};

// `adjust` changes the seed's shape (the sweep uses Shape as it is).
void CheckOneSeed(uint64_t seed, SweepCounts& counts, const std::function<void(ClusterOptions&)>& adjust = nullptr) {
  INFO("seed " << seed << " (rerun: WALCUT_RESTORE_SEED=" << seed << ")");
  TempDir d("sweep");
  ClusterOptions opt = Shape(d.path.string(), seed);
  if (adjust) adjust(opt);
  auto run = walcut::node::RunCluster(opt);
  REQUIRE(run.ok());
  const RunResult& rr = *run;
  const walfmt::Topology topo(rr.options.nodes, rr.options.backups, rr.options.partitions);
  const bool faults = opt.random_crashes > 0;
  auto layout = walcut::cut::FindClusterLayout(opt.dir);
  REQUIRE(layout.ok());
  auto sums = walcut::cut::ScanCluster(*layout, {});
  REQUIRE(sums.ok());
  auto rec = walcut::cut::Reconstruct(std::move(sums.value()));
  REQUIRE(rec.ok());
  ClusterCuts& cc = *rec;
  ++counts.runs;

  uint64_t consistent = 0;
  for (const auto& g : cc.cuts) consistent += g.status == CutStatus::kConsistent;
  CHECK(consistent == rr.summary.cuts_consistent);
  if (!faults) {
    // A fault-free run: every cut consistent, nothing found.
    for (const auto& g : cc.cuts) {
      INFO("cut " << g.cut_id << ": " << g.reason);
      CHECK(g.status == CutStatus::kConsistent);
      CHECK(g.findings.empty());
    }
    CHECK(cc.findings.empty());
  }
  uint64_t before_after_start = 0, after_before_start = 0;
  for (const auto& g : cc.cuts) {
    before_after_start += g.before_after_start;
    after_before_start += g.after_before_start;
  }
  CHECK(before_after_start == rr.summary.before_commit_after_start);
  CHECK(after_before_start == rr.summary.after_commit_before_start);
  counts.after_before_start += after_before_start;
  std::map<walfmt::TxId, size_t> width;
  for (const auto& c : rr.history.committed) {
    counts.widest = std::max<uint64_t>(counts.widest, c.participants.size());
    width[c.id] = c.participants.size();
  }
  for (const auto& s : cc.nodes) {
    for (const auto& c : s.cuts) {
      for (const auto* set : {&c.before, &c.after}) {
        for (const auto& t : *set) counts.wide_tracked += width.count(t.tx) && width[t.tx] > 6;
      }
    }
  }

  std::optional<uint64_t> prev_consistent;
  for (const auto& g : cc.cuts) {
    const uint64_t k = g.cut_id;
    walcut::recovery::RestoreRequest req;
    req.cluster_dir = opt.dir;
    req.cut = k;
    req.dry_run = true;
    if (g.status != CutStatus::kConsistent) {
      ++counts.inconsistent;
      auto refused = walcut::recovery::Restore(cc, *layout, req);
      CHECK_FALSE(refused.ok());
      continue;
    }
    ++counts.consistent;
    INFO("cut " << k);
    // Membership counts from the summaries against the markers.
    uint64_t total = 0;
    for (const auto& c : rr.history.committed) total += c.marker < k;
    CHECK(g.transactions == total);
    for (uint32_t n = 0; n < opt.nodes; ++n) {
      uint64_t here = 0;
      for (const auto& c : rr.history.committed) {
        here += c.marker < k && std::binary_search(c.participants.begin(), c.participants.end(), n);
      }
      CHECK(g.node_transactions[n] == here);
    }
    // The restore itself.
    auto plan = walcut::recovery::Restore(cc, *layout, req);
    REQUIRE(plan.ok());
    req.dry_run = false;
    req.keep_states = true;
    req.out = (d.path / fmt::format("restore-{}", k)).string();
    auto r = walcut::recovery::Restore(cc, *layout, req);
    REQUIRE(r.ok());
    ++counts.restores;
    std::vector<State> states;
    for (uint32_t n = 0; n < opt.nodes; ++n) {
      const auto& nr = r->nodes[n];
      CHECK(nr.state == OracleState(rr, topo, n, k));
      // The dry run counted what the restore applied.
      CHECK(plan->nodes[n].txs_applied == nr.txs_applied);
      CHECK(plan->nodes[n].txs_skipped == nr.txs_skipped);
      CHECK(plan->nodes[n].writes_applied == nr.writes_applied);
      CHECK(nr.txs_applied == g.node_transactions[n]);
      states.push_back(nr.state);
    }
    const State global = Global(states, topo);
    CHECK(walcut::node::CheckBank(global, rr.options.workload).empty());
    CHECK(walcut::node::CheckRing(global, rr.options.workload).empty());
    // Incremental: cut k from a restore of the previous consistent cut.
    if (prev_consistent && seed % 3 == 0) {
      const std::string base = (d.path / fmt::format("restore-{}", *prev_consistent)).string();
      auto inc_req = req;
      inc_req.base = base;
      inc_req.out = (d.path / fmt::format("inc-{}", k)).string();
      auto inc = walcut::recovery::Restore(cc, *layout, inc_req);
      REQUIRE(inc.ok());
      for (uint32_t n = 0; n < opt.nodes; ++n) CHECK(inc->nodes[n].state == r->nodes[n].state);
      ++counts.incremental;
    }
    REQUIRE(walcut::recovery::WriteRestore(*r, req.out).ok());
    prev_consistent = k;
  }

  // The naive rule (WAL prefix up to CUT_START, sets ignored) must be caught
  // by the invariants on some seeds, or the oracle could not fail.
  if (rr.options.workload.workload == walfmt::Workload::kBank && !faults) {
    for (auto& s : cc.nodes) {
      for (auto& c : s.cuts) {
        c.before.clear();
        c.after.clear();
      }
    }
    for (const auto& g : cc.cuts) {
      walcut::recovery::RestoreRequest req;
      req.cluster_dir = opt.dir;
      req.cut = g.cut_id;
      auto naive = walcut::recovery::Restore(cc, *layout, req);
      INFO(naive.status().message());
      REQUIRE(naive.ok());
      std::vector<State> states;
      for (auto& nr : naive->nodes) states.push_back(std::move(nr.state));
      ++counts.naive_checked;
      if (!walcut::node::CheckBank(Global(states, topo), rr.options.workload).empty()) {
        ++counts.naive_breaks;
        break;
      }
    }
  }
}

}  // namespace

TEST_CASE("every consistent cut restores to the oracle's state, over 500 seeds of shapes and crashes") {
  uint64_t first = 1, count = 500;
  if (const char* s = std::getenv("WALCUT_RESTORE_SEED")) {
    first = std::strtoull(s, nullptr, 10);
    count = 1;
  } else if (const char* c = std::getenv("WALCUT_RESTORE_SEEDS")) {
    count = std::strtoull(c, nullptr, 10);
  }
  SweepCounts counts;
  for (uint64_t seed = first; seed < first + count; ++seed) CheckOneSeed(seed, counts);
  WARN(
      fmt::format("{} runs: {} consistent cuts restored ({} incrementally), {} inconsistent refused; naive rule "
                  "broke the bank in {} of {} cut checks",
                  counts.runs, counts.restores, counts.incremental, counts.inconsistent, counts.naive_breaks,
                  counts.naive_checked));
  CHECK(counts.consistent > 0);
  if (count >= 100) {
    CHECK(counts.inconsistent > 0);  // crashes do make cuts inconsistent
    CHECK(counts.incremental > 0);
    CHECK(counts.naive_breaks > 0);  // the oracle can fail
  }
}

TEST_CASE("transactions wider than the scan's inline participant lists: 9 nodes, 2 backups, every cut restores") {
  // The scan keeps up to 6 participants of a commit inline and the rest on
  // the heap; every digest of a shared transaction needs all of them.
  SweepCounts counts;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    CheckOneSeed(seed, counts, [](ClusterOptions& o) {
      o.workload.workload = walfmt::Workload::kCycle;
      o.random_crashes = 0;
      o.nodes = 9;
      o.backups = 2;
      o.workload.ring = 1000;
      o.txs = 600;
      o.concurrency = 32;
      o.cut_every = 60;
    });
  }
  WARN(
      fmt::format("{} runs: {} consistent cuts restored; widest transaction {} participants, {} wide ones tracked, "
                  "{} after(k) committed before CUT_START(k)",
                  counts.runs, counts.restores, counts.widest, counts.wide_tracked, counts.after_before_start));
  CHECK(counts.restores > 0);
  CHECK(counts.widest > 6);
  CHECK(counts.wide_tracked > 0);
}

TEST_CASE("a damaged base snapshot is refused before anything is written, naming its file") {
  TempDir d("badbase");
  const Seven c = RunSeven(d.path.string());
  REQUIRE(c.consistent.size() >= 2);
  walcut::recovery::RestoreRequest req;
  req.cluster_dir = c.opt.dir;
  req.cut = c.consistent[0];
  req.out = (d.path / "base").string();
  auto base = walcut::recovery::Restore(c.cc, c.layout, req);
  REQUIRE(base.ok());
  REQUIRE(walcut::recovery::WriteRestore(*base, req.out).ok());
  // One byte of node 1's entries flipped.
  const fs::path snap = d.path / "base" / "node-1.snap";
  std::string bytes;
  {
    std::ifstream in(snap, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  REQUIRE(bytes.size() > 100);
  bytes[bytes.size() - 40] ^= 0x20;
  {
    std::ofstream out(snap, std::ios::binary | std::ios::trunc);
    out << bytes;
  }
  req.cut = c.consistent[1];
  req.base = (d.path / "base").string();
  req.out = (d.path / "next").string();
  auto r = walcut::recovery::Restore(c.cc, c.layout, req);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == walfmt::ErrorCode::kCorruption);
  CHECK_THAT(r.status().message(), Catch::StartsWith(snap.string() + ": snapshot: "));
  CHECK_THAT(r.status().message(), Catch::Contains(" at offset "));
  CHECK_FALSE(fs::exists(req.out));
}

TEST_CASE("WAL appended after CUT_FINISH(K) changes nothing in the restore of K") {
  TempDir d("extra");
  ClusterOptions opt = Shape(d.path.string(), 7);
  auto run = walcut::node::RunCluster(opt);
  REQUIRE(run.ok());
  uint64_t k = 0;
  auto restore = [&](const std::string& out) {
    auto layout = walcut::cut::FindClusterLayout(opt.dir);
    REQUIRE(layout.ok());
    auto sums = walcut::cut::ScanCluster(*layout, {});
    REQUIRE(sums.ok());
    auto cc = walcut::cut::Reconstruct(std::move(sums.value()));
    REQUIRE(cc.ok());
    REQUIRE(cc->window.any);
    walcut::recovery::RestoreRequest req;
    req.cluster_dir = opt.dir;
    req.cut = cc->window.latest;
    if (k == 0) k = req.cut;
    CHECK(req.cut == k);  // the appended records add no cut
    req.cut = k;
    req.out = out;
    auto r = walcut::recovery::Restore(*cc, *layout, req);
    INFO((r.ok() ? "" : r.status().message()));
    REQUIRE(r.ok());
    REQUIRE(walcut::recovery::WriteRestore(*r, out).ok());
  };
  restore((d.path / "a").string());
  // More records on every node: a transaction that commits, and one more cut.
  for (uint32_t n = 0; n < opt.nodes; ++n) {
    walfmt::WriterOptions wo;
    wo.wal_dir = (d.path / fmt::format("node-{}", n) / "wal").string();
    wo.node_id = n;
    auto layout = walcut::cut::FindClusterLayout(opt.dir);
    REQUIRE(layout.ok());
    wo.cluster_id = layout->cluster_id;
    wo.segment_bytes = opt.segment_bytes;
    auto w = walfmt::WalWriter::Open(wo, 1);
    REQUIRE(w.ok());
    const walfmt::TxId t{n, 999999};
    REQUIRE((*w)->Append(walfmt::TxData{t, {walfmt::Write{walfmt::WriteOp::kPut, "acct/000001", "12345"}}}).ok());
    REQUIRE((*w)->Append(walfmt::TxCommit{t, 99, 1, walfmt::kTxFlagOnePhase, {n}}).ok());
    REQUIRE((*w)->Close().ok());
  }
  restore((d.path / "b").string());
  for (uint32_t n = 0; n < opt.nodes; ++n) {
    std::ifstream a(d.path / "a" / fmt::format("node-{}.snap", n), std::ios::binary);
    std::ifstream b(d.path / "b" / fmt::format("node-{}.snap", n), std::ios::binary);
    const std::string sa((std::istreambuf_iterator<char>(a)), {});
    const std::string sb((std::istreambuf_iterator<char>(b)), {});
    CHECK(!sa.empty());
    CHECK(sa == sb);
  }
}

TEST_CASE("restore progress adds up to the bytes read, a base that changes while the restore runs is refused") {
  TempDir d("changing");
  const Seven c = RunSeven(d.path.string());
  REQUIRE(c.consistent.size() >= 2);
  REQUIRE(c.opt.nodes >= 2);
  walcut::recovery::RestoreRequest req;
  req.cluster_dir = c.opt.dir;
  req.jobs = 1;  // nodes one after another, in order
  std::vector<uint64_t> seen;
  req.progress = [&](uint64_t b) { seen.push_back(b); };
  // Two restores with different states for node 1: cuts J and K > J.
  req.cut = c.consistent[0];
  req.out = (d.path / "base").string();
  auto base = walcut::recovery::Restore(c.cc, c.layout, req);
  REQUIRE(base.ok());
  // One call at least per node (each node's WAL is under 1 MiB here), never
  // going back, ending at the bytes the restore read.
  REQUIRE(seen.size() >= c.opt.nodes);
  CHECK(std::is_sorted(seen.begin(), seen.end()));
  CHECK(seen.back() == base->bytes_read);
  CHECK(base->bytes_read > 0);
  REQUIRE(walcut::recovery::WriteRestore(*base, req.out).ok());
  req.progress = nullptr;
  req.cut = c.consistent[1];
  req.out = (d.path / "later").string();
  auto later = walcut::recovery::Restore(c.cc, c.layout, req);
  REQUIRE(later.ok());
  REQUIRE(walcut::recovery::WriteRestore(*later, req.out).ok());
  const fs::path snap = d.path / "base" / "node-1.snap";
  const fs::path other = d.path / "later" / "node-1.snap";
  REQUIRE(later->nodes[1].fingerprint != base->nodes[1].fingerprint);
  std::string original;
  {
    std::ifstream in(snap, std::ios::binary);
    original.assign(std::istreambuf_iterator<char>(in), {});
  }

  // Restoring K again, now from base J; when node 0 is done (its progress
  // call), node 1's base file is replaced by a valid snapshot of another state.
  req.cut = c.consistent[1];
  req.base = (d.path / "base").string();
  req.out = (d.path / "next").string();
  bool swapped = false;
  req.progress = [&](uint64_t) {
    if (swapped) return;
    fs::copy_file(other, snap, fs::copy_options::overwrite_existing);
    swapped = true;
  };
  auto r = walcut::recovery::Restore(c.cc, c.layout, req);
  REQUIRE(swapped);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == walfmt::ErrorCode::kCorruption);
  CHECK_THAT(r.status().message(), Catch::StartsWith(snap.string() + ": changed while the restore ran (fingerprint "));
  CHECK_FALSE(fs::exists(req.out));
  // Nothing staged is left next to OUT.
  for (const auto& e : fs::directory_iterator(d.path)) {
    INFO(e.path().string());
    CHECK(e.path().filename().string().rfind(".next.tmp-", 0) == std::string::npos);
  }

  // The same with node 1's base file damaged instead: it no longer reads.
  std::ofstream(snap, std::ios::binary | std::ios::trunc) << original;
  swapped = false;
  req.progress = [&](uint64_t) {
    if (swapped) return;
    std::string bytes = original;
    bytes[bytes.size() - 40] ^= 0x20;
    std::ofstream(snap, std::ios::binary | std::ios::trunc) << bytes;
    swapped = true;
  };
  auto damaged = walcut::recovery::Restore(c.cc, c.layout, req);
  REQUIRE(swapped);
  REQUIRE_FALSE(damaged.ok());
  CHECK(damaged.status().code() == walfmt::ErrorCode::kCorruption);
  CHECK_THAT(damaged.status().message(), Catch::StartsWith(snap.string() + ": snapshot: "));
  CHECK_FALSE(fs::exists(req.out));
}

TEST_CASE("restore: an exception on a restoring thread reaches the caller, and nothing is left staged") {
  TempDir d("throws");
  const Seven c = RunSeven(d.path.string());
  REQUIRE_FALSE(c.consistent.empty());
  walcut::recovery::RestoreRequest req;
  req.cluster_dir = c.opt.dir;
  req.cut = c.consistent.back();
  req.jobs = 2;
  req.out = (d.path / "out").string();
  req.progress = [](uint64_t) { throw std::runtime_error("progress failed"); };
  CHECK_THROWS_WITH(walcut::recovery::Restore(c.cc, c.layout, req), "progress failed");
  CHECK_FALSE(fs::exists(req.out));
  for (const auto& e : fs::directory_iterator(d.path)) {
    INFO(e.path().string());
    CHECK(e.path().filename().string().rfind(".out.tmp-", 0) == std::string::npos);
  }
}
