// One node's WAL pass of a restore (recovery/restore_node.h): the pending
// writes of the transactions in flight, the cut rule, the checks of the
// records the summaries place in the range, and the node file.
#include "recovery/restore_node.h"

#include <time.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "recovery/restore_node.h"
#include "recovery/state_table.h"
#include "walfmt/bytes.h"
#include "walfmt/reader.h"
#include "walfmt/snapshot.h"
#include "walfmt/tx_map.h"

namespace walcut::recovery {
using walfmt::Lsn;
using walfmt::Status;
using walfmt::TxId;

namespace {
double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

bool PeekTx(std::span<const uint8_t> p, TxId& t) {
  if (p.size() < 12) return false;
  t.node = walfmt::LoadU32(p.data());
  t.seq = walfmt::LoadU64(p.data() + 4);
  return true;
}

// The writes of one transaction in flight on a node, decoded from its
// TX_DATA records as they are read, waiting for its outcome. Each write is a
// WriteHead, then the key, then the value, back to back in one buffer; the
// head carries the key's StateTable::Hash, and the slot of the state the
// write will probe is prefetched (the commit follows a few records later).
// A payload that does not decode marks the whole transaction: the restore
// fails if it is to be applied, as it failed when TX_DATA payloads were
// decoded at the commit. Memory: the transactions in flight, their writes
// with 9 bytes more each than in the WAL; buffers are reused.
class PendingWrites {
 public:
  // Decodes one TX_DATA payload and appends its writes; without a state
  // (a dry run) only counts them. With an active filter (a partial
  // restore) a write of another key is dropped here, before its key is
  // hashed or its value copied, and not counted.
  void Add(std::span<const uint8_t> payload, const StateTable* state, const KeyFilter& filter) {
    if (bad_) return;
    TxId tx;
    const bool filtered = filter.active();
    if (state == nullptr) {
      uint32_t count = 0;
      bad_ = !walfmt::VisitTxData(
          payload, tx, [&](uint32_t n) { count = filtered ? 0 : n; },
          [&](const walfmt::WriteView& w) { count += filtered && filter.Keeps(w.key) ? 1 : 0; });
      if (!bad_) writes_ += count;
      return;
    }
    const size_t before = size_;
    uint32_t count = 0;
    const bool ok = walfmt::VisitTxData(
        payload, tx,
        [&](uint32_t n) {
          count = filtered ? 0 : n;
          // Each write's 7 bytes of op and lengths become a 16-byte head.
          Reserve(size_ + payload.size() + size_t{9} * n);
        },
        [&](const walfmt::WriteView& w) {
          if (filtered) {
            if (!filter.Keeps(w.key)) return;
            ++count;
          }
          WriteHead h;
          h.hash = StateTable::Hash(w.key);
          h.value_len = static_cast<uint32_t>(w.value.size());
          h.key_len = static_cast<uint16_t>(w.key.size());
          h.op = static_cast<uint8_t>(w.op);
          state->Prefetch(h.hash);
          char* p = data_.get() + size_;
          std::memcpy(p, &h, sizeof h);
          CopyShort(p + sizeof h, w.key.data(), w.key.size());
          CopyShort(p + sizeof h + w.key.size(), w.value.data(), w.value.size());
          size_ += sizeof h + w.key.size() + w.value.size();
        });
    if (!ok) {
      size_ = before;
      bad_ = true;
      return;
    }
    writes_ += count;
  }

  bool bad() const { return bad_; }
  uint64_t writes() const { return writes_; }

  // Hints the state to load the entries the writes will overwrite (their
  // slots were hinted as the TX_DATA was read).
  void PrefetchEntries(const StateTable& state) const {
    for (const char* p = data_.get(); p < data_.get() + size_;) {
      WriteHead h;
      std::memcpy(&h, p, sizeof h);
      state.PrefetchEntry(h.hash);
      p += sizeof h + h.key_len + h.value_len;
    }
  }

