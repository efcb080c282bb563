// The node protocol's bytes (node/wire.h, docs/wire.md): frames and the
// streaming FrameReader, every message kind's encoding, and every refusal of
// the decoders. Random contents come from fixed seeds, printed on failure.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "node/rng.h"
#include "node/wire.h"
#include "walfmt/bytes.h"
#include "walfmt/crc32c.h"
#include "walfmt/segment.h"

namespace wire = walcut::node::wire;
namespace sim = walcut::node::sim;
using walcut::node::AbortReason;
using walcut::node::Rng;
using walfmt::ErrorCode;

namespace {

// Random messages, every field drawn, edge values included.
struct Gen {
  Rng rng;
  explicit Gen(uint64_t seed) : rng(seed) {}

  uint64_t U64() {
    switch (rng.Below(4)) {
      case 0:
        return 0;
      case 1:
        return ~uint64_t{0};
      default:
        return rng.Next();
    }
  }
  uint32_t U32() { return static_cast<uint32_t>(U64()); }
  bool Bool() { return rng.Below(2) == 1; }
  size_t Len(size_t max) { return rng.Below(max + 1); }
  std::string Str(size_t max = 12) {
    std::string s(Len(max), '\0');
    for (auto& c : s) c = static_cast<char>(rng.Below(256));
    return s;
  }
  std::optional<std::string> OptStr() { return Bool() ? std::optional<std::string>(Str()) : std::nullopt; }
  walfmt::TxId Tx() { return walfmt::TxId{U32(), U64()}; }
  std::vector<uint32_t> U32s(size_t max = 5) {
    std::vector<uint32_t> v(Len(max));
    for (auto& x : v) x = U32();
    return v;
  }
  walfmt::Write Write() {
    walfmt::Write w;
    w.op = Bool() ? walfmt::WriteOp::kPut : walfmt::WriteOp::kDelete;
    w.key = Str();
    w.value = w.op == walfmt::WriteOp::kPut ? Str() : "";
    return w;
  }
  std::vector<walfmt::Write> Writes(size_t max = 4) {
    std::vector<walfmt::Write> v(Len(max));
    for (auto& w : v) w = Write();
    return v;
  }
  template <class E>
  E Enum(E lo, E hi) {
    return static_cast<E>(rng.Range(static_cast<uint8_t>(lo), static_cast<uint8_t>(hi)));
  }

  wire::Hello Hello() {
    wire::Hello h;
    h.cluster_id = U64();
    h.role = Enum(wire::Role::kPeer, wire::Role::kControl);
    h.node = h.role == wire::Role::kClient    ? wire::kClient
             : h.role == wire::Role::kControl ? wire::kControl
                                              : static_cast<uint32_t>(rng.Below(wire::kControl));
    h.incarnation = U32();
    h.protocol_version = Bool() ? wire::kProtocolVersion : U32();
    return h;
  }
  std::shared_ptr<const sim::TxPlan> Plan() {
    auto p = std::make_shared<sim::TxPlan>();
    p->id = Tx();
    p->one_phase = Bool();
    p->may_fail = Bool();
    p->load = Bool();
    p->rebuilt = Bool();
    p->recorded = false;
    p->near_incarnation = U32();
    p->participants = U32s();
    p->primaries = U32s();
    p->writes.resize(Len(4));
    for (auto& w : p->writes) w = Writes();
    p->forward.resize(Len(4));
    for (auto& f : p->forward) f = U32s();
    p->forwarder = U32s();
    p->decider = U32();
    p->all_writes = Writes();
    return p;
  }
  wire::Peer Peer() {
    sim::Msg m;
    m.type = Enum(sim::MsgType::kLockRead, sim::MsgType::kHelloResp);
    m.from = U32();
    m.from_incarnation = U32();
    m.to = U32();
    m.cut_id = U64();
    m.tx = Tx();
    m.ok = Bool();
    m.commit = Bool();
    m.marker = U64();
    m.round = U32();
    m.pstate = Enum(sim::PState::kNone, sim::PState::kUnknown);
    m.nstate = Enum(sim::NState::kNoSay, sim::NState::kRollback);
    m.participants = U32s();
    m.keys.resize(Len(4));
    for (auto& k : m.keys) k = Str();
    m.values.resize(Len(4));
    for (auto& v : m.values) v = OptStr();
    if (Bool()) m.plan = Plan();
    return wire::Peer{std::move(m)};
  }
  wire::TxRequest TxRequest() {
    return wire::TxRequest{U64(), Enum(walfmt::Workload::kBank, walfmt::Workload::kMixed), U64()};
  }
  wire::TxResult TxResult() {
    wire::TxResult r;
    r.request_id = U64();
    r.tx = Tx();
    r.outcome = Enum(wire::Outcome::kCommitted, wire::Outcome::kInDoubt);
    if (r.outcome == wire::Outcome::kAborted) r.reason = Enum(AbortReason::kConflict, AbortReason::kParticipantLost);
    if (r.outcome == wire::Outcome::kRefused) r.message = "refused: " + Str();
    for (size_t i = Len(5); i > 0; --i) r.reads[Str()] = OptStr();
    r.writes = Writes();
    r.commit_time_us = U64();
    return r;
  }
  wire::CutReply CutReply() {
    wire::CutReply c;
    c.ok = Bool();
    c.cut_id = U64();
    if (c.ok) {
      c.cut_id += c.cut_id == 0;
    } else {
      c.error = "no cut: " + Str();
    }
    return c;
  }
  wire::StatusReply StatusReply() { return wire::StatusReply{U32(), U32(), Bool(), U64(), U32(), U64()}; }
  wire::SnapshotReply SnapshotReply() {
    wire::SnapshotReply r;
    r.ok = Bool();
    if (r.ok) {
      r.name = "full-" + Str();
    } else {
      r.error = "no snapshot: " + Str();
    }
    return r;
  }
  wire::SnapshotStep SnapshotStep() {
    wire::SnapshotStep st;
    st.step = Enum(wire::SnapStep::kPause, wire::SnapStep::kFailed);
    st.round = U64();
    st.name = Str();
    st.at = walfmt::Lsn{U64(), U64()};
    st.fingerprint = U64();
    st.prune = Bool();
    st.deleted = U64();
    st.deleted_bytes = U64();
    if (st.step == wire::SnapStep::kFailed) st.error = "failed: " + Str();
    return st;
  }

