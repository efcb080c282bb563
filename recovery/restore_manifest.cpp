// A restore's OUT/manifest.json: written by WriteRestore, read back when an
// output serves as the base of a later restore (recovery/restore.h).
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "recovery/restore.h"
#include "recovery/restore_node.h"
#include "walfmt/cluster_layout.h"
#include "walfmt/duration.h"
#include "walfmt/file_io.h"
#include "walfmt/json_fields.h"
#include "walfmt/snapshot.h"
#include "walfmt/staging.h"
#include "walfmt/text_escape.h"

namespace walcut::recovery {
namespace fs = std::filesystem;
using nlohmann::json;
using walfmt::Lsn;
using walfmt::Status;

namespace {

// "schema" kRestoreManifestSchema, or "format": "walcut-restore" (older
// walcut), or kPartialRestoreManifestSchema with a well-formed "subset"
// (a partial restore's manifest says which keys it holds).
bool HasRestoreSchema(const nlohmann::json& m) {
  const auto schema = m.find("schema");
  const auto format = m.find("format");
  if (schema != m.end() && schema->is_string() && *schema == kPartialRestoreManifestSchema) {
    auto subset = detail::SubsetFromJson(m, "manifest.json");
    return subset.ok() && !subset->whole();
  }
  return (schema != m.end() && schema->is_string() && *schema == kRestoreManifestSchema) ||
         (format != m.end() && format->is_string() && *format == kRestoreManifestFormatV1);
}

walfmt::Result<std::string> ReadText(const std::string& path) {
  return walfmt::ReadWholeFile(path, walfmt::kMaxJsonFileBytes);
}

}  // namespace

namespace detail {

// The fields a restore manifest is known by, each of the right type (a
// value of another type is not read as a default): the restore manifest's
// schema (a repository's synthetic full has the artifact's at the top level
// and the restore's manifest under "restore"), "cut" an unsigned number,
// "forced" absent or a boolean.
bool IsRestoreManifest(const nlohmann::json& m) {
  if (!m.is_object()) return false;
  const auto restore = m.find("restore");
  const bool known = HasRestoreSchema(m) || (restore != m.end() && restore->is_object() && HasRestoreSchema(*restore));
  walfmt::JsonFields f("manifest.json");
  f.U64(m, "cut", "");
  f.OptionalBool(m, "forced", "");
  return known && f.ok();
}

json NodeEntryJson(const NodeRestore& nr) {
  return {{"node", nr.node},
          {"file", fmt::format("node-{}.snap", nr.node)},
          {"fingerprint", fmt::format("{:016x}", nr.fingerprint)},
          {"entries", nr.entries},
          {"wal_from", nr.from.ToString()},
          {"wal_to", nr.to.ToString()},
          {"cut_start", nr.cut_start.ToString()},
          {"cut_start_time_us", nr.cut_start_time_us},
          {"continue_from", nr.continue_from.ToString()},
          {"txs_applied", nr.txs_applied},
          {"txs_skipped", nr.txs_skipped},
          {"writes_applied", nr.writes_applied}};
}

}  // namespace detail

const char* BaseKindName(BaseKind k) {
  switch (k) {
    case BaseKind::kGenesis:
      return "genesis";
    case BaseKind::kFull:
      return "full";
    case BaseKind::kRestored:
      return "restored";
  }
  return "unknown";
}

std::optional<uint64_t> RestoredBaseCut(const std::string& dir) {
  std::error_code ec;
  const std::string path = (fs::path(dir) / "manifest.json").string();
  if (dir.empty() || !fs::is_regular_file(path, ec)) return std::nullopt;
  auto text = ReadText(path);
  if (!text.ok()) return std::nullopt;
  const json m = walfmt::UnescapeJsonStrings(json::parse(*text, nullptr, false));
  if (!detail::IsRestoreManifest(m) || (m.contains("forced") && m["forced"].get<bool>())) return std::nullopt;
  return m["cut"].get<uint64_t>();
}

std::optional<RestoredBase> ReadRestoredBase(const std::string& dir) {
  const auto k = RestoredBaseCut(dir);
  if (!k) return std::nullopt;
  auto text = ReadText((fs::path(dir) / "manifest.json").string());
  if (!text.ok()) return std::nullopt;
  const json m = json::parse(*text, nullptr, false);
  // Every node entry names its node once, with both positions; anything else
  // (a missing or mistyped field, a node twice or out of range) means this
  // is not a base whose positions can be trusted.
  walfmt::JsonFields f("manifest.json");
  const json* nodes = f.Array(m, "nodes", "");
  if (nodes == nullptr || nodes->empty()) return std::nullopt;
  RestoredBase b;
  b.cut = *k;
  const size_t n = nodes->size();
  b.cut_start.assign(n, Lsn{});
  b.continue_from.assign(n, Lsn{});
  std::vector<bool> seen(n, false);
  for (size_t e = 0; e < n; ++e) {
    const std::string path = walfmt::JsonFields::Element("nodes", e);
    const uint64_t i = f.U64((*nodes)[e], "node", path);
    const Lsn start = f.Position((*nodes)[e], "cut_start", path);
    const Lsn from = f.Position((*nodes)[e], "continue_from", path);
    if (!f.ok() || i >= n || seen[i]) return std::nullopt;
    seen[i] = true;
    b.cut_start[i] = start;
    b.continue_from[i] = from;
  }
  return b;
}

walfmt::Status WriteRestore(RestoreResult& r, const std::string& out, const std::string& extra_json) {
  std::error_code ec;
  if (fs::exists(out, ec))
    return Status::InvalidArgument(fmt::format("{}: already exists; refusing to overwrite", out));
  const fs::path target = fs::absolute(out, ec);
  const bool staged = !r.stage_dir.empty();
  const fs::path tmp = staged ? fs::path(r.stage_dir) : fs::path(walfmt::TempNameBeside(target.string()));
  if (!staged) {
    if (!r.out_lock) {
      auto lock = walfmt::OutputLock::Acquire(target.string());
      if (!lock.ok()) return lock.status();
      r.out_lock = std::move(lock.value());
      if (fs::exists(fs::symlink_status(target, ec))) {
        return Status::InvalidArgument(fmt::format("{}: already exists; refusing to overwrite", out));
      }
    }
    walfmt::RegisterStaging(tmp.string());
    if (!fs::create_directories(tmp, ec) || ec) {
      walfmt::RemoveStaging(tmp.string());
      return Status::Io(fmt::format("{}: cannot create: {}", tmp.string(), ec.message()));
    }
  }
  auto fail = [&](Status st) {
    walfmt::RemoveStaging(tmp.string());
    r.stage_dir.clear();
    return st;
  };
  // The cluster_id the node files carry, from the one cluster.json parser
  // (the layout the restore read was checked by it already).
  uint64_t cluster_id = 0;
  if (!staged && !r.cluster_json.empty()) {
    auto ci = walfmt::ParseClusterInfo(r.cluster_json, "cluster.json");
    if (!ci.ok()) return fail(ci.status());
    cluster_id = ci->cluster_id;
  }
  json m;
  // A partial restore's manifest has a schema of its own: walcut before
  // partial restores refuses it as a base instead of taking it for the whole state.
  m["schema"] = r.subset.whole() ? kRestoreManifestSchema : kPartialRestoreManifestSchema;
  m["cut"] = r.cut;
  m["status"] = cut::CutStatusName(r.status);
  m["forced"] = r.status != cut::CutStatus::kConsistent;
  if (r.status != cut::CutStatus::kConsistent) m["problem"] = r.reason;
  m["base"] = {{"kind", BaseKindName(r.base.kind)}, {"name", r.base.name}};
  if (r.base.kind == BaseKind::kRestored) m["base"]["cut"] = r.base.cut;
  if (!r.base.dir.empty()) m["base"]["dir"] = r.base.dir;
  if (!r.subset.whole()) m["subset"] = detail::SubsetJson(r.subset);
  json nodes = json::array();
  for (auto& nr : r.nodes) {
    const std::string file = fmt::format("node-{}.snap", nr.node);
    if (!staged) {  // restored without an output directory: the states are in memory
      walfmt::SnapshotFile f;
      f.node_id = nr.node;
      f.wal_position = nr.cut_start;
      f.time_us = nr.cut_start_time_us;
      f.name = fmt::format("cut-{}", r.cut);
      f.entries = std::move(nr.state);  // written once; the result no longer holds the state
      f.cluster_id = cluster_id;
      if (Status st = walfmt::WriteSnapshotFile((tmp / file).string(), f); !st.ok()) return fail(st);
    }
    nodes.push_back(detail::NodeEntryJson(nr));
  }
  // Record times as UTC too when the cluster records its epoch.
  if (!r.cluster_json.empty()) {
    auto ci = walfmt::ParseClusterInfo(r.cluster_json, "cluster.json");
    const walfmt::ClusterClock clock{ci.ok() ? ci->epoch_unix_us : std::nullopt};
    for (size_t i = 0; i < nodes.size(); ++i) nodes[i]["cut_start_time"] = clock.Format(r.nodes[i].cut_start_time_us);
  }
  m["nodes"] = nodes;
  if (!r.cluster_json.empty()) {
    json cj = walfmt::UnescapeJsonStrings(json::parse(walfmt::CurrentClusterJsonText(r.cluster_json), nullptr, false));
    if (!cj.is_discarded()) m["cluster"] = cj;
  }
  if (!extra_json.empty()) {
    json extra = walfmt::UnescapeJsonStrings(json::parse(extra_json, nullptr, false));
    if (extra.is_object()) {
      for (auto it = extra.begin(); it != extra.end(); ++it) m[it.key()] = it.value();
    }
  }
  // The node files are synced already (SnapshotStreamWriter::Finish,
  // WriteSnapshotFile); the manifest is written last, then the directory is
  // renamed into place durably: OUT appears complete or not at all.
  if (Status st = walfmt::WriteNewFile((tmp / "manifest.json").string(), walfmt::DumpJson(m, 2) + "\n"); !st.ok())
    return fail(st);
  if (Status st = walfmt::SyncDir(tmp.string()); !st.ok()) return fail(st);
  if (Status st = walfmt::CommitStaging(tmp.string(), target.string()); !st.ok()) return fail(st);
  r.stage_dir.clear();
  r.out_lock.reset();
  return Status::Ok();
}

}  // namespace walcut::recovery