  // The writes in order, as views into the buffer (valid until Clear).
  void ViewsInto(std::vector<walfmt::WriteView>& out) const {
    out.clear();
    for (const char* p = data_.get(); p < data_.get() + size_;) {
      WriteHead h;
      std::memcpy(&h, p, sizeof h);
      out.push_back({static_cast<walfmt::WriteOp>(h.op), std::string_view(p + sizeof h, h.key_len),
                     std::string_view(p + sizeof h + h.key_len, h.value_len)});
      p += sizeof h + h.key_len + h.value_len;
    }
  }

  // Applies the writes in order.
  void ApplyTo(StateTable& state) const {
    const char* p = data_.get();
    const char* end = p + size_;
    while (p < end) {
      WriteHead h;
      std::memcpy(&h, p, sizeof h);
      const std::string_view key(p + sizeof h, h.key_len);
      if (h.op == static_cast<uint8_t>(walfmt::WriteOp::kDelete)) {
        state.Erase(key, h.hash);
      } else {
        state.Put(key, std::string_view(p + sizeof h + h.key_len, h.value_len), h.hash);
      }
      p += sizeof h + h.key_len + h.value_len;
    }
  }

  void Clear() {
    size_ = 0;
    writes_ = 0;
    bad_ = false;
  }

 private:
  struct WriteHead {
    uint64_t hash;
    uint32_t value_len;
    uint16_t key_len;
    uint8_t op;
    uint8_t unused;
  };
  static_assert(sizeof(WriteHead) == 16);

  void Reserve(size_t n) {
    if (n <= cap_) return;
    const size_t cap = std::max({n, cap_ * 2, size_t{256}});
    auto fresh = std::make_unique_for_overwrite<char[]>(cap);
    if (size_ > 0) std::memcpy(fresh.get(), data_.get(), size_);
    data_ = std::move(fresh);
    cap_ = cap;
  }

  std::unique_ptr<char[]> data_;
  size_t size_ = 0;
  size_t cap_ = 0;
  uint64_t writes_ = 0;
  bool bad_ = false;
};

}  // namespace

namespace detail {

CutRule RuleOf(const cut::NodeCut& nc) {
  CutRule r;
  r.start = nc.start;
  for (const auto& t : nc.before) r.before.push_back(t.tx);
  for (const auto& t : nc.after) r.after.push_back(t.tx);
  std::sort(r.before.begin(), r.before.end());
  std::sort(r.after.begin(), r.after.end());
  for (const auto& t : r.before) r.before_bits |= CutRule::Bit(t);
  for (const auto& t : r.after) r.after_bits |= CutRule::Bit(t);
  return r;
}

namespace {

// Whether the record `v` is the one `e` expects; "" when it is, else what
// was found instead.
std::string Mismatch(const ExpectedRecord& e, const walfmt::RecordView& v) {
  const std::string found_type(walfmt::RecordTypeName(v.type));
  const bool type_ok = e.data_or_prepare
                           ? (v.type == walfmt::RecordType::kTxData || v.type == walfmt::RecordType::kTxPrepare)
                           : v.type == e.type;
  if (!type_ok) return fmt::format("a {} record", found_type);
  switch (v.type) {
    case walfmt::RecordType::kTxData:
    case walfmt::RecordType::kTxPrepare: {
      TxId t;
      if (!PeekTx(v.payload, t)) return fmt::format("a {} record that does not decode", found_type);
      if (t != e.tx) return fmt::format("{} of {}", found_type, t.ToString());
      return "";
    }
    case walfmt::RecordType::kTxCommit:
    case walfmt::RecordType::kTxRollback: {
      walfmt::TxOutcomeView x;
      if (!walfmt::ParseTxOutcome(v.type, v.payload, x))
        return fmt::format("a {} record that does not decode", found_type);
      if (x.tx != e.tx) return fmt::format("{} of {}", found_type, x.tx.Readable());
      if (v.type == walfmt::RecordType::kTxCommit && x.marker != e.marker) {
        return fmt::format("TX_COMMIT of {} with marker {} (expected marker {})", x.tx.Readable(), x.marker, e.marker);
      }
      return "";
    }
    default:
      break;
  }
  auto rec = walfmt::DecodePayload(v.type, v.payload);
  if (!rec.ok()) return fmt::format("a {} record that does not decode", found_type);
  if (const auto* cs = std::get_if<walfmt::CutStart>(&*rec)) {
    return cs->cut_id == e.cut ? "" : fmt::format("CUT_START({})", cs->cut_id);
  }
  if (const auto* cf = std::get_if<walfmt::CutFinish>(&*rec)) {
    if (cf->cut_id != e.cut) return fmt::format("CUT_FINISH({})", cf->cut_id);
    auto before = cf->before, after = cf->after;
    std::sort(before.begin(), before.end());
    std::sort(after.begin(), after.end());
    if (before != e.before || after != e.after) {
      return fmt::format("CUT_FINISH({}) tracking {} before / {} after, not the {} / {} expected", cf->cut_id,
                         before.size(), after.size(), e.before.size(), e.after.size());
    }
    return "";
  }
  if (const auto* sn = std::get_if<walfmt::Snapshot>(&*rec)) {
    if (sn->name != e.snapshot || sn->fingerprint != e.fingerprint) {
      return fmt::format("SNAPSHOT({}) with fingerprint {:016x}", sn->name, sn->fingerprint);
    }
    return "";
  }
  return fmt::format("a {} record", found_type);
}

// One node's restore, step by step: the WAL range's segments listed, the base
// read into the state, the apply pass (one read of the range), the checks of
// what the pass saw, and the node file written. The per-record work (Visit
// and what it calls) is inlined into the reader's callback: one call per
// record, as when it was one lambda.
class NodeRestorer {
 public:
  NodeRestorer(NodeJob& job, bool dry_run, const std::function<void(uint64_t)>& progress, StateTable* reuse)
      : job_(job),
        o_(job.out),
        dry_run_(dry_run),
        progress_(progress),
        reuse_(reuse),
        state_(reuse != nullptr ? *reuse : own_) {}

