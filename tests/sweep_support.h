// What the seed sweeps of the node, recovery and repo suites share: the
// cluster shapes a seed picks, and the simulator's oracle, the state of a
// node at a cut from the in-memory history.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "node/cluster.h"
#include "walfmt/topology.h"

namespace walcut::test {

using State = std::map<std::string, std::string>;

// The restore sweep's shape of `seed`: 3 or 5 nodes, 0-2 backups, the bank,
// cycle or mixed workload (60 keys each), 240 transactions, 6 cuts, 16 KiB
// segments, and two random crashes on the seeds with (seed / 18) odd. The
// other sweeps start from it and change what they need.
inline node::ClusterOptions SweepShape(const std::string& dir, uint64_t seed) {
  node::ClusterOptions o;
  o.dir = dir;
  o.seed = seed;
  o.nodes = seed % 2 ? 3 : 5;
  o.backups = static_cast<uint32_t>((seed / 2) % 3);
  o.workload.workload = (seed / 6) % 3 == 0   ? node::Workload::kBank
                        : (seed / 6) % 3 == 1 ? node::Workload::kCycle
                                              : node::Workload::kMixed;
  o.workload.accounts = 60;
  o.workload.ring = 60;
  o.workload.max_transfer = 400;
  o.txs = 240;
  o.concurrency = 16;
  o.cuts = 6;
  o.cut_every = 30;
  o.segment_bytes = 16 * 1024;
  if ((seed / 18) % 2 == 1) o.random_crashes = 2;
  return o;
}

// The oracle's state of node n at cut k: its keys after the committed
// transactions with marker < k, in decision order.
inline State OracleState(const node::RunResult& run, const walfmt::Topology& topo, uint32_t n, uint64_t k) {
  State s;
  for (const auto& c : run.history.committed) {
    if (c.marker >= k) continue;
    for (const auto& w : c.writes) {
      if (!topo.Holds(n, w.key)) continue;
      if (w.op == walfmt::WriteOp::kDelete) {
        s.erase(w.key);
      } else {
        s[w.key] = w.value;
      }
    }
  }
  return s;
}

}  // namespace walcut::test
