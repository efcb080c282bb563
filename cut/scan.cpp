#include "cut/scan.h"

#include <algorithm>
#include <filesystem>
#include <span>

#include <fmt/format.h>

#include "cut/scan_scanner.h"
#include "walfmt/reader.h"

namespace walcut::cut {
namespace scan {

// The per-record path (Visit, in cut/scan_scanner.h, calls these).
bool Scanner::VisitStart(const RecordView& v) {
  TxId t;
  if (walfmt::PeekTxId(v.payload, t)) [[likely]] {
    InFlight(t, v.lsn);
    return true;
  }
  if (v.type == RecordType::kTxData) return Bad(v, "TX_DATA payload shorter than a transaction id");
  return VisitDecoded(v);
}

bool Scanner::VisitCommit(const RecordView& v) {
  if (FastCommit(v)) [[likely]]
    return true;
  if (FastOutcome(v)) return true;
  return VisitDecoded(v);
}

bool Scanner::VisitRollback(const RecordView& v) {
  if (FastOutcome(v)) [[likely]]
    return true;
  return VisitDecoded(v);
}

bool Scanner::FastOutcome(const RecordView& v) {
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

void Scanner::OnRollback(const TxId& tx, uint64_t time_us, uint16_t flags, std::span<const uint32_t> parts, Lsn at) {
  ++s_.rollbacks;
  last_time_us_ = std::max(last_time_us_, time_us);
  Lsn first = at;
  if (!window_.End(tx, at, true, first)) {
    if (const auto prev = window_.LastFinish(tx); prev && !prev->rolled_back) {
      RollbackAfterCommit(tx, at, prev->at);
      return;
    }
    window_.Remember(tx, at, true);
    if (!clean_) first = kFirstSeenPruned;
  }
  const bool recovered = (flags & walfmt::kTxFlagRecovered) != 0;
  if (open_ >= 0 && (candidates_.count(tx) || first == kFirstSeenPruned)) {
    pending_[tx] = MakeDone(at, first, time_us, 0, 0, recovered, true, parts);
  }
  ring_.Remember(tx, at, first, time_us, 0, 0, recovered, true, parts);
}

// Records and bytes are not counted here, per record: NodeScan takes them
// from the reader's segment results, SummaryBuilder counts its own.
void Scanner::Finish() {
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
  digests_.Flush();
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
  digests_.DropEmpty();
}

bool Scanner::SettledNow() {
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
  for (const auto& e : ring_.Entries()) {
    if (!e.rolled_back && e.f <= k) return false;
  }
  if (open_ >= 0) {
    for (const auto& [t, d] : pre_start_) {
      if (!d.rolled_back && d.f <= k) return false;
    }
  }
  return true;
}

bool Scanner::Bad(const RecordView& v, const std::string& what) {
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

void Scanner::Sample(Lsn at) {
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
void Scanner::OverdueOutcomes() {
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
                    opt_.node, t.Readable(), first.ToString(), last_time_us_ - it->second, opt_.outcome_overdue_us)));
  }
}

void Scanner::Add(Finding f) {
  if (s_.findings.size() < opt_.max_findings) {
    s_.findings.push_back(std::move(f));
  } else {
    ++s_.findings_dropped;
  }
}

Finding Scanner::Make(Check check, uint64_t cut, Lsn at, const TxId* tx, std::string message) {
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

void Scanner::Witness(const TxId& t, std::span<const uint32_t> parts, uint64_t f, int sign) {
  if (!std::binary_search(parts.begin(), parts.end(), *opt_.witness_peer)) return;
  if (sign > 0) {
    witness_[t] = f;
  } else {
    witness_.erase(t);
  }
}

void Scanner::NewPeak() {
  peak_in_flight_ = window_.size();
  ring_.Fit(peak_in_flight_);
}

void Scanner::Bucket(const TxId& t, std::span<const uint32_t> parts, uint64_t f, int sign) {
  digests_.Bucket(t, parts, f, sign);
  if (opt_.witness_peer) Witness(t, parts, f, sign);
}

void Scanner::MoveBucket(const TxId& t, Done& d, uint64_t f) {
  if (d.f == f) return;
  Bucket(t, d.participants, d.f, -1);
  Bucket(t, d.participants, f, +1);
  d.f = f;
  if (RingEntry* r = ring_.Recent(t)) r->f = f;
  if (auto it = pre_start_.find(t); it != pre_start_.end()) it->second.f = f;
  if (auto it = pending_.find(t); it != pending_.end()) it->second.f = f;
}

bool Scanner::CommitNotInFlight(const TxId& tx, Lsn at) {
  const auto prev = window_.LastFinish(tx);
  if (!prev) return true;
  if (prev->rolled_back) {
    Add(Make(Check::kRollback, 0, at, &tx,
             fmt::format("node {}: transaction {} committed at {} after its TX_ROLLBACK at {}", opt_.node,
                         tx.Readable(), at.ToString(), prev->at.ToString())));
    return true;
  }
  Add(Make(Check::kShape, 0, at, &tx,
           fmt::format("node {}: transaction {} committed twice, at {} and at {}", opt_.node, tx.Readable(),
                       prev->at.ToString(), at.ToString())));
  return false;
}

void Scanner::CommitNearCut(const TxId& tx, uint64_t marker, uint64_t time_us, bool recovered,
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
                           opt_.node, tx.Readable(), at.ToString(), k, marker, k, k)));
    }
  } else if (marker == k + 1) {
    expect_after_[k + 1][tx] = MakeDone(at, first, time_us, marker, f, recovered, false, parts);
  } else if (marker > k + 1 && (have_start_ || !opt_.wal_after_genesis)) {
    Add(Make(Check::kMarker, k + 1, at, &tx,
             fmt::format("node {}: transaction {} committed at {} with marker {}, but the node had only reached cut "
                         "{}: no cut can place it consistently",
                         opt_.node, tx.Readable(), at.ToString(), marker, k)));
  }
}

void Scanner::RollbackAfterCommit(const TxId& tx, Lsn at, Lsn commit) {
  Add(Make(Check::kRollback, 0, at, &tx,
           fmt::format("node {}: transaction {} rolled back at {} after its TX_COMMIT at {}", opt_.node, tx.Readable(),
                       at.ToString(), commit.ToString())));
}

}  // namespace scan

using scan::Scanner;

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

uint64_t TxHash(const TxId& t) { return scan::HashTx(t); }

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
  if (RecordTap* tap = opt.tap) {
    st->visit = [scanner, tap](const walfmt::RecordView& v) {
      if (!scanner->Visit(v)) return false;
      tap->Record(v);
      return scanner->KeepReading();
    };
  } else if (opt.settle_cut != 0) {
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
