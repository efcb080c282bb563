#include "recovery/check.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cut/load.h"
#include "recovery/invariants.h"
#include "recovery/part.h"
#include "walfmt/crc32c.h"
#include "walfmt/file_io.h"
#include "walfmt/parallel_scan.h"
#include "walfmt/reader.h"
#include "walfmt/snapshot.h"

namespace walcut::recovery {
namespace fs = std::filesystem;
using nlohmann::json;
using walfmt::Lsn;
using walfmt::Result;
using walfmt::Status;

const char* CheckLevelName(CheckLevel l) {
  switch (l) {
    case CheckLevel::kFiles: return "files";
    case CheckLevel::kCuts: return "cuts";
    case CheckLevel::kRestore: return "restore";
  }
  return "?";
}

bool ParseCheckLevel(const std::string& s, CheckLevel& out) {
  if (s == "files") out = CheckLevel::kFiles;
  else if (s == "cuts") out = CheckLevel::kCuts;
  else if (s == "restore") out = CheckLevel::kRestore;
  else return false;
  return true;
}

const char* ItemOutcomeName(ItemOutcome o) {
  switch (o) {
    case ItemOutcome::kPass: return "pass";
    case ItemOutcome::kFail: return "fail";
    case ItemOutcome::kSkipped: return "skipped";
  }
  return "?";
}

uint64_t CheckReport::FailedItems() const {
  uint64_t n = 0;
  for (const auto& i : items) n += i.outcome == ItemOutcome::kFail;
  return n;
}

uint64_t CheckReport::Findings() const {
  uint64_t n = 0;
  for (const auto& i : items) n += i.findings.size();
  return n;
}

int CheckExitCode(const CheckReport& r) {
  if (!r.errors.empty()) return 3;
  return r.FailedItems() > 0 ? 1 : 0;
}

// ---- state file -------------------------------------------------------------

std::string CheckStateToJson(const CheckState& s) {
  json nodes = json::array();
  for (const auto& [node, segs] : s.nodes) {
    json js = json::array();
    for (const auto& [index, st] : segs) {
      js.push_back({{"file", st.file},
                    {"index", st.index},
                    {"size", st.size},
                    {"mtime_ns", st.mtime_ns},
                    {"crc32c", fmt::format("{:08x}", st.crc32c)}});
    }
    nodes.push_back({{"node", node}, {"segments", js}});
  }
  return json{{"schema", kCheckStateSchema}, {"nodes", nodes}}.dump(2) + "\n";
}

Result<CheckState> CheckStateFromJson(const std::string& text, const std::string& origin) {
  const json j = json::parse(text, nullptr, false);
  auto bad = [&origin](const std::string& why) {
    return Status::InvalidArgument(fmt::format("{}: not a {} state file: {}", origin, kCheckStateSchema, why));
  };
  if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
  if (!j.contains("schema") || j["schema"] != kCheckStateSchema) return bad("schema is not \"walcut.check-state/1\"");
  if (!j.contains("nodes") || !j["nodes"].is_array()) return bad("no \"nodes\" array");
  CheckState s;
  for (const json& n : j["nodes"]) {
    if (!n.is_object() || !n.contains("node") || !n["node"].is_number_unsigned() || !n.contains("segments") ||
        !n["segments"].is_array()) {
      return bad("a node entry lacks \"node\" or \"segments\"");
    }
    auto& segs = s.nodes[n["node"].get<uint32_t>()];
    for (const json& g : n["segments"]) {
      if (!g.is_object() || !g.contains("file") || !g["file"].is_string() || !g.contains("index") ||
          !g["index"].is_number_unsigned() || !g.contains("size") || !g["size"].is_number_unsigned() ||
          !g.contains("mtime_ns") || !g["mtime_ns"].is_number_integer() || !g.contains("crc32c") ||
          !g["crc32c"].is_string()) {
        return bad("a segment entry lacks file, index, size, mtime_ns or crc32c");
      }
      SegmentState st;
      st.file = g["file"].get<std::string>();
      st.index = g["index"].get<uint64_t>();
      st.size = g["size"].get<uint64_t>();
      st.mtime_ns = g["mtime_ns"].get<int64_t>();
      const std::string crc = g["crc32c"].get<std::string>();
      char* end = nullptr;
      const unsigned long v = std::strtoul(crc.c_str(), &end, 16);
      if (crc.size() != 8 || end != crc.c_str() + crc.size()) return bad("crc32c is not 8 hex digits");
      st.crc32c = static_cast<uint32_t>(v);
      segs[st.index] = st;
    }
  }
  return s;
}

Result<CheckState> ReadCheckState(const std::string& path) {
  auto text = walfmt::ReadWholeFile(path, walfmt::kMaxJsonFileBytes);
  if (!text.ok()) return text.status();
  return CheckStateFromJson(*text, path);
}

Status WriteCheckState(const std::string& path, const CheckState& s) {
  return walfmt::WriteFileAtomic(path, CheckStateToJson(s));
}

namespace {

// ---- files level -------------------------------------------------------------

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

void Progress(const CheckOptions& opt, const char* phase, uint64_t done, uint64_t total, uint64_t bytes) {
  if (opt.progress) opt.progress(phase, done, total, bytes);
}

void RunFiles(const CheckOptions& opt, const cut::ClusterLayout& layout, CheckReport& rep) {
  const bool use_state = !opt.state_path.empty();
  CheckState state;
  if (use_state) {
    auto st = ReadCheckState(opt.state_path);
    if (st.ok()) {
      state = std::move(*st);
      rep.files.state_used = true;
    } else if (st.status().code() != walfmt::ErrorCode::kNotFound) {
      rep.errors.push_back(st.status().message());
      return;
    }
  }
  CheckState next = state;

  const size_t n_nodes = layout.wal_dirs.size();
  rep.files.nodes = n_nodes;
  std::vector<std::vector<walfmt::SegmentFile>> all(n_nodes);
  std::vector<std::vector<walfmt::Problem>> node_problems(n_nodes);
  std::vector<walfmt::NodeSegments> to_scan(n_nodes);
  std::vector<size_t> first_read(n_nodes, 0);  // index into all[n] of the first segment scanned
  std::vector<std::vector<FileStat>> stats(n_nodes);
  uint64_t total_to_read = 0;

  for (size_t n = 0; n < n_nodes; ++n) {
    const uint32_t node = opt.node ? *opt.node : static_cast<uint32_t>(n);
    auto segs = walfmt::ListSegments(layout.wal_dirs[n], [&](const walfmt::Problem& p) {
      node_problems[n].push_back(p);
    });
    if (segs.ok()) {
      all[n] = std::move(*segs);
    } else if (segs.status().code() != walfmt::ErrorCode::kNotFound) {
      // The directory is there but cannot be listed: could not read (exit
      // 3), not a node without segments.
      walfmt::Problem p;
      p.kind = walfmt::ProblemKind::kIo;
      p.node = node;
      p.node_known = true;
      p.file = layout.wal_dirs[n];
      p.detail = segs.status().message();
      node_problems[n].push_back(p);
    }
    if (all[n].empty() && (segs.ok() || segs.status().code() == walfmt::ErrorCode::kNotFound)) {
      walfmt::Problem p;
      p.kind = walfmt::ProblemKind::kMissingSegment;
      p.node = node;
      p.node_known = true;
      p.file = layout.wal_dirs[n];
      p.detail = "node has no WAL segments (expected wal/<index>.wal)";
      node_problems[n].push_back(p);
    }
    rep.files.segments += all[n].size();
    stats[n].resize(all[n].size());
    size_t first = all[n].size();
    for (size_t s = 0; s < all[n].size(); ++s) {
      stats[n][s] = StatFile(all[n][s].path);
      if (first != all[n].size()) continue;
      bool unchanged = false;
      if (use_state && !opt.full) {
        auto it = state.nodes.find(node);
        if (it != state.nodes.end()) {
          auto jt = it->second.find(all[n][s].index);
          unchanged = jt != it->second.end() && stats[n][s].ok && jt->second.file == FileName(all[n][s].path) &&
                      jt->second.size == stats[n][s].size && jt->second.mtime_ns == stats[n][s].mtime_ns;
        }
      }
      if (!unchanged) first = s;
    }
    // The segment before the first one to read is read too, so that the
    // continuity between the two is checked (the chain fields of a header
    // name the end of its predecessor).
    first_read[n] = first == all[n].size() ? first : (first > 0 ? first - 1 : 0);
    to_scan[n].expected_node = node;
    to_scan[n].segments.assign(all[n].begin() + static_cast<std::ptrdiff_t>(first_read[n]), all[n].end());
    total_to_read += to_scan[n].segments.size();
  }

  walfmt::ParallelScanOptions po;
  po.mode = walfmt::RecoveryMode::kSalvage;  // find every problem, not just the first
  po.jobs = opt.jobs;
  po.progress = [&opt, total_to_read](uint64_t d, uint64_t b) { Progress(opt, "verify", d, total_to_read, b); };
  const auto outcomes = walfmt::ScanInParallel(to_scan, po);

  std::set<uint64_t> clusters;
  for (size_t n = 0; n < n_nodes; ++n) {
    const uint32_t node = opt.node ? *opt.node : static_cast<uint32_t>(n);
    const std::string group = fmt::format("node-{}", node);
    if (!node_problems[n].empty()) {
      CheckItem it;
      it.level = CheckLevel::kFiles;
      it.group = group;
      it.name = "segment list";
      for (const auto& p : node_problems[n]) {
        if (p.fatal) it.findings.push_back(FromProblem(p, node));
        else it.note += (it.note.empty() ? "" : "; ") + p.ToString();
        if (p.kind == walfmt::ProblemKind::kIo) rep.errors.push_back(p.ToString());
      }
      it.outcome = it.findings.empty() ? ItemOutcome::kPass : ItemOutcome::kFail;
      rep.items.push_back(std::move(it));
    }
    auto& prev_state = state.nodes[node];
    auto& next_state = next.nodes[node];
    std::set<uint64_t> present;
    for (size_t s = 0; s < all[n].size(); ++s) {
      const walfmt::SegmentFile& sf = all[n][s];
      present.insert(sf.index);
      CheckItem it;
      it.level = CheckLevel::kFiles;
      it.group = group;
      it.name = fmt::format("segment {}", FileName(sf.path));
      if (s < first_read[n]) {
        it.outcome = ItemOutcome::kSkipped;
        it.note = "unchanged since it was verified (same size and mtime in the state file)";
        ++rep.files.segments_skipped;
        rep.files.bytes_skipped += stats[n][s].size;
        rep.items.push_back(std::move(it));
        continue;
      }
      const walfmt::SegmentOutcome& oc = outcomes[n][s - first_read[n]];
      ++rep.files.segments_read;
      rep.files.bytes_read += stats[n][s].size;
      rep.files.records += oc.scan.records;
      if (oc.scan.header_ok) clusters.insert(oc.scan.header.cluster_id);
      if (oc.scan.end == walfmt::SegmentEnd::kTornTail) ++rep.files.torn_tails;
      bool clean = oc.scan.end == walfmt::SegmentEnd::kClean;
      for (const auto& p : oc.problems) {
        if (p.kind == walfmt::ProblemKind::kIo) rep.errors.push_back(p.ToString());
        if (p.fatal) {
          it.findings.push_back(FromProblem(p, node));
          clean = false;
        } else {
          it.note += (it.note.empty() ? "" : "; ") + p.ToString() + " (tolerated: the end of the WAL)";
          clean = false;
        }
      }
      // A segment verified before must still hold the bytes it held then
      // (a live segment may have grown: its old prefix must be unchanged).
      bool changed = false;
      auto old = prev_state.find(sf.index);
      std::optional<uint32_t> crc_now;
      if (use_state) {
        const bool same_file = old != prev_state.end() && old->second.file == FileName(sf.path);
        auto c = CrcOfFile(sf.path, same_file ? old->second.size : 0);
        if (!c.ok()) {
          rep.errors.push_back(c.status().message());
        } else {
          crc_now = c->all;
          if (same_file && c->bytes < old->second.size) {
            CheckFinding f;
            f.check = "segment-changed";
            f.node = node;
            f.file = sf.path;
            f.expected = fmt::format("{} bytes, crc32c {:08x}", old->second.size, old->second.crc32c);
            f.found = fmt::format("{} bytes, crc32c {:08x}", c->bytes, c->all);
            f.message = fmt::format("segment {} of node {} shrank since it was verified: {} -> {} bytes ({})",
                                    sf.index, node, old->second.size, c->bytes, sf.path);
            it.findings.push_back(std::move(f));
            changed = true;
          } else if (same_file && c->prefix != old->second.crc32c) {
            CheckFinding f;
            f.check = "segment-changed";
            f.node = node;
            f.file = sf.path;
            f.expected = fmt::format("crc32c {:08x}", old->second.crc32c);
            f.found = fmt::format("crc32c {:08x}", c->prefix);
            f.message = fmt::format("segment {} of node {} changed since it was verified: crc32c {:08x} -> {:08x}{} ({})",
                                    sf.index, node, old->second.crc32c, c->prefix,
                                    c->bytes > old->second.size
                                        ? fmt::format(" over its first {} bytes", old->second.size)
                                        : std::string(),
                                    sf.path);
            it.findings.push_back(std::move(f));
            changed = true;
          }
        }
      }
      it.outcome = it.findings.empty() ? ItemOutcome::kPass : ItemOutcome::kFail;
      if (use_state && !changed) {
        // Only a segment verified clean is recorded; a changed one keeps its
        // old entry, so the finding repeats until someone looks at it.
        if (clean && it.findings.empty() && crc_now && stats[n][s].ok) {
          next_state[sf.index] = SegmentState{FileName(sf.path), sf.index, stats[n][s].size, stats[n][s].mtime_ns,
                                              *crc_now};
        } else {
          next_state.erase(sf.index);
        }
      }
      rep.items.push_back(std::move(it));
    }
    // Verified segments that are gone.
    for (const auto& [index, st] : prev_state) {
      if (present.count(index)) continue;
      CheckItem it;
      it.level = CheckLevel::kFiles;
      it.group = group;
      it.name = fmt::format("segment {}", st.file);
      it.outcome = ItemOutcome::kFail;
      CheckFinding f;
      f.check = "segment-changed";
      f.node = node;
      f.file = st.file;
      f.expected = fmt::format("{} bytes, crc32c {:08x}", st.size, st.crc32c);
      f.found = "no such segment";
      f.message = fmt::format("segment {} of node {} ({}) disappeared since it was verified", index, node, st.file);
      it.findings.push_back(std::move(f));
      rep.items.push_back(std::move(it));
    }
    if (next_state.empty()) next.nodes.erase(node);
  }
  if (clusters.size() > 1) {
    CheckItem it;
    it.level = CheckLevel::kFiles;
    it.group = "cluster";
    it.name = "one cluster";
    it.outcome = ItemOutcome::kFail;
    CheckFinding f;
    f.check = "segment-mismatch";
    f.expected = "1 cluster id";
    f.found = fmt::format("{} cluster ids", clusters.size());
    f.message = fmt::format("segments of {} different clusters are in one cluster directory", clusters.size());
    it.findings.push_back(std::move(f));
    rep.items.push_back(std::move(it));
  }
  if (use_state && rep.errors.empty()) {
    if (Status st = WriteCheckState(opt.state_path, next); !st.ok()) {
      rep.errors.push_back(st.message());
    } else {
      rep.files.state_written = true;
    }
  }
}

// ---- cuts level --------------------------------------------------------------

// The checks reported per cut and node, and the cut::Finding::check that
// belongs to each.
struct CutCheckItem {
  const char* name;
  cut::Check finding;
  bool cut::CutChecks::*flag;
};
constexpr CutCheckItem kCutChecks[] = {
    {"atomicity", cut::Check::kAtomicity, &cut::CutChecks::atomicity},
    {"monotonicity", cut::Check::kMonotonicity, &cut::CutChecks::monotonicity},
    {"shape", cut::Check::kShape, &cut::CutChecks::shape},
    {"rollback", cut::Check::kRollback, &cut::CutChecks::rollback},
    {"completeness", cut::Check::kCompleteness, &cut::CutChecks::completeness},
    {"markers", cut::Check::kMarker, &cut::CutChecks::markers},
};

CheckFinding FromCutFinding(const cut::Finding& f) {
  CheckFinding c;
  c.check = cut::CheckName(f.check);
  c.node = f.node;
  if (f.cut) c.cut = f.cut;
  if (f.has_position) c.position = f.position;
  if (f.has_tx) c.tx = f.tx.ToString();
  c.expected = f.expected;
  c.found = f.found;
  c.message = f.message;
  return c;
}

void CutItems(const cut::ClusterCuts& cc, const cut::GlobalCut& g, bool selected, bool last, CheckReport& rep) {
  const std::string group = fmt::format("cut-{}", g.cut_id);
  std::vector<bool> used(g.findings.size(), false);
  // The last cut of a live cluster may simply not have finished everywhere
  // yet: not a finding, unless it was asked for by name or a node's WAL stops
  // at damage (then the WAL is what is wrong, and the cut cannot finish).
  bool damaged = false;
  for (size_t i = 0; i < g.nodes.size() && i < cc.nodes.size(); ++i) {
    const bool finished = g.nodes[i] != nullptr && g.nodes[i]->finished;
    damaged = damaged || (!finished && cc.nodes[i].damaged);
  }
  const bool excused = g.status == cut::CutStatus::kIncomplete && last && !selected && !damaged;
  for (const CutCheckItem& cn : kCutChecks) {
    for (size_t i = 0; i < cc.nodes.size(); ++i) {
      CheckItem it;
      it.level = CheckLevel::kCuts;
      it.group = group;
      it.name = fmt::format("node {}: {}", i, cn.name);
      for (size_t f = 0; f < g.findings.size(); ++f) {
        if (g.findings[f].check == cn.finding && g.findings[f].node == i) {
          it.findings.push_back(FromCutFinding(g.findings[f]));
          used[f] = true;
        }
      }
      if (excused && std::string(cn.name) == "completeness") {
        for (const auto& f : it.findings) it.note += (it.note.empty() ? "" : "; ") + f.message;
        it.findings.clear();
      }
      it.outcome = it.findings.empty() ? ItemOutcome::kPass : ItemOutcome::kFail;
      rep.items.push_back(std::move(it));
    }
  }
  // The cut as a whole: its status, with the reason and the nearest
  // consistent cuts; findings no per-node check took (the WAL ends before the
  // cut finished, ...) and failed checks without a per-node finding land here.
  CheckItem st;
  st.level = CheckLevel::kCuts;
  st.group = group;
  st.name = "status";
  st.note = cut::CutStatusName(g.status);
  // An unavailable cut (its evidence lay in removed segments) is a note, not
  // a finding, unless it was asked for by name: then it cannot be checked.
  const bool bad = g.status == cut::CutStatus::kInconsistent || (g.status == cut::CutStatus::kIncomplete && !excused) ||
                   (g.status == cut::CutStatus::kUnavailable && selected);
  for (size_t f = 0; f < g.findings.size(); ++f) {
    if (!used[f]) st.findings.push_back(FromCutFinding(g.findings[f]));
  }
  if (g.status == cut::CutStatus::kUnavailable && !bad) {
    st.note = fmt::format("unavailable (not a finding; its evidence lies in removed segments): {}", g.reason);
  } else if (g.status == cut::CutStatus::kIncomplete && !bad) {
    // The last cut of a live cluster has not finished everywhere yet: that is
    // not a finding (it says so), unless it was asked for by name.
    st.note = fmt::format("incomplete (the last cut, still open; not a finding): {}", g.reason);
    st.findings.clear();
  } else if (bad) {
    CheckFinding c;
    c.check = "status";
    c.cut = g.cut_id;
    c.expected = "consistent";
    c.found = cut::CutStatusName(g.status);
    c.consistent_before = g.consistent_before;
    c.consistent_after = g.consistent_after;
    c.message = fmt::format("cut {} is {}: {}; nearest consistent cut before: {}, after: {}", g.cut_id,
                            cut::CutStatusName(g.status), g.reason.empty() ? "no reason recorded" : g.reason,
                            g.consistent_before ? std::to_string(*g.consistent_before) : "none",
                            g.consistent_after ? std::to_string(*g.consistent_after) : "none");
    st.findings.insert(st.findings.begin(), std::move(c));
  }
  for (const CutCheckItem& cn : kCutChecks) {
    bool named = false;
    for (const auto& f : g.findings) named = named || f.check == cn.finding;
    if (!(g.checks.*cn.flag) && !named) {
      CheckFinding c;
      c.check = cn.name;
      c.cut = g.cut_id;
      c.expected = "pass";
      c.found = "fail";
      c.message = fmt::format("cut {}: check {} failed", g.cut_id, cn.name);
      st.findings.push_back(std::move(c));
    }
  }
  // Findings attached to a cut that is otherwise fine still fail it.
  st.outcome = st.findings.empty() ? ItemOutcome::kPass : ItemOutcome::kFail;
  rep.items.push_back(std::move(st));
}

void ClusterWalItems(const cut::ClusterCuts& cc, CheckReport& rep) {
  for (const auto& s : cc.nodes) {
    CheckItem it;
    it.level = CheckLevel::kCuts;
    it.group = "cluster";
    it.name = fmt::format("node {}: wal", s.node);
    bool has_wal_finding = false;
    for (const auto& f : cc.findings) {
      if (f.node != s.node) continue;
      it.findings.push_back(FromCutFinding(f));
      has_wal_finding = has_wal_finding || f.check == cut::Check::kWal;
    }
    if (s.damaged && !has_wal_finding) {
      CheckFinding c;
      c.check = "wal";
      c.node = s.node;
      c.position = s.damage_at;
      c.message = s.damage;
      it.findings.insert(it.findings.begin(), std::move(c));
    }
    if (s.torn_tail) {
      it.note = fmt::format("ends in a torn record at {} ({} bytes; a crash artefact)", s.torn_at.ToString(),
                            s.torn_bytes);
    }
    it.outcome = it.findings.empty() ? ItemOutcome::kPass : ItemOutcome::kFail;
    rep.items.push_back(std::move(it));
  }
  // Findings about a node that is not in the summaries (should not happen).
  for (const auto& f : cc.findings) {
    if (f.node < cc.nodes.size()) continue;
    CheckItem it;
    it.level = CheckLevel::kCuts;
    it.group = "cluster";
    it.name = fmt::format("node {}: wal", f.node);
    it.outcome = ItemOutcome::kFail;
    it.findings.push_back(FromCutFinding(f));
    rep.items.push_back(std::move(it));
  }
}

// ---- restore level -----------------------------------------------------------

CheckItem RestoreItem(uint64_t k, const char* name) {
  CheckItem it;
  it.level = CheckLevel::kRestore;
  it.group = fmt::format("cut-{}", k);
  it.name = name;
  return it;
}

std::string TempRoot(const CheckOptions& opt) {
  if (!opt.temp_dir.empty()) return opt.temp_dir;
  const char* t = std::getenv("TMPDIR");
  return t && *t ? t : "/tmp";
}

// The last restore that passed its checks, kept (in its temporary directory)
// as the base of the next cut's restore.
struct RestoreChain {
  std::string tmp;  // "" : none yet
  std::string out;
  uint64_t cut = 0;
};

void RemoveTemp(const std::string& tmp, CheckReport& rep) {
  std::error_code ec;
  fs::remove_all(tmp, ec);
  if (ec) rep.errors.push_back(fmt::format("{}: cannot remove the temporary directory: {}", tmp, ec.message()));
}

void RestoreOne(const CheckOptions& opt, const cut::ClusterCuts& cc, const cut::ClusterLayout& layout, uint64_t k,
                RestoreChain& chain, CheckReport& rep) {
  RestoreCheck rc;
  rc.cut = k;
  CheckItem restore = RestoreItem(k, "restore");
  CheckItem fps = RestoreItem(k, "fingerprints");
  CheckItem inv = RestoreItem(k, "invariants");
  auto finish = [&] {
    rep.items.push_back(std::move(restore));
    rep.items.push_back(std::move(fps));
    rep.items.push_back(std::move(inv));
    rep.restores.push_back(std::move(rc));
  };
  auto skip_rest = [&](const std::string& why) {
    fps.outcome = ItemOutcome::kSkipped;
    fps.note = why;
    inv.outcome = ItemOutcome::kSkipped;
    inv.note = why;
  };
  const cut::GlobalCut* g = cc.Find(k);
  if (g == nullptr || g->status != cut::CutStatus::kConsistent) {
    // The cut's status item already carries the finding; a restore of it
    // would be refused (walcut restore --force restores it anyway).
    restore.outcome = ItemOutcome::kSkipped;
    restore.note = fmt::format("not restored: cut {} is {} (see its status)", k,
                               g ? cut::CutStatusName(g->status) : "absent");
    skip_rest("the cut was not restored");
    finish();
    return;
  }

  // The restore is written the way `walcut restore` writes it, into a
  // directory of our own (its node files are staged next to OUT as nodes
  // finish, so memory holds one node's state at a time).
  std::string tmpl = TempRoot(opt) + "/walcut-check-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) {
    rep.errors.push_back(fmt::format("{}: cannot create a temporary directory: {}", tmpl, std::strerror(errno)));
    restore.outcome = ItemOutcome::kSkipped;
    restore.note = "error: no temporary directory";
    skip_rest("the cut was not restored");
    finish();
    return;
  }
  const std::string tmp = buf.data();
  const std::string out = tmp + "/restore";

