// The one parser for every command-line option that takes a time or a
// duration (`walcut run --crash NODE@TIME+DELAY`, `walcut restore --before`).
//
// Grammar: NUMBER [UNIT]
//   NUMBER  digits, optionally with a fraction ("1.5", "2.", ".5") and an
//           exponent ("1e3", "2.5E-1"); no sign, no spaces
//   UNIT    "us" (the default when absent), "ms" or "s"
// The value is rounded to the nearest microsecond (a half rounds up):
// "1.5s" = 1500000, "0.0004ms" = 0, "2.5us" = 3. Values that do not fit
// 64 bits of microseconds are refused.
#pragma once

#include <cstdint>
#include <string_view>

#include "walfmt/status.h"

namespace walfmt {

// Microseconds, or kInvalidArgument with a one-line message naming the text.
Result<uint64_t> ParseDuration(std::string_view text);

}  // namespace walfmt
