// A real cluster's full snapshot (node/process_internal.h): the barrier that
// quiesces the transactions over the wire, as the simulator's driver does by
// looking at every node at once (cluster_driver.cpp, TrySnapshot).
//
// 1. Pause. The initiator tells every node to start no transaction (a client's
//    request waits) and to answer Drained once no transaction it coordinates
//    is open. Every coordinator finishes what it started: a transaction that
//    committed anywhere was committed by every participant before its near
//    node ended it; one that aborted may still have a participant with a
//    prepare to roll back, which step 2 waits for.
// 2. Take. Once every node drained, and no cut runs, the initiator asks each
//    node for its part: a node with nothing open (no transaction, no cut part)
//    writes the SNAPSHOT record and the snapshot file, syncs its WAL and
//    answers Taken with the record's position; a node with something open
//    answers Busy and is asked again. No transaction starts anywhere until the
//    resume, so nothing committed can lie on both sides of a node's record:
//    each node's position is the snapshot's P_B.
// 3. List and resume. The initiator adds the snapshot to cluster.json, then
//    resumes every node; with WAL retention each then deletes the segments
//    wholly before its SNAPSHOT record (Node::PruneWal) and reports how many,
//    which the initiator records in cluster.json.
// Every node must be up. A node that goes down ends the round (the others
// resume, the snapshot is not listed); a node whose initiator goes down, or
// that stays paused for kPauseTimeout, resumes on its own. A snapshot that
// was not listed leaves its files and SNAPSHOT records, which nothing reads
// but a node's own recovery.

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "node/process_internal.h"
#include "walfmt/file_io.h"
#include "walfmt/reader.h"
#include "walfmt/strings.h"
#include "walfmt/text_escape.h"

