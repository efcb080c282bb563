#include "cut/scan.h"

#include <algorithm>
#include <array>
#include <filesystem>
#include <span>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "cut/tx_table.h"
#include "cut/tx_window.h"
#include "walfmt/bytes.h"
#include "walfmt/reader.h"

namespace walcut::cut {
namespace {

using walfmt::RecordType;
using walfmt::RecordView;
using walfmt::TxIdHash;

// A transaction's participants: a few inline (the common case, copied on
// every commit into the ring of recent commits without allocating), more on
// the heap.
constexpr uint32_t kInlineParticipants = 6;
using InlineParts = std::array<uint32_t, kInlineParticipants>;
// Commits whose participants are all below kSetPeers are counted by their
// set of participants, a bit mask (Scanner::Count); kNoSet: counted one by one.
constexpr uint32_t kSetPeers = 8;
constexpr uint32_t kNoSet = ~uint32_t{0};
constexpr std::array<uint32_t, kSetPeers> kSetBit{1, 2, 4, 8, 16, 32, 64, 128};
// Bits set in each mask below 2^kSetPeers (no popcnt instruction on baseline x86-64).
constexpr std::array<uint8_t, size_t{1} << kSetPeers> kSetSize = [] {
  std::array<uint8_t, size_t{1} << kSetPeers> a{};
  for (size_t m = 1; m < a.size(); ++m) a[m] = static_cast<uint8_t>(a[m >> 1] + (m & 1));
  return a;
}();

class Participants {
 public:
  Participants() = default;
  explicit Participants(std::span<const uint32_t> p) { assign(p); }
  void assign(std::span<const uint32_t> p) {
    n_ = static_cast<uint32_t>(p.size());
    if (n_ <= kInline) {
      std::copy(p.begin(), p.end(), inline_.begin());
    } else {
      more_.assign(p.begin(), p.end());
    }
  }
  operator std::span<const uint32_t>() const {
    return n_ <= kInline ? std::span<const uint32_t>(inline_.data(), n_) : std::span<const uint32_t>(more_);
  }

 private:
  static constexpr uint32_t kInline = kInlineParticipants;
  uint32_t n_ = 0;
  std::array<uint32_t, kInline> inline_{};
  std::vector<uint32_t> more_;
};

// What the scan remembers about a finished transaction while a cut may still
// ask about it.
struct Done {
  Lsn at;
  Lsn first_seen;
  uint64_t time_us = 0;
  uint64_t marker = 0;
  uint64_t f = 0;  // first cut, as currently known
  bool recovered = false;
  bool rolled_back = false;
  Participants participants;
};

// One entry of the ring of recent commits and rollbacks: written on every
// commit, so it holds the participants inline (more live in the scanner's
// ring_more_) and no pointer to free.
struct RingEntry {
  TxId tx;
  Lsn at;
  Lsn first_seen;
  uint64_t time_us = 0;
  uint64_t marker = 0;
  uint64_t f = 0;
  uint32_t parts_count = 0;
  bool recovered = false;
  bool rolled_back = false;
  InlineParts parts{};
};

template <typename V>
using TxMap = std::unordered_map<TxId, V, TxIdHash>;
using TxSet = std::unordered_set<TxId, TxIdHash>;

class Scanner {
 public:
  Scanner(const ScanOptions& opt, NodeSummary& s)
      : opt_(opt), s_(s), window_(kWindowSlots, opt.finished_window, kWindows), clean_(!opt.wal_after_genesis) {}

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
  [[gnu::noinline]] bool VisitStart(const RecordView& v) {
    TxId t;
    if (walfmt::PeekTxId(v.payload, t)) [[likely]] {
      InFlight(t, v.lsn);
      return true;
    }
    if (v.type == RecordType::kTxData) return Bad(v, "TX_DATA payload shorter than a transaction id");
    return VisitDecoded(v);
  }

  [[gnu::noinline]] bool VisitCommit(const RecordView& v) {
    if (FastCommit(v)) [[likely]]
      return true;
    if (FastOutcome(v)) return true;
    return VisitDecoded(v);
  }

  [[gnu::noinline]] bool VisitRollback(const RecordView& v) {
    if (FastOutcome(v)) [[likely]]
      return true;
    return VisitDecoded(v);
  }

