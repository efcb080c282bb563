// Internal to node/: the real node's classes (node/process.h), shared by
// its files:
//   process.cpp           connections, membership, group commit, clients, cuts, stop
//   process_snapshot.cpp  the full snapshot: pause, take, resume and WAL retention
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <csignal>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <asio.hpp>

#include "node/host.h"
#include "node/node.h"
#include "node/process.h"
#include "node/runtime_file.h"
#include "node/wire.h"
#include "walfmt/cluster_layout.h"

namespace walcut::node::detail {

using asio::ip::tcp;
using sim::Msg;
using sim::MsgType;
using walfmt::Status;
using walfmt::Topology;
using walfmt::TxId;
using walfmt::Write;

// The initial data goes in 1PC transactions of this many keys, as in the simulator.
constexpr size_t kLoadKeysPerTx = 64;
constexpr uint32_t kLoadConcurrency = 16;
// A peer that cannot be reached is tried again after this long.
constexpr auto kReconnectDelay = std::chrono::milliseconds(50);
// Bytes queued for one peer before the node stops queueing (a peer that does
// not read is treated as dead).
constexpr size_t kMaxQueuedBytes = 256u << 20;
// Client requests a paused node holds (a full snapshot is being taken),
// beyond which it refuses them.
constexpr size_t kMaxHeldTxs = 1u << 16;

inline uint64_t WallMicros() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

class Process;

// One accepted connection: a peer's (its messages to us), a client's or the
// control tool's. Reads frames until the other side closes it.
class Conn : public std::enable_shared_from_this<Conn> {
 public:
  Conn(Process& p, tcp::socket s) : p_(p), sock_(std::move(s)) {}
  void Start() {
    std::error_code ec;
    const auto ep = sock_.remote_endpoint(ec);
    who = ec ? std::string("?") : fmt::format("{}:{}", ep.address().to_string(), ep.port());
    Read();
  }
  // Queues one frame to the other side.
  void Write(const wire::Message& m);
  void Close() {
    std::error_code ec;
    sock_.close(ec);
  }
  bool open() const { return sock_.is_open(); }

  wire::Role role = wire::Role::kPeer;
  bool greeted = false;
  uint32_t peer = sim::kNoNode;
  uint32_t incarnation = 0;
  std::string who;  // the remote address, for the log

 private:
  void Read();
  void Flush();

  Process& p_;
  tcp::socket sock_;
  wire::FrameReader reader_;
  std::array<char, 64 * 1024> buf_{};
  std::string out_;
  std::string writing_;
};

// Our connection to one peer: what this node sends it.
struct Outbound {
  explicit Outbound(asio::io_context& io) : sock(io), retry(io) {}
  tcp::socket sock;
  asio::steady_timer retry;
  bool connected = false;
  bool connecting = false;
  std::string queue;    // frames not handed to the socket yet
  std::string writing;  // the frames of the write in progress
};

struct ClientTx {
  std::weak_ptr<Conn> conn;
  uint64_t request_id = 0;
};

class Process final : public sim::Host {
 public:
  Process(const ProcessOptions& popt, walfmt::ClusterInfo info, RuntimeInfo rt)
      : popt_(popt),
        info_(std::move(info)),
        rt_(std::move(rt)),
        topo_(info_.nodes, info_.backups, info_.partitions),
        rng_(info_.seed ^ (uint64_t{popt.node} << 32) ^ WallMicros()),
        acceptor_(io_),
        signals_(io_, SIGTERM, SIGINT),
        cut_timer_(io_),
        drain_timer_(io_),
        stop_poll_(io_),
        full_timer_(io_),
        node_(*this, popt.node) {
    opt_.dir = popt_.dir;
    opt_.nodes = info_.nodes;
    opt_.backups = info_.backups;
    opt_.partitions = info_.partitions;
    opt_.workload.workload = info_.workload;
    opt_.workload.accounts = info_.accounts;
    opt_.workload.ring = info_.ring_keys;
    opt_.workload.initial_balance = info_.initial_balance;
    opt_.vote_no_per_million = rt_.vote_no_per_million;
    opt_.step_delay_max_us = 0;
    opt_.recovery_retry_us = 20000;
    opt_.random_crashes = 1;                 // crashes happen: outcomes are remembered for recovery queries
    opt_.wal_retention = rt_.wal_retention;  // recover from the latest full snapshot (segments are deleted)
    epoch_us_ = info_.epoch_unix_us.value_or(0);
    alive_.assign(info_.nodes, false);
    incarnations_.assign(info_.nodes, 0);
    alive_[popt_.node] = true;
    for (uint32_t j = 0; j < info_.nodes; ++j) out_.push_back(std::make_unique<Outbound>(io_));
  }

  Status Run();

