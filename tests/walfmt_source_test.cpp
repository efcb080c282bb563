// Byte sources (source.h): the memory buffer, the pread window and the
// streaming zstd decoder agree byte for byte under the reader's access
// pattern; bad zstd input is an error, never a crash.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <zstd.h>
#include <catch2/catch.hpp>

#include "test_files.h"
#include "walfmt/segment.h"
#include "walfmt/source.h"

namespace {

using namespace walfmt;
using walcut::testing::ReadFileBytes;
using walcut::testing::TempDir;
using walcut::testing::WriteFileBytes;

std::span<const uint8_t> Span(const std::string& s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }

// Compressible but not trivial: records-like runs of text and random bytes.
std::string TestData(std::mt19937_64& rng, size_t n) {
  std::string s;
  while (s.size() < n) {
    if (rng() % 3 == 0) {
      for (int i = 0; i < 50; ++i) s.push_back(static_cast<char>(rng()));
    } else {
      s += "key-" + std::to_string(rng() % 1000) + "=value;";
    }
  }
  s.resize(n);
  return s;
}

// Reads the whole source the way the reader does: forward, in steps of
// varying size, sometimes re-reading the start of the last step.
std::string ReadLikeTheReader(ByteSource& src, std::mt19937_64& rng, Status& st) {
  std::string out;
  uint64_t off = 0;
  for (;;) {
    const size_t n = 1 + rng() % 70000;
    const uint8_t* p = nullptr;
    size_t got = 0;
    st = src.Get(off, n, p, got);
    if (!st.ok()) return out;
    if (got == 0) return out;
    REQUIRE(got <= n);
    // Look at the same bytes again with a shorter request (header, then record).
    const uint8_t* p2 = nullptr;
    size_t got2 = 0;
    st = src.Get(off, std::min<size_t>(got, 16), p2, got2);
    if (!st.ok()) return out;
    REQUIRE(got2 == std::min<size_t>(got, 16));
    REQUIRE(std::equal(p2, p2 + got2, p));
    out.append(reinterpret_cast<const char*>(p), got);
    off += got;
    src.Release(off);
  }
}

}  // namespace

TEST_CASE("source: memory, pread and zstd sources return the same bytes", "[source]") {
  const uint64_t seed = 0x50C0001;
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  // Larger than zstd's 128 KiB block and input buffer, so the decoder's
  // window slides and refills many times.
  const std::string data = TestData(rng, 3 << 20);
  auto packed = ZstdCompress(Span(data), 3);
  REQUIRE(packed.ok());
  CHECK(packed->size() < data.size());
  TempDir tmp;
  WriteFileBytes(tmp.path() + "/plain", data);
  WriteFileBytes(tmp.path() + "/packed", *packed);

  auto mem = MemorySource(Span(data));
  auto zmem = MemorySource(Span(*packed), true);
  auto map = OpenSegmentSource(tmp.path() + "/plain", false);
  auto ahead = OpenSegmentSource(tmp.path() + "/plain", false, true);
  auto zfile = OpenSegmentSource(tmp.path() + "/packed", true);
  REQUIRE(map.ok());
  REQUIRE(ahead.ok());
  REQUIRE(zfile.ok());
  CHECK(mem->size() == data.size());
  CHECK((*map)->size() == data.size());
  CHECK((*ahead)->size() == data.size());
  CHECK_FALSE(zmem->size().has_value());
  CHECK_FALSE((*zfile)->size().has_value());
  for (ByteSource* src : {mem.get(), zmem.get(), map->get(), ahead->get(), zfile->get()}) {
    Status st;
    const std::string back = ReadLikeTheReader(*src, rng, st);
    INFO(st.message());
    CHECK(st.ok());
    CHECK(back.size() == data.size());
    CHECK(back == data);
  }
}

