#include "walfmt/cluster_layout.h"

#include <charconv>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "walfmt/duration.h"
#include "walfmt/file_io.h"
#include "walfmt/json_fields.h"
#include "walfmt/segment.h"
#include "walfmt/snapshot.h"
#include "walfmt/strings.h"
#include "walfmt/text_escape.h"

namespace walfmt {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Bounds on what a cluster.json may ask for: the node runtime never comes
// near them, and they keep a damaged file from driving huge allocations.
constexpr uint64_t kMaxNodes = 1024;
constexpr uint64_t kMaxPartitions = 1u << 20;
constexpr uint64_t kMaxSnapshots = 1u << 16;

// A string from the document as an error shows it: in double quotes, with
// JSON escapes, so that a line break or a quote in it cannot break the
// one-line message.
std::string Quoted(std::string_view s) {
  return json(std::string(s)).dump(-1, ' ', false, json::error_handler_t::replace);
}

// A non-empty relative path that stays below the directory it is relative to.
bool IsInsideRelative(const std::string& p) {
  if (p.empty() || p.front() == '/') return false;
  for (const auto& part : fs::path(p)) {
    if (part == "..") return false;
  }
  return true;
}

// The parts of a cluster.json, each read with `f` (JsonFields: the first
// problem wins and names the field). Each returns false once f holds an
// error, so that no value read before it is used.

void ParseSnapshotNodes(JsonFields& f, const json& nodes, const std::string& base, FullSnapshotInfo& fs) {
  for (size_t i = 0; i < nodes.size() && f.ok(); ++i) {
    const json& n = nodes[i];
    const std::string nb = JsonFields::Element(base, i);
    FullSnapshotNode fn;
    fn.node = f.U32(n, "node", nb, kMaxNodes);
    if (f.ok() && fn.node != i)
      f.Fail(JsonFields::Member(nb, "node"), fmt::format("expected {}, found {}", i, fn.node));
    fn.file = f.String(n, "file", nb);
    fn.wal_position = f.Position(n, "wal_position", nb);
    fn.fingerprint = f.Hex16(n, "fingerprint", nb);
    fn.segments_deleted = f.OptionalU64(n, "segments_deleted", nb);
    fs.nodes.push_back(std::move(fn));
  }
}

bool ParseSnapshots(JsonFields& f, const json& doc, ClusterInfo& ci) {
  const json* arr = f.OptionalArray(doc, "full_snapshots", "", kMaxSnapshots);  // absent: no full snapshots
  for (size_t s = 0; arr != nullptr && s < arr->size() && f.ok(); ++s) {
    const json& e = (*arr)[s];
    const std::string base = JsonFields::Element("full_snapshots", s);
    const std::string name_path = JsonFields::Member(base, "name");
    FullSnapshotInfo fs;
    fs.name = f.String(e, "name", base);
    if (!f.ok()) break;
    if (fs.name.empty()) f.Fail(name_path, "empty");
    if (f.ok() && ci.FindSnapshot(fs.name) != nullptr) {
      f.Fail(name_path, fmt::format("{} is listed twice", Quoted(fs.name)));
    }
    fs.dir = f.String(e, "dir", base);
    fs.at_tx = f.U64(e, "at_tx", base);
    fs.time_us = f.U64(e, "time_us", base);
    const json* nodes = f.Array(e, "nodes", base, kMaxNodes);
    if (!f.ok()) break;
    if (nodes->size() != ci.nodes) {
      f.Fail(JsonFields::Member(base, "nodes"),
             fmt::format("{} entries, expected one per node ({})", nodes->size(), ci.nodes));
    }
    ParseSnapshotNodes(f, *nodes, base + ".nodes", fs);
    ci.full_snapshots.push_back(std::move(fs));
  }
  return f.ok();
}

// Version 1 (older walcut): "format"/"format_version" instead of "schema".
bool IsVersion1(const json& doc) {
  return doc.is_object() && doc.find("schema") == doc.end() && doc.find("format") != doc.end();
}

// The schema (or version 1's format and version) and the cluster id.
bool ParseHeader(JsonFields& f, const json& doc, ClusterInfo& ci) {
  if (!f.ExpectObject(doc, "")) return false;
  if (IsVersion1(doc)) {
    const std::string format = f.String(doc, "format", "");
    if (f.ok() && format != kClusterFormatV1) {
      f.Fail("format", fmt::format("expected \"{}\", found {}", kClusterFormatV1, Quoted(format)));
    }
    const uint64_t version = f.U64(doc, "format_version", "");
    if (f.ok() && version != 1) {
      f.Fail("format_version", fmt::format("version {} is not supported (this walcut reads 1, and \"schema\": \"{}\")",
                                           version, kClusterSchema));
    }
    ci.cluster_id = f.U64(doc, "cluster_id", "");  // a decimal number in version 1
    return f.ok();
  }
  const std::string schema = f.String(doc, "schema", "");
  if (f.ok() && schema != kClusterSchema) {
    f.Fail("schema", fmt::format("expected \"{}\", found {}", kClusterSchema, Quoted(schema)));
  }
  ci.cluster_id = f.Hex16(doc, "cluster_id", "");
  return f.ok();
}

// The partition table must be the one the topology computes: the tools
// place keys by recomputing it, not by reading this table.
bool ParsePartitions(JsonFields& f, const json& doc, ClusterInfo& ci) {
  const json* parts = f.Array(doc, "partitions", "", kMaxPartitions);
  if (!f.ok()) return false;
  if (parts->empty()) f.Fail("partitions", "no partitions");
  ci.partitions = static_cast<uint32_t>(parts->size());
  const Topology topo = ci.topology();
  for (uint32_t p = 0; p < ci.partitions && f.ok(); ++p) {
    const json& e = (*parts)[p];
    const std::string base = JsonFields::Element("partitions", p);
    const uint32_t id = f.U32(e, "id", base, kMaxPartitions);
    if (f.ok() && id != p) f.Fail(JsonFields::Member(base, "id"), fmt::format("expected {}, found {}", p, id));
    const uint32_t primary = f.U32(e, "primary", base, kMaxNodes);
    if (f.ok() && primary != topo.PrimaryOfPartition(p)) {
      f.Fail(JsonFields::Member(base, "primary"), fmt::format("expected node {} ({} over {} nodes), found {}",
                                                              topo.PrimaryOfPartition(p), kKeyHash, ci.nodes, primary));
    }
    const json* backups = f.Array(e, "backups", base, kMaxNodes);
    if (!f.ok()) break;
    const std::vector<uint32_t> want = topo.BackupsOf(topo.PrimaryOfPartition(p));
    bool same = backups->size() == want.size();
    for (size_t i = 0; same && i < want.size(); ++i) {
      same = (*backups)[i].is_number_unsigned() && (*backups)[i].get<uint64_t>() == want[i];
    }
    if (!same) {
      f.Fail(JsonFields::Member(base, "backups"),
             fmt::format("expected [{}], found {}", fmt::join(want, ","), JsonFields::Shown(*backups)));
    }
  }
  return f.ok();
}

// Nodes, backups and the key placement.
bool ParseTopology(JsonFields& f, const json& doc, ClusterInfo& ci) {
  ci.nodes = f.U32(doc, "nodes", "", kMaxNodes);
  if (f.ok() && ci.nodes == 0) f.Fail("nodes", "expected at least 1, found 0");
  ci.backups = f.U32(doc, "backups", "", kMaxNodes);
  if (f.ok() && ci.backups >= ci.nodes) {
    f.Fail("backups", fmt::format("{} backups need more than {} nodes", ci.backups, ci.nodes));
  }
  const std::string key_hash = f.String(doc, "key_hash", "");
  if (f.ok() && key_hash != kKeyHash) {
    f.Fail("key_hash", fmt::format("expected \"{}\", found {}", kKeyHash, Quoted(key_hash)));
  }
  return f.ok() && ParsePartitions(f, doc, ci);
}

bool ParseNodeDirs(JsonFields& f, const json& doc, ClusterInfo& ci) {
  const json* dirs = f.Array(doc, "node_dirs", "", kMaxNodes);
  if (!f.ok()) return false;
  if (dirs->size() != ci.nodes) {
    f.Fail("node_dirs", fmt::format("{} entries, expected one per node ({})", dirs->size(), ci.nodes));
  }
  for (uint32_t i = 0; i < ci.nodes && f.ok(); ++i) {
    const std::string base = JsonFields::Element("node_dirs", i);
    const uint32_t id = f.U32((*dirs)[i], "id", base, kMaxNodes);
    if (f.ok() && id != i) f.Fail(JsonFields::Member(base, "id"), fmt::format("expected {}, found {}", i, id));
    std::string dir = f.String((*dirs)[i], "wal_dir", base);
    if (f.ok() && !IsInsideRelative(dir)) {
      f.Fail(JsonFields::Member(base, "wal_dir"),
             fmt::format("expected a relative path inside the cluster directory, found {}", Quoted(dir)));
    }
    ci.node_wal_dirs.push_back(std::move(dir));
  }
  return f.ok();
}

// The workload's parameters, and the bank's total.
bool ParseParameters(JsonFields& f, const json& doc, ClusterInfo& ci) {
  const json* params = f.Object(doc, "parameters", "");
  if (!f.ok()) return false;
  const std::string workload = f.String(*params, "workload", "parameters");
  if (f.ok() && !ParseWorkload(workload, ci.workload)) {
    f.Fail("parameters.workload", fmt::format("expected bank, cycle or mixed, found {}", Quoted(workload)));
  }
  constexpr uint64_t kMaxKeys = 1000000;  // keys are named with six digits
  ci.accounts = f.U32(*params, "accounts", "parameters", kMaxKeys);
  ci.ring_keys = f.U32(*params, "ring_keys", "parameters", kMaxKeys);
  if (f.ok() && ci.has_bank() && ci.accounts == 0) {
    f.Fail("parameters.accounts", fmt::format("0 accounts for the {} workload", WorkloadName(ci.workload)));
  }
  if (f.ok() && ci.has_cycle() && ci.ring_keys == 0) {
    f.Fail("parameters.ring_keys", fmt::format("0 ring keys for the {} workload", WorkloadName(ci.workload)));
  }
  ci.initial_balance = f.I64(*params, "initial_balance", "parameters");
  ci.initial_bank_total = f.I64(doc, "initial_bank_total", "");
  return f.ok();
}

Status ParseDocument(JsonFields& f, const json& doc, ClusterInfo& ci) {
  if (ParseHeader(f, doc, ci)) {
    ci.seed = f.U64(doc, "seed", "");
    ci.epoch_unix_us = f.OptionalU64(doc, "epoch_unix_us", "", kMaxUnixMicros);
    // Absent when every segment is kept.
    if (auto r = f.OptionalString(doc, "wal_retention", ""); r && f.ok()) {
      if (*r != "after-snapshot") f.Fail("wal_retention", fmt::format("is '{}', expected 'after-snapshot'", *r));
      ci.wal_retention = *r;
    }
    if (ParseTopology(f, doc, ci) && ParseNodeDirs(f, doc, ci) && ParseParameters(f, doc, ci)) {
      ParseSnapshots(f, doc, ci);
    }
  }
  return f.status();
}

}  // namespace