  RestoreRequest req;
  req.cluster_dir = opt.dir;
  req.cut = k;
  req.out = out;
  req.jobs = opt.jobs;
  if (!chain.tmp.empty()) req.base = chain.out;  // reads only the WAL between the two cuts
  std::string chosen_why;
  if (chain.tmp.empty() && cc.pruned) {
    // Genesis is gone with the removed segments: the newest full snapshot
    // the WAL still holds serves, if any does.
    auto choice = ChooseBase(cc, layout, k);
    if (!choice.ok()) {
      restore.outcome = ItemOutcome::kSkipped;
      restore.note = "not restored: " + choice.status().message();
      skip_rest("the cut was not restored");
      std::error_code ec;
      std::filesystem::remove_all(tmp, ec);
      finish();
      return;
    }
    req.base = choice->base;
    chosen_why = choice->why;
  }
  req.progress = [&opt](uint64_t b) { Progress(opt, "restore", 0, 0, b); };
  auto r = Restore(cc, layout, req);
  Status written = Status::Ok();
  if (r.ok()) written = WriteRestore(*r, out);
  if (!r.ok()) {
    const auto code = r.status().code();
    if (code == walfmt::ErrorCode::kCorruption || code == walfmt::ErrorCode::kInvalidArgument) {
      CheckFinding f;
      f.check = code == walfmt::ErrorCode::kCorruption ? "restore-damaged" : "restore-refused";
      f.cut = k;
      f.message = r.status().message();
      restore.findings.push_back(std::move(f));
      restore.outcome = ItemOutcome::kFail;
    } else {
      rep.errors.push_back(r.status().message());
      restore.outcome = ItemOutcome::kSkipped;
      restore.note = "error: " + r.status().message();
    }
    skip_rest("the cut was not restored");
  } else if (!written.ok()) {
    rep.errors.push_back(written.message());
    restore.outcome = ItemOutcome::kSkipped;
    restore.note = "error: " + written.message();
    skip_rest("the restore could not be written");
  } else {
    rc.restored = true;
    rc.base = r->base.name;
    for (const auto& n : r->nodes) {
      rc.fingerprints.push_back(n.fingerprint);
      rc.entries += n.entries;
    }
    restore.note = fmt::format("base {}{}, {} nodes, {} keys", r->base.name,
                               !chosen_why.empty() ? fmt::format(" ({})", chosen_why)
                               : req.base.empty()  ? ""
                                                   : " (its restore, checked above)",
                               r->nodes.size(), rc.entries);
    // Read every file back: ReadSnapshotFile checks its checksums and that its
    // fingerprint matches its entries; it must also match the restore's.
    std::vector<walfmt::SnapshotFile> back(r->nodes.size());
    bool all_back = true;
    std::string fp_note;
    for (size_t i = 0; i < r->nodes.size(); ++i) {
      const NodeRestore& n = r->nodes[i];
      const std::string path = fmt::format("{}/node-{}.snap", out, n.node);
      const std::string shown = fmt::format("node-{}.snap", n.node);
      auto f = walfmt::ReadSnapshotFile(path);
      if (!f.ok()) {
        all_back = false;
        if (f.status().code() == walfmt::ErrorCode::kIo) {
          rep.errors.push_back(f.status().message());
          continue;
        }
        CheckFinding c;
        c.check = "fingerprint";
        c.node = n.node;
        c.cut = k;
        c.file = shown;
        c.message = fmt::format("cut {}, node {}: the restored {} does not read back: {}", k, n.node, shown,
                                f.status().message());
        fps.findings.push_back(std::move(c));
        continue;
      }
      if (f->fingerprint != n.fingerprint || f->entries.size() != n.entries) {
        CheckFinding c;
        c.check = "fingerprint";
        c.node = n.node;
        c.cut = k;
        c.file = shown;
        c.expected = fmt::format("fingerprint {:016x}, {} keys", n.fingerprint, n.entries);
        c.found = fmt::format("fingerprint {:016x}, {} keys", f->fingerprint, f->entries.size());
        c.message = fmt::format("cut {}, node {}: {} read back differs from the restored state: expected {}, found {}",
                                k, n.node, shown, c.expected, c.found);
        fps.findings.push_back(std::move(c));
      }
      fp_note += fmt::format("{}node {} {:016x}", fp_note.empty() ? "" : ", ", n.node, n.fingerprint);
      back[i] = std::move(*f);
    }
    fps.note = fp_note;
    fps.outcome = fps.findings.empty() ? ItemOutcome::kPass : ItemOutcome::kFail;

    if (!opt.invariants) {
      inv.outcome = ItemOutcome::kSkipped;
      inv.note = "workload invariants are not available in this build (recovery/invariants.h)";
    } else if (!all_back) {
      inv.outcome = ItemOutcome::kSkipped;
      inv.note = "not run: a restored file does not read back";
    } else {
      NodeStates states;
      for (const auto& b : back) states.push_back(&b.entries);
      auto res = opt.invariants(opt.dir, states);
      if (!res.ok()) {
        rep.errors.push_back(res.status().message());
        inv.outcome = ItemOutcome::kSkipped;
        inv.note = "error: " + res.status().message();
      } else if (!res->ran) {
        inv.outcome = ItemOutcome::kSkipped;
        inv.note = res->summary;
      } else {
        rc.invariants_ran = true;
        inv.note = res->summary;
        inv.findings = res->findings;
        for (auto& f : inv.findings) f.cut = k;
        inv.outcome = inv.findings.empty() ? ItemOutcome::kPass : ItemOutcome::kFail;
      }
    }
  }
  // A restore that passed every check becomes the next cut's base; the one
  // it replaces, or a restore with findings, is removed.
  const bool checked = rc.restored && fps.outcome == ItemOutcome::kPass && inv.outcome != ItemOutcome::kFail;
  if (checked && opt.chain_restores) {
    if (!chain.tmp.empty()) RemoveTemp(chain.tmp, rep);
    chain = RestoreChain{tmp, out, k};
  } else {
    RemoveTemp(tmp, rep);
  }
  finish();
}

// One node where its WAL lives: the files level on its WAL directory, then
// (level restore) the verdict's status of the cut and the node's restore
// from the verdict, read back. Items are named "node I: ..." so that the
// reports of every node merge.
Result<CheckReport> RunNodeCheck(const CheckOptions& opt) {
  const uint32_t node = *opt.node;
  std::error_code ec;
  if (!fs::is_directory(opt.dir, ec)) return Status::NotFound(fmt::format("{}: no such directory", opt.dir));
  if (opt.level == CheckLevel::kCuts) {
    return Status::InvalidArgument(
        "level cuts needs every node's WAL or summary: run `walcut check` on the cluster, or `walcut cuts` on the "
        "summaries; one node checks level files, or level restore with --verdict");
  }
  if (opt.level == CheckLevel::kRestore && opt.verdict == nullptr) {
    return Status::InvalidArgument("level restore of one node needs the cut's verdict (--verdict FILE, from `walcut "
                                   "cuts SUMMARIES... --verdict-out FILE --cut K`)");
  }
  if (opt.verdict && opt.cut && *opt.cut != opt.verdict->cut) {
    return Status::InvalidArgument(fmt::format("the verdict is for cut {}, not cut {}", opt.verdict->cut, *opt.cut));
  }
  CheckReport rep;
  rep.dir = opt.dir;
  rep.level = opt.level;
  rep.selected_cut = opt.verdict ? std::optional<uint64_t>(opt.verdict->cut) : opt.cut;
  cut::ClusterLayout layout;
  layout.dir = opt.dir;
  layout.wal_dirs = {opt.dir};
  RunFiles(opt, layout, rep);
  if (opt.level == CheckLevel::kFiles) return rep;

  const Verdict& v = *opt.verdict;
  const uint64_t k = v.cut;
  CheckItem status;
  status.level = CheckLevel::kCuts;
  status.group = fmt::format("cut-{}", k);
  status.name = fmt::format("node {}: verdict", node);
  if (v.status == cut::CutStatus::kConsistent) {
    status.note = fmt::format("cut {} is consistent (verdict {}), base {}", k, v.id, v.base_name);
  } else {
    CheckFinding f;
    f.check = "status";
    f.cut = k;
    f.expected = "consistent";
    f.found = cut::CutStatusName(v.status);
    f.message = fmt::format("cut {} is {} (verdict {}): {}", k, f.found, v.id, v.reason);
    status.findings.push_back(std::move(f));
    status.outcome = ItemOutcome::kFail;
  }
  rep.items.push_back(std::move(status));

  CheckItem restore = RestoreItem(k, "");
  restore.name = fmt::format("node {}: restore", node);
  CheckItem fps = RestoreItem(k, "");
  fps.name = fmt::format("node {}: fingerprint", node);
  auto finish = [&] {
    rep.items.push_back(std::move(restore));
    rep.items.push_back(std::move(fps));
  };
  auto not_restored = [&](const std::string& note) {
    restore.outcome = ItemOutcome::kSkipped;
    restore.note = note;
    fps.outcome = ItemOutcome::kSkipped;
    fps.note = "the node was not restored";
  };
  if (v.status != cut::CutStatus::kConsistent) {
    not_restored(fmt::format("not restored: cut {} is {} (see the verdict)", k, cut::CutStatusName(v.status)));
    finish();
    return rep;
  }
  std::string tmpl = TempRoot(opt) + "/walcut-check-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) {
    rep.errors.push_back(fmt::format("{}: cannot create a temporary directory: {}", tmpl, std::strerror(errno)));
    not_restored("error: no temporary directory");
    finish();
    return rep;
  }
  const std::string tmp = buf.data();
  const std::string out = tmp + "/part";
  PartRequest req;
  req.verdict = &v;
  req.node = node;
  req.wal_dir = opt.dir;
  req.base_dir = opt.base_dir;
  req.out = out;
  req.progress = [&opt](uint64_t b) { Progress(opt, "restore", 0, 0, b); };
  auto r = RestorePart(req);
  Status written = Status::Ok();
  if (r.ok()) written = WritePart(*r, v, out);
  if (!r.ok() || !written.ok()) {
    const Status st = r.ok() ? written : r.status();
    const auto code = st.code();
    if (r.ok() || (code != walfmt::ErrorCode::kCorruption && code != walfmt::ErrorCode::kInvalidArgument)) {
      rep.errors.push_back(st.message());
      not_restored("error: " + st.message());
    } else {
      not_restored("");
      CheckFinding f;
      f.check = code == walfmt::ErrorCode::kCorruption ? "restore-damaged" : "restore-refused";
      f.node = node;
      f.cut = k;
      f.message = st.message();
      restore.findings.push_back(std::move(f));
      restore.outcome = ItemOutcome::kFail;
    }
  } else {
    const NodeRestore& n = r->nodes.front();
    restore.note = fmt::format("base {}, WAL {}..{}, {} transactions applied, {} keys", v.base_name,
                               n.from.ToString(), n.to.ToString(), n.txs_applied, n.entries);
    const std::string shown = fmt::format("node-{}.snap", node);
    auto f = walfmt::ReadSnapshotFile(fmt::format("{}/{}", out, shown));
    if (!f.ok() && f.status().code() == walfmt::ErrorCode::kIo) {
      rep.errors.push_back(f.status().message());
      fps.outcome = ItemOutcome::kSkipped;
      fps.note = "error: " + f.status().message();
    } else if (!f.ok() || f->fingerprint != n.fingerprint || f->entries.size() != n.entries) {
      CheckFinding c;
      c.check = "fingerprint";
      c.node = node;
      c.cut = k;
      c.file = shown;
      c.expected = fmt::format("fingerprint {:016x}, {} keys", n.fingerprint, n.entries);
      c.found = f.ok() ? fmt::format("fingerprint {:016x}, {} keys", f->fingerprint, f->entries.size())
                       : f.status().message();
      c.message = fmt::format("cut {}, node {}: the restored {} does not read back as restored: expected {}, found {}",
                              k, node, shown, c.expected, c.found);
      fps.findings.push_back(std::move(c));
      fps.outcome = ItemOutcome::kFail;
    } else {
      fps.note = fmt::format("node {} {:016x}", node, n.fingerprint);
    }
  }
  RemoveTemp(tmp, rep);
  finish();
  return rep;
}

}  // namespace

