// Internal to the cut scan: the Scanner behind ScanNode, NodeScan and
// SummaryBuilder (cut/scan.h). The per-record path (Visit and what it calls on
// TX_DATA, TX_PREPARE, TX_COMMIT and TX_ROLLBACK) is defined here, inline,
// and used by cut/scan.cpp only; the cut records' handlers are in
// cut/scan_cuts.cpp, the rest of the scan in cut/scan.cpp. The commit ring
// and the first-cut digests are cut/scan_ring.h and cut/scan_digest.h.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cut/scan.h"
#include "cut/scan_digest.h"
#include "cut/scan_ring.h"
#include "cut/summary.h"
#include "cut/tx_window.h"
#include "walfmt/bytes.h"
#include "walfmt/reader.h"

namespace walcut::cut::scan {

using walfmt::RecordType;
using walfmt::RecordView;

class Scanner {
 public:
  Scanner(const ScanOptions& opt, NodeSummary& s)
      : opt_(opt),
        s_(s),
        window_(kWindowSlots, opt.finished_window, kWindows),
        ring_(opt.recent_commits),
        clean_(!opt.wal_after_genesis),
        digests_(s, opt.node) {}

  // NodeScan learns from the segment list, after construction, that the WAL
  // starts after genesis.
  void StartAfterGenesis() { clean_ = false; }

  // The hot path: TX_DATA, TX_PREPARE, TX_COMMIT and TX_ROLLBACK are read in
  // place; every other record (a few per cut) is decoded in full. Visit only
  // dispatches, to functions of their own: it saves no registers and jumps
  // straight into the one that does the work.
  [[gnu::always_inline]] bool Visit(const RecordView& v) {
    const auto type = v.type;
    if (type == RecordType::kTxData || type == RecordType::kTxPrepare) {
      // A participant writes TX_PREPARE right after its TX_DATA: the second
      // record of the pair needs no call.
      TxId t;
      if (have_last_ && walfmt::PeekTxId(v.payload, t) && t == last_in_flight_) return true;
      return VisitStart(v);
    }
    if (type == RecordType::kTxCommit) return VisitCommit(v);
    if (type == RecordType::kTxRollback) return VisitRollback(v);
    // The reader visits no record of another type; nothing to say about one.
    if (type > RecordType::kNodeStart || type == RecordType::kInvalid) return true;
    return VisitDecoded(v);
  }

  // TX_DATA or TX_PREPARE: only the transaction id matters here, it is in
  // flight from now on.
  [[gnu::noinline]] bool VisitStart(const RecordView& v);
  [[gnu::noinline]] bool VisitCommit(const RecordView& v);
  [[gnu::noinline]] bool VisitRollback(const RecordView& v);

  // The common TX_COMMIT (a few participants), decoded in place by
  // walfmt::ParseTxOutcome; false sends the record to FastOutcome, which
  // takes any number of participants.
  [[gnu::always_inline]] bool FastCommit(const RecordView& v) {
    walfmt::TxOutcomeView o;
    if (!walfmt::ParseTxOutcome(RecordType::kTxCommit, v.payload, o)) return false;
    const size_t count = o.participant_count();
    if (count > kInlineParticipants) return false;
    have_last_ = false;  // the transaction leaves the table now
    // The same loop builds the set of participants as a bit mask, good when
    // they are all below kSetPeers and distinct (as many bits as participants).
    InlineParts parts{};
    uint32_t set = 0;
    uint32_t over = 0;
    for (size_t i = 0; i < count; ++i) {
      const uint32_t q = o.participant(i);
      parts[i] = q;
      set |= kSetBit[q & (kSetPeers - 1)];  // a load: a shift by a variable costs more without BMI2
      over |= q;
    }
    const bool as_set = over < kSetPeers && kSetSize[set] == count;
    OnCommit(o.tx, o.marker, o.time_us, o.flags, std::span<const uint32_t>(parts.data(), count), v.lsn, &parts,
             as_set ? set : kNoSet);
    return true;
  }

  // Anything the hot path does not read in place: DecodePayload says what is
  // wrong with it, or it is a cut, snapshot or node record.
  [[gnu::noinline]] bool VisitDecoded(const RecordView& v);

  // TX_COMMIT or TX_ROLLBACK with any number of participants, decoded by
  // walfmt::ParseTxOutcome into a reused buffer; false on anything
  // DecodePayload would reject.
  bool FastOutcome(const RecordView& v);

  // Records and bytes are not counted here, per record: NodeScan takes them
  // from the reader's segment results, SummaryBuilder counts its own.
  void Finish();

