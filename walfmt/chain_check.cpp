#include "walfmt/chain_check.h"

#include <algorithm>
#include <cstring>

#include "walfmt/bytes.h"
#include "walfmt/crc32c.h"
#include "walfmt/record_crc.h"

namespace walfmt::detail {

void ChainCheck::Feed(const uint8_t* p, size_t n) {
  const uint64_t base = pos_;
  pos_ += n;
  const bool hw = crc32c::HardwareAccelerated();
  while (!broken_) {
    if (in_payload_) {
      // The rest of a payload that started in an earlier piece.
      const uint64_t at = next_ + kRecordHeaderSize + (payload_len_ - payload_left_);
      if (at >= pos_) return;
      const uint8_t* q = p + (at - base);
      const size_t take = static_cast<size_t>(std::min<uint64_t>(payload_left_, pos_ - at));
      payload_crc_ = crc32c::Extend(payload_crc_, q, take);
      payload_left_ -= static_cast<uint32_t>(take);
      if (payload_left_ > 0) return;
      PayloadComplete();
      continue;
    }
    const uint64_t at = next_ + header_have_;
    if (at >= pos_) return;
    const uint8_t* q = p + (at - base);
    const size_t avail = static_cast<size_t>(pos_ - at);
    if (header_have_ == 0 && avail >= kRecordHeaderSize) {
      // The header in place; with its payload, the whole record at once.
      const uint32_t len = LoadU32(q + 4);
      const uint32_t hcrc = hw ? HeaderCrc<true>(q) : HeaderCrc<false>(q);
      if (LoadU32(q) != hcrc || len > kMaxRecordPayload) {
        broken_ = true;
        return;
      }
      if (avail - kRecordHeaderSize >= len) {
        const uint32_t pcrc =
            hw ? PayloadCrc<true>(q + kRecordHeaderSize, len) : PayloadCrc<false>(q + kRecordHeaderSize, len);
        if (MaskCrc(pcrc) != LoadU32(q + 12)) {
          broken_ = true;
          return;
        }
        next_ += kRecordHeaderSize + len;
        continue;
      }
      HeaderComplete(q);
      continue;
    }
    // A header split between pieces: gather it.
    const size_t take = std::min(kRecordHeaderSize - header_have_, avail);
    std::memcpy(header_ + header_have_, q, take);
    header_have_ += take;
    if (header_have_ < kRecordHeaderSize) return;
    HeaderComplete(header_);
  }
}

// A record's header, all 16 bytes of it, whose payload is not all here.
void ChainCheck::HeaderComplete(const uint8_t* h) {
  const uint32_t len = LoadU32(h + 4);
  if (LoadU32(h) != ComputeRecordHeaderCrc(h) || len > kMaxRecordPayload) {
    broken_ = true;
    return;
  }
  header_have_ = 0;
  payload_len_ = len;
  payload_left_ = len;
  payload_crc_ = 0;
  want_crc_ = LoadU32(h + 12);
  in_payload_ = true;
  if (len == 0) PayloadComplete();
}

void ChainCheck::PayloadComplete() {
  in_payload_ = false;
  if (MaskCrc(payload_crc_) != want_crc_) {
    broken_ = true;
    return;
  }
  next_ += kRecordHeaderSize + payload_len_;
}

}  // namespace walfmt::detail
