// A restore of cut K decides K from each WAL up to where K is decided
// (cut::ScanOptions::settle_cut, recovery::ScanToCut), from a restored base's
// positions when it has them. Checked against the whole WAL's verdict and
// restore: the same verdict on every cut, the same bytes in every restore
// (genesis, full snapshot and restored bases, chains of restores), over many
// seeds of shapes, crashes, periodic full snapshots and WAL retention.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cut/cuts.h"
#include "cut/load.h"
#include "cut_support.h"
#include "node/cluster.h"
#include "recovery/restore.h"
#include "sweep_support.h"

namespace fs = std::filesystem;
using walcut::cut::ClusterCuts;
using walcut::cut::CutStatus;
using walcut::cut::GlobalCut;
using walcut::node::ClusterOptions;
using walcut::recovery::VerdictScan;
using TempDir = walcut::test::ScratchDir;

namespace {

std::string ReadAll(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), {});
}

ClusterCuts Reconstructed(const walcut::cut::ClusterLayout& layout, const walcut::cut::LoadOptions& lo,
                          std::optional<uint64_t> attested = std::nullopt) {
  auto sums = walcut::cut::ScanCluster(layout, lo);
  REQUIRE(sums.ok());
  walcut::cut::ReconstructOptions ro;
  ro.attested_cut = attested;
  auto cc = walcut::cut::Reconstruct(std::move(sums.value()), ro);
  REQUIRE(cc.ok());
  return std::move(cc.value());
}

// What the whole WAL says of cut k is what the scan up to it says.
void SameCut(const GlobalCut& a, const GlobalCut& b) {
  CHECK(CutStatusName(a.status) == std::string(CutStatusName(b.status)));
  CHECK(a.reason == b.reason);
  CHECK(a.transactions == b.transactions);
  CHECK(a.node_transactions == b.node_transactions);
  CHECK(a.checked_against == b.checked_against);
  REQUIRE(a.findings.size() == b.findings.size());
  for (size_t f = 0; f < a.findings.size(); ++f) CHECK(a.findings[f].message == b.findings[f].message);
  REQUIRE(a.nodes.size() == b.nodes.size());
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    INFO("node " << i);
    REQUIRE((a.nodes[i] == nullptr) == (b.nodes[i] == nullptr));
    if (!a.nodes[i]) continue;
    const auto& x = *a.nodes[i];
    const auto& y = *b.nodes[i];
    CHECK(x.start == y.start);
    CHECK(x.finish == y.finish);
    CHECK(x.end == y.end);
    REQUIRE(x.before.size() == y.before.size());
    REQUIRE(x.after.size() == y.after.size());
    for (size_t t = 0; t < x.before.size(); ++t) {
      CHECK(x.before[t].tx == y.before[t].tx);
      CHECK(x.before[t].first_seen == y.before[t].first_seen);
      CHECK(x.before[t].commit == y.before[t].commit);
    }
    for (size_t t = 0; t < x.after.size(); ++t) {
      CHECK(x.after[t].tx == y.after[t].tx);
      CHECK(x.after[t].first_seen == y.after[t].first_seen);
      CHECK(x.after[t].commit == y.after[t].commit);
    }
  }
}

// Restores cut k from `base` with the cuts `cc` into `out`; the error
// message when it fails.
std::string RestoreInto(const ClusterCuts& cc, const walcut::cut::ClusterLayout& layout, uint64_t k,
                        const std::string& base, const std::string& out) {
  walcut::recovery::RestoreRequest req;
  req.cluster_dir = layout.dir;
  req.cut = k;
  req.base = base;
  req.out = out;
  auto r = walcut::recovery::Restore(cc, layout, req);
  if (!r.ok()) return r.status().message();
  auto st = walcut::recovery::WriteRestore(*r, out);
  return st.ok() ? "" : st.message();
}