  Status Run() {
    if (Status st = ListRange(); !st.ok()) return st;
    const double cpu_start = ThreadCpuSeconds();
    if (Status st = LoadBase(); !st.ok()) return st;
    const walfmt::NodeRead read = ApplyPass();
    if (!failure_.ok()) return failure_;
    while (lag_size_ > 0) ApplyOldest();
    if (Status st = CheckIdentity(read); !st.ok()) return st;
    if (Status st = CheckEnd(read); !st.ok()) return st;
    o_.apply_cpu_seconds = ThreadCpuSeconds() - cpu_start;
    if (dry_run_) return Status::Ok();
    return WriteState();
  }

 private:
  // A committed transaction is applied kApplyLag commits later, in commit
  // order (the state is read only at the end, so the result is the same):
  // at its commit its writes' slots have arrived (hinted at its TX_DATA),
  // and the entries they point at are hinted then, so that they too have
  // arrived when it is applied. Without the lag, loading each entry was a
  // quarter of the apply pass.
  static constexpr size_t kApplyLag = 8;

  // The segments of the job's WAL range.
  Status ListRange() {
    auto listed = walfmt::ListSegments(job_.wal_dir, Sink());
    if (!listed.ok()) return listed.status();
    for (const auto& s : *listed) {
      if (s.index >= o_.from.segment && s.index <= o_.to.segment) segs_.push_back(s);
    }
    return Status::Ok();
  }

  std::function<void(const walfmt::Problem&)> Sink() {
    return [this](const walfmt::Problem& p) {
      if (p.fatal) problems_.push_back(p);
    };
  }

