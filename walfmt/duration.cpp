#include "walfmt/duration.h"

#include <charconv>
#include <cstring>
#include <string>

#include <fmt/format.h>

namespace walfmt {
namespace {

constexpr int64_t kUsPerSecond = 1000000;
constexpr int64_t kUsPerDay = 86400 * kUsPerSecond;
// 9999-12-31T23:59:59.999999Z: the last time FormatUtc writes in 27 bytes.
constexpr auto kMaxUnixUs = static_cast<int64_t>(kMaxUnixMicros);

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

Status NotADuration(std::string_view text, std::string_view why) {
  return Status::InvalidArgument(
      fmt::format("\"{}\": not a duration ({}; for example 250ms, 1.5s, 2m, 1200us)", text, why));
}

Status NotATime(std::string_view text, std::string_view why) {
  return Status::InvalidArgument(fmt::format("\"{}\": not a time ({}); use {}", text, why, kTimeForms));
}

// A decimal number at the start of `text`: digits, a fraction, an exponent
// (when `exponent`). Returns the digits and the power of ten they are scaled
// by (value = digits * 10^exp10) and how many bytes it took; "" on failure,
// `why` then says what was wrong.
struct Decimal {
  std::string digits;
  int64_t exp10 = 0;
  size_t used = 0;
};
bool ReadDecimal(std::string_view text, bool exponent, Decimal& d, std::string& why) {
  size_t i = 0;
  bool any = false;
  for (; i < text.size() && IsDigit(text[i]); ++i, any = true) d.digits.push_back(text[i]);
  if (i < text.size() && text[i] == '.') {
    ++i;
    for (; i < text.size() && IsDigit(text[i]); ++i, any = true) {
      d.digits.push_back(text[i]);
      --d.exp10;
    }
  }
  if (!any) {
    why = "no number";
    return false;
  }
  if (exponent && i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    size_t j = i + 1;
    bool neg = false;
    if (j < text.size() && (text[j] == '+' || text[j] == '-')) neg = text[j++] == '-';
    const size_t start = j;
    while (j < text.size() && IsDigit(text[j])) ++j;
    int64_t e = 0;
    if (j == start || j - start > 6 || std::from_chars(text.data() + start, text.data() + j, e).ec != std::errc()) {
      why = "malformed exponent";
      return false;
    }
    d.exp10 += neg ? -e : e;
    i = j;
  }
  d.used = i;
  return true;
}

// digits * 10^exp10 rounded half up to an integer; false when it does not fit
// 64 bits.
bool ScaleToInteger(Decimal d, uint64_t& out) {
  const size_t first = d.digits.find_first_not_of('0');
  if (first == std::string::npos) {
    out = 0;  // all zeros is zero whatever the exponent
    return true;
  }
  d.digits.erase(0, first);
  bool round_up = false;
  if (d.exp10 >= 0) {
    if (static_cast<int64_t>(d.digits.size()) + d.exp10 > 20) return false;
    d.digits.append(static_cast<size_t>(d.exp10), '0');
  } else {
    const uint64_t drop = static_cast<uint64_t>(-d.exp10);
    if (drop > d.digits.size()) {  // below a tenth of the unit
      out = 0;
      return true;
    }
    const size_t keep = d.digits.size() - static_cast<size_t>(drop);
    round_up = d.digits[keep] >= '5';
    d.digits.resize(keep);
  }
  uint64_t v = 0;
  if (!d.digits.empty()) {
    const auto [p, ec] = std::from_chars(d.digits.data(), d.digits.data() + d.digits.size(), v);
    if (ec != std::errc() || p != d.digits.data() + d.digits.size()) return false;
  }
  if (round_up) {
    if (v == UINT64_MAX) return false;
    ++v;
  }
  out = v;
  return true;
}

// The decimal digits of digits * factor (exactly).
std::string MultiplyDigits(const std::string& digits, unsigned factor) {
  std::string out(digits.size() + 5, '0');
  unsigned carry = 0;
  size_t o = out.size();
  for (size_t i = digits.size(); i-- > 0;) {
    const unsigned v = static_cast<unsigned>(digits[i] - '0') * factor + carry;
    out[--o] = static_cast<char>('0' + v % 10);
    carry = v / 10;
  }
  while (carry > 0) {
    out[--o] = static_cast<char>('0' + carry % 10);
    carry /= 10;
  }
  return out;
}

// Days since 1970-01-01 of a proleptic Gregorian date, and back
// (H. Hinnant's days_from_civil / civil_from_days).
int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}
void CivilFromDays(int64_t z, int64_t& y, unsigned& m, unsigned& d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  y = static_cast<int64_t>(yoe) + era * 400;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  d = doy - (153 * mp + 2) / 5 + 1;
  m = mp < 10 ? mp + 3 : mp - 9;
  y += m <= 2;
}
bool IsLeap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }
unsigned DaysInMonth(int64_t y, unsigned m) {
  static constexpr unsigned kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && IsLeap(y) ? 29 : kDays[m - 1];
}

