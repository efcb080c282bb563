// The duration grammar shared by every option that takes a time: integers
// (what --crash took) and decimals (what --before took), with us, ms or s.
#include "walfmt/duration.h"

#include <catch2/catch.hpp>

namespace {
uint64_t Us(std::string_view text) {
  auto r = walfmt::ParseDuration(text);
  INFO(text << ": " << r.status().message());
  REQUIRE(r.ok());
  return *r;
}
std::string Error(std::string_view text) {
  auto r = walfmt::ParseDuration(text);
  INFO(text);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == walfmt::ErrorCode::kInvalidArgument);
  return r.status().message();
}
}  // namespace

TEST_CASE("ParseDuration: integers with and without a unit", "[duration]") {
  CHECK(Us("0") == 0);
  CHECK(Us("500") == 500);
  CHECK(Us("500us") == 500);
  CHECK(Us("30ms") == 30000);
  CHECK(Us("2s") == 2000000);
  CHECK(Us("128500us") == 128500);
  CHECK(Us("007ms") == 7000);
  CHECK(Us("18446744073709551615") == UINT64_MAX);
  CHECK(Us("18446744073709551615us") == UINT64_MAX);
}

TEST_CASE("ParseDuration: decimals and exponents, rounded to the nearest microsecond", "[duration]") {
  CHECK(Us("1.5s") == 1500000);
  CHECK(Us("250.25ms") == 250250);
  CHECK(Us("0.001s") == 1000);
  CHECK(Us(".5ms") == 500);
  CHECK(Us("2.") == 2);
  CHECK(Us("2.5") == 3);      // a half rounds up
  CHECK(Us("2.49us") == 2);
  CHECK(Us("0.0005ms") == 1);
  CHECK(Us("0.0004ms") == 0);
  CHECK(Us("0.00000001s") == 0);
  CHECK(Us("1e3") == 1000);
  CHECK(Us("1.5e3ms") == 1500000);
  CHECK(Us("25E-1s") == 2500000);
  CHECK(Us("0e99") == 0);
  CHECK(Us("0.000") == 0);
}

TEST_CASE("ParseDuration: what is not a duration is named", "[duration]") {
  CHECK(Error("5x") == "\"5x\": not a duration (unknown unit \"x\"; use us, ms or s; for example 250ms, 1.5s, 1200us)");
  CHECK(Error("") == "\"\": not a duration (no number; for example 250ms, 1.5s, 1200us)");
  for (const char* bad : {"ms", ".", "-1", "+1", " 1", "1 ", "1 ms", "1.5.2", "1e", "1e+", "1ee3", "inf", "nan",
                          "0x10", "1m", "1sec", "1S", "1e1234567"}) {
    Error(bad);
  }
  CHECK(Error("18446744073709551616").find("too large") != std::string::npos);
  CHECK(Error("18446744073709552s").find("too large") != std::string::npos);
  CHECK(Error("1e20").find("too large") != std::string::npos);
}