  // A message of kind k (1 to 12).
  wire::Message Of(wire::Kind k) {
    switch (k) {
      case wire::Kind::kHello:
        return Hello();
      case wire::Kind::kPeer:
        return Peer();
      case wire::Kind::kTxRequest:
        return TxRequest();
      case wire::Kind::kTxResult:
        return TxResult();
      case wire::Kind::kCutRequest:
        return wire::CutRequest{};
      case wire::Kind::kCutReply:
        return CutReply();
      case wire::Kind::kStatusRequest:
        return wire::StatusRequest{};
      case wire::Kind::kStatusReply:
        return StatusReply();
      case wire::Kind::kShutdown:
        return wire::Shutdown{};
      case wire::Kind::kSnapshotRequest:
        return wire::SnapshotRequest{Str()};
      case wire::Kind::kSnapshotReply:
        return SnapshotReply();
      case wire::Kind::kSnapshotStep:
        return SnapshotStep();
    }
    return wire::Shutdown{};
  }
  wire::Message Any() { return Of(static_cast<wire::Kind>(rng.Range(1, 12))); }
};

constexpr wire::Kind kKinds[] = {wire::Kind::kHello,           wire::Kind::kPeer,          wire::Kind::kTxRequest,
                                 wire::Kind::kTxResult,        wire::Kind::kCutRequest,    wire::Kind::kCutReply,
                                 wire::Kind::kStatusRequest,   wire::Kind::kStatusReply,   wire::Kind::kShutdown,
                                 wire::Kind::kSnapshotRequest, wire::Kind::kSnapshotReply, wire::Kind::kSnapshotStep};

std::string Bytes(std::initializer_list<int> b) {
  std::string s;
  for (int x : b) s.push_back(static_cast<char>(x));
  return s;
}

std::string Framed(const std::string& payload) {
  std::string out;
  REQUIRE(wire::AppendFrame(out, payload).ok());
  return out;
}

// The decoder's error for `payload`, which must be refused as corruption.
std::string Refusal(const std::string& payload) {
  auto m = wire::Decode(payload);
  REQUIRE_FALSE(m.ok());
  CHECK(m.status().code() == ErrorCode::kCorruption);
  CHECK(m.status().message().find('\n') == std::string::npos);
  return m.status().message();
}

// Every payload of a stream, and the reader's state at the end.
struct Drained {
  std::vector<std::string> payloads;
  walfmt::Status error;  // from Next
};
void Drain(wire::FrameReader& r, Drained& d) {
  while (d.error.ok()) {
    auto n = r.Next();
    if (!n.ok()) {
      d.error = n.status();
      return;
    }
    if (!n->has_value()) return;
    d.payloads.push_back(std::move(**n));
  }
}

// A stream of `n` random messages' frames, and their payloads.
std::string RandomStream(Gen& g, size_t n, std::vector<std::string>& payloads) {
  std::string stream;
  for (size_t i = 0; i < n; ++i) {
    payloads.push_back(wire::Encode(g.Any()));
    REQUIRE(wire::AppendFrame(stream, payloads.back()).ok());
  }
  return stream;
}

}  // namespace

