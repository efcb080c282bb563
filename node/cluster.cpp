// The simulated cluster. Reading guide:
//   Scheduler       the event queue: (time, sequence) order, one RNG, no threads
//   Msg / TxPlan    what travels on the network
//   Node            one node: near (coordinator), primary, backup and decider
//                   roles, locks, its WAL, and its side of the cut protocol
//   Cluster         the driver: topology, client load, cut initiation, oracle
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
// every node and replaying a node's WAL in order gives its state.
#include "node/cluster.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <ctime>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "node/rng.h"
#include "node/string_map.h"
#include "walfmt/cluster_layout.h"
#include "walfmt/duration.h"
#include "walfmt/file_io.h"
#include "walfmt/snapshot.h"
#include "walfmt/topology.h"
#include "walfmt/reader.h"
#include "walfmt/segment.h"
#include "walfmt/writer.h"

namespace walcut::node {
namespace {

using walfmt::Status;
using walfmt::TxId;
using walfmt::TxIdHash;
using walfmt::Write;
using walfmt::SnapshotFile;
using walfmt::StateFingerprint;
using walfmt::WriteSnapshotFile;
using walfmt::Topology;
using walfmt::kSnapshotVersion;

constexpr uint32_t kNoNode = 0xFFFFFFFFu;
constexpr uint32_t kFirstInitiator = 0;  // node 0 starts the cuts until it crashes
constexpr uint64_t kMaxEvents = 4'000'000'000ull;  // a bound on the main loop
constexpr size_t kLoadKeysPerTx = 64;

enum class MsgType : uint8_t {
  kLockRead = 1,   // near -> primary: lock these keys and read them
  kLockReadResp,   // primary -> near: values, or ok=false on conflict
  kRelease,        // near -> primary: drop the locks of tx
  kPrepare,        // near -> primary (2PC)
  kPrepareFwd,     // primary -> backup (2PC; 1PC: to the backups that are not the decider)
  kVote,           // primary -> near
  kVoteFwd,        // backup -> primary
  kFinish,         // near -> primary: commit (with marker) or rollback
  kFinishFwd,      // primary -> backup
  kFinishAck,      // primary -> near: committed here and on my backups
  kFinishAckFwd,   // backup -> primary
  kCommit1pc,      // near -> primary: all keys live here, commit in one phase
  kDecide1pc,      // primary -> deciding backup
  kDecided1pc,     // deciding backup -> primary: committed (ok) with the marker, or refused
  kCommit1pcResp,  // primary -> near
  kCutStart,       // initiator -> node: join the cut named by cut_id
  kCutDone,        // node -> initiator: CUT_FINISH (ok) or CUT_ABORT written for cut `marker`
  kQuery,          // recovery: what do you know about tx?
  kQueryResp,      // recovery: participant state and, from the near node, its decision
  kHello,          // restarted node -> initiator: which cut is current? (retried until answered)
  kHelloResp,      // initiator -> restarted node: current cut id (marker), running (ok)
};

// Recovery answers (docs/cut-rule.md section 1, "resolves its undecided transactions
// with the other participants").
enum class PState : uint8_t {
  kNone = 0,     // not a participant
  kPrepared,     // prepared here, outcome unknown here
  kBusy,         // deciding right now (a 1PC decider between its steps): ask again
  kCommitted,    // committed here (or the outcome is known to be commit), with marker
  kRolledBack,   // rolled back here
  kUnknown,      // a participant that never prepared: it now refuses to, so the tx must roll back
};
enum class NState : uint8_t {
  kNoSay = 0,    // not the near node, a 1PC transaction, or a restarted near that forgot
  kUndecided,    // the near node is still collecting votes
  kCommit,       // the near node decided commit, with marker
  kRollback,     // the near node decided rollback
};

// What the near node decided to write, per node. Immutable once sent: the
// messages of one transaction share it (one process; a real network would
// serialize it).
struct TxPlan {
  TxId id;
  bool one_phase = false;
  bool may_fail = false;                       // the prepare may be refused (fault injection)
  bool load = false;                           // part of the initial data
  uint32_t near_incarnation = 0;               // of the near node when it planned the commit
  std::vector<uint32_t> participants;          // sorted
  std::vector<uint32_t> primaries;             // sorted
  std::vector<std::vector<Write>> writes;      // by node: the writes for the keys that node holds
  std::vector<std::vector<uint32_t>> forward;  // by primary: the backups it forwards to
  std::vector<uint32_t> forwarder;             // by node: who forwards to it (kNoNode: the near node)
  uint32_t decider = kNoNode;                  // 1PC: the node that decides (first backup, or the primary)
  std::vector<Write> all_writes;               // for the history
  // Rebuilt from its own WAL by a restarted node (Node::Restart): it knows
  // only its share of the writes (writes[id_], its TX_DATA) and the
  // participants (TX_PREPARE); all_writes, one_phase and load are not known.
  bool rebuilt = false;
  // Set by the oracle (Cluster::RecordCommit) once the commit is recorded:
  // every participant's TX_COMMIT reports it, and this saves the other
  // participants a lookup in the set of committed ids. Not part of the plan
  // proper, hence mutable.
  mutable bool recorded = false;
};

struct Msg {
  MsgType type = MsgType::kLockRead;
  uint32_t from = 0;
  uint32_t from_incarnation = 0;
  uint32_t to = 0;
  uint64_t cut_id = 0;  // the sender's cut id when it sent this (rule 2)
  TxId tx;
  bool ok = true;
  bool commit = false;
  uint64_t marker = 0;  // Finish/Decided1pc/QueryResp: m(T); CutDone/HelloResp: a cut id
  uint32_t round = 0;   // Query/QueryResp
  PState pstate = PState::kNone;
  NState nstate = NState::kNoSay;
  std::vector<uint32_t> participants;  // Query
  std::vector<std::string> keys;
  std::vector<std::optional<std::string>> values;
  std::shared_ptr<const TxPlan> plan;
};

class Node;

// The local steps a node schedules on every transaction. They are plain data
// rather than a std::function: a lambda capturing `this` and a TxId does not
// fit std::function's small buffer, so each of the ~1.3 M steps of a 200k
// transaction run cost a heap allocation. Rare steps (timers, recovery,
// driver actions) still use std::function.
enum class StepKind : uint8_t { kNone = 0, kDecide, kSendFinish, kCommitStep, kCutStartStep };

// Events are ordered by (time, sequence); the sequence number makes ties
// deterministic. An event is a message delivery, a local step of a node, or a
// step of the driver (node == kNoNode). Node events are dropped when the node
// is down or restarted since they were scheduled.
class Scheduler {
 public:
  struct Event {
    uint64_t t = 0;
    uint64_t seq = 0;
    uint32_t node = kNoNode;
    uint32_t incarnation = 0;
    bool has_msg = false;
    StepKind step = StepKind::kNone;
    Msg msg;                 // when has_msg
    TxId step_tx;            // the step's transaction (kDecide, kSendFinish, kCommitStep)
    uint64_t step_k = 0;     // the step's cut id (kCutStartStep)
    std::function<void()> fn;  // otherwise
  };

  uint64_t now() const { return now_; }
  // Schedules an event at time t and returns it for the caller to fill in
  // (before anything else is scheduled or popped). The heap holds small keys;
  // events stay put in a slab and are run in place, so a message is never
  // copied to the heap or moved again after it was sent. The slab is a deque:
  // events scheduled while one runs must not move the running one.
  Event& Add(uint64_t t) {
    uint32_t slot;
    if (free_.empty()) {
      slot = static_cast<uint32_t>(slots_.size());
      slots_.emplace_back();
    } else {
      slot = free_.back();
      free_.pop_back();
    }
    heap_.push_back(Key{t, next_seq_++, slot});
    std::push_heap(heap_.begin(), heap_.end(), Later{});
    Event& e = slots_[slot];
    e.t = t;
    return e;
  }
  // The next event; it stays valid until Release(slot).
  bool Pop(uint32_t& slot) {
    if (heap_.empty()) return false;
    std::pop_heap(heap_.begin(), heap_.end(), Later{});
    const Key k = heap_.back();
    heap_.pop_back();
    slot = k.slot;
    slots_[slot].seq = k.seq;
    now_ = k.t;
    return true;
  }
  Event& at(uint32_t slot) { return slots_[slot]; }
  // Drops what the event holds that matters (the shared plan, the closure);
  // the message's vectors are simply overwritten by the next use of the slot.
  void Release(uint32_t slot) {
    Event& e = slots_[slot];
    e.has_msg = false;
    e.step = StepKind::kNone;
    e.msg.plan.reset();
    e.fn = nullptr;
    free_.push_back(slot);
  }
  // Nothing runs after this. The slab is kept: the event running now (the one
  // that failed) lives in it.
  void Clear() { heap_.clear(); }

 private:
  struct Key {
    uint64_t t;
    uint64_t seq;
    uint32_t slot;
  };
  struct Later {
    bool operator()(const Key& a, const Key& b) const { return a.t != b.t ? a.t > b.t : a.seq > b.seq; }
  };
  std::vector<Key> heap_;
  std::deque<Event> slots_;
  std::vector<uint32_t> free_;
  uint64_t now_ = 0;
  uint64_t next_seq_ = 0;
};

class Cluster;

class Node {
 public:
  Node(Cluster& c, uint32_t id) : c_(c), id_(id), initiating_(id == kFirstInitiator) {}

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
  // Quiesced: no transaction is open here.
  bool Idle() const { return local_.empty() && near_.empty() && in_doubt_.empty(); }
  // Writes the SNAPSHOT record and the snapshot file (transactions quiesced).
  Status TakeSnapshot(const std::string& name, const std::string& path, uint64_t cluster_id, walfmt::Lsn& at,
                      uint64_t& fingerprint);
  // WAL retention after a full snapshot: deletes the segments of `wal_dir`
  // whose index is below `keep_from` (the segment holding the SNAPSHOT
  // record), then fsyncs the directory. Adds what it deleted to the counts.
  Status PruneWal(const std::string& wal_dir, uint64_t keep_from, uint64_t& deleted, uint64_t& bytes);

