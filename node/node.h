// Internal to node/: one simulated node (class Node), with its near
// (coordinator), primary, backup and 1PC decider roles, its locks, its WAL and
// its side of the cut protocol. Its methods live in one file per part:
//   node.cpp           plumbing: WAL records, messages, dispatch by type
//   coordinator.cpp    the near node: locks and reads, the commit plan, 2PC decision
//   participant.cpp    primaries, backups and the 1PC decider: prepare, commit, acks
//   cut_protocol.cpp   steps A and B, the tracked set, CUT_FINISH / CUT_ABORT, the initiator
//   crash_restart.cpp  power loss, restart from the WAL, learning of other nodes' crashes
//   recovery.cpp       the recovery protocol for transactions left undecided
//   full_snapshot.cpp  the SNAPSHOT record and file, WAL retention
// The node does no I/O but its WAL and reads no clock: it acts through a Host
// (host.h), which the simulator (cluster_driver.h) and a real node process implement.
//
// Why transactions are correct with respect to the cut (docs/cut-rule.md section 1,
// rule 5), in terms of this code — for node i, cut k and a committed T:
//  * TX_COMMIT(T) before CUT_START(k) with m(T) >= k: the decider had cut id
//    >= k, so the message that brought the decision to i carried >= k and i
//    ran StartCut(k) (step A) before handling it. The commit record was thus
//    written between step A and step B: it was captured, so T is in `after`.
//  * TX_COMMIT(T) after CUT_START(k) with m(T) < k: i wrote TX_PREPARE (or,
//    for 1PC, entered its commit) before step B; otherwise the vote (or the
//    1PC request) leaving i would have carried cut id >= k to the decider and
//    m(T) would be >= k. So T was tracked at step B and lands in `before`.
// The other two cases need no set. Locks are held at the primaries until every
// participant committed (the near node releases them after the last
// acknowledgement), so conflicting transactions commit in the same order on
// every node and replaying a node's WAL in order gives its state. A primary
// that resolves a transaction by the recovery protocol unlocks at once; a
// backup then refuses to prepare a key another transaction still holds
// prepared there (PreparedOnSameKey), which keeps that order.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "node/cluster.h"
#include "node/host.h"
#include "node/messages.h"
#include "node/scheduler.h"
#include "node/string_map.h"
#include "node/workload.h"
#include "walfmt/assert.h"
#include "walfmt/lsn.h"
#include "walfmt/record.h"
#include "walfmt/writer.h"

namespace walcut::node::sim {

class Node {
 public:
  Node(Host& host, uint32_t id) : host_(host), id_(id), initiating_(id == kFirstInitiator) {}

  Status Open(const walfmt::WriterOptions& wo);
  Status Close();
  void Deliver(Msg& m);

  // Driver entry points.
  void BeginTx(std::shared_ptr<Program> prog, bool load);
  void InitiateCut(uint64_t k);
  // Power loss: keeps what was synced (and maybe part of the rest), forgets
  // everything in memory. Returns the near transactions lost (load, workload).
  std::pair<uint32_t, uint32_t> Crash();
  // Restart: reopen the WAL (its torn tail cut off), rebuild state from it,
  // resolve undecided transactions, learn the current cut from the initiator.
  Status Restart(const walfmt::WriterOptions& wo);
  void OnNodeFailed(uint32_t x);
  // Writes what the WAL holds in memory to its file, with fdatasync when the
  // writer was opened with fsync: a real node's group commit, after the
  // events of a batch asked for it (Host::SyncRequested). The simulator never
  // calls it (its nodes' files get their bytes at Close).
  Status FlushWal();
  // Quiesced: no transaction is open here.
  bool Idle() const { return local_.empty() && near_.empty() && in_doubt_.empty(); }
  // Writes the SNAPSHOT record and the snapshot file (transactions quiesced).
  Status TakeSnapshot(const std::string& name, const std::string& path, uint64_t cluster_id, walfmt::Lsn& at,
                      uint64_t& fingerprint);
  // WAL retention after a full snapshot: deletes the segments of `wal_dir`
  // whose index is below `keep_from` (the segment holding the SNAPSHOT
  // record) and below the segment holding this node's last cut record, then
  // fsyncs the directory. Adds what it deleted to the counts.
  Status PruneWal(const std::string& wal_dir, uint64_t keep_from, uint64_t& deleted, uint64_t& bytes);

