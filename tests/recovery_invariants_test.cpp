// Workload invariants: hand-made states where each broken case must report
// the right check, node and keys; full snapshots taken by the runtime must
// pass.
#include <algorithm>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "recovery/invariants.h"
#include "recovery_support.h"
#include "walfmt/record_text.h"

using namespace walcut::recovery;
using namespace walcut::recovery::testing;

namespace {

InvariantReport Check(const walfmt::ClusterInfo& ci, const std::vector<NodeState>& states, InvariantOptions o = {}) {
  if (!o.bank && !o.cycle) o = OptionsFor(ci.workload);
  return CheckInvariants(ci, Ptrs(states), o);
}

std::string Describe(const InvariantReport& r) {
  std::string s = fmt::format("{} findings:", r.total_findings);
  for (const auto& f : r.findings) s += "\n  " + f.check + ": " + f.message;
  return s;
}

// The one finding of `check` (fails when there is not exactly one).
const Finding& Only(const InvariantReport& r, const std::string& check) {
  const Finding* found = nullptr;
  int n = 0;
  for (const auto& f : r.findings) {
    if (f.check == check) {
      found = &f;
      ++n;
    }
  }
  INFO(Describe(r));
  REQUIRE(n == 1);
  return *found;
}

// The two holders of a key with 1 backup: primary first.
std::pair<uint32_t, uint32_t> Holders(const walfmt::ClusterInfo& ci, const std::string& key) {
  const auto topo = ci.topology();
  const uint32_t p = topo.PrimaryOf(key);
  return {p, topo.BackupOf(p, 0)};
}

uint32_t NonHolder(const walfmt::ClusterInfo& ci, const std::string& key) {
  for (uint32_t n = 0; n < ci.nodes; ++n) {
    if (!ci.topology().Holds(n, key)) return n;
  }
  FAIL("every node holds " << key);
  return 0;
}

}  // namespace

TEST_CASE("key names round trip and reject near misses", "[recovery][invariants]") {
  CHECK(AccountKey(7) == "acct/000007");
  CHECK(RingKey(123456) == "ring/123456");
  CHECK(ParseAccountKey("acct/000042") == 42u);
  CHECK(ParseRingKey("ring/999999") == 999999u);
  CHECK_FALSE(ParseAccountKey("acct/42"));
  CHECK_FALSE(ParseAccountKey("acct/0000042"));
  CHECK_FALSE(ParseAccountKey("ring/000042"));
  CHECK_FALSE(ParseRingKey("ring/00004x"));
  CHECK_FALSE(ParseRingKey(""));
}

TEST_CASE("invariants: the initial data passes every check", "[recovery][invariants]") {
  const walfmt::ClusterInfo ci = HandInfo();
  const auto states = Place(ci, HandData(ci));
  const auto r = Check(ci, states);
  INFO(Describe(r));
  CHECK(r.ok());
  CHECK(r.findings.empty());
  REQUIRE(r.bank_total);
  CHECK(*r.bank_total == 1000);
  CHECK(r.ring_walked == 8);
  CHECK(r.keys_checked == 2 * (10 + 8));  // every key on two nodes
}

