// The restore's state table against a std::map model: random puts (values
// that grow past their capacity, shrink, keep their length), erases, and the
// same operations through PartitionedState (buffered per partition, applied
// when a buffer fills), over enough keys and writes to make the tables rehash
// and compact their arenas several times.
#include <algorithm>
#include <cstring>
#include <map>
#include <new>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "bench/partitioned_state.h"
#include "recovery/state_table.h"

using walcut::bench::PartitionedState;
using walcut::recovery::HugeArray;
using walcut::recovery::StateTable;

namespace {

uint64_t Next(uint64_t& s) {  // splitmix64
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

template <typename Table>
std::map<std::string, std::string> Contents(const Table& t) {
  std::map<std::string, std::string> out;
  std::string prev;
  bool first = true;
  t.ForEachSorted([&](std::string_view k, std::string_view v) {
    if (!first) CHECK(prev < k);  // increasing key order
    first = false;
    prev = std::string(k);
    out.emplace(k, v);
    return true;
  });
  return out;
}

}  // namespace

TEST_CASE("state table: random puts and erases match a std::map, direct and partitioned") {
  for (uint64_t seed : {1ull, 2ull, 3ull}) {
    for (bool partitioned : {false, true}) {
      INFO(fmt::format("seed {} partitioned {}", seed, partitioned));
      uint64_t s = seed;
      StateTable t;
      // Small buffers: many partial applies between the checks.
      PartitionedState p(0, 512);
      std::map<std::string, std::string> model;
      std::vector<std::string> held;
      held.reserve(200000);
      const uint64_t keys = seed == 1 ? 50 : 20000;
      for (int i = 0; i < 150000; ++i) {
        const uint64_t r = Next(s);
        held.push_back(fmt::format("key/{}", r % keys));
        const std::string& key = held.back();
        if ((r >> 20) % 10 == 0) {
          model.erase(key);
          if (partitioned)
            p.Erase(key);
          else
            t.Erase(key);
        } else {
          // Lengths 0..40: rewrites grow past the spare capacity, shrink and
          // stay the same.
          held.push_back(std::string((r >> 32) % 41, static_cast<char>('a' + (r >> 8) % 26)));
          const std::string& value = held.back();
          model[key] = value;
          if (partitioned)
            p.Put(key, value);
          else
            t.Put(key, value);
        }
        if (i % 50000 == 49999) {
          p.Flush();
          REQUIRE((partitioned ? Contents(p) : Contents(t)) == model);
          REQUIRE((partitioned ? p.size() : t.size()) == model.size());
          held.clear();
        }
      }
      p.Flush();
      CHECK((partitioned ? Contents(p) : Contents(t)) == model);
    }
  }
}

TEST_CASE("state table: values keep their bytes when neighbours move") {
  StateTable t;
  t.Put("a", "1");
  t.Put("b", std::string(100, 'x'));
  t.Put("a", "12345678901234567890");  // past its capacity: moves to the end of the arena
  t.Put("b", "");
  t.Put("c", "third");
  t.Erase("missing");
  const auto m = Contents(t);
  CHECK(m == std::map<std::string, std::string>{{"a", "12345678901234567890"}, {"b", ""}, {"c", "third"}});
  t.Erase("a");
  CHECK(t.size() == 2);
  CHECK(Contents(t).count("a") == 0);
}

TEST_CASE("state table: visits in byte order of the keys, whatever they share") {
  // Keys that defeat an 8-byte rank: a long shared prefix, prefixes of each
  // other, zero bytes (the rank pads with zeros), bytes above 0x7f (compared
  // unsigned), the empty key.
  std::vector<std::string> keys = {"",
                                   std::string(1, '\0'),
                                   std::string(2, '\0'),
                                   "a",
                                   std::string("a\0", 2),
                                   std::string("a\0\0\0\0\0\0\0\0\1", 10),
                                   std::string("a\0\0\0\0\0\0\0\0", 9)};
  const std::string shared = "tenant/0000000042/account/";
  for (int i = 0; i < 300; ++i) {
    keys.push_back(shared + fmt::format("{:05}", (i * 7919) % 1000));
    keys.push_back(shared + fmt::format("{:05}", (i * 7919) % 1000) + std::string(1, '\0'));
    keys.push_back(shared + fmt::format("{:05}", (i * 7919) % 1000) + "\xff\x80");
    keys.push_back(shared.substr(0, i % shared.size()));
    keys.push_back(std::string("\xff", 1) + std::to_string(i));
  }
  for (bool with_empty : {true, false}) {
    INFO("with the empty key: " << with_empty);
    StateTable t;
    PartitionedState p(0, 256);
    std::map<std::string, std::string> model;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (!with_empty && keys[i].empty()) continue;
      model[keys[i]] = std::to_string(i);
      t.Put(keys[i], std::to_string(i));
      p.Put(keys[i], std::to_string(i));
    }
    p.Flush();
    CHECK(Contents(t) == model);
    CHECK(Contents(p) == model);
    // Only the shared prefix: every key of the state starts with it.
    StateTable only;
    std::map<std::string, std::string> only_model;
    for (int i = 999; i >= 0; --i) {
      const std::string k = shared + std::to_string(i);
      only.Put(k, "v");
      only_model[k] = "v";
    }
    CHECK(Contents(only) == only_model);
  }
}

