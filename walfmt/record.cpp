#include "walfmt/record.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstring>

#include <fmt/format.h>

#include "walfmt/bytes.h"

namespace walfmt {
namespace {

constexpr std::array<std::string_view, kMaxKnownRecordType + 1> kTypeNames = {
    "INVALID",    "TX_DATA",    "TX_PREPARE", "TX_COMMIT", "TX_ROLLBACK",
    "CUT_START",  "CUT_FINISH", "CUT_ABORT",  "SNAPSHOT",  "NODE_START"};

void PutTx(std::string& out, const TxId& t) {
  PutU32(out, t.node);
  PutU64(out, t.seq);
}

Status PutParticipants(std::string& out, const std::vector<uint32_t>& p) {
  if (p.size() > kMaxParticipants) {
    return Status::InvalidArgument(fmt::format("{} participants exceed the limit of {}", p.size(), kMaxParticipants));
  }
  PutU16(out, static_cast<uint16_t>(p.size()));
  for (uint32_t n : p) PutU32(out, n);
  return Status::Ok();
}

void PutTxList(std::string& out, const std::vector<TxId>& v) {
  PutU32(out, static_cast<uint32_t>(v.size()));
  for (const TxId& t : v) PutTx(out, t);
}

// Decoding: every helper returns false with `why` set when the payload is short
// or a field is out of range.
struct Decoder {
  ByteReader r;
  std::string why;

  bool Fail(std::string m) {
    if (why.empty()) why = std::move(m);
    return false;
  }
  bool Tx(TxId& t, const char* what) {
    if (!r.U32(t.node) || !r.U64(t.seq)) return Fail(fmt::format("{}: transaction id cut short", what));
    return true;
  }
  bool U64(uint64_t& v, const char* what) { return r.U64(v) || Fail(fmt::format("{} cut short", what)); }
  bool U32(uint32_t& v, const char* what) { return r.U32(v) || Fail(fmt::format("{} cut short", what)); }
  bool U16(uint16_t& v, const char* what) { return r.U16(v) || Fail(fmt::format("{} cut short", what)); }
  bool Participants(std::vector<uint32_t>& p) {
    uint16_t n = 0;
    if (!U16(n, "participant count")) return false;
    if (n > kMaxParticipants) return Fail(fmt::format("participant count {} exceeds the limit of {}", n, kMaxParticipants));
    if (static_cast<size_t>(n) * 4 > r.remaining()) {
      return Fail(fmt::format("participant count {} needs {} bytes, {} remain", n, n * 4, r.remaining()));
    }
    p.resize(n);
    for (auto& x : p) r.U32(x);
    return true;
  }
  bool TxList(std::vector<TxId>& v, const char* what) {
    uint32_t n = 0;
    if (!U32(n, what)) return false;
    if (static_cast<uint64_t>(n) * 12 > r.remaining()) {
      return Fail(fmt::format("{} {} needs {} bytes, {} remain", what, n, static_cast<uint64_t>(n) * 12, r.remaining()));
    }
    v.resize(n);
    for (auto& t : v) Tx(t, what);
    return true;
  }
  bool Str16(std::string& s, const char* what) {
    uint16_t n = 0;
    std::string_view sv;
    if (!U16(n, what)) return false;
    if (!r.Bytes(n, sv)) return Fail(fmt::format("{} of {} bytes, {} remain", what, n, r.remaining()));
    s.assign(sv);
    return true;
  }
};

}  // namespace

std::string_view RecordTypeName(RecordType t) {
  const auto v = static_cast<uint16_t>(t);
  return v <= kMaxKnownRecordType ? kTypeNames[v] : std::string_view("UNKNOWN");
}

bool ParseRecordType(std::string_view name, RecordType& out) {
  std::string up;
  for (char c : name) up.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  for (uint16_t v = 1; v <= kMaxKnownRecordType; ++v) {
    const std::string_view n = kTypeNames[v];
    const std::string_view shortname = n.substr(n.find('_') == std::string_view::npos ? 0 : n.find('_') + 1);
    if (up == n || (n.starts_with("TX_") && up == shortname)) {
      out = static_cast<RecordType>(v);
      return true;
    }
  }
  return false;
}

std::string TxId::ToString() const { return fmt::format("{}:{}", node, seq); }

bool TxId::Parse(std::string_view text, TxId& out) {
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos) return false;
  TxId t;
  auto a = std::from_chars(text.data(), text.data() + colon, t.node);
  auto b = std::from_chars(text.data() + colon + 1, text.data() + text.size(), t.seq);
  if (a.ec != std::errc() || a.ptr != text.data() + colon || b.ec != std::errc() ||
      b.ptr != text.data() + text.size() || colon == 0) {
    return false;
  }
  out = t;
  return true;
}

