// The repository operations on S3 (remote.h): each reads what it needs of the
// bucket into a private directory (the marker and manifests; the artifacts
// it checks or restores, whole) and runs the directory code there; create
// then uploads the artifact it built, manifest.json last, and expire deletes
// objects. Messages name s3:// locations, never the private directory.
#include <algorithm>
#include <filesystem>
#include <mutex>
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
#include "walfmt/text_escape.h"

namespace walcut::repo {
namespace fs = std::filesystem;
using walfmt::Result;
using walfmt::Status;

Result<RepoLocation> ParseRepoLocation(std::string_view arg) {
  RepoLocation loc;
  const size_t scheme_end = arg.find("://");
  if (scheme_end == std::string_view::npos) {
    loc.dir = std::string(arg);
    return loc;
  }
  const std::string_view scheme = arg.substr(0, scheme_end);
  if (scheme == "file") {
    loc.dir = std::string(arg.substr(scheme_end + 3));
    if (loc.dir.empty()) return Status::InvalidArgument(fmt::format("repository '{}': no path after file://", arg));
    return loc;
  }
  if (scheme == "s3") {
    auto u = ParseS3Url(arg);
    if (!u.ok()) return u.status();
    loc.s3 = true;
    loc.url = std::string(arg);
    return loc;
  }
  return Status::InvalidArgument(fmt::format(
      "repository '{}': unknown scheme '{}://' (a repository is a directory, file://PATH or s3://BUCKET/PREFIX)", arg,
      scheme));
}

namespace {

// A private directory under TMPDIR (or beside `beside`), removed when done and
// on a termination signal (walfmt/staging.h).
Result<std::unique_ptr<Staging>> PrivateDir(const std::string& beside = "") {
  std::string base = beside;
  if (base.empty()) {
    std::error_code ec;
    const fs::path tmp = fs::temp_directory_path(ec);
    if (ec) return Status::Io(fmt::format("no temporary directory: {}", ec.message()));
    base = (tmp / "walcut-s3").string();
  }
  auto s = std::make_unique<Staging>(walfmt::TempNameBeside(base));
  if (Status st = OpenStaging(*s); !st.ok()) return st;
  return s;
}

// The marker, and each artifact's manifest.json and cluster.json, into `dir`;
// decrypted with `key` when given (the marker then checked against it and
// mirrored as a plain repository's; a file failing authentication recorded
// in `failures` and left out).
Status MirrorManifests(const S3Repo& r, const S3RepoObjects& objs, const std::string& dir, const RepoKey* key,
                       DecryptFailures& failures) {
  auto marker = r.client->GetObject(r.url.bucket, r.Key(kMarkerFile));
  if (!marker.ok()) return marker.status();
  if (Status st = CheckMarkerKey(*marker, key, r.display); !st.ok()) return st;
  if (Status st = walfmt::WriteNewFile(walfmt::JoinPath(dir, kMarkerFile), key ? PlainMarkerText() : *marker,
                                       walfmt::Durability::kUnsynced);
      !st.ok())
    return st;
  std::vector<std::pair<std::string, std::string>> files;  // artifact, file
  for (const auto& [name, list] : objs.artifacts) {
    if (!objs.Complete(name)) continue;
    if (Status st = MakeDir(walfmt::JoinPath(dir, name)); !st.ok()) return st;
    files.emplace_back(name, kManifestFile);
    for (const auto& o : list) {
      if (o.key == "cluster.json") files.emplace_back(name, o.key);
    }
  }
  std::vector<std::string> forged(files.size());
  Status st = ParallelFor(files.size(), r.jobs, [&](size_t i) {
    const std::string rel = files[i].first + "/" + files[i].second;
    auto text = r.client->GetObject(r.url.bucket, r.Key(rel));
    if (!text.ok()) return text.status();
    if (key) {
      auto plain = DecryptBytes(*key, rel, *text, r.Where(rel));
      if (plain.status().code() == walfmt::ErrorCode::kCorruption) {
        forged[i] = plain.status().message();
        return Status::Ok();
      }
      if (!plain.ok()) return plain.status();
      text = std::move(plain);
    }
    return walfmt::WriteNewFile(walfmt::JoinPath(dir, rel), *text, walfmt::Durability::kUnsynced);
  });
  for (size_t i = 0; i < files.size(); ++i) {
    if (!forged[i].empty()) failures.files[files[i].first + "/" + files[i].second] = forged[i];
  }
  return st;
}

Status NotARepository(const S3Repo& r) {
  return Status::InvalidArgument(fmt::format("{}: not a walcut repository (no {})", r.display, kMarkerFile));
}

// The bucket's objects and a private mirror of its manifests.
struct Session {
  S3Repo r;
  S3RepoObjects objs;
  std::unique_ptr<Staging> mirror;
  std::unique_ptr<RepoLock> lock;
  std::set<std::string> whole;   // artifacts downloaded whole into the mirror
  const RepoKey* key = nullptr;  // an encrypted repository: what is downloaded is decrypted
  DecryptFailures failures;