  // The common TX_COMMIT (a few participants), decoded in place by
  // walfmt::ParseTxOutcome; false sends the record to FastOutcome, which
  // takes any number of participants.
  bool FastCommit(const RecordView& v) {
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
  [[gnu::noinline]] bool VisitDecoded(const RecordView& v) {
    auto rec = walfmt::DecodePayload(v.type, v.payload);
    if (!rec.ok()) return Bad(v, rec.status().message());
    std::visit([&](const auto& r) { On(r, v.lsn); }, rec.value());
    return true;
  }

  // TX_COMMIT or TX_ROLLBACK with any number of participants, decoded by
  // walfmt::ParseTxOutcome into a reused buffer; false on anything
  // DecodePayload would reject.
  bool FastOutcome(const RecordView& v) {
    have_last_ = false;  // the transaction may leave the table now
    walfmt::TxOutcomeView o;
    if (!walfmt::ParseTxOutcome(v.type, v.payload, o)) return false;
    parts_.resize(o.participant_count());
    for (size_t i = 0; i < parts_.size(); ++i) parts_[i] = o.participant(i);
    if (v.type == RecordType::kTxCommit) {
      OnCommit(o.tx, o.marker, o.time_us, o.flags, parts_, v.lsn);
    } else {
      OnRollback(o.tx, o.time_us, o.flags, parts_, v.lsn);
    }
    return true;
  }

  // Records and bytes are not counted here, per record: NodeScan takes them
  // from the reader's segment results, SummaryBuilder counts its own.
  void Finish() {
    s_.commits = commits_;
    s_.recovered_commits = recovered_commits_;
    s_.peak_in_flight = peak_in_flight_;
    // Stopped early (settle_cut): a transaction still in flight began after
    // CUT_START of the settled cut and may yet finish; whether it is overdue
    // is a question about later cuts, which this scan does not answer.
    if (settled_) {
      s_.settled_cut = opt_.settle_cut;
    } else if (opt_.outcome_overdue_us != 0) {
      OverdueOutcomes();
    }
    Flush();
    if (open_ >= 0) {
      s_.cuts[open_].end = s_.damaged ? CutEnd::kDamaged : CutEnd::kOpen;
      CloseOpen();
    }
    std::sort(s_.cuts.begin(), s_.cuts.end(), [](const NodeCut& a, const NodeCut& b) { return a.cut_id < b.cut_id; });
    if (opt_.witness_peer) {
      s_.witness.assign(witness_.begin(), witness_.end());
      std::sort(s_.witness.begin(), s_.witness.end());
    }
    // Drop empty buckets left by corrections.
    for (auto it = s_.first_cut.begin(); it != s_.first_cut.end();) {
      it = it->second.count == 0 ? s_.first_cut.erase(it) : std::next(it);
    }
    for (auto& [peer, m] : s_.shared) {
      for (auto it = m.begin(); it != m.end();) it = it->second.n == 0 ? m.erase(it) : std::next(it);
    }
  }

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
  [[gnu::noinline]] bool SettledNow() {
    const uint64_t k = opt_.settle_cut;
    // A transaction that began before CUT_START(K) and never finishes is a
    // finding against K at the end of the WAL (OverdueOutcomes).
    if (const int idx = FindIndex(k); idx >= 0 && s_.cuts[idx].started) {
      const Lsn start = s_.cuts[idx].start;
      bool waiting = false;
      window_.ForEach([&](const TxId&, const Lsn& first) { waiting |= first != kFirstSeenPruned && first < start; });
      if (waiting) return false;
    }
    // A later cut's after set can still move a commit counted in cut K or
    // before (MoveBucket, a monotonicity finding of that cut, but also K's
    // digests): the ring of recent commits, which the next CUT_START copies,
    // and that copy while its cut is open.
    const size_t used = RingUsed();
    for (size_t i = 0; i < used; ++i) {
      if (!ring_[i].rolled_back && ring_[i].f <= k) return false;
    }
    if (open_ >= 0) {
      for (const auto& [t, d] : pre_start_) {
        if (!d.rolled_back && d.f <= k) return false;
      }
    }
    return true;
  }

  bool Bad(const RecordView& v, const std::string& what) {
    Finding f;
    f.check = Check::kWal;
    f.node = opt_.node;
    f.has_position = true;
    f.position = v.lsn;
    f.message = fmt::format("node {}: intact {} record at {} does not decode: {}", opt_.node,
                            walfmt::RecordTypeName(v.type), v.lsn.ToString(), what);
    Add(std::move(f));
    return true;
  }

  [[gnu::noinline]] void Sample(Lsn at) {
    timeline_.emplace_back(at, last_time_us_);
    until_sample_ = timeline_every_;
    if (timeline_.size() < kTimelineMax) return;
    // Keep every other sample and sample half as often: memory stays
    // bounded, each sample still bounds the time of the records before it.
    size_t w = 0;
    for (size_t r = 1; r < timeline_.size(); r += 2) timeline_[w++] = timeline_[r];
    timeline_.resize(w);
    timeline_every_ *= 2;
    until_sample_ = timeline_every_;
  }

  // A transaction in flight at the end of the WAL, begun after the node's
  // last NODE_START (so the node did not crash or restart since), while the
  // WAL went on for more than opt_.outcome_overdue_us of cluster time: the
  // node never wrote its outcome. Its start is bounded from above by the
  // first time sample after its first record, so the time it waited is never
  // overstated.
  void OverdueOutcomes() {
    std::vector<std::pair<Lsn, TxId>> late;
    window_.ForEach([&](const TxId& t, Lsn first) {
      if (first == kFirstSeenPruned || (have_node_start_ && first < last_node_start_)) return;
      auto it = std::lower_bound(timeline_.begin(), timeline_.end(), first,
                                 [](const auto& e, const Lsn& l) { return e.first < l; });
      if (it == timeline_.end() || last_time_us_ - it->second <= opt_.outcome_overdue_us) return;
      late.emplace_back(first, t);
    });
    std::sort(late.begin(), late.end());
    for (const auto& [first, t] : late) {
      auto it = std::lower_bound(timeline_.begin(), timeline_.end(), first,
                                 [](const auto& e, const Lsn& l) { return e.first < l; });
      Add(Make(
          Check::kAtomicity, 0, first, &t,
          fmt::format("node {}: transaction {} began at {} and never finished here: no TX_COMMIT or "
                      "TX_ROLLBACK in the {} us of cluster time the WAL goes on for after it (more than {} us), "
                      "and the node did not restart",
                      opt_.node, t.ToString(), first.ToString(), last_time_us_ - it->second, opt_.outcome_overdue_us)));
    }
  }

  void Add(Finding f) {
    if (s_.findings.size() < opt_.max_findings) {
      s_.findings.push_back(std::move(f));
    } else {
      ++s_.findings_dropped;
    }
  }

  Finding Make(Check check, uint64_t cut, Lsn at, const TxId* tx, std::string message) {
    Finding f;
    f.check = check;
    f.node = opt_.node;
    f.cut = cut;
    f.has_position = true;
    f.position = at;
    if (tx) {
      f.has_tx = true;
      f.tx = *tx;
    }
    f.message = std::move(message);
    return f;
  }

  void InFlight(const TxId& t, Lsn at) {
    if (window_.Start(t, at) && window_.size() > peak_in_flight_) [[unlikely]]
      NewPeak();
    last_in_flight_ = t;
    have_last_ = true;
  }

  uint64_t CurrentCut() const { return have_start_ ? last_start_ : 0; }

  // The ring keeps the last max(recent_commits, 4 x peak in flight) commits
  // and rollbacks.
  [[gnu::noinline]] void NewPeak() {
    peak_in_flight_ = window_.size();
    ResizeRing();
  }
  void ResizeRing() {
    const size_t cap = std::max<size_t>({opt_.recent_commits, 4 * peak_in_flight_, 1});
    if (ring_.size() < cap) ring_.resize(cap);
    ring_cap_ = ring_.size();
  }

  // The last commits and rollbacks, in a ring: written on every commit,
  // searched only when a cut finishes or something looks wrong.
  // `whole`, when not null, holds the participants (up to
  // kInlineParticipants) in its first slots and is copied as a block.
  [[gnu::always_inline]] void Remember(const TxId& t, const Lsn& at, const Lsn& first, uint64_t time_us,
                                       uint64_t marker, uint64_t f, bool recovered, bool rolled_back,
                                       std::span<const uint32_t> parts, const InlineParts* whole = nullptr) {
    if (ring_next_ >= ring_cap_) [[unlikely]] {
      if (ring_.empty()) ResizeRing();
      ring_used_ = std::max(ring_used_, ring_next_);
      ring_next_ = 0;
    }
    RingEntry& e = ring_[ring_next_];
    e.tx = t;
    e.at = at;
    e.first_seen = first;
    e.time_us = time_us;
    e.marker = marker;
    e.f = f;
    e.recovered = recovered;
    e.rolled_back = rolled_back;
    e.parts_count = static_cast<uint32_t>(parts.size());
    if (whole != nullptr) {
      e.parts = *whole;
    } else if (parts.size() <= kInlineParticipants) [[likely]] {
      for (size_t i = 0; i < parts.size(); ++i) e.parts[i] = parts[i];
    } else {
      ring_more_[ring_next_].assign(parts.begin(), parts.end());
    }
    ++ring_next_;
  }
  // Slots of the ring that hold an entry.
  size_t RingUsed() const { return std::max(ring_used_, ring_next_); }
  // The last commits and rollbacks with everything a cut may ask of them.
  RingEntry* Recent(const TxId& t) {
    // Newest first: a transaction id is looked up right after its commit.
    const size_t used = RingUsed();
    for (size_t i = 0; i < used; ++i) {
      const size_t at = (ring_next_ + ring_.size() - 1 - i) % ring_.size();
      if (at < used && ring_[at].tx == t) return &ring_[at];
    }
    return nullptr;
  }
  std::span<const uint32_t> PartsOf(const RingEntry& e) const {
    if (e.parts_count <= kInlineParticipants) return {e.parts.data(), e.parts_count};
    return ring_more_.at(static_cast<size_t>(&e - ring_.data()));
  }
  Done ToDone(const RingEntry& e) const {
    return Done{e.at, e.first_seen, e.time_us, e.marker, e.f, e.recovered, e.rolled_back, Participants(PartsOf(e))};
  }

  // Counts a committed transaction in the bucket of its first cut f. The
  // bucket being filled is kept here (acc_*) and added to the summary's maps
  // by Flush when f changes: a commit costs a hash and a few additions.
  // `set`: the participants as a bit mask (see FastCommit), or kNoSet.
  [[gnu::always_inline]] void Count(const TxId& t, std::span<const uint32_t> parts, uint64_t f, uint32_t set) {
    if (f != acc_f_) [[unlikely]] {
      Flush();
      acc_f_ = f;
    }
    ++acc_count_;
    acc_owned_ += parts.empty() || parts.front() >= node_;
    const uint64_t h = TxHash(t);
    if (set != kNoSet) [[likely]] {
      // One accumulator per set of participants, no loop over them: Flush
      // hands each set's digest to its members.
      acc_set_[set].x ^= h;
      ++acc_set_[set].n;
      if (opt_.witness_peer) [[unlikely]]
        Witness(t, parts, f, +1);
      return;
    }
    // The node's own entry is counted too (no branch on it) and never flushed.
    for (uint32_t p : parts) {
      if (p >= acc_peers_) [[unlikely]] {
        if (p >= kDensePeers) {
          if (p != opt_.node) Digest(p, f, h, +1);
          continue;
        }
        acc_peer_.resize(p + 1);
        acc_peers_ = p + 1;
      }
      acc_peer_[p].x ^= h;
      ++acc_peer_[p].n;
    }
    if (opt_.witness_peer) [[unlikely]]
      Witness(t, parts, f, +1);
  }

  [[gnu::noinline]] void Flush() {
    if (acc_count_ == 0) return;
    for (uint32_t set = 0; set < acc_set_.size(); ++set) {
      TxDigest& a = acc_set_[set];
      if (a.n == 0) continue;
      if (acc_peers_ < kSetPeers) {
        acc_peer_.resize(kSetPeers);
        acc_peers_ = kSetPeers;
      }
      for (uint32_t p = 0; p < kSetPeers; ++p) {
        if ((set >> p & 1) == 0) continue;
        acc_peer_[p].x ^= a.x;
        acc_peer_[p].n += a.n;
      }
      a = TxDigest{};
    }
    auto& fc = s_.first_cut[acc_f_];
    fc.count += acc_count_;
    fc.owned += acc_owned_;
    for (uint32_t p = 0; p < acc_peer_.size(); ++p) {
      TxDigest& a = acc_peer_[p];
      if (p == opt_.node || (a.n == 0 && a.x == 0)) {
        a = TxDigest{};
        continue;
      }
      TxDigest& d = s_.shared[p][acc_f_];
      d.x ^= a.x;
      d.n += a.n;
      a = TxDigest{};
    }
    acc_count_ = 0;
    acc_owned_ = 0;
  }

  void Digest(uint32_t peer, uint64_t f, uint64_t h, int sign) {
    TxDigest& d = s_.shared[peer][f];
    d.x ^= h;
    d.n += static_cast<uint64_t>(sign);
  }

  void Witness(const TxId& t, std::span<const uint32_t> parts, uint64_t f, int sign) {
    if (!std::binary_search(parts.begin(), parts.end(), *opt_.witness_peer)) return;
    if (sign > 0) {
      witness_[t] = f;
    } else {
      witness_.erase(t);
    }
  }

  // Adds (sign +1) or removes (-1) a committed transaction from the bucket of
  // its first cut f, in the summary's maps (MoveBucket: a tracked transaction
  // whose first cut the cut's sets decide).
  void Bucket(const TxId& t, std::span<const uint32_t> parts, uint64_t f, int sign) {
    auto& fc = s_.first_cut[f];
    const bool owned = parts.empty() || parts.front() >= opt_.node;
    fc.count += static_cast<uint64_t>(sign);
    if (owned) fc.owned += static_cast<uint64_t>(sign);
    const uint64_t h = TxHash(t);
    for (uint32_t p : parts) {
      if (p != opt_.node) Digest(p, f, h, sign);
    }
    if (opt_.witness_peer) Witness(t, parts, f, sign);
  }

  void MoveBucket(const TxId& t, Done& d, uint64_t f) {
    if (d.f == f) return;
    Bucket(t, d.participants, d.f, -1);
    Bucket(t, d.participants, f, +1);
    d.f = f;
    if (RingEntry* r = Recent(t)) r->f = f;
    if (auto it = pre_start_.find(t); it != pre_start_.end()) it->second.f = f;
    if (auto it = pending_.find(t); it != pending_.end()) it->second.f = f;
  }

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
    Remember(tx, at, first, time_us, marker, f, recovered, false, parts, whole);
  }

