// One classification of errors across every command that reads WAL: a file
// that could not be read (not a regular file, a symlink loop, a dangling
// symlink, permission) is exit 3 naming the path with the OS's reason;
// damaged bytes are a finding, exit 1. The same broken inputs are given to
// every reading command, which must agree.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "cli_support.h"

using walcut::test::Run;
using walcut::test::Slurp;
using walcut::test::TempDir;

namespace {

namespace fs = std::filesystem;

Run WalcutAs(const std::string& prefix, const std::string& args) {
  TempDir io;
  const std::string cmd =
      fmt::format("{} '{}' {} >'{}/out' 2>'{}/err' </dev/null", prefix, WALCUT_BIN, args, io.path, io.path);
  const int st = std::system(cmd.c_str());
  Run r;
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.out = Slurp(io.path + "/out");
  r.err = Slurp(io.path + "/err");
  return r;
}

// Every command that reads the WAL of cluster C (cut 1 is the one restored
// and shown); `out` is a writable directory for the outputs.
std::vector<std::pair<std::string, std::string>> Commands(const std::string& c, const std::string& out) {
  return {{"verify", "verify " + c},
          {"stats", "stats " + c},
          {"dump", "dump " + c},
          {"scan", fmt::format("scan {}/node-0 --out {}/s.json", c, out)},
          {"cuts", "cuts " + c},
          {"cut show", "cut show " + c + " 1"},
          {"check", "check " + c},
          {"check files", "check --level files " + c},
          {"restore", fmt::format("restore {} --cut 1 --out {}/r", c, out)}};
}

// A 2-node cluster with 6 segments per node; cut 1 ends in node 0's
// segment 3, so segment 2 is one that every command needs.
void MakeRunCluster(const std::string& dir) {
  const Run r = walcut::test::Walcut("run " + dir + " --nodes 2 --txs 400 --cut-every 100 --seed 3 --segment-size 16K");
  INFO(r.err);
  REQUIRE(r.code == 0);
  REQUIRE(fs::exists(dir + "/node-0/wal/0000000000000005.wal"));
}

}  // namespace

