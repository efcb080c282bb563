// libFuzzer target for the full-snapshot file reader (walfmt/snapshot.h):
// the node-<i>.snap files of DIR/snapshots/<name>/ and of a restore output,
// which a restore reads as its base.
//
// Each input is decoded whole (DecodeSnapshot) and, through a file, streamed
// (ReadSnapshotFile with a callback, the way a restore reads its base).
// Properties:
//   - no crash, exception, leak or undefined behaviour; errors are
//     kCorruption, one line;
//   - the two readers agree: both accept or both refuse, and when they accept
//     they give the same header fields, the same entries in the same order
//     and the same fingerprint;
//   - an accepted file holds what the format promises: keys strictly
//     increasing, the fingerprint equals StateFingerprint of the entries;
//   - encoding what was decoded (EncodeSnapshot) gives back the input byte
//     for byte (except the reserved header field, which a reader ignores:
//     then only bytes 58-59 and the header CRC differ), and
//     SnapshotStreamWriter writes exactly the same bytes.
//
// A custom mutator repairs the header CRC, the trailer (magic, body CRC,
// fingerprint) three times in four after libFuzzer's mutation, so that
// mutated counts, lengths and entries get past the checksums.
//
// fuzz.sh: -max_len=16384
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "fuzz/check.h"
#include "walfmt/bytes.h"
#include "walfmt/crc32c.h"
#include "walfmt/file_io.h"
#include "walfmt/segment.h"
#include "walfmt/snapshot.h"

using namespace walfmt;

namespace {

std::string g_dir;  // a private temporary directory

void Cleanup() {
  std::error_code ec;
  if (!g_dir.empty()) std::filesystem::remove_all(g_dir, ec);
}

std::string MakeTempDir() {
  const char* t = std::getenv("TMPDIR");
  std::string tmpl = std::string(t && *t ? t : "/tmp") + "/walcut-fuzz-snap-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) {
    std::perror("mkdtemp");
    std::abort();
  }
  return buf.data();
}

void WriteRaw(const std::string& path, const uint8_t* data, size_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  Check(f != nullptr, "cannot create " + path);
  Check(size == 0 || std::fwrite(data, 1, size, f) == size, "cannot write " + path);
  Check(std::fclose(f) == 0, "cannot close " + path);
}

void CheckError(const Status& st, const std::string& what) {
  Check(st.code() == ErrorCode::kCorruption, what + ": error is not kCorruption: " + st.message());
  Check(st.message().find('\n') == std::string::npos, what + ": error spans lines: " + st.message());
}

void Put16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }
void Put64(uint8_t* p, uint64_t v) { std::memcpy(p, &v, 8); }

