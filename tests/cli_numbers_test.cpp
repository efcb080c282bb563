// Numeric options (cli/numbers.h): every numeric option of every command
// refuses a negative number, a value below or above its documented range and
// a non-number with exit 2 and exactly one line naming the option and its
// range, and takes a value inside the range.
#include <string>
#include <vector>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "cli_support.h"

using walcut::test::Lines;
using walcut::test::Run;
using walcut::test::TempDir;
using walcut::test::Walcut;

namespace {

const std::string kHealthy = std::string(WALCUT_SOURCE_DIR) + "/samples/healthy";
const std::string kMax = "18446744073709551615";  // UINT64_MAX

struct NumberOption {
  std::string command;  // the command path ("snapshot show")
  std::string args;     // its other arguments ("{dir}" is a fresh directory for run)
  std::string option;   // as given on the command line
  std::string name;     // as the error names it
  std::string lo, hi;   // the documented range
  std::string valid;    // a value inside it
};

// Every numeric option of every command (grep AddNumber cli/).
std::vector<NumberOption> Table() {
  const std::string h = kHealthy;
  return {
      {"run", "{dir} --txs 20 --cuts 1", "--nodes", "--nodes", "1", "64", "2"},
      {"run", "{dir} --txs 20 --cuts 1", "--backups", "--backups", "0", "63", "0"},
      {"run", "{dir} --txs 20 --cuts 1", "--partitions", "--partitions", "1", "65536", "8"},
      {"run", "{dir} --cuts 1", "--txs", "--txs", "1", "1000000000", "20"},
      {"run", "{dir} --txs 20 --cuts 1", "--concurrency", "--concurrency", "1", "100000", "4"},
      {"run", "{dir} --txs 20", "--cuts", "--cuts", "0", "1000000", "0"},
      {"run", "{dir} --txs 20", "--cut-every", "--cut-every", "1", "1000000", "5"},
      {"run", "{dir} --txs 20 --cuts 1", "--seed", "--seed", "0", kMax, "7"},
      {"run", "{dir} --txs 20 --cuts 1", "--accounts", "--accounts", "2", "1000000", "10"},
      {"run", "{dir} --txs 20 --cuts 1 --workload cycle", "--ring-keys", "--ring-keys", "4", "1000000", "10"},
      {"run", "{dir} --txs 20 --cuts 1", "--full-snapshot-at", "--full-snapshot-at", "1", "1000000000", "10"},
      {"run", "{dir} --txs 20 --cuts 1", "--full-snapshot-every", "--full-snapshot-every", "1", "1000000000", "10"},
      {"run", "{dir} --txs 20 --cuts 1", "--crashes", "--crashes", "0", "1000", "1"},
      {"dump", h, "--node", "--node", "0", "65535", "1"},
      {"dump", h, "-n", "--limit", "0", "1000000000000", "3"},
      {"dump", h, "--max-bytes", "--max-bytes", "0", "1048576", "8"},
      {"dump", h, "-j", "--jobs", "1", "256", "2"},
      {"dump", h, "--follow-interval", "--follow-interval", "1", "60000", "50"},
      {"verify", h, "-j", "--jobs", "1", "256", "1"},
      {"verify", h, "--follow-interval", "--follow-interval", "1", "60000", "50"},
      {"stats", h, "--jobs", "--jobs", "1", "256", "3"},
      {"cuts", h, "-j", "--jobs", "1", "256", "2"},
      {"cuts", h, "--cut", "--cut", "1", kMax, "1"},
      {"cut show", h + " 1", "-j", "--jobs", "1", "256", "2"},
      {"restore", h + " --dry-run --latest", "-j", "--jobs", "1", "256", "2"},
      {"restore", h + " --dry-run", "--cut", "--cut", "1", kMax, "1"},
      {"restore", h + " --dry-run --latest", "--node", "--node", "0", "65535", "0"},
      {"check", h + " --level files", "-j", "--jobs", "1", "256", "2"},
      {"check", h + " --level cuts", "--cut", "--cut", "1", kMax, "1"},
      {"check", h + "/node-0", "--node", "--node", "0", "65535", "0"},
      {"scan", h + "/node-0 -o {dir}/s.json", "--node", "--node", "0", "65535", "0"},
      {"diff", "{dir}/a {dir}/b", "-n", "--limit", "0", "1000000000", "5"},
      {"diff", "{dir}/a {dir}/b", "--max-bytes", "--max-bytes", "0", "1048576", "5"},
      {"snapshot check", "{dir}", "-j", "--jobs", "1", "256", "2"},
      {"snapshot check", "{dir}", "--max-findings", "--max-findings", "0", "1000000000", "5"},
      {"snapshot show", "{dir}", "--node", "--node", "0", "65535", "1"},
      {"snapshot show", "{dir}", "--max-bytes", "--max-bytes", "0", "1048576", "5"},
      {"snapshot create", "--repo {dir}/repo --full", "--cut", "--cut", "1", kMax, "1"},
      {"snapshot create", "--repo {dir}/repo --full --cut 1", "--zstd-level", "--zstd-level", "1", "19", "3"},
      {"snapshot create", "--repo {dir}/repo --full --cut 1", "-j", "--jobs", "1", "256", "2"},
      {"snapshot expire", "{dir}/repo", "--keep-full", "--keep-full", "1", "1000000", "1"},
  };
}

// The decimal number one above `n` (digits only), for UINT64_MAX too.
std::string PlusOne(std::string n) {
  for (size_t i = n.size(); i-- > 0;) {
    if (n[i] != '9') {
      ++n[i];
      return n;
    }
    n[i] = '0';
  }
  return "1" + n;
}

std::string MinusOne(const std::string& n) { return std::to_string(std::stoull(n) - 1); }

Run WalcutWith(const NumberOption& o, const std::string& value, const std::string& dir) {
  std::string args = o.args;
  for (size_t at; (at = args.find("{dir}")) != std::string::npos;) args.replace(at, 5, dir);
  return Walcut(fmt::format("{} {} {} '{}'", o.command, args, o.option, value));
}

}  // namespace

