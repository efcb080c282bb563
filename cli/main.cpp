// walcut: the command-line entry point. Parsing and dispatch only; every
// subcommand lives in its own cli/cmd_*.cpp. No exception leaves main.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <system_error>
#include <variant>
#include <vector>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/output.h"
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

// List options take one value per occurrence, or a comma list where the
// option has a delimiter: CLI11 would otherwise let `--type commit A B` or
// `--summaries S0 S1 NODE_DIR` take the paths after them as values.
void OneValuePerOccurrence(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    if (opt->get_positional() || opt->get_expected_max() <= 1) continue;
    opt->expected(1)->allow_extra_args(false)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) OneValuePerOccurrence(*sub);
}

// Optimal string alignment distance (an adjacent swap counts once).
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

// " (did you mean X?)" for the known name closest to `word`, when one is
// close: at most 2 edits (1 for words of up to 4 characters), or `word` a
// prefix of exactly one name. Empty otherwise.
std::string DidYouMean(std::string_view word, const std::vector<std::string>& known) {
  std::string best;
  size_t best_d = word.size() <= 4 ? 1 : 2;
  bool found = false;
  for (const auto& k : known) {
    const size_t d = EditDistance(word, k);
    if (d <= best_d && (!found || d < best_d)) {
      best = k;
      best_d = d;
      found = true;
    }
  }
  if (!found) {
    std::vector<std::string> prefixed;
    for (const auto& k : known) {
      if (word.size() >= 2 && k.starts_with(word)) prefixed.push_back(k);
    }
    if (prefixed.size() == 1) best = prefixed[0], found = true;
  }
  return found ? fmt::format(" (did you mean {}?)", best) : std::string();
}

std::vector<std::string> SubcommandNames(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    names.push_back(sub->get_name());
  return names;
}

std::vector<std::string> OptionNames(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->get_positional()) continue;
    for (const auto& l : opt->get_lnames()) names.push_back("--" + l);
    for (const auto& s : opt->get_snames()) names.push_back("-" + s);
  }
  return names;
}

// The command path of `app` below walcut ("cut show"), empty for walcut.
std::string CommandPath(const CLI::App* app) {
  std::string path;
  for (; app != nullptr && app->get_parent() != nullptr; app = app->get_parent()) {
    path = path.empty() ? app->get_name() : app->get_name() + " " + path;
  }
  return path;
}

// The innermost command the parse reached.
CLI::App* Deepest(CLI::App* app) {
  for (CLI::App* sub : app->get_subcommands()) {
    if (sub->parsed()) return Deepest(sub);
  }
  return app;
}

// `walcut: <message>` on one line for a parse error, with a suggestion for
// an unknown command or option; returns the usage exit code.
int ReportParseError(CLI::App& app, const CLI::ParseError& e) {
  CLI::App* at = Deepest(&app);
  const std::string where = CommandPath(at);
  const std::string help = where.empty() ? "walcut help" : "walcut help " + where;
  std::string message;
  const std::vector<std::string> rest = at->remaining();
  const auto first_word =
      std::find_if(rest.begin(), rest.end(), [](const std::string& w) { return !w.starts_with("-"); });
  const auto first_option =
      std::find_if(rest.begin(), rest.end(), [](const std::string& w) { return w.starts_with("-"); });
  const bool wants_command = !SubcommandNames(*at).empty() && at->get_subcommands().empty();
  const std::vector<CLI::Option*> options = at->get_options();
  const bool positionals =
      std::any_of(options.begin(), options.end(), [](const CLI::Option* o) { return o->get_positional(); });
  const bool unknown_word =
      dynamic_cast<const CLI::RequiredError*>(&e) != nullptr || dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr;
  // A command that takes a directory besides its commands (restore, check)
  // took the misspelt command as the directory: one that does not exist.
  std::string misspelt;
  if (wants_command && unknown_word && positionals) {
    for (const CLI::Option* o : options) {
      if (!o->get_positional()) continue;
      for (const auto& v : o->results()) {
        if (misspelt.empty() && !DidYouMean(v, SubcommandNames(*at)).empty() && !std::filesystem::exists(v))
          misspelt = v;
      }
    }
  } else if (wants_command && unknown_word && first_word != rest.end()) {
    misspelt = *first_word;
  }
  if (!misspelt.empty()) {
    message = fmt::format("unknown command '{}{}'{}", where.empty() ? "" : where + " ", misspelt,
                          DidYouMean(misspelt, SubcommandNames(*at)));
  } else if (first_option != rest.end() && unknown_word) {
    const std::string name = first_option->substr(0, first_option->find('='));
    message = fmt::format("{}{}: unknown option{}", where.empty() ? "" : where + ": ", name,
                          DidYouMean(name, OptionNames(*at)));
  } else if (wants_command && !positionals && dynamic_cast<const CLI::RequiredError*>(&e) != nullptr) {
    message = fmt::format("{}a command is required: {}", where.empty() ? "" : where + ": ",
                          fmt::join(SubcommandNames(*at), ", "));
  } else {
    message = e.what();
    std::replace(message.begin(), message.end(), '\n', ' ');
    while (!message.empty() && message.back() == ' ') message.pop_back();
    if (!where.empty()) message = where + ": " + message;
  }
  std::fflush(stdout);
  fmt::print(stderr, "walcut: {} (see {})\n", message, help);
  return kExitUsage;
}