  // ---- Host
  const ClusterOptions& opt() const override { return opt_; }
  const Topology& topo() const override { return topo_; }
  uint64_t now() const override {
    const uint64_t t = WallMicros();
    return t > epoch_us_ ? t - epoch_us_ : 0;
  }
  Rng& rng() override { return rng_; }
  RunSummary& sum() override { return sum_; }
  void Send(Msg m) override;
  void PostLocal(uint32_t, uint32_t, uint64_t delay_us, std::function<void()> fn) override {
    auto t = std::make_shared<asio::steady_timer>(io_, std::chrono::microseconds(delay_us));
    t->async_wait([t, fn = std::move(fn), this](const std::error_code& ec) {
      if (!ec && !stopping_) fn();
    });
  }
  void PostStep(uint32_t, uint32_t, uint64_t, sim::StepKind kind, const TxId& id, uint64_t k) override {
    asio::post(io_, [this, kind, id, k] {
      if (!stopping_) node_.RunStep(kind, id, k);
    });
  }
  uint64_t StepDelay() override { return 0; }
  void Fail(const Status& st) override {
    if (error_.ok()) error_ = st;
    Stop();
  }
  bool failed() const override { return !error_.ok(); }
  void SyncRequested() override;
  bool IsAlive(uint32_t n) const override { return n < alive_.size() && alive_[n]; }
  bool IsReady(uint32_t n) const override {
    return IsAlive(n) && std::find(members_.begin(), members_.end(), n) != members_.end();
  }
  uint32_t IncarnationOf(uint32_t n) const override {
    return n == popt_.node ? node_.incarnation() : incarnations_.at(n);
  }
  bool faults() const override { return true; }
  uint32_t Initiator() const override;
  uint32_t FailedInitiator() const override { return failed_initiator_; }
  std::vector<uint32_t> Members() const override { return members_; }
  void NodeReady(uint32_t n) override;
  // Asked when this node takes over from a crashed initiator. That one may
  // have started the cut after the last one it told the others it completed,
  // and sent its CutStart to some nodes only: the new initiator takes that
  // cut over (ending it as inconsistent) rather than start another cut under
  // the same id. If the old one had not started it, the takeover only makes
  // an empty inconsistent cut, with its reason recorded.
  uint64_t RunningCut() const override { return std::max(node_.cut_id(), completed_cut_ + 1); }
  void RecordBegin(const TxId& id) override {
    if (pending_client_) clients_[id] = *pending_client_;
    if (pending_load_) load_of_[id] = *pending_load_;
  }
  void RecordCommit(const sim::TxPlan&, uint64_t, bool) override {}
  void KeepUndecided(const std::shared_ptr<const sim::TxPlan>&) override {}
  void TxEnded(const sim::TxEnd& e) override;
  void CutCompleted(uint64_t k, bool consistent) override;

  // ---- connections
  void OnFrame(const std::shared_ptr<Conn>& c, const wire::Message& m);
  void OnClosed(const std::shared_ptr<Conn>& c);
  // Closes a connection that sent something this node does not accept,
  // and logs why. The node itself carries on.
  void Reject(const std::shared_ptr<Conn>& c, const std::string& why) {
    Log(fmt::format("closing the connection from {}: {}", c->who, why));
    c->Close();
    OnClosed(c);
  }
  // ---- full snapshots (process_snapshot.cpp)
  // Control: take one now (the initiator only).
  void OnSnapshotRequest(const std::shared_ptr<Conn>& c, const wire::SnapshotRequest& r);
  // A step from a peer, or from this node to itself.
  void OnSnapshotStep(uint32_t from, const wire::SnapshotStep& s);

  void Log(const std::string& line) const {
    if (popt_.log) popt_.log(fmt::format("node {}: {}", popt_.node, line));
  }

 private:
  void Accept();
  void Connect(uint32_t j);
  void WriteTo(uint32_t j, std::string frame);
  void FlushOutbound(uint32_t j);
  void PeerDown(uint32_t j);
  void PeerUp(uint32_t j, uint32_t incarnation);
  void Deliver(Msg m);
  void OnClientTx(const std::shared_ptr<Conn>& c, const wire::TxRequest& r);
  void OnCutRequest(const std::shared_ptr<Conn>& c);
  wire::StatusReply StatusNow() const;
  void Broadcast(const wire::Message& m);
  void FlushWal();
  void MaybeStartCluster();
  void StartLoad();
  void NextLoad();
  void ScheduleCut();
  void StopWhenCutDone();
  void PollStopFlag();
  void Stop();

