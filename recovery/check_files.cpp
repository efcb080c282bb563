// Level files of `walcut check` (recovery/check.h): every segment of every
// node verified in salvage mode, segments verified clean before and unchanged
// since skipped by the state file, and the state file written back.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "recovery/check_internal.h"
#include "walfmt/crc32c.h"
#include "walfmt/parallel_scan.h"
#include "walfmt/reader.h"

namespace walcut::recovery::check_detail {
namespace {
using walfmt::Result;
using walfmt::Status;

struct FileStat {
  bool ok = false;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
};

FileStat StatFile(const std::string& path) {
  struct stat sb {};
  FileStat f;
  if (::stat(path.c_str(), &sb) != 0) return f;
  f.ok = true;
  f.size = static_cast<uint64_t>(sb.st_size);
  f.mtime_ns = static_cast<int64_t>(sb.st_mtim.tv_sec) * 1000000000 + sb.st_mtim.tv_nsec;
  return f;
}

// CRC32C of a file's bytes, and of its first `prefix` bytes (the size it had
// when it was last verified: an appended segment keeps that prefix).
struct FileCrc {
  uint32_t all = 0;
  uint32_t prefix = 0;
  uint64_t bytes = 0;
};
Result<FileCrc> CrcOfFile(const std::string& path, uint64_t prefix) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::Io(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  FileCrc c;
  std::vector<char> buf(1 << 20);  // bounded: 1 MiB at a time
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      return Status::Io(fmt::format("{}: read error: {}", path, why));
    }
    if (n == 0) break;
    const uint64_t len = static_cast<uint64_t>(n);
    if (c.bytes < prefix) {
      const uint64_t take = std::min(len, prefix - c.bytes);
      c.prefix = walfmt::crc32c::Extend(c.prefix, buf.data(), take);
    }
    c.all = walfmt::crc32c::Extend(c.all, buf.data(), len);
    c.bytes += len;
  }
  ::close(fd);
  if (c.bytes <= prefix) c.prefix = c.all;
  return c;
}

std::string FileName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

CheckFinding FromProblem(const walfmt::Problem& p, std::optional<uint32_t> node) {
  CheckFinding f;
  f.check = std::string(walfmt::ProblemKindName(p.kind));
  f.node = p.node_known ? std::optional<uint32_t>(p.node) : node;
  f.file = p.file;
  if (p.kind != walfmt::ProblemKind::kIo || p.segment != 0 || p.offset != 0) f.position = p.lsn();
  f.expected = p.expected;
  f.found = p.actual;
  f.message = p.ToString();
  return f;
}

// One node's segments before the scan: what is listed, and from which
// segment on they are read.
struct NodeFiles {
  uint32_t node = 0;
  std::vector<walfmt::SegmentFile> segments;
  std::vector<walfmt::Problem> problems;  // found listing the directory
  std::vector<FileStat> stats;            // by segment
  size_t first_read = 0;                  // the first segment scanned; segments.size(): none
};

// What a verified segment held, against what it holds now.
struct StateCompare {
  bool changed = false;             // it shrank, or its old bytes changed
  std::optional<uint32_t> crc_now;  // of the whole file, when it could be read
};

CheckFinding ShrankFinding(const walfmt::SegmentFile& sf, uint32_t node, const SegmentState& old, const FileCrc& c) {
  CheckFinding f;
  f.check = "segment-changed";
  f.node = node;
  f.file = sf.path;
  f.expected = fmt::format("{} bytes, crc32c {:08x}", old.size, old.crc32c);
  f.found = fmt::format("{} bytes, crc32c {:08x}", c.bytes, c.all);
  f.message = fmt::format("segment {} of node {} shrank since it was verified: {} -> {} bytes ({})", sf.index, node,
                          old.size, c.bytes, sf.path);
  return f;
}

CheckFinding ChangedFinding(const walfmt::SegmentFile& sf, uint32_t node, const SegmentState& old, const FileCrc& c) {
  CheckFinding f;
  f.check = "segment-changed";
  f.node = node;
  f.file = sf.path;
  f.expected = fmt::format("crc32c {:08x}", old.crc32c);
  f.found = fmt::format("crc32c {:08x}", c.prefix);
  f.message = fmt::format(
      "segment {} of node {} changed since it was verified: crc32c {:08x} -> {:08x}{} ({})", sf.index, node, old.crc32c,
      c.prefix, c.bytes > old.size ? fmt::format(" over its first {} bytes", old.size) : std::string(), sf.path);
  return f;
}

