// The node runtime against its oracle: runs simulated clusters over many seeds
// and shapes, then checks the WAL they wrote (tests/node_wal_model.h).
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "node/cluster.h"
#include "node_wal_model.h"
#include "scratch_dir.h"

namespace fs = std::filesystem;
using walcut::node::ClusterOptions;
using walcut::node::RunCluster;
using walcut::node::RunResult;
using walcut::node::Workload;
using walcut::node::testing::CheckCluster;
using walcut::node::testing::ClusterCheck;

namespace {

using TempDir = walcut::test::ScratchDir;

ClusterOptions SmallOptions(const std::string& dir, uint64_t seed, uint32_t nodes, uint32_t backups, Workload w) {
  ClusterOptions o;
  o.dir = dir;
  o.seed = seed;
  o.nodes = nodes;
  o.backups = backups;
  o.workload.workload = w;
  // Few keys and many cuts: contention, conflicts and cuts that overlap many
  // transactions are what the checks need to see.
  o.workload.accounts = 100;
  o.workload.ring = 100;
  o.workload.max_transfer = 400;
  o.txs = 300;
  o.concurrency = 16;
  o.cuts = 12;
  o.cut_every = 15;
  o.segment_bytes = 16 * 1024;  // several segments, archived as .wal.zst
  return o;
}

// The soak's shape for a seed: nodes, backups, workload and crashes all vary
// with the seed.
ClusterOptions SoakOptions(const std::string& dir, uint64_t seed) {
  const uint32_t nodes = seed % 2 ? 3 : 5;
  const uint32_t backups = static_cast<uint32_t>((seed / 2) % 3);
  const Workload w = (seed / 6) % 3 == 0 ? Workload::kBank : (seed / 6) % 3 == 1 ? Workload::kCycle : Workload::kMixed;
  auto o = SmallOptions(dir, seed, nodes, backups, w);
  if ((seed / 18) % 2 == 1) o.random_crashes = 2;
  return o;
}

// Runs the cluster and checks its WAL against the oracle; fails the test
// case (with the run's error or the check's failures) when either goes wrong.
std::pair<RunResult, ClusterCheck> RunAndCheck(const ClusterOptions& o) {
  auto run = RunCluster(o);
  INFO((run.ok() ? std::string() : run.status().message()));
  REQUIRE(run.ok());
  ClusterCheck c = CheckCluster(*run);
  INFO(fmt::format("failures:\n{}", fmt::join(c.failures, "\n")));
  REQUIRE(c.failures.empty());
  return {std::move(run.value()), std::move(c)};
}

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("a small bank cluster commits and cuts and passes every check") {
  TempDir d("basic");
  auto run = RunCluster(SmallOptions(d.path.string(), 1, 3, 1, Workload::kBank));
  REQUIRE(run.ok());
  const auto& s = run->summary;
  CHECK(s.committed > 100);
  CHECK(s.committed_1pc > 0);
  CHECK(s.committed_2pc > 0);
  CHECK(s.rolled_back_conflict > 0);
  CHECK(s.cuts_started >= 8);
  CHECK(s.cuts_consistent == s.cuts_started);
  CHECK(s.rolled_back_other == 0);
  ClusterCheck c = CheckCluster(*run);
  INFO(fmt::format("failures: {}", fmt::join(c.failures, "\n")));
  CHECK(c.failures.empty());
  CHECK(fs::exists(d.path / "cluster.json"));
  bool archived = false;
  for (const auto& e : fs::directory_iterator(d.path / "node-0" / "wal")) {
    archived = archived || e.path().string().ends_with(".wal.zst");
  }
  CHECK(archived);
}

// Crashes: nodes lose their unsynced tail, restart from their WAL and resolve
// undecided transactions with the others. Every check still holds for the
// consistent cuts; cuts that ran across a crash or tracked a transaction the
// recovery protocol finished are inconsistent, and later cuts succeed again.
TEST_CASE("crash sweep - recovery keeps the WAL consistent with the oracle") {
  constexpr uint64_t kSeeds = 20;
  uint64_t runs = 0, crashes = 0, restarts = 0, recovered = 0, consistent = 0, inconsistent = 0, later_ok = 0;
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    for (uint32_t nodes : {3u, 5u}) {
      for (uint32_t backups : {0u, 1u, 2u}) {
        for (Workload w : {Workload::kBank, Workload::kCycle}) {
          TempDir d("crash");
          auto o = SmallOptions(d.path.string(), 900000 + seed * 1000 + nodes * 10 + backups, nodes, backups, w);
          o.txs = 600;
          o.cuts = 20;
          o.random_crashes = 2;
          INFO(fmt::format("seed {} nodes {} backups {} workload {} crashes 2", o.seed, nodes, backups,
                           walcut::node::WorkloadName(w)));
          auto [result, c] = RunAndCheck(o);
          const RunResult* run = &result;
          ++runs;
          crashes += run->summary.crashes;
          restarts += c.restarts;
          recovered += c.recovered_commits;
          consistent += c.consistent_cuts;
          inconsistent += c.inconsistent_cuts;
          if (run->summary.cuts_inconsistent > 0 && run->summary.cuts_consistent > 0) ++later_ok;
        }
      }
    }
  }
  WARN(
      fmt::format("crash sweep: {} runs, {} crashes, {} restarts, {} recovered commits, {} consistent and {} "
                  "inconsistent cuts",
                  runs, crashes, restarts, recovered, consistent, inconsistent));
  CHECK(crashes > runs);
  CHECK(restarts == crashes);
  CHECK(recovered > 0);
  CHECK(inconsistent > 0);
  CHECK(later_ok > 0);
}