  // ScanOptions::settle_cut: false once the scan may stop. Cheap until the
  // node has started a cut after the settled one; then the conditions are
  // checked now and then, less often each time they do not hold yet.
  bool KeepReading() {
    if (!past_settle_) [[likely]]
      return true;
    if (--until_settle_check_ != 0) return true;
    if (SettledNow()) {
      settled_ = true;
      return false;
    }
    settle_every_ = std::min<uint64_t>(settle_every_ * 2, kSettleEveryMax);
    until_settle_check_ = settle_every_;
    return true;
  }

 private:
  // Everything the whole WAL would say about cut K = settle_cut and the cuts
  // before it is known (see ScanOptions::settle_cut); called once the node
  // has started a later cut.
  [[gnu::noinline]] bool SettledNow();

  bool Bad(const RecordView& v, const std::string& what);
  [[gnu::noinline]] void Sample(Lsn at);
  // A transaction in flight at the end of the WAL, begun after the node's
  // last NODE_START, long enough before the end: an atomicity finding.
  void OverdueOutcomes();
  void Add(Finding f);
  Finding Make(Check check, uint64_t cut, Lsn at, const TxId* tx, std::string message);

  void InFlight(const TxId& t, Lsn at) {
    if (window_.Start(t, at) && window_.size() > peak_in_flight_) [[unlikely]]
      NewPeak();
    last_in_flight_ = t;
    have_last_ = true;
  }

  uint64_t CurrentCut() const { return have_start_ ? last_start_ : 0; }

  // The ring keeps the last max(recent_commits, 4 x peak in flight) commits
  // and rollbacks.
  [[gnu::noinline]] void NewPeak();

  // Counts a committed transaction in the bucket of its first cut f
  // (FirstCutDigests::Count), and as a witness.
  [[gnu::always_inline]] void Count(const TxId& t, std::span<const uint32_t> parts, uint64_t f, uint32_t set) {
    digests_.Count(t, parts, f, set);
    if (opt_.witness_peer) [[unlikely]]
      Witness(t, parts, f, +1);
  }
  void Witness(const TxId& t, std::span<const uint32_t> parts, uint64_t f, int sign);
  // Adds (sign +1) or removes (-1) a committed transaction from the bucket of
  // its first cut f, in the summary's maps (MoveBucket: a tracked transaction
  // whose first cut the cut's sets decide).
  void Bucket(const TxId& t, std::span<const uint32_t> parts, uint64_t f, int sign);
  void MoveBucket(const TxId& t, Done& d, uint64_t f);

  [[gnu::always_inline]] void OnCommit(const TxId& tx, uint64_t marker, uint64_t time_us, uint16_t flags,
                                       std::span<const uint32_t> parts, Lsn at, const InlineParts* whole = nullptr,
                                       uint32_t set = kNoSet) {
    ++commits_;
    const bool recovered = (flags & walfmt::kTxFlagRecovered) != 0;
    recovered_commits_ += recovered;
    Lsn first = at;
    if (!window_.End(tx, at, false, first)) [[unlikely]] {
      if (!CommitNotInFlight(tx, at)) return;
      window_.Remember(tx, at, false);
      if (!clean_) first = kFirstSeenPruned;
    }
    ++commits_so_far_;
    last_time_us_ = std::max(last_time_us_, time_us);
    if (--until_sample_ == 0) [[unlikely]]
      Sample(at);
    const uint64_t k = CurrentCut();
    const uint64_t f = k + 1;
    Count(tx, parts, f, set);
    // Usually no cut is open and the marker is the node's current cut.
    if (open_ >= 0 || marker != k) [[unlikely]]
      CommitNearCut(tx, marker, time_us, recovered, parts, at, first);
    ring_.Remember(tx, at, first, time_us, marker, f, recovered, false, parts, whole);
  }

  // A commit whose transaction is not in flight here: it had no TX_DATA on
  // this node, or it already finished once. False: not to be counted again.
  [[gnu::noinline]] bool CommitNotInFlight(const TxId& tx, Lsn at);

  // A commit while a cut is open here, or with a marker other than the
  // node's current cut: what the cut's sets must later say about it.
  [[gnu::noinline]] void CommitNearCut(const TxId& tx, uint64_t marker, uint64_t time_us, bool recovered,
                                       std::span<const uint32_t> parts, Lsn at, Lsn first);

  void OnRollback(const TxId& tx, uint64_t time_us, uint16_t flags, std::span<const uint32_t> parts, Lsn at);
  void RollbackAfterCommit(const TxId& tx, Lsn at, Lsn commit);

