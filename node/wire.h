// The node protocol on the wire (issue 34): what node processes, clients and
// the control tool send each other over TCP. Pure code, no sockets: frames
// (length-prefixed, checksummed) and the messages in their payloads, bytes in,
// bytes out. docs/wire.md fixes every byte.
//
//   frame   := u32 magic, u32 payload length, u32 masked CRC32C of the payload, payload
//   payload := u8 kind, the message's fields (docs/wire.md)
//
// Little-endian and masked CRC32C like the WAL (walfmt/FORMAT.md). Errors are
// values: a decoder refuses damaged or unknown input with a one-line
// kCorruption status naming the byte offset and what is wrong, and never
// trusts a length or count beyond the bytes that hold it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "node/messages.h"
#include "node/workload.h"
#include "walfmt/lsn.h"
#include "walfmt/record.h"
#include "walfmt/status.h"
#include "walfmt/workload.h"

namespace walcut::node::wire {

using walfmt::Result;
using walfmt::Status;

// ---- frames

// "WCN" and the frame layout's version (1), as bytes on the wire.
constexpr uint32_t kFrameMagic = 0x014E4357u;
constexpr size_t kFrameHeaderBytes = 12;
// The largest payload a frame may carry unless the reader is given another
// limit; a longer one is refused from its header, before it is buffered.
constexpr uint32_t kMaxPayloadBytes = 16u << 20;

// Appends one frame holding `payload` to `out`. A payload over `max_payload`
// is refused (kInvalidArgument) and nothing is appended: the peer would
// refuse it.
Status AppendFrame(std::string& out, std::string_view payload, uint32_t max_payload = kMaxPayloadBytes);

// A streaming decoder of frames: Feed the bytes as they arrive, in any
// chunks, then call Next until it asks for more. The first error is final:
// a stream is not resynchronised after damage, and every later Next returns
// that error again.
class FrameReader {
 public:
  explicit FrameReader(uint32_t max_payload = kMaxPayloadBytes) : max_payload_(max_payload) {}

  void Feed(std::span<const uint8_t> bytes);
  void Feed(std::string_view bytes);
  // The next frame's payload; nullopt when the next frame is not all there
  // yet; an error (bad magic, length over the limit, checksum mismatch) naming
  // the offset in the stream of the frame and of the bad field.
  Result<std::optional<std::string>> Next();
  // The end of the stream: an error when it stops inside a frame (or an error
  // was found before), else Ok. Call it after Next asked for more (a frame
  // left unread is kInvalidArgument).
  Status Finish() const;

  // Bytes of the stream fed so far, and the offset of the next frame.
  uint64_t fed() const { return base_ + buf_.size(); }
  uint64_t offset() const { return base_ + pos_; }

