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
#include <filesystem>

#include <fmt/ranges.h>

#include "node/membership.h"
#include "node/process_internal.h"
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

namespace detail {

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
      } else if (const auto* ss = std::get_if<wire::SnapshotStep>(&m)) {
        OnSnapshotStep(c->peer, *ss);
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
      if (const auto* sr = std::get_if<wire::SnapshotRequest>(&m)) return OnSnapshotRequest(c, *sr);
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
  // A peer that (re)connects learns that this node is ready: this node's
  // own announcement (NodeReady's broadcast, or the status sent when its
  // connection to the peer opened) may have gone out before it knew the
  // peer was up, and a peer that does not count it as a member would abort
  // every cut it starts as initiator.
  if (node_.ready() && started_) {
    std::string frame;
    (void)wire::AppendFrame(frame, wire::Encode(StatusNow()));
    WriteTo(j, std::move(frame));
  }
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
  SnapshotPeerDown(j);
  if (started_ && !draining_) node_.OnNodeFailed(j);
}

void Process::Deliver(Msg m) {
  if (stopping_) return;
  if (m.type == MsgType::kHelloResp && !node_.ready()) {
    // Taken only once every member it names is connected (node/membership.h).
    JoinDecision d = DecideJoin(m.participants, popt_.node, alive_, early_answers_);
    if (!d.take) return;
    if (!d.left_out.empty()) {
      Log(fmt::format("joining without node(s) {} that the initiator counts as members: not connected",
                      fmt::join(d.left_out, ",")));
    }
    members_ = std::move(d.members);
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
  if (paused_) {
    // A full snapshot is being taken: the transaction starts once it is.
    if (held_txs_.size() < kMaxHeldTxs) {
      held_txs_.emplace_back(c, req);
      return;
    }
    r.outcome = wire::Outcome::kRefused;
    r.message = fmt::format("node {} is paused for a full snapshot and holds {} requests", popt_.node, kMaxHeldTxs);
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
  } else if (snap_) {
    r.error = fmt::format("full snapshot {} is being taken", snap_->name);
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
    if (started_ && loaded_ && node_.ready() && node_.initiating() && node_.initiator_cut() == 0 && !snap_) {
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
  full_timer_.cancel();
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

  const std::string node_dir = walfmt::JoinPath(popt_.dir, walfmt::NodeDirName(popt_.node));
  if (fresh_) {
    if (Status st = node_.Open(wo); !st.ok()) return st;
  } else {
    loaded_ = true;
    started_ = true;
    auto recorded = LoadIncarnation(node_dir);
    if (!recorded.ok()) return recorded.status();
    if (*recorded) node_.RaiseIncarnation(**recorded + 1);
    if (Status st = node_.Restart(wo); !st.ok()) return st;
    if (sum_.snapshot_recoveries > 0) Log("recovered from its latest full snapshot and the WAL after it");
  }
  // Before any transaction id of this incarnation is used.
  if (Status st = SaveIncarnation(node_dir, node_.incarnation()); !st.ok()) return st;
  if (Status st = node_.FlushWal(); !st.ok()) return st;
  for (uint32_t j = 0; j < info_.nodes; ++j) {
    if (j != popt_.node) Connect(j);
  }
  Accept();
  MaybeStartCluster();
  ScheduleCut();
  ScheduleFullSnapshot();
  PollStopFlag();
  io_.run();
  Status st = node_.Close();
  if (!error_.ok()) return error_;
  return st;
}

}  // namespace detail

walfmt::Status RunNodeProcess(const ProcessOptions& opt) {
  // A peer that dies while this node writes to it must not kill this node:
  // the write fails with EPIPE and the peer is dealt with as down.
  std::signal(SIGPIPE, SIG_IGN);
  auto info = walfmt::LoadClusterInfo(opt.dir);
  if (!info.ok()) return info.status();
  auto rt = LoadRuntimeInfo(opt.dir);
  if (!rt.ok()) return rt.status();
  if (opt.node >= info->nodes) {
    return walfmt::Status::InvalidArgument(
        fmt::format("--node {}: the cluster has nodes 0..{}", opt.node, info->nodes - 1));
  }
  auto p = std::make_unique<detail::Process>(opt, std::move(*info), std::move(*rt));
  return p->Run();
}

}  // namespace walcut::node
