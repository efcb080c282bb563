// What the cut commands (cuts, cut show, restore, check) share: loading the
// summaries of a cluster with progress, and the JSON and text forms of cuts,
// findings and the restore window.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/clock.h"
#include "cut/cuts.h"
#include "walfmt/status.h"

namespace walcut::cli {

inline constexpr const char* kCutsSchema = "walcut.cuts/1";
inline constexpr const char* kCutSchema = "walcut.cut/1";

// Scans a cluster directory (or reads summary files) and reconstructs its
// cuts. Progress on stderr when it is a terminal.
walfmt::Result<cut::ClusterCuts> LoadCuts(const std::vector<std::string>& paths, unsigned jobs,
                                          const cut::ReconstructOptions& ro = {});

nlohmann::json FindingJson(const cut::Finding& f);
nlohmann::json WindowJson(const cut::RestoreWindow& w);
nlohmann::json ChecksJson(const cut::CutChecks& c);
// One cut; `detail` adds the tracked transactions of every node.
// Times with both "X_time_us" and "X_time" (cli/clock.h).
nlohmann::json CutJson(const cut::GlobalCut& g, bool detail, const walfmt::ClusterClock& clock);

// The cut a command acts on: `cut`, or with `latest` the end of the restore
// window. 0 when --latest finds no restorable cut, after printing why
// (prefixed by `where` when it is not empty); the caller exits 1.
uint64_t CutOrLatest(const cut::ClusterCuts& cc, uint64_t cut, bool latest, const std::string& where = "");

// "cuts 2..7" or "no cut can be restored", with what limits each end.
std::vector<std::string> WindowLines(const cut::RestoreWindow& w);

// The full snapshots the WAL records and the cuts each can serve as base.
nlohmann::json SnapshotsJson(const cut::ClusterCuts& cc);
// Adds the full snapshots that DIR/cluster.json lists but no node's WAL holds
// a SNAPSHOT record of any more (they lay in removed segments), as not
// usable, so that listings name every snapshot the cluster took.
void AddListedSnapshots(cut::ClusterCuts& cc, const std::string& dir);
std::vector<std::string> SnapshotLines(const cut::ClusterCuts& cc);
// "4..6" / "4, 6, 9" style list of cut ids, shortened past a few ranges.
std::string CutList(const std::vector<uint64_t>& ids);

}  // namespace walcut::cli
