// TxTable (the scan's set of transactions in flight) against std::map under
// random inserts and erases, with table sizes that force growth and long
// probe runs that wrap around the end of the slots.
#include <map>
#include <random>

#include <catch2/catch.hpp>

#include "cut/tx_table.h"

using walcut::cut::TxTable;
using walfmt::Lsn;
using walfmt::TxId;

TEST_CASE("TxTable agrees with std::map under random inserts, finds and erases") {
  for (uint64_t seed : {1u, 2u, 3u, 42u}) {
    INFO("seed " << seed);
    std::mt19937_64 rng(seed);
    TxTable t;
    std::map<TxId, Lsn> ref;
    for (int step = 0; step < 200000; ++step) {
      // Few distinct ids so that erases hit and runs collide.
      const TxId id{static_cast<uint32_t>(rng() % 4), rng() % 3000};
      const Lsn at{rng() % 10, rng() % 100000};
      switch (rng() % 3) {
        case 0: {
          const bool fresh = t.Insert(id, at);
          CHECK(fresh == ref.emplace(id, at).second);
          break;
        }
        case 1: {
          Lsn got;
          const bool had = t.Erase(id, got);
          auto it = ref.find(id);
          REQUIRE(had == (it != ref.end()));
          if (had) {
            CHECK(got == it->second);
            ref.erase(it);
          }
          break;
        }
        default: {
          const Lsn* got = t.Find(id);
          auto it = ref.find(id);
          REQUIRE((got != nullptr) == (it != ref.end()));
          if (got) CHECK(*got == it->second);
        }
      }
      REQUIRE(t.size() == ref.size());
    }
    size_t seen = 0;
    t.ForEach([&](const TxId& id, const Lsn& at) {
      ++seen;
      CHECK(ref.at(id) == at);
    });
    CHECK(seen == ref.size());
  }
}