  uint32_t id() const { return id_; }
  // Runs a step posted by PostStep.
  void RunStep(StepKind kind, const TxId& id, uint64_t k);
  // What is unfinished here, for the "simulation stalled" error.
  std::string Pending() const {
    std::string out;
    for (const auto& [id, t] : near_) {
      out += fmt::format(" near {}(plan={} 1pc={} pending={} voting={} decided={} sent={} acks={})", id.ToString(),
                         t.plan != nullptr, t.plan && t.plan->one_phase, t.pending, t.voting, t.decided,
                         t.finish_sent, t.ack_from.size());
    }
    for (const auto& [id, lt] : local_) {
      out += fmt::format(" local {}(role={} st={} pending_from={} doubt={})", id.ToString(), static_cast<int>(lt.role),
                         static_cast<int>(lt.st), lt.pending_from.size(), in_doubt_.count(id));
    }
    return out;
  }
  bool alive() const { return alive_; }
  bool ready() const { return alive_ && ready_; }
  uint32_t incarnation() const { return incarnation_; }

 private:
  // ---- near (coordinator) side
  struct NearTx {
    std::shared_ptr<Program> prog;
    bool load = false;
    std::vector<uint32_t> contacted;  // sorted primaries that may hold locks for the tx
    uint32_t pending = 0;             // lock-read responses still expected
    bool failed = false;              // a conflict in this round, a no vote, a lost participant
    bool voting = false;              // 2PC votes being collected
    bool decided = false;             // 2PC commit decided (marker set)
    bool finish_sent = false;
    std::vector<uint32_t> ack_from;   // primaries whose FinishAck is awaited
    ReadSet reads;
    std::shared_ptr<const TxPlan> plan;
    uint64_t marker = 0;
  };
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

  // ---- participant side
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
    bool voted = false;                  // 2PC primary: vote sent to the near node
    bool outcome_known = false;          // kCommitting with the decider's marker in hand
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
  bool Refusing(const TxId& id) const { return !in_doubt_.empty() || outcomes_.count(id) > 0; }
  // The 2PC near node crashed after planning the commit: nobody will send
  // Finish, so do not prepare (a refusal lets the recovery roll it back).
  bool NearGone(const TxPlan& plan) const;
  void WatchStuck(const TxId& id);
  // Outcomes are remembered only when faults are on: they answer recovery
  // queries and stop late prepares, neither of which happens without faults,
  // and a map entry per transaction costs a tenth of the run time.
  void Remember(std::unordered_map<TxId, Outcome, TxIdHash>& map, const TxId& id, Outcome o);
  void Refuse(const Msg& m);
  std::vector<uint32_t> LiveOnly(const std::vector<uint32_t>& nodes) const;

  // ---- recovery protocol
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
  void SendHello();
  void OnHelloResp(const Msg& m);
  Status LoadSnapshot(const walfmt::Snapshot& rec, const walfmt::Lsn& at, std::map<TxId, std::vector<Write>>& data,
                      std::map<TxId, std::vector<uint32_t>>& prepared);

  // ---- cut protocol
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

  // ---- plumbing
  void Send(Msg m);
  void Reply(const Msg& to, MsgType type, bool ok = true);
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

  Cluster& c_;
  uint32_t id_;
  bool alive_ = true;
  bool ready_ = true;          // false after a restart until the initiator told the current cut
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
  walfmt::Lsn synced_;         // durability point: everything before it survives a crash

  StringMap<std::string> kv_;
  StringMap<TxId> locks_;
  std::unordered_map<TxId, std::vector<std::string>, TxIdHash> held_;
  std::unordered_map<TxId, NearTx, TxIdHash> near_;
  std::unordered_map<TxId, LocalTx, TxIdHash> local_;
  std::unordered_map<TxId, Outcome, TxIdHash> outcomes_;       // finished here (rebuilt from the WAL on restart)
  std::unordered_map<TxId, Outcome, TxIdHash> near_outcomes_;  // decided as near node (memory only)
  std::map<TxId, Recovery> in_doubt_;                          // being resolved by the recovery protocol
  uint64_t next_seq_ = 1;

  uint64_t cut_id_ = 0;
  struct CutState {
    bool active = false;
    uint64_t k = 0;
    bool capturing = false;  // between step A and step B
    std::vector<std::pair<TxId, uint64_t>> captured;  // committed here while capturing, with marker
    std::unordered_set<TxId, TxIdHash> tracked;       // tracked and not finished yet
    std::vector<TxId> before, after;
    uint64_t after_early = 0;  // rule-5 counts, added to the summary when CUT_FINISH is written
    uint64_t before_late = 0;
  } cut_;
  // After a restart: the last cut this node started and never finished, and
  // the last one it finished (from the WAL).
  uint64_t open_cut_ = 0;
  uint64_t last_finished_cut_ = 0;
  // The last cut this node reported on, and how (true: CUT_FINISH).
  uint64_t reported_k_ = 0;
  bool reported_ok_ = false;

  // Initiator state: node 0 at first, then the oldest live node.
  bool initiating_ = false;
  uint64_t init_k_ = 0;
  std::vector<bool> expected_;  // nodes whose report on init_k_ is awaited
  uint32_t remaining_ = 0;
  bool init_inconsistent_ = false;
  bool init_lost_node_ = false;
  std::string init_why_;
};

class Cluster {
 public:
  explicit Cluster(ClusterOptions opt)
      : opt_(std::move(opt)), topo_(opt_.nodes, opt_.backups, opt_.partitions), rng_(opt_.seed) {}

  Status Run();
  RunResult TakeResult() {
    RunResult r;
    r.summary = sum_;
    r.history = std::move(history_);
    r.snapshots = snapshots_;
    r.first_segment = first_segment_;
    r.options = opt_;
    return r;
  }

  // Used by nodes.
  const ClusterOptions& opt() const { return opt_; }
  const Topology& topo() const { return topo_; }
  Rng& rng() { return rng_; }
  RunSummary& sum() { return sum_; }
  uint64_t now() const { return sched_.now(); }
  void Send(Msg m);
  void PostLocal(uint32_t node, uint32_t incarnation, uint64_t delay, std::function<void()> fn);
  void PostDriver(uint64_t delay, std::function<void()> fn) { PostLocal(kNoNode, 0, delay, std::move(fn)); }
  void PostStep(uint32_t node, uint32_t incarnation, uint64_t delay, StepKind kind, const TxId& id, uint64_t k);
  uint64_t StepDelay() { return rng_.Range(1, opt_.step_delay_max_us); }
  void Fail(const Status& st) {
    if (error_.ok()) error_ = st;
    sched_.Clear();
  }
  bool failed() const { return !error_.ok(); }
  bool IsAlive(uint32_t n) const { return nodes_[n]->alive(); }
  bool IsReady(uint32_t n) const { return nodes_[n]->ready(); }
  uint32_t IncarnationOf(uint32_t n) const { return nodes_[n]->incarnation(); }
  bool faults() const { return !opt_.crashes.empty() || opt_.random_crashes > 0; }
  void RecordBegin(const TxId& id) { began_.push_back(id); }
  void RecordCommit(const TxPlan& plan, uint64_t marker, bool recovered);
  // A crashing node hands over the plans of the transactions it was taking
  // part in, so the oracle still knows them if it later commits one from a
  // rebuilt plan (RecordCommit).
  void KeepUndecided(const std::shared_ptr<const TxPlan>& plan);
  void TxEnded(bool load, bool committed, AbortReason why, bool one_phase);
  void CutCompleted(uint64_t k, bool consistent);
  // Membership, as a discovery service gives it: the ready nodes in the order
  // they joined. The oldest one is the cut initiator (Ignite's coordinator is
  // its oldest server node); a restarted node joins as the youngest.
  uint32_t Initiator() const { return members_.front(); }
  uint32_t FailedInitiator() const { return failed_initiator_; }
  void NodeReady(uint32_t n);
  // The cut the scheduler asked for and has not seen completed (0: none). A
  // new initiator takes it over: the scheduler re-sends its request, as a
  // client retries against a new coordinator.
  uint64_t RunningCut() const { return cut_running_ ? running_cut_ : 0; }

 private:
  void Dispatch(Scheduler::Event& e);
  void FillSlots();
  void StartTx(std::shared_ptr<Program> prog, bool load);
  void MaybeStartCut();
  void CrashNode(uint32_t n, uint64_t restart_delay_us);
  void ScheduleCrashes();
  void TrySnapshot();
  Status WriteClusterJson(bool complete) const;

  ClusterOptions opt_;
  Topology topo_;
  Rng rng_;
  Scheduler sched_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<walfmt::WriterOptions> writer_opts_;
  std::vector<bool> cut_ready_;
  std::vector<uint32_t> members_;  // ready nodes, oldest first
  uint32_t failed_initiator_ = kNoNode;
  uint64_t running_cut_ = 0;
  Status error_;
  RunSummary sum_;
  History history_;
  std::vector<TxId> began_;
  std::unordered_set<TxId, TxIdHash> committed_ids_;
  // The original plans of transactions not yet recorded that a crashed node
  // had prepared (KeepUndecided); dropped when the commit is recorded. Never
  // iterated.
  std::unordered_map<TxId, std::shared_ptr<const TxPlan>, TxIdHash> undecided_plans_;

