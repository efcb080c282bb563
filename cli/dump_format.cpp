// walcut dump's line formatting (dump_format.h): the raw writers of the
// fixed columns, the JSON form of each record, and LineFormatter::Format.
#include "cli/dump_format.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <string_view>
#include <type_traits>
#include <variant>

#include <nlohmann/json.hpp>

#include "walfmt/record_text.h"
#include "walfmt/text_escape.h"

namespace walcut::cli::dump {

NodeCtx MakeNodeCtx(const NodeWal& n) {
  NodeCtx c;
  c.wal = &n;
  const std::string s = n.node_id ? fmt::format("node {} ", *n.node_id) : std::string("node ? ");
  c.prefix_len = std::min(s.size(), c.prefix.size());  // "node 4294967295 " is 16
  std::memcpy(c.prefix.data(), s.data(), c.prefix_len);
  return c;
}

namespace {

// --- Raw line writing. The writers write through a pointer into room the
// caller reserved from the bounds; nothing checks or allocates per field.
// Fixed-size copies of spaces followed by the digits keep the padding free
// of calls.

// Room for a text line but its description: node prefix (16), LSN (up to 33,
// padded to 18), type (11), length (10), tx (up to 33), separators, newline;
// and slack for the fixed-size copies below, which may write past the end of
// a short field.
constexpr size_t kLineFixedBound = 160;

char* Begin(fmt::memory_buffer& b, size_t bound) {
  const size_t old = b.size();
  b.resize(old + bound);  // fmt's buffer does not initialise what it adds
  return b.data() + old;
}
void End(fmt::memory_buffer& b, const char* p) { b.resize(static_cast<size_t>(p - b.data())); }

int HexDigits(uint64_t v) { return v == 0 ? 1 : (67 - std::countl_zero(v)) / 4; }
using walfmt::DecimalDigits;
using walfmt::Hex8Upper;
// Writes `v` in `digits` hex (upper case) or decimal digits, ending at p + digits.
void PutHex(char* p, uint64_t v, int digits) {
  static constexpr char kDigits[] = "0123456789ABCDEF";
  for (int i = digits - 1; i >= 0; --i) {
    p[i] = kDigits[v & 0xF];
    v >>= 4;
  }
}
void PutDecimal(char* p, uint64_t v, int digits) {
  static constexpr char kPairs[] =
      "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
      "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
      "8081828384858687888990919293949596979899";
  int i = digits;
  while (v >= 100) {
    const auto r = static_cast<size_t>(v % 100) * 2;
    v /= 100;
    p[--i] = kPairs[r + 1];
    p[--i] = kPairs[r];
  }
  if (v >= 10) {
    p[--i] = kPairs[v * 2 + 1];
    p[--i] = kPairs[v * 2];
  } else {
    p[--i] = static_cast<char>('0' + v);
  }
}

// Type names padded to their 11-column field.
constexpr size_t kTypeWidth = 11;
const std::array<std::array<char, 16>, walfmt::kMaxKnownRecordType + 2> kPaddedTypeNames = [] {
  std::array<std::array<char, 16>, walfmt::kMaxKnownRecordType + 2> t{};
  for (size_t i = 0; i < t.size(); ++i) {
    t[i].fill(' ');
    const std::string_view name = walfmt::RecordTypeName(static_cast<walfmt::RecordType>(i));  // last: UNKNOWN
    std::memcpy(t[i].data(), name.data(), std::min(name.size(), t[i].size()));
  }
  return t;
}();

// "node N  SEG/OFFSET TYPE        len    LEN  tx NODE:SEQ    " up to the
// description (pg_waldump's columns). The same bytes as the padded fields
// of the first version: LSN right-aligned in 18 columns ("%X/%08X"), type
// left-aligned in 11, length right-aligned in 6, tx left-aligned in 12.
char* WritePrefix(char* p, const NodeCtx& n, const walfmt::RecordView& v, const walfmt::TxId* t) {
  static constexpr char kSpaces[] = "                                ";  // 32
  std::memcpy(p, n.prefix.data(), 16);
  p += n.prefix_len;
  // LSN.
  const int seg_digits = HexDigits(v.lsn.segment);
  const int off_digits = std::max(8, HexDigits(v.lsn.offset));
  const size_t lsn_len = static_cast<size_t>(seg_digits + 1 + off_digits);
  std::memcpy(p, kSpaces, 18);
  if (lsn_len < 18) p += 18 - lsn_len;
  PutHex(p, v.lsn.segment, seg_digits);
  p[seg_digits] = '/';
  if (off_digits == 8) {
    const uint64_t h = Hex8Upper(static_cast<uint32_t>(v.lsn.offset));
    std::memcpy(p + seg_digits + 1, &h, 8);
  } else {
    PutHex(p + seg_digits + 1, v.lsn.offset, off_digits);
  }
  p += lsn_len;
  *p++ = ' ';
  // Type (UNKNOWN never reaches here: the reader skips unknown types).
  const auto code = std::min<size_t>(static_cast<uint16_t>(v.type), walfmt::kMaxKnownRecordType + 1);
  std::memcpy(p, kPaddedTypeNames[code].data(), 16);
  p += std::max(kTypeWidth, walfmt::RecordTypeName(v.type).size());
  // Length.
  std::memcpy(p, " len       ", 11);
  p += 5;
  const int len_digits = DecimalDigits(v.size());
  if (len_digits < 6) p += 6 - len_digits;
  PutDecimal(p, v.size(), len_digits);
  p += len_digits;
  // Transaction.
  std::memcpy(p, "  tx ", 5);
  p += 5;
  std::memcpy(p, kSpaces, 16);
  if (t != nullptr) {
    // TxId::Readable(): "node:seq", or "node@incarnation:counter" after a restart.
    const int a = DecimalDigits(t->node);
    PutDecimal(p, t->node, a);
    int w = a;
    if (const uint64_t inc = t->incarnation(); inc != 0) {
      const int i = DecimalDigits(inc);
      p[w] = '@';
      PutDecimal(p + w + 1, inc, i);
      w += 1 + i;
    }
    const int b = DecimalDigits(t->counter());
    p[w] = ':';
    PutDecimal(p + w + 1, t->counter(), b);
    p += std::max(12, w + 1 + b);
  } else {
    *p = '-';
    p += 12;
  }
  *p++ = ' ';
  return p;
}

const walfmt::TxId* TxOf(const walfmt::Record& r) {
  return std::visit(
      [](const auto& x) -> const walfmt::TxId* {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, walfmt::TxData> || std::is_same_v<T, walfmt::TxPrepare> ||
                      std::is_same_v<T, walfmt::TxCommit> || std::is_same_v<T, walfmt::TxRollback>) {
          return &x.tx;
        } else {
          return nullptr;
        }
      },
      r);
}

bool MentionsTx(const walfmt::Record& r, const walfmt::TxId& tx) {
  if (const walfmt::TxId* t = TxOf(r)) return *t == tx;
  if (const auto* f = std::get_if<walfmt::CutFinish>(&r)) {
    return std::find(f->before.begin(), f->before.end(), tx) != f->before.end() ||
           std::find(f->after.begin(), f->after.end(), tx) != f->after.end();
  }
  return false;
}

nlohmann::json TxListJson(const std::vector<walfmt::TxId>& v) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& t : v) a.push_back(t.ToString());
  return a;
}

