// Inputs the fuzz targets found, kept as regression tests (their files are
// also in fuzz/corpus/restore_manifest/).
#include <filesystem>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>

#include "recovery/check.h"
#include "recovery/restore.h"
#include "scratch_dir.h"

TEST_CASE("a restore manifest whose fields have the wrong type is not a restore, never an exception",
          "[restore][fuzz]") {
  walcut::test::ScratchDir d("manifest-types");
  std::filesystem::create_directories(d.path);
  auto with = [&](const std::string& text) {
    std::ofstream(d.path / "manifest.json", std::ios::trunc) << text;
    return walcut::recovery::RestoredBaseCut(d.path.string());
  };
  CHECK(with(R"({"format":"walcut-restore","cut":3})") == std::optional<uint64_t>(3));
  CHECK_FALSE(with(R"({"format":1,"cut":1})").has_value());
  CHECK_FALSE(with(R"({"format":"walcut-restore","cut":1,"forced":"yes"})").has_value());
  CHECK_FALSE(with(R"({"format":"walcut-restore","cut":1,"forced":true})").has_value());
  CHECK_FALSE(with(R"({"format":"walcut-restore","cut":-1})").has_value());
  CHECK_FALSE(with(R"(["format","walcut-restore"])").has_value());
  // The current schema, and a repository's synthetic full (the restore's under "restore").
  CHECK(with(R"({"schema":"walcut.restore-manifest/2","cut":4})") == std::optional<uint64_t>(4));
  CHECK_FALSE(with(R"({"schema":"walcut.restore-manifest/3","cut":4})").has_value());
  CHECK(with(R"({"schema":"walcut.artifact/2","cut":5,"restore":{"schema":"walcut.restore-manifest/2"}})") ==
        std::optional<uint64_t>(5));
  CHECK_FALSE(with(R"({"schema":"walcut.artifact/2","cut":5,"restore":{"schema":"x"}})").has_value());
}

TEST_CASE("a check state file with a node id above 32 bits or a time past int64 is refused, not misread",
          "[check][fuzz]") {
  auto parse = [](const std::string& node, const std::string& mtime) {
    return walcut::recovery::CheckStateFromJson(
        R"({"schema":"walcut.check-state/1","nodes":[{"node":)" + node +
            R"(,"segments":[{"file":"0000000000000000.wal","index":0,"size":64,"mtime_ns":)" + mtime +
            R"(,"crc32c":"00000000"}]}]})",
        "state.json");
  };
  REQUIRE(parse("1", "5").ok());
  CHECK(parse("1", "5")->nodes.count(1) == 1);
  const auto wide = parse("4294967297", "5");
  REQUIRE_FALSE(wide.ok());
  CHECK_THAT(wide.status().message(),
             Catch::Contains("field 'nodes[0].node': 4294967297 is larger than the limit 4294967295"));
  const auto late = parse("1", "9223372036854775808");
  REQUIRE_FALSE(late.ok());
  CHECK_THAT(late.status().message(),
             Catch::Contains(
                 "field 'nodes[0].segments[0].mtime_ns': 9223372036854775808 does not fit a signed 64-bit integer"));
}
