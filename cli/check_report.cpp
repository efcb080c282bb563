#include "cli/check_report.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/cut_common.h"
#include "cli/output.h"
#include "walfmt/cluster_layout.h"
#include "walfmt/json_fields.h"
#include "walfmt/text_escape.h"

namespace walcut::cli {
using nlohmann::json;
using recovery::CheckFinding;
using recovery::CheckItem;
using recovery::CheckLevel;
using recovery::CheckReport;
using recovery::ItemOutcome;

namespace {

struct Counts {
  uint64_t checks = 0, passed = 0, failed = 0, skipped = 0, findings = 0;
};
Counts CountItems(const CheckReport& r, std::optional<CheckLevel> level = std::nullopt) {
  Counts c;
  for (const auto& i : r.items) {
    if (level && i.level != *level) continue;
    ++c.checks;
    c.passed += i.outcome == ItemOutcome::kPass;
    c.failed += i.outcome == ItemOutcome::kFail;
    c.skipped += i.outcome == ItemOutcome::kSkipped;
    c.findings += i.findings.size();
  }
  return c;
}

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
  const Counts c = CountItems(r);
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
  const Counts fc = CountItems(r, CheckLevel::kFiles);
  files += fmt::format(": {}", fc.failed ? fmt::format("{} failed", Plural(fc.failed, "check", "checks")) : "ok");
  line(files);
  if (r.has_cuts) {
    const Counts cc = CountItems(r, CheckLevel::kCuts);
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
  const Counts c = CountItems(r);
  json j;
  j["schema"] = kCheckSchema;
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
  const Counts all = CountItems(r);
  // junit-10.xsd: testsuites carries no skipped count (each testsuite does).
  out += fmt::format("<testsuites name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\">\n",
                     XmlEscape(fmt::format("walcut check {}", r.dir)), all.checks + r.errors.size(), all.failed,
                     r.errors.size());
  for (CheckLevel level : {CheckLevel::kFiles, CheckLevel::kCuts, CheckLevel::kRestore}) {
    const Counts c = CountItems(r, level);
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

namespace walcut::cli {
namespace {

using walfmt::JsonFields;

// Fields the writer sets to null when they do not apply (a finding without a
// file, a report without a selected cut): null reads as empty; any other
// type than the field's is refused.
std::string StringOrNull(JsonFields& f, const json& obj, const char* key, const std::string& path) {
  const json* v = f.Get(obj, key, path);
  if (v == nullptr || v->is_null()) return "";
  return f.String(obj, key, path);
}
std::optional<uint64_t> U64OrNull(JsonFields& f, const json& obj, const char* key, const std::string& path) {
  const json* v = f.Get(obj, key, path);
  if (v == nullptr || v->is_null()) return std::nullopt;
  return f.U64(obj, key, path);
}

CheckLevel LevelOf(JsonFields& f, const json& obj, const std::string& path) {
  const std::string s = f.String(obj, "level", path);
  CheckLevel l = CheckLevel::kFiles;
  if (f.ok() && !recovery::ParseCheckLevel(s, l)) {
    f.Fail(JsonFields::Member(path, "level"), fmt::format("\"{}\" is not a level (files, cuts or restore)", s));
  }
  return l;
}

// The node a per-node report is about: the node of its files items
// ("node-<i>"); nullopt for a report of several nodes.
std::optional<uint32_t> NodeOf(const CheckReport& r) {
  std::optional<uint32_t> node;
  for (const auto& i : r.items) {
    if (i.level != CheckLevel::kFiles) continue;
    auto id = walfmt::NodeIdFromDirName(i.group);
    if (!id || (node && *node != *id)) return std::nullopt;
    node = id;
  }
  return node;
}

recovery::FilesSummary FilesFrom(JsonFields& f, const json& j) {
  recovery::FilesSummary files;
  const json* o = f.Object(j, "files", "");
  if (o == nullptr) return files;
  files.nodes = f.U64(*o, "nodes", "files");
  files.segments = f.U64(*o, "segments", "files");
  files.segments_read = f.U64(*o, "segments_read", "files");
  files.segments_skipped = f.U64(*o, "segments_skipped", "files");
  files.bytes_read = f.U64(*o, "bytes_read", "files");
  files.bytes_skipped = f.U64(*o, "bytes_skipped", "files");
  files.records = f.U64(*o, "records", "files");
  files.torn_tails = f.U64(*o, "torn_tails", "files");
  files.state_used = f.Bool(*o, "state_used", "files");
  files.state_written = f.Bool(*o, "state_written", "files");
  return files;
}

CheckFinding FindingFrom(JsonFields& f, const json& g, const std::string& q) {
  CheckFinding c;
  c.check = StringOrNull(f, g, "check", q);
  if (auto n = U64OrNull(f, g, "node", q)) c.node = static_cast<uint32_t>(*n);
  c.cut = U64OrNull(f, g, "cut", q);
  c.file = StringOrNull(f, g, "file", q);
  if (const std::string pos = StringOrNull(f, g, "position", q); !pos.empty()) {
    auto l = walfmt::Lsn::Parse(pos);
    if (!l && f.ok()) f.Fail(JsonFields::Member(q, "position"), fmt::format("\"{}\" is not a position", pos));
    if (l) c.position = *l;
  }
  c.tx = StringOrNull(f, g, "tx", q);
  c.expected = StringOrNull(f, g, "expected", q);
  c.found = StringOrNull(f, g, "found", q);
  c.consistent_before = U64OrNull(f, g, "consistent_before", q);
  c.consistent_after = U64OrNull(f, g, "consistent_after", q);
  c.message = StringOrNull(f, g, "message", q);
  return c;
}

CheckItem ItemFrom(JsonFields& f, const json& e, const std::string& p) {
  CheckItem it;
  it.level = LevelOf(f, e, p);
  it.group = StringOrNull(f, e, "group", p);
  it.name = StringOrNull(f, e, "name", p);
  const std::string outcome = f.String(e, "outcome", p);
  if (outcome == "pass") {
    it.outcome = ItemOutcome::kPass;
  } else if (outcome == "fail") {
    it.outcome = ItemOutcome::kFail;
  } else if (outcome == "skipped") {
    it.outcome = ItemOutcome::kSkipped;
  } else if (f.ok()) {
    f.Fail(JsonFields::Member(p, "outcome"), fmt::format("\"{}\" is not pass, fail or skipped", outcome));
  }
  it.note = StringOrNull(f, e, "note", p);
  const json* fs = f.Array(e, "findings", p);
  const std::string path = JsonFields::Member(p, "findings");
  for (size_t y = 0; fs != nullptr && y < fs->size() && f.ok(); ++y) {
    it.findings.push_back(FindingFrom(f, (*fs)[y], JsonFields::Element(path, y)));
  }
  return it;
}

}  // namespace

walfmt::Result<CheckReport> CheckReportFromJson(const std::string& text, const std::string& origin) {
  const json j = walfmt::UnescapeJsonStrings(json::parse(text, nullptr, false));
  if (j.is_discarded() || !j.is_object()) return walfmt::Status::InvalidArgument(fmt::format("{}: not JSON", origin));
  if (j.value("schema", json()) != json(kCheckSchema)) {
    return walfmt::Status::InvalidArgument(fmt::format(
        "{}: not a walcut check report (schema is not {}; write it with --format json)", origin, kCheckSchema));
  }
  JsonFields f(origin);
  CheckReport r;
  r.dir = StringOrNull(f, j, "dir", "");
  r.level = LevelOf(f, j, "");
  r.selected_cut = U64OrNull(f, j, "cut", "");
  r.files = FilesFrom(f, j);
  const json* cuts = f.Get(j, "cuts", "");
  if (f.ok() && cuts != nullptr && !cuts->is_null()) {
    return walfmt::Status::InvalidArgument(
        fmt::format("{}: it is a report of the cuts level of a whole cluster, not of one node", origin));
  }
  const json* items = f.Array(j, "checks", "");
  for (size_t x = 0; items != nullptr && x < items->size() && f.ok(); ++x) {
    r.items.push_back(ItemFrom(f, (*items)[x], JsonFields::Element("checks", x)));
  }
  if (const json* errors = f.Array(j, "errors", "")) {
    for (const auto& e : *errors) r.errors.push_back(e.is_string() ? e.get<std::string>() : walfmt::DumpJson(e));
  }
  if (!f.ok()) return walfmt::Status::InvalidArgument(f.error());
  return r;
}

walfmt::Result<CheckReport> MergeCheckReports(std::vector<CheckReport> reports,
                                              const std::vector<std::string>& origins) {
  if (reports.empty()) return walfmt::Status::InvalidArgument("no reports to merge");
  // By node, so that the merged report does not depend on the order given.
  std::vector<std::pair<uint32_t, size_t>> order;
  std::map<uint32_t, size_t> seen;
  for (size_t i = 0; i < reports.size(); ++i) {
    auto node = NodeOf(reports[i]);
    if (!node) {
      return walfmt::Status::InvalidArgument(
          fmt::format("{}: not a report of one node (walcut check NODE_DIR ... --format json)", origins[i]));
    }
    auto [it, inserted] = seen.emplace(*node, i);
    if (!inserted) {
      return walfmt::Status::InvalidArgument(
          fmt::format("node {} appears twice: in {} and in {}", *node, origins[it->second], origins[i]));
    }
    order.emplace_back(*node, i);
  }
  std::sort(order.begin(), order.end());
  // Level restore: every node's check restored from the same verdict (its
  // id is in the "node I: verdict" item, note or finding).
  std::string verdict;
  size_t verdict_from = 0;
  for (const auto& [node, i] : order) {
    for (const auto& it : reports[i].items) {
      if (it.level != CheckLevel::kCuts || it.name.find(": verdict") == std::string::npos) continue;
      const std::string& text = it.findings.empty() ? it.note : it.findings.front().message;
      const size_t at = text.find("(verdict ");
      if (at == std::string::npos) continue;
      const std::string id = text.substr(at + 9, 16);
      if (verdict.empty()) {
        verdict = id;
        verdict_from = i;
      } else if (id != verdict) {
        return walfmt::Status::InvalidArgument(fmt::format("{} and {} are not of one verdict: {} against {}",
                                                           origins[verdict_from], origins[i], verdict, id));
      }
    }
  }
  CheckReport m;
  m.level = CheckLevel::kFiles;
  m.selected_cut = reports[order.front().second].selected_cut;
  std::string dirs;
  for (const auto& [node, i] : order) {
    const CheckReport& r = reports[i];
    if (r.selected_cut != m.selected_cut) {
      return walfmt::Status::InvalidArgument(
          fmt::format("{} checked {}, {} checked {}: the reports are not of one check", origins[order.front().second],
                      m.selected_cut ? fmt::format("cut {}", *m.selected_cut) : "no cut", origins[i],
                      r.selected_cut ? fmt::format("cut {}", *r.selected_cut) : "no cut"));
    }
    m.level = std::max(m.level, r.level);
    dirs += (dirs.empty() ? "" : ", ") + r.dir;
    m.files.nodes += r.files.nodes;
    m.files.segments += r.files.segments;
    m.files.segments_read += r.files.segments_read;
    m.files.segments_skipped += r.files.segments_skipped;
    m.files.bytes_read += r.files.bytes_read;
    m.files.bytes_skipped += r.files.bytes_skipped;
    m.files.records += r.files.records;
    m.files.torn_tails += r.files.torn_tails;
    m.files.state_used = m.files.state_used || r.files.state_used;
    m.files.state_written = m.files.state_written || r.files.state_written;
    for (const auto& e : r.errors) m.errors.push_back(e);
  }
  m.dir = dirs;
  // Items level by level, node by node within a level (each report lists its
  // own in level order already).
  for (CheckLevel level : {CheckLevel::kFiles, CheckLevel::kCuts, CheckLevel::kRestore}) {
    for (const auto& [node, i] : order) {
      for (const auto& it : reports[i].items) {
        if (it.level == level) m.items.push_back(it);
      }
    }
  }
  return m;
}

}  // namespace walcut::cli
