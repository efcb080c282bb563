// Internal to node/: what a node's protocol needs from the world around it
// (class Host). The protocol itself (class Node: the near node, the
// participants, the cut, recovery) does no I/O of its own and reads no clock:
// it is fed messages (Node::Deliver), its own timer and step events
// (Node::RunStep and the callbacks it posted) and client transactions
// (Node::BeginTx), and it acts only through its WAL writer and this
// interface. Two drivers implement it:
//   cluster_driver.h  the deterministic simulator of `walcut run`: every node
//                     in one process, a virtual clock, one seeded RNG, a
//                     network that delays and reorders messages at random;
//   a real node process drives one Node with sockets, the system clock and
//                     an fsync'd WAL.
// The driver-specific parts (the simulator's oracle, the real runtime's
// group commit) are hooks with a no-op default where only one side needs them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "node/cluster.h"
#include "node/messages.h"
#include "node/rng.h"
#include "node/scheduler.h"
#include "node/workload.h"

namespace walcut::node::sim {

// How a transaction a node coordinated (its near node) ended: what the driver
// tells the client. `reads` and `writes` are the program's, valid during the
// call only (writes are empty unless committed).
struct TxEnd {
  TxId id;
  bool load = false;
  bool committed = false;
  AbortReason why = AbortReason::kNone;
  bool one_phase = false;
  uint64_t marker = 0;  // 2PC: the decided marker; 1PC: 0 (the decider's, not known here)
  const ReadSet* reads = nullptr;
  const std::vector<Write>* writes = nullptr;
};

class Host {
 public:
  virtual ~Host() = default;

  // Configuration: the cluster's shape, the workload, the protocol's delays
  // and retries (ClusterOptions' protocol fields), and the key placement.
  virtual const ClusterOptions& opt() const = 0;
  virtual const Topology& topo() const = 0;
  // The clock of the WAL's time fields and of the timers, in microseconds.
  virtual uint64_t now() const = 0;
  // Randomness the protocol draws (the injected vote-no, a simulated crash's torn tail).
  virtual Rng& rng() = 0;
  // Counters of the run (RunSummary); the real runtime reports them too.
  virtual RunSummary& sum() = 0;

  // A message to another node (m.to), stamped with the sender's cut id.
  virtual void Send(Msg m) = 0;
  // Runs fn on node `node` after delay_us, unless that node went down or
  // restarted (another incarnation) meanwhile.
  virtual void PostLocal(uint32_t node, uint32_t incarnation, uint64_t delay_us, std::function<void()> fn) = 0;
  // A local step (Node::RunStep) after delay_us, with the same rule.
  virtual void PostStep(uint32_t node, uint32_t incarnation, uint64_t delay_us, StepKind kind, const TxId& id,
                        uint64_t k) = 0;
  // The delay between the two steps of a commit or of a cut (see ClusterOptions).
  virtual uint64_t StepDelay() = 0;
  // The node's state went wrong (a WAL write failed, an internal check):
  // the driver stops the node (the simulator: the whole run) with st.
  virtual void Fail(const Status& st) = 0;
  virtual bool failed() const = 0;
  // The node asked for its WAL to be durable up to what it appended so far
  // (Node::Sync). The simulator needs nothing more (a simulated power loss
  // keeps what was synced); a real node writes and fdatasyncs the WAL before
  // anything the node sends from then on leaves it (group commit).
  virtual void SyncRequested() {}

  // Membership, as this node sees it (the simulator knows it exactly; a real
  // node learns it from its connections and its peers' messages).
  virtual bool IsAlive(uint32_t n) const = 0;
  virtual bool IsReady(uint32_t n) const = 0;
  virtual uint32_t IncarnationOf(uint32_t n) const = 0;
  // Crashes can happen (outcomes must be remembered for recovery queries).
  virtual bool faults() const = 0;
  // The cut initiator: the oldest ready node (Ignite's coordinator is its
  // oldest server node); a restarted node joins as the youngest.
  virtual uint32_t Initiator() const = 0;
  // The initiator that crashed last (for the takeover's message), kNoNode if none.
  virtual uint32_t FailedInitiator() const = 0;
  // The ready nodes, oldest first (the initiator sends them to a restarted
  // node with its answer, kHelloResp's participants).
  virtual std::vector<uint32_t> Members() const = 0;
  // Node n (this one, after a restart) is ready again: it joins the members.
  virtual void NodeReady(uint32_t n) = 0;
  // The cut that was asked for and has not completed, which a new initiator
  // takes over (0: none).
  virtual uint64_t RunningCut() const = 0;

  // Events of the run: transactions begun and ended at their near node,
  // commits as the first participant writes them, cuts completed at the
  // initiator. The simulator keeps its oracle and its schedule with them; a
  // real node answers its clients.
  virtual void RecordBegin(const TxId& id) = 0;
  virtual void RecordCommit(const TxPlan& plan, uint64_t marker, bool recovered) = 0;
  virtual void KeepUndecided(const std::shared_ptr<const TxPlan>& plan) = 0;
  virtual void TxEnded(const TxEnd& e) = 0;
  virtual void CutCompleted(uint64_t k, bool consistent) = 0;
};

}  // namespace walcut::node::sim
