// crcfloor: the bare loop that bounds `walcut stats` / `walcut verify` on
// this machine. Maps each plain segment file, walks its records by their
// length fields and checks both checksums of each (header and payload, with
// walfmt's CRC32C), nothing else: no recovery logic, no visitor, no
// accounting. Prints records, bytes, seconds and the rates.
//
//   crcfloor FILE...        (plain .wal segments; other files are skipped)
//
// Exit 1 when a checksum does not match or a length runs past the file.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>

#include "walfmt/bytes.h"
#include "walfmt/crc32c.h"
#include "walfmt/segment.h"

using namespace walfmt;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: crcfloor FILE...\n");
    return 2;
  }
  uint64_t records = 0, bytes = 0, bad = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 1; i < argc; ++i) {
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
    void* m = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
      std::perror(path.c_str());
      return 3;
    }
    madvise(m, size, MADV_SEQUENTIAL);
    const auto* base = static_cast<const uint8_t*>(m);
    size_t off = kSegmentHeaderSize;
    while (off + kRecordHeaderSize <= size) {
      const uint8_t* h = base + off;
      const uint32_t len = LoadU32(h + 4);
      if (len > size - off - kRecordHeaderSize) {
        ++bad;
        break;
      }
      bad += MaskCrc(crc32c::Value(h + 4, kRecordHeaderSize - 4)) != LoadU32(h);
      bad += MaskCrc(crc32c::Value(h + kRecordHeaderSize, len)) != LoadU32(h + 12);
      ++records;
      off += kRecordHeaderSize + len;
    }
    bytes += size;
    munmap(m, size);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("{\"records\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"seconds\":%.4f,\"records_per_s\":%.0f,\"gb_per_s\":%.3f,"
              "\"bad\":%" PRIu64 ",\"hw_crc\":%s}\n",
              records, bytes, s, static_cast<double>(records) / s, static_cast<double>(bytes) / s / 1e9, bad,
              crc32c::HardwareAccelerated() ? "true" : "false");
  return bad == 0 ? 0 : 1;
}
