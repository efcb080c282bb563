#include "cli/metrics.h"

#include <chrono>
#include <map>
#include <set>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/output.h"
#include "cli/prom_text.h"
#include "walfmt/file_io.h"

namespace walcut::cli {
namespace {

// The run itself: when, how long, how it came out.
void RunFamilies(PromText& p, const std::string& prefix, int rc, double seconds, uint64_t now_us) {
  p.Family(prefix + "_last_run_timestamp_seconds", "gauge", "When the check ran (Unix time).");
  p.Add({}, MicrosToSeconds(now_us));
  p.Family(prefix + "_duration_seconds", "gauge", "How long the check took.");
  p.Add({}, seconds);
  p.Family(prefix + "_exit_code", "gauge", "The check's exit code: 0 all good, 1 findings, 3 I/O or internal error.");
  p.Add({}, static_cast<uint64_t>(rc));
  p.Family(prefix + "_success", "gauge", "1 when the check passed (exit code 0), else 0.");
  p.Add({}, static_cast<uint64_t>(rc == 0 ? 1 : 0));
}

// Findings by check, for every check that found something.
template <class Items, class CheckOf>
void FindingFamilies(PromText& p, const std::string& prefix, const Items& items, CheckOf check_of) {
  std::map<std::string, uint64_t> by_check;
  for (const auto& it : items) {
    for (const auto& f : it.findings) ++by_check[check_of(f)];
  }
  p.Family(prefix + "_findings", "gauge", "Findings of the last check, by the check that made them.");
  for (const auto& [check, n] : by_check) p.Add({{"check", check}}, n);
}

// A restore-window end: its cut id, when it finished, and (the latest) its age.
void WindowEnd(PromText& p, const std::string& end, uint64_t cut, uint64_t time_us, std::optional<uint64_t> epoch) {
  p.Family("walcut_restore_window_" + end + "_cut", "gauge",
           "The " + end + " cut a restore can reach: consistent, with its WAL and base present.");
  p.Add({}, cut);
  if (!epoch) return;
  p.Family("walcut_restore_window_" + end + "_cut_timestamp_seconds", "gauge",
           "When the " + end + " restorable cut finished on its last node (Unix time).");
  p.Add({}, MicrosToSeconds(*epoch + time_us));
}

// Seconds from `at_us` to `now_us` (negative when `at_us` is later: a clock ahead).
double AgeSeconds(uint64_t now_us, uint64_t at_us) {
  return now_us >= at_us ? MicrosToSeconds(now_us - at_us) : -MicrosToSeconds(at_us - now_us);
}

}  // namespace

uint64_t NowUnixMicros() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

std::string CheckMetrics(const recovery::CheckReport& r, int rc, double seconds, uint64_t now_us) {
  PromText p;
  p.Common({{"dir", r.dir}});
  RunFamilies(p, "walcut_check", rc, seconds, now_us);
  p.Family("walcut_check_info", "gauge", "The check's level and the cuts it covered (always 1).");
  p.Add({{"level", recovery::CheckLevelName(r.level)},
         {"cut", r.selected_cut ? fmt::format("{}", *r.selected_cut) : std::string("all")}},
        uint64_t{1});
  const recovery::CheckCounts c = recovery::CountChecks(r);
  p.Family("walcut_check_items", "gauge", "Checks of the last run, by outcome.");
  p.Add({{"outcome", "pass"}}, c.passed);
  p.Add({{"outcome", "fail"}}, c.failed);
  p.Add({{"outcome", "skipped"}}, c.skipped);
  FindingFamilies(p, "walcut_check", r.items, [](const recovery::CheckFinding& f) { return f.check; });

  p.Family("walcut_check_read_bytes", "gauge",
           "WAL bytes the files level read, by node (compressed size for .wal.zst).");
  for (const auto& [node, n] : r.files.per_node) p.Add({{"node", fmt::format("{}", node)}}, n.bytes_read);
  p.Family("walcut_check_read_records", "gauge", "WAL records the files level read, by node.");
  for (const auto& [node, n] : r.files.per_node) p.Add({{"node", fmt::format("{}", node)}}, n.records);
  p.Family("walcut_check_read_segments", "gauge", "WAL segments the files level read, by node.");
  for (const auto& [node, n] : r.files.per_node) p.Add({{"node", fmt::format("{}", node)}}, n.segments_read);
  p.Family("walcut_check_skipped_segments", "gauge",
           "WAL segments the state file showed verified clean before and unchanged since, by node.");
  for (const auto& [node, n] : r.files.per_node) p.Add({{"node", fmt::format("{}", node)}}, n.segments_skipped);

  if (!r.has_cuts) return p.Text();
  p.Family("walcut_cuts", "gauge", "Cuts in the WAL, by status.");
  p.Add({{"status", "consistent"}}, r.cuts_consistent);
  p.Add({{"status", "inconsistent"}}, r.cuts_inconsistent);
  p.Add({{"status", "incomplete"}}, r.cuts_incomplete);
  p.Add({{"status", "unavailable"}}, r.cuts_unavailable);
  p.Family("walcut_restore_window_available", "gauge", "1 when some cut can be restored, else 0.");
  p.Add({}, uint64_t{r.window.any ? 1u : 0u});
  if (r.window.any) {
    WindowEnd(p, "earliest", r.window.earliest, r.window_earliest_time_us, r.epoch_unix_us);
    WindowEnd(p, "latest", r.window.latest, r.window_latest_time_us, r.epoch_unix_us);
    if (r.epoch_unix_us) {
      const uint64_t at = *r.epoch_unix_us + r.window_latest_time_us;
      p.Family("walcut_restore_window_latest_cut_age_seconds", "gauge",
               "Seconds from the latest restorable cut's finish to the check (negative: a clock ahead).");
      p.Add({}, AgeSeconds(now_us, at));
    }
  }
  if (!r.restores.empty()) {
    uint64_t ok = 0;
    for (const auto& rc2 : r.restores) ok += rc2.restored ? 1 : 0;
    p.Family("walcut_check_restores", "gauge", "Cuts the restore level restored, by outcome.");
    p.Add({{"outcome", "restored"}}, ok);
    p.Add({{"outcome", "failed"}}, r.restores.size() - ok);
  }
  return p.Text();
}

std::string RepoMetrics(const repo::RepoCheckReport& check, const repo::RepoListing& l, int rc, double seconds,
                        uint64_t now_us) {
  PromText p;
  p.Common({{"repo", check.dir}});
  RunFamilies(p, "walcut_repo_check", rc, seconds, now_us);
  uint64_t failed = check.Failed();
  p.Family("walcut_repo_check_items", "gauge", "Checks of the last run, by outcome.");
  uint64_t skipped = 0;
  for (const auto& it : check.items) skipped += it.skipped ? 1 : 0;
  p.Add({{"outcome", "pass"}}, check.items.size() - failed - skipped);
  p.Add({{"outcome", "fail"}}, failed);
  p.Add({{"outcome", "skipped"}}, skipped);
  FindingFamilies(p, "walcut_repo_check", check.items, [](const repo::RepoFinding& f) { return f.check; });

  std::map<std::string, uint64_t> by_type{{"full", 0}, {"incremental", 0}, {"unreadable", 0}};
  uint64_t bytes = 0;
  for (const auto& a : l.artifacts) {
    ++by_type[a.status.ok() ? a.m.type : "unreadable"];
    if (a.status.ok()) bytes += a.m.Bytes();
  }
  p.Family("walcut_repo_artifacts", "gauge", "Artifacts in the repository, by type (unreadable: a damaged manifest).");
  for (const auto& [type, n] : by_type) p.Add({{"type", type}}, n);
  p.Family("walcut_repo_bytes", "gauge", "Bytes the artifacts' manifests list (the files of every readable artifact).");
  p.Add({}, bytes);
  p.Family("walcut_repo_leftovers", "gauge",
           "Directories an interrupted create or expire left (walcut snapshot expire removes them).");
  p.Add({}, static_cast<uint64_t>(l.leftovers.size()));

  // Restorable: a complete chain none of whose artifacts failed a check.
  std::set<std::string> failing;
  for (const auto& it : check.items) {
    if (it.failed) failing.insert(it.group);
  }
  struct Newest {
    uint64_t cut = 0, time_us = 0;
    std::optional<uint64_t> epoch;
    size_t chain = 0;
    bool any_cut = false;
  };
  std::map<uint64_t, Newest> by_cluster;
  for (const auto& t : repo::RestoreTargets(l)) {
    bool ok = true;
    for (const auto& a : t.chain) ok = ok && !failing.count(a);
    if (!ok) continue;
    Newest& n = by_cluster[t.cluster_id];
    n.chain = std::max(n.chain, t.chain.size());
    if (t.cut && (!n.any_cut || *t.cut > n.cut)) {
      const repo::Artifact* a = l.Find(t.artifact);
      n = Newest{*t.cut, t.time_us, a ? a->epoch_unix_us : std::nullopt, n.chain, true};
    }
  }
  p.Family("walcut_repo_longest_chain", "gauge",
           "Artifacts in the longest restorable chain (a full and the increments on it), by cluster.");
  for (const auto& [id, n] : by_cluster) p.Add({{"cluster", fmt::format("{:016x}", id)}}, uint64_t{n.chain});
  p.Family("walcut_repo_newest_restorable_cut", "gauge",
           "The newest cut the repository can restore through a chain that passed the check, by cluster.");
  for (const auto& [id, n] : by_cluster) {
    if (n.any_cut) p.Add({{"cluster", fmt::format("{:016x}", id)}}, n.cut);
  }
  p.Family("walcut_repo_newest_restorable_cut_timestamp_seconds", "gauge",
           "When that cut finished on its last node (Unix time), by cluster.");
  for (const auto& [id, n] : by_cluster) {
    if (n.any_cut && n.epoch) p.Add({{"cluster", fmt::format("{:016x}", id)}}, MicrosToSeconds(*n.epoch + n.time_us));
  }
  p.Family("walcut_repo_newest_restorable_cut_age_seconds", "gauge",
           "Seconds from that cut's finish to the check, by cluster.");
  for (const auto& [id, n] : by_cluster) {
    if (!n.any_cut || !n.epoch) continue;
    const uint64_t at = *n.epoch + n.time_us;
    p.Add({{"cluster", fmt::format("{:016x}", id)}}, AgeSeconds(now_us, at));
  }
  return p.Text();
}

int WriteMetrics(const std::string& path, const std::string& text) {
  if (auto st = walfmt::WriteFileAtomic(path, text); !st.ok()) {
    PrintError(st.message());
    return kExitIo;
  }
  return 0;
}

}  // namespace walcut::cli
