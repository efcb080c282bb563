// libFuzzer target for the state file of `walcut check --state`
// (recovery::CheckStateFromJson, schema walcut.check-state/1): a file a CI
// job keeps between runs, so whatever a previous run, a person or an attacker
// left there is read.
//
// Properties:
//   - any input loads or fails with kInvalidArgument, one line starting with
//     the file's name (no exception, crash, leak or undefined behaviour);
//   - what loads is written back (CheckStateToJson) and loads again to the
//     same state, written back to the same text.
//
// fuzz.sh: -max_len=16384
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/check.h"
#include "recovery/check.h"

namespace {

const std::string kOrigin = "fuzz/check-state.json";

bool Same(const walcut::recovery::CheckState& a, const walcut::recovery::CheckState& b) {
  if (a.nodes.size() != b.nodes.size()) return false;
  for (auto ia = a.nodes.begin(), ib = b.nodes.begin(); ia != a.nodes.end(); ++ia, ++ib) {
    if (ia->first != ib->first || ia->second.size() != ib->second.size()) return false;
    for (auto sa = ia->second.begin(), sb = ib->second.begin(); sa != ia->second.end(); ++sa, ++sb) {
      const auto& x = sa->second;
      const auto& y = sb->second;
      if (sa->first != sb->first || x.file != y.file || x.index != y.index || x.size != y.size ||
          x.mtime_ns != y.mtime_ns || x.crc32c != y.crc32c) {
        return false;
      }
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace walcut::recovery;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto s = CheckStateFromJson(text, kOrigin);
  if (!s.ok()) {
    const std::string& m = s.status().message();
    Check(s.status().code() == walfmt::ErrorCode::kInvalidArgument, "error is not kInvalidArgument: " + m);
    Check(m.rfind(kOrigin, 0) == 0, "error does not start with the file name: " + m);
    Check(m.find('\n') == std::string::npos, "error spans lines: " + m);
    return 0;
  }
  // Every segment is filed under its own index.
  for (const auto& [node, segs] : s->nodes) {
    for (const auto& [index, st] : segs) Check(index == st.index, "a segment filed under another index");
  }
  const std::string once = CheckStateToJson(*s);
  auto again = CheckStateFromJson(once, kOrigin);
  Check(again.ok(), "a written state does not load: " + again.status().message() + "\n" + once);
  Check(Same(*s, *again), "state write -> load changed the state:\n" + once);
  Check(CheckStateToJson(*again) == once, "state write -> load -> write changed the text:\n" + once);
  return 0;
}
