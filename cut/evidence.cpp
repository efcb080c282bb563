#include "cut/evidence.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "cut/scan.h"

namespace walcut::cut {
namespace {

// The transactions node `s` shares with the peer it was scanned for that cut
// `g` holds there, beyond the cut's base: first cut f <= k, above the base
// cut, and not committed before the base snapshot's SNAPSHOT record.
std::vector<TxId> InCut(const NodeSummary& s, const GlobalCut& g) {
  const std::vector<TxId>* before_snapshot = nullptr;
  if (!g.base_snapshot.empty()) {
    for (size_t x = 0; x < s.snapshots.size() && x < s.witness_at_snapshot.size(); ++x) {
      if (s.snapshots[x].name == g.base_snapshot) before_snapshot = &s.witness_at_snapshot[x];
    }
  }
  std::vector<TxId> out;
  for (const auto& [t, f] : s.witness) {
    if (f > g.cut_id || (g.base_cut && f <= *g.base_cut)) continue;
    if (before_snapshot && std::binary_search(before_snapshot->begin(), before_snapshot->end(), t)) continue;
    out.push_back(t);
  }
  return out;  // sorted: witness is
}

// "0:17 (not committed on node 1), 0:23 (first in cut 9 on node 1)": what
// the other node holds of each transaction only one side has in the cut.
std::string Named(const std::vector<TxId>& v, const NodeSummary& other, size_t max_named) {
  std::string s;
  for (size_t i = 0; i < v.size() && i < max_named; ++i) {
    if (i) s += ", ";
    auto it = std::lower_bound(other.witness.begin(), other.witness.end(), v[i],
                               [](const std::pair<TxId, uint64_t>& e, const TxId& t) { return e.first < t; });
    if (it != other.witness.end() && it->first == v[i]) {
      s += fmt::format("{} (first in cut {} on node {})", v[i].Readable(), it->second, other.node);
    } else {
      s += fmt::format("{} (not committed on node {})", v[i].Readable(), other.node);
    }
  }
  if (v.size() > max_named) s += fmt::format(" and {} more", v.size() - max_named);
  return s;
}

}  // namespace

walfmt::Status NameDisagreements(ClusterCuts& cuts, const walfmt::ClusterLayout& layout, size_t max_named) {
  // (node, peer) -> that node's summary with the witness of that peer.
  std::map<std::pair<uint32_t, uint32_t>, NodeSummary> scans;
  auto witness = [&](uint32_t node, uint32_t peer) -> walfmt::Result<const NodeSummary*> {
    auto key = std::make_pair(node, peer);
    if (auto it = scans.find(key); it != scans.end()) return &it->second;
    if (node >= layout.wal_dirs.size()) {
      return walfmt::Status::InvalidArgument(fmt::format("node {} is not in the cluster layout", node));
    }
    ScanOptions so;
    so.node = node;
    so.expect_cluster = layout.has_cluster_json;
    so.cluster_id = layout.cluster_id;
    so.witness_peer = peer;
    auto s = ScanNode(layout.wal_dirs[node], so);
    if (!s.ok()) return s.status();
    return &scans.emplace(key, std::move(s.value())).first->second;
  };
  for (GlobalCut& g : cuts.cuts) {
    for (const auto& d : g.disagreements) {
      auto a = witness(d.a, d.b);
      if (!a.ok()) return a.status();
      auto b = witness(d.b, d.a);
      if (!b.ok()) return b.status();
      const std::vector<TxId> in_a = InCut(**a, g);
      const std::vector<TxId> in_b = InCut(**b, g);
      std::vector<TxId> only_a;
      std::vector<TxId> only_b;
      std::set_difference(in_a.begin(), in_a.end(), in_b.begin(), in_b.end(), std::back_inserter(only_a));
      std::set_difference(in_b.begin(), in_b.end(), in_a.begin(), in_a.end(), std::back_inserter(only_b));
      if (d.finding >= g.findings.size()) continue;
      Finding& f = g.findings[d.finding];
      std::string named;
      if (!only_a.empty()) {
        named += fmt::format("; in the cut on node {} only: {}", d.a, Named(only_a, **b, max_named));
      }
      if (!only_b.empty()) {
        named += fmt::format("; in the cut on node {} only: {}", d.b, Named(only_b, **a, max_named));
      }
      if (named.empty()) continue;                   // the rescan agrees: the WAL changed since the first scan
      const bool is_reason = g.reason == f.message;  // the cut's reason is its first finding's message
      f.message += named;
      f.has_tx = true;
      f.tx = !only_a.empty() ? only_a.front() : only_b.front();
      if (is_reason) g.reason = f.message;
    }
  }
  return walfmt::Status::Ok();
}

walfmt::Result<ClusterCuts> ReadCuts(const std::vector<std::string>& paths, const LoadOptions& lo,
                                     const ReconstructOptions& ro) {
  auto sums = LoadInputs(paths, lo);
  if (!sums.ok()) return sums.status();
  auto cuts = Reconstruct(std::move(sums.value()), ro);
  if (!cuts.ok()) return cuts;
  const bool disagree =
      std::any_of(cuts->cuts.begin(), cuts->cuts.end(), [](const GlobalCut& g) { return !g.disagreements.empty(); });
  std::error_code ec;
  if (disagree && paths.size() == 1 && std::filesystem::is_directory(paths[0], ec)) {
    auto layout = walfmt::FindClusterLayout(paths[0]);
    if (!layout.ok()) return layout.status();
    if (walfmt::Status st = NameDisagreements(*cuts, *layout); !st.ok()) return st;
  }
  return cuts;
}

}  // namespace walcut::cut
