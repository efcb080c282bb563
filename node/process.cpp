// A real node (node/process.h): the Host of one Node over Asio.
//
// Connections. Node i opens one connection to every peer j and sends its
// messages to j on it; it receives j's messages on the connection j opened.
// The first frame on every connection is a wire::Hello naming the cluster,
// the sender and its role (peer, client, control). A peer is alive while the
// connection it opened to us is open: when its process dies the kernel closes
// it, and the other nodes learn of the crash (Node::OnNodeFailed). A
// restarted peer opens a new connection with a higher incarnation.
//
// Membership. The ready nodes, oldest first, as this node knows them: all
// nodes at the cluster's start; a node that dies leaves; a restarted node
// learns the list from the initiator's answer to its Hello, and tells the
// others it is ready with a Notice; they add it as the youngest.

#include "node/process.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <deque>
#include <filesystem>
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
#include "node/runtime_file.h"
#include "node/wire.h"
#include "walfmt/cluster_layout.h"
#include "walfmt/segment.h"
#include "walfmt/strings.h"

namespace walcut::node {

std::string_view SyncModeName(SyncMode m) {
  switch (m) {
    case SyncMode::kAlways:
      return "always";
    case SyncMode::kGroup:
      return "group";
    case SyncMode::kOff:
      return "off";
  }
  return "?";
}

bool ParseSyncMode(std::string_view text, SyncMode& out) {
  for (SyncMode m : {SyncMode::kAlways, SyncMode::kGroup, SyncMode::kOff}) {
    if (text == SyncModeName(m)) {
      out = m;
      return true;
    }
  }
  return false;
}

namespace {

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

uint64_t WallMicros() {
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
    opt_.random_crashes = 1;  // crashes happen: outcomes are remembered for recovery queries
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
};

void Conn::Read() {
  auto self = shared_from_this();
  sock_.async_read_some(asio::buffer(buf_), [this, self](const std::error_code& ec, size_t n) {
    if (ec) return p_.OnClosed(self);
    reader_.Feed(std::string_view(buf_.data(), n));
    for (;;) {
      auto f = reader_.Next();
      if (!f.ok()) return p_.Reject(self, f.status().message());
      if (!f->has_value()) break;
      auto m = wire::Decode(**f);
      if (!m.ok()) return p_.Reject(self, fmt::format("frame at byte {}: {}", reader_.offset(), m.status().message()));
      p_.OnFrame(self, *m);
      if (!sock_.is_open()) return p_.OnClosed(self);
    }
    Read();
  });
}

void Conn::Write(const wire::Message& m) {
  if (!sock_.is_open()) return;
  if (!wire::AppendFrame(out_, wire::Encode(m)).ok()) return;
  if (writing_.empty()) Flush();
}

void Conn::Flush() {
  if (out_.empty() || !sock_.is_open()) return;
  writing_.swap(out_);
  out_.clear();
  auto self = shared_from_this();
  asio::async_write(sock_, asio::buffer(writing_), [this, self](const std::error_code& ec, size_t) {
    writing_.clear();
    if (ec) {
      Close();
      return;
    }
    Flush();
  });
}

uint32_t Process::Initiator() const {
  if (!node_.ready()) {
    // Restarting: ask each live peer in turn (only the initiator answers).
    std::vector<uint32_t> live;
    for (uint32_t j = 0; j < alive_.size(); ++j) {
      if (j != popt_.node && alive_[j]) live.push_back(j);
    }
    if (live.empty()) return popt_.node;
    return live[hello_rotation_ % live.size()];
  }
  for (uint32_t n : members_) {
    if (IsAlive(n)) return n;
  }
  return popt_.node;
}

void Process::Send(Msg m) {
  if (m.type == MsgType::kHello) ++hello_rotation_;
  if (sync_pending_) {
    held_.push_back([this, m = std::move(m)]() mutable { Send(std::move(m)); });
    return;
  }
  ++sum_.messages;
  if (m.to == popt_.node) {
    asio::post(io_, [this, m = std::move(m)]() mutable { Deliver(std::move(m)); });
    return;
  }
  if (m.to >= out_.size() || !alive_[m.to]) return;  // a dead peer: the protocol handles the loss
  std::string frame;
  if (!wire::AppendFrame(frame, wire::Encode(wire::Peer{std::move(m)})).ok()) {
    return Fail(Status::Internal(fmt::format("node {}: a message too large for a frame", popt_.node)));
  }
  WriteTo(m.to, std::move(frame));
}

void Process::WriteTo(uint32_t j, std::string frame) {
  Outbound& o = *out_[j];
  if (o.queue.size() + frame.size() > kMaxQueuedBytes) {
    // The peer does not read: for this node it is gone.
    std::error_code ec;
    o.sock.close(ec);
    return PeerDown(j);
  }
  o.queue += frame;
  if (!o.connected) {
    if (!o.connecting) Connect(j);
    return;
  }
  if (o.writing.empty()) FlushOutbound(j);
}

void Process::FlushOutbound(uint32_t j) {
  Outbound& o = *out_[j];
  if (o.queue.empty() || !o.connected || !o.writing.empty()) return;
  o.writing.swap(o.queue);
  asio::async_write(o.sock, asio::buffer(o.writing), [this, j](const std::error_code& ec, size_t) {
    Outbound& ob = *out_[j];
    ob.writing.clear();
    if (ec) {
      ob.connected = false;
      std::error_code ig;
      ob.sock.close(ig);
      ob.queue.clear();
      return;  // the peer's own connection to us tells whether it died
    }
    FlushOutbound(j);
  });
}

void Process::Connect(uint32_t j) {
  Outbound& o = *out_[j];
  if (o.connected || o.connecting || stopping_) return;
  o.connecting = true;
  std::error_code ec;
  o.sock.close(ec);
  o.sock = tcp::socket(io_);
  const tcp::endpoint ep(asio::ip::make_address(rt_.host, ec), rt_.ports[j]);
  o.sock.async_connect(ep, [this, j](const std::error_code& err) {
    Outbound& ob = *out_[j];
    ob.connecting = false;
    if (stopping_) return;
    if (err) {
      ob.retry.expires_after(kReconnectDelay);
      ob.retry.async_wait([this, j](const std::error_code& e) {
        if (!e) Connect(j);
      });
      return;
    }
    asio::ip::tcp::no_delay nd(true);
    std::error_code ig;
    ob.sock.set_option(nd, ig);
    ob.connected = true;
    std::string hello;
    (void)wire::AppendFrame(hello, wire::Encode(wire::Hello{info_.cluster_id, popt_.node, node_.incarnation(),
                                                            wire::Role::kPeer, wire::kProtocolVersion}));
    ob.queue.insert(0, hello);
    if (node_.ready() && started_) {
      // Tell a peer that (re)connects that this node is ready.
      std::string ready;
      (void)wire::AppendFrame(ready, wire::Encode(StatusNow()));
      ob.queue.insert(hello.size(), ready);
    }
    FlushOutbound(j);
  });
}

void Process::Accept() {
  acceptor_.async_accept([this](const std::error_code& ec, tcp::socket s) {
    if (stopping_) return;
    if (!ec) {
      std::error_code ig;
      s.set_option(asio::ip::tcp::no_delay(true), ig);
      std::make_shared<Conn>(*this, std::move(s))->Start();
    }
    Accept();
  });
}

void Process::OnFrame(const std::shared_ptr<Conn>& c, const wire::Message& m) {
  if (!c->greeted) {
    const auto* h = std::get_if<wire::Hello>(&m);
    if (!h) return Reject(c, fmt::format("the first message is a {}, not a Hello", wire::KindName(wire::KindOf(m))));
    if (h->cluster_id != info_.cluster_id) {
      return Reject(c, fmt::format("cluster {:016x}, this is cluster {:016x}", h->cluster_id, info_.cluster_id));
    }
    if (h->protocol_version != wire::kProtocolVersion) {
      return Reject(
          c, fmt::format("protocol version {}, this node speaks {}", h->protocol_version, wire::kProtocolVersion));
    }
    if (h->role == wire::Role::kPeer && (h->node >= info_.nodes || h->node == popt_.node)) {
      return Reject(c, fmt::format("a peer that says it is node {}", h->node));
    }
    c->greeted = true;
    c->role = h->role;
    if (h->role == wire::Role::kPeer) {
      c->peer = h->node;
      c->incarnation = h->incarnation;
      auto old = peer_conns_.find(h->node);
      if (old != peer_conns_.end() && old->second != c) {
        // The peer restarted before we saw its old connection close.
        auto prev = old->second;
        peer_conns_.erase(old);
        prev->Close();
        if (alive_[h->node]) PeerDown(h->node);
      }
      peer_conns_[h->node] = c;
      PeerUp(h->node, h->incarnation);
    }
    return;
  }
  switch (c->role) {
    case wire::Role::kPeer:
      if (const auto* p = std::get_if<wire::Peer>(&m)) {
        if (p->msg.from != c->peer || p->msg.to != popt_.node) {
          return Reject(c, fmt::format("a message from node {} to node {} on node {}'s connection", p->msg.from,
                                       p->msg.to, c->peer));
        }
        Deliver(p->msg);
      } else if (const auto* st = std::get_if<wire::StatusReply>(&m)) {
        // A peer's status, pushed when it changes: ready, cuts completed, loaded.
        if (st->node != c->peer)
          return Reject(c, fmt::format("node {}'s status on node {}'s connection", st->node, c->peer));
        if (st->ready && std::find(members_.begin(), members_.end(), st->node) == members_.end() && started_) {
          members_.push_back(st->node);
        }
        if (st->ready && st->node == sim::kFirstInitiator && fresh_) loaded_ = true;
        if (st->initiator == st->node) completed_cut_ = std::max(completed_cut_, st->in_flight);
      } else {
        Reject(c, fmt::format("a {} on a peer connection", wire::KindName(wire::KindOf(m))));
      }
      return;
    case wire::Role::kClient:
      if (const auto* r = std::get_if<wire::TxRequest>(&m)) return OnClientTx(c, *r);
      if (std::get_if<wire::StatusRequest>(&m)) return c->Write(StatusNow());
      return Reject(c, fmt::format("a {} from a client", wire::KindName(wire::KindOf(m))));
    case wire::Role::kControl:
      if (std::get_if<wire::CutRequest>(&m)) return OnCutRequest(c);
      if (std::get_if<wire::StatusRequest>(&m)) return c->Write(StatusNow());
      if (std::get_if<wire::Shutdown>(&m)) {
        c->Write(StatusNow());
        Log("stopping: asked to (shutdown request)");
        return asio::post(io_, [this] { Stop(); });
      }
      return Reject(c, fmt::format("a {} on a control connection", wire::KindName(wire::KindOf(m))));
  }
}

void Process::OnClosed(const std::shared_ptr<Conn>& c) {
  if (c->role != wire::Role::kPeer || !c->greeted) return;
  auto it = peer_conns_.find(c->peer);
  if (it == peer_conns_.end() || it->second != c) return;
  peer_conns_.erase(it);
  PeerDown(c->peer);
}

void Process::PeerUp(uint32_t j, uint32_t incarnation) {
  Log(fmt::format("node {} is up (incarnation {})", j, incarnation));
  alive_[j] = true;
  incarnations_[j] = incarnation;
  Connect(j);
  MaybeStartCluster();
}

void Process::PeerDown(uint32_t j) {
  if (!alive_[j]) return;
  Log(fmt::format("node {} is down", j));
  alive_[j] = false;
  Outbound& o = *out_[j];
  std::error_code ec;
  o.sock.close(ec);
  o.connected = false;
  o.queue.clear();
  auto m = std::find(members_.begin(), members_.end(), j);
  if (m != members_.end()) {
    if (m == members_.begin()) failed_initiator_ = j;
    members_.erase(m);
  }
  // The cluster is stopping (`cluster down`): this node stops as well, with
  // no takeover and no cut to abort, whether or not its own signal came yet.
  if (!draining_ && std::filesystem::exists(walfmt::JoinPath(popt_.dir, kStoppingFile), ec)) {
    Log(fmt::format("stopping: the cluster is stopping (node {} left)", j));
    StopWhenCutDone();
  }
  if (started_ && !draining_) node_.OnNodeFailed(j);
}

void Process::Deliver(Msg m) {
  if (stopping_) return;
  if (m.type == MsgType::kHelloResp && !node_.ready()) {
    // The initiator's members, oldest first; this node joins as the youngest (NodeReady).
    members_.clear();
    for (uint32_t n : m.participants) {
      if (n < info_.nodes && n != popt_.node && alive_[n]) members_.push_back(n);
    }
  }
  node_.Deliver(m);
}

void Process::NodeReady(uint32_t n) {
  if (n != popt_.node) return;
  members_.push_back(n);
  Broadcast(StatusNow());
}

void Process::Broadcast(const wire::Message& msg) {
  std::string frame;
  (void)wire::AppendFrame(frame, wire::Encode(msg));
  for (uint32_t j = 0; j < info_.nodes; ++j) {
    if (j != popt_.node && alive_[j]) WriteTo(j, frame);
  }
}

wire::StatusReply Process::StatusNow() const {
  wire::StatusReply s;
  s.node = popt_.node;
  s.incarnation = node_.incarnation();
  s.ready = started_ && node_.ready() && loaded_;
  s.cut_id = node_.cut_id();
  s.initiator = node_.ready() ? Initiator() : sim::kNoNode;
  // Pushed to peers by the initiator: the last cut it completed.
  s.in_flight = node_.initiating() ? completed_cut_ : node_.near_in_flight();
  return s;
}

void Process::SyncRequested() {
  if (rt_.sync == SyncMode::kAlways) {
    if (Status st = node_.FlushWal(); !st.ok()) Fail(st);
    return;
  }
  sync_pending_ = true;
  if (!flush_posted_) {
    flush_posted_ = true;
    asio::post(io_, [this] { FlushWal(); });
  }
}

// The group commit: one write (and fdatasync) for every sync the events
// since the last one asked for, then what waited for it leaves.
void Process::FlushWal() {
  flush_posted_ = false;
  if (stopping_) return;
  if (Status st = node_.FlushWal(); !st.ok()) return Fail(st);
  sync_pending_ = false;
  auto held = std::move(held_);
  held_.clear();
  for (auto& fn : held) fn();
}

void Process::TxEnded(const sim::TxEnd& e) {
  if (e.load) {
    auto it = load_of_.find(e.id);
    if (it == load_of_.end()) return;
    const size_t i = it->second;
    load_of_.erase(it);
    if (e.committed) {
      ++loads_done_;
      return NextLoad();
    }
    // Refused: a node that has not seen every peer yet. Again, a little later.
    constexpr uint32_t kMaxLoadFailures = 10000;
    if (++load_failures_ > kMaxLoadFailures) {
      return Fail(Status::Internal(
          fmt::format("node {}: the initial data could not be written ({} refusals)", popt_.node, load_failures_)));
    }
    load_retry_.push_back(i);
    PostLocal(popt_.node, 0, 10000, [this] { NextLoad(); });
    return;
  }
  ++(e.committed ? sum_.committed : sum_.rolled_back);
  auto it = clients_.find(e.id);
  if (it == clients_.end()) return;
  ClientTx ct = it->second;
  clients_.erase(it);
  wire::TxResult r;
  r.request_id = ct.request_id;
  r.tx = e.id;
  r.outcome = e.committed ? wire::Outcome::kCommitted : wire::Outcome::kAborted;
  r.reason = e.committed ? AbortReason::kNone : e.why;
  if (!e.committed && r.reason == AbortReason::kNone) r.reason = AbortReason::kParticipantLost;
  // A one-phase transaction whose primary was lost (Node::NearLostNode): its
  // decider may have committed it; the client must not be told "aborted".
  if (!e.committed && e.one_phase && e.why == AbortReason::kParticipantLost) {
    r.outcome = wire::Outcome::kInDoubt;
    r.reason = AbortReason::kNone;
  }
  if (e.reads) r.reads = *e.reads;
  if (e.committed && e.writes) r.writes = *e.writes;
  r.commit_time_us = e.committed ? now() : 0;
  auto answer = [ct, r = std::move(r)] {
    if (auto c = ct.conn.lock()) c->Write(r);
  };
  if (sync_pending_) {
    held_.push_back(std::move(answer));
  } else {
    answer();
  }
}

void Process::OnClientTx(const std::shared_ptr<Conn>& c, const wire::TxRequest& req) {
  wire::TxResult r;
  r.request_id = req.request_id;
  if (!started_ || !node_.ready() || !loaded_) {
    r.outcome = wire::Outcome::kRefused;
    r.message = fmt::format("node {} is not ready (starting or recovering)", popt_.node);
    return c->Write(r);
  }
  if (req.workload != info_.workload && info_.workload != walfmt::Workload::kMixed) {
    r.outcome = wire::Outcome::kRefused;
    r.message = fmt::format("the cluster's workload is {}", walfmt::WorkloadName(info_.workload));
    return c->Write(r);
  }
  WorkloadParams p = opt_.workload;
  p.workload = req.workload;
  Rng prog_rng(req.seed);
  std::shared_ptr<Program> prog = MakeWorkloadProgram(p, prog_rng);
  pending_client_ = ClientTx{c, req.request_id};
  node_.BeginTx(std::move(prog), false);
  pending_client_.reset();
}

void Process::OnCutRequest(const std::shared_ptr<Conn>& c) {
  wire::CutReply r;
  r.ok = false;
  if (!started_ || !node_.ready() || !loaded_) {
    r.error = fmt::format("node {} is not ready", popt_.node);
  } else if (!node_.initiating()) {
    r.error = fmt::format("node {} does not start the cuts; node {} does", popt_.node, Initiator());
  } else if (node_.initiator_cut() != 0) {
    r.error = fmt::format("cut {} is running", node_.initiator_cut());
  } else if (draining_) {
    r.error = fmt::format("node {} is stopping", popt_.node);
  } else {
    cut_waiters_.push_back(c);
    ++sum_.cuts_started;
    node_.InitiateCut(std::max(node_.cut_id(), completed_cut_) + 1);
    return;
  }
  c->Write(r);
}

void Process::CutCompleted(uint64_t k, bool consistent) {
  completed_cut_ = std::max(completed_cut_, k);
  ++(consistent ? sum_.cuts_consistent : sum_.cuts_inconsistent);
  wire::CutReply r;
  r.ok = consistent;
  r.cut_id = k;
  if (!consistent) r.error = fmt::format("cut {} is inconsistent (walcut cuts DIR says why)", k);
  auto waiters = std::move(cut_waiters_);
  cut_waiters_.clear();
  auto answer = [waiters = std::move(waiters), r = std::move(r)] {
    for (const auto& w : waiters) {
      if (auto c = w.lock()) c->Write(r);
    }
  };
  if (sync_pending_) {
    held_.push_back(std::move(answer));
  } else {
    answer();
  }
  Broadcast(StatusNow());
}

// A fresh cluster starts once every node is connected: each node takes part,
// and node 0 writes the initial data.
void Process::MaybeStartCluster() {
  if (started_) return;
  for (uint32_t j = 0; j < info_.nodes; ++j) {
    if (!alive_[j]) return;
  }
  started_ = true;
  members_.clear();
  for (uint32_t j = 0; j < info_.nodes; ++j) members_.push_back(j);
  if (popt_.node == sim::kFirstInitiator) StartLoad();
}

void Process::StartLoad() {
  std::map<uint32_t, std::vector<Write>> by_primary;
  for (auto& w : InitialWrites(opt_.workload)) by_primary[topo_.PrimaryOf(w.key)].push_back(std::move(w));
  for (auto& [p, ws] : by_primary) {
    for (size_t i = 0; i < ws.size(); i += kLoadKeysPerTx) {
      const size_t end = std::min(ws.size(), i + kLoadKeysPerTx);
      loads_.emplace_back(ws.begin() + static_cast<std::ptrdiff_t>(i), ws.begin() + static_cast<std::ptrdiff_t>(end));
    }
  }
  sum_.load_txs = loads_.size();
  for (uint32_t i = 0; i < kLoadConcurrency; ++i) NextLoad();
}

void Process::NextLoad() {
  if (loaded_) return;
  if (!load_retry_.empty() || loads_started_ < loads_.size()) {
    size_t i = 0;
    if (!load_retry_.empty()) {
      i = load_retry_.back();
      load_retry_.pop_back();
    } else {
      i = loads_started_++;
    }
    pending_load_ = i;
    node_.BeginTx(MakeLoadProgram(loads_[i]), true);
    pending_load_.reset();
    return;
  }
  if (loads_done_ < loads_.size()) return;
  loaded_ = true;
  Broadcast(StatusNow());
}

void Process::ScheduleCut() {
  if (rt_.cut_every_us == 0 || stopping_) return;
  cut_timer_.expires_after(std::chrono::microseconds(rt_.cut_every_us));
  cut_timer_.async_wait([this](const std::error_code& ec) {
    if (ec || stopping_ || draining_) return;
    if (started_ && loaded_ && node_.ready() && node_.initiating() && node_.initiator_cut() == 0) {
      ++sum_.cuts_started;
      node_.InitiateCut(std::max(node_.cut_id(), completed_cut_) + 1);
    }
    ScheduleCut();
  });
}

// SIGTERM or SIGINT. `walcut cluster down` signals every node at once. A
// node then starts no cut, and lets a cut that runs on it finish (the
// initiator: complete) before it exits, for at most kDrainTimeout; it stays
// at least kMinDrain, so that every node has heard its signal before any
// leaves, and a node that has heard it does not take over as initiator when
// another leaves (PeerDown; nor does a node that sees the cluster's stopping
// file). A cut running at `down` so completes rather than being aborted as
// if a node had crashed.
void Process::StopWhenCutDone() {
  constexpr auto kMinDrain = std::chrono::milliseconds(50);
  constexpr auto kDrainTimeout = std::chrono::seconds(2);
  constexpr auto kDrainPoll = std::chrono::milliseconds(2);
  if (stopping_) return;
  const auto now = std::chrono::steady_clock::now();
  if (!draining_) {
    draining_ = true;
    drain_start_ = now;
    cut_timer_.cancel();
  }
  const bool running = node_.cut_active() || (node_.initiating() && node_.initiator_cut() != 0);
  if ((!running && now >= drain_start_ + kMinDrain) || now >= drain_start_ + kDrainTimeout) return Stop();
  drain_timer_.expires_after(kDrainPoll);
  drain_timer_.async_wait([this](const std::error_code& ec) {
    if (!ec) StopWhenCutDone();
  });
}

// ProcessOptions::stop: the signal, as the embedding program saw it.
void Process::PollStopFlag() {
  if (popt_.stop == nullptr || stopping_) return;
  if (popt_.stop->load()) {
    Log("stopping: asked to (signal)");
    return StopWhenCutDone();
  }
  stop_poll_.expires_after(std::chrono::milliseconds(5));
  stop_poll_.async_wait([this](const std::error_code& ec) {
    if (!ec) PollStopFlag();
  });
}

void Process::Stop() {
  if (stopping_) return;
  stopping_ = true;
  std::error_code ec;
  acceptor_.close(ec);
  signals_.cancel(ec);
  cut_timer_.cancel();
  drain_timer_.cancel();
  stop_poll_.cancel();
  for (auto& o : out_) {
    o->retry.cancel();
    o->sock.close(ec);
  }
  for (auto& [j, c] : peer_conns_) c->Close();
  if (Status st = node_.FlushWal(); !st.ok() && error_.ok()) error_ = st;
  io_.stop();
}

Status Process::Run() {
  if (popt_.node >= rt_.ports.size()) {
    return Status::InvalidArgument(
        fmt::format("node {}: {} lists {} nodes", popt_.node, kRuntimeFile, rt_.ports.size()));
  }
  walfmt::WriterOptions wo;
  wo.wal_dir = walfmt::JoinPath(popt_.dir, info_.node_wal_dirs.at(popt_.node));
  wo.node_id = popt_.node;
  wo.cluster_id = info_.cluster_id;
  wo.segment_bytes = rt_.segment_bytes;
  wo.archive_compressed = false;
  wo.fsync = rt_.sync != SyncMode::kOff;
  std::error_code fec;
  fresh_ = !std::filesystem::exists(wo.wal_dir, fec) || std::filesystem::is_empty(wo.wal_dir, fec);

  std::error_code ec;
  const tcp::endpoint ep(asio::ip::make_address(rt_.host, ec), rt_.ports[popt_.node]);
  if (ec) return Status::InvalidArgument(fmt::format("{}: host '{}': {}", kRuntimeFile, rt_.host, ec.message()));
  acceptor_.open(ep.protocol(), ec);
  if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_.bind(ep, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return Status::Io(
        fmt::format("node {}: cannot listen on {}:{}: {}", popt_.node, rt_.host, rt_.ports[popt_.node], ec.message()));
  }
  signals_.async_wait([this](const std::error_code& e, int sig) {
    if (e) return;
    Log(fmt::format("stopping: signal {}", sig));
    StopWhenCutDone();
  });

  if (fresh_) {
    if (Status st = node_.Open(wo); !st.ok()) return st;
  } else {
    loaded_ = true;
    started_ = true;
    if (Status st = node_.Restart(wo); !st.ok()) return st;
  }
  if (Status st = node_.FlushWal(); !st.ok()) return st;
  for (uint32_t j = 0; j < info_.nodes; ++j) {
    if (j != popt_.node) Connect(j);
  }
  Accept();
  MaybeStartCluster();
  ScheduleCut();
  PollStopFlag();
  io_.run();
  Status st = node_.Close();
  if (!error_.ok()) return error_;
  return st;
}

}  // namespace

Status RunNodeProcess(const ProcessOptions& opt) {
  // A peer that dies while this node writes to it must not kill this node:
  // the write fails with EPIPE and the peer is dealt with as down.
  std::signal(SIGPIPE, SIG_IGN);
  auto info = walfmt::LoadClusterInfo(opt.dir);
  if (!info.ok()) return info.status();
  auto rt = LoadRuntimeInfo(opt.dir);
  if (!rt.ok()) return rt.status();
  if (opt.node >= info->nodes) {
    return Status::InvalidArgument(fmt::format("--node {}: the cluster has nodes 0..{}", opt.node, info->nodes - 1));
  }
  auto p = std::make_unique<Process>(opt, std::move(*info), std::move(*rt));
  return p->Run();
}

}  // namespace walcut::node
