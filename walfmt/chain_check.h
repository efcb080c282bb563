// The chain check of a segment's records as its bytes stream past (the
// read-ahead thread runs it on each block it reads, so that the reader need
// not checksum those records again). Internal to walfmt.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "walfmt/segment.h"
#include "walfmt/source.h"

namespace walfmt::detail {

// The chain of a segment is the sequence of records that starts right after
// the segment header (offset kSegmentHeaderSize), each record followed by
// the one at its end. A ChainCheck is fed the segment's bytes in order, in
// pieces of any size, and checks each record of the chain as its last byte
// arrives: header checksum, a length within kMaxRecordPayload, payload
// checksum. It stops at the first record that fails (or at the end of the
// bytes): verified_end() is then the end of the last record that passed.
// It checks nothing else: not the segment header, not the record's type.
class ChainCheck {
 public:
  // The next `n` bytes of the segment (the first call gives offset 0).
  void Feed(const uint8_t* p, size_t n);
  // Every record of the chain that ends at or before this offset passed its
  // checks; kSegmentHeaderSize before the first record passed.
  uint64_t verified_end() const { return next_; }

 private:
  void HeaderComplete(const uint8_t* h);
  void PayloadComplete();

  uint64_t pos_ = 0;                    // offset of the next byte fed
  uint64_t next_ = kSegmentHeaderSize;  // start of the record being put together
  bool broken_ = false;                 // a record failed: nothing more is checked
  uint8_t header_[kRecordHeaderSize] = {};
  size_t header_have_ = 0;   // bytes of a header split between pieces
  bool in_payload_ = false;  // its header is in and passed; the payload arrives
  uint32_t payload_len_ = 0;
  uint32_t payload_left_ = 0;
  uint32_t payload_crc_ = 0;  // CRC32C of the payload bytes so far (unmasked)
  uint32_t want_crc_ = 0;     // the header's payload_crc (masked)
};

// The read-ahead's source over bytes in memory, on the calling thread: the
// data handed out `block_bytes` at a time (at most the read-ahead's block
// size), each piece fed to a ChainCheck as the read-ahead does. For tests.
std::unique_ptr<ByteSource> CheckedMemorySource(std::span<const uint8_t> data, size_t block_bytes);

}  // namespace walfmt::detail
