// The recovery protocol: a participant left with a prepared transaction whose
// outcome it cannot learn the normal way (its near node, forwarder or decider
// crashed, or it restarted) asks every other participant and the near node,
// and decides by the table above Node::Evaluate.

#include "node/node.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "node/host.h"

namespace walcut::node::sim {

// A safety net under the failure handling: a transaction prepared here that
// has not moved for far longer than any fault-free transaction takes goes to
// the recovery protocol, which is safe at any time (it learns the outcome
// from the near node if that is alive). Fault-free runs never get here.
void Node::WatchStuck(const TxId& id) {
  if (!host_.faults()) return;  // nothing gets stuck without faults (and the timer events are not free)
  constexpr uint64_t kStuckUs = 200000;
  const auto st = local_.at(id).st;
  PostAfter(kStuckUs, [this, id, st] {
    auto it = local_.find(id);
    if (it == local_.end() || it->second.st != st || in_doubt_.count(id)) return;
    ++host_.sum().stuck_recoveries;
    StartRecovery(id);
  });
}

void Node::StartRecovery(const TxId& id) {
  if (in_doubt_.count(id)) return;
  in_doubt_[id] = Recovery{};
  RecoveryRound(id);
}

void Node::RecoveryRound(const TxId& id) {
  auto rit = in_doubt_.find(id);
  if (rit == in_doubt_.end()) return;
  Recovery& r = rit->second;
  constexpr uint32_t kMaxRounds = 100000;  // ~5 minutes of virtual time at the default retry
  if (++r.attempts > kMaxRounds) {
    std::string answers;
    for (const auto& [n, a] : r.answers) {
      answers += fmt::format(" {}:p{}/n{}/m{}", n, static_cast<int>(a.p), static_cast<int>(a.n), a.marker);
    }
    host_.Fail(Status::Internal(fmt::format(
        "node {}: recovery of {} did not converge (seed {}); participants {}, "
        "last answers{}, ready {}",
        id_, id.ToString(), host_.opt().seed, fmt::join(local_.at(id).plan->participants, ","), answers, ready_)));
    return;
  }
  ++r.round;
  r.answers.clear();
  r.asked.clear();
  const TxPlan& plan = *local_.at(id).plan;
  std::vector<uint32_t> targets = plan.participants;
  if (!std::binary_search(targets.begin(), targets.end(), id.node)) {
    targets.insert(std::upper_bound(targets.begin(), targets.end(), id.node), id.node);
  }
  for (uint32_t y : targets) {
    if (y == id_ || !host_.IsAlive(y)) continue;
    r.asked.push_back(y);
    Msg q;
    q.type = MsgType::kQuery;
    q.to = y;
    q.tx = id;
    q.round = r.round;
    q.participants = plan.participants;
    Send(std::move(q));
  }
  const uint32_t round = r.round;
  PostAfter(host_.opt().recovery_retry_us, [this, id, round] {
    auto it = in_doubt_.find(id);
    if (it == in_doubt_.end() || it->second.round != round) return;
    Evaluate(id);
    if (in_doubt_.count(id)) RecoveryRound(id);
  });
}

void Node::OnQuery(const Msg& m) {
  Msg r;
  r.type = MsgType::kQueryResp;
  r.to = m.from;
  r.tx = m.tx;
  r.round = m.round;
  if (auto o = outcomes_.find(m.tx); o != outcomes_.end()) {
    r.pstate = o->second.committed ? PState::kCommitted : PState::kRolledBack;
    r.marker = o->second.marker;
  } else if (auto l = local_.find(m.tx); l != local_.end()) {
    const LocalTx& lt = l->second;
    switch (lt.st) {
      case TxState::kPreparing1pc:
      case TxState::kPrepared:
        r.pstate = PState::kPrepared;
        break;
      case TxState::kCommitting:
        r.pstate = lt.outcome_known ? PState::kCommitted : PState::kBusy;
        r.marker = lt.marker;
        break;
      case TxState::kCommitted:
        r.pstate = PState::kCommitted;
        r.marker = lt.marker;
        break;
    }
  } else if (std::binary_search(m.participants.begin(), m.participants.end(), id_)) {
    // Never prepared here: from now on this node refuses to, so the
    // transaction can only roll back.
    r.pstate = PState::kUnknown;
    outcomes_[m.tx] = Outcome{false, 0};
  }
  if (m.tx.node == id_) {
    const Answer a = NearAnswer(m.tx);
    r.nstate = a.n;
    if (a.n == NState::kCommit) r.marker = a.marker;
  }
  Send(std::move(r));
}

Node::Answer Node::NearAnswer(const TxId& id) const {
  Answer a;
  if (auto o = near_outcomes_.find(id); o != near_outcomes_.end()) {
    a.n = o->second.committed ? NState::kCommit : NState::kRollback;
    a.marker = o->second.marker;
  } else if (auto n = near_.find(id); n != near_.end() && (!n->second.plan || !n->second.plan->one_phase)) {
    a.n = NState::kUndecided;
  }
  return a;
}

void Node::OnQueryResp(const Msg& m) {
  auto it = in_doubt_.find(m.tx);
  if (it == in_doubt_.end() || it->second.round != m.round) return;
  Recovery& r = it->second;
  r.answers[m.from] = Answer{m.pstate, m.nstate, m.marker};
  if (r.answers.size() == r.asked.size()) Evaluate(m.tx);
}

// The decision table of the recovery protocol, first match wins:
//  1. someone committed it, or the near node decided commit -> commit, same marker
//  2. someone rolled it back or never prepared it (and now refuses to), or the
//     near node decided rollback                           -> roll back
//  3. the near node is still collecting votes, someone is deciding right now,
//     or a participant did not answer (down: it may have committed)  -> ask again
//  4. every participant prepared and the near node is gone -> the lowest
//     participant commits with its own cut id as the marker; the others learn
//     it by rule 1 in their next round.
void Node::Evaluate(const TxId& id) {
  auto rit = in_doubt_.find(id);
  if (rit == in_doubt_.end()) return;
  const Recovery& r = rit->second;
  const TxPlan& plan = *local_.at(id).plan;
  bool commit = false, rollback = false, all_prepared = true, wait = false;
  uint64_t marker = 0;
  std::map<uint32_t, Answer> answers = r.answers;
  // This node may be the near node itself: its own decision counts too.
  if (id.node == id_) answers[id_] = NearAnswer(id);
  for (const auto& [node, a] : answers) {
    if (a.p == PState::kCommitted || a.n == NState::kCommit) {
      commit = true;
      marker = a.marker;
    }
    if (a.p == PState::kRolledBack || a.p == PState::kUnknown || a.n == NState::kRollback) rollback = true;
    if (a.p == PState::kBusy || a.n == NState::kUndecided) wait = true;
  }
  for (uint32_t p : plan.participants) {
    if (p == id_) continue;
    auto a = r.answers.find(p);
    if (a == r.answers.end() || a->second.p != PState::kPrepared) all_prepared = false;
  }
  // Rule 4 needs the near node gone: down when the round asked (so not
  // asked), or restarted and forgetful (it answers kNoSay). A near node that
  // was asked and has not answered yet (a slow reply, this is the timeout's
  // evaluation) may have decided rollback: wait for it (soak seed 25399).
  if (id.node != id_ && !answers.count(id.node) &&
      std::find(r.asked.begin(), r.asked.end(), id.node) != r.asked.end()) {
    wait = true;
  }
  if (commit && rollback) {
    std::string text;
    for (const auto& [n, a] : answers) {
      text += fmt::format(" {}:p{}/n{}/m{}", n, static_cast<int>(a.p), static_cast<int>(a.n), a.marker);
    }
    host_.Fail(Status::Internal(fmt::format("node {}: {} is both committed and rolled back (seed {}); answers{}", id_,
                                            id.ToString(), host_.opt().seed, text)));
    return;
  }
  if (commit) return Resolve(id, true, marker);
  if (rollback) return Resolve(id, false, 0);
  if (wait || !all_prepared || !ready_) return;
  if (id_ == plan.participants.front()) Resolve(id, true, cut_id_);
}

void Node::Resolve(const TxId& id, bool commit, uint64_t marker) {
  auto it = local_.find(id);
  WALCUT_ASSERT(it != local_.end() && in_doubt_.count(id), "Resolve: not a transaction in doubt here");
  const auto plan = it->second.plan;
  const Role role = it->second.role;
  if (commit) {
    Log(walfmt::TxCommit{
        id, marker, host_.now(),
        static_cast<uint16_t>((plan->one_phase ? walfmt::kTxFlagOnePhase : 0) | walfmt::kTxFlagRecovered),
        plan->participants});
    Sync();
    for (const Write& w : plan->writes[id_]) {
      if (w.op == walfmt::WriteOp::kDelete)
        kv_.erase(w.key);
      else
        kv_[w.key] = w.value;
    }
    outcomes_[id] = Outcome{true, marker};
    host_.RecordCommit(*plan, marker, true);
    ++host_.sum().recovered_commits;
    CutTxFinished(id, true, marker, true);
  } else {
    WriteRollback(id, *plan, walfmt::kTxFlagRecovered);
    ++host_.sum().recovered_rollbacks;
  }
  in_doubt_.erase(id);
  local_.erase(id);
  ReleaseLocks(id);
  if (role == Role::kPrimary1pc) AnswerNear1pc(*plan, id, commit);
}

}  // namespace walcut::node::sim
