// Restoring a cluster whose WAL stays where it lives: one node at a time on
// its own host, from a verdict (recovery/verdict.h), then the parts gathered
// into one restore output.
//
//   RestorePart + WritePart   node I's WAL range read once, the restored
//                             state written to OUT/node-<I>.snap with a
//                             per-node manifest (schema "walcut.restore-part/2")
//   AssembleParts + WriteRestore
//                             the parts of every node, checked to belong
//                             together, copied into one restore output:
//                             OUT/node-<i>.snap and the manifest.json a
//                             single-host restore of the same cut from the
//                             same base writes (base.dir aside: the parts'
//                             bases lie on their own hosts)
//
// What a part checks before it writes anything, besides what a single-host
// restore checks: the verdict covers this node; this node's WAL (its segment
// headers) is node I's and from the verdict's cluster; the WAL holds every
// record the verdict places in the range, at its position (the SNAPSHOT
// record of a full base, CUT_START(K), CUT_FINISH(K) with the same
// before/after sets, the commit and first record of every tracked
// transaction); and, for a consistent cut, it applies as many transactions
// as the summaries count in the cut on this node.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "recovery/restore.h"
#include "recovery/verdict.h"
#include "walfmt/status.h"

namespace walcut::recovery {

// The "schema" of a per-node restore's OUT/manifest.json. Older walcut wrote
// "format": "walcut-restore-part", "version": 1 instead; both are read.
inline constexpr const char* kPartSchema = "walcut.restore-part/2";
inline constexpr const char* kPartFormatV1 = "walcut-restore-part";

struct PartRequest {
  const Verdict* verdict = nullptr;
  uint32_t node = 0;
  std::string wal_dir;   // node I's WAL directory
  std::string base_dir;  // full base: the directory holding its node-<I>.snap
  bool force = false;    // restore a cut the verdict says is not consistent
  bool dry_run = false;
  // With dry_run: the WAL alone is checked against the verdict, the base
  // file is not looked at (`snapshot create --node`: an increment holds the
  // WAL, not the base; the base's SNAPSHOT record in the WAL is checked).
  bool wal_only = false;
  std::string out;  // must not exist; the node file is staged beside it until WritePart
  std::function<void(uint64_t bytes)> progress;
};

// Errors: kCorruption when the verdict says the cut is not consistent and
// `force` is off (a refusal: a finding, not a usage error), or a damaged
// base file or WAL range;
// kInvalidArgument when the verdict, the WAL and the base do not belong
// together (the message names what does not match) or OUT exists;
// kNotFound / kIo as Restore.
walfmt::Result<RestoreResult> RestorePart(const PartRequest& req);

// What `--base ARG` names for the per-node restore of node `node`: nothing
// (ARG ""), genesis, a full snapshot by name (looked for beside the node's
// directory), or a directory holding node-<node>.snap (a path: with a '/',
// or an existing directory). With `read_name`, a directory's snapshot name
// is read from its node file (a verdict is to be made for it). A directory
// without the node's file is kNotFound naming the file.
struct PartBaseArg {
  std::string name;  // "", "genesis" or a snapshot name ("" for a directory not read)
  std::string dir;   // the directory given ("" unless one was)
};
walfmt::Result<PartBaseArg> ReadPartBaseArg(const std::string& arg, uint32_t node, bool read_name);

// The directory holding node I's base file for the verdict `v` (PartRequest::
// base_dir): "" for genesis; `arg.dir`, else `snapshots_root`/<name>, for a
// full snapshot. kInvalidArgument when `arg` names another base than v's.
walfmt::Result<std::string> PartBaseDir(const Verdict& v, const PartBaseArg& arg, const std::string& snapshots_root);

// Writes OUT/manifest.json next to the staged node file and renames the
// staging directory to OUT.
walfmt::Status WritePart(RestoreResult& r, const Verdict& v, const std::string& out);

// Reads the parts (directories written by WritePart), checks that they come
// from one verdict (same cut, cluster and verdict id) and hold every node of
// the cluster exactly once, copies the node files into a staging directory
// beside `out` and reads each back (checksums, node, cluster, fingerprint and
// key count against its part's manifest). The result is ready for
// WriteRestore(r, out, ...). Errors: kInvalidArgument (parts that do not
// belong together, a part that is not one, OUT exists), kCorruption (a node
// file that does not read back as its manifest says), kIo.
walfmt::Result<RestoreResult> AssembleParts(const std::vector<std::string>& parts, const std::string& out);

}  // namespace walcut::recovery
