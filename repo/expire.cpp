// `walcut snapshot expire`: the newest fulls of each cluster are kept with
// every artifact whose chain starts at one of them; the rest is removed,
// leaves first, with the leftovers of killed creates and expires.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>

#include "repo/remote.h"
#include "repo/repository.h"
#include "walfmt/file_io.h"
#include "walfmt/strings.h"

namespace walcut::repo {
namespace fs = std::filesystem;
using walfmt::Result;
using walfmt::Status;

namespace {

// The names of the newest `keep_full` fulls of each cluster.
std::set<std::string> KeptRoots(const RepoListing& l, uint64_t keep_full) {
  std::map<uint64_t, std::vector<const Artifact*>> fulls;
  for (const auto& a : l.artifacts) {
    if (a.status.ok() && a.m.full()) fulls[a.m.cluster_id].push_back(&a);
  }
  std::set<std::string> kept_roots;
  for (auto& [cid, v] : fulls) {
    std::sort(v.begin(), v.end(), [](const Artifact* a, const Artifact* b) { return a->m.seq > b->m.seq; });
    for (size_t i = 0; i < v.size() && i < keep_full; ++i) kept_roots.insert(v[i]->name);
  }
  return kept_roots;
}

// Removes the leftovers of killed creates and expires: an expire's leftover
// is always garbage; a create's staging directory only when the process that
// made it (".<name>.tmp-<pid>-<seq>") is gone.
void RemoveLeftovers(const std::string& repo, const RepoListing& l, bool dry_run, ExpireResult& r) {
  for (const auto& left : l.leftovers) {
    if (left.find(".expire-") == std::string::npos) {
      const size_t at = left.rfind(".tmp-");
      const long pid = at == std::string::npos ? 0 : std::strtol(left.c_str() + at + 5, nullptr, 10);
      if (pid <= 0 || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    }
    r.leftovers_removed.push_back(left);
    if (dry_run) continue;
    std::error_code ec;
    fs::remove_all(walfmt::JoinPath(repo, left), ec);
  }
}

}  // namespace

Result<ExpireResult> Expire(const std::string& repo, uint64_t keep_full, bool dry_run) {
  if (keep_full == 0) return Status::InvalidArgument("--keep-full must be at least 1");
  std::unique_ptr<RepoLock> lock;  // one writer at a time (a dry run writes nothing)
  if (!dry_run && IsRepository(repo)) {
    auto l = LockDirectory(repo);
    if (!l.ok()) return l.status();
    lock = std::move(l.value());
  }
  auto l = ListRepository(repo);
  if (!l.ok()) return l.status();
  // The newest N fulls of each cluster are kept, with every artifact whose
  // chain starts at one of them (its first member: ChainOf puts the full
  // first). An artifact with a broken chain is left alone.
  const std::set<std::string> kept_roots = KeptRoots(*l, keep_full);
  ExpireResult r;
  std::vector<const Artifact*> doomed;
  for (const auto& a : l->artifacts) {
    auto chain = ChainOf(*l, a.name);
    if (chain.ok() && !kept_roots.count(chain->front()->name)) {
      doomed.push_back(&a);
    } else {
      r.kept.push_back(a.name);
    }
  }
  // Leaves first: a crash between two removals never leaves a kept artifact
  // without its parent.
  std::sort(doomed.begin(), doomed.end(), [](const Artifact* a, const Artifact* b) { return a->m.seq > b->m.seq; });
  for (const auto* a : doomed) {
    r.removed.push_back(a->name);
    if (dry_run) continue;
    const std::string tmp = walfmt::JoinPath(repo, fmt::format(".{}.expire-{}", a->name, ::getpid()));
    if (Status st = walfmt::RenameDurable(a->dir, tmp); !st.ok()) return st;
    std::error_code ec;
    fs::remove_all(tmp, ec);
    if (ec) return Status::Io(fmt::format("{}: cannot remove: {}", tmp, ec.message()));
  }
  RemoveLeftovers(repo, *l, dry_run, r);
  if (!dry_run) {
    if (Status st = walfmt::SyncDir(repo); !st.ok()) return st;
  }
  return r;
}

}  // namespace walcut::repo
