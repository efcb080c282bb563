// Partial restore (RestoreRequest::subset): on the samples, for several cuts
// and bases, a restore of a subset equals the whole restore with every other
// key dropped, node by node and key by key; its manifest records the subset
// under a schema of its own; a partial output serves as a base only for the
// same subset; a subset the cluster cannot have is refused.
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cut/cuts.h"
#include "cut/load.h"
#include "cut_support.h"
#include "recovery/key_subset.h"
#include "recovery/restore.h"
#include "recovery_support.h"
#include "scratch_dir.h"
#include "walfmt/cluster_layout.h"
#include "walfmt/snapshot.h"
#include "walfmt/topology.h"

namespace fs = std::filesystem;
using walcut::recovery::KeySubset;
using walcut::recovery::RestoreRequest;
using walcut::recovery::testing::ReadAll;
using State = std::map<std::string, std::string>;

namespace {

std::string Sample(const std::string& name) { return std::string(WALCUT_SOURCE_DIR) + "/samples/" + name; }

struct Cluster {
  std::string dir;
  walcut::cut::ClusterLayout layout;
  walcut::cut::ClusterCuts cc;
  uint32_t partitions = 0;
  std::vector<uint64_t> consistent;
};

Cluster Load(const std::string& dir) {
  Cluster c;
  c.dir = dir;
  auto layout = walcut::cut::FindClusterLayout(dir);
  REQUIRE(layout.ok());
  c.layout = std::move(layout.value());
  c.cc = walcut::test::LoadCuts(dir);
  auto info = walfmt::LoadClusterInfo(dir);
  REQUIRE(info.ok());
  c.partitions = info->partitions;
  for (const auto& g : c.cc.cuts) {
    if (g.status == walcut::cut::CutStatus::kConsistent) c.consistent.push_back(g.cut_id);
  }
  return c;
}

// The subset's rule written out on its own: a prefix, or the partition.
State Filter(const State& s, const KeySubset& sub, uint32_t partitions) {
  const walfmt::Topology topo(1, 0, partitions);
  State out;
  for (const auto& [k, v] : s) {
    bool keep = false;
    for (const auto& p : sub.prefixes) keep = keep || k.rfind(p, 0) == 0;
    for (uint32_t p : sub.partitions) keep = keep || topo.PartitionOf(k) == p;
    if (keep) out.emplace(k, v);
  }
  return out;
}

// Every node's restored state (kept in memory; with `out`, also written there).
walfmt::Result<walcut::recovery::RestoreResult> Run(const Cluster& c, uint64_t k, const std::string& base,
                                                    const KeySubset& subset, const std::string& out = "") {
  RestoreRequest req;
  req.cluster_dir = c.dir;
  req.cut = k;
  req.base = base;
  req.subset = subset;
  req.out = out;
  req.keep_states = true;
  auto r = walcut::recovery::Restore(c.cc, c.layout, req);
  if (r.ok() && !out.empty()) {
    if (auto st = walcut::recovery::WriteRestore(*r, out); !st.ok()) return st;
  }
  return r;
}

std::vector<State> States(const walcut::recovery::RestoreResult& r) {
  std::vector<State> v;
  for (const auto& n : r.nodes) v.push_back(n.state);
  return v;
}

// The base a restore of k takes without --base ("" when none can serve:
// an early cut of a pruned WAL).
std::string DefaultBase(const Cluster& c, uint64_t k) {
  auto choice = walcut::recovery::ChooseBase(c.cc, c.layout, k);
  return choice.ok() ? choice->base : "";
}

std::vector<KeySubset> Subsets() {
  return {
      {{"acct/0001"}, {}, 0},     // one prefix: accounts 100..199
      {{}, {3}, 0},               // one partition
      {{"acct/0009"}, {5, 7}, 0}  // both: their union
  };
}

// Each node's partial state equals the whole state filtered, and holds some
// keys but not all (the subset is neither empty nor everything).
void RequireFilteredEqual(const std::vector<State>& whole, const std::vector<State>& part, const KeySubset& sub,
                          uint32_t partitions) {
  REQUIRE(part.size() == whole.size());
  size_t kept = 0, total = 0;
  for (size_t i = 0; i < whole.size(); ++i) {
    INFO("node " << i);
    const State want = Filter(whole[i], sub, partitions);
    CHECK(part[i] == want);
    kept += want.size();
    total += whole[i].size();
  }
  CHECK(kept > 0);
  CHECK(kept < total);
}

}  // namespace

