// walcut snapshot create NODE_DIR --repo REPO --incremental --verdict V
// [--node I] (node I's part of an increment, uploaded from the host that
// holds its WAL) and snapshot create --repo REPO --incremental --assemble
// --verdict V (the artifact of the parts): repo/parts.h, docs/scale-out.md.
// Registered as options of `snapshot create` (cli/cmd_snapshot_create.cpp).
#include <fmt/format.h>

#include "cli/command.h"
#include "cli/output.h"
#include "cli/repo_access.h"
#include "cli/repo_commands.h"
#include "repo/parts.h"
#include "walfmt/text_escape.h"

namespace walcut::cli {
namespace {

// The usage error of the options, as one line; "" when they go together.
std::string PartsUsage(const CreatePartsCliOptions& o) {
  if (!o.incremental) return "--verdict, --node and --assemble go with --incremental";
  if (o.other) return "--full, --from, --cut and --latest do not go with --verdict (the verdict names the cut)";
  if (o.verdict.empty()) return "--node and --assemble need --verdict FILE";
  if (o.assemble && (!o.node_dir.empty() || o.node >= 0)) {
    return "--assemble takes no NODE_DIR and no --node (it makes the artifact of every node's part)";
  }
  if (!o.assemble && o.node_dir.empty()) return "NODE_DIR is required (the directory of node I's WAL), or --assemble";
  return "";
}

// The exit code of a failure: a refusal of the cut or damaged bytes is a
// finding (1); a mismatch, a missing or foreign part is usage (2).
int PartsExit(const walfmt::Status& st) {
  switch (st.code()) {
    case walfmt::ErrorCode::kCorruption:
      return kExitFindings;
    case walfmt::ErrorCode::kInvalidArgument:
    case walfmt::ErrorCode::kNotFound:
      return kExitUsage;
    default:
      return kExitIo;
  }
}

int RunPart(const CreatePartsCliOptions& o, const std::string& repo, const repo::RemoteOptions& remote) {
  repo::IncrementPartRequest rq;
  rq.node_dir = o.node_dir;
  rq.node = o.node;
  rq.verdict = o.verdict;
  rq.repo = repo;
  rq.parent = o.parent;
  rq.name = o.name;
  rq.zstd_level = o.level;
  rq.jobs = o.jobs;
  auto r = repo::CreateIncrementPart(rq, remote);
  if (!r.ok()) {
    PrintError(fmt::format("snapshot create refused: {}", r.status().message()));
    return PartsExit(r.status());
  }
  const repo::ArtifactNode& n = r->node;
  if (o.json) {
    nlohmann::json j = {{"schema", "walcut.snapshot.create-part/1"},
                        {"repo", o.repo},
                        {"artifact", r->artifact},
                        {"part", r->where},
                        {"node", n.node},
                        {"cut", r->cut},
                        {"parent", r->parent},
                        {"verdict", r->verdict_id},
                        {"segments", n.segments.size()},
                        {"files", r->files},
                        {"bytes", r->bytes}};
    fmt::print("{}\n", walfmt::DumpJson(j, 2));
    return kExitOk;
  }
  fmt::print("uploaded {}: node {}'s part of {} (cut {} on {}, verdict {}), {} files, {}\n", r->where, n.node,
             r->artifact, r->cut, r->parent, r->verdict_id, r->files, HumanBytes(r->bytes));
  fmt::print("  node {}: WAL {} .. {} in {} segment{} ({:016X}..{:016X})\n", n.node, n.wal_from.ToString(),
             n.wal_to.ToString(), n.segments.size(), n.segments.size() == 1 ? "" : "s", n.first_segment,
             n.last_segment);
  return kExitOk;
}

int RunAssemble(const CreatePartsCliOptions& o, const std::string& repo, const repo::RemoteOptions& remote) {
  repo::AssembleRequest rq;
  rq.repo = repo;
  rq.verdict = o.verdict;
  rq.parent = o.parent;
  rq.name = o.name;
  rq.jobs = o.jobs;
  auto r = repo::AssembleIncrement(rq, remote);
  if (!r.ok()) {
    PrintError(fmt::format("snapshot create refused: {}", r.status().message()));
    return PartsExit(r.status());
  }
  const repo::Manifest& m = r->m;
  if (o.json) {
    nlohmann::json j = {{"schema", "walcut.snapshot.create/1"},
                        {"repo", o.repo},
                        {"name", m.name},
                        {"type", m.type},
                        {"source", m.source},
                        {"parent", m.parent},
                        {"cut", *m.cut},
                        {"files", m.files.size()},
                        {"bytes", m.Bytes()},
                        {"chain", r->chain}};
    fmt::print("{}\n", walfmt::DumpJson(j, 2));
    return kExitOk;
  }
  fmt::print("created {}/{}: incremental artifact of cut {} on {}, assembled from {} parts, {} files, {}\n", o.repo,
             m.name, *m.cut, m.parent, m.nodes.size(), m.files.size(), HumanBytes(m.Bytes()));
  std::string c;
  for (const auto& x : r->chain) c += (c.empty() ? "" : " <- ") + x;
  fmt::print("chain: {}\n", c);
  return kExitOk;
}

}  // namespace

int RunCreateParts(const CreatePartsCliOptions& o) {
  if (const std::string bad = PartsUsage(o); !bad.empty()) {
    PrintError(bad);
    return kExitUsage;
  }
  const auto loc = RepoLocationOf(o.repo);
  if (!loc) return kExitUsage;
  int key_rc = 0;  // a wrong key, or none for an encrypted repository, is named as every command names it
  const auto remote = RemoteFor(o.access, *loc, o.jobs, key_rc);
  if (!remote) return key_rc;
  const std::string repo = loc->s3 ? loc->url : loc->dir;
  return o.assemble ? RunAssemble(o, repo, *remote) : RunPart(o, repo, *remote);
}

}  // namespace walcut::cli
