#include "cli/cut_common.h"

#include <algorithm>

#include <fmt/format.h>

#include "cli/inputs.h"
#include "cli/output.h"
#include "cut/evidence.h"
#include "cut/load.h"
#include "walfmt/cluster_layout.h"

namespace walcut::cli {
using nlohmann::json;

walfmt::Result<cut::ClusterCuts> LoadCuts(const std::vector<std::string>& paths, unsigned jobs,
                                          const cut::ReconstructOptions& ro) {
  Progress progress("scan");
  // The total: the WAL's bytes, when the paths are directories of it (not
  // summaries; never standard input, which ReadCuts does not read).
  const bool stdin_given = std::find(paths.begin(), paths.end(), "-") != paths.end();
  if (progress.enabled() && !stdin_given) {
    if (auto in = ResolveInputs(paths); in.ok()) {
      std::vector<walfmt::NodeSegments> segs;
      for (const auto& n : in->nodes) segs.push_back(n.wal);
      progress.SetTotal(DataBytes(segs));
    }
  }
  cut::LoadOptions lo;
  lo.jobs = jobs;
  lo.progress = [&progress](uint64_t bytes) { progress.Update(bytes); };
  auto cc = cut::ReadCuts(paths, lo, ro);
  progress.Finish();
  // Listing notes (a file named like a segment but not read, a segment both
  // plain and archived): reported, not findings.
  if (cc.ok()) {
    for (const auto& n : cc->nodes) {
      for (const auto& note : n.notes) PrintError("note: " + note);
    }
  }
  return cc;
}

json FindingJson(const cut::Finding& f) { return cut::FindingToJson(f); }

json WindowJson(const cut::RestoreWindow& w) {
  json j = {{"restorable", w.any}, {"earliest_limit", w.earliest_limit}, {"latest_limit", w.latest_limit}};
  if (w.any) {
    j["earliest"] = w.earliest;
    j["latest"] = w.latest;
  } else {
    j["earliest"] = nullptr;
    j["latest"] = nullptr;
  }
  return j;
}

json ChecksJson(const cut::CutChecks& c) {
  return {{"atomicity", c.atomicity}, {"monotonicity", c.monotonicity}, {"shape", c.shape},
          {"rollback", c.rollback},   {"completeness", c.completeness}, {"markers", c.markers}};
}

namespace {
json Tracked(const cut::TrackedTx& t, const cut::NodeCut& nc, const walfmt::ClusterClock& clock) {
  json j = {{"tx", t.tx.ToString()}, {"tx_readable", t.tx.Readable()}};
  if (t.committed) {
    j["commit"] = t.commit.ToString();
    j["marker"] = t.marker;
    PutTime(j, "time", t.time_us, clock);
    if (nc.started) j["commit_after_start"] = t.commit > nc.start;
  } else if (t.rolled_back) {
    j["rolled_back_at"] = t.commit.ToString();
  } else {
    j["commit"] = nullptr;
  }
  if (t.recovered) j["recovered"] = true;
  return j;
}
}  // namespace

json CutJson(const cut::GlobalCut& g, bool detail, const walfmt::ClusterClock& clock) {
  json j;
  j["cut"] = g.cut_id;
  j["status"] = cut::CutStatusName(g.status);
  j["reason"] = g.reason.empty() ? json(nullptr) : json(g.reason);
  if (!g.checked_against.empty() && g.checked_against != "genesis") j["checked_against"] = g.checked_against;
  j["transactions"] = g.transactions;
  j["before"] = g.before;
  j["after"] = g.after;
  j["before_committed_after_start"] = g.before_after_start;
  j["after_committed_before_start"] = g.after_before_start;
  PutTime(j, "start_time", g.start_time_us, clock);
  PutTime(j, "finish_time", g.finish_time_us, clock);
  j["consistent_before"] = g.consistent_before ? json(*g.consistent_before) : json(nullptr);
  j["consistent_after"] = g.consistent_after ? json(*g.consistent_after) : json(nullptr);
  j["checks"] = ChecksJson(g.checks);
  json nodes = json::array();
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const cut::NodeCut* nc = g.nodes[i];
    json n = {{"node", i}, {"transactions", g.node_transactions[i]}};
    if (!nc) {
      n["end"] = "absent";
      nodes.push_back(std::move(n));
      continue;
    }
    n["end"] = cut::CutEndName(nc->end);
    n["start"] = nc->started ? json(nc->start.ToString()) : json(nullptr);
    PutTime(n, "start_time", nc->started ? std::optional<uint64_t>(nc->start_time_us) : std::nullopt, clock);
    n["commits_before_start"] = nc->started ? json(nc->commits_before_start) : json(nullptr);
    n["finish"] = nc->finished ? json(nc->finish.ToString()) : json(nullptr);
    PutTime(n, "finish_time", nc->finished ? std::optional<uint64_t>(nc->finish_time_us) : std::nullopt, clock);
    n["restarted"] = nc->restarted;
    json ab = json::array();
    for (const auto& a : nc->aborts) {
      ab.push_back({{"at", a.at.ToString()},
                    {"reason", std::string(walfmt::CutAbortReasonName(a.reason))},
                    {"detail", a.detail}});
    }
    n["aborts"] = ab;
    if (detail) {
      json b = json::array(), a = json::array();
      for (const auto& t : nc->before) b.push_back(Tracked(t, *nc, clock));
      for (const auto& t : nc->after) a.push_back(Tracked(t, *nc, clock));
      n["before"] = b;
      n["after"] = a;
    } else {
      n["before"] = nc->before.size();
      n["after"] = nc->after.size();
    }
    nodes.push_back(std::move(n));
  }
  j["nodes"] = nodes;
  json fs = json::array();
  for (const auto& f : g.findings) fs.push_back(FindingJson(f));
  j["findings"] = fs;
  return j;
}

