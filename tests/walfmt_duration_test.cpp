// The time grammar shared by every option that takes a time or a duration,
// and the formatting of record times (walfmt/duration.h).
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
int64_t Wall(std::string_view text) {
  auto r = walfmt::ParseTime(text);
  INFO(text << ": " << r.status().message());
  REQUIRE(r.ok());
  REQUIRE(r->wall_clock);
  return r->unix_us;
}
uint64_t Cluster(std::string_view text) {
  auto r = walfmt::ParseTime(text);
  INFO(text << ": " << r.status().message());
  REQUIRE(r.ok());
  REQUIRE_FALSE(r->wall_clock);
  return r->cluster_us;
}
std::string TimeError(std::string_view text) {
  auto r = walfmt::ParseTime(text);
  INFO(text);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == walfmt::ErrorCode::kInvalidArgument);
  // Every refusal lists what is accepted.
  CHECK(r.status().message().find(walfmt::kTimeForms) != std::string::npos);
  return r.status().message();
}
constexpr int64_t kS = 1000000;
}  // namespace

TEST_CASE("ParseDuration: integers with a unit", "[duration]") {
  CHECK(Us("0us") == 0);
  CHECK(Us("500us") == 500);
  CHECK(Us("30ms") == 30000);
  CHECK(Us("2s") == 2000000);
  CHECK(Us("2m") == 120000000);
  CHECK(Us("1h") == 3600000000);
  CHECK(Us("128500us") == 128500);
  CHECK(Us("007ms") == 7000);
  CHECK(Us("18446744073709551615us") == UINT64_MAX);
}

TEST_CASE("ParseDuration: decimals and exponents, rounded to the nearest microsecond", "[duration]") {
  CHECK(Us("1.5s") == 1500000);
  CHECK(Us("250.25ms") == 250250);
  CHECK(Us("0.001s") == 1000);
  CHECK(Us(".5ms") == 500);
  CHECK(Us("2.us") == 2);
  CHECK(Us("2.5us") == 3);  // a half rounds up
  CHECK(Us("2.49us") == 2);
  CHECK(Us("0.0005ms") == 1);
  CHECK(Us("0.0004ms") == 0);
  CHECK(Us("0.00000001s") == 0);
  CHECK(Us("1e3us") == 1000);
  CHECK(Us("1.5e3ms") == 1500000);
  CHECK(Us("25E-1s") == 2500000);
  CHECK(Us("0e99s") == 0);
  // Minutes and hours scale exactly, not through a rounded number of seconds.
  CHECK(Us("1.5m") == 90000000);
  CHECK(Us("0.0000001m") == 6);    // 6 us exactly
  CHECK(Us("0.00000001h") == 36);  // 36 us exactly
  CHECK(Us("0.000000001h") == 4);  // 3.6 us rounds up
  CHECK(Us("5124095576.030431h") == 18446744073709551600ull);
}

TEST_CASE("ParseDuration: a bare number and other non-durations are refused", "[duration]") {
  CHECK(Error("150") ==
        "\"150\": not a duration (no unit: a bare number could mean microseconds or seconds; add us, ms, s, m or h; "
        "for example 250ms, 1.5s, 2m, 1200us)");
  for (const char* bare : {"0", "500", "2.5", "1e3", "18446744073709551615"}) {
    CHECK(Error(bare).find("no unit") != std::string::npos);
  }
  CHECK(Error("5x") ==
        "\"5x\": not a duration (unknown unit \"x\"; use us, ms, s, m or h; for example 250ms, 1.5s, 2m, 1200us)");
  CHECK(Error("") == "\"\": not a duration (no number; for example 250ms, 1.5s, 2m, 1200us)");
  for (const char* bad : {"ms",    ".",   "-1s", "+1s",   " 1s",  "1s ",  "1 ms", "1.5.2s", "1es",        "1e+s",
                          "1ee3s", "inf", "nan", "0x10s", "1min", "1sec", "1S",   "1M",     "1e1234567s", "1hh"}) {
    Error(bad);
  }
  CHECK(Error("18446744073709551616us").find("too large") != std::string::npos);
  CHECK(Error("18446744073709552s").find("too large") != std::string::npos);
  CHECK(Error("1e20us").find("too large") != std::string::npos);
  CHECK(Error("5124095576.030432h").find("too large") != std::string::npos);
  CHECK(Error("307445734561825861m").find("too large") != std::string::npos);
}

