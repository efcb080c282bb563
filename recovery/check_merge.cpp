#include "recovery/check_merge.h"

#include <algorithm>
#include <map>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "walfmt/cluster_layout.h"
#include "walfmt/file_io.h"
#include "walfmt/json_fields.h"
#include "walfmt/text_escape.h"

namespace walcut::recovery {
using nlohmann::json;

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
  if (f.ok() && !ParseCheckLevel(s, l)) {
    f.Fail(JsonFields::Member(path, "level"), fmt::format("\"{}\" is not a level (files, cuts or restore)", s));
  }
  return l;
}

FilesSummary FilesFrom(JsonFields& f, const json& j) {
  FilesSummary files;
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

std::optional<uint32_t> ReportNode(const CheckReport& r) {
  std::optional<uint32_t> node;
  for (const auto& i : r.items) {
    if (i.level != CheckLevel::kFiles) continue;
    auto id = walfmt::NodeIdFromDirName(i.group);
    if (!id || (node && *node != *id)) return std::nullopt;
    node = id;
  }
  return node;
}

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

walfmt::Result<CheckReport> ReadCheckReport(const std::string& path) {
  auto text = walfmt::ReadWholeFile(path, walfmt::kMaxJsonFileBytes);
  if (!text.ok()) {
    // A report that is not there is the caller's mistake; any other failure to read is I/O.
    if (text.status().code() == walfmt::ErrorCode::kNotFound) return text.status();
    return walfmt::Status::Io(text.status().message());
  }
  return CheckReportFromJson(*text, path);
}

walfmt::Result<CheckReport> MergeCheckReports(std::vector<CheckReport> reports,
                                              const std::vector<std::string>& origins) {
  if (reports.empty()) return walfmt::Status::InvalidArgument("no reports to merge");
  // By node, so that the merged report does not depend on the order given.
  std::vector<std::pair<uint32_t, size_t>> order;
  std::map<uint32_t, size_t> seen;
  for (size_t i = 0; i < reports.size(); ++i) {
    auto node = ReportNode(reports[i]);
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
    m.files.per_node[node] = NodeFilesRead{r.files.segments_read, r.files.bytes_read, r.files.records,
                                           r.files.segments_skipped, r.files.bytes_skipped};
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

}  // namespace walcut::recovery
