// A latency histogram in fixed memory, HdrHistogram-style (log-linear): the
// values below 256 us each have a bucket of their own, and every power of two
// above is split into 128 buckets of equal width, so that a bucket is never
// wider than 1/128 (0.8 %) of the values in it. That covers 1 us to
// 2^32 - 1 us (71 minutes, more than the hour a latency needs) in 3,328
// buckets; a larger value is counted in the last bucket. Count and Max are
// exact; Percentile returns the upper bound of the bucket that holds the
// value of that rank (never more than Max; Max itself in the last bucket), so
// it is at most 0.8 % above the exact value.
#pragma once

#include <array>
#include <cstdint>

namespace walcut::node {

class Histogram {
 public:
  static constexpr uint32_t kLinearBuckets = 256;  // one per value below 256
  static constexpr uint32_t kSubBuckets = 128;     // per power of two from 2^8 to 2^31
  static constexpr uint32_t kBuckets = kLinearBuckets + (32 - 8) * kSubBuckets;
  static constexpr uint64_t kMaxTracked = 0xFFFFFFFFull;  // larger values share the last bucket

  void Record(uint64_t us);
  // Adds every value `other` recorded.
  void Merge(const Histogram& other);

  uint64_t Count() const { return count_; }
  uint64_t Max() const { return max_; }  // 0 when empty
  // The smallest bucket upper bound at or above the value of rank
  // ceil(p / 100 * Count()) (at least 1) among the recorded values, capped by
  // Max(); p is clamped to [0, 100] (NaN reads as 0). 0 when empty.
  uint64_t Percentile(double p) const;

  // The bucket of a value, and the largest value of a bucket (exposed for the
  // tests).
  static uint32_t BucketOf(uint64_t us);
  static uint64_t UpperBound(uint32_t bucket);

 private:
  std::array<uint64_t, kBuckets> counts_{};
  uint64_t count_ = 0;
  uint64_t max_ = 0;
};

}  // namespace walcut::node
