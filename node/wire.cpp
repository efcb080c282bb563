#include "node/wire.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "walfmt/bytes.h"
#include "walfmt/crc32c.h"
#include "walfmt/segment.h"

namespace walcut::node::wire {

namespace {

uint32_t PayloadCrc(const void* p, size_t n) { return walfmt::MaskCrc(walfmt::crc32c::Value(p, n)); }

}  // namespace

// ---- frames

Status AppendFrame(std::string& out, std::string_view payload, uint32_t max_payload) {
  if (payload.size() > max_payload) {
    return Status::InvalidArgument(
        fmt::format("wire: a payload of {} bytes is over the frame limit of {} bytes", payload.size(), max_payload));
  }
  out.reserve(out.size() + kFrameHeaderBytes + payload.size());
  walfmt::PutU32(out, kFrameMagic);
  walfmt::PutU32(out, static_cast<uint32_t>(payload.size()));
  walfmt::PutU32(out, PayloadCrc(payload.data(), payload.size()));
  out.append(payload);
  return Status::Ok();
}

void FrameReader::Feed(std::span<const uint8_t> bytes) {
  Feed(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

void FrameReader::Feed(std::string_view bytes) {
  if (!error_.ok()) return;  // the stream is dead: keep nothing more
  // Drop the frames already returned once they are most of the buffer, so
  // that it holds at most about one frame plus what was fed in one go.
  if (pos_ > 0 && pos_ >= buf_.size() / 2) {
    buf_.erase(0, pos_);
    base_ += pos_;
    pos_ = 0;
  }
  buf_.append(bytes);
}

Result<std::optional<std::string>> FrameReader::Next() {
  if (!error_.ok()) return error_;
  const size_t avail = buf_.size() - pos_;
  if (avail < kFrameHeaderBytes) return std::optional<std::string>();
  const auto* h = reinterpret_cast<const uint8_t*>(buf_.data()) + pos_;
  const uint64_t at = offset();
  const uint32_t magic = walfmt::LoadU32(h);
  if (magic != kFrameMagic) {
    if ((magic & 0x00FFFFFFu) == (kFrameMagic & 0x00FFFFFFu)) {
      error_ = Status::Corruption(fmt::format(
          "wire: stream byte {}: frame of layout version {}, this build reads version {} (bad magic 0x{:08x})", at,
          magic >> 24, kFrameMagic >> 24, magic));
    } else {
      error_ = Status::Corruption(fmt::format(
          "wire: stream byte {}: bad magic 0x{:08x} (expected 0x{:08x}): not a walcut node frame, or out of step", at,
          magic, kFrameMagic));
    }
    return error_;
  }
  const uint32_t len = walfmt::LoadU32(h + 4);
  if (len > max_payload_) {
    error_ =
        Status::Corruption(fmt::format("wire: stream byte {}: frame at byte {} declares a payload of {} bytes, "
                                       "over the limit of {} bytes",
                                       at + 4, at, len, max_payload_));
    return error_;
  }
  if (avail - kFrameHeaderBytes < len) return std::optional<std::string>();
  const uint32_t stored = walfmt::LoadU32(h + 8);
  const uint32_t computed = PayloadCrc(h + kFrameHeaderBytes, len);
  if (stored != computed) {
    error_ =
        Status::Corruption(fmt::format("wire: stream byte {}: frame at byte {}: payload checksum mismatch "
                                       "(stored 0x{:08x}, computed 0x{:08x} over {} bytes)",
                                       at + 8, at, stored, computed, len));
    return error_;
  }
  std::optional<std::string> payload(std::in_place, buf_.data() + pos_ + kFrameHeaderBytes, len);
  pos_ += kFrameHeaderBytes + len;
  if (pos_ == buf_.size()) {  // all returned: start the buffer over
    base_ += pos_;
    buf_.clear();
    pos_ = 0;
  }
  return payload;
}

Status FrameReader::Finish() const {
  if (!error_.ok()) return error_;
  const size_t avail = buf_.size() - pos_;
  if (avail == 0) return Status::Ok();
  const uint64_t at = offset();
  if (avail < kFrameHeaderBytes) {
    return Status::Corruption(
        fmt::format("wire: stream byte {}: truncated: the stream ends {} bytes into the {}-byte "
                    "header of the frame at byte {}",
                    fed(), avail, kFrameHeaderBytes, at));
  }
  const uint32_t len = walfmt::LoadU32(reinterpret_cast<const uint8_t*>(buf_.data()) + pos_ + 4);
  if (avail - kFrameHeaderBytes >= len) {  // the caller's mistake, not the stream's
    return Status::InvalidArgument(
        fmt::format("wire: Finish with the frame at byte {} not yet read: call Next until it asks for more", at));
  }
  return Status::Corruption(
      fmt::format("wire: stream byte {}: truncated: the frame at byte {} has {} of its {} payload "
                  "bytes when the stream ends",
                  fed(), at, avail - kFrameHeaderBytes, len));
}

// ---- message encoding

namespace {

void PutU8(std::string& out, uint8_t v) { out.push_back(static_cast<char>(v)); }
void PutStr(std::string& out, std::string_view s) {
  walfmt::PutU32(out, static_cast<uint32_t>(s.size()));
  out.append(s);
}
void PutTx(std::string& out, const walfmt::TxId& tx) {
  walfmt::PutU32(out, tx.node);
  walfmt::PutU64(out, tx.seq);
}
void PutU32s(std::string& out, const std::vector<uint32_t>& v) {
  walfmt::PutU32(out, static_cast<uint32_t>(v.size()));
  for (uint32_t x : v) walfmt::PutU32(out, x);
}
void PutWrites(std::string& out, const std::vector<walfmt::Write>& v) {
  walfmt::PutU32(out, static_cast<uint32_t>(v.size()));
  for (const auto& w : v) {
    PutU8(out, static_cast<uint8_t>(w.op));
    PutStr(out, w.key);
    PutStr(out, w.value);
  }
}

// Flag bits of a peer message and of a plan.
constexpr uint8_t kMsgOk = 1, kMsgCommit = 2, kMsgPlan = 4, kMsgFlags = 7;
constexpr uint8_t kPlanOnePhase = 1, kPlanMayFail = 2, kPlanLoad = 4, kPlanRebuilt = 8, kPlanFlags = 15;

void PutPlan(std::string& out, const sim::TxPlan& p) {
  PutTx(out, p.id);
  PutU8(out, static_cast<uint8_t>((p.one_phase ? kPlanOnePhase : 0) | (p.may_fail ? kPlanMayFail : 0) |
                                  (p.load ? kPlanLoad : 0) | (p.rebuilt ? kPlanRebuilt : 0)));
  walfmt::PutU32(out, p.near_incarnation);
  PutU32s(out, p.participants);
  PutU32s(out, p.primaries);
  walfmt::PutU32(out, static_cast<uint32_t>(p.writes.size()));
  for (const auto& w : p.writes) PutWrites(out, w);
  walfmt::PutU32(out, static_cast<uint32_t>(p.forward.size()));
  for (const auto& f : p.forward) PutU32s(out, f);
  PutU32s(out, p.forwarder);
  walfmt::PutU32(out, p.decider);
  PutWrites(out, p.all_writes);
}

void Put(std::string& out, const Hello& m) {
  walfmt::PutU64(out, m.cluster_id);
  walfmt::PutU32(out, m.node);
  walfmt::PutU32(out, m.incarnation);
  PutU8(out, static_cast<uint8_t>(m.role));
  walfmt::PutU32(out, m.protocol_version);
}

void Put(std::string& out, const Peer& p) {
  const sim::Msg& m = p.msg;
  PutU8(out, static_cast<uint8_t>(m.type));
  walfmt::PutU32(out, m.from);
  walfmt::PutU32(out, m.from_incarnation);
  walfmt::PutU32(out, m.to);
  walfmt::PutU64(out, m.cut_id);
  PutTx(out, m.tx);
  PutU8(out, static_cast<uint8_t>((m.ok ? kMsgOk : 0) | (m.commit ? kMsgCommit : 0) | (m.plan ? kMsgPlan : 0)));
  walfmt::PutU64(out, m.marker);
  walfmt::PutU32(out, m.round);
  PutU8(out, static_cast<uint8_t>(m.pstate));
  PutU8(out, static_cast<uint8_t>(m.nstate));
  PutU32s(out, m.participants);
  walfmt::PutU32(out, static_cast<uint32_t>(m.keys.size()));
  for (const auto& k : m.keys) PutStr(out, k);
  walfmt::PutU32(out, static_cast<uint32_t>(m.values.size()));
  for (const auto& v : m.values) {
    PutU8(out, v ? 1 : 0);
    if (v) PutStr(out, *v);
  }
  if (m.plan) PutPlan(out, *m.plan);
}

void Put(std::string& out, const TxRequest& m) {
  walfmt::PutU64(out, m.request_id);
  PutU8(out, static_cast<uint8_t>(m.workload));
  walfmt::PutU64(out, m.seed);
}

void Put(std::string& out, const TxResult& m) {
  walfmt::PutU64(out, m.request_id);
  PutTx(out, m.tx);
  PutU8(out, static_cast<uint8_t>(m.outcome));
  if (m.outcome == Outcome::kAborted) PutU8(out, static_cast<uint8_t>(m.reason));
  if (m.outcome == Outcome::kRefused) PutStr(out, m.message);
  walfmt::PutU32(out, static_cast<uint32_t>(m.reads.size()));
  for (const auto& [k, v] : m.reads) {
    PutStr(out, k);
    PutU8(out, v ? 1 : 0);
    if (v) PutStr(out, *v);
  }
  PutWrites(out, m.writes);
  walfmt::PutU64(out, m.commit_time_us);
}

void Put(std::string& out, const CutReply& m) {
  PutU8(out, m.ok ? 1 : 0);
  walfmt::PutU64(out, m.cut_id);
  if (!m.ok) PutStr(out, m.error);
}

void Put(std::string& out, const StatusReply& m) {
  walfmt::PutU32(out, m.node);
  walfmt::PutU32(out, m.incarnation);
  PutU8(out, m.ready ? 1 : 0);
  walfmt::PutU64(out, m.cut_id);
  walfmt::PutU32(out, m.initiator);
  walfmt::PutU64(out, m.in_flight);
}

void Put(std::string& out, const SnapshotRequest& m) { PutStr(out, m.name); }

void Put(std::string& out, const SnapshotReply& m) {
  PutU8(out, m.ok ? 1 : 0);
  PutStr(out, m.ok ? m.name : m.error);
}

void Put(std::string& out, const SnapshotStep& m) {
  PutU8(out, static_cast<uint8_t>(m.step));
  walfmt::PutU64(out, m.round);
  PutStr(out, m.name);
  walfmt::PutU64(out, m.at.segment);
  walfmt::PutU64(out, m.at.offset);
  walfmt::PutU64(out, m.fingerprint);
  PutU8(out, m.prune ? 1 : 0);
  walfmt::PutU64(out, m.deleted);
  walfmt::PutU64(out, m.deleted_bytes);
  PutStr(out, m.error);
}

void Put(std::string&, const CutRequest&) {}
void Put(std::string&, const StatusRequest&) {}
void Put(std::string&, const Shutdown&) {}

}  // namespace

std::string Encode(const Message& m) {
  std::string out;
  PutU8(out, static_cast<uint8_t>(KindOf(m)));
  std::visit([&out](const auto& v) { Put(out, v); }, m);
  return out;
}

// ---- message decoding

namespace {

// A bounds-checked reader over one payload that keeps the first error, with
// the payload offset of the field and what is wrong with it. Every getter
// returns false once an error is kept.
class In {
 public:
  In(std::span<const uint8_t> data, Kind kind) : size_(data.size()), r_(data), kind_(kind) {}

  size_t at() const { return size_ - r_.remaining(); }
  bool ok() const { return error_.empty(); }
  bool Fail(size_t at, std::string_view what) {
    if (ok()) error_ = fmt::format("wire: {} message, payload byte {}: {}", KindName(kind_), at, what);
    return false;
  }
  Status status() const { return ok() ? Status::Ok() : Status::Corruption(error_); }

  bool U8(uint8_t& v, std::string_view field) { return ok() && (r_.U8(v) || Short(field, 1)); }
  bool U32(uint32_t& v, std::string_view field) { return ok() && (r_.U32(v) || Short(field, 4)); }
  bool U64(uint64_t& v, std::string_view field) { return ok() && (r_.U64(v) || Short(field, 8)); }
  bool Tx(walfmt::TxId& tx, std::string_view field) { return U32(tx.node, field) && U64(tx.seq, field); }

  bool Bool(bool& v, std::string_view field) {
    const size_t start = at();
    uint8_t b = 0;
    if (!U8(b, field)) return false;
    if (b > 1) return Fail(start, fmt::format("bad {} {} (0 or 1)", field, b));
    v = b == 1;
    return true;
  }
  bool Flags(uint8_t& v, uint8_t known, std::string_view field) {
    const size_t start = at();
    if (!U8(v, field)) return false;
    if ((v & ~known) != 0)
      return Fail(start, fmt::format("bad {} 0x{:02x} (unknown bits 0x{:02x})", field, v, v & ~known));
    return true;
  }
  // An enum of one byte whose values are lo..hi.
  template <class E>
  bool Enum(E& out, E lo, E hi, std::string_view field) {
    const size_t start = at();
    uint8_t b = 0;
    if (!U8(b, field)) return false;
    if (b < static_cast<uint8_t>(lo) || b > static_cast<uint8_t>(hi)) {
      return Fail(start, fmt::format("bad {} {} (valid: {} to {})", field, b, static_cast<unsigned>(lo),
                                     static_cast<unsigned>(hi)));
    }
    out = static_cast<E>(b);
    return true;
  }
  // A u32 count of items of at least `min_each` bytes: refused when the bytes
  // left cannot hold that many, so that no count makes the decoder reserve
  // more than the payload holds.
  bool Count(uint32_t& n, size_t min_each, std::string_view field) {
    const size_t start = at();
    if (!U32(n, field)) return false;
    if (static_cast<uint64_t>(n) * min_each > r_.remaining()) {
      return Fail(start, fmt::format("{} count {} needs at least {} bytes, {} left", field, n,
                                     static_cast<uint64_t>(n) * min_each, r_.remaining()));
    }
    return true;
  }
  bool Str(std::string& out, std::string_view field) {
    const size_t start = at();
    uint32_t n = 0;
    if (!U32(n, field)) return false;
    std::string_view v;
    if (!r_.Bytes(n, v)) {
      return Fail(start, fmt::format("{} length {} is more than the {} bytes left", field, n, r_.remaining()));
    }
    out.assign(v);
    return true;
  }
  bool OptStr(std::optional<std::string>& out, std::string_view field) {
    bool present = false;
    if (!Bool(present, field)) return false;
    if (!present) {
      out.reset();
      return true;
    }
    return Str(out.emplace(), field);
  }
  bool U32s(std::vector<uint32_t>& out, std::string_view field) {
    uint32_t n = 0;
    if (!Count(n, 4, field)) return false;
    out.resize(n);
    for (auto& x : out) U32(x, field);
    return ok();
  }
  bool Writes(std::vector<walfmt::Write>& out, std::string_view field) {
    uint32_t n = 0;
    if (!Count(n, 9, field)) return false;  // op, key length, value length
    out.resize(n);
    for (auto& w : out) {
      if (!Enum(w.op, walfmt::WriteOp::kPut, walfmt::WriteOp::kDelete, "write op") || !Str(w.key, "write key") ||
          !Str(w.value, "write value")) {
        return false;
      }
    }
    return true;
  }
  // The end of the message: nothing may follow.
  bool End() {
    if (ok() && r_.remaining() > 0) {
      return Fail(at(), fmt::format("{} trailing bytes after the message", r_.remaining()));
    }
    return ok();
  }

 private:
  bool Short(std::string_view field, size_t need) {
    return Fail(at(), fmt::format("truncated: {} needs {} bytes, {} left", field, need, r_.remaining()));
  }

  size_t size_;
  walfmt::ByteReader r_;
  Kind kind_;
  std::string error_;
};

void Get(In& in, Hello& m) {
  in.U64(m.cluster_id, "cluster id");
  const size_t node_at = in.at();
  in.U32(m.node, "node");
  in.U32(m.incarnation, "incarnation");
  in.Enum(m.role, Role::kPeer, Role::kControl, "role");
  in.U32(m.protocol_version, "protocol version");
  if (!in.ok()) return;
  const bool sentinel = m.node == kClient || m.node == kControl || m.node == sim::kNoNode;
  const bool fits = m.role == Role::kPeer ? !sentinel : m.node == (m.role == Role::kClient ? kClient : kControl);
  if (!fits) {
    in.Fail(node_at, fmt::format("node 0x{:08x} does not match role {} (a peer names a node; a client sends 0x{:08x}, "
                                 "the control tool 0x{:08x})",
                                 m.node, static_cast<unsigned>(m.role), kClient, kControl));
  }
}

std::shared_ptr<const sim::TxPlan> GetPlan(In& in) {
  auto p = std::make_shared<sim::TxPlan>();
  in.Tx(p->id, "plan tx");
  uint8_t flags = 0;
  in.Flags(flags, kPlanFlags, "plan flags");
  p->one_phase = (flags & kPlanOnePhase) != 0;
  p->may_fail = (flags & kPlanMayFail) != 0;
  p->load = (flags & kPlanLoad) != 0;
  p->rebuilt = (flags & kPlanRebuilt) != 0;
  in.U32(p->near_incarnation, "plan near incarnation");
  in.U32s(p->participants, "plan participants");
  in.U32s(p->primaries, "plan primaries");
  uint32_t n = 0;
  if (in.Count(n, 4, "plan writes by node")) {
    p->writes.resize(n);
    for (auto& w : p->writes) in.Writes(w, "plan writes");
  }
  if (in.Count(n, 4, "plan forward lists")) {
    p->forward.resize(n);
    for (auto& f : p->forward) in.U32s(f, "plan forward");
  }
  in.U32s(p->forwarder, "plan forwarder");
  in.U32(p->decider, "plan decider");
  in.Writes(p->all_writes, "plan all writes");
  return p;
}

void Get(In& in, Peer& p) {
  sim::Msg& m = p.msg;
  in.Enum(m.type, sim::MsgType::kLockRead, sim::MsgType::kHelloResp, "message type");
  in.U32(m.from, "from");
  in.U32(m.from_incarnation, "from incarnation");
  in.U32(m.to, "to");
  in.U64(m.cut_id, "cut id");
  in.Tx(m.tx, "tx");
  uint8_t flags = 0;
  in.Flags(flags, kMsgFlags, "flags");
  m.ok = (flags & kMsgOk) != 0;
  m.commit = (flags & kMsgCommit) != 0;
  in.U64(m.marker, "marker");
  in.U32(m.round, "round");
  in.Enum(m.pstate, sim::PState::kNone, sim::PState::kUnknown, "pstate");
  in.Enum(m.nstate, sim::NState::kNoSay, sim::NState::kRollback, "nstate");
  in.U32s(m.participants, "participants");
  uint32_t n = 0;
  if (in.Count(n, 4, "keys")) {
    m.keys.resize(n);
    for (auto& k : m.keys) in.Str(k, "key");
  }
  if (in.Count(n, 1, "values")) {
    m.values.resize(n);
    for (auto& v : m.values) in.OptStr(v, "value");
  }
  if (in.ok() && (flags & kMsgPlan) != 0) m.plan = GetPlan(in);
}

void Get(In& in, TxRequest& m) {
  in.U64(m.request_id, "request id");
  in.Enum(m.workload, walfmt::Workload::kBank, walfmt::Workload::kMixed, "workload");
  in.U64(m.seed, "seed");
}

void Get(In& in, TxResult& m) {
  in.U64(m.request_id, "request id");
  in.Tx(m.tx, "tx");
  in.Enum(m.outcome, Outcome::kCommitted, Outcome::kInDoubt, "outcome");
  if (!in.ok()) return;
  if (m.outcome == Outcome::kAborted) {
    in.Enum(m.reason, AbortReason::kConflict, AbortReason::kParticipantLost, "abort reason");
  } else if (m.outcome == Outcome::kRefused) {
    const size_t at = in.at();
    if (in.Str(m.message, "refusal message") && m.message.empty()) in.Fail(at, "empty refusal message");
  }
  uint32_t n = 0;
  if (in.Count(n, 5, "reads")) {  // key length, presence
    for (uint32_t i = 0; i < n && in.ok(); ++i) {
      const size_t at = in.at();
      std::string key;
      std::optional<std::string> value;
      if (!in.Str(key, "read key") || !in.OptStr(value, "read value")) break;
      if (!m.reads.empty() && key <= m.reads.rbegin()->first) {
        in.Fail(at, fmt::format("read key {} is not after the one before it (keys ascend, each once)", i));
        break;
      }
      m.reads.emplace_hint(m.reads.end(), std::move(key), std::move(value));
    }
  }
  in.Writes(m.writes, "writes");
  in.U64(m.commit_time_us, "commit time");
}

void Get(In& in, CutReply& m) {
  in.Bool(m.ok, "ok");
  const size_t id_at = in.at();
  if (!in.U64(m.cut_id, "cut id")) return;
  if (m.ok) {
    if (m.cut_id == 0) in.Fail(id_at, "cut id 0 in a reply that is ok");
  } else {
    const size_t at = in.at();
    if (in.Str(m.error, "error") && m.error.empty()) in.Fail(at, "empty error message");
  }
}

void Get(In& in, StatusReply& m) {
  in.U32(m.node, "node");
  in.U32(m.incarnation, "incarnation");
  in.Bool(m.ready, "ready");
  in.U64(m.cut_id, "cut id");
  in.U32(m.initiator, "initiator");
  in.U64(m.in_flight, "in-flight transactions");
}

void Get(In& in, SnapshotRequest& m) { in.Str(m.name, "name"); }

void Get(In& in, SnapshotReply& m) {
  in.Bool(m.ok, "ok");
  if (!in.ok()) return;
  const size_t at = in.at();
  if (m.ok) {
    if (in.Str(m.name, "name") && m.name.empty()) in.Fail(at, "empty snapshot name");
  } else if (in.Str(m.error, "error") && m.error.empty()) {
    in.Fail(at, "empty error message");
  }
}

void Get(In& in, SnapshotStep& m) {
  in.Enum(m.step, SnapStep::kPause, SnapStep::kFailed, "step");
  in.U64(m.round, "round");
  in.Str(m.name, "name");
  in.U64(m.at.segment, "segment");
  in.U64(m.at.offset, "offset");
  in.U64(m.fingerprint, "fingerprint");
  in.Bool(m.prune, "prune");
  in.U64(m.deleted, "deleted segments");
  in.U64(m.deleted_bytes, "deleted bytes");
  const size_t at = in.at();
  if (!in.Str(m.error, "error")) return;
  if (m.step == SnapStep::kFailed && m.error.empty()) in.Fail(at, "empty error message");
  if (m.step != SnapStep::kFailed && !m.error.empty()) in.Fail(at, "an error message on a step that is not a failure");
}

void Get(In&, CutRequest&) {}
void Get(In&, StatusRequest&) {}
void Get(In&, Shutdown&) {}

template <size_t I = 0>
Message MessageOfIndex(size_t i) {
  if constexpr (I + 1 < std::variant_size_v<Message>) {
    if (i != I) return MessageOfIndex<I + 1>(i);
  }
  return Message(std::in_place_index<I>);
}

}  // namespace

Result<Message> Decode(std::span<const uint8_t> payload) {
  if (payload.empty()) return Status::Corruption("wire: empty payload (no message kind)");
  const uint8_t kind = payload[0];
  if (kind < 1 || kind > std::variant_size_v<Message>) {
    return Status::Corruption(fmt::format("wire: payload byte 0: unknown message kind {} (known: 1 to {})", kind,
                                          std::variant_size_v<Message>));
  }
  Message m = MessageOfIndex(kind - 1);
  In in(payload, static_cast<Kind>(kind));
  uint8_t skip = 0;
  in.U8(skip, "kind");
  std::visit([&in](auto& v) { Get(in, v); }, m);
  if (!in.End()) return in.status();
  return m;
}

Result<Message> Decode(std::string_view payload) {
  return Decode(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(payload.data()), payload.size()));
}

// ---- message equality

bool SamePlan(const sim::TxPlan& a, const sim::TxPlan& b) {
  return a.id == b.id && a.one_phase == b.one_phase && a.may_fail == b.may_fail && a.load == b.load &&
         a.near_incarnation == b.near_incarnation && a.participants == b.participants && a.primaries == b.primaries &&
         a.writes == b.writes && a.forward == b.forward && a.forwarder == b.forwarder && a.decider == b.decider &&
         a.all_writes == b.all_writes && a.rebuilt == b.rebuilt;
}

bool operator==(const Peer& pa, const Peer& pb) {
  const sim::Msg& a = pa.msg;
  const sim::Msg& b = pb.msg;
  if (!(a.type == b.type && a.from == b.from && a.from_incarnation == b.from_incarnation && a.to == b.to &&
        a.cut_id == b.cut_id && a.tx == b.tx && a.ok == b.ok && a.commit == b.commit && a.marker == b.marker &&
        a.round == b.round && a.pstate == b.pstate && a.nstate == b.nstate && a.participants == b.participants &&
        a.keys == b.keys && a.values == b.values)) {
    return false;
  }
  if (!a.plan || !b.plan) return !a.plan && !b.plan;
  return SamePlan(*a.plan, *b.plan);
}

Kind KindOf(const Message& m) { return static_cast<Kind>(m.index() + 1); }

const char* KindName(Kind k) {
  switch (k) {
    case Kind::kHello:
      return "Hello";
    case Kind::kPeer:
      return "Peer";
    case Kind::kTxRequest:
      return "TxRequest";
    case Kind::kTxResult:
      return "TxResult";
    case Kind::kCutRequest:
      return "CutRequest";
    case Kind::kCutReply:
      return "CutReply";
    case Kind::kStatusRequest:
      return "StatusRequest";
    case Kind::kStatusReply:
      return "StatusReply";
    case Kind::kShutdown:
      return "Shutdown";
    case Kind::kSnapshotRequest:
      return "SnapshotRequest";
    case Kind::kSnapshotReply:
      return "SnapshotReply";
    case Kind::kSnapshotStep:
      return "SnapshotStep";
  }
  return "unknown";
}

}  // namespace walcut::node::wire
