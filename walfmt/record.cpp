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
    "INVALID",   "TX_DATA",    "TX_PREPARE", "TX_COMMIT", "TX_ROLLBACK",
    "CUT_START", "CUT_FINISH", "CUT_ABORT",  "SNAPSHOT",  "NODE_START"};

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
  bool TxList(std::vector<TxId>& v, const char* what) {
    uint32_t n = 0;
    if (!U32(n, what)) return false;
    if (static_cast<uint64_t>(n) * 12 > r.remaining()) {
      return Fail(
          fmt::format("{} {} needs {} bytes, {} remain", what, n, static_cast<uint64_t>(n) * 12, r.remaining()));
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

std::string DescribeTxDataError(const detail::TxDataError& e) {
  std::string why;
  switch (e.kind) {
    case detail::TxDataError::kNone:
      break;
    case detail::TxDataError::kTxId:
      why = "TX_DATA: transaction id cut short";
      break;
    case detail::TxDataError::kCount:
      why = "write count cut short";
      break;
    case detail::TxDataError::kCountFit:
      why = fmt::format("write count {} cannot fit in the {} bytes that remain", e.index, e.remain);
      break;
    case detail::TxDataError::kWrite:
      why = fmt::format("write {} cut short", e.index);
      break;
    case detail::TxDataError::kOp:
      why = fmt::format("write {} has invalid op {}", e.index, e.need);
      break;
    case detail::TxDataError::kKeyLength:
      why = "key length cut short";
      break;
    case detail::TxDataError::kKey:
      why = fmt::format("key of {} bytes, {} remain", e.need, e.remain);
      break;
    case detail::TxDataError::kValueLength:
      why = "value length cut short";
      break;
    case detail::TxDataError::kValue:
      why = fmt::format("value of {} bytes, {} remain", e.need, e.remain);
      break;
    case detail::TxDataError::kTrailing:
      return fmt::format("TX_DATA payload: {} trailing bytes after the last field", e.remain);
  }
  return fmt::format("TX_DATA payload: {}", why);
}

// Why ParseTxOutcome refused a payload: the first field of the layout that
// does not fit, a count over the limit, or bytes after the participants.
std::string DescribeTxOutcomeError(RecordType type, std::span<const uint8_t> payload) {
  const layout::TxOutcome& l = *layout::ForOutcome(type);
  const size_t size = payload.size();
  std::string why;
  if (size < layout::kTxIdSize) {
    why = fmt::format("{}: transaction id cut short", RecordTypeName(type));
  } else if (l.has_marker && size < l.marker + 8) {
    why = "marker cut short";
  } else if (size < l.time + 8) {
    why = "time cut short";
  } else if (l.has_flags && size < l.flags + 2) {
    why = "flags cut short";
  } else if (size < l.count + 2) {
    why = "participant count cut short";
  } else {
    const size_t n = LoadU16(payload.data() + l.count);
    const size_t remain = size - l.fixed;
    if (n > kMaxParticipants) {
      why = fmt::format("participant count {} exceeds the limit of {}", n, kMaxParticipants);
    } else if (n * 4 > remain) {
      why = fmt::format("participant count {} needs {} bytes, {} remain", n, n * 4, remain);
    } else {
      return fmt::format("{} payload: {} trailing bytes after the last field", RecordTypeName(type), remain - n * 4);
    }
  }
  return fmt::format("{} payload: {}", RecordTypeName(type), why);
}

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

std::string TxId::Readable() const {
  if (incarnation() == 0) return ToString();
  return fmt::format("{}@{}:{}", node, incarnation(), counter());
}

namespace {
// A decimal number filling [text.begin() + from, text.begin() + to) exactly.
template <class T>
bool WholeDecimal(std::string_view text, size_t from, size_t to, T& out) {
  if (from >= to) return false;
  const auto r = std::from_chars(text.data() + from, text.data() + to, out);
  return r.ec == std::errc() && r.ptr == text.data() + to;
}
}  // namespace

bool TxId::Parse(std::string_view text, TxId& out) {
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos) return false;
  const size_t at = text.substr(0, colon).find('@');
  TxId t;
  if (at == std::string_view::npos) {
    if (!WholeDecimal(text, 0, colon, t.node) || !WholeDecimal(text, colon + 1, text.size(), t.seq)) return false;
    out = t;
    return true;
  }
  uint64_t incarnation = 0;
  uint64_t counter = 0;
  if (!WholeDecimal(text, 0, at, t.node) || !WholeDecimal(text, at + 1, colon, incarnation) ||
      !WholeDecimal(text, colon + 1, text.size(), counter)) {
    return false;
  }
  if (incarnation == 0 || incarnation >= (uint64_t{1} << (64 - kTxCounterBits)) ||
      counter >= (uint64_t{1} << kTxCounterBits)) {
    return false;
  }
  t.seq = (incarnation << kTxCounterBits) | counter;
  out = t;
  return true;
}

std::string_view CutAbortReasonName(CutAbortReason r) {
  switch (r) {
    case CutAbortReason::kNodeRestart:
      return "node-restart";
    case CutAbortReason::kRecoveredTx:
      return "recovered-transaction";
    case CutAbortReason::kParticipantLost:
      return "participant-lost";
    case CutAbortReason::kOther:
      return "other";
    case CutAbortReason::kInvalid:
      break;
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
      const detail::TxDataError e = detail::WalkTxData(
          payload, r.tx, [&](uint32_t n) { r.writes.reserve(n); },
          [&](const WriteView& w) {
            r.writes.push_back({w.op, std::string(w.key), std::string(w.value)});
          });
      if (e.kind != detail::TxDataError::kNone) return Status::Corruption(DescribeTxDataError(e));
      return Record(std::move(r));
    }
    case RecordType::kTxPrepare:
    case RecordType::kTxCommit:
    case RecordType::kTxRollback: {
      TxOutcomeView v;
      if (!ParseTxOutcome(type, payload, v)) return Status::Corruption(DescribeTxOutcomeError(type, payload));
      std::vector<uint32_t> parts(v.participant_count());
      for (size_t i = 0; i < parts.size(); ++i) parts[i] = v.participant(i);
      if (type == RecordType::kTxPrepare) return Record(TxPrepare{v.tx, v.time_us, std::move(parts)});
      if (type == RecordType::kTxCommit) return Record(TxCommit{v.tx, v.marker, v.time_us, v.flags, std::move(parts)});
      return Record(TxRollback{v.tx, v.time_us, v.flags, std::move(parts)});
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

bool ParseTxData(std::span<const uint8_t> payload, TxId& tx, std::vector<WriteView>& writes) {
  writes.clear();
  return detail::WalkTxData(
             payload, tx, [](uint32_t) {}, [&](const WriteView& w) { writes.push_back(w); })
             .kind == detail::TxDataError::kNone;
}

}  // namespace walfmt
