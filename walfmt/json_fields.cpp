#include "walfmt/json_fields.h"

#include <fmt/format.h>

#include "walfmt/strings.h"
#include "walfmt/text_escape.h"

namespace walfmt {

using json = nlohmann::json;

std::string JsonFields::Shown(const json& v) {
  std::string s = DumpJson(v);
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

void JsonFields::Fail(std::string_view path, std::string_view what) {
  if (error_.empty()) error_ = fmt::format("{}: field '{}': {}", origin_, path, what);
}

std::string JsonFields::Member(std::string_view path, std::string_view key) {
  if (path.empty()) return std::string(key);
  return fmt::format("{}.{}", path, key);
}

std::string JsonFields::Element(std::string_view path, size_t i) { return fmt::format("{}[{}]", path, i); }

const json* JsonFields::Find(const json& obj, std::string_view key, std::string_view path) {
  if (!ok()) return nullptr;
  if (!obj.is_object()) {
    Fail(path.empty() ? std::string_view("(document)") : path, fmt::format("expected an object, found {}", Shown(obj)));
    return nullptr;
  }
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

const json* JsonFields::Get(const json& obj, std::string_view key, std::string_view path) {
  const json* v = Find(obj, key, path);
  if (v == nullptr && ok()) Fail(Member(path, key), "missing");
  return v;
}

uint64_t JsonFields::U64Value(const json& v, std::string_view path, uint64_t max) {
  if (!ok()) return 0;
  if (!v.is_number_unsigned()) {
    Fail(path, fmt::format("expected an unsigned integer, found {}", Shown(v)));
    return 0;
  }
  const uint64_t u = v.get<uint64_t>();
  if (u > max) {
    Fail(path, fmt::format("{} is larger than the limit {}", u, max));
    return 0;
  }
  return u;
}

std::string JsonFields::StringValue(const json& v, std::string_view path) {
  if (!ok()) return {};
  if (!v.is_string()) {
    Fail(path, fmt::format("expected a string, found {}", Shown(v)));
    return {};
  }
  return v.get<std::string>();
}

TxId JsonFields::TxValue(const json& v, std::string_view path) {
  const std::string s = StringValue(v, path);
  TxId t;
  if (ok() && !TxId::Parse(s, t)) Fail(path, fmt::format("{} is not a transaction id NODE:SEQ", Shown(v)));
  return t;
}

Lsn JsonFields::PositionValue(const json& v, std::string_view path) {
  const std::string s = StringValue(v, path);
  if (!ok()) return {};
  auto l = Lsn::Parse(s);
  if (!l) {
    Fail(path, fmt::format("{} is not a position (SEGMENT/OFFSET in hex)", Shown(v)));
    return {};
  }
  return *l;
}

bool JsonFields::ExpectObject(const json& v, std::string_view path) {
  if (!ok()) return false;
  if (!v.is_object()) {
    Fail(path.empty() ? std::string_view("(document)") : path, fmt::format("expected an object, found {}", Shown(v)));
    return false;
  }
  return true;
}

uint64_t JsonFields::U64(const json& obj, std::string_view key, std::string_view path, uint64_t max) {
  const json* v = Get(obj, key, path);
  return v ? U64Value(*v, Member(path, key), max) : 0;
}

uint32_t JsonFields::U32(const json& obj, std::string_view key, std::string_view path, uint64_t max) {
  return static_cast<uint32_t>(U64(obj, key, path, std::min<uint64_t>(max, UINT32_MAX)));
}

int64_t JsonFields::I64(const json& obj, std::string_view key, std::string_view path) {
  const json* v = Get(obj, key, path);
  if (!v) return 0;
  if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) {
      Fail(Member(path, key), fmt::format("{} does not fit a signed 64-bit integer", u));
      return 0;
    }
    return static_cast<int64_t>(u);
  }
  if (!v->is_number_integer()) {
    Fail(Member(path, key), fmt::format("expected an integer, found {}", Shown(*v)));
    return 0;
  }
  return v->get<int64_t>();
}

double JsonFields::Number(const json& obj, std::string_view key, std::string_view path) {
  const json* v = Get(obj, key, path);
  if (!v) return 0;
  if (!v->is_number()) {
    Fail(Member(path, key), fmt::format("expected a number, found {}", Shown(*v)));
    return 0;
  }
  return v->get<double>();
}

bool JsonFields::Bool(const json& obj, std::string_view key, std::string_view path) {
  const json* v = Get(obj, key, path);
  if (!v) return false;
  if (!v->is_boolean()) {
    Fail(Member(path, key), fmt::format("expected true or false, found {}", Shown(*v)));
    return false;
  }
  return v->get<bool>();
}

std::string JsonFields::String(const json& obj, std::string_view key, std::string_view path) {
  const json* v = Get(obj, key, path);
  return v ? StringValue(*v, Member(path, key)) : std::string();
}

uint64_t JsonFields::Hex16(const json& obj, std::string_view key, std::string_view path) {
  const json* v = Get(obj, key, path);
  if (!v) return 0;
  const std::string s = StringValue(*v, Member(path, key));
  uint64_t out = 0;
  if (ok() && !ParseHex16(s, out)) {
    Fail(Member(path, key), fmt::format("{} is not 16 lower-case hex digits", Shown(*v)));
    return 0;
  }
  return out;
}

Lsn JsonFields::Position(const json& obj, std::string_view key, std::string_view path) {
  const json* v = Get(obj, key, path);
  return v ? PositionValue(*v, Member(path, key)) : Lsn{};
}

TxId JsonFields::Tx(const json& obj, std::string_view key, std::string_view path) {
  const json* v = Get(obj, key, path);
  return v ? TxValue(*v, Member(path, key)) : TxId{};
}

const json* JsonFields::Array(const json& obj, std::string_view key, std::string_view path, size_t max_size) {
  const json* v = Get(obj, key, path);
  if (!v) return nullptr;
  if (!v->is_array()) {
    Fail(Member(path, key), fmt::format("expected an array, found {}", Shown(*v)));
    return nullptr;
  }
  if (v->size() > max_size) {
    Fail(Member(path, key), fmt::format("{} elements, more than the limit {}", v->size(), max_size));
    return nullptr;
  }
  return v;
}

const json* JsonFields::Object(const json& obj, std::string_view key, std::string_view path) {
  const json* v = Get(obj, key, path);
  if (!v) return nullptr;
  if (!v->is_object()) {
    Fail(Member(path, key), fmt::format("expected an object, found {}", Shown(*v)));
    return nullptr;
  }
  return v;
}

std::optional<uint64_t> JsonFields::OptionalU64(const json& obj, std::string_view key, std::string_view path,
                                                uint64_t max) {
  const json* v = Find(obj, key, path);
  if (!v) return std::nullopt;
  const uint64_t u = U64Value(*v, Member(path, key), max);
  return ok() ? std::optional<uint64_t>(u) : std::nullopt;
}

std::optional<bool> JsonFields::OptionalBool(const json& obj, std::string_view key, std::string_view path) {
  if (Find(obj, key, path) == nullptr) return std::nullopt;
  const bool b = Bool(obj, key, path);
  return ok() ? std::optional<bool>(b) : std::nullopt;
}

std::optional<std::string> JsonFields::OptionalString(const json& obj, std::string_view key, std::string_view path) {
  const json* v = Find(obj, key, path);
  if (!v) return std::nullopt;
  std::string s = StringValue(*v, Member(path, key));
  return ok() ? std::optional<std::string>(std::move(s)) : std::nullopt;
}

std::optional<Lsn> JsonFields::OptionalPosition(const json& obj, std::string_view key, std::string_view path) {
  const json* v = Find(obj, key, path);
  if (!v) return std::nullopt;
  const Lsn l = PositionValue(*v, Member(path, key));
  return ok() ? std::optional<Lsn>(l) : std::nullopt;
}

std::optional<TxId> JsonFields::OptionalTx(const json& obj, std::string_view key, std::string_view path) {
  const json* v = Find(obj, key, path);
  if (!v) return std::nullopt;
  const TxId t = TxValue(*v, Member(path, key));
  return ok() ? std::optional<TxId>(t) : std::nullopt;
}

const json* JsonFields::OptionalArray(const json& obj, std::string_view key, std::string_view path, size_t max_size) {
  if (Find(obj, key, path) == nullptr) return nullptr;
  return Array(obj, key, path, max_size);
}

}  // namespace walfmt
