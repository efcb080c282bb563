// FNV-1a 64: published vectors, and the bit-sliced path against the byte
// loop on random buffers of every length up to 4096 and every start 0..63,
// lengths around each multiple of the 512-byte group and the 2 KiB step,
// Extend split at random points, and inputs that drive every lane's start bit
// both ways (all zeros, all ones, one byte value repeated).
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "walfmt/fnv1a.h"

namespace {

namespace fnv1a = walfmt::fnv1a;

uint64_t Portable(const uint8_t* p, size_t n, uint64_t h = fnv1a::kOffset) { return fnv1a::ExtendPortable(h, p, n); }
uint64_t Fast(const uint8_t* p, size_t n, uint64_t h = fnv1a::kOffset) { return fnv1a::Extend(h, p, n); }

std::vector<uint8_t> RandomBytes(std::mt19937_64& rng, size_t n) {
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

}  // namespace

TEST_CASE("fnv1a: published test vectors, both paths", "[fnv1a]") {
  // The FNV reference's test suite (Noll): FNV-1a 64 of "", "a", "foobar".
  CHECK(fnv1a::Value("") == 0xCBF29CE484222325ull);
  CHECK(fnv1a::Value("a") == 0xAF63DC4C8601EC8Cull);
  CHECK(fnv1a::Value("foobar") == 0x85944171F73967E8ull);
  // A long one, so that the bit-sliced path answers when it is there: the
  // byte loop written out here, sharing nothing with the library.
  std::string s;
  for (int i = 0; i < 5000; ++i) s.push_back(static_cast<char>((i * 131 + 7) & 0xFF));
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
  CHECK(fnv1a::Value(s) == h);
  if (!fnv1a::Accelerated()) WARN("this CPU has no AVX-512 VBMI/VNNI/GFNI: the bit-sliced path is not tested here");
}

TEST_CASE("fnv1a: every length to 4096 and every start to 63 against the byte loop", "[fnv1a]") {
  const uint64_t seed = 20261206;
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  const std::vector<uint8_t> buf = RandomBytes(rng, 4096 + 64);
  for (size_t len = 0; len <= 4096; ++len) {
    const size_t start = len % 64;
    const uint64_t h0 = rng();
    if (Fast(buf.data() + start, len, h0) != Portable(buf.data() + start, len, h0)) {
      FAIL("length " << len << " at start " << start << " from " << h0);
    }
  }
  for (size_t start = 0; start < 64; ++start) {
    for (size_t len : {512u, 1000u, 2048u, 2600u, 4096u}) {
      INFO("start " << start << " length " << len);
      CHECK(Fast(buf.data() + start, len) == Portable(buf.data() + start, len));
    }
  }
}

TEST_CASE("fnv1a: lengths around the group and step sizes, long inputs, split points", "[fnv1a]") {
  const uint64_t seed = 31;
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  const std::vector<uint8_t> buf = RandomBytes(rng, (1u << 20) + 3);
  for (size_t base : {512u, 1024u, 2048u, 4096u, 6144u, 65536u, 1u << 20}) {
    for (size_t len = base - 3; len <= base + 3 && len <= buf.size(); ++len) {
      INFO("length " << len);
      CHECK(Fast(buf.data(), len) == Portable(buf.data(), len));
    }
  }
  CHECK(Fast(buf.data() + 3, buf.size() - 3) == Portable(buf.data() + 3, buf.size() - 3));
  // Extend over consecutive pieces is Extend over the whole.
  for (int round = 0; round < 50; ++round) {
    size_t at = 0;
    uint64_t h = fnv1a::kOffset;
    const size_t total = 1 + rng() % 20000;
    while (at < total) {
      const size_t piece = std::min<size_t>(total - at, rng() % 3000);
      h = fnv1a::Extend(h, buf.data() + at, piece);
      at += piece;
    }
    INFO("round " << round << " total " << total);
    CHECK(h == Portable(buf.data(), total));
  }
}

TEST_CASE("fnv1a: uniform inputs (zeros, ones, each byte value) against the byte loop", "[fnv1a]") {
  // A block of one repeated byte makes every lane's parity the same, so the
  // lane-to-lane start bits and the carries of the low byte's multiply take
  // the same turn everywhere: a wrong carry or start bit shows at once.
  for (int v = 0; v < 256; ++v) {
    const std::vector<uint8_t> buf(2048 + 512 + 17, static_cast<uint8_t>(v));
    INFO("byte " << v);
    CHECK(Fast(buf.data(), buf.size()) == Portable(buf.data(), buf.size()));
    CHECK(Fast(buf.data(), buf.size(), 0) == Portable(buf.data(), buf.size(), 0));
  }
}
