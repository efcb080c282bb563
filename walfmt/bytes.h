// Little-endian encoding helpers. Every multi-byte integer on disk is
// little-endian; these helpers never read past the span they are given.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace walfmt {

inline void PutU16(std::string& out, uint16_t v) {
  const char b[2] = {static_cast<char>(v), static_cast<char>(v >> 8)};
  out.append(b, 2);
}
inline void PutU32(std::string& out, uint32_t v) {
  char b[4];
  for (int i = 0; i < 4; ++i) b[i] = static_cast<char>(v >> (8 * i));
  out.append(b, 4);
}
inline void PutU64(std::string& out, uint64_t v) {
  char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>(v >> (8 * i));
  out.append(b, 8);
}
inline uint16_t LoadU16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
inline uint32_t LoadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);  // x86-64 and aarch64 Linux are little-endian
  return v;
}
inline uint64_t LoadU64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline void StoreU32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }
static_assert(std::endian::native == std::endian::little, "walfmt assumes a little-endian host");

// Bounds-checked sequential reader over a payload. Every getter returns false
// (and leaves the output untouched) when the bytes are not there, so a decoder
// never trusts a count or length beyond the bytes that remain.
class ByteReader {
 public:
  explicit ByteReader(std::span<const uint8_t> data) : p_(data.data()), end_(data.data() + data.size()) {}
  size_t remaining() const { return static_cast<size_t>(end_ - p_); }
  bool U8(uint8_t& v) {
    if (remaining() < 1) return false;
    v = *p_++;
    return true;
  }
  bool U16(uint16_t& v) {
    if (remaining() < 2) return false;
    v = LoadU16(p_);
    p_ += 2;
    return true;
  }
  bool U32(uint32_t& v) {
    if (remaining() < 4) return false;
    v = LoadU32(p_);
    p_ += 4;
    return true;
  }
  bool U64(uint64_t& v) {
    if (remaining() < 8) return false;
    v = LoadU64(p_);
    p_ += 8;
    return true;
  }
  bool Bytes(size_t n, std::string_view& v) {
    if (remaining() < n) return false;
    v = std::string_view(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return true;
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

}  // namespace walfmt