  // The base is read here, one node at a time per job, so that memory holds
  // the bases of the nodes being restored, not of every node at once.
  Status LoadBase() {
    state_.Clear(dry_run_ ? 0 : o_.base_entries + 1024);
    if (dry_run_ || job_.base_file.empty()) return Status::Ok();
    // Streamed into the state: no map of the base is built. On an error the
    // state is dropped with the job.
    uint64_t read = 0;
    // A partial restore keeps the base's entries of its subset only.
    auto snap = walfmt::ReadSnapshotFile(job_.base_file, [&](std::string_view key, std::string_view value) {
      if (!job_.filter.active() || job_.filter.Keeps(key)) state_.Put(key, value);
      ++read;
    });
    if (!snap.ok()) return Status::Corruption(snap.status().message());
    if (snap->fingerprint != job_.base_fingerprint || read != o_.base_entries) {
      return Status::Corruption(fmt::format("{}: changed while the restore ran (fingerprint {:016x}, was {:016x})",
                                            job_.base_file, snap->fingerprint, job_.base_fingerprint));
    }
    return Status::Ok();
  }

  // Reads the range once; failure_ says why it stopped early.
  walfmt::NodeRead ApplyPass() {
    walfmt::NodeReadOptions ro;
    ro.mode = walfmt::RecoveryMode::kStrict;  // the range must be intact (a torn tail lies beyond CUT_FINISH)
    ro.from = o_.from;
    expect_at_ = NextExpectedAt();
    report_at_ = NextReport();
    // Inlined into the std::function's call thunk: one call per record, not two.
    auto visit = [this](const walfmt::RecordView& v) __attribute__((always_inline))->bool { return Visit(v); };
    auto read = walfmt::ReadNodeWal(segs_, ro, visit, Sink());
    o_.bytes_to_read = bytes_;
    if (progress_ && bytes_ > reported_) progress_(bytes_ - reported_);
    return read;
  }

  // Where the next expected record is (past every record when none is left),
  // and the byte count at which progress is told next: one comparison each
  // per record.
  Lsn NextExpectedAt() const {
    return next_expect_ < job_.expect.size() ? job_.expect[next_expect_].at : Lsn{UINT64_MAX, UINT64_MAX};
  }
  uint64_t NextReport() const { return progress_ ? ((reported_ >> 20) + 1) << 20 : UINT64_MAX; }

  void Missed(const ExpectedRecord& e, const std::string& found) {
    failure_ = Status::InvalidArgument(fmt::format("node {}: {} places {} at {}, but node {}'s WAL has {}", job_.node,
                                                   job_.origin, e.what, e.at.ToString(), job_.node, found));
  }

  // The records expected at or before v's position: each must be v.
  bool MeetExpected(const walfmt::RecordView& v) {
    while (next_expect_ < job_.expect.size() && job_.expect[next_expect_].at <= v.lsn) {
      const ExpectedRecord& e = job_.expect[next_expect_++];
      if (e.at < v.lsn) {
        Missed(e, fmt::format("no record starting there (the next one is at {})", v.lsn.ToString()));
        return false;
      }
      if (const std::string m = Mismatch(e, v); !m.empty()) {
        Missed(e, m + " there");
        return false;
      }
    }
    expect_at_ = NextExpectedAt();
    return true;
  }

  __attribute__((always_inline)) bool Visit(const walfmt::RecordView& v) {
    if (!(v.lsn < expect_at_)) [[unlikely]] {
      if (!MeetExpected(v)) return false;
    }
    const auto to_end = v.lsn <=> o_.to;
    if (to_end > 0) {
      reached_end_ = true;
      return false;
    }
    bytes_ += v.size();
    // Progress gets the bytes read since it was last told, once per MiB.
    if (bytes_ >= report_at_) [[unlikely]] {
      progress_(bytes_ - reported_);
      reported_ = bytes_;
      report_at_ = NextReport();
    }
    TxId t;
    switch (v.type) {
      case walfmt::RecordType::kTxData:
        if (PeekTx(v.payload, t)) OnData(t, v);
        break;
      case walfmt::RecordType::kTxCommit:
        if (PeekTx(v.payload, t) && !OnCommit(t, v)) return false;
        break;
      case walfmt::RecordType::kTxRollback:
        if (PeekTx(v.payload, t)) Release(t);
        ++o_.txs_rolled_back;
        break;
      default:
        break;
    }
    if (to_end == 0) {
      reached_end_ = true;
      return false;
    }
    return true;
  }

