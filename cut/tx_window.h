// The transactions in flight on one node, and where the recent ones finished,
// for the cut scan: one direct-mapped window per coordinator node.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "cut/tx_table.h"
#include "walfmt/assert.h"
#include "walfmt/lsn.h"
#include "walfmt/record.h"

namespace walcut::cut {

// A transaction id is (coordinator node, sequence number), and a coordinator
// numbers its transactions in order, so the transactions in flight from one
// coordinator are a narrow band of sequence numbers. The first `max_windows`
// coordinators seen with an id below kDirectNodes get a window of `window`
// slots (32 bytes each) indexed by seq mod window: a
// transaction starts in its slot, finishes in the same slot (which then
// remembers where it finished until a later transaction of that coordinator
// takes the slot), and no hash or probing is involved. A transaction whose
// slot is taken by another one in flight, or whose coordinator has no window,
// goes to a hash table; where such a transaction finished is kept in a ring
// of the last `fallback_finished` of them. Memory: at most max_windows x
// window x 32 bytes, plus the table and the ring (made when first needed).
//
// The scan uses it for two things: the transactions in flight (candidates of
// a cut, first positions) and where a transaction last finished (to name a
// transaction that commits twice, or commits after rolling back, with both
// positions). A finish is remembered until a transaction `window` numbers
// later of the same coordinator takes the slot.
class TxWindow {
 public:
  static constexpr uint32_t kDirectNodes = 64;

  struct Finish {
    walfmt::Lsn at;
    bool rolled_back = false;
  };

  // `window` is rounded up to a power of two.
  explicit TxWindow(size_t window = 1024, size_t fallback_finished = 4096, size_t max_windows = 8)
      : fallback_cap_(std::max<size_t>(fallback_finished, 1)), windows_left_(max_windows) {
    size_t w = 1;
    while (w < window) w <<= 1;
    mask_ = w - 1;
    no_window_.fill(false);
  }

  // Coordinators that have a window.
  size_t windows() const {
    size_t n = 0;
    for (const auto& w : windows_) n += w != nullptr;
    return n;
  }

  // Transactions in flight.
  size_t size() const { return size_; }

  // t is in flight from `at` on, unless it already was: false then.
  [[gnu::always_inline]] bool Start(const walfmt::TxId& t, walfmt::Lsn at) {
    Slot* s = SlotOf(t);
    if (s != nullptr && overflow_.size() == 0) [[likely]] {
      if (s->state == kInFlight) {
        if (s->seq == t.seq) return false;
        return StartElsewhere(t, at);
      }
      s->seq = t.seq;
      s->state = kInFlight;
      s->at = at;
      ++size_;
      return true;
    }
    return StartElsewhere(t, at);
  }

  // t finishes at `at`. When it was in flight: true, its first position in
  // `first`, and the finish is remembered. Otherwise false and nothing
  // changes: the caller asks LastFinish and decides whether to Remember.
  [[gnu::always_inline]] bool End(const walfmt::TxId& t, walfmt::Lsn at, bool rolled_back, walfmt::Lsn& first) {
    Slot* s = SlotOf(t);
    if (s != nullptr && s->state == kInFlight && s->seq == t.seq) [[likely]] {
      first = s->at;
      s->state = rolled_back ? kRolledBack : kCommitted;
      s->at = at;
      WALCUT_ASSERT(size_ > 0, "TxWindow: a slot in flight while the window counts none");
      --size_;
      if (ring_writes_ < mirror_until_) [[unlikely]]
        Push(t, at, rolled_back);
      return true;
    }
    if (overflow_.size() == 0 || !overflow_.Erase(t, first)) return false;
    WALCUT_ASSERT(size_ > 0, "TxWindow: a table entry in flight while the window counts none");
    --size_;
    Remember(t, at, rolled_back);
    return true;
  }

  // Remembers that t, not in flight, finished at `at`.
  void Remember(const walfmt::TxId& t, walfmt::Lsn at, bool rolled_back) {
    Slot* s = SlotOf(t);
    if (s != nullptr && s->state != kInFlight) {
      s->seq = t.seq;
      s->state = rolled_back ? kRolledBack : kCommitted;
      s->at = at;
      if (ring_writes_ < mirror_until_) Push(t, at, rolled_back);
      return;
    }
    Push(t, at, rolled_back);
    // A transaction with a slot, whose finish went to the ring: while that
    // entry is in the ring, finishes in slots are copied there too, so that
    // the ring never answers with an older finish than the one a slot held
    // before a later transaction took it.
    if (s != nullptr) mirror_until_ = ring_writes_ + fallback_.size();
  }

