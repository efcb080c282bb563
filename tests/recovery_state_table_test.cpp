// The restore's state table against a std::map model: random puts (values
// that grow past their capacity, shrink, keep their length), erases, and the
// same operations through PartitionedState (buffered per partition, applied
// when a buffer fills), over enough keys and writes to make the tables rehash
// and compact their arenas several times.
#include <map>
#include <string>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "recovery/state_table.h"

using walcut::recovery::StateTable;
using walcut::recovery::PartitionedState;

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
          if (partitioned) p.Erase(key);
          else t.Erase(key);
        } else {
          // Lengths 0..40: rewrites grow past the spare capacity, shrink and
          // stay the same.
          held.push_back(std::string((r >> 32) % 41, static_cast<char>('a' + (r >> 8) % 26)));
          const std::string& value = held.back();
          model[key] = value;
          if (partitioned) p.Put(key, value);
          else t.Put(key, value);
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
