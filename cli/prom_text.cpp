#include "cli/prom_text.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <initializer_list>

#include <fmt/format.h>

#include "walfmt/text_escape.h"

namespace walcut::cli {
namespace {

[[maybe_unused]] bool ValidName(std::string_view n, bool colon) {
  if (n.empty()) return false;
  for (size_t i = 0; i < n.size(); ++i) {
    const char c = n[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':');
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

// HELP text escapes only the backslash and the line feed.
std::string HelpText(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

}  // namespace

std::string PromLabelValue(std::string_view bytes) {
  std::string out;
  for (char c : walfmt::EscapeBytes(bytes)) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

double MicrosToSeconds(uint64_t us) { return static_cast<double>(us) / 1e6; }

void PromText::Family(std::string name, std::string type, std::string help) {
  assert(ValidName(name, true));
  assert(type == "gauge" || type == "counter");
  assert(std::find(names_.begin(), names_.end(), name) == names_.end());
  names_.push_back(name);
  text_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, HelpText(help), name, type);
  family_ = std::move(name);
}

void PromText::Add(const PromLabels& labels, uint64_t value) { Sample(labels, fmt::format("{}", value)); }

void PromText::Add(const PromLabels& labels, double value) {
  // Fixed notation with microseconds for times; the shortest exact form otherwise.
  std::string v = std::isfinite(value) && value == std::floor(value) && std::fabs(value) < 1e15
                      ? fmt::format("{:.0f}", value)
                      : fmt::format("{:.6f}", value);
  Sample(labels, v);
}

void PromText::Sample(const PromLabels& labels, const std::string& value) {
  assert(!family_.empty());
  std::string ls;
  for (const PromLabels* set : std::initializer_list<const PromLabels*>{&common_, &labels}) {
    for (const auto& [k, v] : *set) {
      assert(ValidName(k, false));
      ls += fmt::format("{}{}=\"{}\"", ls.empty() ? "" : ",", k, PromLabelValue(v));
    }
  }
  text_ += ls.empty() ? fmt::format("{} {}\n", family_, value) : fmt::format("{}{{{}}} {}\n", family_, ls, value);
}

}  // namespace walcut::cli