  __attribute__((always_inline)) void OnData(const TxId& t, const walfmt::RecordView& v) {
    const uint32_t spare = free_buffers_.empty() ? static_cast<uint32_t>(buffers_.size()) : free_buffers_.back();
    bool inserted = false;
    const uint32_t b = pending_.FindOrInsert(t, spare, inserted);
    if (inserted) {
      if (free_buffers_.empty()) {
        buffers_.emplace_back();
      } else {
        free_buffers_.pop_back();
      }
    }
    buffers_[b].Add(v.payload, dry_run_ ? nullptr : &state_, job_.filter);
  }

  // false (with failure_ set) when the transaction belongs to the restore but
  // its writes are not there.
  __attribute__((always_inline)) bool OnCommit(const TxId& t, const walfmt::RecordView& v) {
    bool apply = job_.k.In(t, v.lsn);
    if (apply && job_.j) apply = !job_.j->In(t, v.lsn);
    uint32_t b = 0;
    const bool found = pending_.Erase(t, b);
    if (apply) {
      if (!found) {
        failure_ = Status::Corruption(fmt::format(
            "node {}: transaction {} committed at {} belongs to the restore but its TX_DATA is not in {}..{}",
            job_.node, t.ToString(), v.lsn.ToString(), o_.from.ToString(), o_.to.ToString()));
        return false;
      }
      PendingWrites& w = buffers_[b];
      if (w.bad()) {
        failure_ = Status::Corruption(fmt::format("node {}: TX_DATA of {} does not decode", job_.node, t.ToString()));
        return false;
      }
      ++o_.txs_applied;
      o_.writes_applied += w.writes();
      if (job_.on_apply) [[unlikely]] {
        // Export: the observer takes the writes; the state is not built.
        if (!dry_run_) {
          w.ViewsInto(views_);
          job_.on_apply(t, v.lsn, views_);
        }
      } else if (!dry_run_) {
        w.PrefetchEntries(state_);
        if (lag_size_ == kApplyLag) ApplyOldest();
        lagging_[(lag_next_ + lag_size_++) % kApplyLag] = b;
        return true;  // its buffer is released once applied
      }
    } else {
      ++o_.txs_skipped;
    }
    if (found) {
      buffers_[b].Clear();
      free_buffers_.push_back(b);
    }
    return true;
  }

  void Release(const TxId& t) {
    uint32_t b = 0;
    if (!pending_.Erase(t, b)) return;
    buffers_[b].Clear();
    free_buffers_.push_back(b);
  }

  void ApplyOldest() {
    const uint32_t b = lagging_[lag_next_];
    lag_next_ = (lag_next_ + 1) % kApplyLag;
    --lag_size_;
    buffers_[b].ApplyTo(state_);
    buffers_[b].Clear();
    free_buffers_.push_back(b);
  }

  // Per-node restore: every segment read carries this node id and cluster.
  Status CheckIdentity(const walfmt::NodeRead& read) const {
    if (!job_.check_identity) return Status::Ok();
    for (const auto& sc : read.segments) {
      if (!sc.header_ok) continue;
      if (sc.header.node_id != job_.node) {
        return Status::InvalidArgument(fmt::format("{}: segment {} belongs to node {}, not node {}", job_.wal_dir,
                                                   sc.file.path, sc.header.node_id, job_.node));
      }
      if (job_.expect_cluster && sc.header.cluster_id != job_.cluster_id) {
        return Status::InvalidArgument(fmt::format("{}: segment {} is from cluster {:016x}, {} is for cluster {:016x}",
                                                   job_.wal_dir, sc.file.path, sc.header.cluster_id, job_.origin,
                                                   job_.cluster_id));
      }
    }
    return Status::Ok();
  }

