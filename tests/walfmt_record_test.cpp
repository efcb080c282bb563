// Record payload codec (record.h) and the small parsers next to it: every type
// round-trips; every truncation, every trailing byte and every oversized count
// is rejected with a message and without a large allocation; TxId, Lsn and
// record type names parse exactly what they print.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "walfmt/bytes.h"
#include "walfmt/lsn.h"
#include "walfmt/record.h"
#include "walfmt/record_text.h"

// --- Allocation tracking --------------------------------------------------
// "Counts are checked against the bytes that remain before anything is
// allocated" is only testable by watching allocations: while a scope is
// active, the largest single request is recorded. Under AddressSanitizer the
// replacement is left out (ASan owns operator new there): the messages are
// still checked, the allocation sizes only in the normal build.
#if defined(__SANITIZE_ADDRESS__)
#define WALFMT_TEST_TRACK_ALLOC 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define WALFMT_TEST_TRACK_ALLOC 0
#endif
#endif
#ifndef WALFMT_TEST_TRACK_ALLOC
#define WALFMT_TEST_TRACK_ALLOC 1
#endif

namespace {
std::atomic<bool> g_track_alloc{false};
std::atomic<size_t> g_max_alloc{0};

[[maybe_unused]] void NoteAlloc(size_t n) {  // unused under ASan
  if (!g_track_alloc.load(std::memory_order_relaxed)) return;
  size_t cur = g_max_alloc.load(std::memory_order_relaxed);
  while (n > cur && !g_max_alloc.compare_exchange_weak(cur, n)) {
  }
}

// Largest single allocation made while running `f` (0 when not tracked).
template <class F>
size_t MaxAllocDuring(F&& f) {
  g_max_alloc = 0;
  g_track_alloc = true;
  f();
  g_track_alloc = false;
  return g_max_alloc.load();
}
}  // namespace

