#include "cut/cuts.h"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

namespace walcut::cut {
namespace {

// Transactions with first cut <= k: prefix sums over the buckets.
FirstCutCount CountUpTo(const std::map<uint64_t, FirstCutCount>& m, uint64_t k) {
  FirstCutCount out;
  for (auto it = m.begin(); it != m.end() && it->first <= k; ++it) {
    out.count += it->second.count;
    out.owned += it->second.owned;
  }
  return out;
}

TxDigest DigestUpTo(const NodeSummary& s, uint32_t peer, uint64_t k) {
  TxDigest out;
  auto it = s.shared.find(peer);
  if (it == s.shared.end()) return out;
  for (auto b = it->second.begin(); b != it->second.end() && b->first <= k; ++b) {
    out.x ^= b->second.x;
    out.n += b->second.n;
  }
  return out;
}

std::string WalEnd(const NodeSummary& s) {
  if (s.damaged) return fmt::format("its WAL is damaged at {}, nothing after it is readable", s.damage_at.ToString());
  if (s.torn_tail) return fmt::format("whose WAL ends in a torn record at {}", s.torn_at.ToString());
  return fmt::format("whose WAL ends at {}", s.end.ToString());
}

// The flag of CutChecks a finding fails (none for a finding about the WAL).
void SetCheck(CutChecks& c, Check check) {
  switch (check) {
    case Check::kAtomicity:
      c.atomicity = false;
      break;
    case Check::kMonotonicity:
      c.monotonicity = false;
      break;
    case Check::kShape:
      c.shape = false;
      break;
    case Check::kRollback:
      c.rollback = false;
      break;
    case Check::kMarker:
      c.markers = false;
      break;
    case Check::kCompleteness:
      c.completeness = false;
      break;
    case Check::kWal:
      break;
  }
}

}  // namespace

const char* CheckName(Check c) {
  switch (c) {
    case Check::kWal:
      return "wal";
    case Check::kShape:
      return "shape";
    case Check::kMarker:
      return "marker";
    case Check::kRollback:
      return "rollback";
    case Check::kAtomicity:
      return "atomicity";
    case Check::kMonotonicity:
      return "monotonicity";
    case Check::kCompleteness:
      return "completeness";
  }
  return "unknown";
}

std::optional<Check> ParseCheck(std::string_view name) {
  for (Check c : {Check::kWal, Check::kShape, Check::kMarker, Check::kRollback, Check::kAtomicity, Check::kMonotonicity,
                  Check::kCompleteness}) {
    if (name == CheckName(c)) return c;
  }
  return std::nullopt;
}

const char* CutStatusName(CutStatus s) {
  switch (s) {
    case CutStatus::kConsistent:
      return "consistent";
    case CutStatus::kInconsistent:
      return "inconsistent";
    case CutStatus::kIncomplete:
      return "incomplete";
    case CutStatus::kUnavailable:
      return "unavailable";
  }
  return "unknown";
}

const GlobalCut* ClusterCuts::Find(uint64_t k) const {
  for (const auto& c : cuts) {
    if (c.cut_id == k) return &c;
  }
  return nullptr;
}

bool ClusterCuts::EvidenceComplete(const GlobalCut& g) const {
  for (const NodeCut* nc : g.nodes) {
    if (!nc || !nc->started || !nc->finished || nc->evidence_pruned || !nc->aborts.empty() || nc->restarted) {
      return false;
    }
  }
  return !g.nodes.empty();
}

const SnapshotUse* ClusterCuts::FindSnapshot(std::string_view name) const {
  for (const auto& s : snapshots) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

const GlobalCut* ClusterCuts::LatestBefore(uint64_t time_us) const {
  const GlobalCut* best = nullptr;
  for (const auto& c : cuts) {
    if (c.status == CutStatus::kConsistent && c.finish_time_us < time_us) best = &c;
  }
  return best;
}

namespace {

// Why a cut is not consistent, by kind; the first reason of each kind is
// the one reported.
struct Reasons {
  std::string inconsistent;
  std::string unavailable;
  std::string incomplete;
  static void Note(std::string& slot, std::string text) {
    if (slot.empty()) slot = std::move(text);
  }
};

// What the cross-node digests of one cut are compared against: genesis (no
// cut, no snapshot), an earlier cut, or a full snapshot (an index into the
// snapshots); not comparable when neither is in every node's WAL.
struct DigestBase {
  const GlobalCut* cut = nullptr;
  int snapshot = -1;
  bool comparable = true;
};

// Summaries in node order, checked to be nodes 0..N-1 of one cluster.
walfmt::Status CheckNodes(std::vector<NodeSummary>& nodes) {
  std::sort(nodes.begin(), nodes.end(), [](const NodeSummary& a, const NodeSummary& b) { return a.node < b.node; });
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].node != i) {
      return walfmt::Status::InvalidArgument(
          i > 0 && nodes[i].node == nodes[i - 1].node
              ? fmt::format("two summaries of node {}", nodes[i].node)
              : fmt::format("no summary of node {} (the nodes must be numbered 0..{})", i, nodes.size() - 1));
    }
    if (nodes[i].cluster_known && nodes[0].cluster_known && nodes[i].cluster_id != nodes[0].cluster_id) {
      return walfmt::Status::InvalidArgument(fmt::format("node {} belongs to cluster {:016x}, node 0 to {:016x}", i,
                                                         nodes[i].cluster_id, nodes[0].cluster_id));
    }
    if (nodes[i].epoch_unix_us && nodes[0].epoch_unix_us && *nodes[i].epoch_unix_us != *nodes[0].epoch_unix_us) {
      return walfmt::Status::InvalidArgument(fmt::format("node {} records the cluster epoch {}, node 0 {}", i,
                                                         *nodes[i].epoch_unix_us, *nodes[0].epoch_unix_us));
    }
  }
  if (nodes.empty()) return walfmt::Status::InvalidArgument("no nodes");
  return walfmt::Status::Ok();
}