// The files level over every node: plan what to read, scan it, report.
class FilesLevel {
 public:
  FilesLevel(const CheckOptions& opt, CheckReport& rep) : opt_(opt), rep_(rep), use_state_(!opt.state_path.empty()) {}

  void Run(const walfmt::ClusterLayout& layout) {
    if (!LoadState()) return;
    next_ = state_;
    const size_t n_nodes = layout.wal_dirs.size();
    rep_.files.nodes = n_nodes;
    std::vector<NodeFiles> nodes(n_nodes);
    for (size_t n = 0; n < n_nodes; ++n) nodes[n] = ListNode(layout.wal_dirs[n], NodeId(n));
    const auto outcomes = Scan(nodes);
    for (size_t n = 0; n < n_nodes; ++n) ReportNode(nodes[n], outcomes[n]);
    ReportClusters();
    if (use_state_ && rep_.errors.empty()) WriteState();
  }

 private:
  uint32_t NodeId(size_t n) const { return opt_.node ? *opt_.node : static_cast<uint32_t>(n); }

  // False when the state file exists but cannot be read (an error).
  bool LoadState() {
    if (!use_state_) return true;
    auto st = ReadCheckState(opt_.state_path);
    if (st.ok()) {
      state_ = std::move(*st);
      rep_.files.state_used = true;
    } else if (st.status().code() != walfmt::ErrorCode::kNotFound) {
      rep_.errors.push_back(st.status().message());
      return false;
    }
    return true;
  }

  // Whether the state file holds this segment as it is now (same name, size
  // and mtime), so that it need not be read.
  bool Unchanged(uint32_t node, const walfmt::SegmentFile& sf, const FileStat& st) const {
    if (!use_state_ || opt_.full) return false;
    auto it = state_.nodes.find(node);
    if (it == state_.nodes.end()) return false;
    auto jt = it->second.find(sf.index);
    return jt != it->second.end() && st.ok && jt->second.file == FileName(sf.path) && jt->second.size == st.size &&
           jt->second.mtime_ns == st.mtime_ns;
  }

  NodeFiles ListNode(const std::string& wal_dir, uint32_t node) {
    NodeFiles nf;
    nf.node = node;
    auto segs = walfmt::ListSegments(wal_dir, [&](const walfmt::Problem& p) { nf.problems.push_back(p); });
    if (segs.ok()) {
      nf.segments = std::move(*segs);
    } else if (segs.status().code() != walfmt::ErrorCode::kNotFound) {
      // The directory is there but cannot be listed: could not read (exit
      // 3), not a node without segments.
      walfmt::Problem p;
      p.kind = walfmt::ProblemKind::kIo;
      p.node = node;
      p.node_known = true;
      p.file = wal_dir;
      p.detail = segs.status().message();
      nf.problems.push_back(p);
    }
    if (nf.segments.empty() && (segs.ok() || segs.status().code() == walfmt::ErrorCode::kNotFound)) {
      walfmt::Problem p;
      p.kind = walfmt::ProblemKind::kMissingSegment;
      p.node = node;
      p.node_known = true;
      p.file = wal_dir;
      p.detail = "node has no WAL segments (expected wal/<index>.wal)";
      nf.problems.push_back(p);
    }
    rep_.files.segments += nf.segments.size();
    nf.stats.resize(nf.segments.size());
    size_t first = nf.segments.size();
    for (size_t s = 0; s < nf.segments.size(); ++s) {
      nf.stats[s] = StatFile(nf.segments[s].path);
      if (first == nf.segments.size() && !Unchanged(node, nf.segments[s], nf.stats[s])) first = s;
    }
    // The segment before the first one to read is read too, so that the
    // continuity between the two is checked (the chain fields of a header
    // name the end of its predecessor).
    nf.first_read = first == nf.segments.size() ? first : (first > 0 ? first - 1 : 0);
    return nf;
  }

