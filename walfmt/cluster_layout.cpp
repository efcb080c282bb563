#include "walfmt/cluster_layout.h"

#include <charconv>
#include <filesystem>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "walfmt/duration.h"
#include "walfmt/file_io.h"
#include "walfmt/segment.h"
#include "walfmt/snapshot.h"
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

// Short rendering of a JSON value for an error message.
std::string Shown(const json& v) {
  std::string s = walfmt::DumpJson(v);
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

// A string from the document as an error shows it: in double quotes, with
// JSON escapes, so that a line break or a quote in it cannot break the
// one-line message.
std::string Quoted(std::string_view s) {
  return json(std::string(s)).dump(-1, ' ', false, json::error_handler_t::replace);
}

// Reads fields of one JSON document and turns every problem into a one-line
// kCorruption naming the origin and the field's path.
class Reader {
 public:
  explicit Reader(std::string_view origin) : origin_(origin) {}

  Status Error(std::string_view field, std::string_view what) const {
    return Status::Corruption(fmt::format("{}: field \"{}\": {}", origin_, field, what));
  }

  // The member `key` of `obj`, or an error naming `path`.
  Status Member(const json& obj, std::string_view path, std::string_view key, const json*& out) const {
    if (!obj.is_object()) return Error(path, "the enclosing value is not an object");
    auto it = obj.find(std::string(key));
    if (it == obj.end()) return Error(path, "missing");
    out = &*it;
    return Status::Ok();
  }

  Status Unsigned(const json& obj, std::string_view path, std::string_view key, uint64_t max, uint64_t& out) const {
    const json* v = nullptr;
    if (Status st = Member(obj, path, key, v); !st.ok()) return st;
    return UnsignedValue(*v, path, max, out);
  }

  Status UnsignedValue(const json& v, std::string_view path, uint64_t max, uint64_t& out) const {
    if (!v.is_number_unsigned()) {
      return Error(path, fmt::format("expected an unsigned integer, found {}", Shown(v)));
    }
    out = v.get<uint64_t>();
    if (out > max) return Error(path, fmt::format("{} is larger than the limit {}", out, max));
    return Status::Ok();
  }

  Status U32(const json& obj, std::string_view path, std::string_view key, uint64_t max, uint32_t& out) const {
    uint64_t v = 0;
    if (Status st = Unsigned(obj, path, key, std::min<uint64_t>(max, std::numeric_limits<uint32_t>::max()), v);
        !st.ok()) {
      return st;
    }
    out = static_cast<uint32_t>(v);
    return Status::Ok();
  }

  Status Signed(const json& obj, std::string_view path, std::string_view key, int64_t& out) const {
    const json* v = nullptr;
    if (Status st = Member(obj, path, key, v); !st.ok()) return st;
    if (v->is_number_unsigned()) {
      const uint64_t u = v->get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Error(path, fmt::format("{} does not fit a signed 64-bit integer", u));
      }
      out = static_cast<int64_t>(u);
      return Status::Ok();
    }
    if (!v->is_number_integer()) return Error(path, fmt::format("expected an integer, found {}", Shown(*v)));
    out = v->get<int64_t>();
    return Status::Ok();
  }

  Status String(const json& obj, std::string_view path, std::string_view key, std::string& out) const {
    const json* v = nullptr;
    if (Status st = Member(obj, path, key, v); !st.ok()) return st;
    if (!v->is_string()) return Error(path, fmt::format("expected a string, found {}", Shown(*v)));
    out = v->get<std::string>();
    return Status::Ok();
  }

  Status Array(const json& obj, std::string_view path, std::string_view key, uint64_t max_size,
               const json*& out) const {
    if (Status st = Member(obj, path, key, out); !st.ok()) return st;
    if (!out->is_array()) return Error(path, fmt::format("expected an array, found {}", Shown(*out)));
    if (out->size() > max_size)
      return Error(path, fmt::format("{} elements, more than the limit {}", out->size(), max_size));
    return Status::Ok();
  }

 private:
  std::string_view origin_;
};

