// The file layer: bounded whole-file reads that refuse special files, and
// atomic writes that leave either nothing or the complete file, also when
// the injected fault stops them at any step.
#include "walfmt/file_io.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <catch2/catch.hpp>

#include "test_files.h"

namespace fs = std::filesystem;
using walcut::testing::ReadFileBytes;
using walcut::testing::TempDir;
using walcut::testing::WriteFileBytes;

namespace {
size_t CountEntries(const std::string& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}
}  // namespace

TEST_CASE("ReadWholeFile reads a regular file and enforces its bound", "[file_io]") {
  TempDir d;
  const std::string p = d.path() + "/f";
  WriteFileBytes(p, "hello");
  auto r = walfmt::ReadWholeFile(p, 5);
  REQUIRE(r.ok());
  CHECK(*r == "hello");
  auto big = walfmt::ReadWholeFile(p, 4);
  REQUIRE_FALSE(big.ok());
  CHECK(big.status().code() == walfmt::ErrorCode::kIo);
  CHECK(big.status().message() == p + ": 5 bytes, more than the 4 this file may hold");
  auto missing = walfmt::ReadWholeFile(d.path() + "/none", 10);
  CHECK(missing.status().code() == walfmt::ErrorCode::kNotFound);
}

TEST_CASE("ReadWholeFile refuses a FIFO without blocking, and a directory", "[file_io]") {
  TempDir d;
  const std::string fifo = d.path() + "/pipe";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  auto r = walfmt::ReadWholeFile(fifo, 1 << 20);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == walfmt::ErrorCode::kIo);
  CHECK(r.status().message() == fifo + ": not a regular file");
  auto dir = walfmt::ReadWholeFile(d.path(), 1 << 20);
  CHECK(dir.status().code() == walfmt::ErrorCode::kIo);
}

TEST_CASE("WriteFileAtomic replaces a file and leaves no temporary", "[file_io]") {
  TempDir d;
  const std::string p = d.path() + "/out.json";
  REQUIRE(walfmt::WriteFileAtomic(p, "one").ok());
  REQUIRE(walfmt::WriteFileAtomic(p, "two").ok());
  CHECK(ReadFileBytes(p) == "two");
  CHECK(CountEntries(d.path()) == 1);
  CHECK(walfmt::TempNameBeside(p) != walfmt::TempNameBeside(p));
  CHECK(fs::path(walfmt::TempNameBeside(p)).filename().string().rfind(walfmt::TempPrefixFor("out.json"), 0) == 0);
}

TEST_CASE("WriteFileAtomic stopped at any step leaves the old file or the new one", "[file_io]") {
  TempDir d;
  const std::string p = d.path() + "/state";
  REQUIRE(walfmt::WriteFileAtomic(p, "old").ok());
  // Count the steps of one write, then fail each of them in turn.
  walfmt::SetFailAtStep(0);
  REQUIRE(walfmt::WriteFileAtomic(p, "new").ok());
  const uint64_t steps = walfmt::SetFailAtStep(0);
  REQUIRE(steps >= 4);  // write, fsync, rename, directory fsync
  for (uint64_t k = 1; k <= steps; ++k) {
    INFO("failing step " << k << " of " << steps);
    REQUIRE(walfmt::WriteFileAtomic(p, "old").ok());
    walfmt::SetFailAtStep(k);
    const walfmt::Status st = walfmt::WriteFileAtomic(p, "newer");
    walfmt::SetFailAtStep(0);
    REQUIRE_FALSE(st.ok());
    CHECK(st.code() == walfmt::ErrorCode::kIo);
    CHECK(st.message().find("injected fault") != std::string::npos);
    const std::string now = ReadFileBytes(p);
    CHECK((now == "old" || now == "newer"));
    CHECK(CountEntries(d.path()) == 1);
  }
}

TEST_CASE("WriteNewFile refuses to overwrite", "[file_io]") {
  TempDir d;
  const std::string p = d.path() + "/x";
  REQUIRE(walfmt::WriteNewFile(p, "a").ok());
  const walfmt::Status st = walfmt::WriteNewFile(p, "b");
  CHECK(st.code() == walfmt::ErrorCode::kIo);
  CHECK(ReadFileBytes(p) == "a");
}

TEST_CASE("WriteFileAtomic unsynced still renames into place, without the fsyncs", "[file_io]") {
  TempDir d;
  const std::string p = d.path() + "/seg.zst";
  walfmt::SetFailAtStep(0);
  REQUIRE(walfmt::WriteFileAtomic(p, "packed", walfmt::Durability::kUnsynced).ok());
  CHECK(walfmt::SetFailAtStep(0) == 2);  // write, rename
  CHECK(ReadFileBytes(p) == "packed");
  CHECK(CountEntries(d.path()) == 1);
  walfmt::SetFailAtStep(2);
  const walfmt::Status st = walfmt::WriteFileAtomic(p, "other", walfmt::Durability::kUnsynced);
  walfmt::SetFailAtStep(0);
  CHECK_FALSE(st.ok());
  CHECK(ReadFileBytes(p) == "packed");
  CHECK(CountEntries(d.path()) == 1);
}

TEST_CASE("ReadFileChunks and CopyToNewFile stream a file, a failed copy leaves no file", "[file_io]") {
  TempDir d;
  const std::string from = d.path() + "/from";
  std::string data;
  for (int i = 0; i < 300000; ++i) data += static_cast<char>('a' + i % 26);
  WriteFileBytes(from, data);
  std::string seen;
  size_t pieces = 0;
  REQUIRE(walfmt::ReadFileChunks(from, 4096, [&](std::string_view p) {
            CHECK(p.size() <= 4096);
            seen.append(p);
            ++pieces;
            return walfmt::Status::Ok();
          }).ok());
  CHECK(seen == data);
  CHECK(pieces == (data.size() + 4095) / 4096);
  CHECK(walfmt::ReadFileChunks(d.path() + "/none", 10, [](std::string_view) { return walfmt::Status::Ok(); }).code() ==
        walfmt::ErrorCode::kNotFound);
  CHECK(walfmt::ReadFileChunks(d.path(), 10, [](std::string_view) { return walfmt::Status::Ok(); }).code() ==
        walfmt::ErrorCode::kIo);

  std::string hashed;
  REQUIRE(walfmt::CopyToNewFile(from, d.path() + "/to", [&](std::string_view p) { hashed.append(p); }).ok());
  CHECK(ReadFileBytes(d.path() + "/to") == data);
  CHECK(hashed == data);
  CHECK_FALSE(walfmt::CopyToNewFile(from, d.path() + "/to").ok());  // never overwrites
  // Every step (writes, then the fsync) can fail; then the target is gone.
  for (uint64_t n = 1;; ++n) {
    INFO("step " << n);
    REQUIRE(n < 10);
    walfmt::SetFailAtStep(n);
    const walfmt::Status st = walfmt::CopyToNewFile(from, d.path() + "/to2");
    walfmt::SetFailAtStep(0);
    if (st.ok()) break;
    CHECK_FALSE(fs::exists(d.path() + "/to2"));
  }
  CHECK(ReadFileBytes(d.path() + "/to2") == data);
}
