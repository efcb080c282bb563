// Record times as the commands print them: with the cluster's epoch
// (cluster.json "epoch_unix_us") as ISO 8601 UTC, without it as an offset
// from the cluster's creation (walfmt/duration.h). JSON keeps the
// microseconds ("X_time_us") and adds the text ("X_time").
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "cut/cuts.h"
#include "walfmt/duration.h"

namespace walcut::cli {

walfmt::ClusterClock ClockOf(const cut::ClusterCuts& cc);

// The clock of the cluster that PATH (a cluster directory, a node or WAL
// directory, a snapshot directory or file, a restore output) belongs to:
// the epoch of the first cluster.json found in PATH or up to three
// directories above it, or of a restore output's manifest.json ("cluster").
// No epoch when there is none or it cannot be read (times print as offsets).
walfmt::ClusterClock ClockNear(const std::string& path);

// j[KEY + "_us"] = us and j[KEY] = clock.Format(us); both null without a value.
void PutTime(nlohmann::json& j, const std::string& key, std::optional<uint64_t> us, const walfmt::ClusterClock& clock);

// The time of day "HH:MM:SS.ffffff" when `us` falls on the same UTC day as
// `ref`, else the full Format; offsets without an epoch. For tables whose
// rows already show the full time of `ref`.
std::string ShortTime(const walfmt::ClusterClock& clock, uint64_t us, uint64_t ref);

// "clock: cluster time 0 is 2026-11-30T12:00:00.000000Z" or, without an
// epoch, what times are printed as instead.
std::string ClockLine(const walfmt::ClusterClock& clock);

}  // namespace walcut::cli
