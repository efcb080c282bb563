#include <algorithm>
#include <map>
#include <random>
#include <set>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "cut/tx_window.h"

using walcut::cut::TxWindow;
using walfmt::Lsn;
using walfmt::TxId;

namespace {

std::set<TxId> InFlightOf(const TxWindow& w) {
  std::set<TxId> out;
  w.ForEach([&](const TxId& t, const Lsn&) { CHECK(out.insert(t).second); });
  return out;
}

}  // namespace

TEST_CASE("TxWindow: a transaction whose slot is taken waits in the hash table, and nothing is lost or doubled") {
  TxWindow w(4, 16);  // slots by seq mod 4
  const TxId a{0, 1}, b{0, 5}, c{0, 9};
  CHECK(w.Start(a, Lsn{0, 100}));
  CHECK(w.Start(b, Lsn{0, 200}));  // a holds slot 1: b goes to the table
  CHECK_FALSE(w.Start(b, Lsn{0, 250}));
  CHECK(w.size() == 2);
  Lsn first;
  CHECK(w.End(a, Lsn{0, 300}, false, first));
  CHECK(first == Lsn{0, 100});
  // Slot 1 is free again, but b is in the table: not started a second time.
  CHECK_FALSE(w.Start(b, Lsn{0, 350}));
  CHECK(w.size() == 1);
  REQUIRE(w.Find(b) != nullptr);
  CHECK(*w.Find(b) == Lsn{0, 200});
  CHECK(InFlightOf(w) == std::set<TxId>{b});
  CHECK(w.End(b, Lsn{0, 400}, true, first));
  CHECK(first == Lsn{0, 200});
  CHECK(w.size() == 0);
  CHECK_FALSE(w.End(b, Lsn{0, 450}, false, first));
  // b finished in its slot (a's finish was overwritten there).
  auto fb = w.LastFinish(b);
  REQUIRE(fb);
  CHECK(fb->at == Lsn{0, 400});
  CHECK(fb->rolled_back);
  CHECK_FALSE(w.LastFinish(a));
  CHECK_FALSE(w.LastFinish(c));
  CHECK(w.Find(b) == nullptr);
}

TEST_CASE("TxWindow: coordinators beyond the direct windows use the table and the ring of finishes") {
  TxWindow w(8, 2);
  const TxId big{TxWindow::kDirectNodes, 7}, bigger{4000000000u, 7};
  CHECK(w.Start(big, Lsn{1, 10}));
  CHECK(w.Start(bigger, Lsn{1, 20}));
  CHECK_FALSE(w.Start(big, Lsn{1, 30}));
  CHECK(InFlightOf(w) == std::set<TxId>{big, bigger});
  Lsn first;
  CHECK(w.End(bigger, Lsn{2, 5}, false, first));
  CHECK(first == Lsn{1, 20});
  auto f = w.LastFinish(bigger);
  REQUIRE(f);
  CHECK(f->at == Lsn{2, 5});
  CHECK_FALSE(f->rolled_back);
  // The ring holds two finishes: two more push this one out.
  w.Remember(TxId{100, 1}, Lsn{2, 6}, false);
  w.Remember(TxId{100, 2}, Lsn{2, 7}, true);
  CHECK_FALSE(w.LastFinish(bigger));
  REQUIRE(w.LastFinish(TxId{100, 2}));
  CHECK(w.LastFinish(TxId{100, 2})->rolled_back);
  CHECK(w.size() == 1);
}

