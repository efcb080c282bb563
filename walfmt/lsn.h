// A WAL position: segment index and byte offset inside that segment file.
// Printed like PostgreSQL's LSNs: "%X/%08X" (segment in hex / offset in hex).
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace walfmt {

struct Lsn {
  uint64_t segment = 0;
  uint64_t offset = 0;

  auto operator<=>(const Lsn&) const = default;
  std::string ToString() const;
  // Accepts "SEG/OFFSET" in hex (as printed); nullopt on anything else.
  static std::optional<Lsn> Parse(std::string_view text);
};

}  // namespace walfmt