TEST_CASE("wire: every message kind round-trips with random contents, alone and framed", "[wire]") {
  for (wire::Kind kind : kKinds) {
    for (uint64_t seed = 1; seed <= 300; ++seed) {
      INFO(fmt::format("kind {} seed {}", wire::KindName(kind), seed));
      Gen g(seed * 16 + static_cast<uint64_t>(kind));
      const wire::Message m = g.Of(kind);
      REQUIRE(wire::KindOf(m) == kind);
      const std::string payload = wire::Encode(m);
      REQUIRE(static_cast<uint8_t>(payload[0]) == static_cast<uint8_t>(kind));
      auto back = wire::Decode(payload);
      INFO((back.ok() ? std::string() : back.status().message()));
      REQUIRE(back.ok());
      CHECK(*back == m);
      CHECK(wire::Encode(*back) == payload);

      wire::FrameReader r;
      r.Feed(Framed(payload));
      Drained d;
      Drain(r, d);
      REQUIRE(d.error.ok());
      REQUIRE(d.payloads.size() == 1);
      CHECK(d.payloads[0] == payload);
      CHECK(r.Finish().ok());
    }
  }
}

TEST_CASE("wire: a peer message carries its plan by value, without the oracle's recorded flag", "[wire]") {
  Gen g(7);
  sim::Msg m = g.Peer().msg;
  auto plan = std::make_shared<sim::TxPlan>(*g.Plan());
  plan->recorded = true;
  m.plan = plan;
  auto back = wire::DecodeAs<wire::Peer>(wire::Encode(wire::Peer{m}));
  REQUIRE(back.ok());
  REQUIRE(back->msg.plan);
  CHECK(back->msg.plan != m.plan);
  CHECK(wire::SamePlan(*back->msg.plan, *plan));
  CHECK_FALSE(back->msg.plan->recorded);

  // Equality looks at the plans' contents; a missing plan differs from any.
  sim::Msg other = m;
  auto changed = std::make_shared<sim::TxPlan>(*plan);
  changed->decider ^= 1;
  other.plan = changed;
  CHECK_FALSE(wire::Peer{m} == wire::Peer{other});
  other.plan = nullptr;
  CHECK_FALSE(wire::Peer{m} == wire::Peer{other});
  m.plan = nullptr;
  CHECK(wire::Peer{m} == wire::Peer{other});

  // DecodeAs refuses another kind.
  auto wrong = wire::DecodeAs<wire::Hello>(wire::Encode(wire::Shutdown{}));
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.status().message() == "wire: expected a Hello message, got a Shutdown");
}

TEST_CASE("wire: the bytes of a frame and of a Hello are the ones docs/wire.md gives", "[wire]") {
  const std::string shutdown = Framed(wire::Encode(wire::Shutdown{}));
  const uint32_t crc = walfmt::MaskCrc(walfmt::crc32c::Value("\x09", 1));
  std::string expect = Bytes({'W', 'C', 'N', 1, 1, 0, 0, 0});
  walfmt::PutU32(expect, crc);
  expect.push_back(9);
  CHECK(shutdown == expect);

  const wire::Hello h{0x0102030405060708ull, 3, 2, wire::Role::kPeer, 1};
  CHECK(wire::Encode(h) == Bytes({1, 8, 7, 6, 5, 4, 3, 2, 1, 3, 0, 0, 0, 2, 0, 0, 0, 1, 1, 0, 0, 0}));
}

