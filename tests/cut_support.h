// Shared by the cut and recovery suites: a scratch directory per test and
// the scan + reconstruction of a cluster directory.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "cut/cuts.h"
#include "cut/load.h"

namespace walcut::test {

// A fresh directory under the system temp dir named after `tag`, removed at
// scope exit.
struct ScratchDir {
  std::filesystem::path path;
  explicit ScratchDir(const std::string& tag) {
    static int counter = 0;
    path = std::filesystem::temp_directory_path() / fmt::format("walcut-{}-{}-{}", tag, ::getpid(), counter++);
    std::filesystem::remove_all(path);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

// Scans every node of a cluster directory and reconstructs its cuts.
inline cut::ClusterCuts LoadCuts(const std::string& dir) {
  auto layout = cut::FindClusterLayout(dir);
  REQUIRE(layout.ok());
  auto sums = cut::ScanCluster(*layout, {});
  REQUIRE(sums.ok());
  auto cc = cut::Reconstruct(std::move(sums.value()));
  REQUIRE(cc.ok());
  return std::move(cc.value());
}

}  // namespace walcut::test
