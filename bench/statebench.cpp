// statebench: the cost of one write into recovery::StateTable, the table a
// restore builds, without any WAL around it. Writes go to random keys of a
// bank-like key space ("acct/NNNNNN", values of 3 or 4 digits, so that many
// rewrites change the value's length), either one Put at a time into one
// big table or through PartitionedState, which buffers writes per key-hash
// partition and applies a full buffer at once to its cache-sized table.
// Prints ns per write and writes per CPU second for both, side by side, with
// the same keys and values.
//
// With --key-bytes K (and --value-bytes V, default 93), keys of K bytes and
// values of V bytes instead, written one Put at a time into a table that
// starts empty and grows, as a restore from genesis does: the floor of the
// apply pass on a state of mostly new keys (walgen's: 1.81 M writes into
// 1.54 M keys of 16-23 bytes, values of 40-200 bytes, mean 93, per node is
// about --keys 5500000 --writes 1806000 --key-bytes 20). The first round
// touches fresh memory, the second reuses it (Clear), as a restore's first
// node and the nodes after it.
//
//   statebench [--keys N] [--writes M] [--seed S] [--buffer BYTES per partition]
//              [--key-bytes K [--value-bytes V]]
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

// The --key-bytes mode: Puts of K-byte keys drawn from N and V-byte values
// into one table that starts empty.
int Wide(uint64_t keys, uint64_t writes, uint64_t seed, uint64_t key_bytes, uint64_t value_bytes) {
  std::string bytes;
  bytes.reserve(writes * key_bytes);
  uint64_t s = seed;
  char buf[32];
  for (uint64_t i = 0; i < writes; ++i) {
    std::snprintf(buf, sizeof buf, "t/%012" PRIu64, Next(s) % keys);
    bytes.append(buf, 14);
    bytes.append(key_bytes - 14, 'k');
  }
  std::string value(value_bytes + writes % 64 + 64, 'v');
  walcut::recovery::StateTable t(0);
  for (int round = 0; round < 2; ++round) {
    t.Clear(0);
    const double c0 = CpuSeconds();
    for (uint64_t i = 0; i < writes; ++i) {
      // Values start at a varying offset, so that the copy is not always
      // aligned alike.
      t.Put(std::string_view(bytes.data() + i * key_bytes, key_bytes),
            std::string_view(value.data() + i % 64, value_bytes));
    }
    const double sec = CpuSeconds() - c0;
    std::printf("wide %s memory: %" PRIu64 " writes, %zu keys of %" PRIu64 " bytes, values of %" PRIu64
                " bytes: %.3f s CPU, %.1f ns/write, %.2f M writes/s\n",
                round == 0 ? "fresh" : "reused", writes, t.size(), key_bytes, value_bytes, sec,
                sec * 1e9 / static_cast<double>(writes), static_cast<double>(writes) / sec / 1e6);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t keys = 133000, writes = 10000000, seed = 1, buffer = 64 << 10, key_bytes = 0, value_bytes = 93;
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
    else if (std::strcmp(argv[i], "--key-bytes") == 0 && v >= 14 && v <= 1000)
      key_bytes = v;
    else if (std::strcmp(argv[i], "--value-bytes") == 0 && v <= 100000)
      value_bytes = v;
    else {
      std::fprintf(stderr,
                   "usage: statebench [--keys N] [--writes M] [--seed S] [--buffer BYTES] [--key-bytes K (14-1000) "
                   "[--value-bytes V]]\n");
      return 2;
    }
  }
  if (key_bytes > 0) return Wide(keys, writes, seed, key_bytes, value_bytes);
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