TEST_CASE("an explicit crash during a cut makes that cut inconsistent and later cuts consistent") {
  TempDir d("crash-explicit");
  auto o = SmallOptions(d.path.string(), 5, 3, 1, Workload::kBank);
  o.txs = 1500;
  o.cuts = 40;
  o.cut_every = 20;
  walcut::node::CrashSpec spec;
  REQUIRE(walcut::node::ParseCrashSpec("2@30ms+4ms", spec));
  CHECK(spec.node == 2);
  CHECK(spec.at_us == 30000);
  CHECK(spec.restart_delay_us == 4000);
  o.crashes = {spec};
  auto run = RunCluster(o);
  REQUIRE(run.ok());
  CHECK(run->summary.crashes == 1);
  CHECK(run->summary.restarts == 1);
  ClusterCheck c = CheckCluster(*run);
  INFO(fmt::format("failures:\n{}", fmt::join(c.failures, "\n")));
  CHECK(c.failures.empty());
  CHECK(c.consistent_cuts > 5);
}

TEST_CASE("crash specs") {
  walcut::node::CrashSpec c;
  CHECK(walcut::node::ParseCrashSpec("1@500us", c));
  CHECK(c.node == 1);
  CHECK(c.at_us == 500);
  CHECK(c.restart_delay_us == 0);
  CHECK(walcut::node::ParseCrashSpec("3@2s+1ms", c));
  CHECK(c.at_us == 2000000);
  CHECK(c.restart_delay_us == 1000);
  CHECK_FALSE(walcut::node::ParseCrashSpec("1", c));
  CHECK_FALSE(walcut::node::ParseCrashSpec("@5", c));
  CHECK_FALSE(walcut::node::ParseCrashSpec("1@5x", c));
  CHECK_FALSE(walcut::node::ParseCrashSpec("1@5+", c));
  CHECK_FALSE(walcut::node::ParseCrashSpec("1@5ms+0us", c));
  // A bare number has no unit: refused for the time and for the delay.
  CHECK_FALSE(walcut::node::ParseCrashSpec("1@500", c));
  CHECK_FALSE(walcut::node::ParseCrashSpec("1@5ms+5", c));
  CHECK(walcut::node::ParseCrashSpec("2@1.5m+1s", c));
  CHECK(c.at_us == 90000000);
  TempDir d("crash-one-node");
  auto o = SmallOptions(d.path.string(), 1, 1, 0, Workload::kBank);
  o.crashes = {{0, 1000, 0}};
  auto run = RunCluster(o);
  REQUIRE_FALSE(run.ok());
  CHECK(run.status().code() == walfmt::ErrorCode::kInvalidArgument);
  o.crashes = {{3, 1000, 0}};
  o.nodes = 3;
  run = RunCluster(o);
  REQUIRE_FALSE(run.ok());
  CHECK(run.status().code() == walfmt::ErrorCode::kInvalidArgument);
}

