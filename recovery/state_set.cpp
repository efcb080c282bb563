#include "recovery/state_set.h"

#include <charconv>
#include <filesystem>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "walfmt/file_io.h"
#include "walfmt/json_fields.h"
#include "walfmt/text_escape.h"

namespace walcut::recovery {
namespace {

namespace fs = std::filesystem;
using walfmt::Status;

// A snapshot directory holds at most this many node files (cluster_info.cpp
// caps the node count of a cluster at the same value).
constexpr uint32_t kMaxNodeFiles = 1024;

// "node-<i>.snap" with i in decimal, no sign and no leading zero.
bool ParseNodeFileName(std::string_view name, uint32_t& id) {
  constexpr std::string_view kPrefix = "node-", kSuffix = ".snap";
  if (name.size() <= kPrefix.size() + kSuffix.size() || name.substr(0, kPrefix.size()) != kPrefix ||
      name.substr(name.size() - kSuffix.size()) != kSuffix) {
    return false;
  }
  const std::string_view digits = name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  if (digits.size() > 1 && digits[0] == '0') return false;
  auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), id);
  return ec == std::errc() && p == digits.data() + digits.size();
}

std::string NodeFile(const std::string& dir, uint32_t i) { return fmt::format("{}/node-{}.snap", dir, i); }

// DIR without trailing slashes, as an absolute, normalised path.
fs::path Normalised(const std::string& dir) {
  std::error_code ec;
  fs::path p = fs::absolute(dir, ec);
  if (ec) p = dir;
  p = p.lexically_normal();
  if (p.filename().empty() && p.has_parent_path()) p = p.parent_path();
  return p;
}

std::optional<walfmt::FullSnapshotInfo> ListedSnapshot(const walfmt::ClusterInfo& ci, const std::string& snapshot_dir) {
  const std::string name = Normalised(snapshot_dir).filename().string();
  for (const auto& s : ci.full_snapshots) {
    if (s.name == name || fs::path(s.dir).lexically_normal().filename() == name) return s;
  }
  return std::nullopt;
}

}  // namespace

std::vector<const NodeState*> StatesOf(const StateSet& s) {
  std::vector<const NodeState*> v;
  v.reserve(s.nodes.size());
  for (const auto& n : s.nodes) v.push_back(&n.entries);
  return v;
}

bool IsSnapshotDir(const std::string& dir) {
  std::error_code ec;
  return fs::is_regular_file(NodeFile(dir, 0), ec);
}

