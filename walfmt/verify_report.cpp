#include "walfmt/verify_report.h"

#include <map>
#include <set>
#include <utility>

#include <fmt/format.h>

namespace walfmt {

std::string_view SegmentStatusName(SegmentStatus s) {
  switch (s) {
    case SegmentStatus::kOk:
      return "ok";
    case SegmentStatus::kTornTail:
      return "torn-tail";
    case SegmentStatus::kCorrupt:
      return "corrupt";
    case SegmentStatus::kBadHeader:
      return "bad-header";
    case SegmentStatus::kIoError:
      return "io-error";
  }
  return "io-error";
}

SegmentStatus StatusOf(const SegmentOutcome& o) {
  for (const auto& p : o.problems) {
    if (p.kind == ProblemKind::kIo) return SegmentStatus::kIoError;
  }
  for (const auto& p : o.problems) {
    if (p.fatal) return o.scan.header_ok ? SegmentStatus::kCorrupt : SegmentStatus::kBadHeader;
  }
  if (o.scan.end == SegmentEnd::kTornTail) return SegmentStatus::kTornTail;
  return SegmentStatus::kOk;
}

namespace {

Problem NodeProblem(ProblemKind kind, const VerifyNode& n, std::string detail) {
  Problem p;
  p.kind = kind;
  p.node = n.node_id.value_or(0);
  p.node_known = n.node_id.has_value();
  p.file = n.label;
  p.detail = std::move(detail);
  return p;
}

// The problems that belong to a node rather than to one segment: those found
// listing it, no segments, its node id given twice; and the clusters seen.
void FindNodeProblems(VerifyReport& r, const std::vector<Problem>& input_problems) {
  for (const Problem& p : input_problems) {
    for (auto& n : r.nodes) {
      if (p.file.rfind(n.label, 0) == 0) {
        n.problems.push_back(p);
        break;
      }
    }
  }
  std::map<uint32_t, size_t> seen_ids;
  std::set<uint64_t> clusters;
  for (size_t i = 0; i < r.nodes.size(); ++i) {
    VerifyNode& n = r.nodes[i];
    if (n.segments.empty()) {
      n.problems.push_back(
          NodeProblem(ProblemKind::kMissingSegment, n, "node has no WAL segments (expected wal/<index>.wal)"));
    }
    for (const auto& s : n.segments) {
      if (s.outcome.scan.header_ok) clusters.insert(s.outcome.scan.header.cluster_id);
    }
    if (n.node_id) {
      auto [it, fresh] = seen_ids.emplace(*n.node_id, i);
      if (!fresh) {
        n.problems.push_back(
            NodeProblem(ProblemKind::kSegmentMismatch, n,
                        fmt::format("node id {} also used by {}", *n.node_id, r.nodes[it->second].label)));
      }
    }
  }
  if (clusters.size() > 1) {
    Problem p;
    p.kind = ProblemKind::kSegmentMismatch;
    p.detail = fmt::format("segments of {} different clusters were given together", clusters.size());
    r.problems.push_back(p);
  }
}

void Tally(VerifyReport& r) {
  for (const auto& p : r.problems) r.tally.Add(p);
  for (const auto& n : r.nodes) {
    for (const auto& p : n.problems) r.tally.Add(p);
    for (const auto& s : n.segments) {
      for (const auto& p : s.outcome.problems) r.tally.Add(p);
      if (s.outcome.scan.end == SegmentEnd::kTornTail) ++r.torn_tails;
      if (s.status != SegmentStatus::kOk && s.status != SegmentStatus::kTornTail) ++r.bad_segments;
    }
    r.records += n.records;
    r.bytes += n.bytes;
  }
  r.outcome = r.tally.outcome();
}

}  // namespace

VerifyReport MakeVerifyReport(const std::vector<VerifyInput>& nodes, const std::vector<Problem>& input_problems,
                              std::vector<std::vector<SegmentOutcome>> outcomes) {
  VerifyReport r;
  r.nodes.resize(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    VerifyNode& n = r.nodes[i];
    n.label = nodes[i].label;
    n.node_id = nodes[i].node_id;
    for (auto& oc : outcomes[i]) {
      n.records += oc.scan.records;
      n.bytes += oc.scan.file_bytes;
      const SegmentStatus st = StatusOf(oc);
      n.segments.push_back({std::move(oc), st});
    }
    r.segments += n.segments.size();
  }
  FindNodeProblems(r, input_problems);
  Tally(r);
  return r;
}

}  // namespace walfmt
