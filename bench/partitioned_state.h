// PartitionedState: the restore's state table behind per-partition write
// buffers, which the restore used before the key hash got cheap. Kept for
// bench/statebench.cpp, which compares it with one recovery::StateTable, and
// for its model test (tests/recovery_state_table_test.cpp); no library code
// uses it.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "recovery/state_table.h"

namespace walcut::bench {

using recovery::SortedEntry;
using recovery::StateTable;
using recovery::VisitSorted;

// A state split by key hash into partitions of a size that stays in the
// caches: a write is appended to its partition's buffer (sequential, cheap),
// and a full buffer is applied at once to its partition's table, whose slots
// and entries are then cache-resident. Writes to one key go to one partition
// and are applied in order, so the result is that of applying every write in
// order. The restore used it until the key hash got cheap; it now writes to
// one StateTable and prefetches each write's slot when the TX_DATA is read,
// well before the commit applies it (recovery/node_restore.cpp), which costs less
// than buffering every write (bench/statebench compares the two tables).
class PartitionedState {
 public:
  explicit PartitionedState(size_t expected_keys = 0, size_t buffer_bytes = size_t{64} << 10)
      : buffer_bytes_(buffer_bytes) {
    tables_.reserve(kPartitions);
    for (size_t i = 0; i < kPartitions; ++i) tables_.emplace_back(expected_keys / kPartitions);
    buffers_.resize(kPartitions);
    for (auto& b : buffers_) b.reserve(buffer_bytes_ + 256);
  }

  void Put(std::string_view key, std::string_view value) { Add(kPut, key, value); }
  void Erase(std::string_view key) { Add(kErase, key, {}); }

  // Applies every buffered write; size() and ForEachSorted see them after.
  void Flush() {
    for (size_t p = 0; p < kPartitions; ++p) Apply(p);
  }

  size_t size() const {
    size_t n = 0;
    for (const auto& t : tables_) n += t.size();
    return n;
  }

  // After Flush: calls visit(key, value) for every entry in increasing key
  // order.
  template <typename Visit>
  bool ForEachSorted(Visit&& visit) const {
    std::vector<SortedEntry> all;
    all.reserve(size());
    for (const auto& t : tables_) {
      t.ForEach([&](std::string_view k, std::string_view v) { all.push_back({k, v}); });
    }
    return VisitSorted(all.data(), all.data() + all.size(), visit);
  }

 private:
  static constexpr size_t kPartitions = 256;
  static constexpr uint8_t kPut = 1, kErase = 2;
  // A buffered write: u64 hash, u8 op, u16 key length, u32 value length,
  // key, value.
  static constexpr size_t kHeader = 15;

  void Add(uint8_t op, std::string_view key, std::string_view value) {
    const uint64_t h = StateTable::Hash(key);
    // Bits 32-39 pick the partition: the table uses the low bits for the
    // slot and the top bits for its tag.
    const size_t p = (h >> 32) & (kPartitions - 1);
    std::string& b = buffers_[p];
    const uint16_t kl = static_cast<uint16_t>(key.size());
    const uint32_t vl = static_cast<uint32_t>(value.size());
    char head[kHeader];
    std::memcpy(head, &h, 8);
    head[8] = static_cast<char>(op);
    std::memcpy(head + 9, &kl, 2);
    std::memcpy(head + 11, &vl, 4);
    b.append(head, kHeader);
    b.append(key.data(), key.size());
    b.append(value.data(), value.size());
    if (b.size() >= buffer_bytes_) Apply(p);
  }

  void Apply(size_t p) {
    std::string& b = buffers_[p];
    StateTable& t = tables_[p];
    for (size_t at = 0; at < b.size();) {
      uint64_t h;
      uint16_t kl;
      uint32_t vl;
      std::memcpy(&h, &b[at], 8);
      const uint8_t op = static_cast<uint8_t>(b[at + 8]);
      std::memcpy(&kl, &b[at + 9], 2);
      std::memcpy(&vl, &b[at + 11], 4);
      const std::string_view key(&b[at + kHeader], kl);
      if (op == kErase) {
        t.Erase(key, h);
      } else {
        t.Put(key, std::string_view(&b[at + kHeader + kl], vl), h);
      }
      at += kHeader + kl + vl;
    }
    b.clear();
  }

  size_t buffer_bytes_;
  std::vector<StateTable> tables_;
  std::vector<std::string> buffers_;
};

}  // namespace walcut::bench
