// Internal to repo/: what the directory and S3 halves of the increments made
// of parts (parts.h) share: a part prepared (checked, its segments and scan
// known) and built into a staging directory, and an increment assembled
// from parts lying in a local directory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cut/summary.h"
#include "recovery/verdict.h"
#include "repo/parts.h"
#include "repo/repository.h"
#include "walfmt/reader.h"
#include "walfmt/status.h"

namespace walcut::repo {

// A part's copy of its node's scan summary (for the assembled evidence);
// not a file of the artifact.
inline constexpr const char* kPartSummaryFile = "summary.json";

struct PartInputs {
  uint32_t node = 0;
  std::string wal_dir;
  recovery::Verdict v;
  std::string artifact;
  std::string part_name;             // node-<i>.<token>
  const Artifact* parent = nullptr;  // in the listing given to PreparePart
  cut::NodeSummary live;             // the scan of node I's WAL
  std::vector<walfmt::SegmentFile> segs;
};
// Everything checked before a part is written (parts.h, CreateIncrementPart).
walfmt::Result<PartInputs> PreparePart(const IncrementPartRequest& req, const RepoListing& l);
// The part's files into `stage` and its manifest `pm` (to be published).
walfmt::Status BuildPart(const PartInputs& in, const std::string& stage, int level, unsigned jobs, Manifest& pm);
IncrementPartResult PartResult(const PartInputs& in, const Manifest& pm, std::string where);

// The increment of req's verdict from the parts in `parts_dir`, published
// into `out_repo`; `l` lists the repository (its parent).
walfmt::Result<CreateResult> AssembleInto(const RepoListing& l, const AssembleRequest& req,
                                          const std::string& parts_dir, const std::string& out_repo);

// ---- an encrypted repository (parts_crypt.cpp) ----

struct RepoKey;  // repo/crypt.h
// The identity (REPOSITORY.md, "Encryption") of every file of part `part` of
// `artifact` is "<identity>/<path in the part>": the part's place in the
// repository, ".parts/<artifact>/<part>", never an artifact's ("NAME/REL";
// a name never starts with '.'), and another for every part.
std::string PartIdentity(const std::string& artifact, const std::string& part);
// The complete parts of `artifact` under `from` (ciphertext: REPO/.parts/<artifact>
// or its download), every file authenticated and decrypted into `to`
// (created; in a private directory). Parts being built and incomplete ones
// are left out, as the assembly leaves them. kCorruption naming (under
// `shown`) the first file that fails authentication.
walfmt::Status DecryptParts(const RepoKey& key, const std::string& artifact, const std::string& from,
                            const std::string& to, const std::string& shown);
// The part built in a private directory and encrypted into `dir`
// (REPO/.parts/<artifact>) as `dir`/<part>, manifest.json last.
walfmt::Status PublishSealedPart(const RepoKey& key, const PartInputs& in, int level, unsigned jobs,
                                 const std::string& dir, Manifest& pm);
// AssembleInto for an encrypted directory repository: the parts in
// `parts_dir` decrypted into a private directory and assembled there, the
// artifact encrypted into `repo` as the single-host create encrypts one.
walfmt::Result<CreateResult> AssembleSealed(const RepoKey& key, const RepoListing& l, const AssembleRequest& req,
                                            const std::string& artifact, const std::string& parts_dir,
                                            const std::string& repo);

// The S3 halves (s3_parts.cpp).
walfmt::Result<IncrementPartResult> CreateS3Part(const IncrementPartRequest& req, const RemoteOptions& o);
walfmt::Result<CreateResult> AssembleS3(const AssembleRequest& req, const RemoteOptions& o);

}  // namespace walcut::repo