TEST_CASE("every reading command classifies an unreadable file as exit 3 naming it, damage as exit 1",
          "[cli][errors]") {
  TempDir t;
  REQUIRE(chmod(t.path.c_str(), 0755) == 0);
  const std::string c = t.path + "/c";
  MakeRunCluster(c);
  const std::string seg = c + "/node-0/wal/0000000000000002.wal.zst";
  REQUIRE(fs::exists(seg));
  const std::string out = t.path + "/out";
  fs::create_directory(out);
  REQUIRE(chmod(out.c_str(), 0777) == 0);
  std::string prefix;  // how the commands are run
  std::string named;   // the path every message must name
  std::string reason;  // the OS's reason, as it must appear
  int want = 3;
  SECTION("a directory named like a segment") {
    fs::remove(seg);
    fs::create_directory(seg);
    named = seg;
    reason = "not a regular file";
  }
  SECTION("a FIFO named like a segment") {
    fs::remove(seg);
    REQUIRE(mkfifo(seg.c_str(), 0644) == 0);
    named = seg;
    reason = "not a regular file";
  }
  SECTION("a symlink to /dev/zero named like a segment") {
    fs::remove(seg);
    fs::create_symlink("/dev/zero", seg);
    named = seg;
    reason = "not a regular file";
  }
  SECTION("a symlink loop named like a segment") {
    fs::remove(seg);
    fs::create_symlink(fs::path(seg).filename(), seg);
    named = seg;
    reason = "Too many levels of symbolic links";
  }
  SECTION("a dangling symlink named like a segment") {
    fs::remove(seg);
    fs::create_symlink("/nonexistent/segment", seg);
    named = seg;
    reason = "No such file or directory";
  }
  SECTION("a segment that the user cannot read (mode 000, run as nobody)") {
    REQUIRE(chmod(seg.c_str(), 0) == 0);
    named = seg;
    reason = "Permission denied";
    prefix = "setpriv --reuid=65534 --regid=65534 --clear-groups";
  }
  SECTION("a WAL directory that the user cannot list (mode 000, run as nobody)") {
    REQUIRE(chmod((c + "/node-0/wal").c_str(), 0) == 0);
    named = c + "/node-0/wal";
    reason = "Permission denied";
    prefix = "setpriv --reuid=65534 --regid=65534 --clear-groups";
  }
  SECTION("damaged bytes: a finding, exit 1") {
    // Flip bytes inside a record of the archived segment 2 by rewriting it
    // plain with the damage (the .wal.zst removed, so the plain one is read).
    std::string bytes = walcut::test::Decompress(seg);
    REQUIRE(bytes.size() > 400);
    for (size_t i = 300; i < 304; ++i) bytes[i] = static_cast<char>(~bytes[i]);
    fs::remove(seg);
    walcut::test::Spit(c + "/node-0/wal/0000000000000002.wal", bytes);
    named = c + "/node-0/wal/0000000000000002.wal";
    want = 1;
  }
  if (!prefix.empty()) {
    (void)std::system(fmt::format("chmod -R a+rX '{}' 2>/dev/null", c).c_str());
    if (named == seg) REQUIRE(chmod(seg.c_str(), 0) == 0);
    if (named == c + "/node-0/wal") REQUIRE(chmod(named.c_str(), 0) == 0);
    if (WalcutAs(prefix, "--version").code != 0) {
      WARN("setpriv cannot run walcut as nobody here: the permission case is skipped");
      return;
    }
  }
  for (const auto& [name, args] : Commands(c, out)) {
    fs::remove_all(out + "/r");
    fs::remove(out + "/s.json");
    const Run r = WalcutAs(prefix, args);
    INFO("walcut " << args << "\nexit " << r.code << "\nstdout:\n" << r.out.substr(0, 2000) << "\nstderr:\n" << r.err);
    if (want == 1 && name == "scan") {
      // scan's product is the summary: the damage is recorded in it and the
      // commands reading the summary report it (exit 1).
      CHECK(r.code == 0);
      REQUIRE(fs::exists(out + "/s.json"));
      CHECK(Slurp(out + "/s.json").find("\"damage\"") != std::string::npos);
      const Run again = WalcutAs(prefix, fmt::format("cuts {}/s.json", out));
      CHECK(again.code == 1);
      continue;
    }
    CHECK(r.code == want);
    const std::string all = r.out + r.err;
    if (want == 1) {
      // The file, or the position in it (segment 2 of node 0).
      CHECK((all.find(fs::path(named).filename().string()) != std::string::npos ||
             all.find("damaged at 2/") != std::string::npos));
    }
    if (want == 3) {
      // "walcut: <path>: <reason>" on stderr (verify puts its report on stdout).
      CHECK(all.find(named + ": ") != std::string::npos);
      CHECK(all.find(reason) != std::string::npos);
      CHECK(all.find("damaged") == std::string::npos);
      CHECK(!fs::exists(out + "/r"));
    }
  }
}

TEST_CASE("segment names: one spelling, look-alikes are notes naming them, never read or skipped silently",
          "[cli][errors]") {
  TempDir t;
  const std::string c = t.path + "/c";
  MakeRunCluster(c);
  const std::string wal = c + "/node-0/wal";
  SECTION("a lower-case twin of an archived segment, holding garbage") {
    walcut::test::Spit(wal + "/000000000000000a.wal.zst", "garbage, not a zstd frame");
    walcut::test::Spit(wal + "/000000000000000A.wal.zst.tmp", "an archiving leftover: ignored");
    for (const char* cmd : {"verify", "stats", "dump", "cuts", "check --level files"}) {
      const Run r = walcut::test::Walcut(std::string(cmd) + " " + c);
      INFO("walcut " << cmd << "\n" << r.out.substr(0, 2000) << r.err);
      CHECK(r.code == 0);
      CHECK((r.out + r.err).find(wal + "/000000000000000a.wal.zst: named like a segment but not one") !=
            std::string::npos);
      CHECK((r.out + r.err).find(".wal.zst.tmp") == std::string::npos);
    }
  }
  SECTION("a 15-digit copy of a segment is named; a name not ending in .wal or .wal.zst is not a look-alike") {
    fs::copy_file(wal + "/0000000000000003.wal.zst", wal + "/0000000000000003.wal.zSt");  // not a look-alike
    fs::copy_file(wal + "/0000000000000003.wal.zst", wal + "/000000000000003.wal.zst");   // 15 digits
    const Run r = walcut::test::Walcut("verify " + c);
    INFO(r.out << r.err);
    CHECK(r.code == 0);
    CHECK(r.out.find("000000000000003.wal.zst: named like a segment but not one") != std::string::npos);
    CHECK(r.out.find("0000000000000003.wal.zSt") == std::string::npos);
  }
}