// Reconstruct in named steps, over the summaries in `out.nodes`.
class Reconstruction {
 public:
  Reconstruction(ClusterCuts& out, const ReconstructOptions& opt)
      : out_(out), ns_(out.nodes), n_(static_cast<uint32_t>(out.nodes.size())), opt_(opt) {}

  void Run() {
    for (const auto& s : ns_) out_.pruned |= s.pruned;
    SnapshotUses();
    // Findings not tied to a cut: kept globally; a transaction finding also
    // fails the cuts whose CUT_START on that node follows it (they contain it).
    for (const auto& s : ns_) {
      for (const auto& f : s.findings) {
        if (f.cut == 0) out_.findings.push_back(f);
      }
    }
    std::set<uint64_t> ids;
    for (const auto& s : ns_) {
      for (const auto& c : s.cuts) ids.insert(c.cut_id);
    }
    for (uint64_t k : ids) out_.cuts.push_back(Cut(k));
    NearestConsistent();
    SnapshotServes();
    Window();
  }

 private:
  // The full snapshots whose SNAPSHOT record every node's WAL still holds.
  void SnapshotUses() {
    std::vector<std::string> snapshot_names;
    for (const auto& s : ns_) {
      for (const auto& m : s.snapshots) {
        if (std::find(snapshot_names.begin(), snapshot_names.end(), m.name) == snapshot_names.end()) {
          snapshot_names.push_back(m.name);
        }
      }
    }
    for (const auto& name : snapshot_names) {
      SnapshotUse u;
      u.name = name;
      std::vector<const SnapshotMark*> marks(n_, nullptr);
      for (uint32_t i = 0; i < n_; ++i) {
        for (const auto& m : ns_[i].snapshots) {
          if (m.name == name) marks[i] = &m;
        }
        if (marks[i]) {
          u.time_us = std::max(u.time_us, marks[i]->time_us);
        } else if (u.why.empty()) {
          u.why = ns_[i].pruned ? fmt::format(
                                      "node {}'s WAL starts at {} (segments before it were removed), after its "
                                      "SNAPSHOT({}) record",
                                      i, ns_[i].wal_start.ToString(), name)
                                : fmt::format("node {}'s WAL has no SNAPSHOT({}) record", i, name);
        }
      }
      u.usable = u.why.empty();
      if (u.usable) {
        for (const auto* m : marks) u.at.push_back(m->at);
      }
      out_.snapshots.push_back(std::move(u));
      marks_.push_back(std::move(marks));
    }
  }

  // Cut k: what each node holds of it, the checks across nodes, its status.
  GlobalCut Cut(uint64_t k) {
    GlobalCut g;
    g.cut_id = k;
    g.nodes.assign(n_, nullptr);
    g.node_transactions.assign(n_, 0);
    Reasons r;
    NodeFacts(g, r);
    SetAtomicity(g);
    const DigestBase b = ChooseDigestBase(g, r);
    DigestAtomicity(g, b);
    Conclude(g, r);
    return g;
  }

