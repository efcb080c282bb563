// The simulated cluster. Reading guide:
//   Scheduler       the event queue: (time, sequence) order, one RNG, no threads
//   Msg / TxPlan    what travels on the network
//   Node            one node: near (coordinator), primary, backup and decider
//                   roles, locks, its WAL, and its side of the cut protocol
//   Cluster         the driver: topology, client load, cut initiation, oracle
//
// Why transactions are correct with respect to the cut (DESIGN.md section 1,
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

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "node/rng.h"
#include "node/topology.h"
#include "walfmt/segment.h"
#include "walfmt/writer.h"

namespace walcut::node {
namespace {

using walfmt::Status;
using walfmt::TxId;
using walfmt::TxIdHash;
using walfmt::Write;

constexpr uint32_t kNoNode = 0xFFFFFFFFu;
constexpr uint32_t kInitiator = 0;  // node 0 starts every cut
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
  kDecided1pc,     // deciding backup -> primary: committed, with the marker
  kCommit1pcResp,  // primary -> near
  kCutStart,       // initiator -> node: join the cut named by cut_id
  kCutDone,        // node -> initiator: CUT_FINISH(marker) written and synced
};

// What the near node decided to write, per node. Immutable once sent: the
// messages of one transaction share it (one process; a real network would
// serialize it).
struct TxPlan {
  TxId id;
  bool one_phase = false;
  bool may_fail = false;                       // the prepare may be refused (fault injection)
  bool load = false;                           // part of the initial data
  std::vector<uint32_t> participants;          // sorted
  std::vector<uint32_t> primaries;             // sorted
  std::vector<std::vector<Write>> writes;      // by node: the writes for the keys that node holds
  std::vector<std::vector<uint32_t>> forward;  // by primary: the backups it forwards to
  std::vector<uint32_t> forwarder;             // by node: who forwards to it (kNoNode: the near node)
  uint32_t decider = kNoNode;                  // 1PC: the node that decides (first backup, or the primary)
  std::vector<Write> all_writes;               // for the history
};

struct Msg {
  MsgType type = MsgType::kLockRead;
  uint32_t from = 0;
  uint32_t to = 0;
  uint64_t cut_id = 0;  // the sender's cut id when it sent this (rule 2)
  TxId tx;
  bool ok = true;
  bool commit = false;
  uint64_t marker = 0;  // Finish/Decided1pc: m(T); CutDone: the cut reported on
  std::vector<std::string> keys;
  std::vector<std::optional<std::string>> values;
  std::shared_ptr<const TxPlan> plan;
};

class Node;

// Events are ordered by (time, sequence); the sequence number makes ties
// deterministic. An event is either a message delivery or a local step of a
// node; both are dropped when the node is down.
class Scheduler {
 public:
  struct Event {
    uint64_t t = 0;
    uint64_t seq = 0;
    uint32_t node = kNoNode;
    uint32_t incarnation = 0;
    std::unique_ptr<Msg> msg;
    std::function<void()> fn;
  };

  uint64_t now() const { return now_; }
  void Push(Event e) {
    e.seq = next_seq_++;
    heap_.push_back(std::move(e));
    std::push_heap(heap_.begin(), heap_.end(), Later{});
  }
  bool Pop(Event& out) {
    if (heap_.empty()) return false;
    std::pop_heap(heap_.begin(), heap_.end(), Later{});
    out = std::move(heap_.back());
    heap_.pop_back();
    now_ = out.t;
    return true;
  }
  void Clear() { heap_.clear(); }

 private:
  struct Later {
    bool operator()(const Event& a, const Event& b) const { return a.t != b.t ? a.t > b.t : a.seq > b.seq; }
  };
  std::vector<Event> heap_;
  uint64_t now_ = 0;
  uint64_t next_seq_ = 0;
};

class Cluster;

class Node {
 public:
  Node(Cluster& c, uint32_t id) : c_(c), id_(id) {}

  Status Open(const walfmt::WriterOptions& wo);
  Status Close();
  void Deliver(Msg& m);

  // Driver entry points.
  void BeginTx(std::shared_ptr<Program> prog, bool load);
  void InitiateCut(uint64_t k);

