// Shared by the cut and recovery suites: a scratch directory per test and
// the scan + reconstruction of a cluster directory.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "cut/cuts.h"
#include "cut/load.h"
#include "scratch_dir.h"

namespace walcut::test {

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