TEST_CASE("invariants: bank breakage names the node and the account", "[recovery][invariants]") {
  const walfmt::ClusterInfo ci = HandInfo();
  const std::string key = AccountKey(3);
  const auto [primary, backup] = Holders(ci, key);
  auto states = Place(ci, HandData(ci));
  InvariantOptions bank_only;
  bank_only.bank = true;

  SECTION("an account missing on its backup") {
    states[backup].erase(key);
    const auto r = Check(ci, states, bank_only);
    CHECK(r.total_findings == 1);
    const Finding& f = Only(r, check::kBankMissing);
    CHECK(f.node == backup);
    CHECK(f.keys == std::vector<std::string>{key});
    CHECK(f.found == "missing");
    CHECK_THAT(f.message, Catch::Contains(fmt::format("node {}", backup)) && Catch::Contains(key));
    CHECK(r.bank_total == 1000);  // the primary copy still counts
  }
  SECTION("an account missing on its primary: the backup's copy stands in for the total") {
    states[primary].erase(key);
    const auto r = Check(ci, states, bank_only);
    CHECK(r.total_findings == 1);
    CHECK(Only(r, check::kBankMissing).node == primary);
    CHECK(r.bank_total == 1000);
  }
  SECTION("an account missing everywhere: reported on both, no total") {
    states[primary].erase(key);
    states[backup].erase(key);
    const auto r = Check(ci, states, bank_only);
    CHECK(r.total_findings == 2);
    CHECK_FALSE(r.bank_total);
  }
  SECTION("a backup that differs from its primary") {
    states[backup][key] = "90";
    const auto r = Check(ci, states, bank_only);
    CHECK(r.total_findings == 1);  // the total counts primary copies only
    const Finding& f = Only(r, check::kBankReplica);
    CHECK(f.node == backup);
    CHECK(f.peer == primary);
    CHECK(f.keys == std::vector<std::string>{key});
    CHECK(f.expected == "100");
    CHECK(f.found == "90");
  }
  SECTION("a primary that was changed: the backup disagrees and the total is off") {
    states[primary][key] = "105";
    const auto r = Check(ci, states, bank_only);
    CHECK(r.total_findings == 2);
    const Finding& f = Only(r, check::kBankReplica);
    CHECK(f.node == backup);
    CHECK(f.peer == primary);
    CHECK(f.expected == "105");
    const Finding& t = Only(r, check::kBankTotal);
    CHECK_FALSE(t.node);
    CHECK(t.expected == "1000");
    CHECK(t.found == "1005");
    CHECK_THAT(t.message, Catch::Contains("+5"));
  }
  SECTION("money created on every copy: only the total catches it") {
    states[primary][key] = "101";
    states[backup][key] = "101";
    const auto r = Check(ci, states, bank_only);
    CHECK(r.total_findings == 1);
    CHECK(Only(r, check::kBankTotal).found == "1001");
  }
  SECTION("a negative balance, total conserved") {
    const std::string other = AccountKey(4);
    for (auto& s : states) {
      if (s.count(key)) s[key] = "-50";
      if (s.count(other)) s[other] = "250";
    }
    const auto r = Check(ci, states, bank_only);
    INFO(Describe(r));
    CHECK(r.total_findings == 1);
    const Finding& f = Only(r, check::kBankNegative);
    CHECK(f.node == primary);
    CHECK(f.keys == std::vector<std::string>{key});
    CHECK(f.found == "-50");
  }
  SECTION("a balance that is not a number") {
    for (auto& s : states) {
      if (s.count(key)) s[key] = "12abc";
    }
    const auto r = Check(ci, states, bank_only);
    CHECK(r.total_findings == 1);
    CHECK(Only(r, check::kBankNotNumber).node == primary);
    CHECK_FALSE(r.bank_total);
  }
  SECTION("a key on a node the topology does not give it") {
    const uint32_t stranger = NonHolder(ci, key);
    states[stranger][key] = "100";
    const auto r = Check(ci, states, bank_only);
    CHECK(r.total_findings == 1);
    const Finding& f = Only(r, check::kPlacement);
    CHECK(f.node == stranger);
    CHECK(f.keys == std::vector<std::string>{key});
    CHECK(f.expected == fmt::format("held by nodes {},{} only", primary, backup));
  }
  SECTION("keys outside the workload's key space") {
    states[1]["acct/000010"] = "5";  // accounts are 0..9
    states[2]["hello"] = "world";
    const auto r = Check(ci, states, bank_only);
    CHECK(r.total_findings == 2);
    std::vector<std::pair<uint32_t, std::string>> seen;
    for (const auto& f : r.findings) {
      CHECK(f.check == check::kUnknownKey);
      seen.emplace_back(f.node.value_or(99), f.keys.at(0));
    }
    std::sort(seen.begin(), seen.end());
    CHECK(seen == std::vector<std::pair<uint32_t, std::string>>{{1, "acct/000010"}, {2, "hello"}});
  }
  SECTION("bank only: a broken ring is not looked at") {
    states[Holders(ci, RingKey(0)).first][RingKey(0)] = "0";
    const auto r = Check(ci, states, bank_only);
    CHECK(r.ok());
  }
}

