// How subcommands plug into the walcut binary: each cli/cmd_<name>.cpp defines
// one Register<Name>() that adds its CLI11 subcommand and the action to run
// when that subcommand was given. Actions return the process exit code.
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

namespace walcut::cli {

// Exit codes (README.md, "Exit codes"): CI acts on these.
inline constexpr int kExitOk = 0;        // all good (a torn tail at the very end is not a finding)
inline constexpr int kExitFindings = 1;  // corruption, inconsistent cut, failed invariant
inline constexpr int kExitUsage = 2;     // bad arguments, a path that names nothing to read
inline constexpr int kExitIo = 3;        // I/O or internal error

using Action = std::function<int()>;

class Registry {
 public:
  void Add(CLI::App* sub, Action action) { commands_.emplace_back(sub, std::move(action)); }
  const std::vector<std::pair<CLI::App*, Action>>& commands() const { return commands_; }

 private:
  std::vector<std::pair<CLI::App*, Action>> commands_;
};

// Each cmd_*.cpp registers itself with a file-scope CommandRegistrar, so a
// new subcommand is a new file and nothing else. `order` fixes the order of
// the subcommands in `walcut --help`.
using RegisterFn = void (*)(CLI::App& root, Registry& reg);
struct CommandEntry {
  int order;
  RegisterFn fn;
};
std::vector<CommandEntry>& CommandTable();
struct CommandRegistrar {
  CommandRegistrar(int order, RegisterFn fn) { CommandTable().push_back({order, fn}); }
};

}  // namespace walcut::cli