TEST_CASE("source: reads past the end and backwards", "[source]") {
  const std::string data = "0123456789";
  auto mem = MemorySource(Span(data));
  const uint8_t* p = nullptr;
  size_t got = 99;
  REQUIRE(mem->Get(8, 16, p, got).ok());
  CHECK(got == 2);
  CHECK(std::string(reinterpret_cast<const char*>(p), got) == "89");
  REQUIRE(mem->Get(10, 16, p, got).ok());
  CHECK(got == 0);
  REQUIRE(mem->Get(1000, 16, p, got).ok());
  CHECK(got == 0);

  auto packed = ZstdCompress(Span(data));
  REQUIRE(packed.ok());
  auto z = MemorySource(Span(*packed), true);
  REQUIRE(z->Get(3, 4, p, got).ok());
  CHECK(std::string(reinterpret_cast<const char*>(p), got) == "3456");
  REQUIRE(z->Get(8, 16, p, got).ok());
  CHECK(std::string(reinterpret_cast<const char*>(p), got) == "89");
  REQUIRE(z->Get(10, 16, p, got).ok());
  CHECK(got == 0);
  // Behind the window: an error, not stale bytes.
  const Status back = z->Get(0, 4, p, got);
  CHECK(back.code() == ErrorCode::kInternal);
}

TEST_CASE("source: bad zstd input", "[source]") {
  const uint64_t seed = 0x50C0002;
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  const std::string data = TestData(rng, 400000);
  auto packed = ZstdCompress(Span(data));
  REQUIRE(packed.ok());

  auto read_all = [&](const std::string& input, std::string& out) {
    auto z = MemorySource(Span(input), true);
    std::mt19937_64 r2(1);
    Status st;
    out = ReadLikeTheReader(*z, r2, st);
    return st;
  };
  std::string out;
  SECTION("empty") {
    const Status st = read_all("", out);
    CHECK(st.code() == ErrorCode::kCorruption);
    CHECK(st.message() == "<memory>: empty file, not a zstd frame");
    CHECK(out.empty());
  }
  SECTION("truncated at many points: an error, and only a prefix of the data before it") {
    for (size_t cut = 1; cut < packed->size(); cut += 1 + cut / 8) {
      INFO("cut at " << cut << " of " << packed->size());
      const Status st = read_all(packed->substr(0, cut), out);
      CHECK(st.code() == ErrorCode::kCorruption);
      CHECK(st.message().rfind("<memory>: zstd frame cut short after ", 0) == 0);
      CHECK(out.size() < data.size());
      CHECK(data.compare(0, out.size(), out) == 0);
    }
  }
  SECTION("garbage after a complete frame") {
    const Status st = read_all(*packed + "trailing garbage", out);
    CHECK(st.code() == ErrorCode::kCorruption);
    CHECK(st.message().find("zstd") != std::string::npos);
    CHECK(data.compare(0, out.size(), out) == 0);
  }
  SECTION("two frames back to back are one stream") {
    auto second = ZstdCompress(Span(std::string("tail")));
    REQUIRE(second.ok());
    const Status st = read_all(*packed + *second, out);
    CHECK(st.ok());
    CHECK(out == data + "tail");
  }
  SECTION("a frame of zeros larger than any segment (a zstd bomb) is refused at the segment limit") {
    // 1 GiB + 1 MiB of zeros compress to a few tens of KiB.
    ZSTD_CCtx* cctx = ZSTD_createCCtx();
    REQUIRE(cctx != nullptr);
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 1);
    const std::string zeros(1u << 20, '\0');
    std::string bomb(ZSTD_CStreamOutSize(), '\0');
    std::string frame;
    for (int i = 0; i <= 1024; ++i) {
      ZSTD_inBuffer in{zeros.data(), zeros.size(), 0};
      const ZSTD_EndDirective end = i == 1024 ? ZSTD_e_end : ZSTD_e_continue;
      for (bool done = false; !done;) {
        ZSTD_outBuffer o{bomb.data(), bomb.size(), 0};
        const size_t left = ZSTD_compressStream2(cctx, &o, &in, end);
        REQUIRE_FALSE(ZSTD_isError(left));
        frame.append(bomb.data(), o.pos);
        done = end == ZSTD_e_end ? left == 0 : in.pos == in.size;
      }
    }
    ZSTD_freeCCtx(cctx);
    CHECK(frame.size() < (1u << 20));
    // From memory (decoded on this thread) and from a file (decoded ahead on
    // another): refused at the limit either way.
    TempDir tmp;
    WriteFileBytes(tmp.path() + "/bomb.wal.zst", frame);
    auto file = OpenSegmentSource(tmp.path() + "/bomb.wal.zst", true);
    REQUIRE(file.ok());
    auto mem = MemorySource(Span(frame), true);
    for (ByteSource* z : {mem.get(), file->get()}) {
      uint64_t at = 0;
      Status st;
      for (;;) {
        const uint8_t* p = nullptr;
        size_t got = 0;
        st = z->Get(at, 1u << 20, p, got);
        if (!st.ok() || got == 0) break;
        at += got;
        z->Release(at);
      }
      CHECK(st.code() == ErrorCode::kCorruption);
      CHECK(st.message().find("decompresses to more than 1073741824 bytes, the most a segment may hold") !=
            std::string::npos);
      CHECK(at <= walfmt::kMaxSegmentBytes);
      CHECK(at > walfmt::kMaxSegmentBytes - (4u << 20));  // everything up to the limit arrived
    }
  }
  SECTION("random bytes") {
    for (size_t n : {1u, 3u, 4u, 13u, 1000u}) {
      std::string junk(n, '\0');
      for (char& c : junk) c = static_cast<char>(rng());
      INFO(n << " random bytes");
      const Status st = read_all(junk, out);
      CHECK(st.code() == ErrorCode::kCorruption);
      CHECK(out.empty());
    }
  }
}