  uint32_t id() const { return id_; }
  bool alive() const { return alive_; }
  uint32_t incarnation() const { return incarnation_; }
  const std::unordered_map<std::string, std::string>& kv() const { return kv_; }

 private:
  // ---- near (coordinator) side
  struct NearTx {
    std::shared_ptr<Program> prog;
    bool load = false;
    std::vector<uint32_t> contacted;  // sorted primaries that may hold locks for the tx
    uint32_t pending = 0;             // responses still expected
    bool failed = false;              // a conflict in this round, or a no vote
    ReadSet reads;
    std::shared_ptr<const TxPlan> plan;
    uint64_t marker = 0;
  };
  void Advance(const TxId& id);
  void AbortTx(const TxId& id, AbortReason why);
  void CommitTx(const TxId& id, std::vector<Write> writes);
  void OnLockReadResp(const Msg& m);
  void OnVote(const Msg& m);
  void Decide(const TxId& id);
  void OnFinishAck(const Msg& m);
  void OnCommit1pcResp(const Msg& m);

  // ---- participant side
  enum class Role : uint8_t { kPrimary2pc, kBackup, kPrimary1pc, kDecider };
  enum class TxState : uint8_t {
    kPreparing1pc,  // 1PC primary waiting for the non-deciding backups to prepare
    kPrepared,      // TX_PREPARE written (2PC, or a non-deciding 1PC backup)
    kCommitting,    // outcome known (or being decided), TX_COMMIT not written yet
    kCommitted,     // TX_COMMIT written, waiting for the backups' acknowledgements
  };
  struct LocalTx {
    std::shared_ptr<const TxPlan> plan;
    Role role = Role::kBackup;
    TxState st = TxState::kPrepared;
    uint32_t waiting = 0;  // votes or acks from the backups this node forwarded to
    bool all_yes = true;
    uint64_t marker = 0;
  };
  void OnLockRead(const Msg& m);
  void OnPrepare(const Msg& m);
  void OnPrepareFwd(const Msg& m);
  void OnVoteFwd(const Msg& m);
  void OnFinish(const Msg& m);
  void OnFinishFwd(const Msg& m);
  void OnFinishAckFwd(const Msg& m);
  void OnCommit1pc(const Msg& m);
  void Enter1pcCommit(const TxId& id, LocalTx& lt);
  void DeciderBegin(const TxId& id, LocalTx& lt);
  void OnDecide1pc(const Msg& m);
  void OnDecided1pc(const Msg& m);
  void CommitStep(const TxId& id);
  void MaybeAck(const TxId& id);
  void WriteRollback(const TxId& id, const TxPlan& plan);
  void ReleaseLocks(const TxId& id);

  // ---- cut protocol
  void StartCut(uint64_t k);      // step A: set the cut id, start capturing
  void CutStartStep(uint64_t k);  // step B: CUT_START, collect the tracked set
  void CutTxFinished(const TxId& id, bool committed, uint64_t marker);
  void MaybeFinishCut();
  void OnCutDone(const Msg& m);

  // ---- plumbing
  void Send(Msg m);
  void Reply(const Msg& to, MsgType type, bool ok = true);
  void Post(std::function<void()> fn);  // a local step after a small random delay
  void Log(const walfmt::Record& r);
  void Sync();

  Cluster& c_;
  uint32_t id_;
  bool alive_ = true;
  uint32_t incarnation_ = 0;
  std::unique_ptr<walfmt::WalWriter> wal_;
  walfmt::Lsn synced_;  // durability point: everything before it survives a crash

  std::unordered_map<std::string, std::string> kv_;
  std::unordered_map<std::string, TxId> locks_;
  std::unordered_map<TxId, std::vector<std::string>, TxIdHash> held_;
  std::unordered_map<TxId, NearTx, TxIdHash> near_;
  std::unordered_map<TxId, LocalTx, TxIdHash> local_;
  uint64_t next_seq_ = 1;

  uint64_t cut_id_ = 0;
  struct CutState {
    bool active = false;
    uint64_t k = 0;
    bool capturing = false;  // between step A and step B
    std::vector<std::pair<TxId, uint64_t>> captured;  // committed here while capturing, with marker
    std::unordered_set<TxId, TxIdHash> tracked;       // tracked and not finished yet
    std::vector<TxId> before, after;
  } cut_;

