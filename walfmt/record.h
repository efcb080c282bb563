// Logical WAL records: what a node writes, as C++ values, and their payload
// codec: the one encoder and the one decoder of every payload, with the
// zero-copy views hot paths use. The framing around a payload (checksums,
// length, type) lives in segment.h, the text `walcut dump` prints in
// record_text.h; FORMAT.md documents every byte.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "walfmt/bytes.h"
#include "walfmt/status.h"

namespace walfmt {

// On-disk type codes. Explicit values; 0 is never valid so a zero-filled
// region never parses as a record.
enum class RecordType : uint16_t {
  kInvalid = 0,
  kTxData = 1,      // the writes of a transaction on this node
  kTxPrepare = 2,   // this node voted yes: the writes are durable, the outcome is not known
  kTxCommit = 3,    // committed here; carries the marker m(T)
  kTxRollback = 4,  // rolled back here
  kCutStart = 5,    // this node joined cut k (turned red)
  kCutFinish = 6,   // every transaction tracked for cut k finished here
  kCutAbort = 7,    // cut k cannot be consistent; why
  kSnapshot = 8,    // a full snapshot of this node's state was taken here
  kNodeStart = 9,   // the node (re)started; incarnation counts restarts
};
constexpr uint16_t kMaxKnownRecordType = 9;

// Record flag bits (the framing's flags field).
constexpr uint16_t kRecordFlagSkippable = 0x0001;  // a reader that does not know the type may skip it
constexpr uint16_t kRecordFlagsKnown = kRecordFlagSkippable;

// "TX_COMMIT" etc.; "UNKNOWN" for codes this build does not know.
std::string_view RecordTypeName(RecordType t);
// Parses a name as printed (case-insensitive, "tx_commit" or "commit").
bool ParseRecordType(std::string_view name, RecordType& out);

// The bits of TxId::seq below the incarnation: a node that restarts starts
// its transactions at (incarnation << kTxCounterBits) + 1.
constexpr unsigned kTxCounterBits = 40;

struct TxId {
  uint32_t node = 0;  // the near (coordinating) node
  uint64_t seq = 0;   // per near node, from 1: (incarnation << kTxCounterBits) + counter
  auto operator<=>(const TxId&) const = default;
  // The near node's incarnation (0 until it first restarts), and the count
  // of its transactions in that incarnation.
  uint64_t incarnation() const { return seq >> kTxCounterBits; }
  uint64_t counter() const { return seq & ((uint64_t{1} << kTxCounterBits) - 1); }
  // "node:seq", the raw form: what JSON's "tx" fields hold (machine use).
  std::string ToString() const;
  // The form a person reads: "node:counter" in incarnation 0 (the same as
  // ToString), "node@incarnation:counter" after a restart ("2@1:215" for
  // seq 1099511627991).
  std::string Readable() const;
  // Either form: "node:seq" (any seq) or "node@incarnation:counter" with an
  // incarnation from 1 and a counter below 2^kTxCounterBits, in decimal.
  static bool Parse(std::string_view text, TxId& out);
};
struct TxIdHash {
  size_t operator()(const TxId& t) const noexcept {
    return static_cast<size_t>((t.seq * 0x9E3779B97F4A7C15ull) ^ t.node);
  }
};

enum class WriteOp : uint8_t { kInvalid = 0, kPut = 1, kDelete = 2 };
struct Write {
  WriteOp op = WriteOp::kPut;
  std::string key;
  std::string value;  // empty for kDelete
  bool operator==(const Write&) const = default;
};

// Bits of TxCommit::flags / TxRollback::flags.
constexpr uint16_t kTxFlagOnePhase = 0x0001;   // 1PC: decided by the backup (or primary without backups)
constexpr uint16_t kTxFlagRecovered = 0x0002;  // finished by the recovery protocol, not by its decider

struct TxData {
  TxId tx;
  std::vector<Write> writes;
  bool operator==(const TxData&) const = default;
};
struct TxPrepare {
  TxId tx;
  uint64_t time_us = 0;
  std::vector<uint32_t> participants;  // node ids, sorted
  bool operator==(const TxPrepare&) const = default;
};
struct TxCommit {
  TxId tx;
  uint64_t marker = 0;  // m(T): the decider's cut id when it decided
  uint64_t time_us = 0;
  uint16_t flags = 0;
  std::vector<uint32_t> participants;
  bool operator==(const TxCommit&) const = default;
};
struct TxRollback {
  TxId tx;
  uint64_t time_us = 0;
  uint16_t flags = 0;
  std::vector<uint32_t> participants;
  bool operator==(const TxRollback&) const = default;
};
struct CutStart {
  uint64_t cut_id = 0;
  uint64_t time_us = 0;
  bool operator==(const CutStart&) const = default;
};
struct CutFinish {
  uint64_t cut_id = 0;
  uint64_t time_us = 0;
  std::vector<TxId> before;  // tracked, committed with marker < cut_id: in the cut
  std::vector<TxId> after;   // tracked, committed with marker >= cut_id: not in the cut
  bool operator==(const CutFinish&) const = default;
};
enum class CutAbortReason : uint16_t {
  kInvalid = 0,
  kNodeRestart = 1,      // the node crashed and restarted while the cut ran
  kRecoveredTx = 2,      // a tracked transaction was finished by the recovery protocol
  kParticipantLost = 3,  // a participant of a tracked transaction crashed
  kOther = 4,
};
std::string_view CutAbortReasonName(CutAbortReason r);
struct CutAbort {
  uint64_t cut_id = 0;
  uint64_t time_us = 0;
  CutAbortReason reason = CutAbortReason::kOther;
  std::string detail;
  bool operator==(const CutAbort&) const = default;
};
struct Snapshot {
  std::string name;
  uint64_t time_us = 0;
  uint64_t fingerprint = 0;  // of the node's state as written to the snapshot file
  bool operator==(const Snapshot&) const = default;
};
struct NodeStart {
  uint32_t incarnation = 0;  // 0 at creation, +1 per restart
  uint64_t time_us = 0;
  bool operator==(const NodeStart&) const = default;
};

using Record =
    std::variant<TxData, TxPrepare, TxCommit, TxRollback, CutStart, CutFinish, CutAbort, Snapshot, NodeStart>;

// The on-disk type of a record value.
RecordType TypeOf(const Record& r);

// Limits enforced by the encoder and the decoder (FORMAT.md, "Limits").
constexpr size_t kMaxRecordPayload = 1u << 20;  // 1 MiB
constexpr size_t kMaxKeyBytes = 0xFFFF;
constexpr size_t kMaxParticipants = 1024;

// Appends the payload of `r` to `out`. Fails when a limit is exceeded.
Status EncodePayload(const Record& r, std::string& out);

// Decodes a payload of the given type. Never reads outside `payload`; every
// count is checked against the bytes that remain before anything is
// allocated. Trailing bytes after the fields are an error.
Result<Record> DecodePayload(RecordType type, std::span<const uint8_t> payload);

// Byte layouts of the payloads that hot paths read in place (FORMAT.md,
// "Record payloads"). Every transaction record starts with its TxId; the
// three records that end a transaction's step on a node share one shape:
//   TX_PREPARE   tx(12) time(8)                     count(2) participants
//   TX_COMMIT    tx(12) marker(8) time(8) flags(2)  count(2) participants
//   TX_ROLLBACK  tx(12) time(8)          flags(2)   count(2) participants
// with `count` u32 node ids after the fixed part and nothing after them.
namespace layout {
constexpr size_t kTxIdNode = 0;  // u32
constexpr size_t kTxIdSeq = 4;   // u64
constexpr size_t kTxIdSize = 12;
constexpr size_t kTxDataCount = kTxIdSize;  // u32 write count, then the writes
constexpr size_t kTxDataWrites = kTxDataCount + 4;
constexpr size_t kWriteMinSize = 1 + 2 + 4;  // op, key length, value length
constexpr size_t kCutId = 0;                 // u64, first in CUT_START/FINISH/ABORT

struct TxOutcome {
  bool has_marker;
  bool has_flags;
  size_t marker;  // u64 (when has_marker)
  size_t time;    // u64
  size_t flags;   // u16 (when has_flags)
  size_t count;   // u16: the last field before the participants
  size_t fixed;   // where the participants start
};
constexpr TxOutcome kTxPrepare{false, false, 0, kTxIdSize, 0, kTxIdSize + 8, kTxIdSize + 8 + 2};
constexpr TxOutcome kTxCommit{true, true, kTxIdSize, kTxIdSize + 8, kTxIdSize + 16, kTxIdSize + 18, kTxIdSize + 20};
constexpr TxOutcome kTxRollback{false, true, 0, kTxIdSize, kTxIdSize + 8, kTxIdSize + 10, kTxIdSize + 12};
static_assert(kTxCommit.fixed == 32 && kTxRollback.fixed == 24 && kTxPrepare.fixed == 22);

// The layout of an outcome type; nullptr for any other type.
constexpr const TxOutcome* ForOutcome(RecordType type) {
  switch (type) {
    case RecordType::kTxPrepare:
      return &kTxPrepare;
    case RecordType::kTxCommit:
      return &kTxCommit;
    case RecordType::kTxRollback:
      return &kTxRollback;
    default:
      return nullptr;
  }
}
}  // namespace layout

// The transaction id at the start of a TX_DATA, TX_PREPARE, TX_COMMIT or
// TX_ROLLBACK payload; false when the payload is shorter than one.
[[gnu::always_inline]] inline bool PeekTxId(std::span<const uint8_t> payload, TxId& out) {
  if (payload.size() < layout::kTxIdSize) return false;
  out.node = LoadU32(payload.data() + layout::kTxIdNode);
  out.seq = LoadU64(payload.data() + layout::kTxIdSeq);
  return true;
}

// Zero-copy view of a TX_DATA payload for hot paths (`walcut dump`, restore):
// the views point into the payload. ParseTxData reuses `writes`' capacity
// and returns false on any payload DecodePayload would reject; both are the
// same decoder.
struct WriteView {
  WriteOp op = WriteOp::kPut;
  std::string_view key;
  std::string_view value;
};
bool ParseTxData(std::span<const uint8_t> payload, TxId& tx, std::vector<WriteView>& writes);

namespace detail {

// The one decoder of a TX_DATA payload: DecodePayload copies the writes it
// visits, ParseTxData keeps views, VisitTxData hands them on. On damage it
// stops at the first field that does not fit and says which, for
// DecodePayload's message.
struct TxDataError {
  enum Kind { kNone, kTxId, kCount, kCountFit, kWrite, kOp, kKeyLength, kKey, kValueLength, kValue, kTrailing };
  Kind kind = kNone;
  uint64_t index = 0;  // the write, or the count
  uint64_t need = 0;   // the op, or the bytes a field needs
  size_t remain = 0;   // bytes left when the field did not fit
};

template <class OnCount, class OnWrite>
inline TxDataError WalkTxData(std::span<const uint8_t> payload, TxId& tx, OnCount on_count, OnWrite on_write) {
  ByteReader r(payload);
  uint32_t n = 0;
  if (!r.U32(tx.node) || !r.U64(tx.seq)) return {TxDataError::kTxId};
  if (!r.U32(n)) return {TxDataError::kCount};
  if (static_cast<uint64_t>(n) * layout::kWriteMinSize > r.remaining()) {
    return {TxDataError::kCountFit, n, 0, r.remaining()};
  }
  on_count(n);
  for (uint32_t i = 0; i < n; ++i) {
    uint8_t op = 0;
    uint16_t klen = 0;
    uint32_t vlen = 0;
    WriteView w;
    if (!r.U8(op)) return {TxDataError::kWrite, i};
    if (op != static_cast<uint8_t>(WriteOp::kPut) && op != static_cast<uint8_t>(WriteOp::kDelete)) {
      return {TxDataError::kOp, i, op};
    }
    if (!r.U16(klen)) return {TxDataError::kKeyLength, i};
    if (!r.Bytes(klen, w.key)) return {TxDataError::kKey, i, klen, r.remaining()};
    if (!r.U32(vlen)) return {TxDataError::kValueLength, i};
    if (!r.Bytes(vlen, w.value)) return {TxDataError::kValue, i, vlen, r.remaining()};
    w.op = static_cast<WriteOp>(op);
    on_write(w);
  }
  if (r.remaining() != 0) return {TxDataError::kTrailing, 0, 0, r.remaining()};
  return {};
}

}  // namespace detail

// The writes of a TX_DATA payload visited in place, without a vector:
// on_count(n) once the write count is known to fit the payload, then
// on_write(const WriteView&) for each write in order. The same decoder as
// ParseTxData and DecodePayload: false for exactly the payloads they reject,
// and then on_write may have been called for the writes before the damage
// (the caller drops what it kept of them).
template <class OnCount, class OnWrite>
inline bool VisitTxData(std::span<const uint8_t> payload, TxId& tx, OnCount&& on_count, OnWrite&& on_write) {
  return detail::WalkTxData(payload, tx, on_count, on_write).kind == detail::TxDataError::kNone;
}

// Zero-copy view of the payloads that end a transaction's step on a node:
// TX_PREPARE, TX_COMMIT and TX_ROLLBACK (`marker` only in TX_COMMIT, `flags`
// not in TX_PREPARE). ParseTxOutcome is the one decoder of these three
// types: DecodePayload and the scanner's hot path call it. It accepts exactly
// the payloads DecodePayload accepts and returns false for any other type.
// Inline: with a constant `type` it compiles to a few loads.
struct TxOutcomeView {
  TxId tx;
  uint64_t marker = 0;
  uint64_t time_us = 0;
  uint16_t flags = 0;
  std::span<const uint8_t> participants;  // n x u32 little-endian, as stored
  size_t participant_count() const { return participants.size() / 4; }
  uint32_t participant(size_t i) const { return LoadU32(participants.data() + 4 * i); }
};
[[gnu::always_inline]] inline bool ParseTxOutcome(RecordType type, std::span<const uint8_t> payload,
                                                  TxOutcomeView& out) {
  const layout::TxOutcome* l = layout::ForOutcome(type);
  if (l == nullptr || payload.size() < l->fixed) return false;
  const uint8_t* p = payload.data();
  const size_t n = LoadU16(p + l->count);
  // A count over the limit, participants cut short, or bytes after them are
  // all errors (DecodePayload names which).
  if (n > kMaxParticipants || payload.size() - l->fixed != n * 4) return false;
  out.tx.node = LoadU32(p + layout::kTxIdNode);
  out.tx.seq = LoadU64(p + layout::kTxIdSeq);
  out.marker = l->has_marker ? LoadU64(p + l->marker) : 0;
  out.time_us = LoadU64(p + l->time);
  out.flags = l->has_flags ? LoadU16(p + l->flags) : 0;
  out.participants = payload.subspan(l->fixed);
  return true;
}

}  // namespace walfmt