// The initiator crashes at times spread over the run, so that many crashes
// land while a cut runs: the oldest live node takes over, ends the running
// cut as inconsistent (every live node still ends it), and the cuts after it
// are consistent and match the oracle. Then the new initiator crashes too,
// and finally every node crashes one after the other.
TEST_CASE("the initiator crashes: the oldest live node takes over the cuts") {
  uint64_t runs = 0, failovers = 0, taken_over = 0, consistent_after = 0;
  for (uint64_t seed = 1; seed <= 24; ++seed) {
    for (uint32_t nodes : {3u, 5u}) {
      TempDir d("initiator");
      auto o = SmallOptions(d.path.string(), 700000 + seed * 10 + nodes, nodes, seed % 3, Workload::kBank);
      o.txs = 1200;
      o.cuts = 40;
      o.cut_every = 10;
      // 10 ms .. 56 ms of virtual time, where cuts run back to back.
      const uint64_t at = 10000 + (seed * 1931) % 46000;
      o.crashes = {{0, at, 3000}};
      if (seed % 4 == 0) o.crashes.push_back({1, at + 500, 3000});  // the new initiator too
      if (seed % 6 == 0) {
        for (uint32_t n = 0; n < nodes; ++n) o.crashes.push_back({n, at + 9000 + n * 700, 2000});
      }
      INFO(fmt::format("seed {} nodes {} backups {} initiator crash at {} us", o.seed, nodes, o.backups, at));
      auto [result, c] = RunAndCheck(o);
      const RunResult* run = &result;
      CHECK(run->summary.restarts == run->summary.crashes);
      CHECK(run->summary.initiator_failovers >= 1);
      CHECK(run->summary.cuts_started == run->summary.cuts_consistent + run->summary.cuts_inconsistent);
      ++runs;
      failovers += run->summary.initiator_failovers;
      taken_over += run->summary.cuts_taken_over;
      if (run->summary.cuts_consistent > 0) ++consistent_after;
    }
  }
  WARN(fmt::format("initiator crashes: {} runs, {} failovers, {} of them with a cut running", runs, failovers,
                   taken_over));
  CHECK(taken_over > 5);
  CHECK(consistent_after == runs);
}

TEST_CASE("refuses a non-empty directory") {
  TempDir d("nonempty");
  fs::create_directories(d.path);
  std::ofstream(d.path / "x") << "x";
  auto run = RunCluster(SmallOptions(d.path.string(), 1, 3, 1, Workload::kBank));
  REQUIRE_FALSE(run.ok());
  CHECK(run.status().code() == walfmt::ErrorCode::kInvalidArgument);
}

TEST_CASE("option checks") {
  TempDir d("opts");
  auto o = SmallOptions(d.path.string(), 1, 3, 3, Workload::kBank);
  auto run = RunCluster(o);
  REQUIRE_FALSE(run.ok());
  CHECK(run.status().code() == walfmt::ErrorCode::kInvalidArgument);
}

TEST_CASE("the same seed twice gives byte-identical WAL files") {
  for (Workload w : {Workload::kBank, Workload::kCycle, Workload::kMixed}) {
    TempDir a("det-a"), b("det-b");
    // The epoch is the real clock unless given: fixed, as make-samples.sh fixes it.
    auto oa = SmallOptions(a.path.string(), 77, 5, 2, w), ob = SmallOptions(b.path.string(), 77, 5, 2, w);
    oa.epoch_unix_us = ob.epoch_unix_us = uint64_t{1796040000} * 1000000;
    auto ra = RunCluster(oa);
    auto rb = RunCluster(ob);
    REQUIRE(ra.ok());
    REQUIRE(rb.ok());
    size_t files = 0;
    for (const auto& e : fs::recursive_directory_iterator(a.path)) {
      if (!e.is_regular_file()) continue;
      const fs::path rel = fs::relative(e.path(), a.path);
      INFO(rel.string());
      REQUIRE(fs::exists(b.path / rel));
      CHECK(ReadAll(e.path()) == ReadAll(b.path / rel));
      ++files;
    }
    size_t files_b = 0;
    for (const auto& e : fs::recursive_directory_iterator(b.path)) files_b += e.is_regular_file() ? 1 : 0;
    CHECK(files == files_b);
    CHECK(files > 5);
  }
}

TEST_CASE("different seeds give different runs") {
  TempDir a("seed-a"), b("seed-b");
  auto ra = RunCluster(SmallOptions(a.path.string(), 1, 3, 1, Workload::kBank));
  auto rb = RunCluster(SmallOptions(b.path.string(), 2, 3, 1, Workload::kBank));
  REQUIRE(ra.ok());
  REQUIRE(rb.ok());
  CHECK(ReadAll(a.path / "node-0/wal/0000000000000000.wal.zst") !=
        ReadAll(b.path / "node-0/wal/0000000000000000.wal.zst"));
}

