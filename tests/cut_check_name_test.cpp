// Check names: one enum, one name function; the names are what reports and
// summary files carry, and a summary naming an unknown check is refused.
#include <string>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "cut/load.h"
#include "cut/summary.h"

using walcut::cut::Check;
using walcut::cut::CheckName;
using walcut::cut::ParseCheck;

TEST_CASE("every check's name parses back to it, prints as itself, and no other name parses", "[cut]") {
  const Check all[] = {Check::kWal,       Check::kShape,        Check::kMarker,      Check::kRollback,
                       Check::kAtomicity, Check::kMonotonicity, Check::kCompleteness};
  for (Check c : all) {
    INFO(CheckName(c));
    REQUIRE(ParseCheck(CheckName(c)).has_value());
    CHECK(*ParseCheck(CheckName(c)) == c);
    CHECK(fmt::format("{}", c) == CheckName(c));
  }
  CHECK(std::string(CheckName(Check::kMarker)) == "marker");
  CHECK_FALSE(ParseCheck("markers").has_value());
  CHECK_FALSE(ParseCheck("").has_value());
  CHECK_FALSE(ParseCheck("Atomicity").has_value());
}

TEST_CASE("a summary whose finding names an unknown check is refused, naming the field", "[cut]") {
  walcut::cut::NodeSummary s;
  s.node = 1;
  walcut::cut::Finding f;
  f.check = Check::kShape;
  f.node = 1;
  f.message = "node 1: something";
  s.findings.push_back(f);
  const std::string good = walcut::cut::SummaryToJson(s);
  auto back = walcut::cut::SummaryFromJson(good, "s.json");
  REQUIRE(back.ok());
  REQUIRE(back->findings.size() == 1);
  CHECK(back->findings[0].check == Check::kShape);
  std::string bad = good;
  const size_t at = bad.find("\"shape\"");
  REQUIRE(at != std::string::npos);
  bad.replace(at, 7, "\"bogus\"");
  auto refused = walcut::cut::SummaryFromJson(bad, "s.json");
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message().find("findings[0].check") != std::string::npos);
  CHECK(refused.status().message().find("\"bogus\" is not a known check") != std::string::npos);
}
