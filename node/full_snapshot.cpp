// A node's part of a full snapshot: the SNAPSHOT record and the snapshot file,
// and WAL retention (deleting the segments the snapshot makes unnecessary).

#include "node/node.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "node/host.h"
#include "walfmt/file_io.h"
#include "walfmt/reader.h"
#include "walfmt/segment.h"
#include "walfmt/snapshot.h"

namespace walcut::node::sim {

using walfmt::SnapshotFile;
using walfmt::StateFingerprint;
using walfmt::WriteSnapshotFile;

Status Node::TakeSnapshot(const std::string& name, const std::string& path, uint64_t cluster_id, walfmt::Lsn& at,
                          uint64_t& fingerprint) {
  SnapshotFile f;
  f.node_id = id_;
  f.cluster_id = cluster_id;
  f.name = name;
  f.time_us = host_.now();
  kv_.for_each([&](const std::string& k, const std::string& v) { f.entries.emplace(k, v); });
  fingerprint = StateFingerprint(f.entries);
  wal_->set_time_us(host_.now());
  auto lsn = wal_->Append(walfmt::Snapshot{name, host_.now(), fingerprint});
  if (!lsn.ok()) return lsn.status();
  ++host_.sum().records;
  Sync();
  at = *lsn;
  f.wal_position = at;
  if (host_.opt().wal_retention == WalRetention::kKeep) return WriteSnapshotFile(path, f);
  // Segments are about to be deleted on the strength of this snapshot: the
  // WAL up to its SNAPSHOT record and the file must be on disk first. (The
  // writer's Sync writes the buffered bytes; the simulated crash already
  // keeps everything up to synced_, so this changes no file byte.)
  if (Status st = wal_->Sync(); !st.ok()) return st;
  auto bytes = walfmt::EncodeSnapshot(f);
  if (!bytes.ok()) return bytes.status();
  return walfmt::WriteFileAtomic(path, *bytes);
}

Status Node::PruneWal(const std::string& wal_dir, uint64_t keep_from, uint64_t& deleted, uint64_t& bytes) {
  auto segs = walfmt::ListSegments(wal_dir, nullptr);
  if (!segs.ok()) return segs.status();
  // Never the segment holding the SNAPSHOT record nor the active one (which
  // is at or after it), nor the one holding the last cut record: a node
  // restarted from this snapshot learns from it the last cut it recorded,
  // as it would from the whole WAL (Restart).
  keep_from = std::min({keep_from, wal_->segment_index(), last_cut_segment_});
  bool any = false;
  for (const auto& seg : *segs) {
    if (seg.index >= keep_from) break;  // ListSegments sorts by index
    struct stat sb {};
    const uint64_t size = ::stat(seg.path.c_str(), &sb) == 0 ? static_cast<uint64_t>(sb.st_size) : 0;
    if (::unlink(seg.path.c_str()) != 0) {
      return Status::Io(fmt::format("{}: cannot delete: {}", seg.path, std::strerror(errno)));
    }
    ++deleted;
    bytes += size;
    any = true;
    // Archiving writes the .wal.zst before removing the .wal: after a crash
    // between the two both exist, and ListSegments names only one.
    const std::string other = wal_dir + "/" + walfmt::SegmentFileName(seg.index, !seg.compressed);
    if (::unlink(other.c_str()) != 0 && errno != ENOENT) {
      return Status::Io(fmt::format("{}: cannot delete: {}", other, std::strerror(errno)));
    }
  }
  return any ? walfmt::SyncDir(wal_dir) : Status::Ok();
}

}  // namespace walcut::node::sim
