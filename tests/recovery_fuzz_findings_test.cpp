// Inputs the fuzz targets found, kept as regression tests (their files are
// also in fuzz/corpus/restore_manifest/).
#include <filesystem>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>

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
}
