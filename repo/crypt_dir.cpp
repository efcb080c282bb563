// An encrypted repository in a directory (REPOSITORY.md, "Encryption"), and
// the choice of the code for a location (remote.h): each command decrypts
// what it needs (the manifests and cluster.json files; the artifacts it checks
// or restores, whole, every file authenticated) into a private directory,
// runs the directory code there, and create encrypts the artifact it built
// into a staging directory of the repository renamed into place. As the S3
// code does with downloads (s3_repository.cpp); messages name the repository,
// never the private directory.
#include <unistd.h>

#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "repo/artifact_io.h"
#include "repo/crypt.h"
#include "repo/manifest.h"
#include "repo/mirror_restore.h"
#include "repo/parts.h"
#include "repo/remote.h"
#include "repo/s3_store.h"
#include "walfmt/file_io.h"
#include "walfmt/strings.h"

namespace walcut::repo {
namespace fs = std::filesystem;
using walfmt::Result;
using walfmt::Status;

Result<std::unique_ptr<Staging>> PrivateDirFor(const std::string& beside, const std::string& tmp_name) {
  std::string base = beside;
  if (base.empty()) {
    std::error_code ec;
    const fs::path tmp = fs::temp_directory_path(ec);
    if (ec) return Status::Io(fmt::format("no temporary directory: {}", ec.message()));
    base = (tmp / tmp_name).string();
  }
  auto s = std::make_unique<Staging>(walfmt::TempNameBeside(base));
  if (Status st = OpenStaging(*s); !st.ok()) return st;
  std::error_code ec;
  fs::permissions(s->dir, fs::perms::owner_all, fs::perm_options::replace, ec);  // plaintext inside: ours alone
  if (ec) return Status::Io(fmt::format("{}: cannot make it private: {}", s->dir, ec.message()));
  return s;
}

namespace {

struct DirSession {
  std::string repo;
  const RepoKey* key = nullptr;
  std::unique_ptr<Staging> mirror;
  std::unique_ptr<RepoLock> lock;
  std::vector<std::string> names;  // artifact directories, with or without a manifest
  DecryptFailures failures;
  std::set<std::string> whole;

