// walcut snapshot create CLUSTER --repo REPO (--full [--from NAME | --cut K] |
// --incremental [--cut K | --latest] [--parent NAME]): a new artifact in a
// repository (repo/REPOSITORY.md).
#include <fmt/format.h>

#include "cli/command.h"
#include "cli/cut_common.h"
#include "cli/numbers.h"
#include "cli/output.h"
#include "cli/repo_access.h"
#include "cli/repo_commands.h"
#include "repo/repository.h"
#include "walfmt/text_escape.h"

namespace walcut::cli {
namespace {

struct CreateOptions {
  std::string cluster;
  std::string repo;
  bool full = false;
  bool incremental = false;
  std::string from;
  std::optional<uint64_t> cut;
  bool latest = false;
  std::string parent;
  std::string name;
  int level = 1;
  unsigned jobs = 0;
  Format format = Format::kText;
  RepoAccess access;
  CreatePartsCliOptions parts;  // --node / --verdict / --assemble (cli/cmd_snapshot_create_parts.cpp)
};

// An increment made where the WAL lives: a node's part, or the assembly.
int RunCreateFromParts(const CreateOptions& o) {
  CreatePartsCliOptions p = o.parts;
  p.node_dir = o.cluster;
  p.repo = o.repo;
  p.incremental = o.incremental;
  p.other = o.full || !o.from.empty() || o.cut || o.latest;
  p.parent = o.parent;
  p.name = o.name;
  p.level = o.level;
  p.jobs = o.jobs;
  p.json = o.format == Format::kJson;
  p.access = o.access;
  return RunCreateParts(p);
}

int RunCreate(const CreateOptions& o) {
  if (o.parts.assemble || !o.parts.verdict.empty() || o.parts.node >= 0) return RunCreateFromParts(o);
  if (o.full == o.incremental) {
    PrintError("give exactly one of --full and --incremental");
    return kExitUsage;
  }
  const auto loc = RepoLocationOf(o.repo);
  if (!loc) return kExitUsage;
  if (const std::string p = loc->s3 ? "" : OutputInsideInput("--repo", loc->dir, {o.cluster}); !p.empty()) {
    PrintError(p);
    return kExitUsage;
  }
  if (o.full && (o.latest || !o.parent.empty())) {
    PrintError("--latest and --parent are for --incremental");
    return kExitUsage;
  }
  if (o.incremental && !o.from.empty()) {
    PrintError("--from is for --full");
    return kExitUsage;
  }
  if (o.incremental && o.cut.has_value() == o.latest) {
    PrintError("--incremental needs exactly one of --cut K and --latest");
    return kExitUsage;
  }
  if (o.full && o.from.empty() == !o.cut.has_value()) {
    PrintError("--full needs exactly one of --from NAME and --cut K");
    return kExitUsage;
  }
  if (o.cluster.empty() && !(o.full && o.cut)) {
    PrintError("CLUSTER is required (only a synthetic full the repository can serve does without it)");
    return kExitUsage;
  }
  repo::CreateRequest rq;
  rq.cluster_dir = o.cluster;
  rq.repo = loc->s3 ? loc->url : loc->dir;
  rq.full = o.full;
  rq.from = o.from;
  rq.cut = o.cut;
  rq.latest = o.latest;
  rq.parent = o.parent;
  rq.name = o.name;
  rq.zstd_level = o.level;
  rq.jobs = o.jobs;
  int key_rc = 0;
  const auto remote = RemoteFor(o.access, *loc, o.jobs, key_rc);
  if (!remote) return key_rc;
  auto r = repo::CreateAt(*loc, rq, *remote);
  if (!r.ok()) {
    // A refusal (inconsistent cut, missing segments, another cluster) is a finding.
    PrintError(fmt::format("snapshot create refused: {}", r.status().message()));
    switch (r.status().code()) {
      case walfmt::ErrorCode::kInvalidArgument:
        return kExitFindings;
      case walfmt::ErrorCode::kNotFound:
        return kExitUsage;
      default:
        return kExitIo;
    }
  }
  const repo::Manifest& m = r->m;
  if (o.format == Format::kJson) {
    nlohmann::json j = {{"schema", "walcut.snapshot.create/1"},
                        {"repo", o.repo},
                        {"name", m.name},
                        {"type", m.type},
                        {"source", m.source},
                        {"parent", m.parent.empty() ? nlohmann::json(nullptr) : nlohmann::json(m.parent)},
                        {"cut", m.cut ? nlohmann::json(*m.cut) : nlohmann::json(nullptr)},
                        {"files", m.files.size()},
                        {"bytes", m.Bytes()},
                        {"chain", r->chain}};
    fmt::print("{}\n", walfmt::DumpJson(j, 2));
    return kExitOk;
  }
  std::string what = m.type == "incremental" ? fmt::format("incremental artifact of cut {} on {}", *m.cut, m.parent)
                     : m.source == "restore" ? fmt::format("synthetic full artifact of cut {}", *m.cut)
                                             : fmt::format("full artifact of snapshot {}", m.snapshot);
  fmt::print("created {}/{}: {}, {} files, {}\n", o.repo, m.name, what, m.files.size(), HumanBytes(m.Bytes()));
  for (const auto& n : m.nodes) {
    if (n.has_wal) {
      fmt::print("  node {}: WAL {} .. {} in {} segment{} ({:016X}..{:016X})\n", n.node, n.wal_from.ToString(),
                 n.wal_to.ToString(), n.segments.size(), n.segments.size() == 1 ? "" : "s", n.first_segment,
                 n.last_segment);
    } else {
      fmt::print("  node {}: {} ({} keys, fingerprint {:016x})\n", n.node, n.snap_file, n.entries, n.fingerprint);
    }
  }
  if (!r->chain.empty()) {
    std::string c;
    for (const auto& x : r->chain) c += (c.empty() ? "" : " <- ") + x;
    fmt::print("chain: {}\n", c);
  }
  return kExitOk;
}

void RegisterSnapshotCreate(CLI::App& root, Registry& reg) {
  CLI::App* snapshot = root.get_subcommand("snapshot");
  auto o = std::make_shared<CreateOptions>();
  CLI::App* cmd = snapshot->add_subcommand(
      "create",
      "Add an artifact to a repository (created when REPO does not exist or is empty). --full --from NAME:\n"
      "a runtime full snapshot of CLUSTER; --full --cut K: a synthetic full, cut K restored (from the\n"
      "repository's own chain when it holds cut K, else from CLUSTER's WAL). --incremental: the WAL each\n"
      "node needs from the parent's cut (the newest artifact of the cluster, or --parent) to cut K\n"
      "(--cut K or --latest), as .wal.zst, with the cut's evidence. Built in a staging directory and\n"
      "renamed into place: a crash leaves no artifact or a complete one (on S3: uploaded with manifest.json\n"
      "last). One writer at a time: a second create or expire fails at once while the repository is locked.\n"
      "Where the WAL lives (docs/scale-out.md): --incremental --verdict V NODE_DIR uploads node I's part of\n"
      "the increment of the verdict's cut (its WAL checked against V first; no lock, hosts upload at once);\n"
      "--incremental --assemble --verdict V makes the artifact once every node's part is there; in an\n"
      "encrypted repository both take --encrypt-key-file (each part stored encrypted, bound to its place).\n"
      "Exit 0 created, 1 refused (cut not consistent, missing WAL segments, parent of another cluster, a\n"
      "part's bytes not matching its checksums or failing authentication), 2 usage (also: a WAL not\n"
      "matching the verdict, a part missing, twice or of another verdict; no key or another key for an\n"
      "encrypted repository), 3 I/O error (also: the repository is locked).");
  cmd->add_option("CLUSTER", o->cluster,
                  "Cluster directory (optional for a synthetic full the repository serves); with --verdict: NODE_DIR");
  cmd->add_option("--repo", o->repo, "Repository: a directory, file://PATH or s3://BUCKET/PREFIX")->required();
  cmd->add_flag("--full", o->full, "A full artifact");
  cmd->add_flag("--incremental", o->incremental, "An incremental artifact");
  cmd->add_option("--from", o->from, "Full: the runtime full snapshot to store (a name under CLUSTER/snapshots/)");
  AddNumber(cmd, "--cut", o->cut, kCutIdRange, "The cut");
  cmd->add_flag("--latest", o->latest, "Incremental: the latest consistent cut after the parent");
  cmd->add_option("--parent", o->parent, "Incremental: the artifact to build on (default: the newest of the cluster)");
  cmd->add_option("--name", o->name, "Artifact name (default f-<snapshot>, f-cut-<K>, i-cut-<K>)");
  AddNumber(cmd, "--zstd-level", o->level, {1, 19},
            "zstd level for the WAL segments (default 1: as small as 3 on WAL, about twice as fast)");
  AddNumber(cmd, "-j,--jobs", o->jobs, kJobsRange, "Threads (default: one per core)");
  cmd->add_option("--verdict", o->parts.verdict,
                  "Incremental, where the WAL lives: the cut's verdict (walcut cuts ... --verdict-out FILE); with "
                  "NODE_DIR, upload node I's part; with --assemble, make the artifact of the parts");
  AddNumber(cmd, "--node", o->parts.node, kNodeIdRange,
            "With --verdict and NODE_DIR: the node id (default: from NODE_DIR's name node-<i>)");
  cmd->add_flag("--assemble", o->parts.assemble,
                "With --incremental --verdict: the artifact made of every node's uploaded part");
  AddRepoAccessOptions(cmd, o->access, true);
  cmd->get_option("--encrypt-key-file")
      ->description(
          "The key of an encrypted repository: 32 bytes, or 64 hex digits (mode 0600); a create into a new "
          "repository encrypts it (AES-256-GCM); a part's upload (--verdict NODE_DIR) and --assemble need it too");
  AddFormatOption(cmd, o->format);
  reg.Add(cmd, [o] { return RunCreate(*o); });
}

const CommandRegistrar kRegister{81, RegisterSnapshotCreate};

}  // namespace
}  // namespace walcut::cli
