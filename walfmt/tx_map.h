// TxId -> a small value: the transactions in flight on one node, in the cut
// scan (cut/tx_table.h: the position of the first record) and in the restore
// (recovery/restore.cpp: a buffer index). Shared by walcut's libraries, not
// installed.
// An open-addressing table (linear probing, backward-shift deletion, no
// allocation per entry): a scan inserts and removes one entry per
// transaction, which a node-based hash map pays for with malloc and free.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "walfmt/record.h"

namespace walfmt {

template <typename V>
class FlatTxMap {
 public:
  // `sparse`: while the table is small (under 64 Ki slots) it is kept at
  // most 1/sparse full, so that a lookup almost never probes past its home
  // slot; beyond that, half full. bench/txtablebench compares settings.
  explicit FlatTxMap(unsigned sparse = 8) : slots_(64), sparse_(sparse < 2 ? 2 : sparse) { SetLimit(); }

  size_t size() const { return size_; }

  // Inserts t unless present; returns false when it was already there.
  [[gnu::always_inline]] bool Insert(const TxId& t, V at) {
    bool inserted = false;
    FindOrInsert(t, at, inserted);
    return inserted;
  }

  // The value of t, after inserting t with `at` when it was not there
  // (`inserted` says which): one probe where Find and then Insert take two.
  // The reference is valid until the table next changes.
  [[gnu::always_inline]] V& FindOrInsert(const TxId& t, V at, bool& inserted) {
    if (size_ >= limit_) [[unlikely]]
      Grow();
    for (size_t i = Home(t);; i = Next(i)) {
      Slot& s = slots_[i];
      if (!s.used) {
        s.seq = t.seq;
        s.node = t.node;
        s.used = 1;
        s.at = at;
        ++size_;
        inserted = true;
        return s.at;
      }
      if (s.Is(t)) {
        inserted = false;
        return s.at;
      }
    }
  }

  const V* Find(const TxId& t) const {
    for (size_t i = Home(t);; i = Next(i)) {
      const Slot& s = slots_[i];
      if (!s.used) return nullptr;
      if (s.Is(t)) return &s.at;
    }
  }

  // Removes t; returns its value through `at` when it was there.
  [[gnu::always_inline]] bool Erase(const TxId& t, V& at) {
    size_t i = Home(t);
    for (;; i = Next(i)) {
      if (!slots_[i].used) return false;
      if (slots_[i].Is(t)) break;
    }
    at = slots_[i].at;
    // Backward shift: move later entries of the run into the hole when their
    // home position allows it, so that lookups never need tombstones.
    size_t hole = i;
    for (size_t j = Next(i);; j = Next(j)) {
      if (!slots_[j].used) break;
      const size_t home = Home(slots_[j].id());
      const bool movable = hole <= j ? (home <= hole || home > j) : (home <= hole && home > j);
      if (movable) {
        slots_[hole] = slots_[j];
        hole = j;
      }
    }
    slots_[hole].used = 0;
    --size_;
    return true;
  }

  template <typename F>
  void ForEach(F&& f) const {
    for (const Slot& s : slots_) {
      if (s.used) f(s.id(), s.at);
    }
  }

 private:
  // The id is stored as two fields with the used flag in the space TxId
  // would leave as padding: a slot with an Lsn value is 32 bytes, two to a
  // cache line.
  struct Slot {
    uint64_t seq = 0;
    uint32_t node = 0;
    uint32_t used = 0;
    V at{};
    bool Is(const TxId& t) const { return seq == t.seq && node == t.node; }
    TxId id() const { return TxId{node, seq}; }
  };
  size_t Home(const TxId& t) const { return TxIdHash{}(t)*0x9E3779B97F4A7C15ull >> shift_; }
  size_t Next(size_t i) const { return (i + 1) & mask_; }
  void SetLimit() {
    mask_ = slots_.size() - 1;
    limit_ = slots_.size() / (slots_.size() < (size_t{1} << 16) ? sparse_ : 2);
  }
  [[gnu::noinline]] void Grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.size() * 2, Slot{});
    --shift_;
    SetLimit();
    size_ = 0;
    for (const Slot& s : old) {
      if (s.used) Insert(s.id(), s.at);
    }
  }

  std::vector<Slot> slots_;
  size_t sparse_;
  size_t mask_ = 0;
  size_t limit_ = 0;    // entries beyond which Insert grows the table
  int shift_ = 64 - 6;  // log2(64) bits of the multiplied hash pick the home slot
  size_t size_ = 0;
};

}  // namespace walfmt