  // Initiator state (node 0).
  uint64_t init_k_ = 0;
  uint32_t reports_ = 0;
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
  uint64_t StepDelay() { return rng_.Range(1, opt_.step_delay_max_us); }
  void Fail(const Status& st) {
    if (error_.ok()) error_ = st;
    sched_.Clear();
  }
  bool failed() const { return !error_.ok(); }
  void RecordCommit(const TxPlan& plan, uint64_t marker, bool load);
  void TxEnded(const TxId& id, bool load, bool committed, AbortReason why, bool one_phase);
  void CutCompleted(uint64_t k, bool consistent);
  uint32_t LiveNodes() const {
    uint32_t n = 0;
    for (const auto& x : nodes_) n += x->alive() ? 1 : 0;
    return n;
  }

 private:
  void FillSlots();
  void StartTx(std::shared_ptr<Program> prog, bool load);
  void MaybeStartCut();
  Status WriteClusterJson() const;

  ClusterOptions opt_;
  Topology topo_;
  Rng rng_;
  Scheduler sched_;
  std::vector<std::unique_ptr<Node>> nodes_;
  Status error_;
  RunSummary sum_;
  History history_;

  std::vector<std::vector<Write>> loads_;
  size_t loads_started_ = 0;
  size_t loads_done_ = 0;
  uint64_t started_ = 0;
  uint32_t inflight_ = 0;
  uint64_t committed_since_cut_ = 0;
  bool cut_running_ = false;
  uint64_t next_cut_ = 1;
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
  if (c_.failed()) return;
  wal_->set_time_us(c_.now());
  auto at = wal_->Append(r);
  if (!at.ok()) {
    c_.Fail(at.status());
    return;
  }
  ++c_.sum().records;
}

// The durability point. The writer keeps appended bytes in memory until
// WalWriter::Sync writes them; calling that on every simulated sync would cost
// a write(2) per prepare and per commit on every participant for nothing, as
// the simulation never fsyncs. Instead the node remembers how far it synced,
// and a simulated power loss keeps exactly that prefix (plus, maybe, a torn
// part of what follows). The file bytes are the same either way.
void Node::Sync() {
  if (wal_) synced_ = wal_->end();
}

void Node::Send(Msg m) {
  m.from = id_;
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

void Node::Post(std::function<void()> fn) { c_.PostLocal(id_, incarnation_, c_.StepDelay(), std::move(fn)); }

void Node::Deliver(Msg& m) {
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
    case MsgType::kCutStart: break;  // joining the cut was all it asked for
    case MsgType::kCutDone: OnCutDone(m); break;
  }
}

// ---- near side

void Node::BeginTx(std::shared_ptr<Program> prog, bool load) {
  const TxId id{id_, next_seq_++};
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
  t.pending = static_cast<uint32_t>(by_primary.size());
  t.failed = false;
  for (auto& [p, keys] : by_primary) {
    auto pos = std::lower_bound(t.contacted.begin(), t.contacted.end(), p);
    if (pos == t.contacted.end() || *pos != p) t.contacted.insert(pos, p);
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
  if (it == near_.end()) return;
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
  c_.TxEnded(id, load, false, why, false);
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
  if (plan->one_phase) {
    t.pending = 1;
    Msg m;
    m.type = MsgType::kCommit1pc;
    m.to = plan->primaries[0];
    m.tx = id;
    m.plan = plan;
    Send(std::move(m));
    return;
  }
  t.pending = static_cast<uint32_t>(plan->primaries.size());
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
  if (it == near_.end()) return;
  if (!m.ok) it->second.failed = true;
  if (--it->second.pending > 0) return;
  const TxId id = m.tx;
  Post([this, id] { Decide(id); });
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
    c_.TxEnded(id, load, false, AbortReason::kVoteNo, false);
    return;
  }
  t.marker = cut_id_;
  c_.RecordCommit(*t.plan, t.marker, t.load);
  Post([this, id] {
    NearTx& t2 = near_.at(id);
    t2.pending = static_cast<uint32_t>(t2.plan->primaries.size());
    for (uint32_t p : t2.plan->primaries) {
      Msg m;
      m.type = MsgType::kFinish;
      m.to = p;
      m.tx = id;
      m.commit = true;
      m.marker = t2.marker;
      Send(std::move(m));
    }
  });
}

void Node::OnFinishAck(const Msg& m) {
  auto it = near_.find(m.tx);
  if (it == near_.end()) return;
  if (--it->second.pending > 0) return;
  // Every participant committed: now the primaries may let the next
  // transaction take these keys (see the comment at the top of the file).
  for (uint32_t p : it->second.plan->primaries) {
    Msg r;
    r.type = MsgType::kRelease;
    r.to = p;
    r.tx = m.tx;
    Send(std::move(r));
  }
  const bool load = it->second.load;
  near_.erase(it);
  c_.TxEnded(m.tx, load, true, AbortReason::kNone, false);
}

void Node::OnCommit1pcResp(const Msg& m) {
  auto it = near_.find(m.tx);
  if (it == near_.end()) return;
  const bool load = it->second.load;
  near_.erase(it);
  c_.TxEnded(m.tx, load, true, AbortReason::kNone, true);
}

// ---- participant side

void Node::OnLockRead(const Msg& m) {
  Msg r;
  r.type = MsgType::kLockReadResp;
  r.to = m.from;
  r.tx = m.tx;
  for (const auto& k : m.keys) {
    auto it = locks_.find(k);
    if (it != locks_.end() && it->second != m.tx) {
      r.ok = false;  // no waiting: a conflict rolls the transaction back (no deadlocks)
      break;
    }
  }
  if (r.ok) {
    auto& held = held_[m.tx];
    for (const auto& k : m.keys) {
      auto [it, fresh] = locks_.emplace(k, m.tx);
      if (fresh) held.push_back(k);
      auto v = kv_.find(k);
      r.values.push_back(v == kv_.end() ? std::nullopt : std::optional<std::string>(v->second));
    }
    r.keys = m.keys;
  }
  Send(std::move(r));
}

void Node::ReleaseLocks(const TxId& id) {
  auto it = held_.find(id);
  if (it == held_.end()) return;
  for (const auto& k : it->second) {
    auto l = locks_.find(k);
    if (l != locks_.end() && l->second == id) locks_.erase(l);
  }
  held_.erase(it);
}

void Node::OnPrepare(const Msg& m) {
  const TxPlan& plan = *m.plan;
  if (plan.may_fail && c_.rng().Chance(c_.opt().vote_no_per_million)) {
    Reply(m, MsgType::kVote, false);  // refused: nothing written, nothing forwarded
    return;
  }
  Log(walfmt::TxData{plan.id, plan.writes[id_]});
  Log(walfmt::TxPrepare{plan.id, c_.now(), plan.participants});
  Sync();  // durable before voting
  LocalTx& lt = local_[plan.id];
  lt.plan = m.plan;
  lt.role = Role::kPrimary2pc;
  lt.st = TxState::kPrepared;
  lt.waiting = static_cast<uint32_t>(plan.forward[id_].size());
  for (uint32_t b : plan.forward[id_]) {
    Msg f;
    f.type = MsgType::kPrepareFwd;
    f.to = b;
    f.tx = plan.id;
    f.plan = m.plan;
    Send(std::move(f));
  }
  if (lt.waiting == 0) Reply(m, MsgType::kVote, true);
}

void Node::OnPrepareFwd(const Msg& m) {
  const TxPlan& plan = *m.plan;
  Log(walfmt::TxData{plan.id, plan.writes[id_]});
  Log(walfmt::TxPrepare{plan.id, c_.now(), plan.participants});
  Sync();
  LocalTx& lt = local_[plan.id];
  lt.plan = m.plan;
  lt.role = Role::kBackup;
  lt.st = TxState::kPrepared;
  Reply(m, MsgType::kVoteFwd, true);
}

void Node::OnVoteFwd(const Msg& m) {
  auto it = local_.find(m.tx);
  if (it == local_.end()) return;
  LocalTx& lt = it->second;
  if (!m.ok) lt.all_yes = false;
  if (--lt.waiting > 0) return;
  if (lt.role == Role::kPrimary1pc) return Enter1pcCommit(m.tx, lt);
  Msg v;
  v.type = MsgType::kVote;
  v.to = lt.plan->id.node;
  v.tx = m.tx;
  v.ok = lt.all_yes;
  Send(std::move(v));
}

void Node::WriteRollback(const TxId& id, const TxPlan& plan) {
  Log(walfmt::TxRollback{id, c_.now(), static_cast<uint16_t>(plan.one_phase ? walfmt::kTxFlagOnePhase : 0),
                         plan.participants});
  Sync();
  CutTxFinished(id, false, 0);
}

void Node::OnFinish(const Msg& m) {
  auto it = local_.find(m.tx);
  if (!m.commit) {
    if (it != local_.end()) {
      const auto plan = it->second.plan;
      WriteRollback(m.tx, *plan);
      for (uint32_t b : plan->forward[id_]) {
        Msg f;
        f.type = MsgType::kFinishFwd;
        f.to = b;
        f.tx = m.tx;
        f.commit = false;
        Send(std::move(f));
      }
      local_.erase(it);
    }
    ReleaseLocks(m.tx);
    return;
  }
  if (it == local_.end()) return;
  LocalTx& lt = it->second;
  lt.st = TxState::kCommitting;
  lt.marker = m.marker;
  lt.waiting = static_cast<uint32_t>(lt.plan->forward[id_].size());
  for (uint32_t b : lt.plan->forward[id_]) {
    Msg f;
    f.type = MsgType::kFinishFwd;
    f.to = b;
    f.tx = m.tx;
    f.commit = true;
    f.marker = m.marker;
    Send(std::move(f));
  }
  const TxId id = m.tx;
  Post([this, id] { CommitStep(id); });
}

void Node::OnFinishFwd(const Msg& m) {
  auto it = local_.find(m.tx);
  if (it == local_.end()) return;
  if (!m.commit) {
    WriteRollback(m.tx, *it->second.plan);
    local_.erase(it);
    return;
  }
  it->second.st = TxState::kCommitting;
  it->second.marker = m.marker;
  const TxId id = m.tx;
  Post([this, id] { CommitStep(id); });
}

// The second half of committing on a participant: write TX_COMMIT with the
// marker, sync, apply. The first half (learning the outcome, or reading the
// cut id on a 1PC decider) ran in an earlier event.
void Node::CommitStep(const TxId& id) {
  auto it = local_.find(id);
  if (it == local_.end()) return;
  LocalTx& lt = it->second;
  const TxPlan& plan = *lt.plan;
  Log(walfmt::TxCommit{id, lt.marker, c_.now(), static_cast<uint16_t>(plan.one_phase ? walfmt::kTxFlagOnePhase : 0),
                       plan.participants});
  Sync();  // durable before acknowledging
  for (const Write& w : plan.writes[id_]) {
    if (w.op == walfmt::WriteOp::kDelete) kv_.erase(w.key);
    else kv_[w.key] = w.value;
  }
  lt.st = TxState::kCommitted;
  CutTxFinished(id, true, lt.marker);
  MaybeAck(id);
}

void Node::MaybeAck(const TxId& id) {
  auto it = local_.find(id);
  LocalTx& lt = it->second;
  if (lt.st != TxState::kCommitted || lt.waiting > 0) return;
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
  }
  local_.erase(it);
  Send(std::move(r));
}