  // A commit whose transaction is not in flight here: it had no TX_DATA on
  // this node, or it already finished once. False: not to be counted again.
  [[gnu::noinline]] bool CommitNotInFlight(const TxId& tx, Lsn at) {
    const auto prev = window_.LastFinish(tx);
    if (!prev) return true;
    if (prev->rolled_back) {
      Add(Make(Check::kRollback, 0, at, &tx,
               fmt::format("node {}: transaction {} committed at {} after its TX_ROLLBACK at {}", opt_.node,
                           tx.ToString(), at.ToString(), prev->at.ToString())));
      return true;
    }
    Add(Make(Check::kShape, 0, at, &tx,
             fmt::format("node {}: transaction {} committed twice, at {} and at {}", opt_.node, tx.ToString(),
                         prev->at.ToString(), at.ToString())));
    return false;
  }

  // A commit while a cut is open here, or with a marker other than the
  // node's current cut: what the cut's sets must later say about it.
  [[gnu::noinline]] void CommitNearCut(const TxId& tx, uint64_t marker, uint64_t time_us, bool recovered,
                                       std::span<const uint32_t> parts, Lsn at, Lsn first) {
    const uint64_t k = CurrentCut();
    const uint64_t f = k + 1;
    if (open_ >= 0 && (candidates_.count(tx) || first == kFirstSeenPruned)) {
      pending_[tx] = MakeDone(at, first, time_us, marker, f, recovered, false, parts);
    }
    if (have_start_ && marker < k) {
      if (open_ >= 0) {
        expect_before_[tx] = MakeDone(at, first, time_us, marker, f, recovered, false, parts);
      } else {
        Add(Make(Check::kMarker, k, at, &tx,
                 fmt::format("node {}: transaction {} committed at {}, after cut {} ended here, with marker {} < {}: "
                             "the marker puts it in cut {}, its position does not",
                             opt_.node, tx.ToString(), at.ToString(), k, marker, k, k)));
      }
    } else if (marker == k + 1) {
      expect_after_[k + 1][tx] = MakeDone(at, first, time_us, marker, f, recovered, false, parts);
    } else if (marker > k + 1 && (have_start_ || !opt_.wal_after_genesis)) {
      Add(Make(Check::kMarker, k + 1, at, &tx,
               fmt::format("node {}: transaction {} committed at {} with marker {}, but the node had only reached cut "
                           "{}: no cut can place it consistently",
                           opt_.node, tx.ToString(), at.ToString(), marker, k)));
    }
  }