  Status Rename(const Status& st) const { return Renamed(st, mirror->dir, r.display); }
  // Artifact `name` whole (instead of its manifest alone); decrypted (every
  // file authenticated) through mirror/.cipher when encrypted.
  Status Download(const std::string& name) {
    if (!whole.insert(name).second) return Status::Ok();
    std::error_code ec;
    fs::remove_all(walfmt::JoinPath(mirror->dir, name), ec);
    if (!key) return DownloadArtifact(r, objs, name, mirror->dir);
    const std::string cipher = walfmt::JoinPath(mirror->dir, ".cipher");
    if (!fs::is_directory(cipher, ec)) {
      if (Status st = MakeDir(cipher); !st.ok()) return st;
    }
    Status st = DownloadArtifact(r, objs, name, cipher);
    if (st.ok()) {
      st = DecryptTree(*key, name, walfmt::JoinPath(cipher, name), walfmt::JoinPath(mirror->dir, name), r.Where(name),
                       failures);
    }
    fs::remove_all(walfmt::JoinPath(cipher, name), ec);
    return st;
  }
  void RenameListing(RepoListing& l) const {
    l.dir = r.display;
    for (auto& a : l.artifacts) {
      a.dir = r.Where(a.name);
      a.status = Rename(a.status);
    }
    l.leftovers = objs.Leftovers();
    failures.ApplyTo(l);
  }
};

// Opens the repository, locks it when `lock_for` names the command, lists it
// and mirrors its manifests (beside `beside`, or under TMPDIR).
Result<Session> Begin(const std::string& url, const RemoteOptions& o, const std::string& lock_for,
                      const std::string& beside = "") {
  Session s;
  auto r = OpenS3Repo(url, o);
  if (!r.ok()) return r.status();
  s.r = std::move(r.value());
  s.key = o.key.get();
  // The key against the marker first: a wrong key or none takes no lock and
  // writes nothing.
  if (auto marker = s.r.client->GetObject(s.r.url.bucket, s.r.Key(kMarkerFile)); marker.ok()) {
    if (Status st = CheckMarkerKey(*marker, s.key, s.r.display); !st.ok()) return st;
  } else if (marker.status().code() != walfmt::ErrorCode::kNotFound) {
    return marker.status();
  }
  if (!lock_for.empty()) {
    auto lock = LockS3(s.r, o.break_lock, lock_for);
    if (!lock.ok()) return lock.status();
    s.lock = std::move(lock.value());
  }
  auto objs = ListS3Objects(s.r);
  if (!objs.ok()) return objs.status();
  s.objs = std::move(objs.value());
  auto dir = PrivateDir(beside);
  if (!dir.ok()) return dir.status();
  s.mirror = std::move(dir.value());
  if (!s.objs.has_marker) return s;
  if (Status st = MirrorManifests(s.r, s.objs, s.mirror->dir, s.key, s.failures); !st.ok()) return st;
  return s;
}

}  // namespace

Result<RepoListing> ListS3Repository(const std::string& url, const RemoteOptions& o) {
  auto s = Begin(url, o, "");
  if (!s.ok()) return s.status();
  if (!s->objs.has_marker) return NotARepository(s->r);
  auto l = ListRepository(s->mirror->dir);
  if (!l.ok()) return s->Rename(l.status());
  s->RenameListing(*l);
  l->pending_parts = PendingParts(s->objs.others);
  return l;
}

namespace {

// Creates the marker in an empty prefix (as InitRepository does a directory).
Status InitS3(Session& s) {
  if (s.objs.has_marker) return Status::Ok();
  if (!s.objs.artifacts.empty() || !s.objs.others.empty()) {
    return Status::InvalidArgument(
        fmt::format("{}: not a walcut repository (no {}) and not empty; refusing to use it", s.r.display, kMarkerFile));
  }
  auto put = s.r.client->PutObject(s.r.url.bucket, s.r.Key(kMarkerFile),
                                   s.key ? EncryptedMarkerText(*s.key) : PlainMarkerText(), S3PutMode::kCreateOnly);
  if (!put.ok()) return put.status();
  s.objs.has_marker = true;
  return MirrorManifests(s.r, s.objs, s.mirror->dir, s.key, s.failures);
}

// Objects of an artifact of the same name that are no artifact (a leftover,
// since a complete one was refused), removed once, before the first upload.
class LeftoverClearer {
 public:
  explicit LeftoverClearer(const Session& s) : s_(s) {}
  Status Clear(const std::string& name) {
    std::lock_guard lock(mu_);
    if (cleared_ || !s_.objs.artifacts.count(name)) return Status::Ok();
    Status st = DeleteArtifactObjects(s_.r, s_.objs, name);
    cleared_ = st.ok();
    return st;
  }

