// The files a real node keeps beside its WAL (node/runtime_file.h): its
// incarnation, and runtime.json's retention and snapshot fields. Each
// refusal is a one-line kCorruption naming the file and the field.
#include <filesystem>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>

#include "node/runtime_file.h"
#include "scratch_dir.h"

namespace {

void Write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

}  // namespace

TEST_CASE("node: the incarnation file: absent, written and read back, refused when it holds anything else",
          "[node][runtime]") {
  walcut::test::ScratchDir dir("incarnation");
  const std::string d = dir.path.string();
  std::filesystem::create_directories(dir.path);
  auto none = walcut::node::LoadIncarnation(d);
  REQUIRE(none.ok());
  CHECK_FALSE(none->has_value());
  REQUIRE(walcut::node::SaveIncarnation(d, 7).ok());
  auto seven = walcut::node::LoadIncarnation(d);
  REQUIRE(seven.ok());
  CHECK(*seven == std::optional<uint32_t>(7));
  for (const std::string bad : {"", "\n", "7", "x\n", "-1\n", "16777216\n", "1 2\n", "99999999999\n"}) {
    INFO("file holds '" << bad << "'");
    Write(d + "/incarnation", bad);
    auto r = walcut::node::LoadIncarnation(d);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == walfmt::ErrorCode::kCorruption);
    CHECK(r.status().message() == d + "/incarnation: not an incarnation (a decimal number and a newline)");
  }
  Write(d + "/incarnation", "16777215\n");
  auto top = walcut::node::LoadIncarnation(d);
  REQUIRE(top.ok());
  CHECK(*top == std::optional<uint32_t>(16777215));
}

TEST_CASE("node: runtime.json keeps the retention and snapshot period, and refuses a retention it does not know",
          "[node][runtime]") {
  walcut::test::ScratchDir dir("runtime-file");
  const std::string d = dir.path.string();
  std::filesystem::create_directories(dir.path);
  walcut::node::RuntimeInfo rt;
  rt.ports = {1000, 1001};
  rt.pids = {0, 0};
  rt.full_snapshot_every_us = 250000;
  rt.wal_retention = walcut::node::WalRetention::kAfterSnapshot;
  REQUIRE(walcut::node::SaveRuntimeInfo(d, rt).ok());
  auto back = walcut::node::LoadRuntimeInfo(d);
  REQUIRE(back.ok());
  CHECK(back->full_snapshot_every_us == 250000);
  CHECK(back->wal_retention == walcut::node::WalRetention::kAfterSnapshot);

  std::ifstream in(d + "/runtime.json");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto at = text.find("\"after-snapshot\"");
  REQUIRE(at != std::string::npos);
  Write(d + "/runtime.json", text.substr(0, at) + "\"sometimes\"" + text.substr(at + 16));
  auto bad = walcut::node::LoadRuntimeInfo(d);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == walfmt::ErrorCode::kCorruption);
  CHECK(bad.status().message().find("wal_retention") != std::string::npos);
  CHECK(bad.status().message().find("must be keep or after-snapshot") != std::string::npos);
}
