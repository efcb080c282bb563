// The order of an export's transactions (recovery/export.h,
// OrderTransactions): a topological order of the per-node commit orders when
// they agree, else of every key's writer order on its node.
//
// With 2PC, two transactions that share no key may commit in opposite
// orders on two nodes that both take part in them: then no order agrees
// with every node's commit order. What applying the writes in order needs
// is weaker: on every node, the writers of each key in their commit order
// there (the conflict order; under two-phase locking it has no cycle).
#include <algorithm>
#include <map>
#include <queue>
#include <string_view>

#include <fmt/format.h>

#include "recovery/export.h"

namespace walcut::recovery {
using walfmt::Lsn;
using walfmt::Status;

namespace {

// The transactions on each node, in commit order: (position, index).
using NodeOrder = std::map<uint32_t, std::vector<std::pair<Lsn, size_t>>>;

NodeOrder CommitOrders(const std::vector<ExportTx>& txs) {
  NodeOrder by_node;
  for (size_t i = 0; i < txs.size(); ++i) {
    for (const auto& [node, at] : txs[i].commits) by_node[node].emplace_back(at, i);
  }
  for (auto& [node, v] : by_node) std::sort(v.begin(), v.end());
  return by_node;
}

// Kahn's algorithm over `succ`; among the transactions ready, the one whose
// commit on its lowest node comes first, then the lower id. Fewer indexes
// than transactions: a cycle.
std::vector<size_t> TopoOrder(const std::vector<ExportTx>& txs, const std::vector<std::vector<size_t>>& succ) {
  const size_t n = txs.size();
  std::vector<size_t> indeg(n, 0);
  for (const auto& s : succ) {
    for (size_t b : s) ++indeg[b];
  }
  auto later = [&txs](size_t a, size_t b) {  // a comes after b
    const auto& ca = txs[a].commits.front();
    const auto& cb = txs[b].commits.front();
    if (ca != cb) return cb < ca;
    return txs[b].tx < txs[a].tx;
  };
  std::priority_queue<size_t, std::vector<size_t>, decltype(later)> ready(later);
  for (size_t i = 0; i < n; ++i) {
    if (indeg[i] == 0) ready.push(i);
  }
  std::vector<size_t> order;
  order.reserve(n);
  while (!ready.empty()) {
    const size_t a = ready.top();
    ready.pop();
    order.push_back(a);
    for (size_t b : succ[a]) {
      if (--indeg[b] == 0) ready.push(b);
    }
  }
  return order;
}

// Edges between consecutive commits on each node.
std::vector<std::vector<size_t>> CommitEdges(size_t n, const NodeOrder& by_node) {
  std::vector<std::vector<size_t>> succ(n);
  for (const auto& [node, v] : by_node) {
    for (size_t k = 1; k < v.size(); ++k) succ[v[k - 1].second].push_back(v[k].second);
  }
  return succ;
}

// Edges from each key's writer on a node to its next writer there.
std::vector<std::vector<size_t>> ConflictEdges(const std::vector<ExportTx>& txs, const NodeOrder& by_node) {
  std::vector<std::vector<size_t>> succ(txs.size());
  for (const auto& [node, v] : by_node) {
    std::map<std::string_view, size_t> last;
    for (const auto& [at, i] : v) {
      for (const auto& w : txs[i].writes) {
        if (w.node != node) continue;
        auto [it, fresh] = last.try_emplace(w.key, i);
        if (!fresh && it->second != i) {
          succ[it->second].push_back(i);
          it->second = i;
        }
      }
    }
  }
  return succ;
}

void Permute(std::vector<ExportTx>& txs, const std::vector<size_t>& order) {
  std::vector<ExportTx> out;
  out.reserve(txs.size());
  for (size_t i : order) out.push_back(std::move(txs[i]));
  txs = std::move(out);
}

}  // namespace

walfmt::Result<TxOrder> OrderTransactions(std::vector<ExportTx>& txs) {
  for (auto& t : txs) {
    if (t.commits.empty()) {
      return Status::InvalidArgument(fmt::format("transaction {} has no commit position", t.tx.Readable()));
    }
    std::sort(t.commits.begin(), t.commits.end());
  }
  const NodeOrder by_node = CommitOrders(txs);
  std::vector<size_t> order = TopoOrder(txs, CommitEdges(txs.size(), by_node));
  if (order.size() == txs.size()) {
    Permute(txs, order);
    return TxOrder::kCommit;
  }
  order = TopoOrder(txs, ConflictEdges(txs, by_node));
  if (order.size() == txs.size()) {
    Permute(txs, order);
    return TxOrder::kConflict;
  }
  std::vector<bool> placed(txs.size(), false);
  for (size_t i : order) placed[i] = true;
  std::vector<std::string> stuck;
  for (size_t i = 0; i < txs.size() && stuck.size() < 5; ++i) {
    if (!placed[i]) stuck.push_back(txs[i].tx.Readable());
  }
  return Status::Corruption(fmt::format(
      "the transactions' writes form a cycle: no order respects the commit order of every key's writers on its "
      "node ({} transactions in it or after it, among them {})",
      txs.size() - order.size(), fmt::join(stuck, ", ")));
}

}  // namespace walcut::recovery
