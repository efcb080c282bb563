// libFuzzer target for the scan-summary loader (cut::SummaryFromJson): the
// files `walcut scan --out` writes and `walcut cuts` / `check` read back,
// schema walcut.summary/1.
//
// Properties:
//   - any input either loads or fails with a kCorruption error whose message
//     is one line starting with the file's name (no exception, crash, leak or
//     undefined behaviour);
//   - the node id is the file's, never a 64-bit number truncated; a cluster
//     id is hex digits, never read as 0 when it is not;
//   - what loads is written back (SummaryToJson), and the written text loads
//     again and is written back to the same text: parse -> write -> parse is
//     stable.
//
// fuzz.sh: -max_len=16384
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "cut/load.h"
#include "fuzz/check.h"
#include "walfmt/text_escape.h"

namespace {

const std::string kOrigin = "fuzz/summary.json";

void CheckError(const walfmt::Status& st, const std::string& what) {
  Check(st.code() == walfmt::ErrorCode::kCorruption, what + ": error is not kCorruption: " + st.message());
  Check(st.message().rfind(kOrigin, 0) == 0, what + ": error does not start with the file name: " + st.message());
  Check(st.message().find('\n') == std::string::npos, what + ": error spans lines: " + st.message());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto s = walcut::cut::SummaryFromJson(text, kOrigin);
  if (!s.ok()) {
    CheckError(s.status(), "load");
    return 0;
  }
  // Ids are 32-bit: a larger number is refused, never truncated into another node.
  // As the loader reads it: strings unescaped (walfmt/text_escape.h).
  const nlohmann::json doc = walfmt::UnescapeJsonStrings(nlohmann::json::parse(text, nullptr, false));
  if (doc.is_object() && doc.contains("node") && doc["node"].is_number_unsigned()) {
    Check(doc["node"].get<uint64_t>() <= UINT32_MAX, "node id over 32 bits accepted");
    Check(doc["node"].get<uint64_t>() == s->node, "node id changed");
  }
  if (doc.is_object() && doc.contains("cluster_id") && doc["cluster_id"].is_string()) {
    const std::string id = doc["cluster_id"].get<std::string>();
    Check(!id.empty() && id.size() <= 16 && id.find_first_not_of("0123456789abcdefABCDEF") == std::string::npos,
          "cluster id \"" + id + "\" accepted");
  }
  const std::string once = walcut::cut::SummaryToJson(*s);
  auto again = walcut::cut::SummaryFromJson(once, kOrigin);
  Check(again.ok(), "a written summary does not load: " + again.status().message() + "\n" + once);
  const std::string twice = walcut::cut::SummaryToJson(*again);
  Check(once == twice, "summary write -> load -> write changed the text:\n" + once + "\n---\n" + twice);
  return 0;
}
