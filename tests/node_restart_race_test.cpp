// The race only real messages can show (docs/real-cluster.md): the
// initiator answers a restarted node's Hello with "no cut running", then
// starts cut K before that node is ready. The simulator never does this (it
// starts a cut only when every node is ready); a real initiator can. Here the
// protocol (node/node.h) runs under a scripted Host whose test delivers
// every message in the order it chooses, which forces exactly that
// interleaving. Two rules close it, and each has a check below:
//  - the initiator does not count on a node that is not ready: cut K is
//    inconsistent from the start, with the reason recorded;
//  - the restarted node remembers the highest cut id it was shown while not
//    ready and, once ready, ends that cut as inconsistent (CUT_ABORT, node
//    restart) and adopts its id, so that nothing it commits afterwards can
//    carry an older cut id than its peers'.
#include <algorithm>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "node/host.h"
#include "node/node.h"
#include "node_wal_model.h"
#include "scratch_dir.h"

namespace {

using walcut::node::ClusterOptions;
using walcut::node::RunSummary;
using walcut::node::sim::Host;
using walcut::node::sim::kNoNode;
using walcut::node::sim::Msg;
using walcut::node::sim::MsgType;
using walcut::node::sim::Node;
using walcut::node::sim::StepKind;
using walcut::node::sim::TxEnd;
using walcut::node::sim::TxPlan;
using walfmt::Status;
using walfmt::Topology;
using walfmt::TxId;

// A Host whose messages and steps wait in one queue until the test runs
// them; timers (the restarted node's Hello retries) run only when asked.
class ScriptHost final : public Host {
 public:
  ScriptHost(const std::string& dir, uint32_t nodes) : topo_(nodes, 1, 4 * nodes), rng_(7) {
    opt_.dir = dir;
    opt_.nodes = nodes;
    opt_.backups = 1;
    opt_.partitions = 4 * nodes;
    opt_.vote_no_per_million = 0;
    for (uint32_t i = 0; i < nodes; ++i) {
      nodes_.push_back(std::make_unique<Node>(*this, i));
      members_.push_back(i);
    }
  }
  walfmt::WriterOptions Wal(uint32_t i) const {
    walfmt::WriterOptions wo;
    wo.wal_dir = fmt::format("{}/node-{}/wal", opt_.dir, i);
    wo.node_id = i;
    wo.cluster_id = 0x5eed;
    wo.segment_bytes = 1 << 20;
    return wo;
  }
  Node& node(uint32_t i) { return *nodes_[i]; }

  // A node's power loss: it leaves the members; the others learn of it.
  void Crash(uint32_t n) {
    nodes_[n]->Crash();
    members_.erase(std::remove(members_.begin(), members_.end(), n), members_.end());
    for (auto& o : nodes_) {
      if (o->alive()) o->OnNodeFailed(n);
    }
  }

  // Runs queued messages and steps until none is left, except the messages
  // `hold` picks, which are returned in their order.
  std::vector<Msg> Run(const std::function<bool(const Msg&)>& hold = nullptr) {
    std::vector<Msg> held;
    while (!q_.empty()) {
      Event e = std::move(q_.front());
      q_.pop_front();
      Node& n = *nodes_[e.node];
      if (!n.alive()) continue;
      if (e.is_msg) {
        if (hold && hold(e.msg)) {
          held.push_back(std::move(e.msg));
          continue;
        }
        n.Deliver(e.msg);
      } else {
        n.RunStep(e.step, e.tx, e.k);
      }
    }
    return held;
  }
  void Deliver(Msg m) {
    nodes_[m.to]->Deliver(m);
    Run();
  }

