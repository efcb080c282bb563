#include "node/histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace walcut::node {

uint32_t Histogram::BucketOf(uint64_t us) {
  if (us < kLinearBuckets) return static_cast<uint32_t>(us);
  us = std::min(us, kMaxTracked);
  const int e = std::bit_width(us) - 1;                 // 8 to 31
  const int shift = e - 7;                              // the bucket width is 2^shift
  const auto sub = static_cast<uint32_t>(us >> shift);  // 128 to 255
  return kLinearBuckets + static_cast<uint32_t>(e - 8) * kSubBuckets + (sub - kSubBuckets);
}

uint64_t Histogram::UpperBound(uint32_t bucket) {
  if (bucket < kLinearBuckets) return bucket;
  const uint32_t i = bucket - kLinearBuckets;
  const uint32_t shift = i / kSubBuckets + 1;
  const uint64_t sub = kSubBuckets + i % kSubBuckets;
  return ((sub + 1) << shift) - 1;
}

void Histogram::Record(uint64_t us) {
  ++counts_[BucketOf(us)];
  ++count_;
  max_ = std::max(max_, us);
}

void Histogram::Merge(const Histogram& other) {
  for (uint32_t i = 0; i < kBuckets; ++i) counts_[i] += other.counts_[i];
  count_ += other.count_;
  max_ = std::max(max_, other.max_);
}

uint64_t Histogram::Percentile(double p) const {
  if (count_ == 0) return 0;
  if (!(p > 0)) p = 0;  // NaN too
  p = std::min(p, 100.0);
  auto rank = static_cast<uint64_t>(std::ceil(p / 100.0 * static_cast<double>(count_)));
  rank = std::clamp<uint64_t>(rank, 1, count_);
  uint64_t seen = 0;
  for (uint32_t i = 0; i < kBuckets; ++i) {
    seen += counts_[i];
    // The last bucket also holds the values past its bound: Max is theirs.
    if (seen >= rank) return i + 1 == kBuckets ? max_ : std::min(UpperBound(i), max_);
  }
  return max_;
}

}  // namespace walcut::node