#if WALFMT_TEST_TRACK_ALLOC
namespace {
// Out of line so that GCC does not pair the inlined malloc/free with
// new/delete (-Wmismatched-new-delete): they are a matched pair here.
[[gnu::noinline]] void* RawAlloc(size_t n) {
  NoteAlloc(n);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
[[gnu::noinline]] void RawFree(void* p) noexcept { std::free(p); }
}  // namespace
void* operator new(size_t n) { return RawAlloc(n); }
void* operator new[](size_t n) { return RawAlloc(n); }
void operator delete(void* p) noexcept { RawFree(p); }
void operator delete[](void* p) noexcept { RawFree(p); }
void operator delete(void* p, size_t) noexcept { RawFree(p); }
void operator delete[](void* p, size_t) noexcept { RawFree(p); }
#endif

namespace {

using namespace walfmt;

std::span<const uint8_t> Bytes(const std::string& s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }

std::string Encode(const Record& r) {
  std::string out;
  const Status st = EncodePayload(r, out);
  INFO(st.message());
  REQUIRE(st.ok());
  return out;
}

std::string RandomString(std::mt19937_64& rng, size_t max_len) {
  std::string s(rng() % (max_len + 1), '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

std::vector<uint32_t> RandomNodes(std::mt19937_64& rng, size_t max_n) {
  std::vector<uint32_t> v(rng() % (max_n + 1));
  for (auto& x : v) x = static_cast<uint32_t>(rng());
  return v;
}

TxId RandomTx(std::mt19937_64& rng) { return TxId{static_cast<uint32_t>(rng()), rng()}; }

Record RandomRecord(std::mt19937_64& rng, size_t type_index) {
  switch (type_index) {
    case 0: {
      TxData r{RandomTx(rng), {}};
      r.writes.resize(rng() % 6);
      for (auto& w : r.writes) {
        w.op = rng() % 3 == 0 ? WriteOp::kDelete : WriteOp::kPut;
        w.key = RandomString(rng, 40);
        if (w.op == WriteOp::kPut) w.value = RandomString(rng, 200);
      }
      return r;
    }
    case 1:
      return TxPrepare{RandomTx(rng), rng(), RandomNodes(rng, 8)};
    case 2:
      return TxCommit{RandomTx(rng), rng(), rng(), static_cast<uint16_t>(rng()), RandomNodes(rng, 8)};
    case 3:
      return TxRollback{RandomTx(rng), rng(), static_cast<uint16_t>(rng()), RandomNodes(rng, 8)};
    case 4:
      return CutStart{rng(), rng()};
    case 5: {
      CutFinish r{rng(), rng(), {}, {}};
      r.before.resize(rng() % 5);
      r.after.resize(rng() % 5);
      for (auto& t : r.before) t = RandomTx(rng);
      for (auto& t : r.after) t = RandomTx(rng);
      return r;
    }
    case 6:
      return CutAbort{rng(), rng(), static_cast<CutAbortReason>(1 + rng() % 4), RandomString(rng, 60)};
    case 7:
      return Snapshot{RandomString(rng, 30), rng(), rng()};
    default:
      return NodeStart{static_cast<uint32_t>(rng()), rng()};
  }
}

// One representative of every type, with edge values where they matter.
std::vector<Record> EveryType() {
  return {
      TxData{{1, 2},
             {{WriteOp::kPut, "k", "v"},
              {WriteOp::kDelete, "gone", ""},
              {WriteOp::kPut, "", ""},
              {WriteOp::kPut, std::string("\0bin\xff", 5), std::string(300, 'x')}}},
      TxData{{0, 0}, {}},
      TxPrepare{{3, 4}, 123456789, {0, 1, 2}},
      TxPrepare{{3, 5}, 0, {}},
      TxCommit{{5, 6}, 7, 8, kTxFlagOnePhase | kTxFlagRecovered, {4, 9}},
      TxRollback{{7, 8}, 9, kTxFlagRecovered, {1}},
      CutStart{42, 1000},
      CutFinish{43, 2000, {{1, 1}, {2, 2}}, {{3, 3}}},
      CutFinish{44, 0, {}, {}},
      CutAbort{45, 3000, CutAbortReason::kParticipantLost, "node 3 lost"},
      CutAbort{46, 0, CutAbortReason::kNodeRestart, ""},
      Snapshot{"base-0001", 4000, 0xDEADBEEFCAFEF00Dull},
      Snapshot{"", 0, 0},
      NodeStart{3, 5000},
  };
}

std::string TypeName(const Record& r) { return std::string(RecordTypeName(TypeOf(r))); }

}  // namespace

TEST_CASE("record: TypeOf, names and type codes agree", "[record]") {
  const std::vector<Record> recs = EveryType();
  std::vector<std::string> names;
  for (size_t i = 0; i < std::variant_size_v<Record>; ++i) {
    std::mt19937_64 rng(i);
    const Record r = RandomRecord(rng, i);
    CHECK(r.index() == i);
    CHECK(static_cast<uint16_t>(TypeOf(r)) == i + 1);
    names.push_back(TypeName(r));
  }
  CHECK(names == std::vector<std::string>{"TX_DATA", "TX_PREPARE", "TX_COMMIT", "TX_ROLLBACK", "CUT_START",
                                          "CUT_FINISH", "CUT_ABORT", "SNAPSHOT", "NODE_START"});
  CHECK(RecordTypeName(RecordType::kInvalid) == "INVALID");
  CHECK(RecordTypeName(static_cast<RecordType>(10)) == "UNKNOWN");
  CHECK(RecordTypeName(static_cast<RecordType>(200)) == "UNKNOWN");
}

TEST_CASE("record: every type round-trips", "[record]") {
  for (const Record& r : EveryType()) {
    INFO(TypeName(r) << " " << Describe(r));
    const std::string enc = Encode(r);
    auto dec = DecodePayload(TypeOf(r), Bytes(enc));
    INFO(dec.status().message());
    REQUIRE(dec.ok());
    CHECK(dec.value() == r);
    // Encoding appends: a prefix already in `out` is kept.
    std::string out = "prefix";
    REQUIRE(EncodePayload(r, out).ok());
    CHECK(out == "prefix" + enc);
  }
}

TEST_CASE("record: exact payload layout of a TX_COMMIT", "[record]") {
  // Pins the byte layout (FORMAT.md): a change here is a format change.
  const std::string enc = Encode(TxCommit{{0x01020304, 0x05}, 0x06, 0x07, 0x0102, {9, 10}});
  const std::string want = std::string("\x04\x03\x02\x01", 4) + std::string("\x05\0\0\0\0\0\0\0", 8) +
                           std::string("\x06\0\0\0\0\0\0\0", 8) + std::string("\x07\0\0\0\0\0\0\0", 8) +
                           std::string("\x02\x01", 2) + std::string("\x02\0", 2) + std::string("\x09\0\0\0", 4) +
                           std::string("\x0a\0\0\0", 4);
  CHECK(enc == want);
}

TEST_CASE("record: random records round-trip", "[record]") {
  const uint64_t seed = 0x5EED0001;
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 3000; ++i) {
    const Record r = RandomRecord(rng, rng() % std::variant_size_v<Record>);
    INFO("record " << i << ": " << TypeName(r) << " " << Describe(r));
    const std::string enc = Encode(r);
    auto dec = DecodePayload(TypeOf(r), Bytes(enc));
    INFO(dec.status().message());
    REQUIRE(dec.ok());
    REQUIRE(dec.value() == r);
  }
}

TEST_CASE("record: every truncation of every payload is rejected", "[record]") {
  const uint64_t seed = 0x5EED0002;
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  std::vector<Record> recs = EveryType();
  for (int i = 0; i < 200; ++i) recs.push_back(RandomRecord(rng, rng() % std::variant_size_v<Record>));
  for (const Record& r : recs) {
    const std::string enc = Encode(r);
    const std::string prefix = TypeName(r) + " payload: ";
    for (size_t len = 0; len < enc.size(); ++len) {
      INFO(TypeName(r) << " of " << enc.size() << " bytes cut to " << len);
      // A copy of exactly `len` bytes, so ASan sees any read past the end.
      const std::vector<uint8_t> cut(enc.begin(), enc.begin() + static_cast<ptrdiff_t>(len));
      auto dec = DecodePayload(TypeOf(r), {cut.data(), cut.size()});
      REQUIRE_FALSE(dec.ok());
      REQUIRE(dec.status().code() == ErrorCode::kCorruption);
      REQUIRE(dec.status().message().rfind(prefix, 0) == 0);
      REQUIRE(dec.status().message().size() > prefix.size());
    }
  }
}

TEST_CASE("record: trailing bytes are rejected", "[record]") {
  for (const Record& r : EveryType()) {
    for (size_t extra : {1u, 2u, 100u}) {
      INFO(TypeName(r) << " + " << extra);
      const std::string enc = Encode(r) + std::string(extra, '\0');
      auto dec = DecodePayload(TypeOf(r), Bytes(enc));
      REQUIRE_FALSE(dec.ok());
      CHECK(dec.status().code() == ErrorCode::kCorruption);
      CHECK(dec.status().message() ==
            fmt::format("{} payload: {} trailing bytes after the last field", TypeName(r), extra));
    }
  }
}

TEST_CASE("record: exact messages for short fields", "[record]") {
  struct Case {
    RecordType type;
    std::string payload;
    std::string message;
  };
  std::string tx12(12, '\x01');
  std::string u64(8, '\0');
  const std::vector<Case> cases = {
      {RecordType::kTxData, "", "TX_DATA payload: TX_DATA: transaction id cut short"},
      {RecordType::kTxData, tx12 + std::string("\x01\0", 2), "TX_DATA payload: write count cut short"},
      {RecordType::kTxPrepare, tx12 + u64 + "\x01", "TX_PREPARE payload: participant count cut short"},
      {RecordType::kTxCommit, tx12 + "\x01\x02\x03", "TX_COMMIT payload: marker cut short"},
      {RecordType::kTxCommit, tx12 + u64 + u64 + "\x01", "TX_COMMIT payload: flags cut short"},
      {RecordType::kTxRollback, tx12, "TX_ROLLBACK payload: time cut short"},
      {RecordType::kCutStart, u64, "CUT_START payload: time cut short"},
      {RecordType::kCutFinish, u64 + u64 + std::string("\0\0\0\0", 4) + "\x01",
       "CUT_FINISH payload: after count cut short"},
      {RecordType::kCutAbort, u64 + u64 + "\x01", "CUT_ABORT payload: reason cut short"},
      {RecordType::kSnapshot, std::string("\x02\0", 2) + "ab" + "\x01", "SNAPSHOT payload: time cut short"},
      {RecordType::kNodeStart, "\x01\x02\x03", "NODE_START payload: incarnation cut short"},
      // Inside TX_DATA writes.
      // (9 bytes remain after the count, enough for the 7-byte minimum of one write.)
      {RecordType::kTxData, tx12 + std::string("\x01\0\0\0", 4) + "\x01" + std::string("\x09\0", 2) + "abcdef",
       "TX_DATA payload: key of 9 bytes, 6 remain"},
      {RecordType::kTxData,
       tx12 + std::string("\x01\0\0\0", 4) + "\x01" + std::string("\x01\0", 2) + "k" + std::string("\x09\0\0\0", 4) +
           "vvvv",
       "TX_DATA payload: value of 9 bytes, 4 remain"},
  };
  for (const Case& c : cases) {
    INFO(RecordTypeName(c.type) << " payload of " << c.payload.size() << " bytes");
    auto dec = DecodePayload(c.type, Bytes(c.payload));
    REQUIRE_FALSE(dec.ok());
    CHECK(dec.status().code() == ErrorCode::kCorruption);
    CHECK(dec.status().message() == c.message);
  }
}

TEST_CASE("record: counts larger than the remaining bytes are rejected before allocation", "[record]") {
  struct Case {
    RecordType type;
    std::string payload;
    std::string message;
  };
  std::string tx12(12, '\x01');
  std::string u64(8, '\0');
  std::string ff32("\xff\xff\xff\xff", 4);
  const std::vector<Case> cases = {
      {RecordType::kTxData, tx12 + ff32,
       "TX_DATA payload: write count 4294967295 cannot fit in the 0 bytes that remain"},
      // 3 writes need at least 21 bytes; 20 remain.
      {RecordType::kTxData, tx12 + std::string("\x03\0\0\0", 4) + std::string(20, '\x01'),
       "TX_DATA payload: write count 3 cannot fit in the 20 bytes that remain"},
      {RecordType::kTxPrepare, tx12 + u64 + std::string("\x00\x04", 2),
       "TX_PREPARE payload: participant count 1024 needs 4096 bytes, 0 remain"},
      {RecordType::kTxPrepare, tx12 + u64 + std::string("\x01\x04", 2),
       "TX_PREPARE payload: participant count 1025 exceeds the limit of 1024"},
      {RecordType::kTxCommit, tx12 + u64 + u64 + std::string(2, '\0') + std::string("\xff\xff", 2),
       "TX_COMMIT payload: participant count 65535 exceeds the limit of 1024"},
      {RecordType::kTxRollback, tx12 + u64 + std::string(2, '\0') + std::string("\x03\0", 2) + std::string(11, '\0'),
       "TX_ROLLBACK payload: participant count 3 needs 12 bytes, 11 remain"},
      {RecordType::kCutFinish, u64 + u64 + ff32,
       "CUT_FINISH payload: before count 4294967295 needs 51539607540 bytes, 0 remain"},
      {RecordType::kCutFinish, u64 + u64 + std::string(4, '\0') + ff32,
       "CUT_FINISH payload: after count 4294967295 needs 51539607540 bytes, 0 remain"},
      {RecordType::kCutAbort, u64 + u64 + std::string("\x01\0", 2) + std::string("\xff\xff", 2),
       "CUT_ABORT payload: detail of 65535 bytes, 0 remain"},
      {RecordType::kSnapshot, std::string("\xff\xff", 2) + "abc",
       "SNAPSHOT payload: snapshot name of 65535 bytes, 3 remain"},
      {RecordType::kTxData, tx12 + std::string("\x01\0\0\0", 4) + "\x01" + std::string("\0\0", 2) + ff32,
       "TX_DATA payload: value of 4294967295 bytes, 0 remain"},
  };
  for (const Case& c : cases) {
    INFO(RecordTypeName(c.type) << " payload of " << c.payload.size() << " bytes");
    std::optional<Result<Record>> dec;
    const size_t max_alloc = MaxAllocDuring([&] { dec.emplace(DecodePayload(c.type, Bytes(c.payload))); });
    REQUIRE_FALSE(dec->ok());
    CHECK(dec->status().code() == ErrorCode::kCorruption);
    CHECK(dec->status().message() == c.message);
    // Nothing sized by the bad count: only the message and small objects.
    CHECK(max_alloc < 4096);
  }
#if WALFMT_TEST_TRACK_ALLOC
  // The tracker works: a legitimate large payload does allocate its size.
  const std::string big = Encode(TxData{{1, 1}, {{WriteOp::kPut, "k", std::string(100000, 'v')}}});
  const size_t seen = MaxAllocDuring([&] { (void)DecodePayload(RecordType::kTxData, Bytes(big)); });
  CHECK(seen >= 100000);
#endif
}

TEST_CASE("record: invalid write ops and undecodable types", "[record]") {
  const std::string tx12(12, '\x01');
  for (uint8_t op : {uint8_t{0}, uint8_t{3}, uint8_t{255}}) {
    INFO("op " << int(op));
    const std::string p = tx12 + std::string("\x02\0\0\0", 4) + std::string("\x01\0\0\0\0\0\0", 7) +
                          std::string(1, static_cast<char>(op)) + std::string(6, '\0');
    auto dec = DecodePayload(RecordType::kTxData, Bytes(p));
    REQUIRE_FALSE(dec.ok());
    CHECK(dec.status().message() == fmt::format("TX_DATA payload: write 1 has invalid op {}", op));
  }
  const std::string enc = Encode(CutStart{1, 2});
  for (uint16_t t : {uint16_t{0}, uint16_t{10}, uint16_t{200}, uint16_t{0xFFFF}}) {
    INFO("type " << t);
    auto dec = DecodePayload(static_cast<RecordType>(t), Bytes(enc));
    REQUIRE_FALSE(dec.ok());
    CHECK(dec.status().code() == ErrorCode::kCorruption);
    CHECK(dec.status().message() == fmt::format("cannot decode record type {}", t));
  }
}

TEST_CASE("record: the encoder enforces the limits and leaves the output untouched", "[record]") {
  auto rejects = [](const Record& r, const std::string& message) {
    INFO(TypeName(r));
    std::string out = "keep";
    const Status st = EncodePayload(r, out);
    CHECK(st.code() == ErrorCode::kInvalidArgument);
    CHECK(st.message() == message);
    CHECK(out == "keep");
  };
  rejects(TxData{{1, 1}, {{WriteOp::kPut, std::string(kMaxKeyBytes + 1, 'k'), "v"}}},
          "key of 65536 bytes exceeds 65535");
  rejects(TxData{{1, 1}, {{WriteOp::kPut, "a", "b"}, {WriteOp::kInvalid, "k", ""}}}, "write with an invalid op");
  rejects(TxPrepare{{1, 1}, 0, std::vector<uint32_t>(kMaxParticipants + 1, 7)},
          "1025 participants exceed the limit of 1024");
  rejects(TxCommit{{1, 1}, 0, 0, 0, std::vector<uint32_t>(kMaxParticipants + 1, 7)},
          "1025 participants exceed the limit of 1024");
  rejects(TxRollback{{1, 1}, 0, 0, std::vector<uint32_t>(kMaxParticipants + 1, 7)},
          "1025 participants exceed the limit of 1024");
  rejects(CutAbort{1, 1, CutAbortReason::kOther, std::string(0x10000, 'd')},
          "cut abort detail longer than 65535 bytes");
  rejects(Snapshot{std::string(0x10000, 'n'), 0, 0}, "snapshot name longer than 65535 bytes");
  // 12 + 4 + (7 + 1 + 1048576) = 1048600 bytes of payload.
  rejects(TxData{{1, 1}, {{WriteOp::kPut, "k", std::string(kMaxRecordPayload, 'v')}}},
          "record payload of 1048600 bytes exceeds the limit of 1048576");

  // The largest legal values encode and decode.
  const Record at_limit = TxData{
      {1, 1},
      {{WriteOp::kPut, std::string(kMaxKeyBytes, 'k'), std::string(kMaxRecordPayload - 16 - 7 - kMaxKeyBytes, 'v')}}};
  const std::string enc = Encode(at_limit);
  CHECK(enc.size() == kMaxRecordPayload);
  auto dec = DecodePayload(RecordType::kTxData, Bytes(enc));
  REQUIRE(dec.ok());
  CHECK(dec.value() == at_limit);
  const Record many = TxPrepare{{1, 1}, 0, std::vector<uint32_t>(kMaxParticipants, 7)};
  auto dec2 = DecodePayload(RecordType::kTxPrepare, Bytes(Encode(many)));
  REQUIRE(dec2.ok());
  CHECK(dec2.value() == many);
}

TEST_CASE("record: TxId prints and parses", "[record]") {
  CHECK(TxId{1, 2}.ToString() == "1:2");
  CHECK(TxId{4294967295u, 18446744073709551615ull}.ToString() == "4294967295:18446744073709551615");
  for (const TxId t : {TxId{0, 0}, TxId{1, 2}, TxId{4294967295u, 18446744073709551615ull}, TxId{17, 1ull << 40}}) {
    TxId back{99, 99};
    INFO(t.ToString());
    REQUIRE(TxId::Parse(t.ToString(), back));
    CHECK(back == t);
  }
  for (const char* bad : {"", ":", "1:", ":2", "1", "a:1", "1:b", "1:2:3", "4294967296:1", "1:18446744073709551616",
                          " 1:2", "1:2 ", "-1:2", "1:-2", "+1:2", "1:+2", "0x1:2", "1;2"}) {
    INFO("'" << bad << "'");
    TxId out{7, 8};
    CHECK_FALSE(TxId::Parse(bad, out));
    CHECK(out == TxId{7, 8});  // untouched on failure
  }
  CHECK(TxId{1, 2} < TxId{1, 3});
  CHECK(TxId{1, 9} < TxId{2, 0});
  CHECK(TxIdHash{}(TxId{1, 2}) != TxIdHash{}(TxId{2, 1}));
}

TEST_CASE("record: TxId's readable form names the incarnation of a restarted node", "[record]") {
  // node/crash_restart.cpp: incarnation i starts at (i << 40) + 1.
  const TxId restarted{2, (uint64_t{1} << 40) + 215};
  CHECK(restarted.incarnation() == 1);
  CHECK(restarted.counter() == 215);
  CHECK(restarted.Readable() == "2@1:215");
  CHECK(restarted.ToString() == "2:1099511627991");  // the raw form JSON's "tx" keeps
  // Incarnation 0 reads as it always has.
  CHECK(TxId{2, 215}.Readable() == "2:215");
  CHECK(TxId{2, 215}.incarnation() == 0);
  CHECK(TxId{2, (uint64_t{1} << 40) - 1}.Readable() == "2:1099511627775");
  CHECK(TxId{4294967295u, ~uint64_t{0}}.Readable() == "4294967295@16777215:1099511627775");
  CHECK(TxId{3, uint64_t{7} << 40}.Readable() == "3@7:0");
  for (const TxId t : {TxId{0, 0}, TxId{2, 215}, restarted, TxId{3, uint64_t{7} << 40}, TxId{1, uint64_t{1} << 40},
                       TxId{4294967295u, ~uint64_t{0}}}) {
    INFO(t.ToString() << " / " << t.Readable());
    TxId back{99, 99};
    REQUIRE(TxId::Parse(t.Readable(), back));
    CHECK(back == t);
    back = TxId{99, 99};
    REQUIRE(TxId::Parse(t.ToString(), back));  // summaries and reports written before
    CHECK(back == t);
  }
  for (const char* bad : {"2@0:215", "2@:215", "@1:215", "2@1:", "2@1@1:5", "2@16777216:1", "2@1:1099511627776",
                          "2@-1:5", "2@1:-5", "2@ 1:5", "2@1:5 ", "2@1:2:3", "2:1@5"}) {
    INFO("'" << bad << "'");
    TxId out{7, 8};
    CHECK_FALSE(TxId::Parse(bad, out));
    CHECK(out == TxId{7, 8});
  }
  // dump's description of a record that names transactions of a restarted node.
  std::string desc;
  AppendDescription(desc, CutFinish{3, 0, {restarted, TxId{1, 9}}, {TxId{2, (uint64_t{2} << 40) + 1}}});
  INFO(desc);
  CHECK(desc.find("2@1:215,1:9") != std::string::npos);
  CHECK(desc.find("2@2:1") != std::string::npos);
  CHECK(desc.find("1099511627991") == std::string::npos);
}

TEST_CASE("record: ParseRecordType accepts the printed names", "[record]") {
  for (uint16_t v = 1; v <= kMaxKnownRecordType; ++v) {
    const auto t = static_cast<RecordType>(v);
    std::string lower(RecordTypeName(t));
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (const std::string& name : {std::string(RecordTypeName(t)), lower}) {
      INFO(name);
      RecordType out = RecordType::kInvalid;
      REQUIRE(ParseRecordType(name, out));
      CHECK(out == t);
    }
  }
  struct Alias {
    const char* name;
    RecordType type;
  };
  for (const Alias a : {Alias{"commit", RecordType::kTxCommit}, Alias{"Commit", RecordType::kTxCommit},
                        Alias{"DATA", RecordType::kTxData}, Alias{"prepare", RecordType::kTxPrepare},
                        Alias{"rollback", RecordType::kTxRollback}, Alias{"Tx_Rollback", RecordType::kTxRollback},
                        Alias{"cut_finish", RecordType::kCutFinish}, Alias{"snapshot", RecordType::kSnapshot},
                        Alias{"node_start", RecordType::kNodeStart}}) {
    INFO(a.name);
    RecordType out = RecordType::kInvalid;
    REQUIRE(ParseRecordType(a.name, out));
    CHECK(out == a.type);
  }
  for (const char* bad : {"", "invalid", "INVALID", "unknown", "start", "finish", "abort", "tx_", "tx", "commit ",
                          " commit", "txcommit", "tx-commit", "cut-start", "node", "tx_snapshot"}) {
    INFO("'" << bad << "'");
    RecordType out = RecordType::kCutAbort;
    CHECK_FALSE(ParseRecordType(bad, out));
    CHECK(out == RecordType::kCutAbort);
  }
}

TEST_CASE("lsn: prints like PostgreSQL and parses what it prints", "[record][lsn]") {
  CHECK(Lsn{0, 0}.ToString() == "0/00000000");
  CHECK(Lsn{3, 0xA1F0}.ToString() == "3/0000A1F0");
  CHECK(Lsn{0xAB, 0x40}.ToString() == "AB/00000040");
  CHECK(Lsn{1, 0x123456789ull}.ToString() == "1/123456789");
  CHECK(Lsn{~0ull, ~0ull}.ToString() == "FFFFFFFFFFFFFFFF/FFFFFFFFFFFFFFFF");

  const uint64_t seed = 0x5EED0003;
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 1000; ++i) {
    const Lsn l{rng() >> (rng() % 64), rng() >> (rng() % 64)};
    INFO(l.ToString());
    const auto back = Lsn::Parse(l.ToString());
    REQUIRE(back.has_value());
    REQUIRE(*back == l);
  }
  const auto lower = Lsn::Parse("ab/0000a1f0");
  REQUIRE(lower.has_value());
  CHECK(*lower == Lsn{0xAB, 0xA1F0});
  const auto short_off = Lsn::Parse("3/40");
  REQUIRE(short_off.has_value());
  CHECK(*short_off == Lsn{3, 0x40});

