// How a restarting node takes the member list from the initiator's answer to
// its Hello (the real runtime, node/process.cpp): pure, so that the rule is
// tested without sockets (tests/node_membership_test.cpp).
//
// The answer lists the members oldest first; the node joins as the youngest.
// A member the node has not seen connect yet would be left out of its list,
// and when that member's status came later it would be put last: this
// node's order, hence its idea of the initiator, would differ from the
// others' (two initiators after the next crash). So an answer naming a
// member that is not connected is dropped (the Hello is retried), up to
// kMaxEarlyAnswers times; after that the node joins without it.
#pragma once

#include <cstdint>
#include <vector>

namespace walcut::node {

inline constexpr uint32_t kMaxEarlyAnswers = 100;

struct JoinDecision {
  bool take = false;               // false: drop this answer and wait for the next one
  std::vector<uint32_t> members;   // when taken: the members, oldest first, without this node
  std::vector<uint32_t> left_out;  // when taken: members named but not connected (after kMaxEarlyAnswers)
};

// `answer`: the initiator's members, oldest first; `connected[n]`: node n's
// connection is up; `early_answers`: answers dropped so far (incremented
// when this one is dropped or taken with members missing). Ids outside
// [0, nodes) and `self` are ignored.
JoinDecision DecideJoin(const std::vector<uint32_t>& answer, uint32_t self, const std::vector<bool>& connected,
                        uint32_t& early_answers);

}  // namespace walcut::node
