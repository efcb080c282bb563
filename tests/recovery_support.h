// Helpers for the recovery suites: a temporary directory, a small cluster
// from the node runtime with one full snapshot, and hand-made states placed
// on their nodes by the topology.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "node/cluster.h"
#include "recovery/invariants.h"
#include "recovery/state_set.h"
#include "scratch_dir.h"
#include "walfmt/cluster_layout.h"
#include "walfmt/workload.h"

namespace walcut::recovery::testing {

// ScratchDir, created.
struct TempDir : walcut::test::ScratchDir {
  explicit TempDir(const std::string& tag) : ScratchDir("rec-" + tag) { std::filesystem::create_directories(path); }
  std::string str() const { return path.string(); }
};

inline std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline void WriteAll(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << data;
}

// A cluster run by the node runtime into DIR/c, with one full snapshot.
struct SmallCluster {
  std::string dir;
  std::string snapshot_dir;
  node::RunResult run;
};

inline SmallCluster MakeSmallCluster(const std::string& parent, node::Workload w, uint64_t seed, uint32_t nodes = 3,
                                     uint32_t backups = 1) {
  node::ClusterOptions o;
  o.dir = parent + "/c";
  o.seed = seed;
  o.nodes = nodes;
  o.backups = backups;
  o.workload.workload = w;
  o.workload.accounts = 40;
  o.workload.ring = 40;
  o.txs = 300;
  o.cuts = 3;
  o.full_snapshot_at_tx = 150;
  o.segment_bytes = 64 * 1024;
  auto run = node::RunCluster(o);
  INFO(fmt::format("seed {}", seed));
  REQUIRE(run.ok());
  REQUIRE(run->snapshots.size() == 1);
  SmallCluster c;
  c.dir = o.dir;
  c.snapshot_dir = o.dir + "/snapshots/" + run->snapshots[0].name;
  c.run = std::move(run).value();
  return c;
}

// A cluster description made by hand: 3 nodes, 1 backup, 12 partitions,
// 10 accounts of 100, a ring of 8 keys.
inline walfmt::ClusterInfo HandInfo(uint32_t nodes = 3, uint32_t backups = 1) {
  walfmt::ClusterInfo ci;
  ci.origin = "hand-made";
  ci.cluster_id = 0xABCD;
  ci.nodes = nodes;
  ci.backups = backups;
  ci.partitions = 12;
  ci.workload = walfmt::Workload::kMixed;
  ci.accounts = 10;
  ci.ring_keys = 8;
  ci.initial_balance = 100;
  ci.initial_bank_total = 1000;
  for (uint32_t i = 0; i < nodes; ++i) ci.node_wal_dirs.push_back(fmt::format("node-{}/wal", i));
  return ci;
}

// The initial data of HandInfo: every account at 100, ring i -> i+1.
inline std::map<std::string, std::string> HandData(const walfmt::ClusterInfo& ci) {
  std::map<std::string, std::string> m;
  for (uint32_t i = 0; i < ci.accounts; ++i) m[AccountKey(i)] = std::to_string(ci.initial_balance);
  for (uint32_t i = 0; i < ci.ring_keys; ++i) m[RingKey(i)] = std::to_string((i + 1) % ci.ring_keys);
  return m;
}

// Every key on each node that holds it (primary and backups).
inline std::vector<NodeState> Place(const walfmt::ClusterInfo& ci, const std::map<std::string, std::string>& data) {
  std::vector<NodeState> v(ci.nodes);
  const walfmt::Topology topo = ci.topology();
  for (const auto& [k, val] : data) {
    for (uint32_t n = 0; n < ci.nodes; ++n) {
      if (topo.Holds(n, k)) v[n][k] = val;
    }
  }
  return v;
}

inline std::vector<const NodeState*> Ptrs(const std::vector<NodeState>& v) {
  std::vector<const NodeState*> p;
  for (const auto& s : v) p.push_back(&s);
  return p;
}

}  // namespace walcut::recovery::testing