namespace walcut::node {

bool ValidSnapshotName(std::string_view name) {
  if (name.empty() || name.size() > 64 || name[0] == '.' || name[0] == '-') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
}

namespace detail {

namespace {

// The initiator gives up on a round after this long; a paused node resumes
// on its own after a little longer (clients wait at most 10 s for an answer).
constexpr auto kSnapshotTimeout = std::chrono::seconds(5);
constexpr auto kPauseTimeout = std::chrono::seconds(7);
// How often a draining node looks at its transactions again, and how soon a
// busy node is asked again.
constexpr uint64_t kDrainPollUs = 1000;
constexpr uint64_t kBusyRetryUs = 2000;

std::string SnapshotDir(const std::string& cluster_dir, const std::string& name) {
  return fmt::format("{}/snapshots/{}", cluster_dir, name);
}

}  // namespace

std::string Process::SnapshotRefusal() const {
  if (!started_ || !node_.ready() || !loaded_) return fmt::format("node {} is not ready", popt_.node);
  if (!node_.initiating()) {
    return fmt::format("node {} does not take the snapshots; node {} (the initiator) does", popt_.node, Initiator());
  }
  if (draining_) return fmt::format("node {} is stopping", popt_.node);
  if (snap_) return fmt::format("full snapshot {} is being taken", snap_->name);
  for (uint32_t j = 0; j < info_.nodes; ++j) {
    if (!IsReady(j)) return fmt::format("node {} is not up and ready: a full snapshot needs every node", j);
  }
  return "";
}

void Process::OnSnapshotRequest(const std::shared_ptr<Conn>& c, const wire::SnapshotRequest& r) {
  std::string why = SnapshotRefusal();
  std::error_code ec;
  if (why.empty() && !r.name.empty()) {
    if (!ValidSnapshotName(r.name)) {
      why = fmt::format("'{}' is not a snapshot name (1 to 64 of A-Z a-z 0-9 . _ -, not starting with . or -)",
                        walfmt::EscapeBytes(r.name));
    } else if (std::filesystem::exists(SnapshotDir(popt_.dir, r.name), ec)) {
      why = fmt::format("a snapshot named {} exists", r.name);
    }
  }
  if (!why.empty()) {
    wire::SnapshotReply rep;
    rep.ok = false;
    rep.error = why;
    return c->Write(rep);
  }
  StartSnapshot(r.name, c);
}

std::string Process::NextSnapshotName() const {
  uint64_t next = 1;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(popt_.dir + "/snapshots", ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("full-", 0) != 0 || n.size() > 5 + 18) continue;
    const std::string digits = n.substr(5);
    if (digits.empty() || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    next = std::max<uint64_t>(next, std::stoull(digits) + 1);
  }
  return fmt::format("full-{}", next);
}

void Process::StartSnapshot(std::string name, std::weak_ptr<Conn> waiter) {
  if (name.empty()) name = NextSnapshotName();
  std::error_code ec;
  std::filesystem::create_directories(SnapshotDir(popt_.dir, name), ec);
  if (ec) {
    wire::SnapshotReply rep;
    rep.ok = false;
    rep.error = fmt::format("{}: cannot create: {}", SnapshotDir(popt_.dir, name), ec.message());
    if (auto c = waiter.lock()) c->Write(rep);
    return;
  }
  // Not emplace(): clang finds a nested struct with member initializers not
  // default-constructible while its enclosing class is incomplete.
  snap_ = SnapRound{};
  SnapRound& r = *snap_;
  r.round = WallMicros();
  r.name = std::move(name);
  r.drained.assign(info_.nodes, false);
  r.taken.assign(info_.nodes, false);
  r.resumed.assign(info_.nodes, false);
  r.at.assign(info_.nodes, walfmt::Lsn{});
  r.fingerprint.assign(info_.nodes, 0);
  r.deleted.assign(info_.nodes, 0);
  r.waiters.push_back(std::move(waiter));
  r.started = std::chrono::steady_clock::now();
  cut_timer_.cancel();  // no cut starts until the round ends (ScheduleCut again then)
  Log(fmt::format("full snapshot {}: pausing the cluster", r.name));
  const uint64_t round = r.round;
  PostLocal(popt_.node, 0, std::chrono::duration_cast<std::chrono::microseconds>(kSnapshotTimeout).count(),
            [this, round] {
              if (snap_ && snap_->round == round) EndSnapshot("timed out waiting for the nodes");
            });
  for (uint32_t j = 0; j < info_.nodes; ++j) {
    wire::SnapshotStep s;
    s.step = wire::SnapStep::kPause;
    s.round = round;
    s.name = snap_->name;
    SendStep(j, std::move(s));
  }
}

void Process::SendStep(uint32_t to, wire::SnapshotStep s) {
  if (to == popt_.node) {
    asio::post(io_, [this, s = std::move(s)] {
      if (!stopping_) OnSnapshotStep(popt_.node, s);
    });
    return;
  }
  if (to >= info_.nodes || !alive_[to]) return;
  std::string frame;
  (void)wire::AppendFrame(frame, wire::Encode(s));
  WriteTo(to, std::move(frame));
}

void Process::OnSnapshotStep(uint32_t from, const wire::SnapshotStep& s) {
  switch (s.step) {
    case wire::SnapStep::kPause:
      return OnPause(from, s);
    case wire::SnapStep::kTake:
      return OnTake(from, s);
    case wire::SnapStep::kResume:
      return OnResume(from, s);
    default:
      return InitiatorStep(from, s);
  }
}

// ---- the initiator

void Process::InitiatorStep(uint32_t from, const wire::SnapshotStep& s) {
  if (!snap_ || s.round != snap_->round || from >= info_.nodes) return;  // a round that ended
  SnapRound& r = *snap_;
  switch (s.step) {
    case wire::SnapStep::kDrained:
      r.drained[from] = true;
      if (!r.taking && std::all_of(r.drained.begin(), r.drained.end(), [](bool b) { return b; })) {
        r.taking = true;
        r.drained_at = std::chrono::steady_clock::now();
        Log(fmt::format("full snapshot {}: every node drained after {:.1f} ms; taking", r.name,
                        std::chrono::duration<double, std::milli>(r.drained_at - r.started).count()));
        for (uint32_t j = 0; j < info_.nodes; ++j) SendTake(j);
      }
      return;
    case wire::SnapStep::kBusy: {
      const uint64_t round = r.round;
      PostLocal(popt_.node, 0, kBusyRetryUs, [this, round, from] {
        if (snap_ && snap_->round == round && !snap_->taken[from]) SendTake(from);
      });
      return;
    }
    case wire::SnapStep::kTaken:
      if (r.taken[from] || r.resuming) return;
      r.taken[from] = true;
      r.at[from] = s.at;
      r.fingerprint[from] = s.fingerprint;
      if (std::all_of(r.taken.begin(), r.taken.end(), [](bool b) { return b; })) AllTaken();
      return;
    case wire::SnapStep::kPruned:
      if (!r.resuming || r.resumed[from]) return;
      r.resumed[from] = true;
      r.deleted[from] = s.deleted;
      if (std::all_of(r.resumed.begin(), r.resumed.end(), [](bool b) { return b; })) AllResumed();
      return;
    case wire::SnapStep::kFailed:
      return EndSnapshot(fmt::format("node {}: {}", from, s.error));
    default:
      return;
  }
}

// A cut running on the initiator completes first: its nodes' parts must not
// be open when they take theirs (they would answer Busy until it ends).
void Process::SendTake(uint32_t to) {
  if (!snap_) return;
  if (node_.initiator_cut() != 0) {
    const uint64_t round = snap_->round;
    PostLocal(popt_.node, 0, kBusyRetryUs, [this, round, to] {
      if (snap_ && snap_->round == round) SendTake(to);
    });
    return;
  }
  wire::SnapshotStep s;
  s.step = wire::SnapStep::kTake;
  s.round = snap_->round;
  s.name = snap_->name;
  SendStep(to, std::move(s));
}

void Process::AllTaken() {
  SnapRound& r = *snap_;
  r.time_us = now();
  if (Status st = ListSnapshot(false); !st.ok()) return EndSnapshot(st.message());
  r.resuming = true;
  const bool prune = rt_.wal_retention == WalRetention::kAfterSnapshot;
  // The pause ends here: every node resumes on this message.
  Log(fmt::format("full snapshot {}: taken and listed in {} after {:.1f} ms of pause; resuming{}", r.name,
                  walfmt::kClusterJsonName,
                  std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - r.started).count(),
                  prune ? " (and deleting the WAL it makes unnecessary)" : ""));
  for (uint32_t j = 0; j < info_.nodes; ++j) {
    wire::SnapshotStep s;
    s.step = wire::SnapStep::kResume;
    s.round = r.round;
    s.name = r.name;
    s.prune = prune;
    SendStep(j, std::move(s));
  }
}

void Process::AllResumed() {
  if (rt_.wal_retention == WalRetention::kAfterSnapshot) {
    if (Status st = ListSnapshot(true); !st.ok()) Log(fmt::format("full snapshot {}: {}", snap_->name, st.message()));
  }
  EndSnapshot("");
}

void Process::EndSnapshot(const std::string& error) {
  if (!snap_) return;
  SnapRound r = std::move(*snap_);
  snap_.reset();
  if (!error.empty()) {
    Log(fmt::format("full snapshot {}: not taken: {}", r.name, error));
    for (uint32_t j = 0; j < info_.nodes; ++j) {
      if (r.resuming && r.resumed[j]) continue;
      wire::SnapshotStep s;
      s.step = wire::SnapStep::kResume;
      s.round = r.round;
      s.name = r.name;
      SendStep(j, std::move(s));
    }
  } else {
    ++sum_.snapshots;
  }
  wire::SnapshotReply rep;
  rep.ok = error.empty();
  if (rep.ok) {
    rep.name = r.name;
  } else {
    rep.error = fmt::format("full snapshot {}: {}", r.name, error);
  }
  for (const auto& w : r.waiters) {
    if (auto c = w.lock()) c->Write(rep);
  }
  ScheduleCut();
}

// cluster.json lists the snapshot once every node's part is on disk; after
// the WAL retention it is written again with what each node deleted and
// where its WAL now starts.
Status Process::ListSnapshot(bool after_prune) {
  const SnapRound& r = *snap_;
  auto info = walfmt::LoadClusterInfo(popt_.dir);
  if (!info.ok()) return info.status();
  walfmt::FullSnapshotInfo* sn = nullptr;
  for (auto& f : info->full_snapshots) {
    if (f.name == r.name) sn = &f;
  }
  if (sn == nullptr) {
    sn = &info->full_snapshots.emplace_back();
    sn->name = r.name;
    sn->dir = "snapshots/" + r.name;
    sn->time_us = r.time_us;
    for (uint32_t j = 0; j < info_.nodes; ++j) {
      walfmt::FullSnapshotNode n;
      n.node = j;
      n.file = fmt::format("node-{}.snap", j);
      n.fingerprint = r.fingerprint[j];
      n.wal_position = r.at[j];
      sn->nodes.push_back(std::move(n));
    }
  }
  if (after_prune) {
    for (uint32_t j = 0; j < info_.nodes; ++j) sn->nodes[j].segments_deleted = r.deleted[j];
  }
  // What the tools do not read back (ParseClusterInfo), written again.
  if (rt_.wal_retention != WalRetention::kKeep) {
    info->wal_retention = WalRetentionName(rt_.wal_retention);
    info->first_segment.assign(info_.nodes, 0);
    for (uint32_t j = 0; j < info_.nodes; ++j) {
      auto segs = walfmt::ListSegments(walfmt::JoinPath(popt_.dir, info_.node_wal_dirs[j]), nullptr);
      if (segs.ok() && !segs->empty()) info->first_segment[j] = segs->front().index;
    }
  }
  walfmt::ClusterRunRecord run;
  run.segment_bytes = rt_.segment_bytes;
  return walfmt::WriteClusterJson(popt_.dir, *info, run);
}

// ---- every node

void Process::OnPause(uint32_t from, const wire::SnapshotStep& s) {
  paused_ = true;
  paused_by_ = from;
  paused_round_ = s.round;
  pause_deadline_ = std::chrono::steady_clock::now() + kPauseTimeout;
  CheckDrained(s.round);
}

void Process::CheckDrained(uint64_t round) {
  if (!paused_ || paused_round_ != round) return;
  if (std::chrono::steady_clock::now() >= pause_deadline_) {
    return Unpause(fmt::format("paused for {} s without a resume", kPauseTimeout.count()));
  }
  if (node_.near_in_flight() == 0) {
    wire::SnapshotStep d;
    d.step = wire::SnapStep::kDrained;
    d.round = round;
    return SendStep(paused_by_, std::move(d));
  }
  PostLocal(popt_.node, 0, kDrainPollUs, [this, round] { CheckDrained(round); });
}

void Process::OnTake(uint32_t from, const wire::SnapshotStep& s) {
  wire::SnapshotStep a;
  a.round = s.round;
  if (!paused_ || paused_round_ != s.round) {
    a.step = wire::SnapStep::kFailed;
    a.error = fmt::format("asked to take snapshot {} while not paused for it", s.name);
    return SendStep(from, std::move(a));
  }
  if (!node_.Idle() || node_.cut_active()) {
    a.step = wire::SnapStep::kBusy;
    return SendStep(from, std::move(a));
  }
  const std::string path = fmt::format("{}/node-{}.snap", SnapshotDir(popt_.dir, s.name), popt_.node);
  std::error_code ec;
  std::filesystem::create_directories(SnapshotDir(popt_.dir, s.name), ec);
  Status st = node_.TakeSnapshot(s.name, path, info_.cluster_id, a.at, a.fingerprint);
  // The SNAPSHOT record is on disk before anyone is told it is taken.
  if (st.ok()) st = node_.FlushWal();
  if (!st.ok()) {
    a.step = wire::SnapStep::kFailed;
    a.error = st.message();
    SendStep(from, std::move(a));
    return Fail(st);
  }
  took_round_ = s.round;
  took_at_ = a.at;
  a.step = wire::SnapStep::kTaken;
  SendStep(from, std::move(a));
}

void Process::OnResume(uint32_t from, const wire::SnapshotStep& s) {
  wire::SnapshotStep a;
  a.step = wire::SnapStep::kPruned;
  a.round = s.round;
  if (paused_ && paused_round_ == s.round) Unpause("");
  if (s.prune && took_round_ == s.round) {
    const std::string wal_dir = walfmt::JoinPath(popt_.dir, info_.node_wal_dirs.at(popt_.node));
    if (Status st = node_.PruneWal(wal_dir, took_at_.segment, a.deleted, a.deleted_bytes); !st.ok()) {
      a.step = wire::SnapStep::kFailed;
      a.error = st.message();
    } else if (a.deleted > 0) {
      sum_.segments_deleted += a.deleted;
      Log(fmt::format("full snapshot {}: deleted {} WAL segments ({} bytes)", s.name, a.deleted, a.deleted_bytes));
    }
  }
  SendStep(from, std::move(a));
}

// Client transactions held while paused start now, in the order they came.
void Process::Unpause(const std::string& why) {
  if (!paused_) return;
  paused_ = false;
  paused_round_ = 0;
  if (!why.empty()) Log(fmt::format("resuming transactions: {}", why));
  auto held = std::move(held_txs_);
  held_txs_.clear();
  for (auto& [conn, req] : held) {
    if (auto c = conn.lock()) OnClientTx(c, req);
  }
}

void Process::SnapshotPeerDown(uint32_t j) {
  if (snap_) EndSnapshot(fmt::format("node {} went down", j));
  if (paused_ && paused_by_ == j) Unpause(fmt::format("node {}, which paused them for a full snapshot, went down", j));
}

void Process::ScheduleFullSnapshot() {
  if (rt_.full_snapshot_every_us == 0 || stopping_) return;
  full_timer_.expires_after(std::chrono::microseconds(rt_.full_snapshot_every_us));
  full_timer_.async_wait([this](const std::error_code& ec) {
    if (ec || stopping_ || draining_) return;
    if (SnapshotRefusal().empty()) StartSnapshot("", std::weak_ptr<Conn>());
    ScheduleFullSnapshot();
  });
}

}  // namespace detail
}  // namespace walcut::node
