// The full snapshot file codec (walfmt/snapshot.h, FORMAT.md "Full snapshot
// files"): round trip, damage reported and never returned, and the entry by
// entry reader agreeing with the whole-file one.
#include <signal.h>
#include <sys/resource.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "scratch_dir.h"
#include "walfmt/snapshot.h"

namespace fs = std::filesystem;
using namespace walfmt;

namespace {

using TempDir = walcut::test::ScratchDir;

SnapshotFile Sample() {
  SnapshotFile s;
  s.node_id = 3;
  s.cluster_id = 0x1122334455667788ull;
  s.wal_position = walfmt::Lsn{2, 0x1F0};
  s.time_us = 12345;
  s.name = "full-10";
  s.entries = {{"acct/000001", "1000"}, {"acct/000002", "7"}, {"ring/000000", ""}};
  return s;
}

}  // namespace

TEST_CASE("snapshot file round trip") {
  SnapshotFile s = Sample();
  auto bytes = EncodeSnapshot(s);
  REQUIRE(bytes.ok());
  CHECK(s.fingerprint == StateFingerprint(s.entries));
  auto back = DecodeSnapshot(*bytes);
  REQUIRE(back.ok());
  CHECK(back->node_id == 3);
  CHECK(back->cluster_id == s.cluster_id);
  CHECK(back->wal_position == s.wal_position);
  CHECK(back->time_us == 12345);
  CHECK(back->name == "full-10");
  CHECK(back->entries == s.entries);
  CHECK(back->fingerprint == s.fingerprint);
  SnapshotFile empty;
  auto eb = EncodeSnapshot(empty);
  REQUIRE(eb.ok());
  CHECK(eb->size() == kSnapshotHeaderSize + kSnapshotTrailerSize);
  CHECK(DecodeSnapshot(*eb).ok());
}

TEST_CASE("snapshot file damage is reported, never returned") {
  SnapshotFile s = Sample();
  const std::string good = EncodeSnapshot(s).value();
  SECTION("every single-byte change is caught") {
    for (size_t i = 0; i < good.size(); ++i) {
      std::string bad = good;
      bad[i] = static_cast<char>(bad[i] ^ 0x5A);
      auto r = DecodeSnapshot(bad);
      INFO("byte " << i);
      CHECK_FALSE(r.ok());
      if (!r.ok()) CHECK(r.status().code() == walfmt::ErrorCode::kCorruption);
    }
  }
  SECTION("every truncation is caught") {
    for (size_t n = 0; n < good.size(); ++n) {
      INFO("length " << n);
      CHECK_FALSE(DecodeSnapshot(good.substr(0, n)).ok());
    }
  }
  SECTION("messages name the offset and both values") {
    std::string bad = good;
    bad[kSnapshotHeaderSize + 3] ^= 1;  // inside the name: the body checksum catches it
    auto r = DecodeSnapshot(bad);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.status().message(), Catch::Contains("body checksum at offset") && Catch::Contains("expected"));
  }
}

TEST_CASE("snapshot file read entry by entry: the same entries and header, the same errors") {
  // The restore streams a base snapshot into its state table with this
  // reader instead of building the map.
  TempDir d("stream");
  fs::create_directories(d.path);
  SnapshotFile s = Sample();
  const std::string good = EncodeSnapshot(s).value();
  const std::string path = (d.path / "node-3.snap").string();
  auto write = [&](const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << bytes;
  };
  write(good);
  std::vector<std::pair<std::string, std::string>> seen;
  auto r = ReadSnapshotFile(path, [&](std::string_view k, std::string_view v) { seen.emplace_back(k, v); });
  REQUIRE(r.ok());
  CHECK(r->entries.empty());
  CHECK(r->node_id == 3);
  CHECK(r->name == "full-10");
  CHECK(r->wal_position == s.wal_position);
  CHECK(r->fingerprint == s.fingerprint);
  CHECK(std::map<std::string, std::string>(seen.begin(), seen.end()) == s.entries);
  CHECK(seen.size() == s.entries.size());
  // Every single-byte change fails both readers with the same message.
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 0x5A);
    write(bad);
    auto whole = ReadSnapshotFile(path);
    auto streamed = ReadSnapshotFile(path, [](std::string_view, std::string_view) {});
    INFO("byte " << i);
    REQUIRE_FALSE(whole.ok());
    REQUIRE_FALSE(streamed.ok());
    CHECK(streamed.status().message() == whole.status().message());
    CHECK(streamed.status().code() == walfmt::ErrorCode::kCorruption);
  }
  CHECK_FALSE(ReadSnapshotFile((d.path / "absent.snap").string(), [](std::string_view, std::string_view) {}).ok());
}

namespace {

std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// n entries of about 120 bytes each, keys in increasing order.
SnapshotFile Many(size_t n) {
  SnapshotFile s = Sample();
  s.entries.clear();
  for (size_t i = 0; i < n; ++i) {
    s.entries.emplace(fmt::format("user/{:012}", i), std::string(100 + i % 17, static_cast<char>('a' + i % 26)));
  }
  return s;
}

}  // namespace

// The threads of this process (the writer's helper thread is one).
static size_t ThreadCount() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator("/proc/self/task")) ++n;
  return n;
}