TEST_CASE("a partial restore equals the whole restore filtered to its keys, on the samples, with and without a base",
          "[recovery][restore][partial]") {
  for (const std::string name : {"healthy", "crash-during-cut", "torn-tail", "pruned"}) {
    const Cluster c = Load(Sample(name));
    std::vector<uint64_t> restorable;
    for (const uint64_t k : c.consistent) {
      if (!DefaultBase(c, k).empty()) restorable.push_back(k);
    }
    REQUIRE_FALSE(restorable.empty());
    walcut::test::ScratchDir d("partial-" + name);
    fs::create_directories(d.path);
    for (const uint64_t k : restorable) {
      const std::string base = DefaultBase(c, k);
      auto whole = Run(c, k, base, {});
      REQUIRE(whole.ok());
      for (KeySubset sub : Subsets()) {
        INFO(name << " cut " << k << " base " << base << " subset " << sub.Describe());
        auto part = Run(c, k, base, sub);
        REQUIRE(part.ok());
        RequireFilteredEqual(States(*whole), States(*part), sub, c.partitions);
        // Only the subset's writes are counted as applied.
        uint64_t all = 0, some = 0;
        for (size_t i = 0; i < part->nodes.size(); ++i) {
          all += whole->nodes[i].writes_applied;
          some += part->nodes[i].writes_applied;
          CHECK(part->nodes[i].txs_applied == whole->nodes[i].txs_applied);
        }
        CHECK(some < all);
        // A dry run counts the same writes.
        RestoreRequest dry;
        dry.cluster_dir = c.dir;
        dry.cut = k;
        dry.base = base;
        dry.subset = sub;
        dry.dry_run = true;
        auto plan = walcut::recovery::Restore(c.cc, c.layout, dry);
        REQUIRE(plan.ok());
        for (size_t i = 0; i < plan->nodes.size(); ++i) {
          CHECK(plan->nodes[i].writes_applied == part->nodes[i].writes_applied);
        }
      }
    }
    // Restored bases: the first consistent cut, whole and partial, serve the
    // last (pruned has one restorable cut, on its full snapshot).
    if (restorable.size() < 2) continue;
    const uint64_t j = restorable.front(), k = restorable.back();
    const std::string whole_j = (d.path / "whole-j").string();
    REQUIRE(Run(c, j, DefaultBase(c, j), {}, whole_j).ok());
    auto whole_k = Run(c, k, DefaultBase(c, k), {});
    REQUIRE(whole_k.ok());
    int n = 0;
    for (KeySubset sub : Subsets()) {
      INFO(name << " cut " << k << " on cut " << j << ", subset " << sub.Describe());
      // A whole restore as the base of a partial one: filtered as it is read.
      auto on_whole = Run(c, k, whole_j, sub);
      REQUIRE(on_whole.ok());
      CHECK(on_whole->base.kind == walcut::recovery::BaseKind::kRestored);
      RequireFilteredEqual(States(*whole_k), States(*on_whole), sub, c.partitions);
      // A partial restore of cut j as the base of the same subset's restore of k.
      const std::string part_j = (d.path / fmt::format("part-j-{}", n++)).string();
      REQUIRE(Run(c, j, DefaultBase(c, j), sub, part_j).ok());
      auto on_part = Run(c, k, part_j, sub);
      REQUIRE(on_part.ok());
      RequireFilteredEqual(States(*whole_k), States(*on_part), sub, c.partitions);
    }
  }
}

TEST_CASE("a partial restore's manifest records its subset under schema /3, a whole one's stays /2",
          "[recovery][restore][partial]") {
  const Cluster c = Load(Sample("healthy"));
  walcut::test::ScratchDir d("partial-manifest");
  fs::create_directories(d.path);
  const uint64_t k = c.consistent.front();
  const std::string whole = (d.path / "whole").string(), part = (d.path / "part").string();
  REQUIRE(Run(c, k, "genesis", {}, whole).ok());
  KeySubset sub{{"ring/", "acct/0002", "acct/0002"}, {11, 2}, 0};
  auto r = Run(c, k, "genesis", sub, part);
  REQUIRE(r.ok());
  // Sorted, deduplicated, the partition count from cluster.json.
  CHECK(r->subset.prefixes == std::vector<std::string>{"acct/0002", "ring/"});
  CHECK(r->subset.partitions == std::vector<uint32_t>{2, 11});
  CHECK(r->subset.partition_count == 12);
  const auto m = nlohmann::json::parse(ReadAll(part + "/manifest.json"));
  CHECK(m["schema"] == "walcut.restore-manifest/3");
  CHECK(m["subset"]["key_prefixes"] == nlohmann::json({"acct/0002", "ring/"}));
  CHECK(m["subset"]["partitions"] == nlohmann::json({2, 11}));
  CHECK(m["subset"]["partition_count"] == 12);
  CHECK(m["subset"]["rule"] == "union");
  const auto w = nlohmann::json::parse(ReadAll(whole + "/manifest.json"));
  CHECK(w["schema"] == "walcut.restore-manifest/2");
  CHECK_FALSE(w.contains("subset"));
  // Read back.
  auto back = walcut::recovery::ReadOutputSubset(part);
  REQUIRE(back.ok());
  CHECK(*back == r->subset);
  auto none = walcut::recovery::ReadOutputSubset(whole);
  REQUIRE(none.ok());
  CHECK(none->whole());
  CHECK(walcut::recovery::RestoredBaseCut(part) == std::optional<uint64_t>(k));
  // The node files hold the subset, and their fingerprints cover it.
  for (const auto& n : r->nodes) CHECK(n.fingerprint == walfmt::StateFingerprint(n.state));
  // A damaged subset is refused, naming the manifest and the field; a
  // missing or mistyped field is never read as an empty list or 0.
  const std::vector<std::pair<std::function<void(nlohmann::json&)>, std::string>> damaged = {
      {[](nlohmann::json& j) {
         j["subset"]["partitions"] = nlohmann::json({11, 2});
       },
       "field 'subset': not a sorted, non-empty subset within the cluster's partitions"},
      {[](nlohmann::json& j) { j["subset"] = "acct/"; }, "field 'subset': expected an object, found \"acct/\""},
      {[](nlohmann::json& j) { j["subset"].erase("partitions"); }, "field 'subset.partitions': missing"},
      {[](nlohmann::json& j) { j["subset"].erase("key_prefixes"); }, "field 'subset.key_prefixes': missing"},
      {[](nlohmann::json& j) { j["subset"].erase("partition_count"); }, "field 'subset.partition_count': missing"},
      {[](nlohmann::json& j) { j["subset"]["partition_count"] = -12; },
       "field 'subset.partition_count': expected an unsigned integer, found -12"},
      {[](nlohmann::json& j) { j["subset"]["key_prefixes"][1] = 7; },
       "field 'subset.key_prefixes[1]': expected a string, found 7"},
      {[](nlohmann::json& j) { j["subset"]["partitions"][0] = 4294967298u; },
       "field 'subset.partitions[0]': 4294967298 is larger than the limit 4294967295"},
  };
  for (const auto& [edit, why] : damaged) {
    INFO(why);
    auto bad = m;
    edit(bad);
    walcut::recovery::testing::WriteAll(part + "/manifest.json", bad.dump());
    auto refused = walcut::recovery::ReadOutputSubset(part);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.status().code() == walfmt::ErrorCode::kCorruption);
    CHECK(refused.status().message() == part + "/manifest.json: " + why);
    CHECK_FALSE(walcut::recovery::RestoredBaseCut(part).has_value());
  }
}

