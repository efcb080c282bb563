// The latency histogram (node/histogram.h): percentiles against the exact
// values of sorted random data (fixed seeds, printed on failure), within the
// histogram's precision, and its bucket layout.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "node/histogram.h"
#include "node/rng.h"

using walcut::node::Histogram;
using walcut::node::Rng;

namespace {

// A value from 1 us to 1 hour, uniform in its logarithm (every bucket size
// gets values), or a small one (the exact buckets).
uint64_t Latency(Rng& rng) {
  if (rng.Below(8) == 0) return rng.Below(300);
  const double hour = 3600e6;
  const double u = static_cast<double>(rng.Below(1u << 30)) / (1u << 30);
  return static_cast<uint64_t>(std::exp(u * std::log(hour)));
}

// Percentile(p) against the exact value of that rank in `sorted`: never
// below it, at most 1/128 above it, never above the maximum.
void CheckPercentiles(const Histogram& h, const std::vector<uint64_t>& sorted) {
  REQUIRE(h.Count() == sorted.size());
  REQUIRE(h.Max() == sorted.back());
  for (double p : {0.0, 0.1, 1.0, 10.0, 25.0, 50.0, 75.0, 90.0, 99.0, 99.9, 99.99, 100.0}) {
    auto rank = static_cast<size_t>(std::ceil(p / 100 * static_cast<double>(sorted.size())));
    rank = std::clamp<size_t>(rank, 1, sorted.size());
    const uint64_t exact = sorted[rank - 1];
    const uint64_t got = h.Percentile(p);
    INFO(fmt::format("p{} exact {} histogram {}", p, exact, got));
    CHECK(got >= exact);
    CHECK(got <= exact + exact / 128);
    CHECK(got <= h.Max());
  }
  CHECK(h.Percentile(100) == sorted.back());
}

}  // namespace

TEST_CASE("histogram: percentiles of random latencies are within 1/128 of the exact values", "[histogram]") {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    INFO(fmt::format("seed {}", seed));
    Rng rng(seed);
    Histogram h;
    std::vector<uint64_t> values(1 + rng.Below(20000));
    for (auto& v : values) {
      v = Latency(rng);
      h.Record(v);
    }
    std::sort(values.begin(), values.end());
    CheckPercentiles(h, values);
  }
}

TEST_CASE("histogram: Merge gives the histogram of all the values", "[histogram]") {
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    INFO(fmt::format("seed {}", seed));
    Rng rng(seed * 1000);
    Histogram a, b, all;
    std::vector<uint64_t> values;
    for (int i = 0; i < 5000; ++i) {
      const uint64_t v = Latency(rng);
      values.push_back(v);
      (rng.Below(3) == 0 ? a : b).Record(v);
      all.Record(v);
    }
    a.Merge(b);
    std::sort(values.begin(), values.end());
    CheckPercentiles(a, values);
    for (double p = 0; p <= 100; p += 0.5) CHECK(a.Percentile(p) == all.Percentile(p));
  }
}

TEST_CASE("histogram: small values are exact, bucket bounds at powers of two, the empty histogram", "[histogram]") {
  Histogram empty;
  CHECK(empty.Count() == 0);
  CHECK(empty.Max() == 0);
  CHECK(empty.Percentile(50) == 0);

  // Below 256 every value has its bucket.
  for (uint64_t v = 0; v < 256; ++v) {
    CHECK(Histogram::BucketOf(v) == v);
    CHECK(Histogram::UpperBound(static_cast<uint32_t>(v)) == v);
  }
  // From 256 on: 128 buckets per power of two, each at most 1/128 of its values wide.
  CHECK(Histogram::BucketOf(256) == 256);
  CHECK(Histogram::BucketOf(257) == 256);
  CHECK(Histogram::UpperBound(256) == 257);
  CHECK(Histogram::BucketOf(511) == 383);
  CHECK(Histogram::BucketOf(512) == 384);
  CHECK(Histogram::UpperBound(383) == 511);
  CHECK(Histogram::BucketOf(Histogram::kMaxTracked) == Histogram::kBuckets - 1);
  CHECK(Histogram::UpperBound(Histogram::kBuckets - 1) == Histogram::kMaxTracked);
  CHECK(Histogram::kBuckets == 3328);
  uint64_t lower = 0;
  for (uint32_t b = 0; b < Histogram::kBuckets; ++b) {
    const uint64_t upper = Histogram::UpperBound(b);
    INFO(fmt::format("bucket {} [{}, {}]", b, lower, upper));
    REQUIRE(Histogram::BucketOf(lower) == b);
    REQUIRE(Histogram::BucketOf(upper) == b);
    REQUIRE((upper - lower) * 128 <= lower);
    lower = upper + 1;
  }

  // One hour is in range; beyond 2^32 - 1 us the last bucket, Max exact.
  Histogram h;
  h.Record(3600000000u);
  CHECK(h.Percentile(50) == 3600000000u);
  h.Record(uint64_t{1} << 40);
  CHECK(h.Max() == uint64_t{1} << 40);
  CHECK(h.Count() == 2);
  CHECK(h.Percentile(50) >= 3600000000u);
  CHECK(h.Percentile(50) <= 3600000000u + 3600000000u / 128);
  CHECK(h.Percentile(100) == uint64_t{1} << 40);

  // p is clamped; NaN reads as 0.
  Histogram few;
  for (uint64_t v : {5, 7, 300}) few.Record(v);
  CHECK(few.Percentile(-3) == 5);
  CHECK(few.Percentile(std::nan("")) == 5);
  CHECK(few.Percentile(250) == 300);
  CHECK(few.Percentile(50) == 7);
  CHECK(few.Percentile(66.7) == 300);
}