TEST_CASE("wire: a payload cut short at any byte is refused, naming the byte", "[wire]") {
  CHECK(Refusal("") == "wire: empty payload (no message kind)");
  for (wire::Kind kind : kKinds) {
    for (uint64_t seed = 1; seed <= 20; ++seed) {
      Gen g(seed * 16 + static_cast<uint64_t>(kind));
      const std::string payload = wire::Encode(g.Of(kind));
      for (size_t n = 1; n < payload.size(); ++n) {
        INFO(fmt::format("kind {} seed {} cut to {} of {} bytes", wire::KindName(kind), seed, n, payload.size()));
        const std::string e = Refusal(payload.substr(0, n));
        CHECK(e.find(fmt::format("wire: {} message, payload byte ", wire::KindName(kind))) == 0);
        CHECK(e.find(" left") != std::string::npos);
      }
    }
  }
  // The exact message for one field.
  CHECK(Refusal(wire::Encode(wire::TxRequest{1, walfmt::Workload::kBank, 2}).substr(0, 14)) ==
        "wire: TxRequest message, payload byte 10: truncated: seed needs 8 bytes, 4 left");
}

TEST_CASE("wire: bytes after any message are refused", "[wire]") {
  for (wire::Kind kind : kKinds) {
    Gen g(static_cast<uint64_t>(kind));
    const std::string payload = wire::Encode(g.Of(kind));
    INFO(wire::KindName(kind));
    CHECK(Refusal(payload + "x") == fmt::format("wire: {} message, payload byte {}: 1 trailing bytes after the message",
                                                wire::KindName(kind), payload.size()));
  }
}

TEST_CASE("wire: unknown message kinds are refused", "[wire]") {
  CHECK(Refusal(Bytes({0})) == "wire: payload byte 0: unknown message kind 0 (known: 1 to 12)");
  CHECK(Refusal(Bytes({13, 1, 2})) == "wire: payload byte 0: unknown message kind 13 (known: 1 to 12)");
  CHECK(Refusal(Bytes({255})) == "wire: payload byte 0: unknown message kind 255 (known: 1 to 12)");
}

namespace {

// `payload` with byte `at` set to `v`, which must be refused with `error`.
void CheckByte(std::string payload, size_t at, int v, const std::string& error) {
  REQUIRE(at < payload.size());
  REQUIRE(wire::Decode(payload).ok());
  payload[at] = static_cast<char>(v);
  INFO(fmt::format("byte {} = {}", at, v));
  CHECK(Refusal(payload) == error);
}

sim::Msg EmptyPeer() {
  sim::Msg m;
  m.type = sim::MsgType::kPrepare;
  return m;
}

}  // namespace