  // ---- full snapshots (process_snapshot.cpp). The initiator pauses every
  // node (no new transaction), waits until none coordinates an open one,
  // has each write its snapshot once nothing is open there, lists the
  // snapshot in cluster.json, then resumes them (and, with WAL retention,
  // each deletes the segments the snapshot makes unnecessary).
  struct SnapRound {
    uint64_t round = 0;
    std::string name;
    bool taking = false;    // every node drained: Take sent
    bool resuming = false;  // every node took its part: listed, Resume sent
    std::vector<bool> drained, taken, resumed;
    std::vector<walfmt::Lsn> at;
    std::vector<uint64_t> fingerprint, deleted;
    uint64_t time_us = 0;
    std::chrono::steady_clock::time_point started, drained_at;  // for the log: how long the pause lasted
    std::vector<std::weak_ptr<Conn>> waiters;
  };
  // Why a full snapshot cannot start now ("" when it can).
  std::string SnapshotRefusal() const;
  void StartSnapshot(std::string name, std::weak_ptr<Conn> waiter);
  void SendStep(uint32_t to, wire::SnapshotStep s);
  void InitiatorStep(uint32_t from, const wire::SnapshotStep& s);
  void SendTake(uint32_t to);
  void AllTaken();
  void AllResumed();
  // Ends the round: every live node resumes, the waiters hear `error` (or success when empty).
  void EndSnapshot(const std::string& error);
  Status ListSnapshot(bool after_prune);
  std::string NextSnapshotName() const;
  void OnPause(uint32_t from, const wire::SnapshotStep& s);
  void CheckDrained(uint64_t round);
  void OnTake(uint32_t from, const wire::SnapshotStep& s);
  void OnResume(uint32_t from, const wire::SnapshotStep& s);
  void Unpause(const std::string& why);
  void SnapshotPeerDown(uint32_t j);
  void ScheduleFullSnapshot();

  ProcessOptions popt_;
  walfmt::ClusterInfo info_;
  RuntimeInfo rt_;
  ClusterOptions opt_;
  Topology topo_;
  Rng rng_;
  RunSummary sum_;
  uint64_t epoch_us_ = 0;
  asio::io_context io_;
  tcp::acceptor acceptor_;
  asio::signal_set signals_;
  asio::steady_timer cut_timer_;
  asio::steady_timer drain_timer_;
  asio::steady_timer stop_poll_;
  asio::steady_timer full_timer_;
  sim::Node node_;
  Status error_;
  bool stopping_ = false;
  bool draining_ = false;  // told to stop: stop once no cut runs here (StopWhenCutDone)
  std::chrono::steady_clock::time_point drain_start_;

  std::vector<std::unique_ptr<Outbound>> out_;
  std::vector<bool> alive_;
  std::vector<uint32_t> incarnations_;
  std::map<uint32_t, std::shared_ptr<Conn>> peer_conns_;  // by peer: the connection it opened to us
  std::vector<uint32_t> members_;
  uint32_t failed_initiator_ = sim::kNoNode;
  uint32_t hello_rotation_ = 0;
  uint32_t early_answers_ = 0;  // HelloResps dropped because a member was not connected yet (Deliver)
  uint64_t completed_cut_ = 0;
  bool started_ = false;  // the node took part: fresh start done, or restart begun
  bool fresh_ = false;    // no WAL before this process
  bool loaded_ = false;   // the initial data is in (node 0 writes it; the others are told)

  // Group commit: a sync was asked for and not done yet; what waits for it.
  bool sync_pending_ = false;
  bool flush_posted_ = false;
  std::vector<std::function<void()>> held_;

  // Client transactions by id, and the one BeginTx is starting.
  std::optional<ClientTx> pending_client_;
  std::unordered_map<TxId, ClientTx, walfmt::TxIdHash> clients_;
  std::vector<std::weak_ptr<Conn>> cut_waiters_;
  // Node 0's initial data: the transactions, the next to start, those to
  // run again (a peer not connected yet refuses), and which is which.
  std::vector<std::vector<Write>> loads_;
  size_t loads_started_ = 0;
  size_t loads_done_ = 0;
  std::vector<size_t> load_retry_;
  uint32_t load_failures_ = 0;
  std::optional<size_t> pending_load_;
  std::unordered_map<TxId, size_t, walfmt::TxIdHash> load_of_;

  // Full snapshots: the round this node runs as initiator; as a node, whether
  // it is paused (and by whom, in which round, until when), its own part of
  // the last round it took, and the client transactions held while paused.
  std::optional<SnapRound> snap_;
  bool paused_ = false;
  uint32_t paused_by_ = sim::kNoNode;
  uint64_t paused_round_ = 0;
  std::chrono::steady_clock::time_point pause_deadline_;
  uint64_t took_round_ = 0;
  walfmt::Lsn took_at_;
  std::deque<std::pair<std::weak_ptr<Conn>, wire::TxRequest>> held_txs_;
};

}  // namespace walcut::node::detail
