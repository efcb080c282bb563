// The change set between two consistent cuts (recovery/export.h): the two
// passes over each node's WAL, the net change set, and the transactions
// merged over their nodes.
#include "recovery/export.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "recovery/restore_node.h"
#include "recovery/state_table.h"
#include "walfmt/cluster_layout.h"
#include "walfmt/workers.h"

namespace walcut::recovery {
using walfmt::Lsn;
using walfmt::Status;
using walfmt::TxId;

const char* TxOrderName(TxOrder o) { return o == TxOrder::kCommit ? "commit" : "conflict"; }

namespace {

using detail::NodeJob;
using detail::RuleOf;

// What pass 1 saw on one node.
struct NodeCollect {
  bool want_last = true;
  bool want_txs = false;
  bool drop_empty = false;  // with --keys: a transaction with no write of the subset is left out
  // Every key written, with its last value (nullopt: deleted).
  std::map<std::string, std::optional<std::string>, std::less<>> last;
  std::vector<ExportTx> txs;  // in commit order
  uint64_t writes = 0;

  void Observe(uint32_t node, const TxId& tx, Lsn commit, std::span<const walfmt::WriteView> ws) {
    writes += ws.size();
    if (want_last) {
      for (const auto& w : ws) {
        std::optional<std::string> v;
        if (w.op != walfmt::WriteOp::kDelete) v.emplace(w.value);
        auto it = last.find(w.key);
        if (it == last.end()) {
          last.emplace(std::string(w.key), std::move(v));
        } else {
          it->second = std::move(v);
        }
      }
    }
    if (want_txs && !(drop_empty && ws.empty())) {
      ExportTx& t = txs.emplace_back();
      t.tx = tx;
      t.commits.emplace_back(node, commit);
      t.writes.reserve(ws.size());
      for (const auto& w : ws) {
        t.writes.push_back(
            {node, w.op, std::string(w.key), w.op == walfmt::WriteOp::kDelete ? std::string() : std::string(w.value)});
      }
    }
  }
};

// The progress of the workers, summed.
struct ProgressSum {
  std::mutex mu;
  uint64_t total = 0;
  std::function<void(uint64_t)> sink;
  std::function<void(uint64_t)> Fn() {
    if (!sink) return {};
    return [this](uint64_t b) {
      std::lock_guard<std::mutex> lock(mu);
      total += b;
      sink(total);
    };
  }
};

// Runs the jobs on `jobs` workers (one per core when 0); the first failure
// by node wins.
Status RunJobs(std::vector<NodeJob>& js, unsigned jobs, const std::function<void(uint64_t)>& progress) {
  const size_t n = js.size();
  if (n == 0) return Status::Ok();
  std::atomic<size_t> next{0};
  std::vector<Status> status(n);
  auto work = [&] {
    StateTable state;
    for (size_t i; (i = next.fetch_add(1)) < n;) status[i] = detail::RunNode(js[i], false, progress, &state);
  };
  unsigned threads = jobs ? jobs : std::max(1u, std::thread::hardware_concurrency());
  walfmt::RunWorkers(static_cast<unsigned>(std::min<size_t>(threads, n)), work);
  for (const auto& st : status) {
    if (!st.ok()) return st;
  }
  return Status::Ok();
}

// Cut `k` (named `which`: "--from-cut", "--to-cut") is in the WAL and
// consistent, every node having started and finished it.
walfmt::Result<const cut::GlobalCut*> ConsistentCut(const cut::ClusterCuts& cc, uint64_t k, const char* which,
                                                    bool attested = false) {
  const cut::GlobalCut* g = cc.Find(k);
  if (!g) return Status::NotFound(fmt::format("{} {}: cut {} is not in the WAL", which, k, k));
  const bool serves = g->status == cut::CutStatus::kConsistent ||
                      (attested && g->status == cut::CutStatus::kUnavailable && cc.EvidenceComplete(*g));
  if (!serves) {
    return Status::InvalidArgument(fmt::format("{} {}: cut {} is {}: {}; a change set needs two consistent cuts", which,
                                               k, k, cut::CutStatusName(g->status), g->reason));
  }
  for (size_t i = 0; i < cc.nodes.size(); ++i) {
    if (i >= g->nodes.size() || !g->nodes[i] || !g->nodes[i]->started || !g->nodes[i]->finished) {
      return Status::InvalidArgument(fmt::format("{} {}: cut {} has no CUT_FINISH on node {}", which, k, k, i));
    }
  }
  return g;
}

// The request checked: the cuts, the node, the subset.
Status CheckRequest(const cut::ClusterCuts& cc, const cut::ClusterLayout& layout, const ExportRequest& req,
                    ExportResult& r, const cut::GlobalCut*& ga, const cut::GlobalCut*& gb) {
  if (req.from_cut > req.to_cut) {
    return Status::InvalidArgument(
        fmt::format("--from-cut {} is after --to-cut {}: the change set runs from the "
                    "earlier cut to the later one",
                    req.from_cut, req.to_cut));
  }
  auto b = ConsistentCut(cc, req.to_cut, "--to-cut");
  if (!b.ok()) return b.status();
  gb = *b;
  ga = nullptr;
  if (req.from_cut > 0) {
    auto a = ConsistentCut(cc, req.from_cut, "--from-cut", req.from_attested);
    if (!a.ok()) return a.status();
    ga = *a;
  }
  if (layout.wal_dirs.size() != cc.nodes.size()) {
    return Status::InvalidArgument(
        fmt::format("{} nodes in {}, {} summaries", layout.wal_dirs.size(), layout.dir, cc.nodes.size()));
  }
  if (req.node && *req.node >= cc.nodes.size()) {
    return Status::InvalidArgument(
        fmt::format("--node {}: {} has nodes 0..{}", *req.node, layout.dir, cc.nodes.size() - 1));
  }
  r.subset = req.subset;
  uint32_t partitions = 0;
  if (!r.subset.partitions.empty() && layout.has_cluster_json) {
    auto ci = walfmt::LoadClusterInfo(layout.dir);
    if (!ci.ok()) return ci.status();
    partitions = ci->partitions;
  }
  return ResolveSubset(r.subset, partitions, layout.dir);
}

std::vector<uint32_t> NodesOf(const cut::ClusterCuts& cc, const ExportRequest& req) {
  if (req.node) return {*req.node};
  std::vector<uint32_t> v;
  for (uint32_t i = 0; i < cc.nodes.size(); ++i) v.push_back(i);
  return v;
}

// Pass 1's jobs: node i from cut A's continue-from position (genesis: the
// WAL's start) to CUT_FINISH_i(B), observed into `collect[k]`.
walfmt::Result<std::vector<NodeJob>> PlanPass1(const cut::ClusterCuts& cc, const cut::ClusterLayout& layout,
                                               const ExportRequest& req, const ExportResult& r,
                                               const cut::GlobalCut* ga, const cut::GlobalCut& gb,
                                               const std::vector<uint32_t>& nodes, std::vector<NodeCollect>& collect) {
  std::vector<NodeJob> js(nodes.size());
  for (size_t x = 0; x < nodes.size(); ++x) {
    const uint32_t i = nodes[x];
    NodeJob& job = js[x];
    job.node = i;
    job.wal_dir = layout.wal_dirs[i];
    job.k = RuleOf(*gb.nodes[i]);
    if (ga) job.j = RuleOf(*ga->nodes[i]);
    job.out.node = i;
    job.out.from = ga ? ga->nodes[i]->ContinueFrom() : Lsn{};
    job.out.to = gb.nodes[i]->finish;
    const cut::NodeSummary& s = cc.nodes[i];
    if (s.pruned && job.out.from < s.wal_start) {
      return Status::InvalidArgument(
          fmt::format("node {}: the change set from {} is read from {} in node {}'s WAL, but that WAL now starts at {} "
                      "(segments before it were removed); export from a later cut, or from a repository",
                      i, ga ? fmt::format("cut {}", req.from_cut) : std::string("genesis"), job.out.from.ToString(), i,
                      s.wal_start.ToString()));
    }
    job.filter = KeyFilter(r.subset);
    collect[x].want_last = true;  // keys_written, and the net change set
    collect[x].want_txs = req.by_transaction;
    collect[x].drop_empty = !r.subset.whole();
    NodeCollect* c = &collect[x];
    job.on_apply = [c, i](const TxId& t, Lsn at, std::span<const walfmt::WriteView> ws) { c->Observe(i, t, at, ws); };
  }
  return js;
}

// Pass 2: the values at cut A of the keys pass 1 wrote, node by node, from
// the base a restore of A would choose. Fills r.base_a and `old_values[x]`.
Status Pass2(const cut::ClusterCuts& cc, const cut::ClusterLayout& layout, const ExportRequest& req,
             const cut::GlobalCut& ga, const std::vector<uint32_t>& nodes, const std::vector<NodeCollect>& collect,
             const std::function<void(uint64_t)>& progress, ExportResult& r,
             std::vector<std::map<std::string, std::string>>& old_values) {
  auto choice = ChooseBase(cc, layout, req.from_cut);
  if (!choice.ok()) return choice.status();
  RestoreRequest rr;
  rr.cluster_dir = layout.dir;
  rr.cut = req.from_cut;
  rr.base = choice->base;
  std::vector<detail::BaseFile> files;
  std::vector<std::optional<detail::CutRule>> rules;
  auto base = detail::ResolveBase(cc, layout, rr, KeySubset{}, files, rules);
  if (!base.ok()) return base.status();
  r.base_a = std::move(base.value());
  r.base_why = choice->why;
  std::vector<NodeJob> js;
  std::vector<size_t> slot;  // js[k] is nodes[slot[k]]
  for (size_t x = 0; x < nodes.size(); ++x) {
    if (collect[x].last.empty()) continue;
    const uint32_t i = nodes[x];
    NodeJob& job = js.emplace_back();
    slot.push_back(x);
    job.node = i;
    job.wal_dir = layout.wal_dirs[i];
    job.k = RuleOf(*ga.nodes[i]);
    job.j = rules[i];
    job.base_file = files[i].path;
    job.base_fingerprint = files[i].fingerprint;
    job.keep_state = true;
    job.out.node = i;
    job.out.from = r.base_a.position[i];
    job.out.to = ga.nodes[i]->finish;
    job.out.base_entries = files[i].entries;
    const auto* keys = &collect[x].last;
    job.filter = KeyFilter::Only([keys](std::string_view k) { return keys->find(k) != keys->end(); });
  }
  if (Status st = RunJobs(js, req.jobs, progress); !st.ok()) return st;
  for (size_t k = 0; k < js.size(); ++k) {
    old_values[slot[k]] = std::move(js[k].out.state);
    r.nodes[slot[k]].bytes_read += js[k].out.bytes_to_read;
  }
  return Status::Ok();
}

// The net change set of one node: the keys written whose value at A and at B
// differ, in key order.
std::vector<KeyChange> NetChanges(const NodeCollect& c, const std::map<std::string, std::string>& old_values) {
  std::vector<KeyChange> out;
  for (const auto& [key, now] : c.last) {
    std::optional<std::string> was;
    if (auto it = old_values.find(key); it != old_values.end()) was = it->second;
    if (was == now) continue;
    out.push_back({key, std::move(was), now});
  }
  return out;
}

// The transactions of every node merged by id: one ExportTx each, its
// commits and writes by node.
std::vector<ExportTx> MergeTxs(std::vector<NodeCollect>& collect) {
  std::map<TxId, ExportTx> by_id;
  for (auto& c : collect) {
    for (auto& t : c.txs) {
      auto [it, fresh] = by_id.try_emplace(t.tx);
      if (fresh) {
        it->second = std::move(t);
        continue;
      }
      ExportTx& m = it->second;
      m.commits.insert(m.commits.end(), t.commits.begin(), t.commits.end());
      m.writes.insert(m.writes.end(), std::make_move_iterator(t.writes.begin()),
                      std::make_move_iterator(t.writes.end()));
    }
    c.txs.clear();
  }
  std::vector<ExportTx> v;
  v.reserve(by_id.size());
  for (auto& [id, t] : by_id) {
    std::stable_sort(t.writes.begin(), t.writes.end(),
                     [](const TxWrite& a, const TxWrite& b) { return a.node < b.node; });
    std::sort(t.commits.begin(), t.commits.end());
    v.push_back(std::move(t));
  }
  return v;
}

}  // namespace

walfmt::Result<ExportResult> Export(const cut::ClusterCuts& cc, const cut::ClusterLayout& layout,
                                    const ExportRequest& req) {
  ExportResult r;
  r.from_cut = req.from_cut;
  r.to_cut = req.to_cut;
  r.base_a.name = "genesis";
  const cut::GlobalCut* ga = nullptr;
  const cut::GlobalCut* gb = nullptr;
  if (Status st = CheckRequest(cc, layout, req, r, ga, gb); !st.ok()) return st;
  const std::vector<uint32_t> nodes = NodesOf(cc, req);
  for (uint32_t i : nodes) {
    NodeExport& ne = r.nodes.emplace_back();
    ne.node = i;
    ne.from = ga ? ga->nodes[i]->ContinueFrom() : Lsn{};
    ne.to = gb->nodes[i]->finish;
  }
  if (req.from_cut == req.to_cut) return r;  // the empty change set
  ProgressSum progress;
  progress.sink = req.progress;
  const auto progress_fn = progress.Fn();
  std::vector<NodeCollect> collect(nodes.size());
  auto js = PlanPass1(cc, layout, req, r, ga, *gb, nodes, collect);
  if (!js.ok()) return js.status();
  if (Status st = RunJobs(*js, req.jobs, progress_fn); !st.ok()) return st;
  for (size_t x = 0; x < nodes.size(); ++x) {
    NodeExport& ne = r.nodes[x];
    ne.txs = (*js)[x].out.txs_applied;
    ne.writes = collect[x].writes;
    ne.keys_written = collect[x].last.size();
    ne.bytes_read = (*js)[x].out.bytes_to_read;
    if (req.keep_written) ne.written = req.net ? collect[x].last : std::move(collect[x].last);
  }
  if (req.net) {
    std::vector<std::map<std::string, std::string>> old_values(nodes.size());
    if (ga) {
      if (Status st = Pass2(cc, layout, req, *ga, nodes, collect, progress_fn, r, old_values); !st.ok()) return st;
    }
    for (size_t x = 0; x < nodes.size(); ++x) {
      r.nodes[x].changes = NetChanges(collect[x], old_values[x]);
      collect[x].last.clear();
    }
  }
  for (const auto& ne : r.nodes) r.bytes_read += ne.bytes_read;
  if (req.by_transaction) {
    r.txs = MergeTxs(collect);
    auto order = OrderTransactions(r.txs);
    if (!order.ok()) return order.status();
    r.order = *order;
  }
  return r;
}

}  // namespace walcut::recovery
