// The increments made of parts on S3 (parts.h): a part is built in a private
// directory under TMPDIR as for a directory and uploaded under
// PREFIX/.parts/<artifact>/<part>/ with its manifest.json last (create-only);
// assembling (under the lock) downloads the artifact's parts, assembles them
// in a private directory and uploads the artifact, manifest.json last. In an
// encrypted repository what is uploaded is encrypted first, what is
// downloaded authenticated and decrypted (parts_crypt.cpp).
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "recovery/part_node_dir.h"
#include "repo/artifact_io.h"
#include "repo/crypt.h"
#include "repo/manifest.h"
#include "repo/parts_internal.h"
#include "repo/s3_store.h"
#include "walfmt/file_io.h"
#include "walfmt/strings.h"

namespace walcut::repo {
namespace fs = std::filesystem;
using walfmt::Result;
using walfmt::Status;

namespace {

// A private directory (mode 0700) under TMPDIR, removed when done (walfmt/staging.h).
Result<std::unique_ptr<Staging>> PrivateRoot() { return PrivateDirFor("", "walcut-s3"); }

// The tree `dir` (the artifact or part whose files have the identity
// `identity`/REL) as it is uploaded: itself, or encrypted into
// ROOT/.sealed-<its name> when `key` is given.
Result<std::string> Sealed(const RepoKey* key, const std::string& identity, const std::string& dir,
                           const std::string& root) {
  if (!key) return dir;
  const std::string to = walfmt::JoinPath(root, fmt::format(".sealed-{}", fs::path(dir).filename().string()));
  if (Status st = MakeDir(to); !st.ok()) return st;
  if (Status st = EncryptTree(*key, identity, dir, to, true); !st.ok()) return st;
  return to;
}

// The files of `m` (built in `dir`) as objects under PREFIX/<rel_dir>,
// manifest.json last with a create-only PUT.
Status UploadPartTree(const S3Repo& r, const std::string& rel_dir, const Manifest& m, const std::string& dir) {
  auto put = UploadTree(r, rel_dir, m, dir);
  if (!put.ok()) return put.status();
  if (*put == S3PutOutcome::kAlreadyExists) {
    return Status::InvalidArgument(fmt::format("{}: already exists", r.Where(rel_dir + kManifestFile)));
  }
  return Status::Ok();
}

// The keys (relative to PREFIX) under PREFIX/.parts/<artifact>/.
Result<std::vector<S3ObjectInfo>> PartObjects(const S3Repo& r, const std::string& artifact) {
  auto l = r.client->ListObjects(r.url.bucket, r.Key(fmt::format("{}/{}/", kPartsDir, artifact)));
  if (!l.ok()) return l.status();
  std::vector<S3ObjectInfo> out;
  for (auto o : l->objects) {
    o.key = o.key.substr(r.url.prefix.size());
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace

Result<IncrementPartResult> CreateS3Part(const IncrementPartRequest& req, const RemoteOptions& o) {
  auto l = ListS3Repository(req.repo, o);
  if (!l.ok()) return l.status();
  auto in = PreparePart(req, *l);
  if (!in.ok()) return in.status();
  auto r = OpenS3Repo(req.repo, o);
  if (!r.ok()) return r.status();
  auto objs = PartObjects(*r, in->artifact);
  if (!objs.ok()) return objs.status();
  std::vector<std::string> keys;
  for (const auto& x : *objs) keys.push_back(x.key);
  for (const auto& p : PendingParts(keys)) {
    if (p.rfind(fmt::format("{}/node-{}.", in->artifact, in->node), 0) == 0 && p.find(' ') == std::string::npos) {
      return Status::InvalidArgument(
          fmt::format("{}: node {}'s part of {} is already there ({}); remove it to upload it again", r->display,
                      in->node, in->artifact, r->Where(fmt::format("{}/{}", kPartsDir, p))));
    }
  }
  auto root = PrivateRoot();
  if (!root.ok()) return root.status();
  Staging s{walfmt::TempNameBeside(walfmt::JoinPath((*root)->dir, in->part_name))};
  if (Status st = OpenStaging(s); !st.ok()) return st;
  Manifest pm;
  if (Status st = BuildPart(*in, s.dir, req.zstd_level, req.jobs, pm); !st.ok()) return st;
  if (Status st = Publish(s, (*root)->dir, pm); !st.ok()) return st;
  const std::string rel = fmt::format("{}/{}/{}/", kPartsDir, in->artifact, in->part_name);
  auto from = Sealed(o.key.get(), PartIdentity(in->artifact, in->part_name),
                     walfmt::JoinPath((*root)->dir, in->part_name), (*root)->dir);
  if (!from.ok()) return from.status();
  if (Status st = UploadPartTree(*r, rel, pm, *from); !st.ok()) return st;
  return PartResult(*in, pm, r->Where(rel.substr(0, rel.size() - 1)));
}

Result<CreateResult> AssembleS3(const AssembleRequest& req, const RemoteOptions& o) {
  auto r = OpenS3Repo(req.repo, o);
  if (!r.ok()) return r.status();
  auto lock = LockS3(*r, o.break_lock, "snapshot create");
  if (!lock.ok()) return lock.status();
  auto l = ListS3Repository(req.repo, o);
  if (!l.ok()) return l.status();
  auto v = recovery::ReadPartVerdict(req.verdict, 0);
  if (!v.ok()) return v.status();
  const std::string artifact = req.name.empty() ? fmt::format("i-cut-{}", v->cut) : req.name;
  auto objs = PartObjects(*r, artifact);
  if (!objs.ok()) return objs.status();
  auto root = PrivateRoot();
  if (!root.ok()) return root.status();
  const std::string parts = walfmt::JoinPath((*root)->dir, "parts");
  const std::string cipher = walfmt::JoinPath((*root)->dir, "cipher");  // encrypted: the download
  const std::string out = walfmt::JoinPath((*root)->dir, "out");
  if (Status st = MakeDir(out); !st.ok()) return st;
  const std::string top = fmt::format("{}/{}/", kPartsDir, artifact);
  const std::string shown = r->Where(top.substr(0, top.size() - 1));
  for (const auto& x : *objs) {
    const std::string rel = x.key.substr(top.size());
    if (rel.empty() || rel.find("..") != std::string::npos || rel[0] == '/') {
      return Status::Corruption(fmt::format("{}: not a key a part holds", r->Where(x.key)));
    }
    const fs::path local = fs::path(o.key ? cipher : parts) / rel;
    std::error_code ec;
    fs::create_directories(local.parent_path(), ec);
    if (Status st = DownloadToFile(*r, r->Key(x.key), x.size, local.string()); !st.ok()) return st;
  }
  if (o.key) {  // every part file authenticated before anything is assembled
    Status st = DecryptParts(*o.key, artifact, cipher, parts, shown);
    std::error_code ec;
    fs::remove_all(cipher, ec);
    if (!st.ok()) return Renamed(Renamed(st, parts, shown), cipher, shown);
  }
  auto res = AssembleInto(*l, req, parts, out);
  if (!res.ok()) return Renamed(Renamed(res.status(), parts, shown), out, r->display);
  auto from = Sealed(o.key.get(), artifact, res->dir, (*root)->dir);
  if (!from.ok()) return Renamed(from.status(), (*root)->dir, r->display);
  if (Status st = UploadPartTree(*r, artifact + "/", res->m, *from); !st.ok()) return st;
  for (const auto& x : *objs) {
    if (Status st = r->client->DeleteObject(r->url.bucket, r->Key(x.key)); !st.ok()) return st;
  }
  res->dir = r->Where(artifact);
  return res;
}

}  // namespace walcut::repo