void Node::OnFinishAckFwd(const Msg& m) {
  auto it = local_.find(m.tx);
  if (it == local_.end()) return;
  if (it->second.waiting > 0) --it->second.waiting;
  MaybeAck(m.tx);
}

// 1PC at the primary. With more than one backup the others prepare first, so
// that every copy is known to the cut protocol before the decider reads its
// cut id (see the comment at the top: a backup that learnt of the transaction
// only from the outcome could not have tracked it).
void Node::OnCommit1pc(const Msg& m) {
  const TxPlan& plan = *m.plan;
  LocalTx& lt = local_[plan.id];
  lt.plan = m.plan;
  lt.role = Role::kPrimary1pc;
  lt.st = TxState::kPreparing1pc;
  lt.waiting = static_cast<uint32_t>(plan.forward[id_].size());
  if (lt.waiting == 0) return Enter1pcCommit(plan.id, lt);
  for (uint32_t b : plan.forward[id_]) {
    Msg f;
    f.type = MsgType::kPrepareFwd;
    f.to = b;
    f.tx = plan.id;
    f.plan = m.plan;
    Send(std::move(f));
  }
}

// The primary's own copy enters the commit: TX_DATA now (it is tracked from
// here on), TX_COMMIT once the decider answered.
void Node::Enter1pcCommit(const TxId& id, LocalTx& lt) {
  const TxPlan& plan = *lt.plan;
  if (plan.decider == id_) return DeciderBegin(id, lt);
  Log(walfmt::TxData{id, plan.writes[id_]});
  lt.st = TxState::kCommitting;
  Msg d;
  d.type = MsgType::kDecide1pc;
  d.to = plan.decider;
  d.tx = id;
  d.plan = lt.plan;
  Send(std::move(d));
}