  Status Rename(const Status& st) const { return Renamed(st, mirror->dir, repo); }
  Status Download(const std::string& name) {
    if (!whole.insert(name).second) return Status::Ok();
    std::error_code ec;
    fs::remove_all(walfmt::JoinPath(mirror->dir, name), ec);
    return DecryptTree(*key, name, walfmt::JoinPath(repo, name), walfmt::JoinPath(mirror->dir, name),
                       walfmt::JoinPath(repo, name), failures);
  }
  // The listing of the mirror as the repository's.
  Result<RepoListing> List() const {
    auto l = ListRepository(mirror->dir);
    if (!l.ok()) return Rename(l.status());
    l->dir = repo;
    for (auto& a : l->artifacts) {
      a.dir = walfmt::JoinPath(repo, a.name);
      a.status = Rename(a.status);
    }
    failures.ApplyTo(*l);
    l->pending_parts = PendingParts(PartFiles(repo));  // their names are not encrypted
    return l;
  }
};

// The marker of `repo` checked against the key (created, encrypted, when
// `create` and REPO is absent or empty).
Status OpenMarker(const std::string& repo, const RepoKey& key, bool create) {
  if (!IsRepository(repo)) {
    std::error_code ec;
    if (!create) {
      if (!fs::is_directory(repo, ec)) return Status::NotFound(fmt::format("{}: no such directory", repo));
      return Status::InvalidArgument(fmt::format("{}: not a walcut repository (no {})", repo, kMarkerFile));
    }
    return InitRepository(repo, EncryptedMarkerText(key));
  }
  auto text = ReadSmall(walfmt::JoinPath(repo, kMarkerFile));
  if (!text.ok()) return text.status();
  return CheckMarkerKey(*text, &key, repo);
}

// Each artifact's manifest.json and cluster.json decrypted into the mirror;
// the leftovers of killed writers as empty directories of the same names.
Status MirrorDir(DirSession& s) {
  std::error_code ec;
  std::vector<std::string> leftovers;
  for (const auto& e : fs::directory_iterator(s.repo, ec)) {
    const std::string name = e.path().filename().string();
    if (name == kMarkerFile || !e.is_directory(ec)) continue;
    if (name[0] != '.') {
      s.names.push_back(name);
    } else if (name.find(".tmp-") != std::string::npos || name.find(".expire-") != std::string::npos) {
      leftovers.push_back(name);
    }
  }
  if (ec) return Status::Io(fmt::format("{}: cannot list: {}", s.repo, ec.message()));
  if (Status st = walfmt::WriteNewFile(walfmt::JoinPath(s.mirror->dir, kMarkerFile), PlainMarkerText(),
                                       walfmt::Durability::kUnsynced);
      !st.ok())
    return st;
  for (const auto& left : leftovers) {
    if (Status st = MakeDir(walfmt::JoinPath(s.mirror->dir, left)); !st.ok()) return st;
  }
  for (const auto& name : s.names) {
    if (Status st = MakeDir(walfmt::JoinPath(s.mirror->dir, name)); !st.ok()) return st;
    for (const char* rel : {kManifestFile, "cluster.json"}) {
      const std::string from = walfmt::JoinPath(s.repo, name + "/" + rel);
      if (!fs::exists(from, ec)) continue;
      const std::string id = name + "/" + rel;
      Status st = DecryptFile(*s.key, id, from, walfmt::JoinPath(s.mirror->dir, id), walfmt::Durability::kUnsynced);
      if (st.code() == walfmt::ErrorCode::kCorruption) {
        s.failures.files[id] = st.message();
      } else if (!st.ok()) {
        return st;
      }
    }
  }
  return Status::Ok();
}

// Opens the encrypted repository: the key checked first (nothing is written
// on a wrong key), the lock taken when `lock_for`, the manifests mirrored
// beside `beside` (or under TMPDIR).
Result<DirSession> Begin(const std::string& repo, const RepoKey& key, bool lock, bool create,
                         const std::string& beside = "") {
  DirSession s;
  s.repo = repo;
  s.key = &key;
  if (Status st = OpenMarker(repo, key, create); !st.ok()) return st;
  if (lock) {
    auto l = LockDirectory(repo);
    if (!l.ok()) return l.status();
    s.lock = std::move(l.value());
  }
  auto dir = PrivateDirFor(beside, "walcut-crypt");
  if (!dir.ok()) return dir.status();
  s.mirror = std::move(dir.value());
  if (Status st = MirrorDir(s); !st.ok()) return st;
  return s;
}

Result<RepoListing> ListEncryptedDir(const std::string& repo, const RepoKey& key) {
  auto s = Begin(repo, key, false, false);
  if (!s.ok()) return s.status();
  return s->List();
}

// The artifact built in the mirror, encrypted into a staging directory of the
// repository and renamed into place (REPOSITORY.md, "Atomicity").
Status PublishEncrypted(const DirSession& s, const CreateResult& r) {
  const std::string target = walfmt::JoinPath(s.repo, r.m.name);
  Status st = PublishEncryptedTree(*s.key, r.m.name, r.dir, target);
  if (st.code() == walfmt::ErrorCode::kInvalidArgument) {
    return Status::InvalidArgument(fmt::format("{}: an artifact of that name already exists", target));
  }
  return st;
}

Result<CreateResult> CreateEncryptedDir(const CreateRequest& req, const RepoKey& key) {
  auto s = Begin(req.repo, key, true, true);
  if (!s.ok()) return s.status();
  if (req.full && req.cut) {  // a synthetic full the repository may serve: the chains of cut K, whole
    auto l = s->List();
    if (!l.ok()) return l.status();
    if (Status st = FetchServingChains(*s, *l, *req.cut); !st.ok()) return st;
  }
  CreateRequest local = req;
  local.repo = s->mirror->dir;
  auto r = CreateArtifact(local);
  if (!r.ok()) return s->Rename(r.status());
  if (Status st = PublishEncrypted(*s, *r); !st.ok()) return s->Rename(st);
  r->dir = walfmt::JoinPath(req.repo, r->m.name);
  return r;
}

Result<ExpireResult> ExpireEncryptedDir(const std::string& repo, uint64_t keep_full, bool dry_run, const RepoKey& key) {
  if (keep_full == 0) return Status::InvalidArgument("--keep-full must be at least 1");
  auto s = Begin(repo, key, !dry_run, false);
  if (!s.ok()) return s.status();
  auto r = Expire(s->mirror->dir, keep_full, true);  // the plan, from the manifests
  if (!r.ok()) return s->Rename(r.status());
  if (dry_run) return r;
  for (const auto& name : r->removed) {  // as Expire removes an artifact: renamed first, leaves first
    const std::string tmp = walfmt::JoinPath(repo, fmt::format(".{}.expire-{}", name, ::getpid()));
    if (Status st = walfmt::RenameDurable(walfmt::JoinPath(repo, name), tmp); !st.ok()) return st;
    std::error_code ec;
    fs::remove_all(tmp, ec);
    if (ec) return Status::Io(fmt::format("{}: cannot remove: {}", tmp, ec.message()));
  }
  for (const auto& left : r->leftovers_removed) {
    std::error_code ec;
    fs::remove_all(walfmt::JoinPath(repo, left), ec);
  }
  if (Status st = walfmt::SyncDir(repo); !st.ok()) return st;
  return r;
}

Result<RepoCheckReport> CheckEncryptedDir(const RepoCheckOptions& opts, const RepoKey& key) {
  auto s = Begin(opts.repo, key, false, false);
  if (!s.ok()) return s.status();
  auto l = ListRepository(s->mirror->dir);
  if (!l.ok()) return s->Rename(l.status());
  std::vector<std::string> names;
  if (opts.name.empty()) {
    names = s->names;
  } else if (auto chain = ChainOf(*l, opts.name); chain.ok()) {
    for (const auto* c : *chain) names.push_back(c->name);
  } else if (l->Find(opts.name)) {
    names.push_back(opts.name);
  }
  for (const auto& n : names) {
    if (Status st = s->Download(n); !st.ok()) return s->Rename(st);
  }
  RepoCheckOptions local = opts;
  local.repo = s->mirror->dir;
  auto rep = CheckRepository(local);
  if (!rep.ok()) return s->Rename(rep.status());
  RenameReport(*rep, s->mirror->dir, opts.repo);
  s->failures.ApplyTo(*rep);
  return rep;
}

Result<RepoRestoreResult> RestoreEncryptedDir(const RepoRestoreRequest& req, const RepoKey& key) {
  if (!req.dry_run && req.out.empty()) return Status::InvalidArgument("--out OUT is required (or --dry-run)");
  std::error_code ec;
  if (!req.dry_run && fs::exists(fs::symlink_status(req.out, ec))) {
    return Status::InvalidArgument(fmt::format("{}: already exists; refusing to overwrite", req.out));
  }
  std::string beside;
  if (!req.dry_run) beside = fs::absolute(req.out, ec).string() + ".crypt";
  auto s = Begin(req.repo, key, false, false, beside);
  if (!s.ok()) return s.status();
  auto l = s->List();
  if (!l.ok()) return l.status();
  return RestoreThroughMirror(*s, *l, req);
}

}  // namespace

Result<std::shared_ptr<const RepoKey>> LoadRepoKey(const std::string& path) {
  auto k = LoadKeyFile(path);
  if (!k.ok()) return k.status();
  return std::make_shared<const RepoKey>(*k);
}

Result<RepoListing> ListAt(const RepoLocation& loc, const RemoteOptions& o) {
  if (loc.s3) return ListS3Repository(loc.url, o);
  if (o.key) return ListEncryptedDir(loc.dir, *o.key);
  return ListRepository(loc.dir);
}

Result<CreateResult> CreateAt(const RepoLocation& loc, const CreateRequest& req, const RemoteOptions& o) {
  if (loc.s3) return CreateS3Artifact(req, o);
  if (o.key) return CreateEncryptedDir(req, *o.key);
  return CreateArtifact(req);
}

Result<ExpireResult> ExpireAt(const RepoLocation& loc, uint64_t keep_full, bool dry_run, const RemoteOptions& o) {
  if (loc.s3) return ExpireS3(loc.url, keep_full, dry_run, o);
  if (o.key) return ExpireEncryptedDir(loc.dir, keep_full, dry_run, *o.key);
  return Expire(loc.dir, keep_full, dry_run);
}

Result<RepoCheckReport> CheckAt(const RepoLocation& loc, const RepoCheckOptions& opts, const RemoteOptions& o) {
  if (loc.s3) return CheckS3Repository(opts, o);
  if (o.key) return CheckEncryptedDir(opts, *o.key);
  return CheckRepository(opts);
}

Result<RepoRestoreResult> RestoreAt(const RepoLocation& loc, const RepoRestoreRequest& req, const RemoteOptions& o) {
  if (loc.s3) return RestoreFromS3(req, o);
  if (o.key) return RestoreEncryptedDir(req, *o.key);
  return RestoreFromRepository(req);
}

Status CheckKeyAt(const RepoLocation& loc, const RemoteOptions& o) {
  std::string text;
  if (loc.s3) {
    auto r = OpenS3Repo(loc.url, o);
    if (!r.ok()) return r.status();
    auto marker = r->client->GetObject(r->url.bucket, r->Key(kMarkerFile));
    if (marker.status().code() == walfmt::ErrorCode::kNotFound) return Status::Ok();
    if (!marker.ok()) return marker.status();
    return CheckMarkerKey(*marker, o.key.get(), r->display);
  }
  if (!IsRepository(loc.dir)) return Status::Ok();  // a create makes it; the others say what it is not
  auto t = ReadSmall(walfmt::JoinPath(loc.dir, kMarkerFile));
  if (!t.ok()) return t.status();
  return CheckMarkerKey(*t, o.key.get(), loc.dir);
}

}  // namespace walcut::repo