  // The pass reached CUT_FINISH, meeting every record expected up to it.
  Status CheckEnd(const walfmt::NodeRead& read) const {
    if (reached_end_ && next_expect_ < job_.expect.size() && !(o_.to < job_.expect[next_expect_].at)) {
      const ExpectedRecord& e = job_.expect[next_expect_];
      return Status::InvalidArgument(fmt::format("node {}: {} places {} at {}, but node {}'s WAL has no record there",
                                                 job_.node, job_.origin, e.what, e.at.ToString(), job_.node));
    }
    if (reached_end_) return Status::Ok();
    if (!problems_.empty()) {
      return Status::Corruption(fmt::format("node {}: the WAL range {}..{} is damaged: {}", job_.node,
                                            o_.from.ToString(), o_.to.ToString(), problems_.front().ToString()));
    }
    return Status::Corruption(fmt::format("node {}: the WAL ends at {} before CUT_FINISH at {}", job_.node,
                                          read.end.ToString(), o_.to.ToString()));
  }

  // The node file (and the kept copy), in key order.
  Status WriteState() {
    o_.entries = state_.size();
    std::unique_ptr<walfmt::SnapshotStreamWriter> file;
    if (!job_.stage_file.empty()) {
      auto w = walfmt::SnapshotStreamWriter::Create(job_.stage_file, job_.header, state_.size(), job_.write_thread);
      if (!w.ok()) return w.status();
      file = std::move(w.value());
    }
    Status write_status;
    std::vector<std::pair<std::string, std::string>> kept;
    if (job_.keep_state) kept.reserve(state_.size());
    state_.ForEachSorted([&](std::string_view k, std::string_view v) {
      if (file) write_status = file->Add(k, v);
      if (job_.keep_state) kept.emplace_back(k, v);
      return write_status.ok();
    });
    if (!write_status.ok()) return write_status;
    // Freed before the kept copy is built; a reused table keeps its memory
    // for the worker's next node.
    if (reuse_ == nullptr || job_.keep_state) state_ = StateTable(0);
    if (job_.keep_state) {
      o_.state = std::map<std::string, std::string>(std::make_move_iterator(kept.begin()),
                                                    std::make_move_iterator(kept.end()));
      o_.fingerprint = walfmt::StateFingerprint(o_.state);
    }
    if (file) {
      auto fp = file->Finish();
      if (!fp.ok()) return fp.status();
      o_.fingerprint = *fp;
    }
    return Status::Ok();
  }

  NodeJob& job_;
  NodeRestore& o_;
  const bool dry_run_;
  const std::function<void(uint64_t)>& progress_;
  StateTable* const reuse_;
  StateTable own_;
  StateTable& state_;
  std::vector<walfmt::Problem> problems_;
  std::vector<walfmt::SegmentFile> segs_;
  // The writes of the transactions in flight, decoded from their TX_DATA
  // records as they are read (a transaction may write several TX_DATA
  // records on one node), with their keys' hashes: pending_ maps the
  // transaction to its buffer in buffers_. The buffers of finished
  // transactions are reused for new ones (no malloc per transaction), and so
  // is the map's storage.
  walfmt::FlatTxMap<uint32_t> pending_;
  std::vector<PendingWrites> buffers_;
  std::vector<uint32_t> free_buffers_;
  std::vector<walfmt::WriteView> views_;  // with an observer (job_.on_apply): one transaction's writes
  std::array<uint32_t, kApplyLag> lagging_{};
  size_t lag_next_ = 0;  // the ring's oldest slot
  size_t lag_size_ = 0;
  Status failure_;
  bool reached_end_ = false;
  uint64_t bytes_ = 0;
  uint64_t reported_ = 0;   // bytes already passed to progress
  size_t next_expect_ = 0;  // job_.expect[next_expect_] is the next record to meet
  Lsn expect_at_;
  uint64_t report_at_ = 0;
};

}  // namespace

Status RunNode(NodeJob& job, bool dry_run, const std::function<void(uint64_t)>& progress, StateTable* reuse) {
  return NodeRestorer(job, dry_run, progress, reuse).Run();
}

}  // namespace detail
}  // namespace walcut::recovery
