// walcut: the command-line entry point. Parsing and dispatch only; every
// subcommand lives in its own cli/cmd_*.cpp. No exception leaves main.
#include <cstdio>
#include <exception>

#include <fmt/format.h>

#include "cli/command.h"

int main(int argc, char** argv) {
  using namespace walcut::cli;
  try {
    CLI::App app{"walcut: inspect, cut, restore and validate the write-ahead logs of a distributed KV store"};
    app.set_version_flag("--version", "walcut 0.1.0 (WAL format version 1)");
    app.require_subcommand(1);
    app.fallthrough(false);
    Registry reg;
    RegisterDump(app, reg);
    RegisterStats(app, reg);
    RegisterVerify(app, reg);
    RegisterRun(app, reg);
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