// The sweep: seeds x {3, 5} nodes x {0, 1, 2} backups x {bank, cycle, mixed}.
// Every run must pass every check; across the sweep both cases of rule 5 must
// occur, and the naive cut (the WAL prefix up to CUT_START) must be caught
// being wrong — otherwise these checks could not tell a broken cut apart.
TEST_CASE("seed sweep - cuts match the oracle and the invariants hold") {
  constexpr uint64_t kSeeds = 35;
  uint64_t runs = 0, after_early = 0, before_late = 0, naive_wrong = 0, naive_breaks = 0, cuts = 0;
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    for (uint32_t nodes : {3u, 5u}) {
      for (uint32_t backups : {0u, 1u, 2u}) {
        for (Workload w : {Workload::kBank, Workload::kCycle, Workload::kMixed}) {
          TempDir d("sweep");
          auto o = SmallOptions(d.path.string(), seed * 1000 + nodes * 10 + backups, nodes, backups, w);
          INFO(fmt::format("seed {} nodes {} backups {} workload {}", o.seed, nodes, backups,
                           walcut::node::WorkloadName(w)));
          auto run = RunCluster(o);
          REQUIRE(run.ok());
          ClusterCheck c = CheckCluster(*run);
          INFO(fmt::format("failures:\n{}", fmt::join(c.failures, "\n")));
          REQUIRE(c.failures.empty());
          REQUIRE(run->summary.rolled_back_other == 0);
          ++runs;
          cuts += c.consistent_cuts;
          after_early += c.after_commit_before_start;
          before_late += c.before_commit_after_start;
          naive_wrong += c.naive_disagreements;
          naive_breaks += c.naive_invariant_breaks;
        }
      }
    }
  }
  WARN(
      fmt::format("sweep: {} runs, {} consistent cuts; rule 5: {} after-tx with TX_COMMIT before CUT_START, "
                  "{} before-tx with TX_COMMIT after CUT_START; naive cut wrong on {} node-cuts, breaks atomicity "
                  "or an invariant in {} cuts",
                  runs, cuts, after_early, before_late, naive_wrong, naive_breaks));
  CHECK(runs >= 600);
  CHECK(after_early > 0);
  CHECK(before_late > 0);
  CHECK(naive_wrong > 0);
  CHECK(naive_breaks > 0);
}

// Seeds the soak once failed on, kept as regression tests:
//  9099 - a near node that was also a participant recovered a transaction
//         without counting its own decision (fixed in 9ea04f3).
// 11691 - a node crashed between the driver deciding to start a cut and the
//         initiator starting it; the cut was called consistent.
// 25399 - both participants of 1:61 crashed; the near node (alive) decided
//         rollback, but one participant's recovery round timed out before the
//         near node's slow reply and applied rule 4 (commit) as if the near
//         node were gone, while the other rolled back.
TEST_CASE("soak regressions") {
  for (uint64_t seed : {9099ull, 11691ull, 25399ull}) {
    TempDir d("regress");
    auto o = SoakOptions(d.path.string(), seed);
    INFO(fmt::format("seed {}", seed));
    auto run = RunCluster(o);
    INFO((run.ok() ? std::string() : run.status().message()));
    REQUIRE(run.ok());
    ClusterCheck c = CheckCluster(*run);
    INFO(fmt::format("failures:\n{}", fmt::join(c.failures, "\n")));
    CHECK(c.failures.empty());
  }
}

// The soak: many more seeds than CI runs, crashes on every other run. Hidden
// ([.]); run it with `node_tests "[soak]"`, WALCUT_SOAK_SEEDS=N (default 2000)
// and WALCUT_SOAK_FIRST=S to shift the seed range.
TEST_CASE("soak", "[.][soak]") {
  const char* env = std::getenv("WALCUT_SOAK_SEEDS");
  const char* first_env = std::getenv("WALCUT_SOAK_FIRST");
  const uint64_t seeds = env ? std::strtoull(env, nullptr, 10) : 2000;
  const uint64_t first = first_env ? std::strtoull(first_env, nullptr, 10) : 1;
  uint64_t runs = 0, crash_runs = 0, after_early = 0, before_late = 0, consistent = 0, inconsistent = 0;
  uint64_t failovers = 0, taken_over = 0;
  for (uint64_t seed = first; seed < first + seeds; ++seed) {
    TempDir d("soak");
    auto o = SoakOptions(d.path.string(), seed);
    INFO(fmt::format("seed {} nodes {} backups {} workload {} crashes {}", seed, o.nodes, o.backups,
                     walcut::node::WorkloadName(o.workload.workload), o.random_crashes));
    auto [result, c] = RunAndCheck(o);
    const RunResult* run = &result;
    ++runs;
    crash_runs += o.random_crashes > 0 ? 1 : 0;
    after_early += c.after_commit_before_start;
    before_late += c.before_commit_after_start;
    consistent += c.consistent_cuts;
    inconsistent += c.inconsistent_cuts;
    failovers += run->summary.initiator_failovers;
    taken_over += run->summary.cuts_taken_over;
  }
  WARN(
      fmt::format("soak: {} runs ({} with crashes), {} consistent / {} inconsistent cuts; rule 5: {} after-early, "
                  "{} before-late; {} initiator failovers, {} with a cut running",
                  runs, crash_runs, consistent, inconsistent, after_early, before_late, failovers, taken_over));
}
