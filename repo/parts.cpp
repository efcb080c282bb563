// Increments made of per-node parts (parts.h, REPOSITORY.md "Increments from
// parts"): a part is built with the single-host create's own pieces
// (increment_build.h: segments, node entry, restore plan) and published as
// an artifact is (artifact_io.h), under REPO/.parts/<artifact>/; assembling
// copies the parts' files into a new artifact, each checked against its
// part's manifest, in the order the single-host create lists them. In an
// encrypted repository both go through a private directory (parts_crypt.cpp).
#include "repo/parts.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <random>
#include <set>

#include <fmt/format.h>

#include "cut/load.h"
#include "cut/scan.h"
#include "recovery/part.h"
#include "recovery/part_node_dir.h"
#include "repo/artifact_io.h"
#include "repo/crypt.h"
#include "repo/increment_build.h"
#include "repo/manifest.h"
#include "repo/parts_internal.h"
#include "repo/segment_store.h"
#include "walfmt/cluster_layout.h"
#include "walfmt/file_io.h"
#include "walfmt/strings.h"

namespace walcut::repo {
namespace fs = std::filesystem;
using nlohmann::json;
using walfmt::Lsn;
using walfmt::Result;
using walfmt::Status;

std::vector<std::string> PendingParts(const std::vector<std::string>& rel_keys) {
  std::map<std::string, bool> parts;  // "<artifact>/<part>" -> complete
  const std::string top = std::string(kPartsDir) + "/";
  for (const auto& k : rel_keys) {
    if (k.rfind(top, 0) != 0) continue;
    const size_t a = k.find('/', top.size());
    const size_t p = a == std::string::npos ? a : k.find('/', a + 1);
    if (p == std::string::npos) continue;
    const std::string part = k.substr(top.size(), p - top.size());
    if (part.find("/.") != std::string::npos) continue;  // a part being built
    parts[part] |= k.substr(p + 1) == kManifestFile;
  }
  std::vector<std::string> out;
  for (const auto& [p, complete] : parts) out.push_back(complete ? p : p + " (incomplete)");
  return out;
}

std::vector<std::string> PartFiles(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  const fs::path root = fs::path(dir) / kPartsDir;
  if (!fs::is_directory(root, ec)) return out;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_regular_file(ec)) out.push_back(fs::relative(it->path(), dir, ec).string());
  }
  return out;
}

namespace {

std::string ArtifactName(const std::string& name, uint64_t k) {
  return name.empty() ? fmt::format("i-cut-{}", k) : name;
}

// The verdict of --verdict: usable for an increment (cluster.json carried).
Result<recovery::Verdict> IncrementVerdict(const std::string& path) {
  auto v = recovery::ReadPartVerdict(path, 0);
  if (!v.ok()) return v.status();
  if (v->cluster_json.empty()) {
    return Status::InvalidArgument(fmt::format(
        "{}: the verdict carries no cluster.json (give --cluster-json to walcut cuts); an artifact needs it", path));
  }
  return v;
}

// The parent (--parent, else the newest artifact of the verdict's cluster),
// with a complete chain, of as many nodes as the verdict, before its cut.
Result<const Artifact*> PartParent(const RepoListing& l, const recovery::Verdict& v, const std::string& repo,
                                   const std::string& parent_arg, const std::string& verdict_path) {
  CreateRequest cr;
  cr.repo = repo;
  cr.parent = parent_arg;
  cr.cluster_dir = verdict_path;
  auto parent = IncrementParent(cr, l, v.file_cluster_id);
  if (!parent.ok()) return parent.status();
  const Artifact& p = **parent;
  if (auto chain = ChainOf(l, p.name); !chain.ok()) {
    return Status::InvalidArgument(fmt::format("parent {}: its chain is broken: {}", p.name, chain.status().message()));
  }
  if (p.m.nodes.size() != v.nodes.size()) {
    return Status::InvalidArgument(fmt::format("parent {} has {} nodes, the verdict {} has {}", p.name,
                                               p.m.nodes.size(), verdict_path, v.nodes.size()));
  }
  bool after = p.m.cut ? v.cut > *p.m.cut : true;
  for (size_t i = 0; !p.m.cut && i < v.nodes.size(); ++i) {
    after = after && v.nodes[i].started && p.m.nodes[i].continue_from < v.nodes[i].start;
  }
  if (!after) {
    return Status::InvalidArgument(fmt::format("cut {} does not come after the parent {} ({})", v.cut, p.name,
                                               p.m.cut ? fmt::format("cut {}", *p.m.cut) : "snapshot " + p.m.snapshot));
  }
  return parent;
}

std::string Token() {
  std::random_device rd;
  return fmt::format("{:08x}{:08x}", rd(), rd());
}

}  // namespace

