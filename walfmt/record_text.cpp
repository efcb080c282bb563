#include "walfmt/record_text.h"

#include "walfmt/duration.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "walfmt/bytes.h"

namespace walfmt {

namespace {

// Hand-rolled appenders: `walcut dump` formats millions of records a second,
// and a format-string parse per field costs more than the rest of the work.
void AppendU64(std::string& out, uint64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out.append(buf, r.ptr);
}
void AppendHex64(std::string& out, uint64_t v) {
  static constexpr char kDigits[] = "0123456789abcdef";
  char buf[16];
  for (int i = 15; i >= 0; --i) {
    buf[i] = kDigits[v & 0xF];
    v >>= 4;
  }
  out.append(buf, 16);
}
// TxId::Readable(): "node:seq", or "node@incarnation:counter" after a restart.
void AppendTx(std::string& out, const TxId& t) {
  AppendU64(out, t.node);
  if (t.incarnation() != 0) {
    out.push_back('@');
    AppendU64(out, t.incarnation());
  }
  out.push_back(':');
  AppendU64(out, t.counter());
}
void AppendTxList(std::string& out, const std::vector<TxId>& v, size_t limit) {
  for (size_t i = 0; i < v.size() && i < limit; ++i) {
    if (i) out.push_back(',');
    AppendTx(out, v[i]);
  }
  if (v.size() > limit) {
    out += ",...(+";
    AppendU64(out, v.size() - limit);
    out.push_back(')');
  }
}
void AppendNodes(std::string& out, const std::vector<uint32_t>& v) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out.push_back(',');
    AppendU64(out, v[i]);
  }
}
void AppendTxFlags(std::string& out, uint16_t f) {
  if (f & kTxFlagOnePhase) out += " 1pc";
  if (f & kTxFlagRecovered) out += " recovered";
}
void AppendTime(std::string& out, uint64_t time_us, const ClusterClock* clock) {
  out += "time ";
  if (clock != nullptr) {
    out += clock->Format(time_us);
    return;
  }
  AppendU64(out, time_us);
  out += "us";
}
void AppendCutTime(std::string& out, uint64_t cut, uint64_t time_us, const ClusterClock* clock) {
  out += "cut ";
  AppendU64(out, cut);
  out.push_back(' ');
  AppendTime(out, time_us, clock);
}

}  // namespace

void AppendPrintable(std::string& out, std::string_view bytes, size_t max_bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  const size_t n = (max_bytes == 0 || bytes.size() <= max_bytes) ? bytes.size() : max_bytes;
  static constexpr auto kPlain = [] {
    std::array<bool, 256> t{};
    for (int c = 0x20; c < 0x7F; ++c) t[static_cast<size_t>(c)] = c != '\\';
    return t;
  }();
  auto plain = [](unsigned char c) { return kPlain[c]; };
  size_t i = 0;
  while (i < n) {
    size_t j = i;
    while (j < n && plain(static_cast<unsigned char>(bytes[j]))) ++j;
    out.append(bytes.data() + i, j - i);  // a run of plain bytes at once
    if (j == n) break;
    const auto c = static_cast<unsigned char>(bytes[j]);
    const char esc[4] = {'\\', 'x', kDigits[c >> 4], kDigits[c & 0xF]};
    out.append(esc, 4);
    i = j + 1;
  }
  if (n < bytes.size()) {
    out += "...(+";
    AppendU64(out, bytes.size() - n);
    out.push_back(')');
  }
}

std::string Printable(std::string_view bytes, size_t max_bytes) {
  std::string out;
  AppendPrintable(out, bytes, max_bytes);
  return out;
}

void AppendWritesDescription(std::string& out, const std::vector<WriteView>& writes, size_t max_bytes) {
  out += "writes ";
  AppendU64(out, writes.size());
  out.push_back(':');
  const size_t shown = max_bytes == 0 ? writes.size() : std::min<size_t>(writes.size(), 8);
  for (size_t i = 0; i < shown; ++i) {
    const WriteView& w = writes[i];
    if (w.op == WriteOp::kDelete) {
      out += " del ";
      AppendPrintable(out, w.key, max_bytes);
    } else {
      out.push_back(' ');
      AppendPrintable(out, w.key, max_bytes);
      out.push_back('=');
      AppendPrintable(out, w.value, max_bytes);
    }
  }
  if (shown < writes.size()) {
    out += " ...(+";
    AppendU64(out, writes.size() - shown);
    out += " writes)";
  }
}