 private:
  const Session& s_;
  std::mutex mu_;
  bool cleared_ = false;
};

// The segments of an increment go up as they are stored (on the compressing
// threads, one thread a file), the rest after the build; manifest.json last.
struct EarlyUploads {
  std::mutex mu;
  std::set<std::string> done;  // paths in the artifact
};

}  // namespace

Result<CreateResult> CreateS3Artifact(const CreateRequest& req, const RemoteOptions& o) {
  auto s = Begin(req.repo, o, "snapshot create");
  if (!s.ok()) return s.status();
  if (Status st = InitS3(*s); !st.ok()) return st;
  if (req.full && req.cut) {
    // A synthetic full the repository may serve: the chains of cut K, whole.
    auto l = ListRepository(s->mirror->dir);
    if (!l.ok()) return s->Rename(l.status());
    if (Status st = FetchServingChains(*s, *l, *req.cut); !st.ok()) return st;
  }
  CreateRequest local = req;
  local.repo = s->mirror->dir;
  LeftoverClearer leftovers(*s);
  EarlyUploads early;
  if (!s->key) {  // an encrypted artifact is encrypted whole, then uploaded
    local.segment_stored = [&](const std::string& name, const std::string& rel, const std::string& staged) {
      if (Status st = leftovers.Clear(name); !st.ok()) return st;
      if (Status st = UploadFile(s->r, s->r.Key(name + "/" + rel), staged, 1); !st.ok()) return st;
      std::lock_guard lock(early.mu);
      early.done.insert(rel);
      return Status::Ok();
    };
  }
  auto r = CreateArtifact(local);
  if (!r.ok()) return s->Rename(r.status());
  if (Status st = leftovers.Clear(r->m.name); !st.ok()) return st;
  std::string from = r->dir;  // what is uploaded: the artifact, or its encrypted copy
  if (s->key) {
    from = walfmt::JoinPath(s->mirror->dir, ".cipher-" + r->m.name);
    if (Status st = MakeDir(from); !st.ok()) return s->Rename(st);
    if (Status st = EncryptTree(*s->key, r->m.name, r->dir, from, true); !st.ok()) return s->Rename(st);
  }
  auto put = UploadTree(s->r, r->m.name + "/", r->m, from, early.done);
  if (!put.ok()) return s->Rename(put.status());
  if (*put == S3PutOutcome::kAlreadyExists) {
    return Status::InvalidArgument(fmt::format("{}: an artifact of that name already exists", s->r.Where(r->m.name)));
  }
  r->dir = s->r.Where(r->m.name);
  return r;
}

Result<ExpireResult> ExpireS3(const std::string& url, uint64_t keep_full, bool dry_run, const RemoteOptions& o) {
  if (keep_full == 0) return Status::InvalidArgument("--keep-full must be at least 1");
  auto s = Begin(url, o, dry_run ? "" : "snapshot expire");
  if (!s.ok()) return s.status();
  if (!s->objs.has_marker) return NotARepository(s->r);
  auto r = Expire(s->mirror->dir, keep_full, true);  // the plan, from the manifests
  if (!r.ok()) return s->Rename(r.status());
  for (const auto& name : r->removed) {
    if (dry_run) continue;
    if (Status st = DeleteArtifactObjects(s->r, s->objs, name); !st.ok()) return st;
  }
  for (const auto& left : s->objs.Leftovers()) {
    r->leftovers_removed.push_back(left);
    if (dry_run) continue;
    // "<name>/": no manifest, every object goes; "<name>/<path>": an open
    // upload under a whole artifact, which stays.
    Status st = left.back() == '/' ? DeleteArtifactObjects(s->r, s->objs, left.substr(0, left.size() - 1))
                                   : AbortUploadsOf(s->r, s->objs, left);
    if (!st.ok()) return st;
  }
  return r;
}

void RenameReport(RepoCheckReport& rep, const std::string& from, const std::string& to) {
  const auto fix = [&](std::string& x) { x = ReplaceAll(std::move(x), from, to); };
  fix(rep.dir);
  for (auto& n : rep.notes) fix(n);
  for (auto& e : rep.errors) fix(e);
  for (auto& it : rep.items) {
    fix(it.note);
    for (auto& f : it.findings) {
      fix(f.message);
      fix(f.expected);
      fix(f.found);
      fix(f.file);
    }
  }
}

Status FixRestoredRepositoryDir(const std::string& out, const std::string& from, const std::string& to) {
  // OUT's manifest names the repository it came from ("repository.dir"): the
  // repository, not the private directory that is about to go.
  const std::string path = walfmt::JoinPath(out, kManifestFile);
  auto text = walfmt::ReadWholeFile(path, kMaxManifestBytes);
  if (text.status().code() == walfmt::ErrorCode::kNotFound) return Status::Ok();  // a full alone: its files copied
  if (!text.ok()) return text.status();
  const std::string fixed = ReplaceAll(*text, nlohmann::json(from).dump(), nlohmann::json(to).dump());
  if (fixed == *text) return Status::Ok();
  return walfmt::WriteFileAtomic(path, fixed);
}

Result<RepoCheckReport> CheckS3Repository(const RepoCheckOptions& opts, const RemoteOptions& o) {
  auto s = Begin(opts.repo, o, "");
  if (!s.ok()) return s.status();
  if (!s->objs.has_marker) return NotARepository(s->r);
  auto l = ListRepository(s->mirror->dir);
  if (!l.ok()) return s->Rename(l.status());
  std::vector<std::string> names;
  if (opts.name.empty()) {
    for (const auto& a : l->artifacts) names.push_back(a.name);
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
  RenameReport(*rep, s->mirror->dir, s->r.display);
  s->failures.ApplyTo(*rep);
  std::vector<std::string> notes;
  for (const auto& left : s->objs.Leftovers()) {
    notes.push_back(fmt::format("{}: left by a create or expire that did not finish; not an artifact (ignored)", left));
  }
  rep->notes.insert(rep->notes.begin(), notes.begin(), notes.end());
  return rep;
}

Result<RepoRestoreResult> RestoreFromS3(const RepoRestoreRequest& req, const RemoteOptions& o) {
  if (!req.dry_run && req.out.empty()) return Status::InvalidArgument("--out OUT is required (or --dry-run)");
  std::error_code ec;
  if (!req.dry_run && fs::exists(fs::symlink_status(req.out, ec))) {
    return Status::InvalidArgument(fmt::format("{}: already exists; refusing to overwrite", req.out));
  }
  std::string beside;
  if (!req.dry_run) beside = fs::absolute(req.out, ec).string() + ".s3";
  auto s = Begin(req.repo, o, "", beside);
  if (!s.ok()) return s.status();
  if (!s->objs.has_marker) return NotARepository(s->r);
  auto l = ListRepository(s->mirror->dir);
  if (!l.ok()) return s->Rename(l.status());
  return RestoreThroughMirror(*s, *l, req);
}

}  // namespace walcut::repo