  // Per node: its record of the cut, the findings that concern it, its
  // counts; whether its evidence was removed (unavailable) and whether it
  // finished the cut (completeness, check 5).
  void NodeFacts(GlobalCut& g, Reasons& r) const {
    const uint64_t k = g.cut_id;
    // The earliest CUT_START(k) anywhere: a pruned node without any record
    // of k whose first segment was created after it lost k's start.
    uint64_t first_start_us = UINT64_MAX;
    for (const auto& s : ns_) {
      if (const NodeCut* nc = s.FindCut(k); nc && nc->started)
        first_start_us = std::min(first_start_us, nc->start_time_us);
    }
    for (uint32_t i = 0; i < n_; ++i) {
      const NodeSummary& s = ns_[i];
      const NodeCut* nc = s.FindCut(k);
      g.nodes[i] = nc;
      for (const auto& f : s.findings) {
        if (f.cut == k) {
          g.findings.push_back(f);
        } else if (f.cut == 0 && f.has_tx && nc && nc->started && f.position < nc->start) {
          g.findings.push_back(f);
        }
      }
      const FirstCutCount c = CountUpTo(s.first_cut, k);
      g.node_transactions[i] = c.count;
      g.transactions += c.owned;
      if (nc) {
        if (nc->started)
          g.start_time_us = g.start_time_us == 0 ? nc->start_time_us : std::min(g.start_time_us, nc->start_time_us);
        if (nc->finished) g.finish_time_us = std::max(g.finish_time_us, nc->finish_time_us);
        g.before += nc->before.size();
        g.after += nc->after.size();
        for (const auto& t : nc->before) g.before_after_start += t.committed && nc->started && t.commit > nc->start;
        for (const auto& t : nc->after) g.after_before_start += t.committed && nc->started && t.commit < nc->start;
      }
      // Evidence in removed segments: the cut is unavailable here, which
      // says nothing about whether it was consistent.
      const bool present_trouble = nc && (!nc->aborts.empty() || nc->restarted);
      if (s.pruned && !present_trouble &&
          ((nc && nc->evidence_pruned) ||
           (!nc && ((!s.cuts.empty() && s.cuts.front().cut_id > k) || first_start_us < s.wal_start_time_us)))) {
        Reasons::Note(
            r.unavailable,
            nc && nc->started
                ? fmt::format("node {}'s WAL starts at {} (segments before it were removed); a transaction that cut "
                              "{} tracks there began before it",
                              i, s.wal_start.ToString(), k)
                : fmt::format("node {}'s WAL starts at {} (segments before it were removed); cut {} started before it",
                              i, s.wal_start.ToString(), k));
        continue;
      }
      // Completeness (rule 6 / check 5).
      if (nc && nc->started && nc->finished && nc->aborts.empty() && !nc->restarted) continue;
      bool failure = true;
      Finding f = Unfinished(s, nc, i, k, failure);
      Reasons::Note(failure ? r.inconsistent : r.incomplete, f.message);
      g.findings.push_back(std::move(f));
    }
  }