// The node files byte for byte, and the manifests but for the base's
// directory (`base_dir_differs`: the two were restored from different
// copies of the same base).
void SameFiles(const fs::path& a, const fs::path& b, uint32_t nodes, bool base_dir_differs = false) {
  for (uint32_t n = 0; n < nodes; ++n) {
    const std::string fa = ReadAll(a / fmt::format("node-{}.snap", n));
    CHECK(!fa.empty());
    CHECK(fa == ReadAll(b / fmt::format("node-{}.snap", n)));
  }
  nlohmann::json ma = nlohmann::json::parse(ReadAll(a / "manifest.json"));
  nlohmann::json mb = nlohmann::json::parse(ReadAll(b / "manifest.json"));
  if (base_dir_differs) {
    ma["base"].erase("dir");
    mb["base"].erase("dir");
  }
  CHECK(ma.dump(2) == mb.dump(2));
}

struct Counts {
  uint64_t cuts = 0;
  uint64_t refused = 0;
  uint64_t to_cut = 0;
  uint64_t from_base = 0;
  uint64_t snapshot_bases = 0;
  uint64_t chained = 0;
  uint64_t read_less = 0;
};

void CheckSeed(uint64_t seed, Counts& counts) {
  INFO("seed " << seed << " (rerun: WALCUT_BOUNDED_SEED=" << seed << ")");
  TempDir d("bounded");
  const std::string dir = (d.path / "c").string();
  ClusterOptions opt = walcut::test::SweepShape(dir, seed);
  // Long enough between cuts for the scan to stop before the end: a node's
  // 256 most recent commits (the ring a later cut's sets may still reach
  // into) all come after the cut.
  // (committed ones: more keys, fewer conflicts).
  opt.txs = 4000;
  opt.cut_every = 550;
  opt.workload.accounts = 1000;
  opt.workload.ring = 1000;
  if (opt.random_crashes > 0) {
    // Down long enough for cuts to run without them: inconsistent cuts.
    opt.random_crashes = 4;
    opt.restart_delay_us = 120000;
  }
  if (seed % 4 == 1) opt.full_snapshot_every_tx = 70;
  if (seed % 8 == 5) opt.wal_retention = walcut::node::WalRetention::kAfterSnapshot;
  REQUIRE(walcut::node::RunCluster(opt).ok());
  auto layout = walcut::cut::FindClusterLayout(dir);
  REQUIRE(layout.ok());
  const ClusterCuts whole = Reconstructed(*layout, {});
  uint64_t wal_bytes = 0;
  for (const auto& s : whole.nodes) wal_bytes += s.bytes;
  std::optional<uint64_t> prev;  // the previous consistent cut restored (bounded) into bounded-<prev>
  for (const GlobalCut& g : whole.cuts) {
    const uint64_t k = g.cut_id;
    INFO("cut " << k << " (" << CutStatusName(g.status) << ": " << g.reason << ")");
    ++counts.cuts;
    // The verdict from the scan up to the cut, whatever it is.
    walcut::cut::LoadOptions lo;
    lo.settle_cut = k;
    const ClusterCuts bounded = Reconstructed(*layout, lo);
    REQUIRE(bounded.Find(k) != nullptr);
    SameCut(*bounded.Find(k), g);
    auto v = walcut::recovery::ScanToCut(*layout, k, "", {});
    if (g.status != CutStatus::kConsistent) {
      // Refused (or forced) from the whole WAL, as before: read again, or
      // the scan was the whole WAL's already.
      if (v) {
        CHECK(v->scan == VerdictScan::kWhole);
        SameCut(*v->cuts.Find(k), g);
      }
      ++counts.refused;
      continue;
    }
    if (whole.pruned) {
      // Genesis is gone: a restore needs a base; the scan up to the cut may
      // still show it consistent (checked against a full snapshot).
      if (!v) continue;
    }
    REQUIRE(v.has_value());
    CHECK(v->scan != VerdictScan::kFromBase);
    if (v->scan == VerdictScan::kWhole) CHECK(v->bytes_scanned == wal_bytes);
    CHECK(v->bytes_scanned <= wal_bytes);
    counts.read_less += v->bytes_scanned < wal_bytes;
    // The default base is chosen the same, and restores the same bytes.
    auto choice_whole = walcut::recovery::ChooseBase(whole, *layout, k);
    auto choice_bounded = walcut::recovery::ChooseBase(v->cuts, *layout, k);
    REQUIRE(choice_whole.ok() == choice_bounded.ok());
    if (!choice_whole.ok()) continue;
    CHECK(choice_whole->base == choice_bounded->base);
    CHECK(choice_whole->why == choice_bounded->why);
    counts.snapshot_bases += choice_whole->base != "genesis";
    const fs::path a = d.path / fmt::format("whole-{}", k);
    const fs::path b = d.path / fmt::format("bounded-{}", k);
    REQUIRE(RestoreInto(whole, *layout, k, choice_whole->base, a.string()) == "");
    REQUIRE(RestoreInto(v->cuts, *layout, k, choice_bounded->base, b.string()) == "");
    SameFiles(a, b, opt.nodes);
    ++counts.to_cut;
    // From the restore of the previous consistent cut: from its positions on.
    if (prev) {
      const std::string base = (d.path / fmt::format("bounded-{}", *prev)).string();
      auto from = walcut::recovery::ScanToCut(*layout, k, base, {});
      REQUIRE(from.has_value());
      CHECK(from->scan == VerdictScan::kFromBase);
      CHECK(from->bytes_scanned <= v->bytes_scanned);
      const ClusterCuts whole_attested = Reconstructed(*layout, {}, walcut::recovery::RestoredBaseCut(base));
      const fs::path wa = d.path / fmt::format("whole-{}-from-{}", k, *prev);
      const fs::path fb = d.path / fmt::format("bounded-{}-from-{}", k, *prev);
      REQUIRE(RestoreInto(whole_attested, *layout, k, base, wa.string()) == "");
      REQUIRE(RestoreInto(from->cuts, *layout, k, base, fb.string()) == "");
      SameFiles(wa, fb, opt.nodes);
      ++counts.from_base;
      // And one more link: the next cut from this restore, against the whole WAL's.
      if (const GlobalCut* next = whole.Find(k + 1); next && next->status == CutStatus::kConsistent) {
        auto link = walcut::recovery::ScanToCut(*layout, k + 1, fb.string(), {});
        REQUIRE(link.has_value());
        CHECK(link->scan == VerdictScan::kFromBase);
        const ClusterCuts wl = Reconstructed(*layout, {}, k);
        const fs::path la = d.path / fmt::format("whole-{}-chain", k + 1);
        const fs::path lb = d.path / fmt::format("bounded-{}-chain", k + 1);
        REQUIRE(RestoreInto(wl, *layout, k + 1, wa.string(), la.string()) == "");
        REQUIRE(RestoreInto(link->cuts, *layout, k + 1, fb.string(), lb.string()) == "");
        SameFiles(la, lb, opt.nodes, true);
        ++counts.chained;
      }
    }
    prev = k;
  }
}