  // Host
  const ClusterOptions& opt() const override { return opt_; }
  const Topology& topo() const override { return topo_; }
  uint64_t now() const override { return ++now_; }
  walcut::node::Rng& rng() override { return rng_; }
  RunSummary& sum() override { return sum_; }
  void Send(Msg m) override {
    const uint32_t to = m.to;
    q_.push_back(Event{true, std::move(m), to, StepKind::kNone, TxId{}, 0});
  }
  void PostLocal(uint32_t, uint32_t, uint64_t, std::function<void()>) override {}  // retries: not needed here
  void PostStep(uint32_t node, uint32_t, uint64_t, StepKind kind, const TxId& id, uint64_t k) override {
    q_.push_back(Event{false, Msg{}, node, kind, id, k});
  }
  uint64_t StepDelay() override { return 1; }
  void Fail(const Status& st) override { failures.push_back(st.message()); }
  bool failed() const override { return !failures.empty(); }
  bool IsAlive(uint32_t n) const override { return nodes_[n]->alive(); }
  bool IsReady(uint32_t n) const override {
    return nodes_[n]->ready() && std::find(members_.begin(), members_.end(), n) != members_.end();
  }
  uint32_t IncarnationOf(uint32_t n) const override { return nodes_[n]->incarnation(); }
  bool faults() const override { return true; }
  uint32_t Initiator() const override { return stale_initiator != kNoNode ? stale_initiator : members_.front(); }
  uint32_t FailedInitiator() const override { return kNoNode; }
  std::vector<uint32_t> Members() const override { return members_; }
  void NodeReady(uint32_t n) override { members_.push_back(n); }
  uint64_t RunningCut() const override { return running_cut; }
  void RecordBegin(const TxId&) override {}
  void RecordCommit(const TxPlan&, uint64_t, bool) override {}
  void KeepUndecided(const std::shared_ptr<const TxPlan>&) override {}
  void TxEnded(const TxEnd&) override {}
  void CutCompleted(uint64_t k, bool consistent) override { completed.emplace_back(k, consistent); }

  std::vector<std::string> failures;
  std::vector<std::pair<uint64_t, bool>> completed;
  // While set, the node Initiator() names for every node: a node that has
  // not learned yet that the initiator died (a real node learns of a crash
  // later than another may).
  uint32_t stale_initiator = kNoNode;
  uint64_t running_cut = 0;  // what a node that takes over is told (Host::RunningCut)
  void Forget(uint32_t n) {  // n leaves the members; nobody is told yet
    members_.erase(std::remove(members_.begin(), members_.end(), n), members_.end());
  }

 private:
  struct Event {
    bool is_msg = false;
    Msg msg;
    uint32_t node = 0;
    StepKind step = StepKind::kNone;
    TxId tx;
    uint64_t k = 0;
  };
  ClusterOptions opt_;
  Topology topo_;
  walcut::node::Rng rng_;
  RunSummary sum_;
  mutable uint64_t now_ = 1000;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<uint32_t> members_;
  std::deque<Event> q_;
};

// The CUT_ABORT records of node n's WAL: (cut, detail).
std::vector<std::pair<uint64_t, std::string>> CutAborts(const std::string& dir, uint32_t n) {
  std::vector<std::pair<uint64_t, std::string>> out;
  auto log = walcut::node::testing::ReadNodeLog(dir, n);
  for (const auto& r : log.recs) {
    if (const auto* a = std::get_if<walfmt::CutAbort>(&r)) out.emplace_back(a->cut_id, a->detail);
  }
  return out;
}

}  // namespace