  // Why node i did not finish cut k (completeness, check 5), as a finding;
  // `failure` false when the WAL merely ends first (incomplete, not
  // inconsistent).
  static Finding Unfinished(const NodeSummary& s, const NodeCut* nc, uint32_t i, uint64_t k, bool& failure) {
    Finding f;
    f.check = Check::kCompleteness;
    f.node = i;
    f.cut = k;
    if (nc && !nc->aborts.empty()) {
      const auto& a = nc->aborts.front();
      f.has_position = true;
      f.position = a.at;
      f.message = fmt::format("CUT_ABORT({}) on node {} at {}: {}{}{}", k, i, a.at.ToString(),
                              walfmt::CutAbortReasonName(a.reason), a.detail.empty() ? "" : ": ", a.detail);
    } else if (nc && nc->restarted) {
      Lsn at = nc->start;
      for (const auto& st : s.starts) {
        if (st.at > nc->start) {
          at = st.at;
          break;
        }
      }
      f.has_position = true;
      f.position = at;
      f.message = fmt::format("node {} restarted during cut {} (NODE_START at {})", i, k, at.ToString());
    } else if (nc && nc->end == CutEnd::kSuperseded) {
      f.has_position = true;
      f.position = nc->start;
      f.message = fmt::format("node {} started cut {} at {} but a later CUT_START came before its CUT_FINISH", i, k,
                              nc->start.ToString());
    } else if (nc && !nc->started) {
      f.has_position = nc->finished;
      f.position = nc->finish;
      f.message = fmt::format("node {} has no CUT_START({})", i, k);
    } else if (nc && nc->end == CutEnd::kDamaged) {
      failure = false;
      f.has_position = true;
      f.position = s.damage_at;
      f.message = fmt::format("missing CUT_FINISH({}) on node {}: {}", k, i, WalEnd(s));
    } else if (nc) {
      failure = false;
      f.has_position = true;
      f.position = s.torn_tail ? s.torn_at : s.end;
      f.message = fmt::format("missing CUT_FINISH({}) on node {}, {}", k, i, WalEnd(s));
    } else if (!s.cuts.empty() && s.cuts.back().cut_id > k) {
      // The first later cut: a scan that stopped once cut k was decided
      // (ScanOptions::settle_cut) names the same one.
      const auto later = std::upper_bound(s.cuts.begin(), s.cuts.end(), k,
                                          [](uint64_t id, const NodeCut& c) { return id < c.cut_id; });
      f.message =
          fmt::format("node {} has no record of cut {} (no CUT_START), yet took part in cut {}", i, k, later->cut_id);
    } else {
      failure = false;
      f.has_position = true;
      f.position = s.damaged ? s.damage_at : s.end;
      f.message = fmt::format("no CUT_START({}) on node {}, {}", k, i, WalEnd(s));
    }
    return f;
  }

  // Atomicity from the sets: one transaction on both sides.
  void SetAtomicity(GlobalCut& g) const {
    const uint64_t k = g.cut_id;
    std::unordered_map<TxId, std::pair<uint32_t, bool>, walfmt::TxIdHash> side;
    for (uint32_t i = 0; i < n_; ++i) {
      const NodeCut* nc = g.nodes[i];
      if (!nc) continue;
      for (int b = 0; b < 2; ++b) {
        for (const auto& t : b == 0 ? nc->before : nc->after) {
          auto [it, fresh] = side.emplace(t.tx, std::make_pair(i, b == 0));
          if (fresh || it->second.second == (b == 0) || it->second.first == i) continue;
          Finding f;
          f.check = Check::kAtomicity;
          f.node = i;
          f.cut = k;
          f.has_tx = true;
          f.tx = t.tx;
          f.has_position = t.committed;
          f.position = t.commit;
          const uint32_t in_node = b == 0 ? i : it->second.first;
          const uint32_t out_node = b == 0 ? it->second.first : i;
          f.message = fmt::format("transaction {} before cut {} on node {} but after it on node {}", t.tx.Readable(), k,
                                  in_node, out_node);
          g.findings.push_back(std::move(f));
        }
      }
    }
  }

  // What the digests compare against. With the whole WAL: everything
  // (genesis). When segments were removed: only the transactions the cut
  // adds to a base every node still holds entirely (a full snapshot taken
  // before CUT_START(k) everywhere, or an earlier consistent cut whose
  // evidence is complete), so that a pruned WAL gives no false finding.
  DigestBase ChooseDigestBase(GlobalCut& g, Reasons& r) const {
    const uint64_t k = g.cut_id;
    DigestBase b;
    g.checked_against = "genesis";
    if (out_.pruned) {
      bool started_everywhere = true;
      for (const NodeCut* nc : g.nodes) started_everywhere &= nc && nc->started;
      for (const auto& prev : out_.cuts) {
        if ((prev.status == CutStatus::kConsistent || opt_.attested_cut == prev.cut_id) &&
            out_.EvidenceComplete(prev)) {
          b.cut = &prev;
          break;
        }
      }
      for (size_t x = 0; x < marks_.size() && started_everywhere; ++x) {
        if (!out_.snapshots[x].usable) continue;
        bool before_start = true;
        for (uint32_t i = 0; i < n_; ++i) before_start &= marks_[x][i]->at < g.nodes[i]->start;
        if (before_start) {
          b.snapshot = static_cast<int>(x);
          break;
        }
      }
      // The earlier of the two checks more transactions.
      if (b.cut && b.snapshot >= 0 && marks_[b.snapshot][0]->at < b.cut->nodes[0]->start) {
        b.cut = nullptr;
      }
      if (b.cut) {
        g.checked_against = fmt::format("cut {}", b.cut->cut_id);
        g.base_cut = b.cut->cut_id;
        b.snapshot = -1;
      } else if (b.snapshot >= 0) {
        g.checked_against = fmt::format("full snapshot {}", out_.snapshots[b.snapshot].name);
        g.base_snapshot = out_.snapshots[b.snapshot].name;
      } else {
        b.comparable = false;
        g.checked_against.clear();
        if (started_everywhere) {
          const NodeSummary* first = nullptr;
          for (const auto& s : ns_) {
            if (s.pruned && (!first || first->wal_start < s.wal_start)) first = &s;
          }
          Reasons::Note(
              r.unavailable,
              fmt::format("no full snapshot or consistent cut before cut {} is still in every node's WAL to check it "
                          "against (node {}'s WAL starts at {}; segments before it were removed)",
                          k, first->node, first->wal_start.ToString()));
        }
      }
    }
    return b;
  }