bool SameHeader(const SnapshotFile& a, const SnapshotFile& b) {
  return a.node_id == b.node_id && a.cluster_id == b.cluster_id && a.wal_position == b.wal_position &&
         a.time_us == b.time_us && a.name == b.name && a.fingerprint == b.fingerprint;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_dir = MakeTempDir();
  std::atexit(Cleanup);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  auto whole = DecodeSnapshot(bytes);

  const std::string path = g_dir + "/node-0.snap";
  WriteRaw(path, data, size);
  std::vector<std::pair<std::string, std::string>> streamed;
  auto stream = ReadSnapshotFile(path, [&streamed](std::string_view k, std::string_view v) {
    streamed.emplace_back(std::string(k), std::string(v));
  });
  Check(whole.ok() == stream.ok(), "DecodeSnapshot and the streaming reader disagree: " +
                                       (whole.ok() ? stream.status().message() : whole.status().message()));
  if (!whole.ok()) {
    CheckError(whole.status(), "decode");
    CheckError(stream.status(), "stream");
    Check(stream.status().message().rfind(path, 0) == 0,
          "stream error does not name the file: " + stream.status().message());
    return 0;
  }
  SnapshotFile& s = *whole;
  Check(SameHeader(s, *stream), "the streaming reader gives other header fields");
  Check(stream->entries.empty(), "the streaming reader built a map");
  Check(streamed.size() == s.entries.size(), "the streaming reader gives another number of entries");
  size_t i = 0;
  for (const auto& [k, v] : s.entries) {
    Check(streamed[i].first == k && streamed[i].second == v, "the streaming reader gives another entry");
    ++i;
  }
  Check(s.fingerprint == StateFingerprint(s.entries), "fingerprint is not StateFingerprint of the entries");
  Check(LoadU64(data + 24) == s.entries.size(), "entry count differs from the entries read");

  // Encode what was decoded: the same bytes (up to the reserved field).
  SnapshotFile copy = s;
  auto enc = EncodeSnapshot(copy);
  Check(enc.ok(), "a decoded snapshot does not encode: " + enc.status().message());
  Check(copy.fingerprint == s.fingerprint, "encoding computes another fingerprint");
  std::string want = bytes;
  if (LoadU16(data + 58) != 0) {
    want[58] = want[59] = 0;
    const uint32_t crc = MaskCrc(crc32c::Value(want.data(), 60));
    for (int b = 0; b < 4; ++b) want[60 + b] = static_cast<char>(crc >> (8 * b));
  }
  Check(*enc == want, "decode -> encode changed the bytes");

  // The streaming writer writes the same file.
  const std::string out = g_dir + "/out.snap";
  auto w = SnapshotStreamWriter::Create(out, s, s.entries.size());
  Check(w.ok(), "stream writer: " + w.status().message());
  for (const auto& [k, v] : s.entries) {
    const Status st = (*w)->Add(k, v);
    Check(st.ok(), "stream writer add: " + st.message());
  }
  auto fp = (*w)->Finish();
  Check(fp.ok() && *fp == s.fingerprint, "stream writer finish");
  auto written = ReadWholeFile(out, 1u << 24);
  Check(written.ok() && *written == want, "SnapshotStreamWriter wrote other bytes than EncodeSnapshot");
  return 0;
}

// ---------------------------------------------------------------------------
// Custom mutator: mutate, then (3 times in 4) make the header CRC, the trailer
// magic, the body CRC and the fingerprint right for the mutated bytes.

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  std::minstd_rand rng(seed);
  size = LLVMFuzzerMutate(data, size, max_size);
  if (rng() % 4 == 0 || size < kSnapshotHeaderSize + kSnapshotTrailerSize) return size;
  std::memcpy(data, "WALCUTSN", 8);
  if (rng() % 8 != 0) {
    Put16(data + 8, kSnapshotVersion);
    Put16(data + 10, kSnapshotHeaderSize);
  }
  const size_t end = size - kSnapshotTrailerSize;
  const size_t name_len = LoadU16(data + 56);
  const size_t entries_at = kSnapshotHeaderSize + std::min(name_len, end - kSnapshotHeaderSize);
  if (rng() % 2 == 0) {
    // Count the entries that fit: the count then agrees with the body.
    uint64_t n = 0;
    size_t at = entries_at;
    while (at + 6 <= end) {
      const size_t kl = LoadU16(data + at);
      if (at + 2 + kl + 4 > end) break;
      const size_t vl = LoadU32(data + at + 2 + kl);
      if (vl > end - (at + 6 + kl)) break;
      at += 6 + kl + vl;
      ++n;
    }
    Put64(data + 24, n);
  }
  StoreU32(data + 60, MaskCrc(crc32c::Value(data, 60)));
  std::memcpy(data + end, "SNEN", 4);
  StoreU32(data + end + 4, MaskCrc(crc32c::Value(data + kSnapshotHeaderSize, end - kSnapshotHeaderSize)));
  uint64_t h = 0xCBF29CE484222325ull;
  for (size_t i = entries_at; i < end; ++i) {
    h ^= data[i];
    h *= 0x100000001B3ull;
  }
  Put64(data + end + 8, h);
  return size;
}
