// fnvbench: the snapshot fingerprint (FNV-1a 64) over one buffer, the
// library's Extend (bit-sliced where the CPU allows) against the byte loop,
// alternating, best of the rounds. The buffer holds the bytes of FILE (a
// node file, say) or pseudo-random bytes.
//
//   fnvbench [--mib N | FILE] [--rounds N]
//
// FILE is read whole (a regular file of at most 4 GiB); N MiB are 1 to
// 4096, rounds 1 to 1000. A bad option or an unreadable file: one line on
// stderr, exit 2.
// Prints both times in ns per byte, their ratio and whether the two values
// agree; exits 1 if they do not.
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "walfmt/file_io.h"
#include "walfmt/fnv1a.h"

namespace {

// A whole decimal number from lo to hi, or nullopt.
std::optional<long> Number(const char* text, long lo, long hi) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi) return std::nullopt;
  return v;
}

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
    const bool has_value = i + 1 < argc;
    if (!std::strcmp(argv[i], "--mib") && has_value) {
      const auto v = Number(argv[++i], 1, 4096);
      if (!v) {
        std::fprintf(stderr, "fnvbench: --mib wants 1 to 4096\n");
        return 2;
      }
      mib = static_cast<size_t>(*v);
    } else if (!std::strcmp(argv[i], "--rounds") && has_value) {
      const auto v = Number(argv[++i], 1, 1000);
      if (!v) {
        std::fprintf(stderr, "fnvbench: --rounds wants 1 to 1000\n");
        return 2;
      }
      rounds = static_cast<int>(*v);
    } else if (argv[i][0] != '-' && file.empty()) {
      file = argv[i];
    } else {
      std::fprintf(stderr, "usage: fnvbench [--mib N | FILE] [--rounds N]\n");
      return 2;
    }
  }
  std::vector<char> buf;
  if (!file.empty()) {
    auto bytes = walfmt::ReadWholeFile(file, uint64_t{4096} << 20);
    if (!bytes.ok()) {
      std::fprintf(stderr, "fnvbench: %s\n", bytes.status().message().c_str());
      return 2;
    }
    buf.assign(bytes->begin(), bytes->end());
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