TEST_CASE("invariants: cycle breakage names the keys", "[recovery][invariants]") {
  const walfmt::ClusterInfo ci = HandInfo();
  auto data = HandData(ci);
  InvariantOptions cycle_only;
  cycle_only.cycle = true;

  SECTION("the ring split in two: the sub-ring found, the keys it misses, the other ring") {
    data[RingKey(3)] = "0";  // 0 1 2 3 | 4 5 6 7
    data[RingKey(7)] = "4";
    const auto r = Check(ci, Place(ci, data), cycle_only);
    INFO(Describe(r));
    CHECK(r.total_findings == 3);  // the sub-ring, the keys it misses, the separate ring
    CHECK(r.ring_walked == 4);
    std::vector<const Finding*> rings;
    for (const auto& f : r.findings) {
      if (f.check == check::kCycleSubRing) rings.push_back(&f);
    }
    REQUIRE(rings.size() == 2);
    CHECK(rings[0]->keys == std::vector<std::string>{RingKey(0), RingKey(1), RingKey(2), RingKey(3)});
    CHECK(rings[0]->found == "a ring of 4 keys");
    CHECK(rings[1]->keys == std::vector<std::string>{RingKey(4), RingKey(5), RingKey(6), RingKey(7)});
    const Finding& u = Only(r, check::kCycleUnreached);
    CHECK(u.keys == std::vector<std::string>{RingKey(4), RingKey(5), RingKey(6), RingKey(7)});
    CHECK(u.key_count == 4);
  }
  SECTION("two keys pointing to the same key: the key visited twice and both its predecessors") {
    data[RingKey(5)] = "2";  // 0 1 2 3 4 5 -> 2 again; 6 and 7 unreached
    const auto r = Check(ci, Place(ci, data), cycle_only);
    INFO(Describe(r));
    CHECK(r.total_findings == 2);
    const Finding& f = Only(r, check::kCycleVisitedTwice);
    CHECK(f.keys == std::vector<std::string>{RingKey(2), RingKey(1), RingKey(5)});
    CHECK(Only(r, check::kCycleUnreached).keys == std::vector<std::string>{RingKey(6), RingKey(7)});
  }
  SECTION("a value that is not a key index: reported on its primary, the walk stops there") {
    data[RingKey(3)] = "8";  // ring keys are 0..7
    const auto r = Check(ci, Place(ci, data), cycle_only);
    INFO(Describe(r));
    CHECK(r.total_findings == 3);
    const Finding& b = Only(r, check::kCycleBadValue);
    CHECK(b.node == Holders(ci, RingKey(3)).first);
    CHECK(b.keys == std::vector<std::string>{RingKey(3)});
    CHECK(b.found == "'8'");
    CHECK(Only(r, check::kCycleBroken).keys == std::vector<std::string>{RingKey(3)});
    CHECK(Only(r, check::kCycleUnreached).key_count == 4);
  }
  SECTION("a value beyond 64 bits is not an index (never read as another number)") {
    data[RingKey(3)] = "99999999999999999999";
    const auto r = Check(ci, Place(ci, data), cycle_only);
    INFO(Describe(r));
    const Finding& b = Only(r, check::kCycleBadValue);
    CHECK(b.keys == std::vector<std::string>{RingKey(3)});
    CHECK(b.found == "'99999999999999999999'");
  }
  SECTION("a sub-ring of up to 16 keys is listed whole; a longer one is cut, with the count of the rest") {
    for (const uint32_t half : {16u, 17u}) {
      walfmt::ClusterInfo big = ci;
      big.ring_keys = 2 * half;
      auto d = HandData(big);
      d[RingKey(half - 1)] = "0";
      d[RingKey(2 * half - 1)] = std::to_string(half);
      const auto r = Check(big, Place(big, d), cycle_only);
      INFO(Describe(r));
      const Finding* walk = nullptr;
      for (const auto& f : r.findings) {
        if (f.check == check::kCycleSubRing && f.message.rfind("the walk", 0) == 0) walk = &f;
      }
      REQUIRE(walk != nullptr);
      const std::string tail = half == 16 ? fmt::format("{} -> {}", RingKey(15), RingKey(0))
                                          : fmt::format("{} ... (+1) -> {}", RingKey(15), RingKey(0));
      CHECK(walk->message.size() > tail.size());
      CHECK(walk->message.substr(walk->message.size() - tail.size()) == tail);
    }
  }
  SECTION("a ring key missing everywhere") {
    auto states = Place(ci, data);
    for (auto& s : states) s.erase(RingKey(6));
    const auto r = Check(ci, states, cycle_only);
    INFO(Describe(r));
    std::vector<uint32_t> missing_on;
    for (const auto& f : r.findings) {
      if (f.check == check::kCycleMissing) {
        CHECK(f.keys == std::vector<std::string>{RingKey(6)});
        missing_on.push_back(*f.node);
      }
    }
    std::sort(missing_on.begin(), missing_on.end());
    const auto [p, b] = Holders(ci, RingKey(6));
    CHECK(missing_on == std::vector<uint32_t>{std::min(p, b), std::max(p, b)});
    CHECK(Only(r, check::kCycleBroken).keys == std::vector<std::string>{RingKey(6)});
    CHECK(Only(r, check::kCycleUnreached).keys == std::vector<std::string>{RingKey(7)});
  }
  SECTION("a backup copy of a ring key that disagrees; the walk uses the primary's and passes") {
    auto states = Place(ci, data);
    const auto [p, b] = Holders(ci, RingKey(2));
    states[b][RingKey(2)] = "5";
    const auto r = Check(ci, states, cycle_only);
    CHECK(r.total_findings == 1);
    const Finding& f = Only(r, check::kCycleReplica);
    CHECK(f.node == b);
    CHECK(f.peer == p);
    CHECK(f.expected == "3");
    CHECK(f.found == "5");
    CHECK(r.ring_walked == 8);
  }
  SECTION("a permutation that is still one ring passes") {
    // The runtime's swap: k -> r -> r2 -> r3 becomes k -> r2 -> r -> r3.
    data[RingKey(1)] = "3";
    data[RingKey(3)] = "2";
    data[RingKey(2)] = "4";
    const auto r = Check(ci, Place(ci, data), cycle_only);
    INFO(Describe(r));
    CHECK(r.ok());
    CHECK(r.ring_walked == 8);
  }
}