  void OnRollback(const TxId& tx, uint64_t time_us, uint16_t flags, std::span<const uint32_t> parts, Lsn at) {
    ++s_.rollbacks;
    last_time_us_ = std::max(last_time_us_, time_us);
    Lsn first = at;
    if (!window_.End(tx, at, true, first)) {
      if (const auto prev = window_.LastFinish(tx); prev && !prev->rolled_back) {
        Add(Make(Check::kRollback, 0, at, &tx,
                 fmt::format("node {}: transaction {} rolled back at {} after its TX_COMMIT at {}", opt_.node,
                             tx.ToString(), at.ToString(), prev->at.ToString())));
        return;
      }
      window_.Remember(tx, at, true);
      if (!clean_) first = kFirstSeenPruned;
    }
    const bool recovered = (flags & walfmt::kTxFlagRecovered) != 0;
    if (open_ >= 0 && (candidates_.count(tx) || first == kFirstSeenPruned)) {
      pending_[tx] = MakeDone(at, first, time_us, 0, 0, recovered, true, parts);
    }
    Remember(tx, at, first, time_us, 0, 0, recovered, true, parts);
  }

  static Done MakeDone(Lsn at, Lsn first, uint64_t time_us, uint64_t marker, uint64_t f, bool recovered,
                       bool rolled_back, std::span<const uint32_t> parts) {
    return Done{at, first, time_us, marker, f, recovered, rolled_back, Participants(parts)};
  }