InvariantChecker DefaultInvariantChecker() {
  return [](const std::string& dir, const NodeStates& states) -> Result<InvariantOutcome> {
    auto info = LoadClusterInfo(dir);
    InvariantOutcome out;
    if (!info.ok()) {
      if (info.status().code() == walfmt::ErrorCode::kNotFound) {
        out.summary = fmt::format("not run: {} (the workload is unknown)", info.status().message());
        return out;
      }
      return info.status();
    }
    const InvariantReport rep = CheckInvariants(*info, states, OptionsFor(info->workload));
    out.ran = true;
    out.summary = fmt::format("workload {}: {} key copies checked", WorkloadName(info->workload), rep.keys_checked);
    if (rep.bank_total) out.summary += fmt::format(", bank total {}", *rep.bank_total);
    if (info->has_cycle()) out.summary += fmt::format(", ring walked {} keys", rep.ring_walked);
    for (const auto& f : rep.findings) {
      CheckFinding c;
      c.check = "invariant " + f.check;
      c.node = f.node;
      c.expected = f.expected;
      c.found = f.found;
      c.message = f.message;
      if (!f.keys.empty()) {
        std::string keys;
        for (const auto& k : f.keys) keys += (keys.empty() ? "" : ",") + k;
        c.message += fmt::format(" [keys {}{}]", keys, f.key_count > f.keys.size() ? ",..." : "");
      }
      out.findings.push_back(std::move(c));
    }
    if (rep.total_findings > rep.findings.size()) {
      CheckFinding c;
      c.check = "invariant";
      c.message = fmt::format("{} more invariant findings not listed", rep.total_findings - rep.findings.size());
      out.findings.push_back(std::move(c));
    }
    return out;
  };
}

