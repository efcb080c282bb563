// CLI habits: list options that take one value per occurrence (or a comma
// list) and never the paths after them; walcut help / version / -V; parser
// errors as one `walcut: ...` line with exit 2 and a "did you mean"; an
// out-of-range --node refused with exit 2.
#include <filesystem>
#include <set>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_support.h"

using walcut::test::Lines;
using walcut::test::Run;
using walcut::test::TempDir;
using walcut::test::Walcut;

namespace {

const std::string kHealthy = std::string(WALCUT_SOURCE_DIR) + "/samples/healthy";

// The node ids of `walcut dump` text lines ("node 0 ...").
std::set<std::string> DumpNodes(const std::string& out) {
  std::set<std::string> ids;
  for (const auto& l : Lines(out)) {
    if (l.rfind("node ", 0) == 0) ids.insert(l.substr(5, l.find(' ', 5) - 5));
  }
  return ids;
}

// One line on stderr, "walcut: " first.
void RequireOneErrorLine(const Run& r) {
  INFO("stderr: " << r.err);
  REQUIRE(Lines(r.err).size() == 1);
  CHECK(r.err.rfind("walcut: ", 0) == 0);
}

}  // namespace

TEST_CASE("list options take one value per occurrence and leave the paths alone") {
  SECTION("--node before the path") {
    const Run r = Walcut("dump --node 0 -n 5 " + kHealthy);
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK(DumpNodes(r.out) == std::set<std::string>{"0"});
  }
  SECTION("-t before two paths: both are paths") {
    const Run r = Walcut(fmt::format("dump -n 1 -t tx_commit {0}/node-0 {0}/node-1", kHealthy));
    INFO(r.err);
    REQUIRE(r.code == 0);
    const auto lines = Lines(r.out);
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].find("TX_COMMIT") != std::string::npos);
  }
  SECTION("repeated, and comma lists") {
    const Run a = Walcut("dump --node 0 --node 2 -t cut_start -t cut_finish " + kHealthy);
    const Run b = Walcut("dump --node 0,2 -t cut_start,cut_finish " + kHealthy);
    INFO(a.err << b.err);
    REQUIRE(a.code == 0);
    REQUIRE(b.code == 0);
    CHECK(a.out == b.out);
    CHECK(DumpNodes(a.out) == std::set<std::string>{"0", "2"});
    for (const auto& l : Lines(a.out))
      CHECK((l.find("CUT_START") != std::string::npos || l.find("CUT_FINISH") != std::string::npos));
  }
  SECTION("restore --summaries takes one file per occurrence: the node directory after it stays the directory") {
    TempDir t;
    for (int i = 0; i < 3; ++i) {
      REQUIRE(Walcut(fmt::format("scan '{}/node-{}' --out '{}/s{}.json'", kHealthy, i, t.path, i)).code == 0);
    }
    const Run r =
        Walcut(fmt::format("restore --summaries '{0}/s0.json,{0}/s1.json' --summaries '{0}/s2.json' "
                           "'{1}/node-1' --cut 3 --dry-run",
                           t.path, kHealthy));
    INFO(r.out << r.err);
    CHECK(r.code == 0);
  }
}