Result<PartInputs> PreparePart(const IncrementPartRequest& req, const RepoListing& l) {
  PartInputs in;
  auto target = recovery::ResolveNodeDir(req.node_dir, req.node);
  if (!target.ok()) return target.status();
  in.node = target->node;
  in.wal_dir = target->wal_dir;
  auto v = IncrementVerdict(req.verdict);
  if (!v.ok()) return v.status();
  in.v = std::move(v.value());
  if (in.node >= in.v.nodes.size()) {
    return Status::InvalidArgument(fmt::format("the verdict {} (cut {}) covers nodes 0..{}; there is no node {}",
                                               req.verdict, in.v.cut, in.v.nodes.size() - 1, in.node));
  }
  in.artifact = ArtifactName(req.name, in.v.cut);
  if (Status st = CheckName(in.artifact); !st.ok()) return st;
  if (l.Find(in.artifact)) {
    return Status::InvalidArgument(fmt::format("{}: artifact {} already exists", req.repo, in.artifact));
  }
  auto parent = PartParent(l, in.v, req.repo, req.parent, req.verdict);
  if (!parent.ok()) return parent.status();
  in.parent = *parent;
  // Node I's WAL against the verdict, before anything is written: what
  // `walcut restore NODE_DIR --verdict V --dry-run` checks (recovery/part.h),
  // but for the base file, which an increment does not hold.
  recovery::PartRequest pr;
  pr.verdict = &in.v;
  pr.node = in.node;
  pr.wal_dir = in.wal_dir;
  pr.dry_run = true;
  pr.wal_only = true;
  auto checked = recovery::RestorePart(pr);
  if (!checked.ok()) return checked.status();
  cut::ScanOptions so;
  so.node = in.node;
  so.expect_cluster = true;
  so.cluster_id = in.v.file_cluster_id;
  auto live = cut::ScanNode(in.wal_dir, so);
  if (!live.ok()) return live.status();
  in.live = std::move(live.value());
  const recovery::VerdictNode& vn = in.v.nodes[in.node];
  const cut::NodeCut* kc = in.live.FindCut(in.v.cut);
  if (!kc || !kc->finished || !(kc->start == vn.start) || !(kc->finish == vn.finish)) {
    return Status::InvalidArgument(
        fmt::format("{}: the scan of node {}'s WAL does not find cut {} where the verdict {} "
                    "places it ({}..{})",
                    in.wal_dir, in.node, in.v.cut, req.verdict, vn.start.ToString(), vn.finish.ToString()));
  }
  std::string missed;
  in.segs = NodeIncrementSegments(in.wal_dir, in.node, in.parent->m.nodes[in.node].continue_from, kc, in.v.cut, missed);
  if (!missed.empty()) {
    return Status::Corruption(
        fmt::format("Missed WAL segment(s) for an increment from {} to cut {}: {}", in.parent->name, in.v.cut, missed));
  }
  in.part_name = fmt::format("node-{}.{}", in.node, Token());
  return in;
}

