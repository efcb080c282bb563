#include "walfmt/text_escape.h"

#include <cstdint>

namespace walfmt {
namespace {

// The length of the well-formed UTF-8 character at s[i] (RFC 3629), or 0
// when the byte there does not start one.
size_t CharLength(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[i + k]); };
  const auto cont = [&](size_t k, uint8_t lo, uint8_t hi) { return i + k < s.size() && b(k) >= lo && b(k) <= hi; };
  const uint8_t c = b(0);
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(1, 0x80, 0xBF) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    const uint8_t lo = c == 0xE0 ? 0xA0 : 0x80;
    const uint8_t hi = c == 0xED ? 0x9F : 0xBF;  // no UTF-16 surrogates
    return cont(1, lo, hi) && cont(2, 0x80, 0xBF) ? 3 : 0;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    const uint8_t lo = c == 0xF0 ? 0x90 : 0x80;
    const uint8_t hi = c == 0xF4 ? 0x8F : 0xBF;  // nothing above U+10FFFF
    return cont(1, lo, hi) && cont(2, 0x80, 0xBF) && cont(3, 0x80, 0xBF) ? 4 : 0;
  }
  return 0;
}

// A well-formed character of length n at s[i] that is still escaped.
bool Escaped(std::string_view s, size_t i, size_t n) {
  const auto c = static_cast<uint8_t>(s[i]);
  if (n == 1) return c == '\\' || (c < 0x20 && c != '\t' && c != '\n' && c != '\r');
  // U+FFFE and U+FFFF: EF BF BE, EF BF BF.
  return n == 3 && c == 0xEF && static_cast<uint8_t>(s[i + 1]) == 0xBF && static_cast<uint8_t>(s[i + 2]) >= 0xBE;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

bool IsCleanText(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<uint8_t>(s[i]);
    if (c >= 0x20 && c < 0x80 && c != '\\') {  // the common case
      ++i;
      continue;
    }
    const size_t n = CharLength(s, i);
    if (n == 0 || Escaped(s, i, n)) return false;
    i += n;
  }
  return true;
}

std::string EscapeBytes(std::string_view s) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  auto hex = [&](uint8_t c) {
    out += "\\x";
    out += kDigits[c >> 4];
    out += kDigits[c & 0xF];
  };
  for (size_t i = 0; i < s.size();) {
    const size_t n = CharLength(s, i);
    if (n == 0) {
      hex(static_cast<uint8_t>(s[i++]));
    } else if (Escaped(s, i, n)) {
      for (size_t k = 0; k < n; ++k) hex(static_cast<uint8_t>(s[i + k]));
      i += n;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::string UnescapeBytes(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && s[i + 1] == 'x' && HexValue(s[i + 2]) >= 0 && HexValue(s[i + 3]) >= 0) {
      out += static_cast<char>(HexValue(s[i + 2]) * 16 + HexValue(s[i + 3]));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace walfmt
