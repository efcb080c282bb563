#include "walfmt/workload.h"

#include <fmt/format.h>

namespace walfmt {
namespace {

std::optional<uint32_t> ParseIndexedKey(std::string_view key, std::string_view prefix) {
  constexpr size_t kDigits = 6;
  if (key.size() != prefix.size() + kDigits || key.substr(0, prefix.size()) != prefix) return std::nullopt;
  uint32_t v = 0;
  for (char c : key.substr(prefix.size())) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint32_t>(c - '0');
  }
  return v;
}

}  // namespace

const char* WorkloadName(Workload w) {
  switch (w) {
    case Workload::kBank:
      return "bank";
    case Workload::kCycle:
      return "cycle";
    case Workload::kMixed:
      return "mixed";
  }
  return "?";
}

bool ParseWorkload(std::string_view s, Workload& out) {
  if (s == "bank")
    out = Workload::kBank;
  else if (s == "cycle")
    out = Workload::kCycle;
  else if (s == "mixed")
    out = Workload::kMixed;
  else
    return false;
  return true;
}

std::string AccountKey(uint32_t i) { return fmt::format("acct/{:06}", i); }
std::string RingKey(uint32_t i) { return fmt::format("ring/{:06}", i); }
std::optional<uint32_t> ParseAccountKey(std::string_view key) { return ParseIndexedKey(key, "acct/"); }
std::optional<uint32_t> ParseRingKey(std::string_view key) { return ParseIndexedKey(key, "ring/"); }

}  // namespace walfmt
