// Byte sources for segment files: a window over the file filled by pread()
// for plain segments, a zstd decoder that runs ahead of the reader on its own
// thread for archived ones, and an in-memory buffer for tests and fuzzing.
// Memory stays bounded by a few MiB per open source, not by the file: the
// plain reader keeps one 2 MiB window (reused by the next source opened on
// the same thread), the decoder and the read-ahead four blocks of 1.5 MiB
// (also reused, and never touched in full).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "walfmt/segment.h"
#include "walfmt/status.h"

namespace walfmt {

// The most bytes one Get may ask for: a record of the largest size.
constexpr size_t kMaxGetBytes = kRecordHeaderSize + kMaxRecordPayload;

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Makes bytes [offset, offset + n) readable at `p`, n at most kMaxGetBytes.
  // Sets `got` to n, or to fewer when the data ends first (0 at the end).
  // Offsets only move forward: `offset` is never below the last Release().
  // Fails on read or decode errors.
  virtual Status Get(uint64_t offset, size_t n, const uint8_t*& p, size_t& got) = 0;
  // Every byte from `offset` on that the source holds at once: at least
  // `want` (at most kMaxGetBytes) when the data has them, often many more,
  // so that a reader walks them without a call per record. Never fails:
  // fewer than `want` bytes means that the data ends there or that reading
  // more failed, which a Get of the missing bytes then reports. The bytes
  // stay readable until the next call.
  virtual void Window(uint64_t offset, size_t want, const uint8_t*& p, size_t& got) {
    if (!Get(offset, want, p, got).ok()) got = 0;
  }
  // The bytes before `offset` will not be asked for again.
  virtual void Release(uint64_t offset) { (void)offset; }
  // How far the source's own check of the record chain has got. The chain
  // is the sequence of records that starts right after the segment header
  // (offset kSegmentHeaderSize), each record followed by the one at its end.
  // Every record of it that ends at or before this offset, within the bytes
  // the last Get or Window made readable, passed its header checksum, the
  // length limit and its payload checksum, so that a reader walking that
  // same chain need not compute them again. Nothing is said of any other
  // offset. 0 for a source that checks nothing: all but a plain segment
  // read ahead (OpenSegmentSource's read_ahead), whose thread checks each
  // block as it reads it.
  virtual uint64_t CheckedChainEnd() const { return 0; }
  // Whether this source checks the chain at all (CheckedChainEnd may then
  // move past 0), so that a reader of any other source keeps its plain loop.
  virtual bool ChecksChain() const { return false; }
  // Whether the bytes are decompressed from fewer (a .wal.zst): reading them
  // costs CPU out of proportion to the file, so a reader reads no further
  // than it must once they stop being records (ScanSegment).
  virtual bool Inflates() const { return false; }
  // Total size when known up front (plain files, buffers).
  virtual std::optional<uint64_t> size() const = 0;
};

// Opens a segment file read-only. `compressed` selects the zstd decoder.
// `read_ahead` reads a plain file on a thread of its own, up to four blocks
// of 1.5 MiB ahead of the reader, as the decoder does for a compressed one;
// the source then only moves forward (a Get below the last Get fails), and
// that thread also checks the record chain (CheckedChainEnd). For a reader
// that spends most of its time on each record (dump's text), so that the
// copy out of the page cache and the checksums overlap it. The path kStdinPath is
// standard input (see below).
Result<std::unique_ptr<ByteSource>> OpenSegmentSource(const std::string& path, bool compressed,
                                                      bool read_ahead = false);

// Standard input as one segment: the path of its SegmentFile, as messages
// name it (the command line says "-"). It is read with read(), so a pipe
// works; a zstd frame is recognized by its magic bytes (28 b5 2f fd), not by
// a name. Every OpenSegmentSource(kStdinPath) is a view of the same stream:
// a second open reads on where the first left off, so the first bytes (the
// header) can be looked at before the segment is read, as long as nothing
// was released.
inline constexpr const char* kStdinPath = "<stdin>";

// The bytes of WAL data in a segment file, without reading it: its size, or
// for a .wal.zst the decompressed size its zstd frame header records (the
// compressed size when the header does not say). 0 when it cannot be read.
// For progress totals; the reader never trusts it.
uint64_t SegmentDataBytes(const std::string& path, bool compressed);

// Reads from memory the caller keeps alive. With `zstd_frame` the buffer holds
// a compressed segment (used by tests and the fuzzer); it is decoded on the
// calling thread, block by block as the reader asks for bytes.
std::unique_ptr<ByteSource> MemorySource(std::span<const uint8_t> data, bool zstd_frame = false);

// Compresses a whole buffer into one zstd frame (level 1 by default).
Result<std::string> ZstdCompress(std::span<const uint8_t> data, int level = 1);

namespace detail {
// MemorySource(data, true) with another budget than kMaxSegmentBytes: a
// frame that decompresses to more than `max_bytes` is refused as a
// .wal.zst of more than kMaxSegmentBytes is. For tests of that boundary.
std::unique_ptr<ByteSource> ZstdMemorySource(std::span<const uint8_t> data, uint64_t max_bytes);
}  // namespace detail

}  // namespace walfmt
