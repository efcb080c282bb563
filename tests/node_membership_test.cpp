// A restarting node takes the initiator's member list only once it is
// connected to every member in it (node/membership.h): otherwise its member
// order, hence its initiator, would differ from the other nodes' (found by
// the long crash sweep: two initiators after the next crash).
#include <catch2/catch.hpp>

#include "node/membership.h"

namespace walcut::node {

TEST_CASE("node membership: an answer naming a member not connected yet is dropped", "[node][membership]") {
  uint32_t early = 0;
  // Node 3 restarts; the initiator (0) counts 0, 2, 1 as members, oldest first.
  std::vector<bool> connected{true, false, true, true};
  JoinDecision d = DecideJoin({0, 2, 1}, 3, connected, early);
  CHECK_FALSE(d.take);
  CHECK(d.members.empty());
  CHECK(early == 1);
  // Node 1's connection comes up: the next answer is taken, in its order.
  connected[1] = true;
  d = DecideJoin({0, 2, 1}, 3, connected, early);
  CHECK(d.take);
  CHECK(d.members == std::vector<uint32_t>{0, 2, 1});
  CHECK(d.left_out.empty());
  CHECK(early == 1);
}

TEST_CASE("node membership: a member that stays unreachable is left out after kMaxEarlyAnswers", "[node][membership]") {
  uint32_t early = 0;
  const std::vector<bool> connected{true, true, false};
  for (uint32_t i = 1; i <= kMaxEarlyAnswers; ++i) {
    INFO(i);
    REQUIRE_FALSE(DecideJoin({2, 0}, 1, connected, early).take);
  }
  const JoinDecision d = DecideJoin({2, 0}, 1, connected, early);
  CHECK(d.take);
  CHECK(d.members == std::vector<uint32_t>{0});
  CHECK(d.left_out == std::vector<uint32_t>{2});
}

TEST_CASE("node membership: itself and ids outside the cluster are ignored", "[node][membership]") {
  uint32_t early = 0;
  const JoinDecision d = DecideJoin({1, 7, 0, 2}, 2, {true, true, true}, early);
  CHECK(d.take);
  CHECK(d.members == std::vector<uint32_t>{1, 0});
  CHECK(early == 0);
}

}  // namespace walcut::node
