// Full snapshot files: one node's whole state, written with transactions
// quiesced (DESIGN.md section 1, "Full snapshot"), next to a SNAPSHOT record
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
#include <map>
#include <string>

#include "walfmt/lsn.h"
#include "walfmt/status.h"

namespace walfmt {

constexpr uint16_t kSnapshotVersion = 1;
constexpr size_t kSnapshotHeaderSize = 64;
constexpr size_t kSnapshotTrailerSize = 16;

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

Status WriteSnapshotFile(const std::string& path, SnapshotFile& s);
Result<SnapshotFile> ReadSnapshotFile(const std::string& path);

}  // namespace walfmt
