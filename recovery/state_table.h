// The state a restore builds, key -> value, kept compact: every entry lives in
// one byte arena (u16 key length, u32 value length, u32 value capacity, key,
// value padded to its capacity, a multiple of 8), and an open-addressing
// index of 8-byte slots (arena offset and a hash tag) finds it. Memory is
// about the size of the restored snapshot plus 24 bytes per key; a rewrite
// whose value fits the capacity is done in place (values that change length
// by a digit or two, as balances do, never move), others append and leave
// garbage (marked in its capacity's low bit) that is compacted away when it
// outweighs the live bytes.
// The big arrays ask for transparent huge pages (fewer TLB misses).
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <new>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "walfmt/assert.h"

namespace walcut::recovery {

// A growable array of trivially copyable T. Small ones live in malloc'd
// memory; from 2 MiB on, an anonymous mapping, 2 MiB aligned and advised for
// transparent huge pages, that grows with mremap: the kernel moves the page
// tables, not the bytes, so growing by doubling touches each page once
// instead of copying the whole array at every step. On this kind of machine
// (a VM) the first touch of a page is the expensive part: zeroing a fresh
// huge page cost more than a restore's whole apply pass on a state of a
// million keys per node (bench/RESULTS.md). clear() keeps the memory, so a
// table that is cleared and filled again touches no new page.
template <typename T>
class HugeArray {
 public:
  HugeArray() = default;
  HugeArray(const HugeArray&) = delete;
  HugeArray& operator=(const HugeArray&) = delete;
  HugeArray(HugeArray&& o) noexcept { Take(o); }
  HugeArray& operator=(HugeArray&& o) noexcept {
    if (this != &o) {
      Free();
      Take(o);
    }
    return *this;
  }
  ~HugeArray() { Free(); }

  size_t size() const { return size_; }
  size_t capacity() const { return cap_; }
  T* data() { return data_; }
  const T* data() const { return data_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }

  void Reserve(size_t n) {
    if (n <= cap_) return;
    size_t bytes = n * sizeof(T);
    void* p = nullptr;
    if (bytes < kHuge && !mapped_) {
      p = std::realloc(data_, bytes);
      if (p == nullptr) throw std::bad_alloc();
    } else {
      bytes = (bytes + kHuge - 1) / kHuge * kHuge;
      if (mapped_) {
        p = Remap(data_, map_bytes_, bytes);
      } else {
        p = Map(bytes);
        if (size_ > 0) std::memcpy(p, data_, size_ * sizeof(T));
        std::free(data_);
        mapped_ = true;
      }
      map_bytes_ = bytes;  // may hold a fraction of an element more than cap_
    }
    data_ = static_cast<T*>(p);
    cap_ = bytes / sizeof(T);
  }
  // Grows to n elements (new ones uninitialized), doubling the capacity.
  T* Grow(size_t n) {
    if (size_ + n > cap_) Reserve(std::max(size_ + n, cap_ * 2));
    T* at = data_ + size_;
    size_ += n;
    return at;
  }
  void Assign(size_t n, T v) {
    clear();
    Reserve(n);
    std::fill_n(data_, n, v);
    size_ = n;
  }
  void clear() { size_ = 0; }

 private:
  static constexpr size_t kHuge = size_t{2} << 20;

