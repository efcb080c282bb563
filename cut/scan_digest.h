// Internal to the cut scan (cut/scan.cpp): the summary's counts and digests
// of committed transactions by first cut (NodeSummary::first_cut, shared).
// Every commit is counted: Count stays inline here and adds to accumulators
// for the bucket being filled; Flush hands them to the summary's maps.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "cut/summary.h"

namespace walcut::cut::scan {

// Commits whose participants are all below kSetPeers are counted by their
// set of participants, a bit mask (FirstCutDigests::Count); kNoSet: counted
// one by one.
constexpr uint32_t kSetPeers = 8;
constexpr uint32_t kNoSet = ~uint32_t{0};
constexpr std::array<uint32_t, kSetPeers> kSetBit{1, 2, 4, 8, 16, 32, 64, 128};
// Bits set in each mask below 2^kSetPeers (no popcnt instruction on baseline x86-64).
constexpr std::array<uint8_t, size_t{1} << kSetPeers> kSetSize = [] {
  std::array<uint8_t, size_t{1} << kSetPeers> a{};
  for (size_t m = 1; m < a.size(); ++m) a[m] = static_cast<uint8_t>(a[m >> 1] + (m & 1));
  return a;
}();

// TxHash (cut/summary.h), inline for the scan's per-commit path.
inline uint64_t HashTx(const TxId& t) {
  // splitmix64 of the two fields: spreads ids that differ in one bit.
  uint64_t z = t.seq * 0x9E3779B97F4A7C15ull + (static_cast<uint64_t>(t.node) << 32 | t.node);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

class FirstCutDigests {
 public:
  FirstCutDigests(NodeSummary& s, uint32_t node) : s_(s), node_(node) {}

  // Counts a committed transaction in the bucket of its first cut f. The
  // bucket being filled is kept here (acc_*) and added to the summary's maps
  // by Flush when f changes: a commit costs a hash and a few additions.
  // `set`: the participants as a bit mask (see Scanner::FastCommit), or kNoSet.
  [[gnu::always_inline]] void Count(const TxId& t, std::span<const uint32_t> parts, uint64_t f, uint32_t set) {
    if (f != acc_f_) [[unlikely]] {
      Flush();
      acc_f_ = f;
    }
    ++acc_count_;
    acc_owned_ += parts.empty() || parts.front() >= node_;
    const uint64_t h = HashTx(t);
    if (set != kNoSet) [[likely]] {
      // One accumulator per set of participants, no loop over them: Flush
      // hands each set's digest to its members.
      acc_set_[set].x ^= h;
      ++acc_set_[set].n;
      return;
    }
    // The node's own entry is counted too (no branch on it) and never flushed.
    for (uint32_t p : parts) {
      if (p >= acc_peers_) [[unlikely]] {
        if (p >= kDensePeers) {
          if (p != node_) Digest(p, f, h, +1);
          continue;
        }
        acc_peer_.resize(p + 1);
        acc_peers_ = p + 1;
      }
      acc_peer_[p].x ^= h;
      ++acc_peer_[p].n;
    }
  }

  // Adds the bucket being filled to the summary's maps.
  [[gnu::noinline]] void Flush();
  // Adds (sign +1) or removes (-1) a committed transaction from the bucket of
  // its first cut f, in the summary's maps.
  void Bucket(const TxId& t, std::span<const uint32_t> parts, uint64_t f, int sign);
  // Moves bucket 1 to bucket c (Scanner::RelabelPrunedPrefix).
  void Relabel(uint64_t c);
  // Everything counted so far: the totals and, per peer, the digest of the
  // shared transactions (SnapshotMark::committed_before, shared_before).
  void Totals(FirstCutCount& count, std::map<uint32_t, TxDigest>& shared);
  // Drops the empty buckets that corrections left.
  void DropEmpty();

 private:
  static constexpr uint32_t kDensePeers = 4096;  // peers with an accumulator in acc_peer_

  void Digest(uint32_t peer, uint64_t f, uint64_t h, int sign);

  NodeSummary& s_;
  const uint32_t node_;
  uint64_t acc_f_ = 0;  // the first-cut bucket being filled (Count, Flush)
  uint64_t acc_count_ = 0;
  uint64_t acc_owned_ = 0;
  std::vector<TxDigest> acc_peer_;                          // by peer id below kDensePeers
  uint32_t acc_peers_ = 0;                                  // acc_peer_.size()
  std::array<TxDigest, size_t{1} << kSetPeers> acc_set_{};  // by set of participants below kSetPeers (Count)
};

}  // namespace walcut::cut::scan