// The one-line summaries of the commands, for the listings of `walcut help`
// (and `walcut`, `walcut --help`) and of a command's own commands; the full
// text is each command's description, printed by `walcut help COMMAND`.
std::string Summary(const CLI::App* sub) {
  static const std::map<std::string, std::string, std::less<>> kSummaries = {
      {"verify", "Check every segment: headers, checksums, continuity, torn tails"},
      {"dump", "Print the records of a WAL, one line each"},
      {"stats", "Count records, bytes, commits, rollbacks and cuts per type and node"},
      {"cuts", "List every cut of a cluster with its verdict and the restore window"},
      {"cut", "Inspect one cut"},
      {"cut show", "The global snapshot of cut K, node by node, and its checks"},
      {"run", "Create a simulated cluster, run transactions and cuts, write its WAL"},
      {"scan", "Summarize one node's WAL into a file, where the WAL lives"},
      {"restore", "Restore every node (or one) to a cut"},
      {"restore assemble", "Gather the per-node restores of one cut"},
      {"check", "Check a cluster for CI: files, cuts, restore"},
      {"check merge", "Join the per-node JSON reports of walcut check"},
      {"diff", "Compare two snapshot directories node by node"},
      {"snapshot", "Snapshot directories and repositories of snapshot artifacts"},
      {"snapshot check", "Check a snapshot's workload invariants, or a repository"},
      {"snapshot show", "Per node: entries, size, fingerprint, WAL position of a snapshot"},
      {"snapshot create", "Add an artifact (full or incremental) to a repository"},
      {"snapshot list", "List every artifact of a repository"},
      {"snapshot expire", "Remove the artifacts beyond the newest N fulls of each cluster"},
  };
  if (const auto it = kSummaries.find(CommandPath(sub)); it != kSummaries.end()) return it->second;
  // A command without an entry: the first line of its description.
  const std::string& d = sub->get_description();
  return d.substr(0, d.find('\n'));
}

// Lists commands one line each (name, summary), as git and cargo do.
class ListingFormatter : public CLI::Formatter {
 public:
  std::string make_subcommand(const CLI::App* sub) const override {
    return fmt::format("  {:<{}}{}\n", sub->get_name(), get_column_width() - 2, Summary(sub));
  }
};

// `walcut help [COMMAND...]` is `walcut [COMMAND...] --help`, for the
// commands that exist; `walcut version` is `walcut --version`. Returns the
// arguments to parse, or an exit code when the request was answered here.
std::variant<std::vector<std::string>, int> HelpAndVersion(CLI::App& app, std::vector<std::string> args) {
  if (args.size() == 1 && args[0] == "version") return std::vector<std::string>{"--version"};
  if (args.empty() || args[0] != "help") return args;
  std::vector<std::string> out;
  const CLI::App* at = &app;
  for (size_t i = 1; i < args.size(); ++i) {
    const CLI::App* sub = nullptr;
    for (const CLI::App* s : at->get_subcommands([](const CLI::App*) { return true; })) {
      if (s->get_name() == args[i]) sub = s;
    }
    if (sub == nullptr) {
      const std::string where = CommandPath(at);
      fmt::print(stderr, "walcut: help: unknown command '{}{}'{} (see walcut help{})\n",
                 where.empty() ? "" : where + " ", args[i], DidYouMean(args[i], SubcommandNames(*at)),
                 where.empty() ? "" : " " + where);
      return kExitUsage;
    }
    out.push_back(args[i]);
    at = sub;
  }
  out.push_back("--help");
  return out;
}
}  // namespace
}  // namespace walcut::cli

int main(int argc, char** argv) {
  using namespace walcut::cli;
  InstallSignalCleanup();  // before any thread: a signal removes the staging directories (cli/signals.h)
  try {
    CLI::App app{"walcut: inspect, cut, restore and validate the write-ahead logs of a distributed KV store"};
    app.set_version_flag("-V,--version", "walcut 0.1.0 (WAL format version 1)");
    app.footer(
        "walcut help [COMMAND...] prints the help of a command (as COMMAND --help does); walcut version\n"
        "(or -V) prints the version.");
    app.require_subcommand(1);
    app.fallthrough(false);
    app.formatter(std::make_shared<ListingFormatter>());  // before the commands: they inherit it
    Registry reg;
    auto table = CommandTable();
    std::stable_sort(table.begin(), table.end(),
                     [](const CommandEntry& a, const CommandEntry& b) { return a.order < b.order; });
    for (const auto& e : table) e.fn(app, reg);
    for (const auto& [sub, action] : reg.commands()) {
      sub->add_flag_callback(
          "-q,--quiet", [] { SetQuiet(true); },
          "No notes and no progress on stderr; errors, findings, standard output and the exit "
          "code stay the same");
    }
    OneValuePerOccurrence(app);
    if (argc == 1) {  // `walcut` alone: the list of commands, as `walcut help`; no command is a usage error
      app.name(argv[0]);
      fmt::print("{}", app.help());
      return FinishOutput(kExitUsage);
    }
    auto args = HelpAndVersion(app, std::vector<std::string>(argv + 1, argv + argc));
    if (const int* rc = std::get_if<int>(&args)) return *rc;
    auto& words = std::get<std::vector<std::string>>(args);
    std::reverse(words.begin(), words.end());  // CLI11 takes them last first
    app.name(argv[0]);                         // as app.parse(argc, argv) names it, for the usage lines
    try {
      app.parse(words);
    } catch (const CLI::ParseError& e) {
      if (e.get_exit_code() == 0) return FinishOutput(app.exit(e));  // --help, --version: stdout, exit 0
      return FinishOutput(ReportParseError(app, e));
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
