// walcut export end to end on the samples: the net change set equals
// `walcut diff` of two restores, JSON lines and CSV parse and agree, the
// filters, the refusals and their exit codes, and -o written atomically.
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_support.h"

namespace fs = std::filesystem;
using nlohmann::json;
using walcut::test::Lines;
using walcut::test::Run;
using walcut::test::Slurp;
using walcut::test::Spit;
using walcut::test::TempDir;
using walcut::test::Walcut;

namespace {

const std::string kSamples = std::string(WALCUT_SOURCE_DIR) + "/samples";
const std::string kHealthy = kSamples + "/healthy";

std::string FirstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

// RFC 4180 rows (no line breaks inside fields: keys and values are escaped).
std::vector<std::vector<std::string>> ParseCsv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& line : Lines(text)) {
    std::vector<std::string> row;
    std::string f;
    bool quoted = false;
    for (size_t i = 0; i < line.size(); ++i) {
      const char c = line[i];
      if (quoted) {
        if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
          f += '"';
          ++i;
        } else if (c == '"') {
          quoted = false;
        } else {
          f += c;
        }
      } else if (c == '"') {
        REQUIRE(f.empty());
        quoted = true;
      } else if (c == ',') {
        row.push_back(f);
        f.clear();
      } else {
        f += c;
      }
    }
    REQUIRE_FALSE(quoted);
    row.push_back(f);
    rows.push_back(row);
  }
  return rows;
}

// (node, key, old, new) with "-" for absent.
using Change = std::tuple<int, std::string, std::string, std::string>;

std::set<Change> NetFromJsonl(const std::string& out) {
  std::set<Change> s;
  for (const auto& line : Lines(out)) {
    const json j = json::parse(line);
    const std::string old = j["old"].is_null() ? "-" : j["old"].get<std::string>();
    const std::string now = j["new"].is_null() ? "-" : j["new"].get<std::string>();
    CHECK(j["change"] == (j["old"].is_null() ? "insert" : j["new"].is_null() ? "delete" : "update"));
    s.emplace(j["node"].get<int>(), j["key"].get<std::string>(), old, now);
  }
  return s;
}

// What `walcut diff --format json -n 0` of restores of cuts a and b lists.
std::set<Change> NetFromDiff(const std::string& dir, uint64_t a, uint64_t b, const std::string& tmp) {
  const std::string ra = fmt::format("{}/r{}", tmp, a), rb = fmt::format("{}/r{}", tmp, b);
  if (!fs::exists(ra)) REQUIRE(Walcut(fmt::format("restore '{}' --cut {} --out '{}' -q", dir, a, ra)).code == 0);
  if (!fs::exists(rb)) REQUIRE(Walcut(fmt::format("restore '{}' --cut {} --out '{}' -q", dir, b, rb)).code == 0);
  const Run d = Walcut(fmt::format("diff '{}' '{}' --format json -n 0", ra, rb));
  REQUIRE(d.code <= 1);
  std::set<Change> s;
  const json doc = json::parse(d.out);  // kept: a range-for over a temporary's member would dangle
  for (const auto& n : doc["nodes"]) {
    const int node = n["node"].get<int>();
    for (const auto& kv : n["only_a"]) s.emplace(node, kv["key"], kv["value"], "-");
    for (const auto& kv : n["only_b"]) s.emplace(node, kv["key"], "-", kv["value"]);
    for (const auto& c : n["changed"]) s.emplace(node, c["key"], c["a"], c["b"]);
  }
  return s;
}

}  // namespace

