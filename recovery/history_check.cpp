// The rules of `walcut history check` on prepared inputs (recovery/history.h):
// the outcomes over the whole history, then each consistent cut.
#include <algorithm>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "recovery/history.h"
#include "recovery/invariants.h"
#include "walfmt/duration.h"
#include "walfmt/workload.h"

namespace walcut::recovery {
using walfmt::Result;
using walfmt::Status;
using walfmt::TxId;

const char* HistoryRuleName(HistoryRule r) {
  switch (r) {
    case HistoryRule::kAcknowledged:
      return "acknowledged-in-cut";
    case HistoryRule::kStartedAfter:
      return "started-after-cut";
    case HistoryRule::kAllOrNothing:
      return "all-or-nothing";
    case HistoryRule::kOutcome:
      return "outcome";
    case HistoryRule::kState:
      return "state";
    case HistoryRule::kInvariant:
      return "invariant";
  }
  return "?";
}

int HistoryRuleNumber(HistoryRule r) {
  switch (r) {
    case HistoryRule::kAcknowledged:
      return 1;
    case HistoryRule::kStartedAfter:
      return 2;
    case HistoryRule::kAllOrNothing:
    case HistoryRule::kOutcome:
      return 3;
    case HistoryRule::kState:
      return 4;
    case HistoryRule::kInvariant:
      return 5;
  }
  return 0;
}

namespace {

std::string Nodes(const std::vector<uint32_t>& v) {
  std::string s;
  for (uint32_t n : v) s += fmt::format("{}{}", s.empty() ? "" : ",", n);
  return s;
}

// The initial data of the cluster, as cluster.json describes it: what the
// runtime writes with ordinary transactions before the first cut
// (node/workload.cpp, InitialWrites).
std::map<std::string, std::string> InitialState(const walfmt::ClusterInfo& info) {
  std::map<std::string, std::string> s;
  if (info.has_bank()) {
    for (uint32_t i = 0; i < info.accounts; ++i) s[walfmt::AccountKey(i)] = std::to_string(info.initial_balance);
  }
  if (info.has_cycle()) {
    for (uint32_t i = 0; i < info.ring_keys; ++i) s[walfmt::RingKey(i)] = std::to_string((i + 1) % info.ring_keys);
  }
  return s;
}

// A transaction across the nodes: who took part, and where it committed.
struct TxAcross {
  std::vector<uint32_t> participants;  // sorted
  bool committed_somewhere = false;
  uint64_t first_commit_time_us = UINT64_MAX;  // cluster time
};

class Checker {
 public:
  Checker(const HistoryCheckInput& in, const HistoryCheckOptions& opt)
      : in_(in), opt_(opt), epoch_(in.info.epoch_unix_us.value_or(0)), initial_(InitialState(in.info)) {}

  Result<HistoryReport> Run();

 private:
  void Index();
  void CheckOutcomes();
  void CheckUnnamed();
  Status CheckCut(const CutFacts& c, CutHistoryResult& r);
  void CheckCutMembership(const CutFacts& c, CutHistoryResult& r, std::vector<TxId>& in_cut);
  void CheckHistoryBounds(const CutFacts& c, CutHistoryResult& r);
  std::map<std::string, std::string> ExpectedState(const std::vector<TxId>& in_cut, CutHistoryResult& r);
  void CompareState(const std::map<std::string, std::string>& expected, const std::vector<NodeState>& states,
                    CutHistoryResult& r);
  void CheckWorkload(const std::vector<NodeState>& states, CutHistoryResult& r);

  bool InCut(const CutFacts& c, uint32_t node, const TxId& t) const;
  std::string Utc(uint64_t unix_us) const { return walfmt::FormatUtc(static_cast<int64_t>(unix_us)); }
  void AddOutcome(HistoryFinding f);
  void Add(CutHistoryResult& r, HistoryFinding f) const;