std::string_view CutAbortReasonName(CutAbortReason r) {
  switch (r) {
    case CutAbortReason::kNodeRestart: return "node-restart";
    case CutAbortReason::kRecoveredTx: return "recovered-transaction";
    case CutAbortReason::kParticipantLost: return "participant-lost";
    case CutAbortReason::kOther: return "other";
    case CutAbortReason::kInvalid: break;
  }
  return "invalid";
}

RecordType TypeOf(const Record& r) {
  return static_cast<RecordType>(r.index() + 1);  // variant order == type codes 1..9
}
static_assert(std::variant_size_v<Record> == kMaxKnownRecordType);

Status EncodePayload(const Record& rec, std::string& out) {
  const size_t start = out.size();
  Status st;
  std::visit(
      [&](const auto& r) {
        using T = std::decay_t<decltype(r)>;
        if constexpr (std::is_same_v<T, TxData>) {
          PutTx(out, r.tx);
          PutU32(out, static_cast<uint32_t>(r.writes.size()));
          for (const Write& w : r.writes) {
            if (w.key.size() > kMaxKeyBytes) {
              st = Status::InvalidArgument(fmt::format("key of {} bytes exceeds {}", w.key.size(), kMaxKeyBytes));
              return;
            }
            if (w.op != WriteOp::kPut && w.op != WriteOp::kDelete) {
              st = Status::InvalidArgument("write with an invalid op");
              return;
            }
            out.push_back(static_cast<char>(w.op));
            PutU16(out, static_cast<uint16_t>(w.key.size()));
            out += w.key;
            PutU32(out, static_cast<uint32_t>(w.value.size()));
            out += w.value;
          }
        } else if constexpr (std::is_same_v<T, TxPrepare>) {
          PutTx(out, r.tx);
          PutU64(out, r.time_us);
          st = PutParticipants(out, r.participants);
        } else if constexpr (std::is_same_v<T, TxCommit>) {
          PutTx(out, r.tx);
          PutU64(out, r.marker);
          PutU64(out, r.time_us);
          PutU16(out, r.flags);
          st = PutParticipants(out, r.participants);
        } else if constexpr (std::is_same_v<T, TxRollback>) {
          PutTx(out, r.tx);
          PutU64(out, r.time_us);
          PutU16(out, r.flags);
          st = PutParticipants(out, r.participants);
        } else if constexpr (std::is_same_v<T, CutStart>) {
          PutU64(out, r.cut_id);
          PutU64(out, r.time_us);
        } else if constexpr (std::is_same_v<T, CutFinish>) {
          PutU64(out, r.cut_id);
          PutU64(out, r.time_us);
          PutTxList(out, r.before);
          PutTxList(out, r.after);
        } else if constexpr (std::is_same_v<T, CutAbort>) {
          PutU64(out, r.cut_id);
          PutU64(out, r.time_us);
          PutU16(out, static_cast<uint16_t>(r.reason));
          if (r.detail.size() > 0xFFFF) {
            st = Status::InvalidArgument("cut abort detail longer than 65535 bytes");
            return;
          }
          PutU16(out, static_cast<uint16_t>(r.detail.size()));
          out += r.detail;
        } else if constexpr (std::is_same_v<T, Snapshot>) {
          if (r.name.size() > 0xFFFF) {
            st = Status::InvalidArgument("snapshot name longer than 65535 bytes");
            return;
          }
          PutU16(out, static_cast<uint16_t>(r.name.size()));
          out += r.name;
          PutU64(out, r.time_us);
          PutU64(out, r.fingerprint);
        } else if constexpr (std::is_same_v<T, NodeStart>) {
          PutU32(out, r.incarnation);
          PutU64(out, r.time_us);
        }
      },
      rec);
  if (st.ok() && out.size() - start > kMaxRecordPayload) {
    st = Status::InvalidArgument(
        fmt::format("record payload of {} bytes exceeds the limit of {}", out.size() - start, kMaxRecordPayload));
  }
  if (!st.ok()) out.resize(start);
  return st;
}

