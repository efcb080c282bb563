// Full snapshot files: one node's whole state, written with transactions
// quiesced (docs/cut-rule.md section 1, "Full snapshot"), next to a SNAPSHOT record
// in that node's WAL. Increments are the cuts after it.
//
// Byte layout (all integers little-endian; the CRCs are masked CRC32C, as in
// walfmt/segment.h):
//
//   header, 64 bytes at offset 0
//    0  magic            8  "WALCUTSN"
//    8  version          u16 kSnapshotVersion (1)
//   10  header_size      u16 64
//   12  node_id          u32
//   16  cluster_id       u64 the cluster_id of the node's WAL segments
//   24  entry_count      u64 number of entries below
//   32  wal_segment      u64 position of the SNAPSHOT record in the node's WAL
//   40  wal_offset       u64   (segment index / byte offset, like an LSN)
//   48  time_us          u64 cluster clock when taken
//   56  name_len         u16 bytes of the name that follows the header (<= 255)
//   58  reserved         u16 zero
//   60  header_crc       u32 masked CRC32C of bytes 0..59
//   name                 name_len bytes
//   entries, sorted by key (bytewise), keys unique:
//      key_len u16, key, value_len u32, value
//   trailer, 16 bytes
//    0  magic            4  "SNEN"
//    4  body_crc         u32 masked CRC32C of the name and entry bytes
//    8  fingerprint      u64 FNV-1a 64 of the entry bytes (as encoded above);
//                            the SNAPSHOT record in the WAL carries the same value
//
// A reader checks the header CRC before believing entry_count or name_len,
// bounds every length by the bytes that remain, and checks the body CRC and
// the fingerprint before returning anything.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "walfmt/lsn.h"
#include "walfmt/status.h"

namespace walfmt {

constexpr uint16_t kSnapshotVersion = 1;
constexpr size_t kSnapshotHeaderSize = 64;
constexpr size_t kSnapshotTrailerSize = 16;
// The largest snapshot file ReadSnapshotFile loads. A file is decoded whole
// into memory, so the bound is what a node's state may sensibly occupy: far
// above the workloads' largest states (10^6 keys of each kind, under 100 MB),
// and it keeps a wrong or damaged path from exhausting memory.
constexpr uint64_t kMaxSnapshotFileBytes = uint64_t{4} << 30;

// One snapshot file as values: the header fields and the entries, key -> value.
struct SnapshotFile {
  uint32_t node_id = 0;
  uint64_t cluster_id = 0;
  Lsn wal_position;  // of the SNAPSHOT record
  uint64_t time_us = 0;
  std::string name;
  std::map<std::string, std::string> entries;
  uint64_t fingerprint = 0;  // filled by Encode / Decode
};

// FNV-1a 64 over the encoded entries: the state's fingerprint.
uint64_t StateFingerprint(const std::map<std::string, std::string>& entries);

// Encodes the file; sets s.fingerprint. Fails on a key over 65535 bytes or a
// name over 255 bytes.
Result<std::string> EncodeSnapshot(SnapshotFile& s);
// Decodes and checks a whole file image.
Result<SnapshotFile> DecodeSnapshot(const std::string& bytes);

// Writes the file atomically and durably (walfmt/file_io.h, WriteFileAtomic):
// an existing file is replaced.
Status WriteSnapshotFile(const std::string& path, SnapshotFile& s);

// Writes a snapshot file entry by entry, never holding the whole file: for
// states too large to copy (restore). Entries must come in strictly
// increasing key order and their number must be `entry_count`; Finish writes
// the trailer and returns the fingerprint. The bytes are exactly those of
// EncodeSnapshot for the same content. The checksum, the fingerprint and the
// writing of each 1 MiB of entries run on a thread of the writer's own, so
// that the caller's thread only formats entries (at most three such buffers
// exist at once); a write error is returned by a later Add or by Finish.
// With helper_thread false, all of it runs on the caller's thread (the same
// bytes).
class SnapshotStreamWriter {
 public:
  // `header` supplies node_id, cluster_id, wal_position, time_us and name.
  static Result<std::unique_ptr<SnapshotStreamWriter>> Create(const std::string& path, const SnapshotFile& header,
                                                              uint64_t entry_count, bool helper_thread = true);
  ~SnapshotStreamWriter();
  Status Add(std::string_view key, std::string_view value);
  Result<uint64_t> Finish();

 private:
  struct Helper;
  SnapshotStreamWriter();
  // Hands buf_ to the helper (waiting while it has two), and takes an empty
  // buffer back.
  Status Flush();
  std::string path_;
  int fd_ = -1;
  std::string buf_;
  size_t hash_from_ = 0;  // where buf_'s entries start (after the header and name in the first)
  uint64_t expected_ = 0;
  uint64_t written_ = 0;
  std::string last_key_;
  std::unique_ptr<Helper> helper_;
};
// Reads a whole file (at most kMaxSnapshotFileBytes) and decodes it as
// DecodeSnapshot does: kNotFound, kIo, or kCorruption when a check fails.
Result<SnapshotFile> ReadSnapshotFile(const std::string& path);
// Reads a snapshot without building its map: `each` gets every entry in key
// order as it is parsed (the views live only during the call), and the result
// holds the header fields and the fingerprint with `entries` empty. The body
// checksum and the fingerprint are checked after the last entry: on an error
// the caller must discard what `each` was given.
Result<SnapshotFile> ReadSnapshotFile(const std::string& path,
                                      const std::function<void(std::string_view key, std::string_view value)>& each);

}  // namespace walfmt
