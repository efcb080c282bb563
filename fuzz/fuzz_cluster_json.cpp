// libFuzzer target for the cluster.json parser (walfmt::ParseClusterInfo),
// which every command reads first, and which a restore's manifest.json embeds.
//
// Properties:
//   - any input parses or fails with a kCorruption error, one line starting
//     with the file's name; never an exception, and never the parser's
//     kInternal backstop (every access is meant to be checked before it is
//     made);
//   - what parses agrees with itself (backups < nodes, one WAL dir per node,
//     each relative and inside the directory; one node entry per node in each
//     full snapshot) and is written back (ClusterJsonText), parses again, and
//     is written back to the same text.
//
// fuzz.sh: -max_len=16384
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "fuzz/check.h"
#include "walfmt/cluster_layout.h"

namespace {

const std::string kOrigin = "fuzz/cluster.json";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace walfmt;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto ci = ParseClusterInfo(text, kOrigin);
  if (!ci.ok()) {
    const std::string& m = ci.status().message();
    Check(ci.status().code() == ErrorCode::kCorruption, "error is not kCorruption: " + m);
    Check(m.rfind(kOrigin, 0) == 0, "error does not start with the file name: " + m);
    Check(m.find('\n') == std::string::npos, "error spans lines: " + m);
    return 0;
  }
  Check(ci->nodes > 0 && ci->backups < ci->nodes && ci->partitions > 0, "accepted an impossible topology");
  Check(ci->node_wal_dirs.size() == ci->nodes, "not one WAL dir per node");
  for (const auto& d : ci->node_wal_dirs) {
    Check(!d.empty() && d[0] != '/', "a WAL dir that is not relative: " + d);
    for (const auto& part : std::filesystem::path(d)) Check(part != "..", "a WAL dir that leaves the directory: " + d);
  }
  for (const auto& s : ci->full_snapshots) {
    Check(s.nodes.size() == ci->nodes, "a full snapshot without one entry per node");
    Check(ci->FindSnapshot(s.name) == &s, "two full snapshots of one name");
  }
  const std::string once = ClusterJsonText(*ci, ClusterRunRecord{});
  auto again = ParseClusterInfo(once, kOrigin);
  Check(again.ok(), "a written cluster.json does not parse: " + again.status().message() + "\n" + once);
  Check(ClusterJsonText(*again, ClusterRunRecord{}) == once,
        "cluster.json write -> parse -> write changed the text:\n" + once);
  return 0;
}
