// Regressions for what fuzz/fuzz_summary found in the summary loader
// (fuzz/README.md, "Findings"); each input that failed is also kept in
// fuzz/corpus/summary/finding-*.
#include <string>

#include <catch2/catch.hpp>

#include "cut/load.h"
#include "cut/summary.h"

TEST_CASE("a summary naming an unknown check with a line break in it is refused in one line", "[cut]") {
  walcut::cut::NodeSummary s;
  s.node = 1;
  walcut::cut::Finding f;
  f.check = walcut::cut::Check::kShape;
  f.node = 1;
  f.message = "node 1: something";
  s.findings.push_back(f);
  std::string text = walcut::cut::SummaryToJson(s);
  const size_t at = text.find("\"shape\"");
  REQUIRE(at != std::string::npos);
  // fuzz input finding-newline-in-error.json: the check's name was quoted raw.
  text.replace(at, 7, R"("x\ny")");
  auto r = walcut::cut::SummaryFromJson(text, "s.json");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message() == R"(s.json: field 'findings[0].check': "x\ny" is not a known check)");
}

TEST_CASE("a summary whose node id or peer does not fit 32 bits is refused, not truncated to another node", "[cut]") {
  walcut::cut::NodeSummary s;
  s.node = 1;
  s.shared[2][0] = {};
  const std::string good = walcut::cut::SummaryToJson(s);
  REQUIRE(walcut::cut::SummaryFromJson(good, "s.json").ok());
  // Node 2^32 + 1 used to load as node 1.
  std::string big = good;
  const size_t at = big.find("\"node\": 1");
  REQUIRE(at != std::string::npos);
  big.replace(at, 9, "\"node\": 4294967297");
  auto r = walcut::cut::SummaryFromJson(big, "s.json");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message() == "s.json: field 'node': 4294967297 is larger than the limit 4294967295");
  std::string peer = good;
  const size_t p = peer.find("\"peer\": 2");
  REQUIRE(p != std::string::npos);
  peer.replace(p, 9, "\"peer\": 4294967298");
  auto q = walcut::cut::SummaryFromJson(peer, "s.json");
  REQUIRE_FALSE(q.ok());
  CHECK(q.status().message() == "s.json: field 'shared[0].peer': 4294967298 is larger than the limit 4294967295");
}

TEST_CASE("a summary whose cluster id or digest is not hex is refused, not read as 0", "[cut]") {
  walcut::cut::NodeSummary s;
  s.node = 1;
  s.cluster_known = true;
  s.cluster_id = 0xabc;
  s.shared[2][0].x = 0x1234;
  const std::string good = walcut::cut::SummaryToJson(s);
  auto back = walcut::cut::SummaryFromJson(good, "s.json");
  REQUIRE(back.ok());
  CHECK(back->cluster_id == 0xabc);
  CHECK(back->shared.at(2).at(0).x == 0x1234);
  // Exactly 16 lower-case hex digits, as the writer writes them.
  struct Case {
    std::string from, to, error;
  } cases[] = {{"0000000000000abc", "zz", "field 'cluster_id': \"zz\" is not 16 lower-case hex digits"},
               {"0000000000000abc", "", "field 'cluster_id': \"\" is not 16 lower-case hex digits"},
               {"0000000000000abc", "10000000000000abc",
                "field 'cluster_id': \"10000000000000abc\" is not 16 lower-case hex digits"},
               {"0000000000000abc", "abc", "field 'cluster_id': \"abc\" is not 16 lower-case hex digits"},
               {"0000000000001234", "12 34", "field 'shared[0].digest': \"12 34\" is not 16 lower-case hex digits"}};
  for (const Case& c : cases) {
    std::string text = good;
    const size_t at = text.find(c.from);
    REQUIRE(at != std::string::npos);
    text.replace(at, c.from.size(), c.to);
    auto r = walcut::cut::SummaryFromJson(text, "s.json");
    INFO(c.to);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message() == "s.json: " + c.error);
  }
}
