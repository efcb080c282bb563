// Whole artifacts encrypted and decrypted file by file, and what a decryption
// that failed authentication means to list, check and restore (repo/crypt.h).
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <vector>

#include <fmt/format.h>

#include "repo/artifact_io.h"
#include "repo/crypt.h"
#include "repo/repository.h"
#include "walfmt/file_io.h"
#include "walfmt/staging.h"
#include "walfmt/strings.h"

namespace walcut::repo {
namespace fs = std::filesystem;
using walfmt::Status;

namespace {

// "NAME/REL" split at the first '/'.
std::pair<std::string, std::string> SplitIdentity(const std::string& id) {
  const size_t at = id.find('/');
  return {id.substr(0, at), at == std::string::npos ? std::string() : id.substr(at + 1)};
}

// The relative paths of every file and directory under `dir`, sorted (a
// directory before what it holds).
Status Walk(const std::string& dir, std::vector<std::string>& dirs, std::vector<std::string>& files) {
  std::error_code ec;
  for (auto e = fs::recursive_directory_iterator(dir, ec); !ec && e != fs::recursive_directory_iterator();
       e.increment(ec)) {
    const std::string rel = fs::relative(e->path(), dir, ec).string();
    if (e->is_symlink(ec) || (!e->is_directory(ec) && !e->is_regular_file(ec))) {
      return Status::Corruption(fmt::format("{}: not a regular file or directory", e->path().string()));
    }
    (e->is_directory(ec) ? dirs : files).push_back(rel);
  }
  if (ec) return Status::Io(fmt::format("{}: cannot list: {}", dir, ec.message()));
  std::sort(dirs.begin(), dirs.end());
  std::sort(files.begin(), files.end());
  return Status::Ok();
}

Status MakePrivateDir(const std::string& d) {
  if (Status st = MakeDir(d); !st.ok()) return st;
  ::chmod(d.c_str(), 0700);
  return Status::Ok();
}

RepoFinding AuthFinding(const std::string& name, const std::string& message) {
  RepoFinding f;
  f.check = "authentication";
  f.artifact = name;
  f.message = message;
  return f;
}

}  // namespace

void DecryptFailures::ApplyTo(RepoListing& l) const {
  for (const auto& [id, message] : files) {
    const auto [name, rel] = SplitIdentity(id);
    if (rel != kManifestFile) continue;
    for (auto& a : l.artifacts) {
      if (a.name == name) a.status = Status::Corruption(message);
    }
  }
  std::stable_sort(l.artifacts.begin(), l.artifacts.end(), [](const Artifact& a, const Artifact& b) {
    if (a.status.ok() != b.status.ok()) return a.status.ok();
    return a.status.ok() ? a.m.seq < b.m.seq : a.name < b.name;
  });
}

void DecryptFailures::ApplyTo(RepoCheckReport& r) const {
  for (const auto& [id, message] : files) {
    const auto [name, rel] = SplitIdentity(id);
    const std::string item = rel == kManifestFile ? std::string("manifest") : "file " + rel;
    for (auto& it : r.items) {
      if (it.level != "files" || it.group != name || it.name != item) continue;
      it.failed = true;
      it.findings.assign(1, AuthFinding(name, message));
    }
  }
}

Status DecryptFailures::FirstOf(const std::vector<std::string>& names) const {
  for (const auto& [id, message] : files) {
    if (std::find(names.begin(), names.end(), SplitIdentity(id).first) != names.end()) {
      return Status::Corruption(message);
    }
  }
  return Status::Ok();
}

Status DecryptTree(const RepoKey& key, const std::string& name, const std::string& from, const std::string& to,
                   const std::string& shown, DecryptFailures& failures) {
  std::vector<std::string> dirs, files;
  if (Status st = Walk(from, dirs, files); !st.ok()) return st;
  if (Status st = MakePrivateDir(to); !st.ok()) return st;
  for (const auto& d : dirs) {
    if (Status st = MakePrivateDir(walfmt::JoinPath(to, d)); !st.ok()) return st;
  }
  for (const auto& rel : files) {
    const std::string out = walfmt::JoinPath(to, rel);
    Status st = DecryptFile(key, name + "/" + rel, walfmt::JoinPath(from, rel), out, walfmt::Durability::kUnsynced,
                            walfmt::JoinPath(shown, rel));
    if (st.code() == walfmt::ErrorCode::kCorruption) {
      failures.files[name + "/" + rel] = st.message();
      st = walfmt::WriteNewFile(out, "", walfmt::Durability::kUnsynced);  // what check sees: a file that fails
    }
    if (!st.ok()) return st;
  }
  return Status::Ok();
}

Status EncryptTree(const RepoKey& key, const std::string& name, const std::string& from, const std::string& to,
                   bool with_manifest) {
  std::vector<std::string> dirs, files;
  if (Status st = Walk(from, dirs, files); !st.ok()) return st;
  for (const auto& d : dirs) {
    if (Status st = MakeDir(walfmt::JoinPath(to, d)); !st.ok()) return st;
  }
  for (const auto& rel : files) {
    if (rel == kManifestFile) continue;
    if (Status st = EncryptFile(key, name + "/" + rel, walfmt::JoinPath(from, rel), walfmt::JoinPath(to, rel));
        !st.ok())
      return st;
  }
  for (auto d = dirs.rbegin(); d != dirs.rend(); ++d) {
    if (Status st = walfmt::SyncDir(walfmt::JoinPath(to, *d)); !st.ok()) return st;
  }
  if (with_manifest) {
    auto text = walfmt::ReadWholeFile(walfmt::JoinPath(from, kManifestFile), walfmt::kMaxJsonFileBytes);
    if (!text.ok()) return text.status();
    const std::string sealed = EncryptBytes(key, name + "/" + kManifestFile, *text);
    if (Status st = walfmt::WriteNewFile(walfmt::JoinPath(to, kManifestFile), sealed); !st.ok()) return st;
  }
  return walfmt::SyncDir(to);
}

Status PublishEncryptedTree(const RepoKey& key, const std::string& name, const std::string& from,
                            const std::string& target) {
  Staging st{walfmt::TempNameBeside(target)};
  if (Status x = OpenStaging(st); !x.ok()) return x;
  if (Status x = EncryptTree(key, name, from, st.dir, true); !x.ok()) return x;
  std::error_code ec;
  if (fs::exists(target, ec)) return Status::InvalidArgument(fmt::format("{}: already exists", target));
  if (Status x = walfmt::CommitStaging(st.dir, target); !x.ok()) return x;
  st.keep = true;
  return Status::Ok();
}

}  // namespace walcut::repo