  const HistoryCheckInput& in_;
  const HistoryCheckOptions& opt_;
  const uint64_t epoch_;
  const std::map<std::string, std::string> initial_;
  std::unordered_map<TxId, TxAcross, walfmt::TxIdHash> txs_;
  std::vector<TxId> committed_;  // committed somewhere, sorted
  std::unordered_map<TxId, const HistoryTx*, walfmt::TxIdHash> named_;
  // Where each key was last written in the expected state (for messages).
  std::unordered_map<std::string, std::string> writer_;
  HistoryReport rep_;
};

void Checker::Add(CutHistoryResult& r, HistoryFinding f) const {
  ++r.total_findings;
  f.cut = r.cut;
  if (r.findings.size() < opt_.max_findings) r.findings.push_back(std::move(f));
}

void Checker::AddOutcome(HistoryFinding f) {
  ++rep_.total_outcome_findings;
  f.rule = HistoryRule::kOutcome;
  if (rep_.outcome_findings.size() < opt_.max_findings) rep_.outcome_findings.push_back(std::move(f));
}

void Checker::Index() {
  for (uint32_t i = 0; i < in_.wal.size(); ++i) {
    for (const auto& [id, t] : in_.wal[i]) {
      TxAcross& a = txs_[id];
      a.participants.push_back(i);
      for (uint32_t p : t.participants) {
        if (p < in_.wal.size()) a.participants.push_back(p);  // another id is the cut scan's finding
      }
      if (t.committed) {
        a.committed_somewhere = true;
        a.first_commit_time_us = std::min(a.first_commit_time_us, t.commit_time_us);
      }
    }
  }
  // The client's view of who must take part: every node that holds a key
  // the transaction wrote (whatever its records say).
  const walfmt::Topology topo = in_.info.topology();
  for (const auto& h : in_.history.txs) {
    auto it = h.tx && h.AcknowledgedCommitted() ? txs_.find(*h.tx) : txs_.end();
    if (it == txs_.end()) continue;
    for (const auto& [k, v] : h.writes) {
      for (uint32_t n = 0; n < in_.wal.size(); ++n) {
        if (topo.Holds(n, k)) it->second.participants.push_back(n);
      }
    }
  }
  for (auto& [id, a] : txs_) {
    std::sort(a.participants.begin(), a.participants.end());
    a.participants.erase(std::unique(a.participants.begin(), a.participants.end()), a.participants.end());
    if (a.committed_somewhere) committed_.push_back(id);
  }
  std::sort(committed_.begin(), committed_.end());
  rep_.wal_committed = committed_.size();
  for (const auto& h : in_.history.txs) {
    switch (h.outcome) {
      case HistoryOutcome::kCommitted:
        ++rep_.committed;
        break;
      case HistoryOutcome::kAborted:
        ++rep_.aborted;
        break;
      case HistoryOutcome::kInDoubt:
        ++rep_.in_doubt;
        break;
      case HistoryOutcome::kRefused:
        ++rep_.refused;
        break;
      case HistoryOutcome::kUnknown:
        ++rep_.unknown;
        break;
    }
    if (h.tx) named_[*h.tx] = &h;
  }
}

// Rule 3 over the whole history: committed for the client <=> committed in
// the WAL, on every participant; aborted for the client: committed nowhere.
void Checker::CheckOutcomes() {
  for (const auto& h : in_.history.txs) {
    if (!h.tx) continue;
    const std::string name = h.tx->Readable();
    auto it = txs_.find(*h.tx);
    HistoryFinding f;
    f.tx = h.tx;
    f.line = h.line;
    if (h.outcome == HistoryOutcome::kCommitted) {
      if (it == txs_.end() || !it->second.committed_somewhere) {
        bool rolled_back = false;
        for (uint32_t p = 0; it != txs_.end() && p < in_.wal.size(); ++p) {
          auto nt = in_.wal[p].find(*h.tx);
          rolled_back |= nt != in_.wal[p].end() && nt->second.rolled_back;
        }
        f.expected = "committed";
        f.found = it == txs_.end() ? "no record" : rolled_back ? "rolled back" : "not committed";
        f.message =
            fmt::format("{} was acknowledged committed at {} (history line {}) but no node's WAL commits it ({})", name,
                        Utc(h.ack_us), h.line, f.found);
        AddOutcome(f);
        continue;
      }
      for (uint32_t p : it->second.participants) {
        auto nt = in_.wal[p].find(*h.tx);
        const bool there = nt != in_.wal[p].end();
        if (there && nt->second.committed && !nt->second.rolled_back) continue;
        f.node = p;
        f.expected = "committed";
        f.found = !there ? "no record" : nt->second.rolled_back ? "rolled back" : "not committed";
        f.message = fmt::format("{} was acknowledged committed (history line {}); participant node {}: {}", name,
                                h.line, p, f.found);
        AddOutcome(f);
      }
    } else if (h.outcome == HistoryOutcome::kAborted && it != txs_.end() && it->second.committed_somewhere) {
      for (uint32_t p : it->second.participants) {
        auto nt = in_.wal[p].find(*h.tx);
        if (nt == in_.wal[p].end() || !nt->second.committed) continue;
        f.node = p;
        f.expected = "not committed";
        f.found = "committed";
        f.message = fmt::format("{} was reported aborted to the client (history line {}) but node {} commits it at {}",
                                name, h.line, p, nt->second.commit.ToString());
        AddOutcome(f);
      }
    }
  }
  CheckUnnamed();
}

// A committed transaction the history does not name is one the client never
// heard of (unanswered), or the initial data's: per near node, no more of
// them than the history has unanswered transactions sent to that node.
void Checker::CheckUnnamed() {
  std::map<uint32_t, uint64_t> unknown_by_node;
  for (const auto& h : in_.history.txs) {
    if (h.outcome == HistoryOutcome::kUnknown) ++unknown_by_node[h.node];
  }
  std::map<uint32_t, std::vector<TxId>> unnamed_by_node;
  for (const TxId& id : committed_) {
    if (named_.count(id)) continue;
    ++rep_.unnamed;
    auto w = in_.wal_writes.find(id);
    bool initial = w != in_.wal_writes.end() && !w->second.empty();
    if (initial) {
      for (const auto& [k, wr] : w->second) {
        auto it = initial_.find(k);
        if (wr.op != walfmt::WriteOp::kPut || it == initial_.end() || it->second != wr.value) initial = false;
      }
    }
    if (!initial) unnamed_by_node[id.node].push_back(id);
  }
  for (const auto& [node, ids] : unnamed_by_node) {
    const uint64_t allowed = unknown_by_node[node];
    if (ids.size() <= allowed) continue;
    std::string some;
    for (size_t i = 0; i < ids.size() && i < 5; ++i) some += fmt::format("{}{}", i ? ", " : "", ids[i].Readable());
    HistoryFinding f;
    f.node = node;
    f.tx = ids.front();
    f.expected = fmt::format("at most {}", allowed);
    f.found = std::to_string(ids.size());
    f.message = fmt::format(
        "node {} coordinated {} committed transactions the history does not name ({}{}), but the history has only {} "
        "sent to node {} whose outcome the client does not know",
        node, ids.size(), some, ids.size() > 5 ? ", ..." : "", allowed, node);
    AddOutcome(f);
  }
}

bool Checker::InCut(const CutFacts& c, uint32_t node, const TxId& t) const {
  if (node >= in_.wal.size() || node >= c.nodes.size()) return false;
  auto it = in_.wal[node].find(t);
  if (it == in_.wal[node].end() || !it->second.committed) return false;
  const CutNodeFacts& n = c.nodes[node];
  if (it->second.commit < n.start) return n.after.count(t) == 0;
  return n.before.count(t) != 0;
}

// Rule 3 in cut K: each committed transaction in it on all its participants
// or on none. `in_cut` gets those in it (on any node).
void Checker::CheckCutMembership(const CutFacts& c, CutHistoryResult& r, std::vector<TxId>& in_cut) {
  for (const TxId& id : committed_) {
    const TxAcross& a = txs_.at(id);
    std::vector<uint32_t> in, out;
    for (uint32_t p : a.participants) (InCut(c, p, id) ? in : out).push_back(p);
    if (in.empty()) continue;
    in_cut.push_back(id);
    if (auto h = named_.find(id); h != named_.end() && h->second->AcknowledgedCommitted()) {
      ++r.history_in_cut;
    } else {
      ++r.unacknowledged_in_cut;
    }
    if (out.empty()) continue;
    HistoryFinding f;
    f.rule = HistoryRule::kAllOrNothing;
    f.tx = id;
    f.node = out.front();
    if (auto h = named_.find(id); h != named_.end()) f.line = h->second->line;
    f.expected = fmt::format("in cut {} on nodes {}", c.cut, Nodes(a.participants));
    f.found = fmt::format("in it on nodes {} only", Nodes(in));
    f.message =
        fmt::format("{} is in cut {} on nodes {} but not on nodes {}", id.Readable(), c.cut, Nodes(in), Nodes(out));
    Add(r, f);
  }
}

// Rules 1 and 2: the client's times against the cut's.
void Checker::CheckHistoryBounds(const CutFacts& c, CutHistoryResult& r) {
  const uint64_t slack = opt_.clock_slack_us;
  for (const auto& h : in_.history.txs) {
    if (!h.tx || h.outcome != HistoryOutcome::kCommitted) continue;
    auto it = txs_.find(*h.tx);
    const std::vector<uint32_t> none;
    const std::vector<uint32_t>& parts = it == txs_.end() ? none : it->second.participants;
    if (h.ack_us + slack < r.start_unix_us) {
      ++r.acknowledged_before;
      std::vector<uint32_t> missing;
      for (uint32_t p : parts) {
        if (!InCut(c, p, *h.tx)) missing.push_back(p);
      }
      if (parts.empty() || !missing.empty()) {
        HistoryFinding f;
        f.rule = HistoryRule::kAcknowledged;
        f.tx = h.tx;
        f.line = h.line;
        if (!missing.empty()) f.node = missing.front();
        f.expected = "in the cut";
        f.found = parts.empty() ? "no WAL record" : fmt::format("not in it on nodes {}", Nodes(missing));
        f.message = fmt::format(
            "{} was acknowledged at {} (history line {}), before cut {} started at {}, but is not in the cut on {}",
            h.tx->Readable(), Utc(h.ack_us), h.line, c.cut, Utc(r.start_unix_us),
            parts.empty() ? "any node (no record)" : "nodes " + Nodes(missing));
        Add(r, f);
      }
    }
    if (h.start_us > r.finish_unix_us + slack) {
      ++r.started_after;
      std::vector<uint32_t> inside;
      for (uint32_t p : parts) {
        if (InCut(c, p, *h.tx)) inside.push_back(p);
      }
      if (!inside.empty()) {
        HistoryFinding f;
        f.rule = HistoryRule::kStartedAfter;
        f.tx = h.tx;
        f.line = h.line;
        f.node = inside.front();
        f.expected = "not in the cut";
        f.found = fmt::format("in it on nodes {}", Nodes(inside));
        f.message = fmt::format(
            "{} started at {} (history line {}), after cut {} finished at {}, but is in the cut on nodes {}",
            h.tx->Readable(), Utc(h.start_us), h.line, c.cut, Utc(r.finish_unix_us), Nodes(inside));
        Add(r, f);
      }
    }
  }
}

// Rule 4's expectation: the initial data, then for each key the value its
// last writer in the cut wrote. Which writer is last is the order in which
// the key's primary committed them (its WAL: every replica applies a key's
// writes in that order): the time a client was told "committed" is not that
// order (a one-phase transaction's primary unlocks before its near node
// hears the answer, so a later transaction on the key can be acknowledged
// first). A transaction the primary's WAL does not show committed is placed
// by its time, after those it does.
std::map<std::string, std::string> Checker::ExpectedState(const std::vector<TxId>& in_cut, CutHistoryResult& r) {
  struct Last {
    bool at_primary = false;
    walfmt::Lsn commit;
    uint64_t time_us = 0;
    TxId tx;
    std::optional<std::string> value;  // nullopt: deleted
    std::string writer;
    auto Order() const { return std::tie(at_primary, commit, time_us, tx); }
  };
  const walfmt::Topology topo = in_.info.topology();
  std::unordered_map<std::string, Last> last;
  auto offer = [&](const TxId& id, uint64_t time_us, const std::string& key, std::optional<std::string> value,
                   std::string writer) {
    Last c;
    const uint32_t primary = topo.PrimaryOf(key);
    if (primary < in_.wal.size()) {
      auto t = in_.wal[primary].find(id);
      if (t != in_.wal[primary].end() && t->second.committed) {
        c.at_primary = true;
        c.commit = t->second.commit;
      }
    }
    c.time_us = time_us;
    c.tx = id;
    c.value = std::move(value);
    c.writer = std::move(writer);
    auto [it, fresh] = last.try_emplace(key, c);
    if (!fresh && it->second.Order() < c.Order()) it->second = std::move(c);
  };
  for (const TxId& id : in_cut) {
    const uint64_t wal_time = epoch_ + txs_.at(id).first_commit_time_us;
    auto h = named_.find(id);
    if (h != named_.end() && h->second->AcknowledgedCommitted()) {
      const uint64_t t = h->second->commit_time_us ? h->second->commit_time_us : wal_time;
      for (const auto& [k, v] : h->second->writes) {
        offer(id, t, k, v, fmt::format("{} (history line {})", id.Readable(), h->second->line));
      }
      continue;
    }
    if (h != named_.end() && !h->second->InDoubt()) continue;  // aborted or unanswered for the client
    auto w = in_.wal_writes.find(id);
    if (w == in_.wal_writes.end()) continue;
    for (const auto& [k, wr] : w->second) {
      offer(id, wal_time, k, wr.op == walfmt::WriteOp::kDelete ? std::nullopt : std::optional<std::string>(wr.value),
            fmt::format("{} ({}: its TX_DATA)", id.Readable(),
                        h != named_.end() ? "in doubt for the client" : "not in the history"));
    }
  }
  std::map<std::string, std::string> state = initial_;
  writer_.clear();
  for (auto& [k, c] : last) {
    if (c.value) {
      state[k] = *c.value;
    } else {
      state.erase(k);
    }
    writer_[k] = std::move(c.writer);
  }
  r.keys = state.size();
  return state;
}

void Checker::CompareState(const std::map<std::string, std::string>& expected, const std::vector<NodeState>& states,
                           CutHistoryResult& r) {
  const walfmt::Topology topo = in_.info.topology();
  auto finding = [&](uint32_t node, const std::string& key, std::string exp, std::string found, std::string msg) {
    HistoryFinding f;
    f.rule = HistoryRule::kState;
    f.node = node;
    f.key = key;
    f.expected = std::move(exp);
    f.found = std::move(found);
    f.message = std::move(msg);
    Add(r, std::move(f));
  };
  if (states.size() != in_.info.nodes) {
    finding(0, "", std::to_string(in_.info.nodes), std::to_string(states.size()),
            fmt::format("the restore of cut {} has {} nodes, the cluster {}", r.cut, states.size(), in_.info.nodes));
    return;
  }
  for (uint32_t i = 0; i < states.size(); ++i) {
    const NodeState& s = states[i];
    for (const auto& [k, v] : expected) {
      if (!topo.Holds(i, k)) continue;
      auto it = s.find(k);
      const std::string by = writer_.count(k) ? "written last by " + writer_.at(k) : "the initial data";
      if (it == s.end()) {
        finding(i, k, v, "missing",
                fmt::format("cut {}, node {}: {} is missing; expected {} ({})", r.cut, i, k, v, by));
      } else if (it->second != v) {
        finding(i, k, v, it->second,
                fmt::format("cut {}, node {}: {} = {}, expected {} ({})", r.cut, i, k, it->second, v, by));
      }
    }
    for (const auto& [k, v] : s) {
      if (topo.Holds(i, k) && expected.count(k)) continue;
      finding(
          i, k, "absent", v,
          fmt::format("cut {}, node {}: {} = {}, {}", r.cut, i, k, v,
                      expected.count(k) ? "a key the node does not hold" : "a key no transaction in the cut wrote"));
    }
  }
}

void Checker::CheckWorkload(const std::vector<NodeState>& states, CutHistoryResult& r) {
  std::vector<const NodeState*> ptrs;
  for (const auto& s : states) ptrs.push_back(&s);
  InvariantOptions io = OptionsFor(in_.info.workload);
  io.placement = false;  // rule 4 compares every key with its holders
  const InvariantReport inv = CheckInvariants(in_.info, ptrs, io);
  for (const auto& x : inv.findings) {
    HistoryFinding f;
    f.rule = HistoryRule::kInvariant;
    f.node = x.node;
    if (!x.keys.empty()) f.key = x.keys.front();
    f.expected = x.expected;
    f.found = x.found;
    f.message = fmt::format("cut {}: {}: {}", r.cut, x.check, x.message);
    Add(r, std::move(f));
  }
}

Status Checker::CheckCut(const CutFacts& c, CutHistoryResult& r) {
  r.start_unix_us = UINT64_MAX;
  for (const auto& n : c.nodes) {
    r.start_unix_us = std::min(r.start_unix_us, epoch_ + n.start_time_us);
    r.finish_unix_us = std::max(r.finish_unix_us, epoch_ + n.finish_time_us);
  }
  if (c.nodes.empty()) r.start_unix_us = 0;
  std::vector<TxId> in_cut;
  CheckCutMembership(c, r, in_cut);
  CheckHistoryBounds(c, r);
  const auto expected = ExpectedState(in_cut, r);
  auto states = in_.restore(c.cut);
  if (!states.ok()) {
    if (states.status().code() == walfmt::ErrorCode::kIo || states.status().code() == walfmt::ErrorCode::kInternal) {
      return states.status();
    }
    HistoryFinding f;
    f.rule = HistoryRule::kState;
    f.expected = "restored";
    f.found = "refused";
    f.message = fmt::format("cut {} does not restore: {}", c.cut, states.status().message());
    Add(r, std::move(f));
    return Status::Ok();
  }
  CompareState(expected, *states, r);
  CheckWorkload(*states, r);
  return Status::Ok();
}

Result<HistoryReport> Checker::Run() {
  if (!in_.info.epoch_unix_us) {
    return Status::InvalidArgument(
        fmt::format("{}: no epoch_unix_us: the WAL's times cannot be put on the clients' clock", in_.info.origin));
  }
  if (in_.wal.size() != in_.info.nodes) {
    return Status::InvalidArgument(fmt::format("{} WALs for a cluster of {} nodes", in_.wal.size(), in_.info.nodes));
  }
  Index();
  CheckOutcomes();
  for (const auto& c : in_.cuts) {
    CutHistoryResult r;
    r.cut = c.cut;
    r.status = c.status;
    r.reason = c.reason;
    r.checked = c.consistent && c.nodes.size() == in_.info.nodes;
    if (r.checked) {
      if (Status st = CheckCut(c, r); !st.ok()) return st;
      ++rep_.cuts_checked;
      if (!r.pass()) ++rep_.cuts_failed;
    }
    rep_.cuts.push_back(std::move(r));
  }
  return std::move(rep_);
}

}  // namespace

Result<HistoryReport> CheckHistory(const HistoryCheckInput& in, const HistoryCheckOptions& opt) {
  Checker c(in, opt);
  return c.Run();
}

}  // namespace walcut::recovery
