// Failures: a node's power loss (Crash), its restart from its WAL (Restart,
// LoadSnapshot, then asking the initiator for the current cut), and what the
// other nodes do when they learn of a crash (OnNodeFailed).

#include "node/node.h"

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <fmt/format.h>

#include "node/host.h"
#include "walfmt/reader.h"
#include "walfmt/segment.h"
#include "walfmt/snapshot.h"

namespace walcut::node::sim {

std::pair<uint32_t, uint32_t> Node::Crash() {
  Rng& rng = host_.rng();
  const walfmt::Lsn end = wal_->end();
  const uint64_t unsynced = wal_->unsynced_bytes();
  const uint64_t flushed = end.offset - unsynced;  // of the current segment, already in the file
  uint64_t keep = 0;
  if (synced_.segment == end.segment && synced_.offset > flushed) keep = synced_.offset - flushed;
  const uint64_t rest = unsynced - keep;
  // Half the time the unsynced tail is lost entirely; otherwise a random part
  // of it reached the disk, often ending inside a record (a torn tail).
  if (rest > 0 && rng.Below(2) == 0) keep += rng.Below(rest + 1);
  if (Status st = wal_->SimulateCrash(keep); !st.ok()) host_.Fail(st);
  wal_.reset();
  uint32_t lost_load = 0, lost = 0;
  for (const auto& [id, t] : near_) ++(t.load ? lost_load : lost);
  // Whatever this node prepared and may yet commit from a rebuilt plan after
  // the restart: TX_PREPARE is written while the transaction is in local_,
  // and it leaves local_ only committed (recorded) or rolled back.
  for (const auto& [id, lt] : local_) {
    if (lt.plan && !lt.plan->rebuilt && !lt.plan->recorded) host_.KeepUndecided(lt.plan);
  }
  kv_.clear();
  locks_.clear();
  held_.clear();
  near_.clear();
  local_.clear();
  outcomes_.clear();
  near_outcomes_.clear();
  in_doubt_.clear();
  cut_ = CutState{};
  takeover_k_ = 0;
  takeover_from_ = kNoNode;
  initiating_ = false;
  init_k_ = 0;
  expected_.clear();
  remaining_ = 0;
  alive_ = false;
  ready_ = false;
  ++incarnation_;
  return {lost_load, lost};
}

Status Node::Restart(const walfmt::WriterOptions& wo) {
  alive_ = true;
  ready_ = false;
  auto w = walfmt::WalWriter::Open(wo, host_.now());  // cuts the torn tail off
  if (!w.ok()) return w.status();
  wal_ = std::move(w.value());
  synced_ = wal_->end();
  Replayed r;
  last_cut_segment_ = UINT64_MAX;
  if (Status st = ReplayWal(wo.wal_dir, r); !st.ok()) return st;
  // A real node starts with nothing in memory: its incarnation follows the
  // last NODE_START in its WAL, and it joins as the youngest node, never as
  // the initiator. (The simulator's nodes already count their crashes.)
  incarnation_ = std::max(incarnation_, r.incarnations);
  initiating_ = false;

  // Transaction ids stay unique across restarts: the incarnation is in the
  // high bits of the sequence.
  next_seq_ = (static_cast<uint64_t>(incarnation_) << 40) + 1;
  cut_id_ = r.max_cut;
  // The last cut this WAL records. Recovered from a full snapshot, the
  // segments before it may be gone, but retention keeps the one holding the
  // last cut record (PruneWal), and cut ids only grow along a WAL.
  wal_cut_ = r.max_cut;
  // A report made before the crash counts for nothing now: the crash made
  // that cut inconsistent if it was still running.
  reported_k_ = last_finished_cut_;
  reported_ok_ = false;
  Log(walfmt::NodeStart{incarnation_, host_.now()});
  RollBackUnprepared(r);
  Sync();
  RelockPrepared(r);
  for (const auto& [id, parts] : r.prepared) StartRecovery(id);
  SendHello();
  return Status::Ok();
}

// Rebuilds the state from the WAL: committed data applied in WAL order,
// outcomes remembered, prepared-but-undecided transactions kept aside in `out`.
// With WAL retention the segments before the latest full snapshot may be
// gone: at each SNAPSHOT record the state is replaced by that snapshot's
// file, so what counts is the latest snapshot plus the WAL after it.
Status Node::ReplayWal(const std::string& wal_dir, Replayed& out) {
  auto segs = walfmt::ListSegments(wal_dir, nullptr);
  if (!segs.ok()) return segs.status();
  std::map<TxId, std::vector<Write>>& data = out.data;
  std::map<TxId, std::vector<uint32_t>>& prepared = out.prepared;
  uint64_t& max_cut = out.max_cut;
  bool from_snapshot = false;
  Status bad;
  walfmt::NodeReadOptions ro;
  ro.mode = walfmt::RecoveryMode::kTolerateTornTail;
  auto read = walfmt::ReadNodeWal(
      *segs, ro,
      [&](const walfmt::RecordView& v) {
        auto rec = walfmt::DecodePayload(v.type, v.payload);
        if (!rec.ok()) {
          bad = rec.status();
          return false;
        }
        if (auto* sn = std::get_if<walfmt::Snapshot>(&rec.value());
            sn != nullptr && host_.opt().wal_retention != WalRetention::kKeep) {
          bad = LoadSnapshot(*sn, v.lsn, data, prepared);
          from_snapshot = bad.ok();
          return bad.ok();
        }
        std::visit(
            [&](auto& r) {
              using T = std::decay_t<decltype(r)>;
              if constexpr (std::is_same_v<T, walfmt::TxData>) {
                auto& d = data[r.tx];
                d.insert(d.end(), r.writes.begin(), r.writes.end());
              } else if constexpr (std::is_same_v<T, walfmt::TxPrepare>) {
                prepared[r.tx] = r.participants;
              } else if constexpr (std::is_same_v<T, walfmt::TxCommit>) {
                for (const Write& w : data[r.tx]) {
                  if (w.op == walfmt::WriteOp::kDelete)
                    kv_.erase(w.key);
                  else
                    kv_[w.key] = w.value;
                }
                outcomes_[r.tx] = Outcome{true, r.marker};
                data.erase(r.tx);
                prepared.erase(r.tx);
              } else if constexpr (std::is_same_v<T, walfmt::TxRollback>) {
                outcomes_[r.tx] = Outcome{false, 0};
                data.erase(r.tx);
                prepared.erase(r.tx);
              } else if constexpr (std::is_same_v<T, walfmt::NodeStart>) {
                out.incarnations = std::max(out.incarnations, r.incarnation + 1);
              } else if constexpr (std::is_same_v<T, walfmt::CutStart>) {
                max_cut = std::max(max_cut, r.cut_id);
                last_cut_segment_ = v.lsn.segment;
                open_cut_ = r.cut_id;
              } else if constexpr (std::is_same_v<T, walfmt::CutFinish> || std::is_same_v<T, walfmt::CutAbort>) {
                max_cut = std::max(max_cut, r.cut_id);
                last_cut_segment_ = v.lsn.segment;
                if (open_cut_ == r.cut_id) open_cut_ = 0;
                last_finished_cut_ = std::max(last_finished_cut_, r.cut_id);
              }
            },
            rec.value());
        return true;
      },
      nullptr);
  if (!bad.ok()) return bad;
  if (read.failed) return Status::Corruption(fmt::format("node {}: cannot recover: its WAL is damaged", id_));
  if (from_snapshot) ++host_.sum().snapshot_recoveries;
  out.from_snapshot = from_snapshot;
  return Status::Ok();
}

// Data without a prepare: this node never voted (or, as a 1PC decider, never
// committed), so nobody can have committed it: roll it back here.
void Node::RollBackUnprepared(const Replayed& r) {
  for (const auto& [id, writes] : r.data) {
    if (r.prepared.count(id)) continue;
    Log(walfmt::TxRollback{id, host_.now(), walfmt::kTxFlagRecovered, {}});
    outcomes_[id] = Outcome{false, 0};
    ++host_.sum().recovered_rollbacks;
  }
}

// Prepared and undecided: a rebuilt plan (this node's share only), the keys
// this node is primary of locked again; the recovery protocol asks the others.
void Node::RelockPrepared(Replayed& r) {
  for (const auto& [id, parts] : r.prepared) {
    auto plan = std::make_shared<TxPlan>();
    plan->id = id;
    plan->participants = parts;
    plan->writes.resize(host_.topo().nodes());
    plan->forward.resize(host_.topo().nodes());
    plan->forwarder.assign(host_.topo().nodes(), kNoNode);
    plan->writes[id_] = r.data[id];
    plan->rebuilt = true;
    Join(id, plan, Role::kRecovered, TxState::kPrepared);
    auto& held = held_[id];
    for (const Write& w : plan->writes[id_]) {
      if (host_.topo().PrimaryOf(w.key) == id_ && locks_.emplace(w.key, id).second) held.push_back(w.key);
    }
  }
}

// A SNAPSHOT record met while replaying the WAL (retention on): the state up
// to it is the snapshot file's. The snapshot was taken quiesced, so nothing
// can be undecided at that point; outcomes of earlier transactions are
// forgotten (nobody asks about them: every participant had finished them).
// Cut ids below the snapshot's are not needed before the initiator tells the
// current cut (OnHelloResp): every cut up to then had completed, and rule 4,
// the only use of the node's own cut id while it recovers, waits for that.
Status Node::LoadSnapshot(const walfmt::Snapshot& rec, const walfmt::Lsn& at, std::map<TxId, std::vector<Write>>& data,
                          std::map<TxId, std::vector<uint32_t>>& prepared) {
  if (!data.empty() || !prepared.empty()) {
    return Status::Corruption(
        fmt::format("node {}: cannot recover: {} undecided transactions before SNAPSHOT({}) at {}", id_,
                    data.size() + prepared.size(), rec.name, at.ToString()));
  }
  const std::string path = fmt::format("{}/snapshots/{}/node-{}.snap", host_.opt().dir, rec.name, id_);
  kv_.clear();
  outcomes_.clear();
  auto f = walfmt::ReadSnapshotFile(path, [&](std::string_view k, std::string_view v) { kv_[k] = std::string(v); });
  if (!f.ok()) return Status::Corruption(fmt::format("node {}: cannot recover: {}", id_, f.status().message()));
  if (f->node_id != id_ || f->wal_position != at || f->fingerprint != rec.fingerprint || f->name != rec.name) {
    return Status::Corruption(fmt::format(
        "node {}: cannot recover: {} does not match SNAPSHOT({}) at {} (node {}, position {}, fingerprint {:016x} "
        "instead of {:016x})",
        id_, path, rec.name, at.ToString(), f->node_id, f->wal_position.ToString(), f->fingerprint, rec.fingerprint));
  }
  return Status::Ok();
}

// The initiator may be down or changing: ask again until one answers.
void Node::SendHello() {
  if (ready_) return;
  Msg h;
  h.type = MsgType::kHello;
  h.to = host_.Initiator();
  Send(std::move(h));
  PostAfter(host_.opt().recovery_retry_us, [this] { SendHello(); });
}

void Node::OnHelloResp(const Msg& m) {
  if (ready_) return;
  const uint64_t current = m.marker;
  const bool running = m.ok;
  // The cut this node was in when it crashed cannot be consistent: its
  // capture and tracked set were lost with its memory.
  if (open_cut_ != 0 && !(running && open_cut_ == current)) {
    Log(walfmt::CutAbort{open_cut_, host_.now(), walfmt::CutAbortReason::kNodeRestart,
                         fmt::format("node {} restarted (incarnation {})", id_, incarnation_)});
    ++host_.sum().cut_aborts;
  }
  if (running && last_finished_cut_ < current) {
    Log(walfmt::CutAbort{current, host_.now(), walfmt::CutAbortReason::kNodeRestart,
                         fmt::format("node {} restarted (incarnation {}) while the cut ran", id_, incarnation_)});
    ++host_.sum().cut_aborts;
    // Its report on the running cut, should a new initiator ask for it.
    reported_k_ = current;
    reported_ok_ = false;
  }
  if (!running && current > wal_cut_ + 1) CatchUpCut(current);
  cut_id_ = std::max(cut_id_, current);
  // The initiator may have started a later cut after it answered (a real
  // initiator learns that this node is ready only from its messages, and
  // does not wait for it): other nodes' messages showed its id. This node
  // was not in that cut — it was not ready — so it ends it as inconsistent
  // and adopts its id; a transaction cannot then be in the cut on one of
  // its participants and outside it on this one (docs/cut-rule.md).
  if (shown_cut_ > cut_id_ && shown_cut_ > last_finished_cut_) {
    Log(walfmt::CutAbort{shown_cut_, host_.now(), walfmt::CutAbortReason::kNodeRestart,
                         fmt::format("node {} restarted (incarnation {}); cut {} began before it was ready", id_,
                                     incarnation_, shown_cut_)});
    ++host_.sum().cut_aborts;
    cut_id_ = shown_cut_;
    reported_k_ = shown_cut_;
    reported_ok_ = false;
  }
  Sync();
  open_cut_ = 0;
  shown_cut_ = 0;
  ready_ = true;
  host_.NodeReady(id_);
}

// Whole cuts ran while this node was down or recovering (a real initiator
// does not wait for a dead node; the simulator never starts a cut then), up
// to cut k. They are inconsistent (their initiator recorded why). This node
// writes CUT_START(k) and CUT_ABORT(k) to record that it skipped to k, before anything that
// needs it: a commit marked with a cut more than one above the last cut in
// its WAL, or joining a cut more than one above it.
void Node::CatchUpCut(uint64_t k) {
  if (k <= wal_cut_) return;
  if (open_cut_ != 0) {
    Log(walfmt::CutAbort{open_cut_, host_.now(), walfmt::CutAbortReason::kNodeRestart,
                         fmt::format("node {} restarted (incarnation {})", id_, incarnation_)});
    ++host_.sum().cut_aborts;
    open_cut_ = 0;
  }
  // CUT_START then CUT_ABORT: the node reached cut k (a reader counts the
  // cuts a node reached by their CUT_START) and took no part in it.
  const uint64_t from = wal_cut_ + 1;
  Log(walfmt::CutStart{k, host_.now()});
  Log(walfmt::CutAbort{
      k, host_.now(), walfmt::CutAbortReason::kNodeRestart,
      fmt::format("node {} restarted (incarnation {}); cuts {}..{} ran while it was down or recovering", id_,
                  incarnation_, from, k)});
  ++host_.sum().cut_aborts;
  cut_id_ = std::max(cut_id_, k);
  last_finished_cut_ = std::max(last_finished_cut_, k);
  reported_k_ = k;
  reported_ok_ = false;
}

void Node::OnNodeFailed(uint32_t x) {
  NearLostNode(x);
  ParticipantLostNode(x);

  // Locks taken for a near node that is gone, by transactions that never
  // prepared here, are dropped.
  std::vector<TxId> orphans;
  for (const auto& [id, keys] : held_) {
    if (id.node == x && !local_.count(id)) orphans.push_back(id);
  }
  std::sort(orphans.begin(), orphans.end());
  for (const TxId& id : orphans) ReleaseLocks(id);

  // The oldest live node takes over when the initiator is gone.
  if (!initiating_ && host_.Initiator() == id_) TakeOver();

  // The initiator: a cut running across a crash cannot be consistent.
  if (initiating_ && init_k_ != 0 && x < expected_.size() && expected_[x]) {
    NoLongerExpected(x);
    init_inconsistent_ = true;
    init_lost_node_ = true;
    init_why_ = fmt::format("node {} crashed while cut {} ran", x, init_k_);
    MaybeCompleteCut();
  }
}

// The keys of an unordered map of transactions, sorted: the order in which
// they are handled must not depend on the hash table.
namespace {
template <typename Map>
std::vector<TxId> SortedIds(const Map& m) {
  std::vector<TxId> ids;
  ids.reserve(m.size());
  for (const auto& [id, v] : m) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  return ids;
}
}  // namespace

// The near side of OnNodeFailed: this node's own transactions that node x
// took part in, in id order (deterministic).
void Node::NearLostNode(uint32_t x) {
  for (const TxId& id : SortedIds(near_)) {
    auto it = near_.find(id);
    if (it == near_.end()) continue;
    NearTx& t = it->second;
    if (!t.plan) {
      if (std::binary_search(t.contacted.begin(), t.contacted.end(), x)) AbortTx(id, AbortReason::kParticipantLost);
      continue;
    }
    const auto& parts = t.plan->participants;
    if (!std::binary_search(parts.begin(), parts.end(), x)) continue;
    if (t.plan->one_phase) {
      if (x == t.plan->primaries[0]) {
        // The primary decides what happens now (via its decider); this near
        // node cannot learn it. The client sees the transaction as lost.
        ++host_.sum().lost_at_near;
        EndNear(it, false, AbortReason::kParticipantLost, true);
      }
      continue;
    }
    if (!t.decided) {
      t.failed = true;
      if (t.voting) {
        t.voting = false;
        PostStep(StepKind::kDecide, id);
      }
      continue;
    }
    if (t.finish_sent) {
      t.ack_from.erase(std::remove(t.ack_from.begin(), t.ack_from.end(), x), t.ack_from.end());
      if (t.ack_from.empty()) CompleteCommit(id);
    }
  }
}

// The participant side of OnNodeFailed: transactions this node takes part in
// that waited for node x, in id order.
void Node::ParticipantLostNode(uint32_t x) {
  for (const TxId& id : SortedIds(local_)) {
    auto it = local_.find(id);
    if (it == local_.end() || in_doubt_.count(id)) continue;
    LocalTx& lt = it->second;
    const TxPlan& plan = *lt.plan;
    auto& pf = lt.pending_from;
    const bool was_pending = std::find(pf.begin(), pf.end(), x) != pf.end();
    pf.erase(std::remove(pf.begin(), pf.end(), x), pf.end());
    switch (lt.role) {
      case Role::kPrimary2pc:
        if (lt.st == TxState::kPrepared) {
          if (x == plan.id.node) {
            StartRecovery(id);
          } else if (was_pending) {
            lt.all_yes = false;
            MaybeVote(id);
          }
        } else if (lt.st == TxState::kCommitted) {
          MaybeAck(id);
        }
        break;
      case Role::kBackup:
        if (lt.st == TxState::kPrepared && (x == plan.forwarder[id_] || (!plan.one_phase && x == plan.id.node) ||
                                            (plan.one_phase && x == plan.decider))) {
          StartRecovery(id);
        }
        break;
      case Role::kPrimary1pc:
        if (lt.st == TxState::kPreparing1pc) {
          if (was_pending) lt.all_yes = false;
          MaybeVote(id);
        } else if (lt.st == TxState::kCommitting && !lt.outcome_known && x == plan.decider) {
          StartRecovery(id);
        } else if (lt.st == TxState::kCommitted) {
          MaybeAck(id);
        }
        break;
      case Role::kDecider:
      case Role::kRecovered:
        break;
    }
  }
}

}  // namespace walcut::node::sim
