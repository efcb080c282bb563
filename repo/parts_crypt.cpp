// Increments made of parts in an encrypted repository (parts.h, REPOSITORY.md
// "Increments from parts" and "Encryption"): a part is built in a private
// directory (crypt.h, PrivateDirFor) and encrypted file by file into the
// repository, its identity the part's path `.parts/<artifact>/<part>`; the
// assembly authenticates and decrypts every complete part into a private
// directory, assembles there as for a plain repository, and encrypts the
// artifact into place as the single-host create does. Messages name the
// repository's files, never their plaintext copies (an I/O error in the
// private directory names it: that is where the space ran out).
#include <algorithm>
#include <filesystem>
#include <vector>

#include <fmt/format.h>

#include "repo/artifact_io.h"
#include "repo/crypt.h"
#include "repo/manifest.h"
#include "repo/parts_internal.h"
#include "repo/s3_store.h"
#include "walfmt/strings.h"

namespace walcut::repo {
namespace fs = std::filesystem;
using walfmt::Result;
using walfmt::Status;

std::string PartIdentity(const std::string& artifact, const std::string& part) {
  return fmt::format("{}/{}/{}", kPartsDir, artifact, part);
}

Status DecryptParts(const RepoKey& key, const std::string& artifact, const std::string& from, const std::string& to,
                    const std::string& shown) {
  if (Status st = MakeDir(to); !st.ok()) return st;
  std::error_code ec;
  std::vector<std::string> names;
  if (fs::is_directory(from, ec)) {
    for (const auto& e : fs::directory_iterator(from, ec)) {
      const std::string name = e.path().filename().string();
      // As the assembly reads them: parts being built and incomplete ones are left out.
      if (name[0] == '.' || !e.is_directory(ec) || !fs::exists(e.path() / kManifestFile, ec)) continue;
      names.push_back(name);
    }
  }
  if (ec) return Status::Io(fmt::format("{}: cannot list: {}", shown, ec.message()));
  std::sort(names.begin(), names.end());
  DecryptFailures failures;
  for (const auto& name : names) {
    if (Status st = DecryptTree(key, PartIdentity(artifact, name), walfmt::JoinPath(from, name),
                                walfmt::JoinPath(to, name), walfmt::JoinPath(shown, name), failures);
        !st.ok())
      return st;
  }
  if (!failures.files.empty()) return Status::Corruption(failures.files.begin()->second);
  return Status::Ok();
}

Status PublishSealedPart(const RepoKey& key, const PartInputs& in, int level, unsigned jobs, const std::string& dir,
                         Manifest& pm) {
  auto priv = PrivateDirFor("", "walcut-parts");
  if (!priv.ok()) return priv.status();
  const std::string root = (*priv)->dir;
  Staging s{walfmt::TempNameBeside(walfmt::JoinPath(root, in.part_name))};
  if (Status st = OpenStaging(s); !st.ok()) return st;
  if (Status st = BuildPart(in, s.dir, level, jobs, pm); !st.ok()) return st;
  if (Status st = Publish(s, root, pm); !st.ok()) return st;
  return PublishEncryptedTree(key, PartIdentity(in.artifact, in.part_name), walfmt::JoinPath(root, in.part_name),
                              walfmt::JoinPath(dir, in.part_name));
}

Result<CreateResult> AssembleSealed(const RepoKey& key, const RepoListing& l, const AssembleRequest& req,
                                    const std::string& artifact, const std::string& parts_dir,
                                    const std::string& repo) {
  auto priv = PrivateDirFor("", "walcut-parts");
  if (!priv.ok()) return priv.status();
  const std::string plain = walfmt::JoinPath((*priv)->dir, "parts");
  const std::string out = walfmt::JoinPath((*priv)->dir, "out");
  if (Status st = MakeDir(out); !st.ok()) return st;
  if (Status st = DecryptParts(key, artifact, parts_dir, plain, parts_dir); !st.ok()) {
    return Renamed(st, plain, parts_dir);
  }
  auto r = AssembleInto(l, req, plain, out);
  if (!r.ok()) return Renamed(r.status(), plain, parts_dir);  // the parts' files by their names in the repository
  const std::string target = walfmt::JoinPath(repo, artifact);
  if (Status st = PublishEncryptedTree(key, artifact, r->dir, target); !st.ok()) {
    if (st.code() == walfmt::ErrorCode::kInvalidArgument) {
      return Status::InvalidArgument(fmt::format("{}: an artifact of that name already exists", target));
    }
    return st;
  }
  r->dir = target;
  return r;
}

}  // namespace walcut::repo