namespace {

constexpr auto kPlainByte = [] {
  std::array<bool, 256> t{};
  for (int c = 0x20; c < 0x7F; ++c) t[static_cast<size_t>(c)] = c != '\\';
  return t;
}();

// The raw writers below write through `p` without checks: the *Bound()
// functions give the room they need, computed from the same inputs.
char* WriteU64(char* p, uint64_t v) {
  if (v < 10) {  // counts are mostly one digit ("writes 1:")
    *p = static_cast<char>('0' + v);
    return p + 1;
  }
  return std::to_chars(p, p + 20, v).ptr;
}
char* WriteLiteral(char* p, std::string_view s) {
  std::memcpy(p, s.data(), s.size());
  return p + s.size();
}
size_t ShownBytes(std::string_view bytes, size_t max_bytes) {
  return (max_bytes == 0 || bytes.size() <= max_bytes) ? bytes.size() : max_bytes;
}
size_t ShownWrites(std::span<const WriteView> writes, size_t max_bytes) {
  return max_bytes == 0 ? writes.size() : std::min<size_t>(writes.size(), 8);
}

}  // namespace

size_t PrintableBound(std::string_view bytes, size_t max_bytes) {
  // Every byte escaped (4 each), then "...(+N)" with N of up to 20 digits.
  return 4 * ShownBytes(bytes, max_bytes) + 26;
}

namespace {
// Whether all 8 bytes of `x` are plain (0x20..0x7E, not '\\'), with the
// word tricks of "Bit Twiddling Hacks" (haszero, hasless); each test is exact
// for "any byte of the word".
inline bool AllPlain8(uint64_t x) {
  constexpr uint64_t kOnes = 0x0101010101010101ull;
  constexpr uint64_t kHigh = 0x8080808080808080ull;
  auto has_zero = [](uint64_t v) { return ((v - kOnes) & ~v & kHigh) != 0; };
  if ((x & kHigh) != 0) return false;                        // a byte >= 0x80
  if (((x - kOnes * 0x20) & ~x & kHigh) != 0) return false;  // a byte < 0x20
  return !has_zero(x ^ (kOnes * 0x7F)) && !has_zero(x ^ (kOnes * '\\'));
}
}  // namespace

#if defined(__SSE2__)
// Bit k set when byte k of the 16 at `s` is not plain (the same test as
// kPlainByte). Signed compares: bytes >= 0x80 are negative, below 0x20.
inline unsigned NotPlain16(const unsigned char* s) {
  const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
  const __m128i printable =
      _mm_and_si128(_mm_cmpgt_epi8(x, _mm_set1_epi8(0x1F)), _mm_cmplt_epi8(x, _mm_set1_epi8(0x7F)));
  const __m128i plain = _mm_andnot_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('\\')), printable);
  return ~static_cast<unsigned>(_mm_movemask_epi8(plain)) & 0xFFFFu;
}
#endif

char* WritePrintable(char* p, std::string_view bytes, size_t max_bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  const size_t n = ShownBytes(bytes, max_bytes);
  const auto* s = reinterpret_cast<const unsigned char*>(bytes.data());
  [[maybe_unused]] char* const start = p;
  auto one = [&](unsigned char c) {
    if (kPlainByte[c]) {
      *p++ = static_cast<char>(c);
    } else {
      p[0] = '\\';
      p[1] = 'x';
      p[2] = kDigits[c >> 4];
      p[3] = kDigits[c & 0xF];
      p += 4;
    }
  };
  size_t i = 0;
  // Keys and values are mostly printable: 16 bytes at a time while they are,
  // then 8.
#if defined(__SSE2__)
  for (; i + 16 <= n; i += 16) {
    if (NotPlain16(s + i) == 0) {
      std::memcpy(p, s + i, 16);
      p += 16;
    } else {
      for (size_t k = 0; k < 16; ++k) one(s[i + k]);
    }
  }
  // A tail after plain bytes only: the last 16 bytes again, overlapping what
  // is written (each plain byte is its own text, so the text so far is the
  // input so far).
  if (i < n && i >= 16 && static_cast<size_t>(p - start) == i && NotPlain16(s + n - 16) == 0) {
    std::memcpy(start + n - 16, s + n - 16, 16);
    p = start + n;
    i = n;
  }
#endif
  for (; i + 8 <= n; i += 8) {
    uint64_t x;
    std::memcpy(&x, s + i, 8);
    if (AllPlain8(x)) {
      std::memcpy(p, &x, 8);
      p += 8;
    } else {
      for (size_t k = 0; k < 8; ++k) one(s[i + k]);
    }
  }
  for (; i < n; ++i) one(s[i]);
  if (n < bytes.size()) {
    p = WriteLiteral(p, "...(+");
    p = WriteU64(p, bytes.size() - n);
    *p++ = ')';
  }
  return p;
}

