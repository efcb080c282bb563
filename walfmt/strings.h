// Small text helpers every walcut library shares: one definition each.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace walfmt {

// 16 lower-case hex digits, zero-padded: how walcut writes cluster ids,
// digests and fingerprints.
std::string Hex16(uint64_t v);
// The inverse of Hex16: exactly 16 lower-case hex digits, nothing else.
bool ParseHex16(std::string_view s, uint64_t& out);

// `dir` / `name` as a path: `name` alone when dir is empty, one '/' between
// them otherwise (none added when dir ends in '/').
std::string JoinPath(std::string_view dir, std::string_view name);

}  // namespace walfmt
