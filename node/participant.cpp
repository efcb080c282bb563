// The participant side of a transaction: a primary (2PC or 1PC), a backup,
// or the 1PC decider. Locks and reads, TX_DATA + TX_PREPARE before voting,
// TX_COMMIT with the marker before acknowledging, forwarding to the backups.

#include "node/node.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "node/host.h"

namespace walcut::node::sim {

void Node::OnLockRead(const Msg& m) {
  if (!in_doubt_.empty()) return Refuse(m);  // may hold stale copies until resolved
  Msg r;
  r.type = MsgType::kLockReadResp;
  r.to = m.from;
  r.tx = m.tx;
  for (const auto& k : m.keys) {
    const TxId* holder = locks_.find(k);
    if (holder != nullptr && *holder != m.tx) {
      r.ok = false;  // no waiting: a conflict rolls the transaction back (no deadlocks)
      break;
    }
  }
  if (r.ok) {
    auto& held = held_[m.tx];
    for (const auto& k : m.keys) {
      if (locks_.emplace(k, m.tx).second) held.push_back(k);
      const std::string* v = kv_.find(k);
      r.values.push_back(v == nullptr ? std::nullopt : std::optional<std::string>(*v));
    }
    r.keys = m.keys;
  }
  Send(std::move(r));
}

void Node::ReleaseLocks(const TxId& id) {
  auto it = held_.find(id);
  if (it == held_.end()) return;
  for (const auto& k : it->second) {
    const TxId* holder = locks_.find(k);
    if (holder != nullptr && *holder == id) locks_.erase(k);
  }
  held_.erase(it);
}

void Node::OnPrepare(const Msg& m) {
  const TxPlan& plan = *m.plan;
  // A node resolving an undecided transaction takes no new ones: a backup
  // could otherwise commit a later transaction on a key before the undecided
  // one, and its WAL order would disagree with the primary's.
  if (Refusing(plan.id) || local_.count(plan.id) || NearGone(plan)) return Refuse(m);
  if (plan.may_fail && host_.rng().Chance(host_.opt().vote_no_per_million)) {
    Reply(m, MsgType::kVote, false);  // refused: nothing written, nothing forwarded
    return;
  }
  for (uint32_t b : plan.forward[id_]) {
    if (!host_.IsAlive(b)) return Refuse(m);
  }
  LogData(plan.id, plan.writes[id_]);
  LogPrepare(plan.id, plan.participants);
  Sync();  // durable before voting
  LocalTx& lt = Join(plan.id, m.plan, Role::kPrimary2pc, TxState::kPrepared);
  lt.pending_from = plan.forward[id_];
  WatchStuck(plan.id);
  ForwardPrepare(m.plan);
}

void Node::ForwardPrepare(const std::shared_ptr<const TxPlan>& plan) {
  for (uint32_t b : plan->forward[id_]) {
    Msg f;
    f.type = MsgType::kPrepareFwd;
    f.to = b;
    f.tx = plan->id;
    f.plan = plan;
    Send(std::move(f));
  }
  MaybeVote(plan->id);
}

void Node::MaybeVote(const TxId& id) {
  auto it = local_.find(id);
  if (it == local_.end()) return;
  LocalTx& lt = it->second;
  if (lt.voted || !lt.pending_from.empty()) return;
  if (lt.role == Role::kPrimary1pc) {
    if (lt.st != TxState::kPreparing1pc) return;
    if (!lt.all_yes) return Abort1pc(id, false);
    return Enter1pcCommit(id);
  }
  lt.voted = true;
  Msg v;
  v.type = MsgType::kVote;
  v.to = lt.plan->id.node;
  v.tx = id;
  v.ok = lt.all_yes;
  Send(std::move(v));
}

// A backup holds no locks: the primary's lock orders conflicting
// transactions, and the primary keeps it until every participant committed.
// Not so after the recovery protocol: a primary that resolves a transaction
// (its near node lost a participant) commits and unlocks at once, while a
// backup of the same key may still hold that transaction prepared, waiting
// for a Finish that will not come (it resolves it later, by its own recovery
// round). A later transaction on the key must not commit here before it:
// the backup's order would differ from the primary's (crash sweep seed 5037).
bool Node::PreparedOnSameKey(const TxPlan& plan) const {
  for (const auto& [id, lt] : local_) {
    if (id == plan.id || lt.st == TxState::kCommitted) continue;
    for (const Write& w : lt.plan->writes[id_]) {
      for (const Write& x : plan.writes[id_]) {
        if (w.key == x.key) return true;
      }
    }
  }
  return false;
}

void Node::OnPrepareFwd(const Msg& m) {
  const TxPlan& plan = *m.plan;
  if (Refusing(plan.id) || local_.count(plan.id) || NearGone(plan) || PreparedOnSameKey(plan)) return Refuse(m);
  LogData(plan.id, plan.writes[id_]);
  LogPrepare(plan.id, plan.participants);
  Sync();
  Join(plan.id, m.plan, Role::kBackup, TxState::kPrepared);
  WatchStuck(plan.id);
  Reply(m, MsgType::kVoteFwd, true);
}

void Node::OnVoteFwd(const Msg& m) {
  auto it = local_.find(m.tx);
  if (it == local_.end()) return;
  LocalTx& lt = it->second;
  auto& pf = lt.pending_from;
  if (std::find(pf.begin(), pf.end(), m.from) == pf.end()) return;
  pf.erase(std::remove(pf.begin(), pf.end(), m.from), pf.end());
  if (!m.ok) lt.all_yes = false;
  MaybeVote(m.tx);
}

Node::LocalTx& Node::Join(const TxId& id, std::shared_ptr<const TxPlan> plan, Role role, TxState st) {
  auto [it, fresh] = local_.try_emplace(id);
  WALCUT_ASSERT(fresh, "a transaction joined twice on one participant");
  LocalTx& lt = it->second;
  lt.plan = std::move(plan);
  lt.role = role;
  lt.st = st;
  return lt;
}

// The only moves of a participant's copy: prepared (or, at a 1PC primary,
// preparing) -> committing -> committed. A rollback or a resolution by the
// recovery protocol erases the entry instead.
void Node::EnterState(LocalTx& lt, TxState to) {
  const bool from_prepared = lt.st == TxState::kPrepared || lt.st == TxState::kPreparing1pc;
  WALCUT_ASSERT(
      (to == TxState::kCommitting && from_prepared) || (to == TxState::kCommitted && lt.st == TxState::kCommitting),
      "participant state: not prepared -> committing -> committed");
  lt.st = to;
}

void Node::ForwardFinish(const std::vector<uint32_t>& backups, const TxId& id, bool commit, uint64_t marker) {
  for (uint32_t b : backups) {
    Msg f;
    f.type = MsgType::kFinishFwd;
    f.to = b;
    f.tx = id;
    f.commit = commit;
    f.marker = marker;
    Send(std::move(f));
  }
}

void Node::WriteRollback(const TxId& id, const TxPlan& plan, uint16_t extra_flags) {
  LogRollback(id, static_cast<uint16_t>((plan.one_phase ? walfmt::kTxFlagOnePhase : 0) | extra_flags),
              plan.participants);
  Sync();
  Remember(outcomes_, id, Outcome{false, 0});
  CutTxFinished(id, false, 0, (extra_flags & walfmt::kTxFlagRecovered) != 0);
}

// A node resolving a transaction by the recovery protocol that receives its
// outcome from the normal path (say it restarted between prepare and finish)
// takes it: the outcome is definite, and the sender waits for the ack.
bool Node::FinishInDoubt(const Msg& m) {
  if (!in_doubt_.count(m.tx)) {
    // Already resolved by the recovery protocol: acknowledge again.
    auto o = outcomes_.find(m.tx);
    if (m.commit && !local_.count(m.tx) && o != outcomes_.end() && o->second.committed) {
      Reply(m, m.type == MsgType::kFinish ? MsgType::kFinishAck : MsgType::kFinishAckFwd, true);
      return true;
    }
    return false;
  }
  Resolve(m.tx, m.commit, m.marker);
  if (m.commit) Reply(m, m.type == MsgType::kFinish ? MsgType::kFinishAck : MsgType::kFinishAckFwd, true);
  return true;
}

void Node::OnFinish(const Msg& m) {
  auto it = local_.find(m.tx);
  if (FinishInDoubt(m)) return;
  if (!m.commit) {
    if (it != local_.end()) {
      const auto plan = it->second.plan;
      WriteRollback(m.tx, *plan, 0);
      ForwardFinish(plan->forward[id_], m.tx, false, 0);
      local_.erase(it);
    } else {
      Remember(outcomes_, m.tx, Outcome{false, 0});  // a late Prepare must find it decided
    }
    ReleaseLocks(m.tx);
    return;
  }
  if (it == local_.end()) return;
  LocalTx& lt = it->second;
  EnterState(lt, TxState::kCommitting);
  lt.outcome_known = true;
  lt.marker = m.marker;
  lt.pending_from = LiveOnly(lt.plan->forward[id_]);
  ForwardFinish(lt.pending_from, m.tx, true, m.marker);
  const TxId id = m.tx;
  PostStep(StepKind::kCommitStep, id);
}

void Node::OnFinishFwd(const Msg& m) {
  if (FinishInDoubt(m)) return;
  auto it = local_.find(m.tx);
  if (it == local_.end()) {
    if (!m.commit) Remember(outcomes_, m.tx, Outcome{false, 0});  // overtook its PrepareFwd
    return;
  }
  if (!m.commit) {
    WriteRollback(m.tx, *it->second.plan, 0);
    local_.erase(it);
    return;
  }
  EnterState(it->second, TxState::kCommitting);
  it->second.outcome_known = true;
  it->second.marker = m.marker;
  const TxId id = m.tx;
  PostStep(StepKind::kCommitStep, id);
}

// The second half of committing on a participant: write TX_COMMIT with the
// marker, sync, apply. The first half (learning the outcome, or reading the
// cut id on a 1PC decider) ran in an earlier event.
void Node::CommitStep(const TxId& id) {
  auto it = local_.find(id);
  if (it == local_.end() || in_doubt_.count(id)) return;
  LocalTx& lt = it->second;
  const TxPlan& plan = *lt.plan;
  LogCommit(id, lt.marker, static_cast<uint16_t>(plan.one_phase ? walfmt::kTxFlagOnePhase : 0), plan.participants);
  Sync();  // durable before acknowledging
  for (const Write& w : plan.writes[id_]) {
    if (w.op == walfmt::WriteOp::kDelete)
      kv_.erase(w.key);
    else
      kv_[w.key] = w.value;
  }
  Remember(outcomes_, id, Outcome{true, lt.marker});
  host_.RecordCommit(plan, lt.marker, false);
  EnterState(lt, TxState::kCommitted);
  CutTxFinished(id, true, lt.marker, false);
  MaybeAck(id);
}

void Node::MaybeAck(const TxId& id) {
  auto it = local_.find(id);
  if (it == local_.end()) return;
  LocalTx& lt = it->second;
  if (lt.st != TxState::kCommitted || !lt.pending_from.empty()) return;
  const TxPlan& plan = *lt.plan;
  Msg r;
  r.tx = id;
  switch (lt.role) {
    case Role::kPrimary2pc:
      r.type = MsgType::kFinishAck;
      r.to = plan.id.node;
      break;
    case Role::kBackup:
      r.type = MsgType::kFinishAckFwd;
      r.to = plan.forwarder[id_];
      break;
    case Role::kDecider:
      r.type = MsgType::kDecided1pc;
      r.to = plan.primaries[0];
      r.marker = lt.marker;
      break;
    case Role::kPrimary1pc:
      // Every copy committed (the decider first): the keys are free again.
      ReleaseLocks(id);
      r.type = MsgType::kCommit1pcResp;
      r.to = plan.id.node;
      break;
    case Role::kRecovered:
      local_.erase(it);
      return;
  }
  local_.erase(it);
  Send(std::move(r));
}

void Node::OnFinishAckFwd(const Msg& m) {
  auto it = local_.find(m.tx);
  if (it == local_.end()) return;
  auto& pf = it->second.pending_from;
  pf.erase(std::remove(pf.begin(), pf.end(), m.from), pf.end());
  MaybeAck(m.tx);
}

// 1PC at the primary. With more than one backup the others prepare first, so
// that every copy is known to the cut protocol before the decider reads its
// cut id (see the comment in node/node.h: a backup that learnt of the transaction
// only from the outcome could not have tracked it).
void Node::OnCommit1pc(const Msg& m) {
  const TxPlan& plan = *m.plan;
  if (Refusing(plan.id) || local_.count(plan.id)) {
    ReleaseLocks(plan.id);
    return Refuse(m);
  }
  for (uint32_t b : plan.participants) {
    if (!host_.IsAlive(b)) {
      ReleaseLocks(plan.id);
      return Refuse(m);
    }
  }
  LocalTx& lt = Join(plan.id, m.plan, Role::kPrimary1pc, TxState::kPreparing1pc);
  lt.pending_from = plan.forward[id_];
  ForwardPrepare(m.plan);
}

// The primary's own copy enters the commit: TX_DATA and TX_PREPARE, synced
// before the decider hears of it (if the primary crashes after the decider
// committed, its WAL must still know the transaction), TX_COMMIT once the
// decider answered. It is tracked from here on.
void Node::Enter1pcCommit(const TxId& id) {
  LocalTx& lt = local_.at(id);
  const TxPlan& plan = *lt.plan;
  WALCUT_ASSERT(lt.role == Role::kPrimary1pc, "Enter1pcCommit: not the 1PC primary");
  if (plan.decider == id_) return DeciderBegin(id);
  if (!host_.IsAlive(plan.decider)) return Abort1pc(id, false);  // lost while the others prepared
  LogData(id, plan.writes[id_]);
  LogPrepare(id, plan.participants);
  Sync();
  EnterState(lt, TxState::kCommitting);
  WatchStuck(id);
  Msg d;
  d.type = MsgType::kDecide1pc;
  d.to = plan.decider;
  d.tx = id;
  d.plan = lt.plan;
  Send(std::move(d));
}

// A 1PC transaction that cannot commit: a backup refused or was lost before
// the decider was asked, or the decider refused.
void Node::Abort1pc(const TxId& id, bool wrote_prepare) {
  auto it = local_.find(id);
  WALCUT_ASSERT(it != local_.end() && it->second.role == Role::kPrimary1pc,
                "Abort1pc: not a 1PC primary's transaction");
  const auto plan = it->second.plan;
  if (wrote_prepare)
    WriteRollback(id, *plan, 0);
  else
    Remember(outcomes_, id, Outcome{false, 0});
  ForwardFinish(LiveOnly(plan->forward[id_]), id, false, 0);
  local_.erase(it);
  ReleaseLocks(id);
  AnswerNear1pc(*plan, id, false);
}

// First step of the 1PC decider: read the cut id (the marker) and log the
// data. TX_COMMIT follows in CommitStep, a separate event.
void Node::DeciderBegin(const TxId& id) {
  LocalTx& lt = local_.at(id);
  const TxPlan& plan = *lt.plan;
  WALCUT_ASSERT(plan.decider == id_ && (lt.role == Role::kDecider || lt.role == Role::kPrimary1pc),
                "DeciderBegin: this node is not the transaction's 1PC decider");
  lt.marker = cut_id_;
  EnterState(lt, TxState::kCommitting);
  LogData(id, plan.writes[id_]);
  PostStep(StepKind::kCommitStep, id);
}

void Node::OnDecide1pc(const Msg& m) {
  if (Refusing(m.tx) || local_.count(m.tx)) return Refuse(m);
  Join(m.tx, m.plan, Role::kDecider, TxState::kPrepared);
  DeciderBegin(m.tx);
}

void Node::OnDecided1pc(const Msg& m) {
  auto it = local_.find(m.tx);
  if (it == local_.end() || in_doubt_.count(m.tx) || it->second.st != TxState::kCommitting) return;
  if (!m.ok) return Abort1pc(m.tx, true);
  LocalTx& lt = it->second;
  lt.marker = m.marker;
  lt.outcome_known = true;
  lt.pending_from = LiveOnly(lt.plan->forward[id_]);
  ForwardFinish(lt.pending_from, m.tx, true, m.marker);
  const TxId id = m.tx;
  PostStep(StepKind::kCommitStep, id);
}

bool Node::NearGone(const TxPlan& plan) const {
  return !plan.one_phase &&
         (!host_.IsAlive(plan.id.node) || host_.IncarnationOf(plan.id.node) != plan.near_incarnation);
}

}  // namespace walcut::node::sim