size_t WritesDescriptionBound(std::span<const WriteView> writes, size_t max_bytes) {
  size_t b = 7 + 20 + 1;  // "writes N:"
  const size_t shown = ShownWrites(writes, max_bytes);
  for (size_t i = 0; i < shown; ++i) {
    b += 5 + PrintableBound(writes[i].key, max_bytes) + 1 + PrintableBound(writes[i].value, max_bytes);
  }
  return b + 6 + 20 + 7;  // " ...(+N writes)"
}

char* WriteWritesDescription(char* p, std::span<const WriteView> writes, size_t max_bytes) {
  p = WriteLiteral(p, "writes ");
  p = WriteU64(p, writes.size());
  *p++ = ':';
  const size_t shown = ShownWrites(writes, max_bytes);
  for (size_t i = 0; i < shown; ++i) {
    const WriteView& w = writes[i];
    if (w.op == WriteOp::kDelete) {
      p = WriteLiteral(p, " del ");
      p = WritePrintable(p, w.key, max_bytes);
    } else {
      *p++ = ' ';
      p = WritePrintable(p, w.key, max_bytes);
      *p++ = '=';
      p = WritePrintable(p, w.value, max_bytes);
    }
  }
  if (shown < writes.size()) {
    p = WriteLiteral(p, " ...(+");
    p = WriteU64(p, writes.size() - shown);
    p = WriteLiteral(p, " writes)");
  }
  return p;
}

size_t TxOutcomeDescriptionBound(const TxOutcomeView& v) {
  // "marker N participants " + up to 10 digits and a comma per node + flags.
  return 7 + 20 + 14 + 11 * v.participant_count() + 14;
}

char* WriteTxOutcomeDescription(char* p, RecordType type, const TxOutcomeView& v) {
  if (type == RecordType::kTxCommit) {
    p = WriteLiteral(p, "marker ");
    p = WriteU64(p, v.marker);
    *p++ = ' ';
  }
  p = WriteLiteral(p, "participants ");
  for (size_t i = 0; i < v.participant_count(); ++i) {
    if (i) *p++ = ',';
    p = WriteU64(p, LoadU32(v.participants.data() + 4 * i));
  }
  if (type != RecordType::kTxPrepare) {
    if (v.flags & kTxFlagOnePhase) p = WriteLiteral(p, " 1pc");
    if (v.flags & kTxFlagRecovered) p = WriteLiteral(p, " recovered");
  }
  return p;
}

void AppendDescription(std::string& out, const Record& rec, size_t max_bytes, const ClusterClock* clock) {
  std::visit(
      [&](const auto& r) {
        using T = std::decay_t<decltype(r)>;
        if constexpr (std::is_same_v<T, TxData>) {
          std::vector<WriteView> views;
          views.reserve(r.writes.size());
          for (const Write& w : r.writes) views.push_back({w.op, w.key, w.value});
          AppendWritesDescription(out, views, max_bytes);
        } else if constexpr (std::is_same_v<T, TxPrepare>) {
          out += "participants ";
          AppendNodes(out, r.participants);
        } else if constexpr (std::is_same_v<T, TxCommit>) {
          out += "marker ";
          AppendU64(out, r.marker);
          out += " participants ";
          AppendNodes(out, r.participants);
          AppendTxFlags(out, r.flags);
        } else if constexpr (std::is_same_v<T, TxRollback>) {
          out += "participants ";
          AppendNodes(out, r.participants);
          AppendTxFlags(out, r.flags);
        } else if constexpr (std::is_same_v<T, CutStart>) {
          AppendCutTime(out, r.cut_id, r.time_us, clock);
        } else if constexpr (std::is_same_v<T, CutFinish>) {
          AppendCutTime(out, r.cut_id, r.time_us, clock);
          out += " before ";
          AppendU64(out, r.before.size());
          out += " [";
          AppendTxList(out, r.before, 8);
          out += "] after ";
          AppendU64(out, r.after.size());
          out += " [";
          AppendTxList(out, r.after, 8);
          out.push_back(']');
        } else if constexpr (std::is_same_v<T, CutAbort>) {
          AppendCutTime(out, r.cut_id, r.time_us, clock);
          out += " reason ";
          out += CutAbortReasonName(r.reason);
          out += ": ";
          AppendPrintable(out, r.detail, 0);
        } else if constexpr (std::is_same_v<T, Snapshot>) {
          out += "name ";
          AppendPrintable(out, r.name, 0);
          out.push_back(' ');
          AppendTime(out, r.time_us, clock);
          out += " fingerprint ";
          AppendHex64(out, r.fingerprint);
        } else {
          out += "incarnation ";
          AppendU64(out, r.incarnation);
          out.push_back(' ');
          AppendTime(out, r.time_us, clock);
        }
      },
      rec);
}

std::string Describe(const Record& rec, size_t max_bytes) {
  std::string out;
  AppendDescription(out, rec, max_bytes);
  return out;
}

}  // namespace walfmt
