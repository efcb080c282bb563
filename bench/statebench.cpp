// statebench: the cost of one write into recovery::StateTable, the table a
// restore builds, without any WAL around it. Writes go to random keys of a
// bank-like key space ("acct/NNNNNN", values of 3 or 4 digits, so that many
// rewrites change the value's length), either one Put at a time into one
// big table or through PartitionedState, which buffers writes per key-hash
// partition and applies a full buffer at once to its cache-sized table.
// Prints ns per write and writes per CPU second for both, side by side, with
// the same keys and values.
//
//   statebench [--keys N] [--writes M] [--seed S] [--buffer BYTES per partition]
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "bench/partitioned_state.h"
#include "recovery/state_table.h"

namespace {

using walcut::bench::CpuSeconds;
using walcut::bench::Next;

}  // namespace

int main(int argc, char** argv) {
  uint64_t keys = 133000, writes = 10000000, seed = 1, buffer = 64 << 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    const uint64_t v = std::strtoull(argv[i + 1], nullptr, 10);
    if (std::strcmp(argv[i], "--keys") == 0)
      keys = v;
    else if (std::strcmp(argv[i], "--writes") == 0)
      writes = v;
    else if (std::strcmp(argv[i], "--seed") == 0)
      seed = v;
    else if (std::strcmp(argv[i], "--buffer") == 0)
      buffer = v;
    else {
      std::fprintf(stderr, "usage: statebench [--keys N] [--writes M] [--seed S] [--buffer BYTES]\n");
      return 2;
    }
  }
  // The writes, formatted up front (as the WAL holds them): key and value
  // bytes back to back in one buffer.
  std::string bytes;
  std::vector<uint32_t> at;
  at.reserve(writes);
  uint64_t s = seed;
  char buf[32];
  for (uint64_t i = 0; i < writes; ++i) {
    at.push_back(static_cast<uint32_t>(bytes.size()));
    const uint64_t r = Next(s);
    std::snprintf(buf, sizeof buf, "acct/%06" PRIu64 "%04" PRIu64, r % keys, 100 + (r >> 32) % 1800);
    bytes.append(buf, 15);
  }
  auto run = [&](bool partitioned) {
    walcut::recovery::StateTable t(keys);
    walcut::bench::PartitionedState p(keys, buffer);
    const double c0 = CpuSeconds();
    for (uint64_t i = 0; i < writes; ++i) {
      const char* w = bytes.data() + at[i];
      const std::string_view key(w, 11);
      // 3 or 4 digits: values below 1000 lose their leading zero.
      const std::string_view value = w[11] == '0' ? std::string_view(w + 12, 3) : std::string_view(w + 11, 4);
      if (partitioned)
        p.Put(key, value);
      else
        t.Put(key, value);
    }
    p.Flush();
    const double sec = CpuSeconds() - c0;
    std::printf("%-12s %" PRIu64 " writes, %zu keys: %.3f s CPU, %.1f ns/write, %.2f M writes/s\n",
                partitioned ? "partitioned" : "direct", writes, partitioned ? p.size() : t.size(), sec,
                sec * 1e9 / static_cast<double>(writes), static_cast<double>(writes) / sec / 1e6);
  };
  for (int round = 0; round < 2; ++round) {
    run(false);
    run(true);
  }
  return 0;
}