TEST_CASE("wire: enum values, booleans and flag bits that mean nothing are refused", "[wire]") {
  const std::string hello = wire::Encode(wire::Hello{1, 2, 3, wire::Role::kPeer, 1});
  CheckByte(hello, 17, 0, "wire: Hello message, payload byte 17: bad role 0 (valid: 1 to 3)");
  CheckByte(hello, 17, 4, "wire: Hello message, payload byte 17: bad role 4 (valid: 1 to 3)");

  // A peer message: type at 1, flags at 34, pstate at 47, nstate at 48, the
  // counts at 49, 53, 57; a plan from 61, its flags at 73.
  sim::Msg m = EmptyPeer();
  m.plan = std::make_shared<sim::TxPlan>();
  const std::string peer = wire::Encode(wire::Peer{m});
  CheckByte(peer, 1, 0, "wire: Peer message, payload byte 1: bad message type 0 (valid: 1 to 21)");
  CheckByte(peer, 1, 22, "wire: Peer message, payload byte 1: bad message type 22 (valid: 1 to 21)");
  CheckByte(peer, 34, 0x0d, "wire: Peer message, payload byte 34: bad flags 0x0d (unknown bits 0x08)");
  CheckByte(peer, 47, 6, "wire: Peer message, payload byte 47: bad pstate 6 (valid: 0 to 5)");
  CheckByte(peer, 48, 4, "wire: Peer message, payload byte 48: bad nstate 4 (valid: 0 to 3)");
  CheckByte(peer, 73, 0x10, "wire: Peer message, payload byte 73: bad plan flags 0x10 (unknown bits 0x10)");

  sim::Msg v = EmptyPeer();
  v.values = {std::nullopt};
  CheckByte(wire::Encode(wire::Peer{v}), 61, 2, "wire: Peer message, payload byte 61: bad value 2 (0 or 1)");

  const std::string request = wire::Encode(wire::TxRequest{1, walfmt::Workload::kMixed, 2});
  CheckByte(request, 9, 0, "wire: TxRequest message, payload byte 9: bad workload 0 (valid: 1 to 3)");
  CheckByte(request, 9, 4, "wire: TxRequest message, payload byte 9: bad workload 4 (valid: 1 to 3)");

  // A result: outcome at 21; aborted: the reason at 22; committed with one
  // write: its op at 30.
  wire::TxResult r;
  r.writes = {walfmt::Write{walfmt::WriteOp::kPut, "k", "v"}};
  const std::string result = wire::Encode(r);
  CheckByte(result, 21, 0, "wire: TxResult message, payload byte 21: bad outcome 0 (valid: 1 to 4)");
  CheckByte(result, 21, 5, "wire: TxResult message, payload byte 21: bad outcome 5 (valid: 1 to 4)");
  CheckByte(result, 30, 0, "wire: TxResult message, payload byte 30: bad write op 0 (valid: 1 to 2)");
  CheckByte(result, 30, 3, "wire: TxResult message, payload byte 30: bad write op 3 (valid: 1 to 2)");
  r.outcome = wire::Outcome::kAborted;
  r.reason = AbortReason::kConflict;
  const std::string aborted = wire::Encode(r);
  CheckByte(aborted, 22, 0, "wire: TxResult message, payload byte 22: bad abort reason 0 (valid: 1 to 5)");
  CheckByte(aborted, 22, 6, "wire: TxResult message, payload byte 22: bad abort reason 6 (valid: 1 to 5)");

  CheckByte(wire::Encode(wire::CutReply{true, 5, ""}), 1, 2,
            "wire: CutReply message, payload byte 1: bad ok 2 (0 or 1)");
  CheckByte(wire::Encode(wire::StatusReply{1, 2, true, 3, 4, 5}), 9, 0xff,
            "wire: StatusReply message, payload byte 9: bad ready 255 (0 or 1)");
  CheckByte(wire::Encode(wire::SnapshotReply{true, "full-1", ""}), 1, 2,
            "wire: SnapshotReply message, payload byte 1: bad ok 2 (0 or 1)");
  // A step: the step at 1, prune at 38 (after round, an empty name, segment,
  // offset and fingerprint).
  const std::string step = wire::Encode(wire::SnapshotStep{});
  CheckByte(step, 1, 0, "wire: SnapshotStep message, payload byte 1: bad step 0 (valid: 1 to 8)");
  CheckByte(step, 1, 9, "wire: SnapshotStep message, payload byte 1: bad step 9 (valid: 1 to 8)");
  CheckByte(step, 38, 2, "wire: SnapshotStep message, payload byte 38: bad prune 2 (0 or 1)");
}

TEST_CASE("wire: a snapshot step carries an error exactly when it is a failure", "[wire]") {
  wire::SnapshotStep failed;
  failed.step = wire::SnapStep::kFailed;
  failed.error = "x";
  std::string p = wire::Encode(failed);
  REQUIRE(wire::Decode(p).ok());
  // The error is the last field: its length at size - 5, its one byte last.
  const size_t len_at = p.size() - 5;
  std::string empty = p.substr(0, p.size() - 1);
  empty[len_at] = 0;
  CHECK(Refusal(empty) == fmt::format("wire: SnapshotStep message, payload byte {}: empty error message", len_at));
  std::string taken = p;
  taken[1] = static_cast<char>(wire::SnapStep::kTaken);
  CHECK(Refusal(taken) ==
        fmt::format("wire: SnapshotStep message, payload byte {}: an error message on a step that is not a failure",
                    len_at));
  // A reply that is ok names the snapshot.
  CHECK(Refusal(Bytes({11, 1, 0, 0, 0, 0})) == "wire: SnapshotReply message, payload byte 2: empty snapshot name");
  CHECK(Refusal(Bytes({11, 0, 0, 0, 0, 0})) == "wire: SnapshotReply message, payload byte 2: empty error message");
}

TEST_CASE("wire: a Hello's node must fit its role", "[wire]") {
  const auto refused = [](uint32_t node, wire::Role role) {
    const std::string e = Refusal(wire::Encode(wire::Hello{1, node, 0, role, 1}));
    CHECK(e.find("wire: Hello message, payload byte 9: node 0x") == 0);
    CHECK(e.find("does not match role") != std::string::npos);
  };
  refused(wire::kClient, wire::Role::kPeer);
  refused(wire::kControl, wire::Role::kPeer);
  refused(sim::kNoNode, wire::Role::kPeer);
  refused(0, wire::Role::kClient);
  refused(wire::kControl, wire::Role::kClient);
  refused(7, wire::Role::kControl);
  refused(wire::kClient, wire::Role::kControl);
  CHECK(wire::Decode(wire::Encode(wire::Hello{1, 0, 0, wire::Role::kPeer, 1})).ok());
  CHECK(wire::Decode(wire::Encode(wire::Hello{1, wire::kClient, 0, wire::Role::kClient, 1})).ok());
  CHECK(wire::Decode(wire::Encode(wire::Hello{1, wire::kControl, 0, wire::Role::kControl, 1})).ok());
}

