// The workloads of the node runtime as the data shows them: the names
// cluster.json gives them ("workload": "bank") and the key names they write
// (FORMAT.md). Shared by the runtime that writes the data (node/) and the
// tools that check it (recovery/), which do not depend on each other.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace walfmt {

enum class Workload : uint8_t { kBank = 1, kCycle = 2, kMixed = 3 };
const char* WorkloadName(Workload w);
bool ParseWorkload(std::string_view s, Workload& out);

// Bank accounts are "acct/NNNNNN" (the balance a decimal integer), cycle keys
// "ring/NNNNNN" (the value the index of the next key in the ring); six digits.
std::string AccountKey(uint32_t i);
std::string RingKey(uint32_t i);
// The index of such a key, or nullopt for any other key.
std::optional<uint32_t> ParseAccountKey(std::string_view key);
std::optional<uint32_t> ParseRingKey(std::string_view key);

}  // namespace walfmt
