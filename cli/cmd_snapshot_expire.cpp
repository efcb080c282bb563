// walcut snapshot expire REPO --keep-full N [--dry-run]: retention that never
// removes an artifact a kept one depends on.
#include <fmt/format.h>

#include "cli/command.h"
#include "cli/numbers.h"
#include "cli/output.h"
#include "cli/repo_access.h"
#include "repo/repository.h"
#include "walfmt/text_escape.h"

namespace walcut::cli {
namespace {

struct ExpireOptions {
  std::string repo;
  uint64_t keep_full = 0;
  bool dry_run = false;
  Format format = Format::kText;
  RepoAccess access;
};

int RunExpire(const ExpireOptions& o) {
  const auto loc = RepoLocationOf(o.repo);
  if (!loc) return kExitUsage;
  int rc = 0;
  const auto remote = RemoteFor(o.access, *loc, 0, rc);
  if (!remote) return rc;
  auto r = repo::ExpireAt(*loc, o.keep_full, o.dry_run, *remote);
  if (!r.ok()) {
    PrintError(r.status().message());
    return ExitForStatus(r.status());
  }
  if (o.format == Format::kJson) {
    nlohmann::json j = {{"schema", "walcut.repository.expire/1"},
                        {"repo", o.repo},
                        {"dry_run", o.dry_run},
                        {"keep_full", o.keep_full},
                        {"kept", r->kept},
                        {"removed", r->removed},
                        {"leftovers_removed", r->leftovers_removed}};
    fmt::print("{}\n", walfmt::DumpJson(j, 2));
    return kExitOk;
  }
  for (const auto& n : r->removed) fmt::print("{} {}\n", o.dry_run ? "would remove" : "removed", n);
  for (const auto& n : r->leftovers_removed) fmt::print("{} leftover {}\n", o.dry_run ? "would remove" : "removed", n);
  fmt::print("{}: kept {} artifact{}, {} {}\n", o.repo, r->kept.size(), r->kept.size() == 1 ? "" : "s",
             o.dry_run ? "would remove" : "removed", r->removed.size());
  return kExitOk;
}

void RegisterSnapshotExpire(CLI::App& root, Registry& reg) {
  CLI::App* snapshot = root.get_subcommand("snapshot");
  auto o = std::make_shared<ExpireOptions>();
  CLI::App* cmd = snapshot->add_subcommand(
      "expire",
      "Retention: keep the newest N full artifacts of each cluster and every artifact whose chain starts at\n"
      "one of them; remove the others, leaves first, each renamed away before it is deleted. Artifacts\n"
      "with a broken chain are left alone (snapshot check reports them). Takes the repository's lock (not\n"
      "for --dry-run). Exit 0, 2 usage, 3 I/O error (also: the repository is locked).");
  cmd->add_option("REPO", o->repo, "Repository: a directory, file://PATH or s3://BUCKET/PREFIX")->required();
  AddNumber(cmd, "--keep-full", o->keep_full, {1, 1000000}, "Full artifacts to keep per cluster")->required();
  cmd->add_flag("--dry-run", o->dry_run, "Print what would be removed; remove nothing");
  AddRepoAccessOptions(cmd, o->access, true);
  AddFormatOption(cmd, o->format);
  reg.Add(cmd, [o] { return RunExpire(*o); });
}

const CommandRegistrar kRegister{83, RegisterSnapshotExpire};

}  // namespace
}  // namespace walcut::cli