TEST_CASE("state table: the key hash spreads bank-like keys evenly over the partitions") {
  // The partition is bits 32-39 of the hash: 256 partitions of 100,000 keys
  // that differ only in their last digits should each get close to 1/256.
  std::vector<int> count(256, 0);
  for (int i = 0; i < 100000; ++i) {
    const uint64_t h = StateTable::Hash(fmt::format("acct/{:06}", i));
    ++count[(h >> 32) & 255];
  }
  const auto [lo, hi] = std::minmax_element(count.begin(), count.end());
  INFO("partition sizes " << *lo << " to " << *hi << ", mean 390.6");
  CHECK(*lo > 300);
  CHECK(*hi < 490);
  // The low bits (the slot) and the top bits (the tag) too.
  std::vector<int> low(256, 0), top(256, 0);
  for (int i = 0; i < 100000; ++i) {
    const uint64_t h = StateTable::Hash(fmt::format("acct/{:06}", i));
    ++low[h & 255];
    ++top[h >> 56];
  }
  CHECK(*std::min_element(low.begin(), low.end()) > 300);
  CHECK(*std::max_element(low.begin(), low.end()) < 490);
  CHECK(*std::min_element(top.begin(), top.end()) > 300);
  CHECK(*std::max_element(top.begin(), top.end()) < 490);
}

TEST_CASE("state table: Clear empties it for a second state, memory kept, however large the first") {
  // The first state grows the arena far past the 2 MiB where it moves from
  // malloc to a mapping grown with mremap; the second is small and must
  // hold exactly its own keys, with the slots the first left behind.
  StateTable t;
  std::map<std::string, std::string> first;
  for (int i = 0; i < 120000; ++i) {
    const std::string k = fmt::format("user/{:012}", (i * 7919) % 120000);
    const std::string v = fmt::format("{:-<60}", i);
    t.Put(k, v);
    first[k] = v;
  }
  REQUIRE(t.arena_bytes() > (size_t{8} << 20));
  CHECK(Contents(t) == first);
  t.Clear(10);
  CHECK(t.size() == 0);
  CHECK(t.arena_bytes() == 0);
  CHECK(Contents(t).empty());
  std::map<std::string, std::string> second;
  for (int i = 0; i < 1000; ++i) {
    const std::string k = fmt::format("acct/{:06}{}", i, i % 3 == 0 ? "/v2" : "");
    t.Put(k, std::to_string(i));
    second[k] = std::to_string(i);
  }
  t.Erase("acct/000003/v2");
  second.erase("acct/000003/v2");
  CHECK(t.size() == second.size());
  CHECK(Contents(t) == second);
}