// Exactly `n` digits at text[pos..]; false otherwise.
bool Fixed(std::string_view text, size_t pos, size_t n, unsigned& out) {
  if (pos + n > text.size()) return false;
  unsigned v = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (!IsDigit(text[i])) return false;
    v = v * 10 + static_cast<unsigned>(text[i] - '0');
  }
  out = v;
  return true;
}

void Put2(char* p, unsigned v) {
  p[0] = static_cast<char>('0' + v / 10);
  p[1] = static_cast<char>('0' + v % 10);
}

Result<int64_t> ParseIso(std::string_view text) {
  // YYYY-MM-DDTHH:MM:SS[.F...](Z|+HH:MM|-HH:MM)
  unsigned y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  if (!Fixed(text, 0, 4, y) || text.size() < 10 || text[4] != '-' || !Fixed(text, 5, 2, mo) || text[7] != '-' ||
      !Fixed(text, 8, 2, d)) {
    return NotATime(text, "expected YYYY-MM-DD");
  }
  if (text.size() == 10) return NotATime(text, "a date needs a time of day and a zone, as in 2026-11-30T00:00:00Z");
  if (text[10] != 'T' || !Fixed(text, 11, 2, h) || text.size() < 19 || text[13] != ':' || !Fixed(text, 14, 2, mi) ||
      text[16] != ':' || !Fixed(text, 17, 2, s)) {
    return NotATime(text, "expected YYYY-MM-DDTHH:MM:SS");
  }
  if (y == 0) return NotATime(text, "year 0000");
  if (mo < 1 || mo > 12) return NotATime(text, fmt::format("no month {:02}", mo));
  if (d < 1 || d > DaysInMonth(y, mo)) return NotATime(text, fmt::format("{:04}-{:02} has no day {:02}", y, mo, d));
  if (h > 23 || mi > 59 || s > 59) return NotATime(text, fmt::format("no time of day {:02}:{:02}:{:02}", h, mi, s));
  size_t i = 19;
  uint64_t frac_us = 0;
  if (i < text.size() && (text[i] == '.' || text[i] == ',')) {
    Decimal dec;
    const std::string_view rest = text.substr(i + 1);
    size_t n = 0;
    while (n < rest.size() && IsDigit(rest[n])) ++n;
    if (n == 0) return NotATime(text, "no digits after the decimal point");
    dec.digits = std::string(rest.substr(0, n));
    dec.exp10 = 6 - static_cast<int64_t>(n);
    if (!ScaleToInteger(dec, frac_us)) return NotATime(text, "malformed fraction");
    i += 1 + n;
  }
  int64_t offset_min = 0;
  if (i == text.size()) return NotATime(text, "no zone: end with Z for UTC, or an offset such as +01:00");
  if (text[i] == 'Z') {
    ++i;
  } else if (text[i] == '+' || text[i] == '-') {
    unsigned oh = 0, om = 0;
    if (!Fixed(text, i + 1, 2, oh) || i + 3 >= text.size() || text[i + 3] != ':' || !Fixed(text, i + 4, 2, om) ||
        oh > 23 || om > 59) {
      return NotATime(text, "malformed zone offset: expected +HH:MM or -HH:MM");
    }
    offset_min = (text[i] == '-' ? -1 : 1) * static_cast<int64_t>(oh * 60 + om);
    i += 6;
  } else {
    return NotATime(text, "expected Z or +HH:MM after the time of day");
  }
  if (i != text.size()) return NotATime(text, "unexpected text after the zone");
  const int64_t secs = DaysFromCivil(y, mo, d) * 86400 + h * 3600 + mi * 60 + s - offset_min * 60;
  const int64_t us = secs * kUsPerSecond + static_cast<int64_t>(frac_us);
  if (us < 0) return NotATime(text, "before 1970-01-01T00:00:00Z");
  if (us > kMaxUnixUs) return NotATime(text, "after 9999-12-31T23:59:59.999999Z");
  return us;
}

Result<int64_t> ParseUnixSeconds(std::string_view text) {
  const std::string_view num = text.substr(1);
  Decimal dec;
  std::string why;
  if (!ReadDecimal(num, false, dec, why) || dec.used != num.size()) {
    return NotATime(text, "expected @ and seconds since 1970-01-01T00:00:00Z, as in @1796040000 or @1796040000.25");
  }
  dec.exp10 += 6;
  uint64_t us = 0;
  if (!ScaleToInteger(dec, us) || us > static_cast<uint64_t>(kMaxUnixUs)) {
    return NotATime(text, "after 9999-12-31T23:59:59.999999Z");
  }
  return static_cast<int64_t>(us);
}

bool LooksLikeDate(std::string_view text) {
  return text.size() >= 5 && IsDigit(text[0]) && IsDigit(text[1]) && IsDigit(text[2]) && IsDigit(text[3]) &&
         text[4] == '-';
}

}  // namespace