// A non-empty relative path that stays below the directory it is relative to.
bool IsInsideRelative(const std::string& p) {
  if (p.empty() || p.front() == '/') return false;
  for (const auto& part : fs::path(p)) {
    if (part == "..") return false;
  }
  return true;
}

bool ParseHex64(std::string_view s, uint64_t& out) {
  if (s.empty() || s.size() > 16) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out, 16);
  return ec == std::errc() && p == s.data() + s.size();
}

Status ParseSnapshots(const Reader& r, const json& doc, ClusterInfo& ci) {
  if (doc.find("full_snapshots") == doc.end()) return Status::Ok();  // a cluster without full snapshots
  const json* arr = nullptr;
  if (Status st = r.Array(doc, "full_snapshots", "full_snapshots", kMaxSnapshots, arr); !st.ok()) return st;
  for (size_t s = 0; s < arr->size(); ++s) {
    const json& e = (*arr)[s];
    const std::string base = fmt::format("full_snapshots[{}]", s);
    FullSnapshotInfo fs;
    if (Status st = r.String(e, base + ".name", "name", fs.name); !st.ok()) return st;
    if (fs.name.empty()) return r.Error(base + ".name", "empty");
    if (ci.FindSnapshot(fs.name) != nullptr)
      return r.Error(base + ".name", fmt::format("{} is listed twice", Quoted(fs.name)));
    if (Status st = r.String(e, base + ".dir", "dir", fs.dir); !st.ok()) return st;
    if (Status st = r.Unsigned(e, base + ".at_tx", "at_tx", UINT64_MAX, fs.at_tx); !st.ok()) return st;
    if (Status st = r.Unsigned(e, base + ".time_us", "time_us", UINT64_MAX, fs.time_us); !st.ok()) return st;
    const json* nodes = nullptr;
    if (Status st = r.Array(e, base + ".nodes", "nodes", kMaxNodes, nodes); !st.ok()) return st;
    if (nodes->size() != ci.nodes) {
      return r.Error(base + ".nodes", fmt::format("{} entries, expected one per node ({})", nodes->size(), ci.nodes));
    }
    for (size_t i = 0; i < nodes->size(); ++i) {
      const json& n = (*nodes)[i];
      const std::string nb = fmt::format("{}.nodes[{}]", base, i);
      FullSnapshotNode fn;
      if (Status st = r.U32(n, nb + ".node", "node", kMaxNodes, fn.node); !st.ok()) return st;
      if (fn.node != i) return r.Error(nb + ".node", fmt::format("expected {}, found {}", i, fn.node));
      if (Status st = r.String(n, nb + ".file", "file", fn.file); !st.ok()) return st;
      std::string text;
      if (Status st = r.String(n, nb + ".wal_position", "wal_position", text); !st.ok()) return st;
      auto lsn = Lsn::Parse(text);
      if (!lsn)
        return r.Error(nb + ".wal_position", fmt::format("{} is not a position (SEGMENT/OFFSET in hex)", Quoted(text)));
      fn.wal_position = *lsn;
      if (Status st = r.String(n, nb + ".fingerprint", "fingerprint", text); !st.ok()) return st;
      if (!ParseHex64(text, fn.fingerprint)) {
        return r.Error(nb + ".fingerprint", fmt::format("{} is not a 64-bit hex fingerprint", Quoted(text)));
      }
      fs.nodes.push_back(std::move(fn));
    }
    ci.full_snapshots.push_back(std::move(fs));
  }
  return Status::Ok();
}

// Version 1 (older walcut): "format"/"format_version" instead of "schema".
bool IsVersion1(const json& doc) {
  return doc.is_object() && doc.find("schema") == doc.end() && doc.find("format") != doc.end();
}

