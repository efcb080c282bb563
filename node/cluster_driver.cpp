// The simulation driver (class Cluster): network delivery, client load, cut
// scheduling, crash injection, full snapshots, the oracle, cluster.json, and
// the main event loop (Run).

#include "node/cluster_driver.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "walfmt/cluster_layout.h"
#include "walfmt/reader.h"
#include "walfmt/segment.h"

namespace walcut::node::sim {

constexpr uint64_t kMaxEvents = 4'000'000'000ull;  // a bound on the main loop
constexpr size_t kLoadKeysPerTx = 64;

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

void Cluster::PostStep(uint32_t node, uint32_t incarnation, uint64_t delay, StepKind kind, const TxId& id, uint64_t k) {
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
    return Fail(
        Status::Internal(fmt::format("{} committed from a rebuilt plan, but no crashed node had its plan "
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

void Cluster::TxEnded(const TxEnd& e) {
  WALCUT_ASSERT(inflight_ > 0, "TxEnded: more transactions ended than started");
  --inflight_;
  if (e.load) {
    ++loads_done_;
  } else if (e.committed) {
    ++committed_since_cut_;
  } else {
    switch (e.why) {
      case AbortReason::kConflict:
        ++sum_.rolled_back_conflict;
        break;
      case AbortReason::kInsufficientFunds:
        ++sum_.rolled_back_funds;
        break;
      case AbortReason::kVoteNo:
        ++sum_.rolled_back_vote_no;
        break;
      default:
        ++sum_.rolled_back_other;
        break;
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
      TxEnd e;
      e.load = load;
      e.why = AbortReason::kParticipantLost;
      TxEnded(e);
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
  WALCUT_ASSERT(inflight_ >= lost_load + lost, "CrashNode: the node lost more transactions than are in flight");
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
  info.cluster_id = ClusterIdForSeed(opt_.seed);
  info.seed = opt_.seed;
  info.epoch_unix_us = opt_.epoch_unix_us;
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
    for (uint32_t n = 0; n < opt_.nodes; ++n)
      info.first_segment.push_back(n < first_segment_.size() ? first_segment_[n] : 0);
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

// The nodes, each with its WAL open (writing its NODE_START).
Status Cluster::OpenNodes() {
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
  return Status::Ok();
}

// The initial data as load transactions, grouped by primary node so each
// load is one-phase; and the workload transaction counts at which a full
// snapshot is due.
void Cluster::PlanLoadAndSnapshots() {
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
}

// The main loop: events in (time, sequence) order until none is left.
void Cluster::RunEvents() {
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
}

// After the last event: every transaction ended, every crashed node back.
Status Cluster::CheckQuiet() const {
  if (inflight_ != 0 || started_ != opt_.txs || cut_running_ || sum_.restarts != sum_.crashes) {
    std::string pending;
    for (const auto& n : nodes_) pending += fmt::format("; node {}:{}", n->id(), n->Pending());
    return Status::Internal(
        fmt::format("simulation stalled: {} transactions in flight, {} of {} started, cut running: {} (seed {}){}",
                    inflight_, started_, opt_.txs, cut_running_, opt_.seed, pending));
  }
  return Status::Ok();
}

// The WALs closed, the final counts and history, cluster.json rewritten, the
// bytes on disk counted.
Status Cluster::Conclude() {
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
  return Status::Ok();
}

Status Cluster::Run() {
  const auto wall_start = std::chrono::steady_clock::now();
  const std::clock_t cpu_start = std::clock();
  cluster_id_ = ClusterIdForSeed(opt_.seed);
  if (Status st = OpenNodes(); !st.ok()) return st;
  if (failed()) return error_;
  if (Status st = WriteClusterJson(false); !st.ok()) return st;
  PlanLoadAndSnapshots();
  ScheduleCrashes();
  FillSlots();
  RunEvents();
  if (failed()) return error_;
  if (Status st = CheckQuiet(); !st.ok()) return st;
  if (Status st = Conclude(); !st.ok()) return st;
  sum_.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  sum_.cpu_seconds = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  return Status::Ok();
}

}  // namespace walcut::node::sim
