// walcut: the command-line entry point. Parsing and dispatch only; every
// subcommand lives in its own cli/cmd_*.cpp. No exception leaves main.
#include <algorithm>
#include <cstdio>
#include <exception>

#include <fmt/format.h>

#include "cli/command.h"

namespace walcut::cli {
std::vector<CommandEntry>& CommandTable() {
  static std::vector<CommandEntry> table;
  return table;
}
}  // namespace walcut::cli

int main(int argc, char** argv) {
  using namespace walcut::cli;
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
      return rc == 0 ? kExitOk : kExitUsage;
    }
    for (const auto& [sub, action] : reg.commands()) {
      if (sub->parsed()) return action();
    }
    return kExitUsage;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "walcut: internal error: {}\n", e.what());
    return kExitIo;
  }
}
