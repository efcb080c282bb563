// The one parser for every command-line option that takes a time or a
// duration (`walcut run --crash NODE@TIME+DELAY`, `walcut run --epoch`,
// `walcut restore --before`), and the one formatter of record times.
//
// Record times are microseconds of the cluster clock since the cluster was
// created (its time 0). A cluster made by `walcut run` records in
// cluster.json the wall-clock time of that instant ("epoch_unix_us",
// microseconds since 1970-01-01T00:00:00Z), so every record time is also a
// real UTC time: epoch + time_us.
//
// Durations: NUMBER UNIT
//   NUMBER  digits, optionally with a fraction ("1.5", "2.", ".5") and an
//           exponent ("1e3", "2.5E-1"); no sign, no spaces
//   UNIT    us, ms, s, m (minutes) or h; required: a bare number is refused,
//           since nothing would say whether 150 meant microseconds or seconds
// The value is rounded to the nearest microsecond (a half rounds up):
// "1.5s" = 1500000, "0.0004ms" = 0, "2.5us" = 3. Values that do not fit
// 64 bits of microseconds are refused.
//
// Times (ParseTime) are one of
//   2026-11-30T12:00:00Z        ISO 8601 UTC: YYYY-MM-DDTHH:MM:SS, an optional
//   2026-11-30T12:00:00.25Z     fraction of a second (up to 9 digits, rounded
//   2026-11-30T13:00:00+01:00   to the microsecond), then Z or +HH:MM / -HH:MM
//   @1796040000.25              Unix time: seconds since 1970-01-01T00:00:00Z
//   250ms, 1.5s, 2m             a duration: that much cluster time after creation
// The first two are wall-clock times and need the cluster's epoch to become
// cluster times (ClusterClock::Resolve).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "walfmt/status.h"

namespace walfmt {

// 9999-12-31T23:59:59.999999Z in microseconds since the Unix epoch: the
// latest time these functions read or write.
inline constexpr uint64_t kMaxUnixMicros = 253402300799999999;

// What every time option accepts, for usage messages.
inline constexpr std::string_view kTimeForms =
    "an ISO 8601 UTC time (2026-11-30T12:00:00Z, 2026-11-30T12:00:00.5+01:00), @UNIX_SECONDS (@1796040000), "
    "or cluster time since creation with a unit (250ms, 1.5s, 2m, 1h, 1200us)";

// Microseconds, or kInvalidArgument with a one-line message naming the text.
Result<uint64_t> ParseDuration(std::string_view text);

// A parsed time option: cluster time since creation, or a wall-clock time.
struct TimeArg {
  bool wall_clock = false;
  uint64_t cluster_us = 0;  // when !wall_clock
  int64_t unix_us = 0;      // when wall_clock: microseconds since 1970-01-01T00:00:00Z
};
// kInvalidArgument with a one-line message naming the text and listing the
// accepted forms.
Result<TimeArg> ParseTime(std::string_view text);

// ISO 8601 UTC (as above) or @UNIX_SECONDS to microseconds since the Unix
// epoch; years 0001..9999.
Result<int64_t> ParseWallTime(std::string_view text);

// "2026-11-30T12:00:01.234567Z": always six fraction digits.
std::string FormatUtc(int64_t unix_us);
// Writes FormatUtc's 27 bytes at `out`, returns the end. Remembers the last
// day it formatted, so consecutive times of one day cost a few divisions.
class UtcWriter {
 public:
  static constexpr size_t kBytes = 27;
  char* Write(char* out, int64_t unix_us);

 private:
  int64_t day_ = INT64_MIN;
  char date_[11] = {};  // "YYYY-MM-DDT"
};

// "+1.234567s": a cluster time as an offset from creation, for clusters
// whose epoch is unknown.
std::string FormatClusterOffset(uint64_t time_us);

// Record times of one cluster as people read them.
struct ClusterClock {
  std::optional<uint64_t> epoch_unix_us;  // absent: cluster.json predates epochs, or none was found

  bool known() const { return epoch_unix_us.has_value(); }
  // FormatUtc(epoch + time_us), or FormatClusterOffset(time_us) without an epoch.
  std::string Format(uint64_t time_us) const;
  // The cluster time of a time option: a duration as is; a wall-clock time
  // minus the epoch (0 when it lies before the epoch). Without an epoch a
  // wall-clock time is kInvalidArgument naming `option` and why.
  Result<uint64_t> Resolve(const TimeArg& t, std::string_view option) const;
};

}  // namespace walfmt