Status BuildPart(const PartInputs& in, const std::string& stage, int level, unsigned jobs, Manifest& pm) {
  const std::string nd = fmt::format("node-{}", in.node);
  if (Status st = MakeDir(walfmt::JoinPath(stage, nd)); !st.ok()) return st;
  if (Status st = MakeDir(walfmt::JoinPath(stage, nd + "/wal")); !st.ok()) return st;
  std::vector<SegmentTask> tasks;
  for (const auto& seg : in.segs) tasks.push_back({&seg, fmt::format("{}/wal/{}", nd, SegmentName(seg.index)), {}});
  if (Status st = StoreSegments(stage, tasks, level, jobs); !st.ok()) return st;
  for (auto& t : tasks) pm.files.push_back(std::move(t.entry));
  if (Status st = walfmt::SyncDir(walfmt::JoinPath(stage, nd + "/wal")); !st.ok()) return st;
  if (Status st = walfmt::SyncDir(walfmt::JoinPath(stage, nd)); !st.ok()) return st;
  const std::string plan = cut::SummaryToJson(PlanSummary(in.live, *in.parent, in.v.cut, in.segs));
  if (Status st = AddFile(stage, PlanFile(in.node), plan, pm); !st.ok()) return st;
  if (Status st = AddFile(stage, kPartSummaryFile, cut::SummaryToJson(in.live), pm); !st.ok()) return st;
  const cut::NodeCut& kc = *in.live.FindCut(in.v.cut);
  pm.name = in.part_name;
  pm.type = "incremental";
  pm.source = "wal";
  pm.parent = in.parent->name;
  pm.cluster_id = in.v.file_cluster_id;
  pm.cut = in.v.cut;
  pm.time_us = kc.finish_time_us;
  pm.verdict = cut::CutStatusName(in.v.status);
  pm.evidence = {{"part",
                  {{"artifact", in.artifact},
                   {"node", in.node},
                   {"nodes", in.v.nodes.size()},
                   {"verdict", in.v.id},
                   {"parent_seq", in.parent->m.seq}}}};
  ArtifactNode an = IncrementNode(in.node, in.parent->m.nodes[in.node].continue_from, kc, in.segs);
  an.node = 0;  // a part's manifest lists its one node as nodes[0]; evidence.part.node says which
  pm.nodes = {an};
  return Status::Ok();
}

IncrementPartResult PartResult(const PartInputs& in, const Manifest& pm, std::string where) {
  IncrementPartResult r;
  r.artifact = in.artifact;
  r.where = std::move(where);
  r.cut = in.v.cut;
  r.parent = in.parent->name;
  r.verdict_id = in.v.id;
  r.node = pm.nodes[0];
  r.node.node = in.node;
  r.files = pm.files.size();
  r.bytes = pm.Bytes();
  return r;
}

namespace {

// Node I's complete parts of `artifact` already in the directory repository.
std::vector<std::string> ExistingParts(const std::string& repo, const std::string& artifact, uint32_t node) {
  std::vector<std::string> out;
  for (const auto& p : PendingParts(PartFiles(repo))) {
    if (p.rfind(fmt::format("{}/node-{}.", artifact, node), 0) == 0 && p.find(' ') == std::string::npos)
      out.push_back(p);
  }
  return out;
}

Result<IncrementPartResult> CreateDirPart(const IncrementPartRequest& req, const RepoLocation& loc,
                                          const RemoteOptions& o) {
  const std::string& repo = loc.dir;
  auto l = ListAt(loc, o);  // the manifests decrypted in an encrypted repository
  if (!l.ok()) return l.status();
  auto in = PreparePart(req, *l);
  if (!in.ok()) return in.status();
  if (auto dup = ExistingParts(repo, in->artifact, in->node); !dup.empty()) {
    return Status::InvalidArgument(
        fmt::format("{}: node {}'s part of {} is already there ({}/{}/{}); remove it to upload it again", repo,
                    in->node, in->artifact, repo, kPartsDir, dup.front()));
  }
  const std::string top = walfmt::JoinPath(repo, kPartsDir);
  const std::string dir = walfmt::JoinPath(top, in->artifact);
  for (const auto& [d, parent] : {std::pair{top, repo}, std::pair{dir, top}}) {
    std::error_code ec;
    if (fs::is_directory(d, ec)) continue;
    if (!fs::create_directory(d, ec) && !fs::is_directory(d)) {  // another node's part may have made it
      return Status::Io(fmt::format("{}: cannot create: {}", d, ec.message()));
    }
    if (Status st = walfmt::SyncDir(parent); !st.ok()) return st;
  }
  Manifest pm;
  if (o.key) {  // built in a private directory, encrypted into place
    if (Status st = PublishSealedPart(*o.key, *in, req.zstd_level, req.jobs, dir, pm); !st.ok()) return st;
    return PartResult(*in, pm, walfmt::JoinPath(dir, in->part_name));
  }
  Staging s{walfmt::TempNameBeside(walfmt::JoinPath(dir, in->part_name))};
  if (Status st = OpenStaging(s); !st.ok()) return st;
  if (Status st = BuildPart(*in, s.dir, req.zstd_level, req.jobs, pm); !st.ok()) return st;
  if (Status st = Publish(s, dir, pm); !st.ok()) return st;
  return PartResult(*in, pm, walfmt::JoinPath(dir, in->part_name));
}

}  // namespace