TEST_CASE("state table: keys that tie on their first 8, 16 and 24 bytes after the shared prefix sort in byte order") {
  // Groups that share 8-byte blocks among themselves but not with the
  // others, keys that end inside a block or exactly at its end, and keys
  // that go on with zero bytes: every level of the 8-byte sort.
  uint64_t s = 7;
  std::vector<std::string> keys;
  const std::string blocks[] = {"AAAAAAAA", "AAAAAAAB", std::string(8, '\0'), "\xff\xff\xff\xff\xff\xff\xff\xff"};
  for (int i = 0; i < 4000; ++i) {
    std::string k = "p/";
    const uint64_t r = Next(s);
    for (int b = 0; b < static_cast<int>(r % 4); ++b) k += blocks[(r >> (8 + 2 * b)) % 4];
    k.append(std::string((r >> 20) % 10, static_cast<char>((r >> 32) % 3)));  // 0-9 bytes of 0, 1 or 2
    keys.push_back(k);
  }
  StateTable t;
  std::map<std::string, std::string> model;
  for (size_t i = 0; i < keys.size(); ++i) {
    t.Put(keys[i], std::to_string(i));
    model[keys[i]] = std::to_string(i);
  }
  INFO("seed 7, " << model.size() << " distinct keys");
  CHECK(Contents(t) == model);
}

TEST_CASE("HugeArray: an allocation the system refuses throws std::bad_alloc and leaves the array as it was") {
  const size_t impossible = size_t{1} << 60;  // beyond any address space
  // Still in malloc'd memory: the first mapping is refused.
  HugeArray<char> a;
  std::memcpy(a.Grow(3), "abc", 3);
  CHECK_THROWS_AS(a.Reserve(impossible), std::bad_alloc);
  REQUIRE(a.size() == 3);
  CHECK(std::string(a.data(), 3) == "abc");
  // Already a mapping: growing it with mremap is refused.
  HugeArray<char> m;
  const size_t n = size_t{5} << 20;
  char* p = m.Grow(n);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<char>(i * 7);
  const size_t cap = m.capacity();
  REQUIRE(cap >= n);
  CHECK_THROWS_AS(m.Reserve(impossible), std::bad_alloc);
  REQUIRE(m.size() == n);
  CHECK(m.capacity() == cap);
  size_t wrong = 0;
  for (size_t i = 0; i < n; ++i) wrong += m[i] != static_cast<char>(i * 7);
  CHECK(wrong == 0);
  // And it still grows afterwards, keeping its bytes.
  m.Reserve(cap * 2);
  CHECK(m[n - 1] == static_cast<char>((n - 1) * 7));
}

TEST_CASE("state table: the radix sort and std::sort give the keys' byte order at every group size") {
  // The same hard keys as above (shared prefixes, prefixes of each other,
  // zero bytes, bytes above 0x7f, ties on 8, 16 and 24 bytes), sorted with
  // the radix sort from groups of 1, 2, 3 and 64 entries on and with
  // std::sort only, against std::sort by byte comparison.
  uint64_t s = 11;
  std::vector<std::string> keys = {"",
                                   std::string(1, '\0'),
                                   std::string(2, '\0'),
                                   "a",
                                   std::string("a\0", 2),
                                   std::string("a\0\0\0\0\0\0\0\0\1", 10),
                                   std::string("a\0\0\0\0\0\0\0\0", 9)};
  const std::string blocks[] = {"AAAAAAAA", "AAAAAAAB", std::string(8, '\0'), "\xff\xff\xff\xff\xff\xff\xff\xff",
                                "user/000"};
  for (int i = 0; i < 5000; ++i) {
    std::string k = (i % 3 == 0) ? "" : "p/";
    const uint64_t r = Next(s);
    for (int b = 0; b < static_cast<int>(r % 5); ++b) k += blocks[(r >> (8 + 3 * b)) % 5];
    k.append(std::string((r >> 24) % 10, static_cast<char>((r >> 32) % 3)));
    if ((r >> 40) % 4 == 0) k += fmt::format("{}", (r >> 44) % 100000);
    keys.push_back(k);
  }
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  std::vector<std::string> shuffled = keys;
  for (size_t i = shuffled.size(); i > 1; --i) std::swap(shuffled[i - 1], shuffled[Next(s) % i]);
  for (size_t radix_from : {size_t{1}, size_t{2}, size_t{3}, size_t{64}, SIZE_MAX}) {
    INFO("seed 11, radix from groups of " << radix_from << ", " << keys.size() << " keys");
    namespace sd = walcut::recovery::sort_detail;
    std::vector<sd::Item> items(2 * shuffled.size());
    for (size_t i = 0; i < shuffled.size(); ++i) items[i].ref = i;
    sd::SortByKey(
        items.data(), shuffled.size(), items.data() + shuffled.size(),
        [&](uint64_t i) { return std::string_view(shuffled[i]); }, [](uint64_t, size_t) {}, radix_from);
    std::vector<std::string> got;
    for (size_t i = 0; i < shuffled.size(); ++i) got.push_back(shuffled[items[i].ref]);
    CHECK(got == keys);
  }
}

