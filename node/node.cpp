// Node plumbing: opening and closing its WAL, the per-transaction records,
// sending and receiving messages (Deliver dispatches by type), local steps.

#include "node/node.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "node/host.h"

namespace walcut::node::sim {

std::string Node::Pending() const {
  std::string out;
  for (const auto& [id, t] : near_) {
    out += fmt::format(" near {}(plan={} 1pc={} pending={} voting={} decided={} sent={} acks={})", id.ToString(),
                       t.plan != nullptr, t.plan && t.plan->one_phase, t.pending, t.voting, t.decided, t.finish_sent,
                       t.ack_from.size());
  }
  for (const auto& [id, lt] : local_) {
    out += fmt::format(" local {}(role={} st={} pending_from={} doubt={})", id.ToString(), static_cast<int>(lt.role),
                       static_cast<int>(lt.st), lt.pending_from.size(), in_doubt_.count(id));
  }
  return out;
}

Status Node::Open(const walfmt::WriterOptions& wo) {
  auto w = walfmt::WalWriter::Create(wo, host_.now());
  if (!w.ok()) return w.status();
  wal_ = std::move(w.value());
  Log(walfmt::NodeStart{incarnation_, host_.now()});
  Sync();
  return Status::Ok();
}

Status Node::Close() {
  if (!wal_) return Status::Ok();
  Status st = wal_->Close();
  wal_.reset();
  return st;
}

namespace {
// The cut id of a CUT_START, CUT_FINISH or CUT_ABORT record.
std::optional<uint64_t> CutRecordId(const walfmt::Record& r) {
  if (const auto* c = std::get_if<walfmt::CutStart>(&r)) return c->cut_id;
  if (const auto* c = std::get_if<walfmt::CutFinish>(&r)) return c->cut_id;
  if (const auto* c = std::get_if<walfmt::CutAbort>(&r)) return c->cut_id;
  return std::nullopt;
}
}  // namespace

void Node::Log(const walfmt::Record& r) {
  if (host_.failed() || !wal_) return;
  wal_->set_time_us(host_.now());
  auto at = wal_->Append(r);
  if (!at.ok()) {
    host_.Fail(at.status());
    return;
  }
  ++host_.sum().records;
  if (const std::optional<uint64_t> k = CutRecordId(r)) {
    wal_cut_ = std::max(wal_cut_, *k);
    last_cut_segment_ = at->segment;
  }
}

void Node::LogData(const TxId& id, const std::vector<Write>& writes) {
  auto& d = std::get<walfmt::TxData>(data_rec_);
  d.tx = id;
  d.writes.assign(writes.begin(), writes.end());
  Log(data_rec_);
}

void Node::LogPrepare(const TxId& id, const std::vector<uint32_t>& participants) {
  auto& p = std::get<walfmt::TxPrepare>(prepare_rec_);
  p.tx = id;
  p.time_us = host_.now();
  p.participants.assign(participants.begin(), participants.end());
  Log(prepare_rec_);
}

void Node::LogCommit(const TxId& id, uint64_t marker, uint16_t flags, const std::vector<uint32_t>& participants) {
  if (!ready_ && marker > wal_cut_ + 1) CatchUpCut(marker);
  auto& c = std::get<walfmt::TxCommit>(commit_rec_);
  c.tx = id;
  c.marker = marker;
  c.time_us = host_.now();
  c.flags = flags;
  c.participants.assign(participants.begin(), participants.end());
  Log(commit_rec_);
}

void Node::LogRollback(const TxId& id, uint16_t flags, const std::vector<uint32_t>& participants) {
  auto& r = std::get<walfmt::TxRollback>(rollback_rec_);
  r.tx = id;
  r.time_us = host_.now();
  r.flags = flags;
  r.participants.assign(participants.begin(), participants.end());
  Log(rollback_rec_);
}

// The durability point. The writer keeps appended bytes in memory until
// WalWriter::Sync writes them; calling that on every simulated sync would cost
// a write(2) per prepare and per commit on every participant for nothing, as
// the simulation never fsyncs. Instead the node remembers how far it synced,
// and a simulated power loss (Crash) keeps exactly that prefix plus, maybe, a
// torn part of what follows. The file bytes are the same either way.
void Node::Sync() {
  if (!wal_) return;
  synced_ = wal_->end();
  host_.SyncRequested();
}

Status Node::FlushWal() { return wal_ ? wal_->Sync() : Status::Ok(); }

void Node::Send(Msg m) {
  m.from = id_;
  m.from_incarnation = incarnation_;
  m.cut_id = cut_id_;
  host_.Send(std::move(m));
}

void Node::Reply(const Msg& to, MsgType type, bool ok) {
  Msg r;
  r.type = type;
  r.to = to.from;
  r.tx = to.tx;
  r.ok = ok;
  Send(std::move(r));
}

void Node::SendToEach(const std::vector<uint32_t>& nodes, MsgType type, const TxId& id) {
  for (uint32_t n : nodes) {
    Msg m;
    m.type = type;
    m.to = n;
    m.tx = id;
    Send(std::move(m));
  }
}

void Node::AnswerNear1pc(const TxPlan& plan, const TxId& id, bool committed) {
  Msg r;
  r.type = MsgType::kCommit1pcResp;
  r.to = plan.id.node;
  r.tx = id;
  r.ok = committed;
  Send(std::move(r));
}

void Node::PostStep(StepKind kind, const TxId& id, uint64_t k) {
  host_.PostStep(id_, incarnation_, host_.StepDelay(), kind, id, k);
}
void Node::RunStep(StepKind kind, const TxId& id, uint64_t k) {
  switch (kind) {
    case StepKind::kDecide:
      Decide(id);
      break;
    case StepKind::kSendFinish:
      SendFinish(id);
      break;
    case StepKind::kCommitStep:
      CommitStep(id);
      break;
    case StepKind::kCutStartStep:
      CutStartStep(k);
      break;
    case StepKind::kNone:
      break;
  }
}
void Node::PostAfter(uint64_t delay_us, std::function<void()> fn) {
  host_.PostLocal(id_, incarnation_, delay_us, std::move(fn));
}

std::vector<uint32_t> Node::LiveOnly(const std::vector<uint32_t>& nodes) const {
  std::vector<uint32_t> out;
  for (uint32_t n : nodes) {
    if (host_.IsAlive(n)) out.push_back(n);
  }
  return out;
}

void Node::DeliverWhileNotReady(Msg& m) {
  // Restarted and not yet told the current cut: the node answers recovery
  // queries and refuses work. It must not adopt cut ids from messages now:
  // it could start a cut that the crash already made inconsistent. It
  // remembers the highest cut id it was shown (OnHelloResp).
  shown_cut_ = std::max(shown_cut_, m.cut_id);
  switch (m.type) {
    case MsgType::kHelloResp:
      OnHelloResp(m);
      break;
    case MsgType::kQuery:
      OnQuery(m);
      break;
    case MsgType::kQueryResp:
      OnQueryResp(m);
      break;
    case MsgType::kFinish:
    case MsgType::kFinishFwd:
      FinishInDoubt(m);
      break;
    default:
      Refuse(m);
      break;
  }
}

void Node::Deliver(Msg& m) {
  if (!ready_) {
    DeliverWhileNotReady(m);
    return;
  }
  // Rule 2: a message from a later cut starts that cut here before the
  // message is applied.
  if (m.cut_id > cut_id_) StartCut(m.cut_id);
  switch (m.type) {
    case MsgType::kLockRead:
      OnLockRead(m);
      break;
    case MsgType::kLockReadResp:
      OnLockReadResp(m);
      break;
    case MsgType::kRelease:
      ReleaseLocks(m.tx);
      break;
    case MsgType::kPrepare:
      OnPrepare(m);
      break;
    case MsgType::kPrepareFwd:
      OnPrepareFwd(m);
      break;
    case MsgType::kVote:
      OnVote(m);
      break;
    case MsgType::kVoteFwd:
      OnVoteFwd(m);
      break;
    case MsgType::kFinish:
      OnFinish(m);
      break;
    case MsgType::kFinishFwd:
      OnFinishFwd(m);
      break;
    case MsgType::kFinishAck:
      OnFinishAck(m);
      break;
    case MsgType::kFinishAckFwd:
      OnFinishAckFwd(m);
      break;
    case MsgType::kCommit1pc:
      OnCommit1pc(m);
      break;
    case MsgType::kDecide1pc:
      OnDecide1pc(m);
      break;
    case MsgType::kDecided1pc:
      OnDecided1pc(m);
      break;
    case MsgType::kCommit1pcResp:
      OnCommit1pcResp(m);
      break;
    case MsgType::kCutStart:
      OnCutStart(m);
      break;
    case MsgType::kCutDone:
      OnCutDone(m);
      break;
    case MsgType::kQuery:
      OnQuery(m);
      break;
    case MsgType::kQueryResp:
      OnQueryResp(m);
      break;
    case MsgType::kHello:
      OnHello(m);
      break;
    case MsgType::kHelloResp:
      break;
  }
}

void Node::OnHello(const Msg& m) {
  // Only the acting initiator knows whether a cut runs; a node that is
  // about to take over stays silent and the restarted node asks again.
  if (!initiating_) return;
  Msg r;
  r.type = MsgType::kHelloResp;
  r.to = m.from;
  r.marker = cut_id_;
  r.ok = init_k_ != 0;  // a cut is running
  r.participants = host_.Members();
  Send(std::move(r));
}

// A node that cannot take part answers requests with a refusal, so nobody
// waits for it: a conflict, a no vote, a failed 1PC.
void Node::Refuse(const Msg& m) {
  switch (m.type) {
    case MsgType::kLockRead:
      Reply(m, MsgType::kLockReadResp, false);
      break;
    case MsgType::kPrepare:
      Reply(m, MsgType::kVote, false);
      break;
    case MsgType::kPrepareFwd:
      Reply(m, MsgType::kVoteFwd, false);
      break;
    case MsgType::kCommit1pc:
      Reply(m, MsgType::kCommit1pcResp, false);
      break;
    case MsgType::kDecide1pc:
      Reply(m, MsgType::kDecided1pc, false);
      break;
    default:
      break;
  }
}

void Node::Remember(std::unordered_map<TxId, Outcome, TxIdHash>& map, const TxId& id, Outcome o) {
  // Never overwrites: a late rollback notice must not erase a commit.
  if (host_.faults()) map.emplace(id, o);
}

}  // namespace walcut::node::sim
