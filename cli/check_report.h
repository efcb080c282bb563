// The three renderings of a `walcut check` report (recovery/check.h): text for
// people, JSON ("walcut.check/1", docs/check.schema.json) and JUnit XML for CI
// systems. All three are deterministic: no times, no host names, items in the
// order the library produced them.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "recovery/check.h"

namespace walcut::cli {

std::string CheckReportText(const recovery::CheckReport& r, int exit_code);
nlohmann::json CheckReportJson(const recovery::CheckReport& r, int exit_code);
std::string CheckReportJunit(const recovery::CheckReport& r, int exit_code);
// The report as `format` says: "json", "junit", else text.
std::string CheckReportAs(const std::string& format, const recovery::CheckReport& r, int exit_code);
// "OK (...)", "FAILED (...)" or "ERROR (...)": the verdict line's tail.
std::string CheckVerdict(const recovery::CheckReport& r, int exit_code);
// XML 1.0 text and attribute escaping of a byte string: walfmt::EscapeBytes
// (walfmt/text_escape.h), then the XML entities.
std::string XmlEscape(const std::string& s);

}  // namespace walcut::cli