  // bytes (a multiple of kHuge) of fresh zero pages at a kHuge boundary.
  static void* Map(size_t bytes) {
    void* raw = mmap(nullptr, bytes + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) throw std::bad_alloc();
    const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
    const uintptr_t aligned = (start + kHuge - 1) / kHuge * kHuge;
    if (aligned > start) munmap(raw, aligned - start);
    const uintptr_t tail = aligned + bytes, end = start + bytes + kHuge;
    if (end > tail) munmap(reinterpret_cast<void*>(tail), end - tail);
    void* p = reinterpret_cast<void*>(aligned);
    madvise(p, bytes, MADV_HUGEPAGE);  // a hint: failure only costs speed
    return p;
  }
  static void* Remap(void* old, size_t old_bytes, size_t bytes) {
#ifdef MREMAP_MAYMOVE
    void* p = mremap(old, old_bytes, bytes, MREMAP_MAYMOVE);
    if (p == MAP_FAILED) throw std::bad_alloc();
    madvise(p, bytes, MADV_HUGEPAGE);
    return p;
#else
    void* p = Map(bytes);
    std::memcpy(p, old, old_bytes);
    munmap(old, old_bytes);
    return p;
#endif
  }
  void Free() {
    if (mapped_) {
      munmap(data_, map_bytes_);
    } else {
      std::free(data_);
    }
    data_ = nullptr;
    size_ = cap_ = map_bytes_ = 0;
    mapped_ = false;
  }
  void Take(HugeArray& o) {
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    cap_ = std::exchange(o.cap_, 0);
    map_bytes_ = std::exchange(o.map_bytes_, 0);
    mapped_ = std::exchange(o.mapped_, false);
  }
  T* data_ = nullptr;
  size_t size_ = 0;
  size_t cap_ = 0;
  size_t map_bytes_ = 0;  // the mapping's length, when mapped_
  bool mapped_ = false;
};

// Sorting a state by key for writing it out (the snapshot format wants
// increasing keys). Comparing keys with memcmp costs a call per comparison
// and walks the prefix keys share ("user/0000000", "acct/0000000") every
// time. Instead each entry is ranked by 8 bytes of its key as a big-endian
// number (zero-padded), so that most comparisons are one integer compare, and
// a large group needs no comparison at all (a radix sort): first the
// 8 bytes after the prefix all keys share; entries whose 8 bytes are equal
// and whose keys go on past them are then sorted among themselves on their
// next 8 bytes, and so on. Equal 8 bytes where a key ends within them mean
// that key is a prefix of the other (the padding is zeros and the other's
// bytes there are zeros too), so the shorter sorts first. The order is
// exactly the byte order of the keys, with no memcmp at all.
struct SortedEntry {
  std::string_view key;
  std::string_view value;
};

namespace sort_detail {

// The 8 bytes of k from byte `depth` on, big-endian, zero-padded.
inline uint64_t RankAt(std::string_view k, size_t depth) {
  uint64_t r = 0;
  if (k.size() >= depth + 8) {
    std::memcpy(&r, k.data() + depth, 8);
    return __builtin_bswap64(r);
  }
  for (size_t i = 0; i < 8; ++i) {
    const size_t at = depth + i;
    r = r << 8 | (at < k.size() ? static_cast<unsigned char>(k[at]) : 0u);
  }
  return r;
}

// An entry being sorted: `ref` finds it (what it is, the caller says: an
// arena offset, an index), below 2^56; during a round its top byte holds
// `rest` (9 for a key that goes on past the 8 bytes of the rank, else its
// length from the group's depth: the shorter first, it is a prefix of the
// others). A group sorts on (rank, rest).
struct Item {
  uint64_t rank;
  uint64_t ref;
};
inline constexpr uint64_t kRefMask = (uint64_t{1} << 56) - 1;
inline uint32_t RestOf(const Item& it) { return static_cast<uint32_t>(it.ref >> 56); }

// Sorts [b, e) by (rank, rest). From `radix_from` items on, a stable LSD
// radix sort, a byte per pass (rest, then the rank from its lowest byte),
// skipping every byte all items share, through `scratch` (n items); below
// it std::sort (a radix pass costs its 256 counts whatever the size).
inline void SortItems(Item* b, Item* e, Item* scratch, size_t radix_from) {
  const size_t n = static_cast<size_t>(e - b);
  if (n < radix_from) {
    std::sort(b, e, [](const Item& x, const Item& y) { return x.rank != y.rank ? x.rank < y.rank : x.ref < y.ref; });
    return;
  }
  Item* from = b;
  Item* to = scratch;
  auto digit = [](const Item& it, int d) {
    return d == 0 ? RestOf(it) : static_cast<uint32_t>((it.rank >> (8 * (d - 1))) & 0xFF);
  };
  std::array<std::array<size_t, 256>, 9> count{};
  for (const Item* it = b; it != e; ++it) {
    for (int d = 0; d < 9; ++d) ++count[d][digit(*it, d)];
  }
  for (int d = 0; d < 9; ++d) {
    std::array<size_t, 256>& c = count[d];
    if (c[digit(*b, d)] == n) continue;  // every item has this digit
    size_t sum = 0;
    for (size_t& x : c) {
      const size_t k = x;
      x = sum;
      sum += k;
    }
    for (size_t i = 0; i < n; ++i) to[c[digit(from[i], d)]++] = from[i];
    std::swap(from, to);
  }
  if (from != b) std::copy(from, from + n, b);
}

// Groups from this size on are sorted by the radix sort.
inline constexpr size_t kRadixFrom = 2048;

// Puts items [0, n) (their refs set, top bytes clear) in the byte order of
// their keys: key_of(ref) is an item's key, hint(ref) starts loading it.
// Each group of items whose keys agree on their first `depth` bytes is
// sorted on the 8 bytes after the bytes it all shares; items that tie there
// and go on form the groups of the next round. Pending groups wait on a
// stack of work, not in a recursion: it cannot overflow the thread's stack
// whatever the keys share. `scratch` holds n items. On return the top bytes
// are clear again.
template <typename KeyOf, typename Hint>
void SortByKey(Item* items, size_t n, Item* scratch, KeyOf&& key_of, Hint&& hint, size_t radix_from = kRadixFrom) {
  struct Group {
    size_t b;
    size_t e;
    size_t depth;
  };
  std::vector<Group> work;
  if (n > 1) work.push_back({0, n, 0});
  while (!work.empty()) {
    const Group g = work.back();
    work.pop_back();
    // Straight past the bytes the whole group shares: each round splits it.
    // This reads every key of a group whose keys share a prefix (all of
    // them, for a state of keys like "acct/000000001234"), scattered as
    // they are: hinted ahead like the ranking below.
    const std::string_view first = key_of(items[g.b].ref & kRefMask);
    size_t d = first.size();
    for (size_t x = g.b + 1; x != g.e && d > g.depth; ++x) {
      if (x + 16 < g.e) hint(items[x + 16].ref & kRefMask, g.depth);
      const std::string_view k = key_of(items[x].ref & kRefMask);
      size_t i = g.depth;
      const size_t m = std::min(d, k.size());
      while (i < m && first[i] == k[i]) ++i;
      d = i;
    }
    // The keys lie scattered: loading them ahead of use hides most of the
    // misses.
    for (size_t i = g.b; i != g.e; ++i) {
      if (i + 16 < g.e) hint(items[i + 16].ref & kRefMask, d);
      const uint64_t ref = items[i].ref & kRefMask;
      const std::string_view k = key_of(ref);
      items[i] = Item{RankAt(k, d), ref | uint64_t{std::min<size_t>(k.size() - d, 9)} << 56};
    }
    SortItems(items + g.b, items + g.e, scratch, radix_from);
    for (size_t run = g.b; run != g.e;) {
      size_t end = run + 1;
      while (end != g.e && items[end].rank == items[run].rank && RestOf(items[end]) == RestOf(items[run])) ++end;
      if (end - run > 1 && RestOf(items[run]) == 9) work.push_back({run, end, d + 8});
      for (size_t i = run; i != end; ++i) items[i].ref &= kRefMask;
      run = end;
    }
  }
}

}  // namespace sort_detail

// Calls visit(key, value) for the entries [b, e) in increasing key order;
// stops when visit returns false (and then returns false).
template <typename Visit>
bool VisitSorted(const SortedEntry* b, const SortedEntry* e, Visit&& visit) {
  const size_t n = static_cast<size_t>(e - b);
  std::vector<sort_detail::Item> items(2 * n);
  for (size_t i = 0; i < n; ++i) items[i].ref = i;
  sort_detail::SortByKey(
      items.data(), n, items.data() + n, [b](uint64_t i) { return b[i].key; },
      [b](uint64_t i, size_t d) { __builtin_prefetch(b[i].key.data() + d); });
  for (size_t i = 0; i < n; ++i) {
    const SortedEntry& x = b[items[i].ref];
    if (!visit(x.key, x.value)) return false;
  }
  return true;
}

// Keys and values are mostly a few bytes long: copying and comparing them
// through memcpy and memcmp costs a call each, more than the bytes. Up to 16
// bytes these use two overlapping loads (and stores) instead, or single
// bytes below 4.
[[gnu::always_inline]] inline void CopyShort(char* dst, const char* src, size_t n) {
  if (n >= 8 && n <= 16) {
    uint64_t a, b;
    std::memcpy(&a, src, 8);
    std::memcpy(&b, src + n - 8, 8);
    std::memcpy(dst, &a, 8);
    std::memcpy(dst + n - 8, &b, 8);
  } else if (n >= 4 && n < 8) {
    uint32_t a, b;
    std::memcpy(&a, src, 4);
    std::memcpy(&b, src + n - 4, 4);
    std::memcpy(dst, &a, 4);
    std::memcpy(dst + n - 4, &b, 4);
  } else if (n > 0 && n < 4) {  // bytes 0, n/2 and n-1 cover 1 to 3 bytes
    const char a = src[0], b = src[n / 2], c = src[n - 1];
    dst[0] = a;
    dst[n / 2] = b;
    dst[n - 1] = c;
  } else if (n > 16) {
    std::memcpy(dst, src, n);
  }
}

[[gnu::always_inline]] inline bool SameBytes(const char* x, const char* y, size_t n) {
  if (n >= 8 && n <= 16) {
    uint64_t a, b, c, d;
    std::memcpy(&a, x, 8);
    std::memcpy(&b, x + n - 8, 8);
    std::memcpy(&c, y, 8);
    std::memcpy(&d, y + n - 8, 8);
    return ((a ^ c) | (b ^ d)) == 0;
  }
  if (n >= 4 && n < 8) {
    uint32_t a, b, c, d;
    std::memcpy(&a, x, 4);
    std::memcpy(&b, x + n - 4, 4);
    std::memcpy(&c, y, 4);
    std::memcpy(&d, y + n - 4, 4);
    return ((a ^ c) | (b ^ d)) == 0;
  }
  return std::memcmp(x, y, n) == 0;
}

// A hint to load the cache line at p. GCC 12 drops a __builtin_prefetch
// that is the only effect of its code (a function that checks a slot and
// hints its entry compiled to a bare return); an asm statement stays. Never
// faults, whatever p is.
[[gnu::always_inline]] inline void LoadHint(const void* p) {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p);
#endif
}

