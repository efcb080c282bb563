// Internal to node/: the driver of the simulation (class Cluster). It owns
// the nodes, the event queue and the one RNG; it delivers messages with
// random delays, starts client transactions and cuts, injects crashes, takes
// the full snapshots, and records the true history (the oracle). RunCluster
// (cluster.cpp) is its only user.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "node/cluster.h"
#include "node/host.h"
#include "node/messages.h"
#include "node/node.h"
#include "node/rng.h"
#include "node/scheduler.h"
#include "walfmt/writer.h"

namespace walcut::node::sim {

// A cluster's id, written into every segment header and cluster.json, is
// SplitMix64 of the seed mixed with this constant ("walcut!!" in ASCII), so
// that clusters run with different seeds never share an id.
constexpr uint64_t kClusterIdSeedMix = 0x77616C6375742121ull;
inline uint64_t ClusterIdForSeed(uint64_t seed) {
  uint64_t state = seed ^ kClusterIdSeedMix;
  return SplitMix64(state);
}

class Cluster final : public Host {
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

  // The Host of every node (node/host.h).
  const ClusterOptions& opt() const override { return opt_; }
  const Topology& topo() const override { return topo_; }
  Rng& rng() override { return rng_; }
  RunSummary& sum() override { return sum_; }
  uint64_t now() const override { return sched_.now(); }
  void Send(Msg m) override;
  void PostLocal(uint32_t node, uint32_t incarnation, uint64_t delay, std::function<void()> fn) override;
  void PostDriver(uint64_t delay, std::function<void()> fn) { PostLocal(kNoNode, 0, delay, std::move(fn)); }
  void PostStep(uint32_t node, uint32_t incarnation, uint64_t delay, StepKind kind, const TxId& id,
                uint64_t k) override;
  uint64_t StepDelay() override { return rng_.Range(1, opt_.step_delay_max_us); }
  void Fail(const Status& st) override {
    if (error_.ok()) error_ = st;
    sched_.Clear();
  }
  bool failed() const override { return !error_.ok(); }
  bool IsAlive(uint32_t n) const override { return nodes_[n]->alive(); }
  bool IsReady(uint32_t n) const override { return nodes_[n]->ready(); }
  uint32_t IncarnationOf(uint32_t n) const override { return nodes_[n]->incarnation(); }
  bool faults() const override { return !opt_.crashes.empty() || opt_.random_crashes > 0; }
  void RecordBegin(const TxId& id) override { began_.push_back(id); }
  void RecordCommit(const TxPlan& plan, uint64_t marker, bool recovered) override;
  // A crashing node hands over the plans of the transactions it was taking
  // part in, so the oracle still knows them if it later commits one from a
  // rebuilt plan (RecordCommit).
  void KeepUndecided(const std::shared_ptr<const TxPlan>& plan) override;
  void TxEnded(const TxEnd& e) override;
  void CutCompleted(uint64_t k, bool consistent) override;
  // Membership, as a discovery service gives it: the ready nodes in the order
  // they joined. The oldest one is the cut initiator (Ignite's coordinator is
  // its oldest server node); a restarted node joins as the youngest.
  uint32_t Initiator() const override { return members_.front(); }
  std::vector<uint32_t> Members() const override { return members_; }
  uint32_t FailedInitiator() const override { return failed_initiator_; }
  void NodeReady(uint32_t n) override;
  // The cut the scheduler asked for and has not seen completed (0: none). A
  // new initiator takes it over: the scheduler re-sends its request, as a
  // client retries against a new coordinator.
  uint64_t RunningCut() const override { return cut_running_ ? running_cut_ : 0; }

 private:
  void Dispatch(Scheduler::Event& e);
  void FillSlots();
  void StartTx(std::shared_ptr<Program> prog, bool load);
  void MaybeStartCut();
  void CrashNode(uint32_t n, uint64_t restart_delay_us);
  void ScheduleCrashes();
  void TrySnapshot();
  Status WriteClusterJson(bool complete) const;
  // Run's steps.
  Status OpenNodes();
  void PlanLoadAndSnapshots();
  void RunEvents();
  Status CheckQuiet() const;
  Status Conclude();

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
  bool quiescing_ = false;               // a full snapshot is waiting for the cluster to be idle
  std::vector<uint64_t> snapshot_due_;   // workload transactions started at which a full snapshot is due, ascending
  size_t next_snapshot_ = 0;             // index into snapshot_due_
  std::vector<uint64_t> first_segment_;  // by node, after the run
  uint32_t snapshot_waits_ = 0;
  uint64_t cluster_id_ = 0;
  std::vector<std::pair<uint64_t, uint32_t>> crash_at_tx_;  // random crashes: (started count, node), sorted
  size_t next_crash_ = 0;
};

}  // namespace walcut::node::sim
