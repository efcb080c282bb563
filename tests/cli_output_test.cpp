// A hostile world around the commands: standard output that refuses writes
// (a full disk) makes every command say so and exit 3, whether the refusal
// comes mid-output or at the final flush, while a closed pipe still ends the
// command quietly; a FIFO named like a segment is refused, not waited on.
#include <sys/stat.h>

#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "cli_support.h"

using walcut::test::Run;
using walcut::test::Slurp;
using walcut::test::TempDir;

namespace {

// `walcut ARGS` with standard output sent to `out` (shell text) and
// standard error kept.
Run WalcutTo(const std::string& args, const std::string& out) {
  TempDir io;
  const std::string cmd = fmt::format("timeout 60 '{}' {} 2>'{}/err' </dev/null {}", WALCUT_BIN, args, io.path, out);
  const int st = std::system(cmd.c_str());
  Run r;
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.err = Slurp(io.path + "/err");
  return r;
}

}  // namespace

TEST_CASE("output to a full device: exit 3 and one line naming the error, in every command", "[cli]") {
  const std::string s = std::string(WALCUT_SOURCE_DIR) + "/samples";
  TempDir t;
  const std::vector<std::string> commands = {
      "dump " + s + "/healthy",
      "dump -n 1 " + s + "/healthy",  // a few bytes: refused only at the final flush
      "stats " + s + "/healthy",
      "verify " + s + "/healthy",
      "cuts " + s + "/healthy",
      "cuts --format json " + s + "/pruned",
      "cut show " + s + "/healthy 3",
      "check " + s + "/healthy",
      "check --format junit " + s + "/healthy",
      "snapshot show " + s + "/healthy/snapshots/full-1500",
      "snapshot check " + s + "/healthy/snapshots/full-1500",
      "restore " + s + "/healthy --cut 4 --dry-run",
      "diff " + s + "/healthy/snapshots/full-1500 " + s + "/healthy/snapshots/full-1500",
      "snapshot list " + t.path + "/no-such-repo",
      "--help",
  };
  for (const auto& c : commands) {
    INFO("walcut " << c);
    const auto r = WalcutTo(c, ">/dev/full");
    if (c.find("no-such-repo") != std::string::npos) {
      CHECK(r.code == 2);  // the usage error comes first, on stderr
      continue;
    }
    CHECK(r.code == 3);
    CHECK(r.err.find("walcut: cannot write output: No space left on device") != std::string::npos);
  }
  // A closed pipe: SIGPIPE, no message.
  const auto p = WalcutTo("dump " + s + "/healthy", "| head -c 10 >/dev/null");
  CHECK(p.err.empty());
}

TEST_CASE("a FIFO named like a segment is refused, never waited on", "[cli]") {
  TempDir t;
  const std::string c = t.path + "/c";
  REQUIRE(std::system(fmt::format("cp -r '{}/samples/healthy' '{}'", WALCUT_SOURCE_DIR, c).c_str()) == 0);
  REQUIRE(::mkfifo((c + "/node-0/wal/0000000000000007.wal").c_str(), 0600) == 0);
  for (const std::string cmd : {"verify", "stats", "cuts", "check", "dump"}) {
    INFO("walcut " << cmd);
    // Without O_NONBLOCK the open would wait for a writer forever: timeout
    // ends it with 124.
    const auto r = WalcutTo(fmt::format("{} '{}'", cmd, c), ">/dev/null");
    CHECK(r.code != 0);
    CHECK(r.code != 124);
  }
}

TEST_CASE("every output path inside an input is refused before anything is written", "[cli]") {
  TempDir t;
  const std::string c = t.path + "/c";
  REQUIRE(std::system(fmt::format("cp -r '{}/samples/healthy' '{}'", WALCUT_SOURCE_DIR, c).c_str()) == 0);
  const std::string before = walcut::test::Walcut("dump " + c).out;
  const std::string list = fmt::format("find '{}' | sort > '{}/files-", c, t.path);
  REQUIRE(std::system((list + "before'").c_str()) == 0);
  struct Case {
    std::string args;
    std::string option;
  };
  const std::vector<Case> cases = {
      {"restore " + c + " --cut 4 --out " + c + "/node-0/wal/r", "--out"},
      {"restore " + c + " --cut 4 --out " + c, "--out"},
      {"restore " + c + " --cut 4 --out " + c + "/node-1/../r", "--out"},
      {"scan " + c + "/node-0 --out " + c + "/node-0/s.json", "--out"},
      {"check " + c + " --output " + c + "/report.txt", "--output"},
      {"check " + c + " --state " + c + "/state.json", "--state"},
      {"cut show " + c + " 3 --svg " + c + "/cut.svg", "--svg"},
      {"snapshot create " + c + " --repo " + c + "/repo --full --from full-1500", "--repo"},
  };
  for (const auto& k : cases) {
    INFO("walcut " << k.args);
    const auto r = walcut::test::Walcut(k.args);
    CHECK(r.code == 2);
    CHECK(r.err.find("walcut never writes to its input") != std::string::npos);
    CHECK(r.err.find(k.option) != std::string::npos);
  }
  // Nothing appeared in the input, and its WAL reads as before.
  CHECK(walcut::test::Walcut("dump " + c).out == before);
  REQUIRE(std::system((list + "after'").c_str()) == 0);
  CHECK(Slurp(t.path + "/files-before") == Slurp(t.path + "/files-after"));
  // Beside the input is fine.
  CHECK(walcut::test::Walcut("restore " + c + " --cut 4 --out " + t.path + "/r").code == 0);
}