Result<uint64_t> ParseDuration(std::string_view text) {
  Decimal dec;
  std::string why;
  if (!ReadDecimal(text, true, dec, why)) return NotADuration(text, why);
  const std::string_view unit = text.substr(dec.used);
  if (unit.empty()) {
    return NotADuration(text, "no unit: a bare number could mean microseconds or seconds; add us, ms, s, m or h");
  } else if (unit == "us") {
  } else if (unit == "ms") {
    dec.exp10 += 3;
  } else if (unit == "s") {
    dec.exp10 += 6;
  } else if (unit == "m" || unit == "h") {
    dec.digits = MultiplyDigits(dec.digits, unit == "m" ? 60 : 3600);  // minutes and hours are not powers of ten
    dec.exp10 += 6;
  } else {
    return NotADuration(text, fmt::format("unknown unit \"{}\"; use us, ms, s, m or h", unit));
  }
  uint64_t us = 0;
  if (!ScaleToInteger(dec, us)) return NotADuration(text, "too large");
  return us;
}

Result<int64_t> ParseWallTime(std::string_view text) {
  if (!text.empty() && text[0] == '@') return ParseUnixSeconds(text);
  return ParseIso(text);
}

Result<TimeArg> ParseTime(std::string_view text) {
  TimeArg t;
  if ((!text.empty() && text[0] == '@') || LooksLikeDate(text)) {
    auto us = ParseWallTime(text);
    if (!us.ok()) return us.status();
    t.wall_clock = true;
    t.unix_us = *us;
    return t;
  }
  Decimal dec;
  std::string why;
  if (!ReadDecimal(text, true, dec, why)) return NotATime(text, why);
  if (dec.used == text.size()) {
    return NotATime(text, "a bare number has no unit: it could mean microseconds, seconds or a Unix time");
  }
  auto us = ParseDuration(text);
  if (!us.ok()) {
    const std::string_view unit = text.substr(dec.used);
    return NotATime(text, fmt::format("unknown unit \"{}\"", unit));
  }
  t.cluster_us = *us;
  return t;
}

char* UtcWriter::Write(char* out, int64_t unix_us) {
  if (unix_us < 0) unix_us = 0;
  if (unix_us > kMaxUnixUs) unix_us = kMaxUnixUs;
  const int64_t day = unix_us / kUsPerDay;
  int64_t in_day = unix_us % kUsPerDay;
  if (day != day_) {
    int64_t y = 0;
    unsigned m = 0, d = 0;
    CivilFromDays(day, y, m, d);
    const unsigned yy = static_cast<unsigned>(y);
    Put2(date_, yy / 100);
    Put2(date_ + 2, yy % 100);
    date_[4] = '-';
    Put2(date_ + 5, m);
    date_[7] = '-';
    Put2(date_ + 8, d);
    date_[10] = 'T';
    day_ = day;
  }
  std::memcpy(out, date_, sizeof date_);
  char* p = out + sizeof date_;
  const auto secs = static_cast<unsigned>(in_day / kUsPerSecond);
  auto frac = static_cast<unsigned>(in_day % kUsPerSecond);
  Put2(p, secs / 3600);
  p[2] = ':';
  Put2(p + 3, secs / 60 % 60);
  p[5] = ':';
  Put2(p + 6, secs % 60);
  p[8] = '.';
  for (int i = 14; i >= 9; --i) {
    p[i] = static_cast<char>('0' + frac % 10);
    frac /= 10;
  }
  p[15] = 'Z';
  return p + 16;
}

std::string FormatUtc(int64_t unix_us) {
  char buf[UtcWriter::kBytes];
  UtcWriter w;
  return std::string(buf, w.Write(buf, unix_us));
}

std::string FormatClusterOffset(uint64_t time_us) {
  return fmt::format("+{}.{:06}s", time_us / kUsPerSecond, time_us % kUsPerSecond);
}

std::string ClusterClock::Format(uint64_t time_us) const {
  if (!epoch_unix_us || *epoch_unix_us > static_cast<uint64_t>(kMaxUnixUs) ||
      time_us > static_cast<uint64_t>(kMaxUnixUs) - *epoch_unix_us) {
    return FormatClusterOffset(time_us);
  }
  return FormatUtc(static_cast<int64_t>(*epoch_unix_us + time_us));
}

Result<uint64_t> ClusterClock::Resolve(const TimeArg& t, std::string_view option) const {
  if (!t.wall_clock) return t.cluster_us;
  if (!epoch_unix_us) {
    return Status::InvalidArgument(fmt::format(
        "{} {}: this cluster records no epoch (its cluster.json has no \"epoch_unix_us\"), so a wall-clock time "
        "cannot be placed on its clock; give cluster time since creation with a unit (250ms, 1.5s, 2m)",
        option, FormatUtc(t.unix_us)));
  }
  const auto epoch = static_cast<int64_t>(*epoch_unix_us);
  return t.unix_us <= epoch ? uint64_t{0} : static_cast<uint64_t>(t.unix_us - epoch);
}

}  // namespace walfmt