TEST_CASE("invariants: states for another number of nodes are one finding", "[recovery][invariants]") {
  const walfmt::ClusterInfo ci = HandInfo();
  auto states = Place(ci, HandData(ci));
  states.pop_back();
  const auto r = Check(ci, states);
  REQUIRE(r.total_findings == 1);
  CHECK(r.findings[0].check == check::kNodeCount);
  CHECK(r.findings[0].message == "2 node states for a cluster of 3 nodes (hand-made)");
}

TEST_CASE("invariants: findings beyond max_findings are counted, not kept", "[recovery][invariants]") {
  const walfmt::ClusterInfo ci = HandInfo();
  auto states = Place(ci, HandData(ci));
  for (auto& s : states) s.clear();
  InvariantOptions o = OptionsFor(ci.workload);
  o.max_findings = 3;
  const auto r = CheckInvariants(ci, Ptrs(states), o);
  CHECK(r.findings.size() == 3);
  // Every copy missing, the walk broken at ring/000000, the other 7 ring keys unreached.
  CHECK(r.total_findings == 2 * 18 + 2);
  CHECK_FALSE(r.ok());
}

TEST_CASE("invariants: full snapshots taken by the runtime pass, a changed balance or ring is caught",
          "[recovery][invariants][cluster]") {
  struct Case {
    walcut::node::Workload w;
    uint64_t seed;
    uint32_t nodes, backups;
  };
  for (const Case& c : {Case{walcut::node::Workload::kBank, 21, 3, 1}, Case{walcut::node::Workload::kCycle, 22, 3, 0},
                        Case{walcut::node::Workload::kMixed, 23, 5, 2}}) {
    TempDir t("inv");
    const SmallCluster cl = MakeSmallCluster(t.str(), c.w, c.seed, c.nodes, c.backups);
    INFO(fmt::format("seed {} workload {} nodes {} backups {}", c.seed, walcut::node::WorkloadName(c.w), c.nodes,
                     c.backups));
    auto src = FindClusterInfoFor(cl.snapshot_dir);
    REQUIRE(src.ok());
    REQUIRE(src->full_snapshot);
    auto set = LoadStateSet(cl.snapshot_dir, {src->info.nodes, src->info.cluster_id, src->path});
    INFO(set.status().message());
    REQUIRE(set.ok());
    const walfmt::ClusterInfo& ci = src->info;
    const auto r = CheckInvariants(ci, StatesOf(*set), OptionsFor(ci.workload));
    INFO(Describe(r));
    CHECK(r.ok());
    CHECK(CheckRecorded(*set, *src->full_snapshot).empty());
    if (ci.has_bank()) {
      CHECK(r.bank_total == cl.run.summary.initial_bank_total);
      CHECK(ci.initial_bank_total == cl.run.summary.initial_bank_total);
    }
    if (ci.has_cycle()) CHECK(r.ring_walked == ci.ring_keys);
    CHECK(r.keys_checked == (ci.accounts + ci.ring_keys) * (ci.backups + 1));

    // The same states, tampered: the checks are not blind on real data.
    std::vector<NodeState> states;
    for (const auto& n : set->nodes) states.push_back(n.entries);
    const walfmt::Topology topo = ci.topology();
    if (ci.has_bank()) {
      auto bad = states;
      const std::string key = AccountKey(7);
      const uint32_t p = topo.PrimaryOf(key);
      bad[p][key] = std::to_string(std::stoll(bad[p][key]) + 1);
      const auto rb = CheckInvariants(ci, Ptrs(bad), OptionsFor(ci.workload));
      INFO(Describe(rb));
      CHECK(Only(rb, check::kBankTotal).found == std::to_string(ci.initial_bank_total + 1));
      CHECK(rb.total_findings == 1 + ci.backups);  // each backup now disagrees with the primary
      for (const auto& f : rb.findings) {
        if (f.check == check::kBankReplica) CHECK(f.keys == std::vector<std::string>{key});
      }
    }
    if (ci.has_cycle()) {
      // Point ring/000000 at itself on every copy: a sub-ring of one key.
      auto bad = states;
      for (auto& s : bad) {
        if (s.count(RingKey(0))) s[RingKey(0)] = "0";
      }
      const auto rc = CheckInvariants(ci, Ptrs(bad), OptionsFor(ci.workload));
      INFO(Describe(rc));
      CHECK(Only(rc, check::kCycleSubRing).keys == std::vector<std::string>{RingKey(0)});
      CHECK(Only(rc, check::kCycleUnreached).key_count == ci.ring_keys - 1);
    }
  }
}