  int FindIndex(uint64_t k) const {
    for (size_t i = s_.cuts.size(); i-- > 0;) {
      if (s_.cuts[i].cut_id == k) return static_cast<int>(i);
    }
    return -1;
  }

  void CloseOpen() {
    open_ = -1;
    candidates_.clear();
    pending_.clear();
    pre_start_.clear();
    expect_before_.clear();
  }

  void On(const walfmt::CutStart& cs, Lsn at) {
    if (open_ >= 0) {
      s_.cuts[open_].end = CutEnd::kSuperseded;
      CloseOpen();
    }
    if (FindIndex(cs.cut_id) >= 0 || (have_start_ && cs.cut_id <= last_start_)) {
      Add(Make(Check::kShape, cs.cut_id, at, nullptr,
               fmt::format("node {}: CUT_START({}) at {} after CUT_START({}): cut ids must increase", opt_.node,
                           cs.cut_id, at.ToString(), last_start_)));
      return;
    }
    if (!have_start_ && opt_.wal_after_genesis) RelabelPrunedPrefix(cs.cut_id);
    // Cuts this node skipped (it was down) can no longer be asked about.
    for (auto it = expect_after_.begin(); it != expect_after_.end();) {
      it = it->first < cs.cut_id ? expect_after_.erase(it) : std::next(it);
    }
    NodeCut nc;
    nc.cut_id = cs.cut_id;
    nc.started = true;
    nc.start = at;
    nc.start_time_us = cs.time_us;
    nc.commits_before_start = commits_so_far_;
    s_.cuts.push_back(std::move(nc));
    open_ = static_cast<int>(s_.cuts.size()) - 1;
    open_unclean_ = !clean_;
    candidates_.clear();
    window_.ForEach([&](const TxId& t, const Lsn&) { candidates_.insert(t); });
    // The commits just before CUT_START, oldest first so that the newest of
    // a transaction's wins: rule 5 lets some of them be tracked.
    pre_start_.clear();
    const size_t used = RingUsed();
    for (size_t i = used; i-- > 0;) {
      const size_t slot = (ring_next_ + ring_.size() - 1 - i) % ring_.size();
      if (slot < used) pre_start_[ring_[slot].tx] = ToDone(ring_[slot]);
    }
    have_start_ = true;
    last_start_ = cs.cut_id;
    if (opt_.settle_cut != 0 && cs.cut_id > opt_.settle_cut && !past_settle_) {
      past_settle_ = true;
      until_settle_check_ = 1;  // checked right after this record
    }
  }

  void On(const walfmt::CutFinish& cf, Lsn at) {
    const uint64_t k = cf.cut_id;
    const int idx = FindIndex(k);
    if (idx < 0 || idx != open_) {
      // Before the first CUT_START of a WAL that starts after genesis, the
      // cut's start was in a removed segment.
      const bool pruned = idx < 0 && !have_start_ && opt_.wal_after_genesis;
      std::string why = idx < 0 ? "without a CUT_START" : "after the cut had ended here";
      if (!pruned) {
        Add(Make(Check::kShape, k, at, nullptr,
                 fmt::format("node {}: CUT_FINISH({}) at {} {}", opt_.node, k, at.ToString(), why)));
      }
      if (idx < 0) {
        NodeCut nc;
        nc.cut_id = k;
        nc.finished = true;
        nc.finish = at;
        nc.finish_time_us = cf.time_us;
        for (const auto& t : cf.before) {
          TrackedTx x;
          x.tx = t;
          nc.before.push_back(x);
        }
        for (const auto& t : cf.after) {
          TrackedTx x;
          x.tx = t;
          nc.after.push_back(x);
        }
        nc.end = CutEnd::kNotStarted;
        nc.evidence_pruned = pruned;
        s_.cuts.push_back(std::move(nc));
      }
      return;
    }
    NodeCut& nc = s_.cuts[idx];
    nc.finished = true;
    nc.finish = at;
    nc.finish_time_us = cf.time_us;
    nc.commits_before_finish = commits_so_far_;
    const TxSet before(cf.before.begin(), cf.before.end());
    const TxSet after(cf.after.begin(), cf.after.end());
    for (const auto& t : cf.before) {
      if (after.count(t)) {
        Add(Make(Check::kShape, k, at, &t,
                 fmt::format("node {}: transaction {} is in both before({}) and after({}) of CUT_FINISH at {}",
                             opt_.node, t.ToString(), k, k, at.ToString())));
      }
    }
    for (int side = 0; side < 2; ++side) {
      const bool is_before = side == 0;
      const auto& list = is_before ? cf.before : cf.after;
      auto& out = is_before ? nc.before : nc.after;
      out.reserve(list.size());
      for (const auto& t : list) out.push_back(Resolve(nc, t, is_before, at));
    }
    for (const auto& [t, d] : expect_before_) {
      if (before.count(t)) continue;
      Add(Make(Check::kMarker, k, d.at, &t,
               fmt::format("node {}: transaction {} committed at {} after CUT_START({}) with marker {} < {} but is "
                           "not in before({}): the marker puts it in the cut, the WAL does not",
                           opt_.node, t.ToString(), d.at.ToString(), k, d.marker, k, k)));
    }
    if (auto ea = expect_after_.find(k); ea != expect_after_.end()) {
      for (const auto& [t, d] : ea->second) {
        if (after.count(t) || d.at > nc.start) continue;
        Add(Make(Check::kMarker, k, d.at, &t,
                 fmt::format("node {}: transaction {} committed at {} before CUT_START({}) with marker {} >= {} but "
                             "is not in after({}): the WAL puts it in the cut, the marker does not",
                             opt_.node, t.ToString(), d.at.ToString(), k, d.marker, k, k)));
      }
      expect_after_.erase(ea);
    }
    nc.end = nc.aborts.empty() ? CutEnd::kFinished : CutEnd::kAborted;
    for (const auto& list : {&nc.before, &nc.after}) {
      for (const auto& t : *list) nc.evidence_pruned |= t.first_seen == kFirstSeenPruned;
    }
    // Every transaction prepared here before this cut's CUT_START was
    // tracked and has finished: from now on each one seen began in view.
    if (nc.end == CutEnd::kFinished) clean_ = true;
    CloseOpen();
  }

