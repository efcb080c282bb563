// The near node (the coordinator) of a transaction: runs the client program
// (lock and read, then commit or abort), plans the commit, sends the 1PC
// request or the 2PC prepares, decides and sends Finish, and releases the
// locks once every participant acknowledged.

#include "node/node.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "node/host.h"

namespace walcut::node::sim {

void Node::BeginTx(std::shared_ptr<Program> prog, bool load) {
  const TxId id{id_, next_seq_++};
  host_.RecordBegin(id);
  NearTx& t = near_[id];
  t.prog = std::move(prog);
  t.load = load;
  Advance(id);
}

void Node::Advance(const TxId& id) {
  NearTx& t = near_.at(id);
  Step s = t.prog->Next(t.reads);
  if (s.kind == Step::kAbort) return AbortTx(id, s.reason);
  if (s.kind == Step::kCommit) return CommitTx(id, std::move(s.writes));
  std::map<uint32_t, std::vector<std::string>> by_primary;
  for (auto& k : s.keys) by_primary[host_.topo().PrimaryOf(k)].push_back(std::move(k));
  if (by_primary.empty()) return AbortTx(id, AbortReason::kBadRead);  // a program bug; tests require none
  for (const auto& [p, keys] : by_primary) {
    auto pos = std::lower_bound(t.contacted.begin(), t.contacted.end(), p);
    if (pos == t.contacted.end() || *pos != p) t.contacted.insert(pos, p);
    if (!host_.IsAlive(p)) return AbortTx(id, AbortReason::kParticipantLost);
  }
  t.pending = static_cast<uint32_t>(by_primary.size());
  t.failed = false;
  for (auto& [p, keys] : by_primary) {
    Msg m;
    m.type = MsgType::kLockRead;
    m.to = p;
    m.tx = id;
    m.keys = std::move(keys);
    Send(std::move(m));
  }
}

void Node::OnLockReadResp(const Msg& m) {
  auto it = near_.find(m.tx);
  if (it == near_.end() || it->second.plan || it->second.pending == 0) return;
  NearTx& t = it->second;
  if (!m.ok) t.failed = true;
  for (size_t i = 0; i < m.keys.size() && i < m.values.size(); ++i) t.reads[m.keys[i]] = m.values[i];
  if (--t.pending > 0) return;
  if (t.failed) return AbortTx(m.tx, AbortReason::kConflict);
  Advance(m.tx);
}

void Node::AbortTx(const TxId& id, AbortReason why) {
  NearTx& t = near_.at(id);
  SendToEach(t.contacted, MsgType::kRelease, id);
  Remember(near_outcomes_, id, Outcome{false, 0});
  EndNear(near_.find(id), false, why, false);
}

void Node::CommitTx(const TxId& id, std::vector<Write> writes) {
  NearTx& t = near_.at(id);
  const Topology& topo = host_.topo();
  const uint32_t n = topo.nodes();
  auto plan = std::make_shared<TxPlan>();
  plan->id = id;
  plan->writes.resize(n);
  plan->forward.resize(n);
  plan->forwarder.assign(n, kNoNode);
  plan->primaries = t.contacted;
  std::set<uint32_t> parts(t.contacted.begin(), t.contacted.end());
  for (const Write& w : writes) {
    const uint32_t p = topo.PrimaryOf(w.key);
    if (!std::binary_search(t.contacted.begin(), t.contacted.end(), p)) {
      // Every workload locks what it writes; a write to an unlocked key is a bug.
      return AbortTx(id, AbortReason::kBadRead);
    }
    plan->writes[p].push_back(w);
    parts.insert(p);
    for (uint32_t b : topo.BackupsOf(p)) {
      plan->writes[b].push_back(w);
      parts.insert(b);
    }
  }
  plan->participants.assign(parts.begin(), parts.end());
  plan->one_phase = plan->primaries.size() == 1;
  plan->load = t.load;
  plan->near_incarnation = incarnation_;
  plan->may_fail = !t.load && !plan->one_phase && host_.opt().vote_no_per_million > 0;
  if (plan->one_phase) {
    const uint32_t p = plan->primaries[0];
    plan->decider = topo.backups() > 0 ? topo.BackupOf(p, 0) : p;
    for (uint32_t i = 1; i < topo.backups(); ++i) {
      plan->forward[p].push_back(topo.BackupOf(p, i));
      plan->forwarder[topo.BackupOf(p, i)] = p;
    }
  } else {
    // A node that only holds backup copies gets the prepare from one primary:
    // the lowest one it backs up. Nodes that are primaries themselves get
    // their whole share (backup copies included) from the near node.
    for (uint32_t b : plan->participants) {
      if (std::binary_search(plan->primaries.begin(), plan->primaries.end(), b)) continue;
      for (uint32_t p : plan->primaries) {
        const uint32_t dist = (b + n - p) % n;
        if (dist >= 1 && dist <= topo.backups()) {
          plan->forward[p].push_back(b);
          plan->forwarder[b] = p;
          break;
        }
      }
    }
  }
  if (host_.opt().keep_history) plan->all_writes = std::move(writes);
  t.plan = plan;
  t.failed = false;
  for (uint32_t p : plan->participants) {
    if (!host_.IsAlive(p)) {
      t.plan.reset();  // still in the lock phase as far as AbortTx is concerned
      return AbortTx(id, AbortReason::kParticipantLost);
    }
  }
  if (plan->one_phase) {
    Msg m;
    m.type = MsgType::kCommit1pc;
    m.to = plan->primaries[0];
    m.tx = id;
    m.plan = plan;
    Send(std::move(m));
    return;
  }
  t.pending = static_cast<uint32_t>(plan->primaries.size());
  t.voting = true;
  for (uint32_t p : plan->primaries) {
    Msg m;
    m.type = MsgType::kPrepare;
    m.to = p;
    m.tx = id;
    m.plan = plan;
    Send(std::move(m));
  }
}

void Node::OnVote(const Msg& m) {
  auto it = near_.find(m.tx);
  if (it == near_.end() || !it->second.voting) return;
  if (!m.ok) it->second.failed = true;
  if (--it->second.pending > 0) return;
  it->second.voting = false;
  const TxId id = m.tx;
  PostStep(StepKind::kDecide, id);
}

// The near node decides a 2PC transaction: it reads its cut id (the marker)
// in this step and sends Finish in a later one, so a cut can start in between
// and the Finish may carry a higher cut id than the marker.
void Node::Decide(const TxId& id) {
  NearTx& t = near_.at(id);
  WALCUT_ASSERT(t.plan && !t.voting && !t.decided, "Decide: a 2PC transaction decided twice, or while voting");
  if (t.failed) {
    SendToEach(t.plan->primaries, MsgType::kFinish, id);  // commit = false: roll back
    Remember(near_outcomes_, id, Outcome{false, 0});
    EndNear(near_.find(id), false, AbortReason::kVoteNo, false);
    return;
  }
  t.marker = cut_id_;
  t.decided = true;
  Remember(near_outcomes_, id, Outcome{true, t.marker});
  PostStep(StepKind::kSendFinish, id);
}

void Node::SendFinish(const TxId& id) {
  auto it = near_.find(id);
  if (it == near_.end()) return;
  NearTx& t = it->second;
  WALCUT_ASSERT(t.decided && !t.finish_sent, "SendFinish: not decided, or Finish sent twice");
  t.finish_sent = true;
  t.ack_from = LiveOnly(t.plan->primaries);
  for (uint32_t p : t.ack_from) {
    Msg m;
    m.type = MsgType::kFinish;
    m.to = p;
    m.tx = id;
    m.commit = true;
    m.marker = t.marker;
    Send(std::move(m));
  }
  if (t.ack_from.empty()) CompleteCommit(id);
}

void Node::OnFinishAck(const Msg& m) {
  auto it = near_.find(m.tx);
  if (it == near_.end()) return;
  auto& acks = it->second.ack_from;
  acks.erase(std::remove(acks.begin(), acks.end(), m.from), acks.end());
  if (acks.empty()) CompleteCommit(m.tx);
}

void Node::CompleteCommit(const TxId& id) {
  auto it = near_.find(id);
  WALCUT_ASSERT(it != near_.end() && it->second.decided, "CompleteCommit: not a decided transaction of this near node");
  // Every participant committed: now the primaries may let the next
  // transaction take these keys (see the comment in node/node.h).
  SendToEach(it->second.plan->primaries, MsgType::kRelease, id);
  EndNear(it, true, AbortReason::kNone, false);
}

void Node::OnCommit1pcResp(const Msg& m) {
  auto it = near_.find(m.tx);
  if (it == near_.end() || !it->second.plan) return;
  EndNear(it, m.ok, m.ok ? AbortReason::kNone : AbortReason::kVoteNo, true);
}

void Node::EndNear(NearMap::iterator it, bool committed, AbortReason why, bool one_phase) {
  // Moved out first: the host may start the next transaction here (near_ grows).
  const TxId id = it->first;
  const NearTx t = std::move(it->second);
  near_.erase(it);
  static const std::vector<Write> kNoWrites;
  TxEnd e;
  e.id = id;
  e.load = t.load;
  e.committed = committed;
  e.why = why;
  e.one_phase = one_phase;
  e.marker = t.marker;
  e.reads = &t.reads;
  e.writes = committed && t.plan ? &t.plan->all_writes : &kNoWrites;
  host_.TxEnded(e);
}

}  // namespace walcut::node::sim
