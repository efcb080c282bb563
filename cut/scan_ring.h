// Internal to the cut scan (cut/scan.cpp): what the scan remembers of a
// finished transaction, and the ring of recent commits and rollbacks that a
// cut starting next may track (rule 5). The ring is written on every commit:
// Remember stays inline here.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "walfmt/lsn.h"
#include "walfmt/record.h"

namespace walcut::cut::scan {

using walfmt::Lsn;
using walfmt::TxId;

template <typename V>
using TxMap = std::unordered_map<TxId, V, walfmt::TxIdHash>;
using TxSet = std::unordered_set<TxId, walfmt::TxIdHash>;

// A transaction's participants: a few inline (the common case, copied on
// every commit into the ring of recent commits without allocating), more on
// the heap.
constexpr uint32_t kInlineParticipants = 6;
using InlineParts = std::array<uint32_t, kInlineParticipants>;

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
// commit, so it holds the participants inline (more live in the ring's
// more_) and no pointer to free.
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

// The last max(recent_commits, 4 x peak in flight) commits and rollbacks:
// written on every commit, searched only when a cut starts or finishes or
// something looks wrong.
class CommitRing {
 public:
  explicit CommitRing(size_t recent_commits) : recent_(recent_commits) {}

  // The peak of transactions in flight grew: the ring grows with it.
  void Fit(uint64_t peak_in_flight);

  // `whole`, when not null, holds the participants (up to
  // kInlineParticipants) in its first slots and is copied as a block.
  [[gnu::always_inline]] void Remember(const TxId& t, const Lsn& at, const Lsn& first, uint64_t time_us,
                                       uint64_t marker, uint64_t f, bool recovered, bool rolled_back,
                                       std::span<const uint32_t> parts, const InlineParts* whole = nullptr) {
    if (next_ >= cap_) [[unlikely]] {
      if (ring_.empty()) Fit(peak_);
      used_ = std::max(used_, next_);
      next_ = 0;
    }
    RingEntry& e = ring_[next_];
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
      more_[next_].assign(parts.begin(), parts.end());
    }
    ++next_;
  }

  // Slots of the ring that hold an entry.
  size_t Used() const { return std::max(used_, next_); }
  // The slots that hold an entry, in slot order (not by age).
  std::span<RingEntry> Entries() { return {ring_.data(), Used()}; }
  std::span<const RingEntry> Entries() const { return {ring_.data(), Used()}; }
  // The newest entry of transaction t, or nullptr.
  RingEntry* Recent(const TxId& t);
  std::span<const uint32_t> PartsOf(const RingEntry& e) const;
  Done ToDone(const RingEntry& e) const;
  // Every entry into `out`, oldest first, so that the newest of a
  // transaction's wins.
  void CopyTo(TxMap<Done>& out) const;

 private:
  size_t recent_;
  uint64_t peak_ = 0;
  std::vector<RingEntry> ring_;
  std::unordered_map<size_t, std::vector<uint32_t>> more_;  // by slot: participants beyond the inline ones
  size_t next_ = 0;
  size_t used_ = 0;  // slots filled before next_ last wrapped (see Used)
  size_t cap_ = 0;   // ring_.size(), kept here: no division by sizeof(RingEntry) per commit
};

}  // namespace walcut::cut::scan
