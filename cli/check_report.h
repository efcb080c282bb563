// The three renderings of a `walcut check` report (recovery/check.h): text for
// people, JSON ("walcut.check/1", docs/check.schema.json) and JUnit XML for CI
// systems. All three are deterministic: no times, no host names, items in the
// order the library produced them.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "recovery/check.h"
#include "walfmt/status.h"

namespace walcut::cli {

inline constexpr const char* kCheckSchema = "walcut.check/1";

std::string CheckReportText(const recovery::CheckReport& r, int exit_code);
nlohmann::json CheckReportJson(const recovery::CheckReport& r, int exit_code);
std::string CheckReportJunit(const recovery::CheckReport& r, int exit_code);
// "OK (...)", "FAILED (...)" or "ERROR (...)": the verdict line's tail.
std::string CheckVerdict(const recovery::CheckReport& r, int exit_code);
// XML 1.0 text and attribute escaping of a byte string: walfmt::EscapeBytes
// (walfmt/text_escape.h), then the XML entities.
std::string XmlEscape(const std::string& s);

// Reads back a report written with --format json (walcut.check/1) of one
// node's check (no cuts level): for `walcut check merge`.
walfmt::Result<recovery::CheckReport> CheckReportFromJson(const std::string& text, const std::string& origin);
// Joins the reports of one check run node by node (each of one node, no node
// twice, the same cut) into one report: files counts summed, items level by
// level and node by node, errors kept. `origins` names the reports in
// messages.
walfmt::Result<recovery::CheckReport> MergeCheckReports(std::vector<recovery::CheckReport> reports,
                                                        const std::vector<std::string>& origins);

}  // namespace walcut::cli
