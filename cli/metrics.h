// `--metrics FILE` of `walcut check` and of `walcut snapshot check REPO`:
// the report as Prometheus metrics (cli/prom_text.h) for node_exporter's
// textfile collector, written atomically. README: "Metrics for alerting".
#pragma once

#include <cstdint>
#include <string>

#include "recovery/check.h"
#include "repo/repository.h"

namespace walcut::cli {

// `rc` is the command's exit code, `seconds` how long the check took, `now_us`
// the wall-clock time (Unix microseconds) the ages are measured at.
std::string CheckMetrics(const recovery::CheckReport& r, int rc, double seconds, uint64_t now_us);
// `listing` is the repository as listed after the check (its artifacts, the
// leftovers of killed writers), `check` what the check found.
std::string RepoMetrics(const repo::RepoCheckReport& check, const repo::RepoListing& listing, int rc, double seconds,
                        uint64_t now_us);

// Writes `text` to PATH atomically (a reader sees the old file or the new
// one, never part of one). One line on stderr and kExitIo when it cannot.
int WriteMetrics(const std::string& path, const std::string& text);

// The wall clock in Unix microseconds.
uint64_t NowUnixMicros();

}  // namespace walcut::cli