std::vector<std::string> WindowLines(const cut::RestoreWindow& w) {
  std::vector<std::string> out;
  if (!w.any) {
    out.push_back(fmt::format("restore window: no cut can be restored ({})", w.latest_limit));
    return out;
  }
  out.push_back(w.earliest == w.latest ? fmt::format("restore window: cut {}", w.earliest)
                                       : fmt::format("restore window: cuts {}..{}", w.earliest, w.latest));
  out.push_back(fmt::format("  earliest {}: {}", w.earliest, w.earliest_limit));
  out.push_back(fmt::format("  latest {}: {}", w.latest, w.latest_limit));
  return out;
}

void AddListedSnapshots(cut::ClusterCuts& cc, const std::string& dir) {
  auto info = walfmt::LoadClusterInfo(dir);
  if (!info.ok()) return;
  std::vector<cut::SnapshotUse> gone;
  for (const auto& s : info->full_snapshots) {
    if (cc.FindSnapshot(s.name)) continue;
    cut::SnapshotUse u;
    u.name = s.name;
    u.time_us = s.time_us;
    u.why = "no node's WAL holds its SNAPSHOT record any more (the segments were removed)";
    gone.push_back(std::move(u));
  }
  cc.snapshots.insert(cc.snapshots.begin(), gone.begin(), gone.end());
  std::stable_sort(cc.snapshots.begin(), cc.snapshots.end(),
                   [](const cut::SnapshotUse& a, const cut::SnapshotUse& b) { return a.time_us < b.time_us; });
}

json SnapshotsJson(const cut::ClusterCuts& cc) {
  json out = json::array();
  for (const auto& u : cc.snapshots) {
    json at = json::array();
    for (const auto& p : u.at) at.push_back(p.ToString());
    out.push_back({{"name", u.name},
                   {"time_us", u.time_us},
                   {"time", ClockOf(cc).Format(u.time_us)},
                   {"usable", u.usable},
                   {"why_not", u.usable ? json(nullptr) : json(u.why)},
                   {"wal_position", at},
                   {"serves", u.serves}});
  }
  return out;
}

std::string CutList(const std::vector<uint64_t>& ids) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    parts.push_back(j == i ? std::to_string(ids[i]) : fmt::format("{}..{}", ids[i], ids[j]));
    i = j + 1;
  }
  constexpr size_t kShown = 6;
  std::string text;
  for (size_t i = 0; i < parts.size() && i < kShown; ++i) text += (i ? ", " : "") + parts[i];
  if (parts.size() > kShown) text += fmt::format(", ... ({} more ranges)", parts.size() - kShown);
  return text;
}

std::vector<std::string> SnapshotLines(const cut::ClusterCuts& cc) {
  std::vector<std::string> out;
  for (const auto& u : cc.snapshots) {
    if (!u.usable) {
      out.push_back(fmt::format("full snapshot {}: not usable as a base: {}", u.name, u.why));
    } else if (u.serves.empty()) {
      out.push_back(
          fmt::format("full snapshot {} ({}): no consistent cut after it", u.name, ClockOf(cc).Format(u.time_us)));
    } else {
      out.push_back(fmt::format("full snapshot {} ({}): base for cuts {} ({} consistent cuts)", u.name,
                                ClockOf(cc).Format(u.time_us), CutList(u.serves), u.serves.size()));
    }
  }
  return out;
}

uint64_t CutOrLatest(const cut::ClusterCuts& cc, uint64_t cut, bool latest, const std::string& where) {
  if (!latest) return cut;
  if (!cc.window.any) {
    PrintError(fmt::format("{}no cut can be restored: {}", where.empty() ? "" : where + ": ", cc.window.latest_limit));
    return 0;
  }
  return cc.window.latest;
}

}  // namespace walcut::cli