const FullSnapshotInfo* ClusterInfo::FindSnapshot(std::string_view name) const {
  for (const auto& s : full_snapshots) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

Result<ClusterInfo> ParseClusterInfo(std::string_view json_text, std::string_view origin) {
  json doc;
  try {
    doc = UnescapeJsonStrings(json::parse(json_text.begin(), json_text.end()));
  } catch (const json::exception& e) {
    // e.what() reads "[json.exception.parse_error.101] parse error at line 3, column 5: ..."
    std::string what = e.what();
    if (const size_t at = what.find("] "); at != std::string::npos) what = what.substr(at + 2);
    return Status::Corruption(fmt::format("{}: not valid JSON: {}", origin, what));
  }
  ClusterInfo ci;
  ci.origin = std::string(origin);
  try {
    JsonFields f{std::string(origin)};
    if (Status st = ParseDocument(f, doc, ci); !st.ok()) return st;
  } catch (const json::exception& e) {  // every access is checked first; this is a backstop
    return Status::Internal(fmt::format("{}: {}", origin, e.what()));
  }
  return ci;
}

Result<ClusterInfo> LoadClusterInfo(const std::string& cluster_dir) {
  const std::string path = (fs::path(cluster_dir) / kClusterJsonName).string();
  auto text = ReadWholeFile(path, kMaxJsonFileBytes);
  if (!text.ok()) {
    if (text.status().code() == ErrorCode::kNotFound) {
      return Status::NotFound(fmt::format("{}: no such file (not a cluster directory)", path));
    }
    return text.status();
  }
  return ParseClusterInfo(*text, path);
}

std::string NodeDirName(uint32_t node) { return fmt::format("node-{}", node); }
std::string NodeWalDirName(uint32_t node) { return fmt::format("node-{}/wal", node); }

std::optional<uint32_t> NodeIdFromDirName(std::string_view name) {
  if (name.substr(0, 5) != "node-" || name.size() == 5) return std::nullopt;
  uint32_t id = 0;
  const auto [ptr, ec] = std::from_chars(name.data() + 5, name.data() + name.size(), id);
  if (ec != std::errc() || ptr != name.data() + name.size()) return std::nullopt;
  return id;
}

std::string ClusterJsonText(const ClusterInfo& info, const ClusterRunRecord& run) {
  json j;
  j["schema"] = kClusterSchema;
  j["wal_format_version"] = kFormatVersion;
  j["cluster_id"] = Hex16(info.cluster_id);
  j["seed"] = info.seed;
  if (info.epoch_unix_us) {
    j["epoch_unix_us"] = *info.epoch_unix_us;
    j["epoch"] = FormatUtc(static_cast<int64_t>(*info.epoch_unix_us));
  }
  j["nodes"] = info.nodes;
  j["backups"] = info.backups;
  j["initiator"] = run.initiator;
  j["key_hash"] = kKeyHash;
  const Topology topo = info.topology();
  json parts = json::array();
  for (uint32_t p = 0; p < info.partitions; ++p) {
    json e;
    e["id"] = p;
    e["primary"] = topo.PrimaryOfPartition(p);
    e["backups"] = topo.BackupsOf(topo.PrimaryOfPartition(p));
    parts.push_back(e);
  }
  j["partitions"] = parts;
  json nodes = json::array();
  for (uint32_t n = 0; n < info.node_wal_dirs.size(); ++n) {
    nodes.push_back({{"id", n}, {"wal_dir", info.node_wal_dirs[n]}});
    if (!info.wal_retention.empty())
      nodes.back()["first_segment"] = n < info.first_segment.size() ? info.first_segment[n] : 0;
  }
  j["node_dirs"] = nodes;
  if (!info.wal_retention.empty()) j["wal_retention"] = info.wal_retention;
  json params;
  params["workload"] = WorkloadName(info.workload);
  params["accounts"] = info.accounts;
  params["ring_keys"] = info.ring_keys;
  params["initial_balance"] = info.initial_balance;
  params["txs"] = run.txs;
  params["concurrency"] = run.concurrency;
  params["cuts"] = run.cuts;
  params["cut_every"] = run.cut_every;
  params["segment_bytes"] = run.segment_bytes;
  if (run.full_snapshot_every > 0) params["full_snapshot_every"] = run.full_snapshot_every;
  params["vote_no_per_million"] = run.vote_no_per_million;
  params["net_delay_us"] = {run.net_delay_min_us, run.net_delay_max_us};
  params["step_delay_max_us"] = run.step_delay_max_us;
  j["parameters"] = params;
  j["initial_bank_total"] = info.initial_bank_total;
  j["base"] = "genesis";  // the empty cluster at creation
  json snaps = json::array();
  for (const auto& sn : info.full_snapshots) {
    json e;
    e["name"] = sn.name;
    e["dir"] = sn.dir;
    e["at_tx"] = sn.at_tx;
    e["time_us"] = sn.time_us;
    json per = json::array();
    for (const auto& n : sn.nodes) {
      per.push_back({{"node", n.node},
                     {"file", n.file},
                     {"wal_position", n.wal_position.ToString()},
                     {"fingerprint", Hex16(n.fingerprint)}});
      if (n.segments_deleted) per.back()["segments_deleted"] = *n.segments_deleted;
    }
    e["nodes"] = per;
    snaps.push_back(e);
  }
  j["full_snapshots"] = snaps;
  j["snapshot_format_version"] = kSnapshotVersion;
  json faults;
  json crashes = json::array();
  for (const auto& c : run.crashes) {
    crashes.push_back({{"node", c.node}, {"at_us", c.at_us}, {"restart_delay_us", c.restart_delay_us}});
  }
  faults["crashes"] = crashes;
  faults["random_crashes"] = run.random_crashes;
  j["faults"] = faults;
  j["complete"] = run.complete;
  return walfmt::DumpJson(j, 2) + "\n";
}

std::string CurrentClusterJsonText(std::string_view json_text) {
  json doc = json::parse(json_text.begin(), json_text.end(), nullptr, false);
  if (!IsVersion1(doc)) return std::string(json_text);
  doc.erase("format");
  doc.erase("format_version");
  doc["schema"] = kClusterSchema;
  if (auto id = doc.find("cluster_id"); id != doc.end() && id->is_number_unsigned()) {
    *id = Hex16(id->get<uint64_t>());
  }
  return DumpJson(doc, 2) + "\n";
}

Status WriteClusterJson(const std::string& cluster_dir, const ClusterInfo& info, const ClusterRunRecord& run) {
  return WriteFileAtomic((fs::path(cluster_dir) / kClusterJsonName).string(), ClusterJsonText(info, run));
}

Result<ClusterLayout> FindClusterLayout(const std::string& dir) {
  ClusterLayout l;
  l.dir = dir;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return Status::NotFound(fmt::format("{}: no such directory", dir));
  auto info = LoadClusterInfo(dir);
  if (info.ok()) {
    l.has_cluster_json = true;
    l.cluster_id = info->cluster_id;
    l.epoch_unix_us = info->epoch_unix_us;
    for (const std::string& wd : info->node_wal_dirs) l.wal_dirs.push_back((fs::path(dir) / wd).string());
    return l;
  }
  if (info.status().code() != ErrorCode::kNotFound) return info.status();
  for (uint32_t i = 0;; ++i) {
    const fs::path wd = fs::path(dir) / NodeWalDirName(i);
    if (!fs::is_directory(wd, ec)) break;
    l.wal_dirs.push_back(wd.string());
  }
  if (l.wal_dirs.empty()) {
    return Status::NotFound(fmt::format("{}: not a cluster directory (no cluster.json, no node-0/wal)", dir));
  }
  return l;
}

}  // namespace walfmt