nlohmann::json RecordJson(const walfmt::Record& rec, const walfmt::ClusterClock& clock) {
  using walfmt::Printable;
  nlohmann::json j = std::visit(
      [](const auto& r) -> nlohmann::json {
        using T = std::decay_t<decltype(r)>;
        if constexpr (std::is_same_v<T, walfmt::TxData>) {
          nlohmann::json w = nlohmann::json::array();
          for (const auto& x : r.writes) {
            nlohmann::json jw{{"op", x.op == walfmt::WriteOp::kDelete ? "delete" : "put"},
                              {"key", Printable(x.key, 0)}};
            if (x.op != walfmt::WriteOp::kDelete) jw["value"] = Printable(x.value, 0);
            w.push_back(jw);
          }
          return {{"writes", w}};
        } else if constexpr (std::is_same_v<T, walfmt::TxPrepare>) {
          return {{"time_us", r.time_us}, {"participants", r.participants}};
        } else if constexpr (std::is_same_v<T, walfmt::TxCommit>) {
          return {{"marker", r.marker},
                  {"time_us", r.time_us},
                  {"participants", r.participants},
                  {"one_phase", (r.flags & walfmt::kTxFlagOnePhase) != 0},
                  {"recovered", (r.flags & walfmt::kTxFlagRecovered) != 0}};
        } else if constexpr (std::is_same_v<T, walfmt::TxRollback>) {
          return {{"time_us", r.time_us},
                  {"participants", r.participants},
                  {"one_phase", (r.flags & walfmt::kTxFlagOnePhase) != 0},
                  {"recovered", (r.flags & walfmt::kTxFlagRecovered) != 0}};
        } else if constexpr (std::is_same_v<T, walfmt::CutStart>) {
          return {{"cut", r.cut_id}, {"time_us", r.time_us}};
        } else if constexpr (std::is_same_v<T, walfmt::CutFinish>) {
          return {{"cut", r.cut_id},
                  {"time_us", r.time_us},
                  {"before", TxListJson(r.before)},
                  {"after", TxListJson(r.after)}};
        } else if constexpr (std::is_same_v<T, walfmt::CutAbort>) {
          return {{"cut", r.cut_id},
                  {"time_us", r.time_us},
                  {"reason", std::string(walfmt::CutAbortReasonName(r.reason))},
                  {"detail", Printable(r.detail, 0)}};
        } else if constexpr (std::is_same_v<T, walfmt::Snapshot>) {
          return {{"name", Printable(r.name, 0)},
                  {"time_us", r.time_us},
                  {"fingerprint", fmt::format("{:016x}", r.fingerprint)}};
        } else {
          return {{"incarnation", r.incarnation}, {"time_us", r.time_us}};
        }
      },
      rec);
  if (const auto it = j.find("time_us"); it != j.end()) j["time"] = clock.Format(it->get<uint64_t>());
  return j;
}

}  // namespace