  // Where t last finished, if it is still remembered.
  std::optional<Finish> LastFinish(const walfmt::TxId& t) const {
    if (const Slot* s = FindSlot(t);
        s != nullptr && s->seq == t.seq && (s->state == kCommitted || s->state == kRolledBack)) {
      return Finish{s->at, s->state == kRolledBack};
    }
    for (size_t i = 0; i < fallback_used_; ++i) {  // newest first
      const FallbackEntry& e = fallback_[(next_ + fallback_.size() - 1 - i) % fallback_.size()];
      if (e.tx == t) return Finish{e.at, e.rolled_back};
    }
    return std::nullopt;
  }

  // The first position of t when it is in flight.
  const walfmt::Lsn* Find(const walfmt::TxId& t) const {
    if (const Slot* s = FindSlot(t); s != nullptr && s->state == kInFlight && s->seq == t.seq) return &s->at;
    return overflow_.Find(t);
  }

  // Calls f(tx, first position) for every transaction in flight.
  template <typename F>
  void ForEach(F&& f) const {
    for (uint32_t node = 0; node < kDirectNodes; ++node) {
      if (!windows_[node]) continue;
      for (size_t i = 0; i <= mask_; ++i) {
        const Slot& s = windows_[node][i];
        if (s.state == kInFlight) f(walfmt::TxId{node, s.seq}, s.at);
      }
    }
    overflow_.ForEach(f);
  }

 private:
  enum : uint32_t { kEmpty = 0, kInFlight = 1, kCommitted = 2, kRolledBack = 3 };
  struct Slot {
    uint64_t seq = 0;
    uint32_t state = kEmpty;
    walfmt::Lsn at;  // in flight: first position; finished: where it finished
  };
  struct FallbackEntry {
    walfmt::TxId tx;
    walfmt::Lsn at;
    bool rolled_back = false;
  };

  void Push(const walfmt::TxId& t, walfmt::Lsn at, bool rolled_back) {
    if (fallback_.empty()) fallback_.resize(fallback_cap_);
    if (next_ == fallback_.size()) next_ = 0;
    fallback_[next_++] = FallbackEntry{t, at, rolled_back};
    fallback_used_ = std::max(fallback_used_, next_);
    ++ring_writes_;
  }

  // The slot of t, its window made on first use; nullptr beyond kDirectNodes.
  Slot* SlotOf(const walfmt::TxId& t) {
    if (t.node >= kDirectNodes) [[unlikely]]
      return nullptr;
    Slot* w = windows_[t.node].get();
    if (w == nullptr) [[unlikely]] {
      if (no_window_[t.node]) return nullptr;
      w = MakeWindow(t.node);
      if (w == nullptr) return nullptr;
    }
    return &w[t.seq & mask_];
  }
  const Slot* FindSlot(const walfmt::TxId& t) const {
    if (t.node >= kDirectNodes || !windows_[t.node]) return nullptr;
    return &windows_[t.node][t.seq & mask_];
  }
  // A window for a coordinator seen for the first time, while the budget
  // lasts; nullptr after it (that coordinator's transactions use the table).
  [[gnu::noinline]] Slot* MakeWindow(uint32_t node) {
    if (windows_left_ == 0) {
      no_window_[node] = true;
      return nullptr;
    }
    --windows_left_;
    windows_[node] = std::make_unique<Slot[]>(mask_ + 1);
    return windows_[node].get();
  }
  // Start when t's slot is held by another transaction in flight, t's
  // coordinator has no window, or the hash table is in use (t may be there).
  [[gnu::noinline]] bool StartElsewhere(walfmt::TxId t, walfmt::Lsn at) {
    if (overflow_.Find(t) != nullptr) return false;
    if (Slot* s = SlotOf(t); s != nullptr) {
      if (s->state == kInFlight && s->seq == t.seq) return false;
      if (s->state != kInFlight) {
        s->seq = t.seq;
        s->state = kInFlight;
        s->at = at;
        ++size_;
        return true;
      }
    }
    overflow_.Insert(t, at);
    ++size_;
    WALCUT_ASSERT(size_ >= overflow_.size(), "TxWindow: more table entries than transactions in flight");
    return true;
  }

  size_t mask_ = 0;
  size_t size_ = 0;
  std::unique_ptr<Slot[]> windows_[kDirectNodes];
  std::array<bool, kDirectNodes> no_window_;  // coordinators refused a window (budget spent)
  size_t fallback_cap_;
  size_t windows_left_;
  FlatTxMap<walfmt::Lsn> overflow_;
  std::vector<FallbackEntry> fallback_;
  size_t next_ = 0;
  size_t fallback_used_ = 0;
  uint64_t ring_writes_ = 0;   // entries ever pushed into fallback_
  uint64_t mirror_until_ = 0;  // copy slot finishes into fallback_ while ring_writes_ is below this
};

}  // namespace walcut::cut
