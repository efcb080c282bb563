// walcut restore --repo REPO (NAME | --cut K | --latest | --before TIME)
// --out OUT: a full artifact and its chain of increments restored stepwise,
// without the cluster directory. cli/cmd_restore.cpp routes --repo here.
#include <fmt/format.h>

#include "cli/command.h"
#include "cli/output.h"
#include "cli/repo_commands.h"
#include "cli/restore_check.h"
#include "repo/repository.h"
#include "walfmt/text_escape.h"

namespace walcut::cli {

int RunRestoreRepo(const RepoRestoreCliOptions& o) {
  const auto loc = RepoLocationOf(o.repo);
  if (!loc) return kExitUsage;
  repo::RepoRestoreRequest rq;
  rq.repo = loc->s3 ? loc->url : loc->dir;
  rq.name = o.name;
  rq.cut = o.cut;
  rq.latest = o.latest;
  rq.before = o.before;
  rq.out = o.out;
  rq.dry_run = o.dry_run;
  rq.jobs = o.jobs;
  rq.subset = o.subset;
  if (!o.dry_run && o.out.empty()) {
    PrintError("--out OUT is required (or --dry-run)");
    return kExitUsage;
  }
  if (const std::string p = loc->s3 ? "" : OutputInsideInput("--out", o.out, {loc->dir}); !o.dry_run && !p.empty()) {
    PrintError(p);
    return kExitUsage;
  }
  int key_rc = 0;
  const auto remote = RemoteFor(o.access, *loc, o.jobs, key_rc);
  if (!remote) return key_rc;
  auto r = repo::RestoreAt(*loc, rq, *remote);
  if (!r.ok()) {
    PrintError(r.status().message());
    switch (r.status().code()) {
      case walfmt::ErrorCode::kNotFound:
      case walfmt::ErrorCode::kInvalidArgument:
        return kExitUsage;
      case walfmt::ErrorCode::kCorruption:
        return kExitFindings;
      default:
        return kExitIo;
    }
  }
  if (o.json) {
    nlohmann::json steps = nlohmann::json::array();
    for (const auto& s : r->steps) {
      nlohmann::json nodes = nlohmann::json::array();
      for (const auto& n : s.nodes) {
        if (!n.has_wal) continue;
        nodes.push_back({{"node", n.node},
                         {"wal_from", n.wal_from.ToString()},
                         {"wal_to", n.wal_to.ToString()},
                         {"segments", n.segments}});
      }
      steps.push_back({{"artifact", s.artifact},
                       {"cut", s.cut ? nlohmann::json(*s.cut) : nlohmann::json(nullptr)},
                       {"wal", nodes}});
    }
    nlohmann::json fps = nlohmann::json::array();
    for (auto f : r->fingerprints) fps.push_back(fmt::format("{:016x}", f));
    nlohmann::json j = {{"schema", "walcut.restore.repo/1"},
                        {"repo", o.repo},
                        {"target", r->target},
                        {"dry_run", o.dry_run},
                        {"out", o.dry_run ? nlohmann::json(nullptr) : nlohmann::json(o.out)},
                        {"subset", SubsetJson(o.subset)},
                        {"steps", steps},
                        {"fingerprints", fps}};
    fmt::print("{}\n", walfmt::DumpJson(j, 2));
    return kExitOk;
  }
  fmt::print("{} {} from repository {}: {} step{}\n", o.dry_run ? "plan: restore" : "restored", r->target, o.repo,
             r->steps.size(), r->steps.size() == 1 ? "" : "s");
  if (!o.subset.whole()) fmt::print("  subset: {} (a partial restore)\n", o.subset.Describe());
  for (size_t i = 0; i < r->steps.size(); ++i) {
    const auto& s = r->steps[i];
    if (i == 0) {
      fmt::print("  base {} ({})\n", s.artifact, s.cut ? fmt::format("cut {}", *s.cut) : "runtime full snapshot");
      continue;
    }
    fmt::print("  apply {} (cut {}):\n", s.artifact, *s.cut);
    for (const auto& n : s.nodes) {
      if (!n.has_wal) continue;
      fmt::print("    node {}: WAL {} .. {} from {} segment{} ({:016X}..{:016X})\n", n.node, n.wal_from.ToString(),
                 n.wal_to.ToString(), n.segments.size(), n.segments.size() == 1 ? "" : "s", n.first_segment,
                 n.last_segment);
    }
  }
  if (!o.dry_run) {
    for (size_t i = 0; i < r->fingerprints.size(); ++i)
      fmt::print("  node {}: fingerprint {:016x}\n", i, r->fingerprints[i]);
    fmt::print("wrote {}/node-*.snap\n", o.out);
  }
  return kExitOk;
}

}  // namespace walcut::cli
