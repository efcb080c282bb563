// Appends records to a node's WAL directory. Segments roll before a record
// that would cross the configured size; a record never spans two segments.
// Rolled segments are archived as .wal.zst when asked. Bytes are buffered in
// memory until Sync(), which is the durability point: SimulateCrash() drops
// what was not synced, the way a power loss would.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "walfmt/lsn.h"
#include "walfmt/record.h"
#include "walfmt/segment.h"
#include "walfmt/status.h"

struct ZSTD_CCtx_s;  // zstd.h stays out of this header

namespace walfmt {

struct WriterOptions {
  std::string wal_dir;  // created if missing
  uint32_t node_id = 0;
  uint64_t cluster_id = 0;
  uint64_t segment_bytes = 16u << 20;  // roll before crossing this (a larger record gets a segment of its own)
  bool archive_compressed = false;     // compress each rolled segment to .wal.zst
  int zstd_level = 1;
  bool fsync = false;  // fdatasync on Sync(); off in simulation
};

class WalWriter {
 public:
  // Starts a new WAL: fails when the directory already holds segments.
  static Result<std::unique_ptr<WalWriter>> Create(const WriterOptions& opt, uint64_t time_us = 0);
  // Continues an existing WAL after a restart: the torn tail of the last
  // segment, if any, is cut off (this is the node's own log, the only place
  // walcut ever shortens a file), and appending resumes after the last intact
  // record. An empty directory starts a new WAL. A last segment shorter than
  // its header (its creation interrupted) is removed first.
  static Result<std::unique_ptr<WalWriter>> Open(const WriterOptions& opt, uint64_t time_us = 0);

  ~WalWriter();
  WalWriter(const WalWriter&) = delete;
  WalWriter& operator=(const WalWriter&) = delete;

  // Appends a record; returns its position.
  Result<Lsn> Append(const Record& r);
  // Appends a framed payload of any type (tests use it for unknown types).
  Result<Lsn> AppendRaw(uint16_t type, uint16_t flags, std::span<const uint8_t> payload);
  // Writes buffered bytes to the file (and fdatasync with opt.fsync).
  Status Sync();
  // Syncs and closes the current segment; the writer is unusable afterwards.
  Status Close();
  // Power loss: of the bytes appended since the last Sync, only the first
  // `keep_unsynced_bytes` reach the file (possibly ending inside a record).
  // The writer is unusable afterwards.
  Status SimulateCrash(uint64_t keep_unsynced_bytes);

  void set_time_us(uint64_t t) { time_us_ = t; }
  Lsn end() const { return Lsn{index_, seg_bytes_}; }
  uint64_t unsynced_bytes() const { return buf_.size(); }
  uint64_t segment_index() const { return index_; }

 private:
  explicit WalWriter(WriterOptions opt) : opt_(std::move(opt)) {}
  Status StartSegment(uint64_t index, uint64_t prev_end, uint32_t prev_crc);
  Status Roll();
  Status Archive(uint64_t index, uint64_t bytes);  // bytes: the segment's size when it was rolled
  Status WriteAll(const char* data, size_t n);

  WriterOptions opt_;
  int fd_ = -1;
  uint64_t index_ = 0;
  uint64_t seg_bytes_ = 0;  // bytes in the current segment, buffered ones included
  uint32_t last_crc_ = 0;   // header_crc of the last record appended
  uint64_t time_us_ = 0;
  std::string buf_;  // appended, not yet written
  std::string scratch_;
  // Archive() state kept from one rolled segment to the next: a fresh zstd
  // context and fresh megabyte buffers per segment cost page faults and
  // table initialisation each time. The compressed bytes do not depend on
  // the context being reused.
  struct CCtxFree {
    void operator()(ZSTD_CCtx_s* c) const;
  };
  std::unique_ptr<ZSTD_CCtx_s, CCtxFree> cctx_;
  std::string archive_in_;
  std::string archive_out_;
};

}  // namespace walfmt
