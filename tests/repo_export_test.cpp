// walcut export --repo (repo::ExportFromRepository): the change set between
// two artifacts' cuts from the increments between them equals the export
// from the cluster's live WAL, net and by transaction, for every pair of
// artifact cuts of simulator clusters from fixed seeds; and its refusals.
#include <filesystem>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "cut/cuts.h"
#include "cut/load.h"
#include "cut_support.h"
#include "node/cluster.h"
#include "recovery/export.h"
#include "recovery/restore.h"
#include "repo/export_repo.h"
#include "repo/repository.h"
#include "scratch_dir.h"
#include "sweep_support.h"

namespace fs = std::filesystem;
using walcut::cut::CutStatus;
using walcut::recovery::ExportRequest;
using walcut::recovery::ExportResult;

namespace {

using Change = std::tuple<uint32_t, std::string, std::optional<std::string>, std::optional<std::string>>;

std::vector<Change> Changes(const ExportResult& r) {
  std::vector<Change> v;
  for (const auto& n : r.nodes) {
    for (const auto& c : n.changes) v.emplace_back(n.node, c.key, c.old_value, c.new_value);
  }
  return v;
}

// The transactions with their writes, in order.
std::vector<std::string> Txs(const ExportResult& r) {
  std::vector<std::string> v;
  for (const auto& t : r.txs) {
    std::string s = t.tx.ToString();
    for (const auto& w : t.writes) s += fmt::format(" {}:{}={}", w.node, w.key, w.value);
    v.push_back(s);
  }
  return v;
}

struct RepoCluster {
  std::string dir, repo;
  std::vector<uint64_t> artifact_cuts;  // the full's, then the increments'
  std::vector<uint64_t> skipped;        // consistent cuts after the full without an artifact
};

// A cluster, a synthetic full of its first consistent cut, and an increment
// of every later one except the second (so one increment spans two cuts).
RepoCluster MakeRepo(const fs::path& parent, uint64_t seed) {
  RepoCluster c;
  auto opt = walcut::test::SweepShape((parent / "c").string(), seed);
  opt.cuts = 10;
  opt.txs = 400;
  opt.cut_every = 25;
  c.dir = opt.dir;
  c.repo = (parent / "repo").string();
  REQUIRE(walcut::node::RunCluster(opt).ok());
  const auto cc = walcut::test::LoadCuts(c.dir);
  std::vector<uint64_t> consistent;
  for (const auto& g : cc.cuts) {
    if (g.status == CutStatus::kConsistent) consistent.push_back(g.cut_id);
  }
  if (consistent.size() < 4) return c;  // too few cuts for a chain (crashes): no artifacts
  walcut::repo::CreateRequest full;
  full.cluster_dir = c.dir;
  full.repo = c.repo;
  full.full = true;
  full.cut = consistent[0];
  auto f = walcut::repo::CreateArtifact(full);
  INFO((f.ok() ? "" : f.status().message()));
  REQUIRE(f.ok());
  c.artifact_cuts.push_back(consistent[0]);
  for (size_t x = 1; x < consistent.size(); ++x) {
    if (x == 2) {
      c.skipped.push_back(consistent[x]);
      continue;
    }
    walcut::repo::CreateRequest inc;
    inc.cluster_dir = c.dir;
    inc.repo = c.repo;
    inc.cut = consistent[x];
    auto r = walcut::repo::CreateArtifact(inc);
    INFO((r.ok() ? "" : r.status().message()));
    REQUIRE(r.ok());
    c.artifact_cuts.push_back(consistent[x]);
  }
  return c;
}

}  // namespace

TEST_CASE("export --repo equals the export from the live WAL for every pair of artifact cuts, over seeds") {
  uint64_t pairs = 0, seeds = 0;
  for (uint64_t seed : {1, 2, 13, 20, 27}) {
    walcut::test::ScratchDir d(fmt::format("repo-export-{}", seed));
    const RepoCluster c = MakeRepo(d.path, seed);
    if (c.artifact_cuts.empty()) continue;
    ++seeds;
    auto layout = walcut::cut::FindClusterLayout(c.dir);
    REQUIRE(layout.ok());
    const auto cc = walcut::test::LoadCuts(c.dir);
    for (size_t x = 0; x < c.artifact_cuts.size(); ++x) {
      for (size_t y = x; y < c.artifact_cuts.size(); ++y) {
        const uint64_t a = c.artifact_cuts[x], b = c.artifact_cuts[y];
        if (y == 0) continue;  // B must be an increment's cut
        INFO(fmt::format("seed {}: export {} -> {}", seed, a, b));
        for (bool by_tx : {false, true}) {
          ExportRequest e;
          e.from_cut = a;
          e.to_cut = b;
          e.net = !by_tx;
          e.by_transaction = by_tx;
          auto live = walcut::recovery::Export(cc, *layout, e);
          REQUIRE(live.ok());
          walcut::repo::RepoExportRequest rr;
          rr.repo = c.repo;
          rr.work = d.path.string();
          rr.exp = e;
          auto from_repo = walcut::repo::ExportFromRepository(rr);
          INFO((from_repo.ok() ? "" : from_repo.status().message()));
          REQUIRE(from_repo.ok());
          if (by_tx) {
            CHECK(Txs(*from_repo) == Txs(*live));
            CHECK(from_repo->order == live->order);
          } else {
            CHECK(Changes(*from_repo) == Changes(*live));
          }
          ++pairs;
        }
      }
    }
    // Nothing left beside the work directory's scratch.
    for (const auto& e : fs::directory_iterator(d.path)) {
      CHECK(e.path().filename().string().find("walcut-export-base") == std::string::npos);
    }
  }
  CHECK(seeds >= 3);
  CHECK(pairs > 30);
}

TEST_CASE("export --repo refuses genesis, a cut that is no artifact of the chain, a cut with no artifact") {
  walcut::test::ScratchDir d("repo-export-refusals");
  const RepoCluster c = MakeRepo(d.path, 2);
  REQUIRE(!c.artifact_cuts.empty());
  auto refused = [&](uint64_t a, uint64_t b) {
    walcut::repo::RepoExportRequest rr;
    rr.repo = c.repo;
    rr.exp.from_cut = a;
    rr.exp.to_cut = b;
    auto r = walcut::repo::ExportFromRepository(rr);
    REQUIRE_FALSE(r.ok());
    return r.status();
  };
  const uint64_t last = c.artifact_cuts.back();
  auto st = refused(0, last);
  CHECK(st.code() == walfmt::ErrorCode::kInvalidArgument);
  CHECK(st.message().find("a repository holds no genesis") != std::string::npos);
  REQUIRE(!c.skipped.empty());
  st = refused(c.skipped[0], last);
  CHECK(st.code() == walfmt::ErrorCode::kInvalidArgument);
  CHECK(st.message().find(fmt::format("no artifact of cut {} in the chain of", c.skipped[0])) != std::string::npos);
  st = refused(c.artifact_cuts[0], c.skipped[0]);
  CHECK(st.code() == walfmt::ErrorCode::kNotFound);
  st = refused(last, c.artifact_cuts[0]);
  CHECK(st.code() == walfmt::ErrorCode::kInvalidArgument);
  CHECK(st.message().find("is after") != std::string::npos);
}
