// Comparing two state sets (two snapshot directories: full snapshots, restore
// outputs, or one of each) node by node: keys only in A, only in B, and keys
// whose values differ. Counts are always complete; the keys themselves are
// listed up to a limit per node, in key order.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "recovery/state_set.h"
#include "walfmt/status.h"

namespace walcut::recovery {

struct KeyValue {
  std::string key;
  std::string value;
};

struct ChangedKey {
  std::string key;
  std::string a;  // value in A
  std::string b;  // value in B
};

struct NodeDiff {
  uint32_t node = 0;
  uint64_t entries_a = 0, entries_b = 0;
  uint64_t fingerprint_a = 0, fingerprint_b = 0;  // walfmt::StateFingerprint
  // Complete counts.
  uint64_t only_a_count = 0, only_b_count = 0, changed_count = 0;
  // The first `limit` differing keys of the node (all three kinds together,
  // in key order), split by kind.
  std::vector<KeyValue> only_a;
  std::vector<KeyValue> only_b;
  std::vector<ChangedKey> changed;
  bool equal() const { return only_a_count == 0 && only_b_count == 0 && changed_count == 0; }
  uint64_t differences() const { return only_a_count + only_b_count + changed_count; }
  bool truncated() const { return only_a.size() + only_b.size() + changed.size() < differences(); }
};

struct StateDiff {
  std::vector<NodeDiff> nodes;  // by node id
  bool equal() const {
    for (const auto& n : nodes) {
      if (!n.equal()) return false;
    }
    return true;
  }
  uint64_t nodes_differing() const {
    uint64_t c = 0;
    for (const auto& n : nodes) c += n.equal() ? 0 : 1;
    return c;
  }
};

struct DiffOptions {
  // Differing keys listed per node; the counts are complete regardless.
  size_t limit = std::numeric_limits<size_t>::max();
};

// One node: a single merge pass over both sorted maps.
NodeDiff DiffNode(uint32_t node, const NodeState& a, const NodeState& b, const DiffOptions& options = {});

// Every node. kInvalidArgument when the node counts differ.
walfmt::Result<StateDiff> DiffStates(const StateSet& a, const StateSet& b, const DiffOptions& options = {});

}  // namespace walcut::recovery