TEST_CASE("source: opening files", "[source]") {
  TempDir tmp;
  auto missing = OpenSegmentSource(tmp.path() + "/nope.wal", false);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == ErrorCode::kNotFound);
  CHECK(missing.status().message() == tmp.path() + "/nope.wal: open: No such file or directory");
  auto dir = OpenSegmentSource(tmp.path(), false);
  REQUIRE_FALSE(dir.ok());
  CHECK(dir.status().code() == ErrorCode::kIo);
  CHECK(dir.status().message() == tmp.path() + ": not a regular file");

  WriteFileBytes(tmp.path() + "/empty.wal", "");
  auto empty = OpenSegmentSource(tmp.path() + "/empty.wal", false);
  REQUIRE(empty.ok());
  CHECK((*empty)->size() == 0u);
  const uint8_t* p = nullptr;
  size_t got = 5;
  REQUIRE((*empty)->Get(0, 64, p, got).ok());
  CHECK(got == 0);

  WriteFileBytes(tmp.path() + "/empty.wal.zst", "");
  auto zempty = OpenSegmentSource(tmp.path() + "/empty.wal.zst", true);
  REQUIRE(zempty.ok());
  const Status st = (*zempty)->Get(0, 64, p, got);
  CHECK(st.code() == ErrorCode::kCorruption);
  CHECK(st.message() == tmp.path() + "/empty.wal.zst: empty file, not a zstd frame");
}

namespace {

// Walks the whole source the way the reader's fast path does: a Window at
// each position, taking a random part of what it holds, sometimes asking for
// more than it holds (a record cut by the window's end).
std::string WalkWindows(ByteSource& src, std::mt19937_64& rng) {
  std::string out;
  uint64_t off = 0;
  for (;;) {
    const size_t want = rng() % 4 == 0 ? 1 + rng() % kMaxGetBytes : 16;
    const uint8_t* p = nullptr;
    size_t got = 0;
    src.Window(off, want, p, got);
    if (got == 0) return out;
    if (got < want) {
      // Fewer than asked: only at the end of the data, which Get confirms.
      const uint8_t* q = nullptr;
      size_t got2 = 0;
      REQUIRE(src.Get(off, want, q, got2).ok());
      REQUIRE(got2 == got);
      REQUIRE(std::equal(q, q + got2, p));
    }
    const size_t take = 1 + rng() % got;
    out.append(reinterpret_cast<const char*>(p), take);
    off += take;
  }
}

}  // namespace

