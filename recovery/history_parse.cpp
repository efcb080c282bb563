// Reading a client history (recovery/history.h): JSON lines as `walcut load
// --history` writes them. Every field the check uses is required and checked;
// an error names the file and the line.
#include <string>
#include <string_view>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "recovery/history.h"
#include "walfmt/file_io.h"
#include "walfmt/json_fields.h"

namespace walcut::recovery {
using walfmt::Result;
using walfmt::Status;

namespace {

// A history can hold millions of transactions: read it in pieces, never
// more than this at once (a line longer than that is refused).
constexpr size_t kChunkBytes = size_t{1} << 20;
constexpr size_t kMaxLineBytes = size_t{16} << 20;

bool ParseOutcome(std::string_view s, HistoryOutcome& out) {
  for (HistoryOutcome o : {HistoryOutcome::kCommitted, HistoryOutcome::kAborted, HistoryOutcome::kRefused,
                           HistoryOutcome::kUnknown, HistoryOutcome::kInDoubt}) {
    if (s == HistoryOutcomeName(o)) {
      out = o;
      return true;
    }
  }
  return false;
}

// One line; `origin` is "FILE:LINE".
Result<HistoryTx> ParseLine(std::string_view text, const std::string& origin, size_t line) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return Status::InvalidArgument(fmt::format("{}: not a JSON object", origin));
  walfmt::JsonFields f(origin);
  if (!f.ExpectObject(j, "")) return Status::InvalidArgument(f.error());
  HistoryTx t;
  t.line = line;
  t.client = f.U32(j, "client", "");
  t.request = f.U64(j, "request", "");
  t.node = f.U32(j, "node", "");
  const std::string outcome = f.String(j, "outcome", "");
  t.start_us = f.U64(j, "start_us", "");
  t.ack_us = f.U64(j, "ack_us", "");
  t.commit_time_us = f.U64(j, "commit_time_us", "");
  if (f.ok() && !ParseOutcome(outcome, t.outcome)) {
    f.Fail("outcome", fmt::format("'{}' is not committed, aborted, in-doubt, refused or unknown", outcome));
  }
  t.reason = f.OptionalString(j, "reason", "").value_or("");
  const nlohmann::json* tx = f.Get(j, "tx", "");
  const bool answered = t.outcome == HistoryOutcome::kCommitted || t.outcome == HistoryOutcome::kAborted ||
                        t.outcome == HistoryOutcome::kInDoubt;
  if (f.ok() && answered) {
    t.tx = f.Tx(j, "tx", "");
    if (f.ok() && t.ack_us == 0) f.Fail("ack_us", fmt::format("0 for a transaction that is {}", outcome));
  } else if (f.ok() && !tx->is_null()) {
    f.Fail("tx", fmt::format("expected null for a transaction that is {}", outcome));
  }
  const nlohmann::json* writes = f.Object(j, "writes", "");
  if (f.ok()) {
    for (const auto& [k, v] : writes->items()) t.writes[k] = f.StringValue(v, walfmt::JsonFields::Member("writes", k));
  }
  if (f.ok() && t.outcome != HistoryOutcome::kCommitted && !t.writes.empty()) {
    f.Fail("writes", fmt::format("a transaction that is {} wrote nothing", outcome));
  }
  if (!f.ok()) return Status::InvalidArgument(f.error());
  return t;
}

}  // namespace

const char* HistoryOutcomeName(HistoryOutcome o) {
  switch (o) {
    case HistoryOutcome::kCommitted:
      return "committed";
    case HistoryOutcome::kAborted:
      return "aborted";
    case HistoryOutcome::kRefused:
      return "refused";
    case HistoryOutcome::kUnknown:
      return "unknown";
    case HistoryOutcome::kInDoubt:
      return "in-doubt";
  }
  return "?";
}

namespace {

using SeenTx = std::unordered_map<walfmt::TxId, size_t, walfmt::TxIdHash>;

// Parses the complete lines of `text` into `h`; `line` counts the lines of
// the file read so far (the first line of `text` is line + 1).
Status ParseLines(std::string_view text, std::string_view origin, size_t& line, SeenTx& seen, History& h) {
  while (!text.empty()) {
    ++line;
    const size_t nl = text.find('\n');
    std::string_view l = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (l.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const std::string where = fmt::format("{}:{}", origin, line);
    auto t = ParseLine(l, where, line);
    if (!t.ok()) return t.status();
    if (t->tx) {
      auto [it, fresh] = seen.emplace(*t->tx, line);
      if (!fresh) {
        return Status::InvalidArgument(
            fmt::format("{}: transaction {} is already on line {}", where, t->tx->ToString(), it->second));
      }
    }
    h.txs.push_back(std::move(*t));
  }
  return Status::Ok();
}

}  // namespace

Result<History> ParseHistory(std::string_view text, std::string_view origin) {
  History h;
  h.origin = std::string(origin);
  SeenTx seen;
  size_t line = 0;
  if (Status st = ParseLines(text, origin, line, seen, h); !st.ok()) return st;
  return h;
}

Result<History> LoadHistory(const std::string& path) {
  // Whole lines are parsed as they come; the file is never held whole.
  History h;
  h.origin = path;
  std::string pending;
  size_t line = 0;
  SeenTx seen;
  Status st = walfmt::ReadFileChunks(path, kChunkBytes, [&](std::string_view piece) -> Status {
    pending.append(piece);
    const size_t last_nl = pending.rfind('\n');
    if (last_nl == std::string::npos) {
      if (pending.size() > kMaxLineBytes) {
        return Status::InvalidArgument(
            fmt::format("{}:{}: a line longer than {} bytes", path, line + 1, kMaxLineBytes));
      }
      return Status::Ok();
    }
    Status s = ParseLines(std::string_view(pending).substr(0, last_nl + 1), path, line, seen, h);
    pending.erase(0, last_nl + 1);
    return s;
  });
  if (st.ok() && !pending.empty()) st = ParseLines(pending, path, line, seen, h);
  if (!st.ok()) return st;
  return h;
}

}  // namespace walcut::recovery
