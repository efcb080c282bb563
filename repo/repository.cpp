// The repository itself (repo/REPOSITORY.md, "Layout"): its marker, the
// listing of its artifacts and their chains. The other pieces: the manifest
// codec (manifest.cpp), create (create.cpp, segment_store.cpp,
// artifact_io.cpp), the chain restore (chain_restore.cpp), expire
// (expire.cpp) and check (check.cpp).
#include "repo/repository.h"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "repo/crypt.h"
#include "repo/manifest.h"
#include "repo/parts.h"
#include "walfmt/cluster_layout.h"
#include "walfmt/file_io.h"
#include "walfmt/json_fields.h"
#include "walfmt/strings.h"
#include "walfmt/text_escape.h"

namespace walcut::repo {
namespace fs = std::filesystem;
using nlohmann::json;
using walfmt::Result;
using walfmt::Status;

bool IsRepository(const std::string& dir) {
  std::error_code ec;
  return fs::is_regular_file(walfmt::JoinPath(dir, kMarkerFile), ec);
}

namespace {

// The marker of an existing repository: "schema" (this walcut's), or
// "format" and "version" 1 (older walcut); each writer omits the others.
Status CheckMarker(const std::string& dir) {
  const std::string path = walfmt::JoinPath(dir, kMarkerFile);
  auto text = ReadSmall(path);
  if (!text.ok()) return text.status();
  json j = walfmt::UnescapeJsonStrings(json::parse(*text, nullptr, false));
  if (!j.is_object()) return Status::Corruption(fmt::format("{}/{}: not a walcut repository marker", dir, kMarkerFile));
  walfmt::JsonFields f(path);
  const std::string schema = f.OptionalString(j, "schema", "").value_or("");
  const bool v1 = f.OptionalString(j, "format", "") == std::optional<std::string>(kRepoFormatV1);
  if (!f.ok()) return f.status();
  if (schema == kRepoSchemaEncrypted) {
    return Status::InvalidArgument(fmt::format(
        "{}: the repository is encrypted ({}); give its key with --encrypt-key-file FILE", dir, kCipherName));
  }
  if (schema != kRepoSchema && !v1) {
    if (schema.rfind("walcut.repository/", 0) == 0) {
      return Status::InvalidArgument(
          fmt::format("{}: repository schema {}, this walcut knows {}", dir, schema, kRepoSchema));
    }
    return Status::Corruption(fmt::format("{}/{}: not a walcut repository marker", dir, kMarkerFile));
  }
  if (v1) {
    const uint64_t version = f.U64(j, "version", "");
    if (!f.ok()) return f.status();
    if (version != 1) {
      return Status::InvalidArgument(
          fmt::format("{}: repository version {}, this walcut knows 1 and {}", dir, version, kRepoSchema));
    }
  }
  return Status::Ok();
}

}  // namespace

bool IsEncryptedRepository(const std::string& dir) {
  if (!IsRepository(dir)) return false;
  auto text = ReadSmall(walfmt::JoinPath(dir, kMarkerFile));
  return text.ok() && MarkerIsEncrypted(*text);
}

Status InitRepository(const std::string& dir) {
  if (IsRepository(dir)) return CheckMarker(dir);
  return InitRepository(dir, PlainMarkerText());
}

Status InitRepository(const std::string& dir, const std::string& marker_text) {
  std::error_code ec;
  if (IsRepository(dir)) return Status::Ok();
  if (fs::exists(dir, ec)) {
    if (!fs::is_directory(dir, ec)) return Status::InvalidArgument(fmt::format("{}: not a directory", dir));
    // Empty, or holding only what a killed InitRepository left (a temporary marker).
    bool empty = true;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      if (e.path().filename().string().rfind(walfmt::TempPrefixFor(kMarkerFile), 0) != 0) empty = false;
    }
    if (!empty || ec) {
      return Status::InvalidArgument(
          fmt::format("{}: not a walcut repository (no {}) and not empty; refusing to use it", dir, kMarkerFile));
    }
  } else {
    fs::create_directories(dir, ec);
    if (ec) return Status::Io(fmt::format("{}: cannot create: {}", dir, ec.message()));
  }
  return walfmt::WriteFileAtomic(walfmt::JoinPath(dir, kMarkerFile), marker_text);
}