  // Atomicity over every shared transaction: the digests of what each pair
  // of nodes holds in the cut must agree.
  void DigestAtomicity(GlobalCut& g, const DigestBase& b) const {
    const uint64_t k = g.cut_id;
    auto digest = [&](uint32_t node, uint32_t peer) {
      TxDigest d = DigestUpTo(ns_[node], peer, k);
      if (b.cut) {
        const TxDigest c = DigestUpTo(ns_[node], peer, b.cut->cut_id);
        d.x ^= c.x;
        d.n -= c.n;
      } else if (b.snapshot >= 0) {
        const auto& before = marks_[b.snapshot][node]->shared_before;
        if (auto it = before.find(peer); it != before.end()) {
          d.x ^= it->second.x;
          d.n -= it->second.n;
        }
      }
      return d;
    };
    for (uint32_t i = 0; i < n_ && b.comparable; ++i) {
      for (uint32_t j = i + 1; j < n_; ++j) {
        const NodeCut* a = g.nodes[i];
        const NodeCut* c = g.nodes[j];
        if (!a || !c || !a->finished || !c->finished || !a->started || !c->started) continue;
        const TxDigest di = digest(i, j);
        const TxDigest dj = digest(j, i);
        if (di == dj) continue;
        Finding f;
        f.check = Check::kAtomicity;
        f.node = i;
        f.cut = k;
        f.expected = fmt::format("node {}: {} shared transactions in the cut", i, di.n);
        f.found = fmt::format("node {}: {}", j, dj.n);
        f.message = fmt::format(
            "nodes {} and {} disagree on the transactions they share in cut {}: {} on node {}, {} on node {}{}", i, j,
            k, di.n, i, dj.n, j, di.n == dj.n ? " (same count, different transactions)" : "");
        g.disagreements.push_back({i, j, g.findings.size()});
        g.findings.push_back(std::move(f));
      }
    }
  }

  static void Conclude(GlobalCut& g, Reasons& r) {
    for (const auto& f : g.findings) {
      SetCheck(g.checks, f.check);
      if (f.check != Check::kCompleteness) Reasons::Note(r.inconsistent, f.message);
    }
    if (!r.inconsistent.empty()) {
      g.status = CutStatus::kInconsistent;
      g.reason = r.inconsistent;
    } else if (!r.unavailable.empty()) {
      g.status = CutStatus::kUnavailable;
      g.reason = r.unavailable;
    } else if (!r.incomplete.empty()) {
      g.status = CutStatus::kIncomplete;
      g.reason = r.incomplete;
    }
  }

  // Nearest consistent cuts on each side.
  void NearestConsistent() {
    std::optional<uint64_t> prev;
    for (auto& g : out_.cuts) {
      g.consistent_before = prev;
      if (g.status == CutStatus::kConsistent) prev = g.cut_id;
    }
    std::optional<uint64_t> next;
    for (auto it = out_.cuts.rbegin(); it != out_.cuts.rend(); ++it) {
      it->consistent_after = next;
      if (it->status == CutStatus::kConsistent) next = it->cut_id;
    }
  }

  // The cuts each full snapshot can serve as a restore base.
  void SnapshotServes() {
    for (size_t x = 0; x < out_.snapshots.size(); ++x) {
      SnapshotUse& u = out_.snapshots[x];
      if (!u.usable) continue;
      for (const auto& g : out_.cuts) {
        if (g.status != CutStatus::kConsistent) continue;
        bool after = true;
        for (uint32_t i = 0; i < n_; ++i) after &= g.nodes[i] && g.nodes[i]->started && u.at[i] < g.nodes[i]->start;
        if (after) u.serves.push_back(g.cut_id);
      }
    }
  }

