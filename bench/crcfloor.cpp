// crcfloor: the bare loop that bounds `walcut stats` / `walcut verify` on
// this machine. Maps each plain segment file, walks its records by their
// length fields and checks both checksums of each (header and payload, with
// walfmt's CRC32C), nothing else: no recovery logic, no visitor, no
// accounting. Prints records, bytes, seconds and the rates.
//
//   crcfloor [--populate | --read [--block BYTES] [--rescan]]
//            [--inline-header-crc | --reader-crc] FILE...
//            (plain .wal segments; others are skipped)
//
// How the bytes come in: by default a plain mmap with MADV_SEQUENTIAL (page
// faults map 16 pages at a time, as walfmt's reader did until it moved to
// pread); --populate maps each 8 MiB window ahead with MADV_POPULATE_READ (one
// call instead of ~128 faults); --read reads 1 MiB blocks into one buffer (a
// copy, like cat, and like walfmt's reader, which reads 256 KiB at a time);
// --block sets that size.
//
// --rescan (with --read) checks every block a second time right after the
// first, and times both passes apart ("scan_seconds", "rescan_seconds"):
// the second pass reads bytes the first has just brought into the caches,
// so the difference is what reading bytes fresh from read() costs over
// reading them from the cache.
//
// Both checksums go through crc32c::Value, as ComputeRecordHeaderCrc and
// ComputePayloadCrc do. --inline-header-crc computes the 12-byte header
// checksum with two inline crc32 instructions instead, as walfmt's reader
// does on CPUs that have them (about 20 instructions less per record).
// The payload checksum is crc32c::Value, the function walfmt computes every
// checksum with (three interleaved chains from 256 bytes on, one below).
// The reader runs the same one-chain code inline below 256 bytes
// (detail::PayloadCrc), without the call; --reader-crc computes both
// checksums exactly as the reader does (HeaderCrc and PayloadCrc).
//
// Exit 1 when a checksum does not match or a length runs past the file.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "walfmt/bytes.h"
#include "walfmt/crc32c.h"
#include "walfmt/record_crc.h"
#include "walfmt/segment.h"

using namespace walfmt;

namespace {

// The reader's inline header checksum (walfmt/record_crc.h).
uint32_t InlineHeaderCrc(const uint8_t* p) { return detail::HeaderCrc<true>(p); }
// The reader's inline payload checksum (walfmt/record_crc.h).
uint32_t InlinePayloadCrc(const uint8_t* p, size_t n) { return detail::PayloadCrc<true>(p, n); }

}  // namespace

