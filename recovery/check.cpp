// `walcut check` (recovery/check.h): the report's names and counts, the
// incremental state file, and RunCheck, which runs the levels in order. The
// levels live in check_files.cpp, check_cuts.cpp and check_restore.cpp, the
// check of one node in check_node.cpp (recovery/check_internal.h).
#include "recovery/check.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cut/load.h"
#include "recovery/check_internal.h"
#include "walfmt/file_io.h"
#include "walfmt/json_fields.h"
#include "walfmt/reader.h"
#include "walfmt/source.h"
#include "walfmt/text_escape.h"

namespace walcut::recovery {
using nlohmann::json;
using walfmt::Result;
using walfmt::Status;

const char* CheckLevelName(CheckLevel l) {
  switch (l) {
    case CheckLevel::kFiles:
      return "files";
    case CheckLevel::kCuts:
      return "cuts";
    case CheckLevel::kRestore:
      return "restore";
  }
  return "?";
}

bool ParseCheckLevel(const std::string& s, CheckLevel& out) {
  if (s == "files")
    out = CheckLevel::kFiles;
  else if (s == "cuts")
    out = CheckLevel::kCuts;
  else if (s == "restore")
    out = CheckLevel::kRestore;
  else
    return false;
  return true;
}

const char* ItemOutcomeName(ItemOutcome o) {
  switch (o) {
    case ItemOutcome::kPass:
      return "pass";
    case ItemOutcome::kFail:
      return "fail";
    case ItemOutcome::kSkipped:
      return "skipped";
  }
  return "?";
}

uint64_t CheckReport::FailedItems() const {
  uint64_t n = 0;
  for (const auto& i : items) n += i.outcome == ItemOutcome::kFail;
  return n;
}

uint64_t CheckReport::Findings() const {
  uint64_t n = 0;
  for (const auto& i : items) n += i.findings.size();
  return n;
}

CheckCounts CountChecks(const CheckReport& r, std::optional<CheckLevel> level) {
  CheckCounts c;
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

walfmt::Outcome CheckOutcome(const CheckReport& r) {
  if (!r.errors.empty()) return walfmt::Outcome::kIo;
  return r.FailedItems() > 0 ? walfmt::Outcome::kFindings : walfmt::Outcome::kOk;
}

// ---- state file -------------------------------------------------------------

std::string CheckStateToJson(const CheckState& s) {
  json nodes = json::array();
  for (const auto& [node, segs] : s.nodes) {
    json js = json::array();
    for (const auto& [index, st] : segs) {
      js.push_back({{"file", st.file},
                    {"index", st.index},
                    {"size", st.size},
                    {"mtime_ns", st.mtime_ns},
                    {"crc32c", fmt::format("{:08x}", st.crc32c)}});
    }
    nodes.push_back({{"node", node}, {"segments", js}});
  }
  return walfmt::DumpJson(json{{"schema", kCheckStateSchema}, {"nodes", nodes}}, 2) + "\n";
}

Result<CheckState> CheckStateFromJson(const std::string& text, const std::string& origin) {
  const json j = walfmt::UnescapeJsonStrings(json::parse(text, nullptr, false));
  const std::string what = fmt::format("{}: not a {} state file", origin, kCheckStateSchema);
  if (j.is_discarded() || !j.is_object()) return Status::InvalidArgument(what + ": not a JSON object");
  // The fields are read with the one field reader; its errors name the field
  // ("nodes[0].segments[1].crc32c") and are turned into a usage error here: a
  // state file is given on the command line.
  walfmt::JsonFields f(what);
  if (f.String(j, "schema", "") != kCheckStateSchema && f.ok()) {
    f.Fail("schema", fmt::format("{} is not \"{}\"", walfmt::JsonFields::Shown(j["schema"]), kCheckStateSchema));
  }
  const json* nodes = f.Array(j, "nodes", "");
  CheckState s;
  for (size_t i = 0; nodes != nullptr && f.ok() && i < nodes->size(); ++i) {
    const json& n = (*nodes)[i];
    const std::string np = walfmt::JsonFields::Element("nodes", i);
    // A node id above 32 bits, or a time past int64, is refused, never read
    // as another value (found by fuzz_check_state).
    const uint32_t node = f.U32(n, "node", np);
    const json* segments = f.Array(n, "segments", np);
    auto& segs = s.nodes[node];
    for (size_t k = 0; segments != nullptr && f.ok() && k < segments->size(); ++k) {
      const json& g = (*segments)[k];
      const std::string gp = walfmt::JsonFields::Element(walfmt::JsonFields::Member(np, "segments"), k);
      SegmentState st;
      st.file = f.String(g, "file", gp);
      st.index = f.U64(g, "index", gp);
      st.size = f.U64(g, "size", gp);
      st.mtime_ns = f.I64(g, "mtime_ns", gp);
      const std::string crc = f.String(g, "crc32c", gp);
      if (!f.ok()) break;
      const bool hex =
          std::all_of(crc.begin(), crc.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
      if (crc.size() != 8 || !hex) {
        f.Fail(walfmt::JsonFields::Member(gp, "crc32c"),
               fmt::format("{} is not 8 hex digits", walfmt::JsonFields::Shown(g["crc32c"])));
        break;
      }
      st.crc32c = static_cast<uint32_t>(std::strtoul(crc.c_str(), nullptr, 16));
      segs[st.index] = st;
    }
  }
  if (!f.ok()) return Status::InvalidArgument(f.error());
  return s;
}

Result<CheckState> ReadCheckState(const std::string& path) {
  auto text = walfmt::ReadWholeFile(path, walfmt::kMaxJsonFileBytes);
  if (!text.ok()) return text.status();
  return CheckStateFromJson(*text, path);
}

Status WriteCheckState(const std::string& path, const CheckState& s) {
  return walfmt::WriteFileAtomic(path, CheckStateToJson(s));
}

namespace check_detail {

void Progress(const CheckOptions& opt, const std::string& stage, uint64_t bytes_done, uint64_t bytes_total) {
  if (opt.progress) opt.progress(stage, bytes_done, bytes_total);
}

uint64_t WalBytes(const std::vector<std::string>& wal_dirs) {
  uint64_t total = 0;
  for (const auto& d : wal_dirs) {
    auto segs = walfmt::ListSegments(d, [](const walfmt::Problem&) {});
    if (!segs.ok()) continue;
    for (const auto& f : *segs) total += walfmt::SegmentDataBytes(f.path, f.compressed);
  }
  return total;
}

CheckItem MakeItem(CheckLevel level, std::string group, std::string name) {
  CheckItem it;
  it.level = level;
  it.group = std::move(group);
  it.name = std::move(name);
  return it;
}

}  // namespace check_detail

namespace {

// The cuts of the cluster, from one scan per node; nullopt when there are
// none to check (the scan failed: rep.errors; the summaries do not form one
// cluster: a finding).
std::optional<cut::ClusterCuts> ReconstructCuts(const CheckOptions& opt, const walfmt::ClusterLayout& layout,
                                                CheckReport& rep) {
  cut::LoadOptions lo;
  lo.jobs = opt.jobs;
  const uint64_t total = opt.progress ? check_detail::WalBytes(layout.wal_dirs) : 0;
  lo.progress = [&opt, total](uint64_t b) { check_detail::Progress(opt, "cuts", b, total); };
  auto sums = cut::ScanCluster(layout, lo);
  if (!sums.ok()) {
    rep.errors.push_back(sums.status().message());
    return std::nullopt;
  }
  auto cc = cut::Reconstruct(std::move(*sums));
  if (!cc.ok()) {
    // The summaries do not form one cluster: that is what the data says.
    CheckItem it = check_detail::MakeItem(CheckLevel::kCuts, "cluster", "reconstruct");
    it.outcome = ItemOutcome::kFail;
    CheckFinding f;
    f.check = "reconstruct";
    f.message = cc.status().message();
    it.findings.push_back(std::move(f));
    rep.items.push_back(std::move(it));
    return std::nullopt;
  }
  return std::move(*cc);
}

}  // namespace

Result<CheckReport> RunCheck(const CheckOptions& opt) {
  if (opt.node) return check_detail::RunNodeCheck(opt);
  auto layout = cut::FindClusterLayout(opt.dir);
  if (!layout.ok()) return layout.status();
  CheckReport rep;
  rep.dir = opt.dir;
  rep.level = opt.level;
  rep.selected_cut = opt.cut;

  check_detail::RunFiles(opt, *layout, rep);
  if (opt.level == CheckLevel::kFiles) return rep;

  const auto cc = ReconstructCuts(opt, *layout, rep);
  if (!cc) return rep;
  if (opt.cut && cc->Find(*opt.cut) == nullptr) {
    return Status::NotFound(fmt::format(
        "{}: no cut {} (the cluster has {} cuts{})", opt.dir, *opt.cut, cc->cuts.size(),
        cc->cuts.empty() ? std::string() : fmt::format(", {}..{}", cc->cuts.front().cut_id, cc->cuts.back().cut_id)));
  }
  check_detail::RunCuts(opt, *cc, rep);
  if (opt.level != CheckLevel::kRestore) return rep;

  check_detail::RunRestores(opt, *cc, *layout, rep);
  return rep;
}

}  // namespace walcut::recovery
