#include "cli/inputs.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>

#include <fmt/format.h>

#include "walfmt/cluster_layout.h"
#include "walfmt/segment.h"
#include "walfmt/source.h"
#include "walfmt/strings.h"

namespace walcut::cli {
namespace {

using walfmt::Result;
using walfmt::Status;

bool IsDir(const std::string& p) {
  struct stat sb {};
  return stat(p.c_str(), &sb) == 0 && S_ISDIR(sb.st_mode);
}

std::string BaseName(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

// "node-3" → 3 (walfmt/cluster_layout.h).
std::optional<uint32_t> NodeIdFromName(const std::string& name) { return walfmt::NodeIdFromDirName(name); }

// Reads a segment header; nullopt when unreadable (the scan reports why).
std::optional<walfmt::SegmentHeader> ReadHeader(const walfmt::SegmentFile& f) {
  auto src = walfmt::OpenSegmentSource(f.path, f.compressed);
  if (!src.ok()) return std::nullopt;
  const uint8_t* p = nullptr;
  size_t got = 0;
  if (!(*src)->Get(0, walfmt::kSegmentHeaderSize, p, got).ok()) return std::nullopt;
  walfmt::SegmentHeader h;
  walfmt::HeaderError err;
  if (!walfmt::DecodeSegmentHeader({p, got}, h, err)) return std::nullopt;
  return h;
}

std::optional<uint32_t> NodeIdFromHeader(const walfmt::SegmentFile& f) {
  if (auto h = ReadHeader(f)) return h->node_id;
  return std::nullopt;
}

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(n);
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

Status AddWalDir(const std::string& wal_dir, const std::string& label, std::optional<uint32_t> id, Inputs& in) {
  auto segs = walfmt::ListSegments(wal_dir, [&in](const walfmt::Problem& p) { in.problems.push_back(p); });
  if (!segs.ok()) return segs.status();
  NodeWal n;
  n.label = label;
  n.wal_dir = wal_dir;
  n.node_id = id;
  n.wal.expected_node = id;
  n.wal.segments = std::move(*segs);
  if (!n.node_id && !n.wal.segments.empty()) n.node_id = NodeIdFromHeader(n.wal.segments.front());
  in.nodes.push_back(std::move(n));
  return Status::Ok();
}

// One node of a cluster directory. A node without its WAL directory is a
// finding for the commands, not a reason to ignore the rest: it is listed
// with no segments. A WAL directory that exists but cannot be listed
// (permission, I/O error) fails the command (kIo), as it does for `cuts`.
Status AddClusterNode(const std::string& wal_dir, const std::string& node_dir, std::optional<uint32_t> id, Inputs& in) {
  Status st = AddWalDir(wal_dir, node_dir, id, in);
  if (st.ok()) return st;
  if (st.code() != walfmt::ErrorCode::kNotFound) return st;
  NodeWal empty;
  empty.label = node_dir;
  empty.wal_dir = wal_dir;
  empty.node_id = id;
  empty.wal.expected_node = id;
  in.nodes.push_back(std::move(empty));
  return Status::Ok();
}

// A directory given as input: a cluster (with or without cluster.json), a
// node directory, or a WAL directory.
Status AddDirectory(const std::string& path, Inputs& in) {
  // A cluster directory with a cluster.json: its nodes are the ones it
  // lists, where it says (the one parser, walfmt/cluster_layout.h).
  auto layout = walfmt::FindClusterLayout(path);
  if (!layout.ok() && layout.status().code() != walfmt::ErrorCode::kNotFound) return layout.status();
  if (layout.ok() && layout->has_cluster_json) {
    for (uint32_t id = 0; id < layout->wal_dirs.size(); ++id) {
      const std::string& wal = layout->wal_dirs[id];
      const std::string node_dir = BaseName(wal) == "wal" ? wal.substr(0, wal.rfind('/')) : wal;
      if (Status st = AddClusterNode(wal, node_dir, id, in); !st.ok()) return st;
    }
    return Status::Ok();
  }
  // Without one: every node-<i> directory in it.
  const std::vector<std::string> names = ListDir(path);
  std::vector<std::string> node_dirs;
  for (const std::string& n : names) {
    if (NodeIdFromName(n) && IsDir(walfmt::JoinPath(path, n))) node_dirs.push_back(n);
  }
  if (!node_dirs.empty()) {  // a cluster directory
    for (const std::string& n : node_dirs) {
      const std::string node_dir = walfmt::JoinPath(path, n);
      if (Status st = AddClusterNode(walfmt::JoinPath(node_dir, "wal"), node_dir, NodeIdFromName(n), in); !st.ok())
        return st;
    }
    return Status::Ok();
  }
  if (IsDir(walfmt::JoinPath(path, "wal"))) {  // a node directory
    if (Status st = AddWalDir(walfmt::JoinPath(path, "wal"), path, NodeIdFromName(BaseName(path)), in); !st.ok())
      return st;
    return Status::Ok();
  }
  const size_t before = in.nodes.size();
  if (Status st = AddWalDir(path, path, std::nullopt, in); !st.ok()) return st;
  if (in.nodes[before].wal.segments.empty()) {
    return Status::NotFound(fmt::format(
        "{}: no WAL here: expected a cluster directory (node-<i>/), a node directory (wal/) or segment files "
        "(<16 hex digits>.wal[.zst])",
        path));
  }
  const std::string parent = BaseName(path) == "wal"
                                 ? path.substr(0, path.rfind('/') == std::string::npos ? 0 : path.rfind('/'))
                                 : std::string();
  if (!parent.empty()) {
    if (auto id = NodeIdFromName(BaseName(parent))) {
      in.nodes[before].node_id = id;
      in.nodes[before].wal.expected_node = id;
    }
  }
  return Status::Ok();
}

}  // namespace

Result<Inputs> ResolveInputs(const std::vector<std::string>& paths) {
  Inputs in;
  std::map<std::optional<uint32_t>, std::vector<walfmt::SegmentFile>> loose;
  bool stdin_taken = false;
  for (const std::string& given : paths) {
    if (given == "-") {
      // Standard input: one segment, its index and node from its header.
      if (stdin_taken) return Status::InvalidArgument("- (standard input) given twice");
      stdin_taken = true;
      walfmt::SegmentFile f{walfmt::kStdinPath, 0, false};
      const auto h = ReadHeader(f);
      f.index = h ? h->segment_index : 0;
      loose[h ? std::optional<uint32_t>(h->node_id) : std::nullopt].push_back(f);
      continue;
    }
    // A file named like the stream is read as a file.
    const std::string path = given == walfmt::kStdinPath ? "./" + given : given;
    struct stat sb {};
    if (stat(path.c_str(), &sb) != 0) {
      // Nothing there is a usage error; anything else (permission, a
      // symlink loop, an I/O error) is a path that could not be read.
      const std::string m = fmt::format("{}: {}", path, std::strerror(errno));
      if (errno == ENOENT || errno == ENOTDIR) return Status::NotFound(m);
      return Status::Io(m);
    }
    if (S_ISREG(sb.st_mode)) {
      walfmt::SegmentFile f{path, 0, false};
      const std::string base = BaseName(path);
      if (!walfmt::ParseSegmentName(base, f.index, f.compressed)) {
        // Not named like a segment: read it as one anyway (the header check
        // says what it is); compressed if it ends in .zst.
        f.compressed = base.size() > 4 && base.substr(base.size() - 4) == ".zst";
        const auto h = ReadHeader(f);
        f.index = h ? h->segment_index : 0;
      }
      loose[NodeIdFromHeader(f)].push_back(f);
      continue;
    }
    if (!S_ISDIR(sb.st_mode)) return Status::Io(fmt::format("{}: not a regular file or directory", path));
    if (Status st = AddDirectory(path, in); !st.ok()) return st;
  }
  for (auto& [id, files] : loose) {
    std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) { return a.index < b.index; });
    NodeWal n;
    n.label = files.size() == 1 && files[0].path == walfmt::kStdinPath ? walfmt::kStdinPath : "segment files";
    n.node_id = id;
    n.wal.segments = std::move(files);
    in.nodes.push_back(std::move(n));
  }
  if (in.nodes.empty()) return Status::NotFound("no WAL found in the given paths");
  std::stable_sort(in.nodes.begin(), in.nodes.end(), [](const NodeWal& a, const NodeWal& b) {
    return a.node_id.value_or(UINT32_MAX) < b.node_id.value_or(UINT32_MAX);
  });
  return in;
}

}  // namespace walcut::cli