TEST_CASE("ParseTime: ISO 8601 UTC times", "[duration]") {
  CHECK(Wall("1970-01-01T00:00:00Z") == 0);
  CHECK(Wall("2026-11-30T12:00:00Z") == 1796040000 * kS);
  CHECK(Wall("2026-11-30T12:00:01.234567Z") == 1796040001 * kS + 234567);
  CHECK(Wall("2026-11-30T12:00:01.5Z") == 1796040001 * kS + 500000);
  CHECK(Wall("2026-11-30T12:00:01,5Z") == 1796040001 * kS + 500000);
  CHECK(Wall("2026-11-30T12:00:01.2345675Z") == 1796040001 * kS + 234568);  // rounded half up
  CHECK(Wall("2026-11-30T23:59:59.9999999Z") == 1796083200 * kS);           // rounds into the next day
  CHECK(Wall("2024-01-01T00:00:00Z") == 1704067200 * kS);
  // Offsets: the same instant written in other zones.
  CHECK(Wall("2026-11-30T13:00:00+01:00") == 1796040000 * kS);
  CHECK(Wall("2026-11-30T06:30:00-05:30") == 1796040000 * kS);
  CHECK(Wall("2026-12-01T01:00:00+13:00") == 1796040000 * kS);
  CHECK(Wall("2026-11-30T12:00:00+00:00") == 1796040000 * kS);
  // Leap years: Feb 29 exists in 2024 and 2000, not in 2026 or 1900.
  CHECK(Wall("2024-02-29T00:00:00Z") == 1709164800 * kS);
  CHECK(Wall("2000-02-29T12:00:00Z") == 951825600 * kS);
  CHECK(Wall("2024-03-01T00:00:00Z") - Wall("2024-02-28T00:00:00Z") == 2 * 86400 * kS);
  CHECK(Wall("2026-03-01T00:00:00Z") - Wall("2026-02-28T00:00:00Z") == 86400 * kS);
  CHECK(Wall("9999-12-31T23:59:59.999999Z") == 253402300799999999);
}

TEST_CASE("ParseTime: @UNIX_SECONDS", "[duration]") {
  CHECK(Wall("@0") == 0);
  CHECK(Wall("@1796040000") == 1796040000 * kS);
  CHECK(Wall("@1796040000.25") == 1796040000 * kS + 250000);
  CHECK(Wall("@1796040000.0000005") == 1796040000 * kS + 1);
  CHECK(Wall("@253402300799.999999") == 253402300799999999);
}

TEST_CASE("ParseTime: durations are cluster time since creation", "[duration]") {
  CHECK(Cluster("250ms") == 250000);
  CHECK(Cluster("1.5s") == 1500000);
  CHECK(Cluster("2m") == 120000000);
  CHECK(Cluster("1h") == 3600000000);
  CHECK(Cluster("1200us") == 1200);
}

TEST_CASE("ParseTime: what is not a time is named, with the accepted forms", "[duration]") {
  // A bare number: the issue's --before 150 (microseconds?) and --before 1700000000 (a Unix time?).
  CHECK(TimeError("150").find("a bare number has no unit") != std::string::npos);
  CHECK(TimeError("1700000000").find("a bare number has no unit") != std::string::npos);
  CHECK(TimeError("1.5").find("a bare number") != std::string::npos);
  CHECK(TimeError("2026-02-30T00:00:00Z").find("2026-02 has no day 30") != std::string::npos);
  CHECK(TimeError("2026-02-29T00:00:00Z").find("2026-02 has no day 29") != std::string::npos);
  CHECK(TimeError("1900-02-29T00:00:00Z").find("1900-02 has no day 29") != std::string::npos);
  CHECK(TimeError("2026-04-31T00:00:00Z").find("has no day 31") != std::string::npos);
  CHECK(TimeError("2026-13-01T00:00:00Z").find("no month 13") != std::string::npos);
  CHECK(TimeError("2026-00-01T00:00:00Z").find("no month 00") != std::string::npos);
  CHECK(TimeError("2026-11-00T00:00:00Z").find("has no day 00") != std::string::npos);
  CHECK(TimeError("2026-11-30T24:00:00Z").find("no time of day") != std::string::npos);
  CHECK(TimeError("2026-11-30T12:60:00Z").find("no time of day") != std::string::npos);
  CHECK(TimeError("2026-11-30T12:00:60Z").find("no time of day") != std::string::npos);
  CHECK(TimeError("2026-11-30T12:00:00").find("no zone") != std::string::npos);
  CHECK(TimeError("2026-11-30").find("a date needs a time of day") != std::string::npos);
  CHECK(TimeError("1969-12-31T23:59:59Z").find("before 1970") != std::string::npos);
  CHECK(TimeError("1970-01-01T00:30:00+01:00").find("before 1970") != std::string::npos);
  CHECK(TimeError("@253402300800").find("after 9999") != std::string::npos);
  CHECK(TimeError("@99999999999999999999999").find("after 9999") != std::string::npos);
  for (const char* bad : {"",
                          "@",
                          "@-1",
                          "@1e3",
                          "@1s",
                          "@ 1",
                          "2026-11-30T12:00:00.Z",
                          "2026-11-30T12:00:00+1:00",
                          "2026-11-30T12:00:00+01",
                          "2026-11-30T12:00:00+24:00",
                          "2026-11-30T12:00:00+01:60",
                          "2026-11-30T12:00:00Zx",
                          "2026-11-30 12:00:00Z",
                          "2026-11-30T12:00Z",
                          "26-11-30T12:00:00Z",
                          "2026-1-30T12:00:00Z",
                          "0000-01-01T00:00:00Z",
                          "5x",
                          "-1s",
                          "now",
                          "1e3"}) {
    TimeError(bad);
  }
}