// First step of the 1PC decider: read the cut id (the marker) and log the
// data. TX_COMMIT follows in CommitStep, a separate event.
void Node::DeciderBegin(const TxId& id, LocalTx& lt) {
  const TxPlan& plan = *lt.plan;
  lt.marker = cut_id_;
  lt.st = TxState::kCommitting;
  Log(walfmt::TxData{id, plan.writes[id_]});
  c_.RecordCommit(plan, lt.marker, plan.load);
  Post([this, id] { CommitStep(id); });
}

void Node::OnDecide1pc(const Msg& m) {
  LocalTx& lt = local_[m.tx];
  lt.plan = m.plan;
  lt.role = Role::kDecider;
  DeciderBegin(m.tx, lt);
}

void Node::OnDecided1pc(const Msg& m) {
  auto it = local_.find(m.tx);
  if (it == local_.end()) return;
  LocalTx& lt = it->second;
  lt.marker = m.marker;
  lt.waiting = static_cast<uint32_t>(lt.plan->forward[id_].size());
  for (uint32_t b : lt.plan->forward[id_]) {
    Msg f;
    f.type = MsgType::kFinishFwd;
    f.to = b;
    f.tx = m.tx;
    f.commit = true;
    f.marker = m.marker;
    Send(std::move(f));
  }
  const TxId id = m.tx;
  Post([this, id] { CommitStep(id); });
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
  Post([this, k] { CutStartStep(k); });
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
      ++c_.sum().after_commit_before_start;
    } else {
      cut_.before.push_back(id);
    }
  }
  cut_.captured.clear();
  cut_.capturing = false;
  MaybeFinishCut();
}

