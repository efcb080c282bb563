// Byte sources for segment files: a read-only memory map for plain segments
// (zero-copy), a streaming zstd decoder for archived ones, and an in-memory
// buffer for tests and fuzzing. Memory stays bounded by the largest record,
// not by the file: the map drops pages the reader has passed, the decoder
// keeps a sliding window.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "walfmt/status.h"

namespace walfmt {

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Makes bytes [offset, offset + n) readable at `p`. Sets `got` to n, or to
  // fewer when the data ends first (0 at the end). Offsets only move forward:
  // `offset` is never below the last Release(). Fails on read or decode errors.
  virtual Status Get(uint64_t offset, size_t n, const uint8_t*& p, size_t& got) = 0;
  // The bytes before `offset` will not be asked for again.
  virtual void Release(uint64_t offset) { (void)offset; }
  // Total size when known up front (plain files, buffers).
  virtual std::optional<uint64_t> size() const = 0;
  // The whole data as one readable range, when the source has it (a map, a
  // buffer): readers then walk it without a call per record. Release() still
  // applies.
  virtual bool Contiguous(const uint8_t*& base, uint64_t& size) const {
    (void)base;
    (void)size;
    return false;
  }
};

// Opens a segment file read-only. `compressed` selects the zstd decoder.
Result<std::unique_ptr<ByteSource>> OpenSegmentSource(const std::string& path, bool compressed);

// Reads from memory the caller keeps alive. With `zstd_frame` the buffer holds
// a compressed segment (used by tests and the fuzzer).
std::unique_ptr<ByteSource> MemorySource(std::span<const uint8_t> data, bool zstd_frame = false);

// Compresses a whole buffer into one zstd frame (level 1 by default).
Result<std::string> ZstdCompress(std::span<const uint8_t> data, int level = 1);

}  // namespace walfmt