TEST_CASE("walcut help COMMAND, walcut version and -V") {
  const Run dump_help = Walcut("dump --help");
  REQUIRE(dump_help.code == 0);
  const Run h = Walcut("help dump");
  CHECK(h.code == 0);
  CHECK(h.out == dump_help.out);
  CHECK(h.err.empty());

  const Run nested = Walcut("help cut show");
  CHECK(nested.code == 0);
  CHECK(nested.out == Walcut("cut show --help").out);

  const Run top = Walcut("help");
  CHECK(top.code == 0);
  CHECK(top.out == Walcut("--help").out);
  CHECK(top.out.find("walcut help [COMMAND...]") != std::string::npos);
  // One line per command, name and summary, as git and cargo list them; the
  // paragraphs are the command's own help.
  bool in_list = false;
  std::vector<std::string> listed;
  for (const auto& l : Lines(top.out)) {
    if (l == "Subcommands:") {
      in_list = true;
    } else if (in_list && l.empty()) {
      break;
    } else if (in_list) {
      CAPTURE(l);
      REQUIRE(l.size() > 4);
      CHECK(l.substr(0, 2) == "  ");
      CHECK(l[2] != ' ');  // no continuation lines
      const size_t gap = l.find("  ", 2);
      REQUIRE(gap != std::string::npos);
      CHECK(l.find_first_not_of(' ', gap) != std::string::npos);  // a summary after the name
      listed.push_back(l.substr(2, l.find(' ', 2) - 2));
    }
  }
  CHECK(listed == std::vector<std::string>{"verify", "dump", "stats", "run", "cluster", "node", "load", "history",
                                           "scan", "cuts", "cut", "diff", "export", "restore", "snapshot", "check"});
  const std::string paragraph = "Nodes are printed one after the other";
  CHECK(top.out.find(paragraph) == std::string::npos);  // dump's paragraph is not in the list
  CHECK(h.out.find(paragraph) != std::string::npos);    // but in `walcut help dump`
  CHECK(Walcut("help snapshot").out.find("  expire") != std::string::npos);

  // walcut alone: the same list, and exit 2 (no command was given).
  const Run alone = Walcut("");
  CHECK(alone.code == 2);
  CHECK(alone.out == top.out);
  CHECK(alone.err.empty());

  const Run unknown = Walcut("help dmp");
  CHECK(unknown.code == 2);
  RequireOneErrorLine(unknown);
  CHECK(unknown.err.find("did you mean dump?") != std::string::npos);

  const Run v = Walcut("version");
  CHECK(v.code == 0);
  CHECK(v.out.rfind("walcut ", 0) == 0);
  CHECK(Walcut("-V").out == v.out);
  CHECK(Walcut("--version").out == v.out);
}

TEST_CASE("parser errors: one walcut: line, exit 2, a suggestion for a near name") {
  struct Case {
    std::string args;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"dmp " + kHealthy, "unknown command 'dmp' (did you mean dump?)"},
      {"--verison", "--verison: unknown option (did you mean --version?)"},
      {"--foo", "--foo: unknown option"},
      {"dump --nod 1 " + kHealthy, "dump: --nod: unknown option (did you mean --node?)"},
      {"dump --fromat json " + kHealthy, "(did you mean --format?)"},
      {"check --levl cuts " + kHealthy, "check: --levl: unknown option (did you mean --level?)"},
      {"cut shw " + kHealthy + " 1", "unknown command 'cut shw' (did you mean show?)"},
      {"snapshot chek x", "unknown command 'snapshot chek' (did you mean check?)"},
      {"check merg a.json", "unknown command 'check merg' (did you mean merge?)"},
      {"restore assembel out p0", "unknown command 'restore assembel' (did you mean assemble?)"},
      {"snapshot", "snapshot: a command is required"},
      {"dump", "dump: paths is required"},
      {"dump --node x " + kHealthy, "dump: --node: must be 0..65535"},
      {"cuts --cut", "cuts: --cut"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.args);
    const Run r = Walcut(c.args);
    CHECK(r.code == 2);
    CHECK(r.out.empty());
    RequireOneErrorLine(r);
    CHECK(r.err.find(c.says) != std::string::npos);
  }
  // No suggestion when nothing is near.
  CHECK(Walcut("--foo").err.find("did you mean") == std::string::npos);
  CHECK(Walcut("xyzzy").err.find("did you mean") == std::string::npos);
}

