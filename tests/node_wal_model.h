// The WAL side of the node tests: reads what a simulated cluster wrote and
// computes, per node and cut, the membership of docs/cut-rule.md section 2 — with
// nothing from the simulator but the directory. The checks compare it with the
// simulator's in-memory history (the oracle). Until cut/ provides the real
// reconstruction, this small model is what the runtime is held to.
#pragma once

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "node/cluster.h"
#include "walfmt/reader.h"
#include "walfmt/record.h"
#include "walfmt/topology.h"

namespace walcut::node::testing {

using walfmt::TxId;

struct NodeLog {
  std::vector<walfmt::Record> recs;  // in WAL order
  std::vector<walfmt::Lsn> lsns;     // position of each
  std::vector<std::string> problems;
  bool failed = false;
};

inline NodeLog ReadNodeLog(const std::string& dir, uint32_t node) {
  NodeLog log;
  auto sink = [&](const walfmt::Problem& p) { log.problems.push_back(p.ToString()); };
  auto segs = walfmt::ListSegments(fmt::format("{}/node-{}/wal", dir, node), sink);
  if (!segs.ok()) {
    log.failed = true;
    log.problems.push_back(segs.status().message());
    return log;
  }
  walfmt::NodeReadOptions ro;
  ro.mode = walfmt::RecoveryMode::kTolerateTornTail;
  auto r = walfmt::ReadNodeWal(
      *segs, ro,
      [&](const walfmt::RecordView& v) {
        auto rec = walfmt::DecodePayload(v.type, v.payload);
        if (!rec.ok()) {
          log.problems.push_back(rec.status().message());
          return false;
        }
        log.recs.push_back(std::move(rec.value()));
        log.lsns.push_back(v.lsn);
        return true;
      },
      sink);
  log.failed = log.failed || r.failed;
  return log;
}

// One node's WAL, indexed. Positions are record indexes in WAL order (the
// order is all the rules need).
struct NodeView {
  std::map<TxId, size_t> commit_pos;
  std::map<TxId, uint64_t> marker;
  std::map<TxId, std::vector<walfmt::Write>> data;  // TX_DATA, by transaction
  std::map<TxId, size_t> first_seen;                // first TX_DATA / TX_PREPARE
  std::set<TxId> rolled_back;
  std::map<uint64_t, size_t> cut_start;
  std::map<uint64_t, size_t> cut_finish_pos;
  std::map<uint64_t, walfmt::CutFinish> cut_finish;
  std::set<uint64_t> cut_abort;
  uint64_t restarts = 0;            // NODE_START records after the first
  uint64_t recovered_commits = 0;   // TX_COMMIT with kTxFlagRecovered
  std::vector<std::string> errors;  // structural problems found while indexing
};

inline NodeView IndexLog(const NodeLog& log) {
  NodeView v;
  for (size_t i = 0; i < log.recs.size(); ++i) {
    const auto& r = log.recs[i];
    if (auto* d = std::get_if<walfmt::TxData>(&r)) {
      v.first_seen.emplace(d->tx, i);
      auto& w = v.data[d->tx];
      w.insert(w.end(), d->writes.begin(), d->writes.end());
    } else if (auto* p = std::get_if<walfmt::TxPrepare>(&r)) {
      v.first_seen.emplace(p->tx, i);
    } else if (auto* c = std::get_if<walfmt::TxCommit>(&r)) {
      if (!v.commit_pos.emplace(c->tx, i).second) v.errors.push_back("two commits of " + c->tx.ToString());
      v.marker[c->tx] = c->marker;
      if (c->flags & walfmt::kTxFlagRecovered) ++v.recovered_commits;
    } else if (auto* rb = std::get_if<walfmt::TxRollback>(&r)) {
      v.rolled_back.insert(rb->tx);
    } else if (auto* s = std::get_if<walfmt::CutStart>(&r)) {
      if (!v.cut_start.emplace(s->cut_id, i).second) v.errors.push_back(fmt::format("two CUT_START({})", s->cut_id));
    } else if (auto* f = std::get_if<walfmt::CutFinish>(&r)) {
      v.cut_finish_pos[f->cut_id] = i;
      v.cut_finish[f->cut_id] = *f;
    } else if (auto* a = std::get_if<walfmt::CutAbort>(&r)) {
      v.cut_abort.insert(a->cut_id);
    } else if (auto* n = std::get_if<walfmt::NodeStart>(&r)) {
      if (n->incarnation > 0) ++v.restarts;
    }
  }
  return v;
}

// docs/cut-rule.md section 2 with the genesis base: T is in cut k on this node iff
// p(T) < CUT_START(k) and T not in after, or p(T) > CUT_START(k) and T in before.
inline std::set<TxId> Members(const NodeView& v, uint64_t k) {
  std::set<TxId> out;
  const size_t start = v.cut_start.at(k);
  const auto& fin = v.cut_finish.at(k);
  const std::set<TxId> before(fin.before.begin(), fin.before.end());
  const std::set<TxId> after(fin.after.begin(), fin.after.end());
  for (const auto& [tx, pos] : v.commit_pos) {
    if ((pos < start && !after.count(tx)) || (pos > start && before.count(tx))) out.insert(tx);
  }
  return out;
}

// The wrong rule a naive tool would use: the WAL prefix up to CUT_START.
inline std::set<TxId> NaiveMembers(const NodeView& v, uint64_t k) {
  std::set<TxId> out;
  const size_t start = v.cut_start.at(k);
  for (const auto& [tx, pos] : v.commit_pos) {
    if (pos < start) out.insert(tx);
  }
  return out;
}

// Replays the node's WAL, applying the data of exactly `members` at their
// commit records, on top of `base`.
inline std::map<std::string, std::string> RestoreNode(const NodeView& v, const std::set<TxId>& members,
                                                      std::map<std::string, std::string> base = {}) {
  std::vector<std::pair<size_t, TxId>> order;
  for (const auto& tx : members) order.emplace_back(v.commit_pos.at(tx), tx);
  std::sort(order.begin(), order.end());
  std::map<std::string, std::string> state = std::move(base);
  for (const auto& [pos, tx] : order) {
    auto it = v.data.find(tx);
    if (it == v.data.end()) continue;
    for (const auto& w : it->second) {
      if (w.op == walfmt::WriteOp::kDelete)
        state.erase(w.key);
      else
        state[w.key] = w.value;
    }
  }
  return state;
}

struct ClusterCheck {
  std::vector<std::string> failures;  // empty: everything holds
  uint64_t consistent_cuts = 0;
  uint64_t inconsistent_cuts = 0;
  uint64_t restarts = 0;
  uint64_t recovered_commits = 0;
  uint64_t after_commit_before_start = 0;  // counted from the WAL
  uint64_t before_commit_after_start = 0;
  uint64_t naive_disagreements = 0;     // (node, cut) pairs where the naive rule differs from the marker
  uint64_t naive_invariant_breaks = 0;  // cuts where the naive rule breaks atomicity or a workload invariant
};

// Checks a finished run against docs/cut-rule.md section 2, invariants 1-4 and 6, and
// against the oracle. Failures are collected, not thrown, so the caller can
// print them with the seed.
inline ClusterCheck CheckCluster(const RunResult& run) {
  ClusterCheck out;
  auto fail = [&](std::string s) {
    if (out.failures.size() < 20) out.failures.push_back(std::move(s));
  };
  const ClusterOptions& opt = run.options;
  const walfmt::Topology topo(opt.nodes, opt.backups, opt.partitions);
  std::vector<NodeView> views;
  for (uint32_t n = 0; n < opt.nodes; ++n) {
    NodeLog log = ReadNodeLog(opt.dir, n);
    if (log.failed) fail(fmt::format("node {}: WAL read failed: {}", n, log.problems.empty() ? "" : log.problems[0]));
    views.push_back(IndexLog(log));
    for (const auto& e : views.back().errors) fail(fmt::format("node {}: {}", n, e));
  }

  // The oracle: committed transactions with their markers and participants.
  std::map<TxId, const CommittedTx*> truth;
  for (const auto& c : run.history.committed) truth[c.id] = &c;
  const std::set<TxId> rolled(run.history.rolled_back.begin(), run.history.rolled_back.end());

  // Every committed transaction is committed on each participant with its
  // marker; rolled-back ones are committed nowhere (invariant 4).
  for (const auto& [id, c] : truth) {
    for (uint32_t p : c->participants) {
      auto it = views[p].marker.find(id);
      if (it == views[p].marker.end()) {
        fail(
            fmt::format("tx {} committed (marker {}) but no TX_COMMIT on participant {}", id.ToString(), c->marker, p));
      } else if (it->second != c->marker) {
        fail(fmt::format("tx {}: node {} logged marker {}, decided {}", id.ToString(), p, it->second, c->marker));
      }
    }
    if (rolled.count(id)) fail(fmt::format("tx {} both committed and rolled back", id.ToString()));
  }
  for (uint32_t n = 0; n < opt.nodes; ++n) {
    for (const auto& [id, pos] : views[n].commit_pos) {
      if (!truth.count(id)) fail(fmt::format("node {}: TX_COMMIT of {} that never committed", n, id.ToString()));
      if (views[n].rolled_back.count(id)) fail(fmt::format("node {}: {} committed and rolled back", n, id.ToString()));
    }
  }

  // Cuts: those with CUT_FINISH on every node and CUT_ABORT on none are
  // consistent (invariant 5); the others are only counted.
  std::set<uint64_t> all_cuts;
  const bool faults = !opt.crashes.empty() || opt.random_crashes > 0;
  for (const auto& v : views) {
    for (const auto& [k, pos] : v.cut_start) all_cuts.insert(k);
    for (uint64_t k : v.cut_abort) all_cuts.insert(k);
    out.restarts += v.restarts;
    out.recovered_commits += v.recovered_commits;
  }
  // Rule-5 counts over every CUT_FINISH written (consistent cut or not).
  for (const auto& v : views) {
    for (const auto& [k, fin] : v.cut_finish) {
      auto st = v.cut_start.find(k);
      if (st == v.cut_start.end()) continue;
      for (const auto& t : fin.after) {
        auto cp = v.commit_pos.find(t);
        if (cp != v.commit_pos.end() && cp->second < st->second) ++out.after_commit_before_start;
      }
      for (const auto& t : fin.before) {
        auto cp = v.commit_pos.find(t);
        if (cp != v.commit_pos.end() && cp->second > st->second) ++out.before_commit_after_start;
      }
    }
  }
  std::vector<std::set<TxId>> prev(opt.nodes);
  bool have_prev = false;
  for (uint64_t k : all_cuts) {
    bool consistent = true;
    for (const auto& v : views) {
      consistent = consistent && v.cut_start.count(k) && v.cut_finish.count(k) && !v.cut_abort.count(k);
    }
    if (!consistent) {
      if (!faults) fail(fmt::format("cut {} is inconsistent in a fault-free run", k));
      ++out.inconsistent_cuts;
      continue;
    }
    ++out.consistent_cuts;
    std::vector<std::set<TxId>> members(opt.nodes);
    bool naive_breaks = false;
    std::map<TxId, std::set<uint32_t>> naive_in;  // tx -> participants that put it in the naive cut
    std::vector<std::map<std::string, std::string>> naive_state(opt.nodes);
    for (uint32_t n = 0; n < opt.nodes; ++n) {
      const NodeView& v = views[n];
      const size_t start = v.cut_start.at(k);
      const auto& fin = v.cut_finish.at(k);
      // Shape (invariant 3).
      if (v.cut_finish_pos.at(k) < start) fail(fmt::format("node {}: CUT_FINISH({}) before CUT_START", n, k));
      std::set<TxId> before(fin.before.begin(), fin.before.end());
      for (const auto& t : fin.after) {
        if (before.count(t)) fail(fmt::format("node {} cut {}: {} in before and after", n, k, t.ToString()));
      }
      for (const auto* list : {&fin.before, &fin.after}) {
        for (const auto& t : *list) {
          auto fs = v.first_seen.find(t);
          if (fs == v.first_seen.end() || fs->second > start) {
            fail(fmt::format("node {} cut {}: tracked {} not prepared before CUT_START", n, k, t.ToString()));
          }
          auto cp = v.commit_pos.find(t);
          if (cp == v.commit_pos.end()) {
            fail(fmt::format("node {} cut {}: tracked {} has no TX_COMMIT here", n, k, t.ToString()));
            continue;
          }
        }
      }
      members[n] = Members(v, k);
      // The marker cross-check against the oracle: T in cut k iff m(T) < k.
      std::set<TxId> expected;
      for (const auto& [id, c] : truth) {
        if (c->marker < k && std::binary_search(c->participants.begin(), c->participants.end(), n)) expected.insert(id);
      }
      if (members[n] != expected) {
        std::vector<std::string> diff;
        for (const auto& t : members[n]) {
          if (!expected.count(t))
            diff.push_back("+" + t.ToString() + " m=" + std::to_string(truth.count(t) ? truth[t]->marker : 0));
        }
        for (const auto& t : expected) {
          if (!members[n].count(t)) diff.push_back("-" + t.ToString() + " m=" + std::to_string(truth[t]->marker));
        }
        fail(fmt::format("node {} cut {}: WAL membership differs from markers: {}", n, k, fmt::join(diff, " ")));
      }
      // Monotonicity (invariant 2).
      if (have_prev && !std::includes(members[n].begin(), members[n].end(), prev[n].begin(), prev[n].end())) {
        fail(fmt::format("node {}: cut {} does not contain the previous cut", n, k));
      }
      const auto naive = NaiveMembers(v, k);
      if (naive != expected) ++out.naive_disagreements;
      for (const auto& t : naive) naive_in[t].insert(n);
      naive_state[n] = RestoreNode(v, naive);
    }
    // Atomicity (invariant 1): every participant puts T on the same side.
    for (const auto& [id, c] : truth) {
      size_t in = 0;
      for (uint32_t p : c->participants) in += members[p].count(id);
      if (in != 0 && in != c->participants.size()) {
        fail(fmt::format("cut {}: tx {} in the cut on {} of {} participants", k, id.ToString(), in,
                         c->participants.size()));
      }
      size_t naive = naive_in.count(id) ? naive_in[id].size() : 0;
      if (naive != 0 && naive != c->participants.size()) naive_breaks = true;
    }
    // Workload invariants (6) on the restored state; backups must agree with
    // their primaries.
    std::vector<std::map<std::string, std::string>> state(opt.nodes);
    for (uint32_t n = 0; n < opt.nodes; ++n) state[n] = RestoreNode(views[n], members[n]);
    auto global = [&](const std::vector<std::map<std::string, std::string>>& st, bool report) {
      std::map<std::string, std::string> g;
      for (uint32_t n = 0; n < opt.nodes; ++n) {
        for (const auto& [key, val] : st[n]) {
          if (!topo.Holds(n, key)) {
            if (report) fail(fmt::format("node {} cut {}: holds {} it should not", n, k, key));
            continue;
          }
          if (topo.PrimaryOf(key) == n) g[key] = val;
        }
      }
      for (uint32_t n = 0; n < opt.nodes; ++n) {
        for (const auto& [key, val] : g) {
          if (!topo.Holds(n, key)) continue;
          auto it = st[n].find(key);
          if (it == st[n].end() || it->second != val) {
            if (report)
              fail(fmt::format("node {} cut {}: copy of {} differs from the primary", n, k, key));
            else
              naive_breaks = true;
          }
        }
      }
      return g;
    };
    const auto g = global(state, true);
    if (auto e = CheckBank(g, opt.workload); !e.empty()) fail(fmt::format("cut {}: {}", k, e));
    if (auto e = CheckRing(g, opt.workload); !e.empty()) fail(fmt::format("cut {}: {}", k, e));
    const auto ng = global(naive_state, false);
    if (!CheckBank(ng, opt.workload).empty() || !CheckRing(ng, opt.workload).empty()) naive_breaks = true;
    if (naive_breaks) ++out.naive_invariant_breaks;
    prev = std::move(members);
    have_prev = true;
  }
  if (out.consistent_cuts != run.summary.cuts_consistent) {
    fail(fmt::format("{} consistent cuts in the WAL, the run reported {}", out.consistent_cuts,
                     run.summary.cuts_consistent));
  }
  if (out.restarts != run.summary.restarts) {
    fail(fmt::format("{} restarts in the WAL, the run reported {}", out.restarts, run.summary.restarts));
  }
  if (out.after_commit_before_start != run.summary.after_commit_before_start ||
      out.before_commit_after_start != run.summary.before_commit_after_start) {
    fail(fmt::format("rule-5 counts from the WAL ({}, {}) differ from the run's ({}, {})",
                     out.after_commit_before_start, out.before_commit_after_start,
                     run.summary.after_commit_before_start, run.summary.before_commit_after_start));
  }
  return out;
}

}  // namespace walcut::node::testing