class StateTable {
 public:
  explicit StateTable(size_t expected_keys = 0) { Rehash(Capacity(expected_keys)); }

  size_t size() const { return size_; }
  size_t arena_bytes() const { return arena_.size(); }

  // A 64-bit hash of the key: 8 bytes at a time, each folded in with a
  // 64x64->128-bit multiply, then the murmur3 finalizer. The partition, the
  // slot and the tag take different bits of it, so every bit must depend on
  // every key byte. Never stored: only this process's tables use it.
  static uint64_t Hash(std::string_view k) {
    const char* p = k.data();
    size_t n = k.size();
    uint64_t h = 0x243F6A8885A308D3ull ^ (n * 0x9E3779B97F4A7C15ull);
    if (n >= 8) {
      while (n > 8) {
        h = Fold(h ^ Load64(p));
        p += 8;
        n -= 8;
      }
      h = Fold(h ^ Load64(p + n - 8) ^ 0x13198A2E03707344ull);  // the last 8 bytes (may overlap)
    } else if (n > 0) {
      uint64_t w = 0;
      for (size_t i = 0; i < n; ++i) w |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
      h = Fold(h ^ w ^ 0x13198A2E03707344ull);
    }
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 33;
    return h;
  }

  // A hint ahead of a Put or Erase of a key whose Hash is h: starts loading
  // the slot its probe begins at, so that the write finds it in the cache.
  // Changes nothing.
  void Prefetch(uint64_t h) const { __builtin_prefetch(&slots_[h & mask_]); }
  // The second hint, once the slots have arrived (some records after
  // Prefetch): starts loading the entry a Put or Erase of that key will
  // compare and overwrite, found along its probe by the tag (a different
  // key with the same tag only wastes the hint). Looks at a few slots at
  // most; changes nothing.
  void PrefetchEntry(uint64_t h) const {
    size_t i = h & mask_;
    for (int n = 0; n < 4; ++n, i = (i + 1) & mask_) {
      const uint64_t s = slots_[i];
      if (s == kEmpty) return;
      if (s != kDead && Tag(s) == HashTag(h)) {
        const char* e = &arena_[Offset(s)];
        LoadHint(e);
        LoadHint(e + 64);
        return;
      }
    }
  }

