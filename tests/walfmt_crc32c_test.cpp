// CRC32C: published vectors, hardware (one chain and three) against the
// portable table and a bitwise reference on random buffers of every length up
// to 4096 and every start 0..15, long inputs, Extend composability, masking.
#include <algorithm>
#include <array>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "walfmt/crc32c.h"
#include "walfmt/record_crc.h"
#include "walfmt/segment.h"

namespace {

using walfmt::MaskCrc;
using walfmt::UnmaskCrc;
namespace crc32c = walfmt::crc32c;

uint32_t ValueOf(const std::string& s) { return crc32c::Value(s.data(), s.size()); }
uint32_t PortableOf(const std::string& s) { return crc32c::ExtendPortable(0, s.data(), s.size()); }

std::vector<uint8_t> RandomBytes(std::mt19937_64& rng, size_t n) {
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

// One byte into a CRC32C register, a bit at a time: the reference that
// shares nothing with either implementation.
uint32_t BitwiseStep(uint32_t c, uint8_t byte) {
  c ^= byte;
  for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
  return c;
}

}  // namespace

TEST_CASE("crc32c: published test vectors", "[crc32c]") {
  // RFC 3720 (iSCSI) B.4 and the check value of the CRC catalogue.
  CHECK(ValueOf("123456789") == 0xE3069283u);
  CHECK(PortableOf("123456789") == 0xE3069283u);
  CHECK(ValueOf("") == 0u);
  CHECK(ValueOf("a") == 0xC1D04330u);

  std::string zeros(32, '\0');
  CHECK(ValueOf(zeros) == 0x8A9136AAu);
  CHECK(PortableOf(zeros) == 0x8A9136AAu);
  std::string ones(32, '\xff');
  CHECK(ValueOf(ones) == 0x62A8AB43u);
  CHECK(PortableOf(ones) == 0x62A8AB43u);
  std::string up, down;
  for (int i = 0; i < 32; ++i) {
    up.push_back(static_cast<char>(i));
    down.push_back(static_cast<char>(31 - i));
  }
  CHECK(ValueOf(up) == 0x46DD794Eu);
  CHECK(ValueOf(down) == 0x113FDB5Cu);
  CHECK(PortableOf(up) == 0x46DD794Eu);
  CHECK(PortableOf(down) == 0x113FDB5Cu);

  // An iSCSI SCSI Read (10) command PDU (RFC 3720 B.4, as in LevelDB's test).
  const std::array<uint8_t, 48> pdu = {0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                                       0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
                                       0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18, 0x28, 0x00, 0x00, 0x00,
                                       0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  CHECK(crc32c::Value(pdu.data(), pdu.size()) == 0xD9963A56u);
  CHECK(crc32c::ExtendPortable(0, pdu.data(), pdu.size()) == 0xD9963A56u);
}

TEST_CASE("crc32c: different data gives different values", "[crc32c]") {
  CHECK(ValueOf("a") != ValueOf("foo"));
  CHECK(ValueOf("foo") != ValueOf("fop"));
  CHECK(ValueOf(std::string(1, '\0')) != ValueOf(std::string(2, '\0')));  // length matters even for zeros
}

TEST_CASE("crc32c: Extend, portable and bitwise agree on every length 0..4096 and start 0..15", "[crc32c]") {
  const uint64_t seed = 0xC0FFEE01;
  INFO("seed " << seed << ", hardware accelerated: " << crc32c::HardwareAccelerated());
  std::mt19937_64 rng(seed);
  // Every start offset 0..15 and every length up to 4096: misaligned words,
  // the 1..7 byte tails, the one-chain / three-chain threshold and every
  // way a length splits into three blocks of whole words plus 0..23 bytes.
  constexpr size_t kMaxLen = 4096;
  const std::vector<uint8_t> buf = RandomBytes(rng, kMaxLen + 16);
  for (size_t align = 0; align < 16; ++align) {
    const uint8_t* p = buf.data() + align;
    const uint32_t init = align == 0 ? 0 : static_cast<uint32_t>(rng());
    uint32_t ref = ~init;  // the bitwise reference's register over p[0, len)
    for (size_t len = 0; len <= kMaxLen; ++len) {
      INFO("start " << align << " length " << len << " init " << init);
      REQUIRE(crc32c::Extend(init, p, len) == ~ref);
      REQUIRE(crc32c::ExtendPortable(init, p, len) == ~ref);
      if (len < kMaxLen) ref = BitwiseStep(ref, p[len]);
    }
  }
}

TEST_CASE("crc32c: the reader's inline payload checksum agrees on every length 0..1024 and start 0..15", "[crc32c]") {
  const uint64_t seed = 0xC0FFEE05;
  INFO("seed " << seed << ", hardware accelerated: " << crc32c::HardwareAccelerated());
  std::mt19937_64 rng(seed);
  const std::vector<uint8_t> buf = RandomBytes(rng, 1024 + 16);
  for (size_t align = 0; align < 16; ++align) {
    const uint8_t* p = buf.data() + align;
    uint32_t ref = ~0u;
    for (size_t len = 0; len <= 1024; ++len) {
      INFO("start " << align << " length " << len);
      REQUIRE(walfmt::detail::PayloadCrc<false>(p, len) == ~ref);
      if (crc32c::HardwareAccelerated()) REQUIRE(walfmt::detail::PayloadCrc<true>(p, len) == ~ref);
      if (len < 1024) ref = BitwiseStep(ref, p[len]);
    }
  }
}

TEST_CASE("crc32c: long inputs agree with the portable table", "[crc32c]") {
  const uint64_t seed = 0xC0FFEE04;
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  // Around whole rounds of the three-chain loop (3 x 4096 bytes) and past
  // several of them, from a misaligned start.
  const std::vector<uint8_t> buf = RandomBytes(rng, (1u << 20) + 64 + 3);
  std::vector<size_t> lens = {buf.size() - 3, 1u << 20};
  for (size_t rounds : {1u, 2u, 3u, 7u}) {
    for (size_t d = 0; d <= 48; ++d) {
      lens.push_back(rounds * 12288 + d);
      lens.push_back(rounds * 12288 - d);
    }
  }
  for (int i = 0; i < 200; ++i) lens.push_back(rng() % (buf.size() - 3));
  for (size_t len : lens) {
    const size_t align = rng() % 4;
    const uint32_t init = static_cast<uint32_t>(rng());
    INFO("length " << len << " start " << align << " init " << init);
    REQUIRE(crc32c::Extend(init, buf.data() + align, len) == crc32c::ExtendPortable(init, buf.data() + align, len));
  }
  // The bitwise reference on one long input, independent of both.
  uint32_t ref = ~0u;
  for (size_t i = 0; i < 40000; ++i) ref = BitwiseStep(ref, buf[i + 1]);
  CHECK(crc32c::Value(buf.data() + 1, 40000) == ~ref);
}

TEST_CASE("crc32c: Extend composes over every split point", "[crc32c]") {
  const uint64_t seed = 0xC0FFEE02;
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  for (size_t len : {0u, 1u, 7u, 8u, 9u, 63u, 64u, 65u, 255u, 256u, 257u, 1000u}) {
    const std::vector<uint8_t> buf = RandomBytes(rng, len);
    const uint32_t whole = crc32c::Value(buf.data(), buf.size());
    for (size_t split = 0; split <= len; ++split) {
      INFO("length " << len << " split " << split);
      const uint32_t first = crc32c::Value(buf.data(), split);
      REQUIRE(crc32c::Extend(first, buf.data() + split, len - split) == whole);
      REQUIRE(crc32c::ExtendPortable(crc32c::ExtendPortable(0, buf.data(), split), buf.data() + split, len - split) ==
              whole);
    }
  }
  // Long inputs cut into 2..9 pieces at random points.
  const std::vector<uint8_t> big = RandomBytes(rng, 100000);
  const uint32_t whole = crc32c::Value(big.data(), big.size());
  CHECK(whole == crc32c::ExtendPortable(0, big.data(), big.size()));
  for (int round = 0; round < 300; ++round) {
    std::vector<size_t> cuts = {0, big.size()};
    const int pieces = 2 + round % 8;
    for (int i = 1; i < pieces; ++i) cuts.push_back(rng() % big.size());
    std::sort(cuts.begin(), cuts.end());
    uint32_t crc = 0;
    for (size_t i = 1; i < cuts.size(); ++i) crc = crc32c::Extend(crc, big.data() + cuts[i - 1], cuts[i] - cuts[i - 1]);
    INFO("round " << round << " pieces " << pieces);
    REQUIRE(crc == whole);
  }
  CHECK(crc32c::Extend(ValueOf("hello "), "world", 5) == ValueOf("hello world"));
}

TEST_CASE("crc32c: mask and unmask", "[crc32c]") {
  const uint64_t seed = 0xC0FFEE03;
  INFO("seed " << seed);
  const uint32_t crc = ValueOf("foo");
  CHECK(crc != MaskCrc(crc));
  CHECK(crc != MaskCrc(MaskCrc(crc)));
  CHECK(crc == UnmaskCrc(MaskCrc(crc)));
  CHECK(crc == UnmaskCrc(UnmaskCrc(MaskCrc(MaskCrc(crc)))));
  // The LevelDB mask: rotate right by 15, add a constant.
  CHECK(MaskCrc(0) == 0xA282EAD8u);
  CHECK(MaskCrc(0x00008000u) == 0xA282EAD9u);
  CHECK(UnmaskCrc(0xA282EAD8u) == 0u);
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 10000; ++i) {
    const auto v = static_cast<uint32_t>(rng());
    INFO("value " << v);
    REQUIRE(UnmaskCrc(MaskCrc(v)) == v);
    REQUIRE(MaskCrc(UnmaskCrc(v)) == v);
  }
  for (uint32_t v : {0u, 1u, 0x7FFFFFFFu, 0x80000000u, 0xFFFFFFFFu}) {
    INFO("value " << v);
    CHECK(UnmaskCrc(MaskCrc(v)) == v);
  }
}