Result<IncrementPartResult> CreateIncrementPart(const IncrementPartRequest& req, const RemoteOptions& o) {
  auto loc = ParseRepoLocation(req.repo);
  if (!loc.ok()) return loc.status();
  // The key is checked against the marker by the listing, before anything is written.
  if (loc->s3) return CreateS3Part(req, o);
  return CreateDirPart(req, *loc, o);
}

// ---- assembling ---------------------------------------------------------------

namespace {

struct Part {
  std::string dir;
  Manifest m;
  uint32_t node = 0;
};

// Why part `p` does not belong to the increment; "" when it does.
std::string Foreign(const Part& p, const json& info, const recovery::Verdict& v, const Artifact& parent,
                    const std::string& artifact) {
  const auto str = [&](const char* k) {
    return info.contains(k) && info[k].is_string() ? info[k].get<std::string>() : "";
  };
  const auto num = [&](const char* k) {
    return info.contains(k) && info[k].is_number_unsigned() ? info[k].get<uint64_t>() : ~0ull;
  };
  if (str("verdict") != v.id) return fmt::format("it comes from verdict {}, not {}", str("verdict"), v.id);
  if (!p.m.cut || *p.m.cut != v.cut) return fmt::format("it is of cut {}, not {}", p.m.cut ? *p.m.cut : 0, v.cut);
  if (p.m.cluster_id != v.file_cluster_id) {
    return fmt::format("it is of cluster {:016x}, not {:016x}", p.m.cluster_id, v.file_cluster_id);
  }
  if (p.m.parent != parent.name || num("parent_seq") != parent.m.seq) {
    return fmt::format("it builds on {} (seq {}), not {} (seq {})", p.m.parent, num("parent_seq"), parent.name,
                       parent.m.seq);
  }
  if (str("artifact") != artifact) return fmt::format("it is a part of {}, not {}", str("artifact"), artifact);
  if (num("nodes") != v.nodes.size() || num("node") >= v.nodes.size() || p.m.nodes.size() != 1) {
    return fmt::format("it is node {} of {}, the verdict has {} nodes", num("node"), num("nodes"), v.nodes.size());
  }
  if (!(p.m.nodes[0].wal_from == parent.m.nodes[num("node")].continue_from)) {
    return fmt::format("its WAL starts at {}, the parent's R_{} is {}", p.m.nodes[0].wal_from.ToString(), num("node"),
                       parent.m.nodes[num("node")].continue_from.ToString());
  }
  return "";
}

// The complete parts under `dir` (REPO/.parts/<artifact>), one per node, each belonging.
Result<std::vector<Part>> ReadParts(const std::string& dir, const recovery::Verdict& v, const Artifact& parent,
                                    const std::string& artifact) {
  std::vector<std::vector<Part>> by_node(v.nodes.size());
  std::error_code ec;
  std::vector<std::string> names;
  if (fs::is_directory(dir, ec)) {
    for (const auto& e : fs::directory_iterator(dir, ec)) names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  for (const auto& name : names) {
    const std::string pdir = walfmt::JoinPath(dir, name);
    const std::string mpath = walfmt::JoinPath(pdir, kManifestFile);
    if (name[0] == '.' || !fs::exists(mpath, ec)) continue;  // being built (or abandoned)
    auto text = ReadSmall(mpath);
    if (!text.ok()) return text.status();
    auto m = DecodeManifest(*text, mpath);
    if (!m.ok()) return Status::Corruption(m.status().message());
    Part p{pdir, std::move(m.value()), 0};
    const json info = p.m.evidence.is_object() && p.m.evidence.contains("part") ? p.m.evidence["part"] : json();
    if (const std::string why = Foreign(p, info, v, parent, artifact); !why.empty()) {
      return Status::InvalidArgument(fmt::format("{}: does not belong to {}: {}", pdir, artifact, why));
    }
    p.node = static_cast<uint32_t>(info["node"].get<uint64_t>());
    p.m.nodes[0].node = p.node;
    by_node[p.node].push_back(std::move(p));
  }
  std::vector<Part> out;
  std::string missing;
  for (size_t i = 0; i < by_node.size(); ++i) {
    if (by_node[i].size() > 1) {
      return Status::InvalidArgument(fmt::format("{}: node {}'s part is there twice ({} and {}); remove one", dir, i,
                                                 by_node[i][0].dir, by_node[i][1].dir));
    }
    if (by_node[i].empty()) missing += fmt::format("{}{}", missing.empty() ? "" : ", ", i);
    if (by_node[i].size() == 1) out.push_back(std::move(by_node[i][0]));
  }
  if (!missing.empty()) {
    return Status::InvalidArgument(
        fmt::format("{}: no complete part of node(s) {} of {} (uploaded with snapshot create NODE_DIR --incremental "
                    "--node I --verdict V)",
                    dir, missing, artifact));
  }
  return out;
}

// Copies `rel` of part `p` into the staging directory, checked against the part's manifest.
Status CopyChecked(const Part& p, const std::string& rel, const std::string& stage, Manifest& m) {
  const ArtifactFile* want = nullptr;
  for (const auto& f : p.m.files) {
    if (f.path == rel) want = &f;
  }
  const std::string from = walfmt::JoinPath(p.dir, rel);
  if (!want) return Status::Corruption(fmt::format("{}: not listed in its part's manifest", from));
  if (Status st = AddFileCopy(stage, rel, from, m); !st.ok()) return st;
  const ArtifactFile& got = m.files.back();
  if (got.bytes != want->bytes || got.xxh3_128 != want->xxh3_128) {
    return Status::Corruption(
        fmt::format("{}: {} bytes with XXH3-128 {}, but its part's manifest says {} bytes with {}", from, got.bytes,
                    got.xxh3_128, want->bytes, want->xxh3_128));
  }
  return Status::Ok();
}

// The cut as every node's summary (in the parts) shows it: the evidence the
// single-host create records. Each summary is checked against its part's
// manifest first.
Result<cut::ClusterCuts> PartsCuts(const std::vector<Part>& parts) {
  std::vector<cut::NodeSummary> sums;
  for (const auto& p : parts) {
    const std::string path = walfmt::JoinPath(p.dir, kPartSummaryFile);
    const ArtifactFile* want = nullptr;
    for (const auto& f : p.m.files) {
      if (f.path == kPartSummaryFile) want = &f;
    }
    if (!want) return Status::Corruption(fmt::format("{}: not listed in its part's manifest", path));
    auto text = ReadSmall(path);
    if (!text.ok()) return text.status();
    if (text->size() != want->bytes || Xxh3Hex(*text) != want->xxh3_128) {
      return Status::Corruption(
          fmt::format("{}: {} bytes with XXH3-128 {}, but its part's manifest says {} bytes with {}", path,
                      text->size(), Xxh3Hex(*text), want->bytes, want->xxh3_128));
    }
    auto sum = cut::SummaryFromJson(*text, path);
    if (!sum.ok()) return Status::Corruption(sum.status().message());
    sums.push_back(std::move(sum.value()));
  }
  return cut::Reconstruct(std::move(sums));
}

// The artifact's files in the single-host create's order: every node's
// segments, cluster.json, every node's restore plan.
Status StageFromParts(const std::vector<Part>& parts, const recovery::Verdict& v, const std::string& stage,
                      Manifest& m) {
  for (const auto& p : parts) {
    const std::string nd = fmt::format("node-{}", p.node);
    if (Status st = MakeDir(walfmt::JoinPath(stage, nd)); !st.ok()) return st;
    if (Status st = MakeDir(walfmt::JoinPath(stage, nd + "/wal")); !st.ok()) return st;
  }
  for (const auto& p : parts) {
    for (const auto& seg : p.m.nodes[0].segments) {
      if (Status st = CopyChecked(p, fmt::format("node-{}/wal/{}", p.node, seg), stage, m); !st.ok()) return st;
    }
  }
  for (const auto& p : parts) {
    const std::string nd = fmt::format("node-{}", p.node);
    if (Status st = walfmt::SyncDir(walfmt::JoinPath(stage, nd + "/wal")); !st.ok()) return st;
    if (Status st = walfmt::SyncDir(walfmt::JoinPath(stage, nd)); !st.ok()) return st;
  }
  if (Status st = AddFile(stage, "cluster.json", walfmt::CurrentClusterJsonText(v.cluster_json), m); !st.ok())
    return st;
  for (const auto& p : parts) {
    if (Status st = CopyChecked(p, PlanFile(p.node), stage, m); !st.ok()) return st;
  }
  return Status::Ok();
}

}  // namespace

Result<CreateResult> AssembleInto(const RepoListing& l, const AssembleRequest& req, const std::string& parts_dir,
                                  const std::string& out_repo) {
  auto v = IncrementVerdict(req.verdict);
  if (!v.ok()) return v.status();
  const std::string artifact = ArtifactName(req.name, v->cut);
  if (Status st = CheckName(artifact); !st.ok()) return st;
  if (l.Find(artifact))
    return Status::InvalidArgument(fmt::format("{}: artifact {} already exists", req.repo, artifact));
  auto parent = PartParent(l, *v, req.repo, req.parent, req.verdict);
  if (!parent.ok()) return parent.status();
  const Artifact& p = **parent;
  auto parts = ReadParts(parts_dir, *v, p, artifact);
  if (!parts.ok()) return parts.status();
  auto cc = PartsCuts(*parts);
  if (!cc.ok()) return cc.status();
  const cut::GlobalCut* g = cc->Find(v->cut);
  if (!g) return Status::InvalidArgument(fmt::format("cut {} is not in the parts' summaries", v->cut));
  if (Status st = CheckIncrementCut(*g, p); !st.ok()) return Status::Corruption(st.message());
  Manifest m;
  m.seq = NextSeq(l);
  m.name = artifact;
  m.type = "incremental";
  m.source = "wal";
  m.parent = p.name;
  m.cluster_id = v->file_cluster_id;
  m.cut = v->cut;
  FillCutEvidence(*g, m);
  for (const auto& part : *parts) m.nodes.push_back(part.m.nodes[0]);
  Staging s{walfmt::TempNameBeside(walfmt::JoinPath(out_repo, artifact))};
  if (Status st = OpenStaging(s); !st.ok()) return st;
  if (Status st = StageFromParts(*parts, *v, s.dir, m); !st.ok()) return st;
  if (Status st = Publish(s, out_repo, m); !st.ok()) return st;
  CreateResult r;
  r.m = m;
  r.dir = walfmt::JoinPath(out_repo, artifact);
  auto chain = ChainOf(l, p.name);
  for (const auto* a : *chain) r.chain.push_back(a->name);
  r.chain.push_back(artifact);
  return r;
}

Result<CreateResult> AssembleIncrement(const AssembleRequest& req, const RemoteOptions& o) {
  auto loc = ParseRepoLocation(req.repo);
  if (!loc.ok()) return loc.status();
  // The key against the marker first: none or another takes no lock (the
  // listing would check it too, but under the lock), writes nothing.
  if (Status st = CheckKeyAt(*loc, o); !st.ok()) return st;
  if (loc->s3) return AssembleS3(req, o);
  const std::string& repo = loc->dir;
  if (!IsRepository(repo)) {
    return Status::InvalidArgument(fmt::format("{}: not a walcut repository (no {})", repo, kMarkerFile));
  }
  auto lock = LockDirectory(repo);  // one writer at a time: the seq is the next one
  if (!lock.ok()) return lock.status();
  auto l = ListAt(*loc, o);
  if (!l.ok()) return l.status();
  auto v = IncrementVerdict(req.verdict);
  if (!v.ok()) return v.status();
  const std::string artifact = ArtifactName(req.name, v->cut);
  const std::string parts_dir = walfmt::JoinPath(walfmt::JoinPath(repo, kPartsDir), artifact);
  auto r = o.key ? AssembleSealed(*o.key, *l, req, artifact, parts_dir, repo) : AssembleInto(*l, req, parts_dir, repo);
  if (!r.ok()) return r;
  // The parts served: removed (the artifact is durable; a crash here leaves
  // parts of an artifact that exists, which a later assemble refuses).
  std::error_code ec;
  fs::remove_all(parts_dir, ec);
  fs::remove(walfmt::JoinPath(repo, kPartsDir), ec);  // only when empty
  return r;
}

}  // namespace walcut::repo
