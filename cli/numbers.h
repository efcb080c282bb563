// Numeric options: one strict parser and one range check for every number
// walcut takes on its command line. A value is decimal digits only (no sign,
// no spaces, no exponent, no overflow) inside the option's documented range;
// anything else is a usage error (exit 2) that names the option and its
// range: "--cut-every: must be 1..1000000". CLI11's own conversion is not
// used, as it wraps a negative number into an unsigned type.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <CLI/CLI.hpp>

namespace walcut::cli {

// The inclusive range of an option's values.
struct NumberRange {
  uint64_t lo = 0;
  uint64_t hi = 0;
};

// Ranges shared by several commands.
inline constexpr NumberRange kJobsRange{1, 256};                                    // -j,--jobs
inline constexpr NumberRange kCutIdRange{1, std::numeric_limits<uint64_t>::max()};  // --cut, cut show K
inline constexpr NumberRange kNodeIdRange{0, 65535};                                // --node
inline constexpr NumberRange kMaxBytesRange{0, 1u << 20};                           // --max-bytes (0: in full)

// The value of `text` when it is decimal digits only and fits 64 bits.
std::optional<uint64_t> ParseDecimal(std::string_view text);

// "1..1000000".
std::string RangeText(NumberRange r);

// "--cut-every: must be 1..1000000" (`name` as the user reads it).
std::string RangeMessage(std::string_view name, NumberRange r);

// The value of `text` when it is a number inside `r`; else `error` gets the
// RangeMessage for `name`.
std::optional<uint64_t> ParseInRange(std::string_view name, std::string_view text, NumberRange r, std::string& error);

// Adds option `names` (CLI11 syntax, "-j,--jobs") to `cmd`: its value is
// parsed strictly, checked against `r`, and handed to `set`. The help line is
// `description` followed by the range, "[1..256]". A bad value throws the
// parse error that main() reports (exit 2).
CLI::Option* AddNumberOption(CLI::App* cmd, const std::string& names, std::function<void(uint64_t)> set, NumberRange r,
                             const std::string& description);

// The same, writing into `target` (an unsigned integer, or an optional one).
template <typename T>
CLI::Option* AddNumber(CLI::App* cmd, const std::string& names, T& target, NumberRange r,
                       const std::string& description) {
  static_assert(std::is_unsigned_v<T>, "numeric options are unsigned");
  if (r.hi > std::numeric_limits<T>::max()) throw std::logic_error(names + ": range beyond its type");
  return AddNumberOption(
      cmd, names, [&target](uint64_t v) { target = static_cast<T>(v); }, r, description);
}

template <typename T>
CLI::Option* AddNumber(CLI::App* cmd, const std::string& names, std::optional<T>& target, NumberRange r,
                       const std::string& description) {
  static_assert(std::is_unsigned_v<T>, "numeric options are unsigned");
  if (r.hi > std::numeric_limits<T>::max()) throw std::logic_error(names + ": range beyond its type");
  return AddNumberOption(
      cmd, names, [&target](uint64_t v) { target = static_cast<T>(v); }, r, description);
}

// A signed integer whose "not given" is -1 (--node of check, restore, scan).
CLI::Option* AddNumber(CLI::App* cmd, const std::string& names, int& target, NumberRange r,
                       const std::string& description);

// A list of numbers (repeat the option or comma-separate its values).
CLI::Option* AddNumberList(CLI::App* cmd, const std::string& names, std::vector<uint32_t>& target, NumberRange r,
                           const std::string& description);

}  // namespace walcut::cli