void Node::CutTxFinished(const TxId& id, bool committed, uint64_t marker) {
  if (!cut_.active) return;
  if (cut_.capturing) {
    if (committed) cut_.captured.emplace_back(id, marker);
    return;
  }
  auto it = cut_.tracked.find(id);
  if (it == cut_.tracked.end()) return;
  cut_.tracked.erase(it);
  if (committed) {
    if (marker >= cut_.k) {
      cut_.after.push_back(id);
    } else {
      cut_.before.push_back(id);
      ++c_.sum().before_commit_after_start;
    }
  }
  MaybeFinishCut();
}

void Node::MaybeFinishCut() {
  if (!cut_.active || cut_.capturing || !cut_.tracked.empty()) return;
  std::sort(cut_.before.begin(), cut_.before.end());
  std::sort(cut_.after.begin(), cut_.after.end());
  c_.sum().before += cut_.before.size();
  c_.sum().after += cut_.after.size();
  Log(walfmt::CutFinish{cut_.k, c_.now(), std::move(cut_.before), std::move(cut_.after)});
  Sync();  // durable before reporting
  const uint64_t k = cut_.k;
  cut_ = CutState{};
  Msg r;
  r.type = MsgType::kCutDone;
  r.to = kInitiator;
  r.ok = true;
  r.marker = k;
  Send(std::move(r));
}

void Node::InitiateCut(uint64_t k) {
  init_k_ = k;
  reports_ = 0;
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
  if (m.marker != init_k_ || init_k_ == 0) return;
  if (++reports_ < c_.LiveNodes()) return;
  c_.CutCompleted(init_k_, true);
  init_k_ = 0;
}

// ================================================================== Cluster