int main(int argc, char** argv) {
  enum class Mode { kMmap, kPopulate, kRead } mode = Mode::kMmap;
  bool inline_header = false, inline_payload = false, rescan = false;
  size_t block = size_t{1} << 20;
  int first = 1;
  for (; first < argc && std::strncmp(argv[first], "--", 2) == 0; ++first) {
    if (std::strcmp(argv[first], "--populate") == 0) {
      mode = Mode::kPopulate;
    } else if (std::strcmp(argv[first], "--read") == 0) {
      mode = Mode::kRead;
    } else if (std::strcmp(argv[first], "--rescan") == 0) {
      rescan = true;
    } else if (std::strcmp(argv[first], "--block") == 0 && first + 1 < argc) {
      char* end = nullptr;
      block = std::strtoull(argv[++first], &end, 10);
      if (*end != '\0' || block < 4096 || block > (size_t{64} << 20)) {
        std::fprintf(stderr, "crcfloor: --block wants a byte count from 4096 to 64 MiB\n");
        return 2;
      }
    } else if (std::strcmp(argv[first], "--inline-header-crc") == 0) {
      inline_header = crc32c::HardwareAccelerated();
    } else if (std::strcmp(argv[first], "--reader-crc") == 0) {
      inline_header = inline_payload = crc32c::HardwareAccelerated();
    } else {
      std::fprintf(stderr, "crcfloor: unknown option %s\n", argv[first]);
      return 2;
    }
  }
  if (first >= argc) {
    std::fprintf(stderr,
                 "usage: crcfloor [--populate | --read [--block BYTES] [--rescan]] [--inline-header-crc | "
                 "--reader-crc] FILE...\n");
    return 2;
  }
  uint64_t records = 0, bytes = 0, bad = 0;
  double scan_s = 0, rescan_s = 0;
  std::vector<uint8_t> buf;
  // Checks the records of [p, p + n); returns how many bytes they cover.
  auto scan_with = [&](auto inline_crc, auto inline_payload, const uint8_t* p, size_t n, size_t off) {
    while (off + kRecordHeaderSize <= n) {
      const uint8_t* h = p + off;
      const uint32_t len = LoadU32(h + 4);
      if (len > n - off - kRecordHeaderSize) break;
      if constexpr (decltype(inline_crc)::value) {
        bad += InlineHeaderCrc(h) != LoadU32(h);
      } else {
        bad += MaskCrc(crc32c::Value(h + 4, kRecordHeaderSize - 4)) != LoadU32(h);
      }
      if constexpr (decltype(inline_payload)::value) {
        bad += MaskCrc(InlinePayloadCrc(h + kRecordHeaderSize, len)) != LoadU32(h + 12);
      } else {
        bad += MaskCrc(crc32c::Value(h + kRecordHeaderSize, len)) != LoadU32(h + 12);
      }
      ++records;
      off += kRecordHeaderSize + len;
    }
    return off;
  };
  auto scan = [&](const uint8_t* p, size_t n, size_t off) {
    if (inline_payload) return scan_with(std::true_type{}, std::true_type{}, p, n, off);
    return inline_header ? scan_with(std::true_type{}, std::false_type{}, p, n, off)
                         : scan_with(std::false_type{}, std::false_type{}, p, n, off);
  };
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = first; i < argc; ++i) {
    const std::string path = argv[i];
    if (path.size() < 4 || path.compare(path.size() - 4, 4, ".wal") != 0) continue;
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat sb {};
    if (fd < 0 || fstat(fd, &sb) != 0) {
      std::perror(path.c_str());
      return 3;
    }
    const auto size = static_cast<size_t>(sb.st_size);
    if (size < kSegmentHeaderSize) {
      close(fd);
      continue;
    }
    if (mode == Mode::kRead) {
      // Blocks of `block` bytes; a record cut by the block end moves to the
      // front.
      buf.resize(block + kMaxRecordPayload + kRecordHeaderSize);
      size_t have = 0, start = kSegmentHeaderSize, done = 0;
      for (;;) {
        const ssize_t r = read(fd, buf.data() + have, block);
        if (r < 0) {
          std::perror(path.c_str());
          return 3;
        }
        have += static_cast<size_t>(r);
        const auto s0 = std::chrono::steady_clock::now();
        const size_t end = scan(buf.data(), have, start);
        const auto s1 = std::chrono::steady_clock::now();
        scan_s += std::chrono::duration<double>(s1 - s0).count();
        if (rescan) {
          const uint64_t counted = records, wrong = bad;
          scan(buf.data(), have, start);
          records = counted;  // counted once
          bad = wrong;
          rescan_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - s1).count();
        }
        if (r == 0) {
          if (end != have) ++bad;
          break;
        }
        std::memmove(buf.data(), buf.data() + end, have - end);
        done += end;
        have -= end;
        start = 0;
      }
      (void)done;
      close(fd);
      bytes += size;
      continue;
    }
    void* m = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
      std::perror(path.c_str());
      return 3;
    }
    madvise(m, size, MADV_SEQUENTIAL);
    const auto* base = static_cast<const uint8_t*>(m);
    size_t off = kSegmentHeaderSize;
    if (mode == Mode::kPopulate) {
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
      constexpr size_t kWindow = 8u << 20;
      for (size_t w = 0; w < size; w += kWindow) {
        madvise(const_cast<uint8_t*>(base) + w, std::min(kWindow, size - w), MADV_POPULATE_READ);
        off = scan(base, std::min(size, w + kWindow + kMaxRecordPayload + kRecordHeaderSize), off);
        if (off < w + kWindow && w + kWindow < size) break;  // a length past the window: damage
      }
      off = scan(base, size, off);
    } else {
      off = scan(base, size, off);
    }
    if (off != size) ++bad;
    bytes += size;
    munmap(m, size);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("{\"records\":%" PRIu64 ",\"bytes\":%" PRIu64
              ",\"seconds\":%.4f,\"records_per_s\":%.0f,\"gb_per_s\":%.3f,"
              "\"bad\":%" PRIu64 ",\"hw_crc\":%s",
              records, bytes, s, static_cast<double>(records) / s, static_cast<double>(bytes) / s / 1e9, bad,
              crc32c::HardwareAccelerated() ? "true" : "false");
  if (mode == Mode::kRead) std::printf(",\"block\":%zu,\"scan_seconds\":%.4f", block, scan_s);
  if (rescan) std::printf(",\"rescan_seconds\":%.4f", rescan_s);
  std::printf("}\n");
  return bad == 0 ? 0 : 1;
}