  // The first CUT_START(c) of a WAL that starts after genesis: the commits
  // before it were counted in bucket 1 (the node's cut was unknown); their
  // first cut is at most c, which is all a check against a base at or after
  // c needs, so they move to bucket c.
  void RelabelPrunedPrefix(uint64_t c) {
    Flush();
    if (c <= 1) return;
    if (auto it = s_.first_cut.find(1); it != s_.first_cut.end()) {
      FirstCutCount& to = s_.first_cut[c];
      to.count += it->second.count;
      to.owned += it->second.owned;
      s_.first_cut.erase(1);
    }
    for (auto& [peer, m] : s_.shared) {
      if (auto it = m.find(1); it != m.end()) {
        TxDigest& to = m[c];
        to.x ^= it->second.x;
        to.n += it->second.n;
        m.erase(1);
      }
    }
    for (size_t i = 0; i < RingUsed(); ++i) {
      if (ring_[i].f == 1) ring_[i].f = c;
    }
    for (auto& [t, f] : witness_) {
      if (f == 1) f = c;
    }
  }

  // Finds the outcome of tracked transaction t of cut nc on this node, checks
  // it (shape, rollback, marker) and moves it to its right first-cut bucket.
  TrackedTx Resolve(const NodeCut& nc, const TxId& t, bool is_before, Lsn finish_at) {
    const uint64_t k = nc.cut_id;
    const char* set = is_before ? "before" : "after";
    TrackedTx out;
    out.tx = t;
    Done* d = nullptr;
    if (auto it = pending_.find(t); it != pending_.end()) {
      d = &it->second;
    } else if (auto it = pre_start_.find(t); it != pre_start_.end()) {
      d = &it->second;
    }
    if (!d && open_unclean_ && !window_.Find(t) && !candidates_.count(t)) {
      // Prepared before the first segment present: its records are gone.
      out.first_seen = kFirstSeenPruned;
      return out;
    }
    if (!d) {
      std::string why;
      if (window_.Find(t)) {
        why = fmt::format("has not finished on node {} when CUT_FINISH({}) is written at {}", opt_.node, k,
                          finish_at.ToString());
      } else if (!candidates_.count(t)) {
        why = fmt::format("was not prepared on node {} before CUT_START({}) at {}", opt_.node, k, nc.start.ToString());
      } else {
        why = fmt::format("has no TX_COMMIT or TX_ROLLBACK on node {} before CUT_FINISH({}) at {}", opt_.node, k,
                          finish_at.ToString());
      }
      Add(Make(Check::kShape, k, finish_at, &t,
               fmt::format("node {}: tracked transaction {} in {}({}) {}", opt_.node, t.ToString(), set, k, why)));
      return out;
    }
    out.commit = d->at;
    out.first_seen = d->first_seen;
    out.time_us = d->time_us;
    out.recovered = d->recovered;
    if (d->rolled_back) {
      out.rolled_back = true;
      Add(Make(Check::kRollback, k, d->at, &t,
               fmt::format("node {}: transaction {} rolled back at {} but listed in {}({}) of CUT_FINISH at {}",
                           opt_.node, t.ToString(), d->at.ToString(), set, k, finish_at.ToString())));
      return out;
    }
    out.committed = true;
    out.marker = d->marker;
    const bool marker_in = d->marker < k;
    if (marker_in != is_before) {
      Finding f = Make(Check::kMarker, k, d->at, &t,
                       fmt::format("node {}: transaction {} is in {}({}) but its marker is {} ({} {}): the sets and "
                                   "the markers disagree",
                                   opt_.node, t.ToString(), set, k, d->marker, marker_in ? "<" : ">=", k));
      f.expected = is_before ? fmt::format("marker < {}", k) : fmt::format("marker >= {}", k);
      f.found = fmt::format("marker {}", d->marker);
      Add(std::move(f));
    }
    const bool after_start = d->at > nc.start;
    if (!is_before && d->f < k) {
      Add(Make(Check::kMonotonicity, k, d->at, &t,
               fmt::format("node {}: transaction {} (committed at {}) is in cut {} but in after({}): cut {} does not "
                           "contain cut {}",
                           opt_.node, t.ToString(), d->at.ToString(), d->f, k, k, d->f)));
    }
    if (is_before && after_start) MoveBucket(t, *d, k);
    if (!is_before && !after_start) MoveBucket(t, *d, k + 1);
    return out;
  }