  std::vector<std::vector<Write>> loads_;
  size_t loads_started_ = 0;
  size_t loads_done_ = 0;
  uint64_t started_ = 0;
  uint32_t inflight_ = 0;
  uint64_t committed_since_cut_ = 0;
  bool cut_running_ = false;
  uint64_t next_cut_ = 1;
  std::vector<SnapshotTaken> snapshots_;
  bool quiescing_ = false;       // a full snapshot is waiting for the cluster to be idle
  std::vector<uint64_t> snapshot_due_;  // workload transactions started at which a full snapshot is due, ascending
  size_t next_snapshot_ = 0;            // index into snapshot_due_
  std::vector<uint64_t> first_segment_;  // by node, after the run
  uint32_t snapshot_waits_ = 0;
  uint64_t cluster_id_ = 0;
  std::vector<std::pair<uint64_t, uint32_t>> crash_at_tx_;  // random crashes: (started count, node), sorted
  size_t next_crash_ = 0;
};

// ===================================================================== Node

Status Node::Open(const walfmt::WriterOptions& wo) {
  auto w = walfmt::WalWriter::Create(wo, c_.now());
  if (!w.ok()) return w.status();
  wal_ = std::move(w.value());
  Log(walfmt::NodeStart{incarnation_, c_.now()});
  Sync();
  return Status::Ok();
}

Status Node::Close() {
  if (!wal_) return Status::Ok();
  Status st = wal_->Close();
  wal_.reset();
  return st;
}

void Node::Log(const walfmt::Record& r) {
  if (c_.failed() || !wal_) return;
  wal_->set_time_us(c_.now());
  auto at = wal_->Append(r);
  if (!at.ok()) {
    c_.Fail(at.status());
    return;
  }
  ++c_.sum().records;
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
  p.time_us = c_.now();
  p.participants.assign(participants.begin(), participants.end());
  Log(prepare_rec_);
}

void Node::LogCommit(const TxId& id, uint64_t marker, uint16_t flags, const std::vector<uint32_t>& participants) {
  auto& c = std::get<walfmt::TxCommit>(commit_rec_);
  c.tx = id;
  c.marker = marker;
  c.time_us = c_.now();
  c.flags = flags;
  c.participants.assign(participants.begin(), participants.end());
  Log(commit_rec_);
}

void Node::LogRollback(const TxId& id, uint16_t flags, const std::vector<uint32_t>& participants) {
  auto& r = std::get<walfmt::TxRollback>(rollback_rec_);
  r.tx = id;
  r.time_us = c_.now();
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
  if (wal_) synced_ = wal_->end();
}

void Node::Send(Msg m) {
  m.from = id_;
  m.from_incarnation = incarnation_;
  m.cut_id = cut_id_;
  c_.Send(std::move(m));
}

void Node::Reply(const Msg& to, MsgType type, bool ok) {
  Msg r;
  r.type = type;
  r.to = to.from;
  r.tx = to.tx;
  r.ok = ok;
  Send(std::move(r));
}

void Node::PostStep(StepKind kind, const TxId& id, uint64_t k) {
  c_.PostStep(id_, incarnation_, c_.StepDelay(), kind, id, k);
}
void Node::RunStep(StepKind kind, const TxId& id, uint64_t k) {
  switch (kind) {
    case StepKind::kDecide: Decide(id); break;
    case StepKind::kSendFinish: SendFinish(id); break;
    case StepKind::kCommitStep: CommitStep(id); break;
    case StepKind::kCutStartStep: CutStartStep(k); break;
    case StepKind::kNone: break;
  }
}
void Node::PostAfter(uint64_t delay_us, std::function<void()> fn) {
  c_.PostLocal(id_, incarnation_, delay_us, std::move(fn));
}

std::vector<uint32_t> Node::LiveOnly(const std::vector<uint32_t>& nodes) const {
  std::vector<uint32_t> out;
  for (uint32_t n : nodes) {
    if (c_.IsAlive(n)) out.push_back(n);
  }
  return out;
}

void Node::Deliver(Msg& m) {
  if (!ready_) {
    // Restarted and not yet told the current cut: the node answers recovery
    // queries and refuses work. It must not adopt cut ids from messages now:
    // it could start a cut that the crash already made inconsistent.
    switch (m.type) {
      case MsgType::kHelloResp: OnHelloResp(m); break;
      case MsgType::kQuery: OnQuery(m); break;
      case MsgType::kQueryResp: OnQueryResp(m); break;
      case MsgType::kFinish:
      case MsgType::kFinishFwd: FinishInDoubt(m); break;
      default: Refuse(m); break;
    }
    return;
  }
  // Rule 2: a message from a later cut starts that cut here before the
  // message is applied.
  if (m.cut_id > cut_id_) StartCut(m.cut_id);
  switch (m.type) {
    case MsgType::kLockRead: OnLockRead(m); break;
    case MsgType::kLockReadResp: OnLockReadResp(m); break;
    case MsgType::kRelease: ReleaseLocks(m.tx); break;
    case MsgType::kPrepare: OnPrepare(m); break;
    case MsgType::kPrepareFwd: OnPrepareFwd(m); break;
    case MsgType::kVote: OnVote(m); break;
    case MsgType::kVoteFwd: OnVoteFwd(m); break;
    case MsgType::kFinish: OnFinish(m); break;
    case MsgType::kFinishFwd: OnFinishFwd(m); break;
    case MsgType::kFinishAck: OnFinishAck(m); break;
    case MsgType::kFinishAckFwd: OnFinishAckFwd(m); break;
    case MsgType::kCommit1pc: OnCommit1pc(m); break;
    case MsgType::kDecide1pc: OnDecide1pc(m); break;
    case MsgType::kDecided1pc: OnDecided1pc(m); break;
    case MsgType::kCommit1pcResp: OnCommit1pcResp(m); break;
    case MsgType::kCutStart: OnCutStart(m); break;
    case MsgType::kCutDone: OnCutDone(m); break;
    case MsgType::kQuery: OnQuery(m); break;
    case MsgType::kQueryResp: OnQueryResp(m); break;
    case MsgType::kHello: {
      // Only the acting initiator knows whether a cut runs; a node that is
      // about to take over stays silent and the restarted node asks again.
      if (!initiating_) break;
      Msg r;
      r.type = MsgType::kHelloResp;
      r.to = m.from;
      r.marker = cut_id_;
      r.ok = init_k_ != 0;  // a cut is running
      Send(std::move(r));
      break;
    }
    case MsgType::kHelloResp: break;
  }
}

// A node that cannot take part answers requests with a refusal, so nobody
// waits for it: a conflict, a no vote, a failed 1PC.
void Node::Refuse(const Msg& m) {
  switch (m.type) {
    case MsgType::kLockRead: Reply(m, MsgType::kLockReadResp, false); break;
    case MsgType::kPrepare: Reply(m, MsgType::kVote, false); break;
    case MsgType::kPrepareFwd: Reply(m, MsgType::kVoteFwd, false); break;
    case MsgType::kCommit1pc: Reply(m, MsgType::kCommit1pcResp, false); break;
    case MsgType::kDecide1pc: Reply(m, MsgType::kDecided1pc, false); break;
    default: break;
  }
}

// ---- near side

void Node::BeginTx(std::shared_ptr<Program> prog, bool load) {
  const TxId id{id_, next_seq_++};
  c_.RecordBegin(id);
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
  for (auto& k : s.keys) by_primary[c_.topo().PrimaryOf(k)].push_back(std::move(k));
  if (by_primary.empty()) return AbortTx(id, AbortReason::kBadRead);  // a program bug; tests require none
  for (const auto& [p, keys] : by_primary) {
    auto pos = std::lower_bound(t.contacted.begin(), t.contacted.end(), p);
    if (pos == t.contacted.end() || *pos != p) t.contacted.insert(pos, p);
    if (!c_.IsAlive(p)) return AbortTx(id, AbortReason::kParticipantLost);
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
  for (uint32_t p : t.contacted) {
    Msg m;
    m.type = MsgType::kRelease;
    m.to = p;
    m.tx = id;
    Send(std::move(m));
  }
  const bool load = t.load;
  near_.erase(id);
  Remember(near_outcomes_, id, Outcome{false, 0});
  c_.TxEnded(load, false, why, false);
}

void Node::CommitTx(const TxId& id, std::vector<Write> writes) {
  NearTx& t = near_.at(id);
  const Topology& topo = c_.topo();
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
  plan->may_fail = !t.load && !plan->one_phase && c_.opt().vote_no_per_million > 0;
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
  if (c_.opt().keep_history) plan->all_writes = std::move(writes);
  t.plan = plan;
  t.failed = false;
  for (uint32_t p : plan->participants) {
    if (!c_.IsAlive(p)) {
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
  if (t.failed) {
    for (uint32_t p : t.plan->primaries) {
      Msg m;
      m.type = MsgType::kFinish;
      m.to = p;
      m.tx = id;
      m.commit = false;
      Send(std::move(m));
    }
    const bool load = t.load;
    near_.erase(id);
    Remember(near_outcomes_, id, Outcome{false, 0});
    c_.TxEnded(load, false, AbortReason::kVoteNo, false);
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
  // Every participant committed: now the primaries may let the next
  // transaction take these keys (see the comment at the top of the file).
  for (uint32_t p : it->second.plan->primaries) {
    Msg r;
    r.type = MsgType::kRelease;
    r.to = p;
    r.tx = id;
    Send(std::move(r));
  }
  const bool load = it->second.load;
  near_.erase(it);
  c_.TxEnded(load, true, AbortReason::kNone, false);
}

void Node::OnCommit1pcResp(const Msg& m) {
  auto it = near_.find(m.tx);
  if (it == near_.end() || !it->second.plan) return;
  const bool load = it->second.load;
  near_.erase(it);
  c_.TxEnded(load, m.ok, m.ok ? AbortReason::kNone : AbortReason::kVoteNo, true);
}

// ---- participant side

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
  if (plan.may_fail && c_.rng().Chance(c_.opt().vote_no_per_million)) {
    Reply(m, MsgType::kVote, false);  // refused: nothing written, nothing forwarded
    return;
  }
  for (uint32_t b : plan.forward[id_]) {
    if (!c_.IsAlive(b)) return Refuse(m);
  }
  LogData(plan.id, plan.writes[id_]);
  LogPrepare(plan.id, plan.participants);
  Sync();  // durable before voting
  LocalTx& lt = local_[plan.id];
  lt.plan = m.plan;
  lt.role = Role::kPrimary2pc;
  lt.st = TxState::kPrepared;
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

void Node::OnPrepareFwd(const Msg& m) {
  const TxPlan& plan = *m.plan;
  if (Refusing(plan.id) || local_.count(plan.id) || NearGone(plan)) return Refuse(m);
  LogData(plan.id, plan.writes[id_]);
  LogPrepare(plan.id, plan.participants);
  Sync();
  LocalTx& lt = local_[plan.id];
  lt.plan = m.plan;
  lt.role = Role::kBackup;
  lt.st = TxState::kPrepared;
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
      for (uint32_t b : plan->forward[id_]) {
        Msg f;
        f.type = MsgType::kFinishFwd;
        f.to = b;
        f.tx = m.tx;
        f.commit = false;
        Send(std::move(f));
      }
      local_.erase(it);
    } else {
      Remember(outcomes_, m.tx, Outcome{false, 0});  // a late Prepare must find it decided
    }
    ReleaseLocks(m.tx);
    return;
  }
  if (it == local_.end()) return;
  LocalTx& lt = it->second;
  lt.st = TxState::kCommitting;
  lt.outcome_known = true;
  lt.marker = m.marker;
  lt.pending_from = LiveOnly(lt.plan->forward[id_]);
  for (uint32_t b : lt.pending_from) {
    Msg f;
    f.type = MsgType::kFinishFwd;
    f.to = b;
    f.tx = m.tx;
    f.commit = true;
    f.marker = m.marker;
    Send(std::move(f));
  }
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
  it->second.st = TxState::kCommitting;
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
    if (w.op == walfmt::WriteOp::kDelete) kv_.erase(w.key);
    else kv_[w.key] = w.value;
  }
  Remember(outcomes_, id, Outcome{true, lt.marker});
  c_.RecordCommit(plan, lt.marker, false);
  lt.st = TxState::kCommitted;
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
// cut id (see the comment at the top: a backup that learnt of the transaction
// only from the outcome could not have tracked it).
void Node::OnCommit1pc(const Msg& m) {
  const TxPlan& plan = *m.plan;
  if (Refusing(plan.id) || local_.count(plan.id)) {
    ReleaseLocks(plan.id);
    return Refuse(m);
  }
  for (uint32_t b : plan.participants) {
    if (!c_.IsAlive(b)) {
      ReleaseLocks(plan.id);
      return Refuse(m);
    }
  }
  LocalTx& lt = local_[plan.id];
  lt.plan = m.plan;
  lt.role = Role::kPrimary1pc;
  lt.st = TxState::kPreparing1pc;
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
  if (plan.decider == id_) return DeciderBegin(id);
  if (!c_.IsAlive(plan.decider)) return Abort1pc(id, false);  // lost while the others prepared
  LogData(id, plan.writes[id_]);
  LogPrepare(id, plan.participants);
  Sync();
  lt.st = TxState::kCommitting;
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
  const auto plan = it->second.plan;
  if (wrote_prepare) WriteRollback(id, *plan, 0);
  else Remember(outcomes_, id, Outcome{false, 0});
  for (uint32_t b : LiveOnly(plan->forward[id_])) {
    Msg f;
    f.type = MsgType::kFinishFwd;
    f.to = b;
    f.tx = id;
    f.commit = false;
    Send(std::move(f));
  }
  local_.erase(it);
  ReleaseLocks(id);
  Msg r;
  r.type = MsgType::kCommit1pcResp;
  r.to = plan->id.node;
  r.tx = id;
  r.ok = false;
  Send(std::move(r));
}

// First step of the 1PC decider: read the cut id (the marker) and log the
// data. TX_COMMIT follows in CommitStep, a separate event.
void Node::DeciderBegin(const TxId& id) {
  LocalTx& lt = local_.at(id);
  const TxPlan& plan = *lt.plan;
  lt.marker = cut_id_;
  lt.st = TxState::kCommitting;
  LogData(id, plan.writes[id_]);
  PostStep(StepKind::kCommitStep, id);
}

void Node::OnDecide1pc(const Msg& m) {
  if (Refusing(m.tx) || local_.count(m.tx)) return Refuse(m);
  LocalTx& lt = local_[m.tx];
  lt.plan = m.plan;
  lt.role = Role::kDecider;
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
  for (uint32_t b : lt.pending_from) {
    Msg f;
    f.type = MsgType::kFinishFwd;
    f.to = b;
    f.tx = m.tx;
    f.commit = true;
    f.marker = m.marker;
    Send(std::move(f));
  }
  const TxId id = m.tx;
  PostStep(StepKind::kCommitStep, id);
}

// ---- full snapshot

Status Node::TakeSnapshot(const std::string& name, const std::string& path, uint64_t cluster_id, walfmt::Lsn& at,
                          uint64_t& fingerprint) {
  SnapshotFile f;
  f.node_id = id_;
  f.cluster_id = cluster_id;
  f.name = name;
  f.time_us = c_.now();
  kv_.for_each([&](const std::string& k, const std::string& v) { f.entries.emplace(k, v); });
  fingerprint = StateFingerprint(f.entries);
  wal_->set_time_us(c_.now());
  auto lsn = wal_->Append(walfmt::Snapshot{name, c_.now(), fingerprint});
  if (!lsn.ok()) return lsn.status();
  ++c_.sum().records;
  Sync();
  at = *lsn;
  f.wal_position = at;
  if (c_.opt().wal_retention == WalRetention::kKeep) return WriteSnapshotFile(path, f);
  // Segments are about to be deleted on the strength of this snapshot: the
  // WAL up to its SNAPSHOT record and the file must be on disk first. (The
  // writer's Sync writes the buffered bytes; the simulated crash already
  // keeps everything up to synced_, so this changes no file byte.)
  if (Status st = wal_->Sync(); !st.ok()) return st;
  auto bytes = walfmt::EncodeSnapshot(f);
  if (!bytes.ok()) return bytes.status();
  return walfmt::WriteFileAtomic(path, *bytes);
}

Status Node::PruneWal(const std::string& wal_dir, uint64_t keep_from, uint64_t& deleted, uint64_t& bytes) {
  auto segs = walfmt::ListSegments(wal_dir, nullptr);
  if (!segs.ok()) return segs.status();
  // Never the segment holding the SNAPSHOT record nor the active one (which
  // is at or after it).
  keep_from = std::min(keep_from, wal_->segment_index());
  bool any = false;
  for (const auto& seg : *segs) {
    if (seg.index >= keep_from) break;  // ListSegments sorts by index
    struct stat sb {};
    const uint64_t size = ::stat(seg.path.c_str(), &sb) == 0 ? static_cast<uint64_t>(sb.st_size) : 0;
    if (::unlink(seg.path.c_str()) != 0) {
      return Status::Io(fmt::format("{}: cannot delete: {}", seg.path, std::strerror(errno)));
    }
    ++deleted;
    bytes += size;
    any = true;
    // Archiving writes the .wal.zst before removing the .wal: after a crash
    // between the two both exist, and ListSegments names only one.
    const std::string other = wal_dir + "/" + walfmt::SegmentFileName(seg.index, !seg.compressed);
    if (::unlink(other.c_str()) != 0 && errno != ENOENT) {
      return Status::Io(fmt::format("{}: cannot delete: {}", other, std::strerror(errno)));
    }
  }
  return any ? walfmt::SyncDir(wal_dir) : Status::Ok();
}

// ---- failures and recovery

std::pair<uint32_t, uint32_t> Node::Crash() {
  Rng& rng = c_.rng();
  const walfmt::Lsn end = wal_->end();
  const uint64_t unsynced = wal_->unsynced_bytes();
  const uint64_t flushed = end.offset - unsynced;  // of the current segment, already in the file
  uint64_t keep = 0;
  if (synced_.segment == end.segment && synced_.offset > flushed) keep = synced_.offset - flushed;
  const uint64_t rest = unsynced - keep;
  // Half the time the unsynced tail is lost entirely; otherwise a random part
  // of it reached the disk, often ending inside a record (a torn tail).
  if (rest > 0 && rng.Below(2) == 0) keep += rng.Below(rest + 1);
  if (Status st = wal_->SimulateCrash(keep); !st.ok()) c_.Fail(st);
  wal_.reset();
  uint32_t lost_load = 0, lost = 0;
  for (const auto& [id, t] : near_) ++(t.load ? lost_load : lost);
  // Whatever this node prepared and may yet commit from a rebuilt plan after
  // the restart: TX_PREPARE is written while the transaction is in local_,
  // and it leaves local_ only committed (recorded) or rolled back.
  for (const auto& [id, lt] : local_) {
    if (lt.plan && !lt.plan->rebuilt && !lt.plan->recorded) c_.KeepUndecided(lt.plan);
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
  auto w = walfmt::WalWriter::Open(wo, c_.now());  // cuts the torn tail off
  if (!w.ok()) return w.status();
  wal_ = std::move(w.value());
  synced_ = wal_->end();

  // Rebuild the state from the WAL: committed data applied in WAL order,
  // outcomes remembered, prepared-but-undecided transactions kept aside.
  // With WAL retention the segments before the latest full snapshot may be
  // gone: at each SNAPSHOT record the state is replaced by that snapshot's
  // file, so what counts is the latest snapshot plus the WAL after it.
  auto segs = walfmt::ListSegments(wo.wal_dir, nullptr);
  if (!segs.ok()) return segs.status();
  std::map<TxId, std::vector<Write>> data;
  std::map<TxId, std::vector<uint32_t>> prepared;
  uint64_t max_cut = 0;
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
            sn != nullptr && c_.opt().wal_retention != WalRetention::kKeep) {
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
                  if (w.op == walfmt::WriteOp::kDelete) kv_.erase(w.key);
                  else kv_[w.key] = w.value;
                }
                outcomes_[r.tx] = Outcome{true, r.marker};
                data.erase(r.tx);
                prepared.erase(r.tx);
              } else if constexpr (std::is_same_v<T, walfmt::TxRollback>) {
                outcomes_[r.tx] = Outcome{false, 0};
                data.erase(r.tx);
                prepared.erase(r.tx);
              } else if constexpr (std::is_same_v<T, walfmt::CutStart>) {
                max_cut = std::max(max_cut, r.cut_id);
                open_cut_ = r.cut_id;
              } else if constexpr (std::is_same_v<T, walfmt::CutFinish> || std::is_same_v<T, walfmt::CutAbort>) {
                max_cut = std::max(max_cut, r.cut_id);
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
  if (from_snapshot) ++c_.sum().snapshot_recoveries;

  // Transaction ids stay unique across restarts: the incarnation is in the
  // high bits of the sequence.
  next_seq_ = (static_cast<uint64_t>(incarnation_) << 40) + 1;
  cut_id_ = max_cut;
  // A report made before the crash counts for nothing now: the crash made
  // that cut inconsistent if it was still running.
  reported_k_ = last_finished_cut_;
  reported_ok_ = false;
  Log(walfmt::NodeStart{incarnation_, c_.now()});
  // Data without a prepare: this node never voted (or, as a 1PC decider,
  // never committed), so nobody can have committed it: roll it back here.
  for (const auto& [id, writes] : data) {
    if (prepared.count(id)) continue;
    Log(walfmt::TxRollback{id, c_.now(), walfmt::kTxFlagRecovered, {}});
    outcomes_[id] = Outcome{false, 0};
    ++c_.sum().recovered_rollbacks;
  }
  Sync();
  // Prepared and undecided: keep the keys this node is primary of locked and
  // ask the others.
  for (const auto& [id, parts] : prepared) {
    auto plan = std::make_shared<TxPlan>();
    plan->id = id;
    plan->participants = parts;
    plan->writes.resize(c_.topo().nodes());
    plan->forward.resize(c_.topo().nodes());
    plan->forwarder.assign(c_.topo().nodes(), kNoNode);
    plan->writes[id_] = data[id];
    plan->rebuilt = true;
    LocalTx& lt = local_[id];
    lt.plan = plan;
    lt.role = Role::kRecovered;
    lt.st = TxState::kPrepared;
    auto& held = held_[id];
    for (const Write& w : plan->writes[id_]) {
      if (c_.topo().PrimaryOf(w.key) == id_ && locks_.emplace(w.key, id).second) held.push_back(w.key);
    }
  }
  for (const auto& [id, parts] : prepared) StartRecovery(id);
  SendHello();
  return Status::Ok();
}

// A SNAPSHOT record met while replaying the WAL (retention on): the state up
// to it is the snapshot file's. The snapshot was taken quiesced, so nothing
// can be undecided at that point; outcomes of earlier transactions are
// forgotten (nobody asks about them: every participant had finished them).
// Cut ids below the snapshot's are not needed before the initiator tells the
// current cut (OnHelloResp): every cut up to then had completed, and rule 4,
// the only use of the node's own cut id while it recovers, waits for that.
Status Node::LoadSnapshot(const walfmt::Snapshot& rec, const walfmt::Lsn& at,
                          std::map<TxId, std::vector<Write>>& data, std::map<TxId, std::vector<uint32_t>>& prepared) {
  if (!data.empty() || !prepared.empty()) {
    return Status::Corruption(fmt::format("node {}: cannot recover: {} undecided transactions before SNAPSHOT({}) at {}",
                                          id_, data.size() + prepared.size(), rec.name, at.ToString()));
  }
  const std::string path = fmt::format("{}/snapshots/{}/node-{}.snap", c_.opt().dir, rec.name, id_);
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
  h.to = c_.Initiator();
  Send(std::move(h));
  PostAfter(c_.opt().recovery_retry_us, [this] { SendHello(); });
}

void Node::OnHelloResp(const Msg& m) {
  if (ready_) return;
  const uint64_t current = m.marker;
  const bool running = m.ok;
  // The cut this node was in when it crashed cannot be consistent: its
  // capture and tracked set were lost with its memory.
  if (open_cut_ != 0 && !(running && open_cut_ == current)) {
    Log(walfmt::CutAbort{open_cut_, c_.now(), walfmt::CutAbortReason::kNodeRestart,
                         fmt::format("node {} restarted (incarnation {})", id_, incarnation_)});
    ++c_.sum().cut_aborts;
  }
  if (running && last_finished_cut_ < current) {
    Log(walfmt::CutAbort{current, c_.now(), walfmt::CutAbortReason::kNodeRestart,
                         fmt::format("node {} restarted (incarnation {}) while the cut ran", id_, incarnation_)});
    ++c_.sum().cut_aborts;
    // Its report on the running cut, should a new initiator ask for it.
    reported_k_ = current;
    reported_ok_ = false;
  }
  Sync();
  open_cut_ = 0;
  cut_id_ = std::max(cut_id_, current);
  ready_ = true;
  c_.NodeReady(id_);
}

void Node::OnNodeFailed(uint32_t x) {
  // Near side, in id order (deterministic).
  std::vector<TxId> ids;
  for (const auto& [id, t] : near_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  for (const TxId& id : ids) {
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
        const bool load = t.load;
        near_.erase(it);
        ++c_.sum().lost_at_near;
        c_.TxEnded(load, false, AbortReason::kParticipantLost, true);
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

  // Participant side.
  ids.clear();
  for (const auto& [id, lt] : local_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  for (const TxId& id : ids) {
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
        if (lt.st == TxState::kPrepared &&
            (x == plan.forwarder[id_] || (!plan.one_phase && x == plan.id.node) ||
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

  // Locks taken for a near node that is gone, by transactions that never
  // prepared here, are dropped.
  std::vector<TxId> orphans;
  for (const auto& [id, keys] : held_) {
    if (id.node == x && !local_.count(id)) orphans.push_back(id);
  }
  std::sort(orphans.begin(), orphans.end());
  for (const TxId& id : orphans) ReleaseLocks(id);

  // The oldest live node takes over when the initiator is gone.
  if (!initiating_ && c_.Initiator() == id_) TakeOver();

  // The initiator: a cut running across a crash cannot be consistent.
  if (initiating_ && init_k_ != 0 && x < expected_.size() && expected_[x]) {
    expected_[x] = false;
    --remaining_;
    init_inconsistent_ = true;
    init_lost_node_ = true;
    init_why_ = fmt::format("node {} crashed while cut {} ran", x, init_k_);
    MaybeCompleteCut();
  }
}

void Node::Remember(std::unordered_map<TxId, Outcome, TxIdHash>& map, const TxId& id, Outcome o) {
  // Never overwrites: a late rollback notice must not erase a commit.
  if (c_.faults()) map.emplace(id, o);
}

bool Node::NearGone(const TxPlan& plan) const {
  return !plan.one_phase && (!c_.IsAlive(plan.id.node) || c_.IncarnationOf(plan.id.node) != plan.near_incarnation);
}

// A safety net under the failure handling: a transaction prepared here that
// has not moved for far longer than any fault-free transaction takes goes to
// the recovery protocol, which is safe at any time (it learns the outcome
// from the near node if that is alive). Fault-free runs never get here.
void Node::WatchStuck(const TxId& id) {
  if (!c_.faults()) return;  // nothing gets stuck without faults (and the timer events are not free)
  constexpr uint64_t kStuckUs = 200000;
  const auto st = local_.at(id).st;
  PostAfter(kStuckUs, [this, id, st] {
    auto it = local_.find(id);
    if (it == local_.end() || it->second.st != st || in_doubt_.count(id)) return;
    ++c_.sum().stuck_recoveries;
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
    c_.Fail(Status::Internal(fmt::format("node {}: recovery of {} did not converge (seed {}); participants {}, "
                                         "last answers{}, ready {}",
                                         id_, id.ToString(), c_.opt().seed, fmt::join(local_.at(id).plan->participants, ","),
                                         answers, ready_)));
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
    if (y == id_ || !c_.IsAlive(y)) continue;
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
  PostAfter(c_.opt().recovery_retry_us, [this, id, round] {
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
    c_.Fail(Status::Internal(fmt::format("node {}: {} is both committed and rolled back (seed {}); answers{}", id_,
                                         id.ToString(), c_.opt().seed, text)));
    return;
  }
  if (commit) return Resolve(id, true, marker);
  if (rollback) return Resolve(id, false, 0);
  if (wait || !all_prepared || !ready_) return;
  if (id_ == plan.participants.front()) Resolve(id, true, cut_id_);
}

void Node::Resolve(const TxId& id, bool commit, uint64_t marker) {
  auto it = local_.find(id);
  const auto plan = it->second.plan;
  const Role role = it->second.role;
  if (commit) {
    Log(walfmt::TxCommit{id, marker, c_.now(),
                         static_cast<uint16_t>((plan->one_phase ? walfmt::kTxFlagOnePhase : 0) |
                                               walfmt::kTxFlagRecovered),
                         plan->participants});
    Sync();
    for (const Write& w : plan->writes[id_]) {
      if (w.op == walfmt::WriteOp::kDelete) kv_.erase(w.key);
      else kv_[w.key] = w.value;
    }
    outcomes_[id] = Outcome{true, marker};
    c_.RecordCommit(*plan, marker, true);
    ++c_.sum().recovered_commits;
    CutTxFinished(id, true, marker, true);
  } else {
    WriteRollback(id, *plan, walfmt::kTxFlagRecovered);
    ++c_.sum().recovered_rollbacks;
  }
  in_doubt_.erase(id);
  local_.erase(id);
  ReleaseLocks(id);
  if (role == Role::kPrimary1pc) {
    Msg r;
    r.type = MsgType::kCommit1pcResp;
    r.to = plan->id.node;
    r.tx = id;
    r.ok = commit;
    Send(std::move(r));
  }
}

// ---- cut protocol

// Step A (rule 3): the cut id changes and capturing starts in the same step.
// CUT_START is written by a later event (step B), so commits can land in
// between, as they would between two threads.
void Node::StartCut(uint64_t k) {
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
  Log(walfmt::CutStart{k, c_.now()});
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
  RunSummary& s = c_.sum();
  s.before += cut_.before.size();
  s.after += cut_.after.size();
  s.after_commit_before_start += cut_.after_early;
  s.before_commit_after_start += cut_.before_late;
  Log(walfmt::CutFinish{cut_.k, c_.now(), std::move(cut_.before), std::move(cut_.after)});
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
  r.to = c_.Initiator();
  r.ok = ok;
  r.marker = k;
  Send(std::move(r));
}

void Node::OnCutStart(const Msg& m) {
  // Deliver has already joined the cut if it was new here (rule 2); that was
  // all an initiator's first request asks for. A request from an initiator
  // that took over (marker = the cut) also asks a node that already ended the
  // cut to report again: its first report may have gone to the crashed one.
  if (m.marker == 0 || m.marker != cut_id_ || cut_.active) return;
  Report(m.marker, reported_k_ == m.marker && reported_ok_);
}

void Node::AbortCut(walfmt::CutAbortReason why, std::string detail) {
  const uint64_t k = cut_.k;
  Log(walfmt::CutAbort{k, c_.now(), why, std::move(detail)});
  Sync();
  ++c_.sum().cut_aborts;
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
  ++c_.sum().initiator_failovers;
  const uint64_t k = c_.RunningCut();
  if (k == 0) return;
  ++c_.sum().cuts_taken_over;
  init_k_ = k;
  init_inconsistent_ = true;
  init_lost_node_ = true;
  init_why_ = fmt::format("initiator node {} crashed while cut {} ran; node {} took over", c_.FailedInitiator(), k, id_);
  expected_.assign(c_.topo().nodes(), false);
  remaining_ = 0;
  for (uint32_t n = 0; n < c_.topo().nodes(); ++n) {
    if (n == id_ || c_.IsReady(n)) {
      expected_[n] = true;
      ++remaining_;
    }
  }
  if (cut_id_ < k) StartCut(k);
  if (!cut_.active) {
    // Already ended here (whatever the report said, the cut is inconsistent).
    expected_[id_] = false;
    --remaining_;
  }
  for (uint32_t n = 0; n < c_.topo().nodes(); ++n) {
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
  expected_.assign(c_.topo().nodes(), false);
  remaining_ = 0;
  for (uint32_t n = 0; n < c_.topo().nodes(); ++n) {
    if (!c_.IsAlive(n)) {
      // MaybeStartCut saw every node up, but this event runs later: a node
      // that crashed in between never joins, so the cut cannot be consistent.
      init_inconsistent_ = true;
      init_lost_node_ = true;
      init_why_ = fmt::format("node {} was down when cut {} started", n, k);
      continue;
    }
    expected_[n] = true;
    ++remaining_;
  }
  if (cut_id_ < k) StartCut(k);
  for (uint32_t n = 0; n < c_.topo().nodes(); ++n) {
    if (n == id_) continue;
    Msg m;
    m.type = MsgType::kCutStart;
    m.to = n;
    Send(std::move(m));
  }
}

void Node::OnCutDone(const Msg& m) {
  if (m.marker != init_k_ || init_k_ == 0 || m.from >= expected_.size() || !expected_[m.from]) return;
  expected_[m.from] = false;
  --remaining_;
  if (!m.ok) init_inconsistent_ = true;
  MaybeCompleteCut();
}

void Node::MaybeCompleteCut() {
  if (init_k_ == 0 || remaining_ > 0) return;
  const uint64_t k = init_k_;
  if (init_lost_node_) {
    // The crashed node may never write anything for this cut: the initiator
    // records why the cut is inconsistent.
    Log(walfmt::CutAbort{k, c_.now(), walfmt::CutAbortReason::kParticipantLost, init_why_});
    Sync();
    ++c_.sum().cut_aborts;
  }
  init_k_ = 0;
  c_.CutCompleted(k, !init_inconsistent_);
}

// ================================================================== Cluster

void Cluster::Send(Msg m) {
  ++sum_.messages;
  // Most messages take min..max; a few take up to ten times the maximum (a
  // long tail, as real networks have), which also reorders them more.
  uint64_t delay = rng_.Range(opt_.net_delay_min_us, opt_.net_delay_max_us);
  if (rng_.Chance(opt_.slow_message_per_million)) delay = rng_.Range(opt_.net_delay_max_us, 10 * opt_.net_delay_max_us);
  Scheduler::Event& e = sched_.Add(sched_.now() + delay);
  e.node = m.to;
  e.incarnation = nodes_[m.to]->incarnation();
  e.has_msg = true;
  e.msg = std::move(m);
}

void Cluster::PostLocal(uint32_t node, uint32_t incarnation, uint64_t delay, std::function<void()> fn) {
  Scheduler::Event& e = sched_.Add(sched_.now() + delay);
  e.node = node;
  e.incarnation = incarnation;
  e.fn = std::move(fn);
}

void Cluster::PostStep(uint32_t node, uint32_t incarnation, uint64_t delay, StepKind kind, const TxId& id,
                       uint64_t k) {
  Scheduler::Event& e = sched_.Add(sched_.now() + delay);
  e.node = node;
  e.incarnation = incarnation;
  e.step = kind;
  e.step_tx = id;
  e.step_k = k;
}

// The oracle learns of a commit when the first TX_COMMIT is written (and
// synced): that is when the transaction is committed, whatever happens next.
//
// A plan rebuilt by a restarted node holds only that node's share of the
// writes; the transaction is the one the near node planned, which the node
// handed over when it crashed (KeepUndecided): the history takes the writes,
// participants and kind from that plan. Either way the entry's writes are
// what the participants' TX_DATA records hold, each its keys' share.
void Cluster::RecordCommit(const TxPlan& plan, uint64_t marker, bool recovered) {
  if (plan.recorded) return;
  plan.recorded = true;
  // A plan rebuilt by a restarted node is another object: the set decides.
  if (!committed_ids_.insert(plan.id).second) return;
  std::shared_ptr<const TxPlan> original;
  if (!undecided_plans_.empty()) {
    if (auto it = undecided_plans_.find(plan.id); it != undecided_plans_.end()) {
      original = std::move(it->second);
      undecided_plans_.erase(it);
    }
  }
  if (plan.rebuilt && !original) {
    return Fail(Status::Internal(fmt::format("{} committed from a rebuilt plan, but no crashed node had its plan "
                                             "(seed {})",
                                             plan.id.ToString(), opt_.seed)));
  }
  const TxPlan& p = plan.rebuilt ? *original : plan;
  CommittedTx c;
  c.id = plan.id;
  c.marker = marker;
  c.one_phase = p.one_phase;
  c.load = p.load;
  c.participants = p.participants;
  c.writes = p.all_writes;
  c.decided_us = sched_.now();
  c.recovered = recovered;
  history_.committed.push_back(std::move(c));
}

void Cluster::KeepUndecided(const std::shared_ptr<const TxPlan>& plan) {
  if (committed_ids_.count(plan->id)) return;
  undecided_plans_.emplace(plan->id, plan);
}

void Cluster::TxEnded(bool load, bool committed, AbortReason why, bool one_phase) {
  --inflight_;
  if (load) {
    ++loads_done_;
  } else if (committed) {
    ++committed_since_cut_;
    (void)one_phase;
  } else {
    switch (why) {
      case AbortReason::kConflict: ++sum_.rolled_back_conflict; break;
      case AbortReason::kInsufficientFunds: ++sum_.rolled_back_funds; break;
      case AbortReason::kVoteNo: ++sum_.rolled_back_vote_no; break;
      default: ++sum_.rolled_back_other; break;
    }
  }
  MaybeStartCut();
  FillSlots();
}

void Cluster::StartTx(std::shared_ptr<Program> prog, bool load) {
  // The client picks a ready near node at random; the request reaches it
  // after a short think time.
  std::vector<uint32_t> live;
  for (const auto& n : nodes_) {
    if (n->ready()) live.push_back(n->id());
  }
  Node* near = nodes_[live[rng_.Below(live.size())]].get();
  ++inflight_;
  // A driver event, not a node event: if the near node crashes before the
  // request arrives, the client must still learn that it failed.
  const uint32_t inc = near->incarnation();
  PostDriver(rng_.Range(1, opt_.step_delay_max_us), [this, near, inc, prog, load] {
    if (!near->ready() || near->incarnation() != inc) {
      TxEnded(load, false, AbortReason::kParticipantLost, false);
      return;
    }
    near->BeginTx(prog, load);
  });
}

void Cluster::FillSlots() {
  while (inflight_ < opt_.concurrency && !failed()) {
    if (loads_started_ < loads_.size()) {
      StartTx(MakeLoadProgram(std::move(loads_[loads_started_++])), true);
    } else if (loads_done_ < loads_.size()) {
      break;  // the workload starts on the loaded cluster
    } else if (quiescing_) {
      break;
    } else if (next_snapshot_ < snapshot_due_.size() && started_ >= snapshot_due_[next_snapshot_]) {
      quiescing_ = true;
      PostDriver(100, [this] { TrySnapshot(); });
      break;
    } else if (started_ < opt_.txs) {
      ++started_;
      while (next_crash_ < crash_at_tx_.size() && crash_at_tx_[next_crash_].first <= started_) {
        const uint32_t n = crash_at_tx_[next_crash_++].second;
        const uint64_t delay = rng_.Range(opt_.restart_delay_us / 2, opt_.restart_delay_us * 2);
        PostDriver(1, [this, n, delay] { CrashNode(n, delay); });
      }
      StartTx(MakeWorkloadProgram(opt_.workload, rng_), false);
    } else {
      break;
    }
  }
}

void Cluster::MaybeStartCut() {
  if (cut_running_ || next_cut_ > opt_.cuts || committed_since_cut_ < opt_.cut_every) return;
  if (loads_done_ < loads_.size() || quiescing_) return;
  // A cut with a node down or still recovering could not be consistent: wait.
  for (uint32_t n = 0; n < opt_.nodes; ++n) {
    if (!nodes_[n]->alive() || !cut_ready_[n]) return;
  }
  cut_running_ = true;
  committed_since_cut_ = 0;
  ++sum_.cuts_started;
  // The initiator acts in an event of its own, not inside the event of the
  // node whose transaction just ended.
  Node* init = nodes_[Initiator()].get();
  const uint64_t k = next_cut_++;
  running_cut_ = k;
  PostLocal(init->id(), init->incarnation(), 1, [init, k] { init->InitiateCut(k); });
}

void Cluster::NodeReady(uint32_t n) {
  cut_ready_[n] = true;
  members_.push_back(n);
  MaybeStartCut();
}

void Cluster::CutCompleted(uint64_t k, bool consistent) {
  if (!cut_running_ || k != running_cut_) return;
  cut_running_ = false;
  ++(consistent ? sum_.cuts_consistent : sum_.cuts_inconsistent);
  MaybeStartCut();
}

void Cluster::CrashNode(uint32_t n, uint64_t restart_delay_us) {
  if (failed()) return;
  if (loads_done_ < loads_.size()) {
    // The initial data must be complete before faults begin.
    PostDriver(1000, [this, n, restart_delay_us] { CrashNode(n, restart_delay_us); });
    return;
  }
  Node& node = *nodes_[n];
  if (!node.alive()) return;  // already down: this crash does not happen
  const auto member = std::find(members_.begin(), members_.end(), n);
  if (member != members_.end() && members_.size() == 1) {
    // The last ready node stays up until another one is back: somebody must
    // take client requests and start the cuts.
    PostDriver(1000, [this, n, restart_delay_us] { CrashNode(n, restart_delay_us); });
    return;
  }
  ++sum_.crashes;
  const auto [lost_load, lost] = node.Crash();
  inflight_ -= lost_load + lost;
  loads_done_ += lost_load;
  sum_.lost_at_near += lost;
  cut_ready_[n] = false;
  if (member != members_.end()) {
    // The new oldest node takes over when it learns of the crash.
    if (member == members_.begin()) failed_initiator_ = n;
    members_.erase(member);
  }
  // Failure detection: every live node learns of the crash within
  // detect_delay_max_us, always before the node is back.
  for (auto& other : nodes_) {
    if (!other->alive()) continue;
    Node* o = other.get();
    PostLocal(o->id(), o->incarnation(), rng_.Range(1, opt_.detect_delay_max_us), [o, n] { o->OnNodeFailed(n); });
  }
  const uint64_t delay = std::max(restart_delay_us, opt_.detect_delay_max_us + 1);
  PostDriver(delay, [this, n] {
    if (Status st = nodes_[n]->Restart(writer_opts_[n]); !st.ok()) {
      Fail(st);
      return;
    }
    ++sum_.restarts;
  });
  FillSlots();
}

// The full snapshot is taken with transactions quiesced, as Ignite does under
// partition-map exchange: nothing in flight anywhere, no cut running, every
// node up. Then every node writes its state in the same event.
void Cluster::TrySnapshot() {
  if (failed()) return;
  bool idle = inflight_ == 0 && !cut_running_;
  for (const auto& n : nodes_) idle = idle && n->ready() && n->Idle();
  if (!idle) {
    constexpr uint32_t kMaxWaits = 100000;  // 50 s of virtual time
    if (++snapshot_waits_ > kMaxWaits) {
      return Fail(Status::Internal(fmt::format("full snapshot: the cluster never became idle (seed {})", opt_.seed)));
    }
    PostDriver(500, [this] { TrySnapshot(); });
    return;
  }
  SnapshotTaken snap;
  snap.name = fmt::format("full-{}", started_);
  snap.at_tx = started_;
  snap.time_us = sched_.now();
  const std::string dir = fmt::format("{}/snapshots/{}", opt_.dir, snap.name);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Fail(Status::Io(fmt::format("{}: cannot create: {}", dir, ec.message())));
  for (auto& n : nodes_) {
    walfmt::Lsn at;
    uint64_t fp = 0;
    if (Status st = n->TakeSnapshot(snap.name, fmt::format("{}/node-{}.snap", dir, n->id()), cluster_id_, at, fp);
        !st.ok()) {
      return Fail(st);
    }
    snap.wal_position.push_back(at);
    snap.fingerprint.push_back(fp);
  }
  if (opt_.wal_retention == WalRetention::kAfterSnapshot) {
    // Every node has its snapshot on disk: the segments wholly before the
    // one holding its SNAPSHOT record serve no restore from this snapshot
    // or a later cut, nor the node's own crash recovery.
    for (auto& n : nodes_) {
      uint64_t deleted = 0;
      if (Status st = n->PruneWal(writer_opts_[n->id()].wal_dir, snap.wal_position[n->id()].segment, deleted,
                                  sum_.segment_bytes_deleted);
          !st.ok()) {
        return Fail(st);
      }
      snap.segments_deleted.push_back(deleted);
      sum_.segments_deleted += deleted;
    }
  }
  snapshots_.push_back(std::move(snap));
  ++sum_.snapshots;
  ++next_snapshot_;
  quiescing_ = false;
  MaybeStartCut();
  FillSlots();
}

void Cluster::ScheduleCrashes() {
  for (const CrashSpec& c : opt_.crashes) {
    const uint64_t delay = c.restart_delay_us ? c.restart_delay_us : opt_.restart_delay_us;
    const uint32_t n = c.node;
    PostDriver(c.at_us, [this, n, delay] { CrashNode(n, delay); });
  }
  // Random crashes: when the k-th workload transaction starts, spread over the
  // middle 80 % of the workload, on any node (the initiator included).
  if (opt_.random_crashes > 0 && opt_.nodes > 1) {
    for (uint32_t i = 0; i < opt_.random_crashes; ++i) {
      const uint64_t at = opt_.txs / 10 + rng_.Below(std::max<uint64_t>(1, opt_.txs * 8 / 10));
      const uint32_t n = static_cast<uint32_t>(rng_.Below(opt_.nodes));
      crash_at_tx_.emplace_back(std::max<uint64_t>(1, at), n);
    }
    std::sort(crash_at_tx_.begin(), crash_at_tx_.end());
  }
}

Status Cluster::WriteClusterJson(bool complete) const {
  walfmt::ClusterInfo info;
  uint64_t sm = opt_.seed ^ 0x77616C6375742121ull;
  info.cluster_id = SplitMix64(sm);
  info.seed = opt_.seed;
  info.nodes = opt_.nodes;
  info.backups = opt_.backups;
  info.partitions = opt_.partitions;
  info.workload = opt_.workload.workload;
  info.accounts = opt_.workload.accounts;
  info.ring_keys = opt_.workload.ring;
  info.initial_balance = opt_.workload.initial_balance;
  info.initial_bank_total = InitialBankTotal(opt_.workload);
  for (uint32_t n = 0; n < opt_.nodes; ++n) info.node_wal_dirs.push_back(walfmt::NodeWalDirName(n));
  if (opt_.wal_retention != WalRetention::kKeep) {
    info.wal_retention = WalRetentionName(opt_.wal_retention);
    for (uint32_t n = 0; n < opt_.nodes; ++n) info.first_segment.push_back(n < first_segment_.size() ? first_segment_[n] : 0);
  }
  for (const auto& sn : snapshots_) {
    walfmt::FullSnapshotInfo snap;
    snap.name = sn.name;
    snap.dir = "snapshots/" + sn.name;
    snap.at_tx = sn.at_tx;
    snap.time_us = sn.time_us;
    for (size_t i = 0; i < sn.wal_position.size(); ++i) {
      walfmt::FullSnapshotNode node;
      node.node = static_cast<uint32_t>(i);
      node.file = fmt::format("node-{}.snap", i);
      node.fingerprint = sn.fingerprint[i];
      node.wal_position = sn.wal_position[i];
      if (i < sn.segments_deleted.size()) node.segments_deleted = sn.segments_deleted[i];
      snap.nodes.push_back(std::move(node));
    }
    info.full_snapshots.push_back(std::move(snap));
  }
  walfmt::ClusterRunRecord run;
  run.initiator = kFirstInitiator;
  run.txs = opt_.txs;
  run.concurrency = opt_.concurrency;
  run.cuts = opt_.cuts;
  run.cut_every = opt_.cut_every;
  run.segment_bytes = opt_.segment_bytes;
  run.full_snapshot_every = opt_.full_snapshot_every_tx;
  run.vote_no_per_million = opt_.vote_no_per_million;
  run.net_delay_min_us = opt_.net_delay_min_us;
  run.net_delay_max_us = opt_.net_delay_max_us;
  run.step_delay_max_us = opt_.step_delay_max_us;
  for (const auto& c : opt_.crashes) run.crashes.push_back({c.node, c.at_us, c.restart_delay_us});
  run.random_crashes = opt_.random_crashes;
  run.complete = complete;
  return walfmt::WriteClusterJson(opt_.dir, info, run);
}

void Cluster::Dispatch(Scheduler::Event& e) {
  if (e.node == kNoNode) {
    e.fn();
    return;
  }
  Node& n = *nodes_[e.node];
  if (!n.alive() || n.incarnation() != e.incarnation) return;
  if (e.has_msg) {
    // A crash resets the sender's connections: what it sent before is lost.
    const Node& from = *nodes_[e.msg.from];
    if (!from.alive() || from.incarnation() != e.msg.from_incarnation) return;
    n.Deliver(e.msg);
  } else if (e.step != StepKind::kNone) {
    n.RunStep(e.step, e.step_tx, e.step_k);
  } else {
    e.fn();
  }
}

Status Cluster::Run() {
  const auto wall_start = std::chrono::steady_clock::now();
  const std::clock_t cpu_start = std::clock();
  uint64_t sm = opt_.seed ^ 0x77616C6375742121ull;
  cluster_id_ = SplitMix64(sm);
  const uint64_t cluster_id = cluster_id_;
  for (uint32_t i = 0; i < opt_.nodes; ++i) nodes_.push_back(std::make_unique<Node>(*this, i));
  cut_ready_.assign(opt_.nodes, true);
  members_.clear();
  for (uint32_t n = 0; n < opt_.nodes; ++n) members_.push_back(n);
  for (uint32_t i = 0; i < opt_.nodes; ++i) {
    walfmt::WriterOptions wo;
    wo.wal_dir = fmt::format("{}/node-{}/wal", opt_.dir, i);
    wo.node_id = i;
    wo.cluster_id = cluster_id;
    wo.segment_bytes = opt_.segment_bytes;
    wo.archive_compressed = true;
    writer_opts_.push_back(wo);
    if (Status st = nodes_[i]->Open(wo); !st.ok()) return st;
  }
  if (failed()) return error_;
  if (Status st = WriteClusterJson(false); !st.ok()) return st;

  // The initial data, grouped by primary node so each load is one-phase.
  std::map<uint32_t, std::vector<Write>> by_primary;
  for (auto& w : InitialWrites(opt_.workload)) by_primary[topo_.PrimaryOf(w.key)].push_back(std::move(w));
  for (auto& [p, ws] : by_primary) {
    for (size_t i = 0; i < ws.size(); i += kLoadKeysPerTx) {
      const size_t end = std::min(ws.size(), i + kLoadKeysPerTx);
      loads_.emplace_back(std::make_move_iterator(ws.begin() + static_cast<std::ptrdiff_t>(i)),
                          std::make_move_iterator(ws.begin() + static_cast<std::ptrdiff_t>(end)));
    }
  }
  sum_.load_txs = loads_.size();
  sum_.initial_bank_total = InitialBankTotal(opt_.workload);
  std::set<uint64_t> due;
  if (opt_.full_snapshot_at_tx > 0) due.insert(opt_.full_snapshot_at_tx);
  if (opt_.full_snapshot_every_tx > 0) {
    for (uint64_t at = opt_.full_snapshot_every_tx; at <= opt_.txs; at += opt_.full_snapshot_every_tx) due.insert(at);
  }
  snapshot_due_.assign(due.begin(), due.end());
  ScheduleCrashes();
  FillSlots();

  uint64_t events = 0;
  uint32_t slot = 0;
  while (sched_.Pop(slot)) {
    if (++events > kMaxEvents) {
      Fail(Status::Internal(fmt::format("simulation did not end after {} events", kMaxEvents)));
      break;
    }
    Dispatch(sched_.at(slot));
    sched_.Release(slot);
  }
  sum_.events = events;
  sum_.sim_time_us = sched_.now();
  if (failed()) return error_;
  if (inflight_ != 0 || started_ != opt_.txs || cut_running_ || sum_.restarts != sum_.crashes) {
    std::string pending;
    for (const auto& n : nodes_) pending += fmt::format("; node {}:{}", n->id(), n->Pending());
    return Status::Internal(fmt::format(
        "simulation stalled: {} transactions in flight, {} of {} started, cut running: {} (seed {}){}", inflight_,
        started_, opt_.txs, cut_running_, opt_.seed, pending));
  }
  for (auto& n : nodes_) {
    if (Status st = n->Close(); !st.ok()) return st;
  }
  // The final counts come from the history, which knows the outcome of
  // transactions whose near node crashed.
  for (const auto& c : history_.committed) {
    if (c.load) continue;
    ++sum_.committed;
    ++(c.one_phase ? sum_.committed_1pc : sum_.committed_2pc);
  }
  for (const TxId& id : began_) {
    if (!committed_ids_.count(id)) history_.rolled_back.push_back(id);
  }
  sum_.rolled_back = opt_.txs - std::min<uint64_t>(opt_.txs, sum_.committed);
  for (const auto& wo : writer_opts_) {
    auto segs = walfmt::ListSegments(wo.wal_dir, nullptr);
    if (!segs.ok()) return segs.status();
    first_segment_.push_back(segs->empty() ? 0 : segs->front().index);
  }
  // Rewritten now that the snapshots are known; "complete": false marks a run
  // that stopped early.
  if (Status st = WriteClusterJson(true); !st.ok()) return st;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(opt_.dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file(ec)) sum_.wal_bytes += it->file_size(ec);
  }
  sum_.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  sum_.cpu_seconds = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  return Status::Ok();
}

}  // namespace

Status NormalizeOptions(ClusterOptions& opt) {
  if (opt.dir.empty()) return Status::InvalidArgument("no cluster directory given");
  if (opt.nodes < 1 || opt.nodes > 64) return Status::InvalidArgument(fmt::format("--nodes {}: must be 1..64", opt.nodes));
  if (opt.backups >= opt.nodes) {
    return Status::InvalidArgument(fmt::format("--backups {}: must be less than --nodes {}", opt.backups, opt.nodes));
  }
  if (opt.partitions == 0) opt.partitions = 4 * opt.nodes;
  if (opt.partitions > 65536) return Status::InvalidArgument("--partitions: at most 65536");
  if (opt.concurrency < 1 || opt.concurrency > 100000) return Status::InvalidArgument("--concurrency: must be 1..100000");
  WorkloadParams& w = opt.workload;
  const bool bank = w.workload == Workload::kBank || w.workload == Workload::kMixed;
  const bool cycle = w.workload == Workload::kCycle || w.workload == Workload::kMixed;
  if (!bank) w.accounts = 0;
  else if (w.accounts == 0) w.accounts = 1000;
  if (!cycle) w.ring = 0;
  else if (w.ring == 0) w.ring = 1000;
  if (bank && w.accounts < 2) return Status::InvalidArgument("bank workload needs at least 2 accounts");
  if (cycle && w.ring < 4) return Status::InvalidArgument("cycle workload needs at least 4 ring keys");
  if (w.accounts > 1000000 || w.ring > 1000000) return Status::InvalidArgument("at most 1000000 keys per workload");
  if (w.max_transfer < 1) w.max_transfer = 1;
  if (opt.cut_every == 0) opt.cut_every = std::max<uint64_t>(1, opt.txs / (opt.cuts + 1));
  if (opt.segment_bytes < 4096) return Status::InvalidArgument("--segment-size: at least 4096 bytes");
  if (opt.net_delay_min_us < 1 || opt.net_delay_max_us < opt.net_delay_min_us) {
    return Status::InvalidArgument("network delays: need 1 <= min <= max");
  }
  if (opt.step_delay_max_us < 1) return Status::InvalidArgument("step delay: at least 1 us");
  if (!opt.crashes.empty() && opt.nodes < 2) {
    return Status::InvalidArgument("--crash: needs at least 2 nodes (the last live node never crashes)");
  }
  for (const CrashSpec& c : opt.crashes) {
    if (c.node >= opt.nodes) {
      return Status::InvalidArgument(fmt::format("--crash: node {} does not exist ({} nodes)", c.node, opt.nodes));
    }
  }
  if (opt.random_crashes > 0 && opt.nodes < 2) {
    return Status::InvalidArgument("--crashes: needs at least 2 nodes (the last live node never crashes)");
  }
  if (opt.full_snapshot_at_tx > opt.txs) {
    return Status::InvalidArgument(
        fmt::format("--full-snapshot-at {}: beyond the {} workload transactions", opt.full_snapshot_at_tx, opt.txs));
  }
  if (opt.full_snapshot_every_tx > opt.txs) {
    return Status::InvalidArgument(fmt::format("--full-snapshot-every {}: beyond the {} workload transactions",
                                               opt.full_snapshot_every_tx, opt.txs));
  }
  if (opt.random_crashes > 1000) return Status::InvalidArgument("--crashes: at most 1000");
  if (opt.restart_delay_us < 1) return Status::InvalidArgument("restart delay: at least 1 us");
  return Status::Ok();
}

namespace {
bool ParseDuration(std::string_view s, uint64_t& us) {
  auto r = walfmt::ParseDuration(s);
  if (!r.ok()) return false;
  us = *r;
  return true;
}
}  // namespace

std::string_view WalRetentionName(WalRetention r) {
  switch (r) {
    case WalRetention::kKeep: return "keep";
    case WalRetention::kAfterSnapshot: return "after-snapshot";
  }
  return "?";
}

bool ParseWalRetention(std::string_view text, WalRetention& out) {
  if (text == "keep") out = WalRetention::kKeep;
  else if (text == "after-snapshot") out = WalRetention::kAfterSnapshot;
  else return false;
  return true;
}

bool ParseCrashSpec(std::string_view text, CrashSpec& out) {
  const size_t at = text.find('@');
  if (at == std::string_view::npos || at == 0) return false;
  uint32_t node = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + at, node);
  if (ec != std::errc() || p != text.data() + at) return false;
  std::string_view rest = text.substr(at + 1);
  std::string_view delay;
  if (const size_t plus = rest.find('+'); plus != std::string_view::npos) {
    delay = rest.substr(plus + 1);
    rest = rest.substr(0, plus);
    if (delay.empty()) return false;
  }
  CrashSpec c;
  c.node = node;
  if (!ParseDuration(rest, c.at_us)) return false;
  if (!delay.empty() && (!ParseDuration(delay, c.restart_delay_us) || c.restart_delay_us == 0)) return false;
  out = c;
  return true;
}

walfmt::Result<RunResult> RunCluster(ClusterOptions opt) {
  if (Status st = NormalizeOptions(opt); !st.ok()) return st;
  std::error_code ec;
  if (std::filesystem::exists(opt.dir, ec)) {
    if (!std::filesystem::is_directory(opt.dir, ec)) {
      return Status::InvalidArgument(fmt::format("{}: exists and is not a directory", opt.dir));
    }
    if (!std::filesystem::is_empty(opt.dir, ec)) {
      return Status::InvalidArgument(fmt::format("{}: exists and is not empty; walcut run never overwrites", opt.dir));
    }
  }
  std::filesystem::create_directories(opt.dir, ec);
  if (ec) return Status::Io(fmt::format("{}: cannot create: {}", opt.dir, ec.message()));
  Cluster c(opt);
  if (Status st = c.Run(); !st.ok()) return st;
  return c.TakeResult();
}

}  // namespace walcut::node