  uint32_t id() const { return id_; }
  // Runs a step posted by PostStep.
  void RunStep(StepKind kind, const TxId& id, uint64_t k);
  // What is unfinished here, for the "simulation stalled" error.
  std::string Pending() const;
  bool alive() const { return alive_; }
  bool ready() const { return alive_ && ready_; }
  uint32_t incarnation() const { return incarnation_; }
  // A real node's restart: its incarnation is at least this (the one its
  // process recorded beside the WAL, whose NODE_START retention may have
  // deleted), so that transaction ids stay unique.
  void RaiseIncarnation(uint32_t at_least) { incarnation_ = std::max(incarnation_, at_least); }
  // For a real driver: whether this node starts the cuts, the cut it runs as
  // initiator (0: none), its cut id, and the transactions it is near node of.
  bool initiating() const { return initiating_; }
  uint64_t initiator_cut() const { return init_k_; }
  bool cut_active() const { return cut_.active; }  // this node's part of a cut is running
  uint64_t cut_id() const { return cut_id_; }
  size_t near_in_flight() const { return near_.size(); }

 private:
  // ---- near (coordinator) side: coordinator.cpp
  struct NearTx {
    std::shared_ptr<Program> prog;
    bool load = false;
    std::vector<uint32_t> contacted;  // sorted primaries that may hold locks for the tx
    uint32_t pending = 0;             // lock-read responses still expected
    bool failed = false;              // a conflict in this round, a no vote, a lost participant
    bool voting = false;              // 2PC votes being collected
    bool decided = false;             // 2PC commit decided (marker set)
    bool finish_sent = false;
    std::vector<uint32_t> ack_from;  // primaries whose FinishAck is awaited
    ReadSet reads;
    std::shared_ptr<const TxPlan> plan;
    uint64_t marker = 0;
  };
  using NearMap = std::unordered_map<TxId, NearTx, TxIdHash>;
  // Tells the host how near transaction `it` ended, and forgets it.
  void EndNear(NearMap::iterator it, bool committed, AbortReason why, bool one_phase);
  struct Outcome {
    bool committed = false;
    uint64_t marker = 0;
  };
  void Advance(const TxId& id);
  void AbortTx(const TxId& id, AbortReason why);
  void CommitTx(const TxId& id, std::vector<Write> writes);
  void OnLockReadResp(const Msg& m);
  void OnVote(const Msg& m);
  void Decide(const TxId& id);
  void SendFinish(const TxId& id);
  void OnFinishAck(const Msg& m);
  void CompleteCommit(const TxId& id);
  void OnCommit1pcResp(const Msg& m);

  // ---- participant side: participant.cpp
  enum class Role : uint8_t { kPrimary2pc, kBackup, kPrimary1pc, kDecider, kRecovered };
  enum class TxState : uint8_t {
    kPreparing1pc,  // 1PC primary waiting for the non-deciding backups to prepare
    kPrepared,      // TX_PREPARE written
    kCommitting,    // committing (outcome known, or being decided by this 1PC decider), TX_COMMIT not written yet
    kCommitted,     // TX_COMMIT written, waiting for the backups' acknowledgements
  };
  struct LocalTx {
    std::shared_ptr<const TxPlan> plan;
    Role role = Role::kBackup;
    TxState st = TxState::kPrepared;
    std::vector<uint32_t> pending_from;  // backups whose vote or ack is awaited
    bool all_yes = true;
    bool voted = false;          // 2PC primary: vote sent to the near node
    bool outcome_known = false;  // kCommitting with the decider's marker in hand
    uint64_t marker = 0;
  };
  void OnLockRead(const Msg& m);
  void OnPrepare(const Msg& m);
  void OnPrepareFwd(const Msg& m);
  void OnVoteFwd(const Msg& m);
  void MaybeVote(const TxId& id);
  // A primary forwards the prepare to its backups, then votes once they have.
  void ForwardPrepare(const std::shared_ptr<const TxPlan>& plan);
  void OnFinish(const Msg& m);
  void OnFinishFwd(const Msg& m);
  bool FinishInDoubt(const Msg& m);
  void OnFinishAckFwd(const Msg& m);
  void OnCommit1pc(const Msg& m);
  void Enter1pcCommit(const TxId& id);
  void Abort1pc(const TxId& id, bool wrote_prepare);
  void DeciderBegin(const TxId& id);
  void OnDecide1pc(const Msg& m);
  void OnDecided1pc(const Msg& m);
  void CommitStep(const TxId& id);
  void MaybeAck(const TxId& id);
  void WriteRollback(const TxId& id, const TxPlan& plan, uint16_t extra_flags);
  void ReleaseLocks(const TxId& id);
  // A new participant entry for transaction id (asserting it is new).
  LocalTx& Join(const TxId& id, std::shared_ptr<const TxPlan> plan, Role role, TxState st);
  // Moves lt to state `to`, asserting the move is one a participant makes.
  void EnterState(LocalTx& lt, TxState to);
  // The four finish forwards (a primary to its backups, after a Finish, a
  // decided 1PC or a failed one): kFinishFwd for tx to each of `backups`.
  void ForwardFinish(const std::vector<uint32_t>& backups, const TxId& id, bool commit, uint64_t marker);
  bool Refusing(const TxId& id) const { return !in_doubt_.empty() || outcomes_.count(id) > 0; }
  // Another transaction prepared here, not committed yet, writes one of the
  // keys `plan` writes here (a backup's check; see OnPrepareFwd).
  bool PreparedOnSameKey(const TxPlan& plan) const;
  // The 2PC near node crashed after planning the commit: nobody will send
  // Finish, so do not prepare (a refusal lets the recovery roll it back).
  bool NearGone(const TxPlan& plan) const;
  void WatchStuck(const TxId& id);
  // Outcomes are remembered only when faults are on: they answer recovery
  // queries and stop late prepares, neither of which happens without faults,
  // and a map entry per transaction costs a tenth of the run time.
  void Remember(std::unordered_map<TxId, Outcome, TxIdHash>& map, const TxId& id, Outcome o);
  void Refuse(const Msg& m);
  // A restarted node not yet told the current cut: recovery queries only.
  void DeliverWhileNotReady(Msg& m);
  // A restarted node asks the initiator whether a cut runs.
  void OnHello(const Msg& m);
  std::vector<uint32_t> LiveOnly(const std::vector<uint32_t>& nodes) const;