TEST_CASE("wire: a result's reads ascend and refusals and errors say why", "[wire]") {
  // Two reads whose keys are swapped on the wire ("b" then "a").
  wire::TxResult r;
  r.reads = {{"a", std::nullopt}, {"b", std::string("1")}};
  std::string p = wire::Encode(r);
  const size_t a = p.find('a');
  const size_t b = p.find('b');
  std::swap(p[a], p[b]);
  CHECK(Refusal(p) == fmt::format("wire: TxResult message, payload byte {}: read key 1 is not after the one before it "
                                  "(keys ascend, each once)",
                                  b - 4));
  p[b] = 'b';  // "b", "b": twice
  CHECK(Refusal(p).find("read key 1 is not after") != std::string::npos);

  wire::TxResult refused;
  refused.outcome = wire::Outcome::kRefused;
  refused.message = "x";
  std::string e = wire::Encode(refused);
  e.erase(26, 1);  // the message's one byte
  e[22] = 0;       // and its length
  CHECK(Refusal(e) == "wire: TxResult message, payload byte 22: empty refusal message");

  CHECK(Refusal(Bytes({6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})) ==
        "wire: CutReply message, payload byte 10: empty error message");
  // An inconsistent cut keeps its id on the wire; an ok reply names one.
  const wire::CutReply inconsistent{false, 7, "cut 7 is inconsistent"};
  auto back = wire::DecodeAs<wire::CutReply>(wire::Encode(inconsistent));
  REQUIRE(back.ok());
  CHECK(*back == inconsistent);
  CHECK(Refusal(Bytes({6, 1, 0, 0, 0, 0, 0, 0, 0, 0})) ==
        "wire: CutReply message, payload byte 2: cut id 0 in a reply that is ok");
}

TEST_CASE("wire: a count or length beyond the bytes left is refused before anything is allocated", "[wire]") {
  const auto with_count = [](std::string p, size_t at, uint32_t n) {
    REQUIRE(wire::Decode(p).ok());
    for (int i = 0; i < 4; ++i) p[at + i] = static_cast<char>(n >> (8 * i));
    return p;
  };
  // Peer: participants at 49, keys at 53, values at 57 (of an empty message).
  const std::string peer = wire::Encode(wire::Peer{EmptyPeer()});
  CHECK(Refusal(with_count(peer, 49, 0xFFFFFFFFu)) ==
        "wire: Peer message, payload byte 49: participants count 4294967295 needs at least 17179869180 bytes, 8 left");
  CHECK(Refusal(with_count(peer, 53, 2)) ==
        "wire: Peer message, payload byte 53: keys count 2 needs at least 8 bytes, 4 left");
  CHECK(Refusal(with_count(peer, 57, 1)) ==
        "wire: Peer message, payload byte 57: values count 1 needs at least 1 bytes, 0 left");
  CHECK(Refusal(with_count(peer, 57, 0xFFFFFFFFu)).find("values count 4294967295 needs") != std::string::npos);

  // A plan's lists (an empty plan from 61: tx, flags, near incarnation, then
  // participants at 78, primaries at 82, writes by node at 86, forward lists
  // at 90, forwarder at 94).
  sim::Msg m = EmptyPeer();
  m.plan = std::make_shared<sim::TxPlan>();
  const std::string planned = wire::Encode(wire::Peer{m});
  for (const auto& [at, name] : {std::pair<size_t, const char*>{78, "plan participants"},
                                 {82, "plan primaries"},
                                 {86, "plan writes by node"},
                                 {90, "plan forward lists"},
                                 {94, "plan forwarder"}}) {
    INFO(name);
    CHECK(Refusal(with_count(planned, at, 0x40000000u))
              .find(fmt::format("payload byte {}: {} count 1073741824 needs at least", at, name)) != std::string::npos);
  }

  // A result: reads at 22, writes at 26 (committed, nothing read or written).
  const std::string result = wire::Encode(wire::TxResult{});
  CHECK(Refusal(with_count(result, 22, 3)) ==
        "wire: TxResult message, payload byte 22: reads count 3 needs at least 15 bytes, 12 left");
  CHECK(Refusal(with_count(result, 26, 1)) ==
        "wire: TxResult message, payload byte 26: writes count 1 needs at least 9 bytes, 8 left");

  // A string's length.
  std::string refused = wire::Encode(wire::TxResult{1, {}, wire::Outcome::kRefused, {}, "no", {}, {}, 0});
  CHECK(Refusal(with_count(refused, 22, 0xFFFFFFF0u)) ==
        "wire: TxResult message, payload byte 22: refusal message length 4294967280 is more than the 18 bytes left");
}

