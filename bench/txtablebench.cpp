// txtablebench: the cost of one operation on cut::FlatTxMap, the table of
// transactions in flight that every cut scan updates on each TX_DATA,
// TX_PREPARE and outcome record, without any WAL around it. The pattern is
// the scan's: each new transaction (from one of three coordinators, ids in
// increasing order) is inserted twice (TX_DATA, then TX_PREPARE), and once
// more than --in-flight are in the table a random one of them finishes
// (erase). Prints ns per operation for several fill limits side by side
// (the table is kept at most 1/sparse full while small), with the same ids.
//
//   txtablebench [--txs N] [--in-flight K] [--seed S] [--rounds R]
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bench/bench_util.h"
#include "cut/tx_table.h"

namespace {

using walcut::bench::CpuSeconds;
using walcut::bench::Next;

struct Run {
  double ns_per_op = 0;
  uint64_t ops = 0;
  size_t left = 0;
};

Run Measure(unsigned sparse, const std::vector<walfmt::TxId>& ids, const std::vector<uint64_t>& picks,
            size_t in_flight) {
  walcut::cut::TxTable table(sparse);
  std::vector<walfmt::TxId> live;
  live.reserve(in_flight + 1);
  Run r;
  const double t0 = CpuSeconds();
  for (size_t i = 0; i < ids.size(); ++i) {
    const walfmt::Lsn at{1, i};
    table.Insert(ids[i], at);
    table.Insert(ids[i], at);
    live.push_back(ids[i]);
    r.ops += 2;
    if (live.size() > in_flight) {
      const size_t k = picks[i] % live.size();
      walfmt::Lsn first;
      if (!table.Erase(live[k], first)) {
        std::fprintf(stderr, "txtablebench: transaction missing from the table\n");
        std::exit(1);
      }
      live[k] = live.back();
      live.pop_back();
      ++r.ops;
    }
  }
  r.ns_per_op = (CpuSeconds() - t0) * 1e9 / static_cast<double>(r.ops);
  r.left = table.size();
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t txs = 7'000'000;
  uint64_t in_flight = 25;
  uint64_t seed = 1;
  uint64_t rounds = 3;
  for (int i = 1; i < argc; ++i) {
    auto value = [&](const char* name) -> uint64_t {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "txtablebench: %s needs a value\n", name);
        std::exit(2);
      }
      return std::strtoull(argv[++i], nullptr, 10);
    };
    if (std::strcmp(argv[i], "--txs") == 0) {
      txs = value("--txs");
    } else if (std::strcmp(argv[i], "--in-flight") == 0) {
      in_flight = value("--in-flight");
    } else if (std::strcmp(argv[i], "--seed") == 0) {
      seed = value("--seed");
    } else if (std::strcmp(argv[i], "--rounds") == 0) {
      rounds = value("--rounds");
    } else {
      std::fprintf(stderr, "usage: txtablebench [--txs N] [--in-flight K] [--seed S] [--rounds R]\n");
      return 2;
    }
  }
  if (txs == 0 || in_flight == 0 || rounds == 0) {
    std::fprintf(stderr, "txtablebench: --txs, --in-flight and --rounds must be positive\n");
    return 2;
  }
  uint64_t s = seed;
  uint64_t seq[3] = {1, 1, 1};
  std::vector<walfmt::TxId> ids(txs);
  std::vector<uint64_t> picks(txs);
  for (uint64_t i = 0; i < txs; ++i) {
    const uint32_t node = static_cast<uint32_t>(Next(s) % 3);
    ids[i] = walfmt::TxId{node, seq[node]++};
    picks[i] = Next(s);
  }
  std::printf("%" PRIu64 " transactions, %" PRIu64 " in flight, seed %" PRIu64 "\n", txs, in_flight, seed);
  const unsigned settings[] = {2, 4, 8, 16};
  for (uint64_t round = 0; round < rounds; ++round) {
    std::printf("round %" PRIu64 ":", round + 1);
    for (unsigned sparse : settings) {
      const Run r = Measure(sparse, ids, picks, in_flight);
      std::printf("  1/%u full %.2f ns/op", sparse, r.ns_per_op);
      if (r.left != in_flight) {
        std::fprintf(stderr, "\ntxtablebench: %zu left in the table, expected %" PRIu64 "\n", r.left, in_flight);
        return 1;
      }
    }
    std::printf("\n");
  }
  return 0;
}