  // The restore window.
  void Window() {
    RestoreWindow& w = out_.window;
    const GlobalCut* first = nullptr;
    const GlobalCut* last = nullptr;
    for (const auto& g : out_.cuts) {
      if (g.status != CutStatus::kConsistent) continue;
      if (!first) first = &g;
      last = &g;
    }
    const NodeSummary* damaged = nullptr;
    for (const auto& s : ns_) {
      if (s.damaged && (!damaged || s.damage_at < damaged->damage_at)) damaged = &s;
    }
    const NodeSummary* truncated = nullptr;  // the oldest segments are gone: genesis is not reachable
    for (const auto& s : ns_) {
      if (!s.segments.empty() && s.segments.front().index != 0) truncated = &s;
    }
    if (!first) {
      w.any = false;
      if (out_.cuts.empty()) {
        w.latest_limit = "the WAL holds no cut";
      } else {
        w.latest_limit = fmt::format("no cut is consistent; the last, cut {}, is {}: {}", out_.cuts.back().cut_id,
                                     CutStatusName(out_.cuts.back().status), out_.cuts.back().reason);
      }
      if (damaged)
        w.latest_limit = fmt::format("node {}'s WAL is damaged at {}; {}", damaged->node, damaged->damage_at.ToString(),
                                     w.latest_limit);
      w.earliest_limit = w.latest_limit;
      return;
    }
    w.any = true;
    w.earliest = first->cut_id;
    w.latest = last->cut_id;
    if (truncated) {
      // The lower end is set by the oldest base still usable.
      const SnapshotUse* oldest = nullptr;
      for (const auto& u : out_.snapshots) {
        if (u.usable && !u.serves.empty() && (!oldest || u.serves.front() < oldest->serves.front())) oldest = &u;
      }
      const std::string removed = fmt::format("node {}'s WAL starts at {} (segments before it were removed)",
                                              truncated->node, Lsn{truncated->segments.front().index, 0}.ToString());
      if (oldest && oldest->serves.front() <= last->cut_id) {
        w.earliest = oldest->serves.front();
        w.earliest_limit =
            fmt::format("base {}, the oldest full snapshot every node's WAL still holds; {}", oldest->name, removed);
      } else {
        w.earliest_limit = fmt::format(
            "{}; no full snapshot remains in every node's WAL, so a restore needs an earlier restore output as its "
            "base (--base DIR)",
            removed);
      }
    } else if (first->consistent_before || first != &out_.cuts.front()) {
      const GlobalCut& c0 = out_.cuts.front();
      w.earliest_limit =
          fmt::format("base genesis; cut {} before it is {}: {}", c0.cut_id, CutStatusName(c0.status), c0.reason);
    } else {
      w.earliest_limit = "base genesis (the empty cluster at creation): the first cut of the WAL";
    }
    const GlobalCut* after_last = nullptr;
    for (const auto& g : out_.cuts) {
      if (g.cut_id > last->cut_id) {
        after_last = &g;
        break;
      }
    }
    if (damaged) {
      w.latest_limit = fmt::format("node {}'s WAL is damaged at {} ({}), so no cut after {} can be restored",
                                   damaged->node, damaged->damage_at.ToString(), damaged->damage, last->cut_id);
    } else if (after_last) {
      w.latest_limit = fmt::format("cut {} after it is {}: {}", after_last->cut_id, CutStatusName(after_last->status),
                                   after_last->reason);
    } else {
      w.latest_limit = "the last cut in the WAL";
    }
  }

  ClusterCuts& out_;
  const std::vector<NodeSummary>& ns_;
  const uint32_t n_;
  const ReconstructOptions& opt_;
  std::vector<std::vector<const SnapshotMark*>> marks_;  // by snapshot, by node
};

}  // namespace

walfmt::Result<ClusterCuts> Reconstruct(std::vector<NodeSummary> nodes, const ReconstructOptions& opt) {
  if (walfmt::Status st = CheckNodes(nodes); !st.ok()) return st;
  ClusterCuts out;
  out.nodes = std::move(nodes);
  for (const NodeSummary& n : out.nodes) {
    if (n.epoch_unix_us) {
      out.epoch_unix_us = n.epoch_unix_us;
      break;
    }
  }
  Reconstruction(out, opt).Run();
  return out;
}

}  // namespace walcut::cut
