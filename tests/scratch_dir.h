// The one scratch directory of the test suites: a fresh path under the
// system temp dir named after a tag, the process and a counter, removed
// (with everything below it) at scope exit. The path is not created: tests
// that need the directory create it, those that hand it to a command that
// refuses an existing output do not.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

#include <fmt/format.h>

namespace walcut::test {

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
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
};

}  // namespace walcut::test
