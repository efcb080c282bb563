// The state a restore builds: key -> value in an open-addressing table
// (linear probing, keys and values inline in the slots), so that applying a
// write costs one or two cache lines instead of a chain of pointers. Keys are
// looked up by string_view; no allocation for a key that exists.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace walcut::recovery {

class FlatState {
 public:
  explicit FlatState(size_t expected = 0) { Rehash(Capacity(expected)); }

  size_t size() const { return size_; }

  void Put(std::string_view key, std::string_view value) {
    if ((size_ + dead_ + 1) * 2 > slots_.size()) Rehash(Capacity(size_ + 1));
    const uint64_t h = Hash(key);
    size_t i = h & mask_;
    Slot* grave = nullptr;
    for (;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.state == kEmpty) break;
      if (s.state == kDead) {
        if (!grave) grave = &s;
      } else if (s.hash == h && s.key == key) {
        s.value.assign(value.data(), value.size());
        return;
      }
    }
    Slot& s = grave ? *grave : slots_[i];
    if (grave) --dead_;
    s.state = kLive;
    s.hash = h;
    s.key.assign(key.data(), key.size());
    s.value.assign(value.data(), value.size());
    ++size_;
  }

  void Erase(std::string_view key) {
    const uint64_t h = Hash(key);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.state == kEmpty) return;
      if (s.state == kLive && s.hash == h && s.key == key) {
        s.state = kDead;
        s.key.clear();
        s.value.clear();
        --size_;
        ++dead_;
        return;
      }
    }
  }

  // Moves every entry into a sorted map (the snapshot file's order); the
  // table is empty afterwards.
  std::map<std::string, std::string> TakeSorted() {
    std::map<std::string, std::string> out;
    for (Slot& s : slots_) {
      if (s.state == kLive) out.emplace(std::move(s.key), std::move(s.value));
    }
    slots_ = {};
    Rehash(16);
    return out;
  }

 private:
  enum : uint8_t { kEmpty = 0, kLive = 1, kDead = 2 };
  struct Slot {
    uint64_t hash = 0;
    uint8_t state = kEmpty;
    std::string key;
    std::string value;
  };

  static uint64_t Hash(std::string_view k) {
    // std::hash of a string_view, spread so that the low bits (the probe
    // start) depend on every input bit.
    uint64_t h = std::hash<std::string_view>{}(k);
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 33;
    return h;
  }
  static size_t Capacity(size_t n) {
    size_t c = 16;
    while (c < n * 2 + 2) c <<= 1;
    return c;
  }
  void Rehash(size_t capacity) {
    std::vector<Slot> old = std::move(slots_);
    slots_ = std::vector<Slot>(capacity);
    mask_ = capacity - 1;
    size_ = 0;
    dead_ = 0;
    for (Slot& s : old) {
      if (s.state != kLive) continue;
      size_t i = s.hash & mask_;
      while (slots_[i].state != kEmpty) i = (i + 1) & mask_;
      slots_[i] = std::move(s);
      ++size_;
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
  size_t dead_ = 0;
};

}  // namespace walcut::recovery
