// The one way walcut reads the fields of a JSON document it wrote: cluster.json,
// scan summaries, verdicts, parts, check reports, repository manifests.
//
// JsonFields walks a parsed nlohmann::json value. Every accessor names the
// field by its path from the document's root ("nodes[2].cut_start"); the first
// problem wins and later calls return empty values, so a reader can take many
// fields in a row and look at ok() once. A field that is missing or has the
// wrong type is refused, never read as 0 or "": a field that may be absent is
// read with an Optional* accessor, which refuses a wrong type all the same.
//
// Errors read "<origin>: field '<path>': <what>" and are kCorruption: a
// document that does not match its schema is damaged input.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "walfmt/lsn.h"
#include "walfmt/record.h"
#include "walfmt/status.h"

namespace walfmt {

class JsonFields {
 public:
  using json = nlohmann::json;

  // origin: what the document is, for the errors (usually its path).
  explicit JsonFields(std::string origin) : origin_(std::move(origin)) {}

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  // Ok, or kCorruption with error().
  Status status() const { return ok() ? Status::Ok() : Status::Corruption(error_); }

  // Records a problem with the field at `path` (the first one wins).
  void Fail(std::string_view path, std::string_view what);

  // The path of member `key` of the object at `path`, and of element i of
  // the array at `path`.
  static std::string Member(std::string_view path, std::string_view key);
  static std::string Element(std::string_view path, size_t i);

  // obj[key] of the object `obj` at `path`; nullptr (and an error) when obj
  // is not an object or has no such member.
  const json* Get(const json& obj, std::string_view key, std::string_view path);
  // As Get, but a missing member is no error (nullptr without one).
  const json* Find(const json& obj, std::string_view key, std::string_view path);

  // Required fields. An unsigned integer above `max` is refused, never
  // truncated.
  uint64_t U64(const json& obj, std::string_view key, std::string_view path, uint64_t max = UINT64_MAX);
  uint32_t U32(const json& obj, std::string_view key, std::string_view path, uint64_t max = UINT32_MAX);
  int64_t I64(const json& obj, std::string_view key, std::string_view path);
  double Number(const json& obj, std::string_view key, std::string_view path);
  bool Bool(const json& obj, std::string_view key, std::string_view path);
  std::string String(const json& obj, std::string_view key, std::string_view path);
  // A string of exactly 16 lower-case hex digits (ids, digests, fingerprints).
  uint64_t Hex16(const json& obj, std::string_view key, std::string_view path);
  // A WAL position, "SEGMENT/OFFSET" in hex.
  Lsn Position(const json& obj, std::string_view key, std::string_view path);
  // A transaction id as TxId::Parse reads it.
  TxId Tx(const json& obj, std::string_view key, std::string_view path);
  // An array (an object), or nullptr with an error. An array of more than
  // max_size elements is refused.
  const json* Array(const json& obj, std::string_view key, std::string_view path, size_t max_size = SIZE_MAX);
  const json* Object(const json& obj, std::string_view key, std::string_view path);

  // Fields that may be absent: nullopt (nullptr) when absent, an error when
  // present with the wrong type or out of range.
  std::optional<uint64_t> OptionalU64(const json& obj, std::string_view key, std::string_view path,
                                      uint64_t max = UINT64_MAX);
  std::optional<bool> OptionalBool(const json& obj, std::string_view key, std::string_view path);
  std::optional<std::string> OptionalString(const json& obj, std::string_view key, std::string_view path);
  std::optional<Lsn> OptionalPosition(const json& obj, std::string_view key, std::string_view path);
  std::optional<TxId> OptionalTx(const json& obj, std::string_view key, std::string_view path);
  const json* OptionalArray(const json& obj, std::string_view key, std::string_view path, size_t max_size = SIZE_MAX);

  // Values that are not members: element i of an array, the document itself.
  uint64_t U64Value(const json& v, std::string_view path, uint64_t max = UINT64_MAX);
  std::string StringValue(const json& v, std::string_view path);
  TxId TxValue(const json& v, std::string_view path);
  Lsn PositionValue(const json& v, std::string_view path);
  // v must be an object; an error naming `path` when it is not.
  bool ExpectObject(const json& v, std::string_view path);

  // A value shown in an error: JSON text, escaped, at most 40 characters.
  static std::string Shown(const json& v);

 private:
  std::string origin_;
  std::string error_;
};

}  // namespace walfmt
