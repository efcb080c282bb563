// walcut snapshot list REPO: every artifact of a repository (type, parent,
// cut, time, size, WAL range per node) and the restore targets it
// can serve, like pgBackRest's info.
#include <set>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/cut_common.h"
#include "cli/output.h"
#include "cli/repo_access.h"
#include "repo/repository.h"
#include "walfmt/text_escape.h"

namespace walcut::cli {
namespace {

struct ListOptions {
  std::string repo;
  Format format = Format::kText;
  RepoAccess access;
};

std::string Chain(const std::vector<std::string>& c) {
  std::string s;
  for (const auto& x : c) s += (s.empty() ? "" : " <- ") + x;
  return s;
}

std::string SegRange(const repo::ArtifactNode& n) {
  return n.first_segment == n.last_segment ? fmt::format("{:016X}", n.first_segment)
                                           : fmt::format("{:016X}..{:016X}", n.first_segment, n.last_segment);
}

std::optional<uint64_t> EpochOf(const repo::RepoListing& l, const std::string& artifact) {
  const repo::Artifact* a = l.Find(artifact);
  return a ? a->epoch_unix_us : std::nullopt;
}

// One artifact of `snapshot list --format json` (a readable one).
nlohmann::json ArtifactJson(const repo::Artifact& a) {
  using nlohmann::json;
  json nodes = json::array();
  for (const auto& n : a.m.nodes) {
    json jn = {{"node", n.node}, {"continue_from", n.continue_from.ToString()}};
    if (n.has_wal) {
      jn["wal_from"] = n.wal_from.ToString();
      jn["wal_to"] = n.wal_to.ToString();
      jn["segments"] = n.segments.size();
      jn["first_segment"] = fmt::format("{:016X}", n.first_segment);
      jn["last_segment"] = fmt::format("{:016X}", n.last_segment);
    }
    if (!n.snap_file.empty()) {
      jn["file"] = n.snap_file;
      jn["entries"] = n.entries;
      jn["fingerprint"] = fmt::format("{:016x}", n.fingerprint);
    }
    if (n.has_cut) {
      jn["cut_start"] = n.cut_start.ToString();
      jn["cut_finish"] = n.cut_finish.ToString();
    }
    nodes.push_back(jn);
  }
  return {{"name", a.name},
          {"type", a.m.type},
          {"source", a.m.source},
          {"seq", a.m.seq},
          {"parent", a.m.parent.empty() ? json(nullptr) : json(a.m.parent)},
          {"cluster_id", fmt::format("{:016x}", a.m.cluster_id)},
          {"cut", a.m.cut ? json(*a.m.cut) : json(nullptr)},
          {"snapshot", a.m.snapshot.empty() ? json(nullptr) : json(a.m.snapshot)},
          {"time_us", a.m.time_us},
          {"time", walfmt::ClusterClock{a.epoch_unix_us}.Format(a.m.time_us)},
          {"epoch_unix_us", a.epoch_unix_us ? json(*a.epoch_unix_us) : json(nullptr)},
          {"verdict", a.m.verdict},
          {"bytes", a.m.Bytes()},
          {"files", a.m.files.size()},
          {"nodes", nodes}};
}

int RunList(const ListOptions& o) {
  const auto loc = RepoLocationOf(o.repo);
  if (!loc) return kExitUsage;
  int rc = 0;
  const auto remote = RemoteFor(o.access, *loc, 0, rc);
  if (!remote) return rc;
  auto l = repo::ListAt(*loc, *remote);
  if (!l.ok()) {
    PrintError(l.status().message());
    return ExitForStatus(l.status());
  }
  const auto targets = repo::RestoreTargets(*l);
  std::set<uint64_t> clusters;
  uint64_t fulls = 0, incs = 0, bytes = 0, broken = 0;
  for (const auto& a : l->artifacts) {
    if (!a.status.ok()) {
      ++broken;
      continue;
    }
    clusters.insert(a.m.cluster_id);
    (a.m.full() ? fulls : incs) += 1;
    bytes += a.m.Bytes();
  }
  if (o.format == Format::kJson) {
    using nlohmann::json;
    json arts = json::array();
    for (const auto& a : l->artifacts) {
      if (!a.status.ok()) {
        arts.push_back({{"name", a.name}, {"error", a.status.message()}});
        continue;
      }
      arts.push_back(ArtifactJson(a));
    }
    json tj = json::array();
    for (const auto& t : targets) {
      tj.push_back({{"artifact", t.artifact},
                    {"cut", t.cut ? json(*t.cut) : json(nullptr)},
                    {"snapshot", t.snapshot.empty() ? json(nullptr) : json(t.snapshot)},
                    {"time_us", t.time_us},
                    {"time", walfmt::ClusterClock{EpochOf(*l, t.artifact)}.Format(t.time_us)},
                    {"cluster_id", fmt::format("{:016x}", t.cluster_id)},
                    {"chain", t.chain}});
    }
    json doc = {{"schema", "walcut.repository.list/1"},
                {"repo", o.repo},
                {"artifacts", arts},
                {"restore_targets", tj},
                {"leftovers", l->leftovers},
                {"pending_parts", l->pending_parts},
                {"summary",
                 {{"full", fulls},
                  {"incremental", incs},
                  {"unreadable", broken},
                  {"bytes", bytes},
                  {"clusters", clusters.size()}}}};
    fmt::print("{}\n", walfmt::DumpJson(doc, 2));
    return kExitOk;
  }
  fmt::print("repository {}: {} artifact{} ({} full, {} incremental{}), {} cluster{}, {}\n", o.repo,
             l->artifacts.size(), l->artifacts.size() == 1 ? "" : "s", fulls, incs,
             broken ? fmt::format(", {} unreadable", broken) : "", clusters.size(), clusters.size() == 1 ? "" : "s",
             HumanBytes(bytes));
  for (const auto& a : l->artifacts) {
    if (!a.status.ok()) {
      fmt::print("{}: UNREADABLE: {}\n", a.name, a.status.message());
      continue;
    }
    const std::string what = a.m.cut ? fmt::format("cut {}", *a.m.cut) : "snapshot " + a.m.snapshot;
    fmt::print("{}: {}{}, parent {}, {}, cluster {:016x}, time {}, {} in {} files\n", a.name, a.m.type,
               a.m.source == "restore" ? " (synthetic)" : "", a.m.parent.empty() ? "-" : a.m.parent, what,
               a.m.cluster_id, walfmt::ClusterClock{a.epoch_unix_us}.Format(a.m.time_us), HumanBytes(a.m.Bytes()),
               a.m.files.size());
    for (const auto& n : a.m.nodes) {
      if (n.has_wal) {
        fmt::print("  node {}: WAL {} .. {} (segments {}), cut {} .. {}\n", n.node, n.wal_from.ToString(),
                   n.wal_to.ToString(), SegRange(n), n.cut_start.ToString(), n.cut_finish.ToString());
      } else {
        fmt::print("  node {}: {} keys, fingerprint {:016x}, next WAL from {}\n", n.node, n.entries, n.fingerprint,
                   n.continue_from.ToString());
      }
    }
  }
  fmt::print("restore targets:{}\n", targets.empty() ? " none" : "");
  for (const auto& t : targets) {
    fmt::print("  {}: {} ({})\n", t.cut ? fmt::format("cut {}", *t.cut) : "snapshot " + t.snapshot, t.artifact,
               Chain(t.chain));
  }
  for (const auto& left : l->leftovers) fmt::print("note: {}: left by an unfinished create or expire\n", left);
  for (const auto& p : l->pending_parts) {
    fmt::print("note: pending part .parts/{}: a node's part of an increment, not yet assembled\n", p);
  }
  return kExitOk;
}

void RegisterSnapshotList(CLI::App& root, Registry& reg) {
  CLI::App* snapshot = root.get_subcommand("snapshot");
  auto o = std::make_shared<ListOptions>();
  CLI::App* cmd = snapshot->add_subcommand(
      "list",
      "Every artifact of a repository: type, parent, cut, time (UTC through the cluster's epoch), size, WAL range per "
      "node; and the\n"
      "restore targets (artifacts whose chain back to a full is complete). Exit 0, 2 when REPO is not a\n"
      "repository, 3 on I/O errors.");
  cmd->add_option("REPO", o->repo, "Repository: a directory, file://PATH or s3://BUCKET/PREFIX")->required();
  AddRepoAccessOptions(cmd, o->access, false);
  AddFormatOption(cmd, o->format);
  reg.Add(cmd, [o] { return RunList(*o); });
}

const CommandRegistrar kRegister{82, RegisterSnapshotList};

}  // namespace
}  // namespace walcut::cli
