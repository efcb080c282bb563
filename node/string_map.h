// A hash map from string keys to values for the node's per-key state (its data
// and its locks), the hottest lookups of the simulation: every key of every
// lock request and every committed write goes through one.
//
// std::unordered_map<std::string, ...> cost a tenth of a run there: each
// lookup walks a bucket list of separately allocated nodes and computes a
// modulo by a prime per node visited. This map keeps the entries in one array
// (open addressing, linear probing, power-of-two capacity), so a lookup is
// usually one cache line and a mask. Deletion shifts the following entries
// back instead of leaving tombstones, so lookups never slow down with churn.
//
// Iteration order is unspecified (as with unordered_map); the node never
// depends on it for anything it writes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace walcut::node {

template <typename V>
class StringMap {
 public:
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // The value of `key`, or nullptr.
  V* find(std::string_view key) {
    if (size_ == 0) return nullptr;
    const uint64_t h = Hash(key);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (!s.used) return nullptr;
      if (s.hash == h && s.key == key) return &s.value;
    }
  }
  const V* find(std::string_view key) const { return const_cast<StringMap*>(this)->find(key); }

  // Inserts `value` unless `key` is present; returns the entry and whether it
  // was inserted (as unordered_map::emplace).
  std::pair<V*, bool> emplace(std::string_view key, V value) {
    if ((size_ + 1) * 2 > slots_.size()) Grow();
    const uint64_t h = Hash(key);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (!s.used) {
        s.used = true;
        s.hash = h;
        s.key.assign(key);
        s.value = std::move(value);
        ++size_;
        return {&s.value, true};
      }
      if (s.hash == h && s.key == key) return {&s.value, false};
    }
  }
  V& operator[](std::string_view key) { return *emplace(key, V{}).first; }

  bool erase(std::string_view key) {
    if (size_ == 0) return false;
    const uint64_t h = Hash(key);
    size_t i = h & mask_;
    for (;; i = (i + 1) & mask_) {
      if (!slots_[i].used) return false;
      if (slots_[i].hash == h && slots_[i].key == key) break;
    }
    // Backward shift: move each following entry of the run into the hole
    // unless its home slot lies cyclically after the hole (then it would no
    // longer be found from its home).
    for (size_t j = (i + 1) & mask_; slots_[j].used; j = (j + 1) & mask_) {
      const size_t home = slots_[j].hash & mask_;
      const bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
      if (stays) continue;
      std::swap(slots_[i], slots_[j]);
      i = j;
    }
    slots_[i].used = false;
    --size_;
    return true;
  }

  void clear() {
    for (Slot& s : slots_) s.used = false;
    size_ = 0;
  }

  // f(const std::string& key, const V& value) for every entry.
  template <typename F>
  void for_each(F&& f) const {
    for (const Slot& s : slots_) {
      if (s.used) f(s.key, s.value);
    }
  }

 private:
  struct Slot {
    uint64_t hash = 0;
    bool used = false;
    std::string key;
    V value{};
  };
  static uint64_t Hash(std::string_view key) { return std::hash<std::string_view>{}(key); }

  void Grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.clear();
    slots_.resize(old.empty() ? 64 : old.size() * 2);
    mask_ = slots_.size() - 1;
    for (Slot& s : old) {
      if (!s.used) continue;
      size_t i = s.hash & mask_;
      while (slots_[i].used) i = (i + 1) & mask_;
      slots_[i] = std::move(s);
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace walcut::node
