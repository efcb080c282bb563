// The zero-copy decoders the hot paths use (walfmt::PeekTxId, ParseTxData,
// ParseTxOutcome: the cut scanner's fast path, dump and restore) against
// DecodePayload, on any payload of any type: they accept exactly the same
// payloads and read the same values. A payload DecodePayload accepts is also
// re-encoded to exactly its bytes (one encoding per record).
//
// Input: u16 record type (little-endian), then the payload.
//
// fuzz.sh: -max_len=4096
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "check.h"
#include "walfmt/bytes.h"
#include "walfmt/record.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const auto type = static_cast<walfmt::RecordType>(walfmt::LoadU16(data));
  const std::span<const uint8_t> payload(data + 2, size - 2);
  auto rec = walfmt::DecodePayload(type, payload);

  // Re-encoding what decodes gives the same bytes.
  if (rec.ok()) {
    std::string again;
    Check(walfmt::EncodePayload(*rec, again).ok(), "type " + std::to_string(static_cast<unsigned>(type)));
    Check(again.size() == payload.size(), "type " + std::to_string(static_cast<unsigned>(type)));
    Check(std::equal(payload.begin(), payload.end(), reinterpret_cast<const uint8_t*>(again.data())),
          "type " + std::to_string(static_cast<unsigned>(type)));
  }

  // TX_DATA: ParseTxData accepts exactly what DecodePayload accepts.
  {
    walfmt::TxId tx;
    std::vector<walfmt::WriteView> writes;
    const bool fast = walfmt::ParseTxData(payload, tx, writes);
    const bool full = type == walfmt::RecordType::kTxData && rec.ok();
    if (type == walfmt::RecordType::kTxData) Check(fast == full, "type " + std::to_string(static_cast<unsigned>(type)));
    if (full) {
      const auto& d = std::get<walfmt::TxData>(*rec);
      Check(tx == d.tx, "type " + std::to_string(static_cast<unsigned>(type)));
      Check(writes.size() == d.writes.size(), "type " + std::to_string(static_cast<unsigned>(type)));
      for (size_t i = 0; i < writes.size(); ++i) {
        Check(writes[i].op == d.writes[i].op, "type " + std::to_string(static_cast<unsigned>(type)));
        Check(writes[i].key == d.writes[i].key, "type " + std::to_string(static_cast<unsigned>(type)));
        Check(writes[i].value == d.writes[i].value, "type " + std::to_string(static_cast<unsigned>(type)));
      }
    }
  }

  // TX_PREPARE / TX_COMMIT / TX_ROLLBACK: ParseTxOutcome, the scanner's fast
  // path, accepts exactly what DecodePayload accepts, with the same fields;
  // any other type it refuses.
  walfmt::TxOutcomeView v;
  const bool fast = walfmt::ParseTxOutcome(type, payload, v);
  const bool outcome = type == walfmt::RecordType::kTxPrepare || type == walfmt::RecordType::kTxCommit ||
                       type == walfmt::RecordType::kTxRollback;
  Check(fast == (outcome && rec.ok()), "type " + std::to_string(static_cast<unsigned>(type)));
  if (fast) {
    std::vector<uint32_t> parts(v.participant_count());
    for (size_t i = 0; i < parts.size(); ++i) parts[i] = v.participant(i);
    if (const auto* p = std::get_if<walfmt::TxPrepare>(&*rec)) {
      Check(v.tx == p->tx && v.time_us == p->time_us && parts == p->participants,
            "type " + std::to_string(static_cast<unsigned>(type)));
    } else if (const auto* c = std::get_if<walfmt::TxCommit>(&*rec)) {
      Check(v.tx == c->tx && v.marker == c->marker && v.time_us == c->time_us && v.flags == c->flags &&
                parts == c->participants,
            "type " + std::to_string(static_cast<unsigned>(type)));
    } else {
      const auto& r = std::get<walfmt::TxRollback>(*rec);
      Check(v.tx == r.tx && v.time_us == r.time_us && v.flags == r.flags && parts == r.participants,
            "type " + std::to_string(static_cast<unsigned>(type)));
    }
  }

  // Every transaction record starts with its id: PeekTxId reads it wherever
  // DecodePayload finds one.
  walfmt::TxId peek;
  const bool peeked = walfmt::PeekTxId(payload, peek);
  Check(peeked == (payload.size() >= walfmt::layout::kTxIdSize), "type " + std::to_string(static_cast<unsigned>(type)));
  if (rec.ok() && (outcome || type == walfmt::RecordType::kTxData)) {
    std::visit(
        [&](const auto& r) {
          if constexpr (requires { r.tx; })
            Check(peeked && peek == r.tx, "type " + std::to_string(static_cast<unsigned>(type)));
        },
        *rec);
  }
  return 0;
}
