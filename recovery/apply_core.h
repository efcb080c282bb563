// The core of every WAL pass of a node's restore (internal to recovery/):
// the writes of the transactions in flight, decoded from their TX_DATA as
// they are read; the state they are applied to, in commit order; the counts;
// and the node file. The passes differ only in how they decide which commits
// belong to the restore: NodeRestorer (recovery/node_restore.cpp) knows the
// cut's rule before it reads, OnePassNode (recovery/one_pass_node.cpp)
// learns it during the verdict scan's read.
#pragma once

#include <time.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "recovery/restore_node.h"
#include "recovery/state_table.h"
#include "walfmt/bytes.h"
#include "walfmt/record.h"
#include "walfmt/snapshot.h"
#include "walfmt/tx_map.h"

namespace walcut::recovery::detail {
using walfmt::Lsn;
using walfmt::Status;
using walfmt::TxId;

inline double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

inline bool PeekTx(std::span<const uint8_t> p, TxId& t) {
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

  // One-pass restore (OnePassNode): the transaction's first TX_DATA here
  // came after CUT_START(K), so it cannot be in cut K's sets.
  bool late = false;

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

// What every WAL pass of a node's restore builds, whoever decides which
// commits belong to it: the writes of the transactions in flight (decoded
// from their TX_DATA as they are read), the state they are applied to (in
// commit order, kApplyLag commits late), the counts, and the node file.
class ApplyCore {
 protected:
  ApplyCore(NodeJob& job, bool dry_run, const std::function<void(uint64_t)>& progress, StateTable* reuse)
      : job_(job),
        o_(job.out),
        dry_run_(dry_run),
        progress_(progress),
        reuse_(reuse),
        state_(reuse != nullptr ? *reuse : own_) {}

  // A committed transaction is applied kApplyLag commits later, in commit
  // order (the state is read only at the end, so the result is the same):
  // at its commit its writes' slots have arrived (hinted at its TX_DATA),
  // and the entries they point at are hinted then, so that they too have
  // arrived when it is applied. Without the lag, loading each entry was a
  // quarter of the apply pass.
  static constexpr size_t kApplyLag = 8;

  // The byte count at which progress is told next: one comparison per record.
  uint64_t NextReport() const { return progress_ ? ((reported_ >> 20) + 1) << 20 : UINT64_MAX; }

  // Counts record v's bytes; progress gets the bytes read since it was last
  // told, once per MiB.
  __attribute__((always_inline)) void CountBytes(const walfmt::RecordView& v) {
    bytes_ += v.size();
    if (bytes_ >= report_at_) [[unlikely]] {
      progress_(bytes_ - reported_);
      reported_ = bytes_;
      report_at_ = NextReport();
    }
  }
  void ReportRest() {
    if (progress_ && bytes_ > reported_) progress_(bytes_ - reported_);
    reported_ = bytes_;
  }

  // TX_DATA of t: its writes join the transaction's buffer. `late`: the
  // transaction's first TX_DATA comes after CUT_START(K) (OnePassNode).
  __attribute__((always_inline)) void OnData(const TxId& t, const walfmt::RecordView& v, bool late = false) {
    const uint32_t spare = free_buffers_.empty() ? static_cast<uint32_t>(buffers_.size()) : free_buffers_.back();
    bool inserted = false;
    const uint32_t b = pending_.FindOrInsert(t, spare, inserted);
    if (inserted) {
      if (free_buffers_.empty()) {
        buffers_.emplace_back();
      } else {
        free_buffers_.pop_back();
      }
      buffers_[b].late = late;
    }
    buffers_[b].Add(v.payload, dry_run_ ? nullptr : &state_, job_.filter);
  }

  // The commit of t at `at`, whose writes are in buffer b when `found`:
  // applied (in commit order) when `apply`, else counted as skipped. false
  // (with failure_ set) when the transaction belongs to the restore but its
  // writes are not there.
  __attribute__((always_inline)) bool Decide(const TxId& t, Lsn at, bool apply, bool found, uint32_t b) {
    if (apply) {
      if (!found) {
        failure_ = Status::Corruption(fmt::format(
            "node {}: transaction {} committed at {} belongs to the restore but its TX_DATA is not in {}..{}",
            job_.node, t.ToString(), at.ToString(), o_.from.ToString(), o_.to.ToString()));
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
          job_.on_apply(t, at, views_);
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
    if (found) Free(b);
    return true;
  }

  void Free(uint32_t b) {
    buffers_[b].Clear();
    free_buffers_.push_back(b);
  }

  void Release(const TxId& t) {
    uint32_t b = 0;
    if (pending_.Erase(t, b)) Free(b);
  }

  void ApplyOldest() {
    const uint32_t b = lagging_[lag_next_];
    lag_next_ = (lag_next_ + 1) % kApplyLag;
    --lag_size_;
    buffers_[b].ApplyTo(state_);
    Free(b);
  }
  void ApplyLagging() {
    while (lag_size_ > 0) ApplyOldest();
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
  uint64_t bytes_ = 0;
  uint64_t reported_ = 0;  // bytes already passed to progress
  uint64_t report_at_ = 0;
};

}  // namespace walcut::recovery::detail
