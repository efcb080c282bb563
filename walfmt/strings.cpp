#include "walfmt/strings.h"

#include <charconv>

#include <fmt/format.h>

namespace walfmt {

std::string Hex16(uint64_t v) { return fmt::format("{:016x}", v); }

bool ParseHex16(std::string_view s, uint64_t& out) {
  if (s.size() != 16 || s.find_first_not_of("0123456789abcdef") != std::string_view::npos) return false;
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 16);
  if (ec != std::errc() || end != s.data() + s.size()) return false;
  out = v;
  return true;
}

std::string JoinPath(std::string_view dir, std::string_view name) {
  std::string out(dir);
  if (!out.empty() && out.back() != '/') out += '/';
  out += name;
  return out;
}

}  // namespace walfmt
