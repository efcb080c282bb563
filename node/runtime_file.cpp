// DIR/runtime.json, read with walfmt's JsonFields and written atomically.

#include "node/runtime_file.h"

#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "walfmt/file_io.h"
#include "walfmt/json_fields.h"
#include "walfmt/strings.h"

namespace walcut::node {

namespace {
constexpr uint64_t kMaxRuntimeFileBytes = 1u << 20;
constexpr size_t kMaxNodes = 64;
}  // namespace

walfmt::Result<RuntimeInfo> LoadRuntimeInfo(const std::string& cluster_dir) {
  const std::string path = walfmt::JoinPath(cluster_dir, kRuntimeFile);
  auto text = walfmt::ReadWholeFile(path, kMaxRuntimeFileBytes);
  if (!text.ok()) return text.status();
  nlohmann::json doc = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return walfmt::Status::Corruption(fmt::format("{}: not a JSON document", path));
  walfmt::JsonFields f(path);
  RuntimeInfo info;
  if (std::string schema = f.String(doc, "schema", ""); f.ok() && schema != kRuntimeSchema) {
    f.Fail("schema", fmt::format("is '{}', expected '{}'", schema, kRuntimeSchema));
  }
  info.host = f.String(doc, "host", "");
  if (const auto* ports = f.Array(doc, "ports", "", kMaxNodes)) {
    for (size_t i = 0; i < ports->size(); ++i) {
      const auto& p = (*ports)[i];
      if (!p.is_number_unsigned() || p.get<uint64_t>() == 0 || p.get<uint64_t>() > 65535) {
        f.Fail(walfmt::JsonFields::Element("ports", i), "must be a port number 1..65535");
        break;
      }
      info.ports.push_back(static_cast<uint16_t>(p.get<uint64_t>()));
    }
  }
  if (const auto* pids = f.Array(doc, "pids", "", kMaxNodes)) {
    for (size_t i = 0; i < pids->size(); ++i) {
      const auto& p = (*pids)[i];
      if (!p.is_number_integer() || p.get<int64_t>() < 0) {
        f.Fail(walfmt::JsonFields::Element("pids", i), "must be a process id (0: none)");
        break;
      }
      info.pids.push_back(p.get<int64_t>());
    }
  }
  const std::string sync = f.String(doc, "sync", "");
  if (f.ok() && !ParseSyncMode(sync, info.sync)) f.Fail("sync", "must be always, group or off");
  info.cut_every_us = f.U64(doc, "cut_every_us", "");
  info.full_snapshot_every_us = f.U64(doc, "full_snapshot_every_us", "");
  const std::string retention = f.String(doc, "wal_retention", "");
  if (f.ok() && !ParseWalRetention(retention, info.wal_retention)) {
    f.Fail("wal_retention", "must be keep or after-snapshot");
  }
  info.segment_bytes = f.U64(doc, "segment_bytes", "", uint64_t{1} << 32);
  info.vote_no_per_million = f.U32(doc, "vote_no_per_million", "", 1000000);
  if (f.ok() && info.pids.size() != info.ports.size()) f.Fail("pids", "must have one entry per port");
  if (!f.ok()) return f.status();
  return info;
}

walfmt::Status SaveRuntimeInfo(const std::string& cluster_dir, const RuntimeInfo& info) {
  nlohmann::ordered_json doc;
  doc["schema"] = kRuntimeSchema;
  doc["host"] = info.host;
  doc["ports"] = info.ports;
  doc["pids"] = info.pids;
  doc["sync"] = SyncModeName(info.sync);
  doc["cut_every_us"] = info.cut_every_us;
  doc["full_snapshot_every_us"] = info.full_snapshot_every_us;
  doc["wal_retention"] = WalRetentionName(info.wal_retention);
  doc["segment_bytes"] = info.segment_bytes;
  doc["vote_no_per_million"] = info.vote_no_per_million;
  return walfmt::WriteFileAtomic(walfmt::JoinPath(cluster_dir, kRuntimeFile), doc.dump(2) + "\n");
}

walfmt::Result<std::optional<uint32_t>> LoadIncarnation(const std::string& node_dir) {
  const std::string path = walfmt::JoinPath(node_dir, kIncarnationFile);
  auto text = walfmt::ReadWholeFile(path, 64);
  if (!text.ok()) {
    if (text.status().code() == walfmt::ErrorCode::kNotFound) return std::optional<uint32_t>();
    return text.status();
  }
  const std::string& t = *text;
  uint64_t v = 0;
  bool ok = t.size() >= 2 && t.size() <= 11 && t.back() == '\n';
  for (size_t i = 0; ok && i + 1 < t.size(); ++i) {
    ok = t[i] >= '0' && t[i] <= '9';
    v = v * 10 + static_cast<uint64_t>(t[i] - '0');
  }
  if (!ok || v >= (uint64_t{1} << 24)) {
    return walfmt::Status::Corruption(fmt::format("{}: not an incarnation (a decimal number and a newline)", path));
  }
  return std::optional<uint32_t>(static_cast<uint32_t>(v));
}

walfmt::Status SaveIncarnation(const std::string& node_dir, uint32_t incarnation) {
  return walfmt::WriteFileAtomic(walfmt::JoinPath(node_dir, kIncarnationFile), fmt::format("{}\n", incarnation));
}

}  // namespace walcut::node
