// A repository of snapshot artifacts (repo/REPOSITORY.md): a directory that
// holds full artifacts (a node-<i>.snap per node: a runtime full snapshot, or
// a synthetic full made by restoring a cut) and incremental artifacts (the
// WAL segments each node needs to go from its parent's cut to cut K, as
// .wal.zst, with the cut's evidence), each with a manifest.json listing every
// file with its XXH3-128. Library code: never prints; errors are values.
//
// Every artifact is built in a staging directory REPO/.<name>.tmp-<pid>-<seq>
// (files with WriteNewFile, directories synced, manifest.json written last
// with WriteFileAtomic) and renamed into place with RenameDurable, so a crash
// at any step leaves either no artifact or a complete one; names starting
// with '.' are never taken for artifacts.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "cut/cuts.h"
#include "cut/load.h"
#include "recovery/key_subset.h"
#include "walfmt/duration.h"
#include "walfmt/lsn.h"
#include "walfmt/outcome.h"
#include "walfmt/status.h"

namespace walcut::repo {

inline constexpr const char* kMarkerFile = "walcut-repository.json";  // REPO's top-level marker
// The marker's "schema"; older walcut wrote "format": "walcut-repository",
// "version": 1 instead (read as the same repository).
inline constexpr const char* kRepoSchema = "walcut.repository/2";
inline constexpr const char* kRepoFormatV1 = "walcut-repository";
// An artifact's manifest.json. Version 1 (older walcut) wrote cluster_id as
// a decimal number, version 2 as 16 hex digits; both are read.
inline constexpr const char* kArtifactSchema = "walcut.artifact/2";
inline constexpr const char* kArtifactSchemaV1 = "walcut.artifact/1";
inline constexpr const char* kManifestFile = "manifest.json";
inline constexpr const char* kManifestChecksumKey = "manifest_xxh3_128";

// XXH3-128 of bytes / of a file, as 32 lower-case hex digits (high 64 bits first).
std::string Xxh3Hex(std::string_view data);
walfmt::Result<std::string> Xxh3File(const std::string& path, uint64_t* bytes = nullptr);

// Whether DIR holds the repository marker.
bool IsRepository(const std::string& dir);
// Creates DIR and its marker when DIR does not exist or is empty; Ok when DIR
// already is a repository; kInvalidArgument when DIR is a non-empty directory
// that is not one.
walfmt::Status InitRepository(const std::string& dir);
// The same with the marker `marker_text` for a new repository (an encrypted
// one's); Ok without reading the marker when DIR already is a repository.
walfmt::Status InitRepository(const std::string& dir, const std::string& marker_text);
// Whether DIR's marker is an encrypted repository's (REPOSITORY.md,
// "Encryption"); the plain directory code refuses such a repository.
bool IsEncryptedRepository(const std::string& dir);

struct ArtifactFile {
  std::string path;  // relative to the artifact directory
  uint64_t bytes = 0;
  std::string xxh3_128;
};

// One node as an artifact records it.
struct ArtifactNode {
  uint32_t node = 0;
  walfmt::Lsn continue_from;  // R_i: where an increment on top of this artifact starts reading this node's WAL
  // Increments: the WAL held, [wal_from, wal_to] in whole segments first..last.
  bool has_wal = false;
  walfmt::Lsn wal_from, wal_to;
  uint64_t first_segment = 0, last_segment = 0;
  std::vector<std::string> segments;  // file names under node-<i>/wal/
  // Fulls: the snapshot file.
  std::string snap_file;
  uint64_t fingerprint = 0;
  uint64_t entries = 0;
  walfmt::Lsn snap_position;  // header wal_position of the .snap
  // Cut evidence (artifacts of a cut): LocalState / ChannelState summary.
  bool has_cut = false;
  walfmt::Lsn cut_start, cut_finish;
  uint64_t start_time_us = 0, finish_time_us = 0;
  uint64_t commits_before_start = 0, commits_before_finish = 0;
  uint64_t before = 0, after = 0;
  uint64_t before_after_start = 0, after_before_start = 0;  // rule-5 counts on this node
};

struct Manifest {
  std::string name;
  std::string type;    // "full" or "incremental"
  std::string source;  // "runtime-snapshot", "restore" (synthetic full), "wal" (increment)
  std::string parent;  // increments: the artifact it builds on
  uint64_t seq = 0;    // creation order in the repository (1, 2, ...)
  uint64_t cluster_id = 0;
  std::optional<uint64_t> cut;  // the cut it restores to (none for a runtime full snapshot)
  std::string snapshot;         // runtime full: the snapshot's name
  uint64_t time_us = 0;         // cluster time: the cut's latest CUT_FINISH, or the snapshot's time
  std::vector<ArtifactNode> nodes;
  std::string verdict;      // the cut's global status when created ("consistent"; "snapshot" for a runtime full)
  nlohmann::json evidence;  // the cut's global evidence (checks, counts, reason) at creation
  std::vector<ArtifactFile> files;  // every file but manifest.json
  nlohmann::json restore;           // synthetic full: the restore's manifest (also merged at top level)
  bool full() const { return type == "full"; }
  uint64_t Bytes() const;
};

// Encodes the manifest (with its self-checksum) / decodes and checks it.
std::string EncodeManifest(const Manifest& m);
walfmt::Result<Manifest> DecodeManifest(const std::string& text, const std::string& origin);

struct Artifact {
  std::string name;
  std::string dir;
  walfmt::Status status;  // manifest unreadable, malformed or failing its checksum
  Manifest m;
  // The cluster's epoch from the artifact's copy of cluster.json: record
  // time T happened at epoch + T (walfmt/duration.h). Absent when that copy
  // predates epochs or cannot be read (`snapshot check` reports the latter).
  std::optional<uint64_t> epoch_unix_us;
};

struct RepoListing {
  std::string dir;
  std::vector<Artifact> artifacts;     // by seq (unreadable ones last, by name)
  std::vector<std::string> leftovers;  // staging / expiring directories left by a killed writer
  // Parts of increments not yet assembled (repo/parts.h): "<artifact>/<part>",
  // " (incomplete)" added while its manifest.json is missing.
  std::vector<std::string> pending_parts;
  const Artifact* Find(std::string_view name) const;
};
walfmt::Result<RepoListing> ListRepository(const std::string& dir);

// The chain of `name`: its full first, `name` last. Fails (kCorruption) naming
// the missing or unreadable link, another cluster, or a cut going backwards.
walfmt::Result<std::vector<const Artifact*>> ChainOf(const RepoListing& l, std::string_view name);

// What a repository can restore: one target per artifact with a complete chain.
struct RestoreTarget {
  std::string artifact;
  std::optional<uint64_t> cut;
  std::string snapshot;
  uint64_t time_us = 0;
  uint64_t cluster_id = 0;
  std::vector<std::string> chain;
};
std::vector<RestoreTarget> RestoreTargets(const RepoListing& l);

// ---- create --------------------------------------------------------------

struct CreateRequest {
  std::string cluster_dir;  // may be empty for a synthetic full the repository can serve
  std::string repo;
  bool full = false;
  std::string from;             // full: a runtime snapshot name
  std::optional<uint64_t> cut;  // full: synthetic; incremental: the cut
  bool latest = false;          // incremental: the latest consistent cut after the parent
  std::string parent;           // incremental: explicit parent ("" : the newest artifact of the cluster)
  std::string name;             // "" : f-<snapshot>, f-cut-<K>, i-cut-<K>
  int zstd_level = 1;
  unsigned jobs = 0;
  // Increments: called on the storing thread as each WAL segment is written
  // into the staging directory, with the artifact's name, the segment's path
  // in the artifact and its staged file (valid during the call); an error
  // fails the create. An S3 repository uploads the segment there, while the
  // other threads go on compressing.
  std::function<walfmt::Status(const std::string& name, const std::string& rel, const std::string& staged)>
      segment_stored;
};

struct CreateResult {
  Manifest m;
  std::string dir;
  std::vector<std::string> chain;  // for increments: the chain it extends
};

// Errors: kNotFound (no such snapshot, cut or parent), kInvalidArgument
// (refused: the cut is not consistent, missing WAL segments, parent of another
// cluster or not before the cut, name taken), kCorruption, kIo (including an
// injected fault: then nothing is left under the artifact's name).
walfmt::Result<CreateResult> CreateArtifact(const CreateRequest& req);

// ---- restore through a chain ----------------------------------------------

struct ChainStep {
  std::string artifact;
  std::optional<uint64_t> cut;
  std::vector<ArtifactNode> nodes;  // WAL ranges to apply (increments)
};

struct RepoRestoreRequest {
  std::string repo;
  std::string name;             // artifact; or
  std::optional<uint64_t> cut;  // the newest artifact of this cut; or
  bool latest = false;          // the newest restorable artifact; or
  // The newest artifact whose cut finished before this time. A wall-clock
  // time goes through each artifact's epoch (artifacts without one are
  // skipped); a cluster time is refused when the candidates belong to more
  // than one cluster (each has its own clock).
  std::optional<walfmt::TimeArg> before;
  std::string out;
  bool dry_run = false;
  unsigned jobs = 0;
  // A partial restore (recovery/key_subset.h): every step restores only
  // these keys, the full's files filtered as they are read. Needs an
  // increment as the target (a full alone is copied, not restored):
  // kInvalidArgument for a full, or a subset the cluster.json of the
  // target does not allow.
  recovery::KeySubset subset;
  // Called after each step with the step's output directory (restore output of
  // that artifact's cut); a non-Ok status stops the restore.
  std::function<walfmt::Status(const ChainStep&, const std::string& dir)> after_step;
};

struct RepoRestoreResult {
  std::string target;
  std::vector<ChainStep> steps;        // the full first
  std::vector<uint64_t> fingerprints;  // by node, of OUT
};

walfmt::Result<const Artifact*> SelectTarget(const RepoListing& l, const RepoRestoreRequest& req);
walfmt::Result<RepoRestoreResult> RestoreFromRepository(const RepoRestoreRequest& req);

// ---- expire ----------------------------------------------------------------

struct ExpireResult {
  std::vector<std::string> kept;
  std::vector<std::string> removed;  // in the order removed (leaves first)
  std::vector<std::string> leftovers_removed;
};
walfmt::Result<ExpireResult> Expire(const std::string& repo, uint64_t keep_full, bool dry_run);

// ---- check -----------------------------------------------------------------

struct RepoFinding {
  std::string check;  // "checksum", "missing-file", "unlisted-file", "manifest", "chain", "continuity", "cut",
                      // "evidence", "restore", "invariants"
  std::string artifact;
  std::string file;
  std::optional<uint32_t> node;
  std::string expected, found;
  std::string message;
};

struct RepoCheckItem {
  std::string level;  // "files", "chain", "cuts", "restore"
  std::string group;  // the artifact (or "repository")
  std::string name;
  bool failed = false;
  bool skipped = false;
  std::string note;
  std::vector<RepoFinding> findings;
};

struct RepoCheckReport {
  std::string dir;
  std::vector<std::string> artifacts;  // checked
  std::vector<RepoCheckItem> items;
  std::vector<std::string> notes;
  std::vector<std::string> errors;  // tool failures: exit 3
  uint64_t files_checked = 0, bytes_checked = 0, restores = 0;
  uint64_t Failed() const;
  uint64_t Findings() const;
};

struct RepoCheckOptions {
  std::string repo;
  std::string name;  // "" : every artifact
  bool restore = false;
  unsigned jobs = 0;
};
// kNotFound / kInvalidArgument (usage) when REPO is not a repository or NAME is
// not in it; everything found is in the report.
walfmt::Result<RepoCheckReport> CheckRepository(const RepoCheckOptions& o);
// How the check came out: report.errors (kIo) first, then a failed item
// (kFindings).
walfmt::Outcome RepoCheckOutcome(const RepoCheckReport& r);

}  // namespace walcut::repo