TEST_CASE("a partial output serves as a base only for a restore of the same subset", "[recovery][restore][partial]") {
  const Cluster c = Load(Sample("healthy"));
  walcut::test::ScratchDir d("partial-base-rule");
  fs::create_directories(d.path);
  const uint64_t j = c.consistent.front(), k = c.consistent.back();
  const std::string part = (d.path / "part").string();
  const KeySubset sub{{"acct/0001"}, {3}, 0};
  REQUIRE(Run(c, j, "genesis", sub, part).ok());
  for (const KeySubset& other :
       {KeySubset{}, KeySubset{{"acct/0001"}, {}, 0}, KeySubset{{}, {3}, 0}, KeySubset{{"acct/0002"}, {3}, 0}}) {
    INFO(other.Describe());
    auto r = Run(c, k, part, other);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == walfmt::ErrorCode::kInvalidArgument);
    CHECK(r.status().message() ==
          fmt::format("base {} is a partial restore (keys acct/0001 or partition 3 (of 12)); it serves only a restore "
                      "of the same subset, not of {}",
                      part, [&] {
                        KeySubset s = other;
                        REQUIRE(walcut::recovery::ResolveSubset(s, 12, "x").ok());
                        return s.Describe();
                      }()));
  }
  // The same subset, given in another order, is the same subset.
  CHECK(Run(c, k, part, KeySubset{{"acct/0001", "acct/0001"}, {3, 3}, 0}).ok());
}

TEST_CASE("a subset the cluster cannot have is refused before anything is read", "[recovery][restore][partial]") {
  const Cluster c = Load(Sample("healthy"));
  const uint64_t k = c.consistent.front();
  auto refused = [&](const KeySubset& s) {
    auto r = Run(c, k, "genesis", s);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == walfmt::ErrorCode::kInvalidArgument);
    return r.status().message();
  };
  CHECK(refused({{""}, {}, 0}) == "--keys: an empty prefix names every key; give a prefix, or no --keys");
  CHECK(refused({{"acct/"}, {12}, 0}) == fmt::format("--partition 12: {} has partitions 0..11", c.dir));
  // A cluster without cluster.json has no partitions.
  walcut::test::ScratchDir d("partial-no-partitions");
  fs::create_directories(d.path);
  fs::copy(c.dir, d.path / "c", fs::copy_options::recursive);
  fs::remove(d.path / "c" / "cluster.json");
  const Cluster bare = [&] {
    Cluster b;
    b.dir = (d.path / "c").string();
    auto layout = walcut::cut::FindClusterLayout(b.dir);
    REQUIRE(layout.ok());
    b.layout = std::move(layout.value());
    b.cc = walcut::test::LoadCuts(b.dir);
    return b;
  }();
  RestoreRequest req;
  req.cluster_dir = bare.dir;
  req.cut = k;
  req.base = "genesis";
  req.dry_run = true;
  req.subset = {{}, {0}, 0};
  auto r = walcut::recovery::Restore(bare.cc, bare.layout, req);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message() ==
        fmt::format("--partition: {} has no partitions (no cluster.json says how keys map to them); use --keys",
                    bare.dir));
  req.subset = {{"acct/"}, {}, 0};  // a prefix needs no partitions
  CHECK(walcut::recovery::Restore(bare.cc, bare.layout, req).ok());
}