TEST_CASE("state table: an erase and a rewrite probe past a tombstone in their chain") {
  // Four keys whose hashes share their low 16 bits: in a table of fewer
  // slots their probes start at one slot, so they fill one chain in order.
  std::map<uint64_t, std::vector<std::string>> by_low;
  std::vector<std::string> chain;
  for (uint64_t n = 0; chain.empty(); ++n) {
    std::string key = fmt::format("acct/{}", n);
    auto& same = by_low[StateTable::Hash(key) & 0xffff];
    same.push_back(std::move(key));
    if (same.size() == 4) chain = same;
  }
  INFO(fmt::format("chain {} {} {} {}", chain[0], chain[1], chain[2], chain[3]));
  StateTable t;
  std::map<std::string, std::string> model;
  auto put = [&](const std::string& k, const std::string& v) {
    t.Put(k, v);
    model[k] = v;
  };
  auto erase = [&](const std::string& k) {
    t.Erase(k);
    model.erase(k);
  };
  auto same = [&] {
    CHECK(Contents(t) == model);
    CHECK(t.size() == model.size());
  };
  for (const auto& k : chain) put(k, "v-" + k);
  same();
  erase(chain[0]);  // a tombstone at the head of the chain
  same();
  erase(chain[2]);  // found past the tombstone
  same();
  put(chain[1], "x");                    // rewritten in place past the tombstone, not added again
  put(chain[3], std::string(200, 'y'));  // rewritten where it moves to the arena's end
  same();
  erase(chain[2]);  // gone already: nothing changes
  same();
  put(chain[0], "back");  // back into its grave
  put(chain[2], "again");
  same();
  erase(chain[3]);  // past two tombstones' worth of rewrites
  erase(chain[1]);
  same();
  put(chain[3], "z");
  same();
}

TEST_CASE("state table: every growth puts each key where its next write finds it") {
  // From the smallest table (16 slots) through a dozen growths: the first
  // ones move fewer entries than the rehash keeps in flight, the later ones
  // many more. Tombstones lie in the table as it grows, and the arena the
  // rehash walks holds the erased keys' and the moved values' garbage
  // (a rehash that took garbage for a live entry stops on its check of the
  // count, and the visit in key order on its own). After every step a
  // rewrite of each key must find it (a key placed in the wrong slot would
  // be added a second time: size() and the contents tell).
  StateTable t;
  std::map<std::string, std::string> model;
  uint64_t seed = 7;
  INFO("seed 7");
  for (int n = 0; n < 40000; ++n) {
    const uint64_t r = Next(seed);
    std::string key = fmt::format("k/{}/{}", n, std::string(r % 24, 'p'));  // 5 to 33 bytes
    std::string value = fmt::format("{}", r);
    t.Put(key, value);
    model[key] = value;
    if (r % 7 == 0) {  // now and then a key goes: a tombstone
      const std::string& gone = model.begin()->first;
      t.Erase(gone);
      model.erase(model.begin());
    }
    if (n == 11 || n == 12 || n == 13 || n == 100 || n == 1000 || n == 39999) {
      for (auto& [k, v] : model) {
        v = "re-" + v;
        t.Put(k, v);
      }
      REQUIRE(t.size() == model.size());
      REQUIRE(Contents(t) == model);
    }
  }
}
