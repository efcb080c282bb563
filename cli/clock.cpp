#include "cli/clock.h"

#include <filesystem>

#include "walfmt/cluster_layout.h"
#include "walfmt/file_io.h"

namespace walcut::cli {
namespace fs = std::filesystem;

walfmt::ClusterClock ClockOf(const cut::ClusterCuts& cc) { return walfmt::ClusterClock{cc.epoch_unix_us}; }

walfmt::ClusterClock ClockNear(const std::string& path) {
  if (path.empty() || path == "-") return {};  // standard input belongs to no directory
  std::error_code ec;
  fs::path dir = fs::is_directory(path, ec) ? fs::path(path) : fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  for (int up = 0; up < 4; ++up) {
    if (fs::exists(dir / walfmt::kClusterJsonName, ec)) {
      auto info = walfmt::LoadClusterInfo(dir.string());
      return walfmt::ClusterClock{info.ok() ? info->epoch_unix_us : std::nullopt};
    }
    const fs::path manifest = dir / "manifest.json";
    if (fs::exists(manifest, ec)) {
      auto text = walfmt::ReadWholeFile(manifest.string(), walfmt::kMaxJsonFileBytes);
      if (!text.ok()) return {};
      const nlohmann::json m = nlohmann::json::parse(*text, nullptr, false);
      if (m.is_object() && m.contains("cluster")) {
        auto info = walfmt::ParseClusterInfo(m["cluster"].dump(), manifest.string() + " (cluster)");
        if (info.ok()) return walfmt::ClusterClock{info->epoch_unix_us};
      }
      return {};
    }
    const fs::path parent = fs::absolute(dir, ec).parent_path();
    if (ec || parent == fs::absolute(dir, ec)) break;
    dir = parent;
  }
  return {};
}

void PutTime(nlohmann::json& j, const std::string& key, std::optional<uint64_t> us, const walfmt::ClusterClock& clock) {
  j[key + "_us"] = us ? nlohmann::json(*us) : nlohmann::json(nullptr);
  j[key] = us ? nlohmann::json(clock.Format(*us)) : nlohmann::json(nullptr);
}

std::string ShortTime(const walfmt::ClusterClock& clock, uint64_t us, uint64_t ref) {
  std::string t = clock.Format(us);
  if (!clock.known() || t.empty() || t[0] == '+') return t;
  const std::string r = clock.Format(ref);
  // "YYYY-MM-DDT" then "HH:MM:SS.ffffff" then "Z".
  if (t.size() == walfmt::UtcWriter::kBytes && r.compare(0, 11, t, 0, 11) == 0) return t.substr(11, 15);
  return t;
}

std::string ClockLine(const walfmt::ClusterClock& clock) {
  if (clock.known()) return "clock: cluster time 0 is " + clock.Format(0) + "; times are UTC";
  return "clock: the cluster records no epoch (cluster.json without epoch_unix_us); times are cluster time since "
         "creation (+SECONDS)";
}

}  // namespace walcut::cli