Result<Record> DecodePayload(RecordType type, std::span<const uint8_t> payload) {
  Decoder d{ByteReader(payload), {}};
  bool ok = false;
  Record rec;
  switch (type) {
    case RecordType::kTxData: {
      TxData r;
      uint32_t n = 0;
      ok = d.Tx(r.tx, "TX_DATA") && d.U32(n, "write count");
      // Each write takes at least 7 bytes (op, key length, value length).
      if (ok && static_cast<uint64_t>(n) * 7 > d.r.remaining()) {
        ok = d.Fail(fmt::format("write count {} cannot fit in the {} bytes that remain", n, d.r.remaining()));
      }
      if (ok) r.writes.reserve(n);
      for (uint32_t i = 0; ok && i < n; ++i) {
        Write w;
        uint8_t op = 0;
        uint16_t klen = 0;
        uint32_t vlen = 0;
        std::string_view k, v;
        ok = (d.r.U8(op) || d.Fail(fmt::format("write {} cut short", i)));
        if (ok && op != static_cast<uint8_t>(WriteOp::kPut) && op != static_cast<uint8_t>(WriteOp::kDelete)) {
          ok = d.Fail(fmt::format("write {} has invalid op {}", i, op));
        }
        ok = ok && d.U16(klen, "key length") &&
             (d.r.Bytes(klen, k) || d.Fail(fmt::format("key of {} bytes, {} remain", klen, d.r.remaining()))) &&
             d.U32(vlen, "value length") &&
             (d.r.Bytes(vlen, v) || d.Fail(fmt::format("value of {} bytes, {} remain", vlen, d.r.remaining())));
        if (ok) {
          w.op = static_cast<WriteOp>(op);
          w.key.assign(k);
          w.value.assign(v);
          r.writes.push_back(std::move(w));
        }
      }
      rec = std::move(r);
      break;
    }
    case RecordType::kTxPrepare: {
      TxPrepare r;
      ok = d.Tx(r.tx, "TX_PREPARE") && d.U64(r.time_us, "time") && d.Participants(r.participants);
      rec = std::move(r);
      break;
    }
    case RecordType::kTxCommit: {
      TxCommit r;
      ok = d.Tx(r.tx, "TX_COMMIT") && d.U64(r.marker, "marker") && d.U64(r.time_us, "time") &&
           d.U16(r.flags, "flags") && d.Participants(r.participants);
      rec = std::move(r);
      break;
    }
    case RecordType::kTxRollback: {
      TxRollback r;
      ok = d.Tx(r.tx, "TX_ROLLBACK") && d.U64(r.time_us, "time") && d.U16(r.flags, "flags") &&
           d.Participants(r.participants);
      rec = std::move(r);
      break;
    }
    case RecordType::kCutStart: {
      CutStart r;
      ok = d.U64(r.cut_id, "cut id") && d.U64(r.time_us, "time");
      rec = r;
      break;
    }
    case RecordType::kCutFinish: {
      CutFinish r;
      ok = d.U64(r.cut_id, "cut id") && d.U64(r.time_us, "time") && d.TxList(r.before, "before count") &&
           d.TxList(r.after, "after count");
      rec = std::move(r);
      break;
    }
    case RecordType::kCutAbort: {
      CutAbort r;
      uint16_t reason = 0;
      ok = d.U64(r.cut_id, "cut id") && d.U64(r.time_us, "time") && d.U16(reason, "reason") &&
           d.Str16(r.detail, "detail");
      r.reason = static_cast<CutAbortReason>(reason);
      if (ok && (reason == 0 || reason > static_cast<uint16_t>(CutAbortReason::kOther))) {
        ok = d.Fail(fmt::format("invalid cut abort reason {}", reason));
      }
      rec = std::move(r);
      break;
    }
    case RecordType::kSnapshot: {
      Snapshot r;
      ok = d.Str16(r.name, "snapshot name") && d.U64(r.time_us, "time") && d.U64(r.fingerprint, "fingerprint");
      rec = std::move(r);
      break;
    }
    case RecordType::kNodeStart: {
      NodeStart r;
      ok = d.U32(r.incarnation, "incarnation") && d.U64(r.time_us, "time");
      rec = r;
      break;
    }
    case RecordType::kInvalid:
    default:
      return Status::Corruption(fmt::format("cannot decode record type {}", static_cast<uint16_t>(type)));
  }
  if (!ok) return Status::Corruption(fmt::format("{} payload: {}", RecordTypeName(type), d.why));
  if (d.r.remaining() != 0) {
    return Status::Corruption(
        fmt::format("{} payload: {} trailing bytes after the last field", RecordTypeName(type), d.r.remaining()));
  }
  return rec;
}

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
void AppendTx(std::string& out, const TxId& t) {
  AppendU64(out, t.node);
  out.push_back(':');
  AppendU64(out, t.seq);
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
void AppendCutTime(std::string& out, uint64_t cut, uint64_t time_us) {
  out += "cut ";
  AppendU64(out, cut);
  out += " time ";
  AppendU64(out, time_us);
  out += "us";
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

bool ParseTxData(std::span<const uint8_t> payload, TxId& tx, std::vector<WriteView>& writes) {
  ByteReader r(payload);
  uint32_t n = 0;
  writes.clear();
  if (!r.U32(tx.node) || !r.U64(tx.seq) || !r.U32(n)) return false;
  if (static_cast<uint64_t>(n) * 7 > r.remaining()) return false;
  for (uint32_t i = 0; i < n; ++i) {
    uint8_t op = 0;
    uint16_t klen = 0;
    uint32_t vlen = 0;
    WriteView w;
    if (!r.U8(op) || (op != static_cast<uint8_t>(WriteOp::kPut) && op != static_cast<uint8_t>(WriteOp::kDelete)) ||
        !r.U16(klen) || !r.Bytes(klen, w.key) || !r.U32(vlen) || !r.Bytes(vlen, w.value)) {
      return false;
    }
    w.op = static_cast<WriteOp>(op);
    writes.push_back(w);
  }
  return r.remaining() == 0;
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
char* WriteU64(char* p, uint64_t v) { return std::to_chars(p, p + 20, v).ptr; }
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
  if ((x & kHigh) != 0) return false;                  // a byte >= 0x80
  if (((x - kOnes * 0x20) & ~x & kHigh) != 0) return false;  // a byte < 0x20
  return !has_zero(x ^ (kOnes * 0x7F)) && !has_zero(x ^ (kOnes * '\\'));
}
}  // namespace

char* WritePrintable(char* p, std::string_view bytes, size_t max_bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  const size_t n = ShownBytes(bytes, max_bytes);
  const auto* s = reinterpret_cast<const unsigned char*>(bytes.data());
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
  // Keys and values are mostly printable: 8 bytes at a time while they are.
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

bool ParseTxOutcome(RecordType type, std::span<const uint8_t> payload, TxOutcomeView& out) {
  // Fixed fields, the last two bytes of which are the participant count
  // (FORMAT.md): tx (12), [marker (8)], time (8), [flags (2)], count (2).
  size_t fixed = 0;
  switch (type) {
    case RecordType::kTxPrepare: fixed = 12 + 8 + 2; break;
    case RecordType::kTxCommit: fixed = 12 + 8 + 8 + 2 + 2; break;
    case RecordType::kTxRollback: fixed = 12 + 8 + 2 + 2; break;
    default: return false;
  }
  if (payload.size() < fixed) return false;
  const uint8_t* p = payload.data();
  const size_t n = LoadU16(p + fixed - 2);
  // DecodePayload: a count over the limit, participants cut short, or bytes
  // after them are all errors.
  if (n > kMaxParticipants || payload.size() - fixed != n * 4) return false;
  out.tx.node = LoadU32(p);
  out.tx.seq = LoadU64(p + 4);
  out.marker = 0;
  out.flags = 0;
  if (type == RecordType::kTxPrepare) {
    out.time_us = LoadU64(p + 12);
  } else if (type == RecordType::kTxCommit) {
    out.marker = LoadU64(p + 12);
    out.time_us = LoadU64(p + 20);
    out.flags = LoadU16(p + 28);
  } else {
    out.time_us = LoadU64(p + 12);
    out.flags = LoadU16(p + 20);
  }
  out.participants = payload.subspan(fixed);
  return true;
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

void AppendDescription(std::string& out, const Record& rec, size_t max_bytes) {
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
          AppendCutTime(out, r.cut_id, r.time_us);
        } else if constexpr (std::is_same_v<T, CutFinish>) {
          AppendCutTime(out, r.cut_id, r.time_us);
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
          AppendCutTime(out, r.cut_id, r.time_us);
          out += " reason ";
          out += CutAbortReasonName(r.reason);
          out += ": ";
          AppendPrintable(out, r.detail, 0);
        } else if constexpr (std::is_same_v<T, Snapshot>) {
          out += "name ";
          AppendPrintable(out, r.name, 0);
          out += " time ";
          AppendU64(out, r.time_us);
          out += "us fingerprint ";
          AppendHex64(out, r.fingerprint);
        } else {
          out += "incarnation ";
          AppendU64(out, r.incarnation);
          out += " time ";
          AppendU64(out, r.time_us);
          out += "us";
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