LineFormatter::Outcome LineFormatter::Format(const NodeCtx& n, const walfmt::RecordView& v, fmt::memory_buffer& out,
                                             walfmt::Problem& bad) {
  if (!(v.lsn < f_.to)) return Outcome::kStop;
  const auto code = static_cast<uint16_t>(v.type);
  if (!f_.all_types && (code >= f_.type_ok.size() || !f_.type_ok[code])) return Outcome::kSkip;
  if (f_.format == Format::kText) {
    // Hot paths, straight from the payload bytes: TX_DATA and the records
    // that end a transaction step are nearly all of a WAL. The parsers accept
    // exactly what DecodePayload accepts; anything else takes the general
    // path below, which reports it.
    if (v.type == walfmt::RecordType::kTxData && walfmt::ParseTxData(v.payload, tx_, views_)) {
      if (f_.by_tx && !(tx_ == f_.tx)) return Outcome::kSkip;
      if (f_.by_key &&
          std::none_of(views_.begin(), views_.end(), [&](const walfmt::WriteView& w) { return w.key == f_.key; })) {
        return Outcome::kSkip;
      }
      char* p = Begin(out, kLineFixedBound + walfmt::WritesDescriptionBound(views_, f_.max_bytes));
      p = WritePrefix(p, n, v, &tx_);
      p = walfmt::WriteWritesDescription(p, views_, f_.max_bytes);
      *p++ = '\n';
      End(out, p);
      return Outcome::kLine;
    }
    if (walfmt::ParseTxOutcome(v.type, v.payload, outcome_)) {
      if (f_.by_tx && !(outcome_.tx == f_.tx)) return Outcome::kSkip;
      if (f_.by_key) return Outcome::kSkip;  // only TX_DATA writes keys
      char* p = Begin(out, kLineFixedBound + walfmt::TxOutcomeDescriptionBound(outcome_));
      p = WritePrefix(p, n, v, &outcome_.tx);
      p = walfmt::WriteTxOutcomeDescription(p, v.type, outcome_);
      *p++ = '\n';
      End(out, p);
      return Outcome::kLine;
    }
  }
  auto rec = walfmt::DecodePayload(v.type, v.payload);
  if (!rec.ok()) {
    bad = walfmt::Problem{};
    bad.kind = walfmt::ProblemKind::kBadPayload;
    bad.node = n.wal->node_id.value_or(0);
    bad.node_known = n.wal->node_id.has_value();
    bad.file = n.wal->label;
    bad.segment = v.lsn.segment;
    bad.offset = v.lsn.offset;
    bad.detail = rec.status().message();
    return Outcome::kBadPayload;
  }
  if (f_.by_tx && !MentionsTx(*rec, f_.tx)) return Outcome::kSkip;
  if (f_.by_key) {
    const auto* d = std::get_if<walfmt::TxData>(&*rec);
    if (d == nullptr) return Outcome::kSkip;
    bool hit = false;
    for (const auto& w : d->writes) hit = hit || w.key == f_.key;
    if (!hit) return Outcome::kSkip;
  }
  const walfmt::TxId* t = TxOf(*rec);
  if (f_.format == Format::kJson) {
    const NodeWal& w = *n.wal;
    nlohmann::json j{{"schema", kDumpSchema},
                     {"node", w.node_id ? nlohmann::json(*w.node_id) : nlohmann::json(nullptr)},
                     {"lsn", v.lsn.ToString()},
                     {"segment", v.lsn.segment},
                     {"offset", v.lsn.offset},
                     {"type", std::string(walfmt::RecordTypeName(v.type))},
                     {"length", v.size()},
                     {"tx", t ? nlohmann::json(t->ToString()) : nlohmann::json(nullptr)},
                     {"tx_readable", t ? nlohmann::json(t->Readable()) : nlohmann::json(nullptr)},
                     {"record", RecordJson(*rec, f_.clock)}};
    const std::string s = walfmt::DumpJson(j);
    out.append(s.data(), s.data() + s.size());
    out.push_back('\n');
    return Outcome::kLine;
  }
  desc_.clear();
  walfmt::AppendDescription(desc_, *rec, f_.max_bytes, f_.clock.known() ? &f_.clock : nullptr);
  char* p = Begin(out, kLineFixedBound + desc_.size());
  p = WritePrefix(p, n, v, t);
  std::memcpy(p, desc_.data(), desc_.size());
  p += desc_.size();
  *p++ = '\n';
  End(out, p);
  return Outcome::kLine;
}

}  // namespace walcut::cli::dump
