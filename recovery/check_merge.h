// `walcut check merge`: the JSON reports of `walcut check NODE_DIR ...
// --format json` (schema "walcut.check/1"), one per node, each run where the
// node's WAL lives (docs/scale-out.md), read back and joined into one report.
// What the merge refuses: a report that is not one (not JSON, another
// schema, a field missing or of the wrong type, a level or outcome that is
// none), a report of the cuts level of a whole cluster, a report that is not
// of one node, a node twice, reports of different cuts or verdicts. Every
// refusal is kInvalidArgument naming the report; a report that cannot be
// read is kNotFound (not there) or kIo.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "recovery/check.h"
#include "walfmt/status.h"

namespace walcut::recovery {

inline constexpr const char* kCheckSchema = "walcut.check/1";

// A report written with --format json, read back; `origin` names it in
// messages.
walfmt::Result<CheckReport> CheckReportFromJson(const std::string& text, const std::string& origin);
// The same, from the file `path` (at most walfmt::kMaxJsonFileBytes).
walfmt::Result<CheckReport> ReadCheckReport(const std::string& path);

// The node a per-node report is about: the node of its files items
// ("node-<i>"); nullopt for a report of several nodes or none.
std::optional<uint32_t> ReportNode(const CheckReport& r);

// Joins the reports of one check run node by node (each of one node, no node
// twice, the same cut, the same verdict) into one report, ordered by node
// whatever the order given: files counts summed, items level by level and
// node by node, errors kept, the highest level. `origins` names the reports
// in messages.
walfmt::Result<CheckReport> MergeCheckReports(std::vector<CheckReport> reports,
                                              const std::vector<std::string>& origins);

}  // namespace walcut::recovery