Status ParseDocument(const Reader& r, const json& doc, ClusterInfo& ci) {
  if (!doc.is_object()) return r.Error("(document)", fmt::format("expected an object, found {}", Shown(doc)));
  std::string text;
  const bool v1 = IsVersion1(doc);
  if (v1) {
    if (Status st = r.String(doc, "format", "format", text); !st.ok()) return st;
    if (text != kClusterFormatV1) {
      return r.Error("format", fmt::format("expected \"{}\", found {}", kClusterFormatV1, Quoted(text)));
    }
    uint64_t version = 0;
    if (Status st = r.Unsigned(doc, "format_version", "format_version", UINT64_MAX, version); !st.ok()) return st;
    if (version != 1) {
      return r.Error("format_version",
                     fmt::format("version {} is not supported (this walcut reads 1, and \"schema\": \"{}\")", version,
                                 kClusterSchema));
    }
  } else {
    if (Status st = r.String(doc, "schema", "schema", text); !st.ok()) return st;
    if (text != kClusterSchema) {
      return r.Error("schema", fmt::format("expected \"{}\", found {}", kClusterSchema, Quoted(text)));
    }
  }
  // cluster_id: 16 hex digits; a decimal number in version 1.
  if (v1) {
    if (Status st = r.Unsigned(doc, "cluster_id", "cluster_id", UINT64_MAX, ci.cluster_id); !st.ok()) return st;
  } else {
    if (Status st = r.String(doc, "cluster_id", "cluster_id", text); !st.ok()) return st;
    if (text.size() != 16 || !ParseHex64(text, ci.cluster_id)) {
      return r.Error("cluster_id", fmt::format("{} is not 16 hex digits", Quoted(text)));
    }
  }
  if (Status st = r.Unsigned(doc, "seed", "seed", UINT64_MAX, ci.seed); !st.ok()) return st;
  if (doc.contains("epoch_unix_us")) {
    uint64_t epoch = 0;
    if (Status st = r.Unsigned(doc, "epoch_unix_us", "epoch_unix_us", kMaxUnixMicros, epoch); !st.ok()) return st;
    ci.epoch_unix_us = epoch;
  }
  if (Status st = r.U32(doc, "nodes", "nodes", kMaxNodes, ci.nodes); !st.ok()) return st;
  if (ci.nodes == 0) return r.Error("nodes", "expected at least 1, found 0");
  if (Status st = r.U32(doc, "backups", "backups", kMaxNodes, ci.backups); !st.ok()) return st;
  if (ci.backups >= ci.nodes) {
    return r.Error("backups", fmt::format("{} backups need more than {} nodes", ci.backups, ci.nodes));
  }
  if (Status st = r.String(doc, "key_hash", "key_hash", text); !st.ok()) return st;
  if (text != kKeyHash) return r.Error("key_hash", fmt::format("expected \"{}\", found {}", kKeyHash, Quoted(text)));

  // The partition table must be the one the topology computes: the tools
  // place keys by recomputing it, not by reading this table.
  const json* parts = nullptr;
  if (Status st = r.Array(doc, "partitions", "partitions", kMaxPartitions, parts); !st.ok()) return st;
  if (parts->empty()) return r.Error("partitions", "no partitions");
  ci.partitions = static_cast<uint32_t>(parts->size());
  const Topology topo = ci.topology();
  for (uint32_t p = 0; p < ci.partitions; ++p) {
    const json& e = (*parts)[p];
    const std::string base = fmt::format("partitions[{}]", p);
    uint32_t v = 0;
    if (Status st = r.U32(e, base + ".id", "id", kMaxPartitions, v); !st.ok()) return st;
    if (v != p) return r.Error(base + ".id", fmt::format("expected {}, found {}", p, v));
    if (Status st = r.U32(e, base + ".primary", "primary", kMaxNodes, v); !st.ok()) return st;
    if (v != topo.PrimaryOfPartition(p)) {
      return r.Error(base + ".primary", fmt::format("expected node {} ({} over {} nodes), found {}",
                                                    topo.PrimaryOfPartition(p), kKeyHash, ci.nodes, v));
    }
    const json* backups = nullptr;
    if (Status st = r.Array(e, base + ".backups", "backups", kMaxNodes, backups); !st.ok()) return st;
    const std::vector<uint32_t> want = topo.BackupsOf(topo.PrimaryOfPartition(p));
    bool same = backups->size() == want.size();
    for (size_t i = 0; same && i < want.size(); ++i) {
      same = (*backups)[i].is_number_unsigned() && (*backups)[i].get<uint64_t>() == want[i];
    }
    if (!same) {
      return r.Error(base + ".backups", fmt::format("expected [{}], found {}", fmt::join(want, ","), Shown(*backups)));
    }
  }

  const json* dirs = nullptr;
  if (Status st = r.Array(doc, "node_dirs", "node_dirs", kMaxNodes, dirs); !st.ok()) return st;
  if (dirs->size() != ci.nodes) {
    return r.Error("node_dirs", fmt::format("{} entries, expected one per node ({})", dirs->size(), ci.nodes));
  }
  for (uint32_t i = 0; i < ci.nodes; ++i) {
    const std::string base = fmt::format("node_dirs[{}]", i);
    uint32_t id = 0;
    if (Status st = r.U32((*dirs)[i], base + ".id", "id", kMaxNodes, id); !st.ok()) return st;
    if (id != i) return r.Error(base + ".id", fmt::format("expected {}, found {}", i, id));
    std::string dir;
    if (Status st = r.String((*dirs)[i], base + ".wal_dir", "wal_dir", dir); !st.ok()) return st;
    if (!IsInsideRelative(dir)) {
      return r.Error(base + ".wal_dir",
                     fmt::format("expected a relative path inside the cluster directory, found {}", Quoted(dir)));
    }
    ci.node_wal_dirs.push_back(std::move(dir));
  }

  const json* params = nullptr;
  if (Status st = r.Member(doc, "parameters", "parameters", params); !st.ok()) return st;
  if (Status st = r.String(*params, "parameters.workload", "workload", text); !st.ok()) return st;
  if (!ParseWorkload(text, ci.workload)) {
    return r.Error("parameters.workload", fmt::format("expected bank, cycle or mixed, found {}", Quoted(text)));
  }
  constexpr uint64_t kMaxKeys = 1000000;  // keys are named with six digits
  if (Status st = r.U32(*params, "parameters.accounts", "accounts", kMaxKeys, ci.accounts); !st.ok()) return st;
  if (Status st = r.U32(*params, "parameters.ring_keys", "ring_keys", kMaxKeys, ci.ring_keys); !st.ok()) return st;
  if (ci.has_bank() && ci.accounts == 0) {
    return r.Error("parameters.accounts", fmt::format("0 accounts for the {} workload", WorkloadName(ci.workload)));
  }
  if (ci.has_cycle() && ci.ring_keys == 0) {
    return r.Error("parameters.ring_keys", fmt::format("0 ring keys for the {} workload", WorkloadName(ci.workload)));
  }
  if (Status st = r.Signed(*params, "parameters.initial_balance", "initial_balance", ci.initial_balance); !st.ok()) {
    return st;
  }
  if (Status st = r.Signed(doc, "initial_bank_total", "initial_bank_total", ci.initial_bank_total); !st.ok()) {
    return st;
  }
  return ParseSnapshots(r, doc, ci);
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
    if (Status st = ParseDocument(Reader(origin), doc, ci); !st.ok()) return st;
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
  j["cluster_id"] = fmt::format("{:016x}", info.cluster_id);
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
                     {"fingerprint", fmt::format("{:016x}", n.fingerprint)}});
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
    *id = fmt::format("{:016x}", id->get<uint64_t>());
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
