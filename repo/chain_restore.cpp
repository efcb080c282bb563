// `walcut restore --repo`: the artifact to restore (SelectTarget) and its
// chain restored step by step, the full first, each increment applied to
// the previous step's output (repo/REPOSITORY.md, "Restore").
#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "cut/load.h"
#include "recovery/key_subset.h"
#include "recovery/restore.h"
#include "repo/artifact_io.h"
#include "repo/increment.h"
#include "repo/manifest.h"
#include "repo/repository.h"
#include "walfmt/cluster_layout.h"
#include "walfmt/duration.h"
#include "walfmt/file_io.h"
#include "walfmt/staging.h"
#include "walfmt/strings.h"
#include "walfmt/text_escape.h"

namespace walcut::repo {
namespace fs = std::filesystem;
using nlohmann::json;
using walfmt::Result;
using walfmt::Status;

namespace {

// The cuts of increment `a` from its restore plans (checked against the
// manifest's checksums), reconstructed with its parent's cut attested;
// nullopt when the artifact has no plans (made by an earlier walcut).
Result<std::optional<cut::ClusterCuts>> PlannedCuts(const Artifact& a, std::optional<uint64_t> attested) {
  std::vector<cut::NodeSummary> sums;
  for (size_t i = 0; i < a.m.nodes.size(); ++i) {
    const std::string rel = PlanFile(i);
    const auto entry = std::find_if(a.m.files.begin(), a.m.files.end(), [&](const auto& f) { return f.path == rel; });
    if (entry == a.m.files.end()) return std::optional<cut::ClusterCuts>();
    const std::string path = walfmt::JoinPath(a.dir, rel);
    auto text = ReadSmall(path);
    if (!text.ok()) return text.status();
    if (text->size() != entry->bytes || Xxh3Hex(*text) != entry->xxh3_128) {
      return Status::Corruption(fmt::format("{}: xxh3-128 {} ({} bytes), the manifest says {} ({} bytes)", path,
                                            Xxh3Hex(*text), text->size(), entry->xxh3_128, entry->bytes));
    }
    auto sum = cut::SummaryFromJson(*text, path);
    if (!sum.ok()) return sum.status();
    sums.push_back(std::move(sum.value()));
  }
  cut::ReconstructOptions ro;
  ro.attested_cut = attested;
  auto cc = cut::Reconstruct(std::move(sums), ro);
  if (!cc.ok()) return Status::Corruption(fmt::format("artifact {}: restore plans: {}", a.name, cc.status().message()));
  return std::optional<cut::ClusterCuts>(std::move(cc.value()));
}

// A full artifact alone: its files copied into OUT, each checked against the
// manifest (size and checksum: a file of the right size with a byte changed
// is refused like one of another size).
Status RestoreFull(const Artifact& full, const RepoRestoreRequest& req, RepoRestoreResult& res) {
  Staging s{walfmt::TempNameBeside(fs::absolute(req.out).string())};
  if (Status st = OpenStaging(s); !st.ok()) return st;
  for (const auto& f : full.m.files) {
    if (f.path.find('/') != std::string::npos) continue;
    Hasher h;
    if (Status st = walfmt::CopyToNewFile(walfmt::JoinPath(full.dir, f.path), walfmt::JoinPath(s.dir, f.path),
                                          [&h](std::string_view p) { h.Update(p); });
        !st.ok()) {
      return st;
    }
    if (h.Hex() != f.xxh3_128 || h.bytes() != f.bytes) {
      return Status::Corruption(
          fmt::format("{}/{}: xxh3-128 {}, the manifest says {}", full.dir, f.path, h.Hex(), f.xxh3_128));
    }
  }
  if (full.m.restore.is_object()) {  // a synthetic full is a restore output: its manifest goes along
    auto data = ReadSmall(walfmt::JoinPath(full.dir, kManifestFile));
    if (!data.ok()) return data.status();
    if (Status st = walfmt::WriteNewFile(walfmt::JoinPath(s.dir, kManifestFile), *data); !st.ok()) return st;
  }
  if (Status st = walfmt::SyncDir(s.dir); !st.ok()) return st;
  if (Status st = walfmt::CommitStaging(s.dir, req.out); !st.ok()) return st;
  s.keep = true;
  for (const auto& n : full.m.nodes) res.fingerprints.push_back(n.fingerprint);
  if (req.after_step) return req.after_step(res.steps.front(), req.out);
  return Status::Ok();
}

// The layout of increment `a`: its cluster.json and node-<i>/wal.
cut::ClusterLayout IncrementLayout(const Artifact& a) {
  cut::ClusterLayout layout;
  layout.dir = a.dir;
  layout.has_cluster_json = true;
  layout.cluster_id = a.m.cluster_id;
  for (size_t i = 0; i < a.m.nodes.size(); ++i)
    layout.wal_dirs.push_back(walfmt::JoinPath(a.dir, fmt::format("node-{}/wal", i)));
  return layout;
}

// A runtime full snapshot as the base: the restore finds it by name under
// LAYOUT/snapshots/, so the first step gets a layout directory of its own
// (cluster.json and a link to the full artifact) in `work`.
Status LinkRuntimeBase(const Artifact& a, const Artifact& full, const std::string& work, cut::ClusterLayout& layout) {
  const std::string ldir = walfmt::JoinPath(work, "layout");
  if (Status st = MakeDir(ldir); !st.ok()) return st;
  auto cj = ReadSmall(walfmt::JoinPath(a.dir, "cluster.json"));
  if (!cj.ok()) return cj.status();
  if (Status st = walfmt::WriteNewFile(walfmt::JoinPath(ldir, "cluster.json"), *cj); !st.ok()) return st;
  if (Status st = MakeDir(walfmt::JoinPath(ldir, "snapshots")); !st.ok()) return st;
  std::error_code ec;
  fs::create_directory_symlink(fs::absolute(full.dir), walfmt::JoinPath(ldir, "snapshots/" + full.m.snapshot), ec);
  if (ec) return Status::Io(fmt::format("{}: cannot link the base: {}", ldir, ec.message()));
  layout.dir = ldir;
  return Status::Ok();
}

// Step j of the chain: increment chain[j] applied to `base` (a restored
// base's directory, or a runtime full snapshot's name), into OUT for the last
// step, else into work/step-<j>; `base` becomes that output.
Status RestoreStep(const std::vector<const Artifact*>& chain, size_t j, const RepoRestoreRequest& req,
                   const std::string& work, std::string& base, RepoRestoreResult& res) {
  const Artifact& a = *chain[j];
  cut::ClusterLayout layout = IncrementLayout(a);
  if (base.empty()) {
    if (Status st = LinkRuntimeBase(a, *chain.front(), work, layout); !st.ok()) return st;
    base = chain.front()->m.snapshot;
  }
  auto cc = PlannedCuts(a, chain[j - 1]->m.cut);
  if (!cc.ok()) return cc.status();
  if (!cc->has_value()) {  // an increment made before restore plans existed: analyse its WAL
    auto analysed = Analyze(layout, req.jobs, chain[j - 1]->m.cut);
    if (!analysed.ok()) return analysed.status();
    cc.value() = std::move(analysed.value());
  }
  const bool last = j + 1 == chain.size();
  const std::string out = last ? req.out : walfmt::JoinPath(work, fmt::format("step-{}", j));
  recovery::RestoreRequest rq;
  rq.cluster_dir = layout.dir;
  rq.cut = *a.m.cut;
  rq.base = base;
  rq.out = out;
  rq.jobs = req.jobs;
  rq.subset = req.subset;
  auto r = recovery::Restore(**cc, layout, rq);
  if (!r.ok()) {
    // Inside a repository a refused step is a finding about the artifact, not usage.
    if (r.status().code() == walfmt::ErrorCode::kInvalidArgument) {
      return Status::Corruption(fmt::format("artifact {}: {}", a.name, r.status().message()));
    }
    return r.status();
  }
  json chain_json = json::array();
  for (size_t x = 0; x <= j; ++x) chain_json.push_back(chain[x]->name);
  const json extra = {{"repository", {{"dir", req.repo}, {"artifact", a.name}, {"chain", chain_json}}}};
  if (Status st = recovery::WriteRestore(*r, out, walfmt::DumpJson(extra)); !st.ok()) return st;
  if (last) {
    for (const auto& n : r->nodes) res.fingerprints.push_back(n.fingerprint);
  }
  if (req.after_step) {
    if (Status st = req.after_step(res.steps[j], out); !st.ok()) return st;
  }
  base = fs::absolute(out).string();
  return Status::Ok();
}

// A partial restore: the target is an increment (its steps restore the
// subset; a full alone is a copy of its files), and the subset fits the
// cluster its cluster.json describes.
Status CheckSubset(const Artifact& target, size_t chain_length, recovery::KeySubset subset) {
  if (subset.whole()) return Status::Ok();
  if (chain_length == 1) {
    return Status::InvalidArgument(
        fmt::format("--keys/--partition: {} is a full artifact, restored by copying its files; a partial restore "
                    "from a repository needs an increment as the target",
                    target.name));
  }
  auto info = walfmt::LoadClusterInfo(target.dir);
  if (!info.ok()) return info.status();
  return recovery::ResolveSubset(subset, info->partitions, target.dir);
}

// A full and its increments, each step restored into a work directory beside
// OUT, the last one into OUT.
Status RestoreChain(const std::vector<const Artifact*>& chain, const RepoRestoreRequest& req, RepoRestoreResult& res) {
  const Artifact& full = *chain.front();
  Staging work{walfmt::TempNameBeside(fs::absolute(req.out).string() + "-work")};
  if (Status st = OpenStaging(work); !st.ok()) return st;
  std::string base;
  if (full.m.restore.is_object()) base = fs::absolute(full.dir).string();  // a restore output: a restored base
  if (req.after_step) {
    if (Status st = req.after_step(res.steps.front(), full.dir); !st.ok()) return st;
  }
  for (size_t j = 1; j < chain.size(); ++j) {
    if (Status st = RestoreStep(chain, j, req, work.dir, base, res); !st.ok()) return st;
  }
  return Status::Ok();
}

}  // namespace

cut::ClusterLayout LayoutOfIncrement(const Artifact& a) { return IncrementLayout(a); }

Result<cut::ClusterCuts> IncrementCuts(const Artifact& a, std::optional<uint64_t> attested, unsigned jobs) {
  auto cc = PlannedCuts(a, attested);
  if (!cc.ok()) return cc.status();
  if (cc->has_value()) return std::move(**cc);
  return Analyze(IncrementLayout(a), jobs, attested);
}

Result<const Artifact*> SelectTarget(const RepoListing& l, const RepoRestoreRequest& req) {
  const int chosen = !req.name.empty() + req.cut.has_value() + req.latest + req.before.has_value();
  if (chosen != 1) return Status::InvalidArgument("give exactly one of NAME, --cut K, --latest, --before TIME");
  if (!req.name.empty()) {
    const Artifact* a = l.Find(req.name);
    if (!a) return Status::NotFound(fmt::format("{}: no artifact {}", l.dir, req.name));
    return a;
  }
  const bool wall = req.before && req.before->wall_clock;
  // When an artifact finished, on the scale `before` is given in: cluster
  // time, or Unix microseconds through the artifact's epoch.
  auto when = [wall](const Artifact& a) -> int64_t {
    return wall ? static_cast<int64_t>(*a.epoch_unix_us + a.m.time_us) : static_cast<int64_t>(a.m.time_us);
  };
  const Artifact* best = nullptr;
  size_t without_epoch = 0;
  std::vector<uint64_t> clusters;  // of the restorable artifacts, for a cluster time
  for (const auto& a : l.artifacts) {
    if (!a.status.ok() || !ChainOf(l, a.name).ok()) continue;
    if (req.cut && a.m.cut != req.cut) continue;
    if (req.before) {
      if (wall && !a.epoch_unix_us) {
        ++without_epoch;
        continue;
      }
      if (std::find(clusters.begin(), clusters.end(), a.m.cluster_id) == clusters.end())
        clusters.push_back(a.m.cluster_id);
      if (!(when(a) < (wall ? req.before->unix_us : static_cast<int64_t>(req.before->cluster_us)))) continue;
    }
    if (!best || when(a) > when(*best) || (when(a) == when(*best) && a.m.seq > best->m.seq)) best = &a;
  }
  if (req.before && !wall && clusters.size() > 1) {
    std::string ids;
    for (auto c : clusters) ids += fmt::format("{}{:016x}", ids.empty() ? "" : ", ", c);
    return Status::InvalidArgument(fmt::format(
        "{}: holds artifacts of {} clusters ({}), each with its own clock, so cluster time {} names no one instant; "
        "give a wall-clock time (ISO 8601 or @UNIX_SECONDS), an artifact NAME or --cut K",
        l.dir, clusters.size(), ids, walfmt::FormatClusterOffset(req.before->cluster_us)));
  }
  if (!best) {
    if (req.cut) return Status::NotFound(fmt::format("{}: no restorable artifact of cut {}", l.dir, *req.cut));
    if (req.before) {
      const std::string at =
          wall ? walfmt::FormatUtc(req.before->unix_us) : walfmt::FormatClusterOffset(req.before->cluster_us);
      const std::string skipped =
          without_epoch == 0 ? ""
                             : fmt::format(
                                   " ({} restorable artifact{} record{} no cluster epoch, so no wall-clock time: "
                                   "give cluster time since creation with a unit, e.g. 1.5s)",
                                   without_epoch, without_epoch == 1 ? "" : "s", without_epoch == 1 ? "s" : "");
      return Status::NotFound(fmt::format("{}: no restorable artifact finished before {}{}", l.dir, at, skipped));
    }
    return Status::NotFound(fmt::format("{}: no restorable artifact", l.dir));
  }
  return best;
}

Result<RepoRestoreResult> RestoreFromRepository(const RepoRestoreRequest& req) {
  auto l = ListRepository(req.repo);
  if (!l.ok()) return l.status();
  auto target = SelectTarget(*l, req);
  if (!target.ok()) return target.status();
  auto chain = ChainOf(*l, (*target)->name);
  if (!chain.ok()) return chain.status();
  if (Status st = CheckSubset(**target, chain->size(), req.subset); !st.ok()) return st;
  RepoRestoreResult res;
  res.target = (*target)->name;
  for (const auto* a : *chain) res.steps.push_back({a->name, a->m.cut, a->m.nodes});
  if (req.dry_run) return res;
  if (req.out.empty()) return Status::InvalidArgument("--out OUT is required (or --dry-run)");
  // OUT locked for the whole chain (walfmt/staging.h): a second restore into
  // it fails at once; the last step's own lock on OUT is this one, nested.
  auto out_lock = walfmt::OutputLock::Acquire(req.out);
  if (!out_lock.ok()) return out_lock.status();
  std::error_code ec;
  if (fs::exists(req.out, ec))
    return Status::InvalidArgument(fmt::format("{}: already exists; refusing to overwrite", req.out));
  Status st = chain->size() == 1 ? RestoreFull(*chain->front(), req, res) : RestoreChain(*chain, req, res);
  if (!st.ok()) return st;
  return res;
}

}  // namespace walcut::repo