  void On(const walfmt::CutAbort& a, Lsn at) {
    int idx = FindIndex(a.cut_id);
    if (idx < 0) {
      NodeCut nc;
      nc.cut_id = a.cut_id;
      nc.end = CutEnd::kAborted;
      s_.cuts.push_back(std::move(nc));
      idx = static_cast<int>(s_.cuts.size()) - 1;
    }
    s_.cuts[idx].aborts.push_back(CutAbortMark{at, a.time_us, a.reason, a.detail});
    s_.cuts[idx].end = CutEnd::kAborted;
    if (idx == open_) CloseOpen();
  }

  void On(const walfmt::Snapshot& sn, Lsn at) {
    SnapshotMark m{sn.name, at, sn.time_us, sn.fingerprint, {}, {}};
    Flush();
    for (const auto& [f, c] : s_.first_cut) {
      m.committed_before.count += c.count;
      m.committed_before.owned += c.owned;
    }
    for (const auto& [peer, buckets] : s_.shared) {
      TxDigest d;
      for (const auto& [f, b] : buckets) {
        d.x ^= b.x;
        d.n += b.n;
      }
      if (d.n != 0 || d.x != 0) m.shared_before[peer] = d;
    }
    s_.snapshots.push_back(std::move(m));
    if (opt_.witness_peer) {
      auto& w = s_.witness_at_snapshot.emplace_back();
      for (const auto& [t, f] : witness_) w.push_back(t);
      std::sort(w.begin(), w.end());
    }
    // Taken quiesced: nothing is in flight, so every transaction seen from
    // here on begins in view.
    clean_ = true;
  }