// Seeds [0, n), or the one WALCUT_BOUNDED_SEED names; `crash_seeds` more
// from 18 on (SweepShape's seeds with random crashes, here 4 long ones).
void Sweep(uint64_t n, uint64_t crash_seeds = 0) {
  Counts c;
  const char* one = std::getenv("WALCUT_BOUNDED_SEED");
  std::vector<uint64_t> seeds;
  if (one) {
    seeds.push_back(std::strtoull(one, nullptr, 10));
  } else {
    for (uint64_t s = 0; s < n; ++s) seeds.push_back(s);
    for (uint64_t s = 18; s < 18 + crash_seeds; ++s) seeds.push_back(s);
  }
  for (uint64_t seed : seeds) CheckSeed(seed, c);
  INFO("cuts " << c.cuts << ", refused " << c.refused << ", to-cut " << c.to_cut << ", from-base " << c.from_base
               << ", snapshot bases " << c.snapshot_bases << ", chained " << c.chained << ", read less "
               << c.read_less);
  if (one) return;
  // The sweep covered what it claims to.
  CHECK(c.refused > 0);
  CHECK(c.to_cut > 0);
  CHECK(c.from_base > 0);
  CHECK(c.snapshot_bases > 0);
  CHECK(c.chained > 0);
  CHECK(c.read_less > 0);
}

}  // namespace

TEST_CASE("restore up to the cut: the verdict and bytes of the whole WAL (8 seeds)") { Sweep(4, 4); }

TEST_CASE("restore up to the cut: the verdict and bytes of the whole WAL (600 seeds)", "[.bounded]") { Sweep(600); }
