// walcut: the command-line entry point. Parsing and dispatch only; every
// subcommand lives in its own cli/cmd_*.cpp. No exception leaves main.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string_view>
#include <system_error>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/signals.h"

namespace walcut::cli {
std::vector<CommandEntry>& CommandTable() {
  static std::vector<CommandEntry> table;
  return table;
}

namespace {

// What was printed must have reached its destination: a full disk or a
// closed file behind standard output is an error (exit 3), never a success
// with a truncated report. (A closed pipe ends the process by SIGPIPE first,
// quietly, as for any Unix filter.)
int FinishOutput(int rc) {
  const int before = errno;  // a write that failed earlier left its reason here
  errno = 0;
  const bool flush_failed = std::fflush(stdout) != 0;
  if (flush_failed || std::ferror(stdout)) {
    const int err = flush_failed ? errno : before;
    fmt::print(stderr, "walcut: cannot write output: {}\n", err != 0 ? std::strerror(err) : "write error");
    return kExitIo;
  }
  return rc;
}

}  // namespace
}  // namespace walcut::cli

int main(int argc, char** argv) {
  using namespace walcut::cli;
  InstallSignalCleanup();  // before any thread: a signal removes the staging directories (cli/signals.h)
  try {
    CLI::App app{"walcut: inspect, cut, restore and validate the write-ahead logs of a distributed KV store"};
    app.set_version_flag("--version", "walcut 0.1.0 (WAL format version 1)");
    app.require_subcommand(1);
    app.fallthrough(false);
    Registry reg;
    auto table = CommandTable();
    std::sort(table.begin(), table.end(), [](const CommandEntry& a, const CommandEntry& b) { return a.order < b.order; });
    for (const auto& e : table) e.fn(app, reg);
    try {
      app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      const int rc = app.exit(e);  // prints help or the error
      return FinishOutput(rc == 0 ? kExitOk : kExitUsage);
    }
    for (const auto& [sub, action] : reg.commands()) {
      if (sub->parsed()) return FinishOutput(action());
    }
    return kExitUsage;
  } catch (const std::system_error& e) {
    // fmt::print throws this when standard output refuses a write.
    if (std::string_view(e.what()).starts_with("cannot write to file")) {
      fmt::print(stderr, "walcut: cannot write output: {}\n", e.code().message());
      return kExitIo;
    }
    std::fflush(stdout);
    fmt::print(stderr, "walcut: internal error: {}\n", e.what());
    return kExitIo;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "walcut: internal error: {}\n", e.what());
    return kExitIo;
  }
}
