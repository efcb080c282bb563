#include "walfmt/lsn.h"

#include <charconv>

#include <fmt/format.h>

namespace walfmt {

std::string Lsn::ToString() const { return fmt::format("{:X}/{:08X}", segment, offset); }

std::optional<Lsn> Lsn::Parse(std::string_view text) {
  const size_t slash = text.find('/');
  if (slash == std::string_view::npos || slash == 0 || slash + 1 == text.size()) return std::nullopt;
  auto parse_hex = [](std::string_view s, uint64_t& out) {
    const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out, 16);
    return ec == std::errc() && ptr == s.data() + s.size();
  };
  Lsn lsn;
  if (!parse_hex(text.substr(0, slash), lsn.segment) || !parse_hex(text.substr(slash + 1), lsn.offset)) {
    return std::nullopt;
  }
  return lsn;
}

}  // namespace walfmt
