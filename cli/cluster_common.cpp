// Helpers of the commands that talk to a real cluster (cli/cluster_common.h).

#include "cli/cluster_common.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "walfmt/strings.h"

namespace walcut::cli {

namespace fs = std::filesystem;
using walfmt::Status;

// Whether pid is a live `walcut node DIR --node I` (not a zombie, not a
// recycled pid running something else).
bool IsOurNode(int64_t pid, const std::string& dir, uint32_t node) {
  if (pid <= 0) return false;
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  std::string line;
  if (!std::getline(stat, line)) return false;
  const auto close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size() || line[close + 2] == 'Z') return false;
  std::ifstream cmd(fmt::format("/proc/{}/cmdline", pid), std::ios::binary);
  std::string args((std::istreambuf_iterator<char>(cmd)), std::istreambuf_iterator<char>());
  std::vector<std::string> argv;
  size_t start = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == '\0') {
      argv.push_back(args.substr(start, i - start));
      start = i + 1;
    }
  }
  return argv.size() >= 5 && argv[1] == "node" && argv[2] == dir && argv[3] == "--node" &&
         argv[4] == std::to_string(node);
}

// The directory as the node processes get it: absolute, so that
// /proc/PID/cmdline names it the same whatever the caller's directory.
std::string AbsoluteDir(const std::string& dir) {
  std::error_code ec;
  fs::path p = fs::absolute(dir, ec);
  return ec ? dir : p.lexically_normal().string();
}

walfmt::Result<node::wire::StatusReply> AskStatus(const node::RuntimeInfo& rt, uint64_t cluster_id, uint32_t n) {
  auto c = node::Client::Connect(rt.host, rt.ports[n], cluster_id, node::wire::Role::kControl, kCallTimeout);
  if (!c.ok()) return c.status();
  auto m = (*c)->Call(node::wire::StatusRequest{}, kCallTimeout);
  if (!m.ok()) return m.status();
  if (auto* s = std::get_if<node::wire::StatusReply>(&*m)) return *s;
  return Status::Corruption(fmt::format("node {}: answered a status request with something else", n));
}

walfmt::Result<RealCluster> LoadRealCluster(const std::string& dir) {
  auto info = walfmt::LoadClusterInfo(dir);
  if (!info.ok()) return info.status();
  auto rt = node::LoadRuntimeInfo(dir);
  if (!rt.ok()) {
    if (rt.status().code() == walfmt::ErrorCode::kNotFound) {
      return Status::NotFound(fmt::format("{}: not a real cluster (no {}; `walcut run` clusters have no processes)",
                                          dir, node::kRuntimeFile));
    }
    return rt.status();
  }
  if (rt->ports.size() != info->nodes) {
    return Status::Corruption(
        fmt::format("{}/{}: {} ports for {} nodes", dir, node::kRuntimeFile, rt->ports.size(), info->nodes));
  }
  return RealCluster{std::move(*info), std::move(*rt)};
}

uint32_t FindInitiator(const std::string& dir, const RealCluster& l, std::string& last) {
  for (uint32_t n = 0; n < l.info.nodes; ++n) {
    if (!IsOurNode(l.rt.pids[n], dir, n)) continue;
    auto s = AskStatus(l.rt, l.info.cluster_id, n);
    if (s.ok() && s->ready && s->initiator < l.info.nodes) return s->initiator;
    if (!s.ok()) last = s.status().message();
  }
  return node::sim::kNoNode;
}

walfmt::Result<node::wire::Message> CallInitiator(const std::string& dir, const RealCluster& l,
                                                  const node::wire::Message& request,
                                                  std::chrono::steady_clock::time_point deadline, uint32_t& initiator) {
  std::string why = "no node is running";
  initiator = FindInitiator(dir, l, why);
  if (initiator == node::sim::kNoNode) return walfmt::Status::Io(why);
  auto c = node::Client::Connect(l.rt.host, l.rt.ports[initiator], l.info.cluster_id, node::wire::Role::kControl,
                                 kCallTimeout);
  if (!c.ok()) return c.status();
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return (*c)->Call(request, std::max(left, std::chrono::milliseconds(1)));
}

}  // namespace walcut::cli
