// How a byte string (a path, a snapshot name, a message quoting either)
// becomes text in walcut's JSON, XML (JUnit) and SVG documents, losslessly
// and always valid in all three formats:
//
//   - a character in well-formed UTF-8 passes unchanged, except
//   - the backslash, the C0 control characters other than tab, line feed and
//     carriage return, and U+FFFE and U+FFFF (none of which XML 1.0 carries),
//     whose bytes are each written \xhh (two lower-case hex digits), and
//   - every byte that is not part of a well-formed UTF-8 character, written
//     \xhh too.
//
// So a path of printable UTF-8 without a backslash reads the same in every
// document, and UnescapeBytes gives back the exact bytes of any string:
// in escaped text a backslash always starts \xhh. Documented for users in
// README.md ("Byte strings in JSON, JUnit and SVG").
#pragma once

#include <string>
#include <string_view>

namespace walfmt {

// True when EscapeBytes(bytes) == bytes.
bool IsCleanText(std::string_view bytes);
std::string EscapeBytes(std::string_view bytes);
// The inverse of EscapeBytes. Text it did not produce is read leniently:
// "\x" with two hex digits is a byte, every other character stands for itself.
std::string UnescapeBytes(std::string_view text);

namespace detail {
template <class Json>
bool JsonIsClean(const Json& j) {
  if (j.is_string()) return IsCleanText(j.template get_ref<const typename Json::string_t&>());
  if (j.is_array()) {
    for (const auto& e : j) {
      if (!JsonIsClean(e)) return false;
    }
  } else if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (!IsCleanText(it.key()) || !JsonIsClean(it.value())) return false;
    }
  }
  return true;
}
}  // namespace detail

// Every string of a JSON value (member names included) through EscapeBytes.
template <class Json>
Json EscapeJsonStrings(const Json& j) {
  if (j.is_string()) return Json(EscapeBytes(j.template get_ref<const typename Json::string_t&>()));
  if (j.is_array()) {
    Json out = Json::array();
    for (const auto& e : j) out.push_back(EscapeJsonStrings(e));
    return out;
  }
  if (j.is_object()) {
    Json out = Json::object();
    for (auto it = j.begin(); it != j.end(); ++it) out[EscapeBytes(it.key())] = EscapeJsonStrings(it.value());
    return out;
  }
  return j;
}

// Every string of a JSON value (member names included) through UnescapeBytes:
// for a document walcut wrote, the byte strings it was made from.
template <class Json>
Json UnescapeJsonStrings(const Json& j) {
  if (j.is_string()) return Json(UnescapeBytes(j.template get_ref<const typename Json::string_t&>()));
  if (j.is_array()) {
    Json out = Json::array();
    for (const auto& e : j) out.push_back(UnescapeJsonStrings(e));
    return out;
  }
  if (j.is_object()) {
    Json out = Json::object();
    for (auto it = j.begin(); it != j.end(); ++it) out[UnescapeBytes(it.key())] = UnescapeJsonStrings(it.value());
    return out;
  }
  return j;
}

// The JSON text of `j` with its strings escaped: what every walcut JSON
// writer uses instead of json::dump, which throws on a byte string that is
// not UTF-8. `indent` as for json::dump (-1: one line).
template <class Json>
std::string DumpJson(const Json& j, int indent = -1) {
  if (detail::JsonIsClean(j)) return j.dump(indent);
  return EscapeJsonStrings(j).dump(indent);
}

}  // namespace walfmt
