// The staging directory of an artifact and the files added to it
// (repo/artifact_io.h).
#include "repo/artifact_io.h"

#include <filesystem>

#include <fmt/format.h>

#include "repo/manifest.h"
#include "walfmt/file_io.h"
#include "walfmt/staging.h"
#include "walfmt/strings.h"

namespace walcut::repo {
namespace fs = std::filesystem;
using walfmt::Result;
using walfmt::Status;

Staging::Staging(std::string d) : dir(std::move(d)) { walfmt::RegisterStaging(dir); }

Staging::~Staging() {
  if (!dir.empty() && !keep) walfmt::RemoveStaging(dir);
}

Status MakeDir(const std::string& d) {
  std::error_code ec;
  if (!fs::create_directory(d, ec) || ec) {
    return Status::Io(fmt::format("{}: cannot create directory: {}", d, ec ? ec.message() : "exists"));
  }
  return Status::Ok();
}

Status OpenStaging(Staging& s) {
  Status st = MakeDir(s.dir);
  if (!st.ok()) s.dir.clear();
  return st;
}

Status AddFileCopy(const std::string& stage, const std::string& rel, const std::string& from, Manifest& m) {
  Hasher h;
  if (Status st = walfmt::CopyToNewFile(from, walfmt::JoinPath(stage, rel), [&h](std::string_view p) { h.Update(p); });
      !st.ok()) {
    return st;
  }
  m.files.push_back({rel, h.bytes(), h.Hex()});
  return Status::Ok();
}

Status AddFile(const std::string& stage, const std::string& rel, std::string_view data, Manifest& m) {
  if (Status st = walfmt::WriteNewFile(walfmt::JoinPath(stage, rel), data); !st.ok()) return st;
  m.files.push_back({rel, data.size(), Xxh3Hex(data)});
  return Status::Ok();
}

Result<walfmt::SnapshotFile> ReadBackSnapshot(const std::string& path, uint64_t& entries) {
  entries = 0;
  auto snap = walfmt::ReadSnapshotFile(path, [&entries](std::string_view, std::string_view) { ++entries; });
  if (!snap.ok()) return Status::Corruption(fmt::format("{}: {}", path, snap.status().message()));
  return snap;
}

Status Publish(Staging& s, const std::string& repo, Manifest& m) {
  if (Status st = walfmt::SyncDir(s.dir); !st.ok()) return st;
  if (Status st = walfmt::WriteFileAtomic(walfmt::JoinPath(s.dir, kManifestFile), EncodeManifest(m)); !st.ok())
    return st;
  const std::string target = walfmt::JoinPath(repo, m.name);
  std::error_code ec;
  if (fs::exists(target, ec)) {
    return Status::InvalidArgument(fmt::format("{}: an artifact of that name already exists", target));
  }
  if (Status st = walfmt::CommitStaging(s.dir, target); !st.ok()) return st;
  s.keep = true;
  return Status::Ok();
}

Result<cut::ClusterCuts> Analyze(const cut::ClusterLayout& layout, unsigned jobs, std::optional<uint64_t> attested) {
  cut::LoadOptions lo;
  lo.jobs = jobs;
  auto sums = cut::ScanCluster(layout, lo);
  if (!sums.ok()) return sums.status();
  cut::ReconstructOptions ro;
  ro.attested_cut = attested;
  return cut::Reconstruct(std::move(sums.value()), ro);
}

std::string SegmentName(uint64_t index) { return fmt::format("{:016X}.wal.zst", index); }

std::string PlanFile(size_t i) { return fmt::format("node-{}/restore-plan.json", i); }

}  // namespace walcut::repo
