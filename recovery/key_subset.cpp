// Partial restore's subset of keys (recovery/key_subset.h) and its form in a
// restore manifest ("subset").
#include "recovery/key_subset.h"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "recovery/restore_node.h"
#include "walfmt/file_io.h"
#include "walfmt/json_fields.h"
#include "walfmt/text_escape.h"
#include "walfmt/topology.h"

namespace walcut::recovery {
namespace fs = std::filesystem;
using nlohmann::json;
using walfmt::Status;

std::string KeySubset::Describe() const {
  if (whole()) return "every key";
  std::vector<std::string> parts;
  if (!prefixes.empty()) parts.push_back(fmt::format("keys {}", fmt::join(prefixes, ", ")));
  if (!partitions.empty()) {
    parts.push_back(fmt::format("partition{} {}{}", partitions.size() == 1 ? "" : "s", fmt::join(partitions, ", "),
                                partition_count ? fmt::format(" (of {})", partition_count) : ""));
  }
  return fmt::format("{}", fmt::join(parts, " or "));
}

Status ResolveSubset(KeySubset& s, uint32_t partitions, std::string_view origin) {
  std::sort(s.prefixes.begin(), s.prefixes.end());
  s.prefixes.erase(std::unique(s.prefixes.begin(), s.prefixes.end()), s.prefixes.end());
  std::sort(s.partitions.begin(), s.partitions.end());
  s.partitions.erase(std::unique(s.partitions.begin(), s.partitions.end()), s.partitions.end());
  if (!s.prefixes.empty() && s.prefixes.front().empty()) {
    return Status::InvalidArgument("--keys: an empty prefix names every key; give a prefix, or no --keys");
  }
  if (s.partitions.empty()) {
    s.partition_count = 0;
    return Status::Ok();
  }
  if (partitions == 0) {
    return Status::InvalidArgument(fmt::format(
        "--partition: {} has no partitions (no cluster.json says how keys map to them); use --keys", origin));
  }
  if (s.partitions.back() >= partitions) {
    return Status::InvalidArgument(
        fmt::format("--partition {}: {} has partitions 0..{}", s.partitions.back(), origin, partitions - 1));
  }
  s.partition_count = partitions;
  return Status::Ok();
}

KeyFilter::KeyFilter(const KeySubset& s) : active_(!s.whole()), prefixes_(s.prefixes) {
  if (!s.partitions.empty()) {
    partition_kept_.assign(s.partition_count, 0);
    for (uint32_t p : s.partitions) partition_kept_[p] = 1;
  }
}

KeyFilter KeyFilter::Only(std::function<bool(std::string_view)> only) {
  KeyFilter f;
  f.active_ = true;
  f.only_ = std::move(only);
  return f;
}

bool KeyFilter::Keeps(std::string_view key) const {
  if (only_) return only_(key);
  for (const auto& p : prefixes_) {
    if (key.starts_with(p)) return true;
  }
  return !partition_kept_.empty() && partition_kept_[walfmt::Fnv1a64(key) % partition_kept_.size()] != 0;
}

Status BaseServesSubset(const std::string& base, const KeySubset& held, const KeySubset& wanted) {
  if (held.whole() || held == wanted) return Status::Ok();
  return Status::InvalidArgument(
      fmt::format("base {} is a partial restore ({}); it serves only a restore of the same subset, not of {}", base,
                  held.Describe(), wanted.Describe()));
}

namespace detail {

json SubsetJson(const KeySubset& s) {
  return {{"key_prefixes", s.prefixes},
          {"partitions", s.partitions},
          {"partition_count", s.partition_count},
          {"rule", "union"}};
}

walfmt::Result<KeySubset> SubsetFromJson(const json& m, const std::string& origin) {
  KeySubset s;
  const auto it = m.find("subset");
  if (it == m.end() || it->is_null()) return s;
  walfmt::JsonFields f(origin);
  const json* j = f.Object(m, "subset", "");
  const json* prefixes = j ? f.Array(*j, "key_prefixes", "subset") : nullptr;
  const json* parts = j ? f.Array(*j, "partitions", "subset") : nullptr;
  const uint32_t count = j ? f.U32(*j, "partition_count", "subset") : 0;
  for (size_t i = 0; prefixes != nullptr && f.ok() && i < prefixes->size(); ++i) {
    s.prefixes.push_back(f.StringValue((*prefixes)[i], walfmt::JsonFields::Element("subset.key_prefixes", i)));
  }
  for (size_t i = 0; parts != nullptr && f.ok() && i < parts->size(); ++i) {
    s.partitions.push_back(static_cast<uint32_t>(
        f.U64Value((*parts)[i], walfmt::JsonFields::Element("subset.partitions", i), UINT32_MAX)));
  }
  if (!f.ok()) return f.status();
  s.partition_count = count;
  const KeySubset given = s;
  if (Status st = ResolveSubset(s, count, origin); !st.ok() || !(s == given) || s.whole()) {
    f.Fail("subset", "not a sorted, non-empty subset within the cluster's partitions");
    return f.status();
  }
  return s;
}

}  // namespace detail

walfmt::Result<KeySubset> ReadOutputSubset(const std::string& dir) {
  const std::string path = (fs::path(dir) / "manifest.json").string();
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return KeySubset{};
  auto text = walfmt::ReadWholeFile(path, walfmt::kMaxJsonFileBytes);
  if (!text.ok()) return text.status();
  const json m = walfmt::UnescapeJsonStrings(json::parse(*text, nullptr, false));
  if (!m.is_object()) return KeySubset{};
  // A synthetic full of a repository has the restore's manifest under "restore".
  const auto restore = m.find("restore");
  if (!m.contains("subset") && restore != m.end() && restore->is_object()) {
    return detail::SubsetFromJson(*restore, path);
  }
  return detail::SubsetFromJson(m, path);
}

}  // namespace walcut::recovery