TEST_CASE("wire: AppendFrame refuses a payload over the limit and appends nothing", "[wire]") {
  std::string out = "x";
  const auto s = wire::AppendFrame(out, std::string(101, 'p'), 100);
  REQUIRE_FALSE(s.ok());
  CHECK(s.code() == ErrorCode::kInvalidArgument);
  CHECK(s.message() == "wire: a payload of 101 bytes is over the frame limit of 100 bytes");
  CHECK(out == "x");
  CHECK(wire::AppendFrame(out, std::string(100, 'p'), 100).ok());
  CHECK(out.size() == 1 + 12 + 100);
}

TEST_CASE("wire: the frame reader gives the same frames fed one byte at a time or in random chunks", "[wire]") {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    INFO(fmt::format("seed {}", seed));
    Gen g(seed);
    std::vector<std::string> payloads;
    const std::string stream = RandomStream(g, 1 + g.rng.Below(12), payloads);

    wire::FrameReader bytewise;
    Drained one;
    for (char c : stream) {
      bytewise.Feed(std::string_view(&c, 1));
      Drain(bytewise, one);
    }
    REQUIRE(one.error.ok());
    CHECK(one.payloads == payloads);
    CHECK(bytewise.Finish().ok());
    CHECK(bytewise.offset() == stream.size());

    wire::FrameReader chunked;
    Drained some;
    for (size_t at = 0; at < stream.size();) {
      const size_t n = std::min<size_t>(stream.size() - at, 1 + g.rng.Below(g.Bool() ? 8 : 200));
      chunked.Feed(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(stream.data()) + at, n));
      at += n;
      if (g.rng.Below(3) != 0) Drain(chunked, some);
    }
    Drain(chunked, some);
    REQUIRE(some.error.ok());
    CHECK(some.payloads == payloads);
    CHECK(chunked.Finish().ok());
    CHECK(chunked.fed() == stream.size());
  }
}

TEST_CASE("wire: a stream that ends inside a frame is truncated, at every byte", "[wire]") {
  Gen g(11);
  std::vector<std::string> payloads;
  const std::string stream = RandomStream(g, 4, payloads);
  std::vector<size_t> starts = {0};  // frame boundaries
  for (const auto& p : payloads) starts.push_back(starts.back() + wire::kFrameHeaderBytes + p.size());
  for (size_t n = 0; n <= stream.size(); ++n) {
    INFO(fmt::format("stream cut to {} of {} bytes", n, stream.size()));
    wire::FrameReader r;
    r.Feed(stream.substr(0, n));
    Drained d;
    Drain(r, d);
    REQUIRE(d.error.ok());
    const size_t frames = static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), n) - starts.begin()) - 1;
    CHECK(d.payloads == std::vector<std::string>(payloads.begin(), payloads.begin() + frames));
    const auto end = r.Finish();
    if (n == starts[frames]) {
      CHECK(end.ok());
      continue;
    }
    REQUIRE_FALSE(end.ok());
    CHECK(end.code() == ErrorCode::kCorruption);
    const size_t in = n - starts[frames];
    if (in < wire::kFrameHeaderBytes) {
      CHECK(end.message() == fmt::format("wire: stream byte {}: truncated: the stream ends {} bytes into the 12-byte "
                                         "header of the frame at byte {}",
                                         n, in, starts[frames]));
    } else {
      CHECK(end.message() == fmt::format("wire: stream byte {}: truncated: the frame at byte {} has {} of its {} "
                                         "payload bytes when the stream ends",
                                         n, starts[frames], in - 12, payloads[frames].size()));
    }
  }
}