  // ---- recovery protocol: recovery.cpp (the restart itself: crash_restart.cpp)
  struct Answer {
    PState p = PState::kNone;
    NState n = NState::kNoSay;
    uint64_t marker = 0;
  };
  struct Recovery {
    uint32_t round = 0;
    uint32_t attempts = 0;
    std::vector<uint32_t> asked;
    std::map<uint32_t, Answer> answers;
  };
  void StartRecovery(const TxId& id);
  void RecoveryRound(const TxId& id);
  void OnQuery(const Msg& m);
  void OnQueryResp(const Msg& m);
  Answer NearAnswer(const TxId& id) const;  // this node's decision as the near node of id
  void Evaluate(const TxId& id);
  void Resolve(const TxId& id, bool commit, uint64_t marker);
  // OnNodeFailed's two sides: the near node's transactions, the participant's.
  void NearLostNode(uint32_t x);
  void ParticipantLostNode(uint32_t x);
  void SendHello();
  void CatchUpCut(uint64_t k);
  void OnHelloResp(const Msg& m);
  // Restart's steps: the WAL replayed into the state, what it leaves undecided.
  struct Replayed {
    std::map<TxId, std::vector<Write>> data;         // TX_DATA of transactions without an outcome
    std::map<TxId, std::vector<uint32_t>> prepared;  // TX_PREPARE of transactions without an outcome
    uint64_t max_cut = 0;                            // the highest cut id in the WAL
    uint32_t incarnations = 0;                       // the highest NODE_START incarnation + 1 (0: none)
    bool from_snapshot = false;                      // the state came from a full snapshot file
  };
  Status ReplayWal(const std::string& wal_dir, Replayed& out);
  void RollBackUnprepared(const Replayed& r);
  void RelockPrepared(Replayed& r);
  Status LoadSnapshot(const walfmt::Snapshot& rec, const walfmt::Lsn& at, std::map<TxId, std::vector<Write>>& data,
                      std::map<TxId, std::vector<uint32_t>>& prepared);

  // ---- cut protocol: cut_protocol.cpp
  void StartCut(uint64_t k);      // step A: set the cut id, start capturing
  void CutStartStep(uint64_t k);  // step B: CUT_START, collect the tracked set
  void CutTxFinished(const TxId& id, bool committed, uint64_t marker, bool recovered);
  void MaybeFinishCut();
  void AbortCut(walfmt::CutAbortReason why, std::string detail);
  void Report(uint64_t k, bool ok);
  void OnCutStart(const Msg& m);
  void OnCutDone(const Msg& m);
  void TakeOver();
  void MaybeCompleteCut();
  void NoLongerExpected(uint32_t n);

