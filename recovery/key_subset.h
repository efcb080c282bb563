// Partial restore: the keys a restore keeps (`walcut restore --keys PREFIX
// --partition P`). A key is kept when it starts with one of the prefixes OR
// its partition (walfmt::Topology::PartitionOf: FNV-1a 64 of the key modulo
// cluster.json's "partitions") is one of the partitions: the union of both
// lists. An empty subset (no prefix, no partition) is the whole state.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "walfmt/status.h"

namespace walcut::recovery {

// The schema a restore manifest of a subset carries: a reader that does not
// know subsets (walcut before partial restores read /2 only) refuses it
// rather than take its node files for the whole state.
inline constexpr const char* kPartialRestoreManifestSchema = "walcut.restore-manifest/3";

struct KeySubset {
  std::vector<std::string> prefixes;  // sorted, without duplicates, none empty
  std::vector<uint32_t> partitions;   // sorted, without duplicates, each < partition_count
  uint32_t partition_count = 0;       // the cluster's partitions (cluster.json), when `partitions` is not empty

  bool whole() const { return prefixes.empty() && partitions.empty(); }
  bool operator==(const KeySubset&) const = default;
  // "keys acct/0001, ring/ or partitions 3, 7 (of 12)"; "every key" when whole.
  std::string Describe() const;
};

// Sorts and deduplicates `s` and checks it against the cluster: no empty
// prefix; with partitions, the cluster has them (`partitions` is
// cluster.json's count, 0 when there is no cluster.json) and each is below
// that count. `origin` names the cluster in messages. kInvalidArgument.
walfmt::Status ResolveSubset(KeySubset& s, uint32_t partitions, std::string_view origin);

// The subset as a test per key, built once per restore: the prefixes, then
// the partition (one FNV-1a pass over the key) in a table by partition.
class KeyFilter {
 public:
  KeyFilter() = default;
  explicit KeyFilter(const KeySubset& s);
  // Exactly the keys `only` keeps, whatever their prefix or partition (an
  // export's second pass: the keys its change set wrote on one node).
  static KeyFilter Only(std::function<bool(std::string_view)> only);
  bool active() const { return active_; }
  bool Keeps(std::string_view key) const;

 private:
  bool active_ = false;
  std::function<bool(std::string_view)> only_;
  std::vector<std::string> prefixes_;
  std::vector<uint8_t> partition_kept_;  // by partition; empty without partitions
};

// The base rule: a base holding `held` (a restore output's subset) serves a
// restore of `wanted` when it holds every key (whole) or exactly that subset.
// kInvalidArgument, naming `base`, otherwise.
walfmt::Status BaseServesSubset(const std::string& base, const KeySubset& held, const KeySubset& wanted);

// What the manifest of restore output `dir` says of its subset: whole when
// it says nothing (a whole restore, or a directory without a manifest: a
// runtime full snapshot). kCorruption when its "subset" is malformed.
walfmt::Result<KeySubset> ReadOutputSubset(const std::string& dir);

}  // namespace walcut::recovery
