// The full snapshot file codec (walfmt/snapshot.h, FORMAT.md "Full snapshot
// files"): round trip, damage reported and never returned, and the entry by
// entry reader agreeing with the whole-file one.
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

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
