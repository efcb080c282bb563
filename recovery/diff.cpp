#include "recovery/diff.h"

#include <fmt/format.h>

namespace walcut::recovery {

NodeDiff DiffNode(uint32_t node, const NodeState& a, const NodeState& b, const DiffOptions& options) {
  NodeDiff d;
  d.node = node;
  d.entries_a = a.size();
  d.entries_b = b.size();
  d.fingerprint_a = walfmt::StateFingerprint(a);
  d.fingerprint_b = walfmt::StateFingerprint(b);
  size_t listed = 0;
  auto ia = a.begin();
  auto ib = b.begin();
  // Both maps are sorted by key: one pass, bounded by |A| + |B| steps.
  while (ia != a.end() || ib != b.end()) {
    if (ib == b.end() || (ia != a.end() && ia->first < ib->first)) {
      ++d.only_a_count;
      if (listed < options.limit) {
        d.only_a.push_back({ia->first, ia->second});
        ++listed;
      }
      ++ia;
    } else if (ia == a.end() || ib->first < ia->first) {
      ++d.only_b_count;
      if (listed < options.limit) {
        d.only_b.push_back({ib->first, ib->second});
        ++listed;
      }
      ++ib;
    } else {
      if (ia->second != ib->second) {
        ++d.changed_count;
        if (listed < options.limit) {
          d.changed.push_back({ia->first, ia->second, ib->second});
          ++listed;
        }
      }
      ++ia;
      ++ib;
    }
  }
  return d;
}

walfmt::Result<StateDiff> DiffStates(const StateSet& a, const StateSet& b, const DiffOptions& options) {
  if (a.nodes.size() != b.nodes.size()) {
    return walfmt::Status::InvalidArgument(fmt::format("{} holds {} node{}, {} holds {}: not comparable", a.dir,
                                                       a.nodes.size(), a.nodes.size() == 1 ? "" : "s", b.dir,
                                                       b.nodes.size()));
  }
  StateDiff d;
  for (uint32_t i = 0; i < a.nodes.size(); ++i)
    d.nodes.push_back(DiffNode(i, a.nodes[i].entries, b.nodes[i].entries, options));
  return d;
}

}  // namespace walcut::recovery
