// The Scanner's handlers of the records read in full (cut/scan_scanner.h):
// CUT_START, CUT_FINISH (with the resolution of its tracked transactions),
// CUT_ABORT, SNAPSHOT and NODE_START. A few per cut: nothing here is on the
// per-record path.
#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "cut/scan_scanner.h"

namespace walcut::cut::scan {

bool Scanner::VisitDecoded(const RecordView& v) {
  auto rec = walfmt::DecodePayload(v.type, v.payload);
  if (!rec.ok()) return Bad(v, rec.status().message());
  std::visit([&](const auto& r) { On(r, v.lsn); }, rec.value());
  return true;
}

int Scanner::FindIndex(uint64_t k) const {
  for (size_t i = s_.cuts.size(); i-- > 0;) {
    if (s_.cuts[i].cut_id == k) return static_cast<int>(i);
  }
  return -1;
}

void Scanner::CloseOpen() {
  open_ = -1;
  candidates_.clear();
  pending_.clear();
  pre_start_.clear();
  expect_before_.clear();
}

void Scanner::On(const walfmt::CutStart& cs, Lsn at) {
  if (open_ >= 0) {
    s_.cuts[open_].end = CutEnd::kSuperseded;
    CloseOpen();
  }
  if (FindIndex(cs.cut_id) >= 0 || (have_start_ && cs.cut_id <= last_start_)) {
    Add(Make(Check::kShape, cs.cut_id, at, nullptr,
             fmt::format("node {}: CUT_START({}) at {} after CUT_START({}): cut ids must increase", opt_.node,
                         cs.cut_id, at.ToString(), last_start_)));
    return;
  }
  if (!have_start_ && opt_.wal_after_genesis) RelabelPrunedPrefix(cs.cut_id);
  // Cuts this node skipped (it was down) can no longer be asked about.
  for (auto it = expect_after_.begin(); it != expect_after_.end();) {
    it = it->first < cs.cut_id ? expect_after_.erase(it) : std::next(it);
  }
  NodeCut nc;
  nc.cut_id = cs.cut_id;
  nc.started = true;
  nc.start = at;
  nc.start_time_us = cs.time_us;
  nc.commits_before_start = commits_so_far_;
  s_.cuts.push_back(std::move(nc));
  open_ = static_cast<int>(s_.cuts.size()) - 1;
  open_unclean_ = !clean_;
  candidates_.clear();
  window_.ForEach([&](const TxId& t, const Lsn&) { candidates_.insert(t); });
  // The commits just before CUT_START, oldest first so that the newest of
  // a transaction's wins: rule 5 lets some of them be tracked.
  pre_start_.clear();
  ring_.CopyTo(pre_start_);
  have_start_ = true;
  last_start_ = cs.cut_id;
  if (opt_.settle_cut != 0 && cs.cut_id > opt_.settle_cut && !past_settle_) {
    past_settle_ = true;
    until_settle_check_ = 1;  // checked right after this record
  }
}

void Scanner::FinishNotOpen(const walfmt::CutFinish& cf, Lsn at, int idx) {
  const uint64_t k = cf.cut_id;
  // Before the first CUT_START of a WAL that starts after genesis, the
  // cut's start was in a removed segment.
  const bool pruned = idx < 0 && !have_start_ && opt_.wal_after_genesis;
  std::string why = idx < 0 ? "without a CUT_START" : "after the cut had ended here";
  if (!pruned) {
    Add(Make(Check::kShape, k, at, nullptr,
             fmt::format("node {}: CUT_FINISH({}) at {} {}", opt_.node, k, at.ToString(), why)));
  }
  if (idx >= 0) return;
  NodeCut nc;
  nc.cut_id = k;
  nc.finished = true;
  nc.finish = at;
  nc.finish_time_us = cf.time_us;
  for (const auto& t : cf.before) {
    TrackedTx x;
    x.tx = t;
    nc.before.push_back(x);
  }
  for (const auto& t : cf.after) {
    TrackedTx x;
    x.tx = t;
    nc.after.push_back(x);
  }
  nc.end = CutEnd::kNotStarted;
  nc.evidence_pruned = pruned;
  s_.cuts.push_back(std::move(nc));
}

void Scanner::On(const walfmt::CutFinish& cf, Lsn at) {
  const uint64_t k = cf.cut_id;
  const int idx = FindIndex(k);
  if (idx < 0 || idx != open_) {
    FinishNotOpen(cf, at, idx);
    return;
  }
  NodeCut& nc = s_.cuts[idx];
  nc.finished = true;
  nc.finish = at;
  nc.finish_time_us = cf.time_us;
  nc.commits_before_finish = commits_so_far_;
  const TxSet before(cf.before.begin(), cf.before.end());
  const TxSet after(cf.after.begin(), cf.after.end());
  for (const auto& t : cf.before) {
    if (after.count(t)) {
      Add(Make(Check::kShape, k, at, &t,
               fmt::format("node {}: transaction {} is in both before({}) and after({}) of CUT_FINISH at {}", opt_.node,
                           t.ToString(), k, k, at.ToString())));
    }
  }
  for (int side = 0; side < 2; ++side) {
    const bool is_before = side == 0;
    const auto& list = is_before ? cf.before : cf.after;
    auto& out = is_before ? nc.before : nc.after;
    out.reserve(list.size());
    for (const auto& t : list) out.push_back(Resolve(nc, t, is_before, at));
  }
  CheckMarkersAtFinish(nc, before, after);
  nc.end = nc.aborts.empty() ? CutEnd::kFinished : CutEnd::kAborted;
  for (const auto& list : {&nc.before, &nc.after}) {
    for (const auto& t : *list) nc.evidence_pruned |= t.first_seen == kFirstSeenPruned;
  }
  // Every transaction prepared here before this cut's CUT_START was
  // tracked and has finished: from now on each one seen began in view.
  if (nc.end == CutEnd::kFinished) clean_ = true;
  CloseOpen();
}

void Scanner::CheckMarkersAtFinish(const NodeCut& nc, const TxSet& before, const TxSet& after) {
  const uint64_t k = nc.cut_id;
  for (const auto& [t, d] : expect_before_) {
    if (before.count(t)) continue;
    Add(Make(Check::kMarker, k, d.at, &t,
             fmt::format("node {}: transaction {} committed at {} after CUT_START({}) with marker {} < {} but is "
                         "not in before({}): the marker puts it in the cut, the WAL does not",
                         opt_.node, t.ToString(), d.at.ToString(), k, d.marker, k, k)));
  }
  if (auto ea = expect_after_.find(k); ea != expect_after_.end()) {
    for (const auto& [t, d] : ea->second) {
      if (after.count(t) || d.at > nc.start) continue;
      Add(Make(Check::kMarker, k, d.at, &t,
               fmt::format("node {}: transaction {} committed at {} before CUT_START({}) with marker {} >= {} but "
                           "is not in after({}): the WAL puts it in the cut, the marker does not",
                           opt_.node, t.ToString(), d.at.ToString(), k, d.marker, k, k)));
    }
    expect_after_.erase(ea);
  }
}

// The first CUT_START(c) of a WAL that starts after genesis: the commits
// before it were counted in bucket 1 (the node's cut was unknown); their
// first cut is at most c, which is all a check against a base at or after
// c needs, so they move to bucket c.
void Scanner::RelabelPrunedPrefix(uint64_t c) {
  digests_.Flush();
  if (c <= 1) return;
  digests_.Relabel(c);
  for (auto& e : ring_.Entries()) {
    if (e.f == 1) e.f = c;
  }
  for (auto& [t, f] : witness_) {
    if (f == 1) f = c;
  }
}

// Finds the outcome of tracked transaction t of cut nc on this node, checks
// it (shape, rollback, marker) and moves it to its right first-cut bucket.
TrackedTx Scanner::Resolve(const NodeCut& nc, const TxId& t, bool is_before, Lsn finish_at) {
  const uint64_t k = nc.cut_id;
  const char* set = is_before ? "before" : "after";
  TrackedTx out;
  out.tx = t;
  Done* d = nullptr;
  if (auto it = pending_.find(t); it != pending_.end()) {
    d = &it->second;
  } else if (auto it = pre_start_.find(t); it != pre_start_.end()) {
    d = &it->second;
  }
  if (!d && open_unclean_ && !window_.Find(t) && !candidates_.count(t)) {
    // Prepared before the first segment present: its records are gone.
    out.first_seen = kFirstSeenPruned;
    return out;
  }
  if (!d) {
    Unresolved(nc, t, set, finish_at);
    return out;
  }
  out.commit = d->at;
  out.first_seen = d->first_seen;
  out.time_us = d->time_us;
  out.recovered = d->recovered;
  if (d->rolled_back) {
    out.rolled_back = true;
    Add(Make(Check::kRollback, k, d->at, &t,
             fmt::format("node {}: transaction {} rolled back at {} but listed in {}({}) of CUT_FINISH at {}",
                         opt_.node, t.ToString(), d->at.ToString(), set, k, finish_at.ToString())));
    return out;
  }
  out.committed = true;
  out.marker = d->marker;
  const bool marker_in = d->marker < k;
  if (marker_in != is_before) {
    Finding f = Make(Check::kMarker, k, d->at, &t,
                     fmt::format("node {}: transaction {} is in {}({}) but its marker is {} ({} {}): the sets and "
                                 "the markers disagree",
                                 opt_.node, t.ToString(), set, k, d->marker, marker_in ? "<" : ">=", k));
    f.expected = is_before ? fmt::format("marker < {}", k) : fmt::format("marker >= {}", k);
    f.found = fmt::format("marker {}", d->marker);
    Add(std::move(f));
  }
  const bool after_start = d->at > nc.start;
  if (!is_before && d->f < k) {
    Add(Make(Check::kMonotonicity, k, d->at, &t,
             fmt::format("node {}: transaction {} (committed at {}) is in cut {} but in after({}): cut {} does not "
                         "contain cut {}",
                         opt_.node, t.ToString(), d->at.ToString(), d->f, k, k, d->f)));
  }
  if (is_before && after_start) MoveBucket(t, *d, k);
  if (!is_before && !after_start) MoveBucket(t, *d, k + 1);
  return out;
}

void Scanner::Unresolved(const NodeCut& nc, const TxId& t, const char* set, Lsn finish_at) {
  const uint64_t k = nc.cut_id;
  std::string why;
  if (window_.Find(t)) {
    why = fmt::format("has not finished on node {} when CUT_FINISH({}) is written at {}", opt_.node, k,
                      finish_at.ToString());
  } else if (!candidates_.count(t)) {
    why = fmt::format("was not prepared on node {} before CUT_START({}) at {}", opt_.node, k, nc.start.ToString());
  } else {
    why = fmt::format("has no TX_COMMIT or TX_ROLLBACK on node {} before CUT_FINISH({}) at {}", opt_.node, k,
                      finish_at.ToString());
  }
  Add(Make(Check::kShape, k, finish_at, &t,
           fmt::format("node {}: tracked transaction {} in {}({}) {}", opt_.node, t.ToString(), set, k, why)));
}

void Scanner::On(const walfmt::CutAbort& a, Lsn at) {
  int idx = FindIndex(a.cut_id);
  if (idx < 0) {
    NodeCut nc;
    nc.cut_id = a.cut_id;
    nc.end = CutEnd::kAborted;
    s_.cuts.push_back(std::move(nc));
    idx = static_cast<int>(s_.cuts.size()) - 1;
  }
  s_.cuts[idx].aborts.push_back(CutAbortMark{at, a.time_us, a.reason, a.detail});
  s_.cuts[idx].end = CutEnd::kAborted;
  if (idx == open_) CloseOpen();
}

void Scanner::On(const walfmt::Snapshot& sn, Lsn at) {
  SnapshotMark m{sn.name, at, sn.time_us, sn.fingerprint, {}, {}};
  digests_.Totals(m.committed_before, m.shared_before);
  s_.snapshots.push_back(std::move(m));
  if (opt_.witness_peer) {
    auto& w = s_.witness_at_snapshot.emplace_back();
    for (const auto& [t, f] : witness_) w.push_back(t);
    std::sort(w.begin(), w.end());
  }
  // Taken quiesced: nothing is in flight, so every transaction seen from
  // here on begins in view.
  clean_ = true;
}

void Scanner::On(const walfmt::NodeStart& n, Lsn at) {
  s_.starts.push_back(StartMark{n.incarnation, at, n.time_us});
  have_node_start_ = true;
  last_node_start_ = at;
  last_time_us_ = std::max(last_time_us_, n.time_us);
  if (open_ >= 0 && n.incarnation > 0) s_.cuts[open_].restarted = true;
}

}  // namespace walcut::cut::scan
