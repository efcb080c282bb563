// libFuzzer target for the readers of a restore output's manifest.json (the
// file `walcut restore` writes next to the node-<i>.snap files, and that a
// later restore, `snapshot show` and `diff` read back):
//   - recovery::RestoredBaseCut(DIR): whether DIR is a restore output usable
//     as a base, and of which cut;
//   - recovery::FindClusterInfoFor(DIR): the cluster description embedded
//     under "cluster" (parsed by walfmt::ParseClusterInfo).
// The input is written to DIR/manifest.json in a private temporary directory.
//
// Properties:
//   - no crash, uncaught exception, leak or undefined behaviour;
//   - RestoredBaseCut returns the cut exactly when the manifest is a JSON
//     object with "schema": "walcut.restore-manifest/2" (or an older
//     walcut's "format": "walcut-restore", or a partial restore's
//     "walcut.restore-manifest/3" with a well-formed, non-empty "subset";
//     any of them under "restore" for a repository's synthetic full), an
//     unsigned "cut", and no "forced": true;
//     nothing without that schema or when "cut" is not an unsigned integer;
//   - FindClusterInfoFor fails with one line naming the manifest, or returns
//     what ParseClusterInfo makes of the "cluster" object.
//
// fuzz.sh: -max_len=16384
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz/check.h"
#include "recovery/restore.h"
#include "recovery/state_set.h"
#include "walfmt/cluster_layout.h"
#include "walfmt/text_escape.h"

namespace {

using nlohmann::json;
std::string g_dir;

void Cleanup() {
  std::error_code ec;
  if (!g_dir.empty()) std::filesystem::remove_all(g_dir, ec);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* t = std::getenv("TMPDIR");
  std::string tmpl = std::string(t && *t ? t : "/tmp") + "/walcut-fuzz-manifest-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) {
    std::perror("mkdtemp");
    std::abort();
  }
  g_dir = buf.data();
  std::atexit(Cleanup);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = g_dir + "/manifest.json";
  FILE* f = std::fopen(path.c_str(), "wb");
  Check(f != nullptr, "cannot create " + path);
  Check(size == 0 || std::fwrite(data, 1, size, f) == size, "cannot write " + path);
  Check(std::fclose(f) == 0, "cannot close " + path);

  const std::optional<uint64_t> cut = walcut::recovery::RestoredBaseCut(g_dir);

  // What the manifest says, read independently.
  const json m = json::parse(data, data + size, nullptr, false);
  const bool object = !m.is_discarded() && m.is_object();
  // A restore's schema (or an older walcut's format), at the top level or,
  // for a repository's synthetic full, under "restore".
  // A partial restore's "subset": key_prefixes (strings, sorted, distinct,
  // none empty), partitions (sorted, distinct, each below partition_count),
  // partition_count (0 exactly when there are no partitions), not both empty;
  // the strings as walcut reads them back (walfmt::UnescapeJsonStrings).
  auto subset_ok = [](const json& raw) {
    const json d = walfmt::UnescapeJsonStrings(raw);
    const auto it = d.find("subset");
    if (it == d.end() || !it->is_object()) return false;
    const auto p = it->find("key_prefixes"), q = it->find("partitions"), c = it->find("partition_count");
    if (p == it->end() || !p->is_array() || q == it->end() || !q->is_array() || c == it->end() ||
        !c->is_number_unsigned() || c->get<uint64_t>() > UINT32_MAX) {
      return false;
    }
    std::string last_prefix;
    for (size_t i = 0; i < p->size(); ++i) {
      const json& e = (*p)[i];
      if (!e.is_string() || e.get<std::string>().empty() || (i > 0 && !(last_prefix < e.get<std::string>())))
        return false;
      last_prefix = e.get<std::string>();
    }
    uint64_t last_partition = 0;
    for (size_t i = 0; i < q->size(); ++i) {
      const json& e = (*q)[i];
      if (!e.is_number_unsigned() || e.get<uint64_t>() >= c->get<uint64_t>() ||
          (i > 0 && e.get<uint64_t>() <= last_partition))
        return false;
      last_partition = e.get<uint64_t>();
    }
    return (q->empty() == (c->get<uint64_t>() == 0)) && !(p->empty() && q->empty());
  };
  auto schema_of = [&subset_ok](const json& d) {
    if (!d.is_object()) return false;
    const auto s = d.find("schema");
    const auto f = d.find("format");
    return (s != d.end() && s->is_string() && *s == "walcut.restore-manifest/2") ||
           (s != d.end() && s->is_string() && *s == "walcut.restore-manifest/3" && subset_ok(d)) ||
           (f != d.end() && f->is_string() && *f == "walcut-restore");
  };
  const auto cut_it = object ? m.find("cut") : m.end();
  const auto forced_it = object ? m.find("forced") : m.end();
  const bool is_restore = object && (schema_of(m) || (m.contains("restore") && schema_of(m["restore"]))) &&
                          cut_it != m.end() && cut_it->is_number_unsigned();
  if (!is_restore) {
    Check(!cut.has_value(), "a manifest that is not a restore's taken for cut " + std::to_string(cut.value_or(0)));
  } else if (forced_it == m.end() || *forced_it == false) {
    Check(cut == cut_it->get<uint64_t>(), "the cut of a restore manifest is not returned");
  } else if (*forced_it == true) {
    Check(!cut.has_value(), "a forced restore taken as a base");
  }
  // "forced" of another type: either answer, but no crash.

  auto ci = walcut::recovery::FindClusterInfoFor(g_dir);
  if (!ci.ok()) {
    const std::string& msg = ci.status().message();
    Check(msg.rfind(path, 0) == 0, "error does not name the manifest: " + msg);
    Check(msg.find('\n') == std::string::npos, "error spans lines: " + msg);
    Check(ci.status().code() == walfmt::ErrorCode::kCorruption, "error is not kCorruption: " + msg);
    return 0;
  }
  Check(object && m.contains("cluster") && m["cluster"].is_object(),
        "cluster info from a manifest without \"cluster\"");
  auto direct = walfmt::ParseClusterInfo(m["cluster"].dump(), "direct");
  Check(direct.ok(), "ParseClusterInfo refuses what FindClusterInfoFor accepted");
  Check(walfmt::ClusterJsonText(ci->info, {}) == walfmt::ClusterJsonText(*direct, {}),
        "FindClusterInfoFor and ParseClusterInfo read the cluster differently");
  return 0;
}