const Artifact* RepoListing::Find(std::string_view name) const {
  for (const auto& a : artifacts) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

Result<RepoListing> ListRepository(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return Status::NotFound(fmt::format("{}: no such directory", dir));
  if (!IsRepository(dir))
    return Status::InvalidArgument(fmt::format("{}: not a walcut repository (no {})", dir, kMarkerFile));
  if (Status st = InitRepository(dir); !st.ok()) return st;
  RepoListing l;
  l.dir = dir;
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name == kMarkerFile) continue;
    if (name[0] == '.') {
      if (name.find(".tmp-") != std::string::npos || name.find(".expire-") != std::string::npos)
        l.leftovers.push_back(name);
      continue;
    }
    if (e.is_directory(ec)) names.push_back(name);
  }
  if (ec) return Status::Io(fmt::format("{}: cannot list: {}", dir, ec.message()));
  std::sort(names.begin(), names.end());
  std::sort(l.leftovers.begin(), l.leftovers.end());
  l.pending_parts = PendingParts(PartFiles(dir));
  for (const auto& name : names) {
    Artifact a;
    a.name = name;
    a.dir = walfmt::JoinPath(dir, name);
    const std::string mpath = walfmt::JoinPath(a.dir, kManifestFile);
    auto text = ReadSmall(mpath);
    if (!text.ok()) {
      a.status = text.status().code() == walfmt::ErrorCode::kNotFound
                     ? Status::Corruption(fmt::format("{}: no manifest.json", a.dir))
                     : text.status();
    } else {
      auto m = DecodeManifest(*text, mpath);
      if (!m.ok()) {
        a.status = m.status();
      } else if (m->name != name) {
        a.status =
            Status::Corruption(fmt::format("{}: names artifact '{}', its directory is '{}'", mpath, m->name, name));
      } else {
        a.m = std::move(m.value());
        if (std::any_of(a.m.files.begin(), a.m.files.end(),
                        [](const ArtifactFile& f) { return f.path == "cluster.json"; })) {
          if (auto ci = walfmt::LoadClusterInfo(a.dir); ci.ok()) a.epoch_unix_us = ci->epoch_unix_us;
        }
      }
    }
    l.artifacts.push_back(std::move(a));
  }
  std::stable_sort(l.artifacts.begin(), l.artifacts.end(), [](const Artifact& a, const Artifact& b) {
    if (a.status.ok() != b.status.ok()) return a.status.ok();
    return a.m.seq < b.m.seq;
  });
  return l;
}

Result<std::vector<const Artifact*>> ChainOf(const RepoListing& l, std::string_view name) {
  std::vector<const Artifact*> chain;
  const Artifact* a = l.Find(name);
  if (!a) return Status::NotFound(fmt::format("no artifact {}", name));
  while (true) {
    if (!a->status.ok())
      return Status::Corruption(fmt::format("artifact {} is unreadable: {}", a->name, a->status.message()));
    chain.push_back(a);
    if (chain.size() > l.artifacts.size()) return Status::Corruption(fmt::format("the chain of {} loops", name));
    if (a->m.full()) break;
    const Artifact* p = l.Find(a->m.parent);
    if (!p) {
      return Status::Corruption(
          fmt::format("artifact {} needs its parent {}, which is missing from the repository", a->name, a->m.parent));
    }
    if (p->status.ok()) {
      if (p->m.cluster_id != a->m.cluster_id) {
        return Status::Corruption(fmt::format("artifact {} (cluster {:016x}) has parent {} of another cluster {:016x}",
                                              a->name, a->m.cluster_id, p->name, p->m.cluster_id));
      }
      if (p->m.cut && a->m.cut && *p->m.cut >= *a->m.cut) {
        return Status::Corruption(fmt::format("artifact {} (cut {}) has parent {} of cut {}: not before it", a->name,
                                              *a->m.cut, p->name, *p->m.cut));
      }
    }
    a = p;
  }
  std::reverse(chain.begin(), chain.end());
  return chain;
}

std::vector<RestoreTarget> RestoreTargets(const RepoListing& l) {
  std::vector<RestoreTarget> out;
  for (const auto& a : l.artifacts) {
    if (!a.status.ok()) continue;
    auto chain = ChainOf(l, a.name);
    if (!chain.ok()) continue;
    RestoreTarget t;
    t.artifact = a.name;
    t.cut = a.m.cut;
    t.snapshot = a.m.snapshot;
    t.time_us = a.m.time_us;
    t.cluster_id = a.m.cluster_id;
    for (const auto* c : *chain) t.chain.push_back(c->name);
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace walcut::repo
