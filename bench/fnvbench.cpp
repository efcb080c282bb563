// fnvbench: the snapshot fingerprint (FNV-1a 64) over one buffer, the
// library's Extend (bit-sliced where the CPU allows) against the byte loop,
// alternating, best of the rounds. The buffer holds the bytes of FILE (a
// node file, say) or pseudo-random bytes.
//
//   fnvbench [--mib N | FILE] [--rounds N]
//
// Prints both times in ns per byte, their ratio and whether the two values
// agree; exits 1 if they do not.
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "walfmt/fnv1a.h"

namespace {

double Seconds(uint64_t (*f)(uint64_t, const void*, size_t), const std::vector<char>& buf, uint64_t& out) {
  const auto t0 = std::chrono::steady_clock::now();
  out = f(walfmt::fnv1a::kOffset, buf.data(), buf.size());
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  size_t mib = 200;
  int rounds = 5;
  std::string file;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--mib") && i + 1 < argc) {
      mib = std::strtoul(argv[++i], nullptr, 10);
      if (mib < 1 || mib > 4096) {
        std::fprintf(stderr, "fnvbench: --mib wants 1 to 4096\n");
        return 2;
      }
    } else if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) {
      rounds = std::atoi(argv[++i]);
      if (rounds < 1 || rounds > 1000) {
        std::fprintf(stderr, "fnvbench: --rounds wants 1 to 1000\n");
        return 2;
      }
    } else if (argv[i][0] != '-') {
      file = argv[i];
    } else {
      std::fprintf(stderr, "usage: fnvbench [--mib N | FILE] [--rounds N]\n");
      return 2;
    }
  }
  std::vector<char> buf;
  if (!file.empty()) {
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "fnvbench: cannot open %s\n", file.c_str());
      return 2;
    }
    buf.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  } else {
    buf.resize(mib << 20);
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < buf.size(); ++i) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      buf[i] = static_cast<char>(x);
    }
  }
  double best_lib = 1e30, best_loop = 1e30;
  uint64_t lib = 0, loop = 0;
  for (int r = 0; r < rounds; ++r) {
    best_loop = std::min(best_loop, Seconds(walfmt::fnv1a::ExtendPortable, buf, loop));
    best_lib = std::min(best_lib, Seconds(walfmt::fnv1a::Extend, buf, lib));
  }
  const double n = static_cast<double>(buf.size());
  std::printf("bytes %zu, bit-sliced path %s\n", buf.size(), walfmt::fnv1a::Accelerated() ? "on" : "off (this CPU)");
  std::printf("Extend %.3f ns/B, byte loop %.3f ns/B, ratio %.2fx, values %s (%016" PRIx64 ")\n", best_lib * 1e9 / n,
              best_loop * 1e9 / n, best_lib / best_loop, lib == loop ? "agree" : "DIFFER", lib);
  return lib == loop ? 0 : 1;
}