  for (const char* bad : {"", "/", "1/", "/1", "1", "1/2/3", "0x1/2", "1/0x2", "g/1", "1/g", " 1/2", "1/2 ", "-1/2",
                          "1/-2", "+1/2", "10000000000000000/0", "0/10000000000000000", "1:2"}) {
    INFO("'" << bad << "'");
    CHECK_FALSE(Lsn::Parse(bad).has_value());
  }
  CHECK(Lsn{1, 0xFFFF} < Lsn{2, 0});
  CHECK(Lsn{2, 1} > Lsn{2, 0});
}

TEST_CASE("record: Describe and Printable", "[record]") {
  CHECK(Printable("abc", 0) == "abc");
  CHECK(Printable(std::string("a\0\\\x7f\xff", 5), 0) == "a\\x00\\x5c\\x7f\\xff");
  CHECK(Printable("abcdef", 4) == "abcd...(+2)");
  CHECK(Printable("abcd", 4) == "abcd");
  CHECK(Describe(CutStart{7, 100}) == "cut 7 time 100us");
  CHECK(Describe(TxCommit{{1, 2}, 3, 4, kTxFlagOnePhase, {0, 2}}) == "marker 3 participants 0,2 1pc");
  CHECK(Describe(TxData{{1, 2}, {{WriteOp::kPut, "k", "v"}, {WriteOp::kDelete, "d", ""}}}) == "writes 2: k=v del d");
  CHECK(Describe(CutAbort{5, 6, CutAbortReason::kRecoveredTx, "x"}) ==
        "cut 5 time 6us reason recovered-transaction: x");
  CHECK(Describe(Snapshot{"s", 1, 0xAB}) == "name s time 1us fingerprint 00000000000000ab");
  CHECK(Describe(NodeStart{2, 9}) == "incarnation 2 time 9us");
  CHECK(Describe(CutFinish{1, 2, {{1, 1}}, {}}) == "cut 1 time 2us before 1 [1:1] after 0 []");
  CHECK(CutAbortReasonName(CutAbortReason::kInvalid) == "invalid");
  CHECK(CutAbortReasonName(CutAbortReason::kNodeRestart) == "node-restart");
}

// --- The raw-buffer writers of the dump hot path ---------------------------
// They must write exactly what the Append* functions write, stay inside their
// bounds, and (ParseTxOutcome) accept exactly the payloads DecodePayload
// accepts.

namespace {

// Runs a raw writer into a buffer of exactly `bound` bytes followed by a
// guard, checks it stayed inside, and returns what it wrote.
template <class F>
std::string WriteBounded(size_t bound, F&& write) {
  constexpr size_t kGuard = 64;
  std::vector<char> buf(bound + kGuard, '\x7e');
  char* end = write(buf.data());
  REQUIRE(end >= buf.data());
  REQUIRE(static_cast<size_t>(end - buf.data()) <= bound);
  // Bytes past the end of what was written may have been scribbled on only
  // inside the bound, never in the guard.
  REQUIRE(std::all_of(buf.begin() + static_cast<ptrdiff_t>(bound), buf.end(), [](char c) { return c == '\x7e'; }));
  return std::string(buf.data(), end);
}

std::string RawPrintable(std::string_view bytes, size_t max_bytes) {
  return WriteBounded(PrintableBound(bytes, max_bytes), [&](char* p) { return WritePrintable(p, bytes, max_bytes); });
}

}  // namespace

TEST_CASE("record: WritePrintable writes what AppendPrintable appends", "[record][dump]") {
  const uint64_t seed = 0x5EED0010;
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  // Every single byte, alone and inside runs of plain bytes at every position
  // of the 16- and 8-byte steps and of the overlapping last 16 bytes.
  for (int c = 0; c < 256; ++c) {
    for (size_t len : {17u, 23u, 40u}) {
      for (size_t pos = 0; pos < len; ++pos) {
        std::string s(len, 'a');
        s[pos] = static_cast<char>(c);
        INFO("byte " << c << " at " << pos << " of " << len);
        for (size_t max : {0u, 1u, 8u, 9u, 16u, 17u, 24u, 33u}) REQUIRE(RawPrintable(s, max) == Printable(s, max));
      }
    }
  }
  for (int i = 0; i < 5000; ++i) {
    // Mostly printable strings with some other bytes, and fully random ones.
    std::string s = RandomString(rng, 80);
    if (i % 2 == 0) {
      for (char& ch : s) {
        if (rng() % 16 != 0) ch = static_cast<char>(0x20 + rng() % 0x5F);
      }
    }
    const size_t max = rng() % 4 == 0 ? 0 : rng() % 90;
    INFO("string " << i << " max " << max);
    REQUIRE(RawPrintable(s, max) == Printable(s, max));
  }
  CHECK(RawPrintable("", 0).empty());
  CHECK(RawPrintable(std::string(1000, '\xff'), 0) == Printable(std::string(1000, '\xff'), 0));
}

TEST_CASE("record: DecimalDigits and Hex8Upper agree with fmt", "[record][dump]") {
  const uint64_t seed = 0x5EED0012;
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> values{0, 1, 9, UINT64_MAX, UINT64_MAX - 1};
  for (uint64_t p = 1, k = 0; k < 20; ++k, p *= 10) {
    values.insert(values.end(), {p - 1, p, p + 1});
  }
  for (int i = 0; i < 20000; ++i) values.push_back(rng() >> (rng() % 64));
  for (const uint64_t v : values) {
    INFO("value " << v);
    REQUIRE(DecimalDigits(v) == static_cast<int>(fmt::format("{}", v).size()));
    const auto u = static_cast<uint32_t>(v);
    const uint64_t h = Hex8Upper(u);
    char text[8];
    std::memcpy(text, &h, 8);
    REQUIRE(std::string(text, 8) == fmt::format("{:08X}", u));
  }
}

TEST_CASE("record: ParseTxOutcome accepts what DecodePayload accepts, and the descriptions agree", "[record][dump]") {
  const uint64_t seed = 0x5EED0011;
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  std::vector<Record> recs = EveryType();
  for (int i = 0; i < 600; ++i) recs.push_back(RandomRecord(rng, rng() % std::variant_size_v<Record>));
  recs.push_back(TxPrepare{{1, 2}, 3, std::vector<uint32_t>(kMaxParticipants, 0xFFFFFFFFu)});
  int parsed = 0;
  for (const Record& r : recs) {
    const std::string enc = Encode(r);
    // The payload itself, every truncation, trailing bytes, and counts changed.
    std::vector<std::string> variants{enc, enc + std::string(1, '\0'), enc + std::string(4, '\0')};
    for (size_t len = 0; len < enc.size(); ++len) variants.push_back(enc.substr(0, len));
    for (size_t at = 0; at + 1 < enc.size(); ++at) {
      std::string v = enc;
      v[at] = static_cast<char>(v[at] + 1);
      v[at + 1] = static_cast<char>(rng());
      variants.push_back(v);
    }
    for (RecordType type : {RecordType::kTxPrepare, RecordType::kTxCommit, RecordType::kTxRollback, RecordType::kTxData,
                            RecordType::kCutStart}) {
      for (const std::string& v : variants) {
        const std::vector<uint8_t> bytes(v.begin(), v.end());  // exact size, for ASan
        const std::span<const uint8_t> payload(bytes.data(), bytes.size());
        TxOutcomeView view;
        const bool fast = ParseTxOutcome(type, payload, view);
        auto dec = DecodePayload(type, payload);
        const bool outcome_type =
            type == RecordType::kTxPrepare || type == RecordType::kTxCommit || type == RecordType::kTxRollback;
        INFO(RecordTypeName(type) << " payload of " << v.size() << " bytes from " << TypeName(r));
        REQUIRE(fast == (outcome_type && dec.ok()));
        if (!fast) continue;
        ++parsed;
        std::string want;
        AppendDescription(want, *dec, 32);
        const std::string got = WriteBounded(TxOutcomeDescriptionBound(view),
                                             [&](char* p) { return WriteTxOutcomeDescription(p, type, view); });
        REQUIRE(got == want);
        const TxId* tx = std::visit(
            [](const auto& x) -> const TxId* {
              if constexpr (requires { x.tx; }) {
                return &x.tx;
              } else {
                return nullptr;
              }
            },
            *dec);
        REQUIRE(tx != nullptr);
        REQUIRE(view.tx == *tx);
      }
    }
  }
  CHECK(parsed > 600);
}

TEST_CASE("record: WriteWritesDescription writes what AppendWritesDescription appends", "[record][dump]") {
  const uint64_t seed = 0x5EED0012;
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  std::vector<WriteView> views;
  std::vector<std::string> store;
  for (int i = 0; i < 3000; ++i) {
    const size_t n = i % 50 == 0 ? 20 : rng() % 11;  // past the 8 writes shown
    store.assign(2 * n, std::string());
    views.assign(n, WriteView{});
    for (size_t k = 0; k < n; ++k) {
      store[2 * k] = RandomString(rng, 40);
      views[k].op = rng() % 3 == 0 ? WriteOp::kDelete : WriteOp::kPut;
      if (views[k].op == WriteOp::kPut) store[2 * k + 1] = RandomString(rng, 120);
      views[k].key = store[2 * k];
      views[k].value = store[2 * k + 1];
    }
    for (size_t max : {size_t{0}, size_t{1}, size_t{32}, static_cast<size_t>(rng() % 130)}) {
      INFO("case " << i << ", " << n << " writes, max " << max);
      std::string want;
      AppendWritesDescription(want, views, max);
      const std::string got = WriteBounded(WritesDescriptionBound(views, max),
                                           [&](char* p) { return WriteWritesDescription(p, views, max); });
      REQUIRE(got == want);
    }
  }
}

TEST_CASE("record: CUT_ABORT with an invalid reason is rejected", "[record]") {
  for (uint16_t reason : {uint16_t{0}, uint16_t{5}, uint16_t{0xFFFF}}) {
    INFO("reason " << reason);
    std::string payload;
    REQUIRE(walfmt::EncodePayload(walfmt::CutAbort{3, 4, walfmt::CutAbortReason::kOther, "x"}, payload).ok());
    payload[16] = static_cast<char>(reason & 0xFF);
    payload[17] = static_cast<char>(reason >> 8);
    auto r = walfmt::DecodePayload(walfmt::RecordType::kCutAbort,
                                   {reinterpret_cast<const uint8_t*>(payload.data()), payload.size()});
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message() == "CUT_ABORT payload: invalid cut abort reason " + std::to_string(reason));
  }
}
