// `walcut snapshot create`: a full artifact of a runtime snapshot, a synthetic
// full of a cut (served by the repository or restored from the cluster's
// WAL), and an increment of the WAL from its parent to a cut
// (repo/REPOSITORY.md, "Artifacts"). Each is built in a staging directory and
// published whole (repo/artifact_io.h).
#include <algorithm>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "cut/load.h"
#include "recovery/restore.h"
#include "repo/artifact_io.h"
#include "repo/increment_build.h"
#include "repo/manifest.h"
#include "repo/remote.h"
#include "repo/repository.h"
#include "repo/segment_store.h"
#include "walfmt/cluster_layout.h"
#include "walfmt/file_io.h"
#include "walfmt/json_fields.h"
#include "walfmt/reader.h"
#include "walfmt/segment.h"
#include "walfmt/staging.h"
#include "walfmt/strings.h"
#include "walfmt/text_escape.h"

namespace walcut::repo {
namespace fs = std::filesystem;
using nlohmann::json;
using walfmt::JsonFields;
using walfmt::Lsn;
using walfmt::Result;
using walfmt::Status;

void FillCutEvidence(const cut::GlobalCut& g, Manifest& m) {
  m.verdict = cut::CutStatusName(g.status);
  m.time_us = g.finish_time_us;
  m.evidence = {{"status", cut::CutStatusName(g.status)},
                {"reason", g.reason},
                {"checks",
                 {{"atomicity", g.checks.atomicity},
                  {"monotonicity", g.checks.monotonicity},
                  {"shape", g.checks.shape},
                  {"rollback", g.checks.rollback},
                  {"completeness", g.checks.completeness},
                  {"markers", g.checks.markers}}},
                {"transactions", g.transactions},
                {"before", g.before},
                {"after", g.after},
                {"before_committed_after_start", g.before_after_start},
                {"after_committed_before_start", g.after_before_start},
                {"start_time_us", g.start_time_us},
                {"finish_time_us", g.finish_time_us},
                {"findings", g.findings.size()}};
}

void FillNodeEvidence(const cut::NodeCut& nc, ArtifactNode& n) {
  n.has_cut = true;
  n.cut_start = nc.start;
  n.cut_finish = nc.finish;
  n.start_time_us = nc.start_time_us;
  n.finish_time_us = nc.finish_time_us;
  n.commits_before_start = nc.commits_before_start;
  n.commits_before_finish = nc.commits_before_finish;
  n.before = nc.before.size();
  n.after = nc.after.size();
  n.before_after_start = 0;
  n.after_before_start = 0;
  for (const auto& t : nc.before) n.before_after_start += t.committed && t.commit > nc.start;
  for (const auto& t : nc.after) n.after_before_start += t.committed && t.commit < nc.start;
}

uint64_t NextSeq(const RepoListing& l) {
  uint64_t s = 0;
  for (const auto& a : l.artifacts) s = std::max(s, a.m.seq);
  return s + 1;
}

Status CheckName(const std::string& name) {
  if (name.empty() || name[0] == '.' || name.find('/') != std::string::npos || name == kMarkerFile) {
    return Status::InvalidArgument(fmt::format("'{}' is not a valid artifact name", name));
  }
  return Status::Ok();
}

namespace {

// m.name: --name, else `default_name`; refused when not a valid name or taken.
Status NameArtifact(const CreateRequest& req, const RepoListing& l, std::string default_name, Manifest& m) {
  m.name = req.name.empty() ? std::move(default_name) : req.name;
  if (Status st = CheckName(m.name); !st.ok()) return st;
  if (l.Find(m.name)) return Status::InvalidArgument(fmt::format("{}: artifact {} already exists", req.repo, m.name));
  return Status::Ok();
}

// Publishes the staged artifact; the result names it.
Result<CreateResult> Finish(Staging& s, const std::string& repo, Manifest& m) {
  if (Status st = Publish(s, repo, m); !st.ok()) return st;
  CreateResult r;
  r.m = m;
  r.dir = walfmt::JoinPath(repo, m.name);
  return r;
}

// ---- a full artifact of a runtime snapshot --------------------------------

// Copies node.file of the snapshot into the staging dir as node-<i>.snap and
// checks the copy against cluster.json's fingerprint and position.
Result<ArtifactNode> CopySnapshotNode(const CreateRequest& req, const walfmt::FullSnapshotInfo& fsi,
                                      const walfmt::FullSnapshotNode& node, const std::string& stage, Manifest& m) {
  const std::string path = walfmt::JoinPath(walfmt::JoinPath(req.cluster_dir, fsi.dir), node.file);
  const std::string rel = fmt::format("node-{}.snap", node.node);
  if (Status st = AddFileCopy(stage, rel, path, m); !st.ok()) return st;
  uint64_t entries = 0;
  auto snap = ReadBackSnapshot(walfmt::JoinPath(stage, rel), entries);  // the copy is what is checked
  if (!snap.ok()) return Status::Corruption(fmt::format("{} (copied from {})", snap.status().message(), path));
  if (snap->node_id != node.node || snap->fingerprint != node.fingerprint || snap->wal_position != node.wal_position) {
    return Status::Corruption(fmt::format(
        "{}: node {} fingerprint {:016x} at {}, but cluster.json recorded node {} fingerprint {:016x} at {}", path,
        snap->node_id, snap->fingerprint, snap->wal_position.ToString(), node.node, node.fingerprint,
        node.wal_position.ToString()));
  }
  ArtifactNode an;
  an.node = node.node;
  an.continue_from = node.wal_position;
  an.snap_file = rel;
  an.fingerprint = snap->fingerprint;
  an.entries = entries;
  an.snap_position = snap->wal_position;
  return an;
}

Result<CreateResult> CreateRuntimeFull(const CreateRequest& req, const RepoListing& l, Manifest m) {
  auto info = walfmt::LoadClusterInfo(req.cluster_dir);
  if (!info.ok()) return info.status();
  const walfmt::FullSnapshotInfo* fsi = info->FindSnapshot(req.from);
  if (!fsi) {
    std::string names;
    for (const auto& s : info->full_snapshots) names += (names.empty() ? "" : ", ") + s.name;
    return Status::NotFound(fmt::format("{}: no full snapshot '{}' in cluster.json (it has: {})", req.cluster_dir,
                                        req.from, names.empty() ? "none" : names));
  }
  auto cj = walfmt::ReadWholeFile(walfmt::JoinPath(req.cluster_dir, "cluster.json"), kMaxManifestBytes);
  if (!cj.ok()) return cj.status();
  if (Status st = NameArtifact(req, l, "f-" + req.from, m); !st.ok()) return st;
  m.type = "full";
  m.source = "runtime-snapshot";
  m.snapshot = fsi->name;
  m.cluster_id = info->cluster_id;
  m.time_us = fsi->time_us;
  m.verdict = "snapshot";
  m.evidence = {{"at_tx", fsi->at_tx}, {"snapshot_time_us", fsi->time_us}};
  Staging s{walfmt::TempNameBeside(walfmt::JoinPath(req.repo, m.name))};
  if (Status st = OpenStaging(s); !st.ok()) return st;
  for (const auto& node : fsi->nodes) {
    auto an = CopySnapshotNode(req, *fsi, node, s.dir, m);
    if (!an.ok()) return an.status();
    m.nodes.push_back(std::move(an.value()));
  }
  if (Status st = AddFile(s.dir, "cluster.json", walfmt::CurrentClusterJsonText(*cj), m); !st.ok()) return st;
  m.restore = json();
  json cluster = json::parse(*cj, nullptr, false);
  if (cluster.is_object()) m.evidence["cluster_json"] = true;
  return Finish(s, req.repo, m);
}

// ---- a synthetic full -------------------------------------------------------

// Copies a restore output (node files, its manifest) into the staging dir.
Status IngestRestore(const std::string& restored, const std::string& stage, Manifest& m) {
  const std::string origin = walfmt::JoinPath(restored, "manifest.json");
  auto text = ReadSmall(origin);
  if (!text.ok()) return text.status();
  json rm = walfmt::UnescapeJsonStrings(json::parse(*text, nullptr, false));
  JsonFields f(origin);
  const json* nodes = f.ExpectObject(rm, "") ? f.Array(rm, "nodes", "") : nullptr;
  if (!nodes) return f.status();
  m.restore = rm;
  m.nodes.assign(nodes->size(), ArtifactNode{});
  for (size_t x = 0; x < nodes->size(); ++x) {
    const json& jn = (*nodes)[x];
    const std::string path = JsonFields::Element("nodes", x);
    const uint64_t i = f.U64(jn, "node", path);
    const Lsn continue_from = f.Position(jn, "continue_from", path);
    if (!f.ok()) return f.status();
    if (i >= m.nodes.size()) return Status::Corruption(fmt::format("{}: node {} out of range", origin, i));
    const std::string rel = fmt::format("node-{}.snap", i);
    if (Status st = AddFileCopy(stage, rel, walfmt::JoinPath(restored, rel), m); !st.ok()) return st;
    uint64_t entries = 0;
    auto snap = ReadBackSnapshot(walfmt::JoinPath(stage, rel), entries);
    if (!snap.ok()) return snap.status();
    ArtifactNode& an = m.nodes[i];
    an.node = static_cast<uint32_t>(i);
    an.continue_from = continue_from;
    an.snap_file = rel;
    an.fingerprint = snap->fingerprint;
    an.entries = entries;
    an.snap_position = snap->wal_position;
  }
  const json* cluster = f.Find(rm, "cluster", "");  // written when the restore had the cluster's cluster.json
  if (!cluster) return f.status();
  if (!cluster->is_object()) {
    f.Fail("cluster", fmt::format("expected an object, found {}", JsonFields::Shown(*cluster)));
    return f.status();
  }
  return AddFile(stage, "cluster.json", walfmt::CurrentClusterJsonText(walfmt::DumpJson(*cluster, 2) + "\n"), m);
}

// The artifact that serves a synthetic full of cut K: the newest of cut K
// (of `cluster`, when given) with a complete chain; nullptr when none.
const Artifact* ServingArtifact(const RepoListing& l, uint64_t k, std::optional<uint64_t> cluster) {
  const Artifact* source = nullptr;
  for (const auto& a : l.artifacts) {
    if (!a.status.ok() || a.m.cut != k || (cluster && a.m.cluster_id != *cluster)) continue;
    if (!ChainOf(l, a.name).ok()) continue;
    if (!source || a.m.seq > source->m.seq) source = &a;
  }
  return source;
}

// Cut K restored through the chain of `source` into `restored`; its evidence.
Status RestoreThroughChain(const CreateRequest& req, const Artifact& source, const std::string& restored, Manifest& m) {
  RepoRestoreRequest rr;
  rr.repo = req.repo;
  rr.name = source.name;
  rr.out = restored;
  rr.jobs = req.jobs;
  auto r = RestoreFromRepository(rr);
  if (!r.ok()) return r.status();
  m.cluster_id = source.m.cluster_id;
  m.time_us = source.m.time_us;
  m.verdict = source.m.verdict;
  m.evidence = source.m.evidence;
  m.evidence["served_by"] = source.name;
  return Status::Ok();
}

// Cut K restored from the cluster's WAL into `restored`, from the base
// `walcut restore` chooses: the newest full snapshot before cut K, else
// genesis (genesis alone cannot serve a WAL pruned by retention). The
// cluster's cuts, and the cut's evidence in m.
Result<cut::ClusterCuts> RestoreFromWal(const CreateRequest& req, const cut::ClusterLayout& layout, uint64_t k,
                                        const std::string& restored, Manifest& m) {
  auto live = Analyze(layout, req.jobs);
  if (!live.ok()) return live.status();
  const cut::GlobalCut* g = live->Find(k);
  if (!g) return Status::NotFound(fmt::format("cut {} is not in the WAL of {}", k, req.cluster_dir));
  if (g->status != cut::CutStatus::kConsistent) {
    return Status::InvalidArgument(fmt::format("cut {} is {}: {}; refusing to make an artifact of it", k,
                                               cut::CutStatusName(g->status), g->reason));
  }
  auto base = recovery::ChooseBase(*live, layout, k);
  if (!base.ok()) return base.status();
  recovery::RestoreRequest rq;
  rq.cluster_dir = req.cluster_dir;
  rq.cut = k;
  rq.base = base->base;
  rq.out = restored;
  rq.jobs = req.jobs;
  auto r = recovery::Restore(*live, layout, rq);
  if (!r.ok()) return r.status();
  if (Status st = recovery::WriteRestore(*r, restored); !st.ok()) return st;
  m.cluster_id = layout.cluster_id;
  FillCutEvidence(*g, m);
  return live;
}

// The per-node cut evidence of the artifact that served a synthetic full.
void CopyNodeEvidence(const Manifest& source, Manifest& m) {
  for (size_t i = 0; i < m.nodes.size() && i < source.nodes.size(); ++i) {
    const ArtifactNode& sn = source.nodes[i];
    ArtifactNode& n = m.nodes[i];
    n.has_cut = sn.has_cut;
    n.cut_start = sn.cut_start;
    n.cut_finish = sn.cut_finish;
    n.start_time_us = sn.start_time_us;
    n.finish_time_us = sn.finish_time_us;
    n.commits_before_start = sn.commits_before_start;
    n.commits_before_finish = sn.commits_before_finish;
    n.before = sn.before;
    n.after = sn.after;
    n.before_after_start = sn.before_after_start;
    n.after_before_start = sn.after_before_start;
  }
}

Result<CreateResult> CreateSyntheticFull(const CreateRequest& req, const RepoListing& l, Manifest m) {
  const uint64_t k = *req.cut;
  if (Status st = NameArtifact(req, l, fmt::format("f-cut-{}", k), m); !st.ok()) return st;
  m.type = "full";
  m.source = "restore";
  m.cut = k;
  Staging s{walfmt::TempNameBeside(walfmt::JoinPath(req.repo, m.name))};
  if (Status st = OpenStaging(s); !st.ok()) return st;
  const std::string restored = walfmt::JoinPath(s.dir, ".restore");
  // Served by the repository when it holds cut K with a complete chain (no
  // need for the cluster); else restored from the cluster's WAL.
  std::optional<cut::ClusterLayout> layout;
  if (!req.cluster_dir.empty()) {
    auto lay = cut::FindClusterLayout(req.cluster_dir);
    if (!lay.ok()) return lay.status();
    layout = *lay;
  }
  const Artifact* source = ServingArtifact(l, k, layout ? std::optional(layout->cluster_id) : std::nullopt);
  std::optional<cut::ClusterCuts> live;  // the cluster's cuts, when restored from its WAL
  if (source) {
    if (Status st = RestoreThroughChain(req, *source, restored, m); !st.ok()) return st;
  } else if (!layout) {
    return Status::NotFound(fmt::format(
        "{}: no artifact of cut {} with a complete chain; give the cluster directory to restore it from the WAL",
        req.repo, k));
  } else {
    auto cc = RestoreFromWal(req, *layout, k, restored, m);
    if (!cc.ok()) return cc.status();
    live = std::move(cc.value());
  }
  {
    Status st = IngestRestore(restored, s.dir, m);
    std::error_code ec;
    fs::remove_all(restored, ec);
    if (!st.ok()) return st;
  }
  if (source) {
    CopyNodeEvidence(source->m, m);
  } else {
    const cut::GlobalCut* g = live->Find(k);
    for (size_t i = 0; g && i < m.nodes.size() && i < g->nodes.size(); ++i) {
      if (g->nodes[i]) FillNodeEvidence(*g->nodes[i], m.nodes[i]);
    }
  }
  return Finish(s, req.repo, m);
}

}  // namespace

// ---- an increment -----------------------------------------------------------

using NodeSegments = std::vector<std::vector<walfmt::SegmentFile>>;

static std::string RangeText(uint64_t a, uint64_t b) {
  return a == b ? fmt::format("{:016X}", a) : fmt::format("{:016X}..{:016X}", a, b);
}

// What a restore through an increment needs of the cut analysis, so that it
// reads the increment's WAL once instead of twice: node i's scan summary
// reduced to the increment's own segments, the parent's cut (or the parent
// full snapshot's SNAPSHOT record) and cut K, as the analysis of the live
// WAL found them (the positions are the same in the increment). No
// transaction counts or digests: the restore needs the cuts' positions and
// sets, and the cross-node checks were made at creation against the whole
// WAL (`snapshot check` re-derives them from the increment's segments).
cut::NodeSummary PlanSummary(const cut::NodeSummary& live, const Artifact& parent, uint64_t k,
                             const std::vector<walfmt::SegmentFile>& segs) {
  cut::NodeSummary s;
  s.node = live.node;
  s.cluster_known = live.cluster_known;
  s.cluster_id = live.cluster_id;
  for (const auto& seg : segs) {
    cut::SegmentInfo si;
    si.index = seg.index;
    si.file = SegmentName(seg.index);
    si.compressed = true;
    for (const auto& l : live.segments) {
      if (l.index == seg.index) {
        si.bytes = l.bytes;
        si.records = l.records;
      }
    }
    s.segments.push_back(std::move(si));
  }
  if (!segs.empty() && segs.front().index > 0) {
    s.pruned = true;
    s.wal_start = Lsn{segs.front().index, 0};
  }
  const cut::NodeCut* kc = live.FindCut(k);
  s.end = kc && kc->finished ? kc->finish : Lsn{};
  if (parent.m.cut) {
    if (const cut::NodeCut* jc = live.FindCut(*parent.m.cut)) s.cuts.push_back(*jc);
  } else {
    for (const auto& mark : live.snapshots) {
      if (mark.name != parent.m.snapshot) continue;
      cut::SnapshotMark bare = mark;  // no digests: the plan carries no buckets to subtract them from
      bare.committed_before = {};
      bare.shared_before.clear();
      s.snapshots.push_back(std::move(bare));
    }
  }
  if (kc) s.cuts.push_back(*kc);
  return s;
}

// The parent of an increment: --parent, else the newest artifact of cluster `cid`.
Result<const Artifact*> IncrementParent(const CreateRequest& req, const RepoListing& l, uint64_t cid) {
  const Artifact* parent = nullptr;
  if (!req.parent.empty()) {
    parent = l.Find(req.parent);
    if (!parent) return Status::NotFound(fmt::format("{}: no artifact {}", req.repo, req.parent));
    if (!parent->status.ok()) {
      return Status::InvalidArgument(fmt::format("parent {}: {}", req.parent, parent->status.message()));
    }
    if (parent->m.cluster_id != cid) {
      return Status::InvalidArgument(fmt::format(
          "parent {} belongs to cluster {:016x}, but {} is cluster {:016x}; refusing an increment across clusters",
          parent->name, parent->m.cluster_id, req.cluster_dir, cid));
    }
    return parent;
  }
  for (const auto& a : l.artifacts) {
    if (a.status.ok() && a.m.cluster_id == cid && (!parent || a.m.seq > parent->m.seq)) parent = &a;
  }
  if (!parent) {
    return Status::NotFound(
        fmt::format("{}: no artifact of cluster {:016x} to build on; create a full one first (--full)", req.repo, cid));
  }
  return parent;
}

// Whether cut g comes after the parent: a later cut, or (a runtime full) on
// every node a start after the parent's continue_from.
bool AfterParent(const Artifact& parent, const cut::GlobalCut& g) {
  if (parent.m.cut) return g.cut_id > *parent.m.cut;
  for (size_t i = 0; i < parent.m.nodes.size(); ++i) {
    if (!g.nodes[i] || !g.nodes[i]->started || !(parent.m.nodes[i].continue_from < g.nodes[i]->start)) return false;
  }
  return true;
}

// The cut of an increment: --cut K, or the latest consistent cut after the parent.
static Result<uint64_t> IncrementCut(const CreateRequest& req, const cut::ClusterCuts& cc, const Artifact& parent) {
  if (req.cut) return *req.cut;
  uint64_t k = 0;
  for (const auto& g : cc.cuts) {
    if (g.status == cut::CutStatus::kConsistent && AfterParent(parent, g)) k = std::max(k, g.cut_id);
  }
  if (k == 0) {
    return Status::InvalidArgument(
        fmt::format("{}: no consistent cut after the parent {}", req.cluster_dir, parent.name));
  }
  return k;
}

std::vector<walfmt::SegmentFile> NodeIncrementSegments(const std::string& wal_dir, size_t i, Lsn from,
                                                       const cut::NodeCut* kc, uint64_t k, std::string& missed) {
  std::vector<walfmt::SegmentFile> segs;
  auto listed = walfmt::ListSegments(wal_dir, [](const walfmt::Problem&) {});
  std::map<uint64_t, walfmt::SegmentFile> have;
  if (listed.ok()) {
    for (const auto& s : *listed) have[s.index] = s;
  }
  const bool known = kc && kc->finished;
  const uint64_t last = known ? kc->finish.segment : (have.empty() ? from.segment : have.rbegin()->first);
  const std::string upto = known ? kc->finish.ToString() : fmt::format("CUT_FINISH({})", k);
  std::optional<uint64_t> gap_start;
  for (uint64_t x = from.segment; x <= last + 1; ++x) {
    const bool present = x > last || have.count(x);
    if (!present && !gap_start) gap_start = x;
    if (present && gap_start) {
      missed += fmt::format("{}node {}: {} (needed for {}..{})", missed.empty() ? "" : "; ", i,
                            RangeText(*gap_start, x - 1), from.ToString(), upto);
      gap_start.reset();
    }
    if (x <= last && present) segs.push_back(have[x]);
  }
  return segs;
}

// The segments each node needs: [R_i(parent), CUT_FINISH_i(K)], whole;
// refused naming every node's missing range.
static Result<NodeSegments> IncrementSegments(const cut::ClusterLayout& layout, const Artifact& parent,
                                              const cut::GlobalCut& g, uint64_t k) {
  const size_t n = layout.wal_dirs.size();
  NodeSegments segs(n);
  std::string missed;
  for (size_t i = 0; i < n; ++i) {
    const cut::NodeCut* kc = i < g.nodes.size() ? g.nodes[i] : nullptr;
    segs[i] = NodeIncrementSegments(layout.wal_dirs[i], i, parent.m.nodes[i].continue_from, kc, k, missed);
  }
  if (!missed.empty()) {
    return Status::InvalidArgument(
        fmt::format("Missed WAL segment(s) for an increment from {} to cut {}: {}", parent.name, k, missed));
  }
  return segs;
}

// Node i of an increment from `parent` to cut g.
ArtifactNode IncrementNode(size_t i, Lsn from, const cut::NodeCut& kc, const std::vector<walfmt::SegmentFile>& segs) {
  ArtifactNode an;
  an.node = static_cast<uint32_t>(i);
  an.has_wal = true;
  an.wal_from = from;
  an.wal_to = kc.finish;
  an.first_segment = an.wal_from.segment;
  an.last_segment = an.wal_to.segment;
  an.continue_from = kc.ContinueFrom();
  FillNodeEvidence(kc, an);
  for (const auto& seg : segs) an.segments.push_back(SegmentName(seg.index));
  return an;
}

// Into the staging directory: node-<i>/wal/ with the segments, cluster.json
// and node i's restore plan; m.nodes and m.files.
static Status StageIncrement(const CreateRequest& req, const cut::ClusterCuts& cc, const Artifact& parent,
                             const cut::GlobalCut& g, const NodeSegments& segs, const std::string& cluster_json,
                             const std::string& stage, Manifest& m) {
  const size_t n = segs.size();
  for (size_t i = 0; i < n; ++i) {
    const std::string nd = fmt::format("node-{}", i);
    if (Status st = MakeDir(walfmt::JoinPath(stage, nd)); !st.ok()) return st;
    if (Status st = MakeDir(walfmt::JoinPath(stage, nd + "/wal")); !st.ok()) return st;
    m.nodes.push_back(IncrementNode(i, parent.m.nodes[i].continue_from, *g.nodes[i], segs[i]));
  }
  // The segments, compressed on `jobs` threads (one segment each at a time);
  // listed in the manifest in node and segment order whatever order they
  // finish in.
  std::vector<SegmentTask> tasks;
  for (size_t i = 0; i < n; ++i) {
    for (const auto& seg : segs[i])
      tasks.push_back({&seg, fmt::format("node-{}/wal/{}", i, SegmentName(seg.index)), {}});
  }
  SegmentStored stored;
  if (req.segment_stored) {
    stored = [&](const SegmentTask& t, const std::string& path) { return req.segment_stored(m.name, t.rel, path); };
  }
  if (Status st = StoreSegments(stage, tasks, req.zstd_level, req.jobs, stored); !st.ok()) return st;
  for (auto& t : tasks) m.files.push_back(std::move(t.entry));
  for (size_t i = 0; i < n; ++i) {
    const std::string nd = fmt::format("node-{}", i);
    if (Status st = walfmt::SyncDir(walfmt::JoinPath(stage, nd + "/wal")); !st.ok()) return st;
    if (Status st = walfmt::SyncDir(walfmt::JoinPath(stage, nd)); !st.ok()) return st;
  }
  if (Status st = AddFile(stage, "cluster.json", walfmt::CurrentClusterJsonText(cluster_json), m); !st.ok()) return st;
  for (size_t i = 0; i < n; ++i) {
    const std::string plan = cut::SummaryToJson(PlanSummary(cc.nodes[i], parent, g.cut_id, segs[i]));
    if (Status st = AddFile(stage, PlanFile(i), plan, m); !st.ok()) return st;
  }
  return Status::Ok();
}

// Cut K may be made an increment of: consistent, and after the parent.
Status CheckIncrementCut(const cut::GlobalCut& g, const Artifact& parent) {
  if (g.status != cut::CutStatus::kConsistent) {
    return Status::InvalidArgument(fmt::format("cut {} is {}: {}; refusing to make an increment of it", g.cut_id,
                                               cut::CutStatusName(g.status), g.reason));
  }
  if (!AfterParent(parent, g)) {
    return Status::InvalidArgument(
        fmt::format("cut {} does not come after the parent {} ({})", g.cut_id, parent.name,
                    parent.m.cut ? fmt::format("cut {}", *parent.m.cut) : "snapshot " + parent.m.snapshot));
  }
  return Status::Ok();
}

namespace {

Result<CreateResult> CreateIncrement(const CreateRequest& req, const RepoListing& l, Manifest m) {
  if (req.cluster_dir.empty()) return Status::InvalidArgument("an increment needs the cluster directory");
  auto layout = cut::FindClusterLayout(req.cluster_dir);
  if (!layout.ok()) return layout.status();
  if (!layout->has_cluster_json) {
    return Status::InvalidArgument(
        fmt::format("{}: no cluster.json; an artifact needs the cluster's description", req.cluster_dir));
  }
  auto parent = IncrementParent(req, l, layout->cluster_id);
  if (!parent.ok()) return parent.status();
  const Artifact& p = **parent;
  auto chain = ChainOf(l, p.name);
  if (!chain.ok()) {
    return Status::InvalidArgument(fmt::format("parent {}: its chain is broken: {}", p.name, chain.status().message()));
  }
  auto cc = Analyze(*layout, req.jobs);
  if (!cc.ok()) return cc.status();
  if (p.m.nodes.size() != layout->wal_dirs.size()) {
    return Status::InvalidArgument(fmt::format("parent {} has {} nodes, {} has {}", p.name, p.m.nodes.size(),
                                               req.cluster_dir, layout->wal_dirs.size()));
  }
  auto k = IncrementCut(req, *cc, p);
  if (!k.ok()) return k.status();
  const cut::GlobalCut* g = cc->Find(*k);
  if (!g) return Status::NotFound(fmt::format("cut {} is not in the WAL of {}", *k, req.cluster_dir));
  // Checked before the cut's status: a missing segment is the first thing to
  // fix, and it also makes the analysis of the cut fail.
  auto segs = IncrementSegments(*layout, p, *g, *k);
  if (!segs.ok()) return segs.status();
  if (Status st = CheckIncrementCut(*g, p); !st.ok()) return st;
  if (Status st = NameArtifact(req, l, fmt::format("i-cut-{}", *k), m); !st.ok()) return st;
  m.type = "incremental";
  m.source = "wal";
  m.parent = p.name;
  m.cluster_id = layout->cluster_id;
  m.cut = *k;
  FillCutEvidence(*g, m);
  auto cj = walfmt::ReadWholeFile(walfmt::JoinPath(req.cluster_dir, "cluster.json"), kMaxManifestBytes);
  if (!cj.ok()) return cj.status();
  Staging s{walfmt::TempNameBeside(walfmt::JoinPath(req.repo, m.name))};
  if (Status st = OpenStaging(s); !st.ok()) return st;
  if (Status st = StageIncrement(req, *cc, p, *g, *segs, *cj, s.dir, m); !st.ok()) return st;
  auto r = Finish(s, req.repo, m);
  if (!r.ok()) return r;
  for (const auto* a : *chain) r->chain.push_back(a->name);
  r->chain.push_back(m.name);
  return r;
}

}  // namespace

Result<CreateResult> CreateArtifact(const CreateRequest& req) {
  if (!req.full && !req.cut && !req.latest) {
    return Status::InvalidArgument("an increment needs --cut K or --latest");
  }
  if (req.full && req.from.empty() == !req.cut.has_value()) {
    return Status::InvalidArgument("a full artifact needs exactly one of --from NAME and --cut K");
  }
  if (req.full && req.cluster_dir.empty() && !req.cut)
    return Status::InvalidArgument("--from needs the cluster directory");
  if (Status st = InitRepository(req.repo); !st.ok()) return st;
  auto lock = LockDirectory(req.repo);  // one writer at a time: the seq below is the next one
  if (!lock.ok()) return lock.status();
  auto l = ListRepository(req.repo);
  if (!l.ok()) return l.status();
  Manifest m;
  m.seq = NextSeq(*l);
  if (req.full && !req.from.empty()) return CreateRuntimeFull(req, *l, m);
  if (req.full) return CreateSyntheticFull(req, *l, m);
  return CreateIncrement(req, *l, m);
}

}  // namespace walcut::repo
