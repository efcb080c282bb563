// Internal to repo/: what create, the segment store and the chain restore
// share to build an artifact or read one back: the staging directory that
// becomes the artifact, files added to it with their checksums, publishing it,
// and the cut analysis of a layout.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "cut/cuts.h"
#include "cut/load.h"
#include "repo/repository.h"
#include "walfmt/snapshot.h"
#include "walfmt/status.h"

namespace walcut::repo {

// A staging directory that is removed unless kept; registered from the start
// so that a termination signal removes it too (walfmt/staging.h). It is kept
// by renaming it into place with walfmt::CommitStaging.
struct Staging {
  explicit Staging(std::string d);
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;
  ~Staging();
  std::string dir;
  bool keep = false;
};

// Creates directory d (not its parents); kIo when it exists or cannot be made.
walfmt::Status MakeDir(const std::string& d);
// Creates the staging directory s.dir; when that fails, s forgets it (there
// is nothing to remove).
walfmt::Status OpenStaging(Staging& s);

// Copies a file into the staging directory piece by piece (memory: one piece)
// and lists it with its checksum.
walfmt::Status AddFileCopy(const std::string& stage, const std::string& rel, const std::string& from, Manifest& m);
// Writes data as stage/rel and lists it with its checksum.
walfmt::Status AddFile(const std::string& stage, const std::string& rel, std::string_view data, Manifest& m);

// Reads a staged snapshot file back (header and body checksums, fingerprint)
// without building its map; counts its entries.
walfmt::Result<walfmt::SnapshotFile> ReadBackSnapshot(const std::string& path, uint64_t& entries);

// Writes manifest.json last and renames the staging directory into place.
walfmt::Status Publish(Staging& s, const std::string& repo, Manifest& m);

// The cuts of a layout. `attested`: the cut of the parent artifact, known
// consistent from when it was made; an increment's WAL is checked against it.
walfmt::Result<cut::ClusterCuts> Analyze(const cut::ClusterLayout& layout, unsigned jobs,
                                         std::optional<uint64_t> attested = std::nullopt);

// The name of segment `index` in an increment: <16 HEX>.wal.zst.
std::string SegmentName(uint64_t index);
// The file of an increment that holds node i's restore plan.
std::string PlanFile(size_t i);

}  // namespace walcut::repo