TEST_CASE("source: windows hold what Get returns, across block and window boundaries", "[source]") {
  const uint64_t seed = 0x50C0003;
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  // Several of the plain reader's 2 MiB windows and many 512 KiB zstd blocks.
  const std::string data = TestData(rng, 7 << 20);
  auto packed = ZstdCompress(Span(data), 1);
  REQUIRE(packed.ok());
  TempDir tmp;
  WriteFileBytes(tmp.path() + "/plain", data);
  WriteFileBytes(tmp.path() + "/packed", *packed);
  for (int round = 0; round < 3; ++round) {
    auto mem = MemorySource(Span(data));
    auto zmem = MemorySource(Span(*packed), true);
    auto plain = OpenSegmentSource(tmp.path() + "/plain", false);
    auto ahead = OpenSegmentSource(tmp.path() + "/plain", false, true);
    auto zfile = OpenSegmentSource(tmp.path() + "/packed", true);
    REQUIRE(plain.ok());
    REQUIRE(ahead.ok());
    REQUIRE(zfile.ok());
    for (ByteSource* src : {mem.get(), zmem.get(), plain->get(), ahead->get(), zfile->get()}) {
      INFO("round " << round);
      CHECK(WalkWindows(*src, rng) == data);
    }
  }
}

TEST_CASE("source: the largest record at every kind of position", "[source]") {
  const uint64_t seed = 0x50C0004;
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  const std::string data = TestData(rng, 6 << 20);
  auto packed = ZstdCompress(Span(data), 1);
  REQUIRE(packed.ok());
  TempDir tmp;
  WriteFileBytes(tmp.path() + "/plain", data);
  WriteFileBytes(tmp.path() + "/packed", *packed);
  auto plain = OpenSegmentSource(tmp.path() + "/plain", false);
  auto ahead = OpenSegmentSource(tmp.path() + "/plain", false, true);
  auto zfile = OpenSegmentSource(tmp.path() + "/packed", true);
  REQUIRE(plain.ok());
  REQUIRE(ahead.ok());
  REQUIRE(zfile.ok());
  for (ByteSource* src : {plain->get(), ahead->get(), zfile->get()}) {
    // Forward by odd steps, each Get the most one may ask for.
    for (uint64_t off = 1; off < data.size(); off += 1 + rng() % (700u << 10)) {
      INFO("offset " << off);
      const uint8_t* p = nullptr;
      size_t got = 0;
      REQUIRE(src->Get(off, kMaxGetBytes, p, got).ok());
      const size_t expect = std::min<size_t>(kMaxGetBytes, data.size() - off);
      REQUIRE(got == expect);
      CHECK(std::memcmp(p, data.data() + off, got) == 0);
    }
    const uint8_t* p = nullptr;
    size_t got = 0;
    CHECK(src->Get(data.size() - 1, kMaxGetBytes + 1, p, got).code() == ErrorCode::kInternal);
  }
  // The plain reader can go back (it reads the file again); read ahead, it
  // cannot, and says so rather than hand out other bytes.
  const uint8_t* p = nullptr;
  size_t got = 0;
  REQUIRE((*plain)->Get(5, 100, p, got).ok());
  REQUIRE(got == 100);
  CHECK(std::memcmp(p, data.data() + 5, 100) == 0);
  CHECK((*ahead)->Get(5, 100, p, got).code() == ErrorCode::kInternal);
}

TEST_CASE("source: a .wal.zst file decoded ahead on a thread", "[source]") {
  const uint64_t seed = 0x50C0005;
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  const std::string data = TestData(rng, 5 << 20);
  auto packed = ZstdCompress(Span(data), 1);
  REQUIRE(packed.ok());
  TempDir tmp;
  SECTION("left early: closing it stops the decoder (no hang, no leak under the sanitizers)") {
    WriteFileBytes(tmp.path() + "/packed", *packed);
    for (uint64_t stop_at : {0u, 100u, 600u << 10, 3u << 20}) {
      INFO("stopped at " << stop_at);
      auto z = OpenSegmentSource(tmp.path() + "/packed", true);
      REQUIRE(z.ok());
      const uint8_t* p = nullptr;
      size_t got = 0;
      REQUIRE((*z)->Get(stop_at, 64, p, got).ok());
      REQUIRE(got == 64);
      CHECK(std::memcmp(p, data.data() + stop_at, 64) == 0);
    }
  }
  SECTION("cut short: every byte before the cut arrives, then the error") {
    const std::string cut = packed->substr(0, packed->size() * 2 / 3);
    WriteFileBytes(tmp.path() + "/cut", cut);
    auto z = OpenSegmentSource(tmp.path() + "/cut", true);
    REQUIRE(z.ok());
    std::mt19937_64 r2(7);
    Status st;
    const std::string back = ReadLikeTheReader(**z, r2, st);
    CHECK(st.code() == ErrorCode::kCorruption);
    CHECK(st.message() ==
          fmt::format("{}/cut: zstd frame cut short after {} compressed bytes", tmp.path(), cut.size()));
    // More than the first block: the error came from the decoding thread.
    CHECK(back.size() > (2u << 20));
    CHECK(data.compare(0, back.size(), back) == 0);
  }
}