  static Done MakeDone(Lsn at, Lsn first, uint64_t time_us, uint64_t marker, uint64_t f, bool recovered,
                       bool rolled_back, std::span<const uint32_t> parts) {
    return Done{at, first, time_us, marker, f, recovered, rolled_back, Participants(parts)};
  }

  // The cut records and the other records read in full (cut/scan_cuts.cpp).
  int FindIndex(uint64_t k) const;
  void CloseOpen();
  void On(const walfmt::CutStart& cs, Lsn at);
  void On(const walfmt::CutFinish& cf, Lsn at);
  // CUT_FINISH(k) of a cut that is not the one open here.
  void FinishNotOpen(const walfmt::CutFinish& cf, Lsn at, int idx);
  // The marker checks of the open cut at its CUT_FINISH.
  void CheckMarkersAtFinish(const NodeCut& nc, const TxSet& before, const TxSet& after);
  void RelabelPrunedPrefix(uint64_t c);
  TrackedTx Resolve(const NodeCut& nc, const TxId& t, bool is_before, Lsn finish_at);
  // Resolve's shape finding for a tracked transaction with no outcome here.
  void Unresolved(const NodeCut& nc, const TxId& t, const char* set, Lsn finish_at);
  void On(const walfmt::CutAbort& a, Lsn at);
  void On(const walfmt::Snapshot& sn, Lsn at);
  void On(const walfmt::NodeStart& n, Lsn at);
  void On(const walfmt::TxData&, Lsn) {}
  void On(const walfmt::TxPrepare& p, Lsn at) { InFlight(p.tx, at); }
  void On(const walfmt::TxCommit& c, Lsn at) {
    have_last_ = false;
    OnCommit(c.tx, c.marker, c.time_us, c.flags, c.participants, at);
  }
  void On(const walfmt::TxRollback& r, Lsn at) {
    have_last_ = false;
    OnRollback(r.tx, r.time_us, r.flags, r.participants, at);
  }

  const ScanOptions& opt_;
  NodeSummary& s_;
  // TxWindow: 1024 slots per coordinator (32 KB), for at most 8 coordinators
  // per node scan (256 KB); others use its hash table.
  static constexpr size_t kWindowSlots = 1024;
  static constexpr size_t kWindows = 8;

  uint64_t commits_ = 0;
  uint64_t recovered_commits_ = 0;
  uint64_t peak_in_flight_ = 0;
  TxWindow window_;      // in flight (first TX_DATA / TX_PREPARE) and where recent ones finished
  TxId last_in_flight_;  // the transaction InFlight last put in the table (while have_last_)
  bool have_last_ = false;
  CommitRing ring_;  // the last commits and rollbacks
  bool have_start_ = false;
  uint64_t last_start_ = 0;  // id of the last CUT_START
  uint64_t commits_so_far_ = 0;
  // settle_cut: the node started a cut after it; records until the next
  // check, the current interval, and whether the scan stopped settled.
  bool past_settle_ = false;
  uint64_t until_settle_check_ = 0;
  uint64_t settle_every_ = 256;
  static constexpr uint64_t kSettleEveryMax = 16384;
  bool settled_ = false;
  // False while a transaction finishing here may have begun before the
  // first segment present (a WAL that starts after genesis, until a full
  // snapshot or a finished cut shows that everything in flight is in view).
  bool clean_ = true;
  bool open_unclean_ = false;                     // the open cut started while !clean_
  int open_ = -1;                                 // index in s_.cuts of the cut running here
  TxSet candidates_;                              // in flight when the open cut started
  TxMap<Done> pending_;                           // candidates finished since
  TxMap<Done> pre_start_;                         // the ring of recent commits as CUT_START of the open cut found it
  TxMap<Done> expect_before_;                     // committed since CUT_START of the open cut with marker < its id
  std::map<uint64_t, TxMap<Done>> expect_after_;  // cut id -> committed before its CUT_START with marker == id
  TxMap<uint64_t> witness_;
  // Cluster time as the WAL goes: the latest time of a commit or rollback,
  // and samples (position, that time) every timeline_every_ commits, thinned
  // to at most kTimelineMax (OverdueOutcomes).
  uint64_t last_time_us_ = 0;
  std::vector<std::pair<Lsn, uint64_t>> timeline_;
  uint64_t timeline_every_ = 64;
  uint64_t until_sample_ = 64;  // commits until the next sample
  static constexpr size_t kTimelineMax = 4096;
  bool have_node_start_ = false;
  Lsn last_node_start_;          // the node's last NODE_START
  std::vector<uint32_t> parts_;  // participants of the record being read
  FirstCutDigests digests_;      // counts and digests by first cut
};

}  // namespace walcut::cut::scan