TEST_CASE("export --net of samples/healthy 2 to 5 equals walcut diff of the two restores", "[cli][export]") {
  TempDir t;
  const Run r = Walcut(fmt::format("export '{}' --from-cut 2 --to-cut 5", kHealthy));
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.err.empty());
  const std::set<Change> net = NetFromJsonl(r.out);
  CHECK(net.size() > 100);
  CHECK(net.size() == Lines(r.out).size());
  CHECK(net == NetFromDiff(kHealthy, 2, 5, t.path));
  // --net is the default; the lines are by node, then key.
  CHECK(Walcut(fmt::format("export '{}' --from-cut 2 --to-cut 5 --net", kHealthy)).out == r.out);
  std::vector<std::pair<int, std::string>> order;
  for (const auto& line : Lines(r.out)) {
    const json j = json::parse(line);
    order.emplace_back(j["node"].get<int>(), j["key"].get<std::string>());
  }
  CHECK(std::is_sorted(order.begin(), order.end()));
  // Every pair of consistent cuts 1..5 of the sample.
  for (uint64_t a = 1; a <= 5; ++a) {
    for (uint64_t b = a + 1; b <= 5; ++b) {
      INFO(fmt::format("{} -> {}", a, b));
      const Run p = Walcut(fmt::format("export '{}' --from-cut {} --to-cut {}", kHealthy, a, b));
      REQUIRE(p.code == 0);
      CHECK(NetFromJsonl(p.out) == NetFromDiff(kHealthy, a, b, t.path));
    }
  }
}

TEST_CASE("export CSV parses and says what the JSON lines say, net and by transaction", "[cli][export]") {
  const Run j = Walcut(fmt::format("export '{}' --from-cut 2 --to-cut 5", kHealthy));
  const Run c = Walcut(fmt::format("export '{}' --from-cut 2 --to-cut 5 --format csv", kHealthy));
  REQUIRE(j.code == 0);
  REQUIRE(c.code == 0);
  auto rows = ParseCsv(c.out);
  REQUIRE(rows.size() == Lines(j.out).size() + 1);
  CHECK(rows[0] == std::vector<std::string>{"node", "key", "change", "old", "new"});
  std::set<Change> from_csv;
  for (size_t i = 1; i < rows.size(); ++i) {
    REQUIRE(rows[i].size() == 5);
    const std::string& kind = rows[i][2];
    from_csv.emplace(std::stoi(rows[i][0]), rows[i][1], kind == "insert" ? "-" : rows[i][3],
                     kind == "delete" ? "-" : rows[i][4]);
  }
  CHECK(from_csv == NetFromJsonl(j.out));

  const Run tj = Walcut(fmt::format("export '{}' --from-cut 2 --to-cut 5 --by-transaction", kHealthy));
  const Run tc = Walcut(fmt::format("export '{}' --from-cut 2 --to-cut 5 --by-transaction --format csv", kHealthy));
  REQUIRE(tj.code == 0);
  REQUIRE(tc.code == 0);
  rows = ParseCsv(tc.out);
  CHECK(rows[0] == std::vector<std::string>{"seq", "tx", "tx_readable", "node", "op", "key", "value"});
  std::vector<std::vector<std::string>> from_json;
  uint64_t seq = 0;
  for (const auto& line : Lines(tj.out)) {
    const json t = json::parse(line);
    CHECK(t["seq"] == ++seq);
    CHECK(t["tx"].is_string());
    CHECK(t["tx_readable"].is_string());
    CHECK(!t["nodes"].empty());
    for (const auto& w : t["writes"]) {
      CHECK((w["op"] == "put") == w.contains("value"));
      from_json.push_back({std::to_string(seq), t["tx"], t["tx_readable"], std::to_string(w["node"].get<int>()),
                           w["op"], w["key"], w.value("value", "")});
    }
  }
  CHECK(seq > 50);
  CHECK(std::vector<std::vector<std::string>>(rows.begin() + 1, rows.end()) == from_json);
}

TEST_CASE("export --by-transaction applied to a restore of A gives the restore of B", "[cli][export]") {
  // The by-transaction lines replayed over the diff's A side: every key of
  // the net change set ends at its B value.
  TempDir t;
  const Run r = Walcut(fmt::format("export '{}' --from-cut 1 --to-cut 4 --by-transaction", kHealthy));
  REQUIRE(r.code == 0);
  std::map<std::pair<int, std::string>, std::string> state;  // the keys written, "-": absent
  const std::set<Change> diff = NetFromDiff(kHealthy, 1, 4, t.path);
  std::map<std::pair<int, std::string>, std::string> old;
  for (const auto& [n, k, a, b] : diff) old[{n, k}] = a;
  for (const auto& line : Lines(r.out)) {
    const json tx = json::parse(line);
    for (const auto& w : tx["writes"]) {
      state[{w["node"].get<int>(), w["key"].get<std::string>()}] =
          w["op"] == "put" ? w["value"].get<std::string>() : "-";
    }
  }
  std::set<Change> applied;
  for (const auto& [nk, v] : state) {
    // A key written back to its old value is no change; the diff does not know
    // its old value then, and neither does this check.
    auto it = old.find(nk);
    if (it != old.end() && it->second != v) applied.emplace(nk.first, nk.second, it->second, v);
  }
  std::set<Change> want;
  for (const auto& c : diff) want.insert(c);
  CHECK(applied == want);
}

