// `walcut history check` on a cluster directory (recovery/history.h): one
// pass over each node's WAL for the transactions, the cut scan for the cut
// records and the verdicts, and restores of the consistent cuts in memory.
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "cut/cuts.h"
#include "cut/load.h"
#include "recovery/history.h"
#include "recovery/restore.h"
#include "walfmt/cluster_layout.h"
#include "walfmt/reader.h"

namespace walcut::recovery {
using walfmt::Result;
using walfmt::Status;
using walfmt::TxId;

namespace {

using Named = std::unordered_set<TxId, walfmt::TxIdHash>;
using UnnamedWrites = std::map<TxId, std::map<std::string, walfmt::Write>>;

void NoteParticipants(NodeTx& t, const std::vector<uint32_t>& parts) {
  if (t.participants.empty()) t.participants = parts;
}

// One node's whole WAL: its transactions, and the TX_DATA of those the
// history does not know committed (`known`). A damaged WAL (a torn tail is not damage) fails.
Result<NodeTxs> ReadNodeTxs(const std::string& wal_dir, uint32_t node, const Named& known, UnnamedWrites& wal_writes) {
  std::string damage;
  auto sink = [&](const walfmt::Problem& p) {
    if (p.fatal && damage.empty()) damage = p.ToString();
  };
  auto segs = walfmt::ListSegments(wal_dir, sink);
  if (!segs.ok()) return segs.status();
  NodeTxs txs;
  Status bad;
  auto visit = [&](const walfmt::RecordView& rv) {
    const walfmt::RecordType type = rv.type;
    if (type != walfmt::RecordType::kTxData && type != walfmt::RecordType::kTxPrepare &&
        type != walfmt::RecordType::kTxCommit && type != walfmt::RecordType::kTxRollback) {
      return true;
    }
    auto rec = walfmt::DecodePayload(type, rv.payload);
    if (!rec.ok()) {
      bad = Status::Corruption(fmt::format("node {}: intact {} record at {} does not decode: {}", node,
                                           walfmt::RecordTypeName(type), rv.lsn.ToString(), rec.status().message()));
      return false;
    }
    auto touch = [&](const TxId& id) -> NodeTx& {
      auto [it, fresh] = txs.try_emplace(id);
      if (fresh) it->second.first = rv.lsn;
      return it->second;
    };
    if (const auto* d = std::get_if<walfmt::TxData>(&*rec)) {
      touch(d->tx);
      if (!known.count(d->tx)) {
        auto& w = wal_writes[d->tx];
        for (const auto& x : d->writes) w[x.key] = x;
      }
    } else if (const auto* p = std::get_if<walfmt::TxPrepare>(&*rec)) {
      NoteParticipants(touch(p->tx), p->participants);
    } else if (const auto* c = std::get_if<walfmt::TxCommit>(&*rec)) {
      NodeTx& t = touch(c->tx);
      if (!t.committed) {
        t.committed = true;
        t.commit = rv.lsn;
        t.commit_time_us = c->time_us;
      }
      NoteParticipants(t, c->participants);
    } else if (const auto* r = std::get_if<walfmt::TxRollback>(&*rec)) {
      NodeTx& t = touch(r->tx);
      t.rolled_back = true;
      NoteParticipants(t, r->participants);
    }
    return true;
  };
  walfmt::NodeReadOptions ro;
  ro.mode = walfmt::RecoveryMode::kTolerateTornTail;
  const walfmt::NodeRead read = walfmt::ReadNodeWal(*segs, ro, visit, sink);
  if (!bad.ok()) return bad;
  if (read.failed) {
    return Status::Corruption(fmt::format("node {}'s WAL is damaged: {}", node, damage.empty() ? "?" : damage));
  }
  return txs;
}

std::vector<CutFacts> CutFactsOf(const cut::ClusterCuts& cc) {
  std::vector<CutFacts> out;
  for (const auto& g : cc.cuts) {
    if (g.cut_id == 0) continue;
    CutFacts c;
    c.cut = g.cut_id;
    c.status = cut::CutStatusName(g.status);
    c.reason = g.reason;
    c.consistent = g.status == cut::CutStatus::kConsistent;
    for (size_t i = 0; c.consistent && i < g.nodes.size(); ++i) {
      const cut::NodeCut* n = g.nodes[i];
      if (n == nullptr || !n->started || !n->finished) {
        c.consistent = false;  // never for a consistent cut; refuse rather than guess
        c.nodes.clear();
        break;
      }
      CutNodeFacts f;
      f.start = n->start;
      f.start_time_us = n->start_time_us;
      f.finish = n->finish;
      f.finish_time_us = n->finish_time_us;
      for (const auto& t : n->before) f.before.insert(t.tx);
      for (const auto& t : n->after) f.after.insert(t.tx);
      c.nodes.push_back(std::move(f));
    }
    out.push_back(std::move(c));
  }
  return out;
}

Status RefusePruned(const walfmt::ClusterInfo& info, const cut::ClusterCuts& cc, const std::string& dir) {
  for (const auto& n : cc.nodes) {
    if (n.pruned) {
      return Status::InvalidArgument(
          fmt::format("{}: node {}'s WAL starts at segment {}, not at genesis (its oldest segments were removed): "
                      "history check needs every node's whole WAL",
                      dir, n.node, n.wal_start.segment));
    }
  }
  if (!info.wal_retention.empty()) {
    return Status::InvalidArgument(fmt::format(
        "{}: the cluster removes old WAL segments (wal_retention {}): history check needs every node's whole WAL", dir,
        info.wal_retention));
  }
  return Status::Ok();
}

}  // namespace

Result<HistoryReport> CheckClusterHistory(const std::string& cluster_dir, History history,
                                          const HistoryCheckOptions& opt) {
  auto layout = cut::FindClusterLayout(cluster_dir);
  if (!layout.ok()) return layout.status();
  if (!layout->has_cluster_json) {
    return Status::InvalidArgument(fmt::format("{}: no cluster.json: not a cluster made by walcut", cluster_dir));
  }
  auto info = walfmt::LoadClusterInfo(cluster_dir);
  if (!info.ok()) return info.status();
  if (!info->epoch_unix_us) {
    return Status::InvalidArgument(fmt::format(
        "{}: no epoch_unix_us: the WAL's times cannot be put on the clients' clock (cluster made by an older walcut)",
        info->origin));
  }
  auto sums = cut::ScanCluster(*layout, cut::LoadOptions{});
  if (!sums.ok()) return sums.status();
  for (const auto& s : *sums) {
    if (s.damaged) return Status::Corruption(fmt::format("node {}'s WAL is damaged: {}", s.node, s.damage));
  }
  auto cc = cut::Reconstruct(std::move(*sums));
  if (!cc.ok()) return cc.status();
  if (Status st = RefusePruned(*info, *cc, cluster_dir); !st.ok()) return st;

  HistoryCheckInput in;
  in.info = *info;
  Named known;  // acknowledged committed: the history has their writes
  for (const auto& h : history.txs) {
    if (h.tx && h.AcknowledgedCommitted()) known.insert(*h.tx);
  }
  for (uint32_t i = 0; i < layout->wal_dirs.size(); ++i) {
    auto txs = ReadNodeTxs(layout->wal_dirs[i], i, known, in.wal_writes);
    if (!txs.ok()) return txs.status();
    in.wal.push_back(std::move(*txs));
  }
  in.history = std::move(history);
  in.cuts = CutFactsOf(*cc);
  in.restore = [&](uint64_t k) -> Result<std::vector<NodeState>> {
    RestoreRequest req;
    req.cluster_dir = cluster_dir;
    req.cut = k;
    req.base = "genesis";
    req.keep_states = true;
    auto r = Restore(*cc, *layout, req);
    if (!r.ok()) return r.status();
    std::vector<NodeState> states;
    for (auto& n : r->nodes) states.push_back(std::move(n.state));
    return states;
  };
  return CheckHistory(in, opt);
}

}  // namespace walcut::recovery
