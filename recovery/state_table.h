// The state a restore builds, key -> value, kept compact: every entry lives in
// one byte arena as it would in a snapshot file (u16 key length, u32 value
// length, key, value), and an open-addressing index of 8-byte slots (arena
// offset and a hash tag) finds it. Memory is about the size of the restored
// snapshot plus 16 bytes per key; a write to an existing key of the same
// value length is done in place, other rewrites append and leave garbage
// that is compacted away when it outweighs the live bytes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace walcut::recovery {

class StateTable {
 public:
  explicit StateTable(size_t expected_keys = 0) { Rehash(Capacity(expected_keys)); }

  size_t size() const { return size_; }
  size_t arena_bytes() const { return arena_.size(); }

  void Put(std::string_view key, std::string_view value) {
    if ((size_ + dead_ + 1) * 4 > slots_.size() * 3) Rehash(Capacity(size_ + 1));
    const uint64_t h = Hash(key);
    size_t i = h & mask_;
    size_t grave = SIZE_MAX;
    for (;; i = (i + 1) & mask_) {
      const uint64_t s = slots_[i];
      if (s == kEmpty) break;
      if (s == kDead) {
        if (grave == SIZE_MAX) grave = i;
        continue;
      }
      if (Tag(s) != HashTag(h)) continue;
      const uint64_t off = Offset(s);
      if (KeyAt(off) != key) continue;
      if (ValueLen(off) == value.size()) {
        std::memcpy(&arena_[off + 6 + key.size()], value.data(), value.size());
      } else {
        garbage_ += RecordSize(off);
        slots_[i] = Slot(h, Append(key, value));
        MaybeCompact();
      }
      return;
    }
    if (grave != SIZE_MAX) {
      i = grave;
      --dead_;
    }
    slots_[i] = Slot(h, Append(key, value));
    ++size_;
  }

  void Erase(std::string_view key) {
    const uint64_t h = Hash(key);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const uint64_t s = slots_[i];
      if (s == kEmpty) return;
      if (s == kDead || Tag(s) != HashTag(h)) continue;
      const uint64_t off = Offset(s);
      if (KeyAt(off) != key) continue;
      garbage_ += RecordSize(off);
      slots_[i] = kDead;
      --size_;
      ++dead_;
      MaybeCompact();
      return;
    }
  }

  // Calls visit(key, value) for every entry in increasing key order.
  template <typename Visit>
  bool ForEachSorted(Visit&& visit) const {
    std::vector<uint64_t> offs;
    offs.reserve(size_);
    for (uint64_t s : slots_) {
      if (s != kEmpty && s != kDead) offs.push_back(Offset(s));
    }
    std::sort(offs.begin(), offs.end(), [&](uint64_t a, uint64_t b) { return KeyAt(a) < KeyAt(b); });
    for (uint64_t o : offs) {
      if (!visit(KeyAt(o), ValueAt(o))) return false;
    }
    return true;
  }

 private:
  static constexpr int kOffsetBits = 40;  // arenas up to 1 TiB
  static constexpr uint64_t kOffsetMask = (uint64_t{1} << kOffsetBits) - 1;
  static constexpr uint64_t kEmpty = 0;
  static constexpr uint64_t kDead = ~uint64_t{0};

  static uint64_t Hash(std::string_view k) {
    uint64_t h = std::hash<std::string_view>{}(k);
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 33;
    return h;
  }
  // A slot: bits 0-39 the arena offset plus one (so a slot is never kEmpty),
  // bits 40-62 the top 23 bits of the hash (the probe start uses the low
  // bits), bit 63 zero (so a slot is never kDead).
  static uint64_t Tag(uint64_t slot) { return slot >> kOffsetBits; }
  static uint64_t HashTag(uint64_t h) { return h >> 41; }
  static uint64_t Slot(uint64_t h, uint64_t off) { return HashTag(h) << kOffsetBits | (off + 1); }
  static uint64_t Offset(uint64_t s) { return (s & kOffsetMask) - 1; }
  static size_t Capacity(size_t n) {
    size_t c = 16;
    while (c * 3 < (n + 1) * 4) c <<= 1;
    return c;
  }

  uint16_t KeyLen(uint64_t off) const {
    uint16_t v;
    std::memcpy(&v, &arena_[off], 2);
    return v;
  }
  uint32_t ValueLen(uint64_t off) const {
    uint32_t v;
    std::memcpy(&v, &arena_[off + 2], 4);
    return v;
  }
  std::string_view KeyAt(uint64_t off) const { return {&arena_[off + 6], KeyLen(off)}; }
  std::string_view ValueAt(uint64_t off) const { return {&arena_[off + 6 + KeyLen(off)], ValueLen(off)}; }
  uint64_t RecordSize(uint64_t off) const { return 6 + KeyLen(off) + uint64_t{ValueLen(off)}; }

  uint64_t Append(std::string_view key, std::string_view value) {
    const uint64_t off = arena_.size();
    const uint16_t kl = static_cast<uint16_t>(key.size());
    const uint32_t vl = static_cast<uint32_t>(value.size());
    arena_.append(reinterpret_cast<const char*>(&kl), 2);
    arena_.append(reinterpret_cast<const char*>(&vl), 4);
    arena_.append(key.data(), key.size());
    arena_.append(value.data(), value.size());
    return off;
  }

  void MaybeCompact() {
    if (garbage_ < (1u << 20) || garbage_ * 2 < arena_.size()) return;
    std::string fresh;
    fresh.reserve(arena_.size() - garbage_);
    for (uint64_t& s : slots_) {
      if (s == kEmpty || s == kDead) continue;
      const uint64_t off = Offset(s);
      const uint64_t n = RecordSize(off);
      const uint64_t at = fresh.size();
      fresh.append(&arena_[off], n);
      s = (s & ~kOffsetMask) | (at + 1);
    }
    arena_ = std::move(fresh);
    garbage_ = 0;
  }

  void Rehash(size_t capacity) {
    std::vector<uint64_t> old = std::move(slots_);
    slots_.assign(capacity, kEmpty);
    mask_ = capacity - 1;
    dead_ = 0;
    for (uint64_t s : old) {
      if (s == kEmpty || s == kDead) continue;
      size_t i = Hash(KeyAt(Offset(s))) & mask_;
      while (slots_[i] != kEmpty) i = (i + 1) & mask_;
      slots_[i] = s;
    }
  }

  std::string arena_;
  std::vector<uint64_t> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
  size_t dead_ = 0;
  uint64_t garbage_ = 0;
};

}  // namespace walcut::recovery