TEST_CASE("export --keys and --node restrict the output", "[cli][export]") {
  const Run all = Walcut(fmt::format("export '{}' --from-cut 2 --to-cut 5", kHealthy));
  const Run r =
      Walcut(fmt::format("export '{}' --from-cut 2 --to-cut 5 --keys acct/0001 --keys acct/0002 --node 1", kHealthy));
  REQUIRE(r.code == 0);
  std::set<Change> want;
  for (const auto& c : NetFromJsonl(all.out)) {
    const auto& [n, k, a, b] = c;
    if (n == 1 && (k.starts_with("acct/0001") || k.starts_with("acct/0002"))) want.insert(c);
  }
  CHECK(!want.empty());
  CHECK(NetFromJsonl(r.out) == want);
  const Run t =
      Walcut(fmt::format("export '{}' --from-cut 2 --to-cut 5 --keys acct/0001 --node 2 --by-transaction", kHealthy));
  REQUIRE(t.code == 0);
  REQUIRE(!t.out.empty());
  for (const auto& line : Lines(t.out)) {
    const json j = json::parse(line);
    CHECK(j["nodes"] == json({2}));
    for (const auto& w : j["writes"]) {
      CHECK(w["node"] == 2);
      CHECK(w["key"].get<std::string>().starts_with("acct/0001"));
    }
  }
}