  void Put(std::string_view key, std::string_view value) { Put(key, value, Hash(key)); }
  // Inline, the case of most writes of a restore: the key is in the slot its
  // probe starts at and the new value fits the old one's room.
  [[gnu::always_inline]] void Put(std::string_view key, std::string_view value, uint64_t h) {
    const uint64_t s = slots_[h & mask_];
    if (s != kEmpty && Tag(s) == HashTag(h)) {  // kDead's tag is never a HashTag
      const uint64_t off = Offset(s);
      if (KeyIs(off, key) && value.size() <= ValueCap(off)) {
        const uint32_t vl = static_cast<uint32_t>(value.size());
        std::memcpy(&arena_[off + 2], &vl, 4);
        CopyShort(&arena_[off + kEntryHeader + key.size()], value.data(), value.size());
        return;
      }
    }
    PutProbing(key, value, h);
  }

 private:
  [[gnu::noinline]] void PutProbing(std::string_view key, std::string_view value, uint64_t h) {
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
      if (!KeyIs(off, key)) continue;
      if (value.size() <= ValueCap(off)) {
        const uint32_t vl = static_cast<uint32_t>(value.size());
        std::memcpy(&arena_[off + 2], &vl, 4);
        CopyShort(&arena_[off + kEntryHeader + key.size()], value.data(), value.size());
      } else {
        garbage_ += RecordSize(off);
        MarkGarbage(off);
        slots_[i] = Slot(h, Append(key, value));
        MaybeCompact();
      }
      return;
    }
    // A new key. The table grows before it is 3/4 full (dead slots count):
    // then the probe is done again in the new one.
    if ((size_ + dead_ + 1) * 4 > slots_.size() * 3) {
      Rehash(Capacity(size_ + 1));
      grave = SIZE_MAX;
      for (i = h & mask_; slots_[i] != kEmpty; i = (i + 1) & mask_) {
      }
    }
    if (grave != SIZE_MAX) {
      i = grave;
      --dead_;
    }
    slots_[i] = Slot(h, Append(key, value));
    ++size_;
  }

 public:
  void Erase(std::string_view key) { Erase(key, Hash(key)); }
  void Erase(std::string_view key, uint64_t h) {
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const uint64_t s = slots_[i];
      if (s == kEmpty) return;
      if (s == kDead || Tag(s) != HashTag(h)) continue;
      const uint64_t off = Offset(s);
      if (!KeyIs(off, key)) continue;
      garbage_ += RecordSize(off);
      MarkGarbage(off);
      slots_[i] = kDead;
      --size_;
      ++dead_;
      MaybeCompact();
      return;
    }
  }

  // Calls visit(key, value) for every entry, in no particular order.
  template <typename Visit>
  void ForEach(Visit&& visit) const {
    for (size_t i = 0; i < slots_.size(); ++i) {
      const uint64_t s = slots_[i];
      if (s != kEmpty && s != kDead) visit(KeyAt(Offset(s)), ValueAt(Offset(s)));
    }
  }

  // Calls visit(key, value) for every entry in increasing key order; stops
  // when visit returns false (and then returns false). The entries are
  // sorted as 16-byte items in a buffer the table keeps (and reuses after
  // Clear): twice 16 bytes per key.
  template <typename Visit>
  bool ForEachSorted(Visit&& visit) const {
    sorted_.clear();
    sorted_.Reserve(2 * size_);
    sort_detail::Item* items = sorted_.Grow(size_);
    // Gathered in arena order, not slot order: the sort's first round then
    // reads the keys front to back, as the hardware prefetcher follows,
    // instead of at random.
    size_t n = 0;
    ForEachLive([&](uint64_t off) { items[n++].ref = off; });
    sort_detail::Item* scratch = sorted_.Grow(size_);
    sort_detail::SortByKey(
        items, n, scratch, [this](uint64_t off) { return KeyAt(off); },
        [this](uint64_t off, size_t d) { LoadHint(&arena_[off + kEntryHeader + d]); });
    for (size_t i = 0; i < n; ++i) {
      if (i + 8 < n) {  // in key order the entries are scattered over the arena
        const char* e = &arena_[items[i + 8].ref];
        LoadHint(e);
        LoadHint(e + 64);
        LoadHint(e + 128);
      }
      const uint64_t off = items[i].ref;
      if (!visit(KeyAt(off), ValueAt(off))) return false;
    }
    return true;
  }

  // Empties the table but keeps its memory (arena, slots and sort buffer),
  // so that filling it again touches no new page; the slots are sized for
  // at least expected_keys, and never fewer than before.
  void Clear(size_t expected_keys = 0) {
    arena_.clear();
    size_ = 0;
    dead_ = 0;
    garbage_ = 0;
    const size_t capacity = std::max(Capacity(expected_keys), slots_.size());
    slots_.Assign(capacity, kEmpty);
    mask_ = capacity - 1;
  }

 private:
  static constexpr int kOffsetBits = 40;  // arenas up to 1 TiB
  static constexpr uint64_t kOffsetMask = (uint64_t{1} << kOffsetBits) - 1;
  static constexpr uint64_t kEmpty = 0;
  static constexpr uint64_t kDead = ~uint64_t{0};
  static constexpr size_t kEntryHeader = 10;  // u16 key length, u32 value length, u32 value capacity

  static uint64_t Load64(const char* p) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    return w;
  }
  static uint64_t Fold(uint64_t x) {
    const unsigned __int128 m = static_cast<unsigned __int128>(x) * 0x9E3779B97F4A7C15ull;
    return static_cast<uint64_t>(m) ^ static_cast<uint64_t>(m >> 64);
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
  // The capacity field: the value's room, a multiple of 8, plus kGarbage
  // once the entry is no longer the key's (erased, or its value appended
  // anew). Only the walks in arena order (ForEachLive) read the mark: a
  // slot never leads to garbage.
  static constexpr uint32_t kGarbage = 1;
  uint32_t CapField(uint64_t off) const {
    uint32_t v;
    std::memcpy(&v, &arena_[off + 6], 4);
    return v;
  }
  uint32_t ValueCap(uint64_t off) const { return CapField(off) & ~uint32_t{7}; }
  void MarkGarbage(uint64_t off) {
    const uint32_t v = CapField(off) | kGarbage;
    std::memcpy(&arena_[off + 6], &v, 4);
  }
  std::string_view KeyAt(uint64_t off) const { return {&arena_[off + kEntryHeader], KeyLen(off)}; }
  bool KeyIs(uint64_t off, std::string_view key) const {
    return KeyLen(off) == key.size() && SameBytes(&arena_[off + kEntryHeader], key.data(), key.size());
  }
  std::string_view ValueAt(uint64_t off) const { return {&arena_[off + kEntryHeader + KeyLen(off)], ValueLen(off)}; }
  uint64_t RecordSize(uint64_t off) const { return kEntryHeader + KeyLen(off) + uint64_t{ValueCap(off)}; }

  uint64_t Append(std::string_view key, std::string_view value) {
    const uint64_t off = arena_.size();
    const uint16_t kl = static_cast<uint16_t>(key.size());
    const uint32_t vl = static_cast<uint32_t>(value.size());
    const uint32_t cap = static_cast<uint32_t>((value.size() + 8) & ~size_t{7});  // at least one spare byte
    char* p = arena_.Grow(kEntryHeader + key.size() + cap);
    std::memcpy(p, &kl, 2);
    std::memcpy(p + 2, &vl, 4);
    std::memcpy(p + 6, &cap, 4);
    CopyShort(p + kEntryHeader, key.data(), key.size());
    CopyShort(p + kEntryHeader + key.size(), value.data(), value.size());
    return off;
  }

  void MaybeCompact() {
    if (garbage_ < (1u << 20) || garbage_ * 2 < arena_.size()) return;
    HugeArray<char> fresh;
    fresh.Reserve(arena_.size() - garbage_);
    for (size_t i = 0; i < slots_.size(); ++i) {
      uint64_t& s = slots_[i];
      if (s == kEmpty || s == kDead) continue;
      const uint64_t off = Offset(s);
      const uint64_t n = RecordSize(off);
      const uint64_t at = fresh.size();
      std::memcpy(fresh.Grow(n), &arena_[off], n);
      s = (s & ~kOffsetMask) | (at + 1);
    }
    arena_ = std::move(fresh);
    garbage_ = 0;
  }

  // Sizes the slots for `capacity` and puts every live entry in them again.
  // The entries are taken in arena order, front to back, reading each one's
  // header to step to the next and skipping the garbage: the hardware
  // prefetcher follows a sequential read, where taking them in the old
  // slots' order would miss the cache at every key. The slot each key goes
  // to is hinted kAhead keys before it is written. The slot array grows in
  // place (HugeArray keeps its pages), so only the added part is fresh
  // memory.
  void Rehash(size_t capacity) {
    slots_.Assign(capacity, kEmpty);
    mask_ = capacity - 1;
    dead_ = 0;
    constexpr size_t kAhead = 16;
    struct Pending {
      uint64_t hash;
      uint64_t off;
    };
    Pending ring[kAhead];
    size_t n = 0;
    auto place = [this](const Pending& p) {
      size_t i = p.hash & mask_;
      while (slots_[i] != kEmpty) i = (i + 1) & mask_;
      slots_[i] = Slot(p.hash, p.off);
    };
    ForEachLive([&](uint64_t off) {
      const uint64_t h = Hash(KeyAt(off));
      __builtin_prefetch(&slots_[h & mask_]);
      Pending& at = ring[n++ % kAhead];
      if (n > kAhead) place(at);
      at = {h, off};
    });
    for (size_t k = n > kAhead ? n - kAhead : 0; k < n; ++k) place(ring[k % kAhead]);
  }

  // Calls f(offset) for every live entry, in arena order, skipping the
  // garbage. The count must come to size_: a live entry too many would
  // overfill the slots a rehash puts them in (its probe would never stop),
  // one too few would lose a key, so either stops the process.
  template <typename F>
  void ForEachLive(F&& f) const {
    size_t n = 0;
    for (uint64_t off = 0; off < arena_.size(); off += RecordSize(off)) {
      if (CapField(off) & kGarbage) continue;
      WALCUT_ASSERT(n < size_, "the arena holds more live entries than the table has keys");
      ++n;
      f(off);
    }
    WALCUT_ASSERT(n == size_, "the arena holds fewer live entries than the table has keys");
  }

  HugeArray<char> arena_;
  HugeArray<uint64_t> slots_;
  mutable HugeArray<sort_detail::Item> sorted_;
  size_t mask_ = 0;
  size_t size_ = 0;
  size_t dead_ = 0;
  uint64_t garbage_ = 0;
};

}  // namespace walcut::recovery