TEST_CASE("an out-of-range --node is a usage error (exit 2) in every command that takes --node") {
  TempDir t;
  for (int i = 0; i < 3; ++i) {
    REQUIRE(Walcut(fmt::format("scan '{}/node-{}' --out '{}/s{}.json'", kHealthy, i, t.path, i)).code == 0);
  }
  REQUIRE(
      Walcut(fmt::format("cuts '{0}/s0.json' '{0}/s1.json' '{0}/s2.json' --verdict-out '{0}/v.json' --cut 3", t.path))
          .code == 0);
  // A node directory away from its cluster: only the verdict knows the nodes.
  REQUIRE(std::system(fmt::format("cp -r '{}/node-0' '{}/lone'", kHealthy, t.path).c_str()) == 0);
  struct Case {
    std::string args;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"dump --node 7 " + kHealthy, "--node 7: no such node in the input (its nodes: 0, 1, 2)"},
      {"dump --node 1,7 " + kHealthy, "--node 7: no such node"},
      {"dump --node 1 " + kHealthy + "/node-0", "--node 1: no such node in the input (its nodes: 0)"},
      {fmt::format("scan {}/node-0 --node 7 --out {}/s7.json", kHealthy, t.path),
       "--node 7: no such node; the cluster"},
      {fmt::format("check {}/node-0 --node 7", kHealthy), "--node 7: no such node; the cluster"},
      {fmt::format("check {}/lone --node 7 --verdict {}/v.json", t.path, t.path),
       "--node 7: no such node; the verdict"},
      {fmt::format("restore {}/node-0 --node 7 --verdict {}/v.json --out {}/x", kHealthy, t.path, t.path), "node 7"},
      {fmt::format("restore {}/lone --node 7 --verdict {}/v.json --out {}/x", t.path, t.path, t.path), "node 7"},
      {fmt::format("check {}/node-0 --node -1", kHealthy), "check: --node: must be 0..65535"},
      {"snapshot show --node 3 " + kHealthy + "/snapshots/full-1500", "--node 3"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.args);
    const Run r = Walcut(c.args);
    CHECK(r.code == 2);
    CHECK(r.out.empty());
    CHECK(r.err.find(c.says) != std::string::npos);
  }
  CHECK_FALSE(std::filesystem::exists(t.path + "/s7.json"));
  CHECK_FALSE(std::filesystem::exists(t.path + "/x"));
  // In range: fine.
  CHECK(Walcut(fmt::format("dump --node 2 -n 1 {}", kHealthy)).code == 0);
  CHECK(Walcut(fmt::format("check {}/node-0 --node 0", kHealthy)).code == 0);
}

TEST_CASE("quiet (-q, --quiet) drops the notes on stderr, never stdout, findings or the exit code") {
  const std::string torn = std::string(WALCUT_SOURCE_DIR) + "/samples/torn-tail";
  const std::string corrupt = std::string(WALCUT_SOURCE_DIR) + "/samples/corrupted-segment";
  // A torn tail at the end is a note (exit 0).
  const Run loud = Walcut("dump " + torn);
  REQUIRE(loud.code == 0);
  REQUIRE(loud.err.find("walcut: note: ") != std::string::npos);
  for (const std::string q : {"-q", "--quiet"}) {
    CAPTURE(q);
    const Run quiet = Walcut(fmt::format("dump {} {}", q, torn));
    CHECK(quiet.code == 0);
    CHECK(quiet.out == loud.out);
    CHECK(quiet.err.empty());
  }
  // Damage in the middle is a finding: still on stderr, still exit 1.
  const Run damaged = Walcut("dump " + corrupt);
  const Run damaged_q = Walcut("dump -q " + corrupt);
  REQUIRE(damaged.code == 1);
  CHECK(damaged_q.code == 1);
  CHECK(damaged_q.out == damaged.out);
  CHECK(damaged_q.err.find("walcut: corruption: ") != std::string::npos);
  // Usage errors too.
  const Run usage = Walcut("dump -q --node 7 " + kHealthy);
  CHECK(usage.code == 2);
  CHECK(usage.err.find("--node 7") != std::string::npos);
  // The same output and exit code where there is nothing to drop.
  for (const std::string cmd : {"verify", "stats", "cuts"}) {
    CAPTURE(cmd);
    const Run a = Walcut(fmt::format("{} {}", cmd, corrupt));
    const Run b = Walcut(fmt::format("{} -q {}", cmd, corrupt));
    CHECK(a.code == b.code);
    CHECK(a.out == b.out);
  }
  // Every command takes it.
  std::vector<std::string> paths;
  const auto subcommands = [](const std::string& help) {
    std::vector<std::string> names;
    bool in = false;
    for (const auto& l : Lines(help)) {
      if (l == "Subcommands:")
        in = true;
      else if (in && l.size() > 2 && l[0] == ' ' && l[1] == ' ' && l[2] != ' ')
        names.push_back(l.substr(2, l.find(' ', 2) - 2));
    }
    return names;
  };
  for (const auto& c : subcommands(Walcut("--help").out)) {
    paths.push_back(c);
    for (const auto& s : subcommands(Walcut(c + " --help").out)) paths.push_back(c + " " + s);
  }
  REQUIRE(paths.size() > 15);
  for (const auto& p : paths) {
    if (!subcommands(Walcut(p + " --help").out).empty()) continue;  // cut, snapshot, cluster: only their commands run
    CAPTURE(p);
    CHECK(Walcut(p + " --help").out.find("-q,--quiet") != std::string::npos);
  }
}
