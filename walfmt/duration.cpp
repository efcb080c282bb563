#include "walfmt/duration.h"

#include <charconv>
#include <string>

#include <fmt/format.h>

namespace walfmt {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

Status NotADuration(std::string_view text, std::string_view why) {
  return Status::InvalidArgument(
      fmt::format("\"{}\": not a duration ({}; for example 250ms, 1.5s, 1200us)", text, why));
}

}  // namespace

Result<uint64_t> ParseDuration(std::string_view text) {
  // The significant digits of the number and the power of ten they are
  // scaled by: value = digits * 10^exp10.
  std::string digits;
  int64_t exp10 = 0;
  size_t i = 0;
  bool any = false;
  for (; i < text.size() && IsDigit(text[i]); ++i, any = true) digits.push_back(text[i]);
  if (i < text.size() && text[i] == '.') {
    ++i;
    for (; i < text.size() && IsDigit(text[i]); ++i, any = true) {
      digits.push_back(text[i]);
      --exp10;
    }
  }
  if (!any) return NotADuration(text, "no number");
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    size_t j = i + 1;
    bool neg = false;
    if (j < text.size() && (text[j] == '+' || text[j] == '-')) neg = text[j++] == '-';
    const size_t start = j;
    while (j < text.size() && IsDigit(text[j])) ++j;
    int64_t e = 0;
    if (j == start || j - start > 6 ||
        std::from_chars(text.data() + start, text.data() + j, e).ec != std::errc()) {
      return NotADuration(text, "malformed exponent");
    }
    exp10 += neg ? -e : e;
    i = j;
  }
  const std::string_view unit = text.substr(i);
  if (unit.empty() || unit == "us") {
  } else if (unit == "ms") {
    exp10 += 3;
  } else if (unit == "s") {
    exp10 += 6;
  } else {
    return NotADuration(text, fmt::format("unknown unit \"{}\"; use us, ms or s", unit));
  }
  // Leading zeros carry nothing; all zeros is zero whatever the exponent.
  const size_t first = digits.find_first_not_of('0');
  if (first == std::string::npos) return uint64_t{0};
  digits.erase(0, first);
  // digits * 10^exp10, rounded half up to an integer.
  bool round_up = false;
  if (exp10 >= 0) {
    if (static_cast<int64_t>(digits.size()) + exp10 > 20) return NotADuration(text, "too large");
    digits.append(static_cast<size_t>(exp10), '0');
  } else {
    const uint64_t drop = static_cast<uint64_t>(-exp10);
    if (drop > digits.size()) return uint64_t{0};  // below a tenth of a microsecond
    const size_t keep = digits.size() - static_cast<size_t>(drop);
    round_up = digits[keep] >= '5';
    digits.resize(keep);
  }
  uint64_t us = 0;
  if (!digits.empty()) {
    const auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), us);
    if (ec != std::errc() || p != digits.data() + digits.size()) return NotADuration(text, "too large");
  }
  if (round_up) {
    if (us == UINT64_MAX) return NotADuration(text, "too large");
    ++us;
  }
  return us;
}

}  // namespace walfmt