Result<CheckReport> RunCheck(const CheckOptions& opt) {
  if (opt.node) return RunNodeCheck(opt);
  auto layout = cut::FindClusterLayout(opt.dir);
  if (!layout.ok()) return layout.status();
  CheckReport rep;
  rep.dir = opt.dir;
  rep.level = opt.level;
  rep.selected_cut = opt.cut;

  RunFiles(opt, *layout, rep);
  if (opt.level == CheckLevel::kFiles) return rep;

  cut::LoadOptions lo;
  lo.jobs = opt.jobs;
  lo.progress = [&opt](uint64_t b) { Progress(opt, "scan", 0, 0, b); };
  auto sums = cut::ScanCluster(*layout, lo);
  if (!sums.ok()) {
    rep.errors.push_back(sums.status().message());
    return rep;
  }
  auto cc = cut::Reconstruct(std::move(*sums));
  if (!cc.ok()) {
    // The summaries do not form one cluster: that is what the data says.
    CheckItem it;
    it.level = CheckLevel::kCuts;
    it.group = "cluster";
    it.name = "reconstruct";
    it.outcome = ItemOutcome::kFail;
    CheckFinding f;
    f.check = "reconstruct";
    f.message = cc.status().message();
    it.findings.push_back(std::move(f));
    rep.items.push_back(std::move(it));
    return rep;
  }
  if (opt.cut && cc->Find(*opt.cut) == nullptr) {
    return Status::NotFound(fmt::format("{}: no cut {} (the cluster has {} cuts{})", opt.dir, *opt.cut,
                                        cc->cuts.size(),
                                        cc->cuts.empty() ? std::string()
                                                         : fmt::format(", {}..{}", cc->cuts.front().cut_id,
                                                                       cc->cuts.back().cut_id)));
  }
  rep.has_cuts = true;
  rep.window = cc->window;
  for (const auto& g : cc->cuts) {
    ++rep.cuts_total;
    if (g.status == cut::CutStatus::kConsistent) ++rep.cuts_consistent;
    if (g.status == cut::CutStatus::kInconsistent) ++rep.cuts_inconsistent;
    if (g.status == cut::CutStatus::kIncomplete) ++rep.cuts_incomplete;
    if (g.status == cut::CutStatus::kUnavailable) ++rep.cuts_unavailable;
  }
  ClusterWalItems(*cc, rep);
  for (size_t i = 0; i < cc->cuts.size(); ++i) {
    const auto& g = cc->cuts[i];
    if (opt.cut && g.cut_id != *opt.cut) continue;
    CutItems(*cc, g, opt.cut.has_value(), i + 1 == cc->cuts.size(), rep);
  }
  if (opt.level != CheckLevel::kRestore) return rep;

  RestoreChain chain;
  for (const auto& g : cc->cuts) {
    if (opt.cut ? g.cut_id != *opt.cut : g.status != cut::CutStatus::kConsistent) continue;
    RestoreOne(opt, *cc, *layout, g.cut_id, chain, rep);
  }
  if (!chain.tmp.empty()) RemoveTemp(chain.tmp, rep);
  return rep;
}

}  // namespace walcut::recovery
