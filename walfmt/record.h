// Logical WAL records: what a node writes, as C++ values, and their payload
// codec. The framing around a payload (checksums, length, type) lives in
// segment.h; FORMAT.md documents every byte of both.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

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

struct TxId {
  uint32_t node = 0;  // the near (coordinating) node
  uint64_t seq = 0;   // per near node, from 1
  auto operator<=>(const TxId&) const = default;
  std::string ToString() const;  // "node:seq"
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
  kNodeRestart = 1,     // the node crashed and restarted while the cut ran
  kRecoveredTx = 2,     // a tracked transaction was finished by the recovery protocol
  kParticipantLost = 3, // a participant of a tracked transaction crashed
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

// One line, for `walcut dump`: the fields of the record, keys and values
// shortened to `max_bytes` each (0 = no limit).
std::string Describe(const Record& r, size_t max_bytes = 32);

// Escapes a key or value for printing: printable ASCII as is, other bytes
// (and the backslash) as \xNN; longer than max_bytes (0 = no limit) ends in
// "...(+N)".
std::string Printable(std::string_view bytes, size_t max_bytes);

// Zero-copy view of a TX_DATA payload for hot paths (`walcut dump`): the
// views point into the payload. ParseTxData reuses `writes`' capacity and
// returns false on any payload DecodePayload would reject.
struct WriteView {
  WriteOp op = WriteOp::kPut;
  std::string_view key;
  std::string_view value;
};
bool ParseTxData(std::span<const uint8_t> payload, TxId& tx, std::vector<WriteView>& writes);
void AppendWritesDescription(std::string& out, const std::vector<WriteView>& writes, size_t max_bytes);

// The same two, appending to `out` (no temporary strings: the dump hot path).
void AppendPrintable(std::string& out, std::string_view bytes, size_t max_bytes);
void AppendDescription(std::string& out, const Record& r, size_t max_bytes = 32);

// Zero-copy view of the payloads that end a transaction's step on a node:
// TX_PREPARE, TX_COMMIT and TX_ROLLBACK (`marker` only in TX_COMMIT, `flags`
// not in TX_PREPARE). ParseTxOutcome accepts exactly the payloads
// DecodePayload accepts for these types and returns false for any other type.
struct TxOutcomeView {
  TxId tx;
  uint64_t marker = 0;
  uint64_t time_us = 0;
  uint16_t flags = 0;
  std::span<const uint8_t> participants;  // n x u32 little-endian, as stored
  size_t participant_count() const { return participants.size() / 4; }
};
bool ParseTxOutcome(RecordType type, std::span<const uint8_t> payload, TxOutcomeView& out);

// Raw-buffer writers for the dump hot path: each writes the same bytes as the
// Append* function of the same name (for TX_PREPARE/COMMIT/ROLLBACK: as
// AppendDescription of the decoded record) at `out` and returns the end.
// `out` must have room for the matching *Bound() bytes; nothing allocates.
size_t PrintableBound(std::string_view bytes, size_t max_bytes);
char* WritePrintable(char* out, std::string_view bytes, size_t max_bytes);
size_t WritesDescriptionBound(std::span<const WriteView> writes, size_t max_bytes);
char* WriteWritesDescription(char* out, std::span<const WriteView> writes, size_t max_bytes);
size_t TxOutcomeDescriptionBound(const TxOutcomeView& v);
char* WriteTxOutcomeDescription(char* out, RecordType type, const TxOutcomeView& v);

}  // namespace walfmt
