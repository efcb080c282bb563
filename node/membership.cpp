#include "node/membership.h"

namespace walcut::node {

JoinDecision DecideJoin(const std::vector<uint32_t>& answer, uint32_t self, const std::vector<bool>& connected,
                        uint32_t& early_answers) {
  JoinDecision d;
  const auto nodes = static_cast<uint32_t>(connected.size());
  for (uint32_t n : answer) {
    if (n >= nodes || n == self) continue;
    (connected[n] ? d.members : d.left_out).push_back(n);
  }
  if (!d.left_out.empty() && ++early_answers <= kMaxEarlyAnswers) {
    d.members.clear();
    d.left_out.clear();
    return d;
  }
  d.take = true;
  return d;
}

}  // namespace walcut::node