  std::vector<std::vector<walfmt::SegmentOutcome>> Scan(const std::vector<NodeFiles>& nodes) const {
    std::vector<walfmt::NodeSegments> to_scan(nodes.size());
    uint64_t total_to_read = 0;
    for (size_t n = 0; n < nodes.size(); ++n) {
      const NodeFiles& nf = nodes[n];
      to_scan[n].expected_node = nf.node;
      to_scan[n].segments.assign(nf.segments.begin() + static_cast<std::ptrdiff_t>(nf.first_read), nf.segments.end());
      if (opt_.progress) {
        for (const auto& f : to_scan[n].segments) total_to_read += walfmt::SegmentDataBytes(f.path, f.compressed);
      }
    }
    walfmt::ParallelScanOptions po;
    po.mode = walfmt::RecoveryMode::kSalvage;  // find every problem, not just the first
    po.jobs = opt_.jobs;
    po.progress = [this, total_to_read](uint64_t, uint64_t b) { Progress(opt_, "files", b, total_to_read); };
    return walfmt::ScanInParallel(to_scan, po);
  }

  void ReportNode(const NodeFiles& nf, const std::vector<walfmt::SegmentOutcome>& outcomes) {
    const std::string group = fmt::format("node-{}", nf.node);
    rep_.files.per_node[nf.node];  // listed even when it has no segment
    if (!nf.problems.empty()) ReportSegmentList(nf, group);
    auto& prev_state = state_.nodes[nf.node];
    auto& next_state = next_.nodes[nf.node];
    std::set<uint64_t> present;
    for (size_t s = 0; s < nf.segments.size(); ++s) {
      present.insert(nf.segments[s].index);
      if (s < nf.first_read) {
        ReportSkipped(nf, s);
      } else {
        ReportRead(nf, s, outcomes[s - nf.first_read], group, prev_state, next_state);
      }
    }
    ReportGone(nf.node, group, prev_state, present);
    if (next_state.empty()) next_.nodes.erase(nf.node);
  }

  void ReportSegmentList(const NodeFiles& nf, const std::string& group) {
    CheckItem it = MakeItem(CheckLevel::kFiles, group, "segment list");
    for (const auto& p : nf.problems) {
      if (p.fatal)
        it.findings.push_back(FromProblem(p, nf.node));
      else
        it.note += (it.note.empty() ? "" : "; ") + p.ToString();
      if (p.kind == walfmt::ProblemKind::kIo) rep_.errors.push_back(p.ToString());
    }
    it.outcome = it.findings.empty() ? ItemOutcome::kPass : ItemOutcome::kFail;
    rep_.items.push_back(std::move(it));
  }

  // A segment unchanged since the state file's run is counted, not listed:
  // it is not a check of this run (every format shows the count).
  void ReportSkipped(const NodeFiles& nf, size_t s) {
    ++rep_.files.segments_skipped;
    rep_.files.bytes_skipped += nf.stats[s].size;
    NodeFilesRead& n = rep_.files.per_node[nf.node];
    ++n.segments_skipped;
    n.bytes_skipped += nf.stats[s].size;
  }

  void ReportRead(const NodeFiles& nf, size_t s, const walfmt::SegmentOutcome& oc, const std::string& group,
                  const std::map<uint64_t, SegmentState>& prev_state, std::map<uint64_t, SegmentState>& next_state) {
    const walfmt::SegmentFile& sf = nf.segments[s];
    CheckItem it = MakeItem(CheckLevel::kFiles, group, fmt::format("segment {}", FileName(sf.path)));
    ++rep_.files.segments_read;
    rep_.files.bytes_read += nf.stats[s].size;
    rep_.files.records += oc.scan.records;
    NodeFilesRead& n = rep_.files.per_node[nf.node];
    ++n.segments_read;
    n.bytes_read += nf.stats[s].size;
    n.records += oc.scan.records;
    if (oc.scan.header_ok) clusters_.insert(oc.scan.header.cluster_id);
    if (oc.scan.end == walfmt::SegmentEnd::kTornTail) ++rep_.files.torn_tails;
    bool clean = oc.scan.end == walfmt::SegmentEnd::kClean;
    for (const auto& p : oc.problems) {
      if (p.kind == walfmt::ProblemKind::kIo) rep_.errors.push_back(p.ToString());
      if (p.fatal) {
        it.findings.push_back(FromProblem(p, nf.node));
      } else {
        it.note += (it.note.empty() ? "" : "; ") + p.ToString() + " (tolerated: the end of the WAL)";
      }
      clean = false;
    }
    const StateCompare cmp = CompareWithState(sf, nf.node, prev_state, it);
    it.outcome = it.findings.empty() ? ItemOutcome::kPass : ItemOutcome::kFail;
    if (use_state_ && !cmp.changed) {
      // Only a segment verified clean is recorded; a changed one keeps its
      // old entry, so the finding repeats until someone looks at it.
      const FileStat& st = nf.stats[s];
      if (clean && it.findings.empty() && cmp.crc_now && st.ok) {
        next_state[sf.index] = SegmentState{FileName(sf.path), sf.index, st.size, st.mtime_ns, *cmp.crc_now};
      } else {
        next_state.erase(sf.index);
      }
    }
    rep_.items.push_back(std::move(it));
  }