TEST_CASE("export refusals and their exit codes: 1 a cut not consistent, 2 usage, 3 output", "[cli][export]") {
  TempDir t;
  auto run = [](const std::string& args, int code) {
    const Run r = Walcut(args);
    INFO(args << "\n" << r.out << r.err);
    CHECK(r.code == code);
    CHECK(r.out.empty());
    return FirstLine(r.err);
  };
  // crash-during-cut: its inconsistent cut, named.
  const json cuts = json::parse(Walcut(fmt::format("cuts '{}/crash-during-cut' --format json", kSamples)).out);
  uint64_t bad = 0, good = 0;
  for (const auto& c : cuts["cuts"]) {
    if (c["status"] != "consistent" && bad == 0) bad = c["cut"].get<uint64_t>();
    if (c["status"] == "consistent") good = c["cut"].get<uint64_t>();
  }
  REQUIRE(bad > 0);
  REQUIRE(good > 0);
  std::string e = run(fmt::format("export '{}/crash-during-cut' --from-cut 0 --to-cut {}", kSamples, bad), 1);
  CHECK(e.find(fmt::format("--to-cut {}: cut {} is", bad, bad)) != std::string::npos);
  if (bad < good) {
    e = run(fmt::format("export '{}/crash-during-cut' --from-cut {} --to-cut {}", kSamples, bad, good), 1);
    CHECK(e.find(fmt::format("--from-cut {}: cut {} is", bad, bad)) != std::string::npos);
  }
  CHECK(run(fmt::format("export '{}' --from-cut 5 --to-cut 2", kHealthy), 2) ==
        "walcut: --from-cut 5 is after --to-cut 2: the change set runs from the earlier cut to the later one");
  CHECK(run(fmt::format("export '{}' --from-cut 1 --to-cut 2 --format xml", kHealthy), 2).find("--format") !=
        std::string::npos);
  CHECK(run(fmt::format("export '{}/missing' --from-cut 1 --to-cut 2", t.path), 2).find("missing") !=
        std::string::npos);
  CHECK(run(fmt::format("export '{}' --from-cut 1 --to-cut 99", kHealthy), 2).find("cut 99") != std::string::npos);
  CHECK(run(fmt::format("export '{}' --from-cut 1 --to-cut 2 --node 7", kHealthy), 2).find("--node 7") !=
        std::string::npos);
  CHECK(run(fmt::format("export '{}' --from-cut 1 --to-cut 2 --net --by-transaction", kHealthy), 2) ==
        "walcut: give --net or --by-transaction, not both");
  CHECK(run(fmt::format("export '{}' --from-cut 1 --to-cut 2 --keys ''", kHealthy), 2).find("--keys") !=
        std::string::npos);
  // pruned: genesis is no longer in the WAL; the node is named.
  e = run(fmt::format("export '{}/pruned' --from-cut 0 --to-cut 6", kSamples), 1);
  CHECK(e.find("node ") != std::string::npos);
  CHECK(e.find("segments before it were removed") != std::string::npos);
  // --repo: a directory or file://PATH; S3 is refused, another scheme is
  // never taken for a path (nothing is created in the working directory).
  CHECK(run(fmt::format("export --repo 's3://bkt/r' --from-cut 1 --to-cut 2"), 2) ==
        "walcut: export --repo s3://bkt/r: export reads a repository in a directory, not in S3 (restore --repo reads "
        "S3; copy the artifacts into a directory to export from them)");
  CHECK(run(fmt::format("export --repo 'gs://bkt/r' --from-cut 1 --to-cut 2"), 2).find("gs://") != std::string::npos);
  CHECK_FALSE(fs::exists("gs:"));
  CHECK_FALSE(fs::exists("s3:"));
  CHECK(run(fmt::format("export --repo 'file://{}/none' --from-cut 1 --to-cut 2", t.path), 2).find(t.path + "/none") !=
        std::string::npos);
  // A == B: nothing, exit 0.
  const Run same = Walcut(fmt::format("export '{}' --from-cut 3 --to-cut 3 --by-transaction", kHealthy));
  CHECK(same.code == 0);
  CHECK(same.out.empty());
  // Standard output that cannot be written: exit 3.
  const std::string cmd =
      fmt::format("'{}' export '{}' --from-cut 1 --to-cut 5 >/dev/full 2>'{}/err'", WALCUT_BIN, kHealthy, t.path);
  const int st = std::system(cmd.c_str());
  CHECK(WEXITSTATUS(st) == 3);
  CHECK(Slurp(t.path + "/err").find("cannot write output") != std::string::npos);
}

TEST_CASE("export -o FILE: the same lines, written whole or not at all", "[cli][export]") {
  TempDir t;
  const std::string file = t.path + "/changes.jsonl";
  Spit(file, "keep\n");
  const Run out = Walcut(fmt::format("export '{}' --from-cut 2 --to-cut 5", kHealthy));
  // A refusal leaves FILE as it was, and no temporary file beside it.
  Run r = Walcut(fmt::format("export '{}' --from-cut 5 --to-cut 2 -o '{}'", kHealthy, file));
  CHECK(r.code == 2);
  r = Walcut(fmt::format("export '{}/pruned' --from-cut 0 --to-cut 6 -o '{}'", kSamples, file));
  CHECK(r.code == 1);
  CHECK(Slurp(file) == "keep\n");
  r = Walcut(fmt::format("export '{}' --from-cut 2 --to-cut 5 -o '{}'", kHealthy, file));
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.empty());
  CHECK(Slurp(file) == out.out);
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(t.path)) ++entries;
  CHECK(entries == 1);
  // A directory that does not exist: exit 3, nothing created.
  r = Walcut(fmt::format("export '{}' --from-cut 2 --to-cut 5 -o '{}/no/such/file'", kHealthy, t.path));
  CHECK(r.code == 3);
  CHECK_FALSE(fs::exists(t.path + "/no"));
  // -o inside the cluster directory: refused, walcut never writes into its input.
  r = Walcut(fmt::format("export '{}' --from-cut 2 --to-cut 5 -o '{}/x.jsonl'", kHealthy, kHealthy));
  CHECK(r.code == 2);
  CHECK_FALSE(fs::exists(kHealthy + "/x.jsonl"));
}
