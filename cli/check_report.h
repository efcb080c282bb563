// The three renderings of a `walcut check` report (recovery/check.h): text for
// people, JSON ("walcut.check/1", docs/check.schema.json) and JUnit XML for CI
// systems. All three are deterministic: no times, no host names, items in the
// order the library produced them.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "recovery/check.h"

namespace walcut::cli {

inline constexpr const char* kCheckSchema = "walcut.check/1";

std::string CheckReportText(const recovery::CheckReport& r, int exit_code);
nlohmann::json CheckReportJson(const recovery::CheckReport& r, int exit_code);
std::string CheckReportJunit(const recovery::CheckReport& r, int exit_code);
// "OK (...)", "FAILED (...)" or "ERROR (...)": the verdict line's tail.
std::string CheckVerdict(const recovery::CheckReport& r, int exit_code);
// XML 1.0 text and attribute escaping; characters XML cannot carry become
// "\xNN".
std::string XmlEscape(const std::string& s);

}  // namespace walcut::cli