  // A segment verified before must still hold the bytes it held then
  // (a live segment may have grown: its old prefix must be unchanged).
  StateCompare CompareWithState(const walfmt::SegmentFile& sf, uint32_t node,
                                const std::map<uint64_t, SegmentState>& prev_state, CheckItem& it) {
    StateCompare cmp;
    if (!use_state_) return cmp;
    auto old = prev_state.find(sf.index);
    const bool same_file = old != prev_state.end() && old->second.file == FileName(sf.path);
    auto c = CrcOfFile(sf.path, same_file ? old->second.size : 0);
    if (!c.ok()) {
      rep_.errors.push_back(c.status().message());
      return cmp;
    }
    cmp.crc_now = c->all;
    if (same_file && c->bytes < old->second.size) {
      it.findings.push_back(ShrankFinding(sf, node, old->second, *c));
      cmp.changed = true;
    } else if (same_file && c->prefix != old->second.crc32c) {
      it.findings.push_back(ChangedFinding(sf, node, old->second, *c));
      cmp.changed = true;
    }
    return cmp;
  }

  // Verified segments that are gone.
  void ReportGone(uint32_t node, const std::string& group, const std::map<uint64_t, SegmentState>& prev_state,
                  const std::set<uint64_t>& present) {
    for (const auto& [index, st] : prev_state) {
      if (present.count(index)) continue;
      CheckItem it = MakeItem(CheckLevel::kFiles, group, fmt::format("segment {}", st.file));
      it.outcome = ItemOutcome::kFail;
      CheckFinding f;
      f.check = "segment-changed";
      f.node = node;
      f.file = st.file;
      f.expected = fmt::format("{} bytes, crc32c {:08x}", st.size, st.crc32c);
      f.found = "no such segment";
      f.message = fmt::format("segment {} of node {} ({}) disappeared since it was verified", index, node, st.file);
      it.findings.push_back(std::move(f));
      rep_.items.push_back(std::move(it));
    }
  }

  void ReportClusters() {
    if (clusters_.size() <= 1) return;
    CheckItem it = MakeItem(CheckLevel::kFiles, "cluster", "one cluster");
    it.outcome = ItemOutcome::kFail;
    CheckFinding f;
    f.check = "segment-mismatch";
    f.expected = "1 cluster id";
    f.found = fmt::format("{} cluster ids", clusters_.size());
    f.message = fmt::format("segments of {} different clusters are in one cluster directory", clusters_.size());
    it.findings.push_back(std::move(f));
    rep_.items.push_back(std::move(it));
  }

  void WriteState() {
    if (Status st = WriteCheckState(opt_.state_path, next_); !st.ok()) {
      rep_.errors.push_back(st.message());
    } else {
      rep_.files.state_written = true;
    }
  }

  const CheckOptions& opt_;
  CheckReport& rep_;
  const bool use_state_;
  CheckState state_;             // as the state file has it
  CheckState next_;              // what this run writes back
  std::set<uint64_t> clusters_;  // cluster ids in the segment headers read
};

}  // namespace

void RunFiles(const CheckOptions& opt, const walfmt::ClusterLayout& layout, CheckReport& rep) {
  FilesLevel(opt, rep).Run(layout);
}

}  // namespace walcut::recovery::check_detail