  void On(const walfmt::NodeStart& n, Lsn at) {
    s_.starts.push_back(StartMark{n.incarnation, at, n.time_us});
    have_node_start_ = true;
    last_node_start_ = at;
    last_time_us_ = std::max(last_time_us_, n.time_us);
    if (open_ >= 0 && n.incarnation > 0) s_.cuts[open_].restarted = true;
  }

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
  const uint32_t node_ = opt_.node;              // read on every commit: not through opt_
  static constexpr uint32_t kDensePeers = 4096;  // peers with an accumulator in acc_peer_
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
  std::vector<RingEntry> ring_;                                  // the last commits and rollbacks
  std::unordered_map<size_t, std::vector<uint32_t>> ring_more_;  // by ring slot: participants beyond the inline ones
  size_t ring_next_ = 0;
  size_t ring_used_ = 0;  // slots filled before ring_next_ last wrapped (see RingUsed)
  size_t ring_cap_ = 0;   // ring_.size(), kept here: no division by sizeof(RingEntry) per commit
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
  uint64_t acc_f_ = 0;           // the first-cut bucket being filled (Count, Flush)
  uint64_t acc_count_ = 0;
  uint64_t acc_owned_ = 0;
  std::vector<TxDigest> acc_peer_;                          // by peer id below kDensePeers
  uint32_t acc_peers_ = 0;                                  // acc_peer_.size()
  std::array<TxDigest, size_t{1} << kSetPeers> acc_set_{};  // by set of participants below kSetPeers (Count)
};

}  // namespace

const char* CutEndName(CutEnd e) {
  switch (e) {
    case CutEnd::kFinished:
      return "finished";
    case CutEnd::kAborted:
      return "aborted";
    case CutEnd::kOpen:
      return "open";
    case CutEnd::kSuperseded:
      return "superseded";
    case CutEnd::kDamaged:
      return "damaged";
    case CutEnd::kNotStarted:
      return "not-started";
  }
  return "unknown";
}

uint64_t TxHash(const TxId& t) {
  // splitmix64 of the two fields: spreads ids that differ in one bit.
  uint64_t z = t.seq * 0x9E3779B97F4A7C15ull + (static_cast<uint64_t>(t.node) << 32 | t.node);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

const NodeCut* NodeSummary::FindCut(uint64_t k) const {
  auto it = std::lower_bound(cuts.begin(), cuts.end(), k, [](const NodeCut& c, uint64_t id) { return c.cut_id < id; });
  return it != cuts.end() && it->cut_id == k ? &*it : nullptr;
}

struct SummaryBuilder::State {
  explicit State(const ScanOptions& o) : opt(o), scanner(opt, s) { s.node = o.node; }
  ScanOptions opt;
  NodeSummary s;
  Scanner scanner;
};

SummaryBuilder::SummaryBuilder(const ScanOptions& opt) : st_(std::make_unique<State>(opt)) {}
SummaryBuilder::~SummaryBuilder() = default;
void SummaryBuilder::Visit(const walfmt::RecordView& v) {
  ++st_->s.records;
  st_->s.bytes += v.size();
  st_->scanner.Visit(v);
}
NodeSummary SummaryBuilder::Finish() {
  st_->scanner.Finish();
  return std::move(st_->s);
}

struct NodeScan::State {
  explicit State(const ScanOptions& o) : opt(o), scanner(opt, s) {}
  ScanOptions opt;
  NodeSummary s;
  Scanner scanner;
  std::vector<walfmt::SegmentFile> segs;
  walfmt::ProblemSink sink;
  walfmt::RecordVisitor visit;
  std::unique_ptr<walfmt::NodeWalReader> reader;
  // The first file that could not be read (open or read refused by the
  // system, not a regular file): the scan fails with it, never reporting it
  // as damage.
  std::optional<walfmt::Status> io_error;
};

NodeScan::NodeScan(std::unique_ptr<State> st) : st_(std::move(st)) {}
NodeScan::~NodeScan() = default;

walfmt::Result<std::unique_ptr<NodeScan>> NodeScan::Open(const std::string& wal_dir, const ScanOptions& opt) {
  std::error_code ec;
  if (!std::filesystem::is_directory(wal_dir, ec)) {
    return walfmt::Status::NotFound(fmt::format("{}: no such WAL directory", wal_dir));
  }
  auto st = std::make_unique<State>(opt);
  NodeSummary& s = st->s;
  s.node = opt.node;
  s.wal_dir = wal_dir;
  s.cluster_known = opt.expect_cluster;
  s.cluster_id = opt.cluster_id;
  std::vector<walfmt::Problem> listing;
  auto segs = walfmt::ListSegments(wal_dir, [&](const walfmt::Problem& p) { listing.push_back(p); });
  if (!segs.ok()) return segs.status();
  if (segs->empty()) return walfmt::Status::NotFound(fmt::format("{}: no WAL segments", wal_dir));
  st->segs = std::move(segs.value());
  const bool from_position = Lsn{} < opt.from;
  if (from_position) {
    // Started mid-WAL: the segments before the one holding `from` are not
    // even opened, and that one must be there.
    std::erase_if(st->segs, [&](const walfmt::SegmentFile& f) { return f.index < opt.from.segment; });
    if (st->segs.empty() || st->segs.front().index != opt.from.segment) {
      return walfmt::Status::NotFound(
          fmt::format("{}: no segment {} to start reading at {}", wal_dir, opt.from.segment, opt.from.ToString()));
    }
  }
  // Segments are listed by index; a first index above 0 means the oldest
  // ones were removed (WAL retention): the scan starts mid-history. So does
  // a scan from a position.
  if (st->segs.front().index > 0 || from_position) {
    st->opt.wal_after_genesis = true;
    st->scanner.StartAfterGenesis();
    s.pruned = true;
    s.wal_start = from_position ? opt.from : Lsn{st->segs.front().index, 0};
  }
  const uint32_t node = opt.node;
  State* state = st.get();
  st->sink = [&s, node, state](const walfmt::Problem& p) {
    if (p.kind == walfmt::ProblemKind::kIo) {
      if (!state->io_error) state->io_error = walfmt::Status::Io(p.ToString());
      return;
    }
    if (!p.fatal && p.kind != walfmt::ProblemKind::kTornTail) {
      s.notes.push_back(p.ToString());  // a listing note, not damage
      return;
    }
    if (p.kind == walfmt::ProblemKind::kTornTail && !p.fatal) {
      s.torn_tail = true;
      s.torn_at = p.lsn();
      s.torn_bytes = p.length;
      return;
    }
    if (s.damaged) return;  // point in time: the first damage is where the readable WAL ends
    s.damaged = true;
    s.damage_at = p.lsn();
    s.damage = p.ToString();
    Finding f;
    f.check = Check::kWal;
    f.node = node;
    f.has_position = true;
    f.position = p.lsn();
    f.message = s.damage;
    f.expected = p.expected;
    f.found = p.actual;
    s.findings.push_back(std::move(f));
  };
  for (const auto& p : listing) st->sink(p);
  Scanner* scanner = &st->scanner;
  if (opt.settle_cut != 0) {
    st->visit = [scanner](const walfmt::RecordView& v) { return scanner->Visit(v) && scanner->KeepReading(); };
  } else {
    st->visit = [scanner](const walfmt::RecordView& v) { return scanner->Visit(v); };
  }
  walfmt::NodeReadOptions ro;
  ro.mode = walfmt::RecoveryMode::kPointInTime;
  ro.from = opt.from;
  st->reader = std::make_unique<walfmt::NodeWalReader>(st->segs, ro, st->visit, st->sink);
  return std::unique_ptr<NodeScan>(new NodeScan(std::move(st)));
}

bool NodeScan::done() const { return st_->reader->done(); }

void NodeScan::Step() {
  const size_t before = st_->reader->result().segments.size();
  st_->reader->Step();
  // The records the scanner saw: the intact prefix of each segment read (in
  // point-in-time mode nothing after damage), without skipped unknown types.
  const auto& segs = st_->reader->result().segments;
  for (size_t i = before; i < segs.size(); ++i) {
    st_->s.records += segs[i].records - segs[i].skipped_unknown;
    st_->s.bytes += segs[i].record_bytes - segs[i].skipped_unknown_bytes;
  }
  if (st_->opt.progress && segs.size() > before) st_->opt.progress(st_->s.bytes);
}

walfmt::Result<NodeSummary> NodeScan::Finish() {
  NodeSummary& s = st_->s;
  const ScanOptions& opt = st_->opt;
  const walfmt::NodeRead& read = st_->reader->result();
  s.end = read.end;
  if (st_->io_error) return *st_->io_error;
  for (const auto& seg : read.segments) {
    SegmentInfo si;
    si.index = seg.file.index;
    si.file = std::filesystem::path(seg.file.path).filename().string();
    si.compressed = seg.file.compressed;
    si.bytes = seg.file_bytes;
    si.records = seg.records;
    if (s.pruned && s.segments.empty() && seg.header_ok) s.wal_start_time_us = seg.header.created_time_us;
    if (!s.cluster_known && seg.header_ok) {
      s.cluster_known = true;
      s.cluster_id = seg.header.cluster_id;
    }
    s.segments.push_back(std::move(si));
  }
  if (read.segments.empty() || (read.segments.size() == 1 && read.segments[0].end == walfmt::SegmentEnd::kIoError)) {
    return walfmt::Status::Io(s.damaged ? s.damage : fmt::format("{}: nothing readable", s.wal_dir));
  }
  st_->scanner.Finish();
  if (opt.progress) opt.progress(s.bytes);
  return std::move(s);
}

walfmt::Result<NodeSummary> ScanNode(const std::string& wal_dir, const ScanOptions& opt) {
  auto scan = NodeScan::Open(wal_dir, opt);
  if (!scan.ok()) return scan.status();
  while (!(*scan)->done()) (*scan)->Step();
  return (*scan)->Finish();
}

}  // namespace walcut::cut
