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
  CHECK(r.status().message() == R"(s.json: field 'findings[0].check' "x\ny" is not a known check)");
}