TEST_CASE("node: the initiator starts a cut between answering a restarted node's Hello and that node being ready",
          "[node][restart]") {
  walcut::test::ScratchDir dir("restart-race");
  ScriptHost h(dir.path.string(), 3);
  for (uint32_t i = 0; i < 3; ++i) REQUIRE(h.node(i).Open(h.Wal(i)).ok());
  h.Run();

  // Node 2 loses power and restarts: it asks the initiator (node 0) which cut runs.
  h.Crash(2);
  REQUIRE(h.node(2).Restart(h.Wal(2)).ok());
  REQUIRE_FALSE(h.node(2).ready());
  // Node 0 answers "no cut running, current 0"; the answer is held back.
  auto held = h.Run([](const Msg& m) { return m.type == MsgType::kHelloResp; });
  REQUIRE(held.size() == 1);
  CHECK_FALSE(held[0].ok);
  CHECK(held[0].marker == 0);

  // Now node 0 starts cut 1. Node 2 is not ready: the cut is inconsistent
  // from the start, and node 0 does not wait for node 2's report.
  h.node(0).InitiateCut(1);
  // Node 2 is shown cut 1 (the CutStart) while it is not ready.
  h.Run();
  REQUIRE(h.completed.size() == 1);
  CHECK(h.completed[0] == std::make_pair(uint64_t{1}, false));
  // (A node's WAL is in its writer's memory until it closes.)
  REQUIRE(h.node(0).Close().ok());
  const auto aborts0 = CutAborts(dir.path.string(), 0);
  REQUIRE(aborts0.size() == 1);
  CHECK(aborts0[0].first == 1);
  CHECK(aborts0[0].second == "node 2 was restarting when cut 1 started");

  // The held answer arrives: node 2 is ready, and it ends cut 1 as
  // inconsistent on its side and adopts the id, rather than taking part in
  // later transactions as if cut 1 had never begun.
  h.Deliver(held[0]);
  CHECK(h.node(2).ready());
  CHECK(h.node(2).cut_id() == 1);
  REQUIRE(h.node(2).Close().ok());
  const auto aborts2 = CutAborts(dir.path.string(), 2);
  REQUIRE(aborts2.size() == 1);
  CHECK(aborts2[0].first == 1);
  CHECK(aborts2[0].second == "node 2 restarted (incarnation 1); cut 1 began before it was ready");
  CHECK(h.failures.empty());
  REQUIRE(h.node(1).Close().ok());
}

TEST_CASE("node: a restarted node that missed whole cuts records the cut it skips to before it joins a later one",
          "[node][restart]") {
  walcut::test::ScratchDir dir("restart-skip");
  ScriptHost h(dir.path.string(), 3);
  for (uint32_t i = 0; i < 3; ++i) REQUIRE(h.node(i).Open(h.Wal(i)).ok());
  h.Run();
  h.Crash(2);
  // Cuts 1 and 2 run without node 2 (a real initiator does not wait for a dead node).
  for (uint64_t k = 1; k <= 2; ++k) {
    h.node(0).InitiateCut(k);
    h.Run();
  }
  REQUIRE(h.completed.size() == 2);
  CHECK_FALSE(h.completed[1].second);
  REQUIRE(h.node(2).Restart(h.Wal(2)).ok());
  h.Run();  // Hello, answer "current 2, not running": node 2 skips to cut 2
  REQUIRE(h.node(2).ready());
  CHECK(h.node(2).cut_id() == 2);
  // Cut 3 runs with everyone.
  h.node(0).InitiateCut(3);
  h.Run();
  REQUIRE(h.completed.size() == 3);
  CHECK(h.completed[2] == std::make_pair(uint64_t{3}, true));
  REQUIRE(h.node(2).Close().ok());
  auto log = walcut::node::testing::ReadNodeLog(dir.path.string(), 2);
  std::vector<std::string> cuts;
  for (const auto& r : log.recs) {
    if (const auto* s = std::get_if<walfmt::CutStart>(&r)) cuts.push_back(fmt::format("start {}", s->cut_id));
    if (const auto* a = std::get_if<walfmt::CutAbort>(&r)) cuts.push_back(fmt::format("abort {}", a->cut_id));
    if (const auto* f = std::get_if<walfmt::CutFinish>(&r)) cuts.push_back(fmt::format("finish {}", f->cut_id));
  }
  // Node 2 recorded that it reached cut 2 (CUT_START + CUT_ABORT) before cut 3.
  CHECK(cuts == std::vector<std::string>{"start 2", "abort 2", "start 3", "finish 3"});
  CHECK(h.failures.empty());
}

