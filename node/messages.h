// Internal to node/: what the simulated nodes send each other (Msg), the
// transaction plan the messages of one transaction share (TxPlan), and the
// answers of the recovery protocol (PState, NState). Not part of the node
// library's interface (that is node/cluster.h).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "walfmt/record.h"
#include "walfmt/status.h"
#include "walfmt/topology.h"

namespace walcut::node::sim {

using walfmt::Status;
using walfmt::Topology;
using walfmt::TxId;
using walfmt::TxIdHash;
using walfmt::Write;

constexpr uint32_t kNoNode = 0xFFFFFFFFu;
constexpr uint32_t kFirstInitiator = 0;  // node 0 starts the cuts until it crashes

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
  kNone = 0,    // not a participant
  kPrepared,    // prepared here, outcome unknown here
  kBusy,        // deciding right now (a 1PC decider between its steps): ask again
  kCommitted,   // committed here (or the outcome is known to be commit), with marker
  kRolledBack,  // rolled back here
  kUnknown,     // a participant that never prepared: it now refuses to, so the tx must roll back
};
enum class NState : uint8_t {
  kNoSay = 0,  // not the near node, a 1PC transaction, or a restarted near that forgot
  kUndecided,  // the near node is still collecting votes
  kCommit,     // the near node decided commit, with marker
  kRollback,   // the near node decided rollback
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

}  // namespace walcut::node::sim