TEST_CASE("FormatUtc and UtcWriter: ISO 8601 UTC with microseconds", "[duration]") {
  CHECK(walfmt::FormatUtc(0) == "1970-01-01T00:00:00.000000Z");
  CHECK(walfmt::FormatUtc(1796040001 * kS + 234567) == "2026-11-30T12:00:01.234567Z");
  CHECK(walfmt::FormatUtc(1709164800 * kS + 1) == "2024-02-29T00:00:00.000001Z");
  CHECK(walfmt::FormatUtc(951868799 * kS + 999999) == "2000-02-29T23:59:59.999999Z");
  CHECK(walfmt::FormatUtc(253402300799999999) == "9999-12-31T23:59:59.999999Z");
  // Round trip over a spread of days (four centuries, leap days included):
  // what FormatUtc writes, ParseTime reads back.
  for (int64_t us = 0; us < 253402300799999999; us += 86400 * kS * 97 + 3600 * kS * 5 + 123457) {
    CAPTURE(us);
    CHECK(Wall(walfmt::FormatUtc(us)) == us);
  }
  // One writer across days: the cached date is replaced when the day changes.
  walfmt::UtcWriter w;
  char buf[walfmt::UtcWriter::kBytes];
  const int64_t t0 = 1796083199 * kS + 999999;  // 2026-11-30T23:59:59.999999Z
  CHECK(std::string(buf, w.Write(buf, t0)) == "2026-11-30T23:59:59.999999Z");
  CHECK(std::string(buf, w.Write(buf, t0 + 1)) == "2026-12-01T00:00:00.000000Z");
  CHECK(std::string(buf, w.Write(buf, t0)) == "2026-11-30T23:59:59.999999Z");
}

TEST_CASE("ClusterClock: record times with and without an epoch", "[duration]") {
  walfmt::ClusterClock none;
  CHECK(none.Format(1234567) == "+1.234567s");
  CHECK(none.Format(0) == "+0.000000s");
  walfmt::ClusterClock clock{uint64_t{1796040000} * kS};
  CHECK(clock.Format(1234567) == "2026-11-30T12:00:01.234567Z");
  // A time past year 9999 (a damaged record) falls back to the offset.
  CHECK(clock.Format(UINT64_MAX) == "+18446744073709.551615s");

  auto iso = walfmt::ParseTime("2026-11-30T12:00:00.150Z");
  REQUIRE(iso.ok());
  auto at = clock.Resolve(*iso, "--before");
  REQUIRE(at.ok());
  CHECK(*at == 150000);
  auto early = walfmt::ParseTime("@1000");
  REQUIRE(early.ok());
  auto at_early = clock.Resolve(*early, "--before");
  REQUIRE(at_early.ok());
  CHECK(*at_early == 0);  // before the epoch: time 0
  auto dur = walfmt::ParseTime("150ms");
  REQUIRE(dur.ok());
  auto at_dur = none.Resolve(*dur, "--before");
  REQUIRE(at_dur.ok());
  CHECK(*at_dur == 150000);
  auto refused = none.Resolve(*iso, "--before");
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == walfmt::ErrorCode::kInvalidArgument);
  CHECK(refused.status().message().find("--before 2026-11-30T12:00:00.150000Z: this cluster records no epoch") == 0);
}