TEST_CASE("source: a plain file read ahead on a thread", "[source]") {
  const uint64_t seed = 0x50C0007;
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  const std::string data = TestData(rng, 5 << 20);
  TempDir tmp;
  const std::string path = tmp.path() + "/0000000000000000.wal";
  WriteFileBytes(path, data);
  SECTION("left early: closing it stops the reading thread (no hang, no leak under the sanitizers)") {
    for (uint64_t stop_at : {0u, 100u, 600u << 10, 3u << 20}) {
      INFO("stopped at " << stop_at);
      auto src = OpenSegmentSource(path, false, true);
      REQUIRE(src.ok());
      const uint8_t* p = nullptr;
      size_t got = 0;
      REQUIRE((*src)->Get(stop_at, 64, p, got).ok());
      REQUIRE(got == 64);
      CHECK(std::memcmp(p, data.data() + stop_at, 64) == 0);
    }
  }
  SECTION("sources opened one after another on a thread reuse the blocks and read the same") {
    for (int i = 0; i < 4; ++i) {
      auto src = OpenSegmentSource(path, false, true);
      REQUIRE(src.ok());
      Status st;
      std::mt19937_64 r2(static_cast<uint64_t>(i));
      CHECK(ReadLikeTheReader(**src, r2, st) == data);
      CHECK(st.ok());
    }
  }
  SECTION("an empty file: no bytes, no error") {
    WriteFileBytes(tmp.path() + "/empty.wal", "");
    auto src = OpenSegmentSource(tmp.path() + "/empty.wal", false, true);
    REQUIRE(src.ok());
    const uint8_t* p = nullptr;
    size_t got = 1;
    REQUIRE((*src)->Get(0, 16, p, got).ok());
    CHECK(got == 0);
  }
  SECTION("shrunk after it was opened: it ends where the file now ends") {
    auto src = OpenSegmentSource(path, false, true);
    REQUIRE(src.ok());
    // Before the first read: the thread starts with the second block.
    std::filesystem::resize_file(path, (1u << 20) + 10);
    Status st;
    std::mt19937_64 r2(3);
    const std::string back = ReadLikeTheReader(**src, r2, st);
    CHECK(st.ok());
    CHECK(back == data.substr(0, (1u << 20) + 10));
  }
}

TEST_CASE("source: a plain segment that shrinks while it is read ends where the file now ends", "[source]") {
  const uint64_t seed = 0x50C0006;
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  const std::string data = TestData(rng, 3 << 20);
  TempDir tmp;
  const std::string path = tmp.path() + "/0000000000000000.wal";
  WriteFileBytes(path, data);
  auto src = OpenSegmentSource(path, false);
  REQUIRE(src.ok());
  CHECK((*src)->size() == data.size());
  const uint8_t* p = nullptr;
  size_t got = 0;
  REQUIRE((*src)->Get(0, 100, p, got).ok());
  REQUIRE(got == 100);
  // Cut to 1 MiB + 10 bytes behind the reader's back (a map would die of
  // SIGBUS on the next touch past the new end).
  std::filesystem::resize_file(path, (1u << 20) + 10);
  REQUIRE((*src)->Get(1u << 20, 100, p, got).ok());
  CHECK(got == 10);
  CHECK(std::memcmp(p, data.data() + (1u << 20), 10) == 0);
  REQUIRE((*src)->Get(2u << 20, 100, p, got).ok());
  CHECK(got == 0);
  (*src)->Window((1u << 20) + 5, 16, p, got);
  CHECK(got == 5);
}