walfmt::Result<StateSet> LoadStateSet(const std::string& dir, const LoadOptions& options) {
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (!fs::exists(st)) return Status::NotFound(fmt::format("{}: no such directory", dir));
  if (!fs::is_directory(st)) return Status::NotFound(fmt::format("{}: not a directory", dir));

  std::set<uint32_t> ids;
  fs::directory_iterator it(dir, ec);
  if (ec) return Status::Io(fmt::format("{}: cannot list: {}", dir, ec.message()));
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    uint32_t id = 0;
    if (ParseNodeFileName(it->path().filename().string(), id)) {
      if (id >= kMaxNodeFiles) {
        return Status::InvalidArgument(
            fmt::format("{}: node id {} is beyond the limit of {} nodes", it->path().string(), id, kMaxNodeFiles));
      }
      ids.insert(id);
    }
  }
  if (ec) return Status::Io(fmt::format("{}: cannot list: {}", dir, ec.message()));
  if (ids.empty()) {
    return Status::NotFound(fmt::format("{}: not a snapshot directory (no node-<i>.snap files)", dir));
  }
  const uint32_t count = static_cast<uint32_t>(ids.size());
  for (uint32_t i = 0; i < count; ++i) {
    if (ids.count(i) == 0) {
      return Status::NotFound(fmt::format("{}: missing (the directory holds node files up to node-{}.snap)",
                                          NodeFile(dir, i), *ids.rbegin()));
    }
  }
  if (options.expected_nodes) {
    const uint32_t want = *options.expected_nodes;
    const std::string from =
        options.expected_from.empty() ? std::string() : fmt::format(" in {}", options.expected_from);
    if (count < want) {
      return Status::NotFound(
          fmt::format("{}: missing (the cluster has {} nodes{})", NodeFile(dir, count), want, from));
    }
    if (count > want) {
      return Status::InvalidArgument(
          fmt::format("{}: {} node files, but the cluster has {} nodes{}", dir, count, want, from));
    }
  }

  StateSet set;
  set.dir = dir;
  for (uint32_t i = 0; i < count; ++i) {
    const std::string path = NodeFile(dir, i);
    auto snap = walfmt::ReadSnapshotFile(path);
    if (!snap.ok()) {
      // The file was listed a moment ago: failing to open it now is I/O.
      if (snap.status().code() == walfmt::ErrorCode::kNotFound) return Status::Io(snap.status().message());
      return snap.status();
    }
    if (snap->node_id != i) {
      return Status::Corruption(fmt::format("{}: header names node {}, expected {}", path, snap->node_id, i));
    }
    if (i > 0 && snap->cluster_id != set.nodes[0].cluster_id) {
      return Status::Corruption(fmt::format("{}: header names cluster {:016x}, node-0.snap cluster {:016x}", path,
                                            snap->cluster_id, set.nodes[0].cluster_id));
    }
    if (i == 0 && options.expected_cluster_id && snap->cluster_id != *options.expected_cluster_id) {
      return Status::InvalidArgument(
          fmt::format("{}: belongs to cluster {:016x}, not to cluster {:016x}{}", path, snap->cluster_id,
                      *options.expected_cluster_id,
                      options.expected_from.empty() ? std::string() : " of " + options.expected_from));
    }
    const uint64_t size = fs::file_size(path, ec);
    set.file_bytes.push_back(ec ? 0 : size);
    set.nodes.push_back(std::move(snap).value());
  }
  return set;
}

walfmt::Result<ClusterInfoSource> ClusterInfoFromDir(const std::string& cluster_dir, const std::string& snapshot_dir) {
  auto ci = walfmt::LoadClusterInfo(cluster_dir);
  if (!ci.ok()) return ci.status();
  ClusterInfoSource src;
  src.path = cluster_dir + "/cluster.json";
  src.full_snapshot = ListedSnapshot(*ci, snapshot_dir);
  src.info = std::move(ci).value();
  return src;
}

walfmt::Result<ClusterInfoSource> FindClusterInfoFor(const std::string& snapshot_dir) {
  std::error_code ec;
  const std::string manifest = snapshot_dir + "/manifest.json";
  if (fs::is_regular_file(manifest, ec)) {
    auto text = walfmt::ReadWholeFile(manifest, walfmt::kMaxJsonFileBytes);
    if (!text.ok()) return text.status();
    nlohmann::json doc;
    try {
      doc = nlohmann::json::parse(*text);
    } catch (const nlohmann::json::exception& e) {
      std::string what = e.what();
      if (const size_t at = what.find("] "); at != std::string::npos) what = what.substr(at + 2);
      return Status::Corruption(fmt::format("{}: not valid JSON: {}", manifest, what));
    }
    walfmt::JsonFields f(manifest);
    const nlohmann::json* cluster = f.Object(doc, "cluster", "");
    if (cluster == nullptr) return f.status();
    auto ci = walfmt::ParseClusterInfo(walfmt::DumpJson(*cluster), manifest + " (cluster)");
    if (!ci.ok()) return ci.status();
    ClusterInfoSource src;
    src.path = manifest;
    src.from_manifest = true;
    src.info = std::move(ci).value();
    return src;
  }
  const fs::path p = Normalised(snapshot_dir);
  if (p.parent_path().filename() == "snapshots") {
    const std::string cluster_dir = p.parent_path().parent_path().string();
    if (fs::is_regular_file(cluster_dir + "/cluster.json", ec)) return ClusterInfoFromDir(cluster_dir, snapshot_dir);
  }
  return Status::NotFound(fmt::format(
      "{}: no manifest.json, and not CLUSTER/snapshots/<name> with a CLUSTER/cluster.json (name the cluster with "
      "--cluster)",
      snapshot_dir));
}

}  // namespace walcut::recovery
