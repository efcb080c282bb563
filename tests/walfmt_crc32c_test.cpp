// CRC32C: published vectors, hardware against the portable table on random
// buffers of every length and alignment, Extend composability, masking.
#include <array>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "walfmt/crc32c.h"
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

TEST_CASE("crc32c: hardware and portable agree on every length 0..300 and alignment", "[crc32c]") {
  const uint64_t seed = 0xC0FFEE01;
  INFO("seed " << seed << ", hardware accelerated: " << crc32c::HardwareAccelerated());
  std::mt19937_64 rng(seed);
  // Padding so every start offset 0..7 is tried: the hardware path reads
  // 8-byte words and the portable one slices by 8, so misalignment and the
  // 1..7 byte tails are where they could differ.
  const std::vector<uint8_t> buf = RandomBytes(rng, 300 + 8);
  for (size_t len = 0; len <= 300; ++len) {
    for (size_t align = 0; align < 8; ++align) {
      INFO("length " << len << " alignment " << align);
      const uint32_t init = static_cast<uint32_t>(rng());
      const uint32_t hw = crc32c::Extend(init, buf.data() + align, len);
      const uint32_t sw = crc32c::ExtendPortable(init, buf.data() + align, len);
      REQUIRE(hw == sw);
      // A bytewise reference, independent of both implementations.
      uint32_t c = ~init;
      for (size_t i = 0; i < len; ++i) {
        c ^= buf[align + i];
        for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      }
      REQUIRE(sw == ~c);
    }
  }
}

TEST_CASE("crc32c: Extend composes over every split point", "[crc32c]") {
  const uint64_t seed = 0xC0FFEE02;
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  for (size_t len : {0u, 1u, 7u, 8u, 9u, 63u, 64u, 65u, 257u}) {
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
