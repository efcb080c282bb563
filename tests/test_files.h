// File helpers shared by the walfmt test suites: a temporary directory that
// removes itself (tests/scratch_dir.h), and whole-file reads and writes that fail the test on error.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>

#include "scratch_dir.h"

namespace walcut::testing {

// The walfmt suites' scratch directory: ScratchDir, created, its path as a
// string through path().
class TempDir {
 public:
  TempDir() : dir_("walfmt"), path_(dir_.path.string()) { std::filesystem::create_directories(dir_.path); }
  const std::string& path() const { return path_; }

 private:
  walcut::test::ScratchDir dir_;
  std::string path_;
};

inline std::string ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void WriteFileBytes(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  out.close();
  REQUIRE(out.good());
}

}  // namespace walcut::testing