namespace {

// A two-phase plan from near node 0 writing `key` (value `v`) on its
// primary and that primary's one backup.
std::shared_ptr<TxPlan> PlanOn(const Topology& topo, uint64_t seq, const std::string& key, const std::string& v) {
  auto p = std::make_shared<TxPlan>();
  p->id = TxId{0, seq};
  const uint32_t primary = topo.PrimaryOf(key);
  const uint32_t backup = topo.BackupsOf(primary).at(0);
  p->participants = {std::min(primary, backup), std::max(primary, backup)};
  p->primaries = {primary};
  p->writes.resize(topo.nodes());
  p->writes[primary] = p->writes[backup] = {walfmt::Write{walfmt::WriteOp::kPut, key, v}};
  p->forward.resize(topo.nodes());
  p->forward[primary] = {backup};
  p->forwarder.assign(topo.nodes(), kNoNode);
  p->forwarder[backup] = primary;
  p->all_writes = p->writes[primary];
  return p;
}

}  // namespace

TEST_CASE("node: a backup refuses to prepare a key that another transaction holds prepared there", "[node][restart]") {
  // After the recovery protocol a primary may commit and unlock a
  // transaction that a backup still holds prepared (its Finish never comes;
  // it resolves it later): a later transaction on the key must not commit
  // at the backup first, or the two replicas apply them in opposite orders.
  walcut::test::ScratchDir dir("backup-same-key");
  ScriptHost h(dir.path.string(), 3);
  for (uint32_t i = 0; i < 3; ++i) REQUIRE(h.node(i).Open(h.Wal(i)).ok());
  h.Run();
  const Topology topo(3, 1, 12);
  const auto t1 = PlanOn(topo, 1, "acct/000014", "956");
  const auto t2 = PlanOn(topo, 2, "acct/000014", "1038");
  const auto other = PlanOn(topo, 3, "acct/000015", "7");
  const uint32_t primary = t1->primaries[0];
  const uint32_t backup = t1->forward[primary][0];
  const auto prepare_fwd = [&](const std::shared_ptr<TxPlan>& plan) {
    Msg m;
    m.type = MsgType::kPrepareFwd;
    m.from = plan->forwarder[backup];
    m.to = backup;
    m.tx = plan->id;
    m.plan = plan;
    h.node(backup).Deliver(m);
    auto replies = h.Run([](const Msg&) { return true; });
    REQUIRE(replies.size() == 1);
    CHECK(replies[0].type == MsgType::kVoteFwd);
    return replies[0].ok;
  };
  CHECK(prepare_fwd(t1));
  CHECK_FALSE(prepare_fwd(t2));                                             // acct/000014 is held prepared by t1
  if (topo.PrimaryOf("acct/000015") == primary) CHECK(prepare_fwd(other));  // another key is taken
  CHECK(h.failures.empty());
}

TEST_CASE("node: a node reports a taken-over cut to the node that took it over, even before it learns of the crash",
          "[node][restart]") {
  walcut::test::ScratchDir dir("takeover-report");
  ScriptHost h(dir.path.string(), 3);
  for (uint32_t i = 0; i < 3; ++i) REQUIRE(h.node(i).Open(h.Wal(i)).ok());
  h.Run();
  // Cut 1: every node ends its part, but the reports to node 0 are held, and
  // node 0 dies.
  h.node(0).InitiateCut(1);
  auto held = h.Run([](const Msg& m) { return m.type == MsgType::kCutDone; });
  REQUIRE(held.size() == 3);  // nodes 1 and 2, and node 0's own
  REQUIRE(h.completed.empty());
  h.node(0).Crash();
  h.Forget(0);
  h.running_cut = 1;
  // Node 1, the oldest left, learns of it first and takes cut 1 over; node 2
  // gets its request while it still takes node 0 for the initiator.
  h.node(1).OnNodeFailed(0);
  REQUIRE(h.node(1).initiating());
  h.stale_initiator = 0;
  h.Run();
  h.stale_initiator = kNoNode;
  h.node(2).OnNodeFailed(0);
  h.Run();
  REQUIRE(h.completed.size() == 1);
  CHECK(h.completed[0] == std::make_pair(uint64_t{1}, false));
  CHECK(h.failures.empty());
}