TEST_CASE("numeric options: out of range, negative or not a number is exit 2 naming the option and its range",
          "[cli][numbers]") {
  TempDir t;
  int n = 0;
  for (const NumberOption& o : Table()) {
    const std::string want =
        fmt::format("walcut: {}: {}: must be {}..{} (see walcut help {})\n", o.command, o.name, o.lo, o.hi, o.command);
    std::vector<std::string> bad = {"-1", PlusOne(o.hi), "x", "12abc", "+5", " 5", "", "1e3", "0x10"};
    if (o.lo != "0") bad.push_back(MinusOne(o.lo));
    for (const std::string& value : bad) {
      CAPTURE(o.command, o.option, value);
      const Run r = WalcutWith(o, value, fmt::format("{}/bad-{}", t.path, n++));
      CHECK(r.code == 2);
      CHECK(r.err == want);
      CHECK(r.out.empty());
    }
  }
}

TEST_CASE("numeric options: a value inside the range is taken", "[cli][numbers]") {
  TempDir t;
  int n = 0;
  for (const NumberOption& o : Table()) {
    for (const std::string& value : {o.valid, o.lo, o.hi}) {
      // The bounds of run's sizes would run a large cluster: only its valid value runs.
      if (o.command == "run" && value != o.valid) continue;
      CAPTURE(o.command, o.option, value);
      const std::string dir = fmt::format("{}/ok-{}", t.path, n++);
      const Run r = WalcutWith(o, value, dir);
      INFO(r.err);
      CHECK(r.err.find("must be") == std::string::npos);
      CHECK(r.err.find("Could not convert") == std::string::npos);
      if (o.command == "run") CHECK(r.code == 0);
    }
  }
}

TEST_CASE("cut show K: a cut id is 1..UINT64_MAX, digits only", "[cli][numbers]") {
  for (const std::string k : {"-1", "0", "18446744073709551616", "x", "1x", "+1"}) {
    CAPTURE(k);
    const Run r = Walcut(fmt::format("cut show {} '{}'", kHealthy, k));
    CHECK(r.code == 2);
    CHECK(r.err == "walcut: K: must be 1..18446744073709551615\n");
  }
  CHECK(Walcut(fmt::format("cut show {} 1", kHealthy)).err.find("must be") == std::string::npos);
}

TEST_CASE("numeric options: --help shows the range", "[cli][numbers]") {
  for (const NumberOption& o : Table()) {
    CAPTURE(o.command, o.option);
    const Run r = Walcut(o.command + " --help");
    CHECK(r.code == 0);
    CHECK(r.out.find(fmt::format("[{}..{}]", o.lo, o.hi)) != std::string::npos);
  }
}