void Cluster::Send(Msg m) {
  ++sum_.messages;
  Scheduler::Event e;
  // Most messages take min..max; a few take up to ten times the maximum (a
  // long tail, as real networks have), which also reorders them more.
  uint64_t delay = rng_.Range(opt_.net_delay_min_us, opt_.net_delay_max_us);
  if (rng_.Chance(opt_.slow_message_per_million)) delay = rng_.Range(opt_.net_delay_max_us, 10 * opt_.net_delay_max_us);
  e.t = sched_.now() + delay;
  e.node = m.to;
  e.incarnation = nodes_[m.to]->incarnation();
  e.msg = std::make_unique<Msg>(std::move(m));
  sched_.Push(std::move(e));
}

void Cluster::PostLocal(uint32_t node, uint32_t incarnation, uint64_t delay, std::function<void()> fn) {
  Scheduler::Event e;
  e.t = sched_.now() + delay;
  e.node = node;
  e.incarnation = incarnation;
  e.fn = std::move(fn);
  sched_.Push(std::move(e));
}

void Cluster::RecordCommit(const TxPlan& plan, uint64_t marker, bool load) {
  CommittedTx c;
  c.id = plan.id;
  c.marker = marker;
  c.one_phase = plan.one_phase;
  c.load = load;
  c.participants = plan.participants;
  c.writes = plan.all_writes;
  c.decided_us = sched_.now();
  history_.committed.push_back(std::move(c));
}

void Cluster::TxEnded(const TxId& id, bool load, bool committed, AbortReason why, bool one_phase) {
  --inflight_;
  if (load) {
    ++loads_done_;
  } else if (committed) {
    ++sum_.committed;
    ++(one_phase ? sum_.committed_1pc : sum_.committed_2pc);
    ++committed_since_cut_;
  } else {
    ++sum_.rolled_back;
    switch (why) {
      case AbortReason::kConflict: ++sum_.rolled_back_conflict; break;
      case AbortReason::kInsufficientFunds: ++sum_.rolled_back_funds; break;
      case AbortReason::kVoteNo: ++sum_.rolled_back_vote_no; break;
      default: ++sum_.rolled_back_other; break;
    }
  }
  if (!committed) history_.rolled_back.push_back(id);
  MaybeStartCut();
  FillSlots();
}

void Cluster::StartTx(std::shared_ptr<Program> prog, bool load) {
  // The client picks a live near node at random; the request reaches it after
  // a short think time.
  std::vector<uint32_t> live;
  for (const auto& n : nodes_) {
    if (n->alive()) live.push_back(n->id());
  }
  Node* near = nodes_[live[rng_.Below(live.size())]].get();
  ++inflight_;
  PostLocal(near->id(), near->incarnation(), rng_.Range(1, opt_.step_delay_max_us),
            [near, prog, load] { near->BeginTx(prog, load); });
}

void Cluster::FillSlots() {
  while (inflight_ < opt_.concurrency && !failed()) {
    if (loads_started_ < loads_.size()) {
      StartTx(MakeLoadProgram(std::move(loads_[loads_started_++])), true);
    } else if (loads_done_ < loads_.size()) {
      break;  // the workload starts on the loaded cluster
    } else if (started_ < opt_.txs) {
      ++started_;
      StartTx(MakeWorkloadProgram(opt_.workload, rng_), false);
    } else {
      break;
    }
  }
}

void Cluster::MaybeStartCut() {
  if (cut_running_ || next_cut_ > opt_.cuts || committed_since_cut_ < opt_.cut_every) return;
  if (loads_done_ < loads_.size() || !nodes_[kInitiator]->alive()) return;
  cut_running_ = true;
  committed_since_cut_ = 0;
  ++sum_.cuts_started;
  // The initiator acts in an event of its own, not inside the event of the
  // node whose transaction just ended.
  Node* init = nodes_[kInitiator].get();
  const uint64_t k = next_cut_++;
  PostLocal(kInitiator, init->incarnation(), 1, [init, k] { init->InitiateCut(k); });
}

void Cluster::CutCompleted(uint64_t, bool consistent) {
  cut_running_ = false;
  ++(consistent ? sum_.cuts_consistent : sum_.cuts_inconsistent);
  MaybeStartCut();
}