  // ---- plumbing: node.cpp
  void Send(Msg m);
  void Reply(const Msg& to, MsgType type, bool ok = true);
  // A message of `type` about tx `id` (no other field set) to each of `nodes`.
  void SendToEach(const std::vector<uint32_t>& nodes, MsgType type, const TxId& id);
  // The 1PC primary's answer to the near node: committed, or not.
  void AnswerNear1pc(const TxPlan& plan, const TxId& id, bool committed);
  void PostStep(StepKind kind, const TxId& id, uint64_t k = 0);  // a local step after a small random delay
  void PostAfter(uint64_t delay_us, std::function<void()> fn);
  void Log(const walfmt::Record& r);
  // The per-transaction records, written through reused Record objects (see
  // data_rec_).
  void LogData(const TxId& id, const std::vector<Write>& writes);
  void LogPrepare(const TxId& id, const std::vector<uint32_t>& participants);
  void LogCommit(const TxId& id, uint64_t marker, uint16_t flags, const std::vector<uint32_t>& participants);
  void LogRollback(const TxId& id, uint16_t flags, const std::vector<uint32_t>& participants);
  void Sync();

  Host& host_;
  uint32_t id_;
  bool alive_ = true;
  bool ready_ = true;  // false after a restart until the initiator told the current cut
  uint32_t incarnation_ = 0;
  std::unique_ptr<walfmt::WalWriter> wal_;
  // Building a fresh Record for every TX_DATA, TX_PREPARE, TX_COMMIT and
  // TX_ROLLBACK copied the writes and participants into new vectors, a few
  // allocations per record; these keep their capacity from one record to the
  // next. The bytes written are the same.
  walfmt::Record data_rec_{walfmt::TxData{}};
  walfmt::Record prepare_rec_{walfmt::TxPrepare{}};
  walfmt::Record commit_rec_{walfmt::TxCommit{}};
  walfmt::Record rollback_rec_{walfmt::TxRollback{}};
  walfmt::Lsn synced_;  // durability point: everything before it survives a crash

  StringMap<std::string> kv_;
  StringMap<TxId> locks_;
  std::unordered_map<TxId, std::vector<std::string>, TxIdHash> held_;
  NearMap near_;
  std::unordered_map<TxId, LocalTx, TxIdHash> local_;
  std::unordered_map<TxId, Outcome, TxIdHash> outcomes_;       // finished here (rebuilt from the WAL on restart)
  std::unordered_map<TxId, Outcome, TxIdHash> near_outcomes_;  // decided as near node (memory only)
  std::map<TxId, Recovery> in_doubt_;                          // being resolved by the recovery protocol
  uint64_t next_seq_ = 1;

  uint64_t cut_id_ = 0;
  // The highest cut id of a CUT_* record in this node's WAL.
  uint64_t wal_cut_ = 0;
  // The segment holding the last CUT_* record of this node's WAL (UINT64_MAX:
  // none). Retention keeps it, so that a node restarted from a full snapshot
  // still reads the last cut it recorded (Restart, CatchUpCut).
  uint64_t last_cut_segment_ = UINT64_MAX;
  struct CutState {
    bool active = false;
    uint64_t k = 0;
    bool capturing = false;                           // between step A and step B
    std::vector<std::pair<TxId, uint64_t>> captured;  // committed here while capturing, with marker
    std::unordered_set<TxId, TxIdHash> tracked;       // tracked and not finished yet
    std::vector<TxId> before, after;
    uint64_t after_early = 0;  // rule-5 counts, added to the summary when CUT_FINISH is written
    uint64_t before_late = 0;
  } cut_;
  // After a restart: the last cut this node started and never finished, and
  // the last one it finished (from the WAL).
  uint64_t open_cut_ = 0;
  // While restarted and not ready: the highest cut id other nodes' messages showed.
  uint64_t shown_cut_ = 0;
  uint64_t last_finished_cut_ = 0;
  // The last cut this node reported on, and how (true: CUT_FINISH).
  uint64_t reported_k_ = 0;
  bool reported_ok_ = false;
  // The node that took over cut takeover_k_ and asked this one to report
  // (its CutStart with the cut as marker): the report goes to it.
  uint64_t takeover_k_ = 0;
  uint32_t takeover_from_ = kNoNode;
  uint32_t takeover_incarnation_ = 0;  // of takeover_from_ then: a restarted one is no initiator

  // Initiator state: node 0 at first, then the oldest live node.
  bool initiating_ = false;
  uint64_t init_k_ = 0;
  std::vector<bool> expected_;  // nodes whose report on init_k_ is awaited
  uint32_t remaining_ = 0;
  bool init_inconsistent_ = false;
  bool init_lost_node_ = false;
  std::string init_why_;
};

}  // namespace walcut::node::sim