TEST_CASE("wire: Finish with a whole frame left unread is the caller's mistake", "[wire]") {
  wire::FrameReader r;
  r.Feed(Framed("\x09") + Framed("\x07"));
  REQUIRE(r.Next().ok());
  const auto s = r.Finish();
  CHECK(s.code() == ErrorCode::kInvalidArgument);
  CHECK(s.message() == "wire: Finish with the frame at byte 13 not yet read: call Next until it asks for more");
  REQUIRE(r.Next().ok());
  CHECK(r.Finish().ok());
}

TEST_CASE("wire: a flipped bit in a frame's checksum or payload is a checksum mismatch at its offset", "[wire]") {
  Gen g(5);
  std::vector<std::string> payloads;
  const std::string stream = RandomStream(g, 3, payloads);
  const size_t second = wire::kFrameHeaderBytes + payloads[0].size();
  const size_t end = second + wire::kFrameHeaderBytes + payloads[1].size();
  for (size_t at = second + 8; at < end; ++at) {
    for (int bit = 0; bit < 8; ++bit) {
      INFO(fmt::format("byte {} bit {}", at, bit));
      std::string s = stream;
      s[at] = static_cast<char>(s[at] ^ (1 << bit));
      wire::FrameReader r;
      r.Feed(s);
      Drained d;
      Drain(r, d);
      CHECK(d.payloads == std::vector<std::string>{payloads[0]});
      REQUIRE_FALSE(d.error.ok());
      CHECK(d.error.code() == ErrorCode::kCorruption);
      CHECK(d.error.message().find(fmt::format("wire: stream byte {}: frame at byte {}: payload checksum mismatch",
                                               second + 8, second)) == 0);
      // The error is final: more bytes are not kept, and more calls give it again.
      r.Feed(Framed("\x09"));
      CHECK(r.fed() == s.size());
      CHECK(r.Next().status().message() == d.error.message());
      CHECK(r.Finish().message() == d.error.message());
    }
  }
}

TEST_CASE("wire: a bad magic or version is refused at its offset", "[wire]") {
  const std::string frame = Framed(wire::Encode(wire::Shutdown{}));
  const auto refused = [&](std::string s, size_t at, int bit) {
    s[frame.size() + at] = static_cast<char>(s[frame.size() + at] ^ (1 << bit));
    wire::FrameReader r;
    r.Feed(s);
    Drained d;
    Drain(r, d);
    CHECK(d.payloads.size() == 1);
    REQUIRE_FALSE(d.error.ok());
    return d.error.message();
  };
  for (size_t at = 0; at < 3; ++at) {
    for (int bit = 0; bit < 8; ++bit) {
      CHECK(refused(frame + frame, at, bit).find(fmt::format("wire: stream byte {}: bad magic 0x", frame.size())) == 0);
    }
  }
  CHECK(refused(frame + frame, 3, 1) ==
        "wire: stream byte 13: frame of layout version 3, this build reads version 1 (bad magic 0x034e4357)");
  CHECK(refused(frame + "HTTP/1.1 200 OK\r\n", 0, 0) ==
        "wire: stream byte 13: bad magic 0x50545449 (expected 0x014e4357): not a walcut node frame, or out of step");
}

TEST_CASE("wire: a frame longer than the limit is refused from its header alone", "[wire]") {
  for (uint32_t limit : {0u, 100u, wire::kMaxPayloadBytes}) {
    INFO(fmt::format("limit {}", limit));
    std::string ok;
    REQUIRE(wire::AppendFrame(ok, std::string(limit, 'x'), limit).ok());
    wire::FrameReader r(limit);
    r.Feed(ok);
    // Only the header of a frame one byte over: refused before its payload.
    std::string over = Bytes({'W', 'C', 'N', 1});
    walfmt::PutU32(over, limit + 1);
    walfmt::PutU32(over, 0);
    r.Feed(over);
    Drained d;
    Drain(r, d);
    CHECK(d.payloads.size() == 1);
    REQUIRE_FALSE(d.error.ok());
    CHECK(d.error.message() == fmt::format("wire: stream byte {}: frame at byte {} declares a payload of {} bytes, "
                                           "over the limit of {} bytes",
                                           ok.size() + 4, ok.size(), limit + 1, limit));
  }
  // The default limit is 16 MiB; the largest length is refused too.
  wire::FrameReader r;
  std::string huge = Bytes({'W', 'C', 'N', 1, -1, -1, -1, -1, 0, 0, 0, 0});
  r.Feed(huge);
  CHECK(
      r.Next().status().message() ==
      "wire: stream byte 4: frame at byte 0 declares a payload of 4294967295 bytes, over the limit of 16777216 bytes");
}
