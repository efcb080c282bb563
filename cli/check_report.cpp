#include "cli/check_report.h"

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/cut_common.h"
#include "cli/output.h"
#include "recovery/check_merge.h"
#include "walfmt/text_escape.h"

namespace walcut::cli {
using nlohmann::json;
using recovery::CheckFinding;
using recovery::CheckItem;
using recovery::CheckLevel;
using recovery::CheckReport;
using recovery::ItemOutcome;

namespace {

using Counts = recovery::CheckCounts;

std::string Plural(uint64_t n, const char* one, const char* many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

// The evidence of a finding in one line: "node 1, cut 3, at 2/00008015, tx
// 0:381, file ...: expected X, found Y".
std::string Evidence(const CheckFinding& f) {
  std::string s;
  auto add = [&s](const std::string& part) { s += (s.empty() ? "" : ", ") + part; };
  if (f.node) add(fmt::format("node {}", *f.node));
  if (f.cut) add(fmt::format("cut {}", *f.cut));
  if (!f.file.empty()) add(fmt::format("file {}", f.file));
  if (f.position) add(fmt::format("at {}", f.position->ToString()));
  if (!f.tx.empty()) add(fmt::format("tx {}", f.tx));
  if (!f.expected.empty() || !f.found.empty()) add(fmt::format("expected {}, found {}", f.expected, f.found));
  if (f.consistent_before || f.consistent_after) {
    add(fmt::format("nearest consistent cut before {}, after {}",
                    f.consistent_before ? std::to_string(*f.consistent_before) : "none",
                    f.consistent_after ? std::to_string(*f.consistent_after) : "none"));
  }
  return s;
}

json Opt(const std::optional<uint64_t>& v) { return v ? json(*v) : json(nullptr); }
json Str(const std::string& s) { return s.empty() ? json(nullptr) : json(s); }

json FindingJson(const CheckFinding& f) {
  return {{"check", f.check},
          {"node", f.node ? json(*f.node) : json(nullptr)},
          {"cut", Opt(f.cut)},
          {"file", Str(f.file)},
          {"position", f.position ? json(f.position->ToString()) : json(nullptr)},
          {"tx", Str(f.tx)},
          {"expected", Str(f.expected)},
          {"found", Str(f.found)},
          {"consistent_before", Opt(f.consistent_before)},
          {"consistent_after", Opt(f.consistent_after)},
          {"message", f.message}};
}

}  // namespace

std::string CheckVerdict(const CheckReport& r, int exit_code) {
  const Counts c = recovery::CountChecks(r);
  if (exit_code == kExitIo) {
    return fmt::format("ERROR ({}; {} in {})", Plural(r.errors.size(), "tool error", "tool errors"),
                       Plural(c.findings, "finding", "findings"), Plural(c.failed, "check", "checks"));
  }
  if (exit_code == kExitFindings) {
    return fmt::format("FAILED ({} in {} of {})", Plural(c.findings, "finding", "findings"),
                       Plural(c.failed, "check", "checks"), c.checks);
  }
  std::string s = fmt::format("OK ({} passed", Plural(c.passed, "check", "checks"));
  if (c.skipped) s += fmt::format(", {} skipped", c.skipped);
  if (r.files.torn_tails)
    s += fmt::format(", {} at the end of the WAL tolerated", Plural(r.files.torn_tails, "torn tail", "torn tails"));
  return s + ")";
}

std::string CheckReportText(const CheckReport& r, int exit_code) {
  std::string out;
  auto line = [&out](const std::string& l) { out += l + "\n"; };
  line(fmt::format("walcut check {}: level {}, {}", r.dir, recovery::CheckLevelName(r.level),
                   r.selected_cut ? fmt::format("cut {}", *r.selected_cut) : std::string("every cut")));
  // One line per finding, then the notes worth reading.
  for (const auto& i : r.items) {
    for (const auto& f : i.findings) {
      line(fmt::format("FINDING [{} {}: {}] {}", recovery::CheckLevelName(i.level), i.group, i.name, f.message));
      const std::string ev = Evidence(f);
      if (!ev.empty()) line(fmt::format("    evidence: {}", ev));
    }
  }
  for (const auto& i : r.items) {
    if (i.outcome == ItemOutcome::kPass && !i.note.empty() && i.level == CheckLevel::kFiles) {
      line(fmt::format("note [files {}: {}] {}", i.group, i.name, i.note));
    }
    if (i.outcome == ItemOutcome::kPass && i.level == CheckLevel::kCuts && i.name == "status" &&
        i.note.rfind("incomplete", 0) == 0) {
      line(fmt::format("note [cuts {}: status] {}", i.group, i.note));
    }
    if (i.level == CheckLevel::kCuts && i.group == "cluster" && !i.note.empty()) {
      line(fmt::format("note [cuts cluster: {}] {}", i.name, i.note));
    }
  }
  for (const auto& e : r.errors) line(fmt::format("ERROR {}", e));

  // Summary.
  const auto& f = r.files;
  std::string files =
      fmt::format("files: {}, {}: {} read ({}, {} records)", Plural(f.nodes, "node", "nodes"),
                  Plural(f.segments, "segment", "segments"), f.segments_read, HumanBytes(f.bytes_read), f.records);
  if (f.state_used || f.segments_skipped) {
    files += fmt::format(", {} skipped ({}) unchanged since the state file's run", f.segments_skipped,
                         HumanBytes(f.bytes_skipped));
  }
  const Counts fc = recovery::CountChecks(r, CheckLevel::kFiles);
  files += fmt::format(": {}", fc.failed ? fmt::format("{} failed", Plural(fc.failed, "check", "checks")) : "ok");
  line(files);
  if (r.has_cuts) {
    const Counts cc = recovery::CountChecks(r, CheckLevel::kCuts);
    line(fmt::format("cuts: {}: {} consistent, {} inconsistent, {} incomplete{}; {}{}",
                     Plural(r.cuts_total, "cut", "cuts"), r.cuts_consistent, r.cuts_inconsistent, r.cuts_incomplete,
                     r.cuts_unavailable ? fmt::format(", {} unavailable", r.cuts_unavailable) : std::string(),
                     Plural(cc.checks, "check", "checks"),
                     cc.failed ? fmt::format(", {} failed", cc.failed) : std::string()));
  }
  for (const auto& rs : r.restores) {
    const CheckItem* items[3] = {nullptr, nullptr, nullptr};
    for (const auto& i : r.items) {
      if (i.level != CheckLevel::kRestore || i.group != fmt::format("cut-{}", rs.cut)) continue;
      if (i.name == "restore") items[0] = &i;
      if (i.name == "fingerprints") items[1] = &i;
      if (i.name == "invariants") items[2] = &i;
    }
    auto show = [](const CheckItem* i) {
      if (!i) return std::string("-");
      std::string s = recovery::ItemOutcomeName(i->outcome);
      if (!i->note.empty()) s += " (" + i->note + ")";
      return s;
    };
    line(fmt::format("restore cut {}: {}; fingerprints {}; invariants {}", rs.cut, show(items[0]), show(items[1]),
                     show(items[2])));
  }
  if (r.has_cuts) {
    for (const auto& l : WindowLines(r.window)) line(l);
  }
  line(fmt::format("checked {}: {}", r.dir, CheckVerdict(r, exit_code)));
  return out;
}

json CheckReportJson(const CheckReport& r, int exit_code) {
  const Counts c = recovery::CountChecks(r);
  json j;
  j["schema"] = recovery::kCheckSchema;
  j["dir"] = r.dir;
  j["level"] = recovery::CheckLevelName(r.level);
  j["cut"] = Opt(r.selected_cut);
  j["ok"] = exit_code == 0;
  j["exit_code"] = exit_code;
  j["verdict"] = CheckVerdict(r, exit_code);
  j["summary"] = {{"checks", c.checks},   {"passed", c.passed},     {"failed", c.failed},
                  {"skipped", c.skipped}, {"findings", c.findings}, {"errors", r.errors.size()}};
  const auto& f = r.files;
  j["files"] = {{"nodes", f.nodes},
                {"segments", f.segments},
                {"segments_read", f.segments_read},
                {"segments_skipped", f.segments_skipped},
                {"bytes_read", f.bytes_read},
                {"bytes_skipped", f.bytes_skipped},
                {"records", f.records},
                {"torn_tails", f.torn_tails},
                {"state_used", f.state_used},
                {"state_written", f.state_written}};
  if (r.has_cuts) {
    j["cuts"] = {{"total", r.cuts_total},
                 {"consistent", r.cuts_consistent},
                 {"inconsistent", r.cuts_inconsistent},
                 {"incomplete", r.cuts_incomplete},
                 {"unavailable", r.cuts_unavailable}};
    j["window"] = WindowJson(r.window);
  } else {
    j["cuts"] = nullptr;
    j["window"] = nullptr;
  }
  json rs = json::array();
  for (const auto& x : r.restores) {
    json fps = json::array();
    for (uint64_t v : x.fingerprints) fps.push_back(fmt::format("{:016x}", v));
    rs.push_back({{"cut", x.cut},
                  {"restored", x.restored},
                  {"base", Str(x.base)},
                  {"fingerprints", fps},
                  {"entries", x.entries},
                  {"invariants_ran", x.invariants_ran}});
  }
  j["restores"] = rs;
  json items = json::array();
  for (const auto& i : r.items) {
    json fs = json::array();
    for (const auto& x : i.findings) fs.push_back(FindingJson(x));
    items.push_back({{"level", recovery::CheckLevelName(i.level)},
                     {"group", i.group},
                     {"name", i.name},
                     {"outcome", recovery::ItemOutcomeName(i.outcome)},
                     {"note", Str(i.note)},
                     {"findings", fs}});
  }
  j["checks"] = items;
  j["errors"] = r.errors;
  return j;
}

std::string CheckReportAs(const std::string& format, const CheckReport& r, int exit_code) {
  if (format == "json") return walfmt::DumpJson(CheckReportJson(r, exit_code), 2) + "\n";
  if (format == "junit") return CheckReportJunit(r, exit_code);
  return CheckReportText(r, exit_code);
}

std::string XmlEscape(const std::string& s) {
  const std::string text = walfmt::EscapeBytes(s);  // valid UTF-8 XML 1.0 can carry, losslessly
  std::string o;
  o.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      case '\'':
        o += "&apos;";
        break;
      case '\n':
        o += "&#10;";
        break;
      case '\t':
        o += "&#9;";
        break;
      case '\r':
        o += "&#13;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

std::string CheckReportJunit(const CheckReport& r, int exit_code) {
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  const Counts all = recovery::CountChecks(r);
  // junit-10.xsd: testsuites carries no skipped count (each testsuite does).
  out += fmt::format("<testsuites name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\">\n",
                     XmlEscape(fmt::format("walcut check {}", r.dir)), all.checks + r.errors.size(), all.failed,
                     r.errors.size());
  for (CheckLevel level : {CheckLevel::kFiles, CheckLevel::kCuts, CheckLevel::kRestore}) {
    const Counts c = recovery::CountChecks(r, level);
    // Segments the state file let the check skip are not tests of this run:
    // one line says how many, so CI does not list them as skipped every run.
    const bool unchanged = level == CheckLevel::kFiles && r.files.segments_skipped > 0;
    if (c.checks == 0 && !unchanged) continue;
    const std::string suite = fmt::format("walcut.{}", recovery::CheckLevelName(level));
    out += fmt::format("  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\">\n", suite,
                       c.checks, c.failed, c.skipped);
    for (const auto& i : r.items) {
      if (i.level != level) continue;
      const std::string head = fmt::format("    <testcase classname=\"{}\" name=\"{}\"",
                                           XmlEscape(suite + "." + i.group), XmlEscape(i.name));
      if (i.outcome == ItemOutcome::kPass && i.note.empty()) {
        out += head + "/>\n";
        continue;
      }
      out += head + ">\n";
      if (i.outcome == ItemOutcome::kFail) {
        std::string body;
        for (const auto& f : i.findings) {
          body += f.message + "\n";
          const std::string ev = Evidence(f);
          if (!ev.empty()) body += "  evidence: " + ev + "\n";
        }
        const std::string msg = i.findings.size() == 1 ? i.findings.front().message
                                                       : fmt::format("{} findings; first: {}", i.findings.size(),
                                                                     i.findings.front().message);
        out += fmt::format("      <failure message=\"{}\" type=\"{}\">{}</failure>\n", XmlEscape(msg),
                           XmlEscape(i.findings.front().check), XmlEscape(body));
      } else if (i.outcome == ItemOutcome::kSkipped) {
        out += fmt::format("      <skipped message=\"{}\"/>\n", XmlEscape(i.note));
      }
      if (i.outcome != ItemOutcome::kSkipped && !i.note.empty()) {
        out += fmt::format("      <system-out>{}</system-out>\n", XmlEscape(i.note));
      }
      out += "    </testcase>\n";
    }
    if (unchanged) {
      out += fmt::format("    <system-out>{}</system-out>\n",
                         XmlEscape(fmt::format("{} not read again: unchanged since the state file's run ({})",
                                               Plural(r.files.segments_skipped, "segment", "segments"),
                                               HumanBytes(r.files.bytes_skipped))));
    }
    out += "  </testsuite>\n";
  }
  if (!r.errors.empty()) {
    out += fmt::format("  <testsuite name=\"walcut.errors\" tests=\"{}\" failures=\"0\" errors=\"{}\" skipped=\"0\">\n",
                       r.errors.size(), r.errors.size());
    for (size_t e = 0; e < r.errors.size(); ++e) {
      out += fmt::format(
          "    <testcase classname=\"walcut.errors\" name=\"tool error {}\">\n      <error message=\"{}\"/>\n    "
          "</testcase>\n",
          e + 1, XmlEscape(r.errors[e]));
    }
    out += "  </testsuite>\n";
  }
  (void)exit_code;
  out += "</testsuites>\n";
  return out;
}

}  // namespace walcut::cli
