// Small helpers shared by the micro-benchmarks (statebench, txtablebench).
#pragma once

#include <time.h>

#include <cstdint>

namespace walcut::bench {

// CPU time of the whole process, in seconds: the benchmarks report CPU, not
// wall time, because the machine is shared.
inline double CpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// splitmix64: a seeded stream of well-mixed 64-bit values.
inline uint64_t Next(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace walcut::bench