TEST_CASE("TxWindow against a plain map, random operations on small windows") {
  for (uint64_t seed : {1u, 2u, 3u, 4u, 5u, 6u, 7u, 8u}) {
    INFO("seed " << seed);
    std::mt19937_64 rng(seed);
    const size_t window = size_t{1} << (seed % 4 + 1);  // 2..16 slots: many collisions
    TxWindow w(window, 64, 3);                          // windows for three of the four small coordinators
    std::map<TxId, Lsn> in_flight;                      // the truth
    std::map<TxId, TxWindow::Finish> finished;          // last finish of every transaction
    uint64_t pos = 0;
    for (int step = 0; step < 20000; ++step) {
      // Coordinators 0-2 and one beyond the direct windows; sequence numbers
      // near a moving head, as a coordinator hands them out.
      const uint32_t node = std::array<uint32_t, 5>{0, 1, 2, 3, 70}[rng() % 5];
      const uint64_t head = static_cast<uint64_t>(step) / 8;
      const TxId t{node, head + rng() % 24};
      const Lsn at{pos / 1000, pos % 1000};
      ++pos;
      const int op = static_cast<int>(rng() % 10);
      if (op < 5) {
        const bool fresh = !in_flight.count(t);
        REQUIRE(w.Start(t, at) == fresh);
        if (fresh) in_flight[t] = at;
      } else if (op < 9) {
        const bool rolled_back = op == 8;
        Lsn first;
        const bool was = in_flight.count(t) != 0;
        REQUIRE(w.End(t, at, rolled_back, first) == was);
        if (was) {
          CHECK(first == in_flight[t]);
          in_flight.erase(t);
          finished[t] = TxWindow::Finish{at, rolled_back};
        } else if (rng() % 2) {
          w.Remember(t, at, rolled_back);
          finished[t] = TxWindow::Finish{at, rolled_back};
        }
      } else {
        const Lsn* f = w.Find(t);
        REQUIRE((f != nullptr) == (in_flight.count(t) != 0));
        if (f) CHECK(*f == in_flight[t]);
      }
      REQUIRE(w.size() == in_flight.size());
      // A finish the window still knows is the last one; the window may forget.
      if (auto lf = w.LastFinish(t)) {
        INFO("step " << step << " tx " << t.ToString() << " op " << op << " got " << lf->at.ToString() << " want "
                     << (finished.count(t) ? finished[t].at.ToString() : "none"));
        REQUIRE(finished.count(t));
        CHECK(lf->at == finished[t].at);
        CHECK(lf->rolled_back == finished[t].rolled_back);
      }
    }
    std::set<TxId> truth;
    for (const auto& [t, at] : in_flight) truth.insert(t);
    CHECK(InFlightOf(w) == truth);
    CHECK(w.windows() == 3);
  }
}

TEST_CASE("TxWindow remembers a finish until its slot is taken by a later transaction of the coordinator") {
  TxWindow w(8, 4);
  Lsn first;
  for (uint64_t seq = 0; seq < 8; ++seq) {
    REQUIRE(w.Start(TxId{3, seq}, Lsn{0, seq}));
    REQUIRE(w.End(TxId{3, seq}, Lsn{1, seq}, seq % 2 == 1, first));
  }
  for (uint64_t seq = 0; seq < 8; ++seq) {
    auto f = w.LastFinish(TxId{3, seq});
    REQUIRE(f);
    CHECK(f->at == Lsn{1, seq});
    CHECK(f->rolled_back == (seq % 2 == 1));
  }
  REQUIRE(w.Start(TxId{3, 8}, Lsn{2, 0}));  // takes seq 0's slot
  CHECK_FALSE(w.LastFinish(TxId{3, 0}));
  CHECK(w.LastFinish(TxId{3, 1}));
}

TEST_CASE("TxWindow makes at most max_windows windows, other coordinators still work, through the table") {
  TxWindow w(16, 8, 2);
  Lsn first;
  for (uint32_t node = 0; node < 6; ++node) {
    for (uint64_t seq = 1; seq <= 40; ++seq) REQUIRE(w.Start(TxId{node, seq}, Lsn{node, seq}));
  }
  CHECK(w.windows() == 2);
  CHECK(w.size() == 6 * 40);
  for (uint32_t node = 0; node < 6; ++node) {
    for (uint64_t seq = 1; seq <= 40; ++seq) {
      REQUIRE(w.End(TxId{node, seq}, Lsn{9, node * 100 + seq}, false, first));
      CHECK(first == Lsn{node, seq});
    }
  }
  CHECK(w.size() == 0);
  CHECK(InFlightOf(w).empty());
  // Coordinators 0 and 1 remember their last 16 numbers in slots; the others'
  // finishes went to the ring of 8.
  CHECK(w.LastFinish(TxId{0, 40}));
  CHECK(w.LastFinish(TxId{1, 25}));
  CHECK_FALSE(w.LastFinish(TxId{1, 24}));
  CHECK(w.LastFinish(TxId{5, 40}));
  CHECK(w.LastFinish(TxId{5, 33}));
  CHECK_FALSE(w.LastFinish(TxId{5, 32}));
  CHECK_FALSE(w.LastFinish(TxId{4, 40}));
}