Status Cluster::WriteClusterJson() const {
  using nlohmann::json;
  json j;
  j["format"] = "walcut-cluster";
  j["format_version"] = 1;
  j["wal_format_version"] = walfmt::kFormatVersion;
  uint64_t sm = opt_.seed ^ 0x77616C6375742121ull;
  j["cluster_id"] = SplitMix64(sm);
  j["seed"] = opt_.seed;
  j["nodes"] = opt_.nodes;
  j["backups"] = opt_.backups;
  j["initiator"] = kInitiator;
  j["key_hash"] = "fnv1a64 % partitions";
  json parts = json::array();
  for (uint32_t p = 0; p < opt_.partitions; ++p) {
    json e;
    e["id"] = p;
    e["primary"] = topo_.PrimaryOfPartition(p);
    e["backups"] = topo_.BackupsOf(topo_.PrimaryOfPartition(p));
    parts.push_back(e);
  }
  j["partitions"] = parts;
  json nodes = json::array();
  for (uint32_t n = 0; n < opt_.nodes; ++n) {
    nodes.push_back({{"id", n}, {"wal_dir", fmt::format("node-{}/wal", n)}});
  }
  j["node_dirs"] = nodes;
  json params;
  params["workload"] = WorkloadName(opt_.workload.workload);
  params["accounts"] = opt_.workload.accounts;
  params["ring_keys"] = opt_.workload.ring;
  params["initial_balance"] = opt_.workload.initial_balance;
  params["txs"] = opt_.txs;
  params["concurrency"] = opt_.concurrency;
  params["cuts"] = opt_.cuts;
  params["cut_every"] = opt_.cut_every;
  params["segment_bytes"] = opt_.segment_bytes;
  params["vote_no_per_million"] = opt_.vote_no_per_million;
  params["net_delay_us"] = {opt_.net_delay_min_us, opt_.net_delay_max_us};
  params["step_delay_max_us"] = opt_.step_delay_max_us;
  j["parameters"] = params;
  j["initial_bank_total"] = InitialBankTotal(opt_.workload);
  j["base"] = "genesis";  // the empty cluster at creation
  const std::string path = opt_.dir + "/cluster.json";
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << j.dump(2) << '\n';
  out.close();
  if (!out) return Status::Io(fmt::format("{}: cannot write", path));
  return Status::Ok();
}

Status Cluster::Run() {
  const auto wall_start = std::chrono::steady_clock::now();
  uint64_t sm = opt_.seed ^ 0x77616C6375742121ull;
  const uint64_t cluster_id = SplitMix64(sm);
  for (uint32_t i = 0; i < opt_.nodes; ++i) nodes_.push_back(std::make_unique<Node>(*this, i));
  for (uint32_t i = 0; i < opt_.nodes; ++i) {
    walfmt::WriterOptions wo;
    wo.wal_dir = fmt::format("{}/node-{}/wal", opt_.dir, i);
    wo.node_id = i;
    wo.cluster_id = cluster_id;
    wo.segment_bytes = opt_.segment_bytes;
    wo.archive_compressed = true;
    if (Status st = nodes_[i]->Open(wo); !st.ok()) return st;
  }
  if (failed()) return error_;
  if (Status st = WriteClusterJson(); !st.ok()) return st;

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
  FillSlots();

  Scheduler::Event e;
  uint64_t events = 0;
  while (sched_.Pop(e)) {
    if (++events > kMaxEvents) {
      Fail(Status::Internal(fmt::format("simulation did not end after {} events", kMaxEvents)));
      break;
    }
    Node& n = *nodes_[e.node];
    if (!n.alive() || n.incarnation() != e.incarnation) continue;
    if (e.msg) {
      n.Deliver(*e.msg);
    } else {
      e.fn();
    }
  }
  sum_.events = events;
  sum_.sim_time_us = sched_.now();
  if (failed()) return error_;
  if (inflight_ != 0 || started_ != opt_.txs || cut_running_) {
    return Status::Internal(fmt::format(
        "simulation stalled: {} transactions in flight, {} of {} started, cut running: {} (seed {})", inflight_,
        started_, opt_.txs, cut_running_, opt_.seed));
  }
  for (auto& n : nodes_) {
    if (Status st = n->Close(); !st.ok()) return st;
  }
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(opt_.dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file(ec)) sum_.wal_bytes += it->file_size(ec);
  }
  sum_.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
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
  return Status::Ok();
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