 private:
  uint32_t max_payload_;
  std::string buf_;    // bytes fed and not yet returned, from buf_[pos_]
  size_t pos_ = 0;     // the start of the next frame in buf_
  uint64_t base_ = 0;  // stream offset of buf_[0]
  Status error_;
};

// ---- messages

enum class Kind : uint8_t {
  kHello = 1,
  kPeer = 2,
  kTxRequest = 3,
  kTxResult = 4,
  kCutRequest = 5,
  kCutReply = 6,
  kStatusRequest = 7,
  kStatusReply = 8,
  kShutdown = 9,
  kSnapshotRequest = 10,
  kSnapshotReply = 11,
  kSnapshotStep = 12,
};

// The version of the messages (Hello carries it). The frame layout has its
// own, in kFrameMagic.
constexpr uint32_t kProtocolVersion = 1;

// Node ids of the senders that are not nodes (Hello::node).
constexpr uint32_t kClient = 0xFFFFFFFEu;
constexpr uint32_t kControl = 0xFFFFFFFDu;

enum class Role : uint8_t { kPeer = 1, kClient = 2, kControl = 3 };

// The first message on a connection, from the side that opened it. A peer
// names a node id (not a sentinel); a client sends kClient, the control tool
// kControl.
struct Hello {
  uint64_t cluster_id = 0;
  uint32_t node = 0;
  uint32_t incarnation = 0;
  Role role = Role::kPeer;
  uint32_t protocol_version = kProtocolVersion;
  bool operator==(const Hello&) const = default;
};

// A message between nodes: the whole sim::Msg, its plan by value. Equal when
// the fields and the plans' contents (not their addresses) are; TxPlan's
// `recorded`, the oracle's local note, is neither sent nor compared.
struct Peer {
  sim::Msg msg;
};
bool operator==(const Peer& a, const Peer& b);
bool SamePlan(const sim::TxPlan& a, const sim::TxPlan& b);

// A client asks a node (its near node) to run one transaction of `workload`,
// the program seeded with `seed`.
struct TxRequest {
  uint64_t request_id = 0;
  walfmt::Workload workload = walfmt::Workload::kBank;
  uint64_t seed = 0;
  bool operator==(const TxRequest&) const = default;
};

// kInDoubt: the near node lost the primary of a one-phase transaction before
// it learned the decision; the primary's decider may have committed it.
enum class Outcome : uint8_t { kCommitted = 1, kAborted = 2, kRefused = 3, kInDoubt = 4 };

// The answer to a TxRequest. `reason` is set for kAborted only (never kNone
// then), `message` for kRefused only (never empty then); the other outcomes
// send neither.
struct TxResult {
  uint64_t request_id = 0;
  walfmt::TxId tx;
  Outcome outcome = Outcome::kCommitted;
  AbortReason reason = AbortReason::kNone;
  std::string message;
  ReadSet reads;                      // key -> value read (nullopt: missing)
  std::vector<walfmt::Write> writes;  // what the transaction wrote
  uint64_t commit_time_us = 0;
  bool operator==(const TxResult&) const = default;
};

// Control: start a cut; the reply names it, or says why not.
struct CutRequest {
  bool operator==(const CutRequest&) const = default;
};
// ok: cut_id completed consistent. Not ok with a cut id: that cut completed
// inconsistent; without (0): no cut was started. `error` says why (never
// empty then).
struct CutReply {
  bool ok = true;
  uint64_t cut_id = 0;  // never 0 when ok
  std::string error;    // !ok, never empty then
  bool operator==(const CutReply&) const = default;
};
struct StatusRequest {
  bool operator==(const StatusRequest&) const = default;
};
struct StatusReply {
  uint32_t node = 0;
  uint32_t incarnation = 0;
  bool ready = false;
  uint64_t cut_id = 0;     // the node's current cut id
  uint32_t initiator = 0;  // who starts the cuts, as this node knows it (sim::kNoNode: nobody known)
  uint64_t in_flight = 0;  // transactions this node is near node of and that have not ended
  bool operator==(const StatusReply&) const = default;
};
struct Shutdown {
  bool operator==(const Shutdown&) const = default;
};

// Control: take a full snapshot of the cluster, its transactions quiesced
// (docs/real-cluster.md). `name` empty: the initiator names it "full-N".
struct SnapshotRequest {
  std::string name;
  bool operator==(const SnapshotRequest&) const = default;
};
// The answer once the snapshot is listed in cluster.json (and, with WAL
// retention, the nodes have deleted what it makes unnecessary), or why not.
struct SnapshotReply {
  bool ok = true;
  std::string name;   // ok
  std::string error;  // !ok, never empty then
  bool operator==(const SnapshotReply&) const = default;
};

// Between nodes: one step of a full snapshot, from the initiator to a node
// (pause, take, resume) or back (drained, taken, busy, pruned, failed).
enum class SnapStep : uint8_t {
  kPause = 1,    // start no transaction; answer kDrained once none you coordinate is open
  kDrained = 2,  // no transaction this node coordinates is open, and it starts none
  kTake = 3,     // write the SNAPSHOT record and the snapshot file if nothing is open here
  kTaken = 4,    // done: `at` and `fingerprint`
  kBusy = 5,     // something is still open here: ask again
  kResume = 6,   // start transactions again; with `prune`, delete the WAL the snapshot makes unnecessary
  kPruned = 7,   // resumed: `deleted` segments of `deleted_bytes` bytes
  kFailed = 8,   // this node could not take its part: `error`
};
struct SnapshotStep {
  SnapStep step = SnapStep::kPause;
  uint64_t round = 0;  // the initiator's number for this snapshot attempt
  std::string name;
  walfmt::Lsn at;            // kTaken: the SNAPSHOT record's position
  uint64_t fingerprint = 0;  // kTaken
  bool prune = false;        // kResume
  uint64_t deleted = 0;      // kPruned
  uint64_t deleted_bytes = 0;
  std::string error;  // kFailed (never empty then); empty for every other step
  bool operator==(const SnapshotStep&) const = default;
};

// In the order of Kind, from 1.
using Message = std::variant<Hello, Peer, TxRequest, TxResult, CutRequest, CutReply, StatusRequest, StatusReply,
                             Shutdown, SnapshotRequest, SnapshotReply, SnapshotStep>;

Kind KindOf(const Message& m);
const char* KindName(Kind k);

// A frame's payload: the kind byte and the message.
std::string Encode(const Message& m);
// The message of a payload. Refuses an unknown kind, a field that does not
// fit, an enum value or flag bit that means nothing, a count more than the
// bytes left can hold, and bytes after the message.
Result<Message> Decode(std::span<const uint8_t> payload);
Result<Message> Decode(std::string_view payload);

// Decode, then refuse a message of another kind than T (e.g. anything but a
// Hello as a connection's first frame).
template <class T>
Result<T> DecodeAs(std::string_view payload) {
  auto m = Decode(payload);
  if (!m.ok()) return m.status();
  if (T* t = std::get_if<T>(&*m)) return std::move(*t);
  return Status::Corruption(std::string("wire: expected a ") + KindName(KindOf(Message(T{}))) + " message, got a " +
                            KindName(KindOf(*m)));
}

}  // namespace walcut::node::wire
