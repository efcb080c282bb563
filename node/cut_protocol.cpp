// A node's side of the cut protocol (docs/cut-rule.md section 1): step A
// (cut id and capture), step B (CUT_START and the tracked set), CUT_FINISH or
// CUT_ABORT, the report to the initiator; and the initiator's side: starting a
// cut, collecting the reports, taking over from a crashed initiator.

#include "node/node.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "node/host.h"

namespace walcut::node::sim {

// Step A (rule 3): the cut id changes and capturing starts in the same step.
// CUT_START is written by a later event (step B), so commits can land in
// between, as they would between two threads.
void Node::StartCut(uint64_t k) {
  // A restarted node that adopted a cut id without a record of it (the cut
  // ran while it was down) records it before joining a later one.
  if (k > wal_cut_ + 1) CatchUpCut(k - 1);
  cut_id_ = k;
  cut_ = CutState{};
  cut_.active = true;
  cut_.k = k;
  cut_.capturing = true;
  PostStep(StepKind::kCutStartStep, TxId{}, k);
}

// Step B: CUT_START, then the tracked set — everything prepared or committing
// here, plus everything captured since step A; capturing stops.
void Node::CutStartStep(uint64_t k) {
  if (!cut_.active || cut_.k != k) return;
  Log(walfmt::CutStart{k, host_.now()});
  for (const auto& [id, lt] : local_) {
    if (lt.st == TxState::kPrepared || lt.st == TxState::kCommitting) cut_.tracked.insert(id);
  }
  for (const auto& [id, marker] : cut_.captured) {
    if (marker >= k) {
      cut_.after.push_back(id);
      ++cut_.after_early;
    } else {
      cut_.before.push_back(id);
    }
  }
  cut_.captured.clear();
  cut_.capturing = false;
  MaybeFinishCut();
}

void Node::CutTxFinished(const TxId& id, bool committed, uint64_t marker, bool recovered) {
  if (!cut_.active) return;
  if (cut_.capturing) {
    if (recovered) {
      return AbortCut(walfmt::CutAbortReason::kRecoveredTx,
                      fmt::format("{} was finished by the recovery protocol while the cut started", id.ToString()));
    }
    if (committed) cut_.captured.emplace_back(id, marker);
    return;
  }
  auto it = cut_.tracked.find(id);
  if (it == cut_.tracked.end()) return;
  if (recovered) {
    return AbortCut(walfmt::CutAbortReason::kRecoveredTx,
                    fmt::format("tracked {} was finished by the recovery protocol", id.ToString()));
  }
  cut_.tracked.erase(it);
  if (committed) {
    if (marker >= cut_.k) {
      cut_.after.push_back(id);
    } else {
      cut_.before.push_back(id);
      ++cut_.before_late;
    }
  }
  MaybeFinishCut();
}

void Node::MaybeFinishCut() {
  if (!cut_.active || cut_.capturing || !cut_.tracked.empty()) return;
  std::sort(cut_.before.begin(), cut_.before.end());
  std::sort(cut_.after.begin(), cut_.after.end());
  RunSummary& s = host_.sum();
  s.before += cut_.before.size();
  s.after += cut_.after.size();
  s.after_commit_before_start += cut_.after_early;
  s.before_commit_after_start += cut_.before_late;
  Log(walfmt::CutFinish{cut_.k, host_.now(), std::move(cut_.before), std::move(cut_.after)});
  Sync();  // durable before reporting
  const uint64_t k = cut_.k;
  cut_ = CutState{};
  Report(k, true);
}

// Tells the initiator how this node ended cut k, and remembers it: a new
// initiator that took over asks again (the first report may have gone to the
// one that crashed).
void Node::Report(uint64_t k, bool ok) {
  reported_k_ = k;
  reported_ok_ = ok;
  Msg r;
  r.type = MsgType::kCutDone;
  // To the node that took the cut over, when one asked: this node may not
  // have learned yet that the old initiator died (crash sweep seed 9006: the
  // report went to the dead node, and the cut never completed).
  const bool to_taker = takeover_k_ == k && takeover_from_ != kNoNode && host_.IsAlive(takeover_from_) &&
                        host_.IncarnationOf(takeover_from_) == takeover_incarnation_;
  r.to = to_taker ? takeover_from_ : host_.Initiator();
  r.ok = ok;
  r.marker = k;
  Send(std::move(r));
}

void Node::OnCutStart(const Msg& m) {
  // Deliver has already joined the cut if it was new here (rule 2); that was
  // all an initiator's first request asks for. A request from an initiator
  // that took over (marker = the cut) also asks a node that already ended the
  // cut to report again: its first report may have gone to the crashed one.
  if (m.marker == 0 || m.marker != cut_id_) return;
  takeover_k_ = m.marker;
  takeover_from_ = m.from;
  takeover_incarnation_ = m.from_incarnation;
  if (cut_.active) return;  // it reports when it ends the cut, to the same node
  Report(m.marker, reported_k_ == m.marker && reported_ok_);
}

void Node::AbortCut(walfmt::CutAbortReason why, std::string detail) {
  WALCUT_ASSERT(cut_.active, "AbortCut: no cut is running here");
  const uint64_t k = cut_.k;
  Log(walfmt::CutAbort{k, host_.now(), why, std::move(detail)});
  Sync();
  ++host_.sum().cut_aborts;
  cut_ = CutState{};
  Report(k, false);
}

// The initiator crashed; this node is now the oldest live one. It takes over
// the cut the scheduler is waiting for, if any: that cut ran across the
// crash of a participant (the old initiator), so it is inconsistent, but
// every live node must still end it before the next one starts (rule 1).
// Nodes that never heard of it join it now; nodes that already ended it
// report again.
void Node::TakeOver() {
  initiating_ = true;
  ++host_.sum().initiator_failovers;
  const uint64_t k = host_.RunningCut();
  if (k == 0) return;
  ++host_.sum().cuts_taken_over;
  init_k_ = k;
  init_inconsistent_ = true;
  init_lost_node_ = true;
  init_why_ =
      fmt::format("initiator node {} crashed while cut {} ran; node {} took over", host_.FailedInitiator(), k, id_);
  expected_.assign(host_.topo().nodes(), false);
  remaining_ = 0;
  for (uint32_t n = 0; n < host_.topo().nodes(); ++n) {
    if (n == id_ || host_.IsReady(n)) {
      expected_[n] = true;
      ++remaining_;
    }
  }
  if (cut_id_ < k) StartCut(k);
  if (!cut_.active) {
    // Already ended here (whatever the report said, the cut is inconsistent).
    NoLongerExpected(id_);
  }
  for (uint32_t n = 0; n < host_.topo().nodes(); ++n) {
    if (n == id_ || !expected_[n]) continue;
    Msg m;
    m.type = MsgType::kCutStart;
    m.to = n;
    m.marker = k;  // a takeover: report again if the cut already ended there
    Send(std::move(m));
  }
  MaybeCompleteCut();
}

void Node::InitiateCut(uint64_t k) {
  init_k_ = k;
  init_inconsistent_ = false;
  init_lost_node_ = false;
  init_why_.clear();
  expected_.assign(host_.topo().nodes(), false);
  remaining_ = 0;
  for (uint32_t n = 0; n < host_.topo().nodes(); ++n) {
    if (n != id_ && !host_.IsReady(n)) {
      // The simulator saw every node ready, but this event runs later: a
      // node that crashed in between never joins. A real initiator may also
      // see a node restarting (up, not ready yet): it does not wait for it,
      // and that node ends the cut as inconsistent once ready (OnHelloResp).
      // Either way the cut cannot be consistent.
      init_inconsistent_ = true;
      init_lost_node_ = true;
      init_why_ = host_.IsAlive(n) ? fmt::format("node {} was restarting when cut {} started", n, k)
                                   : fmt::format("node {} was down when cut {} started", n, k);
      continue;
    }
    expected_[n] = true;
    ++remaining_;
  }
  if (cut_id_ < k) StartCut(k);
  for (uint32_t n = 0; n < host_.topo().nodes(); ++n) {
    if (n == id_) continue;
    Msg m;
    m.type = MsgType::kCutStart;
    m.to = n;
    Send(std::move(m));
  }
}

// The initiator's count of the reports it awaits: node n is off the list.
void Node::NoLongerExpected(uint32_t n) {
  WALCUT_ASSERT(n < expected_.size() && expected_[n] && remaining_ > 0,
                "initiator: a node taken off the list of expected reports twice");
  expected_[n] = false;
  --remaining_;
}

void Node::OnCutDone(const Msg& m) {
  if (m.marker != init_k_ || init_k_ == 0 || m.from >= expected_.size() || !expected_[m.from]) return;
  NoLongerExpected(m.from);
  if (!m.ok) init_inconsistent_ = true;
  MaybeCompleteCut();
}

void Node::MaybeCompleteCut() {
  if (init_k_ == 0 || remaining_ > 0) return;
  const uint64_t k = init_k_;
  if (init_lost_node_) {
    // The crashed node may never write anything for this cut: the initiator
    // records why the cut is inconsistent.
    Log(walfmt::CutAbort{k, host_.now(), walfmt::CutAbortReason::kParticipantLost, init_why_});
    Sync();
    ++host_.sum().cut_aborts;
  }
  init_k_ = 0;
  host_.CutCompleted(k, !init_inconsistent_);
}

}  // namespace walcut::node::sim