TEST_CASE("snapshot stream writer: the bytes and fingerprint of EncodeSnapshot, across many 1 MiB buffers") {
  TempDir dir("writer");
  fs::create_directories(dir.path);
  // Empty, one buffer, and about 5.5 MiB: the writer's thread holds two
  // buffers while a third fills, so the largest makes the writer wait.
  // Without the helper thread (restore --io-threads 0) the same bytes.
  const bool helper_thread = GENERATE(true, false);
  for (size_t n : {size_t{0}, size_t{3}, size_t{45000}}) {
    INFO(n << " entries, helper thread " << helper_thread);
    SnapshotFile s = Many(n);
    auto want = EncodeSnapshot(s);
    REQUIRE(want.ok());
    const std::string path = (dir.path / fmt::format("s{}-{}.snap", n, helper_thread)).string();
    const size_t threads_before = ThreadCount();
    auto w = SnapshotStreamWriter::Create(path, s, s.entries.size(), helper_thread);
    REQUIRE(w.ok());
    // The helper thread is there only when asked for.
    CHECK(ThreadCount() == threads_before + (helper_thread ? 1 : 0));
    for (const auto& [k, v] : s.entries) REQUIRE((*w)->Add(k, v).ok());
    auto fp = (*w)->Finish();
    REQUIRE(fp.ok());
    CHECK(*fp == s.fingerprint);
    CHECK(*fp == StateFingerprint(s.entries));
    CHECK(FileBytes(path) == *want);
    auto again = (*w)->Finish();
    REQUIRE_FALSE(again.ok());
    CHECK(again.status().message() == path + ": finished already");
    CHECK(FileBytes(path) == *want);
  }
}

TEST_CASE("snapshot stream writer: order, count and abandonment") {
  TempDir dir("writer");
  fs::create_directories(dir.path);
  const std::string path = (dir.path / "x.snap").string();
  SnapshotFile h = Sample();
  {
    auto w = SnapshotStreamWriter::Create(path, h, 2);
    REQUIRE(w.ok());
    REQUIRE((*w)->Add("b", "1").ok());
    CHECK((*w)->Add("a", "2").message().find("entries out of order") != std::string::npos);
    CHECK((*w)->Add("b", "2").message().find("entries out of order") != std::string::npos);
    REQUIRE((*w)->Add("c", "3").ok());
    CHECK((*w)->Add("d", "4").message().find("more entries than announced") != std::string::npos);
  }
  {
    auto w = SnapshotStreamWriter::Create(path, h, 3);
    REQUIRE(w.ok());
    REQUIRE((*w)->Add("a", "1").ok());
    auto fp = (*w)->Finish();
    REQUIRE_FALSE(fp.ok());
    CHECK(fp.status().message().find("1 entries written, 3 announced") != std::string::npos);
  }
  // A writer dropped in the middle of many buffers returns at once (its
  // thread stops), and the caller removes the partial file.
  {
    SnapshotFile s = Many(30000);
    auto w = SnapshotStreamWriter::Create(path, s, s.entries.size());
    REQUIRE(w.ok());
    size_t i = 0;
    for (const auto& [k, v] : s.entries) {
      if (++i > 20000) break;
      REQUIRE((*w)->Add(k, v).ok());
    }
  }
  CHECK(fs::file_size(path) < Many(30000).entries.size() * 130);
}

TEST_CASE("snapshot stream writer: a write that fails is returned by Add or Finish, never a fingerprint") {
  // The file size limit makes write() fail with EFBIG past 2 MiB (SIGXFSZ
  // ignored), as a full disk fails it with ENOSPC: the failure happens on
  // the writer's thread and must reach the caller.
  TempDir dir("writer");
  fs::create_directories(dir.path);
  const bool helper_thread = GENERATE(true, false);
  INFO("helper thread " << helper_thread);
  const std::string path = (dir.path / "big.snap").string();
  SnapshotFile s = Many(48000);  // about 6 MiB: six buffers
  struct rlimit old {};
  REQUIRE(getrlimit(RLIMIT_FSIZE, &old) == 0);
  struct sigaction ign {
  }, old_action{};
  ign.sa_handler = SIG_IGN;
  REQUIRE(sigaction(SIGXFSZ, &ign, &old_action) == 0);
  struct rlimit small = old;
  small.rlim_cur = 2u << 20;
  REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
  std::string failure;
  bool finished = false;
  bool in_add = false;
  {
    auto w = SnapshotStreamWriter::Create(path, s, s.entries.size(), helper_thread);
    REQUIRE(w.ok());
    for (const auto& [k, v] : s.entries) {
      if (Status st = (*w)->Add(k, v); !st.ok()) {
        failure = st.message();
        in_add = true;
        break;
      }
    }
    if (failure.empty()) {
      auto fp = (*w)->Finish();
      finished = fp.ok();
      if (!fp.ok()) failure = fp.status().message();
    }
  }
  setrlimit(RLIMIT_FSIZE, &old);
  sigaction(SIGXFSZ, &old_action, nullptr);
  CHECK_FALSE(finished);
  // The second buffer's write fails; the fourth's handing over finds it
  // (without the helper thread, the second's own Add).
  CHECK(in_add);
  CHECK(failure.find(path + ": write failed: File too large") != std::string::npos);
  CHECK(fs::file_size(path) <= (2u << 20));
}
